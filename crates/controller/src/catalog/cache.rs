//! The parsed catalogs every PlatformOperator resolves against, and a generation counter that
//! tells the PlatformOperator controller when to resolve again.
//!
//! The Catalog reconciler is the only writer. A catalog that cannot be read any more keeps its
//! last good content (`last_good`): the PlatformOperator controller decides what it may still
//! do with it, and must never remove a running operator because a catalog is down.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use kube::runtime::reflector::Store;
use pom_api::PlatformOperator;
use pom_api::conditions::Reason;
use pom_resolver::fbc::{Catalog, FbcError, PackageIndex, ScopedCatalog};
use tokio::sync::{broadcast, watch};

use super::held::HeldPackages;

/// How many package-change notices a slow subscriber may fall behind before it misses some
/// (and must then re-resolve everything).
const CHANGE_BACKLOG: usize = 256;

/// Catalog content that was unpacked and parsed.
///
/// Memory follows use (issue 10): the parse keeps whole only the packages PlatformOperators
/// named at the time; every other valid package is an index entry (where its blobs are, a
/// fingerprint) and is read back from the unpacked content when a PlatformOperator names it.
/// What is held is bounded ([`HeldPackages`]: the most recently used within a budget of
/// their source, `--catalog-held-mib`, issue 32), and packages no PlatformOperator names any more
/// are let go ([`Self::retain`]).
#[derive(Debug)]
pub struct ServedCatalog {
    /// What exactly was read: a by-digest image reference, or the ConfigMap and a digest of the
    /// key's content.
    pub resolved_source: String,
    /// Every valid package: its fingerprint, and where to read it back from.
    index: PackageIndex,
    /// Packages left out of the catalog because their blobs are inconsistent, with why.
    invalid_packages: BTreeMap<String, FbcError>,
    /// Packages held whole, each as a catalog of that package alone.
    held: Mutex<HeldPackages>,
    /// When this content was unpacked.
    pub unpacked_at: jiff::Timestamp,
    /// Where an image's content was read from (a mirror, whose, or the source), for
    /// `status.servedFrom`; `None` for ConfigMaps and for content already on disk.
    pub served_from: Option<String>,
    /// Keeps the unpacked folder this content reads packages back from for as long as this
    /// content is used (served, or still read by a reconcile after it was replaced).
    in_use: Option<LoadingGuard>,
}

impl ServedCatalog {
    /// This content reads from an unpacked folder that `guard` keeps.
    #[must_use]
    pub fn keeping(mut self, guard: LoadingGuard) -> Self {
        self.in_use = Some(guard);
        self
    }

    /// This content was read from `location` (the field `served_from`).
    #[must_use]
    pub fn with_served_from(mut self, location: Option<String>) -> Self {
        self.served_from = location;
        self
    }

    /// Content parsed with a scope: its packages in scope are held from the start, as many as
    /// `held_budget` bytes of their source allow ([`HeldPackages`]; the largest first, since
    /// they cost the most to read back).
    #[must_use]
    pub fn new(
        resolved_source: String,
        scoped: ScopedCatalog,
        unpacked_at: jiff::Timestamp,
        held_budget: u64,
    ) -> Self {
        let ScopedCatalog {
            held: parsed,
            index,
        } = scoped;
        let Catalog {
            packages,
            invalid_packages,
            ..
        } = parsed;
        let mut held = HeldPackages::new(held_budget);
        let mut weighed: Vec<_> = packages
            .into_iter()
            .map(|(name, package)| (index.source_len(&name).unwrap_or(0), name, package))
            .collect();
        weighed.sort_by_key(|(source_len, ..)| *source_len);
        for (source_len, name, package) in weighed {
            let alone = Catalog {
                packages: std::iter::once((name.clone(), package)).collect(),
                ..Catalog::default()
            };
            drop(held.hold(&name, Arc::new(alone), source_len));
        }
        Self {
            resolved_source,
            index,
            invalid_packages,
            held: Mutex::new(held),
            unpacked_at,
            served_from: None,
            in_use: None,
        }
    }

    /// How many valid packages the catalog serves.
    #[must_use]
    pub fn package_count(&self) -> usize {
        self.index.len()
    }

