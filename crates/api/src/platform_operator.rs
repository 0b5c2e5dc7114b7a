//! `PlatformOperator`: an admin's request that a package be installed and kept in step with
//! the cluster (PRODUCT §3). Compatible with the phase-0 API (same group, kind and
//! `spec.package.name`), with the validation phase 0 lacked.

use std::collections::BTreeMap;

use sha2::{Digest as _, Sha256};

use k8s_openapi::api::core::v1::{
    Affinity, EnvFromSource, EnvVar, ResourceRequirements, Toleration, Volume, VolumeMount,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{DNS1123_LABEL, DURATION, KIND_WITH_GROUP, VERSION_RANGE};

/// What the admin asks for.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "platform.openshift.io",
    version = "v1alpha1",
    kind = "PlatformOperator",
    plural = "platformoperators",
    shortname = "pop",
    category = "platform",
    status = "PlatformOperatorStatus",
    derive = "PartialEq",
    doc = "A PlatformOperator: a package the admin wants installed and kept compatible with the cluster version.",
    printcolumn = r#"{"name":"Package","type":"string","jsonPath":".spec.package.name"}"#,
    printcolumn = r#"{"name":"Installed","type":"string","description":"Version of the installed bundle","jsonPath":".status.installedBundle.version"}"#,
    printcolumn = r#"{"name":"Pin","type":"string","description":"Version range in force and why","jsonPath":".status.pin.range"}"#,
    printcolumn = r#"{"name":"Status","type":"string","description":"The Installed condition","jsonPath":".status.conditions[?(@.type==\"Installed\")].status"}"#,
    printcolumn = r#"{"name":"Upgradeable","type":"string","jsonPath":".status.conditions[?(@.type==\"Upgradeable\")].status"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
// The field's own `self == oldSelf` runs only when both objects have it: adding or removing it
// would move the operator (issue 25 item 5). The namespace is also recorded in status.
#[x_kube(validation = kube::core::Rule::new("has(self.installNamespace) == has(oldSelf.installNamespace)").message("spec.installNamespace can neither be added nor removed once the PlatformOperator exists: delete and recreate it to move the operator"))]
#[x_kube(validation = kube::core::Rule::new("!has(self.adoptFrom) || (has(self.installNamespace) && self.installNamespace == self.adoptFrom.subscription.namespace)").message("spec.adoptFrom needs spec.installNamespace set to the Subscription's namespace: POM adopts the operator where OLM installed it"))]
#[x_kube(validation = kube::core::Rule::new("has(self.watchNamespace) == has(oldSelf.watchNamespace)").message("spec.watchNamespace can neither be added nor removed once the PlatformOperator exists: delete and recreate it to change what the operator watches"))]
pub struct PlatformOperatorSpec {
    /// The package to install and where to find it.
    pub package: PackageSpec,
    /// Replaces the `=X.Y.Z` pin in steady state (Masterminds v3 syntax). This is how an admin
    /// upgrades or downgrades by hand, including across a major version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = VERSION_RANGE))]
    pub steady_state_version_range: Option<String>,
    /// Namespace the operator is installed into; created and owned by POM. Default: the
    /// bundle's `operatorframework.io/suggested-namespace`, else the PlatformOperator's name.
    /// An `openshift-*` name is allowed when POM creates it for this PlatformOperator, never
    /// one of the platform's own namespaces.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = DNS1123_LABEL))]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("spec.installNamespace is immutable: delete and recreate the PlatformOperator to move it"))]
    #[x_kube(validation = crate::namespaces::not_platform_namespace_rule("installNamespace"))]
    pub install_namespace: Option<String>,
    /// What must hold before the next upgrade hop starts (§7).
    #[serde(default)]
    pub upgrade_gate: UpgradeGate,
    /// How long a move may take to settle before the PlatformOperator is Degraded.
    #[serde(default = "default_progress_deadline")]
    #[schemars(regex(pattern = DURATION))]
    pub progress_deadline: String,
    /// How long a move must have settled before the next hop starts and before the cluster
    /// version reports this operator at the new release (a Go duration such as `10m`, at most
    /// `24h`): time for what the operator does after it reports ready, such as a database
    /// migration. Default: no soak.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    #[x_kube(validation = kube::core::Rule::new("duration(self) <= duration('24h')").message("spec.soak may be at most 24h"))]
    pub soak: Option<String>,
    /// Objects of this operator's bundles that may break one rule of POM's content policy
    /// (docs/content-policy.md), each named by the admin: for operators that legitimately
    /// manage RBAC or ship a kind outside the allowlist. Rules that would reach outside the
    /// install namespace or bind platform identities cannot be lifted.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub content_exceptions: Vec<ContentExceptionSpec>,
    /// Bindings and Secrets this operator's bundles ship that POM does not apply, each named by
    /// the admin: for a bundle refused for an object nothing can allow (a binding to a foreign
    /// subject or to a role it does not ship, a ServiceAccount token Secret), the admin may
    /// install it without that object. Omitting one only ever grants less; the operator may
    /// lack what it was for.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub omit_objects: Vec<OmittedObject>,
    /// The dangerous power classes the admin trusts this operator's bundles with
    /// (docs/content-policy.md): a bundle whose ServiceAccounts would hold a class not consented
    /// to is refused, and an upgrade that adds one is held with the running bundle kept.
    #[serde(default, skip_serializing_if = "Consent::is_empty")]
    pub consent: Consent,
    /// The namespace the operator watches: the install namespace for OwnNamespace, another
    /// namespace for SingleNamespace. Default: AllNamespaces when the bundle supports it, else
    /// OwnNamespace. The namespace must exist; POM creates Roles there for the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 63), regex(pattern = DNS1123_LABEL))]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("spec.watchNamespace is immutable: delete and recreate the PlatformOperator to change what it watches"))]
    #[x_kube(validation = crate::namespaces::not_platform_namespace_rule("watchNamespace"))]
    pub watch_namespace: Option<String>,
    // Approval and pause (issue 23 item 5): the admin's hand on when POM writes.
    /// Whether each move (the first install included) waits for the admin's approval of its
    /// bundle, as OLM v0's `Subscription.spec.installPlanApproval`: `Automatic` (default) or
    /// `Manual`.
    #[serde(default)]
    pub upgrade_approval: UpgradeApproval,
    /// What POM does when the admin requests a minor cluster update (ClusterVersion
    /// `spec.desiredUpdate`) that this operator's bundle cannot run on (its
    /// `maxOpenShiftVersion`), while catalog hops lead to a bundle that runs on both versions:
    /// `Offer` (default) shows the hops and waits until `spec.approvedBundle` names the first;
    /// `Take` takes them, one settled hop at a time, while the cluster stays where it is.
    #[serde(default)]
    pub pre_update_hops: PreUpdateHops,
    /// The bundle the admin approves under `upgradeApproval: Manual`: a move to exactly this
    /// bundle may start, a move to any other waits. `pomctl approve` writes the bundle the
    /// PlatformOperator waits for (`status.desiredBundle`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub approved_bundle: Option<String>,
    /// Stops every write POM makes for this PlatformOperator but its status: no install, move,
    /// drift repair or prune, and no Upgradeable=True while something is installed. Deleting
    /// the PlatformOperator still removes what it installed.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub paused: bool,
    /// How the operator's Deployments are configured, as OLM's Subscription `spec.config`:
    /// environment, volumes, scheduling, resources and annotations applied to every Deployment
    /// of the installed bundle. Changing it rolls the Deployments out again: the operator
    /// restarts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<OperatorConfig>,
    /// The OLM v0 installation this PlatformOperator takes over (issue 36): POM renders the
    /// bundle OLM installed, proves the running objects are what it would apply (the pod
    /// templates equal, so nothing restarts), then takes them over and removes OLM's owner
    /// references and labels from them. Anything it cannot prove equal stops the adoption,
    /// changing nothing. Immutable; `pomctl adopt --subscription NS/NAME` writes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("spec.adoptFrom is immutable: delete and recreate the PlatformOperator to adopt another installation"))]
    pub adopt_from: Option<AdoptFrom>,
}

/// The OLM v0 installation a PlatformOperator adopts (`spec.adoptFrom`).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct AdoptFrom {
    /// The Subscription whose installed ClusterServiceVersion is adopted.
    pub subscription: SubscriptionRef,
}

