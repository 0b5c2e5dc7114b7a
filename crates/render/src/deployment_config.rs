//! The admin's configuration of an operator's Deployments (`PlatformOperator.spec.config`) and
//! the cluster-wide proxy, applied to a rendered Deployment exactly as OLM v0 applies a
//! Subscription's `spec.config` and the cluster Proxy to every Deployment of a CSV's install
//! strategy.
//!
//! Pure and not wired into rendering: the caller decides when a configuration change becomes a
//! move. Deployments are the plain JSON objects [`super::render`] returns.
//!
//! Where each rule comes from (operator-framework/operator-lifecycle-manager):
//! - `pkg/controller/operators/olm/overrides/initializer.go`: which env is injected (the
//!   subscription's, then the cluster proxy's unless the subscription names a proxy variable,
//!   without the proxy's empty values) and the order the rules run in;
//! - `pkg/lib/proxy` (`envvar.go`, `overridden.go`): the three proxy variables, read from the
//!   Proxy's status, and the rule that naming any one of them overrides all three;
//! - `pkg/controller/operators/olm/overrides/inject/inject.go`: how each field merges into the
//!   pod spec (`InjectEnvIntoDeployment`, `InjectEnvFromIntoDeployment`,
//!   `InjectVolumesIntoDeployment`, `InjectVolumeMountsIntoDeployment`,
//!   `InjectTolerationsIntoDeployment`, `InjectResourcesIntoDeployment`,
//!   `InjectNodeSelectorIntoDeployment`, `OverrideDeploymentAffinity`,
//!   `InjectAnnotationsIntoDeployment`);
//! - `pkg/controller/install/deployment.go`: `OPERATOR_CONDITION_NAME` is injected after the
//!   configuration, so the configuration cannot change it.
//!
//! Like OLM, env, envFrom, volumeMounts and resources reach the pod's `containers` only, never
//! its `initContainers`.
//!
//! Three deliberate departures from OLM v0, each to avoid a defect of its code:
//! - an empty `podAntiAffinity` removes only the pod anti-affinity (OLM v0 drops the whole
//!   affinity; OLM v1's operator-controller, `applyCustomConfigToDeployment`, fixed this);
//! - affinity parts are judged empty by their content (no terms), as OLM v1 does, not by being
//!   exactly `{}`;
//! - where a bundle's container lists one env name twice, every occurrence takes the
//!   configured value (OLM v0 keeps the first and appends a nameless entry for the others,
//!   which the API server refuses).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::registry_v1::OPERATOR_CONDITION_ENV;

/// The proxy URL for HTTP requests.
pub const HTTP_PROXY_ENV: &str = "HTTP_PROXY";
/// The proxy URL for HTTPS requests.
pub const HTTPS_PROXY_ENV: &str = "HTTPS_PROXY";
/// Hosts and domains reached without the proxy.
pub const NO_PROXY_ENV: &str = "NO_PROXY";
/// The three proxy variables, in the order OLM injects them. Names are case-sensitive:
/// `http_proxy` is not one of them.
pub const PROXY_ENV_NAMES: [&str; 3] = [HTTP_PROXY_ENV, HTTPS_PROXY_ENV, NO_PROXY_ENV];

/// The cluster-wide proxy, from the `config.openshift.io/v1` Proxy `cluster`'s **status**
/// (`httpProxy`, `httpsProxy`, `noProxy`): OpenShift validates the spec and publishes the
/// values in use there, and that is what OLM reads. An empty value means unset: that variable
/// is not injected.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProxyEnv {
    /// `status.httpProxy`, injected as `HTTP_PROXY`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub http_proxy: String,
    /// `status.httpsProxy`, injected as `HTTPS_PROXY`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub https_proxy: String,
    /// `status.noProxy`, injected as `NO_PROXY`.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub no_proxy: String,
}

impl ProxyEnv {
    /// The env vars this proxy injects: the non-empty ones, in `HTTP_PROXY`, `HTTPS_PROXY`,
    /// `NO_PROXY` order (OLM's `ToEnvVar` then `dropEmptyProxyEnv`).
    #[must_use]
    pub fn env(&self) -> Vec<Value> {
        [
            (HTTP_PROXY_ENV, &self.http_proxy),
            (HTTPS_PROXY_ENV, &self.https_proxy),
            (NO_PROXY_ENV, &self.no_proxy),
        ]
        .into_iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| env_var(name, value))
        .collect()
    }

    /// True when no variable would be injected.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.http_proxy.is_empty() && self.https_proxy.is_empty() && self.no_proxy.is_empty()
    }
}

/// The JSON form of `pom_api::platform_operator::OperatorConfig` (OLM's `SubscriptionConfig`
/// without its unused `selector`), kept as Kubernetes JSON so this crate stays free of the
/// Kubernetes type crates: `DeploymentConfig::from_json(serde_json::to_value(&config)?)`.
/// Entries are the Kubernetes objects verbatim (`EnvVar`, `EnvFromSource`, `Volume`,
/// `VolumeMount`, `Toleration`, `ResourceRequirements`, `Affinity`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct DeploymentConfig {
    /// Set in every container by name; see [`injected_env`] for the proxy.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub env: Vec<Value>,
    /// Added to every container unless already listed there.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub env_from: Vec<Value>,
    /// Added to the pod by name, replacing a volume of the same name.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub volumes: Vec<Value>,
    /// Added to every container by name, replacing a mount of the same name.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub volume_mounts: Vec<Value>,
    /// Added to the pod unless already there.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub tolerations: Vec<Value>,
    /// Replaces every container's resources when set.
    #[serde(default)]
    pub resources: Option<Value>,
    /// Replaces the pod's node selector when set (`{}` removes it).
    #[serde(default)]
    pub node_selector: Option<BTreeMap<String, String>>,
    /// Overrides the pod's affinity part by part when set.
    #[serde(default)]
    pub affinity: Option<Value>,
    /// Added to the Deployment's and the pod template's annotations, never replacing one.
    #[serde(default, deserialize_with = "null_as_empty")]
    pub annotations: BTreeMap<String, String>,
}

impl DeploymentConfig {
    /// Reads the JSON of a `spec.config` (`null` or absent fields are empty; `selector` and
    /// other unknown fields are ignored, as OLM ignores `selector`).
    ///
    /// # Errors
    /// When a field has the wrong shape (a list that is not a list, an entry that is not an
    /// object, an env, volume or volume mount without a string `name`).
    pub fn from_json(value: Value) -> Result<Self, DeploymentConfigError> {
        let config: Self = serde_json::from_value(value).map_err(DeploymentConfigError::Json)?;
        config.check()?;
        Ok(config)
    }

