#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `crds/` is generated from the Rust types; this fails when someone changed the types and
//! forgot `make crds`.

#[test]
fn committed_crds_match_the_types() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../crds/crds.yaml");
    let committed =
        std::fs::read_to_string(path).expect("crds/crds.yaml is missing: run `make crds`");
    let generated = pom_api::crds_yaml(&pom_api::crds()).unwrap();
    assert!(
        committed == generated,
        "crds/crds.yaml is stale: run `make crds` and commit the result"
    );
}

#[test]
fn crds_are_cluster_scoped_with_status_and_short_names() {
    for crd in pom_api::crds() {
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.group, pom_api::GROUP);
        let version = &crd.spec.versions[0];
        assert!(version.subresources.as_ref().unwrap().status.is_some());
        assert!(
            !crd.spec
                .names
                .short_names
                .clone()
                .unwrap_or_default()
                .is_empty()
        );
    }
}
