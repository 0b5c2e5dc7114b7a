//! Webhooks from `spec.webhookdefinitions` (§6), rendered as OLM v0 and v1 render them, with
//! the guarantees POM's threat model adds.
//!
//! For every Deployment that serves webhooks: a Service `<deployment>-service` selecting its
//! pods, one port per `containerPort`; its serving certificate in the Secret
//! `<service>-cert`, mounted where operator-sdk/kubebuilder operators read it
//! ([`WEBHOOK_CERT_DIR`], and [`APISERVICE_CERT_DIR`] as OLM v0 does). For every admission
//! webhook: a Validating/MutatingWebhookConfiguration named after `generateName`, calling that
//! Service. For every conversion webhook: each CRD it names gets `spec.conversion` calling it.
//!
//! Who signs the certificate ([`CertificateSource`]): on OpenShift the service-ca operator (the
//! serving-cert annotation on the Service, `inject-cabundle` on the configurations and CRDs);
//! elsewhere POM's own CA, whose bundle the controller sets with [`inject_ca_bundle`] before
//! it applies (key material never passes through rendering).
//!
//! What POM adds so that no webhook reaches past its operator: the `namespaceSelector` is
//! POM's (the CSV has none): the watched namespace for Own/SingleNamespace operators, else every
//! namespace but the platform's ([`EXCLUDED_NAMESPACES`], OpenShift's run-level namespaces) and
//! POM's own; the `objectSelector` also excludes every object POM manages
//! ([`MANAGED_OBJECT_LABEL`]), so one operator's webhook never sees another's objects as POM
//! applies them. What the rules may match is the content policy's job.

use std::collections::BTreeMap;

use base64::Engine as _;
use serde_json::{Map, Value, json};

use super::InstallMode;
use super::csv::{Csv, StrategyDeployment, WebhookDefinition, WebhookType};
use super::error::RenderError;
use super::names::is_dns1123_label;
use super::objects::{at, object_at_mut, str_at};

/// Where controller-runtime (operator-sdk, kubebuilder) reads `tls.crt` and `tls.key`.
pub const WEBHOOK_CERT_DIR: &str = "/tmp/k8s-webhook-server/serving-certs";
/// Where OLM v0 also mounts the pair, as `apiserver.crt` and `apiserver.key`.
pub const APISERVICE_CERT_DIR: &str = "/apiserver.local.config/certificates";
const WEBHOOK_CERT_VOLUME: &str = "webhook-cert";
const APISERVICE_CERT_VOLUME: &str = "apiservice-cert";

/// OpenShift's service-ca writes the serving certificate into the Secret this annotation on a
/// Service names.
pub const SERVING_CERT_SECRET_ANNOTATION: &str =
    "service.beta.openshift.io/serving-cert-secret-name";
/// OpenShift's service-ca sets the `caBundle` of webhook configurations and CRDs so annotated.
pub const INJECT_CA_BUNDLE_ANNOTATION: &str = "service.beta.openshift.io/inject-cabundle";

/// The label on every object POM applies (`pom_api::labels::OWNER_PO`): webhooks never see
/// those objects.
pub const MANAGED_OBJECT_LABEL: &str = "platform.openshift.io/owner";

/// Namespaces whose objects no webhook of a bundle sees (besides POM's own): the platform's.
/// OpenShift's control-plane namespaces are also excluded by their `openshift.io/run-level`
/// label, which a label selector can test where a name prefix cannot be.
pub const EXCLUDED_NAMESPACES: &[&str] = &[
    "default",
    "kube-system",
    "kube-public",
    "kube-node-lease",
    "openshift",
    "openshift-operators",
    "openshift-config",
    "openshift-config-managed",
    "openshift-monitoring",
    "openshift-platform-operators",
];
const RUN_LEVEL_LABEL: &str = "openshift.io/run-level";
const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";

const ADMISSION_API: &str = "admissionregistration.k8s.io/v1";

/// Who provisions webhook serving certificates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum CertificateSource {
    /// POM's own CA, kept in a Secret of the install namespace; the controller sets the
    /// caBundles ([`inject_ca_bundle`]).
    #[default]
    Pom,
    /// OpenShift's service-ca operator, by annotation.
    ServiceCa,
}

