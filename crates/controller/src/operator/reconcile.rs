//! The PlatformOperator reconciler: gather → decide → act → report.
//!
//! 1. **Gather** ([`gather`]): one [`PoSnapshot`] from the watch caches (PO, Catalogs,
//!    ClusterVersion), one discovery per run, and the PO's OperatorCondition.
//! 2. **Decide** ([`pom_policy::decide`]): pure; the same function `pomctl plan` calls.
//! 3. **Act** ([`install`]): apply the decided bundle (or re-apply what runs), report typed
//!    waits and the OperatorCondition's gate.
//! 4. **Report** ([`pom_policy::status::compute`]): pure; written only when it changed.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::events::{Event, EventType};
use backon::BackoffBuilder;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action as RequeueAction, Controller};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::utils::PredicateConfig;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource, ResourceExt};
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::labels;
use pom_api::platform_operator::PlatformOperatorStatus;
use pom_api::{Catalog, PlatformOperator};
use pom_policy::inventory;
use pom_policy::snapshot::UnsettledMoveAction;
use pom_policy::status::{self, ActOutcome, StatusInput};
use pom_policy::{Action, PoDecision, PoSnapshot, Problem, decide};
use tokio_util::sync::CancellationToken;

use super::gather::{self, ClusterWatch};
use super::install::{self, Content, Target};
use super::objects::KindCache;
use super::quiet::{self, CleanChecks};
use crate::cluster_state::ClusterState;
use crate::conditions;
use crate::context::{Context, PO_ANNOTATIONS_FIELD_MANAGER, PO_STATUS_FIELD_MANAGER};
use crate::error::Error;
use crate::fail_point::{self, FailPoint};
use crate::watch_cache::{CachedKind, Readiness, spawn_cache};

/// How soon to look again while a Catalog the PO uses has not been read since the start.
const CATALOG_WARMUP_RETRY: Duration = Duration::from_secs(2);
/// The longest one PlatformOperator reconcile may take (a bundle pull has its own, longer,
/// deadline and is cached by digest once done, so a retry resumes from the cache).
const RECONCILE_DEADLINE: Duration = Duration::from_secs(60);
/// PlatformOperators reconciled at once.
const RECONCILE_CONCURRENCY: u16 = 16;
/// How soon to look again when the watch cache has not caught up with our own status write.
const OWN_WRITE_RETRY: Duration = Duration::from_millis(500);

