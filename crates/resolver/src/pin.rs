//! The version pin a platform operator is held to, given the cluster phase (§4.2).
//!
//! The pin is what keeps a PO still while the cluster is steady and lets it move (within its
//! minor during a patch update, within its major during a minor update) while the cluster
//! updates. It is always ANDed with the admin's `spec.package.versionRange` by the selector.
//!
//! A pin is printed as a Masterminds range with an explicit `=` (it goes to `status.pin.range`),
//! but it is *evaluated* with POM's own rule, not Masterminds': a pin never admits a pre-release
//! unless the installed version is itself one. Under Masterminds `>=1.2.3 <1.3.0-0` would admit
//! `1.2.4-rc.1`; POM keeps pre-releases out of automatic moves on purpose. The admin's own
//! ranges (`versionRange`, `steadyStateVersionRange`) keep plain Masterminds semantics.

use std::cmp::Ordering;
use std::fmt;

use semver::{Prerelease, Version};
use serde::{Deserialize, Serialize};

use crate::cluster::{ClusterPhase, PhaseKind};
use crate::range::VersionRange;

/// Why a pin is in force; written to `status.pin.reason` as the CamelCase variant name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PinReason {
    /// Nothing installed yet: no pin, the highest allowed bundle is installed.
    Install,
    /// Cluster steady: stay on the installed version.
    Steady,
    /// Cluster patch update: move within the installed minor.
    PatchUpgrade,
    /// Cluster minor update: move within the installed major.
    MinorUpgrade,
    /// Cluster rollback: stay, or pivot down when the installed bundle cannot run on the target.
    Rollback,
    /// Cluster steady and the admin set `spec.steadyStateVersionRange`.
    Override,
    /// No pin at all: pure successor resolution as OLM v1 does it (`pomctl resolve` without
    /// `--cluster-version`, §9). Unlike [`PinReason::Install`] it admits pre-releases, because
    /// OLM v1 leaves them out only when the admin's version range does.
    Unpinned,
}

impl fmt::Display for PinReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PinReason::Install => "Install",
            PinReason::Steady => "Steady",
            PinReason::PatchUpgrade => "PatchUpgrade",
            PinReason::MinorUpgrade => "MinorUpgrade",
            PinReason::Rollback => "Rollback",
            PinReason::Override => "Override",
            PinReason::Unpinned => "Unpinned",
        })
    }
}

/// The range in force for a PO and why.
///
/// `range` is the printed form; evaluation goes through [`Pin::admits`], which uses the
/// structured bounds kept alongside (so the printed text and the rule can never drift apart
/// silently, and a pin works without re-parsing its own text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pin {
    /// Printed range, always with an explicit operator: `=1.2.3`, `>=1.2.3 <1.3.0-0`, `*`.
    pub range: String,
    pub reason: PinReason,
    bounds: Bounds,
}

/// What a pin admits, before the pre-release rule.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Bounds {
    /// Nothing installed: every release version.
    Any,
    /// Exactly this version (build metadata ignored, as in Masterminds `=`).
    Exact(Version),
    /// `lower <= v < upper` by semver precedence.
    HalfOpen { lower: Version, upper: Version },
    /// The admin's steady-state override, evaluated with Masterminds rules.
    Admin(VersionRange),
    /// No pin: every version, pre-releases included (OLM v1 has no pin; only the admin's
    /// `versionRange`, checked separately, can exclude a pre-release).
    Unpinned,
    /// A first install or a cluster update's pin (`inner`) within the admin's steady-state
    /// override (or on the installed version itself: staying is never outside a pin): an update
    /// never carries a PO out of the range the admin holds it to, so the update's end never
    /// needs a move back down (issue 25 item 1).
    Within {
        inner: Box<Bounds>,
        range: VersionRange,
        installed: Option<Version>,
    },
}

impl Bounds {
    fn contains(&self, candidate: &Version) -> bool {
        match self {
            Bounds::Any | Bounds::Unpinned => true,
            Bounds::Exact(exact) => candidate.cmp_precedence(exact) == Ordering::Equal,
            Bounds::HalfOpen { lower, upper } => {
                candidate.cmp_precedence(lower) != Ordering::Less
                    && candidate.cmp_precedence(upper) == Ordering::Less
            }
            Bounds::Admin(range) => range.matches(candidate),
            Bounds::Within {
                inner,
                range,
                installed,
            } => {
                let stays = installed
                    .as_ref()
                    .is_some_and(|i| candidate.cmp_precedence(i) == Ordering::Equal);
                inner.contains(candidate) && (range.matches(candidate) || stays)
            }
        }
    }
}

