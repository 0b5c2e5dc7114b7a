#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A way out of a move that never settles (issue 25 item 2, seed 001's 7.10.0 → 7.10.1): the
//! operator's 1.1.0 never becomes available (its pods select no node), so POM holds every later
//! bundle, as it must. The vendor ships the fix 1.1.1; the admin annotates the PO with
//! `platform.openshift.io/unsettled-move: skip:<the stuck bundle>` and the move to 1.1.1 starts
//! and settles, announced with an Event. Nothing happens without the annotation, and an
//! annotation naming another bundle is inert.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::labels::UNSETTLED_MOVE;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);
const PO: &str = "restless";

async fn annotate(client: &kube::Client, value: &str) {
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            PO,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {UNSETTLED_MOVE: value}}})),
        )
        .await
        .unwrap();
}

async fn set_range(client: &kube::Client, range: &str) {
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            PO,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": range}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn an_admin_moves_past_a_move_that_never_settles() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let v1 = TestBundle::new(PO, "1.0.0");
    let stuck = TestBundle::new(PO, "1.1.0").replaces("1.0.0").never_ready();
    let fix = TestBundle::new(PO, "1.1.1").replaces("1.1.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    let fbc = catalog_json(&[v1.clone(), stuck.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(
        &client,
        PO,
        json!({"package": {"name": PO}, "steadyStateVersionRange": "=1.0.0"}),
    )
    .await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(&client, PO, "Upgradeable", "True", None).await;

    // The move to 1.1.0 starts and never settles.
    set_range(&client, ">=1.0.0 <1.1.1").await;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    eventually(WAIT, "the move to 1.1.0 to be applied", || async {
        let status = pos.get(PO).await.ok()?.status?;
        (status.installed_bundle?.version == "1.1.0"
            && status.active_hop.is_some_and(|h| !h.settled))
        .then_some(())
    })
    .await;

    // The fix is published and allowed: POM holds it behind the unsettled move, also with an
    // annotation that names another bundle.
    let fbc = catalog_json(&[v1, stuck.clone(), fix], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    wait_catalog_serves(&client, "local", &fbc).await;
    set_range(&client, ">=1.0.0").await;
    annotate(&client, "skip:restless.v1.0.0").await;
    wait_po_condition(&client, PO, "Upgradeable", "False", Some("MoveNotSettled")).await;
    let window = QuietWindow::new(&settings)
        .unchanged(
            Api::<PlatformOperator>::all(client.clone()),
            PO,
            "the installed bundle",
            |po| json!(po.status.as_ref().and_then(|s| s.installed_bundle.as_ref())),
        )
        .open()
        .await;
    window.hold().await;

    // The admin moves past it, naming the stuck bundle: the fix starts, and settles.
    annotate(&client, &format!("skip:{}", stuck.name())).await;
    eventually(WAIT, "the move to 1.1.1 to settle", || async {
        let status = pos.get(PO).await.ok()?.status?;
        (status.installed_bundle?.version == "1.1.1"
            && status.active_hop.is_some_and(|h| h.settled))
        .then_some(())
    })
    .await;
    let events: Api<Event> = Api::all(client.clone());
    let said = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .any(|e| {
            e.reason.as_deref() == Some("UnsettledMoveSkipped")
                && e.note
                    .as_deref()
                    .is_some_and(|n| n.contains("restless.v1.1.1"))
        });
    assert!(said, "no UnsettledMoveSkipped Event");
    manager.stop().await;
}
