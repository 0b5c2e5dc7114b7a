//! The PlatformOperator's status (§8.1), computed purely from the previous status, the
//! decision and what the install step reported. The one place PO conditions are decided.

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::platform_operator::{
    ActiveHop, AppliedConfig, BundleInventory, BundleRef, InstalledBundle, InventoryObject,
    PinStatus, PlatformOperatorStatus, PowerSummary, ReplacedMove, UpgradeGate,
};
use pom_resolver::fbc::MaxOpenShiftVersion;

use crate::conditions::{Desired, merge, to_api_time};
use crate::decide::{Action, HoldReason, PoDecision, Problem, Upgradeability};
use crate::snapshot::{GateReading, OperatorGate};

/// What the act step did.
#[derive(Debug, Clone, PartialEq)]
pub enum ActOutcome {
    /// Nothing was applied (the decision was `Nothing` or `WaitForCatalog`).
    Skipped,
    /// The bundle's objects are applied (a move started, or what runs was re-applied).
    Applied(Box<InstallReport>),
    /// Applying failed; what ran before is untouched.
    Failed(Problem),
}

/// What an install (or re-apply) achieved.
#[derive(Debug, Clone, PartialEq)]
pub struct InstallReport {
    /// The bundle whose objects are on the cluster now.
    pub bundle: InstalledBundle,
    /// `olm.maxOpenShiftVersion` of that bundle (`None`: it declares none, which clears the
    /// recorded value).
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
    /// What the rollout still waits for (CRDs, Deployments).
    pub waits: Vec<Wait>,
    /// The bundle's OperatorCondition, when it has a CSV: its name and what it says after
    /// POM copied `spec.conditions` to status.
    pub operator_condition: Option<OperatorConditionReport>,
    /// Objects written (0 in a steady state).
    pub wrote: usize,
    /// Every object of the bundle (written or already as wanted), for the inventory.
    pub objects: Vec<InventoryObject>,
    /// What the bundle's ServiceAccounts can do ([`power_summaries`]).
    pub powers: Vec<PowerSummary>,
    /// The bundle's Deployments that are not available now, and why (their own `Available`
    /// condition's message). After a move settled, any of them is an operator that stopped
    /// working: Degraded, and not Upgradeable.
    pub unavailable: Vec<UnavailableDeployment>,
}

/// A Deployment of the bundle that is not available.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnavailableDeployment {
    pub namespace: String,
    pub name: String,
    pub why: String,
}

impl std::fmt::Display for UnavailableDeployment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Deployment {}/{} is not available: {}",
            self.namespace, self.name, self.why
        )
    }
}

/// Examples listed per power class in status.
pub const MAX_POWER_EXAMPLES: usize = 3;
/// Bytes an example may take in status.
pub const MAX_POWER_EXAMPLE_BYTES: usize = 256;

/// The powers of a bundle as status shows them: per class, a count and the first examples,
/// bounded (a bundle can declare thousands of rules; status must stay small).
#[must_use]
pub fn power_summaries(powers: &pom_render::Powers) -> Vec<PowerSummary> {
    powers
        .classes()
        .into_iter()
        .map(|class| {
            let all: Vec<_> = powers.of(class).collect();
            PowerSummary {
                class: class.to_string(),
                count: u32::try_from(all.len()).unwrap_or(u32::MAX),
                examples: all
                    .iter()
                    .take(MAX_POWER_EXAMPLES)
                    .map(|p| {
                        cut(
                            &format!("{} {:?} {}", p.kind, p.name, p.detail),
                            MAX_POWER_EXAMPLE_BYTES,
                        )
                    })
                    .collect(),
            }
        })
        .collect()
}

/// `text` cut to at most `max` bytes at a character boundary.
fn cut(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text[..end].to_owned()
}

/// A bundle's OperatorCondition after the install step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorConditionReport {
    pub namespace: String,
    pub name: String,
    /// `None`: the cluster has no OperatorCondition API.
    pub gate: Option<OperatorGate>,
}

/// What a move waits for before it settles (§7).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Wait {
    CrdEstablished {
        name: String,
    },
    Rollout {
        namespace: String,
        name: String,
    },
    OperatorCondition {
        namespace: String,
        name: String,
        detail: String,
    },
    /// A webhook not served yet: a configuration held until its Service lists a ready endpoint
    /// of its Deployment's current pods (`webhook_serving`), or that Service itself
    /// (conversion webhooks included).
    WebhookServed {
        kind: String,
        name: String,
    },
    /// `upgradeGate: Auto` and an operator that has never reported: its rollout is over, and it
    /// has until `until` to start reporting `Upgradeable` before the move settles without it
    /// ([`AUTO_SETTLE_WINDOW`]).
    FirstReport {
        until: Timestamp,
    },
}

impl std::fmt::Display for Wait {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Wait::CrdEstablished { name } => write!(f, "CRD {name} to be Established"),
            Wait::Rollout { namespace, name } => {
                write!(f, "Deployment {namespace}/{name} to roll out")
            }
            Wait::OperatorCondition {
                namespace,
                name,
                detail,
            } => write!(
                f,
                "OperatorCondition {namespace}/{name} to report Upgradeable=True for its current generation ({detail})"
            ),
            Wait::WebhookServed { kind, name } => write!(
                f,
                "{kind} {name} to be served (its Service listing a ready endpoint of its Deployment's current pods) before the webhook is registered"
            ),
            Wait::FirstReport { until } => write!(
                f,
                "the operator to report Upgradeable in its OperatorCondition, or {until} to pass (upgradeGate Auto: a version that starts reporting is heard before the next hop; one that never reports settles then)"
            ),
        }
    }
}

/// Whether the gate requires the operator's `Upgradeable=True` to settle a move (§7).
#[must_use]
pub fn requires_operator_condition(gate: UpgradeGate, reported: bool) -> bool {
    match gate {
        UpgradeGate::Rollout => false,
        UpgradeGate::OperatorCondition => true,
        UpgradeGate::Auto => reported,
    }
}

/// How long after its rollout a move under `upgradeGate: Auto` waits for an operator that
/// has never reported to start reporting (issue 25 item 9, seed 001: the version that *added*
/// `Upgradeable` reporting must be heard before the next hop). Readiness comes before leader
/// election and the first reconcile (controller-runtime's lease is 15 s, plus its renew
/// deadline when the old pod held it), so two minutes leaves room; an operator that never
/// reports is held no longer than that. The manager's `--auto-settle-window` sets it.
pub const AUTO_SETTLE_WINDOW: Duration = Duration::from_secs(120);

/// Whether the bundle's OperatorCondition carries anything its operator wrote.
#[must_use]
pub fn reported_now(report: &InstallReport) -> bool {
    report
        .operator_condition
        .as_ref()
        .and_then(|oc| oc.gate.as_ref())
        .is_some_and(|g| g.reported)
}

/// Every wait of a report, the OperatorCondition included under the PO's gate.
#[must_use]
pub fn waits(report: &InstallReport, gate: UpgradeGate, reported_before: bool) -> Vec<Wait> {
    let mut waits = report.waits.clone();
    if !requires_operator_condition(gate, reported_before || reported_now(report)) {
        return waits;
    }
    let (namespace, name, reading) = match &report.operator_condition {
        Some(oc) => (
            oc.namespace.clone(),
            oc.name.clone(),
            oc.gate.as_ref().map(|g| &g.reading),
        ),
        None => (String::new(), report.bundle.name.clone(), None),
    };
    let detail = match reading {
        Some(reading) if reading.allows() => return waits,
        Some(GateReading::Says { message, .. } | GateReading::Pending { message }) => {
            message.clone()
        }
        Some(GateReading::Absent) | None => {
            "the bundle has no CSV, or the cluster has no OperatorCondition API".to_owned()
        }
    };
    waits.push(Wait::OperatorCondition {
        namespace,
        name,
        detail,
    });
    waits
}