impl PoContext {
    /// Records that the reconcile of `po` is now at `stage`.
    fn stage(&self, po: &str, stage: &'static str) {
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

    fn remember_write(&self, name: &str, written: &PlatformOperator) {
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
    applied_secrets: super::objects::AppliedSecrets,
    /// The resourceVersion of each PO as this manager last wrote it. The watch cache may lag
    /// behind our own write; judging a PO from a status older than the one just written would
    /// re-apply the bundle moved from (a downgrade mid-update).
    written: Mutex<HashMap<String, u64>>,
    attempts: Mutex<HashMap<String, usize>>,
    /// Where each PO's reconcile is (the await it is in): named when a reconcile is cut at its
    /// deadline, so a wedge says where it happened.
    stages: Mutex<HashMap<String, &'static str>>,
    /// Last clean full checks, reused while nothing they read has changed (`quiet.rs`).
    checks: CleanChecks,
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
    let (catalog_objects, catalog_objects_ready) = spawn_cache(
        Api::<Catalog>::all(client.clone()),
        watcher::Config::default(),
        shutdown.clone(),
        |_| {},
    );
    let po_ctx = Arc::new(PoContext {
        ctx: ctx.clone(),
        store: store.clone(),
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
    });
    // The owner label is the PO's name when it fits a label value, else a prefix plus a hash
    // (`labels::label_value`): found by name first, then by its label value.
    // An event on an owned object also makes the PO's last full check stale (`quiet.rs`).
    let owners = store.clone();
    let touched = po_ctx.clone();
    let by_owner_label = move |labels: &std::collections::BTreeMap<String, String>| {
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
    };
    // A catalog change re-judges the POs of the packages it can affect, and only those; a
    // change of what POM reads of the ClusterVersion re-judges every PO (below, through the
    // controller's own watch machinery: a trigger stream read against the PO store was seen to
    // miss a PO after a phase change).
    let triggers = package_triggers(ctx.catalogs.subscribe_changes(), store.clone());
    let all_pos = store.clone();
    // The other kinds bundles commonly ship: metadata only, owned objects only, so drift in
    // them (an edit, a delete) is repaired at once and a settled PO needs no reads. Not
    // Secrets: watching them needs `list` on every Secret; drift in a Secret a bundle ships is
    // repaired by the hourly full check instead (`quiet.rs`).
    let controller = watch_owned::<ServiceAccount>(controller, &client, &by_owner_label);
    let controller = watch_owned::<Service>(controller, &client, &by_owner_label);
    let controller = watch_owned::<ConfigMap>(controller, &client, &by_owner_label);
    let controller = watch_owned::<Role>(controller, &client, &by_owner_label);
    let controller = watch_owned::<RoleBinding>(controller, &client, &by_owner_label);
    let controller = watch_owned::<ClusterRole>(controller, &client, &by_owner_label);
    let controller = watch_owned::<ClusterRoleBinding>(controller, &client, &by_owner_label);
    let controller = watch_owned::<NetworkPolicy>(controller, &client, &by_owner_label);
    let controller = watch_owned::<PodDisruptionBudget>(controller, &client, &by_owner_label);
    controller
        // 16 POs at a time: a PO's reconcile is a chain of requests, each waiting on the API
        // server, so with 4 (as before) 1,000 new POs queued behind each other and the manager,
        // not the rollouts, set the pace (`docs/benchmarks.md`, issue 10 item 4). The same PO
        // never runs twice at once.
        .with_config(
            kube::runtime::controller::Config::default().concurrency(RECONCILE_CONCURRENCY),
        )
        .watches(
            Api::<kube::api::PartialObjectMeta<Deployment>>::all(client.clone()),
            watcher::Config::default().labels(labels::OWNER_PO),
            {
                let by_owner_label = by_owner_label.clone();
                move |obj| by_owner_label(obj.labels())
            },
        )
        .watches(
            Api::<kube::api::PartialObjectMeta<pom_api::olm::OperatorCondition>>::all(
                client.clone(),
            ),
            watcher::Config::default().labels(labels::OWNER_PO),
            {
                let f = by_owner_label.clone();
                move |obj| f(obj.labels())
            },
        )
        // Every PO is re-judged when what POM reads of the ClusterVersion changes, not on the
        // CVO's other status churn (condition messages, heartbeats): issue 10 item 3.
        // The stream is the gather step's own ClusterVersion watch: what triggers a reconcile
        // is in the store it reads.
        .watches_stream(
            cluster_versions.predicate_filter(judged_cluster_version, PredicateConfig::default()),
            move |_| {
                all_pos
                    .state()
                    .iter()
                    .map(|po| ObjectRef::from_obj(po.as_ref()))
                    .collect::<Vec<_>>()
            },
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

/// Adds a metadata watch of the objects of kind `K` that carry an owner label, each event
/// mapped to its PlatformOperator by `by_owner_label`.
fn watch_owned<K: CachedKind>(
    controller: Controller<PlatformOperator>,
    client: &kube::Client,
    by_owner_label: &(
         impl Fn(&std::collections::BTreeMap<String, String>) -> Option<ObjectRef<PlatformOperator>>
         + Clone
         + Send
         + Sync
         + 'static
     ),
) -> Controller<PlatformOperator> {
    let map = by_owner_label.clone();
    controller.watches(
        Api::<kube::api::PartialObjectMeta<K>>::all(client.clone()),
        watcher::Config::default().labels(labels::OWNER_PO),
        move |obj| map(obj.labels()),
    )
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

/// The older PlatformOperator for the same package, if this one is not it.
fn duplicate_winner(store: &Store<PlatformOperator>, po: &PlatformOperator) -> Option<String> {
    let key = |p: &PlatformOperator| {
        (
            p.metadata.creation_timestamp.clone().map(|t| t.0),
            p.name_any(),
        )
    };
    store
        .state()
        .iter()
        .filter(|other| {
            other.spec.package.name == po.spec.package.name
                && other.meta().deletion_timestamp.is_none()
        })
        .min_by_key(|other| key(other))
        .filter(|winner| winner.name_any() != po.name_any())
        .map(|winner| winner.name_any())
}

async fn apply(po: &PlatformOperator, pctx: &PoContext) -> Result<RequeueAction, Error> {
    let ctx = &pctx.ctx;
    let name = po.name_any();
    let previous = po.status.clone().unwrap_or_default();
    // The install namespace: as recorded at the first install; else as the spec names it; else,
    // for a PO installed before POM recorded it, its name; else the bundle's suggestion,
    // chosen when the bundle is read (`None` here).
    let fixed_namespace = previous
        .install_namespace
        .clone()
        .or_else(|| po.spec.install_namespace.clone())
        .or_else(|| {
            (previous.installed_bundle.is_some() || !previous.inventory.is_empty())
                .then(|| name.clone())
        });
    let namespace = fixed_namespace.clone().unwrap_or_else(|| name.clone());

    if pctx.behind_own_write(po) {
        return Ok(RequeueAction::requeue(OWN_WRITE_RETRY));
    }

    // What a full check started from (read first: an event from here on makes it stale).
    let observed = quiet::Observed {
        epoch: pctx.checks.epoch(&name),
        catalogs: ctx.catalogs.package_generation(&po.spec.package.name),
        generation: po.metadata.generation,
    };

    // Gather. The Catalog objects must have been listed once: an empty store right after a
    // start would read as "no Catalog" and judge a running operator on nothing.
    pctx.stage(&name, "gather: catalog store");
    if pctx.catalog_objects_ready.wait().await.is_err() {
        return Ok(RequeueAction::requeue(CATALOG_WARMUP_RETRY));
    }
    pctx.stage(&name, "gather: cluster view");
    let (cluster, kube_version) = pctx.cluster.view().await?;
    let known_catalogs: Vec<String> = pctx
        .catalog_objects
        .state()
        .iter()
        .map(|c| c.name_any())
        .collect();
    let catalogs = gather::catalogs(
        &ctx.catalogs,
        &po.spec.package.name,
        po.spec.package.catalog.as_deref(),
        &known_catalogs,
    );
    // A clean full check still holds when nothing it read has changed: its gate is current
    // (an OperatorCondition event would have made it stale) and no read is needed.
    let installed_name = previous.installed_bundle.as_ref().map(|b| b.name.as_str());
    let reusable = pctx.checks.reusable(&name, &observed, installed_name);
    let gate = match &reusable {
        Some(clean) => clean.gate.clone(),
        None => {
            pctx.stage(&name, "gather: operator condition");
            gather::operator_gate(&ctx.client, po, &namespace, installed_name).await?
        }
    };
    let gate_read = gate.clone();
    pctx.stage(&name, "gather: objects of a lost status");
    let found_bundle_label = gather::found_bundle_label(&ctx.client, po).await?;
    pctx.stage(&name, "gather: admission guard");
    let guard = pctx
        .state
        .admission_guard(ctx.settings.require_admission_guard)
        .await;
    pctx.stage(&name, "decide");
    let snapshot = gather::snapshot(
        po,
        duplicate_winner(&pctx.store, po),
        cluster,
        kube_version,
        &catalogs,
        gate,
        Timestamp::now(),
        found_bundle_label,
        guard,
        &ctx.operator_proxy.borrow(),
    );

    // Decide.
    let decision = decide(&snapshot);
    tracing::debug!(po = %name, action = ?decision.action, held = ?decision.held, problem = ?decision.problem, "decided");
    if let Action::WaitForCatalog { catalog } = &decision.action {
        // Right after a (re)start the catalog cache is still filling: judging now would report
        // a running operator as failed (and the ClusterOperator as Degraded mid-update).
        tracing::debug!(po = %name, %catalog, "waiting for the catalog to be read");
        pctx.stage(&name, "done: waiting for the catalog");
        return Ok(RequeueAction::requeue(CATALOG_WARMUP_RETRY));
    }

    if let Some(settled) = interrupted_prune(&decision, &previous, installed_name) {
        tracing::info!(po = %name, bundle = %settled, "finishing an interrupted prune before the next move");
        pctx.stage(&name, "prune");
        prune_settled(po, pctx, &previous, settled, true).await?;
        return Ok(RequeueAction::requeue(Duration::from_secs(1)));
    }

    // Prepare (fetch, render, refuse: reads only), then record the intent of a move in status
    // before its first object is written, so a crash anywhere in the apply resumes this move
    // and never skips it; then apply.
    let reported_before = snapshot.gate.reported;
    let mut previous = previous;
    pctx.stage(&name, "prepare");
    let quiet_keep = match (&decision.action, &reusable) {
        (Action::Keep, Some(clean)) if !decision.reconfigures() => Some(clean.report.clone()),
        _ => None,
    };
    let full_check = quiet_keep.is_none();
    let mut applied_namespace: Option<String> = None;
    let outcome = match quiet_keep {
        // Nothing the last full check read has changed: what it found still holds.
        Some(report) => ActOutcome::Applied(Box::new(report)),
        None => match prepare(
            pctx,
            po,
            fixed_namespace.as_deref(),
            &snapshot,
            &decision,
            &catalogs,
        )
        .await
        {
            Err(problem) => ActOutcome::Failed(problem),
            Ok(None) => ActOutcome::Skipped,
            Ok(Some((target, prepared))) => {
                let namespace = prepared.namespace().to_owned();
                applied_namespace = Some(namespace.clone());
                let applying = prepared.inventory(&namespace);
                let intent = status::intent(&StatusInput {
                    applying: &applying,
                    applying_image: prepared.image(),
                    applying_namespace: Some(&namespace),
                    ..status_input(
                        po,
                        &snapshot,
                        &decision,
                        reported_before,
                        &previous,
                        &ActOutcome::Skipped,
                        ctx.settings.auto_settle_window,
                    )
                });
                if let Some(intent) = intent {
                    pctx.stage(&name, "intent write");
                    write_status(po, pctx, &previous, intent.clone()).await?;
                    previous = intent;
                }
                if matches!(decision.action, Action::Move(_)) {
                    report_exceptions(po, pctx, &target.name, &prepared.lifted()).await;
                    if let Some(details) = prepared.crd_safety_overridden() {
                        report_crd_safety_override(po, pctx, &target.name, details).await;
                    }
                    if let Some(action) = &decision.unsettled_move_action {
                        report_unsettled_move_action(po, pctx, action, &target.name).await;
                    }
                }
                pctx.stage(&name, "apply");
                match install::apply(
                    &pctx.ctx,
                    po,
                    &namespace,
                    &target,
                    prepared,
                    &pctx.applied_secrets,
                )
                .await
                {
                    Ok(report) => {
                        if report.wrote > 0 {
                            fail_point::hit(FailPoint::BetweenApplyAndStatus);
                        }
                        if let Content::Objects(objects) = &target.content
                            && let Ok(mut remembered) = pctx.applied_objects.lock()
                        {
                            remembered.insert(target.name.clone(), Arc::new(objects.clone()));
                        }
                        ActOutcome::Applied(Box::new(report))
                    }
                    Err(err) => ActOutcome::Failed(problem_of(&err, true)),
                }
            }
        },
    };
    if let ActOutcome::Failed(problem) = &outcome {
        tracing::warn!(po = %name, reason = %problem.reason, message = %problem.message, "applying the decision failed; what ran before keeps running");
    }
    if let ActOutcome::Applied(report) = &outcome
        && report.wrote > 0
    {
        tracing::info!(po = %name, bundle = %report.bundle.name, objects = report.wrote, "applied bundle objects");
    }
    // Remembered whenever it is seen, by the gather or by the apply: an operator that reported
    // keeps gating its moves under `upgradeGate: Auto`, even when the apply that saw it failed
    // or its OperatorCondition is gone since (found by the state-machine test).
    let reported_now =
        matches!(&outcome, ActOutcome::Applied(report) if status::reported_now(report));
    if (reported_before || reported_now)
        && snapshot.guard.allows_writes()
        && !po
            .annotations()
            .contains_key(labels::OPERATOR_CONDITION_REPORTED)
    {
        let written = mark_reported(&ctx.client, &name).await?;
        pctx.remember_write(&name, &written);
    }

    // Report.
    let new_status = status::compute(&StatusInput {
        applying_namespace: applied_namespace.as_deref(),
        ..status_input(
            po,
            &snapshot,
            &decision,
            reported_before,
            &previous,
            &outcome,
            ctx.settings.auto_settle_window,
        )
    });
    let requeue = status::requeue(
        &new_status,
        &outcome,
        ctx.settings.resync_interval,
        snapshot.now,
    );
    // A full check of what runs that wrote nothing and found it settled can stand for the
    // next reconciles until something it read changes.
    match &outcome {
        ActOutcome::Applied(report)
            if full_check
                && report.wrote == 0
                && matches!(decision.action, Action::Keep)
                && new_status.active_hop.as_ref().is_none_or(|h| h.settled) =>
        {
            pctx.checks.record(
                &name,
                quiet::Clean {
                    observed,
                    bundle: report.bundle.name.clone(),
                    gate: gate_read,
                    report: (**report).clone(),
                    checked_at: std::time::Instant::now(),
                },
            );
        }
        _ if full_check => pctx.checks.forget(&name),
        _ => {}
    }
    let settled_on = match &outcome {
        ActOutcome::Applied(report) if new_status.active_hop.as_ref().is_none_or(|h| h.settled) => {
            Some(report.bundle.name.clone())
        }
        _ => None,
    };
    pctx.stage(&name, "status write");
    let recorded_before = !previous.inventory.is_empty();
    write_status(po, pctx, &previous, new_status.clone()).await?;
    // Prune after settle (§6, §7): what the bundle moved from still owns stays until the move
    // to `settled_on` has settled; a failed or unsettled move removes nothing.
    if let Some(bundle) = settled_on {
        pctx.stage(&name, "prune");
        prune_settled(po, pctx, &new_status, &bundle, recorded_before).await?;
    }
    if let Ok(mut attempts) = pctx.attempts.lock() {
        attempts.remove(&name);
    }
    pctx.stage(&name, "done");
    Ok(RequeueAction::requeue(requeue))
}

/// The settled bundle whose prune after settle a crash (or a failed write) cut short, when the
/// decision starts a move: it is finished first, so a move never records more than the two
/// bundles it moves between, and what only an older bundle had does not outlive a second move
/// (found by the chaos suite).
fn interrupted_prune<'a>(
    decision: &PoDecision,
    previous: &'a PlatformOperatorStatus,
    installed: Option<&str>,
) -> Option<&'a str> {
    let hop = previous.active_hop.as_ref().filter(|h| h.settled)?;
    (matches!(decision.action, Action::Move(_))
        && installed == Some(hop.to.as_str())
        && inventory::has_other_bundles(&previous.inventory, &hop.to))
    .then_some(hop.to.as_str())
}

/// Removes what only the bundles `settled` replaced owned, by the inventory (nothing to do,
/// and no API call, in a steady state), then drops their entries from it. A PO installed by a
/// manager that kept no inventory is swept once by owner label instead.
async fn prune_settled(
    po: &PlatformOperator,
    pctx: &PoContext,
    status: &PlatformOperatorStatus,
    settled: &str,
    recorded_before: bool,
) -> Result<(), Error> {
    let name = po.name_any();
    let client = &pctx.ctx.client;
    let pruned = if recorded_before {
        if !inventory::has_other_bundles(&status.inventory, settled) {
            return Ok(());
        }
        let doomed = inventory::to_prune(&status.inventory, settled);
        super::objects::delete_recorded(&pctx.kinds, client, &name, &doomed, FailPoint::MidPrune)
            .await?
    } else {
        super::objects::prune(&pctx.kinds, client, &name, Some(settled)).await?
    };
    if pruned > 0 {
        tracing::info!(po = %name, bundle = %settled, pruned, "removed what older bundles had and this one does not");
    }
    let after = PlatformOperatorStatus {
        inventory: inventory::after_prune(&status.inventory, settled),
        ..status.clone()
    };
    write_status(po, pctx, status, after).await
}

/// What the status of `po` is computed from.
fn status_input<'a>(
    po: &'a PlatformOperator,
    snapshot: &PoSnapshot<'_>,
    decision: &'a PoDecision,
    reported_before: bool,
    previous: &'a PlatformOperatorStatus,
    outcome: &'a ActOutcome,
    auto_settle_window: Duration,
) -> StatusInput<'a> {
    StatusInput {
        applying: &[],
        applying_image: None,
        applying_namespace: None,
        previous,
        generation: po.metadata.generation,
        now: snapshot.now,
        decision,
        outcome,
        upgrade_gate: po.spec.upgrade_gate,
        reported_before,
        auto_settle_window,
    }
}

/// The bundle the decision puts on the cluster, fetched, rendered and checked (nothing
/// written): `None` when there is nothing to put; a problem says why it cannot be (what ran
/// before keeps running).
async fn prepare(
    pctx: &PoContext,
    po: &PlatformOperator,
    namespace: Option<&str>,
    snapshot: &PoSnapshot<'_>,
    decision: &PoDecision,
    catalogs: &gather::GatheredCatalogs,
) -> Result<Option<(Target, install::Prepared)>, Problem> {
    let contents = catalogs.contents();
    let target = match &decision.action {
        Action::Nothing | Action::WaitForCatalog { .. } => return Ok(None),
        Action::Move(target) => {
            let mut target =
                Target::for_move(target, &contents).map_err(|err| problem_of(&err, true))?;
            // A move recorded before a crash applies the digest its intent recorded, not what
            // the catalog's tag names now: the running operator only changes through a move.
            if let Some(digest) = po
                .status
                .as_ref()
                .and_then(|s| s.active_hop.as_ref())
                .filter(|hop| !hop.settled && hop.to == target.name)
                .and_then(|hop| hop.image.clone())
                && matches!(target.content, Content::Image(_))
            {
                target.content = Content::Image(digest);
            }
            target
        }
        Action::Keep => {
            let Some(installed) = &snapshot.installed else {
                return Ok(None);
            };
            match Target::for_keep(
                &installed.bundle,
                installed.max_openshift_version.clone(),
                &contents,
            ) {
                Ok(target) => target,
                Err(err) => match remembered_objects(pctx, &installed.bundle.name) {
                    Some(objects) => Target {
                        name: installed.bundle.name.clone(),
                        version: installed.bundle.version.clone(),
                        content: Content::Objects(objects.to_vec()),
                        max_openshift_version: installed.max_openshift_version.clone(),
                        catalog: None,
                    },
                    // What runs keeps running; only its repair is lost (not a failure of it).
                    None => return Err(problem_of(&err, false)),
                },
            }
        }
    };
    let certificates = pctx
        .cluster
        .discovery()
        .await
        .map_err(|err| problem_of(&err, true))?
        .certificates;
    let prepared = install::prepare(
        &pctx.ctx,
        &pctx.kinds,
        po,
        namespace,
        &target,
        certificates,
        decision.config.as_ref().unwrap_or(&snapshot.config.desired),
        snapshot.now,
        &|owner: &str| {
            pctx.store
                .state()
                .iter()
                .any(|other| labels::label_value(&other.name_any()) == owner)
        },
    )
    .await
    .map_err(|err| problem_of(&err, true))?;
    Ok(Some((target, prepared)))
}

/// A failure to report; `degrades` unless only drift repair of a running operator is lost.
fn problem_of(err: &Error, degrades: bool) -> Problem {
    Problem {
        reason: err.reason(),
        message: if degrades {
            err.to_string()
        } else {
            format!("drift repair is paused: {err}")
        },
        degrades,
    }
}

fn remembered_objects(pctx: &PoContext, bundle: &str) -> Option<Arc<Vec<String>>> {
    pctx.applied_objects.lock().ok()?.get(bundle).cloned()
}

/// Remembers on the PO that its operator reports OperatorConditions (`upgradeGate: Auto`).
async fn mark_reported(client: &kube::Client, name: &str) -> Result<PlatformOperator, Error> {
    let api: Api<PlatformOperator> = Api::all(client.clone());
    let patch = serde_json::json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "metadata": {"name": name, "annotations": {labels::OPERATOR_CONDITION_REPORTED: "true"}},
    });
    api.patch(
        name,
        &PatchParams::apply(PO_ANNOTATIONS_FIELD_MANAGER),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube(format!("annotating PlatformOperator {name}")))
}

