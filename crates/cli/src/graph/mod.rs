//! The upgrade graph an admin can look at (`pomctl graph`, `pomctl plan -o graph`): a channel's
//! bundles and catalog edges, with what POM would do on top: the installed bundle, the pin's
//! window, the hops of the walk and, for every other bundle, the resolver's reason for not
//! going there.
//!
//! Nothing is decided here. The pin, the rejections and the candidates come from
//! [`pom_resolver::select::resolve`] on the caller's [`ResolveRequest`] (the request the
//! controller would build), the hops from the caller's walk (the resolver's [`plan_hops`]
//! offline, the policy's `decide` walk live), and the pin window from the pin's own rule
//! ([`Pin::admits`]). This module only lays those answers over the channel, as a typed model
//! that the two renderers ([`mermaid`], [`dot`]) draw.
//!
//! Which resolution explains the rejections: the one *from where the walk ends* (the installed
//! bundle when nothing moves). That is the question a graph answers, "why does it stop here and
//! not go on to X?": from the first bundle of a long walk most later bundles are merely "not a
//! direct successor", while from the last one the real reason shows (outside the pin,
//! `maxOpenShiftVersion` too low, dependencies). The window drawn is the pin in force now (the
//! first resolution's, what the PO's status reports).
//!
//! Edges: `replaces` and `skips` are drawn between every pair of bundles; `skipRange` edges only
//! from the bundles the walk stands on (the installed bundle and each hop target), the only
//! ones the resolver's successor filter ever judges. Each entry's range is printed in its
//! label instead: a channel where every bundle skips a range of all earlier ones would
//! otherwise draw every pair.
//!
//! [`plan_hops`]: pom_resolver::select::plan_hops

pub mod dot;
pub mod mermaid;
pub mod svg;

use std::collections::BTreeMap;

use pom_resolver::fbc::model::{Channel, ChannelEntry, Package};
use pom_resolver::pin::Pin;
use pom_resolver::select::{
    InstalledBundle, RejectReason, Rejection, Resolution, ResolveError, ResolveRequest, resolve,
};
use semver::Version;

/// One bundle of the drawing.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub name: String,
    pub version: Version,
    /// False for the installed bundle when the channel no longer lists it, and for a hop
    /// target taken from another catalog or channel.
    pub in_channel: bool,
    /// What runs now.
    pub installed: bool,
    /// Admitted by the pin in force now.
    pub in_pin: bool,
    /// 1-based number of the hop that moves to this bundle.
    pub hop: Option<usize>,
    /// Why the resolution from where the walk ends refuses it (module docs). Of the bundles on
    /// the walk only its end carries one (it cannot even stay there).
    pub rejection: Option<RejectReason>,
    /// A bundle-level `olm.deprecations` entry names it.
    pub deprecated: bool,
    /// The channel entry's `skipRange`, as written (shown in the label, since its edges are
    /// drawn only from the bundles the walk stands on).
    pub skip_range: Option<String>,
}

impl Node {
    /// The one class a renderer styles the node by, most telling first: what runs, where the
    /// walk goes, why not, inside the window, outside it.
    pub fn class(&self) -> NodeClass {
        if self.installed {
            NodeClass::Installed
        } else if self.hop.is_some() {
            NodeClass::Hop
        } else if let Some(reason) = &self.rejection {
            match reason {
                RejectReason::NotSuccessor { .. } => NodeClass::NotSuccessor,
                _ => NodeClass::Rejected,
            }
        } else if self.in_pin {
            NodeClass::Candidate
        } else {
            NodeClass::OutsidePin
        }
    }
}

/// How a node is styled. `NotSuccessor` is set apart from the other rejections because it is
/// the common, unalarming one (most bundles of a channel are not one edge away).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum NodeClass {
    Installed,
    Hop,
    Rejected,
    NotSuccessor,
    Candidate,
    OutsidePin,
}

/// Why an edge exists in the catalog (upgrade direction: from the older bundle to the one that
/// may be installed over it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum EdgeKind {
    Replaces,
    Skips,
    SkipRange,
}

