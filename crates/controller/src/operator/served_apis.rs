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
//! reconcile. The re-read before a refusal is itself bounded (review L3): only when the
//! reading is older than [`REFUSAL_REREAD_INTERVAL`], so bundles refused again and again (every
//! retry of every refused PO) cost the API server one discovery read per interval per
//! process, not one per refusal. Decide: `pom_render::served_apis::judge_live_claims`, pure.

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

/// How old a reading must be before a refusal reads again: younger, it already is what the
/// server serves now (within the time a refused bundle waits for its retry anyway). Discovery
/// of a whole OpenShift cluster is a large answer; refusals repeat at every retry of every
/// refused PO.
pub const REFUSAL_REREAD_INTERVAL: Duration = Duration::from_secs(30);

/// The most `(group, resource)` pairs one reading keeps (a large OpenShift cluster serves about
/// a thousand): what is beyond is dropped, with a warning, rather than held without bound.
pub const MAX_SERVED_RESOURCES: usize = 20_000;

/// One process's reading, shared by every PO reconcile.
#[derive(Default)]
pub struct LiveApisCache {
    reading: tokio::sync::Mutex<Option<(Instant, Arc<LiveApis>)>>,
}

/// Whether a reading `age` old (`None`: none yet) is read again, before a refusal (`fresh`)
/// or not (pure).
fn reads_again(age: Option<Duration>, fresh: bool) -> bool {
    let Some(age) = age else {
        return true;
    };
    let interval = if fresh {
        REFUSAL_REREAD_INTERVAL
    } else {
        REFRESH_INTERVAL
    };
    age >= interval
}

