//! The cluster's image mirror configuration, as the manager's own pulls use it (PRODUCT §10,
//! issue 23 item 1).
//!
//! On OpenShift the nodes pull through the mirrors that `ImageDigestMirrorSet`,
//! `ImageTagMirrorSet` and `ImageContentSourcePolicy` objects declare (the machine-config
//! operator renders them into registries.conf). POM's catalog and bundle pulls must go where
//! the nodes' pulls go: on a disconnected cluster the source registries are unreachable, and a
//! source the admin marked `NeverContactSource` must never be contacted. So the manager watches
//! the three kinds and keeps a [`Snapshot`]: the [`MirrorRules`] every pull goes through
//! (`pom_oci::mirrors` resolves a pull as containers/image does), and why the cluster's
//! current configuration is not in force when it is not.
//!
//! - gather: one watch per kind feeds a `KindView` (pure: what is known of that kind); a kind
//!   the API server does not serve (no CRD, as on plain Kubernetes) is known to hold no rules,
//!   and its watch keeps retrying (kube's backoff, at most 30 s apart), so a CRD installed
//!   later is picked up;
//! - decide: `decide` builds the rules from the three views (pure, table-tested). A
//!   configuration the machine-config operator would refuse, or that cannot be read whole,
//!   leaves **the last good rules** in force: falling back to no rules could contact a source
//!   the admin forbade. Before any configuration was read and valid there are no rules to keep,
//!   and pulls fail rather than guess ([`Snapshot::for_pull`]);
//! - act: the snapshot is published on a `watch` channel that pulls read; a refused
//!   configuration is logged (warn) and published as a Warning Event on the objects the refusal
//!   names (`kubectl describe imagedigestmirrorset <name>` shows it), and every pull failure
//!   while it is refused says so in its message ([`PullMirrors::explain`]), hence in the
//!   Catalog's or PlatformOperator's condition;
//! - report: `Catalog.status.servedFrom` names the location a catalog image was read from
//!   ([`served_from`]).
//!
//! The watches run in the leader, the only replica that pulls: [`ImageMirrors::start`] is
//! called when the controllers start, and by the first pull of any other user of a
//! [`crate::Context`] (tests). They stop when the context is dropped.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, Resource, ResourceExt as _};
use pom_api::openshift::image_mirrors::{
    ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet,
};
use pom_oci::OciError;
use pom_oci::mirrors::{MirrorRules, MirrorRulesError, MirrorSetKind, ObjectRef, PullSource};
use tokio::sync::watch;
use tokio_util::sync::{CancellationToken, DropGuard};

use crate::events::{Event, EventPublisher, EventType, Reporter};

/// How long a pull waits for the first reading of the mirror configuration (the three lists
/// take milliseconds; this covers an API server slow at start-up) before it fails, retried by
/// its controller's backoff.
pub const FIRST_READ_WAIT: Duration = Duration::from_secs(10);

/// Most objects of one kind POM keeps. They are cluster input held in memory; the rules they
/// hold are bounded by [`pom_oci::mirrors::MAX_MIRROR_RULES`] together, and an object holds at
/// least one rule in any sensible configuration, so a kind with more objects is refused.
pub const MAX_MIRROR_OBJECTS: usize = pom_oci::mirrors::MAX_MIRROR_RULES;

/// Longest `status.servedFrom` written (the CRD's `maxLength`): a location and the objects
/// listing it; the objects are cluster input, so their list is cut.
pub const MAX_SERVED_FROM_CHARS: usize = 1024;

/// Longest note [`PullMirrors::explain`] adds to a pull failure.
const MAX_NOTE_CHARS: usize = 512;

/// Longest Event note (the API's limit is 1 kB).
const MAX_EVENT_NOTE_BYTES: usize = 1000;

/// Why the cluster's current mirror configuration is not the one in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A kind's first list has not answered yet (only at start-up).
    #[error("the cluster's {kind}s have not been read yet")]
    NotReadYet { kind: &'static str },
    /// A kind's first list failed with something other than "not served".
    #[error(
        "listing the cluster's {kind}s failed: {detail}; the manager's ClusterRole must grant \
         get, list and watch on them (re-apply the shipped manifests)"
    )]
    ReadFailed { kind: &'static str, detail: String },
    /// More objects of a kind than [`MAX_MIRROR_OBJECTS`].
    #[error(
        "the cluster holds more than {limit} {kind}s, above POM's limit (MAX_MIRROR_OBJECTS); \
         merge them"
    )]
    TooManyObjects { kind: &'static str, limit: usize },
    /// The machine-config operator would refuse the configuration too.
    #[error(transparent)]
    Refused(MirrorRulesError),
}

impl Problem {
    /// Whether the configuration was read and refused (reported as a Warning), as opposed to
    /// not read (yet).
    fn is_refusal(&self) -> bool {
        matches!(self, Self::TooManyObjects { .. } | Self::Refused(_))
    }

