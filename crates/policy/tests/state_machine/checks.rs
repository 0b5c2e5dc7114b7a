//! The invariants, each judged from the simulated world (see the test's header).

use pom_api::conditions::{ConditionStatus, types};
use pom_api::platform_operator::{
    AppliedConfig, InventoryObject, PlatformOperatorStatus, PreUpdateHops, UpgradeApproval,
};
use pom_policy::Action;
use pom_policy::status::ActOutcome;
use pom_resolver::cluster::PhaseKind;

use super::oracle::{
    self, admits, channel_of, compatible_with_next_minor, gate_requires_report, in_channel,
    is_edge, runs_on, version, visible_phase,
};
use super::world::{
    CONFIG_CHANGE_OVERRIDE, PACKAGES, Read, Says, SimPo, UNSETTLED_MOVE, VERSIONS, World,
    bundle_name,
};

fn condition_is(status: &PlatformOperatorStatus, type_: &str, value: ConditionStatus) -> bool {
    status
        .conditions
        .iter()
        .any(|c| c.type_ == type_ && c.status == value.as_str())
}

fn index_of(i: usize, name: &str) -> usize {
    (0..VERSIONS.len())
        .find(|v| bundle_name(PACKAGES[i], *v) == name)
        .unwrap()
}

fn describe(world: &World, sim: &SimPo) -> String {
    format!(
        "world: runs {:?}, rolled out {}, regressed {}, operator says {:?} (seen reporting: {}), gate {:?}, settled {}, phase {:?} {} -> {}{}",
        sim.running.map(|r| VERSIONS[r]),
        sim.rolled_out,
        sim.regressed,
        sim.says,
        sim.reported_seen,
        sim.po.spec.upgrade_gate,
        sim.settled,
        world.phase.kind,
        world.phase.current,
        world.phase.target,
        if world.cv_unreadable {
            " (ClusterVersion unreadable)"
        } else {
            ""
        }
    )
}