/// A Service POM renders for webhooks, and the Secret its serving certificate lives in.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct WebhookService {
    pub namespace: String,
    pub name: String,
    pub secret: String,
    /// The Deployment behind it.
    pub deployment: String,
}

impl WebhookService {
    /// The DNS names the API server calls it by (the serving certificate's names).
    pub fn dns_names(&self) -> Vec<String> {
        vec![
            format!("{}.{}.svc", self.name, self.namespace),
            format!("{}.{}.svc.cluster.local", self.name, self.namespace),
        ]
    }
}

/// What rendering needs to know besides the definitions.
pub(crate) struct WebhookContext<'a> {
    pub install_namespace: &'a str,
    pub install_mode: InstallMode,
    pub watch_namespace: &'a str,
    pub manager_namespace: Option<&'a str>,
    pub certificates: CertificateSource,
}

/// The webhooks of a bundle, rendered.
#[derive(Debug, Default)]
pub(crate) struct WebhookParts {
    /// Services and webhook configurations.
    pub objects: Vec<Value>,
    /// CRD name → its `spec.conversion`.
    pub conversions: BTreeMap<String, Value>,
    pub services: Vec<WebhookService>,
    pub certificates: CertificateSource,
}

impl WebhookParts {
    /// The Secret holding the serving certificate of `deployment`'s webhooks, if it serves any.
    pub fn secret_of(&self, deployment: &str) -> Option<&str> {
        self.services
            .iter()
            .find(|s| s.deployment == deployment)
            .map(|s| s.secret.as_str())
    }
}

/// The Service name for a Deployment's webhooks (OLM's).
fn service_name(deployment: &str) -> String {
    format!("{deployment}-service")
}

/// Renders `definitions` served by `deployments`.
pub(crate) fn render(
    csv: &Csv<'_>,
    definitions: &[WebhookDefinition],
    deployments: &[StrategyDeployment],
    ctx: &WebhookContext<'_>,
) -> Result<WebhookParts, RenderError> {
    let mut parts = WebhookParts {
        certificates: ctx.certificates,
        ..WebhookParts::default()
    };
    if definitions.is_empty() {
        return Ok(parts);
    }
    let ports = service_ports(csv, definitions)?;
    for (deployment_name, by_port) in &ports {
        if let Some((object, service)) =
            serving_service(csv, deployment_name, by_port, deployments, ctx)?
        {
            parts.objects.push(object);
            parts.services.push(service);
        }
    }
    for (index, definition) in definitions.iter().enumerate() {
        add_definition(&mut parts, csv, index, definition, ctx)?;
    }
    Ok(parts)
}

/// The ports of each serving Deployment's Service (one Service per Deployment, one port per
/// containerPort, each forwarding to its targetPort), refusing a containerPort that two
/// definitions forward to different pod ports: one Service port cannot reach both.
fn service_ports<'d>(
    csv: &Csv<'_>,
    definitions: &'d [WebhookDefinition],
) -> Result<BTreeMap<&'d str, BTreeMap<i64, &'d Value>>, RenderError> {
    let mut ports: BTreeMap<&str, BTreeMap<i64, &Value>> = BTreeMap::new();
    for (index, definition) in definitions.iter().enumerate() {
        let by_port = ports.entry(definition.deployment.as_str()).or_default();
        match by_port.get(&definition.container_port) {
            Some(target) if **target != definition.target_port => {
                return Err(csv.invalid(
                    format!("spec.webhookdefinitions[{index}].targetPort"),
                    format!(
                        "containerPort {} of Deployment {:?} already forwards to {target}; one Service port cannot reach two pod ports",
                        definition.container_port, definition.deployment
                    ),
                ));
            }
            _ => {
                by_port.insert(definition.container_port, &definition.target_port);
            }
        }
    }
    Ok(ports)
}

