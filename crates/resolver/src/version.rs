//! Bundle, cluster and Kubernetes versions, and how bundle versions are ordered.
//!
//! [`semver::Version`] is the version type everywhere in POM. This module adds the three things
//! the `semver` crate does not decide for us:
//!
//! - how strict a version string must be: catalogs ([`parse_bundle_version`]) are held to strict
//!   SemVer 2.0.0 as operator-registry holds them (blang/semver `Parse`), while versions reported
//!   by a cluster ([`parse_tolerant`]) come as `v1.33.2+k3s1` or `4.16` and must still be read;
//! - how two bundles of the same version are ordered: by the "release" that registry+v1 bundles
//!   carry in their build metadata ([`cmp_version_release`]), as OLM v1 does;
//! - errors that name the input and say what to fix ([`VersionError`]).

use std::cmp::Ordering;

use semver::{Prerelease, Version};

/// Why a version string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VersionError {
    /// The string was empty or only whitespace.
    #[error("empty version: expected a version such as \"1.2.3\"")]
    Empty,
    /// A catalog version that is not strict SemVer 2.0.0.
    #[error(
        "invalid bundle version {input:?}: {reason}; bundle versions must be strict SemVer 2.0.0 \
         (MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD], no leading \"v\", no leading zeros)"
    )]
    NotStrictSemver {
        /// The string as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A cluster or Kubernetes version that cannot be read even tolerantly.
    #[error(
        "invalid version {input:?}: {reason}; expected MAJOR[.MINOR[.PATCH]][-PRERELEASE][+BUILD] \
         with an optional leading \"v\", such as \"4.16\", \"4.16.0-rc.1\" or \"v1.33.2+k3s1\""
    )]
    NotTolerant {
        /// The string as given.
        input: String,
        /// What is wrong with it.
        reason: String,
    },
}

/// Parses a bundle version (`olm.package` `version`, CSV `spec.version`) as strict SemVer 2.0.0.
///
/// Catalogs are validated upstream by blang/semver `Parse`, so a version POM accepts here is one
/// opm accepts and the other way round: three numeric parts without leading zeros, optional
/// pre-release and build metadata, no `v`, no surrounding whitespace. Pre-release identifiers
/// that are numeric must also fit in 64 bits, as blang requires.
pub fn parse_bundle_version(s: &str) -> Result<Version, VersionError> {
    if s.trim().is_empty() {
        return Err(VersionError::Empty);
    }
    let strict = |reason: String| VersionError::NotStrictSemver {
        input: s.to_owned(),
        reason,
    };
    let version = Version::parse(s).map_err(|e| strict(e.to_string()))?;
    if let Some(too_big) = numeric_identifier_over_u64(&version.pre) {
        return Err(strict(format!(
            "numeric pre-release identifier {too_big:?} does not fit in 64 bits"
        )));
    }
    Ok(version)
}

/// Parses a version reported by a cluster: ClusterVersion `status.desired.version`, history
/// entries, or the Kubernetes API server's `gitVersion`.
///
/// These are not catalog data and do not follow the catalog rules: Kubernetes prefixes a `v`
/// (`v1.33.2+k3s1`), people and OpenShift minors are written `4.16`, and distributions add
/// pre-release or build suffixes (`4.16.0-rc.1`, `v1.30.1-eks-b9c9ed7`). Surrounding whitespace
/// and one leading `v`/`V` are dropped, missing minor and patch parts are 0, and the pre-release
/// and build are kept so that precedence still sees `4.16.0-rc.1 < 4.16.0`.
pub fn parse_tolerant(s: &str) -> Result<Version, VersionError> {
    let trimmed = s.trim();
    if trimmed.is_empty() {
        return Err(VersionError::Empty);
    }
    let tolerant = |reason: String| VersionError::NotTolerant {
        input: s.to_owned(),
        reason,
    };
    let unprefixed = trimmed.strip_prefix(['v', 'V']).unwrap_or(trimmed);
    let core_end = unprefixed.find(['-', '+']).unwrap_or(unprefixed.len());
    let (core, suffix) = unprefixed.split_at(core_end);
    let parts: Vec<&str> = core.split('.').collect();
    if parts.len() > 3 {
        return Err(tolerant(format!(
            "{core:?} has {} numeric parts, at most 3 are allowed",
            parts.len()
        )));
    }
    let mut numbers = [0_u64; 3];
    for (index, (part, slot)) in parts.iter().zip(numbers.iter_mut()).enumerate() {
        *slot = parse_numeric_part(part, PART_NAMES[index]).map_err(tolerant)?;
    }
    let [major, minor, patch] = numbers;
    let normalised = format!("{major}.{minor}.{patch}{suffix}");
    let version =
        Version::parse(&normalised).map_err(|e| tolerant(format!("in {suffix:?}: {e}")))?;
    Ok(version)
}

