//! Prometheus metrics (OpenMetrics text), in the shape of kube-rs/controller-rs.
//!
//! Two kinds of metrics live here:
//! - events the reconcilers report through [`Metrics`] (runs, failures by reason, durations,
//!   when each Catalog's source was last read), because only the reconciler knows that a run
//!   started, why it failed, or that a source was read and found unchanged;
//! - cluster state computed at scrape time from the watch caches of [`crate::cluster_state`]
//!   (PlatformOperators by state, catalog freshness, the aggregated `Upgradeable`), so those
//!   values can never go stale and no reconciler has to remember to set them;
//! - the manager's own API requests (`pom_api_requests_total`), counted by the client's
//!   [`crate::api_metrics`] layer; the client exists before the registry, hence
//!   [`Metrics::count_api_requests`].
//!
//! Every family is listed, with example alerts, in `docs/metrics.md` (a test below keeps the
//! two equal). `/metrics` serves OpenMetrics, or the Prometheus text format 0.0.4 to a client
//! that prefers it ([`Format::negotiate`]): `promtool check metrics` reads only the latter.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use kube::ResourceExt;
use pom_api::conditions::{Reason, types};
use pom_api::{Catalog, PlatformOperator};
use pom_policy::precheck::update_risks;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use crate::api_metrics::ApiRequests;
use crate::cluster_state::ClusterState;

/// The content type of the OpenMetrics text exposition.
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// An exposition format `/metrics` serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// OpenMetrics text 1.0.0 (the default; what Prometheus asks for first).
    OpenMetrics,
    /// The Prometheus text format 0.0.4 (`text/plain`), for clients that read only it, such as
    /// `promtool check metrics`.
    PrometheusText,
}

impl Format {
    /// The format an `Accept` header prefers: the highest `q` among
    /// `application/openmetrics-text` and `text/plain` (`*/*` counts as OpenMetrics; a tie goes
    /// to OpenMetrics). No header, or nothing either names, gets OpenMetrics.
    #[must_use]
    pub fn negotiate(accept: Option<&str>) -> Self {
        let mut best: Option<(f32, Self)> = None;
        for range in accept.unwrap_or_default().split(',') {
            let mut params = range.split(';');
            let media = params
                .next()
                .unwrap_or_default()
                .trim()
                .to_ascii_lowercase();
            let format = match media.as_str() {
                "application/openmetrics-text" | "*/*" => Self::OpenMetrics,
                "text/plain" => Self::PrometheusText,
                _ => continue,
            };
            let q = params
                .filter_map(|p| p.split_once('='))
                .find(|(k, _)| k.trim().eq_ignore_ascii_case("q"))
                .map_or(Some(1.0), |(_, v)| v.trim().parse::<f32>().ok())
                .unwrap_or(0.0);
            let better = match best {
                None => q > 0.0,
                Some((best_q, best_format)) => {
                    q > best_q
                        || (q == best_q && format == Self::OpenMetrics && best_format != format)
                }
            };
            if better {
                best = Some((q, format));
            }
        }
        best.map_or(Self::OpenMetrics, |(_, format)| format)
    }

    /// The `Content-Type` of this format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Self::OpenMetrics => CONTENT_TYPE,
            Self::PrometheusText => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
        }
    }
}

/// Every PlatformOperator state the `pom_platformoperators` gauge reports, always all of them
/// (a zero is a value; a missing series is a question).
pub const PO_STATES: [&str; 5] = ["installed", "progressing", "degraded", "failed", "pending"];