/// The Service in front of one serving Deployment's pods and what it records (the Secret of
/// its serving certificate), refusing a Service name the API server would reject or a
/// Deployment without the selector the Service needs. `None` when the strategy has no such
/// Deployment.
fn serving_service(
    csv: &Csv<'_>,
    deployment_name: &str,
    by_port: &BTreeMap<i64, &Value>,
    deployments: &[StrategyDeployment],
    ctx: &WebhookContext<'_>,
) -> Result<Option<(Value, WebhookService)>, RenderError> {
    let name = service_name(deployment_name);
    if !is_dns1123_label(&name) || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err(csv.invalid(
            "spec.webhookdefinitions[].deploymentName".to_owned(),
            format!(
                "the webhook Service of Deployment {deployment_name:?} would be named {name:?}, which is not a valid Service name (a DNS-1035 label of at most 63 characters); the Deployment needs a shorter name"
            ),
        ));
    }
    let Some((index, deployment)) = deployments
        .iter()
        .enumerate()
        .find(|(_, d)| d.name == *deployment_name)
    else {
        return Ok(None);
    };
    let selector = match at(&deployment.spec, &["selector", "matchLabels"]) {
        Some(Value::Object(labels)) if !labels.is_empty() => labels.clone(),
        _ => {
            return Err(csv.invalid(
                format!("spec.install.spec.deployments[{index}].spec.selector.matchLabels"),
                "is missing: the webhook Service selects the Deployment's pods by it".to_owned(),
            ));
        }
    };
    let service_ports: Vec<Value> = by_port
        .iter()
        .map(|(port, target)| json!({"name": port.to_string(), "port": port, "targetPort": target, "protocol": "TCP"}))
        .collect();
    let secret = format!("{name}-cert");
    let mut metadata = json!({"name": name, "namespace": ctx.install_namespace});
    if ctx.certificates == CertificateSource::ServiceCa {
        set_annotation(&mut metadata, SERVING_CERT_SECRET_ANNOTATION, &secret);
    }
    let object = json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": metadata,
        "spec": {"selector": selector, "ports": service_ports},
    });
    let service = WebhookService {
        namespace: ctx.install_namespace.to_owned(),
        name,
        secret,
        deployment: deployment_name.to_owned(),
    };
    Ok(Some((object, service)))
}

/// One definition rendered: an admission webhook becomes its configuration, a conversion
/// webhook the `spec.conversion` of each CRD it names (only in AllNamespaces mode, since it
/// serves every namespace's objects).
fn add_definition(
    parts: &mut WebhookParts,
    csv: &Csv<'_>,
    index: usize,
    definition: &WebhookDefinition,
    ctx: &WebhookContext<'_>,
) -> Result<(), RenderError> {
    let service = client_service(definition, ctx);
    let review_versions = at(&definition.raw, &["admissionReviewVersions"])
        .filter(|v| v.as_array().is_some_and(|a| !a.is_empty()))
        .cloned()
        .unwrap_or_else(|| json!(["v1"]));
    match definition.kind {
        WebhookType::Conversion => {
            if ctx.install_mode != InstallMode::AllNamespaces {
                return Err(csv.invalid(
                    format!("spec.webhookdefinitions[{index}]"),
                    format!(
                        "a ConversionWebhook serves every namespace's objects, so the operator must be installed in AllNamespaces mode, not {}; remove spec.watchNamespace from the PlatformOperator",
                        ctx.install_mode
                    ),
                ));
            }
            let conversion = json!({
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"service": service},
                    "conversionReviewVersions": review_versions,
                },
            });
            for crd in &definition.conversion_crds {
                parts.conversions.insert(crd.clone(), conversion.clone());
            }
        }
        WebhookType::Validating | WebhookType::Mutating => {
            parts
                .objects
                .push(configuration(definition, service, review_versions, ctx));
        }
    }
    Ok(())
}

/// The `clientConfig.service` the API server calls a definition's webhook at: its
/// Deployment's Service, its containerPort, and its `webhookPath` when set.
fn client_service(definition: &WebhookDefinition, ctx: &WebhookContext<'_>) -> Value {
    let mut service = json!({
        "namespace": ctx.install_namespace,
        "name": service_name(&definition.deployment),
        "port": definition.container_port,
    });
    if let Some(path) = str_at(&definition.raw, &["webhookPath"]).filter(|p| !p.is_empty()) {
        set(&mut service, "path", json!(path));
    }
    service
}

