//! The chaos suite's parts (issue 13 item 9): a seeded random source, the invariant monitor
//! that watches every PlatformOperator version while faults are injected, and the checker that
//! runs once everything converged. The driver and the workload are in `tests/chaos.rs`.
//!
//! The monitor keeps its own record of the world ([`rollouts`], issue 34 item 11): every
//! version of every owned Deployment, by etcd revision, rolled out and available or not, as the
//! Deployment controller wrote it. "Settled" is judged from that record, never from POM's
//! status:
//! - every settle the status announces comes after the world saw the bundle's Deployment
//!   rolled out and available;
//! - an owned Deployment or PriorityClass is deleted only by cleanup (the PO is being deleted,
//!   by its metadata) or by a prune after the next bundle rolled out by the world;
//! - the aggregated ClusterOperator never says `Upgradeable=True` at a revision where some PO
//!   not being deleted has a move in flight, by the world (its Deployment runs a bundle never
//!   seen rolled out) or by its last status (an unsettled move recorded);
//! - what a gap of a watch may hide is counted unjudged, and more than [`GapBound`] allows
//!   fails the run.
//!
//! It also judges each PlatformOperator version against the package's channel (a straight
//! `replaces` chain the test built):
//! - `Upgradeable=True` never while the recorded move (`status.activeHop`) is unsettled;
//! - a hop's `to` is the direct successor of its `from` in the chain (no hop skipped, never
//!   backwards);
//! - the installed bundle never goes backwards;
//! - the move is in the inventory (recorded before the first write) and the inventory names
//!   no bundle but the move's `from` and `to`.
//!
//! The checker, after convergence: every live PO runs the chain's head with exactly one
//! inventory entry (that bundle), every listed object exists with the PO's owner and bundle
//! labels, no object with the PO's owner label is outside the inventory; a deleted PO left
//! only CRDs (and so its custom resources).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{
    Api, ApiResource, DynamicObject, GroupVersionKind, ListParams, WatchEvent, WatchParams,
};
use kube::{Client, ResourceExt as _};
use pom_api::PlatformOperator;
use pom_api::labels::{BUNDLE, OWNER_PO, label_value, owned_by};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::fixtures::bundle_name;

pub mod rollouts;
use rollouts::{GapBound, Gaps, Rollouts, Verdict};

/// A small seeded random source (SplitMix64): the same seed replays the same run.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next_u64() % n }
    }

    /// A duration between `low_ms` and `high_ms` milliseconds.
    pub fn millis(&mut self, low_ms: u64, high_ms: u64) -> Duration {
        Duration::from_millis(low_ms + self.below(high_ms.saturating_sub(low_ms) + 1))
    }

    /// `count` distinct numbers of `0..n` (all of them when `count >= n`), sorted.
    pub fn pick(&mut self, n: u64, count: usize) -> Vec<u64> {
        let mut all: Vec<u64> = (0..n).collect();
        for i in (1..all.len()).rev() {
            let j = usize::try_from(self.below(i as u64 + 1)).unwrap_or(0);
            all.swap(i, j);
        }
        all.truncate(count);
        all.sort_unstable();
        all
    }
}

/// The seed: `POM_CHAOS_SEED` when set, else one from the clock and the process id.
#[must_use]
pub fn seed_from_env() -> u64 {
    if let Some(seed) = std::env::var("POM_CHAOS_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        return seed;
    }
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    #[allow(clippy::cast_possible_truncation)]
    let low = nanos as u64;
    Rng::new(low ^ u64::from(std::process::id()).rotate_left(32)).next_u64()
}

/// A `u64` from environment variable `name`, else `default`.
#[must_use]
pub fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// What a chaos run ended with, told last (issue 25 item 12): a caller that keeps only the last
/// lines of the output (`make chaos | tail`) must still see the seed of a failed run and each
/// violation. [`RunRecord::new`] starts it; its `Drop` prints it (after the panic message, as
/// the stack unwinds) and writes it to `POM_CHAOS_REPORT` when that is set, which `make chaos`
/// prints after cargo's own last lines.
#[derive(Debug)]
pub struct RunRecord {
    seed: u64,
    replay: String,
    summary: Option<String>,
    violations: Vec<String>,
    file: Option<std::path::PathBuf>,
    panic: Arc<Mutex<Option<String>>>,
}

/// The prefix of every line of a [`RunRecord`].
pub const RESULT_PREFIX: &str = "chaos result:";

impl RunRecord {
    /// Starts the record of the run of `seed`; `replay` is the command that replays it. Installs
    /// a panic hook (chained to the current one) that keeps the first panic's message on this
    /// thread, and
    /// writes an "INCOMPLETE" record to `POM_CHAOS_REPORT`, so that even a run killed outright
    /// leaves its seed there.
    #[must_use]
    pub fn new(seed: u64, replay: String) -> Self {
        let file = std::env::var_os("POM_CHAOS_REPORT").map(std::path::PathBuf::from);
        Self::writing_to(seed, replay, file)
    }

