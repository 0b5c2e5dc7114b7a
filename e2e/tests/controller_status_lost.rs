#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Status lost ≠ nothing installed (issue 25 item 4): a PlatformOperator restored from a
//! backup without its status (backup tools drop it) while its operator runs must not install
//! the channel head over the running operator. The manager finds the objects labelled for the
//! PO, recovers what runs from their bundle label and the catalog, and keeps it; a PO whose
//! objects name a bundle no catalog lists is refused, with nothing written. A plain bundle
//! without a Deployment (issue 34 item 5) is found through its other objects' labels, and
//! none of them is written again.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ServiceAccount};
use k8s_openapi::api::rbac::v1::Role;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

async fn image(client: &kube::Client, bundle: &TestBundle) -> String {
    let deployment = Api::<Deployment>::namespaced(client.clone(), &bundle.package)
        .get(&bundle.deployment_name())
        .await
        .unwrap();
    deployment.spec.unwrap().template.spec.unwrap().containers[0]
        .image
        .clone()
        .unwrap()
}

/// A plain+v0 bundle of package `plainlost` with no Deployment: a ConfigMap, a ServiceAccount
/// and a Role.
fn plain_bundle(version: &str) -> TestBundle {
    TestBundle::new("plainlost", version)
        .without_deployment()
        .with_object(json!({
            "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "plainlost-settings"},
            "data": {"version": version},
        }))
        .with_object(json!({
            "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "plainlost"},
        }))
        .with_object(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "plainlost"},
            "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}],
        }))
}

/// The resourceVersions of the plain bundle's objects: any write changes one.
async fn plain_versions(client: &kube::Client) -> Vec<(String, String)> {
    let ns = "plainlost";
    let cm = Api::<ConfigMap>::namespaced(client.clone(), ns)
        .get("plainlost-settings")
        .await
        .unwrap();
    let sa = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get("plainlost")
        .await
        .unwrap();
    let role = Api::<Role>::namespaced(client.clone(), ns)
        .get("plainlost")
        .await
        .unwrap();
    [
        ("ConfigMap", cm.metadata),
        ("ServiceAccount", sa.metadata),
        ("Role", role.metadata),
    ]
    .into_iter()
    .map(|(kind, meta)| {
        let labels = meta.labels.unwrap_or_default();
        assert_eq!(
            labels.get(pom_api::labels::BUNDLE).map(String::as_str),
            Some("plainlost.v1.0.0"),
            "{kind}"
        );
        (kind.to_owned(), meta.resource_version.unwrap())
    })
    .collect()
}

/// Deletes the PO without its cleanup (as a cluster restore loses it), then creates it again
/// with the same spec and no status.
async fn restore_without_status(client: &kube::Client, name: &str) {
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    pos.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    pos.delete(name, &DeleteParams::default()).await.unwrap();
    eventually(WAIT, "the PlatformOperator to be gone", || async {
        pos.get_opt(name).await.ok()?.is_none().then_some(())
    })
    .await;
    create_po(client, name, json!({"package": {"name": name}})).await;
}

#[tokio::test]
async fn a_po_restored_without_status_keeps_what_runs() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let v1 = TestBundle::new("restored", "1.0.0");
    let v2 = TestBundle::new("restored", "1.1.0").replaces("1.0.0");
    let p1 = plain_bundle("1.0.0");
    let p2 = plain_bundle("1.1.0").replaces("1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    let fbc = catalog_json(&[v1.clone(), p1.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(
        &client,
        "restored",
        json!({"package": {"name": "restored"}}),
    )
    .await;
    create_po(
        &client,
        "plainlost",
        json!({"package": {"name": "plainlost"}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(&client, "restored", "Installed", "True", None).await;
    wait_po_condition(&client, "plainlost", "Installed", "True", None).await;
    let running = image(&client, &v1).await;
    manager.stop().await;
    let plain_before = plain_versions(&client).await;

    // The catalog now offers 1.1.0 (what a fresh install would pick); the PO comes back from
    // a backup without its status.
    let fbc = catalog_json(&[v1.clone(), v2.clone(), p1.clone(), p2.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    restore_without_status(&client, "restored").await;
    restore_without_status(&client, "plainlost").await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "local", &fbc).await;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    eventually(WAIT, "the restored PO to record what runs", || async {
        let po = pos.get("restored").await.ok()?;
        (po.status?.installed_bundle?.version == "1.0.0").then_some(())
    })
    .await;
    // The plain bundle has no Deployment: its ConfigMap, ServiceAccount and Role name it.
    eventually(
        WAIT,
        "the restored plain PO to record what runs",
        || async {
            let po = pos.get("plainlost").await.ok()?;
            (po.status?.installed_bundle?.version == "1.0.0").then_some(())
        },
    )
    .await;
    assert_eq!(image(&client, &v1).await, running);
    // And it stays: no move to 1.1.0 over a window longer than every resync.
    let window = QuietWindow::new(&settings)
        .unchanged(
            Api::<PlatformOperator>::all(client.clone()),
            "restored",
            "the installed bundle",
            |po| json!(po.status.as_ref().and_then(|s| s.installed_bundle.as_ref())),
        )
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), "restored"),
            v1.deployment_name().as_str(),
        )
        .unchanged(
            Api::<PlatformOperator>::all(client.clone()),
            "plainlost",
            "the installed bundle",
            |po| json!(po.status.as_ref().and_then(|s| s.installed_bundle.as_ref())),
        )
        .no_writes(
            Api::<ConfigMap>::namespaced(client.clone(), "plainlost"),
            "plainlost-settings",
        )
        .no_writes(
            Api::<ServiceAccount>::namespaced(client.clone(), "plainlost"),
            "plainlost",
        )
        .no_writes(
            Api::<Role>::namespaced(client.clone(), "plainlost"),
            "plainlost",
        )
        .open()
        .await;
    let held = window.hold().await;
    println!("restored POs: kept 1.0.0 for {held:?}");
    assert_eq!(image(&client, &v1).await, running);
    // Not written since before the status was lost: never installed over itself.
    assert_eq!(plain_versions(&client).await, plain_before);

    // Objects of a bundle no catalog lists: refused, nothing written over them.
    manager.stop().await;
    let fbc = catalog_json(&[v2.clone(), p1.clone(), p2.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    restore_without_status(&client, "restored").await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    let message = wait_po_condition(
        &client,
        "restored",
        "Installed",
        "False",
        Some("AdoptionRefused"),
    )
    .await;
    assert!(message.contains("will not install over them"), "{message}");
    assert_eq!(image(&client, &v1).await, running);
    manager.stop().await;
}
