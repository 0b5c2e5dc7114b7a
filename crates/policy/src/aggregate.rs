//! The aggregated ClusterOperator `platform-operators-aggregated` (§8.2), computed purely from
//! every PlatformOperator: what the CVO reads. Fail closed: a PO that has not reported for its
//! current generation, or reports anything but `Upgradeable=True`, makes it `Upgradeable=False`.

use std::collections::BTreeSet;
use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::openshift::{ClusterOperatorStatus, ObjectReference, OperandVersion};
use pom_api::platform_operator::{PinReason, PinStatus, PlatformOperatorStatus};
use pom_resolver::cluster::PhaseKind;

use crate::conditions::{self, Desired, merge_cluster_operator};
use crate::decide::Upgradeability;
use crate::snapshot::GuardState;

/// At most this many POs are listed in one ClusterOperator message (§8.2: one line per PO,
/// `<po>: <msg>`, in name order); the others are counted on a last line. The aggregated status
/// is one object, stored in etcd (1.5 MiB per request by default) and printed by `oc get
/// clusteroperators` and `oc adm upgrade`: at 1,000 POs failing their pulls the unbounded
/// messages made a status of several MiB, whose write failed, and which the manager held
/// several copies of.
pub const MAX_LISTED_POS: usize = 20;

/// A listed PO's message is cut to this many bytes (at a character boundary), so that one
/// PO's long error cannot crowd out the others; above the few hundred bytes of a registry
/// error with its image reference and what to do, which the CVO shows whole.
pub const MAX_LINE_BYTES: usize = 2048;

/// The lines of a per-PO message, bounded by [`MAX_LISTED_POS`] and [`MAX_LINE_BYTES`]; the
/// count of POs not listed closes it with where to see them all.
#[must_use]
pub fn per_po_message<I>(lines: I) -> String
where
    I: IntoIterator<Item = String>,
    I::IntoIter: ExactSizeIterator,
{
    let lines = lines.into_iter();
    let total = lines.len();
    let mut message: Vec<String> = lines
        .take(MAX_LISTED_POS)
        .map(|line| cut(line, MAX_LINE_BYTES))
        .collect();
    if total > MAX_LISTED_POS {
        message.push(format!(
            "... and {} more platform operators: `oc get platformoperators` shows each one's conditions",
            total - MAX_LISTED_POS
        ));
    }
    message.join("\n")
}

/// `text` cut to at most `max` bytes at a character boundary, marked with `...` when cut.
fn cut(mut text: String, max: usize) -> String {
    const MARK: &str = "...";
    if text.len() <= max {
        return text;
    }
    let mut end = max.saturating_sub(MARK.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(MARK);
    text
}

/// A PlatformOperator's name (cluster-scoped: never absent on a stored object).
fn name_of(po: &&PlatformOperator) -> String {
    po.metadata.name.clone().unwrap_or_default()
}

/// What the writer knows of the cluster's update phase, to tell whether a PO's pin was
/// computed for the phase the cluster is in now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClusterPhaseView {
    /// The ClusterVersion could not be read or judged: never report a new version.
    Unknown,
    /// Plain Kubernetes: no ClusterVersion.
    Absent,
    /// The phase, and the version the cluster is heading to (`status.desired.version`).
    Known {
        kind: PhaseKind,
        target: semver::Version,
    },
}

impl ClusterPhaseView {
    /// The minor update the aggregated `Upgradeable` is about: the one after the version the
    /// cluster heads to (`status.desired.version`, the CVO's "current" for its Upgradeable
    /// precondition), in every phase: during a minor update the verdict already answers for
    /// the update after it. `None` on plain Kubernetes or when the cluster cannot be judged.
    #[must_use]
    pub fn next_minor(&self) -> Option<(u64, u64)> {
        match self {
            Self::Known { target, .. } => Some(pom_resolver::cluster::next_minor(target)),
            Self::Unknown | Self::Absent => None,
        }
    }

    /// Whether a pin (and the verdict judged with it) was computed for this phase of this
    /// update: its reason names the phase, its `clusterVersion` the target (a PO judged at
    /// steady 4.16 is not judged for steady 4.17, which a manager down for a whole update
    /// never saw start).
    #[must_use]
    pub fn matches(&self, pin: &PinStatus) -> bool {
        let reason = pin.reason;
        match self {
            Self::Unknown => false,
            Self::Absent => true,
            Self::Known { kind, target } => {
                let phase = match kind {
                    PhaseKind::Steady => {
                        matches!(reason, PinReason::Steady | PinReason::Override)
                    }
                    PhaseKind::PatchUpgrade => reason == PinReason::PatchUpgrade,
                    PhaseKind::MinorUpgrade => reason == PinReason::MinorUpgrade,
                    PhaseKind::Rollback => reason == PinReason::Rollback,
                };
                phase
                    && pin
                        .cluster_version
                        .as_deref()
                        .and_then(|v| semver::Version::parse(v).ok())
                        .is_some_and(|v| v == *target)
            }
        }
    }
}