    /// [`RunRecord::new`] with the report file given: the unit test of the record's own format
    /// passes `None`, so that it never overwrites the report of the real run `make test` keeps
    /// (it once left "PASSED ... violations=2" there).
    fn writing_to(seed: u64, replay: String, file: Option<std::path::PathBuf>) -> Self {
        let panic = Arc::new(Mutex::new(None::<String>));
        let kept = panic.clone();
        // Only this test's thread (a current-thread runtime runs its tasks there too): another
        // test of the same binary may panic meanwhile.
        let thread = std::thread::current().id();
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let mut first = kept.lock().unwrap_or_else(PoisonError::into_inner);
            if first.is_none() && std::thread::current().id() == thread {
                let message = info
                    .payload()
                    .downcast_ref::<String>()
                    .cloned()
                    .or_else(|| {
                        info.payload()
                            .downcast_ref::<&str>()
                            .map(|s| (*s).to_owned())
                    })
                    .unwrap_or_default();
                let at = info
                    .location()
                    .map_or_else(String::new, |l| format!(" at {}:{}", l.file(), l.line()));
                *first = Some(format!("{message}{at}"));
            }
            drop(first);
            previous(info);
        }));
        let record = Self {
            seed,
            replay,
            summary: None,
            violations: Vec::new(),
            file,
            panic,
        };
        record.write(&format!(
            "{RESULT_PREFIX} INCOMPLETE seed={seed}: the run ended before it reported \
             (killed?); replay: {}\n",
            record.replay
        ));
        record
    }

    /// The run's summary line.
    pub fn summary(&mut self, line: String) {
        self.summary = Some(line);
    }

    /// The violations found.
    pub fn violations(&mut self, violations: Vec<String>) {
        self.violations = violations;
    }

    /// The record as printed: on success one line; on failure the seed, the replay command,
    /// the first panic, each violation on a line of its own, the summary, and the seed again
    /// last (so that `tail -n 1` alone names it).
    #[must_use]
    pub fn render(&self, failed: bool) -> String {
        let one_line = |text: &str| text.split_whitespace().collect::<Vec<_>>().join(" ");
        let seed = self.seed;
        let summary = self
            .summary
            .as_deref()
            .unwrap_or("(no summary: the run stopped early)");
        if !failed && self.violations.is_empty() {
            return match &self.summary {
                Some(summary) => format!("{RESULT_PREFIX} PASSED seed={seed} {summary}\n"),
                None => format!("{RESULT_PREFIX} NO RESULT seed={seed} (skipped?)\n"),
            };
        }
        let mut out = format!(
            "{RESULT_PREFIX} FAILED seed={seed}; replay: {}\n",
            self.replay
        );
        let panic = self.panic.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(message) = panic.as_deref() {
            let mut message = one_line(message);
            if message.len() > 4000 {
                let mut end = 4000;
                while !message.is_char_boundary(end) {
                    end -= 1;
                }
                message.truncate(end);
                message.push_str(" [...]");
            }
            out.push_str(&format!("{RESULT_PREFIX} panic: {message}\n"));
        }
        let count = self.violations.len();
        for (i, violation) in self.violations.iter().enumerate() {
            out.push_str(&format!(
                "{RESULT_PREFIX} violation {}/{count}: {}\n",
                i + 1,
                one_line(violation)
            ));
        }
        out.push_str(&format!("{RESULT_PREFIX} {summary}\n"));
        out.push_str(&format!(
            "{RESULT_PREFIX} FAILED seed={seed} violations={count} (POM_CHAOS_SEED={seed} replays it)\n"
        ));
        out
    }

    fn write(&self, text: &str) {
        if let Some(file) = &self.file {
            if let Some(dir) = file.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            let _ = std::fs::write(file, text);
        }
    }
}

impl Drop for RunRecord {
    fn drop(&mut self) {
        let text = self.render(std::thread::panicking());
        print!("{text}");
        self.write(&text);
    }
}

/// The channel of each package: its bundle versions in `replaces` order (oldest first). A
/// PlatformOperator is named after its package.
#[derive(Debug, Clone, Default)]
pub struct Chains(pub BTreeMap<String, Vec<String>>);

impl Chains {
    /// The position of bundle `bundle` in the chain of `po`.
    #[must_use]
    pub fn index(&self, po: &str, bundle: &str) -> Option<usize> {
        self.0
            .get(po)?
            .iter()
            .position(|v| bundle_name(po, v) == bundle)
    }

    /// The position in the chain of `po` of the bundle whose label value is `label` (objects
    /// carry bundle names as label values).
    #[must_use]
    pub fn position(&self, po: &str, label: &str) -> Option<usize> {
        self.0
            .get(po)?
            .iter()
            .position(|v| label_value(&bundle_name(po, v)) == label)
    }

    /// The last version of the chain of `po`.
    #[must_use]
    pub fn head(&self, po: &str) -> Option<&str> {
        self.0.get(po)?.last().map(String::as_str)
    }
}

/// One version of a PO as the monitor saw it: (revision, move settled by its status, move's
/// `to`, being deleted by its metadata).
type PoVersion = (u64, bool, Option<String>, bool);

/// An object deletion seen: (revision, kind, namespace/name, owner label, bundle label).
type Deletion = (u64, String, String, String, String);

#[derive(Default)]
struct MonitorState {
    /// The channel of each package, for the order of its bundles.
    chains: Chains,
    violations: Vec<String>,
    history: BTreeMap<String, Vec<PoVersion>>,
    deletions: Vec<Deletion>,
    /// Owned objects of [`DELETION_KINDS`] deleted while their watch was not watching (found
    /// missing at the relist): deletions nobody could judge.
    missed_deletions: usize,
    /// Revision ranges the PlatformOperator watch may have missed writes of each PO in
    /// (relists; [`rollouts::hidden_by_relist`]).
    gaps: BTreeMap<String, Gaps>,
    /// The world's record of every owned Deployment's rollouts.
    rollouts: Rollouts,
    /// The first PO version whose move to a bundle says settled: (revision, PO, bundle).
    settle_claims: Vec<(u64, String, String)>,
    /// Revisions of the aggregated ClusterOperator's versions that said Upgradeable=True, with
    /// the condition's message (what the aggregator computed from).
    co_upgradeable: Vec<(u64, String)>,
    /// Versions of the aggregated ClusterOperator a gap of its watch may have hidden.
    co_missed: usize,
    /// Relists of the ClusterOperator watch after a gap.
    co_relists: usize,
    moves: BTreeSet<(String, Option<String>, String)>,
    installed: BTreeMap<String, usize>,
    versions_seen: u64,
    rewatches: u64,
    upgradeable_with_pending_bundle: u64,
}

