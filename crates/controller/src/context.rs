//! What every reconciler shares: the client, the catalog cache, the image puller and the image
//! mirror configuration it pulls through, the event publisher and the manager's settings. No
//! other state lives outside the cluster.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use kube::Client;

use crate::catalog::CatalogCache;
use crate::events::{EventPublisher, Reporter};
use crate::image_mirrors::ImageMirrors;
use crate::liveness::Liveness;
use crate::metrics::Metrics;
use crate::oci::ImagePuller;

/// The field manager for every server-side apply of installed bundle objects (PRODUCT §6:
/// one manager, forced).
pub const BUNDLE_FIELD_MANAGER: &str = "platform-operators-manager";
/// Field manager for PlatformOperator status.
pub const PO_STATUS_FIELD_MANAGER: &str = "platform-operators-manager/po-status";
/// Field manager for Catalog status.
pub const CATALOG_STATUS_FIELD_MANAGER: &str = "platform-operators-manager/catalog-status";
/// Field manager for the aggregated ClusterOperator status.
pub const CLUSTER_OPERATOR_FIELD_MANAGER: &str = "platform-operators-manager/clusteroperator";
/// Field manager for the annotations POM keeps on PlatformOperators (finalizers are added by
/// kube-runtime's finalizer helper with a guarded JSON patch).
pub const PO_ANNOTATIONS_FIELD_MANAGER: &str = "platform-operators-manager/po-annotations";
/// Field manager for OperatorConditions POM creates and for their status copy.
pub const OPERATOR_CONDITION_FIELD_MANAGER: &str = "platform-operators-manager/operatorcondition";

/// Settings from flags (see `main.rs`).
#[derive(Debug, Clone)]
pub struct Settings {
    /// The manager's release version, reported in the ClusterOperator's `versions`.
    pub release_version: String,
    /// Namespace the manager runs in (a related object of the ClusterOperator).
    pub manager_namespace: String,
    /// Registries reached over plain HTTP (tests and the demo use a loopback registry).
    pub insecure_registries: Vec<String>,
    /// Default poll interval for image catalogs without one.
    pub default_poll_interval: Duration,
    /// Periodic re-check of every PlatformOperator (drift repair also reacts to watch events).
    pub resync_interval: Duration,
    /// Name of this replica (Event reporter instance, lease holder).
    pub instance: String,
    /// Where catalog images are unpacked, one folder per digest (on the Deployment's `/tmp`
    /// emptyDir, so a restarted container reuses them). The manager owns the folder: content
    /// no Catalog serves is removed from it.
    pub catalog_content_dir: PathBuf,
    /// How many bytes of catalog source the packages each served catalog holds parsed may come
    /// from (`catalog::HeldPackages`).
    pub catalog_held_bytes: u64,
    /// How long a rolled-out move under `upgradeGate: Auto` waits for an operator that has
    /// never reported to start reporting (`pom_policy::status::AUTO_SETTLE_WINDOW`).
    pub auto_settle_window: Duration,
    /// Whether POM writes only while its admission guard is in place (issue 22 item 2); off
    /// only for tests without the shipped install, or a cluster without
    /// ValidatingAdmissionPolicy at the admin's word.
    pub require_admission_guard: bool,
}

/// A content folder of this process's own: in-process managers (tests) must not share one,
/// since each removes what it does not serve.
fn default_catalog_content_dir() -> PathBuf {
    static MANAGERS: AtomicU64 = AtomicU64::new(0);
    let n = MANAGERS.fetch_add(1, Ordering::Relaxed);
    std::env::temp_dir().join(format!("pom-catalogs-{}-{n}", std::process::id()))
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            release_version: "0.0.1-snapshot".to_owned(),
            manager_namespace: "openshift-platform-operators".to_owned(),
            insecure_registries: Vec::new(),
            default_poll_interval: Duration::from_secs(600),
            resync_interval: Duration::from_secs(300),
            instance: "pom".to_owned(),
            catalog_content_dir: default_catalog_content_dir(),
            catalog_held_bytes: crate::catalog::DEFAULT_HELD_SOURCE_BUDGET,
            auto_settle_window: pom_policy::status::AUTO_SETTLE_WINDOW,
            require_admission_guard: true,
        }
    }
}

/// Shared state of the manager.
pub struct Context {
    pub client: Client,
    pub catalogs: CatalogCache,
    pub images: ImagePuller,
    /// The cluster's image mirror configuration every pull goes through (IDMS, ITMS, ICSP;
    /// watched from the first pull or the controllers' start).
    pub image_mirrors: ImageMirrors,
    /// Events about POs and Catalogs (`events`: repeats counted as series, bounded).
    pub events: EventPublisher,
    pub settings: Settings,
    /// Prometheus metrics (`/metrics`); reconcilers report runs and failures here.
    pub metrics: Arc<Metrics>,
    /// The reconciles running now, for `/healthz` (a wedged worker fails it).
    pub liveness: Arc<Liveness>,
    /// Orders the aggregated ClusterOperator's `Upgradeable=True` after every PO status write
    /// (§8.3): a PO status write holds it shared; the aggregator holds it alone from its fresh
    /// read of every PO to its write of True, so no move is recorded in between unseen.
    pub status_writes: tokio::sync::RwLock<()>,
    /// The cluster proxy injected into operators (issue 23 item 3), as `cluster_proxy` last
    /// listed it; the PO controller gathers it and is woken when it changes.
    pub operator_proxy: tokio::sync::watch::Sender<crate::cluster_proxy::OperatorProxy>,
}

impl Context {
    /// Builds the context for a client and settings.
    #[must_use]
    pub fn new(client: Client, settings: Settings) -> Arc<Self> {
        let reporter = Reporter {
            controller: "platform-operators-manager".into(),
            instance: settings.instance.clone(),
        };
        Arc::new(Self {
            image_mirrors: ImageMirrors::new(client.clone(), reporter.clone()),
            events: EventPublisher::new(client.clone(), reporter),
            images: ImagePuller::new(settings.insecure_registries.clone()),
            catalogs: CatalogCache::default(),
            client,
            settings,
            metrics: Arc::new(Metrics::new()),
            liveness: Arc::new(Liveness::default()),
            status_writes: tokio::sync::RwLock::new(()),
            operator_proxy: tokio::sync::watch::Sender::new(
                crate::cluster_proxy::OperatorProxy::Unknown,
            ),
        })
    }
}