    /// True when applying it changes nothing (no field set).
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self == &Self::default()
    }

    fn check(&self) -> Result<(), DeploymentConfigError> {
        let named = [
            ("env", &self.env),
            ("volumes", &self.volumes),
            ("volumeMounts", &self.volume_mounts),
        ];
        for (field, entries) in named {
            for (index, entry) in entries.iter().enumerate() {
                if entry.get("name").and_then(Value::as_str).is_none() {
                    return Err(DeploymentConfigError::Config {
                        field: format!("{field}[{index}]"),
                        expected: "an object with a string name",
                    });
                }
            }
        }
        for (field, entries) in [
            ("envFrom", &self.env_from),
            ("tolerations", &self.tolerations),
        ] {
            for (index, entry) in entries.iter().enumerate() {
                if !entry.is_object() {
                    return Err(DeploymentConfigError::Config {
                        field: format!("{field}[{index}]"),
                        expected: "an object",
                    });
                }
            }
        }
        for (field, value) in [("resources", &self.resources), ("affinity", &self.affinity)] {
            if value.as_ref().is_some_and(|v| !v.is_object()) {
                return Err(DeploymentConfigError::Config {
                    field: field.to_owned(),
                    expected: "an object",
                });
            }
        }
        Ok(())
    }
}

/// `null` reads as empty, as a Go nil slice or map.
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

/// Why a configuration could not be read or applied.
#[derive(Debug, thiserror::Error)]
pub enum DeploymentConfigError {
    /// The configuration's JSON does not have `spec.config`'s shape.
    #[error("spec.config cannot be read: {0}")]
    Json(#[source] serde_json::Error),
    /// A field of the configuration has the wrong shape.
    #[error("spec.config.{field} must be {expected}")]
    Config {
        field: String,
        expected: &'static str,
    },
    /// The Deployment lacks a field the configuration goes into, or has it in another shape.
    #[error("Deployment {deployment:?}: {field} must be {expected} to apply spec.config")]
    Deployment {
        deployment: String,
        field: String,
        expected: &'static str,
    },
}

/// True when `env` names any of the proxy variables (even with an empty value): OLM then treats
/// all three as the admin's and injects none of the cluster's (`proxy.IsOverridden`).
#[must_use]
pub fn proxy_overridden(env: &[Value]) -> bool {
    env.iter()
        .filter_map(entry_name)
        .any(|name| PROXY_ENV_NAMES.contains(&name))
}

/// The env vars set in every container: the configuration's, then the cluster proxy's unless
/// the configuration names a proxy variable (OLM's initializer: `append(envVarOverrides,
/// proxyEnvVar...)`). An empty configured value is kept: the container gets the variable with
/// an empty value, which replaces the bundle's own and unsets the proxy for the operator.
#[must_use]
pub fn injected_env(config: Option<&DeploymentConfig>, proxy: Option<&ProxyEnv>) -> Vec<Value> {
    let configured: &[Value] = config.map_or(&[], |c| c.env.as_slice());
    let mut env = configured.to_vec();
    if !proxy_overridden(configured)
        && let Some(proxy) = proxy
    {
        env.extend(proxy.env());
    }
    env
}

/// Applies the configuration and the cluster proxy to one rendered Deployment with OLM's rules:
/// env (with the proxy), envFrom, volumes, volume mounts, tolerations, resources, node
/// selector, affinity, annotations (each touches its own fields, so their order does not
/// matter). With neither a configuration nor a proxy (or both empty)
/// the Deployment is left as it is. Applying twice gives what applying once gives.
///
/// Meant for the Deployments of a registry+v1 bundle (those of its CSV's install strategy),
/// after rendering: an `OPERATOR_CONDITION_NAME` rendering set is kept, as OLM injects it
/// after the configuration.
///
/// # Errors
/// When the Deployment has no pod template spec, or a field the configuration goes into has
/// another shape than Kubernetes gives it (containers, env, volumes... not lists, metadata not
/// an object). Nothing is changed then.
pub fn apply_deployment_config(
    deployment: &mut Value,
    config: Option<&DeploymentConfig>,
    proxy: Option<&ProxyEnv>,
) -> Result<(), DeploymentConfigError> {
    let env = injected_env(config, proxy);
    let empty = DeploymentConfig::default();
    let config = config.unwrap_or(&empty);
    if env.is_empty() && config.is_empty() {
        return Ok(());
    }
    let name = deployment
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    // Checked on a copy so a malformed Deployment is left untouched.
    let mut updated = deployment.clone();
    apply_to(&mut updated, config, &env).map_err(|(field, expected)| {
        DeploymentConfigError::Deployment {
            deployment: name,
            field,
            expected,
        }
    })?;
    *deployment = updated;
    Ok(())
}

/// A field of the Deployment and what it should have been.
type Malformed = (String, &'static str);

fn apply_to(
    deployment: &mut Value,
    config: &DeploymentConfig,
    env: &[Value],
) -> Result<(), Malformed> {
    let root = deployment
        .as_object_mut()
        .ok_or_else(|| (String::from("the Deployment"), "an object"))?;
    {
        const POD: &str = "spec.template.spec";
        let pod = object_field(root, &["spec", "template", "spec"], false)?
            .ok_or_else(|| (POD.to_owned(), "an object"))?;
        for (index, container) in containers(pod)?.into_iter().enumerate() {
            let at = |(field, expected): Malformed| {
                (format!("{POD}.containers[{index}].{field}"), expected)
            };
            merge_env(container, env).map_err(at)?;
            merge_env_from(container, &config.env_from).map_err(at)?;
            merge_named(container, "volumeMounts", &config.volume_mounts).map_err(at)?;
            if let Some(resources) = &config.resources {
                container.insert("resources".to_owned(), resources.clone());
            }
        }
        let at = |(field, expected): Malformed| (format!("{POD}.{field}"), expected);
        merge_named(pod, "volumes", &config.volumes).map_err(at)?;
        merge_tolerations(pod, &config.tolerations).map_err(at)?;
        if let Some(selector) = &config.node_selector {
            set_node_selector(pod, selector);
        }
        if let Some(affinity) = &config.affinity {
            override_affinity(pod, affinity).map_err(at)?;
        }
    }
    if !config.annotations.is_empty() {
        for path in [&["metadata"][..], &["spec", "template", "metadata"][..]] {
            if let Some(metadata) = object_field(root, path, true)? {
                add_annotations(metadata, &config.annotations).map_err(|(field, expected)| {
                    (format!("{}.{field}", path.join(".")), expected)
                })?;
            }
        }
    }
    Ok(())
}

/// The object at `path` under `root` (`None` when absent, unless `create` makes it); an error
/// when something else is there.
fn object_field<'v>(
    root: &'v mut Map<String, Value>,
    path: &[&str],
    create: bool,
) -> Result<Option<&'v mut Map<String, Value>>, Malformed> {
    let mut current = root;
    for (depth, key) in path.iter().enumerate() {
        if create && current.get(*key).is_none_or(Value::is_null) {
            current.insert((*key).to_owned(), Value::Object(Map::new()));
        }
        let Some(slot) = current.get_mut(*key).filter(|v| !v.is_null()) else {
            return Ok(None);
        };
        current = slot
            .as_object_mut()
            .ok_or_else(|| (path[..=depth].join("."), "an object"))?;
    }
    Ok(Some(current))
}

