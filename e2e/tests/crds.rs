#![allow(clippy::unwrap_used, clippy::expect_used)]
//! POM's CRDs against a real API server: established, valid objects accepted, every schema and
//! CEL rule refusing bad input at admission with a message naming the field, printer columns
//! served in table form.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use kube::{Client, Resource};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::shared_control_plane;
use serde_json::{Value, json};

async fn client() -> Option<Client> {
    Some(shared_control_plane().await?.client().await.unwrap())
}

fn po_api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("platform.openshift.io", "v1alpha1", "PlatformOperator");
    Api::all_with(client, &ApiResource::from_gvk(&gvk))
}

fn catalog_api(client: Client) -> Api<DynamicObject> {
    let gvk = GroupVersionKind::gvk("platform.openshift.io", "v1alpha1", "Catalog");
    Api::all_with(client, &ApiResource::from_gvk(&gvk))
}

fn po(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

fn catalog(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": name}, "spec": spec
    }))
    .unwrap()
}

/// Creates `obj` and asserts the API server refuses it with a message containing each needle.
async fn assert_refused(api: &Api<DynamicObject>, obj: &DynamicObject, needles: &[&str]) {
    let err = api
        .create(&PostParams::default(), obj)
        .await
        .expect_err("the API server accepted an invalid object");
    let kube::Error::Api(status) = err else {
        panic!("unexpected error: {err}")
    };
    assert_eq!(status.code, 422, "{status:?}");
    for needle in needles {
        assert!(
            status.message.contains(needle),
            "message {:?} does not contain {needle:?}",
            status.message
        );
    }
}

#[tokio::test]
async fn both_crds_are_established() {
    let Some(client) = client().await else { return };
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    for name in [PlatformOperator::crd_name(), Catalog::crd_name()] {
        let crd = crds.get(name).await.unwrap();
        let established = crd
            .status
            .unwrap()
            .conditions
            .unwrap_or_default()
            .into_iter()
            .any(|c| c.type_ == "Established" && c.status == "True");
        assert!(established, "{name} is not Established");
    }
}

trait CrdName {
    fn crd_name() -> &'static str;
}
impl CrdName for PlatformOperator {
    fn crd_name() -> &'static str {
        "platformoperators.platform.openshift.io"
    }
}
impl CrdName for Catalog {
    fn crd_name() -> &'static str {
        "catalogs.platform.openshift.io"
    }
}

#[tokio::test]
async fn valid_platform_operator_and_catalog_are_accepted_with_defaults() {
    let Some(client) = client().await else { return };
    let created = po_api(client.clone())
        .create(&PostParams::default(), &po("valid-po", json!({"package": {"name": "cert-manager", "channel": "stable-v1", "versionRange": ">=1.2.0 <2.0.0-0"}})))
        .await
        .unwrap();
    assert_eq!(
        created.data["spec"]["upgradeGate"], "Auto",
        "default upgradeGate"
    );
    assert_eq!(
        created.data["spec"]["progressDeadline"], "10m",
        "default progressDeadline"
    );
    // The typed view reads what the server stored.
    let typed: PlatformOperator =
        serde_json::from_value(serde_json::to_value(&created).unwrap()).unwrap();
    assert_eq!(typed.spec.package.name, "cert-manager");

    let created = catalog_api(client.clone())
        .create(&PostParams::default(), &catalog("valid-catalog", json!({"source": {"image": {"ref": "127.0.0.1:5000/catalog:latest", "pollInterval": "5m"}}})))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["priority"], 0, "default priority");
    catalog_api(client)
        .create(&PostParams::default(), &catalog("valid-cm-catalog", json!({"source": {"configMap": {"name": "fbc", "namespace": "default", "key": "catalog.json"}}, "priority": 10})))
        .await
        .unwrap();
}

#[tokio::test]
async fn package_name_must_be_a_dns1123_label() {
    let Some(client) = client().await else { return };
    let api = po_api(client);
    assert_refused(
        &api,
        &po("bad-name-1", json!({"package": {"name": "Foo_Bar"}})),
        &["spec.package.name"],
    )
    .await;
    assert_refused(
        &api,
        &po("bad-name-2", json!({"package": {"name": "-leading-dash"}})),
        &["spec.package.name"],
    )
    .await;
}

#[tokio::test]
async fn package_name_is_at_most_56_characters() {
    let Some(client) = client().await else { return };
    let long = "a".repeat(57);
    assert_refused(
        &po_api(client),
        &po("long-name", json!({"package": {"name": long}})),
        &["spec.package.name", "56"],
    )
    .await;
}

#[tokio::test]
async fn package_name_is_required() {
    let Some(client) = client().await else { return };
    assert_refused(
        &po_api(client),
        &po("no-name", json!({"package": {}})),
        &["spec.package.name", "Required"],
    )
    .await;
}

#[tokio::test]
async fn package_name_is_immutable() {
    let Some(client) = client().await else { return };
    let api = po_api(client);
    api.create(
        &PostParams::default(),
        &po("immutable-po", json!({"package": {"name": "first"}})),
    )
    .await
    .unwrap();
    let err = api
        .patch(
            "immutable-po",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"package": {"name": "second"}}})),
        )
        .await
        .expect_err("the package name changed");
    let kube::Error::Api(status) = err else {
        panic!("{err}")
    };
    assert!(
        status.message.contains("spec.package.name") && status.message.contains("immutable"),
        "{}",
        status.message
    );
}

