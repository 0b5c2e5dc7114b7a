//! State-machine property test: random sequences of world events drive the manager's
//! reconcile (gather → `decide` → intent → simulated act → `status::compute`) and
//! `aggregate::compute`; after every event the invariants of §4, §5, §7 and §8 are checked
//! against the simulated *world*, never against the status under test. The world calls
//! `pom_policy` only where the manager does (the gather's pure readings of a PO:
//! `ConfigView::of`, `unsettled_move_of`, `recover_installed`, `duplicate_winner`; then
//! `decide`, `status::intent`, `status::compute`, the prune, `aggregate::compute`).
//!
//! The world (`state_machine/world.rs`) keeps, per PO: the bundle whose objects are applied,
//! the configuration its Deployments run with, every object POM wrote and did not delete,
//! whether its rollout finished or its Deployment regressed, what its operator last wrote on
//! the OperatorCondition (nothing, True, False, pending, deleted) and whether a reconcile has
//! seen it report, when the rollout was first seen complete and when the move started; and the
//! catalogs' served content, priorities and availability, the cluster phase, the API server's
//! version, the cluster proxy, and what policy engines refuse. The oracle
//! (`state_machine/oracle.rs`) keeps its own rules and constants, none called or copied from
//! the code under test (`pom_policy`, `pom_resolver`; their types are data): "settled" (§7:
//! rolled out and available, plus the operator's `Upgradeable=True` under `OperatorCondition`,
//! and under `Auto` once it was seen reporting, until then once its own 2-minute settle window
//! passed since the rollout was first seen complete), latched when a reconcile sees it hold;
//! the resolution (§4.2 pins, the rollback pivot judged by `maxOpenShiftVersion` against the
//! version the cluster heads to *and* `minKubeVersion` against the API server's version, §5
//! edges, channels, priorities, `versionRange`, `steadyStateVersionRange`, pre-update hops,
//! the admin's `abandon:`); and configuration changes (a move of the running bundle to itself).
//!
//! Events: reconciles; rollouts finishing; Deployments regressing; operators writing
//! True/False/pending (only while their Deployment runs: an operator that never becomes
//! Available does not report); OperatorConditions deleted, or overridden by the admin
//! (`spec.overrides` `Upgradeable=True`); transient and permanent (admission) apply
//! failures, and partial applies (a bundle's first objects written, its Deployment refused for
//! good); manager restarts, crashes between a move's intent and its apply, and crashes between
//! an apply and its status write; status loss; PO spec edits (versionRange, channel,
//! upgradeGate, steadyStateVersionRange, catalog, upgradeApproval, the admin's approvals as
//! `pomctl approve` writes them, paused, `spec.config`); cluster Proxy changes,
//! configurations a policy engine refuses, and configurations and bundles whose Deployments
//! never become Available; unsafe CRD changes; the admin's annotations
//! (`unsettled-move` `abandon:`/`skip:`, on the recorded move or stale, `config-change-override`,
//! `crd-safety-override`, removed); deletion (mid-move or not) and re-creation; an older PO of
//! the same package appearing and going (duplicate packages); a second catalog, bundles added
//! and removed, catalogs down and up, priority flips; patch and minor updates, ClusterVersion
//! retargets, completions, rollbacks (the API server rolled back with them) and in-flight
//! rollbacks, an unreadable ClusterVersion; minor updates requested and withdrawn; time passing
//! (past the progress deadline and the settle window). Not modelled: install-mode and webhook
//! moves (their ordering is the e2e's: `lifecycle_webhook_hop`, `controller_install_modes`).
//!
//! Invariants (`state_machine/checks.rs`), each judged from the world:
//! 1. a move never starts while the world's last move is unsettled, except to resume a move
//!    recorded as intent before a crash (or re-apply one whose status write a crash lost), to
//!    carry out the admin's `abandon:` or `skip:` of it, or to replace a first install that no
//!    longer qualifies (and retry that replacement while the status records it); a
//!    configuration change waits for no move of what runs (a newer configuration replaces the
//!    one an unsettled move runs with: review H1, issue 34), and the next move of the bundle
//!    waits for it;
//! 2. a move goes along a catalog edge of the PO's channel from what runs (a rollback pivot,
//!    the admin's downgrade by `steadyStateVersionRange` and `abandon:`'s way back excepted),
//!    from a catalog the PO may use that serves it, and is the bundle the world's resolution
//!    picks;
//! 3. a move stays inside the pin of the phase, `versionRange`, `steadyStateVersionRange` and
//!    what the cluster it will run on can run (`maxOpenShiftVersion`, `minKubeVersion`);
//! 4. never a major version unless the admin's `steadyStateVersionRange` asks for it;
//! 5. never a move (nor `abandon:`'s way back, nor a configuration change without the
//!    override naming its digest) while the running operator says `Upgradeable=False`, or while
//!    the gate asks its word and it does not say True;
//! 6. a PO's `Upgradeable` is True only when, by the world at that reconcile, its move settled,
//!    no move is owed, its operator does not say False (nor less than True when the gate asks),
//!    its catalogs are available, the ClusterVersion is readable, its bundle runs on the next
//!    minor, its Deployment is available and no older PO manages its package;
//! 7. the aggregated `Upgradeable` is True only when every PO was last judged for its current
//!    spec and the cluster phase and minors as they are now, with nothing blocking it then;
//! 8. `versions[operator]` reaches the release only when every PO that runs something was last
//!    judged for the cluster as it is now, settled, with no move owed;
//! 9. a move unsettled past `spec.progressDeadline` (from its apply; for a PO restored without
//!    its status, from the re-apply whose status records it) leaves the PO Degraded (unless
//!    paused: POM moves nothing then);
//! 10. a settled operator whose Deployment regressed leaves the PO Degraded;
//! 11. the status records what runs (the bundle, and the configuration: never one that did not
//!     apply), a move recorded settled has settled in the world, a recorded move lists its
//!     objects before they are written, every object POM wrote and did not delete is listed in
//!     the inventory (partial applies included; deletion finds them), prune never deletes what
//!     the installed bundle owns, and a move recorded before a crash is never dropped while it
//!     still qualifies (unless the admin abandons it);
//! 12. a paused PO is neither moved nor re-applied, and not Upgradeable while something runs
//!     (a blocker of invariant 6);
//! 13. under `upgradeApproval: Manual` a move (the first install included) starts only to the
//!     bundle `spec.approvedBundle` names, except to resume a move recorded before a crash;
//! 14. of two POs for one package the older wins: the other writes nothing and a condition
//!     says `DuplicatePackage`, naming the older.
//!
//! Liveness under admin actions (`calm_down`, `state_machine/way_out.rs`): after the random
//! events the world calms down (catalogs up, ClusterVersion readable, no transient failures
//! or crashes; each round: time passes past the settle window, every PO is reconciled, its
//! rollout finishes, and an operator that has reported says True). Nothing else is done for
//! the admin: a PO that is not at its pin must be getting there, or be stuck, and then its
//! status must name a way out (an annotation with its value, a spec field, `pomctl approve`,
//! the OperatorCondition's `spec.overrides`, "fix what refuses it" or the refusal itself,
//! deleting a PO), which the test takes through
//! the table `WayOut` → world events, at once for the ordinary requests (approve, resume) and
//! after [`STUCK_ROUNDS`] rounds without progress for the others (each kind once, at most
//! [`MAX_WAYS_OUT`]). A stuck PO whose status names no way out, or that says to "wait for it"
//! while the cluster refuses what it applies for good, fails. Within the rounds every PO must
//! reach its pin: no move owed by the world's resolution, nor held by the admin's `abandon:`;
//! its move settled and recorded, nothing pending, its Deployments run with the configuration
//! asked for, nothing of another bundle left on the cluster, no unfinished first install
//! recorded; and then `versions` reports the release.
//!
//! `POM_STATE_MACHINE_CASES` sets the number of sequences (default 3,000; `make soak` runs
//! more) and `POM_STATE_MACHINE_SEED` the seed (fixed by default, `random` in `make soak`);
//! `POM_STATE_MACHINE_TRACE` prints every decision of a replayed sequence. A failing sequence
//! is shrunk and printed by proptest, and can be replayed from the persisted seed. The bugs it
//! found are kept as scripted sequences below (each failed before its fix).

#![allow(clippy::unwrap_used)]

#[path = "state_machine/checks.rs"]
mod checks;
#[path = "state_machine/oracle.rs"]
mod oracle;
#[path = "state_machine/way_out.rs"]
mod way_out;
#[path = "state_machine/world.rs"]
mod world;

use pom_api::platform_operator::UpgradeGate;
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use way_out::WayOut;

use world::{
    Annotation, CATALOGS, CHANNELS, CONFIGS, Event, OVERRIDES, PACKAGES, Says, Setup,
    VERSION_RANGES, VERSIONS, World,
};

/// Rounds of the calm world within which every PO must reach its pin: three per hop (apply,
/// first seen rolled out, settled after the window) over the longest chain of the model's
/// catalogs, plus a restart and a resumed crash.
pub const LIVENESS_ROUNDS: usize = 3 * VERSIONS.len() + 3;