/// Invariants 1–5 on a decision to move.
pub fn decision(
    world: &World,
    i: usize,
    decision: &pom_policy::PoDecision,
    owed: Option<usize>,
) -> Result<(), String> {
    let sim = &world.pos[i];
    let spec = &sim.po.spec;
    // 14. Two POs for one package: the older wins, the other writes nothing (§6).
    if world.older[i].is_some() && matches!(decision.action, Action::Move(_) | Action::Keep) {
        return Err(format!(
            "{} manages {}'s package, which is older, yet the decision writes: {:?}",
            super::world::older_name(i),
            PACKAGES[i],
            decision.action
        ));
    }
    // 12. A paused PO is neither moved nor re-applied.
    if spec.paused && matches!(decision.action, Action::Move(_) | Action::Keep) {
        return Err(format!(
            "paused, yet the decision writes: {:?}; {}",
            decision.action,
            describe(world, sim)
        ));
    }
    if matches!(decision.action, Action::Keep) {
        return config_change(world, i, decision);
    }
    let Action::Move(target) = &decision.action else {
        return Ok(());
    };
    let to = index_of(i, &target.name);
    let tv = version(to);
    let phase = visible_phase(world);
    let intended = sim.intent_at_crash.as_deref() == Some(target.name.as_str());
    // The admin's annotation on the unsettled move the status records (issue 25 item 2):
    // `abandon:<to>` moves back to what ran before, `skip:<to>` lets the next move start.
    let recorded = world
        .status(i)
        .and_then(|s| s.active_hop.as_ref())
        .filter(|h| !h.settled);
    let annotation = world.annotation(i, UNSETTLED_MOVE);
    let names_recorded = |verb: &str| {
        recorded.is_some_and(|h| annotation == Some(format!("{verb}:{}", h.to).as_str()))
    };
    let back = names_recorded("abandon")
        && recorded.and_then(|h| h.from.as_deref()) == Some(target.name.as_str());
    let skipped = names_recorded("skip");
    // A move recorded as intent before a crash is finished (nothing of it skipped), or the
    // recorded move whose apply the manager could not record (it died between apply and
    // status write) is re-applied over what already runs: the edge, pin, gate and approval
    // that chose it do not count again.
    // Likewise a retry of the move the status records as intent, never applied, after a
    // while it did not qualify (its bundle left the catalog and came back: found by the
    // release soak of session 23, seed 20261207): it is that move continued, not a new one.
    let retried = recorded.is_some_and(|h| h.to == target.name && h.rolled_out_at.is_none());
    let resume = intended
        || (sim.running == Some(to) && recorded.is_some_and(|h| h.to == target.name))
        || (retried && sim.running != Some(to) && recorded.is_some_and(|h| h.from.is_none()));
    let fail = |what: String| {
        Err(format!(
            "move to {}: {what}; {}",
            VERSIONS[to],
            describe(world, sim)
        ))
    };
    // 3. The admin's constraints and what the cluster can run hold for every move.
    if !in_channel(channel_of(sim), to) {
        return fail(format!("not in channel {}", channel_of(sim)));
    }
    if let Some(named) = &spec.package.catalog
        && &target.catalog != named
    {
        return fail(format!(
            "from catalog {}, the PO names {named}",
            target.catalog
        ));
    }
    let served = world
        .catalogs
        .iter()
        .find(|c| c.name == target.catalog)
        .is_some_and(|c| c.served[to]);
    if !served {
        return fail(format!("catalog {} does not serve it", target.catalog));
    }
    if let Some(range) = &spec.package.version_range
        && !admits(range, &tv)
    {
        return fail(format!("outside versionRange {range}"));
    }
    if !runs_on(world, to, phase) {
        return fail(format!(
            "maxOpenShiftVersion 4.{:?}, minKubeVersion {:?}: cannot run on {} (Kubernetes {})",
            world.max_ocp[to],
            world.min_kube[to],
            oracle::heads_to(&world.phase),
            world.kube
        ));
    }
    if back {
        // The way back is judged as any move (issue 34 item 2): what it goes to qualifies
        // (checked above), the running operator does not forbid it, and a bundle that
        // declares a maxOpenShiftVersion waits for a ClusterVersion that can be judged. The
        // annotation is the admin's approval of it, and its own edge.
        if sim.word() == Says::False {
            return fail("abandon: taken while the running operator says Upgradeable=False".into());
        }
        if phase.is_none() && world.max_ocp[to].is_some() {
            return fail(
                "abandon: taken while the ClusterVersion cannot be judged and the bundle declares a maxOpenShiftVersion"
                    .into(),
            );
        }
        return Ok(());
    }
    // 13. Under Manual approval, a move (the first install included) starts only to the
    // bundle the admin approved; a recorded move resumed after a crash was started before.
    if spec.upgrade_approval == UpgradeApproval::Manual
        && !resume
        && spec.approved_bundle.as_deref() != Some(target.name.as_str())
    {
        return fail(format!(
            "upgradeApproval Manual, approved {:?}",
            spec.approved_bundle
        ));
    }
    // A first install the status records, unsettled, that no longer qualifies (the admin's
    // versionRange or channel now excludes it, a way out its status names, or the cluster can
    // no longer run it): POM installs what resolves now in its place, over whatever of it was
    // applied (it cannot know); judged by the constraints above, not as a hop.
    let dropped_install = recorded.is_some_and(|h| {
        h.from.is_none()
            && (0..VERSIONS.len())
                .find(|b| bundle_name(PACKAGES[i], *b) == h.to)
                .is_some_and(|b| {
                    !runs_on(world, b, phase)
                        || !in_channel(channel_of(sim), b)
                        || spec
                            .package
                            .version_range
                            .as_deref()
                            .is_some_and(|r| !admits(r, &version(b)))
                })
    });
    if dropped_install && sim.running.is_some() {
        return Ok(());
    }
    let Some(running) = sim.running else {
        if let Some(over) = &spec.steady_state_version_range
            && !admits(over, &tv)
            && !resume
        {
            return fail(format!("install outside steadyStateVersionRange {over}"));
        }
        return Ok(());
    };
    if resume {
        // A move recorded as intent before a crash (between intent and apply, or between
        // apply and the status write: then it may already run) is finished.
        return Ok(());
    }
    if running == to {
        return fail("a move to what already runs".into());
    }
    let rv = version(running);
    // 1. One move at a time: the last one settled, by the world (or the admin skips it).
    if !sim.settled && !skipped {
        return fail(format!(
            "started while the move to {} has not settled",
            VERSIONS[running]
        ));
    }
    // 5. The operator's gate.
    if sim.word() == Says::False {
        return fail("the running operator says Upgradeable=False".into());
    }
    if gate_requires_report(sim) && sim.word() != Says::True {
        return fail("the gate asks the operator's Upgradeable=True, which it does not say".into());
    }
    let over = spec.steady_state_version_range.as_deref();
    let admin = over.is_some_and(|o| admits(o, &tv));
    // 4. Never a major automatically.
    if tv.major != rv.major && !admin {
        return fail("across a major without the admin's steadyStateVersionRange".into());
    }
    // 2 and 3. Along a catalog edge, inside the pin of the phase.
    let edge = is_edge(channel_of(sim), running, to);
    let kind = phase.map_or(PhaseKind::Steady, |p| p.kind);
    // A pre-update hop (issue 35 item 1): a minor update requested that what runs cannot
    // run on; newer, along an edge, in its major (it runs on the current version: checked
    // above); under `preUpdateHops: Offer` only to the bundle the admin approved.
    let pre_update = oracle::visible_request(world).is_some_and(|requested| {
        !oracle::runs_on_version(world, running, requested)
            && edge
            && tv > rv
            && tv.major == rv.major
    });
    if kind == PhaseKind::Steady
        && over.is_none()
        && pre_update
        && spec.pre_update_hops == PreUpdateHops::Offer
        && spec.approved_bundle.as_deref() != Some(target.name.as_str())
    {
        return fail("a pre-update hop under preUpdateHops: Offer, not approved".into());
    }
    let ok = match kind {
        PhaseKind::Steady => match over {
            None => pre_update,
            Some(o) => admits(o, &tv) && (if tv < rv { !admits(o, &rv) } else { edge }),
        },
        PhaseKind::PatchUpgrade | PhaseKind::MinorUpgrade => {
            edge && tv > rv
                && tv.major == rv.major
                && (kind == PhaseKind::MinorUpgrade || tv.minor == rv.minor)
                && over.is_none_or(|o| admits(o, &tv))
        }
        PhaseKind::Rollback => tv < rv && tv.major == rv.major && !runs_on(world, running, phase),
    };
    if !ok {
        return fail(format!(
            "not allowed from {} in phase {kind:?} (edge: {edge}, steadyStateVersionRange {over:?})",
            VERSIONS[running]
        ));
    }
    if owed != Some(to) {
        return fail(format!(
            "the world's resolution (§5) picks {:?}",
            owed.map(|o| VERSIONS[o])
        ));
    }
    Ok(())
}

