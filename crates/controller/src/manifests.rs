//! The install manifests under `manifests/`, built as typed objects (one source of truth; the
//! CRDs come from [`pom_api::crds`]) and written by the `manifestgen` binary (`make manifests`).
//!
//! Two flavours:
//! - [`Flavor::OpenShift`]: the CVO payload form (`manifests/openshift/`, run level 50, file
//!   names in apply order), with the release and capability annotations on every object, the
//!   management-workload annotations, control-plane placement, and the aggregated
//!   ClusterOperator seeded with `versions` so the CVO waits for the manager to report.
//! - [`Flavor::Kubernetes`]: the same install for plain Kubernetes (`manifests/kubernetes/`),
//!   without the OpenShift-only parts.
//!
//! Metrics (OpenShift): `/metrics` is HTTPS on 8443 behind the Service [`METRICS_SERVICE`],
//! whose serving certificate the service-ca operator writes into a Secret the Deployment mounts;
//! every scrape needs a token allowed to `get /metrics` ([`METRICS_READER`], bound to the
//! platform Prometheus `openshift-monitoring/prometheus-k8s`), and a ServiceMonitor tells
//! cluster monitoring how to scrape it. Plain Kubernetes has no service-ca (and maybe no
//! ServiceMonitor CRD), so that flavour serves `/metrics` on the pod's loopback only
//! (`kubectl port-forward`); `docs/metrics.md` says how to switch it to HTTPS.
//!
//! RBAC is the least the manager's code needs (each rule says which call needs it), except for
//! one deliberate grant: `escalate` and `bind` on RBAC objects, because bundles carry Roles,
//! ClusterRoles and bindings whose permissions POM cannot know in advance; without them the API
//! server refuses to let POM create a role granting more than POM itself holds. The alternative,
//! holding every permission any operator might ask for (OLM v0 runs as cluster-admin), would let
//! a bug in POM use those permissions directly. Kinds a bundle ships beyond the ones listed here
//! (e.g. ServiceMonitors) need an extra ClusterRole bound to the manager's ServiceAccount.

use std::collections::BTreeMap;

use crate::catalog::access::{GLOBAL_PULL_SECRET_NAME, GLOBAL_PULL_SECRET_NAMESPACE};

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Capabilities, Container, ContainerPort, EmptyDirVolumeSource, EnvVar, EnvVarSource,
    HTTPGetAction, Namespace, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
    Probe, ResourceRequirements, SeccompProfile, SecretVolumeSource, SecurityContext, Service,
    ServiceAccount, ServicePort, ServiceSpec, Toleration, Volume, VolumeMount,
};
use k8s_openapi::api::networking::v1::{
    NetworkPolicy, NetworkPolicyIngressRule, NetworkPolicyPeer, NetworkPolicyPort,
    NetworkPolicySpec,
};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus,
    ObjectReference, OperandVersion,
};
use serde::Serialize;

/// The manager's namespace (both flavours, so docs and tooling name one place).
pub const NAMESPACE: &str = "openshift-platform-operators";
/// Name of the ServiceAccount, ClusterRole, bindings, Deployment and Lease.
pub const NAME: &str = "platform-operators-manager";
/// Placeholder release version; the payload build substitutes the real one.
pub const RELEASE_VERSION: &str = "0.0.1-snapshot";
/// Label selecting the manager's pods.
const APP_LABEL: (&str, &str) = ("app.kubernetes.io/name", NAME);
/// The Service in front of the HTTPS `/metrics` (OpenShift); its DNS name is the TLS server name.
pub const METRICS_SERVICE: &str = "platform-operators-manager-metrics";
/// The Secret the service-ca operator writes the metrics serving certificate into.
pub const METRICS_TLS_SECRET: &str = "platform-operators-manager-metrics-tls";
/// The ClusterRole allowing `get` on `/metrics`: bind it to whoever scrapes.
pub const METRICS_READER: &str = "platform-operators-manager-metrics-reader";
/// The HTTPS metrics port, on the container and the Service.
pub const METRICS_PORT: i32 = 8443;
/// Where the serving certificate Secret is mounted.
const SERVING_CERT_DIR: &str = "/var/run/secrets/serving-cert";
/// The platform Prometheus, which scrapes namespaces labelled `openshift.io/cluster-monitoring`.
const PLATFORM_PROMETHEUS: (&str, &str) = ("openshift-monitoring", "prometheus-k8s");
/// The port of `/healthz` and `/readyz`.
const HEALTH_PORT: i32 = 8081;
/// Size of the catalog volume (the emptyDir at `/tmp` where catalog images are unpacked): the
/// catalog served (its kept content at most [`pom_oci::layers::DEFAULT_MAX_BYTES`], 512 MiB)
/// and the pull of its next image beside it (another content tree and the layer blob being
/// applied, each at most the same): 1.5 GiB. The 64 MiB shipped before made the kubelet evict
/// the manager, in a loop, for any catalog above 64 MiB (the benchmarks' is 149 MiB).
const CATALOG_VOLUME_BYTES: u64 = 3 * pom_oci::layers::DEFAULT_MAX_BYTES;
/// Memory the manager requests: its peak with the benchmarks' 150 MB catalog served and 10 POs
/// (23.8-25.1 MiB, `pom-catalog-rss`) plus a catalog pull whose names reach
/// [`pom_oci::layers::MAX_NAME_BYTES`] (held three times: 48 MiB), rounded up.
const MEMORY_REQUEST: &str = "96Mi";
/// The manager's memory limit: 7 times its peak with 1,000 POs naming every package of the
/// 150 MB catalog (143.1 MiB, `pom-catalog-rss`; 247.5 MiB in an older build), so a cluster at the scale POM is measured at
/// never meets it, while a leak is stopped before it starves the control-plane node.
const MEMORY_LIMIT: &str = "1Gi";

/// Which install to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    OpenShift,
    Kubernetes,
}

impl Flavor {
    /// The folder under `manifests/`.
    #[must_use]
    pub fn dir(self) -> &'static str {
        match self {
            Self::OpenShift => "openshift",
            Self::Kubernetes => "kubernetes",
        }
    }

    /// The manager image: the payload's image-references placeholder on OpenShift (the release
    /// build substitutes it), the `make image` tag on plain Kubernetes.
    #[must_use]
    pub fn image(self) -> &'static str {
        match self {
            Self::OpenShift => "quay.io/openshift/origin-platform-operators-manager:latest",
            Self::Kubernetes => "localhost/platform-operators-manager:latest",
        }
    }

    fn file(self, index: u8, name: &str) -> String {
        match self {
            Self::OpenShift => format!("0000_50_{NAME}_{index:02}_{name}.yaml"),
            Self::Kubernetes => format!("{index:02}_{name}.yaml"),
        }
    }
}

