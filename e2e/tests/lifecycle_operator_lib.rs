#![allow(clippy::unwrap_used, clippy::expect_used)]
//! operator-lib, unchanged (issue 11 item 1): the seed chain 7.9.3 → 7.10.0 → 7.10.1 (seed 001,
//! operator-lifecycle-manager #2618) with a real operator playing the operator. It is a Go
//! program on operator-lib v0.19.0 (`e2e/tools/oplib-operator`, built from the Go module proxy
//! by `make e2e-binaries`) that uses the OperatorCondition API exactly as operator authors do:
//! `conditions.InClusterFactory`, the `OPERATOR_CONDITION_NAME` POM sets in its Deployment,
//! the namespace from the ServiceAccount folder, `Set(Upgradeable, False, Migrating)` while it
//! migrates and `True` when done.
//!
//! It runs as a process, as its pod would: with the in-cluster credentials of the
//! ServiceAccount its Deployment names (a TokenRequest token, the API server's CA and the
//! namespace in `/var/run/secrets/kubernetes.io/serviceaccount`, `KUBERNETES_SERVICE_HOST` and
//! `_PORT`), so what it may write is what POM's RBAC grants that ServiceAccount. The folder is
//! a tmpfs in a private mount namespace (`unshare -m`, root only), so the host is not touched.
//!
//! The chain must be held at 7.10.0, over a window longer than every resync, while the program
//! says False, and move to 7.10.1 once it says True.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, PostParams};
use pom_api::PlatformOperator;
use pom_api::olm::OperatorCondition;
use pom_controller::context::Settings;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::process::Process;
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, configmap_catalog, create_po, set_cluster, simulated_plane, wait_catalog_serves,
};
use pom_e2e::{ControlPlane, binaries, skip};
use serde_json::{Value, json};

const PKG: &str = "seedop";

/// Where in-cluster clients (client-go's `rest.InClusterConfig`, operator-lib's namespace
/// lookup) read their ServiceAccount's token, CA and namespace.
const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// Run by `unshare -m --propagation private`: in the new mount namespace, a tmpfs goes over
/// the deepest existing directory on the way to the ServiceAccount folder (the folder itself
/// in a pod; `/run` on a host where `/var/run/secrets` does not exist), the folder is created
/// in it and filled from `$1`, and the operator (`$2...`) replaces the shell. Nothing outside
/// the namespace sees the mount.
const IN_POD_FOLDER: &str = r#"set -eu
src=$1; shift
target=$(realpath -m "$SERVICE_ACCOUNT_DIR")
base=$target
while [ ! -d "$base" ]; do base=$(dirname "$base"); done
[ "$base" != / ] || { echo "no directory to mount a tmpfs on for $target" >&2; exit 1; }
mount -t tmpfs -o mode=0755,size=1m pom-serviceaccount "$base"
mkdir -p "$target"
cp "$src/token" "$src/ca.crt" "$src/namespace" "$target/"
exec "$@""#;

fn chain() -> Vec<TestBundle> {
    vec![
        TestBundle::new(PKG, "7.9.3"),
        TestBundle::new(PKG, "7.10.0").replaces("7.9.3"),
        TestBundle::new(PKG, "7.10.1").replaces("7.10.0"),
    ]
}

/// A 5 s resync, so that the quiet window (which outlasts every resync) stays short.
fn settings() -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    }
}