/// Computes the ClusterOperator status from every PlatformOperator. `versions[operator]`
/// reaches `release_version` only once every PO has settled at its pin for the cluster's
/// current phase, with no further hop pending.
#[must_use]
pub fn compute(
    pos: &[Arc<PlatformOperator>],
    previous: &ClusterOperatorStatus,
    release_version: &str,
    manager_namespace: &str,
    cluster: ClusterPhaseView,
    guard: &GuardState,
    now: &Time,
) -> ClusterOperatorStatus {
    let mut pos: Vec<&PlatformOperator> = pos.iter().map(AsRef::as_ref).collect();
    pos.sort_by_key(name_of);
    let Readings {
        not_available,
        progressing,
        degraded,
        verdicts,
        all_at_pin,
    } = Readings::of(&pos, &cluster);
    let next = cluster.next_minor();
    let desired = vec![
        available_condition(not_available, pos.is_empty()),
        progressing_condition(progressing),
        degraded_condition(degraded, guard),
        upgradeable_condition(&verdicts, next),
    ];
    let versions = if all_at_pin {
        vec![OperandVersion {
            name: "operator".into(),
            version: release_version.to_owned(),
        }]
    } else {
        previous.versions.clone()
    };
    ClusterOperatorStatus {
        conditions: merge_cluster_operator(&previous.conditions, &desired, now),
        versions,
        related_objects: related_objects(&pos, manager_namespace),
    }
}

/// Every PO's part of the aggregated conditions, one line per PO in name order.
struct Readings {
    /// POs with no working installation.
    not_available: Vec<String>,
    progressing: Vec<String>,
    degraded: Vec<String>,
    /// Each PO's Upgradeable, as far as it can be trusted for this phase.
    verdicts: Vec<(String, Upgradeability)>,
    /// Every PO has settled at its pin for the cluster's current phase.
    all_at_pin: bool,
}

impl Readings {
    /// Reads every PO (sorted by name) for the cluster phase `cluster`.
    fn of(pos: &[&PlatformOperator], cluster: &ClusterPhaseView) -> Self {
        let mut readings = Self {
            not_available: Vec::new(),
            progressing: Vec::new(),
            degraded: Vec::new(),
            verdicts: Vec::new(),
            all_at_pin: true,
        };
        for po in pos {
            readings.read(po, cluster);
        }
        readings
    }

    /// Adds one PO's lines, its verdict, and whether it is at its pin.
    fn read(&mut self, po: &PlatformOperator, cluster: &ClusterPhaseView) {
        let name = name_of(&po);
        let status = po.status.clone().unwrap_or_default();
        let current = status.observed_generation == po.metadata.generation;
        if let Some(c) = failed_install(po, &status) {
            self.not_available.push(format!("{name}: {}", c.message));
        }
        if let Some(c) = condition_true(po, types::PROGRESSING) {
            self.progressing.push(format!("{name}: {}", c.reason));
        }
        if let Some(c) = condition_true(po, types::DEGRADED) {
            self.degraded.push(format!("{name}: {}", c.message));
            // A settled operator that stopped working has nothing working (§8.2); a move in
            // progress never reports this reason.
            if c.reason.parse::<Reason>().ok() == Some(Reason::OperatorUnavailable) {
                self.not_available.push(format!("{name}: {}", c.message));
            }
        }
        let verdict = reported_verdict(po, current);
        // Nothing installed and nothing running: a PO whose verdict blocks although its status
        // records no bundle (objects of a bundle it cannot adopt, a recovered bundle not yet
        // re-applied) has something running, and holds the release (state-machine test).
        let failed_without_install = status.installed_bundle.is_none() && verdict.allows_update();
        let pin_for_phase = status.pin.as_ref().is_some_and(|p| cluster.matches(p));
        self.verdicts.push((
            name,
            judged_for_phase(verdict, failed_without_install, pin_for_phase),
        ));
        // A soaking move (issue 35 item 4) has not finished what the soak waits for.
        let settled = status
            .active_hop
            .as_ref()
            .is_some_and(|h| h.settled && h.soak_until.is_none())
            && status.desired_bundle.is_none();
        self.all_at_pin &= current && ((settled && pin_for_phase) || failed_without_install);
    }
}

/// The PO's condition of type `type_`, if it reported one.
fn condition(po: &PlatformOperator, type_: &str) -> Option<Condition> {
    po.status
        .as_ref()
        .and_then(|s| conditions::find(&s.conditions, type_).cloned())
}

