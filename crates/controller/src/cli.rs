//! The `pom-manager` command line: flags (each with an environment fallback), logging, signals,
//! and the process exit code. It lives in the library so that the e2e suite can run exactly this
//! entry point as a separate process (see `e2e/src/bin/pom-manager-e2e.rs`).
//!
//! Exit codes: 0 after a requested shutdown (SIGTERM/SIGINT); 1 when the leader Lease was lost,
//! the API server is unreachable at start, a probe or metrics address cannot be bound, or the
//! metrics serving certificate does not load; 2 for bad flags (clap).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{CommandFactory, Parser};
use tokio_util::sync::CancellationToken;

use crate::api_metrics::ApiRequests;
use crate::context::Settings;
use crate::leader::LeaseSettings;
use crate::run::{MetricsServing, RunError, RunOptions};

/// Flags, each with an environment-variable fallback.
#[derive(Parser, Debug, Clone)]
#[command(name = "pom-manager", version, about = "Platform Operators Manager")]
pub struct Flags {
    /// Release version reported in the aggregated ClusterOperator's `versions`.
    #[arg(long, env = "RELEASE_VERSION", default_value = "0.0.1-snapshot")]
    pub release_version: String,
    /// Namespace the manager runs in (also where the leader Lease lives).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        default_value = "openshift-platform-operators"
    )]
    pub namespace: String,
    /// This replica's name (Events, leader election identity).
    #[arg(long, env = "POD_NAME", default_value = "pom-manager")]
    pub pod_name: String,
    /// Registries reached over plain HTTP (comma-separated host:port), e.g. a loopback test registry.
    #[arg(long, env = "POM_INSECURE_REGISTRIES", value_delimiter = ',')]
    pub insecure_registries: Vec<String>,
    /// Default poll interval of image catalogs, in seconds.
    #[arg(long, env = "POM_CATALOG_POLL_SECONDS", default_value_t = 600)]
    pub catalog_poll_seconds: u64,
    /// Periodic re-check of every PlatformOperator, in seconds.
    #[arg(long, env = "POM_RESYNC_SECONDS", default_value_t = 300)]
    pub resync_seconds: u64,
    /// Folder where catalog images are unpacked (one sub-folder per digest; the manager removes
    /// what no Catalog serves). Default: `pom-catalogs-<pid>` in the temporary folder.
    #[arg(long, env = "POM_CATALOG_CONTENT_DIR")]
    pub catalog_content_dir: Option<std::path::PathBuf>,
    /// How many MiB of catalog source the packages each served catalog holds parsed may come
    /// from (the most recently used; the others are read back from the unpacked catalog and
    /// parsed again when a reconcile needs them). More: less CPU when POs name many large
    /// packages of one catalog; less: a smaller heap.
    #[arg(long, env = "POM_CATALOG_HELD_MIB", default_value_t = 32, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub catalog_held_mib: u64,
    /// Log format.
    #[arg(long, env = "POM_LOG_FORMAT", value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// Run the reconcilers only while holding the Lease `platform-operators-manager`
    /// (`--leader-elect=false` for a single replica outside a cluster).
    #[arg(long, env = "POM_LEADER_ELECT", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub leader_elect: bool,
    /// Lease validity after each renewal, in seconds.
    #[arg(long, env = "POM_LEASE_DURATION_SECONDS", default_value_t = 15)]
    pub lease_duration_seconds: u64,
    /// The leader renews this many seconds before expiry.
    #[arg(long, env = "POM_LEASE_GRACE_SECONDS", default_value_t = 5)]
    pub lease_grace_seconds: u64,
    /// How long in-flight reconciles may take after SIGTERM (Go duration: `25s`, `1m`).
    #[arg(long, env = "POM_SHUTDOWN_TIMEOUT", default_value = "25s", value_parser = parse_duration)]
    pub shutdown_timeout: Duration,
    /// How long a rolled-out move under `upgradeGate: Auto` waits for an operator that has
    /// never reported an OperatorCondition to start reporting before it settles without one.
    #[arg(long, env = "POM_AUTO_SETTLE_WINDOW", default_value = "2m", value_parser = parse_duration)]
    pub auto_settle_window: Duration,
    /// Write nothing but status while the manager's admission guard (ValidatingAdmissionPolicy
    /// and binding `platform-operators-manager-guard`) is missing or changed. Turn off only on a
    /// cluster without ValidatingAdmissionPolicy, knowing the manager is then held by RBAC alone.
    #[arg(long, env = "POM_REQUIRE_ADMISSION_GUARD", default_value_t = true, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    pub require_admission_guard: bool,
    /// Address of `/healthz` and `/readyz` (plain HTTP); `:8081` means all interfaces.
    #[arg(long, env = "POM_HEALTH_BIND_ADDRESS", default_value = "127.0.0.1:8081", value_parser = parse_address)]
    pub health_bind_address: SocketAddr,
    /// Address of `/metrics`. With the TLS files it is HTTPS and every scrape needs a bearer
    /// token allowed to `get /metrics` (default `:8443`); without them it must be a loopback
    /// address and is plain HTTP for local development. Neither: `/metrics` is not served.
    #[arg(long, env = "POM_METRICS_BIND_ADDRESS", value_parser = parse_address)]
    pub metrics_bind_address: Option<SocketAddr>,
    /// PEM certificate (chain) of the HTTPS metrics endpoint; re-read when it changes.
    #[arg(
        long,
        env = "POM_METRICS_TLS_CERT_FILE",
        requires = "metrics_tls_key_file"
    )]
    pub metrics_tls_cert_file: Option<PathBuf>,
    /// PEM private key of the HTTPS metrics endpoint; re-read when it changes.
    #[arg(
        long,
        env = "POM_METRICS_TLS_KEY_FILE",
        requires = "metrics_tls_cert_file"
    )]
    pub metrics_tls_key_file: Option<PathBuf>,
}

