//! Bundle rendering and judging: the files of a registry+v1 or plain+v0 bundle in, the objects
//! POM applies out (§6); the content policy that decides what a bundle may ask POM to apply, the
//! powers its ServiceAccounts would hold, and the CRD upgrade-safety check POM runs before it
//! replaces a CRD ([`crd_safety`]).
//!
//! Its own crate because it judges bundles and depends on nothing of resolution (versions,
//! catalogs, pins, selection live in `pom-resolver`), and resolution nothing of it: a change to
//! one neither rebuilds nor retests the other, and bundle judging is read, tested and fuzzed on
//! its own.
//!
//! Pure: [`render`] takes the bundle's files already in memory ([`BundleFiles`]) and returns
//! plain JSON objects in apply order. The controller adds its ownership labels and applies them
//! with server-side apply; `pomctl render` prints them. Anything POM cannot install faithfully
//! (an install mode the bundle lacks, APIServices, kinds or API versions a cluster would refuse)
//! is refused here with a [`RenderError`] that says why and what to do, before anything is
//! applied.
//!
//! Modules (one job each): `bundle` (files and YAML documents), `layout` (format detection
//! from `metadata/annotations.yaml`), `registry_v1` and `plain_v0` (the two formats), `csv`
//! (reading a ClusterServiceVersion), `assemble` (namespaces, duplicates, order), `kinds`
//! (static kind knowledge), `properties`, `names`, `objects`, and the public
//! [`content_policy`] (what a bundle may ask POM to apply) and [`crd_safety`].

mod assemble;
pub mod built_in_roles;
mod bundle;
pub mod content_policy;
pub mod crd_safety;
mod csv;
pub mod deployment_config;
mod error;
mod kinds;
mod layout;
mod names;
pub mod namespace_metadata;
mod objects;
mod plain_v0;
pub mod pod_security;
pub mod powers;
mod properties;
mod registry_v1;
pub mod served_apis;
mod subjects;
pub mod warnings;
pub mod webhook_reach;
pub mod webhooks;

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

pub use bundle::BundleFiles;
pub use content_policy::{
    ContentException, ContentRule, Judgement, Lift, OmittedObject, PolicyViolation,
    PolicyViolations,
};
pub use crd_safety::{CrdViolation, CrdViolationKind, check_crd_upgrade};
pub use deployment_config::{DeploymentConfig, ProxyEnv};
pub use error::RenderError;
pub use namespace_metadata::NamespaceMetadata;
pub use powers::{Power, PowerClass, Powers};
pub use warnings::RenderWarning;
pub use webhook_reach::WebhookConsent;
pub use webhooks::{CertificateSource, WebhookService};

use layout::Layout;
use objects::Manifest;

/// How to render a bundle.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderOptions {
    /// Namespace that receives every namespaced object (registry+v1), or every namespaced
    /// object that names none (plain+v0). POM creates it.
    pub install_namespace: String,
    /// Inject `OPERATOR_CONDITION_NAME=<csv name>` into every container of every Deployment and
    /// grant the operator's ServiceAccounts access to that OperatorCondition, as OLM v0 does, so
    /// operators built on operator-lib can report `Upgradeable` (§7, gate `OperatorCondition`).
    pub operator_condition: bool,
    /// The manager's own namespace and ServiceAccount: refused as an install namespace and as
    /// a binding subject (content policy).
    pub manager_namespace: Option<String>,
    pub manager_service_account: Option<String>,
    /// The content-policy exceptions the admin gave on the PlatformOperator.
    pub exceptions: Vec<ContentException>,
    /// The power classes the admin consented to (`spec.consent`).
    pub consent: BTreeSet<PowerClass>,
    /// The webhooks the admin consented to, each bound to what it covers
    /// (`spec.consent.webhooks`): a webhook over kinds not the bundle's own renders only with
    /// the entry naming it and the digest of what it matches.
    pub webhook_consent: BTreeSet<WebhookConsent>,
    /// Bindings of the bundle not to apply (`spec.omitObjects`).
    pub omit: Vec<OmittedObject>,
    /// The namespace the operator watches (`spec.watchNamespace`): `None` picks AllNamespaces
    /// when the bundle supports it, else OwnNamespace; the install namespace is OwnNamespace,
    /// any other SingleNamespace.
    pub watch_namespace: Option<String>,
    /// Who signs webhook serving certificates (OpenShift's service-ca, or POM).
    pub certificates: CertificateSource,
    /// The admin's configuration of the operator's Deployments (`spec.config`), applied to
    /// every Deployment of a registry+v1 bundle with OLM v0's rules
    /// ([`deployment_config::apply_deployment_config`]); refused for a plain+v0 bundle.
    pub deployment_config: Option<DeploymentConfig>,
    /// The cluster-wide proxy injected into every Deployment of a registry+v1 bundle (unless
    /// `deployment_config` names a proxy variable); plain+v0 bundles get none, as in OLM v1.
    pub proxy: Option<ProxyEnv>,
}

