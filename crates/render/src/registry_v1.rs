//! registry+v1: from a ClusterServiceVersion and its manifests to plain objects, the way OLM
//! installs an operator in the AllNamespaces, OwnNamespace or SingleNamespace mode.
//!
//! Generated from the CSV:
//! - a ServiceAccount for every account named by `permissions`, `clusterPermissions` or a
//!   Deployment's pod template (not `default`, which every namespace already has);
//! - per `permissions` entry, a Role and RoleBinding in the install namespace, and where the
//!   operator watches: in AllNamespaces mode the same rules plus read access to namespaces as a
//!   ClusterRole and ClusterRoleBinding (OLM v0 and v1 both grant this), in SingleNamespace
//!   mode a Role and RoleBinding in the watched namespace;
//! - per `clusterPermissions` entry, a ClusterRole and ClusterRoleBinding;
//! - the Deployments of the install strategy, with the CSV's annotations and
//!   `olm.targetNamespaces` (the watched namespace, "" for all) on the pod template and `revisionHistoryLimit: 1` (OLM parity;
//!   operator-sdk operators read their watch namespace from that annotation);
//! - with `operator_condition`, `OPERATOR_CONDITION_NAME` in every container and a Role and
//!   RoleBinding (named after the CSV) letting the Deployments' ServiceAccounts get, update and
//!   patch their OperatorCondition (what OLM v0's OperatorCondition controller sets up).
//!
//! CRDs and the other manifests are copied; the CSV itself is not applied.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::assemble::Sourced;
use super::content_policy::reserved_watch_namespace;
use super::csv::{CSV_GROUP, CSV_KIND, Csv, Permission, Strategy, StrategyDeployment};
use super::error::RenderError;
use super::layout::Layout;
use super::names::is_dns1123_label;
use super::names::{canonical_json, hashed_name};
use super::namespace_metadata;
use super::objects::{Manifest, ObjectKey, object_at_mut, scalar_to_string, str_at};
use super::subjects;
use super::webhooks::{self, CertificateSource, WebhookContext, WebhookParts};
use super::{InstallMode, Parts, RenderOptions, check_removed_apis};

/// The env var operator-lib reads to find its OperatorCondition.
pub const OPERATOR_CONDITION_ENV: &str = "OPERATOR_CONDITION_NAME";

/// Pod-template annotation naming the namespaces the operator watches ("" = all).
pub const TARGET_NAMESPACES_ANNOTATION: &str = "olm.targetNamespaces";

const RBAC_API: &str = "rbac.authorization.k8s.io/v1";
const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// Renders a registry+v1 bundle, refusing what POM cannot install.
pub fn render(
    manifests: &[Manifest],
    layout: &Layout,
    opts: &RenderOptions,
) -> Result<Parts, RenderError> {
    let csv_manifest = single_csv(manifests, layout)?;
    let csv = Csv::new(csv_manifest);
    let ns = opts.install_namespace.as_str();

    let (install_mode, watch_namespace) = install_mode(&csv, opts)?;
    refuse_apiservices(&csv)?;
    let strategy = csv.strategy()?;
    let webhooks = render_webhooks(&csv, &strategy, opts, install_mode, &watch_namespace)?;

    let others: Vec<&Manifest> = manifests
        .iter()
        .filter(|m| !m.is(CSV_GROUP, CSV_KIND))
        .collect();
    check_removed_apis(manifests)?;
    check_owned_crds(&csv, &others)?;

    let generated = Generated::new(&csv, ns);
    let mut objects = shipped_objects(&others);
    let rendered_webhooks = add_webhooks(&csv, &mut objects, &webhooks, &generated)?;
    let deployment_accounts = deployment_service_accounts(&strategy.deployments);
    add_service_accounts(&mut objects, &strategy, &deployment_accounts, &generated);
    add_permissions(
        &mut objects,
        &strategy.permissions,
        install_mode,
        &watch_namespace,
        &generated,
    );
    add_cluster_permissions(&mut objects, &strategy.cluster_permissions, &generated);
    add_deployments(
        &mut objects,
        &csv,
        &strategy.deployments,
        &watch_namespace,
        opts,
        &webhooks,
        &generated,
    );
    if opts.operator_condition {
        add_operator_condition_access(&mut objects, &deployment_accounts, &generated);
    }

    Ok(Parts {
        csv: Some((csv_manifest.file.clone(), csv_manifest.value.clone())),
        csv_name: Some(csv.name.to_owned()),
        objects,
        install_mode: Some(install_mode),
        watch_namespace: Some(watch_namespace),
        suggested_namespace: csv.suggested_namespace(),
        webhook_services: webhooks.services,
        rendered_webhooks,
        namespace_metadata: namespace_metadata::of(&csv, ns),
    })
}

