#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Moves of PlatformOperators with the cluster (§3, §4.2, §8.2), against a real control plane:
//!
//! - a manual downgrade through `spec.steadyStateVersionRange`;
//! - the rollback pivot: during a cluster rollback a PO whose installed bundle cannot run on the
//!   rollback target moves down to one that can;
//! - sixteen POs hopping 7.9.3 → 7.10.0 → 7.10.1 during a minor update while the aggregated
//!   ClusterOperator never says Upgradeable=True at any instant (a historical defect flickered
//!   it True for 0.2–0.9 s between hops), and no PO says Progressing=False with a move pending.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_controller::context::Settings;
use pom_e2e::cvo::{Cvo, Progress, UpdateKind};
use pom_e2e::event_log::{Change, EventLog, Recorded, revision_of};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    WAIT, co_condition, configmap_catalog, create_po, set_cluster, simulated_plane,
    wait_catalog_serves,
};
use serde_json::{Value, json};

/// The manager's settings: a 5 s PlatformOperator resync (catalog poll 5 s too), so that the
/// quiet windows, which must outlast every resync, last 10 s.
fn settings() -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    }
}

/// Publishes `bundles` as the whole content of ConfigMap catalog `moves`.
async fn publish(client: &Client, bundles: &[TestBundle]) -> String {
    let fbc = catalog_json(bundles, &[]);
    configmap_catalog(client, "moves", &fbc, 0).await;
    fbc
}

/// Publishes `bundles` and waits until the running manager serves them.
async fn publish_served(client: &Client, bundles: &[TestBundle]) {
    let fbc = publish(client, bundles).await;
    wait_catalog_serves(client, "moves", &fbc).await;
}

fn pos(client: &Client) -> Api<PlatformOperator> {
    Api::all(client.clone())
}

/// The installed version, its pin (range, reason) and whether the move settled with nothing
/// pending.
fn standing(po: &PlatformOperator) -> Option<(String, String, String, bool)> {
    let status = po.status.as_ref()?;
    let pin = status.pin.as_ref()?;
    Some((
        status.installed_bundle.as_ref()?.version.clone(),
        pin.range.clone(),
        pin.reason.to_string(),
        status.active_hop.as_ref()?.settled && status.desired_bundle.is_none(),
    ))
}

