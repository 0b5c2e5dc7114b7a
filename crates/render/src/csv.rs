//! Reading the parts of a ClusterServiceVersion that rendering needs, with errors that name
//! the exact field (`spec.install.spec.deployments[1].name`) when a bundle gets them wrong.

use serde_json::{Map, Value};

use super::error::RenderError;
use super::objects::{Manifest, at, str_at};

/// API group of the ClusterServiceVersion kind.
pub const CSV_GROUP: &str = "operators.coreos.com";
/// The ClusterServiceVersion kind.
pub const CSV_KIND: &str = "ClusterServiceVersion";

/// The CSV annotation naming the namespace its publisher suggests installing into.
pub const SUGGESTED_NAMESPACE: &str = "operatorframework.io/suggested-namespace";

/// The CSV annotation asking for platform monitoring of the install namespace.
pub const CLUSTER_MONITORING_ANNOTATION: &str = "operatorframework.io/cluster-monitoring";
/// The namespace label that opts a namespace into OpenShift's platform monitoring.
pub const CLUSTER_MONITORING_LABEL: &str = "openshift.io/cluster-monitoring";

/// A ClusterServiceVersion manifest.
#[derive(Debug, Clone, Copy)]
pub struct Csv<'a> {
    pub name: &'a str,
    pub file: &'a str,
    pub value: &'a Value,
}

/// One Deployment of the install strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct StrategyDeployment {
    pub name: String,
    pub spec: Value,
    pub labels: Map<String, Value>,
}

/// One `permissions` or `clusterPermissions` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Permission {
    /// `default` when the entry names none (as OLM does).
    pub service_account: String,
    pub rules: Vec<Value>,
}

/// The port a webhook's Service serves on when `containerPort` is not given (OLM's default).
pub const DEFAULT_WEBHOOK_PORT: i64 = 443;

/// The three kinds of webhook a CSV may define.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum WebhookType {
    Validating,
    Mutating,
    Conversion,
}

impl WebhookType {
    /// The name OLM uses in `spec.webhookdefinitions[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Validating => "ValidatingAdmissionWebhook",
            Self::Mutating => "MutatingAdmissionWebhook",
            Self::Conversion => "ConversionWebhook",
        }
    }

    fn parse(name: &str) -> Option<Self> {
        [Self::Validating, Self::Mutating, Self::Conversion]
            .into_iter()
            .find(|t| t.as_str() == name)
    }
}

impl std::fmt::Display for WebhookType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One entry of `spec.webhookdefinitions`, checked.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookDefinition {
    pub kind: WebhookType,
    pub generate_name: String,
    /// The strategy Deployment that serves it.
    pub deployment: String,
    /// The Service port the API server calls.
    pub container_port: i64,
    /// The pod port behind it (a number or a port name).
    pub target_port: Value,
    pub conversion_crds: Vec<String>,
    /// The entry as written (rules, policies and selectors are copied from it).
    pub raw: Value,
}

/// The `deployment` install strategy.
#[derive(Debug, Clone, PartialEq)]
pub struct Strategy {
    pub deployments: Vec<StrategyDeployment>,
    pub permissions: Vec<Permission>,
    pub cluster_permissions: Vec<Permission>,
}

impl<'a> Csv<'a> {
    /// Views a manifest known to be a CSV.
    pub fn new(manifest: &'a Manifest) -> Self {
        Self {
            name: &manifest.name,
            file: &manifest.file,
            value: &manifest.value,
        }
    }

    /// An error naming `field` of this CSV.
    pub(crate) fn invalid(
        &self,
        field: impl Into<String>,
        problem: impl Into<String>,
    ) -> RenderError {
        RenderError::InvalidCsvField {
            csv: self.name.to_owned(),
            file: self.file.to_owned(),
            field: field.into(),
            problem: problem.into(),
        }
    }

    /// Install modes with `supported: true`, in CSV order.
    pub fn supported_install_modes(&self) -> Vec<String> {
        list(self.value, &["spec", "installModes"])
            .iter()
            .filter(|mode| mode.get("supported").and_then(Value::as_bool) == Some(true))
            .filter_map(|mode| str_at(mode, &["type"]).map(str::to_owned))
            .collect()
    }

