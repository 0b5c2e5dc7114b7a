#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Hops before the cluster moves (issue 35 item 1), against a real control plane and the
//! simulated CVO, judged by the world: the operator's Deployment as the API server holds it,
//! and the ClusterVersion as the CVO writes it.
//!
//! - `preUpdateHops: Take`: a minor update requested while the bundle allows only 4.16 is
//!   refused; the PO hops twice (the catalog needs two) while the cluster stays at 4.16, the
//!   CVO's own retry accepts the update only after the last hop, and the PO then follows its
//!   update pin to the next bundle.
//! - `preUpdateHops: Offer` (the default): nothing moves until the admin approves the first
//!   hop (watched over a window longer than every resync); a request withdrawn after the first
//!   hop stops the second; a PO with no path blocks with the nearest bundle named in what
//!   the CVO reads (the aggregated ClusterOperator).

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, CLUSTER_VERSION_NAME, ClusterVersion};
use pom_controller::context::Settings;
use pom_e2e::cvo::{Admission, Cvo, CvoTiming};
use pom_e2e::event_log::{EventLog, Recorded};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually, po_condition};
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, co_condition, configmap_catalog, create_po, simulated_plane, wait_catalog_serves,
};
use serde_json::json;

/// A 5 s resync, so that quiet windows (which outlast every resync) stay short.
fn settings(release: &str) -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        release_version: release.to_owned(),
        ..Manager::test_settings(vec![])
    }
}

/// `package` 1.0.0 (max 4.16) → 1.1.0 (max 4.16) → 1.2.0 (max 4.17) → 1.3.0 (no max), each
/// replacing the one before: two hops lead to a bundle that runs on 4.17.
fn chain(package: &str) -> Vec<TestBundle> {
    vec![
        TestBundle::new(package, "1.0.0")
            .without_crd()
            .max_ocp("4.16"),
        TestBundle::new(package, "1.1.0")
            .replaces("1.0.0")
            .without_crd()
            .max_ocp("4.16"),
        TestBundle::new(package, "1.2.0")
            .replaces("1.1.0")
            .without_crd()
            .max_ocp("4.17"),
        TestBundle::new(package, "1.3.0")
            .replaces("1.2.0")
            .without_crd(),
    ]
}

fn image_of(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .first()?
        .image
        .clone()
}

fn image(package: &str, version: &str) -> String {
    format!("example.invalid/{package}:{version}")
}

/// Waits until `package`'s Deployment runs `version`.
async fn wait_running(client: &Client, package: &str, deployment: &str, version: &str) {
    let api = Api::<Deployment>::namespaced(client.clone(), package);
    let wanted = image(package, version);
    eventually(WAIT, &format!("{package} running {version}"), || async {
        let d = api.get_opt(deployment).await.ok()??;
        (image_of(&d).as_deref() == Some(wanted.as_str())).then_some(())
    })
    .await;
}

/// The revision at which the Deployment first ran `version`, from a log of its writes.
fn first_revision(events: &[Recorded<Deployment>], image: &str) -> Option<u64> {
    events
        .iter()
        .find(|e| image_of(&e.object).as_deref() == Some(image))
        .map(|e| e.revision)
}

async fn cluster_version(client: &Client) -> ClusterVersion {
    Api::<ClusterVersion>::all(client.clone())
        .get(CLUSTER_VERSION_NAME)
        .await
        .unwrap()
}

