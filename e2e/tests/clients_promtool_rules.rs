#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shipped update-precheck alert as Prometheus' own tool judges it (issue 35 item 3):
//! - `promtool check rules --lint=all --lint-fatal` reads the rule group of the committed
//!   `manifests/openshift/` PrometheusRule (which `crates/controller/tests/manifests_fresh.rs`
//!   keeps equal to what `make manifests` generates);
//! - the manager as a process installs nothing for `alpha` (`spec.paused`) and waits for the
//!   admin's approval of `beta`'s first install (`upgradeApproval: Manual`); `gamma` (whose
//!   bundle runs up to 4.16) installs on 4.16.3, the simulated CVO is forced to 4.17.0 and then
//!   asked for the patch 4.17.1, which would leave `gamma` without a bundle that runs there;
//!   its `/metrics` is scraped; then `alpha` is resumed, `beta` approved and a `gamma` bundle
//!   that runs on 4.17 published (POM moves to it under the patch update's pin), all settle,
//!   and `/metrics` is scraped again;
//! - the two scrapes, one after the other and each as if two replicas had served it, are the
//!   `input_series` of a `promtool test rules` unit test: the alert is pending before its `for`,
//!   fires once per PO and risk (`alpha`/`paused`, `beta`/`pending_approval`,
//!   `gamma`/`no_bundle_for_patch`) with the
//!   `openShiftUpdatePrecheck="true"` label and its annotations, and clears on the second scrape.
//!   promtool, not POM, says whether it fired and cleared; the same unit test expecting the alert
//!   after the second scrape must fail, so the clearing is a real verdict.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_controller::manifests::{PROMETHEUS_RULE, UPDATE_PRECHECK_ALERT};
use pom_e2e::cvo::{Admission, Cvo};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{eventually, po_condition};
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::scenario::{configmap_catalog, create_cluster_scoped};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::{Value, json};

const NAMESPACE: &str = "openshift-platform-operators";
const WAIT: Duration = Duration::from_secs(120);
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4";
const RISK_FAMILY: &str = "pom_platformoperator_update_risk";
/// Samples per scrape in the unit test, one a minute: longer than the alert's `for` (10m).
const MINUTES_PER_SCRAPE: u32 = 20;
/// The update risks every PO reports (`pom_policy::precheck::UpdateRisk::ALL`).
const RISKS: usize = 5;

/// Waits until PO `po` says Installed=True, and checks it is the install's success.
async fn installed(client: &kube::Client, po: &str, manager: &ManagerProcess) {
    let (_, reason, message) = eventually(WAIT, &format!("{po} Installed=True"), || async {
        po_condition(client, po, "Installed")
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
}

/// A GET of `/metrics` in the Prometheus text format; `None` while nothing listens yet (the
/// manager process binds its metrics port some time after it starts, later on a loaded machine).
async fn scrape(address: SocketAddr) -> Option<String> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream
        .write_all(
            format!(
                "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\nAccept: {PROMETHEUS_TEXT}\r\n\r\n"
            )
            .as_bytes(),
        )
        .await
        .unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).await.unwrap();
    let (head, body) = response.split_once("\r\n\r\n").unwrap();
    assert!(head.contains(" 200 "), "{head}");
    Some(body.to_owned())
}

/// Every sample of `text` with an integer value (what promtool's series notation takes without
/// ambiguity), `series -> value`.
fn samples(text: &str) -> BTreeMap<String, i64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (series, value) = l.rsplit_once(' ')?;
            Some((series.to_owned(), value.parse::<i64>().ok()?))
        })
        .collect()
}

/// `series` with an `instance` label added, as a Prometheus scraping replica `instance` stores it.
fn with_instance(series: &str, instance: &str) -> String {
    match series.split_once('{') {
        Some((name, labels)) => format!("{name}{{instance=\"{instance}\",{labels}"),
        None => format!("{series}{{instance=\"{instance}\"}}"),
    }
}

/// `(platformoperator, risk)` of every risk series at 1.
fn risks_at_one(samples: &BTreeMap<String, i64>) -> BTreeSet<(String, String)> {
    samples
        .iter()
        .filter(|(series, value)| series.starts_with(RISK_FAMILY) && **value == 1)
        .map(|(series, _)| {
            let label = |name: &str| {
                let start = series.find(&format!("{name}=\"")).unwrap() + name.len() + 2;
                let end = series[start..].find('"').unwrap() + start;
                series[start..end].to_owned()
            };
            (label("platformoperator"), label("risk"))
        })
        .collect()
}

/// The committed OpenShift PrometheusRule as JSON.
fn shipped_rule() -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../manifests/openshift/0000_50_platform-operators-manager_09_prometheusrule.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let (_, doc) = text.split_once("---\n").unwrap();
    serde_saphyr::from_str(doc).unwrap()
}

/// The alert rule of the shipped group.
fn shipped_alert(rule: &Value) -> &Value {
    let group = &rule["spec"]["groups"][0];
    assert_eq!(group["name"], PROMETHEUS_RULE);
    let alert = &group["rules"][0];
    assert_eq!(alert["alert"], UPDATE_PRECHECK_ALERT);
    alert
}

