//! Running the manager: the controllers ([`run_all`]) and, around them, the process lifecycle
//! ([`run_manager`]): probes and metrics, leader election, graceful shutdown.
//!
//! Lifecycle of a replica:
//! 1. serve `/healthz`, `/readyz`, `/metrics`; start the watch caches (ready once synced);
//! 2. with leader election, wait for the Lease (a standby stays ready and idle);
//! 3. as leader, run the controllers;
//! 4. on shutdown (SIGTERM): stop taking new work, let in-flight reconciles finish within the
//!    shutdown timeout, release the Lease, return `Ok` (exit 0);
//! 5. on losing the Lease: stop the controllers at once, without waiting for in-flight work,
//!    and return [`RunError::Leader`] (exit non-zero), as controller-runtime does: a replica
//!    that may no longer lead must not write, and a fresh process starts from a clean state.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::Context;
use crate::cluster_state::ClusterState;
use crate::health::{self, Endpoints, HealthError, Routes};
use crate::leader::{self, LeaderError, LeaseSettings};
use crate::metrics_auth::{MetricsAuth, require_metrics_reader};
use crate::serving_cert::{self, CertError, ServingCert};

/// Runs the Catalog and PlatformOperator reconcilers and the ClusterOperator writer (which
/// reads `state`'s PlatformOperator cache); returns when `shutdown` is cancelled and in-flight
/// reconciles have finished.
pub async fn run_all(ctx: Arc<Context>, state: ClusterState, shutdown: CancellationToken) {
    // Only the leader pulls, so only it watches the image mirror configuration (the first pull
    // would start it too): a refusal is reported at once, not at the first pull.
    ctx.image_mirrors.start();
    // The cluster's proxy and trusted CA bundle, read before the first pull (issue 23 item 2).
    crate::cluster_proxy::start(ctx.clone(), shutdown.clone()).await;
    tokio::join!(
        crate::catalog::run(ctx.clone(), shutdown.clone()),
        crate::operator::run(ctx.clone(), state.clone(), shutdown.clone()),
        crate::cluster_operator::run(ctx, state, shutdown),
    );
}

/// How the process runs around the controllers.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// `None` runs the controllers at once (a single replica, or tests).
    pub leader_election: Option<LeaseSettings>,
    /// Where `/healthz` and `/readyz` are served (plain HTTP, for the kubelet).
    pub health_address: SocketAddr,
    /// Whether and how `/metrics` is served.
    pub metrics: MetricsServing,
    /// How long in-flight reconciles may take to finish after shutdown starts.
    pub shutdown_timeout: Duration,
}

/// How `/metrics` is served, always on its own listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MetricsServing {
    /// Not served.
    Off,
    /// HTTPS with the certificate in these PEM files (re-read when they change); every request
    /// needs a bearer token allowed to `get /metrics` ([`crate::metrics_auth`]).
    Secure {
        address: SocketAddr,
        cert_file: PathBuf,
        key_file: PathBuf,
    },
    /// Plain HTTP without any check, for local development and tests; only ever on a loopback
    /// address (the flags refuse anything else).
    InsecureLoopback { address: SocketAddr },
}

