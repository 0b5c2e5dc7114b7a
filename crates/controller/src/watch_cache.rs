//! What the manager's watch caches keep of an object: everything but `metadata.managedFields`.
//!
//! `managedFields` records which field manager wrote which fields, for server-side apply. The
//! API server keeps it; nothing in POM reads it from a cache (POM applies with its own field
//! managers and lets the server resolve ownership). It is most of a cached PlatformOperator:
//! POM's status writes are recorded there field by field, and a heap profile of the manager at
//! 1,000 POs found 28 of its 82 MiB of heap in the `managedFields` of cached POs
//! (`docs/benchmarks.md`). Every reflector of the manager is fed through [`cached_watcher`].

use futures::Stream;
use kube::Resource;
use kube::api::Api;
use kube::runtime::controller::Controller;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt as _, watcher};

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

/// A controller for `api`, built as `Controller::new` builds it (a reflector whose applied
/// objects trigger reconciles), with its cache fed through [`cached_watcher`]; and its store.
pub fn cached_controller<K>(api: Api<K>, config: watcher::Config) -> (Controller<K>, Store<K>)
where
    K: Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let objects = reflector::reflector(writer, cached_watcher(api, config)).applied_objects();
    (Controller::for_stream(objects, store.clone()), store)
}

/// Whether a store has been listed, for any number of tasks to wait on at once.
///
/// kube-runtime's `Store::wait_until_ready` wakes only the last task that polled it before the
/// list arrived (a one-shot channel with one waker slot): the others wait forever. The manager
/// has several waiters per store (every PO reconcile on the Catalog and ClusterVersion stores;
/// `/readyz` and the ClusterOperator writer on the PO store, where a second waiter left the
/// manager unready for good). One task waits on the store and publishes the answer here.
#[derive(Clone, Debug)]
pub struct Readiness(tokio::sync::watch::Receiver<bool>);

/// The store's writer (its watch) stopped before the first list: it never becomes ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the watch stopped before its first list")]
pub struct WatchStopped;

impl Readiness {
    /// Starts the one task that waits for `store` to be listed.
    #[must_use]
    pub fn of<K>(store: &Store<K>) -> Self
    where
        K: Resource<DynamicType = ()> + Clone + Send + Sync + 'static,
    {
        let (ready_tx, ready) = tokio::sync::watch::channel(false);
        let store = store.clone();
        tokio::spawn(async move {
            // A watch stopped first drops the sender unsent: every waiter gets `WatchStopped`.
            if store.wait_until_ready().await.is_ok() {
                let _ = ready_tx.send(true);
            }
        });
        Self(ready)
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

    use kube::runtime::reflector;
    use kube::runtime::watcher;
    use pom_api::PlatformOperator;
    use serde_json::json;

    use super::{Readiness, WatchStopped};

    /// Every one of many concurrent waiters is woken once the store is listed.
    #[tokio::test]
    async fn every_concurrent_waiter_sees_the_store_ready() {
        let (store, mut writer) = reflector::store::<PlatformOperator>();
        let readiness = Readiness::of(&store);
        let waiters: Vec<_> = (0..8)
            .map(|_| {
                let readiness = readiness.clone();
                tokio::spawn(async move { readiness.wait().await })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(50)).await;
        writer.apply_watcher_event(&watcher::Event::Init);
        writer.apply_watcher_event(&watcher::Event::InitDone);
        for waiter in waiters {
            let woken = tokio::time::timeout(Duration::from_secs(5), waiter).await;
            assert_eq!(woken.expect("a waiter was never woken").unwrap(), Ok(()));
        }
        // And a waiter that comes after the list.
        assert_eq!(readiness.wait().await, Ok(()));
    }

    /// Why [`Readiness`] exists: kube-runtime's own `wait_until_ready` leaves all but the last
    /// concurrent waiter waiting. When this fails, kube-runtime wakes every waiter and
    /// `Readiness` can go.
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
        let (store, writer) = reflector::store::<PlatformOperator>();
        let readiness = Readiness::of(&store);
        let waiter = {
            let readiness = readiness.clone();
            tokio::spawn(async move { readiness.wait().await })
        };
        drop(writer);
        let result = tokio::time::timeout(Duration::from_secs(5), waiter).await;
        assert_eq!(result.unwrap().unwrap(), Err(WatchStopped));
        assert_eq!(readiness.wait().await, Err(WatchStopped));
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