fn event() -> impl Strategy<Value = Event> {
    let po = 0..PACKAGES.len();
    let bundle = 0..VERSIONS.len();
    let catalog = 0..CATALOGS.len();
    prop_oneof![
        10 => po.clone().prop_map(Event::Reconcile),
        4 => po.clone().prop_map(Event::RolloutFinishes),
        4 => (po.clone(), prop_oneof![
            Just(Says::True),
            Just(Says::False),
            Just(Says::Pending),
            Just(Says::Deleted),
        ]).prop_map(|(p, s)| Event::Operator(p, s)),
        1 => po.clone().prop_map(Event::Regress),
        1 => po.clone().prop_map(Event::OverrideGate),
        1 => po.clone().prop_map(Event::FailNextApply),
        1 => (po.clone(), bundle.clone()).prop_map(|(p, b)| Event::Refuse(p, b)),
        1 => po.clone().prop_map(Event::CrashDuringNextMove),
        1 => po.clone().prop_map(Event::LoseStatus),
        1 => (po.clone(), 0..VERSION_RANGES.len()).prop_map(|(p, r)| Event::EditVersionRange(p, r)),
        1 => (po.clone(), 0..=CHANNELS.len()).prop_map(|(p, c)| Event::EditChannel(p, c)),
        1 => (po.clone(), gate()).prop_map(|(p, g)| Event::EditGate(p, g)),
        1 => (po.clone(), 0..OVERRIDES.len()).prop_map(|(p, r)| Event::EditOverride(p, r)),
        1 => (po.clone(), 0..=CATALOGS.len()).prop_map(|(p, c)| Event::EditCatalog(p, c)),
        1 => (po.clone(), any::<bool>()).prop_map(|(p, m)| Event::EditApproval(p, m)),
        2 => po.clone().prop_map(Event::Approve),
        1 => (po.clone(), 0..VERSIONS.len()).prop_map(|(p, b)| Event::ApproveBundle(p, b)),
        1 => (po.clone(), any::<bool>()).prop_map(|(p, paused)| Event::Pause(p, paused)),
        1 => po.clone().prop_map(Event::CrashAfterNextApply),
        1 => (po.clone(), bundle.clone()).prop_map(|(p, b)| Event::RefusePartly(p, b)),
        2 => (po.clone(), 0..CONFIGS.len()).prop_map(|(p, c)| Event::EditConfig(p, c)),
        1 => (po.clone(), 1..CONFIGS.len()).prop_map(|(p, c)| Event::RefuseConfig(p, c)),
        1 => (po.clone(), 1..CONFIGS.len()).prop_map(|(p, c)| Event::UnavailableConfig(p, c)),
        1 => (po.clone(), bundle.clone()).prop_map(|(p, b)| Event::UnavailableBundle(p, b)),
        1 => any::<bool>().prop_map(Event::SetProxy),
        1 => (po.clone(), bundle.clone()).prop_map(|(p, b)| Event::UnsafeCrd(p, b)),
        2 => (po.clone(), annotation()).prop_map(|(p, a)| Event::Annotate(p, a)),
        1 => po.clone().prop_map(Event::DeleteAndRecreate),
        1 => (po, any::<bool>()).prop_map(|(p, e)| Event::OlderDuplicate(p, e)),
        2 => Just(Event::StartPatch),
        2 => Just(Event::StartMinor),
        1 => Just(Event::Retarget),
        2 => Just(Event::CompleteUpdate),
        1 => Just(Event::RollBack),
        1 => Just(Event::InFlightRollback),
        1 => any::<bool>().prop_map(Event::ClusterVersionUnreadable),
        1 => (catalog.clone(), bundle.clone()).prop_map(|(c, b)| Event::AddBundle(c, b)),
        1 => (catalog.clone(), bundle).prop_map(|(c, b)| Event::RemoveBundle(c, b)),
        1 => catalog.clone().prop_map(Event::CatalogDown),
        1 => catalog.prop_map(Event::CatalogUp),
        1 => Just(Event::FlipPriorities),
        1 => Just(Event::RestartManager),
        2 => Just(Event::RequestMinor),
        1 => Just(Event::WithdrawRequest),
        1 => (0..PACKAGES.len(), any::<bool>()).prop_map(|(p, take)| Event::EditPreUpdate(p, take)),
        2 => prop_oneof![Just(60u64), Just(150), Just(700)].prop_map(Event::Wait),
    ]
}

fn annotation() -> impl Strategy<Value = Annotation> {
    let bundle = 0..VERSIONS.len();
    prop_oneof![
        3 => Just(Annotation::AbandonRecorded),
        1 => bundle.clone().prop_map(Annotation::Abandon),
        1 => bundle.clone().prop_map(Annotation::Skip),
        2 => Just(Annotation::ConfigOverride),
        1 => bundle.prop_map(Annotation::CrdSafety),
        1 => Just(Annotation::Clear),
    ]
}

fn gate() -> impl Strategy<Value = UpgradeGate> {
    prop_oneof![
        Just(UpgradeGate::Auto),
        Just(UpgradeGate::Rollout),
        Just(UpgradeGate::OperatorCondition)
    ]
}

fn setup() -> impl Strategy<Value = Setup> {
    (
        prop::array::uniform9(prop::option::of(16u64..20)),
        prop::array::uniform9(prop::option::weighted(
            0.15,
            prop_oneof![Just((29u64, 4u64)), Just((29, 5)), Just((30, 0))],
        )),
        prop::collection::vec(gate(), PACKAGES.len()),
        prop::collection::vec(0..VERSION_RANGES.len(), PACKAGES.len()),
        prop::array::uniform9(prop::bool::weighted(0.3)),
        any::<bool>(),
    )
        .prop_map(
            |(max_ocp, min_kube, gates, ranges, extra, extra_wins)| Setup {
                max_ocp,
                min_kube,
                gates,
                ranges,
                extra,
                extra_wins,
            },
        )
}

/// Rounds without progress after which a PO that is not at its pin is stuck: its status must
/// then name a way out, which the admin takes.
pub const STUCK_ROUNDS: usize = 3;
/// Ways out the admin takes for one PO before the test gives up on it (each is a different
/// one: the status names the most specific first, "fix what refuses it" last). Five once
/// the world had bundles that never become Available and operators that do not report while
/// they do not run: a sequence can stack four independent faults (a bundle gone from the
/// catalog, a configuration and a bundle that never run, a refusal) and then the gate of an
/// operator that cannot report (`four_faults_and_a_silent_operator_each_name_their_way_out`).
/// Six since the replacement of an unsettled first install asks the operator's gate (review of
/// session 22, finding 2): a silent operator's gate then holds that replacement too
/// (`a_broken_first_install_replaced_under_a_silent_gate_names_its_override`). Seven since the
/// release soak of session 23 (seed 20261207) stacked an older duplicate, a refused
/// configuration, a configuration and a first install that never run and the gate of the
/// silent operator of the bundle that replaced it: each way out was named and worked, the
/// seventh (the gate's override) was past the budget
/// (`five_faults_under_a_silent_gate_each_name_their_way_out`).
pub const MAX_WAYS_OUT: usize = 7;

/// Liveness under admin actions: the world calms down (catalogs up, ClusterVersion readable,
/// no transient failures or crashes; each round time passes past the settle window, every PO
/// is reconciled, its rollout finishes, and an operator that has reported says True) and
/// every PO reaches its pin within [`LIVENESS_ROUNDS`], except that a PO not at its pin takes
/// the way out its status names: at once for the ordinary requests (approve a hop, resume),
/// and after [`STUCK_ROUNDS`] rounds without progress for the others; a stuck PO whose status
/// names no way out is a violation.
fn calm_down(world: &mut World) -> Result<(), String> {
    world.cv_unreadable = false;
    for c in 0..world.catalogs.len() {
        world.apply(&Event::CatalogUp(c))?;
    }
    for po in &mut world.pos {
        po.fail_next_apply = false;
        po.crash_during_next_move = false;
        po.crash_after_next_apply = false;
    }
    let n = PACKAGES.len();
    let mut still = vec![0usize; n];
    let mut last: Vec<Option<String>> = vec![None; n];
    let mut taken: Vec<Vec<WayOut>> = vec![Vec::new(); n];
    let rounds = LIVENESS_ROUNDS + MAX_WAYS_OUT * (STUCK_ROUNDS + 1) * n;
    let mut why_not = String::new();
    for round in 0..rounds {
        if round > 0 {
            match at_rest(world) {
                Ok(()) => return Ok(()),
                Err(why) => why_not = why,
            }
        }
        world.apply(&Event::Wait(150))?;
        for i in 0..n {
            world.apply(&Event::Reconcile(i))?;
            world.apply(&Event::RolloutFinishes(i))?;
            let sim = &world.pos[i];
            if sim.says != Says::Never
                || sim.reported_seen
                || sim.po.spec.upgrade_gate == UpgradeGate::OperatorCondition
            {
                world.apply(&Event::Operator(i, Says::True))?;
            }
        }
        for i in 0..n {
            let Err(why) = po_at_rest(world, i) else {
                still[i] = 0;
                continue;
            };
            let status = world.status(i).cloned().unwrap_or_default();
            let print = progress_print(world, i);
            if last[i].as_ref() == Some(&print) {
                still[i] += 1;
            } else {
                still[i] = 0;
                last[i] = Some(print);
            }
            let overridden = world.pos[i].po.spec.steady_state_version_range.is_some();
            let ways = way_out::named(i, &status, overridden);
            let way = match ways.iter().find(|w| w.routine()) {
                Some(way) => way.clone(),
                None if still[i] < STUCK_ROUNDS => continue,
                // A move waiting for its rollout is not stuck before its progress deadline: only
                // then does the status say that it may not settle by waiting.
                None if within_deadline(world, &status) => continue,
                None => {
                    // Issue 34 item 2: a move the cluster refuses for good is not "wait for it".
                    let waits = status.conditions.iter().any(|c| {
                        c.type_ == pom_api::conditions::types::UPGRADEABLE
                            && c.message.contains("wait for it")
                    });
                    if waits && (way_out::refused_for_good(world, i) || world.older[i].is_some()) {
                        return Err(format!(
                            "liveness: {} is stuck ({why}): the cluster refuses what it applies for good, or another PO manages its package, yet Upgradeable says to wait for it: {:#?}",
                            PACKAGES[i], status.conditions
                        ));
                    }
                    // Each kind of way out once, but for the exclusion of a bundle: each
                    // bundle once, since bundles that never become Available may follow one
                    // another in a channel (found by the property:
                    // `two_bundles_that_never_become_available_are_excluded_in_turn`); the
                    // ways stay bounded by MAX_WAYS_OUT.
                    // Deleting the PO again once the admin excluded another bundle since the
                    // last deletion is a new way out: the recreated PO installs under the new
                    // spec (found by the release soak, seed 20261209: every bundle excluded
                    // in turn, the last one left running until deleted).
                    let excluded_since_delete = taken[i]
                        .iter()
                        .rev()
                        .take_while(|t| !matches!(t, WayOut::Delete))
                        .any(|t| matches!(t, WayOut::ExcludeVersion(_)));
                    let Some(way) = ways.iter().find(|w| {
                        !taken[i].iter().any(|t| match (t, *w) {
                            (WayOut::ExcludeVersion(a), WayOut::ExcludeVersion(b)) => a == b,
                            (WayOut::Delete, WayOut::Delete) => !excluded_since_delete,
                            _ => std::mem::discriminant(t) == std::mem::discriminant(*w),
                        })
                    }) else {
                        return Err(format!(
                            "liveness: {} is stuck ({why}) and its status names no way out not yet taken (taken: {:?}): {:#?}",
                            PACKAGES[i], taken[i], status.conditions
                        ));
                    };
                    if taken[i].len() == MAX_WAYS_OUT {
                        return Err(format!(
                            "liveness: {} is still stuck ({why}) after the ways out {:?}",
                            PACKAGES[i], taken[i]
                        ));
                    }
                    if std::env::var_os("POM_STATE_MACHINE_TRACE").is_some() {
                        // Which way out the admin took, and from what status.
                        eprintln!(
                            "{}: way out {way:?}, named by {:#?}",
                            PACKAGES[i], status.conditions
                        );
                    }
                    taken[i].push(way.clone());
                    world.ways_taken.push((i, way.clone()));
                    still[i] = 0;
                    way.clone()
                }
            };
            for event in way.events(world, i) {
                world.apply(&event)?;
            }
        }
    }
    at_rest(world).map_err(|why| {
        format!(
            "liveness: not at the pin after {rounds} calm rounds (ways out taken: {taken:?}): {why} (before the last round: {why_not})"
        )
    })
}

