//! Watch caches every replica keeps, leader or not: PlatformOperators, Catalogs and the
//! aggregated ClusterOperator.
//!
//! They answer `/readyz` (a replica is ready once it has listed POM's resources, which proves the
//! API server is reachable, the CRDs are installed and RBAC allows the reads, whether or not it
//! leads: readiness is never tied to leadership nor to an upgrade) and feed the scrape-time
//! metrics. The PlatformOperator cache is also the aggregated ClusterOperator writer's
//! ([`crate::cluster_operator::run`] waits on [`ClusterState::platform_operators_changed`]), so
//! the leader does not keep a third copy of every PO; the PO controller keeps its own, tied to
//! its lifetime.

use std::sync::Arc;

use tokio::sync::Notify;

use futures::StreamExt;
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_api::{Catalog, PlatformOperator};
use tokio_util::sync::CancellationToken;

use crate::watch_cache::{Readiness, cached_watcher};

/// Read handles on the caches.
#[derive(Clone)]
pub struct ClusterState {
    platform_operators: Store<PlatformOperator>,
    catalogs: Store<Catalog>,
    cluster_operator: Store<ClusterOperator>,
    /// Notified after each PlatformOperator event (one stored permit when nobody waits).
    platform_operator_changes: Arc<Notify>,
    /// PlatformOperators and Catalogs listed (`/readyz` and the ClusterOperator writer both
    /// wait: see [`Readiness`]).
    platform_operators_ready: Readiness,
    catalogs_ready: Readiness,
}

impl ClusterState {
    /// Starts the watches; they stop when `shutdown` is cancelled.
    #[must_use]
    pub fn start(client: &Client, shutdown: &CancellationToken) -> Self {
        let platform_operator_changes = Arc::new(Notify::new());
        let notify = platform_operator_changes.clone();
        let platform_operators = spawn_reflector(
            Api::all(client.clone()),
            watcher::Config::default().any_semantic(),
            shutdown.clone(),
            move || notify.notify_one(),
        );
        let catalogs = spawn_reflector(
            Api::all(client.clone()),
            watcher::Config::default().any_semantic(),
            shutdown.clone(),
            || {},
        );
        // Only the one ClusterOperator POM owns; on plain Kubernetes the kind does not exist and
        // this watch just retries with backoff (readiness does not wait for it).
        let by_name = watcher::Config::default()
            .fields(&format!("metadata.name={AGGREGATED_CLUSTER_OPERATOR}"));
        let cluster_operator =
            spawn_reflector(Api::all(client.clone()), by_name, shutdown.clone(), || {});
        Self {
            platform_operators_ready: Readiness::of(&platform_operators),
            catalogs_ready: Readiness::of(&catalogs),
            platform_operators,
            catalogs,
            cluster_operator,
            platform_operator_changes,
        }
    }

    /// Resolves at the next PlatformOperator event (at once if one came since the last call).
    pub async fn platform_operators_changed(&self) {
        self.platform_operator_changes.notified().await;
    }

    /// Resolves once PlatformOperators and Catalogs have been listed; never resolves when the
    /// watches stopped first.
    pub async fn wait_until_ready(&self) {
        let pos = self.platform_operators_ready.wait().await;
        let catalogs = self.catalogs_ready.wait().await;
        if pos.is_err() || catalogs.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Every PlatformOperator in the cache.
    #[must_use]
    pub fn platform_operators(&self) -> Vec<Arc<PlatformOperator>> {
        self.platform_operators.state()
    }

    /// Every Catalog in the cache.
    #[must_use]
    pub fn catalogs(&self) -> Vec<Arc<Catalog>> {
        self.catalogs.state()
    }

    /// The aggregated ClusterOperator's `Upgradeable` status (`None` until it reports one);
    /// anything but `True` counts as not upgradeable, as the CVO reads it.
    #[must_use]
    pub fn upgradeable(&self) -> Option<bool> {
        let co = self.cluster_operator.state().into_iter().next()?;
        let condition = co
            .status
            .as_ref()?
            .conditions
            .iter()
            .find(|c| c.type_ == "Upgradeable")?
            .status
            .clone();
        Some(condition == "True")
    }
}

#[cfg(test)]
impl ClusterState {
    /// Caches holding exactly `platform_operators`, `catalogs` and `cluster_operators`.
    pub(crate) fn from_objects(
        platform_operators: Vec<PlatformOperator>,
        catalogs: Vec<Catalog>,
        cluster_operators: Vec<ClusterOperator>,
    ) -> Self {
        fn store_of<K>(objects: Vec<K>) -> Store<K>
        where
            K: kube::Resource<DynamicType = ()> + Clone,
        {
            let (reader, mut writer) = reflector::store();
            for object in objects {
                writer.apply_watcher_event(&watcher::Event::Apply(object));
            }
            reader
        }
        Self {
            platform_operators: store_of(platform_operators),
            catalogs: store_of(catalogs),
            cluster_operator: store_of(cluster_operators),
            platform_operator_changes: Arc::new(Notify::new()),
            platform_operators_ready: Readiness::ready(),
            catalogs_ready: Readiness::ready(),
        }
    }
}

/// A cache of `api`'s objects, kept until `shutdown`; `on_event` runs after each watch event
/// is applied to it.
fn spawn_reflector<K>(
    api: Api<K>,
    config: watcher::Config,
    shutdown: CancellationToken,
    on_event: impl Fn() + Send + Sync + 'static,
) -> Store<K>
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, cached_watcher(api, config))
        .default_backoff()
        .touched_objects();
    tokio::spawn(async move {
        let drain = stream.for_each(|event| {
            match event {
                Ok(_) => on_event(),
                Err(err) => {
                    tracing::debug!(%err, kind = %K::kind(&()), "watch for readiness and metrics");
                }
            }
            futures::future::ready(())
        });
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = drain => {}
        }
    });
    reader
}