/// The PO's condition of type `type_` when it is True.
fn condition_true(po: &PlatformOperator, type_: &str) -> Option<Condition> {
    condition(po, type_).filter(|c| c.status == ConditionStatus::True.as_str())
}

/// The PO's Installed condition when nothing is installed for a failure. Not failures: an
/// install in progress, a duplicate (the winner runs), and an install the admin holds
/// (paused, or waiting for approval: issue 23 item 5).
fn failed_install(po: &PlatformOperator, status: &PlatformOperatorStatus) -> Option<Condition> {
    if status.installed_bundle.is_some() {
        return None;
    }
    condition(po, types::INSTALLED).filter(|c| {
        let reason = c.reason.parse::<Reason>().ok();
        c.status == ConditionStatus::False.as_str()
            && !matches!(
                reason,
                Some(
                    Reason::Installing
                        | Reason::DuplicatePackage
                        | Reason::Paused
                        | Reason::UpgradePendingApproval
                )
            )
    })
}

/// The PO's Upgradeable as it reported it. Fail closed: a PO that has not reported
/// Upgradeable for its current generation is not judged upgradeable (seed 000).
fn reported_verdict(po: &PlatformOperator, current: bool) -> Upgradeability {
    match condition(po, types::UPGRADEABLE) {
        Some(c) if current => match c.reason.parse::<Reason>() {
            // Not upgradeable with the happy reason (a hand-edited or foreign status)
            // cannot be read: never write `Upgradeable=False` with reason `AsExpected`.
            Ok(Reason::AsExpected) if c.status != ConditionStatus::True.as_str() => {
                Upgradeability::unknown(format!(
                    "Upgradeable is {:?} with reason AsExpected: {}",
                    c.status, c.message
                ))
            }
            Ok(reason) => Upgradeability {
                status: ConditionStatus::parse_lenient(&c.status),
                reason,
                message: c.message,
            },
            Err(unknown) => Upgradeability::unknown(format!("{unknown}: {}", c.message)),
        },
        _ => Upgradeability::unknown("has not reported whether it is upgradeable yet"),
    }
}

/// A PO judged for another cluster phase (its status predates the update that just started,
/// or the cluster cannot be judged) is not judged for this one: fail closed.
fn judged_for_phase(
    verdict: Upgradeability,
    failed_without_install: bool,
    pin_for_phase: bool,
) -> Upgradeability {
    if verdict.allows_update() && !failed_without_install && !pin_for_phase {
        Upgradeability::unknown("has not been judged for the cluster's current update phase yet")
    } else {
        verdict
    }
}

/// Available: every PO has a working installation, else which do not.
fn available_condition(not_available: Vec<String>, no_pos: bool) -> Desired {
    if !not_available.is_empty() {
        return Desired::new(
            types::AVAILABLE,
            ConditionStatus::False,
            Reason::PlatformOperatorFailed,
            per_po_message(not_available),
        );
    }
    let msg = if no_pos {
        "No platform operators are present in the cluster"
    } else {
        "All platform operators have a working installation"
    };
    Desired::new(
        types::AVAILABLE,
        ConditionStatus::True,
        Reason::AsExpected,
        msg,
    )
}

/// Progressing: which POs are on their way to their desired bundles.
fn progressing_condition(progressing: Vec<String>) -> Desired {
    if progressing.is_empty() {
        return Desired::new(
            types::PROGRESSING,
            ConditionStatus::False,
            Reason::AsExpected,
            "All platform operators are at their desired bundles",
        );
    }
    Desired::new(
        types::PROGRESSING,
        ConditionStatus::True,
        Reason::PlatformOperatorsProgressing,
        per_po_message(progressing),
    )
}

/// Degraded: the manager's own fault heads the condition (issue 22 item 2), then the POs'.
fn degraded_condition(degraded: Vec<String>, guard: &GuardState) -> Desired {
    if let Some(message) = guard.degradation() {
        let message = if degraded.is_empty() {
            message
        } else {
            format!("{message}\n{}", per_po_message(degraded))
        };
        return Desired::new(
            types::DEGRADED,
            ConditionStatus::True,
            Reason::AdmissionGuardMissing,
            message,
        );
    }
    if degraded.is_empty() {
        return Desired::new(
            types::DEGRADED,
            ConditionStatus::False,
            Reason::AsExpected,
            "No platform operator is degraded",
        );
    }
    Desired::new(
        types::DEGRADED,
        ConditionStatus::True,
        Reason::PlatformOperatorFailed,
        per_po_message(degraded),
    )
}

