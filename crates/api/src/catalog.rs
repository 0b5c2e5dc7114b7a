//! `Catalog`: where file-based catalogs come from (PRODUCT §3).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::{CustomResource, KubeSchema};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::validation::{DNS1123_LABEL, DNS1123_SUBDOMAIN, DURATION};

/// A source of file-based catalog content.
#[derive(CustomResource, KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq)]
#[kube(
    group = "platform.openshift.io",
    version = "v1alpha1",
    kind = "Catalog",
    plural = "catalogs",
    shortname = "pocat",
    category = "platform",
    status = "CatalogStatus",
    derive = "PartialEq",
    doc = "A Catalog: a source of file-based catalog content (an OCI index image or a ConfigMap).",
    printcolumn = r#"{"name":"Priority","type":"integer","jsonPath":".spec.priority"}"#,
    printcolumn = r#"{"name":"Serving","type":"string","jsonPath":".status.conditions[?(@.type==\"Serving\")].status"}"#,
    printcolumn = r#"{"name":"Packages","type":"integer","jsonPath":".status.packages"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct CatalogSpec {
    /// Exactly one of `image` or `configMap`.
    pub source: CatalogSource,
    /// Higher wins when several catalogs offer the package; equal top priority is an error.
    #[serde(default)]
    pub priority: i32,
}

/// Where the catalog content lives.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(rename_all = "camelCase")]
#[x_kube(validation = kube::core::Rule::new("has(self.image) != has(self.configMap)").message("exactly one of spec.source.image and spec.source.configMap must be set"))]
pub struct CatalogSource {
    /// An OCI image whose file-based catalog lies under `/configs` (the index-image layout).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
    /// A ConfigMap key holding file-based catalog content (JSON or YAML).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_map: Option<ConfigMapSource>,
}

/// An image catalog source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    /// Image reference, by tag or digest (`registry/repo:tag` or `registry/repo@sha256:...`).
    #[serde(rename = "ref")]
    #[schemars(length(min = 1, max = 1000))]
    pub reference: String,
    /// How often a tag is re-resolved to a digest (Go duration). Default 10m.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION))]
    pub poll_interval: Option<String>,
    /// A Secret of type `kubernetes.io/dockerconfigjson` (key `.dockerconfigjson`) with
    /// credentials for the registry of `ref` and of the bundle images this catalog lists. Its
    /// entries take precedence over the cluster's global pull secret
    /// (`openshift-config/pull-secret`, used when present) for the registries they name.
    /// Re-read at every poll; credentials never appear in status or events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pull_secret: Option<SecretReference>,
    /// A ConfigMap key holding PEM CA certificates trusted, besides the system roots, for the
    /// registry of `ref` and of this catalog's bundle images: for registries signed by a
    /// private CA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_bundle: Option<CaBundleReference>,
}

/// A Secret by namespace and name (a Catalog is cluster-scoped, so both are given).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct SecretReference {
    /// The Secret's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,
    /// The Secret's namespace.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL))]
    pub namespace: String,
}

/// A ConfigMap key holding PEM CA certificates.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct CaBundleReference {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,
    /// The ConfigMap's namespace.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL))]
    pub namespace: String,
    /// The data key holding the PEM certificates; default `ca-bundle.crt` (the key OpenShift's
    /// trusted-CA injection writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// A ConfigMap catalog source.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default, JsonSchema)]
pub struct ConfigMapSource {
    /// The ConfigMap's name.
    #[schemars(length(min = 1, max = 253), regex(pattern = DNS1123_SUBDOMAIN))]
    pub name: String,
    /// The ConfigMap's namespace.
    #[schemars(length(min = 1, max = 63), regex(pattern = DNS1123_LABEL))]
    pub namespace: String,
    /// The data key; default `catalog.json`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 253))]
    pub key: Option<String>,
}

/// What POM last read from the source.
#[derive(KubeSchema, Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct CatalogStatus {
    /// The `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// `Serving`: whether the content is unpacked and usable.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[x_kube(merge_strategy = kube::core::ListMerge::Map(vec!["type".into()]))]
    pub conditions: Vec<Condition>,
    /// The exact content served: the image digest reference, or the ConfigMap's resourceVersion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resolved_source: Option<String>,
    /// Where the image content of `resolvedSource` was read from: a mirror (and the
    /// ImageDigestMirrorSet, ImageTagMirrorSet or ImageContentSourcePolicy listing it) or the
    /// source itself, as the cluster's image mirror configuration sent the pull. Kept while the
    /// same content is served from POM's cache; absent for ConfigMap catalogs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 1024))]
    pub served_from: Option<String>,
    /// Number of packages served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub packages: Option<i64>,
    /// When the content was last unpacked (RFC 3339).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_unpacked: Option<String>,
    /// Packages of the content that are not served because their blobs are inconsistent, with
    /// why (the other packages are served; only PlatformOperators of these fail).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub invalid_packages: Vec<InvalidPackage>,
}

/// A package a Catalog does not serve, and why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
pub struct InvalidPackage {
    /// The package's name.
    pub name: String,
    /// Why it is not served: the inconsistency found in its blobs.
    pub reason: String,
}
