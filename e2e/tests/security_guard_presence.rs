#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The guard's presence is checked (issue 22 item 2). The manager runs as a process under the
//! shipped install (its ServiceAccount's token, the shipped RBAC and admission guard) with the
//! production default `--require-admission-guard`. Once an admin deletes the guard's binding,
//! silently removing the layer that holds the manager inside the content policy:
//! - the aggregated ClusterOperator says Degraded, reason `AdmissionGuardMissing`, naming the
//!   binding;
//! - the PlatformOperator says so too, with an Event;
//! - POM writes nothing but status. A Deployment of the bundle deleted by hand is not put back
//!   over a window longer than every resync.
//!
//! Once the binding is back, the Degraded clears and the drift is repaired.
//!
//! The owner-label guard bounds tenants, not the manager (review finding on issue 33 item 5):
//! without its binding the ClusterOperator is Degraded (the same reason, naming it) while POM
//! keeps writing: the Deployment deleted by hand is put back.

use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingAdmissionPolicyBinding;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, PostParams};
use pom_controller::admission_guard::{GUARD, binding};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{eventually, po_condition};
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::scenario::{co_condition, configmap_catalog, create_po, wait_catalog_serves};
use pom_e2e::shipped::{apply_kubernetes_manifests, service_account_kubeconfig};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::json;

const NAMESPACE: &str = "openshift-platform-operators";
const SERVICE_ACCOUNT: &str = "platform-operators-manager";
const WAIT: Duration = Duration::from_secs(120);
/// The manager's resync here; the quiet window outlasts it.
const RESYNC_SECONDS: u64 = 5;

#[tokio::test]
async fn without_its_admission_guard_the_manager_writes_nothing_but_status() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    if binaries::require(&needed).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::Simulated).await.unwrap();
    let admin = plane.client().await.unwrap();
    apply_kubernetes_manifests(&admin).await.unwrap();
    let kubeconfig = service_account_kubeconfig(
        &plane,
        &admin,
        NAMESPACE,
        SERVICE_ACCOUNT,
        "manager-sa.kubeconfig",
    )
    .await
    .unwrap();
    let bundle = TestBundle::new("alpha", "1.0.0");
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&admin, "local", &fbc, 0).await;

    let health = free_address().unwrap();
    let resync = RESYNC_SECONDS.to_string();
    let env = [
        ("POD_NAMESPACE", NAMESPACE),
        ("RELEASE_VERSION", "4.99.0-pom-test"),
        ("POM_REQUIRE_ADMISSION_GUARD", "true"),
        ("POM_RESYNC_SECONDS", resync.as_str()),
    ];
    let manager = ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        "manager-guarded",
        &kubeconfig,
        &[
            "--leader-elect=false".to_owned(),
            format!("--health-bind-address={health}"),
        ],
        &env,
        plane.dir(),
    )
    .await
    .unwrap();
    wait_catalog_serves(&admin, "local", &fbc).await;
    create_po(&admin, "alpha", json!({"package": {"name": "alpha"}})).await;
    eventually(WAIT, "alpha installed with the guard in place", || async {
        po_condition(&admin, "alpha", "Installed")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    let deployments: Api<Deployment> = Api::namespaced(admin.clone(), "alpha");
    let deployment = bundle.deployment_name();
    deployments.get(&deployment).await.unwrap();

    // The admin deletes the guard's binding: the layer is gone.
    let bindings: Api<ValidatingAdmissionPolicyBinding> = Api::all(admin.clone());
    bindings
        .delete(GUARD, &DeleteParams::default())
        .await
        .unwrap();
    let (_, _, message) = eventually(WAIT, "the ClusterOperator Degraded", || async {
        co_condition(&admin, "Degraded")
            .await
            .filter(|(s, r, _)| s == "True" && r == "AdmissionGuardMissing")
    })
    .await;
    assert!(
        message.contains(&format!(
            "ValidatingAdmissionPolicyBinding {GUARD} does not exist"
        )),
        "{message}\n{}",
        manager.log_tail(30)
    );
    let (_, _, po_message) = eventually(WAIT, "alpha Degraded", || async {
        po_condition(&admin, "alpha", "Degraded")
            .await
            .filter(|(s, r, _)| s == "True" && r == "AdmissionGuardMissing")
    })
    .await;
    assert!(po_message.contains(GUARD), "{po_message}");
    let events = Api::<k8s_openapi::api::events::v1::Event>::all(admin.clone())
        .list(&Default::default())
        .await
        .unwrap();
    assert!(
        events.items.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("alpha")
                && e.reason.as_deref() == Some("AdmissionGuardMissing")
        }),
        "an Event on alpha says AdmissionGuardMissing"
    );

    // Drift the manager would repair at once: not repaired without the guard, over a window
    // longer than every resync (the resync, the catalog poll of a ConfigMap catalog is a watch).
    deployments
        .delete(&deployment, &DeleteParams::default())
        .await
        .unwrap();
    let window = Duration::from_secs(RESYNC_SECONDS * 3);
    let started = std::time::Instant::now();
    while started.elapsed() < window {
        assert!(
            deployments.get_opt(&deployment).await.unwrap().is_none(),
            "the Deployment was put back without the guard\n{}",
            manager.log_tail(30)
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // The binding is back: Degraded clears, the drift is repaired.
    bindings
        .create(&PostParams::default(), &binding())
        .await
        .unwrap();
    eventually(WAIT, "the ClusterOperator no longer Degraded", || async {
        co_condition(&admin, "Degraded")
            .await
            .filter(|(s, _, _)| s == "False")
    })
    .await;
    eventually(WAIT, "the Deployment put back", || async {
        deployments.get_opt(&deployment).await.ok()?
    })
    .await;
    eventually(WAIT, "alpha no longer Degraded", || async {
        po_condition(&admin, "alpha", "Degraded")
            .await
            .filter(|(s, _, _)| s == "False")
    })
    .await;

    // The owner-label guard's binding deleted: Degraded, naming it, but writes go on.
    use pom_controller::owner_label_guard::{self, OWNER_LABEL_GUARD};
    bindings
        .delete(OWNER_LABEL_GUARD, &DeleteParams::default())
        .await
        .unwrap();
    let (_, _, message) = eventually(
        WAIT,
        "the ClusterOperator Degraded (owner label)",
        || async {
            co_condition(&admin, "Degraded")
                .await
                .filter(|(s, r, _)| s == "True" && r == "AdmissionGuardMissing")
        },
    )
    .await;
    assert!(
        message.contains(&format!(
            "ValidatingAdmissionPolicyBinding {OWNER_LABEL_GUARD} does not exist"
        )) && message.contains("POM keeps installing and repairing"),
        "{message}\n{}",
        manager.log_tail(30)
    );
    deployments
        .delete(&deployment, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the Deployment put back without the owner-label guard",
        || async { deployments.get_opt(&deployment).await.ok()? },
    )
    .await;
    assert_eq!(
        po_condition(&admin, "alpha", "Degraded")
            .await
            .map(|(s, _, _)| s)
            .as_deref(),
        Some("False"),
        "the PO is not degraded by a guard that does not bound the manager"
    );
    bindings
        .create(&PostParams::default(), &owner_label_guard::binding())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the ClusterOperator no longer Degraded (owner label)",
        || async {
            co_condition(&admin, "Degraded")
                .await
                .filter(|(s, _, _)| s == "False")
        },
    )
    .await;
    drop(manager);
}
