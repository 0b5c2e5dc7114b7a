//! The platform's own namespaces (PRODUCT §3, §6): never an install or watch namespace, never
//! written by the manager. Other `openshift-*` namespaces are allowed as install namespaces
//! when POM creates and owns them for the PlatformOperator (many of Red Hat's optional
//! operators suggest one: `openshift-logging`, `openshift-nmstate`, `openshift-adp`).
//!
//! The CRD's CEL rule ([`platform_namespace_cel`]) and the manager's admission guard are
//! generated from these lists; the renderer keeps the same lists
//! (`pom_resolver::render::content_policy`), and a test in `pom-policy` holds them equal.

/// Names the platform owns.
pub const PLATFORM_NAMESPACES: &[&str] = &[
    "default",
    "openshift",
    // OLM v0's global operator namespace: OLM owns it, and every operator there sees the others.
    "openshift-operators",
];

/// Prefixes the platform owns: Kubernetes' own, and OpenShift's control plane and core
/// operators (the namespaces the release payload creates).
pub const PLATFORM_NAMESPACE_PREFIXES: &[&str] = &[
    "kube-",
    "openshift-apiserver",
    "openshift-authentication",
    "openshift-cloud-",
    "openshift-cluster-csi-drivers",
    "openshift-cluster-machine-approver",
    "openshift-cluster-node-tuning-operator",
    "openshift-cluster-samples-operator",
    "openshift-cluster-storage-operator",
    "openshift-cluster-version",
    "openshift-config",
    "openshift-console",
    "openshift-controller-manager",
    "openshift-dns",
    "openshift-etcd",
    "openshift-host-network",
    "openshift-image-registry",
    "openshift-infra",
    "openshift-ingress",
    "openshift-insights",
    "openshift-kni-infra",
    "openshift-kube-",
    "openshift-machine-",
    "openshift-marketplace",
    "openshift-monitoring",
    "openshift-multus",
    "openshift-network-",
    "openshift-node",
    "openshift-oauth-apiserver",
    "openshift-operator-lifecycle-manager",
    "openshift-ovn-kubernetes",
    "openshift-platform-operators",
    "openshift-route-controller-manager",
    "openshift-sdn",
    "openshift-service-ca",
    "openshift-user-workload-monitoring",
];

/// The prefix of namespaces POM may use only when it created and owns them for the PO.
pub const OWNED_ONLY_PREFIX: &str = "openshift-";

/// Whether `namespace` is the platform's own.
#[must_use]
pub fn is_platform_namespace(namespace: &str) -> bool {
    PLATFORM_NAMESPACES.contains(&namespace)
        || PLATFORM_NAMESPACE_PREFIXES
            .iter()
            .any(|prefix| namespace.starts_with(prefix))
}

/// A CEL expression true when the string expression `ns` names a platform namespace.
#[must_use]
pub fn platform_namespace_cel(ns: &str) -> String {
    let names = PLATFORM_NAMESPACES
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let prefixes = PLATFORM_NAMESPACE_PREFIXES
        .iter()
        .map(|p| format!("{ns}.startsWith('{p}')"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!("({ns} in [{names}] || {prefixes})")
}

/// The CRD rule on `spec.installNamespace` and `spec.watchNamespace`.
#[must_use]
pub fn not_platform_namespace_rule(field: &str) -> kube::core::Rule {
    kube::core::Rule::new(format!("!{}", platform_namespace_cel("self"))).message(kube::core::Message::Message(format!(
        "spec.{field} may not be one of the platform's own namespaces (kube-*, default, openshift, openshift-operators, openshift-config*, openshift-kube-*, openshift-monitoring, ... see docs/content-policy.md): choose a namespace of the operator's own"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_platform_namespaces_are_refused_and_operator_namespaces_are_not() {
        for ns in [
            "kube-system",
            "default",
            "openshift-config",
            "openshift-config-managed",
            "openshift-kube-apiserver",
            "openshift-monitoring",
            "openshift-platform-operators",
            "openshift-operators",
            "openshift-etcd",
        ] {
            assert!(is_platform_namespace(ns), "{ns}");
        }
        for ns in [
            "openshift-logging",
            "openshift-nmstate",
            "openshift-adp",
            "openshift-cert-manager-operator",
            "openshift-cluster-observability-operator",
            "my-operator",
        ] {
            assert!(!is_platform_namespace(ns), "{ns}");
        }
    }

    #[test]
    fn the_cel_names_every_entry() {
        let cel = platform_namespace_cel("self");
        for entry in PLATFORM_NAMESPACES
            .iter()
            .chain(PLATFORM_NAMESPACE_PREFIXES)
        {
            assert!(cel.contains(&format!("'{entry}'")), "{entry}");
        }
    }
}
