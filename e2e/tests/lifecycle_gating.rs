#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The seed scenario (operator-lifecycle-manager #2618): an operator at 7.9.3, a catalog that
//! gains 7.10.0 (replaces 7.9.3) and 7.10.1 (replaces 7.10.0). After a minor cluster update POM
//! installs 7.10.0 and does not start 7.10.1 until 7.10.0's OperatorCondition says
//! Upgradeable=True for its generation, even while 7.10.0 has not reported anything yet. The
//! test plays the operator. Variants: reported late, reported False, never reported.

use pom_e2e::scenario::{
    co_condition, configmap_catalog, now, set_cluster, simulated_plane, wait_catalog_serves,
};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::api::{Api, PostParams};
use pom_api::PlatformOperator;
use pom_api::olm::OperatorCondition;
use pom_controller::context::Settings;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::quiet::{Objects, QuietWindow};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);
const PKG: &str = "seedop";

fn chain() -> Vec<TestBundle> {
    vec![
        TestBundle::new(PKG, "7.9.3"),
        TestBundle::new(PKG, "7.10.0").replaces("7.9.3"),
        TestBundle::new(PKG, "7.10.1").replaces("7.10.0"),
    ]
}

/// The manager's settings: a short resync, so that the quiet windows (which must outlast every
/// resync) stay short.
fn settings() -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    }
}

/// Publishes `bundles` as the whole content of ConfigMap catalog `seed`; returns the content.
async fn publish(client: &Client, bundles: &[TestBundle]) -> String {
    let fbc = catalog_json(bundles, &[]);
    configmap_catalog(client, "seed", &fbc, 0).await;
    fbc
}

/// Where the PO stands: what is installed, the move that installed it and whether that move
/// settled.
fn position(po: &PlatformOperator) -> Value {
    let status = po.status.as_ref();
    let hop = status.and_then(|s| s.active_hop.as_ref());
    json!({
        "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.name),
        "activeHop": hop.map(|h| json!({"from": h.from, "to": h.to, "settled": h.settled})),
    })
}

/// Plays the operator: writes `Upgradeable` into its OperatorCondition's `spec.conditions`,
/// as operator-lib does.
async fn report(client: &Client, csv: &str, upgradeable: bool, message: &str) {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), PKG);
    let mut oc = eventually(
        WAIT,
        &format!("OperatorCondition {csv} to exist"),
        || async { api.get_opt(csv).await.ok()? },
    )
    .await;
    oc.spec.conditions = vec![Condition {
        type_: "Upgradeable".into(),
        status: if upgradeable { "True" } else { "False" }.into(),
        reason: if upgradeable { "Ready" } else { "Migrating" }.into(),
        message: message.into(),
        last_transition_time: now(),
        observed_generation: None,
    }];
    api.replace(csv, &PostParams::default(), &oc).await.unwrap();
}

async fn installed_version(client: &Client) -> Option<String> {
    Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .ok()?
        .status?
        .installed_bundle
        .map(|b| b.version)
}

async fn wait_installed(client: &Client, version: &str) {
    eventually(WAIT, &format!("{PKG} at {version}"), || async {
        (installed_version(client).await? == version).then_some(())
    })
    .await;
}

/// 7.9.3 installed and settled on a steady 4.16 cluster, then the catalog gains 7.10.x and the
/// cluster starts a minor update to 4.17.
async fn start_scenario(client: &Client, settings: &Settings, progress_deadline: &str) -> Manager {
    set_cluster(client, &[("4.16.3", true)], "4.16.3").await;
    let bundles = chain();
    publish(client, &bundles[..1]).await;
    let po: PlatformOperator = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": PKG},
        "spec": {"package": {"name": PKG}, "upgradeGate": "OperatorCondition", "progressDeadline": progress_deadline}
    }))
    .unwrap();
    Api::<PlatformOperator>::all(client.clone())
        .create(&PostParams::default(), &po)
        .await
        .unwrap();
    let manager = Manager::start(client.clone(), settings.clone());
    wait_installed(client, "7.9.3").await;
    report(client, "seedop.v7.9.3", true, "ready").await;
    eventually(WAIT, "7.9.3 settled", || async {
        let hop = Api::<PlatformOperator>::all(client.clone())
            .get(PKG)
            .await
            .ok()?
            .status?
            .active_hop?;
        hop.settled.then_some(())
    })
    .await;
    // Steady state: the catalog gaining bundles moves nothing. Watched from before the publish
    // until a window longer than every resync has passed since the manager serves it: the PO
    // stays where it is (pin included) and POM does not touch the operator's Deployment.
    let window = QuietWindow::new(settings)
        .unchanged(
            Api::<PlatformOperator>::all(client.clone()),
            PKG,
            "the installed bundle, the move, the next bundle and the pin",
            |po| {
                let status = po.status.as_ref();
                let mut at = position(po);
                at["desiredBundle"] = json!(status.and_then(|s| s.desired_bundle.as_ref()));
                at["pin"] = json!(status.and_then(|s| s.pin.as_ref()));
                at
            },
        )
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), PKG),
            Objects::All,
        )
        .open()
        .await;
    let fbc = publish(client, &bundles).await;
    wait_catalog_serves(client, "seed", &fbc).await;
    window.hold().await;
    assert_eq!(installed_version(client).await.as_deref(), Some("7.9.3"));
    set_cluster(client, &[("4.17.0", false), ("4.16.3", true)], "4.17.0").await;
    manager
}