/// An edge between two nodes (indices into [`UpgradeGraph::nodes`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    pub from: usize,
    pub to: usize,
    /// Every catalog reason for the edge, sorted; empty for a hop no catalog edge expresses
    /// (a rollback pivot or a manual downgrade, which skip the successor filter).
    pub kinds: Vec<EdgeKind>,
    /// The 1-based hop that takes this edge.
    pub hop: Option<usize>,
}

/// How the walk ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stop {
    /// It settles on the last bundle.
    Settled,
    /// The next move waits (for the operator, or for the last move to settle).
    Held { why: String },
    /// No bundle can be chosen from where it ends (the rejections say why).
    NoCandidate,
    /// Another error ends the walk.
    Blocked { why: String },
    /// The catalog leads back to a bundle already visited.
    Cycle { bundle: String },
    /// A safety stop on very long walks.
    HopLimit,
}

/// A bundle the walk moves to, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HopTo {
    pub name: String,
    pub version: Version,
}

/// The drawing's model.
#[derive(Debug, Clone, PartialEq)]
pub struct UpgradeGraph {
    /// What the drawing is of (a PlatformOperator's name, or the package).
    pub title: String,
    pub catalog: String,
    pub package: String,
    pub channel: String,
    /// The pin in force now; `None` only when the request could not be resolved at all.
    pub pin: Option<Pin>,
    /// Sorted by version, then name.
    pub nodes: Vec<Node>,
    /// Sorted by (from, to).
    pub edges: Vec<Edge>,
    pub stop: Stop,
}

impl UpgradeGraph {
    /// The node named `name`.
    #[cfg(test)]
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// The hop targets in hop order.
    pub fn path(&self) -> Vec<&str> {
        let mut hops: Vec<(usize, &str)> = self
            .nodes
            .iter()
            .filter_map(|n| n.hop.map(|h| (h, n.name.as_str())))
            .collect();
        hops.sort_unstable();
        hops.into_iter().map(|(_, name)| name).collect()
    }
}

/// The graph for `request` after the walk `hops` that ended with `stop`.
///
/// Resolves twice with the caller's request: as given (the pin in force now, and which catalog
/// and channel the resolver used) and from the bundle the walk ends on (the rejections; module
/// docs). A request that cannot be resolved at all for a reason other than "no candidate"
/// (unknown package or channel, ambiguous catalogs) is returned as the resolver's error.
///
/// # Errors
/// The resolver's error, as described.
pub fn for_request(
    title: impl Into<String>,
    request: &ResolveRequest<'_>,
    hops: &[HopTo],
    stop: Stop,
) -> Result<UpgradeGraph, ResolveError> {
    let now = resolve(request);
    let pin = match &now {
        Ok(resolution) => resolution.pin.clone(),
        Err(ResolveError::NoCandidate { pin, .. }) => (**pin).clone(),
        Err(other) => return Err(other.clone()),
    };
    let ends_on = hops.last().map(|hop| InstalledBundle {
        name: hop.name.clone(),
        version: hop.version.clone(),
    });
    let from_end = match &ends_on {
        None => now.clone(),
        Some(last) => {
            let mut step = request.clone();
            step.installed = Some(last.clone());
            resolve(&step)
        }
    };
    let rejected: &[Rejection] = match &from_end {
        Ok(resolution) => &resolution.rejected,
        Err(err) => err.rejections(),
    };
    let (catalog, package, channel) = drawn_channel(request, &now)?;
    Ok(build(&GraphInput {
        title: title.into(),
        catalog,
        package,
        channel,
        installed: request.installed.as_ref(),
        pin: Some(&pin),
        hops,
        rejected,
        stop,
    }))
}

