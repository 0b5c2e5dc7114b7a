//! Plans across chained cluster updates (issue 35 item 2): 4.16 → 4.17 → 4.18 → 4.19, one
//! minor at a time as the CVO takes them. For each step and each PO: the hops POM would take
//! (or offer) before the cluster moves ([`crate::pre_update`]), whether the PO would still
//! block the step, and the hops it takes during the step's update under its pin. A PO that
//! would block a step stops there: the admin learns, before the maintenance window, the first
//! step at which a PO has no path.
//!
//! Pure and built from [`crate::plan::plan`] (itself the manager's `decide` driven over a
//! simulated world), so the chained preview cannot disagree with what the manager will do at
//! each step. As in [`crate::plan`], each move settles at once, each approval is taken as given
//! (and marked), and the operator is taken to say `Upgradeable=True` once settled; the
//! operator's real gate is read only for the first step.

use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use semver::Version;

use crate::decide::decide;
use crate::plan::{PoPlan, plan};
use crate::snapshot::{ClusterView, GateReading, OperatorGate, PoSnapshot};

/// One update of the chain, for one PO.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    pub from: Version,
    pub to: Version,
    /// The walk while the cluster stays at `from` with the update to `to` requested: the
    /// pre-update hops (none when what runs already runs on `to`).
    pub before: PoPlan,
    /// Why the PO would block the update after those hops (`Upgradeable=False` and its
    /// message); `None` when it would not.
    pub blocks: Option<String>,
    /// The walk during the update, from where `before` ended (`None` when the PO blocks).
    pub during: Option<PoPlan>,
}

/// A PO's plan across the chain; it stops at the first step the PO would block.
#[derive(Debug, Clone, PartialEq)]
pub struct ChainedPlan {
    pub steps: Vec<StepPlan>,
}

impl ChainedPlan {
    /// The first update the PO would block, with why.
    #[must_use]
    pub fn first_blocked(&self) -> Option<&StepPlan> {
        self.steps.iter().find(|s| s.blocks.is_some())
    }
}

/// The chain of updates from `current` through each of `steps` (in order), for the PO of
/// `snapshot` (its catalogs, request and what runs now; its cluster view is replaced).
#[must_use]
pub fn chain(snapshot: &PoSnapshot<'_>, current: &Version, steps: &[Version]) -> ChainedPlan {
    let mut world = snapshot.clone();
    let mut from = current.clone();
    let mut planned = Vec::new();
    for (index, to) in steps.iter().enumerate() {
        if index > 0 {
            world.gate = settled_gate(&world.gate);
        }
        world.hop = None;
        world.cluster = ClusterView::OpenShift(Ok(ClusterPhase::steady(from.clone())));
        world.requested_update = gated(&from, to).then(|| to.clone());
        let before = plan(&world);
        if let Some(installed) = before.installed_at_end.clone() {
            world.installed = Some(installed);
        }
        if before.hops.last().is_some() {
            world.gate = settled_gate(&world.gate);
        }
        let verdict = decide(&world).verdict;
        let blocks = (gated(&from, to) && !verdict.allows_update()).then_some(verdict.message);
        let during = if blocks.is_some() {
            None
        } else {
            world.requested_update = None;
            world.cluster = ClusterView::OpenShift(Ok(ClusterPhase {
                kind: update_kind(&from, to),
                current: from.clone(),
                target: to.clone(),
            }));
            let during = plan(&world);
            if let Some(installed) = during.installed_at_end.clone() {
                world.installed = Some(installed);
            }
            Some(during)
        };
        let stop = blocks.is_some();
        planned.push(StepPlan {
            from: from.clone(),
            to: to.clone(),
            before,
            blocks,
            during,
        });
        if stop {
            break;
        }
        from = to.clone();
    }
    ChainedPlan { steps: planned }
}

/// The minors (`X.Y.0`) between `current` and `target`, then `target`: the steps the CVO
/// takes one at a time (it refuses more than one minor at once). Within one major only; a
/// major update is one step.
#[must_use]
pub fn minor_steps(current: &Version, target: &Version) -> Vec<Version> {
    let mut steps = Vec::new();
    if target.major == current.major {
        for minor in current.minor + 1..target.minor {
            steps.push(Version::new(current.major, minor, 0));
        }
    }
    steps.push(target.clone());
    steps
}

/// Whether `from` → `to` is gated on `Upgradeable` (a minor or major update).
fn gated(from: &Version, to: &Version) -> bool {
    (to.major, to.minor) > (from.major, from.minor)
}

fn update_kind(from: &Version, to: &Version) -> PhaseKind {
    if gated(from, to) {
        PhaseKind::MinorUpgrade
    } else if to > from {
        PhaseKind::PatchUpgrade
    } else if to < from {
        PhaseKind::Rollback
    } else {
        PhaseKind::Steady
    }
}

/// The gate once a move settled: an operator that reports says `Upgradeable=True` (what a
/// healthy operator does once migrated), one that never reported still has none.
fn settled_gate(gate: &OperatorGate) -> OperatorGate {
    if gate.reported {
        OperatorGate {
            reported: true,
            reading: GateReading::Says {
                upgradeable: true,
                message: "assumed: the operator reports Upgradeable=True once settled".to_owned(),
                overridden: false,
            },
        }
    } else {
        OperatorGate::absent()
    }
}