/// A Subscription (`operators.coreos.com/v1alpha1`) by namespace and name.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionRef {
    /// The Subscription's namespace: the install namespace OLM v0 installed into, which
    /// `spec.installNamespace` must name.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL))]
    pub namespace: String,
    /// The Subscription's name (`oc get subscriptions -n <namespace>`).
    #[schemars(length(min = 1, max = 253), regex(pattern = crate::validation::DNS1123_SUBDOMAIN))]
    pub name: String,
}

/// Hops before a requested cluster update (`spec.preUpdateHops`, issue 35 item 1).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum PreUpdateHops {
    /// The hops are shown (status, `pomctl plan`) and the first waits for the admin's
    /// approval (`pomctl approve`): the safe default, nothing moves without the admin.
    #[default]
    Offer,
    /// The hops are taken one settled hop at a time, each under every gate a move has.
    Take,
}

impl PreUpdateHops {
    /// The API spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Offer => "Offer",
            Self::Take => "Take",
        }
    }
}

/// Whether moves wait for the admin's approval (`spec.upgradeApproval`).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpgradeApproval {
    /// Every move POM chooses starts when its gates allow.
    #[default]
    Automatic,
    /// Every move (the first install included) also waits until `spec.approvedBundle` names
    /// its bundle.
    Manual,
}

