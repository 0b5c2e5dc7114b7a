#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The manager's `/metrics` as Prometheus' own linter reads it (issue 11 item 3): the manager as a
//! process (plain HTTP metrics on loopback) installs a PlatformOperator from a ConfigMap catalog,
//! reports another whose package no catalog has, and writes the aggregated ClusterOperator, so
//! that every family has samples (but `pom_reconcile_errors_total`: nothing here makes a
//! reconcile fail, and a counter family without samples is not declared; the registry with a
//! failure recorded is linted on its own); then
//! - `promtool check metrics` (pinned `PROMTOOL_VERSION`) reads the Prometheus text format the
//!   endpoint serves on `Accept: text/plain; version=0.0.4`, exits 0 and prints nothing (no lint
//!   problem: help text, `_total` on counters, base units, snake_case...);
//! - promtool cannot read the OpenMetrics default (it parses only the 0.0.4 text format and
//!   reports every counter as lacking help), which is why the endpoint negotiates and what
//!   `docs/metrics.md` tells users;
//! - the families served, as Prometheus names them, are exactly the table of `docs/metrics.md`
//!   (less the reconcile errors), and both formats declare the same families.

use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use pom_api::{Catalog, PlatformOperator};
use pom_controller::metrics::{Format, Metrics};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{eventually, po_condition};
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::scenario::create_cluster_scoped;
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::json;

const NAMESPACE: &str = "openshift-platform-operators";
const WAIT: Duration = Duration::from_secs(120);
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";

/// A GET of `/metrics` with `accept` (none when empty): content type and body.
async fn scrape(address: SocketAddr, accept: &str) -> (String, String) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
    let accept = if accept.is_empty() {
        String::new()
    } else {
        format!("Accept: {accept}\r\n")
    };
    stream
        .write_all(format!("GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n{accept}\r\n").as_bytes())
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(
        head.starts_with("HTTP/1.0 200") || head.starts_with("HTTP/1.1 200"),
        "{head}"
    );
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_owned)
        })
        .unwrap_or_default();
    (content_type, body.to_owned())
}

/// `promtool check metrics` on `text`: exit code, stdout and stderr.
fn promtool_check(promtool: &std::path::Path, text: &str) -> (Option<i32>, String) {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), output)
}

/// Family names of the `# TYPE` lines, counters named with `_total` (OpenMetrics declares them
/// without it; the 0.0.4 text format with it).
fn families(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (name, kind) = l.split_once(' ').unwrap();
            if kind == "counter" && !name.ends_with("_total") {
                format!("{name}_total")
            } else {
                name.to_owned()
            }
        })
        .collect()
}

/// The families without a sample line in `text` (0.0.4 format: samples start with their family
/// name, histograms with `<name>_bucket` etc.).
fn families_without_samples(text: &str) -> Vec<String> {
    families(text)
        .into_iter()
        .filter(|name| {
            !text
                .lines()
                .any(|l| !l.starts_with('#') && l.starts_with(name.as_str()))
        })
        .collect()
}