    /// The objects the problem names, for Events about them.
    fn blamed(&self) -> Vec<ObjectRef> {
        match self {
            Self::Refused(
                MirrorRulesError::TooManyMirrors { object, .. }
                | MirrorRulesError::InvalidSource { object, .. }
                | MirrorRulesError::InvalidMirror { object, .. }
                | MirrorRulesError::SourceAmongMirrors { object, .. },
            ) => vec![object.clone()],
            Self::Refused(MirrorRulesError::ConflictingPolicy { first, second, .. }) => {
                vec![first.clone(), second.clone()]
            }
            Self::Refused(
                MirrorRulesError::TooManyRules { .. }
                | MirrorRulesError::TooManyMergedMirrors { .. },
            )
            | Self::NotReadYet { .. }
            | Self::ReadFailed { .. }
            | Self::TooManyObjects { .. } => Vec::new(),
        }
    }
}

/// The mirror configuration in force, and why the cluster's current one is not, if it is not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Snapshot {
    /// The rules pulls go through: from the last configuration read whole and valid; `None`
    /// until one was.
    pub rules: Option<Arc<MirrorRules>>,
    /// Why the current configuration is not `rules`; `None` when it is.
    pub problem: Option<Problem>,
}

impl Snapshot {
    /// Before anything was read.
    #[must_use]
    pub fn initial() -> Self {
        Self {
            rules: None,
            problem: Some(Problem::NotReadYet {
                kind: MirrorSetKind::ImageDigestMirrorSet.as_str(),
            }),
        }
    }

    /// Whether a pull can be decided: rules are in force, or reading them failed (waiting
    /// longer would not help).
    fn settled(&self) -> bool {
        self.rules.is_some() || !matches!(self.problem, Some(Problem::NotReadYet { .. }) | None)
    }

    /// The mirrors a pull of `reference` goes through.
    ///
    /// # Errors
    /// When no configuration was ever read and valid: POM does not pull without one, since a
    /// pull could contact a registry the cluster forbids.
    pub fn for_pull(&self, reference: &str) -> Result<PullMirrors, OciError> {
        match &self.rules {
            Some(rules) => Ok(PullMirrors {
                rules: rules.clone(),
                refused: self
                    .problem
                    .as_ref()
                    .filter(|p| p.is_refusal())
                    .map(ToString::to_string),
            }),
            None => Err(OciError::Registry {
                reference: reference.to_owned(),
                detail: format!(
                    "POM has no usable image mirror configuration yet ({}), and does not pull \
                     without one: the pull could contact a registry the cluster's \
                     ImageDigestMirrorSets, ImageTagMirrorSets or ImageContentSourcePolicies \
                     forbid",
                    self.problem
                        .as_ref()
                        .map_or_else(|| "none read".to_owned(), ToString::to_string)
                ),
            }),
        }
    }
}

/// The mirror rules one pull goes through, and what to add to its failure.
#[derive(Debug, Clone)]
pub struct PullMirrors {
    rules: Arc<MirrorRules>,
    /// The refusal of the cluster's current configuration, when the rules are older.
    refused: Option<String>,
}

impl PullMirrors {
    /// Fixed rules (a configuration read once, as `pomctl` does; tests).
    #[must_use]
    pub fn fixed(rules: MirrorRules) -> Self {
        Self {
            rules: Arc::new(rules),
            refused: None,
        }
    }

    /// The rules to pass to the puller.
    #[must_use]
    pub fn rules(&self) -> &MirrorRules {
        &self.rules
    }

    /// `err`, the failure of a pull of `reference` through these rules, with what the mirror
    /// configuration did to it: which objects kept the source from being contacted, and that
    /// the cluster's current configuration is refused (so older rules were used).
    #[must_use]
    pub fn explain(&self, reference: &str, mut err: OciError) -> OciError {
        let mut notes = Vec::new();
        if let Ok(plan) = self.rules.plan(reference)
            && let Some(matched) = &plan.matched
            // An empty list already fails with the objects' names (the puller's message).
            && !plan.sources.is_empty()
            && !matched.never_contact_source.is_empty()
        {
            notes.push(format!(
                "{} set mirrorSourcePolicy NeverContactSource for source {}, so only its \
                 mirrors were tried, never the source",
                join(&matched.never_contact_source),
                matched.scope
            ));
        }
        if let Some(refused) = &self.refused {
            notes.push(format!(
                "the cluster's current image mirror configuration is refused ({refused}); POM \
                 pulls through the last one it could use"
            ));
        }
        if notes.is_empty() {
            return err;
        }
        let note = format!("; {}", cut(&notes.join("; "), MAX_NOTE_CHARS));
        match &mut err {
            OciError::Unreachable { detail, .. }
            | OciError::NotFound { detail, .. }
            | OciError::Unauthorized { detail, .. }
            | OciError::UntrustedCertificate { detail, .. }
            | OciError::Registry { detail, .. } => detail.push_str(&note),
            // Faults of the content or of the manager itself, wherever it came from.
            _ => {}
        }
        err
    }
}

/// `status.servedFrom` for content read from `location`.
#[must_use]
pub fn served_from(location: &PullSource) -> String {
    cut(&location.to_string(), MAX_SERVED_FROM_CHARS)
}

