#![allow(clippy::unwrap_used, clippy::expect_used)]
//! §8.2 against the simulated CVO: the aggregated ClusterOperator reports `versions[operator]`
//! = the new release only once every PlatformOperator reached its pin for the cluster update,
//! so a CVO that holds an update open until every payload ClusterOperator reports the payload
//! version waits for the POs. A PO whose next hop cannot happen (its bundle image is missing
//! from the registry: `UnpackFailed`) or is refused by the manager (`UnsafeCRDChange`) keeps
//! the version withheld, and the update open, for a window longer than every resync of the
//! manager; once the obstacle is lifted the hop happens, the version is reported and the update
//! completes.
//!
//! The CVO's rollout of the new payload is played as the CVO simulator documents it: after the
//! update starts, the in-process manager is restarted with `release_version` = the target.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::Client;
use kube::api::{Api, PostParams};
use pom_api::PlatformOperator;
use pom_api::olm::OperatorCondition;
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, CLUSTER_VERSION_NAME, ClusterOperator, ClusterVersion,
};
use pom_controller::context::Settings;
use pom_e2e::Registry;
use pom_e2e::cvo::{Cvo, Progress, UpdateKind};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually, po_condition};
use pom_e2e::oci_publish::push_files;
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    co_condition, configmap_catalog, create_po, now, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
const FROM: &str = "4.16.3";
const TO: &str = "4.17.0";

/// `versions[operator]` of the aggregated ClusterOperator.
async fn co_version(client: &Client) -> Option<String> {
    let co = Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .ok()??;
    operator_version(&co)
}

fn operator_version(co: &ClusterOperator) -> Option<String> {
    co.status
        .as_ref()?
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.clone())
}

/// Waits until PO `po` runs `version`, settled, with no move pending, under a pin of `reason`;
/// a timeout shows the last status seen.
async fn settled_at(client: &Client, po: &str, version: &str, reason: &str) {
    let api = Api::<PlatformOperator>::all(client.clone());
    let deadline = Instant::now() + WAIT;
    let mut last = None;
    loop {
        if let Ok(current) = api.get(po).await {
            let ok = current.status.as_ref().is_some_and(|status| {
                status.observed_generation == current.metadata.generation
                    && status
                        .installed_bundle
                        .as_ref()
                        .is_some_and(|b| b.version == version)
                    && status.active_hop.as_ref().is_some_and(|h| h.settled)
                    && status.desired_bundle.is_none()
                    && status
                        .pin
                        .as_ref()
                        .is_some_and(|p| p.reason.as_str() == reason)
            });
            if ok {
                return;
            }
            last = current.status;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {WAIT:?} waiting for {po} settled at {version} with pin reason \
             {reason}; last status: {last:#?}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Settings of a manager built from the payload of release `release`.
fn settings(registry: Option<&str>, release: &str) -> Settings {
    Settings {
        release_version: release.to_owned(),
        ..Manager::test_settings(registry.into_iter().map(str::to_owned).collect())
    }
}

/// The CVO rolls out the new payload: the manager restarts with `release_version` = `release`.
async fn roll_out_manager(old: Manager, client: &Client, settings: &Settings) -> Manager {
    old.stop().await;
    Manager::start(client.clone(), settings.clone())
}

/// Installs the cluster at [`FROM`] (payload: the aggregated ClusterOperator), waits until
/// the ClusterOperator reports [`FROM`] and is upgradeable, and starts the minor update to
/// [`TO`].
async fn start_minor_update(client: &Client, cvo: &Cvo) {
    eventually(
        WAIT,
        &format!("the ClusterOperator to report versions[operator]={FROM}"),
        || async { (co_version(client).await.as_deref() == Some(FROM)).then_some(()) },
    )
    .await;
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(5)).await.unwrap(),
        FROM,
        "the installed cluster is steady"
    );
    eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=True",
        || async {
            co_condition(client, "Upgradeable")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    assert_eq!(cvo.start_update(TO).await.unwrap(), UpdateKind::Minor);
}

fn co_condition_is(co: &ClusterOperator, type_: &str, status: &str) -> bool {
    co.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == type_ && c.status == status)
    })
}

