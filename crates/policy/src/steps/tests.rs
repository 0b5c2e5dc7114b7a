//! The plan as a table: (decision, recorded status, what the gather found) → the steps one
//! reconcile takes, and the predicates later steps use.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pom_api::platform_operator::{ActiveHop, BundleInventory, InstalledBundle};
use semver::Version;

use super::*;
use crate::decide::{ConfigChange, HoldReason, MoveTarget, PinState, Upgradeability};
use crate::status::InstallReport;

fn decision(action: Action) -> PoDecision {
    PoDecision {
        action,
        pin: None,
        held: None,
        verdict: Upgradeability::yes("nothing installed"),
        problem: None,
        deadline_exceeded: false,
        deprecations: vec![],
        unsettled_move_action: None,
        judged_for: None,
        paused: None,
        config: None,
        config_change: None,
        po: "op".to_owned(),
        soak: std::time::Duration::ZERO,
        withdraw_from: None,
        runs_unjudged: false,
    }
}

/// A PO refused to watch `namespace` (another's install namespace), with `recorded`.
fn withdrawing(namespace: &str) -> PoDecision {
    PoDecision {
        withdraw_from: Some(namespace.to_owned()),
        ..decision(Action::Nothing)
    }
}

/// An inventory whose bundle recorded a RoleBinding in `team` (a watched namespace) and a
/// Deployment in its own.
fn watching_team() -> PlatformOperatorStatus {
    let object = |kind: &str, namespace: &str| pom_api::platform_operator::InventoryObject {
        api_version: "v1".to_owned(),
        kind: kind.to_owned(),
        namespace: Some(namespace.to_owned()),
        name: "op".to_owned(),
    };
    PlatformOperatorStatus {
        installed_bundle: installed("op.v1"),
        inventory: vec![BundleInventory {
            bundle: "op.v1".to_owned(),
            objects: vec![object("RoleBinding", "team"), object("Deployment", "own")],
        }],
        ..PlatformOperatorStatus::default()
    }
}

fn move_to(version: &str) -> PoDecision {
    decision(Action::Move(MoveTarget {
        name: format!("op.v{version}"),
        version: Version::parse(version).unwrap(),
        image: None,
        catalog: "c".to_owned(),
        max_openshift_version: None,
        pin_after: PinState {
            range: format!("={version}"),
            reason: pom_api::platform_operator::PinReason::Steady,
        },
    }))
}

fn reconfiguring(held: Option<HoldReason>) -> PoDecision {
    PoDecision {
        config_change: Some(ConfigChange {
            po: "po".to_owned(),
            digest: "d".to_owned(),
            held,
        }),
        ..decision(Action::Keep)
    }
}

fn inventory(bundles: &[&str]) -> Vec<BundleInventory> {
    bundles
        .iter()
        .map(|b| BundleInventory {
            bundle: (*b).to_owned(),
            objects: vec![],
        })
        .collect()
}

fn installed(name: &str) -> Option<InstalledBundle> {
    Some(InstalledBundle {
        name: name.to_owned(),
        version: "1.0.0".to_owned(),
        image: None,
        objects_digest: None,
    })
}

fn hop(to: &str, settled: bool) -> Option<ActiveHop> {
    Some(ActiveHop {
        from: Some("op.v0".to_owned()),
        to: to.to_owned(),
        started_at: Time(Timestamp::UNIX_EPOCH),
        settled,
        waiting_for: None,
        image: None,
        failed_attempts: 0,
        rolled_out_at: None,
        config: None,
        applied_unsettled: false,
        settled_at: None,
        soak_until: None,
        replaces: None,
    })
}

/// v1 installed, its move settled, v0's objects still recorded: a prune a crash cut short.
fn prune_cut_short() -> PlatformOperatorStatus {
    PlatformOperatorStatus {
        installed_bundle: installed("op.v1"),
        active_hop: hop("op.v1", true),
        inventory: inventory(&["op.v0", "op.v1"]),
        ..PlatformOperatorStatus::default()
    }
}

