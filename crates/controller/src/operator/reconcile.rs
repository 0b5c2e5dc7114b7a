use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use backon::BackoffBuilder;
use futures::StreamExt;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use pom_api::PlatformOperator;
use pom_api::conditions::{reasons, types};
use pom_api::labels;
use pom_api::openshift::ClusterVersion;
use pom_api::platform_operator::{BundleRef, PinStatus, PlatformOperatorStatus};
use pom_resolver::range::VersionRange;
use pom_resolver::select::{self, ResolveRequest};
use pom_resolver::verdict::{self, Verdict};
use tokio_util::sync::CancellationToken;

use super::install::{self, Installed};
use super::objects::KindCache;
use super::snapshot;
use super::status::{self, Outcome, StatusInput};
use crate::conditions;
use crate::context::{Context, PO_ANNOTATIONS_FIELD_MANAGER, PO_STATUS_FIELD_MANAGER};
use crate::error::Error;

/// State of the PlatformOperator controller on top of the shared [`Context`].
pub struct PoContext {
    pub ctx: Arc<Context>,
    pub store: Store<PlatformOperator>,
    pub kinds: KindCache,
    attempts: Mutex<HashMap<String, usize>>,
}

/// Runs the PlatformOperator controller until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let client = ctx.client.clone();
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let controller = Controller::new(pos, watcher::Config::default().any_semantic());
    let store = controller.store();
    let po_ctx = Arc::new(PoContext {
        ctx: ctx.clone(),
        store: store.clone(),
        kinds: KindCache::default(),
        attempts: Mutex::default(),
    });
    let by_owner_label = |obj: kube::api::PartialObjectMeta<Deployment>| {
        obj.labels()
            .get(labels::OWNER_PO)
            .map(|owner| ObjectRef::<PlatformOperator>::new(owner))
    };
    let all_store = store.clone();
    let catalog_changes = tokio_stream_from_watch(ctx.catalogs.subscribe());
    controller
        .with_config(kube::runtime::controller::Config::default().concurrency(4))
        .watches(
            Api::<kube::api::PartialObjectMeta<Deployment>>::all(client.clone()),
            watcher::Config::default().labels(labels::OWNER_PO),
            by_owner_label,
        )
        .watches(
            Api::<kube::api::PartialObjectMeta<pom_api::olm::OperatorCondition>>::all(
                client.clone(),
            ),
            watcher::Config::default().labels(labels::OWNER_PO),
            |obj| {
                obj.labels()
                    .get(labels::OWNER_PO)
                    .map(|owner| ObjectRef::<PlatformOperator>::new(owner))
            },
        )
        .watches(
            Api::<ClusterVersion>::all(client.clone()),
            watcher::Config::default(),
            move |_| {
                all_store
                    .state()
                    .iter()
                    .map(|po| ObjectRef::from_obj(po.as_ref()))
                    .collect::<Vec<_>>()
            },
        )
        .reconcile_all_on(catalog_changes)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, po_ctx)
        .for_each(|result| async move {
            if let Err(err) = result {
                tracing::debug!(%err, "platformoperator reconcile loop");
            }
        })
        .await;
}

/// Every change of the catalog cache, as a stream (each item re-resolves every PO).
fn tokio_stream_from_watch(
    rx: tokio::sync::watch::Receiver<u64>,
) -> impl futures::Stream<Item = ()> + Send {
    futures::stream::unfold(rx, |mut rx| async move {
        rx.changed().await.ok().map(|()| ((), rx))
    })
}

fn error_policy(po: Arc<PlatformOperator>, err: &Error, ctx: Arc<PoContext>) -> Action {
    ctx.ctx
        .metrics
        .reconcile_failed("platformoperator", err.reason());
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
    Action::requeue(delay)
}

