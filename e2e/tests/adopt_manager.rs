#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The manager adopts what OLM v0 installed (issue 36 item 2): a PlatformOperator naming the
//! installation (`spec.adoptFrom`) takes over the running objects with 0 pod restarts, and
//! an installation that is not what POM would apply is left exactly as it is.
//!
//! On a control plane where Deployments really roll out (kube-controller-manager, its garbage
//! collector included, and kwok running the pods), with OLM v0's published CRDs and the
//! objects OLM v0 leaves for an install laid out by `pom_e2e::olm_v0`:
//! - [`adopts_with_no_restart_survives_olms_removal_and_hops`]: an AllNamespaces install is
//!   adopted: the same Deployment, ReplicaSet and pod UIDs throughout, the Deployment's
//!   generation unchanged (its spec was never changed), OLM's owner references and labels gone;
//!   then the CSV and Subscription are deleted, the garbage collector removes what OLM alone
//!   owned (its generated Roles), and nothing POM owns goes; a catalog update then hops the
//!   adopted operator as any other once the admin lifts the pin and moves the steady state;
//! - [`an_install_that_differs_is_left_alone_and_says_why`]: an OwnNamespace install whose
//!   Deployment an admin edited (an env var POM would not render): the PlatformOperator says
//!   `AdoptionNotProven` naming the field, and no object of the install is written over a
//!   quiet window longer than every resync; once the admin undoes the edit, the adoption
//!   resumes and takes the install over with no restart;
//! - [`an_adopted_webhook_operator_is_rolled_off_olms_certificate_before_it_expires`]: OLM's CA
//!   near its end, adoption restarts nothing, then POM rolls the pods onto its own certificate
//!   (the pod template's `olmcahash`) and stops trusting OLM's CA once they rolled out;
//! - [`adopts_a_webhook_bundle_with_no_restart_and_its_webhook_keeps_answering`]: a webhook
//!   bundle as OLM v0 lays it out (its CA, serving Secret and mounts, a configuration under a
//!   generated name) is adopted with no restart; while the CSV and Subscription exist the
//!   hand-over waits (OLM's configuration and certificate stay, the status says what to
//!   delete); once they are deleted, POM writes its certificate and configuration, trusting
//!   OLM's CA too for a bound, and retires OLM's. The webhook answers through the API server
//!   at every step.

use std::collections::BTreeSet;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{Deployment, ReplicaSet};
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret, ServiceAccount};
use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
use kube::{Client, ResourceExt};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::olm_v0::{self, Install, Targets};
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    WAIT, configmap_catalog, create_po, deployment_image, serving_plane, simulated_plane,
    wait_catalog_serves, wait_po_condition,
};
use pom_e2e::webhook_server::{CONVERTED_BY, REFUSAL_MESSAGE, REFUSE_LABEL, WebhookServer};
use serde_json::json;

/// The UIDs of what runs in `namespace`: Deployments, ReplicaSets and Pods, and the
/// Deployment's generation.
async fn running(client: &Client, namespace: &str) -> (BTreeSet<String>, i64) {
    let mut uids = BTreeSet::new();
    let lp = ListParams::default();
    let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .unwrap();
    let generation = deployments
        .items
        .iter()
        .map(|d| d.metadata.generation.unwrap_or_default())
        .sum();
    uids.extend(
        deployments
            .items
            .iter()
            .map(|d| format!("Deployment {}", d.uid().unwrap())),
    );
    for rs in Api::<ReplicaSet>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .unwrap()
    {
        uids.insert(format!("ReplicaSet {}", rs.uid().unwrap()));
    }
    for pod in Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
        .unwrap()
    {
        uids.insert(format!("Pod {}", pod.uid().unwrap()));
    }
    (uids, generation)
}

/// Waits until the Deployments of `namespace` run their pods (kwok made them Ready).
async fn rolled_out(client: &Client, namespace: &str) {
    eventually(WAIT, &format!("the pods of {namespace} to run"), || async {
        let deployments = Api::<Deployment>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .ok()?;
        let ready = !deployments.items.is_empty()
            && deployments.items.iter().all(|d| {
                let s = d.status.clone().unwrap_or_default();
                s.observed_generation == d.metadata.generation
                    && s.ready_replicas.unwrap_or_default() >= 1
                    && s.updated_replicas == s.replicas
            });
        // And no pod of an older ReplicaSet left (terminating ones included).
        let wanted: i32 = deployments
            .items
            .iter()
            .map(|d| d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1))
            .sum();
        let pods = Api::<Pod>::namespaced(client.clone(), namespace)
            .list(&ListParams::default())
            .await
            .ok()?;
        (ready && pods.items.len() == usize::try_from(wanted).unwrap_or_default()).then_some(())
    })
    .await;
}

fn dynamic(
    client: &Client,
    group: &str,
    version: &str,
    kind: &str,
    ns: &str,
) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// The labels and owner references OLM marks its objects with, on `meta`.
fn olm_marks(meta: &kube::api::ObjectMeta) -> Vec<String> {
    let mut marks: Vec<String> = meta
        .labels
        .iter()
        .flatten()
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("olm.owner") || k.starts_with("operators.coreos.com/"))
        .collect();
    marks.extend(
        meta.owner_references
            .iter()
            .flatten()
            .filter(|r| r.kind == "ClusterServiceVersion")
            .map(|r| format!("ownerReference {}", r.name)),
    );
    marks
}