/// The channel the resolver used: the chosen bundle's, else (no candidate) the one of the
/// highest-priority catalog offering the package, found as the resolver finds it.
fn drawn_channel<'a>(
    request: &ResolveRequest<'a>,
    now: &Result<Resolution, ResolveError>,
) -> Result<(&'a str, &'a Package, &'a Channel), ResolveError> {
    let chosen = now.as_ref().ok().map(|r| &r.bundle);
    let mut ordered: Vec<_> = request.catalogs.iter().collect();
    ordered.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let found = ordered.iter().find_map(|(name, _, catalog)| {
        if chosen.is_some_and(|c| c.catalog != *name) {
            return None;
        }
        let package = catalog.packages.get(request.package)?;
        let wanted = request.channel.or(package.default_channel.as_deref())?;
        let channel = package.channels.get(wanted)?;
        Some((*name, package, channel))
    });
    // The resolver found a channel (it answered, or found no candidate in one), so this is
    // reached only if the two lookups disagree; say so rather than draw something else.
    found.ok_or_else(|| ResolveError::UnknownChannel {
        package: request.package.to_owned(),
        channel: request.channel.unwrap_or("(defaultChannel)").to_owned(),
        available: Vec::new(),
    })
}

/// Everything [`build`] lays over the channel.
#[derive(Debug)]
pub struct GraphInput<'a> {
    pub title: String,
    pub catalog: &'a str,
    pub package: &'a Package,
    pub channel: &'a Channel,
    pub installed: Option<&'a InstalledBundle>,
    pub pin: Option<&'a Pin>,
    pub hops: &'a [HopTo],
    /// The resolver's rejections (only those from `catalog` are drawn).
    pub rejected: &'a [Rejection],
    pub stop: Stop,
}

/// Lays the answers over the channel (pure bookkeeping, no judgement; module docs).
pub fn build(input: &GraphInput<'_>) -> UpgradeGraph {
    let package = input.package;
    let mut nodes: Vec<Node> = input
        .channel
        .entries
        .iter()
        .filter_map(|entry| {
            package
                .bundles
                .get(&entry.name)
                .map(|bundle| (entry, bundle))
        })
        .map(|(entry, bundle)| Node {
            name: bundle.name.clone(),
            version: bundle.version.clone(),
            in_channel: true,
            installed: false,
            in_pin: false,
            hop: None,
            rejection: None,
            deprecated: package.deprecations.bundles.contains_key(&bundle.name),
            skip_range: entry.skip_range.as_ref().map(ToString::to_string),
        })
        .collect();
    let mut add_missing = |name: &str, version: &Version| {
        if !nodes.iter().any(|n| n.name == name) {
            nodes.push(Node {
                name: name.to_owned(),
                version: version.clone(),
                in_channel: false,
                installed: false,
                in_pin: false,
                hop: None,
                rejection: None,
                deprecated: false,
                skip_range: None,
            });
        }
    };
    if let Some(installed) = input.installed {
        add_missing(&installed.name, &installed.version);
    }
    for hop in input.hops {
        add_missing(&hop.name, &hop.version);
    }
    nodes.sort_by(|a, b| {
        pom_resolver::version::cmp_version_release(&a.version, &b.version)
            .then_with(|| a.name.cmp(&b.name))
    });

    let rejections: BTreeMap<&str, &RejectReason> = input
        .rejected
        .iter()
        .filter(|r| &*r.catalog == input.catalog)
        .map(|r| (r.bundle.as_str(), &r.reason))
        .collect();
    let installed_version = input.installed.map(|i| &i.version);
    let ends_on = input
        .hops
        .last()
        .map(|h| h.name.as_str())
        .or(input.installed.map(|i| i.name.as_str()))
        .unwrap_or_default()
        .to_owned();
    for node in &mut nodes {
        node.installed = input.installed.is_some_and(|i| i.name == node.name);
        node.hop = input
            .hops
            .iter()
            .position(|h| h.name == node.name)
            .map(|i| i + 1);
        let rejection = rejections.get(node.name.as_str()).copied();
        // The window is the pin in force now, by the pin's own rule (the rejections may come
        // from a later resolution, under a narrower pin: module docs).
        node.in_pin = input
            .pin
            .is_none_or(|pin| pin.admits(&node.version, installed_version));
        // On the walk, only its end can be refused (it cannot stay: say why); a bundle the walk
        // passed through is "not a successor" of where it ends, which is noise.
        let walked = node.installed || node.hop.is_some();
        if !walked || node.name == ends_on {
            node.rejection = rejection.cloned();
        }
    }

    let index: BTreeMap<&str, usize> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    // skipRange edges only from where the walk stands (module docs): those are the edges the
    // resolver judges; every bundle of a range to every later one would be n² arrows.
    let walked: Vec<usize> = nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.installed || n.hop.is_some())
        .map(|(i, _)| i)
        .collect();
    let mut edges: BTreeMap<(usize, usize), Vec<EdgeKind>> = BTreeMap::new();
    for entry in &input.channel.entries {
        let Some(&to) = index.get(entry.name.as_str()) else {
            continue;
        };
        for (from, kind) in sources_of(entry, &nodes, &index) {
            if from != to && (kind != EdgeKind::SkipRange || walked.contains(&from)) {
                edges.entry((from, to)).or_default().push(kind);
            }
        }
    }
    let mut from = input
        .installed
        .and_then(|i| index.get(i.name.as_str()).copied());
    let mut hop_edges = BTreeMap::new();
    for (number, hop) in input.hops.iter().enumerate() {
        let Some(&to) = index.get(hop.name.as_str()) else {
            continue;
        };
        if let Some(from) = from {
            edges.entry((from, to)).or_default();
            hop_edges.insert((from, to), number + 1);
        }
        from = Some(to);
    }
    let edges = edges
        .into_iter()
        .map(|((from, to), mut kinds)| {
            kinds.sort_unstable();
            kinds.dedup();
            Edge {
                from,
                to,
                kinds,
                hop: hop_edges.get(&(from, to)).copied(),
            }
        })
        .collect();

    UpgradeGraph {
        title: input.title.clone(),
        catalog: input.catalog.to_owned(),
        package: package.name.clone(),
        channel: input.channel.name.clone(),
        pin: input.pin.cloned(),
        nodes,
        edges,
        stop: input.stop.clone(),
    }
}

