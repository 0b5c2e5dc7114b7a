//! Fail points: named places where a test can kill the manager outright, to show that the
//! next leader converges with nothing lost (issue 13 item 8).
//!
//! Compiled only with the `fail-points` feature, which only the e2e crate enables; even then a
//! point fires only when `POM_FAIL_POINT` names it. The process aborts (no destructors, no
//! Lease release, no graceful shutdown), as close to a SIGKILL as a process can do to itself.

/// Where the manager can be killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailPoint {
    /// A move's first object was written; the rest of the bundle was not.
    AfterFirstApply,
    /// Every object of a move is written; the status saying so is not.
    BetweenApplyAndStatus,
    /// Prune after settle deleted its first object; the others and the inventory update wait.
    MidPrune,
    /// Cleanup of a deleted PlatformOperator deleted its first object; the finalizer stays.
    MidCleanup,
}

impl FailPoint {
    /// The value of `POM_FAIL_POINT` that fires this point.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::AfterFirstApply => "after-first-apply",
            Self::BetweenApplyAndStatus => "between-apply-and-status",
            Self::MidPrune => "mid-prune",
            Self::MidCleanup => "mid-cleanup",
        }
    }
}

/// Kills the process here if `POM_FAIL_POINT` names `point` (and the feature is on).
#[inline]
pub fn hit(point: FailPoint) {
    #[cfg(feature = "fail-points")]
    if std::env::var("POM_FAIL_POINT").is_ok_and(|v| v == point.name()) {
        eprintln!("POM_FAIL_POINT {}: aborting", point.name());
        std::process::abort();
    }
    #[cfg(not(feature = "fail-points"))]
    let _ = point;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_distinct_kebab_case() {
        let all = [
            FailPoint::AfterFirstApply,
            FailPoint::BetweenApplyAndStatus,
            FailPoint::MidPrune,
            FailPoint::MidCleanup,
        ];
        let mut names: Vec<&str> = all.iter().map(|p| p.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), all.len());
        assert!(
            names
                .iter()
                .all(|n| n.chars().all(|c| c.is_ascii_lowercase() || c == '-'))
        );
    }
}
