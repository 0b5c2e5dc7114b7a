//! Kubernetes Events (`events.k8s.io/v1`) about PlatformOperators and Catalogs, with an event
//! repeated within [`SERIES_WINDOW`] counted as a series on the Event already sent, as
//! client-go's event broadcaster does.
//!
//! Why not kube-runtime's `Recorder`: to count repeats it keeps a clone of the whole last Event
//! (its note of up to 1 kB, both object references, metadata) for every distinct (object, type,
//! action, reason) for six minutes. A heap profile of the manager at 1,000 POs found 14.1 MiB
//! of its 55 MiB peak there (`docs/benchmarks.md`). [`SeriesCache`] keeps what a repeat needs,
//! the Event's name, count and time, and holds at most [`MAX_TRACKED_SERIES`] of them: a new
//! series beyond that is sent as a new Event, never counted on a wrong one.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client};

pub use kube::runtime::events::{Event, EventType};

/// A repeat within this window of the last occurrence is counted on the same Event; the same
/// six minutes as client-go's event broadcaster and kube-runtime's `Recorder`.
pub const SERIES_WINDOW: Duration = Duration::from_secs(6 * 60);

/// How many distinct series are remembered at once. One PO or Catalog has a handful (one per
/// condition type and reason it went through in the window); this bounds the cache at a few
/// MiB for a fleet of thousands, whatever churns.
pub const MAX_TRACKED_SERIES: usize = 16_384;

/// Cluster-scoped objects' Events go here, as kube-runtime and client-go put them.
const DEFAULT_NAMESPACE: &str = "default";

/// Who publishes: `reportingController` and `reportingInstance` of every Event.
#[derive(Clone, Debug)]
pub struct Reporter {
    pub controller: String,
    pub instance: String,
}

/// What makes two events the same series: the object they are about and what happened.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct SeriesKey {
    /// The object's UID, or `kind/namespace/name` for a reference without one.
    regarding: Box<str>,
    event_type: EventType,
    action: Box<str>,
    reason: Box<str>,
}

impl SeriesKey {
    #[must_use]
    pub fn new(event: &Event, regarding: &ObjectReference) -> Self {
        let regarding = match &regarding.uid {
            Some(uid) => uid.as_str().into(),
            None => format!(
                "{}/{}/{}",
                regarding.kind.as_deref().unwrap_or_default(),
                regarding.namespace.as_deref().unwrap_or_default(),
                regarding.name.as_deref().unwrap_or_default()
            )
            .into(),
        };
        Self {
            regarding,
            event_type: event.type_,
            action: event.action.as_str().into(),
            reason: event.reason.as_str().into(),
        }
    }
}

/// The Event a series was counted on.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Series {
    name: Box<str>,
    count: i32,
    last_observed: Timestamp,
}

/// What to send for one occurrence of an event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Publication {
    /// A new Event with this name.
    Create { name: String },
    /// A repeat: the Event `name` already sent gets `series.count = count`.
    Repeat { name: String, count: i32 },
}

/// The series sent in the last [`SERIES_WINDOW`], at most [`MAX_TRACKED_SERIES`] of them. Pure
/// data: the publisher asks it what to send and tells it what was sent.
#[derive(Debug, Default)]
pub struct SeriesCache {
    series: HashMap<SeriesKey, Series>,
    /// When expired series were last dropped; at most once per [`SWEEP_INTERVAL`], so
    /// publishing does not walk the whole cache each time.
    last_sweep: Option<Timestamp>,
}

/// How often [`SeriesCache`] drops series older than the window.
const SWEEP_INTERVAL: Duration = Duration::from_secs(30);

impl SeriesCache {
    /// What to send for an occurrence of `key` at `now`: a repeat of the series' Event while the
    /// window since its last occurrence is open, else a new Event named after `regarding_name`.
    pub fn decide(&mut self, key: &SeriesKey, regarding_name: &str, now: Timestamp) -> Publication {
        self.sweep(now);
        match self.series.get(key) {
            Some(series) if within_window(series.last_observed, now) => Publication::Repeat {
                name: series.name.to_string(),
                count: series.count.saturating_add(1),
            },
            _ => Publication::Create {
                name: event_name(regarding_name, now),
            },
        }
    }

    /// Records that `publication` was sent at `now`. A new series is not remembered when
    /// [`MAX_TRACKED_SERIES`] are already: its repeats will be new Events.
    pub fn record(&mut self, key: SeriesKey, publication: Publication, now: Timestamp) {
        let (name, count) = match publication {
            Publication::Create { name } => (name, 1),
            Publication::Repeat { name, count } => (name, count),
        };
        if self.series.len() >= MAX_TRACKED_SERIES && !self.series.contains_key(&key) {
            return;
        }
        self.series.insert(
            key,
            Series {
                name: name.into(),
                count,
                last_observed: now,
            },
        );
    }

