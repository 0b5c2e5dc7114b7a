//! Proving that nothing happened: a Kubernetes watch over a window longer than every periodic
//! resync of the manager under test, never a short sleep (a sleep shorter than the resync
//! proves only that the manager did not act *yet*, and polling can miss a change that is
//! undone before the next poll).
//!
//! A [`QuietWindow`] is built from the manager's [`Settings`] and the objects the test claims
//! stay put, each with a rule:
//!
//! * [`QuietWindow::no_writes`]: not written at all (its resourceVersion does not move, it is
//!   neither deleted nor created);
//! * [`QuietWindow::no_writes_except_status`]: only the status subresource may change (for
//!   Deployments, whose status kube-controller-manager keeps writing);
//! * [`QuietWindow::unchanged`]: a projection of the object (e.g. the installed bundle) keeps
//!   its value;
//! * [`QuietWindow::never`]: a predicate (e.g. "Upgradeable=True") holds neither when the
//!   window opens nor for any version of the object written during it.
//!
//! [`QuietWindow::open`] lists the objects and opens a watch from the list's resourceVersion,
//! so every write after the list is seen, however short-lived. The test then does what must
//! change nothing (and waits until the manager has taken it in, e.g. a catalog serves the new
//! content), and [`OpenWindow::hold`] keeps watching for [`QuietWindow::length`] from that
//! moment: the longest periodic interval that can write the watched kinds plus [`MARGIN`], so
//! at least one periodic reconcile of every object runs inside the window. A violation fails
//! the test as soon as it is seen, naming the object, the event, the resourceVersion bump, the
//! changed fields and which field manager wrote them.

use std::collections::BTreeMap;
use std::fmt::{Debug, Write as _};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use futures::stream::BoxStream;
use futures::{FutureExt as _, StreamExt as _};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::{Resource, ResourceExt as _};
use pom_api::openshift::ClusterOperator;
use pom_controller::context::Settings;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// How often the manager recomputes the aggregated ClusterOperator without any PlatformOperator
/// event. Hard-coded in `crates/controller/src/cluster_operator.rs` (`run`), not a setting:
/// keep the two in step.
pub const CLUSTER_OPERATOR_RESYNC: Duration = Duration::from_secs(30);

/// How much longer than the longest periodic interval a window lasts: room for the periodic
/// reconcile to run and write.
pub const MARGIN: Duration = Duration::from_secs(5);

/// A typed Kubernetes object a window can watch.
pub trait Watched:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + Serialize + Debug + Send + Sync + 'static
{
}

impl<K> Watched for K where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + Serialize
        + Debug
        + Send
        + Sync
        + 'static
{
}

/// Which objects of an [`Api`] a rule covers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Objects {
    /// The object with this name (it must exist when the window opens).
    Named(String),
    /// Every object the `Api` sees (at least one must exist when the window opens); one
    /// created during the window is a change.
    All,
}

impl From<&str> for Objects {
    fn from(name: &str) -> Self {
        Self::Named(name.to_owned())
    }
}

impl From<String> for Objects {
    fn from(name: String) -> Self {
        Self::Named(name)
    }
}

type Projection<K> = Arc<dyn Fn(&K) -> Value + Send + Sync>;
type Predicate<K> = Arc<dyn Fn(&K) -> bool + Send + Sync>;

enum Rule<K> {
    NoWrites,
    NoWritesExceptStatus,
    Unchanged {
        what: String,
        project: Projection<K>,
    },
    Never {
        what: String,
        holds: Predicate<K>,
    },
}

type Start = Box<dyn FnOnce(Arc<Shared>) -> BoxFuture<'static, JoinHandle<()>> + Send>;

