//! A stand-in for the cluster-version operator (CVO), following its contract with
//! ClusterOperators (reference page "OpenShift and OLM contracts" §2–§3) and the CVO's own
//! source (openshift/cluster-version-operator). Tests and the demo use it to drive cluster
//! updates against the real API server, so that POM is judged by the rules the CVO applies in a
//! real cluster, including the ones that make a real CVO less strict than a naive reading of
//! the contract (a cached Upgradeable, a refused update that starts by itself later).
//!
//! # The rules modelled, and where each comes from
//!
//! Paths are in openshift/cluster-version-operator; "released" means the branches shipped in
//! released OCP (the old `pkg/cvo/upgradeable.go`), "newer" the branches after the switch to
//! the `pkg/risk` framework.
//!
//! 1. **An update is a request that a sync admits.** `spec.desiredUpdate` is what the admin
//!    asks for ([`Cvo::request_update`]); each sync ([`Cvo::sync`]) that finds it different from
//!    `status.desired` loads the payload and runs the preconditions. A refusal writes
//!    `ReleaseAccepted=False` (reason `PreconditionChecks`, message `Preconditions failed for
//!    payload loaded version="…" image="…": …`) and leaves the request in place: **every later
//!    sync retries it until the preconditions pass**, then the update starts with no new
//!    request. Once accepted, an update is **never re-checked**: the preconditions run only
//!    while a new payload is loaded, and a refused retarget leaves the accepted payload being
//!    applied. — `pkg/cvo/sync_worker.go` (`Update` → `loadUpdatedPayload` → `syncPayload`).
//! 2. **Every precondition runs, and `force` turns blocking failures into warnings.** The
//!    failures are summarised (`Precondition "NAME" failed because of "REASON": MESSAGE`, or
//!    `Multiple precondition checks failed:` and a bulleted list); with
//!    `spec.desiredUpdate.force` they become `Forced through blocking failures: …` and the
//!    update starts, the text recorded in `history[0].acceptedRisks`. — `pkg/payload/
//!    precondition/precondition.go` (`RunAll`, `Summarize`), `pkg/cvo/sync_worker.go`,
//!    `pkg/cvo/status.go` (`mergeOperatorHistory`).
//! 3. **Upgradeable gates minor and major updates only.** The `ClusterVersionUpgradeable`
//!    precondition reads the *ClusterVersion's* `Upgradeable` condition (not the
//!    ClusterOperators): False blocks a target above `status.desired` in another major.minor,
//!    with that condition's reason and message; patch updates and rollbacks pass (a patch
//!    retarget during a minor update passes with the `MinorVersionClusterUpgradeInProgress`
//!    warning). — `pkg/payload/precondition/clusterversion/upgradeable.go`.
//! 4. **Upgradeable is read from every ClusterOperator** (not only the payload ones) and is
//!    **cached**: released CVOs recompute it at most every 2 minutes, and every 15 s during the
//!    2 minutes after a precondition refusal; newer ones recompute it on every ClusterVersion
//!    sync, where a sync can run on a ClusterOperator status seen once. So a ClusterOperator
//!    that says `Upgradeable=True` for a moment can let a minor update in, and one that turns
//!    False just before a request can be missed ([`CvoTiming`]). — `pkg/cvo/upgradeable.go`
//!    (`upgradeableCheckIntervals`, `throttlePeriod`, `clusterOperatorsUpgradeable`),
//!    `pkg/risk/upgradeable/upgradeable.go`.
//! 5. **An update in progress makes the cluster not upgradeable**: while ClusterVersion says
//!    `Progressing=True`, Upgradeable is False (`UpdateInProgress`, "An update is already in
//!    progress and the details are in the Progressing condition"; newer: the
//!    `ClusterVersionUpdating` risk). So a minor request during a patch update is refused (and,
//!    per rule 1, starts by itself once the patch completed and the cache caught up).
//!    — `pkg/cvo/upgradeable.go` (released), `pkg/risk/updating/updating.go` (newer).
//! 6. **How the blocking reason is worded** ([`ReasonFormat`]). Released: a sole blocking
//!    ClusterOperator keeps its own reason ("Cluster operator X should not be upgraded between
//!    minor or major versions: MESSAGE"), several give `ClusterOperatorsNotUpgradeable`, several
//!    failing checks `MultipleReasons`. Newer: each blocker is a risk named
//!    `ClusterOperatorUpgradeable-<co>`, and the reason is the risk name only if it is a valid
//!    reason (`^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`), so a ClusterOperator blocker reads
//!    `RiskNameNotCompatibleWithReasonProperty`, with the ClusterOperator's message verbatim.
//!    **Tests should assert messages, not reasons.** — `pkg/cvo/upgradeable.go`,
//!    `pkg/cvo/status.go` (`setUpgradeableCondition`), `pkg/risk/upgradeable/upgradeable.go`.
//! 7. **Giant hops**: more than one minor at once (`MultipleMinorVersionsUpdate`), or a major
//!    other than 4.x → 5.0 (`MajorVersionUpdate`), compared with `status.desired`.
//!    — `pkg/payload/precondition/clusterversion/gianthop.go`.
//! 8. **Rollback**: below `status.desired`, the only allowed target is "previous": the first
//!    history entry whose version differs from `status.desired`, **whatever its state**
//!    (`Partial` included), and only within the z-stream (`LowDesiredVersion` otherwise). So an
//!    in-flight patch update can be rolled back, and after 4.16.3 → 4.16.4 → (retarget)
//!    4.16.5 only 4.16.4 is allowed. — `pkg/payload/precondition/clusterversion/rollback.go`
//!    (the brief of issue 12 names `pkg/cvo/rollback.go`; the rule lives in this file).
//! 9. **Completion waits on the payload ClusterOperators only**, checked per operator in the
//!    CVO's order: `Available=True` (else `ClusterOperatorNotAvailable`), then `Degraded`
//!    explicitly `False` (a missing Degraded counts as degraded: `ClusterOperatorDegraded`),
//!    then `versions` equal to the release (`ClusterOperatorUpdating`); `Progressing` is never
//!    read ([`check_operator_health`]). — `pkg/cvo/internal/operatorstatus.go`
//!    (`checkOperatorHealth`).
//! 10. **How an unfinished update shows on the ClusterVersion**: updating versions is progress
//!     (`Progressing=True` "Working towards V: waiting on X", `Failing=False`; after 30 minutes
//!     `Failing=Unknown`, `SlowClusterOperator`); degraded is progress for 40 minutes ("waiting
//!     up to 40 minutes on X"), then `Failing=True` (`ClusterOperatorDegraded`, "Cluster operator
//!     X is degraded"; Progressing "Unable to apply V: wait has exceeded 40 minutes for these
//!     operators: X"); not available is `Failing=True` at once. The texts keep the real "30" and
//!     "40 minutes" whatever the timing parameters say. — `pkg/cvo/status.go`
//!     (`updateClusterVersionStatus`, `convertErrorToProgressing`), `pkg/cvo/internal/
//!     operatorstatus.go` (`UpdateEffect` of each error).
//! 11. **After completion the CVO keeps checking the payload ClusterOperators** (it reconciles
//!     the payload): any of them not available, degraded or at another version makes
//!     `Failing=True` with the error's reason and message, and `Progressing=False` "Error while
//!     reconciling V: …". — `pkg/cvo/status.go`, `pkg/cvo/sync_worker.go` (reconciling state).
//! 12. **History**: newest first, at most 100 entries; an accepted retarget closes the open
//!     entry, which stays `Partial`; completion marks it `Completed`. — `pkg/cvo/status.go`
//!     (`mergeOperatorHistory`).
//!
//! # Timing
//!
//! [`CvoTiming`] holds the intervals: [`CvoTiming::released`] and [`CvoTiming::newer`] are the
//! real values; tests use the same shapes with short intervals. A sync happens when a test calls
//! [`Cvo::sync`] (or [`Cvo::request_update`], which syncs right after writing the request, as
//! the CVO's ClusterVersion informer does), or every `interval` in a [`Cvo::spawn_sync_loop`].
//!
//! # The historical API (kept for its callers)
//!
//! [`Cvo::install`] uses [`CvoTiming::immediate`]: Upgradeable recomputed at every request, a
//! refusal never retried by a sync. [`Cvo::start_update`] and [`Cvo::rollback`] are
//! [`Cvo::request_update`] plus an error on refusal: a refusal is final for them (nothing
//! retries it unless someone calls [`Cvo::sync`] with a timing that retries). They refuse a
//! version in the wrong direction themselves, writing nothing (`oc adm upgrade --to` does not
//! roll back). [`Cvo::try_complete`] and [`Cvo::wait_completed`] are the original completion
//! pass: it checks versions *first* (so a degraded operator at the old version reads "updating
//! versions"), never sets `Failing`, does nothing in steady state and never retries a request.
//! New tests should use [`Cvo::install_with`], [`Cvo::request_update`] and [`Cvo::sync`].
//!
//! Operator versions are compared exactly: a payload operator reaches the new release only by
//! reporting it. The real CVO gets there by rolling out the new payload's operators with
//! `RELEASE_VERSION` set to the new release; POM's manager reports `versions.operator =
//! settings.release_version` once every PlatformOperator reached its pin. So a test or the demo
//! plays that rollout by restarting the in-process manager with `release_version` set to the
//! target after the update was accepted (see `docs/demo.md`).
//!
//! # Tests
//!
//! `e2e/tests/cvo_simulator.rs` checks these rules against plain ClusterOperators;
//! `e2e/tests/cvo_scenarios.rs` runs POM against them (`docs/demo.md` lists the test names).
//!
//! # Not modelled
//!
//! Payload content (no manifests are applied; the image is a fake digest of the version; no
//! "n of m done" counts in Progressing), the `RecommendedUpdate` precondition and the update
//! graph, signature verification, overrides and admin-acks, the `ClusterOperatorNoVersions`
//! check, capabilities, the event-driven sync of newer CVOs (a sync runs when the test or the
//! loop asks), the per-run-level order in which a real CVO reaches each ClusterOperator (all
//! payload operators are checked together), and the exact wording of multi-operator failure
//! summaries. Every status write replaces the whole ClusterVersion status (the CVO owns it).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, PoisonError};
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use pom_api::openshift::{
    CLUSTER_VERSION_NAME, ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus,
    ClusterOperatorStatusCondition, ClusterVersion, ClusterVersionSpec, ClusterVersionStatus,
    Release, UpdateHistory,
};
use semver::Version;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// The most history entries the CVO keeps.
const HISTORY_LIMIT: usize = 100;
/// The field written into `spec.clusterID` (any UUID will do).
const CLUSTER_ID: &str = "5d0c3b9e-0000-4000-8000-00000000c0de";
/// Released CVOs' Upgradeable message while an update is in progress.
pub const UPDATE_IN_PROGRESS_MESSAGE: &str =
    "An update is already in progress and the details are in the Progressing condition";