/// Whether this process may make a private mount namespace and mount in it (root, and a
/// kernel and container runtime that allow it).
fn private_mounts_work() -> bool {
    std::process::Command::new("unshare")
        .args(["-m", "--propagation", "private", "sh", "-c"])
        .arg("mount -t tmpfs pom-probe /mnt && umount /mnt")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The operator's "pod": the process, its folder (credentials, log) and the file that tells it
/// its migration is done.
struct Operator {
    process: Process,
    done: PathBuf,
    _dir: tempfile::TempDir,
}

impl Operator {
    /// Starts the operator of the installed bundle as its Deployment `deployment` describes it:
    /// the ServiceAccount the pod template names and the `OPERATOR_CONDITION_NAME` POM set in
    /// its container, which must be `csv`. With `migrated`, the migration is already done
    /// (the program says False, then True at once).
    async fn start(
        plane: &ControlPlane,
        client: &Client,
        bin: &Path,
        deployment: &str,
        csv: &str,
        migrated: bool,
    ) -> Self {
        let deployments: Api<Deployment> = Api::namespaced(client.clone(), PKG);
        // The Deployment POM rendered for this bundle (its env names the CSV).
        let pod = eventually(
            WAIT,
            &format!("Deployment {PKG}/{deployment} with OPERATOR_CONDITION_NAME={csv}"),
            || async {
                let pod = deployments
                    .get(deployment)
                    .await
                    .ok()?
                    .spec?
                    .template
                    .spec?;
                let env = pod.containers.first()?.env.clone()?;
                env.iter()
                    .any(|e| e.name == "OPERATOR_CONDITION_NAME" && e.value.as_deref() == Some(csv))
                    .then_some(pod)
            },
        )
        .await;
        let account = pod.service_account_name.expect("the pod's ServiceAccount");
        let token = Api::<ServiceAccount>::namespaced(client.clone(), PKG)
            .create_token_request(
                &account,
                &PostParams::default(),
                &TokenRequest {
                    spec: TokenRequestSpec {
                        expiration_seconds: Some(3600),
                        ..TokenRequestSpec::default()
                    },
                    ..TokenRequest::default()
                },
            )
            .await
            .unwrap()
            .status
            .expect("TokenRequest status")
            .token;
        let dir = tempfile::Builder::new()
            .prefix("pom-oplib-")
            .tempdir()
            .unwrap();
        std::fs::write(dir.path().join("token"), token).unwrap();
        std::fs::copy(
            plane.dir().join("serving-ca.crt"),
            dir.path().join("ca.crt"),
        )
        .unwrap();
        std::fs::write(dir.path().join("namespace"), PKG).unwrap();
        let done = dir.path().join("migration-done");
        if migrated {
            std::fs::write(&done, "").unwrap();
        }
        let port = plane
            .url()
            .rsplit(':')
            .next()
            .expect("the API server port")
            .to_owned();
        let args: Vec<String> = [
            "-u".to_owned(),
            "KUBECONFIG".to_owned(),
            "KUBERNETES_SERVICE_HOST=127.0.0.1".to_owned(),
            format!("KUBERNETES_SERVICE_PORT={port}"),
            format!("OPERATOR_CONDITION_NAME={csv}"),
            format!("SERVICE_ACCOUNT_DIR={SERVICE_ACCOUNT_DIR}"),
            "unshare".to_owned(),
            "-m".to_owned(),
            "--propagation".to_owned(),
            "private".to_owned(),
            "sh".to_owned(),
            "-c".to_owned(),
            IN_POD_FOLDER.to_owned(),
            "in-pod-folder".to_owned(),
            dir.path().display().to_string(),
            bin.join("oplib-operator").display().to_string(),
            done.display().to_string(),
        ]
        .into();
        let process = Process::spawn(
            &format!("oplib-operator-{csv}"),
            Path::new("env"),
            &args,
            dir.path(),
        )
        .unwrap();
        Self {
            process,
            done,
            _dir: dir,
        }
    }

    /// Tells the program its migration is done.
    fn finish_migration(&self) {
        std::fs::write(&self.done, "").unwrap();
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.process.log).unwrap_or_default()
    }

    /// Waits until the program's log has `line`; fails early, with the log, when it exits.
    async fn wait_logged(&mut self, line: &str) {
        let started = std::time::Instant::now();
        loop {
            let log = self.log();
            if log.lines().any(|l| l == line) {
                return;
            }
            assert!(
                !self.process.has_exited(),
                "the operator exited before logging {line:?}:\n{log}"
            );
            assert!(
                started.elapsed() < WAIT,
                "timed out waiting for the operator to log {line:?}:\n{log}"
            );
            tokio::time::sleep(Duration::from_millis(250)).await;
        }
    }
}

/// What the operator wrote and POM copied: `(spec reason, status status, status reason,
/// whether the status copy is for the current generation)` of `Upgradeable` on
/// OperatorCondition `csv`.
async fn upgradeable_of(client: &Client, csv: &str) -> Option<(String, String, String, bool)> {
    let oc = Api::<OperatorCondition>::namespaced(client.clone(), PKG)
        .get_opt(csv)
        .await
        .ok()??;
    let find = |conditions: &[k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition]| {
        conditions
            .iter()
            .find(|c| c.type_ == "Upgradeable")
            .cloned()
    };
    let spec = find(&oc.spec.conditions)?;
    let status = find(&oc.status?.conditions)?;
    Some((
        spec.reason,
        status.status,
        status.reason,
        status.observed_generation == oc.metadata.generation,
    ))
}

/// Waits until POM copied the operator's `Upgradeable=<status>/<reason>` to the status of
/// OperatorCondition `csv` for its current generation.
async fn wait_reported(client: &Client, csv: &str, status: &str, reason: &str) {
    let want = (
        reason.to_owned(),
        status.to_owned(),
        reason.to_owned(),
        true,
    );
    eventually(
        WAIT,
        &format!("OperatorCondition {PKG}/{csv} Upgradeable={status}/{reason}, copied"),
        || async { (upgradeable_of(client, csv).await? == want).then_some(()) },
    )
    .await;
}