#[tokio::test]
async fn adopts_with_no_restart_survives_olms_removal_and_hops() {
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    olm_v0::install_crds(&client, &crds).await.unwrap();
    let v1 = TestBundle::new("alpha", "1.0.0");
    let v2 = TestBundle::new("alpha", "1.1.0").replaces("1.0.0");
    let fbc = catalog_json(std::slice::from_ref(&v1), &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    let ns = "alpha-system";
    olm_v0::lay_out(&client, &Install::new(v1.clone(), ns, Targets::All))
        .await
        .unwrap();
    rolled_out(&client, ns).await;
    let before = running(&client, ns).await;

    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings);
    wait_catalog_serves(&client, "operators", &fbc).await;
    create_po(
        &client,
        "alpha",
        json!({"package": {"name": "alpha", "channel": "stable", "versionRange": "=1.0.0"},
               "installNamespace": ns,
               "adoptFrom": {"subscription": {"namespace": ns, "name": "alpha"}}}),
    )
    .await;
    wait_po_condition(&client, "alpha", "Installed", "True", None).await;
    let po = Api::<PlatformOperator>::all(client.clone())
        .get("alpha")
        .await
        .unwrap();
    let status = po.status.unwrap();
    assert_eq!(
        status.installed_bundle.as_ref().map(|b| b.name.as_str()),
        Some("alpha.v1.0.0")
    );
    rolled_out(&client, ns).await;
    // 0 restarts: the same Deployment, ReplicaSet and pods, the Deployment's spec unchanged.
    assert_eq!(
        running(&client, ns).await,
        before,
        "adoption restarted the operator"
    );

    // Released from OLM: POM's owner label, none of OLM's marks.
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("alpha-controller")
        .await
        .unwrap();
    assert_eq!(olm_marks(&deployment.metadata), Vec::<String>::new());
    assert_eq!(
        deployment
            .labels()
            .get(pom_api::labels::OWNER_PO)
            .map(String::as_str),
        Some("alpha")
    );
    let account = Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .get("alpha")
        .await
        .unwrap();
    assert_eq!(olm_marks(&account.metadata), Vec::<String>::new());
    let inventory: Vec<_> = status
        .inventory
        .iter()
        .flat_map(|b| b.objects.clone())
        .collect();
    assert!(!inventory.is_empty());

    // OLM's generated Roles (names POM does not render) are still OLM's: the garbage
    // collector removes them with the CSV, which shows it ran.
    let olm_roles: Vec<String> = Api::<Role>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("olm.owner=alpha.v1.0.0"))
        .await
        .unwrap()
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    assert!(!olm_roles.is_empty(), "OLM's generated Role is laid out");
    let dp = DeleteParams::background();
    dynamic(
        &client,
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        ns,
    )
    .delete("alpha.v1.0.0", &dp)
    .await
    .unwrap();
    dynamic(
        &client,
        "operators.coreos.com",
        "v1alpha1",
        "Subscription",
        ns,
    )
    .delete("alpha", &dp)
    .await
    .unwrap();
    eventually(
        WAIT,
        "the garbage collector to remove OLM's Roles",
        || async {
            let left = Api::<Role>::namespaced(client.clone(), ns)
                .list(&ListParams::default().labels("olm.owner=alpha.v1.0.0"))
                .await
                .ok()?;
            left.items.is_empty().then_some(())
        },
    )
    .await;
    let left_bindings = Api::<RoleBinding>::namespaced(client.clone(), ns)
        .list(&ListParams::default().labels("olm.owner=alpha.v1.0.0"))
        .await
        .unwrap();
    assert!(left_bindings.items.is_empty(), "{:?}", left_bindings.items);
    // Nothing POM owns went, and the operator still runs the same pods.
    for object in &inventory {
        let (group, version) = object
            .api_version
            .split_once('/')
            .unwrap_or(("", object.api_version.as_str()));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &object.kind));
        let api: Api<DynamicObject> = match &object.namespace {
            Some(n) => Api::namespaced_with(client.clone(), n, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        if object.kind == "Secret" {
            continue;
        }
        assert!(
            api.get_opt(&object.name).await.unwrap().is_some(),
            "{} {:?}/{} is gone after the CSV and Subscription were deleted",
            object.kind,
            object.namespace,
            object.name
        );
    }
    assert_eq!(
        running(&client, ns).await,
        before,
        "deleting OLM's objects restarted the operator"
    );
    wait_po_condition(&client, "alpha", "Installed", "True", None).await;

    // A later catalog update hops the adopted operator as any other: the admin lifts the
    // adoption's pin and moves the steady state to the new bundle, as for any PO (§4).
    let fbc = catalog_json(&[v1, v2], &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    wait_catalog_serves(&client, "operators", &fbc).await;
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"package": {"versionRange": null},
                                          "steadyStateVersionRange": "=1.1.0"}})),
        )
        .await
        .unwrap();
    eventually(WAIT, "alpha to hop to 1.1.0", || async {
        let po = Api::<PlatformOperator>::all(client.clone())
            .get("alpha")
            .await
            .ok()?;
        let installed = po.status?.installed_bundle?;
        (installed.name == "alpha.v1.1.0").then_some(())
    })
    .await;
    assert_eq!(
        deployment_image(&client, ns, "alpha-controller").await,
        "example.invalid/alpha:1.1.0"
    );
    manager.stop().await;
}