/// How the CVO words a blocked Upgradeable (rule 6 of the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReasonFormat {
    /// Released `pkg/cvo/upgradeable.go`: a sole blocking ClusterOperator keeps its reason.
    Released,
    /// `pkg/risk` framework: risk names as reasons, `RiskNameNotCompatibleWithReasonProperty`
    /// for ClusterOperator blockers; the ClusterOperator's message verbatim.
    Newer,
}

/// The CVO's timing and wording parameters (rules 1, 4, 6 and 10 of the module docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CvoTiming {
    /// How long a computed Upgradeable is reused (released: 2 min; newer: zero, every sync).
    pub upgradeable_cache: Duration,
    /// The shorter reuse right after a precondition refusal (released: 15 s).
    pub after_refusal_recheck: Duration,
    /// For how long after a refusal (`ReleaseAccepted=False/PreconditionChecks` transition) the
    /// shorter reuse applies (released: 2 min).
    pub after_refusal_window: Duration,
    /// Whether a sync retries a refused request (the real CVO does; [`CvoTiming::immediate`]
    /// does not, keeping the historical "a refusal is final").
    pub retry_refused: bool,
    /// How a blocked Upgradeable is worded.
    pub reasons: ReasonFormat,
    /// How long a degraded payload ClusterOperator is progress before `Failing=True` (40 min).
    pub degraded_grace: Duration,
    /// How long a payload ClusterOperator may be updating versions before
    /// `Failing=Unknown/SlowClusterOperator` (30 min).
    pub slow_update: Duration,
}

impl CvoTiming {
    /// Released CVOs (`pkg/cvo/upgradeable.go` `defaultUpgradeableCheckIntervals`).
    #[must_use]
    pub fn released() -> Self {
        Self {
            upgradeable_cache: Duration::from_secs(120),
            after_refusal_recheck: Duration::from_secs(15),
            after_refusal_window: Duration::from_secs(120),
            retry_refused: true,
            reasons: ReasonFormat::Released,
            degraded_grace: Duration::from_secs(40 * 60),
            slow_update: Duration::from_secs(30 * 60),
        }
    }

    /// Newer CVOs (`pkg/risk`): Upgradeable recomputed on every sync.
    #[must_use]
    pub fn newer() -> Self {
        Self {
            upgradeable_cache: Duration::ZERO,
            after_refusal_recheck: Duration::ZERO,
            after_refusal_window: Duration::ZERO,
            reasons: ReasonFormat::Newer,
            ..Self::released()
        }
    }

    /// Not a real CVO: what [`Cvo::install`] uses so that its historical callers keep their
    /// semantics (Upgradeable read live at every request and sync, a refusal never retried,
    /// released wording).
    #[must_use]
    pub fn immediate() -> Self {
        Self {
            upgradeable_cache: Duration::ZERO,
            after_refusal_recheck: Duration::ZERO,
            after_refusal_window: Duration::ZERO,
            retry_refused: false,
            ..Self::released()
        }
    }

    /// How long a computed Upgradeable may be reused given this status: the shorter recheck
    /// while a precondition refusal is recent (`throttlePeriod` in `pkg/cvo/upgradeable.go`).
    #[must_use]
    pub fn throttle(&self, status: &ClusterVersionStatus) -> Duration {
        let recent_refusal = find(&status.conditions, "ReleaseAccepted").is_some_and(|c| {
            c.status == "False"
                && c.reason.as_deref() == Some("PreconditionChecks")
                && seconds_since(&c.last_transition_time) < self.after_refusal_window.as_secs_f64()
        });
        if recent_refusal {
            self.after_refusal_recheck
        } else {
            self.upgradeable_cache
        }
    }
}

/// What kind of update a version change is, as the CVO's `UpdateType` classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    /// Same major.minor, higher version: never blocked by Upgradeable.
    Patch,
    /// Same major, higher minor: blocked by any `Upgradeable=False`.
    Minor,
    /// Higher major: blocked by any `Upgradeable=False`.
    Major,
    /// Lower version: only to the previous release within the z-stream.
    Rollback,
    /// The version the cluster is already heading to.
    Same,
}

impl UpdateKind {
    /// Classifies `from` → `to` by semver precedence.
    #[must_use]
    pub fn of(from: &Version, to: &Version) -> Self {
        match to.cmp_precedence(from) {
            std::cmp::Ordering::Equal => Self::Same,
            std::cmp::Ordering::Less => Self::Rollback,
            std::cmp::Ordering::Greater if to.major > from.major => Self::Major,
            std::cmp::Ordering::Greater if to.minor > from.minor => Self::Minor,
            std::cmp::Ordering::Greater => Self::Patch,
        }
    }
}

impl fmt::Display for UpdateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Patch => "patch",
            Self::Minor => "minor",
            Self::Major => "major",
            Self::Rollback => "rollback",
            Self::Same => "no-op",
        })
    }
}

/// Why the simulated CVO refused something, or could not do it.
#[derive(Debug, thiserror::Error)]
pub enum CvoError {
    /// A precondition failed: the CVO reports `ReleaseAccepted=False` with this message and
    /// keeps running the current release. `reason` is the first blocking precondition's reason
    /// (Rollback, then GiantHop, then Upgradeable: e.g. the ClusterVersion's Upgradeable
    /// reason), `message` the CVO's summary of every failure.
    #[error("update to {version} refused (ReleaseAccepted=False, {reason}): {message}")]
    Refused {
        version: String,
        reason: String,
        message: String,
    },
    /// A version that is not a semantic version.
    #[error("{value:?} is not a release version: {reason}")]
    BadVersion { value: String, reason: String },
    /// No update is in flight, or the ClusterVersion does not exist.
    #[error("{0}")]
    State(String),
    /// The update did not complete in time; `waiting` says on what.
    #[error("update to {version} did not complete within {seconds}s; waiting on: {}", waiting.join("; "))]
    Timeout {
        version: String,
        seconds: u64,
        waiting: Vec<String>,
    },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl CvoError {
    /// The `ReleaseAccepted=False` reason of a refusal, if this is one.
    #[must_use]
    pub fn refusal_reason(&self) -> Option<&str> {
        match self {
            Self::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }

    fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube { source: kube::Error::Api(s), .. } if s.code == 409)
    }
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CvoError {
    let what = what.into();
    move |source| CvoError::Kube { what, source }
}

/// Where an update stands after [`Cvo::try_complete`] or [`Cvo::sync`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No update in flight: the cluster runs this version.
    Steady(String),
    /// The update to this version just completed (or had completed).
    Completed(String),
    /// Still applying: one line per payload ClusterOperator not done yet (empty in the sync
    /// that accepted the update: completion is checked from the next sync on).
    Waiting(Vec<String>),
}

/// What became of a requested update (`spec.desiredUpdate`) in a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// The update started (or the request is what the cluster already heads to, `Same`).
    /// `accepted_risks` is the precondition summary `force` (or a non-blocking warning) let
    /// through, as recorded in `history[0].acceptedRisks`.
    Accepted {
        kind: UpdateKind,
        accepted_risks: Option<String>,
    },
    /// Refused (`ReleaseAccepted=False`): the request stays in `spec.desiredUpdate` and every
    /// sync retries it. `reason` as in [`CvoError::Refused`].
    Pending { reason: String, message: String },
}

/// What one [`Cvo::sync`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Synced {
    /// The admission of a request that differs from `status.desired`, if there was one.
    pub request: Option<Admission>,
    /// Where the cluster stands after the sync.
    pub progress: Progress,
    /// `Failing=True` as written (reason, message); `None` when Failing is False or Unknown.
    pub failing: Option<(String, String)>,
}

/// How an unhealthy payload ClusterOperator affects the update (`UpdateEffect` in
/// `pkg/cvo/internal/operatorstatus.go`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IssueEffect {
    /// Not available: a failure at once.
    Fail,
    /// Degraded: progress for [`CvoTiming::degraded_grace`], then a failure.
    FailAfterInterval,
    /// Updating versions: progress (slow after [`CvoTiming::slow_update`]).
    None,
}

/// Why a payload ClusterOperator is not done, in the CVO's words.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorIssue {
    pub operator: String,
    /// `ClusterOperatorNotAvailable`, `ClusterOperatorDegraded` or `ClusterOperatorUpdating`.
    pub reason: &'static str,
    /// "Cluster operator X is not available", "… is degraded", "… is updating versions".
    pub message: String,
    pub effect: IssueEffect,
}

