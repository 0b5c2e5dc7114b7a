//! The PlatformOperator controller: its watches and triggers, and one reconcile as a pipeline
//! over one state.
//!
//! 1. **Gather** ([`pipeline::gather`]): everything the PO is judged from, read once (watch
//!    caches, one discovery per run, the OperatorCondition unless a clean check still holds).
//! 2. **Decide** ([`pom_policy::decide`]): pure; the same function `pomctl plan` calls.
//! 3. **Plan** ([`pom_policy::steps::plan`]): pure; the ordered steps this reconcile takes.
//! 4. **Act** ([`Run::execute`]): each step's I/O, its typed outcome recorded on the run.
//! 5. **Report** ([`pom_policy::status::compute`], a step): pure; written only when it changed.
//!
//! `docs/architecture.md` draws it and says where a new feature goes.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action as RequeueAction, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt as _, watcher};
use pom_api::labels;
use pom_api::{Catalog, PlatformOperator};
use pom_policy::steps::{self, plan};
use pom_policy::{decide, inventory};
use tokio_util::sync::CancellationToken;

use super::first_checks::FirstChecks;
use super::gather::ClusterWatch;
use super::objects::KindCache;
use super::pipeline::{self, Run};
use super::quiet::CleanChecks;
use crate::cluster_state::ClusterState;
use crate::context::Context;
use crate::error::Error;
use crate::fail_point::FailPoint;
use crate::watch_cache::{CachedKind, Readiness, spawn_cache};

/// The longest one PlatformOperator reconcile may take (a bundle pull has its own, longer,
/// deadline and is cached by digest once done, so a retry resumes from the cache).
const RECONCILE_DEADLINE: Duration = Duration::from_secs(60);
/// PlatformOperators reconciled at once.
const RECONCILE_CONCURRENCY: u16 = 16;
/// How long the start-up snapshot waits for the PO and Catalog caches' first lists to name
/// the POs whose first checks retire it (its own lists do not wait).
const FIRST_SNAPSHOT_WAIT: Duration = Duration::from_secs(30);
/// How soon to look again when the watch cache has not caught up with our own status write.
const OWN_WRITE_RETRY: Duration = Duration::from_millis(500);

impl PoContext {
    /// Records that the reconcile of `po` is now at `stage`.
    pub(super) fn stage(&self, po: &str, stage: &'static str) {
        if let Ok(mut stages) = self.stages.lock() {
            stages.insert(po.to_owned(), stage);
        }
    }