async fn reconcile(po: Arc<PlatformOperator>, ctx: Arc<PoContext>) -> Result<Action, Error> {
    let _timer = ctx.ctx.metrics.reconcile_started("platformoperator");
    let api: Api<PlatformOperator> = Api::all(ctx.ctx.client.clone());
    let result = finalizer(&api, labels::FINALIZER, po, |event| async {
        match event {
            Finalizer::Apply(po) => apply(&po, &ctx).await,
            Finalizer::Cleanup(po) => cleanup(&po, &ctx).await,
        }
    })
    .await;
    let action = result.map_err(|e| match e {
        kube::runtime::finalizer::Error::ApplyFailed(err)
        | kube::runtime::finalizer::Error::CleanupFailed(err) => err,
        other => Error::Finalizer(other.to_string()),
    })?;
    Ok(action)
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

async fn apply(po: &PlatformOperator, pctx: &PoContext) -> Result<Action, Error> {
    let ctx = &pctx.ctx;
    let name = po.name_any();
    let previous = po.status.clone().unwrap_or_default();
    let now = conditions::now();
    let namespace = po
        .spec
        .install_namespace
        .clone()
        .unwrap_or_else(|| name.clone());

    if let Some(winner) = duplicate_winner(&pctx.store, po) {
        let st = status::compute(StatusInput {
            previous: &previous,
            generation: po.metadata.generation,
            now: &now,
            outcome: Outcome::Duplicate { winner },
            installed: None,
            desired: None,
            pin: previous.pin.clone(),
            max_openshift_version: previous.max_open_shift_version.clone(),
            verdict: Verdict::upgradeable("not installed by this PlatformOperator"),
            deadline_exceeded: false,
        });
        write_status(po, pctx, &previous, st).await?;
        return Ok(Action::requeue(ctx.settings.resync_interval));
    }

    let installed_before = previous.installed_bundle.clone();
    let installed_version = installed_before
        .as_ref()
        .and_then(|b| semver::Version::parse(&b.version).ok());
    let cluster = snapshot::cluster(&ctx.client).await?;
    let kube_version = kube_version(&ctx.client).await;
    // Right after a (re)start the catalog cache is still filling: judging now would report a
    // running operator as failed (and the ClusterOperator as Degraded mid-update). Wait.
    if snapshot::catalogs_loading(
        &ctx.client,
        &ctx.catalogs,
        po.spec.package.catalog.as_deref(),
    )
    .await?
    {
        return Ok(Action::requeue(Duration::from_secs(2)));
    }

    // Resolve (pure).
    let mut failure: Option<(&'static str, String)> = None;
    let mut resolution = None;
    let mut pin = previous.pin.clone();
    match (
        &cluster,
        snapshot::catalogs(&ctx.catalogs, po.spec.package.catalog.as_deref()),
    ) {
        (Err(cluster_err), _) => {
            failure = Some((
                reasons::RESOLUTION_FAILED,
                format!("cannot judge the cluster version: {cluster_err}"),
            ))
        }
        (_, Err(catalog_err)) => failure = Some((reasons::SOURCE_FAILED, catalog_err)),
        (Ok(phase), Ok(catalogs)) => {
            let inputs: Vec<select::CatalogInput<'_>> = catalogs
                .iter()
                .map(|(n, p, c)| (n.as_str(), *p, c.as_ref()))
                .collect();
            let version_range = parse_range(
                po.spec.package.version_range.as_deref(),
                "spec.package.versionRange",
            );
            let steady = parse_range(
                po.spec.steady_state_version_range.as_deref(),
                "spec.steadyStateVersionRange",
            );
            match (version_range, steady) {
                (Err(e), _) | (_, Err(e)) => failure = Some((reasons::RESOLUTION_FAILED, e)),
                (Ok(version_range), Ok(steady_state_range)) => {
                    let request = ResolveRequest {
                        catalogs: &inputs,
                        package: &po.spec.package.name,
                        channel: po.spec.package.channel.as_deref(),
                        installed: installed_before
                            .as_ref()
                            .zip(installed_version.clone())
                            .map(|(b, v)| select::InstalledBundle {
                                name: b.name.clone(),
                                version: v,
                            }),
                        version_range,
                        steady_state_range,
                        cluster: phase.clone(),
                        kube_version: kube_version.clone(),
                    };
                    match select::resolve(&request) {
                        Ok(res) => {
                            pin = Some(PinStatus {
                                range: res.pin.range.clone(),
                                reason: res.pin.reason.to_string(),
                            });
                            resolution = Some((res, catalogs.clone()));
                        }
                        Err(err) => failure = Some((reasons::RESOLUTION_FAILED, err.to_string())),
                    }
                }
            }
        }
    }

    // Choose the target: the resolved bundle, unless the last move has not settled or the
    // running operator says it must not be upgraded now (§7).
    let installed_gate = match &installed_before {
        Some(b) => super::operator_condition::read(&ctx.client, &namespace, &b.name).await?,
        None => None,
    };
    let operator_blocks = installed_gate
        .as_ref()
        .filter(|g| g.upgradeable == Some(false));
    let last_settled =
        previous.active_hop.as_ref().is_none_or(|h| h.settled) && operator_blocks.is_none();
    let mut desired_bundle = None;
    let mut outcome = Outcome::Failed {
        reason: reasons::RESOLUTION_FAILED,
        message: String::new(),
    };
    let mut installed_now = installed_before.clone();
    let mut max_ocp = previous.max_open_shift_version.clone();
    if let Some((reason, message)) = failure.clone() {
        outcome = Outcome::Failed { reason, message };
    } else if let Some((res, catalogs)) = &resolution {
        let moving = !res.stays;
        let target_is_new = moving && last_settled;
        if moving && !last_settled {
            desired_bundle = Some(BundleRef {
                name: res.bundle.name.clone(),
                version: res.bundle.version.to_string(),
            });
        }
        let target = if target_is_new || installed_before.is_none() {
            install::Target::from_resolution(res, catalogs)
        } else {
            install::Target::installed(installed_before.as_ref(), res, catalogs)
        };
        match install::install(pctx, po, &namespace, &target).await {
            Ok(Installed {
                bundle,
                waiting_for,
                max_openshift_version,
                wrote,
                gate,
            }) => {
                if gate.as_ref().is_some_and(|g| g.reported)
                    && !po
                        .annotations()
                        .contains_key(labels::OPERATOR_CONDITION_REPORTED)
                {
                    mark_reported(&ctx.client, &name).await?;
                }
                if wrote > 0 {
                    tracing::info!(po = %name, bundle = %bundle.name, objects = wrote, "applied bundle objects");
                }
                max_ocp = max_openshift_version.or(max_ocp);
                // The pin is stated for the installed version (§4.2): after a move, restate it.
                let moved = installed_before.as_ref().map(|b| &b.name) != Some(&bundle.name);
                if let (true, Ok(phase), Ok(version)) =
                    (moved, &cluster, semver::Version::parse(&bundle.version))
                {
                    let steady = parse_range(po.spec.steady_state_version_range.as_deref(), "")
                        .ok()
                        .flatten();
                    let restated =
                        pom_resolver::pin::pin_for(Some(&version), phase.as_ref(), steady.as_ref());
                    pin = Some(PinStatus {
                        range: restated.range,
                        reason: restated.reason.to_string(),
                    });
                }
                // Once this move has settled, say whether another hop follows (so nobody,
                // the ClusterOperator included, mistakes a settled hop for the end of the way).
                if waiting_for.is_none()
                    && desired_bundle.is_none()
                    && let Ok(phase) = &cluster
                {
                    desired_bundle =
                        next_move(po, catalogs, &bundle, phase.as_ref(), kube_version.as_ref());
                }
                installed_now = Some(bundle);
                outcome = Outcome::Applied { waiting_for };
            }
            Err(err) => {
                outcome = Outcome::Failed {
                    reason: err.reason(),
                    message: err.to_string(),
                }
            }
        }
    }

    // Upgradeable verdict for what runs now (§8.3).
    let verdict = match (&cluster, &installed_now) {
        (Err(e), _) => Verdict::unknown(format!("cannot judge the cluster version: {e}")),
        (Ok(None), _) => {
            Verdict::upgradeable("no ClusterVersion: OpenShift compatibility checks are off")
        }
        (Ok(Some(_)), None) => Verdict::upgradeable("nothing installed"),
        (Ok(Some(phase)), Some(b)) => {
            let max = max_ocp.as_deref().map(parse_max_ocp);
            let installed = select::InstalledBundle {
                name: b.name.clone(),
                version: semver::Version::parse(&b.version)
                    .unwrap_or(semver::Version::new(0, 0, 0)),
            };
            let package = resolution.as_ref().and_then(|(_, cats)| {
                cats.iter()
                    .find_map(|(_, _, c)| c.packages.get(&po.spec.package.name).cloned())
            });
            verdict::bundle_upgradeability(
                &installed,
                max.as_ref(),
                &phase.current,
                package.as_ref(),
                po.spec.package.channel.as_deref(),
            )
        }
    };

    // An operator that says it must not be upgraded blocks the cluster's minor updates too.
    let verdict = match operator_blocks {
        Some(gate) if verdict.allows_update() => Verdict {
            status: pom_resolver::verdict::VerdictStatus::False,
            reason: reasons::OPERATOR_NOT_UPGRADEABLE.to_owned(),
            message: format!("the operator reports Upgradeable=False: {}", gate.message),
        },
        _ => verdict,
    };

    let deadline = crate::catalog::parse_go_duration(&po.spec.progress_deadline)
        .unwrap_or(Duration::from_secs(600));
    let new_status_probe = previous.active_hop.clone();
    let deadline_exceeded = new_status_probe
        .as_ref()
        .filter(|h| !h.settled)
        .and_then(|h| h.started_at.parse::<k8s_openapi::jiff::Timestamp>().ok())
        .is_some_and(|started| {
            now.0.duration_since(started).as_secs()
                > i64::try_from(deadline.as_secs()).unwrap_or(i64::MAX)
        });

    let new_status = status::compute(StatusInput {
        previous: &previous,
        generation: po.metadata.generation,
        now: &now,
        outcome,
        installed: installed_now,
        desired: desired_bundle,
        pin,
        max_openshift_version: max_ocp,
        verdict,
        deadline_exceeded,
    });
    let settled = new_status.active_hop.as_ref().is_none_or(|h| h.settled);
    let pending = new_status.desired_bundle.is_some();
    let failed = conditions::find(&new_status.conditions, types::DEGRADED)
        .is_some_and(|c| c.status == "True");
    write_status(po, pctx, &previous, new_status).await?;
    if let Ok(mut attempts) = pctx.attempts.lock() {
        attempts.remove(&name);
    }
    if failed {
        return Ok(Action::requeue(Duration::from_secs(15)));
    }
    if !settled || pending || resolution.as_ref().is_some_and(|(r, _)| !r.stays) {
        return Ok(Action::requeue(Duration::from_secs(3)));
    }
    Ok(Action::requeue(ctx.settings.resync_interval))
}

/// The bundle the PO would move to next from `installed`, if any (pure resolution).
fn next_move(
    po: &PlatformOperator,
    catalogs: &[(String, i32, Arc<pom_resolver::fbc::Catalog>)],
    installed: &pom_api::platform_operator::InstalledBundle,
    phase: Option<&pom_resolver::cluster::ClusterPhase>,
    kube_version: Option<&semver::Version>,
) -> Option<BundleRef> {
    let inputs: Vec<select::CatalogInput<'_>> = catalogs
        .iter()
        .map(|(n, p, c)| (n.as_str(), *p, c.as_ref()))
        .collect();
    let request = ResolveRequest {
        catalogs: &inputs,
        package: &po.spec.package.name,
        channel: po.spec.package.channel.as_deref(),
        installed: Some(select::InstalledBundle {
            name: installed.name.clone(),
            version: semver::Version::parse(&installed.version).ok()?,
        }),
        version_range: parse_range(po.spec.package.version_range.as_deref(), "").ok()?,
        steady_state_range: parse_range(po.spec.steady_state_version_range.as_deref(), "").ok()?,
        cluster: phase.cloned(),
        kube_version: kube_version.cloned(),
    };
    let next = select::resolve(&request).ok().filter(|r| !r.stays)?;
    Some(BundleRef {
        name: next.bundle.name,
        version: next.bundle.version.to_string(),
    })
}

/// Remembers on the PO that its operator reports OperatorConditions (`upgradeGate: Auto`).
async fn mark_reported(client: &kube::Client, name: &str) -> Result<(), Error> {
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
    .map_err(Error::kube(format!("annotating PlatformOperator {name}")))?;
    Ok(())
}

fn parse_range(text: Option<&str>, field: &str) -> Result<Option<VersionRange>, String> {
    text.map(|t| VersionRange::parse(t).map_err(|e| format!("{field}: {e}")))
        .transpose()
}

fn parse_max_ocp(text: &str) -> pom_resolver::fbc::MaxOpenShiftVersion {
    let parsed = text
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) => pom_resolver::fbc::MaxOpenShiftVersion::Valid { major, minor },
        None => pom_resolver::fbc::MaxOpenShiftVersion::Invalid {
            raw: text.to_owned(),
            reason: "not X.Y".to_owned(),
        },
    }
}