impl UpgradeApproval {
    /// The API spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Automatic => "Automatic",
            Self::Manual => "Manual",
        }
    }
}

/// Most `spec.config.env` entries.
pub const MAX_CONFIG_ENV: usize = 64;
/// Most `spec.config.envFrom` entries.
pub const MAX_CONFIG_ENV_FROM: usize = 16;
/// Most `spec.config.volumes` entries.
pub const MAX_CONFIG_VOLUMES: usize = 32;
/// Most `spec.config.volumeMounts` entries.
pub const MAX_CONFIG_VOLUME_MOUNTS: usize = 32;
/// Most `spec.config.tolerations` entries.
pub const MAX_CONFIG_TOLERATIONS: usize = 32;
/// Most `spec.config.nodeSelector` labels.
pub const MAX_CONFIG_NODE_SELECTOR: usize = 32;
/// Most `spec.config.annotations` entries.
pub const MAX_CONFIG_ANNOTATIONS: usize = 64;

/// The admin's configuration of the operator's Deployments: OLM v0's `SubscriptionConfig`,
/// applied the way OLM applies it to every Deployment of the bundle's ClusterServiceVersion
/// (its `selector` is left out: OLM never reads it). POM also injects the cluster-wide proxy
/// (`HTTP_PROXY`, `HTTPS_PROXY`, `NO_PROXY` from the cluster's Proxy status) into every
/// container, as OLM does, unless `env` names one of the three.
///
/// Any change rolls the operator's Deployments out again (its pods restart).
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConfig {
    /// Environment variables set in every container (not init containers). A variable the
    /// bundle already sets is replaced; the others are added. Naming any of `HTTP_PROXY`,
    /// `HTTPS_PROXY` or `NO_PROXY` replaces the cluster-wide proxy for this operator: none of
    /// the three is then taken from the cluster, and one given an empty value is set empty,
    /// which turns that proxy off. `OPERATOR_CONDITION_NAME`, when POM sets it, keeps POM's
    /// value (as in OLM).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONFIG_ENV))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub env: Vec<EnvVar>,
    /// Sources of environment variables (ConfigMaps, Secrets) added to every container (not
    /// init containers), after the bundle's own; a source the container already lists is not
    /// added twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONFIG_ENV_FROM))]
    pub env_from: Vec<EnvFromSource>,
    /// Volumes added to every Deployment's pods; a volume of the same name the bundle defines
    /// is replaced.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONFIG_VOLUMES))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub volumes: Vec<Volume>,
    /// Volume mounts added to every container (not init containers); a mount of the same
    /// volume name the container already has is replaced. A mount names a volume of `volumes`
    /// or one every Deployment of the bundle already defines (as in OLM): naming a volume a
    /// Deployment lacks makes the cluster refuse that Deployment, and the install fails with
    /// the cluster's message.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONFIG_VOLUME_MOUNTS))]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["name".into()]))]
    pub volume_mounts: Vec<VolumeMount>,
    /// Tolerations added to every Deployment's pods; one the bundle already has is not added
    /// twice.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = MAX_CONFIG_TOLERATIONS))]
    pub tolerations: Vec<Toleration>,
    /// Compute resources of every container (not init containers), replacing the bundle's
    /// requests and limits entirely.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceRequirements>,
    /// Node labels the operator's pods must run on, replacing the bundle's node selector
    /// entirely; `{}` removes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxProperties" = MAX_CONFIG_NODE_SELECTOR))]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Scheduling constraints of the operator's pods. Each of `nodeAffinity`, `podAffinity`
    /// and `podAntiAffinity` that is set replaces the bundle's, and `{}` removes it; one not
    /// set keeps the bundle's. `affinity: {}` removes all three.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub affinity: Option<Affinity>,
    /// Annotations added to every Deployment and its pods. An annotation the bundle (or POM)
    /// already sets keeps its value.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    #[schemars(extend("maxProperties" = MAX_CONFIG_ANNOTATIONS))]
    pub annotations: BTreeMap<String, String>,
}