    /// The stage the reconcile of `po` last reached.
    fn stage_of(&self, po: &str) -> &'static str {
        self.stages
            .lock()
            .ok()
            .and_then(|stages| stages.get(po).copied())
            .unwrap_or("not started")
    }

    /// Whether `po` as cached is older than what this manager last wrote to it. Kubernetes
    /// resourceVersions are opaque; etcd-backed ones are increasing integers, and anything else
    /// is never considered behind.
    fn behind_own_write(&self, po: &PlatformOperator) -> bool {
        let Some(cached) = po
            .metadata
            .resource_version
            .as_deref()
            .and_then(|rv| rv.parse::<u64>().ok())
        else {
            return false;
        };
        self.written
            .lock()
            .ok()
            .and_then(|w| w.get(&po.name_any()).copied())
            .is_some_and(|written| cached < written)
    }

    /// The older PlatformOperator for the same package, if `po` is not it.
    pub(super) fn duplicate_winner(&self, po: &PlatformOperator) -> Option<String> {
        let others = self.store.state();
        pom_policy::namespace_clash::duplicate_winner(po, others.iter().map(AsRef::as_ref))
    }

    /// Another PlatformOperator holding the namespace `po` watches or installs into, if any
    /// (issue 33 item 5); `watched_owner` is the owner label of the Namespace it watches.
    pub(super) fn namespace_clash(
        &self,
        po: &PlatformOperator,
        watched_owner: Option<&str>,
    ) -> Option<pom_policy::namespace_clash::NamespaceClash> {
        let others = self.store.state();
        pom_policy::namespace_clash::namespace_clash(
            po,
            others.iter().map(AsRef::as_ref),
            watched_owner,
        )
    }

    /// Whether installing `po` into `namespace` (a first install's default, chosen when the
    /// bundle is read) is refused: an older PlatformOperator watches it.
    pub(super) fn install_clash(
        &self,
        po: &PlatformOperator,
        namespace: &str,
    ) -> Option<pom_policy::namespace_clash::NamespaceClash> {
        let others = self.store.state();
        pom_policy::namespace_clash::install_clash(po, namespace, others.iter().map(AsRef::as_ref))
    }

    /// Whether `owner` is the owner-label value of a PlatformOperator that exists.
    pub(super) fn is_po_owner_label(&self, owner: &str) -> bool {
        self.store
            .state()
            .iter()
            .any(|other| labels::label_value(&other.name_any()) == owner)
    }

    /// Remembers the manifests of catalog-carried `bundle` as applied.
    pub(super) fn remember_objects(&self, bundle: &str, objects: &[String]) {
        if let Ok(mut remembered) = self.applied_objects.lock() {
            remembered.insert(bundle.to_owned(), Arc::new(objects.to_vec()));
        }
    }

    /// The manifests of catalog-carried `bundle` as last applied.
    pub(super) fn remembered_objects(&self, bundle: &str) -> Option<Arc<Vec<String>>> {
        self.applied_objects.lock().ok()?.get(bundle).cloned()
    }

    /// A reconcile of `name` succeeded: its error backoff starts again from the shortest.
    fn forget_attempts(&self, name: &str) {
        if let Ok(mut attempts) = self.attempts.lock() {
            attempts.remove(name);
        }
    }

    pub(super) fn remember_write(&self, name: &str, written: &PlatformOperator) {
        if let (Some(rv), Ok(mut map)) = (
            written
                .metadata
                .resource_version
                .as_deref()
                .and_then(|rv| rv.parse::<u64>().ok()),
            self.written.lock(),
        ) {
            let entry = map.entry(name.to_owned()).or_insert(0);
            *entry = (*entry).max(rv);
        }
    }
}

/// State of the PlatformOperator controller on top of the shared [`Context`].
pub struct PoContext {
    pub ctx: Arc<Context>,
    pub store: Store<PlatformOperator>,
    pub catalog_objects: Store<Catalog>,
    /// Every PO reconcile waits for the Catalogs' first list at once: see [`Readiness`].
    pub catalog_objects_ready: Readiness,
    pub cluster: ClusterWatch,
    /// The replica's caches, for whether the admission guard is in place.
    pub state: ClusterState,
    pub kinds: KindCache,
    /// The manifests of catalog-carried (`olm.bundle.object`) bundles as last applied, by
    /// bundle name: drift repair of a bundle that has left its catalog re-applies them.
    applied_objects: Mutex<HashMap<String, Arc<Vec<String>>>>,
    /// Bundle Secrets as last applied (they are never read): see [`super::objects::AppliedSecrets`].
    pub(super) applied_secrets: super::objects::AppliedSecrets,
    /// The resourceVersion of each PO as this manager last wrote it. The watch cache may lag
    /// behind our own write; judging a PO from a status older than the one just written would
    /// re-apply the bundle moved from (a downgrade mid-update).
    written: Mutex<HashMap<String, u64>>,
    attempts: Mutex<HashMap<String, usize>>,
    /// Where each PO's reconcile is (the await it is in): named when a reconcile is cut at its
    /// deadline, so a wedge says where it happened.
    stages: Mutex<HashMap<String, &'static str>>,
    /// Last clean full checks, reused while nothing they read has changed (`quiet.rs`).
    pub(super) checks: CleanChecks,
    /// When this manager first read each recorded hop instant (`seen_clock.rs`).
    pub(super) seen: super::seen_clock::SeenClock,
    /// The start-up snapshot the first full check of each PO reads from (`first_checks.rs`),
    /// fed by the owned-object metadata watches.
    pub(super) first_checks: Arc<FirstChecks>,
    /// What the API server serves, read before a bundle's CRDs are applied (`served_apis.rs`).
    pub(super) served_apis: super::served_apis::LiveApisCache,
}