async fn kube_version(client: &kube::Client) -> Option<semver::Version> {
    let info = client.apiserver_version().await.ok()?;
    pom_resolver::version::parse_tolerant(&info.git_version).ok()
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
    publish_transitions(po, pctx, previous, &new).await;
    let api: Api<PlatformOperator> = Api::all(pctx.ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "status": new,
    });
    api.patch_status(
        &name,
        &PatchParams::apply(PO_STATUS_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube(format!(
        "writing the status of PlatformOperator {name}"
    )))?;
    Ok(())
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
        let bad = (condition.type_ == types::DEGRADED && condition.status == "True")
            || (condition.type_ == types::INSTALLED
                && condition.status == "False"
                && condition.reason != reasons::INSTALLING);
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
        if let Err(err) = pctx.ctx.recorder.publish(&event, &po.object_ref(&())).await {
            tracing::debug!(%err, "publishing an event");
        }
    }
}

async fn cleanup(po: &PlatformOperator, pctx: &PoContext) -> Result<Action, Error> {
    let name = po.name_any();
    let deleted = super::objects::prune(&pctx.kinds, &pctx.ctx.client, &name, None).await?;
    tracing::info!(po = %name, deleted, "removed what the PlatformOperator installed (CRDs kept)");
    Ok(Action::await_change())
}