/// The HTTPS metrics port (all interfaces) when `--metrics-bind-address` is not given.
pub const DEFAULT_SECURE_METRICS_PORT: u16 = 8443;

/// Flags that parse but do not make sense together.
#[derive(Debug, thiserror::Error)]
pub enum FlagError {
    #[error(
        "--metrics-bind-address={0} is not a loopback address: without --metrics-tls-cert-file and --metrics-tls-key-file, /metrics is served over plain HTTP without authentication, which is only allowed on loopback"
    )]
    InsecureMetrics(SocketAddr),
}

/// How `/metrics` is served, from its three flags: HTTPS with authorisation whenever the TLS
/// files are given; plain HTTP only when asked for explicitly with a loopback address; else not
/// at all (a manager never exposes unauthenticated metrics beyond its own host or pod).
///
/// # Errors
/// [`FlagError::InsecureMetrics`] for plain HTTP on a non-loopback address.
pub fn metrics_serving(
    address: Option<SocketAddr>,
    cert_file: Option<PathBuf>,
    key_file: Option<PathBuf>,
) -> Result<MetricsServing, FlagError> {
    match (address, cert_file, key_file) {
        (address, Some(cert_file), Some(key_file)) => Ok(MetricsServing::Secure {
            address: address
                .unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], DEFAULT_SECURE_METRICS_PORT))),
            cert_file,
            key_file,
        }),
        (Some(address), _, _) if address.ip().is_loopback() => {
            Ok(MetricsServing::InsecureLoopback { address })
        }
        (Some(address), _, _) => Err(FlagError::InsecureMetrics(address)),
        (None, _, _) => Ok(MetricsServing::Off),
    }
}

impl Flags {
    /// The reconcilers' settings.
    #[must_use]
    pub fn settings(&self) -> Settings {
        Settings {
            release_version: self.release_version.clone(),
            manager_namespace: self.namespace.clone(),
            insecure_registries: self.insecure_registries.clone(),
            default_poll_interval: Duration::from_secs(self.catalog_poll_seconds),
            resync_interval: Duration::from_secs(self.resync_seconds),
            instance: self.pod_name.clone(),
            catalog_content_dir: self.catalog_content_dir.clone().unwrap_or_else(|| {
                std::env::temp_dir().join(format!("pom-catalogs-{}", std::process::id()))
            }),
            catalog_held_bytes: self.catalog_held_mib.saturating_mul(1 << 20),
            auto_settle_window: self.auto_settle_window,
            require_admission_guard: self.require_admission_guard,
        }
    }

