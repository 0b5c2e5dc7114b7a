#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What runs keeps running, and is still repaired, when the world around it degrades: the
//! installed bundle is pruned from its catalog, the catalog becomes unavailable, or the
//! ClusterVersion is missing. None of these is a failure of the operator (never `Degraded`);
//! what cannot be judged makes `Upgradeable` Unknown/`UpgradeabilityUnknown` and the aggregated
//! ClusterOperator not upgradeable (§8.3, fail closed). Also the `Progressing` reasons a first
//! install and a hop pass through (§8.1), recorded with a watch from before the PO exists.

use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_api::{Catalog, PlatformOperator};
use pom_controller::api_metrics::{ApiRequests, READ, RequestLabels, WRITE};
use pom_controller::context::Settings;
use pom_e2e::Registry;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::oci_publish::push_files;
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    co_condition, configmap_catalog, create_po, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use pom_e2e::watch_log::WatchLog;
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
/// Manager restarts in the restart test: each is a fresh chance for the start-up race it looks
/// for (a reconcile before every cache is filled).
const RESTARTS: usize = 12;

/// A steady OpenShift cluster at 4.16.3.
async fn steady_cluster(client: &Client) {
    set_cluster(client, &[("4.16.3", true)], "4.16.3").await;
}

fn has_condition(po: &PlatformOperator, type_: &str, status: &str) -> bool {
    condition_of(po, type_).is_some_and(|c| c.0 == status)
}

/// Waits until PO `po` is installed at `version`, settled, with Degraded=False.
async fn installed_at(client: &Client, po: &str, version: &str) {
    eventually(
        WAIT,
        &format!("{po} installed and settled at {version}"),
        || async {
            let current = Api::<PlatformOperator>::all(client.clone())
                .get(po)
                .await
                .ok()?;
            let status = current.status.as_ref()?;
            let ok = status.observed_generation == current.metadata.generation
                && status.installed_bundle.as_ref()?.version == version
                && status.active_hop.as_ref()?.settled
                && status.desired_bundle.is_none()
                && has_condition(&current, "Installed", "True")
                && has_condition(&current, "Degraded", "False");
            ok.then_some(())
        },
    )
    .await;
}

/// Deletes the operator's Deployment; returns the deleted object.
async fn delete_deployment(client: &Client, namespace: &str, name: &str) -> Deployment {
    let api: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let before = api.get(name).await.unwrap();
    api.delete(name, &DeleteParams::default()).await.unwrap();
    before
}

/// Waits until POM has recreated the Deployment `deleted` (a new object, the same image):
/// drift repair.
async fn wait_recreated(client: &Client, deleted: &Deployment) {
    let namespace = deleted.namespace().unwrap();
    let name = deleted.name_any();
    let api: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let image = |d: &Deployment| {
        d.spec
            .as_ref()
            .unwrap()
            .template
            .spec
            .as_ref()
            .unwrap()
            .containers[0]
            .image
            .clone()
    };
    let after = eventually(
        WAIT,
        &format!("Deployment {namespace}/{name} to be recreated"),
        || async {
            api.get_opt(&name)
                .await
                .ok()
                .flatten()
                .filter(|d| d.uid() != deleted.uid() && d.metadata.deletion_timestamp.is_none())
        },
    )
    .await;
    assert_eq!(
        image(&after),
        image(deleted),
        "the same operator comes back"
    );
}

/// Deletes the operator's Deployment and waits until POM has recreated it.
async fn delete_deployment_and_wait_recreated(client: &Client, namespace: &str, name: &str) {
    let deleted = delete_deployment(client, namespace, name).await;
    wait_recreated(client, &deleted).await;
}

/// Rules every test here shares: the PO never becomes Degraded, stays Installed and keeps its
/// installed bundle.
fn po_keeps_running(window: QuietWindow, client: &Client, po: &str) -> QuietWindow {
    let pos = || Api::<PlatformOperator>::all(client.clone());
    window
        .never(pos(), po, "Degraded=True", |po| {
            has_condition(po, "Degraded", "True")
        })
        .never(pos(), po, "not Installed=True", |po| {
            !has_condition(po, "Installed", "True")
        })
        .unchanged(pos(), po, "the installed bundle", |po| {
            json!(po.status.as_ref().and_then(|s| s.installed_bundle.as_ref()))
        })
}