#[tokio::test]
async fn an_install_that_differs_is_left_alone_and_says_why() {
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    olm_v0::install_crds(&client, &crds).await.unwrap();
    let beta = TestBundle {
        install_modes: vec!["OwnNamespace"],
        ..TestBundle::new("beta", "2.0.0")
    };
    let fbc = catalog_json(std::slice::from_ref(&beta), &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    let ns = "beta-system";
    olm_v0::lay_out(&client, &Install::new(beta, ns, Targets::Own))
        .await
        .unwrap();
    // An admin's edit OLM would have reverted and POM would not render.
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            "beta-controller",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "manager", "env": [{"name": "DEBUG", "value": "1"}]}]}}}})),
        )
        .await
        .unwrap();
    rolled_out(&client, ns).await;

    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "operators", &fbc).await;
    create_po(
        &client,
        "beta",
        json!({"package": {"name": "beta", "channel": "stable", "versionRange": "=2.0.0"},
               "installNamespace": ns, "watchNamespace": ns,
               "adoptFrom": {"subscription": {"namespace": ns, "name": "beta"}}}),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "beta",
        "Installed",
        "False",
        Some("AdoptionNotProven"),
    )
    .await;
    eprintln!("Installed=False AdoptionNotProven: {message}");
    assert!(
        message.contains("spec.template.spec.containers[0].env"),
        "{message}"
    );
    assert!(message.contains("DEBUG"), "{message}");

    // Nothing of the install is written: over a window longer than every resync.
    QuietWindow::new(&settings)
        .no_writes(
            Api::<Deployment>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .no_writes(
            Api::<ServiceAccount>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .no_writes(Api::<Role>::namespaced(client.clone(), ns), Objects::All)
        .no_writes(
            Api::<RoleBinding>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .no_writes(Api::<Namespace>::all(client.clone()), ns)
        .open()
        .await
        .hold()
        .await;
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("beta-controller")
        .await
        .unwrap();
    assert!(!olm_marks(&deployment.metadata).is_empty(), "still OLM's");
    assert!(!deployment.labels().contains_key(pom_api::labels::OWNER_PO));
    let po = Api::<PlatformOperator>::all(client.clone())
        .get("beta")
        .await
        .unwrap();
    assert!(
        po.status.unwrap().inventory.is_empty(),
        "no intent recorded"
    );

    // The admin undoes the edit (the operator rolls out once, by the admin's hand): the
    // adoption resumes and takes the OwnNamespace install over with no further restart.
    Api::<Deployment>::namespaced(client.clone(), ns)
        .patch(
            "beta-controller",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"template": {"spec": {"containers": [
                {"name": "manager", "env": [{"name": "DEBUG", "$patch": "delete"}]}]}}}})),
        )
        .await
        .unwrap();
    rolled_out(&client, ns).await;
    let before = running(&client, ns).await;
    wait_po_condition(&client, "beta", "Installed", "True", None).await;
    rolled_out(&client, ns).await;
    assert_eq!(
        running(&client, ns).await,
        before,
        "adoption restarted the operator"
    );
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("beta-controller")
        .await
        .unwrap();
    assert_eq!(olm_marks(&deployment.metadata), Vec::<String>::new());
    manager.stop().await;
}

/// What OLM marks `meta` with, by value: its owner and component labels with their values,
/// and its owner references to a CSV with their uids.
fn olm_marks_by_value(meta: &kube::api::ObjectMeta) -> Vec<String> {
    let mut marks: Vec<String> = meta
        .labels
        .iter()
        .flatten()
        .filter(|(k, _)| k.starts_with("olm.owner") || k.starts_with("operators.coreos.com/"))
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    marks.extend(
        meta.owner_references
            .iter()
            .flatten()
            .filter(|r| r.kind == "ClusterServiceVersion")
            .map(|r| format!("ownerReference {} {}", r.name, r.uid)),
    );
    marks.sort();
    marks
}

/// POM's marks on `meta`: its `platform.openshift.io/*` labels and annotations.
fn pom_marks(meta: &kube::api::ObjectMeta) -> Vec<String> {
    let mut marks: Vec<String> = meta
        .labels
        .iter()
        .flatten()
        .chain(meta.annotations.iter().flatten())
        .map(|(k, _)| k.clone())
        .filter(|k| k.starts_with("platform.openshift.io/"))
        .collect();
    marks.sort();
    marks
}

