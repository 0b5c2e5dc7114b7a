//! The chaos monitor's own record of the world (issue 34 item 11): every version of every owned
//! Deployment the harness saw, by etcd revision, and whether it was rolled out and available
//! then, as the Deployment controller wrote it. What the monitor judges "settled" from is this
//! record, not POM's status: a move to bundle B has settled by the world once the PO's
//! Deployment labelled B was seen rolled out and available (the chaos operators never report an
//! OperatorCondition, so under the default `upgradeGate: Auto` nothing else holds a move; the
//! one-second first-report window is POM's and not judged).
//!
//! The judgments are pure functions over the record and the PlatformOperator history, so that
//! they are table-tested below; a judgment whose evidence may lie in a gap of a watch (a relist
//! after an API-server or etcd restart) is counted as unjudged, and [`GapBound`] fails a run in
//! which too much went unjudged.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use kube::ResourceExt as _;
use pom_api::labels::{BUNDLE, OWNER_PO};

/// One version of an owned Deployment: its revision, bundle label, and whether it was rolled
/// out and available (`None`: the Deployment was deleted at that revision).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeploymentVersion {
    pub rev: u64,
    pub bundle: String,
    pub available: Option<bool>,
}

/// Revision ranges `(from, to]` a watch did not see (between its last event and a relist).
pub type Gaps = Vec<(u64, u64)>;

/// Whether `gaps` may hide a write in `(after, until)`.
#[must_use]
pub fn hidden(gaps: &[(u64, u64)], after: u64, until: u64) -> bool {
    gaps.iter().any(|(from, to)| *from < until && *to > after)
}

/// Every owned Deployment version seen, by owner label.
#[derive(Debug, Default)]
pub struct Rollouts {
    versions: BTreeMap<String, Vec<DeploymentVersion>>,
    /// What the Deployment watch did not see of each owner's Deployment.
    gaps: BTreeMap<String, Gaps>,
}

/// The revisions a relist after a gap `(from, listed)` proves nothing about, for one object:
/// what came before its listed revision `rev` (`None`: it is not in the list, so it may have
/// changed or gone anywhere in the gap). An object listed at a revision the watch had already
/// seen did not change in the gap.
#[must_use]
pub fn hidden_by_relist(gap: (u64, u64), rev: Option<u64>) -> Option<(u64, u64)> {
    let (from, listed) = gap;
    match rev {
        Some(rev) if rev <= from => None,
        Some(rev) => Some((from, rev)),
        None => Some((from, listed)),
    }
}

/// Whether a Deployment was rolled out and available by its own status: the controller saw
/// the current generation, every replica is updated and available, no old replica is left.
#[must_use]
pub fn rolled_out(deployment: &Deployment) -> bool {
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    deployment.status.as_ref().is_some_and(|s| {
        s.observed_generation >= deployment.metadata.generation
            && s.updated_replicas.unwrap_or(0) == wanted
            && s.available_replicas.unwrap_or(0) == wanted
            && s.replicas.unwrap_or(0) == wanted
    })
}

impl Rollouts {
    /// Records a version of an owned Deployment (`deleted`: the watch's Deleted event).
    pub fn record(&mut self, deployment: &Deployment, deleted: bool) {
        let labels = deployment.labels();
        let (Some(owner), Some(rev)) = (
            labels.get(OWNER_PO),
            deployment.resource_version().and_then(|v| v.parse().ok()),
        ) else {
            return;
        };
        let version = DeploymentVersion {
            rev,
            bundle: labels.get(BUNDLE).cloned().unwrap_or_default(),
            available: (!deleted).then(|| rolled_out(deployment)),
        };
        self.push(owner, version);
    }

    /// Records that the Deployment watch may have missed writes of `owner`'s Deployment in
    /// `gap` (see [`hidden_by_relist`]).
    pub fn gap(&mut self, owner: &str, gap: (u64, u64)) {
        self.gaps.entry(owner.to_owned()).or_default().push(gap);
    }