/// 7.10.0 is installed, and 7.10.1 is not started, over a window longer than every resync,
/// while 7.10.0 has not said it may be upgraded.
async fn assert_held_at_7_10_0(client: &Client, settings: &Settings) {
    wait_installed(client, "7.10.0").await;
    let pin = Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .unwrap()
        .status
        .unwrap()
        .pin
        .unwrap();
    assert_eq!(
        (pin.range.as_str(), pin.reason.as_str()),
        (">=7.10.0 <8.0.0-0", "MinorUpgrade")
    );
    // Every write of the PO keeps it at 7.10.0 with the move to 7.10.0 unsettled and never
    // says Upgradeable=True (7.10.1 may become the desired bundle: pending, not started); no
    // Deployment of the operator gets another pod template (7.10.1's image) or appears.
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let held_at = position(&pos.get(PKG).await.unwrap());
    assert_eq!(
        held_at,
        json!({"installedBundle": "seedop.v7.10.0",
               "activeHop": {"from": "seedop.v7.9.3", "to": "seedop.v7.10.0", "settled": false}})
    );
    QuietWindow::new(settings)
        .unchanged(
            pos.clone(),
            PKG,
            "the installed bundle and its move (held at 7.10.0 until it settles)",
            position,
        )
        .never(pos, PKG, "Upgradeable=True", |po| {
            condition_of(po, "Upgradeable").is_some_and(|(status, _, _)| status == "True")
        })
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), PKG),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
        .open()
        .await
        .hold()
        .await;
    let status = Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .unwrap()
        .status
        .unwrap();
    assert!(!status.active_hop.as_ref().unwrap().settled);
    assert_eq!(status.desired_bundle.unwrap().version, "7.10.1");
    let (progressing, reason, _) = po_condition(client, PKG, "Progressing").await.unwrap();
    assert_eq!(
        (progressing.as_str(), reason.as_str()),
        ("True", "WaitingForOperatorCondition")
    );
}

#[tokio::test]
async fn minor_update_waits_for_the_operator_condition_reported_late() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let manager = start_scenario(&client, &settings, "10m").await;
    // 7.10.0 has created nothing yet: not settled, and the cluster is not upgradeable (seed 000).
    assert_held_at_7_10_0(&client, &settings).await;
    let (status, reason, message) = eventually(WAIT, "CO Upgradeable=False", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "MoveNotSettled", "{message}");
    assert!(
        message
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("- seedop: ")),
        "{message}"
    );
    assert_eq!(status, "False");
    // The operator finishes its migration and says so, late: only now does 7.10.1 start.
    report(&client, "seedop.v7.10.0", true, "migration done").await;
    wait_installed(&client, "7.10.1").await;
    report(&client, "seedop.v7.10.1", true, "ready").await;
    eventually(WAIT, "CO Upgradeable=True", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    manager.stop().await;
}

#[tokio::test]
async fn operator_reporting_false_holds_the_next_hop() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let manager = start_scenario(&client, &settings, "10m").await;
    wait_installed(&client, "7.10.0").await;
    report(
        &client,
        "seedop.v7.10.0",
        false,
        "database migration running",
    )
    .await;
    assert_held_at_7_10_0(&client, &settings).await;
    // Under `upgradeGate: OperatorCondition` the operator's Upgradeable=True is part of settling
    // the move to it, so what blocks is the unsettled move (MoveNotSettled), not a settled
    // operator saying False (OperatorNotUpgradeable); the message names the OperatorCondition
    // waited for and carries the operator's own words. Waited for: POM copies the operator's
    // report to the OperatorCondition's status before it reaches the PO.
    let (status, reason, message) = eventually(
        WAIT,
        "the operator's report in the PO's Upgradeable message",
        || async {
            po_condition(&client, PKG, "Upgradeable")
                .await
                .filter(|c| c.2.contains("database migration running"))
        },
    )
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MoveNotSettled"),
        "{message}"
    );
    assert!(
        message.contains("the move to seedop.v7.10.0 has not settled"),
        "{message}"
    );
    assert!(
        message.contains("OperatorCondition seedop/seedop.v7.10.0 to report Upgradeable=True"),
        "{message}"
    );
    // The cluster admin reads the same cause on the aggregated ClusterOperator.
    let (status, reason, message) = eventually(
        WAIT,
        "the operator's report in the ClusterOperator's Upgradeable message",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.2.contains("database migration running"))
        },
    )
    .await;
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MoveNotSettled"),
        "{message}"
    );
    assert!(
        message
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("- seedop: the move to seedop.v7.10.0 has not settled")),
        "{message}"
    );
    report(&client, "seedop.v7.10.0", true, "migration done").await;
    wait_installed(&client, "7.10.1").await;
    manager.stop().await;
}

#[tokio::test]
async fn never_reported_condition_hits_the_progress_deadline() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let manager = start_scenario(&client, &settings(), "15s").await;
    wait_installed(&client, "7.10.0").await;
    let message = eventually(WAIT, "Degraded=True/ProgressDeadlineExceeded", || async {
        po_condition(&client, PKG, "Degraded")
            .await
            .filter(|(s, r, _)| s == "True" && r == "ProgressDeadlineExceeded")
            .map(|c| c.2)
    })
    .await;
    assert!(message.contains("seedop.v7.10.0"), "{message}");
    assert_eq!(installed_version(&client).await.as_deref(), Some("7.10.0"));
    let (status, _, _) = co_condition(&client, "Upgradeable").await.unwrap();
    assert_eq!(
        status, "False",
        "a stuck move keeps the cluster not upgradeable"
    );
    manager.stop().await;
}