/// `text` cut to `max` characters, marked when cut.
fn cut(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_owned();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

fn join(objects: &[ObjectRef]) -> String {
    objects
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// What is known of one kind.
#[derive(Debug, Clone, PartialEq, Eq)]
enum ReadState {
    /// Nothing yet.
    Pending,
    /// The first list failed (not with "not served"); the watch retries.
    Failed(String),
    /// The API server does not serve the kind: no rules of it. The watch retries, so a CRD
    /// installed later is listed.
    NotServed,
    /// Listed; later watch errors leave the last list in force (the watch resumes or
    /// relists).
    Listed,
}

/// A watch failure, as [`KindView`] tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WatchFailure {
    /// 404: the kind is not served (its CRD is not installed, or was deleted with its objects).
    NotServed,
    /// Anything else (permissions, the API server), with its message.
    Other(String),
}

impl WatchFailure {
    fn of(err: &watcher::Error) -> Self {
        let not_found = match err {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status))
            | watcher::Error::WatchError(status) => status.code == 404,
            _ => false,
        };
        if not_found {
            Self::NotServed
        } else {
            Self::Other(err.to_string())
        }
    }
}

/// The objects of one kind, from its watch's events (pure; see [`Self::observe`]).
#[derive(Debug, Clone)]
struct KindView<K> {
    read: ReadState,
    objects: BTreeMap<String, K>,
    /// A list in progress (between `Init` and `InitDone`), and whether it overflowed.
    relist: Option<(BTreeMap<String, K>, bool)>,
    /// More objects than [`MAX_MIRROR_OBJECTS`] were seen since the last list.
    overflow: bool,
}

impl<K> Default for KindView<K> {
    fn default() -> Self {
        Self {
            read: ReadState::Pending,
            objects: BTreeMap::new(),
            relist: None,
            overflow: false,
        }
    }
}

impl<K: Resource + Clone> KindView<K> {
    /// Takes in one watch event or failure; whether what the view says changed.
    fn observe(&mut self, event: Result<watcher::Event<K>, WatchFailure>) -> bool {
        match event {
            Ok(watcher::Event::Init) => {
                self.relist = Some((BTreeMap::new(), false));
                false
            }
            Ok(watcher::Event::InitApply(object)) => {
                let (objects, overflow) =
                    self.relist.get_or_insert_with(|| (BTreeMap::new(), false));
                *overflow |= !insert_bounded(objects, object);
                false
            }
            Ok(watcher::Event::InitDone) => {
                let (objects, overflow) = self.relist.take().unwrap_or_default();
                self.objects = objects;
                self.overflow = overflow;
                self.read = ReadState::Listed;
                true
            }
            Ok(watcher::Event::Apply(object)) => {
                self.overflow |= !insert_bounded(&mut self.objects, object);
                true
            }
            Ok(watcher::Event::Delete(object)) => {
                self.objects.remove(&object.name_any());
                true
            }
            Err(WatchFailure::NotServed) => {
                let changed = self.read != ReadState::NotServed || !self.objects.is_empty();
                self.read = ReadState::NotServed;
                self.objects.clear();
                self.relist = None;
                self.overflow = false;
                changed
            }
            Err(WatchFailure::Other(detail)) => {
                self.relist = None;
                match self.read {
                    ReadState::Pending | ReadState::Failed(_) => {
                        let failed = ReadState::Failed(detail);
                        let changed = self.read != failed;
                        self.read = failed;
                        changed
                    }
                    // The last list stays in force while the watch recovers.
                    ReadState::NotServed | ReadState::Listed => false,
                }
            }
        }
    }

    /// The objects the configuration is built from, or why they cannot be used.
    fn objects(&self, kind: MirrorSetKind) -> Result<Vec<K>, Problem> {
        let kind = kind.as_str();
        match &self.read {
            ReadState::Pending => Err(Problem::NotReadYet { kind }),
            ReadState::Failed(detail) => Err(Problem::ReadFailed {
                kind,
                detail: detail.clone(),
            }),
            ReadState::NotServed => Ok(Vec::new()),
            ReadState::Listed if self.overflow => Err(Problem::TooManyObjects {
                kind,
                limit: MAX_MIRROR_OBJECTS,
            }),
            ReadState::Listed => Ok(self.objects.values().cloned().collect()),
        }
    }

    fn uid(&self, name: &str) -> Option<String> {
        self.objects.get(name).and_then(|o| o.meta().uid.clone())
    }
}

/// Inserts `object` by name unless that would hold more than [`MAX_MIRROR_OBJECTS`]; whether
/// it is held.
fn insert_bounded<K: Resource>(objects: &mut BTreeMap<String, K>, object: K) -> bool {
    let name = object.name_any();
    if objects.len() >= MAX_MIRROR_OBJECTS && !objects.contains_key(&name) {
        return false;
    }
    objects.insert(name, object);
    true
}

/// One event of one of the three watches.
enum Change {
    Digest(Result<watcher::Event<ImageDigestMirrorSet>, WatchFailure>),
    Tag(Result<watcher::Event<ImageTagMirrorSet>, WatchFailure>),
    Policy(Result<watcher::Event<ImageContentSourcePolicy>, WatchFailure>),
}

