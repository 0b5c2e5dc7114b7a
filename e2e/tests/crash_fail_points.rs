#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Crash safety at named fail points (issue 13 item 8). The manager runs as a process with
//! `POM_FAIL_POINT` set and aborts there (no graceful shutdown, like a SIGKILL); a second
//! manager then starts clean and must converge with nothing lost: the move the first one
//! recorded is resumed (never skipped), the inventory covers every object written, what the
//! running bundle owns is never deleted, and a deleted PlatformOperator leaves only its CRD.
//!
//! Each bundle ships a PriorityClass renamed by its version, so "what only the old bundle had"
//! is visible, and the move is from 1.1.0 down to 1.0.0 by `steadyStateVersionRange`.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams};
use pom_api::PlatformOperator;
use pom_api::platform_operator::PlatformOperatorStatus;
use pom_e2e::ControlPlane;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::eventually;
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, set_steady_state_range, simulated_plane,
    wait_po_gone,
};
use serde_json::json;

const PO: &str = "crashop";
const WAIT: Duration = Duration::from_secs(180);

fn bundle(version: &str, class: &str) -> TestBundle {
    TestBundle::new(PO, version).with_object(json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": class}, "value": 1000
    }))
}

async fn start(plane: &ControlPlane, name: &str, fail_point: Option<&str>) -> ManagerProcess {
    start_with(plane, name, fail_point, None).await
}

async fn start_with(
    plane: &ControlPlane,
    name: &str,
    fail_point: Option<&str>,
    extra: Option<&str>,
) -> ManagerProcess {
    let mut args = vec![
        "--leader-elect=false".to_owned(),
        format!("--health-bind-address={}", free_address().unwrap()),
        "--resync-seconds=5".to_owned(),
    ];
    args.extend(extra.map(str::to_owned));
    let mut env = vec![
        ("POD_NAMESPACE", "openshift-platform-operators"),
        ("RELEASE_VERSION", "4.99.0-pom-test"),
    ];
    if let Some(point) = fail_point {
        env.push(("POM_FAIL_POINT", point));
    }
    ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        name,
        plane.kubeconfig_path(),
        &args,
        &env,
        plane.dir(),
    )
    .await
    .unwrap()
}

/// Waits for the manager to abort at its fail point.
async fn wait_aborted(manager: &mut ManagerProcess, point: &str) {
    let code = manager.wait_exit(WAIT).await;
    assert!(
        code != Some(0),
        "the manager with POM_FAIL_POINT={point} exited cleanly ({code:?}): {}",
        manager.log_tail(20)
    );
    assert!(
        manager
            .log_text()
            .contains(&format!("POM_FAIL_POINT {point}")),
        "the manager did not stop at {point}: {}",
        manager.log_tail(30)
    );
}

async fn status(client: &Client) -> PlatformOperatorStatus {
    Api::<PlatformOperator>::all(client.clone())
        .get(PO)
        .await
        .unwrap()
        .status
        .unwrap_or_default()
}

/// The PO settled on `version` with one inventory entry, which lists every object that bundle
/// ships, each of which exists.
async fn converged_on(client: &Client, version: &str, class: &str) -> PlatformOperatorStatus {
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let status = eventually(WAIT, &format!("{PO} to settle on {version}"), || async {
        let status = pos.get(PO).await.ok()?.status?;
        let settled = status.active_hop.as_ref().is_some_and(|h| h.settled);
        let at = status.installed_bundle.as_ref()?.version == version;
        (settled && at && status.inventory.len() == 1).then_some(status)
    })
    .await;
    let objects = &status.inventory[0].objects;
    assert!(
        objects
            .iter()
            .any(|o| o.kind == "PriorityClass" && o.name == class),
        "{objects:#?}"
    );
    assert!(exists(client, class).await, "{class} is missing");
    status
}

async fn exists(client: &Client, class: &str) -> bool {
    Api::<PriorityClass>::all(client.clone())
        .get_opt(class)
        .await
        .unwrap()
        .is_some()
}

/// A plane with the catalog (1.0.0 and 1.1.0) and the PO, not yet reconciled.
async fn setup() -> Option<(ControlPlane, Client, TestBundle, TestBundle)> {
    let plane = simulated_plane(false).await?;
    let client = plane.client().await.unwrap();
    let v100 = bundle("1.0.0", "crashop-low");
    let v110 = bundle("1.1.0", "crashop-high").replaces("1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[v100.clone(), v110.clone()], &[]),
        0,
    )
    .await;
    create_po(&client, PO, json!({"package": {"name": PO}})).await;
    Some((plane, client, v100, v110))
}

