//! The labels and annotations of the install namespace POM creates, from what the CSV asks.
//!
//! OpenShift's console honours two CSV annotations when it creates an operator's suggested
//! namespace: `operatorframework.io/cluster-monitoring: "true"` (label
//! `openshift.io/cluster-monitoring=true`) and `operatorframework.io/suggested-namespace-template`,
//! a Namespace object as JSON whose labels and annotations it copies. A namespace's metadata is
//! power on OpenShift (a node selector, workload partitioning, Pod Security levels, platform
//! monitoring), so POM copies from the template only the entries of
//! [`TEMPLATE_ALLOWLIST`], each with the one value it allows, and only onto the namespace the
//! template names (the suggested one). Pod Security labels in particular are POM's to set,
//! from the PlatformOperator's consent (`pod_security`), never the bundle's. A template that
//! does not parse (two of the shared community bundles have trailing commas; they are parsed
//! as YAML, which allows them) or exceeds [`MAX_TEMPLATE_BYTES`] adds nothing.

use std::collections::BTreeMap;

use serde_json::Value;

use super::csv::{CLUSTER_MONITORING_LABEL, Csv};
use super::objects::{at, str_at};

/// The CSV annotation holding the suggested namespace as a Namespace object (JSON).
pub const SUGGESTED_NAMESPACE_TEMPLATE: &str = "operatorframework.io/suggested-namespace-template";

/// The most of a template POM reads (the real ones are a few hundred bytes).
pub const MAX_TEMPLATE_BYTES: usize = 16 * 1024;

/// Where an allowlisted entry goes on the Namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    Label,
    Annotation,
}

/// (where, key, the one value allowed) that POM copies from a suggested-namespace template.
pub const TEMPLATE_ALLOWLIST: &[(Field, &str, &str)] = &[
    // No project default node selector: what a DaemonSet on every node needs (NFD,
    // node-maintenance, storage-based-remediation). Any other value would steer pods.
    (Field::Annotation, "openshift.io/node-selector", ""),
    // Pods may ask for the management CPU partition, as OpenShift's own operators do.
    (
        Field::Annotation,
        "workload.openshift.io/allowed",
        "management",
    ),
    // Platform monitoring, as the cluster-monitoring annotation asks.
    (Field::Label, CLUSTER_MONITORING_LABEL, "true"),
];

/// The install namespace's metadata the bundle asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceMetadata {
    pub labels: BTreeMap<String, String>,
    pub annotations: BTreeMap<String, String>,
}

/// What `csv` asks of the namespace `install_namespace`.
pub(crate) fn of(csv: &Csv<'_>, install_namespace: &str) -> NamespaceMetadata {
    let mut metadata = NamespaceMetadata::default();
    if csv.wants_cluster_monitoring() {
        metadata
            .labels
            .insert(CLUSTER_MONITORING_LABEL.to_owned(), "true".to_owned());
    }
    let Some(template) = template(csv) else {
        return metadata;
    };
    if str_at(&template, &["metadata", "name"]) != Some(install_namespace) {
        return metadata;
    }
    for (field, key, allowed) in TEMPLATE_ALLOWLIST {
        let (source, target) = match field {
            Field::Label => ("labels", &mut metadata.labels),
            Field::Annotation => ("annotations", &mut metadata.annotations),
        };
        let value =
            at(&template, &["metadata", source, key]).and_then(super::objects::scalar_to_string);
        if value.as_deref() == Some(*allowed) {
            target.insert((*key).to_owned(), (*allowed).to_owned());
        }
    }
    metadata
}

/// The template, when the CSV has one POM can read.
fn template(csv: &Csv<'_>) -> Option<Value> {
    let text = str_at(
        csv.value,
        &["metadata", "annotations", SUGGESTED_NAMESPACE_TEMPLATE],
    )?;
    if text.len() > MAX_TEMPLATE_BYTES {
        return None;
    }
    // JSON is YAML; YAML also forgives the trailing commas hand-written templates carry.
    let value: Value = serde_saphyr::from_str(text).ok()?;
    (str_at(&value, &["kind"]) == Some("Namespace")).then_some(value)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn csv_value(annotations: Value) -> Value {
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
               "metadata": {"name": "op.v1", "annotations": annotations}})
    }

    fn metadata(annotations: Value, namespace: &str) -> NamespaceMetadata {
        let value = csv_value(annotations);
        let csv = Csv {
            name: "op.v1",
            file: "manifests/csv.yaml",
            value: &value,
        };
        of(&csv, namespace)
    }

    /// The shapes of the real templates: bpfman's (Pod Security labels, trailing commas),
    /// kubevirt-wol's (node selector and monitoring), storage-based-remediation's (one line).
    #[test]
    fn only_allowlisted_entries_with_their_one_value_are_taken() {
        let bpfman = "{\n \"apiVersion\": \"v1\", \"kind\": \"Namespace\",\n \"metadata\": {\"name\": \"bpfman\", \"labels\": {\"pod-security.kubernetes.io/enforce\": \"privileged\",},}\n}";
        let got = metadata(json!({SUGGESTED_NAMESPACE_TEMPLATE: bpfman}), "bpfman");
        assert_eq!(got, NamespaceMetadata::default(), "Pod Security is POM's");

        let wol = r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kubevirt-wol-system", "annotations": {"openshift.io/node-selector": ""}, "labels": {"openshift.io/cluster-monitoring": "true"}}}"#;
        let got = metadata(
            json!({SUGGESTED_NAMESPACE_TEMPLATE: wol}),
            "kubevirt-wol-system",
        );
        assert_eq!(
            got.annotations,
            BTreeMap::from([("openshift.io/node-selector".into(), String::new())])
        );
        assert_eq!(
            got.labels,
            BTreeMap::from([(CLUSTER_MONITORING_LABEL.into(), "true".into())])
        );
        // Another namespace than the template's: nothing from it.
        assert_eq!(
            metadata(json!({SUGGESTED_NAMESPACE_TEMPLATE: wol}), "elsewhere"),
            NamespaceMetadata::default()
        );
    }

    #[test]
    fn other_values_kinds_and_unreadable_templates_add_nothing() {
        for template in [
            // A node selector that steers pods.
            r#"{"kind": "Namespace", "metadata": {"name": "ns", "annotations": {"openshift.io/node-selector": "node-role.kubernetes.io/master="}}}"#.to_owned(),
            r#"{"kind": "ConfigMap", "metadata": {"name": "ns", "annotations": {"openshift.io/node-selector": ""}}}"#.to_owned(),
            "{not a template".to_owned(),
            format!(
                r#"{{"kind": "Namespace", "metadata": {{"name": "ns", "annotations": {{"openshift.io/node-selector": "", "pad": "{}"}}}}}}"#,
                "x".repeat(MAX_TEMPLATE_BYTES)
            ),
        ] {
            assert_eq!(
                metadata(json!({SUGGESTED_NAMESPACE_TEMPLATE: template}), "ns"),
                NamespaceMetadata::default(),
                "{}",
                &template[..template.len().min(120)]
            );
        }
    }

    #[test]
    fn the_cluster_monitoring_annotation_labels_the_namespace() {
        let got = metadata(
            json!({"operatorframework.io/cluster-monitoring": "true"}),
            "ns",
        );
        assert_eq!(
            got.labels,
            BTreeMap::from([(CLUSTER_MONITORING_LABEL.into(), "true".into())])
        );
    }
}