/// The objects a test claims stay put, and for how long (see the module documentation).
pub struct QuietWindow {
    periods: Vec<(&'static str, Duration)>,
    starts: Vec<Start>,
}

impl QuietWindow {
    /// A window for a manager running with `settings`: its PlatformOperator resync and its
    /// catalog poll are the periodic intervals every watched object depends on; watching the
    /// ClusterOperator adds [`CLUSTER_OPERATOR_RESYNC`].
    #[must_use]
    pub fn new(settings: &Settings) -> Self {
        Self {
            periods: vec![
                ("PlatformOperator resync", settings.resync_interval),
                ("catalog poll", settings.default_poll_interval),
                // A move under `upgradeGate: Auto` may settle when this window ends.
                ("first-report window", settings.auto_settle_window),
            ],
            starts: Vec::new(),
        }
    }

    /// How long [`OpenWindow::hold`] watches: the longest periodic interval plus [`MARGIN`].
    #[must_use]
    pub fn length(&self) -> Duration {
        self.periods
            .iter()
            .map(|(_, period)| *period)
            .max()
            .unwrap_or_default()
            + MARGIN
    }

    /// `objects` are not written at all during the window.
    #[must_use]
    pub fn no_writes<K: Watched>(self, api: Api<K>, objects: impl Into<Objects>) -> Self {
        self.rule(api, objects.into(), Rule::NoWrites)
    }

    /// `objects` are written only through their status subresource during the window (their
    /// metadata, spec and field ownership stay as they were).
    #[must_use]
    pub fn no_writes_except_status<K: Watched>(
        self,
        api: Api<K>,
        objects: impl Into<Objects>,
    ) -> Self {
        self.rule(api, objects.into(), Rule::NoWritesExceptStatus)
    }

    /// `project(object)` (`what` names it in the report) keeps the value it had when the
    /// window opened; other writes are allowed.
    #[must_use]
    pub fn unchanged<K: Watched>(
        self,
        api: Api<K>,
        objects: impl Into<Objects>,
        what: &str,
        project: impl Fn(&K) -> Value + Send + Sync + 'static,
    ) -> Self {
        let rule = Rule::Unchanged {
            what: what.to_owned(),
            project: Arc::new(project),
        };
        self.rule(api, objects.into(), rule)
    }

    /// `holds(object)` (`what` describes it: "Upgradeable=True") is false when the window opens
    /// and for every version of the objects written during it.
    #[must_use]
    pub fn never<K: Watched>(
        self,
        api: Api<K>,
        objects: impl Into<Objects>,
        what: &str,
        holds: impl Fn(&K) -> bool + Send + Sync + 'static,
    ) -> Self {
        let rule = Rule::Never {
            what: what.to_owned(),
            holds: Arc::new(holds),
        };
        self.rule(api, objects.into(), rule)
    }

    fn rule<K: Watched>(mut self, api: Api<K>, objects: Objects, rule: Rule<K>) -> Self {
        if K::kind(&()) == ClusterOperator::kind(&())
            && K::group(&()) == ClusterOperator::group(&())
        {
            let co = ("ClusterOperator resync", CLUSTER_OPERATOR_RESYNC);
            if !self.periods.contains(&co) {
                self.periods.push(co);
            }
        }
        self.starts.push(Box::new(move |shared| {
            start_watch(api, objects, rule, shared).boxed()
        }));
        self
    }

