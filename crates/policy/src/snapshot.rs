//! What one reconcile of a PlatformOperator knows, gathered once and typed: the input of
//! [`crate::decide`]. The manager fills it from its watch caches; `pomctl plan` and the
//! state-machine tests fill it from what they read or simulate.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pom_api::platform_operator::{ActiveHop, AppliedConfig, ClusterProxyEnv, InstalledBundle};
use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::{Catalog, MaxOpenShiftVersion};
use semver::Version;

use crate::namespace_clash::NamespaceClash;
use crate::request::{PoRequest, RequestError};

/// Everything `decide` depends on.
#[derive(Debug, Clone)]
pub struct PoSnapshot<'a> {
    /// The PlatformOperator's name.
    pub name: String,
    /// The spec, parsed once.
    pub request: Result<PoRequest, RequestError>,
    /// An older PlatformOperator already manages this package (it wins).
    pub duplicate_of: Option<String>,
    /// Another PlatformOperator holds the namespace this one watches or installs into
    /// ([`crate::namespace_clash`]; issue 33 item 5).
    pub namespace_clash: Option<NamespaceClash>,
    /// What runs now, from the PO's status.
    pub installed: Option<Installed>,
    /// The last move and whether it settled, from the PO's status.
    pub hop: Option<Hop>,
    pub cluster: ClusterView,
    /// The minor or major update the admin requested (ClusterVersion `spec.desiredUpdate`)
    /// that the CVO has not started, while the cluster is steady ([`requested_update`]):
    /// what pre-update hops are for ([`crate::pre_update`]). `None` otherwise.
    pub requested_update: Option<Version>,
    /// The API server's version; `None` skips the `minKubeVersion` check.
    pub kube_version: Option<Version>,
    pub catalogs: CatalogView<'a>,
    /// What the installed bundle's operator says on its OperatorCondition.
    pub gate: OperatorGate,
    pub now: Timestamp,
    /// When the status records nothing installed: the bundle label of objects on the cluster
    /// that carry this PO's owner label (a PO restored without its status, issue 25 item 4).
    pub found_bundle_label: Option<String>,
    /// The admin's action on a move that does not settle (`UNSETTLED_MOVE` annotation), or why
    /// its value cannot be read.
    pub unsettled_move: Option<Result<UnsettledMoveAction, String>>,
    /// Whether the manager's admission guard is in place (issue 22 item 2).
    pub guard: GuardState,
    /// `spec.paused`: POM writes nothing for the PO but its status (issue 23 item 5). Read
    /// apart from [`PoSnapshot::request`], so that a spec that cannot be parsed is paused too.
    pub paused: bool,
    /// The configuration of the operator's Deployments: asked for, and applied (issue 23
    /// items 3, 4).
    pub config: ConfigView,
}

/// The configuration of a PlatformOperator's Deployments (`spec.config` and the cluster
/// proxy), as asked for and as applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigView {
    /// What `spec.config` and the cluster proxy ask for now.
    pub desired: AppliedConfig,
    /// `status.appliedConfig`: what the Deployments run with, or what the configuration change
    /// in flight applies (`None`: none recorded, which is no configuration).
    pub recorded: Option<AppliedConfig>,
    /// The admin's `config-change-override` annotation: the digest of a configuration to apply
    /// although the operator says `Upgradeable=False`.
    pub override_digest: Option<String>,
    /// The digest of a configuration change recorded as intent (the unsettled move of the
    /// running bundle to itself) that has not applied yet: it is not what runs, and a revert
    /// or a newer change replaces it (issue 34 item 1). `None` when there is none.
    pub unapplied: Option<String>,
}

impl Default for ConfigView {
    /// No configuration asked for, none applied.
    fn default() -> Self {
        Self {
            desired: AppliedConfig::none(),
            recorded: None,
            override_digest: None,
            unapplied: None,
        }
    }
}

