//! The first full check of each PlatformOperator after the manager starts, served from one
//! start-up list per kind instead of one read per object, as an informer's initial list is.
//!
//! Why: a fresh process has no clean check to reuse (`quiet.rs` keeps them in memory), so the
//! first reconcile of every PO reads every object of its bundle: at 1,000 settled POs, ~16,000
//! reads after each restart, the manager's whole start-up cost (`docs/benchmarks.md`, "Restart
//! and leader failover at 1,000 POs"). Here, once the leader starts, each kind POM applies and
//! watches ([`snapshot_kinds`]) is listed once with the owner-label selector, paged, without
//! `managedFields`, and indexed by group, kind, namespace and name. A first check takes its
//! object from that snapshot instead of a GET when, and only when, the copy is still current:
//! its resourceVersion is the one the owned-object metadata watch of that kind holds now
//! ([`source`], pure). Otherwise (absent from the snapshot: not created yet, or without its
//! owner label; a different resourceVersion; that watch not listed yet) it reads as before.
//!
//! Why this repairs exactly what a GET-based check repairs:
//! - the snapshot is listed after this process started, so it holds every drift made while
//!   the manager was down (the list is as current as a GET made at its time);
//! - a change after the list gives the object a new resourceVersion, which the metadata watch
//!   sees: from then on the copy no longer matches and is not used. A change the watch has not
//!   delivered yet when the copy is used is an event still to come: it touches the PO
//!   (`quiet.rs`), so the check that used the copy is never kept as clean, and the PO is
//!   checked again, by a GET (the entry was dropped when used; an OperatorCondition the gate
//!   found by its labels is kept for the object check, and judged again by the same rule);
//! - an object that loses its owner label leaves both the watch and the snapshot: it is read.
//!
//! Kinds the owned-object watches do not cover are never taken from the snapshot (Secrets are
//! never listed: the manager has no `list` on them). Memory is transient: an entry is dropped
//! when used, and the whole snapshot (with the resourceVersions kept to judge it) once every
//! PO known at its start has had its first check, or after [`SNAPSHOT_LIFETIME`]; beyond
//! [`MAX_SNAPSHOT_OBJECTS`] no snapshot is kept and first checks read as before.

use std::collections::{HashMap, HashSet};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use futures::{FutureExt as _, Stream, StreamExt as _, TryStreamExt as _};
use kube::api::{Api, DynamicObject, ListParams, ObjectMeta, TypeMeta};
use kube::core::GroupVersionKind;
use kube::runtime::watcher;
use kube::{Client, Resource};
use pom_api::labels;

use super::objects::{KindCache, PRUNABLE_KINDS, is_not_served};
use crate::error::Error;

/// The longest a start-up snapshot is kept: first checks later than this read each object.
pub const SNAPSHOT_LIFETIME: Duration = Duration::from_secs(120);
/// The most objects a snapshot holds; a cluster with more owner-labelled objects gets none.
pub const MAX_SNAPSHOT_OBJECTS: usize = 25_000;
/// Objects per list page: small, so that the pages parsed whole at once (a Deployment or a CRD
/// is a few KiB of JSON, several times that parsed; up to [`LIST_CONCURRENCY`] pages in flight)
/// add little to the peak memory of a start.
const PAGE_SIZE: u32 = 100;
/// Kinds listed at once. Chosen, not tuned (no other value was measured): a few lists keep
/// the API server busy without waiting on each round trip, and each one more queues the
/// ClusterOperator's own reads at a start behind one more page.
const LIST_CONCURRENCY: usize = 4;
/// How long after the controller's start first checks wait for the snapshot (and the snapshot
/// for the metadata watches' first lists), at most: later, they read instead. One deadline for
/// all, so a reconcile never waits more than once.
const WAIT_FOR_SNAPSHOT: Duration = Duration::from_secs(20);

/// Kinds the snapshot holds beside the prunable ones (never pruned, but applied and watched).
const SNAPSHOT_ONLY_KINDS: &[(&str, &str, &str)] = &[
    ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    ("", "v1", "Namespace"),
];

/// The kinds snapshotted: every kind POM applies that an owned-object metadata watch covers
/// (`reconcile.rs`, `watch_owned_kinds`): the CRDs and Namespaces, and the prunable kinds but
/// the webhook configurations (registered only once served, never watched).
pub fn snapshot_kinds() -> impl Iterator<Item = &'static (&'static str, &'static str, &'static str)>
{
    SNAPSHOT_ONLY_KINDS.iter().chain(
        PRUNABLE_KINDS
            .iter()
            .filter(|(group, _, _)| *group != "admissionregistration.k8s.io"),
    )
}