    /// Lists the objects, checks the rules against them, and starts watching from the list's
    /// resourceVersion. Do what must change nothing after this, then [`OpenWindow::hold`].
    ///
    /// # Panics
    /// When an object cannot be listed or watched, or a rule covers no object (a window over
    /// nothing proves nothing).
    pub async fn open(self) -> OpenWindow {
        let length = self.length();
        let periods = self
            .periods
            .iter()
            .map(|(name, period)| format!("{name} {period:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        let shared = Arc::new(Shared {
            opened: Instant::now(),
            violations: Mutex::new(Vec::new()),
            first: Notify::new(),
            stop: CancellationToken::new(),
        });
        let mut tasks = Vec::new();
        for start in self.starts {
            tasks.push(start(shared.clone()).await);
        }
        OpenWindow {
            shared,
            tasks,
            length,
            periods,
        }
    }
}

/// A window whose watches are running; [`OpenWindow::hold`] finishes it.
pub struct OpenWindow {
    shared: Arc<Shared>,
    tasks: Vec<JoinHandle<()>>,
    length: Duration,
    periods: String,
}

impl OpenWindow {
    /// Keeps watching for the window's length from now, then stops. Returns how long the
    /// watches ran in all (from [`QuietWindow::open`]).
    ///
    /// # Panics
    /// As soon as a rule is broken (after a short grace to collect simultaneous changes), with
    /// every change seen; also when a watch failed, since the window then proves nothing.
    pub async fn hold(mut self) -> Duration {
        let held = Instant::now();
        tokio::select! {
            () = tokio::time::sleep(self.length) => {}
            () = self.shared.first.notified() => {
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
        }
        self.shared.stop.cancel();
        for task in std::mem::take(&mut self.tasks) {
            let _ = task.await;
        }
        let violations = std::mem::take(
            &mut *self
                .shared
                .violations
                .lock()
                .unwrap_or_else(PoisonError::into_inner),
        );
        if !violations.is_empty() {
            let mut report = format!(
                "nothing was to change during a {:?} window (longer than every periodic interval \
                 of the manager: {}; plus {MARGIN:?}), opened {:?} before it was held, but:",
                self.length,
                self.periods,
                held.duration_since(self.shared.opened)
            );
            for v in &violations {
                let _ = write!(report, "\n  - {:.1?} after opening: {}", v.at, v.what);
            }
            panic!("{report}");
        }
        self.shared.opened.elapsed()
    }
}

impl Drop for OpenWindow {
    fn drop(&mut self) {
        self.shared.stop.cancel();
    }
}

struct Violation {
    at: Duration,
    what: String,
}

struct Shared {
    opened: Instant,
    violations: Mutex<Vec<Violation>>,
    first: Notify,
    stop: CancellationToken,
}

impl Shared {
    fn report(&self, what: String) {
        self.violations
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Violation {
                at: self.opened.elapsed(),
                what,
            });
        self.first.notify_one();
    }
}

fn key<K: Resource>(object: &K) -> String {
    match object.namespace() {
        Some(ns) => format!("{ns}/{}", object.name_any()),
        None => object.name_any(),
    }
}

fn resource_version<K: Resource>(object: Option<&K>) -> String {
    object
        .and_then(|o| o.meta().resource_version.clone())
        .unwrap_or_else(|| "-".to_owned())
}

async fn start_watch<K: Watched>(
    api: Api<K>,
    objects: Objects,
    rule: Rule<K>,
    shared: Arc<Shared>,
) -> JoinHandle<()> {
    let kind = K::kind(&()).into_owned();
    let (list_params, watch_params) = match &objects {
        Objects::Named(name) => {
            let selector = format!("metadata.name={name}");
            (
                ListParams::default().fields(&selector),
                WatchParams::default().fields(&selector),
            )
        }
        Objects::All => (ListParams::default(), WatchParams::default()),
    };
    let what = match &objects {
        Objects::Named(name) => format!("{kind} {name}"),
        Objects::All => format!("every {kind}"),
    };
    let list = match api.list(&list_params).await {
        Ok(list) => list,
        Err(err) => panic!("quiet window: listing {what}: {err}"),
    };
    let Some(version) = list.metadata.resource_version.clone() else {
        panic!("quiet window: the list of {what} has no resourceVersion to watch from");
    };
    assert!(
        !list.items.is_empty(),
        "quiet window: there is no {what} to watch (a window over nothing proves nothing)"
    );
    let seen: BTreeMap<String, K> = list.items.into_iter().map(|o| (key(&o), o)).collect();
    if let Rule::Never { what: never, holds } = &rule {
        for (name, object) in &seen {
            if holds(object) {
                shared.report(format!(
                    "{kind} {name} was already {never} when the window opened"
                ));
            }
        }
    }
    let stream = match api.watch(&watch_params, &version).await {
        Ok(stream) => stream.boxed(),
        Err(err) => panic!("quiet window: watching {what}: {err}"),
    };
    let follower = Follower {
        api,
        watch_params,
        rule,
        kind,
        seen,
        version,
    };
    tokio::spawn(follower.run(stream, shared))
}

struct Follower<K: Watched> {
    api: Api<K>,
    watch_params: WatchParams,
    rule: Rule<K>,
    kind: String,
    seen: BTreeMap<String, K>,
    version: String,
}

impl<K: Watched> Follower<K> {
    async fn run(
        mut self,
        mut stream: BoxStream<'static, kube::Result<WatchEvent<K>>>,
        shared: Arc<Shared>,
    ) {
        loop {
            let next = tokio::select! {
                () = shared.stop.cancelled() => return,
                next = stream.next() => next,
            };
            let (event, object, deleted) = match next {
                Some(Ok(WatchEvent::Added(o))) => ("ADDED", o, false),
                Some(Ok(WatchEvent::Modified(o))) => ("MODIFIED", o, false),
                Some(Ok(WatchEvent::Deleted(o))) => ("DELETED", o, true),
                Some(Ok(WatchEvent::Bookmark(b))) => {
                    self.version = b.metadata.resource_version;
                    continue;
                }
                Some(Ok(WatchEvent::Error(status))) => {
                    shared.report(format!(
                        "watching {} failed ({} {}: {}): the window proves nothing",
                        self.kind, status.code, status.reason, status.message
                    ));
                    return;
                }
                Some(Err(err)) => {
                    shared.report(format!(
                        "watching {} failed ({err}): the window proves nothing",
                        self.kind
                    ));
                    return;
                }
                None => {
                    // The API server ended the watch (timeout): resume where it stopped.
                    match self.api.watch(&self.watch_params, &self.version).await {
                        Ok(resumed) => stream = resumed.boxed(),
                        Err(err) => {
                            shared.report(format!(
                                "resuming the watch of {} failed ({err}): the window proves nothing",
                                self.kind
                            ));
                            return;
                        }
                    }
                    continue;
                }
            };
            if let Some(version) = object.meta().resource_version.clone() {
                self.version = version;
            }
            let name = key(&object);
            let before = self.seen.get(&name);
            let after = (!deleted).then_some(&object);
            if let Some(why) = judge(&self.rule, before, after) {
                shared.report(format!(
                    "{} {name}: {event}, resourceVersion {} -> {}: {why}",
                    self.kind,
                    resource_version(before),
                    resource_version(after)
                ));
                return;
            }
            if deleted {
                self.seen.remove(&name);
            } else {
                self.seen.insert(name, object);
            }
        }
    }
}

/// Why the change from `before` to `after` (`None`: absent) breaks `rule`, if it does.
fn judge<K: Watched>(rule: &Rule<K>, before: Option<&K>, after: Option<&K>) -> Option<String> {
    let json =
        |o: Option<&K>| o.map_or(Value::Null, |o| serde_json::to_value(o).unwrap_or_default());
    match rule {
        Rule::NoWrites => Some(describe(&json(before), &json(after))),
        Rule::NoWritesExceptStatus => {
            let (b, a) = (json(before), json(after));
            (without_status(&b) != without_status(&a))
                .then(|| describe(&without_status(&b), &without_status(&a)))
        }
        Rule::Unchanged { what, project } => {
            let (b, a) = (
                before.map_or(Value::Null, |o| project(o)),
                after.map_or(Value::Null, |o| project(o)),
            );
            (b != a).then(|| format!("{what} changed: {}", changes(&b, &a, "")))
        }
        Rule::Never { what, holds } => after
            .filter(|o| holds(o))
            .map(|_| format!("became {what}: {}", describe(&json(before), &json(after)))),
    }
}

/// The object without its status, resourceVersion and the status subresource's field
/// ownership: what a write other than a status update changes.
fn without_status(object: &Value) -> Value {
    let mut object = object.clone();
    if let Some(map) = object.as_object_mut() {
        map.remove("status");
    }
    if let Some(meta) = object.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.remove("resourceVersion");
        if let Some(Value::Array(fields)) = meta.get_mut("managedFields") {
            fields.retain(|f| f.get("subresource").and_then(Value::as_str) != Some("status"));
        }
    }
    object
}