/// Runs the PlatformOperator controller until `shutdown`, on `state`'s PlatformOperator cache
/// (the replica's only one: a leader keeps no second copy of every PO).
pub async fn run(ctx: Arc<Context>, state: ClusterState, shutdown: CancellationToken) {
    let client = ctx.client.clone();
    let store = state.platform_operator_store();
    let controller =
        Controller::for_shared_stream(state.platform_operator_triggers(), store.clone());
    ctx.catalogs.track_operators(store.clone());
    let (cluster, cluster_versions) = ClusterWatch::with_stream(&client);
    let po_ctx = Arc::new(PoContext::new(&ctx, &state, cluster, &shutdown));
    let by_owner_label = owner_of(store.clone(), po_ctx.clone());
    let watchers = watchers_of(store.clone(), po_ctx.clone());
    // A catalog change re-judges the POs of the packages it can affect, and only those; a
    // change of what POM reads of the ClusterVersion re-judges every PO (below, through the
    // controller's own watch machinery: a trigger stream read against the PO store was seen to
    // miss a PO after a phase change).
    let triggers = package_triggers(ctx.catalogs.subscribe_changes(), store.clone());
    let all_pos = store.clone();
    tokio::spawn(take_first_snapshot(po_ctx.clone(), shutdown.clone()));
    watch_owned_kinds(
        controller,
        &client,
        (&by_owner_label, &watchers),
        &po_ctx.first_checks,
    )
    // 16 POs at a time: a PO's reconcile is a chain of requests, each waiting on the API
    // server, so with 4 (as before) 1,000 new POs queued behind each other and the manager,
    // not the rollouts, set the pace (`docs/benchmarks.md`, issue 10 item 4). The same PO
    // never runs twice at once.
    .with_config(kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY))
    // Every PO is re-judged when what POM reads of the ClusterVersion changes, not on the
    // CVO's other status churn (condition messages, heartbeats): issue 10 item 3.
    // The stream is the gather step's own ClusterVersion watch: what triggers a reconcile
    // is in the store it reads.
    .watches_stream(
        cluster_versions.predicate_filter(judged_cluster_version, PredicateConfig::default()),
        move |_| pos_of_packages(&all_pos.state(), None),
    )
    .reconcile_on(futures::stream::select(
        triggers,
        proxy_triggers(ctx.operator_proxy.subscribe(), store.clone()),
    ))
    .graceful_shutdown_on(shutdown.cancelled_owned())
    .run(reconcile, error_policy, po_ctx)
    .for_each(|result| async move {
        if let Err(err) = result {
            tracing::debug!(%err, "platformoperator reconcile loop");
        }
    })
    .await;
}

impl PoContext {
    /// The controller's state, with its own Catalog cache.
    fn new(
        ctx: &Arc<Context>,
        state: &ClusterState,
        cluster: ClusterWatch,
        shutdown: &CancellationToken,
    ) -> Self {
        let (catalog_objects, catalog_objects_ready) = spawn_cache(
            Api::<Catalog>::all(ctx.client.clone()),
            watcher::Config::default(),
            shutdown.clone(),
            |_| {},
        );
        Self {
            ctx: ctx.clone(),
            store: state.platform_operator_store(),
            catalog_objects_ready,
            catalog_objects,
            cluster,
            state: state.clone(),
            kinds: KindCache::default(),
            applied_objects: Mutex::default(),
            applied_secrets: super::objects::AppliedSecrets::default(),
            written: Mutex::default(),
            attempts: Mutex::default(),
            stages: Mutex::default(),
            checks: CleanChecks::default(),
            seen: super::seen_clock::SeenClock::default(),
            first_checks: Arc::default(),
            served_apis: super::served_apis::LiveApisCache::default(),
        }
    }
}

