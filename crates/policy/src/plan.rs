//! Where [`decide`] would take a PO, hop by hop, if every move settled at once and the operator
//! allowed each next hop: what `pomctl plan` shows before a cluster update. It is the same
//! `decide` the manager calls, driven over a simulated world, so the preview cannot disagree
//! with what the manager will do.

use std::collections::BTreeSet;

use pom_api::platform_operator::{BundleRef, InstalledBundle, UpgradeGate};

use crate::decide::{
    Action, HoldReason, MoveTarget, PinState, PoDecision, Problem, Upgradeability, decide,
};
use crate::snapshot::{GateReading, Hop, Installed, OperatorGate, PoSnapshot};

/// Hops after which a plan stops (a catalog with a very long chain, or a bug).
pub const MAX_PLANNED_HOPS: usize = 64;

/// One move of a plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedHop {
    pub from: Option<String>,
    pub to: BundleRef,
    /// The pin the move was chosen under.
    pub pin: PinState,
    /// The move waits for the admin's approval (`spec.upgradeApproval: Manual` and
    /// `spec.approvedBundle` naming another bundle): the plan takes it as approved.
    pub needs_approval: bool,
    /// The move was already under way when the plan was made (the PO's own unsettled move):
    /// the plan shows it, and walks on from where it lands ([`crate::chain`]).
    pub in_flight: bool,
}

/// Why a plan stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PlanEnd {
    /// No further move: the PO settles here.
    Settled,
    /// The next move is held (the operator says `Upgradeable=False`, or has not reported for
    /// its current generation, or the last move has not settled).
    Held(HoldReason),
    /// Nothing can be chosen; the PO stays where it is.
    Problem(Problem),
    /// The catalog leads back to a bundle already visited.
    Cycle { bundle: String },
    /// More than [`MAX_PLANNED_HOPS`] hops.
    HopLimit,
}

/// A PO's plan.
#[derive(Debug, Clone, PartialEq)]
pub struct PoPlan {
    /// The first decision (what the manager would decide now).
    pub first: PoDecision,
    pub hops: Vec<PlannedHop>,
    pub end: PlanEnd,
    /// Where the PO ends (what runs now when it does not move).
    pub last: Option<InstalledBundle>,
    /// The same, as a snapshot's `installed` (with the `maxOpenShiftVersion` the walk's last
    /// bundle declares): where a later walk starts ([`crate::chain`]).
    pub installed_at_end: Option<Installed>,
    /// The PO's `Upgradeable` once settled where it ends.
    pub verdict_at_end: Upgradeability,
}

/// Walks `snapshot` forward: each move settles at once and, after a move, the new operator is
/// taken to report `Upgradeable=True` (what a healthy operator does once migrated). The gate
/// reading of the *running* operator is honoured for the first hop. Under
/// `upgradeApproval: Manual` each move is taken as approved by the admin, and marked
/// ([`PlannedHop::needs_approval`]) unless `spec.approvedBundle` already names it.
#[must_use]
pub fn plan(snapshot: &PoSnapshot<'_>) -> PoPlan {
    let first = decide(snapshot);
    let mut world = snapshot.clone();
    let mut decision = first.clone();
    let mut hops = Vec::new();
    let mut seen: BTreeSet<String> = world
        .installed
        .iter()
        .map(|i| i.bundle.name.clone())
        .collect();
    let end = loop {
        // A move held for nothing but the admin's approval: the admin approves it (issue 23
        // item 5), as the plan's operators say Upgradeable=True once settled.
        let mut needs_approval = false;
        if let (Action::Nothing | Action::Keep, Some(held)) = (&decision.action, &decision.held)
            && held.why.awaits_approval()
            && let Ok(request) = world.request.as_mut()
        {
            request.approved_bundle = Some(held.to.name.clone());
            decision = decide(&world);
            needs_approval = true;
        }
        let target = match &decision.action {
            Action::Move(target) => target.clone(),
            _ => {
                break match (&decision.held, &decision.problem) {
                    (Some(held), _) => PlanEnd::Held(held.why.clone()),
                    (None, Some(problem)) => PlanEnd::Problem(problem.clone()),
                    (None, None) => PlanEnd::Settled,
                };
            }
        };
        if hops.len() >= MAX_PLANNED_HOPS {
            break PlanEnd::HopLimit;
        }
        if !seen.insert(target.name.clone()) {
            break PlanEnd::Cycle {
                bundle: target.name.clone(),
            };
        }
        hops.push(PlannedHop {
            from: world.installed.as_ref().map(|i| i.bundle.name.clone()),
            to: target.bundle_ref(),
            pin: decision
                .pin
                .clone()
                .unwrap_or_else(|| target.pin_after.clone()),
            needs_approval,
            in_flight: false,
        });
        settle(
            &mut world,
            &target,
            hops.last().and_then(|h| h.from.clone()),
        );
        decision = decide(&world);
    };
    PoPlan {
        first,
        hops,
        end,
        last: world.installed.as_ref().map(|i| i.bundle.clone()),
        installed_at_end: world.installed.clone(),
        verdict_at_end: decision.verdict,
    }
}

/// The world after `target` was installed (from `from`) and settled: what runs, the move
/// recorded settled, and the operator's gate as a healthy operator leaves it.
fn settle(world: &mut PoSnapshot<'_>, target: &MoveTarget, from: Option<String>) {
    world.installed = Some(Installed {
        bundle: InstalledBundle {
            name: target.name.clone(),
            version: target.version.to_string(),
            image: target.image.clone(),
            objects_digest: None,
        },
        version: Ok(target.version.clone()),
        max_openshift_version: target.max_openshift_version.clone(),
    });
    world.hop = Some(Hop {
        from,
        to: target.name.clone(),
        started_at: world.now,
        settled: true,
        // A plan lists hops, not when: a soak delays the next one, it never blocks it.
        settled_at: None,
        started_seen_for: std::time::Duration::ZERO,
        settled_seen_for: std::time::Duration::ZERO,
        failed_attempts: 0,
        applied_unsettled: false,
        replaced: None,
    });
    // Under `upgradeGate: OperatorCondition` a move settles only on Upgradeable=True, so
    // the operator is taken to report it too.
    let gated = world.gate.reported
        || world
            .request
            .as_ref()
            .is_ok_and(|r| r.upgrade_gate == UpgradeGate::OperatorCondition);
    world.gate = crate::chain::settled_gate(&OperatorGate {
        reported: gated,
        reading: GateReading::Absent,
        object: None,
    });
}