/// A configuration change (issue 23 items 3-4, issue 34 item 1), by the oracle's own rule: a
/// re-apply that renders the running Deployments with another configuration than they run
/// with restarts the operator, so it is a move: it never starts while the running operator
/// says `Upgradeable=False` (or, where the gate asks its word, does not say True), unless the
/// admin's `config-change-override` names its digest; a change recorded as intent that never
/// applied is resumed as it was judged then. Whether what runs settled does not hold it (see
/// below); the bundle's next move waits for it (invariant 1).
fn config_change(world: &World, i: usize, decision: &pom_policy::PoDecision) -> Result<(), String> {
    let sim = &world.pos[i];
    let (Some(config), Some(_)) = (&decision.config, sim.running) else {
        return Ok(());
    };
    if config.digest == sim.config_runs.digest
        || sim.config_intent.as_deref() == Some(config.digest.as_str())
    {
        return Ok(());
    }
    // The admin's revert, to what the status records applied, of a change the status records
    // as never applied replaces it at once (issue 34 item 1), even when the change did apply
    // and the manager died before recording it.
    let status = world.status(i);
    let recorded_applied = status
        .and_then(|s| s.applied_config.as_ref())
        .map_or_else(|| AppliedConfig::none().digest, |c| c.digest.clone());
    let unapplied_change = status
        .and_then(|s| s.active_hop.as_ref())
        .and_then(|h| h.config.as_ref().filter(|_| !h.settled))
        .is_some_and(|c| *c != recorded_applied);
    if unapplied_change && config.digest == recorded_applied {
        return Ok(());
    }
    // The re-apply that recovers a PO restored without its status renders the restored
    // spec: what the Deployments were configured with was lost with the status, and the spec
    // is the only record of it left (rendering "none" would drop it).
    if sim.status_lost && world.status(i).is_none_or(|s| s.installed_bundle.is_none()) {
        if config.digest == world.desired_config(i).digest {
            return Ok(());
        }
        return Err(format!(
            "the re-apply that recovers {} (restored without its status) renders configuration {}, not the {} its spec asks for; {}",
            PACKAGES[i],
            config.digest,
            world.desired_config(i).digest,
            describe(world, sim)
        ));
    }
    let fail = |what: &str| {
        Err(format!(
            "a configuration change to {} starts {what}; {}",
            config.digest,
            describe(world, sim)
        ))
    };
    // The oracle's rule for what runs unsettled: a change restarts the operator that runs, and
    // until the move that put it there settled (by the world) nothing about that operator was
    // vouched for, so a newer configuration may replace the one it runs with (how else would
    // the admin fix a configuration it never becomes Available with?). What it judges is the
    // running operator's word, settled or not.
    if world.annotation(i, CONFIG_CHANGE_OVERRIDE) == Some(config.digest.as_str()) {
        return Ok(());
    }
    if sim.word() == Says::False {
        return fail("while the running operator says Upgradeable=False");
    }
    if gate_requires_report(sim) && sim.word() != Says::True {
        return fail("while the gate asks the operator's Upgradeable=True, which it does not say");
    }
    Ok(())
}

