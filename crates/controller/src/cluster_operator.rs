//! The aggregated ClusterOperator `platform-operators-aggregated` (§8.2): what the CVO reads.
//!
//! [`pom_policy::aggregate::compute`] is pure (all PlatformOperators → the ClusterOperator
//! status); [`run`] recomputes it whenever a PlatformOperator or the cluster phase changes (and
//! every 30 s), creates the ClusterOperator if the payload did not, and writes only when the
//! status changed. It reads the PlatformOperators from the every-replica cache
//! ([`ClusterState`]), not a watch of its own.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use pom_api::PlatformOperator;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, ClusterOperatorSpec};
use pom_policy::aggregate::{ClusterPhaseView, compute};
use pom_policy::snapshot::{ClusterView, GuardState};
use tokio_util::sync::CancellationToken;

use crate::cluster_state::ClusterState;
use crate::conditions;
use crate::context::{CLUSTER_OPERATOR_FIELD_MANAGER, Context};
use crate::error::Error;
use crate::operator::gather::ClusterWatch;

/// Keeps the aggregated ClusterOperator up to date until `shutdown`.
pub async fn run(ctx: Arc<Context>, state: ClusterState, shutdown: CancellationToken) {
    let (phase_changes, mut phase_rx) = tokio::sync::watch::channel(0u64);
    let cluster = ClusterWatch::start(&ctx.client, &shutdown, phase_changes);
    let sync_loop = async {
        // Never resolves when the cache's watches stopped first.
        state.wait_until_ready().await;
        loop {
            let guard = state
                .admission_guard(ctx.settings.require_admission_guard)
                .await;
            if let Err(err) = sync(&ctx, &cluster, &state.platform_operators(), &guard).await {
                tracing::warn!(%err, "updating the aggregated ClusterOperator");
            }
            tokio::select! {
                () = state.platform_operators_changed() => {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                }
                Ok(()) = phase_rx.changed() => {}
                () = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
        }
    };
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = sync_loop => {}
    }
}

/// One pass: create the ClusterOperator if absent, write its status if it changed.
///
/// `pos` is the cache as it was when the pass started; the pass then reads the API (and, at a
/// leadership start, waits for discovery and the ClusterVersion list), so a move recorded
/// meanwhile, or by the previous leader and not yet in this replica's cache, is not in it.
/// `Upgradeable=False` from it is safe (fail closed); `Upgradeable=True` is written only as
/// computed again from a fresh read of every PO, while no PO status write of this manager runs
/// (`Context::status_writes`), so it never lands after a move it did not see (§8.3; the chaos
/// suite's seed 2014, `e2e/tests/chaos.rs`).
pub async fn sync(
    ctx: &Context,
    cluster: &ClusterWatch,
    pos: &[Arc<PlatformOperator>],
    guard: &GuardState,
) -> Result<(), Error> {
    let api: Api<ClusterOperator> = Api::all(ctx.client.clone());
    let existing = match api
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .map_err(Error::kube("reading the aggregated ClusterOperator"))?
    {
        Some(co) => co,
        None => {
            let co = ClusterOperator::new(AGGREGATED_CLUSTER_OPERATOR, ClusterOperatorSpec {});
            match api.create(&PostParams::default(), &co).await {
                Ok(created) => created,
                Err(kube::Error::Api(s)) if s.code == 409 => api
                    .get(AGGREGATED_CLUSTER_OPERATOR)
                    .await
                    .map_err(Error::kube("reading the aggregated ClusterOperator"))?,
                Err(err) => {
                    return Err(Error::kube("creating the aggregated ClusterOperator")(err));
                }
            }
        }
    };
    let previous = existing.status.clone().unwrap_or_default();
    let cluster = match cluster.view().await.map(|reading| reading.view) {
        Ok(ClusterView::Kubernetes) => ClusterPhaseView::Absent,
        Ok(ClusterView::OpenShift(Ok(phase))) => ClusterPhaseView::Known {
            kind: phase.kind,
            target: phase.target,
        },
        Ok(ClusterView::OpenShift(Err(_))) | Err(_) => ClusterPhaseView::Unknown,
    };
    let now = conditions::now();
    let aggregate = |pos: &[Arc<PlatformOperator>]| {
        compute(
            pos,
            &previous,
            &ctx.settings.release_version,
            &ctx.settings.manager_namespace,
            cluster.clone(),
            guard,
            &now,
        )
    };
    let mut status = aggregate(pos);
    if status == previous {
        return Ok(());
    }
    // Held until the write below is done.
    let mut _no_status_writes = None;
    if says_upgradeable(&status) {
        _no_status_writes = Some(ctx.status_writes.write().await);
        let fresh: Vec<Arc<PlatformOperator>> = Api::<PlatformOperator>::all(ctx.client.clone())
            .list(&ListParams::default())
            .await
            .map_err(Error::kube("listing PlatformOperators"))?
            .items
            .into_iter()
            .map(Arc::new)
            .collect();
        status = aggregate(&fresh);
        if status == previous {
            return Ok(());
        }
    }
    let patch = serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "status": status});
    api.patch_status(
        AGGREGATED_CLUSTER_OPERATOR,
        &PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube("writing the aggregated ClusterOperator status"))?;
    Ok(())
}

/// Whether `status` says `Upgradeable=True`.
fn says_upgradeable(status: &pom_api::openshift::ClusterOperatorStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == pom_api::conditions::types::UPGRADEABLE && c.status == "True")
}