/// Where one object is: its group, kind, namespace (`None`: cluster-scoped) and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl ObjectKey {
    /// The key of `name` of kind `gvk`, in `namespace` when the kind is namespaced.
    #[must_use]
    pub fn new(gvk: &GroupVersionKind, namespace: Option<&str>, name: &str) -> Self {
        Self {
            group: gvk.group.clone(),
            kind: gvk.kind.clone(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    fn of(group: &str, kind: &str, meta: &ObjectMeta) -> Option<Self> {
        Some(Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: meta.namespace.clone(),
            name: meta.name.clone()?,
        })
    }
}

/// What the metadata watch of an object's kind holds of it now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Watched<'a> {
    /// The watch has not listed (or does not cover the kind): it cannot vouch for anything.
    NotListed,
    /// Not in the watch (deleted, or without its owner label).
    Absent,
    /// At this resourceVersion.
    At(&'a str),
}

/// Where a first check takes an object from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// The snapshot's copy: the watch holds the same resourceVersion.
    Snapshot,
    /// A GET, because of this.
    Get(Miss),
}

/// Why the snapshot's copy is not used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Miss {
    /// Not in the snapshot (not created yet, or without its owner label at the list).
    NotInSnapshot,
    /// The watch has not listed the kind.
    WatchNotListed,
    /// The watch no longer holds it.
    Gone,
    /// The watch holds another resourceVersion: it changed after the list (or before a watch
    /// that lags).
    Changed,
}

/// The freshness rule: the snapshot's copy (at `snapshot`, its resourceVersion) is used only
/// when the metadata watch holds the very same resourceVersion now. Pure.
#[must_use]
pub fn source(snapshot: Option<&str>, watched: Watched<'_>) -> Source {
    match (snapshot, watched) {
        (None, _) => Source::Get(Miss::NotInSnapshot),
        (Some(_), Watched::NotListed) => Source::Get(Miss::WatchNotListed),
        (Some(_), Watched::Absent) => Source::Get(Miss::Gone),
        (Some(copy), Watched::At(now)) if copy == now => Source::Snapshot,
        (Some(_), Watched::At(_)) => Source::Get(Miss::Changed),
    }
}

/// Why no snapshot was kept.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("more than {limit} owner-labelled objects")]
    TooMany { limit: usize },
    #[error("listing {kind}: {source}")]
    List {
        kind: String,
        #[source]
        source: Box<Error>,
    },
}

/// The kinds a reconcile finds by its owner and bundle labels rather than by name: the gate's
/// OperatorCondition (`gather::operator_gate` finds it so whatever the CSV is named). Without
/// this the gate of every PO was one list per PO after each start: 1,012 of the 1,374 requests
/// of a restart at 1,000 POs (`docs/benchmarks.md`).
const FOUND_BY_LABELS: &[(&str, &str)] = &[("operators.coreos.com", "OperatorCondition")];

/// An object of a [`FOUND_BY_LABELS`] kind as a reconcile looks for it: its group, kind and
/// namespace, and the values of its owner and bundle labels.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct LabelledKey {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub owner: String,
    pub bundle: String,
}

impl LabelledKey {
    fn of(group: &str, kind: &str, meta: &ObjectMeta) -> Option<Self> {
        if !FOUND_BY_LABELS.contains(&(group, kind)) {
            return None;
        }
        let labels = meta.labels.as_ref()?;
        Some(Self {
            group: group.to_owned(),
            kind: kind.to_owned(),
            namespace: meta.namespace.clone()?,
            owner: labels.get(labels::OWNER_PO)?.clone(),
            bundle: labels.get(labels::BUNDLE)?.clone(),
        })
    }
}

/// An object of the snapshot: its resourceVersion and its JSON (compact; parsed when used).
#[derive(Clone)]
struct Stored {
    resource_version: String,
    json: Box<[u8]>,
}

/// The start-up list of every snapshotted kind, and the POs yet to have their first check.
struct Snapshot {
    objects: HashMap<ObjectKey, Stored>,
    /// Where each object of a [`FOUND_BY_LABELS`] kind is, by its labels (the first listed,
    /// as a list by those labels returns it first).
    labelled: HashMap<LabelledKey, ObjectKey>,
    unchecked: HashSet<String>,
}

/// What the start-up list found.
#[derive(Default)]
struct Listed {
    objects: HashMap<ObjectKey, Stored>,
    labelled: HashMap<LabelledKey, ObjectKey>,
    /// Labels two objects carried (POM makes one OperatorCondition per bundle, but an operator
    /// may copy its labels onto another): not indexed, so the gate reads them as a list does.
    ambiguous: HashSet<LabelledKey>,
}

