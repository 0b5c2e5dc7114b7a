//! `aggregate::compute` as pure data (§8.2, §8.3): every PlatformOperator's status → the
//! aggregated ClusterOperator the CVO reads. Each row states the four conditions (status and
//! reason) and whether `versions[operator]` reaches the release version or stays at what was
//! reported before.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::openshift::{ClusterOperatorStatus, OperandVersion};
use pom_api::platform_operator::{
    ActiveHop, BundleRef, InstalledBundle, PackageSpec, PinReason, PinStatus, PlatformOperatorSpec,
    PlatformOperatorStatus, UpgradeApproval, UpgradeGate,
};
use pom_policy::Upgradeability;
use pom_policy::aggregate::{self, ClusterPhaseView};
use pom_policy::snapshot::GuardState;
use pom_resolver::cluster::PhaseKind;

use ConditionStatus::{False, True};

const RELEASE: &str = "4.17.0";
const BEFORE: &str = "4.16.4";
const MANAGER_NAMESPACE: &str = "openshift-platform-operators";

fn now() -> Time {
    Time(Timestamp::from_second(1_717_243_200).unwrap())
}

/// A PlatformOperator as the aggregator sees it, built from a settled, healthy default.
#[derive(Debug, Clone)]
struct Po {
    name: &'static str,
    generation: i64,
    observed: Option<i64>,
    installed: Option<&'static str>,
    desired: Option<&'static str>,
    pin: Option<PinReason>,
    /// The cluster version the pin and verdict were judged for.
    judged_for: &'static str,
    hop_settled: Option<bool>,
    /// The settled hop soaks (`soakUntil` recorded, issue 35 item 4).
    soaking: bool,
    /// `(type, status, reason, message)`; the status text is written as is.
    conditions: Vec<(&'static str, &'static str, &'static str, &'static str)>,
    no_status: bool,
}

/// Installed 1.1.0, settled, pinned Steady, reported for its generation, all conditions happy.
fn po(name: &'static str) -> Po {
    Po {
        name,
        generation: 2,
        observed: Some(2),
        installed: Some("1.1.0"),
        desired: None,
        pin: Some(PinReason::Steady),
        judged_for: TARGET,
        hop_settled: Some(true),
        soaking: false,
        conditions: vec![
            (
                types::INSTALLED,
                "True",
                "InstallSucceeded",
                "installed demo.v1.1.0 1.1.0",
            ),
            (
                types::PROGRESSING,
                "False",
                "AsExpected",
                "at the desired bundle",
            ),
            (types::DEGRADED, "False", "AsExpected", "no problems"),
            (
                types::UPGRADEABLE,
                "True",
                "AsExpected",
                "supports OpenShift up to 4.18",
            ),
        ],
        no_status: false,
    }
}

impl Po {
    fn set(
        mut self,
        type_: &'static str,
        status: &'static str,
        reason: &'static str,
        message: &'static str,
    ) -> Self {
        self.conditions.retain(|c| c.0 != type_);
        self.conditions.push((type_, status, reason, message));
        self
    }

    fn without(mut self, type_: &'static str) -> Self {
        self.conditions.retain(|c| c.0 != type_);
        self
    }

    fn upgradeable(
        self,
        status: &'static str,
        reason: &'static str,
        message: &'static str,
    ) -> Self {
        self.set(types::UPGRADEABLE, status, reason, message)
    }

    fn judged_for(mut self, version: &'static str) -> Self {
        self.judged_for = version;
        self
    }

    fn generation(mut self, generation: i64, observed: Option<i64>) -> Self {
        self.generation = generation;
        self.observed = observed;
        self
    }

    fn pin(mut self, reason: PinReason) -> Self {
        self.pin = Some(reason);
        self
    }

    fn desired(mut self, version: &'static str) -> Self {
        self.desired = Some(version);
        self
    }

    fn unsettled(mut self) -> Self {
        self.hop_settled = Some(false);
        self
    }

    fn soaking(mut self) -> Self {
        self.soaking = true;
        self
    }

    fn no_hop(mut self) -> Self {
        self.hop_settled = None;
        self
    }

    /// Nothing installed, `Installed=False` with `reason`.
    fn nothing_installed(mut self, reason: &'static str, message: &'static str) -> Self {
        self.installed = None;
        self.hop_settled = None;
        self.pin = None;
        self.set(types::INSTALLED, "False", reason, message)
    }

    fn no_status(mut self) -> Self {
        self.no_status = true;
        self
    }