/// The annotations the alert carries for `po` and `risk`: the shipped templates rendered (they
/// may use only these two labels; anything else left unrendered fails here).
fn rendered_annotations(alert: &Value, po: &str, risk: &str) -> Value {
    let mut out = serde_json::Map::new();
    for (key, template) in alert["annotations"].as_object().unwrap() {
        let text = template
            .as_str()
            .unwrap()
            .replace("{{ $labels.platformoperator }}", po)
            .replace("{{ $labels.risk }}", risk);
        assert!(
            !text.contains("{{"),
            "an annotation template not rendered here: {text}"
        );
        out.insert(key.clone(), Value::String(text));
    }
    Value::Object(out)
}

/// `promtool` with `args` in `dir`: exit code and its whole output.
fn promtool(promtool: &Path, dir: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(promtool)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    let output = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code(), output)
}

/// The `promtool test rules` file: both scrapes, each for [`MINUTES_PER_SCRAPE`] minutes and
/// served by two replicas; `alerts` are what must fire at 15m (of the first scrape), `later`
/// what must fire at 30m (of the second).
fn unit_test(
    first: &BTreeMap<String, i64>,
    second: &BTreeMap<String, i64>,
    alert: &Value,
    alerts: &BTreeSet<(String, String)>,
    later: &BTreeSet<(String, String)>,
) -> Value {
    let keys: BTreeSet<&String> = first.keys().chain(second.keys()).collect();
    let segment = |value: Option<&i64>| match value {
        Some(v) => format!("{v}x{MINUTES_PER_SCRAPE}"),
        None => format!("_x{MINUTES_PER_SCRAPE}"),
    };
    let mut input_series = Vec::new();
    for series in keys {
        let values = format!(
            "{} {}",
            segment(first.get(series)),
            segment(second.get(series))
        );
        for instance in ["replica-a", "replica-b"] {
            input_series.push(json!({"series": with_instance(series, instance), "values": values}));
        }
    }
    let expected = |set: &BTreeSet<(String, String)>| -> Vec<Value> {
        set.iter()
            .map(|(po, risk)| {
                let mut labels = alert["labels"].as_object().unwrap().clone();
                labels.insert("platformoperator".into(), json!(po));
                labels.insert("risk".into(), json!(risk));
                json!({"exp_labels": labels, "exp_annotations": rendered_annotations(alert, po, risk)})
            })
            .collect()
    };
    json!({
        "rule_files": ["rules.json"],
        "evaluation_interval": "1m",
        "tests": [{
            "interval": "1m",
            "input_series": input_series,
            "alert_rule_test": [
                // Pending: the `for` has not elapsed.
                {"eval_time": "9m", "alertname": UPDATE_PRECHECK_ALERT, "exp_alerts": []},
                {"eval_time": "15m", "alertname": UPDATE_PRECHECK_ALERT, "exp_alerts": expected(alerts)},
                {"eval_time": "30m", "alertname": UPDATE_PRECHECK_ALERT, "exp_alerts": expected(later)},
            ],
        }],
    })
}

