//! Candidate selection (§5): which bundle a platform operator should run, and why not the others.
//!
//! [`resolve`] applies the filters of §5 in order to every bundle of the package's channel in
//! every catalog offering the package, records the first filter that refused each bundle, and
//! ranks what is left. It is a pure function of its [`ResolveRequest`], so the controller,
//! `pomctl resolve` and `pomctl plan` all get the same answer for the same snapshot.
//!
//! Order of the filters (the first failing one is the reported reason):
//! 1. successor: the installed bundle itself (same name, or same version and release as OLM v1's
//!    `ExactVersionRelease`) or a direct successor in the channel (`replaces`, `skips`,
//!    `skipRange`). The installed bundle need not be in the catalog. Skipped only for the
//!    rollback pivot and for a manual downgrade (both below).
//! 2. the pin (§4.2), then the admin's `versionRange` (Masterminds rules). Under
//!    [`PinPolicy::Unpinned`] there is no pin (see below).
//! 3. compatibility with the cluster the bundle will run on ([`ClusterPhase::running_on`]):
//!    `maxOpenShiftVersion` (only with a ClusterVersion) and `minKubeVersion` (only with a
//!    Kubernetes version).
//! 4. dependencies: refused, naming them.
//!
//! Ranking: in each catalog, a move that is not a manual downgrade first (see below), then
//! non-deprecated, then highest version, then highest release (build metadata), then the
//! installed bundle, then bundle name; across catalogs, a winner that is not a manual downgrade
//! first, then a non-deprecated one, then higher priority; a tie at the top is an error.
//! "Deprecated" means a *bundle-level* `olm.deprecations` entry (schema `olm.bundle`), exactly
//! as OLM v1 ranks (`compare.ByDeprecationFunc`, `isDeprecated`): a package- or channel-level
//! deprecation covers every candidate alike, so counting it would only blur the bundle-level
//! signal (a package-deprecated catalog could then pick a deprecated bundle over a sound one,
//! or lose to a lower-priority catalog). Those two are still reported, in
//! [`Resolution::package_deprecation`] and [`Resolution::channel_deprecation`].
//!
//! Pin policy: the controller resolves under [`PinPolicy::FollowCluster`] (the pin of §4.2,
//! from `cluster`). `pomctl resolve` without `--cluster-version` uses [`PinPolicy::Unpinned`]:
//! no pin at all, so the answer is OLM v1 operator-controller's: from the installed bundle, the
//! highest successor allowed by `versionRange`, pre-releases included unless that range
//! excludes them (Masterminds rules). Every other filter still applies.
//!
//! Rollback pivot: during a rollback the pin is `=X.Y.Z`, unless the installed bundle (looked up
//! by name in the channel) does not run on the cluster rolled back to, judged by every check of
//! filter 3 (`maxOpenShiftVersion` against the rollback target, `minKubeVersion` against the
//! API server's version: a lower cluster is excluded by the second, and only in a forced
//! rollback by the first). Then the selector pivots
//! down under [`Pin::rollback_pivot`] (`>=X.0.0 <X.Y.Z`) and *skips the successor filter*: catalog
//! edges only point forward, so no lower bundle is ever a successor, and the pivot's purpose is
//! to get back to a bundle that ran on the older cluster. Every other filter still applies, and
//! the highest bundle left wins (the smallest step down: one move). When none is left, the
//! installed bundle keeps running and the `NoCandidate` error says that it does not run on the
//! cluster rolled back to and that no lower bundle does either.
//!
//! Manual downgrade: `spec.steadyStateVersionRange` is how an admin moves a PO by hand, down as
//! well as up (§3). Catalog edges only point forward, so a lower bundle is never a successor and
//! the successor filter alone would refuse every downgrade. Hence, *only* while the pin is the
//! admin's override ([`PinReason::Override`]: cluster steady, range set) *and* that range
//! excludes the installed version, bundles whose version is lower than the installed one (by
//! semver precedence) skip the successor filter: a downgrade is an explicit admin request.
//! Every other filter still applies to them (the override itself, `versionRange`,
//! OpenShift/Kubernetes compatibility, dependencies). Upward moves under the override still
//! need a successor edge, and no other pin (steady `=X.Y.Z`, patch or minor update, rollback
//! hold, unpinned) ever skips it, so a lower bundle outside the override keeps being refused as
//! "not a successor". The ranking that follows:
//! - the override admits the installed version: the PO stays (or moves up to a successor the
//!   override admits, as before). An override that still contains the running version is not a
//!   request to move down, so lower bundles keep the successor filter, even when the installed
//!   bundle is deprecated or gone from the catalog;
//! - it excludes the installed version and admits a higher successor: that successor wins over
//!   any lower bundle, whatever their deprecation or catalog priority (normal upgrade rules; a
//!   downgrade is the answer only when there is no way up);
//! - it excludes the installed version and admits only lower bundles: the highest of them (the
//!   smallest downgrade that satisfies the admin), non-deprecated first as everywhere in §5.
//!   One move, however many edges lie between; once it runs, the override admits the installed
//!   version again and the first rule applies (no further move down).
//!
//! Pre-releases at install: with nothing installed there is no pin and only releases are
//! picked; a pre-release is installed only when the admin's `versionRange` admits it explicitly.
//! (Under [`PinPolicy::Unpinned`] pre-releases are candidates like any version, as in OLM v1.)