    fn gaps_of(&self, owner: &str) -> &[(u64, u64)] {
        self.gaps.get(owner).map_or(&[], Vec::as_slice)
    }

    /// Adds `version` of the Deployment of `owner`, in revision order.
    pub fn push(&mut self, owner: &str, version: DeploymentVersion) {
        let versions = self.versions.entry(owner.to_owned()).or_default();
        if versions.iter().any(|v| v.rev == version.rev) {
            return;
        }
        let at = versions.partition_point(|v| v.rev < version.rev);
        versions.insert(at, version);
    }

    /// The first revision at which the Deployment of `owner`, labelled `bundle`, was seen
    /// rolled out and available.
    #[must_use]
    pub fn first_available(&self, owner: &str, bundle: &str) -> Option<u64> {
        self.versions
            .get(owner)?
            .iter()
            .find(|v| v.bundle == bundle && v.available == Some(true))
            .map(|v| v.rev)
    }

    /// The last version of the Deployment of `owner` before `rev`, or `Err(())` when a gap
    /// may hide a later one.
    fn before(&self, owner: &str, rev: u64) -> Result<Option<&DeploymentVersion>, ()> {
        let last = self
            .versions
            .get(owner)
            .and_then(|vs| vs.iter().rev().find(|v| v.rev < rev));
        if hidden(self.gaps_of(owner), last.map_or(0, |v| v.rev), rev) {
            return Err(());
        }
        Ok(last)
    }
}

/// A judgment: a violation, nothing wrong, or evidence that may have fallen in a watch gap.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Holds,
    Violated(String),
    Unjudged,
}

/// A settle POM announced (the first PO version whose move to `bundle` says settled, at
/// `rev`) holds only once the world saw the PO's Deployment labelled `bundle` rolled out and
/// available before it.
#[must_use]
pub fn judge_settle_claim(rollouts: &Rollouts, owner: &str, bundle: &str, rev: u64) -> Verdict {
    // Only a gap after the Deployment last ran another bundle may hide this rollout (review
    // H1: an early gap excused every later claim).
    let since = rollouts
        .versions
        .get(owner)
        .and_then(|vs| vs.iter().rev().find(|v| v.rev < rev && v.bundle != bundle))
        .map_or(0, |v| v.rev);
    match rollouts.first_available(owner, bundle) {
        Some(available) if available < rev => Verdict::Holds,
        _ if hidden(rollouts.gaps_of(owner), since, rev) => Verdict::Unjudged,
        other => Verdict::Violated(format!(
            "the status said the move to {bundle} settled at rv{rev}, but the harness saw its \
             Deployment rolled out and available {}",
            other.map_or("never".to_owned(), |at| format!("only at rv{at}"))
        )),
    }
}

/// A prune by the world: an object of `bundle` deleted at `rev` while the PO's Deployment runs
/// a later bundle of the channel (`position` orders a PO's bundle labels) that was seen rolled
/// out and available before the deletion: never the running bundle's objects, nor a newer
/// bundle's (review H3).
#[must_use]
pub fn judge_prune(
    rollouts: &Rollouts,
    owner: &str,
    bundle: &str,
    rev: u64,
    position: impl Fn(&str) -> Option<usize>,
) -> Verdict {
    let Ok(last) = rollouts.before(owner, rev) else {
        return Verdict::Unjudged;
    };
    let runs = last.filter(|v| v.available.is_some());
    let older = |running: &str| position(bundle) < position(running) && position(bundle).is_some();
    match runs {
        Some(v)
            if older(&v.bundle)
                && rollouts
                    .first_available(owner, &v.bundle)
                    .is_some_and(|at| at < rev) =>
        {
            Verdict::Holds
        }
        _ => Verdict::Violated(format!(
            "deleted while the Deployment ran {:?}, not another bundle seen rolled out: only \
             prune after the next bundle rolled out, or cleanup, may delete",
            runs.map(|v| (&v.bundle, v.available))
        )),
    }
}