impl RenderOptions {
    /// Options for `install_namespace` without OperatorCondition wiring or exceptions.
    pub fn new(install_namespace: impl Into<String>) -> Self {
        Self {
            install_namespace: install_namespace.into(),
            operator_condition: false,
            manager_namespace: None,
            manager_service_account: None,
            exceptions: Vec::new(),
            consent: BTreeSet::new(),
            webhook_consent: BTreeSet::new(),
            omit: Vec::new(),
            watch_namespace: None,
            certificates: CertificateSource::default(),
            deployment_config: None,
            proxy: None,
        }
    }
}

/// The bundle format, as named in `operators.operatorframework.io.bundle.mediatype.v1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum BundleFormat {
    /// A ClusterServiceVersion plus CRDs and a few other manifests (OLM's format).
    RegistryV1,
    /// A folder of manifests applied as they are.
    PlainV0,
}

impl BundleFormat {
    /// The media type string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::RegistryV1 => "registry+v1",
            Self::PlainV0 => "plain+v0",
        }
    }
}

impl fmt::Display for BundleFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What POM applies for one bundle, and the facts about it the controller needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RenderedBundle {
    pub format: BundleFormat,
    /// `operators.operatorframework.io.bundle.package.v1` from `metadata/annotations.yaml`.
    pub package_name: Option<String>,
    /// The CSV's `metadata.name` (registry+v1): the OperatorCondition's name.
    pub csv_name: Option<String>,
    /// Objects in apply order: namespaces, CRDs, ServiceAccounts, (Cluster)Roles, bindings,
    /// other manifests, Deployments; sorted by (group, kind, namespace, name) within each step.
    pub objects: Vec<Value>,
    /// Names of the CustomResourceDefinitions, sorted (never deleted by POM).
    pub crds: Vec<String>,
    /// Names of the Deployments, sorted (what a move waits on, and the OperatorCondition's
    /// `spec.deployments`).
    pub deployments: Vec<String>,
    /// ServiceAccounts the Deployments run as (`default` when a pod names none), sorted: the
    /// OperatorCondition's `spec.serviceAccounts`.
    pub service_accounts: Vec<String>,
    /// `(type, value)` from the CSV's `olm.properties` annotation, then `metadata/properties.yaml`.
    pub properties: Vec<(String, Value)>,
    /// What the bundle's ServiceAccounts can do, by class (shown, and consented where needed).
    pub powers: Powers,
    /// The admin's content-policy exceptions this bundle needed (reported, never silent).
    pub exceptions_used: Vec<ContentException>,
    /// The bindings left out as the admin asked (reported, never silent).
    pub omitted: Vec<OmittedObject>,
    /// The consented power classes this bundle needed (reported, never silent).
    pub consents_used: BTreeSet<PowerClass>,
    /// The install mode it was rendered for (`None` for plain+v0), and the namespace it
    /// watches ("" = all).
    pub install_mode: Option<InstallMode>,
    pub watch_namespace: String,
    /// The CSV's `operatorframework.io/suggested-namespace`, if any.
    pub suggested_namespace: Option<String>,
    /// The Services POM rendered for the CSV's webhooks, with the Secret of each one's serving
    /// certificate (provisioned by POM or by the service-ca, [`RenderOptions::certificates`]).
    pub webhook_services: Vec<WebhookService>,
    /// Labels and annotations for the install namespace POM creates, from the CSV
    /// (`operatorframework.io/cluster-monitoring: "true"` → `openshift.io/cluster-monitoring`,
    /// and the allowlisted entries of its suggested-namespace template).
    pub namespace_metadata: NamespaceMetadata,
    /// What the render accepted but the admin should know (a manifest's repeated key), in
    /// file order: printed by `pomctl render`, a Warning Event on the PlatformOperator.
    pub warnings: Vec<RenderWarning>,
}

impl RenderedBundle {
    /// Values of every property of type `property_type`, in order (for example
    /// `olm.maxOpenShiftVersion`; more than one is an error for whoever judges it).
    pub fn property_values(&self, property_type: &str) -> Vec<&Value> {
        self.properties
            .iter()
            .filter(|(t, _)| t == property_type)
            .map(|(_, v)| v)
            .collect()
    }
}

