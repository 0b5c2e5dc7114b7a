#![allow(clippy::unwrap_used, clippy::expect_used)]
//! A settled operator that stops working is not healthy (issue 25 item 8, PRODUCT §8.1, §8.2):
//! after its move settled, the operator's only pod stops being ready (as a crash loop or an
//! OOM kill leaves it), the Deployment controller marks the Deployment unavailable, and the
//! PlatformOperator says Degraded=True and Upgradeable=False (`OperatorUnavailable`, naming the
//! Deployment), the aggregated ClusterOperator Available=False; when the pod is ready again,
//! both recover. Nothing is re-installed for it: the installed bundle stays.

use std::time::Duration;

use k8s_openapi::api::core::v1::Pod;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

/// Sets the Ready condition of every pod of `namespace` (kwok leaves a Running pod alone).
async fn set_pods_ready(client: &kube::Client, namespace: &str, ready: bool) {
    let pods: Api<Pod> = Api::namespaced(client.clone(), namespace);
    let status = if ready { "True" } else { "False" };
    for pod in pods.list(&ListParams::default()).await.unwrap().items {
        let name = pod.metadata.name.unwrap();
        let containers: Vec<_> = pod
            .spec
            .unwrap()
            .containers
            .iter()
            .map(|c| json!({"name": c.name, "image": c.image, "ready": ready, "restartCount": if ready { 0 } else { 5 }, "started": ready,
                "state": if ready { json!({"running": {}}) } else { json!({"waiting": {"reason": "CrashLoopBackOff"}}) }}))
            .collect();
        pods.patch_status(
            &name,
            &PatchParams::default(),
            &Patch::Strategic(json!({"status": {
                "conditions": [
                    {"type": "Ready", "status": status},
                    {"type": "ContainersReady", "status": status},
                ],
                "containerStatuses": containers,
            }})),
        )
        .await
        .unwrap();
    }
}

async fn cluster_operator_available(client: &kube::Client) -> Option<String> {
    let co = Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .ok()??;
    co.status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == "Available")
        .map(|c| c.status)
}

#[tokio::test]
async fn a_settled_operator_that_stops_working_is_degraded_until_it_works_again() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let bundle = TestBundle::new("crashy", "1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(&client, "crashy", json!({"package": {"name": "crashy"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(&client, "crashy", "Upgradeable", "True", None).await;
    eventually(WAIT, "the ClusterOperator to be Available", || async {
        (cluster_operator_available(&client).await? == "True").then_some(())
    })
    .await;

    // The operator's pod stops being ready: the Deployment becomes unavailable.
    set_pods_ready(&client, "crashy", false).await;
    let message = wait_po_condition(
        &client,
        "crashy",
        "Degraded",
        "True",
        Some("OperatorUnavailable"),
    )
    .await;
    assert!(
        message.contains(&format!(
            "Deployment crashy/{} is not available",
            bundle.deployment_name()
        )),
        "{message}"
    );
    wait_po_condition(
        &client,
        "crashy",
        "Upgradeable",
        "False",
        Some("OperatorUnavailable"),
    )
    .await;
    eventually(WAIT, "the ClusterOperator to be unavailable", || async {
        (cluster_operator_available(&client).await? == "False").then_some(())
    })
    .await;
    wait_po_condition(&client, "crashy", "Installed", "True", None).await;

    // It works again: healthy again, same bundle.
    set_pods_ready(&client, "crashy", true).await;
    wait_po_condition(&client, "crashy", "Degraded", "False", None).await;
    wait_po_condition(&client, "crashy", "Upgradeable", "True", None).await;
    eventually(
        WAIT,
        "the ClusterOperator to be Available again",
        || async { (cluster_operator_available(&client).await? == "True").then_some(()) },
    )
    .await;
    manager.stop().await;
}