/// Whether the unsettled move the status records started within `spec.progressDeadline`
/// (the model's deadline, plus one calm round for the reconcile that reports it).
fn within_deadline(
    world: &World,
    status: &pom_api::platform_operator::PlatformOperatorStatus,
) -> bool {
    status
        .active_hop
        .as_ref()
        .filter(|h| !h.settled)
        .is_some_and(|h| {
            oracle::seconds_since(world.now, h.started_at.0)
                <= world::DEADLINE.as_secs() as i64 + 150
        })
}

/// What changes while a PO makes progress (by the world and its status; not its failure
/// count, which grows while it is stuck).
fn progress_print(world: &World, i: usize) -> String {
    let sim = &world.pos[i];
    let status = world.status(i);
    format!(
        "{:?} {} {} {:?} {:?} {:?} {:?} {:?}",
        sim.running,
        sim.settled,
        sim.config_runs.digest,
        sim.po.metadata.generation,
        status
            .and_then(|s| s.installed_bundle.as_ref())
            .map(|b| &b.name),
        status
            .and_then(|s| s.active_hop.as_ref())
            .map(|h| (&h.to, h.settled, &h.config)),
        status
            .and_then(|s| s.desired_bundle.as_ref())
            .map(|b| &b.name),
        sim.po.metadata.annotations,
    )
}

/// PO `i` at its pin, by the world: no move owed by the world's resolution; what runs settled
/// and recorded settled, nothing pending; its Deployments run with the configuration asked
/// for; and nothing of another bundle left on the cluster (a partial apply's objects pruned).
fn po_at_rest(world: &World, i: usize) -> Result<(), String> {
    let sim = &world.pos[i];
    let status = world.status(i).cloned().unwrap_or_default();
    let name = |b: usize| world::bundle_name(PACKAGES[i], b);
    if world.older[i].is_some() {
        return Err(format!(
            "{}: {} manages its package",
            PACKAGES[i],
            world::older_name(i)
        ));
    }
    if let Some(held) = oracle::resolution(world, i).filter(|b| oracle::abandoned(world, i, *b)) {
        return Err(format!(
            "{}: the move to {} is held by the admin's abandon: annotation",
            PACKAGES[i], VERSIONS[held]
        ));
    }
    if let Some(owed) = oracle::next_move(world, i) {
        return Err(format!(
            "{}: a move to {} is owed (runs {:?}, status {:?})",
            PACKAGES[i],
            VERSIONS[owed],
            sim.running.map(|r| VERSIONS[r]),
            status.installed_bundle
        ));
    }
    // Nothing runs and nothing is owed (objects a refused first install wrote stay listed in
    // the inventory, for the PO's deletion), unless the status records a first install that
    // has not finished: POM cannot know that nothing of it runs, so it waits for the admin.
    let Some(running) = sim.running else {
        if let Some(hop) = status
            .active_hop
            .as_ref()
            .filter(|h| !h.settled && h.from.is_none())
        {
            return Err(format!(
                "{}: the first install of {} recorded in status has not finished",
                PACKAGES[i], hop.to
            ));
        }
        return Ok(());
    };
    let recorded = status.installed_bundle.as_ref().map(|b| b.name.clone()) == Some(name(running))
        && status.desired_bundle.is_none()
        && status.active_hop.as_ref().is_some_and(|h| h.settled);
    if !sim.settled || !recorded {
        return Err(format!(
            "{}: runs {} (settled by the world: {}), status does not record it settled at its pin: {:?} {:?} {:?}",
            PACKAGES[i],
            VERSIONS[running],
            sim.settled,
            status.installed_bundle,
            status.desired_bundle,
            status.active_hop
        ));
    }
    let desired = world.desired_config(i);
    if sim.config_runs.digest != desired.digest {
        return Err(format!(
            "{}: its Deployments run with configuration {:?}, {:?} is asked for",
            PACKAGES[i], sim.config_runs, desired
        ));
    }
    let owned = world::objects_of(PACKAGES[i], &name(running));
    if let Some(left) = sim.on_cluster.iter().find(|o| !owned.contains(o)) {
        return Err(format!(
            "{}: settled at {}, and {left:?} of another bundle is left on the cluster",
            PACKAGES[i], VERSIONS[running]
        ));
    }
    Ok(())
}

/// Every PO at its pin, and the release reported.
fn at_rest(world: &World) -> Result<(), String> {
    for i in 0..PACKAGES.len() {
        po_at_rest(world, i)?;
    }
    if !world
        .co
        .versions
        .iter()
        .any(|v| v.version == world.release())
    {
        return Err(format!(
            "every PO is at its pin, yet versions does not report {}: {:?}",
            world.release(),
            world.co.versions
        ));
    }
    Ok(())
}

fn run(setup: &Setup, events: &[Event]) -> Result<World, String> {
    let mut world = World::new(setup);
    for (step, event) in events.iter().enumerate() {
        world
            .apply(event)
            .map_err(|violation| format!("step {step} ({event:?}): {violation}"))?;
    }
    calm_down(&mut world)?;
    Ok(world)
}

fn cases() -> u32 {
    std::env::var("POM_STATE_MACHINE_CASES")
        .ok()
        .and_then(|c| c.parse().ok())
        .unwrap_or(3_000)
}

/// The sequences `make test` runs are the same on every run (a fixed seed), so CI is red only
/// for a change that broke an invariant; `make soak` sets `POM_STATE_MACHINE_SEED=random` to
/// explore new sequences, and any failure it finds is persisted to the regressions file and
/// replayed by every later run.
fn seed() -> RngSeed {
    match std::env::var("POM_STATE_MACHINE_SEED") {
        Ok(text) if text == "random" => RngSeed::Random,
        Ok(text) => RngSeed::Fixed(text.parse().unwrap_or_else(|_| {
            panic!("POM_STATE_MACHINE_SEED={text:?}: expected a number or \"random\"")
        })),
        Err(_) => RngSeed::Fixed(0x504f_4d5f_7365_6564),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: cases(),
        max_shrink_iters: 4_000,
        rng_seed: seed(),
        ..ProptestConfig::default()
    })]

    #[test]
    fn the_world_keeps_every_invariant_and_reaches_its_pins(
        setup in setup(),
        events in prop::collection::vec(event(), 1..50),
    ) {
        if let Err(violation) = run(&setup, &events) {
            prop_assert!(false, "{violation}");
        }
    }
}

fn plain_setup(gates: [UpgradeGate; 2]) -> Setup {
    Setup {
        max_ocp: [None; 9],
        min_kube: [None; 9],
        gates: gates.to_vec(),
        ranges: vec![1, 1],
        extra: [false; 9],
        extra_wins: false,
    }
}

/// The simulation must actually exercise moves (so the property above is not vacuous): a fixed
/// script installs both POs, moves them through a patch update once a new bundle appears, and
/// reports the release version only once both settled at their pins.
#[test]
fn the_world_moves_when_it_should() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Rollout]);
    let world = run(&setup, &[Event::AddBundle(0, 5), Event::StartPatch]).unwrap();
    let installed = |w: &World, i: usize| w.pos[i].running.map(|r| VERSIONS[r]);
    assert_eq!(
        (installed(&world, 0), installed(&world, 1)),
        (Some("1.2.1"), Some("1.2.1"))
    );
    assert_eq!(world.moves, 2, "two installs at the highest bundle");
    assert!(
        world.co.versions.iter().any(|v| v.version == "4.16.4"),
        "{:?}",
        world.co
    );
}

/// Found by the property (bug "unrecorded"): a PO restored without its status whose running
/// bundle no catalog it may use lists is refused adoption (Installed=False AdoptionRefused),
/// and `aggregate::compute` then counts it as "failed without install": `versions` reports the
/// release although an unsettled bundle runs (§8.2).
#[test]
fn an_unadopted_running_bundle_withholds_the_release() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 2];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::EditCatalog(1, 1),
            Event::LoseStatus(1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "unrecorded"): a PO restored without its status whose re-apply
/// fails keeps `installedBundle` empty (`status::compute` keeps the previous, empty, record on
/// a failed apply), so its Upgradeable is the verdict of the recovered bundle (True) and the
/// aggregated Upgradeable is True while that bundle's install has not settled (§8.3).
#[test]
fn a_recovered_bundle_whose_reapply_fails_is_not_upgradeable() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 1];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::Refuse(1, 4),
            Event::LoseStatus(1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "annotation"): the manager writes the operator-condition-reported
