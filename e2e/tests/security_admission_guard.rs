#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Least privilege, proven at the API server (issue 14 item 2): with exactly the shipped
//! plain-Kubernetes install applied (ClusterRole and the ValidatingAdmissionPolicy
//! `platform-operators-manager-guard`), the manager's own ServiceAccount, calling the API
//! directly as a compromised or buggy manager would, cannot change its own RBAC, bind `system:`
//! subjects or itself, write in a system namespace, touch objects it does not own, or create a
//! webhook other than a bundle's own; while everything a bundle legitimately needs (owned roles, bindings of the
//! operator's ServiceAccount, objects in an install namespace) still works.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::api::{Api, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::discovery::ApiResource;
use kube::{Client, Config};
use pom_controller::admission_guard::GUARD;
use pom_e2e::manager::eventually;
use pom_e2e::shipped::{apply_kubernetes_manifests, service_account_kubeconfig};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const NAMESPACE: &str = "openshift-platform-operators";
const SERVICE_ACCOUNT: &str = "platform-operators-manager";
const OWNER: &str = "platform.openshift.io/owner";

async fn client_from(path: &std::path::Path) -> Client {
    let kubeconfig = Kubeconfig::read_from(path).unwrap();
    let config = Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
        .await
        .unwrap();
    Client::try_from(config).unwrap()
}

fn object<K: DeserializeOwned>(value: Value) -> K {
    serde_json::from_value(value).unwrap()
}

/// The API error of a refused call: (HTTP code, message).
fn refusal<T: std::fmt::Debug>(result: kube::Result<T>, what: &str) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.message),
        other => panic!("{what}: expected a refusal, got {other:?}"),
    }
}

/// Asserts the guard refused `result` with a message containing `because`.
fn assert_guarded<T: std::fmt::Debug>(result: kube::Result<T>, what: &str, because: &str) {
    let (code, message) = refusal(result, what);
    assert_eq!(code, 403, "{what}: {message}");
    assert!(
        message.contains(GUARD),
        "{what}: not refused by the guard: {message}"
    );
    assert!(message.contains(because), "{what}: {message}");
}

fn owned_labels() -> Value {
    json!({ OWNER: "web" })
}