/// The CVO's `checkOperatorHealth` for one payload ClusterOperator, in its order: Available,
/// then Degraded (explicitly False; missing counts as degraded), then `versions[operator]`
/// equal to `target`. `None` when the operator is done (`pkg/cvo/internal/operatorstatus.go`).
#[must_use]
pub fn check_operator_health(
    name: &str,
    status: &ClusterOperatorStatus,
    target: &str,
) -> Option<OperatorIssue> {
    let issue = |reason, message: String, effect| {
        Some(OperatorIssue {
            operator: name.to_owned(),
            reason,
            message,
            effect,
        })
    };
    if find(&status.conditions, "Available").is_none_or(|c| c.status != "True") {
        return issue(
            "ClusterOperatorNotAvailable",
            format!("Cluster operator {name} is not available"),
            IssueEffect::Fail,
        );
    }
    if find(&status.conditions, "Degraded").is_none_or(|c| c.status != "False") {
        return issue(
            "ClusterOperatorDegraded",
            format!("Cluster operator {name} is degraded"),
            IssueEffect::FailAfterInterval,
        );
    }
    let version = status
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.as_str());
    if version != Some(target) {
        return issue(
            "ClusterOperatorUpdating",
            format!("Cluster operator {name} is updating versions"),
            IssueEffect::None,
        );
    }
    None
}

/// The simulator's original completion check for one payload ClusterOperator, used by
/// [`Cvo::try_complete`]: `None` when done with `target`, else the reason and message of what
/// is missing. Checked versions first, then Available, then Degraded (explicitly False; missing
/// counts as degraded): *not* the CVO's order, which is [`check_operator_health`]'s. Kept as
/// it was for its callers.
#[must_use]
pub fn operator_health(
    name: &str,
    status: &ClusterOperatorStatus,
    target: &str,
) -> Option<(&'static str, String)> {
    let version = status
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.as_str());
    if version != Some(target) {
        let now = version.unwrap_or("no operator version");
        return Some((
            "ClusterOperatorUpdating",
            format!("Cluster operator {name} is updating versions ({now}, want {target})"),
        ));
    }
    let state = |t: &str| {
        find(&status.conditions, t)
            .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
    };
    match state("Available") {
        Some((s, _)) if s == "True" => {}
        other => {
            let why = other.map_or_else(
                || "no Available condition".to_owned(),
                |(s, m)| format!("Available={s}: {m}"),
            );
            return Some((
                "ClusterOperatorNotAvailable",
                format!("Cluster operator {name} is not available ({why})"),
            ));
        }
    }
    match state("Degraded") {
        Some((s, _)) if s == "False" => None,
        Some((s, m)) => Some((
            "ClusterOperatorDegraded",
            format!("Cluster operator {name} is degraded (Degraded={s}: {m})"),
        )),
        None => Some((
            "ClusterOperatorDegraded",
            format!(
                "Cluster operator {name} is degraded (no Degraded condition: the CVO counts it as degraded)"
            ),
        )),
    }
}

/// A computed Upgradeable and when: `None` condition = upgradeable (no condition written).
#[derive(Debug, Clone)]
struct Cached {
    at: Instant,
    condition: Option<(String, String)>,
}

/// What the simulated CVO keeps in memory between syncs, as the real one does.
#[derive(Debug, Default)]
struct SimState {
    upgradeable: Option<Cached>,
    /// When each payload ClusterOperator was first seen unfinished in the current update
    /// (`COUpdateStartTimes` in `pkg/payload`), cleared once it is done.
    started: BTreeMap<String, Instant>,
    /// `history[].acceptedRisks` by (version, startedTime): the typed view drops the field.
    accepted_risks: BTreeMap<(String, String), String>,
    /// The last refusal (version, reason, message), for a timing that does not retry.
    refused: Option<(String, String, String)>,
}

/// The simulated CVO of one cluster. Cheap to clone: clones share the CVO's memory (its
/// cached Upgradeable, when each operator started updating) and take turns to sync.
#[derive(Clone)]
pub struct Cvo {
    client: Client,
    payload: Vec<String>,
    timing: CvoTiming,
    state: Arc<Mutex<SimState>>,
}