type ControllerLabel = [(&'static str, &'static str); 1];
type FailureLabels = [(&'static str, String); 2];
type CatalogLabel = [(&'static str, String); 1];

/// The manager's metrics registry and the handles reconcilers use.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    failures: Family<FailureLabels, Counter>,
    durations: Family<ControllerLabel, Histogram>,
    leader: Gauge,
    catalog_refreshed: Family<CatalogLabel, Gauge<f64, AtomicU64>>,
    state: Arc<StateCollector>,
    api_requests: Arc<ApiRequestsCollector>,
}

impl fmt::Debug for Metrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// A registry with every POM metric registered under the `pom` prefix.
    #[must_use]
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("pom");
        let reconciles = Family::<ControllerLabel, Counter>::default();
        let failures = Family::<FailureLabels, Counter>::default();
        // Reconciles range from a cache hit (ms) to a bundle pull and apply (tens of seconds).
        let durations = Family::<ControllerLabel, Histogram>::new_with_constructor(|| {
            Histogram::new([0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0])
        });
        let leader = Gauge::default();
        let catalog_refreshed = Family::<CatalogLabel, Gauge<f64, AtomicU64>>::default();
        let state = Arc::new(StateCollector::default());
        let api_requests = Arc::new(ApiRequestsCollector::default());
        registry.register(
            "reconciles",
            "Reconciles started, by controller",
            reconciles.clone(),
        );
        registry.register(
            "reconcile_errors",
            "Reconciles that failed, by controller and reason",
            failures.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Duration of reconciles, by controller",
            durations.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader lease and runs the reconcilers",
            leader.clone(),
        );
        registry.register(
            "catalog_last_refresh_timestamp_seconds",
            "When this replica last read each Catalog's source successfully, changed or not (Unix time; leader only)",
            catalog_refreshed.clone(),
        );
        registry.register_collector(Box::new(state.clone()));
        registry.register_collector(Box::new(api_requests.clone()));
        Self {
            registry,
            reconciles,
            failures,
            durations,
            leader,
            catalog_refreshed,
            state,
            api_requests,
        }
    }

    /// Counts a reconcile of `controller` (e.g. `"platformoperator"`, `"catalog"`); the returned
    /// timer records its duration when dropped, so early returns are measured too.
    #[must_use = "the duration is recorded when the timer is dropped"]
    pub fn reconcile_started(&self, controller: &'static str) -> ReconcileTimer {
        self.reconciles
            .get_or_create(&[("controller", controller)])
            .inc();
        ReconcileTimer {
            histogram: self
                .durations
                .get_or_create_owned(&[("controller", controller)]),
            started: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `controller` with its CamelCase `reason`.
    pub fn reconcile_failed(&self, controller: &'static str, reason: &str) {
        self.failures
            .get_or_create(&[
                ("controller", controller.to_owned()),
                ("reason", reason.to_owned()),
            ])
            .inc();
    }

    /// Records whether this replica is the leader. A replica that stops leading forgets its
    /// Catalog refresh times: only the leader reads sources, so its times would only go stale.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
        if !leading {
            self.catalog_refreshed.clear();
        }
    }

    /// Records that the source of Catalog `name` was just read successfully.
    pub fn catalog_refreshed(&self, name: &str) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        self.catalog_refreshed
            .get_or_create(&[("catalog", name.to_owned())])
            .set(now);
    }

    /// Forgets Catalog `name` (deleted): its refresh time is no longer reported.
    pub fn catalog_removed(&self, name: &str) {
        self.catalog_refreshed
            .remove(&[("catalog", name.to_owned())]);
    }

    /// Records the reconciler's judgement of PO `po` against the patch update the cluster is
    /// asked to take (`true`: it would be left without a bundle that runs there), for the
    /// `no_bundle_for_patch` update risk; `false` also forgets a deleted PO.
    pub fn patch_update_judged(&self, po: &str, shortfall: bool) {
        let Ok(mut set) = self.state.no_bundle_for_patch.lock() else {
            return;
        };
        if shortfall {
            set.insert(po.to_owned());
        } else {
            set.remove(po);
        }
    }

    /// Lets the scrape-time metrics read the watch caches (once; later calls are ignored).
    pub fn observe(&self, state: ClusterState) {
        let _ = self.state.state.set(state);
    }

    /// Exposes the counters of the client's request layer (once; later calls are ignored).
    pub fn count_api_requests(&self, requests: ApiRequests) {
        let _ = self.api_requests.requests.set(requests);
    }

    /// The OpenMetrics text of every metric (ends with `# EOF`).
    ///
    /// # Errors
    /// Only if formatting into a `String` fails, which it does not.
    pub fn encode(&self) -> Result<String, fmt::Error> {
        self.encode_as(Format::OpenMetrics)
    }

    /// Every metric in `format`.
    ///
    /// # Errors
    /// Only if formatting into a `String` fails, which it does not.
    pub fn encode_as(&self, format: Format) -> Result<String, fmt::Error> {
        let mut out = String::new();
        match format {
            Format::OpenMetrics => {
                prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
            }
            Format::PrometheusText => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, &self.registry)?;
            }
        }
        Ok(out)
    }
}

/// Records a reconcile's duration on drop.
pub struct ReconcileTimer {
    histogram: Histogram,
    started: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.started.elapsed().as_secs_f64());
    }
}