async fn write_status(
    po: &PlatformOperator,
    pctx: &PoContext,
    previous: &PlatformOperatorStatus,
    new: PlatformOperatorStatus,
) -> Result<(), Error> {
    if &new == previous {
        return Ok(());
    }
    let name = po.name_any();
    pctx.stage(&po.name_any(), "events");
    publish_transitions(po, pctx, previous, &new).await;
    let api: Api<PlatformOperator> = Api::all(pctx.ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "status": new,
    });
    // Shared with other PO writes; excludes the aggregator's check-and-write of Upgradeable=True.
    let _ordered = pctx.ctx.status_writes.read().await;
    let written = api
        .patch_status(
            &name,
            &PatchParams::apply(PO_STATUS_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "writing the status of PlatformOperator {name}"
        )))?;
    pctx.remember_write(&name, &written);
    Ok(())
}

/// A move applied with the admin's content-policy exceptions says so, once per move (a
/// Warning Event on the PlatformOperator and a log line): an exception is never silent.
async fn report_exceptions(po: &PlatformOperator, pctx: &PoContext, bundle: &str, list: &[String]) {
    if list.is_empty() {
        return;
    }
    let note = format!(
        "bundle {bundle} is applied with what spec.contentExceptions and spec.consent allow: {}",
        list.join("; ")
    );
    tracing::warn!(po = %po.name_any(), %bundle, exceptions = %list.join("; "), "applying a bundle with content-policy exceptions");
    let event = Event {
        type_: EventType::Warning,
        reason: Reason::ContentExceptionUsed.as_str().to_owned(),
        note: Some(note.chars().take(1000).collect()),
        action: "Install".to_owned(),
        secondary: None,
    };
    if let Err(err) = pctx.ctx.events.publish(&event, &po.object_ref(&())).await {
        tracing::debug!(%err, "publishing an event");
    }
}

