//! The oracle: what the simulated world says should happen, computed from the world alone
//! (never from `pom_policy` or `pom_resolver`: no rule, constant or helper of the code under
//! test is called or copied here; its types are used as data only): version ranges, catalog
//! edges, the pin of §4.2 (the rollback pivot judged by every compatibility check of §5.3),
//! the resolution of §5 over this model's small catalogs, the settle rule of §7, and the rules
//! of configuration changes (a move of the running bundle to itself, issue 23 items 3-4 and
//! issue 34 item 1).

use k8s_openapi::jiff::Timestamp;
use pom_api::platform_operator::UpgradeGate;
use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use semver::Version;

use super::world::{CHANNELS, Says, SimPo, VERSIONS, World};

pub fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

pub fn version(index: usize) -> Version {
    v(VERSIONS[index])
}

/// This model's own reading of the few ranges it uses (`>=X`, `<X`, `=X`, `!=X`, ANDed by spaces):
/// independent of the resolver's Masterminds parser.
pub fn admits(range: &str, version: &Version) -> bool {
    range.split_whitespace().all(|token| {
        if let Some(rest) = token.strip_prefix("!=") {
            version != &v(rest)
        } else if let Some(rest) = token.strip_prefix(">=") {
            version >= &v(rest)
        } else if let Some(rest) = token.strip_prefix('<') {
            version < &v(rest)
        } else if let Some(rest) = token.strip_prefix('=') {
            version == &v(rest)
        } else {
            panic!("the model uses no range token {token:?}")
        }
    })
}

/// Whether bundle `to` is in `channel` (stable: every bundle; fast: only 1.x).
pub fn in_channel(channel: &str, to: usize) -> bool {
    match channel {
        "stable" => true,
        "fast" => to <= 5,
        other => panic!("no channel {other}"),
    }
}

/// A catalog edge of `channel` from bundle `from` to bundle `to` (the model's channels:
/// stable, each bundle replaces the one before it, two `skipRange`s; fast, each replaces the
/// one before it and skips the one before that).
pub fn is_edge(channel: &str, from: usize, to: usize) -> bool {
    if !in_channel(channel, to) {
        return false;
    }
    match channel {
        "stable" => {
            to == from + 1
                || super::world::SKIP_RANGES
                    .iter()
                    .any(|(at, range)| *at == to && admits(range, &version(from)))
        }
        "fast" => to == from + 1 || to == from + 2,
        _ => false,
    }
}

/// The channel the PO follows.
pub fn channel_of(sim: &SimPo) -> &str {
    sim.po
        .spec
        .package
        .channel
        .as_deref()
        .unwrap_or(CHANNELS[0])
}

/// The settle window of issue 25 item 9, in the oracle's own words: `docs/decisions.md` ("an
/// operator never seen reporting settles 2 min after its rollout was first seen complete").
/// Not `pom_policy::status::AUTO_SETTLE_WINDOW`: if the code's window changed, the oracle
/// would disagree, and a test would say so.
pub const AUTO_SETTLE_WINDOW_SECS: i64 = 120;

/// Seconds from `then` to `now` (the oracle's own clock arithmetic).
pub fn seconds_since(now: Timestamp, then: Timestamp) -> i64 {
    now.as_second() - then.as_second()
}

/// The OpenShift version a bundle chosen now will run on (§5.3 "the cluster the bundle will
/// run on (the target version during an upgrade)", and during a rollback the version rolled
/// back to): the target while the cluster moves, the current version while it is steady.
pub fn heads_to(phase: &ClusterPhase) -> &Version {
    match phase.kind {
        PhaseKind::Steady => &phase.current,
        PhaseKind::PatchUpgrade | PhaseKind::MinorUpgrade | PhaseKind::Rollback => &phase.target,
    }
}

/// The Kubernetes version an OpenShift version ships (4.Y.Z → 1.(Y+13).Z in this model).
pub fn kube_of(openshift: &Version) -> Version {
    Version::new(1, openshift.minor + 13, openshift.patch)
}

/// Whether bundle `index` runs on the Kubernetes version the API server reports now
/// (`minKubeVersion`, §5.3).
pub fn runs_on_kube(world: &World, index: usize) -> bool {
    world.min_kube[index].is_none_or(|(minor, patch)| Version::new(1, minor, patch) <= world.kube)
}

/// Whether `index` can run on the cluster `phase` puts it on, by every check of §5.3:
/// `olm.maxOpenShiftVersion` against the version the cluster heads to (skipped when the
/// ClusterVersion cannot be read), `minKubeVersion` against the API server's version.
pub fn runs_on(world: &World, index: usize, phase: Option<&ClusterPhase>) -> bool {
    runs_on_kube(world, index)
        && phase.is_none_or(|p| world.max_ocp[index].is_none_or(|max| max >= heads_to(p).minor))
}