/// Adding or removing `spec.installNamespace` (or `watchNamespace`) would move the operator:
/// the field's own `self == oldSelf` does not run then, the spec-level rule does (issue 25
/// item 5).
#[tokio::test]
async fn install_namespace_can_be_neither_added_nor_removed() {
    let Some(client) = client().await else { return };
    let api = po_api(client);
    api.create(
        &PostParams::default(),
        &po("ns-added", json!({"package": {"name": "first"}})),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &po(
            "ns-removed",
            json!({"package": {"name": "second"}, "installNamespace": "second-ns", "watchNamespace": "second-ns"}),
        ),
    )
    .await
    .unwrap();
    for (name, patch, field) in [
        (
            "ns-added",
            json!({"spec": {"installNamespace": "elsewhere"}}),
            "spec.installNamespace",
        ),
        (
            "ns-removed",
            json!({"spec": {"installNamespace": null}}),
            "spec.installNamespace",
        ),
        (
            "ns-removed",
            json!({"spec": {"watchNamespace": null}}),
            "spec.watchNamespace",
        ),
    ] {
        let err = api
            .patch(name, &PatchParams::default(), &Patch::Merge(patch.clone()))
            .await
            .expect_err(&format!("{patch} was accepted"));
        let kube::Error::Api(status) = err else {
            panic!("{err}")
        };
        assert!(
            status.message.contains(field)
                && status.message.contains("neither be added nor removed"),
            "{}",
            status.message
        );
    }
}

#[tokio::test]
async fn version_range_characters_and_length_are_checked() {
    let Some(client) = client().await else { return };
    let api = po_api(client);
    assert_refused(
        &api,
        &po(
            "bad-range-1",
            json!({"package": {"name": "p", "versionRange": ">=1.0.0; rm -rf"}}),
        ),
        &["spec.package.versionRange"],
    )
    .await;
    let long = format!(">={}", "1".repeat(70));
    assert_refused(
        &api,
        &po(
            "bad-range-2",
            json!({"package": {"name": "p", "versionRange": long}}),
        ),
        &["spec.package.versionRange", "64"],
    )
    .await;
    assert_refused(
        &api,
        &po(
            "bad-range-3",
            json!({"package": {"name": "p"}, "steadyStateVersionRange": "1.2.3 $"}),
        ),
        &["spec.steadyStateVersionRange"],
    )
    .await;
}

#[tokio::test]
async fn upgrade_gate_is_an_enum() {
    let Some(client) = client().await else { return };
    assert_refused(
        &po_api(client),
        &po(
            "bad-gate",
            json!({"package": {"name": "p"}, "upgradeGate": "Readiness"}),
        ),
        &["spec.upgradeGate", "Auto", "Rollout", "OperatorCondition"],
    )
    .await;
}

#[tokio::test]
async fn durations_are_checked() {
    let Some(client) = client().await else { return };
    assert_refused(
        &po_api(client.clone()),
        &po(
            "bad-deadline",
            json!({"package": {"name": "p"}, "progressDeadline": "ten minutes"}),
        ),
        &["spec.progressDeadline"],
    )
    .await;
    assert_refused(
        &catalog_api(client),
        &catalog(
            "bad-poll",
            json!({"source": {"image": {"ref": "r/c:1", "pollInterval": "5 minutes"}}}),
        ),
        &["spec.source.image.pollInterval"],
    )
    .await;
}

#[tokio::test]
async fn install_namespace_must_be_a_dns1123_label() {
    let Some(client) = client().await else { return };
    assert_refused(
        &po_api(client),
        &po(
            "bad-ns",
            json!({"package": {"name": "p"}, "installNamespace": "Not_A_Namespace"}),
        ),
        &["spec.installNamespace"],
    )
    .await;
}

#[tokio::test]
async fn catalog_needs_exactly_one_source() {
    let Some(client) = client().await else { return };
    let api = catalog_api(client);
    assert_refused(&api, &catalog("two-sources", json!({"source": {"image": {"ref": "r/c:1"}, "configMap": {"name": "c", "namespace": "default"}}})), &["spec.source", "exactly one"]).await;
    assert_refused(
        &api,
        &catalog("no-source", json!({"source": {}})),
        &["spec.source", "exactly one"],
    )
    .await;
}

#[tokio::test]
async fn printer_columns_are_served_as_a_table() {
    let Some(client) = client().await else { return };
    po_api(client.clone())
        .create(
            &PostParams::default(),
            &po("table-po", json!({"package": {"name": "table-pkg"}})),
        )
        .await
        .unwrap();
    let request = http::Request::get(format!(
        "{}/table-po",
        PlatformOperator::url_path(&(), None)
    ))
    .header("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
    .body(Vec::new())
    .unwrap();
    let table: Value = client.request(request).await.unwrap();
    let names: Vec<&str> = table["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Package",
            "Installed",
            "Pin",
            "Status",
            "Upgradeable",
            "Age"
        ]
    );
    assert_eq!(table["rows"][0]["cells"][1], "table-pkg");
}