/// The admin's consent to the power classes that let an operator reach past its namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Consent {
    /// Roles that let the operator give itself anything: escalate, bind, impersonate, tokens of
    /// other accounts, admission and CRD control, nodes/proxy, exec in every pod.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cluster_admin_equivalent: bool,
    /// Pods beyond the baseline Pod Security level (privileged, host namespaces, hostPath), or
    /// privileged SCCs; the install namespace is then labelled to enforce `privileged`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub privileged_workloads: bool,
    /// Writes to the platform's configuration (config, machine-config, operator groups).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub platform_config: bool,
    /// Admission webhooks over kinds that are not the bundle's own (pods, other operators'
    /// kinds), each named with the digest of what its rules match there, as the refusal
    /// prints it: a webhook a later bundle widens (or changes) asks again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 32))]
    pub webhooks: Vec<WebhookConsentSpec>,
}

impl Consent {
    /// No class consented to.
    pub fn is_empty(&self) -> bool {
        !(self.cluster_admin_equivalent || self.privileged_workloads || self.platform_config)
            && self.webhooks.is_empty()
    }
}

/// The admin's consent to one admission webhook, bound to what it covers.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct WebhookConsentSpec {
    /// The webhook configuration's name (the ClusterServiceVersion's `generateName`).
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
    /// `sha256:<64 hex>`: the digest of the (group, resource, operation) triples its rules
    /// match outside the bundle's own kinds, as POM's refusal and `pomctl render
    /// --permissions` print it.
    #[schemars(regex(pattern = r"^sha256:[0-9a-f]{64}$"))]
    pub covers: String,
}

/// One content-policy exception: `rule` does not apply to the object of `kind` named `name`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContentExceptionSpec {
    pub rule: ExceptableContentRule,
    /// The object's kind with its API group, as POM's refusals name it: `Kind.group` (e.g.
    /// `ValidatingWebhookConfiguration.admissionregistration.k8s.io`,
    /// `Service.ecs.services.k8s.aws`), or `Kind` alone for the core group (`Service`, `Pod`).
    /// It matches only that group's kind: `Service` never excuses a custom resource of kind
    /// Service.
    #[schemars(length(min = 1, max = 317), regex(pattern = KIND_WITH_GROUP))]
    pub kind: String,
    /// The object's `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// An object of the bundle POM does not apply: a RoleBinding, ClusterRoleBinding or Secret the
/// bundle ships (never one POM generates from the ClusterServiceVersion), by `metadata.name`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct OmittedObject {
    pub kind: OmittableKind,
    /// The object's `metadata.name`.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The kinds an admin may omit: only objects whose omission never grants anything.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum OmittableKind {
    /// A RoleBinding (`rbac.authorization.k8s.io`) the bundle ships.
    RoleBinding,
    /// A ClusterRoleBinding (`rbac.authorization.k8s.io`) the bundle ships.
    ClusterRoleBinding,
    /// A core Secret the bundle ships, such as a ServiceAccount token Secret POM refuses.
    Secret,
}

impl OmittableKind {
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RoleBinding => "RoleBinding",
            Self::ClusterRoleBinding => "ClusterRoleBinding",
            Self::Secret => "Secret",
        }
    }

    /// The kind's API group (`""` for the core group).
    #[must_use]
    pub fn group(self) -> &'static str {
        match self {
            Self::RoleBinding | Self::ClusterRoleBinding => "rbac.authorization.k8s.io",
            Self::Secret => "",
        }
    }
}

/// The content-policy rules an admin may lift for one named object.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum ExceptableContentRule {
    /// A kind outside the bundle format's allowlist.
    KindNotAllowed,
    /// A Service of type LoadBalancer.
    LoadBalancerService,
    /// Deprecated, lifts nothing: a webhook over kinds not the bundle's own is a power,
    /// consented with `spec.consent.webhooks` (bound to what it covers).
    WebhookRuleOutsideBundle,
    /// Deprecated, lifts nothing: bindings to roles a bundle does not ship are always refused;
    /// a role that grants everything needs `spec.consent.clusterAdminEquivalent`.
    PrivilegedRoleBinding,
    /// Deprecated, lifts nothing: use `spec.consent.clusterAdminEquivalent`.
    EscalatingRole,
    /// Deprecated, lifts nothing: use `spec.consent.clusterAdminEquivalent`.
    WildcardRole,
    /// Deprecated, lifts nothing: use `spec.consent.clusterAdminEquivalent`.
    AggregatingRole,
}

fn default_progress_deadline() -> String {
    "10m".to_owned()
}

