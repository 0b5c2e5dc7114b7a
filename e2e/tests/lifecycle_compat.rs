#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `maxOpenShiftVersion` against the simulated CVO (§8.3, contracts §3.2): a bundle whose
//! maximum is below the next minor blocks the minor update (the message names the bundle that
//! lifts the block and how to move to it) but not a patch update; `pomctl plan --to` predicts
//! exactly what the patch update then does; after the admin moves the PO the minor update is
//! accepted.

use pom_e2e::scenario::{co_condition, configmap_catalog, simulated_plane};
use std::time::Duration;

use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::PlatformOperator;
use pom_e2e::cvo::{Cvo, UpdateKind};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually, po_condition};
use pom_e2e::pomctl;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
const PKG: &str = "compat";

/// Publishes `bundles` as the whole content of ConfigMap catalog `compat`.
async fn publish(client: &Client, bundles: &[TestBundle]) {
    configmap_catalog(client, "compat", &catalog_json(bundles, &[]), 0).await;
}

async fn settled_at(client: &Client, version: &str) {
    eventually(WAIT, &format!("{PKG} settled at {version}"), || async {
        let status = Api::<PlatformOperator>::all(client.clone())
            .get(PKG)
            .await
            .ok()?
            .status?;
        let at = status.installed_bundle?.version == version;
        (at && status.active_hop?.settled && status.desired_bundle.is_none()).then_some(())
    })
    .await;
}

#[tokio::test]
async fn max_openshift_version_blocks_minor_not_patch_and_plan_predicts_the_patch() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    // No payload ClusterOperators: this test is about Upgradeable, not about holding updates.
    let cvo = Cvo::install(client.clone(), "4.16.3", &[]).await.unwrap();
    let v100 = TestBundle::new(PKG, "1.0.0").max_ocp("4.16");
    let v101 = TestBundle::new(PKG, "1.0.1")
        .replaces("1.0.0")
        .max_ocp("4.16");
    let v110 = TestBundle::new(PKG, "1.1.0")
        .replaces("1.0.1")
        .max_ocp("4.18");
    publish(&client, std::slice::from_ref(&v100)).await;
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
    settled_at(&client, "1.0.0").await;
    publish(&client, &[v100, v101, v110]).await;

    // 1.0.0 supports up to 4.16: the next minor (4.17) is blocked, with the way out named.
    // (Before the catalog gained 1.1.0 the message said no bundle lifts the block; wait for
    // the PO to be judged against the new catalog content.)
    let message = eventually(
        WAIT,
        "Upgradeable=False/IncompatibleOperatorsInstalled naming 1.1.0",
        || async {
            po_condition(&client, PKG, "Upgradeable")
                .await
                .filter(|(s, r, m)| {
                    s == "False"
                        && r == "IncompatibleOperatorsInstalled"
                        && m.contains("compat.v1.1.0")
                })
                .map(|c| c.2)
        },
    )
    .await;
    assert!(
        message.contains("compat.v1.1.0"),
        "the message must name the bundle that lifts the block: {message}"
    );
    assert!(
        message.contains("steadyStateVersionRange"),
        "the message must say how to move: {message}"
    );
    // The aggregate follows the PO: wait for the judgement against the new catalog content.
    let (co_status, _, co_message) =
        eventually(WAIT, "CO Upgradeable=False naming 1.1.0", || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "False" && c.2.contains("compat.v1.1.0"))
        })
        .await;
    assert_eq!(co_status, "False");
    // In OLM v0's form (issue 35 item 5): the minor it blocks, then the PO with its bundle, its
    // limit and the way forward.
    let (header, line) = co_message.split_once('\n').unwrap();
    assert_eq!(
        header, "PlatformOperators blocking minor version upgrades to 4.17 or higher:",
        "{co_message}"
    );
    assert!(
        line.starts_with("- compat: bundle compat.v1.0.0 "),
        "{co_message}"
    );
    assert!(
        line.contains("supports OpenShift up to 4.16"),
        "{co_message}"
    );
    assert!(line.contains("steadyStateVersionRange"), "{co_message}");

    let refused = cvo
        .start_update("4.17.0")
        .await
        .expect_err("the CVO must refuse the minor update");
    assert!(refused.to_string().contains("compat"), "{refused}");

    // A patch update is not blocked; pomctl plan predicts what it does.
    let plan = pomctl::run(
        plane.kubeconfig_path(),
        &["plan", "--to", "4.16.4", "-o", "json"],
    )
    .await;
    assert_eq!(
        plan.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&plan.stderr)
    );
    let plan: Value = serde_json::from_slice(&plan.stdout).unwrap();
    let predicted = plan["platformOperators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == PKG)
        .unwrap()
        .clone();
    assert_eq!(cvo.start_update("4.16.4").await.unwrap(), UpdateKind::Patch);
    let predicted_version = predicted["bundle"]["version"].as_str().unwrap().to_owned();
    settled_at(&client, &predicted_version).await;
    let status = Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(
        predicted_version, "1.0.1",
        "within the minor only: {predicted:#}"
    );
    assert_eq!(status.installed_bundle.unwrap().name, "compat.v1.0.1");
    assert_eq!(predicted["pin"]["reason"], "PatchUpgrade");
    cvo.wait_completed(WAIT).await.unwrap();

    // The admin moves by hand as the message says; the minor update is then accepted.
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            PKG,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": "=1.1.0"}})),
        )
        .await
        .unwrap();
    settled_at(&client, "1.1.0").await;
    eventually(WAIT, "CO Upgradeable=True", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    assert_eq!(cvo.start_update("4.17.0").await.unwrap(), UpdateKind::Minor);
    manager.stop().await;
}
