//! Time passed since an instant another replica may have recorded (issue 34 item 7): the
//! progress deadline and the `upgradeGate: Auto` first-report window compare this manager's
//! clock with times written into the status, possibly by a replica whose clock is behind or
//! ahead of this one's.
//!
//! A deadline judged passed too early is the harm (a move reported failed while it progresses,
//! a move settled without hearing the operator), a deadline judged late is only late. So what
//! is judged is a lower bound of the time passed, the larger of two:
//! - what this manager observed itself: how long ago, by its own monotonic clock, it first
//!   read (or wrote) that recorded instant; exact when it recorded it, and never fooled by a
//!   skewed writer;
//! - the status times' difference less [`CLOCK_SKEW_ALLOWANCE`]: a writer whose clock was
//!   behind by up to the allowance cannot make a deadline pass early.
//!
//! So a deadline is never judged passed earlier than it did pass, while replicas' clocks are
//! within the allowance of each other; a manager that took over a move judges it at most the
//! allowance late; a recorded time in the future counts as no time passed until this manager
//! has watched the time pass itself.

use std::time::Duration;

use k8s_openapi::jiff::Timestamp;

/// How far apart two manager replicas' clocks may be before a recorded time can fool a
/// deadline. Nodes keep NTP time (OpenShift runs chrony on every node) and differ by far less;
/// ten minutes also covers a node whose time source failed for hours (a replica minutes
/// behind). The price: a manager that takes over a move judges its deadline by its own watch
/// alone until the status times are this far past it, at most this much late. Deadlines
/// (minutes) are reports, not actions, so late is the safe side.
pub const CLOCK_SKEW_ALLOWANCE: Duration = Duration::from_secs(10 * 60);

/// A lower bound of the time passed since `recorded`, which this manager first read
/// `seen_for` ago by its own clock (see the module's doc).
#[must_use]
pub fn elapsed_at_least(now: Timestamp, recorded: Timestamp, seen_for: Duration) -> Duration {
    let by_status = crate::snapshot::elapsed(now, recorded).saturating_sub(CLOCK_SKEW_ALLOWANCE);
    by_status.max(seen_for)
}

/// Whether `deadline` has passed since `recorded` (strictly after it, as the deadline's own
/// rule says), judged by [`elapsed_at_least`].
#[must_use]
pub fn has_passed(
    now: Timestamp,
    recorded: Timestamp,
    seen_for: Duration,
    deadline: Duration,
) -> bool {
    elapsed_at_least(now, recorded, seen_for) > deadline
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap_or(Timestamp::UNIX_EPOCH)
    }

    const MIN: u64 = 60;

    #[test]
    fn a_deadline_passes_no_earlier_than_it_did_and_late_by_at_most_the_allowance() {
        let deadline = Duration::from_secs(10 * MIN);
        // (what, now, recorded, seen by this manager for, passed?)
        let cases: [(&str, i64, i64, u64, bool); 10] = [
            (
                "recorded here, deadline not reached",
                9 * 60,
                0,
                9 * MIN,
                false,
            ),
            ("recorded here, deadline passed", 11 * 60, 0, 11 * MIN, true),
            (
                "recorded by a replica 5 min behind: status says 11 min, 6 min passed",
                11 * 60,
                0,
                6 * MIN,
                false,
            ),
            (
                "recorded by a replica 5 min behind, just taken over: the status alone",
                11 * 60,
                0,
                0,
                false,
            ),
            (
                "taken over: the status 1 s past deadline + allowance",
                20 * 60 + 1,
                0,
                0,
                true,
            ),
            (
                "a timestamp 5 min in the future, just read: nothing passed",
                0,
                5 * 60,
                0,
                false,
            ),
            (
                "a timestamp in the future, watched here past the deadline",
                11 * 60,
                20 * 60,
                11 * MIN,
                true,
            ),
            (
                "this replica 5 min behind its predecessor: its own watch decides",
                6 * 60,
                0,
                10 * MIN + 1,
                true,
            ),
            (
                "exactly the deadline is not past it",
                10 * 60,
                0,
                10 * MIN,
                false,
            ),
            ("a deadline of zero passes after a second", 1, 0, 1, true),
        ];
        for (what, now, recorded, seen, passed) in cases {
            let deadline = if what.starts_with("a deadline of zero") {
                Duration::ZERO
            } else {
                deadline
            };
            assert_eq!(
                has_passed(at(now), at(recorded), Duration::from_secs(seen), deadline),
                passed,
                "{what}"
            );
        }
    }

    #[test]
    fn the_bound_is_the_larger_of_the_local_watch_and_the_status_less_the_allowance() {
        assert_eq!(
            elapsed_at_least(at(900), at(0), Duration::from_secs(10)),
            Duration::from_secs(300)
        );
        assert_eq!(
            elapsed_at_least(at(900), at(0), Duration::from_secs(400)),
            Duration::from_secs(400)
        );
        assert_eq!(
            elapsed_at_least(at(0), at(300), Duration::ZERO),
            Duration::ZERO
        );
    }
}