/// One generated file: its name under `manifests/<flavor>/` and its YAML.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ManifestFile {
    pub name: String,
    pub content: String,
}

/// Why rendering failed (never expected: every object is typed).
#[derive(Debug, thiserror::Error)]
#[error("serialising {file}: {source}")]
pub struct RenderError {
    file: String,
    #[source]
    source: serde_saphyr::ser::Error,
}

/// Every file of `flavor`, in apply order.
///
/// # Errors
/// [`RenderError`] if an object cannot be serialised.
pub fn render(flavor: Flavor) -> Result<Vec<ManifestFile>, RenderError> {
    let mut files = Vec::new();
    let mut add = |index: u8,
                   name: &str,
                   docs: Vec<serde_json::Value>|
     -> Result<(), RenderError> {
        let file = flavor.file(index, name);
        let mut content = String::from(
            "# Generated by `make manifests` (crates/controller/src/manifests.rs). Do not edit.\n",
        );
        for doc in docs {
            content.push_str("---\n");
            let text = serde_saphyr::to_string(&doc).map_err(|source| RenderError {
                file: file.clone(),
                source,
            })?;
            content.push_str(&text);
        }
        files.push(ManifestFile {
            name: file,
            content,
        });
        Ok(())
    };
    add(0, "namespace", vec![json(flavor, &namespace(flavor))])?;
    add(
        1,
        "crds",
        pom_api::crds()
            .iter()
            .map(|crd| json(flavor, crd))
            .collect(),
    )?;
    add(2, "serviceaccount", vec![json(flavor, &service_account())])?;
    add(
        3,
        "rbac",
        vec![
            json(flavor, &cluster_role()),
            json(flavor, &cluster_role_binding()),
            json(flavor, &lease_role()),
            json(flavor, &lease_role_binding()),
        ]
        .into_iter()
        .chain(pull_secret_rbac(flavor))
        .collect(),
    )?;
    add(
        3,
        "admission_guard",
        vec![
            json(flavor, &crate::admission_guard::policy()),
            json(flavor, &crate::admission_guard::binding()),
            json(flavor, &crate::owner_label_guard::policy()),
            json(flavor, &crate::owner_label_guard::binding()),
        ],
    )?;
    add(
        3,
        "catalog_sources",
        vec![
            catalog_sources_list(flavor),
            json(flavor, &crate::catalog_sources_policy::policy()),
            json(flavor, &crate::catalog_sources_policy::binding()),
        ],
    )?;
    if flavor == Flavor::OpenShift {
        add(3, "trusted_ca_bundle", vec![trusted_ca_bundle(flavor)])?;
    }
    add(4, "metrics_rbac", metrics_rbac(flavor))?;
    if flavor == Flavor::OpenShift {
        add(5, "service", vec![json(flavor, &metrics_service())])?;
    }
    add(
        5,
        "networkpolicy",
        vec![json(flavor, &network_policy(flavor))],
    )?;
    add(6, "deployment", vec![json(flavor, &deployment(flavor))])?;
    if flavor == Flavor::OpenShift {
        add(
            7,
            "clusteroperator",
            vec![json(flavor, &cluster_operator())],
        )?;
        add(8, "servicemonitor", vec![json(flavor, &service_monitor())])?;
        add(9, "prometheusrule", vec![json(flavor, &prometheus_rule())])?;
        files.push(ManifestFile {
            name: "image-references".into(),
            content: image_references(),
        });
    }
    Ok(files)
}

/// The object as JSON with the flavour's common annotations added (the phase-0 kustomize
/// `commonAnnotations`, plus the capability the CVO filters on).
fn json<T: Serialize>(flavor: Flavor, object: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(object).unwrap_or(serde_json::Value::Null);
    if flavor == Flavor::OpenShift
        && let Some(metadata) = value
            .get_mut("metadata")
            .and_then(serde_json::Value::as_object_mut)
    {
        let annotations = metadata
            .entry("annotations")
            .or_insert_with(|| serde_json::json!({}));
        if let Some(annotations) = annotations.as_object_mut() {
            for (key, value) in release_annotations() {
                annotations.insert(key.to_owned(), serde_json::Value::String(value.to_owned()));
            }
        }
    }
    value
}

/// On every payload object. The capability is OperatorLifecycleManager: POM installs OLM-format
/// bundles and gates upgrades on OLM's OperatorCondition API, whose CRD that capability ships;
/// a cluster without it has opted out of operator lifecycle management altogether.
fn release_annotations() -> [(&'static str, &'static str); 4] {
    [
        (
            "include.release.openshift.io/self-managed-high-availability",
            "true",
        ),
        ("include.release.openshift.io/single-node-developer", "true"),
        (
            "exclude.release.openshift.io/internal-openshift-hosted",
            "true",
        ),
        ("capability.openshift.io/name", "OperatorLifecycleManager"),
    ]
}