/// What is known of the three kinds.
#[derive(Debug, Clone, Default)]
struct Views {
    digest: KindView<ImageDigestMirrorSet>,
    tag: KindView<ImageTagMirrorSet>,
    policy: KindView<ImageContentSourcePolicy>,
}

/// The three kinds' objects.
type Objects = (
    Vec<ImageDigestMirrorSet>,
    Vec<ImageTagMirrorSet>,
    Vec<ImageContentSourcePolicy>,
);

impl Views {
    fn observe(&mut self, change: Change) -> bool {
        match change {
            Change::Digest(event) => self.digest.observe(event),
            Change::Tag(event) => self.tag.observe(event),
            Change::Policy(event) => self.policy.observe(event),
        }
    }

    /// The three kinds' objects, or the first reason they cannot be used (a failure before
    /// a kind merely not read yet: it is what the admin must fix).
    fn gather(&self) -> Result<Objects, Problem> {
        let digest = self.digest.objects(MirrorSetKind::ImageDigestMirrorSet);
        let tag = self.tag.objects(MirrorSetKind::ImageTagMirrorSet);
        let policy = self.policy.objects(MirrorSetKind::ImageContentSourcePolicy);
        let problems = [
            digest.as_ref().err(),
            tag.as_ref().err(),
            policy.as_ref().err(),
        ];
        if let Some(definite) = problems
            .into_iter()
            .flatten()
            .find(|p| !matches!(p, Problem::NotReadYet { .. }))
        {
            return Err(definite.clone());
        }
        Ok((digest?, tag?, policy?))
    }

    fn reference(&self, object: &ObjectRef) -> ObjectReference {
        let (api_version, uid) = match object.kind {
            MirrorSetKind::ImageDigestMirrorSet => (
                ImageDigestMirrorSet::api_version(&()),
                self.digest.uid(&object.name),
            ),
            MirrorSetKind::ImageTagMirrorSet => (
                ImageTagMirrorSet::api_version(&()),
                self.tag.uid(&object.name),
            ),
            MirrorSetKind::ImageContentSourcePolicy => (
                ImageContentSourcePolicy::api_version(&()),
                self.policy.uid(&object.name),
            ),
        };
        ObjectReference {
            api_version: Some(api_version.into_owned()),
            kind: Some(object.kind.as_str().to_owned()),
            name: Some(object.name.clone()),
            uid,
            ..ObjectReference::default()
        }
    }
}

/// The snapshot after reading `gathered` (the three kinds' objects, or why they cannot be
/// used): rules built from them when they are valid, else the last good rules kept with the
/// reason.
fn decide(previous: &Snapshot, gathered: Result<Objects, Problem>) -> Snapshot {
    let built = gathered.and_then(|(digest, tag, policy)| {
        MirrorRules::from_cluster(&digest, &tag, &policy).map_err(Problem::Refused)
    });
    match built {
        Ok(rules) => {
            // Unchanged rules keep their allocation (and compare equal cheaply downstream).
            let rules = match &previous.rules {
                Some(kept) if **kept == rules => kept.clone(),
                _ => Arc::new(rules),
            };
            Snapshot {
                rules: Some(rules),
                problem: None,
            }
        }
        Err(problem) => Snapshot {
            rules: previous.rules.clone(),
            problem: Some(problem),
        },
    }
}

/// What to tell the admin about a change of snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Report {
    /// A configuration was read and refused: warn and publish Events on what it names.
    Refused { problem: Problem, keeping: bool },
    /// A kind cannot be read: warn.
    Unreadable(Problem),
    /// The cluster's configuration is in force again after a refusal or a read failure.
    Recovered,
    /// New rules are in force.
    InForce { empty: bool },
}

/// The reports for the change from `previous` to `next` (pure).
fn reports(previous: &Snapshot, next: &Snapshot) -> Vec<Report> {
    let mut out = Vec::new();
    if next.problem != previous.problem {
        match &next.problem {
            Some(problem) if problem.is_refusal() => out.push(Report::Refused {
                problem: problem.clone(),
                keeping: next.rules.is_some(),
            }),
            Some(problem @ Problem::ReadFailed { .. }) => {
                out.push(Report::Unreadable(problem.clone()));
            }
            Some(_) => {}
            None if previous
                .problem
                .as_ref()
                .is_some_and(|p| !matches!(p, Problem::NotReadYet { .. })) =>
            {
                out.push(Report::Recovered);
            }
            None => {}
        }
    }
    if let Some(rules) = &next.rules
        && previous.rules.as_ref() != Some(rules)
    {
        out.push(Report::InForce {
            empty: rules.is_empty(),
        });
    }
    out
}

/// The manager's view of the cluster's image mirror configuration: a watch of the three kinds
/// (started once, stopped when this is dropped) and the [`Snapshot`] it keeps.
pub struct ImageMirrors {
    client: Client,
    reporter: Reporter,
    snapshot: watch::Sender<Arc<Snapshot>>,
    started: OnceLock<DropGuard>,
}

impl fmt::Debug for ImageMirrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ImageMirrors")
            .field("snapshot", &self.snapshot.borrow())
            .field("started", &self.started.get().is_some())
            .finish_non_exhaustive()
    }
}

