//! What this manager observed itself of the instants recorded in POs' status (issue 34 item 7):
//! when, by its own monotonic clock, it first read each one, so a deadline measured from a
//! time another replica wrote is never judged passed earlier than this manager watched it
//! pass (`pom_policy::clock`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

/// Recorded instants remembered at most (three per PO). Past it the memory is cleared: a
/// forgotten instant is judged by the status times less the skew allowance, late rather
/// than early, so forgetting is safe.
pub const MOST_REMEMBERED: usize = 20_000;

/// Which recorded instant of a PO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recorded {
    /// `status.activeHop.startedAt` (the progress deadline counts from it).
    HopStarted,
    /// `status.activeHop.rolledOutAt` (the first-report window counts from it).
    RolledOut,
    /// `status.activeHop.settledAt` (a soak counts from it).
    Settled,
}

/// When each recorded instant was first read here.
#[derive(Debug, Default)]
pub struct SeenClock {
    first_read: Mutex<HashMap<(String, Recorded), (Timestamp, Instant)>>,
}

impl SeenClock {
    /// How long ago this manager first read `at` as `po`'s `which` (zero the first time; a
    /// different instant recorded there starts over).
    pub fn seen_for(&self, po: &str, which: Recorded, at: Timestamp) -> Duration {
        let now = Instant::now();
        let Ok(mut first_read) = self.first_read.lock() else {
            return Duration::ZERO;
        };
        let key = (po.to_owned(), which);
        if let Some((recorded, since)) = first_read.get(&key)
            && *recorded == at
        {
            return now.saturating_duration_since(*since);
        }
        if first_read.len() >= MOST_REMEMBERED {
            first_read.clear();
        }
        first_read.insert(key, (at, now));
        Duration::ZERO
    }

    /// Drops what was remembered of `po` (it was deleted): the memory holds live POs only.
    pub fn forget(&self, po: &str) {
        if let Ok(mut first_read) = self.first_read.lock() {
            first_read.retain(|(name, _), _| name != po);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_instant_is_watched_from_its_first_read_and_a_new_one_starts_over() {
        let clock = SeenClock::default();
        let t = Timestamp::UNIX_EPOCH;
        assert_eq!(
            clock.seen_for("po", Recorded::HopStarted, t),
            Duration::ZERO
        );
        std::thread::sleep(Duration::from_millis(20));
        assert!(clock.seen_for("po", Recorded::HopStarted, t) >= Duration::from_millis(20));
        // Another PO, another instant of the same PO: their own watches.
        assert_eq!(
            clock.seen_for("other", Recorded::HopStarted, t),
            Duration::ZERO
        );
        assert_eq!(clock.seen_for("po", Recorded::RolledOut, t), Duration::ZERO);
        let later = Timestamp::from_second(1).unwrap_or(t);
        assert_eq!(
            clock.seen_for("po", Recorded::HopStarted, later),
            Duration::ZERO
        );
    }
}