async fn move_down(client: &Client) {
    set_steady_state_range(client, PO, "=1.0.0").await;
}

/// Killed in the middle of an install: the intent and the whole inventory were recorded
/// before the first write, and the next manager finishes the same install.
async fn install_interrupted_at(point: &str) {
    let Some((plane, client, _, v110)) = setup().await else {
        return;
    };
    let mut first = start(&plane, &format!("first-{point}"), Some(point)).await;
    wait_aborted(&mut first, point).await;
    let recorded = status(&client).await;
    let hop = recorded
        .active_hop
        .clone()
        .expect("the intent was recorded");
    assert_eq!(
        (hop.to.as_str(), hop.settled),
        (v110.name().as_str(), false)
    );
    let entry = recorded
        .inventory
        .iter()
        .find(|e| e.bundle == v110.name())
        .expect("the inventory lists the bundle being installed");
    assert!(
        entry.objects.iter().any(|o| o.kind == "Deployment"),
        "{entry:#?}"
    );
    let mut second = start(&plane, &format!("second-{point}"), None).await;
    converged_on(&client, "1.1.0", "crashop-high").await;
    assert!(
        Api::<Deployment>::namespaced(client.clone(), PO)
            .get_opt(&v110.deployment_name())
            .await
            .unwrap()
            .is_some()
    );
    second.signal("TERM");
    let _ = second.wait_exit(Duration::from_secs(30)).await;
}

#[tokio::test]
async fn killed_after_the_first_apply_the_next_manager_finishes_the_install() {
    install_interrupted_at("after-first-apply").await;
}

#[tokio::test]
async fn killed_between_apply_and_status_the_next_manager_records_the_install() {
    install_interrupted_at("between-apply-and-status").await;
}

#[tokio::test]
async fn killed_mid_prune_the_next_manager_finishes_the_prune_and_keeps_what_runs() {
    let Some((plane, client, _, _)) = setup().await else {
        return;
    };
    let mut steady = start(&plane, "steady", None).await;
    converged_on(&client, "1.1.0", "crashop-high").await;
    steady.signal("KILL");
    let _ = steady.wait_exit(Duration::from_secs(30)).await;

    let mut first = start(&plane, "first-mid-prune", Some("mid-prune")).await;
    move_down(&client).await;
    wait_aborted(&mut first, "mid-prune").await;
    let mut second = start(&plane, "second-mid-prune", None).await;
    converged_on(&client, "1.0.0", "crashop-low").await;
    eventually(WAIT, "what only 1.1.0 had to be pruned", || async {
        (!exists(&client, "crashop-high").await).then_some(())
    })
    .await;
    second.signal("TERM");
    let _ = second.wait_exit(Duration::from_secs(30)).await;
}

#[tokio::test]
async fn killed_mid_cleanup_the_next_manager_finishes_the_cleanup() {
    let Some((plane, client, _, v110)) = setup().await else {
        return;
    };
    let mut steady = start(&plane, "steady", None).await;
    converged_on(&client, "1.1.0", "crashop-high").await;
    steady.signal("KILL");
    let _ = steady.wait_exit(Duration::from_secs(30)).await;

    let mut first = start(&plane, "first-mid-cleanup", Some("mid-cleanup")).await;
    Api::<PlatformOperator>::all(client.clone())
        .delete(PO, &DeleteParams::default())
        .await
        .unwrap();
    wait_aborted(&mut first, "mid-cleanup").await;
    assert!(
        Api::<PlatformOperator>::all(client.clone())
            .get_opt(PO)
            .await
            .unwrap()
            .is_some(),
        "the finalizer must hold the PO while its objects remain"
    );
    let mut second = start(&plane, "second-mid-cleanup", None).await;
    wait_po_gone(&client, PO, WAIT).await;
    assert!(
        !exists(&client, "crashop-high").await,
        "cleanup left an object"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), PO)
            .get_opt(&v110.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "cleanup left the Deployment"
    );
    assert!(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&v110.crd_name())
            .await
            .unwrap()
            .is_some(),
        "the CRD must survive"
    );
    second.signal("TERM");
    let _ = second.wait_exit(Duration::from_secs(30)).await;
}