/// What every object generated from the CSV shares: its origin (so a content-policy finding
/// names the CSV it came from), the CSV's name and the install namespace.
struct Generated<'c> {
    origin: String,
    csv_name: &'c str,
    namespace: &'c str,
}

impl<'c> Generated<'c> {
    fn new(csv: &Csv<'c>, namespace: &'c str) -> Self {
        Self {
            origin: format!(
                "generated from ClusterServiceVersion {} ({})",
                csv.name, csv.file
            ),
            csv_name: csv.name,
            namespace,
        }
    }

    /// An object generated from the CSV as a whole.
    fn object(&self, value: Value) -> Sourced {
        Sourced {
            value,
            origin: self.origin.clone(),
            generated: true,
        }
    }

    /// A role generated from one CSV entry: it names the entry, so `rules[i]` in a message is
    /// the CSV's.
    fn entry_object(&self, value: Value, entry: String) -> Sourced {
        Sourced {
            value,
            origin: format!("{}, {entry}", self.origin),
            generated: true,
        }
    }

    /// A binding of `role_kind` `name` to the ServiceAccounts `accounts` of the install
    /// namespace.
    fn binding(
        &self,
        kind: &str,
        role_kind: &str,
        name: &str,
        namespace: Option<&str>,
        accounts: &[&str],
    ) -> Sourced {
        self.object(binding(
            kind,
            role_kind,
            name,
            namespace,
            accounts,
            self.namespace,
        ))
    }
}

/// APIServices need a serving setup POM does not render: refused before anything else is
/// built, naming them.
fn refuse_apiservices(csv: &Csv<'_>) -> Result<(), RenderError> {
    let apiservices = csv.owned_apiservices();
    if apiservices.is_empty() {
        return Ok(());
    }
    Err(RenderError::ApiServicesNotSupported {
        csv: csv.name.to_owned(),
        apiservices,
    })
}

/// The CSV's webhook definitions rendered as OLM renders them for this install mode and
/// watched namespace (configurations, Services, conversions, certificates).
fn render_webhooks(
    csv: &Csv<'_>,
    strategy: &Strategy,
    opts: &RenderOptions,
    install_mode: InstallMode,
    watch_namespace: &str,
) -> Result<WebhookParts, RenderError> {
    let webhook_definitions = csv.webhook_definitions(&strategy.deployments)?;
    webhooks::render(
        csv,
        &webhook_definitions,
        &strategy.deployments,
        &WebhookContext {
            install_namespace: opts.install_namespace.as_str(),
            install_mode,
            watch_namespace,
            manager_namespace: opts.manager_namespace.as_deref(),
            certificates: opts.certificates,
        },
    )
}

/// The bundle's own manifests (all but the CSV), as shipped, each naming its file.
fn shipped_objects(others: &[&Manifest]) -> Vec<Sourced> {
    others
        .iter()
        .map(|m| Sourced {
            value: m.value.clone(),
            origin: m.origin(),
            generated: false,
        })
        .collect()
}