/// v1 installed and settled, only its own objects recorded.
fn steady() -> PlatformOperatorStatus {
    PlatformOperatorStatus {
        installed_bundle: installed("op.v1"),
        active_hop: hop("op.v1", true),
        inventory: inventory(&["op.v1"]),
        ..PlatformOperatorStatus::default()
    }
}

struct Row {
    name: &'static str,
    decision: PoDecision,
    recorded: PlatformOperatorStatus,
    reusable: bool,
    writes_allowed: bool,
    mark_present: bool,
    adopting: bool,
    handing_over: bool,
    giving_back: bool,
    steps: Vec<Step>,
}

fn row(name: &'static str, decision: PoDecision, recorded: PlatformOperatorStatus) -> Row {
    Row {
        name,
        decision,
        recorded,
        reusable: false,
        writes_allowed: true,
        mark_present: true,
        adopting: false,
        handing_over: false,
        giving_back: false,
        steps: vec![],
    }
}

impl Row {
    fn reusable(mut self) -> Self {
        self.reusable = true;
        self
    }
    fn guard_missing(mut self) -> Self {
        self.writes_allowed = false;
        self
    }
    fn adopting(mut self) -> Self {
        self.adopting = true;
        self
    }
    fn handing_over(mut self) -> Self {
        self.handing_over = true;
        self
    }
    fn giving_back(mut self) -> Self {
        self.giving_back = true;
        self
    }
    fn unmarked(mut self) -> Self {
        self.mark_present = false;
        self
    }
    fn steps(mut self, steps: &[Step]) -> Self {
        self.steps = steps.to_vec();
        self
    }
}

use Step::*;

/// Prepare, intent, apply, then the report of a full check.
const FULL_KEEP: &[Step] = &[
    Prepare,
    RecordIntent,
    Apply,
    Report,
    RememberCleanCheck,
    WriteStatus,
    PruneAfterSettle,
    Requeue(Next::AsStatusSays),
];

const MOVE: &[Step] = &[
    Prepare,
    RecordIntent,
    AnnounceMove,
    Apply,
    Report,
    RememberCleanCheck,
    WriteStatus,
    PruneAfterSettle,
    Requeue(Next::AsStatusSays),
];