/// The aggregated `Upgradeable=True` at `rev` over a PO whose Deployment then runs a bundle the
/// world never saw rolled out and available: a move in flight by the world.
#[must_use]
pub fn judge_upgradeable(rollouts: &Rollouts, owner: &str, rev: u64) -> Verdict {
    let Ok(last) = rollouts.before(owner, rev) else {
        return Verdict::Unjudged;
    };
    match last.filter(|v| v.available.is_some()) {
        Some(v)
            if rollouts
                .first_available(owner, &v.bundle)
                .is_none_or(|at| at >= rev) =>
        {
            Verdict::Violated(format!(
                "its Deployment runs {} (rv{}), never yet seen rolled out and available",
                v.bundle, v.rev
            ))
        }
        _ => Verdict::Holds,
    }
}

/// How much may go unjudged for the gaps of the watches: no more than a third of the count of
/// a kind's judged judgments (rounded up), or two, whichever is more (session 21's worst run:
/// 8 deletions unjudged beside 27 judged). Past it the run was blind too long to prove anything.
#[derive(Debug, Clone, Copy)]
pub struct GapBound;

impl GapBound {
    /// The largest count of unjudged judgments allowed beside `judged` judged ones.
    #[must_use]
    pub fn allowed(judged: usize) -> usize {
        judged.div_ceil(3).max(2)
    }