fn meta(name: &str, namespace: Option<&str>) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: namespace.map(str::to_owned),
        labels: Some(BTreeMap::from([(
            APP_LABEL.0.to_owned(),
            APP_LABEL.1.to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

fn namespace(flavor: Flavor) -> Namespace {
    let mut metadata = meta(NAMESPACE, None);
    let labels = metadata.labels.get_or_insert_with(BTreeMap::new);
    // Phase 0's labels: the manager itself meets `restricted`, but `baseline` is what the
    // payload namespace always had.
    labels.insert(
        "pod-security.kubernetes.io/enforce".into(),
        "baseline".into(),
    );
    labels.insert(
        "pod-security.kubernetes.io/enforce-version".into(),
        "latest".into(),
    );
    if flavor == Flavor::OpenShift {
        labels.insert("openshift.io/cluster-monitoring".into(), "true".into());
        metadata.annotations = Some(BTreeMap::from([(
            "workload.openshift.io/allowed".to_owned(),
            "management".to_owned(),
        )]));
    }
    Namespace {
        metadata,
        ..Namespace::default()
    }
}

fn service_account() -> ServiceAccount {
    ServiceAccount {
        metadata: meta(NAME, Some(NAMESPACE)),
        ..ServiceAccount::default()
    }
}

fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> PolicyRule {
    PolicyRule {
        api_groups: Some(strings(groups)),
        resources: Some(strings(resources)),
        verbs: strings(verbs),
        ..PolicyRule::default()
    }
}

/// Verbs on the kinds bundles ship: read and compare (`get`), the owner-label sweep of
/// cleanup (`list`), drift watches (`watch`, metadata only), apply (`create`, `patch`: every
/// write is a server-side apply, never an `update`) and prune (`delete`).
const OBJECT_VERBS: &[&str] = &["get", "list", "watch", "create", "patch", "delete"];

/// Every rule, with the call that needs it.
#[must_use]
pub fn cluster_role_rules() -> Vec<PolicyRule> {
    [
        own_kind_rules(),
        cluster_state_rules(),
        bundle_object_rules(),
        guard_event_and_metrics_rules(),
    ]
    .concat()
}

/// POM's own kinds, PlatformOperators and Catalogs: what their controllers read and write.
fn own_kind_rules() -> Vec<PolicyRule> {
    vec![
        // PlatformOperator and Catalog controllers: watch, finalizer (JSON patch), status (SSA).
        rule(
            &["platform.openshift.io"],
            &["platformoperators", "catalogs"],
            &["get", "list", "watch", "patch"],
        ),
        rule(
            &["platform.openshift.io"],
            &["platformoperators/status", "catalogs/status"],
            &["get", "patch"],
        ),
        // Kept for OpenShift's OwnerReferencesPermissionEnforcement admission plugin, which
        // asks for `update` on `<resource>/finalizers` of an object an ownerReference blocks
        // the deletion of; scoped to POM's own kinds.
        rule(
            &["platform.openshift.io"],
            &["platformoperators/finalizers", "catalogs/finalizers"],
            &["update"],
        ),
    ]
}

/// The cluster's own state: what POM reads to judge and pull (version, mirrors, proxy), and
/// the aggregated ClusterOperator it reports through.
fn cluster_state_rules() -> Vec<PolicyRule> {
    vec![
        // Cluster phase (§4.1): the PO controller reads and watches ClusterVersion `version`.
        rule(
            &["config.openshift.io"],
            &["clusterversions"],
            &["get", "list", "watch"],
        ),
        // The cluster's image mirror configuration, read and watched so that POM's own pulls go
        // where the nodes' pulls go (PRODUCT §10, `image_mirrors.rs`); never written.
        rule(
            &["config.openshift.io"],
            &["imagedigestmirrorsets", "imagetagmirrorsets"],
            &["get", "list", "watch"],
        ),
        rule(
            &["operator.openshift.io"],
            &["imagecontentsourcepolicies"],
            &["get", "list", "watch"],
        ),
        // The cluster-wide proxy (`Proxy` `cluster`), read and watched for POM's own pulls
        // (issue 23 item 2, `cluster_proxy.rs`); never written.
        rule(
            &["config.openshift.io"],
            &["proxies"],
            &["get", "list", "watch"],
        ),
        // What serves each API group/version: a bundle CRD claiming a group/version an
        // aggregated APIService serves is refused before it is applied (issue 33 item 3,
        // `operator/served_apis.rs`); never written.
        rule(&["apiregistration.k8s.io"], &["apiservices"], &["list"]),
        // The aggregated ClusterOperator: created if the payload did not, status written by SSA.
        rule(
            &["config.openshift.io"],
            &["clusteroperators"],
            &["get", "list", "watch", "create"],
        ),
        PolicyRule {
            resource_names: Some(vec![AGGREGATED_CLUSTER_OPERATOR.to_owned()]),
            ..rule(
                &["config.openshift.io"],
                &["clusteroperators/status"],
                &["get", "patch"],
            )
        },
    ]
}

/// The objects bundles ship and POM writes for them: applied, watched for drift, settled on,
/// and pruned through the inventory.
fn bundle_object_rules() -> Vec<PolicyRule> {
    vec![
        // OperatorConditions POM creates per bundle, copies spec to status for, and prunes (§7).
        rule(
            &["operators.coreos.com"],
            &["operatorconditions"],
            OBJECT_VERBS,
        ),
        rule(
            &["operators.coreos.com"],
            &["operatorconditions/status"],
            &["get", "patch"],
        ),
        // The OLM v0 installation a PlatformOperator adopts (`spec.adoptFrom`, issue 36):
        // its Subscription and installed CSV, read only.
        rule(
            &["operators.coreos.com"],
            &["subscriptions", "clusterserviceversions"],
            &["get"],
        ),
        // Bundle CRDs: applied, checked for safe upgrades, waited on; never deleted (§6).
        rule(
            &["apiextensions.k8s.io"],
            &["customresourcedefinitions"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // Install namespaces: created by SSA, never deleted.
        rule(
            &[""],
            &["namespaces"],
            &["get", "list", "watch", "create", "patch"],
        ),
        // Catalog ConfigMaps and CA bundles (any namespace, watched), and the ConfigMaps,
        // Services and ServiceAccounts bundles ship (drift watches are metadata only).
        rule(
            &[""],
            &["configmaps", "services", "serviceaccounts"],
            OBJECT_VERBS,
        ),
        // Secrets are written, never read (issue 22 item 3): those a bundle ships and the
        // webhook serving certificates are applied and pruned through the inventory. The only
        // Secret read cluster-wide is POM's own webhook CA, by name; pull secrets are read
        // through `pull_secret_rbac` (the manager's namespace, `openshift-config/pull-secret`,
        // and the namespaces an admin binds).
        rule(&[""], &["secrets"], &["create", "patch", "delete"]),
        PolicyRule {
            resource_names: Some(vec![crate::operator::webhook_certs::CA_SECRET.to_owned()]),
            ..rule(&[""], &["secrets"], &["get"])
        },
        // Bundle workloads; Deployments are also watched (rollout settling, drift).
        rule(&["apps"], &["deployments"], OBJECT_VERBS),
        rule(&["networking.k8s.io"], &["networkpolicies"], OBJECT_VERBS),
        // A webhook is registered once its Service lists a ready endpoint (§6, §7).
        rule(&["discovery.k8s.io"], &["endpointslices"], &["list"]),
        // Which of those endpoints are the Deployment's current pods: its current ReplicaSet
        // names them (review M1; `operator::webhook_endpoints`).
        rule(&["apps"], &["replicasets"], &["list"]),
        // Webhook configurations POM renders from a CSV's spec.webhookdefinitions (§6); the
        // admission guard holds them to objects POM owns.
        rule(
            &["admissionregistration.k8s.io"],
            &[
                "validatingwebhookconfigurations",
                "mutatingwebhookconfigurations",
            ],
            OBJECT_VERBS,
        ),
        rule(&["policy"], &["poddisruptionbudgets"], OBJECT_VERBS),
        // Bundle RBAC: `escalate`/`bind` because its permissions are not known in advance.
        rule(
            &["rbac.authorization.k8s.io"],
            &[
                "roles",
                "rolebindings",
                "clusterroles",
                "clusterrolebindings",
            ],
            &[
                "get", "list", "watch", "create", "patch", "delete", "escalate", "bind",
            ],
        ),
    ]
}

/// What the manager needs for itself beyond any object: its admission guard, its Events, and
/// the checks guarding `/metrics`.
fn guard_event_and_metrics_rules() -> Vec<PolicyRule> {
    vec![
        // Its own admission guard, by name, watched: without it POM writes nothing but status
        // (issue 22 item 2).
        rule(
            &["admissionregistration.k8s.io"],
            &[
                "validatingadmissionpolicies",
                "validatingadmissionpolicybindings",
            ],
            &["get", "list", "watch"],
        ),
        // Events on PlatformOperators and Catalogs (events.k8s.io; series are patched).
        rule(&["", "events.k8s.io"], &["events"], &["create", "patch"]),
        // The HTTPS `/metrics` guard (metrics_auth.rs): authenticate each scrape's bearer token,
        // then ask whether its user may `get /metrics`.
        rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
        rule(
            &["authorization.k8s.io"],
            &["subjectaccessreviews"],
            &["create"],
        ),
    ]
}

fn cluster_role() -> ClusterRole {
    ClusterRole {
        metadata: meta(NAME, None),
        rules: Some(cluster_role_rules()),
        ..ClusterRole::default()
    }
}

fn subjects() -> Option<Vec<Subject>> {
    Some(vec![Subject {
        kind: "ServiceAccount".into(),
        name: NAME.into(),
        namespace: Some(NAMESPACE.into()),
        ..Subject::default()
    }])
}

fn cluster_role_binding() -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(NAME, None),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: NAME.into(),
        },
        subjects: subjects(),
    }
}

/// Leader election (kube-lease-manager: get, create once, patch to renew and release).
fn lease_role() -> Role {
    Role {
        metadata: meta(&format!("{NAME}-leader-election"), Some(NAMESPACE)),
        rules: Some(vec![rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["get", "create", "patch"],
        )]),
    }
}

fn lease_role_binding() -> RoleBinding {
    let name = format!("{NAME}-leader-election");
    RoleBinding {
        metadata: meta(&name, Some(NAMESPACE)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            name,
        },
        subjects: subjects(),
    }
}

/// The admin's list of namespaces Catalogs may read from, create-only on OpenShift.
fn catalog_sources_list(flavor: Flavor) -> serde_json::Value {
    let mut list = json(flavor, &crate::catalog_sources_policy::config_map());
    if flavor == Flavor::OpenShift {
        list["metadata"]["annotations"][crate::catalog_sources_policy::CREATE_ONLY] =
            serde_json::Value::String("true".to_owned());
    }
    list
}

/// The ConfigMap the cluster network operator injects the trusted CA bundle into (its label),
/// which the manager reads for its own pulls (`cluster_proxy.rs`). Create-only, so the CVO
/// never resets the injected bundle to the shipped empty one.
fn trusted_ca_bundle(flavor: Flavor) -> serde_json::Value {
    let mut metadata = meta(crate::cluster_proxy::TRUSTED_CA_CONFIGMAP, Some(NAMESPACE));
    metadata.labels.get_or_insert_with(BTreeMap::new).insert(
        pom_api::openshift::proxy::INJECT_TRUSTED_CA_BUNDLE_LABEL.to_owned(),
        "true".to_owned(),
    );
    let mut config_map = json(
        flavor,
        &k8s_openapi::api::core::v1::ConfigMap {
            metadata,
            ..Default::default()
        },
    );
    config_map["metadata"]["annotations"][crate::catalog_sources_policy::CREATE_ONLY] =
        serde_json::Value::String("true".to_owned());
    config_map
}

/// The ClusterRole that lets the manager read pull secrets in a namespace, bound by a
/// RoleBinding there: shipped bound in the manager's namespace; an admin binds it in each
/// namespace listed for Catalogs (`pom_policy::source_trust`) that holds pull secrets.
pub const PULL_SECRET_READER: &str = "platform-operators-manager-pull-secret-reader";

/// Reading pull secrets without reading every Secret (issue 22 item 3): [`PULL_SECRET_READER`],
/// bound in the manager's namespace, and on OpenShift `get` on `openshift-config/pull-secret`
/// alone. Its name starts with the manager's, so the admission guard forbids the manager from
/// binding it anywhere itself.
fn pull_secret_rbac(flavor: Flavor) -> Vec<serde_json::Value> {
    let reader = ClusterRole {
        metadata: meta(PULL_SECRET_READER, None),
        rules: Some(vec![rule(&[""], &["secrets"], &["get"])]),
        ..ClusterRole::default()
    };
    let own_namespace = RoleBinding {
        metadata: meta(&format!("{NAME}-pull-secrets"), Some(NAMESPACE)),
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: PULL_SECRET_READER.into(),
        },
        subjects: subjects(),
    };
    let mut docs = vec![json(flavor, &reader), json(flavor, &own_namespace)];
    if flavor == Flavor::OpenShift {
        let name = format!("{NAME}-global-pull-secret");
        let global = Role {
            metadata: meta(&name, Some(GLOBAL_PULL_SECRET_NAMESPACE)),
            rules: Some(vec![PolicyRule {
                resource_names: Some(vec![GLOBAL_PULL_SECRET_NAME.to_owned()]),
                ..rule(&[""], &["secrets"], &["get"])
            }]),
        };
        let binding = RoleBinding {
            metadata: meta(&name, Some(GLOBAL_PULL_SECRET_NAMESPACE)),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name,
            },
            subjects: subjects(),
        };
        docs.push(json(flavor, &global));
        docs.push(json(flavor, &binding));
    }
    docs
}

