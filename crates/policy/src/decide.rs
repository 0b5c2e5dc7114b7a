//! The decision for one PlatformOperator (§4, §5, §7, §8.3): which bundle to put on the
//! cluster now, under which pin, whether a chosen move is held and why, and what the PO's part
//! of `Upgradeable` is. Pure: the same snapshot always gives the same decision.

use std::ops::ControlFlow;

use k8s_openapi::jiff::Timestamp;
use pom_api::conditions::{ConditionStatus, Reason};
use pom_api::platform_operator::{
    AppliedConfig, BundleRef, PinReason as ApiPinReason, UpgradeApproval,
};
use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::MaxOpenShiftVersion;
use pom_resolver::pin::{Pin, PinReason, pin_for};
use pom_resolver::select::{self, CatalogInput, InstalledBundle, PinPolicy, ResolveRequest};
use pom_resolver::verdict::{self, Judgement, Verdict};
use semver::Version;

use crate::namespace_clash::{ClashSide, ClashWinner, NamespaceClash};
use crate::pre_update;
use crate::request::{PoRequest, RequestError};
use crate::snapshot::{
    CatalogContent, CatalogView, ClusterView, GateReading, GuardState, Hop, Installed, PoSnapshot,
    UnsettledMoveAction,
};

/// What to do with one PlatformOperator now.
#[derive(Debug, Clone, PartialEq)]
pub struct PoDecision {
    pub action: Action,
    /// The pin in force for what runs now (restated for the new version once a move applies:
    /// see [`MoveTarget::pin_after`]).
    pub pin: Option<PinState>,
    /// A move that was chosen but not started, and why.
    pub held: Option<Held>,
    /// This PO's part of `Upgradeable` for what runs now, before settle and pending-move rules
    /// (those are applied with the install report, see [`crate::status`]).
    pub verdict: Upgradeability,
    /// Something the admin must know; `degrades` when it is a real failure (nothing works, or
    /// the request itself is unusable).
    pub problem: Option<Problem>,
    /// The move in flight outlived `spec.progressDeadline`.
    pub deadline_exceeded: bool,
    /// Deprecation notices of the package, channel or bundle in use.
    pub deprecations: Vec<String>,
    /// The admin's action on a move that did not settle, when this decision carries it out
    /// (announced with an Event when the move it starts is applied).
    pub unsettled_move_action: Option<UnsettledMoveAction>,
    /// The OpenShift version the cluster is heading to, which this decision was judged for
    /// (`None`: plain Kubernetes, or a ClusterVersion that cannot be judged).
    pub judged_for: Option<Version>,
    /// `spec.paused` (issue 23 item 5): what POM withholds and how to resume, for the admin.
    /// The action is then never a write ([`Action::Nothing`] or [`Action::WaitForCatalog`]).
    pub paused: Option<String>,
    /// The configuration of the operator's Deployments (`spec.config` and the cluster proxy)
    /// the action renders them with: what a move carries (what is asked for now), or for a
    /// re-apply what runs, unless a configuration change starts. `None` when nothing is
    /// rendered.
    pub config: Option<AppliedConfig>,
    /// A change of the configuration of what runs (issue 23 items 3, 4): a move of its own
    /// kind, since it restarts the operator. Starting (applied by this re-apply) or held.
    pub config_change: Option<ConfigChange>,
    /// The PlatformOperator's name, for the commands status messages give the admin.
    pub po: String,
    /// `spec.soak` (zero when not asked for or unreadable): status records the soak after a
    /// settled move with it ([`crate::soak`]).
    pub soak: std::time::Duration,
    /// A namespace this PO may not hold objects in (another PO's install namespace it was
    /// refused to watch): what its inventory records there is deleted
    /// ([`crate::steps::Step::Withdraw`]).
    pub withdraw_from: Option<String>,
    /// What runs is left running and not judged (the loser of a duplicate, or of a namespace
    /// clash, that still runs its bundle): the pin it recorded no longer holds for any cluster
    /// version, so the aggregate does not count it at its pin ([`crate::status`]).
    pub runs_unjudged: bool,
}

/// A change of the configuration of the operator that runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigChange {
    /// The PlatformOperator (for the override's command).
    pub po: String,
    /// The digest of the configuration it applies.
    pub digest: String,
    /// Why it waits; `None`: it starts now.
    pub held: Option<HoldReason>,
}

impl ConfigChange {
    /// The command that applies this change although the operator says `Upgradeable=False`.
    #[must_use]
    pub fn override_command(&self) -> String {
        format!(
            "`kubectl annotate platformoperator {} {}={} --overwrite`",
            self.po,
            pom_api::labels::CONFIG_CHANGE_OVERRIDE,
            self.digest
        )
    }
}

impl std::fmt::Display for ConfigChange {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the configuration change {} (spec.config or the cluster proxy) restarts the operator",
            self.digest
        )?;
        match &self.held {
            None => write!(f, "; it is applied now"),
            Some(why @ HoldReason::MoveNotSettled) => {
                write!(
                    f,
                    "; it waits: {why}; it is applied once that has settled, or once it is past spec.progressDeadline"
                )
            }
            Some(why @ HoldReason::Paused { .. }) => write!(f, "; it waits: {why}"),
            Some(why) => write!(
                f,
                "; it waits: {why}; it is applied once the operator allows it, or apply it anyway with {}",
                self.override_command()
            ),
        }
    }
}

/// What to put on the cluster.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Nothing (nothing installed and nothing installable, or a duplicate).
    Nothing,
    /// A Catalog the PO may use has not been processed yet (manager start): judge nothing,
    /// write nothing, look again shortly.
    WaitForCatalog { catalog: String },
    /// Re-apply what runs: drift repair, and the move in flight (its target is installed).
    Keep,
    /// Start a move (first install or hop) to the target.
    Move(MoveTarget),
}

/// The bundle a move goes to.
#[derive(Debug, Clone, PartialEq)]
pub struct MoveTarget {
    pub name: String,
    pub version: Version,
    /// `None` when the catalog carries the objects.
    pub image: Option<String>,
    pub catalog: String,
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
    /// The pin once the move is applied: §4.2 states the pin for the installed version.
    pub pin_after: PinState,
}

impl MoveTarget {
    /// The target as a status reference.
    #[must_use]
    pub fn bundle_ref(&self) -> BundleRef {
        BundleRef {
            name: self.name.clone(),
            version: self.version.to_string(),
        }
    }
}

/// A pin with its typed reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinState {
    pub range: String,
    pub reason: ApiPinReason,
}

impl From<&Pin> for PinState {
    fn from(pin: &Pin) -> Self {
        Self {
            range: pin.range.clone(),
            reason: match pin.reason {
                PinReason::Install => ApiPinReason::Install,
                PinReason::Steady => ApiPinReason::Steady,
                PinReason::PatchUpgrade => ApiPinReason::PatchUpgrade,
                PinReason::MinorUpgrade => ApiPinReason::MinorUpgrade,
                PinReason::Rollback => ApiPinReason::Rollback,
                PinReason::Override => ApiPinReason::Override,
                PinReason::Unpinned => ApiPinReason::Unpinned,
            },
        }
    }
}

/// A chosen move that waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    pub to: BundleRef,
    pub why: HoldReason,
}

/// Why a chosen move waits (§7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HoldReason {
    /// The move before it has not settled.
    MoveNotSettled,
    /// The running operator says `Upgradeable=False`. `operator_condition`: the name of its
    /// OperatorCondition (the CSV's, the bundle's), where the admin's override goes.
    OperatorNotUpgradeable {
        message: String,
        operator_condition: String,
    },
    /// The running operator has reported before (or `upgradeGate` is `OperatorCondition`), but
    /// its OperatorCondition has no `Upgradeable` for the current generation, or is gone: it
    /// cannot be read as a yes.
    OperatorConditionPending {
        message: String,
        operator_condition: String,
    },
    /// OpenShift's ClusterVersion cannot be read or judged, and the bundle declares an
    /// `olm.maxOpenShiftVersion`: it cannot be checked against the cluster, so the bundle is
    /// neither installed nor moved to until it can (issue 25 item 10).
    ClusterVersionUnknown { message: String },
    /// `spec.upgradeApproval` is `Manual` and `spec.approvedBundle` does not name `bundle`
    /// (it names `approved`, or nothing): the admin approves it with `pomctl approve`.
    AwaitingApproval {
        po: String,
        bundle: String,
        approved: Option<String>,
    },
    /// `spec.paused`: POM writes nothing for PlatformOperator `po` but its status.
    Paused { po: String },
    /// `spec.soak`: the move to `settled` settled less than the soak ago; the next hop
    /// starts at `until` ([`crate::soak`]).
    Soaking { settled: String, until: Timestamp },
    /// `spec.preUpdateHops: Offer`: the update to `requested` needs the hops `path` first
    /// ([`crate::pre_update`]); the first waits until `spec.approvedBundle` names it.
    PreUpdateOffered {
        po: String,
        requested: String,
        path: Vec<String>,
    },
}

impl HoldReason {
    /// Whether the move waits for the admin's approval (`spec.upgradeApproval: Manual`).
    #[must_use]
    pub fn awaits_approval(&self) -> bool {
        matches!(
            self,
            Self::AwaitingApproval { .. } | Self::PreUpdateOffered { .. }
        )
    }
}