mod compat;
mod plan;
mod pre_update;
mod reject;

use std::cmp::Ordering;
use std::fmt;

use semver::Version;
use serde::{Deserialize, Serialize};

use crate::cluster::ClusterPhase;
use crate::fbc::model::{Bundle, Catalog, Channel, ChannelEntry, MaxOpenShiftVersion, Package};
use crate::pin::{Pin, PinReason, pin_for};
use crate::range::VersionRange;
use crate::version::cmp_version_release;

pub use plan::{Hop, HopPlan, PlanEnd, plan_hops};
pub use pre_update::{NoPath, PreUpdate, Shortfall, pre_update_path};
pub use reject::{RejectReason, Rejection};

/// The bundle a PO runs now. Its version is carried because the bundle may have vanished from
/// the catalog (OLM v1 allows that too).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstalledBundle {
    pub name: String,
    pub version: Version,
}

/// One catalog to consider: `(name, priority, content)`. Higher priority wins.
pub type CatalogInput<'a> = (&'a str, i32, &'a Catalog);

/// Whether the cluster pins the resolution (§4.2) or there is no pin at all (§9).
///
/// A separate, explicit field rather than a meaning of `cluster: None`, because `None` already
/// means something else to the controller (plain Kubernetes: steady, pinned `=X.Y.Z`), and a
/// caller wanting OLM v1's unpinned answer must never get a steady pin by omission. It has no
/// `Default` for the same reason: each caller says which one it means.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PinPolicy {
    /// The pin of §4.2 from [`ResolveRequest::cluster`] (`None` counts as steady): the
    /// controller's and `pomctl plan`'s policy, and `pomctl resolve --cluster-version`'s.
    FollowCluster,
    /// No pin ([`Pin::unpinned`], reason `Unpinned`): pure successor resolution as OLM v1
    /// operator-controller does it, the highest successor of the installed bundle allowed by
    /// `versionRange`, pre-releases included unless that range excludes them.
    /// `steady_state_range` is ignored (there is no steady pin to replace); `cluster`, when
    /// given, still drives the `maxOpenShiftVersion` check. `pomctl resolve` without
    /// `--cluster-version` uses it.
    Unpinned,
}

/// Everything a resolution depends on.
#[derive(Debug, Clone)]
pub struct ResolveRequest<'a> {
    /// The catalogs to consider (all catalogs, or the one the PO names).
    pub catalogs: &'a [CatalogInput<'a>],
    /// `spec.package.name`.
    pub package: &'a str,
    /// `spec.package.channel`; `None` = each catalog's `defaultChannel` for the package.
    pub channel: Option<&'a str>,
    /// What runs now; `None` before the first install.
    pub installed: Option<InstalledBundle>,
    /// `spec.package.versionRange`, ANDed with the pin at all times.
    pub version_range: Option<VersionRange>,
    /// `spec.steadyStateVersionRange`, replacing `=X.Y.Z` while the cluster is steady (ignored
    /// under [`PinPolicy::Unpinned`]).
    pub steady_state_range: Option<VersionRange>,
    /// The cluster phase; `None` without a ClusterVersion (plain Kubernetes: steady, no
    /// OpenShift compatibility check).
    pub cluster: Option<ClusterPhase>,
    /// Whether `cluster` pins the resolution or there is no pin (see [`PinPolicy`]).
    pub pin_policy: PinPolicy,
    /// The API server's version; `None` skips the `minKubeVersion` check.
    pub kube_version: Option<Version>,
}

