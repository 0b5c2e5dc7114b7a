//! Why a bundle cannot be rendered.
//!
//! Every refusal is its own variant so the controller can map it to a condition reason and an
//! admin can read, in one line, what is wrong, where (file, document, field) and what to do.

use std::path::PathBuf;

/// A bundle POM refuses to render, or cannot read.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// `BundleFiles::load_dir` could not read the bundle folder.
    #[error(
        "cannot read bundle file or folder {path}: {source}; check that the path exists and is readable"
    )]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    /// The install namespace in the render options is not a DNS-1123 label.
    #[error(
        "install namespace {namespace:?} is not a valid namespace name (lowercase letters, digits and '-', at most 63 characters, starting and ending with a letter or digit); choose another name"
    )]
    InvalidInstallNamespace { namespace: String },

    /// A manifest file is not UTF-8 text.
    #[error("bundle file {file} is not UTF-8 text; manifests must be YAML or JSON")]
    NotText { file: String },

    /// A manifest file does not parse as YAML (or JSON).
    #[error("bundle file {file} is not valid YAML: {message}; fix the file and rebuild the bundle")]
    MalformedYaml { file: String, message: String },

    /// A YAML document is a list or a scalar where a Kubernetes object was expected.
    #[error(
        "bundle file {file}, document {document} (line {line}): expected a Kubernetes object (a mapping with apiVersion, kind and metadata), found {found}"
    )]
    NotAnObject {
        file: String,
        document: usize,
        line: usize,
        found: &'static str,
    },

    /// An object lacks `apiVersion`, `kind` or `metadata.name`.
    #[error(
        "bundle file {file}, document {document} (line {line}): the object has no {missing}; every manifest needs apiVersion, kind and metadata.name (generateName is not supported)"
    )]
    IncompleteObject {
        file: String,
        document: usize,
        line: usize,
        missing: &'static str,
    },

    /// `metadata/annotations.yaml` names a media type POM does not render.
    #[error(
        "bundle media type {mediatype:?} (metadata/annotations.yaml, operators.operatorframework.io.bundle.mediatype.v1) is not supported; POM renders registry+v1 and plain+v0 bundles"
    )]
    UnsupportedMediaType { mediatype: String },

    /// `metadata/annotations.yaml` exists but is not the expected shape.
    #[error(
        "bundle file {file}: {problem}; see operator-registry docs/design/operator-bundle.md for the layout"
    )]
    MalformedAnnotations { file: String, problem: String },

    /// The manifests folder has a sub-folder (refused by OLM v0 and v1 alike).
    #[error(
        "bundle file {path} is inside a sub-folder of {manifests_dir}; subdirectories are not allowed there, move the manifest up one level"
    )]
    ManifestSubdirectory { path: String, manifests_dir: String },

    /// The bundle has no object to apply.
    #[error(
        "the bundle has no manifests under {manifests_dir}; a bundle must contain at least one object"
    )]
    NoManifests { manifests_dir: String },

    /// A registry+v1 bundle without a ClusterServiceVersion.
    #[error(
        "the registry+v1 bundle has no ClusterServiceVersion under {manifests_dir}; add the CSV or mark the bundle plain+v0"
    )]
    NoCsv { manifests_dir: String },

    /// A registry+v1 bundle with more than one ClusterServiceVersion.
    #[error("the registry+v1 bundle has {} ClusterServiceVersions ({}); a bundle carries exactly one", files.len(), files.join(", "))]
    SeveralCsvs { files: Vec<String> },

    /// The CSV does not support the install mode the PlatformOperator asks for.
    #[error(
        "ClusterServiceVersion {csv} does not support the {wanted} install mode (supported: {}); {hint}",
        if supported.is_empty() { "none".to_owned() } else { supported.join(", ") }
    )]
    InstallModeNotSupported {
        csv: String,
        wanted: String,
        supported: Vec<String>,
        hint: String,
    },

    /// The watch namespace is not a namespace name, or is one the platform reserves.
    #[error(
        "watch namespace {namespace:?} is refused: {why}; set spec.watchNamespace to the namespace the operator should watch"
    )]
    InvalidWatchNamespace { namespace: String, why: String },

    /// The CSV owns aggregated API services.
    #[error(
        "ClusterServiceVersion {csv} owns API services ({}, spec.apiservicedefinitions.owned); POM does not install APIServices yet; use a bundle without owned APIServices",
        apiservices.join(", ")
    )]
    ApiServicesNotSupported {
        csv: String,
        apiservices: Vec<String>,
    },

    /// The CSV has no usable install strategy.
    #[error(
        "ClusterServiceVersion {csv} ({file}) has no usable install strategy: {problem}; spec.install must be {{strategy: deployment, spec: {{deployments: [...]}}}}"
    )]
    MissingInstallStrategy {
        csv: String,
        file: String,
        problem: String,
    },

    /// The install strategy lists no Deployment.
    #[error(
        "ClusterServiceVersion {csv} ({file}) lists no Deployment in spec.install.spec.deployments; an operator bundle must run at least one Deployment"
    )]
    NoDeployments { csv: String, file: String },

    /// A CSV field POM reads has the wrong shape.
    #[error("ClusterServiceVersion {csv} ({file}): field {field} {problem}")]
    InvalidCsvField {
        csv: String,
        file: String,
        field: String,
        problem: String,
    },

    /// Two install-strategy Deployments share a name.
    #[error(
        "ClusterServiceVersion {csv} lists Deployment {name:?} more than once in spec.install.spec.deployments; names must be unique"
    )]
    DuplicateDeployment { csv: String, name: String },

    /// The CSV says it owns a CRD that the bundle does not ship.
    #[error(
        "ClusterServiceVersion {csv} owns CustomResourceDefinition {crd} (spec.customresourcedefinitions.owned) but the bundle does not contain it; add the CRD manifest to the bundle"
    )]
    OwnedCrdMissing { csv: String, crd: String },

    /// An object breaks the content policy (`content_policy`): it names the object, the rule
    /// and the exception an admin could give when one is allowed.
    #[error("{0}")]
    ContentPolicy(super::content_policy::PolicyViolations),

    /// The install namespace is one the platform reserves.
    #[error(
        "install namespace {namespace:?} is refused: {why}; set spec.installNamespace on the PlatformOperator to a namespace of its own (by default the PlatformOperator's name)"
    )]
    InstallNamespaceReserved { namespace: String, why: String },

    /// An object uses an API version that every cluster POM supports has removed.
    #[error(
        "bundle file {file}: {object} uses {api_version}, which Kubernetes removed in {removed_in}; this bundle cannot be applied on any supported cluster, use a bundle built with {use_instead}"
    )]
    RemovedApiVersion {
        file: String,
        /// `Kind "name"`.
        object: String,
        api_version: String,
        removed_in: &'static str,
        use_instead: &'static str,
    },

    /// Two different objects claim the same identity (group, kind, namespace, name).
    #[error(
        "{object} is defined twice with different content ({first} and {second}); remove one of them or give them different names"
    )]
    ConflictingObjects {
        object: String,
        first: String,
        second: String,
    },

    /// `olm.properties` or `metadata/properties.yaml` is malformed.
    #[error(
        "bundle properties in {source_name} are malformed: {problem}; expected a list of {{type, value}}"
    )]
    MalformedProperties {
        source_name: String,
        problem: String,
    },

    /// The admin's `spec.config` (or the cluster proxy) cannot be applied to a Deployment.
    #[error("{0}")]
    DeploymentConfig(#[from] super::deployment_config::DeploymentConfigError),

    /// `spec.config` is set for a plain+v0 bundle: it configures the Deployments of a
    /// registry+v1 bundle's ClusterServiceVersion (as OLM v1's `deploymentConfig`), and a
    /// plain bundle's manifests are applied as they are.
    #[error(
        "spec.config configures the Deployments of registry+v1 bundles only, and this bundle is plain+v0 (its manifests are applied as they are); remove spec.config, or set what it says in the bundle's manifests"
    )]
    ConfigOnPlainBundle,
}