/// Everything the status is computed from.
#[derive(Debug, Clone)]
pub struct StatusInput<'a> {
    pub previous: &'a PlatformOperatorStatus,
    pub generation: Option<i64>,
    pub now: Timestamp,
    pub decision: &'a PoDecision,
    pub outcome: &'a ActOutcome,
    pub upgrade_gate: UpgradeGate,
    /// The PO's operator has reported an OperatorCondition before (the PO's annotation).
    pub reported_before: bool,
    /// The objects of the bundle about to be applied, recorded in the inventory by
    /// [`intent`] before the first of them is written.
    pub applying: &'a [InventoryObject],
    /// The image (by digest) of the bundle about to be applied, recorded by [`intent`].
    pub applying_image: Option<&'a str>,
    /// The namespace the bundle is applied into: recorded at the first install, then kept.
    pub applying_namespace: Option<&'a str>,
    /// How long a rolled-out move under `upgradeGate: Auto` waits for an operator that has
    /// never reported to start ([`AUTO_SETTLE_WINDOW`] unless the manager is told otherwise).
    pub auto_settle_window: Duration,
    /// How long ago this manager first read the previous status's `activeHop.rolledOutAt` by
    /// its own clock (zero when it never did): the window is over no earlier than that allows
    /// ([`crate::clock`]).
    pub rolled_out_seen_for: Duration,
    /// How long ago this manager first read the previous status's `activeHop.settledAt` by its
    /// own clock (zero when it never did): the soak is over no earlier than that allows
    /// ([`crate::soak`]).
    pub settled_seen_for: Duration,
}

impl StatusInput<'_> {
    /// The install namespace to record: the one recorded, else the one applied into.
    fn install_namespace(&self) -> Option<String> {
        self.previous
            .install_namespace
            .clone()
            .or_else(|| self.applying_namespace.map(str::to_owned))
    }
}

/// The status that records a move before its first object is written (§7: intent before
/// writes): the hop (from, to, started) unsettled, `desiredBundle`, Progressing
/// `Installing`/`Upgrading` and Upgradeable `MoveNotSettled`. What is installed is unchanged. A
/// manager that dies before or during the apply resumes this move (see `decide`). `None` when
/// the decision starts no move.
#[must_use]
pub fn intent(input: &StatusInput<'_>) -> Option<PlatformOperatorStatus> {
    match &input.decision.action {
        Action::Move(target) => move_intent(input, target),
        Action::Keep => config_intent(input),
        Action::Nothing | Action::WaitForCatalog { .. } => None,
    }
}

/// The status that records a configuration change of what runs before its first write (issue
/// 23 item 4): a move of the running bundle to itself, unsettled, carrying the configuration's
/// digest (so a manager that dies during the apply resumes it, and the change is not judged
/// again): it settles as a move does (the Deployments roll out, the operator reports), and the
/// next move waits for it once it has applied. `appliedConfig` stays what runs until the change
/// applies: a change the API server refuses is never taken for what runs, and a revert or a
/// newer change replaces it (issue 34 item 1). `None` when no change starts, or it is recorded
/// already.
fn config_intent(input: &StatusInput<'_>) -> Option<PlatformOperatorStatus> {
    let decision = input.decision;
    let change = decision
        .config_change
        .as_ref()
        .filter(|c| c.held.is_none())?;
    let config = decision.config.as_ref()?;
    let previous = input.previous;
    let installed = previous.installed_bundle.as_ref()?;
    let recorded = previous
        .active_hop
        .as_ref()
        .is_some_and(|h| !h.settled && h.config.as_deref() == Some(config.digest.as_str()));
    if recorded || recorded_config_digest(previous) == config.digest {
        return None;
    }
    // A change that replaces an unsettled move of what runs (a first install, a hop, or a
    // change that applied) keeps that move's start: what runs has not settled since then, and
    // the progress deadline runs from it (found by the state-machine test). The change of a
    // first install's or a hop's configuration stays that move (from nothing, or from the
    // bundle before it): the next move waits for it, and `abandon:` keeps its way back. A
    // change that never applied but replaced such a move replaces it in turn: what runs is
    // still that move (`applied_unsettled`).
    let replaced = previous.active_hop.as_ref().filter(|h| {
        !h.settled
            && h.to == installed.name
            && (h.config.is_none()
                || h.from.is_none()
                || h.applied_unsettled
                || h.config.as_deref() == Some(recorded_config_digest(previous).as_str()))
    });
    let from = replaced.map_or_else(|| Some(installed.name.clone()), |h| h.from.clone());
    let now = to_api_time(input.now);
    let started_at = replaced.map_or_else(|| now.clone(), |h| h.started_at.clone());
    let conditions = vec![
        Desired::new(
            types::PROGRESSING,
            ConditionStatus::True,
            Reason::Reconfiguring,
            format!(
                "applying configuration {} to {}: its Deployments roll out again (the operator restarts)",
                change.digest, installed.name
            ),
        ),
        degraded_condition(
            decision.problem.as_ref(),
            false,
            Some(installed.name.as_str()),
            &[],
            &[],
        ),
        Desired::new(
            types::UPGRADEABLE,
            ConditionStatus::False,
            Reason::MoveNotSettled,
            format!(
                "the configuration change {} of {} has started; wait for it before updating the cluster",
                change.digest, installed.name
            ),
        ),
    ];
    Some(PlatformOperatorStatus {
        observed_generation: input.generation,
        conditions: merge(&previous.conditions, &conditions, input.generation, &now),
        active_hop: Some(ActiveHop {
            started_at,
            waiting_for: Some(format!("configuration {} to be applied", change.digest)),
            config: Some(change.digest.clone()),
            applied_unsettled: replaced.is_some(),
            ..new_hop(from, &installed.name, installed.image.clone(), &now)
        }),
        ..previous.clone()
    })
}

/// The digest of the configuration `status` records as applied (none recorded: none).
#[must_use]
pub fn recorded_config_digest(status: &PlatformOperatorStatus) -> String {
    status
        .applied_config
        .as_ref()
        .map_or_else(|| AppliedConfig::none().digest, |c| c.digest.clone())
}

/// The status that records a move of the bundle (see [`intent`]).
fn move_intent(
    input: &StatusInput<'_>,
    target: &crate::decide::MoveTarget,
) -> Option<PlatformOperatorStatus> {
    let previous = input.previous;
    // Already recorded (a retry of the same move): nothing to add, and rewriting the
    // conditions would make a refused move flap between Installing and its refusal.
    if let Some(hop) = previous
        .active_hop
        .as_ref()
        .filter(|hop| hop.to == target.name && !hop.settled)
    {
        return retried_move(input, target, hop);
    }
    let now = to_api_time(input.now);
    let installed = previous.installed_bundle.as_ref();
    let conditions = move_started_conditions(input, target, installed);
    Some(PlatformOperatorStatus {
        observed_generation: input.generation,
        conditions: merge(&previous.conditions, &conditions, input.generation, &now),
        installed_bundle: installed.cloned(),
        desired_bundle: Some(target.bundle_ref()),
        pin: previous.pin.clone(),
        active_hop: Some(started_hop(input, target, &now)),
        max_open_shift_version: previous.max_open_shift_version.clone(),
        inventory: crate::inventory::with_bundle(&previous.inventory, &target.name, input.applying),
        install_namespace: input.install_namespace(),
        powers: previous.powers.clone(),
        applied_config: previous.applied_config.clone(),
    })
}

/// A retry of the move `hop` already records: only the inventory may need the target's
/// objects (a move recorded before they were known, e.g. by an older manager), and the image
/// digest and install namespace, recorded once and then kept; `None` when nothing is added.
fn retried_move(
    input: &StatusInput<'_>,
    target: &crate::decide::MoveTarget,
    hop: &ActiveHop,
) -> Option<PlatformOperatorStatus> {
    let previous = input.previous;
    let inventory =
        crate::inventory::with_bundle(&previous.inventory, &target.name, input.applying);
    let image = hop
        .image
        .clone()
        .or_else(|| input.applying_image.map(str::to_owned));
    let install_namespace = input.install_namespace();
    let unchanged = inventory == previous.inventory
        && image == hop.image
        && install_namespace == previous.install_namespace;
    (!unchanged).then(|| PlatformOperatorStatus {
        inventory,
        install_namespace,
        active_hop: Some(ActiveHop {
            image,
            ..hop.clone()
        }),
        ..previous.clone()
    })
}

