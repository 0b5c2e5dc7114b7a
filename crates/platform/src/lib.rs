//! The platform's own namespaces (PRODUCT §3, §6): never an install or watch namespace, never
//! written by the manager. Other `openshift-*` namespaces are allowed as install namespaces
//! when POM creates and owns them for the PlatformOperator (many of Red Hat's optional
//! operators suggest one: `openshift-logging`, `openshift-nmstate`, `openshift-adp`).
//!
//! One list, read by the pure renderer (`pom-render`, which depends on no kube types) and by
//! `pom-api`, which generates the CRD's CEL rule and the manager's admission guard from it.

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
}
