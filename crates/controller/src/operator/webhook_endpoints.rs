//! What a webhook Service routes to, read for [`pom_policy::webhook_serving::serving`] (review M1): the
//! Deployment behind it (generation, counts, revision), the ReplicaSets it controls (name and
//! revision), and the Pods its EndpointSlices list as ready. Reads only, each bounded; no Pod
//! is read (POM may not): the endpoints name their Pods.

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use kube::api::{Api, ListParams};
use pom_policy::webhook_serving::{ReplicaSetSeen, RolloutCounts, ServiceObservation};
use pom_render as render;

use crate::error::Error;

/// The annotation the Deployment controller writes on a Deployment and on each of its
/// ReplicaSets; the Deployment's names its current ReplicaSet's.
const REVISION_ANNOTATION: &str = "deployment.kubernetes.io/revision";

/// The most EndpointSlices read for one webhook Service (the EndpointSlice controller puts up
/// to 100 endpoints in each): past it the rest are not read, and a new pod listed only there
/// is seen once the slices are fewer.
const MAX_ENDPOINT_SLICES: u32 = 50;

/// The most ReplicaSets read for one Deployment. A Deployment keeps `revisionHistoryLimit` old
/// ones (10 by default) beside its current one; past this bound its pods are told by its
/// counts (`replica_sets: None`), not by a second page.
const MAX_REPLICA_SETS: u32 = 100;

/// What [`pom_policy::webhook_serving::serving`] judges `service` by.
pub(super) async fn observe(
    client: &kube::Client,
    namespace: &str,
    service: &render::WebhookService,
) -> Result<ServiceObservation, Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    // Read now, not the apply's answer: the status must be the one the endpoints are judged with.
    let deployment = deployments
        .get_opt(&service.deployment)
        .await
        .map_err(Error::kube(format!(
            "reading Deployment {namespace}/{}",
            service.deployment
        )))?;
    let replica_sets = match &deployment {
        Some(deployment) => replica_sets(client, namespace, deployment).await?,
        None => Some(Vec::new()),
    };
    let ready = ready_endpoints(client, namespace, &service.name).await?;
    Ok(ServiceObservation {
        service: service.name.clone(),
        rollout: deployment.as_ref().map(rollout_counts),
        replica_sets,
        ready_endpoints: ready.len(),
        ready_pods: ready.into_iter().filter_map(ReadyEndpoint::pod).collect(),
    })
}

/// A Deployment's generation, pod counts and revision, as `pom_policy::webhook_serving` reads them.
fn rollout_counts(deployment: &Deployment) -> RolloutCounts {
    let status = deployment.status.as_ref();
    RolloutCounts {
        generation: deployment.metadata.generation.unwrap_or(0),
        observed_generation: status.and_then(|s| s.observed_generation).unwrap_or(0),
        replicas: status.and_then(|s| s.replicas).unwrap_or(0),
        updated_replicas: status.and_then(|s| s.updated_replicas).unwrap_or(0),
        revision: revision(&deployment.metadata),
        paused: deployment
            .spec
            .as_ref()
            .and_then(|spec| spec.paused)
            .unwrap_or(false),
    }
}

fn revision(meta: &kube::api::ObjectMeta) -> Option<String> {
    meta.annotations.as_ref()?.get(REVISION_ANNOTATION).cloned()
}

/// The ReplicaSets `deployment` controls (its controller owner reference, by uid), listed by
/// its selector's labels; `None` past [`MAX_REPLICA_SETS`].
async fn replica_sets(
    client: &kube::Client,
    namespace: &str,
    deployment: &Deployment,
) -> Result<Option<Vec<ReplicaSetSeen>>, Error> {
    let uid = deployment.metadata.uid.as_deref().unwrap_or_default();
    let name = deployment.metadata.name.as_deref().unwrap_or_default();
    let api: Api<ReplicaSet> = Api::namespaced(client.clone(), namespace);
    let mut params = ListParams::default().limit(MAX_REPLICA_SETS);
    if let Some(selector) = label_selector(&deployment.spec.as_ref().map(|s| &s.selector)) {
        params = params.labels(&selector);
    }
    // Metadata only: names, owner references and revisions are all the rule reads, and a
    // ReplicaSet's pod template (every old one kept by `revisionHistoryLimit`) is not held.
    let listed = api
        .list_metadata(&params)
        .await
        .map_err(Error::kube(format!(
            "listing the ReplicaSets of Deployment {namespace}/{name}"
        )))?;
    if listed
        .metadata
        .continue_
        .as_deref()
        .is_some_and(|c| !c.is_empty())
    {
        return Ok(None);
    }
    Ok(Some(
        listed
            .items
            .iter()
            .filter(|rs| {
                rs.metadata.owner_references.iter().flatten().any(|owner| {
                    owner.controller == Some(true) && owner.kind == "Deployment" && owner.uid == uid
                })
            })
            .filter_map(|rs| {
                Some(ReplicaSetSeen {
                    name: rs.metadata.name.clone()?,
                    revision: revision(&rs.metadata),
                })
            })
            .collect(),
    ))
}

/// The selector's `matchLabels` as a label selector (its `matchExpressions` are left to the
/// owner check, which decides alone), `None` when it has none.
fn label_selector(selector: &Option<&LabelSelector>) -> Option<String> {
    let labels = selector.as_ref()?.match_labels.as_ref()?;
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    (!pairs.is_empty()).then(|| pairs.join(","))
}

/// One ready endpoint: the Pod it names, or its first address when it names none.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum ReadyEndpoint {
    Pod(String),
    Address(String),
}

impl ReadyEndpoint {
    fn pod(self) -> Option<String> {
        match self {
            Self::Pod(name) => Some(name),
            Self::Address(_) => None,
        }
    }
}

/// The endpoints `service`'s EndpointSlices list as ready (absent readiness counts as ready,
/// as the EndpointSlice API defines it), each once: an endpoint listed by two slices while the
/// EndpointSlice controller moves it is one pod.
async fn ready_endpoints(
    client: &kube::Client,
    namespace: &str,
    service: &str,
) -> Result<BTreeSet<ReadyEndpoint>, Error> {
    let slices: Api<EndpointSlice> = Api::namespaced(client.clone(), namespace);
    let listed = slices
        .list(
            &ListParams::default()
                .labels(&format!("kubernetes.io/service-name={service}"))
                .limit(MAX_ENDPOINT_SLICES),
        )
        .await
        .map_err(Error::kube(format!(
            "listing the EndpointSlices of Service {namespace}/{service}"
        )))?;
    Ok(listed
        .items
        .iter()
        .flat_map(|slice| &slice.endpoints)
        .filter(|endpoint| {
            endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true)
        })
        .filter_map(|endpoint| {
            let pod = endpoint
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.clone());
            match pod {
                Some(name) => Some(ReadyEndpoint::Pod(name)),
                None => endpoint
                    .addresses
                    .first()
                    .cloned()
                    .map(ReadyEndpoint::Address),
            }
        })
        .collect())
}