/// The changed fields between two versions of an object, and which field managers wrote.
fn describe(before: &Value, after: &Value) -> String {
    let strip = |v: &Value| {
        let mut v = v.clone();
        if let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut) {
            meta.remove("resourceVersion");
            meta.remove("managedFields");
        }
        v
    };
    let mut text = match (before.is_null(), after.is_null()) {
        (true, _) => "created".to_owned(),
        (_, true) => "deleted".to_owned(),
        _ => changes(&strip(before), &strip(after), ""),
    };
    let writers = writers(before, after);
    if !writers.is_empty() {
        let _ = write!(text, " (written by {})", writers.join(", "));
    }
    text
}

/// The `managedFields` entries of `after` that `before` does not have as they are: who wrote.
fn writers(before: &Value, after: &Value) -> Vec<String> {
    let entries = |v: &Value| {
        v.pointer("/metadata/managedFields")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default()
    };
    let old = entries(before);
    entries(after)
        .into_iter()
        .filter(|entry| !old.contains(entry))
        .map(|entry| {
            let field = |name: &str| entry.get(name).and_then(Value::as_str).unwrap_or("?");
            let mut who = format!("{} ({}", field("manager"), field("operation"));
            if let Some(sub) = entry.get("subresource").and_then(Value::as_str) {
                let _ = write!(who, ", {sub}");
            }
            who.push(')');
            who
        })
        .collect()
}