/// Who may read `/metrics`: [`METRICS_READER`] for anyone; on OpenShift bound to the platform
/// Prometheus, which also needs to discover the Service's endpoints in this namespace.
fn metrics_rbac(flavor: Flavor) -> Vec<serde_json::Value> {
    let reader = ClusterRole {
        metadata: meta(METRICS_READER, None),
        rules: Some(vec![PolicyRule {
            non_resource_urls: Some(strings(&["/metrics"])),
            verbs: strings(&["get"]),
            ..PolicyRule::default()
        }]),
        ..ClusterRole::default()
    };
    let mut docs = vec![json(flavor, &reader)];
    if flavor == Flavor::OpenShift {
        let prometheus = Some(vec![Subject {
            kind: "ServiceAccount".into(),
            name: PLATFORM_PROMETHEUS.1.into(),
            namespace: Some(PLATFORM_PROMETHEUS.0.into()),
            ..Subject::default()
        }]);
        let reader_binding = ClusterRoleBinding {
            metadata: meta(METRICS_READER, None),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "ClusterRole".into(),
                name: METRICS_READER.into(),
            },
            subjects: prometheus.clone(),
        };
        let discovery = Role {
            metadata: meta(PLATFORM_PROMETHEUS.1, Some(NAMESPACE)),
            rules: Some(vec![
                rule(
                    &[""],
                    &["services", "endpoints", "pods"],
                    &["get", "list", "watch"],
                ),
                rule(
                    &["discovery.k8s.io"],
                    &["endpointslices"],
                    &["get", "list", "watch"],
                ),
            ]),
        };
        let discovery_binding = RoleBinding {
            metadata: meta(PLATFORM_PROMETHEUS.1, Some(NAMESPACE)),
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: PLATFORM_PROMETHEUS.1.into(),
            },
            subjects: prometheus,
        };
        docs.extend([
            json(flavor, &reader_binding),
            json(flavor, &discovery),
            json(flavor, &discovery_binding),
        ]);
    }
    docs
}

