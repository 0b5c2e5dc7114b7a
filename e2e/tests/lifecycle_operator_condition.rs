#![allow(clippy::unwrap_used, clippy::expect_used)]
//! OperatorConditions as the manager runs them (§7), against a real control plane with the test
//! playing the operator (it writes `spec.conditions`, as operator-lib does) and the admin (it
//! writes `spec.overrides`):
//!
//! - a CSV named differently from its bundle: the OperatorCondition is named after the CSV,
//!   found by its labels, created once and never recreated, and its `Upgradeable=False` holds
//!   the next hop until it says True;
//! - the admin's `spec.overrides` lets the hop proceed while the operator still says False;
//! - a stale status (a True copied for an older generation) is never read as a yes;
//! - the OperatorCondition of a new bundle exists before that bundle's new Deployment;
//! - an operator first seen reporting by the reconcile that starts its next hop is remembered
//!   (the PO's `operator-condition-reported` annotation on the API server), and the memory
//!   outlives its OperatorCondition and a manager restart: under `Auto` the hop waits for the
//!   new bundle's report.
//!
//! Each hop is a patch update of the cluster (4.16.3 → 4.16.4) with X.Y.(Z+1) in the catalog:
//! a hop the CVO never blocks, so only the operator's gate can hold it.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::olm::OperatorCondition;
use pom_controller::context::Settings;
use pom_e2e::ControlPlane;
use pom_e2e::event_log::{Change, EventLog, Recorded, revision_of};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, configmap_catalog, create_po, now, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
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

/// Publishes `bundles` as the whole content of ConfigMap catalog `ocs`.
async fn publish(client: &Client, bundles: &[TestBundle]) -> String {
    let fbc = catalog_json(bundles, &[]);
    configmap_catalog(client, "ocs", &fbc, 0).await;
    fbc
}

/// Publishes `bundles` and waits until the running manager serves them.
async fn publish_served(client: &Client, bundles: &[TestBundle]) {
    let fbc = publish(client, bundles).await;
    wait_catalog_serves(client, "ocs", &fbc).await;
}

fn ocs(client: &Client, namespace: &str) -> Api<OperatorCondition> {
    Api::namespaced(client.clone(), namespace)
}

fn pos(client: &Client) -> Api<PlatformOperator> {
    Api::all(client.clone())
}

/// Plays the operator: `spec.conditions` becomes one `Upgradeable` condition (a merge patch
/// replaces the list whole, as operator-lib's update does).
async fn report(client: &Client, namespace: &str, csv: &str, upgradeable: bool, message: &str) {
    let api = ocs(client, namespace);
    eventually(
        WAIT,
        &format!("OperatorCondition {namespace}/{csv} to exist"),
        || async { api.get_opt(csv).await.ok()? },
    )
    .await;
    let condition = json!({
        "type": "Upgradeable",
        "status": if upgradeable { "True" } else { "False" },
        "reason": if upgradeable { "Ready" } else { "Migrating" },
        "message": message,
        "lastTransitionTime": now(),
    });
    api.patch(
        csv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"conditions": [condition]}})),
    )
    .await
    .unwrap();
}

/// Waits until the manager copied the operator's `Upgradeable` to the OperatorCondition's
/// status for its current generation, with `status`.
async fn wait_copied(client: &Client, namespace: &str, csv: &str, status: &str) {
    let api = ocs(client, namespace);
    eventually(
        WAIT,
        &format!(
            "OperatorCondition {namespace}/{csv} status Upgradeable={status} for its generation"
        ),
        || async {
            let oc = api.get_opt(csv).await.ok()??;
            let copied = oc
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Upgradeable")?;
            (copied.status == status && copied.observed_generation == oc.metadata.generation)
                .then_some(())
        },
    )
    .await;
}

/// (installed bundle name, whether its move settled, desired bundle name).
async fn position(client: &Client, po: &str) -> Option<(String, bool, Option<String>)> {
    let status = pos(client).get(po).await.ok()?.status?;
    Some((
        status.installed_bundle?.name,
        status.active_hop?.settled,
        status.desired_bundle.map(|d| d.name),
    ))
}

