//! Running the manager in-process for a test, and waiting on what it reports.

use std::future::Future;
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::Api;
use pom_api::PlatformOperator;
use pom_controller::context::Settings;
use tokio_util::sync::CancellationToken;

/// The first-report window of the e2e managers (production: two minutes): the fixtures'
/// operators never report unless a test makes them, so a hop does not wait for one.
pub const TEST_AUTO_SETTLE_WINDOW: Duration = Duration::from_secs(1);

/// A manager running in the test's runtime; dropping it (or [`Manager::stop`]) shuts it down.
pub struct Manager {
    token: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
    metrics: std::sync::Arc<pom_controller::metrics::Metrics>,
}

impl Manager {
    /// Starts every reconciler against `client`.
    #[must_use]
    pub fn start(client: Client, settings: Settings) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // The manager's log goes to the test's captured output, shown when the test fails:
        // info by default (what a wedged or refused reconcile says), `RUST_LOG` for more.
        let filter = tracing_subscriber::EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,pom_controller=info"));
        let _ = tracing_subscriber::fmt()
            .with_env_filter(filter)
            .with_test_writer()
            .try_init();
        let token = CancellationToken::new();
        let ctx = pom_controller::Context::new(client, settings);
        let metrics = ctx.metrics.clone();
        let state = pom_controller::cluster_state::ClusterState::start(&ctx.client, &token);
        let handle = tokio::spawn(pom_controller::run::run_all(ctx, state, token.clone()));
        Self {
            token,
            handle: Some(handle),
            metrics,
        }
    }

    /// The PlatformOperator reconciles this manager has finished (its
    /// `pom_reconcile_duration_seconds_count`, as `/metrics` shows it): a test that must know a
    /// reconcile ran, when the reconcile writes and reads nothing it could wait for.
    #[must_use]
    pub fn po_reconciles_finished(&self) -> u64 {
        let text = self.metrics.encode().unwrap_or_default();
        text.lines()
            .find_map(|line| {
                line.strip_prefix(
                    "pom_reconcile_duration_seconds_count{controller=\"platformoperator\"} ",
                )
            })
            .and_then(|count| count.trim().parse().ok())
            .unwrap_or(0)
    }

    /// Settings suited to tests: fast resync, the loopback registry reachable over HTTP, and
    /// [`TEST_AUTO_SETTLE_WINDOW`].
    #[must_use]
    pub fn test_settings(insecure_registries: Vec<String>) -> Settings {
        Settings {
            insecure_registries,
            default_poll_interval: Duration::from_secs(5),
            resync_interval: Duration::from_secs(20),
            release_version: "4.99.0-pom-test".into(),
            // The fixtures' operators never report unless a test makes them: a hop does not
            // wait the production two minutes for a first report.
            auto_settle_window: TEST_AUTO_SETTLE_WINDOW,
            // Most planes have no shipped install; the tests of the guard run the manager as
            // a process with it (`security_guard_presence`).
            require_admission_guard: false,
            ..Settings::default()
        }
    }

    /// Stops the manager and waits for in-flight reconciles to finish.
    pub async fn stop(mut self) {
        self.token.cancel();
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
    }
}

impl Drop for Manager {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// Polls `check` every 250 ms until it returns `Some`, or panics after `timeout` with `what`.
pub async fn eventually<T, F, Fut>(timeout: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let started = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            started.elapsed() < timeout,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The status and reason of condition `type_` on PlatformOperator `name`.
pub async fn po_condition(
    client: &Client,
    name: &str,
    type_: &str,
) -> Option<(String, String, String)> {
    let po = Api::<PlatformOperator>::all(client.clone())
        .get_opt(name)
        .await
        .ok()??;
    let status = po.status?;
    if status.observed_generation != po.metadata.generation {
        return None;
    }
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}

/// Condition `type_` of `po` as (status, reason, message), whatever generation it describes
/// (for rules over every version a watch sees; [`po_condition`] reads the current one).
#[must_use]
pub fn condition_of(po: &PlatformOperator, type_: &str) -> Option<(String, String, String)> {
    po.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}
