//! The parsed catalogs every PlatformOperator resolves against, and a generation counter that
//! tells the PlatformOperator controller when to resolve again.
//!
//! The Catalog reconciler is the only writer. A catalog that cannot be read any more keeps its
//! last good content (`last_good`): the PlatformOperator controller decides what it may still
//! do with it, and must never remove a running operator because a catalog is down.

use std::collections::BTreeMap;
use std::sync::{Arc, PoisonError, RwLock};

use pom_api::conditions::Reason;
use tokio::sync::watch;

/// Catalog content that was unpacked and parsed.
#[derive(Debug)]
pub struct ServedCatalog {
    /// What exactly was read: a by-digest image reference, or the ConfigMap and a digest of the
    /// key's content.
    pub resolved_source: String,
    /// The parsed file-based catalog.
    pub content: Arc<pom_resolver::fbc::Catalog>,
    /// When this content was unpacked.
    pub unpacked_at: jiff::Timestamp,
}

/// Whether a catalog can be resolved against now.
#[derive(Debug, Clone)]
pub enum CatalogState {
    /// The content is current.
    Serving(Arc<ServedCatalog>),
    /// The source cannot be read or is invalid; `reason` and `message` are those of the
    /// Catalog's `Serving=False` condition.
    Unavailable {
        reason: Reason,
        message: String,
        /// The content served before the failure, if any.
        last_good: Option<Arc<ServedCatalog>>,
    },
}

impl CatalogState {
    /// The content currently served, if the catalog is serving.
    #[must_use]
    pub fn serving(&self) -> Option<&Arc<ServedCatalog>> {
        match self {
            Self::Serving(served) => Some(served),
            Self::Unavailable { .. } => None,
        }
    }

    /// The newest good content: what is served, or what was served before a failure.
    #[must_use]
    pub fn latest_good(&self) -> Option<&Arc<ServedCatalog>> {
        match self {
            Self::Serving(served) => Some(served),
            Self::Unavailable { last_good, .. } => last_good.as_ref(),
        }
    }

    /// Whether two states would resolve the same way (same content, same availability).
    fn same_as(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Serving(a), Self::Serving(b)) => a.resolved_source == b.resolved_source,
            (
                Self::Unavailable {
                    reason: ra,
                    message: ma,
                    last_good: la,
                },
                Self::Unavailable {
                    reason: rb,
                    message: mb,
                    last_good: lb,
                },
            ) => {
                ra == rb
                    && ma == mb
                    && la.as_ref().map(|s| &s.resolved_source)
                        == lb.as_ref().map(|s| &s.resolved_source)
            }
            _ => false,
        }
    }
}

/// One Catalog as the resolver sees it.
#[derive(Debug, Clone)]
pub struct CatalogEntry {
    /// The Catalog's name.
    pub name: String,
    /// `spec.priority`: higher wins between catalogs offering a package.
    pub priority: i32,
    /// Serving, or why not (with the last good content kept for running operators).
    pub state: CatalogState,
}

#[derive(Debug)]
struct Inner {
    entries: RwLock<BTreeMap<String, CatalogEntry>>,
    generation: watch::Sender<u64>,
}

/// Shared, cheaply cloned view of every Catalog's content.
#[derive(Debug, Clone)]
pub struct CatalogCache {
    inner: Arc<Inner>,
}

impl Default for CatalogCache {
    fn default() -> Self {
        Self {
            inner: Arc::new(Inner {
                entries: RwLock::new(BTreeMap::new()),
                generation: watch::Sender::new(0),
            }),
        }
    }
}

impl CatalogCache {
    /// Every catalog, sorted by name (a deterministic input for resolution).
    #[must_use]
    pub fn snapshot(&self) -> Vec<CatalogEntry> {
        self.read().values().cloned().collect()
    }

    /// One catalog by name.
    #[must_use]
    pub fn get(&self, name: &str) -> Option<CatalogEntry> {
        self.read().get(name).cloned()
    }