/// The commands that approve `bundle` for PlatformOperator `po`, for messages.
#[must_use]
pub fn approve_commands(po: &str, bundle: &str) -> String {
    format!(
        "`pomctl approve {po} --bundle {bundle}` (or `kubectl patch platformoperator {po} --type merge -p '{{\"spec\":{{\"approvedBundle\":\"{bundle}\"}}}}'`)"
    )
}

/// The command that resumes a paused PlatformOperator `po`, for messages.
#[must_use]
pub fn unpause_command(po: &str) -> String {
    format!(
        "`kubectl patch platformoperator {po} --type merge -p '{{\"spec\":{{\"paused\":false}}}}'`"
    )
}

impl std::fmt::Display for HoldReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::MoveNotSettled => write!(f, "the move in flight has not settled"),
            Self::OperatorNotUpgradeable {
                message,
                operator_condition,
            } => {
                write!(f, "the operator reports Upgradeable=False ({message})")?;
                write!(f, "; {}", gate_override_way_out(operator_condition))
            }
            Self::OperatorConditionPending {
                message,
                operator_condition,
            } => {
                write!(
                    f,
                    "the operator's OperatorCondition has no Upgradeable for its current generation ({message})"
                )?;
                write!(f, "; {}", gate_override_way_out(operator_condition))
            }
            Self::ClusterVersionUnknown { message } => write!(
                f,
                "the cluster version cannot be judged, so the bundle's maxOpenShiftVersion cannot be checked ({message}); it moves once ClusterVersion version can be read"
            ),
            Self::AwaitingApproval {
                po,
                bundle,
                approved,
            } => {
                write!(
                    f,
                    "spec.upgradeApproval is Manual and {bundle} is not approved"
                )?;
                if let Some(approved) = approved {
                    write!(f, " (spec.approvedBundle names {approved})")?;
                }
                write!(f, ": approve it with {}", approve_commands(po, bundle))
            }
            Self::PreUpdateOffered {
                po,
                requested,
                path,
            } => write!(
                f,
                "the requested cluster update to {requested} needs the pre-update hops {} first (spec.preUpdateHops is Offer): approve the first with {}, or set spec.preUpdateHops to Take",
                path.join(" → "),
                approve_commands(po, path.first().map_or("", String::as_str))
            ),
            Self::Soaking { settled, until } => write!(
                f,
                "the move to {settled} soaks until {until} (spec.soak): the next hop starts then"
            ),
            Self::Paused { po } => write!(
                f,
                "the PlatformOperator is paused (spec.paused): resume it with {}",
                unpause_command(po)
            ),
        }
    }
}

/// The way out of a hold by the operator's gate (§7: the admin's override is the
/// OperatorCondition's `spec.overrides`, as in OLM v0): an operator that cannot run (its
/// Deployment never becomes Available) never reports, so waiting for it would never end.
fn gate_override_way_out(operator_condition: &str) -> String {
    format!(
        "it waits for the operator's Upgradeable=True; if the operator cannot say it (it does not run) or you judge the hold wrong, override it: `kubectl patch operatorcondition {operator_condition} -n <status.installNamespace> --type merge -p '{{\"spec\":{{\"overrides\":[{{\"type\":\"Upgradeable\",\"status\":\"True\",\"reason\":\"AdminOverride\",\"message\":\"<why>\"}}]}}}}'` (spec.overrides)"
    )
}

/// A condition's content for `Upgradeable`, typed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Upgradeability {
    pub status: ConditionStatus,
    pub reason: Reason,
    pub message: String,
}

impl Upgradeability {
    /// True/AsExpected.
    #[must_use]
    pub fn yes(message: impl Into<String>) -> Self {
        Self {
            status: ConditionStatus::True,
            reason: Reason::AsExpected,
            message: message.into(),
        }
    }

    /// Unknown/UpgradeabilityUnknown (blocks once aggregated: fail closed).
    #[must_use]
    pub fn unknown(message: impl Into<String>) -> Self {
        Self {
            status: ConditionStatus::Unknown,
            reason: Reason::UpgradeabilityUnknown,
            message: message.into(),
        }
    }

    /// False with `reason`.
    #[must_use]
    pub fn no(reason: Reason, message: impl Into<String>) -> Self {
        Self {
            status: ConditionStatus::False,
            reason,
            message: message.into(),
        }
    }

    /// Only True lets the cluster take a minor update.
    #[must_use]
    pub fn allows_update(&self) -> bool {
        self.status == ConditionStatus::True
    }
}

impl From<Verdict> for Upgradeability {
    fn from(verdict: Verdict) -> Self {
        match verdict.judgement {
            Judgement::Compatible => Self::yes(verdict.message),
            Judgement::Incompatible => {
                Self::no(Reason::IncompatibleOperatorsInstalled, verdict.message)
            }
            Judgement::Unknown => Self::unknown(verdict.message),
        }
    }
}

/// A problem to report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub reason: Reason,
    pub message: String,
    /// A real failure (Degraded=True); otherwise the running operator is fine and the problem
    /// is only reported.
    pub degrades: bool,
}

impl PoDecision {
    /// Whether the action applies a configuration change (a re-apply that restarts the
    /// operator): what the last full check saw no longer holds.
    #[must_use]
    pub fn reconfigures(&self) -> bool {
        self.config_change
            .as_ref()
            .is_some_and(|c| c.held.is_none())
    }

    pub(crate) fn new(action: Action, verdict: Upgradeability) -> Self {
        Self {
            action,
            pin: None,
            held: None,
            verdict,
            problem: None,
            deadline_exceeded: false,
            deprecations: Vec::new(),
            unsettled_move_action: None,
            judged_for: None,
            paused: None,
            config: None,
            config_change: None,
            po: String::new(),
            soak: std::time::Duration::ZERO,
            withdraw_from: None,
            runs_unjudged: false,
        }
    }

    pub(crate) fn with_problem(
        mut self,
        reason: Reason,
        message: impl Into<String>,
        degrades: bool,
    ) -> Self {
        self.problem = Some(Problem {
            reason,
            message: message.into(),
            degrades,
        });
        self
    }
}

/// Decides what to do with one PlatformOperator.
#[must_use]
pub fn decide(snapshot: &PoSnapshot<'_>) -> PoDecision {
    let mut decision = decide_action(snapshot);
    decision.po.clone_from(&snapshot.name);
    decision.judged_for = snapshot.cluster.phase().map(|p| p.target.clone());
    if let Ok(request) = &snapshot.request {
        decision.soak = request.soak;
    }
    if let (Ok(request), Some(hop)) = (&snapshot.request, &snapshot.hop) {
        decision.deadline_exceeded = past_deadline(snapshot, hop, request);
    }
    decide_config(&mut decision, snapshot);
    if snapshot.paused {
        pause(&mut decision, snapshot);
    }
    decision
}

/// The configuration the action renders the Deployments with, and whether a change of it
/// starts or waits (issue 23 items 3, 4). A move carries what is asked for now (the operator
/// restarts anyway). A re-apply keeps what runs unless the configuration changed: the change
/// restarts the operator, so it is a move of its own kind: it waits for the move in flight to
/// settle, and for the running operator to allow it (`Upgradeable=False`, or no `Upgradeable`
/// for its current generation where it must report, holds it, as it holds a hop), unless the
/// admin's override names its digest. A spec that cannot be read starts nothing.
fn decide_config(decision: &mut PoDecision, s: &PoSnapshot<'_>) {
    let applied = s.config.applied();
    let unapplied = s.config.unapplied.as_deref();
    match &decision.action {
        Action::Move(_) => decision.config = Some(s.config.desired.clone()),
        // What runs was recovered from its objects (a PO restored without its status): what
        // it was configured with was lost with the status, and "none recorded" is not "no
        // configuration" here. The re-apply that records it renders what is asked for, never
        // an empty configuration that would drop `spec.config` and the proxy from running
        // Deployments (found by the state-machine test:
        // `a_po_restored_without_its_status_keeps_its_configuration`).
        Action::Keep if s.found_bundle_label.is_some() && s.installed.is_some() => {
            decision.config = Some(s.config.desired.clone());
        }
        Action::Keep if (s.config.changed() || unapplied.is_some()) && s.installed.is_some() => {
            let Ok(request) = &s.request else {
                decision.config = Some(applied);
                return;
            };
            if !s.config.changed() {
                // What is asked for runs: a change that never applied is dropped (issue 34
                // item 1: the admin's revert replaces it, never waits behind it).
                decision.config = Some(applied);
                return;
            }
            // A change recorded as intent that never applied is resumed as it was judged
            // when it started; any other change (a newer one replaces one that never
            // applied) is judged now.
            let held = if unapplied == Some(s.config.desired.digest.as_str()) {
                None
            } else {
                config_hold(s, request)
            };
            decision.config = Some(if held.is_none() {
                s.config.desired.clone()
            } else {
                applied
            });
            decision.config_change = Some(ConfigChange {
                po: s.name.clone(),
                digest: s.config.desired.digest.clone(),
                held,
            });
        }
        Action::Keep => decision.config = Some(applied),
        Action::Nothing | Action::WaitForCatalog { .. } => {}
    }
}

