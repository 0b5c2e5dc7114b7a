//! What makes a PlatformOperator a risk for a cluster update of any size, patch updates included
//! (issue 35 item 3). The CVO's `Upgradeable=False` blocks minor and major updates only; a patch
//! update is warned about through a firing alert labelled `openShiftUpdatePrecheck="true"`,
//! which `oc adm upgrade recommend` lists and the CVO (feature gate `ClusterUpdateAcceptRisks`)
//! turns into an update risk. The manager exports one gauge per PO and risk
//! (`pom_platformoperator_update_risk`), and the shipped PrometheusRule alerts on it.
//!
//! Read from the PO's status as the manager wrote it: what POM did, not what the spec asks.

use std::fmt;

use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};

use crate::conditions;

/// One reason a PlatformOperator is not ready for a cluster update. The label value of
/// `pom_platformoperator_update_risk{risk=...}` is [`UpdateRisk::label`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UpdateRisk {
    /// A move (install or hop) is applied and has not settled (§7), or soaks after it settled
    /// (`spec.soak`): the cluster would update under an operator in the middle of a change.
    Unsettled,
    /// `Degraded=True`: something the admin must look at first.
    Degraded,
    /// `spec.paused`: POM moves nothing, including the moves the update's pin would need.
    Paused,
    /// A move waits for the admin's approval (`spec.upgradeApproval: Manual`).
    PendingApproval,
}

impl UpdateRisk {
    /// Every risk, in label order: the gauge reports all of them for every PO (a zero is a
    /// value; a missing series is a question).
    pub const ALL: [UpdateRisk; 4] = [
        UpdateRisk::Unsettled,
        UpdateRisk::Degraded,
        UpdateRisk::Paused,
        UpdateRisk::PendingApproval,
    ];

    /// The metric label value (snake_case).
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            UpdateRisk::Unsettled => "unsettled",
            UpdateRisk::Degraded => "degraded",
            UpdateRisk::Paused => "paused",
            UpdateRisk::PendingApproval => "pending_approval",
        }
    }

    /// Whether this risk applies to `po` as its status reports it.
    #[must_use]
    pub fn applies(self, po: &PlatformOperator) -> bool {
        let Some(status) = po.status.as_ref() else {
            return false;
        };
        let with_reason = |type_: &str, reason: Reason| {
            conditions::find(&status.conditions, type_).is_some_and(|c| c.reason == reason.as_str())
        };
        match self {
            UpdateRisk::Unsettled => status
                .active_hop
                .as_ref()
                .is_some_and(|h| !h.settled || h.soak_until.is_some()),
            UpdateRisk::Degraded => conditions::find(&status.conditions, types::DEGRADED)
                .is_some_and(|c| c.status == ConditionStatus::True.as_str()),
            UpdateRisk::Paused => {
                with_reason(types::PROGRESSING, Reason::Paused)
                    || with_reason(types::INSTALLED, Reason::Paused)
            }
            UpdateRisk::PendingApproval => {
                [types::PROGRESSING, types::INSTALLED, types::UPGRADEABLE]
                    .iter()
                    .any(|t| with_reason(t, Reason::UpgradePendingApproval))
            }
        }
    }
}

impl fmt::Display for UpdateRisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Every risk with whether it applies to `po`, in [`UpdateRisk::ALL`] order.
#[must_use]
pub fn update_risks(po: &PlatformOperator) -> [(UpdateRisk, bool); 4] {
    UpdateRisk::ALL.map(|risk| (risk, risk.applies(po)))
}
