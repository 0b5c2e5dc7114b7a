//! The catalog parser's entry points: from disk ([`load_path`]) or from memory
//! ([`parse_documents`]).
//!
//! Both accept every form real catalogs come in: JSON streams (concatenated objects, JSON
//! Lines), YAML multi-document files, and folders split into any number of such files. The
//! result is the indexed [`Catalog`] every resolution reads, or the first [`FbcError`] found
//! (files in sorted order, blobs in file order), which names the file, the line when known and
//! the field, and says what to change.

use std::path::Path;

use super::assemble::Assembler;
use super::decode::decode_document;
pub use super::error::FbcError;
use super::model::Catalog;
use super::source;

/// Loads a catalog from a file or a folder (walked recursively, sorted, `.json`/`.yaml`/`.yml`
/// only, `.indexignore` honoured). Blob origins carry file paths as `path` names them.
pub fn load_path(path: &Path) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    for file in source::catalog_files(path)? {
        let bytes = source::read(&file)?;
        decode_document(&file.label, &bytes, &mut assembler)?;
    }
    assembler.finish()
}

/// Parses catalog content that is not on disk (a ConfigMap key, files pulled from an image):
/// `(label, bytes)` pairs, where the label names the content in errors and origins (for example
/// `configmap/ns/name:catalog.json`). Each document may be a JSON stream or YAML.
pub fn parse_documents(
    docs: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    for (label, bytes) in docs {
        decode_document(&label, &bytes, &mut assembler)?;
    }
    assembler.finish()
}
