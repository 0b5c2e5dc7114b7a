//! Hops before the cluster moves (issue 35 item 1, seed 004): when the admin requests a minor
//! update that the installed bundle cannot run on (its `maxOpenShiftVersion`), the CVO refuses
//! the request while POM says `Upgradeable=False`. Instead of leaving the admin to edit the PO
//! by hand, POM finds the shortest chain of catalog hops to a bundle that runs on both the
//! current and the requested version ([`pom_resolver::select::pre_update_path`]) and, by
//! `spec.preUpdateHops`, offers the first hop for approval or takes it, one settled hop at a
//! time, while the cluster stays where it is.
//!
//! One named step of [`crate::decide`], taken only where nothing else moves the PO (the steady
//! pin holds what runs): every gate of a move still applies (the move in flight settles first,
//! the soak, the operator's own `Upgradeable=False`, `upgradeApproval: Manual`). Nothing moves
//! before an update is requested, and a request withdrawn stops the hops at the next decision
//! (the snapshot no longer carries one). `Upgradeable` stays False while what runs cannot run
//! on the requested version; its message names the path and the policy.

use pom_api::conditions::Reason;
use pom_api::platform_operator::{PreUpdateHops, UpgradeApproval};
use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::MaxOpenShiftVersion;
use pom_resolver::select::{self, CatalogInput, InstalledBundle, PreUpdate};

use crate::decide::{
    Action, HoldReason, PinState, PoDecision, Upgradeability, abandoned_again,
    abandoned_again_message, admin_unsettled_action, chosen_target, resolve_request, safety_hold,
    start_or_hold,
};
use crate::request::PoRequest;
use crate::snapshot::{Installed, PoSnapshot, UnsettledMoveAction};

/// What the pre-update step needs from the decision so far.
pub(crate) struct PreUpdateInput<'a> {
    pub request: &'a PoRequest,
    pub inputs: &'a [CatalogInput<'a>],
    pub running: Option<InstalledBundle>,
    pub installed: Option<&'a Installed>,
    pub phase: Option<&'a ClusterPhase>,
    pub verdict: &'a Upgradeability,
    pub current_pin: Option<&'a PinState>,
}

/// The decision when a requested update needs pre-update hops; `None` when it does not (no
/// request, a phase that is not steady, nothing installed, or what runs runs there).
pub(crate) fn pre_update_step(s: &PoSnapshot<'_>, i: &PreUpdateInput<'_>) -> Option<PoDecision> {
    let requested = s.requested_update.as_ref()?;
    let phase = i.phase.filter(|p| p.kind == PhaseKind::Steady)?;
    i.installed?;
    // The admin's steadyStateVersionRange holds the PO by hand: no hop beyond it.
    if i.request.steady_state_range.is_some() {
        return None;
    }
    let req = resolve_request(
        i.request,
        i.inputs,
        i.running.clone(),
        Some(phase),
        s.kube_version.as_ref(),
    );
    let path = select::pre_update_path(&req, requested).ok()?;
    let mut decision = PoDecision::new(Action::Keep, i.verdict.clone());
    decision.pin = i.current_pin.cloned();
    let hops = match path {
        PreUpdate::NotNeeded => return None,
        PreUpdate::NoPath(no) => {
            decision.verdict.message = way_forward(
                i,
                phase,
                &format!(
                    "before the requested update to {requested}: {no}; ask the publisher for a bundle that runs there, or remove the PlatformOperator before updating the cluster"
                ),
            );
            return Some(decision);
        }
        PreUpdate::Path(hops) => hops,
    };
    let names: Vec<&str> = hops.iter().map(|h| h.name.as_str()).collect();
    let policy = i.request.pre_update_hops;
    decision.verdict.message = way_forward(
        i,
        phase,
        &format!(
            "before the requested update to {requested} POM {} the hops {} (spec.preUpdateHops: {})",
            match policy {
                PreUpdateHops::Offer => "offers",
                PreUpdateHops::Take => "takes",
            },
            names.join(" → "),
            policy.as_str()
        ),
    );
    let first = &hops[0];
    // A hop the admin abandoned is not started again while the annotation names it (else
    // the way back and this step would alternate for ever).
    if let Some(abandoned) = abandoned_again(s, &first.name) {
        return Some(decision.with_problem(
            Reason::MoveAbandoned,
            abandoned_again_message(abandoned),
            false,
        ));
    }
    let target = chosen_target(first, i.request, Some(phase));
    let skipped = matches!(
        admin_unsettled_action(s, i.installed),
        Some((_, UnsettledMoveAction::Skip(_)))
    );
    let hold = safety_hold(s, i.request, first, true, skipped)
        .or_else(|| approval_hold(s, i.request, &first.name, requested, &names));
    Some(start_or_hold(decision, target, hold, s, skipped))
}

/// The verdict's message with `forward` as the way forward: for a bundle that blocks by its
/// `maxOpenShiftVersion`, the pre-update path replaces the verdict's own advice (one path
/// named, not two); any other verdict keeps its message, `forward` appended.
fn way_forward(i: &PreUpdateInput<'_>, phase: &ClusterPhase, forward: &str) -> String {
    let max = match i.installed.and_then(|i| i.max_openshift_version.as_ref()) {
        Some(MaxOpenShiftVersion::Valid { major, minor }) => Some((*major, *minor)),
        _ => None,
    };
    match (i.running.as_ref(), max) {
        (Some(running), Some(max))
            if i.verdict.reason == Reason::IncompatibleOperatorsInstalled =>
        {
            let next = pom_resolver::cluster::next_minor(&phase.current);
            format!(
                "{}; {forward}",
                pom_resolver::verdict::incompatibility(running, max, next)
            )
        }
        _ => format!("{}; {forward}", i.verdict.message),
    }
}

/// Why the first pre-update hop waits for the admin: under `Offer` until `spec.approvedBundle`
/// names it, and under `Take` as any move does under `upgradeApproval: Manual`.
fn approval_hold(
    s: &PoSnapshot<'_>,
    request: &PoRequest,
    bundle: &str,
    requested: &semver::Version,
    path: &[&str],
) -> Option<HoldReason> {
    let approved = request.approved_bundle.as_deref() == Some(bundle);
    if approved {
        return None;
    }
    match (request.pre_update_hops, request.upgrade_approval) {
        (PreUpdateHops::Take, UpgradeApproval::Automatic) => None,
        (PreUpdateHops::Take, UpgradeApproval::Manual) => Some(HoldReason::AwaitingApproval {
            po: s.name.clone(),
            bundle: bundle.to_owned(),
            approved: request.approved_bundle.clone(),
        }),
        (PreUpdateHops::Offer, _) => Some(HoldReason::PreUpdateOffered {
            po: s.name.clone(),
            requested: requested.to_string(),
            path: path.iter().map(|p| (*p).to_owned()).collect(),
        }),
    }
}
