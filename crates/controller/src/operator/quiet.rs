//! A quiet steady state: when nothing a PlatformOperator's installed bundle depends on has
//! changed since its last full check, its reconcile decides from what that check read and
//! makes no API call at all.
//!
//! Why: a full check reads every object of the bundle (drift repair), its CRDs, Deployments
//! and OperatorCondition, about twice as many requests as the bundle has objects; at one check
//! per PO per resync that is most of the manager's API traffic in a settled cluster. Every
//! change that could make a full check find something is seen by a watch first: the owned
//! objects' metadata watches (labelled with the owner), the OperatorCondition watch, the
//! catalog cache's generation for the PO's package, the PO's own generation. Each such event bumps the PO's
//! *epoch*; a check is reused only while the epoch, the catalog generation and the PO's
//! generation are what they were when the check *started* (so an event during the check
//! invalidates it), and for at most [`FULL_CHECK_INTERVAL`], which bounds how long drift in a
//! kind POM does not watch can go unrepaired.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use pom_policy::snapshot::OperatorGate;
use pom_policy::status::InstallReport;

/// The longest a full check is reused.
pub const FULL_CHECK_INTERVAL: Duration = Duration::from_secs(3600);

/// What the world looked like when a full check started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Observed {
    /// The PO's epoch (owned-object and OperatorCondition events).
    pub epoch: u64,
    /// The catalog cache's generation at which the PO's package last changed.
    pub catalogs: u64,
    /// The PO's `metadata.generation`.
    pub generation: Option<i64>,
}

/// A full check that found nothing to write and a settled bundle.
#[derive(Debug, Clone)]
pub struct Clean {
    pub observed: Observed,
    /// The installed bundle it checked.
    pub bundle: String,
    /// The OperatorCondition gate it read.
    pub gate: OperatorGate,
    /// What the install step reported (nothing written).
    pub report: InstallReport,
    pub checked_at: Instant,
}

/// Whether `clean` still describes the cluster: nothing it depends on moved, it checked the
/// bundle installed now, and it is younger than [`FULL_CHECK_INTERVAL`].
#[must_use]
pub fn still_clean(clean: &Clean, now: &Observed, installed: Option<&str>, age: Duration) -> bool {
    clean.observed == *now && installed == Some(clean.bundle.as_str()) && age < FULL_CHECK_INTERVAL
}

/// Per-PO epochs and last clean checks.
#[derive(Default)]
pub struct CleanChecks {
    epochs: Mutex<HashMap<String, u64>>,
    clean: Mutex<HashMap<String, Clean>>,
}

impl CleanChecks {
    /// Something `po` depends on changed (a watch event on one of its objects).
    pub fn touch(&self, po: &str) {
        if let Ok(mut epochs) = self.epochs.lock() {
            *epochs.entry(po.to_owned()).or_default() += 1;
        }
        if let Ok(mut clean) = self.clean.lock() {
            clean.remove(po);
        }
    }

    /// The current epoch of `po`.
    #[must_use]
    pub fn epoch(&self, po: &str) -> u64 {
        self.epochs
            .lock()
            .ok()
            .and_then(|e| e.get(po).copied())
            .unwrap_or(0)
    }

    /// The last clean check of `po` if it still holds.
    #[must_use]
    pub fn reusable(&self, po: &str, now: &Observed, installed: Option<&str>) -> Option<Clean> {
        let clean = self.clean.lock().ok()?.get(po).cloned()?;
        still_clean(&clean, now, installed, clean.checked_at.elapsed()).then_some(clean)
    }

    /// Records a clean full check of `po`.
    pub fn record(&self, po: &str, clean: Clean) {
        if let Ok(mut checks) = self.clean.lock() {
            checks.insert(po.to_owned(), clean);
        }
    }

    /// Forgets `po` (deleted, or its check no longer clean).
    pub fn forget(&self, po: &str) {
        if let Ok(mut clean) = self.clean.lock() {
            clean.remove(po);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use pom_api::platform_operator::InstalledBundle;

    use super::*;

    fn clean(observed: Observed) -> Clean {
        Clean {
            observed,
            bundle: "op.v1".into(),
            gate: OperatorGate::absent(),
            report: InstallReport {
                bundle: InstalledBundle {
                    name: "op.v1".into(),
                    version: "1.0.0".into(),
                    image: None,
                    objects_digest: None,
                },
                max_openshift_version: None,
                waits: Vec::new(),
                operator_condition: None,
                wrote: 0,
                objects: Vec::new(),
                powers: Vec::new(),
                unavailable: Vec::new(),
            },
            checked_at: Instant::now(),
        }
    }

    const AT: Observed = Observed {
        epoch: 3,
        catalogs: 7,
        generation: Some(2),
    };

    #[test]
    fn a_check_holds_only_while_nothing_it_read_moved() {
        let c = clean(AT);
        let young = Duration::from_secs(10);
        assert!(still_clean(&c, &AT, Some("op.v1"), young));
        for moved in [
            Observed { epoch: 4, ..AT },
            Observed { catalogs: 8, ..AT },
            Observed {
                generation: Some(3),
                ..AT
            },
        ] {
            assert!(!still_clean(&c, &moved, Some("op.v1"), young), "{moved:?}");
        }
        assert!(!still_clean(&c, &AT, Some("op.v2"), young));
        assert!(!still_clean(&c, &AT, None, young));
        assert!(!still_clean(&c, &AT, Some("op.v1"), FULL_CHECK_INTERVAL));
    }

    #[test]
    fn an_event_forgets_the_check_and_moves_the_epoch() {
        let checks = CleanChecks::default();
        let at = Observed {
            epoch: checks.epoch("a"),
            ..AT
        };
        checks.record("a", clean(at));
        assert!(checks.reusable("a", &at, Some("op.v1")).is_some());
        checks.touch("a");
        assert_eq!(checks.epoch("a"), at.epoch + 1);
        assert!(checks.reusable("a", &at, Some("op.v1")).is_none());
        // An event during a check: the check recorded with the epoch it started at never holds.
        checks.record("a", clean(at));
        let now = Observed {
            epoch: checks.epoch("a"),
            ..at
        };
        assert!(checks.reusable("a", &now, Some("op.v1")).is_none());
        // Other POs are untouched.
        assert_eq!(checks.epoch("b"), 0);
    }
}