/// (a) The catalog's publisher prunes the installed bundle (only an older one is left, nothing
/// newer): the PO keeps running it, is not Degraded over a window longer than every resync,
/// and its objects are still repaired (a deleted Deployment comes back). With `image`, the
/// bundles are images the catalog points at; without, the catalog carries their objects
/// (`olm.bundle.object`, the usual form of ConfigMap catalogs).
async fn pruned_bundle_scenario(image: bool) {
    let started = Instant::now();
    let Some(plane) = simulated_plane(image).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = if image {
        Some(Registry::start().await.unwrap())
    } else {
        None
    };
    let host = registry.as_ref().map(Registry::host);
    steady_cluster(&client).await;
    let old = TestBundle::new("pruned", "0.9.0");
    let installed = TestBundle::new("pruned", "1.0.0").replaces("0.9.0");
    let mut images = Vec::new();
    if let Some(host) = &host {
        for bundle in [&old, &installed] {
            let reference = push_files(
                host,
                "bundles/pruned",
                &bundle.version,
                &bundle.image_files(),
            )
            .await
            .unwrap();
            images.push((bundle.name(), reference));
        }
    }
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[old.clone(), installed.clone()], &images),
        0,
    )
    .await;
    create_po(&client, "pruned", json!({"package": {"name": "pruned"}})).await;
    let settings = Manager::test_settings(host.into_iter().collect());
    let manager = Manager::start(client.clone(), settings.clone());
    installed_at(&client, "pruned", "1.0.0").await;

    // The window watches from before the catalog changes; the Deployment is deleted inside it,
    // so the reconcile that must repair it runs inside it too.
    let window = po_keeps_running(QuietWindow::new(&settings), &client, "pruned")
        .open()
        .await;
    let fbc = catalog_json(std::slice::from_ref(&old), &images);
    configmap_catalog(&client, "local", &fbc, 0).await;
    wait_catalog_serves(&client, "local", &fbc).await;
    let deleted = delete_deployment(&client, "pruned", &installed.deployment_name()).await;
    let held = window.hold().await;
    println!("pruned bundle: no Degraded, still Installed for {held:?}");
    wait_recreated(&client, &deleted).await;

    // Repaired again after the window (every periodic reconcile since has kept it).
    delete_deployment_and_wait_recreated(&client, "pruned", &installed.deployment_name()).await;
    let (status, reason, _) = po_condition(&client, "pruned", "Degraded").await.unwrap();
    assert_eq!((status.as_str(), reason.as_str()), ("False", "AsExpected"));
    let (status, reason, message) = po_condition(&client, "pruned", "Installed").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "InstallSucceeded"),
        "{message}"
    );
    assert!(message.contains(&installed.name()), "{message}");
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_bundle_pruned_from_its_catalog_keeps_running_and_being_repaired() {
    pruned_bundle_scenario(false).await;
}

#[tokio::test]
async fn a_bundle_image_pruned_from_its_catalog_keeps_running_and_being_repaired() {
    pruned_bundle_scenario(true).await;
}