impl Listed {
    /// Keeps a listed object of kind `gvk`, indexed by its labels when its kind is found by
    /// them.
    fn add(&mut self, gvk: &GroupVersionKind, object: DynamicObject) {
        if let Some(labelled) = LabelledKey::of(&gvk.group, &gvk.kind, &object.metadata)
            && let Some(key) = ObjectKey::of(&gvk.group, &gvk.kind, &object.metadata)
        {
            match self.labelled.get(&labelled) {
                Some(indexed) if *indexed != key => {
                    self.ambiguous.insert(labelled);
                }
                Some(_) => {}
                None => {
                    self.labelled.insert(labelled, key);
                }
            }
        }
        if let Some((key, stored)) = entry(gvk, object) {
            self.objects.insert(key, stored);
        }
    }

    /// The objects and the label index without the ambiguous labels.
    fn finish(mut self) -> (HashMap<ObjectKey, Stored>, HashMap<LabelledKey, ObjectKey>) {
        for labelled in &self.ambiguous {
            self.labelled.remove(labelled);
        }
        (self.objects, self.labelled)
    }
}

/// Where the snapshot is.
enum State {
    Taking,
    Ready(Snapshot),
    Gone,
}

/// The resourceVersions the owned-object metadata watches hold, by kind: `None` until the
/// kind's first list is done.
#[derive(Default)]
struct WatchedVersions {
    kinds: HashMap<(String, String), KindVersions>,
}

#[derive(Default)]
struct KindVersions {
    listed: Option<HashMap<(Option<String>, String), String>>,
    relisting: Option<HashMap<(Option<String>, String), String>>,
}

impl KindVersions {
    fn observe(&mut self, event: &watcher::Event<&ObjectMeta>) {
        let key = |meta: &ObjectMeta| Some((meta.namespace.clone(), meta.name.clone()?));
        match event {
            watcher::Event::Init => self.relisting = Some(HashMap::new()),
            watcher::Event::InitApply(meta) => {
                if let (Some(relisting), Some(key), Some(rv)) =
                    (&mut self.relisting, key(meta), &meta.resource_version)
                {
                    relisting.insert(key, rv.clone());
                }
            }
            watcher::Event::InitDone => {
                self.listed = Some(self.relisting.take().unwrap_or_default())
            }
            watcher::Event::Apply(meta) => {
                if let (Some(listed), Some(key), Some(rv)) =
                    (&mut self.listed, key(meta), &meta.resource_version)
                {
                    listed.insert(key, rv.clone());
                }
            }
            watcher::Event::Delete(meta) => {
                if let (Some(listed), Some(key)) = (&mut self.listed, key(meta)) {
                    listed.remove(&key);
                }
            }
        }
    }
}

/// The start-up snapshot and what judges it, shared by every PO reconcile of one leadership.
pub struct FirstChecks {
    /// Until when first checks wait for the snapshot.
    wait_until: tokio::time::Instant,
    state: Mutex<State>,
    /// Set once the snapshot is ready or given up.
    settled: tokio::sync::watch::Sender<bool>,
    watched: Mutex<WatchedVersions>,
    /// Bumped at each metadata watch's list, for the snapshot to wait on.
    lists: tokio::sync::watch::Sender<u64>,
    /// False once the snapshot is gone: the watches' resourceVersions are no longer kept.
    active: AtomicBool,
    hits: AtomicU64,
    misses: AtomicU64,
}

impl Default for FirstChecks {
    fn default() -> Self {
        Self {
            wait_until: tokio::time::Instant::now() + WAIT_FOR_SNAPSHOT,
            state: Mutex::new(State::Taking),
            settled: tokio::sync::watch::channel(false).0,
            watched: Mutex::default(),
            lists: tokio::sync::watch::channel(0).0,
            active: AtomicBool::new(true),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
        }
    }
}

impl FirstChecks {
    /// Records an event of the owned-object metadata watch of kind `K` (called with each event
    /// before it triggers a reconcile).
    pub fn observe<K: Resource<DynamicType = ()>>(&self, event: &watcher::Event<K>) {
        if !self.active.load(Ordering::Relaxed) {
            return;
        }
        let meta = match event {
            watcher::Event::Init => watcher::Event::Init,
            watcher::Event::InitDone => watcher::Event::InitDone,
            watcher::Event::InitApply(o) => watcher::Event::InitApply(o.meta()),
            watcher::Event::Apply(o) => watcher::Event::Apply(o.meta()),
            watcher::Event::Delete(o) => watcher::Event::Delete(o.meta()),
        };
        let kind = (K::group(&()).into_owned(), K::kind(&()).into_owned());
        if let Ok(mut watched) = self.watched.lock() {
            watched.kinds.entry(kind).or_default().observe(&meta);
        }
        if matches!(event, watcher::Event::InitDone) {
            self.lists.send_modify(|n| *n += 1);
        }
    }