/// An unsafe CRD change is applied on the admin's `crd-safety-override` annotation: a Warning
/// Event and a log line say which bundle and what the check refused (issue 23 item 5).
async fn report_crd_safety_override(
    po: &PlatformOperator,
    pctx: &PoContext,
    bundle: &str,
    details: &str,
) {
    let note = format!(
        "bundle {bundle} changes CRDs in a way POM judges unsafe ({details}); applied anyway because annotation {}={bundle} says so",
        labels::CRD_SAFETY_OVERRIDE
    );
    tracing::warn!(po = %po.name_any(), %bundle, %details, "applying an unsafe CRD change on the admin's override");
    let event = Event {
        type_: EventType::Warning,
        reason: Reason::CRDSafetyOverridden.as_str().to_owned(),
        note: Some(note.chars().take(1000).collect()),
        action: "Upgrade".to_owned(),
        secondary: None,
    };
    if let Err(err) = pctx.ctx.events.publish(&event, &po.object_ref(&())).await {
        tracing::debug!(%err, "publishing an event");
    }
}

/// The admin's action on a move that did not settle is carried out: a Normal Event and a log
/// line say which move and what starts now (issue 25 item 2).
async fn report_unsettled_move_action(
    po: &PlatformOperator,
    pctx: &PoContext,
    action: &UnsettledMoveAction,
    bundle: &str,
) {
    let (reason, note) = match action {
        UnsettledMoveAction::Skip(unsettled) => (
            Reason::UnsettledMoveSkipped,
            format!(
                "the move to {unsettled} had not settled; as annotation {} asks, the move to {bundle} starts",
                labels::UNSETTLED_MOVE
            ),
        ),
        UnsettledMoveAction::Abandon(unsettled) => (
            Reason::UnsettledMoveAbandoned,
            format!(
                "the move to {unsettled} had not settled; as annotation {} asks, POM moves back to {bundle}, which ran before it",
                labels::UNSETTLED_MOVE
            ),
        ),
    };
    tracing::warn!(po = %po.name_any(), %bundle, %note, "carrying out the admin's action on an unsettled move");
    let event = Event {
        type_: EventType::Normal,
        reason: reason.as_str().to_owned(),
        note: Some(note),
        action: "Upgrade".to_owned(),
        secondary: None,
    };
    if let Err(err) = pctx.ctx.events.publish(&event, &po.object_ref(&())).await {
        tracing::debug!(%err, "publishing an event");
    }
}