/// annotation only from the OperatorCondition of a successful apply. An operator seen reporting
/// at gather (here by a reconcile whose apply failed; equally by one that moves on to the next
/// bundle, whose fresh OperatorCondition is empty) is forgotten once that OperatorCondition is
/// gone, and under `Auto` the move then settles without its word (§7). Through the real
/// reconcile, against an API server and across manager restarts:
/// `e2e/tests/lifecycle_operator_condition.rs`, `an_operator_seen_reporting_is_remembered_across_restarts`.
#[test]
fn an_operator_seen_reporting_keeps_gating_its_moves() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::FailNextApply(0),
            Event::Operator(0, Says::True),
            Event::Reconcile(0),
            Event::Operator(0, Says::Deleted),
            Event::Reconcile(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Issue 23 item 5, scripted (so the property is not vacuous about it): under Manual approval
/// the first install waits for the admin's approval of exactly the bundle chosen (an approval
/// of another bundle releases nothing), and a paused PO installs nothing until it is resumed;
/// then both reach their pins.
#[test]
fn manual_approval_and_pause_hold_moves_until_the_admin_acts() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let mut world = World::new(&setup);
    let apply = |world: &mut World, event: Event| {
        world
            .apply(&event)
            .unwrap_or_else(|violation| panic!("{event:?}: {violation}"));
    };
    apply(&mut world, Event::EditApproval(0, true));
    apply(&mut world, Event::Pause(1, true));
    apply(&mut world, Event::Reconcile(0));
    apply(&mut world, Event::Reconcile(1));
    assert_eq!(world.pos[0].running, None, "held for approval");
    assert_eq!(world.pos[1].running, None, "paused");
    let waiting = |world: &World, i: usize| {
        world
            .status(i)
            .and_then(|s| s.desired_bundle.as_ref())
            .map(|d| d.version.clone())
    };
    assert_eq!(waiting(&world, 0).as_deref(), Some("1.2.0"));
    assert_eq!(waiting(&world, 1).as_deref(), Some("1.2.0"));
    // An approval of another bundle releases nothing.
    apply(&mut world, Event::ApproveBundle(0, 0));
    apply(&mut world, Event::Reconcile(0));
    assert_eq!(world.pos[0].running, None, "1.0.0 approved, 1.2.0 waits");
    // What `pomctl approve` writes: the bundle the PO waits for.
    apply(&mut world, Event::Approve(0));
    apply(&mut world, Event::Reconcile(0));
    assert_eq!(world.pos[0].running.map(|r| VERSIONS[r]), Some("1.2.0"));
    apply(&mut world, Event::Reconcile(1));
    assert_eq!(world.pos[1].running, None, "still paused");
    apply(&mut world, Event::Pause(1, false));
    apply(&mut world, Event::Reconcile(1));
    assert_eq!(world.pos[1].running.map(|r| VERSIONS[r]), Some("1.2.0"));
    calm_down(&mut world).unwrap_or_else(|why| panic!("{why}"));
}

/// Found by the property once the oracle judged pre-update hops by its own rule (bug
/// "outgrown"): a PO runs 1.1.0 (`maxOpenShiftVersion` 4.16) on a cluster that was updated
/// past it to 4.17; the admin requests 4.18. 1.1.1 runs on both, so §4.2's PreUpdate pin owes
/// the hop to it, yet `decide` offered hops only when the steady resolution *stays* (here it
/// fails: what runs does not run on 4.17), reported nothing owed, and the ClusterOperator
/// reported `versions` for 4.17.0 with the hop owed.
#[test]
fn a_running_bundle_the_cluster_outgrew_still_gets_its_pre_update_hops() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.ranges = vec![0, 2];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::StartMinor,
            Event::AddBundle(0, 3),
            Event::CompleteUpdate,
            Event::RequestMinor,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "refused re-apply"): a first install applies, then a policy
/// engine refuses its Deployment for good before the move settled. The re-apply's failures
/// were not counted, Degraded named no way out, and Upgradeable told the admin to "wait for
/// it", which never happens (issue 34 item 2): now counted and backed off, and the status
/// names "fix what refuses it" (and, for a hop, the `abandon:` annotation).
#[test]
fn a_move_whose_reapply_is_refused_names_its_way_out() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::StartMinor,
            Event::Reconcile(0),
            Event::RefusePartly(0, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "restored config"): a PO runs 2.0.1 rendered with the cluster
/// proxy, its operator has reported, and the PO is restored without its status. The lost
/// `appliedConfig` read as "no configuration", the change back to the proxy was held behind
/// the operator's unreadable gate, and the re-apply that recovers the bundle rendered its
/// Deployments with no configuration: the proxy dropped, the operator restarted, against the
/// hold.
#[test]
fn a_po_restored_without_its_status_keeps_its_configuration() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::SetProxy(true),
            Event::Reconcile(0),
            Event::Operator(0, Says::True),
            Event::Reconcile(0),
            Event::LoseStatus(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "unlisted install"): the manager dies between the apply of a
/// first install (1.1.0) and its status write; the catalog drops 1.1.0 before the next
/// manager reads it. The recorded install was dropped (no catalog has it) and another bundle
/// (1.0.1) installed over the 1.1.0 that runs: a downgrade nobody chose. Now nothing is
/// written, and the status says to add the bundle back (the install then finishes) or
/// delete the PO.
#[test]
fn a_first_install_whose_bundle_left_the_catalog_is_not_installed_over() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::RemoveBundle(0, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "inert abandon"): `abandon:` naming an unsettled first install
/// (2.0.0, from the catalog that wins) has no way back; `decide` then kept what runs without
/// resolving, so once the install settled, in a patch update with 2.0.1 on offer from the
/// catalog that now wins, the PO said `Upgradeable=True` with that move owed (§8.3).
#[test]
fn an_inert_abandon_of_a_first_install_hides_no_owed_move() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 3];
    setup.extra[6] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::Annotate(1, Annotation::AbandonRecorded),
            Event::StartPatch,
            Event::FlipPriorities,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "abandoned install"): the manager dies between the apply of a
/// first install (2.0.1, `maxOpenShiftVersion` 4.16) and its status write; a minor update
/// starts, so the recorded install no longer qualifies and is abandoned for a resolution that
/// installs nothing. Status said Upgradeable=True "nothing installed" (the case issue 34
/// item 3's fix left as before), and the ClusterOperator Upgradeable=True, while 2.0.1's
/// objects run, unsettled, on a cluster it cannot run on.
#[test]
fn an_abandoned_first_install_that_may_run_is_not_upgradeable() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[7] = Some(16);
    setup.ranges = vec![0, 4];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(1),
            Event::Reconcile(1),
            Event::StartMinor,
            Event::EditOverride(1, 2),
            Event::EditCatalog(0, 0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "duplicate mid-move"): an older PlatformOperator for the same
/// package appears while this one's first install has not settled. POM no longer manages the
/// package and will not finish the move, yet Upgradeable said "wait for it" (the Degraded
/// condition named the way out: delete one of the two).
#[test]
fn a_duplicate_mid_move_is_not_told_to_wait() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 2];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::OlderDuplicate(1, true),
            Event::Refuse(1, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (bug "duplicate restored"): the loser of a duplicate is restored
/// without its status while the manager's catalogs load: it said Upgradeable=True "not
/// installed by this PlatformOperator", and the ClusterOperator Upgradeable=True, while its
/// labelled objects (an unsettled 2.0.1) run.
#[test]
fn a_duplicate_restored_without_its_status_vouches_for_nothing() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::OlderDuplicate(1, true),
            Event::LoseStatus(1),
            Event::RestartManager,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run): as "outgrown", with the admin's versionRange
/// (`>=1.0.1`) excluding the running 1.0.0 (`maxOpenShiftVersion` 4.16) when a minor update
/// is requested: the steady resolution fails, so no hop was offered, and the PO was stuck with
/// no way out named although 1.2.0 (one skipRange hop, admitted) runs on both versions.
#[test]
fn a_running_bundle_the_version_range_excludes_still_gets_its_pre_update_hops() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[0] = Some(16);
    setup.ranges = vec![1, 0];
    setup.extra[0] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RequestMinor,
            Event::EditVersionRange(0, 3),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run): `abandon:` names an unsettled configuration
/// change of 1.1.0 whose way back (1.1.0 itself) the admin's versionRange now excludes; a minor
/// update starts and 1.2.0 is owed. The refused way back was returned as the decision (keep
/// what runs), dropping the owed move: once the change settled, the PO said Upgradeable=True
/// with 1.2.0 owed (§8.3).
#[test]
fn an_abandon_that_cannot_be_taken_hides_no_owed_move() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![1, 0];
    setup.extra[2] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RefuseConfig(0, 1),
            Event::Annotate(0, Annotation::AbandonRecorded),
            Event::EditConfig(0, 1),
            Event::StartMinor,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run): `abandon:` names an unsettled configuration
/// change of 2.0.0 (the cluster proxy set) while 2.0.1 is owed under Manual approval. Its "way
/// back" was 2.0.0 itself, re-applied with the configuration asked for: a move that settled at
/// once and dropped the owed move, so the PO said Upgradeable=True with 2.0.1 owed. `abandon:`
/// no longer applies to a configuration change (its way back is `spec.config`).
#[test]
fn abandon_of_a_configuration_change_hides_no_owed_move() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 3];
    setup.extra[6] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::RemoveBundle(1, 6),
            Event::EditApproval(1, true),
            Event::SetProxy(true),
            Event::StartPatch,
            Event::Annotate(1, Annotation::AbandonRecorded),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run): the manager dies between the apply of a