impl ConfigView {
    /// The view for `po` with the cluster proxy `proxy` (`None`: no proxy is injected).
    #[must_use]
    pub fn of(po: &pom_api::PlatformOperator, proxy: Option<&ClusterProxyEnv>) -> Self {
        Self {
            desired: AppliedConfig::of(po.spec.config.as_ref(), proxy),
            recorded: po.status.as_ref().and_then(|s| s.applied_config.clone()),
            override_digest: po
                .metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get(pom_api::labels::CONFIG_CHANGE_OVERRIDE))
                .map(|v| v.trim().to_owned()),
            unapplied: po.status.as_ref().and_then(unapplied_config),
        }
    }

    /// The view for `po` when the cluster proxy is not known (not read yet, or `pomctl plan`,
    /// which does not read it): with the proxy what runs was applied with, so a proxy that
    /// was not read changes nothing.
    #[must_use]
    pub fn keeping_proxy(po: &pom_api::PlatformOperator) -> Self {
        let applied = po
            .status
            .as_ref()
            .and_then(|s| s.applied_config.as_ref())
            .and_then(|c| c.proxy.as_ref());
        Self::of(po, applied)
    }

    /// What runs now (none recorded is no configuration).
    #[must_use]
    pub fn applied(&self) -> AppliedConfig {
        self.recorded.clone().unwrap_or_else(AppliedConfig::none)
    }

    /// Whether what is asked for differs from what runs.
    #[must_use]
    pub fn changed(&self) -> bool {
        self.applied().digest != self.desired.digest
    }
}

/// The digest of the configuration change `status` records as intent and that has not
/// applied since (its hop unsettled, `status.appliedConfig` another configuration).
#[must_use]
pub fn unapplied_config(
    status: &pom_api::platform_operator::PlatformOperatorStatus,
) -> Option<String> {
    let digest = status
        .active_hop
        .as_ref()
        .filter(|h| !h.settled)?
        .config
        .as_ref()?;
    (*digest != crate::status::recorded_config_digest(status)).then(|| digest.clone())
}

/// The manager's admission guard as the API server holds it: the layer that keeps a buggy or
/// compromised manager inside the content policy. Without it POM writes nothing but status.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum GuardState {
    /// The policy and its binding are there, as shipped.
    Intact,
    /// Not checked: the manager was told not to require it (tests, or a cluster without
    /// ValidatingAdmissionPolicy, at the admin's word).
    #[default]
    Unchecked,
    /// The object (kind and name) is not on the cluster.
    Missing { object: String },
    /// The object is there but not as shipped.
    Changed { object: String, detail: String },
    /// The manager's guard is intact but the owner-label guard (which bounds tenants, not the
    /// manager) is not: `object` (kind and name) `detail` ("does not exist", "is not as
    /// shipped (...)"). The cluster operator is Degraded; POM keeps writing, since stopping
    /// its own writes would not bound any tenant and would stop drift repair and upgrades.
    OwnerLabelGuardDown { object: String, detail: String },
}

impl GuardState {
    /// Whether POM may write to the cluster (beyond status and Events).
    #[must_use]
    pub fn allows_writes(&self) -> bool {
        matches!(
            self,
            Self::Intact | Self::Unchecked | Self::OwnerLabelGuardDown { .. }
        )
    }

    /// Whether the manager's own guard is known to be enforced: it refuses the manager's
    /// writes to an object it did not create unless the object carries the hand-over
    /// annotation, so a proof that changes such objects must first see every one annotated
    /// (adoption). `OwnerLabelGuardDown` is the manager's guard intact beside a missing
    /// owner-label guard: enforced all the same (review of issue 36, H3).
    #[must_use]
    pub fn enforces_hand_over(&self) -> bool {
        matches!(self, Self::Intact | Self::OwnerLabelGuardDown { .. })
    }

    /// What degrades the cluster operator, for the admin: [`GuardState::problem`], or the
    /// owner-label guard not in place while writes go on.
    #[must_use]
    pub fn degradation(&self) -> Option<String> {
        match self {
            Self::OwnerLabelGuardDown { object, detail } => Some(format!(
                "the owner-label guard is not in place: {object} {detail}; any user may now set or change the platform.openshift.io/owner label (exempting objects from the webhooks POM installs); POM keeps installing and repairing (its own guard still bounds it): re-apply POM's install manifests"
            )),
            _ => self.problem(),
        }
    }