/// The unsettled hop a new move records as intent: from what is installed to the target.
fn started_hop(
    input: &StatusInput<'_>,
    target: &crate::decide::MoveTarget,
    now: &Time,
) -> ActiveHop {
    // A move from an unsettled first install that applied (it replaces it: the admin excluded
    // it, or skipped it) is still the first install: nothing ran settled before it, so there
    // is no way back to name (found by the state-machine test:
    // `a_held_configuration_of_an_unsettled_install_names_its_override`).
    // Likewise one from a first install whose replacement was recorded and never applied.
    let installed = input.previous.installed_bundle.as_ref();
    let replaces_first_install = over_first_install(input.previous.active_hop.as_ref());
    let replaced = replaced_move(input.previous);
    let intent = |from: Option<String>| ActiveHop {
        waiting_for: Some(format!("{} to be applied", target.name)),
        ..new_hop(
            from,
            &target.name,
            input.applying_image.map(str::to_owned),
            now,
        )
    };
    // A move back to what runs, over an intent that never applied: the move of what runs
    // again, as it was (its start and where it came from), not a new one.
    if let Some(back) = replaced
        .as_ref()
        .filter(|_| installed.is_some_and(|b| b.name == target.name))
    {
        return ActiveHop {
            started_at: back.started_at.clone(),
            ..intent(back.from.clone())
        };
    }
    ActiveHop {
        replaces: replaced,
        ..intent(
            installed
                .filter(|_| !replaces_first_install)
                .map(|b| b.name.clone()),
        )
    }
}

/// The conditions of a move about to be applied: what runs is unchanged, the move
/// progresses, and Upgradeable is False until it settles.
fn move_started_conditions(
    input: &StatusInput<'_>,
    target: &crate::decide::MoveTarget,
    installed: Option<&InstalledBundle>,
) -> Vec<Desired> {
    let applying = format!("applying {} {}", target.name, target.version);
    vec![
        match installed {
            Some(b) => Desired::new(
                types::INSTALLED,
                ConditionStatus::True,
                Reason::InstallSucceeded,
                format!("installed {} {}", b.name, b.version),
            ),
            None => Desired::new(
                types::INSTALLED,
                ConditionStatus::False,
                Reason::Installing,
                applying.clone(),
            ),
        },
        Desired::new(
            types::PROGRESSING,
            ConditionStatus::True,
            if installed.is_none() {
                Reason::Installing
            } else {
                Reason::Upgrading
            },
            applying,
        ),
        degraded_condition(
            input.decision.problem.as_ref(),
            input.decision.deadline_exceeded,
            Some(target.name.as_str()),
            &[],
            &[],
        ),
        Desired::new(
            types::UPGRADEABLE,
            ConditionStatus::False,
            Reason::MoveNotSettled,
            format!(
                "the move to {} has started; wait for it before updating the cluster",
                target.name
            ),
        ),
    ]
}

/// Computes the new status.
#[must_use]
pub fn compute(input: &StatusInput<'_>) -> PlatformOperatorStatus {
    let previous = input.previous;
    let decision = input.decision;
    let now = to_api_time(input.now);
    let mut act = after_act(input);
    let active_hop =
        active_hop_after(input, &mut act, &now).map(|hop| with_soak(hop, decision.soak, input));
    let settled = active_hop.as_ref().is_none_or(|h| h.settled);
    let verdict = verdict_shown(act.installed.as_ref(), decision);
    let stopped_working = stopped_working(input.outcome, settled && !act.moved);
    let desired = desired_bundle(decision, act.installed.as_ref());
    let pin = pin_status(decision, act.applied, previous);
    let installed_before = previous.installed_bundle.as_ref();
    let problem = problem_shown(
        input.outcome,
        decision,
        active_hop.as_ref(),
        installed_before,
    );
    let refused = matches!(input.outcome, ActOutcome::Failed(_))
        .then(|| {
            refused_move(decision, active_hop.as_ref(), installed_before)
                .map(|r| r.what())
                .or_else(|| refused_beside_a_move(decision, active_hop.as_ref(), installed_before))
        })
        .flatten();
    let first_install = previous.installed_bundle.is_none()
        || active_hop.as_ref().is_some_and(|h| h.from.is_none());
    let conditions = po_conditions(&Facts {
        decision,
        installed: act.installed.as_ref(),
        problem: problem.as_ref(),
        settled,
        moved: act.moved,
        first_install,
        waits: &act.waits,
        desired: desired.as_ref().map(|d| d.name.as_str()),
        hop: active_hop.as_ref(),
        stopped_working: &stopped_working,
        verdict: &verdict,
        refused: refused.as_deref(),
    });
    let ApplyRecords {
        inventory,
        install_namespace,
        powers,
        applied_config,
    } = apply_records(input);
    PlatformOperatorStatus {
        observed_generation: input.generation,
        conditions: merge(&previous.conditions, &conditions, input.generation, &now),
        installed_bundle: act.installed,
        desired_bundle: desired,
        pin,
        active_hop,
        max_open_shift_version: act.max_ocp,
        inventory,
        install_namespace,
        powers,
        applied_config,
    }
}

/// What is installed after the act step, and what its rollout waits for.
struct AfterAct {
    installed: Option<InstalledBundle>,
    /// `olm.maxOpenShiftVersion` of what is installed, as status records it.
    max_ocp: Option<String>,
    waits: Vec<Wait>,
    /// The bundle's objects were applied.
    applied: bool,
    /// The apply changed the installed bundle: a move started.
    moved: bool,
}

/// What the act step leaves installed: an apply records its bundle and its waits; a skip or
/// a failure leaves what was recorded.
fn after_act(input: &StatusInput<'_>) -> AfterAct {
    let previous = input.previous;
    let (installed, max_ocp, waits, applied) = match input.outcome {
        ActOutcome::Applied(report) => (
            Some(report.bundle.clone()),
            report
                .max_openshift_version
                .as_ref()
                .map(ToString::to_string),
            waits(report, input.upgrade_gate, input.reported_before),
            true,
        ),
        ActOutcome::Skipped | ActOutcome::Failed(_) => (
            previous.installed_bundle.clone(),
            previous.max_open_shift_version.clone(),
            Vec::new(),
            false,
        ),
    };
    let moved = applied
        && installed.as_ref().map(|b| &b.name)
            != previous.installed_bundle.as_ref().map(|b| &b.name);
    AfterAct {
        installed,
        max_ocp,
        waits,
        applied,
        moved,
    }
}

/// The active hop after the act step: a new move starts when the installed bundle changes;
/// once settled, it stays settled (a later rollout is drift, not a move).
fn active_hop_after(input: &StatusInput<'_>, act: &mut AfterAct, now: &Time) -> Option<ActiveHop> {
    match (&act.installed, act.applied) {
        (Some(now_installed), true) => Some(applied_hop(
            input,
            now_installed,
            act.moved,
            &mut act.waits,
            now,
        )),
        _ => unapplied_hop(input),
    }
}