impl fmt::Debug for Cvo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cvo")
            .field("payload", &self.payload)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl Cvo {
    /// Creates ClusterVersion `version` as an installed cluster at `version`: one `Completed`
    /// history entry, `desired` = it, Available=True, Progressing=False, Failing=False.
    /// `payload` names the ClusterOperators of the release payload, the only ones an update
    /// waits for (e.g. `["platform-operators-aggregated"]`). Uses [`CvoTiming::immediate`]
    /// (see the module docs); [`Cvo::install_with`] chooses the timing.
    ///
    /// # Errors
    /// A bad version, or the API refusing the object (e.g. it already exists).
    pub async fn install(
        client: Client,
        version: &str,
        payload: &[&str],
    ) -> Result<Self, CvoError> {
        Self::install_with(client, version, payload, CvoTiming::immediate()).await
    }

    /// [`Cvo::install`] with the CVO's timing and wording.
    ///
    /// # Errors
    /// As [`Cvo::install`].
    pub async fn install_with(
        client: Client,
        version: &str,
        payload: &[&str],
        timing: CvoTiming,
    ) -> Result<Self, CvoError> {
        parse(version)?;
        let api: Api<ClusterVersion> = Api::all(client.clone());
        let spec = ClusterVersionSpec {
            cluster_id: CLUSTER_ID.to_owned(),
            ..ClusterVersionSpec::default()
        };
        let created = api
            .create(
                &PostParams::default(),
                &ClusterVersion::new(CLUSTER_VERSION_NAME, spec),
            )
            .await
            .map_err(kube_err("creating ClusterVersion version"))?;
        let now = now();
        let mut cv = created;
        cv.status = Some(ClusterVersionStatus {
            desired: release(version),
            history: vec![UpdateHistory {
                state: "Completed".into(),
                started_time: now.clone(),
                completion_time: Some(now.clone()),
                version: version.to_owned(),
                image: release(version).image,
                verified: false,
            }],
            observed_generation: cv.metadata.generation.unwrap_or(1),
            version_hash: version_hash(version),
            conditions: Vec::new(),
            available_updates: None,
        });
        let cvo = Self {
            client,
            payload: payload.iter().map(|s| (*s).to_owned()).collect(),
            timing,
            state: Arc::new(Mutex::new(SimState::default())),
        };
        let status = cv.status.get_or_insert_with(ClusterVersionStatus::default);
        set(
            status,
            condition(
                "Available",
                "True",
                None,
                &format!("Done applying {version}"),
            ),
        );
        set(
            status,
            condition(
                "Progressing",
                "False",
                None,
                &format!("Cluster version is {version}"),
            ),
        );
        set(status, condition("Failing", "False", None, ""));
        set(
            status,
            condition(
                "ReleaseAccepted",
                "True",
                Some("PayloadLoaded"),
                &payload_loaded(version),
            ),
        );
        cvo.write(&cv, &SimState::default()).await?;
        Ok(cvo)
    }

    /// The payload ClusterOperators this CVO waits for.
    #[must_use]
    pub fn payload(&self) -> &[String] {
        &self.payload
    }

    /// The timing and wording this CVO follows.
    #[must_use]
    pub fn timing(&self) -> &CvoTiming {
        &self.timing
    }

    /// The ClusterVersion as stored now.
    ///
    /// # Errors
    /// When it cannot be read.
    pub async fn cluster_version(&self) -> Result<ClusterVersion, CvoError> {
        Api::<ClusterVersion>::all(self.client.clone())
            .get(CLUSTER_VERSION_NAME)
            .await
            .map_err(kube_err("reading ClusterVersion version"))
    }

    /// The version of the newest `Completed` history entry: what the cluster runs.
    ///
    /// # Errors
    /// When the ClusterVersion cannot be read or has no completed entry.
    pub async fn current_version(&self) -> Result<String, CvoError> {
        let cv = self.cluster_version().await?;
        completed_version(&cv)
            .ok_or_else(|| CvoError::State("ClusterVersion has no Completed history entry".into()))
    }

    /// `history[0].acceptedRisks` as stored (what `force`, or a precondition warning, let
    /// through when the newest update was accepted).
    ///
    /// # Errors
    /// When the ClusterVersion cannot be read.
    pub async fn accepted_risks(&self) -> Result<Option<String>, CvoError> {
        let cv = dynamic_api(&self.client)
            .get(CLUSTER_VERSION_NAME)
            .await
            .map_err(kube_err("reading ClusterVersion version"))?;
        Ok(cv
            .data
            .pointer("/status/history/0/acceptedRisks")
            .and_then(Value::as_str)
            .map(str::to_owned))
    }

    /// What `oc adm upgrade --to VERSION` (with `--force` when `force`) does: writes
    /// `spec.desiredUpdate`, then the CVO syncs at once (its informer sees the change). The
    /// request is recorded whatever the outcome: [`Admission::Pending`] means
    /// `ReleaseAccepted=False` and the request stays, retried by every later [`Cvo::sync`]
    /// (with a timing that retries). Any direction is sent to the CVO: a lower version meets
    /// the Rollback precondition.
    ///
    /// # Errors
    /// A bad version, or the API failing.
    pub async fn request_update(&self, to: &str, force: bool) -> Result<Admission, CvoError> {
        parse(to)?;
        let mut state = self.state.lock().await;
        Api::<ClusterVersion>::all(self.client.clone())
            .patch(
                CLUSTER_VERSION_NAME,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"desiredUpdate": {
                    "version": to, "image": release(to).image, "force": force
                }}})),
            )
            .await
            .map_err(kube_err("writing ClusterVersion spec.desiredUpdate"))?;
        let synced = self.sync_retrying(&mut state, true).await?;
        synced.request.ok_or_else(|| {
            CvoError::State(format!(
                "the sync after requesting {to} did not consider the request"
            ))
        })
    }

    /// What `oc adm upgrade --to VERSION` asks for, with a refusal returned as an error (the
    /// historical API: see the module docs). A lower version is refused here without writing
    /// anything (use [`Cvo::rollback`]); the version the cluster already heads to is `Same`.
    /// Otherwise [`Cvo::request_update`]: on acceptance `status.desired` changes, a `Partial`
    /// history entry is pushed (closing a superseded one) and `Progressing=True` "Working
    /// towards VERSION".
    ///
    /// # Errors
    /// [`CvoError::Refused`] when a precondition fails (also written to the ClusterVersion as
    /// `ReleaseAccepted=False`; the request stays in `spec.desiredUpdate`).
    pub async fn start_update(&self, to: &str) -> Result<UpdateKind, CvoError> {
        let target = parse(to)?;
        let desired = self.desired_version().await?;
        match UpdateKind::of(&parse(&desired)?, &target) {
            UpdateKind::Same => return Ok(UpdateKind::Same),
            UpdateKind::Rollback => {
                return Err(CvoError::Refused {
                    version: to.to_owned(),
                    reason: "LowDesiredVersion".into(),
                    message: format!(
                        "{to} is lower than the current target {desired}; use a rollback (z-stream only)"
                    ),
                });
            }
            _ => {}
        }
        match self.request_update(to, false).await? {
            Admission::Accepted { kind, .. } => Ok(kind),
            Admission::Pending { reason, message } => Err(CvoError::Refused {
                version: to.to_owned(),
                reason,
                message,
            }),
        }
    }

    /// A rollback: [`Cvo::request_update`] to a version below `status.desired`, which the
    /// Rollback precondition allows only to the previous history entry (the first whose version
    /// differs from `status.desired`, whatever its state) within the z-stream. Upgradeable is
    /// not consulted. A version not below `status.desired` is refused here, writing nothing.
    ///
    /// # Errors
    /// [`CvoError::Refused`] (`LowDesiredVersion`) outside those limits.
    pub async fn rollback(&self, to: &str) -> Result<(), CvoError> {
        let target = parse(to)?;
        let desired = self.desired_version().await?;
        if UpdateKind::of(&parse(&desired)?, &target) != UpdateKind::Rollback {
            return Err(CvoError::Refused {
                version: to.to_owned(),
                reason: "LowDesiredVersion".into(),
                message: format!("{to} is not lower than the current target {desired}"),
            });
        }
        match self.request_update(to, false).await? {
            Admission::Accepted { .. } => Ok(()),
            Admission::Pending { reason, message } => Err(CvoError::Refused {
                version: to.to_owned(),
                reason,
                message,
            }),
        }
    }

    /// One iteration of the CVO's sync loop: refresh the cached Upgradeable when the timing
    /// allows; admit (or refuse again) a requested update that differs from `status.desired`;
    /// otherwise progress or complete the update in flight, or, in steady state, check the
    /// payload ClusterOperators and set `Failing`. Writes the status only when it changed.
    ///
    /// # Errors
    /// When the API cannot be read or written.
    pub async fn sync(&self) -> Result<Synced, CvoError> {
        let mut state = self.state.lock().await;
        self.sync_retrying(&mut state, false).await
    }

    /// Runs [`Cvo::sync`] now and then every `every` until the returned loop is stopped or
    /// dropped: the CVO's own loop, for tests that let time pass.
    #[must_use]
    pub fn spawn_sync_loop(&self, every: Duration) -> SyncLoop {
        let token = CancellationToken::new();
        let syncs = Arc::new(AtomicU64::new(0));
        let errors = Arc::new(std::sync::Mutex::new(Vec::new()));
        let cvo = self.clone();
        let (stop, count, seen) = (token.clone(), syncs.clone(), errors.clone());
        let handle = tokio::spawn(async move {
            loop {
                match cvo.sync().await {
                    Ok(_) => {
                        count.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(err) => seen
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(err.to_string()),
                }
                tokio::select! {
                    () = stop.cancelled() => return,
                    () = tokio::time::sleep(every) => {}
                }
            }
        });
        SyncLoop {
            token,
            handle: Some(handle),
            syncs,
            errors,
        }
    }

    /// The simulator's original completion pass (kept for its callers; [`Cvo::sync`] is the
    /// CVO's): when every payload ClusterOperator is done, marks the update `Completed` and
    /// sets Progressing=False "Cluster version is X"; otherwise refreshes the Progressing
    /// message with what it waits on, in [`operator_health`]'s order (versions first). Never
    /// sets `Failing`, checks nothing in steady state, never retries a refused request.
    ///
    /// # Errors
    /// When the API cannot be read or written.
    pub async fn try_complete(&self) -> Result<Progress, CvoError> {
        let mut state = self.state.lock().await;
        let mut cv = self.cluster_version().await?;
        let Some(status) = cv.status.as_mut() else {
            return Err(CvoError::State(
                "ClusterVersion version has no status".into(),
            ));
        };
        let before = status.clone();
        self.refresh_upgradeable(&mut state, status).await?;
        let target = status.desired.version.clone();
        if !in_flight(status) {
            if *status != before {
                self.write(&cv, &state).await?;
            }
            return Ok(Progress::Steady(target));
        }
        let waiting = self.waiting_on(&target).await?;
        if waiting.is_empty() {
            complete(status, &target);
            state.started.clear();
            self.write(&cv, &state).await?;
            return Ok(Progress::Completed(target));
        }
        let (reason, lines): (Vec<&str>, Vec<String>) =
            waiting.iter().map(|(r, l)| (*r, l.clone())).unzip();
        let reason = if reason.iter().all(|r| *r == reason[0]) {
            reason[0]
        } else {
            "MultipleErrors"
        };
        let message = format!("Working towards {target}: {}", lines.join("; "));
        set(
            status,
            condition("Progressing", "True", Some(reason), &message),
        );
        if *status != before {
            self.write(&cv, &state).await?;
        }
        Ok(Progress::Waiting(lines))
    }

    /// Calls [`Cvo::try_complete`] every 500 ms until the update completes.
    ///
    /// # Errors
    /// [`CvoError::Timeout`] naming what the update still waits on.
    pub async fn wait_completed(&self, timeout: Duration) -> Result<String, CvoError> {
        let started = Instant::now();
        loop {
            match self.try_complete().await? {
                Progress::Completed(version) | Progress::Steady(version) => return Ok(version),
                Progress::Waiting(waiting) if started.elapsed() >= timeout => {
                    let version = self.desired_version().await?;
                    return Err(CvoError::Timeout {
                        version,
                        seconds: timeout.as_secs(),
                        waiting,
                    });
                }
                Progress::Waiting(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Every ClusterOperator reporting `Upgradeable=False`, as `(name, reason, message)`,
    /// sorted by name, read live: what a fresh Upgradeable computation starts from.
    ///
    /// # Errors
    /// When ClusterOperators cannot be listed.
    pub async fn not_upgradeable(&self) -> Result<Vec<(String, String, String)>, CvoError> {
        let cos = Api::<ClusterOperator>::all(self.client.clone())
            .list(&Default::default())
            .await
            .map_err(kube_err("listing ClusterOperators"))?;
        let mut blockers: Vec<(String, String, String)> = cos
            .items
            .iter()
            .filter_map(|co| {
                let c = find(&co.status.as_ref()?.conditions, "Upgradeable")?;
                (c.status == "False").then(|| {
                    let name = co.metadata.name.clone().unwrap_or_default();
                    (
                        name,
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default(),
                    )
                })
            })
            .collect();
        blockers.sort();
        Ok(blockers)
    }

    async fn desired_version(&self) -> Result<String, CvoError> {
        Ok(self
            .cluster_version()
            .await?
            .status
            .map(|s| s.desired.version)
            .unwrap_or_default())
    }

    /// [`Cvo::sync_once`], again on a write conflict.
    async fn sync_retrying(
        &self,
        state: &mut SimState,
        explicit: bool,
    ) -> Result<Synced, CvoError> {
        let mut attempt = 0;
        loop {
            match self.sync_once(state, explicit).await {
                Err(err) if err.is_conflict() && attempt < 3 => attempt += 1,
                other => return other,
            }
        }
    }

    /// One sync (see [`Cvo::sync`]); `explicit`: right after an admin's request, which is
    /// always evaluated.
    async fn sync_once(&self, state: &mut SimState, explicit: bool) -> Result<Synced, CvoError> {
        let mut cv = self.cluster_version().await?;
        let generation = cv.metadata.generation.unwrap_or(1);
        let requested = cv
            .spec
            .desired_update
            .clone()
            .and_then(|u| Some((u.version?, u.force.unwrap_or(false))));
        let Some(status) = cv.status.as_mut() else {
            return Err(CvoError::State(
                "ClusterVersion version has no status".into(),
            ));
        };
        let before = status.clone();
        self.refresh_upgradeable(state, status).await?;
        let mut admission = None;
        let mut accepted = false;
        if let Some((to, force)) = requested {
            if to != status.desired.version {
                let final_refusal = !explicit
                    && !self.timing.retry_refused
                    && state.refused.as_ref().is_some_and(|r| r.0 == to);
                admission = if final_refusal {
                    state
                        .refused
                        .clone()
                        .map(|(_, reason, message)| Admission::Pending { reason, message })
                } else {
                    let outcome = admit(state, status, &to, force)?;
                    accepted = matches!(outcome, Admission::Accepted { .. });
                    Some(outcome)
                };
            } else {
                // The request is where the cluster heads (withdrawn, or just accepted): the
                // loaded payload is the desired one.
                if find(&status.conditions, "ReleaseAccepted").is_some_and(|c| c.status != "True") {
                    set(
                        status,
                        condition(
                            "ReleaseAccepted",
                            "True",
                            Some("PayloadLoaded"),
                            &payload_loaded(&to),
                        ),
                    );
                }
                state.refused = None;
                if explicit {
                    admission = Some(Admission::Accepted {
                        kind: UpdateKind::Same,
                        accepted_risks: None,
                    });
                }
            }
        }
        let (progress, failing) = if accepted {
            (Progress::Waiting(Vec::new()), None)
        } else if in_flight(status) {
            self.progress_update(state, status).await?
        } else {
            self.reconcile(state, status).await?
        };
        status.observed_generation = generation;
        if *status != before {
            self.write(&cv, state).await?;
        }
        Ok(Synced {
            request: admission,
            progress,
            failing,
        })
    }

    /// An update in flight: complete it, or say what it waits on (rule 10; `pkg/cvo/status.go`
    /// `updateClusterVersionStatus` and `convertErrorToProgressing`).
    async fn progress_update(
        &self,
        state: &mut SimState,
        status: &mut ClusterVersionStatus,
    ) -> Result<(Progress, Option<(String, String)>), CvoError> {
        let target = status.desired.version.clone();
        let issues = self.issues(&target).await?;
        if issues.is_empty() {
            complete(status, &target);
            state.started.clear();
            return Ok((Progress::Completed(target), None));
        }
        let now = Instant::now();
        state
            .started
            .retain(|name, _| issues.iter().any(|i| &i.operator == name));
        for issue in &issues {
            state.started.entry(issue.operator.clone()).or_insert(now);
        }
        let age = |issue: &OperatorIssue| {
            state
                .started
                .get(&issue.operator)
                .map_or(Duration::ZERO, |t| now.duration_since(*t))
        };
        let (mut failed, mut exceeded, mut within_grace, mut slow, mut updating) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for issue in &issues {
            match issue.effect {
                IssueEffect::Fail => failed.push(issue),
                IssueEffect::FailAfterInterval if age(issue) >= self.timing.degraded_grace => {
                    exceeded.push(issue);
                }
                IssueEffect::FailAfterInterval => within_grace.push(issue),
                IssueEffect::None if age(issue) >= self.timing.slow_update => slow.push(issue),
                IssueEffect::None => updating.push(issue),
            }
        }
        let names = |list: &[&OperatorIssue]| {
            list.iter()
                .map(|i| i.operator.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let lines: Vec<String> = issues.iter().map(|i| i.message.clone()).collect();
        let failing_issues: Vec<&OperatorIssue> =
            failed.iter().chain(exceeded.iter()).copied().collect();
        if !failing_issues.is_empty() {
            let (reason, message) = summarize_issues(&failing_issues);
            let detail = if failed.is_empty() {
                format!(
                    "wait has exceeded 40 minutes for these operators: {}",
                    names(&exceeded)
                )
            } else {
                summary_for_reason(&reason, &failing_issues[0].operator)
            };
            set(
                status,
                condition("Failing", "True", Some(&reason), &message),
            );
            set(
                status,
                condition(
                    "Progressing",
                    "True",
                    Some(&reason),
                    &format!("Unable to apply {target}: {detail}"),
                ),
            );
            return Ok((Progress::Waiting(lines), Some((reason, message))));
        }
        let all: Vec<&OperatorIssue> = issues.iter().collect();
        let (reason, _) = summarize_issues(&all);
        let mut parts = Vec::new();
        if !within_grace.is_empty() {
            parts.push(format!(
                "waiting up to 40 minutes on {}",
                names(&within_grace)
            ));
        }
        if !slow.is_empty() {
            parts.push(format!(
                "waiting on {} over 30 minutes which is longer than expected",
                names(&slow)
            ));
        }
        if !updating.is_empty() {
            parts.push(format!("waiting on {}", names(&updating)));
        }
        let progress = parts.join(", ");
        if slow.is_empty() {
            set(status, condition("Failing", "False", None, ""));
        } else {
            set(
                status,
                condition("Failing", "Unknown", Some("SlowClusterOperator"), &progress),
            );
        }
        set(
            status,
            condition(
                "Progressing",
                "True",
                Some(&reason),
                &format!("Working towards {target}: {progress}"),
            ),
        );
        Ok((Progress::Waiting(lines), None))
    }

    /// Steady state: the CVO keeps reconciling the payload and reports any payload
    /// ClusterOperator not done as `Failing=True` (rule 11; `pkg/cvo/status.go`, the
    /// reconciling state of `pkg/cvo/sync_worker.go`).
    async fn reconcile(
        &self,
        state: &mut SimState,
        status: &mut ClusterVersionStatus,
    ) -> Result<(Progress, Option<(String, String)>), CvoError> {
        state.started.clear();
        let version = status.desired.version.clone();
        let issues = self.issues(&version).await?;
        if issues.is_empty() {
            set(status, condition("Failing", "False", None, ""));
            set(
                status,
                condition(
                    "Progressing",
                    "False",
                    None,
                    &format!("Cluster version is {version}"),
                ),
            );
            return Ok((Progress::Steady(version), None));
        }
        let all: Vec<&OperatorIssue> = issues.iter().collect();
        let (reason, message) = summarize_issues(&all);
        set(
            status,
            condition("Failing", "True", Some(&reason), &message),
        );
        set(
            status,
            condition(
                "Progressing",
                "False",
                Some(&reason),
                &format!(
                    "Error while reconciling {version}: {}",
                    summary_for_reason(&reason, &issues[0].operator)
                ),
            ),
        );
        Ok((Progress::Steady(version), Some((reason, message))))
    }

    /// The payload ClusterOperators not done with `target`, in the CVO's order of checks.
    async fn issues(&self, target: &str) -> Result<Vec<OperatorIssue>, CvoError> {
        let api: Api<ClusterOperator> = Api::all(self.client.clone());
        let mut issues = Vec::new();
        for name in &self.payload {
            let co = api
                .get_opt(name)
                .await
                .map_err(kube_err(format!("reading ClusterOperator {name}")))?;
            let status = co.and_then(|co| co.status).unwrap_or_default();
            issues.extend(check_operator_health(name, &status, target));
        }
        Ok(issues)
    }

    /// The payload ClusterOperators not done with `target`, as `(reason, message)` in
    /// [`operator_health`]'s order (for [`Cvo::try_complete`]).
    async fn waiting_on(&self, target: &str) -> Result<Vec<(&'static str, String)>, CvoError> {
        let api: Api<ClusterOperator> = Api::all(self.client.clone());
        let mut waiting = Vec::new();
        for name in &self.payload {
            let co = api
                .get_opt(name)
                .await
                .map_err(kube_err(format!("reading ClusterOperator {name}")))?;
            let status = co.and_then(|co| co.status).unwrap_or_default();
            if let Some(line) = operator_health(name, &status, target) {
                waiting.push(line);
            }
        }
        Ok(waiting)
    }

    /// Recomputes Upgradeable when the cached one is older than the timing allows, and writes
    /// the cached one onto the status (rules 4–6; `pkg/cvo/upgradeable.go` `syncUpgradeable`).
    async fn refresh_upgradeable(
        &self,
        state: &mut SimState,
        status: &mut ClusterVersionStatus,
    ) -> Result<(), CvoError> {
        let throttle = self.timing.throttle(status);
        let fresh = state
            .upgradeable
            .as_ref()
            .is_some_and(|c| c.at.elapsed() < throttle);
        if !fresh {
            let updating =
                find(&status.conditions, "Progressing").is_some_and(|c| c.status == "True");
            let blockers = self.not_upgradeable().await?;
            state.upgradeable = Some(Cached {
                at: Instant::now(),
                condition: upgradeable_condition(self.timing.reasons, &blockers, updating),
            });
        }
        match state.upgradeable.as_ref().and_then(|c| c.condition.clone()) {
            Some((reason, message)) => set(
                status,
                condition("Upgradeable", "False", Some(&reason), &message),
            ),
            None => status.conditions.retain(|c| c.type_ != "Upgradeable"),
        }
        Ok(())
    }

    /// Replaces the whole status (PUT keeps the null `completionTime` the schema requires),
    /// with the `acceptedRisks` the typed view does not carry.
    async fn write(&self, cv: &ClusterVersion, state: &SimState) -> Result<(), CvoError> {
        let mut value = serde_json::to_value(cv)
            .map_err(|e| CvoError::State(format!("serialising ClusterVersion: {e}")))?;
        if let Some(history) = value
            .pointer_mut("/status/history")
            .and_then(Value::as_array_mut)
        {
            for entry in history {
                let key = (
                    entry["version"].as_str().unwrap_or_default().to_owned(),
                    entry["startedTime"].to_string(),
                );
                if let Some(risks) = state.accepted_risks.get(&key) {
                    entry["acceptedRisks"] = Value::String(risks.clone());
                }
            }
        }
        let object: DynamicObject = serde_json::from_value(value)
            .map_err(|e| CvoError::State(format!("serialising ClusterVersion: {e}")))?;
        dynamic_api(&self.client)
            .replace_status(CLUSTER_VERSION_NAME, &PostParams::default(), &object)
            .await
            .map_err(kube_err("writing ClusterVersion status"))?;
        Ok(())
    }
}

/// A running [`Cvo::spawn_sync_loop`]; dropping it stops the loop after its current sync.
pub struct SyncLoop {
    token: CancellationToken,
    handle: Option<tokio::task::JoinHandle<()>>,
    syncs: Arc<AtomicU64>,
    errors: Arc<std::sync::Mutex<Vec<String>>>,
}

impl fmt::Debug for SyncLoop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SyncLoop")
            .field("syncs", &self.syncs())
            .finish_non_exhaustive()
    }
}

impl SyncLoop {
    /// How many syncs completed so far.
    #[must_use]
    pub fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::SeqCst)
    }

    /// The errors of failed syncs so far.
    #[must_use]
    pub fn errors(&self) -> Vec<String> {
        self.errors
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Stops the loop (after its current sync) and returns the errors it met.
    pub async fn stop(mut self) -> Vec<String> {
        self.token.cancel();
        if let Some(handle) = self.handle.take() {
            let _ = handle.await;
        }
        self.errors()
    }
}

impl Drop for SyncLoop {
    fn drop(&mut self) {
        self.token.cancel();
    }
}

/// A precondition failure (`precondition.Error`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct PreconditionFailure {
    name: &'static str,
    reason: String,
    message: String,
    warning: bool,
}

/// The summary of the failures (`precondition.Summarize`).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Summary {
    block: bool,
    reason: String,
    message: String,
}

/// Runs the preconditions the simulator models for a request to `to`, in the CVO's order
/// (Rollback, GiantHop, Upgradeable), against `status` (`status.desired` is "current").
fn preconditions(
    status: &ClusterVersionStatus,
    to: &str,
) -> Result<Vec<PreconditionFailure>, CvoError> {
    let current = parse(&status.desired.version)?;
    let target = parse(to)?;
    let mut failures = Vec::new();
    let fail = |name, reason: &str, message: String| PreconditionFailure {
        name,
        reason: reason.to_owned(),
        message,
        warning: false,
    };
    // pkg/payload/precondition/clusterversion/rollback.go
    if target.cmp_precedence(&current) == std::cmp::Ordering::Less {
        let rollback = "ClusterVersionRollback";
        let previous = status
            .history
            .iter()
            .find(|h| h.version != status.desired.version || h.image != status.desired.image);
        match previous.map(|h| (parse(&h.version), h.image.clone())) {
            Some((Ok(previous), image)) => {
                if target.cmp_precedence(&previous) != std::cmp::Ordering::Equal {
                    failures.push(fail(rollback, "LowDesiredVersion", format!(
                        "{target} is less than the current target {current}, and the only supported rollback is to the cluster's previous version {previous} ({image})"
                    )));
                } else if (previous.major, previous.minor) != (current.major, current.minor) {
                    failures.push(fail(rollback, "LowDesiredVersion", format!(
                        "{target} is less than the current target {current} and matches the cluster's previous version, but rollbacks that change major or minor versions are not recommended"
                    )));
                }
            }
            _ => failures.push(fail(
                rollback,
                "LowDesiredVersion",
                format!(
                    "{target} is less than the current target {current}, and the cluster has no previous Semantic Version"
                ),
            )),
        }
    }
    // pkg/payload/precondition/clusterversion/gianthop.go
    let gianthop = "ClusterVersionGiantHop";
    if target.major > current.major {
        if target.major == 5 && current.major == 4 {
            if target.minor != 0 {
                failures.push(fail(gianthop, "MajorVersionUpdate", format!(
                    "{target} has a larger major version than the current target {current} ({} > {}), and only updates within the current major version or to 5.0 are supported.",
                    target.major, current.major
                )));
            }
        } else {
            failures.push(fail(gianthop, "MajorVersionUpdate", format!(
                "{target} has a larger major version than the current target {current} ({} > {}), and only updates within the current major version are supported.",
                target.major, current.major
            )));
        }
    } else if target.minor > current.minor.saturating_add(1) {
        failures.push(fail(gianthop, "MultipleMinorVersionsUpdate", format!(
            "{target} is more than one minor version beyond the current target {current} ({}.{} > {}.({}+1)), and only updates within the current minor version or to the next minor version are supported.",
            target.major, target.minor, current.major, current.minor
        )));
    }
    // pkg/payload/precondition/clusterversion/upgradeable.go
    let upgradeable = "ClusterVersionUpgradeable";
    if let Some(up) = find(&status.conditions, "Upgradeable").filter(|c| c.status == "False") {
        let not_forward = target.cmp_precedence(&current) != std::cmp::Ordering::Greater;
        if not_forward || (target.major, target.minor) == (current.major, current.minor) {
            let completed = status
                .history
                .iter()
                .find(|h| h.state == "Completed")
                .or_else(|| status.history.last())
                .and_then(|h| parse(&h.version).ok());
            let progressing =
                find(&status.conditions, "Progressing").is_some_and(|c| c.status == "True");
            if let Some(completed) = completed.filter(|c| {
                progressing
                    && c.major == current.major
                    && c.minor < current.minor
                    && (target.major, target.minor) == (current.major, current.minor)
            }) {
                failures.push(PreconditionFailure {
                    name: upgradeable,
                    reason: "MinorVersionClusterUpgradeInProgress".into(),
                    message: format!(
                        "Retarget to {target} while a minor level upgrade from {completed} to {target} is in progress"
                    ),
                    warning: true,
                });
            }
        } else {
            failures.push(fail(
                upgradeable,
                up.reason.as_deref().unwrap_or_default(),
                up.message.clone().unwrap_or_default(),
            ));
        }
    }
    Ok(failures)
}

/// `precondition.Summarize`: `None` when nothing failed.
fn summarize_preconditions(failures: &[PreconditionFailure], force: bool) -> Option<Summary> {
    let first = failures.first()?;
    let lines: Vec<String> = failures
        .iter()
        .map(|f| {
            format!(
                "Precondition \"{}\" failed because of \"{}\": {}",
                f.name, f.reason, f.message
            )
        })
        .collect();
    let mut message = match lines.as_slice() {
        [one] => one.clone(),
        many => format!(
            "Multiple precondition checks failed:\n* {}",
            many.join("\n* ")
        ),
    };
    let mut warning = failures.iter().all(|f| f.warning);
    if force && !warning {
        message = format!("Forced through blocking failures: {message}");
        warning = true;
    }
    let reason = failures
        .iter()
        .find(|f| !f.warning)
        .unwrap_or(first)
        .reason
        .clone();
    Some(Summary {
        block: !warning,
        reason,
        message,
    })
}

/// The admission of a request to `to` against `status`: accept (pushing history) or refuse
/// (`pkg/cvo/sync_worker.go` `syncPayload`: the preconditions run only while a new payload is
/// loaded; `pkg/cvo/status.go` `mergeOperatorHistory` for the history).
fn admit(
    state: &mut SimState,
    status: &mut ClusterVersionStatus,
    to: &str,
    force: bool,
) -> Result<Admission, CvoError> {
    let kind = UpdateKind::of(&parse(&status.desired.version)?, &parse(to)?);
    let summary = summarize_preconditions(&preconditions(status, to)?, force);
    if let Some(Summary {
        block: true,
        reason,
        message,
    }) = summary
    {
        let text = format!(
            "Preconditions failed for payload loaded version=\"{to}\" image=\"{}\": {message}",
            release(to).image
        );
        set(
            status,
            condition(
                "ReleaseAccepted",
                "False",
                Some("PreconditionChecks"),
                &text,
            ),
        );
        state.refused = Some((to.to_owned(), reason.clone(), message.clone()));
        return Ok(Admission::Pending { reason, message });
    }
    let accepted_risks = summary.map(|s| s.message);
    let now = now();
    if let Some(open) = status
        .history
        .first_mut()
        .filter(|h| h.completion_time.is_none())
    {
        // A retarget closes the superseded entry; it stays Partial.
        open.completion_time = Some(now.clone());
    }
    status.history.insert(
        0,
        UpdateHistory {
            state: "Partial".into(),
            started_time: now.clone(),
            completion_time: None,
            version: to.to_owned(),
            image: release(to).image,
            verified: false,
        },
    );
    status.history.truncate(HISTORY_LIMIT);
    status.desired = release(to);
    set(
        status,
        condition(
            "ReleaseAccepted",
            "True",
            Some("PayloadLoaded"),
            &payload_loaded(to),
        ),
    );
    set(
        status,
        condition(
            "Progressing",
            "True",
            None,
            &format!("Working towards {to}"),
        ),
    );
    state.started.clear();
    state.refused = None;
    if let Some(risks) = &accepted_risks {
        let started = serde_json::to_value(&now).unwrap_or_default().to_string();
        state
            .accepted_risks
            .insert((to.to_owned(), started), risks.clone());
    }
    Ok(Admission::Accepted {
        kind,
        accepted_risks,
    })
}

/// Marks the update to `target` completed.
fn complete(status: &mut ClusterVersionStatus, target: &str) {
    let now = now();
    if let Some(entry) = status.history.first_mut() {
        entry.state = "Completed".into();
        entry.completion_time = Some(now);
    }
    status.version_hash = version_hash(target);
    set(
        status,
        condition(
            "Progressing",
            "False",
            None,
            &format!("Cluster version is {target}"),
        ),
    );
    set(
        status,
        condition(
            "Available",
            "True",
            None,
            &format!("Done applying {target}"),
        ),
    );
    set(status, condition("Failing", "False", None, ""));
}

fn in_flight(status: &ClusterVersionStatus) -> bool {
    status
        .history
        .first()
        .is_some_and(|h| h.state == "Partial" && h.completion_time.is_none())
}

/// The ClusterVersion's `Upgradeable=False` (reason, message), or `None` when upgradeable,
/// from every `Upgradeable=False` ClusterOperator `(name, reason, message)` and whether an
/// update is in progress (rules 4–6). Released: `pkg/cvo/upgradeable.go`
/// (`setUpgradeableConditions`, `clusterOperatorsUpgradeable`, the in-progress check); newer:
/// `pkg/risk/upgradeable/upgradeable.go`, `pkg/risk/updating/updating.go` and `pkg/cvo/status.go`
/// (`setUpgradeableCondition`).
#[must_use]
pub fn upgradeable_condition(
    format: ReasonFormat,
    blockers: &[(String, String, String)],
    updating: bool,
) -> Option<(String, String)> {
    match format {
        ReasonFormat::Released => {
            let mut failing: Vec<(String, String)> = Vec::new();
            failing.extend(upgradeable_summary(blockers));
            if updating {
                failing.push((
                    "UpdateInProgress".into(),
                    UPDATE_IN_PROGRESS_MESSAGE.to_owned(),
                ));
            }
            match failing.as_slice() {
                [] => None,
                [one] => Some(one.clone()),
                many => {
                    let reasons: Vec<&str> = many.iter().map(|(r, _)| r.as_str()).collect();
                    let messages: Vec<&str> = many.iter().map(|(_, m)| m.as_str()).collect();
                    Some((
                        "MultipleReasons".into(),
                        format!(
                            "Cluster should not be upgraded between minor or major versions for multiple reasons: {}\n* {}",
                            reasons.join(","),
                            messages.join("\n* ")
                        ),
                    ))
                }
            }
        }
        ReasonFormat::Newer => {
            let mut risks: Vec<(String, String)> = blockers
                .iter()
                .map(|(name, _, message)| {
                    (
                        format!("ClusterOperatorUpgradeable-{name}"),
                        message.clone(),
                    )
                })
                .collect();
            if updating {
                risks.push((
                    "ClusterVersionUpdating".into(),
                    format!("{UPDATE_IN_PROGRESS_MESSAGE}."),
                ));
            }
            risks.sort();
            match risks.as_slice() {
                [] => None,
                [(name, message)] => Some((
                    if valid_reason(name) {
                        name.clone()
                    } else {
                        "RiskNameNotCompatibleWithReasonProperty".into()
                    },
                    message.clone(),
                )),
                many => {
                    let messages: Vec<&str> = many.iter().map(|(_, m)| m.as_str()).collect();
                    Some((
                        "MultipleReasons".into(),
                        format!(
                            "Cluster should not be upgraded between minor or major versions for multiple reasons:\n* {}",
                            messages.join("\n* ")
                        ),
                    ))
                }
            }
        }
    }
}

/// Whether `reason` is a valid condition reason: `^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$`.
fn valid_reason(reason: &str) -> bool {
    let bytes = reason.as_bytes();
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b',' | b':');
    match bytes {
        [] => false,
        [first] => first.is_ascii_alphabetic(),
        [first, middle @ .., last] => {
            first.is_ascii_alphabetic()
                && middle.iter().all(inner)
                && (last.is_ascii_alphanumeric() || *last == b'_')
        }
    }
}

