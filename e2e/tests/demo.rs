#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `make demo`'s non-interactive path (`pom-demo --once`: [`Demo::start`] then [`Demo::run`])
//! against a real control plane, then every command of the README's "Looking around the demo"
//! block (read from `README.md`, so the README cannot drift from what works), judged by what
//! the API server holds:
//!
//! - POM is installed from `manifests/kubernetes/` by kubectl (the objects' field manager), the
//!   manager runs as its ServiceAccount (`kubectl auth whoami` with its kubeconfig; it may not
//!   do everything) and holds its Lease, and its admission guard is in force (not Degraded);
//! - the walk shows a pre-update hop: `demo-metrics` runs 2.4.0 (approved as
//!   `spec.approvedBundle`) before the ClusterVersion first heads to 4.17.0, and 2.5.0 only
//!   after; every update of the history completed;
//! - the README's catalog-sources command changes what the shipped policy admits (a Catalog
//!   reading from `team-a` refused before, admitted after), and its RoleBinding command binds
//!   the manager's ServiceAccount.

use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::rbac::v1::RoleBinding;
use kube::api::{Api, PostParams};
use pom_api::openshift::{CLUSTER_VERSION_NAME, ClusterVersion};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::demo::{
    Demo, MANAGER_NAMESPACE, MANAGER_SERVICE_ACCOUNT, MINOR_VERSION, PATCH_VERSION, PRE_UPDATE_PO,
    Tools, sample,
};
use pom_e2e::event_log::{EventLog, Recorded};
use pom_e2e::manager_process::manager_binary;
use pom_e2e::scenario::co_condition;
use pom_e2e::{binaries, pomctl};
use serde_json::json;

/// How long an admission policy may take to see a changed parameter or binding.
const POLICY_WAIT: Duration = Duration::from_secs(30);
/// The bound of the whole demo run (`pom-demo --once` allows 300 s).
const DEMO_TIMEOUT: Duration = Duration::from_secs(300);

/// The commands of the README's `<!-- demo-commands -->` block, continuation lines joined,
/// without the `export` line (the test sets those variables itself).
fn readme_commands() -> Vec<String> {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../README.md"))
            .unwrap();
    let block = readme
        .split_once("<!-- demo-commands -->")
        .expect("README.md has no <!-- demo-commands --> block")
        .1;
    let block = block
        .split_once("```sh\n")
        .unwrap()
        .1
        .split_once("```")
        .unwrap()
        .0;
    let mut commands = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                let command = std::mem::take(&mut current);
                if !command.trim().is_empty() && !command.starts_with("export ") {
                    commands.push(command);
                }
            }
        }
    }
    commands
}

/// The revision of the first write in `events` that `matches`.
fn first<K: Clone>(events: &[Recorded<K>], matches: impl Fn(&K) -> bool) -> Option<u64> {
    events
        .iter()
        .find(|e| matches(&e.object))
        .map(|e| e.revision)
}

fn runs(deployment: &Deployment, version: &str) -> bool {
    let wanted = format!("example.invalid/{PRE_UPDATE_PO}:{version}");
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .and_then(|s| s.containers.first())
        .and_then(|c| c.image.as_deref())
        == Some(wanted.as_str())
}

/// A Catalog reading a ConfigMap in `team-a`, as a server-side dry run: what the shipped
/// catalog-sources policy says of it, without writing it.
async fn team_a_catalog_admitted(catalogs: &Api<Catalog>) -> Result<(), String> {
    let catalog: Catalog = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": "team-a"},
        "spec": {"source": {"configMap": {"name": "catalog", "namespace": "team-a"}}}
    }))
    .unwrap();
    catalogs
        .create(
            &PostParams {
                dry_run: true,
                ..PostParams::default()
            },
            &catalog,
        )
        .await
        .map(|_| ())
        .map_err(|e| e.to_string())
}