/// Judged and unjudged counts of one kind of judgment.
#[derive(Debug, Clone, Copy, Default)]
pub struct Tally {
    pub judged: usize,
    pub unjudged: usize,
    /// Unjudged ones allowed beyond [`GapBound`]'s share: one per gap of a watch whose every
    /// gap may hide one (the ClusterOperator's: a version written while it relisted).
    pub excused: usize,
}

impl Tally {
    fn count(&mut self, verdict: &Verdict) {
        match verdict {
            Verdict::Unjudged => self.unjudged += 1,
            Verdict::Holds | Verdict::Violated(_) => self.judged += 1,
        }
    }

    /// The violation when nothing of this kind was judged.
    fn vacuous(&self, what: &str) -> Option<String> {
        (self.judged == 0).then(|| {
            format!(
                "no {what} were judged ({} unjudged): the monitor saw nothing to judge",
                self.unjudged
            )
        })
    }

    /// The violation when more went unjudged than [`GapBound`] allows.
    fn bound(&self, what: &str) -> Option<String> {
        GapBound::check(
            what,
            self.judged,
            self.unjudged.saturating_sub(self.excused),
        )
    }
}

/// What the monitor saw.
#[derive(Debug, Clone, Default)]
pub struct MonitorReport {
    /// Each violation, with the PO version it was seen in.
    pub violations: Vec<String>,
    /// Distinct moves (po, from, to) seen in `status.activeHop`.
    pub moves: BTreeSet<(String, Option<String>, String)>,
    /// PlatformOperator versions judged.
    pub versions_seen: u64,
    /// Times a watch had to list again (after an API server or etcd restart).
    pub rewatches: u64,
    /// Versions with `Upgradeable=True`, the move settled and a bundle still owed
    /// (`desiredBundle`): not a violation of §8.3, counted for the record.
    pub upgradeable_with_pending_bundle: u64,
    /// Deletions of owned objects of the watched kinds ([`DELETION_KINDS`]): judged, and
    /// unjudged (their evidence, or the deletion itself, fell in a gap of a watch).
    pub deletions: Tally,
    /// Settles the status announced, judged against the world's rollouts.
    pub settles: Tally,
    /// Versions of the aggregated ClusterOperator that said `Upgradeable=True`, each judged
    /// against every PO's last status and the world's rollouts.
    pub co_upgradeable: Tally,
}

