//! Rendering our own fixture bundles (tests/fixtures/bundles): what POM applies for a
//! registry+v1 bundle with permissions and clusterPermissions, for a plain+v0 bundle, and the
//! refusals for bundles POM cannot install (APIServices), and webhooks as OLM renders them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use pom_render::webhooks::inject_ca_bundle;
use pom_render::{
    BundleFiles, BundleFormat, CertificateSource, ContentException, ContentRule, DeploymentConfig,
    InstallMode, Lift, PowerClass, ProxyEnv, RenderError, RenderOptions, RenderedBundle,
    WebhookService, render,
};
use serde_json::{Value, json};

fn fixture(name: &str) -> BundleFiles {
    BundleFiles::load_dir(&fixture_dir(name)).unwrap()
}

fn fixture_dir(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/bundles")
        .join(name)
}

/// `files` with `path` replaced or added.
fn with_file(files: &BundleFiles, path: &str, bytes: Vec<u8>) -> BundleFiles {
    let mut map = (*files.files).clone();
    map.insert(path.to_owned(), bytes);
    BundleFiles::new(map)
}

fn csv_text(files: &BundleFiles) -> String {
    String::from_utf8(files.get("manifests/csv.yaml").unwrap().to_vec()).unwrap()
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

/// `spec.config` and the cluster proxy reach every container of every Deployment of a
/// registry+v1 bundle (issue 23 items 3, 4), with `OPERATOR_CONDITION_NAME` kept as rendering
/// set it; the admin's env names a proxy variable, so none of the cluster's is injected.
#[test]
fn deployment_config_and_proxy_reach_every_registry_v1_deployment() {
    let config = DeploymentConfig::from_json(json!({
        "env": [{"name": "LOG_LEVEL", "value": "debug"}],
        "nodeSelector": {"node-role.kubernetes.io/infra": ""},
        "resources": {"limits": {"memory": "256Mi"}},
    }))
    .unwrap();
    let proxy = ProxyEnv {
        http_proxy: "http://proxy:3128".into(),
        https_proxy: String::new(),
        no_proxy: ".cluster.local".into(),
    };
    let opts = RenderOptions {
        operator_condition: true,
        deployment_config: Some(config.clone()),
        proxy: Some(proxy.clone()),
        ..RenderOptions::new("widgets")
    };
    let bundle = render(&fixture("registry-v1"), &opts).unwrap();
    let deployments = find(&bundle, "Deployment", "");
    assert!(!deployments.is_empty());
    for deployment in deployments {
        let pod = &deployment["spec"]["template"]["spec"];
        assert_eq!(
            pod["nodeSelector"],
            json!({"node-role.kubernetes.io/infra": ""})
        );
        for container in pod["containers"].as_array().unwrap() {
            assert_eq!(
                container["resources"],
                json!({"limits": {"memory": "256Mi"}})
            );
            let env: Vec<(&str, &str)> = container["env"]
                .as_array()
                .unwrap()
                .iter()
                .map(|e| {
                    (
                        e["name"].as_str().unwrap(),
                        e["value"].as_str().unwrap_or(""),
                    )
                })
                .collect();
            for expected in [
                ("LOG_LEVEL", "debug"),
                ("HTTP_PROXY", "http://proxy:3128"),
                ("NO_PROXY", ".cluster.local"),
                ("OPERATOR_CONDITION_NAME", "widget-operator.v1.2.0"),
            ] {
                assert!(env.contains(&expected), "{expected:?} in {env:?}");
            }
            assert!(
                !env.iter().any(|(name, _)| *name == "HTTPS_PROXY"),
                "{env:?}"
            );
        }
    }
    // Without either, rendering is unchanged.
    let plain_render = render_fixture("registry-v1", true).unwrap();
    let empty = RenderOptions {
        operator_condition: true,
        deployment_config: Some(DeploymentConfig::default()),
        proxy: Some(ProxyEnv::default()),
        ..RenderOptions::new("widgets")
    };
    assert_eq!(
        render(&fixture("registry-v1"), &empty).unwrap(),
        plain_render
    );
}

/// A plain+v0 bundle's manifests are applied as they are: a configuration for it is refused
/// (not silently dropped), and no proxy is injected into it.
#[test]
fn deployment_config_is_refused_for_a_plain_bundle_and_no_proxy_is_injected() {
    let configured = RenderOptions {
        deployment_config: Some(
            DeploymentConfig::from_json(json!({"env": [{"name": "A", "value": "b"}]})).unwrap(),
        ),
        ..RenderOptions::new("widgets")
    };
    assert!(matches!(
        render(&fixture("plain-v0"), &configured),
        Err(RenderError::ConfigOnPlainBundle)
    ));
    let proxied = RenderOptions {
        proxy: Some(ProxyEnv {
            http_proxy: "http://proxy:3128".into(),
            ..ProxyEnv::default()
        }),
        ..RenderOptions::new("widgets")
    };
    assert_eq!(
        render(&fixture("plain-v0"), &proxied).unwrap(),
        render_fixture("plain-v0", false).unwrap()
    );
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

fn object<'a>(bundle: &'a RenderedBundle, kind: &str, name: &str) -> &'a Value {
    bundle
        .objects
        .iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in {:?}", identities(bundle)))
}