    /// How many series are remembered.
    #[must_use]
    pub fn len(&self) -> usize {
        self.series.len()
    }

    /// Whether no series is remembered.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.series.is_empty()
    }

    fn sweep(&mut self, now: Timestamp) {
        let due = self
            .last_sweep
            .is_none_or(|last| now.duration_since(last) >= signed(SWEEP_INTERVAL));
        if due {
            self.series
                .retain(|_, series| within_window(series.last_observed, now));
            self.last_sweep = Some(now);
        }
    }
}

/// client-go's and kube-runtime's naming: unique per object and instant.
fn event_name(regarding_name: &str, now: Timestamp) -> String {
    format!("{regarding_name}.{:x}", now.as_nanosecond())
}

fn signed(duration: Duration) -> SignedDuration {
    SignedDuration::try_from(duration).unwrap_or(SignedDuration::MAX)
}

fn within_window(last_observed: Timestamp, now: Timestamp) -> bool {
    now.duration_since(last_observed) < signed(SERIES_WINDOW)
}

/// Publishes Events; cheap to share (one per manager).
pub struct EventPublisher {
    client: Client,
    reporter: Reporter,
    cache: Mutex<SeriesCache>,
}

impl EventPublisher {
    #[must_use]
    pub fn new(client: Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            cache: Mutex::new(SeriesCache::default()),
        }
    }

    /// Sends `event` about `regarding`: a new Event, or the series count of the one sent for
    /// the same object, type, action and reason within [`SERIES_WINDOW`].
    ///
    /// # Errors
    /// The API server's refusal of the create or patch.
    pub async fn publish(
        &self,
        event: &Event,
        regarding: &ObjectReference,
    ) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = SeriesKey::new(event, regarding);
        let regarding_name = regarding
            .name
            .as_deref()
            .unwrap_or(&self.reporter.controller);
        let decided = self.with_cache(|cache| cache.decide(&key, regarding_name, now));
        let namespace = regarding.namespace.as_deref().unwrap_or(DEFAULT_NAMESPACE);
        let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), namespace);
        let sent = match decided {
            Publication::Create { name } => {
                let body = self.new_event(event, regarding, &name, now);
                events.create(&PostParams::default(), &body).await?;
                Publication::Create { name }
            }
            Publication::Repeat { name, count } => {
                let series = serde_json::json!({ "series": EventSeries {
                    count,
                    last_observed_time: MicroTime(now),
                }});
                match events
                    .patch(&name, &PatchParams::default(), &Patch::Merge(&series))
                    .await
                {
                    Ok(_) => Publication::Repeat { name, count },
                    Err(kube::Error::Api(status)) if status.is_not_found() => {
                        // The Event expired or was deleted: start a new series (recorded
                        // below in place of the old one).
                        let name = event_name(regarding_name, now);
                        let body = self.new_event(event, regarding, &name, now);
                        events.create(&PostParams::default(), &body).await?;
                        Publication::Create { name }
                    }
                    Err(err) => return Err(err),
                }
            }
        };
        self.with_cache(|cache| cache.record(key, sent, now));
        Ok(())
    }

    fn with_cache<T>(&self, f: impl FnOnce(&mut SeriesCache) -> T) -> T {
        // A panic while holding the lock cannot leave the cache inconsistent (every change is
        // one map operation), so a poisoned lock is used as it is.
        let mut cache = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut cache)
    }

    fn new_event(
        &self,
        event: &Event,
        regarding: &ObjectReference,
        name: &str,
        now: Timestamp,
    ) -> K8sEvent {
        K8sEvent {
            action: Some(event.action.clone()),
            reason: Some(event.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            related: event.secondary.clone(),
            note: event.note.clone(),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(
                    regarding
                        .namespace
                        .clone()
                        .unwrap_or_else(|| DEFAULT_NAMESPACE.to_owned()),
                ),
                ..ObjectMeta::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(self.reporter.instance.clone()),
            type_: Some(
                match event.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            ..K8sEvent::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(reason: &str) -> Event {
        Event {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: Some("a note".to_owned()),
            action: "Installed".to_owned(),
            secondary: None,
        }
    }

    fn po(name: &str, uid: Option<&str>) -> ObjectReference {
        ObjectReference {
            kind: Some("PlatformOperator".to_owned()),
            name: Some(name.to_owned()),
            uid: uid.map(str::to_owned),
            ..ObjectReference::default()
        }
    }

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    /// Decides and records one occurrence, as the publisher does when the send succeeds.
    fn occur(cache: &mut SeriesCache, key: &SeriesKey, seconds: i64) -> Publication {
        let decided = cache.decide(key, "cert-manager", at(seconds));
        cache.record(key.clone(), decided.clone(), at(seconds));
        decided
    }

    #[test]
    fn a_repeat_within_the_window_counts_on_the_first_event() {
        let mut cache = SeriesCache::default();
        let key = SeriesKey::new(&event("UnpackFailed"), &po("cert-manager", Some("u1")));
        let Publication::Create { name } = occur(&mut cache, &key, 0) else {
            panic!("the first occurrence must create an Event");
        };
        assert!(name.starts_with("cert-manager."), "{name}");
        assert_eq!(
            occur(&mut cache, &key, 60),
            Publication::Repeat {
                name: name.clone(),
                count: 2
            }
        );
        // The window runs from the last occurrence, not the first.
        assert_eq!(
            occur(&mut cache, &key, 60 + 359),
            Publication::Repeat { name, count: 3 }
        );
    }

    #[test]
    fn after_the_window_a_new_event_starts_a_new_series() {
        let mut cache = SeriesCache::default();
        let key = SeriesKey::new(&event("UnpackFailed"), &po("cert-manager", Some("u1")));
        let first = occur(&mut cache, &key, 0);
        let later = occur(&mut cache, &key, 360);
        assert!(matches!(later, Publication::Create { .. }), "{later:?}");
        assert_ne!(first, later);
        assert!(matches!(
            occur(&mut cache, &key, 361),
            Publication::Repeat { count: 2, .. }
        ));
    }

    #[test]
    fn another_reason_type_action_or_object_is_another_series() {
        let base = event("UnpackFailed");
        let mut normal = event("UnpackFailed");
        normal.type_ = EventType::Normal;
        let mut action = event("UnpackFailed");
        action.action = "Available".to_owned();
        let keys = [
            SeriesKey::new(&base, &po("a", Some("u1"))),
            SeriesKey::new(&event("ResolutionFailed"), &po("a", Some("u1"))),
            SeriesKey::new(&normal, &po("a", Some("u1"))),
            SeriesKey::new(&action, &po("a", Some("u1"))),
            // Same name, new object (deleted and created again): a new UID.
            SeriesKey::new(&base, &po("a", Some("u2"))),
            SeriesKey::new(&base, &po("a", None)),
            SeriesKey::new(&base, &po("b", None)),
        ];
        let mut cache = SeriesCache::default();
        for key in &keys {
            assert!(matches!(
                occur(&mut cache, key, 0),
                Publication::Create { .. }
            ));
        }
        assert_eq!(cache.len(), keys.len());
        // The note is not part of the key: a new message repeats the series.
        let mut other_note = base;
        other_note.note = Some("another message".to_owned());
        let same = SeriesKey::new(&other_note, &po("a", Some("u1")));
        assert!(matches!(
            occur(&mut cache, &same, 1),
            Publication::Repeat { count: 2, .. }
        ));
    }

    #[test]
    fn expired_series_are_dropped_and_the_cache_never_exceeds_its_limit() {
        let mut cache = SeriesCache::default();
        let keys: Vec<SeriesKey> = (0..MAX_TRACKED_SERIES + 10)
            .map(|i| SeriesKey::new(&event("UnpackFailed"), &po("p", Some(&format!("u{i}")))))
            .collect();
        for key in &keys {
            occur(&mut cache, key, 0);
        }
        assert_eq!(cache.len(), MAX_TRACKED_SERIES);
        // Untracked beyond the limit: each occurrence is a new Event, never a wrong series.
        let untracked = &keys[MAX_TRACKED_SERIES + 3];
        assert!(matches!(
            occur(&mut cache, untracked, 1),
            Publication::Create { .. }
        ));
        // Tracked ones keep counting.
        assert!(matches!(
            occur(&mut cache, &keys[0], 2),
            Publication::Repeat { count: 2, .. }
        ));
        // After the window every series but the one just seen is dropped.
        occur(&mut cache, &keys[0], 300);
        let fresh = SeriesKey::new(&event("Other"), &po("p", Some("new")));
        occur(&mut cache, &fresh, 400);
        assert_eq!(
            cache.len(),
            2,
            "expired series are dropped at the next sweep"
        );
    }
}