/// The kinds whose deletions the monitor judges: a Deployment (one name across a package's
/// bundles, so only cleanup may ever delete it) and a PriorityClass (one per bundle, so prune
/// deletes the old one, which it may only do once the move away from it settled).
pub const DELETION_KINDS: &[(&str, &str)] = &[
    ("apps/v1", "Deployment"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
];

/// The invariant monitor: watches on every PlatformOperator, owned Deployment and owned
/// object of [`DELETION_KINDS`] and on the aggregated ClusterOperator, from start to
/// [`Monitor::stop`], each listing again whenever it breaks (so it survives API server
/// restarts), the revisions it could not see recorded as gaps.
pub struct Monitor {
    state: Arc<Mutex<MonitorState>>,
    stop: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl Monitor {
    /// Starts watching every PlatformOperator, judging each version against `chains`.
    #[must_use]
    pub fn start(client: Client, chains: Chains) -> Self {
        let state = Arc::new(Mutex::new(MonitorState {
            chains: chains.clone(),
            ..MonitorState::default()
        }));
        let stop = CancellationToken::new();
        let task = {
            let (state, stop) = (state.clone(), stop.clone());
            tokio::spawn(async move {
                let deletions = DELETION_KINDS.iter().filter_map(|(api_version, kind)| {
                    let (resource, _) = resource(api_version, kind)?;
                    Some(deletion_loop(
                        Api::all_with(client.clone(), &resource),
                        kind,
                        &state,
                    ))
                });
                tokio::select! {
                    () = stop.cancelled() => {}
                    () = cluster_operator_loop(client.clone(), &state) => {}
                    () = platform_operator_loop(Api::all(client.clone()), &chains, &state) => {}
                    () = deployment_loop(Api::all(client.clone()), &state) => {}
                    _ = futures::future::join_all(deletions) => {}
                }
            })
        };
        Self {
            state,
            stop,
            task: Some(task),
        }
    }

    /// Violations so far.
    #[must_use]
    pub fn violations(&self) -> Vec<String> {
        self.state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .violations
            .clone()
    }

    /// Stops the watches and returns what they saw, judged.
    pub async fn stop(mut self) -> MonitorReport {
        self.stop.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (violations, mut deletions) = judge_deletions(&state);
        deletions.unjudged += state.missed_deletions;
        let (co_violations, mut co_upgradeable) = judge_cluster_operator(&state);
        co_upgradeable.unjudged += state.co_missed;
        let (settle_violations, settles) = judge_settles(&state);
        let bounds = [
            deletions.bound("deletions"),
            co_upgradeable.bound("Upgradeable=True verdicts"),
            settles.bound("settles"),
            // A judge that judged nothing proves nothing (review M4): every run settles moves,
            // deletes POs and ends with every PO settled, so each has something to judge.
            deletions.vacuous("deletions"),
            co_upgradeable.vacuous("Upgradeable=True verdicts"),
            settles.vacuous("settles"),
        ];
        let all = violations
            .into_iter()
            .chain(co_violations)
            .chain(settle_violations)
            .chain(bounds.into_iter().flatten());
        state.violations.extend(all);
        MonitorReport {
            deletions,
            settles,
            co_upgradeable,
            violations: state.violations.clone(),
            moves: state.moves.clone(),
            versions_seen: state.versions_seen,
            rewatches: state.rewatches,
            upgradeable_with_pending_bundle: state.upgradeable_with_pending_bundle,
        }
    }
}

impl Drop for Monitor {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

/// What [`follow`] saw: a list (after the first, with the revisions it missed since the watch
/// broke), or one watch event.
enum Seen<K> {
    Listed {
        items: Vec<K>,
        gap: Option<(u64, u64)>,
    },
    Event(WatchEvent<K>),
}

/// Which objects [`follow`] lists and watches.
#[derive(Debug, Clone, Copy, Default)]
struct Selector<'a> {
    labels: Option<&'a str>,
    fields: Option<&'a str>,
}

impl Selector<'_> {
    fn params(self) -> (ListParams, WatchParams) {
        let (mut list, mut watch) = (ListParams::default(), WatchParams::default());
        if let Some(labels) = self.labels {
            (list, watch) = (list.labels(labels), watch.labels(labels));
        }
        if let Some(fields) = self.fields {
            (list, watch) = (list.fields(fields), watch.fields(fields));
        }
        (list, watch)
    }
}

/// Lists and watches `api` (the objects `selector` selects) for as long as it is
/// polled, handing everything to `seen`. A watch that ends or loses its connection resumes
/// from the last revision it saw; one the API server refuses to resume (the revision is gone
/// after a restart) lists again, and the revisions between are a gap.
async fn follow<K>(
    api: Api<K>,
    selector: Selector<'_>,
    state: &Mutex<MonitorState>,
    mut seen: impl FnMut(Seen<K>),
) where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let (list_params, watch_params) = selector.params();
    let revision = |v: &str| v.parse::<u64>().ok();
    let mut seen_until: Option<u64> = None;
    loop {
        if seen_until.is_some() {
            state
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .rewatches += 1;
        }
        let Ok(list) = api.list(&list_params).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let Some(mut version) = list.metadata.resource_version.clone() else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let listed = revision(&version).unwrap_or(0);
        let gap = seen_until
            .filter(|from| *from < listed)
            .map(|from| (from, listed));
        seen_until = Some(listed);
        seen(Seen::Listed {
            items: list.items,
            gap,
        });
        let mut resumed = api.watch(&watch_params, &version).await.ok();
        while let Some(stream) = resumed.take() {
            let mut stream = stream.boxed();
            loop {
                match stream.next().await {
                    Some(Ok(WatchEvent::Bookmark(b))) => {
                        seen_until = revision(&b.metadata.resource_version).or(seen_until);
                        version = b.metadata.resource_version;
                    }
                    Some(Ok(WatchEvent::Error(_))) => break,
                    Some(Ok(event)) => {
                        let (WatchEvent::Added(o)
                        | WatchEvent::Modified(o)
                        | WatchEvent::Deleted(o)) = &event
                        else {
                            continue;
                        };
                        if let Some(v) = o.resource_version() {
                            seen_until = revision(&v).or(seen_until);
                            version = v;
                        }
                        seen(Seen::Event(event));
                    }
                    // An event that cannot be read would fail again from the same revision:
                    // list again (review M1).
                    Some(Err(kube::Error::SerdeError(_))) => break,
                    Some(Err(_)) => {
                        tokio::time::sleep(Duration::from_millis(200)).await;
                        resumed = api.watch(&watch_params, &version).await.ok();
                        break;
                    }
                    None => {
                        resumed = api.watch(&watch_params, &version).await.ok();
                        break;
                    }
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn platform_operator_loop(
    api: Api<PlatformOperator>,
    chains: &Chains,
    state: &Mutex<MonitorState>,
) {
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    let mut known: BTreeSet<String> = BTreeSet::new();
    follow(api, Selector::default(), state, |seen| match seen {
        Seen::Listed { items, gap } => {
            let mut state = lock();
            let listed: BTreeMap<String, Option<u64>> = items
                .iter()
                .map(|po| (po.name_any(), revision_of(po)))
                .collect();
            for name in known.iter().chain(listed.keys()) {
                let rev = listed.get(name).map(|rev| rev.unwrap_or(0));
                if let Some(hidden) = gap.and_then(|g| rollouts::hidden_by_relist(g, rev)) {
                    state.gaps.entry(name.clone()).or_default().push(hidden);
                }
            }
            known = listed.into_keys().collect();
            for po in &items {
                judge(po, chains, &mut state);
            }
        }
        Seen::Event(WatchEvent::Added(po) | WatchEvent::Modified(po)) => {
            known.insert(po.name_any());
            judge(&po, chains, &mut lock());
        }
        Seen::Event(WatchEvent::Deleted(po)) => {
            known.remove(&po.name_any());
            judge(&po, chains, &mut lock());
        }
        Seen::Event(_) => {}
    })
    .await;
}

fn revision_of(object: &impl kube::Resource) -> Option<u64> {
    object.resource_version().and_then(|v| v.parse().ok())
}

/// Records every version of every owned Deployment (the world's record of rollouts).
async fn deployment_loop(api: Api<Deployment>, state: &Mutex<MonitorState>) {
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    // uid -> owner label of every owned Deployment the watch knows to exist.
    let mut known: BTreeMap<String, String> = BTreeMap::new();
    let selector = Selector {
        labels: Some(OWNER_PO),
        fields: None,
    };
    follow(api, selector, state, |seen| match seen {
        Seen::Listed { items, gap } => {
            known = relisted(&mut lock().rollouts, &known, &items, gap);
        }
        Seen::Event(WatchEvent::Added(d) | WatchEvent::Modified(d)) => {
            known.insert(d.uid().unwrap_or_default(), owner_of(&d));
            lock().rollouts.record(&d, false);
        }
        Seen::Event(WatchEvent::Deleted(d)) => {
            known.remove(&d.uid().unwrap_or_default());
            lock().rollouts.record(&d, true);
        }
        Seen::Event(_) => {}
    })
    .await;
}

/// Records a list of the owned Deployments, made after a `gap` of the watch when there is one:
/// each listed version, what the gap may hide of each owner's Deployment, and, for an owner
/// whose Deployment is gone and not listed again (review L2), its deletion at the list's
/// revision. Returns the Deployments known to exist (uid -> owner).
fn relisted(
    rollouts: &mut Rollouts,
    known: &BTreeMap<String, String>,
    items: &[Deployment],
    gap: Option<(u64, u64)>,
) -> BTreeMap<String, String> {
    let listed: BTreeMap<String, (String, u64)> = items
        .iter()
        .map(|d| {
            let at = (owner_of(d), revision_of(d).unwrap_or(0));
            (d.uid().unwrap_or_default(), at)
        })
        .collect();
    if let Some(gap) = gap {
        let listed_owners: BTreeSet<&String> = listed.values().map(|(owner, _)| owner).collect();
        let gone = known.iter().filter(|(uid, _)| !listed.contains_key(*uid));
        for (_, owner) in gone {
            if !listed_owners.contains(owner) {
                let deleted = rollouts::DeploymentVersion {
                    rev: gap.1,
                    bundle: String::new(),
                    available: None,
                };
                rollouts.push(owner, deleted);
            }
            rollouts.gap(owner, (gap.0, gap.1));
        }
        for (owner, rev) in listed.values() {
            if let Some(hidden) = rollouts::hidden_by_relist(gap, Some(*rev)) {
                rollouts.gap(owner, hidden);
            }
        }
    }
    for deployment in items {
        rollouts.record(deployment, false);
    }
    listed
        .into_iter()
        .map(|(uid, (owner, _))| (uid, owner))
        .collect()
}

fn owner_of(object: &impl kube::Resource) -> String {
    object.labels().get(OWNER_PO).cloned().unwrap_or_default()
}

/// Records the revision of every version of the aggregated ClusterOperator that says
/// Upgradeable=True.
async fn cluster_operator_loop(client: Client, state: &Mutex<MonitorState>) {
    use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
    let record = |co: &ClusterOperator| {
        let upgradeable = co.status.as_ref().and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == "Upgradeable" && c.status == "True")
        });
        if let Some(condition) = upgradeable
            && let Some(rev) = revision_of(co)
        {
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            // A relist hands the same version again: one verdict each.
            if !state.co_upgradeable.iter().any(|(r, _)| *r == rev) {
                let message = condition.message.clone().unwrap_or_default();
                state.co_upgradeable.push((rev, message));
            }
        }
    };
    let fields = format!("metadata.name={AGGREGATED_CLUSTER_OPERATOR}");
    let selector = Selector {
        labels: None,
        fields: Some(&fields),
    };
    follow(Api::all(client), selector, state, |seen| match seen {
        Seen::Listed { items, gap } => {
            // A write the gap may hide is a verdict nobody judged (review M2).
            let hidden = items
                .iter()
                .filter(|co| {
                    gap.and_then(|g| rollouts::hidden_by_relist(g, revision_of(*co)))
                        .is_some()
                })
                .count();
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            state.co_missed += hidden;
            state.co_relists += usize::from(gap.is_some());
            drop(state);
            items.iter().for_each(record);
        }
        Seen::Event(WatchEvent::Added(co) | WatchEvent::Modified(co)) => record(&co),
        Seen::Event(_) => {}
    })
    .await;
}

fn gaps_of<'a>(gaps: &'a BTreeMap<String, Gaps>, po: &str) -> &'a [(u64, u64)] {
    gaps.get(po).map_or(&[], Vec::as_slice)
}

