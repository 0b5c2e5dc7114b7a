#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The manager against a real control plane with simulated workloads: installs, rollouts,
//! status, the aggregated ClusterOperator, drift repair, deletion and refusals.

use pom_e2e::scenario::{
    configmap_catalog, create_po, set_cluster, simulated_plane, wait_po_condition,
};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use pom_api::PlatformOperator;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually, po_condition};
use pom_e2e::quiet::{Objects, QuietWindow};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

async fn cluster_operator(client: &Client) -> ClusterOperator {
    Api::<ClusterOperator>::all(client.clone())
        .get(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .unwrap()
}

fn co_condition(co: &ClusterOperator, type_: &str) -> (String, String, String) {
    let c = co
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap();
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[tokio::test]
async fn installs_from_a_configmap_catalog_and_reports_the_cluster_operator() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    // The harness serves config.openshift.io, so the manager judges the ClusterVersion: a
    // steady 4.16 cluster (without one it would never report a version, failing closed).
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    let bundle = TestBundle::new("alpha", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(&client, "alpha", json!({"package": {"name": "alpha"}})).await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());

    wait_po_condition(
        &client,
        "alpha",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    // The operator really rolled out (kwok runs its pod), read through the API alone.
    let deployment = Api::<Deployment>::namespaced(client.clone(), "alpha")
        .get(&bundle.deployment_name())
        .await
        .unwrap();
    let available = deployment
        .status
        .unwrap()
        .conditions
        .unwrap()
        .into_iter()
        .any(|c| c.type_ == "Available" && c.status == "True");
    assert!(available);
    let po = Api::<PlatformOperator>::all(client.clone())
        .get("alpha")
        .await
        .unwrap();
    let status = po.status.unwrap();
    assert_eq!(
        status.installed_bundle.as_ref().unwrap().name,
        "alpha.v1.0.0"
    );
    // Once installed, the steady-state pin holds the installed version.
    let pin = eventually(WAIT, "the steady pin", || async {
        let pin = Api::<PlatformOperator>::all(client.clone())
            .get("alpha")
            .await
            .ok()?
            .status?
            .pin?;
        (pin.reason.as_str() == "Steady").then_some(pin)
    })
    .await;
    assert_eq!(pin.range, "=1.0.0");
    assert!(status.active_hop.unwrap().settled);
    // The CRD is installed and labelled.
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&bundle.crd_name())
        .await
        .unwrap();
    assert_eq!(
        crd.metadata.labels.unwrap()["platform.openshift.io/owner"],
        "alpha"
    );

    // §8.2: every condition explicit, versions reached, related objects listed.
    // The ClusterOperator follows the PO's status through its own watch: it reports the
    // installed PO once its Progressing has caught up (it never stays Progressing, else this
    // times out).
    let co = eventually(
        WAIT,
        "the ClusterOperator to report the installed PO",
        || async {
            let co = cluster_operator(&client).await;
            let versions = co.status.as_ref()?.versions.clone();
            let progressing = co
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "Progressing")?;
            (!versions.is_empty() && progressing.status == "False").then_some(co)
        },
    )
    .await;
    assert_eq!(co_condition(&co, "Available").0, "True");
    assert_eq!(co_condition(&co, "Degraded").0, "False");
    assert_eq!(
        co_condition(&co, "Progressing").0,
        "False",
        "{:?}",
        co_condition(&co, "Progressing")
    );
    // Upgradeable: the bundle declares no maxOpenShiftVersion, so the PO does not block the
    // next minor and says why; the ClusterOperator carries it as the one line for the PO.
    let (status, reason, po_message) = po_condition(&client, "alpha", "Upgradeable").await.unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "AsExpected"),
        "{po_message}"
    );
    assert_eq!(bundle.max_openshift_version, None);
    assert!(
        po_message.contains("alpha.v1.0.0")
            && po_message.contains("declares no maxOpenShiftVersion"),
        "{po_message}"
    );
    assert_eq!(
        co_condition(&co, "Upgradeable"),
        (
            "True".into(),
            "AsExpected".into(),
            format!("alpha: {po_message}")
        )
    );
    let status = co.status.unwrap();
    assert_eq!(status.versions[0].version, "4.99.0-pom-test");
    assert!(
        status
            .related_objects
            .iter()
            .any(|r| r.resource == "namespaces" && r.name == "alpha")
    );

    // Steady state: no further writes to the PO, the ClusterOperator or the operator's
    // Deployment (its status aside, which kube-controller-manager owns), over a window longer
    // than the PO resync and the ClusterOperator's periodic recompute.
    let window = QuietWindow::new(&settings)
        .no_writes(Api::<PlatformOperator>::all(client.clone()), "alpha")
        .no_writes(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
        )
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), "alpha"),
            Objects::All,
        );
    assert!(window.length() > Duration::from_secs(30));
    window.open().await.hold().await;

    // Drift: a hand edit of the Deployment is put back.
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), "alpha");
    deployments
        .patch(
            &bundle.deployment_name(),
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"replicas": 3}})),
        )
        .await
        .unwrap();
    eventually(
        WAIT,
        "drift repair of the Deployment's replicas",
        || async {
            let d = deployments.get(&bundle.deployment_name()).await.ok()?;
            (d.spec?.replicas == Some(1)).then_some(())
        },
    )
    .await;

    // An admin's custom resource of the operator's CRD, in the install namespace.
    let gvk = kube::core::GroupVersionKind::gvk("alpha.example.com", "v1", "Widget");
    let widgets: Api<kube::api::DynamicObject> = Api::namespaced_with(
        client.clone(),
        "alpha",
        &kube::core::ApiResource::from_gvk(&gvk),
    );
    let widget: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": "alpha.example.com/v1", "kind": "Widget",
        "metadata": {"name": "precious"}, "spec": {"size": 3}
    }))
    .unwrap();
    widgets
        .create(&PostParams::default(), &widget)
        .await
        .unwrap();

    // Deletion removes what POM installed but keeps the CRD and the custom resources.
    Api::<PlatformOperator>::all(client.clone())
        .delete("alpha", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "the PO to be gone", || async {
        Api::<PlatformOperator>::all(client.clone())
            .get_opt("alpha")
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    assert!(
        deployments
            .get_opt(&bundle.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "the Deployment must be removed"
    );
    assert!(
        Api::<CustomResourceDefinition>::all(client.clone())
            .get_opt(&bundle.crd_name())
            .await
            .unwrap()
            .is_some(),
        "the CRD must be kept"
    );
    assert!(
        widgets.get_opt("precious").await.unwrap().is_some(),
        "custom resources must survive the deletion"
    );
    manager.stop().await;
}
