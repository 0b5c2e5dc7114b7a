//! The bundle as files in memory, and turning those files into YAML documents.
//!
//! Rendering must be pure, so the only file I/O of the whole render module is
//! [`BundleFiles::load_dir`]; the controller fills the same map from an unpacked image or from
//! `olm.bundle.object` properties, and everything downstream works on bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde_json::Value;

use super::error::RenderError;

/// Where `from_objects` puts catalog-embedded manifests, so they look like a bundle's `manifests/`.
const OBJECTS_DIR: &str = "manifests/";

/// A bundle's files, keyed by their path relative to the bundle root with `/` separators
/// (`manifests/foo.clusterserviceversion.yaml`, `metadata/annotations.yaml`).
///
/// A BTreeMap so every walk over the files, and so every rendering, is in one stable order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BundleFiles {
    /// Shared, not copied: the manager renders a cached bundle image on every reconcile.
    pub files: Arc<BTreeMap<String, Vec<u8>>>,
}

impl BundleFiles {
    /// Wraps files the caller already has (for example extracted from a bundle image, shared
    /// with the image cache).
    pub fn new(files: impl Into<Arc<BTreeMap<String, Vec<u8>>>>) -> Self {
        Self {
            files: files.into(),
        }
    }

    /// Reads every regular file under `dir` (recursively; symlinks are followed) into memory.
    ///
    /// This is the only I/O of rendering: `pomctl render` and tests use it, the controller does not.
    pub fn load_dir(dir: &Path) -> Result<Self, RenderError> {
        let mut files = BTreeMap::new();
        let metadata = std::fs::metadata(dir).map_err(|source| RenderError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        if !metadata.is_dir() {
            return Err(RenderError::Read {
                path: dir.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::InvalidInput,
                    "not a directory (pass the bundle folder that holds manifests/ and metadata/)",
                ),
            });
        }
        load_into(dir, "", &mut files)?;
        Ok(Self::new(files))
    }

    /// Builds a bundle from whole manifests given as text (the decoded `olm.bundle.object`
    /// properties of an FBC bundle). Each lands at `manifests/olm.bundle.object-<n>.yaml`, n
    /// counting from 0 in the given order, so error messages point at the property index.
    pub fn from_objects(manifests: Vec<String>) -> Self {
        let files = manifests
            .into_iter()
            .enumerate()
            .map(|(index, text)| (object_file_name(index), text.into_bytes()))
            .collect::<BTreeMap<_, _>>();
        Self::new(files)
    }

    /// The file at `path`, if present.
    pub fn get(&self, path: &str) -> Option<&[u8]> {
        self.files.get(path).map(Vec::as_slice)
    }
}

/// The path `from_objects` gives the manifest at `index`.
pub fn object_file_name(index: usize) -> String {
    format!("{OBJECTS_DIR}olm.bundle.object-{index}.yaml")
}

fn load_into(
    dir: &Path,
    prefix: &str,
    files: &mut BTreeMap<String, Vec<u8>>,
) -> Result<(), RenderError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RenderError::Read {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| RenderError::Read {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let relative = format!("{prefix}{name}");
        let metadata = std::fs::metadata(&path).map_err(|source| RenderError::Read {
            path: path.clone(),
            source,
        })?;
        if metadata.is_dir() {
            load_into(&path, &format!("{relative}/"), files)?;
        } else if metadata.is_file() {
            let bytes = std::fs::read(&path).map_err(|source| RenderError::Read {
                path: path.clone(),
                source,
            })?;
            files.insert(relative, bytes);
        }
    }
    Ok(())
}

/// One YAML document of a manifest file, parsed.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file's path in the bundle.
    pub file: String,
    /// 1-based position of the document in its file.
    pub index: usize,
    /// 1-based line where the document starts (best effort; 1 when unknown).
    pub line: usize,
    pub value: Value,
}