const PART_NAMES: [&str; 3] = ["major", "minor", "patch"];

/// One numeric version part: digits only, no leading zero, fits in 64 bits.
fn parse_numeric_part(part: &str, name: &str) -> Result<u64, String> {
    if part.is_empty() {
        return Err(format!("the {name} version number is missing"));
    }
    if !part.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "the {name} version number {part:?} is not a number"
        ));
    }
    if part.len() > 1 && part.starts_with('0') {
        return Err(format!(
            "the {name} version number {part:?} has a leading zero"
        ));
    }
    part.parse::<u64>()
        .map_err(|_| format!("the {name} version number {part:?} does not fit in 64 bits"))
}

/// The first all-digit identifier of `pre` that does not fit in a `u64`, if any.
fn numeric_identifier_over_u64(pre: &Prerelease) -> Option<&str> {
    if pre.is_empty() {
        return None;
    }
    pre.as_str()
        .split('.')
        .find(|id| id.bytes().all(|b| b.is_ascii_digit()) && id.parse::<u64>().is_err())
}

/// The "release" a registry+v1 bundle carries in its build metadata, if it has one.
///
/// OLM v1 (`ParseLegacyVersionRelease` in operator-controller) reads the build metadata of a
/// bundle version as a release when every dot-separated identifier is a valid SemVer
/// pre-release identifier (non-empty `[0-9A-Za-z-]`, numeric ones without leading zeros and
/// within 64 bits). Gatekeeper's `3.15.1+0.1726639477.p` has release `0.1726639477.p`. Build
/// metadata that does not read as a release (`1.0.0+001`) is kept as plain build metadata and
/// the bundle has no release.
pub fn legacy_release(version: &Version) -> Option<Prerelease> {
    if version.build.is_empty() {
        return None;
    }
    let release = Prerelease::new(version.build.as_str()).ok()?;
    match numeric_identifier_over_u64(&release) {
        Some(_) => None,
        None => Some(release),
    }
}

/// Orders two releases as OLM v1 does: no release sorts before any release; two releases compare
/// identifier by identifier with SemVer pre-release rules (numbers numerically and below words,
/// words in ASCII order, a shorter list first when it is a prefix of the longer).
pub fn cmp_release(a: Option<&Prerelease>, b: Option<&Prerelease>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        // `Prerelease`'s `Ord` is SemVer pre-release precedence for two non-empty lists, which
        // is exactly the release order; emptiness never reaches here.
        (Some(a), Some(b)) => a.cmp(b),
    }
}