/// The hop of an apply: the same move, or a new one; settled once nothing is waited for,
/// never by the reconcile that applied it. Adds the first-report window to `waits`.
fn applied_hop(
    input: &StatusInput<'_>,
    now_installed: &InstalledBundle,
    moved: bool,
    waits: &mut Vec<Wait>,
    now: &Time,
) -> ActiveHop {
    let previous = input.previous;
    let mut hop = match &previous.active_hop {
        // The same move: still settling, or recorded as intent before this apply.
        Some(hop) if hop.to == now_installed.name && (!moved || !hop.settled) => hop.clone(),
        // What runs, applied again once a move recorded over its unsettled move was dropped
        // without applying: that move, as it was (review of session 23: seeds 777, 8088088).
        Some(hop) if !moved && !hop.settled && hop.replaces.is_some() => {
            let replaced = hop.replaces.clone();
            ActiveHop {
                from: replaced.as_ref().and_then(|r| r.from.clone()),
                started_at: replaced.map_or_else(|| now.clone(), |r| r.started_at),
                ..new_hop(None, &now_installed.name, now_installed.image.clone(), now)
            }
        }
        _ => new_hop(
            previous
                .installed_bundle
                .as_ref()
                .filter(|_| !over_first_install(previous.active_hop.as_ref()))
                .map(|b| b.name.clone()),
            &now_installed.name,
            now_installed.image.clone(),
            now,
        ),
    };
    // Applied: the failures before it are over, and a configuration change of what runs
    // records the configuration it applied (a revert that replaced one that never applied
    // records the revert's).
    hop.failed_attempts = 0;
    hop.applied_unsettled = false;
    hop.replaces = None;
    if let (Some(_), Some(config), false) = (&hop.config, &input.decision.config, moved) {
        hop.config = Some(config.digest.clone());
    }
    if let (ActOutcome::Applied(report), false) = (input.outcome, moved || hop.settled) {
        let window = first_report_window(&mut hop, waits, report, input);
        waits.extend(window);
    }
    // A move is never settled by the reconcile that applied it: the verdict of this
    // reconcile was made for what ran before, so the next one judges the new bundle
    // before Upgradeable may say True.
    let was_settled = hop.settled;
    hop.settled = hop.settled || (waits.is_empty() && !moved);
    if hop.settled && !was_settled {
        hop.settled_at = Some(now.clone());
    }
    hop.waiting_for = (!hop.settled).then(|| join(waits));
    hop
}

/// Whether an apply replaces `hop`, an unsettled first install (or a move recorded in its
/// place, from nothing): nothing ran settled before it, so the apply is still that first
/// install, with no way back to name. A re-apply of the first install after its replacement
/// was abandoned was recorded as a hop from that bundle to itself, and past the deadline
/// Degraded named no way out (review of session 22, finding 3:
/// `a_first_install_re_admitted_after_its_refused_replacement_stays_a_first_install`).
fn over_first_install(hop: Option<&ActiveHop>) -> bool {
    hop.is_some_and(|h| !h.settled && h.from.is_none())
}

/// The unsettled move of the bundle that runs, for a move about to be recorded over it (see
/// `ActiveHop::replaces`): the recorded move itself when it is the move of what runs, else
/// what an intent recorded over it and never applied kept.
fn replaced_move(previous: &PlatformOperatorStatus) -> Option<ReplacedMove> {
    let hop = previous.active_hop.as_ref().filter(|h| !h.settled)?;
    let runs = previous
        .installed_bundle
        .as_ref()
        .is_some_and(|b| b.name == hop.to);
    // A configuration change of what runs that applied, or one recorded over its unsettled
    // move, is that move too: it keeps its `from` and start (second review of session 23, H1).
    let of_what_runs = hop.config.is_none()
        || hop.applied_unsettled
        || hop.config.as_deref() == Some(recorded_config_digest(previous).as_str());
    if runs && of_what_runs {
        return Some(ReplacedMove {
            from: hop.from.clone(),
            started_at: hop.started_at.clone(),
        });
    }
    hop.replaces.clone()
}

/// A move from `from` to bundle `to` (its image `image`), started now: unsettled, nothing
/// waited for, failed or recorded of it yet.
fn new_hop(from: Option<String>, to: &str, image: Option<String>, now: &Time) -> ActiveHop {
    ActiveHop {
        from,
        to: to.to_owned(),
        started_at: now.clone(),
        settled: false,
        waiting_for: None,
        image,
        failed_attempts: 0,
        rolled_out_at: None,
        config: None,
        applied_unsettled: false,
        settled_at: None,
        soak_until: None,
        replaces: None,
    }
}

/// The hop with its soak (issue 35 item 4): `soakUntil` while `spec.soak` after its settle
/// lasts, from the one rule ([`crate::soak::soak_until`]); recomputed on every reconcile, so a
/// changed `spec.soak` takes effect and an ended soak is cleared.
/// The settle instant this manager watched is the previous status's; one just recorded (or
/// another) has been watched for no time.
fn with_soak(mut hop: ActiveHop, soak: Duration, input: &StatusInput<'_>) -> ActiveHop {
    let previous = input
        .previous
        .active_hop
        .as_ref()
        .and_then(|h| h.settled_at.as_ref());
    let seen_for = if previous.is_some() && previous == hop.settled_at.as_ref() {
        input.settled_seen_for
    } else {
        Duration::ZERO
    };
    hop.soak_until = hop
        .settled
        .then(|| {
            crate::soak::soak_until(
                hop.settled_at.as_ref().map(|t| t.0),
                seen_for,
                soak,
                input.now,
            )
        })
        .flatten()
        .map(Time);
    hop
}

/// The hop when nothing was applied: a recorded move whose apply failed (after its intent)
/// is counted, so retries back off and the admin sees how many failed (issue 25 item 3);
/// any other hop stays as recorded.
fn unapplied_hop(input: &StatusInput<'_>) -> Option<ActiveHop> {
    let previous = input.previous;
    match (&previous.active_hop, input.outcome, &input.decision.action) {
        (Some(hop), ActOutcome::Failed(_), Action::Move(target))
            if !hop.settled && hop.to == target.name =>
        {
            Some(ActiveHop {
                failed_attempts: hop.failed_attempts.saturating_add(1),
                ..hop.clone()
            })
        }
        // A configuration change of what runs whose apply failed: counted and backed off as a
        // hop's (issue 34 item 1). Likewise the re-apply of a move that applied once and has
        // not settled (a policy engine that came after its first apply): it cannot settle
        // while its objects are refused (found by the state-machine test).
        (Some(hop), ActOutcome::Failed(_), Action::Keep)
            if reapply_retries(hop, previous.installed_bundle.as_ref()) =>
        {
            Some(ActiveHop {
                failed_attempts: hop.failed_attempts.saturating_add(1),
                ..hop.clone()
            })
        }
        _ => previous.active_hop.clone(),
    }
}

/// Whether a re-apply of what runs (`Action::Keep`) retries `hop`, so that its failure is the
/// hop's: a configuration change of what runs, or the re-apply of a move that applied once and
/// has not settled. Any other unsettled hop (a move the admin abandoned, say) is not what the
/// re-apply applies: its failure is neither counted on it nor reported as its refusal.
fn reapply_retries(hop: &ActiveHop, installed: Option<&InstalledBundle>) -> bool {
    !hop.settled && (hop.config.is_some() || installed.is_some_and(|i| i.name == hop.to))
}

/// The re-apply of what runs, refused while a move it does not retry is recorded unsettled
/// (one the admin abandoned): Upgradeable names that refusal, not "wait for" the move (found
/// by the state-machine test: `a_refused_reapply_beside_an_abandoned_move_is_not_told_to_wait`).
fn refused_beside_a_move(
    decision: &PoDecision,
    hop: Option<&ActiveHop>,
    installed: Option<&InstalledBundle>,
) -> Option<String> {
    let hop = hop.filter(|h| !h.settled)?;
    match (&decision.action, installed) {
        (Action::Keep, Some(i)) if !reapply_retries(hop, Some(i)) => {
            Some(format!("{} (what runs)", i.name))
        }
        _ => None,
    }
}

/// The verdict status shows. What runs was recovered from its objects (a status restored
/// without it) but its re-apply failed: the status still records nothing installed, so the
/// recovered bundle's verdict vouches for nothing the status shows (found by the
/// state-machine test).
fn verdict_shown(installed: Option<&InstalledBundle>, decision: &PoDecision) -> Upgradeability {
    match (installed, &decision.action) {
        (None, Action::Keep) => Upgradeability::unknown(format!(
            "objects of this PlatformOperator run, but re-applying them to record them in status failed; {}",
            decision.verdict.message
        )),
        _ => decision.verdict.clone(),
    }
}

/// A settled operator whose Deployment is no longer available stopped working: that is not
/// a move (nothing is re-judged or re-applied for it), it is a fault to report (§8.1).
fn stopped_working(outcome: &ActOutcome, settled_unmoved: bool) -> Vec<&UnavailableDeployment> {
    match outcome {
        ActOutcome::Applied(report) if settled_unmoved => report.unavailable.iter().collect(),
        _ => Vec::new(),
    }
}