/// The released CVO's aggregation of `Upgradeable=False` ClusterOperators: a sole blocker keeps
/// its reason; several give `ClusterOperatorsNotUpgradeable` and a bulleted list.
fn upgradeable_summary(blockers: &[(String, String, String)]) -> Option<(String, String)> {
    match blockers {
        [] => None,
        [(name, reason, message)] => Some((
            if reason.is_empty() {
                "ClusterOperatorNotUpgradeable".into()
            } else {
                reason.clone()
            },
            format!(
                "Cluster operator {name} should not be upgraded between minor or major versions: {message}"
            ),
        )),
        many => {
            let lines: Vec<String> = many.iter().map(|(name, reason, message)| format!("* Cluster operator {name} should not be upgraded between minor or major versions: {reason}: {message}")).collect();
            Some((
                "ClusterOperatorsNotUpgradeable".into(),
                format!(
                    "Multiple cluster operators should not be upgraded between minor or major versions:\n{}",
                    lines.join("\n")
                ),
            ))
        }
    }
}

/// Several operators' errors as the sync worker summarises them (`pkg/cvo/sync_worker.go`,
/// `pkg/payload`; the multi-operator wording is approximate): one keeps its reason and
/// message; the same reason gives the plural ("Cluster operators a, b are degraded"); mixed
/// reasons give `MultipleErrors` and a bulleted list.
fn summarize_issues(issues: &[&OperatorIssue]) -> (String, String) {
    match issues {
        [] => (String::new(), String::new()),
        [one] => (one.reason.to_owned(), one.message.clone()),
        many if many.iter().all(|i| i.reason == many[0].reason) => {
            let names: Vec<&str> = many.iter().map(|i| i.operator.as_str()).collect();
            let (plural, verb) = match many[0].reason {
                "ClusterOperatorNotAvailable" => {
                    ("ClusterOperatorsNotAvailable", "are not available")
                }
                "ClusterOperatorDegraded" => ("ClusterOperatorsDegraded", "are degraded"),
                _ => ("ClusterOperatorsUpdating", "are updating versions"),
            };
            (
                plural.to_owned(),
                format!("Cluster operators {} {verb}", names.join(", ")),
            )
        }
        many => {
            let lines: Vec<&str> = many.iter().map(|i| i.message.as_str()).collect();
            (
                "MultipleErrors".into(),
                format!(
                    "Multiple errors are preventing progress:\n* {}",
                    lines.join("\n* ")
                ),
            )
        }
    }
}

