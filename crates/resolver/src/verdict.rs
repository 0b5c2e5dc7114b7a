//! Whether the cluster may take its next minor update, as far as platform operators go (§8.3).
//!
//! The CVO blocks minor and major updates while any ClusterOperator says `Upgradeable=False`,
//! and the message is all the admin sees, so it must say what to do. [`bundle_upgradeability`]
//! judges one installed bundle against the next minor of the current cluster and, when it blocks,
//! names the newer bundle of the catalog that would lift the block and how to move to it.
//! Folding per-PO verdicts into the aggregated ClusterOperator's condition is `pom-policy`'s job.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use semver::Version;
use serde::{Deserialize, Serialize};

use crate::cluster::{max_supports, next_minor};
use crate::fbc::model::{Bundle, MaxOpenShiftVersion, Package};
use crate::select::{InstalledBundle, is_direct_successor};
use crate::version::cmp_version_release;

/// What the resolver found about a bundle and the cluster's next minor. The condition reason
/// POM writes for each is chosen by `pom-policy` from the one reason table in `pom-api`: the
/// resolver judges, it does not name conditions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Judgement {
    /// Nothing blocks the next minor.
    Compatible,
    /// `maxOpenShiftVersion` is below the next minor.
    Incompatible,
    /// Cannot tell (invalid metadata): fail closed.
    Unknown,
}

impl fmt::Display for Judgement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Judgement::Compatible => "Compatible",
            Judgement::Incompatible => "Incompatible",
            Judgement::Unknown => "Unknown",
        })
    }
}

/// A judgement and the message that tells the admin what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Verdict {
    pub judgement: Judgement,
    pub message: String,
}

impl Verdict {
    /// Compatible, with `message`.
    pub fn upgradeable(message: impl Into<String>) -> Self {
        Verdict {
            judgement: Judgement::Compatible,
            message: message.into(),
        }
    }

    /// Incompatible, with `message`.
    pub fn incompatible(message: impl Into<String>) -> Self {
        Verdict {
            judgement: Judgement::Incompatible,
            message: message.into(),
        }
    }

    /// Unknown, with `message` (blocks: fail closed).
    pub fn unknown(message: impl Into<String>) -> Self {
        Verdict {
            judgement: Judgement::Unknown,
            message: message.into(),
        }
    }

    /// Whether this verdict lets the cluster update (only Compatible does: fail closed).
    pub fn allows_update(&self) -> bool {
        self.judgement == Judgement::Compatible
    }
}

/// [`bundle_upgradeability`] for a bundle read from a catalog.
pub fn bundle_upgradeability_of(
    bundle: &Bundle,
    current_cluster: &Version,
    package: Option<&Package>,
    channel: Option<&str>,
) -> Verdict {
    let installed = InstalledBundle {
        name: bundle.name.clone(),
        version: bundle.version.clone(),
    };
    bundle_upgradeability(
        &installed,
        bundle.properties.max_openshift_version.as_ref(),
        current_cluster,
        package,
        channel,
    )
}

/// Judges whether the installed bundle lets the cluster take its next minor update (§8.3).
///
/// `max_openshift_version` is the installed bundle's property (from the catalog or from the
/// installed metadata: the bundle may have left the catalog). `package` and `channel` (`None` =
/// the package's default channel) are only used to name a bundle that would lift a block; without
/// them the verdict is the same, the advice is shorter.
///
/// Absent property: compatible (as OLM). Invalid property: Unknown (fail closed, as OLM v0).
pub fn bundle_upgradeability(
    installed: &InstalledBundle,
    max_openshift_version: Option<&MaxOpenShiftVersion>,
    current_cluster: &Version,
    package: Option<&Package>,
    channel: Option<&str>,
) -> Verdict {
    let next = next_minor(current_cluster);
    let who = format!("bundle {} ({})", installed.name, installed.version);
    match max_openshift_version {
        None => Verdict::upgradeable(format!("{who} declares no maxOpenShiftVersion")),
        Some(MaxOpenShiftVersion::Valid { major, minor })
            if max_supports((*major, *minor), next.0, next.1) =>
        {
            Verdict::upgradeable(format!(
                "{who} supports OpenShift up to {major}.{minor} (next minor update: {}.{})",
                next.0, next.1
            ))
        }
        Some(MaxOpenShiftVersion::Valid { major, minor }) => Verdict::incompatible(format!(
            "{}; {}",
            incompatibility(installed, (*major, *minor), next),
            lift_advice(installed, next, package, channel)
        )),
        Some(MaxOpenShiftVersion::Invalid { raw, reason }) => Verdict::unknown(format!(
            "{who} has an invalid olm.maxOpenShiftVersion {raw:?} ({reason}), so POM cannot tell \
             whether it runs on OpenShift {}.{}; {}",
            next.0,
            next.1,
            lift_advice(installed, next, package, channel)
        )),
    }
}

