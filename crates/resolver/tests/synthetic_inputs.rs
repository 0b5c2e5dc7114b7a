//! The inputs `make bench-compare` generates (`benches/common/inputs.rs`) hold one catalog in
//! four layouts: JSON and YAML, one file and one folder per package. All four must parse to the
//! same model with the counts the benchmark checks operator-registry against.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../benches/common/mod.rs"]
mod common;
#[path = "../benches/common/inputs.rs"]
mod inputs;

use pom_resolver::fbc::{Catalog, load_path};

/// The catalog without origins (file and line differ between layouts by design).
fn without_origins(mut catalog: Catalog) -> Catalog {
    for package in catalog.packages.values_mut() {
        for bundle in package.bundles.values_mut() {
            bundle.origin = Default::default();
        }
    }
    catalog
}

#[test]
fn every_layout_parses_to_the_same_catalog_with_the_expected_counts() {
    let root = std::env::temp_dir().join(format!("pom-synthetic-inputs-{}", std::process::id()));
    let written = inputs::write_inputs(&root, 12, 7);
    let catalogs: Vec<_> = written
        .as_ref()
        .unwrap()
        .iter()
        .map(|input| (input.name, input.bytes, load_path(&input.dir)))
        .collect();
    let _ = std::fs::remove_dir_all(&root);

    let expected = inputs::expected_counts(12, 7);
    assert_eq!(
        expected,
        inputs::Counts {
            packages: 12,
            channels: 24,
            bundles: 84
        }
    );
    let json = common::synthetic_catalog_json(12, 7);
    let mut first: Option<Catalog> = None;
    for (name, bytes, catalog) in catalogs {
        let catalog = catalog.unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(catalog.invalid_packages.is_empty(), "{name}");
        assert_eq!(inputs::pom_counts(&catalog), expected, "{name}");
        if name.starts_with("json") {
            assert_eq!(bytes, json.len() as u64, "{name}: the same stream");
        }
        let catalog = without_origins(catalog);
        match &first {
            None => first = Some(catalog),
            Some(first) => assert!(*first == catalog, "{name} differs from json-file"),
        }
    }
}

#[test]
fn yaml_documents_keep_strings_that_look_like_numbers_as_strings() {
    let blob = serde_json::json!({"schema": "olm.x", "value": "4.14", "n": 1, "t": "true"});
    let text = inputs::yaml_document(&blob).unwrap();
    assert!(text.starts_with("---\n"), "{text}");
    let back: serde_json::Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(back, blob);
}
