use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::ClusterOperatorStatusCondition;

/// The name of the ClusterVersion singleton.
pub const CLUSTER_VERSION_NAME: &str = "version";

/// `ClusterVersion` spec (only what POM and the test CVO simulator use).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ClusterVersion",
    plural = "clusterversions",
    status = "ClusterVersionStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionSpec {
    #[serde(rename = "clusterID")]
    pub cluster_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub desired_update: Option<Update>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<String>,
}

/// An update the admin asked for.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Update {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub force: Option<bool>,
}

/// What the CVO reports. `availableUpdates` is required but nullable upstream, so it is always
/// serialised (as `null` when absent).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterVersionStatus {
    pub desired: Release,
    /// Newest first; `Partial` entries are updates not yet fully applied.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub history: Vec<UpdateHistory>,
    #[serde(default)]
    pub observed_generation: i64,
    #[serde(default)]
    pub version_hash: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterOperatorStatusCondition>,
    #[serde(default)]
    pub available_updates: Option<Vec<Release>>,
}

/// A release: version and payload image.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct Release {
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub image: String,
}

/// One entry of `status.history`. `completionTime` is required but nullable upstream.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateHistory {
    /// `Completed` or `Partial`.
    pub state: String,
    pub started_time: Time,
    #[serde(default)]
    pub completion_time: Option<Time>,
    #[serde(default)]
    pub version: String,
    #[serde(default)]
    pub image: String,
    #[serde(default)]
    pub verified: bool,
}