/// Whether a move of what runs is in flight: the last move has not settled, and it is not a
/// configuration change that never applied (that is not what runs, so nothing waits for it:
/// issue 34 item 1) over what runs settled. The hold is judged by what runs: a change that
/// never applied but replaced a move of what runs that had not settled (`applied_unsettled`)
/// leaves that move in flight (found by the state-machine test:
/// `a_refused_replacement_of_an_unsettled_configuration_holds_the_next_hop`).
/// A first install whose configuration a newer one replaces stays that install (its hop is
/// from nothing): it is in flight until it settles, whether its new configuration applied or
/// not (found by the state-machine test).
fn move_in_flight(s: &PoSnapshot<'_>) -> bool {
    s.hop.as_ref().is_some_and(|h| {
        !h.settled
            && (s.config.unapplied.is_none()
                || may_have_applied(s)
                || h.applied_unsettled
                || !is_configuration_change(h))
    })
}

/// A configuration change recorded as intent, still asked for, whose apply never failed: the
/// manager may have stopped between its apply and its status write, so it may run, unsettled;
/// it is resumed (unjudged) and holds the next hop until it settles. One that the cluster
/// refused (counted) never applied and holds nothing (issue 34 item 1; found by the
/// state-machine test: `a_configuration_change_applied_before_a_crash_holds_the_next_hop`).
fn may_have_applied(s: &PoSnapshot<'_>) -> bool {
    s.hop.as_ref().is_some_and(|h| h.failed_attempts == 0)
        && s.config.unapplied.as_deref() == Some(s.config.desired.digest.as_str())
}

/// Why a configuration change waits, as a hop would (§7); `None` when it may start. A move in
/// flight holds it until it settles. Once that move, applied to what runs, is past its
/// progress deadline, a newer configuration (the admin's revert included) replaces the
/// configuration it applied with, the move staying that move (its start, its way back):
/// review H1 found a configuration change that applied and never settles (its Deployment never
/// Available) holding the revert behind it for good (`abandon:` does not apply to a
/// configuration change); then a first install rendered with such a configuration (found by
/// the state-machine test:
/// `a_first_install_whose_configuration_never_becomes_available_names_a_way_out`); then a hop
/// (`a_hop_whose_configuration_never_becomes_available_names_a_way_out`): `abandon:` goes back
/// carrying the same configuration, so only a newer one gets it out. Not before the deadline:
/// a move rolling out fine whose newer configuration the cluster refuses would never be
/// judged again (a failed apply keeps the move as recorded), so it would never settle, holding
/// every later hop and the cluster's minor updates (review of session 22, finding 1:
/// `a_refused_configuration_sent_during_a_healthy_hop_does_not_hold_it_unsettled`). The
/// operator's gate and the override still judge the newer configuration.
fn config_hold(s: &PoSnapshot<'_>, request: &PoRequest) -> Option<HoldReason> {
    let replaces_its_configuration = s
        .hop
        .as_ref()
        .is_some_and(|h| is_running(s, &h.to) && past_deadline(s, h, request));
    if move_in_flight(s) && !replaces_its_configuration {
        return Some(HoldReason::MoveNotSettled);
    }
    if s.config.override_digest.as_deref() == Some(s.config.desired.digest.as_str()) {
        return None;
    }
    operator_hold(s, request)
}

/// Whether `hop` has not settled within `spec.progressDeadline` (by this manager's clock as
/// well, [`crate::clock`]).
/// A move recorded over an unsettled move of what runs and not applied yet is past it too
/// once that move is: what runs has not settled since it started (seed 777).
fn past_deadline(s: &PoSnapshot<'_>, hop: &Hop, request: &PoRequest) -> bool {
    let passed =
        |at, seen_for| crate::clock::has_passed(s.now, at, seen_for, request.progress_deadline);
    !hop.settled
        && (passed(hop.started_at, hop.started_seen_for)
            || hop.replaced.is_some_and(|r| passed(r.at, r.seen_for)))
}

/// Whether `bundle` is what the status records installed.
fn is_running(s: &PoSnapshot<'_>, bundle: &str) -> bool {
    s.installed
        .as_ref()
        .is_some_and(|i| i.bundle.name == bundle)
}

/// Why the running operator holds a move or a configuration change (§7): it says
/// `Upgradeable=False`, or its gate must be read and cannot be; `None` when it allows it.
fn operator_hold(s: &PoSnapshot<'_>, request: &PoRequest) -> Option<HoldReason> {
    // The OperatorCondition read (named after the CSV, which need not be the bundle's name);
    // none read, the bundle that runs names it as POM would create it.
    let operator_condition = s.gate.object.clone().unwrap_or_else(|| {
        s.installed
            .as_ref()
            .map_or_else(String::new, |i| i.bundle.name.clone())
    });
    match &s.gate.reading {
        GateReading::Says {
            upgradeable: false,
            message,
            ..
        } => Some(HoldReason::OperatorNotUpgradeable {
            message: message.clone(),
            operator_condition,
        }),
        _ => unreadable_gate(s, request).map(|message| HoldReason::OperatorConditionPending {
            message,
            operator_condition,
        }),
    }
}

/// `spec.paused` (issue 23 item 5): the decision as made, with every write withheld. A move is
/// held (its target stays `desiredBundle`), a re-apply (drift repair, and the settling checks
/// that come with it) does not happen, no admin action on an unsettled move is carried out,
/// and no progress deadline runs out (POM is not moving anything). What runs is not vouched
/// for: POM neither follows the cluster with it nor checks that it still works (fail closed).
fn pause(decision: &mut PoDecision, s: &PoSnapshot<'_>) {
    let po = s.name.as_str();
    match std::mem::replace(&mut decision.action, Action::Nothing) {
        Action::Move(target) if decision.held.is_none() => {
            decision.held = Some(Held {
                to: target.bundle_ref(),
                why: HoldReason::Paused { po: po.to_owned() },
            });
        }
        Action::WaitForCatalog { catalog } => {
            decision.action = Action::WaitForCatalog { catalog };
        }
        Action::Move(_) | Action::Keep | Action::Nothing => {}
    }
    let withheld = decision.held.as_ref().map_or_else(String::new, |held| {
        let what = if s.installed.is_some() {
            "the move to"
        } else {
            "the install of"
        };
        format!("; {what} {} waits", held.to.name)
    });
    if let Some(change) = decision.config_change.as_mut()
        && change.held.is_none()
    {
        change.held = Some(HoldReason::Paused { po: po.to_owned() });
    }
    // Nothing is rendered while paused.
    decision.config = None;
    decision.unsettled_move_action = None;
    decision.deadline_exceeded = false;
    decision.paused = Some(format!(
        "paused (spec.paused): POM writes nothing for this PlatformOperator but its status (no install, move, drift repair or prune){withheld}; resume it with {}",
        unpause_command(po)
    ));
    if let Some(installed) = &s.installed {
        let also = if decision.verdict.allows_update() {
            String::new()
        } else {
            format!("; also: {}", decision.verdict.message)
        };
        decision.verdict = Upgradeability::no(
            Reason::Paused,
            format!(
                "paused (spec.paused): POM neither moves nor repairs {} nor checks that it still works, so it cannot vouch for the next minor{withheld}; resume it with {} before updating the cluster{also}",
                installed.bundle.name,
                unpause_command(po)
            ),
        );
    }
}

/// The snapshot's parts a resolution starts from, each found usable by [`usable`].
struct Usable<'s> {
    request: &'s PoRequest,
    catalogs: &'s [CatalogContent<'s>],
    /// Catalogs that may offer the package but are unavailable now (no verdict then, §8.3).
    unavailable: &'s [String],
    installed: Option<&'s Installed>,
    /// The installed version, read (`None`: nothing installed).
    installed_version: Option<&'s Version>,
}

/// Decides what to do before config and pause are applied: a snapshot that cannot be used
/// is refused as such, anything else is resolved.
fn decide_action(s: &PoSnapshot<'_>) -> PoDecision {
    match usable(s) {
        ControlFlow::Break(refused) => refused,
        ControlFlow::Continue(usable) => decide_usable(s, &usable),
    }
}

/// The snapshot's parts a resolution needs, checked in this order, since each refusal says
/// what the admin must fix first: `Break` with the decision for the first that cannot be used.
fn usable<'s>(s: &'s PoSnapshot<'_>) -> ControlFlow<PoDecision, Usable<'s>> {
    if let Some(message) = s.guard.problem() {
        return ControlFlow::Break(unguarded(message));
    }
    let installed = s.installed.as_ref();
    if let Some(winner) = &s.duplicate_of {
        return ControlFlow::Break(duplicate(
            installed,
            s.found_bundle_label.as_deref(),
            winner,
        ));
    }
    if let Some(clash) = &s.namespace_clash {
        let labels_trusted = !matches!(s.guard, GuardState::OwnerLabelGuardDown { .. });
        return ControlFlow::Break(namespace_clash(installed, clash, labels_trusted));
    }
    let request = match &s.request {
        Ok(request) => request,
        Err(err) => return ControlFlow::Break(unreadable_request(installed, err)),
    };
    let (catalogs, unavailable) = ready_catalogs(&s.catalogs, installed)?;
    // A status that records nothing while objects of this PO are on the cluster is a PO
    // restored without its status, not a first install: the snapshot recovered what runs from
    // the objects' bundle label when a catalog lists that bundle; when none does, nothing is
    // installed over them (issue 25 item 4).
    if let (None, Some(label)) = (installed, &s.found_bundle_label) {
        return ControlFlow::Break(adoption_refused(label));
    }
    let installed_version = installed_version(installed)?;
    ControlFlow::Continue(Usable {
        request,
        catalogs,
        unavailable,
        installed,
        installed_version,
    })
}

