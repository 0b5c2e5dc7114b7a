#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The admin's hand on when POM writes (issue 23 item 5), against a real control plane with
//! the real `pomctl` binary:
//!
//! - `spec.upgradeApproval: Manual`: the first install waits for the admin's approval (as OLM
//!   v0's Manual InstallPlan); `pomctl approve` approves what the PlatformOperator waits for
//!   and nothing else; during a patch update the hop is held, nothing is written over a window
//!   longer than every resync, the PO says why and how to approve, and the aggregated
//!   ClusterOperator is not Upgradeable, naming the PO and the bundle; once approved, exactly
//!   that bundle is installed and the next hop is held again;
//! - `spec.paused`: a paused PO does not repair its deleted Deployment over a window longer
//!   than every resync, and does once resumed; deleting a paused PO still removes what it
//!   installed.

use std::process::Output;
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, ResourceExt};
use pom_api::PlatformOperator;
use pom_controller::context::Settings;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, condition_of, eventually, po_condition};
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, co_condition, configmap_catalog, create_po, set_cluster, simulated_plane,
    wait_catalog_serves, wait_po_condition, wait_po_gone,
};
use serde_json::{Value, json};

/// A 5 s PlatformOperator resync (catalog poll 5 s too): the quiet windows last 10 s.
fn settings() -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    }
}

fn pos(client: &Client) -> Api<PlatformOperator> {
    Api::all(client.clone())
}

/// Publishes `bundles` as the whole content of ConfigMap catalog `approval` and waits until
/// the running manager serves it (`serve`), or not (before the manager starts).
async fn publish(client: &Client, bundles: &[TestBundle], serve: bool) {
    let fbc = catalog_json(bundles, &[]);
    configmap_catalog(client, "approval", &fbc, 0).await;
    if serve {
        wait_catalog_serves(client, "approval", &fbc).await;
    }
}