/// `payload.SummaryForReason` (`pkg/payload`), for the cases the simulator produces.
fn summary_for_reason(reason: &str, name: &str) -> String {
    match reason {
        "ClusterOperatorDegraded" => format!("the cluster operator {name} is degraded"),
        "ClusterOperatorNotAvailable" => format!("the cluster operator {name} is not available"),
        "ClusterOperatorsNotAvailable" => "some cluster operators are not available".into(),
        other => format!("{name} has an unknown error: {other}"),
    }
}

/// Creates ClusterOperator `name` if needed and replaces its status: tests use it to play
/// payload operators (or any other operator that may block minor updates).
///
/// # Errors
/// When the API refuses the object or the status.
pub async fn write_cluster_operator(
    client: &Client,
    name: &str,
    status: ClusterOperatorStatus,
) -> Result<(), CvoError> {
    let api: Api<ClusterOperator> = Api::all(client.clone());
    let existing = match api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading ClusterOperator {name}")))?
    {
        Some(co) => co,
        None => api
            .create(
                &PostParams::default(),
                &ClusterOperator::new(name, ClusterOperatorSpec {}),
            )
            .await
            .map_err(kube_err(format!("creating ClusterOperator {name}")))?,
    };
    let mut co = existing;
    co.status = Some(status);
    api.replace_status(name, &PostParams::default(), &co)
        .await
        .map_err(kube_err(format!("writing ClusterOperator {name} status")))?;
    Ok(())
}

