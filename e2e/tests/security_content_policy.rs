#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Hostile bundles against a real API server (issues 14 and 24, PRODUCT §6): one
//! PlatformOperator per refusal class of the content policy, each refused with a reason that
//! names the object and the rule, and nothing of it on the cluster (not even its install
//! namespace); an upgrade to a bundle with a power the admin has not consented to leaves the
//! running operator as it was until the admin consents, which is then reported; a system
//! install namespace is refused at admission.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Event, Namespace, Pod};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding};
use kube::Resource;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::Manager;
use pom_e2e::scenario::{
    configmap_catalog, create_po, deployment_image, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use serde_json::{Value, json};

/// The namespace the test manager says it runs in (`Settings::default`).
const MANAGER_NAMESPACE: &str = "openshift-platform-operators";

fn binding(name: &str, role: &str, subject: Value) -> Value {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [subject]
    })
}

fn cluster_role(name: &str, extra: Value) -> Value {
    let mut role = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": name},
    });
    if let (Some(role), Some(extra)) = (role.as_object_mut(), extra.as_object()) {
        role.extend(extra.clone());
    }
    role
}

/// (package, bundle, rule the refusal names, object name it names).
fn hostile_bundles() -> Vec<(&'static str, TestBundle, &'static str, &'static str)> {
    let sa =
        |ns: &str, name: &str| json!({"kind": "ServiceAccount", "name": name, "namespace": ns});
    vec![
        (
            "nsgrab",
            TestBundle::new("nsgrab", "1.0.0").plain().with_object(
                json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "stolen"}}),
            ),
            "KindNeverAllowed",
            "\"stolen\"",
        ),
        (
            "hooker",
            TestBundle::new("hooker", "1.0.0").plain().with_object(json!({
                "apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": "hooker-everything"}, "webhooks": []
            })),
            "KindNeverAllowed",
            "\"hooker-everything\"",
        ),
        (
            "apisvc",
            TestBundle::new("apisvc", "1.0.0").plain().with_object(json!({
                "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
                "metadata": {"name": "v1.evil.example.com"},
                "spec": {"group": "evil.example.com", "version": "v1", "groupPriorityMinimum": 1, "versionPriority": 1}
            })),
            "KindNeverAllowed",
            "\"v1.evil.example.com\"",
        ),
        (
            "podder",
            TestBundle::new("podder", "1.0.0").plain().with_object(json!({
                "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "loose-pod"},
                "spec": {"containers": [{"name": "c", "image": "example.invalid/x"}]}
            })),
            "KindNotAllowed",
            "\"loose-pod\"",
        ),
        (
            "kubesys",
            TestBundle::new("kubesys", "1.0.0").plain().with_object(json!({
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "planted", "namespace": "kube-system"}, "data": {"a": "b"}
            })),
            "ObjectOutsideInstallNamespace",
            "\"planted\" in namespace \"kube-system\"",
        ),
        (
            "admin",
            TestBundle::new("admin", "1.0.0").with_object(binding(
                "admin-is-god",
                "cluster-admin",
                sa("admin", "admin"),
            )),
            // Issue 33 item 1: a grant of what cluster-admin holds, asking that consent (was
            // refused by name as ForeignRoleBinding).
            "PowerNotConsented",
            "\"admin-is-god\"",
        ),
        (
            "everyone",
            TestBundle::new("everyone", "1.0.0").with_object(binding(
                "everyone-reads",
                "view",
                json!({"kind": "Group", "name": "system:authenticated", "apiGroup": "rbac.authorization.k8s.io"}),
            )),
            "SystemSubjectBinding",
            "\"everyone-reads\"",
        ),
        (
            // A binding of POM's own ServiceAccount and a webhook: both reported at once.
            "selfhook",
            TestBundle::new("selfhook", "1.0.0")
                .plain()
                .with_object(binding(
                    "selfhook-owns-pom",
                    "view",
                    sa(MANAGER_NAMESPACE, "platform-operators-manager"),
                ))
                .with_object(json!({
                    "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
                    "metadata": {"name": "selfhook-mutates"}, "webhooks": []
                })),
            "ForeignServiceAccountBinding",
            "\"selfhook-owns-pom\"",
        ),
        (
            "escalator",
            TestBundle::new("escalator", "1.0.0").with_object(cluster_role(
                "escalator-rbac",
                json!({"rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["escalate", "bind"]}]}),
            )),
            "PowerNotConsented",
            "ClusterRole \"escalator-rbac\"",
        ),
        (
            "wildcard",
            TestBundle::new("wildcard", "1.0.0").with_object(cluster_role(
                "wildcard-all",
                json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
            )),
            "PowerNotConsented",
            "ClusterRole \"wildcard-all\"",
        ),
        (
            "aggregator",
            TestBundle::new("aggregator", "1.0.0").with_object(cluster_role(
                "aggregator-collects",
                json!({"aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.example.com/aggregate": "true"}}]}}),
            )),
            "PowerNotConsented",
            "ClusterRole \"aggregator-collects\"",
        ),
        (
            // The cluster's built-in roles must not gain what a bundle's role grants.
            "viewgrow",
            TestBundle::new("viewgrow", "1.0.0").with_object(cluster_role(
                "viewgrow-secrets",
                json!({
                    "metadata": {"name": "viewgrow-secrets", "labels": {"rbac.authorization.k8s.io/aggregate-to-view": "true"}},
                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get", "list"]}]
                }),
            )),
            "AggregationLabel",
            "\"viewgrow-secrets\"",
        ),
        (
            // A role the bundle ships, bound to a person: another principal's permissions.
            "userbind",
            TestBundle::new("userbind", "1.0.0")
                .with_object(cluster_role(
                    "userbind-reader",
                    json!({"rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]}),
                ))
                .with_object(binding(
                    "userbind-alice",
                    "userbind-reader",
                    json!({"kind": "User", "name": "alice", "apiGroup": "rbac.authorization.k8s.io"}),
                )),
            "UserOrGroupBinding",
            "\"userbind-alice\"",
        ),
        (
            // The API server would send every custom resource of the group to this URL.
            "convurl",
            TestBundle::new("convurl", "1.0.0").plain().with_object(json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "gadgets.convurl.example.com"},
                "spec": {
                    "group": "convurl.example.com",
                    "names": {"kind": "Gadget", "listKind": "GadgetList", "plural": "gadgets", "singular": "gadget"},
                    "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
                    "conversion": {"strategy": "Webhook", "webhook": {
                        "conversionReviewVersions": ["v1"],
                        "clientConfig": {"url": "https://collector.example.invalid/convert"}
                    }}
                }
            })),
            "ForeignWebhookEndpoint",
            "\"gadgets.convurl.example.com\"",
        ),
        (
            // CVE-2020-8554: traffic for any IP, intercepted.
            "extip",
            TestBundle::new("extip", "1.0.0").plain().with_object(json!({
                "apiVersion": "v1", "kind": "Service", "metadata": {"name": "extip-intercept"},
                "spec": {"ports": [{"port": 443}], "externalIPs": ["10.0.0.1"]}
            })),
            "ServiceExternalIps",
            "\"extip-intercept\"",
        ),
        (
            // A privileged, host-namespace DaemonSet mounting the node's root.
            "rooter",
            TestBundle::new("rooter", "1.0.0").plain().with_object(json!({
                "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "rooter-node"},
                "spec": {
                    "selector": {"matchLabels": {"app": "rooter-node"}},
                    "template": {"metadata": {"labels": {"app": "rooter-node"}}, "spec": {
                        "hostPID": true,
                        "volumes": [{"name": "root", "hostPath": {"path": "/"}}],
                        "containers": [{"name": "c", "image": "example.invalid/x",
                            "securityContext": {"privileged": true},
                            "volumeMounts": [{"name": "root", "mountPath": "/host"}]}]
                    }}
                }
            })),
            "PowerNotConsented",
            "DaemonSet \"rooter-node\"",
        ),
    ]
}