/// Waits until `bundle` is installed and its move settled.
async fn wait_settled(client: &Client, po: &str, bundle: &str) {
    eventually(WAIT, &format!("{po} settled at {bundle}"), || async {
        let (installed, settled, _) = position(client, po).await?;
        (installed == bundle && settled).then_some(())
    })
    .await;
}

/// Waits until `bundle` is installed (its move may still be settling).
async fn wait_installed(client: &Client, po: &str, bundle: &str) {
    eventually(WAIT, &format!("{po} at {bundle}"), || async {
        (position(client, po).await?.0 == bundle).then_some(())
    })
    .await;
}

/// Waits until the PO holds a move to `bundle` (its desired bundle, not installed).
async fn wait_held(client: &Client, po: &str, bundle: &str) {
    eventually(
        WAIT,
        &format!("{po} to hold a move to {bundle}"),
        || async {
            let (_, settled, desired) = position(client, po).await?;
            (settled && desired.as_deref() == Some(bundle)).then_some(())
        },
    )
    .await;
}

/// The installed bundle and the last move: what a held hop keeps.
fn where_it_stands(po: &PlatformOperator) -> Value {
    let status = po.status.as_ref();
    json!({
        "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.name),
        "activeHop": status.and_then(|s| s.active_hop.as_ref()).map(|h| json!({"from": h.from, "to": h.to, "settled": h.settled})),
    })
}

/// The window over a held hop: the PO stays where it is, no OperatorCondition is created,
/// deleted or recreated (the new bundle's would be created before its Deployment), and the
/// operator's Deployment keeps its pod template.
fn held_window(settings: &Settings, client: &Client, po: &str, namespace: &str) -> QuietWindow {
    QuietWindow::new(settings)
        .unchanged(
            pos(client),
            po,
            "the installed bundle and its move (the held hop started)",
            where_it_stands,
        )
        .unchanged(
            ocs(client, namespace),
            Objects::All,
            "the OperatorConditions and their uids (created, deleted or recreated)",
            |oc| json!(oc.metadata.uid),
        )
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), namespace),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
}

/// Sets `spec.package` and the gate of PO `name` (named after its package).
async fn create(client: &Client, name: &str, gate: &str) {
    create_po(
        client,
        name,
        json!({"package": {"name": name}, "upgradeGate": gate}),
    )
    .await;
}

/// A control plane with the cluster at 4.16.3 and `v1` alone in the catalog, installed by PO
/// `po` under `upgradeGate: Auto` (its move settled) by a manager with [`settings`], returned
/// running; `None` when the plane's binaries are missing (see `simulated_plane`).
async fn settled_under_auto(
    po: &str,
    v1: &TestBundle,
) -> Option<(ControlPlane, Client, Settings, Manager)> {
    let plane = simulated_plane(false).await?;
    let client = plane.client().await.unwrap();
    let settings = settings();
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, std::slice::from_ref(v1)).await;
    create(&client, po, "Auto").await;
    let manager = Manager::start(client.clone(), settings.clone());
    wait_settled(&client, po, &v1.name()).await;
    Some((plane, client, settings, manager))
}

/// The OPERATOR_CONDITION_NAME env of every container of Deployment `name`.
fn operator_condition_env(deployment: &Deployment) -> Vec<Option<String>> {
    deployment
        .spec
        .iter()
        .flat_map(|s| s.template.spec.iter())
        .flat_map(|p| p.containers.iter())
        .map(|c| {
            c.env
                .iter()
                .flatten()
                .find(|e| e.name == "OPERATOR_CONDITION_NAME")
                .and_then(|e| e.value.clone())
        })
        .collect()
}