    /// Takes the snapshot, then keeps it at most [`SNAPSHOT_LIFETIME`], or until each PO that
    /// `pos` resolves to (the POs known once their cache listed) had its first check. The
    /// lists do not wait for `pos`; a list that fails gives the snapshot up at once.
    pub async fn take(
        &self,
        client: &Client,
        kinds: &KindCache,
        pos: impl Future<Output = HashSet<String>>,
    ) {
        match futures::future::try_join(list_owned(client, kinds), pos.map(Ok)).await {
            Ok((listed, pos)) => {
                let (objects, labelled) = listed.finish();
                tracing::info!(
                    objects = objects.len(),
                    "listed the owned objects for the first checks after start"
                );
                self.wait_for_watches(&objects).await;
                if let Ok(mut state) = self.state.lock() {
                    *state = State::Ready(Snapshot {
                        objects,
                        labelled,
                        unchecked: pos,
                    });
                }
            }
            Err(err) => {
                tracing::info!(%err, "no snapshot for the first checks after start: each reads its objects");
                self.drop_snapshot();
            }
        }
        self.settled.send_replace(true);
        tokio::time::sleep(SNAPSHOT_LIFETIME).await;
        self.drop_snapshot();
    }

    /// Waits (bounded) until the metadata watch of every kind the snapshot holds has listed:
    /// until then no copy of that kind can be judged current.
    async fn wait_for_watches(&self, objects: &HashMap<ObjectKey, Stored>) {
        let wanted: HashSet<(String, String)> = objects
            .keys()
            .map(|k| (k.group.clone(), k.kind.clone()))
            .collect();
        let all_listed = |_: &u64| {
            self.watched.lock().is_ok_and(|w| {
                wanted
                    .iter()
                    .all(|k| w.kinds.get(k).is_some_and(|v| v.listed.is_some()))
            })
        };
        let mut lists = self.lists.subscribe();
        let _ = tokio::time::timeout_at(self.wait_until, lists.wait_for(all_listed)).await;
    }

    /// The object at `key`: the snapshot's copy when it is current, else what `read` reads.
    ///
    /// # Errors
    /// When the read fails.
    pub async fn current_or<K: serde::de::DeserializeOwned>(
        &self,
        key: &ObjectKey,
        read: impl Future<Output = Result<Option<K>, Error>>,
    ) -> Result<Option<K>, Error> {
        match self.current_copy(key).await {
            Some(copy) => Ok(Some(copy)),
            None => read.await,
        }
    }

    /// The snapshot's copy of the object `labelled` names when it is current, else what `read`
    /// reads. Unlike [`Self::current_or`] the entry is kept: the object check of the same
    /// reconcile may take it after the gate did.
    ///
    /// # Errors
    /// When the read fails.
    pub async fn current_labelled_or<K: serde::de::DeserializeOwned>(
        &self,
        labelled: &LabelledKey,
        read: impl Future<Output = Result<Option<K>, Error>>,
    ) -> Result<Option<K>, Error> {
        match self.current_labelled_copy(labelled).await {
            Some(copy) => Ok(Some(copy)),
            None => read.await,
        }
    }

    async fn current_labelled_copy<K: serde::de::DeserializeOwned>(
        &self,
        labelled: &LabelledKey,
    ) -> Option<K> {
        if !self.settled().await {
            return None;
        }
        let (key, stored) = match &*self.state.lock().ok()? {
            State::Ready(snapshot) => {
                let key = snapshot.labelled.get(labelled)?.clone();
                let stored = snapshot.objects.get(&key).cloned();
                (key, stored)
            }
            State::Taking | State::Gone => return None,
        };
        self.judged(&key, stored)
    }

    /// The snapshot's copy of `key` if it is current ([`source`]); the entry is dropped.
    async fn current_copy<K: serde::de::DeserializeOwned>(&self, key: &ObjectKey) -> Option<K> {
        if !self.settled().await {
            return None;
        }
        let stored = match &mut *self.state.lock().ok()? {
            State::Ready(snapshot) => snapshot.objects.remove(key),
            State::Taking | State::Gone => return None,
        };
        self.judged(key, stored)
    }