/// The pod's `containers` (absent: none), never its `initContainers`.
fn containers(pod: &mut Map<String, Value>) -> Result<Vec<&mut Map<String, Value>>, Malformed> {
    let field = "spec.template.spec.containers";
    match pod.get_mut("containers") {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(containers)) => containers
            .iter_mut()
            .enumerate()
            .map(|(i, c)| {
                c.as_object_mut()
                    .ok_or_else(|| (format!("{field}[{i}]"), "an object"))
            })
            .collect(),
        Some(_) => Err((field.to_owned(), "a list")),
    }
}

/// The list at `key` (absent or null: empty), or an error naming it.
fn list<'v>(object: &'v Map<String, Value>, key: &str) -> Result<&'v [Value], Malformed> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(items)) => Ok(items),
        Some(_) => Err((key.to_owned(), "a list")),
    }
}

fn entry_name(entry: &Value) -> Option<&str> {
    entry.get("name").and_then(Value::as_str)
}

fn env_var(name: &str, value: &str) -> Value {
    let mut var = Map::new();
    var.insert("name".to_owned(), Value::String(name.to_owned()));
    var.insert("value".to_owned(), Value::String(value.to_owned()));
    Value::Object(var)
}

/// `InjectEnvIntoDeployment`: every variable the container already has by a name in `env` takes
/// that entry (in place, keeping the container's order); the others are appended in `env`'s
/// order. The whole entry is taken (`valueFrom` included). `OPERATOR_CONDITION_NAME` already
/// set is kept: OLM sets it after the configuration.
fn merge_env(container: &mut Map<String, Value>, env: &[Value]) -> Result<(), Malformed> {
    if env.is_empty() {
        return Ok(());
    }
    let existing = list(container, "env")?;
    // By name, the last entry wins (names are unique in spec.config; the proxy's are only
    // added when the configuration names none of them).
    let mut by_name: BTreeMap<&str, &Value> = BTreeMap::new();
    for var in env {
        by_name.insert(entry_name(var).unwrap_or_default(), var);
    }
    if existing
        .iter()
        .any(|v| entry_name(v) == Some(OPERATOR_CONDITION_ENV))
    {
        by_name.remove(OPERATOR_CONDITION_ENV);
    }
    let mut merged: Vec<Value> = existing
        .iter()
        .map(|var| {
            entry_name(var)
                .and_then(|name| by_name.get(name))
                .map_or_else(|| var.clone(), |&new| new.clone())
        })
        .collect();
    for var in env {
        let name = entry_name(var).unwrap_or_default();
        if merged.iter().any(|v| entry_name(v) == Some(name)) {
            continue;
        }
        if let Some(&new) = by_name.get(name) {
            merged.push(new.clone());
        }
    }
    container.insert("env".to_owned(), Value::Array(merged));
    Ok(())
}

/// `InjectEnvFromIntoDeployment`: each source is appended unless the container already lists
/// an equal one (same prefix, same ConfigMap or Secret reference, same `optional`).
fn merge_env_from(container: &mut Map<String, Value>, sources: &[Value]) -> Result<(), Malformed> {
    append_unless_present(container, "envFrom", sources)
}

/// `InjectTolerationsIntoDeployment`: each toleration is appended unless the pod already has an
/// equal one.
fn merge_tolerations(pod: &mut Map<String, Value>, tolerations: &[Value]) -> Result<(), Malformed> {
    append_unless_present(pod, "tolerations", tolerations)
}

/// Appends each of `new` that equals none of the entries `object[key]` had before (OLM compares
/// against the original list, with Go's `DeepEqual`).
fn append_unless_present(
    object: &mut Map<String, Value>,
    key: &str,
    new: &[Value],
) -> Result<(), Malformed> {
    if new.is_empty() {
        return Ok(());
    }
    let existing = list(object, key)?;
    let existing_normal: Vec<Value> = existing.iter().map(normalized).collect();
    let mut merged = existing.to_vec();
    merged.extend(
        new.iter()
            .filter(|entry| !existing_normal.contains(&normalized(entry)))
            .cloned(),
    );
    object.insert(key.to_owned(), Value::Array(merged));
    Ok(())
}

/// `InjectVolumesIntoDeployment` and `InjectVolumeMountsIntoDeployment`: an entry replaces the
/// first of the original list with its name (the whole entry), else it is appended.
fn merge_named(object: &mut Map<String, Value>, key: &str, new: &[Value]) -> Result<(), Malformed> {
    if new.is_empty() {
        return Ok(());
    }
    let mut merged = list(object, key)?.to_vec();
    let original = merged.len();
    for entry in new {
        let name = entry_name(entry);
        match merged[..original]
            .iter()
            .position(|existing| entry_name(existing) == name)
        {
            Some(index) => merged[index] = entry.clone(),
            None => merged.push(entry.clone()),
        }
    }
    object.insert(key.to_owned(), Value::Array(merged));
    Ok(())
}

/// `InjectNodeSelectorIntoDeployment`: the configured selector replaces the pod's; an empty one
/// leaves the pod without one (Go omits the empty map).
fn set_node_selector(pod: &mut Map<String, Value>, selector: &BTreeMap<String, String>) {
    if selector.is_empty() {
        pod.remove("nodeSelector");
    } else {
        let map = selector
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        pod.insert("nodeSelector".to_owned(), Value::Object(map));
    }
}