/// The PO's last version before `rev`, or `Err(())` when a gap of its watch may hide a later
/// one.
fn po_before(
    versions: &[PoVersion],
    gaps: &[(u64, u64)],
    rev: u64,
) -> Result<Option<PoVersion>, ()> {
    let before = versions.iter().filter(|v| v.0 < rev).max_by_key(|v| v.0);
    if rollouts::hidden(gaps, before.map_or(0, |v| v.0), rev) {
        return Err(());
    }
    Ok(before.cloned())
}

/// §8.3 as the CVO sees it: the aggregated ClusterOperator must not say Upgradeable=True at a
/// revision where some PO not being deleted has a move in flight: by its last status before it
/// (an unsettled move recorded), and by the world (its Deployment runs a bundle never seen
/// rolled out and available, [`rollouts::judge_upgradeable`]). A PO whose last version before
/// it may have been missed (a watch gap) is counted unjudged.
fn judge_cluster_operator(state: &MonitorState) -> (Vec<String>, Tally) {
    let mut violations = Vec::new();
    // One verdict per version of the ClusterOperator (a gap that hides one PO's writes leaves
    // that version unjudged, whatever the other POs' records say).
    let mut tally = Tally {
        excused: state.co_relists,
        ..Tally::default()
    };
    for (rev, message) in &state.co_upgradeable {
        let mut unjudged = false;
        let mut violated = false;
        for (po, versions) in &state.history {
            let verdict = match po_before(versions, gaps_of(&state.gaps, po), *rev) {
                Ok(None | Some((_, _, _, true))) => continue,
                Err(()) => Verdict::Unjudged,
                Ok(Some((at, false, Some(to), false))) => Verdict::Violated(format!(
                    "its last status (rv{at}) records the unsettled move to {to}"
                )),
                Ok(Some(_)) => rollouts::judge_upgradeable(&state.rollouts, &label_value(po), *rev),
            };
            unjudged |= verdict == Verdict::Unjudged;
            if let Verdict::Violated(why) = verdict {
                violated = true;
                violations.push(format!(
                    "the aggregated ClusterOperator said Upgradeable=True at rv{rev} while {po}: \
                     {why}; its message: {message:?}"
                ));
            }
        }
        tally.count(&if violated || !unjudged {
            Verdict::Holds
        } else {
            Verdict::Unjudged
        });
    }
    (violations, tally)
}

