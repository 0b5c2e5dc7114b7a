//! The cluster's update phase, read from a plain snapshot of ClusterVersion (§4.1).
//!
//! The controller copies the few ClusterVersion fields POM needs into a
//! [`ClusterVersionSnapshot`] (no kube types here), and [`cluster_phase`] decides whether the
//! cluster is steady, in a patch or minor update, or rolling back. The pin (§4.2) and the
//! compatibility filter (§5.3) both follow from that phase. Anything that cannot be read is a
//! reported error: guessing a phase could move a platform operator at the wrong moment.

use std::fmt;

use semver::Version;
use serde::{Deserialize, Serialize};

/// One `status.history[]` entry of ClusterVersion, newest first as the CVO writes them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HistoryEntry {
    /// `Completed` or `Partial` (verbatim; other values count as not completed).
    pub state: String,
    /// The release version of the entry, e.g. `4.16.3`.
    pub version: String,
    /// `completionTime`; `None` while the entry is still being applied.
    pub completion_time: Option<String>,
}

/// The ClusterVersion fields the phase depends on, copied out of the API object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ClusterVersionSnapshot {
    /// `status.history`, newest first.
    pub history: Vec<HistoryEntry>,
    /// `status.desired.version`: where the CVO is heading.
    pub desired_version: Option<String>,
    /// `spec.desiredUpdate.version`: what the admin asked for, which the CVO may not have
    /// accepted (a refused request stays there).
    pub requested_version: Option<String>,
    /// The `Progressing` condition: `Some(true)` when True, `None` when absent.
    pub progressing: Option<bool>,
}

/// What the cluster is doing, as far as platform operators are concerned.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum PhaseKind {
    /// No update in flight (or one that does not change the version).
    Steady,
    /// Same major.minor, higher version: POs may move within their minor.
    PatchUpgrade,
    /// Higher minor or major: POs may move within their major.
    MinorUpgrade,
    /// Lower version (OpenShift only allows this within a z-stream): POs stay or pivot down.
    Rollback,
}

impl fmt::Display for PhaseKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PhaseKind::Steady => "Steady",
            PhaseKind::PatchUpgrade => "PatchUpgrade",
            PhaseKind::MinorUpgrade => "MinorUpgrade",
            PhaseKind::Rollback => "Rollback",
        })
    }
}

/// The phase plus the two versions it was derived from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterPhase {
    pub kind: PhaseKind,
    /// The version the cluster last completed (newest `Completed` history entry).
    pub current: Version,
    /// `status.desired.version`: where the cluster is heading (equal to `current` when steady).
    pub target: Version,
}

impl ClusterPhase {
    /// A steady cluster at `version`: what a caller without ClusterVersion history (tests,
    /// `pomctl resolve --cluster-version` alone) means.
    pub fn steady(version: Version) -> Self {
        ClusterPhase {
            kind: PhaseKind::Steady,
            current: version.clone(),
            target: version,
        }
    }

    /// The version a bundle chosen now will have to run on: the target while an update (or a
    /// rollback) is in flight, the current version otherwise. Compatibility is judged on it.
    pub fn running_on(&self) -> &Version {
        match self.kind {
            PhaseKind::Steady => &self.current,
            PhaseKind::PatchUpgrade | PhaseKind::MinorUpgrade | PhaseKind::Rollback => &self.target,
        }
    }
}

/// Why no phase could be derived. Each message names the field and says what to check.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ClusterPhaseError {
    /// `status.desired.version` is missing or empty (early in an install, or an image-only update).
    #[error(
        "ClusterVersion status.desired.version is empty: the update target is unknown, so no \
         platform operator will be moved until the cluster-version operator reports a version"
    )]
    MissingDesiredVersion,
    /// A version field does not parse as a semantic version.
    #[error(
        "ClusterVersion {field} is {value:?}, which is not a semantic version ({reason}); \
         POM will not guess the cluster phase: check `oc get clusterversion version -o yaml`"
    )]
    UnparsableVersion {
        field: String,
        value: String,
        reason: String,
    },
}