/// Why `installed` (whose `maxOpenShiftVersion` is `max`) blocks the minor update to `next`:
/// the head of an incompatible verdict's message, before the way forward (which
/// [`bundle_upgradeability`] names, and a pre-update path replaces when one was looked for).
#[must_use]
pub fn incompatibility(installed: &InstalledBundle, max: (u64, u64), next: (u64, u64)) -> String {
    format!(
        "bundle {} ({}) supports OpenShift up to {}.{} (olm.maxOpenShiftVersion), so the cluster \
         cannot be updated to {}.{}",
        installed.name, installed.version, max.0, max.1, next.0, next.1
    )
}

/// Names the lowest bundle reachable from `installed` through catalog edges whose metadata
/// supports `next`, and the `steadyStateVersionRange` that moves the PO there.
fn lift_advice(
    installed: &InstalledBundle,
    next: (u64, u64),
    package: Option<&Package>,
    channel: Option<&str>,
) -> String {
    let Some(package) = package else {
        return "no catalog content is available to name a bundle that supports it; check the \
                PlatformOperator's Catalog"
            .to_owned();
    };
    let channel_name = channel
        .or(package.default_channel.as_deref())
        .unwrap_or_default();
    let Some(channel) = package.channels.get(channel_name) else {
        return format!(
            "channel {channel_name:?} of package {} is not in the catalog, so no newer bundle can \
             be named; check spec.package.channel",
            package.name
        );
    };
    let Some(path) = lowest_lifting_path(installed, next, package, channel) else {
        return format!(
            "no bundle reachable from it in channel {} of package {} supports OpenShift {}.{}: ask \
             the publisher for one, or remove the PlatformOperator before updating the cluster",
            channel.name, package.name, next.0, next.1
        );
    };
    let Some(target) = path.last() else {
        return String::new();
    };
    let target_version = precedence_text(&target.version);
    let supports = match &target.properties.max_openshift_version {
        Some(MaxOpenShiftVersion::Valid { major, minor }) => {
            format!("supports OpenShift up to {major}.{minor}")
        }
        _ => "declares no maxOpenShiftVersion".to_owned(),
    };
    if path.len() == 1 {
        format!(
            "bundle {} ({}) in channel {} {supports}: set spec.steadyStateVersionRange to \
             \"={target_version}\" on the PlatformOperator to move to it",
            target.name, target.version, channel.name
        )
    } else {
        let hops: Vec<&str> = path.iter().map(|bundle| bundle.name.as_str()).collect();
        format!(
            "bundle {} ({}) in channel {} {supports}: set spec.steadyStateVersionRange to \
             \">={} <={target_version}\" on the PlatformOperator to move to it one hop at a time \
             ({} -> {})",
            target.name,
            target.version,
            channel.name,
            precedence_text(&installed.version),
            installed.name,
            hops.join(" -> ")
        )
    }
}