/// Records every deletion of an object of `kind` that carries an owner label; objects that
/// went missing while the watch was not watching are counted as missed.
async fn deletion_loop(api: Api<DynamicObject>, kind: &str, state: &Mutex<MonitorState>) {
    let lock = || state.lock().unwrap_or_else(PoisonError::into_inner);
    let mut known: BTreeSet<String> = BTreeSet::new();
    let selector = Selector {
        labels: Some(OWNER_PO),
        fields: None,
    };
    follow(api, selector, state, |seen| match seen {
        Seen::Listed { items, gap } => {
            let listed: BTreeSet<String> =
                items.iter().map(|o| o.uid().unwrap_or_default()).collect();
            if gap.is_some() {
                lock().missed_deletions += known.difference(&listed).count();
            }
            known = listed;
        }
        Seen::Event(WatchEvent::Added(object) | WatchEvent::Modified(object)) => {
            known.insert(object.uid().unwrap_or_default());
        }
        Seen::Event(WatchEvent::Deleted(object)) => {
            known.remove(&object.uid().unwrap_or_default());
            let labels = object.labels();
            let rev = object
                .resource_version()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            let at = match object.namespace() {
                Some(ns) => format!("{ns}/{}", object.name_any()),
                None => object.name_any(),
            };
            lock().deletions.push((
                rev,
                kind.to_owned(),
                at,
                labels.get(OWNER_PO).cloned().unwrap_or_default(),
                labels.get(BUNDLE).cloned().unwrap_or_default(),
            ));
        }
        Seen::Event(_) => {}
    })
    .await;
}

/// Each deletion of an owned object must come from cleanup (the owning PO was being deleted
/// before it, by its metadata) or from a prune the world allows: the PO's Deployment ran
/// another bundle, seen rolled out and available before the deletion
/// ([`rollouts::judge_prune`]). A deletion whose evidence may lie in a watch gap is unjudged.
fn judge_deletions(state: &MonitorState) -> (Vec<String>, Tally) {
    let mut violations = Vec::new();
    let mut tally = Tally::default();
    for (rev, kind, at, owner, bundle) in &state.deletions {
        let Some((po, versions)) = state
            .history
            .iter()
            .find(|(po, _)| label_value(po) == *owner)
        else {
            tally.unjudged += 1;
            continue;
        };
        let position = |label: &str| state.chains.position(po, label);
        let world = || rollouts::judge_prune(&state.rollouts, owner, bundle, *rev, position);
        let verdict = match po_before(versions, gaps_of(&state.gaps, po), *rev) {
            Ok(Some((.., true))) => Verdict::Holds,
            Err(()) => match world() {
                Verdict::Violated(_) => Verdict::Unjudged,
                verdict => verdict,
            },
            // Prune after settle by the status too (review H2): the status says the move away
            // from the deleted bundle settled (under Auto, after its first-report window).
            Ok(Some((_, settled, to, false))) => match world() {
                Verdict::Holds
                    if !settled || to.as_deref().map(label_value).as_ref() == Some(bundle) =>
                {
                    Verdict::Violated(format!(
                        "deleted before the status recorded a settled move away from it (last \
                         status: settled {settled}, moving to {to:?})"
                    ))
                }
                verdict => verdict,
            },
            Ok(None) => world(),
        };
        tally.count(&verdict);
        if let Verdict::Violated(why) = verdict {
            violations.push(format!(
                "{po}: {kind} {at} of bundle {bundle} was {why} (rv{rev})"
            ));
        }
    }
    (violations, tally)
}

/// Every settle the status announced is judged against the world's rollouts
/// ([`rollouts::judge_settle_claim`]).
fn judge_settles(state: &MonitorState) -> (Vec<String>, Tally) {
    let mut violations = Vec::new();
    let mut tally = Tally::default();
    for (rev, po, bundle) in &state.settle_claims {
        let verdict = rollouts::judge_settle_claim(
            &state.rollouts,
            &label_value(po),
            &label_value(bundle),
            *rev,
        );
        tally.count(&verdict);
        if let Verdict::Violated(why) = verdict {
            violations.push(format!("{po}: {why}"));
        }
    }
    (violations, tally)
}

