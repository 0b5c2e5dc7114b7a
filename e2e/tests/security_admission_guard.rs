#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Least privilege, proven at the API server (issue 14 item 2): with exactly the shipped
//! plain-Kubernetes install applied (ClusterRole and the ValidatingAdmissionPolicy
//! `platform-operators-manager-guard`), the manager's own ServiceAccount, calling the API
//! directly as a compromised or buggy manager would, cannot change its own RBAC, bind `system:`
//! subjects or itself, write in a system namespace, touch objects it does not own, or create a
//! webhook other than a bundle's own; while everything a bundle legitimately needs (owned roles, bindings of the
//! operator's ServiceAccount, objects in an install namespace) still works.

use std::collections::BTreeMap;
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

/// A plane with the shipped install applied, the admin's client, the manager's (its
/// ServiceAccount's token) and namespace `web` created by the admin; returns once the guard
/// refuses a write.
async fn guarded_plane() -> Option<(ControlPlane, Client, Client)> {
    binaries::require(binaries::CONTROL_PLANE)?;
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
    Some((plane, admin, manager))
}

#[tokio::test]
async fn the_api_server_holds_the_manager_to_the_rules_no_exception_lifts() {
    let Some((_plane, admin, manager)) = guarded_plane().await else {
        return;
    };
    let roles = Api::<ClusterRole>::all(manager.clone());
    let bindings = Api::<ClusterRoleBinding>::all(manager.clone());
    let apply = PatchParams::apply("platform-operators-manager").force();

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

    // A bundle's role to every authenticated user, even on an object it would own.
    let everyone: ClusterRoleBinding = object(json!({
        "metadata": {"name": "web-everyone", "labels": owned_labels()},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "web-operator"},
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

fn dynamic_api(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    plural: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: group.into(),
        version: version.into(),
        api_version: if group.is_empty() {
            version.to_owned()
        } else {
            format!("{group}/{version}")
        },
        kind: kind.into(),
        plural: plural.into(),
    };
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Issue 22 item 1: the guard matches every kind the manager may write, not only those it may
/// delete. Before, the manager could patch any CRD (a conversion webhook on another operator's
/// CRD), any Namespace's labels (kube-system's included), any OperatorCondition's status (spoof
/// another operator's Upgradeable), bind cluster-admin to a ServiceAccount of an ordinary
/// namespace and mint that account's token, and rewrite a PlatformOperator's consent. Issue 33
/// item 1: binding a built-in role the content policy's table knows (cluster-admin included)
/// is a grant of what it holds, under consent, bounded by its subjects as a role the bundle
/// ships is (the token stays refused); a `system:` role the table does not know stays refused.
#[tokio::test]
async fn the_guard_covers_every_write_the_manager_can_make() {
    let Some((_plane, admin, manager)) = guarded_plane().await else {
        return;
    };
    let label = |labels: Value| json!({"metadata": {"labels": labels}});

    // CRDs: someone else's is not changed; one the manager owns is.
    let crd = |name: &str, group: &str, labels: Value| {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{name}s.{group}"), "labels": labels},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": format!("{name}s"), "singular": name, "kind": "Gadget"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        })
    };
    let crds = |client: &Client| {
        dynamic_api(
            client,
            "apiextensions.k8s.io",
            "v1",
            "CustomResourceDefinition",
            "customresourcedefinitions",
            None,
        )
    };
    crds(&admin)
        .create(
            &PostParams::default(),
            &object(crd("gadget", "other.example.com", json!({}))),
        )
        .await
        .unwrap();
    assert_guarded(
        crds(&manager)
            .patch(
                "gadgets.other.example.com",
                &PatchParams::default(),
                &Patch::Merge(label(owned_labels())),
            )
            .await,
        "labelling another operator's CRD",
        "does not own",
    );
    crds(&manager)
        .create(
            &PostParams::default(),
            &object(crd("gadget", "web.example.com", owned_labels())),
        )
        .await
        .expect("a bundle's CRD is created");
    crds(&manager)
        .patch(
            "gadgets.web.example.com",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"web": "1"}}})),
        )
        .await
        .expect("a CRD the manager owns is updated");

    // Namespaces: a platform namespace's labels, and an ordinary one it does not own.
    let namespaces = Api::<Namespace>::all(manager.clone());
    let privileged = label(json!({"pod-security.kubernetes.io/enforce": "privileged"}));
    assert_guarded(
        namespaces
            .patch(
                "kube-system",
                &PatchParams::default(),
                &Patch::Merge(&privileged),
            )
            .await,
        "labelling kube-system",
        "platform namespace",
    );
    assert_guarded(
        namespaces
            .patch("web", &PatchParams::default(), &Patch::Merge(&privileged))
            .await,
        "labelling a namespace it does not own",
        "does not own",
    );
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": "web-owned", "labels": owned_labels()}})),
        )
        .await
        .expect("an install namespace is created");
    namespaces
        .patch(
            "web-owned",
            &PatchParams::default(),
            &Patch::Merge(&privileged),
        )
        .await
        .expect("a namespace the manager owns is labelled");

    // Another operator's OperatorCondition: its status is not the manager's to write.
    let conditions = |client: &Client| {
        dynamic_api(
            client,
            "operators.coreos.com",
            "v2",
            "OperatorCondition",
            "operatorconditions",
            Some("web"),
        )
    };
    conditions(&admin)
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
                "metadata": {"name": "other.v1.0.0"}, "spec": {}
            })),
        )
        .await
        .unwrap();
    let spoof = json!({"status": {"conditions": [{"type": "Upgradeable", "status": "True", "reason": "Spoofed",
        "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z"}]}});
    assert_guarded(
        conditions(&manager)
            .patch_status(
                "other.v1.0.0",
                &PatchParams::default(),
                &Patch::Merge(&spoof),
            )
            .await,
        "writing another operator's Upgradeable",
        "does not own",
    );

    // Built-in powerful roles, bound to an ordinary ServiceAccount; and a token to use them.
    let operator = json!([{"kind": "ServiceAccount", "name": "op", "namespace": "web"}]);
    let cluster_binding = |name: &str, role: &str| -> ClusterRoleBinding {
        object(json!({
            "metadata": {"name": name, "labels": owned_labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": operator
        }))
    };
    let bindings = Api::<ClusterRoleBinding>::all(manager.clone());
    // Issue 33 item 1: a system: role the content policy's table does not know, no consent
    // allows; the roles it knows are grants of what they hold, allowed under the consent their
    // power needs (the guard cannot see consent: it bounds them by their subjects, as it bounds
    // a role a bundle ships).
    for role in [
        "system:controller:clusterrole-aggregation-controller",
        "system:openshift:scc:custom",
    ] {
        assert_guarded(
            bindings
                .create(
                    &PostParams::default(),
                    &cluster_binding(&format!("web-{}", role.replace(':', "-")), role),
                )
                .await,
            &format!("binding {role} cluster-wide"),
            "may not bind a system: ClusterRole that the content policy's table of built-in roles does not know",
        );
    }
    let role_bindings = dynamic_api(
        &manager,
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        Some("web-owned"),
    );
    let role_binding = |name: &str, role: &str| {
        object::<DynamicObject>(json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": name, "labels": owned_labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "web-owned"}]
        }))
    };
    assert_guarded(
        role_bindings
            .create(
                &PostParams::default(),
                &role_binding("web-olm", "system:controller:operator-lifecycle-manager"),
            )
            .await,
        "binding OLM's role in the install namespace",
        "table of built-in roles does not know",
    );
    // What the content policy allows (under consent for some) binds.
    for role in [
        "cluster-admin",
        "admin",
        "edit",
        "registry-editor",
        "system:auth-delegator",
    ] {
        bindings
            .create(
                &PostParams::default(),
                &cluster_binding(&format!("web-{}", role.replace(':', "-")), role),
            )
            .await
            .unwrap_or_else(|e| panic!("{role} is a built-in role the table knows: {e}"));
    }
    for role in [
        "registry-editor",
        "system:openshift:scc:privileged",
        "system:openshift:scc:restricted-v2",
    ] {
        role_bindings
            .create(
                &PostParams::default(),
                &role_binding(&format!("web-{}", role.replace(':', "-")), role),
            )
            .await
            .unwrap_or_else(|e| {
                panic!("{role} in a RoleBinding of the install namespace's own accounts: {e}")
            });
    }
    // Subjects by who they are (issue 33 item 2): the group of one non-platform namespace's
    // own ServiceAccounts binds (the same grant as each of them); every account of the
    // cluster, or of a platform namespace, does not.
    let group_binding = |name: &str, group: &str| -> ClusterRoleBinding {
        object(json!({
            "metadata": {"name": name, "labels": owned_labels()},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:auth-delegator"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": group}]
        }))
    };
    bindings
        .create(
            &PostParams::default(),
            &group_binding("web-own-accounts", "system:serviceaccounts:web-owned"),
        )
        .await
        .expect("the group of the install namespace's own ServiceAccounts");
    for (name, group) in [
        ("web-all-accounts", "system:serviceaccounts"),
        (
            "web-kube-system-accounts",
            "system:serviceaccounts:kube-system",
        ),
        (
            "web-monitoring-accounts",
            "system:serviceaccounts:openshift-monitoring",
        ),
        ("web-empty-accounts", "system:serviceaccounts:"),
        ("web-nested-accounts", "system:serviceaccounts:web:x"),
    ] {
        assert_guarded(
            bindings
                .create(&PostParams::default(), &group_binding(name, group))
                .await,
            &format!("binding the group {group}"),
            "system: users or groups",
        );
    }
    let token: k8s_openapi::api::core::v1::Secret = object(json!({
        "metadata": {"name": "op-token", "labels": owned_labels(),
                     "annotations": {"kubernetes.io/service-account.name": "op"}},
        "type": "kubernetes.io/service-account-token"
    }));
    assert_guarded(
        Api::<k8s_openapi::api::core::v1::Secret>::namespaced(manager.clone(), "web-owned")
            .create(&PostParams::default(), &token)
            .await,
        "minting a ServiceAccount token",
        "ServiceAccount token Secrets",
    );

    // A PlatformOperator's spec is the admin's: the manager writes its finalizers only.
    let pos = |client: &Client| {
        dynamic_api(
            client,
            "platform.openshift.io",
            "v1alpha1",
            "PlatformOperator",
            "platformoperators",
            None,
        )
    };
    pos(&admin)
        .create(
            &PostParams::default(),
            &object(json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": "web"}, "spec": {"package": {"name": "web"}}
            })),
        )
        .await
        .unwrap();
    assert_guarded(
        pos(&manager)
            .patch(
                "web",
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"consent": {"clusterAdminEquivalent": true}}})),
            )
            .await,
        "consenting for the admin",
        "may not change the spec of a PlatformOperator",
    );
    pos(&manager)
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["platform.openshift.io/cleanup"]}})),
        )
        .await
        .expect("the manager adds its finalizer");

    // Another operator's ClusterOperator.
    let cluster_operators = dynamic_api(
        &manager,
        "config.openshift.io",
        "v1",
        "ClusterOperator",
        "clusteroperators",
        None,
    );
    assert_guarded(
        cluster_operators
            .create(
                &PostParams::default(),
                &object(json!({
                    "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
                    "metadata": {"name": "network"}, "spec": {}
                })),
            )
            .await,
        "creating another operator's ClusterOperator",
        "writes one ClusterOperator",
    );
}

