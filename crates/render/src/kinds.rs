//! Static knowledge about Kubernetes kinds that rendering needs without asking a cluster:
//! which kinds are cluster-scoped, which API versions no supported cluster serves any more,
//! which kinds a registry+v1 bundle may carry, and in which order objects are applied.
//!
//! Rendering is offline, so there is no discovery. A kind missing from the cluster-scoped list
//! is treated as namespaced (the common case for operator-shipped kinds); a CRD shipped in the
//! same bundle overrides the list with its declared scope.

/// The API group of an `apiVersion` (`apps/v1` → `apps`, `v1` → the core group `""`).
pub fn group_of(api_version: &str) -> &str {
    match api_version.split_once('/') {
        Some((group, _)) => group,
        None => "",
    }
}

/// Cluster-scoped kinds by (group, kind): core Kubernetes (as of 1.33) and the OpenShift kinds
/// an operator bundle could plausibly ship. Anything else is namespaced unless a CRD in the
/// bundle says otherwise.
const CLUSTER_SCOPED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    ("", "PersistentVolume"),
    ("", "ComponentStatus"),
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apiregistration.k8s.io", "APIService"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("storage.k8s.io", "StorageClass"),
    ("storage.k8s.io", "CSIDriver"),
    ("storage.k8s.io", "CSINode"),
    ("storage.k8s.io", "VolumeAttachment"),
    ("storage.k8s.io", "VolumeAttributesClass"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("node.k8s.io", "RuntimeClass"),
    ("networking.k8s.io", "IngressClass"),
    ("networking.k8s.io", "IPAddress"),
    ("networking.k8s.io", "ServiceCIDR"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("resource.k8s.io", "DeviceClass"),
    ("security.openshift.io", "SecurityContextConstraints"),
    ("console.openshift.io", "ConsoleYAMLSample"),
    ("console.openshift.io", "ConsoleCLIDownload"),
    ("console.openshift.io", "ConsoleLink"),
    ("console.openshift.io", "ConsoleNotification"),
    ("console.openshift.io", "ConsolePlugin"),
    ("console.openshift.io", "ConsoleQuickStart"),
    ("console.openshift.io", "ConsoleExternalLogLink"),
    ("config.openshift.io", "ClusterOperator"),
    ("config.openshift.io", "ClusterVersion"),
    ("quota.openshift.io", "ClusterResourceQuota"),
    ("project.openshift.io", "Project"),
    ("operator.openshift.io", "Console"),
    ("platform.openshift.io", "PlatformOperator"),
    ("olm.operatorframework.io", "ClusterExtension"),
    ("olm.operatorframework.io", "ClusterCatalog"),
];

/// Whether (group, kind) is cluster-scoped according to the static list.
pub fn is_cluster_scoped(group: &str, kind: &str) -> bool {
    CLUSTER_SCOPED
        .iter()
        .any(|(g, k)| *g == group && *k == kind)
}

/// An API version that no cluster POM supports (Kubernetes ≥ 1.33) still serves.
#[derive(Debug, Clone, Copy)]
pub struct RemovedApi {
    pub api_version: &'static str,
    /// `None` when the whole group-version is gone; `Some(kind)` when only that kind moved.
    pub kind: Option<&'static str>,
    pub removed_in: &'static str,
    pub use_instead: &'static str,
}

/// API versions removed up to Kubernetes 1.32 (the Kubernetes deprecation guide). A bundle
/// using them cannot be applied, so rendering refuses it up front with the replacement to use.
const REMOVED_APIS: &[RemovedApi] = &[
    removed(
        "apiextensions.k8s.io/v1beta1",
        None,
        "1.22",
        "apiextensions.k8s.io/v1",
    ),
    removed(
        "admissionregistration.k8s.io/v1beta1",
        None,
        "1.22",
        "admissionregistration.k8s.io/v1",
    ),
    removed(
        "apiregistration.k8s.io/v1beta1",
        None,
        "1.22",
        "apiregistration.k8s.io/v1",
    ),
    removed(
        "authentication.k8s.io/v1beta1",
        None,
        "1.22",
        "authentication.k8s.io/v1",
    ),
    removed(
        "authorization.k8s.io/v1beta1",
        None,
        "1.22",
        "authorization.k8s.io/v1",
    ),
    removed(
        "certificates.k8s.io/v1beta1",
        None,
        "1.22",
        "certificates.k8s.io/v1",
    ),
    removed(
        "coordination.k8s.io/v1beta1",
        None,
        "1.22",
        "coordination.k8s.io/v1",
    ),
    removed(
        "extensions/v1beta1",
        None,
        "1.22",
        "apps/v1 or networking.k8s.io/v1",
    ),
    removed(
        "networking.k8s.io/v1beta1",
        Some("Ingress"),
        "1.22",
        "networking.k8s.io/v1",
    ),
    removed(
        "networking.k8s.io/v1beta1",
        Some("IngressClass"),
        "1.22",
        "networking.k8s.io/v1",
    ),
    removed(
        "rbac.authorization.k8s.io/v1beta1",
        None,
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    removed(
        "rbac.authorization.k8s.io/v1alpha1",
        None,
        "1.22",
        "rbac.authorization.k8s.io/v1",
    ),
    removed(
        "scheduling.k8s.io/v1beta1",
        None,
        "1.22",
        "scheduling.k8s.io/v1",
    ),
    removed(
        "scheduling.k8s.io/v1alpha1",
        None,
        "1.22",
        "scheduling.k8s.io/v1",
    ),
    removed(
        "storage.k8s.io/v1beta1",
        Some("CSIDriver"),
        "1.22",
        "storage.k8s.io/v1",
    ),
    removed(
        "storage.k8s.io/v1beta1",
        Some("CSINode"),
        "1.22",
        "storage.k8s.io/v1",
    ),
    removed(
        "storage.k8s.io/v1beta1",
        Some("StorageClass"),
        "1.22",
        "storage.k8s.io/v1",
    ),
    removed(
        "storage.k8s.io/v1beta1",
        Some("VolumeAttachment"),
        "1.22",
        "storage.k8s.io/v1",
    ),
    removed(
        "storage.k8s.io/v1beta1",
        Some("CSIStorageCapacity"),
        "1.27",
        "storage.k8s.io/v1",
    ),
    removed("apps/v1beta1", None, "1.16", "apps/v1"),
    removed("apps/v1beta2", None, "1.16", "apps/v1"),
    removed("batch/v1beta1", None, "1.25", "batch/v1"),
    removed(
        "discovery.k8s.io/v1beta1",
        None,
        "1.25",
        "discovery.k8s.io/v1",
    ),
    removed("events.k8s.io/v1beta1", None, "1.25", "events.k8s.io/v1"),
    removed("autoscaling/v2beta1", None, "1.25", "autoscaling/v2"),
    removed("autoscaling/v2beta2", None, "1.26", "autoscaling/v2"),
    removed(
        "policy/v1beta1",
        None,
        "1.25",
        "policy/v1 (PodSecurityPolicy has no replacement)",
    ),
    removed("node.k8s.io/v1beta1", None, "1.25", "node.k8s.io/v1"),
    removed(
        "flowcontrol.apiserver.k8s.io/v1beta1",
        None,
        "1.26",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    removed(
        "flowcontrol.apiserver.k8s.io/v1beta2",
        None,
        "1.29",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
    removed(
        "flowcontrol.apiserver.k8s.io/v1beta3",
        None,
        "1.32",
        "flowcontrol.apiserver.k8s.io/v1",
    ),
];

const fn removed(
    api_version: &'static str,
    kind: Option<&'static str>,
    removed_in: &'static str,
    use_instead: &'static str,
) -> RemovedApi {
    RemovedApi {
        api_version,
        kind,
        removed_in,
        use_instead,
    }
}

/// The removal record for (apiVersion, kind), if no supported cluster serves it.
pub fn removed_api(api_version: &str, kind: &str) -> Option<RemovedApi> {
    REMOVED_APIS
        .iter()
        .find(|r| r.api_version == api_version && r.kind.is_none_or(|k| k == kind))
        .copied()
}

/// (group, kind) a rendered registry+v1 bundle may contain: its CRDs, what rendering
/// generates from the CSV (Deployments, ServiceAccounts, roles and bindings), and the other
/// kinds operator-registry lets a bundle ship, by API group (a `Secret` of another group is
/// not a Secret). Enforced by the content policy.
pub const REGISTRY_V1_KINDS: &[(&str, &str)] = &[
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apps", "Deployment"),
    ("", "ServiceAccount"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("policy", "PodDisruptionBudget"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("monitoring.coreos.com", "PrometheusRule"),
    ("monitoring.coreos.com", "ServiceMonitor"),
    ("console.openshift.io", "ConsoleYAMLSample"),
    // OLM v0's other supported kinds: console content (a tutorial, a download link, a link in
    // the console's menus), cluster-scoped and shown only, and a NetworkPolicy, which POM
    // moves into the install namespace where it confines only the bundle's own pods.
    ("console.openshift.io", "ConsoleQuickStart"),
    ("console.openshift.io", "ConsoleCLIDownload"),
    ("console.openshift.io", "ConsoleLink"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("autoscaling.k8s.io", "VerticalPodAutoscaler"),
];

/// (group, kind) a plain+v0 bundle may contain (plus custom resources of its own CRDs): the
/// registry+v1 kinds and the workload and networking kinds an operator's own manifests use.
pub const PLAIN_V0_KINDS: &[(&str, &str)] = &[
    ("apiextensions.k8s.io", "CustomResourceDefinition"),
    ("apps", "Deployment"),
    ("apps", "StatefulSet"),
    ("apps", "DaemonSet"),
    ("batch", "Job"),
    ("batch", "CronJob"),
    ("", "ServiceAccount"),
    ("rbac.authorization.k8s.io", "ClusterRole"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "Role"),
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("", "ConfigMap"),
    ("", "Secret"),
    ("", "Service"),
    ("", "PersistentVolumeClaim"),
    ("networking.k8s.io", "NetworkPolicy"),
    ("policy", "PodDisruptionBudget"),
    ("scheduling.k8s.io", "PriorityClass"),
    ("monitoring.coreos.com", "PrometheusRule"),
    ("monitoring.coreos.com", "ServiceMonitor"),
    ("console.openshift.io", "ConsoleYAMLSample"),
    ("console.openshift.io", "ConsoleQuickStart"),
    ("console.openshift.io", "ConsoleCLIDownload"),
    ("console.openshift.io", "ConsoleLink"),
    ("autoscaling.k8s.io", "VerticalPodAutoscaler"),
];

/// Position of a kind in the apply order: namespaces, CRDs, identities, roles, bindings,
/// everything else, and Deployments last, so a Deployment starts with its CRDs, ServiceAccount
/// and permissions already in place.
pub fn apply_rank(group: &str, kind: &str) -> u8 {
    match (group, kind) {
        ("", "Namespace") => 0,
        ("apiextensions.k8s.io", "CustomResourceDefinition") => 1,
        ("", "ServiceAccount") => 2,
        ("rbac.authorization.k8s.io", "ClusterRole" | "Role") => 3,
        ("rbac.authorization.k8s.io", "ClusterRoleBinding" | "RoleBinding") => 4,
        ("apps", "Deployment") => 6,
        // After the Deployment that serves them (the controller also waits for its rollout).
        (
            "admissionregistration.k8s.io",
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration",
        ) => 7,
        _ => 5,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups() {
        assert_eq!(group_of("v1"), "");
        assert_eq!(group_of("apps/v1"), "apps");
    }

    #[test]
    fn removed_apis_match_by_kind_when_needed() {
        assert!(removed_api("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition").is_some());
        assert!(removed_api("storage.k8s.io/v1beta1", "StorageClass").is_some());
        // VolumeAttributesClass is still served as storage.k8s.io/v1beta1.
        assert!(removed_api("storage.k8s.io/v1beta1", "VolumeAttributesClass").is_none());
        assert!(removed_api("rbac.authorization.k8s.io/v1", "ClusterRole").is_none());
    }

    #[test]
    fn order() {
        assert!(
            apply_rank("apiextensions.k8s.io", "CustomResourceDefinition")
                < apply_rank("", "ServiceAccount")
        );
        assert!(apply_rank("", "ConfigMap") < apply_rank("apps", "Deployment"));
    }
}