/// Whether `index` can run on the next minor of the cluster's current version (§8.3).
pub fn compatible_with_next_minor(world: &World, index: usize) -> bool {
    world.max_ocp[index].is_none_or(|max| max > world.phase.current.minor)
}

/// The phase the PO's reconcile can see (`None`: ClusterVersion unreadable).
pub fn visible_phase(world: &World) -> Option<&ClusterPhase> {
    (!world.cv_unreadable).then_some(&world.phase)
}

/// The bundle a PO should move to now, by §4.2 and §5 over what the world serves it; `None`
/// when it stays (or nothing can be installed). Judged from the world: the bundle that runs,
/// the catalogs' served content, priorities, the PO's spec and the cluster phase.
pub fn next_move(world: &World, i: usize) -> Option<usize> {
    resolution(world, i).filter(|to| !abandoned(world, i, *to))
}

/// The bundle the resolution picks ([`next_move`] before the admin's `abandon:`): a move to
/// a bundle the admin abandoned is not started while the annotation names it, and no other
/// is chosen in its place (the admin decides: exclude it, or remove the annotation).
pub fn resolution(world: &World, i: usize) -> Option<usize> {
    if let Some(hop) = pre_update_move(world, i) {
        return Some(hop);
    }
    let sim = &world.pos[i];
    let spec = &sim.po.spec;
    let channel = channel_of(sim);
    let phase = visible_phase(world);
    let running = sim.running;
    let over = spec.steady_state_version_range.as_deref();
    let range = spec.package.version_range.as_deref();
    let kind = phase.map_or(PhaseKind::Steady, |p| p.kind);
    let allowed: Vec<usize> = (0..world.catalogs.len())
        .filter(|c| {
            spec.package
                .catalog
                .as_deref()
                .is_none_or(|n| n == world.catalogs[*c].name)
        })
        .collect();
    // Rollback pivot: the running bundle cannot run on the rollback target.
    let pivot = kind == PhaseKind::Rollback
        && running.is_some_and(|r| {
            !runs_on(world, r, phase)
                && allowed
                    .iter()
                    .any(|c| world.catalogs[*c].served[r] && in_channel(channel, r))
        });
    let mut best: Option<(bool, i32, usize)> = None;
    for c in allowed {
        let catalog = &world.catalogs[c];
        let mut in_catalog: Option<(bool, usize)> = None;
        for to in 0..VERSIONS.len() {
            if !catalog.served[to] || !in_channel(channel, to) {
                continue;
            }
            let ver = version(to);
            let mut downgrade = false;
            let ok_pin = match running {
                None => over.is_none_or(|o| admits(o, &ver)),
                Some(r) => {
                    let rv = version(r);
                    let same = to == r;
                    let successor = same || is_edge(channel, r, to);
                    match kind {
                        PhaseKind::Steady => match over {
                            Some(o) => {
                                if !admits(o, &rv) && ver < rv {
                                    downgrade = true;
                                    admits(o, &ver)
                                } else {
                                    successor && admits(o, &ver)
                                }
                            }
                            None => same,
                        },
                        PhaseKind::PatchUpgrade | PhaseKind::MinorUpgrade => {
                            let pin = ver >= rv
                                && ver.major == rv.major
                                && (kind == PhaseKind::MinorUpgrade || ver.minor == rv.minor);
                            successor && (same || (pin && over.is_none_or(|o| admits(o, &ver))))
                        }
                        PhaseKind::Rollback if pivot => ver < rv && ver.major == rv.major,
                        PhaseKind::Rollback => same,
                    }
                }
            };
            if !ok_pin || !range.is_none_or(|r| admits(r, &ver)) || !runs_on(world, to, phase) {
                continue;
            }
            let rank = (!downgrade, to);
            if in_catalog.is_none_or(|b| rank > b) {
                in_catalog = Some(rank);
            }
        }
        if let Some((not_down, to)) = in_catalog {
            let rank = (not_down, catalog.priority, to);
            if best.is_none_or(|b| (rank.0, rank.1) > (b.0, b.1)) {
                best = Some(rank);
            }
        }
    }
    best.map(|b| b.2).filter(|to| Some(*to) != running)
}

/// Whether the admin's `unsettled-move=abandon:<bundle>` names bundle `to`: the admin gave
/// that move up, so it is not owed (started again) while the annotation names it.
/// A first install recorded in status is the exception: nothing ran before it, so there is no
/// way back, the annotation is inert and the install is finished.
pub fn abandoned(world: &World, i: usize, to: usize) -> bool {
    let name = super::world::bundle_name(super::world::PACKAGES[i], to);
    let recorded_install = world
        .status(i)
        .and_then(|s| s.active_hop.as_ref())
        .is_some_and(|h| !h.settled && h.from.is_none() && h.to == name);
    !recorded_install
        && world.annotation(i, super::world::UNSETTLED_MOVE)
            == Some(format!("abandon:{name}").as_str())
}

