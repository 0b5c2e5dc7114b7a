//! File-based catalogs (FBC): the model ([`model`]) and the parser ([`parse`]).
//!
//! The parser is split by job: [`decode`](self) turns bytes into blobs (JSON stream or YAML
//! documents), the wire types declare the schemas with case-insensitive keys, properties and
//! `olm.maxOpenShiftVersion` are decoded on their own, the assembler joins blobs by package and
//! the validator checks channel graphs.

// `FbcError` carries every name an operator needs to fix a catalog (file, line, package,
// channel, entry, value), which makes it larger than clippy's default for `Result` errors. It is
// returned at most once per catalog load, so size on the error path costs nothing measurable,
// and boxing would only make the variants clumsier to match.
#[allow(clippy::result_large_err)]
mod assemble;
mod blob;
#[allow(clippy::result_large_err)]
mod decode;
mod error;
mod fields;
mod ignore;
mod max_ocp;
pub mod model;
#[allow(clippy::result_large_err)]
pub mod parse;
#[allow(clippy::result_large_err)]
mod properties;
#[allow(clippy::result_large_err)]
mod source;
#[allow(clippy::result_large_err)]
mod validate;

pub use model::*;
pub use parse::{FbcError, load_path, parse_documents};