    /// The packages left out as inconsistent, with why.
    #[must_use]
    pub fn invalid_packages(&self) -> &BTreeMap<String, FbcError> {
        &self.invalid_packages
    }

    /// Whether the catalog has `package`, valid or not.
    #[must_use]
    pub fn offers(&self, package: &str) -> bool {
        self.index.contains(package) || self.invalid_packages.contains_key(package)
    }

    /// The catalog as resolving `package` sees it: `package` alone (read back from the unpacked
    /// content if it is not held yet, then held), its invalidity, or nothing.
    ///
    /// # Errors
    /// The content can no longer be read back (it changed or was removed under the index).
    pub fn view(&self, package: &str) -> Result<Arc<Catalog>, FbcError> {
        if let Some(error) = self.invalid_packages.get(package) {
            return Ok(Arc::new(Catalog {
                invalid_packages: std::iter::once((package.to_owned(), error.clone())).collect(),
                ..Catalog::default()
            }));
        }
        if let Some(held) = self.lock_held().get(package) {
            return Ok(held);
        }
        // Read outside the lock: other packages' views are not held up by this one's I/O.
        let Some(read) = self.index.materialize(package)? else {
            return Ok(Arc::new(Catalog::default()));
        };
        let source_len = self.index.source_len(package).unwrap_or(0);
        let (held, let_go) = self.lock_held().hold(package, Arc::new(read), source_len);
        drop(let_go);
        Ok(held)
    }

    /// Lets go of the held packages not in `wanted` (no PlatformOperator names them).
    pub fn retain(&self, wanted: &BTreeSet<String>) {
        let let_go = self.lock_held().retain(|name| wanted.contains(name));
        drop(let_go);
    }

    /// The names of the packages held whole.
    #[must_use]
    pub fn held_packages(&self) -> Vec<String> {
        self.lock_held().names()
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, HeldPackages> {
        self.held.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether `package` reads the same in `self` and `other`.
    fn same_package(&self, other: &Self, package: &str) -> bool {
        self.index.fingerprint(package) == other.index.fingerprint(package)
            && self.invalid_packages.get(package) == other.invalid_packages.get(package)
    }
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
    /// Per package, the catalog generation at which its resolution last changed.
    package_generations: RwLock<HashMap<String, u64>>,
    changes: broadcast::Sender<Arc<BTreeSet<String>>>,
    /// The PlatformOperators (the manager's watch cache): the packages they name are the ones
    /// held whole. Unset until the PlatformOperator controller starts.
    operators: RwLock<Option<Store<PlatformOperator>>>,
    /// Catalog content being pulled or parsed now (by-digest references, with how many loads
    /// use each): its unpacked folder is not removed under the load.
    loading: Mutex<BTreeMap<String, usize>>,
}

/// Marks content as being loaded until dropped ([`CatalogCache::loading`]).
#[derive(Debug)]
pub struct LoadingGuard {
    inner: Arc<Inner>,
    reference: String,
}

impl Drop for LoadingGuard {
    fn drop(&mut self) {
        let mut loading = self
            .inner
            .loading
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(count) = loading.get_mut(&self.reference) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                loading.remove(&self.reference);
            }
        }
    }
}

/// The content a catalog entry resolves against (served, or kept from before a failure).
fn content_of(entry: &CatalogEntry) -> Option<&ServedCatalog> {
    entry.state.latest_good().map(AsRef::as_ref)
}

/// Every package name a catalog entry knows (valid or not).
fn package_names(entry: &CatalogEntry) -> BTreeSet<String> {
    content_of(entry)
        .map(|c| {
            c.index
                .names()
                .map(str::to_owned)
                .chain(c.invalid_packages.keys().cloned())
                .collect()
        })
        .unwrap_or_default()
}