/// The package part of the spec.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
pub struct PackageSpec {
    /// Package name in the catalog (DNS-1123 label, at most 56 characters, immutable).
    #[schemars(length(min = 1, max = 56), regex(pattern = DNS1123_LABEL))]
    #[x_kube(validation = kube::core::Rule::new("self == oldSelf").message("spec.package.name is immutable: create a new PlatformOperator for another package"))]
    pub name: String,
    /// Channel to follow (case-sensitive). Default: the package's default channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub channel: Option<String>,
    /// Name of the Catalog to use. Default: every Catalog, by priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 253), regex(pattern = crate::validation::DNS1123_SUBDOMAIN))]
    pub catalog: Option<String>,
    /// An admin constraint ANDed with the pin at all times (Masterminds v3 syntax).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = VERSION_RANGE))]
    pub version_range: Option<String>,
}

/// What gates the next upgrade hop (§7).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default, JsonSchema)]
pub enum UpgradeGate {
    /// `Rollout`, plus `OperatorCondition` once the operator has ever reported one.
    #[default]
    Auto,
    /// The new bundle's objects are applied and its Deployments rolled out.
    Rollout,
    /// `Rollout`, plus the bundle's OperatorCondition says `Upgradeable=True` for its current
    /// generation.
    OperatorCondition,
}

/// What POM observed and did.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct PlatformOperatorStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Installed, Progressing, Degraded, Upgradeable (§8.1).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The bundle currently installed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub installed_bundle: Option<InstalledBundle>,
    /// The bundle POM is moving to, while a move is pending.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_bundle: Option<BundleRef>,
    /// The version range in force and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pin: Option<PinStatus>,
    /// The settle state of the last move (§7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub active_hop: Option<ActiveHop>,
    /// `olm.maxOpenShiftVersion` of the installed bundle, when it declares one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_open_shift_version: Option<String>,
    /// Every object POM applied for each bundle it still owns objects of: the installed
    /// bundle, and during a move also the one moved to (recorded before its first object is
    /// written) until the move settles and what the old bundle alone had is pruned. Prune and
    /// cleanup delete exactly these objects (CRDs never).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub inventory: Vec<BundleInventory>,
    /// The namespace the operator was installed into, fixed at its first install (with the
    /// intent of that move): `spec.installNamespace`, else the bundle's suggested namespace,
    /// else the PlatformOperator's name. Later changes of the spec do not move the operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_namespace: Option<String>,
    /// What the installed bundle's ServiceAccounts can do, by power class (§6): how many
    /// grants fall in each class and a few of them (`pomctl render --permissions` lists all).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub powers: Vec<PowerSummary>,
    /// The configuration of the operator's Deployments (`spec.config` and the cluster proxy)
    /// that runs: recorded once an apply of it succeeded (a change in flight is recorded by its
    /// digest in `activeHop.config` before its first write, so a configuration the API server
    /// refuses is never taken for what runs). Drift repair re-applies this one: a change of
    /// `spec.config` or of the cluster proxy restarts the operator, so it reaches the
    /// Deployments only as a move of its own (issue 23 item 4, issue 34 item 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_config: Option<AppliedConfig>,
}

/// A configuration of the operator's Deployments, as applied.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AppliedConfig {
    /// `sha256:<hex>` of the configuration and the proxy: the value of the admin's
    /// `platform.openshift.io/config-change-override` annotation that applies it although the
    /// operator says `Upgradeable=False`.
    #[schemars(length(max = 71))]
    pub digest: String,
    /// `spec.config` as applied (validated as `spec.config` when the admin wrote it; its schema
    /// is not repeated here, which would double the CRD's size).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "recorded_object")]
    pub config: Option<OperatorConfig>,
    /// The cluster proxy as injected (absent: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy: Option<ClusterProxyEnv>,
}

/// The schema of an object POM records as it was validated elsewhere: any object.
fn recorded_object(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true,
    })
}

impl AppliedConfig {
    /// The configuration `config` with the cluster proxy `proxy`, and its digest. An empty
    /// configuration (`config: {}`) and an empty proxy are recorded as none: they configure
    /// nothing, so they are the same configuration as none.
    #[must_use]
    pub fn of(config: Option<&OperatorConfig>, proxy: Option<&ClusterProxyEnv>) -> Self {
        let config = config.filter(|c| **c != OperatorConfig::default()).cloned();
        let proxy = proxy.filter(|p| !p.is_empty()).cloned();
        // Serialising plain data cannot fail; an empty text would only make every digest the
        // same, never a wrong configuration applied (what is applied is `config`, not this).
        let canonical = serde_json::to_vec(&serde_json::json!({"config": config, "proxy": proxy}))
            .unwrap_or_default();
        Self {
            digest: format!("sha256:{}", hex::encode(Sha256::digest(&canonical))),
            config,
            proxy,
        }
    }