const AFFINITY_PARTS: [&str; 3] = ["nodeAffinity", "podAffinity", "podAntiAffinity"];

/// `OverrideDeploymentAffinity`: an affinity with no part set removes the pod's affinity; else
/// each part set replaces the pod's (an empty one removes it) and the parts not set are kept.
/// An affinity left with no part is removed.
fn override_affinity(pod: &mut Map<String, Value>, affinity: &Value) -> Result<(), Malformed> {
    let set = |part: &str| affinity.get(part).filter(|v| !v.is_null());
    if AFFINITY_PARTS.iter().all(|part| set(part).is_none()) {
        pod.remove("affinity");
        return Ok(());
    }
    let mut current = match pod.get("affinity") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(current)) => current.clone(),
        Some(_) => return Err(("spec.template.spec.affinity".to_owned(), "an object")),
    };
    for part in AFFINITY_PARTS {
        if let Some(value) = set(part) {
            if affinity_part_empty(part, value) {
                current.remove(part);
            } else {
                current.insert(part.to_owned(), value.clone());
            }
        }
    }
    let has_part = AFFINITY_PARTS.iter().any(|part| {
        current
            .get(*part)
            .is_some_and(|v| !affinity_part_empty(part, v))
    });
    if has_part {
        pod.insert("affinity".to_owned(), Value::Object(current));
    } else {
        pod.remove("affinity");
    }
    Ok(())
}

/// A part with no terms schedules like no part at all.
fn affinity_part_empty(part: &str, value: &Value) -> bool {
    let no_items = |key: &str| {
        value
            .get(key)
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    };
    let preferred_empty = no_items("preferredDuringSchedulingIgnoredDuringExecution");
    let required_empty = if part == "nodeAffinity" {
        value
            .get("requiredDuringSchedulingIgnoredDuringExecution")
            .and_then(|r| r.get("nodeSelectorTerms"))
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    } else {
        no_items("requiredDuringSchedulingIgnoredDuringExecution")
    };
    preferred_empty && required_empty
}

/// `InjectAnnotationsIntoDeployment`: each annotation is added unless the object already has
/// that key (the bundle's, the CSV's and POM's own annotations keep their values).
fn add_annotations(
    metadata: &mut Map<String, Value>,
    annotations: &BTreeMap<String, String>,
) -> Result<(), Malformed> {
    let current = match metadata
        .entry("annotations")
        .or_insert_with(|| Value::Object(Map::new()))
    {
        slot @ Value::Null => {
            *slot = Value::Object(Map::new());
            slot
        }
        slot => slot,
    };
    let current = current
        .as_object_mut()
        .ok_or_else(|| (String::from("annotations"), "an object"))?;
    for (key, value) in annotations {
        current
            .entry(key.clone())
            .or_insert_with(|| Value::String(value.clone()));
    }
    Ok(())
}

