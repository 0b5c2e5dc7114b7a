//! `/healthz`, `/readyz` and `/metrics` (axum), with graceful shutdown.
//!
//! `/healthz` answers as long as the process serves requests. `/readyz` answers 200 once the
//! watch caches of [`crate::cluster_state`] are synced, leader or not, and never depends on an
//! upgrade being underway (readiness probes are no upgrade gate, PRODUCT §7). `/metrics` is the
//! OpenMetrics text of [`crate::metrics::Metrics`] (or the Prometheus text format to a client
//! whose `Accept` prefers `text/plain`), always on its own listener: the probes are
//! plain HTTP for the kubelet, while `/metrics` is HTTPS behind [`crate::metrics_auth`]
//! ([`serve_tls`]) or, for local development only, plain HTTP on loopback.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::Router;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use rustls::ServerConfig;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::liveness::{Liveness, WEDGED_AFTER};
use crate::metrics::{Format, Metrics};
use crate::serving_cert::TlsListener;

/// Why the HTTP endpoints could not start.
#[derive(Debug, thiserror::Error)]
pub enum HealthError {
    #[error("binding {address}: {source}")]
    Bind {
        address: SocketAddr,
        #[source]
        source: std::io::Error,
    },
}

/// What the handlers read.
#[derive(Clone)]
pub struct Endpoints {
    /// Set once the caches are synced; cleared when shutdown starts.
    pub ready: Arc<AtomicBool>,
    pub metrics: Arc<Metrics>,
    /// The reconciles running now: `/healthz` fails when one is wedged.
    pub liveness: Arc<Liveness>,
}

/// Which routes a listener serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routes {
    /// `/healthz` and `/readyz`.
    Probes,
    /// `/metrics`.
    Metrics,
}

/// Builds the router for `routes`.
pub fn router(endpoints: Endpoints, routes: Routes) -> Router {
    let router = match routes {
        Routes::Probes => Router::new()
            .route("/healthz", get(healthz))
            .route("/readyz", get(readyz)),
        Routes::Metrics => Router::new().route("/metrics", get(metrics)),
    };
    router.with_state(endpoints)
}

/// Binds `address` now (so a taken port fails the start) and serves until `shutdown`.
///
/// # Errors
/// [`HealthError::Bind`] when the address cannot be bound.
pub async fn serve(
    address: SocketAddr,
    router: Router,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<()>), HealthError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| HealthError::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| HealthError::Bind { address, source })?;
    let handle = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
        {
            tracing::warn!(%err, %bound, "health/metrics server");
        }
    });
    Ok((bound, handle))
}

/// Like [`serve`], over TLS with `config` (see [`crate::serving_cert`]); a plain-HTTP request
/// fails its handshake and gets no HTTP answer.
///
/// # Errors
/// [`HealthError::Bind`] when the address cannot be bound.
pub async fn serve_tls(
    address: SocketAddr,
    router: Router,
    config: Arc<ServerConfig>,
    shutdown: CancellationToken,
) -> Result<(SocketAddr, JoinHandle<()>), HealthError> {
    let listener = TcpListener::bind(address)
        .await
        .map_err(|source| HealthError::Bind { address, source })?;
    let bound = listener
        .local_addr()
        .map_err(|source| HealthError::Bind { address, source })?;
    let listener = TlsListener::new(listener, bound, config);
    let handle = tokio::spawn(async move {
        if let Err(err) = axum::serve(listener, router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
        {
            tracing::warn!(%err, %bound, "metrics server (TLS)");
        }
    });
    Ok((bound, handle))
}

/// 200 unless a reconcile has been running past [`WEDGED_AFTER`] (then 500, naming it, so
/// the kubelet restarts a manager whose workers are stuck; see `liveness.rs`).
async fn healthz(State(endpoints): State<Endpoints>) -> Response {
    match endpoints
        .liveness
        .wedged(std::time::Instant::now(), WEDGED_AFTER)
    {
        None => (StatusCode::OK, "ok").into_response(),
        Some(wedged) => {
            tracing::error!(%wedged, "failing /healthz");
            (StatusCode::INTERNAL_SERVER_ERROR, wedged.to_string()).into_response()
        }
    }
}

async fn readyz(State(endpoints): State<Endpoints>) -> Response {
    if endpoints.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ok").into_response()
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "caches not synced").into_response()
    }
}

