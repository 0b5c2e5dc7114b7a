//! Hops before the cluster moves (issue 35 item 1): the shortest chain of catalog edges from
//! what runs to a bundle that runs on both the cluster's current version and the version an
//! admin asked to update to.
//!
//! Why: the CVO refuses a minor update while an installed bundle's `maxOpenShiftVersion` is
//! below the requested minor (seed 004: "you may need to upgrade the PO before you upgrade the
//! cluster"). The cluster stays where it is while the PO moves, so every bundle on the way must
//! run on the *current* version, and the last must also run on the *requested* one. Edges are
//! the selector's own ([`is_direct_successor`]), and every bundle passes the same filters a move
//! during a minor update would ([`pin_for`] with the update as its phase, `versionRange`,
//! `minKubeVersion`, no dependencies), judged against the current version, so a path shown here
//! is one the manager can take one settled hop at a time.
//!
//! Shortest by number of hops (each hop is a restart of the operator and a wait for it to
//! settle); among the shortest, a final bundle that is not deprecated, then the highest, as the
//! selector ranks (`cmp_sound_then_version`), and each hop's parent chosen the same way; ties
//! by catalog priority and name.
//! Pure and bounded: breadth-first over the channel's bundles, each visited once.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet};

use semver::Version;

use super::compat;
use super::reject::RejectReason;
use super::{
    ChosenBundle, InstalledBundle, ResolveError, ResolveRequest, Source, bundle_deprecation,
    cmp_sound_then_version, entries_with_bundles, evaluate, find_sources, is_direct_successor,
};
use crate::cluster::{ClusterPhase, PhaseKind};
use crate::fbc::model::{Bundle, ChannelEntry};
use crate::pin::pin_for;

/// What a PO needs before the cluster may move to the requested version.
#[derive(Debug, Clone, PartialEq)]
pub enum PreUpdate {
    /// What runs already runs on the requested version (or nothing runs): nothing to do.
    NotNeeded,
    /// The hops, in order: each a catalog edge from the one before (the first from what runs)
    /// to a bundle that runs on the current version; the last also runs on the requested one.
    Path(Vec<ChosenBundle>),
    /// No chain of edges leads to a bundle that runs on the requested version.
    NoPath(Box<NoPath>),
}

/// Why there is no path, for the admin: the bundle nearest to one, and what it lacks.
#[derive(Debug, Clone, PartialEq)]
pub struct NoPath {
    /// The requested version the path was looked for.
    pub requested: Version,
    /// The highest bundle the PO could reach, with why it does not run on `requested`; or,
    /// when the PO can reach none, the highest bundle that would run on `requested`, which
    /// no edge leads to. `None`: the channel has neither.
    pub nearest: Option<(ChosenBundle, Shortfall)>,
}

/// What the nearest bundle lacks.
#[derive(Debug, Clone, PartialEq)]
pub enum Shortfall {
    /// Reachable, but does not run on the requested version (its `maxOpenShiftVersion`).
    DoesNotRunOnRequested(RejectReason),
    /// Runs on the requested version, but no chain of catalog edges through bundles that run
    /// on the current version (and pass the PO's ranges) leads to it from what runs.
    Unreachable,
}

impl std::fmt::Display for NoPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "no catalog path leads to a bundle that runs on {}",
            self.requested
        )?;
        match &self.nearest {
            None => write!(f, ": the channel has no bundle newer than what runs"),
            Some((bundle, Shortfall::DoesNotRunOnRequested(reason))) => write!(
                f,
                "; the nearest is {} ({}), which {reason}",
                bundle.name, bundle.version
            ),
            Some((bundle, Shortfall::Unreachable)) => write!(
                f,
                "; {} ({}) runs on it, but no upgrade edge (replaces, skips, skipRange) leads \
                 to it from what runs through bundles that run on the current version",
                bundle.name, bundle.version
            ),
        }
    }
}

/// A bundle of the channel that a pre-update hop may land on.
struct Node<'a> {
    source: usize,
    entry: &'a ChannelEntry,
    bundle: &'a Bundle,
}

/// The pre-update path for `req` (its `cluster` is the phase now, steady at the current
/// version; its `installed` what runs) to `requested`.
///
/// # Errors
/// The selector's own errors for a request it cannot read (no catalog, unknown package or
/// channel, ambiguous catalogs are left to the resolution that follows).
pub fn pre_update_path(
    req: &ResolveRequest<'_>,
    requested: &Version,
) -> Result<PreUpdate, ResolveError> {
    let Some(installed) = req.installed.as_ref() else {
        return Ok(PreUpdate::NotNeeded);
    };
    let sources = find_sources(req)?;
    if let Some(bundle) = installed_bundle(&sources, installed)
        && compat::check_openshift(bundle, requested).is_ok()
    {
        return Ok(PreUpdate::NotNeeded);
    }
    let nodes = hop_candidates(req, &sources, installed, requested);
    let mut parent: BTreeMap<&str, Option<usize>> = BTreeMap::new();
    let mut frontier: Vec<(Option<usize>, InstalledBundle)> = vec![(None, installed.clone())];
    let mut visited: BTreeSet<&str> = BTreeSet::from([installed.name.as_str()]);
    let mut reached: Vec<usize> = Vec::new();
    while !frontier.is_empty() {
        let mut next = Vec::new();
        for (from, from_bundle) in &frontier {
            for (index, node) in nodes.iter().enumerate() {
                if visited.contains(node.bundle.name.as_str())
                    || !is_direct_successor(node.entry, from_bundle)
                {
                    continue;
                }
                visited.insert(&node.bundle.name);
                parent.insert(&node.bundle.name, *from);
                next.push(index);
            }
        }
        // Best first: a bundle reachable from several of this level takes the best of them
        // as its parent, so of two equally short paths the one through sound bundles wins.
        next.sort_by(|a, b| cmp_nodes(&sources, &nodes, *b, *a));
        reached.extend(&next);
        let goals: Vec<usize> = next
            .iter()
            .copied()
            .filter(|i| compat::check_openshift(nodes[*i].bundle, requested).is_ok())
            .collect();
        if let Some(goal) = best(&sources, &nodes, &goals) {
            return Ok(PreUpdate::Path(path_to(&sources, &nodes, &parent, goal)));
        }
        frontier = next
            .into_iter()
            .map(|i| {
                let bundle = nodes[i].bundle;
                (
                    Some(i),
                    InstalledBundle {
                        name: bundle.name.clone(),
                        version: bundle.version.clone(),
                    },
                )
            })
            .collect();
    }
    Ok(PreUpdate::NoPath(Box::new(no_path(
        &sources, &nodes, &reached, requested,
    ))))
}