/// Orders bundle versions: SemVer precedence first, then the release read from build metadata.
///
/// The rule (OLM v1, operator-controller `ParseLegacyVersionRelease` and `VersionRelease.Compare`):
/// 1. compare `major.minor.patch-prerelease` by SemVer precedence, build metadata ignored;
/// 2. when equal, compare the releases ([`legacy_release`]): a bundle without a release sorts
///    before one with a release, and two releases compare as pre-release identifier lists
///    ([`cmp_release`]), so `3.15.1+0.1726639477.p` < `3.15.1+0.1726639478.p`.
///
/// Two versions whose build metadata is not a release (`1.0.0+001` and `1.0.0+002`) compare
/// `Equal` although they differ, as they do in OLM; callers that need a total order add their own
/// tie-breaker (the selection uses the bundle name).
pub fn cmp_version_release(a: &Version, b: &Version) -> Ordering {
    a.cmp_precedence(b)
        .then_with(|| cmp_release(legacy_release(a).as_ref(), legacy_release(b).as_ref()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap()
    }

    #[test]
    fn bundle_versions_are_strict_semver() {
        for ok in [
            "0.0.0",
            "1.2.3",
            "1.2.3-rc.1",
            "1.2.3+build.001",
            "3.15.1+0.1726639477.p",
            "1.0.0-0A.is.legal",
        ] {
            assert_eq!(parse_bundle_version(ok).unwrap().to_string(), ok);
        }
        for bad in [
            "v1.2.3",
            "1.2",
            "1.2.3.4",
            "01.2.3",
            "1.02.3",
            "1.2.03",
            "1.2.3-01",
            "1.2.3-",
            "1.2.3+",
            "1.2.3-a..b",
            " 1.2.3",
            "1.2.3 ",
            "1.2.3-beta!",
            "1.2.3-99999999999999999999",
            "18446744073709551616.0.0",
        ] {
            let err = parse_bundle_version(bad).unwrap_err();
            assert!(
                matches!(err, VersionError::NotStrictSemver { .. }),
                "{bad}: {err}"
            );
            assert!(
                err.to_string().contains(&format!("{bad:?}")),
                "error names the input: {err}"
            );
        }
        assert_eq!(parse_bundle_version("  "), Err(VersionError::Empty));
    }

    #[test]
    fn tolerant_versions_cover_cluster_and_kubernetes_forms() {
        let cases = [
            ("4.16", "4.16.0"),
            ("4", "4.0.0"),
            ("1.33", "1.33.0"),
            (" v1.33.2+k3s1 ", "1.33.2+k3s1"),
            ("V1.30.1-eks-b9c9ed7", "1.30.1-eks-b9c9ed7"),
            ("4.16.0-rc.1", "4.16.0-rc.1"),
            ("4.16-rc.1", "4.16.0-rc.1"),
            (
                "4.15.0-0.okd-2024-03-10-010116",
                "4.15.0-0.okd-2024-03-10-010116",
            ),
            ("v1.28.3+rke2r1", "1.28.3+rke2r1"),
        ];
        for (input, expected) in cases {
            assert_eq!(
                parse_tolerant(input).unwrap().to_string(),
                expected,
                "{input}"
            );
        }
    }

    #[test]
    fn tolerant_versions_still_refuse_garbage_with_a_reason() {
        let cases = [
            ("", "empty"),
            ("v", "missing"),
            ("4.", "minor version number is missing"),
            ("4.x", "not a number"),
            ("4.016", "leading zero"),
            ("1.2.3.4", "at most 3"),
            ("4.16.0-", "4.16.0-"),
            ("vv1.2", "not a number"),
            ("99999999999999999999", "64 bits"),
        ];
        for (input, fragment) in cases {
            let err = parse_tolerant(input).unwrap_err().to_string();
            assert!(err.contains(fragment), "{input:?}: {err}");
        }
    }

    #[test]
    fn release_is_read_from_build_metadata_only_when_valid() {
        assert_eq!(
            legacy_release(&v("3.15.1+0.1726639477.p"))
                .unwrap()
                .as_str(),
            "0.1726639477.p"
        );
        assert_eq!(legacy_release(&v("1.0.0")), None);
        assert_eq!(
            legacy_release(&v("1.0.0+001")),
            None,
            "leading zero: not a release"
        );
        assert_eq!(
            legacy_release(&v("1.0.0+99999999999999999999")),
            None,
            "over 64 bits: not a release"
        );
        assert_eq!(legacy_release(&v("1.0.0-rc.1+2")).unwrap().as_str(), "2");
    }

    #[test]
    fn version_release_order() {
        use Ordering::*;
        let cases = [
            ("1.0.0", "1.0.1", Less),
            ("1.0.0-rc.1", "1.0.0", Less),
            ("1.0.0+1", "1.0.1", Less),
            ("1.0.0", "1.0.0+1", Less),
            ("1.0.0+1", "1.0.0+2", Less),
            ("1.0.0+2", "1.0.0+10", Less),
            ("1.0.0+10", "1.0.0+a", Less),
            ("1.0.0+a", "1.0.0+a.1", Less),
            ("1.0.0+a.b", "1.0.0+b", Less),
            ("3.15.1+0.1726639477.p", "3.15.1+0.1726639478.p", Less),
            ("3.15.1+0.1726639477.p", "3.15.1", Greater),
            ("1.0.0+001", "1.0.0", Equal),
            ("1.0.0+001", "1.0.0+002", Equal),
            ("1.0.0+1", "1.0.0+1", Equal),
        ];
        for (a, b, expected) in cases {
            assert_eq!(cmp_version_release(&v(a), &v(b)), expected, "{a} vs {b}");
            assert_eq!(
                cmp_version_release(&v(b), &v(a)),
                expected.reverse(),
                "{b} vs {a}"
            );
        }
    }
}