/// Issue 33 items 4 and 5: the owner label is the manager's alone. A tenant (a ServiceAccount
/// with `edit`'s rights on ConfigMaps and Deployments in its namespace, not the manager) cannot add it to its own ConfigMap or
/// Deployment, so it cannot exempt them from the webhooks POM installs (they exclude objects
/// carrying it), nor change or remove it on an object the manager labelled, so it cannot hand
/// that object to another PlatformOperator. Judged by what the API server stores.
#[tokio::test]
async fn a_tenant_cannot_set_or_change_the_owner_label() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ServiceAccount;
    use k8s_openapi::api::rbac::v1::RoleBinding;
    use pom_controller::owner_label_guard::OWNER_LABEL_GUARD;

    let Some((plane, admin, manager)) = guarded_plane().await else {
        return;
    };
    let post = PostParams::default();
    Api::<ServiceAccount>::namespaced(admin.clone(), "web")
        .create(&post, &object(json!({"metadata": {"name": "tenant"}})))
        .await
        .unwrap();
    // What `edit` grants on these kinds (the plane bootstraps no default ClusterRoles).
    Api::<k8s_openapi::api::rbac::v1::Role>::namespaced(admin.clone(), "web")
        .create(
            &post,
            &object(json!({
                "metadata": {"name": "tenant-edit"},
                "rules": [
                    {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["*"]},
                    {"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["*"]}
                ]
            })),
        )
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "web")
        .create(
            &post,
            &object(json!({
                "metadata": {"name": "tenant-edit"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "tenant-edit"},
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": "web"}]
            })),
        )
        .await
        .unwrap();
    let path = service_account_kubeconfig(&plane, &admin, "web", "tenant", "tenant.kubeconfig")
        .await
        .unwrap();
    let tenant = client_from(&path).await;
    let tenant_maps = Api::<ConfigMap>::namespaced(tenant.clone(), "web");
    let stored_maps = Api::<ConfigMap>::namespaced(admin.clone(), "web");
    let labelled = |name: &str, owner: &str| -> ConfigMap {
        object(json!({"metadata": {"name": name, "labels": {OWNER: owner}}}))
    };
    let owner_of = |map: &ConfigMap| {
        map.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(OWNER).cloned())
    };
    let assert_refused = |result: kube::Result<ConfigMap>, what: &str| {
        let (code, message) = refusal(result, what);
        assert_eq!(code, 403, "{what}: {message}");
        assert!(message.contains(OWNER_LABEL_GUARD), "{what}: {message}");
        assert!(message.contains("annotate it"), "{what}: {message}");
    };

    // The policy loads after its creation: until it refuses, a probe created is removed.
    eventually(
        Duration::from_secs(60),
        "the owner-label guard to load",
        || {
            let tenant_maps = tenant_maps.clone();
            let probe = labelled("probe", "web");
            async move {
                match tenant_maps.create(&PostParams::default(), &probe).await {
                    Err(kube::Error::Api(status)) if status.message.contains(OWNER_LABEL_GUARD) => {
                        Some(())
                    }
                    Ok(_) => {
                        tenant_maps
                            .delete("probe", &DeleteParams::default())
                            .await
                            .unwrap();
                        None
                    }
                    _ => None,
                }
            }
        },
    )
    .await;

    // Adding it to its own objects, at creation: a ConfigMap and a Deployment.
    assert_refused(
        tenant_maps.create(&post, &labelled("mine", "web")).await,
        "a tenant creating a ConfigMap with the owner label",
    );
    assert!(stored_maps.get_opt("mine").await.unwrap().is_none());
    let deployment: Deployment = object(json!({
        "metadata": {"name": "mine", "labels": {OWNER: "web"}},
        "spec": {
            "selector": {"matchLabels": {"app": "mine"}},
            "template": {
                "metadata": {"labels": {"app": "mine"}},
                "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]}
            }
        }
    }));
    let (code, message) = refusal(
        Api::<Deployment>::namespaced(tenant.clone(), "web")
            .create(&post, &deployment)
            .await,
        "a tenant creating a Deployment with the owner label",
    );
    assert_eq!(code, 403, "{message}");
    assert!(message.contains(OWNER_LABEL_GUARD), "{message}");
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), "web")
            .get_opt("mine")
            .await
            .unwrap()
            .is_none()
    );

    // ...or later, to an object it created without it.
    tenant_maps
        .create(&post, &object(json!({"metadata": {"name": "plain"}})))
        .await
        .unwrap();
    let add = json!({"metadata": {"labels": {OWNER: "web"}}});
    assert_refused(
        tenant_maps
            .patch("plain", &PatchParams::default(), &Patch::Merge(&add))
            .await,
        "a tenant adding the owner label",
    );
    assert_eq!(owner_of(&stored_maps.get("plain").await.unwrap()), None);

    // An object the manager labelled: its value is not changed nor removed by the tenant,
    // while the tenant's ordinary edits (which the manager repairs as drift) go through.
    Api::<ConfigMap>::namespaced(manager.clone(), "web")
        .create(&post, &labelled("owned", "web"))
        .await
        .unwrap();
    for (what, labels) in [
        ("changing the owner label's value", json!({OWNER: "other"})),
        ("removing the owner label", json!({OWNER: null})),
    ] {
        let patch = json!({"metadata": {"labels": labels}});
        assert_refused(
            tenant_maps
                .patch("owned", &PatchParams::default(), &Patch::Merge(&patch))
                .await,
            what,
        );
    }
    let edit = json!({"data": {"note": "tenant"}});
    tenant_maps
        .patch("owned", &PatchParams::default(), &Patch::Merge(&edit))
        .await
        .unwrap();
    let stored = stored_maps.get("owned").await.unwrap();
    assert_eq!(owner_of(&stored), Some("web".to_owned()));
}