/// Every uid an object of the log had, in order, and whether it was deleted.
fn lifetimes<K: kube::Resource>(events: &[Recorded<K>], key: &str) -> (Vec<String>, Vec<Change>) {
    let mine: Vec<&Recorded<K>> = events.iter().filter(|e| e.key == key).collect();
    let mut uids: Vec<String> = Vec::new();
    for e in &mine {
        let uid = e.object.meta().uid.clone().unwrap_or_default();
        if uids.last() != Some(&uid) {
            uids.push(uid);
        }
    }
    (uids, mine.iter().map(|e| e.change).collect())
}

/// (a) The bundle `ocname.v1.0.0` ships CSV `ocname-operator.v1.0.0`. The manager creates the
/// OperatorCondition named after the CSV (labelled with the bundle), finds it by its labels,
/// never deletes or recreates it, and holds the next hop while the operator says
/// Upgradeable=False (reason `OperatorNotUpgradeable`), over a window longer than the resync;
/// when it says True the hop proceeds.
#[tokio::test]
async fn csv_named_operator_condition_is_kept_and_holds_the_hop_while_false() {
    const PO: &str = "ocname";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let v1 = TestBundle::new(PO, "1.0.0").csv_name("ocname-operator.v1.0.0");
    let v2 = TestBundle::new(PO, "1.0.1")
        .replaces("1.0.0")
        .csv_name("ocname-operator.v1.0.1");
    assert_ne!(v1.name(), v1.csv());
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, std::slice::from_ref(&v1)).await;
    // Every version of every OperatorCondition of the PO, from before it exists.
    let oc_log = EventLog::start(ocs(&client, PO)).await;
    create(&client, PO, "OperatorCondition").await;
    let manager = Manager::start(client.clone(), settings.clone());

    // Named after the CSV, labelled with the owner and the bundle; nothing named after the
    // bundle; the operator is told its name.
    let oc = eventually(
        WAIT,
        "the OperatorCondition named after the CSV",
        || async { ocs(&client, PO).get_opt(&v1.csv()).await.ok()? },
    )
    .await;
    let oc_labels = oc.labels();
    assert_eq!(
        oc_labels.get(labels::OWNER_PO).map(String::as_str),
        Some(PO)
    );
    assert_eq!(
        oc_labels.get(labels::BUNDLE).map(String::as_str),
        Some(v1.name().as_str())
    );
    assert_eq!(oc.spec.deployments, vec![v1.deployment_name()]);
    let uid = oc.metadata.uid.clone().unwrap();
    assert!(
        ocs(&client, PO)
            .get_opt(&v1.name())
            .await
            .unwrap()
            .is_none()
    );
    // (The Deployment is applied after the OperatorCondition.)
    let deployment = eventually(WAIT, "the operator's Deployment", || async {
        Api::<Deployment>::namespaced(client.clone(), PO)
            .get_opt(&v1.deployment_name())
            .await
            .ok()?
    })
    .await;
    assert_eq!(operator_condition_env(&deployment), vec![Some(v1.csv())]);

    // Under `upgradeGate: OperatorCondition` the install waits for the operator's word, which
    // the manager reads from the CSV-named object it found by labels.
    wait_for_report(&client, PO).await;
    report(&client, PO, &v1.csv(), true, "ready").await;
    wait_settled(&client, PO, &v1.name()).await;
    wait_po_condition(&client, PO, "Upgradeable", "True", Some("AsExpected")).await;

    // Steady: over a window longer than every resync the manager does not write the
    // OperatorCondition at all (no re-create, no re-apply, no status rewrite).
    QuietWindow::new(&settings)
        .no_writes(ocs(&client, PO), v1.csv())
        .open()
        .await
        .hold()
        .await;

    // The operator says False; then the catalog gains 1.0.1 and the cluster starts a patch
    // update: the hop is chosen and held.
    report(&client, PO, &v1.csv(), false, "reindexing the store").await;
    wait_copied(&client, PO, &v1.csv(), "False").await;
    let message = wait_po_condition(
        &client,
        PO,
        "Upgradeable",
        "False",
        Some("OperatorNotUpgradeable"),
    )
    .await;
    assert_eq!(
        message,
        "the operator reports Upgradeable=False: reindexing the store"
    );
    publish_served(&client, &[v1.clone(), v2.clone()]).await;
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    wait_held(&client, PO, &v2.name()).await;
    let (status, reason, message) = po_condition(&client, PO, "Upgradeable").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "OperatorNotUpgradeable"),
        "{message}"
    );
    assert_eq!(
        message,
        format!(
            "the operator reports Upgradeable=False: reindexing the store; a move to {} is pending",
            v2.name()
        )
    );
    let (status, reason, message) = po_condition(&client, PO, "Progressing").await.unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("True", "Upgrading"));
    let held = format!(
        "moving to {}: held: the operator reports Upgradeable=False (reindexing the store); ",
        v2.name()
    );
    assert!(message.starts_with(&held), "{message}");
    // Its way out, the admin's override, names the OperatorCondition the API server holds:
    // the CSV-named one, not one named after the bundle.
    let named = message
        .split("kubectl patch operatorcondition ")
        .nth(1)
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no override command in {message:?}"));
    assert_eq!(named, v1.csv(), "{message}");
    assert!(ocs(&client, PO).get_opt(named).await.unwrap().is_some());

    // Held over a window longer than every resync: 1.0.1 not installed, its OperatorCondition
    // not created, 1.0.0's neither deleted nor recreated, the Deployment untouched, and the PO
    // never says Upgradeable=True.
    held_window(&settings, &client, PO, PO)
        .never(pos(&client), PO, "Upgradeable=True", |po| {
            condition_of(po, "Upgradeable").is_some_and(|(s, _, _)| s == "True")
        })
        .open()
        .await
        .hold()
        .await;
    let oc = ocs(&client, PO).get(&v1.csv()).await.unwrap();
    assert_eq!(oc.metadata.uid.as_deref(), Some(uid.as_str()));

    // The operator is done: the hop proceeds, to a new OperatorCondition named after 1.0.1's
    // CSV.
    report(&client, PO, &v1.csv(), true, "reindexed").await;
    wait_installed(&client, PO, &v2.name()).await;
    let oc2 = eventually(WAIT, "1.0.1's OperatorCondition", || async {
        ocs(&client, PO).get_opt(&v2.csv()).await.ok()?
    })
    .await;
    assert_eq!(
        oc2.labels().get(labels::BUNDLE).map(String::as_str),
        Some(v2.name().as_str())
    );
    report(&client, PO, &v2.csv(), true, "ready").await;
    wait_settled(&client, PO, &v2.name()).await;

    // Over the whole story 1.0.0's OperatorCondition had one uid and one creation; if it went
    // away, that was only after 1.0.1's existed (the old bundle's objects are pruned).
    let events = oc_log.events();
    let key = format!("{PO}/{}", v1.csv());
    let (uids, changes) = lifetimes(&events, &key);
    assert_eq!(uids, vec![uid], "{changes:?}");
    assert_eq!(
        changes.iter().filter(|c| **c == Change::Added).count(),
        1,
        "{changes:?}"
    );
    if let Some(deleted) = events
        .iter()
        .find(|e| e.key == key && e.change == Change::Deleted)
    {
        let added_v2 = events
            .iter()
            .find(|e| e.key == format!("{PO}/{}", v2.csv()) && e.change == Change::Added)
            .expect("1.0.1's OperatorCondition was created");
        assert!(
            deleted.revision > added_v2.revision,
            "1.0.0's OperatorCondition was deleted (revision {}) before 1.0.1's was created ({})",
            deleted.revision,
            added_v2.revision
        );
    }
    manager.stop().await;
}

