//! File-based catalogs (FBC): the model ([`model`]) and the parser ([`parse`]).
//!
//! The parser is split by job: [`decode`](self) turns bytes into blobs (JSON stream or YAML
//! documents), the wire types declare the schemas with case-insensitive keys, properties and
//! `olm.maxOpenShiftVersion` are decoded on their own, the assembler joins blobs by package and
//! the validator checks channel graphs.

mod assemble;
mod blob;
mod decode;
mod error;
mod fields;
mod ignore;
mod index;
mod max_ocp;
pub mod model;
mod parallel;
pub mod parse;
mod properties;
mod source;
mod validate;
pub(crate) mod yaml_events;

pub use decode::MAX_CATALOG_ALIAS_EVENTS;
#[doc(hidden)]
pub use decode::{FastPathTally, yaml_fast_path_differential};
pub use index::{ContentSource, Fingerprint, PackageIndex, ScopedCatalog};
pub use model::*;
pub use parse::{
    DuplicateDetail, FbcError, InvalidSkipRangeDetail, load_path, load_path_scoped,
    parse_documents, parse_documents_scoped,
};
#[doc(hidden)]
pub use yaml_events::Declined;
