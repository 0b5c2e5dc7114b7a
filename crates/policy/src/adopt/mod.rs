//! Adoption of what OLM v0 installed (issue 36), pure: which Subscriptions of a cluster POM
//! could take over, what stands in the way of the others, and the PlatformOperator that would
//! adopt each one.
//!
//! Three steps, each a function of its arguments, so that `pomctl adopt --dry-run` now and the
//! manager's adoption later judge alike:
//! 1. [`installs`]: the cluster's Subscriptions, CSVs, OperatorGroups and PlatformOperators
//!    grouped into one [`OlmInstall`] per Subscription;
//! 2. [`propose`]: the facts of the install alone (installed CSV, OperatorGroup, namespace,
//!    owned APIServices, declared dependencies, `config`) → the [`Proposal`], a
//!    PlatformOperator pinned to the installed bundle, or why there is none;
//! 3. [`proof::locate`] then [`proof::judge`]: what POM itself says about that bundle, with the
//!    functions the manager calls: the catalogs list it with no dependency, the resolver
//!    chooses exactly it for the proposed PlatformOperator, and the renderer renders it in the
//!    OperatorGroup's install mode, refused for nothing but consent. The result is the
//!    [`proof::AdoptionProof`] adoption will check against what runs before it writes.

pub mod give_back;
pub mod guard;
mod install;
pub mod proof;
pub mod takeover;
#[cfg(test)]
mod tests;
pub mod webhooks;

use std::collections::BTreeSet;
use std::fmt;

use pom_api::PlatformOperator;
use pom_render::PowerClass;

pub use install::{
    InstallTarget, MAX_SUBSCRIPTION_CONFIG_BYTES, OlmInstall, Proposal, installs, propose,
};
pub use proof::{AdoptionProof, Comparison, Located, ObjectKey, RenderContext, judge, locate};
pub use takeover::{NotProven, OlmSource, Pair, Release, TakeOver, TakeOverInput, prove};

/// Whether POM can adopt one Subscription's install.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The PlatformOperator can be applied as it is.
    Adoptable,
    /// The bundle's ServiceAccounts hold dangerous powers: the PlatformOperator carries the
    /// consent they need (PRODUCT §6), which the admin gives by applying it.
    AdoptableWithConsent { powers: BTreeSet<PowerClass> },
    /// POM cannot take it over, and why.
    NotAdoptable(NotAdoptable),
}

impl Verdict {
    /// The verdict's name, as the table prints it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::Adoptable => "Adoptable",
            Self::AdoptableWithConsent { .. } => "AdoptableWithConsent",
            Self::NotAdoptable(_) => "NotAdoptable",
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why an install cannot be adopted: one variant per obstacle, each message naming the object
/// and what the admin can do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotAdoptable {
    #[error(
        "the Subscription has installed nothing yet (state {state:?}): let OLM finish the install, or install the package with a PlatformOperator instead"
    )]
    NotInstalled { state: String },
    #[error(
        "the installed ClusterServiceVersion {csv} is not in the namespace: OLM is mid-change; run again once the Subscription settles"
    )]
    CsvMissing { csv: String },
    #[error(
        "ClusterServiceVersion {csv} is in phase {phase:?}, not Succeeded: POM adopts only what runs as OLM intended; fix the install first"
    )]
    CsvNotSucceeded { csv: String, phase: String },
    #[error(
        "ClusterServiceVersion {csv} has no readable spec.version ({version:?}): POM cannot pin what it cannot read"
    )]
    CsvVersionUnreadable { csv: String, version: String },
    #[error(
        "the namespace has no OperatorGroup: OLM would not run this operator either; nothing says which namespaces it watches"
    )]
    NoOperatorGroup,
    #[error(
        "the namespace has {} OperatorGroups ({}): OLM refuses that too (TooManyOperatorGroups); delete all but one",
        names.len(), names.join(", ")
    )]
    SeveralOperatorGroups { names: Vec<String> },
    #[error(
        "OperatorGroup {name} selects its namespaces by label and OLM has not resolved them (status.namespaces is empty): run again once OLM has"
    )]
    OperatorGroupUnresolved { name: String },
    #[error(
        "OperatorGroup {name} targets {} namespaces ({}): MultiNamespace installs are not supported by POM (one watch namespace per PlatformOperator); narrow the OperatorGroup to one namespace or to all",
        targets.len(), targets.join(", ")
    )]
    MultiNamespace { name: String, targets: Vec<String> },
    #[error(
        "namespace {namespace} is one of the platform's own namespaces (openshift-operators is OLM's global one): a PlatformOperator never installs there; reinstall the operator into a namespace of its own"
    )]
    PlatformNamespace { namespace: String },
    #[error(
        "namespace {namespace} also holds Subscription(s) {}: POM installs each operator into a namespace of its own, so none of them can be adopted as it is",
        others.join(", ")
    )]
    SharedNamespace {
        namespace: String,
        others: Vec<String>,
    },
    #[error(
        "package {package} is also installed by Subscription(s) {}: POM runs a package once per cluster; remove all but one",
        others.join(", ")
    )]
    PackageInstalledTwice {
        package: String,
        others: Vec<String>,
    },
    #[error("package {package} is already managed by PlatformOperator {po}")]
    AlreadyManaged { package: String, po: String },
    #[error(
        "package name {package:?} cannot name a PlatformOperator (a DNS-1123 label of at most 56 characters)"
    )]
    PackageNameInvalid { package: String },
    #[error(
        "ClusterServiceVersion {csv} owns APIServices ({}): POM does not install APIServices",
        names.join(", ")
    )]
    OwnsApiService { csv: String, names: Vec<String> },
    #[error(
        "{what} declares dependencies ({}): POM does not resolve dependencies (as OLM v1); install them yourself and use a bundle without them",
        names.join(", ")
    )]
    Dependencies { what: String, names: Vec<String> },
    #[error(
        "the Subscription's spec.config cannot become spec.config: {why}; edit the Subscription's config first"
    )]
    ConfigNotMappable { why: String },
    #[error(
        "no Catalog POM can read lists bundle {bundle} of package {package}: add a Catalog that offers it (POM does not read OLM's CatalogSources)"
    )]
    NotInCatalog { bundle: String, package: String },
    #[error(
        "bundle {bundle} is version {catalog_version} in Catalog {catalog} but the installed ClusterServiceVersion says {csv_version}: they are not the same bundle"
    )]
    VersionMismatch {
        bundle: String,
        catalog: String,
        catalog_version: String,
        csv_version: String,
    },
    #[error("POM's resolver would not install {bundle} for this PlatformOperator: {why}")]
    ResolverDisagrees { bundle: String, why: String },
    #[error("bundle {bundle} could not be read: {why}")]
    BundleUnreadable { bundle: String, why: String },
    #[error("POM would refuse bundle {bundle}: {why}")]
    Refused { bundle: String, why: String },
    #[error(
        "OLM runs the operator {olm}, but POM would render bundle {bundle} {pom}: adopting it would change what it watches"
    )]
    InstallModeMismatch {
        bundle: String,
        olm: String,
        pom: String,
    },
}

