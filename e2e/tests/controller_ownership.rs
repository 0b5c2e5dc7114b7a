#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Deleting a PlatformOperator frees its package (issue 25 item 7): its CRDs stay (custom
//! resources survive, §6) still labelled with the deleted PO's name, and a new PO of another
//! name for the same package takes them over and installs, instead of failing
//! `OwnershipConflict` forever on a PO that no longer exists. A PO of another package still
//! may not take them.

use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::Manager;
use pom_e2e::scenario::{
    configmap_catalog, create_po, simulated_plane, wait_catalog_serves, wait_po_condition,
    wait_po_gone,
};
use serde_json::json;

#[tokio::test]
async fn a_deleted_pos_crds_are_taken_over_by_the_next_po_of_its_package() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let bundle = TestBundle::new("freed", "1.0.0");
    let mut squatter = TestBundle::new("squatter", "1.0.0");
    squatter.crd_group = Some("freed.example.com".into());
    let fbc = catalog_json(&[bundle.clone(), squatter], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(&client, "first", json!({"package": {"name": "freed"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(
        &client,
        "first",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;

    Api::<PlatformOperator>::all(client.clone())
        .delete("first", &DeleteParams::default())
        .await
        .unwrap();
    wait_po_gone(&client, "first", Duration::from_secs(120)).await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let crd = crds.get(&bundle.crd_name()).await.unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap()[pom_api::labels::OWNER_PO],
        "first",
        "the CRD outlives its PO, labelled as it was"
    );

    // Another package may not take it.
    create_po(
        &client,
        "squatter",
        json!({"package": {"name": "squatter"}}),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "squatter",
        "Installed",
        "False",
        Some("OwnershipConflict"),
    )
    .await;
    assert!(message.contains(&bundle.crd_name()), "{message}");
    // The package's next PO does.
    create_po(&client, "second", json!({"package": {"name": "freed"}})).await;
    wait_po_condition(
        &client,
        "second",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let crd = crds.get(&bundle.crd_name()).await.unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap()[pom_api::labels::OWNER_PO],
        "second"
    );
    manager.stop().await;
}
