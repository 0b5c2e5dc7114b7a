//! What this manager observed itself of the instants recorded in POs' status (issue 34 item 7):
//! when, by its own monotonic clock, it first read each one, so a deadline measured from a
//! time another replica wrote is never judged passed earlier than this manager watched it
//! pass (`pom_policy::clock`).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::jiff::Timestamp;

/// Recorded instants remembered at most (four per PO). Past it the memory is cleared: a
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
    /// `status.activeHop.replaces.startedAt`: the start of the move an intent replaced, read
    /// before as that move's `HopStarted` (its deadline still counts from it).
    ReplacedStarted,
}

/// When each recorded instant was first read here.
#[derive(Debug, Default)]
pub struct SeenClock {
    first_read: Mutex<HashMap<(String, Recorded), (Timestamp, Instant)>>,
}

impl SeenClock {
    /// How long ago this manager first read `at` as `po`'s `which` (zero the first time; a
    /// different instant recorded there starts over). A replaced move's start keeps what was
    /// read of it as the start of that move: ask for it before the new `HopStarted`.
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
        // A replaced move's start was first read as the start of that move, and a move
        // restored when the intent that replaced it was dropped was watched as the replaced
        // one meanwhile (second review of session 23, M1).
        let other = match which {
            Recorded::ReplacedStarted => Some(Recorded::HopStarted),
            Recorded::HopStarted => Some(Recorded::ReplacedStarted),
            Recorded::RolledOut | Recorded::Settled => None,
        };
        let inherited = other
            .and_then(|other| first_read.get(&(po.to_owned(), other)))
            .filter(|(recorded, _)| *recorded == at)
            .map(|(_, since)| *since);
        if first_read.len() >= MOST_REMEMBERED {
            first_read.clear();
        }
        let since = inherited.unwrap_or(now);
        first_read.insert(key, (at, since));
        now.saturating_duration_since(since)
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

    /// An intent recorded over an unsettled move keeps that move's start as the one it
    /// replaces: what was watched of it as the hop's start still counts.
    #[test]
    fn a_replaced_start_keeps_what_was_watched_of_it() {
        let clock = SeenClock::default();
        let started = Timestamp::UNIX_EPOCH;
        let _ = clock.seen_for("po", Recorded::HopStarted, started);
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            clock.seen_for("po", Recorded::ReplacedStarted, started) >= Duration::from_millis(20)
        );
        let intent = Timestamp::from_second(1).unwrap_or(started);
        assert_eq!(
            clock.seen_for("po", Recorded::HopStarted, intent),
            Duration::ZERO
        );
        assert!(
            clock.seen_for("po", Recorded::ReplacedStarted, started) >= Duration::from_millis(20)
        );
        // The intent dropped: the move restored was watched all along.
        assert!(clock.seen_for("po", Recorded::HopStarted, started) >= Duration::from_millis(20));
        // Never read as a hop's start: watched from now.
        let other = Timestamp::from_second(2).unwrap_or(started);
        assert_eq!(
            clock.seen_for("other", Recorded::ReplacedStarted, other),
            Duration::ZERO
        );
    }
}
