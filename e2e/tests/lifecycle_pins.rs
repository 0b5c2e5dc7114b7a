#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Pins that follow the cluster (§4.2): a patch update moves a PO only within its minor, a
//! minor update only within its major, steady state holds `=X.Y.Z` whatever the catalog gains,
//! and `steadyStateVersionRange` moves it by hand (across a major too).

use pom_e2e::scenario::{configmap_catalog, set_cluster, simulated_plane};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
const PKG: &str = "pinop";

/// Publishes `bundles` as the whole content of ConfigMap catalog `pins`.
async fn publish(client: &Client, bundles: &[TestBundle]) {
    configmap_catalog(client, "pins", &catalog_json(bundles, &[]), 0).await;
}

async fn state(client: &Client) -> Option<(String, String, String)> {
    let status = Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .ok()?
        .status?;
    let pin = status.pin?;
    Some((
        status.installed_bundle?.version,
        pin.range,
        pin.reason.to_string(),
    ))
}

async fn wait_state(client: &Client, version: &str, reason: &str) -> (String, String, String) {
    eventually(
        WAIT,
        &format!("{PKG} at {version} with pin reason {reason}"),
        || async {
            let s = state(client).await?;
            let settled = Api::<PlatformOperator>::all(client.clone())
                .get(PKG)
                .await
                .ok()?
                .status?
                .active_hop?
                .settled;
            (s.0 == version && s.2 == reason && settled).then_some(s)
        },
    )
    .await
}

/// Holds for `hold` that the PO stays at `version`.
async fn stays(client: &Client, version: &str, hold: Duration) {
    let end = tokio::time::Instant::now() + hold;
    while tokio::time::Instant::now() < end {
        assert_eq!(state(client).await.unwrap().0, version);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[tokio::test]
async fn pins_follow_patch_and_minor_updates_and_steady_state_holds() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let all = vec![
        TestBundle::new(PKG, "1.0.0"),
        TestBundle::new(PKG, "1.0.1").replaces("1.0.0"),
        TestBundle::new(PKG, "1.1.0").replaces("1.0.1"),
        TestBundle::new(PKG, "2.0.0").replaces("1.1.0"),
    ];
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, &all[..1]).await;
    let po: PlatformOperator = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": PKG},
        "spec": {"package": {"name": PKG}}
    }))
    .unwrap();
    Api::<PlatformOperator>::all(client.clone())
        .create(&PostParams::default(), &po)
        .await
        .unwrap();
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_state(&client, "1.0.0", "Steady").await;

    // Steady: the catalog gains newer bundles, nothing moves.
    publish(&client, &all).await;
    stays(&client, "1.0.0", Duration::from_secs(5)).await;
    assert_eq!(state(&client).await.unwrap().1, "=1.0.0");

    // Patch update: only within the minor (1.0.1, not 1.1.0).
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    let (_, range, _) = wait_state(&client, "1.0.1", "PatchUpgrade").await;
    assert_eq!(range, ">=1.0.1 <1.1.0-0");
    stays(&client, "1.0.1", Duration::from_secs(4)).await;
    set_cluster(&client, &[("4.16.4", true), ("4.16.3", true)], "4.16.4").await;
    let (_, range, _) = wait_state(&client, "1.0.1", "Steady").await;
    assert_eq!(range, "=1.0.1");

    // Minor update: within the major (1.1.0, never 2.0.0).
    set_cluster(
        &client,
        &[("4.17.0", false), ("4.16.4", true), ("4.16.3", true)],
        "4.17.0",
    )
    .await;
    let (_, range, _) = wait_state(&client, "1.1.0", "MinorUpgrade").await;
    assert_eq!(range, ">=1.1.0 <2.0.0-0");
    stays(&client, "1.1.0", Duration::from_secs(4)).await;
    set_cluster(
        &client,
        &[("4.17.0", true), ("4.16.4", true), ("4.16.3", true)],
        "4.17.0",
    )
    .await;
    wait_state(&client, "1.1.0", "Steady").await;

    // By hand, across the major.
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            PKG,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": ">=2.0.0 <3.0.0-0"}})),
        )
        .await
        .unwrap();
    wait_state(&client, "2.0.0", "Override").await;
    manager.stop().await;
}