    fn build(&self) -> Arc<PlatformOperator> {
        let mut po = PlatformOperator::new(
            self.name,
            PlatformOperatorSpec {
                package: PackageSpec {
                    name: self.name.to_owned(),
                    ..PackageSpec::default()
                },
                steady_state_version_range: None,
                install_namespace: None,
                upgrade_gate: UpgradeGate::Auto,
                progress_deadline: "10m".to_owned(),
                soak: None,
                content_exceptions: Vec::new(),
                omit_objects: Vec::new(),
                consent: Default::default(),
                watch_namespace: None,
                upgrade_approval: UpgradeApproval::Automatic,
                pre_update_hops: Default::default(),
                approved_bundle: None,
                paused: false,
                config: None,
                adopt_from: None,
            },
        );
        po.metadata.generation = Some(self.generation);
        if !self.no_status {
            let version = self.installed.unwrap_or("0.0.0");
            po.status = Some(PlatformOperatorStatus {
                observed_generation: self.observed,
                conditions: self
                    .conditions
                    .iter()
                    .map(|(type_, status, reason, message)| Condition {
                        type_: (*type_).to_owned(),
                        status: (*status).to_owned(),
                        reason: (*reason).to_owned(),
                        message: (*message).to_owned(),
                        observed_generation: self.observed,
                        last_transition_time: now(),
                    })
                    .collect(),
                installed_bundle: self.installed.map(|v| InstalledBundle {
                    name: format!("{}.v{v}", self.name),
                    version: v.to_owned(),
                    image: None,
                    objects_digest: None,
                }),
                desired_bundle: self.desired.map(|v| BundleRef {
                    name: format!("{}.v{v}", self.name),
                    version: v.to_owned(),
                }),
                pin: self.pin.map(|reason| PinStatus {
                    range: format!("={version}"),
                    reason,
                    // "": judged for no cluster version (what runs is left unjudged).
                    cluster_version: (!self.judged_for.is_empty())
                        .then(|| self.judged_for.to_owned()),
                }),
                active_hop: self.hop_settled.map(|settled| ActiveHop {
                    from: None,
                    to: format!("{}.v{version}", self.name),
                    started_at: now(),
                    settled,
                    waiting_for: None,
                    image: None,
                    failed_attempts: 0,
                    rolled_out_at: None,
                    config: None,
                    applied_unsettled: false,
                    settled_at: Some(now()),
                    soak_until: self.soaking.then(now),
                    replaces: None,
                }),
                max_open_shift_version: None,
                inventory: Vec::new(),
                install_namespace: None,
                powers: Vec::new(),
                applied_config: None,
            });
        }
        Arc::new(po)
    }
}

