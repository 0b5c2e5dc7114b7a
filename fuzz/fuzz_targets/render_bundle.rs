//! Bundle rendering and the content policy: the input is one manifest file of a registry+v1
//! or plain+v0 bundle (first byte chooses); rendering gives objects or a refusal, never a
//! panic, and what renders keeps every namespaced object in the install namespace.
#![no_main]

use std::collections::BTreeMap;

use libfuzzer_sys::fuzz_target;
use pom_render::{BundleFiles, RenderOptions, render};

fuzz_target!(|data: &[u8]| {
    let Some((&first, manifest)) = data.split_first() else {
        return;
    };
    let mediatype = if first % 2 == 0 { "registry+v1" } else { "plain+v0" };
    let files = BTreeMap::from([
        (
            "metadata/annotations.yaml".to_owned(),
            format!("annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: {mediatype}\n").into_bytes(),
        ),
        ("manifests/fuzz.yaml".to_owned(), manifest.to_vec()),
    ]);
    if let Ok(bundle) = render(&BundleFiles::new(files), &RenderOptions::new("fuzz-ns")) {
        for object in &bundle.objects {
            if let Some(namespace) = object["metadata"]["namespace"].as_str() {
                assert_eq!(namespace, "fuzz-ns", "{object}");
            }
        }
    }
});