/// Encodes `pom_api_requests_total` once the client's counters are known.
#[derive(Default, Debug)]
struct ApiRequestsCollector {
    requests: OnceLock<ApiRequests>,
}

impl Collector for ApiRequestsCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(requests) = self.requests.get() else {
            return Ok(());
        };
        let family = requests.family();
        let metric = encoder.encode_descriptor(
            "api_requests",
            "Requests this manager sent to the Kubernetes API, by verb, kind (read or write) and resource",
            None,
            family.metric_type(),
        )?;
        family.encode(metric)
    }
}

/// Computes the state gauges from the watch caches at each scrape.
#[derive(Default)]
struct StateCollector {
    state: OnceLock<ClusterState>,
    /// The POs whose last reconcile judged that the patch update the cluster is asked to take
    /// would leave them without a bundle that runs there (`pom_policy::precheck::
    /// patch_shortfall`): the one update risk the status does not carry, since it needs the
    /// catalogs. Leader only (the reconciler judges it); a replica that does not reconcile
    /// reports 0, and the rule's `max by` takes the leader's 1. Names of deleted POs are
    /// removed by their cleanup, and only names the PO cache holds are reported.
    no_bundle_for_patch: Mutex<BTreeSet<String>>,
}

impl fmt::Debug for StateCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StateCollector")
            .field("observing", &self.state.get().is_some())
            .finish()
    }
}

impl Collector for StateCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Some(state) = self.state.get() else {
            return Ok(());
        };
        let mut platform_operators = state.platform_operators();
        platform_operators.sort_by_key(|po| po.name_any());
        encode_po_states(&mut encoder, &platform_operators)?;
        encode_po_settled(&mut encoder, &platform_operators)?;
        let no_bundle_for_patch = self
            .no_bundle_for_patch
            .lock()
            .map(|set| set.clone())
            .unwrap_or_default();
        encode_update_risks(&mut encoder, &platform_operators, &no_bundle_for_patch)?;
        let catalogs = state.catalogs();
        encode_catalog_unpacked(&mut encoder, &catalogs)?;
        encode_catalog_serving(&mut encoder, &catalogs)?;
        // What the CVO reads: absent until the aggregated ClusterOperator reports Upgradeable.
        if let Some(upgradeable) = state.upgradeable() {
            let metric = encoder.encode_descriptor(
                "upgradeable",
                "1 when the aggregated ClusterOperator reports Upgradeable=True, 0 when it blocks minor cluster updates",
                None,
                MetricType::Gauge,
            )?;
            ConstGauge::new(i64::from(upgradeable)).encode(metric)?;
        }
        Ok(())
    }
}

/// `platformoperators{state}`: how many POs are in each state, every state (a zero is a value).
fn encode_po_states(
    encoder: &mut DescriptorEncoder,
    platform_operators: &[Arc<PlatformOperator>],
) -> Result<(), fmt::Error> {
    let mut counts = [0i64; PO_STATES.len()];
    for po in platform_operators {
        let state = po_state(po);
        if let Some(i) = PO_STATES.iter().position(|s| *s == state) {
            counts[i] += 1;
        }
    }
    let mut family = encoder.encode_descriptor(
        "platformoperators",
        "PlatformOperators by state",
        None,
        MetricType::Gauge,
    )?;
    for (state, count) in PO_STATES.iter().zip(counts) {
        ConstGauge::new(count).encode(family.encode_family(&[("state", *state)])?)?;
    }
    Ok(())
}

/// `platformoperator_settled{platformoperator}`: 1 when installed and settled.
fn encode_po_settled(
    encoder: &mut DescriptorEncoder,
    platform_operators: &[Arc<PlatformOperator>],
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "platformoperator_settled",
        "1 when the PlatformOperator is installed and settled (state installed), 0 while it is pending, progressing, degraded or failed",
        None,
        MetricType::Gauge,
    )?;
    for po in platform_operators {
        ConstGauge::new(i64::from(po_state(po) == "installed"))
            .encode(family.encode_family(&[("platformoperator", po.name_any())])?)?;
    }
    Ok(())
}

