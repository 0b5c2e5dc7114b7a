//! The synthetic catalog of `common/mod.rs` on disk, in the four layouts `bench_compare`
//! measures: one JSON stream, one YAML multi-document file (as `opm render -o yaml` writes),
//! and both split into one folder per package (`<package>/catalog.json|yaml`, as catalogs in
//! git are usually laid out). Each layout sits in a folder of its own, so operator-registry's
//! `LoadFS` (which takes a folder) and POM's `load_path` read exactly the same files.
//!
//! Included by `benches/bench_compare.rs` and `tests/synthetic_inputs.rs` with
//! `#[path = ...] mod inputs;` next to `mod common;`.

#![allow(dead_code)]

use std::fs;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::common;

/// One generated input: a folder holding one catalog.
#[derive(Debug, Clone)]
pub struct Input {
    /// `json-file`, `json-split`, `yaml-file` or `yaml-split`.
    pub name: &'static str,
    pub yaml: bool,
    pub dir: PathBuf,
    /// Bytes of catalog files under `dir`.
    pub bytes: u64,
}

/// What the synthetic catalog holds, as both loaders must count it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub packages: usize,
    pub channels: usize,
    pub bundles: usize,
}

/// The counts of `common::synthetic_catalog_json(packages, bundles)`: every package has a
/// `stable` channel, and a `fast` one when it has bundles.
pub fn expected_counts(packages: usize, bundles: usize) -> Counts {
    Counts {
        packages,
        channels: packages * if bundles > 0 { 2 } else { 1 },
        bundles: packages * bundles,
    }
}

/// One blob as a YAML document, `---` first (keys sorted, block style, as opm writes).
pub fn yaml_document(blob: &Value) -> io::Result<String> {
    let body = serde_saphyr::to_string(blob).map_err(io::Error::other)?;
    Ok(format!("---\n{body}"))
}

fn render(blob: &Value, yaml: bool) -> io::Result<String> {
    if yaml {
        yaml_document(blob)
    } else {
        Ok(format!("{blob}\n"))
    }
}

/// Writes the layouts under `root` (created; existing layouts are replaced). Returns them in
/// the order json-file, json-split, yaml-file, yaml-split.
pub fn write_inputs(root: &Path, packages: usize, bundles: usize) -> io::Result<Vec<Input>> {
    let mut inputs = Vec::new();
    for (name, yaml, split) in [
        ("json-file", false, false),
        ("json-split", false, true),
        ("yaml-file", true, false),
        ("yaml-split", true, true),
    ] {
        let dir = root.join(name);
        if dir.exists() {
            fs::remove_dir_all(&dir)?;
        }
        fs::create_dir_all(&dir)?;
        let ext = if yaml { "yaml" } else { "json" };
        let mut bytes = 0u64;
        let mut file: Option<(usize, BufWriter<fs::File>)> = None;
        let mut failure: Option<io::Error> = None;
        common::for_each_synthetic_blob(packages, bundles, |p, blob| {
            if failure.is_some() {
                return;
            }
            let result = (|| -> io::Result<()> {
                let open = match &file {
                    Some((current, _)) => split && *current != p,
                    None => true,
                };
                if open {
                    if let Some((_, mut previous)) = file.take() {
                        previous.flush()?;
                    }
                    let path = if split {
                        let package_dir = dir.join(common::package_name(p));
                        fs::create_dir_all(&package_dir)?;
                        package_dir.join(format!("catalog.{ext}"))
                    } else {
                        dir.join(format!("catalog.{ext}"))
                    };
                    file = Some((p, BufWriter::new(fs::File::create(path)?)));
                }
                let text = render(blob, yaml)?;
                bytes += text.len() as u64;
                if let Some((_, out)) = file.as_mut() {
                    out.write_all(text.as_bytes())?;
                }
                Ok(())
            })();
            if let Err(e) = result {
                failure = Some(e);
            }
        });
        if let Some(e) = failure {
            return Err(e);
        }
        if let Some((_, mut last)) = file.take() {
            last.flush()?;
        }
        inputs.push(Input {
            name,
            yaml,
            dir,
            bytes,
        });
    }
    Ok(inputs)
}

/// Packages, channels and bundles of a catalog POM parsed.
pub fn pom_counts(catalog: &pom_resolver::fbc::Catalog) -> Counts {
    Counts {
        packages: catalog.packages.len(),
        channels: catalog.packages.values().map(|p| p.channels.len()).sum(),
        bundles: catalog.packages.values().map(|p| p.bundles.len()).sum(),
    }
}
