//! ServiceAccount subjects of a registry+v1 bundle's own bindings, as the author meant them.
//!
//! Operator projects are kustomize trees: `config/rbac/*_binding.yaml` name their subject's
//! namespace `system`, and the project's kustomization rewrites it (and prefixes names) when it
//! builds the bundle. Bundles published from a tree whose transform missed some of them, or
//! that hard-code the project's own default namespace, bind a ServiceAccount of the bundle in
//! a namespace it is not installed in: on OLM a binding that grants nothing (the operator then
//! fails at runtime); under POM's threat model a foreign subject, refused. The author meant the
//! install namespace, so POM binds that instead, in two narrow cases:
//!
//! - the subject names a ServiceAccount the bundle itself creates (the CSV's deployments and
//!   permissions, or a ServiceAccount manifest; never `default`, which every namespace has):
//!   there is only one of it, in the install namespace;
//! - the subject's namespace is [`KUBEBUILDER_PLACEHOLDER_NAMESPACE`], which no cluster has.
//!
//! Neither grants anything the bundle could not grant by naming the install namespace itself
//! (subjects of the install namespace are the bundle's own to bind, PRODUCT §6); every other
//! foreign subject stays refused (`ForeignServiceAccountBinding`).
//!
//! [`who`] then says who a binding's subject is (issue 33: subjects by who they are): the
//! bundle's own (the install namespace's ServiceAccounts, in any of the three ways RBAC names
//! them), POM's manager, one of the [`PLATFORM_READERS`], or anyone else.

use std::collections::BTreeSet;

use serde_json::Value;

use super::content_policy::ContentRule;
use super::objects::{ObjectKey, str_at};

/// Platform identities a bundle may grant read-only access to non-secret objects of its install
/// namespace without consent: OpenShift's Prometheus instances (platform and user-workload
/// monitoring), which scrape an operator's metrics through a ServiceMonitor and need to list
/// its Services, Endpoints and Pods (and read a ConfigMap or two). Anything more to them is a
/// power of the bundle, and asks consent.
pub const PLATFORM_READERS: &[(&str, &str)] = &[
    ("openshift-monitoring", "prometheus-k8s"),
    (
        "openshift-user-workload-monitoring",
        "prometheus-user-workload",
    ),
];

/// Who a binding's subject is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Who {
    /// The bundle's own: a ServiceAccount of the install namespace, that namespace's
    /// `system:serviceaccounts:<ns>` group, or the user `system:serviceaccount:<ns>:<name>`.
    Own,
    /// POM's own manager: a bundle may never grant it anything.
    Manager(String),
    /// One of [`PLATFORM_READERS`], described.
    PlatformReader(String),
    /// Anyone else, with the rule that refuses it and a description.
    Other(ContentRule, String),
    /// Not a subject RBAC knows (ignored, as the API server does).
    Unknown,
}

/// Who `subject` of a binding in `binding_namespace` is, for a bundle installed in
/// `install_namespace`, with the manager's namespace and ServiceAccount when known.
pub(crate) fn who(
    subject: &Value,
    binding_namespace: &str,
    install_namespace: &str,
    manager: (Option<&str>, Option<&str>),
) -> Who {
    let kind = str_at(subject, &["kind"]).unwrap_or_default();
    let name = str_at(subject, &["name"]).unwrap_or_default();
    // (namespace, Some(account)) for one ServiceAccount, (namespace, None) for all of them.
    let account: Option<(&str, Option<&str>)> = match kind {
        // A subject without a namespace means the binding's own (none for a
        // ClusterRoleBinding, which the API server then refuses).
        "ServiceAccount" => Some((
            str_at(subject, &["namespace"])
                .filter(|n| !n.is_empty())
                .unwrap_or(binding_namespace),
            Some(name),
        )),
        "User" => name
            .strip_prefix("system:serviceaccount:")
            .and_then(|rest| rest.split_once(':'))
            .map(|(ns, sa)| (ns, Some(sa))),
        "Group" => name
            .strip_prefix("system:serviceaccounts:")
            .map(|ns| (ns, None)),
        _ => return Who::Unknown,
    };
    let (manager_namespace, manager_account) = manager;
    match account {
        Some((namespace, _)) if namespace == install_namespace => Who::Own,
        Some((namespace, account))
            if Some(namespace) == manager_namespace
                && (account.is_none() || manager_account.is_none_or(|sa| Some(sa) == account)) =>
        {
            Who::Manager(describe(kind, name, namespace, account))
        }
        Some((namespace, Some(account))) if PLATFORM_READERS.contains(&(namespace, account)) => {
            Who::PlatformReader(format!("ServiceAccount {namespace}/{account}"))
        }
        Some((namespace, account)) => Who::Other(
            ContentRule::ForeignServiceAccountBinding,
            describe(kind, name, namespace, account),
        ),
        None if name.starts_with("system:") => Who::Other(
            ContentRule::SystemSubjectBinding,
            format!(
                "the {} {name:?} (system: users and groups are the platform's own: all authenticated users, nodes, the accounts of every namespace)",
                kind.to_lowercase()
            ),
        ),
        None => Who::Other(
            ContentRule::UserOrGroupBinding,
            format!(
                "the {} {name:?} (granting people is the admin's job, with RBAC of their own)",
                kind.to_lowercase()
            ),
        ),
    }
}