fn previous() -> ClusterOperatorStatus {
    ClusterOperatorStatus {
        conditions: vec![],
        versions: vec![OperandVersion {
            name: "operator".to_owned(),
            version: BEFORE.to_owned(),
        }],
        related_objects: vec![],
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Versions {
    /// `operator` = the release version.
    Reported,
    /// What was reported before.
    Withheld,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    available: (ConditionStatus, Reason),
    progressing: (ConditionStatus, Reason),
    degraded: (ConditionStatus, Reason),
    upgradeable: (ConditionStatus, Reason),
    versions: Versions,
}

impl Shape {
    fn of(status: &ClusterOperatorStatus) -> Self {
        let get = |t: &str| {
            let matching: Vec<_> = status.conditions.iter().filter(|c| c.type_ == t).collect();
            assert_eq!(
                matching.len(),
                1,
                "exactly one {t} condition (always explicit)"
            );
            let c = matching[0];
            (
                ConditionStatus::parse_lenient(&c.status),
                c.reason.as_deref().unwrap().parse::<Reason>().unwrap(),
            )
        };
        let versions = if status.versions
            == [OperandVersion {
                name: "operator".to_owned(),
                version: RELEASE.to_owned(),
            }] {
            Versions::Reported
        } else {
            assert_eq!(status.versions, previous().versions, "withheld = as before");
            Versions::Withheld
        };
        Self {
            available: get(types::AVAILABLE),
            progressing: get(types::PROGRESSING),
            degraded: get(types::DEGRADED),
            upgradeable: get(types::UPGRADEABLE),
            versions,
        }
    }
}

struct Row {
    name: &'static str,
    pos: Vec<Po>,
    cluster: ClusterPhaseView,
    want: Shape,
    /// `(condition type, text its message must contain)`.
    says: Vec<(&'static str, &'static str)>,
}

const HAPPY: (ConditionStatus, Reason) = (True, Reason::AsExpected);
const CALM: (ConditionStatus, Reason) = (False, Reason::AsExpected);

fn shape(upgradeable: (ConditionStatus, Reason), versions: Versions) -> Shape {
    Shape {
        available: HAPPY,
        progressing: CALM,
        degraded: CALM,
        upgradeable,
        versions,
    }
}

fn blocked(reason: Reason, versions: Versions) -> Shape {
    shape((False, reason), versions)
}

use ClusterPhaseView::{Absent, Unknown};

/// The version the cluster heads to in every row, and the one its POs were judged for unless a
/// row says otherwise.
const TARGET: &str = "4.17.0";

fn known(kind: PhaseKind) -> ClusterPhaseView {
    ClusterPhaseView::Known {
        kind,
        target: semver::Version::parse(TARGET).unwrap(),
    }
}
use Versions::{Reported, Withheld};

fn rows() -> Vec<Row> {
    let steady = || known(PhaseKind::Steady);
    let minor = || known(PhaseKind::MinorUpgrade);
    let patch = || known(PhaseKind::PatchUpgrade);
    vec![
        Row {
            name: "no platform operators: all happy, versions reported",
            pos: vec![],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![(types::AVAILABLE, "No platform operators")],
        },
        Row {
            name: "one settled PO at its steady pin",
            pos: vec![po("a")],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![(types::UPGRADEABLE, "a: supports OpenShift up to 4.18")],
        },
        Row {
            name: "a PO that has not reported for its current generation blocks",
            pos: vec![po("a"), po("b").generation(3, Some(2))],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Withheld),
            says: vec![(types::UPGRADEABLE, "b: has not reported")],
        },
        // Issue 25 item 10: a manager down for a whole update judged its POs at steady 4.16.3;
        // the cluster is steady again at 4.17.0. Same phase, another version: not trusted.
        Row {
            name: "a PO judged for another cluster version blocks and withholds versions",
            pos: vec![po("a"), po("b").judged_for("4.16.3")],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Withheld),
            says: vec![(
                types::UPGRADEABLE,
                "b: has not been judged for the cluster's current update phase",
            )],
        },
        Row {
            name: "a PO with no status at all blocks and withholds versions",
            pos: vec![po("a").no_status()],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Withheld),
            says: vec![],
        },
        Row {
            name: "a current PO without an Upgradeable condition blocks",
            pos: vec![po("a").without(types::UPGRADEABLE)],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Reported),
            says: vec![],
        },
        Row {
            name: "Unknown is written as False",
            pos: vec![po("a").upgradeable(
                "Unknown",
                "UpgradeabilityUnknown",
                "catalog unavailable",
            )],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Reported),
            says: vec![(types::UPGRADEABLE, "a: catalog unavailable")],
        },
        Row {
            name: "not True with the happy reason cannot be read: False UpgradeabilityUnknown",
            pos: vec![po("a").upgradeable("Maybe", "AsExpected", "?")],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Reported),
            says: vec![(types::UPGRADEABLE, "a: Upgradeable is \"Maybe\"")],
        },
        Row {
            name: "a reason POM does not write is Unknown, even with status True",
            pos: vec![po("a").upgradeable("True", "LooksFine", "hand-edited")],
            cluster: steady(),
            want: blocked(Reason::UpgradeabilityUnknown, Reported),
            says: vec![(types::UPGRADEABLE, "LooksFine")],
        },
        Row {
            name: "one blocking PO: its reason, only its line",
            pos: vec![
                po("a"),
                po("b").upgradeable("False", "OperatorNotUpgradeable", "migrating"),
            ],
            cluster: steady(),
            want: blocked(Reason::OperatorNotUpgradeable, Reported),
            says: vec![(types::UPGRADEABLE, "b: migrating")],
        },
        Row {
            name: "two POs blocking for the same reason keep it",
            pos: vec![
                po("a").upgradeable("False", "IncompatibleOperatorsInstalled", "max 4.16"),
                po("b").upgradeable("False", "IncompatibleOperatorsInstalled", "max 4.15"),
            ],
            cluster: steady(),
            want: blocked(Reason::IncompatibleOperatorsInstalled, Reported),
            says: vec![(types::UPGRADEABLE, "PlatformOperators blocking minor version upgrades to 4.18 or higher:\n- a: max 4.16\n- b: max 4.15")],
        },
        Row {
            name: "several reasons: MultipleReasons, one line per PO sorted by name",
            pos: vec![
                po("zeta").upgradeable("False", "OperatorNotUpgradeable", "migrating"),
                po("alpha").upgradeable("False", "IncompatibleOperatorsInstalled", "max 4.16"),
                po("mid"),
            ],
            cluster: steady(),
            want: blocked(Reason::MultipleReasons, Reported),
            says: vec![(types::UPGRADEABLE, "- alpha: max 4.16\n- zeta: migrating")],
        },
        Row {
            name: "an unsettled PO (MoveNotSettled) and an unknown one: MultipleReasons",
            pos: vec![
                po("a").unsettled().upgradeable(
                    "False",
                    "MoveNotSettled",
                    "the move has not settled",
                ),
                po("b").upgradeable("Unknown", "UpgradeabilityUnknown", "cannot judge"),
            ],
            cluster: steady(),
            want: blocked(Reason::MultipleReasons, Withheld),
            says: vec![],
        },
        // versions[operator] (§8.2).
        Row {
            name: "minor update: a PO still pinned Steady withholds versions",
            pos: vec![po("a").pin(PinReason::MinorUpgrade), po("b")],
            cluster: minor(),
            want: shape((False, Reason::UpgradeabilityUnknown), Withheld),
            says: vec![],
        },
        Row {
            name: "minor update: every PO settled at a MinorUpgrade pin reports versions",
            pos: vec![
                po("a").pin(PinReason::MinorUpgrade),
                po("b").pin(PinReason::MinorUpgrade),
            ],
            cluster: minor(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "minor update: a pending move (desiredBundle) withholds versions",
            pos: vec![
                po("a")
                    .pin(PinReason::MinorUpgrade)
                    .desired("1.2.0")
                    .upgradeable("False", "MoveNotSettled", "a move to a.v1.2.0 is pending"),
            ],
            cluster: minor(),
            want: blocked(Reason::MoveNotSettled, Withheld),
            says: vec![],
        },
        Row {
            name: "minor update: an unsettled hop withholds versions",
            pos: vec![po("a").pin(PinReason::MinorUpgrade).unsettled()],
            cluster: minor(),
            want: shape(HAPPY, Withheld),
            says: vec![],
        },
        Row {
            name: "minor update: a settled hop that soaks withholds versions",
            pos: vec![po("a").pin(PinReason::MinorUpgrade).soaking()],
            cluster: minor(),
            want: shape(HAPPY, Withheld),
            says: vec![],
        },
        Row {
            name: "a PO with no recorded hop is not known to be settled",
            pos: vec![po("a").no_hop()],
            cluster: steady(),
            want: shape(HAPPY, Withheld),
            says: vec![],
        },
        Row {
            name: "minor update: a PO not reported for its generation withholds versions",
            pos: vec![po("a").pin(PinReason::MinorUpgrade).generation(5, Some(4))],
            cluster: minor(),
            want: blocked(Reason::UpgradeabilityUnknown, Withheld),
            says: vec![],
        },
        Row {
            name: "patch update: a MinorUpgrade pin is not the patch pin",
            pos: vec![po("a").pin(PinReason::MinorUpgrade)],
            cluster: patch(),
            want: shape((False, Reason::UpgradeabilityUnknown), Withheld),
            says: vec![],
        },
        Row {
            name: "patch update: PatchUpgrade pins report versions",
            pos: vec![po("a").pin(PinReason::PatchUpgrade)],
            cluster: patch(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "rollback: Rollback pins report versions",
            pos: vec![po("a").pin(PinReason::Rollback)],
            cluster: known(PhaseKind::Rollback),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "steady: an admin's Override pin is a steady pin",
            pos: vec![po("a").pin(PinReason::Override), po("b")],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "steady: a PO still pinned for the finished update withholds versions",
            pos: vec![po("a").pin(PinReason::MinorUpgrade)],
            cluster: steady(),
            want: shape((False, Reason::UpgradeabilityUnknown), Withheld),
            says: vec![],
        },
        Row {
            name: "ClusterVersion unjudgeable: versions never move",
            pos: vec![po("a")],
            cluster: Unknown,
            want: shape((False, Reason::UpgradeabilityUnknown), Withheld),
            says: vec![],
        },
        Row {
            name: "plain Kubernetes: any settled pin reports versions",
            pos: vec![
                po("a").pin(PinReason::Steady),
                po("b").pin(PinReason::Override),
            ],
            cluster: Absent,
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        // Available, Progressing, Degraded.
        Row {
            name: "a PO with nothing working: Available False, Degraded True",
            pos: vec![
                po("a"),
                po("b")
                    .nothing_installed("SourceFailed", "catalog redhat unavailable")
                    .set(
                        types::DEGRADED,
                        "True",
                        "SourceFailed",
                        "catalog redhat unavailable",
                    ),
            ],
            cluster: steady(),
            want: Shape {
                available: (False, Reason::PlatformOperatorFailed),
                progressing: CALM,
                degraded: (True, Reason::PlatformOperatorFailed),
                upgradeable: HAPPY,
                versions: Reported,
            },
            says: vec![
                (types::AVAILABLE, "b: catalog redhat unavailable"),
                (types::DEGRADED, "b: catalog redhat unavailable"),
            ],
        },
        Row {
            name: "a settled operator that stopped working: Available False (issue 25 item 8)",
            pos: vec![
                po("a"),
                po("b")
                    .set(
                        types::DEGRADED,
                        "True",
                        "OperatorUnavailable",
                        "the operator stopped working after it settled: Deployment b/operator is not available",
                    )
                    .upgradeable(
                        "False",
                        "OperatorUnavailable",
                        "the operator stopped working after it settled",
                    ),
            ],
            cluster: steady(),
            want: Shape {
                available: (False, Reason::PlatformOperatorFailed),
                progressing: CALM,
                degraded: (True, Reason::PlatformOperatorFailed),
                upgradeable: (False, Reason::OperatorUnavailable),
                versions: Reported,
            },
            says: vec![
                (types::AVAILABLE, "b: the operator stopped working"),
                (types::DEGRADED, "b: the operator stopped working"),
            ],
        },
        // Issue 23 item 5: a move held for the admin's approval, and a paused PO.
        Row {
            name: "a first install waiting for approval is not unavailable and does not block",
            pos: vec![
                po("a"),
                po("b")
                    .nothing_installed(
                        "UpgradePendingApproval",
                        "the install of b.v1.1.0 waits: approve it",
                    )
                    .desired("1.1.0")
                    .set(
                        types::PROGRESSING,
                        "False",
                        "UpgradePendingApproval",
                        "the move to b.v1.1.0 waits",
                    ),
            ],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "a hop waiting for approval blocks, naming the PO and the bundle, and holds the release",
            pos: vec![
                po("a").pin(PinReason::MinorUpgrade),
                po("b")
                    .pin(PinReason::MinorUpgrade)
                    .desired("1.2.0")
                    .set(
                        types::PROGRESSING,
                        "False",
                        "UpgradePendingApproval",
                        "the move to b.v1.2.0 waits",
                    )
                    .upgradeable(
                        "False",
                        "UpgradePendingApproval",
                        "the move to b.v1.2.0 waits for the admin's approval (pomctl approve b --bundle b.v1.2.0)",
                    ),
            ],
            cluster: minor(),
            want: blocked(Reason::UpgradePendingApproval, Withheld),
            says: vec![(
                types::UPGRADEABLE,
                "b: the move to b.v1.2.0 waits for the admin's approval (pomctl approve b --bundle b.v1.2.0)",
            )],
        },
        Row {
            name: "a paused PO blocks with its reason, not as unavailable",
            pos: vec![
                po("a"),
                po("b")
                    .set(types::PROGRESSING, "False", "Paused", "paused (spec.paused)")
                    .upgradeable(
                        "False",
                        "Paused",
                        "paused (spec.paused): POM neither moves nor repairs b.v1.1.0",
                    ),
            ],
            cluster: steady(),
            want: blocked(Reason::Paused, Reported),
            says: vec![(types::UPGRADEABLE, "b: paused (spec.paused)")],
        },
        Row {
            name: "a PO paused before its first install is not unavailable",
            pos: vec![
                po("a").nothing_installed("Paused", "paused (spec.paused): the install waits"),
            ],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "a first install not applied yet is not unavailable",
            pos: vec![po("a").nothing_installed("Installing", "waiting for a bundle to install")],
            cluster: steady(),
            want: shape(HAPPY, Reported),
            says: vec![],
        },
        Row {
            name: "a duplicate PO is not unavailable, but is degraded",
            pos: vec![
                po("a"),
                po("b")
                    .nothing_installed("DuplicatePackage", "managed by a")
                    .set(types::DEGRADED, "True", "DuplicatePackage", "managed by a"),
            ],
            cluster: steady(),
            want: Shape {
                available: HAPPY,
                progressing: CALM,
                degraded: (True, Reason::PlatformOperatorFailed),
                upgradeable: HAPPY,
                versions: Reported,
            },
            says: vec![(types::DEGRADED, "b: managed by a")],
        },
        Row {
            // Found by the release soak of session 23 (seed 20261207): the loser of a duplicate
            // still runs its bundle, settled at a pin it was judged for before the duplicate
            // appeared; nobody moves it while the older PO manages the package, so once the
            // older one went, its stale status reported the release before it was judged again.
            // Its status now records that pin judged for no cluster version
            // (`status_table::a_duplicate_that_still_runs_keeps_its_pin_judged_for_no_version`).
            name: "a duplicate PO that still runs its bundle withholds the release",
            pos: vec![
                po("a"),
                po("b")
                    .judged_for("")
                    .set(types::DEGRADED, "True", "DuplicatePackage", "managed by a")
                    .upgradeable(
                        "Unknown",
                        "UpgradeabilityUnknown",
                        "b.v1.1.0 still runs from this PlatformOperator, which no longer manages the package",
                    ),
            ],
            cluster: steady(),
            want: Shape {
                available: HAPPY,
                progressing: CALM,
                degraded: (True, Reason::PlatformOperatorFailed),
                upgradeable: (False, Reason::UpgradeabilityUnknown),
                versions: Withheld,
            },
            says: vec![(types::DEGRADED, "b: managed by a")],
        },
        Row {
            name: "a failing upgrade keeps the operator available: Degraded only",
            pos: vec![
                po("a")
                    .set(
                        types::DEGRADED,
                        "True",
                        "UnsafeCRDChange",
                        "CRD would drop v1",
                    )
                    .set(
                        types::PROGRESSING,
                        "False",
                        "UnsafeCRDChange",
                        "blocked; see Degraded",
                    ),
            ],
            cluster: steady(),
            want: Shape {
                available: HAPPY,
                progressing: CALM,
                degraded: (True, Reason::PlatformOperatorFailed),
                upgradeable: HAPPY,
                versions: Reported,
            },
            says: vec![(types::DEGRADED, "a: CRD would drop v1")],
        },
        Row {
            name: "a moving PO: Progressing True, terse",
            pos: vec![
                po("a")
                    .pin(PinReason::MinorUpgrade)
                    .unsettled()
                    .set(
                        types::PROGRESSING,
                        "True",
                        "Upgrading",
                        "applied; waiting for a long list",
                    )
                    .upgradeable("False", "MoveNotSettled", "the move has not settled"),
                po("b").pin(PinReason::MinorUpgrade),
            ],
            cluster: minor(),
            want: Shape {
                available: HAPPY,
                progressing: (True, Reason::PlatformOperatorsProgressing),
                degraded: CALM,
                upgradeable: (False, Reason::MoveNotSettled),
                versions: Withheld,
            },
            says: vec![(types::PROGRESSING, "a: Upgrading")],
        },
    ]
}

fn compute(row: &Row) -> ClusterOperatorStatus {
    let pos: Vec<Arc<PlatformOperator>> = row.pos.iter().map(Po::build).collect();
    aggregate::compute(
        &pos,
        &previous(),
        RELEASE,
        MANAGER_NAMESPACE,
        row.cluster.clone(),
        &GuardState::Intact,
        &now(),
    )
}

#[test]
fn aggregate_table() {
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let status = compute(row);
        let got = Shape::of(&status);
        if got != row.want {
            failures.push(format!(
                "{}\n  expected {:?}\n  got      {got:?}\n  conditions: {:#?}",
                row.name, row.want, status.conditions
            ));
            continue;
        }
        for (type_, text) in &row.says {
            let message = status
                .conditions
                .iter()
                .find(|c| c.type_ == *type_)
                .and_then(|c| c.message.clone())
                .unwrap_or_default();
            if !message.contains(text) {
                failures.push(format!("{}: {type_} lacks {text:?}: {message}", row.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows failed:\n{}",
        failures.len(),
        rows.len(),
        failures.join("\n")
    );
}

/// Fail closed in every row: the aggregated Upgradeable is True only when every PO reported
/// True for its current generation.
#[test]
fn upgradeable_is_true_only_when_every_po_says_true_for_its_generation() {
    for row in rows() {
        let status = compute(&row);
        let aggregated = status
            .conditions
            .iter()
            .find(|c| c.type_ == types::UPGRADEABLE)
            .unwrap();
        let all_true = row.pos.iter().all(|p| {
            !p.no_status
                && p.observed == Some(p.generation)
                && p.conditions
                    .iter()
                    .any(|c| c.0 == types::UPGRADEABLE && c.1 == "True" && c.2 == "AsExpected")
        });
        // True needs every PO True for its generation (and judged for the cluster's current
        // phase: rows where a PO's pin is for another phase say False).
        if aggregated.status == "True" {
            assert!(all_true, "{}", row.name);
        }
        assert_ne!(aggregated.status, "Unknown", "{}: never Unknown", row.name);
    }
}

#[test]
fn related_objects_name_every_install_namespace_once() {
    let mut shared = po("b").build();
    Arc::make_mut(&mut shared).spec.install_namespace = Some("shared".to_owned());
    let mut also_shared = po("c").build();
    Arc::make_mut(&mut also_shared).spec.install_namespace = Some("shared".to_owned());
    let status = aggregate::compute(
        &[po("a").build(), shared, also_shared],
        &ClusterOperatorStatus::default(),
        RELEASE,
        MANAGER_NAMESPACE,
        known(PhaseKind::Steady),
        &GuardState::Intact,
        &now(),
    );
    let names: Vec<(&str, &str)> = status
        .related_objects
        .iter()
        .map(|r| (r.resource.as_str(), r.name.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("namespaces", MANAGER_NAMESPACE),
            ("platformoperators", ""),
            ("catalogs", ""),
            ("namespaces", "a"),
            ("namespaces", "shared"),
        ]
    );
}

/// Issue 34 item 6: must-gather collects where the operator runs, which is the namespace the
/// status recorded (a bundle's suggested namespace) rather than the PO's name, and stays the
/// recorded one when the spec names another afterwards.
#[test]
fn related_objects_name_the_recorded_install_namespace() {
    let mut suggested = po("a").build();
    Arc::make_mut(&mut suggested)
        .status
        .get_or_insert_with(Default::default)
        .install_namespace = Some("openshift-suggested".to_owned());
    let mut moved_spec = po("b").build();
    let moved = Arc::make_mut(&mut moved_spec);
    moved.spec.install_namespace = Some("elsewhere".to_owned());
    moved
        .status
        .get_or_insert_with(Default::default)
        .install_namespace = Some("where-it-runs".to_owned());
    let status = aggregate::compute(
        &[suggested, moved_spec],
        &ClusterOperatorStatus::default(),
        RELEASE,
        MANAGER_NAMESPACE,
        known(PhaseKind::Steady),
        &GuardState::Intact,
        &now(),
    );
    let namespaces: Vec<&str> = status
        .related_objects
        .iter()
        .filter(|r| r.resource == "namespaces" && r.name != MANAGER_NAMESPACE)
        .map(|r| r.name.as_str())
        .collect();
    assert_eq!(namespaces, ["openshift-suggested", "where-it-runs"]);
}

#[test]
fn an_unchanged_input_gives_an_equal_status() {
    let row = &rows()[1];
    let pos: Vec<Arc<PlatformOperator>> = row.pos.iter().map(Po::build).collect();
    let first = compute(row);
    let later = Time(Timestamp::from_second(1_717_250_000).unwrap());
    let again = aggregate::compute(
        &pos,
        &first,
        RELEASE,
        MANAGER_NAMESPACE,
        row.cluster.clone(),
        &GuardState::Intact,
        &later,
    );
    assert_eq!(again, first);
}

/// `(name, per-PO verdicts, folded status, folded reason, text of the folded message)`.
type FoldCase = (
    &'static str,
    Vec<(&'static str, Upgradeability)>,
    ConditionStatus,
    Reason,
    &'static str,
);

#[test]
fn fold_upgradeable_rows() {
    let yes = |m: &str| Upgradeability::yes(m);
    let no = |r: Reason, m: &str| Upgradeability::no(r, m);
    let cases: Vec<FoldCase> = vec![
        (
            "empty",
            vec![],
            True,
            Reason::AsExpected,
            "No platform operators",
        ),
        (
            "all true: every line",
            vec![("b", yes("fine b")), ("a", yes("fine a"))],
            True,
            Reason::AsExpected,
            "a: fine a\nb: fine b",
        ),
        (
            "unknown blocks",
            vec![
                ("a", yes("fine")),
                ("b", Upgradeability::unknown("cannot judge")),
            ],
            ConditionStatus::Unknown,
            Reason::UpgradeabilityUnknown,
            "PlatformOperators blocking minor version upgrades to 4.18 or higher:\n- b: cannot judge",
        ),
        (
            "two reasons",
            vec![
                ("b", no(Reason::OperatorNotUpgradeable, "migrating")),
                ("a", no(Reason::MoveNotSettled, "moving")),
            ],
            False,
            Reason::MultipleReasons,
            "PlatformOperators blocking minor version upgrades to 4.18 or higher:\n- a: moving\n- b: migrating",
        ),
    ];
    for (name, items, status, reason, message) in cases {
        let items: Vec<(String, Upgradeability)> =
            items.into_iter().map(|(n, u)| (n.to_owned(), u)).collect();
        let folded = aggregate::fold_upgradeable(&items, Some((4, 18)));
        // Unknown folds to a blocker: `no(...)` is False whatever the inputs' status.
        let status = if status == ConditionStatus::Unknown {
            False
        } else {
            status
        };
        assert_eq!((folded.status, folded.reason), (status, reason), "{name}");
        assert!(
            folded.message.contains(message),
            "{name}: {}",
            folded.message
        );
    }
}

/// 1,000 POs failing their pulls with long messages (as in `pom-catalog-rss`): every message of
/// the aggregated status lists the first POs by name, each line bounded, and counts the rest,
/// so the status stays a small object (unbounded, it was several MiB and its write failed).
#[test]
fn messages_list_a_bounded_number_of_pos_and_count_the_rest() {
    const POS: usize = 1_000;
    let long =
        "pulling bundle image registry.example/op@sha256:0123: manifest unknown; ".repeat(40);
    let long: &'static str = Box::leak(long.into_boxed_str());
    let pos: Vec<Arc<PlatformOperator>> = (0..POS)
        .rev()
        .map(|i| {
            let mut po = po("x")
                .nothing_installed("UnpackFailed", long)
                .set(types::DEGRADED, "True", "UnpackFailed", long)
                .upgradeable("False", "UpgradeabilityUnknown", long)
                .build();
            let name = format!("po-{i:04}");
            Arc::make_mut(&mut po).metadata.name = Some(name);
            po
        })
        .collect();
    let status = aggregate::compute(
        &pos,
        &previous(),
        RELEASE,
        MANAGER_NAMESPACE,
        known(PhaseKind::Steady),
        &GuardState::Intact,
        &now(),
    );
    for (type_, want) in [
        (types::AVAILABLE, "False"),
        (types::DEGRADED, "True"),
        (types::UPGRADEABLE, "False"),
    ] {
        let condition = status.conditions.iter().find(|c| c.type_ == type_).unwrap();
        assert_eq!(condition.status, want, "{type_}");
        let message = condition.message.clone().unwrap_or_default();
        let mut lines: Vec<&str> = message.lines().collect();
        // Upgradeable=False opens with OLM v0's header and lists POs as `- <po>: ...`.
        let bullet = if type_ == types::UPGRADEABLE {
            assert_eq!(
                lines.remove(0),
                "PlatformOperators blocking minor version upgrades to 4.18 or higher:"
            );
            "- "
        } else {
            ""
        };
        assert_eq!(
            lines.len(),
            aggregate::MAX_LISTED_POS + 1,
            "{type_}: {message}"
        );
        for (i, line) in lines[..aggregate::MAX_LISTED_POS].iter().enumerate() {
            assert!(
                line.starts_with(&format!("{bullet}po-{i:04}: ")),
                "{type_}: {line}"
            );
            assert!(
                line.len() <= aggregate::MAX_LINE_BYTES,
                "{type_}: {}",
                line.len()
            );
            assert!(line.ends_with("..."), "{type_}: a cut line says so: {line}");
        }
        let rest = POS - aggregate::MAX_LISTED_POS;
        assert!(
            lines[aggregate::MAX_LISTED_POS].contains(&format!("{rest} more platform operators")),
            "{type_}: {}",
            lines[aggregate::MAX_LISTED_POS]
        );
    }
    let messages: usize = status
        .conditions
        .iter()
        .map(|c| c.message.as_deref().unwrap_or_default().len())
        .sum();
    assert!(
        messages < 3 * (aggregate::MAX_LISTED_POS + 1) * aggregate::MAX_LINE_BYTES,
        "the messages of 1,000 failing POs take {messages} bytes"
    );
}

#[test]
fn per_po_messages_are_whole_up_to_the_limits_and_cut_at_character_boundaries() {
    let listed: Vec<String> = (0..aggregate::MAX_LISTED_POS)
        .map(|i| format!("po-{i}: fine"))
        .collect();
    assert_eq!(aggregate::per_po_message(listed.clone()), listed.join("\n"));
    let exact = "a".repeat(aggregate::MAX_LINE_BYTES);
    assert_eq!(aggregate::per_po_message([exact.clone()]), exact);
    // Multi-byte characters around the cut: the line stays valid UTF-8 and within the limit.
    for pad in 0..4 {
        let line = format!("{}{}", "a".repeat(pad), "é€😀".repeat(300));
        let cut = aggregate::per_po_message([line.clone()]);
        assert!(cut.len() <= aggregate::MAX_LINE_BYTES, "{}", cut.len());
        assert!(cut.len() >= aggregate::MAX_LINE_BYTES - 6, "{}", cut.len());
        assert!(cut.ends_with("..."));
        assert!(line.starts_with(cut.trim_end_matches("...")));
    }
    let one_more: Vec<String> = (0..=aggregate::MAX_LISTED_POS)
        .map(|i| format!("po-{i}: fine"))
        .collect();
    let message = aggregate::per_po_message(one_more);
    assert!(message.ends_with("... and 1 more platform operators: `oc get platformoperators` shows each one's conditions"), "{message}");
}

/// Issue 22 item 2: without the manager's admission guard the ClusterOperator is Degraded with
/// a reason of its own and a message naming the missing object, with or without POs, and the
/// POs' own faults still follow it.
#[test]
fn a_missing_admission_guard_degrades_the_cluster_operator() {
    let guard = GuardState::Missing {
        object: "ValidatingAdmissionPolicyBinding platform-operators-manager-guard".to_owned(),
    };
    for pos in [
        vec![],
        vec![
            po("a")
                .set(types::DEGRADED, "True", "InstallFailed", "the apply failed")
                .build(),
        ],
    ] {
        let status = aggregate::compute(
            &pos,
            &previous(),
            RELEASE,
            MANAGER_NAMESPACE,
            known(PhaseKind::Steady),
            &guard,
            &now(),
        );
        let degraded = status
            .conditions
            .iter()
            .find(|c| c.type_ == types::DEGRADED)
            .unwrap();
        assert_eq!(
            (
                degraded.status.as_str(),
                degraded.reason.as_deref().unwrap_or_default()
            ),
            ("True", "AdmissionGuardMissing")
        );
        let message = degraded.message.clone().unwrap_or_default();
        assert!(
            message.contains(
                "ValidatingAdmissionPolicyBinding platform-operators-manager-guard does not exist"
            ),
            "{message}"
        );
        assert_eq!(
            message.contains("a: the apply failed"),
            !pos.is_empty(),
            "{message}"
        );
    }
}

/// Review finding on issue 33 item 5: without the owner-label guard (it bounds tenants, not
/// the manager) the ClusterOperator is Degraded with the same reason, naming it, while POM
/// keeps writing (`GuardState::allows_writes`).
#[test]
fn a_missing_owner_label_guard_degrades_without_stopping_writes() {
    let guard = GuardState::OwnerLabelGuardDown {
        object: "ValidatingAdmissionPolicy platform-operators-owner-label-guard".to_owned(),
        detail: "does not exist".to_owned(),
    };
    assert!(guard.allows_writes() && guard.problem().is_none());
    let status = aggregate::compute(
        &[],
        &previous(),
        RELEASE,
        MANAGER_NAMESPACE,
        known(PhaseKind::Steady),
        &guard,
        &now(),
    );
    let degraded = status
        .conditions
        .iter()
        .find(|c| c.type_ == types::DEGRADED)
        .unwrap();
    assert_eq!(
        (
            degraded.status.as_str(),
            degraded.reason.as_deref().unwrap_or_default()
        ),
        ("True", "AdmissionGuardMissing")
    );
    let message = degraded.message.clone().unwrap_or_default();
    assert!(
        message.contains("platform-operators-owner-label-guard does not exist")
            && message.contains("POM keeps installing and repairing"),
        "{message}"
    );
}

/// Issue 35 item 5: the blocking `Upgradeable` message opens as OLM v0's
/// `IncompatibleOperatorsInstalled` does, naming the minor it blocks when the cluster says
/// which one that is, and lists the POs one per line, `- <po>: ...`.
#[test]
fn a_blocking_message_opens_with_the_minor_it_blocks_in_olm_form() {
    let cases = [
        (known(PhaseKind::Steady), Some((4, 18))),
        (known(PhaseKind::PatchUpgrade), Some((4, 18))),
        (known(PhaseKind::Rollback), Some((4, 18))),
        // Mid-minor-update the POs are judged for the update after it (the CVO counts from
        // `status.desired.version`), so the header names that one.
        (known(PhaseKind::MinorUpgrade), Some((4, 18))),
        (Absent, None),
        (Unknown, None),
    ];
    for (cluster, next) in cases {
        assert_eq!(cluster.next_minor(), next, "{cluster:?}");
        let status = aggregate::compute(
            &[po("b")
                .upgradeable(
                    "False",
                    "IncompatibleOperatorsInstalled",
                    "bundle b.v1.0.0 (1.0.0) supports OpenShift up to 4.17 (olm.maxOpenShiftVersion); move on",
                )
                .build()],
            &previous(),
            RELEASE,
            MANAGER_NAMESPACE,
            cluster.clone(),
            &GuardState::Intact,
            &now(),
        );
        let condition = status
            .conditions
            .iter()
            .find(|c| c.type_ == types::UPGRADEABLE)
            .unwrap();
        assert_eq!(
            (condition.status.as_str(), condition.reason.as_deref()),
            ("False", Some("IncompatibleOperatorsInstalled")),
            "{cluster:?}"
        );
        let header = match next {
            Some((major, minor)) => format!(
                "PlatformOperators blocking minor version upgrades to {major}.{minor} or higher:"
            ),
            None => "PlatformOperators blocking minor version upgrades:".to_owned(),
        };
        assert_eq!(
            condition.message.as_deref(),
            Some(format!("{header}\n- b: bundle b.v1.0.0 (1.0.0) supports OpenShift up to 4.17 (olm.maxOpenShiftVersion); move on").as_str()),
            "{cluster:?}"
        );
    }
    // Upgradeable=True keeps its plain per-PO lines: nothing blocks, nothing is listed as such.
    let status = aggregate::compute(
        &[po("a").build()],
        &previous(),
        RELEASE,
        MANAGER_NAMESPACE,
        known(PhaseKind::Steady),
        &GuardState::Intact,
        &now(),
    );
    let condition = status
        .conditions
        .iter()
        .find(|c| c.type_ == types::UPGRADEABLE)
        .unwrap();
    assert_eq!(condition.status, "True");
    assert!(
        !condition
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("blocking"),
        "{condition:?}"
    );
}
