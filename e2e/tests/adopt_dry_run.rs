#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `pomctl adopt --dry-run` (issue 36 items 1 and 4), the built binary, against a real API
//! server serving OLM v0's published CRDs and holding four installs laid out as OLM v0 leaves
//! them (`pom_e2e::olm_v0`): AllNamespaces, OwnNamespace (Manual, with a `config`), one with a
//! webhook, all adoptable, and one MultiNamespace, which is not. A ConfigMap Catalog offers the
//! four bundles, and a newer alpha, which the adopting PlatformOperator's pin must keep out.
//!
//! Judged by the world: the printed PlatformOperator is accepted by the API server's own
//! validation (a server-side dry-run create), and every object of the cluster keeps its
//! resourceVersion across the runs (pomctl is one process that has exited: nothing of it can
//! write later).

use std::process::Output;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::olm_v0::{self, Install, Targets};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::{Value, json};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn bundles() -> Vec<TestBundle> {
    vec![
        TestBundle::new("alpha", "1.0.0"),
        TestBundle::new("alpha", "1.1.0").replaces("1.0.0"),
        TestBundle {
            install_modes: vec!["OwnNamespace"],
            ..TestBundle::new("beta", "2.0.0")
        },
        TestBundle::new("gamma", "3.0.0").with_webhooks("/gamma"),
        TestBundle {
            install_modes: vec!["OwnNamespace", "MultiNamespace"],
            ..TestBundle::new("delta", "4.0.0")
        },
    ]
}

fn row<'a>(rows: &'a Value, subscription: &str) -> &'a Value {
    rows.as_array()
        .unwrap()
        .iter()
        .find(|r| r["subscription"] == subscription)
        .unwrap_or_else(|| panic!("{subscription} not in {rows:#}"))
}