/// A value as Go's `reflect.DeepEqual` sees the typed struct: an absent field, `null` and a
/// zero string are the same (`optional: false` is not absent: it is a pointer in Go).
fn normalized(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !matches!(v, Value::Null) && v.as_str() != Some(""))
                .map(|(k, v)| (k.clone(), normalized(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(normalized).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn deployment(pod: Value) -> Value {
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "op", "namespace": "ns"},
            "spec": {
                "selector": {"matchLabels": {"app": "op"}},
                "template": {"metadata": {"labels": {"app": "op"}}, "spec": pod},
            },
        })
    }

    fn config(value: Value) -> DeploymentConfig {
        match DeploymentConfig::from_json(value) {
            Ok(config) => config,
            Err(err) => panic!("test config does not read: {err}"),
        }
    }

    fn applied(
        mut deployment: Value,
        config: Option<&DeploymentConfig>,
        proxy: Option<&ProxyEnv>,
    ) -> Value {
        if let Err(err) = apply_deployment_config(&mut deployment, config, proxy) {
            panic!("apply failed: {err}");
        }
        deployment
    }

    fn pod(deployment: &Value) -> &Value {
        &deployment["spec"]["template"]["spec"]
    }

    fn proxy() -> ProxyEnv {
        ProxyEnv {
            http_proxy: "http://proxy:3128".into(),
            https_proxy: "http://proxy:3129".into(),
            no_proxy: ".cluster.local".into(),
        }
    }

    // ---- env (InjectEnvIntoDeployment, initializer.go, pkg/lib/proxy) ----

    #[test]
    fn env_replaces_a_bundle_variable_in_place_and_appends_new_ones_in_config_order() {
        let d = deployment(json!({"containers": [{"name": "m", "env": [
            {"name": "A", "value": "bundle"}, {"name": "B", "value": "keep"}]}]}));
        let c = config(
            json!({"env": [{"name": "C", "value": "3"}, {"name": "A", "value": "admin"}, {"name": "D", "value": "4"}]}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "A", "value": "admin"}, {"name": "B", "value": "keep"},
                   {"name": "C", "value": "3"}, {"name": "D", "value": "4"}])
        );
    }

    #[test]
    fn env_entry_is_taken_whole_including_value_from() {
        let d = deployment(
            json!({"containers": [{"name": "m", "env": [{"name": "A", "value": "x"}]}]}),
        );
        let c = config(
            json!({"env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "A", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}])
        );
    }

    #[test]
    fn env_goes_into_every_container_but_no_init_container() {
        let d = deployment(json!({
            "initContainers": [{"name": "init"}],
            "containers": [{"name": "a"}, {"name": "b", "env": [{"name": "X", "value": "1"}]}],
        }));
        let c = config(json!({"env": [{"name": "A", "value": "1"}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "A", "value": "1"}])
        );
        assert_eq!(
            pod(&out)["containers"][1]["env"],
            json!([{"name": "X", "value": "1"}, {"name": "A", "value": "1"}])
        );
        assert_eq!(pod(&out)["initContainers"], json!([{"name": "init"}]));
    }

    #[test]
    fn env_duplicate_bundle_names_all_take_the_configured_value() {
        let d = deployment(json!({"containers": [{"name": "m", "env": [
            {"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}]}));
        let c = config(json!({"env": [{"name": "A", "value": "admin"}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "A", "value": "admin"}, {"name": "A", "value": "admin"}])
        );
    }

    #[test]
    fn env_keeps_the_operator_condition_name_rendering_set() {
        let d = deployment(json!({"containers": [{"name": "m", "env": [
            {"name": OPERATOR_CONDITION_ENV, "value": "op.v1.0.0"}]}]}));
        let c = config(json!({"env": [{"name": OPERATOR_CONDITION_ENV, "value": "other"}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": OPERATOR_CONDITION_ENV, "value": "op.v1.0.0"}])
        );
    }

    #[test]
    fn proxy_env_is_injected_into_every_container_when_config_names_no_proxy_variable() {
        let d = deployment(json!({"containers": [{"name": "a"}, {"name": "b"}]}));
        let c = config(json!({"env": [{"name": "LOG", "value": "debug"}]}));
        let out = applied(d, Some(&c), Some(&proxy()));
        let want = json!([
            {"name": "LOG", "value": "debug"},
            {"name": "HTTP_PROXY", "value": "http://proxy:3128"},
            {"name": "HTTPS_PROXY", "value": "http://proxy:3129"},
            {"name": "NO_PROXY", "value": ".cluster.local"},
        ]);
        assert_eq!(pod(&out)["containers"][0]["env"], want);
        assert_eq!(pod(&out)["containers"][1]["env"], want);
    }

    #[test]
    fn proxy_env_is_injected_without_any_config() {
        let d = deployment(json!({"containers": [{"name": "a"}]}));
        let out = applied(d, None, Some(&proxy()));
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([
                {"name": "HTTP_PROXY", "value": "http://proxy:3128"},
                {"name": "HTTPS_PROXY", "value": "http://proxy:3129"},
                {"name": "NO_PROXY", "value": ".cluster.local"},
            ])
        );
    }

    #[test]
    fn proxy_env_replaces_the_bundles_own_proxy_variable() {
        let d = deployment(
            json!({"containers": [{"name": "a", "env": [{"name": "HTTP_PROXY", "value": "bundle"}]}]}),
        );
        let p = ProxyEnv {
            http_proxy: "http://proxy".into(),
            ..ProxyEnv::default()
        };
        let out = applied(d, None, Some(&p));
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "HTTP_PROXY", "value": "http://proxy"}])
        );
    }

    #[test]
    fn proxy_empty_cluster_values_are_not_injected() {
        let d = deployment(json!({"containers": [{"name": "a"}]}));
        let p = ProxyEnv {
            https_proxy: "http://proxy".into(),
            ..ProxyEnv::default()
        };
        let out = applied(d, None, Some(&p));
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "HTTPS_PROXY", "value": "http://proxy"}])
        );
    }

    #[test]
    fn proxy_config_naming_one_proxy_variable_overrides_all_three() {
        let d = deployment(json!({"containers": [{"name": "a"}]}));
        let c = config(json!({"env": [{"name": "NO_PROXY", "value": "example.com"}]}));
        let out = applied(d, Some(&c), Some(&proxy()));
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "NO_PROXY", "value": "example.com"}])
        );
    }

    #[test]
    fn proxy_empty_config_value_sets_the_variable_empty_and_keeps_the_cluster_proxy_out() {
        let d = deployment(
            json!({"containers": [{"name": "a", "env": [{"name": "HTTP_PROXY", "value": "bundle"}]}]}),
        );
        let c = config(json!({"env": [{"name": "HTTP_PROXY", "value": ""}]}));
        let out = applied(d, Some(&c), Some(&proxy()));
        assert_eq!(
            pod(&out)["containers"][0]["env"],
            json!([{"name": "HTTP_PROXY", "value": ""}])
        );
    }

    #[test]
    fn proxy_variable_names_are_case_sensitive() {
        let c = config(json!({"env": [{"name": "http_proxy", "value": "x"}]}));
        assert!(!proxy_overridden(&c.env));
        let env = injected_env(Some(&c), Some(&proxy()));
        assert_eq!(env.len(), 4);
    }

    // ---- envFrom (InjectEnvFromIntoDeployment) ----

    #[test]
    fn env_from_is_appended_to_every_container_unless_already_listed() {
        let d = deployment(json!({"containers": [
            {"name": "a", "envFrom": [{"configMapRef": {"name": "cm"}}]},
            {"name": "b"},
        ]}));
        let c = config(
            json!({"envFrom": [{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}, "prefix": "S_"}]}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["envFrom"],
            json!([{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}, "prefix": "S_"}])
        );
        assert_eq!(
            pod(&out)["containers"][1]["envFrom"],
            json!([{"configMapRef": {"name": "cm"}}, {"secretRef": {"name": "s"}, "prefix": "S_"}])
        );
    }

    #[test]
    fn env_from_differing_only_in_optional_is_another_source() {
        let d = deployment(
            json!({"containers": [{"name": "a", "envFrom": [{"configMapRef": {"name": "cm"}}]}]}),
        );
        let c = config(json!({"envFrom": [{"configMapRef": {"name": "cm", "optional": true}}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["envFrom"],
            json!([{"configMapRef": {"name": "cm"}}, {"configMapRef": {"name": "cm", "optional": true}}])
        );
    }

    #[test]
    fn env_from_empty_prefix_equals_no_prefix() {
        let d = deployment(
            json!({"containers": [{"name": "a", "envFrom": [{"configMapRef": {"name": "cm"}, "prefix": ""}]}]}),
        );
        let c = config(json!({"envFrom": [{"configMapRef": {"name": "cm"}}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["envFrom"],
            json!([{"configMapRef": {"name": "cm"}, "prefix": ""}])
        );
    }

    // ---- volumes and volume mounts (InjectVolumesIntoDeployment, InjectVolumeMountsIntoDeployment) ----

    #[test]
    fn volumes_replace_the_bundles_volume_of_the_same_name_and_append_the_others() {
        let d = deployment(json!({"containers": [], "volumes": [
            {"name": "cfg", "emptyDir": {}}, {"name": "keep", "emptyDir": {}}]}));
        let c = config(json!({"volumes": [
            {"name": "new", "secret": {"secretName": "s"}}, {"name": "cfg", "configMap": {"name": "cm"}}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["volumes"],
            json!([{"name": "cfg", "configMap": {"name": "cm"}}, {"name": "keep", "emptyDir": {}},
                   {"name": "new", "secret": {"secretName": "s"}}])
        );
    }

    #[test]
    fn volume_mounts_replace_by_name_in_every_container_but_no_init_container() {
        let d = deployment(json!({
            "initContainers": [{"name": "init", "volumeMounts": [{"name": "cfg", "mountPath": "/old"}]}],
            "containers": [
                {"name": "a", "volumeMounts": [{"name": "cfg", "mountPath": "/old"}, {"name": "x", "mountPath": "/x"}]},
                {"name": "b"},
            ],
        }));
        let c = config(
            json!({"volumeMounts": [{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}]}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["volumeMounts"],
            json!([{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}, {"name": "x", "mountPath": "/x"}])
        );
        assert_eq!(
            pod(&out)["containers"][1]["volumeMounts"],
            json!([{"name": "cfg", "mountPath": "/etc/cfg", "readOnly": true}])
        );
        assert_eq!(
            pod(&out)["initContainers"][0]["volumeMounts"],
            json!([{"name": "cfg", "mountPath": "/old"}])
        );
    }

    // ---- tolerations (InjectTolerationsIntoDeployment) ----

    #[test]
    fn tolerations_are_appended_unless_an_equal_one_is_there() {
        let d = deployment(json!({"containers": [], "tolerations": [
            {"key": "infra", "operator": "Exists", "effect": "NoSchedule", "value": ""}]}));
        let c = config(json!({"tolerations": [
            {"key": "infra", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "infra", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["tolerations"],
            json!([{"key": "infra", "operator": "Exists", "effect": "NoSchedule", "value": ""},
                   {"key": "infra", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}])
        );
    }

    // ---- resources (InjectResourcesIntoDeployment) ----

    #[test]
    fn resources_replace_every_containers_resources_entirely() {
        let d = deployment(json!({
            "initContainers": [{"name": "init", "resources": {"limits": {"cpu": "1"}}}],
            "containers": [
                {"name": "a", "resources": {"limits": {"cpu": "1"}, "requests": {"memory": "1Gi"}}},
                {"name": "b"},
            ],
        }));
        let c = config(json!({"resources": {"requests": {"cpu": "100m"}}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["resources"],
            json!({"requests": {"cpu": "100m"}})
        );
        assert_eq!(
            pod(&out)["containers"][1]["resources"],
            json!({"requests": {"cpu": "100m"}})
        );
        assert_eq!(
            pod(&out)["initContainers"][0]["resources"],
            json!({"limits": {"cpu": "1"}})
        );
    }

    #[test]
    fn resources_unset_leave_the_bundles_resources() {
        let d = deployment(
            json!({"containers": [{"name": "a", "resources": {"limits": {"cpu": "1"}}}]}),
        );
        let c = config(json!({"env": [{"name": "A", "value": "1"}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["containers"][0]["resources"],
            json!({"limits": {"cpu": "1"}})
        );
    }

    // ---- nodeSelector (InjectNodeSelectorIntoDeployment) ----

    #[test]
    fn node_selector_replaces_the_bundles_entirely() {
        let d = deployment(json!({"containers": [], "nodeSelector": {"a": "1", "b": "2"}}));
        let c = config(json!({"nodeSelector": {"node-role.kubernetes.io/infra": ""}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["nodeSelector"],
            json!({"node-role.kubernetes.io/infra": ""})
        );
    }

    #[test]
    fn node_selector_empty_removes_the_bundles() {
        let d = deployment(json!({"containers": [], "nodeSelector": {"a": "1"}}));
        let c = config(json!({"nodeSelector": {}}));
        let out = applied(d, Some(&c), None);
        assert!(pod(&out).get("nodeSelector").is_none());
    }

    #[test]
    fn node_selector_unset_keeps_the_bundles() {
        let d = deployment(json!({"containers": [], "nodeSelector": {"a": "1"}}));
        let c = config(json!({"annotations": {"x": "y"}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(pod(&out)["nodeSelector"], json!({"a": "1"}));
    }

    // ---- affinity (OverrideDeploymentAffinity) ----

    fn node_affinity(key: &str) -> Value {
        json!({"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": key, "operator": "Exists"}]}]}})
    }

    fn pod_terms(topology: &str) -> Value {
        json!({"requiredDuringSchedulingIgnoredDuringExecution": [{"topologyKey": topology}]})
    }

    fn full_affinity() -> Value {
        json!({"nodeAffinity": node_affinity("bundle"), "podAffinity": pod_terms("zone"),
               "podAntiAffinity": pod_terms("host")})
    }

    #[test]
    fn affinity_set_on_a_pod_without_one() {
        let d = deployment(json!({"containers": []}));
        let c = config(json!({"affinity": {"nodeAffinity": node_affinity("admin")}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["affinity"],
            json!({"nodeAffinity": node_affinity("admin")})
        );
    }

    #[test]
    fn affinity_part_set_replaces_only_that_part() {
        let d = deployment(json!({"containers": [], "affinity": full_affinity()}));
        let c = config(json!({"affinity": {"nodeAffinity": node_affinity("admin")}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["affinity"],
            json!({"nodeAffinity": node_affinity("admin"), "podAffinity": pod_terms("zone"),
                   "podAntiAffinity": pod_terms("host")})
        );
    }

    #[test]
    fn affinity_empty_part_removes_that_part() {
        let d = deployment(json!({"containers": [], "affinity": full_affinity()}));
        let c = config(
            json!({"affinity": {"nodeAffinity": node_affinity("admin"), "podAffinity": {}}}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["affinity"],
            json!({"nodeAffinity": node_affinity("admin"), "podAntiAffinity": pod_terms("host")})
        );
    }

    #[test]
    fn affinity_empty_pod_anti_affinity_removes_only_the_anti_affinity() {
        let d = deployment(json!({"containers": [], "affinity": full_affinity()}));
        let c = config(json!({"affinity": {"podAntiAffinity": {}}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            pod(&out)["affinity"],
            json!({"nodeAffinity": node_affinity("bundle"), "podAffinity": pod_terms("zone")})
        );
    }

    #[test]
    fn affinity_empty_object_removes_the_whole_affinity() {
        let d = deployment(json!({"containers": [], "affinity": full_affinity()}));
        let c = config(json!({"affinity": {}}));
        let out = applied(d, Some(&c), None);
        assert!(pod(&out).get("affinity").is_none());
    }

    #[test]
    fn affinity_left_without_parts_is_removed() {
        let d = deployment(
            json!({"containers": [], "affinity": {"nodeAffinity": node_affinity("bundle"), "podAffinity": pod_terms("zone")}}),
        );
        let c = config(
            json!({"affinity": {"nodeAffinity": {}, "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": []}}}),
        );
        let out = applied(d, Some(&c), None);
        assert!(pod(&out).get("affinity").is_none());
    }

    #[test]
    fn affinity_unset_keeps_the_bundles() {
        let d = deployment(json!({"containers": [], "affinity": full_affinity()}));
        let c = config(json!({"tolerations": [{"operator": "Exists"}]}));
        let out = applied(d, Some(&c), None);
        assert_eq!(pod(&out)["affinity"], full_affinity());
    }

    // ---- annotations (InjectAnnotationsIntoDeployment) ----

    #[test]
    fn annotations_are_added_to_the_deployment_and_pod_template_without_replacing_any() {
        let mut d = deployment(json!({"containers": []}));
        d["metadata"]["annotations"] = json!({"shared": "deployment"});
        d["spec"]["template"]["metadata"]["annotations"] =
            json!({"shared": "pod", "olm.targetNamespaces": ""});
        let c = config(
            json!({"annotations": {"shared": "admin", "olm.targetNamespaces": "x", "new": "admin"}}),
        );
        let out = applied(d, Some(&c), None);
        assert_eq!(
            out["metadata"]["annotations"],
            json!({"shared": "deployment", "olm.targetNamespaces": "x", "new": "admin"})
        );
        assert_eq!(
            out["spec"]["template"]["metadata"]["annotations"],
            json!({"shared": "pod", "olm.targetNamespaces": "", "new": "admin"})
        );
    }

    #[test]
    fn annotations_create_the_pod_template_metadata_when_missing() {
        let mut d = deployment(json!({"containers": []}));
        if let Some(template) = d["spec"]["template"].as_object_mut() {
            template.remove("metadata");
        }
        let c = config(json!({"annotations": {"a": "b"}}));
        let out = applied(d, Some(&c), None);
        assert_eq!(
            out["spec"]["template"]["metadata"],
            json!({"annotations": {"a": "b"}})
        );
        assert_eq!(out["metadata"]["annotations"], json!({"a": "b"}));
    }

    // ---- shape, no-ops and errors ----

    #[test]
    fn no_config_and_no_proxy_leaves_the_deployment_as_it_is() {
        let d = deployment(json!({"containers": [{"name": "a"}], "affinity": full_affinity()}));
        assert_eq!(applied(d.clone(), None, None), d);
        assert_eq!(
            applied(
                d.clone(),
                Some(&DeploymentConfig::default()),
                Some(&ProxyEnv::default())
            ),
            d
        );
    }

    #[test]
    fn selector_and_unknown_fields_of_the_config_are_ignored() {
        let c = config(json!({"selector": {"matchLabels": {"a": "b"}}, "env": null}));
        assert!(c.is_empty());
    }

    #[test]
    fn config_of_the_wrong_shape_is_refused_with_the_field() {
        let err = DeploymentConfig::from_json(json!({"volumes": [{"emptyDir": {}}]}));
        assert!(
            matches!(&err, Err(DeploymentConfigError::Config { field, .. }) if field == "volumes[0]"),
            "{err:?}"
        );
        assert!(DeploymentConfig::from_json(json!({"env": "A=1"})).is_err());
        assert!(DeploymentConfig::from_json(json!({"affinity": []})).is_err());
    }

    #[test]
    fn deployment_without_a_pod_spec_is_refused_and_left_unchanged() {
        let mut d = json!({"metadata": {"name": "op"}, "spec": {"template": {}}});
        let before = d.clone();
        let c = config(json!({"env": [{"name": "A", "value": "1"}]}));
        let err = apply_deployment_config(&mut d, Some(&c), None);
        assert!(
            matches!(&err, Err(DeploymentConfigError::Deployment { deployment, field, .. })
                if deployment == "op" && field == "spec.template.spec"),
            "{err:?}"
        );
        assert_eq!(d, before);
    }

    #[test]
    fn deployment_with_a_malformed_list_is_refused_and_left_unchanged() {
        let mut d = deployment(json!({"containers": [{"name": "a"}], "tolerations": "none"}));
        let before = d.clone();
        let c = config(
            json!({"env": [{"name": "A", "value": "1"}], "tolerations": [{"operator": "Exists"}]}),
        );
        let err = apply_deployment_config(&mut d, Some(&c), None);
        assert!(
            matches!(&err, Err(DeploymentConfigError::Deployment { field, .. }) if field == "spec.template.spec.tolerations"),
            "{err:?}"
        );
        assert_eq!(d, before);
    }

    #[test]
    fn operator_config_json_round_trips_through_the_config() {
        let c = config(json!({
            "env": [{"name": "A", "value": ""}],
            "envFrom": [{"secretRef": {"name": "s"}}],
            "volumes": [{"name": "v", "emptyDir": {}}],
            "volumeMounts": [{"name": "v", "mountPath": "/v"}],
            "tolerations": [{"operator": "Exists"}],
            "resources": {"limits": {"memory": "1Gi"}},
            "nodeSelector": {},
            "affinity": {"podAntiAffinity": {}},
            "annotations": {"a": "b"},
        }));
        assert_eq!(c.node_selector, Some(BTreeMap::new()));
        assert_eq!(c.env, vec![json!({"name": "A", "value": ""})]);
        assert_eq!(c.affinity, Some(json!({"podAntiAffinity": {}})));
    }

    // ---- properties ----

    mod props {
        use super::*;
        use proptest::prelude::*;

        fn name() -> impl Strategy<Value = String> {
            prop::sample::select(vec![
                "a",
                "b",
                "c",
                "HTTP_PROXY",
                "NO_PROXY",
                OPERATOR_CONDITION_ENV,
            ])
            .prop_map(str::to_owned)
        }

        fn env_entry() -> impl Strategy<Value = Value> {
            (name(), prop::option::of("[a-z]{0,2}")).prop_map(|(n, v)| match v {
                Some(v) => json!({"name": n, "value": v}),
                None => {
                    json!({"name": n, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}})
                }
            })
        }

        fn env_from_entry() -> impl Strategy<Value = Value> {
            (
                prop::sample::select(vec!["cm1", "cm2"]),
                prop::option::of(any::<bool>()),
                prop::option::of("[A-Z]{0,1}"),
            )
                .prop_map(|(n, optional, prefix)| {
                    let mut source = json!({"configMapRef": {"name": n}});
                    if let Some(optional) = optional {
                        source["configMapRef"]["optional"] = json!(optional);
                    }
                    if let Some(prefix) = prefix {
                        source["prefix"] = json!(prefix);
                    }
                    source
                })
        }

        fn volume(n: String) -> Value {
            json!({"name": n, "emptyDir": {}})
        }

        fn mount_entry() -> impl Strategy<Value = Value> {
            (prop::sample::select(vec!["v1", "v2", "v3"]), "/[a-z]{1,2}")
                .prop_map(|(n, path)| json!({"name": n, "mountPath": path}))
        }

        fn toleration() -> impl Strategy<Value = Value> {
            (
                prop::sample::select(vec!["k1", "k2"]),
                prop::sample::select(vec!["", "NoSchedule"]),
            )
                .prop_map(|(k, e)| json!({"key": k, "operator": "Exists", "effect": e}))
        }

        fn affinity_part() -> impl Strategy<Value = Option<Value>> {
            prop_oneof![
                Just(None),
                Just(Some(json!({}))),
                Just(Some(pod_terms("zone"))),
                Just(Some(
                    json!({"preferredDuringSchedulingIgnoredDuringExecution": []})
                )),
            ]
        }

        fn affinity() -> impl Strategy<Value = Option<Value>> {
            prop::option::of(
                (
                    prop_oneof![
                        Just(None),
                        Just(Some(json!({}))),
                        Just(Some(node_affinity("n")))
                    ],
                    affinity_part(),
                    affinity_part(),
                )
                    .prop_map(|(node, pod, anti)| {
                        let mut a = Map::new();
                        for (k, v) in [
                            ("nodeAffinity", node),
                            ("podAffinity", pod),
                            ("podAntiAffinity", anti),
                        ] {
                            if let Some(v) = v {
                                a.insert(k.to_owned(), v);
                            }
                        }
                        Value::Object(a)
                    }),
            )
        }

        fn annotations() -> impl Strategy<Value = BTreeMap<String, String>> {
            prop::collection::btree_map(
                prop::sample::select(vec!["a", "b", "c"]).prop_map(str::to_owned),
                "[a-z]{0,2}",
                0..3,
            )
        }

        fn unique_by_name(entries: Vec<Value>) -> Vec<Value> {
            let mut seen = std::collections::BTreeSet::new();
            entries
                .into_iter()
                .filter(|e| seen.insert(entry_name(e).unwrap_or_default().to_owned()))
                .collect()
        }

        fn container() -> impl Strategy<Value = Value> {
            (
                prop::collection::vec(env_entry(), 0..4),
                prop::collection::vec(env_from_entry(), 0..3),
                prop::collection::vec(mount_entry(), 0..3),
                prop::option::of(Just(json!({"limits": {"cpu": "1"}}))),
            )
                .prop_map(|(env, env_from, mounts, resources)| {
                    let mut c = json!({"name": "c", "env": env, "envFrom": env_from, "volumeMounts": mounts});
                    if let Some(r) = resources {
                        c["resources"] = r;
                    }
                    c
                })
        }

        prop_compose! {
            fn any_deployment()(
                containers in prop::collection::vec(container(), 0..3),
                init in prop::collection::vec(container(), 0..2),
                volumes in prop::collection::vec(prop::sample::select(vec!["v1", "v2", "v3"]).prop_map(|n| volume(n.to_owned())), 0..3),
                tolerations in prop::collection::vec(toleration(), 0..3),
                node_selector in prop::option::of(annotations()),
                affinity in affinity(),
                deployment_annotations in prop::option::of(annotations()),
                pod_annotations in prop::option::of(annotations()),
            ) -> Value {
                let mut pod = json!({"containers": containers, "initContainers": init, "volumes": volumes, "tolerations": tolerations});
                if let Some(selector) = node_selector {
                    pod["nodeSelector"] = json!(selector);
                }
                if let Some(affinity) = affinity {
                    pod["affinity"] = affinity;
                }
                let mut d = deployment(pod);
                if let Some(a) = deployment_annotations {
                    d["metadata"]["annotations"] = json!(a);
                }
                if let Some(a) = pod_annotations {
                    d["spec"]["template"]["metadata"]["annotations"] = json!(a);
                }
                d
            }
        }

        prop_compose! {
            /// A configuration the CRD admits: env, volume and volume mount names unique.
            fn any_config()(
                env in prop::collection::vec(env_entry(), 0..4),
                env_from in prop::collection::vec(env_from_entry(), 0..3),
                volumes in prop::collection::vec(prop::sample::select(vec!["v1", "v2", "v4"]).prop_map(|n| volume(n.to_owned())), 0..3),
                volume_mounts in prop::collection::vec(mount_entry(), 0..3),
                tolerations in prop::collection::vec(toleration(), 0..3),
                resources in prop::option::of(prop_oneof![Just(json!({})), Just(json!({"requests": {"cpu": "100m"}}))]),
                node_selector in prop::option::of(annotations()),
                affinity in affinity(),
                annotations in annotations(),
            ) -> DeploymentConfig {
                DeploymentConfig {
                    env: unique_by_name(env),
                    env_from,
                    volumes: unique_by_name(volumes),
                    volume_mounts: unique_by_name(volume_mounts),
                    tolerations,
                    resources,
                    node_selector,
                    affinity,
                    annotations,
                }
            }
        }

        fn any_proxy() -> impl Strategy<Value = Option<ProxyEnv>> {
            prop::option::of(
                ("(http://p)?", "(http://q)?", "(\\.local)?").prop_map(|(h, s, n)| ProxyEnv {
                    http_proxy: h,
                    https_proxy: s,
                    no_proxy: n,
                }),
            )
        }

        proptest! {
            #[test]
            fn applying_the_same_config_twice_equals_applying_it_once(
                d in any_deployment(),
                c in prop::option::of(any_config()),
                p in any_proxy(),
            ) {
                let once = applied(d, c.as_ref(), p.as_ref());
                let twice = applied(once.clone(), c.as_ref(), p.as_ref());
                prop_assert_eq!(twice, once);
            }

            #[test]
            fn no_config_and_no_proxy_changes_nothing(d in any_deployment()) {
                prop_assert_eq!(applied(d.clone(), None, None), d.clone());
                prop_assert_eq!(applied(d.clone(), Some(&DeploymentConfig::default()), Some(&ProxyEnv::default())), d);
            }

            #[test]
            fn init_containers_are_never_touched(
                d in any_deployment(),
                c in prop::option::of(any_config()),
                p in any_proxy(),
            ) {
                let out = applied(d.clone(), c.as_ref(), p.as_ref());
                prop_assert_eq!(&pod(&out)["initContainers"], &pod(&d)["initContainers"]);
            }
        }
    }
}