const MAX_CHANGES: usize = 12;

/// `path: before -> after` for each differing leaf (at most [`MAX_CHANGES`]).
fn changes(before: &Value, after: &Value, path: &str) -> String {
    let mut out = Vec::new();
    collect_changes(before, after, path, &mut out);
    if out.is_empty() {
        return "no field changed".to_owned();
    }
    let more = out.len().saturating_sub(MAX_CHANGES);
    out.truncate(MAX_CHANGES);
    let mut text = out.join("; ");
    if more > 0 {
        let _ = write!(text, "; and {more} more");
    }
    text
}

fn collect_changes(before: &Value, after: &Value, path: &str, out: &mut Vec<String>) {
    match (before, after) {
        (Value::Object(b), Value::Object(a)) => {
            let mut keys: Vec<&String> = b.keys().chain(a.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let sub = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                let null = Value::Null;
                collect_changes(
                    b.get(k.as_str()).unwrap_or(&null),
                    a.get(k.as_str()).unwrap_or(&null),
                    &sub,
                    out,
                );
            }
        }
        (Value::Array(b), Value::Array(a)) if b.len() == a.len() => {
            for (i, (x, y)) in b.iter().zip(a).enumerate() {
                collect_changes(x, y, &format!("{path}[{i}]"), out);
            }
        }
        (b, a) if b != a => {
            let shown = if path.is_empty() { "(value)" } else { path };
            out.push(format!("{shown}: {} -> {}", short(b), short(a)));
        }
        _ => {}
    }
}