/// Takes the snapshot the first full check of each PO reads from (`first_checks.rs`), listing
/// at once while the PO cache lists (the snapshot notes the POs known once it has: bounded,
/// without them it is still taken, and dropped by age), and keeps it until it is no longer
/// needed or `shutdown`.
async fn take_first_snapshot(pctx: Arc<PoContext>, shutdown: CancellationToken) {
    let pos = async {
        let _ = tokio::time::timeout(FIRST_SNAPSHOT_WAIT, pctx.state.wait_until_ready()).await;
        pctx.store.state().iter().map(|po| po.name_any()).collect()
    };
    let take = pctx.first_checks.take(&pctx.ctx.client, &pctx.kinds, pos);
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = take => {}
    }
}

/// Maps an owned object's labels to its PO. The owner label is the PO's name when it fits a
/// label value, else a prefix plus a hash (`labels::label_value`): found by name first, then
/// by its label value. An event on an owned object also makes the PO's last full check stale
/// (`quiet.rs`).
fn owner_of(owners: Store<PlatformOperator>, touched: Arc<PoContext>) -> OwnerMapper {
    Arc::new(move |labels: &BTreeMap<String, String>| {
        let owner = labels.get(labels::OWNER_PO)?;
        let by_name = ObjectRef::<PlatformOperator>::new(owner);
        let found = if owners.get(&by_name).is_some() {
            Some(by_name)
        } else {
            owners
                .find(|po| labels::label_value(&po.name_any()) == *owner)
                .map(|po| ObjectRef::from_obj(&*po))
        };
        if let Some(po) = &found {
            touched.checks.touch(&po.name);
        }
        found
    })
}

/// What maps an owned object's labels to its PO (shared by every owned-kind watch).
type OwnerMapper =
    Arc<dyn Fn(&BTreeMap<String, String>) -> Option<ObjectRef<PlatformOperator>> + Send + Sync>;

/// What maps a Namespace's name to the POs that watch it apart from their install namespace.
type WatchersMapper = Arc<dyn Fn(&str) -> Vec<ObjectRef<PlatformOperator>> + Send + Sync>;

/// The POs whose `spec.watchNamespace` is `namespace`: a labelled Namespace's change (another
/// PO claiming it) re-judges them, and makes their last full check stale, so a quiet watcher
/// is refused as soon as the namespace becomes another's install namespace (issue 33 item 5).
fn watchers_of(pos: Store<PlatformOperator>, touched: Arc<PoContext>) -> WatchersMapper {
    Arc::new(move |namespace: &str| {
        let watchers: Vec<ObjectRef<PlatformOperator>> = pos
            .state()
            .iter()
            .filter(|po| po.spec.watch_namespace.as_deref() == Some(namespace))
            .map(|po| ObjectRef::from_obj(po.as_ref()))
            .collect();
        for po in &watchers {
            touched.checks.touch(&po.name);
        }
        watchers
    })
}

/// Metadata watches of the objects POs own (owner-labelled only), each event mapped to its PO:
/// Deployments and OperatorConditions (rollout and gate), and the other kinds bundles commonly
/// ship, so drift in them (an edit, a delete) is repaired at once and a settled PO needs no
/// reads. Not Secrets: watching them needs `list` on every Secret; drift in a Secret a bundle
/// ships is repaired by the hourly full check instead (`quiet.rs`). The install namespaces and
/// CRDs too (an edit of either is drift). Each event also tells `first` what resourceVersion
/// the object is at (`first_checks.rs`: its `snapshot_kinds` are these kinds).
fn watch_owned_kinds(
    controller: Controller<PlatformOperator>,
    client: &kube::Client,
    (by_owner_label, watchers): (&OwnerMapper, &WatchersMapper),
    first: &Arc<FirstChecks>,
) -> Controller<PlatformOperator> {
    let owned = (client, by_owner_label, first);
    let controller = watch_owned::<Deployment>(controller, owned);
    let controller = watch_owned::<pom_api::olm::OperatorCondition>(controller, owned);
    let controller = watch_owned::<ServiceAccount>(controller, owned);
    let controller = watch_owned::<Service>(controller, owned);
    let controller = watch_owned::<ConfigMap>(controller, owned);
    let controller = watch_owned::<Role>(controller, owned);
    let controller = watch_owned::<RoleBinding>(controller, owned);
    let controller = watch_owned::<ClusterRole>(controller, owned);
    let controller = watch_owned::<ClusterRoleBinding>(controller, owned);
    let controller = watch_owned::<NetworkPolicy>(controller, owned);
    let controller = watch_owned::<PodDisruptionBudget>(controller, owned);
    let controller = watch_owned_namespaces(controller, owned, watchers);
    watch_owned::<CustomResourceDefinition>(controller, owned)
}