    /// `spec.webhookdefinitions`, checked as OLM does before it installs them: a known type, a
    /// DNS-1123 `generateName` unique per type, a `deploymentName` of the install strategy, a
    /// port in range, and `conversionCRDs` only on conversion webhooks, each CRD named once.
    pub fn webhook_definitions(
        &self,
        deployments: &[StrategyDeployment],
    ) -> Result<Vec<WebhookDefinition>, RenderError> {
        let entries = match at(self.value, &["spec", "webhookdefinitions"]) {
            None | Some(Value::Null) => return Ok(Vec::new()),
            Some(Value::Array(entries)) => entries,
            Some(_) => return Err(self.invalid("spec.webhookdefinitions", "is not a list")),
        };
        let mut definitions: Vec<WebhookDefinition> = Vec::with_capacity(entries.len());
        for (index, entry) in entries.iter().enumerate() {
            let definition = self.webhook_definition(index, entry, deployments, &definitions)?;
            definitions.push(definition);
        }
        Ok(definitions)
    }

    /// Entry `index` of `spec.webhookdefinitions`, checked field by field in the order OLM
    /// checks them; names and CRDs are unique across the entries before it (`earlier`).
    fn webhook_definition(
        &self,
        index: usize,
        entry: &Value,
        deployments: &[StrategyDeployment],
        earlier: &[WebhookDefinition],
    ) -> Result<WebhookDefinition, RenderError> {
        if !entry.is_object() {
            return Err(self.invalid(
                format!("spec.webhookdefinitions[{index}]"),
                "is not a mapping",
            ));
        }
        let field = |name: &str| definition_field(index, name);
        let kind = self.webhook_type(index, entry)?;
        let generate_name = self.webhook_name(index, entry, kind, earlier)?;
        let deployment = str_at(entry, &["deploymentName"]).unwrap_or_default();
        if !deployments.iter().any(|d| d.name == deployment) {
            return Err(self.invalid(
                field("deploymentName"),
                format!("{deployment:?} is not a Deployment of spec.install.spec.deployments (the webhook must be served by the operator's own Deployment)"),
            ));
        }
        let container_port = self.container_port(index, entry)?;
        let target_port = self.target_port(index, entry, container_port)?;
        let conversion_crds = self.conversion_crds(index, entry, kind, earlier)?;
        Ok(WebhookDefinition {
            kind,
            generate_name: generate_name.to_owned(),
            deployment: deployment.to_owned(),
            container_port,
            target_port,
            conversion_crds,
            raw: entry.clone(),
        })
    }

    /// A definition's `type`: one of the three OLM knows.
    fn webhook_type(&self, index: usize, entry: &Value) -> Result<WebhookType, RenderError> {
        let field = definition_field(index, "type");
        match str_at(entry, &["type"]) {
            Some(t) => WebhookType::parse(t).ok_or_else(|| {
                self.invalid(
                    field,
                    format!("{t:?} is not ValidatingAdmissionWebhook, MutatingAdmissionWebhook or ConversionWebhook"),
                )
            }),
            None => Err(self.invalid(field, "is missing or not a string")),
        }
    }