/// The packages whose resolution a change of one catalog from `old` to `new` can affect: all
/// of its packages when it appears, goes, or changes priority or availability (which moves
/// `Upgradeable`); else those whose content differs.
#[must_use]
pub fn changed_packages(
    old: Option<&CatalogEntry>,
    new: Option<&CatalogEntry>,
) -> BTreeSet<String> {
    let (Some(old), Some(new)) = (old, new) else {
        let mut all = old.map(package_names).unwrap_or_default();
        all.extend(new.map(package_names).unwrap_or_default());
        return all;
    };
    let availability = |e: &CatalogEntry| e.state.serving().is_some();
    if old.priority != new.priority || availability(old) != availability(new) {
        let mut all = package_names(old);
        all.extend(package_names(new));
        return all;
    }
    let (Some(before), Some(after)) = (content_of(old), content_of(new)) else {
        let mut all = package_names(old);
        all.extend(package_names(new));
        return all;
    };
    let mut names = package_names(old);
    names.extend(package_names(new));
    names
        .into_iter()
        .filter(|name| !before.same_package(after, name))
        .collect()
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
                package_generations: RwLock::new(HashMap::new()),
                changes: broadcast::Sender::new(CHANGE_BACKLOG),
                operators: RwLock::new(None),
                loading: Mutex::new(BTreeMap::new()),
            }),
        }
    }
}

impl CatalogCache {
    /// Tells the cache which PlatformOperators exist: the packages they name are held whole.
    pub fn track_operators(&self, store: Store<PlatformOperator>) {
        *self
            .inner
            .operators
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(store);
    }

    /// Marks `reference` (by digest) as in use while the guard lives: being loaded, or read by
    /// a [`ServedCatalog`] that holds the guard.
    #[must_use]
    pub fn loading(&self, reference: &str) -> LoadingGuard {
        *self
            .inner
            .loading
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(reference.to_owned())
            .or_default() += 1;
        LoadingGuard {
            inner: self.inner.clone(),
            reference: reference.to_owned(),
        }
    }

    /// Content in use: what every catalog serves (or kept from before a failure) and what is
    /// being loaded now.
    #[must_use]
    pub fn content_in_use(&self) -> Vec<String> {
        let mut references: Vec<String> = self
            .read()
            .values()
            .filter_map(|entry| entry.state.latest_good())
            .map(|served| served.resolved_source.clone())
            .collect();
        references.extend(
            self.inner
                .loading
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .keys()
                .cloned(),
        );
        references
    }

    /// The packages some PlatformOperator names (none before the PlatformOperator controller
    /// started: packages are then read back when first resolved).
    #[must_use]
    pub fn wanted_packages(&self) -> BTreeSet<String> {
        self.inner
            .operators
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
            .map(|store| {
                store
                    .state()
                    .iter()
                    .map(|po| po.spec.package.name.clone())
                    .collect()
            })
            .unwrap_or_default()
    }

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

    /// The generation at which `package`'s resolution last changed (0: never since start).
    #[must_use]
    pub fn package_generation(&self, package: &str) -> u64 {
        self.inner
            .package_generations
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .get(package)
            .copied()
            .unwrap_or(0)
    }

    /// A receiver of the packages each change can affect (see [`changed_packages`]): the
    /// signal to re-resolve the PlatformOperators of those packages, and only those.
    #[must_use]
    pub fn subscribe_changes(&self) -> broadcast::Receiver<Arc<BTreeSet<String>>> {
        self.inner.changes.subscribe()
    }