/// Derives the cluster phase from ClusterVersion (§4.1).
///
/// - current: the newest `Completed` history entry, else `status.desired.version`;
/// - target: `status.desired.version`;
/// - in flight: `history[0]` is `Partial` without a completion time, or `Progressing=True`;
/// - a target below a version that was partly rolled out since the last completed one (an
///   entry between `history[0]` and the newest `Completed`) is a Rollback: the CVO's
///   "previous" is the newest entry whose version differs from the target, whatever its state
///   (`pkg/cvo/rollback.go`), so an in-flight 4.16.3 → 4.16.4 rolled back to 4.16.3 puts
///   4.16.4 components back to 4.16.3 (a gap in §4.1, recorded in docs/decisions.md);
/// - otherwise a target equal to current (by precedence) is Steady even while the CVO
///   reconciles.
pub fn cluster_phase(snapshot: &ClusterVersionSnapshot) -> Result<ClusterPhase, ClusterPhaseError> {
    let desired_raw = snapshot
        .desired_version
        .as_deref()
        .map(str::trim)
        .unwrap_or_default();
    if desired_raw.is_empty() {
        return Err(ClusterPhaseError::MissingDesiredVersion);
    }
    let target = parse_cluster_version("status.desired.version", desired_raw)?;

    let completed = snapshot
        .history
        .iter()
        .enumerate()
        .find(|(_, entry)| entry.state == "Completed");
    let current = match completed {
        Some((index, entry)) => parse_cluster_version(
            &format!("status.history[{index}].version"),
            entry.version.trim(),
        )?,
        None => target.clone(),
    };

    let newest_partial = snapshot
        .history
        .first()
        .is_some_and(|entry| entry.state == "Partial" && entry.completion_time.is_none());
    let in_flight = newest_partial || snapshot.progressing == Some(true);

    // The update being left when `history[0]` started: entries newer than the newest
    // `Completed` one were partly rolled out, so going below any of them is a rollback even
    // when the target is the version last completed (an in-flight patch rolled back).
    let newer_than_completed = completed.map_or(0, |(index, _)| index);
    let mut partly_reached = None::<Version>;
    for (index, entry) in snapshot
        .history
        .iter()
        .enumerate()
        .take(newer_than_completed)
        .skip(1)
    {
        let version = parse_cluster_version(
            &format!("status.history[{index}].version"),
            entry.version.trim(),
        )?;
        if partly_reached
            .as_ref()
            .is_none_or(|highest| version.cmp_precedence(highest).is_gt())
        {
            partly_reached = Some(version);
        }
    }
    let rolls_back_a_partial_update = partly_reached
        .as_ref()
        .is_some_and(|highest| target.cmp_precedence(highest).is_lt());

    let kind = if !in_flight {
        PhaseKind::Steady
    } else if rolls_back_a_partial_update {
        PhaseKind::Rollback
    } else {
        match target.cmp_precedence(&current) {
            std::cmp::Ordering::Equal => PhaseKind::Steady,
            std::cmp::Ordering::Less => PhaseKind::Rollback,
            std::cmp::Ordering::Greater => {
                if (target.major, target.minor) == (current.major, current.minor) {
                    PhaseKind::PatchUpgrade
                } else {
                    PhaseKind::MinorUpgrade
                }
            }
        }
    };
    Ok(ClusterPhase {
        kind,
        current,
        target,
    })
}

/// Parses an OpenShift release version (`4.16.3`, `v4.17.0-rc.1`); anything else is an error.
fn parse_cluster_version(field: &str, value: &str) -> Result<Version, ClusterPhaseError> {
    let stripped = value.strip_prefix('v').unwrap_or(value);
    Version::parse(stripped).map_err(|err| ClusterPhaseError::UnparsableVersion {
        field: field.to_owned(),
        value: value.to_owned(),
        reason: err.to_string(),
    })
}