/// (installed bundle, its move settled) of the PO.
async fn position_of(client: &Client) -> Option<(String, bool)> {
    let status = Api::<PlatformOperator>::all(client.clone())
        .get(PKG)
        .await
        .ok()?
        .status?;
    Some((status.installed_bundle?.name, status.active_hop?.settled))
}

async fn wait_installed(client: &Client, bundle: &str) {
    eventually(WAIT, &format!("{PKG} at {bundle}"), || async {
        (position_of(client).await?.0 == bundle).then_some(())
    })
    .await;
}

fn position(po: &PlatformOperator) -> Value {
    let status = po.status.as_ref();
    let hop = status.and_then(|s| s.active_hop.as_ref());
    json!({
        "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.name),
        "activeHop": hop.map(|h| json!({"from": h.from, "to": h.to, "settled": h.settled})),
    })
}

#[tokio::test]
async fn operator_lib_operator_holds_the_seed_chain_at_7_10_0_until_it_says_true() {
    let Some(bin) = binaries::require_oplib_operator() else {
        return;
    };
    if !private_mounts_work() {
        skip::skip(
            "`unshare -m` with a tmpfs mount is not allowed here (needs root): the operator \
             cannot get its ServiceAccount folder",
        );
        return;
    }
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let bundles = chain();
    let deployment = bundles[0].deployment_name();

    // 7.9.3 on a steady 4.16 cluster; its operator finished migrating long ago: it says False,
    // then True, and the first move settles on its word.
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(&client, "seed", &catalog_json(&bundles[..1], &[]), 0).await;
    create_po(
        &client,
        PKG,
        json!({"package": {"name": PKG}, "upgradeGate": "OperatorCondition"}),
    )
    .await;
    let manager = Manager::start(client.clone(), settings.clone());
    wait_installed(&client, "seedop.v7.9.3").await;
    let mut old = Operator::start(&plane, &client, &bin, &deployment, "seedop.v7.9.3", true).await;
    // The API server takes the program for the Deployment's ServiceAccount, not the admin.
    old.wait_logged("operator: running as system:serviceaccount:seedop:seedop")
        .await;
    old.wait_logged("operator: Upgradeable=True (MigrationDone)")
        .await;
    wait_reported(&client, "seedop.v7.9.3", "True", "MigrationDone").await;
    eventually(WAIT, "7.9.3 settled", || async {
        (position_of(&client).await? == ("seedop.v7.9.3".to_owned(), true)).then_some(())
    })
    .await;

    // The catalog gains 7.10.0 and 7.10.1, the cluster starts a minor update: POM installs
    // 7.10.0, whose pod replaces the old one. Its operator starts migrating and says so.
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "seed", &fbc, 0).await;
    wait_catalog_serves(&client, "seed", &fbc).await;
    set_cluster(&client, &[("4.17.0", false), ("4.16.3", true)], "4.17.0").await;
    wait_installed(&client, "seedop.v7.10.0").await;
    old.process.stop();
    let mut new =
        Operator::start(&plane, &client, &bin, &deployment, "seedop.v7.10.0", false).await;
    new.wait_logged("operator: Upgradeable=False (Migrating)")
        .await;
    wait_reported(&client, "seedop.v7.10.0", "False", "Migrating").await;

    // While it says False, over a window longer than every resync: 7.10.0 stays installed
    // with its move unsettled, the PO never says Upgradeable=True, and no Deployment gets
    // another pod template (7.10.1's image).
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    assert_eq!(
        position(&pos.get(PKG).await.unwrap()),
        json!({"installedBundle": "seedop.v7.10.0",
               "activeHop": {"from": "seedop.v7.9.3", "to": "seedop.v7.10.0", "settled": false}})
    );
    QuietWindow::new(&settings)
        .unchanged(
            pos.clone(),
            PKG,
            "the installed bundle and its move (held at 7.10.0 while the operator says False)",
            position,
        )
        .never(pos.clone(), PKG, "Upgradeable=True", |po| {
            condition_of(po, "Upgradeable").is_some_and(|(status, _, _)| status == "True")
        })
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), PKG),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
        .open()
        .await
        .hold()
        .await;
    let status = pos.get(PKG).await.unwrap().status.unwrap();
    assert_eq!(status.desired_bundle.unwrap().name, "seedop.v7.10.1");
    let (progressing, reason, message) = po_condition(&client, PKG, "Progressing").await.unwrap();
    assert_eq!(
        (progressing.as_str(), reason.as_str()),
        ("True", "WaitingForOperatorCondition"),
        "{message}"
    );
    // The program is still running and still says False: the hold was its word, not a crash.
    assert!(!new.process.has_exited(), "{}", new.log());
    assert_eq!(
        upgradeable_of(&client, "seedop.v7.10.0").await,
        Some((
            "Migrating".to_owned(),
            "False".to_owned(),
            "Migrating".to_owned(),
            true
        ))
    );

    // The migration is done, the program says True: only now does 7.10.1 start.
    new.finish_migration();
    new.wait_logged("operator: Upgradeable=True (MigrationDone)")
        .await;
    wait_installed(&client, "seedop.v7.10.1").await;
    drop(new);
    manager.stop().await;
}