    /// No configuration and no proxy: what a PlatformOperator recorded before POM configured
    /// Deployments runs with.
    #[must_use]
    pub fn none() -> Self {
        Self::of(None, None)
    }

    /// Whether it configures nothing.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.config.is_none() && self.proxy.is_none()
    }
}

/// The cluster-wide proxy injected into operators (the `Proxy` `cluster`'s status).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterProxyEnv {
    /// `status.httpProxy`, injected as `HTTP_PROXY`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub http_proxy: String,
    /// `status.httpsProxy`, injected as `HTTPS_PROXY`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 4096))]
    pub https_proxy: String,
    /// `status.noProxy`, injected as `NO_PROXY`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    #[schemars(length(max = 65536))]
    pub no_proxy: String,
}

impl ClusterProxyEnv {
    /// True when nothing would be injected.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.http_proxy.is_empty() && self.https_proxy.is_empty() && self.no_proxy.is_empty()
    }
}

/// One power class the installed bundle holds.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PowerSummary {
    /// `ClusterAdminEquivalent`, `PrivilegedWorkloads`, `PlatformConfig` or
    /// `SecretsClusterWide`.
    pub class: String,
    /// How many grants or pod templates put the bundle in it.
    pub count: u32,
    /// The first few, as `Kind "name" what it grants` (at most 3, each cut at 256 bytes).
    #[serde(default)]
    pub examples: Vec<String>,
}

/// The objects POM applied for one bundle.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BundleInventory {
    /// The bundle's name.
    pub bundle: String,
    /// Its objects, sorted.
    #[serde(default)]
    pub objects: Vec<InventoryObject>,
}

/// One applied object, by identity.
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema,
)]
#[serde(rename_all = "camelCase")]
pub struct InventoryObject {
    /// `group/version`, or `version` for the core group.
    pub api_version: String,
    /// The object's kind, e.g. `Deployment`.
    pub kind: String,
    /// Absent for cluster-scoped objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// The object's `metadata.name`.
    pub name: String,
}

impl InventoryObject {
    /// The API group (`""` for the core group).
    #[must_use]
    pub fn group(&self) -> &str {
        self.api_version
            .rsplit_once('/')
            .map_or("", |(group, _)| group)
    }

    /// `Kind namespace/name` or `Kind name`, for messages.
    #[must_use]
    pub fn describe(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// A bundle that is installed.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct InstalledBundle {
    /// The bundle's name in the catalog (`olm.bundle` name, usually `<package>.v<version>`).
    pub name: String,
    /// The bundle's version (`olm.package` version, semver).
    pub version: String,
    /// Bundle image (by digest); empty when the catalog carried the objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `sha256:<hex>` of the manifests applied, when the catalog carried them
    /// (`olm.bundle.object`): drift repair re-applies exactly these, never what a catalog
    /// carries under the bundle's name now.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub objects_digest: Option<String>,
}

/// A bundle by name and version.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct BundleRef {
    /// The bundle's name in the catalog (`olm.bundle` name, usually `<package>.v<version>`).
    pub name: String,
    /// The bundle's version (`olm.package` version, semver).
    pub version: String,
}

/// The pin in force.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct PinStatus {
    /// Always printed with an explicit operator, e.g. `=1.2.3` or `>=1.2.3 <1.3.0-0`.
    pub range: String,
    /// Why this pin is in force.
    pub reason: PinReason,
    /// The OpenShift version the cluster was heading to (`status.desired.version`) when this
    /// pin and the PO's `Upgradeable` verdict were judged. With the reason (the phase), it
    /// names the cluster state they hold for: the aggregated ClusterOperator trusts them for
    /// no other (a manager that missed a whole update does not report a verdict judged for the
    /// version before it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_version: Option<String>,
}

/// Why a pin is in force (§4.2); the cluster phase it was computed for follows from it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum PinReason {
    /// Nothing installed yet: the highest allowed bundle is installed.
    #[default]
    Install,
    /// Cluster steady: stay on the installed version.
    Steady,
    /// Cluster patch update: move within the installed minor.
    PatchUpgrade,
    /// Cluster minor update: move within the installed major.
    MinorUpgrade,
    /// Cluster rollback: stay, or pivot down when the installed bundle cannot run on the target.
    Rollback,
    /// Cluster steady and the admin set `spec.steadyStateVersionRange`.
    Override,
    /// No cluster pin at all (offline resolution without a cluster version, as OLM v1).
    Unpinned,
}