/// (b) The operator says Upgradeable=False and the hop is held; the admin sets
/// `spec.overrides: [{type: Upgradeable, status: "True"}]` on its OperatorCondition (as in OLM
/// v0) and the hop proceeds, while the operator's own report still says False.
#[tokio::test]
async fn admin_override_lets_the_held_hop_proceed() {
    const PO: &str = "ocoverride";
    let v1 = TestBundle::new(PO, "2.3.0");
    let v2 = TestBundle::new(PO, "2.3.1").replaces("2.3.0");
    let Some((_plane, client, settings, manager)) = settled_under_auto(PO, &v1).await else {
        return;
    };
    report(&client, PO, &v1.csv(), false, "backup running").await;
    wait_copied(&client, PO, &v1.csv(), "False").await;
    wait_po_condition(
        &client,
        PO,
        "Upgradeable",
        "False",
        Some("OperatorNotUpgradeable"),
    )
    .await;
    publish_served(&client, &[v1.clone(), v2.clone()]).await;
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    wait_held(&client, PO, &v2.name()).await;
    let (status, reason, message) = po_condition(&client, PO, "Upgradeable").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "OperatorNotUpgradeable"),
        "{message}"
    );
    held_window(&settings, &client, PO, PO)
        .open()
        .await
        .hold()
        .await;

    // The admin overrides; the operator's report stays False.
    ocs(&client, PO)
        .patch(
            &v1.csv(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"overrides": [{
                "type": "Upgradeable", "status": "True", "reason": "AdminApproved",
                "message": "the backup may be interrupted"}]}})),
        )
        .await
        .unwrap();
    wait_installed(&client, PO, &v2.name()).await;
    // The operator reported under POM, so under `Auto` 1.0.1 must report too before the move
    // settles.
    wait_for_report(&client, PO).await;
    report(&client, PO, &v2.csv(), true, "ready").await;
    wait_settled(&client, PO, &v2.name()).await;
    manager.stop().await;
}

