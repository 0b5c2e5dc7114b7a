//! What the manager's watch caches keep of an object: everything but `metadata.managedFields`.
//!
//! `managedFields` records which field manager wrote which fields, for server-side apply. The
//! API server keeps it; nothing in POM reads it from a cache (POM applies with its own field
//! managers and lets the server resolve ownership). It is most of a cached PlatformOperator:
//! POM's status writes are recorded there field by field, and a heap profile of the manager at
//! 1,000 POs found 28 of its 82 MiB of heap in the `managedFields` of cached POs
//! (`docs/benchmarks.md`). Every reflector of the manager is fed through [`cached_watcher`], and
//! says when it is listed through a [`Readiness`].

use std::sync::Arc;

use futures::{Stream, StreamExt as _};
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt as _, watcher};
use tokio_util::sync::CancellationToken;

/// A watch of `api` whose objects come without `managedFields`, for a reflector to cache.
pub fn cached_watcher<K>(
    api: Api<K>,
    config: watcher::Config,
) -> impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static
where
    K: Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(api, config).modify(forget_managed_fields::<K>)
}

/// A controller for `api` on its own cache, fed through [`cached_watcher`]; its store, and
/// whether that store is listed. Like `Controller::new`, except for what triggers a reconcile:
/// each object once its change is in the store, and every object at the end of each (re)list
/// ([`Trigger`]). `Controller::new` triggers on a relist's objects as they arrive, before the
/// reflector moves them into the store at the list's end, so an object created while the watch
/// was down was looked up, not found, and not looked at again.
pub fn cached_controller<K: CachedKind>(
    api: Api<K>,
    config: watcher::Config,
) -> (Controller<K>, Store<K>, Readiness) {
    let (store, listed, readiness, events) = listed_reflector(api, config);
    let triggers = events.filter_map(move |event| {
        futures::future::ready(match event {
            Ok(event) => {
                listed.observe(&event);
                Trigger::after(&event)
            }
            Err(err) => {
                tracing::debug!(%err, kind = %K::kind(&()), "controller watch");
                None
            }
        })
    });
    (
        Controller::for_shared_stream(resolve_triggers(triggers, store.clone()), store.clone()),
        store,
        readiness,
    )
}

/// What a watch cache needs of a kind: a static kind, read from JSON, shared across tasks.
pub trait CachedKind:
    Resource<DynamicType = ()>
    + Clone
    + std::fmt::Debug
    + serde::de::DeserializeOwned
    + Send
    + Sync
    + 'static
{
}

impl<K> CachedKind for K where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static
{
}

/// A store, its reflector's events (each yielded once applied to the store, with the default
/// backoff on errors), and the readiness those events set through `Listed`.
fn listed_reflector<K: CachedKind>(
    api: Api<K>,
    config: watcher::Config,
) -> (
    Store<K>,
    Listed,
    Readiness,
    impl Stream<Item = watcher::Result<watcher::Event<K>>> + Send + 'static,
) {
    let (store, writer) = reflector::store();
    let (listed, readiness) = Readiness::new();
    let events = reflector::reflector(writer, cached_watcher(api, config)).default_backoff();
    (store, listed, readiness, events)
}

/// What a controller must look at after a watch event, once the event is in the cache.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Trigger<K: Resource<DynamicType = ()>> {
    /// This object changed (created, updated).
    One(ObjectRef<K>),
    /// The cache was (re)listed, or changes were missed: every object.
    All,
}

impl<K: Resource<DynamicType = ()>> Trigger<K> {
    /// The trigger for `event`. A list's objects (`InitApply`) are in the store only at its
    /// `InitDone`, all at once; a deleted object has nothing left to reconcile (a finalizer
    /// makes a deletion an update first).
    pub fn after(event: &watcher::Event<K>) -> Option<Self> {
        match event {
            watcher::Event::Apply(object) => Some(Self::One(ObjectRef::from_obj(object))),
            watcher::Event::InitDone => Some(Self::All),
            watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Delete(_) => None,
        }
    }
}