    /// What stops POM's writes, for the admin; `None` when writes are allowed.
    #[must_use]
    pub fn problem(&self) -> Option<String> {
        match self {
            Self::Intact | Self::Unchecked | Self::OwnerLabelGuardDown { .. } => None,
            Self::Missing { object } => Some(format!(
                "the manager's admission guard is not in place: {object} does not exist; POM writes nothing but status until it is back: re-apply POM's install manifests"
            )),
            Self::Changed { object, detail } => Some(format!(
                "the manager's admission guard is not in place: {object} is not as shipped ({detail}); POM writes nothing but status until it is: re-apply POM's install manifests"
            )),
        }
    }
}

/// The admin's `unsettled-move` annotation on `po`, parsed (`None` without one).
#[must_use]
pub fn unsettled_move_of(
    po: &pom_api::PlatformOperator,
) -> Option<Result<UnsettledMoveAction, String>> {
    po.metadata
        .annotations
        .as_ref()?
        .get(pom_api::labels::UNSETTLED_MOVE)
        .map(|value| UnsettledMoveAction::parse(value))
}

/// What the admin asked for a move that does not settle (issue 25 item 2).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnsettledMoveAction {
    /// Let the next move start although the move to this bundle has not settled.
    Skip(String),
    /// Move back to the bundle that ran before the move to this bundle.
    Abandon(String),
}

impl UnsettledMoveAction {
    /// Parses the annotation's value (`skip:<bundle>` or `abandon:<bundle>`).
    ///
    /// # Errors
    /// The value, and what it should be, when it is neither.
    pub fn parse(value: &str) -> Result<Self, String> {
        match value.trim().split_once(':') {
            Some(("skip", bundle)) if !bundle.trim().is_empty() => {
                Ok(Self::Skip(bundle.trim().to_owned()))
            }
            Some(("abandon", bundle)) if !bundle.trim().is_empty() => {
                Ok(Self::Abandon(bundle.trim().to_owned()))
            }
            _ => Err(format!(
                "annotation {} is {value:?}; write skip:<bundle> or abandon:<bundle>, naming the bundle of the move that does not settle",
                pom_api::labels::UNSETTLED_MOVE
            )),
        }
    }

    /// The bundle whose unsettled move it acts on.
    #[must_use]
    pub fn bundle(&self) -> &str {
        match self {
            Self::Skip(bundle) | Self::Abandon(bundle) => bundle,
        }
    }
}

/// The installed bundle as the status records it, with its version parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Installed {
    /// As recorded (name, version text, image): what drift repair re-applies.
    pub bundle: InstalledBundle,
    /// The parsed version, or why `status.installedBundle.version` cannot be read.
    pub version: Result<Version, String>,
    /// `olm.maxOpenShiftVersion` recorded when the bundle was applied (the bundle may have left
    /// the catalog since; this is what runs, so this is what the verdict judges).
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
}

impl Installed {
    /// Reads the status fields; an unparsable version is kept as an error, never read as 0.0.0.
    #[must_use]
    pub fn from_status(bundle: &InstalledBundle, max_openshift_version: Option<&str>) -> Self {
        let version = pom_resolver::version::parse_tolerant(&bundle.version).map_err(|e| {
            format!(
                "status.installedBundle.version {:?} of bundle {} is not a version ({e})",
                bundle.version, bundle.name
            )
        });
        Self {
            bundle: bundle.clone(),
            version,
            max_openshift_version: max_openshift_version.map(MaxOpenShiftVersion::parse),
        }
    }
}