/// OLM's rendering of `spec.webhookdefinitions`: one Service per serving Deployment, one
/// configuration per admission webhook calling it, the conversion set on the CRD (whatever the
/// author's CRD said), the serving certificate mounted where controller-runtime and OLM v0's
/// apiserver path read it, in every container, replacing the author's own mount.
#[test]
fn webhooks_render_as_olm_renders_them() {
    let bundle = render_fixture("webhooks", false).unwrap();
    let service = object(&bundle, "Service", "webhooks-controller-service");
    assert_eq!(service["metadata"]["namespace"], "widgets");
    assert_eq!(service["spec"]["selector"], json!({"app": "x"}));
    assert_eq!(
        service["spec"]["ports"],
        json!([{"name": "443", "port": 443, "targetPort": 9443, "protocol": "TCP"}])
    );
    assert_eq!(
        bundle.webhook_services,
        vec![WebhookService {
            namespace: "widgets".into(),
            name: "webhooks-controller-service".into(),
            secret: "webhooks-controller-service-cert".into(),
            deployment: "webhooks-controller".into(),
        }]
    );

    let validating = object(
        &bundle,
        "ValidatingWebhookConfiguration",
        "vwidget.example.com",
    );
    let hook = &validating["webhooks"][0];
    assert_eq!(hook["name"], "vwidget.example.com");
    assert_eq!(
        hook["clientConfig"],
        json!({"service": {"namespace": "widgets", "name": "webhooks-controller-service", "port": 443, "path": "/validate"}})
    );
    assert_eq!(hook["failurePolicy"], "Fail");
    assert_eq!(hook["sideEffects"], "None");
    // The author's selector, plus: never an object POM manages.
    assert_eq!(
        hook["objectSelector"],
        json!({"matchLabels": {"tier": "gold"}, "matchExpressions": [
            {"key": "platform.openshift.io/owner", "operator": "DoesNotExist"}
        ]})
    );
    // AllNamespaces: every namespace but the platform's.
    let excluded = &hook["namespaceSelector"]["matchExpressions"][0];
    assert_eq!(excluded["operator"], "NotIn");
    for ns in ["kube-system", "openshift-monitoring", "default"] {
        assert!(
            excluded["values"].as_array().unwrap().contains(&json!(ns)),
            "{ns} not excluded: {excluded}"
        );
    }
    assert_eq!(
        hook["namespaceSelector"]["matchExpressions"][1],
        json!({"key": "openshift.io/run-level", "operator": "DoesNotExist"})
    );
    assert!(hook.get("caBundle").is_none() && hook["clientConfig"].get("caBundle").is_none());

    let mutating = object(
        &bundle,
        "MutatingWebhookConfiguration",
        "mwidget.example.com",
    );
    assert_eq!(mutating["webhooks"][0]["reinvocationPolicy"], "IfNeeded");

    let crd = object(&bundle, "CustomResourceDefinition", "widgets.example.com");
    assert_eq!(
        crd["spec"]["conversion"],
        json!({"strategy": "Webhook", "webhook": {
            "clientConfig": {"service": {"namespace": "widgets", "name": "webhooks-controller-service", "port": 443, "path": "/convert"}},
            "conversionReviewVersions": ["v1"],
        }})
    );

    let deployment = object(&bundle, "Deployment", "webhooks-controller");
    let pod = &deployment["spec"]["template"]["spec"];
    let volumes = pod["volumes"].as_array().unwrap();
    assert!(
        volumes.iter().any(|v| v["name"] == "cert"),
        "the author's volume stays"
    );
    for (name, items) in [
        (
            "webhook-cert",
            json!([{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]),
        ),
        (
            "apiservice-cert",
            json!([{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]),
        ),
    ] {
        let volume = volumes.iter().find(|v| v["name"] == name).unwrap();
        assert_eq!(
            volume["secret"]["secretName"],
            "webhooks-controller-service-cert"
        );
        assert_eq!(volume["secret"]["items"], items);
    }
    for container in pod["containers"].as_array().unwrap() {
        let mounts = container["volumeMounts"].as_array().unwrap();
        let at = |path: &str| {
            mounts
                .iter()
                .filter(|m| m["mountPath"].as_str().unwrap().trim_end_matches('/') == path)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            at("/tmp/k8s-webhook-server/serving-certs").len(),
            1,
            "{mounts:?}"
        );
        assert_eq!(
            at("/tmp/k8s-webhook-server/serving-certs")[0]["name"],
            "webhook-cert"
        );
        assert_eq!(
            at("/apiserver.local.config/certificates")[0]["name"],
            "apiservice-cert"
        );
    }
    // Webhook configurations are applied after the Deployment that serves them.
    let position = |kind: &str| {
        bundle
            .objects
            .iter()
            .position(|o| o["kind"] == kind)
            .unwrap()
    };
    assert!(position("Deployment") < position("ValidatingWebhookConfiguration"));
    assert!(position("Deployment") < position("MutatingWebhookConfiguration"));
}

/// On OpenShift the service-ca signs: the Service asks it for the Secret, the configurations
/// and the CRD ask it for their caBundle; POM's own bundle injection finds nothing to do there
/// that it would not do elsewhere.
#[test]
fn on_openshift_the_service_ca_provides_the_certificates() {
    let opts = RenderOptions {
        certificates: CertificateSource::ServiceCa,
        ..RenderOptions::new("widgets")
    };
    let bundle = render(&fixture("webhooks"), &opts).unwrap();
    let service = object(&bundle, "Service", "webhooks-controller-service");
    assert_eq!(
        service["metadata"]["annotations"]["service.beta.openshift.io/serving-cert-secret-name"],
        "webhooks-controller-service-cert"
    );
    for (kind, name) in [
        ("ValidatingWebhookConfiguration", "vwidget.example.com"),
        ("MutatingWebhookConfiguration", "mwidget.example.com"),
        ("CustomResourceDefinition", "widgets.example.com"),
    ] {
        assert_eq!(
            object(&bundle, kind, name)["metadata"]["annotations"]["service.beta.openshift.io/inject-cabundle"],
            "true",
            "{kind} {name}"
        );
    }
}

/// POM's own CA: the controller sets the caBundle on every webhook of the bundle's Service.
#[test]
fn pom_ca_bundle_is_injected_where_the_bundle_calls_its_service() {
    let bundle = render_fixture("webhooks", false).unwrap();
    let mut objects = bundle.objects.clone();
    inject_ca_bundle(
        &mut objects,
        &bundle.webhook_services,
        "-----BEGIN CERTIFICATE-----\n",
    );
    let encoded = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
    let as_bundle = RenderedBundle { objects, ..bundle };
    assert_eq!(
        object(
            &as_bundle,
            "ValidatingWebhookConfiguration",
            "vwidget.example.com"
        )["webhooks"][0]["clientConfig"]["caBundle"],
        encoded
    );
    assert_eq!(
        object(
            &as_bundle,
            "CustomResourceDefinition",
            "widgets.example.com"
        )["spec"]["conversion"]["webhook"]["clientConfig"]["caBundle"],
        encoded
    );
}

/// Own/SingleNamespace: the webhook sees only the watched namespace; a conversion webhook
/// (cluster-wide by nature) then refuses the mode, naming what to change.
#[test]
fn webhooks_follow_the_install_mode() {
    let own = RenderOptions {
        watch_namespace: Some("widgets".into()),
        ..RenderOptions::new("widgets")
    };
    let err = render(&fixture("webhooks"), &own).unwrap_err();
    assert!(
        err.to_string().contains("ConversionWebhook") && err.to_string().contains("AllNamespaces"),
        "{err}"
    );
    let files = fixture_without_conversion();
    let bundle = render(&files, &own).unwrap();
    let hook = &object(
        &bundle,
        "ValidatingWebhookConfiguration",
        "vwidget.example.com",
    )["webhooks"][0];
    assert_eq!(
        hook["namespaceSelector"],
        json!({"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["widgets"]}]})
    );
}

/// The webhooks fixture whose CSV declares no conversion webhook (its CRD still carries the
/// author's own conversion).
fn fixture_without_csv_conversion() -> BundleFiles {
    let files = fixture("webhooks");
    let csv = csv_text(&files);
    let cut = csv.find("    - type: ConversionWebhook").unwrap();
    with_file(&files, "manifests/csv.yaml", csv.as_bytes()[..cut].to_vec())
}

fn fixture_without_conversion() -> BundleFiles {
    let files = fixture_without_csv_conversion();
    // The author's conversion is POM's to replace only when the CSV declares one.
    let crd = String::from_utf8(files.get("manifests/widgets.crd.yaml").unwrap().to_vec()).unwrap();
    let (head, tail) = crd.split_at(crd.find("  conversion:").unwrap());
    let tail = &tail[tail.find("  versions:").unwrap()..];
    with_file(
        &files,
        "manifests/widgets.crd.yaml",
        format!("{head}{tail}").into_bytes(),
    )
}

/// The webhook policy (issue 33 items 3 and 4): the bundle's own kinds freely; any other kind
/// is a power, consented webhook by webhook and bound to what it covers (workloads also
/// `ClusterAdminEquivalent`); POM's kinds never; a webhook of a Deployment the CSV does not
/// have, or a conversion of a CRD the bundle does not ship, is refused naming the field.
#[test]
fn webhook_rules_outside_the_bundle_need_consent_bound_to_them_and_pom_kinds_are_never_matched() {
    let base = fixture_without_conversion();
    let with_rule =
        |group: &str, resource: &str| webhook_rule(&base, group, resource, "CREATE, UPDATE");
    let pods = with_rule("", "pods");
    let err = render(&pods, &RenderOptions::new("widgets")).unwrap_err();
    let RenderError::ContentPolicy(violations) = &err else {
        panic!("{err}")
    };
    assert!(
        violations
            .0
            .iter()
            .all(|v| v.rule == ContentRule::PowerNotConsented),
        "{err}"
    );
    let asked = violations.lifts();
    assert!(
        asked.contains(&Lift::Consent(PowerClass::ClusterAdminEquivalent)),
        "{err}"
    );
    let webhook = asked
        .iter()
        .find_map(|l| match l {
            Lift::Webhook(w) => Some(w.clone()),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{err}"));
    assert_eq!(asked.len(), 2, "{err}");
    assert_eq!(webhook.name, "vwidget.example.com");
    assert!(err.to_string().contains("CREATE, UPDATE pods"), "{err}");
    assert!(
        err.to_string().contains(&format!(
            "consent: {{clusterAdminEquivalent: true, webhooks: [{{name: vwidget.example.com, covers: \"{}\"}}]}}",
            webhook.covers
        )),
        "{err}"
    );
    let consented = RenderOptions {
        consent: BTreeSet::from([PowerClass::ClusterAdminEquivalent]),
        webhook_consent: BTreeSet::from([webhook.clone()]),
        ..RenderOptions::new("widgets")
    };
    let bundle = render(&pods, &consented).unwrap();
    assert!(
        bundle
            .consents_used
            .contains(&PowerClass::AdmissionWebhooks)
    );
    assert_eq!(bundle.powers.of(PowerClass::AdmissionWebhooks).count(), 1);
    // The old exception by name lifts nothing any more.
    let excepted = RenderOptions {
        consent: BTreeSet::from([PowerClass::ClusterAdminEquivalent]),
        exceptions: vec![ContentException {
            rule: ContentRule::KindNotAllowed,
            kind: "ValidatingWebhookConfiguration.admissionregistration.k8s.io".into(),
            name: "vwidget.example.com".into(),
        }],
        ..RenderOptions::new("widgets")
    };
    assert!(render(&pods, &excepted).is_err());

    // Widened by a later bundle (DELETE too): the consent given no longer covers it.
    let widened = webhook_rule(&base, "", "pods", "CREATE, UPDATE, DELETE");
    let err = render(&widened, &consented).unwrap_err();
    let RenderError::ContentPolicy(violations) = &err else {
        panic!("{err}")
    };
    let asked: Vec<&Lift> = violations.lifts().into_iter().collect();
    assert!(
        matches!(asked.as_slice(), [Lift::Webhook(w)] if w.name == webhook.name && w.covers != webhook.covers),
        "{err}"
    );

    for group in ["*", "platform.openshift.io"] {
        let err = render(&with_rule(group, "\"*\""), &consented).unwrap_err();
        let RenderError::ContentPolicy(violations) = &err else {
            panic!("{err}")
        };
        assert!(
            violations.0.iter().any(|v| v.rule == ContentRule::WebhookMatchesPlatformOperators && v.lift.is_none()),
            "{group}: {err}"
        );
    }

    let elsewhere = with_file(
        &base,
        "manifests/csv.yaml",
        csv_text(&base)
            .replacen(
                "deploymentName: webhooks-controller",
                "deploymentName: someone-else",
                1,
            )
            .into_bytes(),
    );
    let err = render(&elsewhere, &RenderOptions::new("widgets")).unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.webhookdefinitions[0].deploymentName"),
        "{err}"
    );
}

/// A webhook configuration shipped in the bundle's manifests is never applied: only what POM
/// renders from spec.webhookdefinitions calls the bundle's own Service.
#[test]
fn a_shipped_webhook_configuration_is_still_refused() {
    let files = with_file(
        &fixture_without_conversion(),
        "manifests/hook.yaml",
        br#"{"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "shipped"}, "webhooks": []}"#
            .to_vec(),
    );
    let err = render(&files, &RenderOptions::new("widgets")).unwrap_err();
    let RenderError::ContentPolicy(violations) = &err else {
        panic!("{err}")
    };
    assert!(
        violations
            .0
            .iter()
            .any(|v| v.rule == ContentRule::KindNeverAllowed && v.object.contains("\"shipped\"")),
        "{err}"
    );
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

/// A CRD serving one version is never converted, so its author's undeclared conversion
/// webhook (kubebuilder scaffolds one, as in `assisted-service-operator`) is set to `None`
/// rather than applied pointing anywhere, or refused; the same CRD with two versions is
/// refused (below).
#[test]
fn an_undeclared_conversion_of_a_single_version_crd_is_never_applied_and_not_refused() {
    let files = fixture_without_csv_conversion();
    let crd = String::from_utf8(files.get("manifests/widgets.crd.yaml").unwrap().to_vec()).unwrap();
    let single = &crd[..crd.find("    - name: v1beta1").unwrap()];
    let files = with_file(
        &files,
        "manifests/widgets.crd.yaml",
        single.as_bytes().to_vec(),
    );
    let bundle = render(&files, &RenderOptions::new("widgets")).unwrap();
    let crd = object(&bundle, "CustomResourceDefinition", "widgets.example.com");
    assert_eq!(crd["spec"]["conversion"], json!({"strategy": "None"}));
}

/// A CRD whose own conversion webhook the CSV does not declare is refused, never applied
/// pointing wherever its author's kustomize left it.
#[test]
fn an_undeclared_crd_conversion_webhook_is_refused() {
    let files = fixture_without_csv_conversion();
    let err = render(&files, &RenderOptions::new("widgets")).unwrap_err();
    let RenderError::ContentPolicy(violations) = &err else {
        panic!("{err}")
    };
    assert!(
        violations
            .0
            .iter()
            .any(|v| v.rule == ContentRule::ForeignWebhookEndpoint
                && v.object.contains("\"widgets.example.com\"")
                && v.lift.is_none()),
        "{err}"
    );
}

/// `base` with its validating webhook's rule replaced by one over `group`/`resource` with
/// `operations` (a YAML flow list's items).
fn webhook_rule(base: &BundleFiles, group: &str, resource: &str, operations: &str) -> BundleFiles {
    let csv = csv_text(base).replacen(
        "        - apiGroups: [example.com]\n          apiVersions: [v1]\n          operations: [CREATE, UPDATE]\n          resources: [widgets]",
        &format!("        - apiGroups: [\"{group}\"]\n          apiVersions: [v1]\n          operations: [{operations}]\n          resources: [{resource}]"),
        1,
    );
    with_file(base, "manifests/csv.yaml", csv.into_bytes())
}

/// What a hostile bundle's webhook gets: refused by that rule, or exactly these consents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Refused(ContentRule),
    /// The webhook's own consent, and `ClusterAdminEquivalent` too when `true`.
    Consent {
        admin: bool,
    },
    Nothing,
}

/// Issue 33 item 4: a hostile bundle per row of the webhook table, each refused or asking
/// exactly the consent its row names; item 3: a kind of the bundle's own group that none of its
/// CRDs defines is not its own.
#[test]
fn each_webhook_row_refuses_or_asks_exactly_its_consent() {
    use Expect::{Consent, Nothing, Refused};
    use pom_render::webhook_reach::{REACH_TABLE, RowReach};
    const PROTECTED: ContentRule = ContentRule::WebhookMatchesProtectedKind;
    const POM: ContentRule = ContentRule::WebhookMatchesPlatformOperators;
    let base = fixture_without_conversion();
    let mut cases: Vec<(String, String, Expect)> = [
        ("example.com", "widgets", Nothing),
        ("example.com", "widgets/status", Nothing),
        ("example.com", "gadgets", Consent { admin: false }),
        ("example.com", "\"*\"", Refused(PROTECTED)),
        ("other.example.org", "things", Consent { admin: false }),
        ("", "configmaps", Consent { admin: false }),
        ("", "services", Consent { admin: false }),
        ("", "pods", Consent { admin: true }),
        ("", "pods/ephemeralcontainers", Consent { admin: true }),
        ("apps", "deployments", Consent { admin: true }),
        ("batch", "cronjobs", Consent { admin: true }),
        ("", "secrets", Consent { admin: true }),
        ("", "serviceaccounts/token", Refused(PROTECTED)),
        ("", "\"*/status\"", Refused(PROTECTED)),
        ("*", "pods", Refused(POM)),
        ("platform.openshift.io", "catalogs", Refused(POM)),
    ]
    .into_iter()
    .map(|(g, r, e)| (g.to_owned(), r.to_owned(), e))
    .collect();
    // Every row of the table, by its first resource (or one of its group's).
    for row in REACH_TABLE {
        let resource = row.resources.first().copied().unwrap_or("anything");
        let expect = match row.reach {
            RowReach::Refused(rule) => Refused(rule),
            RowReach::Consent(PowerClass::ClusterAdminEquivalent) => Consent { admin: true },
            RowReach::Consent(other) => panic!("a row of class {other} has no case"),
        };
        cases.push((row.group.to_owned(), resource.to_owned(), expect));
    }
    for (group, resource, expect) in cases {
        let what = format!("{group:?} {resource}");
        let bundle = webhook_rule(&base, &group, &resource, "CREATE");
        let nothing = render(&bundle, &RenderOptions::new("widgets"));
        match (expect, nothing) {
            (Nothing, Ok(rendered)) => {
                assert_eq!(
                    rendered.powers.of(PowerClass::AdmissionWebhooks).count(),
                    0,
                    "{what}"
                );
            }
            (Refused(rule), Err(RenderError::ContentPolicy(violations))) => {
                assert!(
                    violations
                        .0
                        .iter()
                        .any(|v| v.rule == rule && v.lift.is_none()),
                    "{what}: {violations}"
                );
                // Whatever the admin consents to.
                let mut everything = RenderOptions::new("widgets");
                everything.consent = PowerClass::ALL.into_iter().collect();
                let err = render(&bundle, &everything).unwrap_err();
                assert!(err.to_string().contains(rule.as_str()), "{what}: {err}");
            }
            (Consent { admin }, Err(RenderError::ContentPolicy(violations))) => {
                let asked = violations.lifts();
                let wants_admin =
                    asked.contains(&Lift::Consent(PowerClass::ClusterAdminEquivalent));
                let webhooks = asked
                    .iter()
                    .filter(|l| matches!(l, Lift::Webhook(_)))
                    .count();
                assert_eq!(
                    (wants_admin, webhooks, asked.len()),
                    (admin, 1, 1 + usize::from(admin)),
                    "{what}: {violations}"
                );
                let mut given = RenderOptions::new("widgets");
                for lift in asked {
                    match lift {
                        Lift::Consent(class) => {
                            given.consent.insert(*class);
                        }
                        Lift::Webhook(w) => {
                            given.webhook_consent.insert(w.clone());
                        }
                        other => panic!("{what}: {other:?}"),
                    }
                }
                let rendered = render(&bundle, &given).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    rendered.powers.of(PowerClass::AdmissionWebhooks).count(),
                    1,
                    "{what}"
                );
            }
            (expect, got) => panic!("{what}: expected {expect:?}, got {got:?}"),
        }
    }
}
