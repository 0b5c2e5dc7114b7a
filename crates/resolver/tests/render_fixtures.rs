//! Rendering our own fixture bundles (tests/fixtures/bundles): what POM applies for a
//! registry+v1 bundle with permissions and clusterPermissions, for a plain+v0 bundle, and the
//! refusals for bundles POM cannot install (OwnNamespace only, webhooks, APIServices).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use pom_resolver::render::{
    BundleFiles, BundleFormat, InstallMode, RenderError, RenderOptions, RenderedBundle, render,
};
use serde_json::{Value, json};

fn fixture(name: &str) -> BundleFiles {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bundles")
        .join(name);
    BundleFiles::load_dir(&dir).unwrap()
}

fn render_fixture(name: &str, operator_condition: bool) -> Result<RenderedBundle, RenderError> {
    let opts = RenderOptions {
        operator_condition,
        ..RenderOptions::new("widgets")
    };
    render(&fixture(name), &opts)
}

/// (kind, namespace, name) of every object, in apply order.
fn identities(bundle: &RenderedBundle) -> Vec<(String, String, String)> {
    bundle
        .objects
        .iter()
        .map(|o| {
            let s = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                s(&o["kind"]),
                s(&o["metadata"]["namespace"]),
                s(&o["metadata"]["name"]),
            )
        })
        .collect()
}

fn find<'a>(bundle: &'a RenderedBundle, kind: &str, name_prefix: &str) -> Vec<&'a Value> {
    bundle
        .objects
        .iter()
        .filter(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with(name_prefix)
        })
        .collect()
}

#[test]
fn registry_v1_renders_in_apply_order() {
    let bundle = render_fixture("registry-v1", false).unwrap();
    assert_eq!(bundle.format, BundleFormat::RegistryV1);
    assert_eq!(bundle.csv_name.as_deref(), Some("widget-operator.v1.2.0"));
    assert_eq!(bundle.package_name.as_deref(), Some("widget-operator"));
    assert_eq!(bundle.crds, vec!["widgets.example.com"]);
    assert_eq!(bundle.deployments, vec!["widget-operator-controller"]);
    assert_eq!(bundle.service_accounts, vec!["widget-operator"]);

    let kinds: Vec<String> = identities(&bundle)
        .into_iter()
        .map(|(kind, _, _)| kind)
        .collect();
    let rank = |kind: &str| match kind {
        "CustomResourceDefinition" => 1,
        "ServiceAccount" => 2,
        "ClusterRole" | "Role" => 3,
        "ClusterRoleBinding" | "RoleBinding" => 4,
        "Deployment" => 6,
        _ => 5,
    };
    let ranks: Vec<u8> = kinds.iter().map(|k| rank(k)).collect();
    let mut sorted = ranks.clone();
    sorted.sort();
    assert_eq!(ranks, sorted, "apply order: {kinds:?}");
    assert_eq!(
        kinds.first().map(String::as_str),
        Some("CustomResourceDefinition")
    );
    assert_eq!(kinds.last().map(String::as_str), Some("Deployment"));
    // The CSV itself is not applied.
    assert!(!kinds.iter().any(|k| k == "ClusterServiceVersion"));
}