    /// A definition's `generateName`: it names the webhook and its configuration, so it must
    /// be a DNS-1123 subdomain and unique among the definitions of its type.
    fn webhook_name<'e>(
        &self,
        index: usize,
        entry: &'e Value,
        kind: WebhookType,
        earlier: &[WebhookDefinition],
    ) -> Result<&'e str, RenderError> {
        let field = || definition_field(index, "generateName");
        let generate_name = str_at(entry, &["generateName"])
            .filter(|n| super::names::is_dns1123_subdomain(n))
            .ok_or_else(|| {
                self.invalid(field(), "is missing or not a DNS-1123 subdomain (it names the webhook and its configuration)")
            })?;
        if earlier
            .iter()
            .any(|d| d.kind == kind && d.generate_name == generate_name)
        {
            return Err(self.invalid(
                field(),
                format!("{generate_name:?} names two {kind} definitions"),
            ));
        }
        Ok(generate_name)
    }

    /// A definition's `containerPort`: a port number, [`DEFAULT_WEBHOOK_PORT`] when unset.
    fn container_port(&self, index: usize, entry: &Value) -> Result<i64, RenderError> {
        match entry.get("containerPort") {
            None | Some(Value::Null) => Ok(DEFAULT_WEBHOOK_PORT),
            Some(port) => port
                .as_i64()
                .filter(|p| (1..=65535).contains(p))
                .ok_or_else(|| {
                    self.invalid(
                        definition_field(index, "containerPort"),
                        "is not a port number (1-65535)",
                    )
                }),
        }
    }

    /// A definition's `targetPort`: a port number or name, the containerPort when unset.
    fn target_port(
        &self,
        index: usize,
        entry: &Value,
        container_port: i64,
    ) -> Result<Value, RenderError> {
        // 0 and "" are Go's zero IntOrString, which the API server defaults to the port.
        match entry.get("targetPort") {
            None | Some(Value::Null) => Ok(Value::from(container_port)),
            Some(Value::Number(n)) if n.as_i64() == Some(0) => Ok(Value::from(container_port)),
            Some(Value::String(s)) if s.is_empty() => Ok(Value::from(container_port)),
            Some(Value::Number(n)) if n.as_i64().is_some_and(|p| (1..=65535).contains(&p)) => {
                Ok(Value::Number(n.clone()))
            }
            Some(Value::String(name))
                if super::names::is_dns1123_label(name) && name.len() <= 15 =>
            {
                Ok(Value::String(name.clone()))
            }
            Some(_) => Err(self.invalid(
                definition_field(index, "targetPort"),
                "is not a port number (1-65535) or a port name",
            )),
        }
    }

    /// A definition's `conversionCRDs`: set exactly on conversion webhooks, and no CRD
    /// converted by two of them (the `earlier` definitions).
    fn conversion_crds(
        &self,
        index: usize,
        entry: &Value,
        kind: WebhookType,
        earlier: &[WebhookDefinition],
    ) -> Result<Vec<String>, RenderError> {
        let field = || definition_field(index, "conversionCRDs");
        let conversion_crds: Vec<String> = match entry.get("conversionCRDs") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(names)) => names
                .iter()
                .map(|n| n.as_str().map(str::to_owned))
                .collect::<Option<_>>()
                .ok_or_else(|| self.invalid(field(), "is not a list of CRD names"))?,
            Some(_) => {
                return Err(self.invalid(field(), "is not a list of CRD names"));
            }
        };
        if kind == WebhookType::Conversion && conversion_crds.is_empty() {
            return Err(self.invalid(
                field(),
                "is empty: a ConversionWebhook must name the CRDs it converts",
            ));
        }
        if kind != WebhookType::Conversion && !conversion_crds.is_empty() {
            return Err(self.invalid(
                field(),
                format!("is set on a {kind}; only a ConversionWebhook converts CRDs"),
            ));
        }
        if let Some(crd) = conversion_crds
            .iter()
            .find(|crd| earlier.iter().any(|d| d.conversion_crds.contains(crd)))
        {
            return Err(self.invalid(field(), format!("CRD {crd:?} is converted by two webhooks")));
        }
        Ok(conversion_crds)
    }

    /// Owned API services as `<version>.<group>` (the APIService object name).
    pub fn owned_apiservices(&self) -> Vec<String> {
        list(self.value, &["spec", "apiservicedefinitions", "owned"])
            .iter()
            .map(|api| {
                let version = str_at(api, &["version"]).unwrap_or("?");
                let group = str_at(api, &["group"]).unwrap_or("?");
                format!("{version}.{group}")
            })
            .collect()
    }

    /// `operatorframework.io/suggested-namespace`, when it names a namespace.
    pub fn suggested_namespace(&self) -> Option<String> {
        str_at(
            self.value,
            &["metadata", "annotations", SUGGESTED_NAMESPACE],
        )
        .map(str::trim)
        .filter(|ns| !ns.is_empty())
        .map(str::to_owned)
    }

    /// `operatorframework.io/cluster-monitoring: "true"`: the publisher asks that OpenShift's
    /// platform Prometheus scrape the operator's namespace (the console then labels it).
    pub fn wants_cluster_monitoring(&self) -> bool {
        at(
            self.value,
            &["metadata", "annotations", CLUSTER_MONITORING_ANNOTATION],
        )
        .and_then(super::objects::scalar_to_string)
        .is_some_and(|v| v.trim() == "true")
    }

    /// Names of the owned CRDs.
    pub fn owned_crds(&self) -> Vec<String> {
        list(self.value, &["spec", "customresourcedefinitions", "owned"])
            .iter()
            .filter_map(|crd| str_at(crd, &["name"]).map(str::to_owned))
            .collect()
    }

    /// The CSV's own annotations that are strings (copied onto the operator's pods, as OLM does).
    pub fn annotations(&self) -> Map<String, Value> {
        match at(self.value, &["metadata", "annotations"]) {
            Some(Value::Object(map)) => map.clone(),
            _ => Map::new(),
        }
    }

    /// The install strategy, checked: strategy `deployment`, at least one Deployment, unique
    /// names, and every field POM reads of the right type.
    pub fn strategy(&self) -> Result<Strategy, RenderError> {
        let missing = |problem: &str| RenderError::MissingInstallStrategy {
            csv: self.name.to_owned(),
            file: self.file.to_owned(),
            problem: problem.to_owned(),
        };
        let install = at(self.value, &["spec", "install"])
            .ok_or_else(|| missing("spec.install is missing"))?;
        match str_at(install, &["strategy"]) {
            Some("deployment") => {}
            Some(other) => {
                return Err(missing(&format!(
                    "spec.install.strategy is {other:?}, not \"deployment\""
                )));
            }
            None => return Err(missing("spec.install.strategy is missing")),
        }
        let spec = install
            .get("spec")
            .ok_or_else(|| missing("spec.install.spec is missing"))?;
        if !spec.is_object() {
            return Err(self.invalid("spec.install.spec", "is not a mapping"));
        }
        let deployments = self.deployments(spec)?;
        if deployments.is_empty() {
            return Err(RenderError::NoDeployments {
                csv: self.name.to_owned(),
                file: self.file.to_owned(),
            });
        }
        Ok(Strategy {
            deployments,
            permissions: self.permissions(spec, "permissions")?,
            cluster_permissions: self.permissions(spec, "clusterPermissions")?,
        })
    }

    fn deployments(&self, spec: &Value) -> Result<Vec<StrategyDeployment>, RenderError> {
        let entries = self.array_field(spec, "deployments")?;
        let mut deployments: Vec<StrategyDeployment> = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let field = |name: &str| format!("spec.install.spec.deployments[{index}].{name}");
            let name = str_at(entry, &["name"])
                .filter(|n| !n.is_empty())
                .ok_or_else(|| self.invalid(field("name"), "is missing or not a string"))?;
            if !super::names::is_dns1123_subdomain(name) {
                return Err(self.invalid(
                    field("name"),
                    format!(
                        "{name:?} is not a valid Deployment name (lowercase DNS-1123 subdomain)"
                    ),
                ));
            }
            if deployments.iter().any(|d| d.name == name) {
                return Err(RenderError::DuplicateDeployment {
                    csv: self.name.to_owned(),
                    name: name.to_owned(),
                });
            }
            let spec = match entry.get("spec") {
                Some(spec @ Value::Object(_)) => spec.clone(),
                _ => return Err(self.invalid(field("spec"), "is missing or not a mapping")),
            };
            if !matches!(spec.get("template"), Some(Value::Object(_))) {
                return Err(self.invalid(field("spec.template"), "is missing or not a mapping"));
            }
            let labels = match entry.get("label") {
                None | Some(Value::Null) => Map::new(),
                Some(Value::Object(map)) if map.values().all(Value::is_string) => map.clone(),
                Some(_) => return Err(self.invalid(field("label"), "is not a mapping of strings")),
            };
            deployments.push(StrategyDeployment {
                name: name.to_owned(),
                spec,
                labels,
            });
        }
        Ok(deployments)
    }

    fn permissions(&self, spec: &Value, key: &str) -> Result<Vec<Permission>, RenderError> {
        let entries = self.array_field(spec, key)?;
        let mut permissions = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            let field = |name: &str| format!("spec.install.spec.{key}[{index}].{name}");
            let service_account = match entry.get("serviceAccountName") {
                None | Some(Value::Null) => "default".to_owned(),
                Some(Value::String(s)) if s.is_empty() => "default".to_owned(),
                Some(Value::String(s)) => s.clone(),
                Some(_) => return Err(self.invalid(field("serviceAccountName"), "is not a string")),
            };
            let rules = match entry.get("rules") {
                None | Some(Value::Null) => Vec::new(),
                Some(Value::Array(rules)) => rules.clone(),
                Some(_) => return Err(self.invalid(field("rules"), "is not a list")),
            };
            if let Some(bad) = rules.iter().position(|rule| !rule.is_object()) {
                return Err(self.invalid(field(&format!("rules[{bad}]")), "is not a mapping"));
            }
            permissions.push(Permission {
                service_account,
                rules,
            });
        }
        Ok(permissions)
    }

    fn array_field<'v>(&self, spec: &'v Value, key: &str) -> Result<&'v [Value], RenderError> {
        match spec.get(key) {
            None | Some(Value::Null) => Ok(&[]),
            Some(Value::Array(items)) => Ok(items),
            Some(_) => Err(self.invalid(format!("spec.install.spec.{key}"), "is not a list")),
        }
    }
}

/// The path of field `name` of entry `index` of `spec.webhookdefinitions`, as errors name it.
fn definition_field(index: usize, name: &str) -> String {
    format!("spec.webhookdefinitions[{index}].{name}")
}

/// The list at `path`, or nothing when absent or not a list.
fn list<'v>(value: &'v Value, path: &[&str]) -> &'v [Value] {
    match at(value, path) {
        Some(Value::Array(items)) => items,
        _ => &[],
    }
}