/// The update to [`TO`] stays open and the ClusterOperator never reports [`TO`], watched over
/// a window longer than every periodic interval of the manager (`settings`), while the CVO
/// checks for completion every second, as the real one keeps doing. With `healthy`, the
/// ClusterOperator also stays Available=True and Degraded=False all along, so its version is
/// the only thing the CVO waits on. Returns how long the window held.
async fn update_stays_open(
    client: &Client,
    cvo: &Cvo,
    settings: &Settings,
    healthy: bool,
) -> Duration {
    let cos = || Api::<ClusterOperator>::all(client.clone());
    let mut window = QuietWindow::new(settings)
        .never(
            cos(),
            AGGREGATED_CLUSTER_OPERATOR,
            &format!("versions[operator]={TO}"),
            |co| operator_version(co).as_deref() == Some(TO),
        )
        .never(
            Api::<ClusterVersion>::all(client.clone()),
            CLUSTER_VERSION_NAME,
            &format!("Completed the update to {TO}"),
            |cv| {
                cv.status
                    .as_ref()
                    .and_then(|s| s.history.first())
                    .is_some_and(|h| h.state == "Completed" && h.version == TO)
            },
        );
    if healthy {
        window = window
            .never(
                cos(),
                AGGREGATED_CLUSTER_OPERATOR,
                "Degraded!=False",
                |co| !co_condition_is(co, "Degraded", "False"),
            )
            .never(
                cos(),
                AGGREGATED_CLUSTER_OPERATOR,
                "Available!=True",
                |co| !co_condition_is(co, "Available", "True"),
            );
    }
    assert!(
        window.length() > settings.resync_interval
            && window.length() > pom_e2e::quiet::CLUSTER_OPERATOR_RESYNC,
        "the window must outlast every resync"
    );
    let window = window.open().await;
    let waiting_on = if healthy {
        format!("Cluster operator {AGGREGATED_CLUSTER_OPERATOR} is updating versions")
    } else {
        format!("Cluster operator {AGGREGATED_CLUSTER_OPERATOR} is ")
    };
    let mut checks = 0u32;
    let cvo_keeps_waiting = async {
        loop {
            match cvo.try_complete().await.unwrap() {
                Progress::Waiting(lines) => assert!(
                    !lines.is_empty() && lines.iter().all(|l| l.starts_with(&waiting_on)),
                    "the CVO must wait on the aggregated ClusterOperator ({waiting_on}...): \
                     {lines:?}"
                ),
                other => panic!("the update to {TO} must stay open, but: {other:?}"),
            }
            checks += 1;
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    let held = tokio::select! {
        held = window.hold() => held,
        () = cvo_keeps_waiting => unreachable!("the CVO loop never ends"),
    };
    assert!(checks >= 20, "the CVO checked only {checks} times");
    let cv = cvo.cluster_version().await.unwrap();
    let head = &cv.status.as_ref().unwrap().history[0];
    assert_eq!(
        (head.state.as_str(), head.version.as_str()),
        ("Partial", TO)
    );
    assert_eq!(co_version(client).await.as_deref(), Some(FROM));
    held
}

/// Two POs; a minor cluster update starts; `hopper` hops at once, `stuck`'s next bundle image
/// is missing from the registry. The update stays open and the version withheld for longer
/// than every resync; once the image is published the hop happens and the update completes.
#[tokio::test]
async fn versions_are_withheld_while_a_po_cannot_reach_its_pin() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();

    // hopper: bundles carried by the catalog. stuck: bundle images; the image of 1.1.0 is
    // pushed to a staging repository only, so the catalog's reference (same digest, the
    // release repository) does not exist yet.
    let hopper = [
        TestBundle::new("hopper", "1.0.0"),
        TestBundle::new("hopper", "1.1.0").replaces("1.0.0"),
    ];
    let stuck_v1 = TestBundle::new("stuck", "1.0.0");
    let stuck_v2 = TestBundle::new("stuck", "1.1.0").replaces("1.0.0");
    let stuck_v1_image = push_files(&host, "bundles/stuck", "1.0.0", &stuck_v1.image_files())
        .await
        .unwrap();
    let staged = push_files(
        &host,
        "bundles/stuck-staging",
        "1.1.0",
        &stuck_v2.image_files(),
    )
    .await
    .unwrap();
    let stuck_v2_image = staged.replace("/bundles/stuck-staging@", "/bundles/stuck@");
    assert_ne!(staged, stuck_v2_image);
    let images = [
        (stuck_v1.name(), stuck_v1_image),
        (stuck_v2.name(), stuck_v2_image.clone()),
    ];
    // First only 1.0.0 of each (a first install takes the highest bundle).
    let firsts = [hopper[0].clone(), stuck_v1.clone()];
    configmap_catalog(&client, "main", &catalog_json(&firsts, &images), 0).await;

    let cvo = Cvo::install(client.clone(), FROM, &[AGGREGATED_CLUSTER_OPERATOR])
        .await
        .unwrap();
    create_po(&client, "hopper", json!({"package": {"name": "hopper"}})).await;
    create_po(&client, "stuck", json!({"package": {"name": "stuck"}})).await;
    let manager = Manager::start(client.clone(), settings(Some(&host), FROM));
    settled_at(&client, "hopper", "1.0.0", "Steady").await;
    settled_at(&client, "stuck", "1.0.0", "Steady").await;
    // The publisher ships 1.1.0 of both; steady pins keep them at 1.0.0.
    let mut bundles = hopper.to_vec();
    bundles.extend([stuck_v1.clone(), stuck_v2.clone()]);
    let fbc = catalog_json(&bundles, &images);
    configmap_catalog(&client, "main", &fbc, 0).await;
    wait_catalog_serves(&client, "main", &fbc).await;
    start_minor_update(&client, &cvo).await;
    let settings = settings(Some(&host), TO);
    let manager = roll_out_manager(manager, &client, &settings).await;

    // hopper reaches its pin at once; stuck's hop cannot start: its image is missing.
    settled_at(&client, "hopper", "1.1.0", "MinorUpgrade").await;
    let message =
        wait_po_condition(&client, "stuck", "Degraded", "True", Some("UnpackFailed")).await;
    assert!(
        message.contains(&stuck_v2_image),
        "the message must name the missing image: {message}"
    );
    let status = Api::<PlatformOperator>::all(client.clone())
        .get("stuck")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.installed_bundle.unwrap().version, "1.0.0");
    assert_eq!(
        status.desired_bundle.map(|b| b.name),
        Some(stuck_v2.name()),
        "the hop is still owed"
    );

    let held = update_stays_open(&client, &cvo, &settings, false).await;
    println!("update to {TO} held open (versions withheld) for {held:?}");

    // The publisher pushes the missing image (same content, same digest): the hop happens, the
    // version is reported and the update completes.
    let pushed = push_files(&host, "bundles/stuck", "1.1.0", &stuck_v2.image_files())
        .await
        .unwrap();
    assert_eq!(
        pushed, stuck_v2_image,
        "the same files give the same digest"
    );
    settled_at(&client, "stuck", "1.1.0", "MinorUpgrade").await;
    assert_eq!(cvo.wait_completed(WAIT).await.unwrap(), TO);
    assert_eq!(co_version(&client).await.as_deref(), Some(TO));
    assert_eq!(cvo.current_version().await.unwrap(), TO);
    let (degraded, reason, _) = po_condition(&client, "stuck", "Degraded").await.unwrap();
    assert_eq!(
        (degraded.as_str(), reason.as_str()),
        ("False", "AsExpected")
    );
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// A hop the manager refuses (the next bundle changes its CRD unsafely) keeps the version
/// withheld although the PO's pin is already the update's: the move is still owed. A safe
/// bundle lifts it.
#[tokio::test]
async fn a_hop_refused_for_an_unsafe_crd_change_keeps_versions_withheld() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let v100 = TestBundle::new("crdop", "1.0.0");
    let mut v110 = TestBundle::new("crdop", "1.1.0").replaces("1.0.0");
    v110.crd_size_type = "string";
    let bundles = vec![v100.clone(), v110.clone()];
    // First only 1.0.0 (a first install takes the highest bundle).
    configmap_catalog(&client, "main", &catalog_json(&bundles[..1], &[]), 0).await;
    let cvo = Cvo::install(client.clone(), FROM, &[AGGREGATED_CLUSTER_OPERATOR])
        .await
        .unwrap();
    create_po(&client, "crdop", json!({"package": {"name": "crdop"}})).await;
    let manager = Manager::start(client.clone(), settings(None, FROM));
    settled_at(&client, "crdop", "1.0.0", "Steady").await;
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "main", &fbc, 0).await;
    wait_catalog_serves(&client, "main", &fbc).await;
    start_minor_update(&client, &cvo).await;
    let settings = settings(None, TO);
    let manager = roll_out_manager(manager, &client, &settings).await;

    let message = wait_po_condition(
        &client,
        "crdop",
        "Degraded",
        "True",
        Some("UnsafeCRDChange"),
    )
    .await;
    assert!(
        message.contains(&v110.name()) && message.contains(&v100.crd_name()),
        "the message must name the bundle and the CRD: {message}"
    );
    let status = Api::<PlatformOperator>::all(client.clone())
        .get("crdop")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.installed_bundle.unwrap().version, "1.0.0");
    let pin = status.pin.unwrap();
    assert_eq!(
        (pin.range.as_str(), pin.reason.as_str()),
        (">=1.0.0 <2.0.0-0", "MinorUpgrade"),
        "the pin is the update's: only the refused move is owed"
    );
    assert_eq!(status.desired_bundle.map(|b| b.name), Some(v110.name()));

    let held = update_stays_open(&client, &cvo, &settings, false).await;
    println!("update to {TO} held open (versions withheld) for {held:?}");

    // The publisher ships a safe 1.1.1 that skips 1.1.0: the hop happens, the update completes.
    let mut v111 = TestBundle::new("crdop", "1.1.1").replaces("1.1.0");
    v111.skip_range = Some(">=1.0.0 <1.1.1".into());
    let mut fixed = bundles.clone();
    fixed.push(v111);
    let fbc = catalog_json(&fixed, &[]);
    configmap_catalog(&client, "main", &fbc, 0).await;
    wait_catalog_serves(&client, "main", &fbc).await;
    settled_at(&client, "crdop", "1.1.1", "MinorUpgrade").await;
    assert_eq!(cvo.wait_completed(WAIT).await.unwrap(), TO);
    assert_eq!(co_version(&client).await.as_deref(), Some(TO));
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// Plays the operator of bundle `csv` in namespace `namespace`: writes `Upgradeable` into its
/// OperatorCondition's `spec.conditions`, as operator-lib does.
async fn report(client: &Client, namespace: &str, csv: &str, upgradeable: bool, message: &str) {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), namespace);
    let mut oc = eventually(
        WAIT,
        &format!("OperatorCondition {namespace}/{csv} to exist"),
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

/// Nothing is degraded: the update starts, then the operator of `gated` says
/// `Upgradeable=False` (a migration), which holds its next hop (`upgradeGate:
/// OperatorCondition`). The ClusterOperator stays Available and not Degraded, so its withheld
/// version is the only thing the CVO waits on; once the operator says True the hop happens and
/// the update completes.
#[tokio::test]
async fn a_hop_held_by_the_operator_keeps_versions_withheld_with_nothing_degraded() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let hopper = [
        TestBundle::new("hopper", "1.0.0"),
        TestBundle::new("hopper", "1.1.0").replaces("1.0.0"),
    ];
    let gated = [
        TestBundle::new("gated", "1.0.0"),
        TestBundle::new("gated", "1.1.0").replaces("1.0.0"),
    ];
    configmap_catalog(
        &client,
        "main",
        &catalog_json(&[hopper[0].clone(), gated[0].clone()], &[]),
        0,
    )
    .await;
    let cvo = Cvo::install(client.clone(), FROM, &[AGGREGATED_CLUSTER_OPERATOR])
        .await
        .unwrap();
    create_po(&client, "hopper", json!({"package": {"name": "hopper"}})).await;
    create_po(
        &client,
        "gated",
        json!({"package": {"name": "gated"}, "upgradeGate": "OperatorCondition"}),
    )
    .await;
    let manager = Manager::start(client.clone(), settings(None, FROM));
    report(&client, "gated", &gated[0].name(), true, "ready").await;
    settled_at(&client, "hopper", "1.0.0", "Steady").await;
    settled_at(&client, "gated", "1.0.0", "Steady").await;
    let mut all = hopper.to_vec();
    all.extend(gated.iter().cloned());
    let fbc = catalog_json(&all, &[]);
    configmap_catalog(&client, "main", &fbc, 0).await;
    wait_catalog_serves(&client, "main", &fbc).await;
    // The manager stops before the update starts: running, it could hop gated (whose operator
    // still says True) before the operator's migration below begins. The ClusterOperator it
    // wrote (versions FROM, Upgradeable=True) is what the CVO admits the update on.
    eventually(
        WAIT,
        "the ClusterOperator to be upgradeable at FROM",
        || async {
            let upgradeable = co_condition(&client, "Upgradeable").await?;
            (upgradeable.0 == "True" && co_version(&client).await.as_deref() == Some(FROM))
                .then_some(())
        },
    )
    .await;
    manager.stop().await;
    start_minor_update(&client, &cvo).await;

    // The CVO rolls out the new payload; meanwhile (no manager running) gated's operator starts
    // a migration and says it must not be upgraded.
    report(
        &client,
        "gated",
        &gated[0].name(),
        false,
        "migrating the widget store",
    )
    .await;
    let settings = settings(None, TO);
    let manager = Manager::start(client.clone(), settings.clone());

    settled_at(&client, "hopper", "1.1.0", "MinorUpgrade").await;
    // Held from the first look (the operator's condition is stale until POM copies it), then
    // with the operator's own words.
    let (status, reason, message) = eventually(
        WAIT,
        "gated's Progressing to carry the operator's words",
        || async {
            po_condition(&client, "gated", "Progressing")
                .await
                .filter(|c| c.2.contains("migrating the widget store"))
        },
    )
    .await;
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Upgrading"));
    assert!(
        message.contains(&gated[1].name())
            && message.contains("held: the operator reports Upgradeable=False"),
        "the message must name the held move and why: {message}"
    );
    let (degraded, reason, _) = po_condition(&client, "gated", "Degraded").await.unwrap();
    assert_eq!(
        (degraded.as_str(), reason.as_str()),
        ("False", "AsExpected")
    );
    let status = Api::<PlatformOperator>::all(client.clone())
        .get("gated")
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(status.installed_bundle.unwrap().version, "1.0.0");
    assert_eq!(status.desired_bundle.map(|b| b.name), Some(gated[1].name()));
    assert_eq!(status.pin.unwrap().reason.as_str(), "MinorUpgrade");
    eventually(
        WAIT,
        "the ClusterOperator to be Available and not Degraded",
        || async {
            let available = co_condition(&client, "Available").await?.0 == "True";
            let degraded = co_condition(&client, "Degraded").await?.0 == "False";
            (available && degraded).then_some(())
        },
    )
    .await;

    let held = update_stays_open(&client, &cvo, &settings, true).await;
    println!("update to {TO} held open by the withheld version alone for {held:?}");

    // The migration is done: the hop happens, its operator reports, the update completes.
    report(&client, "gated", &gated[0].name(), true, "migration done").await;
    report(&client, "gated", &gated[1].name(), true, "ready").await;
    settled_at(&client, "gated", "1.1.0", "MinorUpgrade").await;
    assert_eq!(cvo.wait_completed(WAIT).await.unwrap(), TO);
    assert_eq!(co_version(&client).await.as_deref(), Some(TO));
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}