impl Serialize for Pin {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut state = serializer.serialize_struct("Pin", 2)?;
        state.serialize_field("range", &self.range)?;
        state.serialize_field("reason", &self.reason)?;
        state.end()
    }
}

impl fmt::Display for Pin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.range, self.reason)
    }
}

impl Pin {
    /// No pin: what a first install resolves under.
    pub fn install() -> Self {
        Pin {
            range: "*".to_owned(),
            reason: PinReason::Install,
            bounds: Bounds::Any,
        }
    }

    /// No pin at all ([`PinReason::Unpinned`]): what resolution without a cluster runs under.
    ///
    /// Printed `*` like the install pin; the reason tells them apart. It admits pre-releases,
    /// since OLM v1, whose selection this reproduces, filters them only through the admin's
    /// version range.
    pub fn unpinned() -> Self {
        Pin {
            range: "*".to_owned(),
            reason: PinReason::Unpinned,
            bounds: Bounds::Unpinned,
        }
    }

    /// `=X.Y.Z` for `reason` (Steady or Rollback).
    pub fn exact(version: &Version, reason: PinReason) -> Self {
        let exact = without_build(version);
        Pin {
            range: format!("={exact}"),
            reason,
            bounds: Bounds::Exact(exact),
        }
    }

    /// `>=X.Y.Z <X.Y+1.0-0`: any newer patch of the installed minor.
    pub fn patch_upgrade(version: &Version) -> Self {
        let upper = lowest_of(version.major, version.minor.saturating_add(1));
        Self::half_open(version, upper, PinReason::PatchUpgrade)
    }

    /// `>=X.Y.Z <X+1.0.0-0`: any newer minor of the installed major (majors never move
    /// automatically).
    pub fn minor_upgrade(version: &Version) -> Self {
        let upper = lowest_of(version.major.saturating_add(1), 0);
        Self::half_open(version, upper, PinReason::MinorUpgrade)
    }

    /// `>=X.0.0 <X.Y.Z`: the pivot down of a rollback, used only when the installed bundle
    /// cannot run on the rollback target. Bounded to the installed major, since a major move is
    /// never automatic in either direction.
    pub fn rollback_pivot(installed: &Version) -> Self {
        let lower = Version::new(installed.major, 0, 0);
        let upper = without_build(installed);
        Pin {
            range: format!(">={lower} <{upper}"),
            reason: PinReason::Rollback,
            bounds: Bounds::HalfOpen { lower, upper },
        }
    }

    /// The admin's `spec.steadyStateVersionRange` in place of `=X.Y.Z`.
    pub fn overridden(range: &VersionRange) -> Self {
        Pin {
            range: range.to_string(),
            reason: PinReason::Override,
            bounds: Bounds::Admin(range.clone()),
        }
    }

    /// This pin within the admin's steady-state override `range` (both must admit; the
    /// `installed` version itself always may stay): what a first install and a cluster update
    /// resolve under while the override is set. Printed as one Masterminds range, this pin's
    /// comparators ANDed into each of `range`'s groups, plus `=installed` when `range` excludes
    /// it.
    #[must_use]
    pub fn within(self, range: &VersionRange, installed: Option<&Version>) -> Self {
        let prefix = match &self.bounds {
            Bounds::Any | Bounds::Unpinned => String::new(),
            _ => self.range.clone(),
        };
        let installed = installed.map(without_build);
        let mut printed = range.and_prefixed(&prefix);
        if let Some(installed) = installed.as_ref().filter(|i| !range.matches(i)) {
            printed.push_str(&format!(" || ={installed}"));
        }
        Pin {
            range: printed,
            reason: self.reason,
            bounds: Bounds::Within {
                inner: Box::new(self.bounds),
                range: range.clone(),
                installed,
            },
        }
    }

    fn half_open(lower: &Version, upper: Version, reason: PinReason) -> Self {
        let lower = without_build(lower);
        Pin {
            range: format!(">={lower} <{upper}"),
            reason,
            bounds: Bounds::HalfOpen { lower, upper },
        }
    }

    /// Whether `candidate` is inside the pin, under POM's pin rule: a pre-release is admitted
    /// only when `installed` is itself a pre-release (an admin override keeps Masterminds rules).
    /// Build metadata never matters here; releases of one version order only among themselves.
    pub fn admits(&self, candidate: &Version, installed: Option<&Version>) -> bool {
        if matches!(self.bounds, Bounds::Admin(_) | Bounds::Unpinned) {
            return self.contains(candidate);
        }
        let installed_is_prerelease = installed.is_some_and(|version| !version.pre.is_empty());
        if !candidate.pre.is_empty() && !installed_is_prerelease {
            return false;
        }
        self.contains(candidate)
    }