/// Breadth-first over successor edges (through bundles the selector could install: no declared
/// dependencies); among reachable bundles that support `next`, the lowest version (then the
/// shortest path). Returns the path, excluding the installed bundle.
fn lowest_lifting_path<'a>(
    installed: &InstalledBundle,
    next: (u64, u64),
    package: &'a Package,
    channel: &'a crate::fbc::model::Channel,
) -> Option<Vec<&'a Bundle>> {
    let mut parent: BTreeMap<&'a str, Option<&'a str>> = BTreeMap::new();
    let mut visited: BTreeSet<String> = BTreeSet::from([installed.name.clone()]);
    let mut queue: VecDeque<(InstalledBundle, Option<&'a str>)> =
        VecDeque::from([(installed.clone(), None)]);
    let mut lifting: Vec<&'a Bundle> = Vec::new();
    while let Some((node, node_name)) = queue.pop_front() {
        for entry in &channel.entries {
            if visited.contains(&entry.name) || !is_direct_successor(entry, &node) {
                continue;
            }
            // A bundle with dependencies is refused by the selector: no path goes through it.
            let Some(bundle) = package
                .bundles
                .get(&entry.name)
                .filter(|b| b.properties.dependencies.is_empty())
            else {
                continue;
            };
            visited.insert(entry.name.clone());
            parent.insert(bundle.name.as_str(), node_name);
            if supports(bundle, next) {
                lifting.push(bundle);
            }
            queue.push_back((
                InstalledBundle {
                    name: bundle.name.clone(),
                    version: bundle.version.clone(),
                },
                Some(bundle.name.as_str()),
            ));
        }
    }
    // BFS order gives shortest paths first; a stable sort by version keeps that among equals.
    lifting.sort_by(|a, b| cmp_version_release(&a.version, &b.version));
    let target = lifting.first()?;
    let mut path = vec![*target];
    let mut cursor = parent.get(target.name.as_str()).copied().flatten();
    while let Some(name) = cursor {
        path.push(package.bundles.get(name)?);
        cursor = parent.get(name).copied().flatten();
    }
    path.reverse();
    Some(path)
}

fn supports(bundle: &Bundle, next: (u64, u64)) -> bool {
    match &bundle.properties.max_openshift_version {
        None => true,
        Some(MaxOpenShiftVersion::Valid { major, minor }) => {
            max_supports((*major, *minor), next.0, next.1)
        }
        Some(MaxOpenShiftVersion::Invalid { .. }) => false,
    }
}