async fn pomctl(kubeconfig: &std::path::Path, args: &[&str]) -> Output {
    pom_e2e::pomctl::run(kubeconfig, args).await
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Where the PO stands: what is installed, the last move and whether it settled, the bundle it
/// heads to, the pin, and what the inventory records.
fn standing(po: &PlatformOperator) -> Value {
    let status = po.status.as_ref();
    json!({
        "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()).map(|b| &b.name),
        "activeHop": status.and_then(|s| s.active_hop.as_ref()).map(|h| json!({"from": h.from, "to": h.to, "settled": h.settled})),
        "desiredBundle": status.and_then(|s| s.desired_bundle.as_ref()).map(|b| &b.name),
        "pin": status.and_then(|s| s.pin.as_ref()).map(|p| (&p.range, p.reason.as_str())),
        "inventory": status.map(|s| s.inventory.iter().map(|e| &e.bundle).collect::<Vec<_>>()),
    })
}

/// Waits until PO `name` runs `installed`, its move to it settled, and the move to `waiting`
/// waits for the admin's approval (Progressing=False/UpgradePendingApproval for its current
/// generation); returns that condition's message.
async fn wait_held_for_approval(
    client: &Client,
    name: &str,
    installed: &str,
    waiting: &str,
) -> String {
    eventually(
        WAIT,
        &format!("{name} at {installed}, the move to {waiting} waiting for approval"),
        || async {
            let po = pos(client).get(name).await.ok()?;
            let status = po.status.as_ref()?;
            let at = status.installed_bundle.as_ref()?.name == installed
                && status.active_hop.as_ref()?.settled
                && status.desired_bundle.as_ref()?.name == waiting;
            let (_, reason, message) = po_condition(client, name, "Progressing").await?;
            (at && reason == "UpgradePendingApproval").then_some(message)
        },
    )
    .await
}

/// Waits until PO `name` runs `installed`, settled, with nothing pending.
async fn wait_settled_at(client: &Client, name: &str, installed: &str) {
    eventually(WAIT, &format!("{name} settled at {installed}"), || async {
        let status = pos(client).get(name).await.ok()?.status?;
        (status.installed_bundle?.name == installed
            && status.active_hop?.settled
            && status.desired_bundle.is_none())
        .then_some(())
    })
    .await;
}

async fn image_of(client: &Client, namespace: &str, deployment: &str) -> Option<String> {
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .get_opt(deployment)
        .await
        .ok()??
        .spec?
        .template
        .spec?
        .containers
        .first()?
        .image
        .clone()
}

/// Manual approval, end to end: held first install, `pomctl approve` of exactly what waits,
/// a held hop during a patch update with nothing written, the ClusterOperator not Upgradeable,
/// the approved hop and only it, the next hop held again, an approval by `--bundle`.
#[tokio::test]
async fn manual_approval_holds_each_move_until_pomctl_approves_that_bundle() {
    const PO: &str = "approvalop";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let kubeconfig = plane.kubeconfig_path().to_path_buf();
    let settings = settings();
    let v100 = TestBundle::new(PO, "1.0.0");
    let v101 = TestBundle::new(PO, "1.0.1").replaces("1.0.0");
    let v102 = TestBundle::new(PO, "1.0.2").replaces("1.0.1");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, std::slice::from_ref(&v100), false).await;
    create_po(
        &client,
        PO,
        json!({"package": {"name": PO}, "upgradeApproval": "Manual"}),
    )
    .await;
    let manager = Manager::start(client.clone(), settings.clone());

    // The first install waits (OLM v0's Manual InstallPlan does too): not installed, not a
    // failure, and the message says how to approve it.
    let message = wait_po_condition(
        &client,
        PO,
        "Installed",
        "False",
        Some("UpgradePendingApproval"),
    )
    .await;
    assert!(
        message.contains(&format!("pomctl approve {PO} --bundle {}", v100.name())),
        "{message}"
    );
    let status = pos(&client).get(PO).await.unwrap().status.unwrap();
    assert_eq!(status.desired_bundle.unwrap().name, v100.name());
    assert!(status.installed_bundle.is_none() && status.inventory.is_empty());
    assert!(
        Api::<Deployment>::namespaced(client.clone(), PO)
            .list(&Default::default())
            .await
            .unwrap()
            .items
            .is_empty(),
        "nothing is installed before the approval"
    );
    eventually(
        WAIT,
        "CO Available=True (a held install is no failure)",
        || async {
            co_condition(&client, "Available")
                .await
                .filter(|c| c.0 == "True")
        },
    )
    .await;

    // `pomctl approve` without --bundle: what the PO waits for.
    let out = pomctl(&kubeconfig, &["approve", PO]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("approved {}", v100.name())),
        "{}",
        text(&out)
    );
    let po = pos(&client).get(PO).await.unwrap();
    assert_eq!(
        po.spec.approved_bundle.as_deref(),
        Some(v100.name().as_str())
    );
    assert!(
        po.managed_fields()
            .iter()
            .any(|f| f.manager.as_deref() == Some("pomctl-approve")),
        "written by pomctl's own field manager"
    );
    wait_settled_at(&client, PO, &v100.name()).await;

    // Waiting for nothing: a clear error, exit 1, nothing written.
    let generation = pos(&client).get(PO).await.unwrap().metadata.generation;
    let out = pomctl(&kubeconfig, &["approve", PO]).await;
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains(&format!("PlatformOperator {PO} waits for no approval")),
        "{}",
        text(&out)
    );
    assert_eq!(
        pos(&client).get(PO).await.unwrap().metadata.generation,
        generation
    );

    // A patch update with two newer bundles: the hop to 1.0.1 is chosen and held.
    publish(&client, &[v100.clone(), v101.clone(), v102.clone()], true).await;
    set_cluster(&client, &[("4.16.4", false), ("4.16.3", true)], "4.16.4").await;
    let message = wait_held_for_approval(&client, PO, &v100.name(), &v101.name()).await;
    assert!(
        message.contains(&format!("pomctl approve {PO} --bundle {}", v101.name())),
        "{message}"
    );
    let message = wait_po_condition(
        &client,
        PO,
        "Upgradeable",
        "False",
        Some("UpgradePendingApproval"),
    )
    .await;
    assert!(
        message.contains("until it is approved and has settled"),
        "{message}"
    );

    // Nothing is written over a window longer than every resync: the PO stays where it is (the
    // hop pending, not started), never says Upgradeable=True nor Progressing=True, and the
    // operator's Deployment keeps 1.0.0's pod template.
    QuietWindow::new(&settings)
        .unchanged(pos(&client), PO, "where the PO stands", standing)
        .never(pos(&client), PO, "Upgradeable=True", |po| {
            condition_of(po, "Upgradeable").is_some_and(|(s, _, _)| s == "True")
        })
        .never(pos(&client), PO, "Progressing=True", |po| {
            condition_of(po, "Progressing").is_some_and(|(s, _, _)| s == "True")
        })
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), PO),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
        .open()
        .await
        .hold()
        .await;

    // The cluster admin reads it on the aggregated ClusterOperator: not Upgradeable, for the
    // approval, naming the PO and the bundle.
    let (_, reason, message) = eventually(WAIT, "CO Upgradeable=False", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "UpgradePendingApproval", "{message}");
    assert!(
        message
            .lines()
            .nth(1)
            .unwrap_or_default()
            .starts_with(&format!(
                "- {PO}: the move to {} waits for the admin's approval",
                v101.name()
            )),
        "{message}"
    );

    // `pomctl plan` shows what waits.
    let out = pomctl(&kubeconfig, &["plan", "--to", "4.16.4", "-o", "json"]).await;
    let plan: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("plan is not JSON ({e}): {}", text(&out)));
    let mine = plan["platformOperators"]
        .as_array()
        .and_then(|all| all.iter().find(|p| p["name"] == PO))
        .unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(mine["waitingForApproval"], json!(v101.name()), "{mine}");
    assert_eq!(mine["hops"][0]["needsApproval"], json!(true), "{mine}");

    // Approved: exactly 1.0.1 is installed, and the hop to 1.0.2 waits again.
    let out = pomctl(&kubeconfig, &["approve", PO]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    wait_held_for_approval(&client, PO, &v101.name(), &v102.name()).await;
    let status = pos(&client).get(PO).await.unwrap().status.unwrap();
    let hop = status.active_hop.unwrap();
    assert_eq!(
        (hop.from.as_deref(), hop.to.as_str()),
        (Some(v100.name().as_str()), v101.name().as_str())
    );
    assert_eq!(
        image_of(&client, PO, &v101.deployment_name())
            .await
            .as_deref(),
        Some("example.invalid/approvalop:1.0.1")
    );
    QuietWindow::new(&settings)
        .unchanged(pos(&client), PO, "where the PO stands", standing)
        .unchanged(
            Api::<Deployment>::namespaced(client.clone(), PO),
            Objects::All,
            "the pod template",
            |d| json!(d.spec.as_ref().map(|s| &s.template)),
        )
        .open()
        .await
        .hold()
        .await;

    // `--bundle` names it: the last hop, then the cluster may take its next update.
    let out = pomctl(&kubeconfig, &["approve", PO, "--bundle", &v102.name()]).await;
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    wait_settled_at(&client, PO, &v102.name()).await;
    eventually(WAIT, "CO Upgradeable=True", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "True")
    })
    .await;
    manager.stop().await;
}