impl ImageMirrors {
    /// Not started: [`Self::start`] (or the first pull) starts the watches.
    #[must_use]
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            snapshot: watch::Sender::new(Arc::new(Snapshot::initial())),
            started: OnceLock::new(),
        }
    }

    /// Starts watching the three kinds, once; a no-op afterwards. Needs a Tokio runtime.
    pub fn start(&self) {
        self.started.get_or_init(|| {
            let stop = CancellationToken::new();
            tokio::spawn(keep_watching(
                self.client.clone(),
                self.reporter.clone(),
                self.snapshot.clone(),
                stop.clone(),
            ));
            stop.drop_guard()
        });
    }

    /// The configuration in force now.
    #[must_use]
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.borrow().clone()
    }

    /// The mirrors a pull of `reference` goes through, once the configuration has been read
    /// (waiting up to [`FIRST_READ_WAIT`] for the first reading).
    ///
    /// # Errors
    /// As [`Snapshot::for_pull`].
    pub async fn for_pull(&self, reference: &str) -> Result<PullMirrors, OciError> {
        self.start();
        let mut receiver = self.snapshot.subscribe();
        // On timeout the snapshot as it is answers (and says what is missing).
        let _ = tokio::time::timeout(FIRST_READ_WAIT, receiver.wait_for(|s| s.settled())).await;
        let snapshot = receiver.borrow().clone();
        snapshot.for_pull(reference)
    }
}

/// A watch of every object of `K`, with kube's backoff between failures (so a kind not served
/// is asked for again, at most 30 s apart), keeping only what the rules are built from.
fn watch_kind<K>(client: &Client) -> impl Stream<Item = Result<watcher::Event<K>, WatchFailure>>
where
    K: Resource<DynamicType = ()> + Clone + fmt::Debug + serde::de::DeserializeOwned,
    K: Send + 'static,
{
    watcher(Api::<K>::all(client.clone()), watcher::Config::default())
        .default_backoff()
        .modify(|object: &mut K| {
            let meta = object.meta_mut();
            meta.managed_fields = None;
            meta.annotations = None;
            meta.labels = None;
        })
        .map(|event| event.map_err(|err| WatchFailure::of(&err)))
}

/// The watch task: applies each event, publishes each new snapshot, reports what changed.
async fn keep_watching(
    client: Client,
    reporter: Reporter,
    snapshot: watch::Sender<Arc<Snapshot>>,
    stop: CancellationToken,
) {
    let events = EventPublisher::new(client.clone(), reporter);
    let changes = futures::stream::select(
        futures::stream::select(
            watch_kind::<ImageDigestMirrorSet>(&client).map(Change::Digest),
            watch_kind::<ImageTagMirrorSet>(&client).map(Change::Tag),
        ),
        watch_kind::<ImageContentSourcePolicy>(&client).map(Change::Policy),
    );
    let mut changes = std::pin::pin!(changes);
    let mut views = Views::default();
    loop {
        let change = tokio::select! {
            () = stop.cancelled() => return,
            change = changes.next() => change,
        };
        let Some(change) = change else {
            tracing::error!(
                "the image mirror watches ended: the mirror configuration is no longer updated"
            );
            return;
        };
        if let Change::Digest(Err(WatchFailure::Other(err)))
        | Change::Tag(Err(WatchFailure::Other(err)))
        | Change::Policy(Err(WatchFailure::Other(err))) = &change
        {
            tracing::debug!(error = %err, "image mirror watch");
        }
        if !views.observe(change) {
            continue;
        }
        let previous = snapshot.borrow().clone();
        let next = decide(&previous, views.gather());
        let reports = reports(&previous, &next);
        if next != *previous {
            snapshot.send_replace(Arc::new(next));
        }
        for report in reports {
            act(report, &views, &events).await;
        }
    }
}