/// [`watch_owned`] for Namespaces: each event is mapped to the PO owning the namespace and to
/// the POs watching it ([`watchers_of`]).
fn watch_owned_namespaces(
    controller: Controller<PlatformOperator>,
    (client, by_owner_label, first): (&kube::Client, &OwnerMapper, &Arc<FirstChecks>),
    watchers: &WatchersMapper,
) -> Controller<PlatformOperator> {
    let (map, watchers) = (by_owner_label.clone(), watchers.clone());
    let first = first.clone();
    let events = watcher(
        Api::<kube::api::PartialObjectMeta<Namespace>>::all(client.clone()),
        watcher::Config::default().labels(labels::OWNER_PO),
    )
    .inspect(move |event| {
        if let Ok(event) = event {
            first.observe(event);
        }
    })
    .touched_objects();
    controller.watches_stream(events, move |namespace| {
        let mut pos = watchers(&namespace.name_any());
        pos.extend(map(namespace.labels()));
        pos
    })
}

/// Adds a metadata watch of the objects of kind `K` that carry an owner label, each event
/// told to `first` and mapped to its PlatformOperator by `by_owner_label`.
fn watch_owned<K: CachedKind>(
    controller: Controller<PlatformOperator>,
    (client, by_owner_label, first): (&kube::Client, &OwnerMapper, &Arc<FirstChecks>),
) -> Controller<PlatformOperator> {
    let map = by_owner_label.clone();
    let first = first.clone();
    let events = watcher(
        Api::<kube::api::PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default().labels(labels::OWNER_PO),
    )
    .inspect(move |event| {
        if let Ok(event) = event {
            first.observe(event);
        }
    })
    .touched_objects();
    controller.watches_stream(events, move |obj| map(obj.labels()))
}

/// The POs to re-judge after each catalog change: those of the packages it can affect, or all
/// of them when notices were missed (`None`).
fn package_triggers(
    rx: tokio::sync::broadcast::Receiver<Arc<std::collections::BTreeSet<String>>>,
    store: Store<PlatformOperator>,
) -> impl futures::Stream<Item = ObjectRef<PlatformOperator>> + Send {
    use tokio::sync::broadcast::error::RecvError;
    futures::stream::unfold(rx, |mut rx| async move {
        match rx.recv().await {
            Ok(packages) => Some((Some(packages), rx)),
            Err(RecvError::Lagged(_)) => Some((None, rx)),
            Err(RecvError::Closed) => None,
        }
    })
    .flat_map(move |packages| {
        futures::stream::iter(pos_of_packages(&store.state(), packages.as_deref()))
    })
}

/// Every PO, each time the cluster proxy operators get changes (issue 23 item 3): a proxy
/// change is a configuration change of every operator, judged by each PO's reconcile.
fn proxy_triggers(
    rx: tokio::sync::watch::Receiver<crate::cluster_proxy::OperatorProxy>,
    store: Store<PlatformOperator>,
) -> impl futures::Stream<Item = ObjectRef<PlatformOperator>> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok()?;
        Some(((), rx))
    })
    .flat_map(move |()| futures::stream::iter(pos_of_packages(&store.state(), None)))
}

/// The POs naming one of `packages` (every PO when `None`).
fn pos_of_packages(
    pos: &[Arc<PlatformOperator>],
    packages: Option<&std::collections::BTreeSet<String>>,
) -> Vec<ObjectRef<PlatformOperator>> {
    pos.iter()
        .filter(|po| packages.is_none_or(|p| p.contains(&po.spec.package.name)))
        .map(|po| ObjectRef::from_obj(po.as_ref()))
        .collect()
}

