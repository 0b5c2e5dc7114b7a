//! Version ranges: Masterminds/semver v3 constraints ([`VersionRange`]) for what admins write
//! and for pins, and blang/semver v4 ranges ([`SkipRange`]) for catalog `skipRange`.
//!
//! POM must judge a range exactly as OLM does, or a PlatformOperator would pick a different
//! bundle than a ClusterExtension with the same string; the `semver` crate speaks neither syntax
//! (Cargo's `VersionReq` reads `1.2.3` as `^1.2.3` and refuses `||`). So both grammars have a
//! hand-written parser here that lowers the string to an OR of AND groups of comparators:
//!
//! - `masterminds.rs` (grammar) and `comparator.rs` (evaluation): the admin syntax. AND by comma or space, OR by `||`,
//!   `= != > >= < <= ~ ^`, `x X *` wildcards, hyphen ranges, optional `v`, partial versions. A
//!   pre-release version passes an AND group only if some comparator of that group carries a
//!   pre-release; build metadata is ignored on both sides.
//! - `blang.rs`: the catalog syntax. Space = AND, `||` = OR, `x` wildcard expansion, plain SemVer
//!   precedence (pre-releases are ordinary versions).
//!
//! Both types print a canonical form (`Display`) that parses back to an equal value, so status
//! messages and `pomctl` output can be pasted back into a spec. Both are pure and deterministic.

mod blang;
mod comparator;
mod cursor;
mod masterminds;

use std::fmt;
use std::str::FromStr;

use semver::Version;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use blang::{BlangComparator, BlangGroups};
use comparator::Comparator;

/// Why a range string was refused: the string, what is wrong and where.
///
/// `reason` names the position itself (`operator "<" at position 8 has no version`), so the
/// message stands alone in a condition or a log line; `position` carries the same character
/// offset (from 0) for callers that want to point at it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version range {input:?}: {reason}")]
pub struct RangeError {
    /// The range string as given.
    pub input: String,
    /// What is wrong, where, and what to write instead when that is clear.
    pub reason: String,
    /// Character offset of the problem, when it is at one place.
    pub position: Option<usize>,
}

/// A Masterminds/semver v3 constraint, as OLM v1 evaluates `ClusterExtension` versions: the
/// admin's `versionRange` and `steadyStateVersionRange`, and the pins POM derives (§4.2).
///
/// Equality is structural on the canonical form: `>=1.2`, `=>v1.2.0` and `>= 1.2.x` are equal,
/// `~1.2` and `>=1.2.0 <1.3.0` are not (they differ on pre-releases).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionRange {
    groups: Vec<AndGroup>,
}

/// One AND group of a Masterminds range, with its pre-release admission decided once.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct AndGroup {
    comparators: Vec<Comparator>,
    admits_prereleases: bool,
}

impl VersionRange {
    /// Parses Masterminds v3 syntax (grammar and the few deliberate differences from Masterminds: `range/masterminds.rs`). Refuses empty input;
    /// the 64-character limit on admin ranges is the CRD's to enforce, not this parser's.
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        let groups = masterminds::parse(input)?
            .into_iter()
            .map(|comparators| AndGroup {
                admits_prereleases: comparators.iter().any(Comparator::has_prerelease),
                comparators,
            })
            .collect();
        Ok(VersionRange { groups })
    }

    /// Masterminds v3 evaluation: some AND group passes `version`. A group passes when every
    /// comparator does and, if `version` is a pre-release, some comparator of the group carries
    /// a pre-release. Build metadata is ignored.
    pub fn matches(&self, version: &Version) -> bool {
        self.groups.iter().any(|group| {
            (version.pre.is_empty() || group.admits_prereleases)
                && group
                    .comparators
                    .iter()
                    .all(|comparator| comparator.admits(version))
        })
    }
}

impl VersionRange {
    /// This range with `prefix` (comparators, as printed) ANDed into each of its groups, as
    /// one Masterminds range: `>=1.0.0 <2.0.0-0` into `<1.4.0 || >=3.0.0` gives
    /// `>=1.0.0 <2.0.0-0 <1.4.0 || >=1.0.0 <2.0.0-0 >=3.0.0`.
    pub fn and_prefixed(&self, prefix: &str) -> String {
        let groups: Vec<String> = self
            .groups
            .iter()
            .map(|group| {
                let text = group
                    .comparators
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ");
                if prefix.is_empty() {
                    text
                } else {
                    format!("{prefix} {text}")
                }
            })
            .collect();
        groups.join(" || ")
    }
}

impl fmt::Display for VersionRange {
    /// Canonical form: comparators joined by a space, groups by ` || `, aliases folded
    /// (`=>` to `>=`), `v` and build metadata dropped, wildcards written `x` (`*` for "any"),
    /// bare versions written with `=`, hyphen ranges as `>=A <=B`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, group) in self.groups.iter().enumerate() {
            if index > 0 {
                f.write_str(" || ")?;
            }
            write_joined(f, &group.comparators)?;
        }
        Ok(())
    }
}

impl FromStr for VersionRange {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        VersionRange::parse(s)
    }
}

impl Serialize for VersionRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for VersionRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        VersionRange::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// A blang/semver v4 range, as operator-registry and OLM evaluate catalog `skipRange`.
///
/// Equality is structural on the expanded form: `>=1.2.x <1.3.0` equals `>=1.2.0 <1.3.0`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SkipRange {
    groups: BlangGroups,
}

impl SkipRange {
    /// Parses blang/semver v4 `ParseRange` syntax (the rules and the blang quirks kept or refused: `range/blang.rs`).
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        Ok(SkipRange {
            groups: blang::parse(input)?,
        })
    }

    /// blang evaluation: some AND group passes `version` by plain SemVer precedence
    /// (pre-releases are not special, build metadata is ignored).
    pub fn contains(&self, version: &Version) -> bool {
        self.groups
            .iter()
            .any(|group| group.iter().all(|comparator| comparator.admits(version)))
    }
}

impl fmt::Display for SkipRange {
    /// Canonical form: the expanded comparators (`>=1.2.0 <1.3.0` for `1.2.x`), joined by a
    /// space, groups by ` || `, with `=` and `!=` spelled out and build metadata dropped.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, group) in self.groups.iter().enumerate() {
            if index > 0 {
                f.write_str(" || ")?;
            }
            write_joined::<BlangComparator>(f, group)?;
        }
        Ok(())
    }
}

impl FromStr for SkipRange {
    type Err = RangeError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SkipRange::parse(s)
    }
}

impl Serialize for SkipRange {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for SkipRange {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        SkipRange::parse(&text).map_err(serde::de::Error::custom)
    }
}

fn write_joined<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (index, item) in items.iter().enumerate() {
        if index > 0 {
            f.write_str(" ")?;
        }
        write!(f, "{item}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests;