/// Renders a bundle into the objects POM applies, or says why POM refuses it.
pub fn render(files: &BundleFiles, opts: &RenderOptions) -> Result<RenderedBundle, RenderError> {
    if !names::is_dns1123_label(&opts.install_namespace) {
        return Err(RenderError::InvalidInstallNamespace {
            namespace: opts.install_namespace.clone(),
        });
    }
    if let Some(why) = content_policy::reserved_namespace(
        &opts.install_namespace,
        opts.manager_namespace.as_deref(),
    ) {
        return Err(RenderError::InstallNamespaceReserved {
            namespace: opts.install_namespace.clone(),
            why,
        });
    }
    let layout = Layout::detect(files)?;
    let (manifests, warnings) = read_manifests(files, &layout)?;
    if manifests.is_empty() {
        return Err(RenderError::NoManifests {
            manifests_dir: layout.manifests_dir_display(),
        });
    }
    let format = layout.format(&manifests)?;
    let properties_file = layout.properties_file(files);
    let parts = match format {
        BundleFormat::RegistryV1 => registry_v1::render(&manifests, &layout, opts)?,
        BundleFormat::PlainV0 => plain_v0::render(&manifests)?,
    };
    let csv = parts
        .csv
        .as_ref()
        .map(|(file, value)| (file.as_str(), value));
    let properties = properties::collect(csv, properties_file)?;
    let namespace_policy = match format {
        BundleFormat::RegistryV1 => assemble::NamespacePolicy::Force,
        BundleFormat::PlainV0 => assemble::NamespacePolicy::DefaultOnly,
    };
    let (objects, omitted) = omit(parts.objects, &opts.omit);
    let assembled = assemble::assemble(objects, &opts.install_namespace, namespace_policy)?;
    let assembled = configure_deployments(assembled, format, opts)?;
    let judgement = content_policy::check(
        &assembled.objects,
        &assembled.origins,
        &content_policy::PolicyContext {
            format: Some(format),
            install_namespace: &opts.install_namespace,
            manager_namespace: opts.manager_namespace.as_deref(),
            manager_service_account: opts.manager_service_account.as_deref(),
            exceptions: &opts.exceptions,
            consent: &opts.consent,
            webhook_consent: &opts.webhook_consent,
            watch_namespace: parts.watch_namespace.as_deref().filter(|ns| !ns.is_empty()),
            rendered_webhooks: &parts.rendered_webhooks,
            cluster_monitoring: parts
                .namespace_metadata
                .labels
                .get(csv::CLUSTER_MONITORING_LABEL)
                .is_some_and(|value| value == "true"),
        },
    )
    .map_err(RenderError::ContentPolicy)?;
    Ok(RenderedBundle {
        format,
        package_name: layout.package.clone(),
        csv_name: parts.csv_name,
        objects: assembled.objects,
        crds: assembled.crds,
        deployments: assembled.deployments,
        service_accounts: assembled.service_accounts,
        properties,
        powers: judgement.powers,
        exceptions_used: judgement.exceptions_used,
        omitted,
        consents_used: judgement.consents_used,
        install_mode: parts.install_mode,
        watch_namespace: parts.watch_namespace.unwrap_or_default(),
        suggested_namespace: parts.suggested_namespace,
        webhook_services: parts.webhook_services,
        namespace_metadata: parts.namespace_metadata,
        warnings: warnings.into_iter().chain(assembled.warnings).collect(),
    })
}

/// Applies the admin's `spec.config` and the cluster proxy to every Deployment (issue 23 items
/// 3 and 4), before the content policy judges them: what the configuration adds (a volume, a
/// toleration) is judged like what the bundle ships. A registry+v1 bundle's Deployments are
/// those of its CSV's install strategy, as OLM configures them; a plain+v0 bundle's manifests
/// are applied as they are (OLM v1 configures registry+v1 bundles only): a configuration for
/// one is refused, and no proxy is injected.
fn configure_deployments(
    mut assembled: assemble::Assembled,
    format: BundleFormat,
    opts: &RenderOptions,
) -> Result<assemble::Assembled, RenderError> {
    let config = opts.deployment_config.as_ref().filter(|c| !c.is_empty());
    match format {
        BundleFormat::PlainV0 if config.is_some() => Err(RenderError::ConfigOnPlainBundle),
        BundleFormat::PlainV0 => Ok(assembled),
        BundleFormat::RegistryV1 => {
            for object in assembled.objects.iter_mut().filter(|o| {
                o.get("kind").and_then(Value::as_str) == Some("Deployment")
                    && o.get("apiVersion").and_then(Value::as_str) == Some("apps/v1")
            }) {
                deployment_config::apply_deployment_config(object, config, opts.proxy.as_ref())?;
            }
            Ok(assembled)
        }
    }
}

