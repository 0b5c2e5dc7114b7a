//! `pom-manager`: the Platform Operators Manager.

use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;
use pom_controller::context::Settings;
use tokio_util::sync::CancellationToken;

/// Flags, each with an environment-variable fallback.
#[derive(Parser, Debug)]
#[command(name = "pom-manager", version, about = "Platform Operators Manager")]
struct Flags {
    /// Release version reported in the aggregated ClusterOperator's `versions`.
    #[arg(long, env = "RELEASE_VERSION", default_value = "0.0.1-snapshot")]
    release_version: String,
    /// Namespace the manager runs in.
    #[arg(long, env = "POD_NAMESPACE", default_value = "openshift-platform-operators")]
    namespace: String,
    /// This replica's name (Events, leader election).
    #[arg(long, env = "POD_NAME", default_value = "pom-manager")]
    pod_name: String,
    /// Registries reached over plain HTTP (comma-separated host:port), e.g. a loopback test registry.
    #[arg(long, env = "POM_INSECURE_REGISTRIES", value_delimiter = ',')]
    insecure_registries: Vec<String>,
    /// Default poll interval of image catalogs, in seconds.
    #[arg(long, env = "POM_CATALOG_POLL_SECONDS", default_value_t = 600)]
    catalog_poll_seconds: u64,
    /// Periodic re-check of every PlatformOperator, in seconds.
    #[arg(long, env = "POM_RESYNC_SECONDS", default_value_t = 300)]
    resync_seconds: u64,
    /// Log format: `text` or `json`.
    #[arg(long, env = "POM_LOG_FORMAT", default_value = "text")]
    log_format: String,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // oci-client and kube both use rustls; pick the provider once (rust-stack.md §1.5).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let flags = Flags::parse();
    init_logging(&flags.log_format);

    let client = kube::Client::try_default().await.context("connecting to the Kubernetes API (KUBECONFIG or in-cluster)")?;
    let settings = Settings {
        release_version: flags.release_version,
        manager_namespace: flags.namespace,
        insecure_registries: flags.insecure_registries,
        default_poll_interval: Duration::from_secs(flags.catalog_poll_seconds),
        resync_interval: Duration::from_secs(flags.resync_seconds),
        instance: flags.pod_name,
    };
    let ctx = pom_controller::Context::new(client, settings);
    let shutdown = CancellationToken::new();
    let signal_token = shutdown.clone();
    tokio::spawn(async move {
        wait_for_signal().await;
        tracing::info!("shutdown requested: finishing in-flight reconciles");
        signal_token.cancel();
    });
    tracing::info!("pom-manager starting");
    pom_controller::run::run_all(ctx, shutdown).await;
    tracing::info!("pom-manager stopped");
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

fn init_logging(format: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info,kube=warn,hyper=warn,tower=warn"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if format == "json" {
        builder.json().init();
    } else {
        builder.init();
    }
}