    /// The process settings.
    ///
    /// # Errors
    /// [`FlagError`] for flags that contradict each other.
    pub fn run_options(&self) -> Result<RunOptions, FlagError> {
        let leader_election = self.leader_elect.then(|| LeaseSettings {
            duration_seconds: self.lease_duration_seconds,
            grace_seconds: self.lease_grace_seconds,
            ..LeaseSettings::new(&self.namespace, &self.pod_name)
        });
        Ok(RunOptions {
            leader_election,
            health_address: self.health_bind_address,
            metrics: metrics_serving(
                self.metrics_bind_address,
                self.metrics_tls_cert_file.clone(),
                self.metrics_tls_key_file.clone(),
            )?,
            shutdown_timeout: self.shutdown_timeout,
        })
    }
}

fn parse_duration(text: &str) -> Result<Duration, String> {
    crate::catalog::parse_go_duration(text)
        .ok_or_else(|| format!("{text:?} is not a duration such as 25s or 1m"))
}

/// `host:port`, or Go's `:port` for all interfaces.
fn parse_address(text: &str) -> Result<SocketAddr, String> {
    let full = if text.starts_with(':') {
        format!("0.0.0.0{text}")
    } else {
        text.to_owned()
    };
    full.parse()
        .map_err(|e| format!("{text:?} is not host:port: {e}"))
}

/// Why the manager could not start or had to stop.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("connecting to the Kubernetes API (KUBECONFIG or in-cluster): {0}")]
    Client(#[source] Box<kube::Error>),
    #[error("starting the async runtime: {0}")]
    Runtime(#[source] std::io::Error),
    #[error(transparent)]
    Flags(#[from] FlagError),
    #[error(transparent)]
    Run(#[from] RunError),
}

/// The whole process: parse flags, log, run until a signal or a lost Lease, map to an exit code.
#[must_use]
pub fn main() -> ExitCode {
    // oci-client and kube both use rustls; pick the provider once (rust-stack.md §1.5).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let flags = Flags::parse();
    if let Err(err) = flags.run_options() {
        // Exit 2 with clap's usage, like any other bad flag.
        Flags::command()
            .error(clap::error::ErrorKind::ArgumentConflict, err)
            .exit();
    }
    init_logging(flags.log_format);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => return fail(&StartError::Runtime(err)),
    };
    let result = runtime.block_on(run(flags));
    // Whatever is still running (an aborted reconcile's tasks) must not hold the exit.
    runtime.shutdown_timeout(Duration::from_secs(1));
    match result {
        Ok(()) => {
            tracing::info!("pom-manager stopped");
            ExitCode::SUCCESS
        }
        Err(err) => fail(&err),
    }
}

fn fail(err: &StartError) -> ExitCode {
    tracing::error!(error = %err, "pom-manager exiting");
    ExitCode::FAILURE
}

/// Connects, installs the signal handler and runs one replica.
///
/// # Errors
/// See [`StartError`].
pub async fn run(flags: Flags) -> Result<(), StartError> {
    let config = kube::Config::infer()
        .await
        .map_err(|e| StartError::Client(Box::new(kube::Error::InferConfig(e))))?;
    // The same stack as `Client::try_default`, plus a count of every request for `/metrics`.
    let api_requests = ApiRequests::default();
    let client = kube::client::ClientBuilder::try_from(config)
        .map_err(|e| StartError::Client(Box::new(e)))?
        .with_layer(&api_requests.layer())
        .build();
    let ctx = crate::Context::new(client, flags.settings());
    ctx.metrics.count_api_requests(api_requests);
    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: finishing in-flight reconciles");
        signal_token.cancel();
    });
    tracing::info!(
        version = env!("CARGO_PKG_VERSION"),
        leader_elect = flags.leader_elect,
        "pom-manager starting"
    );
    crate::run::run_manager(ctx, flags.run_options()?, shutdown).await?;
    Ok(())
}

