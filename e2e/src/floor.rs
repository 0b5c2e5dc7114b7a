//! The floor `pom-bench --floor` compares POM with: the very objects POM applies for each
//! PlatformOperator, applied by a minimal server-side-apply client, and the same readiness POM
//! waits for before it says `Installed=True`, with nothing else (no catalogs, no status, no
//! Events, no finalizers, no reads before writing).
//!
//! The objects come from the same library call the manager makes (`pom_render::render`
//! with the options `crates/controller/src/operator/install.rs` passes: OperatorCondition wiring
//! on, the manager's namespace reserved), fed with the same manifests the bench's catalogs carry
//! (`TestBundle::manifests`, which the catalog holds base64-encoded as `olm.bundle.object`), and
//! labelled with the same owner labels. Around them, as the manager does: the install namespace
//! (`ensure_namespace`) and the OperatorCondition (`operator_condition::ensure`).
//!
//! Readiness is watched, not polled: every CRD `Established=True`, every Deployment rolled out
//! by the manager's own rule (`pom_controller::operator::is_rolled_out`).

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use pom_api::labels;
use pom_controller::operator::{is_rolled_out, label};
use pom_render::{BundleFiles, RenderOptions};
use serde_json::{Value, json};

use crate::HarnessError;
use crate::fixtures::TestBundle;

/// How often a floor run prints its progress.
const PROGRESS: Duration = Duration::from_secs(15);

/// The floor's field manager (its own, not the manager's).
pub const FIELD_MANAGER: &str = "pom-bench-floor";

/// Everything the manager writes on the cluster for one PlatformOperator's bundle, in the
/// order it writes them.
#[derive(Debug, Clone)]
pub struct FloorBundle {
    pub po: String,
    /// The install namespace, as `ensure_namespace` applies it.
    pub namespace: Value,
    /// The OperatorCondition, as `operator_condition::ensure` applies it (registry+v1).
    pub operator_condition: Option<Value>,
    /// The rendered objects with the owner labels, in apply order.
    pub objects: Vec<Value>,
    /// CRD names (waited for `Established`).
    pub crds: Vec<String>,
    /// `namespace/name` of the Deployments (waited for their rollout).
    pub deployments: Vec<String>,
}

impl FloorBundle {
    /// Every write of this bundle: namespace, OperatorCondition, objects.
    #[must_use]
    pub fn writes(&self) -> usize {
        1 + usize::from(self.operator_condition.is_some()) + self.objects.len()
    }
}

/// Renders `bundle` for a PlatformOperator named after its package (the bench's shape: install
/// namespace = PO name = package) exactly as the manager does.
///
/// # Errors
/// When the bundle does not render (it would not install with POM either).
pub fn render_bundle(
    bundle: &TestBundle,
    manager_namespace: &str,
) -> Result<FloorBundle, HarnessError> {
    let po = bundle.package.clone();
    let package = bundle.package.clone();
    let namespace = po.clone();
    let bundle_name = bundle.name();
    // What `install::prepare` passes (no content exceptions in the bench's POs).
    let options = RenderOptions {
        operator_condition: true,
        manager_namespace: Some(manager_namespace.to_owned()),
        ..RenderOptions::new(namespace.clone())
    };
    let files = BundleFiles::from_objects(bundle.manifests());
    let rendered = pom_render::render(&files, &options)
        .map_err(|e| HarnessError::Other(format!("rendering {bundle_name}: {e}")))?;
    let objects = rendered
        .objects
        .iter()
        .map(|object| {
            let mut object = object.clone();
            label(&mut object, &po, &package, &bundle_name);
            object
        })
        .collect();
    let operator_condition = rendered.csv_name.as_ref().map(|csv| {
        let mut deployments = rendered.deployments.clone();
        deployments.sort();
        let mut service_accounts = rendered.service_accounts.clone();
        service_accounts.sort();
        service_accounts.dedup();
        json!({
            "apiVersion": "operators.coreos.com/v2",
            "kind": "OperatorCondition",
            "metadata": {"name": csv, "namespace": namespace,
                "labels": labels::owner_labels(&po, &package, Some(&bundle_name))},
            "spec": {"deployments": deployments, "serviceAccounts": service_accounts},
        })
    });
    Ok(FloorBundle {
        namespace: json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": namespace, "labels": labels::owner_labels(&po, &package, None)},
        }),
        operator_condition,
        objects,
        crds: rendered.crds.clone(),
        deployments: rendered
            .deployments
            .iter()
            .map(|d| format!("{namespace}/{d}"))
            .collect(),
        po,
    })
}