async fn metrics(State(endpoints): State<Endpoints>, headers: HeaderMap) -> Response {
    let accept = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok());
    let format = Format::negotiate(accept);
    match endpoints.metrics.encode_as(format) {
        Ok(body) => ([(header::CONTENT_TYPE, format.content_type())], body).into_response(),
        Err(err) => (StatusCode::INTERNAL_SERVER_ERROR, err.to_string()).into_response(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    async fn get_text(addr: SocketAddr, path: &str) -> (u16, String) {
        get_with(addr, path, "").await
    }

    /// A GET with extra header lines (each ending in CRLF).
    async fn get_with(addr: SocketAddr, path: &str, headers: &str) -> (u16, String) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(format!("GET {path} HTTP/1.0\r\nHost: x\r\n{headers}\r\n").as_bytes())
            .await
            .unwrap();
        let mut text = String::new();
        stream.read_to_string(&mut text).await.unwrap();
        let status = text.split_whitespace().nth(1).unwrap().parse().unwrap();
        (status, text)
    }

    #[tokio::test]
    async fn probes_and_metrics() {
        let endpoints = Endpoints {
            ready: Arc::default(),
            metrics: Arc::new(Metrics::new()),
            liveness: Arc::default(),
        };
        let stop = CancellationToken::new();
        let (addr, handle) = serve(
            "127.0.0.1:0".parse().unwrap(),
            router(endpoints.clone(), Routes::Probes),
            stop.clone(),
        )
        .await
        .unwrap();
        let (metrics_addr, metrics_handle) = serve(
            "127.0.0.1:0".parse().unwrap(),
            router(endpoints.clone(), Routes::Metrics),
            stop.clone(),
        )
        .await
        .unwrap();
        assert_eq!(get_text(addr, "/healthz").await.0, 200);
        assert_eq!(get_text(addr, "/readyz").await.0, 503);
        endpoints.ready.store(true, Ordering::Release);
        assert_eq!(get_text(addr, "/readyz").await.0, 200);
        assert_eq!(get_text(metrics_addr, "/healthz").await.0, 404);
        let (status, text) = get_text(metrics_addr, "/metrics").await;
        assert_eq!(status, 200);
        assert!(
            text.contains(
                "content-type: application/openmetrics-text; version=1.0.0; charset=utf-8"
            ),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        // promtool's format on request; OpenMetrics when it ranks first, as from Prometheus.
        let (status, text) = get_with(
            metrics_addr,
            "/metrics",
            "Accept: text/plain; version=0.0.4\r\n",
        )
        .await;
        assert_eq!(status, 200);
        assert!(
            text.contains("content-type: text/plain; version=0.0.4; charset=utf-8"),
            "{text}"
        );
        assert!(!text.contains("# EOF"), "{text}");
        let (_, text) = get_with(
            metrics_addr,
            "/metrics",
            "Accept: application/openmetrics-text;version=1.0.0;q=0.6,text/plain;version=0.0.4;q=0.3,*/*;q=0.2\r\n",
        )
        .await;
        assert!(
            text.contains("content-type: application/openmetrics-text"),
            "{text}"
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
        stop.cancel();
        handle.await.unwrap();
        metrics_handle.await.unwrap();
    }

    #[tokio::test]
    async fn healthz_fails_while_a_reconcile_is_wedged() {
        let endpoints = Endpoints {
            ready: Arc::default(),
            metrics: Arc::new(Metrics::new()),
            liveness: Arc::default(),
        };
        let stop = CancellationToken::new();
        let (addr, _handle) = serve(
            "127.0.0.1:0".parse().unwrap(),
            router(endpoints.clone(), Routes::Probes),
            stop.clone(),
        )
        .await
        .unwrap();
        let running = endpoints.liveness.begin("platformoperator", "web");
        assert_eq!(
            get_text(addr, "/healthz").await.0,
            200,
            "running, not wedged"
        );
        drop(running);
        let Some(long_ago) =
            std::time::Instant::now().checked_sub(WEDGED_AFTER + std::time::Duration::from_secs(5))
        else {
            return; // a machine up for less than three minutes cannot backdate an Instant
        };
        let stuck = endpoints
            .liveness
            .begin_at("platformoperator", "web", long_ago);
        let (status, text) = get_text(addr, "/healthz").await;
        assert_eq!(status, 500, "{text}");
        assert!(text.contains("platformoperator reconcile of web"), "{text}");
        drop(stuck);
        assert_eq!(
            get_text(addr, "/healthz").await.0,
            200,
            "recovered once it ends"
        );
        stop.cancel();
    }

    #[tokio::test]
    async fn probes_only_listener_has_no_metrics() {
        let endpoints = Endpoints {
            ready: Arc::default(),
            metrics: Arc::new(Metrics::new()),
            liveness: Arc::default(),
        };
        let stop = CancellationToken::new();
        let (addr, _handle) = serve(
            "127.0.0.1:0".parse().unwrap(),
            router(endpoints, Routes::Probes),
            stop.clone(),
        )
        .await
        .unwrap();
        assert_eq!(get_text(addr, "/metrics").await.0, 404);
        stop.cancel();
    }
}