#[test]
fn the_plan_of_each_case() {
    let finish = |bundle: &str| {
        vec![
            FinishInterruptedPrune {
                bundle: bundle.to_owned(),
            },
            Requeue(Next::AfterPrune),
        ]
    };
    let rows = [
        row(
            "the catalog is still being read: nothing but a requeue",
            decision(Action::WaitForCatalog {
                catalog: "c".into(),
            }),
            prune_cut_short(),
        )
        .steps(&[Requeue(Next::CatalogWarmup)]),
        row(
            "a move after a prune cut short: the prune first, then a fresh look",
            move_to("2.0.0"),
            prune_cut_short(),
        )
        .steps(&finish("op.v1")),
        row(
            "a keep after a prune cut short: the prune after settle finishes it",
            decision(Action::Keep),
            prune_cut_short(),
        )
        .steps(FULL_KEEP),
        row("a move from a clean state", move_to("2.0.0"), steady()).steps(MOVE),
        row(
            "a move whose previous move has not settled records no prune to finish",
            move_to("2.0.0"),
            PlatformOperatorStatus {
                active_hop: hop("op.v1", false),
                ..prune_cut_short()
            },
        )
        .steps(MOVE),
        row(
            "a keep with no clean check: a full check",
            decision(Action::Keep),
            steady(),
        )
        .steps(FULL_KEEP),
        row(
            "a keep with a clean check: no read, nothing remembered anew",
            decision(Action::Keep),
            steady(),
        )
        .reusable()
        .steps(&[
            ReuseCleanCheck,
            Report,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "a configuration change starting is a full check even with a clean one",
            reconfiguring(None),
            steady(),
        )
        .reusable()
        .steps(FULL_KEEP),
        row(
            "a held configuration change keeps the clean check",
            reconfiguring(Some(HoldReason::OperatorNotUpgradeable {
                message: "migrating".into(),
                operator_condition: "demo.v1.1.0".to_owned(),
            })),
            steady(),
        )
        .reusable()
        .steps(&[
            ReuseCleanCheck,
            Report,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "a clean check never stands for a move",
            move_to("2.0.0"),
            steady(),
        )
        .reusable()
        .steps(MOVE),
        row(
            "nothing to do: prepare finds nothing, the status is still written",
            decision(Action::Nothing),
            PlatformOperatorStatus::default(),
        )
        .steps(FULL_KEEP),
        row(
            "an operator not yet marked as reporting: the mark is planned before the report",
            decision(Action::Keep),
            steady(),
        )
        .unmarked()
        .steps(&[
            Prepare,
            RecordIntent,
            Apply,
            MarkReported,
            Report,
            RememberCleanCheck,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "refused to watch another's namespace: what it recorded there is withdrawn before the report",
            withdrawing("team"),
            watching_team(),
        )
        .steps(&[
            Prepare,
            RecordIntent,
            Apply,
            Withdraw {
                namespace: "team".to_owned(),
            },
            Report,
            RememberCleanCheck,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "refused to watch, nothing recorded there (withdrawn already): no withdrawal",
            withdrawing("elsewhere"),
            watching_team(),
        )
        .steps(FULL_KEEP),
        row(
            "refused to watch, without the admission guard: deleting is writing, not planned",
            withdrawing("team"),
            watching_team(),
        )
        .guard_missing()
        .steps(FULL_KEEP),
        row(
            "adopting (spec.adoptFrom, nothing installed): proven after prepare, released from OLM after the intent, before any other write",
            move_to("1.0.0"),
            PlatformOperatorStatus::default(),
        )
        .adopting()
        .steps(&[
            Prepare,
            ProveAdoption,
            JudgeOlmWebhooks,
            RecordIntent,
            ReleaseFromOlm,
            AnnounceMove,
            Apply,
            RetireOlmWebhooks,
            Report,
            RememberCleanCheck,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "adopted, the hand-over not finished (the first move unsettled): prepared again, OLM's webhook configurations retired once POM's are registered; no clean check reused",
            decision(Action::Keep),
            steady(),
        )
        .handing_over()
        .reusable()
        .steps(&[
            Prepare,
            JudgeOlmWebhooks,
            RecordIntent,
            Apply,
            RetireOlmWebhooks,
            Report,
            RememberCleanCheck,
            WriteStatus,
            PruneAfterSettle,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "adopting, but the decision moves nothing (a paused or refused PO): nothing proven, nothing released (prepare finds nothing to put)",
            decision(Action::Nothing),
            PlatformOperatorStatus::default(),
        )
        .adopting()
        .steps(FULL_KEEP),
        row(
            "giving back (platform.openshift.io/give-back): the give-back alone, nothing applied, prepared, marked nor pruned; the clean check forgotten",
            decision(Action::Keep),
            steady(),
        )
        .giving_back()
        .unmarked()
        .steps(&[
            GiveBack,
            Report,
            RememberCleanCheck,
            WriteStatus,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "giving back while a move is chosen: still nothing applied (an apply would take the objects over again)",
            move_to("2.0.0"),
            steady(),
        )
        .giving_back()
        .reusable()
        .steps(&[
            GiveBack,
            Report,
            RememberCleanCheck,
            WriteStatus,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "giving back needs no catalog",
            decision(Action::WaitForCatalog {
                catalog: "c".into(),
            }),
            steady(),
        )
        .giving_back()
        .steps(&[
            GiveBack,
            Report,
            RememberCleanCheck,
            WriteStatus,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "giving back without the admission guard: not written, only reported",
            decision(Action::Keep),
            steady(),
        )
        .giving_back()
        .guard_missing()
        .steps(&[
            Report,
            RememberCleanCheck,
            WriteStatus,
            Requeue(Next::AsStatusSays),
        ]),
        row(
            "without the admission guard the mark (a write) is not planned",
            decision(Action::Keep),
            steady(),
        )
        .unmarked()
        .guard_missing()
        .steps(FULL_KEEP),
    ];
    for row in rows {
        let steps = plan(&PlanInput {
            decision: &row.decision,
            recorded: &row.recorded,
            clean_check_reusable: row.reusable,
            writes_allowed: row.writes_allowed,
            reported_mark_present: row.mark_present,
            adopting: row.adopting,
            handing_over: row.handing_over,
            giving_back: row.giving_back,
        });
        assert_eq!(steps, row.steps, "{}", row.name);
    }
}

#[test]
fn every_plan_ends_in_one_requeue_and_orders_its_writes() {
    let decisions = [
        decision(Action::Nothing),
        withdrawing("team"),
        decision(Action::Keep),
        move_to("2.0.0"),
        reconfiguring(None),
        decision(Action::WaitForCatalog {
            catalog: "c".into(),
        }),
    ];
    for d in &decisions {
        for recorded in [
            steady(),
            prune_cut_short(),
            PlatformOperatorStatus::default(),
            watching_team(),
        ] {
            for (reusable, writes_allowed, mark_present) in
                flag_combinations([false, true], [false, true], [false, true])
            {
                for (adopting, handing_over, giving_back) in
                    flag_combinations([false, true], [false, true], [false, true])
                {
                    let steps = plan(&PlanInput {
                        decision: d,
                        recorded: &recorded,
                        clean_check_reusable: reusable,
                        writes_allowed,
                        reported_mark_present: mark_present,
                        adopting,
                        handing_over,
                        giving_back,
                    });
                    check_order(&steps);
                    if giving_back {
                        assert!(
                            !steps.iter().any(|s| matches!(
                                s,
                                Prepare
                                    | Apply
                                    | ReleaseFromOlm
                                    | JudgeOlmWebhooks
                                    | RetireOlmWebhooks
                                    | PruneAfterSettle
                                    | Withdraw { .. }
                                    | FinishInterruptedPrune { .. }
                            )),
                            "giving back applies, releases and deletes nothing: {steps:?}"
                        );
                    }
                }
            }
        }
    }
}

/// Every (a, b, c) of the three pairs.
fn flag_combinations(
    a: [bool; 2],
    b: [bool; 2],
    c: [bool; 2],
) -> impl Iterator<Item = (bool, bool, bool)> {
    a.into_iter()
        .flat_map(move |x| b.into_iter().map(move |y| (x, y)))
        .flat_map(move |(x, y)| c.into_iter().map(move |z| (x, y, z)))
}

/// The ordering rules every plan keeps: one requeue, last; a write is preceded by the steps it
/// depends on (present, not only ordered when both happen to be there).
fn check_order(steps: &[Step]) {
    let at = |wanted: &Step| steps.iter().position(|s| s == wanted);
    let requeues = steps.iter().filter(|s| matches!(s, Requeue(_))).count();
    assert_eq!(requeues, 1, "{steps:?}");
    assert!(matches!(steps.last(), Some(Requeue(_))), "{steps:?}");
    let before = |first: &Step, then: &Step| {
        if let Some(then_at) = at(then) {
            let first_at = at(first);
            assert!(
                first_at.is_some_and(|f| f < then_at),
                "{then:?} needs {first:?} before it: {steps:?}"
            );
        }
    };
    before(&Prepare, &Apply);
    before(&RecordIntent, &Apply);
    // Adoption: proven from what prepare read before the intent; released after the intent
    // (a crash resumes it) and before the apply (whose writes then meet POM's own objects).
    before(&Prepare, &ProveAdoption);
    before(&ProveAdoption, &ReleaseFromOlm);
    before(&RecordIntent, &ReleaseFromOlm);
    let both_in_order = |first: &Step, then: &Step| {
        if let (Some(f), Some(t)) = (at(first), at(then)) {
            assert!(f < t, "{first:?} before {then:?}: {steps:?}");
        }
    };
    both_in_order(&ProveAdoption, &RecordIntent);
    both_in_order(&ReleaseFromOlm, &Apply);
    both_in_order(&ReleaseFromOlm, &AnnounceMove);
    // OLM's webhook configurations go only once POM's are applied.
    before(&Apply, &RetireOlmWebhooks);
    before(&JudgeOlmWebhooks, &RetireOlmWebhooks);
    // OLM's configurations are judged from what prepare readied, after the proof and before
    // the intent: one POM has no counterpart of stops the move before any write.
    before(&Prepare, &JudgeOlmWebhooks);
    both_in_order(&ProveAdoption, &JudgeOlmWebhooks);
    both_in_order(&JudgeOlmWebhooks, &RecordIntent);
    before(&Report, &WriteStatus);
    before(&WriteStatus, &PruneAfterSettle);
    before(&Report, &RememberCleanCheck);
    if let (Some(remember), Some(write)) = (at(&RememberCleanCheck), at(&WriteStatus)) {
        assert!(
            remember < write,
            "the check is kept from the status computed: {steps:?}"
        );
    }
    if let (Some(mark), Some(report)) = (at(&MarkReported), at(&Report)) {
        assert!(mark < report, "{steps:?}");
    }
    let withdraw = steps.iter().position(|s| matches!(s, Withdraw { .. }));
    if let Some(withdraw) = withdraw {
        assert!(
            at(&Report).is_some_and(|report| withdraw < report),
            "the status reports the inventory after the withdrawal: {steps:?}"
        );
    }
    let finishes_prune = steps
        .iter()
        .any(|s| matches!(s, FinishInterruptedPrune { .. }));
    assert!(
        !(finishes_prune && at(&Apply).is_some()),
        "an interrupted prune is finished alone: {steps:?}"
    );
}

fn report(wrote: usize) -> ActOutcome {
    ActOutcome::Applied(Box::new(InstallReport {
        bundle: installed("op.v1").unwrap(),
        max_openshift_version: None,
        waits: vec![],
        operator_condition: None,
        wrote,
        objects: vec![],
        powers: vec![],
        unavailable: vec![],
    }))
}

#[test]
fn a_failed_or_unsettled_move_prunes_nothing() {
    let unsettled = PlatformOperatorStatus {
        active_hop: hop("op.v1", false),
        ..steady()
    };
    assert_eq!(settled_on(&report(3), &steady()).as_deref(), Some("op.v1"));
    assert_eq!(settled_on(&report(3), &unsettled), None);
    assert_eq!(settled_on(&ActOutcome::Skipped, &steady()), None);
    let failed = ActOutcome::Failed(crate::Problem {
        reason: pom_api::conditions::Reason::InstallFailed,
        message: "refused".into(),
        degrades: true,
    });
    assert_eq!(settled_on(&failed, &steady()), None);
    assert_eq!(
        settled_on(&report(0), &PlatformOperatorStatus::default()).as_deref(),
        Some("op.v1"),
        "no move recorded: nothing in flight"
    );
}

#[test]
fn only_a_settled_keep_that_wrote_nothing_is_a_clean_check() {
    let keep = decision(Action::Keep);
    let unsettled = PlatformOperatorStatus {
        active_hop: hop("op.v1", false),
        ..steady()
    };
    assert!(keeps_clean_check(&keep, &report(0), &steady()));
    assert!(!keeps_clean_check(&keep, &report(1), &steady()), "wrote");
    assert!(
        !keeps_clean_check(&keep, &report(0), &unsettled),
        "in flight"
    );
    assert!(!keeps_clean_check(&move_to("2.0.0"), &report(0), &steady()));
    assert!(!keeps_clean_check(&keep, &ActOutcome::Skipped, &steady()));
}

#[test]
fn a_report_seen_before_is_remembered_even_when_the_apply_failed() {
    let failed = ActOutcome::Failed(crate::Problem {
        reason: pom_api::conditions::Reason::InstallFailed,
        message: "refused".into(),
        degrades: true,
    });
    assert!(marks_reported(true, &failed));
    assert!(!marks_reported(false, &failed));
    assert!(
        !marks_reported(false, &report(0)),
        "no OperatorCondition seen"
    );
}