/// Logs a report, and publishes a refusal as a Warning Event on the objects it names.
async fn act(report: Report, views: &Views, events: &EventPublisher) {
    match report {
        Report::Refused { problem, keeping } => {
            tracing::warn!(
                error = %problem,
                keeping_last_good = keeping,
                "the cluster's image mirror configuration is refused; pulls go through the last \
                 one that was valid (none: pulls fail until it is fixed)"
            );
            let note = format!(
                "{problem}; POM {}",
                if keeping {
                    "keeps pulling through the last valid mirror configuration"
                } else {
                    "has no valid mirror configuration and pulls nothing until this is fixed"
                }
            );
            let event = Event {
                type_: EventType::Warning,
                reason: "ImageMirrorsRefused".to_owned(),
                note: Some(cut_bytes(&note, MAX_EVENT_NOTE_BYTES)),
                action: "ReadImageMirrors".to_owned(),
                secondary: None,
            };
            for object in problem.blamed() {
                if let Err(err) = events.publish(&event, &views.reference(&object)).await {
                    tracing::warn!(object = %object, error = %err, "publishing an event");
                }
            }
        }
        Report::Unreadable(problem) => {
            tracing::warn!(error = %problem, "the cluster's image mirror configuration cannot be read");
        }
        Report::Recovered => {
            tracing::info!("the cluster's image mirror configuration is in force again");
        }
        Report::InForce { empty } => {
            tracing::info!(
                mirrors = !empty,
                "image mirror configuration in force for the manager's pulls"
            );
        }
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use kube::ResourceExt;
    use pom_oci::mirrors::SourceRole;
    use serde_json::json;

    fn idms(name: &str, rules: serde_json::Value) -> ImageDigestMirrorSet {
        serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
            "metadata": {"name": name, "uid": format!("uid-{name}")},
            "spec": {"imageDigestMirrors": rules}
        }))
        .unwrap()
    }

    fn valid(name: &str) -> ImageDigestMirrorSet {
        idms(
            name,
            json!([{"source": "quay.io/ns", "mirrors": ["mirror.local/ns"],
                    "mirrorSourcePolicy": "NeverContactSource"}]),
        )
    }

    fn invalid(name: &str) -> ImageDigestMirrorSet {
        idms(
            name,
            json!([{"source": "quay.io/other", "mirrors": ["not a mirror"]}]),
        )
    }

    /// Every kind listed with no object, then `digest` listed.
    fn listed(digest: Vec<ImageDigestMirrorSet>) -> Views {
        let mut views = Views::default();
        for object in std::iter::once(watcher::Event::Init)
            .chain(digest.into_iter().map(watcher::Event::InitApply))
            .chain(std::iter::once(watcher::Event::InitDone))
        {
            views.observe(Change::Digest(Ok(object)));
        }
        views.observe(Change::Tag(Ok(watcher::Event::InitDone)));
        views.observe(Change::Policy(Err(WatchFailure::NotServed)));
        views
    }

    fn rules_of(snapshot: &Snapshot) -> MirrorRules {
        (**snapshot.rules.as_ref().expect("rules in force")).clone()
    }

    fn expected(digest: &[ImageDigestMirrorSet]) -> MirrorRules {
        MirrorRules::from_cluster(digest, &[], &[]).unwrap()
    }

    #[test]
    fn a_kind_is_known_once_listed_or_not_served() {
        struct Case {
            name: &'static str,
            events: Vec<Result<watcher::Event<ImageDigestMirrorSet>, WatchFailure>>,
            objects: Result<Vec<&'static str>, &'static str>,
        }
        let cases = [
            Case {
                name: "nothing yet",
                events: vec![],
                objects: Err("have not been read yet"),
            },
            Case {
                name: "a list in progress is not the list",
                events: vec![
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(valid("a"))),
                ],
                objects: Err("have not been read yet"),
            },
            Case {
                name: "listed",
                events: vec![
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(valid("a"))),
                    Ok(watcher::Event::InitDone),
                    Ok(watcher::Event::Apply(valid("b"))),
                ],
                objects: Ok(vec!["a", "b"]),
            },
            Case {
                name: "no CRD: no rules of this kind, as on plain Kubernetes",
                events: vec![Err(WatchFailure::NotServed)],
                objects: Ok(vec![]),
            },
            Case {
                name: "a CRD installed later is listed",
                events: vec![
                    Err(WatchFailure::NotServed),
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(valid("late"))),
                    Ok(watcher::Event::InitDone),
                ],
                objects: Ok(vec!["late"]),
            },
            Case {
                name: "a CRD deleted takes its objects with it",
                events: vec![
                    Ok(watcher::Event::InitApply(valid("a"))),
                    Ok(watcher::Event::InitDone),
                    Err(WatchFailure::NotServed),
                ],
                objects: Ok(vec![]),
            },
            Case {
                name: "a first list refused is a failure, not an empty list",
                events: vec![Err(WatchFailure::Other("forbidden".into()))],
                objects: Err("forbidden"),
            },
            Case {
                name: "a watch failure after a list keeps the list",
                events: vec![
                    Ok(watcher::Event::InitApply(valid("a"))),
                    Ok(watcher::Event::InitDone),
                    Err(WatchFailure::Other("connection reset".into())),
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(valid("b"))),
                ],
                objects: Ok(vec!["a"]),
            },
            Case {
                name: "a relist replaces the objects (one deleted while the watch was down)",
                events: vec![
                    Ok(watcher::Event::InitApply(valid("a"))),
                    Ok(watcher::Event::InitDone),
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(valid("b"))),
                    Ok(watcher::Event::InitDone),
                ],
                objects: Ok(vec!["b"]),
            },
            Case {
                name: "a deletion",
                events: vec![
                    Ok(watcher::Event::InitApply(valid("a"))),
                    Ok(watcher::Event::InitApply(valid("b"))),
                    Ok(watcher::Event::InitDone),
                    Ok(watcher::Event::Delete(valid("a"))),
                ],
                objects: Ok(vec!["b"]),
            },
        ];
        for case in cases {
            let mut view = KindView::default();
            for event in case.events {
                view.observe(event);
            }
            let got = view
                .objects(MirrorSetKind::ImageDigestMirrorSet)
                .map(|objects| {
                    objects
                        .iter()
                        .map(ResourceExt::name_any)
                        .collect::<Vec<_>>()
                })
                .map_err(|problem| problem.to_string());
            match (&got, &case.objects) {
                (Ok(names), Ok(want)) => assert_eq!(names, want, "{}", case.name),
                (Err(message), Err(want)) => {
                    assert!(message.contains(want), "{}: {message}", case.name);
                }
                _ => panic!("{}: got {got:?}, want {:?}", case.name, case.objects),
            }
        }
    }

    #[test]
    fn a_kind_with_more_objects_than_the_limit_is_refused() {
        let mut view = KindView::default();
        view.observe(Ok(watcher::Event::Init));
        for n in 0..MAX_MIRROR_OBJECTS {
            view.observe(Ok(watcher::Event::InitApply(idms(
                &format!("o{n}"),
                json!([]),
            ))));
        }
        view.observe(Ok(watcher::Event::InitDone));
        assert_eq!(
            view.objects(MirrorSetKind::ImageDigestMirrorSet)
                .unwrap()
                .len(),
            MAX_MIRROR_OBJECTS
        );
        // Updating a held object is fine; one more is not.
        view.observe(Ok(watcher::Event::Apply(idms("o0", json!([])))));
        assert!(view.objects(MirrorSetKind::ImageDigestMirrorSet).is_ok());
        view.observe(Ok(watcher::Event::Apply(idms("one-more", json!([])))));
        assert_eq!(
            view.objects(MirrorSetKind::ImageDigestMirrorSet),
            Err(Problem::TooManyObjects {
                kind: "ImageDigestMirrorSet",
                limit: MAX_MIRROR_OBJECTS
            })
        );
        assert_eq!(
            view.objects.len(),
            MAX_MIRROR_OBJECTS,
            "memory stays bounded"
        );
    }

    #[test]
    fn rules_follow_the_configuration_and_a_refused_one_keeps_the_last_good() {
        // Read and valid: in force.
        let first = decide(&Snapshot::initial(), listed(vec![valid("a")]).gather());
        assert_eq!(rules_of(&first), expected(&[valid("a")]));
        assert_eq!(first.problem, None);

        // An invalid object joins: the last good rules stay, with the refusal.
        let refused = decide(&first, listed(vec![valid("a"), invalid("b")]).gather());
        assert_eq!(rules_of(&refused), expected(&[valid("a")]));
        let problem = refused.problem.clone().unwrap();
        assert!(matches!(problem, Problem::Refused(_)), "{problem:?}");
        assert!(
            problem.to_string().contains("ImageDigestMirrorSet/b"),
            "{problem}"
        );

        // Still refused after another change: still the last good rules, not the refused
        // configuration's nor none.
        let still = decide(&refused, listed(vec![invalid("b")]).gather());
        assert_eq!(rules_of(&still), expected(&[valid("a")]));

        // Fixed: the new configuration is in force.
        let fixed = decide(&still, listed(vec![]).gather());
        assert_eq!(rules_of(&fixed), MirrorRules::default());
        assert_eq!(fixed.problem, None);
    }

    #[test]
    fn without_a_valid_configuration_ever_there_are_no_rules_and_pulls_fail() {
        let refused = decide(&Snapshot::initial(), listed(vec![invalid("b")]).gather());
        assert_eq!(refused.rules, None);
        assert!(refused.settled());
        let err = refused.for_pull("quay.io/ns/c@sha256:1").unwrap_err();
        let message = err.to_string();
        assert!(message.contains("ImageDigestMirrorSet/b"), "{message}");
        assert!(message.contains("does not pull without one"), "{message}");

        // Not read yet: a pull waits (not settled), then fails naming what is missing.
        let mut views = Views::default();
        views.observe(Change::Digest(Ok(watcher::Event::InitDone)));
        let pending = decide(&Snapshot::initial(), views.gather());
        assert!(!pending.settled());
        assert!(
            pending
                .for_pull("quay.io/ns/c:v1")
                .unwrap_err()
                .to_string()
                .contains("ImageTagMirrorSets have not been read yet")
        );

        // A kind that cannot be read is a definite answer: no wait.
        views.observe(Change::Tag(Err(WatchFailure::Other("forbidden".into()))));
        let unreadable = decide(&Snapshot::initial(), views.gather());
        assert!(unreadable.settled());
        assert!(matches!(
            unreadable.problem,
            Some(Problem::ReadFailed {
                kind: "ImageTagMirrorSet",
                ..
            })
        ));
    }

    #[test]
    fn no_crds_at_all_means_no_rules() {
        let mut views = Views::default();
        views.observe(Change::Digest(Err(WatchFailure::NotServed)));
        views.observe(Change::Tag(Err(WatchFailure::NotServed)));
        views.observe(Change::Policy(Err(WatchFailure::NotServed)));
        let snapshot = decide(&Snapshot::initial(), views.gather());
        assert_eq!(rules_of(&snapshot), MirrorRules::default());
        let mirrors = snapshot.for_pull("quay.io/ns/c:v1").unwrap();
        assert!(mirrors.rules().is_empty());
    }

    #[test]
    fn reports_name_each_transition_once() {
        let initial = Snapshot::initial();
        let good = decide(&initial, listed(vec![valid("a")]).gather());
        let refused = decide(&good, listed(vec![valid("a"), invalid("b")]).gather());
        let recovered = decide(&refused, listed(vec![valid("a")]).gather());

        assert_eq!(reports(&initial, &good), [Report::InForce { empty: false }]);
        let refusal: [Report; 1] = reports(&good, &refused).try_into().unwrap();
        let [Report::Refused { problem, keeping }] = refusal else {
            panic!("one refusal expected: {refusal:?}")
        };
        assert!(keeping);
        assert_eq!(
            problem.blamed(),
            [ObjectRef {
                kind: MirrorSetKind::ImageDigestMirrorSet,
                name: "b".into()
            }]
        );
        // The same refusal again: nothing new to say.
        assert_eq!(reports(&refused, &refused.clone()), []);
        // Back to the same rules: recovered, nothing else changed.
        assert_eq!(reports(&refused, &recovered), [Report::Recovered]);
        assert_eq!(reports(&good, &recovered), []);
    }

    #[test]
    fn events_name_the_refused_object_with_its_uid() {
        let views = listed(vec![valid("a")]);
        let reference = views.reference(&ObjectRef {
            kind: MirrorSetKind::ImageDigestMirrorSet,
            name: "a".into(),
        });
        assert_eq!(
            reference.api_version.as_deref(),
            Some("config.openshift.io/v1")
        );
        assert_eq!(reference.kind.as_deref(), Some("ImageDigestMirrorSet"));
        assert_eq!(reference.uid.as_deref(), Some("uid-a"));
        assert_eq!(reference.namespace, None);
    }

    /// `name@sha256:<64 hex>`: a reference the mirror rules can plan.
    fn by_digest(name: &str) -> String {
        format!("{name}@sha256:{}", "a".repeat(64))
    }

    fn not_found(reference: &str) -> OciError {
        OciError::NotFound {
            reference: reference.to_owned(),
            detail: "manifest unknown".to_owned(),
        }
    }

    #[test]
    fn a_failure_says_which_objects_kept_the_source_out() {
        let snapshot = decide(&Snapshot::initial(), listed(vec![valid("a")]).gather());
        let mirrors = snapshot.for_pull(&by_digest("quay.io/ns/c")).unwrap();
        let explained = mirrors
            .explain(
                &by_digest("quay.io/ns/c"),
                not_found(&by_digest("mirror.local/ns/c")),
            )
            .to_string();
        assert!(
            explained.contains(
                "ImageDigestMirrorSet/a set mirrorSourcePolicy NeverContactSource for source \
                 quay.io/ns"
            ),
            "{explained}"
        );
        // A reference no rule matches, or a fault of the content: unchanged.
        let other = mirrors.explain(&by_digest("docker.io/x/y"), not_found("docker.io/x/y"));
        assert_eq!(other.to_string(), not_found("docker.io/x/y").to_string());
        let layer = OciError::TooLarge {
            reference: "r".into(),
            what: "layer".into(),
            size: 2,
            limit: 1,
        };
        let text = layer.to_string();
        assert_eq!(
            mirrors
                .explain(&by_digest("quay.io/ns/c"), layer)
                .to_string(),
            text
        );
    }

    #[test]
    fn a_failure_while_the_configuration_is_refused_says_so() {
        let good = decide(&Snapshot::initial(), listed(vec![]).gather());
        let refused = decide(&good, listed(vec![invalid("b")]).gather());
        let explained = refused
            .for_pull("quay.io/x/c:v1")
            .unwrap()
            .explain("quay.io/x/c:v1", not_found("quay.io/x/c:v1"))
            .to_string();
        assert!(
            explained.contains("current image mirror configuration is refused"),
            "{explained}"
        );
        assert!(explained.contains("ImageDigestMirrorSet/b"), "{explained}");
    }

    #[test]
    fn served_from_names_the_mirror_and_its_objects_within_the_limit() {
        let location = PullSource {
            reference: "mirror.local/ns/c@sha256:1".into(),
            role: SourceRole::Mirror {
                scope: "quay.io/ns".into(),
                listed_by: vec![ObjectRef {
                    kind: MirrorSetKind::ImageDigestMirrorSet,
                    name: "x".into(),
                }],
            },
        };
        assert_eq!(
            served_from(&location),
            "mirror.local/ns/c@sha256:1 (mirror of quay.io/ns from ImageDigestMirrorSet/x)"
        );
        let many = PullSource {
            role: SourceRole::Mirror {
                scope: "quay.io/ns".into(),
                listed_by: (0..200)
                    .map(|n| ObjectRef {
                        kind: MirrorSetKind::ImageDigestMirrorSet,
                        name: format!("mirror-set-{n}"),
                    })
                    .collect(),
            },
            ..location
        };
        let text = served_from(&many);
        assert_eq!(text.chars().count(), MAX_SERVED_FROM_CHARS);
        assert!(text.ends_with('…'), "{text}");
    }

    #[test]
    fn event_notes_are_cut_on_a_character_boundary() {
        assert_eq!(cut_bytes("short", 10), "short");
        let cut = cut_bytes(&"é".repeat(600), MAX_EVENT_NOTE_BYTES);
        assert!(
            cut.len() <= MAX_EVENT_NOTE_BYTES && cut.ends_with('…'),
            "{cut}"
        );
    }
}