/// A paused PO repairs nothing: its deleted Deployment stays deleted over a window longer than
/// every resync, it reports Paused and blocks the cluster's Upgradeable; resumed, the
/// Deployment is back. Deleting a paused PO removes what it installed.
#[tokio::test]
async fn a_paused_po_repairs_nothing_until_resumed() {
    const PO: &str = "pauseop";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let settings = settings();
    let v100 = TestBundle::new(PO, "1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    publish(&client, std::slice::from_ref(&v100), false).await;
    create_po(&client, PO, json!({"package": {"name": PO}})).await;
    let manager = Manager::start(client.clone(), settings.clone());
    wait_settled_at(&client, PO, &v100.name()).await;
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), PO);
    let original = deployments
        .get(&v100.deployment_name())
        .await
        .unwrap()
        .uid()
        .unwrap();

    let pause = |paused: bool| {
        let client = client.clone();
        async move {
            pos(&client)
                .patch(
                    PO,
                    &PatchParams::default(),
                    &Patch::Merge(json!({"spec": {"paused": paused}})),
                )
                .await
                .unwrap();
        }
    };
    pause(true).await;
    let message = wait_po_condition(&client, PO, "Progressing", "False", Some("Paused")).await;
    assert!(
        message.contains(
            r#"kubectl patch platformoperator pauseop --type merge -p '{"spec":{"paused":false}}'"#
        ),
        "{message}"
    );
    wait_po_condition(&client, PO, "Upgradeable", "False", Some("Paused")).await;
    let (_, reason, message) = eventually(WAIT, "CO Upgradeable=False/Paused", || async {
        co_condition(&client, "Upgradeable")
            .await
            .filter(|c| c.0 == "False" && c.1 == "Paused")
    })
    .await;
    assert!(
        message
            .lines()
            .nth(1)
            .is_some_and(|l| l.starts_with("- pauseop: paused (spec.paused)")),
        "{reason}: {message}"
    );

    // The Deployment is deleted by hand; watched from before the delete: no Deployment with
    // another uid appears (POM does not re-create it), and the PO's record does not move.
    let window = QuietWindow::new(&settings)
        .never(
            deployments.clone(),
            Objects::All,
            "re-created (a Deployment with a new uid)",
            move |d| d.uid().as_deref() != Some(original.as_str()),
        )
        .unchanged(pos(&client), PO, "where the PO stands", standing)
        .open()
        .await;
    deployments
        .delete(&v100.deployment_name(), &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "the Deployment gone", || async {
        deployments
            .get_opt(&v100.deployment_name())
            .await
            .ok()?
            .is_none()
            .then_some(())
    })
    .await;
    window.hold().await;
    assert!(
        deployments
            .get_opt(&v100.deployment_name())
            .await
            .unwrap()
            .is_none()
    );

    // Resumed: drift repair puts it back, and the PO is upgradeable again.
    pause(false).await;
    eventually(WAIT, "the Deployment re-created", || async {
        deployments.get_opt(&v100.deployment_name()).await.ok()?
    })
    .await;
    wait_po_condition(&client, PO, "Upgradeable", "True", Some("AsExpected")).await;

    // Deleting a paused PO still removes what it installed (the finalizer is not held).
    pause(true).await;
    wait_po_condition(&client, PO, "Progressing", "False", Some("Paused")).await;
    pos(&client)
        .delete(PO, &DeleteParams::default())
        .await
        .unwrap();
    wait_po_gone(&client, PO, WAIT).await;
    assert!(
        deployments
            .get_opt(&v100.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "cleanup removed the operator's Deployment"
    );
    manager.stop().await;
}
