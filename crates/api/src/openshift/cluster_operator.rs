use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of POM's aggregated ClusterOperator (the phase-0 name, which payloads pre-create).
pub const AGGREGATED_CLUSTER_OPERATOR: &str = "platform-operators-aggregated";

/// `ClusterOperator` spec: always empty, but required (`spec: {}`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ClusterOperator",
    plural = "clusteroperators",
    shortname = "co",
    status = "ClusterOperatorStatus",
    derive = "PartialEq"
)]
pub struct ClusterOperatorSpec {}

/// What an operator reports to the CVO.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<ClusterOperatorStatusCondition>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub versions: Vec<OperandVersion>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub related_objects: Vec<ObjectReference>,
}

/// A ClusterOperator condition: not `metav1.Condition` (no observedGeneration; reason optional).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterOperatorStatusCondition {
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    pub last_transition_time: Time,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// `{name, version}` of the operator or an operand.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct OperandVersion {
    pub name: String,
    pub version: String,
}

/// An object related to the operator (`group` is `""` for core, `name` `""` for all).
#[derive(
    Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, JsonSchema,
)]
pub struct ObjectReference {
    pub group: String,
    pub resource: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}