/// The Service in front of `/metrics`; the annotation asks the service-ca operator for a
/// serving certificate for `<service>.<namespace>.svc` in [`METRICS_TLS_SECRET`].
fn metrics_service() -> Service {
    let mut metadata = meta(METRICS_SERVICE, Some(NAMESPACE));
    metadata.annotations = Some(BTreeMap::from([(
        "service.beta.openshift.io/serving-cert-secret-name".to_owned(),
        METRICS_TLS_SECRET.to_owned(),
    )]));
    Service {
        metadata,
        spec: Some(ServiceSpec {
            selector: Some(BTreeMap::from([(
                APP_LABEL.0.to_owned(),
                APP_LABEL.1.to_owned(),
            )])),
            ports: Some(vec![ServicePort {
                name: Some("https".into()),
                port: METRICS_PORT,
                target_port: Some(IntOrString::String("metrics".into())),
                protocol: Some("TCP".into()),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        }),
        ..Service::default()
    }
}

/// How cluster monitoring scrapes the manager: HTTPS, its own ServiceAccount token as bearer,
/// the certificate checked against the service CA bundle Prometheus mounts, for the Service's
/// DNS name.
fn service_monitor() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "ServiceMonitor",
        "metadata": {
            "name": NAME,
            "namespace": NAMESPACE,
            "labels": {APP_LABEL.0: APP_LABEL.1},
        },
        "spec": {
            "endpoints": [{
                "port": "https",
                "scheme": "https",
                "path": "/metrics",
                "interval": "30s",
                "bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
                "tlsConfig": {
                    "caFile": "/etc/prometheus/configmaps/serving-certs-ca-bundle/service-ca.crt",
                    "serverName": format!("{METRICS_SERVICE}.{NAMESPACE}.svc"),
                },
            }],
            "namespaceSelector": {"matchNames": [NAMESPACE]},
            "selector": {"matchLabels": {APP_LABEL.0: APP_LABEL.1}},
        },
    })
}

/// The shipped alert (issue 35 item 3): a cluster update of any size, patch updates included,
/// while a PlatformOperator is not ready for one. The CVO's `Upgradeable=False` blocks minor and
/// major updates only; an alert labelled `openShiftUpdatePrecheck: "true"` is listed by `oc adm
/// upgrade recommend` for every target and, where the CVO's `ClusterUpdateAcceptRisks` feature
/// gate is on, becomes an update risk the admin must accept.
pub const UPDATE_PRECHECK_ALERT: &str = "PlatformOperatorNotReadyForUpdate";

/// The PrometheusRule's name (also its rule group's).
pub const PROMETHEUS_RULE: &str = "platform-operators-manager";

/// The PrometheusRule cluster monitoring evaluates in the manager's namespace (which carries
/// `openshift.io/cluster-monitoring: "true"`). The expression reads
/// `pom_platformoperator_update_risk`, which every replica serves: `max by` keeps one series per
/// PO and risk whatever the number of replicas scraped. Ten minutes without a break keeps an
/// ordinary hop, which settles in a few minutes, from raising it; an unsettled move that lasts
/// is what the admin must hear about.
fn prometheus_rule() -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {
            "name": PROMETHEUS_RULE,
            "namespace": NAMESPACE,
            "labels": {APP_LABEL.0: APP_LABEL.1},
        },
        "spec": {
            "groups": [{
                "name": PROMETHEUS_RULE,
                "rules": [{
                    "alert": UPDATE_PRECHECK_ALERT,
                    "expr": "max by (platformoperator, risk) (pom_platformoperator_update_risk) == 1",
                    "for": "10m",
                    "labels": {
                        "severity": "warning",
                        "namespace": NAMESPACE,
                        "openShiftUpdatePrecheck": "true",
                    },
                    "annotations": {
                        "summary": "PlatformOperator {{ $labels.platformoperator }} is not ready for a cluster update ({{ $labels.risk }}).",
                        "description": concat!(
                            "PlatformOperator {{ $labels.platformoperator }} has been {{ $labels.risk }} for 10 minutes. ",
                            "Do not update the cluster, not even to a patch release, until this alert clears: ",
                            "POM could not move the operator to what the new release needs, or vouch for what runs. ",
                            "unsettled: a move has not settled; `oc get platformoperator {{ $labels.platformoperator }} -o yaml` shows what status.activeHop waits for. ",
                            "degraded: fix what its Degraded condition says. ",
                            "paused: set spec.paused to false once the hold is over. ",
                            "pending_approval: approve the bundle its Progressing condition names (spec.approvedBundle, or `pomctl approve`), or change its spec so that no move is needed. ",
                            "no_bundle_for_patch: the patch update the cluster is asked to take (ClusterVersion spec.desiredUpdate) would leave it on a bundle that does not run there, with no bundle its channel offers within the update's pin that does; `pomctl plan --to` that version names the bundle and its limit: publish a bundle that runs there or remove the PlatformOperator first."
                        ),
                    },
                }],
            }],
        },
    })
}