#[tokio::test]
async fn the_api_server_holds_the_manager_to_the_rules_no_exception_lifts() {
    if binaries::require(binaries::CONTROL_PLANE).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let admin = plane.client().await.unwrap();
    apply_kubernetes_manifests(&admin).await.unwrap();
    let path = service_account_kubeconfig(
        &plane,
        &admin,
        NAMESPACE,
        SERVICE_ACCOUNT,
        "manager.kubeconfig",
    )
    .await
    .unwrap();
    let manager = client_from(&path).await;
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "web"}})),
        )
        .await
        .unwrap();

    let roles = Api::<ClusterRole>::all(manager.clone());
    let bindings = Api::<ClusterRoleBinding>::all(manager.clone());
    let apply = PatchParams::apply("platform-operators-manager").force();

    // The policy takes a moment to load after it is created: probe with a harmless write it
    // refuses (a ConfigMap in kube-system, removed by the admin while the guard is not there).
    let probe: ConfigMap =
        object(json!({"metadata": {"name": "guard-probe", "labels": owned_labels()}}));
    eventually(Duration::from_secs(60), "the guard to load", || {
        let manager = manager.clone();
        let admin = admin.clone();
        let probe = probe.clone();
        async move {
            let created = Api::<ConfigMap>::namespaced(manager, "kube-system")
                .create(&PostParams::default(), &probe)
                .await;
            match created {
                Err(kube::Error::Api(status)) if status.message.contains(GUARD) => Some(()),
                Ok(_) => {
                    Api::<ConfigMap>::namespaced(admin, "kube-system")
                        .delete("guard-probe", &DeleteParams::default())
                        .await
                        .unwrap();
                    None
                }
                _ => None,
            }
        }
    })
    .await;

    // Its own ClusterRole: no wider rules, no delete.
    let own_role: ClusterRole = object(json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": SERVICE_ACCOUNT},
        "rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    }));
    let (code, message) = refusal(
        roles
            .patch(SERVICE_ACCOUNT, &apply, &Patch::Apply(&own_role))
            .await,
        "widening its own ClusterRole",
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains(GUARD), "{message}");
    assert!(message.contains("its own RBAC"), "{message}");
    assert_guarded(
        roles
            .delete(SERVICE_ACCOUNT, &DeleteParams::default())
            .await,
        "deleting its own ClusterRole",
        "its own RBAC",
    );
    let stored = Api::<ClusterRole>::all(admin.clone())
        .get(SERVICE_ACCOUNT)
        .await
        .unwrap();
    assert!(
        !stored
            .rules
            .unwrap_or_default()
            .iter()
            .any(|rule| rule.verbs.iter().any(|v| v == "*")),
        "the manager's ClusterRole was changed"
    );

    // cluster-admin to every authenticated user, even on an object it would own.
    let everyone: ClusterRoleBinding = object(json!({
        "metadata": {"name": "web-everyone", "labels": owned_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]
    }));
    assert_guarded(
        bindings.create(&PostParams::default(), &everyone).await,
        "binding system:authenticated",
        "system: users or groups",
    );
    // Binding itself (the self-binding a hostile bundle would use before adding a webhook).
    let itself: ClusterRoleBinding = object(json!({
        "metadata": {"name": "web-self", "labels": owned_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": NAMESPACE}]
    }));
    assert_guarded(
        bindings.create(&PostParams::default(), &itself).await,
        "binding its own ServiceAccount",
        "ServiceAccounts of platform namespaces",
    );
    // Granting its own role to someone else.
    let lend: ClusterRoleBinding = object(json!({
        "metadata": {"name": "web-lend", "labels": owned_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": SERVICE_ACCOUNT},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "web"}]
    }));
    assert_guarded(
        bindings.create(&PostParams::default(), &lend).await,
        "binding its own role",
        "may not bind its own roles",
    );
    // A webhook only in the shape the renderer gives a bundle's (issue 21): not one that
    // calls a URL, sees every group or the objects POM manages.
    let webhooks = ApiResource {
        group: "admissionregistration.k8s.io".into(),
        version: "v1".into(),
        api_version: "admissionregistration.k8s.io/v1".into(),
        kind: "ValidatingWebhookConfiguration".into(),
        plural: "validatingwebhookconfigurations".into(),
    };
    let hook = |name: &str, client_config: Value, rules: Value, object_selector: Value| {
        object::<DynamicObject>(json!({
            "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": name, "labels": owned_labels()},
            "webhooks": [{
                "name": format!("{name}.example.com"), "clientConfig": client_config,
                "rules": rules, "objectSelector": object_selector,
                "sideEffects": "None", "admissionReviewVersions": ["v1"], "failurePolicy": "Ignore"
            }]
        }))
    };
    let service = json!({"service": {"namespace": "web", "name": "op-service", "port": 443}});
    let own_rules = json!([{"apiGroups": ["web.example.com"], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["widgets"]}]);
    let excluded = json!({"matchExpressions": [{"key": OWNER, "operator": "DoesNotExist"}]});
    let webhook_api = Api::<DynamicObject>::all_with(manager.clone(), &webhooks);
    for (name, config, rules, selector) in [
        (
            "web-url",
            json!({"url": "https://collector.example.invalid/hook"}),
            own_rules.clone(),
            excluded.clone(),
        ),
        (
            "web-everything",
            service.clone(),
            json!([{"apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]}]),
            excluded.clone(),
        ),
        (
            "web-sees-pom",
            service.clone(),
            own_rules.clone(),
            json!({}),
        ),
        (
            "web-platform",
            json!({"service": {"namespace": "kube-system", "name": "x", "port": 443}}),
            own_rules.clone(),
            excluded.clone(),
        ),
    ] {
        assert_guarded(
            webhook_api
                .create(&PostParams::default(), &hook(name, config, rules, selector))
                .await,
            &format!("creating webhook {name}"),
            "a webhook the manager registers",
        );
    }
    webhook_api
        .create(
            &PostParams::default(),
            &hook("web-bundle", service, own_rules, excluded),
        )
        .await
        .expect("a bundle's webhook, as the renderer shapes it, is allowed");

    // A system namespace, its own included.
    for namespace in ["kube-system", NAMESPACE, "default"] {
        let cm: ConfigMap =
            object(json!({"metadata": {"name": "web-config", "labels": owned_labels()}}));
        assert_guarded(
            Api::<ConfigMap>::namespaced(manager.clone(), namespace)
                .create(&PostParams::default(), &cm)
                .await,
            &format!("a ConfigMap in {namespace}"),
            "platform namespace",
        );
    }

    // Someone else's object in an ordinary namespace: no change, no delete, until adopted.
    let theirs: ConfigMap = object(json!({"metadata": {"name": "theirs"}, "data": {"a": "1"}}));
    let admin_cms = Api::<ConfigMap>::namespaced(admin.clone(), "web");
    admin_cms
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let manager_cms = Api::<ConfigMap>::namespaced(manager.clone(), "web");
    assert_guarded(
        manager_cms.delete("theirs", &DeleteParams::default()).await,
        "deleting an object it does not own",
        "does not own",
    );
    let takeover: ConfigMap = object(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "theirs", "labels": owned_labels()}, "data": {"a": "2"}
    }));
    assert_guarded(
        manager_cms
            .patch("theirs", &apply, &Patch::Apply(&takeover))
            .await,
        "labelling an object it does not own",
        "does not own",
    );
    assert_eq!(
        admin_cms.get("theirs").await.unwrap().data.unwrap()["a"],
        "1",
        "the object was changed"
    );
    admin_cms
        .patch(
            "theirs",
            &PatchParams::default(),
            &Patch::Merge(
                json!({"metadata": {"annotations": {"platform.openshift.io/adopt": "web"}}}),
            ),
        )
        .await
        .unwrap();
    manager_cms
        .patch("theirs", &apply, &Patch::Apply(&takeover))
        .await
        .expect("an object annotated for adoption may be taken over");

    // What a bundle legitimately ships still works: an owned role, a binding of the
    // operator's ServiceAccount, objects in the install namespace; and POM may prune them.
    let role: ClusterRole = object(json!({
        "metadata": {"name": "web-operator", "labels": owned_labels()},
        "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]
    }));
    roles.create(&PostParams::default(), &role).await.unwrap();
    let binding: ClusterRoleBinding = object(json!({
        "metadata": {"name": "web-operator", "labels": owned_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "web-operator"},
        "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "web"}]
    }));
    bindings
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let cm: ConfigMap =
        object(json!({"metadata": {"name": "web-config", "labels": owned_labels()}}));
    manager_cms
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    bindings
        .delete("web-operator", &DeleteParams::default())
        .await
        .unwrap();
    roles
        .delete("web-operator", &DeleteParams::default())
        .await
        .unwrap();
    manager_cms
        .delete("web-config", &DeleteParams::default())
        .await
        .unwrap();
}
