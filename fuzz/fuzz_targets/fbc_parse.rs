//! FBC parsing (JSON streams and YAML documents, then assembly and validation): any bytes give
//! a catalog or an error, never a panic, and a parsed catalog's invalid packages are not served.
//! And the YAML event front end never builds a document serde-saphyr would build differently or
//! refuse (`fbc/yaml_events.rs`: it must decline whatever it cannot reproduce exactly).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(catalog) = pom_resolver::fbc::parse_documents([("fuzz.yaml".to_owned(), data.to_vec())]) {
        for package in catalog.invalid_packages.keys() {
            assert!(!catalog.packages.contains_key(package));
        }
    }
    if let Ok(text) = std::str::from_utf8(data) {
        if let Err(difference) = pom_resolver::fbc::yaml_fast_path_differential(text) {
            panic!("{difference}");
        }
    }
});
