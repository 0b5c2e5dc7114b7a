//! The YAML event front end (`fbc/yaml_events.rs`) against serde-saphyr on every YAML file of
//! the shared test data: each document the front end builds equals serde-saphyr's value, and
//! it builds (does not decline) the documents real catalogs are made of.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod shared_support;

use std::path::{Path, PathBuf};

use pom_resolver::fbc::{FastPathTally, yaml_fast_path_differential};

/// Bundles exactly as their authors published them (long block-scalar descriptions, icons):
/// the differential covers them (`every_yaml_file_of_the_test_data_decodes_alike`), but they are
/// not catalog documents, so they do not count against the fast path's build ratio.
const PUBLISHED_BUNDLES: &str = "community-operators-heads";

fn yaml_files(dir: &Path, skip: Option<&str>, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            if skip.is_some_and(|skip| path.file_name().is_some_and(|n| n == skip)) {
                continue;
            }
            yaml_files(&path, skip, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// Every YAML file under `relative`, through both decoders; the tally over all of them.
fn differential(relative: &str, skip: Option<&str>) -> Option<(usize, FastPathTally)> {
    let root = shared_support::shared_dir(relative)?;
    let mut files = Vec::new();
    yaml_files(&root, skip, &mut files);
    let mut total = FastPathTally::default();
    for file in &files {
        let bytes = std::fs::read(file).unwrap();
        let Ok(text) = std::str::from_utf8(&bytes) else {
            continue;
        };
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        match yaml_fast_path_differential(text) {
            Ok(tally) => total.absorb(tally),
            Err(difference) => panic!("{}: {difference}", file.display()),
        }
    }
    Some((files.len(), total))
}

#[test]
fn real_catalogs_decode_alike_and_the_front_end_builds_them() {
    let Some((files, tally)) = differential("real", Some(PUBLISHED_BUNDLES)) else {
        return;
    };
    eprintln!("real: {files} YAML files, {tally:?}");
    assert!(files >= 90, "the walk found only {files} YAML files");
    // Catalog documents (opm-rendered and hand-written) use no tags, anchors or exotic
    // scalars; the front end must build nearly all of them, or it is not on the fast path.
    assert!(
        tally.built >= 20 * tally.declined().max(1),
        "the front end declined too many documents: {tally:?}"
    );
}

#[test]
fn every_yaml_file_of_the_test_data_decodes_alike() {
    let Some((files, tally)) = differential("", None) else {
        return;
    };
    eprintln!("all testdata: {files} YAML files, {tally:?}");
    assert!(tally.built > 0);
}