/// Leaves out the bindings the bundle ships that `omit` names (never one rendering generated);
/// returns the rest and the omissions that matched, in `omit`'s order. An omission that
/// matches nothing is not an error: a later bundle may no longer ship the binding.
fn omit(
    objects: Vec<assemble::Sourced>,
    omit: &[OmittedObject],
) -> (Vec<assemble::Sourced>, Vec<OmittedObject>) {
    if omit.is_empty() {
        return (objects, Vec::new());
    }
    let mut matched = BTreeSet::new();
    let kept = objects
        .into_iter()
        .filter(|object| {
            let key = objects::ObjectKey::of(&object.value);
            match omit.iter().find(|o| !object.generated && o.names(&key)) {
                Some(o) => {
                    matched.insert(o.clone());
                    false
                }
                None => true,
            }
        })
        .collect();
    let omitted = omit
        .iter()
        .filter(|o| matched.contains(*o))
        .cloned()
        .collect();
    (kept, omitted)
}

/// The namespace POM installs a bundle into when the PlatformOperator names none: the CSV's
/// `operatorframework.io/suggested-namespace` when it is a namespace POM may create (not one
/// of the platform's, such as OLM's global `openshift-operators`), else `fallback` (the
/// PlatformOperator's name). Reads the bundle without rendering it, so a bundle the policy
/// refuses still gets the namespace its refusal is judged in.
pub fn default_install_namespace(
    files: &BundleFiles,
    fallback: &str,
) -> Result<String, RenderError> {
    Ok(suggested_namespace(files)?
        .filter(|ns| {
            names::is_dns1123_label(ns) && content_policy::reserved_namespace(ns, None).is_none()
        })
        .unwrap_or_else(|| fallback.to_owned()))
}

/// The CSV's `operatorframework.io/suggested-namespace`, as written.
pub fn suggested_namespace(files: &BundleFiles) -> Result<Option<String>, RenderError> {
    let layout = Layout::detect(files)?;
    Ok(read_manifests(files, &layout)?
        .0
        .iter()
        .filter(|m| m.is(csv::CSV_GROUP, csv::CSV_KIND))
        .find_map(|m| csv::Csv::new(m).suggested_namespace()))
}

/// The package a bundle names in `metadata/annotations.yaml`, if any.
pub fn package_name(files: &BundleFiles) -> Result<Option<String>, RenderError> {
    Ok(Layout::detect(files)?.package.clone())
}

/// Parses every manifest file of the bundle into checked objects, in file order, with a
/// warning for every key a manifest repeats (its last value is the one kept).
fn read_manifests(
    files: &BundleFiles,
    layout: &Layout,
) -> Result<(Vec<Manifest>, Vec<RenderWarning>), RenderError> {
    let mut manifests = Vec::new();
    let mut warnings = Vec::new();
    for (path, bytes) in layout.manifest_files(files)? {
        for doc in bundle::parse_documents(path, bytes)? {
            warnings.extend(
                doc.duplicate_keys
                    .iter()
                    .map(|key| RenderWarning::DuplicateKey {
                        file: doc.file.clone(),
                        document: doc.index,
                        line: doc.line,
                        key: key.clone(),
                    }),
            );
            manifests.push(Manifest::from_document(doc)?);
        }
    }
    Ok((manifests, warnings))
}

/// Refuses objects whose API version no supported cluster serves.
fn check_removed_apis(manifests: &[Manifest]) -> Result<(), RenderError> {
    for manifest in manifests {
        if let Some(removed) = kinds::removed_api(&manifest.api_version, &manifest.kind) {
            return Err(RenderError::RemovedApiVersion {
                file: manifest.origin(),
                object: format!("{} {:?}", manifest.kind, manifest.name),
                api_version: manifest.api_version.clone(),
                removed_in: removed.removed_in,
                use_instead: removed.use_instead,
            });
        }
    }
    Ok(())
}

/// What a format renderer hands to `assemble`.
#[derive(Debug, Clone)]
pub(crate) struct Parts {
    /// The CSV's file and content (registry+v1), for its properties annotation.
    pub csv: Option<(String, Value)>,
    pub csv_name: Option<String>,
    pub objects: Vec<assemble::Sourced>,
    /// The install mode and watched namespace ("" = all; `None` for plain+v0).
    pub install_mode: Option<InstallMode>,
    pub watch_namespace: Option<String>,
    pub suggested_namespace: Option<String>,
    /// The Services rendered for webhooks, and (kind, name) of every object whose webhook POM
    /// rendered (configurations, CRDs with a conversion webhook).
    pub webhook_services: Vec<WebhookService>,
    pub rendered_webhooks: BTreeSet<(String, String)>,
    pub namespace_metadata: NamespaceMetadata,
}

/// OLM's install modes: which namespaces an operator watches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum InstallMode {
    /// Every namespace (`olm.targetNamespaces: ""`).
    AllNamespaces,
    /// Its own install namespace.
    OwnNamespace,
    /// One other namespace.
    SingleNamespace,
}

impl InstallMode {
    /// The name OLM uses in `spec.installModes[].type`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::AllNamespaces => "AllNamespaces",
            Self::OwnNamespace => "OwnNamespace",
            Self::SingleNamespace => "SingleNamespace",
        }
    }
}

impl fmt::Display for InstallMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