/// Why, by the world after this reconcile, the PO must not be upgradeable (§8.3).
pub fn blockers(world: &World, i: usize, owed: Option<usize>, applied: bool) -> Vec<String> {
    let sim = &world.pos[i];
    // A partial first install in this model writes no Deployment (it is what is refused): its
    // ConfigMap and ServiceAccount run nothing, so they block nothing (its inventory lists
    // them, so deleting the PO removes them).
    let Some(running) = sim.running else {
        return Vec::new();
    };
    let mut why = Vec::new();
    if !sim.settled {
        why.push(format!("the move to {} has not settled", VERSIONS[running]));
    }
    if let Some(owed) = owed {
        why.push(format!("a move to {} is owed", VERSIONS[owed]));
    }
    if sim.word() == Says::False {
        why.push("the operator says Upgradeable=False".into());
    }
    if gate_requires_report(sim) && sim.word() != Says::True {
        why.push(format!(
            "the gate asks the operator's word, which is {:?}",
            sim.says
        ));
    }
    if world.catalog_unavailable(i) {
        why.push("a catalog is unavailable".into());
    }
    if world.cv_unreadable {
        why.push("the ClusterVersion is unreadable".into());
    }
    if !compatible_with_next_minor(world, running) {
        why.push(format!(
            "{} cannot run on the next minor",
            VERSIONS[running]
        ));
    }
    if sim.regressed && applied {
        why.push("its Deployment is not available".into());
    }
    if sim.po.spec.paused {
        why.push("the PO is paused: nothing is moved, repaired or checked".into());
    }
    if world.older[i].is_some() {
        why.push("an older PO manages its package: what runs here is not judged".into());
    }
    why
}

