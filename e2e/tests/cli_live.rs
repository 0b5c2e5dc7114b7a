#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `pomctl status` and `pomctl plan` (the built binary) against a real control plane with the
//! manager running, a ConfigMap catalog and an image catalog, and the simulated CVO.
//!
//! The binary: Cargo gives integration tests `CARGO_BIN_EXE_*` only for binaries of their own
//! package, and `cargo test -p pom-e2e` does not build `pomctl` at all. So the test builds it
//! itself with `cargo build -p pomctl --message-format=json` (a no-op when it is fresh; `cargo
//! test` has released the build lock by the time tests run) and runs the executable Cargo
//! reports, whatever the target directory.

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::cvo::Cvo;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::oci_publish::push_catalog;
use pom_e2e::scenario::wait_po_condition;
use pom_e2e::{ControlPlane, Registry, Workloads, binaries};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(120);

async fn pomctl(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    pom_e2e::pomctl::run(kubeconfig, args).await
}

fn json_of(out: &Output) -> Value {
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON ({e}):\n{}\nstderr:\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// `alpha` (ConfigMap catalog): 1.0.0 (≤4.17) ← 1.0.1 (≤4.17) ← 1.1.0 (≤4.18).
fn alpha(stage: u8) -> Vec<TestBundle> {
    let all = vec![
        TestBundle::new("alpha", "1.0.0").max_ocp("4.17"),
        // 1.0.1 adds a power that needs consent: `pomctl plan` shows it for the hop.
        TestBundle::new("alpha", "1.0.1")
            .replaces("1.0.0")
            .max_ocp("4.17")
            .with_object(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                "metadata": {"name": "alpha-debugger"},
                "rules": [{"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}]
            }))
            .with_object(json!({
                "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "alpha-debugger"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "alpha-debugger"},
                "subjects": [{"kind": "ServiceAccount", "name": "alpha", "namespace": "alpha"}]
            })),
        TestBundle::new("alpha", "1.1.0")
            .replaces("1.0.1")
            .max_ocp("4.18"),
    ];
    if stage == 1 { all[..1].to_vec() } else { all }
}

/// `beta` (image catalog): 2.3.0 (≤4.16, blocks 4.17) ← 2.3.1 (≤4.17).
fn beta(stage: u8) -> Vec<TestBundle> {
    let all = vec![
        TestBundle::new("beta", "2.3.0").max_ocp("4.16"),
        TestBundle::new("beta", "2.3.1")
            .replaces("2.3.0")
            .max_ocp("4.17"),
    ];
    if stage == 1 { all[..1].to_vec() } else { all }
}

async fn apply_config_map(client: &Client, fbc: &str) {
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": "cm"}, "data": {"catalog.json": fbc}}))
            .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .patch(
            "cm",
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
}

async fn apply(client: &Client, value: Value) {
    let name = value["metadata"]["name"].as_str().unwrap().to_owned();
    if value["kind"] == "Catalog" {
        let catalog: Catalog = serde_json::from_value(value).unwrap();
        Api::<Catalog>::all(client.clone())
            .patch(
                &name,
                &PatchParams::apply("pom-e2e").force(),
                &Patch::Apply(&catalog),
            )
            .await
            .unwrap();
    } else {
        let po: PlatformOperator = serde_json::from_value(value).unwrap();
        Api::<PlatformOperator>::all(client.clone())
            .patch(
                &name,
                &PatchParams::apply("pom-e2e").force(),
                &Patch::Apply(&po),
            )
            .await
            .unwrap();
    }
}

async fn resolved_source(client: &Client, name: &str) -> Option<String> {
    Api::<Catalog>::all(client.clone())
        .get_opt(name)
        .await
        .ok()??
        .status?
        .resolved_source
}

async fn installed_version(client: &Client, po: &str) -> Option<String> {
    Some(
        Api::<PlatformOperator>::all(client.clone())
            .get_opt(po)
            .await
            .ok()??
            .status?
            .installed_bundle?
            .version,
    )
}

fn po<'a>(plan: &'a Value, name: &str) -> &'a Value {
    plan["platformOperators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("{name} not in {plan:#}"))
}

fn hops(po: &Value) -> Vec<String> {
    po["hops"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["to"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn status_and_plan_read_the_live_cluster() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    needed.extend_from_slice(binaries::REGISTRY);
    if binaries::require(&needed).is_none() {
        return;
    }
    // Built before anything runs: the build must not stall the manager.
    let started = std::time::Instant::now();
    let progress = |what: &str| eprintln!("[{:6.1}s] {what}", started.elapsed().as_secs_f32());
    let _ = tokio::task::spawn_blocking(pom_e2e::pomctl::path)
        .await
        .unwrap();
    progress("pomctl built");
    let plane = ControlPlane::start(Workloads::Simulated).await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();
    let client = plane.client().await.unwrap();
    progress("control plane and registry up");
    let kubeconfig = plane.kubeconfig_path().to_path_buf();

    // Without a ClusterVersion there is no update to plan: an error, exit 2.
    let out = pomctl(&kubeconfig, &["plan", "--to", "4.16.4"]).await;
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("ClusterVersion"), "{}", text(&out));

    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": "catalogs"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    apply_config_map(&client, &catalog_json(&alpha(1), &[])).await;
    let beta_v1 = push_catalog(&host, "cli/beta", "latest", &catalog_json(&beta(1), &[]))
        .await
        .unwrap();
    pom_e2e::scenario::trust_catalog_namespace(&client, "catalogs").await;
    apply(&client, json!({"apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": "cm"},
        "spec": {"source": {"configMap": {"name": "cm", "namespace": "catalogs"}}}})).await;
    apply(&client, json!({"apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": "img"},
        "spec": {"source": {"image": {"ref": format!("{host}/cli/beta:latest"), "pollInterval": "2s"}}}})).await;
    let cvo = Cvo::install(
        client.clone(),
        "4.16.3",
        &[pom_api::openshift::AGGREGATED_CLUSTER_OPERATOR],
    )
    .await
    .unwrap();
    for name in ["alpha", "beta"] {
        apply(&client, json!({"apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": name},
            "spec": {"package": {"name": name}}})).await;
    }
    let mut settings = Manager::test_settings(vec![host.clone()]);
    settings.release_version = "4.16.3".into();
    let manager = Manager::start(client.clone(), settings);
    eventually(WAIT, "alpha 1.0.0 and beta 2.3.0 installed", || async {
        let a = installed_version(&client, "alpha").await?;
        let b = installed_version(&client, "beta").await?;
        (a == "1.0.0" && b == "2.3.0").then_some(())
    })
    .await;
    assert_eq!(
        resolved_source(&client, "img").await.as_deref(),
        Some(beta_v1.as_str())
    );

    progress("both installed");
    // `status`: both installed, the ClusterOperator blocks 4.17 because of beta.
    let status = eventually(
        WAIT,
        "pomctl status to show both POs Installed and the ClusterOperator",
        || async {
            let out = pomctl(&kubeconfig, &["status", "-o", "json"]).await;
            assert_eq!(out.status.code(), Some(0), "{}", text(&out));
            let v = json_of(&out);
            let pos = v["platformOperators"].as_array()?.clone();
            let ready = pos.len() == 2
                && pos.iter().all(|p| {
                    p["conditions"]["Installed"]["status"] == "True" && p["stale"] == false
                })
                && v["clusterOperator"]["conditions"]["Upgradeable"]["reason"]
                    == "IncompatibleOperatorsInstalled";
            ready.then_some(v)
        },
    )
    .await;
    let alpha_status = &status["platformOperators"][0];
    assert_eq!(alpha_status["name"], "alpha");
    assert_eq!(alpha_status["installed"]["version"], "1.0.0");
    assert_eq!(alpha_status["pin"]["range"], "=1.0.0", "{status:#}");
    assert_eq!(
        status["clusterOperator"]["conditions"]["Upgradeable"]["reason"],
        "IncompatibleOperatorsInstalled"
    );
    let out = pomctl(&kubeconfig, &["status"]).await;
    let human = text(&out);
    assert_eq!(out.status.code(), Some(0), "{human}");
    let alpha_row = human
        .lines()
        .find(|l| l.starts_with("alpha "))
        .unwrap_or_else(|| panic!("{human}"));
    assert!(
        alpha_row.contains("1.0.0")
            && alpha_row.contains("=1.0.0 (Steady)")
            && alpha_row.contains("True"),
        "{human}"
    );
    assert!(
        human.contains("ClusterOperator platform-operators-aggregated (versions: operator=4.16.3)"),
        "{human}"
    );
    assert!(human.contains("Upgradeable  False"), "{human}");
    let out = pomctl(&kubeconfig, &["status", "-o", "yaml"]).await;
    assert!(text(&out).contains("platformOperators:"), "{}", text(&out));

    progress("status checked");
    // The publishers ship newer bundles: a ConfigMap edit and a new push to the same tag.
    apply_config_map(&client, &catalog_json(&alpha(2), &[])).await;
    let beta_v2 = push_catalog(&host, "cli/beta", "latest", &catalog_json(&beta(2), &[]))
        .await
        .unwrap();
    eventually(WAIT, "the image catalog to serve stage 2", || async {
        (resolved_source(&client, "img").await? == beta_v2).then_some(())
    })
    .await;

    progress("stage 2 served");
    // A patch update: admitted whatever Upgradeable says; POs move within their minor.
    let out = pomctl(
        &kubeconfig,
        &[
            "plan",
            "--to",
            "4.16.4",
            "-o",
            "json",
            "--insecure-registry",
            &host,
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let plan = json_of(&out);
    assert_eq!(plan["cluster"]["update"], "patch");
    assert_eq!(plan["cluster"]["phase"], "PatchUpgrade");
    assert_eq!(plan["admitted"], true);
    let a = po(&plan, "alpha");
    assert_eq!(a["pin"]["range"], ">=1.0.0 <1.1.0-0", "{plan:#}");
    assert_eq!(a["pin"]["reason"], "PatchUpgrade");
    assert_eq!(hops(a), ["alpha.v1.0.1"], "{plan:#}");
    assert_eq!(a["bundle"]["version"], "1.0.1");
    // The hop's powers, what is new against 1.0.0, and the consent the PO lacks for it.
    let powers = &a["nextHopPowers"];
    assert_eq!(powers["bundle"], "alpha.v1.0.1", "{plan:#}");
    assert!(powers["error"].is_null(), "{plan:#}");
    assert_eq!(powers["classes"]["ClusterAdminEquivalent"], 1, "{plan:#}");
    let added: Vec<&str> = powers["added"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        added.len() == 1 && added[0].contains("alpha-debugger") && added[0].contains("exec"),
        "{plan:#}"
    );
    assert_eq!(
        powers["consentNeeded"],
        json!(["spec.consent.clusterAdminEquivalent: true"]),
        "{plan:#}"
    );
    // beta's next bundle adds nothing.
    let b_powers = &po(&plan, "beta")["nextHopPowers"];
    assert!(b_powers["error"].is_null(), "{plan:#}");
    assert_eq!(b_powers["added"], json!([]), "{plan:#}");
    let b = po(&plan, "beta");
    assert_eq!(b["pin"]["range"], ">=2.3.0 <2.4.0-0", "{plan:#}");
    assert_eq!(hops(b), ["beta.v2.3.1"], "{plan:#}");
    assert_eq!(b["blocksUpdate"], false);
    assert_eq!(
        b["upgradeableAfter"]["status"], "True",
        "2.3.1 supports 4.17: {plan:#}"
    );

    // A minor update: blocked by beta (2.3.0 supports 4.16 only); alpha would take two hops.
    let out = pomctl(
        &kubeconfig,
        &[
            "plan",
            "--to",
            "4.17.0",
            "-o",
            "json",
            "--insecure-registry",
            &host,
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let plan = json_of(&out);
    assert_eq!(plan["cluster"]["update"], "minor");
    assert_eq!(plan["admitted"], false);
    let a = po(&plan, "alpha");
    assert_eq!(a["pin"]["range"], ">=1.0.0 <2.0.0-0", "{plan:#}");
    assert_eq!(a["pin"]["reason"], "MinorUpgrade");
    assert_eq!(hops(a), ["alpha.v1.0.1", "alpha.v1.1.0"], "{plan:#}");
    assert_eq!(a["blocksUpdate"], false, "{plan:#}");
    let b = po(&plan, "beta");
    assert_eq!(b["blocksUpdate"], true, "{plan:#}");
    assert_eq!(b["upgradeable"]["reason"], "IncompatibleOperatorsInstalled");
    assert!(
        b["upgradeable"]["message"]
            .as_str()
            .unwrap()
            .contains("beta.v2.3.1"),
        "the message names the way out: {plan:#}"
    );
    let blockers = plan["blockers"].as_array().unwrap();
    assert!(
        blockers
            .iter()
            .any(|b| b["source"] == "PlatformOperator/beta"),
        "{plan:#}"
    );
    let out = pomctl(
        &kubeconfig,
        &["plan", "--to", "4.17.0", "--insecure-registry", &host],
    )
    .await;
    let human = text(&out);
    assert_eq!(out.status.code(), Some(1), "{human}");
    assert!(
        human.contains("alpha: alpha.v1.0.0 -> alpha.v1.0.1 -> alpha.v1.1.0"),
        "{human}"
    );
    assert!(human.contains(">=1.0.0 <2.0.0-0 (MinorUpgrade)"), "{human}");
    assert!(
        human.contains("Result: the CVO would refuse this minor update"),
        "{human}"
    );
    assert!(
        human.contains("PlatformOperator/beta (IncompatibleOperatorsInstalled)"),
        "{human}"
    );
    // More than one minor: a chained plan, one minor at a time as the CVO takes them. beta
    // hops to 2.3.1 before 4.17 (offered), then nothing of it runs on 4.18.
    let out = pomctl(
        &kubeconfig,
        &[
            "plan",
            "--to",
            "4.18.0",
            "-o",
            "json",
            "--insecure-registry",
            &host,
        ],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let chain = json_of(&out);
    assert_eq!(
        chain["steps"],
        json!(["4.16.3 → 4.17.0", "4.17.0 → 4.18.0"]),
        "{chain:#}"
    );
    assert_eq!(
        chain["firstBlocked"],
        json!({"step": "4.17.0 → 4.18.0", "platformOperator": "beta"}),
        "{chain:#}"
    );
    let beta = chain["platformOperators"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == "beta")
        .unwrap();
    assert_eq!(
        beta["steps"][0]["preUpdateHops"][0]["to"], "beta.v2.3.1",
        "{chain:#}"
    );

    progress("plans checked");
    // The plan agrees with the CVO and with what the manager then does.
    assert!(
        cvo.start_update("4.17.0").await.is_err(),
        "the CVO must refuse what the plan says is blocked"
    );
    cvo.start_update("4.16.4").await.unwrap();
    // alpha's hop is held for the consent the plan named, the running 1.0.0 kept; beta moves.
    let message = wait_po_condition(
        &client,
        "alpha",
        "Degraded",
        "True",
        Some("ContentPolicyViolation"),
    )
    .await;
    assert!(
        message.contains("spec.consent.clusterAdminEquivalent: true"),
        "{message}"
    );
    assert_eq!(
        installed_version(&client, "alpha").await.as_deref(),
        Some("1.0.0")
    );
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"consent": {"clusterAdminEquivalent": true}}})),
        )
        .await
        .unwrap();
    eventually(
        WAIT,
        "the patch update to move alpha to 1.0.1 and beta to 2.3.1, as planned",
        || async {
            let a = installed_version(&client, "alpha").await?;
            let b = installed_version(&client, "beta").await?;
            (a == "1.0.1" && b == "2.3.1").then_some(())
        },
    )
    .await;
    manager.stop().await;
}
