//! Pure: from what a reconcile found and did to the PlatformOperator's status (§8.1). The one
//! place PO conditions are decided.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use pom_api::conditions::{reasons, types};
use pom_api::platform_operator::{
    ActiveHop, BundleRef, InstalledBundle, PinStatus, PlatformOperatorStatus,
};
use pom_resolver::verdict::{Verdict, VerdictStatus};

use crate::conditions::{Desired, Status, merge};

/// What the reconcile achieved.
#[derive(Debug, Clone)]
pub enum Outcome {
    /// Another PlatformOperator (older) already manages this package.
    Duplicate { winner: String },
    /// Something failed before or while installing; what ran before is untouched.
    Failed {
        reason: &'static str,
        message: String,
    },
    /// The bundle's objects are applied; `settled` says whether the move finished (§7).
    Applied { waiting_for: Option<String> },
}

/// Everything the status is computed from.
pub struct StatusInput<'a> {
    pub previous: &'a PlatformOperatorStatus,
    pub generation: Option<i64>,
    pub now: &'a Time,
    pub outcome: Outcome,
    /// The bundle whose objects are on the cluster after this reconcile.
    pub installed: Option<InstalledBundle>,
    /// Where a pending move is heading, if it is not the installed bundle.
    pub desired: Option<BundleRef>,
    pub pin: Option<PinStatus>,
    pub max_openshift_version: Option<String>,
    /// This PO's part of Upgradeable (§8.3), before settle/degraded considerations.
    pub verdict: Verdict,
    /// Whether the unsettled move outlived `spec.progressDeadline`.
    pub deadline_exceeded: bool,
}