/// The status a reconcile wrote, against the world.
pub fn status(
    world: &World,
    i: usize,
    new: &PlatformOperatorStatus,
    outcome: &ActOutcome,
    read: &Read,
) -> Result<(), String> {
    let sim = &world.pos[i];
    let running = sim.running.map(|r| bundle_name(PACKAGES[i], r));
    let installed = new.installed_bundle.as_ref().map(|b| b.name.clone());
    let fail = |what: String| Err(format!("{what}; {}: {new:#?}", describe(world, sim)));
    // The loser of a duplicate says which PO manages its package.
    if world.older[i].is_some()
        && !new.conditions.iter().any(|c| {
            c.reason == "DuplicatePackage" && c.message.contains(&super::world::older_name(i))
        })
    {
        return fail(format!(
            "{} is older and manages the package; no condition says so",
            super::world::older_name(i)
        ));
    }
    // The status records what runs, unless what runs was applied by an apply whose status
    // write a crash lost and no apply was recorded since (a resumed apply that then failed):
    // the status cannot know it ran (found by the random soak, seed 7340213; as old as the
    // crash: `a_move_applied_before_a_crash_and_then_refused_is_unknown_to_the_status`).
    if installed.is_some() && installed != running && !sim.config_unrecorded {
        return fail(format!(
            "status records {installed:?} installed, {running:?} runs"
        ));
    }
    if running.is_some() && installed.is_none() && matches!(outcome, ActOutcome::Applied(_)) {
        return fail("applied, yet the status records nothing installed".into());
    }
    // A move settles only when the world says it did (§7).
    if let Some(hop) = &new.active_hop
        && hop.settled
        && installed.as_deref() == Some(hop.to.as_str())
        && !sim.settled
    {
        return fail(format!("the move to {} is recorded settled", hop.to));
    }
    // The status records the configuration the Deployments run with, never one that did not
    // apply (issue 34 item 1).
    // A change recorded as intent whose apply a crash left unrecorded is what runs: the status
    // cannot know it applied until a reconcile re-applies it (a paused PO does not), and it
    // records it in flight meanwhile (found by the random soak: a crash, then a pause).
    let in_flight_runs = new
        .active_hop
        .as_ref()
        .filter(|h| !h.settled)
        .and_then(|h| h.config.as_ref())
        == Some(&sim.config_runs.digest);
    // Likewise any configuration an apply wrote whose status write a crash lost, until an apply
    // is recorded again (a newer change may replace it first: found by the random soak).
    if let Some(applied) = &new.applied_config
        && sim.running.is_some()
        && applied.digest != sim.config_runs.digest
        && !in_flight_runs
        && !sim.config_unrecorded
    {
        return fail(format!(
            "status records configuration {} applied, the Deployments run with {}",
            applied.digest, sim.config_runs.digest
        ));
    }
    // 6. Upgradeable=True only when nothing in the world blocks it.
    if installed.is_some()
        && condition_is(new, types::UPGRADEABLE, ConditionStatus::True)
        && !read.blockers.is_empty()
    {
        return fail(format!(
            "Upgradeable=True while {}",
            read.blockers.join(", ")
        ));
    }
    // 9. A move that outlives spec.progressDeadline degrades the PO (not while paused: POM
    // moves nothing then, and Upgradeable says Paused).
    if sim.running.is_some()
        && !sim.po.spec.paused
        && !sim.settled
        && oracle::seconds_since(world.now, sim.move_started_at) > world.deadline_secs()
        && !condition_is(new, types::DEGRADED, ConditionStatus::True)
    {
        return fail(format!(
            "the move has not settled for {}s (deadline {}s) and the PO is not Degraded",
            oracle::seconds_since(world.now, sim.move_started_at),
            world.deadline_secs()
        ));
    }
    // 10. An operator that stopped working after it settled is reported.
    if sim.settled
        && sim.regressed
        && installed.is_some()
        && matches!(outcome, ActOutcome::Applied(_))
        && !condition_is(new, types::DEGRADED, ConditionStatus::True)
    {
        return fail(
            "the settled operator's Deployment is unavailable and the PO is not Degraded".into(),
        );
    }
    inventory(new)
}

/// Every object POM wrote for the PO and did not delete is listed in its inventory (so that a
/// prune or the PO's deletion can find it): partial applies included.
pub fn written_objects_listed(
    world: &World,
    i: usize,
    new: &PlatformOperatorStatus,
) -> Result<(), String> {
    for object in &world.pos[i].on_cluster {
        if !new.inventory.iter().any(|e| e.objects.contains(object)) {
            return Err(format!(
                "{object:?} is on the cluster, written for {}, and no inventory entry lists it: {:#?}",
                PACKAGES[i], new.inventory
            ));
        }
    }
    Ok(())
}

