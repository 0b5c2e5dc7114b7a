#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No silent adoption (issue 14, item 3), against a real API server: an object the bundle
//! ships that exists and that POM did not create is a refusal naming it, left exactly as it
//! was, and never deleted, also when the PlatformOperator goes away; the admin may hand it
//! over by name with an annotation; and two PlatformOperators whose names share their first
//! 63 characters get different owner labels, so deleting one never prunes the other.

use std::time::Duration;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_po_condition};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(120);

/// The CRD of `bundle` as somebody else created it: same name, no POM labels.
async fn squat_crd(client: &Client, bundle: &TestBundle) -> CustomResourceDefinition {
    // The bundle's own CRD (so only ownership differs), labelled by its real owner.
    let mut crd: serde_json::Value = serde_json::from_str(&bundle.manifests()[1]).unwrap();
    crd["metadata"]["labels"] = json!({"team": "someone-else"});
    let crd: CustomResourceDefinition = serde_json::from_value(crd).unwrap();
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    crds.create(&PostParams::default(), &crd).await.unwrap();
    // The API server's own controllers write its status once (names accepted, established);
    // what is compared later is the CRD after that.
    eventually(WAIT, "the squatted CRD to be established", || async {
        let crd = crds.get(&bundle.crd_name()).await.ok()?;
        crd.status
            .as_ref()?
            .conditions
            .as_ref()?
            .iter()
            .any(|c| c.type_ == "Established" && c.status == "True")
            .then_some(crd)
    })
    .await
}

/// The field managers that wrote `crd`.
fn managers(crd: &CustomResourceDefinition) -> Vec<String> {
    let mut managers: Vec<String> = crd
        .metadata
        .managed_fields
        .iter()
        .flatten()
        .filter_map(|m| m.manager.clone())
        .collect();
    managers.sort();
    managers.dedup();
    managers
}