fn short(value: &Value) -> String {
    const LIMIT: usize = 160;
    let text = value.to_string();
    if text.chars().count() <= LIMIT {
        text
    } else {
        let cut: String = text.chars().take(LIMIT).collect();
        format!("{cut}...")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::api::{Patch, PatchParams, PostParams};
    use serde_json::json;

    /// The window against a real API server: it sees a write that is undone at once (which a
    /// sleep-then-compare would miss), a predicate that holds only briefly, and passes a quiet
    /// object after its full length.
    #[tokio::test]
    async fn the_window_sees_short_lived_writes_and_passes_quiet_objects() {
        let Some(plane) = crate::shared_control_plane().await else {
            return;
        };
        let client = plane.client().await.unwrap();
        let api: Api<ConfigMap> = Api::namespaced(client, "default");
        for name in ["quiet-watched", "quiet-other"] {
            let cm: ConfigMap =
                serde_json::from_value(json!({"metadata": {"name": name}, "data": {"x": "ok"}}))
                    .unwrap();
            api.create(&PostParams::default(), &cm).await.unwrap();
        }
        let settings = Settings {
            resync_interval: Duration::from_secs(1),
            default_poll_interval: Duration::from_secs(1),
            auto_settle_window: Duration::from_secs(1),
            ..Settings::default()
        };
        let set = |value: &'static str| {
            let api = api.clone();
            async move {
                api.patch(
                    "quiet-watched",
                    &PatchParams::default(),
                    &Patch::Merge(json!({"data": {"x": value}})),
                )
                .await
                .unwrap();
            }
        };

        // A write undone at once breaks "no writes" and "never x=bad".
        let window = QuietWindow::new(&settings)
            .no_writes(api.clone(), "quiet-watched")
            .never(api.clone(), "quiet-watched", "x=bad", |cm| {
                cm.data
                    .as_ref()
                    .and_then(|d| d.get("x"))
                    .map(String::as_str)
                    == Some("bad")
            })
            .no_writes(api.clone(), "quiet-other")
            .open()
            .await;
        set("bad").await;
        set("ok").await;
        let started = Instant::now();
        let failure = std::panic::AssertUnwindSafe(window.hold())
            .catch_unwind()
            .await
            .unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5), "fails early");
        let report = failure.downcast_ref::<String>().unwrap();
        assert!(
            report.contains("ConfigMap default/quiet-watched: MODIFIED, resourceVersion"),
            "{report}"
        );
        assert!(report.contains("data.x: \"ok\" -> \"bad\""), "{report}");
        assert!(report.contains("became x=bad"), "{report}");
        assert!(!report.contains("quiet-other"), "{report}");

        // Nothing written: the window holds for its whole length and passes.
        let window = QuietWindow::new(&settings)
            .no_writes(api.clone(), "quiet-watched")
            .unchanged(api.clone(), Objects::All, "data", |cm| json!(cm.data));
        assert_eq!(window.length(), Duration::from_secs(1) + MARGIN);
        let window = window.open().await;
        let held = window.hold().await;
        assert!(held >= Duration::from_secs(1) + MARGIN, "{held:?}");

        // A new object in an `All` scope is a change.
        let window = QuietWindow::new(&settings)
            .unchanged(api.clone(), Objects::All, "data", |cm| json!(cm.data))
            .open()
            .await;
        let cm: ConfigMap =
            serde_json::from_value(json!({"metadata": {"name": "quiet-new"}, "data": {"x": "ok"}}))
                .unwrap();
        api.create(&PostParams::default(), &cm).await.unwrap();
        let failure = std::panic::AssertUnwindSafe(window.hold())
            .catch_unwind()
            .await
            .unwrap_err();
        let report = failure.downcast_ref::<String>().unwrap();
        assert!(
            report.contains("ConfigMap default/quiet-new: ADDED")
                && report.contains("data changed"),
            "{report}"
        );
    }

    #[test]
    fn changes_name_each_differing_leaf() {
        let before = json!({"status": {"installedBundle": {"version": "1.0.0"}, "conditions": [{"type": "A", "status": "True"}]}});
        let after = json!({"status": {"installedBundle": {"version": "1.1.0"}, "conditions": [{"type": "A", "status": "False"}]}});
        assert_eq!(
            changes(&before, &after, ""),
            "status.conditions[0].status: \"True\" -> \"False\"; status.installedBundle.version: \"1.0.0\" -> \"1.1.0\""
        );
    }

    #[test]
    fn status_writes_are_not_spec_writes() {
        let before = json!({"metadata": {"resourceVersion": "1", "managedFields": [
            {"manager": "pom", "operation": "Apply"},
            {"manager": "kcm", "operation": "Update", "subresource": "status", "time": "t1"}]},
            "spec": {"replicas": 1}, "status": {"readyReplicas": 0}});
        let mut after = before.clone();
        after["metadata"]["resourceVersion"] = json!("2");
        after["metadata"]["managedFields"][1]["time"] = json!("t2");
        after["status"]["readyReplicas"] = json!(1);
        assert_eq!(without_status(&before), without_status(&after));
        assert_eq!(
            writers(&before, &after),
            vec!["kcm (Update, status)".to_owned()]
        );
        after["spec"]["replicas"] = json!(3);
        assert_ne!(without_status(&before), without_status(&after));
    }
}