/// (b) The catalog's ConfigMap is deleted: the Catalog stops serving; the PO is not Degraded,
/// its `Upgradeable` becomes Unknown/UpgradeabilityUnknown naming the catalog, the aggregated
/// ClusterOperator is not upgradeable, and drift repair still works.
#[tokio::test]
async fn an_unavailable_catalog_makes_upgradeability_unknown_not_degraded() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    steady_cluster(&client).await;
    let bundle = TestBundle::new("lost", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(&client, "lost", json!({"package": {"name": "lost"}})).await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    installed_at(&client, "lost", "1.0.0").await;
    wait_po_condition(&client, "lost", "Upgradeable", "True", Some("AsExpected")).await;
    eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=True",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;

    let window = po_keeps_running(QuietWindow::new(&settings), &client, "lost")
        .never(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
            "Degraded=True",
            |co| {
                co.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Degraded" && c.status == "True")
                })
            },
        )
        .open()
        .await;
    Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .delete("local", &DeleteParams::default())
        .await
        .unwrap();
    let serving = eventually(WAIT, "the Catalog to stop serving", || async {
        let catalog = Api::<Catalog>::all(client.clone())
            .get("local")
            .await
            .ok()?;
        catalog
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Serving" && c.status == "False")
    })
    .await;
    assert_eq!(serving.reason, "ConfigMapNotFound", "{}", serving.message);
    let message = wait_po_condition(
        &client,
        "lost",
        "Upgradeable",
        "Unknown",
        Some("UpgradeabilityUnknown"),
    )
    .await;
    assert!(
        message.contains("Catalog local") && message.contains("catalogs/local"),
        "the message must name the unavailable catalog and its ConfigMap: {message}"
    );
    let (_, reason, co_message) = eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=False",
        || async {
            // Once the install settled, what is left is the unjudgeable cluster.
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "False" && c.1 == "UpgradeabilityUnknown")
        },
    )
    .await;
    assert_eq!(reason, "UpgradeabilityUnknown", "{co_message}");
    assert!(
        co_message
            .lines()
            .any(|l| l.starts_with("- lost: ") && l.contains("Catalog local")),
        "{co_message}"
    );
    delete_deployment_and_wait_recreated(&client, "lost", &bundle.deployment_name()).await;
    let held = window.hold().await;
    println!("catalog unavailable: no Degraded, still Installed for {held:?}");
    let (status, reason, _) = po_condition(&client, "lost", "Upgradeable").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("Unknown", "UpgradeabilityUnknown")
    );
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// (c) OpenShift's config API is served (the ClusterVersion CRD is installed) but there is no
/// ClusterVersion: a first install proceeds, but upgradeability cannot be judged (Unknown,
/// naming ClusterVersion) and the aggregated ClusterOperator is not upgradeable; once the
/// ClusterVersion exists, both become upgradeable.
#[tokio::test]
async fn without_a_cluster_version_installs_proceed_and_upgradeability_is_unknown() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let bundle = TestBundle::new("nocv", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(&client, "nocv", json!({"package": {"name": "nocv"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    installed_at(&client, "nocv", "1.0.0").await;
    let (_, _, message) = po_condition(&client, "nocv", "Installed").await.unwrap();
    assert!(message.contains(&bundle.name()), "{message}");
    let message = wait_po_condition(
        &client,
        "nocv",
        "Upgradeable",
        "Unknown",
        Some("UpgradeabilityUnknown"),
    )
    .await;
    assert!(
        message.contains("ClusterVersion"),
        "the message must name ClusterVersion: {message}"
    );
    let (_, reason, co_message) = eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=False",
        || async {
            // Once the install settled, what is left is the unjudgeable cluster (the aggregate
            // may still show the operator's not-yet-reported gate for a moment).
            co_condition(&client, "Upgradeable").await.filter(|c| {
                c.0 == "False"
                    && c.1 == "UpgradeabilityUnknown"
                    && c.2
                        .lines()
                        .any(|l| l.starts_with("- nocv: ") && l.contains("ClusterVersion"))
            })
        },
    )
    .await;
    assert_eq!(reason, "UpgradeabilityUnknown", "{co_message}");
    assert!(
        co_message
            .lines()
            .any(|l| l.starts_with("- nocv: ") && l.contains("ClusterVersion")),
        "{co_message}"
    );

    steady_cluster(&client).await;
    wait_po_condition(&client, "nocv", "Upgradeable", "True", Some("AsExpected")).await;
    let (_, reason, co_message) = eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=True",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    assert_eq!(reason, "AsExpected", "{co_message}");
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// One recorded PO status: Progressing (status, reason), the installed version and whether
/// the move had settled.
type Step = (String, String, Option<String>, Option<bool>);

fn step_of(po: &PlatformOperator) -> Option<Step> {
    let (status, reason, _) = condition_of(po, "Progressing")?;
    let s = po.status.as_ref();
    Some((
        status,
        reason,
        s.and_then(|s| s.installed_bundle.as_ref())
            .map(|b| b.version.clone()),
        s.and_then(|s| s.active_hop.as_ref()).map(|h| h.settled),
    ))
}

/// The steps of every recorded version of `po` from index `from`, consecutive repeats folded.
fn progressing_sequence(log: &WatchLog<PlatformOperator>, po: &str, from: usize) -> Vec<Step> {
    let mut out: Vec<Step> = Vec::new();
    for step in log.versions(po).iter().skip(from).filter_map(step_of) {
        if out.last() != Some(&step) {
            out.push(step);
        }
    }
    out
}

fn position(
    sequence: &[Step],
    status: &str,
    reason: &str,
    version: &str,
    settled: bool,
) -> Option<usize> {
    sequence.iter().position(|(s, r, v, h)| {
        s == status && r == reason && v.as_deref() == Some(version) && *h == Some(settled)
    })
}

/// The PO's status writes and its Deployments' writes in etcd order (resourceVersion), for
/// failure messages: what the manager reported against what the cluster did.
fn timeline(pos: &WatchLog<PlatformOperator>, deployments: &WatchLog<Deployment>) -> String {
    let rv = |v: Option<String>| v.and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    let mut lines: Vec<(u64, String)> = pos
        .entries()
        .iter()
        .map(|e| {
            (
                rv(e.object.resource_version()),
                format!("PlatformOperator {} {:?}", e.event, step_of(&e.object)),
            )
        })
        .collect();
    lines.extend(deployments.entries().iter().map(|e| {
        let d = &e.object;
        let status = d.status.as_ref();
        let available = status
            .and_then(|s| s.conditions.as_ref())
            .and_then(|c| c.iter().find(|c| c.type_ == "Available"))
            .map(|c| c.status.clone());
        (
            rv(d.resource_version()),
            format!(
                "Deployment {} {} generation {:?}, observed {:?}, updated {:?}, Available {:?}",
                d.name_any(),
                e.event,
                d.metadata.generation,
                status.and_then(|s| s.observed_generation),
                status.and_then(|s| s.updated_replicas),
                available
            ),
        )
    }));
    lines.sort();
    lines
        .into_iter()
        .map(|(rv, line)| format!("\n  rv {rv}: {line}"))
        .collect()
}

/// (d) Every status the manager writes is recorded from before the PO exists: a first install
/// reports `Progressing=True/Installing` (the bundle applied or being applied, its move not
/// settled) before `AsExpected`; a hop reports `Progressing=True/Upgrading` (the new bundle
/// applied or being applied, not settled) before `AsExpected` again. (§6: the move is recorded
/// before the first write, so this holds however fast the rollout is.)
#[tokio::test]
async fn progressing_passes_through_installing_and_upgrading() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    steady_cluster(&client).await;
    let v1 = TestBundle::new("seq", "1.0.0");
    let v2 = TestBundle::new("seq", "1.1.0").replaces("1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&v1), &[]),
        0,
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let log = WatchLog::start(pos.clone(), Some("seq")).await;
    let deployments =
        WatchLog::start(Api::<Deployment>::namespaced(client.clone(), "seq"), None).await;
    assert!(log.versions("seq").is_empty(), "the PO does not exist yet");
    create_po(&client, "seq", json!({"package": {"name": "seq"}})).await;
    installed_at(&client, "seq", "1.0.0").await;
    wait_po_condition(&client, "seq", "Progressing", "False", Some("AsExpected")).await;

    let mut problems = Vec::new();
    let install = progressing_sequence(&log, "seq", 0);
    println!("first install, Progressing (status, reason, installed, settled): {install:?}");
    let installing = position(&install, "True", "Installing", "1.0.0", false);
    let done = position(&install, "False", "AsExpected", "1.0.0", true);
    match (installing, done) {
        (Some(i), Some(d)) if i < d => {}
        _ => problems.push(format!(
            "a first install must report Progressing=True/Installing (1.0.0, not settled) \
             before Progressing=False/AsExpected; the PO's statuses were {install:?}"
        )),
    }
    if let Some(i) = installing
        && install[..i].iter().any(|(_, r, _, _)| r == "AsExpected")
    {
        problems.push(format!("AsExpected before the install: {install:?}"));
    }

    // A hop: the catalog gains 1.1.0 and the admin moves by hand.
    let seen = log.versions("seq").len();
    let fbc = catalog_json(&[v1.clone(), v2.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    wait_catalog_serves(&client, "local", &fbc).await;
    pos.patch(
        "seq",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"steadyStateVersionRange": ">=1.0.0"}})),
    )
    .await
    .unwrap();
    installed_at(&client, "seq", "1.1.0").await;
    wait_po_condition(&client, "seq", "Progressing", "False", Some("AsExpected")).await;
    let hop = progressing_sequence(&log, "seq", seen);
    println!("hop, Progressing (status, reason, installed, settled): {hop:?}");
    let upgrading = hop.iter().position(|(s, r, v, h)| {
        s == "True"
            && r == "Upgrading"
            && (v.as_deref() == Some("1.1.0") && *h == Some(false) || v.as_deref() == Some("1.0.0"))
    });
    let done = position(&hop, "False", "AsExpected", "1.1.0", true);
    match (upgrading, done) {
        (Some(u), Some(d)) if u < d => {}
        _ => problems.push(format!(
            "a hop must report Progressing=True/Upgrading before Progressing=False/AsExpected \
             at 1.1.0; the PO's statuses were {hop:?}"
        )),
    }
    if hop.iter().any(|(_, r, _, _)| r == "Installing") {
        problems.push(format!("a hop is not an install: {hop:?}"));
    }
    assert!(
        problems.is_empty(),
        "{}\nwrites in etcd order:{}",
        problems.join("\n"),
        timeline(&log, &deployments)
    );
    log.stop().await;
    deployments.stop().await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// A manager restart (a new leader, a rollout of the manager) re-reads everything from
/// scratch; until its caches are filled it must not judge anew: over repeated restarts and a
/// window longer than every resync after them, the PO is never Degraded and never anything
/// but Upgradeable=True, and the aggregated ClusterOperator never Degraded nor not
/// upgradeable (a CVO reading it at that instant would block a minor update).
#[tokio::test]
async fn manager_restarts_never_report_a_running_po_as_degraded() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    steady_cluster(&client).await;
    let bundle = TestBundle::new("restarted", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(
        &client,
        "restarted",
        json!({"package": {"name": "restarted"}}),
    )
    .await;
    let settings: Settings = Manager::test_settings(vec![]);
    let mut manager = Manager::start(client.clone(), settings.clone());
    installed_at(&client, "restarted", "1.0.0").await;
    eventually(WAIT, "the ClusterOperator to be Degraded=False", || async {
        co_condition(&client, "Degraded")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;

    wait_po_condition(
        &client,
        "restarted",
        "Upgradeable",
        "True",
        Some("AsExpected"),
    )
    .await;
    eventually(
        WAIT,
        "the ClusterOperator to be Upgradeable=True",
        || async {
            co_condition(&client, "Upgradeable")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;
    let window = po_keeps_running(QuietWindow::new(&settings), &client, "restarted")
        .never(
            Api::<PlatformOperator>::all(client.clone()),
            "restarted",
            "Upgradeable!=True",
            |po| !has_condition(po, "Upgradeable", "True"),
        )
        .never(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
            "Upgradeable!=True",
            |co| {
                !co.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Upgradeable" && c.status == "True")
                })
            },
        )
        .never(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
            "Degraded=True",
            |co| {
                co.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Degraded" && c.status == "True")
                })
            },
        )
        .open()
        .await;
    for _ in 0..RESTARTS {
        manager.stop().await;
        manager = Manager::start(client.clone(), settings.clone());
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let held = window.hold().await;
    println!("{RESTARTS} restarts: never Degraded over {held:?}");
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// The first objects of kind `kind` the PO's inventory records: `(namespace, name)`.
async fn inventory_object(client: &Client, po: &str, kind: &str) -> (Option<String>, String) {
    let po = Api::<PlatformOperator>::all(client.clone())
        .get(po)
        .await
        .unwrap();
    po.status
        .iter()
        .flat_map(|s| &s.inventory)
        .flat_map(|entry| &entry.objects)
        .find(|o| o.kind == kind)
        .map(|o| (o.namespace.clone(), o.name.clone()))
        .unwrap_or_else(|| panic!("no {kind} in the inventory"))
}

/// What a drift edit changes of a Role or ClusterRole: its rules.
fn rules_of<K: serde::Serialize>(object: &K) -> serde_json::Value {
    serde_json::to_value(object).unwrap()["rules"].clone()
}

/// Drift made while the manager was down, and right after a new one started (around its
/// start-up snapshot, `operator/first_checks.rs`), is repaired by the new manager: judged by
/// what the API server holds. The first check after a start takes objects from a snapshot
/// listed after the start, and only while their metadata watch holds the same resourceVersion:
/// an edit made before the list is in the snapshot, one made after it is seen by the watch.
#[tokio::test]
async fn a_new_manager_repairs_drift_made_while_it_was_down_and_just_after_it_started() {
    use k8s_openapi::api::rbac::v1::{ClusterRole, Role};
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    steady_cluster(&client).await;
    let bundle = TestBundle::new("downtime", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(
        &client,
        "downtime",
        json!({"package": {"name": "downtime"}}),
    )
    .await;
    let settings: Settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    installed_at(&client, "downtime", "1.0.0").await;
    let (namespace, deployment) = inventory_object(&client, "downtime", "Deployment").await;
    let namespace = namespace.unwrap();
    let (_, role) = inventory_object(&client, "downtime", "Role").await;
    let (_, cluster_role) = inventory_object(&client, "downtime", "ClusterRole").await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), &namespace);
    let roles: Api<Role> = Api::namespaced(client.clone(), &namespace);
    let cluster_roles: Api<ClusterRole> = Api::all(client.clone());
    let replicas = deployments
        .get(&deployment)
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas;
    let role_rules = rules_of(&roles.get(&role).await.unwrap());
    let cluster_role_rules = rules_of(&cluster_roles.get(&cluster_role).await.unwrap());
    let drift = PatchParams::default();
    let no_rules = Patch::Merge(
        json!({"rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get"]}]}),
    );

    manager.stop().await;
    // While no manager runs: an admin scales the operator and edits its Role.
    deployments
        .patch(
            &deployment,
            &drift,
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    roles.patch(&role, &drift, &no_rules).await.unwrap();
    let manager = Manager::start(client.clone(), settings.clone());
    // And right after the new manager started: before, during or after its snapshot.
    for _ in 0..8 {
        cluster_roles
            .patch(&cluster_role, &drift, &no_rules)
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let repaired = || async {
        let d = deployments.get(&deployment).await.ok()?;
        let r = roles.get(&role).await.ok()?;
        let c = cluster_roles.get(&cluster_role).await.ok()?;
        (d.spec?.replicas == replicas
            && rules_of(&r) == role_rules
            && rules_of(&c) == cluster_role_rules)
            .then_some(())
    };
    eventually(
        WAIT,
        "the drift made around the restart to be repaired",
        repaired,
    )
    .await;
    // And once the first checks are done, drift is repaired as ever (the watch sees it).
    roles.patch(&role, &drift, &no_rules).await.unwrap();
    eventually(
        WAIT,
        "the Role edited after the start to be repaired",
        repaired,
    )
    .await;
    manager.stop().await;

    // A restart with nothing drifted: the first check reads none of the bundle's objects (each
    // is in the snapshot, current), takes its gate's OperatorCondition from the snapshot too
    // (the OperatorConditions are listed twice: by their metadata watch and for the snapshot,
    // both before the first check; before the gate took its copy, a third list was its own),
    // and writes nothing.
    let (counted, requests) = counting_client(&plane).await;
    let manager = Manager::start(counted, settings);
    // Every PO reconcile gathers the gate, whatever it then decides.
    eventually(WAIT, "the first check after the restart", || async {
        (manager.po_reconciles_finished() >= 1).then_some(())
    })
    .await;
    // And a while longer: a later reconcile's read or write would show too.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let condition_lists = count(&requests, "list", "operatorconditions.operators.coreos.com");
    assert_eq!(
        condition_lists, 2,
        "the OperatorConditions are listed by their watch and for the snapshot only: the gate \
         takes its copy from the snapshot"
    );
    let per_object: Vec<(&str, u64, u64)> = BUNDLE_RESOURCES
        .iter()
        .map(|r| (*r, count(&requests, "get", r), count(&requests, "patch", r)))
        .collect();
    println!("first check after a restart, (resource, gets, patches): {per_object:?}");
    assert!(
        per_object
            .iter()
            .all(|(_, gets, patches)| *gets == 0 && *patches == 0),
        "{per_object:?}"
    );
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// The test bundle's objects, as `pom_api_requests_total` names their resources.
const BUNDLE_RESOURCES: &[&str] = &[
    "namespaces",
    "customresourcedefinitions.apiextensions.k8s.io",
    "serviceaccounts",
    "roles.rbac.authorization.k8s.io",
    "rolebindings.rbac.authorization.k8s.io",
    "clusterroles.rbac.authorization.k8s.io",
    "clusterrolebindings.rbac.authorization.k8s.io",
    "deployments.apps",
    "operatorconditions.operators.coreos.com",
];

/// A client for an in-process manager that counts its requests as the manager's own process
/// does (`pom_api_requests_total`).
async fn counting_client(plane: &pom_e2e::ControlPlane) -> (Client, ApiRequests) {
    let config = kube::Config::from_custom_kubeconfig(
        plane.kubeconfig().clone(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let requests = ApiRequests::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&requests.layer())
        .build();
    (client, requests)
}

/// The requests `verb` (get, list: reads; patch: a write) of `resource` counted so far.
fn count(requests: &ApiRequests, verb: &'static str, resource: &str) -> u64 {
    let kind = if verb == "patch" { WRITE } else { READ };
    requests
        .family()
        .get_or_create(&RequestLabels {
            verb,
            kind,
            resource: resource.to_owned(),
        })
        .get()
}