async fn wait_for_signal() {
    let mut term = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
        Ok(term) => term,
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
            return;
        }
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = tokio::signal::ctrl_c() => {}
    }
}

/// How the manager writes its logs; anything else is refused at start-up (a typo must not
/// silently switch a log pipeline expecting JSON to text).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    Text,
    Json,
}

fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new("info,kube=warn,hyper=warn,tower=warn")
    });
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == LogFormat::Json {
        builder.json().init();
    } else {
        builder.init();
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn an_unknown_log_format_is_refused_naming_the_flag() {
        let err = Flags::try_parse_from(["pom-manager", "--log-format", "jsn"]).unwrap_err();
        let text = err.to_string();
        assert!(
            text.contains("--log-format") && text.contains("jsn"),
            "{text}"
        );
        let ok = Flags::try_parse_from(["pom-manager", "--log-format", "json"]).unwrap();
        assert_eq!(ok.log_format, LogFormat::Json);
    }

    #[test]
    fn defaults() {
        let flags = Flags::try_parse_from(["pom-manager"]).unwrap();
        let options = flags.run_options().unwrap();
        let lease = options.leader_election.unwrap();
        assert_eq!(
            (
                lease.name.as_str(),
                lease.duration_seconds,
                lease.grace_seconds
            ),
            ("platform-operators-manager", 15, 5)
        );
        assert_eq!(options.shutdown_timeout, Duration::from_secs(25));
        assert_eq!(options.health_address, "127.0.0.1:8081".parse().unwrap());
        assert_eq!(options.metrics, MetricsServing::Off);
    }

    fn metrics_of(args: &[&str]) -> Result<MetricsServing, String> {
        let flags =
            Flags::try_parse_from(std::iter::once("pom-manager").chain(args.iter().copied()))
                .map_err(|e| e.to_string())?;
        flags
            .run_options()
            .map(|o| o.metrics)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn metrics_are_https_with_tls_files_plain_only_on_loopback_and_off_otherwise() {
        let tls = [
            "--metrics-tls-cert-file=/c/tls.crt",
            "--metrics-tls-key-file=/c/tls.key",
        ];
        assert_eq!(
            metrics_of(&tls),
            Ok(MetricsServing::Secure {
                address: "0.0.0.0:8443".parse().unwrap(),
                cert_file: "/c/tls.crt".into(),
                key_file: "/c/tls.key".into(),
            })
        );
        let mut with_address = tls.to_vec();
        with_address.push("--metrics-bind-address=:9443");
        assert!(matches!(
            metrics_of(&with_address),
            Ok(MetricsServing::Secure { address, .. }) if address == "0.0.0.0:9443".parse().unwrap()
        ));
        assert_eq!(
            metrics_of(&["--metrics-bind-address=127.0.0.1:8080"]),
            Ok(MetricsServing::InsecureLoopback {
                address: "127.0.0.1:8080".parse().unwrap()
            })
        );
        assert_eq!(
            metrics_of(&["--metrics-bind-address=[::1]:8080"]),
            Ok(MetricsServing::InsecureLoopback {
                address: "[::1]:8080".parse().unwrap()
            })
        );
        let refused = metrics_of(&["--metrics-bind-address=:8080"]).unwrap_err();
        assert!(refused.contains("not a loopback address"), "{refused}");
        // One TLS file without the other is a usage error.
        let half = metrics_of(&["--metrics-tls-cert-file=/c/tls.crt"]).unwrap_err();
        assert!(half.contains("--metrics-tls-key-file"), "{half}");
    }

    #[test]
    fn go_style_flags() {
        let flags = Flags::try_parse_from([
            "pom-manager",
            "--leader-elect",
            "--health-bind-address=:8081",
            "--shutdown-timeout=1m",
        ])
        .unwrap();
        assert!(flags.leader_elect);
        assert_eq!(flags.health_bind_address, "0.0.0.0:8081".parse().unwrap());
        assert_eq!(flags.shutdown_timeout, Duration::from_secs(60));
        let flags = Flags::try_parse_from(["pom-manager", "--leader-elect=false"]).unwrap();
        assert!(flags.run_options().unwrap().leader_election.is_none());
    }
}
