//! OperatorConditions, as OLM v0 runs them (§7), so operators built on operator-lib work
//! unchanged: POM creates one per installed CSV (named after it, listing its Deployments and
//! ServiceAccounts), copies what the operator writes in `spec.conditions` to `status.conditions`
//! stamped with `observedGeneration` (the job of OLM's OperatorCondition controller; it writes
//! the same values, so neither fights the other), and reads the `Upgradeable` gate from it.

use kube::api::{Api, Patch, PatchParams};
use pom_api::labels;
use pom_api::olm::{OperatorCondition, UPGRADEABLE};
use serde_json::json;

use super::objects::label_value;
use crate::context::OPERATOR_CONDITION_FIELD_MANAGER;
use crate::error::Error;

/// What an OperatorCondition says about upgrading away from its CSV.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gate {
    /// The operator has written at least one condition (so under `Auto` it must keep reporting).
    pub reported: bool,
    /// `Upgradeable` for the current generation: the admin override if set, else the operator's
    /// condition. `None`: absent, stale or Unknown (not settled, never "upgradeable").
    pub upgradeable: Option<bool>,
    /// The message to show (the operator's or the override's).
    pub message: String,
}

impl Gate {
    fn from_object(oc: &OperatorCondition) -> Self {
        let generation = oc.metadata.generation;
        let reported = !oc.spec.conditions.is_empty();
        if let Some(o) = oc.spec.overrides.iter().find(|o| o.type_ == UPGRADEABLE) {
            return Self {
                reported,
                upgradeable: bool_status(&o.status),
                message: format!("admin override: {}", o.message),
            };
        }
        let status_condition = oc
            .status
            .as_ref()
            .and_then(|s| s.conditions.iter().find(|c| c.type_ == UPGRADEABLE))
            .filter(|c| c.observed_generation == generation);
        match status_condition {
            Some(c) => Self {
                reported,
                upgradeable: bool_status(&c.status),
                message: c.message.clone(),
            },
            None => Self {
                reported,
                upgradeable: None,
                message: "no Upgradeable condition for the current generation".to_owned(),
            },
        }
    }
}

fn bool_status(status: &str) -> Option<bool> {
    match status {
        "True" => Some(true),
        "False" => Some(false),
        _ => None,
    }
}

fn is_missing_api(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// Reads the gate of CSV `csv` in `namespace`; `None` when there is no such OperatorCondition
/// (or the cluster has no OperatorCondition API).
pub async fn read(
    client: &kube::Client,
    namespace: &str,
    csv: &str,
) -> Result<Option<Gate>, Error> {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), namespace);
    match api.get_opt(csv).await {
        Ok(oc) => Ok(oc.as_ref().map(Gate::from_object)),
        Err(err) if is_missing_api(&err) => Ok(None),
        Err(err) => Err(Error::kube(format!(
            "reading OperatorCondition {namespace}/{csv}"
        ))(err)),
    }
}

/// Ensures the OperatorCondition of `csv` exists with its Deployments and ServiceAccounts and
/// an up-to-date status copy; returns its gate. `Ok(None)` when the cluster has no
/// OperatorCondition API (the gate then cannot be used).
#[allow(clippy::too_many_arguments)]
pub async fn ensure(
    client: &kube::Client,
    namespace: &str,
    csv: &str,
    deployments: &[String],
    service_accounts: &[String],
    po: &str,
    package: &str,
) -> Result<Option<Gate>, Error> {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), namespace);
    let existing = match api.get_opt(csv).await {
        Ok(existing) => existing,
        Err(err) if is_missing_api(&err) => return Ok(None),
        Err(err) => {
            return Err(Error::kube(format!(
                "reading OperatorCondition {namespace}/{csv}"
            ))(err));
        }
    };
    let mut deployments = deployments.to_vec();
    deployments.sort();
    let mut service_accounts = service_accounts.to_vec();
    service_accounts.sort();
    service_accounts.dedup();
    let up_to_date = existing.as_ref().is_some_and(|oc| {
        oc.spec.deployments == deployments
            && oc.spec.service_accounts == service_accounts
            && oc
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(labels::OWNER_PO))
                .is_some_and(|o| *o == label_value(po))
    });
    let oc = if up_to_date {
        existing
    } else {
        let patch = json!({
            "apiVersion": "operators.coreos.com/v2",
            "kind": "OperatorCondition",
            "metadata": {"name": csv, "namespace": namespace, "labels": {
                labels::OWNER_PO: label_value(po),
                labels::PACKAGE: label_value(package),
                labels::BUNDLE: label_value(csv),
                labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
            }},
            "spec": {"deployments": deployments, "serviceAccounts": service_accounts},
        });
        Some(
            api.patch(
                csv,
                &PatchParams::apply(OPERATOR_CONDITION_FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .map_err(Error::kube(format!(
                "applying OperatorCondition {namespace}/{csv}"
            )))?,
        )
    };
    let Some(oc) = oc else { return Ok(None) };
    copy_status(&api, &oc).await?;
    read(client, namespace, csv).await
}

/// OLM's OperatorCondition controller: `status.conditions` = `spec.conditions`, stamped with
/// the object's generation. Written only when it differs.
async fn copy_status(api: &Api<OperatorCondition>, oc: &OperatorCondition) -> Result<(), Error> {
    let generation = oc.metadata.generation;
    let wanted: Vec<_> = oc
        .spec
        .conditions
        .iter()
        .map(|c| {
            let mut c = c.clone();
            c.observed_generation = generation;
            c
        })
        .collect();
    let current = oc
        .status
        .as_ref()
        .map(|s| s.conditions.clone())
        .unwrap_or_default();
    if current == wanted {
        return Ok(());
    }
    let name = oc.metadata.name.clone().unwrap_or_default();
    let patch = json!({
        "apiVersion": "operators.coreos.com/v2",
        "kind": "OperatorCondition",
        "status": {"conditions": wanted},
    });
    api.patch_status(
        &name,
        &PatchParams::apply(OPERATOR_CONDITION_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube(format!(
        "copying the conditions of OperatorCondition {name} to its status"
    )))?;
    Ok(())
}
