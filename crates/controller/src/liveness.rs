//! Liveness: `/healthz` fails when a reconcile has been running far past its deadline.
//!
//! Every reconcile is cut at its deadline (60 s) by a timer on the async runtime. One that is
//! still running long after that is not waiting on the network: it blocks a runtime thread (a
//! synchronous call that never returns) or its cut was lost, and the object it holds is frozen,
//! since the controller runs one reconcile per object at a time. The process still answers
//! HTTP on its other thread, so a liveness probe that only checks the listener would keep a
//! wedged manager alive forever; this one lets the kubelet restart it, and the next leader
//! resumes every move from its recorded intent.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a reconcile may run before the manager counts as wedged: three reconcile
/// deadlines, so a reconcile cut and retried under load is never mistaken for one.
pub const WEDGED_AFTER: Duration = Duration::from_secs(180);

/// The reconciles running now, with when they started.
#[derive(Debug, Default)]
pub struct Liveness {
    running: Mutex<HashMap<(&'static str, String), Instant>>,
}

/// A running reconcile; it leaves the table when dropped (finished, failed or cut).
#[must_use = "the reconcile counts as running until the guard is dropped"]
pub struct Running<'a> {
    liveness: &'a Liveness,
    key: (&'static str, String),
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Ok(mut running) = self.liveness.running.lock() {
            running.remove(&self.key);
        }
    }
}

/// A reconcile past [`WEDGED_AFTER`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wedged {
    pub controller: &'static str,
    pub object: String,
    pub running_for: Duration,
}

impl std::fmt::Display for Wedged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the {} reconcile of {} has been running for {}s (longer than {}s): a worker is wedged",
            self.controller,
            self.object,
            self.running_for.as_secs(),
            WEDGED_AFTER.as_secs()
        )
    }
}

impl Liveness {
    /// Records that `controller` started reconciling `object`.
    pub fn begin(&self, controller: &'static str, object: &str) -> Running<'_> {
        let key = (controller, object.to_owned());
        if let Ok(mut running) = self.running.lock() {
            running.insert(key.clone(), Instant::now());
        }
        Running {
            liveness: self,
            key,
        }
    }

    /// As [`Liveness::begin`], started at `started` (tests of the probe).
    #[cfg(test)]
    pub(crate) fn begin_at(
        &self,
        controller: &'static str,
        object: &str,
        started: Instant,
    ) -> Running<'_> {
        let running = self.begin(controller, object);
        if let Ok(mut table) = self.running.lock() {
            table.insert(running.key.clone(), started);
        }
        running
    }

    /// The longest-running reconcile if it is past `limit`.
    #[must_use]
    pub fn wedged(&self, now: Instant, limit: Duration) -> Option<Wedged> {
        let running = self.running.lock().ok()?;
        running
            .iter()
            .map(|((controller, object), started)| Wedged {
                controller,
                object: object.clone(),
                running_for: now.saturating_duration_since(*started),
            })
            .filter(|w| w.running_for > limit)
            .max_by_key(|w| w.running_for)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn only_a_reconcile_past_the_limit_is_wedged_and_a_finished_one_never() {
        let liveness = Liveness::default();
        let started = Instant::now();
        let stuck = liveness.begin("catalog", "b");
        std::thread::sleep(Duration::from_millis(20));
        let quick = liveness.begin("platformoperator", "a");
        assert_eq!(
            liveness.wedged(Instant::now(), Duration::from_secs(1)),
            None
        );
        let later = started + Duration::from_secs(5);
        let wedged = liveness.wedged(later, Duration::from_secs(1)).unwrap();
        // The longest-running one is named.
        assert_eq!(
            (wedged.controller, wedged.object.as_str()),
            ("catalog", "b")
        );
        assert!(wedged.running_for >= Duration::from_secs(4));
        drop(quick);
        drop(stuck);
        assert_eq!(liveness.wedged(later, Duration::from_secs(1)), None);
    }

    #[test]
    fn the_message_names_the_object_and_the_limit() {
        let w = Wedged {
            controller: "platformoperator",
            object: "web".into(),
            running_for: Duration::from_secs(200),
        };
        let text = w.to_string();
        assert!(text.contains("platformoperator reconcile of web"), "{text}");
        assert!(text.contains("200s") && text.contains("180s"), "{text}");
    }
}