#[tokio::test]
async fn adopt_dry_run_judges_what_olm_v0_installed_and_writes_nothing() {
    if binaries::require(binaries::CONTROL_PLANE).is_none() {
        return;
    }
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let _ = tokio::task::spawn_blocking(pom_e2e::pomctl::path)
        .await
        .unwrap();
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let client = plane.client().await.unwrap();
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    olm_v0::install_crds(&client, &crds).await.unwrap();

    // The catalog POM reads.
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "catalogs"}})).unwrap(),
        )
        .await
        .unwrap();
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "operators"},
        "data": {"catalog.json": catalog_json(&bundles(), &[])}}))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .create(&PostParams::default(), &cm)
        .await
        .unwrap();
    pom_e2e::scenario::trust_catalog_namespace(&client, "catalogs").await;
    let catalog: Catalog = serde_json::from_value(json!({"apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": "operators"}, "spec": {"source": {"configMap": {"name": "operators", "namespace": "catalogs"}}}}))
    .unwrap();
    Api::<Catalog>::all(client.clone())
        .patch(
            "operators",
            &PatchParams::apply("pom-e2e"),
            &Patch::Apply(&catalog),
        )
        .await
        .unwrap();

    // What OLM v0 left.
    let all = bundles();
    let beta = Install {
        approval: "Manual",
        config: Some(json!({"env": [{"name": "LOG_LEVEL", "value": "debug"}],
                            "nodeSelector": {"node-role.kubernetes.io/infra": ""},
                            "selector": {"matchLabels": {"unused": "by OLM"}}})),
        ..Install::new(all[2].clone(), "beta-system", Targets::Own)
    };
    let installs = [
        Install::new(all[0].clone(), "alpha-system", Targets::All),
        beta,
        Install::new(all[3].clone(), "gamma-system", Targets::All),
        Install::new(
            all[4].clone(),
            "delta-system",
            Targets::Namespaces(vec!["team-a".into(), "team-b".into()]),
        ),
    ];
    for install in &installs {
        olm_v0::lay_out(&client, install).await.unwrap();
    }
    let before = olm_v0::snapshot(&client).await.unwrap();

    // The table.
    let out = pom_e2e::pomctl::run(&kubeconfig, &["adopt", "--dry-run"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let human = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("pomctl adopt --dry-run:\n{human}");
    for (sub, verdict) in [
        ("alpha-system/alpha", "Adoptable"),
        ("beta-system/beta", "Adoptable"),
        ("gamma-system/gamma", "Adoptable"),
        ("delta-system/delta", "NotAdoptable"),
    ] {
        let line = human
            .lines()
            .find(|l| l.starts_with(sub))
            .unwrap_or_else(|| panic!("{sub} not in\n{human}"));
        assert!(
            line.contains(&format!(" {verdict} ")) || line.contains(&format!(" {verdict}")),
            "{line}"
        );
    }
    assert!(human.contains("MultiNamespace"), "{human}");

    // The same as JSON: every field of the adopting PlatformOperators.
    let out = pom_e2e::pomctl::run(&kubeconfig, &["adopt", "-o", "json"]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let rows: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows.as_array().unwrap().len(), 4, "{rows:#}");
    let alpha = row(&rows, "alpha-system/alpha");
    assert_eq!(alpha["verdict"], "Adoptable", "{alpha:#}");
    assert_eq!(alpha["installedCSV"], "alpha.v1.0.0");
    assert_eq!(alpha["proof"]["installMode"], "AllNamespaces");
    assert_eq!(alpha["proof"]["catalog"], "operators");
    let spec = &alpha["platformOperator"]["spec"];
    // 1.1.0 is in the channel: the pin keeps the adoption on what runs.
    assert_eq!(spec["package"]["versionRange"], "=1.0.0", "{spec:#}");
    assert_eq!(spec["package"]["channel"], "stable");
    assert_eq!(spec["installNamespace"], "alpha-system");
    assert!(spec.get("watchNamespace").is_none(), "{spec:#}");
    assert_eq!(spec["upgradeApproval"], "Automatic");

    let beta = row(&rows, "beta-system/beta");
    assert_eq!(beta["verdict"], "Adoptable", "{beta:#}");
    assert_eq!(beta["proof"]["installMode"], "OwnNamespace");
    let spec = &beta["platformOperator"]["spec"];
    assert_eq!(spec["watchNamespace"], "beta-system");
    assert_eq!(spec["upgradeApproval"], "Manual");
    assert_eq!(spec["approvedBundle"], "beta.v2.0.0");
    assert_eq!(spec["config"]["env"][0]["name"], "LOG_LEVEL");
    assert_eq!(
        spec["config"]["nodeSelector"]["node-role.kubernetes.io/infra"],
        ""
    );
    assert!(spec["config"].get("selector").is_none(), "{spec:#}");

    let gamma = row(&rows, "gamma-system/gamma");
    assert_eq!(gamma["verdict"], "Adoptable", "{gamma:#}");
    let objects: Vec<&str> = gamma["proof"]["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o.as_str().unwrap())
        .collect();
    assert!(
        objects
            .iter()
            .any(|o| o.starts_with("ValidatingWebhookConfiguration ")),
        "{objects:?}"
    );

    let delta = row(&rows, "delta-system/delta");
    assert_eq!(delta["verdict"], "NotAdoptable");
    assert_eq!(delta["reason"], "MultiNamespace", "{delta:#}");
    assert!(delta["platformOperator"].is_null());

    // One Subscription's PlatformOperator, ready to apply: the API server's validation
    // accepts it (a dry-run create writes nothing).
    for sub in [
        "alpha-system/alpha",
        "beta-system/beta",
        "gamma-system/gamma",
    ] {
        let out = pom_e2e::pomctl::run(&kubeconfig, &["adopt", "--subscription", sub]).await;
        assert_eq!(out.status.code(), Some(0), "{sub}: {}", text(&out));
        let po: PlatformOperator = serde_saphyr::from_str(&String::from_utf8_lossy(&out.stdout))
            .unwrap_or_else(|e| panic!("{sub}: not a PlatformOperator ({e}):\n{}", text(&out)));
        eprintln!(
            "pomctl adopt --subscription {sub}:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
        // What the shipped admission guard would refuse the manager, handed over by the
        // commands printed as comments: OLM's objects POM takes over, and OLM's webhook
        // configuration adoption retires.
        let stdout = String::from_utf8_lossy(&out.stdout);
        let (name, ns) = sub.split_once('/').map(|(ns, n)| (n, ns)).unwrap();
        assert!(
            stdout.contains(&format!(
                "# kubectl annotate deployment.apps/{name}-controller -n {ns} platform.openshift.io/adopt={name}\n"
            )),
            "{stdout}"
        );
        assert!(
            stdout.contains(&format!(
                "# kubectl annotate namespace/{ns} platform.openshift.io/adopt={name}\n"
            )),
            "{stdout}"
        );
        if name == "gamma" {
            assert!(
                stdout.contains("# kubectl annotate validatingwebhookconfiguration.admissionregistration.k8s.io/v"),
                "{stdout}"
            );
            assert!(
                stdout.contains(&format!("# kubectl annotate secret/{name}-controller-service-cert -n {ns} platform.openshift.io/adopt={name}\n")),
                "{stdout}"
            );
        }
        Api::<PlatformOperator>::all(client.clone())
            .create(
                &PostParams {
                    dry_run: true,
                    ..PostParams::default()
                },
                &po,
            )
            .await
            .unwrap_or_else(|e| {
                panic!("{sub}: the API server refuses the printed PlatformOperator: {e}")
            });
    }
    let out = pom_e2e::pomctl::run(
        &kubeconfig,
        &["adopt", "--subscription", "delta-system/delta"],
    )
    .await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(out.stdout.is_empty(), "{}", text(&out));
    assert!(text(&out).contains("MultiNamespace"), "{}", text(&out));

    // Nothing was written.
    let after = olm_v0::snapshot(&client).await.unwrap();
    assert_eq!(before, after, "pomctl adopt --dry-run changed the cluster");
    assert!(
        !after.keys().any(|k| k.starts_with("PlatformOperator ")),
        "{after:#?}"
    );
}