/// Killed after the first object of an install from an image named by tag, while the tag then
/// moves to other content: the next manager applies the digest the intent recorded.
#[tokio::test]
async fn killed_mid_install_the_next_manager_applies_the_recorded_digest_not_the_moved_tag() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = pom_e2e::Registry::start().await.unwrap();
    let host = registry.host();
    let original = TestBundle::new("crashtag", "1.0.0");
    let digest = pom_e2e::oci_publish::push_files(
        &host,
        "bundles/crashtag",
        "1.0.0",
        &original.image_files(),
    )
    .await
    .unwrap();
    configmap_catalog(
        &client,
        "local",
        &catalog_json(
            std::slice::from_ref(&original),
            &[(original.name(), format!("{host}/bundles/crashtag:1.0.0"))],
        ),
        0,
    )
    .await;
    create_po(
        &client,
        "crashtag",
        json!({"package": {"name": "crashtag"}}),
    )
    .await;
    let insecure = format!("--insecure-registries={host}");
    let mut first = start_with(
        &plane,
        "first-tag",
        Some("after-first-apply"),
        Some(&insecure),
    )
    .await;
    wait_aborted(&mut first, "after-first-apply").await;
    let recorded = Api::<PlatformOperator>::all(client.clone())
        .get("crashtag")
        .await
        .unwrap()
        .status
        .unwrap()
        .active_hop
        .unwrap()
        .image;
    assert_eq!(
        recorded.as_deref(),
        Some(digest.as_str()),
        "the intent records the digest"
    );

    let mut moved = original.clone();
    moved.replicas = 3;
    let moved_digest =
        pom_e2e::oci_publish::push_files(&host, "bundles/crashtag", "1.0.0", &moved.image_files())
            .await
            .unwrap();
    assert_ne!(moved_digest, digest);
    let mut second = start_with(&plane, "second-tag", None, Some(&insecure)).await;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let installed = eventually(WAIT, "crashtag to settle", || async {
        let status = pos.get("crashtag").await.ok()?.status?;
        let settled = status.active_hop.as_ref().is_some_and(|h| h.settled);
        settled.then_some(status.installed_bundle?)
    })
    .await;
    assert_eq!(installed.image.as_deref(), Some(digest.as_str()));
    let replicas = Api::<Deployment>::namespaced(client.clone(), "crashtag")
        .get(&original.deployment_name())
        .await
        .unwrap()
        .spec
        .unwrap()
        .replicas;
    assert_eq!(replicas, Some(1), "the moved tag's content was applied");
    second.signal("TERM");
    let _ = second.wait_exit(Duration::from_secs(30)).await;
}

/// Killed mid-prune after a move up, then asked for the next move at once: the next manager
/// finishes the interrupted prune before it records the new move, so no status ever lists three
/// bundles and what only the first bundle had does not outlive the second move (found by the
/// chaos suite).
#[tokio::test]
async fn an_interrupted_prune_is_finished_before_the_next_move() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let chain = [
        bundle("1.0.0", "crashop-v100"),
        bundle("1.1.0", "crashop-v110").replaces("1.0.0"),
        bundle("1.2.0", "crashop-v120").replaces("1.1.0"),
    ];
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(&client, "local", &catalog_json(&chain, &[]), 0).await;
    create_po(
        &client,
        PO,
        json!({"package": {"name": PO}, "steadyStateVersionRange": "=1.0.0"}),
    )
    .await;
    let mut steady = start(&plane, "steady", None).await;
    converged_on(&client, "1.0.0", "crashop-v100").await;
    steady.signal("KILL");
    let _ = steady.wait_exit(Duration::from_secs(30)).await;

    let mut first = start(&plane, "first-prune-then-move", Some("mid-prune")).await;
    set_steady_state_range(&client, PO, "=1.1.0").await;
    wait_aborted(&mut first, "mid-prune").await;
    let cut = status(&client).await;
    assert_eq!(
        cut.inventory.len(),
        2,
        "the prune was interrupted: {:#?}",
        cut.inventory
    );

    let log =
        pom_e2e::event_log::EventLog::start(Api::<PlatformOperator>::all(client.clone())).await;
    set_steady_state_range(&client, PO, "=1.2.0").await;
    let mut second = start(&plane, "second-prune-then-move", None).await;
    converged_on(&client, "1.2.0", "crashop-v120").await;
    for event in log.events() {
        let inventory = event
            .object
            .status
            .as_ref()
            .map(|s| s.inventory.len())
            .unwrap_or_default();
        assert!(
            inventory <= 2,
            "at revision {} the inventory lists {inventory} bundles",
            event.revision
        );
    }
    assert!(
        !exists(&client, "crashop-v100").await,
        "1.0.0's object outlived two moves"
    );
    assert!(!exists(&client, "crashop-v110").await);
    second.signal("TERM");
    let _ = second.wait_exit(Duration::from_secs(30)).await;
}