/// Who may reach the manager's pods: anyone on the health port (the kubelet's probes; it
/// answers `/healthz` and `/readyz` only) and, on OpenShift, the platform Prometheus's
/// namespace on the metrics port; nothing else. Egress is not restricted: the manager talks to
/// the API server and to whatever registries Catalogs name, on any port.
fn network_policy(flavor: Flavor) -> NetworkPolicy {
    let port = |number: i32| NetworkPolicyPort {
        port: Some(IntOrString::Int(number)),
        protocol: Some("TCP".into()),
        ..NetworkPolicyPort::default()
    };
    let mut ingress = vec![NetworkPolicyIngressRule {
        ports: Some(vec![port(HEALTH_PORT)]),
        ..NetworkPolicyIngressRule::default()
    }];
    if flavor == Flavor::OpenShift {
        ingress.push(NetworkPolicyIngressRule {
            from: Some(vec![NetworkPolicyPeer {
                namespace_selector: Some(LabelSelector {
                    match_labels: Some(BTreeMap::from([(
                        "kubernetes.io/metadata.name".to_owned(),
                        PLATFORM_PROMETHEUS.0.to_owned(),
                    )])),
                    ..LabelSelector::default()
                }),
                ..NetworkPolicyPeer::default()
            }]),
            ports: Some(vec![port(METRICS_PORT)]),
        });
    }
    NetworkPolicy {
        metadata: meta(NAME, Some(NAMESPACE)),
        spec: Some(NetworkPolicySpec {
            pod_selector: Some(LabelSelector {
                match_labels: Some(BTreeMap::from([(
                    APP_LABEL.0.to_owned(),
                    APP_LABEL.1.to_owned(),
                )])),
                ..LabelSelector::default()
            }),
            policy_types: Some(strings(&["Ingress"])),
            ingress: Some(ingress),
            ..NetworkPolicySpec::default()
        }),
    }
}

fn field_env(name: &str, path: &str) -> EnvVar {
    EnvVar {
        name: name.into(),
        value_from: Some(EnvVarSource {
            field_ref: Some(ObjectFieldSelector {
                field_path: path.into(),
                ..ObjectFieldSelector::default()
            }),
            ..EnvVarSource::default()
        }),
        ..EnvVar::default()
    }
}

fn probe(path: &str, period: i32, initial_delay: i32) -> Probe {
    Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("health".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(period),
        initial_delay_seconds: Some(initial_delay),
        ..Probe::default()
    }
}