#[test]
fn registry_v1_generates_service_accounts_and_rbac() {
    let bundle = render_fixture("registry-v1", false).unwrap();

    // The bundle's own ServiceAccount (with its pull secret) wins over the generated one, and
    // gets the install namespace; widget-metrics (named only by clusterPermissions) is generated.
    let accounts = find(&bundle, "ServiceAccount", "");
    assert_eq!(accounts.len(), 2, "{accounts:?}");
    let operator_sa = find(&bundle, "ServiceAccount", "widget-operator")[0];
    assert_eq!(
        operator_sa["imagePullSecrets"][0]["name"],
        "widget-pull-secret"
    );
    assert_eq!(operator_sa["metadata"]["namespace"], "widgets");
    assert_eq!(
        find(&bundle, "ServiceAccount", "widget-metrics")[0]["metadata"]["namespace"],
        "widgets"
    );

    // permissions: a Role + RoleBinding in the install namespace...
    let roles = find(&bundle, "Role", "widget-operator.v1.2.0-widget-operator-");
    assert_eq!(roles.len(), 1);
    let role = roles[0];
    let role_name = role["metadata"]["name"].as_str().unwrap();
    assert!(role_name.len() <= 63);
    assert_eq!(role["metadata"]["namespace"], "widgets");
    assert_eq!(role["rules"][1]["resources"], json!(["leases"]));
    let binding = find(&bundle, "RoleBinding", role_name)[0];
    assert_eq!(binding["metadata"]["namespace"], "widgets");
    assert_eq!(
        binding["roleRef"],
        json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name})
    );
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": "widget-operator", "namespace": "widgets"}])
    );

    // ...and, since the operator watches all namespaces, the same rules cluster-wide plus read
    // access to namespaces; clusterPermissions give one ClusterRole per entry.
    let cluster_roles = find(&bundle, "ClusterRole", "widget-operator.v1.2.0-");
    assert_eq!(cluster_roles.len(), 3, "{cluster_roles:?}");
    let promoted = cluster_roles
        .iter()
        .find(|r| {
            r["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|rule| rule["resources"] == json!(["namespaces"]))
        })
        .expect("promoted permissions");
    assert_eq!(promoted["rules"][0]["resources"], json!(["configmaps"]));
    assert!(promoted["metadata"].get("namespace").is_none());
    let metrics_role = find(
        &bundle,
        "ClusterRole",
        "widget-operator.v1.2.0-widget-metrics-",
    )[0];
    assert_eq!(
        metrics_role["rules"],
        json!([{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}])
    );
    let metrics_binding = find(
        &bundle,
        "ClusterRoleBinding",
        metrics_role["metadata"]["name"].as_str().unwrap(),
    )[0];
    assert_eq!(metrics_binding["subjects"][0]["name"], "widget-metrics");
    assert_eq!(metrics_binding["subjects"][0]["namespace"], "widgets");

    // Names are distinct and stable across renders.
    let again = render_fixture("registry-v1", false).unwrap();
    assert_eq!(bundle, again);
}

#[test]
fn registry_v1_deployment_follows_olm() {
    let bundle = render_fixture("registry-v1", false).unwrap();
    let deployment = find(&bundle, "Deployment", "widget-operator-controller")[0];
    assert_eq!(deployment["apiVersion"], "apps/v1");
    assert_eq!(deployment["metadata"]["namespace"], "widgets");
    assert_eq!(
        deployment["metadata"]["labels"],
        json!({"app.kubernetes.io/name": "widget-operator"})
    );
    assert_eq!(deployment["spec"]["revisionHistoryLimit"], 1);
    let annotations = &deployment["spec"]["template"]["metadata"]["annotations"];
    // AllNamespaces: the watch namespace annotation is empty.
    assert_eq!(annotations["olm.targetNamespaces"], "");
    // CSV annotations are copied; the pod template's own value wins.
    assert_eq!(
        annotations["containerImage"],
        "quay.example.com/widget/operator:1.2.0"
    );
    assert_eq!(annotations["capabilities"], "from-the-pod-template");
    // Without the OperatorCondition gate nothing is injected.
    let env = &deployment["spec"]["template"]["spec"]["containers"][0]["env"];
    assert_eq!(env.as_array().unwrap().len(), 1);
}

#[test]
fn operator_condition_wiring() {
    let bundle = render_fixture("registry-v1", true).unwrap();
    let deployment = find(&bundle, "Deployment", "widget-operator-controller")[0];
    for container in deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
    {
        let env = container["env"].as_array().unwrap();
        let injected: Vec<&Value> = env
            .iter()
            .filter(|e| e["name"] == "OPERATOR_CONDITION_NAME")
            .collect();
        assert_eq!(
            injected,
            vec![&json!({"name": "OPERATOR_CONDITION_NAME", "value": "widget-operator.v1.2.0"})]
        );
    }
    let role = find(&bundle, "Role", "widget-operator.v1.2.0")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "widget-operator.v1.2.0")
        .expect("OperatorCondition role");
    assert_eq!(role["rules"][0]["resources"], json!(["operatorconditions"]));
    assert_eq!(
        role["rules"][0]["resourceNames"],
        json!(["widget-operator.v1.2.0"])
    );
    let binding = find(&bundle, "RoleBinding", "widget-operator.v1.2.0")
        .into_iter()
        .find(|r| r["metadata"]["name"] == "widget-operator.v1.2.0")
        .expect("OperatorCondition binding");
    assert_eq!(binding["subjects"][0]["name"], "widget-operator");
}

