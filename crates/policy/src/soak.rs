//! Soak (issue 35 item 4): an optional time after a move settles during which the operator is
//! left alone. Seed 001's operator said `Upgradeable=True` while its database migration still
//! ran; a settled move only proves the rollout and the operator's own report. With
//! `spec.soak`, the next hop waits until the move has been settled that long, and the cluster's
//! version report (`versions` of the aggregated ClusterOperator, which ends a cluster update for
//! the CVO) waits with it.
//!
//! One rule, used by [`crate::decide`] (the next hop waits) and [`crate::status`] (what status
//! records, which the aggregate and the update-risk gauge read): nothing else judges a soak.
//!
//! `settledAt` may have been written by another replica whose clock differs from this one's
//! (review M2): the time soaked is the lower bound of [`crate::clock`] (what this manager
//! watched itself since it first read `settledAt`, or the status times less
//! [`crate::clock::CLOCK_SKEW_ALLOWANCE`]), as for the progress deadline. A soak is then
//! never over early while the replicas' clocks are within the allowance; a manager that took
//! over (or restarted) mid-soak ends it at most the allowance late.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The longest soak a PlatformOperator may ask for: a day. A soak holds every later hop and
/// the cluster's version report; one longer than a maintenance window is a typo more likely
/// than a wish, and a bounded value keeps the arithmetic on timestamps in range.
pub const MAX_SOAK: Duration = Duration::from_secs(24 * 60 * 60);

/// When the soak after a move that settled at `settled_at` (which this manager first read
/// `settled_seen_for` ago by its own clock) ends, while it has not ended at `now`: `now` plus
/// what is left of it by the lower bound of the time soaked, rounded up to a second (status
/// keeps seconds; a second late, never early). `None`: no soak asked for, a move settled
/// before POM recorded when, or the soak over.
#[must_use]
pub fn soak_until(
    settled_at: Option<Timestamp>,
    settled_seen_for: Duration,
    soak: Duration,
    now: Timestamp,
) -> Option<Timestamp> {
    if soak.is_zero() {
        return None;
    }
    let soaked = crate::clock::elapsed_at_least(now, settled_at?, settled_seen_for);
    let left = soak.min(MAX_SOAK).checked_sub(soaked)?;
    if left.is_zero() {
        return None;
    }
    let until = now.checked_add(SignedDuration::try_from(left).ok()?).ok()?;
    let whole = until.as_second();
    let rounded_up = if until.subsec_nanosecond() > 0 {
        whole.saturating_add(1)
    } else {
        whole
    };
    Timestamp::from_second(rounded_up).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + second).unwrap()
    }

    #[test]
    fn a_soak_runs_from_the_settle_until_its_end_and_not_a_second_longer() {
        let ten_minutes = Duration::from_secs(600);
        // (settled at, watched here for, soak, now, soaking until): recorded by this manager,
        // which has watched it since.
        let cases = [
            (Some(at(0)), 0, ten_minutes, at(0), Some(at(600))),
            (Some(at(0)), 599, ten_minutes, at(599), Some(at(600))),
            (Some(at(0)), 600, ten_minutes, at(600), None),
            (Some(at(0)), 601, ten_minutes, at(601), None),
            (Some(at(0)), 0, Duration::ZERO, at(0), None),
            // Settled before POM recorded when: nothing to count from.
            (None, 0, ten_minutes, at(0), None),
            // A soak beyond the limit counts as the limit.
            (
                Some(at(0)),
                1,
                Duration::from_secs(u64::MAX / 4),
                at(1),
                Some(at(86_400)),
            ),
        ];
        for (settled_at, seen, soak, now, want) in cases {
            assert_eq!(
                soak_until(settled_at, Duration::from_secs(seen), soak, now),
                want,
                "settled at {settled_at:?}, seen {seen} s, soak {soak:?}, now {now}"
            );
        }
    }

    #[test]
    fn a_soak_is_never_over_early_under_a_skewed_clock() {
        let ten_minutes = Duration::from_secs(600);
        let min = 60;
        // (what, settled at by the status, watched here for, now, soaking until)
        let cases: [(&str, i64, u64, i64, Option<Timestamp>); 7] = [
            (
                "settled by a replica 5 min behind: the status says 11 min soaked, 6 min did",
                0,
                6 * 60,
                11 * min,
                Some(at(15 * min)),
            ),
            (
                "settled by a replica 5 min behind, watched here for the whole soak",
                0,
                10 * 60,
                15 * min,
                None,
            ),
            (
                "taken over just now, the status says 11 min: the allowance holds it",
                0,
                0,
                11 * min,
                Some(at(20 * min)),
            ),
            (
                "taken over: the status past soak + allowance ends it",
                0,
                0,
                20 * min,
                None,
            ),
            (
                "settled by a replica 5 min ahead (in the future here): the watch decides",
                5 * min,
                9 * 60,
                9 * min,
                Some(at(10 * min)),
            ),
            (
                "settled by a replica 5 min ahead, watched the whole soak",
                5 * min,
                10 * 60,
                10 * min,
                None,
            ),
            (
                "a watch started mid-second ends on the next whole second",
                0,
                0,
                0,
                Some(at(10 * min)),
            ),
        ];
        for (what, settled, seen, now, want) in cases {
            assert_eq!(
                soak_until(
                    Some(at(settled)),
                    Duration::from_secs(seen),
                    ten_minutes,
                    at(now)
                ),
                want,
                "{what}"
            );
        }
        let mid_second = at(0).checked_add(SignedDuration::from_millis(300)).unwrap();
        assert_eq!(
            soak_until(Some(at(0)), Duration::ZERO, ten_minutes, mid_second),
            Some(at(601)),
            "rounded up, never down"
        );
    }
}