fn deployment(flavor: Flavor) -> Deployment {
    let labels = BTreeMap::from([(APP_LABEL.0.to_owned(), APP_LABEL.1.to_owned())]);
    Deployment {
        metadata: meta(NAME, Some(NAMESPACE)),
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(labels.clone()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(pod_metadata(flavor, labels)),
                spec: Some(pod_spec(flavor)),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

/// The manager pod's labels, and on OpenShift the annotation that lets the cluster's workload
/// partitioning run it on the management CPUs like the rest of the control plane.
fn pod_metadata(flavor: Flavor, labels: BTreeMap<String, String>) -> ObjectMeta {
    ObjectMeta {
        labels: Some(labels),
        annotations: (flavor == Flavor::OpenShift).then(|| {
            BTreeMap::from([(
                "target.workload.openshift.io/management".to_owned(),
                r#"{"effect": "PreferredDuringScheduling"}"#.to_owned(),
            )])
        }),
        ..ObjectMeta::default()
    }
}

/// The manager pod: restricted, critical, and on OpenShift placed on the control plane.
fn pod_spec(flavor: Flavor) -> PodSpec {
    let mut pod = PodSpec {
        service_account_name: Some(NAME.into()),
        priority_class_name: Some("system-cluster-critical".into()),
        // Longer than --shutdown-timeout, so in-flight reconciles finish and the Lease is released.
        termination_grace_period_seconds: Some(30),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..PodSecurityContext::default()
        }),
        containers: vec![manager_container(flavor)],
        volumes: Some(manager_volumes(flavor)),
        ..PodSpec::default()
    };
    if flavor == Flavor::OpenShift {
        pod.node_selector = Some(BTreeMap::from([(
            "node-role.kubernetes.io/master".to_owned(),
            String::new(),
        )]));
        pod.tolerations = Some(control_plane_tolerations());
    }
    pod
}

/// Tolerations of a control-plane component: it runs on masters, and is moved off a node that
/// is unreachable or not ready after 2 minutes rather than the default 5.
fn control_plane_tolerations() -> Vec<Toleration> {
    vec![
        Toleration {
            key: Some("node-role.kubernetes.io/master".into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Toleration::default()
        },
        Toleration {
            key: Some("node.kubernetes.io/unreachable".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(120),
            ..Toleration::default()
        },
        Toleration {
            key: Some("node.kubernetes.io/not-ready".into()),
            operator: Some("Exists".into()),
            effect: Some("NoExecute".into()),
            toleration_seconds: Some(120),
            ..Toleration::default()
        },
    ]
}

/// The manager container: probes on the health port, bounded memory, and the restricted
/// security context (no privilege, read-only root: the catalog volume is its only scratch).
fn manager_container(flavor: Flavor) -> Container {
    Container {
        name: "manager".into(),
        image: Some(flavor.image().into()),
        args: Some(manager_args(flavor)),
        env: Some(manager_env()),
        ports: Some(manager_ports(flavor)),
        liveness_probe: Some(probe("/healthz", 20, 15)),
        readiness_probe: Some(probe("/readyz", 10, 5)),
        resources: Some(manager_resources()),
        security_context: Some(SecurityContext {
            allow_privilege_escalation: Some(false),
            read_only_root_filesystem: Some(true),
            run_as_non_root: Some(true),
            capabilities: Some(Capabilities {
                drop: Some(strings(&["ALL"])),
                ..Capabilities::default()
            }),
            seccomp_profile: Some(runtime_default_seccomp()),
            ..SecurityContext::default()
        }),
        termination_message_policy: Some("FallbackToLogsOnError".into()),
        volume_mounts: Some(manager_mounts(flavor)),
        ..Container::default()
    }
}

/// The container runtime's default seccomp profile, which the restricted Pod Security level
/// requires of the pod and the container.
fn runtime_default_seccomp() -> SeccompProfile {
    SeccompProfile {
        type_: "RuntimeDefault".into(),
        ..SeccompProfile::default()
    }
}

/// The manager's flags: `/metrics` over HTTPS with the service-ca's certificate on OpenShift;
/// without a service-ca, plain HTTP on the pod's loopback, reachable by `kubectl port-forward`.
fn manager_args(flavor: Flavor) -> Vec<String> {
    let mut args = strings(&[
        "--leader-elect",
        "--health-bind-address=:8081",
        "--shutdown-timeout=25s",
    ]);
    match flavor {
        Flavor::OpenShift => args.extend([
            format!("--metrics-bind-address=:{METRICS_PORT}"),
            format!("--metrics-tls-cert-file={SERVING_CERT_DIR}/tls.crt"),
            format!("--metrics-tls-key-file={SERVING_CERT_DIR}/tls.key"),
        ]),
        Flavor::Kubernetes => args.push("--metrics-bind-address=127.0.0.1:8080".into()),
    }
    args
}

/// The manager's environment: its release version, its own pod's name and namespace, and
/// the malloc arena cap that keeps its memory down.
fn manager_env() -> Vec<EnvVar> {
    vec![
        EnvVar {
            name: "RELEASE_VERSION".into(),
            value: Some(RELEASE_VERSION.into()),
            ..EnvVar::default()
        },
        field_env("POD_NAME", "metadata.name"),
        field_env("POD_NAMESPACE", "metadata.namespace"),
        // glibc keeps one malloc arena per thread that allocated (catalog loads and pulls
        // run on blocking threads) and does not give their pages back: two arenas take
        // 5 MiB off the manager's peak with a 150 MB catalog and 10 POs (45.5-46.0 against
        // 50.6-51.6 MiB, e2e/src/bin/pom-catalog-rss.rs, 3 runs each) with no load-time
        // cost above the noise (catalog_memory's json-split loads); mimalloc and jemalloc
        // as the global allocator did no better (47-101 MiB).
        EnvVar {
            name: "MALLOC_ARENA_MAX".into(),
            value: Some("2".into()),
            ..EnvVar::default()
        },
    ]
}

/// The health port everywhere; the HTTPS metrics port only where `/metrics` is served off the
/// loopback (OpenShift).
fn manager_ports(flavor: Flavor) -> Vec<ContainerPort> {
    let mut ports = vec![ContainerPort {
        name: Some("health".into()),
        container_port: HEALTH_PORT,
        ..ContainerPort::default()
    }];
    if flavor == Flavor::OpenShift {
        ports.push(ContainerPort {
            name: Some("metrics".into()),
            container_port: METRICS_PORT,
            ..ContainerPort::default()
        });
    }
    ports
}

/// Requests sized to the measured peak and a memory limit far above it (see
/// [`MEMORY_REQUEST`] and [`MEMORY_LIMIT`]): a leak is stopped, real load never is.
fn manager_resources() -> ResourceRequirements {
    ResourceRequirements {
        requests: Some(BTreeMap::from([
            ("cpu".to_owned(), Quantity("10m".into())),
            ("memory".to_owned(), Quantity(MEMORY_REQUEST.into())),
        ])),
        limits: Some(BTreeMap::from([(
            "memory".to_owned(),
            Quantity(MEMORY_LIMIT.into()),
        )])),
        ..ResourceRequirements::default()
    }
}

/// The catalog volume at `/tmp` (the root filesystem is read-only), and on OpenShift the
/// metrics serving certificate.
fn manager_mounts(flavor: Flavor) -> Vec<VolumeMount> {
    let mut mounts = vec![VolumeMount {
        name: "tmp".into(),
        mount_path: "/tmp".into(),
        ..VolumeMount::default()
    }];
    if flavor == Flavor::OpenShift {
        mounts.push(VolumeMount {
            name: "serving-cert".into(),
            mount_path: SERVING_CERT_DIR.into(),
            read_only: Some(true),
            ..VolumeMount::default()
        });
    }
    mounts
}

/// The volumes [`manager_mounts`] mounts: the catalog emptyDir, sized by
/// [`CATALOG_VOLUME_BYTES`] so the kubelet never evicts the manager for a large catalog, and
/// on OpenShift the Secret the service-ca writes the metrics certificate into.
fn manager_volumes(flavor: Flavor) -> Vec<Volume> {
    let mut volumes = vec![Volume {
        name: "tmp".into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(format!("{}Mi", CATALOG_VOLUME_BYTES >> 20))),
            ..EmptyDirVolumeSource::default()
        }),
        ..Volume::default()
    }];
    if flavor == Flavor::OpenShift {
        volumes.push(Volume {
            name: "serving-cert".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(METRICS_TLS_SECRET.into()),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        });
    }
    volumes
}

/// `spec: {}` and `versions` seeded with the release version: the CVO waits until the manager
/// reports that version itself (only once every PO has reached its pin, §8.2).
fn cluster_operator() -> ClusterOperator {
    let mut co = ClusterOperator::new(AGGREGATED_CLUSTER_OPERATOR, ClusterOperatorSpec {});
    co.status = Some(ClusterOperatorStatus {
        conditions: Vec::new(),
        versions: vec![OperandVersion {
            name: "operator".into(),
            version: RELEASE_VERSION.into(),
        }],
        related_objects: vec![
            ObjectReference {
                group: String::new(),
                resource: "namespaces".into(),
                namespace: None,
                name: NAMESPACE.into(),
            },
            ObjectReference {
                group: pom_api::GROUP.into(),
                resource: "platformoperators".into(),
                namespace: None,
                name: String::new(),
            },
            ObjectReference {
                group: pom_api::GROUP.into(),
                resource: "catalogs".into(),
                namespace: None,
                name: String::new(),
            },
        ],
    });
    co
}

