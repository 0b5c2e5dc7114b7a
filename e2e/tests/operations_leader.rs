#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Leader election and shutdown of the manager as a process (PRODUCT §10, seed 003):
//! - two replicas: SIGKILL the leader in the middle of an install, the other takes the Lease and
//!   finishes it; the take-over time is measured and printed;
//! - SIGTERM while a reconcile is in flight: the reconcile finishes, the process exits 0 and the
//!   Lease is released; a reconcile that cannot finish is cut at `--shutdown-timeout`.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{eventually, po_condition};
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::json;

const NAMESPACE: &str = "openshift-platform-operators";
const LEASE: &str = "platform-operators-manager";
const WAIT: Duration = Duration::from_secs(120);

async fn plane(workloads: Workloads) -> Option<ControlPlane> {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    if workloads == Workloads::Simulated {
        needed.extend_from_slice(binaries::WORKLOADS);
    }
    binaries::require(&needed)?;
    Some(ControlPlane::start(workloads).await.unwrap())
}

async fn create_namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    let _ = Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await;
}

async fn configmap_catalog(client: &Client, name: &str, fbc: &str) {
    create_namespace(client, "catalogs").await;
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"catalog.json": fbc}}))
            .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .patch(
            name,
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(&cm),
        )
        .await
        .unwrap();
    pom_e2e::scenario::trust_catalog_namespace(client, "catalogs").await;
    let catalog: Catalog = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": name},
        "spec": {"source": {"configMap": {"name": name, "namespace": "catalogs"}}}
    }))
    .unwrap();
    Api::<Catalog>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(&catalog),
        )
        .await
        .unwrap();
}

async fn create_po(client: &Client, name: &str) {
    let po: PlatformOperator = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": name},
        "spec": {"package": {"name": name}}
    }))
    .unwrap();
    Api::<PlatformOperator>::all(client.clone())
        .create(&PostParams::default(), &po)
        .await
        .unwrap();
}

async fn holder(client: &Client) -> Option<String> {
    Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get_opt(LEASE)
        .await
        .ok()??
        .spec?
        .holder_identity
}

async fn start_manager(plane: &ControlPlane, name: &str, extra: &[&str]) -> ManagerProcess {
    let mut args = vec![
        "--leader-elect".to_owned(),
        format!("--health-bind-address={}", free_address().unwrap()),
    ];
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        name,
        plane.kubeconfig_path(),
        &args,
        &[
            ("POD_NAMESPACE", NAMESPACE),
            ("RELEASE_VERSION", "4.99.0-pom-test"),
        ],
        plane.dir(),
    )
    .await
    .unwrap()
}

/// Keeps pods from scheduling, so an install stays in the middle (Deployment applied, not
/// rolled out) for as long as the test wants.
async fn hold_scheduling(client: &Client, hold: bool) {
    let taints = if hold {
        json!([{"key": "pom-e2e/hold", "effect": "NoSchedule"}])
    } else {
        json!(null)
    };
    Api::<Node>::all(client.clone())
        .patch(
            "kwok-node-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": taints}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn standby_takes_over_an_install_when_the_leader_is_killed() {
    let Some(plane) = plane(Workloads::Simulated).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    create_namespace(&client, NAMESPACE).await;
    let bundle = TestBundle::new("alpha", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
    )
    .await;
    hold_scheduling(&client, true).await;

    let mut first = start_manager(&plane, "manager-a", &[]).await;
    let leader_name = eventually(WAIT, "a leader", || async { holder(&client).await }).await;
    assert_eq!(leader_name, "manager-a", "{}", first.log_tail(20));
    let mut second = start_manager(&plane, "manager-b", &[]).await;
    // The standby stays a standby: it must not reconcile anything.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(holder(&client).await.as_deref(), Some("manager-a"));

    create_po(&client, "alpha").await;
    // The intent (`Installing`: "applying …") is written before the objects; once they are
    // applied the status says the rollout is what it waits for (`Installing` right after the
    // apply, `WaitingForRollout` on the reconciles after).
    let (_, reason, message) = eventually(WAIT, "the install to wait for its rollout", || async {
        po_condition(&client, "alpha", "Progressing")
            .await
            .filter(|(s, _, m)| {
                s == "True" && m.contains("Deployment alpha/alpha-controller to roll out")
            })
    })
    .await;
    assert!(
        matches!(reason.as_str(), "Installing" | "WaitingForRollout"),
        "{reason}: {message}"
    );
    assert_ne!(
        po_condition(&client, "alpha", "Installed").await.unwrap().0,
        "True"
    );

    first.signal("KILL");
    let killed = Instant::now();
    assert_eq!(first.wait_exit(Duration::from_secs(10)).await, Some(137));
    hold_scheduling(&client, false).await;
    eventually(
        Duration::from_secs(40),
        "manager-b to take the Lease",
        || async { (holder(&client).await.as_deref() == Some("manager-b")).then_some(()) },
    )
    .await;
    let takeover = killed.elapsed();
    let (_, reason, message) = eventually(WAIT, "manager-b to finish the install", || async {
        po_condition(&client, "alpha", "Installed")
            .await
            .filter(|(s, _, _)| s == "True")
    })
    .await;
    let finished = killed.elapsed();
    println!(
        "leader take-over after SIGKILL: {:.1}s (lease 15s, grace 5s); install finished {:.1}s after the kill",
        takeover.as_secs_f64(),
        finished.as_secs_f64()
    );
    assert_eq!(reason, "InstallSucceeded", "{message}");
    // An unreleased 15 s lease renewed every 10 s expires 5-15 s after the kill; the standby
    // checks every 2 s and waits up to 1 s more before taking it.
    assert!(
        takeover < Duration::from_secs(20),
        "take-over took {takeover:?}\n{}",
        second.log_tail(30)
    );
    assert!(second.is_running());
    second.signal("TERM");
    assert_eq!(
        second.wait_exit(Duration::from_secs(30)).await,
        Some(0),
        "{}",
        second.log_tail(30)
    );
    assert_eq!(
        holder(&client).await,
        None,
        "the Lease must be released on SIGTERM"
    );
}

/// A registry that accepts connections and never answers: a bundle pull from it keeps a
/// reconcile in flight until the test lets go.
struct StuckRegistry {
    address: std::net::SocketAddr,
    connected: tokio::sync::watch::Receiver<bool>,
    release: tokio_util::sync::CancellationToken,
}

impl StuckRegistry {
    async fn start() -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let (tx, connected) = tokio::sync::watch::channel(false);
        let release = tokio_util::sync::CancellationToken::new();
        let stop = release.clone();
        tokio::spawn(async move {
            let mut held = Vec::new();
            loop {
                tokio::select! {
                    () = stop.cancelled() => break,
                    accepted = listener.accept() => {
                        if let Ok((socket, _)) = accepted {
                            held.push(socket);
                            let _ = tx.send(true);
                        }
                    }
                }
            }
            // Dropping the sockets and the listener: the pull fails at once, and so does any retry.
            drop(held);
        });
        Self {
            address,
            connected,
            release,
        }
    }
}