    /// A violation when `unjudged` of `what` exceeds the bound for `judged`.
    #[must_use]
    pub fn check(what: &str, judged: usize, unjudged: usize) -> Option<String> {
        (unjudged > Self::allowed(judged)).then(|| {
            format!(
                "{unjudged} {what} went unjudged beside {judged} judged (bound {}): the \
                 monitor's watches were blind too long (see the rewatch count)",
                Self::allowed(judged)
            )
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn version(rev: u64, bundle: &str, available: Option<bool>) -> DeploymentVersion {
        DeploymentVersion {
            rev,
            bundle: bundle.into(),
            available,
        }
    }

    /// The channel v0 -> v1 -> v2.
    fn chain(bundle: &str) -> Option<usize> {
        ["v0", "v1", "v2"].iter().position(|b| *b == bundle)
    }

    /// po-a: v0 applied at 10, available at 12; the hop to v1 applied at 20, available at 25.
    fn hop() -> Rollouts {
        let mut r = Rollouts::default();
        for v in [
            version(25, "v1", Some(true)),
            version(10, "v0", Some(false)),
            version(12, "v0", Some(true)),
            version(20, "v1", Some(false)),
        ] {
            r.push("po-a", v);
        }
        r
    }

    #[test]
    fn a_settle_holds_only_after_the_world_saw_the_rollout() {
        let r = hop();
        assert_eq!(judge_settle_claim(&r, "po-a", "v1", 26), Verdict::Holds);
        assert!(matches!(
            judge_settle_claim(&r, "po-a", "v1", 22),
            Verdict::Violated(m) if m.contains("only at rv25")
        ));
        assert!(matches!(
            judge_settle_claim(&r, "po-a", "v2", 30),
            Verdict::Violated(m) if m.contains("never")
        ));
        let mut gapped = hop();
        gapped.gap("po-a", (27, 29));
        assert_eq!(
            judge_settle_claim(&gapped, "po-a", "v2", 30),
            Verdict::Unjudged
        );
        // A gap before the Deployment last ran another bundle excuses nothing (review H1).
        let mut early = hop();
        early.gap("po-a", (13, 15));
        early.push("po-a", version(40, "v2", Some(false)));
        assert!(matches!(
            judge_settle_claim(&early, "po-a", "v2", 45),
            Verdict::Violated(_)
        ));
    }

    #[test]
    fn a_prune_holds_only_once_the_next_bundle_rolled_out() {
        let r = hop();
        assert_eq!(judge_prune(&r, "po-a", "v0", 26, chain), Verdict::Holds);
        // The hop applied, not yet rolled out: the old bundle's objects must stay.
        assert!(matches!(
            judge_prune(&r, "po-a", "v0", 22, chain),
            Verdict::Violated(_)
        ));
        // A newer bundle's objects neither (review H3: the hop to v2 applied its objects).
        assert!(matches!(
            judge_prune(&r, "po-a", "v2", 26, chain),
            Verdict::Violated(_)
        ));
        // The running bundle's own objects are never pruned.
        assert!(matches!(
            judge_prune(&r, "po-a", "v1", 26, chain),
            Verdict::Violated(_)
        ));
        // The Deployment itself deleted: nothing runs, so only cleanup may have done it.
        let mut gone = hop();
        gone.push("po-a", version(30, "v1", None));
        assert!(matches!(
            judge_prune(&gone, "po-a", "v0", 31, chain),
            Verdict::Violated(_)
        ));
        let mut gapped = hop();
        gapped.gap("po-a", (25, 28));
        assert_eq!(
            judge_prune(&gapped, "po-a", "v1", 30, chain),
            Verdict::Unjudged
        );
    }

    #[test]
    fn upgradeable_over_a_rollout_never_seen_complete_is_a_violation() {
        let r = hop();
        assert_eq!(judge_upgradeable(&r, "po-a", 15), Verdict::Holds);
        assert!(matches!(
            judge_upgradeable(&r, "po-a", 22),
            Verdict::Violated(m) if m.contains("v1 (rv20)")
        ));
        assert_eq!(judge_upgradeable(&r, "po-a", 26), Verdict::Holds);
        // A regression of a bundle that did roll out is not a move.
        let mut regressed = hop();
        regressed.push("po-a", version(27, "v1", Some(false)));
        assert_eq!(judge_upgradeable(&regressed, "po-a", 28), Verdict::Holds);
        assert_eq!(judge_upgradeable(&r, "po-b", 22), Verdict::Holds);
        let mut gapped = hop();
        gapped.gap("po-a", (21, 23));
        assert_eq!(judge_upgradeable(&gapped, "po-a", 24), Verdict::Unjudged);
    }

    #[test]
    fn a_rolled_out_deployment_has_every_replica_updated_and_available() {
        let deployment = |generation: i64, observed: i64, updated: i32, available: i32| {
            serde_json::from_value::<Deployment>(serde_json::json!({
                "metadata": {"name": "d", "generation": generation},
                "spec": {"replicas": 2, "selector": {}, "template": {}},
                "status": {"observedGeneration": observed, "replicas": 2,
                           "updatedReplicas": updated, "availableReplicas": available}
            }))
            .unwrap()
        };
        assert!(rolled_out(&deployment(3, 3, 2, 2)));
        assert!(!rolled_out(&deployment(3, 2, 2, 2)));
        assert!(!rolled_out(&deployment(3, 3, 1, 2)));
        assert!(!rolled_out(&deployment(3, 3, 2, 1)));
    }

    #[test]
    fn a_relist_hides_only_what_came_before_each_object_it_lists() {
        // Watched up to rv 10, listed at rv 20.
        assert_eq!(hidden_by_relist((10, 20), Some(7)), None);
        assert_eq!(hidden_by_relist((10, 20), Some(15)), Some((10, 15)));
        assert_eq!(hidden_by_relist((10, 20), None), Some((10, 20)));
        let mut r = hop();
        r.gap("po-b", (21, 30));
        assert_eq!(judge_upgradeable(&r, "po-a", 31), Verdict::Holds);
    }

    #[test]
    fn the_gap_bound_allows_a_third_or_two() {
        assert_eq!(GapBound::check("deletions", 0, 2), None);
        assert!(GapBound::check("deletions", 0, 3).is_some());
        assert_eq!(GapBound::check("deletions", 27, 8), None);
        assert!(GapBound::check("deletions", 27, 10).is_some());
    }
}
