//! Recording every write of some objects, in the order the API server committed them: for
//! rules about *sequences* ("the aggregated ClusterOperator never said Upgradeable=True while a
//! PlatformOperator hopped", "the OperatorCondition was created before the Deployment") that a
//! poll cannot check, since it misses versions that live between two polls.
//!
//! An [`EventLog`] lists the objects of an [`Api`] and watches from the list's
//! resourceVersion, so every later write is recorded, however short-lived, with its
//! revision. Revisions of different kinds compare: this harness runs one etcd, and the API
//! server's resourceVersion of a write is the etcd revision of that write (one counter for the
//! whole store, strictly increasing with every commit). Kubernetes documents resourceVersions
//! as opaque; comparing them is sound only under that single-etcd setup, which is the one
//! [`crate::ControlPlane`] runs (no watch cache reordering can change a committed revision).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::StreamExt as _;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt as _};
use tokio::task::JoinHandle;

use crate::quiet::Watched;

/// What happened to an object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Present when the log started (from the list).
    Listed,
    Added,
    Modified,
    Deleted,
}

/// One recorded version of an object.
#[derive(Debug, Clone)]
pub struct Recorded<K> {
    pub change: Change,
    /// The etcd revision of the write (for `Listed`, of the object's last write before the
    /// list).
    pub revision: u64,
    /// `namespace/name`, or `name` for cluster-scoped objects.
    pub key: String,
    pub object: K,
    /// When the test saw it.
    pub seen: Instant,
}

/// Parses a resourceVersion as the etcd revision it is in this harness.
///
/// # Panics
/// When it is not a number (the single-etcd assumption of this module does not hold).
#[must_use]
pub fn revision(resource_version: Option<&str>) -> u64 {
    let text = resource_version.unwrap_or_default();
    text.parse().unwrap_or_else(|_| {
        panic!("resourceVersion {text:?} is not an etcd revision: this harness runs one etcd")
    })
}

/// The revision of `object`'s last write.
#[must_use]
pub fn revision_of<K: Resource>(object: &K) -> u64 {
    revision(object.meta().resource_version.as_deref())
}

fn key<K: Resource>(object: &K) -> String {
    match object.namespace() {
        Some(ns) => format!("{ns}/{}", object.name_any()),
        None => object.name_any(),
    }
}

struct Shared<K> {
    events: Vec<Recorded<K>>,
    failure: Option<String>,
}

/// Every version of the objects of one [`Api`] since [`EventLog::start`].
pub struct EventLog<K: Watched> {
    what: String,
    shared: Arc<Mutex<Shared<K>>>,
    task: JoinHandle<()>,
    /// The revision the watch started from: every write after it is recorded.
    pub start: u64,
}

impl<K: Watched> EventLog<K> {
    /// Lists the objects of `api` and records every write after the list.
    ///
    /// # Panics
    /// When the objects cannot be listed or watched.
    pub async fn start(api: Api<K>) -> Self {
        let what = format!("{}s", K::kind(&()));
        let list = api
            .list(&ListParams::default())
            .await
            .unwrap_or_else(|err| panic!("event log: listing {what}: {err}"));
        let from = list.metadata.resource_version.clone().unwrap_or_default();
        let start = revision(Some(&from));
        let now = Instant::now();
        let events = list
            .items
            .into_iter()
            .map(|object| Recorded {
                change: Change::Listed,
                revision: revision_of(&object),
                key: key(&object),
                object,
                seen: now,
            })
            .collect();
        let shared = Arc::new(Mutex::new(Shared {
            events,
            failure: None,
        }));
        let task = tokio::spawn(follow(api, from, shared.clone(), what.clone()));
        Self {
            what,
            shared,
            task,
            start,
        }
    }

    /// Everything recorded so far, in commit order.
    ///
    /// # Panics
    /// When the watch failed (the log would be incomplete).
    #[must_use]
    pub fn events(&self) -> Vec<Recorded<K>> {
        let shared = self.shared.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(failure) = &shared.failure {
            panic!("event log of {}: {failure}", self.what);
        }
        shared.events.clone()
    }

    /// Waits until `check` finds what it looks for in the log (polled every 100 ms), or panics
    /// after `timeout` naming `what`.
    pub async fn wait_for<T>(
        &self,
        timeout: Duration,
        what: &str,
        mut check: impl FnMut(&[Recorded<K>]) -> Option<T>,
    ) -> T {
        let started = Instant::now();
        loop {
            if let Some(found) = check(&self.events()) {
                return found;
            }
            assert!(
                started.elapsed() < timeout,
                "timed out after {timeout:?} waiting for {what} (event log of {})",
                self.what
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl<K: Watched> Drop for EventLog<K> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn follow<K: Watched>(
    api: Api<K>,
    mut from: String,
    shared: Arc<Mutex<Shared<K>>>,
    what: String,
) {
    let params = WatchParams::default().timeout(290);
    let fail = |message: String| {
        shared
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .failure = Some(message);
    };
    loop {
        let mut stream = match api.watch(&params, &from).await {
            Ok(stream) => stream.boxed(),
            Err(err) => return fail(format!("watching {what} from {from}: {err}")),
        };
        while let Some(next) = stream.next().await {
            let (change, object) = match next {
                Ok(WatchEvent::Added(o)) => (Change::Added, o),
                Ok(WatchEvent::Modified(o)) => (Change::Modified, o),
                Ok(WatchEvent::Deleted(o)) => (Change::Deleted, o),
                Ok(WatchEvent::Bookmark(b)) => {
                    from = b.metadata.resource_version;
                    continue;
                }
                Ok(WatchEvent::Error(status)) => {
                    return fail(format!(
                        "watching {what} failed ({} {}: {})",
                        status.code, status.reason, status.message
                    ));
                }
                Err(err) => return fail(format!("watching {what} failed ({err})")),
            };
            let rv = object.meta().resource_version.clone().unwrap_or_default();
            let recorded = Recorded {
                change,
                revision: revision(Some(&rv)),
                key: key(&object),
                object,
                seen: Instant::now(),
            };
            from = rv;
            shared
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .events
                .push(recorded);
        }
        // The API server ended the watch (its timeout): resume where it stopped.
    }
}