/// Waits until PO `name` runs `version`, settled, nothing pending, with a pin of `reason`;
/// returns the pin's range. On timeout, the failure shows the PO's status.
async fn wait_at(client: &Client, name: &str, version: &str, reason: &str) -> String {
    let started = std::time::Instant::now();
    loop {
        let po = pos(client).get(name).await.ok();
        if let Some((v, range, r, settled)) = po.as_ref().and_then(standing)
            && v == version
            && r == reason
            && settled
        {
            return range;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for {name} settled at {version} with pin reason \
             {reason}; its status: {}",
            serde_json::to_string_pretty(&po.and_then(|p| p.status)).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// One line per recorded version of PO `key`: what a failure about its history shows.
fn history(events: &[Recorded<PlatformOperator>], key: &str) -> String {
    events
        .iter()
        .filter(|e| e.key == key)
        .map(|e| {
            let s = e.object.status.as_ref();
            let conditions: Vec<String> = s
                .iter()
                .flat_map(|s| s.conditions.iter())
                .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                .collect();
            format!(
                "rev {} {:?}: installed {:?} hop {:?} desired {:?} pin {:?} [{}]",
                e.revision,
                e.change,
                s.and_then(|s| s.installed_bundle.as_ref())
                    .map(|b| &b.version),
                s.and_then(|s| s.active_hop.as_ref()).map(|h| (
                    &h.from,
                    &h.to,
                    h.settled,
                    &h.started_at
                )),
                s.and_then(|s| s.desired_bundle.as_ref())
                    .map(|b| &b.version),
                s.and_then(|s| s.pin.as_ref()).map(|p| &p.range),
                conditions.join(" ")
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Asserts the current condition `type_` of PO `name` is exactly (status, reason).
async fn assert_condition(client: &Client, name: &str, type_: &str, status: &str, reason: &str) {
    let (s, r, m) = po_condition(client, name, type_)
        .await
        .unwrap_or_else(|| panic!("{name} has no {type_} for its generation"));
    assert_eq!((s.as_str(), r.as_str()), (status, reason), "{type_}: {m}");
}

/// What must not change once a PO is where it should be: the installed bundle, the move and
/// the pin.
fn at_rest(po: &PlatformOperator) -> Value {
    let status = po.status.as_ref();
    json!({
        "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.name),
        "activeHop": status.and_then(|s| s.active_hop.as_ref()).map(|h| json!({"from": h.from, "to": h.to, "settled": h.settled})),
        "desiredBundle": status.and_then(|s| s.desired_bundle.as_ref()).map(|b| &b.name),
        "pin": status.and_then(|s| s.pin.as_ref()),
    })
}

fn is(po: &PlatformOperator, type_: &str, status: &str) -> bool {
    condition_of(po, type_).is_some_and(|(s, _, _)| s == status)
}

/// (e) Installed 1.1.0 on a steady cluster; the admin sets `steadyStateVersionRange: "=1.0.0"`
/// and the PO moves down to 1.0.0 (catalog edges only point up: 1.1.0 replaces 1.0.0), reaches
/// Installed=True and is never Degraded on the way; the pin is `=1.0.0` with reason Override,
/// and it stays there over a window longer than every resync.
#[tokio::test]
async fn steady_state_range_moves_a_po_down_by_hand() {
    const PO: &str = "downop";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let v100 = TestBundle::new(PO, "1.0.0");
    let v110 = TestBundle::new(PO, "1.1.0").replaces("1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, &[v100.clone(), v110.clone()]).await;
    create_po(&client, PO, json!({"package": {"name": PO}})).await;
    let manager = Manager::start(client.clone(), settings.clone());
    let range = wait_at(&client, PO, "1.1.0", "Steady").await;
    assert_eq!(range, "=1.1.0");

    let log = EventLog::start(pos(&client)).await;
    pos(&client)
        .patch(
            PO,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": "=1.0.0"}})),
        )
        .await
        .unwrap();
    let range = wait_at(&client, PO, "1.0.0", "Override").await;
    assert_eq!(range, "=1.0.0");
    let po = pos(&client).get(PO).await.unwrap();
    let hop = po.status.as_ref().unwrap().active_hop.clone().unwrap();
    assert_eq!(
        (hop.from.as_deref(), hop.to.as_str()),
        (Some(v110.name().as_str()), v100.name().as_str()),
        "one move, straight down"
    );
    assert_condition(&client, PO, "Installed", "True", "InstallSucceeded").await;
    assert_condition(&client, PO, "Degraded", "False", "AsExpected").await;
    assert_condition(&client, PO, "Progressing", "False", "AsExpected").await;
    assert_condition(&client, PO, "Upgradeable", "True", "AsExpected").await;
    let image = Api::<Deployment>::namespaced(client.clone(), PO)
        .get(&v100.deployment_name())
        .await
        .unwrap()
        .spec
        .and_then(|s| s.template.spec)
        .map(|p| p.containers[0].image.clone().unwrap_or_default());
    assert_eq!(image.as_deref(), Some("example.invalid/downop:1.0.0"));

    // It stays down (1.1.0 is a successor of 1.0.0, but outside the admin's range), and is never
    // Degraded nor not Installed.
    QuietWindow::new(&settings)
        .unchanged(
            pos(&client),
            PO,
            "the installed bundle, the move and the pin",
            at_rest,
        )
        .never(pos(&client), PO, "Degraded=True", |po| {
            is(po, "Degraded", "True")
        })
        .open()
        .await
        .hold()
        .await;
    // On the way down, no version of the PO said Degraded=True or Installed=False.
    for e in log.events() {
        assert!(
            !is(&e.object, "Degraded", "True") && !is(&e.object, "Installed", "False"),
            "at revision {}: {:?}",
            e.revision,
            e.object.status
        );
    }
    manager.stop().await;
}

/// (f) The rollback pivot (§4.2). A patch update 4.16.3 → 4.16.4 moves the PO from 1.0.0 to
/// 1.0.1. The vendor then marks 1.0.1 `maxOpenShiftVersion: 4.15` in the catalog (it must not
/// run on 4.16). While the cluster is steady the pin `=1.0.1` keeps it (nothing moves in steady
/// state); when the CVO rolls the cluster back to 4.16.3, 1.0.1 is incompatible with the
/// rollback target, so instead of the `=1.0.1` hold the PO pivots down to 1.0.0, which runs on
/// 4.16.3, with pin reason Rollback.
///
/// Why the catalog changes: `maxOpenShiftVersion` is a major.minor upper bound, so a z-stream
/// rollback (the only one the CVO allows) can never make a bundle that ran on X.Y.(Z+1)
/// incompatible with X.Y.Z by its own metadata; the pivot can only be triggered by the
/// catalog's metadata for the installed bundle (looked up by name) changing.
#[tokio::test]
async fn rollback_pivots_down_to_a_bundle_that_runs_on_the_rollback_target() {
    const PO: &str = "pivotop";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let v100 = TestBundle::new(PO, "1.0.0").max_ocp("4.16");
    let v101 = TestBundle::new(PO, "1.0.1")
        .replaces("1.0.0")
        .max_ocp("4.16");
    let cvo = Cvo::install(client.clone(), "4.16.3", &[]).await.unwrap();
    publish(&client, std::slice::from_ref(&v100)).await;
    create_po(&client, PO, json!({"package": {"name": PO}})).await;
    let manager = Manager::start(client.clone(), settings.clone());
    assert_eq!(wait_at(&client, PO, "1.0.0", "Steady").await, "=1.0.0");

    publish_served(&client, &[v100.clone(), v101.clone()]).await;
    assert_eq!(cvo.start_update("4.16.4").await.unwrap(), UpdateKind::Patch);
    assert_eq!(
        wait_at(&client, PO, "1.0.1", "PatchUpgrade").await,
        ">=1.0.1 <1.1.0-0"
    );
    assert_eq!(
        cvo.try_complete().await.unwrap(),
        Progress::Completed("4.16.4".into())
    );
    assert_eq!(wait_at(&client, PO, "1.0.1", "Steady").await, "=1.0.1");

    // The vendor withdraws 1.0.1 from 4.16. Steady: the PO keeps running it.
    let withdrawn = v101.clone().max_ocp("4.15");
    publish_served(&client, &[v100.clone(), withdrawn]).await;
    QuietWindow::new(&settings)
        .unchanged(
            pos(&client),
            PO,
            "the installed bundle and the move",
            |po| {
                let mut at = at_rest(po);
                at.as_object_mut().map(|m| m.remove("pin"));
                at
            },
        )
        .open()
        .await
        .hold()
        .await;

    // The rollback: the PO pivots down to 1.0.0, pinned there for the rollback.
    let log = EventLog::start(pos(&client)).await;
    cvo.rollback("4.16.3").await.unwrap();
    assert_eq!(wait_at(&client, PO, "1.0.0", "Rollback").await, "=1.0.0");
    let status = pos(&client).get(PO).await.unwrap().status.unwrap();
    let hop = status.active_hop.unwrap();
    assert_eq!(
        (hop.from.as_deref(), hop.to.as_str()),
        (Some(v101.name().as_str()), v100.name().as_str())
    );
    assert_eq!(status.max_open_shift_version.as_deref(), Some("4.16"));
    assert_condition(&client, PO, "Installed", "True", "InstallSucceeded").await;
    assert_condition(&client, PO, "Degraded", "False", "AsExpected").await;
    assert_condition(&client, PO, "Progressing", "False", "AsExpected").await;
    // No version written during the rollback is Degraded.
    for e in log.events().iter().filter(|e| e.change != Change::Listed) {
        assert!(
            !is(&e.object, "Degraded", "True"),
            "at revision {}: {:?}",
            e.revision,
            e.object.status
        );
    }
    // Pinned at 1.0.0 for the rest of the rollback: no move back up, over every resync.
    QuietWindow::new(&settings)
        .unchanged(
            pos(&client),
            PO,
            "the installed bundle, the move and the pin",
            at_rest,
        )
        .open()
        .await
        .hold()
        .await;
    // The rollback completes: steady at 4.16.3, `=1.0.0`.
    assert_eq!(
        cvo.try_complete().await.unwrap(),
        Progress::Completed("4.16.3".into())
    );
    assert_eq!(wait_at(&client, PO, "1.0.0", "Steady").await, "=1.0.0");
    manager.stop().await;
}

/// How many POs hop together in (g).
const FLEET: usize = 16;

fn fleet_name(i: usize) -> String {
    format!("fleet{i:02}")
}

fn upgradeable_true(co: &ClusterOperator) -> bool {
    co.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Upgradeable" && c.status == "True")
    })
}

fn co_upgradeable(co: &ClusterOperator) -> Option<(String, String)> {
    let c = co
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Upgradeable")?;
    Some((c.status.clone(), c.reason.clone().unwrap_or_default()))
}

/// Each PO's last recorded version before `revision`, one line each.
fn fleet_at(events: &[Recorded<PlatformOperator>], revision: u64) -> String {
    let mut last: BTreeMap<&str, &Recorded<PlatformOperator>> = BTreeMap::new();
    for e in events.iter().filter(|e| e.revision < revision) {
        last.insert(&e.key, e);
    }
    last.values()
        .map(|e| {
            let s = e.object.status.as_ref();
            format!(
                "  {} (rev {}{}): installed {:?} hop settled {:?} desired {:?} Progressing {:?} Upgradeable {:?}",
                e.key,
                e.revision,
                if e.change == Change::Listed {
                    ", not written since the update started"
                } else {
                    ""
                },
                s.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.version),
                s.and_then(|s| s.active_hop.as_ref()).map(|h| h.settled),
                s.and_then(|s| s.desired_bundle.as_ref()).map(|b| &b.version),
                condition_of(&e.object, "Progressing").map(|c| c.1),
                condition_of(&e.object, "Upgradeable").map(|c| c.1),
            )
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Settled at `version` with nothing pending and Progressing=False.
fn settled_at(po: &PlatformOperator, version: &str) -> bool {
    standing(po).is_some_and(|(v, _, _, settled)| v == version && settled)
        && is(po, "Progressing", "False")
}

/// (g) Sixteen POs (sixteen packages, `upgradeGate: Rollout`) at 7.9.3 on a steady 4.16.3
/// cluster with 7.10.0 (replaces 7.9.3) and 7.10.1 (replaces 7.10.0) in the catalog. The CVO
/// accepts a minor update to 4.17.0 and every PO hops twice. Watches on the aggregated
/// ClusterOperator and on every PO, opened before the update starts, record every version
/// written until all sixteen have settled at 7.10.1:
///
/// - no ClusterOperator version written between the start of the update and the last PO
///   settling says Upgradeable=True (revisions order them: one etcd);
/// - no PO version says Progressing=False while a move is pending (desiredBundle set) or while
///   it runs 7.10.0, which is never a resting point here;
/// - every PO went through 7.10.0 (one hop at a time), and the ClusterOperator does say
///   Upgradeable=True once they are all done (the watch was alive).
#[tokio::test]
async fn aggregated_upgradeable_never_flickers_true_while_sixteen_pos_hop() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let names: Vec<String> = (0..FLEET).map(fleet_name).collect();
    let chain = |name: &str| {
        [
            TestBundle::new(name, "7.9.3").without_crd(),
            TestBundle::new(name, "7.10.0")
                .replaces("7.9.3")
                .without_crd(),
            TestBundle::new(name, "7.10.1")
                .replaces("7.10.0")
                .without_crd(),
        ]
    };
    let all: Vec<TestBundle> = names.iter().flat_map(|n| chain(n)).collect();
    let first: Vec<TestBundle> = all
        .iter()
        .filter(|b| b.version == "7.9.3")
        .cloned()
        .collect();
    let cvo = Cvo::install(client.clone(), "4.16.3", &[]).await.unwrap();
    publish(&client, &first).await;
    for name in &names {
        create_po(
            &client,
            name,
            json!({"package": {"name": name}, "upgradeGate": "Rollout"}),
        )
        .await;
    }
    let manager = Manager::start(client.clone(), settings.clone());
    for name in &names {
        wait_at(&client, name, "7.9.3", "Steady").await;
    }
    publish_served(&client, &all).await;
    eventually(WAIT, "the ClusterOperator Upgradeable=True", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    for name in &names {
        wait_at(&client, name, "7.9.3", "Steady").await;
    }

    // Watches open before the update starts.
    let co_log = EventLog::start(Api::<ClusterOperator>::all(client.clone())).await;
    let po_log = EventLog::start(pos(&client)).await;
    assert_eq!(cvo.start_update("4.17.0").await.unwrap(), UpdateKind::Minor);
    let update_started = revision_of(&cvo.cluster_version().await.unwrap());

    // The revision at which the last PO settled at 7.10.1.
    let started = std::time::Instant::now();
    let all_done = po_log
        .wait_for(
            WAIT,
            "every PO settled at 7.10.1",
            |events: &[Recorded<PlatformOperator>]| {
                let mut done: BTreeMap<&str, bool> = BTreeMap::new();
                for e in events {
                    done.insert(&e.key, settled_at(&e.object, "7.10.1"));
                    if done.len() == FLEET && done.values().all(|d| *d) {
                        return Some(e.revision);
                    }
                }
                None
            },
        )
        .await;
    let hopping_for = started.elapsed();
    // The ClusterOperator's first Upgradeable=True after that: every version before it is in
    // the log (a watch delivers in revision order).
    let back_to_true = co_log
        .wait_for(
            WAIT,
            "the ClusterOperator Upgradeable=True once every PO settled",
            |events: &[Recorded<ClusterOperator>]| {
                events
                    .iter()
                    .find(|e| e.revision > update_started && upgradeable_true(&e.object))
                    .map(|e| e.revision)
            },
        )
        .await;

    let co_events = co_log.events();
    let during: Vec<&Recorded<ClusterOperator>> = co_events
        .iter()
        .filter(|e| e.key == AGGREGATED_CLUSTER_OPERATOR)
        .filter(|e| e.revision > update_started && e.revision < all_done)
        .collect();
    let po_events = po_log.events();
    let flickers: Vec<String> = during
        .iter()
        .filter(|e| upgradeable_true(&e.object))
        .map(|e| {
            format!(
                "revision {}: {:?}; the POs as last written before it:\n{}",
                e.revision,
                co_upgradeable(&e.object),
                fleet_at(&po_events, e.revision)
            )
        })
        .collect();
    // Every PO version: never resting (Progressing=False) with a move pending or at 7.10.0.
    let mut resting_wrongly: Vec<String> = Vec::new();
    for e in &po_events {
        let status = e.object.status.as_ref();
        let installed = status
            .and_then(|s| s.installed_bundle.as_ref())
            .map(|b| b.version.as_str());
        let desired = status
            .and_then(|s| s.desired_bundle.as_ref())
            .map(|b| b.name.as_str());
        if is(&e.object, "Progressing", "False")
            && (desired.is_some() || installed == Some("7.10.0"))
        {
            resting_wrongly.push(format!(
                "{} at revision {}: Progressing=False with desiredBundle {desired:?}, installed \
                 {installed:?}; its history:\n{}",
                e.key,
                e.revision,
                history(&po_events, &e.key)
            ));
        }
    }
    assert!(
        flickers.is_empty() && resting_wrongly.is_empty(),
        "the aggregated ClusterOperator said Upgradeable=True {} times while POs hopped (update \
         started at revision {update_started}, last PO settled at {all_done}); the first ones:\n{}\n\
         {} PO versions said Progressing=False with a move pending or at 7.10.0; the first ones:\n{}",
        flickers.len(),
        flickers
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n"),
        resting_wrongly.len(),
        resting_wrongly
            .iter()
            .take(2)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    assert!(
        back_to_true > all_done,
        "Upgradeable=True at revision {back_to_true}, before the last PO settled at {all_done}"
    );
    assert!(
        !during.is_empty(),
        "the ClusterOperator was never written while POs hopped: the watch saw nothing"
    );
    for name in &names {
        assert!(
            po_events.iter().any(|e| &e.key == name
                && e.object
                    .status
                    .as_ref()
                    .and_then(|s| s.installed_bundle.as_ref())
                    .is_some_and(|b| b.version == "7.10.0")),
            "{name} never ran 7.10.0"
        );
    }
    eprintln!(
        "{FLEET} POs hopped twice in {hopping_for:.1?}; the ClusterOperator was written {} times \
         meanwhile, Upgradeable reasons: {:?}",
        during.len(),
        during
            .iter()
            .filter_map(|e| co_upgradeable(&e.object))
            .collect::<std::collections::BTreeSet<_>>()
    );
    manager.stop().await;
}