#[tokio::test]
async fn make_demo_installs_pom_from_its_manifests_hops_before_the_minor_update_and_the_readme_commands_work()
 {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    needed.extend_from_slice(binaries::REGISTRY);
    if binaries::require(&needed).is_none() {
        return;
    }
    let commands = readme_commands();
    assert!(commands.len() >= 6, "{commands:?}");
    let pomctl = pomctl::path();
    let tools = Tools {
        manager: manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        kubectl: std::env::var_os("POM_KUBECTL").map_or_else(|| "kubectl".into(), Into::into),
    };
    let started = Instant::now();
    let mut demo = Demo::start(tools.clone()).await.unwrap();
    let client = demo.client().await.unwrap();
    let deployments =
        EventLog::start(Api::<Deployment>::namespaced(client.clone(), PRE_UPDATE_PO)).await;
    let versions = EventLog::start(Api::<ClusterVersion>::all(client.clone())).await;

    tokio::time::timeout(DEMO_TIMEOUT, demo.run(started))
        .await
        .expect("the demo did not finish in time")
        .unwrap_or_else(|err| {
            panic!(
                "the demo failed: {err}\nmanager log:\n{}",
                demo.manager_log()
                    .and_then(|l| std::fs::read_to_string(l).ok())
                    .unwrap_or_default()
            )
        });
    eprintln!("demo run: {:.1}s", started.elapsed().as_secs_f32());

    // Installed by kubectl from the manifests, as the admin.
    let sources = Api::<ConfigMap>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .get("platform-operators-catalog-sources")
        .await
        .unwrap();
    let managers: Vec<_> = sources
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    assert!(
        managers.iter().any(|m| m == "kubectl"),
        "not applied by kubectl: {managers:?}"
    );
    // The manager holds its Lease and its guard is in force.
    let lease = Api::<Lease>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .get("platform-operators-manager")
        .await
        .unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("platform-operators-manager")
    );
    let degraded = co_condition(&client, "Degraded").await.unwrap();
    assert_eq!(degraded.0, "False", "{degraded:?}");

    // Every update completed, newest first.
    let cv = Api::<ClusterVersion>::all(client.clone())
        .get(CLUSTER_VERSION_NAME)
        .await
        .unwrap();
    let history: Vec<_> = cv
        .status
        .unwrap()
        .history
        .into_iter()
        .map(|h| (h.version, h.state))
        .collect();
    assert_eq!(
        history,
        [
            (MINOR_VERSION.to_owned(), "Completed".to_owned()),
            (PATCH_VERSION.to_owned(), "Completed".to_owned()),
            ("4.16.3".to_owned(), "Completed".to_owned()),
        ]
    );

    // The pre-update hop: 2.4.0, approved, ran before the cluster headed to 4.17.0; 2.5.0 (a
    // hop of the update itself) only after.
    let metrics = Api::<PlatformOperator>::all(client.clone())
        .get(PRE_UPDATE_PO)
        .await
        .unwrap();
    assert_eq!(
        metrics.spec.approved_bundle.as_deref(),
        Some("demo-metrics.v2.4.0")
    );
    assert_eq!(
        metrics
            .status
            .and_then(|s| s.installed_bundle)
            .map(|b| b.name)
            .as_deref(),
        Some("demo-metrics.v2.5.0")
    );
    let log = deployments.events();
    let hop = first(&log, |d| runs(d, "2.4.0")).expect("demo-metrics never ran 2.4.0");
    let after = first(&log, |d| runs(d, "2.5.0")).expect("demo-metrics never ran 2.5.0");
    let accepted = first(&versions.events(), |cv: &ClusterVersion| {
        cv.status
            .as_ref()
            .is_some_and(|s| s.desired.version == MINOR_VERSION)
    })
    .expect("the ClusterVersion never headed to 4.17.0");
    assert!(
        hop < accepted && accepted < after,
        "2.4.0 at revision {hop}, 4.17.0 accepted at {accepted}, 2.5.0 at {after}"
    );
    assert!(sample::PACKAGES.contains(&PRE_UPDATE_PO));

    // Before the README's commands: the shipped policy refuses a Catalog reading team-a.
    let catalogs = Api::<Catalog>::all(client.clone());
    let refused = team_a_catalog_admitted(&catalogs)
        .await
        .expect_err("a Catalog reading team-a was admitted before the admin listed it");
    assert!(
        refused.contains("spec.source.configMap.namespace is team-a"),
        "{refused}"
    );

    // The README's commands, verbatim, against the demo cluster.
    let path = format!(
        "{}:{}",
        pomctl.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let kubectl_dir = Path::new(&tools.kubectl)
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .map(|d| format!("{}:", d.display()))
        .unwrap_or_default();
    let mut outputs = Vec::new();
    for command in &commands {
        let out = tokio::process::Command::new("sh")
            .arg("-c")
            .arg(command)
            .env("KUBECONFIG", demo.kubeconfig_path())
            .env("POM_DEMO_REGISTRY", demo.registry_host())
            .env("PATH", format!("{kubectl_dir}{path}"))
            .output()
            .await
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "README command `{command}` failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        outputs.push((command.clone(), stdout));
    }
    let output_of = |prefix: &str| {
        outputs
            .iter()
            .find(|(c, _)| c.starts_with(prefix))
            .map(|(_, o)| o.clone())
            .unwrap_or_else(|| panic!("no README command starts with {prefix:?}"))
    };
    let status = output_of("pomctl status");
    for po in sample::PACKAGES {
        assert!(status.contains(po), "{status}");
    }
    let plan = output_of("pomctl plan");
    assert!(plan.contains(PRE_UPDATE_PO), "{plan}");
    let listed = output_of("kubectl get pop");
    assert!(
        listed.contains("platform-operators-aggregated") && listed.contains(PRE_UPDATE_PO),
        "{listed}"
    );
    let whoami = output_of("kubectl auth whoami");
    assert!(
        whoami.contains(&format!(
            "system:serviceaccount:{MANAGER_NAMESPACE}:{MANAGER_SERVICE_ACCOUNT}"
        )),
        "{whoami}"
    );
    // The identity the manager runs with is not cluster-admin.
    let can_i = std::process::Command::new(&tools.kubectl)
        .args(["auth", "can-i", "*", "*", "--all-namespaces"])
        .env("KUBECONFIG", demo.manager_kubeconfig_path())
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&can_i.stdout).trim(),
        "no",
        "the manager's kubeconfig may do everything"
    );

    // What the commands changed, as the API server holds it.
    let sources = Api::<ConfigMap>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .get("platform-operators-catalog-sources")
        .await
        .unwrap();
    assert_eq!(
        sources
            .data
            .unwrap_or_default()
            .get("namespaces")
            .map(String::as_str),
        Some("catalogs,team-a")
    );
    // The policy reads its parameter through an informer: asked until it admits, bounded.
    let asked = Instant::now();
    while let Err(err) = team_a_catalog_admitted(&catalogs).await {
        assert!(
            asked.elapsed() < POLICY_WAIT,
            "a Catalog reading team-a still refused {POLICY_WAIT:?} after the README's patch: {err}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let binding = Api::<RoleBinding>::namespaced(client.clone(), "team-a")
        .get("platform-operators-pull-secrets")
        .await
        .unwrap();
    assert_eq!(
        binding.role_ref.name,
        "platform-operators-manager-pull-secret-reader"
    );
    let subject = binding.subjects.unwrap_or_default();
    assert!(
        subject.iter().any(|s| s.kind == "ServiceAccount"
            && s.name == MANAGER_SERVICE_ACCOUNT
            && s.namespace.as_deref() == Some(MANAGER_NAMESPACE)),
        "{subject:?}"
    );
    demo.stop().await;
}
