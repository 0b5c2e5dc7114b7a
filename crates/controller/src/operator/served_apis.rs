//! The live half of "claims by what is served" (issue 33 item 3): before it applies a bundle's
//! CRDs, the manager asks what the API server serves, so that a CRD is refused when its
//! group/version is routed to an aggregated APIService, or when its resource is served and no
//! CRD of that name exists (a built-in resource). The render's table
//! (`pom_render::served_apis`) knows what Kubernetes and OpenShift serve by their releases; the
//! cluster may serve more (metrics adapters, a platform CRD of a later release).
//!
//! Gather: two reads, aggregated discovery of `/apis` (one request for every group, version
//! and resource) and the APIServices, cached per manager process ([`LiveApisCache`]) and read
//! again only when older than [`REFRESH_INTERVAL`] or before a refusal (so a reading taken
//! before a CRD went away never refuses a bundle): the steady state gains no request per
//! reconcile. Decide: `pom_render::served_apis::judge_live_claims`, pure.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService;
use kube::api::{Api, ListParams};
use kube::core::discovery::v2::APIGroupDiscoveryList;
use pom_render::served_apis::{CrdClaim, LiveApis, LiveClaimConflict, judge_live_claims};
use serde_json::Value;

use super::gather::READ_DEADLINE;
use super::objects;
use crate::error::Error;

/// How long one reading of discovery and the APIServices is used: an APIService added since
/// is seen within this, a refusal always reads again.
pub const REFRESH_INTERVAL: Duration = Duration::from_secs(300);

/// The most `(group, resource)` pairs one reading keeps (a large OpenShift cluster serves about
/// a thousand): what is beyond is dropped, with a warning, rather than held without bound.
pub const MAX_SERVED_RESOURCES: usize = 20_000;

/// One process's reading, shared by every PO reconcile.
#[derive(Default)]
pub struct LiveApisCache {
    reading: tokio::sync::Mutex<Option<(Instant, Arc<LiveApis>)>>,
}

impl LiveApisCache {
    /// The reading, read again when older than [`REFRESH_INTERVAL`] or when `fresh`.
    async fn get(&self, client: &kube::Client, fresh: bool) -> Result<Arc<LiveApis>, Error> {
        let mut reading = self.reading.lock().await;
        if let Some((at, apis)) = reading.as_ref()
            && !fresh
            && at.elapsed() < REFRESH_INTERVAL
        {
            return Ok(apis.clone());
        }
        let apis = Arc::new(read(client).await?);
        *reading = Some((Instant::now(), apis.clone()));
        Ok(apis)
    }
}

async fn read(client: &kube::Client) -> Result<LiveApis, Error> {
    let deadline = |action: &str| Error::ReadDeadline {
        action: action.to_owned(),
        deadline: READ_DEADLINE,
    };
    let discovery = tokio::time::timeout(READ_DEADLINE, client.list_api_groups_aggregated())
        .await
        .map_err(|_| deadline("reading API discovery"))?
        .map_err(Error::kube("reading API discovery (/apis)"))?;
    let api_services = tokio::time::timeout(
        READ_DEADLINE,
        Api::<APIService>::all(client.clone()).list(&ListParams::default()),
    )
    .await
    .map_err(|_| deadline("listing APIServices"))?
    .map_err(Error::kube("listing APIServices"))?;
    if discovery.items.is_empty() {
        return Err(Error::DiscoveryUnusable {
            detail: "/apis listed no API group (a server or proxy that answered without aggregated discovery)".to_owned(),
        });
    }
    let live = live_apis(&discovery, &api_services.items);
    if live.resources.len() > MAX_SERVED_RESOURCES {
        return Err(Error::DiscoveryUnusable {
            detail: format!(
                "it lists {} resources, more than the {MAX_SERVED_RESOURCES} POM checks (MAX_SERVED_RESOURCES)",
                live.resources.len()
            ),
        });
    }
    Ok(live)
}

/// What discovery and the APIServices say is served (pure).
fn live_apis(discovery: &APIGroupDiscoveryList, api_services: &[APIService]) -> LiveApis {
    let mut resources = BTreeSet::new();
    for group in &discovery.items {
        let name = group
            .metadata
            .as_ref()
            .and_then(|m| m.name.clone())
            .unwrap_or_default();
        for version in &group.versions {
            for resource in &version.resources {
                if let Some(plural) = &resource.resource {
                    resources.insert((name.clone(), plural.clone()));
                }
            }
        }
    }
    let aggregated: BTreeMap<(String, String), (String, String)> = api_services
        .iter()
        .filter_map(|api_service| {
            let spec = api_service.spec.as_ref()?;
            let service = spec.service.as_ref()?;
            Some((
                (spec.group.clone()?, spec.version.clone()?),
                (
                    api_service.metadata.name.clone().unwrap_or_default(),
                    format!(
                        "{}/{}",
                        service.namespace.as_deref().unwrap_or_default(),
                        service.name.as_deref().unwrap_or_default()
                    ),
                ),
            ))
        })
        .collect();
    LiveApis {
        aggregated,
        resources,
    }
}