/// Where the PO is heading: the move chosen (started, refused by the cluster, or failed:
/// it is still owed, so the PO is not at its pin), or the one held; `None` once installed.
fn desired_bundle(decision: &PoDecision, installed: Option<&InstalledBundle>) -> Option<BundleRef> {
    match (&decision.action, &decision.held) {
        (_, Some(held)) => Some(held.to.clone()),
        (Action::Move(target), None) => Some(target.bundle_ref()),
        _ => None,
    }
    .filter(|d| installed.is_none_or(|i| i.name != d.name))
}

/// The pin status shows: a move applied now runs under its target's pin, anything else
/// under the decision's; the one recorded when the decision states none, judged for no
/// cluster version once what runs is left unjudged ([`PoDecision::runs_unjudged`]: found by
/// the state-machine soak, a duplicate's loser whose stale pin let the release be reported).
fn pin_status(
    decision: &PoDecision,
    applied: bool,
    previous: &PlatformOperatorStatus,
) -> Option<PinStatus> {
    match (&decision.action, applied) {
        (Action::Move(target), true) => Some(&target.pin_after),
        _ => decision.pin.as_ref(),
    }
    .map(|p| PinStatus {
        range: p.range.clone(),
        reason: p.reason,
        cluster_version: decision.judged_for.as_ref().map(ToString::to_string),
    })
    .or_else(|| {
        previous.pin.clone().map(|pin| PinStatus {
            cluster_version: pin.cluster_version.filter(|_| !decision.runs_unjudged),
            ..pin
        })
    })
}

/// The problem status shows: a failed apply (counted, with when POM tries again, when it
/// retries the recorded move), else the decision's.
fn problem_shown(
    outcome: &ActOutcome,
    decision: &PoDecision,
    hop: Option<&ActiveHop>,
    installed: Option<&InstalledBundle>,
) -> Option<Problem> {
    let ActOutcome::Failed(problem) = outcome else {
        return decision.problem.clone();
    };
    match refused_move(decision, hop, installed) {
        Some(refused) => Some(Problem {
            message: format!(
                "{} ({} failed attempts to apply {}; POM tries again in {}s); {}",
                problem.message,
                refused.hop.failed_attempts,
                refused.what(),
                failure_backoff(refused.hop.failed_attempts).as_secs(),
                refused.ways_out(decision)
            ),
            ..problem.clone()
        }),
        None => Some(problem.clone()),
    }
}

/// A recorded move whose applies keep failing (a policy engine, a quota, an admission plugin
/// refusing it): a bundle move retried, a configuration change of what runs, or the re-apply
/// of a move that applied once and has not settled.
struct RefusedMove<'a> {
    hop: &'a ActiveHop,
    /// The bundle move's target, when it is one.
    target: Option<&'a crate::decide::MoveTarget>,
}

/// The move the decision retries whose applies failed, if any.
fn refused_move<'a>(
    decision: &'a PoDecision,
    hop: Option<&'a ActiveHop>,
    installed: Option<&InstalledBundle>,
) -> Option<RefusedMove<'a>> {
    let hop = hop.filter(|h| !h.settled && h.failed_attempts > 0)?;
    match &decision.action {
        Action::Move(target) if target.name == hop.to => Some(RefusedMove {
            hop,
            target: Some(target),
        }),
        // A configuration change, or the re-apply of the move's own bundle: the condition
        // `unapplied_hop` counts its failures by (review M5: not the stale count of a move the
        // admin abandoned).
        Action::Keep if reapply_retries(hop, installed) => Some(RefusedMove { hop, target: None }),
        _ => None,
    }
}

impl RefusedMove<'_> {
    /// What is refused, as the object of "apply".
    fn what(&self) -> String {
        match (&self.hop.config, self.target) {
            (Some(digest), None) => format!("configuration {digest} to {}", self.hop.to),
            _ => self.hop.to.clone(),
        }
    }

    /// The admin's ways out of a move the cluster refuses (issue 34 item 2): it does not
    /// happen by waiting.
    fn ways_out(&self, decision: &PoDecision) -> String {
        let Some(target) = self.target else {
            return match (&self.hop.config, &self.hop.from) {
                (Some(_), _) => "it will not apply by waiting: fix what refuses it, or change spec.config (or the cluster proxy) back, or to a configuration the cluster accepts: a newer configuration replaces a change that never applied or never settled".to_owned(),
                (None, Some(from)) => format!(
                    "it will not settle by waiting: fix what refuses it, or go back to {from} with `kubectl annotate platformoperator {} {}=abandon:{} --overwrite`",
                    decision.po,
                    pom_api::labels::UNSETTLED_MOVE,
                    self.hop.to
                ),
                (None, None) => "it will not settle by waiting: fix what refuses it, or delete the PlatformOperator".to_owned(),
            };
        };
        let exclude = format!(
            "exclude {} with spec.package.versionRange (add `!={}` to it)",
            target.name, target.version
        );
        match &self.hop.from {
            Some(from) => format!(
                "it will not happen by waiting: fix what refuses it, or go back to {from} with `kubectl annotate platformoperator {} {}=abandon:{} --overwrite`, or {exclude}",
                decision.po,
                pom_api::labels::UNSETTLED_MOVE,
                target.name
            ),
            // A first install recorded in status is not cleared by excluding it: objects it
            // applied may run, so it stays recorded until it finishes, another bundle installs
            // in its place, or the PlatformOperator is deleted; only the first and the last are
            // sure ways out (found by the state-machine test:
            // `a_refused_first_install_names_a_way_out_that_clears_it`).
            None => "it will not happen by waiting: fix what refuses it, or delete the PlatformOperator (its deletion removes what the install wrote)".to_owned(),
        }
    }
}

/// What a PO's four conditions are decided from.
struct Facts<'a> {
    decision: &'a PoDecision,
    installed: Option<&'a InstalledBundle>,
    problem: Option<&'a Problem>,
    settled: bool,
    moved: bool,
    first_install: bool,
    waits: &'a [Wait],
    desired: Option<&'a str>,
    hop: Option<&'a ActiveHop>,
    stopped_working: &'a [&'a UnavailableDeployment],
    verdict: &'a Upgradeability,
    /// What the move the cluster refused this time applies ([`RefusedMove::what`]).
    refused: Option<&'a str>,
}

/// The PO's conditions, in the order status lists them.
fn po_conditions(f: &Facts<'_>) -> Vec<Desired> {
    vec![
        installed_condition(
            f.installed,
            f.problem,
            f.settled,
            f.first_install,
            f.waits,
            f.decision,
        ),
        progressing_condition(f),
        with_deadline_way_out(
            degraded_condition(
                f.problem,
                f.decision.deadline_exceeded && !f.settled,
                f.hop.map(|h| h.to.as_str()),
                f.waits,
                f.stopped_working,
            ),
            f.hop,
            f.installed,
            &f.decision.po,
        ),
        upgradeable_condition(UpgradeableInput {
            verdict: f.verdict,
            settled: f.settled,
            hop: f.hop,
            desired: f.desired,
            installed: f.installed.is_some(),
            stopped_working: f.stopped_working,
            blocked: f.problem.filter(|p| p.degrades),
            held: f.decision.held.as_ref().map(|h| &h.why),
            paused: f.decision.paused.is_some(),
            refused: f.refused,
        }),
    ]
}

/// What status records of the act step besides the bundle.
struct ApplyRecords {
    inventory: Vec<BundleInventory>,
    install_namespace: Option<String>,
    powers: Vec<PowerSummary>,
    applied_config: Option<AppliedConfig>,
}