/// OLM's marks on the install's Deployment, ServiceAccount and CRDs, by object.
async fn olm_objects_marks(
    client: &Client,
    ns: &str,
    crd_label: &str,
) -> Vec<(String, Vec<String>)> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let mut out = Vec::new();
    for d in Api::<Deployment>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
    {
        out.push((
            format!("Deployment {}", d.name_any()),
            olm_marks_by_value(&d.metadata),
        ));
    }
    for sa in Api::<ServiceAccount>::namespaced(client.clone(), ns)
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|sa| sa.name_any() != "default")
    {
        out.push((
            format!("ServiceAccount {}", sa.name_any()),
            olm_marks_by_value(&sa.metadata),
        ));
    }
    for crd in Api::<CustomResourceDefinition>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .filter(|c| {
            c.labels().contains_key(crd_label) || c.labels().contains_key(pom_api::labels::OWNER_PO)
        })
    {
        out.push((
            format!("CRD {}", crd.name_any()),
            olm_marks_by_value(&crd.metadata),
        ));
    }
    out.sort();
    out
}

#[tokio::test]
async fn gives_back_to_olm_deleting_nothing_olm_owns() {
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    olm_v0::install_crds(&client, &crds).await.unwrap();
    let v1 = TestBundle::new("alpha", "1.0.0");
    let fbc = catalog_json(std::slice::from_ref(&v1), &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    let ns = "alpha-system";
    let component = "operators.coreos.com/alpha.alpha-system";
    olm_v0::lay_out(&client, &Install::new(v1.clone(), ns, Targets::All))
        .await
        .unwrap();
    rolled_out(&client, ns).await;
    let before = running(&client, ns).await;
    let olms_before = olm_objects_marks(&client, ns, component).await;
    assert!(
        olms_before.iter().all(|(_, marks)| !marks.is_empty()),
        "laid out as OLM's: {olms_before:?}"
    );

    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings);
    wait_catalog_serves(&client, "operators", &fbc).await;
    create_po(
        &client,
        "alpha",
        json!({"package": {"name": "alpha", "channel": "stable", "versionRange": "=1.0.0"},
               "installNamespace": ns,
               "adoptFrom": {"subscription": {"namespace": ns, "name": "alpha"}}}),
    )
    .await;
    wait_po_condition(
        &client,
        "alpha",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    rolled_out(&client, ns).await;
    assert_eq!(
        running(&client, ns).await,
        before,
        "adoption restarted the operator"
    );
    let adopted = olm_objects_marks(&client, ns, component).await;
    assert!(
        adopted.iter().all(|(_, marks)| marks.is_empty()),
        "adopted: {adopted:?}"
    );
    let pos = Api::<PlatformOperator>::all(client.clone());
    let inventory: Vec<_> = pos
        .get("alpha")
        .await
        .unwrap()
        .status
        .unwrap()
        .inventory
        .iter()
        .flat_map(|b| b.objects.clone())
        .collect();

    // A give-back naming another CSV is refused, changing nothing.
    pos.patch(
        "alpha",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {pom_api::labels::GIVE_BACK: "alpha.v0.9.0"}}}),
        ),
    )
    .await
    .unwrap();
    let refused = wait_po_condition(
        &client,
        "alpha",
        "Degraded",
        "True",
        Some("GiveBackRefused"),
    )
    .await;
    eprintln!("Degraded=True GiveBackRefused: {refused}");
    assert!(refused.contains("alpha.v0.9.0"), "{refused}");
    assert_eq!(olm_objects_marks(&client, ns, component).await, adopted);

    // The admin gives it back: OLM's labels and owner references (the CSV's uid) back, POM's
    // marks gone, nothing restarted.
    pos.patch(
        "alpha",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"metadata": {"annotations": {pom_api::labels::GIVE_BACK: "alpha.v1.0.0"}}}),
        ),
    )
    .await
    .unwrap();
    let given = wait_po_condition(&client, "alpha", "Installed", "True", Some("GivenBack")).await;
    eprintln!("Installed=True GivenBack: {given}");
    assert_eq!(olm_objects_marks(&client, ns, component).await, olms_before);
    let deployment = Api::<Deployment>::namespaced(client.clone(), ns)
        .get("alpha-controller")
        .await
        .unwrap();
    assert_eq!(pom_marks(&deployment.metadata), Vec::<String>::new());
    let namespace = Api::<Namespace>::all(client.clone()).get(ns).await.unwrap();
    assert!(!namespace.labels().contains_key(pom_api::labels::OWNER_PO));
    assert_eq!(
        running(&client, ns).await,
        before,
        "giving back restarted the operator"
    );

    // The PlatformOperator goes, deleting nothing OLM owns.
    pos.delete("alpha", &DeleteParams::default()).await.unwrap();
    eventually(WAIT, "PlatformOperator alpha to go", || async {
        pos.get_opt("alpha").await.ok()?.is_none().then_some(())
    })
    .await;
    assert_eq!(olm_objects_marks(&client, ns, component).await, olms_before);
    assert_eq!(
        running(&client, ns).await,
        before,
        "deleting the PlatformOperator restarted the operator"
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt(ns)
            .await
            .unwrap()
            .is_some()
    );
    // What POM created itself (its RBAC names) went with it; what OLM owned stayed.
    for object in &inventory {
        let (group, version) = object
            .api_version
            .split_once('/')
            .unwrap_or(("", object.api_version.as_str()));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &object.kind));
        let api: Api<DynamicObject> = match &object.namespace {
            Some(n) => Api::namespaced_with(client.clone(), n, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        if object.kind == "Secret" {
            continue;
        }
        if let Some(live) = api.get_opt(&object.name).await.unwrap() {
            assert!(
                !live.labels().contains_key(pom_api::labels::OWNER_PO),
                "{} {:?}/{} still POM's after the PlatformOperator went",
                object.kind,
                object.namespace,
                object.name
            );
        }
    }
    manager.stop().await;

    // OLM owns it again: deleting the CSV lets the garbage collector remove the Deployment.
    dynamic(
        &client,
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        ns,
    )
    .delete("alpha.v1.0.0", &DeleteParams::background())
    .await
    .unwrap();
    eventually(
        WAIT,
        "the garbage collector to remove the Deployment with the CSV",
        || async {
            let left = Api::<Deployment>::namespaced(client.clone(), ns)
                .get_opt("alpha-controller")
                .await
                .ok()?;
            left.is_none().then_some(())
        },
    )
    .await;
}