/// Records the first PO version that says its move to `bundle` settled.
fn claim_settle(state: &mut MonitorState, rev: u64, po: &str, bundle: &str) {
    let claimed = |(_, p, b): &(u64, String, String)| p == po && b == bundle;
    if !state.settle_claims.iter().any(claimed) {
        let claim = (rev, po.to_owned(), bundle.to_owned());
        state.settle_claims.push(claim);
    }
}

fn judge(po: &PlatformOperator, chains: &Chains, state: &mut MonitorState) {
    state.versions_seen += 1;
    let name = po.name_any();
    let rev = po
        .resource_version()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    state.history.entry(name.clone()).or_default().push((
        rev,
        po.status
            .as_ref()
            .and_then(|s| s.active_hop.as_ref())
            .is_some_and(|h| h.settled),
        po.status
            .as_ref()
            .and_then(|s| s.active_hop.as_ref())
            .map(|h| h.to.clone()),
        po.metadata.deletion_timestamp.is_some(),
    ));
    let Some(status) = &po.status else {
        return;
    };
    let at = format!("{name}@rv{}", po.resource_version().unwrap_or_default());
    let upgradeable = status
        .conditions
        .iter()
        .any(|c| c.type_ == "Upgradeable" && c.status == "True");
    if let Some(hop) = &status.active_hop {
        if upgradeable && !hop.settled {
            state.violations.push(format!(
                "{at}: Upgradeable=True while the move {:?} -> {} is unsettled",
                hop.from, hop.to
            ));
        }
        let to = chains.index(&name, &hop.to);
        match (&hop.from, to) {
            (_, None) => state
                .violations
                .push(format!("{at}: a move to {}, not in the channel", hop.to)),
            (Some(from), Some(to)) => {
                let from_index = chains.index(&name, from);
                if from_index.map(|f| f + 1) != Some(to) {
                    state.violations.push(format!(
                        "{at}: the move {from} -> {} is not one hop along the channel",
                        hop.to
                    ));
                }
            }
            (None, Some(_)) => {}
        }
        state
            .moves
            .insert((name.clone(), hop.from.clone(), hop.to.clone()));
        if hop.settled {
            claim_settle(state, rev, &name, &hop.to);
        }
        if !status.inventory.iter().any(|e| e.bundle == hop.to) {
            state.violations.push(format!(
                "{at}: the move to {} is recorded but the inventory has no entry for it \
                 (entries: {:?})",
                hop.to,
                status
                    .inventory
                    .iter()
                    .map(|e| &e.bundle)
                    .collect::<Vec<_>>()
            ));
        }
        for entry in &status.inventory {
            if entry.bundle != hop.to && Some(&entry.bundle) != hop.from.as_ref() {
                state.violations.push(format!(
                    "{at}: the inventory lists {}, neither side of the move {:?} -> {}",
                    entry.bundle, hop.from, hop.to
                ));
            }
        }
        if upgradeable && hop.settled && status.desired_bundle.is_some() {
            state.upgradeable_with_pending_bundle += 1;
        }
    }
    if let Some(installed) = &status.installed_bundle {
        match chains.index(&name, &installed.name) {
            None => state.violations.push(format!(
                "{at}: installed {}, not in the channel",
                installed.name
            )),
            Some(index) => {
                let last = state.installed.entry(name.clone()).or_insert(index);
                if index < *last {
                    state.violations.push(format!(
                        "{at}: the installed bundle went backwards to {}",
                        installed.name
                    ));
                }
                *last = (*last).max(index);
            }
        }
    }
}