/// The bundle selected, with what the controller needs to install it and report it.
#[derive(Debug, Clone, PartialEq)]
pub struct ChosenBundle {
    pub name: String,
    pub version: Version,
    /// Bundle image; `None` when the catalog carries the objects (`olm.bundle.object`).
    pub image: Option<String>,
    pub catalog: String,
    pub channel: String,
    /// `olm.maxOpenShiftVersion`, for `status.maxOpenShiftVersion` and the verdict.
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
    /// The bundle-level deprecation message (an `olm.deprecations` entry of schema
    /// `olm.bundle` naming this bundle): set only when no non-deprecated candidate was left.
    pub deprecation: Option<String>,
}

/// The answer: the bundle to run, the pin it was chosen under and every bundle refused.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub bundle: ChosenBundle,
    pub pin: Pin,
    /// The chosen bundle is the installed one: nothing to do.
    pub stays: bool,
    /// Bundles refused by a filter: catalogs in priority order (then by name), each sorted by
    /// version, release and bundle name.
    pub rejected: Vec<Rejection>,
    /// The package-level deprecation message of the chosen bundle's catalog, if any. Reported
    /// (for status) but never ranked on: it applies to every candidate alike (OLM v1).
    pub package_deprecation: Option<String>,
    /// The channel-level deprecation message for the chosen bundle's channel in its catalog, if
    /// any. Reported, never ranked on, for the same reason.
    pub channel_deprecation: Option<String>,
}

/// Why no bundle was chosen. Messages name what was asked and what exists.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResolveError {
    #[error(
        "no catalog to resolve package {package:?} from: create a Catalog, or check spec.package.catalog"
    )]
    NoCatalogs { package: String },
    #[error(
        "package {package:?} in catalog {catalog} is invalid, so the catalog does not serve it \
         (its other packages are served): {reason}; ask the catalog's publisher to fix it"
    )]
    InvalidPackage {
        package: String,
        catalog: String,
        reason: String,
    },
    #[error(
        "package {package:?} is in none of the catalogs considered ({}); check spec.package.name \
         (packages available: {})",
        catalogs.join(", "),
        list_some(known)
    )]
    UnknownPackage {
        package: String,
        catalogs: Vec<String>,
        known: Vec<String>,
    },
    #[error(
        "channel {channel:?} does not exist in package {package:?} (channels available: {}); \
         channel names are case-sensitive: fix spec.package.channel{}",
        available.join(", "),
        case_hint(channel, available)
    )]
    UnknownChannel {
        package: String,
        channel: String,
        available: Vec<String>,
    },
    #[error(
        "package {package:?} names no usable defaultChannel in any catalog (channels available: {}); \
         set spec.package.channel",
        available.join(", ")
    )]
    NoDefaultChannel {
        package: String,
        available: Vec<String>,
    },
    #[error(
        "catalogs {} all offer package {package:?} at the same priority {priority}: POM will not \
         pick one at random; set spec.package.catalog on the PlatformOperator or give the catalogs \
         different spec.priority values",
        catalogs.join(" and ")
    )]
    AmbiguousCatalogs {
        package: String,
        priority: i32,
        catalogs: Vec<String>,
    },
    #[error("{}", no_candidate_message(package, channel, pin, version_range.as_deref(), installed.as_deref(), rejected))]
    NoCandidate {
        package: String,
        channel: String,
        pin: Box<Pin>,
        version_range: Option<String>,
        installed: Option<Box<InstalledBundle>>,
        rejected: Vec<Rejection>,
    },
}

impl ResolveError {
    /// The rejections carried by [`ResolveError::NoCandidate`] (empty for the other errors).
    pub fn rejections(&self) -> &[Rejection] {
        match self {
            ResolveError::NoCandidate { rejected, .. } => rejected,
            _ => &[],
        }
    }
}

fn list_some(names: &[String]) -> String {
    const SHOWN: usize = 30;
    if names.is_empty() {
        return "none".to_owned();
    }
    let mut text = names
        .iter()
        .take(SHOWN)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > SHOWN {
        text.push_str(&format!(" and {} more", names.len() - SHOWN));
    }
    text
}

fn case_hint(channel: &str, available: &[String]) -> String {
    available
        .iter()
        .find(|name| name.eq_ignore_ascii_case(channel))
        .map(|name| format!(" (did you mean {name:?}?)"))
        .unwrap_or_default()
}