/// A recorded move lists its target's objects before any of them is written.
pub fn intent_inventory(
    intent: &PlatformOperatorStatus,
    applying: &[InventoryObject],
) -> Result<(), String> {
    let Some(hop) = &intent.active_hop else {
        return Ok(());
    };
    let recorded = intent.inventory.iter().find(|e| e.bundle == hop.to);
    match recorded {
        Some(entry) if applying.iter().all(|o| entry.objects.contains(o)) => Ok(()),
        _ => Err(format!(
            "the intent of the move to {} does not list its objects: {:#?}",
            hop.to, intent.inventory
        )),
    }
}

/// Whatever is installed has its objects in the inventory.
fn inventory(status: &PlatformOperatorStatus) -> Result<(), String> {
    let Some(installed) = &status.installed_bundle else {
        return Ok(());
    };
    if !status.inventory.iter().any(|e| e.bundle == installed.name) {
        return Err(format!(
            "{} is installed but not in the inventory: {:#?}",
            installed.name, status.inventory
        ));
    }
    Ok(())
}

/// A move recorded before a crash is resumed, unless its target no longer qualifies.
pub fn resumed_intent(
    world: &mut World,
    i: usize,
    new: &PlatformOperatorStatus,
) -> Result<(), String> {
    let Some(intended) = world.pos[i].intent_at_crash.clone() else {
        return Ok(());
    };
    let to = index_of(i, &intended);
    let sim = &world.pos[i];
    let spec = &sim.po.spec;
    let offered = world
        .catalogs
        .iter()
        .any(|c| spec.package.catalog.as_deref().is_none_or(|n| n == c.name) && c.served[to]);
    // A first install no catalog offers now is held, not dropped (its objects may run):
    // resumed once a catalog offers it again.
    let first_install = sim.running.is_none()
        && new
            .active_hop
            .as_ref()
            .is_some_and(|h| h.from.is_none() && h.to == intended);
    let qualifies = (offered || first_install)
        && in_channel(channel_of(sim), to)
        && spec
            .package
            .version_range
            .as_deref()
            .is_none_or(|r| admits(r, &version(to)))
        && runs_on(world, to, visible_phase(world));
    let recorded = new.active_hop.as_ref().map(|h| &h.to);
    // The admin's `abandon:` of it is a way out of it, not a drop.
    if !qualifies || sim.running == Some(to) || oracle::abandoned(world, i, to) {
        world.pos[i].intent_at_crash = None;
    } else if recorded != Some(&intended) {
        return Err(format!(
            "the move to {intended} recorded before a crash was dropped: {new:#?}"
        ));
    }
    Ok(())
}

/// Invariants 7 and 8 on the aggregated ClusterOperator.
pub fn aggregate(world: &World, reports_release: bool) -> Result<(), String> {
    let upgradeable = world
        .co
        .conditions
        .iter()
        .any(|c| c.type_ == types::UPGRADEABLE && c.status == "True");
    let key = world.cluster_key();
    for (i, sim) in world.pos.iter().enumerate() {
        let name = PACKAGES[i];
        let generation = sim.po.metadata.generation.unwrap_or(1);
        let read = sim.last_read.as_ref();
        let current =
            read.is_some_and(|r| r.generation == generation && r.cluster == key && key.is_some());
        if upgradeable && sim.running.is_some() {
            let Some(read) = read.filter(|_| current) else {
                return Err(format!(
                    "CO Upgradeable=True while {name} was not judged for its spec and the cluster now ({:?} vs {key:?}); {}",
                    read.map(|r| (r.generation, r.cluster)),
                    describe(world, sim)
                ));
            };
            if !read.blockers.is_empty() {
                return Err(format!(
                    "CO Upgradeable=True while {name}: {}; {}",
                    read.blockers.join(", "),
                    describe(world, sim)
                ));
            }
        }
        if reports_release && sim.running.is_some() {
            // Judged by the world at the PO's last reconcile, for its spec and the cluster as
            // they are now: settled, and no move owed by the world's resolution.
            let owed = super::oracle::next_move(world, i);
            let at_pin = sim.settled && current && read.is_some_and(|r| r.at_pin);
            if !at_pin {
                return Err(format!(
                    "versions reports {} while {name} is not at its pin for the cluster now (a move to {:?} is owed; last read: {:?}); {}",
                    world.release(),
                    owed.map(|o| VERSIONS[o]),
                    read,
                    describe(world, sim)
                ));
            }
        }
    }
    Ok(())
}