fn error_policy(po: Arc<PlatformOperator>, err: &Error, ctx: Arc<PoContext>) -> RequeueAction {
    ctx.ctx
        .metrics
        .reconcile_failed("platformoperator", err.reason().as_str());
    let name = po.name_any();
    let attempt = ctx
        .attempts
        .lock()
        .map(|mut a| {
            let n = a.entry(name.clone()).or_insert(0);
            *n += 1;
            *n
        })
        .unwrap_or(1);
    tracing::warn!(po = %name, %err, attempt, "reconcile failed");
    let delay = backon::ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(Duration::from_secs(60))
        .with_max_times(usize::MAX)
        .build()
        .nth(attempt.saturating_sub(1))
        .unwrap_or(Duration::from_secs(60));
    RequeueAction::requeue(delay)
}

async fn reconcile(po: Arc<PlatformOperator>, ctx: Arc<PoContext>) -> Result<RequeueAction, Error> {
    let _timer = ctx.ctx.metrics.reconcile_started("platformoperator");
    let api: Api<PlatformOperator> = Api::all(ctx.ctx.client.clone());
    let name = po.name_any();
    let _running = ctx.ctx.liveness.begin("platformoperator", &name);
    ctx.stage(&name, "finalizer");
    let work = finalizer(&api, labels::FINALIZER, po, |event| async {
        match event {
            Finalizer::Apply(po) => apply(&po, &ctx).await,
            Finalizer::Cleanup(po) => cleanup(&po, &ctx).await,
        }
    });
    // A reconcile that does not finish within its deadline is cut and retried: a wedged await
    // must neither freeze this PO (the controller runs one reconcile per object at a time) nor
    // hold a graceful shutdown forever. Cutting is safe: a move's intent is in status before
    // its first write, and every write is an idempotent server-side apply.
    let Ok(result) = tokio::time::timeout(RECONCILE_DEADLINE, work).await else {
        let stage = ctx.stage_of(&name);
        tracing::warn!(po = %name, deadline = ?RECONCILE_DEADLINE, stage, "reconcile cut at its deadline; retrying");
        return Ok(RequeueAction::requeue(Duration::from_secs(1)));
    };
    let action = result.map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(err)
        | kube::runtime::finalizer::Error::CleanupFailed(err) => err,
        other => Error::Finalizer(other.to_string()),
    })?;
    Ok(action)
}

/// A hash of what POM judges the cluster phase from ([`cluster_version_snapshot`]): the
/// ClusterVersion watch passes an event on only when it changes. `Some` always, so an object
/// that appears (or a status that is first written) triggers.
fn judged_cluster_version(cv: &pom_api::openshift::ClusterVersion) -> Option<u64> {
    use std::hash::{DefaultHasher, Hash as _, Hasher as _};
    let mut hasher = DefaultHasher::new();
    format!("{:?}", pom_policy::snapshot::cluster_version_snapshot(cv)).hash(&mut hasher);
    Some(hasher.finish())
}

/// One reconcile of a PO that is not being deleted: gather → decide → plan → the planned
/// steps, each carried out by the executor ([`Run`]). Nothing here branches on what the
/// decision is: that is [`plan`]'s job, pure and table-tested.
async fn apply(po: &PlatformOperator, pctx: &PoContext) -> Result<RequeueAction, Error> {
    let name = po.name_any();
    if pctx.behind_own_write(po) {
        return Ok(RequeueAction::requeue(OWN_WRITE_RETRY));
    }
    let Some(gathered) = pipeline::gather(po, pctx).await? else {
        pctx.forget_attempts(&name);
        return Ok(RequeueAction::requeue(steps::CATALOG_WARMUP_RETRY));
    };
    pctx.stage(&name, "decide");
    let snapshot = gathered.snapshot(po, pctx);
    let decision = decide(&snapshot);
    // Issue 35 item 3: the one update risk the status does not carry (it needs the catalogs).
    let shortfall = gathered
        .requested_patch()
        .and_then(|patch| pom_policy::precheck::patch_shortfall(&snapshot, patch));
    if let Some(why) = &shortfall {
        tracing::debug!(po = %name, why, "the requested patch update would leave it without a bundle that runs there");
    }
    pctx.ctx
        .metrics
        .patch_update_judged(&name, shortfall.is_some());
    tracing::debug!(po = %name, action = ?decision.action, held = ?decision.held, problem = ?decision.problem, "decided");
    let planned = plan(&gathered.plan_input(po, &decision, snapshot.guard.allows_writes()));
    tracing::debug!(po = %name, steps = ?planned, "planned");
    let mut run = Run::new(po, pctx, &gathered, &snapshot, &decision);
    for step in planned {
        if let Some(delay) = run.execute(step).await? {
            pctx.forget_attempts(&name);
            pctx.stage(&name, "done");
            return Ok(RequeueAction::requeue(delay));
        }
    }
    // Every plan ends in a requeue; one that did not looks again at the resync.
    pctx.forget_attempts(&name);
    Ok(RequeueAction::requeue(pctx.ctx.settings.resync_interval))
}

