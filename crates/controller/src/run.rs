//! Running every controller of the manager until shutdown.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::Context;

/// Runs the Catalog and PlatformOperator reconcilers and the ClusterOperator writer; returns
/// when `shutdown` is cancelled and in-flight reconciles have finished.
pub async fn run_all(ctx: Arc<Context>, shutdown: CancellationToken) {
    tokio::join!(
        crate::catalog::run(ctx.clone(), shutdown.clone()),
        crate::operator::run(ctx.clone(), shutdown.clone()),
        crate::cluster_operator::run(ctx, shutdown),
    );
}