fn is_established(crd: &CustomResourceDefinition) -> bool {
    crd.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// What one floor run measured.
#[derive(Debug, Clone)]
pub struct FloorResult {
    /// PlatformOperators' worth of bundles applied in flight at once.
    pub concurrency: usize,
    /// From the first write until the last write was accepted.
    pub applied_after: Duration,
    /// From the first write until every CRD was Established and every Deployment rolled out.
    pub ready_after: Duration,
    /// API requests the floor made (all of them writes; discovery once per kind excluded).
    pub writes: u64,
    /// Per bundle: from its first write to its last object ready, sorted (for percentiles).
    pub per_bundle: Vec<Duration>,
}

/// Applies every bundle (namespace first, then its OperatorCondition and objects at once;
/// `concurrency` bundles in flight) and waits until all are ready, at most `timeout`.
///
/// # Errors
/// A refused write, a failed discovery, or readiness not reached within `timeout`.
pub async fn run(
    client: &Client,
    bundles: &[FloorBundle],
    concurrency: usize,
    timeout: Duration,
) -> Result<FloorResult, HarnessError> {
    let kinds = discover_kinds(client, bundles).await?;
    let expected_crds: HashSet<String> = bundles.iter().flat_map(|b| b.crds.clone()).collect();
    let expected_deployments: HashSet<String> =
        bundles.iter().flat_map(|b| b.deployments.clone()).collect();
    // Which bundle each awaited object belongs to, for per-bundle times.
    let mut owner: HashMap<String, usize> = HashMap::new();
    for (index, bundle) in bundles.iter().enumerate() {
        for crd in &bundle.crds {
            owner.insert(format!("crd:{crd}"), index);
        }
        for deployment in &bundle.deployments {
            owner.insert(format!("deploy:{deployment}"), index);
        }
    }

    // Watch before the first write, so no transition is missed.
    let ready_count = Arc::new(AtomicU64::new(0));
    let mut ready = tokio::spawn(watch_ready(
        client.clone(),
        expected_crds,
        expected_deployments,
        owner,
        ready_count.clone(),
    ));
    let started = Instant::now();
    let first_write: Arc<std::sync::Mutex<Vec<Option<Instant>>>> =
        Arc::new(std::sync::Mutex::new(vec![None; bundles.len()]));
    let writes = Arc::new(AtomicU64::new(0));
    let params = PatchParams::apply(FIELD_MANAGER).force();
    futures::stream::iter(bundles.iter().enumerate())
        .map(|(index, bundle)| {
            let kinds = &kinds;
            let params = &params;
            let writes = writes.clone();
            let first_write = first_write.clone();
            async move {
                if let Ok(mut first) = first_write.lock() {
                    first[index] = Some(Instant::now());
                }
                apply_one(client, kinds, params, &bundle.namespace).await?;
                writes.fetch_add(1, Ordering::Relaxed);
                let rest = bundle
                    .operator_condition
                    .iter()
                    .chain(&bundle.objects)
                    .map(|object| {
                        let writes = writes.clone();
                        async move {
                            apply_one(client, kinds, params, object).await?;
                            writes.fetch_add(1, Ordering::Relaxed);
                            Ok::<(), HarnessError>(())
                        }
                    });
                futures::future::try_join_all(rest).await?;
                Ok::<(), HarnessError>(())
            }
        })
        .buffer_unordered(concurrency.max(1))
        .try_collect::<Vec<()>>()
        .await?;
    let applied_after = started.elapsed();
    let ready_at = loop {
        match tokio::time::timeout(PROGRESS, &mut ready).await {
            Ok(Ok(result)) => break result?,
            Ok(Err(join)) => {
                return Err(HarnessError::Other(format!(
                    "the floor's readiness watch ended: {join}"
                )));
            }
            Err(_) if started.elapsed() > timeout => {
                ready.abort();
                return Err(HarnessError::Other(format!(
                    "the floor's objects were not all ready within {}s",
                    timeout.as_secs()
                )));
            }
            Err(_) => println!(
                "  {:>5.0}s: floor: {} of {} bundles ready",
                started.elapsed().as_secs_f64(),
                ready_count.load(Ordering::Relaxed),
                bundles.len()
            ),
        }
    };
    let first = first_write
        .lock()
        .map(|f| f.clone())
        .map_err(|_| HarnessError::Other("a floor task panicked".to_owned()))?;
    let last_ready = ready_at.values().copied().max().unwrap_or(started);
    let mut per_bundle: Vec<Duration> = ready_at
        .iter()
        .filter_map(|(index, at)| Some(at.duration_since(first.get(*index).copied()??)))
        .collect();
    per_bundle.sort_unstable();
    Ok(FloorResult {
        concurrency,
        applied_after,
        ready_after: last_ready.duration_since(started),
        writes: writes.load(Ordering::Relaxed),
        per_bundle,
    })
}

type Kinds = BTreeMap<(String, String), (ApiResource, bool)>;

/// One discovery per kind (apiVersion, kind), before the clock starts.
async fn discover_kinds(client: &Client, bundles: &[FloorBundle]) -> Result<Kinds, HarnessError> {
    let mut kinds = Kinds::new();
    let all = bundles.iter().flat_map(|b| {
        std::iter::once(&b.namespace)
            .chain(&b.operator_condition)
            .chain(&b.objects)
    });
    for object in all {
        let key = type_of(object)?;
        if kinds.contains_key(&key) {
            continue;
        }
        let (group, version) = key.0.rsplit_once('/').unwrap_or(("", key.0.as_str()));
        let gvk = GroupVersionKind::gvk(group, version, &key.1);
        let (resource, caps) =
            kube::discovery::pinned_kind(client, &gvk)
                .await
                .map_err(HarnessError::kube(format!(
                    "discovering {} {}",
                    key.0, key.1
                )))?;
        let namespaced = caps.scope == kube::discovery::Scope::Namespaced;
        kinds.insert(key, (resource, namespaced));
    }
    Ok(kinds)
}

fn type_of(object: &Value) -> Result<(String, String), HarnessError> {
    let field = |name: &str| {
        object[name]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| HarnessError::Other(format!("an object without {name}: {object}")))
    };
    Ok((field("apiVersion")?, field("kind")?))
}

