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
use pom_resolver::cluster::{ClusterPhase, PhaseKind, max_supports};
use pom_resolver::fbc::MaxOpenShiftVersion;
use semver::Version;

use crate::conditions;
use crate::plan::plan;
use crate::snapshot::{ClusterView, PoSnapshot};

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
    /// The patch update the cluster is asked to take would leave the PO without a bundle
    /// that runs there ([`patch_shortfall`]): judged by the manager from the catalogs, not
    /// read from the status.
    NoBundleForPatch,
}

impl UpdateRisk {
    /// Every risk, in label order: the gauge reports all of them for every PO (a zero is a
    /// value; a missing series is a question).
    pub const ALL: [UpdateRisk; 5] = [
        UpdateRisk::Unsettled,
        UpdateRisk::Degraded,
        UpdateRisk::Paused,
        UpdateRisk::PendingApproval,
        UpdateRisk::NoBundleForPatch,
    ];

    /// The metric label value (snake_case).
    #[must_use]
    pub const fn label(self) -> &'static str {
        match self {
            UpdateRisk::Unsettled => "unsettled",
            UpdateRisk::Degraded => "degraded",
            UpdateRisk::Paused => "paused",
            UpdateRisk::PendingApproval => "pending_approval",
            UpdateRisk::NoBundleForPatch => "no_bundle_for_patch",
        }
    }

    /// Whether this risk applies to `po` as its status reports it ([`UpdateRisk::NoBundleForPatch`]
    /// is not in the status: `patch_shortfall` says it, and [`update_risks`] takes it).
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
            UpdateRisk::NoBundleForPatch => false,
        }
    }
}

impl fmt::Display for UpdateRisk {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// Every risk with whether it applies to `po`, in [`UpdateRisk::ALL`] order;
/// `no_bundle_for_patch` is the manager's last [`patch_shortfall`] judgement of it.
#[must_use]
pub fn update_risks(po: &PlatformOperator, no_bundle_for_patch: bool) -> [(UpdateRisk, bool); 5] {
    UpdateRisk::ALL.map(|risk| {
        let applies = match risk {
            UpdateRisk::NoBundleForPatch => no_bundle_for_patch,
            _ => risk.applies(po),
        };
        (risk, applies)
    })
}

/// Why the patch update to `requested` would leave the PO of `snapshot` without a bundle that
/// runs there; `None` when it would not (or when nothing runs, or the cluster cannot be
/// judged).
///
/// The manager's own walk decides it ([`crate::plan::plan`], its `decide` hop by hop) over
/// the cluster as the update puts it (`PatchUpgrade` from the current version to
/// `requested`, the pin `>=X.Y.Z <X.Y+1.0-0`): where the PO would end, and whether that
/// bundle's `olm.maxOpenShiftVersion` admits `requested` (an invalid one never does, as the
/// selector judges). A patch keeps the minor, so this fires only for a bundle that already
/// does not run on the cluster's minor (an update forced past it, a catalog fixed later) and
/// that the channel offers no way out of within the pin; a catalog bundle that runs there
/// clears it, since the walk would move to it. `minKubeVersion` is not judged: ClusterVersion
/// does not say which Kubernetes the patch release ships.
#[must_use]
pub fn patch_shortfall(snapshot: &PoSnapshot<'_>, requested: &Version) -> Option<String> {
    let phase = snapshot.cluster.phase()?;
    snapshot.installed.as_ref()?;
    let mut world = snapshot.clone();
    world.requested_update = None;
    world.cluster = ClusterView::OpenShift(Ok(ClusterPhase {
        kind: PhaseKind::PatchUpgrade,
        current: phase.current.clone(),
        target: requested.clone(),
    }));
    let walk = plan(&world);
    let end = walk.installed_at_end.as_ref()?;
    let runs = match end.max_openshift_version.as_ref() {
        None => true,
        Some(MaxOpenShiftVersion::Valid { major, minor }) => {
            max_supports((*major, *minor), requested.major, requested.minor)
        }
        Some(MaxOpenShiftVersion::Invalid { .. }) => false,
    };
    let max = end.max_openshift_version.as_ref()?;
    (!runs).then(|| {
        format!(
            "the patch update to {requested} would leave it on {} (olm.maxOpenShiftVersion {max}), which does not run on {}.{}, and its channel offers no bundle that does within the update's pin; publish one or remove the PlatformOperator before updating",
            end.bundle.name, requested.major, requested.minor
        )
    })
}