/// A Widget of `bundle` named `name` (labelled to be refused by the stand-in webhook when
/// `refuse`).
fn widget(bundle: &TestBundle, name: &str, refuse: bool) -> DynamicObject {
    let mut labels = serde_json::Map::new();
    if refuse {
        labels.insert(REFUSE_LABEL.into(), json!("yes"));
    }
    serde_json::from_value(json!({
        "apiVersion": format!("{}/v1", bundle.crd_group()), "kind": "Widget",
        "metadata": {"name": name, "labels": labels},
        "spec": {"size": 1}
    }))
    .unwrap()
}

fn widgets(client: &Client, bundle: &TestBundle, version: &str, ns: &str) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(&bundle.crd_group(), version, "Widget"),
        "widgets",
    );
    Api::namespaced_with(client.clone(), ns, &resource)
}

/// The validating webhook answers, through the configuration and CA the API server holds: a
/// Widget marked to be refused is refused with the stand-in's message after a call, one not
/// marked is admitted, and reading it at `v2` is converted by the conversion webhook.
async fn webhook_answers(client: &Client, bundle: &TestBundle, server: &WebhookServer, name: &str) {
    let api = widgets(client, bundle, "v1", WIDGET_NAMESPACE);
    let calls = server.calls("/gamma/validate");
    let refused = api
        .create(
            &PostParams::default(),
            &widget(bundle, &format!("{name}-refused"), true),
        )
        .await
        .expect_err("the webhook refuses a Widget marked to be refused");
    assert!(
        refused.to_string().contains(REFUSAL_MESSAGE),
        "refused by the webhook itself, not for want of one: {refused}"
    );
    assert!(server.calls("/gamma/validate") > calls);
    api.create(&PostParams::default(), &widget(bundle, name, false))
        .await
        .unwrap();
    let at_v2 = widgets(client, bundle, "v2", WIDGET_NAMESPACE)
        .get(name)
        .await
        .unwrap();
    assert!(
        at_v2.annotations().contains_key(CONVERTED_BY),
        "read at v2 through the conversion webhook: {:?}",
        at_v2.metadata
    );
}

const WIDGET_NAMESPACE: &str = "team-w";