fn no_candidate_message(
    package: &str,
    channel: &str,
    pin: &Pin,
    version_range: Option<&str>,
    installed: Option<&InstalledBundle>,
    rejected: &[Rejection],
) -> String {
    let mut text =
        format!("no bundle of package {package:?} in channel {channel:?} satisfies pin {pin}");
    if let Some(range) = version_range {
        text.push_str(&format!(" and versionRange {range:?}"));
    }
    match installed {
        Some(installed) if pin.is_rollback_pivot() => text.push_str(&format!(
            "; keeping the installed bundle {} ({}), although it does not run on the cluster being rolled back to: no lower bundle of its major runs there either",
            installed.name, installed.version
        )),
        Some(installed) => text.push_str(&format!(
            "; keeping the installed bundle {} ({})",
            installed.name, installed.version
        )),
        None => text.push_str("; nothing is installed"),
    }
    if rejected.is_empty() {
        text.push_str("; the channel has no bundles");
    }
    for rejection in rejected {
        text.push_str(&format!("\n- {rejection}"));
    }
    text
}

/// One catalog's channel for the package.
struct Source<'a> {
    catalog: &'a str,
    priority: i32,
    package: &'a Package,
    channel: &'a Channel,
}

/// A bundle that passed every filter.
struct Candidate<'a> {
    source: usize,
    bundle: &'a Bundle,
    /// Bundle-level deprecation only: the one that ranks (see module docs).
    deprecation: Option<&'a str>,
    /// Admitted only as a manual downgrade (below the installed version, successor filter
    /// skipped): ranks after every other candidate, so a way up always wins (module docs).
    downgrade: bool,
}

/// Resolves the bundle a PO should run (§5). See the module docs for the exact rules.
pub fn resolve(req: &ResolveRequest<'_>) -> Result<Resolution, ResolveError> {
    let sources = find_sources(req)?;
    let installed = req.installed.as_ref();
    let installed_version = installed.map(|bundle| &bundle.version);

    let mut pin = match req.pin_policy {
        PinPolicy::FollowCluster => pin_for(
            installed_version,
            req.cluster.as_ref(),
            req.steady_state_range.as_ref(),
        ),
        PinPolicy::Unpinned => Pin::unpinned(),
    };
    // A rollback holds what runs unless it does not run on the cluster rolled back to, judged
    // by every compatibility check of §5 (a lower OpenShift or Kubernetes version is excluded
    // by `minKubeVersion`, never by `maxOpenShiftVersion` alone).
    let mut installed_incompatibility = None;
    if pin.reason == PinReason::Rollback
        && let Some(installed) = installed
        && let Some(bundle) = find_installed_bundle(&sources, &installed.name)
        && let Err(reason) = check_runs_on(req, bundle)
    {
        pin = Pin::rollback_pivot(&installed.version);
        installed_incompatibility = Some(reason);
    }
    let pivot = pin.is_rollback_pivot();
    // A manual downgrade is asked for only when the override excludes what runs (module docs).
    let downgrade_from = installed
        .filter(|installed| {
            pin.reason == PinReason::Override && !pin.admits(&installed.version, None)
        })
        .map(|installed| &installed.version);

    let entries: usize = sources
        .iter()
        .map(|source| source.channel.entries.len())
        .sum();
    let mut rejected = Vec::with_capacity(entries);
    let mut candidates = Vec::new();
    for (index, source) in sources.iter().enumerate() {
        let catalog_name: std::sync::Arc<str> = source.catalog.into();
        // Dangling entries name no bundle: nothing that could be installed, nothing to explain.
        let mut entries = entries_with_bundles(source);
        // Evaluating in version order makes `rejected` come out sorted without moving it.
        entries.sort_by(|a, b| {
            cmp_version_release(&a.1.version, &b.1.version).then_with(|| a.1.name.cmp(&b.1.name))
        });
        for (entry, bundle) in entries {
            let downgrade = downgrade_from
                .is_some_and(|from| bundle.version.cmp_precedence(from) == Ordering::Less);
            let verdict = if pivot && installed.is_some_and(|i| i.name == bundle.name) {
                Err(installed_incompatibility
                    .clone()
                    .unwrap_or_else(|| RejectReason::OutsidePin {
                        pin: pin.range.clone(),
                        reason: pin.reason,
                    }))
            } else {
                evaluate(req, entry, bundle, &pin, pivot || downgrade)
            };
            match verdict {
                Ok(()) => candidates.push(Candidate {
                    source: index,
                    bundle,
                    deprecation: bundle_deprecation(source, &bundle.name),
                    downgrade,
                }),
                Err(reason) => rejected.push(Rejection {
                    bundle: bundle.name.clone(),
                    version: bundle.version.clone(),
                    catalog: catalog_name.clone(),
                    reason,
                }),
            }
        }
    }

    let Some(winner) = pick(req, &sources, &candidates)? else {
        return Err(ResolveError::NoCandidate {
            package: req.package.to_owned(),
            channel: channel_label(&sources),
            pin: Box::new(pin),
            version_range: req.version_range.as_ref().map(ToString::to_string),
            installed: installed.cloned().map(Box::new),
            rejected,
        });
    };
    let source = &sources[winner.source];
    let bundle = winner.bundle;
    Ok(Resolution {
        stays: installed.is_some_and(|installed| installed.name == bundle.name),
        bundle: ChosenBundle {
            name: bundle.name.clone(),
            version: bundle.version.clone(),
            image: bundle.image.clone(),
            catalog: source.catalog.to_owned(),
            channel: source.channel.name.clone(),
            max_openshift_version: bundle.properties.max_openshift_version.clone(),
            deprecation: winner.deprecation.map(str::to_owned),
        },
        pin,
        rejected,
        package_deprecation: source.package.deprecations.package.clone(),
        channel_deprecation: source
            .package
            .deprecations
            .channels
            .get(&source.channel.name)
            .cloned(),
    })
}