/// A version as a range operand: precedence only (ranges ignore build metadata).
fn precedence_text(version: &Version) -> String {
    let mut copy = version.clone();
    copy.build = semver::BuildMetadata::EMPTY;
    copy.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fbc::model::{BundleProperties, Channel, ChannelEntry, Deprecations, Origin};

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn bundle(name: &str, version: &str, max: Option<(u64, u64)>) -> Bundle {
        Bundle {
            name: name.to_owned(),
            package: "p".into(),
            image: Some(format!("registry.example/p@sha256:{name}")),
            version: v(version),
            properties: BundleProperties {
                max_openshift_version: max
                    .map(|(major, minor)| MaxOpenShiftVersion::Valid { major, minor }),
                ..BundleProperties::default()
            },
            origin: Origin::default(),
        }
    }

    fn entry(name: &str, replaces: Option<&str>) -> ChannelEntry {
        ChannelEntry {
            name: name.to_owned(),
            replaces: replaces.map(str::to_owned),
            skips: vec![],
            skip_range: None,
        }
    }

    /// p.v1 (max 4.16) <- p.v2 (max 4.16) <- p.v3 (max 4.18) <- p.v4 (none); p.v1 <- p.side (4.17)
    fn package() -> Package {
        let bundles = [
            bundle("p.v1", "1.0.0", Some((4, 16))),
            bundle("p.v2", "1.1.0", Some((4, 16))),
            bundle("p.v3", "1.2.0", Some((4, 18))),
            bundle("p.v4", "1.3.0", None),
        ];
        Package {
            name: "p".to_owned(),
            default_channel: Some("stable".to_owned()),
            description: None,
            channels: BTreeMap::from([(
                "stable".to_owned(),
                Channel {
                    name: "stable".to_owned(),
                    entries: vec![
                        entry("p.v1", None),
                        entry("p.v2", Some("p.v1")),
                        entry("p.v3", Some("p.v2")),
                        entry("p.v4", Some("p.v3")),
                    ],
                },
            )]),
            bundles: bundles.into_iter().map(|b| (b.name.clone(), b)).collect(),
            deprecations: Deprecations::default(),
        }
    }

    fn installed(name: &str, version: &str) -> InstalledBundle {
        InstalledBundle {
            name: name.to_owned(),
            version: v(version),
        }
    }

    #[test]
    fn compatible_and_absent_are_upgradeable() {
        let max = MaxOpenShiftVersion::Valid {
            major: 4,
            minor: 17,
        };
        let verdict = bundle_upgradeability(
            &installed("p.v1", "1.0.0"),
            Some(&max),
            &v("4.16.3"),
            None,
            None,
        );
        assert_eq!(verdict.judgement, Judgement::Compatible);
        let verdict =
            bundle_upgradeability(&installed("p.v1", "1.0.0"), None, &v("4.16.3"), None, None);
        assert!(verdict.allows_update(), "{verdict:?}");
    }

    #[test]
    fn a_blocked_bundle_names_the_bundle_that_lifts_the_block() {
        let pkg = package();
        let p1 = &pkg.bundles["p.v1"];
        let verdict = bundle_upgradeability_of(p1, &v("4.16.3"), Some(&pkg), None);
        assert_eq!(verdict.judgement, Judgement::Incompatible);
        assert!(
            verdict.message.contains("cannot be updated to 4.17"),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("bundle p.v3 (1.2.0)"),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("\">=1.0.0 <=1.2.0\""),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("p.v1 -> p.v2 -> p.v3"),
            "{}",
            verdict.message
        );

        let p2 = &pkg.bundles["p.v2"];
        let verdict = bundle_upgradeability_of(p2, &v("4.16.3"), Some(&pkg), Some("stable"));
        assert!(
            verdict.message.contains("\"=1.2.0\""),
            "{}",
            verdict.message
        );

        // 4.18 -> 4.19 is lifted only by p.v4, which declares no maximum.
        let p3 = &pkg.bundles["p.v3"];
        let verdict = bundle_upgradeability_of(p3, &v("4.18.0"), Some(&pkg), None);
        assert!(
            verdict.message.contains("p.v4 (1.3.0)"),
            "{}",
            verdict.message
        );
        assert!(
            verdict.message.contains("declares no maxOpenShiftVersion"),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn nothing_lifts_the_block_or_no_catalog() {
        let mut pkg = package();
        pkg.bundles.remove("p.v4");
        let p3 = pkg.bundles["p.v3"].clone();
        let verdict = bundle_upgradeability_of(&p3, &v("4.18.0"), Some(&pkg), None);
        assert!(
            verdict.message.contains("no bundle reachable"),
            "{}",
            verdict.message
        );
        let verdict = bundle_upgradeability_of(&p3, &v("4.18.0"), None, None);
        assert_eq!(verdict.judgement, Judgement::Incompatible);
        assert!(
            verdict.message.contains("no catalog content"),
            "{}",
            verdict.message
        );
        let verdict = bundle_upgradeability_of(&p3, &v("4.18.0"), Some(&pkg), Some("Stable"));
        assert!(
            verdict.message.contains("\"Stable\""),
            "{}",
            verdict.message
        );
    }

    #[test]
    fn invalid_metadata_is_unknown_and_blocks() {
        let bad = MaxOpenShiftVersion::Invalid {
            raw: "4.9.1".to_owned(),
            reason: "has a patch".to_owned(),
        };
        let verdict = bundle_upgradeability(
            &installed("p.v1", "1.0.0"),
            Some(&bad),
            &v("4.16.3"),
            Some(&package()),
            None,
        );
        assert_eq!(verdict.judgement, Judgement::Unknown);
        assert!(verdict.message.contains("\"4.9.1\""), "{}", verdict.message);
        assert!(!verdict.allows_update());
    }

    #[test]
    fn the_4_22_cluster_needs_5_0_support() {
        let max = MaxOpenShiftVersion::Valid {
            major: 4,
            minor: 23,
        };
        let verdict = bundle_upgradeability(
            &installed("p.v1", "1.0.0"),
            Some(&max),
            &v("4.22.4"),
            None,
            None,
        );
        assert!(verdict.allows_update(), "4.23 means 5.0: {verdict:?}");
        let max = MaxOpenShiftVersion::Valid {
            major: 4,
            minor: 22,
        };
        let verdict = bundle_upgradeability(
            &installed("p.v1", "1.0.0"),
            Some(&max),
            &v("4.22.4"),
            None,
            None,
        );
        assert!(
            verdict.message.contains("updated to 5.0"),
            "{}",
            verdict.message
        );
    }
}