#[tokio::test]
async fn the_update_precheck_alert_fires_on_held_pos_and_clears_once_they_settle() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    if binaries::require(&needed).is_none() {
        return;
    }
    let Some(promtool_dir) = binaries::require_promtool() else {
        return;
    };
    let promtool_bin = promtool_dir.join("promtool");

    // The rule group as shipped, linted.
    let rule = shipped_rule();
    let alert = shipped_alert(&rule).clone();
    assert_eq!(alert["labels"]["openShiftUpdatePrecheck"], "true");
    let work = tempfile::tempdir().unwrap();
    std::fs::write(
        work.path().join("rules.json"),
        serde_json::to_string_pretty(&rule["spec"]).unwrap(),
    )
    .unwrap();
    let (status, output) = promtool(
        &promtool_bin,
        work.path(),
        &["check", "rules", "--lint=all", "--lint-fatal", "rules.json"],
    );
    assert_eq!(status, Some(0), "{output}");
    assert!(output.contains("SUCCESS: 1 rules found"), "{output}");

    let plane = ControlPlane::start(Workloads::Simulated).await.unwrap();
    let client = plane.client().await.unwrap();
    create_cluster_scoped::<Namespace>(&client, json!({"metadata": {"name": NAMESPACE}})).await;
    // An OpenShift cluster at 4.16.3 (the simulated CVO, waiting on no payload operator).
    let cvo = Cvo::install(client.clone(), "4.16.3", &[]).await.unwrap();
    let alpha = TestBundle::new("alpha", "1.0.0");
    let beta = TestBundle::new("beta", "1.0.0");
    // gamma 1.0.0 runs up to 4.16; 1.0.1 (published later) runs everywhere, within the pin
    // of a patch update (`>=1.0.0 <1.1.0-0`).
    let gamma = TestBundle::new("gamma", "1.0.0")
        .without_crd()
        .max_ocp("4.16");
    let gamma_fix = TestBundle::new("gamma", "1.0.1")
        .without_crd()
        .replaces("1.0.0");
    let fbc = catalog_json(&[alpha.clone(), beta.clone(), gamma.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    for (name, spec) in [
        (
            "alpha",
            json!({"package": {"name": "alpha"}, "paused": true}),
        ),
        (
            "beta",
            json!({"package": {"name": "beta"}, "upgradeApproval": "Manual"}),
        ),
        (
            "gamma",
            json!({"package": {"name": "gamma"}, "upgradeGate": "Rollout"}),
        ),
    ] {
        create_cluster_scoped::<PlatformOperator>(
            &client,
            json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": name}, "spec": spec
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

    // gamma installs on 4.16.3; then the admin forces the cluster to 4.17.0, past gamma's
    // olm.maxOpenShiftVersion, and asks for the patch 4.17.1, which Upgradeable cannot hold
    // and which would leave gamma on a bundle that does not run there.
    installed(&client, "gamma", &manager).await;
    let forced = cvo.request_update("4.17.0", true).await.unwrap();
    assert!(matches!(forced, Admission::Accepted { .. }), "{forced:?}");
    cvo.wait_completed(WAIT).await.unwrap();
    let patch = cvo.request_update("4.17.1", false).await.unwrap();
    assert!(matches!(patch, Admission::Accepted { .. }), "{patch:?}");

    // Held by the admin: alpha paused, beta's first install waiting for approval; gamma
    // without a bundle for the patch update.
    let held: BTreeSet<(String, String)> = [
        ("alpha", "paused"),
        ("beta", "pending_approval"),
        ("gamma", "no_bundle_for_patch"),
    ]
    .into_iter()
    .map(|(po, risk)| (po.to_owned(), risk.to_owned()))
    .collect();
    let first = eventually(
        WAIT,
        "alpha paused, beta pending approval, gamma without a bundle for 4.17.1",
        || async {
            let samples = samples(&scrape(metrics).await?);
            (risks_at_one(&samples) == held).then_some(samples)
        },
    )
    .await;
    // Every risk of every PO is a series (zeros included).
    assert_eq!(
        first.keys().filter(|s| s.starts_with(RISK_FAMILY)).count(),
        3 * RISKS,
        "{first:?}"
    );

    // The admin lets alpha and beta go: they install and settle.
    let pos = Api::<PlatformOperator>::all(client.clone());
    pos.patch(
        "alpha",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"paused": false}})),
    )
    .await
    .unwrap();
    pos.patch(
        "beta",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"approvedBundle": beta.name()}})),
    )
    .await
    .unwrap();
    // The publisher ships gamma 1.0.1, which runs on 4.17: POM moves gamma to it under the
    // patch update's pin, and nothing is left without a bundle.
    let fixed = catalog_json(
        &[
            alpha.clone(),
            beta.clone(),
            gamma.clone(),
            gamma_fix.clone(),
        ],
        &[],
    );
    configmap_catalog(&client, "local", &fixed, 0).await;
    for po in ["alpha", "beta"] {
        installed(&client, po, &manager).await;
    }
    let pos = Api::<PlatformOperator>::all(client.clone());
    eventually(WAIT, "gamma runs 1.0.1", || async {
        let po = pos.get("gamma").await.ok()?;
        (po.status?.installed_bundle?.name == gamma_fix.name()).then_some(())
    })
    .await;
    let second = eventually(WAIT, "no update risk left", || async {
        let samples = samples(&scrape(metrics).await?);
        let risks = samples
            .keys()
            .filter(|s| s.starts_with(RISK_FAMILY))
            .count();
        (risks == 3 * RISKS && risks_at_one(&samples).is_empty()).then_some(samples)
    })
    .await;

    // promtool's verdict: pending, firing once per PO and risk across two replicas, cleared.
    let test = unit_test(&first, &second, &alert, &held, &BTreeSet::new());
    std::fs::write(
        work.path().join("test.json"),
        serde_json::to_string_pretty(&test).unwrap(),
    )
    .unwrap();
    let (status, output) = promtool(&promtool_bin, work.path(), &["test", "rules", "test.json"]);
    assert_eq!(status, Some(0), "promtool test rules:\n{output}");
    assert!(output.contains("SUCCESS"), "{output}");

    // The same test expecting the alert still firing after the second scrape fails: promtool
    // saw it clear.
    let still = unit_test(&first, &second, &alert, &held, &held);
    std::fs::write(
        work.path().join("still.json"),
        serde_json::to_string_pretty(&still).unwrap(),
    )
    .unwrap();
    let (status, output) = promtool(&promtool_bin, work.path(), &["test", "rules", "still.json"]);
    assert_eq!(status, Some(1), "{output}");
    assert!(output.contains("FAILED"), "{output}");
    assert!(output.contains("time: 30m"), "{output}");

    manager.signal("TERM");
    assert_eq!(
        manager.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        manager.log_tail(30)
    );
}
