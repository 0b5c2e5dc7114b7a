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

use std::collections::BTreeSet;

use serde_json::Value;

use super::objects::{ObjectKey, str_at};

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
