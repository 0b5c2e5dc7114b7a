//! File-based catalogs (FBC): the model ([`model`]) and the parser ([`parse`]).

pub mod model;
pub mod parse;

pub use model::*;