/// Parses a file into its non-empty YAML documents (JSON is YAML too).
pub fn parse_documents(file: &str, bytes: &[u8]) -> Result<Vec<Document>, RenderError> {
    let text = std::str::from_utf8(bytes).map_err(|_| RenderError::NotText {
        file: file.to_owned(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut documents = Vec::new();
    match split_documents(text) {
        Some(chunks) => {
            for (start_line, chunk) in chunks {
                if chunk.trim().is_empty() {
                    continue;
                }
                let value = parse_chunk(file, start_line, chunk)?;
                push_document(&mut documents, file, start_line, value);
            }
        }
        None => {
            // A document marker with content on the same line: let the YAML parser split.
            let values: Vec<Value> = serde_saphyr::from_str_multiple(text).map_err(|err| {
                RenderError::MalformedYaml {
                    file: file.to_owned(),
                    message: err.to_string(),
                }
            })?;
            for value in values {
                push_document(&mut documents, file, 1, value);
            }
        }
    }
    Ok(documents)
}

fn push_document(documents: &mut Vec<Document>, file: &str, line: usize, value: Value) {
    if value.is_null() {
        return;
    }
    let index = documents.len() + 1;
    documents.push(Document {
        file: file.to_owned(),
        index,
        line,
        value,
    });
}

fn parse_chunk(file: &str, start_line: usize, chunk: &str) -> Result<Value, RenderError> {
    serde_saphyr::from_str::<Value>(chunk).map_err(|_| {
        // Parse again behind blank lines so the parser's line numbers are the file's.
        let padded = format!("{}{chunk}", "\n".repeat(start_line.saturating_sub(1)));
        let message = match serde_saphyr::from_str::<Value>(&padded) {
            Err(err) => err.to_string(),
            Ok(_) => format!("document starting at line {start_line} does not parse"),
        };
        RenderError::MalformedYaml {
            file: file.to_owned(),
            message,
        }
    })
}

/// Splits YAML text at document markers (`---` and `...` at column 0), returning each chunk with
/// the 1-based line it starts on. A marker can never occur at column 0 inside a scalar of a
/// valid document, so this split is exact for valid YAML. Returns `None` when a `---` line
/// carries content (`--- {a: 1}`), which the caller leaves to the YAML parser.
fn split_documents(text: &str) -> Option<Vec<(usize, &str)>> {
    let mut chunks = Vec::new();
    let mut chunk_start_byte = 0;
    let mut chunk_start_line = 1;
    let mut offset = 0;
    for (line_index, line) in text.split_inclusive('\n').enumerate() {
        let content = line.trim_end_matches(['\n', '\r']);
        let marker = ["---", "..."].iter().find(|m| content.starts_with(**m));
        if let Some(marker) = marker {
            let rest = &content[marker.len()..];
            let is_marker = rest.is_empty() || rest.starts_with([' ', '\t']);
            if is_marker {
                let trailing = rest.trim();
                if !trailing.is_empty() && !trailing.starts_with('#') {
                    return None;
                }
                chunks.push((chunk_start_line, &text[chunk_start_byte..offset]));
                chunk_start_byte = offset + line.len();
                chunk_start_line = line_index + 2;
            }
        }
        offset += line.len();
    }
    chunks.push((chunk_start_line, &text[chunk_start_byte..]));
    Some(chunks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_documents_and_keeps_line_numbers() {
        let text = "---\na: 1\n---\n\n---\nb: 2\n...\n";
        let docs = parse_documents("f.yaml", text.as_bytes()).unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].line, 2);
        assert_eq!(docs[1].line, 6);
        assert_eq!(docs[1].value["b"], 2);
    }

    #[test]
    fn marker_with_inline_content_falls_back_to_the_parser() {
        let docs = parse_documents("f.yaml", b"--- {a: 1}\n--- {b: 2}\n").unwrap();
        assert_eq!(docs.len(), 2);
    }

    #[test]
    fn malformed_yaml_names_the_file() {
        let err = parse_documents("manifests/x.yaml", b"a: 1\n---\nb: [\n").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("manifests/x.yaml"), "{message}");
    }

    #[test]
    fn non_utf8_is_refused() {
        assert!(matches!(
            parse_documents("x", &[0xff, 0xfe]),
            Err(RenderError::NotText { .. })
        ));
    }
}
