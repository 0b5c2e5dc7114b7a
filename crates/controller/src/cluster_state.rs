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
use k8s_openapi::api::admissionregistration::v1::{
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
};
use kube::Client;
use kube::api::Api;
use kube::runtime::reflector::Store;
use kube::runtime::watcher;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_api::{Catalog, PlatformOperator};
use pom_policy::snapshot::GuardState;
use tokio_util::sync::CancellationToken;

use crate::watch_cache::{Readiness, Trigger, resolve_triggers, spawn_cache};

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
    platform_operator_triggers: broadcast::Sender<Trigger<PlatformOperator>>,
    /// PlatformOperators and Catalogs listed (`/readyz` and the ClusterOperator writer both
    /// wait: see [`Readiness`]).
    platform_operators_ready: Readiness,
    catalogs_ready: Readiness,
    /// The ValidatingAdmissionPolicies and their bindings, where the manager's admission guard
    /// and the owner-label guard are found by name (issue 22 item 2, issue 33 item 5).
    guard_policies: Store<ValidatingAdmissionPolicy>,
    guard_bindings: Store<ValidatingAdmissionPolicyBinding>,
    guard_ready: [Readiness; 2],
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
                if let Some(trigger) = Trigger::after(event) {
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
        // The guards' objects (the manager's and the owner-label guard, found by name among the
        // cluster's few policies): a change wakes the ClusterOperator writer.
        let guard_by_name = watcher::Config::default();
        let notify = platform_operator_changes.clone();
        let (guard_policies, policies_ready) = spawn_cache(
            Api::all(client.clone()),
            guard_by_name.clone(),
            shutdown.clone(),
            move |_| notify.notify_one(),
        );
        let notify = platform_operator_changes.clone();
        let (guard_bindings, bindings_ready) = spawn_cache(
            Api::all(client.clone()),
            guard_by_name,
            shutdown.clone(),
            move |_| notify.notify_one(),
        );
        Self {
            guard_policies,
            guard_bindings,
            guard_ready: [policies_ready, bindings_ready],
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
    /// what is already queued). Each PO is read from the cache when it is yielded. Never ends
    /// while the cache is kept.
    pub fn platform_operator_triggers(
        &self,
    ) -> impl Stream<Item = Arc<PlatformOperator>> + Send + 'static {
        // Subscribed before the first snapshot is read: no change falls between the two.
        po_triggers(
            self.platform_operator_triggers.subscribe(),
            self.platform_operators_ready.clone(),
            self.platform_operators.clone(),
        )
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

    /// Whether the manager's admission guard is in place, once both of its watches have listed
    /// (never judged from an empty cache); [`GuardState::Unchecked`] when not `required`.
    pub async fn admission_guard(&self, required: bool) -> GuardState {
        if !required {
            return GuardState::Unchecked;
        }
        for ready in &self.guard_ready {
            if ready.wait().await.is_err() {
                return GuardState::Missing {
                    object: "the watch of the admission guard (it stopped)".to_owned(),
                };
            }
        }
        let policies = self.guard_policies.state();
        let bindings = self.guard_bindings.state();
        crate::admission_guard::presence_of_both(
            &policies.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
            &bindings.iter().map(AsRef::as_ref).collect::<Vec<_>>(),
        )
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
            guard_policies: store_of(Vec::new()),
            guard_bindings: store_of(Vec::new()),
            guard_ready: [Readiness::ready(), Readiness::ready()],
        }
    }
}

/// How many PO changes may wait for a slow controller before it is told to reconcile every PO
/// instead (a change is a name; a burst of creations is read in microseconds).
const TRIGGER_BUFFER: usize = 256;

/// See [`ClusterState::platform_operator_triggers`]: every PO once `ready`, then `changes`.
fn po_triggers(
    changes: broadcast::Receiver<Trigger<PlatformOperator>>,
    ready: Readiness,
    store: Store<PlatformOperator>,
) -> impl Stream<Item = Arc<PlatformOperator>> + Send + 'static {
    let everything_once_listed =
        futures::stream::once(async move { ready.wait().await.ok().map(|()| Trigger::All) })
            .filter_map(futures::future::ready);
    let each_change = futures::stream::unfold(changes, |mut changes| async move {
        match changes.recv().await {
            Ok(trigger) => Some((trigger, changes)),
            Err(broadcast::error::RecvError::Lagged(_)) => Some((Trigger::All, changes)),
            Err(broadcast::error::RecvError::Closed) => None,
        }
    });
    resolve_triggers(everything_once_listed.chain(each_change), store)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::time::Duration;

    use futures::{FutureExt as _, StreamExt as _};
    use kube::ResourceExt as _;
    use kube::runtime::reflector::ObjectRef;
    use kube::runtime::watcher;
    use pom_api::PlatformOperator;
    use serde_json::json;
    use tokio::sync::broadcast;

    use super::{ClusterState, TRIGGER_BUFFER, Trigger, po_triggers};
    use crate::watch_cache::Readiness;

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

    /// Nothing is yielded before the cache is listed (a controller would judge POs from a
    /// partial cache), then every PO.
    #[tokio::test]
    async fn nothing_is_triggered_before_the_cache_is_listed() {
        let state = ClusterState::from_objects(vec![po("a"), po("b")], vec![], vec![]);
        let (listed, ready) = Readiness::new();
        let (changes, _) = broadcast::channel(TRIGGER_BUFFER);
        let mut triggers = Box::pin(po_triggers(
            changes.subscribe(),
            ready,
            state.platform_operator_store(),
        ));
        changes.send(Trigger::One(ObjectRef::new("a"))).unwrap();
        assert!(triggers.next().now_or_never().is_none());
        listed.observe(&watcher::Event::<PlatformOperator>::InitDone);
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        assert_eq!(next_names(&mut triggers, 1).await, ["a"]);
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
                .send(Trigger::One(ObjectRef::new(name)))
                .unwrap();
        };
        send("gone");
        send("b");
        assert_eq!(next_names(&mut triggers, 1).await, ["b"]);
        state.platform_operator_triggers.send(Trigger::All).unwrap();
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
    }

    /// A controller that fell behind the buffer gets every PO again rather than missing one.
    #[tokio::test]
    async fn a_controller_that_fell_behind_gets_every_po() {
        let state = ClusterState::from_objects(vec![po("a"), po("b")], vec![], vec![]);
        let mut triggers = Box::pin(state.platform_operator_triggers());
        // The channel holds the next power of two of what was asked for.
        for _ in 0..TRIGGER_BUFFER.next_power_of_two() + 5 {
            state
                .platform_operator_triggers
                .send(Trigger::One(ObjectRef::new("a")))
                .unwrap();
        }
        // The first listing, then the missed changes as one whole-cache trigger.
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        assert_eq!(next_names(&mut triggers, 2).await, ["a", "b"]);
        // Then the changes still in the buffer.
        assert_eq!(next_names(&mut triggers, 1).await, ["a"]);
    }
}