/// Issue 35 item 3: what the shipped precheck alert reads. Every risk for every PO (0 or 1):
/// bounded by the POs times the five risks, and a zero is a value.
fn encode_update_risks(
    encoder: &mut DescriptorEncoder,
    platform_operators: &[Arc<PlatformOperator>],
    no_bundle_for_patch: &BTreeSet<String>,
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "platformoperator_update_risk",
        "1 while the PlatformOperator is not ready for a cluster update, by risk: unsettled (a move has not settled), degraded, paused, pending_approval (a move waits for the admin's approval), no_bundle_for_patch (the patch update the cluster is asked to take would leave it without a bundle that runs there; leader only)",
        None,
        MetricType::Gauge,
    )?;
    for po in platform_operators {
        let patch = no_bundle_for_patch.contains(&po.name_any());
        for (risk, applies) in update_risks(po, patch) {
            let labels: [(&str, String); 2] = [
                ("platformoperator", po.name_any()),
                ("risk", risk.label().to_owned()),
            ];
            ConstGauge::new(i64::from(applies)).encode(family.encode_family(&labels)?)?;
        }
    }
    Ok(())
}

/// `catalog_last_unpacked_timestamp_seconds{catalog}`: when each Catalog was last unpacked.
fn encode_catalog_unpacked(
    encoder: &mut DescriptorEncoder,
    catalogs: &[Arc<Catalog>],
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "catalog_last_unpacked_timestamp_seconds",
        "When each Catalog's content was last unpacked (Unix time)",
        None,
        MetricType::Gauge,
    )?;
    for catalog in catalogs {
        let unpacked = catalog
            .status
            .as_ref()
            .and_then(|s| s.last_unpacked.as_deref())
            .and_then(|t| t.parse::<jiff::Timestamp>().ok());
        if let Some(at) = unpacked {
            ConstGauge::new(at.as_millisecond() as f64 / 1000.0)
                .encode(family.encode_family(&[("catalog", catalog.name_any())])?)?;
        }
    }
    Ok(())
}

/// `catalog_serving{catalog}`: 1 when a Catalog serves content.
fn encode_catalog_serving(
    encoder: &mut DescriptorEncoder,
    catalogs: &[Arc<Catalog>],
) -> Result<(), fmt::Error> {
    let mut family = encoder.encode_descriptor(
        "catalog_serving",
        "1 when a Catalog serves content (Serving=True)",
        None,
        MetricType::Gauge,
    )?;
    for catalog in catalogs {
        let serving = catalog.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == types::SERVING && c.status == "True")
        });
        ConstGauge::new(i64::from(serving))
            .encode(family.encode_family(&[("catalog", catalog.name_any())])?)?;
    }
    Ok(())
}