    /// `stored` (the snapshot's copy of `key`, if any) parsed when the watch vouches for it
    /// ([`source`]); counted as a hit or a miss.
    fn judged<K: serde::de::DeserializeOwned>(
        &self,
        key: &ObjectKey,
        stored: Option<Stored>,
    ) -> Option<K> {
        let decided = {
            let watched = self.watched.lock().ok()?;
            let at = watched
                .kinds
                .get(&(key.group.clone(), key.kind.clone()))
                .and_then(|v| v.listed.as_ref())
                .map_or(Watched::NotListed, |listed| {
                    listed
                        .get(&(key.namespace.clone(), key.name.clone()))
                        .map_or(Watched::Absent, |rv| Watched::At(rv))
                });
            source(stored.as_ref().map(|s| s.resource_version.as_str()), at)
        };
        let copy = match decided {
            Source::Snapshot => stored.and_then(|s| serde_json::from_slice(&s.json).ok()),
            Source::Get(miss) => {
                tracing::debug!(?key, ?miss, "first check reads the object");
                None
            }
        };
        let counter = if copy.is_some() {
            &self.hits
        } else {
            &self.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        copy
    }

    /// Waits (bounded by the same deadline) until the start-up snapshot is taken or given up,
    /// which is also when the owned-object watches have delivered their initial lists; whether
    /// it settled in time. A reconcile waits here before it notes what its check depends on
    /// (`quiet::Observed`): the initial lists' events would otherwise make the first clean
    /// check stale the moment it is recorded, and the next reconcile check everything again.
    pub async fn settled(&self) -> bool {
        let mut settled = self.settled.subscribe();
        matches!(
            tokio::time::timeout_at(self.wait_until, settled.wait_for(|s| *s)).await,
            Ok(Ok(_))
        )
    }

    /// `po` had its first full check: once every PO known at the start had, the snapshot goes.
    pub fn checked(&self, po: &str) {
        let done = self.state.lock().is_ok_and(|mut state| match &mut *state {
            State::Ready(snapshot) => {
                snapshot.unchecked.remove(po);
                snapshot.unchecked.is_empty()
            }
            State::Taking | State::Gone => false,
        });
        if done {
            self.drop_snapshot();
        }
    }

    /// Drops the snapshot and the resourceVersions kept to judge it.
    fn drop_snapshot(&self) {
        let held = self
            .state
            .lock()
            .map(|mut state| std::mem::replace(&mut *state, State::Gone))
            .ok();
        self.active.store(false, Ordering::Relaxed);
        if let Ok(mut watched) = self.watched.lock() {
            *watched = WatchedVersions::default();
        }
        if let Some(State::Ready(snapshot)) = held {
            tracing::info!(
                hits = self.hits.load(Ordering::Relaxed),
                misses = self.misses.load(Ordering::Relaxed),
                unused = snapshot.objects.len(),
                "first checks after start done: snapshot dropped"
            );
        }
    }
}

/// Every owner-labelled object of the [`snapshot_kinds`] the server serves, paged, without
/// `managedFields`, by key; refused beyond [`MAX_SNAPSHOT_OBJECTS`]. The kinds page
/// [`LIST_CONCURRENCY`] at a time, and their pages are kept in one place, in the order they
/// come: one kind after another, a restart at 1,000 POs waited for ~130 pages in a row before
/// any first check could run (`docs/benchmarks.md`, session 25). The first error ends every
/// list.
async fn list_owned(client: &Client, kinds: &KindCache) -> Result<Listed, SnapshotError> {
    let gvks: Vec<GroupVersionKind> = snapshot_kinds()
        .map(|(group, version, kind)| GroupVersionKind::gvk(group, version, kind))
        .collect();
    futures::stream::iter(gvks)
        .map(|gvk| Box::pin(pages_of(client, kinds, gvk)))
        .flatten_unordered(LIST_CONCURRENCY)
        .try_fold(Listed::default(), |mut listed, (gvk, page)| async move {
            if listed.objects.len() + page.len() > MAX_SNAPSHOT_OBJECTS {
                return Err(SnapshotError::TooMany {
                    limit: MAX_SNAPSHOT_OBJECTS,
                });
            }
            for object in page {
                listed.add(&gvk, object);
            }
            Ok(listed)
        })
        .await
}

/// Where the list of one kind is.
enum Paging {
    Start,
    /// Boxed: the API handle and its parameters are large beside the other states.
    Next(Box<(Api<DynamicObject>, ListParams)>),
    Done,
}

/// The owner-labelled objects of kind `gvk`, a page at a time (none when the server does not
/// serve the kind: no such object exists).
fn pages_of<'a>(
    client: &'a Client,
    kinds: &'a KindCache,
    gvk: GroupVersionKind,
) -> impl Stream<Item = Result<(GroupVersionKind, Vec<DynamicObject>), SnapshotError>> + 'a {
    futures::stream::try_unfold(Paging::Start, move |paging| {
        let gvk = gvk.clone();
        async move {
            let failed = |source: Error| SnapshotError::List {
                kind: gvk.kind.clone(),
                source: Box::new(source),
            };
            let (api, params) = match paging {
                Paging::Done => return Ok(None),
                Paging::Next(next) => *next,
                Paging::Start => match kinds.api(client, &gvk, None).await {
                    Ok((api, _)) => (
                        api,
                        ListParams::default()
                            .labels(labels::OWNER_PO)
                            .limit(PAGE_SIZE),
                    ),
                    Err(Error::Kube { source, .. }) if is_not_served(&source) => {
                        return Ok(None);
                    }
                    Err(err) => return Err(failed(err)),
                },
            };
            let page = api
                .list(&params)
                .await
                .map_err(|e| failed(Error::kube(format!("listing {} objects", gvk.kind))(e)))?;
            let next = match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => Paging::Next(Box::new((api, params.continue_token(&token)))),
                None => Paging::Done,
            };
            Ok(Some(((gvk, page.items), next)))
        }
    })
}