/// One Kubernetes Event per condition that changed status or reason.
async fn publish_transitions(
    po: &PlatformOperator,
    pctx: &PoContext,
    previous: &PlatformOperatorStatus,
    new: &PlatformOperatorStatus,
) {
    for condition in &new.conditions {
        let old = conditions::find(&previous.conditions, &condition.type_);
        if old.is_some_and(|o| o.status == condition.status && o.reason == condition.reason) {
            continue;
        }
        let status = ConditionStatus::parse_lenient(&condition.status);
        let bad = (condition.type_ == types::DEGRADED && status == ConditionStatus::True)
            || (condition.type_ == types::INSTALLED
                && status == ConditionStatus::False
                && condition.reason != Reason::Installing.as_str());
        let event = Event {
            type_: if bad {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: condition.reason.clone(),
            note: Some(
                format!(
                    "{}={}: {}",
                    condition.type_, condition.status, condition.message
                )
                .chars()
                .take(1000)
                .collect(),
            ),
            action: condition.type_.clone(),
            secondary: None,
        };
        if let Err(err) = pctx.ctx.events.publish(&event, &po.object_ref(&())).await {
            tracing::debug!(%err, "publishing an event");
        }
    }
}

/// Removes everything the PlatformOperator installed (CRDs kept): every object of its
/// inventory, then a sweep by owner label for anything older managers applied without one.
/// The finalizer goes (by returning `Ok`) only once none of them exists any more; a list or
/// delete error, or an object still deleting, keeps it and retries.
async fn cleanup(po: &PlatformOperator, pctx: &PoContext) -> Result<RequeueAction, Error> {
    let name = po.name_any();
    pctx.checks.forget(&name);
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
    tracing::info!(po = %name, deleted, "removed what the PlatformOperator installed (CRDs kept)");
    Ok(RequeueAction::await_change())
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