/// Pairs each channel entry with its bundle, dropping dangling entries.
///
/// Entries and bundles are both sorted by name, so this walks the two side by side instead of
/// searching the bundle map once per entry (a resolution over a cold, large catalog is dominated
/// by those searches). An entry the walk misses (unsorted input) falls back to a lookup, so the
/// result never depends on the order.
fn entries_with_bundles<'a>(source: &Source<'a>) -> Vec<(&'a ChannelEntry, &'a Bundle)> {
    let bundles = &source.package.bundles;
    let mut cursor = bundles.iter().peekable();
    let mut paired = Vec::with_capacity(source.channel.entries.len());
    for entry in &source.channel.entries {
        while cursor
            .next_if(|(name, _)| name.as_str() < entry.name.as_str())
            .is_some()
        {}
        let bundle = match cursor.peek() {
            Some((name, bundle)) if **name == entry.name => Some(*bundle),
            _ => bundles.get(&entry.name),
        };
        if let Some(bundle) = bundle {
            paired.push((entry, bundle));
        }
    }
    paired
}

/// Finds the package and its channel in each catalog (§5: unknown names are typed errors).
fn find_sources<'a>(req: &ResolveRequest<'a>) -> Result<Vec<Source<'a>>, ResolveError> {
    if req.catalogs.is_empty() {
        return Err(ResolveError::NoCatalogs {
            package: req.package.to_owned(),
        });
    }
    let mut ordered: Vec<&CatalogInput<'a>> = req.catalogs.iter().collect();
    ordered.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(b.0)));

    let with_package: Vec<(&'a str, i32, &'a Package)> = ordered
        .iter()
        .filter_map(|(name, priority, catalog)| {
            catalog
                .packages
                .get(req.package)
                .map(|package| (*name, *priority, package))
        })
        .collect();
    if with_package.is_empty() {
        // Left out of a catalog for being inconsistent: say why, not "unknown".
        if let Some((catalog, error)) = ordered.iter().find_map(|(name, _, catalog)| {
            catalog
                .invalid_packages
                .get(req.package)
                .map(|error| (*name, error))
        }) {
            return Err(ResolveError::InvalidPackage {
                package: req.package.to_owned(),
                catalog: catalog.to_owned(),
                reason: error.to_string(),
            });
        }
        let mut known: Vec<String> = ordered
            .iter()
            .flat_map(|(_, _, catalog)| catalog.packages.keys().cloned())
            .collect();
        known.sort();
        known.dedup();
        return Err(ResolveError::UnknownPackage {
            package: req.package.to_owned(),
            catalogs: ordered
                .iter()
                .map(|(name, _, _)| (*name).to_owned())
                .collect(),
            known,
        });
    }

    let mut sources = Vec::new();
    for (catalog, priority, package) in &with_package {
        let wanted = req.channel.or(package.default_channel.as_deref());
        if let Some(channel) = wanted.and_then(|name| package.channels.get(name)) {
            sources.push(Source {
                catalog,
                priority: *priority,
                package,
                channel,
            });
        }
    }
    if sources.is_empty() {
        let mut available: Vec<String> = with_package
            .iter()
            .flat_map(|(_, _, package)| package.channels.keys().cloned())
            .collect();
        available.sort();
        available.dedup();
        return Err(match req.channel {
            Some(channel) => ResolveError::UnknownChannel {
                package: req.package.to_owned(),
                channel: channel.to_owned(),
                available,
            },
            None => ResolveError::NoDefaultChannel {
                package: req.package.to_owned(),
                available,
            },
        });
    }
    Ok(sources)
}