/// Wires the rendered webhooks in: conversions set on the bundle's CRDs (a conversion no
/// webhook serves is dropped, since the API server could not call it) and the webhook objects
/// added. Returns (kind, name) of every webhook configuration and converted CRD rendered.
fn add_webhooks(
    csv: &Csv<'_>,
    objects: &mut Vec<Sourced>,
    webhooks: &WebhookParts,
    generated: &Generated<'_>,
) -> Result<BTreeSet<(String, String)>, RenderError> {
    let mut rendered_webhooks = set_conversions(csv, objects, webhooks)?;
    for object in objects.iter_mut() {
        let key = ObjectKey::of(&object.value);
        if !rendered_webhooks.contains(&(key.kind, key.name)) {
            webhooks::drop_uncallable_conversion(&mut object.value);
        }
    }
    for object in &webhooks.objects {
        let key = ObjectKey::of(object);
        if key.group == "admissionregistration.k8s.io" {
            rendered_webhooks.insert((key.kind, key.name));
        }
        objects.push(generated.object(object.clone()));
    }
    Ok(rendered_webhooks)
}

/// Creates every ServiceAccount the CSV names (but `default`), and points the bindings the
/// bundle ships at them in the install namespace.
fn add_service_accounts(
    objects: &mut Vec<Sourced>,
    strategy: &Strategy,
    deployment_accounts: &[String],
    generated: &Generated<'_>,
) {
    let ns = generated.namespace;
    let mut accounts: BTreeSet<&str> = deployment_accounts.iter().map(String::as_str).collect();
    accounts.extend(
        strategy
            .permissions
            .iter()
            .map(|p| p.service_account.as_str()),
    );
    accounts.extend(
        strategy
            .cluster_permissions
            .iter()
            .map(|p| p.service_account.as_str()),
    );
    // Bindings the bundle ships name its own ServiceAccounts in the install namespace (every
    // namespace has a `default`: binding another's is not binding the bundle's).
    let mut own_accounts: BTreeSet<String> = accounts
        .iter()
        .filter(|a| **a != "default")
        .map(|a| (*a).to_owned())
        .collect();
    own_accounts.extend(objects.iter().filter_map(|o| {
        let key = ObjectKey::of(&o.value);
        (key.group.is_empty() && key.kind == "ServiceAccount").then_some(key.name)
    }));
    for object in objects.iter_mut() {
        subjects::adopt_own_service_accounts(&mut object.value, &own_accounts, ns);
    }
    for account in accounts.into_iter().filter(|a| *a != "default") {
        objects.push(generated.object(json!({
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": ns},
        })));
    }
}