/// The metric names in `docs/metrics.md`'s table.
fn documented() -> BTreeSet<String> {
    let docs = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/metrics.md"),
    )
    .unwrap();
    docs.lines()
        .filter(|l| l.starts_with("| `pom_"))
        .map(|l| l.split('`').nth(1).unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn promtool_checks_metrics_with_every_family_populated_and_documented() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    if binaries::require(&needed).is_none() {
        return;
    }
    let Some(promtool_dir) = binaries::require_promtool() else {
        return;
    };
    let promtool = promtool_dir.join("promtool");
    let plane = ControlPlane::start(Workloads::Simulated).await.unwrap();
    let client = plane.client().await.unwrap();
    for ns in [NAMESPACE, "catalogs"] {
        create_cluster_scoped::<Namespace>(&client, json!({"metadata": {"name": ns}})).await;
    }
    let bundle = TestBundle::new("alpha", "1.0.0");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "local"},
        "data": {"catalog.json": catalog_json(std::slice::from_ref(&bundle), &[])}}))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    pom_e2e::scenario::trust_catalog_namespace(&client, "catalogs").await;
    create_cluster_scoped::<Catalog>(
        &client,
        json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": "local"},
            "spec": {"source": {"configMap": {"name": "local", "namespace": "catalogs"}}}
        }),
    )
    .await;
    for package in ["alpha", "ghost"] {
        create_cluster_scoped::<PlatformOperator>(
            &client,
            json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": package}, "spec": {"package": {"name": package}}
            }),
        )
        .await;
    }

    let metrics = free_address().unwrap();
    let args = vec![
        "--leader-elect".to_owned(),
        format!("--health-bind-address={}", free_address().unwrap()),
        format!("--metrics-bind-address={metrics}"),
    ];
    let env = [
        ("POD_NAMESPACE", NAMESPACE),
        ("RELEASE_VERSION", "4.99.0-pom-test"),
    ];
    let mut manager = ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        "manager",
        plane.kubeconfig_path(),
        &args,
        &env,
        plane.dir(),
    )
    .await
    .unwrap();

    let (_, reason, message) = eventually(WAIT, "alpha Installed=True", || async {
        po_condition(&client, "alpha", "Installed")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    assert_eq!(
        reason,
        "InstallSucceeded",
        "{message}\n{}",
        manager.log_tail(40)
    );
    // Every family has samples once the PO states, the catalog and the ClusterOperator are seen
    // (but the reconcile errors: see above).
    let text = eventually(WAIT, "a sample in every family", || async {
        let (content_type, text) = scrape(metrics, PROMETHEUS_TEXT).await;
        assert!(
            content_type.starts_with("text/plain; version=0.0.4"),
            "{content_type}"
        );
        let missing = families_without_samples(&text);
        let settled = text.contains("pom_platformoperator_settled{platformoperator=\"alpha\"} 1\n")
            && text.contains("pom_platformoperator_settled{platformoperator=\"ghost\"} 0\n");
        (settled && missing.is_empty()).then_some(text)
    })
    .await;

    let (status, output) = promtool_check(&promtool, &text);
    assert_eq!(
        (status, output.as_str()),
        (Some(0), ""),
        "promtool check metrics found problems in:\n{text}"
    );

    // The default, OpenMetrics, which promtool's 0.0.4 parser misreads (as docs/metrics.md says).
    let (content_type, openmetrics) = scrape(metrics, "").await;
    assert!(
        content_type.starts_with("application/openmetrics-text; version=1.0.0"),
        "{content_type}"
    );
    assert!(openmetrics.ends_with("# EOF\n"), "{openmetrics}");
    let (status, output) = promtool_check(&promtool, &openmetrics);
    assert_ne!(status, Some(0), "{output}");
    assert!(
        output.contains("pom_reconciles_total no help text"),
        "{output}"
    );

    let served = families(&text);
    assert_eq!(
        families(&openmetrics),
        served,
        "both formats, same families"
    );
    let documented = documented();
    let undocumented: Vec<&String> = served.difference(&documented).collect();
    assert!(
        undocumented.is_empty(),
        "served, not in docs/metrics.md: {undocumented:?}"
    );
    // Only the error counter may be missing: a labelled family has no series until a
    // reconcile fails, which nothing here provokes (one may still fail, e.g. on a conflict).
    let unseen: Vec<&String> = documented.difference(&served).collect();
    assert!(
        unseen
            .iter()
            .all(|name| *name == "pom_reconcile_errors_total"),
        "in docs/metrics.md, not served: {unseen:?}"
    );

    // The reconcile families with a failure recorded, as the manager's registry encodes them.
    let registry = Metrics::new();
    drop(registry.reconcile_started("platformoperator"));
    registry.reconcile_failed("platformoperator", "InstallFailed");
    let text = registry.encode_as(Format::PrometheusText).unwrap();
    assert!(
        text.contains(
            "pom_reconcile_errors_total{controller=\"platformoperator\",reason=\"InstallFailed\"} 1\n"
        ),
        "{text}"
    );
    let (status, output) = promtool_check(&promtool, &text);
    assert_eq!(
        (status, output.as_str()),
        (Some(0), ""),
        "promtool check metrics found problems in:\n{text}"
    );

    manager.signal("TERM");
    assert_eq!(
        manager.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        manager.log_tail(30)
    );
}
