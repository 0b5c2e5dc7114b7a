//! The one place conditions are computed: `lastTransitionTime` moves only when the status
//! flips, times have the API server's second precision (so an unchanged status compares equal
//! and is not rewritten), and every condition carries a reason from the one table.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use pom_api::conditions::{ConditionStatus, Reason};
use pom_api::openshift::ClusterOperatorStatusCondition;

/// A time truncated to whole seconds, as the API server stores it (so an unchanged status
/// compares equal after a round trip and is not rewritten).
#[must_use]
pub fn to_api_time(at: Timestamp) -> Time {
    Time(Timestamp::from_second(at.as_second()).unwrap_or(Timestamp::UNIX_EPOCH))
}

/// A desired condition, before transition-time bookkeeping.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    pub type_: &'static str,
    pub status: ConditionStatus,
    pub reason: Reason,
    pub message: String,
}

impl Desired {
    #[must_use]
    pub fn new(
        type_: &'static str,
        status: ConditionStatus,
        reason: Reason,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_,
            status,
            reason,
            message: message.into(),
        }
    }
}

/// Builds `metav1.Condition`s for `desired`, keeping `lastTransitionTime` from `previous` when
/// the status did not change; output order follows `desired`.
#[must_use]
pub fn merge(
    previous: &[Condition],
    desired: &[Desired],
    generation: Option<i64>,
    now: &Time,
) -> Vec<Condition> {
    desired
        .iter()
        .map(|d| {
            let old = previous.iter().find(|c| c.type_ == d.type_);
            let last_transition_time = match old {
                Some(old) if old.status == d.status.as_str() => old.last_transition_time.clone(),
                _ => now.clone(),
            };
            Condition {
                type_: d.type_.to_owned(),
                status: d.status.as_str().to_owned(),
                reason: d.reason.as_str().to_owned(),
                message: d.message.clone(),
                observed_generation: generation,
                last_transition_time,
            }
        })
        .collect()
}

/// The same discipline for ClusterOperator conditions (which have no observedGeneration).
#[must_use]
pub fn merge_cluster_operator(
    previous: &[ClusterOperatorStatusCondition],
    desired: &[Desired],
    now: &Time,
) -> Vec<ClusterOperatorStatusCondition> {
    desired
        .iter()
        .map(|d| {
            let old = previous.iter().find(|c| c.type_ == d.type_);
            let last_transition_time = match old {
                Some(old) if old.status == d.status.as_str() => old.last_transition_time.clone(),
                _ => now.clone(),
            };
            ClusterOperatorStatusCondition {
                type_: d.type_.to_owned(),
                status: d.status.as_str().to_owned(),
                last_transition_time,
                reason: Some(d.reason.as_str().to_owned()),
                message: Some(d.message.clone()),
            }
        })
        .collect()
}

/// Finds a condition by type.
#[must_use]
pub fn find<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Time {
        Time(Timestamp::from_second(secs).unwrap())
    }

    #[test]
    fn transition_time_is_kept_while_status_holds() {
        let first = merge(
            &[],
            &[Desired::new(
                "Installed",
                ConditionStatus::False,
                Reason::Installing,
                "x",
            )],
            Some(1),
            &at(10),
        );
        let second = merge(
            &first,
            &[Desired::new(
                "Installed",
                ConditionStatus::False,
                Reason::Installing,
                "y",
            )],
            Some(2),
            &at(20),
        );
        assert_eq!(second[0].last_transition_time, at(10));
        assert_eq!(second[0].observed_generation, Some(2));
        let third = merge(
            &second,
            &[Desired::new(
                "Installed",
                ConditionStatus::True,
                Reason::InstallSucceeded,
                "z",
            )],
            Some(2),
            &at(30),
        );
        assert_eq!(third[0].last_transition_time, at(30));
    }

    #[test]
    fn unchanged_input_gives_equal_output() {
        let d = [Desired::new(
            "Available",
            ConditionStatus::True,
            Reason::AsExpected,
            "ok",
        )];
        let a = merge_cluster_operator(&[], &d, &at(5));
        let b = merge_cluster_operator(&a, &d, &at(99));
        assert_eq!(a, b);
    }
}