    /// Forgets a catalog (it was deleted).
    pub fn remove(&self, name: &str) {
        let removed = self.write().remove(name);
        if let Some(old) = removed {
            self.bump(&changed_packages(Some(&old), None));
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

    /// Marks catalog `name` unavailable and drops its last good content: what it served may
    /// no longer be trusted (its source's namespace was taken off the admin's list), so
    /// nothing is resolved from it until it serves again.
    pub fn refuse(&self, name: &str, priority: i32, reason: Reason, message: &str) {
        self.set(
            name,
            priority,
            CatalogState::Unavailable {
                reason,
                message: message.to_owned(),
                last_good: None,
            },
        );
    }

    /// Names of every cached catalog.
    #[must_use]
    pub fn names(&self) -> Vec<String> {
        self.read().keys().cloned().collect()
    }

    fn set(&self, name: &str, priority: i32, state: CatalogState) {
        let packages = {
            let mut entries = self.write();
            let entry = CatalogEntry {
                name: name.to_owned(),
                priority,
                state,
            };
            let old = entries.get(name);
            let changed =
                old.is_none_or(|old| old.priority != priority || !old.state.same_as(&entry.state));
            let packages = changed.then(|| changed_packages(old, Some(&entry)));
            entries.insert(name.to_owned(), entry);
            packages
        };
        if let Some(packages) = packages {
            self.bump(&packages);
        }
    }

    /// Moves the generation, records it for `packages` (before the generation moves, so a
    /// reader that sees the new generation sees the packages' too), and tells subscribers.
    fn bump(&self, packages: &BTreeSet<String>) {
        let next = self.generation().wrapping_add(1);
        {
            let mut generations = self
                .inner
                .package_generations
                .write()
                .unwrap_or_else(PoisonError::into_inner);
            for package in packages {
                generations.insert(package.clone(), next);
            }
        }
        self.inner
            .generation
            .send_modify(|generation| *generation = next);
        // No subscriber (the PO controller not started yet) is not an error.
        let _ = self.inner.changes.send(Arc::new(packages.clone()));
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
        let empty = pom_resolver::fbc::parse_documents_scoped(
            Vec::<(String, Vec<u8>)>::new(),
            BTreeSet::new(),
        )
        .unwrap();
        Arc::new(ServedCatalog::new(
            source.to_owned(),
            empty,
            jiff::Timestamp::UNIX_EPOCH,
            super::super::DEFAULT_HELD_SOURCE_BUDGET,
        ))
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

    fn scoped_catalog_of(json: &str, scope: &[&str]) -> Arc<ServedCatalog> {
        let scoped = pom_resolver::fbc::parse_documents_scoped(
            [("c.json".to_owned(), json.as_bytes().to_vec())],
            scope.iter().map(|s| (*s).to_owned()).collect(),
        )
        .unwrap();
        Arc::new(ServedCatalog::new(
            format!("cm@{}", json.len()),
            scoped,
            jiff::Timestamp::UNIX_EPOCH,
            super::super::DEFAULT_HELD_SOURCE_BUDGET,
        ))
    }

    fn catalog_of(json: &str) -> Arc<ServedCatalog> {
        scoped_catalog_of(json, &[])
    }

    #[test]
    fn content_being_loaded_or_still_read_stays_in_use() {
        let cache = CatalogCache::default();
        cache.serve("a", 0, served("r/a@sha256:1"));
        let loading = cache.loading("r/b@sha256:2");
        let twice = cache.loading("r/b@sha256:2");
        let mut in_use = cache.content_in_use();
        in_use.sort();
        assert_eq!(in_use, ["r/a@sha256:1", "r/b@sha256:2"]);
        drop(loading);
        assert!(cache.content_in_use().contains(&"r/b@sha256:2".to_owned()));
        // A replaced content still read by a reconcile keeps its folder until dropped.
        let kept = Arc::new(
            Arc::try_unwrap(served("r/b@sha256:2"))
                .unwrap()
                .keeping(twice),
        );
        assert!(cache.content_in_use().contains(&"r/b@sha256:2".to_owned()));
        drop(kept);
        assert_eq!(cache.content_in_use(), ["r/a@sha256:1"]);
    }

    #[test]
    fn packages_are_held_while_named_and_read_back_when_named_again() {
        let broken = r#"{"schema":"olm.channel","package":"bad","name":"x","entries":[]}"#;
        let text = package("one", &["1.0.0"]) + &package("two", &["1.0.0"]) + broken;
        let full =
            pom_resolver::fbc::parse_documents([("c.json".to_owned(), text.as_bytes().to_vec())])
                .unwrap();
        let served = scoped_catalog_of(&text, &["two"]);
        assert_eq!(
            served.held_packages(),
            ["two"],
            "the scope is held from the start"
        );
        assert_eq!(served.package_count(), 2);
        assert!(served.offers("bad") && served.offers("one") && !served.offers("none"));
        assert_eq!(served.invalid_packages().len(), 1);
        // `one` is read back the first time it is asked for, exactly as a full parse has it.
        let one = served.view("one").unwrap();
        assert_eq!(one.packages.get("one"), full.packages.get("one"));
        assert_eq!(one.packages.len(), 1);
        assert_eq!(served.held_packages(), ["one", "two"]);
        assert!(Arc::ptr_eq(&one, &served.view("one").unwrap()), "then held");
        // Invalid and unknown packages: their verdict, nothing held.
        assert!(
            served
                .view("bad")
                .unwrap()
                .invalid_packages
                .contains_key("bad")
        );
        assert!(served.view("none").unwrap().packages.is_empty());
        // No PO names `one` any more: let go, and read back again on demand.
        served.retain(&["two".to_owned()].into_iter().collect());
        assert_eq!(served.held_packages(), ["two"]);
        assert_eq!(
            served.view("one").unwrap().packages.get("one"),
            full.packages.get("one")
        );
    }

    #[test]
    fn packages_over_the_budget_are_let_go_and_read_back_the_same() {
        let text = package("one", &["1.0.0"]) + &package("two", &["1.0.0"]);
        let full =
            pom_resolver::fbc::parse_documents([("c.json".to_owned(), text.as_bytes().to_vec())])
                .unwrap();
        let mut served = Arc::try_unwrap(catalog_of(&text)).unwrap();
        // Room for one package: the other is let go when it is used.
        served.held = Mutex::new(HeldPackages::new(1));
        let one = served.view("one").unwrap();
        let two = served.view("two").unwrap();
        assert_eq!(served.held_packages(), ["two"]);
        let again = served.view("one").unwrap();
        assert!(!Arc::ptr_eq(&one, &again), "read back, not held");
        assert!(again.packages.contains_key("one"));
        assert_eq!(again.packages.get("one"), full.packages.get("one"));
        assert_eq!(two.packages.get("two"), full.packages.get("two"));
        assert_eq!(served.held_packages(), ["one"]);
    }

    fn package(name: &str, versions: &[&str]) -> String {
        let mut text =
            format!(r#"{{"schema":"olm.package","name":"{name}","defaultChannel":"stable"}}"#);
        let entries: Vec<String> = versions
            .iter()
            .map(|v| format!(r#"{{"name":"{name}.v{v}"}}"#))
            .collect();
        text.push_str(&format!(
            r#"{{"schema":"olm.channel","package":"{name}","name":"stable","entries":[{}]}}"#,
            entries.join(",")
        ));
        for v in versions {
            text.push_str(&format!(
                r#"{{"schema":"olm.bundle","package":"{name}","name":"{name}.v{v}","image":"r/{name}:{v}","properties":[{{"type":"olm.package","value":{{"packageName":"{name}","version":"{v}"}}}}]}}"#
            ));
        }
        text
    }

    #[test]
    fn only_the_packages_whose_content_changed_are_announced() {
        let cache = CatalogCache::default();
        let mut rx = cache.subscribe_changes();
        let set = |names: &[&str]| {
            names
                .iter()
                .map(|n| (*n).to_owned())
                .collect::<BTreeSet<_>>()
        };
        cache.serve(
            "a",
            0,
            catalog_of(&(package("one", &["1.0.0"]) + &package("two", &["1.0.0"]))),
        );
        assert_eq!(
            *rx.try_recv().unwrap(),
            set(&["one", "two"]),
            "a new catalog: all of it"
        );
        let first = cache.package_generation("two");
        // A bundle added to `one` only.
        cache.serve(
            "a",
            0,
            catalog_of(&(package("one", &["1.0.0", "1.1.0"]) + &package("two", &["1.0.0"]))),
        );
        assert_eq!(*rx.try_recv().unwrap(), set(&["one"]));
        assert_eq!(cache.package_generation("two"), first, "two is untouched");
        assert!(cache.package_generation("one") > first);
        // Priority and availability affect every package of the catalog.
        cache.serve(
            "a",
            3,
            catalog_of(&(package("one", &["1.0.0", "1.1.0"]) + &package("two", &["1.0.0"]))),
        );
        assert_eq!(*rx.try_recv().unwrap(), set(&["one", "two"]));
        cache.mark_unavailable("a", 3, Reason::RegistryUnreachable, "down");
        assert_eq!(*rx.try_recv().unwrap(), set(&["one", "two"]));
        cache.remove("a");
        assert_eq!(*rx.try_recv().unwrap(), set(&["one", "two"]));
        assert!(rx.try_recv().is_err(), "nothing else was announced");
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