/// Why the manager stopped other than by a requested shutdown.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error(transparent)]
    Health(#[from] HealthError),
    #[error("metrics serving certificate: {0}")]
    Cert(#[from] CertError),
    #[error(transparent)]
    Leader(#[from] LeaderError),
    #[error("the controllers stopped without a shutdown request")]
    ControllersStopped,
}

/// Runs one replica until `shutdown` (then `Ok`) or until it must stop (then `Err`).
///
/// # Errors
/// See [`RunError`]: a probe address that cannot be bound, a lost Lease, or controllers that
/// ended on their own.
pub async fn run_manager(
    ctx: Arc<Context>,
    options: RunOptions,
    shutdown: CancellationToken,
) -> Result<(), RunError> {
    let http_stop = CancellationToken::new();
    let endpoints = Endpoints {
        ready: Arc::default(),
        metrics: ctx.metrics.clone(),
        liveness: ctx.liveness.clone(),
    };
    let (health_address, health_task) = health::serve(
        options.health_address,
        health::router(endpoints.clone(), Routes::Probes),
        http_stop.clone(),
    )
    .await?;
    tracing::info!(address = %health_address, "serving /healthz and /readyz");
    let mut http_tasks = vec![health_task];
    match &options.metrics {
        MetricsServing::Off => tracing::info!("not serving /metrics"),
        MetricsServing::InsecureLoopback { address } => {
            let (bound, task) = health::serve(
                *address,
                health::router(endpoints.clone(), Routes::Metrics),
                http_stop.clone(),
            )
            .await?;
            tracing::warn!(address = %bound, "serving /metrics over plain HTTP without authentication (local development only)");
            http_tasks.push(task);
        }
        MetricsServing::Secure {
            address,
            cert_file,
            key_file,
        } => {
            let cert = ServingCert::load(cert_file, key_file)?;
            let router = health::router(endpoints.clone(), Routes::Metrics).layer(
                axum::middleware::from_fn_with_state(
                    MetricsAuth::new(ctx.client.clone()),
                    require_metrics_reader,
                ),
            );
            let (bound, task) =
                health::serve_tls(*address, router, cert.server_config()?, http_stop.clone())
                    .await?;
            tracing::info!(address = %bound, cert = %cert_file.display(), "serving /metrics over HTTPS to authorised scrapers");
            http_tasks.push(task);
            http_tasks.push(serving_cert::watch(
                cert,
                serving_cert::RELOAD_INTERVAL,
                http_stop.clone(),
            ));
        }
    }

    let state = ClusterState::start(&ctx.client, &shutdown);
    ctx.metrics.observe(state.clone());
    let ready = endpoints.ready.clone();
    let ready_shutdown = shutdown.clone();
    let readiness = state.clone();
    tokio::spawn(async move {
        let state = readiness;
        tokio::select! {
            () = state.wait_until_ready() => {
                ready.store(true, Ordering::Release);
                tracing::info!("caches synced: ready");
            }
            () = ready_shutdown.cancelled() => {}
        }
    });

    let result = lead_and_run(&ctx, &state, &options, &shutdown).await;
    endpoints.ready.store(false, Ordering::Release);
    http_stop.cancel();
    for task in http_tasks {
        let _ = task.await;
    }
    result
}

async fn lead_and_run(
    ctx: &Arc<Context>,
    state: &ClusterState,
    options: &RunOptions,
    shutdown: &CancellationToken,
) -> Result<(), RunError> {
    let leadership = match &options.leader_election {
        None => None,
        Some(settings) => {
            tracing::info!(lease = %settings.name, namespace = %settings.namespace, identity = %settings.identity, "waiting for the leader lease");
            match leader::acquire(&ctx.client, settings, shutdown).await? {
                Some(leadership) => Some(leadership),
                None => return Ok(()),
            }
        }
    };
    // Without leader election nothing is ever lost: a token nobody cancels.
    let lost = leadership
        .as_ref()
        .map(leader::Leadership::lost_token)
        .unwrap_or_default();
    ctx.metrics.set_leader(true);
    let controllers = CancellationToken::new();
    let mut running = tokio::spawn(run_all(ctx.clone(), state.clone(), controllers.clone()));

    let stop_now = |running: &tokio::task::JoinHandle<()>| {
        controllers.cancel();
        running.abort();
        ctx.metrics.set_leader(false);
    };
    tokio::select! {
        () = lost.cancelled() => {
            stop_now(&running);
            return Err(lost_error(leadership).await);
        }
        _ = &mut running => {
            stop_now(&running);
            if let Some(leadership) = leadership {
                leadership.release().await?;
            }
            return Err(RunError::ControllersStopped);
        }
        () = shutdown.cancelled() => {}
    }

    tracing::info!(timeout = ?options.shutdown_timeout, "shutdown: no new reconciles; waiting for in-flight ones");
    controllers.cancel();
    tokio::select! {
        finished = tokio::time::timeout(options.shutdown_timeout, &mut running) => {
            if finished.is_err() {
                tracing::warn!(timeout = ?options.shutdown_timeout, "in-flight reconciles did not finish in time: stopping them");
            }
        }
        () = lost.cancelled() => {
            stop_now(&running);
            return Err(lost_error(leadership).await);
        }
    }
    stop_now(&running);
    if let Some(leadership) = leadership {
        leadership.release().await?;
        tracing::info!("released the leader lease");
    }
    Ok(())
}

async fn lost_error(leadership: Option<leader::Leadership>) -> RunError {
    match leadership {
        Some(leadership) => match leadership.release().await {
            Err(err) => RunError::Leader(err),
            Ok(()) => RunError::ControllersStopped,
        },
        None => RunError::ControllersStopped,
    }
}