/// A ClusterOperator condition stamped now; `reason` may be absent (the schema allows it).
#[must_use]
pub fn condition(
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: &str,
) -> ClusterOperatorStatusCondition {
    ClusterOperatorStatusCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_transition_time: now(),
        reason: reason.map(str::to_owned),
        message: (!message.is_empty()).then(|| message.to_owned()),
    }
}

/// Sets a condition, keeping `lastTransitionTime` when the status does not change.
fn set(status: &mut ClusterVersionStatus, mut new: ClusterOperatorStatusCondition) {
    match status.conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => status.conditions.push(new),
    }
}

fn find<'a>(
    conditions: &'a [ClusterOperatorStatusCondition],
    type_: &str,
) -> Option<&'a ClusterOperatorStatusCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn completed_version(cv: &ClusterVersion) -> Option<String> {
    cv.status
        .as_ref()?
        .history
        .iter()
        .find(|h| h.state == "Completed")
        .map(|h| h.version.clone())
}

fn parse(version: &str) -> Result<Version, CvoError> {
    Version::parse(version.strip_prefix('v').unwrap_or(version)).map_err(|e| CvoError::BadVersion {
        value: version.to_owned(),
        reason: e.to_string(),
    })
}

/// A release with a stable fake payload image (the digest of the version).
fn release(version: &str) -> Release {
    Release {
        version: version.to_owned(),
        image: format!(
            "quay.io/openshift-release-dev/ocp-release@sha256:{}",
            hex::encode(Sha256::digest(version.as_bytes()))
        ),
    }
}

fn version_hash(version: &str) -> String {
    hex::encode(&Sha256::digest(format!("hash:{version}").as_bytes())[..8])
}

fn payload_loaded(version: &str) -> String {
    format!(
        "Payload loaded version=\"{version}\" image=\"{}\"",
        release(version).image
    )
}

fn dynamic_api(client: &Client) -> Api<DynamicObject> {
    Api::all_with(client.clone(), &ApiResource::erase::<ClusterVersion>(&()))
}