/// A CRD that serves a single version is never converted, so a conversion webhook it names
/// is never called. Kubebuilder scaffolds one into every CRD of a project with any webhook
/// (`assisted-service-operator` ships six, pointing at a Service in a namespace of its own
/// choosing, that no bundle object creates). When the CSV does not declare it, POM sets the
/// strategy `None`, which the API server treats the same for one version, instead of applying an
/// endpoint outside the bundle; with more than one version the endpoint would be called, and
/// the content policy refuses it (`ForeignWebhookEndpoint`). Returns whether it changed `crd`.
pub(crate) fn drop_uncallable_conversion(crd: &mut Value) -> bool {
    let is_crd = str_at(crd, &["apiVersion"])
        .is_some_and(|v| v.starts_with("apiextensions.k8s.io/"))
        && str_at(crd, &["kind"]) == Some("CustomResourceDefinition");
    let single_version = at(crd, &["spec", "versions"])
        .and_then(Value::as_array)
        .is_some_and(|versions| versions.len() == 1);
    if !is_crd
        || !single_version
        || str_at(crd, &["spec", "conversion", "strategy"]) != Some("Webhook")
    {
        return false;
    }
    match object_at_mut(crd, &["spec"]) {
        Some(spec) => {
            spec.insert("conversion".to_owned(), json!({"strategy": "None"}));
            true
        }
        None => false,
    }
}

/// The Validating- or MutatingWebhookConfiguration of one admission webhook.
fn configuration(
    definition: &WebhookDefinition,
    service: Value,
    review_versions: Value,
    ctx: &WebhookContext<'_>,
) -> Value {
    let kind = match definition.kind {
        WebhookType::Mutating => "MutatingWebhookConfiguration",
        WebhookType::Validating | WebhookType::Conversion => "ValidatingWebhookConfiguration",
    };
    let mut webhook = json!({
        "name": definition.generate_name,
        "clientConfig": {"service": service},
        "admissionReviewVersions": review_versions,
        "sideEffects": str_at(&definition.raw, &["sideEffects"]).unwrap_or("None"),
        "namespaceSelector": namespace_selector(ctx),
        "objectSelector": object_selector(at(&definition.raw, &["objectSelector"])),
        "rules": at(&definition.raw, &["rules"]).cloned().unwrap_or_else(|| json!([])),
    });
    let mut copied = vec!["failurePolicy", "matchPolicy", "timeoutSeconds"];
    if definition.kind == WebhookType::Mutating {
        copied.push("reinvocationPolicy");
    }
    for field in copied {
        if let Some(value) = definition.raw.get(field).filter(|v| !v.is_null()) {
            set(&mut webhook, field, value.clone());
        }
    }
    let mut metadata = json!({"name": definition.generate_name});
    if ctx.certificates == CertificateSource::ServiceCa {
        set_annotation(&mut metadata, INJECT_CA_BUNDLE_ANNOTATION, "true");
    }
    json!({"apiVersion": ADMISSION_API, "kind": kind, "metadata": metadata, "webhooks": [webhook]})
}

/// Where an admission webhook applies: the watched namespace, or every namespace but the
/// platform's and POM's.
fn namespace_selector(ctx: &WebhookContext<'_>) -> Value {
    if ctx.install_mode != InstallMode::AllNamespaces {
        return json!({"matchExpressions": [
            {"key": NAMESPACE_NAME_LABEL, "operator": "In", "values": [ctx.watch_namespace]}
        ]});
    }
    let mut excluded: Vec<&str> = EXCLUDED_NAMESPACES.to_vec();
    if let Some(manager) = ctx.manager_namespace
        && !excluded.contains(&manager)
    {
        excluded.push(manager);
    }
    json!({"matchExpressions": [
        {"key": NAMESPACE_NAME_LABEL, "operator": "NotIn", "values": excluded},
        {"key": RUN_LEVEL_LABEL, "operator": "DoesNotExist"},
    ]})
}

/// The CSV's objectSelector, plus: not an object POM manages.
fn object_selector(declared: Option<&Value>) -> Value {
    let mut selector = declared
        .filter(|s| s.is_object())
        .cloned()
        .unwrap_or_else(|| json!({}));
    let excluded = json!({"key": MANAGED_OBJECT_LABEL, "operator": "DoesNotExist"});
    match selector.get_mut("matchExpressions") {
        Some(Value::Array(expressions)) => expressions.push(excluded),
        _ => set(&mut selector, "matchExpressions", json!([excluded])),
    }
    selector
}

