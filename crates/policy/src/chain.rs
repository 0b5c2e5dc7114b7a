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

use pom_api::platform_operator::{BundleRef, InstalledBundle};

use crate::decide::decide;
use crate::plan::{PlannedHop, PoPlan, plan};
use crate::snapshot::{ClusterView, GateReading, OperatorGate, PoSnapshot};

/// One update of the chain, for one PO.
#[derive(Debug, Clone, PartialEq)]
pub struct StepPlan {
    pub from: Version,
    pub to: Version,
    /// The walk while the cluster stays at `from` with the update to `to` requested: the
    /// pre-update hops (none when what runs already runs on `to`). `None` for an update the
    /// CVO already runs (the chain's first step when the cluster is mid-update): there is no
    /// "before" left.
    pub before: Option<PoPlan>,
    /// Why the PO would block the update after those hops (`Upgradeable=False` and its
    /// message); `None` when it would not.
    pub blocks: Option<String>,
    /// The walk during the update, from where `before` ended (`None` when the PO blocks).
    pub during: Option<PoPlan>,
}

impl StepPlan {
    /// The hops before the update (none for an update already running).
    #[must_use]
    pub fn before_hops(&self) -> &[PlannedHop] {
        self.before.as_ref().map_or(&[], |b| b.hops.as_slice())
    }

    /// Where the PO runs once this step is done (or where it stops, when it blocks).
    #[must_use]
    pub fn last(&self) -> Option<&InstalledBundle> {
        self.during
            .as_ref()
            .or(self.before.as_ref())
            .and_then(|walk| walk.last.as_ref())
    }
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
/// `snapshot` (its catalogs, request, what runs now and the move it has in flight).
///
/// The first step starts from the world as it is (review M3): a move of the PO that has not
/// settled is that step's first hop (marked in flight), and when the snapshot's cluster is
/// already updating from `current` to `steps[0]`, that step is the update in flight (no
/// pre-update stage, the walk under the update's own pin). Later steps start steady.
#[must_use]
pub fn chain(snapshot: &PoSnapshot<'_>, current: &Version, steps: &[Version]) -> ChainedPlan {
    let mut world = snapshot.clone();
    let mut from = current.clone();
    let mut planned = Vec::new();
    let updating = snapshot
        .cluster
        .phase()
        .filter(|p| p.kind != PhaseKind::Steady && p.current == *current)
        .cloned();
    for (index, to) in steps.iter().enumerate() {
        let mut in_flight = None;
        if index == 0 {
            in_flight = settle_in_flight(&mut world);
        } else {
            world.gate = settled_gate(&world.gate);
        }
        world.hop = None;
        let running = updating.as_ref().filter(|p| index == 0 && p.target == *to);
        let (before, blocks) = if running.is_some() {
            // The CVO accepted this update already: nothing is decided before it.
            world.requested_update = None;
            (None, None)
        } else {
            world.cluster = ClusterView::OpenShift(Ok(ClusterPhase::steady(from.clone())));
            world.requested_update = gated(&from, to).then(|| to.clone());
            let mut before = plan(&world);
            if let Some(hop) = in_flight.take() {
                before.hops.insert(0, hop);
            }
            if let Some(installed) = before.installed_at_end.clone() {
                world.installed = Some(installed);
            }
            if !before.hops.is_empty() {
                world.gate = settled_gate(&world.gate);
            }
            let verdict = decide(&world).verdict;
            let blocks = (gated(&from, to) && !verdict.allows_update()).then_some(verdict.message);
            (Some(before), blocks)
        };
        let during = if blocks.is_some() {
            None
        } else {
            world.requested_update = None;
            world.cluster = ClusterView::OpenShift(Ok(ClusterPhase {
                kind: update_kind(&from, to),
                current: from.clone(),
                target: to.clone(),
            }));
            let mut during = plan(&world);
            if let Some(hop) = in_flight.take() {
                during.hops.insert(0, hop);
            }
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

/// The PO's own move that has not settled, as the first hop of the plan (marked in flight),
/// and the world with it settled: as everywhere in a plan, a move is taken to settle, and the
/// walk goes on from where it lands. `None` when no move is in flight, or when the move's
/// bundle is not what the status records as running yet (its intent is recorded, not
/// applied: the walk chooses it again as its first hop).
fn settle_in_flight(world: &mut PoSnapshot<'_>) -> Option<PlannedHop> {
    let hop = world.hop.as_ref().filter(|h| !h.settled)?;
    let installed = world.installed.as_ref()?;
    if installed.bundle.name != hop.to || world.config.unapplied.is_some() {
        return None;
    }
    let pin = decide(world).pin?;
    let planned = PlannedHop {
        from: hop.from.clone(),
        to: BundleRef {
            name: installed.bundle.name.clone(),
            version: installed.bundle.version.clone(),
        },
        pin,
        needs_approval: false,
        in_flight: true,
    };
    world.gate = settled_gate(&world.gate);
    Some(planned)
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
pub(crate) fn settled_gate(gate: &OperatorGate) -> OperatorGate {
    if gate.reported {
        OperatorGate {
            reported: true,
            reading: GateReading::Says {
                upgradeable: true,
                message: "assumed: the operator reports Upgradeable=True once settled".to_owned(),
                overridden: false,
            },
            object: gate.object.clone(),
        }
    } else {
        OperatorGate::absent()
    }
}
