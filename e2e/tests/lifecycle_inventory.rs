#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The inventory (issue 13 item 3): `status.inventory` records every object each applied
//! bundle owns, so prune after a move and cleanup after a delete cover every kind a bundle
//! shipped, not only a fixed list. The bundles here ship a PriorityClass, a kind outside the
//! label sweep's list, renamed by each version: after the move from 1.1.0 down to 1.0.0 settles
//! the old one is gone and the new one stays; when the PlatformOperator is deleted everything
//! it installed goes except its CRD, and the PlatformOperator itself goes only then.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::scheduling::v1::PriorityClass;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams};
use pom_api::PlatformOperator;
use pom_api::platform_operator::InventoryObject;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, set_steady_state_range, simulated_plane,
    wait_po_gone,
};
use serde_json::json;

const PO: &str = "invop";
const WAIT: Duration = Duration::from_secs(180);

fn priority_class(name: &str) -> serde_json::Value {
    json!({
        "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
        "metadata": {"name": name}, "value": 1000,
        "description": "shipped by the invop test bundle"
    })
}

fn bundle(version: &str, class: &str) -> TestBundle {
    TestBundle::new(PO, version).with_object(priority_class(class))
}

/// The PO once settled on `version`: its inventory.
async fn settled_on(client: &Client, version: &str) -> Vec<(String, Vec<InventoryObject>)> {
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    eventually(WAIT, &format!("{PO} to settle on {version}"), || async {
        let status = pos.get(PO).await.ok()?.status?;
        let installed = status.installed_bundle.as_ref()?;
        let settled = status.active_hop.as_ref().is_none_or(|h| h.settled);
        (installed.version == version && settled && status.inventory.len() == 1).then(|| {
            status
                .inventory
                .iter()
                .map(|e| (e.bundle.clone(), e.objects.clone()))
                .collect()
        })
    })
    .await
}

fn has(objects: &[InventoryObject], kind: &str, name: &str) -> bool {
    objects.iter().any(|o| o.kind == kind && o.name == name)
}

async fn exists(api: &Api<PriorityClass>, name: &str) -> bool {
    api.get_opt(name).await.unwrap().is_some()
}

#[tokio::test]
async fn prune_and_cleanup_cover_every_kind_the_bundle_shipped() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let v100 = bundle("1.0.0", "invop-low");
    let v110 = bundle("1.1.0", "invop-high").replaces("1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[v100.clone(), v110.clone()], &[]),
        0,
    )
    .await;
    create_po(&client, PO, json!({"package": {"name": PO}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    let classes: Api<PriorityClass> = Api::all(client.clone());

    // Installed at the head: the inventory lists its objects, the PriorityClass among them.
    let inventory = settled_on(&client, "1.1.0").await;
    assert_eq!(inventory[0].0, v110.name());
    let objects = &inventory[0].1;
    assert!(has(objects, "PriorityClass", "invop-high"), "{objects:#?}");
    assert!(
        has(objects, "Deployment", &v110.deployment_name()),
        "{objects:#?}"
    );
    assert!(
        has(objects, "OperatorCondition", &v110.csv()),
        "{objects:#?}"
    );
    assert!(has(objects, "CustomResourceDefinition", &v110.crd_name()));
    assert!(exists(&classes, "invop-high").await);

    // Moved down by hand: once the move settles, what only 1.1.0 had is pruned, by inventory.
    set_steady_state_range(&client, PO, "=1.0.0").await;
    let inventory = settled_on(&client, "1.0.0").await;
    assert_eq!(inventory[0].0, v100.name());
    assert!(has(&inventory[0].1, "PriorityClass", "invop-low"));
    eventually(
        WAIT,
        "the PriorityClass only 1.1.0 shipped to be pruned",
        || async { (!exists(&classes, "invop-high").await).then_some(()) },
    )
    .await;
    assert!(
        exists(&classes, "invop-low").await,
        "the running bundle's object was pruned"
    );

    // Deleted: everything it installed goes but the CRD, and only then does the PO go.
    Api::<PlatformOperator>::all(client.clone())
        .delete(PO, &DeleteParams::default())
        .await
        .unwrap();
    wait_po_gone(&client, PO, WAIT).await;
    assert!(
        !exists(&classes, "invop-low").await,
        "cleanup left the PriorityClass"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), PO)
            .get_opt(&v100.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "cleanup left the Deployment"
    );
    assert!(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&v100.crd_name())
            .await
            .unwrap()
            .is_some(),
        "the CRD must survive its operator"
    );
    manager.stop().await;
}
