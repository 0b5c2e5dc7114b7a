//! Where a bundle keeps its manifests and metadata, and which format it is.
//!
//! `metadata/annotations.yaml` is authoritative when present (operator-registry
//! `docs/design/operator-bundle.md`); without it, a bundle with a ClusterServiceVersion is
//! registry+v1 (this covers `olm.bundle.object` content from a catalog) and anything else is
//! plain+v0.

use serde_json::Value;

use super::BundleFormat;
use super::bundle::{BundleFiles, parse_documents};
use super::error::RenderError;
use super::objects::{Manifest, scalar_to_string};

/// The annotations file every image bundle carries.
pub const ANNOTATIONS_FILE: &str = "metadata/annotations.yaml";

const KEY_PREFIX: &str = "operators.operatorframework.io.bundle.";
const DEFAULT_MANIFESTS_DIR: &str = "manifests/";
const DEFAULT_METADATA_DIR: &str = "metadata/";

/// The layout of one bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    /// `mediatype.v1` from the annotations, if any.
    pub mediatype: Option<String>,
    /// Folder of the manifests, relative, ending in `/`; empty for a bare folder of manifests.
    pub manifests_dir: String,
    /// Folder of the metadata, relative, ending in `/`.
    pub metadata_dir: String,
    /// `package.v1` from the annotations, if any.
    pub package: Option<String>,
}

impl Layout {
    /// Reads the annotations (if any) and decides where the manifests are.
    pub fn detect(files: &BundleFiles) -> Result<Self, RenderError> {
        let mut layout = Self {
            mediatype: None,
            manifests_dir: DEFAULT_MANIFESTS_DIR.to_owned(),
            metadata_dir: DEFAULT_METADATA_DIR.to_owned(),
            package: None,
        };
        if let Some(bytes) = files.get(ANNOTATIONS_FILE) {
            let annotations = read_annotations(bytes)?;
            let get = |key: &str| {
                annotations
                    .get(&format!("{KEY_PREFIX}{key}"))
                    .and_then(scalar_to_string)
                    .filter(|s| !s.is_empty())
            };
            layout.mediatype = get("mediatype.v1");
            layout.package = get("package.v1");
            if let Some(dir) = get("manifests.v1") {
                layout.manifests_dir = normalize_dir(&dir);
            }
            if let Some(dir) = get("metadata.v1") {
                layout.metadata_dir = normalize_dir(&dir);
            }
        } else if !files
            .files
            .keys()
            .any(|path| path.starts_with(DEFAULT_MANIFESTS_DIR))
        {
            // A bare folder of manifests (plain+v0 without the manifests/ level).
            layout.manifests_dir = String::new();
        }
        Ok(layout)
    }

    /// The manifest folder as shown to people.
    pub fn manifests_dir_display(&self) -> String {
        if self.manifests_dir.is_empty() {
            "the bundle folder".to_owned()
        } else {
            self.manifests_dir.clone()
        }
    }

