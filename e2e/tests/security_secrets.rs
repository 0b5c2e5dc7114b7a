#![allow(clippy::unwrap_used, clippy::expect_used)]
//! No cluster-wide Secret read (issue 22 item 3), against a real API server. The manager runs
//! under exactly the shipped RBAC and admission guard (its ServiceAccount's token) and installs
//! an operator with webhooks, whose serving certificate POM issues from its own CA:
//! - the API server says the manager may not read a Secret in any namespace (nor list them),
//!   but may read its webhook CA by name and pull secrets in its own namespace;
//! - the install still succeeds: the CA Secret is the only Secret read, the serving Secret is
//!   written from the record the CA Secret keeps;
//! - a reconcile after a restart issues nothing new (the record is read back);
//! - uninstalling removes the Secrets it never read.

use std::time::Duration;

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SelfSubjectAccessReview, SelfSubjectAccessReviewSpec,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Client, Config};
use pom_api::PlatformOperator;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_po_condition};
use pom_e2e::shipped::{apply_kubernetes_manifests, service_account_kubeconfig};
use serde_json::json;

const NAMESPACE: &str = "openshift-platform-operators";
const SERVICE_ACCOUNT: &str = "platform-operators-manager";
const PACKAGE: &str = "hooked";
const WAIT: Duration = Duration::from_secs(120);

/// Whether the manager may `verb` `secrets` (named `name`, in `namespace`).
async fn may(manager: &Client, verb: &str, namespace: Option<&str>, name: Option<&str>) -> bool {
    let review = SelfSubjectAccessReview {
        spec: SelfSubjectAccessReviewSpec {
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.into()),
                resource: Some("secrets".into()),
                namespace: namespace.map(str::to_owned),
                name: name.map(str::to_owned),
                ..ResourceAttributes::default()
            }),
            ..SelfSubjectAccessReviewSpec::default()
        },
        ..SelfSubjectAccessReview::default()
    };
    let answer = Api::<SelfSubjectAccessReview>::all(manager.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap();
    answer.status.unwrap().allowed
}

#[tokio::test]
async fn the_manager_reads_no_secret_but_its_own_and_still_runs_webhook_operators() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let admin = plane.client().await.unwrap();
    apply_kubernetes_manifests(&admin).await.unwrap();
    let kubeconfig = service_account_kubeconfig(
        &plane,
        &admin,
        NAMESPACE,
        SERVICE_ACCOUNT,
        "manager-sa.kubeconfig",
    )
    .await
    .unwrap();
    let config = Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).unwrap(),
        &kube::config::KubeConfigOptions::default(),
    )
    .await
    .unwrap();
    let manager_client = Client::try_from(config).unwrap();

    // What the API server lets the manager read.
    for (verb, namespace, name, allowed) in [
        ("get", Some("default"), Some("anything"), false),
        ("get", Some(PACKAGE), Some("hooked-cert"), false),
        ("list", None, None, false),
        ("watch", None, None, false),
        ("get", Some(PACKAGE), Some("pom-webhook-ca"), true),
        ("get", Some(NAMESPACE), Some("a-pull-secret"), true),
        ("get", Some("openshift-config"), Some("pull-secret"), false),
    ] {
        assert_eq!(
            may(&manager_client, verb, namespace, name).await,
            allowed,
            "{verb} secrets {namespace:?}/{name:?}"
        );
    }

    let bundle = TestBundle::new(PACKAGE, "1.0.0").with_webhooks("/v1");
    let fbc = catalog_json(std::slice::from_ref(&bundle), &[]);
    configmap_catalog(&admin, "local", &fbc, 0).await;
    create_po(&admin, PACKAGE, json!({"package": {"name": PACKAGE}})).await;
    let manager = Manager::start(manager_client.clone(), Manager::test_settings(vec![]));
    wait_po_condition(
        &admin,
        PACKAGE,
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), PACKAGE);
    let serving_name = format!("{}-service-cert", bundle.deployment_name());
    let serving = secrets.get(&serving_name).await.unwrap();
    let ca = secrets.get("pom-webhook-ca").await.unwrap();
    let record = ca.data.as_ref().unwrap();
    assert_eq!(
        record.get(&format!("{serving_name}.tls.crt")),
        serving.data.as_ref().unwrap().get("tls.crt"),
        "the CA Secret keeps the serving certificate it was written from"
    );
    manager.stop().await;

    // A restarted manager reads the record back: a serving Secret deleted by hand is written
    // again with the same certificate, not a new one (and without reading it).
    let manager = Manager::start(manager_client.clone(), Manager::test_settings(vec![]));
    secrets
        .delete(&serving_name, &DeleteParams::default())
        .await
        .unwrap();
    let pos: Api<PlatformOperator> = Api::all(admin.clone());
    pos.patch(
        PACKAGE,
        &kube::api::PatchParams::default(),
        &kube::api::Patch::Merge(json!({"metadata": {"annotations": {"e2e/poke": "1"}}})),
    )
    .await
    .unwrap();
    let again = eventually(WAIT, "the serving Secret written again", || async {
        secrets.get_opt(&serving_name).await.ok()?
    })
    .await;
    assert_eq!(
        again.data.as_ref().unwrap().get("tls.crt"),
        serving.data.as_ref().unwrap().get("tls.crt"),
        "the serving certificate comes back from the record, not issued again"
    );

    // Uninstall removes the Secrets the manager never read.
    pos.delete(PACKAGE, &DeleteParams::default()).await.unwrap();
    eventually(WAIT, "the PlatformOperator to be gone", || async {
        pos.get_opt(PACKAGE).await.ok()?.is_none().then_some(())
    })
    .await;
    for name in [serving_name.as_str(), "pom-webhook-ca"] {
        assert!(
            secrets.get_opt(name).await.unwrap().is_none(),
            "Secret {name} left behind"
        );
    }
    manager.stop().await;
}