/// Whether the gate of §7 holds for the running bundle now, judged from the world: `Rollout`
/// asks nothing more; `OperatorCondition` asks the operator's `Upgradeable=True` for its
/// current generation; `Auto` asks it once the operator has been seen reporting, and until then
/// lets the move settle only once [`auto_settle_window_passed`].
pub fn gate_holds(world: &World, sim: &SimPo) -> bool {
    match sim.po.spec.upgrade_gate {
        UpgradeGate::Rollout => true,
        UpgradeGate::OperatorCondition => sim.word() == Says::True,
        UpgradeGate::Auto if sim.reported_seen => sim.word() == Says::True,
        UpgradeGate::Auto => auto_settle_window_passed(world, sim),
    }
}

/// Whether the gate asks the operator's word at all (for holds and verdicts).
pub fn gate_requires_report(sim: &SimPo) -> bool {
    match sim.po.spec.upgrade_gate {
        UpgradeGate::Rollout => false,
        UpgradeGate::OperatorCondition => true,
        UpgradeGate::Auto => sim.reported_seen,
    }
}

/// Issue 25 item 9: under `Auto`, an operator never seen reporting lets its move settle only a
/// settle window after the rollout was first seen complete (during which an OperatorCondition
/// that appears is honoured). The one place the oracle knows the window.
pub fn auto_settle_window_passed(world: &World, sim: &SimPo) -> bool {
    sim.rolled_out_seen_at
        .is_some_and(|seen| seconds_since(world.now, seen) >= AUTO_SETTLE_WINDOW_SECS)
}

/// The move of the running bundle has settled, by the world, now (§7): its objects are applied
/// (it runs), its Deployments rolled out and are available, and the gate holds.
pub fn settles_now(world: &World, sim: &SimPo) -> bool {
    sim.running.is_some() && sim.rolled_out && !sim.regressed && gate_holds(world, sim)
}

/// The version of a minor update requested and not started, as the PO's reconcile sees it
/// (issue 35 item 1): the cluster steady and readable, the request of a higher minor.
pub fn visible_request(world: &World) -> Option<&Version> {
    let phase = visible_phase(world)?;
    (phase.kind == PhaseKind::Steady)
        .then_some(world.requested.as_ref())
        .flatten()
        .filter(|r| r.minor > phase.current.minor)
}

/// Whether bundle `index` runs on OpenShift `version` (`olm.maxOpenShiftVersion`).
pub fn runs_on_version(world: &World, index: usize, version: &Version) -> bool {
    world.max_ocp[index].is_none_or(|max| max >= version.minor)
}

/// This model's own pre-update hop: with a minor update requested that the running bundle
/// cannot run on, the first hop of a shortest chain of channel edges, through bundles newer
/// than what runs, in its major, within `versionRange`, served and running on the current
/// version, to one that also runs on the requested version (the highest such at the shortest
/// length). None under the admin's `steadyStateVersionRange` (the admin holds the PO by hand).
fn pre_update_move(world: &World, i: usize) -> Option<usize> {
    let requested = visible_request(world)?;
    let phase = visible_phase(world)?;
    let sim = &world.pos[i];
    let spec = &sim.po.spec;
    if spec.steady_state_version_range.is_some() {
        return None;
    }
    let running = sim.running?;
    if runs_on_version(world, running, requested) {
        return None;
    }
    let channel = channel_of(sim);
    let rv = version(running);
    let served = |b: usize| {
        world
            .catalogs
            .iter()
            .any(|c| spec.package.catalog.as_deref().is_none_or(|n| n == c.name) && c.served[b])
    };
    let node = |b: usize| {
        let ver = version(b);
        served(b)
            && in_channel(channel, b)
            && ver > rv
            && ver.major == rv.major
            && spec
                .package
                .version_range
                .as_deref()
                .is_none_or(|r| admits(r, &ver))
            && runs_on(world, b, Some(phase))
    };
    // The step runs only where the steady resolution stays on what runs (it is served).
    if !served(running) || !in_channel(channel, running) {
        return None;
    }
    // Breadth-first; `first[b]`: the first hop of the path that reached `b`.
    let mut first: [Option<usize>; VERSIONS.len()] = [None; VERSIONS.len()];
    let mut frontier = vec![running];
    let mut visited = vec![running];
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for &from in &frontier {
            for to in 0..VERSIONS.len() {
                if visited.contains(&to) || !node(to) || !is_edge(channel, from, to) {
                    continue;
                }
                visited.push(to);
                first[to] = Some(if from == running { to } else { first[from]? });
                next.push(to);
            }
        }
        if let Some(goal) = next
            .iter()
            .copied()
            .filter(|b| runs_on_version(world, *b, requested))
            .max()
        {
            return first[goal];
        }
        frontier = next;
    }
    None
}
