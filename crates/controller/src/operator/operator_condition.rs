//! OperatorConditions, as OLM v0 runs them (§7), so operators built on operator-lib work
//! unchanged: POM creates one per installed CSV (named after it, listing its Deployments and
//! ServiceAccounts), copies what the operator writes in `spec.conditions` to `status.conditions`
//! stamped with `observedGeneration` (the job of OLM's OperatorCondition controller; it writes
//! the same values, so neither fights the other), and reads the `Upgradeable` gate from it.

use kube::api::{Api, Patch, PatchParams};
use pom_api::labels;
use pom_api::olm::OperatorCondition;
use pom_policy::snapshot::{OperatorGate, gate_of};
use serde_json::json;

use crate::context::OPERATOR_CONDITION_FIELD_MANAGER;
use crate::error::Error;

fn is_missing_api(err: &kube::Error) -> bool {
    matches!(err, kube::Error::Api(s) if s.code == 404)
}

/// Who an OperatorCondition is for.
pub struct OperatorConditionFor<'a> {
    pub namespace: &'a str,
    /// Named after the CSV (as operator-lib expects), which may differ from the bundle's name.
    pub csv: &'a str,
    /// The bundle it belongs to (its bundle label: what prune and the gate lookup go by).
    pub bundle: &'a str,
    pub deployments: &'a [String],
    pub service_accounts: &'a [String],
    pub po: &'a str,
    pub package: &'a str,
}

/// OperatorCondition `namespace/name` as it is now; `None` when it does not exist or the
/// cluster has no OperatorCondition API.
pub async fn live(
    client: &kube::Client,
    namespace: &str,
    name: &str,
) -> Result<Option<OperatorCondition>, Error> {
    match Api::<OperatorCondition>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
    {
        Ok(found) => Ok(found),
        Err(err) if is_missing_api(&err) => Ok(None),
        Err(err) => Err(Error::kube(format!(
            "reading OperatorCondition {namespace}/{name}"
        ))(err)),
    }
}

/// Ensures the OperatorCondition exists with its Deployments and ServiceAccounts and an
/// up-to-date status copy; returns its gate. `Ok(None)` when the cluster has no
/// OperatorCondition API (the gate then cannot be used). `read` is the copy this reconcile
/// already read and judged (each object is read once per reconcile); `None` (absent then) is
/// read again.
pub async fn ensure(
    client: &kube::Client,
    target: &OperatorConditionFor<'_>,
    read: Option<OperatorCondition>,
) -> Result<Option<OperatorGate>, Error> {
    let OperatorConditionFor {
        namespace,
        csv,
        bundle,
        deployments,
        service_accounts,
        po,
        package,
    } = *target;
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), namespace);
    let existing = match read {
        Some(read) => Some(read),
        None => match api.get_opt(csv).await {
            Ok(existing) => existing,
            Err(err) if is_missing_api(&err) => return Ok(None),
            Err(err) => {
                return Err(Error::kube(format!(
                    "reading OperatorCondition {namespace}/{csv}"
                ))(err));
            }
        },
    };
    let mut deployments = deployments.to_vec();
    deployments.sort();
    let mut service_accounts = service_accounts.to_vec();
    service_accounts.sort();
    service_accounts.dedup();
    let up_to_date = existing.as_ref().is_some_and(|oc| {
        oc.spec.deployments == deployments
            && oc.spec.service_accounts == service_accounts
            && oc.metadata.labels.as_ref().is_some_and(|l| {
                labels::owner_labels(po, package, Some(bundle))
                    .iter()
                    .all(|(k, v)| l.get(k) == Some(v))
            })
    });
    let oc = if up_to_date {
        existing
    } else {
        let patch = json!({
            "apiVersion": "operators.coreos.com/v2",
            "kind": "OperatorCondition",
            "metadata": {"name": csv, "namespace": namespace,
                "labels": labels::owner_labels(po, package, Some(bundle))},
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
    let oc = copy_status(&api, oc).await?;
    Ok(Some(gate_of(&oc)))
}

/// OLM's OperatorCondition controller: `status.conditions` = `spec.conditions`, stamped with
/// the object's generation. Written only when it differs.
async fn copy_status(
    api: &Api<OperatorCondition>,
    oc: OperatorCondition,
) -> Result<OperatorCondition, Error> {
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
        return Ok(oc);
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
    )))
}