#[tokio::test]
async fn an_object_pom_did_not_create_is_refused_kept_and_never_deleted_unless_handed_over() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let squatter = TestBundle::new("squat", "1.0.0");
    let adopter = TestBundle::new("adopt", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[squatter.clone(), adopter.clone()], &[]),
        0,
    )
    .await;
    let crds = Api::<CustomResourceDefinition>::all(client.clone());
    let theirs = squat_crd(&client, &squatter).await;
    let handed = squat_crd(&client, &adopter).await;
    crds.patch(
        &adopter.crd_name(),
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"annotations": {labels::ADOPT: "adopt"}}})),
    )
    .await
    .unwrap();
    create_po(&client, "squat", json!({"package": {"name": "squat"}})).await;
    create_po(&client, "adopt", json!({"package": {"name": "adopt"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));

    // Not handed over: refused, naming the object and the way out; the CRD is as it was.
    let message = wait_po_condition(
        &client,
        "squat",
        "Installed",
        "False",
        Some("AdoptionRefused"),
    )
    .await;
    assert!(
        message.contains(&format!("CustomResourceDefinition {}", squatter.crd_name()))
            && message.contains("POM did not create it")
            && message.contains(labels::ADOPT),
        "{message}"
    );
    let now = crds.get(&squatter.crd_name()).await.unwrap();
    assert_eq!(
        (now.labels(), managers(&now), &now.metadata.resource_version),
        (
            theirs.labels(),
            managers(&theirs),
            &theirs.metadata.resource_version
        ),
        "the refused object must not be touched"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "squat")
            .get_opt(&squatter.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "nothing of the refused bundle is applied"
    );

    // Handed over by name: installed, and the CRD now carries the owner label.
    wait_po_condition(
        &client,
        "adopt",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let adopted = crds.get(&adopter.crd_name()).await.unwrap();
    assert_eq!(
        adopted.labels().get(labels::OWNER_PO).map(String::as_str),
        Some("adopt")
    );
    assert_ne!(
        adopted.metadata.resource_version,
        handed.metadata.resource_version
    );

    // The refused PO goes away: what it did not create stays.
    Api::<PlatformOperator>::all(client.clone())
        .delete("squat", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "PlatformOperator squat to be gone", || async {
        Api::<PlatformOperator>::all(client.clone())
            .get_opt("squat")
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    let after = crds.get(&squatter.crd_name()).await.unwrap();
    assert_eq!(
        (
            after.labels(),
            managers(&after),
            &after.metadata.resource_version
        ),
        (
            theirs.labels(),
            managers(&theirs),
            &theirs.metadata.resource_version
        ),
        "deleting the PlatformOperator must not touch an object POM did not create"
    );
    assert!(after.metadata.deletion_timestamp.is_none());
    manager.stop().await;
}

#[tokio::test]
async fn long_names_sharing_63_characters_never_prune_each_other() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let stem = "platform-operator-with-a-very-long-name-that-goes-on-and-on-and";
    assert_eq!(stem.len(), 63);
    let (first, second) = (format!("{stem}-first"), format!("{stem}-second"));
    assert_ne!(labels::label_value(&first), labels::label_value(&second));
    let a = TestBundle::new("longa", "1.0.0");
    let b = TestBundle::new("longb", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[a.clone(), b.clone()], &[]),
        0,
    )
    .await;
    create_po(
        &client,
        &first,
        json!({"package": {"name": "longa"}, "installNamespace": "longa"}),
    )
    .await;
    create_po(
        &client,
        &second,
        json!({"package": {"name": "longb"}, "installNamespace": "longb"}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_po_condition(
        &client,
        &first,
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    wait_po_condition(
        &client,
        &second,
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let deployments_b = Api::<Deployment>::namespaced(client.clone(), "longb");
    let before = deployments_b.get(&b.deployment_name()).await.unwrap();
    assert_eq!(
        before.labels().get(labels::OWNER_PO),
        Some(&labels::label_value(&second))
    );

    Api::<PlatformOperator>::all(client.clone())
        .delete(&first, &DeleteParams::default())
        .await
        .unwrap();
    eventually(
        WAIT,
        "the first PlatformOperator's Deployment to be removed",
        || async {
            Api::<Deployment>::namespaced(client.clone(), "longa")
                .get_opt(&a.deployment_name())
                .await
                .unwrap()
                .is_none()
                .then_some(())
        },
    )
    .await;
    let after = deployments_b.get(&b.deployment_name()).await.unwrap();
    assert_eq!(
        after.uid(),
        before.uid(),
        "the second PO's Deployment survives"
    );
    assert!(after.metadata.deletion_timestamp.is_none());
    wait_po_condition(
        &client,
        &second,
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    manager.stop().await;
}

/// Issue 22 item 5: an OperatorCondition POM did not create (here one an admin or another
/// tool left under the bundle's CSV name, saying Upgradeable=True) is never overwritten: the
/// install is refused before anything is written, naming it, and the object stays as it was.
#[tokio::test]
async fn an_operator_condition_pom_did_not_create_is_never_overwritten() {
    use pom_api::olm::OperatorCondition;
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let bundle = TestBundle::new("foreign-oc", "1.0.0");
    configmap_catalog(
        &client,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    let namespaces = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            // Handed to the PO (issue 22 item 5): the namespace is not what is refused here.
            &serde_json::from_value(json!({"metadata": {"name": "foreign-oc",
                "annotations": {labels::ADOPT: "foreign-oc"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let conditions = Api::<OperatorCondition>::namespaced(client.clone(), "foreign-oc");
    let theirs: OperatorCondition = serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v2", "kind": "OperatorCondition",
        "metadata": {"name": bundle.csv()},
        "spec": {"deployments": ["someone-else"], "conditions": [{"type": "Upgradeable",
            "status": "True", "reason": "Theirs", "message": "",
            "lastTransitionTime": "2026-01-01T00:00:00Z"}]}
    }))
    .unwrap();
    let theirs = conditions
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    create_po(
        &client,
        "foreign-oc",
        json!({"package": {"name": "foreign-oc"}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));

    let message = wait_po_condition(
        &client,
        "foreign-oc",
        "Installed",
        "False",
        Some("AdoptionRefused"),
    )
    .await;
    assert!(
        message.contains(&format!("OperatorCondition {}", bundle.csv())),
        "{message}"
    );
    let now = conditions.get(&bundle.csv()).await.unwrap();
    assert_eq!(
        now.metadata.resource_version, theirs.metadata.resource_version,
        "the OperatorCondition POM did not create was written"
    );
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "foreign-oc")
            .get_opt(&bundle.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "nothing of the refused bundle is applied"
    );
    manager.stop().await;
}

/// Issue 22 item 5: POM installs into an existing namespace it did not create only when an
/// admin handed it to that PlatformOperator, and two PlatformOperators never share an install
/// namespace (one's Deployment could run as the other's ServiceAccount). Both refusals come
/// before anything is written and name the fix.
#[tokio::test]
async fn an_install_namespace_pom_did_not_create_or_another_pos_is_refused() {
    use k8s_openapi::api::core::v1::Namespace;
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let (first, second, squatter) = (
        TestBundle::new("first", "1.0.0"),
        TestBundle::new("second", "1.0.0"),
        TestBundle::new("squatter", "1.0.0"),
    );
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[first.clone(), second.clone(), squatter.clone()], &[]),
        0,
    )
    .await;
    let namespaces = Api::<Namespace>::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "team-ns"}})).unwrap(),
        )
        .await
        .unwrap();
    create_po(
        &client,
        "first",
        json!({"package": {"name": "first"}, "installNamespace": "shared-ns"}),
    )
    .await;
    create_po(
        &client,
        "squatter",
        json!({"package": {"name": "squatter"}, "installNamespace": "team-ns"}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_po_condition(
        &client,
        "first",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    create_po(
        &client,
        "second",
        json!({"package": {"name": "second"}, "installNamespace": "shared-ns"}),
    )
    .await;

    // A namespace the admin made: refused, naming the annotation that hands it over.
    let message = wait_po_condition(
        &client,
        "squatter",
        "Installed",
        "False",
        Some("AdoptionRefused"),
    )
    .await;
    assert!(
        message.contains("Namespace team-ns") && message.contains(labels::ADOPT),
        "{message}"
    );
    // Another PO's namespace: refused, naming its owner.
    let message = wait_po_condition(
        &client,
        "second",
        "Installed",
        "False",
        Some("OwnershipConflict"),
    )
    .await;
    assert!(
        message.contains("shared-ns") && message.contains("first"),
        "{message}"
    );
    for (namespace, bundle) in [("team-ns", &squatter), ("shared-ns", &second)] {
        assert!(
            Api::<Deployment>::namespaced(client.clone(), namespace)
                .get_opt(&bundle.deployment_name())
                .await
                .unwrap()
                .is_none(),
            "nothing of {} is applied in {namespace}",
            bundle.name()
        );
    }
    let team = namespaces.get("team-ns").await.unwrap();
    assert!(
        team.labels().get(labels::OWNER_PO).is_none(),
        "the admin's namespace is left as it was"
    );

    // Handed over: installed, and the namespace is now the PO's.
    namespaces
        .patch(
            "team-ns",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {labels::ADOPT: "squatter"}}})),
        )
        .await
        .unwrap();
    wait_po_condition(
        &client,
        "squatter",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let team = namespaces.get("team-ns").await.unwrap();
    assert_eq!(
        team.labels().get(labels::OWNER_PO),
        Some(&labels::label_value("squatter"))
    );
    manager.stop().await;
}

/// Issue 22 item 5: an owner label is honoured only on what the PO's own inventory records, and
/// an inventory (status, which whoever can write a PO's status can edit) naming another PO's
/// objects never gets them deleted. With the manager stopped, PO `forger`'s status is forged to
/// record PO `victim`'s Deployment and a Secret in `victim`'s namespace, and to claim that
/// namespace as its own; deleting `forger` then removes its own objects and leaves `victim`'s.
#[tokio::test]
async fn an_inventory_naming_another_pos_object_never_deletes_it() {
    use k8s_openapi::api::core::v1::Secret;
    use pom_api::platform_operator::InventoryObject;
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let (forger, victim) = (
        TestBundle::new("forger", "1.0.0"),
        TestBundle::new("victim", "1.0.0"),
    );
    configmap_catalog(
        &client,
        "local",
        &catalog_json(&[forger.clone(), victim.clone()], &[]),
        0,
    )
    .await;
    create_po(&client, "forger", json!({"package": {"name": "forger"}})).await;
    create_po(&client, "victim", json!({"package": {"name": "victim"}})).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    for po in ["forger", "victim"] {
        wait_po_condition(&client, po, "Installed", "True", Some("InstallSucceeded")).await;
    }
    manager.stop().await;
    // A Secret of the victim's (as POM labels the ones it applies).
    let secrets = Api::<Secret>::namespaced(client.clone(), "victim");
    let secret: Secret = serde_json::from_value(json!({
        "metadata": {"name": "victim-secret", "labels": {labels::OWNER_PO: labels::label_value("victim")}},
        "stringData": {"key": "value"}
    }))
    .unwrap();
    let secret = secrets
        .create(&PostParams::default(), &secret)
        .await
        .unwrap();
    let pos = Api::<PlatformOperator>::all(client.clone());
    let victims = Api::<Deployment>::namespaced(client.clone(), "victim");
    let before = victims.get(&victim.deployment_name()).await.unwrap();
    let forged = pos.get_status("forger").await.unwrap();
    let mut inventory = forged.status.unwrap().inventory;
    assert!(!inventory.is_empty(), "the forger's inventory is recorded");
    for (api_version, kind, name) in [
        ("apps/v1", "Deployment", victim.deployment_name()),
        ("v1", "Secret", "victim-secret".to_owned()),
    ] {
        inventory[0].objects.push(InventoryObject {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: Some("victim".into()),
            name,
        });
    }
    pos.patch_status(
        "forger",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"inventory": inventory, "installNamespace": "victim"}})),
    )
    .await
    .unwrap();
    pos.delete("forger", &DeleteParams::default())
        .await
        .unwrap();

    // The cleanup runs from the forged status: the manager starts after the deletion.
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    eventually(WAIT, "the forger PlatformOperator to be gone", || async {
        pos.get_opt("forger").await.unwrap().is_none().then_some(())
    })
    .await;
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "forger")
            .get_opt(&forger.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "the forger's own Deployment is removed"
    );
    let after = victims.get(&victim.deployment_name()).await.unwrap();
    assert_eq!(
        after.uid(),
        before.uid(),
        "the victim's Deployment survives"
    );
    assert!(after.metadata.deletion_timestamp.is_none());
    let kept = secrets.get("victim-secret").await.unwrap();
    assert_eq!(kept.uid(), secret.uid(), "the victim's Secret survives");
    manager.stop().await;
}
