//! Prometheus metrics (OpenMetrics text), in the shape of kube-rs/controller-rs.
//!
//! Two kinds of metrics live here:
//! - events the reconcilers report through [`Metrics`] (runs, failures by reason, durations),
//!   because only the reconciler knows that a run started or why it failed;
//! - cluster state computed at scrape time from the watch caches of [`crate::cluster_state`]
//!   (PlatformOperators by state, catalog freshness, the aggregated `Upgradeable`), so those
//!   values can never go stale and no reconciler has to remember to set them;
//! - the manager's own API requests (`pom_api_requests_total`), counted by the client's
//!   [`crate::api_metrics`] layer; the client exists before the registry, hence
//!   [`Metrics::count_api_requests`].

use std::fmt;
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use kube::ResourceExt;
use pom_api::PlatformOperator;
use pom_api::conditions::{Reason, types};
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

/// Every PlatformOperator state the `pom_platformoperators` gauge reports, always all of them
/// (a zero is a value; a missing series is a question).
pub const PO_STATES: [&str; 5] = ["installed", "progressing", "degraded", "failed", "pending"];

type ControllerLabel = [(&'static str, &'static str); 1];
type FailureLabels = [(&'static str, String); 2];

/// The manager's metrics registry and the handles reconcilers use.
pub struct Metrics {
    registry: Registry,
    reconciles: Family<ControllerLabel, Counter>,
    failures: Family<FailureLabels, Counter>,
    durations: Family<ControllerLabel, Histogram>,
    leader: Gauge,
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
        registry.register_collector(Box::new(state.clone()));
        registry.register_collector(Box::new(api_requests.clone()));
        Self {
            registry,
            reconciles,
            failures,
            durations,
            leader,
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

    /// Records whether this replica is the leader.
    pub fn set_leader(&self, leading: bool) {
        self.leader.set(i64::from(leading));
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
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, &self.registry)?;
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

        let mut counts = [0i64; PO_STATES.len()];
        for po in state.platform_operators() {
            let state = po_state(&po);
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

        let catalogs = state.catalogs();
        let mut family = encoder.encode_descriptor(
            "catalog_last_unpacked_timestamp_seconds",
            "When each Catalog's content was last unpacked (Unix time)",
            None,
            MetricType::Gauge,
        )?;
        for catalog in &catalogs {
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
        let mut family = encoder.encode_descriptor(
            "catalog_serving",
            "1 when a Catalog serves content (Serving=True)",
            None,
            MetricType::Gauge,
        )?;
        for catalog in &catalogs {
            let serving = catalog.status.as_ref().is_some_and(|s| {
                s.conditions
                    .iter()
                    .any(|c| c.type_ == types::SERVING && c.status == "True")
            });
            ConstGauge::new(i64::from(serving))
                .encode(family.encode_family(&[("catalog", catalog.name_any())])?)?;
        }

        // What the CVO reads: absent until the aggregated ClusterOperator reports Upgradeable.
        if let Some(upgradeable) = state.upgradeable() {
            let gauge = ConstGauge::new(i64::from(upgradeable));
            let metric = encoder.encode_descriptor(
                "upgradeable",
                "1 when the aggregated ClusterOperator reports Upgradeable=True, 0 when it blocks minor cluster updates",
                None,
                MetricType::Gauge,
            )?;
            gauge.encode(metric)?;
        }
        Ok(())
    }
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