/// Review finding on issue 33 item 5: an operator POM installed copies the labels of the
/// objects POM applied for it (operator-lib's ServiceMonitor from its metrics Service,
/// CreateOrUpdate children from the Deployment), the owner label included. A ServiceAccount of
/// the install namespace creating, in that namespace, an object carrying the namespace's own
/// owner value is admitted; the manager never deletes it (not over a window longer than every
/// resync, nor when the PO goes and its objects are swept by owner label); while that same
/// account cannot use another value or another namespace, and a tenant elsewhere still cannot
/// set the label at all. Judged by what the API server stores.
#[tokio::test]
async fn an_operator_may_copy_its_own_owner_label_and_pom_never_deletes_the_copy() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Service, ServiceAccount};
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    use pom_controller::owner_label_guard::OWNER_LABEL_GUARD;
    use pom_e2e::fixtures::{TestBundle, catalog_json};
    use pom_e2e::manager::Manager;
    use pom_e2e::quiet::QuietWindow;
    use pom_e2e::scenario::{
        configmap_catalog, create_po, simulated_plane, wait_catalog_serves, wait_po_condition,
    };

    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let admin = plane.client().await.unwrap();
    apply_kubernetes_manifests(&admin).await.unwrap();
    let bundle = TestBundle::new("copier", "1.0.0");
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&admin, "local", &fbc, 0).await;
    create_po(&admin, "copier", json!({"package": {"name": "copier"}})).await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(admin.clone(), settings.clone());
    wait_catalog_serves(&admin, "local", &fbc).await;
    wait_po_condition(
        &admin,
        "copier",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;

    // The labels POM put on the operator's Deployment, as the operator reads and copies them.
    let deployments = Api::<Deployment>::namespaced(admin.clone(), "copier");
    let copied = deployments
        .get(&bundle.deployment_name())
        .await
        .unwrap()
        .metadata
        .labels
        .unwrap();
    assert_eq!(copied.get(OWNER).map(String::as_str), Some("copier"));

    // The operator's identity: a ServiceAccount of its install namespace, allowed (by the
    // admin, as a bundle's Role would) to write ConfigMaps and Services there and in `web`.
    let post = PostParams::default();
    Api::<Namespace>::all(admin.clone())
        .create(&post, &object(json!({"metadata": {"name": "web"}})))
        .await
        .unwrap();
    Api::<ServiceAccount>::namespaced(admin.clone(), "copier")
        .create(&post, &object(json!({"metadata": {"name": "operator"}})))
        .await
        .unwrap();
    for namespace in ["copier", "web"] {
        Api::<Role>::namespaced(admin.clone(), namespace)
            .create(
                &post,
                &object(json!({
                    "metadata": {"name": "writer"},
                    "rules": [{"apiGroups": [""], "resources": ["configmaps", "services"], "verbs": ["*"]}]
                })),
            )
            .await
            .unwrap();
        Api::<RoleBinding>::namespaced(admin.clone(), namespace)
            .create(
                &post,
                &object(json!({
                    "metadata": {"name": "writer"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
                    "subjects": [{"kind": "ServiceAccount", "name": "operator", "namespace": "copier"}]
                })),
            )
            .await
            .unwrap();
    }
    let path =
        service_account_kubeconfig(&plane, &admin, "copier", "operator", "operator.kubeconfig")
            .await
            .unwrap();
    let operator = client_from(&path).await;
    let maps =
        |client: &Client, namespace: &str| Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let with_labels = |name: &str, labels: &BTreeMap<String, String>| -> ConfigMap {
        object(
            json!({"metadata": {"name": name, "labels": labels}, "data": {"state": "made by the operator"}}),
        )
    };
    let assert_refused = |result: kube::Result<ConfigMap>, what: &str| {
        let (code, message) = refusal(result, what);
        assert_eq!(code, 403, "{what}: {message}");
        assert!(message.contains(OWNER_LABEL_GUARD), "{what}: {message}");
    };

    // The policy takes a moment to load: until it refuses a foreign value, probes are removed.
    let mut foreign = copied.clone();
    foreign.insert(OWNER.to_owned(), "someone-else".to_owned());
    eventually(
        Duration::from_secs(60),
        "the owner-label guard to load",
        || {
            let (api, probe) = (maps(&operator, "copier"), with_labels("probe", &foreign));
            async move {
                match api.create(&PostParams::default(), &probe).await {
                    Err(kube::Error::Api(status)) if status.message.contains(OWNER_LABEL_GUARD) => {
                        Some(())
                    }
                    Ok(_) => {
                        api.delete("probe", &DeleteParams::default()).await.unwrap();
                        None
                    }
                    _ => None,
                }
            }
        },
    )
    .await;

    // Admitted: the namespace's own value, copied onto a ConfigMap and a Service it creates.
    maps(&operator, "copier")
        .create(&post, &with_labels("operator-state", &copied))
        .await
        .expect("the operator's copy of its own namespace's owner label is admitted");
    let service: Service = object(json!({
        "metadata": {"name": "operator-metrics-copy", "labels": copied},
        "spec": {"ports": [{"port": 8443}], "selector": {"app": "copier"}}
    }));
    Api::<Service>::namespaced(operator.clone(), "copier")
        .create(&post, &service)
        .await
        .expect("a Service with the copied labels is admitted");
    // ...and added later to an object it made without it (CreateOrUpdate on an older child).
    maps(&operator, "copier")
        .create(&post, &object(json!({"metadata": {"name": "older-child"}})))
        .await
        .unwrap();
    maps(&operator, "copier")
        .patch(
            "older-child",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {OWNER: "copier"}}})),
        )
        .await
        .expect("adding its own namespace's value later is admitted");
    // Refused: another value, a change or removal of it, the same value in another namespace.
    assert_refused(
        maps(&operator, "copier")
            .create(&post, &with_labels("foreign", &foreign))
            .await,
        "the operator marking an object for another PlatformOperator",
    );
    for (what, labels) in [
        (
            "the operator changing the value",
            json!({OWNER: "someone-else"}),
        ),
        ("the operator removing the value", json!({OWNER: null})),
    ] {
        assert_refused(
            maps(&operator, "copier")
                .patch(
                    "operator-state",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"metadata": {"labels": labels}})),
                )
                .await,
            what,
        );
    }
    assert_refused(
        maps(&operator, "web")
            .create(&post, &with_labels("elsewhere", &copied))
            .await,
        "the operator's value in a namespace not its own",
    );
    assert!(
        maps(&admin, "web")
            .get_opt("elsewhere")
            .await
            .unwrap()
            .is_none()
    );
    // A tenant elsewhere (an ordinary namespace's ServiceAccount, in its own namespace).
    Api::<ServiceAccount>::namespaced(admin.clone(), "web")
        .create(&post, &object(json!({"metadata": {"name": "tenant"}})))
        .await
        .unwrap();
    Api::<RoleBinding>::namespaced(admin.clone(), "web")
        .create(
            &post,
            &object(json!({
                "metadata": {"name": "tenant-writer"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "writer"},
                "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": "web"}]
            })),
        )
        .await
        .unwrap();
    let tenant_path =
        service_account_kubeconfig(&plane, &admin, "web", "tenant", "tenant.kubeconfig")
            .await
            .unwrap();
    let tenant = client_from(&tenant_path).await;
    assert_refused(
        maps(&tenant, "web")
            .create(&post, &with_labels("tenant-copy", &copied))
            .await,
        "a tenant elsewhere setting the owner label",
    );

    // The manager never deletes the copies: not over a window longer than every resync...
    let window = QuietWindow::new(&settings)
        .no_writes(maps(&admin, "copier"), "operator-state")
        .no_writes(maps(&admin, "copier"), "older-child")
        .no_writes(
            Api::<Service>::namespaced(admin.clone(), "copier"),
            "operator-metrics-copy",
        )
        .open()
        .await;
    window.hold().await;
    // ...nor when the PO goes and its objects are swept by owner label (a PO whose status
    // records no inventory: installed by a manager that kept none). The sweep deletes what
    // POM wrote (the Deployment) and leaves what the operator made.
    manager.stop().await;
    let pos = dynamic_api(
        &admin,
        "platform.openshift.io",
        "v1alpha1",
        "PlatformOperator",
        "platformoperators",
        None,
    );
    pos.patch_status(
        "copier",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"inventory": []}})),
    )
    .await
    .unwrap();
    pos.delete("copier", &DeleteParams::default())
        .await
        .unwrap();
    let manager = Manager::start(admin.clone(), settings.clone());
    eventually(
        Duration::from_secs(120),
        "the PO removed by its cleanup",
        || {
            let pos = pos.clone();
            async move { pos.get_opt("copier").await.unwrap().is_none().then_some(()) }
        },
    )
    .await;
    eventually(
        Duration::from_secs(60),
        "the sweep to delete what POM applied (the Deployment)",
        || {
            let (deployments, name) = (deployments.clone(), bundle.deployment_name());
            async move {
                deployments
                    .get_opt(&name)
                    .await
                    .unwrap()
                    .is_none()
                    .then_some(())
            }
        },
    )
    .await;
    for name in ["operator-state", "older-child"] {
        assert!(
            maps(&admin, "copier")
                .get_opt(name)
                .await
                .unwrap()
                .is_some(),
            "the sweep deleted the operator's own ConfigMap {name}"
        );
    }
    assert!(
        Api::<Service>::namespaced(admin.clone(), "copier")
            .get_opt("operator-metrics-copy")
            .await
            .unwrap()
            .is_some(),
        "the sweep deleted the operator's own Service"
    );
    manager.stop().await;
}