    /// Whether `candidate` lies within the pin's bounds, before the pre-release rule (used to
    /// explain a refusal: "a pre-release" rather than "outside the pin").
    pub fn contains(&self, candidate: &Version) -> bool {
        self.bounds.contains(candidate)
    }

    /// True for the pivot-down pin of a rollback (as opposed to the `=X.Y.Z` hold).
    pub fn is_rollback_pivot(&self) -> bool {
        self.reason == PinReason::Rollback && matches!(self.bounds, Bounds::HalfOpen { .. })
    }
}

/// The pin for a PO (§4.2), when it follows the cluster.
///
/// Resolution without a pin ([`Pin::unpinned`]) does not come through here: the selector
/// chooses between the two by its request's `PinPolicy`, so `phase: None` keeps meaning "plain
/// Kubernetes, steady" and never "no pin".
///
/// `phase` is `None` without a ClusterVersion (plain Kubernetes): that counts as Steady. The
/// steady-state override replaces the pin while the cluster is steady; during a patch or minor
/// update, and at a first install, the pin holds *within* it ([`Pin::within`]): a cluster
/// update never follows a hand-set range by surprise, and never carries the PO out of it (else
/// the update's end would move it back down, a downgrade nobody asked for). A rollback returns
/// the `=X.Y.Z` hold; the selector pivots down (see [`Pin::rollback_pivot`]) only when the
/// installed bundle is incompatible with the rollback target.
pub fn pin_for(
    installed: Option<&Version>,
    phase: Option<&ClusterPhase>,
    steady_state_range: Option<&VersionRange>,
) -> Pin {
    let within_override = |pin: Pin| match steady_state_range {
        Some(range) => pin.within(range, installed),
        None => pin,
    };
    let Some(installed) = installed else {
        return within_override(Pin::install());
    };
    match phase.map_or(PhaseKind::Steady, |phase| phase.kind) {
        PhaseKind::Steady => match steady_state_range {
            Some(range) => Pin::overridden(range),
            None => Pin::exact(installed, PinReason::Steady),
        },
        PhaseKind::PatchUpgrade => within_override(Pin::patch_upgrade(installed)),
        PhaseKind::MinorUpgrade => within_override(Pin::minor_upgrade(installed)),
        PhaseKind::Rollback => Pin::exact(installed, PinReason::Rollback),
    }
}

/// `major.minor.0-0`: the lowest version of a minor, pre-releases included, so that `<` it
/// excludes every pre-release of that minor too.
fn lowest_of(major: u64, minor: u64) -> Version {
    let mut version = Version::new(major, minor, 0);
    version.pre = Prerelease::new("0").unwrap_or(Prerelease::EMPTY);
    version
}

