//! Watch caches every replica keeps, leader or not: PlatformOperators, Catalogs and the
//! aggregated ClusterOperator.
//!
//! They answer `/readyz` (a replica is ready once it has listed POM's resources, which proves the
//! API server is reachable, the CRDs are installed and RBAC allows the reads, whether or not it
//! leads: readiness is never tied to leadership nor to an upgrade) and feed the scrape-time
//! metrics. The PlatformOperator cache is also the leader's only one: the aggregated
//! ClusterOperator writer reads it ([`crate::cluster_operator::run`] waits on
//! [`ClusterState::platform_operators_changed`]) and the PO controller reconciles from it
//! ([`ClusterState::platform_operator_triggers`]), so no replica keeps a second copy of every
//! PO (at 1,000 POs a copy is several MiB: `docs/benchmarks.md`).

use std::sync::Arc;

use tokio::sync::{Notify, broadcast};

use futures::{Stream, StreamExt};
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_api::{Catalog, PlatformOperator};
use tokio_util::sync::CancellationToken;

use crate::watch_cache::{Readiness, spawn_cache};

/// Read handles on the caches.
#[derive(Clone)]
pub struct ClusterState {
    platform_operators: Store<PlatformOperator>,
    catalogs: Store<Catalog>,
    cluster_operator: Store<ClusterOperator>,
    /// Notified after each PlatformOperator event (one stored permit when nobody waits).
    platform_operator_changes: Arc<Notify>,
    /// What changed in the PlatformOperator cache, for the PO controller (sent after the
    /// change is in the cache; nothing is kept while nobody listens).
    platform_operator_triggers: broadcast::Sender<PoTrigger>,
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
        let (platform_operator_triggers, _) = broadcast::channel(TRIGGER_BUFFER);
        let notify = platform_operator_changes.clone();
        let triggers = platform_operator_triggers.clone();
        let (platform_operators, platform_operators_ready) = spawn_cache(
            Api::all(client.clone()),
            watcher::Config::default().any_semantic(),
            shutdown.clone(),
            move |event| {
                notify.notify_one();
                if let Some(trigger) = PoTrigger::after(event) {
                    // An error only means that no controller listens (not the leader yet).
                    let _ = triggers.send(trigger);
                }
            },
        );
        let (catalogs, catalogs_ready) = spawn_cache(
            Api::all(client.clone()),
            watcher::Config::default().any_semantic(),
            shutdown.clone(),
            |_| {},
        );
        // Only the one ClusterOperator POM owns; on plain Kubernetes the kind does not exist and
        // this watch just retries with backoff (readiness does not wait for it).
        let by_name = watcher::Config::default()
            .fields(&format!("metadata.name={AGGREGATED_CLUSTER_OPERATOR}"));
        let (cluster_operator, _) =
            spawn_cache(Api::all(client.clone()), by_name, shutdown.clone(), |_| {});
        Self {
            platform_operators_ready,
            catalogs_ready,
            platform_operators,
            catalogs,
            cluster_operator,
            platform_operator_changes,
            platform_operator_triggers,
        }
    }

    /// The PlatformOperator cache, for the PO controller's reads.
    #[must_use]
    pub fn platform_operator_store(&self) -> Store<PlatformOperator> {
        self.platform_operators.clone()
    }

    /// The PlatformOperators to reconcile, for a controller that starts now (at each leadership
    /// start): every PO once the cache is listed, then each PO changed since, and every PO
    /// again after a relist or when this stream fell behind (a controller deduplicates
    /// what is already queued). Each PO is yielded as the cache holds it when it is yielded.
    /// Ends when the watch stopped.
    pub fn platform_operator_triggers(
        &self,
    ) -> impl Stream<Item = Arc<PlatformOperator>> + Send + 'static {
        // Subscribed before the first snapshot is read: no change falls between the two.
        let changes = self.platform_operator_triggers.subscribe();
        let ready = self.platform_operators_ready.clone();
        let store = self.platform_operators.clone();
        let everything_once_listed =
            futures::stream::once(async move { ready.wait().await.ok().map(|()| PoTrigger::All) })
                .filter_map(futures::future::ready);
        let each_change = futures::stream::unfold(changes, |mut changes| async move {
            match changes.recv().await {
                Ok(trigger) => Some((trigger, changes)),
                Err(broadcast::error::RecvError::Lagged(_)) => Some((PoTrigger::All, changes)),
                Err(broadcast::error::RecvError::Closed) => None,
            }
        });
        everything_once_listed
            .chain(each_change)
            .flat_map(move |trigger| futures::stream::iter(trigger.resolve(&store)))
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
            let (reader, mut writer) = kube::runtime::reflector::store();
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
            platform_operator_triggers: broadcast::channel(TRIGGER_BUFFER).0,
            platform_operators_ready: Readiness::ready(),
            catalogs_ready: Readiness::ready(),
        }
    }
}

