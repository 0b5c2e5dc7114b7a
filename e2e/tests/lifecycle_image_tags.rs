#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Digests, not tags (issue 13, item 4), against a real API server and registry: a catalog
//! that names a bundle image by tag has it resolved to a digest when the bundle is applied, the
//! digest is what `installedBundle.image` records, and when the tag later moves to other
//! content, drift repair keeps re-applying the recorded digest: the running operator changes
//! only through a move.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use pom_api::PlatformOperator;
use pom_controller::context::Settings;
use pom_e2e::Registry;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::Manager;
use pom_e2e::oci_publish::push_files;
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    configmap_catalog, create_po, deployment_image, simulated_plane, wait_po_condition,
};
use serde_json::json;

#[tokio::test]
async fn a_moved_tag_never_changes_the_running_operator() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();
    let original = TestBundle::new("tagged", "1.0.0");
    let digest = push_files(&host, "bundles/tagged", "1.0.0", &original.image_files())
        .await
        .unwrap();
    let by_tag = format!("{host}/bundles/tagged:1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(
            std::slice::from_ref(&original),
            &[(original.name(), by_tag.clone())],
        ),
        0,
    )
    .await;
    create_po(&client, "tagged", json!({"package": {"name": "tagged"}})).await;
    let settings = Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![host.clone()])
    };
    let manager = Manager::start(client.clone(), settings.clone());
    wait_po_condition(
        &client,
        "tagged",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let recorded = Api::<PlatformOperator>::all(client.clone())
        .get("tagged")
        .await
        .unwrap()
        .status
        .unwrap()
        .installed_bundle
        .unwrap()
        .image;
    assert_eq!(
        recorded.as_deref(),
        Some(digest.as_str()),
        "the digest the tag named when the bundle was applied is recorded, not the tag"
    );
    let running = deployment_image(&client, "tagged", &original.deployment_name()).await;

    // The tag moves to other content (another operator image): nothing POM runs changes,
    // watched over a window longer than every resync.
    let mut moved = original.clone();
    moved.replicas = 3;
    let window = QuietWindow::new(&settings)
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), "tagged"),
            Objects::All,
        )
        .open()
        .await;
    let moved_digest = push_files(&host, "bundles/tagged", "1.0.0", &moved.image_files())
        .await
        .unwrap();
    assert_ne!(moved_digest, digest, "the tag now names other content");
    window.hold().await;
    assert_eq!(
        deployment_image(&client, "tagged", &original.deployment_name()).await,
        running
    );
    let replicas = Api::<Deployment>::namespaced(client.clone(), "tagged")
        .get(&original.deployment_name())
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas;
    assert_eq!(replicas, Some(1), "the moved tag's content was not applied");
    manager.stop().await;
}