#[tokio::test]
async fn sigterm_lets_the_in_flight_reconcile_finish_then_releases_the_lease() {
    let Some(plane) = plane(Workloads::None).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    create_namespace(&client, NAMESPACE).await;
    let registry = StuckRegistry::start().await;
    let bundle = TestBundle::new("beta", "1.0.0");
    let image = format!(
        "{}/pom-e2e/beta-bundle@sha256:{}",
        registry.address,
        "0".repeat(64)
    );
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[(bundle.name(), image)]),
    )
    .await;
    let insecure = format!("--insecure-registries={}", registry.address);
    let mut manager = start_manager(
        &plane,
        "manager-term",
        &[&insecure, "--shutdown-timeout=20s"],
    )
    .await;
    eventually(WAIT, "the Lease", || async {
        (holder(&client).await.as_deref() == Some("manager-term")).then_some(())
    })
    .await;

    create_po(&client, "beta").await;
    let mut connected = registry.connected.clone();
    tokio::time::timeout(WAIT, connected.wait_for(|c| *c))
        .await
        .expect("the bundle pull never reached the registry")
        .unwrap();
    assert!(
        po_condition(&client, "beta", "Installed").await.is_none(),
        "the reconcile must still be in flight"
    );

    manager.signal("TERM");
    let term = Instant::now();
    // The reconcile is stuck in the pull: the process must wait for it, not exit.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        manager.is_running(),
        "exited without waiting for the in-flight reconcile\n{}",
        manager.log_tail(30)
    );
    registry.release.cancel();
    let code = manager.wait_exit(Duration::from_secs(30)).await;
    let exited = term.elapsed();
    println!(
        "SIGTERM to exit with one reconcile in flight: {:.2}s (the reconcile was held 1.5s)",
        exited.as_secs_f64()
    );
    assert_eq!(code, Some(0), "{}", manager.log_tail(30));
    assert!(exited < Duration::from_secs(10), "took {exited:?}");
    // The in-flight reconcile finished after SIGTERM: it reported the failed pull.
    let (status, reason, message) = po_condition(&client, "beta", "Installed")
        .await
        .expect("the in-flight reconcile did not write its status");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "UnpackFailed"),
        "{message}"
    );
    assert_eq!(holder(&client).await, None, "the Lease must be released");

    // A reconcile that cannot finish is cut at --shutdown-timeout, and the exit is still clean.
    let stuck = StuckRegistry::start().await;
    let image = format!(
        "{}/pom-e2e/beta-bundle@sha256:{}",
        stuck.address,
        "1".repeat(64)
    );
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[(bundle.name(), image)]),
    )
    .await;
    let insecure = format!("--insecure-registries={}", stuck.address);
    let mut manager = start_manager(
        &plane,
        "manager-term-2",
        &[&insecure, "--shutdown-timeout=3s"],
    )
    .await;
    let mut connected = stuck.connected.clone();
    tokio::time::timeout(WAIT, connected.wait_for(|c| *c))
        .await
        .expect("the bundle pull never reached the registry")
        .unwrap();
    manager.signal("TERM");
    let term = Instant::now();
    let code = manager.wait_exit(Duration::from_secs(30)).await;
    let exited = term.elapsed();
    println!(
        "SIGTERM to exit with a reconcile that never finishes (--shutdown-timeout=3s): {:.2}s",
        exited.as_secs_f64()
    );
    assert_eq!(code, Some(0), "{}", manager.log_tail(30));
    assert!(
        exited >= Duration::from_secs(3) && exited < Duration::from_secs(8),
        "took {exited:?}"
    );
    assert_eq!(holder(&client).await, None, "the Lease must be released");
}
