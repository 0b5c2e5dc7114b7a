#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `spec.soak` (issue 35 item 4), against a real control plane and the simulated CVO.
//!
//! A PlatformOperator with `soak: 20s` hops 7.9.3 → 7.10.0 → 7.10.1 during a minor cluster
//! update. Judged by the world, not by POM's status:
//!
//! - the operator's Deployment, as the API server holds it, runs 7.10.0 for at least the soak
//!   before it is changed to 7.10.1 (the next hop waited; its image times are what a watch on
//!   the Deployment saw);
//! - the cluster update, as the simulated CVO judges it from the aggregated ClusterOperator's
//!   `versions`, completes no sooner than the soak after the Deployment got 7.10.1;
//! - the install soaks too: until it has, the CVO refuses a minor update (its precondition
//!   reads the aggregated ClusterOperator's `Upgradeable=False`, reason `Soaking`);
//! - while the soak after the last hop runs, the aggregated ClusterOperator says
//!   `Upgradeable=False` for it (a later cluster update would otherwise be accepted while the
//!   operator is still being watched).

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::Api;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_controller::context::Settings;
use pom_e2e::cvo::{Cvo, CvoError, Progress, UpdateKind};
use pom_e2e::event_log::{EventLog, Recorded};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{
    WAIT, co_condition, configmap_catalog, create_po, simulated_plane, wait_catalog_serves,
};
use serde_json::json;

const PO: &str = "soaker";
const SOAK: Duration = Duration::from_secs(20);
/// The API server keeps timestamps to the second: `settledAt` (what the soak counts from) is
/// the settle time rounded down, so a soak may end up to a second before `SOAK` after it.
const TIMESTAMP_PRECISION: Duration = Duration::from_secs(1);

/// A 5 s resync: a soak of 20 s spans four of them, so a hop that ignored the soak would be
/// made at one of them, well inside it. `release` is the payload the manager belongs to (what
/// it reports in `versions` once every PO is where the release wants it).
fn settings(release: &str) -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        release_version: release.to_owned(),
        ..Manager::test_settings(vec![])
    }
}

/// The image of the operator container in a recorded version of the Deployment.
fn image(deployment: &Deployment) -> Option<&str> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .as_deref()
}

/// When the test first saw the Deployment run `version`'s image.
fn first_seen(events: &[Recorded<Deployment>], version: &str) -> Option<Instant> {
    let wanted = format!("example.invalid/{PO}:{version}");
    events
        .iter()
        .find(|e| image(&e.object) == Some(wanted.as_str()))
        .map(|e| e.seen)
}

fn soaking_upgradeable_false(co: &ClusterOperator) -> bool {
    co.status
        .as_ref()
        .into_iter()
        .flat_map(|s| s.conditions.iter())
        .any(|c| {
            c.type_ == "Upgradeable"
                && c.status == "False"
                && c.message
                    .as_deref()
                    .is_some_and(|m| m.contains(PO) && m.contains("soaks until"))
        })
}

#[tokio::test]
async fn the_next_hop_and_the_version_report_wait_for_the_soak() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let chain = [
        TestBundle::new(PO, "7.9.3").without_crd(),
        TestBundle::new(PO, "7.10.0")
            .replaces("7.9.3")
            .without_crd(),
        TestBundle::new(PO, "7.10.1")
            .replaces("7.10.0")
            .without_crd(),
    ];
    let deployment = chain[0].deployment_name();
    let cvo = Cvo::install(client.clone(), "4.16.3", &[AGGREGATED_CLUSTER_OPERATOR])
        .await
        .unwrap();
    configmap_catalog(&client, "soak", &catalog_json(&chain[..1], &[]), 0).await;
    create_po(
        &client,
        PO,
        json!({"package": {"name": PO}, "upgradeGate": "Rollout", "soak": "20s"}),
    )
    .await;
    let manager = Manager::start(client.clone(), settings("4.16.3"));
    let deployments = Api::<Deployment>::namespaced(client.clone(), PO);
    eventually(WAIT, "the Deployment of 7.9.3", || async {
        let d = deployments.get_opt(&deployment).await.ok()??;
        (image(&d) == Some(&*format!("example.invalid/{PO}:7.9.3"))).then_some(())
    })
    .await;
    let fbc = catalog_json(&chain, &[]);
    configmap_catalog(&client, "soak", &fbc, 0).await;
    wait_catalog_serves(&client, "soak", &fbc).await;

    // Watches open before the update starts: what the API server held, and when it was seen.
    let deployment_log = EventLog::start(deployments.clone()).await;
    let co_log = EventLog::start(Api::<ClusterOperator>::all(client.clone())).await;
    // The install itself soaks: until it has, the CVO's precondition refuses a minor update
    // (asked once the aggregate says so: before the install settles it blocks for that).
    eventually(
        WAIT,
        "the ClusterOperator Upgradeable=False, Soaking",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "False" && c.1 == "Soaking")
        },
    )
    .await;
    match cvo.start_update("4.17.0").await {
        Err(CvoError::Refused { reason, .. }) => assert_eq!(reason, "Soaking"),
        other => panic!("a minor update was not refused while the install soaked: {other:?}"),
    }
    eventually(
        WAIT,
        "the ClusterOperator Upgradeable=True after the soak",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    assert_eq!(cvo.start_update("4.17.0").await.unwrap(), UpdateKind::Minor);
    // The CVO rolls out the new payload's manager (a restart: the soak is read back from
    // the PO's status).
    manager.stop().await;
    let manager = Manager::start(client.clone(), settings("4.17.0"));

    // The CVO's completion pass, run until the update completes; when it did.
    let started = Instant::now();
    let completed_at = loop {
        if let Progress::Completed(_) = cvo.try_complete().await.unwrap() {
            break Instant::now();
        }
        assert!(
            started.elapsed() < WAIT + 2 * SOAK,
            "the cluster update did not complete within {:?}; the Deployment's images seen: {:?}",
            WAIT + 2 * SOAK,
            deployment_log
                .events()
                .iter()
                .map(|e| image(&e.object).map(str::to_owned))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    };

    let events = deployment_log.events();
    let at_7_10_0 = first_seen(&events, "7.10.0").expect("the Deployment never ran 7.10.0");
    let at_7_10_1 = first_seen(&events, "7.10.1").expect("the Deployment never ran 7.10.1");
    let ran_7_10_0 = at_7_10_1.duration_since(at_7_10_0);
    assert!(
        ran_7_10_0 + TIMESTAMP_PRECISION >= SOAK,
        "the Deployment ran 7.10.0 for {ran_7_10_0:?}, less than the {SOAK:?} soak: the next \
         hop did not wait"
    );
    let report_waited = completed_at.duration_since(at_7_10_1);
    assert!(
        report_waited + TIMESTAMP_PRECISION >= SOAK,
        "the cluster update completed {report_waited:?} after the Deployment got 7.10.1, less \
         than the {SOAK:?} soak: the version report did not wait"
    );
    assert!(
        co_log
            .events()
            .iter()
            .any(|e| e.seen > at_7_10_1 && soaking_upgradeable_false(&e.object)),
        "the aggregated ClusterOperator never said Upgradeable=False for {PO}'s soak after its \
         last hop"
    );
    manager.stop().await;
}