/// One state per PlatformOperator, worst first: `degraded` (Degraded=True), `failed`
/// (Installed=False for a reason other than a first install underway), `progressing`
/// (Progressing=True), `installed` (Installed=True), else `pending` (no status yet).
#[must_use]
pub fn po_state(po: &PlatformOperator) -> &'static str {
    let Some(status) = &po.status else {
        return "pending";
    };
    let find = |t: &str| status.conditions.iter().find(|c| c.type_ == t);
    let is = |t: &str, s: &str| find(t).is_some_and(|c| c.status == s);
    if is(types::DEGRADED, "True") {
        "degraded"
    } else if find(types::INSTALLED)
        .is_some_and(|c| c.status == "False" && c.reason != Reason::Installing.as_str())
    {
        "failed"
    } else if is(types::PROGRESSING, "True") {
        "progressing"
    } else if is(types::INSTALLED, "True") {
        "installed"
    } else {
        "pending"
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use serde_json::json;

    fn po(conditions: serde_json::Value) -> PlatformOperator {
        serde_json::from_value(json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": "p"}, "spec": {"package": {"name": "p"}},
            "status": {"conditions": conditions}
        }))
        .unwrap()
    }

    fn cond(t: &str, s: &str, r: &str) -> serde_json::Value {
        json!({"type": t, "status": s, "reason": r, "message": "", "lastTransitionTime": "2024-01-01T00:00:00Z"})
    }

    #[test]
    fn states_worst_first() {
        assert_eq!(po_state(&po(json!([]))), "pending");
        assert_eq!(
            po_state(&po(json!([
                cond("Installed", "False", "Installing"),
                cond("Progressing", "True", "Installing")
            ]))),
            "progressing"
        );
        assert_eq!(
            po_state(&po(json!([
                cond("Installed", "True", "InstallSucceeded"),
                cond("Progressing", "False", "AsExpected")
            ]))),
            "installed"
        );
        assert_eq!(
            po_state(&po(json!([cond("Installed", "False", "SourceFailed")]))),
            "failed"
        );
        assert_eq!(
            po_state(&po(json!([
                cond("Installed", "True", "InstallSucceeded"),
                cond("Degraded", "True", "ProgressDeadlineExceeded")
            ]))),
            "degraded"
        );
    }

    #[test]
    fn exposition_is_openmetrics_with_reconcile_families() {
        let metrics = Metrics::new();
        drop(metrics.reconcile_started("platformoperator"));
        metrics.reconcile_failed("platformoperator", "InstallFailed");
        metrics.set_leader(true);
        let text = metrics.encode().unwrap();
        assert!(text.ends_with("# EOF\n"), "{text}");
        assert!(
            text.contains("pom_reconciles_total{controller=\"platformoperator\"} 1"),
            "{text}"
        );
        assert!(text.contains("pom_reconcile_errors_total{controller=\"platformoperator\",reason=\"InstallFailed\"} 1"), "{text}");
        assert!(
            text.contains(
                "pom_reconcile_duration_seconds_count{controller=\"platformoperator\"} 1"
            ),
            "{text}"
        );
        assert!(text.contains("pom_leader 1"), "{text}");
    }

    /// A registry with a sample in every family: one reconcile and one failure, a leader, an
    /// API request, two PlatformOperators (one settled), a refreshed Catalog and an upgradeable
    /// ClusterOperator.
    fn populated() -> Metrics {
        let metrics = Metrics::new();
        drop(metrics.reconcile_started("platformoperator"));
        metrics.reconcile_failed("platformoperator", "InstallFailed");
        metrics.set_leader(true);
        metrics.catalog_refreshed("local");
        let requests = ApiRequests::default();
        metrics.count_api_requests(requests.clone());
        requests.record(&http::Method::GET, &"/api/v1/configmaps".parse().unwrap());
        let mut alpha = po(json!([
            cond("Installed", "True", "InstallSucceeded"),
            cond("Progressing", "False", "AsExpected")
        ]));
        alpha.metadata.name = Some("alpha".to_owned());
        let mut beta = po(json!([cond("Installed", "False", "SourceFailed")]));
        beta.metadata.name = Some("beta".to_owned());
        let catalog: pom_api::Catalog = serde_json::from_value(json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
            "metadata": {"name": "local"},
            "spec": {"source": {"configMap": {"name": "local", "namespace": "catalogs"}}},
            "status": {"lastUnpacked": "2024-01-01T00:00:00Z",
                       "conditions": [cond("Serving", "True", "Unpacked")]}
        }))
        .unwrap();
        let co: pom_api::openshift::ClusterOperator = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator",
            "metadata": {"name": "platform-operators-aggregated"}, "spec": {},
            "status": {"conditions": [cond("Upgradeable", "True", "AsExpected")]}
        }))
        .unwrap();
        metrics.observe(ClusterState::from_objects(
            vec![alpha, beta],
            vec![catalog],
            vec![co],
        ));
        metrics
    }

    /// `name type` of every `# TYPE` line.
    fn declared(text: &str) -> std::collections::BTreeSet<(String, String)> {
        text.lines()
            .filter_map(|l| l.strip_prefix("# TYPE "))
            .map(|l| {
                let (name, kind) = l.split_once(' ').unwrap();
                (name.to_owned(), kind.to_owned())
            })
            .collect()
    }

    #[test]
    fn every_family_is_documented_and_every_documented_family_exists() {
        let docs = include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../docs/metrics.md"
        ));
        let documented: std::collections::BTreeSet<(String, String)> = docs
            .lines()
            .filter(|l| l.starts_with("| `pom_"))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (cells[1].trim_matches('`').to_owned(), cells[2].to_owned())
            })
            .collect();
        let metrics = populated();
        let text = metrics.encode_as(Format::PrometheusText).unwrap();
        let served = declared(&text);
        assert_eq!(served.len(), 12, "{text}");
        // Every risk of every PO, zeros included, for the precheck alert (issue 35 item 3).
        for po in ["alpha", "beta"] {
            for risk in [
                "unsettled",
                "degraded",
                "paused",
                "pending_approval",
                "no_bundle_for_patch",
            ] {
                let sample = format!(
                    "pom_platformoperator_update_risk{{platformoperator=\"{po}\",risk=\"{risk}\"}} 0\n"
                );
                assert!(text.contains(&sample), "{sample}{text}");
            }
        }
        assert_eq!(
            served, documented,
            "docs/metrics.md's table must list exactly the families /metrics serves"
        );
        // Every family has a sample (a family without one would hide from this check).
        for (name, _) in &served {
            assert!(
                text.lines()
                    .any(|l| !l.starts_with('#') && l.starts_with(name.as_str())),
                "no sample of {name}:\n{text}"
            );
        }
        // OpenMetrics declares the same families, counters without `_total`.
        let openmetrics: std::collections::BTreeSet<(String, String)> =
            declared(&metrics.encode().unwrap())
                .into_iter()
                .map(|(name, kind)| match kind.as_str() {
                    "counter" => (format!("{name}_total"), kind),
                    _ => (name, kind),
                })
                .collect();
        assert_eq!(openmetrics, served);
    }

    #[test]
    fn prometheus_text_declares_counters_by_their_total_name() {
        let text = populated().encode_as(Format::PrometheusText).unwrap();
        assert!(!text.contains("# EOF"), "{text}");
        assert!(
            text.contains("# TYPE pom_reconciles_total counter\npom_reconciles_total{controller=\"platformoperator\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("# HELP pom_api_requests_total Requests"),
            "{text}"
        );
    }

    #[test]
    fn settled_per_platform_operator() {
        let text = populated().encode().unwrap();
        assert!(
            text.contains("pom_platformoperator_settled{platformoperator=\"alpha\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("pom_platformoperator_settled{platformoperator=\"beta\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("pom_platformoperators{state=\"failed\"} 1\n"),
            "{text}"
        );
    }

    fn refreshed_at(metrics: &Metrics, catalog: &str) -> Option<f64> {
        let text = metrics.encode().unwrap();
        let prefix =
            format!("pom_catalog_last_refresh_timestamp_seconds{{catalog=\"{catalog}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.parse().unwrap())
    }

    #[test]
    fn catalog_refresh_time_is_now_and_dropped_with_the_catalog_or_the_lease() {
        let metrics = Metrics::new();
        metrics.set_leader(true);
        let before = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        metrics.catalog_refreshed("a");
        metrics.catalog_refreshed("b");
        let after = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let at = refreshed_at(&metrics, "a").unwrap();
        assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
        metrics.catalog_removed("a");
        assert_eq!(refreshed_at(&metrics, "a"), None);
        assert!(refreshed_at(&metrics, "b").is_some());
        metrics.set_leader(false);
        assert_eq!(
            refreshed_at(&metrics, "b"),
            None,
            "a follower reports no refresh times"
        );
    }

    #[test]
    fn negotiates_the_exposition_format() {
        use Format::{OpenMetrics, PrometheusText};
        for (accept, want) in [
            (None, OpenMetrics),
            (Some(""), OpenMetrics),
            (Some("*/*"), OpenMetrics),
            (Some("application/json"), OpenMetrics),
            (Some("text/plain"), PrometheusText),
            (Some("text/plain; version=0.0.4"), PrometheusText),
            (
                Some("TEXT/PLAIN;version=0.0.4;charset=utf-8"),
                PrometheusText,
            ),
            (
                Some("application/openmetrics-text; version=1.0.0"),
                OpenMetrics,
            ),
            // What Prometheus v3 sends by default: OpenMetrics ranks first.
            (
                Some(
                    "application/openmetrics-text;version=1.0.0;q=0.6,application/openmetrics-text;version=0.0.1;q=0.5,text/plain;version=1.0.0;q=0.4,text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                ),
                OpenMetrics,
            ),
            (
                Some("application/openmetrics-text;q=0.2, text/plain;q=0.9"),
                PrometheusText,
            ),
            (Some("text/plain;q=0.5, */*;q=0.5"), OpenMetrics),
            (Some("text/plain;q=0, */*;q=0.1"), OpenMetrics),
            (Some("text/plain;q=0"), OpenMetrics),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
        assert_eq!(
            PrometheusText.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        assert_eq!(OpenMetrics.content_type(), CONTENT_TYPE);
    }

    #[test]
    fn api_requests_are_exposed_once_counted() {
        let metrics = Metrics::new();
        let requests = ApiRequests::default();
        metrics.count_api_requests(requests.clone());
        requests.record(
            &http::Method::PATCH,
            &"/apis/platform.openshift.io/v1alpha1/platformoperators/a/status"
                .parse()
                .unwrap(),
        );
        let text = metrics.encode().unwrap();
        assert!(
            text.contains("pom_api_requests_total{verb=\"patch\",kind=\"write\",resource=\"platformoperators.platform.openshift.io/status\"} 1"),
            "{text}"
        );
    }
}