/// A listed object as the snapshot keeps it: as a GET returns it (a list's items of built-in
/// kinds carry no `apiVersion` and `kind`: without them every copy would differ from what is
/// applied, and be written), without `managedFields`. `None` without a name or resourceVersion.
fn entry(gvk: &GroupVersionKind, mut object: DynamicObject) -> Option<(ObjectKey, Stored)> {
    object.types = Some(TypeMeta {
        api_version: gvk.api_version(),
        kind: gvk.kind.clone(),
    });
    object.metadata.managed_fields = None;
    let key = ObjectKey::of(&gvk.group, &gvk.kind, &object.metadata)?;
    let resource_version = object.metadata.resource_version.clone()?;
    let json = serde_json::to_vec(&object).ok()?.into_boxed_slice();
    Some((
        key,
        Stored {
            resource_version,
            json,
        },
    ))
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use k8s_openapi::api::rbac::v1::Role;
    use kube::api::PartialObjectMeta;

    use super::*;

    #[test]
    fn a_copy_is_used_only_when_the_watch_holds_its_resource_version() {
        let cases = [
            (Some("5"), Watched::At("5"), Source::Snapshot),
            (Some("5"), Watched::At("6"), Source::Get(Miss::Changed)),
            (Some("6"), Watched::At("5"), Source::Get(Miss::Changed)),
            (Some("5"), Watched::Absent, Source::Get(Miss::Gone)),
            (
                Some("5"),
                Watched::NotListed,
                Source::Get(Miss::WatchNotListed),
            ),
            (None, Watched::At("5"), Source::Get(Miss::NotInSnapshot)),
            (None, Watched::Absent, Source::Get(Miss::NotInSnapshot)),
            (None, Watched::NotListed, Source::Get(Miss::NotInSnapshot)),
        ];
        for (snapshot, watched, expected) in cases {
            assert_eq!(
                source(snapshot, watched),
                expected,
                "{snapshot:?} {watched:?}"
            );
        }
    }

    fn role(name: &str, rv: &str) -> PartialObjectMeta<Role> {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": name, "namespace": "ns", "resourceVersion": rv}
        }))
        .unwrap()
    }

    fn stored(rv: &str) -> Stored {
        Stored {
            resource_version: rv.to_owned(),
            json: serde_json::to_vec(&serde_json::json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "a", "namespace": "ns", "resourceVersion": rv}
            }))
            .unwrap()
            .into_boxed_slice(),
        }
    }

    fn key(name: &str) -> ObjectKey {
        ObjectKey {
            group: "rbac.authorization.k8s.io".into(),
            kind: "Role".into(),
            namespace: Some("ns".into()),
            name: name.into(),
        }
    }

    fn ready(checks: &FirstChecks, objects: HashMap<ObjectKey, Stored>, pos: &[&str]) {
        *checks.state.lock().unwrap() = State::Ready(Snapshot {
            objects,
            labelled: HashMap::new(),
            unchecked: pos.iter().map(|p| (*p).to_owned()).collect(),
        });
        checks.settled.send_replace(true);
    }

    #[tokio::test]
    async fn the_watch_decides_whether_a_copy_is_current_and_each_entry_is_used_once() {
        let checks = FirstChecks::default();
        ready(
            &checks,
            HashMap::from([(key("a"), stored("5")), (key("b"), stored("5"))]),
            &["po"],
        );
        // The watch has not listed: nothing is vouched for.
        assert!(
            checks
                .current_copy::<DynamicObject>(&key("a"))
                .await
                .is_none()
        );
        ready(
            &checks,
            HashMap::from([(key("a"), stored("5")), (key("b"), stored("5"))]),
            &["po"],
        );
        checks.observe(&watcher::Event::<PartialObjectMeta<Role>>::Init);
        checks.observe(&watcher::Event::InitApply(role("a", "5")));
        checks.observe(&watcher::Event::InitApply(role("b", "5")));
        checks.observe(&watcher::Event::<PartialObjectMeta<Role>>::InitDone);
        // b changed after the list.
        checks.observe(&watcher::Event::Apply(role("b", "7")));
        let a: DynamicObject = checks.current_copy(&key("a")).await.expect("current");
        assert_eq!(a.metadata.resource_version.as_deref(), Some("5"));
        assert!(
            checks
                .current_copy::<DynamicObject>(&key("a"))
                .await
                .is_none(),
            "used once"
        );
        assert!(
            checks
                .current_copy::<DynamicObject>(&key("b"))
                .await
                .is_none(),
            "changed"
        );
        assert_eq!(checks.hits.load(Ordering::Relaxed), 1);
    }

    #[tokio::test]
    async fn a_copy_found_by_labels_is_judged_by_the_watch_and_kept_for_the_object_check() {
        use pom_api::olm::OperatorCondition;
        let condition_key = ObjectKey {
            group: "operators.coreos.com".into(),
            kind: "OperatorCondition".into(),
            namespace: Some("ns".into()),
            name: "op.v1".into(),
        };
        let labelled = |bundle: &str| LabelledKey {
            group: "operators.coreos.com".into(),
            kind: "OperatorCondition".into(),
            namespace: "ns".into(),
            owner: "po".into(),
            bundle: bundle.into(),
        };
        let meta = |rv: &str| -> PartialObjectMeta<OperatorCondition> {
            serde_json::from_value(serde_json::json!({
                "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
                "metadata": {"name": "op.v1", "namespace": "ns", "resourceVersion": rv}
            }))
            .unwrap()
        };
        let listed = serde_json::json!({
            "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
            "metadata": {"name": "op.v1", "namespace": "ns", "resourceVersion": "5",
                         "labels": {labels::OWNER_PO: "po", labels::BUNDLE: "op.v1"}}
        });
        let object: DynamicObject = serde_json::from_value(listed).unwrap();
        let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
        assert_eq!(
            LabelledKey::of(&gvk.group, &gvk.kind, &object.metadata),
            Some(labelled("op.v1"))
        );
        let (key, stored) = entry(&gvk, object).unwrap();
        assert_eq!(key, condition_key);
        let checks = FirstChecks::default();
        *checks.state.lock().unwrap() = State::Ready(Snapshot {
            objects: HashMap::from([(key.clone(), stored)]),
            labelled: HashMap::from([(labelled("op.v1"), key.clone())]),
            unchecked: HashSet::from(["po".to_owned()]),
        });
        checks.settled.send_replace(true);
        let never_read = async { panic!("read although the snapshot's copy is current") };
        let unread = async { Ok(None) };
        checks.observe(&watcher::Event::<PartialObjectMeta<OperatorCondition>>::Init);
        checks.observe(&watcher::Event::InitApply(meta("5")));
        checks.observe(&watcher::Event::<PartialObjectMeta<OperatorCondition>>::InitDone);
        // Found by its labels: another bundle's labels find nothing, and read.
        let other: Option<DynamicObject> = checks
            .current_labelled_or(&labelled("op.v2"), unread)
            .await
            .unwrap();
        assert!(other.is_none());
        let found: Option<DynamicObject> = checks
            .current_labelled_or(&labelled("op.v1"), never_read)
            .await
            .unwrap();
        assert_eq!(
            found.unwrap().metadata.resource_version.as_deref(),
            Some("5")
        );
        // Kept: the object check of the same reconcile takes it after the gate.
        let taken: DynamicObject = checks.current_copy(&condition_key).await.expect("kept");
        assert_eq!(taken.metadata.name.as_deref(), Some("op.v1"));
        // Changed after the list (the operator reported): read again.
        *checks.state.lock().unwrap() = State::Ready(Snapshot {
            objects: HashMap::from([(key.clone(), stored_condition())]),
            labelled: HashMap::from([(labelled("op.v1"), key)]),
            unchecked: HashSet::from(["po".to_owned()]),
        });
        checks.observe(&watcher::Event::Apply(meta("6")));
        let read = async {
            Ok(Some(DynamicObject::new(
                "op.v1",
                &kube::api::ApiResource::from_gvk(&gvk),
            )))
        };
        let found: Option<DynamicObject> = checks
            .current_labelled_or(&labelled("op.v1"), read)
            .await
            .unwrap();
        assert!(
            found.unwrap().metadata.resource_version.is_none(),
            "read, not the stale copy"
        );
    }

    #[test]
    fn labels_two_objects_carry_are_not_indexed() {
        let gvk = GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition");
        let condition = |name: &str| -> DynamicObject {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": name, "namespace": "ns", "resourceVersion": "1",
                             "labels": {labels::OWNER_PO: "po", labels::BUNDLE: "op.v1"}}
            }))
            .unwrap()
        };
        let mut listed = Listed::default();
        listed.add(&gvk, condition("op.v1"));
        listed.add(&gvk, condition("op.v1"));
        let (objects, labelled) = listed.finish();
        assert_eq!(
            (objects.len(), labelled.len()),
            (1, 1),
            "one object, indexed"
        );
        let mut listed = Listed::default();
        listed.add(&gvk, condition("op.v1"));
        listed.add(&gvk, condition("a-copy"));
        let (objects, labelled) = listed.finish();
        assert_eq!(objects.len(), 2);
        assert!(
            labelled.is_empty(),
            "two objects with the gate's labels: read by a list"
        );
    }

    fn stored_condition() -> Stored {
        Stored {
            resource_version: "5".to_owned(),
            json: b"{}".to_vec().into_boxed_slice(),
        }
    }

    #[tokio::test]
    async fn the_snapshot_goes_once_every_po_had_its_first_check() {
        let checks = FirstChecks::default();
        ready(
            &checks,
            HashMap::from([(key("a"), stored("5"))]),
            &["one", "two"],
        );
        checks.observe(&watcher::Event::<PartialObjectMeta<Role>>::Init);
        checks.observe(&watcher::Event::InitApply(role("a", "5")));
        checks.observe(&watcher::Event::<PartialObjectMeta<Role>>::InitDone);
        checks.checked("one");
        assert!(matches!(*checks.state.lock().unwrap(), State::Ready(_)));
        checks.checked("two");
        assert!(matches!(*checks.state.lock().unwrap(), State::Gone));
        assert!(
            checks
                .current_copy::<DynamicObject>(&key("a"))
                .await
                .is_none()
        );
        assert!(
            checks.watched.lock().unwrap().kinds.is_empty(),
            "versions dropped too"
        );
        checks.observe(&watcher::Event::Apply(role("a", "6")));
        assert!(
            checks.watched.lock().unwrap().kinds.is_empty(),
            "no longer kept"
        );
    }

    /// A copy must read as a GET's answer: `apply_if_changed` compares the whole applied
    /// object, `apiVersion` and `kind` included, with it.
    #[test]
    fn a_listed_item_is_kept_as_a_get_returns_it() {
        let gvk = GroupVersionKind::gvk("rbac.authorization.k8s.io", "v1", "Role");
        let item: DynamicObject = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "ns", "resourceVersion": "5",
                "managedFields": [{"manager": "m", "operation": "Apply"}]},
            "rules": []
        }))
        .unwrap();
        let (k, stored) = entry(&gvk, item).unwrap();
        assert_eq!(k, key("a"));
        assert_eq!(stored.resource_version, "5");
        let kept: serde_json::Value = serde_json::from_slice(&stored.json).unwrap();
        assert_eq!(kept["apiVersion"], "rbac.authorization.k8s.io/v1");
        assert_eq!(kept["kind"], "Role");
        assert!(kept["metadata"].get("managedFields").is_none());
        assert_eq!(kept["rules"], serde_json::json!([]));
        let nameless: DynamicObject =
            serde_json::from_value(serde_json::json!({"metadata": {"resourceVersion": "5"}}))
                .unwrap();
        assert!(entry(&gvk, nameless).is_none());
    }

    #[test]
    fn every_snapshotted_kind_but_crds_and_namespaces_is_prunable() {
        let kinds: Vec<_> = snapshot_kinds().collect();
        assert_eq!(kinds.len(), 13, "{kinds:?}");
        for (group, version, kind) in kinds {
            let prunable = super::super::objects::PRUNABLE_KINDS.contains(&(group, version, kind));
            assert!(
                prunable || matches!(*kind, "CustomResourceDefinition" | "Namespace"),
                "{kind}"
            );
            assert_ne!(*kind, "Secret");
        }
    }
}