/// Computes the new status.
#[must_use]
pub fn compute(input: StatusInput<'_>) -> PlatformOperatorStatus {
    let previous = input.previous;
    let installed_before = previous.installed_bundle.clone();
    let installed = input.installed.clone().or(installed_before.clone());

    // The active hop: a new move starts when the installed bundle changes.
    let active_hop = match (&input.outcome, &installed) {
        (Outcome::Applied { waiting_for }, Some(now_installed)) => {
            let moved = installed_before.as_ref().map(|b| &b.name) != Some(&now_installed.name);
            let mut hop = match (&previous.active_hop, moved) {
                (Some(hop), false) if hop.to == now_installed.name => hop.clone(),
                _ => ActiveHop {
                    from: installed_before.as_ref().map(|b| b.name.clone()),
                    to: now_installed.name.clone(),
                    started_at: input.now.0.to_string(),
                    settled: false,
                    waiting_for: None,
                },
            };
            // Once settled, a move stays settled (a later rollout is drift, not a move).
            hop.settled = hop.settled || waiting_for.is_none();
            hop.waiting_for = if hop.settled {
                None
            } else {
                waiting_for.clone()
            };
            Some(hop)
        }
        _ => previous.active_hop.clone(),
    };
    let settled = active_hop.as_ref().is_none_or(|h| h.settled);

    let mut desired = Vec::new();
    match &input.outcome {
        Outcome::Duplicate { winner } => {
            let msg = format!(
                "package is already managed by PlatformOperator {winner} (the older one wins); delete this PlatformOperator or {winner}"
            );
            desired.push(Desired::new(
                types::INSTALLED,
                Status::False,
                reasons::DUPLICATE_PACKAGE,
                msg.clone(),
            ));
            desired.push(Desired::new(
                types::PROGRESSING,
                Status::False,
                reasons::DUPLICATE_PACKAGE,
                "nothing to do",
            ));
            desired.push(Desired::new(
                types::DEGRADED,
                Status::True,
                reasons::DUPLICATE_PACKAGE,
                msg,
            ));
        }
        Outcome::Failed { reason, message } => {
            match &installed {
                Some(b) => desired.push(Desired::new(
                    types::INSTALLED,
                    Status::True,
                    reasons::INSTALL_SUCCEEDED,
                    format!("{} {} keeps running: {message}", b.name, b.version),
                )),
                None => desired.push(Desired::new(
                    types::INSTALLED,
                    Status::False,
                    *reason,
                    message.clone(),
                )),
            }
            desired.push(Desired::new(
                types::PROGRESSING,
                Status::False,
                *reason,
                "blocked; see Degraded",
            ));
            desired.push(Desired::new(
                types::DEGRADED,
                Status::True,
                *reason,
                message.clone(),
            ));
        }
        Outcome::Applied { waiting_for } => {
            let b = installed.clone().unwrap_or_default();
            let first_install = installed_before.is_none()
                || previous
                    .active_hop
                    .as_ref()
                    .is_some_and(|h| h.from.is_none() && !h.settled);
            if settled || !first_install {
                desired.push(Desired::new(
                    types::INSTALLED,
                    Status::True,
                    reasons::INSTALL_SUCCEEDED,
                    format!("installed {} {}", b.name, b.version),
                ));
            } else {
                desired.push(Desired::new(
                    types::INSTALLED,
                    Status::False,
                    reasons::INSTALLING,
                    format!(
                        "installing {} {}: {}",
                        b.name,
                        b.version,
                        waiting_for.clone().unwrap_or_default()
                    ),
                ));
            }
            if settled {
                desired.push(Desired::new(
                    types::PROGRESSING,
                    Status::False,
                    reasons::AS_EXPECTED,
                    "at the desired bundle",
                ));
            } else {
                let reason = match waiting_for.as_deref() {
                    Some(w) if w.contains("OperatorCondition") => {
                        reasons::WAITING_FOR_OPERATOR_CONDITION
                    }
                    _ => reasons::WAITING_FOR_ROLLOUT,
                };
                desired.push(Desired::new(
                    types::PROGRESSING,
                    Status::True,
                    reason,
                    waiting_for.clone().unwrap_or_default(),
                ));
            }
            if input.deadline_exceeded && !settled {
                desired.push(Desired::new(
                    types::DEGRADED,
                    Status::True,
                    reasons::PROGRESS_DEADLINE_EXCEEDED,
                    format!(
                        "the move to {} has not settled within spec.progressDeadline: {}",
                        b.name,
                        waiting_for.clone().unwrap_or_default()
                    ),
                ));
            } else {
                desired.push(Desired::new(
                    types::DEGRADED,
                    Status::False,
                    reasons::AS_EXPECTED,
                    "no problems",
                ));
            }
        }
    }
    desired.push(upgradeable(&input.verdict, settled, active_hop.as_ref()));

    PlatformOperatorStatus {
        observed_generation: input.generation,
        conditions: merge(&previous.conditions, &desired, input.generation, input.now),
        installed_bundle: installed,
        desired_bundle: input.desired,
        pin: input.pin.or_else(|| previous.pin.clone()),
        active_hop,
        max_open_shift_version: input.max_openshift_version,
    }
}

/// This PO's Upgradeable: the resolver's verdict, and False while a move is unsettled.
fn upgradeable(verdict: &Verdict, settled: bool, hop: Option<&ActiveHop>) -> Desired {
    if !settled {
        let to = hop.map(|h| h.to.as_str()).unwrap_or_default();
        let waiting = hop
            .and_then(|h| h.waiting_for.as_deref())
            .unwrap_or("settling");
        return Desired::new(
            types::UPGRADEABLE,
            Status::False,
            reasons::MOVE_NOT_SETTLED,
            format!(
                "the move to {to} has not settled ({waiting}); wait for it before updating the cluster"
            ),
        );
    }
    let status = match verdict.status {
        VerdictStatus::True => Status::True,
        VerdictStatus::False => Status::False,
        VerdictStatus::Unknown => Status::Unknown,
    };
    Desired::new(
        types::UPGRADEABLE,
        status,
        verdict.reason.clone(),
        verdict.message.clone(),
    )
}