/// `permissions` are namespaced: a Role and RoleBinding in the install namespace, plus, as
/// OLM v0 and v1 render them, a copy where the operator watches: in every namespace (a
/// ClusterRole, with read access to namespaces) for AllNamespaces, in the watched namespace
/// for SingleNamespace.
fn add_permissions(
    objects: &mut Vec<Sourced>,
    permissions: &[Permission],
    install_mode: InstallMode,
    watch_namespace: &str,
    generated: &Generated<'_>,
) {
    let csv_name = generated.csv_name;
    for (index, permission) in permissions.iter().enumerate() {
        let entry = format!("spec.install.spec.permissions[{index}]");
        let account = [permission.service_account.as_str()];
        let name = rbac_name(csv_name, "permissions", permission, &permission.rules);
        let mut namespaces = vec![generated.namespace];
        if install_mode == InstallMode::SingleNamespace {
            namespaces.push(watch_namespace);
        }
        for namespace in namespaces {
            objects.push(generated.entry_object(
                role("Role", &name, Some(namespace), &permission.rules),
                entry.clone(),
            ));
            objects.push(generated.binding(
                "RoleBinding",
                "Role",
                &name,
                Some(namespace),
                &account,
            ));
        }
        if install_mode != InstallMode::AllNamespaces {
            continue;
        }
        let mut rules = permission.rules.clone();
        rules.push(json!({"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]}));
        let name = rbac_name(csv_name, "promotedPermissions", permission, &rules);
        objects.push(generated.entry_object(role("ClusterRole", &name, None, &rules), entry));
        objects.push(generated.binding("ClusterRoleBinding", "ClusterRole", &name, None, &account));
    }
}

/// `clusterPermissions`: a ClusterRole and ClusterRoleBinding per entry.
fn add_cluster_permissions(
    objects: &mut Vec<Sourced>,
    permissions: &[Permission],
    generated: &Generated<'_>,
) {
    for (index, permission) in permissions.iter().enumerate() {
        let name = rbac_name(
            generated.csv_name,
            "clusterPermissions",
            permission,
            &permission.rules,
        );
        objects.push(generated.entry_object(
            role("ClusterRole", &name, None, &permission.rules),
            format!("spec.install.spec.clusterPermissions[{index}]"),
        ));
        let account = [permission.service_account.as_str()];
        objects.push(generated.binding("ClusterRoleBinding", "ClusterRole", &name, None, &account));
    }
}

/// The install strategy's Deployments, with the CSV's annotations and the watched namespace on
/// their pod templates (operator-sdk operators read it there), OperatorCondition wiring and
/// their webhooks' serving certificates mounted.
fn add_deployments(
    objects: &mut Vec<Sourced>,
    csv: &Csv<'_>,
    deployments: &[StrategyDeployment],
    watch_namespace: &str,
    opts: &RenderOptions,
    webhooks: &WebhookParts,
    generated: &Generated<'_>,
) {
    let pod_annotations = pod_annotations(csv, watch_namespace);
    for deployment in deployments {
        objects.push(generated.object(render_deployment(
            deployment,
            generated.namespace,
            &pod_annotations,
            opts,
            csv.name,
            webhooks.secret_of(&deployment.name),
        )));
    }
}

/// A Role and RoleBinding (named after the CSV) letting the Deployments' ServiceAccounts get,
/// update and patch their OperatorCondition, as OLM v0's OperatorCondition controller does.
fn add_operator_condition_access(
    objects: &mut Vec<Sourced>,
    deployment_accounts: &[String],
    generated: &Generated<'_>,
) {
    let (csv_name, ns) = (generated.csv_name, generated.namespace);
    let rules = [json!({
        "apiGroups": [CSV_GROUP],
        "resources": ["operatorconditions"],
        "resourceNames": [csv_name],
        "verbs": ["get", "update", "patch"],
    })];
    let subjects: Vec<&str> = deployment_accounts.iter().map(String::as_str).collect();
    objects.push(generated.object(role("Role", csv_name, Some(ns), &rules)));
    objects.push(generated.binding("RoleBinding", "Role", csv_name, Some(ns), &subjects));
}

/// Sets `spec.conversion` on each CRD a conversion webhook names (whatever the CRD said: the
/// endpoint is the bundle's own Service), refusing a name that is not a CRD of the bundle.
/// Returns ("CustomResourceDefinition", name) of each.
fn set_conversions(
    csv: &Csv<'_>,
    objects: &mut [Sourced],
    webhooks: &WebhookParts,
) -> Result<BTreeSet<(String, String)>, RenderError> {
    let mut rendered = BTreeSet::new();
    for (crd, conversion) in &webhooks.conversions {
        let Some(object) = objects.iter_mut().find(|o| {
            let key = ObjectKey::of(&o.value);
            key.group == "apiextensions.k8s.io"
                && key.kind == "CustomResourceDefinition"
                && key.name == *crd
        }) else {
            return Err(csv.invalid(
                "spec.webhookdefinitions[].conversionCRDs",
                format!("{crd:?} is not a CustomResourceDefinition of the bundle; a conversion webhook converts only the bundle's own CRDs"),
            ));
        };
        if let Some(spec) = object_at_mut(&mut object.value, &["spec"]) {
            spec.insert("conversion".to_owned(), conversion.clone());
        }
        if webhooks.certificates == CertificateSource::ServiceCa
            && let Some(annotations) =
                object_at_mut(&mut object.value, &["metadata", "annotations"])
        {
            annotations.insert(
                webhooks::INJECT_CA_BUNDLE_ANNOTATION.to_owned(),
                Value::String("true".to_owned()),
            );
        }
        rendered.insert(("CustomResourceDefinition".to_owned(), crd.clone()));
    }
    Ok(rendered)
}

/// The install mode the PlatformOperator asks for, checked against the CSV's, and the
/// namespace the operator then watches ("" = all). Without `watch_namespace`: AllNamespaces
/// when the bundle supports it, else OwnNamespace.
fn install_mode(csv: &Csv<'_>, opts: &RenderOptions) -> Result<(InstallMode, String), RenderError> {
    let supported = csv.supported_install_modes();
    let supports = |mode: InstallMode| supported.iter().any(|m| m == mode.as_str());
    let ns = opts.install_namespace.as_str();
    let (mode, watch) = match opts.watch_namespace.as_deref() {
        None if supports(InstallMode::AllNamespaces) => (InstallMode::AllNamespaces, ""),
        None if supports(InstallMode::OwnNamespace) => (InstallMode::OwnNamespace, ns),
        None => {
            let hint = if supports(InstallMode::SingleNamespace) {
                "it watches one namespace: set spec.watchNamespace on the PlatformOperator to the namespace it should watch".to_owned()
            } else {
                "POM installs AllNamespaces, OwnNamespace and SingleNamespace operators; ask the operator's publisher for a bundle that supports one of them".to_owned()
            };
            return Err(RenderError::InstallModeNotSupported {
                csv: csv.name.to_owned(),
                wanted: "AllNamespaces or OwnNamespace (the default without spec.watchNamespace)"
                    .to_owned(),
                supported,
                hint,
            });
        }
        Some(watch) if watch == ns => (InstallMode::OwnNamespace, ns),
        Some(watch) => (InstallMode::SingleNamespace, watch),
    };
    if !supports(mode) {
        return Err(RenderError::InstallModeNotSupported {
            csv: csv.name.to_owned(),
            wanted: format!("{mode} (spec.watchNamespace {watch:?})"),
            supported,
            hint: "change or remove spec.watchNamespace on the PlatformOperator".to_owned(),
        });
    }
    if mode == InstallMode::SingleNamespace {
        let why = if is_dns1123_label(watch) {
            reserved_watch_namespace(watch, opts.manager_namespace.as_deref())
        } else {
            Some("it is not a DNS-1123 label".to_owned())
        };
        if let Some(why) = why {
            return Err(RenderError::InvalidWatchNamespace {
                namespace: watch.to_owned(),
                why,
            });
        }
    }
    Ok((mode, watch.to_owned()))
}

fn single_csv<'m>(manifests: &'m [Manifest], layout: &Layout) -> Result<&'m Manifest, RenderError> {
    let csvs: Vec<&Manifest> = manifests
        .iter()
        .filter(|m| m.is(CSV_GROUP, CSV_KIND))
        .collect();
    match csvs.as_slice() {
        [csv] => Ok(csv),
        [] => Err(RenderError::NoCsv {
            manifests_dir: layout.manifests_dir_display(),
        }),
        several => Err(RenderError::SeveralCsvs {
            files: several.iter().map(|m| m.origin()).collect(),
        }),
    }
}

fn check_owned_crds(csv: &Csv<'_>, others: &[&Manifest]) -> Result<(), RenderError> {
    let shipped: BTreeSet<&str> = others
        .iter()
        .filter(|m| m.is("apiextensions.k8s.io", "CustomResourceDefinition"))
        .map(|m| m.name.as_str())
        .collect();
    let mut owned = csv.owned_crds();
    owned.sort();
    match owned
        .into_iter()
        .find(|crd| !shipped.contains(crd.as_str()))
    {
        Some(crd) => Err(RenderError::OwnedCrdMissing {
            csv: csv.name.to_owned(),
            crd,
        }),
        None => Ok(()),
    }
}

/// `<csv>-<serviceaccount>-<hash of what the entry grants>`, at most 63 characters.
fn rbac_name(csv: &str, tag: &str, permission: &Permission, rules: &[Value]) -> String {
    let hash_input = canonical_json(&json!({
        "source": tag,
        "serviceAccountName": permission.service_account,
        "rules": rules,
    }));
    hashed_name(
        &format!("{csv}-{}", permission.service_account),
        &hash_input,
    )
}

fn role(kind: &str, name: &str, namespace: Option<&str>, rules: &[Value]) -> Value {
    let mut metadata = json!({"name": name});
    if let (Some(ns), Some(map)) = (namespace, metadata.as_object_mut()) {
        map.insert("namespace".to_owned(), json!(ns));
    }
    json!({"apiVersion": RBAC_API, "kind": kind, "metadata": metadata, "rules": rules})
}

fn binding(
    kind: &str,
    role_kind: &str,
    name: &str,
    namespace: Option<&str>,
    accounts: &[&str],
    account_namespace: &str,
) -> Value {
    let mut metadata = json!({"name": name});
    if let (Some(ns), Some(map)) = (namespace, metadata.as_object_mut()) {
        map.insert("namespace".to_owned(), json!(ns));
    }
    let subjects: Vec<Value> = accounts
        .iter()
        .map(|account| json!({"kind": "ServiceAccount", "name": account, "namespace": account_namespace}))
        .collect();
    json!({
        "apiVersion": RBAC_API,
        "kind": kind,
        "metadata": metadata,
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": role_kind, "name": name},
        "subjects": subjects,
    })
}

/// The ServiceAccounts the Deployments run as, sorted and unique (`default` when unnamed).
fn deployment_service_accounts(deployments: &[StrategyDeployment]) -> Vec<String> {
    deployments
        .iter()
        .map(|d| {
            str_at(&d.spec, &["template", "spec", "serviceAccountName"])
                .filter(|s| !s.is_empty())
                .unwrap_or("default")
                .to_owned()
        })
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The CSV's string annotations plus `olm.targetNamespaces` (the watched namespace, "" = all).
fn pod_annotations(csv: &Csv<'_>, watch_namespace: &str) -> Map<String, Value> {
    let mut annotations: Map<String, Value> = csv
        .annotations()
        .into_iter()
        .filter_map(|(key, value)| scalar_to_string(&value).map(|s| (key, Value::String(s))))
        .collect();
    annotations.insert(
        TARGET_NAMESPACES_ANNOTATION.to_owned(),
        Value::String(watch_namespace.to_owned()),
    );
    annotations
}

fn render_deployment(
    deployment: &StrategyDeployment,
    ns: &str,
    csv_annotations: &Map<String, Value>,
    opts: &RenderOptions,
    csv_name: &str,
    serving_cert_secret: Option<&str>,
) -> Value {
    let mut spec = deployment.spec.clone();
    if let Some(spec_map) = spec.as_object_mut() {
        spec_map.insert("revisionHistoryLimit".to_owned(), json!(1));
    }
    if let Some(annotations) = object_at_mut(&mut spec, &["template", "metadata", "annotations"]) {
        // The pod template's own annotations win over the CSV's, except the target namespaces.
        for (key, value) in csv_annotations {
            if key == TARGET_NAMESPACES_ANNOTATION || !annotations.contains_key(key) {
                annotations.insert(key.clone(), value.clone());
            }
        }
    }
    if opts.operator_condition {
        inject_env(&mut spec, OPERATOR_CONDITION_ENV, csv_name);
    }
    if let Some(secret) = serving_cert_secret {
        webhooks::mount_serving_certificate(&mut spec, secret);
    }
    let mut metadata = json!({"name": deployment.name, "namespace": ns});
    if !deployment.labels.is_empty()
        && let Some(map) = metadata.as_object_mut()
    {
        map.insert(
            "labels".to_owned(),
            Value::Object(deployment.labels.clone()),
        );
    }
    json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec})
}

/// Sets `name=value` in every container's env, replacing an existing entry of that name.
fn inject_env(spec: &mut Value, name: &str, value: &str) {
    let Some(Value::Array(containers)) = spec
        .get_mut("template")
        .and_then(|t| t.get_mut("spec"))
        .and_then(|s| s.get_mut("containers"))
    else {
        return;
    };
    for container in containers.iter_mut().filter_map(Value::as_object_mut) {
        let env = container
            .entry("env")
            .or_insert_with(|| Value::Array(Vec::new()));
        if !env.is_array() {
            *env = Value::Array(Vec::new());
        }
        let Some(env) = env.as_array_mut() else {
            continue;
        };
        let var = json!({"name": name, "value": value});
        match env
            .iter_mut()
            .find(|var| var.get("name").and_then(Value::as_str) == Some(name))
        {
            Some(slot) => *slot = var,
            None => env.push(var),
        }
    }
}
