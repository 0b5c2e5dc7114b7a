//! Typed views of what OLM v0 leaves on a cluster for an installed operator: its
//! `Subscription`, the `ClusterServiceVersion` it installed and the namespace's
//! `OperatorGroup` (issue 36). POM only reads them, for `pomctl adopt`: each view carries the
//! fields adoption judges, every one optional or defaulted so that any object OLM v0 (or an
//! admin) wrote deserialises; the rest of the object is ignored. Their `crd()` is never
//! installed: tests install operator-framework's published CRDs.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The label OLM v0 puts on the copies of a CSV it writes into every target namespace: a copy
/// is not an install.
pub const COPIED_FROM_LABEL: &str = "olm.copiedFrom";
/// The CSV phase of an install that runs as OLM intended.
pub const CSV_SUCCEEDED: &str = "Succeeded";

/// `operators.coreos.com/v1alpha1` Subscription: a package OLM v0 keeps installed.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "Subscription",
    plural = "subscriptions",
    namespaced,
    status = "SubscriptionStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionSpec {
    /// The package (OLM names the field `name`).
    #[serde(default)]
    pub name: String,
    /// The channel followed; `None` is the package's default channel.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
    /// The CatalogSource it installs from (not a POM Catalog: shown, never read).
    #[serde(default)]
    pub source: String,
    #[serde(default)]
    pub source_namespace: String,
    /// `Automatic` or `Manual` (OLM's default is Automatic).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install_plan_approval: Option<String>,
    /// `SubscriptionConfig`, kept as written: the adoption maps it (bounded) onto
    /// `spec.config`, and refuses what does not map.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<serde_json::Value>,
}

/// What OLM v0 reports on a Subscription.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SubscriptionStatus {
    /// The CSV installed now (empty until the first install finished).
    #[serde(
        rename = "installedCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub installed_csv: Option<String>,
    /// The CSV OLM moves to (equal to `installedCSV` when nothing is pending).
    #[serde(
        rename = "currentCSV",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub current_csv: Option<String>,
    /// `AtLatestKnown`, `UpgradePending`, `UpgradeAvailable`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
}

/// `operators.coreos.com/v1alpha1` ClusterServiceVersion: one installed bundle.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1alpha1",
    kind = "ClusterServiceVersion",
    plural = "clusterserviceversions",
    shortname = "csv",
    namespaced,
    status = "CsvStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct CsvSpec {
    /// The bundle's version (semver text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub install_modes: Vec<CsvInstallMode>,
    /// Aggregated APIs the operator serves (POM refuses them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apiservicedefinitions: Option<CsvApiServices>,
    /// CRDs the operator owns and requires (a required one is a dependency).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub customresourcedefinitions: Option<CsvCrds>,
    /// Webhooks OLM rendered for it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub webhookdefinitions: Vec<CsvWebhook>,
}

/// One `spec.installModes` entry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CsvInstallMode {
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub supported: bool,
}

/// `spec.apiservicedefinitions`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CsvApiServices {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CsvApiDescription>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CsvApiDescription>,
}

/// `spec.customresourcedefinitions`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CsvCrds {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub owned: Vec<CsvApiDescription>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub required: Vec<CsvApiDescription>,
}

/// An API the CSV owns or requires, by the fields that name it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct CsvApiDescription {
    #[serde(default)]
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub kind: String,
}

/// One `spec.webhookdefinitions` entry, by the fields that name it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CsvWebhook {
    /// `ValidatingAdmissionWebhook`, `MutatingAdmissionWebhook` or `ConversionWebhook`.
    #[serde(rename = "type", default)]
    pub type_: String,
    #[serde(default)]
    pub generate_name: String,
}

/// What OLM v0 reports on a CSV.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct CsvStatus {
    /// `Succeeded` once installed and healthy; `Failed`, `Installing`, ... otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `operators.coreos.com/v1` OperatorGroup: which namespaces the operators of its namespace
/// watch.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v1",
    kind = "OperatorGroup",
    plural = "operatorgroups",
    shortname = "og",
    namespaced,
    status = "OperatorGroupStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorGroupSpec {
    /// Explicit targets; empty with no selector means every namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub target_namespaces: Vec<String>,
    /// Targets by label (OLM resolves them into `status.namespaces`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub selector: Option<LabelSelector>,
    /// The ServiceAccount OLM installs as (a scoped OperatorGroup).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub service_account_name: Option<String>,
}

/// What OLM v0 resolved for an OperatorGroup.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorGroupStatus {
    /// The target namespaces OLM resolved; `[""]` is every namespace.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub namespaces: Vec<String>,
}