/// An apply records its objects in the inventory, the namespace it was applied into, its
/// powers, and the configuration the decision rendered; a skip or failure keeps the records.
fn apply_records(input: &StatusInput<'_>) -> ApplyRecords {
    let previous = input.previous;
    let ActOutcome::Applied(report) = input.outcome else {
        return ApplyRecords {
            inventory: previous.inventory.clone(),
            install_namespace: previous.install_namespace.clone(),
            powers: previous.powers.clone(),
            applied_config: previous.applied_config.clone(),
        };
    };
    ApplyRecords {
        inventory: crate::inventory::with_bundle(
            &previous.inventory,
            &report.bundle.name,
            &report.objects,
        ),
        install_namespace: input.install_namespace(),
        powers: report.powers.clone(),
        // What was applied runs with the configuration the decision rendered.
        applied_config: match &input.decision.config {
            Some(config) => Some(config.clone()).filter(|c| !c.is_empty()),
            None => previous.applied_config.clone(),
        },
    }
}

/// What a move waits for, as the end of a "waiting for ..." sentence. With no typed wait
/// (the reconcile that applied the move, or an apply that did not happen) the move waits for
/// its objects to be applied and checked again, and says so rather than ending in nothing
/// (issue 34 item 7).
fn join(waits: &[Wait]) -> String {
    if waits.is_empty() {
        return NO_TYPED_WAIT.to_owned();
    }
    waits
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// [`join`] of no waits.
const NO_TYPED_WAIT: &str = "its objects to be applied and checked again";

fn installed_condition(
    installed: Option<&InstalledBundle>,
    problem: Option<&Problem>,
    settled: bool,
    first_install: bool,
    waits: &[Wait],
    decision: &PoDecision,
) -> Desired {
    // Nothing installed because the admin holds it (issue 23 item 5): not a failure, and the
    // message says what to do. A real failure (it degrades) says more and comes first.
    if installed.is_none() && problem.is_none_or(|p| !p.degrades) {
        if let Some(paused) = &decision.paused {
            return Desired::new(
                types::INSTALLED,
                ConditionStatus::False,
                Reason::Paused,
                paused.clone(),
            );
        }
        if let Some(held) = decision.held.as_ref().filter(|h| h.why.awaits_approval()) {
            return Desired::new(
                types::INSTALLED,
                ConditionStatus::False,
                Reason::UpgradePendingApproval,
                format!("the install of {} waits: {}", held.to.name, held.why),
            );
        }
    }
    match (installed, problem) {
        (None, Some(problem)) => Desired::new(
            types::INSTALLED,
            ConditionStatus::False,
            problem.reason,
            problem.message.clone(),
        ),
        (None, None) => Desired::new(
            types::INSTALLED,
            ConditionStatus::False,
            Reason::Installing,
            "waiting for a bundle to install",
        ),
        (Some(b), _) if !settled && first_install => Desired::new(
            types::INSTALLED,
            ConditionStatus::False,
            Reason::Installing,
            format!(
                "installing {} {}: waiting for {}",
                b.name,
                b.version,
                join(waits)
            ),
        ),
        // Still running, but OLM's again (`platform.openshift.io/give-back`): say so, not that
        // POM installed it.
        (Some(_), Some(problem)) if problem.reason == Reason::GivenBack => Desired::new(
            types::INSTALLED,
            ConditionStatus::True,
            Reason::GivenBack,
            problem.message.clone(),
        ),
        (Some(b), Some(problem)) => Desired::new(
            types::INSTALLED,
            ConditionStatus::True,
            Reason::InstallSucceeded,
            format!(
                "{} {} keeps running: {}",
                b.name, b.version, problem.message
            ),
        ),
        (Some(b), None) => Desired::new(
            types::INSTALLED,
            ConditionStatus::True,
            Reason::InstallSucceeded,
            format!("installed {} {}", b.name, b.version),
        ),
    }
}

fn progressing_condition(p: &Facts<'_>) -> Desired {
    let progressing = |reason, message: String| {
        Desired::new(types::PROGRESSING, ConditionStatus::True, reason, message)
    };
    // Paused: POM moves nothing, whatever else is true (a fault still shows in Degraded).
    if let Some(paused) = &p.decision.paused {
        return Desired::new(
            types::PROGRESSING,
            ConditionStatus::False,
            Reason::Paused,
            paused.clone(),
        );
    }
    if let Some(problem) = p.problem.filter(|p| p.degrades) {
        return Desired::new(
            types::PROGRESSING,
            ConditionStatus::False,
            problem.reason,
            "blocked; see Degraded",
        );
    }
    if !p.settled {
        return unsettled_progressing(p);
    }
    if let Some(to) = p.desired {
        // Nothing progresses until the admin approves: not Progressing, and why.
        if let Some(why) = p
            .decision
            .held
            .as_ref()
            .map(|h| &h.why)
            .filter(|why| why.awaits_approval())
        {
            return Desired::new(
                types::PROGRESSING,
                ConditionStatus::False,
                Reason::UpgradePendingApproval,
                format!("the move to {to} waits: {why}"),
            );
        }
        let why = match p.decision.held.as_ref().map(|h| &h.why) {
            Some(HoldReason::MoveNotSettled) | None => "next".to_owned(),
            Some(why) => format!("held: {why}"),
        };
        return progressing(Reason::Upgrading, format!("moving to {to}: {why}"));
    }
    // A configuration change that waits: nothing progresses until what holds it is over.
    if let Some(change) = p
        .decision
        .config_change
        .as_ref()
        .filter(|c| c.held.is_some())
    {
        return Desired::new(
            types::PROGRESSING,
            ConditionStatus::False,
            Reason::ConfigChangeHeld,
            change.to_string(),
        );
    }
    if let Some(problem) = p.problem {
        return Desired::new(
            types::PROGRESSING,
            ConditionStatus::False,
            problem.reason,
            problem.message.clone(),
        );
    }
    if let Some(message) = p.hop.and_then(soaking_message) {
        return progressing(Reason::Soaking, message);
    }
    Desired::new(
        types::PROGRESSING,
        ConditionStatus::False,
        Reason::AsExpected,
        "at the desired bundle",
    )
}

/// Progressing of a move that has not settled: what it waits for, and a configuration change
/// held beside it.
fn unsettled_progressing(p: &Facts<'_>) -> Desired {
    let progressing = |reason, message: String| {
        Desired::new(types::PROGRESSING, ConditionStatus::True, reason, message)
    };
    let waiting = join(p.waits);
    if p.moved {
        let reason = if p.first_install {
            Reason::Installing
        } else {
            Reason::Upgrading
        };
        return progressing(reason, format!("applied; waiting for {waiting}"));
    }
    let reason = if p
        .waits
        .iter()
        .any(|w| matches!(w, Wait::OperatorCondition { .. }))
    {
        Reason::WaitingForOperatorCondition
    } else {
        Reason::WaitingForRollout
    };
    // A configuration change that waits beside the unsettled move (the operator's gate
    // holds it) is said here too, with its way out: a move that never becomes Available
    // may need exactly that change, and its operator, not running, never lifts the hold
    // (found by the state-machine test:
    // `a_held_configuration_of_an_unsettled_install_names_its_override`).
    let held_change = p
        .decision
        .config_change
        .as_ref()
        .filter(|c| c.held.is_some())
        .map_or_else(String::new, |c| format!("; {c}"));
    progressing(reason, format!("waiting for {waiting}{held_change}"))
}

fn degraded_condition(
    problem: Option<&Problem>,
    deadline_exceeded: bool,
    moving_to: Option<&str>,
    waits: &[Wait],
    stopped_working: &[&UnavailableDeployment],
) -> Desired {
    if let Some(problem) = problem.filter(|p| p.degrades) {
        return Desired::new(
            types::DEGRADED,
            ConditionStatus::True,
            problem.reason,
            problem.message.clone(),
        );
    }
    if deadline_exceeded {
        // The move's target (issue 25 item 10), whatever status says is installed.
        let to = moving_to.unwrap_or_default();
        return Desired::new(
            types::DEGRADED,
            ConditionStatus::True,
            Reason::ProgressDeadlineExceeded,
            format!(
                "the move to {to} has not settled within spec.progressDeadline: waiting for {}",
                join(waits)
            ),
        );
    }
    if !stopped_working.is_empty() {
        return Desired::new(
            types::DEGRADED,
            ConditionStatus::True,
            Reason::OperatorUnavailable,
            stopped_working_message(stopped_working),
        );
    }
    Desired::new(
        types::DEGRADED,
        ConditionStatus::False,
        Reason::AsExpected,
        "no problems",
    )
}

/// A configuration change of what runs, or a first install, that has not settled within the
/// progress deadline (its Deployments never become Available) may not settle by waiting: the
/// condition names the ways out, a newer configuration, which replaces the one it applied with
/// (review H1), and for a first install, which has no way back, deleting the PlatformOperator.
fn with_deadline_way_out(
    mut degraded: Desired,
    hop: Option<&ActiveHop>,
    installed: Option<&InstalledBundle>,
    po: &str,
) -> Desired {
    if degraded.reason != Reason::ProgressDeadlineExceeded {
        return degraded;
    }
    match hop.filter(|h| !h.settled) {
        Some(h) if h.config.is_some() && h.from.as_deref() == Some(h.to.as_str()) => {
            degraded.message.push_str(
                "; a configuration change that does not become available does not settle by waiting: change spec.config (or the cluster proxy) back, or to a configuration whose Deployments become available (a newer configuration replaces it)",
            );
        }
        // A first install that never becomes Available: the bundle itself may be what fails,
        // so excluding it installs what resolves then in its place (nothing ran before it).
        Some(h) if h.from.is_none() => {
            let exclude = installed
                .filter(|i| i.name == h.to)
                .map_or_else(String::new, |i| {
                    format!(
                        ", or exclude it with `!={}` in spec.package.versionRange (what resolves then installs in its place)",
                        i.version
                    )
                });
            degraded.message.push_str(&format!(
                "; if it does not become available, fix what stops it (its pods: kubectl describe, logs), or change spec.config (or the cluster proxy) to a configuration it runs with (a newer configuration replaces the one it installed with){exclude}, or delete the PlatformOperator (its deletion removes what the install wrote)"
            ));
        }
        // A bundle hop whose new version never becomes available (it crashes, cannot pull or
        // be scheduled): it does not settle by waiting, and the way back is the annotation
        // (found by review: only a refused apply named it); a configuration it cannot run with
        // is replaced by a newer one (the way back would carry it too).
        // When the way back cannot run here either, excluding the bundle and deleting the
        // PlatformOperator installs what resolves then (found by the state-machine test:
        // `a_broken_hop_whose_way_back_cannot_run_names_a_way_out`).
        Some(h) => {
            if let Some(from) = h.from.as_deref().filter(|from| *from != h.to) {
                let exclude = installed
                    .filter(|i| i.name == h.to)
                    .map_or_else(String::new, |i| {
                        format!(
                            "; if neither runs here, exclude it with `!={}` in spec.package.versionRange and delete the PlatformOperator (what resolves then installs)",
                            i.version
                        )
                    });
                degraded.message.push_str(&format!(
                    "; if it does not become available, fix what stops it (its pods: kubectl describe, logs), or go back to {from} with `kubectl annotate platformoperator {po} {}=abandon:{} --overwrite`, or change spec.config (or the cluster proxy) to a configuration it runs with (a newer configuration replaces the one it moved with){exclude}",
                    pom_api::labels::UNSETTLED_MOVE,
                    h.to
                ));
            }
        }
        None => {}
    }
    degraded
}

fn stopped_working_message(stopped_working: &[&UnavailableDeployment]) -> String {
    let each: Vec<String> = stopped_working.iter().map(ToString::to_string).collect();
    format!(
        "the operator stopped working after it settled: {}; look at its pods (kubectl describe, logs) and fix what stops them",
        each.join("; ")
    )
}

/// While the soak after `hop` lasts: what it holds and until when.
fn soaking_message(hop: &ActiveHop) -> Option<String> {
    let until = hop.soak_until.as_ref()?;
    let settled_at = hop
        .settled_at
        .as_ref()
        .map_or_else(String::new, |t| format!(" at {}", t.0));
    Some(format!(
        "the move to {} settled{settled_at} and soaks until {} (spec.soak): the next hop and the cluster's version report wait until then",
        hop.to, until.0
    ))
}

/// What a PO's Upgradeable is computed from.
struct UpgradeableInput<'a> {
    verdict: &'a Upgradeability,
    settled: bool,
    hop: Option<&'a ActiveHop>,
    desired: Option<&'a str>,
    installed: bool,
    stopped_working: &'a [&'a UnavailableDeployment],
    blocked: Option<&'a Problem>,
    /// Why the pending move waits, when it is held.
    held: Option<&'a HoldReason>,
    /// `spec.paused`: the verdict is `decide`'s `Paused`, whatever runs.
    paused: bool,
    /// What the move the cluster refused this time applies.
    refused: Option<&'a str>,
}

