//! FBC parsing (JSON streams and YAML documents, then assembly and validation): any bytes give
//! a catalog or an error, never a panic, and a parsed catalog's invalid packages are not served.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(catalog) = pom_resolver::fbc::parse_documents([("fuzz.yaml".to_owned(), data.to_vec())]) {
        for package in catalog.invalid_packages.keys() {
            assert!(!catalog.packages.contains_key(package));
        }
    }
});