#[tokio::test]
async fn every_refusal_class_is_refused_and_leaves_the_cluster_unchanged() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let cases = hostile_bundles();
    let bundles: Vec<TestBundle> = cases.iter().map(|(_, b, _, _)| b.clone()).collect();
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "hostile", &fbc, 0).await;
    let crbs_before = names(&Api::<ClusterRoleBinding>::all(client.clone())).await;
    let roles_before = names(&Api::<ClusterRole>::all(client.clone())).await;
    for (package, _, _, _) in &cases {
        create_po(&client, package, json!({"package": {"name": package}})).await;
    }
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "hostile", &fbc).await;

    for (package, _, rule, object) in &cases {
        let message = wait_po_condition(
            &client,
            package,
            "Installed",
            "False",
            Some("ContentPolicyViolation"),
        )
        .await;
        assert!(
            message.contains(&format!("rule {rule}")) && message.contains(object),
            "{package}: {message}"
        );
    }

    // Nothing of any hostile bundle reached the cluster: no install namespace, no object.
    let namespaces = Api::<Namespace>::all(client.clone());
    for (package, _, _, _) in &cases {
        assert!(
            namespaces.get_opt(package).await.unwrap().is_none(),
            "{package}: its install namespace was created"
        );
    }
    assert!(namespaces.get_opt("stolen").await.unwrap().is_none());
    assert!(
        Api::<ConfigMap>::namespaced(client.clone(), "kube-system")
            .get_opt("planted")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Pod>::all(client.clone())
            .list(&ListParams::default().fields("metadata.name=loose-pod"))
            .await
            .unwrap()
            .items
            .is_empty()
    );
    assert_eq!(
        names(&Api::<ClusterRoleBinding>::all(client.clone())).await,
        crbs_before,
        "no ClusterRoleBinding may appear"
    );
    assert_eq!(
        names(&Api::<ClusterRole>::all(client.clone())).await,
        roles_before,
        "no ClusterRole may appear"
    );
    let webhooks = client
        .request::<Value>(http_get(
            "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        ))
        .await
        .unwrap();
    assert_eq!(webhooks["items"], json!([]), "no webhook may appear");
    let crds = client
        .request::<Value>(http_get(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/gadgets.convurl.example.com",
        ))
        .await;
    assert!(
        crds.is_err(),
        "the CRD with a foreign conversion webhook was applied"
    );
    manager.stop().await;
}

#[tokio::test]
async fn an_upgrade_that_adds_a_power_keeps_the_running_operator_until_the_admin_consents() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let v1 = TestBundle::new("rbacop", "1.0.0");
    let v2 = TestBundle::new("rbacop", "1.0.1")
        .replaces("1.0.0")
        .with_object(cluster_role(
            "rbacop-tenant-admin",
            json!({"rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["roles"], "verbs": ["bind", "escalate"]}]}),
        ));
    let fbc = catalog_json(&[v1.clone(), v2.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    // Installed at 1.0.0 (the admin's versionRange), then moved by hand to 1.0.1.
    create_po(
        &client,
        "rbacop",
        json!({"package": {"name": "rbacop", "versionRange": "1.0.0"}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_po_condition(
        &client,
        "rbacop",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let image_before = deployment_image(&client, &v1.package, &v1.deployment_name()).await;

    let pos = Api::<PlatformOperator>::all(client.clone());
    let patch = |spec: Value| Patch::Merge(json!({"spec": spec}));
    pos.patch(
        "rbacop",
        &PatchParams::default(),
        &patch(
            json!({"package": {"versionRange": null}, "steadyStateVersionRange": ">=1.0.0 <2.0.0"}),
        ),
    )
    .await
    .unwrap();
    // A failed move degrades the PO (Progressing says "blocked; see Degraded").
    let message = wait_po_condition(
        &client,
        "rbacop",
        "Degraded",
        "True",
        Some("ContentPolicyViolation"),
    )
    .await;
    assert!(
        message.contains("ClusterRole \"rbacop-tenant-admin\"")
            && message.contains("rule PowerNotConsented")
            && message.contains("spec.consent.clusterAdminEquivalent: true"),
        "{message}"
    );
    let po = pos.get("rbacop").await.unwrap();
    assert_eq!(
        po.status
            .as_ref()
            .unwrap()
            .installed_bundle
            .as_ref()
            .unwrap()
            .name,
        v1.name(),
        "the running operator stays as it was"
    );
    assert_eq!(
        deployment_image(&client, &v1.package, &v1.deployment_name()).await,
        image_before
    );
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt("rbacop-tenant-admin")
            .await
            .unwrap()
            .is_none()
    );

    // The admin trusts it with that class of power: 1.0.1 goes in, and the consent is reported.
    pos.patch(
        "rbacop",
        &PatchParams::default(),
        &patch(json!({"consent": {"clusterAdminEquivalent": true}})),
    )
    .await
    .unwrap();
    pom_e2e::manager::eventually(Duration::from_secs(120), "rbacop to run 1.0.1", || async {
        let po = pos.get("rbacop").await.ok()?;
        (po.status?.installed_bundle?.name == v2.name()).then_some(())
    })
    .await;
    assert!(
        Api::<ClusterRole>::all(client.clone())
            .get_opt("rbacop-tenant-admin")
            .await
            .unwrap()
            .is_some()
    );
    let uid = pos.get("rbacop").await.unwrap().meta().uid.clone().unwrap();
    let note = pom_e2e::manager::eventually(
        Duration::from_secs(60),
        "a ContentExceptionUsed event",
        || async {
            Api::<Event>::all(client.clone())
                .list(&ListParams::default())
                .await
                .ok()?
                .items
                .into_iter()
                .find(|e| {
                    e.reason.as_deref() == Some("ContentExceptionUsed")
                        && e.involved_object.uid.as_deref() == Some(uid.as_str())
                })
                .map(|e| (e.type_.unwrap_or_default(), e.message.unwrap_or_default()))
        },
    )
    .await;
    assert_eq!(note.0, "Warning");
    assert!(
        note.1
            .contains("ClusterAdminEquivalent: ClusterRole \"rbacop-tenant-admin\"")
            && note
                .1
                .contains("(consented: spec.consent.clusterAdminEquivalent)"),
        "{}",
        note.1
    );
    manager.stop().await;
}

#[tokio::test]
async fn a_system_install_namespace_is_refused() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    // At admission, when the admin names it.
    let po: PlatformOperator = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "metadata": {"name": "sneaky"},
        "spec": {"package": {"name": "sneaky"}, "installNamespace": "kube-system"}
    }))
    .unwrap();
    let err = Api::<PlatformOperator>::all(client.clone())
        .create(&Default::default(), &po)
        .await
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("may not be one of the platform's own namespaces"),
        "{err}"
    );
    // By the renderer, when the PlatformOperator's own name makes it one.
    let bundle = TestBundle::new("kube-tools", "1.0.0");
    configmap_catalog(&client, "local", &catalog_json(&[bundle], &[]), 0).await;
    create_po(
        &client,
        "kube-tools",
        json!({"package": {"name": "kube-tools"}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    let message = wait_po_condition(
        &client,
        "kube-tools",
        "Installed",
        "False",
        Some("ContentPolicyViolation"),
    )
    .await;
    assert!(
        message.contains("install namespace \"kube-tools\" is refused")
            && message.contains("spec.installNamespace"),
        "{message}"
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt("kube-tools")
            .await
            .unwrap()
            .is_none()
    );
    manager.stop().await;
}

async fn names<K>(api: &Api<K>) -> Vec<String>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let mut names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter_map(|o| o.meta().name.clone())
        .collect();
    names.sort();
    names
}

fn http_get(path: &str) -> http::Request<Vec<u8>> {
    http::Request::get(path).body(Vec::new()).unwrap()
}

/// The `covers` digest of webhook `name` in a refusal's paste-ready text.
fn covers_in(message: &str, name: &str) -> String {
    let from = message
        .find(&format!("{{name: {name}, covers: \"sha256:"))
        .unwrap_or_else(|| panic!("no consent for {name} in {message}"));
    let start = from + message[from..].find("sha256:").unwrap();
    message[start..start + "sha256:".len() + 64].to_owned()
}

/// Issue 33 item 4: a webhook over kinds that are not the bundle's own is a power whose consent
/// is bound to what it covers. 1.0.0's webhook also matches ConfigMaps (CREATE): installed once
/// the admin consents to it. 1.0.1 widens it (CREATE, UPDATE): that hop is held, the running
/// operator and its webhook configuration as they were on the API server, until the admin
/// consents to the webhook as it now is.
#[tokio::test]
async fn a_hop_whose_webhook_widens_is_held_until_the_admin_consents_again() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let widen = |mut bundle: TestBundle, operations: Value| {
        let group = bundle.crd_group();
        bundle.webhooks[0]["rules"] = json!([
            {"apiGroups": [group], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]},
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": operations, "resources": ["configmaps"]},
        ]);
        bundle
    };
    let v1 = widen(
        TestBundle::new("hookop", "1.0.0").with_webhooks("/v1"),
        json!(["CREATE"]),
    );
    let v2 = widen(
        TestBundle::new("hookop", "1.0.1")
            .replaces("1.0.0")
            .with_webhooks("/v2"),
        json!(["CREATE", "UPDATE"]),
    );
    let hook_name = format!("v{}", v1.crd_name());
    let fbc = catalog_json(&[v1.clone(), v2.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(
        &client,
        "hookop",
        json!({"package": {"name": "hookop", "versionRange": "1.0.0"}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    let pos = Api::<PlatformOperator>::all(client.clone());
    let patch = |spec: Value| Patch::Merge(json!({"spec": spec}));
    let hooks =
        Api::<k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration>::all(
            client.clone(),
        );
    let configmap_operations = |hooks: Api<_>, name: String| async move {
        let hook: k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration =
            hooks.get_opt(&name).await.unwrap()?;
        let rules = hook.webhooks?.into_iter().next()?.rules?;
        rules
            .into_iter()
            .find(|r| r.resources.as_deref() == Some(&["configmaps".to_owned()][..]))?
            .operations
    };

    // Nothing consented: refused, naming the webhook and what it covers; nothing applied.
    let first = wait_po_condition(
        &client,
        "hookop",
        "Degraded",
        "True",
        Some("ContentPolicyViolation"),
    )
    .await;
    assert!(first.contains("rule PowerNotConsented"), "{first}");
    assert!(hooks.get_opt(&hook_name).await.unwrap().is_none());
    let covers_v1 = covers_in(&first, &hook_name);
    pos.patch(
        "hookop",
        &PatchParams::default(),
        &patch(json!({"consent": {"webhooks": [{"name": hook_name, "covers": covers_v1}]}})),
    )
    .await
    .unwrap();
    wait_po_condition(
        &client,
        "hookop",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let applied =
        pom_e2e::manager::eventually(Duration::from_secs(120), "the webhook applied", || {
            configmap_operations(hooks.clone(), hook_name.clone())
        })
        .await;
    assert_eq!(applied, vec!["CREATE".to_owned()]);

    // The hop to 1.0.1 widens the webhook: held, the running operator as it was.
    pos.patch(
        "hookop",
        &PatchParams::default(),
        &patch(
            json!({"package": {"versionRange": null}, "steadyStateVersionRange": ">=1.0.0 <2.0.0"}),
        ),
    )
    .await
    .unwrap();
    let held = pom_e2e::manager::eventually(
        Duration::from_secs(120),
        "the widened webhook refused",
        || async {
            let po = pos.get("hookop").await.ok()?;
            let degraded = po
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Degraded" && c.status == "True")?;
            degraded
                .message
                .contains(&v2.name())
                .then_some(degraded.message)
        },
    )
    .await;
    let covers_v2 = covers_in(&held, &hook_name);
    assert_ne!(covers_v1, covers_v2, "{held}");
    let po = pos.get("hookop").await.unwrap();
    assert_eq!(
        po.status.unwrap().installed_bundle.unwrap().name,
        v1.name(),
        "the running operator stays as it was"
    );
    assert_eq!(
        configmap_operations(hooks.clone(), hook_name.clone()).await,
        Some(vec!["CREATE".to_owned()]),
        "the API server still holds 1.0.0's webhook"
    );

    // Consent to the webhook as it now is: 1.0.1 goes in, its webhook with it.
    pos.patch(
        "hookop",
        &PatchParams::default(),
        &patch(json!({"consent": {"webhooks": [{"name": hook_name, "covers": covers_v2}]}})),
    )
    .await
    .unwrap();
    pom_e2e::manager::eventually(
        Duration::from_secs(120),
        "hookop to run 1.0.1 with its webhook",
        || async {
            let po = pos.get("hookop").await.ok()?;
            let operations = configmap_operations(hooks.clone(), hook_name.clone()).await?;
            (po.status?.installed_bundle?.name == v2.name()
                && operations == ["CREATE".to_owned(), "UPDATE".to_owned()])
            .then_some(())
        },
    )
    .await;
    manager.stop().await;
}

/// Issue 33 item 3, the live half: a bundle whose CRD claims a group/version the API server
/// routes to an aggregated APIService (as a metrics adapter's) is refused before anything is
/// applied, the reason naming the CRD, the APIService and its Service; the API server holds
/// neither the CRD nor the operator. Once the admin removes the APIService the same bundle
/// installs (the refusal was the APIService's, read fresh, not a stale reading).
#[tokio::test]
async fn a_crd_claiming_an_aggregated_apis_group_version_is_refused_until_it_is_gone() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
    use kube::api::{DeleteParams, PostParams};

    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let api_services: Api<APIService> = Api::all(client.clone());
    api_services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({
                "metadata": {"name": "v1.gadgets.example.com"},
                "spec": {
                    "group": "gadgets.example.com", "version": "v1",
                    "groupPriorityMinimum": 1000, "versionPriority": 15,
                    "insecureSkipTLSVerify": true,
                    "service": {"namespace": "default", "name": "gadgets-adapter", "port": 443}
                }
            }))
            .unwrap(),
        )
        .await
        .unwrap();
    let mut bundle = TestBundle::new("gadgets", "1.0.0");
    bundle.crd_group = Some("gadgets.example.com".into());
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(&client, "gadgets", json!({"package": {"name": "gadgets"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    let message = wait_po_condition(
        &client,
        "gadgets",
        "Installed",
        "False",
        Some("ContentPolicyViolation"),
    )
    .await;
    for needed in [
        "widgets.gadgets.example.com",
        "v1.gadgets.example.com",
        "default/gadgets-adapter",
    ] {
        assert!(message.contains(needed), "{needed}: {message}");
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    assert!(
        crds.get_opt("widgets.gadgets.example.com")
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "gadgets")
            .get_opt(&bundle.deployment_name())
            .await
            .unwrap()
            .is_none()
    );

    api_services
        .delete("v1.gadgets.example.com", &DeleteParams::default())
        .await
        .unwrap();
    wait_po_condition(
        &client,
        "gadgets",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    assert!(
        crds.get_opt("widgets.gadgets.example.com")
            .await
            .unwrap()
            .is_some()
    );
    manager.stop().await;
}