/// The nodes an entry may be installed over, with why: the same three edge rules as the
/// resolver's successor filter (`replaces`, `skips`, `skipRange` containing the version).
fn sources_of(
    entry: &ChannelEntry,
    nodes: &[Node],
    index: &BTreeMap<&str, usize>,
) -> Vec<(usize, EdgeKind)> {
    let mut sources = Vec::new();
    if let Some(&from) = entry.replaces.as_deref().and_then(|r| index.get(r)) {
        sources.push((from, EdgeKind::Replaces));
    }
    sources.extend(
        entry
            .skips
            .iter()
            .filter_map(|s| index.get(s.as_str()))
            .map(|&from| (from, EdgeKind::Skips)),
    );
    if let Some(range) = &entry.skip_range {
        sources.extend(
            nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| range.contains(&n.version))
                .map(|(from, _)| (from, EdgeKind::SkipRange)),
        );
    }
    sources
}

/// A short label for a rejection (the full text is the resolver's `Display`).
pub fn short_reason(reason: &RejectReason) -> String {
    match reason {
        RejectReason::NotSuccessor { installed_version } => {
            format!("not a successor of {installed_version}")
        }
        RejectReason::OutsidePin { pin, .. } => format!("outside pin {pin}"),
        RejectReason::PreReleaseOutsidePin { pin, .. } => format!("pre-release, pin {pin}"),
        RejectReason::OutsideVersionRange { range } => format!("outside versionRange {range}"),
        RejectReason::MaxOpenShiftVersionTooLow { max, cluster, .. } => {
            format!("maxOpenShiftVersion {}.{} < {cluster}", max.0, max.1)
        }
        RejectReason::InvalidMaxOpenShiftVersion { raw, .. } => {
            format!("invalid maxOpenShiftVersion {raw:?}")
        }
        RejectReason::MinKubeVersionTooHigh { min_kube, kube } => {
            format!("minKubeVersion {min_kube} > {kube}")
        }
        RejectReason::InvalidMinKubeVersion { raw } => format!("invalid minKubeVersion {raw:?}"),
        RejectReason::HasDependencies { dependencies } => {
            format!("dependencies: {}", dependencies.join(", "))
        }
    }
}

