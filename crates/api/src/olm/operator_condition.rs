use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The condition type operators set to gate their own upgrades.
pub const UPGRADEABLE: &str = "Upgradeable";
/// The env var OLM v0 injects so operator-lib finds its OperatorCondition.
pub const OPERATOR_CONDITION_NAME_ENV: &str = "OPERATOR_CONDITION_NAME";

/// `OperatorCondition` spec: who may write what is described per field.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "operators.coreos.com",
    version = "v2",
    kind = "OperatorCondition",
    plural = "operatorconditions",
    namespaced,
    status = "OperatorConditionStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct OperatorConditionSpec {
    /// Written by POM (as OLM does): the operator's ServiceAccounts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub service_accounts: Vec<String>,
    /// Written by POM (as OLM does): the operator's Deployments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub deployments: Vec<String>,
    /// Written by the admin; authoritative over what the operator reports.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overrides: Vec<ConditionOverride>,
    /// Written by the operator (operator-lib v2).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// An admin override: a condition whose `lastTransitionTime` is optional.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConditionOverride {
    #[serde(rename = "type")]
    pub type_: String,
    pub status: String,
    pub reason: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_transition_time: Option<Time>,
}

/// Copied by POM (as OLM's OperatorCondition controller does) from `spec.conditions`, stamped
/// with `observedGeneration`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct OperatorConditionStatus {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}
