//! `status::compute` as pure data (§7, §8.1): previous status + decision + what the install step
//! reported → the PlatformOperator's status. Each row states the whole status expected (the
//! four conditions' status and reason, installed and desired bundles, pin, active hop,
//! `maxOpenShiftVersion`, `observedGeneration`), so a row fails on any field that drifts. The
//! previous statuses of later rows are computed by earlier steps, as a reconcile loop would.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::platform_operator::{
    BundleRef, InstalledBundle, PinReason, PlatformOperatorStatus, UpgradeGate,
};
use pom_policy::decide::{Held, MoveTarget, PinState};
use pom_policy::snapshot::{GateReading, OperatorGate};
use pom_policy::status::{
    self, ActOutcome, InstallReport, OperatorConditionReport, StatusInput, UnavailableDeployment,
    Wait,
};
use pom_policy::{Action, HoldReason, PoDecision, Problem, Upgradeability};
use pom_resolver::fbc::MaxOpenShiftVersion;
use semver::Version;

use ConditionStatus::{False, True, Unknown};

const GENERATION: i64 = 4;

/// 2024-06-01T12:00:00Z plus `seconds`.
fn at(seconds: i64) -> Timestamp {
    Timestamp::from_second(1_717_243_200 + seconds).unwrap()
}

fn name(version: &str) -> String {
    format!("demo.v{version}")
}

fn bundle(version: &str) -> InstalledBundle {
    InstalledBundle {
        name: name(version),
        version: version.to_owned(),
        image: Some(format!("quay.example/demo-bundle:v{version}")),
        objects_digest: None,
    }
}

fn pin(reason: PinReason, range: &str) -> PinState {
    PinState {
        range: range.to_owned(),
        reason,
    }
}

fn yes() -> Upgradeability {
    Upgradeability::yes("bundle supports OpenShift up to 4.17 (next minor update: 4.17)")
}

// Decisions, as `decide` would return them.

fn decision(action: Action, pin: Option<PinState>, verdict: Upgradeability) -> PoDecision {
    PoDecision {
        action,
        pin,
        held: None,
        verdict,
        problem: None,
        deadline_exceeded: false,
        deprecations: vec![],
        unsettled_move_action: None,
        judged_for: Some(Version::new(4, 17, 0)),
        paused: None,
        config: None,
        config_change: None,
        po: "demo".to_owned(),
        soak: Duration::ZERO,
        withdraw_from: None,
        runs_unjudged: false,
    }
}

fn keep(pin: PinState) -> PoDecision {
    decision(Action::Keep, Some(pin), yes())
}

fn move_to(version: &str, max: Option<&str>, pin_now: PinState, pin_after: PinState) -> PoDecision {
    decision(
        Action::Move(MoveTarget {
            name: name(version),
            version: Version::parse(version).unwrap(),
            image: Some(format!("quay.example/demo-bundle:v{version}")),
            catalog: "redhat".to_owned(),
            max_openshift_version: max.map(MaxOpenShiftVersion::parse),
            pin_after,
        }),
        Some(pin_now),
        Upgradeability::yes("nothing installed"),
    )
}

fn held(mut d: PoDecision, version: &str, why: HoldReason) -> PoDecision {
    d.held = Some(Held {
        to: BundleRef {
            name: name(version),
            version: version.to_owned(),
        },
        why,
    });
    d
}

fn with_verdict(mut d: PoDecision, verdict: Upgradeability) -> PoDecision {
    d.verdict = verdict;
    d
}

fn with_problem(mut d: PoDecision, reason: Reason, degrades: bool) -> PoDecision {
    d.problem = Some(Problem {
        reason,
        message: format!("{reason} happened"),
        degrades,
    });
    d
}

/// `spec.upgradeApproval: Manual` and the move to `version` not approved.
fn awaiting_approval(d: PoDecision, version: &str) -> PoDecision {
    let po = "demo".to_owned();
    held(
        d,
        version,
        HoldReason::AwaitingApproval {
            po,
            bundle: name(version),
            approved: None,
        },
    )
}

/// `spec.paused`, as `decide` states it: nothing written, and what runs (when something does)
/// not vouched for.
fn paused(mut d: PoDecision, installed: bool) -> PoDecision {
    if matches!(d.action, Action::Keep | Action::Move(_)) {
        d.action = Action::Nothing;
    }
    d.paused = Some(
        "paused (spec.paused): POM writes nothing for this PlatformOperator but its status; resume it with `kubectl patch platformoperator demo --type merge -p '{\"spec\":{\"paused\":false}}'`".to_owned(),
    );
    if installed {
        d.verdict = Upgradeability::no(
            Reason::Paused,
            "paused (spec.paused): POM neither moves nor repairs demo.v1.1.0 nor checks that it still works, so it cannot vouch for the next minor",
        );
    }
    d
}

fn deadline_exceeded(mut d: PoDecision) -> PoDecision {
    d.deadline_exceeded = true;
    d
}

// What the install step reports.

fn rollout() -> Wait {
    Wait::Rollout {
        namespace: "demo".to_owned(),
        name: "demo-operator".to_owned(),
    }
}

fn report(version: &str, max: Option<&str>, waits: Vec<Wait>) -> InstallReport {
    InstallReport {
        bundle: bundle(version),
        max_openshift_version: max.map(MaxOpenShiftVersion::parse),
        waits,
        operator_condition: None,
        wrote: 3,
        objects: Vec::new(),
        powers: Vec::new(),
        unavailable: Vec::new(),
    }
}

fn with_oc(mut r: InstallReport, reported: bool, reading: GateReading) -> InstallReport {
    r.operator_condition = Some(OperatorConditionReport {
        namespace: "demo".to_owned(),
        name: r.bundle.name.clone(),
        gate: Some(OperatorGate {
            reported,
            reading,
            object: None,
        }),
    });
    r
}

fn applied(r: InstallReport) -> ActOutcome {
    ActOutcome::Applied(Box::new(r))
}

fn pending_reading() -> GateReading {
    GateReading::Pending {
        message: "no Upgradeable condition for the current generation".to_owned(),
    }
}

fn says(upgradeable: bool) -> GateReading {
    GateReading::Says {
        upgradeable,
        message: "migrating the database to schema 12".to_owned(),
        overridden: false,
    }
}

/// One reconcile's report step.
#[derive(Debug, Clone)]
struct Step {
    previous: PlatformOperatorStatus,
    now: Timestamp,
    decision: PoDecision,
    outcome: ActOutcome,
    gate: UpgradeGate,
    reported_before: bool,
    /// The first-report window (zero in the table: every row judges a rollout alone).
    window: std::time::Duration,
    /// How long ago this manager first read `rolledOutAt`; `None`: since it was recorded.
    seen: Option<std::time::Duration>,
    /// How long ago this manager first read `settledAt`; `None`: since it was recorded.
    settled_seen: Option<std::time::Duration>,
}

fn step(
    previous: &PlatformOperatorStatus,
    now: i64,
    decision: PoDecision,
    outcome: ActOutcome,
) -> Step {
    Step {
        previous: previous.clone(),
        now: at(now),
        decision,
        outcome,
        gate: UpgradeGate::Auto,
        reported_before: false,
        window: std::time::Duration::ZERO,
        seen: None,
        settled_seen: None,
    }
}

impl Step {
    fn gate(mut self, gate: UpgradeGate, reported_before: bool) -> Self {
        self.gate = gate;
        self.reported_before = reported_before;
        self
    }

    fn window(mut self, seconds: u64) -> Self {
        self.window = std::time::Duration::from_secs(seconds);
        self
    }

    /// This manager first read the previous status's `rolledOutAt` `seconds` ago (by default
    /// it watched it since it was recorded: one replica, one clock).
    fn seen_for(mut self, seconds: u64) -> Self {
        self.seen = Some(std::time::Duration::from_secs(seconds));
        self
    }

    /// This manager first read the previous status's `settledAt` `seconds` ago (by default
    /// it watched it since it was recorded).
    fn settled_seen_for(mut self, seconds: u64) -> Self {
        self.settled_seen = Some(std::time::Duration::from_secs(seconds));
        self
    }

    fn run(&self) -> PlatformOperatorStatus {
        let watched = self
            .previous
            .active_hop
            .as_ref()
            .and_then(|hop| hop.rolled_out_at.as_ref())
            .map_or(std::time::Duration::ZERO, |at| {
                pom_policy::snapshot::elapsed(self.now, at.0)
            });
        let settled_watched = self
            .previous
            .active_hop
            .as_ref()
            .and_then(|hop| hop.settled_at.as_ref())
            .map_or(std::time::Duration::ZERO, |at| {
                pom_policy::snapshot::elapsed(self.now, at.0)
            });
        status::compute(&StatusInput {
            previous: &self.previous,
            generation: Some(GENERATION),
            now: self.now,
            decision: &self.decision,
            outcome: &self.outcome,
            upgrade_gate: self.gate,
            reported_before: self.reported_before,
            applying: &[],
            applying_image: None,
            applying_namespace: None,
            auto_settle_window: self.window,
            rolled_out_seen_for: self.seen.unwrap_or(watched),
            settled_seen_for: self.settled_seen.unwrap_or(settled_watched),
        })
    }
}

// Previous statuses, each computed by the steps before it.

fn empty() -> PlatformOperatorStatus {
    PlatformOperatorStatus::default()
}