/// How many PO changes may wait for a slow controller before it is told to reconcile every PO
/// instead (a change is a name; a burst of creations is read in microseconds).
const TRIGGER_BUFFER: usize = 256;

/// What the PO controller must look at after a PlatformOperator watch event.
#[derive(Clone, Debug, PartialEq, Eq)]
enum PoTrigger {
    /// This PO changed (created, updated).
    One(ObjectRef<PlatformOperator>),
    /// The cache was (re)listed, or changes were missed: every PO.
    All,
}

impl PoTrigger {
    /// The trigger for `event`, once it is in the cache. Objects of a list (`InitApply`) are
    /// in the cache only at `InitDone`; a deleted PO has nothing left to reconcile (its
    /// finalizer made the deletion an update first).
    fn after(event: &watcher::Event<PlatformOperator>) -> Option<Self> {
        match event {
            watcher::Event::Apply(po) => Some(Self::One(ObjectRef::from_obj(po))),
            watcher::Event::InitDone => Some(Self::All),
            watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Delete(_) => None,
        }
    }

    /// The POs this trigger names, as `store` holds them now.
    fn resolve(&self, store: &Store<PlatformOperator>) -> Vec<Arc<PlatformOperator>> {
        match self {
            Self::One(po) => store.get(po).into_iter().collect(),
            Self::All => store.state(),
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::time::Duration;

    use futures::StreamExt as _;
    use kube::ResourceExt as _;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher;
    use pom_api::PlatformOperator;
    use serde_json::json;

    use super::{ClusterState, PoTrigger, TRIGGER_BUFFER};

    fn po(name: &str) -> PlatformOperator {
        serde_json::from_value(json!({
            "metadata": {"name": name}, "spec": {"package": {"name": name}}
        }))
        .unwrap()
    }

    /// The next `n` POs the stream yields, by name, sorted (a whole-cache trigger yields them
    /// in the cache's order).
    async fn next_names(
        stream: &mut (impl futures::Stream<Item = std::sync::Arc<PlatformOperator>> + Unpin),
        n: usize,
    ) -> Vec<String> {
        let mut names = Vec::new();
        for _ in 0..n {
            let next = tokio::time::timeout(Duration::from_secs(5), stream.next())
                .await
                .expect("the trigger stream yielded nothing")
                .expect("the trigger stream ended");
            names.push(next.name_any());
        }
        names.sort();
        names
    }

    #[test]
    fn a_po_is_triggered_once_it_is_in_the_cache() {
        let a = po("a");
        let cases = [
            (
                watcher::Event::Apply(a.clone()),
                Some(PoTrigger::One(ObjectRef::new("a"))),
            ),
            // Listed objects are in the cache at InitDone, all at once.
            (watcher::Event::Init, None),
            (watcher::Event::InitApply(a.clone()), None),
            (watcher::Event::InitDone, Some(PoTrigger::All)),
            (watcher::Event::Delete(a), None),
        ];
        for (event, expected) in cases {
            assert_eq!(PoTrigger::after(&event), expected, "{event:?}");
        }
    }

    /// A controller that starts late still sees every PO: the whole cache first, then each
    /// change; a change to a PO gone from the cache yields nothing.
    #[tokio::test]
    async fn a_late_controller_gets_every_po_then_each_change() {
        let state = ClusterState::from_objects(vec![po("a"), po("b")], vec![], vec![]);
        let mut triggers = Box::pin(state.platform_operator_triggers());
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        let send = |name: &str| {
            state
                .platform_operator_triggers
                .send(PoTrigger::One(ObjectRef::new(name)))
                .unwrap();
        };
        send("gone");
        send("b");
        assert_eq!(next_names(&mut triggers, 1).await, ["b"]);
        state
            .platform_operator_triggers
            .send(PoTrigger::All)
            .unwrap();
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
    }

    /// A controller that fell behind the buffer gets every PO again rather than missing one.
    #[tokio::test]
    async fn a_controller_that_fell_behind_gets_every_po() {
        let state = ClusterState::from_objects(vec![po("a"), po("b")], vec![], vec![]);
        let mut triggers = Box::pin(state.platform_operator_triggers());
        for _ in 0..TRIGGER_BUFFER + 5 {
            state
                .platform_operator_triggers
                .send(PoTrigger::One(ObjectRef::new("a")))
                .unwrap();
        }
        // The first listing, then the missed changes as one whole-cache trigger.
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        // Then the changes still in the buffer.
        assert_eq!(next_names(&mut triggers, 1).await, ["a"]);
    }
}