impl PinReason {
    /// The API spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Install => "Install",
            Self::Steady => "Steady",
            Self::PatchUpgrade => "PatchUpgrade",
            Self::MinorUpgrade => "MinorUpgrade",
            Self::Rollback => "Rollback",
            Self::Override => "Override",
            Self::Unpinned => "Unpinned",
        }
    }
}

impl std::fmt::Display for PinReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The last move (install or hop) and whether it has settled.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ActiveHop {
    /// The bundle moved from; absent for a first install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The bundle moved to.
    pub to: String,
    /// When the move started; the progress deadline counts from here.
    pub started_at: Time,
    /// True once the move settled (§7); the next hop may start only then.
    pub settled: bool,
    /// What the move is waiting for while it has not settled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waiting_for: Option<String>,
    /// The bundle image the move applies, by digest, recorded with its intent: a move resumed
    /// after a crash applies exactly this image even if the catalog's tag has moved since.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// How many times applying this move failed in a row (a policy engine or a quota refusing
    /// its objects): retries back off with it, and Degraded says it.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failed_attempts: u32,
    /// When the move was first seen rolled out (every wait over but the operator's report).
    /// Under `upgradeGate: Auto`, an operator that has never reported an OperatorCondition has
    /// the manager's report window from here to start reporting before the move settles: a
    /// version that adds `Upgradeable` reporting (seed 001's 7.10.0) is heard before the next
    /// hop, and one that never reports is not held forever.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rolled_out_at: Option<Time>,
    /// Present when the move is a configuration change of the bundle that runs (`from` and
    /// `to` then name it): the digest of the configuration it applies
    /// (`status.appliedConfig.digest`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<String>,
    /// True while this configuration change has not applied and what runs
    /// (`status.appliedConfig`) is a move that had not settled when the change replaced it (a
    /// first install, a hop of the bundle, or a configuration change that applied): the next
    /// hop waits for what runs, which a refused change does not settle (issue 34: the hold is
    /// judged by what runs, not by which change is recorded). Cleared once the change applies.
    #[serde(default, skip_serializing_if = "is_false")]
    pub applied_unsettled: bool,
    /// When the move settled (absent for a move that settled before POM recorded it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settled_at: Option<Time>,
    /// While `spec.soak` holds the next hop and the release's version report after this move
    /// settled: when that ends (`settledAt` + `spec.soak`, later when this manager has not
    /// watched the whole soak itself: at most 10 minutes, for clock skew between replicas).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub soak_until: Option<Time>,
    /// Recorded with the intent of a move that replaces an unsettled move of the bundle that
    /// runs (the replacement of a first install, `abandon:`'s way back, `skip:`): that move.
    /// If this one is dropped without ever applying (the cluster refused it, it no longer
    /// qualifies), what runs is recorded again as it was, so that its progress deadline is not
    /// restarted and its ways out are named again. Cleared once this move applies.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<ReplacedMove>,
}