/// Removes everything the PlatformOperator installed (CRDs kept): every object of its
/// inventory, then a sweep by owner label for anything older managers applied without one.
/// The finalizer goes (by returning `Ok`) only once none of them exists any more; a list or
/// delete error, or an object still deleting, keeps it and retries.
async fn cleanup(po: &PlatformOperator, pctx: &PoContext) -> Result<RequeueAction, Error> {
    let name = po.name_any();
    pctx.checks.forget(&name);
    pctx.seen.forget(&name);
    pctx.ctx.metrics.patch_update_judged(&name, false);
    // Deleting is writing: not without the guard (issue 22 item 2); the finalizer stays.
    let guard = pctx
        .state
        .admission_guard(pctx.ctx.settings.require_admission_guard)
        .await;
    if let Some(message) = guard.problem() {
        return Err(Error::AdmissionGuardMissing { message });
    }
    let client = &pctx.ctx.client;
    let recorded = po
        .status
        .as_ref()
        .map(|s| inventory::to_clean_up(&s.inventory))
        .unwrap_or_default();
    let recorded = without_released(po, pctx, recorded).await?;
    let mut deleted = super::objects::delete_recorded(
        &pctx.kinds,
        client,
        &name,
        &recorded,
        FailPoint::MidCleanup,
    )
    .await?;
    // The owner-label sweep only for a PO installed by a manager that kept no inventory: with
    // one, the label is honoured only on what the inventory records (issue 22 item 5), and
    // every object is recorded before it is written.
    let recorded_any = po.status.as_ref().is_some_and(|s| !s.inventory.is_empty());
    if !recorded_any {
        deleted += super::objects::prune(&pctx.kinds, client, &name, None).await?;
    }
    let remaining = super::objects::still_present(&pctx.kinds, client, &name, &recorded).await?;
    if let Some(first) = remaining.first() {
        return Err(Error::StillDeleting {
            count: remaining.len(),
            first: first.describe(),
        });
    }
    // The recorded install namespace, else where an older manager's install went (review M3).
    if let Some(namespace) = pom_policy::namespace_clash::known_install_namespace(po) {
        super::install::release_namespace(client, &namespace, &name).await?;
    }
    tracing::info!(po = %name, deleted, "removed what the PlatformOperator installed (CRDs and the namespace kept, its owner labels taken off)");
    Ok(RequeueAction::await_change())
}

