//! The aggregated ClusterOperator `platform-operators-aggregated` (§8.2): what the CVO reads.
//!
//! [`pom_policy::aggregate::compute`] is pure (all PlatformOperators → the ClusterOperator
//! status); [`run`] recomputes it whenever a PlatformOperator or the cluster phase changes (and
//! every 30 s), creates the ClusterOperator if the payload did not, and writes only when the
//! status changed. It reads the PlatformOperators from the every-replica cache
//! ([`ClusterState`]), not a watch of its own.

use std::sync::Arc;
use std::time::Duration;

use kube::api::{Api, Patch, PatchParams, PostParams};
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
    let cluster = match cluster.view().await {
        Ok((ClusterView::Kubernetes, _)) => ClusterPhaseView::Absent,
        Ok((ClusterView::OpenShift(Ok(phase)), _)) => ClusterPhaseView::Known {
            kind: phase.kind,
            target: phase.target,
        },
        Ok((ClusterView::OpenShift(Err(_)), _)) | Err(_) => ClusterPhaseView::Unknown,
    };
    let status = compute(
        pos,
        &previous,
        &ctx.settings.release_version,
        &ctx.settings.manager_namespace,
        cluster,
        guard,
        &conditions::now(),
    );
    if status == previous {
        return Ok(());
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