/// Mounts the serving certificate of `secret` into every container of a Deployment spec,
/// replacing volumes and mounts of the same name or path (OLM v0 does the same).
pub(crate) fn mount_serving_certificate(spec: &mut Value, secret: &str) {
    let mounts = [
        (
            APISERVICE_CERT_VOLUME,
            APISERVICE_CERT_DIR,
            [("tls.crt", "apiserver.crt"), ("tls.key", "apiserver.key")],
        ),
        (
            WEBHOOK_CERT_VOLUME,
            WEBHOOK_CERT_DIR,
            [("tls.crt", "tls.crt"), ("tls.key", "tls.key")],
        ),
    ];
    let Some(pod) = object_at_mut(spec, &["template", "spec"]) else {
        return;
    };
    let names: Vec<&str> = mounts.iter().map(|(name, _, _)| *name).collect();
    let paths: Vec<&str> = mounts.iter().map(|(_, path, _)| *path).collect();
    let Some(volumes) = array_entry(pod, "volumes") else {
        return;
    };
    volumes.retain(|v| !str_at(v, &["name"]).is_some_and(|n| names.contains(&n)));
    for (name, _, items) in &mounts {
        let items: Vec<Value> = items
            .iter()
            .map(|(key, path)| json!({"key": key, "path": path}))
            .collect();
        volumes.push(json!({"name": name, "secret": {"secretName": secret, "items": items}}));
    }
    // Every container, as OLM v0 mounts them: the one serving webhooks is not named.
    let Some(Value::Array(containers)) = pod.get_mut("containers") else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let Some(container_mounts) = array_entry(container, "volumeMounts") else {
            continue;
        };
        container_mounts.retain(|m| {
            !str_at(m, &["name"]).is_some_and(|n| names.contains(&n))
                && !str_at(m, &["mountPath"])
                    .is_some_and(|p| paths.contains(&p.trim_end_matches('/')))
        });
        for (name, path, _) in &mounts {
            container_mounts.push(json!({"name": name, "mountPath": path}));
        }
    }
}

/// Sets `caBundle` (`ca_pem`, base64 as the API expects) on every webhook of the bundle's
/// configurations and on every conversion webhook of its CRDs that call one of `services`.
/// Used by the controller for [`CertificateSource::Pom`]; pure.
pub fn inject_ca_bundle(objects: &mut [Value], services: &[WebhookService], ca_pem: &str) {
    let encoded = base64::engine::general_purpose::STANDARD.encode(ca_pem.as_bytes());
    let ours = |client_config: &Value| {
        let namespace = str_at(client_config, &["service", "namespace"]);
        let name = str_at(client_config, &["service", "name"]);
        services
            .iter()
            .any(|s| Some(s.namespace.as_str()) == namespace && Some(s.name.as_str()) == name)
    };
    for object in objects.iter_mut() {
        let kind = str_at(object, &["kind"]).unwrap_or_default();
        let api_version = str_at(object, &["apiVersion"]).unwrap_or_default();
        match (api_version, kind) {
            (ADMISSION_API, "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
                let Some(Value::Array(webhooks)) = object.get_mut("webhooks") else {
                    continue;
                };
                for webhook in webhooks {
                    if let Some(config) = webhook.get_mut("clientConfig")
                        && ours(config)
                    {
                        set(config, "caBundle", json!(encoded));
                    }
                }
            }
            ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
                if let Some(config) = object
                    .pointer_mut("/spec/conversion/webhook/clientConfig")
                    .filter(|c| ours(c))
                {
                    set(config, "caBundle", json!(encoded));
                }
            }
            _ => {}
        }
    }
}

fn set(value: &mut Value, key: &str, field: Value) {
    if let Some(map) = value.as_object_mut() {
        map.insert(key.to_owned(), field);
    }
}

fn set_annotation(metadata: &mut Value, key: &str, value: &str) {
    if let Some(annotations) = object_at_mut(metadata, &["annotations"]) {
        annotations.insert(key.to_owned(), json!(value));
    }
}

/// The array at `key` of `map`, created (or replacing a non-array) when needed.
fn array_entry<'a>(map: &'a mut Map<String, Value>, key: &str) -> Option<&'a mut Vec<Value>> {
    let entry = map
        .entry(key.to_owned())
        .or_insert_with(|| Value::Array(Vec::new()));
    if !entry.is_array() {
        *entry = Value::Array(Vec::new());
    }
    entry.as_array_mut()
}