/// The payload's image references: the release build replaces the tag's image everywhere.
fn image_references() -> String {
    format!(
        "# Generated by `make manifests` (crates/controller/src/manifests.rs). Do not edit.\nkind: ImageStream\napiVersion: image.openshift.io/v1\nspec:\n  tags:\n  - name: {NAME}\n    from:\n      kind: DockerImage\n      name: {}\n",
        Flavor::OpenShift.image()
    )
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn openshift_objects_carry_the_release_annotations() {
        for file in render(Flavor::OpenShift)
            .unwrap()
            .iter()
            .filter(|f| f.name.ends_with(".yaml"))
        {
            let docs = file.content.matches("\n---\n").count()
                + usize::from(file.content.starts_with("---"));
            let annotated = file
                .content
                .matches("include.release.openshift.io/self-managed-high-availability: 'true'")
                .count()
                + file
                    .content
                    .matches(
                        "include.release.openshift.io/self-managed-high-availability: \"true\"",
                    )
                    .count();
            assert!(
                annotated >= docs.max(1),
                "{}: {docs} objects, {annotated} annotated\n{}",
                file.name,
                file.content
            );
        }
    }

    /// Issue 35 item 3: the precheck alert `oc adm upgrade recommend` and the CVO read, in the
    /// namespace cluster monitoring evaluates (the e2e `clients_promtool_rules` lints it and
    /// evaluates it against the manager's real `/metrics`).
    #[test]
    fn openshift_ships_the_update_precheck_alert() {
        let files = render(Flavor::OpenShift).unwrap();
        let file = files
            .iter()
            .find(|f| f.name == "0000_50_platform-operators-manager_09_prometheusrule.yaml")
            .unwrap();
        let rule: serde_json::Value =
            serde_saphyr::from_str(file.content.split_once("---\n").unwrap().1).unwrap();
        assert_eq!(rule["kind"], "PrometheusRule");
        assert_eq!(rule["metadata"]["namespace"], NAMESPACE);
        let alert = &rule["spec"]["groups"][0]["rules"][0];
        assert_eq!(alert["alert"], UPDATE_PRECHECK_ALERT);
        assert_eq!(alert["labels"]["openShiftUpdatePrecheck"], "true");
        assert_eq!(alert["labels"]["severity"], "warning");
        assert_eq!(alert["labels"]["namespace"], NAMESPACE);
        assert!(
            alert["expr"]
                .as_str()
                .unwrap()
                .contains("pom_platformoperator_update_risk")
        );
    }

    #[test]
    fn kubernetes_flavor_has_no_openshift_bits() {
        let all: String = render(Flavor::Kubernetes)
            .unwrap()
            .into_iter()
            .map(|f| f.content)
            .collect();
        assert!(!all.contains("release.openshift.io"));
        assert!(!all.contains("workload.openshift.io"));
        assert!(!all.contains("ClusterOperator\n"));
        assert!(all.contains("readOnlyRootFilesystem: true"));
        // Kinds whose CRDs a plain cluster may lack, and a certificate nobody would issue.
        assert!(!all.contains("ServiceMonitor"));
        assert!(!all.contains("PrometheusRule"));
        assert!(!all.contains("metrics-tls-cert-file"));
        assert!(all.contains("--metrics-bind-address=127.0.0.1:8080"));
    }

    #[test]
    fn openshift_metrics_are_https_for_the_platform_prometheus_only() {
        use clap::Parser;
        let deployment = serde_json::to_value(deployment(Flavor::OpenShift)).unwrap();
        let pod = &deployment["spec"]["template"]["spec"];
        let args: Vec<&str> = pod["containers"][0]["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        // The flags parse into HTTPS metrics with the mounted certificate.
        let flags =
            crate::cli::Flags::try_parse_from(std::iter::once("pom-manager").chain(args)).unwrap();
        assert_eq!(
            flags.run_options().unwrap().metrics,
            crate::run::MetricsServing::Secure {
                address: "0.0.0.0:8443".parse().unwrap(),
                cert_file: "/var/run/secrets/serving-cert/tls.crt".into(),
                key_file: "/var/run/secrets/serving-cert/tls.key".into(),
            }
        );
        // The mounted Secret is the one the Service asks the service-ca operator for.
        let service = serde_json::to_value(metrics_service()).unwrap();
        assert_eq!(
            service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
            pod["volumes"][1]["secret"]["secretName"]
        );
        assert_eq!(
            pod["containers"][0]["volumeMounts"][1]["name"],
            pod["volumes"][1]["name"]
        );
        // The Service reaches the container port, and the ServiceMonitor names the Service's
        // port and DNS name.
        assert_eq!(service["spec"]["ports"][0]["targetPort"], "metrics");
        assert_eq!(pod["containers"][0]["ports"][1]["name"], "metrics");
        assert_eq!(
            service["spec"]["selector"],
            deployment["spec"]["selector"]["matchLabels"]
        );
        let monitor = service_monitor();
        let endpoint = &monitor["spec"]["endpoints"][0];
        assert_eq!(endpoint["port"], service["spec"]["ports"][0]["name"]);
        assert_eq!(endpoint["scheme"], "https");
        assert_eq!(
            endpoint["tlsConfig"]["serverName"],
            "platform-operators-manager-metrics.openshift-platform-operators.svc"
        );
        // The manager may review tokens; the platform Prometheus may read /metrics.
        let rules = serde_json::to_value(cluster_role_rules()).unwrap();
        for (group, resource) in [
            ("authentication.k8s.io", "tokenreviews"),
            ("authorization.k8s.io", "subjectaccessreviews"),
        ] {
            assert!(
                rules
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|r| r["apiGroups"][0] == group
                        && r["resources"][0] == resource
                        && r["verbs"] == serde_json::json!(["create"])),
                "{resource}"
            );
        }
        let rbac = metrics_rbac(Flavor::OpenShift);
        assert_eq!(
            rbac[0]["rules"][0]["nonResourceURLs"],
            serde_json::json!(["/metrics"])
        );
        assert_eq!(rbac[1]["roleRef"]["name"], METRICS_READER);
        assert_eq!(
            rbac[1]["subjects"][0],
            serde_json::json!({"kind": "ServiceAccount", "name": "prometheus-k8s", "namespace": "openshift-monitoring"})
        );
    }
}
