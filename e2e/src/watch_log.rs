//! Recording every version of objects a test watches, from a moment the test chooses (e.g.
//! before a PlatformOperator is created), so it can assert on the *sequence* of states the
//! manager wrote (a condition that passed through a reason), not only on the last one a poll
//! happened to see.
//!
//! [`WatchLog::start`] lists the objects and watches from the list's resourceVersion: every
//! write after the list is seen, however short-lived. A watch that fails or expires (410
//! Gone) makes [`WatchLog::versions`] panic, since the log would have holes.

use std::sync::{Arc, Mutex, PoisonError};

use futures::StreamExt as _;
use kube::ResourceExt as _;
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::quiet::Watched;

/// One recorded event: `ADDED`, `MODIFIED` or `DELETED`, and the object as written.
#[derive(Debug, Clone)]
pub struct Logged<K> {
    pub event: &'static str,
    pub object: K,
}

struct Shared<K> {
    entries: Mutex<Vec<Logged<K>>>,
    failure: Mutex<Option<String>>,
}

/// Every version of the watched objects since [`WatchLog::start`], in the order the API server
/// sent them. Dropping it stops the watch.
pub struct WatchLog<K: Watched> {
    shared: Arc<Shared<K>>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
    what: String,
}

impl<K: Watched> WatchLog<K> {
    /// Lists the objects of `api` (only `name` when given; it need not exist yet) and starts
    /// watching from the list's resourceVersion. The listed versions are recorded first, as
    /// `ADDED`.
    ///
    /// # Panics
    /// When the objects cannot be listed or watched.
    pub async fn start(api: Api<K>, name: Option<&str>) -> Self {
        let kind = K::kind(&()).to_string();
        let what = match name {
            Some(name) => format!("{kind} {name}"),
            None => format!("every {kind}"),
        };
        let (list_params, watch_params) = match name {
            Some(name) => {
                let selector = format!("metadata.name={name}");
                (
                    ListParams::default().fields(&selector),
                    WatchParams::default().fields(&selector),
                )
            }
            None => (ListParams::default(), WatchParams::default()),
        };
        let list = api
            .list(&list_params)
            .await
            .unwrap_or_else(|err| panic!("watch log: listing {what}: {err}"));
        let Some(mut version) = list.metadata.resource_version.clone() else {
            panic!("watch log: the list of {what} has no resourceVersion to watch from");
        };
        let shared = Arc::new(Shared {
            entries: Mutex::new(
                list.items
                    .into_iter()
                    .map(|object| Logged {
                        event: "ADDED",
                        object,
                    })
                    .collect(),
            ),
            failure: Mutex::new(None),
        });
        let mut stream = api
            .watch(&watch_params, &version)
            .await
            .unwrap_or_else(|err| panic!("watch log: watching {what}: {err}"))
            .boxed();
        let stop = CancellationToken::new();
        let task = {
            let (shared, stop, what) = (shared.clone(), stop.clone(), what.clone());
            tokio::spawn(async move {
                let fail = |why: String| {
                    *shared
                        .failure
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner) =
                        Some(format!("watching {what} failed ({why}): the log has holes"));
                };
                loop {
                    let next = tokio::select! {
                        () = stop.cancelled() => return,
                        next = stream.next() => next,
                    };
                    let (event, object) = match next {
                        Some(Ok(WatchEvent::Added(o))) => ("ADDED", o),
                        Some(Ok(WatchEvent::Modified(o))) => ("MODIFIED", o),
                        Some(Ok(WatchEvent::Deleted(o))) => ("DELETED", o),
                        Some(Ok(WatchEvent::Bookmark(b))) => {
                            version = b.metadata.resource_version;
                            continue;
                        }
                        Some(Ok(WatchEvent::Error(status))) => {
                            return fail(format!(
                                "{} {}: {}",
                                status.code, status.reason, status.message
                            ));
                        }
                        Some(Err(err)) => return fail(err.to_string()),
                        None => {
                            // The API server ended the watch (timeout): resume where it stopped.
                            match api.watch(&watch_params, &version).await {
                                Ok(resumed) => stream = resumed.boxed(),
                                Err(err) => return fail(format!("resuming: {err}")),
                            }
                            continue;
                        }
                    };
                    if let Some(v) = object.meta().resource_version.clone() {
                        version = v;
                    }
                    shared
                        .entries
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(Logged { event, object });
                }
            })
        };
        Self {
            shared,
            stop,
            task: Some(task),
            what,
        }
    }

    /// Every event recorded so far.
    ///
    /// # Panics
    /// When the watch failed (the log would have holes).
    #[must_use]
    pub fn entries(&self) -> Vec<Logged<K>> {
        if let Some(failure) = self
            .shared
            .failure
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
        {
            panic!("{failure}");
        }
        self.shared
            .entries
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Every version of object `name` recorded so far (deletions left out), oldest first.
    ///
    /// # Panics
    /// When the watch failed.
    #[must_use]
    pub fn versions(&self, name: &str) -> Vec<K> {
        self.entries()
            .into_iter()
            .filter(|e| e.event != "DELETED" && e.object.name_any() == name)
            .map(|e| e.object)
            .collect()
    }

    /// What the log watches (for messages).
    #[must_use]
    pub fn what(&self) -> &str {
        &self.what
    }

    /// Stops watching.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl<K: Watched> Drop for WatchLog<K> {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}
