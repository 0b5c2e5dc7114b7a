//! A small most-recently-used cache of pulled content, keyed by digest reference and prefix.
//!
//! Content addressed by digest never changes, so entries never go stale; the bound only caps
//! memory. Catalogs and bundles in use are touched on every reconcile and stay in.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

/// Files pulled from an image, shared with every reader.
pub type Files = Arc<BTreeMap<String, Vec<u8>>>;

/// Cache key: the by-digest reference and the prefix that was extracted.
type Key = (String, String);

#[derive(Debug, Default)]
struct Inner {
    entries: BTreeMap<Key, Files>,
    /// Keys, least recently used first.
    order: VecDeque<Key>,
}

/// The bounded cache.
#[derive(Debug)]
pub(crate) struct FileCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

impl FileCache {
    pub(crate) fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            inner: Mutex::new(Inner::default()),
        }
    }

    pub(crate) fn get(&self, reference: &str, prefix: &str) -> Option<Files> {
        let key = (reference.to_owned(), prefix.to_owned());
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let files = inner.entries.get(&key)?.clone();
        touch(&mut inner.order, key);
        Some(files)
    }

    pub(crate) fn insert(&self, reference: &str, prefix: &str, files: Files) {
        let key = (reference.to_owned(), prefix.to_owned());
        let mut inner = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        inner.entries.insert(key.clone(), files);
        touch(&mut inner.order, key);
        while inner.order.len() > self.capacity {
            if let Some(oldest) = inner.order.pop_front() {
                inner.entries.remove(&oldest);
            }
        }
    }
}

fn touch(order: &mut VecDeque<Key>, key: Key) {
    if let Some(at) = order.iter().position(|k| *k == key) {
        order.remove(at);
    }
    order.push_back(key);
}