/// configuration change (2.0.1 with `LOG_LEVEL=debug`) and its status write, so the status
/// records the change as never applied; a minor update starts and the hop to 2.1.0 started at
/// once (a change that never applied holds nothing, issue 34 item 1), while the change the
/// world applied had not settled (§7). A change whose apply never failed may have applied: it
/// holds the next hop (`snapshot::Hop::failed_attempts` tells it from a refused one).
#[test]
fn a_configuration_change_applied_before_a_crash_holds_the_next_hop() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[7] = Some(16);
    setup.ranges = vec![0, 3];
    setup.extra[8] = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::Operator(1, Says::True),
            Event::RolloutFinishes(1),
            Event::EditConfig(1, 1),
            Event::ClusterVersionUnreadable(true),
            Event::Reconcile(1),
            Event::StartMinor,
            Event::CrashAfterNextApply(1),
            Event::Reconcile(1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run, issue 34's liveness case): alpha's first install
/// (1.0.0) is refused for good; an older PO of the package appears, a minor update starts and
/// the admin's `steadyStateVersionRange` pins `=1.0.1`, which no longer runs on the cluster
/// (`minKubeVersion` 1.29.4). The status recorded the refused install as a first install that
/// has not finished, and named `versionRange` and the override as ways out, neither of which
/// can clear a first install recorded in status: the PO stayed stuck after every way out.
#[test]
fn a_refused_first_install_names_a_way_out_that_clears_it() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.min_kube[1] = Some((29, 4));
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::Refuse(0, 0),
            Event::OlderDuplicate(0, true),
            Event::StartMinor,
            Event::EditOverride(0, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session): the manager dies after recording
/// beta's first install (2.0.0: the patch update was retargeted to a minor update) and before
/// applying it; an older PO of the package appears, a minor update starts, the admin pins
/// `steadyStateVersionRange` `>=1.0.0 <1.2.0` and names catalog `extra`, which lacks 2.0.0.
#[test]
fn a_first_install_recorded_before_a_crash_names_a_way_out_that_clears_it() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[6] = Some(17);
    setup.ranges = vec![0, 4];
    let result = run(
        &setup,
        &[
            Event::StartPatch,
            Event::Retarget,
            Event::CrashDuringNextMove(1),
            Event::RemoveBundle(0, 7),
            Event::CompleteUpdate,
            Event::Reconcile(1),
            Event::StartMinor,
            Event::OlderDuplicate(1, true),
            Event::EditOverride(1, 1),
            Event::EditCatalog(1, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Review H1, through the world: a configuration change applies and its Deployments never
/// become Available. Nothing settles by waiting; the status names the revert (past the
/// progress deadline), the admin takes it, and the revert replaces the unsettled change
/// instead of waiting behind it: the PO settles at its pin with the configuration it ran with.
#[test]
fn a_configuration_that_never_becomes_available_is_replaced_by_the_revert() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let world = run(
        &setup,
        &[
            Event::UnavailableConfig(0, 1),
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::EditConfig(0, 1),
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Wait(700),
            Event::Reconcile(0),
        ],
    )
    .unwrap_or_else(|why| panic!("{why}"));
    let sim = &world.pos[0];
    assert_eq!(sim.running.map(|r| VERSIONS[r]), Some("1.2.0"));
    assert_eq!(world::level_of(&sim.config_runs), None, "reverted");
    assert!(sim.settled);
}

/// Found by the property once the world had configurations that never become Available: a
/// first install rendered with such a configuration never settles; the admin's fix of
/// `spec.config` waited behind the install (a bundle move in flight holds a configuration
/// change), `abandon:` has no way back from a first install, and the status named no way out.
/// A newer configuration replaces the one an unsettled first install applied with (nothing ran
/// before it to protect), and past the deadline the status names it.
#[test]
fn a_first_install_whose_configuration_never_becomes_available_names_a_way_out() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let world = run(
        &setup,
        &[Event::UnavailableConfig(0, 1), Event::EditConfig(0, 1)],
    )
    .unwrap_or_else(|why| panic!("{why}"));
    assert!(world.pos[0].settled);
    // Out by the configuration the status named, not by deleting the PlatformOperator (which
    // starts it again at generation 1).
    assert!(
        world.pos[0].po.metadata.generation > Some(1),
        "{:?}",
        world.pos[0].po.metadata
    );
    assert_eq!(world::level_of(&world.pos[0].config_runs), None);
}

/// Found by the property (the default run, once a first install's configuration could be
/// replaced): the admin changes `spec.config` while the first install of 2.0.0 has not
/// settled, and the cluster then refuses 2.0.0. The change replaced the install's hop with a
/// configuration change that never applied, which holds nothing, and the hop to 2.0.1 started
/// while the install had not settled (§7). The change stays the install's move.
#[test]
fn a_refused_configuration_of_an_unsettled_first_install_holds_the_next_hop() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.min_kube[7] = Some((29, 4));
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::StartPatch,
            Event::Reconcile(0),
            Event::EditConfig(0, 1),
            Event::CompleteUpdate,
            Event::Refuse(0, 6),
            Event::StartPatch,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session; a fault of the model, not of
/// POM): the manager dies between the apply of beta's first install and its status write; the
/// resumed install's apply finds it rolled out, and the world took the move as settled by that
/// reconcile, which records it running (POM settles a move at the next one, as §7 judges what
/// runs). Its Deployment then regressed, and the world asked for Degraded while POM rightly
/// reported the install still rolling out. The world no longer latches settled at the reconcile
/// that records the move.
#[test]
fn a_resumed_first_install_that_regresses_is_degraded() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Rollout]);
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(1),
            Event::Reconcile(1),
            Event::RolloutFinishes(1),
            Event::Reconcile(1),
            Event::Reconcile(1),
            Event::Regress(1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Review H1's rule, one step further: a configuration change applies and never settles; the
/// admin's next configuration replaces it and the cluster refuses that one. What runs is the
/// first change, unsettled, so the hop a patch update owes waits for it (§7). The status kept
/// no record that what runs had not settled once a refused change replaced the unsettled one,
/// and the hop started; the replacing change now records it (`activeHop.appliedUnsettled`).
#[test]
fn a_refused_replacement_of_an_unsettled_configuration_holds_the_next_hop() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::UnavailableConfig(0, 1),
            Event::EditConfig(0, 1),
            Event::Reconcile(0),
            Event::RefuseConfig(0, 2),
            Event::EditConfig(0, 2),
            Event::Reconcile(0),
            Event::AddBundle(0, 5),
            Event::StartPatch,
            Event::Reconcile(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Review of session 22 (finding 1): alpha's hop applied and rolls out fine when the admin sets
/// a configuration the cluster refuses. The change used to replace the configuration of the
/// hop at once, the refusal kept the hop unsettled, and the hop, rolled out with the
/// configuration it had, never settled: Upgradeable=False, the next hops held, until the admin
/// found and undid the refused change. A newer configuration waits for a hop within its
/// deadline to settle, as it did before (it replaces the configuration of one past it).
#[test]
fn a_refused_configuration_sent_during_a_healthy_hop_does_not_hold_it_unsettled() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let mut world = World::new(&setup);
    for event in [
        Event::Reconcile(0),
        Event::RolloutFinishes(0),
        Event::Wait(150),
        Event::Reconcile(0),
        Event::AddBundle(0, 5),
        Event::StartPatch,
        Event::Reconcile(0),
        Event::RefuseConfig(0, 2),
        Event::EditConfig(0, 2),
        Event::Reconcile(0),
        Event::RolloutFinishes(0),
        Event::Reconcile(0),
        Event::Wait(150),
        Event::Reconcile(0),
        Event::Reconcile(0),
    ] {
        world
            .apply(&event)
            .unwrap_or_else(|why| panic!("{event:?}: {why}"));
    }
    // The hop settled; the refused change then started on its own, over what runs settled
    // (it holds nothing: it never applied).
    let hop = world.status(0).and_then(|s| s.active_hop.clone());
    assert!(
        hop.as_ref().is_some_and(
            |h| h.settled || (h.from.as_deref() == Some(h.to.as_str()) && !h.applied_unsettled)
        ),
        "the hop that rolled out settles without the admin's help: {hop:#?}"
    );
}

/// Review of session 22 (finding 3): alpha's first install (1.1.0) never becomes Available; the
/// admin excludes it, and its replacement (1.0.1, a first install by every record) is refused;
/// the admin admits 1.1.0 again and excludes 1.0.1. The replacement is abandoned and 1.1.1
/// applied again, which the status recorded as a hop from 1.1.1 to itself: past the deadline
/// Degraded named no way out (no exclusion of a first install, and a way back to itself). The
/// re-apply over an unsettled first install stays that first install.
#[test]
fn a_first_install_re_admitted_after_its_refused_replacement_stays_a_first_install() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![2, 0];
    let mut world = World::new(&setup);
    for event in [
        Event::UnavailableBundle(0, 2),
        Event::Refuse(0, 1),
        Event::Reconcile(0),
        Event::ExcludeVersion(0, 2),
        Event::Reconcile(0),
        Event::Reconcile(0),
        Event::EditVersionRange(0, 2),
        Event::ExcludeVersion(0, 1),
        Event::Reconcile(0),
        Event::Reconcile(0),
    ] {
        world
            .apply(&event)
            .unwrap_or_else(|why| panic!("{event:?}: {why}"));
    }
    let hop = world.status(0).and_then(|s| s.active_hop.clone());
    assert!(
        hop.as_ref()
            .is_some_and(|h| h.from.is_none() && h.to == "alpha.v1.1.0"),
        "the re-applied first install stays a first install: {hop:#?}"
    );
    calm_down(&mut world).unwrap_or_else(|why| panic!("{why}"));
}

/// Found by a random soak of the review of session 22 (seed 4102026; a fault of the model):
/// beta's first install (2.0.1) rolls out; the admin's configuration, waiting for it to settle,
/// then rolls 2.0.1 out again, and the world made 2.0.1 a bundle that never becomes Available:
/// the running bundle turning broken after it rolled out, which the world's bound on broken
/// bundles means to leave out (no bundle excluded or configuration undone makes it run).
#[test]
fn a_bundle_that_rolled_out_once_does_not_turn_broken() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Rollout]);
    setup.ranges = vec![0, 3];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::RolloutFinishes(1),
            Event::EditConfig(1, 1),
            Event::Reconcile(1),
            Event::Reconcile(1),
            Event::UnavailableBundle(1, 7),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by a random soak of the review of session 22 (seed 2718281), once the replacement of
