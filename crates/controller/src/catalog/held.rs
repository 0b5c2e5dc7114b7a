//! The packages a served catalog holds parsed: the most recently used ones, within a budget of
//! the catalog source they were parsed from.
//!
//! Why a budget: a PlatformOperator's package is read back from the unpacked content the first
//! time it is named, and was then held for as long as any PlatformOperator named it, so the
//! manager's memory grew with the number of packages named (72 MiB of model for 1,000 packages
//! of a 150 MB catalog, issue 32). Holding the recently used ones within a fixed budget bounds
//! it; a package that was let go is read back and parsed again (about 0.5 ms for 150 KB of
//! JSON) the next time a reconcile asks for it.

use std::sync::Arc;

use lru::LruCache;
use pom_resolver::fbc::Catalog;

/// How many bytes of catalog source the packages one served catalog holds parsed may come
/// from by default (each package weighs what reading it back reads; the manager's
/// `--catalog-held-mib`). A parsed package takes about half its JSON source and less than its
/// YAML, so this holds ~16 MiB of model per catalog: ~200 synthetic packages of 50 bundles
/// (150 KB of JSON each), 40-300 of the real ones in `shared/testdata` (0.1-0.9 MB of YAML).
/// The one package used last is held whatever its size.
pub const DEFAULT_HELD_SOURCE_BUDGET: u64 = 32 << 20;

/// A package held parsed, and the source bytes it weighs.
#[derive(Debug)]
struct Held {
    catalog: Arc<Catalog>,
    source_len: u64,
}

/// The packages held parsed, least recently used let go first once over the budget.
#[derive(Debug)]
pub struct HeldPackages {
    packages: LruCache<String, Held>,
    source_len: u64,
    budget: u64,
}

impl HeldPackages {
    /// Nothing held yet; at most `budget` bytes of source held (but always the last package).
    #[must_use]
    pub fn new(budget: u64) -> Self {
        Self {
            packages: LruCache::unbounded(),
            source_len: 0,
            budget,
        }
    }

    /// `package` if it is held, now the most recently used.
    pub fn get(&mut self, package: &str) -> Option<Arc<Catalog>> {
        self.packages.get(package).map(|held| held.catalog.clone())
    }

    /// Holds `catalog` as `package` (unless a reconcile read it back first: that copy is kept
    /// and returned), then lets the least recently used others go until the budget is met.
    /// What was let go is returned, for the caller to drop once it has released its lock
    /// (freeing a large model takes a while).
    pub fn hold(
        &mut self,
        package: &str,
        catalog: Arc<Catalog>,
        source_len: u64,
    ) -> (Arc<Catalog>, Vec<Arc<Catalog>>) {
        if let Some(held) = self.get(package) {
            return (held, Vec::new());
        }
        let mut let_go = Vec::new();
        self.source_len = self.source_len.saturating_add(source_len);
        self.packages.put(
            package.to_owned(),
            Held {
                catalog: catalog.clone(),
                source_len,
            },
        );
        while self.source_len > self.budget && self.packages.len() > 1 {
            let Some((_, gone)) = self.packages.pop_lru() else {
                break;
            };
            self.source_len = self.source_len.saturating_sub(gone.source_len);
            let_go.push(gone.catalog);
        }
        (catalog, let_go)
    }

    /// Lets go of the packages `keep` refuses; returned, for the caller to drop once it has
    /// released its lock.
    #[must_use]
    pub fn retain(&mut self, keep: impl Fn(&str) -> bool) -> Vec<Arc<Catalog>> {
        let mut let_go = Vec::new();
        let gone: Vec<String> = self
            .packages
            .iter()
            .filter(|(name, _)| !keep(name))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(held) = self.packages.pop(&name) {
                self.source_len = self.source_len.saturating_sub(held.source_len);
                let_go.push(held.catalog);
            }
        }
        let_go
    }

    /// The names of the packages held, sorted.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.packages.iter().map(|(name, _)| name.clone()).collect();
        names.sort();
        names
    }

    /// How many bytes of source the held packages were parsed from.
    #[cfg(test)]
    fn source_len(&self) -> u64 {
        self.source_len
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn model() -> Arc<Catalog> {
        Arc::new(Catalog::default())
    }

    #[test]
    fn the_least_recently_used_go_first_once_over_the_budget() {
        let mut held = HeldPackages::new(100);
        held.hold("a", model(), 40);
        held.hold("b", model(), 40);
        assert!(held.get("a").is_some(), "a used: b is now the oldest");
        held.hold("c", model(), 40);
        assert_eq!(held.names(), ["a", "c"]);
        assert_eq!(held.source_len(), 80);
    }

    #[test]
    fn the_last_package_is_held_whatever_its_size() {
        let mut held = HeldPackages::new(100);
        held.hold("a", model(), 40);
        let (_, let_go) = held.hold("huge", model(), 500);
        assert_eq!(let_go.len(), 1, "a is let go, to be dropped by the caller");
        assert_eq!(held.names(), ["huge"]);
        assert_eq!(held.source_len(), 500);
        held.hold("b", model(), 10);
        assert_eq!(
            held.names(),
            ["b"],
            "the huge one goes as soon as another is used"
        );
    }

    #[test]
    fn a_package_held_already_is_kept_not_replaced() {
        let mut held = HeldPackages::new(100);
        let (first, _) = held.hold("a", model(), 40);
        let (second, let_go) = held.hold("a", model(), 40);
        assert!(let_go.is_empty());
        assert!(Arc::ptr_eq(&first, &second));
        assert_eq!(held.source_len(), 40, "weighed once");
    }

    #[test]
    fn retain_lets_go_of_the_refused_and_their_weight() {
        let mut held = HeldPackages::new(100);
        held.hold("a", model(), 30);
        held.hold("b", model(), 20);
        assert_eq!(held.retain(|name| name == "b").len(), 1);
        assert_eq!(held.names(), ["b"]);
        assert_eq!(held.source_len(), 20);
    }
}