/// OLM's minor-version normalisation: OpenShift 4.23 is released as 5.0, so `4.23` (and any
/// later 4.y, counted on from there) compares as `5.(y-23)`. Used on both sides of every
/// `maxOpenShiftVersion` comparison so that `4.23` and `5.0` mean the same cluster.
pub fn normalize_minor(major: u64, minor: u64) -> (u64, u64) {
    if major == 4 && minor >= 23 {
        (5, minor - 23)
    } else {
        (major, minor)
    }
}

/// The next minor OpenShift after `version`, normalised (4.21 → 4.22, 4.22 → 5.0, 5.0 → 5.1).
///
/// The cluster-version operator blocks minor (and major) updates on Upgradeable=False, so an
/// installed bundle must support this minor for the cluster to be upgradeable (§8.3).
pub fn next_minor(version: &Version) -> (u64, u64) {
    let (major, minor) = normalize_minor(version.major, version.minor);
    normalize_minor(major, minor.saturating_add(1))
}

/// Whether a bundle whose `maxOpenShiftVersion` is `max` may run on OpenShift `major.minor`.
pub fn max_supports(max: (u64, u64), major: u64, minor: u64) -> bool {
    normalize_minor(max.0, max.1) >= normalize_minor(major, minor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        match Version::parse(text) {
            Ok(version) => version,
            Err(err) => panic!("bad test version {text}: {err}"),
        }
    }

    fn entry(state: &str, version: &str, done: bool) -> HistoryEntry {
        HistoryEntry {
            state: state.to_owned(),
            version: version.to_owned(),
            completion_time: done.then(|| "2026-01-01T00:00:00Z".to_owned()),
        }
    }

    fn snapshot(
        history: Vec<HistoryEntry>,
        desired: &str,
        progressing: Option<bool>,
    ) -> ClusterVersionSnapshot {
        ClusterVersionSnapshot {
            history,
            desired_version: Some(desired.to_owned()),
            requested_version: None,
            progressing,
        }
    }

    #[test]
    fn phases_follow_the_history_and_the_target() {
        let cases = [
            // (history, desired, progressing, kind, current)
            (
                vec![entry("Completed", "4.16.3", true)],
                "4.16.3",
                Some(false),
                PhaseKind::Steady,
                "4.16.3",
            ),
            (
                vec![
                    entry("Partial", "4.16.5", false),
                    entry("Completed", "4.16.3", true),
                ],
                "4.16.5",
                Some(true),
                PhaseKind::PatchUpgrade,
                "4.16.3",
            ),
            (
                vec![
                    entry("Partial", "4.17.0", false),
                    entry("Completed", "4.16.3", true),
                ],
                "4.17.0",
                None,
                PhaseKind::MinorUpgrade,
                "4.16.3",
            ),
            (
                vec![
                    entry("Partial", "5.0.0", false),
                    entry("Completed", "4.22.1", true),
                ],
                "5.0.0",
                Some(true),
                PhaseKind::MinorUpgrade,
                "4.22.1",
            ),
            (
                vec![
                    entry("Partial", "4.16.2", false),
                    entry("Completed", "4.16.3", true),
                ],
                "4.16.2",
                Some(true),
                PhaseKind::Rollback,
                "4.16.3",
            ),
            // Progressing=True on the same version (a re-sync) changes nothing.
            (
                vec![entry("Completed", "4.16.3", true)],
                "4.16.3",
                Some(true),
                PhaseKind::Steady,
                "4.16.3",
            ),
            // A superseded Partial entry (completionTime set) with Progressing=False is not in flight.
            (
                vec![
                    entry("Partial", "4.17.0", true),
                    entry("Completed", "4.16.3", true),
                ],
                "4.17.0",
                Some(false),
                PhaseKind::Steady,
                "4.16.3",
            ),
            // An in-flight patch rolled back to the version it left: a rollback.
            (
                vec![
                    entry("Partial", "4.16.3", false),
                    entry("Partial", "4.16.4", true),
                    entry("Completed", "4.16.3", true),
                ],
                "4.16.3",
                Some(true),
                PhaseKind::Rollback,
                "4.16.3",
            ),
            // A retarget past a partial entry (4.16.4 abandoned for 4.16.5) is still an update.
            (
                vec![
                    entry("Partial", "4.16.5", false),
                    entry("Partial", "4.16.4", true),
                    entry("Completed", "4.16.3", true),
                ],
                "4.16.5",
                Some(true),
                PhaseKind::PatchUpgrade,
                "4.16.3",
            ),
            // The rollback done: steady again.
            (
                vec![
                    entry("Completed", "4.16.3", true),
                    entry("Partial", "4.16.4", true),
                    entry("Completed", "4.16.3", true),
                ],
                "4.16.3",
                Some(false),
                PhaseKind::Steady,
                "4.16.3",
            ),
            // Installing: no Completed entry yet; current falls back to desired.
            (
                vec![entry("Partial", "4.16.0", false)],
                "4.16.0",
                Some(true),
                PhaseKind::Steady,
                "4.16.0",
            ),
        ];
        for (history, desired, progressing, kind, current) in cases {
            let phase = cluster_phase(&snapshot(history.clone(), desired, progressing));
            let phase = match phase {
                Ok(phase) => phase,
                Err(err) => panic!("{history:?}: {err}"),
            };
            assert_eq!(phase.kind, kind, "{history:?} -> {desired}");
            assert_eq!(phase.current, v(current));
            assert_eq!(phase.target, v(desired));
        }
    }

    #[test]
    fn empty_or_junk_versions_are_errors_not_guesses() {
        let missing = ClusterVersionSnapshot {
            history: vec![],
            desired_version: None,
            requested_version: None,
            progressing: None,
        };
        assert_eq!(
            cluster_phase(&missing),
            Err(ClusterPhaseError::MissingDesiredVersion)
        );
        let empty = snapshot(vec![], "  ", None);
        assert_eq!(
            cluster_phase(&empty),
            Err(ClusterPhaseError::MissingDesiredVersion)
        );
        let junk = snapshot(vec![], "4.16", None);
        let err = cluster_phase(&junk)
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("status.desired.version") && err.contains("4.16"),
            "{err}"
        );
        let bad_history = snapshot(vec![entry("Completed", "four", true)], "4.16.1", None);
        let err = cluster_phase(&bad_history)
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default();
        assert!(err.contains("status.history[0].version"), "{err}");
    }

    #[test]
    fn a_leading_v_and_prereleases_are_read() {
        let phase = cluster_phase(&snapshot(
            vec![entry("Completed", "v4.16.0-rc.1", true)],
            "4.16.0-rc.1",
            None,
        ));
        assert_eq!(phase.map(|p| p.current), Ok(v("4.16.0-rc.1")));
    }

    #[test]
    fn next_minor_normalises_4_23_to_5_0() {
        assert_eq!(next_minor(&v("4.16.3")), (4, 17));
        assert_eq!(next_minor(&v("4.22.0")), (5, 0));
        assert_eq!(next_minor(&v("4.23.0")), (5, 1));
        assert_eq!(next_minor(&v("5.0.2")), (5, 1));
        assert_eq!(next_minor(&v("4.16.0-rc.1")), (4, 17));
        assert!(max_supports((4, 23), 5, 0));
        assert!(max_supports((5, 0), 4, 23));
        assert!(!max_supports((4, 22), 5, 0));
        assert!(max_supports((4, 17), 4, 17));
        assert!(!max_supports((4, 16), 4, 17));
    }

    #[test]
    fn running_on_is_the_target_only_while_moving() {
        let steady = ClusterPhase::steady(v("4.16.3"));
        assert_eq!(steady.running_on(), &v("4.16.3"));
        let minor = ClusterPhase {
            kind: PhaseKind::MinorUpgrade,
            current: v("4.16.3"),
            target: v("4.17.0"),
        };
        assert_eq!(minor.running_on(), &v("4.17.0"));
    }
}