/// A bundle Secret whose name is taken by a Secret this PlatformOperator did not create (here
/// an admin's, in a namespace handed to the PO) is refused before anything is written, without
/// the manager reading it, and the PlatformOperator can still be deleted: nothing it did not
/// write is in its inventory.
#[tokio::test]
async fn a_secret_pom_did_not_create_is_refused_before_anything_is_written() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::Namespace;
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let admin = plane.client().await.unwrap();
    Api::<Namespace>::all(admin.clone())
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "keeper",
                "annotations": {pom_api::labels::ADOPT: "keeper"}}}))
            .unwrap(),
        )
        .await
        .unwrap();
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), "keeper");
    let theirs: Secret = serde_json::from_value(
        json!({"metadata": {"name": "settings"}, "stringData": {"owner": "the admin"}}),
    )
    .unwrap();
    let theirs = secrets
        .create(&PostParams::default(), &theirs)
        .await
        .unwrap();
    let bundle = TestBundle::new("keeper", "1.0.0").with_object(json!({
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "settings"},
        "stringData": {"owner": "the bundle"}
    }));
    configmap_catalog(
        &admin,
        "local",
        &catalog_json(std::slice::from_ref(&bundle), &[]),
        0,
    )
    .await;
    create_po(
        &admin,
        "keeper",
        json!({"package": {"name": "keeper"}, "installNamespace": "keeper"}),
    )
    .await;
    let manager = Manager::start(admin.clone(), Manager::test_settings(vec![]));
    let message = wait_po_condition(
        &admin,
        "keeper",
        "Installed",
        "False",
        Some("AdoptionRefused"),
    )
    .await;
    assert!(
        message.contains("Secret settings") && message.contains("keeper"),
        "{message}"
    );
    assert!(
        Api::<Deployment>::namespaced(admin.clone(), "keeper")
            .get_opt(&bundle.deployment_name())
            .await
            .unwrap()
            .is_none(),
        "nothing of the refused bundle is applied"
    );
    let pos: Api<PlatformOperator> = Api::all(admin.clone());
    pos.delete("keeper", &DeleteParams::default())
        .await
        .unwrap();
    eventually(WAIT, "the PlatformOperator to be gone", || async {
        pos.get_opt("keeper").await.ok()?.is_none().then_some(())
    })
    .await;
    let kept = secrets.get("settings").await.unwrap();
    assert_eq!(
        kept.metadata.resource_version, theirs.metadata.resource_version,
        "the admin's Secret is as it was"
    );
    manager.stop().await;
}