fn describe(kind: &str, name: &str, namespace: &str, account: Option<&str>) -> String {
    match (kind, account) {
        ("ServiceAccount", Some(account)) => {
            format!("ServiceAccount {account:?} of namespace {namespace:?}")
        }
        (_, Some(account)) => {
            format!("the user {name:?} (ServiceAccount {account:?} of namespace {namespace:?})")
        }
        (_, None) => {
            format!("the group {name:?} (every ServiceAccount of namespace {namespace:?})")
        }
    }
}

/// The namespace kubebuilder's RBAC scaffolding names before kustomize rewrites it.
pub const KUBEBUILDER_PLACEHOLDER_NAMESPACE: &str = "system";

/// Rewrites, in place, the namespace of each ServiceAccount subject of `object` (a RoleBinding
/// or ClusterRoleBinding the bundle ships) that the module's rules adopt into
/// `install_namespace`. Returns whether anything changed.
pub(crate) fn adopt_own_service_accounts(
    object: &mut Value,
    own_accounts: &BTreeSet<String>,
    install_namespace: &str,
) -> bool {
    let key = ObjectKey::of(object);
    if key.group != "rbac.authorization.k8s.io"
        || !matches!(key.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
    {
        return false;
    }
    let Some(subjects) = object.get_mut("subjects").and_then(Value::as_array_mut) else {
        return false;
    };
    let mut changed = false;
    for subject in subjects {
        if str_at(subject, &["kind"]) != Some("ServiceAccount") {
            continue;
        }
        let Some(namespace) = str_at(subject, &["namespace"]).filter(|n| !n.is_empty()) else {
            continue;
        };
        let name = str_at(subject, &["name"]).unwrap_or_default();
        let adopt = namespace != install_namespace
            && (own_accounts.contains(name) || namespace == KUBEBUILDER_PLACEHOLDER_NAMESPACE);
        if adopt && let Some(fields) = subject.as_object_mut() {
            fields.insert(
                "namespace".to_owned(),
                Value::String(install_namespace.to_owned()),
            );
            changed = true;
        }
    }
    changed
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn binding(kind: &str, subjects: Value) -> Value {
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
            "subjects": subjects,
        })
    }

    /// (subject, adopted namespace or the one kept).
    #[test]
    fn only_own_accounts_and_the_placeholder_namespace_are_adopted() {
        let own: BTreeSet<String> = ["agent".to_owned()].into();
        let cases = [
            // The bundle's own ServiceAccount, wherever the author's kustomize left it.
            (
                json!({"kind": "ServiceAccount", "name": "agent", "namespace": "sbr-operator-system"}),
                "ns",
            ),
            (
                json!({"kind": "ServiceAccount", "name": "agent", "namespace": "default"}),
                "ns",
            ),
            // kubebuilder's placeholder: no cluster has it.
            (
                json!({"kind": "ServiceAccount", "name": "pipeline", "namespace": "system"}),
                "ns",
            ),
            // Somebody else's: kept, and refused by the content policy.
            (
                json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}),
                "openshift-monitoring",
            ),
            (
                json!({"kind": "ServiceAccount", "name": "controller-manager", "namespace": "default"}),
                "default",
            ),
            (
                json!({"kind": "ServiceAccount", "name": "x", "namespace": "kube-system"}),
                "kube-system",
            ),
            // Already the install namespace.
            (
                json!({"kind": "ServiceAccount", "name": "other", "namespace": "ns"}),
                "ns",
            ),
        ];
        for (subject, expected) in cases {
            for kind in ["RoleBinding", "ClusterRoleBinding"] {
                let mut object = binding(kind, json!([subject.clone()]));
                adopt_own_service_accounts(&mut object, &own, "ns");
                assert_eq!(
                    object["subjects"][0]["namespace"], expected,
                    "{kind} {subject}"
                );
            }
        }
    }

    #[test]
    fn subjects_are_judged_by_who_they_are() {
        let manager = (Some("pom"), Some("pom-manager"));
        let judge = |subject: Value| who(&subject, "ns", "ns", manager);
        for own in [
            json!({"kind": "ServiceAccount", "name": "op", "namespace": "ns"}),
            json!({"kind": "ServiceAccount", "name": "op"}),
            json!({"kind": "Group", "name": "system:serviceaccounts:ns"}),
            json!({"kind": "User", "name": "system:serviceaccount:ns:op"}),
        ] {
            assert_eq!(judge(own.clone()), Who::Own, "{own}");
        }
        for manager in [
            json!({"kind": "ServiceAccount", "name": "pom-manager", "namespace": "pom"}),
            json!({"kind": "Group", "name": "system:serviceaccounts:pom"}),
            json!({"kind": "User", "name": "system:serviceaccount:pom:pom-manager"}),
        ] {
            assert!(
                matches!(judge(manager.clone()), Who::Manager(_)),
                "{manager}"
            );
        }
        for reader in [
            json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"}),
            json!({"kind": "ServiceAccount", "name": "prometheus-user-workload", "namespace": "openshift-user-workload-monitoring"}),
            json!({"kind": "User", "name": "system:serviceaccount:openshift-monitoring:prometheus-k8s"}),
        ] {
            assert!(
                matches!(judge(reader.clone()), Who::PlatformReader(_)),
                "{reader}"
            );
        }
        for (other, rule) in [
            (
                json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "monitoring"}),
                ContentRule::ForeignServiceAccountBinding,
            ),
            (
                json!({"kind": "ServiceAccount", "name": "alertmanager-main", "namespace": "openshift-monitoring"}),
                ContentRule::ForeignServiceAccountBinding,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts:operand"}),
                ContentRule::ForeignServiceAccountBinding,
            ),
            (
                json!({"kind": "Group", "name": "system:serviceaccounts"}),
                ContentRule::SystemSubjectBinding,
            ),
            (
                json!({"kind": "Group", "name": "system:authenticated"}),
                ContentRule::SystemSubjectBinding,
            ),
            (
                json!({"kind": "Group", "name": "system:wicd-nodes"}),
                ContentRule::SystemSubjectBinding,
            ),
            (
                json!({"kind": "User", "name": "alice"}),
                ContentRule::UserOrGroupBinding,
            ),
            (
                json!({"kind": "Group", "name": "admins"}),
                ContentRule::UserOrGroupBinding,
            ),
        ] {
            assert!(
                matches!(judge(other.clone()), Who::Other(r, _) if r == rule),
                "{other}"
            );
        }
        assert_eq!(judge(json!({"kind": "Robot", "name": "x"})), Who::Unknown);
    }

    #[test]
    fn users_groups_and_other_kinds_are_left_alone() {
        let own: BTreeSet<String> = ["agent".to_owned()].into();
        let mut object = binding(
            "ClusterRoleBinding",
            json!([{"kind": "User", "name": "agent", "namespace": "system"}, {"kind": "Group", "name": "system:masters"}]),
        );
        let before = object.clone();
        assert!(!adopt_own_service_accounts(&mut object, &own, "ns"));
        assert_eq!(object, before);
        let mut role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole", "metadata": {"name": "r"}, "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "system"}]});
        let before = role.clone();
        assert!(!adopt_own_service_accounts(&mut role, &own, "ns"));
        assert_eq!(role, before);
    }
}