fn find_installed_bundle<'a>(sources: &[Source<'a>], name: &str) -> Option<&'a Bundle> {
    sources.iter().find_map(|source| {
        source
            .channel
            .entries
            .iter()
            .any(|entry| entry.name == name)
            .then(|| source.package.bundles.get(name))
            .flatten()
    })
}

/// Runs the filters of §5 on one bundle; `Err` carries the first one that refused it.
///
/// `skip_successor` is set for the rollback pivot and a manual downgrade, the two moves down
/// that no catalog edge can express (module docs); every other filter runs regardless.
fn evaluate(
    req: &ResolveRequest<'_>,
    entry: &ChannelEntry,
    bundle: &Bundle,
    pin: &Pin,
    skip_successor: bool,
) -> Result<(), RejectReason> {
    let installed = req.installed.as_ref();
    if let Some(installed) = installed
        && !skip_successor
        && !is_installed_itself(bundle, installed)
        && !is_direct_successor(entry, installed)
    {
        return Err(RejectReason::NotSuccessor {
            installed_version: installed.version.clone(),
        });
    }
    check_pin(
        pin,
        &bundle.version,
        installed.map(|i| &i.version),
        req.version_range.as_ref(),
    )?;
    if let Some(range) = &req.version_range
        && !range.matches(&bundle.version)
    {
        return Err(RejectReason::OutsideVersionRange {
            range: range.to_string(),
        });
    }
    check_runs_on(req, bundle)?;
    if !bundle.properties.dependencies.is_empty() {
        return Err(RejectReason::HasDependencies {
            dependencies: bundle
                .properties
                .dependencies
                .iter()
                .map(reject::describe_dependency)
                .collect(),
        });
    }
    Ok(())
}

/// Whether `bundle` runs on the cluster it would run on (§5 step 3), by every compatibility
/// check the request can make: `maxOpenShiftVersion` against [`ClusterPhase::running_on`]
/// (only with a ClusterVersion) and `minKubeVersion` against the API server's version (only
/// when it is known). The one place both are asked, for candidates and for the rollback's
/// judgement of what runs alike.
fn check_runs_on(req: &ResolveRequest<'_>, bundle: &Bundle) -> Result<(), RejectReason> {
    if let Some(phase) = &req.cluster {
        compat::check_openshift(bundle, phase.running_on())?;
    }
    if let Some(kube) = &req.kube_version {
        compat::check_kube(bundle, kube)?;
    }
    Ok(())
}

/// OLM v1's `ExactVersionRelease`: the installed bundle, by name or by identical version and
/// release (build metadata included).
fn is_installed_itself(bundle: &Bundle, installed: &InstalledBundle) -> bool {
    bundle.name == installed.name || bundle.version == installed.version
}

/// OLM v1's legacy successor rule: the entry replaces the installed bundle, skips it, or has a
/// `skipRange` containing its version. Any entry of the channel counts (no chain is walked).
pub(crate) fn is_direct_successor(entry: &ChannelEntry, installed: &InstalledBundle) -> bool {
    entry.replaces.as_deref() == Some(installed.name.as_str())
        || entry.skips.contains(&installed.name)
        || entry
            .skip_range
            .as_ref()
            .is_some_and(|range| range.contains(&installed.version))
}

/// The pin check, including the install-time pre-release exception (see module docs).
fn check_pin(
    pin: &Pin,
    version: &Version,
    installed: Option<&Version>,
    version_range: Option<&VersionRange>,
) -> Result<(), RejectReason> {
    if pin.admits(version, installed) {
        return Ok(());
    }
    let prerelease = !version.pre.is_empty();
    if prerelease
        && pin.reason == PinReason::Install
        && version_range.is_some_and(|r| r.matches(version))
    {
        return Ok(());
    }
    if prerelease && pin.contains(version) {
        return Err(RejectReason::PreReleaseOutsidePin {
            pin: pin.range.clone(),
            reason: pin.reason,
        });
    }
    Err(RejectReason::OutsidePin {
        pin: pin.range.clone(),
        reason: pin.reason,
    })
}