/// Now, at the second precision the API server stores.
fn now() -> Time {
    let seconds = jiff::Timestamp::now().as_second();
    Time(
        k8s_openapi::jiff::Timestamp::from_second(seconds)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

/// Seconds from `time` to now (second precision, as stored).
fn seconds_since(time: &Time) -> f64 {
    let then = time.0.as_second();
    let now = jiff::Timestamp::now().as_second();
    now.saturating_sub(then) as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use pom_api::openshift::OperandVersion;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn entry(state: &str, version: &str, open: bool) -> UpdateHistory {
        UpdateHistory {
            state: state.into(),
            started_time: now(),
            completion_time: (!open).then(now),
            version: version.into(),
            image: release(version).image,
            verified: false,
        }
    }

    fn cluster(desired: &str, history: Vec<UpdateHistory>) -> ClusterVersionStatus {
        let progressing = history.first().is_some_and(|h| h.completion_time.is_none());
        ClusterVersionStatus {
            desired: release(desired),
            history,
            conditions: vec![condition(
                "Progressing",
                if progressing { "True" } else { "False" },
                None,
                "",
            )],
            ..Default::default()
        }
    }

    fn reasons(status: &ClusterVersionStatus, to: &str) -> Vec<String> {
        preconditions(status, to)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|f| f.reason)
            .collect()
    }

    #[test]
    fn update_kinds_follow_the_cvo() {
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.16.4")),
            UpdateKind::Patch
        );
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.17.0")),
            UpdateKind::Minor
        );
        assert_eq!(UpdateKind::of(&v("4.22.3"), &v("5.0.0")), UpdateKind::Major);
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.16.2")),
            UpdateKind::Rollback
        );
        assert_eq!(UpdateKind::of(&v("4.16.3"), &v("4.16.3")), UpdateKind::Same);
    }

    #[test]
    fn health_checks_available_then_explicit_degraded_then_versions() {
        let mut status = ClusterOperatorStatus::default();
        let reason = |s: &ClusterOperatorStatus| {
            check_operator_health("x", s, "4.17.0").map(|i| (i.reason, i.effect))
        };
        assert_eq!(
            reason(&status),
            Some(("ClusterOperatorNotAvailable", IssueEffect::Fail))
        );
        status
            .conditions
            .push(condition("Available", "True", Some("AsExpected"), "ok"));
        assert_eq!(
            reason(&status),
            Some(("ClusterOperatorDegraded", IssueEffect::FailAfterInterval)),
            "a missing Degraded counts as degraded"
        );
        status
            .conditions
            .push(condition("Degraded", "False", Some("AsExpected"), "ok"));
        assert_eq!(
            reason(&status),
            Some(("ClusterOperatorUpdating", IssueEffect::None))
        );
        status.versions.push(OperandVersion {
            name: "operator".into(),
            version: "4.17.0".into(),
        });
        assert_eq!(reason(&status), None);
        // A degraded operator at the old version is "degraded" for the CVO, "updating" for the
        // historical check.
        status.versions[0].version = "4.16.3".into();
        status.conditions[1].status = "True".into();
        assert_eq!(
            check_operator_health("x", &status, "4.17.0").map(|i| i.message),
            Some("Cluster operator x is degraded".into())
        );
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorUpdating")
        );
    }

    #[test]
    fn historical_health_checks_versions_then_available_then_explicit_degraded() {
        let mut status = ClusterOperatorStatus::default();
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorUpdating")
        );
        status.versions.push(OperandVersion {
            name: "operator".into(),
            version: "4.17.0".into(),
        });
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorNotAvailable")
        );
        status
            .conditions
            .push(condition("Available", "True", Some("AsExpected"), "ok"));
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorDegraded")
        );
        status
            .conditions
            .push(condition("Degraded", "False", Some("AsExpected"), "ok"));
        assert_eq!(operator_health("x", &status, "4.17.0"), None);
    }

    #[test]
    fn released_wording_keeps_a_sole_blockers_reason() {
        let one = [(
            "a".to_owned(),
            "IncompatibleOperatorsInstalled".to_owned(),
            "move".to_owned(),
        )];
        let released = |b: &[(String, String, String)], updating| {
            upgradeable_condition(ReasonFormat::Released, b, updating)
        };
        assert_eq!(
            released(&one, false),
            Some((
                "IncompatibleOperatorsInstalled".into(),
                "Cluster operator a should not be upgraded between minor or major versions: move"
                    .into()
            ))
        );
        let two = [
            one[0].clone(),
            ("b".to_owned(), "X".to_owned(), "y".to_owned()),
        ];
        assert_eq!(
            released(&two, false).map(|s| s.0),
            Some("ClusterOperatorsNotUpgradeable".to_owned())
        );
        assert_eq!(
            released(&[], true),
            Some((
                "UpdateInProgress".into(),
                UPDATE_IN_PROGRESS_MESSAGE.to_owned()
            ))
        );
        let (reason, message) = released(&one, true).unwrap();
        assert_eq!(reason, "MultipleReasons");
        assert!(
            message.starts_with("Cluster should not be upgraded between minor or major versions for multiple reasons: IncompatibleOperatorsInstalled,UpdateInProgress\n* "),
            "{message}"
        );
        assert_eq!(released(&[], false), None);
    }

    #[test]
    fn newer_wording_keeps_the_operators_message_verbatim() {
        let one = [(
            "platform-operators-aggregated".to_owned(),
            "IncompatibleOperatorsInstalled".to_owned(),
            "move compat first".to_owned(),
        )];
        let newer = |b: &[(String, String, String)], updating| {
            upgradeable_condition(ReasonFormat::Newer, b, updating)
        };
        assert_eq!(
            newer(&one, false),
            Some((
                "RiskNameNotCompatibleWithReasonProperty".into(),
                "move compat first".into()
            ))
        );
        assert_eq!(
            newer(&[], true),
            Some((
                "ClusterVersionUpdating".into(),
                format!("{UPDATE_IN_PROGRESS_MESSAGE}.")
            ))
        );
        let (reason, message) = newer(&one, true).unwrap();
        assert_eq!(reason, "MultipleReasons");
        assert!(message.contains("\n* move compat first"), "{message}");
        assert!(valid_reason("ClusterVersionUpdating"));
        assert!(valid_reason("A:b,c_1"));
        assert!(!valid_reason("ClusterOperatorUpgradeable-x"));
        assert!(!valid_reason("Trailing,"));
        assert!(!valid_reason("1abc"));
    }

    #[test]
    fn rollback_goes_to_the_first_entry_that_differs_from_desired_whatever_its_state() {
        // In-flight patch 4.16.3 → 4.16.4: rolling back to 4.16.3 is allowed.
        let in_flight = cluster(
            "4.16.4",
            vec![
                entry("Partial", "4.16.4", true),
                entry("Completed", "4.16.3", false),
            ],
        );
        assert!(reasons(&in_flight, "4.16.3").is_empty());
        assert_eq!(reasons(&in_flight, "4.16.2"), ["LowDesiredVersion"]);
        // 4.16.3 → 4.16.4 → (retarget) 4.16.5, completed: only 4.16.4, which never completed.
        let retargeted = cluster(
            "4.16.5",
            vec![
                entry("Completed", "4.16.5", false),
                entry("Partial", "4.16.4", false),
                entry("Completed", "4.16.3", false),
            ],
        );
        assert!(reasons(&retargeted, "4.16.4").is_empty());
        let failures = preconditions(&retargeted, "4.16.3").unwrap();
        assert_eq!(failures.len(), 1);
        assert!(
            failures[0].message.contains(
                "the only supported rollback is to the cluster's previous version 4.16.4"
            ),
            "{failures:?}"
        );
        // Never across a minor, even to the previous version.
        let minor = cluster(
            "4.17.0",
            vec![
                entry("Completed", "4.17.0", false),
                entry("Completed", "4.16.4", false),
            ],
        );
        let failures = preconditions(&minor, "4.16.4").unwrap();
        assert!(
            failures[0]
                .message
                .contains("rollbacks that change major or minor versions are not recommended"),
            "{failures:?}"
        );
        let fresh = cluster("4.16.3", vec![entry("Completed", "4.16.3", false)]);
        assert!(
            preconditions(&fresh, "4.16.2").unwrap()[0]
                .message
                .contains("has no previous Semantic Version")
        );
    }

    #[test]
    fn giant_hops_and_upgradeable_follow_status_desired() {
        let mut steady = cluster("4.16.3", vec![entry("Completed", "4.16.3", false)]);
        assert_eq!(reasons(&steady, "4.18.0"), ["MultipleMinorVersionsUpdate"]);
        assert_eq!(reasons(&steady, "5.0.0"), Vec::<String>::new());
        assert_eq!(reasons(&steady, "5.1.0"), ["MajorVersionUpdate"]);
        assert_eq!(reasons(&steady, "6.0.0"), ["MajorVersionUpdate"]);
        steady
            .conditions
            .push(condition("Upgradeable", "False", Some("Blocked"), "why"));
        assert_eq!(reasons(&steady, "4.16.9"), Vec::<String>::new());
        assert_eq!(reasons(&steady, "4.17.0"), ["Blocked"]);
        assert_eq!(
            reasons(&steady, "4.18.0"),
            ["MultipleMinorVersionsUpdate", "Blocked"]
        );
        // A patch retarget during a minor update passes with a warning.
        let mut minor = cluster(
            "4.17.0",
            vec![
                entry("Partial", "4.17.0", true),
                entry("Completed", "4.16.3", false),
            ],
        );
        minor
            .conditions
            .push(condition("Upgradeable", "False", Some("Blocked"), "why"));
        let failures = preconditions(&minor, "4.17.1").unwrap();
        assert_eq!(failures.len(), 1);
        assert!(failures[0].warning);
        assert_eq!(failures[0].reason, "MinorVersionClusterUpgradeInProgress");
    }

    #[test]
    fn force_turns_blocking_failures_into_warnings() {
        let failures = vec![PreconditionFailure {
            name: "ClusterVersionUpgradeable",
            reason: "Blocked".into(),
            message: "why".into(),
            warning: false,
        }];
        let refused = summarize_preconditions(&failures, false).unwrap();
        assert!(refused.block);
        assert_eq!(
            refused.message,
            "Precondition \"ClusterVersionUpgradeable\" failed because of \"Blocked\": why"
        );
        let forced = summarize_preconditions(&failures, true).unwrap();
        assert!(!forced.block);
        assert_eq!(
            forced.message,
            format!("Forced through blocking failures: {}", refused.message)
        );
        assert_eq!(summarize_preconditions(&[], true), None);
    }

    #[test]
    fn the_cache_is_shorter_right_after_a_refusal() {
        let timing = CvoTiming::released();
        let mut status = cluster("4.16.3", vec![entry("Completed", "4.16.3", false)]);
        assert_eq!(timing.throttle(&status), Duration::from_secs(120));
        status.conditions.push(condition(
            "ReleaseAccepted",
            "False",
            Some("PreconditionChecks"),
            "refused",
        ));
        assert_eq!(timing.throttle(&status), Duration::from_secs(15));
        status.conditions[1].last_transition_time = Time(
            k8s_openapi::jiff::Timestamp::from_second(jiff::Timestamp::now().as_second() - 121)
                .unwrap(),
        );
        assert_eq!(timing.throttle(&status), Duration::from_secs(120));
        assert_eq!(CvoTiming::newer().throttle(&status), Duration::ZERO);
    }

    #[test]
    fn several_failing_operators_are_summarised() {
        let issue = |name: &str, reason, message: &str| OperatorIssue {
            operator: name.into(),
            reason,
            message: message.into(),
            effect: IssueEffect::None,
        };
        let a = issue(
            "a",
            "ClusterOperatorDegraded",
            "Cluster operator a is degraded",
        );
        let b = issue(
            "b",
            "ClusterOperatorDegraded",
            "Cluster operator b is degraded",
        );
        let c = issue(
            "c",
            "ClusterOperatorNotAvailable",
            "Cluster operator c is not available",
        );
        assert_eq!(
            summarize_issues(&[&a]),
            (
                "ClusterOperatorDegraded".into(),
                "Cluster operator a is degraded".into()
            )
        );
        assert_eq!(
            summarize_issues(&[&a, &b]),
            (
                "ClusterOperatorsDegraded".into(),
                "Cluster operators a, b are degraded".into()
            )
        );
        assert_eq!(summarize_issues(&[&a, &c]).0, "MultipleErrors");
    }
}