    /// The manifest files, in path order. Sub-folders are refused, as OLM does; in a bare folder
    /// only `.yaml`, `.yml` and `.json` files count and sub-folders are ignored.
    pub fn manifest_files<'a>(
        &self,
        files: &'a BundleFiles,
    ) -> Result<Vec<(&'a str, &'a [u8])>, RenderError> {
        let mut out = Vec::new();
        for (path, bytes) in files.files.iter() {
            let Some(relative) = path.strip_prefix(&self.manifests_dir) else {
                continue;
            };
            if self.manifests_dir.is_empty() {
                let is_manifest = [".yaml", ".yml", ".json"]
                    .iter()
                    .any(|ext| relative.ends_with(ext));
                if relative.contains('/') || !is_manifest {
                    continue;
                }
            } else if relative.contains('/') {
                return Err(RenderError::ManifestSubdirectory {
                    path: path.clone(),
                    manifests_dir: self.manifests_dir.clone(),
                });
            }
            out.push((path.as_str(), bytes.as_slice()));
        }
        Ok(out)
    }

    /// `metadata/properties.yaml`, if the bundle has one.
    pub fn properties_file<'a>(&self, files: &'a BundleFiles) -> Option<(&'a str, &'a [u8])> {
        let path = format!("{}properties.yaml", self.metadata_dir);
        files
            .files
            .get_key_value(&path)
            .map(|(k, v)| (k.as_str(), v.as_slice()))
    }

    /// The bundle's format: the annotated media type, else registry+v1 iff a CSV is present.
    pub fn format(&self, manifests: &[Manifest]) -> Result<BundleFormat, RenderError> {
        match self.mediatype.as_deref() {
            Some("registry+v1") => Ok(BundleFormat::RegistryV1),
            Some("plain+v0") => Ok(BundleFormat::PlainV0),
            Some(other) => Err(RenderError::UnsupportedMediaType {
                mediatype: other.to_owned(),
            }),
            None if manifests
                .iter()
                .any(|m| m.is(crate::csv::CSV_GROUP, crate::csv::CSV_KIND)) =>
            {
                Ok(BundleFormat::RegistryV1)
            }
            None => Ok(BundleFormat::PlainV0),
        }
    }
}

fn read_annotations(bytes: &[u8]) -> Result<serde_json::Map<String, Value>, RenderError> {
    let malformed = |problem: &str| RenderError::MalformedAnnotations {
        file: ANNOTATIONS_FILE.to_owned(),
        problem: problem.to_owned(),
    };
    let docs = parse_documents(ANNOTATIONS_FILE, bytes)?;
    let Some(doc) = docs.into_iter().next() else {
        return Err(malformed("the file is empty"));
    };
    match doc.value.get("annotations") {
        Some(Value::Object(map)) => Ok(map.clone()),
        Some(_) => Err(malformed("`annotations` is not a mapping")),
        None => Err(malformed("the file has no top-level `annotations` mapping")),
    }
}

/// `./manifests`, `/manifests/` and `manifests` all become `manifests/`.
fn normalize_dir(dir: &str) -> String {
    let trimmed = dir.trim().trim_start_matches("./").trim_matches('/');
    if trimmed.is_empty() {
        String::new()
    } else {
        format!("{trimmed}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn files(entries: &[(&str, &str)]) -> BundleFiles {
        BundleFiles::new(
            entries
                .iter()
                .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
                .collect::<BTreeMap<_, _>>(),
        )
    }

    #[test]
    fn annotations_set_the_folders() {
        let bundle = files(&[(
            ANNOTATIONS_FILE,
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: ./deploy\n  operators.operatorframework.io.bundle.package.v1: p\n  flag: true\n",
        )]);
        let layout = Layout::detect(&bundle).unwrap();
        assert_eq!(layout.manifests_dir, "deploy/");
        assert_eq!(layout.package.as_deref(), Some("p"));
        assert_eq!(layout.mediatype.as_deref(), Some("registry+v1"));
    }

    #[test]
    fn subfolders_are_refused() {
        let bundle = files(&[("manifests/a.yaml", ""), ("manifests/sub/b.yaml", "")]);
        let layout = Layout::detect(&bundle).unwrap();
        assert!(matches!(
            layout.manifest_files(&bundle),
            Err(RenderError::ManifestSubdirectory { .. })
        ));
    }

    #[test]
    fn bare_folder_takes_yaml_files() {
        let bundle = files(&[("a.yaml", ""), ("README.md", ""), ("x/b.yaml", "")]);
        let layout = Layout::detect(&bundle).unwrap();
        let found: Vec<_> = layout
            .manifest_files(&bundle)
            .unwrap()
            .into_iter()
            .map(|(p, _)| p)
            .collect();
        assert_eq!(found, vec!["a.yaml"]);
    }
}