/// The last move (install or hop).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub from: Option<String>,
    pub to: String,
    pub started_at: Timestamp,
    pub settled: bool,
    /// When it settled, if POM recorded it (a soak counts from here).
    pub settled_at: Option<Timestamp>,
    /// How long ago this manager first read `started_at` by its own clock (zero when it never
    /// did): the progress deadline never passes earlier than that allows ([`crate::clock`]).
    pub started_seen_for: Duration,
    /// How long ago this manager first read `settled_at` by its own clock (zero when it never
    /// did): the soak is never over earlier than that allows ([`crate::soak`]).
    pub settled_seen_for: Duration,
    /// Failed applies of it since its intent was recorded: zero for a move whose apply may
    /// have happened without being recorded (the manager stopped before its status write).
    pub failed_attempts: u32,
    /// A configuration change recorded over a move of what runs that had not settled, not
    /// applied since (`ActiveHop::applied_unsettled`): what runs has not settled.
    pub applied_unsettled: bool,
    /// The unsettled move of what runs that this move, recorded as intent, replaces
    /// (`ActiveHop::replaces`): what runs has not settled since it started.
    pub replaced: Option<ReplacedStart>,
}

/// When a replaced move started, and how long ago this manager first read that instant (zero
/// when it never did): its progress deadline as [`Hop::started_at`]'s ([`crate::clock`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplacedStart {
    pub at: Timestamp,
    pub seen_for: Duration,
}

impl From<&ActiveHop> for Hop {
    fn from(hop: &ActiveHop) -> Self {
        Self {
            from: hop.from.clone(),
            to: hop.to.clone(),
            started_at: hop.started_at.0,
            settled: hop.settled,
            settled_at: hop.settled_at.as_ref().map(|t| t.0),
            started_seen_for: Duration::ZERO,
            settled_seen_for: Duration::ZERO,
            failed_attempts: hop.failed_attempts,
            applied_unsettled: hop.applied_unsettled,
            replaced: hop.replaces.as_ref().map(|r| ReplacedStart {
                at: r.started_at.0,
                seen_for: Duration::ZERO,
            }),
        }
    }
}

/// The cluster, as far as pins and compatibility go. Whether it is OpenShift is decided once,
/// by discovery of the `config.openshift.io` group, never from a 404 on one object.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusterView {
    /// Plain Kubernetes: steady pins, no OpenShift compatibility checks.
    Kubernetes,
    /// OpenShift: the phase, or why ClusterVersion `version` cannot be judged (missing,
    /// unreadable, no status, unparsable: `UpgradeabilityUnknown`).
    OpenShift(Result<ClusterPhase, String>),
}

impl ClusterView {
    /// The phase, when it is known (`None` on plain Kubernetes or when unjudgeable).
    #[must_use]
    pub fn phase(&self) -> Option<&ClusterPhase> {
        match self {
            Self::OpenShift(Ok(phase)) => Some(phase),
            _ => None,
        }
    }
}

/// One catalog's content as the PO may use it.
#[derive(Debug, Clone)]
pub struct CatalogContent<'a> {
    pub name: String,
    pub priority: i32,
    pub content: &'a Catalog,
}

/// The catalogs a PO resolves from.
#[derive(Debug, Clone)]
pub enum CatalogView<'a> {
    /// A Catalog the PO may use exists but this manager has not processed it yet (a restart):
    /// nothing is judged until it has.
    Loading { catalog: String },
    /// Content to resolve from. `unavailable` names the Catalogs that may offer the package but
    /// are unavailable now (served from their last good content, or not at all): moves may use
    /// what is served (it is checked again when applied), but no verdict is given (§8.3).
    Ready {
        catalogs: Vec<CatalogContent<'a>>,
        unavailable: Vec<String>,
    },
    /// No usable content, and why.
    Unavailable(String),
}

/// What the installed bundle's OperatorCondition says (§7).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorGate {
    /// The operator has reported an OperatorCondition under POM at some point (so with
    /// `upgradeGate: Auto` it must report again after every move).
    pub reported: bool,
    pub reading: GateReading,
    /// The name of the OperatorCondition read, which the admin's override is written to: it is
    /// named after the CSV, which need not be the bundle's name (`None`: none read).
    pub object: Option<String>,
}

impl OperatorGate {
    /// No OperatorCondition and no history of reporting.
    #[must_use]
    pub fn absent() -> Self {
        Self {
            reported: false,
            reading: GateReading::Absent,
            object: None,
        }
    }
}