/// an unsettled first install asked the operator's gate: alpha (`upgradeGate:
/// OperatorCondition`) first installs a bundle that never becomes Available, with a
/// configuration the cluster refuses and then one that never becomes Available either. Its
/// replacement, once the admin excludes it, waits for the gate of an operator that never ran;
/// the gate's override is named, a sixth way out beside the configuration's and the bundles'.
#[test]
fn a_broken_first_install_replaced_under_a_silent_gate_names_its_override() {
    let mut setup = plain_setup([UpgradeGate::OperatorCondition, UpgradeGate::Auto]);
    setup.ranges = vec![3, 0];
    setup.extra[4] = true;
    setup.extra[8] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::AddBundle(0, 5),
            Event::RefuseConfig(0, 2),
            Event::UnavailableBundle(0, 5),
            Event::EditConfig(0, 2),
            Event::EditChannel(0, 1),
            Event::UnavailableConfig(0, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by a random soak of the review of session 22 (seed 5150517; a fault of the model's
/// way-out table): beta runs 1.1.0 (maxOpenShiftVersion 4.16), whose re-apply the cluster
/// refuses; a minor update to 4.17 starts; the admin's `steadyStateVersionRange` `=1.0.1` moves
/// it to 1.0.1, which never becomes Available, served from a second catalog. Degraded names
/// "exclude it with `!=1.0.1` in spec.package.versionRange and delete the PlatformOperator" as
/// one remedy; the table took the exclusion alone, whose pin nothing satisfies then (`=1.0.1`
/// under the override), took that refusal's remedy (the override cleared, `=1.0.1` still the
/// steady pin) and ran out of its six ways before the deletion. The remedy is now one way out
/// (`WayOut::ExcludeAndDelete`): after the refusal fixed, `abandon:`, 1.1.0 served again (the
/// way back, which cannot run on 4.17) and `spec.config`, the PlatformOperator is deleted and
/// nothing installs (nothing else in its catalog runs on 4.17).
#[test]
fn a_broken_hop_of_the_admins_override_under_a_minor_update_names_a_way_out() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.ranges = vec![0, 2];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::Refuse(1, 2),
            Event::StartMinor,
            Event::UnavailableBundle(1, 1),
            Event::EditOverride(1, 2),
            Event::AddBundle(1, 1),
            Event::CompleteUpdate,
            Event::EditCatalog(1, 1),
        ],
    );
    let world = result.unwrap_or_else(|e| panic!("{e}"));
    // The way out the fix made the table take (review of session 23, M7: with the budget
    // raised, the old table's path passed too).
    assert!(
        world
            .ways_taken
            .iter()
            .any(|(i, w)| *i == 1 && matches!(w, way_out::WayOut::ExcludeAndDelete(_))),
        "{:?}",
        world.ways_taken
    );
}

