//! The bundle as files in memory, and turning those files into YAML documents.
//!
//! Rendering must be pure, so the only file I/O of the whole render module is
//! [`BundleFiles::load_dir`]; the controller fills the same map from an unpacked image or from
//! `olm.bundle.object` properties, and everything downstream works on bytes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use serde::Deserialize;
use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;
use serde_saphyr::options::DuplicateKeyPolicy;

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
    /// Keys that appear more than once in one mapping, as paths (`spec.replicas`), in document
    /// order: the last value of each is in `value`, as OLM's YAML reading keeps it.
    pub duplicate_keys: Vec<String>,
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
                let (value, duplicate_keys) = parse_chunk(file, start_line, chunk)?;
                push_document(&mut documents, file, start_line, value, duplicate_keys);
            }
        }
        None => {
            // A document marker with content on the same line: let the YAML parser split.
            let (values, scans) = match serde_saphyr::from_str_multiple::<Value, Vec<Value>>(text) {
                Ok(values) => (values, Vec::new()),
                Err(strict) => {
                    let values = serde_saphyr::from_str_multiple_with_options::<Value, Vec<Value>>(
                        text,
                        last_wins(),
                    )
                    .map_err(|_| RenderError::MalformedYaml {
                        file: file.to_owned(),
                        message: strict.to_string(),
                    })?;
                    let scans: Vec<DuplicateKeys> =
                        serde_saphyr::from_str_multiple_with_options(text, pass_through())
                            .unwrap_or_default();
                    (values, scans)
                }
            };
            let mut scans = scans.into_iter().map(|scan| scan.0);
            for value in values {
                let duplicate_keys = scans.next().unwrap_or_default();
                push_document(&mut documents, file, 1, value, duplicate_keys);
            }
        }
    }
    Ok(documents)
}

fn push_document(
    documents: &mut Vec<Document>,
    file: &str,
    line: usize,
    value: Value,
    duplicate_keys: Vec<String>,
) {
    if value.is_null() {
        return;
    }
    let index = documents.len() + 1;
    documents.push(Document {
        file: file.to_owned(),
        index,
        line,
        value,
        duplicate_keys,
    });
}

/// Parses one document. A mapping with a repeated key parses as OLM reads it, the last value
/// winning, and the repeated keys are returned for the render's warnings (issue 33 item 6).
fn parse_chunk(
    file: &str,
    start_line: usize,
    chunk: &str,
) -> Result<(Value, Vec<String>), RenderError> {
    if let Ok(value) = serde_saphyr::from_str::<Value>(chunk) {
        return Ok((value, Vec::new()));
    }
    if let Ok(value) = serde_saphyr::from_str_with_options::<Value>(chunk, last_wins()) {
        let duplicates =
            serde_saphyr::from_str_with_options::<DuplicateKeys>(chunk, pass_through())
                .map(|scan| scan.0)
                .unwrap_or_default();
        return Ok((value, duplicates));
    }
    // Parse again behind blank lines so the parser's line numbers are the file's.
    let padded = format!("{}{chunk}", "\n".repeat(start_line.saturating_sub(1)));
    let message = match serde_saphyr::from_str::<Value>(&padded) {
        Err(err) => err.to_string(),
        Ok(_) => format!("document starting at line {start_line} does not parse"),
    };
    Err(RenderError::MalformedYaml {
        file: file.to_owned(),
        message,
    })
}

/// The parser's options with a repeated mapping key keeping its last value.
fn last_wins() -> serde_saphyr::Options {
    serde_saphyr::options! { duplicate_keys: DuplicateKeyPolicy::LastWins }
}

/// The parser's options handing every repeated key to the visitor ([`DuplicateKeys`]).
fn pass_through() -> serde_saphyr::Options {
    serde_saphyr::options! { duplicate_keys: DuplicateKeyPolicy::PassThrough }
}

/// The paths of the keys a document repeats within one mapping, found by walking it.
#[derive(Debug, Default)]
struct DuplicateKeys(Vec<String>);

impl<'de> Deserialize<'de> for DuplicateKeys {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let mut found = Vec::new();
        deserializer.deserialize_any(Walk {
            path: String::new(),
            found: &mut found,
        })?;
        Ok(Self(found))
    }
}

/// One node of the walk: its path, and where repeated keys are recorded.
struct Walk<'f> {
    path: String,
    found: &'f mut Vec<String>,
}

impl Walk<'_> {
    fn child(&mut self, segment: &str) -> Walk<'_> {
        let path = if self.path.is_empty() || segment.starts_with('[') {
            format!("{}{segment}", self.path)
        } else {
            format!("{}.{segment}", self.path)
        };
        Walk {
            path,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any YAML value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_i128<E>(self, _: i128) -> Result<(), E> {
        Ok(())
    }
    fn visit_u128<E>(self, _: u128) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
    fn visit_bytes<E>(self, _: &[u8]) -> Result<(), E> {
        Ok(())
    }
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut index = 0;
        while seq
            .next_element_seed(self.child(&format!("[{index}]")))?
            .is_some()
        {
            index += 1;
        }
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(mut self, mut map: A) -> Result<(), A::Error> {
        let mut seen = std::collections::BTreeSet::new();
        while let Some(key) = map.next_key::<Value>()? {
            let key = match key {
                Value::String(key) => key,
                other => other.to_string(),
            };
            let walk = self.child(&key);
            if !seen.insert(key) && !walk.found.contains(&walk.path) {
                walk.found.push(walk.path.clone());
            }
            map.next_value_seed(walk)?;
        }
        Ok(())
    }
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

    /// OLM reads a repeated key's last value (issue 33 item 6); POM does too, and says so.
    #[test]
    fn a_repeated_key_keeps_its_last_value_and_is_named() {
        let cases: &[(&str, &[&str])] = &[
            ("a: 1\nb: 2\n", &[]),
            ("a: 1\na: 2\n", &["a"]),
            (
                "spec:\n  x: 1\n  replicas: 1\n  replicas: 3\n",
                &["spec.replicas"],
            ),
            (
                "l:\n- name: a\n  name: b\nl2: 0\nl2: 1\n",
                &["l[0].name", "l2"],
            ),
        ];
        for (text, expected) in cases {
            let docs = parse_documents("f.yaml", text.as_bytes()).unwrap();
            assert_eq!(docs[0].duplicate_keys, *expected, "{text}");
        }
        let docs = parse_documents("f.yaml", b"a: 1\na: 2\n").unwrap();
        assert_eq!(docs[0].value["a"], 2);
        let docs = parse_documents("f.yaml", b"--- {a: 1, a: 2}\n--- {b: 1}\n").unwrap();
        assert_eq!(docs[0].value["a"], 2);
        assert_eq!(docs[0].duplicate_keys, ["a"]);
        assert!(docs[1].duplicate_keys.is_empty());
    }

    #[test]
    fn non_utf8_is_refused() {
        assert!(matches!(
            parse_documents("x", &[0xff, 0xfe]),
            Err(RenderError::NotText { .. })
        ));
    }
}