/// The unsettled move of the bundle that runs, as a move recorded over it found it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ReplacedMove {
    /// The bundle it moved from; absent for a first install.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// When it started.
    pub started_at: Time,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_false(b: &bool) -> bool {
    !*b
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::CustomResourceExt;

    /// What an admin writes and the API server stores: the empty forms that carry meaning
    /// (`value: ""` turns a proxy variable off, `nodeSelector: {}` and an empty affinity part
    /// remove the bundle's) survive a read and a write by POM.
    #[test]
    fn operator_config_keeps_meaningful_empty_values_through_serde() {
        let stored = serde_json::json!({
            "package": {"name": "foo"},
            "config": {
                "env": [
                    {"name": "HTTP_PROXY", "value": ""},
                    {"name": "FOO", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}
                ],
                "envFrom": [{"configMapRef": {"name": "cm"}}],
                "volumes": [{"name": "extra", "configMap": {"name": "cm"}}],
                "volumeMounts": [{"name": "extra", "mountPath": "/etc/extra"}],
                "tolerations": [{"key": "infra", "operator": "Exists", "effect": "NoSchedule"}],
                "resources": {"requests": {"cpu": "100m", "memory": 1}, "limits": {"memory": "1Gi"}},
                "nodeSelector": {},
                "affinity": {"podAntiAffinity": {}},
                "annotations": {"a": "b"}
            }
        });
        let spec: PlatformOperatorSpec = match serde_json::from_value(stored.clone()) {
            Ok(spec) => spec,
            Err(err) => panic!("stored spec does not read: {err}"),
        };
        let config = spec.config.clone().unwrap_or_default();
        assert_eq!(config.node_selector, Some(BTreeMap::new()));
        assert_eq!(config.env[0].value.as_deref(), Some(""));
        let written = match serde_json::to_value(&spec) {
            Ok(value) => value,
            Err(err) => panic!("spec does not write: {err}"),
        };
        let mut expected = stored["config"].clone();
        // A number quantity is read as its string form.
        expected["resources"]["requests"]["memory"] = serde_json::json!("1");
        assert_eq!(written["config"], expected);
    }

    /// The digest names the configuration and the proxy, and nothing else: an empty
    /// configuration is none, and any change of either gives another digest.
    #[test]
    fn applied_config_digest_changes_with_the_config_or_the_proxy_only() {
        let none = AppliedConfig::none();
        assert!(none.is_empty());
        assert!(none.digest.starts_with("sha256:") && none.digest.len() == 71);
        assert_eq!(
            AppliedConfig::of(Some(&OperatorConfig::default()), None),
            none
        );
        assert_eq!(
            AppliedConfig::of(None, Some(&ClusterProxyEnv::default())),
            none
        );
        let env = OperatorConfig {
            env: vec![EnvVar {
                name: "A".into(),
                value: Some("1".into()),
                value_from: None,
            }],
            ..OperatorConfig::default()
        };
        let proxy = ClusterProxyEnv {
            http_proxy: "http://proxy:3128".into(),
            ..ClusterProxyEnv::default()
        };
        let digests = [
            none.digest.clone(),
            AppliedConfig::of(Some(&env), None).digest,
            AppliedConfig::of(None, Some(&proxy)).digest,
            AppliedConfig::of(Some(&env), Some(&proxy)).digest,
        ];
        let unique: std::collections::BTreeSet<_> = digests.iter().collect();
        assert_eq!(unique.len(), digests.len(), "{digests:?}");
        assert_eq!(
            AppliedConfig::of(Some(&env), Some(&proxy)),
            AppliedConfig::of(Some(&env), Some(&proxy))
        );
    }

    #[test]
    fn config_absent_is_not_written() {
        let spec = PlatformOperatorSpec {
            package: PackageSpec {
                name: "foo".into(),
                ..PackageSpec::default()
            },
            steady_state_version_range: None,
            install_namespace: None,
            upgrade_gate: UpgradeGate::Auto,
            progress_deadline: default_progress_deadline(),
            soak: None,
            content_exceptions: Vec::new(),
            omit_objects: Vec::new(),
            consent: Consent::default(),
            watch_namespace: None,
            upgrade_approval: UpgradeApproval::Automatic,
            pre_update_hops: PreUpdateHops::Offer,
            approved_bundle: None,
            paused: false,
            config: None,
            adopt_from: None,
        };
        let written = serde_json::to_value(&spec).unwrap_or_default();
        assert!(written.get("config").is_none(), "{written}");
        assert!(written.get("adoptFrom").is_none(), "{written}");
    }

    /// Names are unique by list-map semantics (the API server refuses a duplicate key, with no
    /// CEL cost), and every list is bounded.
    #[test]
    fn config_schema_bounds_lists_and_keys_named_lists_by_name() {
        let crd = match serde_json::to_value(PlatformOperator::crd()) {
            Ok(crd) => crd,
            Err(err) => panic!("CRD does not serialise: {err}"),
        };
        let config = &crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
            ["properties"]["config"]["properties"];
        for (field, max_items, keyed) in [
            ("env", MAX_CONFIG_ENV, true),
            ("volumes", MAX_CONFIG_VOLUMES, true),
            ("volumeMounts", MAX_CONFIG_VOLUME_MOUNTS, true),
            ("envFrom", MAX_CONFIG_ENV_FROM, false),
            ("tolerations", MAX_CONFIG_TOLERATIONS, false),
        ] {
            assert_eq!(config[field]["maxItems"], max_items, "{field}");
            if keyed {
                assert_eq!(config[field]["x-kubernetes-list-type"], "map", "{field}");
                assert_eq!(
                    config[field]["x-kubernetes-list-map-keys"],
                    serde_json::json!(["name"]),
                    "{field}"
                );
            }
            assert!(
                config[field].get("x-kubernetes-validations").is_none(),
                "{field}: no CEL cost"
            );
        }
        assert_eq!(
            config["annotations"]["maxProperties"],
            MAX_CONFIG_ANNOTATIONS
        );
        assert_eq!(
            config["nodeSelector"]["maxProperties"],
            MAX_CONFIG_NODE_SELECTOR
        );
        assert!(config.get("selector").is_none());
    }
}
