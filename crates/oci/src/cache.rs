//! A most-recently-used cache of pulled content, keyed by digest reference and prefix, bounded
//! by the bytes it holds.
//!
//! Content addressed by digest never changes, so entries never go stale; the bound only caps
//! memory. Catalogs and bundles in use are touched on every reconcile and stay in; the content
//! of digests no longer used (a catalog's previous image, a bundle moved from) is evicted first
//! once the budget is reached.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

/// Files pulled from an image, shared with every reader.
pub type Files = Arc<BTreeMap<String, Vec<u8>>>;

/// Cache key: the by-digest reference and the prefix that was extracted.
type Key = (String, String);

#[derive(Debug, Default)]
struct Inner {
    entries: BTreeMap<Key, (Files, u64)>,
    /// Keys, least recently used first.
    order: VecDeque<Key>,
    /// Bytes of file content and names held.
    bytes: u64,
}

/// The bounded cache.
#[derive(Debug)]
pub(crate) struct FileCache {
    max_bytes: u64,
    inner: Mutex<Inner>,
}

/// The bytes `files` holds: content and names (a name may be up to
/// [`crate::layers::MAX_PATH_BYTES`], and many small files with long names cost more in their
/// names than in their content).
fn size_of(files: &Files) -> u64 {
    files
        .iter()
        .map(|(name, data)| name.len() as u64 + data.len() as u64)
        .sum()
}

impl FileCache {
    /// A cache holding at most `max_bytes` of file content and names (the newest entry is always kept,
    /// whatever its size: it was just pulled within the per-image limit).
    pub(crate) fn new(max_bytes: u64) -> Self {
        Self {
            max_bytes,
            inner: Mutex::new(Inner::default()),
        }
    }

    pub(crate) fn get(&self, reference: &str, prefix: &str) -> Option<Files> {
        let key = (reference.to_owned(), prefix.to_owned());
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let files = inner.entries.get(&key)?.0.clone();
        touch(&mut inner.order, key);
        Some(files)
    }

    pub(crate) fn insert(&self, reference: &str, prefix: &str, files: Files) {
        let key = (reference.to_owned(), prefix.to_owned());
        let size = size_of(&files);
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, old)) = inner.entries.insert(key.clone(), (files, size)) {
            inner.bytes = inner.bytes.saturating_sub(old);
        }
        inner.bytes += size;
        touch(&mut inner.order, key);
        while inner.bytes > self.max_bytes && inner.order.len() > 1 {
            let Some(oldest) = inner.order.pop_front() else {
                break;
            };
            if let Some((_, freed)) = inner.entries.remove(&oldest) {
                inner.bytes = inner.bytes.saturating_sub(freed);
            }
        }
    }

    #[cfg(test)]
    fn held(&self) -> (usize, u64) {
        let inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        (inner.entries.len(), inner.bytes)
    }
}

fn touch(order: &mut VecDeque<Key>, key: Key) {
    if let Some(at) = order.iter().position(|k| *k == key) {
        order.remove(at);
    }
    order.push_back(key);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Files costing `size` bytes: the one-byte name `f` and `size - 1` bytes of content.
    fn files(size: usize) -> Files {
        Arc::new(BTreeMap::from([("f".to_owned(), vec![0; size - 1])]))
    }

    #[test]
    fn the_byte_budget_evicts_the_least_recently_used_first() {
        let cache = FileCache::new(100);
        cache.insert("old@sha256:1", "configs/", files(40));
        cache.insert("live@sha256:2", "configs/", files(40));
        assert_eq!(cache.held(), (2, 80));
        // The live catalog is read on every reconcile; the old digest is not.
        assert!(cache.get("live@sha256:2", "configs/").is_some());
        cache.insert("bundle@sha256:3", "", files(40));
        assert!(cache.get("old@sha256:1", "configs/").is_none(), "evicted");
        assert!(cache.get("live@sha256:2", "configs/").is_some());
        assert_eq!(cache.held(), (2, 80));
        // At the budget exactly nothing more goes.
        cache.insert("small@sha256:4", "", files(20));
        assert_eq!(cache.held(), (3, 100));
        // One byte over: the least recently used goes.
        cache.insert("one@sha256:5", "", files(1));
        assert!(cache.get("bundle@sha256:3", "").is_none());
        assert_eq!(cache.held(), (3, 61));
    }

    #[test]
    fn an_entry_bigger_than_the_budget_is_still_kept_alone() {
        let cache = FileCache::new(10);
        cache.insert("a@sha256:1", "", files(5));
        cache.insert("big@sha256:2", "", files(50));
        assert_eq!(cache.held(), (1, 50));
        assert!(cache.get("big@sha256:2", "").is_some());
    }

    #[test]
    fn names_count_against_the_budget() {
        let cache = FileCache::new(100);
        let long_names: Files = Arc::new(
            (0..4)
                .map(|i| (format!("{i}{}", "n".repeat(29)), vec![0; 1]))
                .collect(),
        );
        cache.insert("names@sha256:1", "", long_names);
        assert_eq!(cache.held(), (1, 4 * 31));
        cache.insert("next@sha256:2", "", files(1));
        assert_eq!(
            cache.held(),
            (1, 1),
            "the entry of long names was over budget"
        );
    }

    #[test]
    fn reinserting_a_key_does_not_count_it_twice() {
        let cache = FileCache::new(100);
        cache.insert("a@sha256:1", "", files(30));
        cache.insert("a@sha256:1", "", files(30));
        assert_eq!(cache.held(), (1, 30));
    }
}
