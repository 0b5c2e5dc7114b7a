//! The Catalog status POM reports: computed purely from the previous status and the outcome of
//! a fetch, so that an unchanged outcome gives an identical status and nothing is written.

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use pom_api::CatalogStatus;
use pom_api::catalog::InvalidPackage;
use pom_api::conditions::{ConditionStatus, Reason, types};

use super::cache::ServedCatalog;
use crate::conditions::{Desired, merge};

/// Most invalid packages listed in status (the message counts them all).
const MAX_REPORTED_INVALID_PACKAGES: usize = 100;
/// Longest reason kept per invalid package.
const MAX_REASON_CHARS: usize = 1024;

/// What a reconcile found: served content, or a `Serving=False` reason and message.
pub(crate) type Outcome<'a> = Result<&'a Arc<ServedCatalog>, (Reason, String)>;

/// The full status after `outcome`. Fields describing content (`resolvedSource`,
/// `servedFrom`, `packages`, `lastUnpacked`) keep their previous values on failure: they
/// describe the last good content.
pub(crate) fn desired(
    old: &CatalogStatus,
    generation: Option<i64>,
    outcome: &Outcome<'_>,
    now: jiff::Timestamp,
) -> CatalogStatus {
    let mut status = old.clone();
    status.observed_generation = generation;
    let condition = match outcome {
        Ok(served) => {
            let packages = served.package_count();
            let keep_time = old.resolved_source.as_deref() == Some(served.resolved_source.as_str())
                && old.last_unpacked.is_some();
            if !keep_time {
                status.last_unpacked = Some(seconds(served.unpacked_at).to_string());
            }
            // Content taken from POM's cache (after a restart, its folder on disk) was not read
            // from anywhere now: the same content keeps the location it was read from.
            let same_content =
                old.resolved_source.as_deref() == Some(served.resolved_source.as_str());
            if served.served_from.is_some() || !same_content {
                status.served_from.clone_from(&served.served_from);
            }
            status.resolved_source = Some(served.resolved_source.clone());
            status.packages = Some(i64::try_from(packages).unwrap_or(i64::MAX));
            let invalid = served.invalid_packages();
            status.invalid_packages = invalid
                .iter()
                .take(MAX_REPORTED_INVALID_PACKAGES)
                .map(|(name, error)| InvalidPackage {
                    name: name.clone(),
                    reason: error.to_string().chars().take(MAX_REASON_CHARS).collect(),
                })
                .collect();
            let left_out = if invalid.is_empty() {
                String::new()
            } else {
                let names: Vec<&str> = invalid.keys().map(String::as_str).take(10).collect();
                format!(
                    "; {} invalid package{} not served ({}{}): see status.invalidPackages and ask the catalog's publisher to fix them",
                    invalid.len(),
                    if invalid.len() == 1 { " is" } else { "s are" },
                    names.join(", "),
                    if invalid.len() > names.len() {
                        ", …"
                    } else {
                        ""
                    }
                )
            };
            Desired::new(
                types::SERVING,
                ConditionStatus::True,
                Reason::Unpacked,
                format!(
                    "serving {packages} package{} from {}{left_out}",
                    if packages == 1 { "" } else { "s" },
                    served.resolved_source
                ),
            )
        }
        Err((reason, message)) => Desired::new(
            types::SERVING,
            ConditionStatus::False,
            *reason,
            message.clone(),
        ),
    };
    // Conditions of other writers are not ours to apply (see `owned`); keep them as they are.
    let mut conditions: Vec<Condition> = old
        .conditions
        .iter()
        .filter(|c| c.type_ != types::SERVING)
        .cloned()
        .collect();
    conditions.extend(merge(
        &old.conditions,
        &[condition],
        generation,
        &Time(seconds(now)),
    ));
    status.conditions = conditions;
    status
}

/// The part of `status` this controller owns and applies: every field but the conditions of
/// other writers.
pub(crate) fn owned(status: &CatalogStatus) -> CatalogStatus {
    CatalogStatus {
        conditions: status
            .conditions
            .iter()
            .filter(|c| c.type_ == types::SERVING)
            .cloned()
            .collect(),
        ..status.clone()
    }
}

/// The `Serving` condition of a status.
pub(crate) fn serving(status: &CatalogStatus) -> Option<&Condition> {
    status.conditions.iter().find(|c| c.type_ == types::SERVING)
}