/// The kinds the test bundles ship (and POM's sweep covers), as
/// (apiVersion, kind, plural, namespaced).
pub const KINDS: &[(&str, &str, &str, bool)] = &[
    ("apps/v1", "Deployment", "deployments", true),
    ("v1", "ServiceAccount", "serviceaccounts", true),
    ("v1", "ConfigMap", "configmaps", true),
    ("v1", "Service", "services", true),
    ("rbac.authorization.k8s.io/v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io/v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (
        "operators.coreos.com/v2",
        "OperatorCondition",
        "operatorconditions",
        true,
    ),
    (
        "scheduling.k8s.io/v1",
        "PriorityClass",
        "priorityclasses",
        false,
    ),
    (
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

fn resource(api_version: &str, kind: &str) -> Option<(ApiResource, bool)> {
    let (_, _, plural, namespaced) = KINDS
        .iter()
        .find(|(v, k, _, _)| *v == api_version && *k == kind)?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    Some((ApiResource::from_gvk_with_plural(&gvk, plural), *namespaced))
}

/// Every object of the kinds in [`KINDS`] labelled as owned by `po`, as
/// (kind, namespace, name, bundle label).
///
/// # Errors
/// When a list fails.
pub async fn owned_objects(
    client: &Client,
    po: &str,
) -> Result<Vec<(String, Option<String>, String, Option<String>)>, kube::Error> {
    let mut found = Vec::new();
    for (api_version, kind, _, _) in KINDS {
        let Some((resource, _)) = resource(api_version, kind) else {
            continue;
        };
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        for object in api
            .list(&ListParams::default().labels(&owned_by(po)))
            .await?
        {
            found.push((
                (*kind).to_owned(),
                object.namespace(),
                object.name_any(),
                object.labels().get(BUNDLE).cloned(),
            ));
        }
    }
    Ok(found)
}

/// The checker, after convergence: `live` POs must run their chain's head, `deleted` ones
/// must be gone and have left only CRDs. Returns every violation found.
pub async fn check(
    client: &Client,
    chains: &Chains,
    live: &[String],
    deleted: &[String],
) -> Vec<String> {
    let mut violations = Vec::new();
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    for po in live {
        let Some(head) = chains.head(po) else {
            violations.push(format!("{po}: no channel"));
            continue;
        };
        let bundle = bundle_name(po, head);
        let status = match pos.get(po).await {
            Ok(current) => current.status.unwrap_or_default(),
            Err(err) => {
                violations.push(format!("{po}: cannot be read: {err}"));
                continue;
            }
        };
        if status.installed_bundle.as_ref().map(|b| &b.name) != Some(&bundle) {
            violations.push(format!(
                "{po}: runs {:?}, not the head {bundle}",
                status.installed_bundle
            ));
        }
        if !status.active_hop.as_ref().is_some_and(|h| h.settled) {
            violations.push(format!(
                "{po}: the move is not settled: {:?}",
                status.active_hop
            ));
        }
        let entries: Vec<&str> = status.inventory.iter().map(|e| e.bundle.as_str()).collect();
        if entries != [bundle.as_str()] {
            violations.push(format!(
                "{po}: the inventory must have exactly one entry, {bundle}: {entries:?}"
            ));
        }
        let mut listed = BTreeSet::new();
        for entry in &status.inventory {
            for object in &entry.objects {
                listed.insert((
                    object.kind.clone(),
                    object.namespace.clone(),
                    object.name.clone(),
                ));
                let Some((resource, namespaced)) = resource(&object.api_version, &object.kind)
                else {
                    violations.push(format!(
                        "{po}: the inventory lists a kind the checker does not know: {} {}",
                        object.api_version, object.kind
                    ));
                    continue;
                };
                let api: Api<DynamicObject> = match (&object.namespace, namespaced) {
                    (Some(ns), true) => Api::namespaced_with(client.clone(), ns, &resource),
                    _ => Api::all_with(client.clone(), &resource),
                };
                let what = format!(
                    "{} {}/{}",
                    object.kind,
                    object.namespace.as_deref().unwrap_or(""),
                    object.name
                );
                match api.get_opt(&object.name).await {
                    Ok(Some(found)) => {
                        let labels = found.labels();
                        if labels.get(OWNER_PO) != Some(&label_value(po)) {
                            violations
                                .push(format!("{po}: {what} lacks the owner label: {labels:?}"));
                        }
                        if labels.get(BUNDLE) != Some(&label_value(&entry.bundle)) {
                            violations.push(format!(
                                "{po}: {what} is not labelled with bundle {}: {labels:?}",
                                entry.bundle
                            ));
                        }
                    }
                    Ok(None) => violations.push(format!(
                        "{po}: {what} is in the inventory of the running bundle but missing"
                    )),
                    Err(err) => violations.push(format!("{po}: reading {what}: {err}")),
                }
            }
        }
        match owned_objects(client, po).await {
            Ok(found) => {
                for (kind, namespace, name, bundle_label) in found {
                    if !listed.contains(&(kind.clone(), namespace.clone(), name.clone())) {
                        violations.push(format!(
                            "{po}: {kind} {}/{name} (bundle {bundle_label:?}) carries the \
                             owner label but is not in the inventory (orphaned)",
                            namespace.unwrap_or_default()
                        ));
                    }
                }
            }
            Err(err) => violations.push(format!("{po}: listing owned objects: {err}")),
        }
    }
    for po in deleted {
        match pos.get_opt(po).await {
            Ok(None) => {}
            Ok(Some(_)) => violations.push(format!("{po}: deleted but still there")),
            Err(err) => violations.push(format!("{po}: cannot be read: {err}")),
        }
        match owned_objects(client, po).await {
            Ok(found) => {
                if !found.iter().any(|o| o.0 == "CustomResourceDefinition") {
                    violations.push(format!(
                        "{po}: deleted, and its CRD went too (custom resources would be lost)"
                    ));
                }
                for (kind, namespace, name, _) in found {
                    if kind != "CustomResourceDefinition" {
                        violations.push(format!(
                            "{po}: deleted, but its {kind} {}/{name} is left",
                            namespace.unwrap_or_default()
                        ));
                    }
                }
            }
            Err(err) => violations.push(format!("{po}: listing owned objects: {err}")),
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_failed_run_ends_with_its_seed_after_each_violation_on_a_line_of_its_own() {
        let mut record = RunRecord::writing_to(42, "POM_CHAOS_SEED=42 make chaos".into(), None);
        record.summary("chaos summary: seed=42 kills=3 violations=2".into());
        record.violations(vec![
            "po-a@rv1: bad\n  thing".into(),
            "po-b@rv2: worse".into(),
        ]);
        let text = record.render(false);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines.iter().all(|l| l.starts_with(RESULT_PREFIX)), "{text}");
        assert!(lines[0].contains("FAILED seed=42"), "{text}");
        assert!(
            lines.contains(&"chaos result: violation 1/2: po-a@rv1: bad thing"),
            "{text}"
        );
        assert!(
            lines.contains(&"chaos result: violation 2/2: po-b@rv2: worse"),
            "{text}"
        );
        let last = lines.last().unwrap();
        assert!(last.contains("FAILED seed=42 violations=2"), "{text}");
        record.violations(Vec::new());
        assert_eq!(
            record.render(false),
            "chaos result: PASSED seed=42 chaos summary: seed=42 kills=3 violations=2\n"
        );
        assert!(
            record
                .render(true)
                .ends_with("FAILED seed=42 violations=0 (POM_CHAOS_SEED=42 replays it)\n")
        );
    }
}