/// The objects `triggers` name, each read from `store` when it is yielded (so a stream held
/// back by a controller's backoff keeps names, not old copies), those gone skipped.
pub fn resolve_triggers<K>(
    triggers: impl Stream<Item = Trigger<K>> + Send + 'static,
    store: Store<K>,
) -> impl Stream<Item = Arc<K>> + Send + 'static
where
    K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
{
    let names = store.clone();
    triggers
        .flat_map(move |trigger| {
            futures::stream::iter(match trigger {
                Trigger::One(object) => vec![object],
                Trigger::All => names
                    .state()
                    .iter()
                    .map(|object| ObjectRef::from_obj(object.as_ref()))
                    .collect(),
            })
        })
        .filter_map(move |object| futures::future::ready(store.get(&object)))
}

/// A cache of `api`'s objects kept by its own task until `shutdown`, and whether it is listed;
/// `on_event` runs after each watch event is applied to the cache.
pub fn spawn_cache<K: CachedKind>(
    api: Api<K>,
    config: watcher::Config,
    shutdown: CancellationToken,
    on_event: impl Fn(&watcher::Event<K>) + Send + Sync + 'static,
) -> (Store<K>, Readiness) {
    let (store, listed, readiness, events) = listed_reflector(api, config);
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            () = keep_cache(events, &listed, &on_event) => {
                tracing::error!(kind = %K::kind(&()), "a watch cache stopped: it is no longer updated");
            }
        }
    });
    (store, readiness)
}

/// Drives a reflector's `events` (each already applied to its store), marking `listed` and
/// calling `on_event` for each; returns only if the watch ends.
async fn keep_cache<K: Resource<DynamicType = ()>>(
    events: impl Stream<Item = watcher::Result<watcher::Event<K>>>,
    listed: &Listed,
    on_event: &impl Fn(&watcher::Event<K>),
) {
    events
        .for_each(|event| {
            match event {
                Ok(event) => {
                    listed.observe(&event);
                    on_event(&event);
                }
                Err(err) => {
                    tracing::debug!(%err, kind = %K::kind(&()), "watch cache");
                }
            }
            futures::future::ready(())
        })
        .await;
}

/// Whether a watch cache has been listed, for any number of tasks to wait on at once.
///
/// It is set from the watch's own `InitDone` event, which the reflector yields after the list
/// is in its store. kube-runtime's `Store::wait_until_ready` cannot serve several waiters: it
/// wakes only the last task that polled it before the list arrived (a one-shot channel with one
/// waker slot), and the others wait forever. The controller runtime itself waits on it (its
/// runner starts once its store is listed), so nothing else in POM does: every other wait is
/// on a `Readiness`. (A second waiter once left `/readyz` unready for good.)
#[derive(Clone, Debug)]
pub struct Readiness(tokio::sync::watch::Receiver<bool>);

/// The store's writer (its watch) stopped before the first list: it never becomes ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the watch stopped before its first list")]
pub struct WatchStopped;

/// Marks a [`Readiness`] as its watch's events pass; dropped with the watch, which tells every
/// waiter of a watch that never listed that it never will.
#[derive(Debug)]
pub struct Listed(tokio::sync::watch::Sender<bool>);

impl Listed {
    /// Called with each event after the reflector applied it.
    pub fn observe<K>(&self, event: &watcher::Event<K>) {
        if matches!(event, watcher::Event::InitDone) {
            self.0
                .send_if_modified(|ready| !std::mem::replace(ready, true));
        }
    }
}

impl Readiness {
    /// A readiness not yet set, and what sets it.
    #[must_use]
    pub fn new() -> (Listed, Self) {
        let (listed, ready) = tokio::sync::watch::channel(false);
        (Listed(listed), Self(ready))
    }

    /// Already ready (caches built from objects in tests).
    #[must_use]
    pub fn ready() -> Self {
        Self(tokio::sync::watch::channel(true).1)
    }