/// What runs, as the catalog describes it (`None`: gone from the catalog).
fn installed_bundle<'a>(sources: &[Source<'a>], installed: &InstalledBundle) -> Option<&'a Bundle> {
    sources
        .iter()
        .find_map(|source| source.package.bundles.get(&installed.name))
}

/// Every bundle of the channel a hop may land on: newer than what runs, admitted by the pin of
/// a minor update to `requested` and by `versionRange`, running on the current version, and
/// without dependencies ([`evaluate`], the successor edge aside).
fn hop_candidates<'a>(
    req: &ResolveRequest<'_>,
    sources: &[Source<'a>],
    installed: &InstalledBundle,
    requested: &Version,
) -> Vec<Node<'a>> {
    let update = req.cluster.as_ref().map(|now| ClusterPhase {
        kind: PhaseKind::MinorUpgrade,
        current: now.current.clone(),
        target: requested.clone(),
    });
    let pin = pin_for(Some(&installed.version), update.as_ref(), None);
    let mut nodes = Vec::new();
    for (index, source) in sources.iter().enumerate() {
        for (entry, bundle) in entries_with_bundles(source) {
            // The selector's own filters, all but the successor edge (the walk follows edges).
            let newer = bundle.version.cmp_precedence(&installed.version) == Ordering::Greater;
            let usable = newer && evaluate(req, entry, bundle, &pin, true).is_ok();
            if usable {
                nodes.push(Node {
                    source: index,
                    entry,
                    bundle,
                });
            }
        }
    }
    nodes
}

/// The best of `candidates` as the selector ranks ([`cmp_sound_then_version`]: not
/// deprecated first, then the highest version); ties go to the higher-priority catalog
/// (sources are in priority order), then to the name.
fn best(sources: &[Source<'_>], nodes: &[Node<'_>], candidates: &[usize]) -> Option<usize> {
    candidates
        .iter()
        .copied()
        .max_by(|a, b| cmp_nodes(sources, nodes, *a, *b))
}

/// `Greater` = better (see [`best`]).
fn cmp_nodes(sources: &[Source<'_>], nodes: &[Node<'_>], a: usize, b: usize) -> Ordering {
    let key = |i: usize| {
        let node = &nodes[i];
        (
            bundle_deprecation(&sources[node.source], &node.bundle.name).is_some(),
            &node.bundle.version,
        )
    };
    let (na, nb) = (&nodes[a], &nodes[b]);
    cmp_sound_then_version(key(a), key(b))
        .then_with(|| nb.source.cmp(&na.source))
        .then_with(|| nb.bundle.name.cmp(&na.bundle.name))
}

/// The hops from what runs to `goal`, first hop first.
fn path_to(
    sources: &[Source<'_>],
    nodes: &[Node<'_>],
    parent: &BTreeMap<&str, Option<usize>>,
    goal: usize,
) -> Vec<ChosenBundle> {
    let mut path = vec![chosen(sources, &nodes[goal])];
    let mut at = goal;
    while let Some(Some(previous)) = parent.get(nodes[at].bundle.name.as_str()) {
        path.push(chosen(sources, &nodes[*previous]));
        at = *previous;
    }
    path.reverse();
    path
}

/// The nearest bundle when there is no path (see [`NoPath::nearest`]).
fn no_path(
    sources: &[Source<'_>],
    nodes: &[Node<'_>],
    reached: &[usize],
    requested: &Version,
) -> NoPath {
    let nearest = match best(sources, nodes, reached) {
        Some(highest) => {
            let why = compat::check_openshift(nodes[highest].bundle, requested).err();
            why.map(|why| {
                (
                    chosen(sources, &nodes[highest]),
                    Shortfall::DoesNotRunOnRequested(why),
                )
            })
        }
        None => {
            let runs_on_requested: Vec<usize> = (0..nodes.len())
                .filter(|i| compat::check_openshift(nodes[*i].bundle, requested).is_ok())
                .collect();
            best(sources, nodes, &runs_on_requested)
                .map(|i| (chosen(sources, &nodes[i]), Shortfall::Unreachable))
        }
    };
    NoPath {
        requested: requested.clone(),
        nearest,
    }
}

fn chosen(sources: &[Source<'_>], node: &Node<'_>) -> ChosenBundle {
    let source = &sources[node.source];
    let bundle = node.bundle;
    ChosenBundle {
        name: bundle.name.clone(),
        version: bundle.version.clone(),
        image: bundle.image.clone(),
        catalog: source.catalog.to_owned(),
        channel: source.channel.name.clone(),
        max_openshift_version: bundle.properties.max_openshift_version.clone(),
        deprecation: bundle_deprecation(source, &bundle.name).map(str::to_owned),
    }
}