#[tokio::test]
async fn take_hops_before_the_cluster_moves_then_follows_the_update() {
    const PKG: &str = "hopper";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let bundles = chain(PKG);
    let deployment = bundles[0].deployment_name();
    // A released CVO: a refused request stays and is retried, Upgradeable rechecked 15 s
    // after a refusal (`pkg/cvo/upgradeable.go`).
    let cvo = Cvo::install_with(
        client.clone(),
        "4.16.3",
        &[AGGREGATED_CLUSTER_OPERATOR],
        CvoTiming::released(),
    )
    .await
    .unwrap();
    configmap_catalog(&client, "pre", &catalog_json(&bundles[..1], &[]), 0).await;
    create_po(
        &client,
        PKG,
        json!({"package": {"name": PKG}, "upgradeGate": "Rollout", "preUpdateHops": "Take"}),
    )
    .await;
    let manager = Manager::start(client.clone(), settings("4.16.3"));
    wait_running(&client, PKG, &deployment, "1.0.0").await;
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "pre", &fbc, 0).await;
    wait_catalog_serves(&client, "pre", &fbc).await;

    let deployments = EventLog::start(Api::<Deployment>::namespaced(client.clone(), PKG)).await;
    let versions = EventLog::start(Api::<ClusterVersion>::all(client.clone())).await;
    // The admin asks for 4.17.0: refused, since 1.0.0 stops at 4.16.
    match cvo.request_update("4.17.0", false).await.unwrap() {
        Admission::Pending { message, .. } => assert!(message.contains(PKG), "{message}"),
        accepted => {
            panic!("the update was accepted while {PKG} 1.0.0 allows only 4.16: {accepted:?}")
        }
    }
    // The CVO's loop retries the request; POM hops meanwhile.
    let cvo_loop = cvo.spawn_sync_loop(Duration::from_millis(500));
    let started = std::time::Instant::now();
    loop {
        let cv = cluster_version(&client).await;
        if cv.status.as_ref().map(|s| s.desired.version.as_str()) == Some("4.17.0") {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "the CVO did not accept 4.17.0 within {WAIT:?}: its conditions {:?}; the \
             aggregated Upgradeable {:?}; the PO's status {}",
            cv.status.map(|s| s.conditions),
            co_condition(&client, "Upgradeable").await,
            serde_json::to_string(
                &Api::<PlatformOperator>::all(client.clone())
                    .get(PKG)
                    .await
                    .unwrap()
                    .status
            )
            .unwrap()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let log = deployments.events();
    let at_1_1 = first_revision(&log, &image(PKG, "1.1.0")).expect("never ran 1.1.0");
    let at_1_2 = first_revision(&log, &image(PKG, "1.2.0")).expect("never ran 1.2.0");
    assert!(at_1_1 < at_1_2, "hops out of order: {at_1_1} then {at_1_2}");
    // The cluster stayed at 4.16.3 while the PO hopped: the first ClusterVersion write that
    // heads to 4.17.0 comes after the Deployment ran 1.2.0.
    let accepted_at = versions
        .events()
        .iter()
        .find(|e| {
            e.object
                .status
                .as_ref()
                .is_some_and(|s| s.desired.version == "4.17.0")
        })
        .map(|e| e.revision)
        .expect("the ClusterVersion log saw no acceptance");
    // 1.3.0 is a hop of the update itself: never before the CVO accepted it.
    assert!(
        first_revision(&log, &image(PKG, "1.3.0")).is_none_or(|r| r > accepted_at),
        "1.3.0 ran before the update was accepted (revision {accepted_at})"
    );
    assert!(
        accepted_at > at_1_2,
        "the CVO accepted 4.17.0 at revision {accepted_at}, before {PKG} ran 1.2.0 at {at_1_2}"
    );

    // The new payload's manager: the PO follows its update pin (>=1.2.0 <2.0.0-0) to 1.3.0,
    // and the update completes.
    manager.stop().await;
    let manager = Manager::start(client.clone(), settings("4.17.0"));
    wait_running(&client, PKG, &deployment, "1.3.0").await;
    eventually(WAIT, "the update to 4.17.0 completed", || async {
        let cv = cluster_version(&client).await;
        cv.status?
            .history
            .first()
            .filter(|h| h.version == "4.17.0" && h.state == "Completed")
            .map(|_| ())
    })
    .await;
    assert!(cvo_loop.stop().await.is_empty());
    manager.stop().await;
}

#[tokio::test]
async fn offered_hops_wait_for_the_admin_a_withdrawn_request_stops_them_and_no_path_is_named() {
    const OFFERED: &str = "offered";
    const STRANDED: &str = "stranded";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let offered = chain(OFFERED);
    // No bundle of `stranded` runs on 4.17: its nearest is 1.1.0.
    let stranded = [
        TestBundle::new(STRANDED, "1.0.0")
            .without_crd()
            .max_ocp("4.16"),
        TestBundle::new(STRANDED, "1.1.0")
            .replaces("1.0.0")
            .without_crd()
            .max_ocp("4.16"),
    ];
    let deployment = offered[0].deployment_name();
    let cvo = Cvo::install(client.clone(), "4.16.3", &[AGGREGATED_CLUSTER_OPERATOR])
        .await
        .unwrap();
    let firsts = [offered[0].clone(), stranded[0].clone()];
    configmap_catalog(&client, "pre", &catalog_json(&firsts, &[]), 0).await;
    create_po(
        &client,
        OFFERED,
        json!({"package": {"name": OFFERED}, "upgradeGate": "Rollout"}),
    )
    .await;
    create_po(
        &client,
        STRANDED,
        json!({"package": {"name": STRANDED}, "upgradeGate": "Rollout"}),
    )
    .await;
    let settings = settings("4.16.3");
    let manager = Manager::start(client.clone(), settings.clone());
    wait_running(&client, OFFERED, &deployment, "1.0.0").await;
    let mut all = offered.clone();
    all.extend(stranded.iter().cloned());
    let fbc = catalog_json(&all, &[]);
    configmap_catalog(&client, "pre", &fbc, 0).await;
    wait_catalog_serves(&client, "pre", &fbc).await;

    // Offered: nothing moves, watched from before the request over a window longer than
    // every resync.
    let untouched = QuietWindow::new(&settings)
        .no_writes(
            Api::<Deployment>::namespaced(client.clone(), OFFERED),
            Objects::All,
        )
        .open()
        .await;
    match cvo.request_update("4.17.0", false).await.unwrap() {
        Admission::Pending { .. } => {}
        accepted => panic!("accepted while both POs block: {accepted:?}"),
    }
    // The aggregated ClusterOperator (what the CVO reads) names the offered path and the
    // stranded PO's nearest bundle.
    let (_, _, message) = eventually(WAIT, "Upgradeable=False naming the offer", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|(s, _, m)| {
                s == "False" && m.contains("offers the hops") && m.contains("no catalog path")
            })
    })
    .await;
    assert!(
        message.contains("offered.v1.1.0 → offered.v1.2.0") && message.contains("stranded.v1.1.0"),
        "{message}"
    );

    untouched.hold().await;

    // The admin approves the first hop (as `pomctl approve` writes it).
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            OFFERED,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"approvedBundle": "offered.v1.1.0"}})),
        )
        .await
        .unwrap();
    wait_running(&client, OFFERED, &deployment, "1.1.0").await;
    // The request is withdrawn after the first hop: once the manager has seen that (the
    // PO's Upgradeable no longer speaks of it), the second hop never starts, even approved,
    // over a window longer than every resync.
    Api::<ClusterVersion>::all(client.clone())
        .patch(
            CLUSTER_VERSION_NAME,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"desiredUpdate": null}})),
        )
        .await
        .unwrap();
    // Seen when the PO's Upgradeable is back to the installed bundle's own verdict (not the
    // unsettled hop's, and no requested update in it).
    eventually(WAIT, "the withdrawal seen by the manager", || async {
        let (status, reason, message) = po_condition(&client, OFFERED, "Upgradeable").await?;
        (status == "False"
            && reason == "IncompatibleOperatorsInstalled"
            && !message.contains("requested update"))
        .then_some(())
    })
    .await;
    let stays = QuietWindow::new(&settings)
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), OFFERED),
            Objects::All,
            "the operator's image",
            |d: &Deployment| json!(image_of(d)),
        )
        .open()
        .await;
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            OFFERED,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"approvedBundle": "offered.v1.2.0"}})),
        )
        .await
        .unwrap();
    stays.hold().await;
    wait_running(&client, OFFERED, &deployment, "1.1.0").await;
    manager.stop().await;
}