/// `recorded` without what a PO deleted mid-adoption or mid-give-back released from OLM v0
/// (`pom_policy::adopt::give_back::kept_at_cleanup`): OLM's running operator stays.
async fn without_released(
    po: &PlatformOperator,
    pctx: &PoContext,
    recorded: Vec<pom_api::platform_operator::InventoryObject>,
) -> Result<Vec<pom_api::platform_operator::InventoryObject>, Error> {
    let adopting = pom_policy::adopt::takeover::adopting(po).is_some();
    let giving_back = po.annotations().contains_key(labels::GIVE_BACK);
    if !(adopting || giving_back) {
        return Ok(recorded);
    }
    let client = &pctx.ctx.client;
    let mut kept = Vec::new();
    for object in recorded {
        if object.api_version == "v1" && object.kind == "Secret" {
            kept.push(object);
            continue;
        }
        let Some(api) = super::objects::api_of(&pctx.kinds, client, &object).await? else {
            kept.push(object);
            continue;
        };
        let live = api
            .get_opt(&object.name)
            .await
            .map_err(Error::kube(format!("reading {}", object.describe())))?;
        let labels = live.as_ref().map(|l| l.labels());
        if pom_policy::adopt::give_back::kept_at_cleanup(adopting, giving_back, labels) {
            tracing::warn!(po = %po.name_any(), object = %object.describe(),
                "left in place: released from OLM v0 by an adoption (or give-back) that did not finish");
            continue;
        }
        kept.push(object);
    }
    Ok(kept)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn po(name: &str, package: &str) -> Arc<PlatformOperator> {
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": name}, "spec": {"package": {"name": package}}
            }))
            .unwrap(),
        )
    }

    fn cluster_version(history: &str, message: &str) -> pom_api::openshift::ClusterVersion {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version", "resourceVersion": message},
            "spec": {"clusterID": "c"},
            "status": {
                "desired": {"version": "4.17.0"},
                "observedGeneration": 1, "versionHash": "h",
                "history": [{"state": history, "startedTime": "2026-01-01T00:00:00Z", "completionTime": null, "version": "4.17.0", "verified": true}],
                "conditions": [{"type": "Progressing", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z", "message": message}]
            }
        }))
        .unwrap()
    }

    #[test]
    fn only_what_pom_reads_of_the_cluster_version_re_judges_every_po() {
        let working = judged_cluster_version(&cluster_version(
            "Partial",
            "Working towards 4.17.0: 10 of 800 done",
        ));
        let later = judged_cluster_version(&cluster_version(
            "Partial",
            "Working towards 4.17.0: 700 of 800 done",
        ));
        let done =
            judged_cluster_version(&cluster_version("Completed", "Cluster version is 4.17.0"));
        assert_eq!(working, later, "a progress message is churn");
        assert_ne!(working, done, "the update completed");
        assert!(working.is_some());
    }

    /// Review L1: the trigger hash, one row per change: what POM judges from re-judges every
    /// PO (a request made, changed or withdrawn among them), churn does not.
    #[test]
    fn the_cluster_version_trigger_hash_table() {
        let steady = |requested: Option<&str>, message: &str| {
            let mut cv = cluster_version("Completed", message);
            cv.spec.desired_update = requested
                .map(|v| serde_json::from_value(serde_json::json!({"version": v})).unwrap());
            judged_cluster_version(&cv)
        };
        let base = steady(None, "Cluster version is 4.17.0");
        let rows: &[(&str, Option<u64>, bool)] = &[
            ("a condition message", steady(None, "reconciling"), false),
            ("the same request again", steady(Some("4.18.0"), "x"), true),
            (
                "a minor update requested",
                steady(Some("4.18.0"), "Cluster version is 4.17.0"),
                true,
            ),
            (
                "a patch update requested",
                steady(Some("4.17.1"), "Cluster version is 4.17.0"),
                true,
            ),
            (
                "withdrawn (back to no request)",
                steady(None, "Cluster version is 4.17.0"),
                false,
            ),
        ];
        for (label, hash, changes) in rows {
            assert_eq!(hash != &base, *changes, "{label}");
            assert!(hash.is_some(), "{label}");
        }
        assert_ne!(
            steady(Some("4.18.0"), "x"),
            steady(Some("4.18.1"), "x"),
            "another version requested"
        );
    }

    #[test]
    fn a_catalog_change_re_judges_only_the_pos_of_its_packages() {
        let pos = [po("a", "one"), po("b", "two"), po("c", "one")];
        let names = |refs: Vec<ObjectRef<PlatformOperator>>| {
            refs.into_iter().map(|r| r.name).collect::<Vec<_>>()
        };
        let one: std::collections::BTreeSet<String> = ["one".to_owned()].into();
        assert_eq!(names(pos_of_packages(&pos, Some(&one))), ["a", "c"]);
        assert!(pos_of_packages(&pos, Some(&Default::default())).is_empty());
        assert_eq!(
            names(pos_of_packages(&pos, None)),
            ["a", "b", "c"],
            "missed notices: all"
        );
    }
}