/// The webhook bundle (issue 36's third Must-show): laid out as OLM v0 lays it out (its CA, the
/// serving Secret `<deployment>-service-cert` mounted as `apiservice-cert` and `webhook-cert`,
/// the CA hash on the pod template, its webhook configuration under a generated name trusting
/// OLM's CA, the conversion webhook on the CRD), its webhook answering with OLM's certificate
/// (the stand-in serving what the Secret holds). Adopted: the same Deployment, ReplicaSet and
/// pod UIDs and generation; the Secret no longer owned by the CSV. While the CSV and
/// Subscription exist (OLM v0 would recreate a missing configuration and rewrite the Secret),
/// the hand-over waits and says so: OLM's configuration and certificate stay and answer. Once
/// they are deleted (the garbage collector removes OLM's Role for the Secret, nothing POM
/// owns), POM writes its certificate into the Secret and its configuration trusting POM's CA
/// and OLM's (the pods serve OLM's certificate until the kubelet refreshes the volume: the
/// webhook answers then too), and retires OLM's configuration; the stand-in then serves POM's
/// certificate, as the operator reloads its files, and the webhook still answers.
#[tokio::test]
async fn adopts_a_webhook_bundle_with_no_restart_and_its_webhook_keeps_answering() {
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let Some(plane) = serving_plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    olm_v0::install_crds(&client, &crds).await.unwrap();
    let bundle = TestBundle::new("gamma", "3.0.0")
        .webhooks_served()
        .with_webhooks("/gamma");
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    let ns = "gamma-system";
    olm_v0::lay_out(&client, &Install::new(bundle.clone(), ns, Targets::All))
        .await
        .unwrap();
    Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": WIDGET_NAMESPACE}})).unwrap(),
        )
        .await
        .unwrap();
    rolled_out(&client, ns).await;
    let before = running(&client, ns).await;
    let olms_hash = template_hash(&client, ns, &bundle.deployment_name()).await;
    assert!(olms_hash.is_some(), "OLM's olmcahash on the pod template");
    let secret_name = format!("{}-service-cert", bundle.deployment_name());
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let pair = |secret: &Secret| {
        let data = secret.data.clone().unwrap();
        (data["tls.crt"].0.clone(), data["tls.key"].0.clone())
    };
    let olms = pair(&secrets.get(&secret_name).await.unwrap());
    let ca_field = |secret: &Secret| secret.data.clone().unwrap().get("olmCAKey").cloned();
    let olms_ca_field = ca_field(&secrets.get(&secret_name).await.unwrap());
    assert!(olms_ca_field.is_some(), "OLM's CA in olmCAKey");
    let server = WebhookServer::serve(&olms.0, &olms.1, 443).await.unwrap();
    webhook_answers(&client, &bundle, &server, "with-olm").await;
    let olm_configs = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&ListParams::default().labels("olm.owner=gamma.v3.0.0"))
        .await
        .unwrap();
    assert_eq!(
        olm_configs.items.len(),
        1,
        "OLM's configuration is laid out"
    );
    // Watched from here: when OLM's configuration is deleted, against when POM's certificate
    // is written into the Secret.
    let olm_config_events = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .watch(
            &kube::api::WatchParams::default().labels("olm.owner=gamma.v3.0.0"),
            olm_configs.metadata.resource_version.as_deref().unwrap(),
        )
        .await
        .unwrap();

    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "operators", &fbc).await;
    create_po(
        &client,
        "gamma",
        json!({"package": {"name": "gamma", "channel": "stable", "versionRange": "=3.0.0"},
               "installNamespace": ns,
               "adoptFrom": {"subscription": {"namespace": ns, "name": "gamma"}}}),
    )
    .await;
    // Adopted at once, OLM's CSV and Subscription still there (OLM cannot install over what
    // adoption released): POM's configuration registered, OLM's retired, POM's certificate
    // written into the released Secret, and no pod restarted.
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let poms_name = format!("v{}", bundle.crd_name());
    eventually(
        WAIT,
        "POM's configuration registered and OLM's retired",
        || async {
            let olms_left = vwcs
                .list(&ListParams::default().labels("olm.owner=gamma.v3.0.0"))
                .await
                .ok()?;
            let poms = vwcs.get_opt(&poms_name).await.ok()??;
            (olms_left.items.is_empty()
                && poms
                    .labels()
                    .get(pom_api::labels::OWNER_PO)
                    .map(String::as_str)
                    == Some("gamma"))
            .then_some(())
        },
    )
    .await;
    rolled_out(&client, ns).await;
    assert_eq!(
        running(&client, ns).await,
        before,
        "adoption restarted the operator"
    );
    // POM applied the Deployment with OLM's olmcahash kept (its pods may serve OLM's
    // certificate, far from expiring): the field is POM's now, the value OLM's.
    assert_eq!(
        template_hash(&client, ns, &bundle.deployment_name()).await,
        olms_hash,
        "POM keeps OLM's olmcahash while OLM's certificate is far from expiring"
    );
    assert!(
        applied_by_pom(&client, ns, &bundle.deployment_name()).await,
        "POM's apply of the Deployment carries the annotation"
    );
    // The Secret: released (deleting the CSV would remove nothing), POM's, with POM's
    // certificate.
    let secret = secrets.get(&secret_name).await.unwrap();
    assert_eq!(olm_marks(&secret.metadata), Vec::<String>::new());
    assert_eq!(
        secret
            .labels()
            .get(pom_api::labels::OWNER_PO)
            .map(String::as_str),
        Some("gamma")
    );
    let poms_pair = pair(&secret);
    assert_ne!(poms_pair.0, olms.0, "POM wrote its own certificate");
    // Written only after OLM's configuration (OLM's CA alone) was retired: a reloading
    // operator never serves POM's certificate to calls made through it (review M2). The API
    // server's etcd revisions order the two writes.
    let deleted_at = olm_configuration_deleted_at(olm_config_events).await;
    let written_at: u64 = secret.resource_version().unwrap().parse().unwrap();
    assert!(
        deleted_at < written_at,
        "POM's certificate (revision {written_at}) written before OLM's configuration was deleted (revision {deleted_at})"
    );
    assert_ne!(
        ca_field(&secret),
        olms_ca_field,
        "olmCAKey, which operators written for OLM read, no longer names OLM's CA"
    );
    assert_eq!(
        ca_field(&secret),
        secret.data.clone().unwrap().get("ca.crt").cloned(),
        "olmCAKey names POM's CA bundle, as ca.crt does"
    );
    // POM's CA Secret records OLM's CA (trusted until it expires; a restart keeps it).
    let ca = secrets.get("pom-webhook-ca").await.unwrap();
    assert!(
        ca.data.as_ref().unwrap().contains_key("olm-ca.crt"),
        "OLM's CA recorded beside POM's"
    );
    // The operator has not reloaded its files (one written for OLM never does; OLM rolled its
    // pods instead): it serves OLM's certificate, which POM's configuration and CRD trust.
    webhook_answers(&client, &bundle, &server, "before-the-reload").await;

    // OLM's objects deleted: only what OLM alone owned goes.
    let dp = DeleteParams::background();
    dynamic(
        &client,
        "operators.coreos.com",
        "v1alpha1",
        "Subscription",
        ns,
    )
    .delete("gamma", &dp)
    .await
    .unwrap();
    dynamic(
        &client,
        "operators.coreos.com",
        "v1alpha1",
        "ClusterServiceVersion",
        ns,
    )
    .delete("gamma.v3.0.0", &dp)
    .await
    .unwrap();
    eventually(
        WAIT,
        "the garbage collector to remove OLM's Role for the serving Secret",
        || async {
            let role = Api::<Role>::namespaced(client.clone(), ns)
                .get_opt(&secret_name)
                .await
                .ok()?;
            role.is_none().then_some(())
        },
    )
    .await;
    // Still OLM's certificate served, still trusted, whatever time passed.
    webhook_answers(&client, &bundle, &server, "olm-gone-not-reloaded").await;
    // The operator reloads the files its volume now holds (or its pods restart): the
    // stand-in serves them, and the API server trusts them through POM's configuration and CRD.
    server.reload(&poms_pair.0, &poms_pair.1).unwrap();
    webhook_answers(&client, &bundle, &server, "with-pom").await;

    let status = Api::<PlatformOperator>::all(client.clone())
        .get("gamma")
        .await
        .unwrap()
        .status
        .unwrap();
    for object in status.inventory.iter().flat_map(|b| b.objects.clone()) {
        let (group, version) = object
            .api_version
            .split_once('/')
            .unwrap_or(("", object.api_version.as_str()));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &object.kind));
        let api: Api<DynamicObject> = match &object.namespace {
            Some(n) => Api::namespaced_with(client.clone(), n, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        assert!(
            api.get_opt(&object.name).await.unwrap().is_some(),
            "{} {:?}/{} is gone after the CSV and Subscription were deleted",
            object.kind,
            object.namespace,
            object.name
        );
    }
    assert_eq!(
        pair(&secrets.get(&secret_name).await.unwrap()),
        poms_pair,
        "the serving Secret is POM's still"
    );
    assert_eq!(
        running(&client, ns).await,
        before,
        "the hand-over restarted the operator"
    );
    webhook_answers(&client, &bundle, &server, "after-olm").await;
    wait_po_condition(&client, "gamma", "Installed", "True", None).await;
    // Past the settle, over a window longer than every resync (so reconciles follow it): the
    // Deployment is not written, and its template still carries OLM's olmcahash.
    QuietWindow::new(&Manager::test_settings(vec![]))
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .open()
        .await
        .hold()
        .await;
    assert_eq!(
        template_hash(&client, ns, &bundle.deployment_name()).await,
        olms_hash,
        "still OLM's olmcahash once the adoption settled"
    );
    manager.stop().await;
}