impl NotAdoptable {
    /// The obstacle's name, as the table prints it.
    #[must_use]
    pub fn as_str(&self) -> &'static str {
        match self {
            Self::NotInstalled { .. } => "NotInstalled",
            Self::CsvMissing { .. } => "CsvMissing",
            Self::CsvNotSucceeded { .. } => "CsvNotSucceeded",
            Self::CsvVersionUnreadable { .. } => "CsvVersionUnreadable",
            Self::NoOperatorGroup => "NoOperatorGroup",
            Self::SeveralOperatorGroups { .. } => "SeveralOperatorGroups",
            Self::OperatorGroupUnresolved { .. } => "OperatorGroupUnresolved",
            Self::MultiNamespace { .. } => "MultiNamespace",
            Self::PlatformNamespace { .. } => "PlatformNamespace",
            Self::SharedNamespace { .. } => "SharedNamespace",
            Self::PackageInstalledTwice { .. } => "PackageInstalledTwice",
            Self::AlreadyManaged { .. } => "AlreadyManaged",
            Self::PackageNameInvalid { .. } => "PackageNameInvalid",
            Self::OwnsApiService { .. } => "OwnsApiService",
            Self::Dependencies { .. } => "Dependencies",
            Self::ConfigNotMappable { .. } => "ConfigNotMappable",
            Self::NotInCatalog { .. } => "NotInCatalog",
            Self::VersionMismatch { .. } => "VersionMismatch",
            Self::ResolverDisagrees { .. } => "ResolverDisagrees",
            Self::BundleUnreadable { .. } => "BundleUnreadable",
            Self::Refused { .. } => "Refused",
            Self::InstallModeMismatch { .. } => "InstallModeMismatch",
        }
    }
}

/// One Subscription judged: the table's row, and the PlatformOperator when there is one.
#[derive(Debug, Clone)]
pub struct Adoption {
    /// `namespace/name` of the Subscription.
    pub subscription: String,
    pub namespace: String,
    pub package: String,
    /// The CSV OLM installed (`-` when none).
    pub installed_csv: Option<String>,
    pub verdict: Verdict,
    /// The PlatformOperator that would adopt it (with the consent it needs), when adoptable.
    pub platform_operator: Option<PlatformOperator>,
    /// What POM established about the bundle, when it got that far.
    pub proof: Option<AdoptionProof>,
}

/// An object's key for the tests of this module's parts (one builder, not one per test module).
#[cfg(test)]
pub(crate) fn test_key(
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
    name: &str,
) -> ObjectKey {
    ObjectKey {
        api_version: api_version.into(),
        kind: kind.into(),
        namespace: namespace.map(str::to_owned),
        name: name.into(),
    }
}
