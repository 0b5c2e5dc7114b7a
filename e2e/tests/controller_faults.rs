#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Bad input and faults: each leaves what ran before untouched and says why in a condition;
//! the aggregated ClusterOperator follows (§8.2). Also installs from an image catalog.

use pom_e2e::scenario::{
    apply_catalog, co_condition, configmap_catalog, create_po, deployment_image, simulated_plane,
    wait_catalog_serves, wait_po_condition,
};
use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, Patch, PatchParams};
use pom_api::{Catalog, PlatformOperator};
use pom_controller::context::Settings;
use pom_e2e::Registry;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually, po_condition};
use pom_e2e::oci_publish::{push_catalog, push_files};
use pom_e2e::quiet::{Objects, QuietWindow};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

#[tokio::test]
async fn image_catalog_installs_and_registry_outage_keeps_the_running_version() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let mut registry = Registry::start().await.unwrap();
    let host = registry.host();
    let v1 = TestBundle::new("gamma", "1.0.0");
    let v1_image = push_files(&host, "bundles/gamma", "1.0.0", &v1.image_files())
        .await
        .unwrap();
    let catalog_image = push_catalog(
        &host,
        "catalogs/main",
        "latest",
        &catalog_json(std::slice::from_ref(&v1), &[(v1.name(), v1_image.clone())]),
    )
    .await
    .unwrap();
    apply_catalog(&client, "main", json!({"image": {"ref": catalog_image}}), 0).await;
    create_po(&client, "gamma", json!({"package": {"name": "gamma"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![host.clone()]));
    wait_po_condition(
        &client,
        "gamma",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let po = Api::<PlatformOperator>::all(client.clone())
        .get("gamma")
        .await
        .unwrap();
    assert_eq!(
        po.status
            .unwrap()
            .installed_bundle
            .unwrap()
            .image
            .as_deref(),
        Some(v1_image.as_str())
    );
    let before = deployment_image(&client, "gamma", &v1.deployment_name()).await;

    // An upgrade to 1.1.0 whose image lives in a registry that is down: the pull fails, 1.0.0
    // keeps running, and the PO says why.
    registry.stop();
    let v2 = TestBundle::new("gamma", "1.1.0").replaces("1.0.0");
    let fbc = catalog_json(
        &[v1.clone(), v2.clone()],
        &[
            (v1.name(), v1_image.clone()),
            (
                v2.name(),
                format!("{host}/bundles/gamma@sha256:{}", "0".repeat(64)),
            ),
        ],
    );
    configmap_catalog(&client, "fallback", &fbc, 0).await;
    Api::<PlatformOperator>::all(client.clone())
        .patch("gamma", &PatchParams::default(), &Patch::Merge(json!({"spec": {"package": {"catalog": "fallback"}, "steadyStateVersionRange": ">=1.0.0"}})))
        .await
        .unwrap();
    let message =
        wait_po_condition(&client, "gamma", "Degraded", "True", Some("UnpackFailed")).await;
    assert!(message.contains("gamma"), "{message}");
    let (installed, reason, _) = po_condition(&client, "gamma", "Installed").await.unwrap();
    assert_eq!(
        (installed.as_str(), reason.as_str()),
        ("True", "InstallSucceeded")
    );
    assert_eq!(
        deployment_image(&client, "gamma", &v1.deployment_name()).await,
        before,
        "the running operator must be untouched"
    );
    let (degraded, _, co_message) =
        eventually(WAIT, "the ClusterOperator to be Degraded", || async {
            co_condition(&client, "Degraded")
                .await
                .filter(|c| c.0 == "True")
        })
        .await;
    assert_eq!(degraded, "True");
    assert!(co_message.starts_with("gamma: "), "{co_message}");
    assert_eq!(
        co_condition(&client, "Available").await.unwrap().0,
        "True",
        "a degraded upgrade is not unavailability"
    );
    manager.stop().await;
}

#[tokio::test]
async fn refusals_say_why_and_keep_what_runs() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let good = TestBundle::new("delta", "1.0.0");
    let mut multi_namespace_only = TestBundle::new("epsilon", "1.0.0");
    multi_namespace_only.install_modes = vec!["MultiNamespace"];
    let mut squatter = TestBundle::new("zeta", "1.0.0");
    squatter.crd_group = Some("delta.example.com".into());
    let mut unsafe_next = TestBundle::new("delta", "1.1.0").replaces("1.0.0");
    unsafe_next.crd_size_type = "string";
    let others = [multi_namespace_only, squatter];
    let mut first = vec![good.clone()];
    first.extend(others.iter().cloned());
    configmap_catalog(&client, "local", &catalog_json(&first, &[]), 0).await;

    create_po(&client, "delta", json!({"package": {"name": "delta"}})).await;
    // A short resync keeps the quiet window below (which must outlast every resync) short.
    let settings = Settings {
        resync_interval: Duration::from_secs(5),
        ..Manager::test_settings(vec![])
    };
    let manager = Manager::start(client.clone(), settings.clone());
    wait_po_condition(
        &client,
        "delta",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;

    // Unknown package: nothing installed, the message names the package.
    create_po(
        &client,
        "nosuch",
        json!({"package": {"name": "no-such-package"}}),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "nosuch",
        "Installed",
        "False",
        Some("ResolutionFailed"),
    )
    .await;
    assert!(message.contains("no-such-package"), "{message}");

    // Neither AllNamespaces nor OwnNamespace (the default without spec.watchNamespace) nor
    // SingleNamespace: MultiNamespace only, which POM does not install.
    create_po(&client, "epsilon", json!({"package": {"name": "epsilon"}})).await;
    let message = wait_po_condition(
        &client,
        "epsilon",
        "Installed",
        "False",
        Some("InstallModeUnsupported"),
    )
    .await;
    assert!(
        message.contains("AllNamespaces or OwnNamespace")
            && message.contains("supported: MultiNamespace"),
        "{message}"
    );

    // A bundle whose CRD is already installed by another PO.
    create_po(&client, "zeta", json!({"package": {"name": "zeta"}})).await;
    let message = wait_po_condition(
        &client,
        "zeta",
        "Installed",
        "False",
        Some("OwnershipConflict"),
    )
    .await;
    assert!(message.contains("delta"), "{message}");

    // Duplicate package: the newer PO is refused, the older keeps running.
    create_po(
        &client,
        "delta-again",
        json!({"package": {"name": "delta"}}),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "delta-again",
        "Installed",
        "False",
        Some("DuplicatePackage"),
    )
    .await;
    assert!(message.contains("delta"), "{message}");

    // Unsafe CRD change on upgrade: the catalog gains 1.1.0 (steady state: nothing moves), the
    // admin moves by hand, POM refuses and 1.0.0 keeps running.
    let before = deployment_image(&client, "delta", &good.deployment_name()).await;
    // Steady state must not move when the catalog gains bundles: watched from before the
    // catalog changes until a window longer than every resync has passed since the manager
    // serves the new content. The PO keeps its installed bundle, no move starts, and POM does
    // not touch delta's Deployment.
    let window = QuietWindow::new(&settings)
        .unchanged(
            Api::<PlatformOperator>::all(client.clone()),
            "delta",
            "the installed bundle, the move and the pin",
            |po| {
                let status = po.status.as_ref();
                json!({
                    "installedBundle": status.and_then(|s| s.installed_bundle.as_ref()),
                    "desiredBundle": status.and_then(|s| s.desired_bundle.as_ref()),
                    "activeHop": status.and_then(|s| s.active_hop.as_ref()),
                    "pin": status.and_then(|s| s.pin.as_ref()),
                })
            },
        )
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), "delta"),
            Objects::All,
        )
        .open()
        .await;
    let mut all = first.clone();
    all.push(unsafe_next.clone());
    let fbc = catalog_json(&all, &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    wait_catalog_serves(&client, "local", &fbc).await;
    window.hold().await;
    let installed = Api::<PlatformOperator>::all(client.clone())
        .get("delta")
        .await
        .unwrap()
        .status
        .unwrap()
        .installed_bundle
        .unwrap();
    assert_eq!(installed.version, "1.0.0");
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            "delta",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": ">=1.0.0"}})),
        )
        .await
        .unwrap();
    let message = wait_po_condition(
        &client,
        "delta",
        "Degraded",
        "True",
        Some("UnsafeCRDChange"),
    )
    .await;
    assert!(message.contains(&good.crd_name()), "{message}");
    assert_eq!(
        deployment_image(&client, "delta", &good.deployment_name()).await,
        before
    );
    let installed = Api::<PlatformOperator>::all(client.clone())
        .get("delta")
        .await
        .unwrap()
        .status
        .unwrap()
        .installed_bundle
        .unwrap();
    assert_eq!(installed.version, "1.0.0");

    // §8.2: a PO with nothing working makes the ClusterOperator unavailable, one line per PO.
    let (_, reason, message) = eventually(WAIT, "Available=False", || async {
        co_condition(&client, "Available")
            .await
            .filter(|c| c.0 == "False")
    })
    .await;
    assert_eq!(reason, "PlatformOperatorFailed");
    assert!(
        message.lines().any(|l| l.starts_with("nosuch: ")),
        "{message}"
    );
    assert!(
        message.lines().any(|l| l.starts_with("epsilon: ")),
        "{message}"
    );
    // The aggregate follows the PO's status on its own reconcile, so it is awaited, not read
    // once: the refused upgrade of delta reaches the ClusterOperator as a Degraded line.
    eventually(WAIT, "Degraded=True naming delta", || async {
        co_condition(&client, "Degraded")
            .await
            .filter(|(status, _, message)| {
                status == "True" && message.lines().any(|l| l.starts_with("delta: "))
            })
    })
    .await;
    manager.stop().await;
}

#[tokio::test]
async fn missing_catalog_image_is_reported_on_the_catalog_and_the_po() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    apply_catalog(
        &client,
        "missing",
        json!({"image": {"ref": format!("{}/catalogs/none:latest", registry.host())}}),
        0,
    )
    .await;
    create_po(
        &client,
        "omega",
        json!({"package": {"name": "omega", "catalog": "missing"}}),
    )
    .await;
    let manager = Manager::start(
        client.clone(),
        Manager::test_settings(vec![registry.host()]),
    );
    let message =
        wait_po_condition(&client, "omega", "Installed", "False", Some("SourceFailed")).await;
    assert!(message.contains("missing"), "{message}");
    let catalog = eventually(WAIT, "Serving=False on the Catalog", || async {
        let c = Api::<Catalog>::all(client.clone())
            .get("missing")
            .await
            .ok()?;
        let serving = c
            .status?
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Serving")?;
        (serving.status == "False").then_some(serving)
    })
    .await;
    assert!(
        catalog.message.contains("catalogs/none"),
        "{}",
        catalog.message
    );
    manager.stop().await;
}