impl LiveApisCache {
    /// The reading at `now`, read again with `read` when older than [`REFRESH_INTERVAL`], or
    /// than [`REFUSAL_REREAD_INTERVAL`] when `fresh` (before a refusal); `now` and `read` are
    /// the process's clock and the API server but in tests.
    async fn get_at<F, Fut>(
        &self,
        now: Instant,
        fresh: bool,
        read: F,
    ) -> Result<Arc<LiveApis>, Error>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<LiveApis, Error>>,
    {
        let mut reading = self.reading.lock().await;
        let age = reading
            .as_ref()
            .map(|(at, _)| now.saturating_duration_since(*at));
        if let Some((_, apis)) = reading.as_ref()
            && !reads_again(age, fresh)
        {
            return Ok(apis.clone());
        }
        let apis = Arc::new(read().await?);
        *reading = Some((now, apis.clone()));
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
/// than a CRD of that name: judged on the cached reading, and a refusal on one no older than
/// [`REFUSAL_REREAD_INTERVAL`].
pub async fn check(
    client: &kube::Client,
    cache: &LiveApisCache,
    bundle: &str,
    claims: &[CrdClaim],
) -> Result<(), Error> {
    check_at(cache, Instant::now(), bundle, claims, || read(client)).await
}

/// [`check`] at `now`, reading with `read` (a fake clock and reader in tests).
async fn check_at<F, Fut>(
    cache: &LiveApisCache,
    now: Instant,
    bundle: &str,
    claims: &[CrdClaim],
    read: F,
) -> Result<(), Error>
where
    F: Fn() -> Fut,
    Fut: std::future::Future<Output = Result<LiveApis, Error>>,
{
    if claims.is_empty() {
        return Ok(());
    }
    let cached = cache.get_at(now, false, &read).await?;
    if judge_live_claims(claims, &cached).is_empty() {
        return Ok(());
    }
    let fresh = cache.get_at(now, true, &read).await?;
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

    /// A CRD claiming `metrics.k8s.io/nodes`, served by an aggregated API while `aggregated`.
    fn nodes_claim() -> CrdClaim {
        CrdClaim {
            name: "nodes.metrics.k8s.io".to_owned(),
            group: "metrics.k8s.io".to_owned(),
            plural: "nodes".to_owned(),
            versions: vec!["v1beta1".to_owned()],
            live_crd: false,
        }
    }

    fn served(aggregated: bool) -> LiveApis {
        LiveApis {
            aggregated: if aggregated {
                BTreeMap::from([(
                    ("metrics.k8s.io".to_owned(), "v1beta1".to_owned()),
                    (
                        "v1beta1.metrics.k8s.io".to_owned(),
                        "kube-system/metrics-server".to_owned(),
                    ),
                )])
            } else {
                BTreeMap::new()
            },
            resources: BTreeSet::new(),
        }
    }

    /// A reader counting its reads, answering what `aggregated` holds at the time.
    struct FakeReader {
        reads: std::sync::atomic::AtomicUsize,
        aggregated: std::sync::atomic::AtomicBool,
    }

    impl FakeReader {
        fn new() -> Self {
            Self {
                reads: 0.into(),
                aggregated: true.into(),
            }
        }

        async fn read(&self) -> Result<LiveApis, Error> {
            use std::sync::atomic::Ordering::SeqCst;
            self.reads.fetch_add(1, SeqCst);
            Ok(served(self.aggregated.load(SeqCst)))
        }

        fn reads(&self) -> usize {
            self.reads.load(std::sync::atomic::Ordering::SeqCst)
        }
    }

    #[test]
    fn a_reading_is_read_again_by_its_age_and_sooner_before_a_refusal() {
        let s = Duration::from_secs;
        // (age of the reading, before a refusal, read again?)
        let cases = [
            (None, false, true),
            (None, true, true),
            (Some(s(0)), false, false),
            (Some(s(0)), true, false),
            (Some(REFUSAL_REREAD_INTERVAL - s(1)), true, false),
            (Some(REFUSAL_REREAD_INTERVAL), true, true),
            (Some(REFUSAL_REREAD_INTERVAL), false, false),
            (Some(REFRESH_INTERVAL - s(1)), false, false),
            (Some(REFRESH_INTERVAL), false, true),
            (Some(REFRESH_INTERVAL), true, true),
        ];
        for (age, fresh, want) in cases {
            assert_eq!(reads_again(age, fresh), want, "age {age:?}, fresh {fresh}");
        }
    }

    /// Review L3: a bundle refused at every retry (every 1 s here) reads discovery once per
    /// [`REFUSAL_REREAD_INTERVAL`], not once per refusal; a reading that interval old is read
    /// again before refusing, so an API that went away stops refusing.
    #[tokio::test]
    async fn refusals_read_discovery_again_at_most_once_per_interval() {
        let cache = LiveApisCache::default();
        let reader = FakeReader::new();
        let start = Instant::now();
        let claims = [nodes_claim()];
        for second in 0..30 {
            let now = start + Duration::from_secs(second);
            let refused = check_at(&cache, now, "b.v1", &claims, || reader.read()).await;
            assert!(refused.is_err(), "refused at {second} s");
        }
        assert_eq!(
            reader.reads(),
            1,
            "30 refusals within the interval: one read"
        );
        let now = start + REFUSAL_REREAD_INTERVAL;
        assert!(
            check_at(&cache, now, "b.v1", &claims, || reader.read())
                .await
                .is_err()
        );
        assert_eq!(reader.reads(), 2, "a refusal an interval later reads again");
        // The aggregated API goes away: the next refusal an interval on reads and admits.
        reader
            .aggregated
            .store(false, std::sync::atomic::Ordering::SeqCst);
        let now = start + REFUSAL_REREAD_INTERVAL + Duration::from_secs(1);
        assert!(
            check_at(&cache, now, "b.v1", &claims, || reader.read())
                .await
                .is_err(),
            "within the interval the reading stands"
        );
        let now = start + REFUSAL_REREAD_INTERVAL * 2;
        assert!(
            check_at(&cache, now, "b.v1", &claims, || reader.read())
                .await
                .is_ok()
        );
        assert_eq!(reader.reads(), 3);
        // Admitted on a reading that stays clean: no read until it is REFRESH_INTERVAL old.
        let now = start + REFUSAL_REREAD_INTERVAL * 2 + Duration::from_secs(60);
        assert!(
            check_at(&cache, now, "b.v1", &claims, || reader.read())
                .await
                .is_ok()
        );
        assert_eq!(reader.reads(), 3);
    }
}