/// The bundle-level deprecation message of a bundle, if any: the only deprecation that ranks
/// (OLM v1 `isDeprecated` looks at `olm.bundle` references alone).
fn bundle_deprecation<'a>(source: &Source<'a>, bundle: &str) -> Option<&'a str> {
    source
        .package
        .deprecations
        .bundles
        .get(bundle)
        .map(String::as_str)
}

/// Ranks the candidates (see module docs); `Ok(None)` when there are none.
fn pick<'c, 'a>(
    req: &ResolveRequest<'_>,
    sources: &[Source<'a>],
    candidates: &'c [Candidate<'a>],
) -> Result<Option<&'c Candidate<'a>>, ResolveError> {
    let installed = req.installed.as_ref();
    let mut best_per_source: Vec<&Candidate<'a>> = Vec::new();
    for index in 0..sources.len() {
        let best = candidates
            .iter()
            .filter(|candidate| candidate.source == index)
            .max_by(|a, b| within_catalog(a, b, installed));
        best_per_source.extend(best);
    }
    // Not a downgrade, not deprecated, priority: a higher-priority catalog offering only a lower
    // bundle must not turn an available upgrade into a downgrade (module docs).
    let rank = |candidate: &Candidate<'_>| {
        (
            !candidate.downgrade,
            candidate.deprecation.is_none(),
            sources[candidate.source].priority,
        )
    };
    let Some(top) = best_per_source
        .iter()
        .copied()
        .max_by_key(|candidate| rank(candidate))
    else {
        return Ok(None);
    };
    let top_rank = rank(top);
    let tied: Vec<String> = best_per_source
        .iter()
        .filter(|candidate| rank(candidate) == top_rank)
        .map(|candidate| sources[candidate.source].catalog.to_owned())
        .collect();
    if tied.len() > 1 {
        return Err(ResolveError::AmbiguousCatalogs {
            package: req.package.to_owned(),
            priority: top_rank.2,
            catalogs: tied,
        });
    }
    Ok(Some(top))
}

/// `Greater` = better: not a manual downgrade, non-deprecated, version, release, the installed
/// bundle, lower name.
///
/// The downgrade key comes before deprecation so that a deprecated successor still beats a
/// lower bundle when the override admits both (an upgrade is never traded for a downgrade).
fn within_catalog(
    a: &Candidate<'_>,
    b: &Candidate<'_>,
    installed: Option<&InstalledBundle>,
) -> Ordering {
    let is_installed =
        |candidate: &Candidate<'_>| installed.is_some_and(|i| i.name == candidate.bundle.name);
    (!a.downgrade)
        .cmp(&!b.downgrade)
        .then_with(|| {
            cmp_sound_then_version(
                (a.deprecation.is_some(), &a.bundle.version),
                (b.deprecation.is_some(), &b.bundle.version),
            )
        })
        .then_with(|| is_installed(a).cmp(&is_installed(b)))
        .then_with(|| b.bundle.name.cmp(&a.bundle.name))
}

/// `Greater` = better: a bundle without a bundle-level deprecation beats a deprecated one,
/// then the higher version, then the higher release. The one order of §5 step 4 and the
/// version rank, shared by the selector's ranking ([`within_catalog`]) and the choice of a
/// pre-update path's goal and hops ([`pre_update_path`]), so the two never prefer differently.
pub(super) fn cmp_sound_then_version(
    (a_deprecated, a): (bool, &Version),
    (b_deprecated, b): (bool, &Version),
) -> Ordering {
    (!a_deprecated)
        .cmp(&!b_deprecated)
        .then_with(|| cmp_version_release(a, b))
}

fn channel_label(sources: &[Source<'_>]) -> String {
    let mut names: Vec<&str> = sources
        .iter()
        .map(|source| source.channel.name.as_str())
        .collect();
    names.sort_unstable();
    names.dedup();
    names.join(", ")
}

impl fmt::Display for ChosenBundle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) from catalog {}, channel {}",
            self.name, self.version, self.catalog, self.channel
        )
    }
}