/// Found by a random soak of the review of session 22 (seed 7077077; a fault of the model):
/// alpha's status is lost after its first install, the recovering re-apply fails (the status
/// written then records no bundle and no move), the next re-apply succeeds and the manager dies
/// before its status write. The world counted the move from that unrecorded re-apply, 1,070 s
/// before the check; POM, which can know of no apply before the one it records, counted it
/// from the re-apply that recorded it (the clock-skew allowance plays no part: the model's
/// manager watched every recorded instant). The world's own rule, that the re-apply recording a
/// PO restored without its status starts its move's clock again, held only while no status at
/// all was written; it now holds while no status written records a bundle or a move.
#[test]
fn a_move_recovered_across_a_lost_status_and_a_crash_is_degraded_past_its_deadline() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::LoseStatus(0),
            Event::FailNextApply(0),
            Event::Reconcile(0),
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::Wait(700),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by a random soak (seed 8088088; session 23): beta's first install of 1.0.0 never
/// rolls out; past its deadline the admin's `versionRange` `>=1.0.1` excludes it, so its
/// replacement, a first install of 2.0.1, is recorded as intent (over the hop of 1.0.0, whose
/// start was then lost) and its apply fails; a minor update to 4.19, which 2.0.1 cannot run on,
/// drops that intent, and 1.0.0, still unsettled, was recorded as a first install started
/// then: 969 s after 1.0.0 applied the PO was not Degraded. POM's fault: the replacement's
/// intent now keeps the move it replaces, restored when it is dropped (`activeHop.replaces`;
/// `status_table::a_first_install_keeps_its_start_under_replacements`).
#[test]
fn an_unsettled_first_install_whose_replacement_never_applied_keeps_its_deadline() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[6] = Some(16);
    setup.max_ocp[7] = Some(18);
    setup.ranges = vec![0, 1];
    setup.extra[0] = true;
    let result = run(
        &setup,
        &[
            Event::StartPatch,
            Event::FlipPriorities,
            Event::Reconcile(1),
            Event::Wait(700),
            Event::Retarget,
            Event::CompleteUpdate,
            Event::StartMinor,
            Event::FailNextApply(1),
            Event::RestartManager,
            Event::CompleteUpdate,
            Event::EditVersionRange(1, 3),
            Event::Reconcile(1),
            Event::Reconcile(1),
            Event::StartMinor,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session; a fault of the model): the
/// manager dies between the apply of alpha's first install (2.0.1) and its status write; a
/// minor update starts that 2.0.1 cannot run on, so 2.0.0 is installed in its place (a first
/// install by every record), and the cluster proxy changes. The world took the install as a
/// move from 2.0.1 and held the configuration change behind it; POM rightly replaces the
/// configuration of an unsettled first install (there is no way back to 2.0.1).
#[test]
fn a_configuration_change_replaces_that_of_a_first_install_in_place_of_a_dropped_one() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[7] = Some(16);
    setup.ranges = vec![3, 0];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::Reconcile(0),
            Event::StartMinor,
            Event::Reconcile(0),
            Event::SetProxy(true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session; a fault of the model's way-out
/// table): beta's first install runs with a configuration that never becomes Available, and
/// the admin's next one is refused. The admin's "change spec.config back" went to what the
/// status records applied, the configuration that never became Available; it goes back to what
/// last ran settled (here none).
#[test]
fn the_revert_of_a_first_install_configuration_goes_to_one_that_ran() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::EditConfig(1, 1),
            Event::UnavailableConfig(1, 1),
            Event::RefuseConfig(1, 2),
            Event::Reconcile(1),
            Event::EditConfig(1, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session; a fault of the model, as old as
/// the pause): the manager dies between the apply of a change of the configuration of alpha's
/// unsettled first install and its status write, and the admin pauses the PO. Paused, POM
/// re-applies nothing, so its status records the change in flight (its intent) and the
/// configuration before it as applied: it cannot know the change applied. The world asked
/// for the change recorded as applied.
#[test]
fn a_configuration_applied_before_a_crash_is_not_recorded_as_replaced_while_paused() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::EditConfig(0, 1),
            Event::Reconcile(0),
            Event::CrashAfterNextApply(0),
            Event::EditConfig(0, 0),
            Event::Reconcile(0),
            Event::Pause(0, true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// The same crash and pause after a configuration change of a settled install (it failed on
/// main before this session's changes too).
#[test]
fn a_configuration_change_applied_before_a_crash_while_paused() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let result = run(
        &setup,
        &[
            Event::EditConfig(0, 1),
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::CrashAfterNextApply(0),
            Event::EditConfig(0, 0),
            Event::Reconcile(0),
            Event::Pause(0, true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session): beta's first install has not
/// settled past its progress deadline when the admin changes `spec.config`; the manager dies
/// after recording the change. The change's intent restarted the move's clock, so the install,
/// unsettled for longer than the deadline, was not Degraded. A change that replaces an
/// unsettled move of what runs keeps that move's start.
#[test]
fn a_configuration_change_does_not_restart_an_unsettled_installs_deadline() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::EditConfig(1, 1),
            Event::Wait(700),
            Event::CrashDuringNextMove(1),
            Event::Reconcile(1),
            Event::EditConfig(1, 0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session, once review M5's fix stopped
/// reporting an abandoned move's stale refusal): alpha's hop to 1.2.0 is refused, the admin
/// abandons it, and the re-apply of the 1.1.0 that runs is refused for good too. Upgradeable
/// said to "wait for" the abandoned move; it names the refusal of what runs.
#[test]
fn a_refused_reapply_beside_an_abandoned_move_is_not_told_to_wait() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::EditVersionRange(0, 0),
            Event::Operator(0, Says::True),
            Event::StartMinor,
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::EditConfig(0, 1),
            Event::RefusePartly(0, 2),
            Event::RefuseConfig(0, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of this session; a fault of the model, as old as
/// issue 34 item 1's rule): the manager dies between the apply of a configuration change and
/// its status write, and the admin's next change (refused) replaces it before a reconcile
/// re-applies it. The status cannot know that the lost change runs; the world asked it to.
#[test]
fn a_configuration_applied_before_a_crash_and_replaced_is_unknown_to_the_status() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    let result = run(
        &setup,
        &[
            Event::EditConfig(1, 1),
            Event::Reconcile(1),
            Event::EditConfig(1, 0),
            Event::CrashAfterNextApply(1),
            Event::Reconcile(1),
            Event::RefuseConfig(1, 2),
            Event::EditConfig(1, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (a random-seed run of session 21): beta runs 1.2.0 with a
/// configuration that, rolled out again, never becomes Available; the admin's
/// `steadyStateVersionRange` moves it to 1.1.0, whose rollout with that configuration never
/// finishes. Past the deadline the status named no way out that works: a fix of `spec.config`
/// waited behind the unsettled hop, and `abandon:` goes back with the same configuration. A
/// newer configuration now replaces the one an applied, unsettled hop runs with, and Degraded
/// names it.
#[test]
fn a_hop_whose_configuration_never_becomes_available_names_a_way_out() {
    let setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Rollout]);
    let result = run(
        &setup,
        &[
            Event::EditConfig(1, 2),
            Event::Reconcile(1),
            Event::RolloutFinishes(1),
            Event::UnavailableConfig(1, 2),
            Event::Reconcile(0),
            Event::EditOverride(1, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property once its world had bundles whose Deployments never become Available
/// (issue 34, session 22): alpha's first install (1.1.0, from catalog `extra`, which wins) never
/// rolls out. Past the deadline Degraded named a fix of the pods, a configuration, and deleting
/// the PlatformOperator, which installs the same bundle again; the steady pin held the broken
/// install even once excluded. Degraded now names the exclusion, and a first install that
/// applied, has not settled and no longer qualifies is replaced by what resolves then.
#[test]
fn a_first_install_that_never_becomes_available_is_replaced_once_excluded() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 1];
    setup.extra[2] = true;
    setup.extra_wins = true;
    let world =
        run(&setup, &[Event::UnavailableBundle(0, 2)]).unwrap_or_else(|why| panic!("{why}"));
    let sim = &world.pos[0];
    assert!(sim.settled);
    assert_ne!(sim.running.map(|r| VERSIONS[r]), Some("1.1.0"));
    // Out by the exclusion the status named, not by deleting the PlatformOperator.
    assert!(
        sim.po.metadata.generation > Some(1),
        "{:?}",
        sim.po.metadata
    );
}

/// Found by the property (the default run, once operators that do not run stopped reporting):
/// alpha (`upgradeGate: OperatorCondition`) installs 2.0.1 with a configuration its
/// Deployments never become Available with. The admin's fix of `spec.config` is held by the
/// operator's gate, which the operator, not running, never lifts; the held change was said
/// nowhere while the install was unsettled (Progressing said only what the rollout waits
/// for), and the excluded install's replacement was recorded as a hop from it, so `abandon:`
/// named a way back to the excluded bundle. Progressing now says the held change with its
/// overrides, and the replacement stays the first install.
#[test]
fn a_held_configuration_of_an_unsettled_install_names_its_override() {
    let setup = plain_setup([UpgradeGate::OperatorCondition, UpgradeGate::Auto]);
    let mut setup = setup;
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[Event::UnavailableConfig(0, 2), Event::EditConfig(0, 2)],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (the default run, once operators that do not run stopped reporting):
/// the manager dies after applying alpha's first install (2.0.1), which then leaves the
/// catalog; the admin deletes its OperatorCondition, sets a configuration alpha never becomes
/// Available with, and a policy engine refuses 2.0.0's Deployment. Each fault names its way out
/// (add 2.0.1 back, exclude it, fix what refuses 2.0.0, change `spec.config` back), and the
/// last, held by the gate of an operator that cannot report, names its override: five in all.
#[test]
fn four_faults_and_a_silent_operator_each_name_their_way_out() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::RemoveBundle(0, 7),
            Event::Operator(0, Says::Deleted),
            Event::EditConfig(0, 1),
            Event::UnavailableConfig(0, 1),
            Event::RefusePartly(0, 6),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (the default run, once a newer configuration could replace the one
/// an unsettled hop runs with).
#[test]
fn a_configuration_change_over_a_replaced_install_waits_for_the_operators_word() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::OlderDuplicate(0, false),
            Event::Operator(0, Says::Deleted),
            Event::EditConfig(0, 1),
            Event::EditVersionRange(0, 1),
            Event::UnavailableConfig(0, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (the default run, once bundles could never become Available): alpha's
/// first install (1.0.0, from catalog `extra`) runs with a configuration it never becomes
/// Available with, and 1.2.0, its next choice, never becomes Available at all. The admin
/// excluded 1.0.0 for its configuration's fault and had no exclusion left for 1.2.0; the way-out
/// table now undoes the configuration before giving a bundle up.
#[test]
fn a_broken_configuration_and_a_broken_bundle_each_take_their_own_way_out() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![1, 0];
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::AddBundle(1, 0),
            Event::UnavailableBundle(0, 4),
            Event::EditConfig(0, 1),
            Event::Reconcile(0),
            Event::UnavailableConfig(0, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (the default run, once bundles could never become Available): beta's
/// first install (1.1.0, 1.2.0 gone from the catalog) never became Available, nor did 1.0.1,
/// what resolved once 1.1.0 was excluded, and the way-out table took one exclusion only (now
/// each bundle once). The world now has one broken bundle per PO (with several, no bundle the
/// PO may use need run at all): here 1.0.1, so the second event is ignored and 1.1.0 installs.
#[test]
fn two_bundles_that_never_become_available_are_excluded_in_turn() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 1];
    let world = run(
        &setup,
        &[
            Event::UnavailableBundle(1, 1),
            Event::RemoveBundle(0, 4),
            Event::UnavailableBundle(1, 2),
        ],
    )
    .unwrap_or_else(|why| panic!("{why}"));
    assert_eq!(world.pos[1].running.map(|r| VERSIONS[r]), Some("1.1.0"));
}

/// Found by the property (a fault of the model): beta (`upgradeGate: OperatorCondition`)
/// installs 1.2.1, which never becomes Available; the admin's configuration, which a policy
/// engine would refuse, is held by the gate of the operator that cannot report, so it was never
/// applied and nothing refused it. The world took it as refused for good and asked Upgradeable
/// not to say "wait for it"; what POM never tried is no refusal it can report.
#[test]
fn a_held_configuration_the_cluster_would_refuse_is_not_a_refusal() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::OperatorCondition]);
    setup.ranges = vec![0, 1];
    setup.extra[5] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::UnavailableBundle(1, 5),
            Event::EditConfig(1, 2),
            Event::RefuseConfig(1, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the property (the default run, once bundles could never become Available): beta
/// hops from 1.0.1 to 1.1.0 in a minor update to 4.17 and 1.1.0 never becomes Available; the
/// way back (1.0.1, `maxOpenShiftVersion` 4.16) cannot run on 4.17 and nothing newer is
/// admitted (`versionRange` `<1.2.0`). The status named the refused `abandon:` and `skip:`
/// (which moves to nothing here); Degraded now names excluding 1.1.0 and deleting the
/// PlatformOperator, which installs 1.0.0.
#[test]
fn a_broken_hop_whose_way_back_cannot_run_names_a_way_out() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[1] = Some(16);
    setup.ranges = vec![0, 2];
    setup.extra[1] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::UnavailableBundle(1, 2),
            Event::Reconcile(1),
            Event::StartMinor,
            Event::EditApproval(1, true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the random soak (seed 7340213; a fault of the model, as old as the crash): the
/// manager dies after applying a move and before its status write, and the resumed apply then
/// fails. The status records what ran before (it cannot know the lost apply ran); the world
/// asked it to record the move's bundle. The same holds for a first install replaced after a
/// minor update (`StartMinor`: 1.1.0 cannot run on 4.17), the soak's own sequence.
#[test]
fn a_move_applied_before_a_crash_and_then_refused_is_unknown_to_the_status() {
    let setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::AddBundle(0, 5),
            Event::StartPatch,
            Event::CrashAfterNextApply(0),
            Event::Reconcile(0),
            Event::FailNextApply(0),
            Event::Reconcile(0),
            Event::Reconcile(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.min_kube[1] = Some((29, 4));
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::CrashAfterNextApply(0),
            Event::StartMinor,
            Event::Reconcile(0),
            Event::FailNextApply(0),
            Event::Reconcile(0),
            Event::Reconcile(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the random soak (seed 271828; a fault of the model's way-out table): beta's hop
/// from 1.1.0 to 1.1.1 (catalog `extra`) never becomes Available, and 1.1.0 left the catalog.
/// `abandon:` is refused naming "add a catalog that offers it" (the bundle that ran before),
/// which the table did not perform; served again, the way back is taken.
#[test]
fn a_broken_hop_whose_way_back_left_the_catalog_is_abandoned_once_it_is_back() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    setup.extra[3] = true;
    let result = run(
        &setup,
        &[
            Event::UnavailableBundle(1, 3),
            Event::EditOverride(1, 1),
            Event::Reconcile(1),
            Event::EditCatalog(0, 0),
            Event::RemoveBundle(0, 2),
            Event::OlderDuplicate(1, true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the debug soak (seed 4242; a fault of the model, not of POM): alpha's first install
/// waits for its operator's word under `OperatorCondition`, which never comes; the admin edits
/// the gate to `Auto`. The world counted Auto's first-report window from the rollout seen under
/// the old gate, so it took the move as settled at once, and asked for Degraded when the
/// Deployment then regressed, while POM rightly listened its window first (the window starts
/// once nothing else holds the move) and reported the install still rolling out.
#[test]
fn a_gate_edited_to_auto_listens_its_window_before_the_move_settles() {
    let mut setup = plain_setup([UpgradeGate::OperatorCondition, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    setup.extra[6] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::OlderDuplicate(1, false),
            Event::EditVersionRange(0, 3),
            Event::Reconcile(0),
            Event::Refuse(0, 0),
            Event::StartPatch,
            Event::OlderDuplicate(0, false),
            Event::RequestMinor,
            Event::EditVersionRange(0, 3),
            Event::OlderDuplicate(1, false),
            Event::Reconcile(0),
            Event::RefusePartly(0, 0),
            Event::Reconcile(0),
            Event::EditGate(0, UpgradeGate::Auto),
            Event::EditChannel(0, 2),
            Event::EditOverride(0, 0),
            Event::OlderDuplicate(0, false),
            Event::EditGate(1, UpgradeGate::Auto),
            Event::Reconcile(0),
            Event::Regress(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261207; the model's budget, not POM): an
/// older PO manages alpha's package, the cluster refuses alpha's configuration, the admin's
/// next configuration and bundle 1.0.0 never run. The admin deletes the older PO, lifts the
/// refusal, reverts the configuration, excludes 1.0.1, overrides the configuration check and
/// excludes 1.0.0, each as the status names it; the replacement is then held by the gate of
/// 1.0.0's operator, which never ran, and the status names its override: the seventh way out,
/// one past the budget of six.
#[test]
fn five_faults_under_a_silent_gate_each_name_their_way_out() {
    let mut setup = plain_setup([UpgradeGate::OperatorCondition, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.ranges = vec![0, 0];
    setup.extra[0] = true;
    setup.extra[1] = true;
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::OlderDuplicate(0, true),
            Event::RefuseConfig(0, 2),
            Event::EditConfig(0, 2),
            Event::UnavailableBundle(0, 0),
            Event::UnavailableConfig(0, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261207, after 16,125 cases): beta settles at
/// its patch pin, a catalog's priority flips so that a hop is owed, and an older PO for beta's
/// package appears: beta loses it (`DuplicatePackage`) and is no longer judged. The liveness
/// admin deletes the older PO; the aggregate computed before beta's next reconcile read beta's
/// stale "settled at the pin" and reported the release while the hop was owed. Two faults: the
/// model's aggregate left the older PO out (the aggregator lists every PO), and POM counted a
/// PO that runs a package it no longer manages as at its pin (now its pin is judged for no
/// cluster version: `PoDecision::runs_unjudged`; `aggregate_table` row "a duplicate PO that
/// still runs its bundle withholds the release").
#[test]
fn a_duplicate_that_still_runs_its_bundle_withholds_the_release() {
    let mut setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Rollout]);
    setup.ranges = vec![0, 0];
    setup.extra[5] = true;
    let result = run(
        &setup,
        &[
            Event::EditVersionRange(1, 1),
            Event::Reconcile(1),
            Event::StartPatch,
            Event::RolloutFinishes(1),
            Event::Reconcile(1),
            Event::FlipPriorities,
            Event::OlderDuplicate(1, true),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// The release soak of session 23 found the same as seed 8088088 another way (seed 20261207,
/// after 22,141 cases): beta's first install of 2.0.1 applies, the admin's channel edit
/// replaces it by 1.2.0, whose apply the cluster refuses, and 2.0.1, still what runs, was
/// recorded again as a first install started then: 601 s after its apply it was not Degraded.
#[test]
fn a_first_install_whose_refused_replacement_is_dropped_keeps_its_deadline() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::FailNextApply(1),
            Event::Approve(0),
            Event::Reconcile(0),
            Event::CatalogDown(0),
            Event::RefusePartly(0, 0),
            Event::EditApproval(0, false),
            Event::EditChannel(1, 1),
            Event::RefusePartly(0, 0),
            Event::Reconcile(0),
            Event::Operator(0, Says::True),
            Event::Approve(0),
            Event::Reconcile(1),
            Event::RestartManager,
            Event::Reconcile(0),
            Event::Reconcile(0),
            Event::EditConfig(0, 0),
            Event::StartPatch,
            Event::Reconcile(0),
            Event::CrashAfterNextApply(0),
            Event::CrashDuringNextMove(0),
            Event::Reconcile(0),
            Event::OlderDuplicate(0, false),
            Event::Reconcile(0),
            Event::StartPatch,
            Event::Reconcile(0),
            Event::EditVersionRange(1, 2),
            Event::EditOverride(0, 0),
            Event::EditChannel(0, 0),
            Event::OlderDuplicate(0, false),
            Event::RolloutFinishes(0),
            Event::EditOverride(0, 0),
            Event::EditChannel(0, 0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by a debug soak of session 23 (seed 777): beta's first install of 2.0.1 applies; the
/// admin's `steadyStateVersionRange` moves it to 1.1.0, which never becomes available; past
/// the deadline the admin abandons it, and the way back to 2.0.1 is recorded as intent and
/// refused (its CRD change is unsafe); the admin excludes 2.0.1, the intent is dropped and
/// 1.1.0, still what runs, was recorded again with a fresh start: 2,419 s after its apply the
/// PO was not Degraded: the intent overwrote the record of the move of what runs (its start
/// and where it came from), so what runs was recorded again as a hop to itself with a fresh
/// start. The intent now keeps the move it replaces (`activeHop.replaces`), restored when the
/// intent is dropped.
#[test]
fn a_hop_whose_refused_way_back_is_dropped_keeps_its_deadline() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::UnsafeCrd(1, 7),
            Event::Reconcile(1),
            Event::UnavailableBundle(1, 2),
            Event::EditOverride(1, 1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261207, after 32,585 cases), on the code
/// before `activeHop.replaces`: beta's first install of 2.0.1 never becomes available; a patch
/// update ends and another starts; 2,419 s after its apply the PO was not Degraded (a move
/// recorded over it and dropped restarted its clock). Passes with `activeHop.replaces`.
#[test]
fn a_broken_first_install_across_two_patch_updates_is_degraded_past_its_deadline() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.min_kube[7] = Some((29, 4));
    setup.ranges = vec![0, 3];
    let result = run(
        &setup,
        &[
            Event::UnsafeCrd(1, 6),
            Event::UnavailableBundle(1, 7),
            Event::Reconcile(1),
            Event::StartPatch,
            Event::CompleteUpdate,
            Event::StartPatch,
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261207, after 42,353 cases; a fault of the
/// model): beta's first install of 2.0.1 applies and the manager dies before its status write;
/// the admin's `versionRange` excludes 2.0.1, so 1.2.0 is recorded to replace it, and the
/// cluster refuses part of it; 1.2.0 leaves the catalog (the recorded replacement waits) and
/// comes back, and POM retries the move it records. The world, which had forgotten the intent
/// while it did not qualify, took the retry for a new move over an unsettled one.
#[test]
fn a_recorded_replacement_retried_once_its_bundle_is_back_is_that_move() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    setup.extra_wins = true;
    let result = run(
        &setup,
        &[
            Event::RefusePartly(1, 4),
            Event::CrashAfterNextApply(1),
            Event::RemoveBundle(0, 0),
            Event::Reconcile(1),
            Event::EditVersionRange(1, 1),
            Event::Reconcile(1),
            Event::Reconcile(1),
            Event::RemoveBundle(0, 4),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261207, after 45,225 cases): beta's first
/// install of 2.0.1 has not settled when the cluster rolls back to a Kubernetes below its
/// `minKubeVersion`; the admin's `steadyStateVersionRange` names a bundle no catalog serves.
/// The unsettled install no longer qualifies and nothing resolved to replace it, so it was
/// kept with the verdict of a bundle that qualifies: when it settled, `Upgradeable=True` while
/// the rollback's pivot down to 2.0.0 was owed. With nothing to replace it, it is now judged
/// as what runs (`decide::replace_first_install` returns none).
#[test]
fn a_broken_first_install_with_no_replacement_is_judged_as_what_runs() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.min_kube[7] = Some((29, 4));
    setup.ranges = vec![0, 0];
    setup.extra[6] = true;
    setup.extra[7] = true;
    let result = run(
        &setup,
        &[
            Event::StartPatch,
            Event::CompleteUpdate,
            Event::Reconcile(1),
            Event::RollBack,
            Event::RemoveBundle(0, 1),
            Event::EditOverride(1, 2),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261208, after 49,381 cases), open: beta's
/// status is lost after its install rolled out; its operator says `Upgradeable=True`, and the
/// reconcile that restores the status re-applies what runs and records the move settled (§7
/// holds by the report it was given: rolled out, the operator's word). The world takes a
/// restoring re-apply for a new apply and judges the move only at the next reconcile, by when
/// the operator's OperatorCondition was deleted, and calls POM's settle early. Letting the
/// world latch at the restoring re-apply broke another sequence (a restart between the loss
/// and the restore, seed 20261208 after 388 cases), so the model's rule for a restore is left
/// as it was and this case open (see docs/decisions.md, session 23).
#[test]
#[ignore = "open: a restored move settled in the reconcile that records it (seed 20261208)"]
fn a_restored_move_that_holds_section_7_settles_when_it_is_recorded() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::Reconcile(1),
            Event::LoseStatus(1),
            Event::RolloutFinishes(1),
            Event::Operator(1, Says::True),
            Event::Reconcile(1),
            Event::Operator(1, Says::Deleted),
            Event::OverrideGate(1),
            Event::Reconcile(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261209, after 363,098 cases; a fault of
/// the model): beta's first install applies and the manager dies before its status write; the
/// rollout finishes; the reconcile that resumes the install records it and checks its objects
/// again, and only the next one finds nothing else holding it and opens Auto's window. The
/// world opened the window at the resuming reconcile, took the move as settled two minutes
/// before POM could, and asked for Degraded when the Deployment then regressed.
#[test]
fn a_resumed_install_opens_its_auto_window_after_the_reconcile_that_records_it() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::CrashAfterNextApply(1),
            Event::Reconcile(1),
            Event::RolloutFinishes(1),
            Event::Reconcile(1),
            Event::Reconcile(1),
            Event::Wait(150),
            Event::Reconcile(1),
            Event::Regress(1),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261209, after 450,524 cases; the model's
/// budget): under a minor update alpha's first install of 1.0.1 is excluded, the PO deleted
/// and created again, then 1.0.0, which never becomes available, excluded too: nothing else
/// runs on the new minor, so POM keeps 1.0.0 and Degraded names the deletion of the PO, which
/// the liveness admin had taken once already. Deleting again after a new exclusion is a way
/// out of its own; after it nothing installs, which is right.
#[test]
fn every_bundle_excluded_in_turn_under_a_minor_update_ends_in_a_second_deletion() {
    let mut setup = plain_setup([UpgradeGate::Auto, UpgradeGate::Auto]);
    setup.max_ocp[2] = Some(16);
    setup.ranges = vec![2, 0];
    let result = run(
        &setup,
        &[
            Event::UnavailableBundle(0, 0),
            Event::StartMinor,
            Event::Reconcile(0),
            Event::RolloutFinishes(0),
            Event::Operator(0, Says::True),
            Event::LoseStatus(0),
            Event::Reconcile(0),
            Event::Operator(0, Says::Deleted),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}

/// Found by the release soak of session 23 (seed 20261210, after 26,720 cases), open, not
/// looked into; failing as well on the code the session started from (fb46954): alpha's
/// configuration change is refused, its rollout finishes, the admin reverts the configuration
/// and the Deployment then regresses: the world takes the operator as settled and asks for
/// Degraded, which POM does not report.
#[test]
#[ignore = "open: a regression after a refused configuration's revert (seed 20261210)"]
fn a_regression_after_a_refused_configurations_revert_is_degraded() {
    let mut setup = plain_setup([UpgradeGate::Rollout, UpgradeGate::Auto]);
    setup.ranges = vec![0, 0];
    let result = run(
        &setup,
        &[
            Event::Reconcile(0),
            Event::RefuseConfig(0, 2),
            Event::EditConfig(0, 2),
            Event::RolloutFinishes(0),
            Event::Reconcile(0),
            Event::Reconcile(0),
            Event::EditConfig(0, 0),
            Event::Regress(0),
        ],
    );
    assert!(result.is_ok(), "{}", result.err().unwrap_or_default());
}