/// The version without build metadata: pins compare and print precedence only.
fn without_build(version: &Version) -> Version {
    let mut copy = version.clone();
    copy.build = semver::BuildMetadata::EMPTY;
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap()
    }

    fn phase(kind: PhaseKind) -> ClusterPhase {
        ClusterPhase {
            kind,
            current: v("4.16.3"),
            target: v("4.17.0"),
        }
    }

    #[test]
    fn the_pin_table_of_section_4_2() {
        let installed = v("1.2.3");
        let cases = [
            (None, PinReason::Steady, "=1.2.3"),
            (Some(PhaseKind::Steady), PinReason::Steady, "=1.2.3"),
            (
                Some(PhaseKind::PatchUpgrade),
                PinReason::PatchUpgrade,
                ">=1.2.3 <1.3.0-0",
            ),
            (
                Some(PhaseKind::MinorUpgrade),
                PinReason::MinorUpgrade,
                ">=1.2.3 <2.0.0-0",
            ),
            (Some(PhaseKind::Rollback), PinReason::Rollback, "=1.2.3"),
        ];
        for (kind, reason, range) in cases {
            let phase = kind.map(phase);
            let pin = pin_for(Some(&installed), phase.as_ref(), None);
            assert_eq!(
                (pin.reason, pin.range.as_str()),
                (reason, range),
                "{kind:?}"
            );
        }
        let install = pin_for(None, Some(&phase(PhaseKind::MinorUpgrade)), None);
        assert_eq!(
            (install.reason, install.range.as_str()),
            (PinReason::Install, "*")
        );
    }

    #[test]
    fn pins_drop_build_metadata_and_keep_prereleases_in_print() {
        let pin = pin_for(Some(&v("3.15.1+0.1725401534.p")), None, None);
        assert_eq!(pin.range, "=3.15.1");
        assert!(pin.admits(
            &v("3.15.1+0.1727189912.p"),
            Some(&v("3.15.1+0.1725401534.p"))
        ));
        let pin = pin_for(Some(&v("1.2.0-rc.1")), None, None);
        assert_eq!(pin.range, "=1.2.0-rc.1");
    }

    #[test]
    fn pins_never_admit_a_prerelease_unless_installed_is_one() {
        let installed = v("1.2.3");
        let patch = Pin::patch_upgrade(&installed);
        assert!(patch.admits(&v("1.2.4"), Some(&installed)));
        assert!(patch.admits(&v("1.2.3"), Some(&installed)));
        assert!(
            !patch.admits(&v("1.2.4-rc.1"), Some(&installed)),
            "Masterminds would, POM must not"
        );
        assert!(!patch.admits(&v("1.3.0"), Some(&installed)));
        assert!(!patch.admits(&v("1.3.0-rc.1"), Some(&installed)));
        assert!(!patch.admits(&v("1.2.2"), Some(&installed)));

        let pre = v("1.2.0-rc.1");
        let patch = Pin::patch_upgrade(&pre);
        assert!(patch.admits(&v("1.2.0-rc.2"), Some(&pre)));
        assert!(patch.admits(&v("1.2.0"), Some(&pre)));
        assert!(patch.admits(&v("1.2.7-beta.1"), Some(&pre)));
        assert!(!patch.admits(&v("1.3.0-rc.1"), Some(&pre)));

        let minor = Pin::minor_upgrade(&installed);
        assert!(minor.admits(&v("1.9.0"), Some(&installed)));
        assert!(!minor.admits(&v("2.0.0"), Some(&installed)));
        assert!(!minor.admits(&v("1.9.0-rc.1"), Some(&installed)));

        let steady = Pin::exact(&installed, PinReason::Steady);
        assert!(steady.admits(&v("1.2.3+rebuild.2"), Some(&installed)));
        assert!(!steady.admits(&v("1.2.4"), Some(&installed)));

        let install = Pin::install();
        assert!(install.admits(&v("9.0.0"), None));
        assert!(!install.admits(&v("9.1.0-alpha.1"), None));
    }

    #[test]
    fn unpinned_admits_everything_including_prereleases() {
        let pin = Pin::unpinned();
        assert_eq!((pin.range.as_str(), pin.reason), ("*", PinReason::Unpinned));
        assert!(pin.admits(&v("9.1.0-alpha.1"), None));
        assert!(pin.admits(&v("0.0.1"), Some(&v("5.0.0"))));
        assert!(pin.admits(&v("2.0.0-rc.1"), Some(&v("1.0.0"))));
        assert!(!pin.is_rollback_pivot());
        assert_eq!(PinReason::Unpinned.to_string(), "Unpinned");
        assert_eq!(
            serde_json::to_value(&pin).unwrap(),
            serde_json::json!({"range": "*", "reason": "Unpinned"})
        );
    }

    #[test]
    fn rollback_pivot_stays_in_the_major_and_below_installed() {
        let pin = Pin::rollback_pivot(&v("2.4.1"));
        assert_eq!(pin.range, ">=2.0.0 <2.4.1");
        assert!(pin.is_rollback_pivot());
        assert!(pin.admits(&v("2.4.0"), Some(&v("2.4.1"))));
        assert!(!pin.admits(&v("2.4.1"), Some(&v("2.4.1"))));
        assert!(!pin.admits(&v("1.9.9"), Some(&v("2.4.1"))));
        assert!(!Pin::exact(&v("2.4.1"), PinReason::Rollback).is_rollback_pivot());
    }

    #[test]
    fn reasons_print_as_camel_case_words() {
        assert_eq!(PinReason::PatchUpgrade.to_string(), "PatchUpgrade");
        assert_eq!(
            serde_json::to_string(&PinReason::Override).unwrap(),
            "\"Override\""
        );
        let json = serde_json::to_value(Pin::exact(&v("1.0.0"), PinReason::Steady)).unwrap();
        assert_eq!(
            json,
            serde_json::json!({"range": "=1.0.0", "reason": "Steady"})
        );
    }
}