async fn apply_one(
    client: &Client,
    kinds: &Kinds,
    params: &PatchParams,
    object: &Value,
) -> Result<(), HarnessError> {
    let key = type_of(object)?;
    let (resource, namespaced) = kinds
        .get(&key)
        .ok_or_else(|| HarnessError::Other(format!("kind {key:?} was not discovered")))?;
    let name = object["metadata"]["name"].as_str().unwrap_or_default();
    let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
        Some(ns) if *namespaced => Api::namespaced_with(client.clone(), ns, resource),
        _ => Api::all_with(client.clone(), resource),
    };
    api.patch(name, params, &Patch::Apply(object))
        .await
        .map_err(HarnessError::kube(format!("applying {} {name}", key.1)))?;
    Ok(())
}

enum Seen {
    Crd(Box<CustomResourceDefinition>),
    Deployment(Box<Deployment>),
}

/// Watches CRDs and owner-labelled Deployments until every expected one is ready; when each
/// bundle (by index) had its last object ready.
async fn watch_ready(
    client: Client,
    mut crds: HashSet<String>,
    mut deployments: HashSet<String>,
    owner: HashMap<String, usize>,
    ready_count: Arc<AtomicU64>,
) -> Result<HashMap<usize, Instant>, HarnessError> {
    let mut waiting: HashMap<usize, usize> = HashMap::new();
    for index in owner.values() {
        *waiting.entry(*index).or_default() += 1;
    }
    let mut ready_at = HashMap::new();
    let crd_events = watcher(
        Api::<CustomResourceDefinition>::all(client.clone()),
        watcher::Config::default(),
    )
    .default_backoff()
    .applied_objects()
    .map_ok(|c| Seen::Crd(Box::new(c)));
    let deployment_events = watcher(
        Api::<Deployment>::all(client),
        watcher::Config::default().labels(labels::OWNER_PO),
    )
    .default_backoff()
    .applied_objects()
    .map_ok(|d| Seen::Deployment(Box::new(d)));
    let mut events = futures::stream::select(crd_events.boxed(), deployment_events.boxed());
    while !crds.is_empty() || !deployments.is_empty() {
        let Some(event) = events.next().await else {
            return Err(HarnessError::Other(
                "the floor's readiness watch ended".to_owned(),
            ));
        };
        let key = match event {
            Ok(Seen::Crd(crd)) if is_established(&crd) && crds.remove(&crd.name_any()) => {
                format!("crd:{}", crd.name_any())
            }
            Ok(Seen::Deployment(d)) if is_rolled_out(&d) => {
                let id = format!("{}/{}", d.namespace().unwrap_or_default(), d.name_any());
                if !deployments.remove(&id) {
                    continue;
                }
                format!("deploy:{id}")
            }
            Ok(_) => continue,
            // The watcher retries with backoff; an error here is one failed attempt.
            Err(_) => continue,
        };
        if let Some(index) = owner.get(&key)
            && let Some(left) = waiting.get_mut(index)
        {
            *left -= 1;
            if *left == 0 {
                ready_at.insert(*index, Instant::now());
                ready_count.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    Ok(ready_at)
}