/// Issue 25 item 9, seed 001 exactly: the operator *added* `Upgradeable` reporting in 7.10.0,
/// and the PO keeps the default `upgradeGate: Auto`. 7.9.3 never reported (no program runs for
/// it), so without a first-report window 7.10.0 would settle the moment its Deployment rolled
/// out and 7.10.1 would follow before 7.10.0's operator ever reconciled. The program starts a
/// few seconds after the rollout (as a pod waits for its leader lease), says False while it
/// migrates, and POM holds 7.10.0, past the window's end, until it says True.
#[tokio::test]
async fn under_auto_the_version_that_starts_reporting_is_heard_before_the_next_hop() {
    let Some(bin) = binaries::require_oplib_operator() else {
        return;
    };
    if !private_mounts_work() {
        skip::skip(
            "`unshare -m` with a tmpfs mount is not allowed here (needs root): the operator \
             cannot get its ServiceAccount folder",
        );
        return;
    }
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = Settings {
        auto_settle_window: Duration::from_secs(20),
        ..settings()
    };
    let bundles = chain();
    let deployment = bundles[0].deployment_name();

    // 7.9.3, whose operator never reports, settles once its window passed.
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(&client, "seed", &catalog_json(&bundles[..1], &[]), 0).await;
    create_po(&client, PKG, json!({"package": {"name": PKG}})).await;
    let manager = Manager::start(client.clone(), settings.clone());
    eventually(
        WAIT + settings.auto_settle_window,
        "7.9.3 settled",
        || async {
            (position_of(&client).await? == ("seedop.v7.9.3".to_owned(), true)).then_some(())
        },
    )
    .await;
    assert_eq!(
        upgradeable_of(&client, "seedop.v7.9.3").await,
        None,
        "7.9.3's operator never reported"
    );

    // 7.10.0 and 7.10.1 appear with a minor update: POM installs 7.10.0. Its operator starts
    // 3 s after the rollout and says False.
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "seed", &fbc, 0).await;
    wait_catalog_serves(&client, "seed", &fbc).await;
    set_cluster(&client, &[("4.17.0", false), ("4.16.3", true)], "4.17.0").await;
    wait_installed(&client, "seedop.v7.10.0").await;
    let rolled_out = eventually(WAIT, "7.10.0's rollout recorded", || async {
        let pos: Api<PlatformOperator> = Api::all(client.clone());
        pos.get(PKG).await.ok()?.status?.active_hop?.rolled_out_at
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let mut new =
        Operator::start(&plane, &client, &bin, &deployment, "seedop.v7.10.0", false).await;
    new.wait_logged("operator: Upgradeable=False (Migrating)")
        .await;
    wait_reported(&client, "seedop.v7.10.0", "False", "Migrating").await;

    // Held at 7.10.0 over a window longer than the first-report window and every resync.
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    assert_eq!(
        position(&pos.get(PKG).await.unwrap()),
        json!({"installedBundle": "seedop.v7.10.0",
               "activeHop": {"from": "seedop.v7.9.3", "to": "seedop.v7.10.0", "settled": false}})
    );
    QuietWindow::new(&settings)
        .unchanged(
            pos.clone(),
            PKG,
            "the installed bundle and its move (held at 7.10.0 while the operator says False)",
            position,
        )
        .never(pos.clone(), PKG, "Upgradeable=True", |po| {
            condition_of(po, "Upgradeable").is_some_and(|(status, _, _)| status == "True")
        })
        .open()
        .await
        .hold()
        .await;
    let held_since_rollout = k8s_openapi::jiff::Timestamp::now().duration_since(rolled_out.0);
    assert!(
        held_since_rollout.as_secs() > 20,
        "the hold outlasted the first-report window ({held_since_rollout:?} since the rollout)"
    );

    // The migration is done: 7.10.1 follows.
    new.finish_migration();
    new.wait_logged("operator: Upgradeable=True (MigrationDone)")
        .await;
    wait_installed(&client, "seedop.v7.10.1").await;
    drop(new);
    manager.stop().await;
}
