#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The break-glass for a CRD-safety refusal the admin judges wrong (issue 23 item 5), against a
//! real API server: a hop whose bundle changes its CRD unsafely is refused (the message names
//! the annotation that overrides it); annotated with that bundle's name, the hop is applied
//! with a Warning Event; the annotation acts once, so the next unsafe hop is refused again.
//! Judged by the CRD the API server serves: unchanged while refused, changed once overridden,
//! and unchanged again by the next refused hop.

use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::labels::CRD_SAFETY_OVERRIDE;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_po_condition};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

async fn installed_version(pos: &Api<PlatformOperator>) -> Option<String> {
    pos.get("delta")
        .await
        .ok()?
        .status?
        .installed_bundle
        .map(|b| b.version)
}

/// The type of `spec.size` in the served CRD `name` as the API server holds it (each version's
/// schema), and whether the CRD is Established.
async fn served_size_types(
    crds: &Api<CustomResourceDefinition>,
    name: &str,
) -> (Vec<String>, bool) {
    let crd = crds.get(name).await.unwrap();
    let types = crd
        .spec
        .versions
        .iter()
        .map(|v| {
            let schema = serde_json::to_value(&v.schema).unwrap();
            schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["type"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        })
        .collect();
    let established = crd
        .status
        .and_then(|s| s.conditions)
        .unwrap_or_default()
        .iter()
        .any(|c| c.type_ == "Established" && c.status == "True");
    (types, established)
}

#[tokio::test]
async fn an_unsafe_crd_change_the_admin_overrides_is_applied_once_with_a_warning() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let good = TestBundle::new("delta", "1.0.0");
    let mut unsafe_next = TestBundle::new("delta", "1.1.0").replaces("1.0.0");
    unsafe_next.crd_size_type = "string";
    // Back to an integer: unsafe again.
    let unsafe_after = TestBundle::new("delta", "1.2.0").replaces("1.1.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(
            &[good.clone(), unsafe_next.clone(), unsafe_after.clone()],
            &[],
        ),
        0,
    )
    .await;
    create_po(
        &client,
        "delta",
        json!({"package": {"name": "delta"}, "steadyStateVersionRange": "1.0.0"}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_po_condition(
        &client,
        "delta",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = good.crd_name();
    assert_eq!(
        served_size_types(&crds, &crd).await,
        (vec!["integer".to_owned()], true)
    );
    let patch = |value: serde_json::Value| {
        let pos = pos.clone();
        async move {
            pos.patch("delta", &PatchParams::default(), &Patch::Merge(value))
                .await
                .unwrap();
        }
    };

    // The hop to 1.1.0 is refused, naming the override.
    patch(json!({"spec": {"steadyStateVersionRange": "1.1.0"}})).await;
    let message = wait_po_condition(
        &client,
        "delta",
        "Degraded",
        "True",
        Some("UnsafeCRDChange"),
    )
    .await;
    assert!(
        message.contains(CRD_SAFETY_OVERRIDE) && message.contains(&unsafe_next.name()),
        "{message}"
    );
    assert_eq!(installed_version(&pos).await.as_deref(), Some("1.0.0"));
    // The refused change never reached the API server.
    assert_eq!(
        served_size_types(&crds, &crd).await,
        (vec!["integer".to_owned()], true)
    );

    // Overridden for 1.1.0: applied, with a Warning Event naming the bundle.
    patch(json!({"metadata": {"annotations": {CRD_SAFETY_OVERRIDE: unsafe_next.name()}}})).await;
    eventually(WAIT, "1.1.0 installed on the override", || async {
        (installed_version(&pos).await.as_deref() == Some("1.1.0")).then_some(())
    })
    .await;
    let events: Api<Event> = Api::all(client.clone());
    let event = eventually(WAIT, "a CRDSafetyOverridden Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some("CRDSafetyOverridden"))
    })
    .await;
    assert_eq!(event.type_.as_deref(), Some("Warning"), "{event:?}");
    let note = event.note.unwrap_or_default();
    assert!(note.contains(&unsafe_next.name()), "{note}");
    // The overridden change really applied: the served CRD's field is a string now.
    assert_eq!(
        served_size_types(&crds, &crd).await,
        (vec!["string".to_owned()], true)
    );

    // The annotation acts once: the next unsafe hop is refused again.
    patch(json!({"spec": {"steadyStateVersionRange": "1.2.0"}})).await;
    let message = wait_po_condition(
        &client,
        "delta",
        "Degraded",
        "True",
        Some("UnsafeCRDChange"),
    )
    .await;
    assert!(message.contains(&unsafe_after.name()), "{message}");
    assert_eq!(installed_version(&pos).await.as_deref(), Some("1.1.0"));
    assert_eq!(
        served_size_types(&crds, &crd).await,
        (vec!["string".to_owned()], true),
        "the second unsafe change, refused, reached the API server"
    );
    manager.stop().await;
}