/// (c) The operator reported Upgradeable=True (copied to status for generation N). While the
/// manager is down it writes a new generation saying False, and the cluster starts a patch
/// update with the next bundle in the catalog. The restarted manager finds a status True for
/// generation N on an object at generation N+1: stale, not a yes. It holds, copies the new
/// report, and holds on it; the next hop never starts, over a window longer than the resync
/// that covers the manager's first reconcile.
#[tokio::test]
async fn stale_upgradeable_true_is_not_a_yes() {
    const PO: &str = "ocstale";
    let v1 = TestBundle::new(PO, "3.0.0").csv_name("ocstale-operator.v3.0.0");
    let v2 = TestBundle::new(PO, "3.0.1")
        .replaces("3.0.0")
        .csv_name("ocstale-operator.v3.0.1");
    let Some((_plane, client, settings, manager)) = settled_under_auto(PO, &v1).await else {
        return;
    };
    report(&client, PO, &v1.csv(), true, "ready").await;
    wait_copied(&client, PO, &v1.csv(), "True").await;
    eventually(WAIT, "the PO marked as reporting", || async {
        pos(&client)
            .get(PO)
            .await
            .ok()?
            .annotations()
            .contains_key(labels::OPERATOR_CONDITION_REPORTED)
            .then_some(())
    })
    .await;
    wait_po_condition(&client, PO, "Upgradeable", "True", Some("AsExpected")).await;
    publish_served(&client, &[v1.clone(), v2.clone()]).await;
    manager.stop().await;

    // Manager down: a new generation saying False; the status still says True, for the old
    // generation.
    report(&client, PO, &v1.csv(), false, "schema migration").await;
    let oc = ocs(&client, PO).get(&v1.csv()).await.unwrap();
    let generation = oc.metadata.generation.unwrap();
    let copied = oc.status.unwrap().conditions;
    assert_eq!(copied.len(), 1);
    assert_eq!(copied[0].status, "True");
    assert_eq!(copied[0].observed_generation, Some(generation - 1));
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;

    // Watched from before the manager starts again: every PO status it writes is recorded.
    let po_log = EventLog::start(pos(&client)).await;
    let window = held_window(&settings, &client, PO, PO).open().await;
    let manager = Manager::start(client.clone(), settings.clone());
    window.hold().await;

    // It held on the stale status first (the hop chosen, the reading pending), then on what it
    // copied: the operator's False for the current generation.
    wait_copied(&client, PO, &v1.csv(), "False").await;
    let oc = ocs(&client, PO).get(&v1.csv()).await.unwrap();
    assert_eq!(oc.metadata.generation, Some(generation));
    let message = wait_po_condition(
        &client,
        PO,
        "Upgradeable",
        "False",
        Some("OperatorNotUpgradeable"),
    )
    .await;
    assert!(message.contains("schema migration"), "{message}");
    assert_eq!(
        position(&client, PO).await.unwrap(),
        (v1.name(), true, Some(v2.name()))
    );
    let written: Vec<Recorded<PlatformOperator>> = po_log
        .events()
        .into_iter()
        .filter(|e| e.change != Change::Listed)
        .collect();
    for e in &written {
        let upgradeable = condition_of(&e.object, "Upgradeable");
        assert!(
            upgradeable.as_ref().is_none_or(|c| c.0 != "True"),
            "the restarted manager wrote Upgradeable=True at revision {}: {upgradeable:?}",
            e.revision
        );
    }
    let progressing: Vec<String> = written
        .iter()
        .filter_map(|e| condition_of(&e.object, "Progressing").map(|c| c.2))
        .collect();
    assert!(
        progressing.iter().any(|m| m.contains(
            "held: the operator's OperatorCondition has no Upgradeable for its current generation"
        )),
        "the restarted manager never reported holding on the stale status: {progressing:#?}"
    );
    manager.stop().await;
}