/// Without the admission guard nothing is written (issue 22 item 2): not a move, not a
/// re-apply. What runs keeps running; the verdict cannot vouch for a manager unguarded.
fn unguarded(message: String) -> PoDecision {
    PoDecision::new(Action::Nothing, Upgradeability::unknown(message.clone())).with_problem(
        Reason::AdmissionGuardMissing,
        message,
        true,
    )
}

/// A PO that lost its package to an older one manages nothing. A loser that installed
/// something before the winner existed still has it running: it is not "not installed", and
/// POM does not judge it (issue 25 item 10).
fn duplicate(installed: Option<&Installed>, found: Option<&str>, winner: &str) -> PoDecision {
    let verdict = match (installed, found) {
        // Restored without its status: objects labelled for it run all the same (found by
        // the state-machine test: `a_duplicate_restored_without_its_status_vouches_for_nothing`).
        (None, Some(label)) => Upgradeability::unknown(format!(
            "objects of bundle {label} labelled for this PlatformOperator run, and it no longer manages the package (PlatformOperator {winner} does): POM does not judge them; delete this PlatformOperator or {winner}"
        )),
        (None, None) => Upgradeability::yes("not installed by this PlatformOperator"),
        (Some(i), _) => Upgradeability::unknown(format!(
            "{} still runs from this PlatformOperator, which no longer manages the package (PlatformOperator {winner} does): POM does not judge it; delete this PlatformOperator or {winner}",
            i.bundle.name
        )),
    };
    let mut decision = PoDecision::new(Action::Nothing, verdict).with_problem(
        Reason::DuplicatePackage,
        format!(
            "package is already managed by PlatformOperator {winner} (the older one wins); delete this PlatformOperator or {winner}"
        ),
        true,
    );
    decision.runs_unjudged = installed.is_some() || found.is_some();
    decision
}

/// A PO that watches or installs into a namespace another PO holds is refused (issue 33
/// item 5): its operator would hold a watcher's RBAC over what the other operator owns, or the
/// other's over it. Nothing is written for it, as for a duplicate; what it installed before
/// keeps running unjudged, but a refused watcher's objects in the other's namespace are
/// withdrawn ([`PoDecision::withdraw_from`]): it keeps no powers there. Not while the
/// owner-label guard is down (`labels_trusted` false) and the clash rests on a Namespace's
/// owner label: anyone who may edit the Namespace could then have set it, and a deletion on
/// its word cannot be undone (the refusal stands; the withdrawal waits for the guard).
fn namespace_clash(
    installed: Option<&Installed>,
    clash: &NamespaceClash,
    labels_trusted: bool,
) -> PoDecision {
    let message = clash.message();
    let verdict = match installed {
        None => Upgradeability::yes("not installed by this PlatformOperator"),
        Some(i) => Upgradeability::unknown(format!("{} still runs: {message}", i.bundle.name)),
    };
    let mut decision = PoDecision::new(Action::Nothing, verdict).with_problem(
        Reason::InstallModeUnsupported,
        message,
        true,
    );
    decision.runs_unjudged = installed.is_some();
    let winner_trusted = labels_trusted || clash.winner != ClashWinner::NamespaceOwner;
    if clash.side == ClashSide::Watches && winner_trusted {
        decision.withdraw_from = Some(clash.namespace.clone());
    }
    decision
}

/// A spec that cannot be read judges nothing; what runs is still re-applied.
fn unreadable_request(installed: Option<&Installed>, err: &RequestError) -> PoDecision {
    PoDecision::new(
        keep_or_nothing(installed),
        Upgradeability::unknown(format!("cannot judge: {err}")),
    )
    .with_problem(Reason::ResolutionFailed, err.to_string(), true)
}

/// The catalogs to resolve from; `Break` while one has not been read since the manager
/// started (judge nothing yet) or none is usable (only the judgement is lost).
fn ready_catalogs<'s>(
    view: &'s CatalogView<'_>,
    installed: Option<&Installed>,
) -> ControlFlow<PoDecision, (&'s [CatalogContent<'s>], &'s [String])> {
    match view {
        CatalogView::Loading { catalog } => ControlFlow::Break(PoDecision::new(
            Action::WaitForCatalog {
                catalog: catalog.clone(),
            },
            Upgradeability::unknown(format!(
                "Catalog {catalog} has not been read since the manager started"
            )),
        )),
        CatalogView::Unavailable(message) => {
            let decision = PoDecision::new(
                keep_or_nothing(installed),
                Upgradeability::unknown(format!(
                    "no catalog content to judge from: {message}; fix the Catalog"
                )),
            );
            // Something runs: it keeps running and is repaired; only the judgement is lost.
            ControlFlow::Break(decision.with_problem(
                Reason::SourceFailed,
                message.clone(),
                installed.is_none(),
            ))
        }
        CatalogView::Ready {
            catalogs,
            unavailable,
        } => ControlFlow::Continue((catalogs, unavailable)),
    }
}

/// Objects labelled for this PO run, but status records nothing installed and no catalog
/// lists their bundle: POM will not install over what it cannot identify.
fn adoption_refused(label: &str) -> PoDecision {
    PoDecision::new(
        Action::Nothing,
        Upgradeability::unknown("what runs cannot be known: the status records nothing installed"),
    )
    .with_problem(
        Reason::AdoptionRefused,
        format!(
            "objects of bundle {label} labelled for this PlatformOperator are on the cluster, but its status records nothing installed (was it restored without its status?) and no catalog lists that bundle: POM will not install over them; add the catalog that offers it, or delete those objects"
        ),
        true,
    )
}

/// The installed bundle's version; `Break` when status records one that cannot be read, so
/// what runs is re-applied but never judged as some other version.
fn installed_version(installed: Option<&Installed>) -> ControlFlow<PoDecision, Option<&Version>> {
    match installed.map(|i| &i.version) {
        None => ControlFlow::Continue(None),
        Some(Ok(version)) => ControlFlow::Continue(Some(version)),
        Some(Err(message)) => {
            ControlFlow::Break(
                PoDecision::new(Action::Keep, Upgradeability::unknown(message.clone()))
                    .with_problem(Reason::ResolutionFailed, message.clone(), true),
            )
        }
    }
}

/// Decides from usable inputs: judges what runs, then carries out a move already chosen (by
/// the admin, or recorded as intent) before a fresh resolution may choose another.
fn decide_usable(s: &PoSnapshot<'_>, u: &Usable<'_>) -> PoDecision {
    // An OpenShift cluster whose ClusterVersion cannot be judged is resolved as steady: the
    // steady pin holds what runs (only the admin's explicit steadyStateVersionRange moves it),
    // a first install may proceed, and the verdict is Unknown until the cluster can be judged.
    let phase = s.cluster.phase();
    let inputs = catalog_inputs(u.catalogs);
    let running = running_bundle(u);
    let verdict = verdict_now(
        s,
        u.request,
        u.catalogs,
        u.unavailable,
        running.as_ref(),
        phase,
    );
    let current_pin = current_pin(u, phase);
    // What runs was recovered from a lost status: re-apply it first, so the status records it
    // (and its objects in the inventory) before any move starts from it.
    if s.found_bundle_label.is_some() && u.installed.is_some() {
        return keep(verdict, current_pin);
    }
    let resolver_request =
        resolve_request(u.request, &inputs, running, phase, s.kube_version.as_ref());
    let resolved = select::resolve(&resolver_request);
    let cannot_go_back = match admins_way_back(s, u, &inputs, phase, &verdict, &current_pin) {
        ControlFlow::Break(decision) => return decision,
        ControlFlow::Continue(refusal) => refusal,
    };
    // A move recorded in status (intent, §7) but not yet applied is resumed, never replaced:
    // a new leader after a crash between the intent and the apply must not jump past it, and
    // must finish it even when the catalog no longer lists the bundle that runs now (so a
    // fresh resolution from it fails) or the cluster phase moved on. It is abandoned for what
    // runs only when its target no longer qualifies (issue 25 item 3): the admin's
    // versionRange or channel excludes it, or the cluster can no longer run it. What runs is
    // then kept (its re-apply prunes whatever of the target was applied) and resolution
    // starts again from it.
    let abandoned = match recorded_move(s, u.request, u.catalogs, &inputs, u.installed, phase) {
        Recorded::Resume(target) => return resume(*target, &resolved, verdict, current_pin),
        Recorded::Abandon { to, why } => Some(abandoned_message(u.installed, &to, &why)),
        Recorded::Unlisted { to } => return unlisted_first_install(current_pin, &to),
        Recorded::ReplaceInstall { to, why } => {
            let replaced = replace_first_install(s, u, &inputs, phase, &verdict, (&to, &why));
            match replaced {
                Some(decision) => return decision,
                // Nothing to install in its place: it is judged as what runs (a rollback's
                // pivot down included: release soak of session 23, seed 20261207).
                None => Some(format!(
                    "the first install of {to} has not settled and no longer qualifies ({why}), and nothing resolves to install in its place: it is judged as what runs"
                )),
            }
        }
        Recorded::None => None,
    };
    // The steady pin holds what runs; a requested update it cannot run on may need hops
    // first (issue 35 item 1).
    if abandoned.is_none()
        && steady_holds_what_runs(&resolved, running_bundle(u).as_ref())
        && let Some(decision) = pre_update::pre_update_step(
            s,
            &pre_update::PreUpdateInput {
                request: u.request,
                inputs: &inputs,
                running: running_bundle(u),
                installed: u.installed,
                phase,
                verdict: &verdict,
                current_pin: current_pin.as_ref(),
            },
        )
    {
        return with_admin_notes(decision, s, u.installed, None, cannot_go_back);
    }
    let decision = decide_fresh(
        s,
        u.request,
        resolved,
        verdict,
        u.installed,
        phase,
        current_pin,
    );
    with_admin_notes(decision, s, u.installed, abandoned, cannot_go_back)
}