/// API servers store times with second precision; writing more would never compare equal.
fn seconds(at: jiff::Timestamp) -> jiff::Timestamp {
    jiff::Timestamp::from_second(at.as_second()).unwrap_or(at)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn served(source: &str) -> Arc<ServedCatalog> {
        let empty = pom_resolver::fbc::parse_documents_scoped(
            Vec::<(String, Vec<u8>)>::new(),
            std::collections::BTreeSet::new(),
        )
        .unwrap();
        Arc::new(ServedCatalog::new(
            source.to_owned(),
            empty,
            jiff::Timestamp::from_second(1_000).unwrap(),
            crate::catalog::DEFAULT_HELD_SOURCE_BUDGET,
        ))
    }

    fn at(second: i64) -> jiff::Timestamp {
        jiff::Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn unchanged_outcome_gives_an_identical_status() {
        let content = served("r/c@sha256:1");
        let first = desired(&CatalogStatus::default(), Some(1), &Ok(&content), at(2_000));
        let again = desired(&first, Some(1), &Ok(&content), at(3_000));
        assert_eq!(first, again);
        assert_eq!(first.last_unpacked.as_deref(), Some("1970-01-01T00:16:40Z"));
        assert_eq!(
            serving(&first).unwrap().message,
            "serving 0 packages from r/c@sha256:1"
        );
    }

    /// `servedFrom` names where content was read; content taken from the cache keeps it, new
    /// content read from nowhere (a ConfigMap) drops it, and a failure keeps it.
    #[test]
    fn served_from_follows_the_content_it_describes() {
        let from = |source: &str, location: Option<&str>| {
            let served = served(source);
            let served = Arc::try_unwrap(served).unwrap();
            Arc::new(served.with_served_from(location.map(str::to_owned)))
        };
        let mirror = "m.local/ns/c@sha256:1 (mirror of quay.io/ns from ImageDigestMirrorSet/x)";
        let pulled = from("quay.io/ns/c@sha256:1", Some(mirror));
        let first = desired(&CatalogStatus::default(), Some(1), &Ok(&pulled), at(2_000));
        assert_eq!(first.served_from.as_deref(), Some(mirror));

        // The same content from the cache (a restart found its folder on disk): kept.
        let cached = from("quay.io/ns/c@sha256:1", None);
        let again = desired(&first, Some(1), &Ok(&cached), at(3_000));
        assert_eq!(again, first);

        // A failure keeps describing the last good content.
        let down = desired(
            &first,
            Some(1),
            &Err((Reason::ImageNotFound, "gone".to_owned())),
            at(4_000),
        );
        assert_eq!(down.served_from.as_deref(), Some(mirror));

        // Other content, read from nowhere: the old location no longer describes it.
        let config_map = from("configmap/ns/c/catalog.json@sha256:2", None);
        let moved = desired(&first, Some(1), &Ok(&config_map), at(5_000));
        assert_eq!(moved.served_from, None);

        // Other content read from a location: that location.
        let source = "quay.io/ns/c@sha256:3 (the source)";
        let next = from("quay.io/ns/c@sha256:3", Some(source));
        let newer = desired(&first, Some(1), &Ok(&next), at(6_000));
        assert_eq!(newer.served_from.as_deref(), Some(source));
    }

    #[test]
    fn transition_time_moves_only_when_the_status_flips() {
        let content = served("r/c@sha256:1");
        let up = desired(&CatalogStatus::default(), Some(1), &Ok(&content), at(2_000));
        let down = desired(
            &up,
            Some(1),
            &Err((Reason::ImageNotFound, "gone".to_owned())),
            at(3_000),
        );
        let still_down = desired(
            &down,
            Some(1),
            &Err((Reason::RegistryUnreachable, "down".to_owned())),
            at(4_000),
        );
        assert_eq!(
            serving(&down).unwrap().last_transition_time,
            Time(at(3_000))
        );
        assert_eq!(
            serving(&still_down).unwrap().last_transition_time,
            Time(at(3_000))
        );
        assert_eq!(serving(&still_down).unwrap().reason, "RegistryUnreachable");
        // The last good content is still described.
        assert_eq!(still_down.resolved_source.as_deref(), Some("r/c@sha256:1"));
    }
}