/// The `Upgradeable` an OperatorCondition carries for its current generation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GateReading {
    /// No OperatorCondition (or no OperatorCondition API).
    Absent,
    /// No `Upgradeable` for the current generation: never written, not yet copied to status
    /// (stale), or `Unknown`. Never counts as upgradeable.
    Pending { message: String },
    /// `Upgradeable` for the current generation, or the admin's `spec.overrides`.
    Says {
        upgradeable: bool,
        message: String,
        overridden: bool,
    },
}

impl GateReading {
    /// The operator (or the admin's override) says it must not be upgraded now.
    #[must_use]
    pub fn forbids(&self) -> bool {
        matches!(
            self,
            Self::Says {
                upgradeable: false,
                ..
            }
        )
    }

    /// `Upgradeable=True` for the current generation (or overridden to True).
    #[must_use]
    pub fn allows(&self) -> bool {
        matches!(
            self,
            Self::Says {
                upgradeable: true,
                ..
            }
        )
    }
}

/// How long the PO waited since `started`, saturating at zero.
#[must_use]
pub fn elapsed(now: Timestamp, started: Timestamp) -> Duration {
    let seconds = now.as_second().saturating_sub(started.as_second());
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// The plain view of a ClusterVersion the resolver judges the cluster phase from (§4.1);
/// `None` while the CVO has not written a status. The manager and `pomctl plan` both use it.
#[must_use]
pub fn cluster_version_snapshot(
    cv: &pom_api::openshift::ClusterVersion,
) -> Option<pom_resolver::cluster::ClusterVersionSnapshot> {
    use pom_resolver::cluster::{ClusterVersionSnapshot, HistoryEntry};
    let status = cv.status.as_ref()?;
    Some(ClusterVersionSnapshot {
        history: status
            .history
            .iter()
            .map(|h| HistoryEntry {
                state: h.state.clone(),
                version: h.version.clone(),
                completion_time: h.completion_time.as_ref().map(|t| t.0.to_string()),
            })
            .collect(),
        desired_version: Some(status.desired.version.clone()).filter(|v| !v.is_empty()),
        requested_version: cv
            .spec
            .desired_update
            .as_ref()
            .and_then(|u| u.version.clone())
            .filter(|v| !v.is_empty()),
        progressing: status
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .map(|c| c.status == "True"),
    })
}

/// ClusterVersion `version` as one decision reads it: the phase and the update requested,
/// both from the same copy of the object, so they can never describe two different moments
/// (review L2: the request used to be read from the watch store apart from the phase).
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterVersionReading {
    /// The phase, or why it cannot be judged (no status yet, unparsable versions).
    pub phase: Result<pom_resolver::cluster::ClusterPhase, String>,
    /// The minor or major update requested and not started ([`requested_update`]).
    pub requested_update: Option<Version>,
    /// The patch update the cluster is asked to take ([`requested_patch`]).
    pub requested_patch: Option<Version>,
}

/// Reads `cv` once: its phase and the update requested and not started.
#[must_use]
pub fn read_cluster_version(cv: &pom_api::openshift::ClusterVersion) -> ClusterVersionReading {
    let Some(snapshot) = cluster_version_snapshot(cv) else {
        return ClusterVersionReading {
            phase: Err(format!(
                "ClusterVersion {:?} has no status yet",
                pom_api::openshift::CLUSTER_VERSION_NAME
            )),
            requested_update: None,
            requested_patch: None,
        };
    };
    let phase = pom_resolver::cluster::cluster_phase(&snapshot).map_err(|e| e.to_string());
    let judged = phase.as_ref().ok();
    let requested_update = judged.and_then(|phase| requested_update(&snapshot, phase));
    let requested_patch = judged.and_then(|phase| requested_patch(&snapshot, phase));
    ClusterVersionReading {
        phase,
        requested_update,
        requested_patch,
    }
}

/// The minor or major update requested in the ClusterVersion's `spec.desiredUpdate` and not
/// started: the cluster is steady at `phase.current` and heads nowhere else (`status.desired`
/// is the current version: once the CVO accepts a request, `status.desired` names it even
/// before the history says so, and what follows is the update, not a wait), and the request
/// names a version of another minor or major (a patch update never waits for an operator: the
/// CVO does not gate it on `Upgradeable`). A request the CVO refused stays in
/// `spec.desiredUpdate`, which is how the CVO says it waits; one withdrawn (removed, or set
/// back) ends pre-update hops.
#[must_use]
pub fn requested_update(
    cv: &pom_resolver::cluster::ClusterVersionSnapshot,
    phase: &pom_resolver::cluster::ClusterPhase,
) -> Option<Version> {
    if phase.kind != pom_resolver::cluster::PhaseKind::Steady
        || phase.target.cmp_precedence(&phase.current).is_ne()
    {
        return None;
    }
    let raw = cv.requested_version.as_deref()?;
    let requested = pom_resolver::version::parse_tolerant(raw).ok()?;
    let current = &phase.current;
    let gated = (requested.major, requested.minor) > (current.major, current.minor);
    gated.then_some(requested)
}

/// The patch update the cluster is asked to take (issue 35 item 3): the one in progress (the
/// `PatchUpgrade` phase's target), or one requested and not started (steady, `status.desired`
/// the current version, `spec.desiredUpdate` a higher version of the same major and minor).
/// `Upgradeable` cannot hold a patch update, so what a PO would lack after it is said by the
/// update-precheck alert ([`crate::precheck::patch_shortfall`]). `None` otherwise.
#[must_use]
pub fn requested_patch(
    cv: &pom_resolver::cluster::ClusterVersionSnapshot,
    phase: &pom_resolver::cluster::ClusterPhase,
) -> Option<Version> {
    use pom_resolver::cluster::PhaseKind;
    match phase.kind {
        PhaseKind::PatchUpgrade => Some(phase.target.clone()),
        PhaseKind::Steady if phase.target.cmp_precedence(&phase.current).is_eq() => {
            let raw = cv.requested_version.as_deref()?;
            let requested = pom_resolver::version::parse_tolerant(raw).ok()?;
            let current = &phase.current;
            let patch = (requested.major, requested.minor) == (current.major, current.minor)
                && requested.cmp_precedence(current).is_gt();
            patch.then_some(requested)
        }
        _ => None,
    }
}

/// What an OperatorCondition says about upgrading away from its CSV: the admin's override if
/// set, else the operator's `Upgradeable` as copied to status *for the current generation*.
/// Anything else (never written, not copied yet, Unknown) is pending: never a yes.
#[must_use]
pub fn gate_of(oc: &pom_api::olm::OperatorCondition) -> OperatorGate {
    let generation = oc.metadata.generation;
    let reported = !oc.spec.conditions.is_empty();
    if let Some(o) = oc
        .spec
        .overrides
        .iter()
        .find(|o| o.type_ == pom_api::olm::UPGRADEABLE)
    {
        let reading = match o.status.as_str() {
            "True" | "False" => GateReading::Says {
                upgradeable: o.status == "True",
                message: format!("admin override: {}", o.message),
                overridden: true,
            },
            other => GateReading::Pending {
                message: format!("admin override with status {other:?}"),
            },
        };
        return OperatorGate {
            reported,
            reading,
            object: oc.metadata.name.clone(),
        };
    }
    let status_condition = oc
        .status
        .as_ref()
        .and_then(|s| {
            s.conditions
                .iter()
                .find(|c| c.type_ == pom_api::olm::UPGRADEABLE)
        })
        .filter(|c| c.observed_generation == generation);
    let reading = match status_condition {
        Some(c) if c.status == "True" || c.status == "False" => GateReading::Says {
            upgradeable: c.status == "True",
            message: c.message.clone(),
            overridden: false,
        },
        Some(c) => GateReading::Pending {
            message: format!("Upgradeable is {:?}: {}", c.status, c.message),
        },
        None => GateReading::Pending {
            message: "no Upgradeable condition for the current generation".to_owned(),
        },
    };
    OperatorGate {
        reported,
        reading,
        object: oc.metadata.name.clone(),
    }
}

/// What runs, recovered (for a PO restored without its status) from a catalog bundle of `package` whose name gives the bundle label
/// `label` (objects carry `label_value(bundle name)`).
pub fn recover_installed(
    catalogs: &[CatalogContent<'_>],
    package: &str,
    label: &str,
) -> Option<Installed> {
    catalogs.iter().find_map(|c| {
        let bundle = c
            .content
            .packages
            .get(package)?
            .bundles
            .values()
            .find(|b| pom_api::labels::label_value(&b.name) == label)?;
        Some(Installed::from_status(
            &InstalledBundle {
                name: bundle.name.clone(),
                version: bundle.version.to_string(),
                image: bundle.image.clone().filter(|i| !i.is_empty()),
                objects_digest: None,
            },
            bundle
                .properties
                .max_openshift_version
                .as_ref()
                .map(ToString::to_string)
                .as_deref(),
        ))
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use pom_resolver::cluster::{ClusterVersionSnapshot, HistoryEntry, cluster_phase};

    use super::*;

    #[test]
    fn the_hand_over_is_enforced_wherever_the_managers_guard_is_intact() {
        let down = |object: &str| GuardState::OwnerLabelGuardDown {
            object: object.to_owned(),
            detail: "does not exist".to_owned(),
        };
        // (guard, enforced): the owner-label guard down leaves the manager's guard enforcing.
        let cases = [
            (GuardState::Intact, true),
            (down("ValidatingAdmissionPolicy pom-owner-label"), true),
            (GuardState::Unchecked, false),
            (
                GuardState::Missing {
                    object: "ValidatingAdmissionPolicy pom-manager-guard".to_owned(),
                },
                false,
            ),
        ];
        for (guard, enforced) in cases {
            assert_eq!(guard.enforces_hand_over(), enforced, "{guard:?}");
        }
    }

    /// A ClusterVersion as `(state, version)` history entries (newest first; `Partial` ones
    /// without a completion time), `status.desired`, `spec.desiredUpdate`, `Progressing`.
    fn cv(
        history: &[(&str, &str)],
        desired: &str,
        requested: Option<&str>,
        progressing: bool,
    ) -> ClusterVersionSnapshot {
        ClusterVersionSnapshot {
            history: history
                .iter()
                .map(|(state, version)| HistoryEntry {
                    state: (*state).to_owned(),
                    version: (*version).to_owned(),
                    completion_time: (*state == "Completed").then(|| "2026-01-01T00:00:00Z".into()),
                })
                .collect(),
            desired_version: Some(desired.to_owned()),
            requested_version: requested.map(str::to_owned),
            progressing: Some(progressing),
        }
    }

    /// Review L1: `requested_update` has a table of its own, one row per rule.
    #[test]
    fn requested_update_table() {
        let steady = [("Completed", "4.16.3")];
        let rows: &[(&str, ClusterVersionSnapshot, Option<&str>)] = &[
            ("no request", cv(&steady, "4.16.3", None, false), None),
            (
                "a minor request the CVO refused",
                cv(&steady, "4.16.3", Some("4.17.0"), false),
                Some("4.17.0"),
            ),
            (
                "a major request",
                cv(&steady, "4.16.3", Some("5.0.0"), false),
                Some("5.0.0"),
            ),
            (
                "tolerant spelling",
                cv(&steady, "4.16.3", Some("v4.17.2"), false),
                Some("4.17.2"),
            ),
            (
                "a patch request is never waited on",
                cv(&steady, "4.16.3", Some("4.16.4"), false),
                None,
            ),
            (
                "the current version",
                cv(&steady, "4.16.3", Some("4.16.3"), false),
                None,
            ),
            (
                "a lower version",
                cv(&steady, "4.16.3", Some("4.15.9"), false),
                None,
            ),
            (
                "unparsable",
                cv(&steady, "4.16.3", Some("latest"), false),
                None,
            ),
            (
                "accepted: status.desired names it before the history does",
                cv(&steady, "4.17.0", Some("4.17.0"), false),
                None,
            ),
            (
                "in progress",
                cv(
                    &[("Partial", "4.17.0"), ("Completed", "4.16.3")],
                    "4.17.0",
                    Some("4.17.0"),
                    true,
                ),
                None,
            ),
            (
                "another minor requested while one runs",
                cv(
                    &[("Partial", "4.17.0"), ("Completed", "4.16.3")],
                    "4.17.0",
                    Some("4.18.0"),
                    true,
                ),
                None,
            ),
            (
                "the next minor requested once the last completed",
                cv(
                    &[("Completed", "4.17.0"), ("Completed", "4.16.3")],
                    "4.17.0",
                    Some("4.18.1"),
                    false,
                ),
                Some("4.18.1"),
            ),
        ];
        for (label, snapshot, want) in rows {
            let phase = cluster_phase(snapshot).unwrap();
            let got = requested_update(snapshot, &phase);
            assert_eq!(
                got,
                want.map(|w| Version::parse(w).unwrap()),
                "{label}: {phase:?}"
            );
        }
    }

    /// Issue 35 item 3: the patch update the cluster is asked to take, one row per rule.
    #[test]
    fn requested_patch_table() {
        let steady = [("Completed", "4.16.3")];
        let rows: &[(&str, ClusterVersionSnapshot, Option<&str>)] = &[
            ("no request", cv(&steady, "4.16.3", None, false), None),
            (
                "a patch requested, not started",
                cv(&steady, "4.16.3", Some("4.16.5"), false),
                Some("4.16.5"),
            ),
            (
                "a patch in progress",
                cv(
                    &[("Partial", "4.16.5"), ("Completed", "4.16.3")],
                    "4.16.5",
                    Some("4.16.5"),
                    true,
                ),
                Some("4.16.5"),
            ),
            (
                "a minor request is not a patch",
                cv(&steady, "4.16.3", Some("4.17.0"), false),
                None,
            ),
            (
                "the current version",
                cv(&steady, "4.16.3", Some("4.16.3"), false),
                None,
            ),
            (
                "a lower patch (a rollback request)",
                cv(&steady, "4.16.3", Some("4.16.2"), false),
                None,
            ),
            (
                "a minor update in progress",
                cv(
                    &[("Partial", "4.17.0"), ("Completed", "4.16.3")],
                    "4.17.0",
                    Some("4.17.0"),
                    true,
                ),
                None,
            ),
            (
                "completed: nothing asked any more",
                cv(
                    &[("Completed", "4.16.5"), ("Completed", "4.16.3")],
                    "4.16.5",
                    Some("4.16.5"),
                    false,
                ),
                None,
            ),
        ];
        for (label, snapshot, want) in rows {
            let phase = cluster_phase(snapshot).unwrap();
            let got = requested_patch(snapshot, &phase);
            assert_eq!(
                got,
                want.map(|w| Version::parse(w).unwrap()),
                "{label}: {phase:?}"
            );
        }
    }

    /// Review L2: the phase and the request come from one reading of one object.
    #[test]
    fn one_reading_gives_the_phase_and_the_request() {
        let object = |status: Option<serde_json::Value>| -> pom_api::openshift::ClusterVersion {
            let mut cv = serde_json::json!({
                "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
                "metadata": {"name": "version"},
                "spec": {"clusterID": "c", "desiredUpdate": {"version": "4.17.0"}},
            });
            if let Some(status) = status {
                cv["status"] = status;
            }
            serde_json::from_value(cv).unwrap()
        };
        let reading = read_cluster_version(&object(Some(serde_json::json!({
            "desired": {"version": "4.16.3"}, "observedGeneration": 1, "versionHash": "h",
            "history": [{"state": "Completed", "startedTime": "2026-01-01T00:00:00Z",
                         "completionTime": "2026-01-01T01:00:00Z", "version": "4.16.3", "verified": true}],
        }))));
        assert_eq!(
            reading.phase.as_ref().map(|p| p.kind),
            Ok(pom_resolver::cluster::PhaseKind::Steady)
        );
        assert_eq!(reading.requested_update, Some(Version::new(4, 17, 0)));
        let unwritten = read_cluster_version(&object(None));
        assert!(unwritten.phase.is_err(), "{unwritten:?}");
        assert_eq!(unwritten.requested_update, None, "no phase, no request");
    }
}