/// An unsettled first install that applied and no longer qualifies (the admin's
/// `versionRange` or channel now excludes it, or the cluster can no longer run it): nothing ran
/// before it, so there is nothing its unsettled state protects, and what resolves now is
/// installed in its place as a first install would be (the cluster's version hold, the
/// operator's gate, as for `abandon:`, `skip:` and hops (review of session 22, finding 2), and
/// the admin's approval still judge it). A bundle whose Deployments never become Available left
/// the PO stuck: the steady pin held it, and deleting the PO installed it again (found by the
/// state-machine test once its world had such bundles:
/// `a_first_install_that_never_becomes_available_is_replaced_once_excluded`). Nothing resolving
/// keeps it, judged as what runs (`None`: the caller decides as for what runs), the reason
/// said.
fn replace_first_install(
    s: &PoSnapshot<'_>,
    u: &Usable<'_>,
    inputs: &[CatalogInput<'_>],
    phase: Option<&ClusterPhase>,
    verdict: &Upgradeability,
    (to, why): (&str, &str),
) -> Option<PoDecision> {
    let fresh = resolve_request(u.request, inputs, None, phase, s.kube_version.as_ref());
    let message = format!(
        "the first install of {to} has not settled and no longer qualifies ({why}): what resolves now is installed in its place"
    );
    let resolution = select::resolve(&fresh)
        .ok()
        .filter(|r| r.bundle.name != to)?;
    let mut decision = PoDecision::new(Action::Keep, verdict.clone());
    decision.pin = Some(PinState::from(&resolution.pin));
    decision.deprecations = deprecations(&resolution);
    let chosen = &resolution.bundle;
    let target = chosen_target(chosen, u.request, phase);
    let hold = cluster_version_hold(s, chosen.max_openshift_version.is_some())
        .or_else(|| operator_hold(s, u.request))
        .or_else(|| awaiting_approval(s, u.request, &target.name));
    Some(note_abandoned(
        start_or_hold(decision, target, hold, s, false),
        Some(message),
    ))
}

/// What a recorded move abandoned for what runs says. A first install abandoned with nothing
/// installed in its place stays recorded (objects it applied may run; the PlatformOperator is
/// not upgradeable), so it names the ways out that clear it: let it install again, or delete
/// the PlatformOperator (found by the state-machine test:
/// `a_refused_first_install_names_a_way_out_that_clears_it`).
fn abandoned_message(installed: Option<&Installed>, to: &str, why: &str) -> String {
    match installed {
        Some(i) => format!(
            "the move to {to} recorded in status was abandoned, {} keeps running: {why}",
            i.bundle.name
        ),
        None => format!(
            "the first install of {to} recorded in status was abandoned: {why}; objects it applied may run, so it stays recorded until a bundle installs in its place: admit {to} again, or delete the PlatformOperator (its deletion removes what the install wrote)"
        ),
    }
}

/// The admin's way out of a move that does not settle (issue 25 item 2): back to what ran
/// before, by name, never automatically. `Break` with the decision when it is taken or held;
/// `Continue` with the refusal to report when it cannot be taken (or nothing when there is no
/// such annotation): the PO is then decided as if it were absent.
/// A first install has no way back: the annotation is inert, and the PO is decided as if it
/// were absent (said so), never held on what it installed with the resolution's move and
/// verdict dropped (found by the state-machine test:
/// `an_inert_abandon_of_a_first_install_hides_no_owed_move`). A way back that cannot be taken
/// at all (no catalog has the bundle that ran before, or it no longer qualifies) likewise
/// leaves the PO decided as if the annotation were absent, the refusal said; one that waits (a
/// hold) is held as any move (found by the state-machine test:
/// `an_abandon_that_cannot_be_taken_hides_no_owed_move`).
fn admins_way_back(
    s: &PoSnapshot<'_>,
    u: &Usable<'_>,
    inputs: &[CatalogInput<'_>],
    phase: Option<&ClusterPhase>,
    verdict: &Upgradeability,
    current_pin: &Option<PinState>,
) -> ControlFlow<PoDecision, Option<Problem>> {
    let Some((hop, UnsettledMoveAction::Abandon(_))) = admin_unsettled_action(s, u.installed)
    else {
        return ControlFlow::Continue(None);
    };
    if hop.from.is_none() || is_configuration_change(hop) {
        return ControlFlow::Continue(None);
    }
    let back = back_to_before(
        s,
        hop,
        u,
        inputs,
        phase,
        verdict.clone(),
        current_pin.clone(),
    );
    if matches!(back.action, Action::Move(_)) || back.held.is_some() {
        return ControlFlow::Break(back);
    }
    ControlFlow::Continue(back.problem)
}

/// What a decision says beside itself about the admin's annotations and a recorded move given
/// up: an unreadable unsettled-move action, a recorded move abandoned, an inert `abandon:`, and
/// a way back that cannot be taken.
fn with_admin_notes(
    decision: PoDecision,
    s: &PoSnapshot<'_>,
    installed: Option<&Installed>,
    abandoned: Option<String>,
    cannot_go_back: Option<Problem>,
) -> PoDecision {
    note_cannot_go_back(
        note_inert_abandon(
            note_abandoned(note_unreadable_unsettled_action(decision, s), abandoned),
            s,
            installed,
        ),
        cannot_go_back,
    )
}

/// Whether the steady resolution holds what runs, so that the hops before a requested update
/// may be its way forward (issue 35 item 1): it stays, or it fails only because what runs no
/// longer runs on the cluster as it is now (`maxOpenShiftVersion`, `minKubeVersion`: a
/// cluster updated past it) or the admin's `versionRange` now excludes it. That PO blocks the
/// requested update as much as one that runs where it is, and its hops are judged against the
/// current version and `versionRange` all the same (the state machine found both:
/// `a_running_bundle_the_cluster_outgrew_still_gets_its_pre_update_hops`,
/// `a_running_bundle_the_version_range_excludes_still_gets_its_pre_update_hops`).
fn steady_holds_what_runs(
    resolved: &Result<select::Resolution, select::ResolveError>,
    running: Option<&InstalledBundle>,
) -> bool {
    match (resolved, running) {
        (Ok(resolution), _) => resolution.stays,
        (Err(select::ResolveError::NoCandidate { rejected, .. }), Some(running)) => {
            let mine: Vec<_> = rejected
                .iter()
                .filter(|r| r.bundle == running.name)
                .collect();
            !mine.is_empty()
                && mine.iter().all(|r| {
                    matches!(
                        r.reason,
                        select::RejectReason::MaxOpenShiftVersionTooLow { .. }
                            | select::RejectReason::MinKubeVersionTooHigh { .. }
                            | select::RejectReason::OutsideVersionRange { .. }
                    )
                })
        }
        (Err(_), _) => false,
    }
}

/// The catalogs in the form the resolver takes them.
fn catalog_inputs<'c>(catalogs: &'c [CatalogContent<'_>]) -> Vec<CatalogInput<'c>> {
    catalogs
        .iter()
        .map(|c| (c.name.as_str(), c.priority, c.content))
        .collect()
}

/// What runs, in the form the resolver and the verdict take it (`None`: nothing installed).
fn running_bundle(u: &Usable<'_>) -> Option<InstalledBundle> {
    u.installed
        .zip(u.installed_version)
        .map(|(i, version)| InstalledBundle {
            name: i.bundle.name.clone(),
            version: version.clone(),
        })
}

/// The pin of what runs in the cluster's phase: the pin of a decision that moves nothing.
fn current_pin(u: &Usable<'_>, phase: Option<&ClusterPhase>) -> Option<PinState> {
    u.installed_version.map(|v| {
        PinState::from(&pin_for(
            Some(v),
            phase,
            u.request.steady_state_range.as_ref(),
        ))
    })
}

/// `Keep` if something runs (re-applied: drift repair), else `Nothing`.
fn keep_or_nothing(installed: Option<&Installed>) -> Action {
    if installed.is_some() {
        Action::Keep
    } else {
        Action::Nothing
    }
}

/// Re-applies what runs under the pin it has now.
/// A first install recorded in status whose bundle no catalog lists now: its objects may have
/// been applied (the manager can stop between the apply and the status write), so installing
/// another bundle would be a move over a running operator that nobody chose (a downgrade, as
/// like as not). Nothing is written until the admin acts, and the status says how (found by
/// the state-machine test: `a_first_install_whose_bundle_left_the_catalog_is_not_installed_over`).
fn unlisted_first_install(pin: Option<PinState>, to: &str) -> PoDecision {
    // Nothing is recorded installed, yet objects of the install may run: not "nothing
    // installed" (issue 34 item 3), so not upgradeable.
    let verdict = Upgradeability::no(
        Reason::MoveNotSettled,
        format!(
            "the install of {to} has started and not finished: objects it applied may run, so POM cannot vouch for the next minor; see Degraded for what to do"
        ),
    );
    let mut decision = PoDecision::new(Action::Nothing, verdict).with_problem(
        Reason::ResolutionFailed,
        format!(
            "the first install of {to} recorded in status is offered by no catalog this PlatformOperator uses now; objects of it may have been applied, so POM does not install another bundle over them: add {to} back to a catalog (the install then finishes), or delete the PlatformOperator (its deletion removes what the install wrote)"
        ),
        true,
    );
    decision.pin = pin;
    decision
}

fn keep(verdict: Upgradeability, pin: Option<PinState>) -> PoDecision {
    let mut decision = PoDecision::new(Action::Keep, verdict);
    decision.pin = pin;
    decision
}

/// Carries out the admin's abandon of the unsettled move `hop`: a move back to the bundle that
/// ran before it, or, when no catalog has that bundle, a refusal that says so. The way back is
/// judged as any move is (issue 34 item 2): the bundle must still be one the PO may run on
/// the cluster that runs now (channel, versionRange, maxOpenShiftVersion, minKubeVersion), and
/// it waits while the ClusterVersion cannot be judged for a bundle that declares a
/// maxOpenShiftVersion, or while the running operator's gate holds it; the status says so.
fn back_to_before(
    s: &PoSnapshot<'_>,
    hop: &Hop,
    u: &Usable<'_>,
    inputs: &[CatalogInput<'_>],
    phase: Option<&ClusterPhase>,
    verdict: Upgradeability,
    current_pin: Option<PinState>,
) -> PoDecision {
    let before = hop
        .from
        .as_deref()
        .and_then(|from| find_bundle(u.catalogs, &u.request.package, from));
    let Some((catalog, bundle)) = before else {
        return keep(verdict, current_pin).with_problem(
            Reason::InvalidUnsettledMoveAction,
            format!(
                "the move to {} cannot be abandoned: the bundle that ran before it ({}) is in no catalog; remove annotation {} or add a catalog that offers it",
                hop.to,
                hop.from.as_deref().unwrap_or("none: it was the first install"),
                pom_api::labels::UNSETTLED_MOVE
            ),
            false,
        );
    };
    let cannot = |why: String| {
        format!(
            "the move to {} is abandoned (annotation {}), but the way back to {} cannot be taken now: {why}",
            hop.to,
            pom_api::labels::UNSETTLED_MOVE,
            bundle.name
        )
    };
    if let Some(Disqualification {
        why,
        by_version_range,
    }) = disqualification(u.request, u.catalogs, inputs, bundle, phase, s)
    {
        // The admin's own exclusion of the way back is undone by the admin: said first, as
        // nothing else may run (found by `make soak`: the way back excluded, the hop's bundle
        // never Available, no other bundle a successor).
        let readmit = if by_version_range {
            format!(
                "re-admit {} in spec.package.versionRange (remove its exclusion) to go back to it, or ",
                bundle.name
            )
        } else {
            String::new()
        };
        return keep(verdict, current_pin).with_problem(
            Reason::InvalidUnsettledMoveAction,
            cannot(format!(
                "{why}; {readmit}let the move to {} settle, or remove annotation {} and move on with skip:{} to a bundle that runs here",
                hop.to,
                pom_api::labels::UNSETTLED_MOVE,
                hop.to
            )),
            false,
        );
    }
    let target = move_target(catalog, bundle, u.request, phase);
    let hold = cluster_version_hold(s, target.max_openshift_version.is_some())
        .or_else(|| operator_hold(s, u.request));
    if let Some(why) = hold {
        let message = cannot(format!("it waits: {why}"));
        let mut decision = keep(verdict, current_pin).with_problem(
            Reason::InvalidUnsettledMoveAction,
            message,
            false,
        );
        decision.held = Some(Held {
            to: target.bundle_ref(),
            why,
        });
        return decision;
    }
    let mut decision = PoDecision::new(Action::Move(target), verdict);
    decision.pin = current_pin;
    decision.unsettled_move_action = Some(UnsettledMoveAction::Abandon(hop.to.clone()));
    decision
}

/// Whether `hop` is a configuration change: a move of the running bundle to itself. The
/// admin's `abandon:` does not apply to it (its way back is `spec.config`): "back" would be the
/// same bundle, re-applied with the configuration asked for (found by the state-machine test:
/// `abandon_of_a_configuration_change_hides_no_owed_move`).
fn is_configuration_change(hop: &Hop) -> bool {
    hop.from.as_deref() == Some(hop.to.as_str())
}

/// The refusal of the admin's `abandon:` whose way back cannot be taken, unless the decision
/// already reports a problem.
fn note_cannot_go_back(decision: PoDecision, refusal: Option<Problem>) -> PoDecision {
    match refusal {
        Some(problem) if decision.problem.is_none() => {
            decision.with_problem(problem.reason, problem.message, problem.degrades)
        }
        _ => decision,
    }
}

/// The admin's `abandon:` of an unsettled first install: there is nothing to go back to, so
/// it does nothing; the decision says so unless it already reports a problem.
fn note_inert_abandon(
    decision: PoDecision,
    s: &PoSnapshot<'_>,
    installed: Option<&Installed>,
) -> PoDecision {
    match admin_unsettled_action(s, installed) {
        Some((hop, UnsettledMoveAction::Abandon(_)))
            if hop.from.is_none() && decision.problem.is_none() =>
        {
            let message = format!(
                "the move to {} cannot be abandoned: it was the first install, nothing ran before it; remove annotation {}, or exclude it with spec.package.versionRange, or delete the PlatformOperator",
                hop.to,
                pom_api::labels::UNSETTLED_MOVE
            );
            decision.with_problem(Reason::InvalidUnsettledMoveAction, message, false)
        }
        Some((hop, UnsettledMoveAction::Abandon(_)))
            if is_configuration_change(hop) && decision.problem.is_none() =>
        {
            let message = format!(
                "the configuration change of {} cannot be abandoned with annotation {}: change spec.config (or the cluster proxy) back: a newer configuration replaces a change that never applied or never settled",
                hop.to,
                pom_api::labels::UNSETTLED_MOVE
            );
            decision.with_problem(Reason::InvalidUnsettledMoveAction, message, false)
        }
        _ => decision,
    }
}

/// A move to a bundle that declares a maxOpenShiftVersion (`declares_max`) waits while the
/// ClusterVersion cannot be judged: without a phase nothing checked it against the cluster.
fn cluster_version_hold(s: &PoSnapshot<'_>, declares_max: bool) -> Option<HoldReason> {
    match &s.cluster {
        ClusterView::OpenShift(Err(message)) if declares_max => {
            Some(HoldReason::ClusterVersionUnknown {
                message: message.clone(),
            })
        }
        _ => None,
    }
}

/// Resumes the move recorded as intent, under the pin a fresh resolution states (the current
/// one when none can be resolved).
fn resume(
    target: MoveTarget,
    resolved: &Result<select::Resolution, select::ResolveError>,
    verdict: Upgradeability,
    current_pin: Option<PinState>,
) -> PoDecision {
    let mut decision = PoDecision::new(Action::Move(target), verdict);
    decision.pin = match resolved {
        Ok(resolution) => Some(PinState::from(&resolution.pin)),
        Err(_) => current_pin,
    };
    decision
}

/// An unreadable annotation on an unsettled move is reported, unless a problem is already.
fn note_unreadable_unsettled_action(decision: PoDecision, s: &PoSnapshot<'_>) -> PoDecision {
    match &s.unsettled_move {
        Some(Err(message)) if decision.problem.is_none() => {
            decision.with_problem(Reason::InvalidUnsettledMoveAction, message.clone(), false)
        }
        _ => decision,
    }
}

/// A recorded move abandoned for what runs is reported, after any problem already found.
fn note_abandoned(decision: PoDecision, abandoned: Option<String>) -> PoDecision {
    match abandoned {
        None => decision,
        Some(message) => match decision.problem {
            None => decision.with_problem(Reason::MoveAbandoned, message, false),
            Some(mut problem) => {
                problem.message = format!("{}; {message}", problem.message);
                PoDecision {
                    problem: Some(problem),
                    ..decision
                }
            }
        },
    }
}

/// The decision from a fresh resolution (no recorded move to resume).
fn decide_fresh(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    resolved: Result<select::Resolution, select::ResolveError>,
    verdict: Upgradeability,
    installed: Option<&Installed>,
    phase: Option<&ClusterPhase>,
    current_pin: Option<PinState>,
) -> PoDecision {
    let resolution = match resolved {
        Ok(resolution) => resolution,
        Err(err) => return unresolvable(&err, verdict, installed, current_pin),
    };
    let mut decision = PoDecision::new(keep_or_nothing(installed), verdict);
    decision.pin = Some(PinState::from(&resolution.pin));
    decision.deprecations = deprecations(&resolution);
    if resolution.stays {
        return decision;
    }
    let chosen = &resolution.bundle;
    if let Some(abandoned) = abandoned_again(s, &chosen.name) {
        return decision.with_problem(
            Reason::MoveAbandoned,
            abandoned_again_message(abandoned),
            false,
        );
    }
    let target = chosen_target(chosen, request, phase);
    let skipped = matches!(
        admin_unsettled_action(s, installed),
        Some((_, UnsettledMoveAction::Skip(_)))
    );
    // The admin's approval is asked last: once nothing else holds the move, it is the move
    // the admin approves (OLM v0's Manual InstallPlan, the first install included).
    let hold = safety_hold(s, request, chosen, installed.is_some(), skipped)
        .or_else(|| awaiting_approval(s, request, &target.name));
    start_or_hold(decision, target, hold, s, skipped)
}

/// No bundle can be chosen: what runs keeps running under its pin (then only reported);
/// with nothing installed it is a real failure.
fn unresolvable(
    err: &select::ResolveError,
    verdict: Upgradeability,
    installed: Option<&Installed>,
    current_pin: Option<PinState>,
) -> PoDecision {
    let mut decision = PoDecision::new(keep_or_nothing(installed), verdict);
    decision.pin = current_pin;
    let message = match installed {
        Some(i) => format!(
            "{} keeps running; POM cannot choose a bundle: {err}",
            i.bundle.name
        ),
        None => err.to_string(),
    };
    decision.with_problem(Reason::ResolutionFailed, message, installed.is_none())
}

/// The deprecation notices of the package, channel and bundle resolved, for the admin.
fn deprecations(resolution: &select::Resolution) -> Vec<String> {
    [
        resolution.package_deprecation.clone(),
        resolution.channel_deprecation.clone(),
        resolution.bundle.deprecation.clone(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// The bundle the admin abandoned a move to, when resolution chose it again: it is not
/// started again while the annotation names it (else the next resolution from what ran
/// before would pick it again, and the annotation would send it back: a loop).
pub(crate) fn abandoned_again<'s>(s: &'s PoSnapshot<'_>, chosen: &str) -> Option<&'s str> {
    match &s.unsettled_move {
        Some(Ok(UnsettledMoveAction::Abandon(abandoned))) if chosen == *abandoned => {
            Some(abandoned)
        }
        _ => None,
    }
}

/// Why a move abandoned by the admin is not started again, and the ways out.
pub(crate) fn abandoned_again_message(abandoned: &str) -> String {
    format!(
        "the move to {abandoned} was abandoned (annotation {}); it is not started again while the annotation names it: exclude it with spec.package.versionRange before removing the annotation, or remove the annotation to try it again",
        pom_api::labels::UNSETTLED_MOVE
    )
}

/// A move to the bundle resolution chose, with the pin it will have once applied.
pub(crate) fn chosen_target(
    chosen: &select::ChosenBundle,
    request: &PoRequest,
    phase: Option<&ClusterPhase>,
) -> MoveTarget {
    MoveTarget {
        name: chosen.name.clone(),
        version: chosen.version.clone(),
        image: chosen.image.clone().filter(|i| !i.is_empty()),
        catalog: chosen.catalog.clone(),
        max_openshift_version: chosen.max_openshift_version.clone(),
        pin_after: PinState::from(&pin_for(
            Some(&chosen.version),
            phase,
            request.steady_state_range.as_ref(),
        )),
    }
}

/// Why the chosen move must wait for the cluster, the move in flight or the running operator
/// (§7); `None` when nothing of that holds it (the admin's approval is asked apart).
pub(crate) fn safety_hold(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    chosen: &select::ChosenBundle,
    installed: bool,
    skipped: bool,
) -> Option<HoldReason> {
    // Without a phase the resolver checked no maxOpenShiftVersion: a bundle that declares one
    // may not support the cluster it would run on. (One that declares none has nothing to
    // check.)
    if let Some(hold) = cluster_version_hold(s, chosen.max_openshift_version.is_some()) {
        return Some(hold);
    }
    if !installed {
        return None;
    }
    if move_in_flight(s) && !skipped {
        return Some(HoldReason::MoveNotSettled);
    }
    if let Some(soaking) = soak_hold(s, request) {
        return Some(soaking);
    }
    operator_hold(s, request)
}

/// The soak after the last move, while it lasts (issue 35 item 4): the next hop waits for it
/// as it waits for the move to settle.
fn soak_hold(s: &PoSnapshot<'_>, request: &PoRequest) -> Option<HoldReason> {
    let hop = s.hop.as_ref().filter(|h| h.settled)?;
    let until = crate::soak::soak_until(hop.settled_at, hop.settled_seen_for, request.soak, s.now)?;
    Some(HoldReason::Soaking {
        settled: hop.to.clone(),
        until,
    })
}

/// Starts the move, or records why it waits. A start that skips the unsettled move carries
/// the admin's action, so that it is announced when the move is applied.
pub(crate) fn start_or_hold(
    mut decision: PoDecision,
    target: MoveTarget,
    hold: Option<HoldReason>,
    s: &PoSnapshot<'_>,
    skipped: bool,
) -> PoDecision {
    match hold {
        Some(why) => {
            decision.held = Some(Held {
                to: target.bundle_ref(),
                why,
            });
        }
        None => {
            if skipped && s.hop.as_ref().is_some_and(|h| !h.settled) {
                decision.unsettled_move_action = s.unsettled_move.clone().and_then(Result::ok);
            }
            decision.action = Action::Move(target);
        }
    }
    decision
}

/// The admin's action on the unsettled move to what is installed now, when it names that move
/// (an annotation naming another bundle is inert).
pub(crate) fn admin_unsettled_action<'s>(
    s: &'s PoSnapshot<'_>,
    installed: Option<&Installed>,
) -> Option<(&'s Hop, &'s UnsettledMoveAction)> {
    let hop = s.hop.as_ref().filter(|h| !h.settled)?;
    let action = s.unsettled_move.as_ref()?.as_ref().ok()?;
    (installed?.bundle.name == hop.to && action.bundle() == hop.to).then_some((hop, action))
}

/// Why a move to `bundle` waits for the admin (`spec.upgradeApproval: Manual` and
/// `spec.approvedBundle` naming another bundle, or none); `None` when it may start.
fn awaiting_approval(s: &PoSnapshot<'_>, request: &PoRequest, bundle: &str) -> Option<HoldReason> {
    let approved = request.approved_bundle.as_deref();
    (request.upgrade_approval == UpgradeApproval::Manual && approved != Some(bundle)).then(|| {
        HoldReason::AwaitingApproval {
            po: s.name.clone(),
            bundle: bundle.to_owned(),
            approved: approved.map(str::to_owned),
        }
    })
}

/// What to do with a move recorded as intent and not applied yet.
enum Recorded {
    /// No such move (none recorded, or it is applied: what runs is its target).
    None,
    /// Resume it: its target still qualifies.
    Resume(Box<MoveTarget>),
    /// Its target no longer qualifies, for `why`.
    Abandon { to: String, why: String },
    /// A first install whose target no catalog lists any more: what it may have written
    /// before the manager stopped (between its apply and its status write) is not installed
    /// over by another bundle.
    Unlisted { to: String },
    /// A first install that applied, has not settled and no longer qualifies, for `why`: what
    /// resolves now is installed in its place.
    ReplaceInstall { to: String, why: String },
}

/// The move recorded as intent and not yet applied, if the catalog still has its bundle, and
/// whether its target still qualifies. The filters that judge a move *from* what runs (the
/// successor edge, the pin of the phase that chose it) do not disqualify it: the move was
/// chosen under them and may be half applied. The admin's versionRange and channel, and what
/// the cluster can run (maxOpenShiftVersion, minKubeVersion, dependencies) do.
fn recorded_move(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    catalogs: &[CatalogContent<'_>],
    inputs: &[CatalogInput<'_>],
    installed: Option<&Installed>,
    phase: Option<&ClusterPhase>,
) -> Recorded {
    let Some(hop) = s.hop.as_ref().filter(|h| !h.settled) else {
        return Recorded::None;
    };
    if installed.map(|i| i.bundle.name.as_str()) == Some(hop.to.as_str()) {
        return applied_first_install(s, request, catalogs, inputs, hop, phase);
    }
    // The admin's way out of a move whose apply the cluster refuses (issue 34 item 2): its
    // target was never recorded installed, so what ran before it is what status records as
    // running; it is kept (its re-apply prunes whatever of the target was applied), and the
    // target is not started again while the annotation names it.
    if hop.from.is_some()
        && matches!(&s.unsettled_move, Some(Ok(UnsettledMoveAction::Abandon(b))) if *b == hop.to)
    {
        return Recorded::Abandon {
            to: hop.to.clone(),
            why: format!(
                "the admin abandoned it (annotation {}=abandon:{})",
                pom_api::labels::UNSETTLED_MOVE,
                hop.to
            ),
        };
    }
    let Some((catalog, bundle)) = find_bundle(catalogs, &request.package, &hop.to) else {
        return if installed.is_none() && hop.from.is_none() {
            Recorded::Unlisted { to: hop.to.clone() }
        } else {
            Recorded::None
        };
    };
    if let Some(Disqualification { why, .. }) =
        disqualification(request, catalogs, inputs, bundle, phase, s)
    {
        return Recorded::Abandon {
            to: hop.to.clone(),
            why,
        };
    }
    Recorded::Resume(Box::new(move_target(catalog, bundle, request, phase)))
}

/// An unsettled move recorded and applied (its target is installed): a first install that no
/// longer qualifies is replaced (see [`replace_first_install`]); anything else is what runs.
fn applied_first_install(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    catalogs: &[CatalogContent<'_>],
    inputs: &[CatalogInput<'_>],
    hop: &Hop,
    phase: Option<&ClusterPhase>,
) -> Recorded {
    if hop.from.is_some() {
        return Recorded::None;
    }
    let why = find_bundle(catalogs, &request.package, &hop.to)
        .and_then(|(_, bundle)| disqualification(request, catalogs, inputs, bundle, phase, s))
        .map(|d| d.why);
    match why {
        Some(why) => Recorded::ReplaceInstall {
            to: hop.to.clone(),
            why,
        },
        None => Recorded::None,
    }
}

/// A move to `bundle` of `catalog`, as the catalog describes it, with the pin it will have.
fn move_target(
    catalog: &str,
    bundle: &pom_resolver::fbc::Bundle,
    request: &PoRequest,
    phase: Option<&ClusterPhase>,
) -> MoveTarget {
    MoveTarget {
        name: bundle.name.clone(),
        version: bundle.version.clone(),
        image: bundle.image.clone().filter(|i| !i.is_empty()),
        catalog: catalog.to_owned(),
        max_openshift_version: bundle.properties.max_openshift_version.clone(),
        pin_after: PinState::from(&pin_for(
            Some(&bundle.version),
            phase,
            request.steady_state_range.as_ref(),
        )),
    }
}

/// Why a bundle may not be moved to, and whether the admin's `versionRange` is what excludes
/// it (then re-admitting it is the way out).
struct Disqualification {
    why: String,
    by_version_range: bool,
}

/// Why a recorded move's target no longer qualifies, if it does not: judged as if it ran
/// already (so the successor edge and the pin of the phase that chose it do not count), by the
/// admin's versionRange and channel and by what the cluster can run. The resolver's filters
/// apply in order and report only the first that refuses, so the target is judged on its own,
/// not from the resolution from what runs.
fn disqualification(
    request: &PoRequest,
    catalogs: &[CatalogContent<'_>],
    inputs: &[CatalogInput<'_>],
    target: &pom_resolver::fbc::Bundle,
    phase: Option<&ClusterPhase>,
    s: &PoSnapshot<'_>,
) -> Option<Disqualification> {
    let to = target.name.as_str();
    let in_channel = catalogs.iter().any(|c| {
        c.content.packages.get(&request.package).is_some_and(|p| {
            request
                .channel
                .as_ref()
                .or(p.default_channel.as_ref())
                .and_then(|channel| p.channels.get(channel))
                .is_some_and(|channel| channel.entries.iter().any(|e| e.name == to))
        })
    });
    if !in_channel {
        return Some(Disqualification {
            why: format!(
                "{to} is not in the channel the PlatformOperator follows ({})",
                request
                    .channel
                    .as_deref()
                    .unwrap_or("the package's default channel")
            ),
            by_version_range: false,
        });
    }
    let mut as_if_running = resolve_request(
        request,
        inputs,
        Some(InstalledBundle {
            name: to.to_owned(),
            version: target.version.clone(),
        }),
        phase,
        s.kube_version.as_ref(),
    );
    as_if_running.pin_policy = PinPolicy::Unpinned;
    let rejections = match select::resolve(&as_if_running) {
        Ok(resolution) => resolution.rejected,
        Err(err) => err.rejections().to_vec(),
    };
    let rejection = rejections.iter().find(|r| r.bundle == to)?;
    Some(Disqualification {
        why: format!("{to} {}", rejection.reason),
        by_version_range: matches!(
            rejection.reason,
            select::RejectReason::OutsideVersionRange { .. }
        ),
    })
}

/// Bundle `name` of `package` in the first catalog that has it.
fn find_bundle<'a>(
    catalogs: &'a [CatalogContent<'_>],
    package: &str,
    name: &str,
) -> Option<(&'a str, &'a pom_resolver::fbc::Bundle)> {
    catalogs.iter().find_map(|c| {
        c.content
            .packages
            .get(package)
            .and_then(|p| p.bundles.get(name))
            .map(|b| (c.name.as_str(), b))
    })
}

/// The resolver's request for this PO (the one place it is built).
#[must_use]
pub fn resolve_request<'a>(
    request: &'a PoRequest,
    catalogs: &'a [CatalogInput<'a>],
    installed: Option<InstalledBundle>,
    phase: Option<&ClusterPhase>,
    kube_version: Option<&Version>,
) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs,
        package: &request.package,
        channel: request.channel.as_deref(),
        installed,
        version_range: request.version_range.clone(),
        steady_state_range: request.steady_state_range.clone(),
        cluster: phase.cloned(),
        kube_version: kube_version.cloned(),
        pin_policy: PinPolicy::FollowCluster,
    }
}

/// §8.3 for what runs now: OpenShift compatibility of the installed bundle, then what its
/// operator says. Fails closed on anything that cannot be read.
fn verdict_now(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    catalogs: &[CatalogContent<'_>],
    unavailable: &[String],
    installed: Option<&InstalledBundle>,
    phase: Option<&ClusterPhase>,
) -> Upgradeability {
    let Some(installed) = installed else {
        return Upgradeability::yes("nothing installed");
    };
    let compatibility = match (&s.cluster, phase) {
        (ClusterView::Kubernetes, _) => {
            Upgradeability::yes("not an OpenShift cluster: no OpenShift compatibility to judge")
        }
        _ if !unavailable.is_empty() => Upgradeability::unknown(format!(
            "catalog content is unavailable, so POM cannot judge the next minor: {}; fix the Catalog",
            unavailable.join("; ")
        )),
        (_, Some(phase)) => {
            let max = s
                .installed
                .as_ref()
                .and_then(|i| i.max_openshift_version.as_ref());
            let package = catalogs
                .iter()
                .find_map(|c| c.content.packages.get(&request.package));
            // The next minor counts from where the cluster heads (`status.desired.version`),
            // as the CVO's Upgradeable precondition and `pomctl resolve` do: during a minor
            // update the question is the update after it, so the verdict is not stale the
            // moment the update completes.
            Upgradeability::from(verdict::bundle_upgradeability(
                installed,
                max,
                phase.running_on(),
                package,
                request.channel.as_deref(),
            ))
        }
        (ClusterView::OpenShift(cluster), None) => Upgradeability::unknown(format!(
            "cannot judge the cluster version: {}",
            cluster.as_ref().err().map_or("unknown", String::as_str)
        )),
    };
    if !compatibility.allows_update() {
        return compatibility;
    }
    match &s.gate.reading {
        GateReading::Says {
            upgradeable: false,
            message,
            ..
        } => Upgradeability::no(
            Reason::OperatorNotUpgradeable,
            format!("the operator reports Upgradeable=False: {message}"),
        ),
        _ => match unreadable_gate(s, request) {
            Some(message) => Upgradeability::unknown(format!(
                "the operator's OperatorCondition has no Upgradeable for its current generation ({message})"
            )),
            None => compatibility,
        },
    }
}

/// Why the installed operator's gate cannot be read as a yes when it must be read (§7): the
/// operator has reported an OperatorCondition before (so it must report again), or the PO's
/// `upgradeGate` is `OperatorCondition`. Pending and absent alike: an OperatorCondition that
/// disappeared is no more a yes than one that is stale. `None` when the reading says
/// something, or when the gate need not be read.
fn unreadable_gate(s: &PoSnapshot<'_>, request: &PoRequest) -> Option<String> {
    // The same rule as settling (§7): `Rollout` asks nothing more of the operator, even one
    // that has reported before (issue 25 item 10).
    let must_report =
        crate::status::requires_operator_condition(request.upgrade_gate, s.gate.reported);
    if !must_report {
        return None;
    }
    match &s.gate.reading {
        GateReading::Pending { message } => Some(message.clone()),
        GateReading::Absent => Some(
            "it has no OperatorCondition, or the cluster has no OperatorCondition API".to_owned(),
        ),
        GateReading::Says { .. } => None,
    }
}