/// The etcd revision at which the watched OLM configuration was deleted.
async fn olm_configuration_deleted_at(
    events: impl futures::Stream<
        Item = kube::Result<kube::api::WatchEvent<ValidatingWebhookConfiguration>>,
    >,
) -> u64 {
    use futures::StreamExt as _;
    let mut events = std::pin::pin!(events);
    let deleted = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            if let Ok(kube::api::WatchEvent::Deleted(config)) = event {
                return config.resource_version();
            }
        }
        None
    })
    .await
    .unwrap()
    .expect("OLM's configuration deleted");
    deleted.parse().unwrap()
}

/// The `olmcahash` of Deployment `name`'s pod template.
async fn template_hash(client: &Client, namespace: &str, name: &str) -> Option<String> {
    Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap()
        .spec?
        .template
        .metadata?
        .annotations?
        .get(olm_v0::OLM_CA_HASH)
        .cloned()
}

/// Whether POM's field manager owns the `olmcahash` of Deployment `name`'s pod template.
async fn applied_by_pom(client: &Client, namespace: &str, name: &str) -> bool {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    deployment
        .metadata
        .managed_fields
        .unwrap_or_default()
        .iter()
        .filter(|m| m.operation.as_deref() == Some("Apply"))
        .filter_map(|m| m.fields_v1.as_ref())
        .any(|f| {
            f.0.pointer("/f:spec/f:template/f:metadata/f:annotations/f:olmcahash")
                .is_some()
        })
}