/// This PO's Upgradeable: the decision's verdict, and False while a move is unsettled or
/// another one is pending (the CVO may read at any instant), or the PO is paused.
fn upgradeable_condition(u: UpgradeableInput<'_>) -> Desired {
    UPGRADEABLE_RULES
        .iter()
        .find_map(|rule| rule(&u))
        .unwrap_or_else(|| {
            upgradeable(
                u.verdict.status,
                u.verdict.reason,
                u.verdict.message.clone(),
            )
        })
}

/// The rules that override the verdict, in precedence order: the first that applies is what
/// the admin must act on first.
const UPGRADEABLE_RULES: [fn(&UpgradeableInput<'_>) -> Option<Desired>; 7] = [
    paused_unvouched,
    stopped_working_blocks,
    refused_move_blocks,
    unfinished_install_blocks,
    unsettled_move_blocks,
    pending_move_blocks,
    soaking_blocks,
];

/// An Upgradeable condition, so that each rule states only status, reason and message.
fn upgradeable(status: ConditionStatus, reason: Reason, message: impl Into<String>) -> Desired {
    Desired::new(types::UPGRADEABLE, status, reason, message)
}

/// Paused with something installed: `decide` says why it is not vouched for (and what
/// waits); nothing moves or settles while paused, so that is the one thing to act on.
fn paused_unvouched(u: &UpgradeableInput<'_>) -> Option<Desired> {
    (u.paused && !u.verdict.allows_update()).then(|| {
        upgradeable(
            ConditionStatus::False,
            u.verdict.reason,
            u.verdict.message.clone(),
        )
    })
}

/// An operator that is not running cannot vouch for the next minor (fail closed).
fn stopped_working_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    (!u.stopped_working.is_empty()).then(|| {
        upgradeable(
            ConditionStatus::False,
            Reason::OperatorUnavailable,
            stopped_working_message(u.stopped_working),
        )
    })
}

/// A recorded move the cluster refused when it was applied (issue 34 item 2): it does not
/// happen by waiting, so Upgradeable says it is refused, why, and the ways out (the refusal's
/// message names them).
fn refused_move_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    let (what, problem) = u.refused.zip(u.blocked)?;
    let first_install = u.hop.is_some_and(|h| h.from.is_none()) && !u.installed;
    let may_run = if first_install {
        "; objects it applied before the refusal may run"
    } else {
        ""
    };
    Some(upgradeable(
        ConditionStatus::False,
        Reason::MoveNotSettled,
        format!(
            "the cluster refuses to apply {what} ({}): {}{may_run}; the cluster is not upgradeable until it applies and settles, or is abandoned",
            problem.reason, problem.message
        ),
    ))
}

/// A first install recorded as intent that has not applied, and is still the install POM
/// carries out (issue 34 item 3): status records nothing installed, but objects it applied
/// before a failure (or a crash) may run, so it is not "nothing installed": fail closed.
fn unfinished_install_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    // Still the install POM carries out, or abandoned for another resolution (one that
    // installs nothing, or waits): objects it applied may run all the same (a manager that
    // stopped between its apply and its status write leaves them running; found by the
    // state-machine test: `an_abandoned_first_install_that_may_run_is_not_upgradeable`).
    let hop = u
        .hop
        .filter(|h| !h.settled && h.from.is_none() && !u.installed)?;
    // "Fix what refuses it" only where the cluster refused it: an install recorded before a
    // crash, held by something else, names what holds it in Degraded (found by the
    // state-machine test: `a_first_install_recorded_before_a_crash_names_a_way_out_that_clears_it`).
    let let_it = if hop.failed_attempts > 0 {
        "let it install (fix what refuses it: see Degraded)"
    } else {
        "let it install (see Degraded for what holds it)"
    };
    Some(upgradeable(
        ConditionStatus::False,
        Reason::MoveNotSettled,
        format!(
            "the install of {} has started and not applied: objects it applied before a failure or a crash may run, so POM cannot vouch for the next minor; {let_it}, or delete the PlatformOperator (its deletion removes what the install wrote)",
            hop.to
        ),
    ))
}