#[test]
fn registry_v1_copies_manifests_into_the_install_namespace() {
    let bundle = render_fixture("registry-v1", false).unwrap();
    // A namespaced manifest is moved to the install namespace, whatever it said.
    assert_eq!(
        find(&bundle, "Service", "widget-metrics")[0]["metadata"]["namespace"],
        "widgets"
    );
    assert_eq!(
        find(&bundle, "ConfigMap", "widget-defaults")[0]["metadata"]["namespace"],
        "widgets"
    );
    // A cluster-scoped one has none.
    assert!(
        find(&bundle, "ClusterRole", "widget-viewer")[0]["metadata"]
            .get("namespace")
            .is_none()
    );
    // Server-owned fields are dropped.
    let crd = find(&bundle, "CustomResourceDefinition", "widgets.example.com")[0];
    assert!(crd.get("status").is_none());
    assert!(crd["metadata"].get("creationTimestamp").is_none());
}

#[test]
fn registry_v1_properties_from_csv_and_metadata() {
    let bundle = render_fixture("registry-v1", false).unwrap();
    // The CSV annotation and properties.yaml both say 4.20: kept once.
    assert_eq!(
        bundle.property_values("olm.maxOpenShiftVersion"),
        vec![&json!("4.20")]
    );
    assert_eq!(
        bundle.property_values("example.com/note"),
        vec![&json!({"written": "by-the-fixture"})]
    );
}

#[test]
fn plain_v0_applies_manifests_as_they_are() {
    let bundle = render_fixture("plain-v0", false).unwrap();
    assert_eq!(bundle.format, BundleFormat::PlainV0);
    assert_eq!(bundle.csv_name, None);
    assert_eq!(bundle.crds, vec!["gadgetclasses.example.com"]);
    assert_eq!(bundle.deployments, vec!["gadget-controller"]);
    assert_eq!(bundle.service_accounts, vec!["default"]);
    assert_eq!(
        identities(&bundle),
        vec![
            (
                "CustomResourceDefinition".into(),
                "".into(),
                "gadgetclasses.example.com".into()
            ),
            (
                "ConfigMap".into(),
                "widgets".into(),
                "gadget-settings".into()
            ),
            ("GadgetClass".into(), "".into(), "standard".into()),
            (
                "Deployment".into(),
                "widgets".into(),
                "gadget-controller".into()
            ),
        ]
    );
}

#[test]
fn own_namespace_only_installs_own_namespace_by_default() {
    let bundle = render_fixture("own-namespace-only", false).unwrap();
    assert_eq!(bundle.install_mode, Some(InstallMode::OwnNamespace));
    assert_eq!(bundle.watch_namespace, "widgets");
    let deployment = bundle
        .objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
        "widgets"
    );
}

#[test]
fn webhooks_are_refused() {
    let err = render_fixture("webhooks", false).unwrap_err();
    assert!(
        matches!(&err, RenderError::WebhooksNotSupported { webhooks, .. }
        if webhooks == &["ValidatingAdmissionWebhook vwidget.example.com"])
    );
    assert!(err.to_string().contains("spec.webhookdefinitions"));
}

#[test]
fn owned_apiservices_are_refused() {
    let err = render_fixture("apiservice", false).unwrap_err();
    assert!(
        matches!(&err, RenderError::ApiServicesNotSupported { apiservices, .. }
        if apiservices == &["v1beta1.metrics.example.com"])
    );
    assert!(err.to_string().contains("apiservicedefinitions.owned"));
}