/// The caption under a drawing: the pin, and how the walk ended.
pub fn caption(graph: &UpgradeGraph) -> String {
    let pin = graph
        .pin
        .as_ref()
        .map_or_else(|| "none".to_owned(), ToString::to_string);
    let path = graph.path();
    let walk = if path.is_empty() {
        "no move".to_owned()
    } else {
        format!("{} hop(s) to {}", path.len(), path.join(" -> "))
    };
    let stop = match &graph.stop {
        Stop::Settled => "settles".to_owned(),
        Stop::Held { why } => format!("then held: {why}"),
        Stop::NoCandidate => "no bundle can be chosen".to_owned(),
        Stop::Blocked { why } => format!("then stops: {why}"),
        Stop::Cycle { bundle } => format!("then stops: the catalog leads back to {bundle}"),
        Stop::HopLimit => "then stops: too many hops".to_owned(),
    };
    format!("pin {pin}; {walk}; {stop}")
}

/// Colours and strokes per node, shared by both renderers so the two drawings read alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Look {
    pub fill: &'static str,
    pub stroke: &'static str,
    pub text: &'static str,
    /// Thick border: inside the pin's window.
    pub thick: bool,
    /// Dashed border: not in the channel (installed bundle gone from the catalog).
    pub dashed: bool,
}

/// The look of `node`.
pub fn look(node: &Node) -> Look {
    let (fill, text) = match node.class() {
        NodeClass::Installed => ("#cfe2ff", "#052c65"),
        NodeClass::Hop => ("#d1e7dd", "#0a3622"),
        NodeClass::Rejected => ("#f8d7da", "#58151c"),
        NodeClass::NotSuccessor => ("#f1f1f1", "#6c757d"),
        NodeClass::Candidate => ("#fff3cd", "#664d03"),
        NodeClass::OutsidePin => ("#ffffff", "#6c757d"),
    };
    Look {
        fill,
        stroke: if node.in_pin { "#b58900" } else { "#adb5bd" },
        text,
        thick: node.in_pin,
        dashed: !node.in_channel,
    }
}

/// The lines of a node's label: name, version, then what POM makes of it.
pub fn label_lines(node: &Node) -> Vec<String> {
    let mut lines = vec![node.name.clone()];
    if !node.name.contains(&node.version.to_string()) {
        lines.push(node.version.to_string());
    }
    if node.installed {
        lines.push("installed".to_owned());
    }
    if let Some(hop) = node.hop {
        lines.push(format!("hop {hop}"));
    }
    if let Some(reason) = &node.rejection {
        lines.push(short_reason(reason));
    } else if !node.installed && node.hop.is_none() && node.in_pin {
        lines.push("candidate".to_owned());
    }
    if node.deprecated {
        lines.push("deprecated".to_owned());
    }
    if let Some(range) = &node.skip_range {
        lines.push(format!("skipRange {range}"));
    }
    if !node.in_channel {
        lines.push("not in this channel".to_owned());
    }
    lines
}

/// An edge's label: the hop first, then the catalog reasons.
pub fn edge_label(edge: &Edge) -> String {
    let mut parts: Vec<String> = edge.hop.map(|h| format!("hop {h}")).into_iter().collect();
    parts.extend(edge.kinds.iter().map(|k| {
        match k {
            EdgeKind::Replaces => "replaces",
            EdgeKind::Skips => "skips",
            EdgeKind::SkipRange => "skipRange",
        }
        .to_owned()
    }));
    if edge.hop.is_some() && edge.kinds.is_empty() {
        parts.push("no catalog edge".to_owned());
    }
    parts.join(", ")
}

/// The heading of one drawing.
pub fn heading(graph: &UpgradeGraph) -> String {
    format!(
        "{}: package {}, channel {} (catalog {})",
        graph.title, graph.package, graph.channel, graph.catalog
    )
}

#[cfg(test)]
mod tests;