    /// A receiver of the generation counter, bumped whenever a catalog's served content,
    /// availability or priority changes, or a catalog appears or goes: the signal to
    /// re-resolve every PlatformOperator.
    #[must_use]
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.generation.subscribe()
    }

    /// The current generation.
    #[must_use]
    pub fn generation(&self) -> u64 {
        *self.inner.generation.borrow()
    }

    /// Forgets a catalog (it was deleted).
    pub fn remove(&self, name: &str) {
        let removed = self.write().remove(name).is_some();
        if removed {
            self.bump();
        }
    }

    /// Records that `name` serves `served`.
    pub fn serve(&self, name: &str, priority: i32, served: Arc<ServedCatalog>) {
        self.set(name, priority, CatalogState::Serving(served));
    }

    /// Records that `name` cannot serve new content, keeping what it served last.
    pub fn mark_unavailable(&self, name: &str, priority: i32, reason: Reason, message: &str) {
        let last_good = self
            .read()
            .get(name)
            .and_then(|entry| entry.state.latest_good().cloned());
        self.set(
            name,
            priority,
            CatalogState::Unavailable {
                reason,
                message: message.to_owned(),
                last_good,
            },
        );
    }

    /// Names of every cached catalog.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn set(&self, name: &str, priority: i32, state: CatalogState) {
        let changed = {
            let mut entries = self.write();
            let changed = entries
                .get(name)
                .is_none_or(|old| old.priority != priority || !old.state.same_as(&state));
            entries.insert(
                name.to_owned(),
                CatalogEntry {
                    name: name.to_owned(),
                    priority,
                    state,
                },
            );
            changed
        };
        if changed {
            self.bump();
        }
    }

    fn bump(&self) {
        self.inner
            .generation
            .send_modify(|generation| *generation = generation.wrapping_add(1));
    }

    fn read(&self) -> std::sync::RwLockReadGuard<'_, BTreeMap<String, CatalogEntry>> {
        self.inner
            .entries
            .read()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, BTreeMap<String, CatalogEntry>> {
        self.inner
            .entries
            .write()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn served(source: &str) -> Arc<ServedCatalog> {
        Arc::new(ServedCatalog {
            resolved_source: source.to_owned(),
            content: Arc::new(pom_resolver::fbc::Catalog::default()),
            unpacked_at: jiff::Timestamp::UNIX_EPOCH,
        })
    }

    #[test]
    fn generation_moves_only_on_changes_that_matter() {
        let cache = CatalogCache::default();
        let rx = cache.subscribe();
        cache.serve("b", 0, served("r/b@sha256:1"));
        cache.serve("a", 5, served("r/a@sha256:1"));
        assert_eq!(*rx.borrow(), 2);
        // The same content again is no change.
        cache.serve("a", 5, served("r/a@sha256:1"));
        assert_eq!(*rx.borrow(), 2);
        cache.serve("a", 6, served("r/a@sha256:1"));
        assert_eq!(*rx.borrow(), 3);
        let names: Vec<_> = cache.snapshot().into_iter().map(|e| e.name).collect();
        assert_eq!(names, ["a", "b"]);
        cache.remove("missing");
        assert_eq!(*rx.borrow(), 3);
        cache.remove("b");
        assert_eq!(*rx.borrow(), 4);
        assert!(cache.get("b").is_none());
    }

    #[test]
    fn unavailable_keeps_the_last_good_content() {
        let cache = CatalogCache::default();
        cache.serve("a", 0, served("r/a@sha256:1"));
        cache.mark_unavailable("a", 0, Reason::RegistryUnreachable, "down");
        let generation = cache.generation();
        cache.mark_unavailable("a", 0, Reason::RegistryUnreachable, "down");
        assert_eq!(
            cache.generation(),
            generation,
            "a repeated failure is no change"
        );
        let entry = cache.get("a").unwrap();
        let CatalogState::Unavailable {
            last_good, reason, ..
        } = &entry.state
        else {
            panic!("{entry:?}")
        };
        assert_eq!(*reason, Reason::RegistryUnreachable);
        assert_eq!(last_good.as_ref().unwrap().resolved_source, "r/a@sha256:1");
        assert_eq!(
            entry.state.latest_good().unwrap().resolved_source,
            "r/a@sha256:1"
        );
        assert!(entry.state.serving().is_none());
    }
}
