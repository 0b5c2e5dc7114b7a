//! Soak (issue 35 item 4): an optional time after a move settles during which the operator is
//! left alone. Seed 001's operator said `Upgradeable=True` while its database migration still
//! ran; a settled move only proves the rollout and the operator's own report. With
//! `spec.soak`, the next hop waits until the move has been settled that long, and the cluster's
//! version report (`versions` of the aggregated ClusterOperator, which ends a cluster update for
//! the CVO) waits with it.
//!
//! One rule, used by [`crate::decide`] (the next hop waits) and [`crate::status`] (what status
//! records, which the aggregate and the update-risk gauge read): nothing else judges a soak.

use std::time::Duration;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// The longest soak a PlatformOperator may ask for: a day. A soak holds every later hop and
/// the cluster's version report; one longer than a maintenance window is a typo more likely
/// than a wish, and a bounded value keeps the arithmetic on timestamps in range.
pub const MAX_SOAK: Duration = Duration::from_secs(24 * 60 * 60);

/// When the soak after a move that settled at `settled_at` ends, while it has not ended at
/// `now`. `None`: no soak asked for, a move settled before POM recorded when, or the soak over.
#[must_use]
pub fn soak_until(
    settled_at: Option<Timestamp>,
    soak: Duration,
    now: Timestamp,
) -> Option<Timestamp> {
    if soak.is_zero() {
        return None;
    }
    let soak = SignedDuration::try_from(soak.min(MAX_SOAK)).ok()?;
    let until = settled_at?.checked_add(soak).ok()?;
    (until > now).then_some(until)
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
        let cases = [
            // (settled at, soak, now, soaking until)
            (Some(at(0)), ten_minutes, at(0), Some(at(600))),
            (Some(at(0)), ten_minutes, at(599), Some(at(600))),
            (Some(at(0)), ten_minutes, at(600), None),
            (Some(at(0)), ten_minutes, at(601), None),
            (Some(at(0)), Duration::ZERO, at(0), None),
            // Settled before POM recorded when: nothing to count from.
            (None, ten_minutes, at(0), None),
            // A soak beyond the limit counts as the limit.
            (
                Some(at(0)),
                Duration::from_secs(u64::MAX / 4),
                at(1),
                Some(at(86_400)),
            ),
        ];
        for (settled_at, soak, now, want) in cases {
            assert_eq!(
                soak_until(settled_at, soak, now),
                want,
                "settled at {settled_at:?}, soak {soak:?}, now {now}"
            );
        }
    }
}