/// (d) On a hop to a bundle whose Deployment has a new name, the new bundle's OperatorCondition
/// is created before that Deployment (so the operator finds it when it starts, as with OLM v0).
///
/// Method: two event logs (OperatorConditions, Deployments of the install namespace) opened
/// before the PO exists record every ADDED event with its resourceVersion. In this harness's
/// single etcd a resourceVersion is the etcd revision of the write, one counter for every kind,
/// so the revision of an object's ADDED event orders its creation against any other (one-second
/// `creationTimestamp`s cannot). Checked for the first install too.
#[tokio::test]
async fn new_bundles_operator_condition_is_created_before_its_deployment() {
    const PO: &str = "ocorder";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let v1 = TestBundle::new(PO, "1.4.0").csv_name("ocorder-operator.v1.4.0");
    let v2 = TestBundle::new(PO, "1.4.1")
        .replaces("1.4.0")
        .csv_name("ocorder-operator.v1.4.1")
        .deployment("ocorder-manager");
    assert_ne!(v1.deployment_name(), v2.deployment_name());
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, std::slice::from_ref(&v1)).await;
    let oc_log = EventLog::start(ocs(&client, PO)).await;
    let deployment_log = EventLog::start(Api::<Deployment>::namespaced(client.clone(), PO)).await;
    create(&client, PO, "Rollout").await;
    let manager = Manager::start(client.clone(), settings.clone());
    wait_settled(&client, PO, &v1.name()).await;
    publish_served(&client, &[v1.clone(), v2.clone()]).await;
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    wait_settled(&client, PO, &v2.name()).await;

    let ocs = oc_log.events();
    let deployments = deployment_log.events();
    for bundle in [&v1, &v2] {
        let oc = ocs
            .iter()
            .find(|e| e.key == format!("{PO}/{}", bundle.csv()) && e.change == Change::Added)
            .unwrap_or_else(|| panic!("no ADDED event for OperatorCondition {}", bundle.csv()));
        let deployment = deployments
            .iter()
            .find(|e| {
                e.key == format!("{PO}/{}", bundle.deployment_name()) && e.change == Change::Added
            })
            .unwrap_or_else(|| {
                panic!("no ADDED event for Deployment {}", bundle.deployment_name())
            });
        assert!(
            oc.revision < deployment.revision,
            "OperatorCondition {} created at revision {}, after Deployment {} at {}",
            bundle.csv(),
            oc.revision,
            bundle.deployment_name(),
            deployment.revision
        );
        // Already complete when created: it names the Deployment, which names it back from its
        // first version on.
        assert_eq!(oc.object.spec.deployments, vec![bundle.deployment_name()]);
        assert_eq!(
            operator_condition_env(&deployment.object),
            vec![Some(bundle.csv())]
        );
        assert_eq!(revision_of(&deployment.object), deployment.revision);
    }
    manager.stop().await;
}