/// Upgradeable: the POs' verdicts folded. Unknown is not upgradeable: the CVO treats
/// Unknown as "not False", so say False.
fn upgradeable_condition(
    verdicts: &[(String, Upgradeability)],
    next: Option<(u64, u64)>,
) -> Desired {
    let upgradeable = if verdicts.is_empty() {
        Upgradeability::yes("No platform operators are present in the cluster")
    } else {
        fold_upgradeable(verdicts, next)
    };
    Desired::new(
        types::UPGRADEABLE,
        ConditionStatus::from_bool(upgradeable.allows_update()),
        upgradeable.reason,
        upgradeable.message,
    )
}

/// What `oc adm inspect` collects for the ClusterOperator: the manager's namespace, the POM
/// APIs, and every PO's install namespace once.
/// Where `po`'s operator runs, for must-gather: the namespace its status recorded at the first
/// install (a bundle's suggested namespace included), else the one its spec names, else its
/// name (where POM installs when neither says otherwise).
fn install_namespace(po: &PlatformOperator) -> String {
    po.status
        .as_ref()
        .and_then(|s| s.install_namespace.clone())
        .or_else(|| po.spec.install_namespace.clone())
        .unwrap_or_else(|| name_of(&po))
}

fn related_objects(pos: &[&PlatformOperator], manager_namespace: &str) -> Vec<ObjectReference> {
    let mut related = vec![
        ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: manager_namespace.to_owned(),
        },
        ObjectReference {
            group: pom_api::GROUP.into(),
            resource: "platformoperators".into(),
            namespace: None,
            name: String::new(),
        },
        ObjectReference {
            group: pom_api::GROUP.into(),
            resource: "catalogs".into(),
            namespace: None,
            name: String::new(),
        },
    ];
    let mut install_namespaces: Vec<String> = pos.iter().map(|po| install_namespace(po)).collect();
    install_namespaces.sort();
    install_namespaces.dedup();
    related.extend(install_namespaces.into_iter().map(|ns| ObjectReference {
        group: String::new(),
        resource: "namespaces".into(),
        namespace: None,
        name: ns,
    }));
    related
}

/// The first line of a blocking `Upgradeable` message, in the form OLM v0's
/// `IncompatibleOperatorsInstalled` gives it (`ClusterServiceVersions blocking minor version
/// upgrades to 4.N or higher:`), so that `oc adm upgrade` shows admins a text they know; the
/// POs follow one per line, `- <po>: ...`.
#[must_use]
pub fn blocking_header(next: Option<(u64, u64)>) -> String {
    match next {
        Some((major, minor)) => {
            format!(
                "PlatformOperators blocking minor version upgrades to {major}.{minor} or higher:"
            )
        }
        None => "PlatformOperators blocking minor version upgrades:".to_owned(),
    }
}

/// Folds per-PO verdicts into the aggregated `Upgradeable`: all True gives True/AsExpected,
/// one line per PO, `<po>: <msg>`; otherwise False (Unknown counts as not upgradeable: the CVO
/// only blocks on False, so it is written as False), with the blockers' common reason or
/// `MultipleReasons`, and a message in OLM v0's form (issue 35 item 5): [`blocking_header`]
/// naming `next` (the minor update it blocks, when known), then one line per blocking PO,
/// `- <po>: <msg>`, sorted by PO name and bounded by [`per_po_message`]. A PO's message says
/// its bundle, the limit and the way forward (`pom_resolver::verdict`).
#[must_use]
pub fn fold_upgradeable(
    items: &[(String, Upgradeability)],
    next: Option<(u64, u64)>,
) -> Upgradeability {
    let mut sorted: Vec<&(String, Upgradeability)> = items.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let lines = |list: &[&(String, Upgradeability)]| {
        per_po_message(
            list.iter()
                .map(|(name, verdict)| format!("{name}: {}", verdict.message)),
        )
    };
    if sorted.is_empty() {
        return Upgradeability::yes("No platform operators are present");
    }
    let blockers: Vec<&(String, Upgradeability)> = sorted
        .iter()
        .copied()
        .filter(|(_, v)| !v.allows_update())
        .collect();
    if blockers.is_empty() {
        return Upgradeability::yes(lines(&sorted));
    }
    let reasons: BTreeSet<Reason> = blockers.iter().map(|(_, v)| v.reason).collect();
    let reason = match reasons.iter().next() {
        Some(only) if reasons.len() == 1 => *only,
        _ => Reason::MultipleReasons,
    };
    let listed = per_po_message(
        blockers
            .iter()
            .map(|(name, verdict)| format!("- {name}: {}", verdict.message)),
    );
    Upgradeability::no(reason, format!("{}\n{listed}", blocking_header(next)))
}