/// A move in flight that has not settled: the cluster waits for it.
fn unsettled_move_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    if !u.installed || u.settled {
        return None;
    }
    let to = u.hop.map(|h| h.to.as_str()).unwrap_or_default();
    let waiting = u
        .hop
        .and_then(|h| h.waiting_for.as_deref())
        .unwrap_or("settling");
    // An older PlatformOperator took the package over: POM will not finish this move, so
    // waiting does not help (found by the state-machine test:
    // `a_duplicate_mid_move_is_not_told_to_wait`).
    if let Some(duplicate) = u.blocked.filter(|p| p.reason == Reason::DuplicatePackage) {
        return Some(upgradeable(
            ConditionStatus::False,
            Reason::MoveNotSettled,
            format!(
                "the move to {to} has not settled, and this PlatformOperator will not finish it: {}",
                duplicate.message
            ),
        ));
    }
    Some(upgradeable(
        ConditionStatus::False,
        Reason::MoveNotSettled,
        format!(
            "the move to {to} has not settled (waiting for {waiting}); wait for it before updating the cluster"
        ),
    ))
}

/// A settled move that soaks (issue 35 item 4): what the soak is for (a migration after the
/// operator said ready) is not over, so the cluster waits for it as for a move in flight.
fn soaking_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    // A verdict that blocks on its own says more (what to fix); the soak ends by itself.
    if !u.verdict.allows_update() {
        return None;
    }
    let message = u.hop.filter(|_| u.installed).and_then(soaking_message)?;
    Some(upgradeable(
        ConditionStatus::False,
        Reason::Soaking,
        format!("{message}; wait for it before updating the cluster"),
    ))
}

/// A move pending for what runs: never anything but False, with what keeps it pending.
fn pending_move_blocks(u: &UpgradeableInput<'_>) -> Option<Desired> {
    let to = u.desired.filter(|_| u.installed)?;
    // What runs already blocks on its own (the operator says Upgradeable=False, the
    // bundle is incompatible, or it cannot be judged): that is what the admin must act on,
    // with its message (§8.3), and it is also why the move waits. An Unknown verdict keeps
    // its reason (issue 25 item 10), never hidden behind the pending move; a pending move
    // is never anything but False.
    if u.verdict.status != ConditionStatus::True {
        let message = match u.held.filter(|why| why.awaits_approval()) {
            Some(why) => format!(
                "{}; the move to {to} waits for the admin's approval ({why})",
                u.verdict.message
            ),
            None => format!("{}; a move to {to} is pending", u.verdict.message),
        };
        return Some(upgradeable(
            ConditionStatus::False,
            u.verdict.reason,
            message,
        ));
    }
    // The pin in force needs a move the admin has not approved (issue 23 item 5): the PO
    // is not where the cluster needs it until the admin approves it and it settles.
    if let Some(why) = u.held.filter(|why| why.awaits_approval()) {
        return Some(upgradeable(
            ConditionStatus::False,
            Reason::UpgradePendingApproval,
            format!(
                "the move to {to} waits for the admin's approval ({why}); the cluster is not upgradeable until it is approved and has settled"
            ),
        ));
    }
    // A move refused when it was applied does not happen by waiting: say what blocks it.
    if let Some(problem) = u.blocked {
        return Some(upgradeable(
            ConditionStatus::False,
            Reason::MoveNotSettled,
            format!(
                "the move to {to} is blocked ({}): {}; it will not happen by waiting, fix that before updating the cluster",
                problem.reason, problem.message
            ),
        ));
    }
    Some(upgradeable(
        ConditionStatus::False,
        Reason::MoveNotSettled,
        format!("a move to {to} is pending; wait for it before updating the cluster"),
    ))
}

/// The window of [`Wait::FirstReport`] for a move whose every other wait is over: records
/// when the rollout was first seen complete, and waits until [`StatusInput::auto_settle_window`]
/// after it while the gate is `Auto` and the operator has never reported (a report that
/// appears in the window puts the OperatorCondition wait of [`waits`] in its place).
fn first_report_window(
    hop: &mut ActiveHop,
    waits: &[Wait],
    report: &InstallReport,
    input: &StatusInput<'_>,
) -> Option<Wait> {
    if !waits.is_empty() {
        return None;
    }
    let rolled_out = hop
        .rolled_out_at
        .get_or_insert_with(|| to_api_time(input.now))
        .0;
    if input.upgrade_gate != UpgradeGate::Auto || input.reported_before || reported_now(report) {
        return None;
    }
    let until = rolled_out.checked_add(input.auto_settle_window).ok()?;
    // `rolledOutAt` may be another replica's time: the window closes no earlier than this
    // manager watched it pass (`crate::clock`).
    let waited = crate::clock::elapsed_at_least(input.now, rolled_out, input.rolled_out_seen_for);
    (waited < input.auto_settle_window).then_some(Wait::FirstReport { until })
}

/// The shortest wait between two looks at an unsettled move.
pub const SETTLE_POLL_MIN: Duration = Duration::from_secs(3);
/// The longest wait between two looks at a PO that waits (an unsettled move, a held hop): what
/// it waits for is watched (Deployments, OperatorConditions, the ClusterVersion, the catalogs),
/// so the poll is only a safety net and the progress deadline's granularity.
pub const WAIT_POLL_MAX: Duration = Duration::from_secs(60);

/// How soon a failed apply is tried again after `attempts` failures in a row: 15 s, doubling,
/// at most 10 minutes (a refusal by a policy engine or a quota is rarely lifted in seconds).
#[must_use]
pub fn failure_backoff(attempts: u32) -> Duration {
    const FIRST: Duration = Duration::from_secs(15);
    const MOST: Duration = Duration::from_secs(600);
    FIRST
        .saturating_mul(2u32.saturating_pow(attempts.saturating_sub(1).min(16)))
        .min(MOST)
}

/// When to look at the PO again, from its new status: soon after a move starts, then backing
/// off (a tenth of the time waited so far, 3 s to 60 s) while it settles; every 60 s while a
/// hop is held or pending; after a failure, [`failure_backoff`] of the failed attempts; else
/// the resync period.
#[must_use]
pub fn requeue(
    status: &PlatformOperatorStatus,
    outcome: &ActOutcome,
    resync: Duration,
    now: Timestamp,
) -> Duration {
    let failed = matches!(outcome, ActOutcome::Failed(_))
        || crate::conditions::find(&status.conditions, types::DEGRADED)
            .is_some_and(|c| c.status == ConditionStatus::True.as_str());
    if failed {
        let attempts = status.active_hop.as_ref().map_or(0, |h| h.failed_attempts);
        return failure_backoff(attempts).min(resync);
    }
    if let Some(hop) = status.active_hop.as_ref().filter(|h| !h.settled) {
        let waited = now
            .duration_since(hop.started_at.0)
            .try_into()
            .unwrap_or(Duration::ZERO);
        return (waited / 10)
            .clamp(SETTLE_POLL_MIN, WAIT_POLL_MAX)
            .min(resync);
    }
    let waiting = if status.desired_bundle.is_some() {
        WAIT_POLL_MAX.min(resync)
    } else {
        resync
    };
    // A soak ends at a known instant: judged again right then (a second late, never early).
    match status
        .active_hop
        .as_ref()
        .and_then(|h| h.soak_until.as_ref())
    {
        Some(until) => {
            (crate::snapshot::elapsed(until.0, now) + Duration::from_secs(1)).min(waiting)
        }
        None => waiting,
    }
}
