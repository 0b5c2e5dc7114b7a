#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The control plane itself: it starts, serves, and (with workloads) rolls out a Deployment.

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use kube::runtime::wait::{await_condition, conditions};
use pom_e2e::{ControlPlane, Workloads, binaries};

#[tokio::test]
async fn deployment_rolls_out_on_simulated_node() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    if binaries::require(&needed).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::Simulated).await.unwrap();
    let client = plane.client().await.unwrap();
    let version = client.apiserver_version().await.unwrap();
    assert!(version.git_version.starts_with("v1."), "{version:?}");

    let deployments: Api<Deployment> = Api::namespaced(client, "default");
    let deployment: Deployment = serde_json::from_value(serde_json::json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "smoke"},
        "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "smoke"}},
                 "template": {"metadata": {"labels": {"app": "smoke"}},
                              "spec": {"containers": [{"name": "c", "image": "example.invalid/smoke:1"}]}}}
    }))
    .unwrap();
    deployments
        .create(&PostParams::default(), &deployment)
        .await
        .unwrap();
    tokio::time::timeout(
        std::time::Duration::from_secs(120),
        await_condition(deployments, "smoke", conditions::is_deployment_completed()),
    )
    .await
    .expect("the Deployment did not roll out within 120s")
    .unwrap();
}