    /// Resolves once listed.
    ///
    /// # Errors
    /// [`WatchStopped`] when the watch stopped first.
    pub async fn wait(&self) -> Result<(), WatchStopped> {
        let mut ready = self.0.clone();
        ready
            .wait_for(|ready| *ready)
            .await
            .map(|_| ())
            .map_err(|_| WatchStopped)
    }
}

/// Drops what the caches need not keep (see the module documentation): `None`, not an empty
/// list, so that its buffer goes too.
fn forget_managed_fields<K: Resource>(object: &mut K) {
    object.meta_mut().managed_fields = None;
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::time::Duration;

    use futures::{FutureExt as _, StreamExt as _};
    use kube::runtime::reflector;
    use kube::runtime::watcher;
    use pom_api::PlatformOperator;
    use serde_json::json;

    use kube::ResourceExt as _;
    use kube::runtime::reflector::ObjectRef;

    use super::{Readiness, Trigger, WatchStopped};

    /// Every one of many concurrent waiters is woken once the watch has listed, and not before:
    /// the objects of a list are in the store only at its `InitDone`.
    #[tokio::test]
    async fn every_concurrent_waiter_sees_the_cache_listed_at_init_done() {
        let (listed, readiness) = Readiness::new();
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let readiness = readiness.clone();
                tokio::spawn(async move { readiness.wait().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        let po: PlatformOperator = serde_json::from_value(json!({
            "metadata": {"name": "a"}, "spec": {"package": {"name": "a"}}
        }))
        .unwrap();
        for event in [
            watcher::Event::Init,
            watcher::Event::InitApply(po.clone()),
            watcher::Event::Apply(po.clone()),
            watcher::Event::Delete(po),
        ] {
            listed.observe(&event);
            assert!(
                readiness.wait().now_or_never().is_none(),
                "ready before InitDone, at {event:?}"
            );
        }
        listed.observe(&watcher::Event::<PlatformOperator>::InitDone);
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert_eq!(woken.expect("a waiter was never woken").unwrap(), Ok(()));
        }
        // And a waiter that comes after the list.
        assert_eq!(readiness.wait().await, Ok(()));
    }

    /// Why [`Readiness`] is fed from the watch's events and nothing in POM waits on a store:
    /// kube-runtime's own `wait_until_ready` leaves all but the last concurrent waiter waiting,
    /// and the controller runtime is already one waiter on each controller's store. When this
    /// fails, kube-runtime wakes every waiter, and stores may be waited on again.
    #[tokio::test]
    async fn kube_runtime_wakes_only_one_of_several_concurrent_waiters() {
        let (store, mut writer) = reflector::store::<PlatformOperator>();
        let raw: Vec<_> = (0..8)
            .map(|_| {
                let store = store.clone();
                tokio::spawn(async move { store.wait_until_ready().await.is_ok() })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        let mut woken = 0;
        for waiter in raw {
            if tokio::time::timeout(Duration::from_millis(500), waiter)
                .await
                .is_ok()
            {
                woken += 1;
            }
        }
        assert!(woken < 8, "kube-runtime woke {woken} of 8 waiters");
    }

    #[tokio::test]
    async fn a_watch_that_stops_before_its_list_is_an_error_for_every_waiter() {
        let (listed, readiness) = Readiness::new();
        let waiter = {
            let readiness = readiness.clone();
            tokio::spawn(async move { readiness.wait().await })
        };
        drop(listed);
        let result = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(result.unwrap().unwrap(), Err(WatchStopped));
        assert_eq!(readiness.wait().await, Err(WatchStopped));
    }

    fn po(name: &str, generation: i64) -> PlatformOperator {
        serde_json::from_value(json!({
            "metadata": {"name": name, "generation": generation},
            "spec": {"package": {"name": name}}
        }))
        .unwrap()
    }

    #[test]
    fn an_object_is_triggered_once_it_is_in_the_cache() {
        let a = po("a", 1);
        let cases = [
            (
                watcher::Event::Apply(a.clone()),
                Some(Trigger::One(ObjectRef::new("a"))),
            ),
            // A list's objects reach the store at InitDone, all at once.
            (watcher::Event::Init, None),
            (watcher::Event::InitApply(a.clone()), None),
            (watcher::Event::InitDone, Some(Trigger::All)),
            (watcher::Event::Delete(a), None),
        ];
        for (event, expected) in cases {
            assert_eq!(Trigger::after(&event), expected, "{event:?}");
        }
    }

    /// What the triggers rely on: the reflector applies each event to the store before
    /// `keep_cache` sees it, a list's objects at its InitDone, and readiness is set there.
    #[tokio::test]
    async fn each_event_is_seen_after_it_is_in_the_store() {
        let (store, writer) = reflector::store::<PlatformOperator>();
        let (listed, readiness) = Readiness::new();
        let events = futures::stream::iter([
            watcher::Event::Init,
            watcher::Event::InitApply(po("a", 1)),
            watcher::Event::InitDone,
            watcher::Event::Apply(po("b", 1)),
            watcher::Event::Delete(po("a", 1)),
        ])
        .map(Ok);
        let seen = std::sync::Mutex::new(Vec::new());
        let record = |event: &watcher::Event<PlatformOperator>| {
            let mut names: Vec<_> = store.state().iter().map(|po| po.name_any()).collect();
            names.sort();
            let ready = readiness.wait().now_or_never().is_some();
            seen.lock()
                .unwrap()
                .push((Trigger::after(event), names.join(","), ready));
        };
        super::keep_cache(reflector::reflector(writer, events), &listed, &record).await;
        let one = |name: &str| Some(Trigger::One(ObjectRef::new(name)));
        assert_eq!(
            seen.into_inner().unwrap(),
            [
                (None, String::new(), false),
                (None, String::new(), false),
                (Some(Trigger::All), "a".to_owned(), true),
                (one("b"), "a,b".to_owned(), true),
                (None, "b".to_owned(), true),
            ]
        );
    }

    /// A whole-cache trigger held back (by a controller's backoff) yields each object as the
    /// store holds it when yielded, and skips one deleted meanwhile.
    #[tokio::test]
    async fn triggers_read_the_store_when_they_are_yielded() {
        let (store, mut writer) = reflector::store::<PlatformOperator>();
        writer.apply_watcher_event(&watcher::Event::Apply(po("a", 1)));
        writer.apply_watcher_event(&watcher::Event::Apply(po("b", 1)));
        let mut objects = Box::pin(super::resolve_triggers(
            futures::stream::iter([Trigger::All, Trigger::One(ObjectRef::new("a"))]),
            store,
        ));
        let first = objects.next().await.unwrap();
        let other = if first.name_any() == "a" { "b" } else { "a" };
        writer.apply_watcher_event(&watcher::Event::Apply(po(other, 2)));
        let second = objects.next().await.unwrap();
        assert_eq!(
            (second.name_any().as_str(), second.metadata.generation),
            (other, Some(2))
        );
        writer.apply_watcher_event(&watcher::Event::Delete(po("a", 1)));
        assert!(
            objects.next().await.is_none(),
            "a deleted object was yielded"
        );
    }

    #[test]
    fn cached_objects_lose_managed_fields_and_nothing_else() {
        let mut seen = json!({
            "apiVersion": "platform.openshift.io/v1alpha1",
            "kind": "PlatformOperator",
            "metadata": {
                "name": "a",
                "resourceVersion": "7",
                "labels": {"x": "y"},
                "managedFields": [{"manager": "pom", "operation": "Apply",
                                   "fieldsType": "FieldsV1", "fieldsV1": {"f:status": {}}}]
            },
            "spec": {"package": {"name": "a"}}
        });
        let mut po: PlatformOperator = serde_json::from_value(seen.clone()).unwrap();
        super::forget_managed_fields(&mut po);
        seen["metadata"]
            .as_object_mut()
            .unwrap()
            .remove("managedFields");
        assert!(po.metadata.managed_fields.is_none());
        let kept = serde_json::to_value(&po).unwrap();
        assert_eq!(kept["metadata"], seen["metadata"]);
        assert_eq!(kept["spec"]["package"], seen["spec"]["package"]);
    }
}
