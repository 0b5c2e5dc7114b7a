#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `manifests/` is generated from `pom_controller::manifests`; this fails when the code changed
//! and nobody ran `make manifests` (or someone edited a generated file by hand).

use std::collections::BTreeSet;
use std::path::Path;

use pom_controller::manifests::{Flavor, render};

#[test]
fn committed_manifests_match_the_generator() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifests");
    for flavor in [Flavor::OpenShift, Flavor::Kubernetes] {
        let dir = root.join(flavor.dir());
        let files = render(flavor).unwrap();
        let expected: BTreeSet<String> = files.iter().map(|f| f.name.clone()).collect();
        let present: BTreeSet<String> = std::fs::read_dir(&dir)
            .unwrap_or_else(|e| panic!("{}: {e}: run `make manifests`", dir.display()))
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            present,
            expected,
            "files in {} differ: run `make manifests`",
            dir.display()
        );
        for file in files {
            let committed = std::fs::read_to_string(dir.join(&file.name)).unwrap();
            assert!(
                committed == file.content,
                "{}/{} is stale: run `make manifests`",
                dir.display(),
                file.name
            );
        }
    }
}

#[test]
fn every_manifest_parses_as_kubernetes_objects() {
    for flavor in [Flavor::OpenShift, Flavor::Kubernetes] {
        for file in render(flavor)
            .unwrap()
            .into_iter()
            .filter(|f| f.name.ends_with(".yaml"))
        {
            for doc in file.content.split("\n---\n").skip(1) {
                let value: serde_json::Value = serde_saphyr::from_str(doc)
                    .unwrap_or_else(|e| panic!("{}: {e}\n{doc}", file.name));
                assert!(
                    value["apiVersion"].is_string() && value["kind"].is_string(),
                    "{}: {doc}",
                    file.name
                );
            }
        }
    }
}