/// An adopted webhook operator whose OLM certificate nears its end (OLM's CA expires in 20
/// days, its serving certificate a day earlier, within POM's 30-day margin): adoption itself
/// restarts nothing (OLM's `olmcahash` kept while adopting), then POM sets its own value on
/// the pod template, which rolls the pods onto POM's certificate (a new ReplicaSet), says so
/// in an Event, and once every pod rolled out stops trusting OLM's CA, long before it expires.
/// No test clock is needed: the deadline is real time.
#[tokio::test]
async fn an_adopted_webhook_operator_is_rolled_off_olms_certificate_before_it_expires() {
    let Some(crds) = olm_v0::require_crds() else {
        return;
    };
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    olm_v0::install_crds(&client, &crds).await.unwrap();
    let bundle = TestBundle::new("delta", "4.0.0")
        .webhooks_served()
        .with_webhooks("/delta");
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&client, "operators", &fbc, 0).await;
    let ns = "delta-system";
    let install = Install {
        ca_expires_in_days: Some(20),
        ..Install::new(bundle.clone(), ns, Targets::All)
    };
    olm_v0::lay_out(&client, &install).await.unwrap();
    rolled_out(&client, ns).await;
    let deployment = bundle.deployment_name();
    let olms_hash = template_hash(&client, ns, &deployment).await.unwrap();
    let replica_sets = || async {
        Api::<ReplicaSet>::namespaced(client.clone(), ns)
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .map(|rs| rs.name_any())
            .collect::<BTreeSet<_>>()
    };
    let olms_replica_sets = replica_sets().await;
    let before = running(&client, ns).await;

    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "operators", &fbc).await;
    create_po(
        &client,
        "delta",
        json!({"package": {"name": "delta", "channel": "stable", "versionRange": "=4.0.0"},
               "installNamespace": ns,
               "adoptFrom": {"subscription": {"namespace": ns, "name": "delta"}}}),
    )
    .await;
    // Until the hand-over settles, OLM's value and nothing restarted (the same Deployment,
    // ReplicaSet and pods), with OLM's CA recorded; then POM's value on the template: a new
    // ReplicaSet rolls the pods.
    let secrets = Api::<Secret>::namespaced(client.clone(), ns);
    let pos = Api::<PlatformOperator>::all(client.clone());
    let started = std::time::Instant::now();
    let mut olms_ca_recorded = false;
    let poms_hash = loop {
        assert!(
            started.elapsed() < WAIT,
            "timed out waiting for POM's olmcahash"
        );
        let settled = pos.get_opt("delta").await.unwrap().is_some_and(|po| {
            po.status
                .and_then(|s| s.active_hop)
                .is_some_and(|hop| hop.settled)
        });
        olms_ca_recorded |= secrets
            .get_opt("pom-webhook-ca")
            .await
            .unwrap()
            .and_then(|ca| ca.data)
            .is_some_and(|data| data.contains_key("olm-ca.crt"));
        match template_hash(&client, ns, &deployment).await {
            Some(hash) if hash.starts_with("pom-") => {
                assert!(settled, "rolled before the hand-over settled");
                break hash;
            }
            hash => {
                assert_eq!(hash.as_ref(), Some(&olms_hash), "OLM's value kept");
                assert_eq!(
                    running(&client, ns).await,
                    before,
                    "a restart before the hand-over settled"
                );
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(250)).await;
    };
    assert!(olms_ca_recorded, "OLM's CA recorded before the roll");
    assert_ne!(poms_hash, olms_hash);
    let new_replica_sets: BTreeSet<String> = eventually(WAIT, "a new ReplicaSet", || async {
        let now = replica_sets().await;
        let new: BTreeSet<String> = now.difference(&olms_replica_sets).cloned().collect();
        (!new.is_empty()).then_some(new)
    })
    .await;
    assert_eq!(new_replica_sets.len(), 1, "one roll: {new_replica_sets:?}");
    rolled_out(&client, ns).await;
    // The adoption recorded OLM's CA; every pod rolled out under POM's value, it is dropped.
    eventually(WAIT, "OLM's CA no longer trusted", || async {
        let ca = secrets.get("pom-webhook-ca").await.ok()?;
        let data = ca.data.unwrap_or_default();
        (data.contains_key("ca.crt") && !data.contains_key("olm-ca.crt")).then_some(())
    })
    .await;
    let vwcs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let poms_name = format!("v{}", bundle.crd_name());
    eventually(
        WAIT,
        "POM's configuration trusting POM's CA alone",
        || async {
            let vwc = vwcs.get(&poms_name).await.ok()?;
            let trusted = vwc.webhooks?.first()?.client_config.ca_bundle.clone()?;
            let pem = String::from_utf8(trusted.0).ok()?;
            (pem.matches("BEGIN CERTIFICATE").count() == 1).then_some(())
        },
    )
    .await;
    let uid = Api::<PlatformOperator>::all(client.clone())
        .get("delta")
        .await
        .unwrap()
        .uid()
        .unwrap();
    let note = eventually(WAIT, "a ServingCertificateRolled Event", || async {
        Api::<k8s_openapi::api::core::v1::Event>::all(client.clone())
            .list(&ListParams::default())
            .await
            .ok()?
            .items
            .into_iter()
            .find(|e| {
                e.reason.as_deref() == Some("ServingCertificateRolled")
                    && e.involved_object.uid.as_deref() == Some(uid.as_str())
            })
            .and_then(|e| e.message)
    })
    .await;
    assert!(note.contains(&deployment), "{note}");
    assert!(
        note.contains("expires at 20"),
        "the note names when OLM's certificate expires: {note}"
    );
    wait_po_condition(&client, "delta", "Installed", "True", None).await;
    // Steady: the value stays over a window longer than every resync (no reapply loop rolls
    // again: the Deployment's spec and the ReplicaSets are not written).
    QuietWindow::new(&settings)
        .no_writes_except_status(
            Api::<Deployment>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .no_writes_except_status(
            Api::<ReplicaSet>::namespaced(client.clone(), ns),
            Objects::All,
        )
        .open()
        .await
        .hold()
        .await;
    assert_eq!(
        template_hash(&client, ns, &deployment).await.as_deref(),
        Some(poms_hash.as_str())
    );
    assert_eq!(replica_sets().await.len(), olms_replica_sets.len() + 1);
    manager.stop().await;
}