/// Waits until PO `po` is Progressing because its move waits for the operator's report.
async fn wait_for_report(client: &Client, po: &str) {
    wait_po_condition(
        client,
        po,
        "Progressing",
        "True",
        Some("WaitingForOperatorCondition"),
    )
    .await;
}

/// Whether PO `po` carries the operator-condition-reported mark on the API server.
async fn marked_reported(client: &Client, po: &str) -> bool {
    pos(client)
        .get(po)
        .await
        .unwrap()
        .annotations()
        .contains_key(labels::OPERATOR_CONDITION_REPORTED)
}

/// (e) The regression "an operator seen reporting by the gather is remembered", through the
/// reconcile. Under `Auto`, 2.0.0 settles without a report (the operator was never seen
/// reporting: no mark). With the manager down, the operator reports Upgradeable=True on 2.0.0's
/// OperatorCondition and the cluster starts a patch update with 2.0.1 in the catalog: the
/// restarted manager sees the report in the same reconciles that start the hop, whose new
/// OperatorCondition is empty. The PO gets the mark on the API server; with the manager down
/// again and 2.0.0's OperatorCondition gone (the report's only other trace), the restarted
/// manager still counts the operator as reporting: the hop waits for 2.0.1's own report
/// (`WaitingForOperatorCondition`) over a window longer than every resync, and settles once
/// it comes.
#[tokio::test]
async fn an_operator_seen_reporting_is_remembered_across_restarts() {
    const PO: &str = "ocseen";
    let v1 = TestBundle::new(PO, "2.0.0");
    let v2 = TestBundle::new(PO, "2.0.1").replaces("2.0.0");
    let Some((_plane, client, settings, manager)) = settled_under_auto(PO, &v1).await else {
        return;
    };
    manager.stop().await;
    assert!(
        !marked_reported(&client, PO).await,
        "marked before any report"
    );

    // Manager down: the operator reports, the next hop becomes possible.
    report(&client, PO, &v1.csv(), true, "ready").await;
    publish(&client, &[v1.clone(), v2.clone()]).await;
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    let manager = Manager::start(client.clone(), settings.clone());
    wait_installed(&client, PO, &v2.name()).await;
    eventually(WAIT, "the PO marked as reporting", || async {
        marked_reported(&client, PO).await.then_some(())
    })
    .await;
    wait_for_report(&client, PO).await;
    manager.stop().await;

    // Manager down: 2.0.0's OperatorCondition, the report, is gone.
    ocs(&client, PO)
        .delete(&v1.csv(), &Default::default())
        .await
        .unwrap();
    eventually(WAIT, "2.0.0's OperatorCondition gone", || async {
        ocs(&client, PO)
            .get_opt(&v1.csv())
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    let window = QuietWindow::new(&settings)
        .never(pos(&client), PO, "the hop to 2.0.1 settled", |po| {
            po.status
                .as_ref()
                .and_then(|s| s.active_hop.as_ref())
                .is_some_and(|h| h.settled)
        })
        .open()
        .await;
    let manager = Manager::start(client.clone(), settings.clone());
    window.hold().await;
    assert!(marked_reported(&client, PO).await);
    let (status, reason, message) = po_condition(&client, PO, "Progressing").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "WaitingForOperatorCondition"),
        "{message}"
    );
    report(&client, PO, &v2.csv(), true, "ready").await;
    wait_settled(&client, PO, &v2.name()).await;
    manager.stop().await;
}