/// The bundle's CRDs among the objects to apply, with whether the cluster holds a CRD of
/// that name (`live`, one per object, in order) (pure).
pub fn claims(desired: &[(objects::ObjectId, Value)], live: &[bool]) -> Vec<CrdClaim> {
    desired
        .iter()
        .zip(live)
        .filter(|((id, _), _)| {
            id.gvk.group == "apiextensions.k8s.io" && id.gvk.kind == "CustomResourceDefinition"
        })
        .map(|((id, object), live)| {
            let text = |path: &[&str]| {
                path.iter()
                    .try_fold(object, |v, k| v.get(k))
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned()
            };
            CrdClaim {
                name: id.name.clone(),
                group: text(&["spec", "group"]),
                plural: text(&["spec", "names", "plural"]),
                versions: object["spec"]["versions"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v["name"].as_str().map(str::to_owned))
                    .collect(),
                live_crd: *live,
            }
        })
        .collect()
}

/// Refuses CRDs whose group and resource the live API server serves by something other
/// than a CRD of that name: judged on the cached reading, and a refusal on a fresh one.
pub async fn check(
    client: &kube::Client,
    cache: &LiveApisCache,
    bundle: &str,
    claims: &[CrdClaim],
) -> Result<(), Error> {
    if claims.is_empty() {
        return Ok(());
    }
    let cached = cache.get(client, false).await?;
    if judge_live_claims(claims, &cached).is_empty() {
        return Ok(());
    }
    let fresh = cache.get(client, true).await?;
    refusal(bundle, judge_live_claims(claims, &fresh))
}

fn refusal(bundle: &str, conflicts: Vec<LiveClaimConflict>) -> Result<(), Error> {
    if conflicts.is_empty() {
        return Ok(());
    }
    Err(Error::CrdClaimsServedApi {
        bundle: bundle.to_owned(),
        details: conflicts
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join("; "),
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    #[test]
    fn discovery_and_api_services_become_what_is_served() {
        let discovery: APIGroupDiscoveryList = serde_json::from_value(json!({
            "items": [
                {"metadata": {"name": "metrics.k8s.io"}, "versions": [
                    {"version": "v1beta1", "resources": [{"resource": "pods"}, {"resource": "nodes"}]}
                ]},
                {"metadata": {"name": "widgets.example.com"}, "versions": [
                    {"version": "v1", "resources": [{"resource": "widgets"}]}
                ]}
            ]
        }))
        .unwrap();
        let api_services: Vec<APIService> = serde_json::from_value(json!([
            {"metadata": {"name": "v1beta1.metrics.k8s.io"},
             "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "groupPriorityMinimum": 100, "versionPriority": 100,
                      "service": {"namespace": "kube-system", "name": "metrics-server"}}},
            {"metadata": {"name": "v1.widgets.example.com"},
             "spec": {"group": "widgets.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 100}}
        ]))
        .unwrap();
        let live = live_apis(&discovery, &api_services);
        assert_eq!(
            live.aggregated,
            BTreeMap::from([(
                ("metrics.k8s.io".to_owned(), "v1beta1".to_owned()),
                (
                    "v1beta1.metrics.k8s.io".to_owned(),
                    "kube-system/metrics-server".to_owned()
                )
            )])
        );
        assert!(
            live.resources
                .contains(&("metrics.k8s.io".to_owned(), "nodes".to_owned()))
        );
        assert!(
            live.resources
                .contains(&("widgets.example.com".to_owned(), "widgets".to_owned()))
        );
        assert_eq!(live.resources.len(), 3);
    }

    #[test]
    fn a_refusal_names_the_bundle_and_every_conflict() {
        let conflicts = judge_live_claims(
            &[CrdClaim {
                name: "nodes.metrics.k8s.io".to_owned(),
                group: "metrics.k8s.io".to_owned(),
                plural: "nodes".to_owned(),
                versions: vec!["v1beta1".to_owned()],
                live_crd: false,
            }],
            &LiveApis {
                aggregated: BTreeMap::from([(
                    ("metrics.k8s.io".to_owned(), "v1beta1".to_owned()),
                    (
                        "v1beta1.metrics.k8s.io".to_owned(),
                        "kube-system/metrics-server".to_owned(),
                    ),
                )]),
                resources: BTreeSet::new(),
            },
        );
        let err = refusal("hostile.v1.0.0", conflicts).unwrap_err();
        assert_eq!(
            err.reason(),
            pom_api::conditions::Reason::ContentPolicyViolation
        );
        let text = err.to_string();
        for needed in [
            "hostile.v1.0.0",
            "nodes.metrics.k8s.io",
            "v1beta1.metrics.k8s.io",
            "kube-system/metrics-server",
        ] {
            assert!(text.contains(needed), "{needed}: {text}");
        }
        assert!(refusal("b", Vec::new()).is_ok());
    }
}
