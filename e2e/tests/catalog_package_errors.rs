#![allow(clippy::unwrap_used, clippy::expect_used)]
//! One bad package never blocks the others (issue 14, item 6), against a real API server: a
//! catalog where one package has a channel with two heads keeps serving its other packages,
//! reports the bad one by name in its status, and only the PlatformOperator of that package
//! fails, saying why.

use kube::api::Api;
use pom_api::Catalog;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{
    configmap_catalog, create_po, simulated_plane, wait_catalog_serves, wait_po_condition,
};
use serde_json::{Value, json};
use std::time::Duration;

#[tokio::test]
async fn a_malformed_package_fails_only_its_own_platform_operator() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let good = TestBundle::new("good", "1.0.0");
    let broken = [
        TestBundle::new("broken", "1.0.0"),
        TestBundle::new("broken", "2.0.0"),
    ];
    let mut bundles = vec![good.clone()];
    bundles.extend(broken.iter().cloned());
    // Two entries and no edge between them: the `broken` channel has two heads.
    let fbc = catalog_json(&bundles, &[]);
    assert!(
        !fbc.contains("\"replaces\":\"broken.v1.0.0\""),
        "the fixture must leave broken's channel without an edge"
    );
    configmap_catalog(&client, "mixed", &fbc, 0).await;
    create_po(&client, "good", json!({"package": {"name": "good"}})).await;
    create_po(&client, "broken", json!({"package": {"name": "broken"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "mixed", &fbc).await;
    let catalog = Api::<Catalog>::all(client.clone())
        .get("mixed")
        .await
        .unwrap();
    let serving = catalog
        .status
        .unwrap()
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Serving")
        .unwrap();
    assert_eq!(serving.status, "True");
    let serving = serving.message;
    assert!(
        serving.contains("1 invalid package is not served (broken)"),
        "{serving}"
    );

    wait_po_condition(
        &client,
        "good",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "broken",
        "Installed",
        "False",
        Some("ResolutionFailed"),
    )
    .await;
    assert!(
        message.contains("package \"broken\" in catalog mixed is invalid")
            && message.contains("2 heads"),
        "{message}"
    );

    let invalid = eventually(
        Duration::from_secs(30),
        "the Catalog to list its invalid package",
        || async {
            let catalog = Api::<Catalog>::all(client.clone())
                .get("mixed")
                .await
                .ok()?;
            let status = serde_json::to_value(catalog.status?).ok()?;
            let invalid: Value = status.get("invalidPackages")?.clone();
            Some(invalid)
        },
    )
    .await;
    assert_eq!(invalid[0]["name"], "broken", "{invalid}");
    assert!(
        invalid[0]["reason"]
            .as_str()
            .unwrap()
            .contains("broken.v1.0.0, broken.v2.0.0"),
        "{invalid}"
    );
    assert_eq!(invalid.as_array().unwrap().len(), 1);
    manager.stop().await;
}