/// Step 1 of a first install: 1.1.0 applied at t=0, waiting for its rollout.
fn installing() -> PlatformOperatorStatus {
    step(
        &empty(),
        0,
        move_to(
            "1.1.0",
            Some("4.17"),
            pin(PinReason::Install, "*"),
            pin(PinReason::Steady, "=1.1.0"),
        ),
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run()
}

/// 1.1.0 installed and settled at t=60.
fn settled_at_1_1_0() -> PlatformOperatorStatus {
    step(
        &installing(),
        60,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run()
}

/// A patch update: the hop 1.1.0 → 1.1.1 applied at t=600, waiting for its rollout.
fn hopping_to_1_1_1() -> PlatformOperatorStatus {
    step(
        &settled_at_1_1_0(),
        600,
        move_to(
            "1.1.1",
            Some("4.17"),
            pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
            pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
        ),
        applied(report("1.1.1", Some("4.17"), vec![rollout()])),
    )
    .run()
}

/// What a row expects: every field of the status.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shape {
    observed_generation: Option<i64>,
    conditions: Vec<(String, ConditionStatus, Reason)>,
    installed: Option<String>,
    desired: Option<String>,
    pin: Option<(PinReason, String)>,
    /// `(from, to, settled)`.
    hop: Option<(Option<String>, String, bool)>,
    max_openshift_version: Option<String>,
}

impl Shape {
    fn of(status: &PlatformOperatorStatus) -> Self {
        Self {
            observed_generation: status.observed_generation,
            conditions: status
                .conditions
                .iter()
                .map(|c| {
                    assert_eq!(
                        c.observed_generation,
                        Some(GENERATION),
                        "{} carries the generation",
                        c.type_
                    );
                    (
                        c.type_.clone(),
                        ConditionStatus::parse_lenient(&c.status),
                        c.reason.parse::<Reason>().unwrap(),
                    )
                })
                .collect(),
            installed: status.installed_bundle.as_ref().map(|b| b.version.clone()),
            desired: status.desired_bundle.as_ref().map(|b| b.version.clone()),
            pin: status.pin.as_ref().map(|p| (p.reason, p.range.clone())),
            hop: status.active_hop.as_ref().map(|h| {
                (
                    h.from
                        .as_ref()
                        .map(|f| f.trim_start_matches("demo.v").to_owned()),
                    h.to.trim_start_matches("demo.v").to_owned(),
                    h.settled,
                )
            }),
            max_openshift_version: status.max_open_shift_version.clone(),
        }
    }
}

/// `(status, reason)` for Installed, Progressing, Degraded, Upgradeable.
type Conditions = [(ConditionStatus, Reason); 4];

struct Want {
    conditions: Conditions,
    installed: Option<&'static str>,
    desired: Option<&'static str>,
    pin: Option<(PinReason, &'static str)>,
    hop: Option<(Option<&'static str>, &'static str, bool)>,
    max: Option<&'static str>,
    /// Texts that must appear in the condition of that type's message.
    says: Vec<(&'static str, &'static str)>,
}

impl Want {
    fn shape(&self) -> Shape {
        let types = [
            types::INSTALLED,
            types::PROGRESSING,
            types::DEGRADED,
            types::UPGRADEABLE,
        ];
        Shape {
            observed_generation: Some(GENERATION),
            conditions: types
                .iter()
                .zip(self.conditions)
                .map(|(t, (s, r))| ((*t).to_owned(), s, r))
                .collect(),
            installed: self.installed.map(str::to_owned),
            desired: self.desired.map(str::to_owned),
            pin: self.pin.map(|(r, p)| (r, p.to_owned())),
            hop: self
                .hop
                .map(|(from, to, settled)| (from.map(str::to_owned), to.to_owned(), settled)),
            max_openshift_version: self.max.map(str::to_owned),
        }
    }
}

struct Row {
    name: &'static str,
    step: Step,
    want: Want,
}

const OK: (ConditionStatus, Reason) = (False, Reason::AsExpected);

fn rows() -> Vec<Row> {
    let installed_ok = (True, Reason::InstallSucceeded);
    let not_settled = (False, Reason::MoveNotSettled);
    let as_expected = (False, Reason::AsExpected);
    let upgradeable = (True, Reason::AsExpected);
    vec![
        Row {
            name: "first install applied, waiting for the rollout",
            step: step(
                &empty(),
                0,
                move_to(
                    "1.1.0",
                    Some("4.17"),
                    pin(PinReason::Install, "*"),
                    pin(PinReason::Steady, "=1.1.0"),
                ),
                applied(report("1.1.0", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [
                    (False, Reason::Installing),
                    (True, Reason::Installing),
                    OK,
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", false)),
                max: Some("4.17"),
                says: vec![
                    (types::INSTALLED, "Deployment demo/demo-operator to roll out"),
                    (types::UPGRADEABLE, "demo.v1.1.0"),
                ],
            },
        },
        Row {
            name: "first install, next reconcile still waiting for the rollout",
            step: step(
                &installing(),
                30,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(report("1.1.0", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [
                    (False, Reason::Installing),
                    (True, Reason::WaitingForRollout),
                    OK,
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", false)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "upgradeGate OperatorCondition: rolled out, OperatorCondition pending",
            step: step(
                &installing(),
                30,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(with_oc(
                    report("1.1.0", Some("4.17"), vec![]),
                    false,
                    pending_reading(),
                )),
            )
            .gate(UpgradeGate::OperatorCondition, false),
            want: Want {
                conditions: [
                    (False, Reason::Installing),
                    (True, Reason::WaitingForOperatorCondition),
                    OK,
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", false)),
                max: Some("4.17"),
                says: vec![(types::PROGRESSING, "OperatorCondition demo/demo.v1.1.0")],
            },
        },
        Row {
            name: "upgradeGate Auto: an operator reporting now must say True to settle",
            step: step(
                &installing(),
                30,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(with_oc(report("1.1.0", Some("4.17"), vec![]), true, says(false))),
            ),
            want: Want {
                conditions: [
                    (False, Reason::Installing),
                    (True, Reason::WaitingForOperatorCondition),
                    OK,
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", false)),
                max: Some("4.17"),
                says: vec![(types::PROGRESSING, "migrating the database")],
            },
        },
        Row {
            name: "upgradeGate Auto: reported before, no OperatorCondition now: not settled",
            step: step(
                &installing(),
                30,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(report("1.1.0", Some("4.17"), vec![])),
            )
            .gate(UpgradeGate::Auto, true),
            want: Want {
                conditions: [
                    (False, Reason::Installing),
                    (True, Reason::WaitingForOperatorCondition),
                    OK,
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", false)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "upgradeGate Rollout: a pending OperatorCondition does not hold the settle",
            step: step(
                &installing(),
                30,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(with_oc(
                    report("1.1.0", Some("4.17"), vec![]),
                    true,
                    pending_reading(),
                )),
            )
            .gate(UpgradeGate::Rollout, true),
            want: Want {
                conditions: [installed_ok, as_expected, OK, upgradeable],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "first install settles: installed, at the desired bundle, the verdict",
            step: step(
                &installing(),
                60,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(with_oc(report("1.1.0", Some("4.17"), vec![]), true, says(true))),
            ),
            want: Want {
                conditions: [installed_ok, as_expected, OK, upgradeable],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![(types::UPGRADEABLE, "supports OpenShift up to 4.17")],
            },
        },
        Row {
            name: "settled and nothing pending: the verdict as decided (False)",
            step: step(
                &settled_at_1_1_0(),
                900,
                with_verdict(
                    keep(pin(PinReason::Steady, "=1.1.0")),
                    Upgradeability::no(Reason::IncompatibleOperatorsInstalled, "max 4.16"),
                ),
                applied(report("1.1.0", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    as_expected,
                    OK,
                    (False, Reason::IncompatibleOperatorsInstalled),
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![(types::UPGRADEABLE, "max 4.16")],
            },
        },
        Row {
            name: "settled and nothing pending: an Unknown verdict stays Unknown",
            step: step(
                &settled_at_1_1_0(),
                900,
                with_verdict(
                    keep(pin(PinReason::Steady, "=1.1.0")),
                    Upgradeability::unknown("catalog unavailable"),
                ),
                applied(report("1.1.0", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    as_expected,
                    OK,
                    (Unknown, Reason::UpgradeabilityUnknown),
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "hop applied: Upgrading, pin restated for the new version",
            step: step(
                &settled_at_1_1_0(),
                600,
                move_to(
                    "1.1.1",
                    None,
                    pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
                    pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
                ),
                applied(report("1.1.1", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [installed_ok, (True, Reason::Upgrading), OK, not_settled],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", false)),
                max: Some("4.17"),
                says: vec![(types::UPGRADEABLE, "demo.v1.1.1")],
            },
        },
        Row {
            name: "hop still rolling out on the next reconcile: WaitingForRollout, Installed stays True",
            step: step(
                &hopping_to_1_1_1(),
                630,
                keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                applied(report("1.1.1", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [installed_ok, (True, Reason::WaitingForRollout), OK, not_settled],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", false)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "hop settles with the next move held (MoveNotSettled): Upgrading, pending",
            step: step(
                &hopping_to_1_1_1(),
                660,
                held(
                    keep(pin(PinReason::MinorUpgrade, ">=1.1.1 <2.0.0-0")),
                    "1.2.0",
                    HoldReason::MoveNotSettled,
                ),
                applied(report("1.1.1", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [installed_ok, (True, Reason::Upgrading), OK, not_settled],
                installed: Some("1.1.1"),
                desired: Some("1.2.0"),
                pin: Some((PinReason::MinorUpgrade, ">=1.1.1 <2.0.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", true)),
                max: Some("4.17"),
                says: vec![
                    (types::PROGRESSING, "demo.v1.2.0"),
                    (types::UPGRADEABLE, "demo.v1.2.0"),
                ],
            },
        },
        Row {
            name: "settled, move held by the operator's Upgradeable=False: its reason and message",
            step: step(
                &settled_at_1_1_0(),
                900,
                with_verdict(
                    held(
                        keep(pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                        "1.1.1",
                        HoldReason::OperatorNotUpgradeable {
                            message: "migrating the database to schema 12".to_owned(),
                            operator_condition: "demo.v1.1.0".to_owned(),
                        },
                    ),
                    Upgradeability::no(
                        Reason::OperatorNotUpgradeable,
                        "the operator reports Upgradeable=False: migrating the database to schema 12",
                    ),
                ),
                applied(with_oc(report("1.1.0", Some("4.17"), vec![]), true, says(false))),
            )
            .gate(UpgradeGate::Auto, true),
            want: Want {
                conditions: [
                    installed_ok,
                    (True, Reason::Upgrading),
                    OK,
                    (False, Reason::OperatorNotUpgradeable),
                ],
                installed: Some("1.1.0"),
                desired: Some("1.1.1"),
                pin: Some((PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![
                    (types::PROGRESSING, "held: the operator reports Upgradeable=False"),
                    (types::UPGRADEABLE, "migrating the database to schema 12"),
                    (types::UPGRADEABLE, "demo.v1.1.1"),
                ],
            },
        },
        Row {
            name: "settled, move held on a pending OperatorCondition: pending move blocks (False), the Unknown verdict's reason kept",
            step: step(
                &settled_at_1_1_0(),
                900,
                with_verdict(
                    held(
                        keep(pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                        "1.1.1",
                        HoldReason::OperatorConditionPending {
                            message: "stale".to_owned(),
                            operator_condition: "demo.v1.1.0".to_owned(),
                        },
                    ),
                    Upgradeability::unknown("no Upgradeable for the current generation"),
                ),
                applied(with_oc(
                    report("1.1.0", Some("4.17"), vec![]),
                    true,
                    pending_reading(),
                )),
            )
            .gate(UpgradeGate::Rollout, true),
            want: Want {
                conditions: [
                    installed_ok,
                    (True, Reason::Upgrading),
                    OK,
                    (False, Reason::UpgradeabilityUnknown),
                ],
                installed: Some("1.1.0"),
                desired: Some("1.1.1"),
                pin: Some((PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![(
                    types::UPGRADEABLE,
                    "no Upgradeable for the current generation; a move to demo.v1.1.1 is pending",
                )],
            },
        },
        Row {
            name: "a new bundle declaring no maxOpenShiftVersion clears the recorded one",
            step: step(
                &settled_at_1_1_0(),
                600,
                move_to(
                    "1.2.0",
                    None,
                    pin(PinReason::MinorUpgrade, ">=1.1.0 <2.0.0-0"),
                    pin(PinReason::MinorUpgrade, ">=1.2.0 <2.0.0-0"),
                ),
                applied(report("1.2.0", None, vec![])),
            ),
            // Nothing to wait for, yet not settled: the reconcile that applied a move never
            // settles it (its verdict was made for what ran before).
            want: Want {
                conditions: [installed_ok, (True, Reason::Upgrading), OK, not_settled],
                installed: Some("1.2.0"),
                desired: None,
                pin: Some((PinReason::MinorUpgrade, ">=1.2.0 <2.0.0-0")),
                hop: Some((Some("1.1.0"), "1.2.0", false)),
                max: None,
                says: vec![],
            },
        },
        Row {
            name: "a new bundle's maxOpenShiftVersion replaces the recorded one",
            step: step(
                &settled_at_1_1_0(),
                600,
                move_to(
                    "1.1.1",
                    Some("4.18"),
                    pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
                    pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
                ),
                applied(report("1.1.1", Some("4.18"), vec![rollout()])),
            ),
            want: Want {
                conditions: [installed_ok, (True, Reason::Upgrading), OK, not_settled],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", false)),
                max: Some("4.18"),
                says: vec![],
            },
        },
        Row {
            name: "a failed hop keeps the installed bundle, degrades with the error, stays owed",
            step: step(
                &settled_at_1_1_0(),
                600,
                move_to(
                    "1.1.1",
                    Some("4.17"),
                    pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
                    pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
                ),
                ActOutcome::Failed(Problem {
                    reason: Reason::UnsafeCRDChange,
                    message: "CRD widgets.example.com would drop stored version v1".to_owned(),
                    degrades: true,
                }),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::UnsafeCRDChange),
                    (True, Reason::UnsafeCRDChange),
                    not_settled,
                ],
                installed: Some("1.1.0"),
                desired: Some("1.1.1"),
                pin: Some((PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![
                    (types::DEGRADED, "would drop stored version v1"),
                    (types::INSTALLED, "demo.v1.1.0 1.1.0 keeps running"),
                    // Not "wait for it": a refused move does not happen by waiting.
                    (types::UPGRADEABLE, "will not happen by waiting"),
                    (types::UPGRADEABLE, "would drop stored version v1"),
                ],
            },
        },
        Row {
            name: "a failed first install: nothing installed, Installed False with the error, still owed",
            step: step(
                &empty(),
                0,
                move_to(
                    "1.1.0",
                    Some("4.17"),
                    pin(PinReason::Install, "*"),
                    pin(PinReason::Steady, "=1.1.0"),
                ),
                ActOutcome::Failed(Problem {
                    reason: Reason::UnpackFailed,
                    message: "registry unreachable".to_owned(),
                    degrades: true,
                }),
            ),
            want: Want {
                conditions: [
                    (False, Reason::UnpackFailed),
                    (False, Reason::UnpackFailed),
                    (True, Reason::UnpackFailed),
                    upgradeable,
                ],
                installed: None,
                desired: Some("1.1.0"),
                pin: Some((PinReason::Install, "*")),
                hop: None,
                max: None,
                says: vec![(types::INSTALLED, "registry unreachable")],
            },
        },
        Row {
            name: "given back to OLM v0: still running, Installed says GivenBack, nothing degraded",
            step: step(
                &settled_at_1_1_0(),
                900,
                keep(pin(PinReason::Steady, "=1.1.0")),
                ActOutcome::Failed(Problem {
                    reason: Reason::GivenBack,
                    message: "given back to OLM v0: delete this PlatformOperator".to_owned(),
                    degrades: false,
                }),
            ),
            want: Want {
                conditions: [
                    (True, Reason::GivenBack),
                    // Nothing moves while given back, and Progressing says why.
                    (False, Reason::GivenBack),
                    as_expected,
                    upgradeable,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![(types::INSTALLED, "given back to OLM v0")],
            },
        },
        Row {
            name: "a failed re-apply of what runs keeps the settled hop and the pin",
            step: step(
                &settled_at_1_1_0(),
                900,
                keep(pin(PinReason::Steady, "=1.1.0")),
                ActOutcome::Failed(Problem {
                    reason: Reason::InstallFailed,
                    message: "Deployment demo/demo-operator: forbidden".to_owned(),
                    degrades: true,
                }),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::InstallFailed),
                    (True, Reason::InstallFailed),
                    upgradeable,
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "catalog unavailable, something runs: a reported problem, not degraded",
            step: step(
                &settled_at_1_1_0(),
                900,
                with_problem(
                    with_verdict(
                        decision(Action::Keep, None, yes()),
                        Upgradeability::unknown("no catalog content"),
                    ),
                    Reason::SourceFailed,
                    false,
                ),
                applied(report("1.1.0", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::SourceFailed),
                    OK,
                    (Unknown, Reason::UpgradeabilityUnknown),
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![(types::INSTALLED, "SourceFailed happened")],
            },
        },
        Row {
            name: "catalog unavailable, nothing installed: Installed False, Degraded True",
            step: step(
                &empty(),
                0,
                with_problem(
                    decision(Action::Nothing, None, Upgradeability::unknown("no catalog")),
                    Reason::SourceFailed,
                    true,
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    (False, Reason::SourceFailed),
                    (False, Reason::SourceFailed),
                    (True, Reason::SourceFailed),
                    (Unknown, Reason::UpgradeabilityUnknown),
                ],
                installed: None,
                desired: None,
                pin: None,
                hop: None,
                max: None,
                says: vec![],
            },
        },
        Row {
            name: "deadline exceeded on an unsettled hop: Degraded ProgressDeadlineExceeded",
            step: step(
                &hopping_to_1_1_1(),
                1300,
                deadline_exceeded(keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"))),
                applied(report("1.1.1", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (True, Reason::WaitingForRollout),
                    (True, Reason::ProgressDeadlineExceeded),
                    not_settled,
                ],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", false)),
                max: Some("4.17"),
                says: vec![
                    (types::DEGRADED, "demo.v1.1.1"),
                    // A hop that never becomes available names the way back.
                    (types::DEGRADED, "unsettled-move=abandon:demo.v1.1.1 --overwrite"),
                ],
            },
        },
        Row {
            name: "deadline flagged but the hop settles in this step: not degraded",
            step: step(
                &hopping_to_1_1_1(),
                1300,
                deadline_exceeded(keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"))),
                applied(report("1.1.1", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [installed_ok, as_expected, OK, upgradeable],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "a settled hop stays settled when a later rollout is drift",
            step: step(
                &settled_at_1_1_0(),
                900,
                keep(pin(PinReason::Steady, "=1.1.0")),
                applied(report("1.1.0", Some("4.17"), vec![rollout()])),
            ),
            want: Want {
                conditions: [installed_ok, as_expected, OK, upgradeable],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "waiting for the catalog after a restart: nothing changes but the generation",
            step: step(
                &settled_at_1_1_0(),
                900,
                decision(
                    Action::WaitForCatalog {
                        catalog: "redhat".to_owned(),
                    },
                    None,
                    yes(),
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [installed_ok, as_expected, OK, upgradeable],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        // Issue 23 item 5: a move held for the admin's approval, and a paused PO.
        Row {
            name: "Manual: the first install waits for approval: not installed, not progressing, not a failure",
            step: step(
                &empty(),
                0,
                awaiting_approval(
                    decision(
                        Action::Nothing,
                        Some(pin(PinReason::Install, "*")),
                        Upgradeability::yes("nothing installed"),
                    ),
                    "1.1.0",
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    (False, Reason::UpgradePendingApproval),
                    (False, Reason::UpgradePendingApproval),
                    OK,
                    upgradeable,
                ],
                installed: None,
                desired: Some("1.1.0"),
                pin: Some((PinReason::Install, "*")),
                hop: None,
                max: None,
                says: vec![
                    (types::INSTALLED, "the install of demo.v1.1.0 waits"),
                    (types::INSTALLED, "pomctl approve demo --bundle demo.v1.1.0"),
                    (types::PROGRESSING, "pomctl approve demo --bundle demo.v1.1.0"),
                ],
            },
        },
        Row {
            name: "Manual: a settled PO whose next hop waits for approval: not progressing, not upgradeable",
            step: step(
                &settled_at_1_1_0(),
                600,
                awaiting_approval(
                    keep(pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                    "1.1.1",
                ),
                applied(report("1.1.0", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::UpgradePendingApproval),
                    OK,
                    (False, Reason::UpgradePendingApproval),
                ],
                installed: Some("1.1.0"),
                desired: Some("1.1.1"),
                pin: Some((PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![
                    (types::PROGRESSING, "the move to demo.v1.1.1 waits"),
                    (
                        types::UPGRADEABLE,
                        r#"kubectl patch platformoperator demo --type merge -p '{"spec":{"approvedBundle":"demo.v1.1.1"}}'"#,
                    ),
                    (types::UPGRADEABLE, "until it is approved and has settled"),
                ],
            },
        },
        Row {
            name: "Manual: an incompatible bundle whose lifting move waits for approval keeps its reason and says to approve",
            step: step(
                &settled_at_1_1_0(),
                600,
                with_verdict(
                    awaiting_approval(
                        keep(pin(PinReason::Override, ">=1.2.0")),
                        "1.2.0",
                    ),
                    Upgradeability::no(
                        Reason::IncompatibleOperatorsInstalled,
                        "demo.v1.1.0 supports OpenShift up to 4.17",
                    ),
                ),
                applied(report("1.1.0", Some("4.17"), vec![])),
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::UpgradePendingApproval),
                    OK,
                    (False, Reason::IncompatibleOperatorsInstalled),
                ],
                installed: Some("1.1.0"),
                desired: Some("1.2.0"),
                pin: Some((PinReason::Override, ">=1.2.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![
                    (types::UPGRADEABLE, "up to 4.17"),
                    (
                        types::UPGRADEABLE,
                        "the move to demo.v1.2.0 waits for the admin's approval",
                    ),
                    (types::UPGRADEABLE, "pomctl approve demo --bundle demo.v1.2.0"),
                ],
            },
        },
        Row {
            name: "paused at its pin: nothing applied, Progressing and Upgradeable say Paused",
            step: step(
                &settled_at_1_1_0(),
                600,
                paused(keep(pin(PinReason::Steady, "=1.1.0")), true),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::Paused),
                    OK,
                    (False, Reason::Paused),
                ],
                installed: Some("1.1.0"),
                desired: None,
                pin: Some((PinReason::Steady, "=1.1.0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![
                    (types::PROGRESSING, r#"-p '{"spec":{"paused":false}}'"#),
                    (types::UPGRADEABLE, "cannot vouch for the next minor"),
                ],
            },
        },
        Row {
            name: "paused with a hop held: the hop is pending, Paused is the reason",
            step: step(
                &settled_at_1_1_0(),
                600,
                paused(
                    held(
                        keep(pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                        "1.1.1",
                        HoldReason::Paused { po: "demo".into() },
                    ),
                    true,
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::Paused),
                    OK,
                    (False, Reason::Paused),
                ],
                installed: Some("1.1.0"),
                desired: Some("1.1.1"),
                pin: Some((PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0")),
                hop: Some((None, "1.1.0", true)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "paused mid-move: the move stays unsettled (nothing is checked), Paused",
            step: step(
                &hopping_to_1_1_1(),
                630,
                paused(keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")), true),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    installed_ok,
                    (False, Reason::Paused),
                    OK,
                    (False, Reason::Paused),
                ],
                installed: Some("1.1.1"),
                desired: None,
                pin: Some((PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0")),
                hop: Some((Some("1.1.0"), "1.1.1", false)),
                max: Some("4.17"),
                says: vec![],
            },
        },
        Row {
            name: "paused before the first install: not installed, Paused, nothing to vouch for",
            step: step(
                &empty(),
                0,
                paused(
                    held(
                        decision(
                            Action::Nothing,
                            Some(pin(PinReason::Install, "*")),
                            Upgradeability::yes("nothing installed"),
                        ),
                        "1.1.0",
                        HoldReason::Paused { po: "demo".into() },
                    ),
                    false,
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    (False, Reason::Paused),
                    (False, Reason::Paused),
                    OK,
                    upgradeable,
                ],
                installed: None,
                desired: Some("1.1.0"),
                pin: Some((PinReason::Install, "*")),
                hop: None,
                max: None,
                says: vec![(types::INSTALLED, "paused (spec.paused)")],
            },
        },
        Row {
            name: "paused before the first install with a real failure: the failure is Installed's reason",
            step: step(
                &empty(),
                0,
                paused(
                    with_problem(
                        decision(Action::Nothing, None, Upgradeability::yes("nothing installed")),
                        Reason::SourceFailed,
                        true,
                    ),
                    false,
                ),
                ActOutcome::Skipped,
            ),
            want: Want {
                conditions: [
                    (False, Reason::SourceFailed),
                    (False, Reason::Paused),
                    (True, Reason::SourceFailed),
                    upgradeable,
                ],
                installed: None,
                desired: None,
                pin: None,
                hop: None,
                max: None,
                says: vec![],
            },
        },
    ]
}

fn message<'a>(status: &'a PlatformOperatorStatus, type_: &str) -> &'a str {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map_or("", |c| c.message.as_str())
}

#[test]
fn status_table() {
    let rows = rows();
    let mut failures = Vec::new();
    for row in &rows {
        let status = row.step.run();
        let got = Shape::of(&status);
        let want = row.want.shape();
        if got != want {
            failures.push(format!(
                "{}\n  expected {want:?}\n  got      {got:?}\n  conditions: {:#?}",
                row.name, status.conditions
            ));
            continue;
        }
        for (type_, text) in &row.want.says {
            let said = message(&status, type_);
            if !said.contains(text) {
                failures.push(format!("{}: {type_} lacks {text:?}: {said}", row.name));
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

/// Regression: while `desiredBundle` differs from what is installed, never Progressing=False
/// "at the desired bundle" (AsExpected), and, once something runs, never Upgradeable other than
/// False, in any row.
#[test]
fn a_pending_move_is_never_reported_as_done() {
    for row in rows() {
        let status = row.step.run();
        let pending = status.desired_bundle.as_ref().is_some_and(|d| {
            status
                .installed_bundle
                .as_ref()
                .is_none_or(|i| i.name != d.name)
        });
        if !pending {
            continue;
        }
        let find = |t: &str| status.conditions.iter().find(|c| c.type_ == t).unwrap();
        let progressing = find(types::PROGRESSING);
        let upgradeable = find(types::UPGRADEABLE);
        assert!(
            progressing.status == "True" || progressing.reason != "AsExpected",
            "{}: Progressing {} {} with a pending move",
            row.name,
            progressing.status,
            progressing.reason
        );
        if status.installed_bundle.is_some() {
            assert!(
                upgradeable.status == "False",
                "{}: Upgradeable {} with a pending move",
                row.name,
                upgradeable.status
            );
        }
    }
}

/// Regression: Upgradeable is never True while the active hop is unsettled.
#[test]
fn an_unsettled_move_is_never_upgradeable() {
    for row in rows() {
        let status = row.step.run();
        if status.active_hop.as_ref().is_some_and(|h| !h.settled) {
            let upgradeable = status
                .conditions
                .iter()
                .find(|c| c.type_ == types::UPGRADEABLE)
                .unwrap();
            assert_eq!(upgradeable.status, "False", "{}", row.name);
            // Paused, nothing settles (nothing is checked): that is the reason to act on.
            assert!(
                ["MoveNotSettled", "Paused"].contains(&upgradeable.reason.as_str()),
                "{}: {}",
                row.name,
                upgradeable.reason
            );
        }
    }
}

fn transition(status: &PlatformOperatorStatus, type_: &str) -> Time {
    status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap()
        .last_transition_time
        .clone()
}

#[test]
fn last_transition_time_moves_only_when_the_status_flips() {
    let first = installing();
    let still = step(
        &first,
        30,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run();
    // Progressing went Installing → WaitingForRollout (True both times), Installed stayed
    // False, Degraded stayed False: every time is the first one.
    for type_ in [
        types::INSTALLED,
        types::PROGRESSING,
        types::DEGRADED,
        types::UPGRADEABLE,
    ] {
        assert_eq!(
            transition(&still, type_),
            transition(&first, type_),
            "{type_}"
        );
        assert_eq!(transition(&first, type_), Time(at(0)), "{type_}");
    }
    let settled = step(
        &still,
        60,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    // Installed, Progressing and Upgradeable flipped at t=60; Degraded did not.
    assert_eq!(transition(&settled, types::INSTALLED), Time(at(60)));
    assert_eq!(transition(&settled, types::PROGRESSING), Time(at(60)));
    assert_eq!(transition(&settled, types::UPGRADEABLE), Time(at(60)));
    assert_eq!(transition(&settled, types::DEGRADED), Time(at(0)));
    // The hop's start is kept while it settles.
    assert_eq!(
        settled.active_hop.as_ref().map(|h| h.started_at.clone()),
        Some(Time(at(0)))
    );
}

#[test]
fn an_unchanged_world_computes_an_equal_status() {
    let settled = settled_at_1_1_0();
    let again = step(
        &settled,
        3600,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert_eq!(again, settled, "an unchanged status must not be rewritten");
}

#[test]
fn sub_second_times_are_truncated() {
    let mut s = step(
        &empty(),
        0,
        move_to(
            "1.1.0",
            None,
            pin(PinReason::Install, "*"),
            pin(PinReason::Steady, "=1.1.0"),
        ),
        applied(report("1.1.0", None, vec![rollout()])),
    );
    s.now = Timestamp::from_millisecond(at(5).as_millisecond() + 750).unwrap();
    let status = s.run();
    assert_eq!(transition(&status, types::INSTALLED), Time(at(5)));
    assert_eq!(status.active_hop.map(|h| h.started_at), Some(Time(at(5))));
}

#[test]
fn observed_generation_is_always_the_current_one() {
    for row in rows() {
        let mut previous = row.step.previous.clone();
        previous.observed_generation = Some(GENERATION - 1);
        let status = Step {
            previous,
            ..row.step.clone()
        }
        .run();
        assert_eq!(status.observed_generation, Some(GENERATION), "{}", row.name);
        assert_eq!(status.conditions.len(), 4, "{}", row.name);
        for c in &status.conditions {
            assert_eq!(
                c.observed_generation,
                Some(GENERATION),
                "{}: {}",
                row.name,
                c.type_
            );
        }
    }
}

#[test]
fn requeue_follows_the_status() {
    let resync = std::time::Duration::from_secs(600);
    let secs = std::time::Duration::from_secs;
    let ok = applied(report("1.1.0", Some("4.17"), vec![]));
    let installing = installing();
    let started = installing.active_hop.as_ref().unwrap().started_at.0;
    let after = |s: i64| started + k8s_openapi::jiff::SignedDuration::from_secs(s);
    assert_eq!(
        status::requeue(&settled_at_1_1_0(), &ok, resync, after(0)),
        resync,
        "settled: the resync period"
    );
    assert_eq!(
        status::requeue(&installing, &ok, resync, after(0)),
        secs(3),
        "unsettled, just started: soon"
    );
    assert_eq!(
        status::requeue(&installing, &ok, resync, after(300)),
        secs(30),
        "unsettled for 5 minutes: a tenth of that"
    );
    assert_eq!(
        status::requeue(&installing, &ok, resync, after(3600)),
        secs(60),
        "unsettled for an hour: at most a minute (watches bring changes sooner)"
    );
    let mut held = settled_at_1_1_0();
    held.desired_bundle = Some(pom_api::platform_operator::BundleRef {
        name: "demo.v1.1.1".into(),
        version: "1.1.1".into(),
    });
    assert_eq!(
        status::requeue(&held, &ok, resync, after(0)),
        secs(60),
        "a held hop: every minute"
    );
    let failed = ActOutcome::Failed(Problem {
        reason: Reason::InstallFailed,
        message: "x".to_owned(),
        degrades: true,
    });
    assert_eq!(
        status::requeue(&settled_at_1_1_0(), &failed, resync, after(0)),
        secs(15),
        "failed: back off"
    );
}

/// The intent of a move records the bundle image by digest with it, and a retry of the same
/// move keeps the digest first recorded (a tag that moved since must not change what the
/// resumed move applies).
#[test]
fn the_intent_records_the_image_digest_once() {
    let moving = move_to(
        "1.1.1",
        None,
        pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
    );
    let intent_with = |previous: &PlatformOperatorStatus, digest: &str| {
        status::intent(&StatusInput {
            previous,
            generation: Some(GENERATION),
            now: at(100),
            decision: &moving,
            outcome: &ActOutcome::Skipped,
            upgrade_gate: UpgradeGate::Auto,
            reported_before: false,
            applying: &[],
            applying_image: Some(digest),
            applying_namespace: None,
            auto_settle_window: std::time::Duration::ZERO,
            rolled_out_seen_for: std::time::Duration::ZERO,
            settled_seen_for: std::time::Duration::ZERO,
        })
    };
    let first = intent_with(&settled_at_1_1_0(), "quay.example/demo-bundle@sha256:aaa").unwrap();
    let hop = first.active_hop.clone().unwrap();
    assert_eq!(
        (hop.to.as_str(), hop.image.as_deref()),
        (
            name("1.1.1").as_str(),
            Some("quay.example/demo-bundle@sha256:aaa")
        )
    );
    // The same move again, the tag now resolving elsewhere: nothing to write, digest kept.
    assert_eq!(
        intent_with(&first, "quay.example/demo-bundle@sha256:bbb"),
        None
    );
    // A move recorded without a digest (an older manager) gets the one known now, alone.
    let mut older = first.clone();
    if let Some(hop) = older.active_hop.as_mut() {
        hop.image = None;
    }
    let completed = intent_with(&older, "quay.example/demo-bundle@sha256:ccc").unwrap();
    assert_eq!(
        completed.active_hop.unwrap().image.as_deref(),
        Some("quay.example/demo-bundle@sha256:ccc")
    );
    assert_eq!(
        completed.conditions, older.conditions,
        "only the digest is added"
    );
}

/// Status shows the installed bundle's powers by class, bounded: a count, and at most
/// `MAX_POWER_EXAMPLES` examples of at most `MAX_POWER_EXAMPLE_BYTES` each.
#[test]
fn powers_in_status_are_counted_by_class_and_bounded() {
    use pom_policy::status::{MAX_POWER_EXAMPLE_BYTES, MAX_POWER_EXAMPLES, power_summaries};
    let long = "x".repeat(400);
    let mut objects = Vec::new();
    for i in 0..10 {
        objects.push(serde_json::json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": format!("escalator-{i}-{long}")},
            "rules": [{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["escalate"]}]
        }));
    }
    let powers = pom_render::powers::compute(&objects);
    let summaries = power_summaries(&powers);
    let admin = summaries
        .iter()
        .find(|s| s.class == "ClusterAdminEquivalent")
        .unwrap();
    assert_eq!(admin.count, 10);
    assert_eq!(admin.examples.len(), MAX_POWER_EXAMPLES);
    assert!(
        admin
            .examples
            .iter()
            .all(|e| e.len() <= MAX_POWER_EXAMPLE_BYTES && e.starts_with("ClusterRole "))
    );
    // Applied, the status carries them; a failure keeps what the status had.
    let settled = settled_at_1_1_0();
    let keep_it = || keep(pin(PinReason::Steady, "=1.1.0"));
    let mut with_powers = report("1.1.0", Some("4.17"), vec![]);
    with_powers.powers = summaries.clone();
    let status = step(&settled, 3600, keep_it(), applied(with_powers)).run();
    assert_eq!(status.powers, summaries);
    let failed = step(
        &status,
        3700,
        keep_it(),
        ActOutcome::Failed(Problem {
            reason: Reason::UnpackFailed,
            message: "registry down".into(),
            degrades: false,
        }),
    )
    .run();
    assert_eq!(
        failed.powers, summaries,
        "a failed repair keeps what status showed"
    );
}

/// Issue 25 item 8: a settled operator whose Deployment stops being available (crash loop,
/// OOM) is Degraded and not Upgradeable, naming the Deployment and why; it recovers when the
/// Deployment does; during a move the same report is a rollout, not a fault.
#[test]
fn a_settled_operator_that_stops_working_is_degraded_and_not_upgradeable() {
    let crashing = |mut r: InstallReport| {
        r.unavailable = vec![UnavailableDeployment {
            namespace: "op".into(),
            name: "operator".into(),
            why: "Deployment does not have minimum availability.".into(),
        }];
        r.waits = vec![rollout()];
        r
    };
    let broken = step(
        &settled_at_1_1_0(),
        900,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(crashing(report("1.1.0", Some("4.17"), vec![]))),
    )
    .run();
    let condition = |status: &PlatformOperatorStatus, type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| (c.status.clone(), c.reason.clone()))
            .unwrap()
    };
    assert_eq!(
        condition(&broken, types::DEGRADED),
        ("True".into(), "OperatorUnavailable".into())
    );
    assert_eq!(
        condition(&broken, types::UPGRADEABLE),
        ("False".into(), "OperatorUnavailable".into())
    );
    assert!(
        message(&broken, types::DEGRADED).contains("Deployment op/operator is not available"),
        "{}",
        message(&broken, types::DEGRADED)
    );
    // Still installed, still settled: nothing moves for it.
    assert_eq!(condition(&broken, types::INSTALLED).0, "True");
    assert!(broken.active_hop.as_ref().unwrap().settled);
    // It recovers with the Deployment.
    let recovered = step(
        &broken,
        960,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert_eq!(
        condition(&recovered, types::DEGRADED),
        ("False".into(), "AsExpected".into())
    );
    assert_eq!(condition(&recovered, types::UPGRADEABLE).0, "True");
    // A move's own rollout is not a fault.
    let first = step(
        &empty(),
        0,
        move_to(
            "1.1.0",
            Some("4.17"),
            pin(PinReason::Install, "*"),
            pin(PinReason::Steady, "=1.1.0"),
        ),
        applied(crashing(report("1.1.0", Some("4.17"), vec![]))),
    )
    .run();
    assert_eq!(condition(&first, types::DEGRADED).0, "False");
    assert_eq!(
        condition(&first, types::UPGRADEABLE),
        ("False".into(), "MoveNotSettled".into())
    );
}

/// Issue 25 item 3: a recorded move whose apply keeps failing (a policy engine or a quota
/// refusing its objects) counts its failures, says how many and why in Degraded, retries with a
/// back-off, and forgets them once it applies.
#[test]
fn failed_applies_of_a_recorded_move_are_counted_and_backed_off() {
    let moving = move_to(
        "1.1.1",
        None,
        pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
    );
    let recorded = status::intent(&StatusInput {
        previous: &settled_at_1_1_0(),
        generation: Some(GENERATION),
        now: at(100),
        decision: &moving,
        outcome: &ActOutcome::Skipped,
        upgrade_gate: UpgradeGate::Auto,
        reported_before: false,
        applying: &[],
        applying_image: None,
        applying_namespace: None,
        auto_settle_window: std::time::Duration::ZERO,
        rolled_out_seen_for: std::time::Duration::ZERO,
        settled_seen_for: std::time::Duration::ZERO,
    })
    .unwrap();
    let refused = || {
        ActOutcome::Failed(Problem {
            reason: Reason::InstallFailed,
            message: "admission webhook \"gatekeeper\" denied the request".to_owned(),
            degrades: true,
        })
    };
    let once = step(&recorded, 110, moving.clone(), refused()).run();
    let twice = step(&once, 140, moving.clone(), refused()).run();
    let thrice = step(&twice, 200, moving.clone(), refused()).run();
    let attempts = |s: &PlatformOperatorStatus| s.active_hop.as_ref().unwrap().failed_attempts;
    assert_eq!(
        (attempts(&once), attempts(&twice), attempts(&thrice)),
        (1, 2, 3)
    );
    assert!(
        message(&thrice, types::DEGRADED).contains("gatekeeper")
            && message(&thrice, types::DEGRADED).contains("3 failed attempts to apply"),
        "{}",
        message(&thrice, types::DEGRADED)
    );
    let resync = std::time::Duration::from_secs(3600);
    let requeue = |s: &PlatformOperatorStatus| status::requeue(s, &refused(), resync, at(200));
    assert_eq!(
        (requeue(&once), requeue(&twice), requeue(&thrice)),
        (
            std::time::Duration::from_secs(15),
            std::time::Duration::from_secs(30),
            std::time::Duration::from_secs(60)
        )
    );
    assert_eq!(
        status::failure_backoff(40),
        std::time::Duration::from_secs(600)
    );
    // It applies at last: the count is gone.
    let applied_now = step(
        &thrice,
        300,
        moving,
        applied(report("1.1.1", Some("4.17"), vec![rollout()])),
    )
    .run();
    assert_eq!(attempts(&applied_now), 0);
}

/// Review M5: the failures of a refused move stay on its hop after the admin abandons it (its
/// apply is no longer retried); a later re-apply of what runs that fails (the registry down)
/// is not that move's refusal: it is neither counted on the hop nor reported as "N failed
/// attempts to apply" the abandoned bundle, nor as the cluster refusing it (the same rule
/// counts and reports a failed re-apply: `unapplied_hop`).
#[test]
fn a_failed_reapply_after_an_abandon_is_not_the_abandoned_moves_refusal() {
    let moving = move_to(
        "1.1.1",
        None,
        pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
    );
    let recorded = status::intent(&StatusInput {
        previous: &settled_at_1_1_0(),
        generation: Some(GENERATION),
        now: at(100),
        decision: &moving,
        outcome: &ActOutcome::Skipped,
        upgrade_gate: UpgradeGate::Auto,
        reported_before: false,
        applying: &[],
        applying_image: None,
        applying_namespace: None,
        auto_settle_window: std::time::Duration::ZERO,
        rolled_out_seen_for: std::time::Duration::ZERO,
        settled_seen_for: std::time::Duration::ZERO,
    })
    .unwrap();
    let failed = |message: &str| {
        ActOutcome::Failed(Problem {
            reason: Reason::InstallFailed,
            message: message.to_owned(),
            degrades: true,
        })
    };
    let denied = "admission webhook \"gatekeeper\" denied the request";
    let once = step(&recorded, 110, moving.clone(), failed(denied)).run();
    let twice = step(&once, 140, moving, failed(denied)).run();
    // Abandoned: what runs (1.1.0) is kept; its re-apply fails for another reason.
    let reapply = step(
        &twice,
        200,
        keep(pin(PinReason::Steady, "=1.1.0")),
        failed("registry unreachable"),
    )
    .run();
    let degraded = message(&reapply, types::DEGRADED);
    assert!(
        degraded.contains("registry unreachable") && !degraded.contains("failed attempts"),
        "{degraded}"
    );
    let upgradeable = message(&reapply, types::UPGRADEABLE);
    assert!(
        !upgradeable.contains("demo.v1.1.1") && upgradeable.contains("demo.v1.1.0 (what runs)"),
        "{upgradeable}"
    );
    assert_eq!(reapply.active_hop.as_ref().unwrap().failed_attempts, 2);
}

/// Issue 25 item 9 (seed 001): under `upgradeGate: Auto`, an operator that has never reported
/// gets a window after its rollout to start reporting. A version that starts reporting in it is
/// heard (its `Upgradeable=False` holds the move unsettled); one that never reports settles when
/// the window ends; `Rollout`, `OperatorCondition` and an operator that reported before are
/// judged as without a window.
#[test]
fn auto_gives_an_operator_that_never_reported_a_window_to_start() {
    const WINDOW: u64 = 120;
    let steady = || keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"));
    let rolled_out = |previous: &PlatformOperatorStatus, t: i64, r: InstallReport| {
        step(previous, t, steady(), applied(r)).window(WINDOW)
    };
    let hop = |status: &PlatformOperatorStatus| status.active_hop.clone().unwrap();

    // Rolled out at t=630: not settled, the window recorded and named.
    let in_window = rolled_out(
        &hopping_to_1_1_1(),
        630,
        report("1.1.1", Some("4.17"), vec![]),
    )
    .run();
    assert!(!hop(&in_window).settled);
    assert_eq!(hop(&in_window).rolled_out_at, Some(Time(at(630))));
    let waiting = hop(&in_window).waiting_for.unwrap();
    assert!(
        waiting.contains("report Upgradeable") && waiting.contains(&at(750).to_string()),
        "{waiting}"
    );
    assert_eq!(
        Shape::of(&in_window).conditions[3],
        (types::UPGRADEABLE.to_owned(), False, Reason::MoveNotSettled)
    );
    // Still in it at t=749; the rollout time is kept.
    let later = rolled_out(&in_window, 749, report("1.1.1", Some("4.17"), vec![])).run();
    assert!(!hop(&later).settled);
    assert_eq!(hop(&later).rolled_out_at, Some(Time(at(630))));
    // Issue 34 item 7: `rolledOutAt` written by a replica whose clock was 5 min behind this
    // one's (t=630 by its clock, t=930 by this one's), this manager taking over at t=935: the
    // status says 305 s passed, this manager watched 5; still in the window until the status
    // is past it by the skew allowance (10 min) or this manager watched it pass.
    let taken_over = rolled_out(&in_window, 935, report("1.1.1", Some("4.17"), vec![]))
        .seen_for(5)
        .run();
    assert!(!hop(&taken_over).settled, "{:?}", hop(&taken_over));
    let watched_out = rolled_out(&in_window, 1_000, report("1.1.1", Some("4.17"), vec![]))
        .seen_for(120)
        .run();
    assert!(hop(&watched_out).settled, "{:?}", hop(&watched_out));
    // A `rolledOutAt` in the future (a replica ahead) is no time passed until watched.
    let future = rolled_out(&in_window, 500, report("1.1.1", Some("4.17"), vec![]))
        .seen_for(0)
        .run();
    assert!(!hop(&future).settled);
    // Nothing reported by t=750: settled, Upgradeable True.
    let settled = rolled_out(&later, 750, report("1.1.1", Some("4.17"), vec![])).run();
    assert!(hop(&settled).settled, "{:?}", hop(&settled));
    assert_eq!(Shape::of(&settled).conditions[3].1, True);

    // The version starts reporting in the window (the seed's 7.10.0): it says False, then
    // nothing for its new generation, so the move stays unsettled past the window's end.
    let migrating = |reading| with_oc(report("1.1.1", Some("4.17"), vec![]), true, reading);
    let heard = rolled_out(&in_window, 700, migrating(says(false))).run();
    assert!(!hop(&heard).settled);
    assert!(
        hop(&heard)
            .waiting_for
            .unwrap()
            .contains("migrating the database")
    );
    let past_window = rolled_out(&heard, 2_000, migrating(pending_reading())).run();
    assert!(
        !hop(&past_window).settled,
        "a report heard in the window is honoured after it"
    );
    let done = rolled_out(&past_window, 2_010, migrating(says(true))).run();
    assert!(hop(&done).settled);

    // No window for the other gates, nor for an operator that reported before.
    for (gate, reported_before) in [
        (UpgradeGate::Rollout, false),
        (UpgradeGate::Rollout, true),
        (UpgradeGate::Auto, true),
    ] {
        let status = rolled_out(
            &hopping_to_1_1_1(),
            630,
            report("1.1.1", Some("4.17"), vec![]),
        )
        .gate(gate, reported_before);
        let status = if reported_before {
            Step {
                outcome: applied(migrating(says(true))),
                ..status
            }
        } else {
            status
        }
        .run();
        assert!(
            hop(&status).settled,
            "{gate:?} reported_before={reported_before}"
        );
    }
    // The reconcile that applies a move does not start its window, even with nothing to wait
    // for: it was judged for what ran before.
    let applying = step(
        &settled_at_1_1_0(),
        600,
        move_to(
            "1.1.1",
            Some("4.17"),
            pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
            pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
        ),
        applied(report("1.1.1", Some("4.17"), vec![])),
    )
    .window(WINDOW)
    .run();
    assert_eq!(hop(&applying).rolled_out_at, None);
}

/// Issue 25 item 10: the pin records the cluster version it (and the verdict) was judged for,
/// so the aggregate does not trust it for another version.
#[test]
fn the_pin_records_the_cluster_version_it_was_judged_for() {
    let pin_of = |status: &PlatformOperatorStatus| status.pin.clone().unwrap();
    assert_eq!(
        pin_of(&settled_at_1_1_0()).cluster_version.as_deref(),
        Some("4.17.0")
    );
    let mut unjudged = keep(pin(PinReason::Steady, "=1.1.0"));
    unjudged.judged_for = None;
    let status = step(
        &settled_at_1_1_0(),
        900,
        unjudged,
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert_eq!(pin_of(&status).cluster_version, None);
}

// Issue 23 items 3, 4: a configuration change is a move of its own kind.

/// A configuration setting `LOG_LEVEL` to `level`.
fn log_level(level: &str) -> pom_api::platform_operator::AppliedConfig {
    let config: pom_api::platform_operator::OperatorConfig =
        serde_json::from_value(serde_json::json!({"env": [{"name": "LOG_LEVEL", "value": level}]}))
            .unwrap();
    pom_api::platform_operator::AppliedConfig::of(Some(&config), None)
}

/// `d` changing the configuration to `to`: starting (`held: None`) or held.
fn changing_config(
    mut d: PoDecision,
    to: &pom_api::platform_operator::AppliedConfig,
    renders: pom_api::platform_operator::AppliedConfig,
    held: Option<HoldReason>,
) -> PoDecision {
    d.config = Some(renders);
    d.config_change = Some(pom_policy::decide::ConfigChange {
        po: "demo".to_owned(),
        digest: to.digest.clone(),
        held,
    });
    d
}

fn intent_of(
    previous: &PlatformOperatorStatus,
    decision: &PoDecision,
    now: i64,
) -> Option<PlatformOperatorStatus> {
    status::intent(&StatusInput {
        previous,
        generation: Some(GENERATION),
        now: at(now),
        decision,
        outcome: &ActOutcome::Skipped,
        upgrade_gate: UpgradeGate::Auto,
        reported_before: false,
        applying: &[],
        applying_image: None,
        applying_namespace: None,
        auto_settle_window: std::time::Duration::ZERO,
        rolled_out_seen_for: std::time::Duration::ZERO,
        settled_seen_for: std::time::Duration::ZERO,
    })
}

fn condition_of(status: &PlatformOperatorStatus, type_: &str) -> (ConditionStatus, String) {
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_}"));
    let status = match c.status.as_str() {
        "True" => True,
        "False" => False,
        _ => Unknown,
    };
    (status, c.reason.clone())
}

/// The change records its intent before its first write (the configuration it applies, and a
/// move of the running bundle to itself carrying its digest), settles as a move does (the
/// Deployments roll out), and the intent is written once.
#[test]
fn a_configuration_change_records_its_intent_and_settles_as_a_move() {
    let debug = log_level("debug");
    let steady = || keep(pin(PinReason::Steady, "=1.1.0"));
    let starting = changing_config(steady(), &debug, debug.clone(), None);
    let before = settled_at_1_1_0();
    assert_eq!(before.applied_config, None);

    let intent = intent_of(&before, &starting, 600).expect("an intent");
    // What runs is unchanged until the change applies (issue 34 item 1): the hop carries
    // the digest it applies.
    assert_eq!(intent.applied_config, before.applied_config);
    let hop = intent.active_hop.clone().unwrap();
    assert_eq!(
        (
            hop.from.as_deref(),
            hop.to.as_str(),
            hop.settled,
            hop.config.as_deref()
        ),
        (
            Some(name("1.1.0").as_str()),
            name("1.1.0").as_str(),
            false,
            Some(debug.digest.as_str())
        )
    );
    assert_eq!(hop.started_at, Time(at(600)));
    assert_eq!(
        condition_of(&intent, types::PROGRESSING),
        (True, Reason::Reconfiguring.as_str().to_owned())
    );
    assert_eq!(
        condition_of(&intent, types::UPGRADEABLE),
        (False, Reason::MoveNotSettled.as_str().to_owned())
    );
    assert_eq!(intent.installed_bundle, before.installed_bundle);
    // Recorded: a retry (or a new leader after a crash) writes no second intent.
    assert_eq!(intent_of(&intent, &starting, 610), None);

    // A new leader resumes the change the hop records (not judged again) and the move waits
    // for the rollout.
    let resumed = PoDecision {
        config: Some(debug.clone()),
        ..steady()
    };
    let rolling = step(
        &intent,
        620,
        resumed.clone(),
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run();
    assert_eq!(rolling.applied_config.as_ref(), Some(&debug));
    let hop = rolling.active_hop.clone().unwrap();
    assert!(!hop.settled);
    assert_eq!(hop.config.as_deref(), Some(debug.digest.as_str()));
    assert_eq!(
        condition_of(&rolling, types::PROGRESSING),
        (True, Reason::WaitingForRollout.as_str().to_owned())
    );
    assert_eq!(
        condition_of(&rolling, types::UPGRADEABLE),
        (False, Reason::MoveNotSettled.as_str().to_owned())
    );
    let settled = step(
        &rolling,
        680,
        resumed,
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert!(settled.active_hop.as_ref().unwrap().settled);
    assert_eq!(settled.applied_config.as_ref(), Some(&debug));
    assert_eq!(
        condition_of(&settled, types::PROGRESSING),
        (False, Reason::AsExpected.as_str().to_owned())
    );
    assert_eq!(
        condition_of(&settled, types::UPGRADEABLE),
        (True, Reason::AsExpected.as_str().to_owned())
    );
}

/// A held change writes no intent, keeps what runs configured as it is, and says why and how
/// to apply it anyway.
#[test]
fn a_held_configuration_change_changes_nothing_and_says_why() {
    let (debug, info) = (log_level("debug"), log_level("info"));
    let mut before = settled_at_1_1_0();
    before.applied_config = Some(debug.clone());
    let held = changing_config(
        with_verdict(
            keep(pin(PinReason::Steady, "=1.1.0")),
            Upgradeability::no(
                Reason::OperatorNotUpgradeable,
                "the operator reports Upgradeable=False: migrating the database to schema 12",
            ),
        ),
        &info,
        debug.clone(),
        Some(HoldReason::OperatorNotUpgradeable {
            message: "migrating the database to schema 12".to_owned(),
            operator_condition: "demo.v1.1.0".to_owned(),
        }),
    );
    assert_eq!(intent_of(&before, &held, 600), None);
    let after = step(
        &before,
        600,
        held,
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert_eq!(after.applied_config.as_ref(), Some(&debug));
    assert_eq!(after.active_hop, before.active_hop);
    assert_eq!(
        condition_of(&after, types::PROGRESSING),
        (False, Reason::ConfigChangeHeld.as_str().to_owned())
    );
    let said = message(&after, types::PROGRESSING);
    for text in [
        info.digest.as_str(),
        "migrating the database to schema 12",
        "kubectl annotate platformoperator demo platform.openshift.io/config-change-override=",
    ] {
        assert!(said.contains(text), "{text:?} in {said}");
    }
    assert_eq!(
        condition_of(&after, types::UPGRADEABLE),
        (False, Reason::OperatorNotUpgradeable.as_str().to_owned())
    );
}

/// A move (install or hop) applies the configuration asked for and records it; no
/// configuration is recorded as none.
#[test]
fn a_move_records_the_configuration_it_applied() {
    let debug = log_level("debug");
    let mut hop = move_to(
        "1.1.1",
        Some("4.17"),
        pin(PinReason::PatchUpgrade, ">=1.1.0 <1.2.0-0"),
        pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"),
    );
    hop.config = Some(debug.clone());
    let applied_hop = step(
        &settled_at_1_1_0(),
        600,
        hop.clone(),
        applied(report("1.1.1", Some("4.17"), vec![rollout()])),
    )
    .run();
    assert_eq!(applied_hop.applied_config.as_ref(), Some(&debug));
    // Its intent records none: a move abandoned before it applied keeps what ran configured
    // as it was.
    assert_eq!(
        intent_of(&settled_at_1_1_0(), &hop, 600).and_then(|s| s.applied_config),
        None
    );
    let mut before = settled_at_1_1_0();
    before.applied_config = Some(debug);
    hop.config = Some(pom_api::platform_operator::AppliedConfig::none());
    let unconfigured = step(
        &before,
        600,
        hop.clone(),
        applied(report("1.1.1", Some("4.17"), vec![rollout()])),
    )
    .run();
    assert_eq!(unconfigured.applied_config, None);
    // A failed apply changes nothing recorded.
    let failed = step(
        &before,
        600,
        hop,
        ActOutcome::Failed(Problem {
            reason: Reason::InstallFailed,
            message: "refused".to_owned(),
            degrades: true,
        }),
    )
    .run();
    assert_eq!(failed.applied_config, before.applied_config);
}

/// Issue 34 item 7: a move past its deadline whose last apply was refused has no typed wait;
/// its messages still say what it waits for instead of ending in "waiting for ".
#[test]
fn a_deadline_with_no_typed_wait_says_what_the_move_waits_for() {
    let refused = ActOutcome::Failed(Problem {
        reason: Reason::InstallFailed,
        message: "admission webhook denied the Deployment".to_owned(),
        degrades: true,
    });
    for outcome in [refused, ActOutcome::Skipped] {
        let status = step(
            &hopping_to_1_1_1(),
            1300,
            deadline_exceeded(keep(pin(PinReason::PatchUpgrade, ">=1.1.1 <1.2.0-0"))),
            outcome,
        )
        .run();
        for condition in &status.conditions {
            assert!(
                !condition.message.trim_end().ends_with("waiting for")
                    && !condition.message.contains("waiting for )")
                    && !condition.message.contains("waiting for ;"),
                "{}: {:?}",
                condition.type_,
                condition.message
            );
        }
        let waiting = status
            .active_hop
            .as_ref()
            .and_then(|h| h.waiting_for.as_deref());
        assert_ne!(waiting, Some(""), "an empty wait is no wait");
    }
}

/// Issue 35 item 4: a move that settles under `spec.soak` records when, soaks until
/// `settledAt` + soak (Progressing and Upgradeable say so, the update-risk gauge counts it, the
/// reconcile comes back when it ends), and at that instant is over: nothing is left of it.
#[test]
fn a_settled_move_soaks_for_spec_soak_then_nothing_is_left_of_it() {
    let soak = |mut d: PoDecision| {
        d.soak = Duration::from_secs(600);
        d
    };
    let condition = |status: &PlatformOperatorStatus, type_: &str| {
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap()
            .clone();
        (c.status, c.reason, c.message)
    };
    let settle = |previous: &PlatformOperatorStatus, now: i64| {
        step(
            previous,
            now,
            soak(keep(pin(PinReason::Steady, "=1.1.0"))),
            applied(report("1.1.0", Some("4.17"), vec![])),
        )
        .run()
    };

    // Settles at t=60: soaking until t=660.
    let soaking = settle(&installing(), 60);
    let hop = soaking.active_hop.as_ref().unwrap();
    assert!(hop.settled);
    assert_eq!(hop.settled_at.as_ref().map(|t| t.0), Some(at(60)));
    assert_eq!(hop.soak_until.as_ref().map(|t| t.0), Some(at(660)));
    let (status, reason, message) = condition(&soaking, types::PROGRESSING);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        (True.as_str(), "Soaking"),
        "{message}"
    );
    assert!(
        message.contains("soaks until") && message.contains("spec.soak"),
        "{message}"
    );
    let (status, reason, message) = condition(&soaking, types::UPGRADEABLE);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        (False.as_str(), "Soaking"),
        "{message}"
    );
    let po_with = |status: &PlatformOperatorStatus| {
        let mut po: pom_api::PlatformOperator = serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": "demo"}, "spec": {"package": {"name": "demo"}}
        }))
        .unwrap();
        po.status = Some(status.clone());
        po
    };
    let po = po_with(&soaking);
    assert!(pom_policy::precheck::UpdateRisk::Unsettled.applies(&po));
    let resync = Duration::from_secs(3600);
    assert_eq!(
        status::requeue(
            &soaking,
            &applied(report("1.1.0", None, vec![])),
            resync,
            at(60)
        ),
        Duration::from_secs(601),
        "judged again a second after the soak ends"
    );

    // Half-way: the settle time is kept, the soak still counts from it.
    let later = settle(&soaking, 400);
    let hop = later.active_hop.as_ref().unwrap();
    assert_eq!(hop.settled_at.as_ref().map(|t| t.0), Some(at(60)));
    assert_eq!(hop.soak_until.as_ref().map(|t| t.0), Some(at(660)));

    // At t=660 it is over.
    let over = settle(&later, 660);
    let hop = over.active_hop.as_ref().unwrap();
    assert_eq!(hop.soak_until, None);
    assert_eq!(hop.settled_at.as_ref().map(|t| t.0), Some(at(60)));
    let (status, reason, _) = condition(&over, types::PROGRESSING);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        (False.as_str(), "AsExpected")
    );
    let (status, reason, _) = condition(&over, types::UPGRADEABLE);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        (True.as_str(), "AsExpected")
    );
    let po = po_with(&over);
    assert!(!pom_policy::precheck::UpdateRisk::Unsettled.applies(&po));

    // Without a soak nothing of it appears.
    let plain = step(
        &installing(),
        60,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![])),
    )
    .run();
    assert_eq!(plain.active_hop.as_ref().unwrap().soak_until, None);
    assert_eq!(condition(&plain, types::PROGRESSING).1, "AsExpected");
}

/// Review M2: `settledAt` written by a replica whose clock is behind this one's never ends
/// the soak early here; a manager that takes over mid-soak ends it at most the skew
/// allowance late.
#[test]
fn a_soak_settled_under_another_replicas_clock_is_never_over_early() {
    let soak = |mut d: PoDecision| {
        d.soak = Duration::from_secs(600);
        d
    };
    let settle = |previous: &PlatformOperatorStatus, now: i64| {
        step(
            previous,
            now,
            soak(keep(pin(PinReason::Steady, "=1.1.0"))),
            applied(report("1.1.0", Some("4.17"), vec![])),
        )
    };
    let soak_until = |status: &PlatformOperatorStatus| {
        status
            .active_hop
            .as_ref()
            .and_then(|h| h.soak_until.as_ref())
            .map(|t| t.0)
    };
    // Settled at t=60 by the status (a replica 5 min behind: really at t=360).
    let soaking = settle(&installing(), 60).run();
    assert_eq!(soak_until(&soaking), Some(at(660)));
    // At t=720 the status says 11 min soaked; this manager watched 6 min of it.
    let skewed = settle(&soaking, 720).settled_seen_for(360).run();
    assert_eq!(
        soak_until(&skewed),
        Some(at(960)),
        "still soaking: 4 min left by this manager's watch"
    );
    assert_eq!(
        skewed
            .conditions
            .iter()
            .find(|c| c.type_ == types::UPGRADEABLE)
            .map(|c| c.reason.as_str()),
        Some("Soaking")
    );
    // Watched for the whole soak: over.
    let over = settle(&skewed, 960).settled_seen_for(600).run();
    assert_eq!(soak_until(&over), None);
    // Taken over at t=720, nothing watched: the status less the allowance holds it until
    // t=60 + 10 min + 10 min.
    let taken_over = settle(&soaking, 720).settled_seen_for(0).run();
    assert_eq!(soak_until(&taken_over), Some(at(1260)));
    let late = settle(&taken_over, 1260).settled_seen_for(540).run();
    assert_eq!(soak_until(&late), None, "at most the allowance late");
}

/// The admin's exclusion of 1.1.0, an unsettled first install: 1.2.0 installs in its place.
fn replacing_the_first_install() -> PoDecision {
    move_to(
        "1.2.0",
        Some("4.17"),
        pin(PinReason::Install, "*"),
        pin(PinReason::Steady, "=1.2.0"),
    )
}

/// An apply a policy engine refuses.
fn denied() -> ActOutcome {
    ActOutcome::Failed(Problem {
        reason: Reason::InstallFailed,
        message: "admission webhook \"policy\" denied Deployment demo/demo-operator".to_owned(),
        degrades: true,
    })
}

/// A replacement recorded over an unsettled first install and dropped without applying leaves
/// the first install as it was (seeds 8088088 and 20261207 of the state-machine soak): 1.1.0
/// applied at t=0 never rolls out; at t=700 a replacement, 1.2.0, is recorded as intent (with
/// the move it replaces) and its apply is refused; at t=1,400 what runs, 1.1.0, is applied
/// again: its progress deadline still runs from t=0. The intent's record overwrote the first
/// install's, so the re-apply restarted it at t=1,400, and a first install that never became
/// available was Degraded only a deadline after the last replacement anyone tried.
#[test]
fn a_first_install_keeps_its_start_under_replacements() {
    let first = installing();
    let started = |s: &PlatformOperatorStatus| s.active_hop.as_ref().map(|h| h.started_at.0);
    assert_eq!(started(&first), Some(at(0)));
    let replace = replacing_the_first_install();
    let intent = intent_of(&first, &replace, 700).expect("the replacement records its intent");
    assert_eq!(
        intent
            .active_hop
            .as_ref()
            .map(|h| (h.from.clone(), h.to.clone())),
        Some((None, "demo.v1.2.0".to_owned()))
    );
    assert_eq!(
        started(&intent),
        Some(at(700)),
        "the replacement's own start"
    );
    assert_eq!(
        intent
            .active_hop
            .as_ref()
            .and_then(|h| h.replaces.as_ref())
            .map(|r| (r.from.clone(), r.started_at.0)),
        Some((None, at(0))),
        "the move it replaces"
    );
    let refused = step(&intent, 700, replace, denied()).run();
    let again = step(
        &refused,
        1_400,
        keep(pin(PinReason::Steady, "=1.1.0")),
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run();
    assert_eq!(
        again
            .active_hop
            .as_ref()
            .map(|h| (h.from.clone(), h.to.clone(), h.settled)),
        Some((None, "demo.v1.1.0".to_owned(), false))
    );
    assert_eq!(started(&again), Some(at(0)), "what ran, applied again");
    assert_eq!(again.active_hop.and_then(|h| h.replaces), None);
}

/// The loser of a duplicate that still runs its bundle is no longer judged: the pin it
/// recorded stays shown, judged for no cluster version, so the aggregate does not count it at
/// its pin (release soak of session 23, seed 20261207: its stale pin let the release be
/// reported once the older PO was deleted, before it was judged again).
#[test]
fn a_duplicate_that_still_runs_keeps_its_pin_judged_for_no_version() {
    let before = settled_at_1_1_0();
    let judged = |s: &PlatformOperatorStatus| {
        s.pin
            .as_ref()
            .map(|p| (p.range.clone(), p.cluster_version.clone()))
    };
    assert_eq!(
        judged(&before).map(|(_, v)| v.is_some()),
        Some(true),
        "{before:#?}"
    );
    let mut loser = decision(
        Action::Nothing,
        None,
        Upgradeability::unknown("demo.v1.1.0 still runs from this PlatformOperator"),
    );
    loser.runs_unjudged = true;
    let after = step(
        &before,
        120,
        with_problem(loser, Reason::DuplicatePackage, true),
        ActOutcome::Skipped,
    )
    .run();
    assert_eq!(judged(&after), Some(("=1.1.0".to_owned(), None)));
}

/// A configuration change of an unsettled first install is that first install too (second
/// review of session 23, H1): 1.1.0 applied at t=0 never rolls out, its configuration changes
/// at t=700 (the change keeps the install's start), a replacement, 1.2.0, is recorded at t=800
/// and refused, and what runs is applied again at t=1,400: its deadline still runs from t=0.
/// The replacement's intent kept no record of a move that carried a configuration digest.
#[test]
fn a_replacement_over_a_configuration_change_of_a_first_install_keeps_its_start() {
    let debug = log_level("debug");
    let first = installing();
    let steady = || keep(pin(PinReason::Steady, "=1.1.0"));
    let starting = changing_config(steady(), &debug, debug.clone(), None);
    let change = intent_of(&first, &starting, 700).expect("the configuration's intent");
    let reapplied = PoDecision {
        config: Some(debug.clone()),
        ..steady()
    };
    let rolling = step(
        &change,
        700,
        reapplied.clone(),
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run();
    let replace = replacing_the_first_install();
    let intent = intent_of(&rolling, &replace, 800).expect("the replacement's intent");
    assert_eq!(
        intent
            .active_hop
            .as_ref()
            .and_then(|h| h.replaces.as_ref())
            .map(|r| (r.from.clone(), r.started_at.0)),
        Some((None, at(0)))
    );
    let refused = step(&intent, 800, replace, denied()).run();
    let again = step(
        &refused,
        1_400,
        reapplied,
        applied(report("1.1.0", Some("4.17"), vec![rollout()])),
    )
    .run();
    let hop = again.active_hop.expect("a hop");
    assert_eq!((hop.from, hop.started_at.0), (None, at(0)));
}
