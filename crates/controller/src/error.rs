//! The manager's errors, each mapped to the CamelCase condition reason it surfaces as.

use pom_api::conditions::Reason;
use pom_render::RenderError;

/// Why a reconcile could not do what it set out to do.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("Kubernetes API call failed while {action}: {source}")]
    Kube {
        action: String,
        #[source]
        source: Box<kube::Error>,
    },
    #[error("pulling bundle image {image}: {source}")]
    BundlePull {
        image: String,
        #[source]
        source: Box<crate::oci::OciError>,
    },
    /// The pull secret or CA bundle of the bundle's catalog is unusable.
    #[error("pulling bundle image {image}: {source}")]
    RegistryAccess {
        image: String,
        #[source]
        source: Box<crate::catalog::access::AccessError>,
    },
    #[error("rendering bundle {bundle}: {source}")]
    Render {
        bundle: String,
        #[source]
        source: Box<RenderError>,
    },
    #[error(
        "bundle {bundle} would change CRDs unsafely, so the running version is kept: {details}. Publish a bundle whose CRD change keeps stored versions and existing custom resources valid; if you judge this check wrong for this bundle, `kubectl annotate platformoperator <name> {}={bundle}` applies it once, with a Warning Event",
        pom_api::labels::CRD_SAFETY_OVERRIDE
    )]
    UnsafeCrdChange { bundle: String, details: String },
    /// Another PlatformOperator holds the namespace this one would watch or install into
    /// (issue 33 item 5), found when the bundle is read (a first install's default namespace)
    /// or just before writing (the watched Namespace labelled meanwhile).
    #[error("{}", clash.message())]
    NamespaceClash {
        clash: pom_policy::namespace_clash::NamespaceClash,
    },
    #[error(
        "{kind} {name} is already installed by PlatformOperator {owner}; two PlatformOperators cannot own one object: delete one of them, or choose another spec.installNamespace (a PlatformOperator that no longer exists still owns what it left, unless it was of the same package: remove the {} label from the object to free it)",
        pom_api::labels::OWNER_PO
    )]
    OwnershipConflict {
        kind: String,
        name: String,
        owner: String,
    },
    #[error(
        "{kind} {name}{} already exists and POM did not create it (it has no {} label); POM never takes over, changes or deletes what it did not create: delete it, or hand it to this PlatformOperator with `kubectl annotate {} {name}{} {}={po}`",
        namespace.as_deref().map(|ns| format!(" in namespace {ns}")).unwrap_or_default(),
        pom_api::labels::OWNER_PO,
        kind.to_lowercase(),
        namespace.as_deref().map(|ns| format!(" -n {ns}")).unwrap_or_default(),
        pom_api::labels::ADOPT
    )]
    AdoptionRefused {
        kind: String,
        name: String,
        namespace: Option<String>,
        po: String,
    },
    /// Issue 33 item 3: a bundle CRD claims a group/resource the live API server already
    /// serves by something other than a CRD of that name.
    #[error(
        "bundle {bundle} ships CRDs for what the API server already serves, so nothing of it is applied: {details}"
    )]
    CrdClaimsServedApi { bundle: String, details: String },
    #[error(
        "Secret {name} in namespace {namespace} already exists and this PlatformOperator did not create it; POM never reads, takes over or deletes a Secret it did not create: delete or rename it, then the bundle installs"
    )]
    SecretExists { namespace: String, name: String },
    #[error(
        "bundle {bundle} ships a Secret named {name}, the name of a Secret POM writes for the bundle's webhooks (its CA, or a Service's serving certificate); publish a bundle that does not ship it (POM provides webhook certificates)"
    )]
    ReservedSecretName { bundle: String, name: String },
    #[error(
        "{action}: no answer from the API server within {deadline:?}; retrying (check the API server's load if this persists)"
    )]
    ReadDeadline {
        action: String,
        deadline: std::time::Duration,
    },
    #[error(
        "waiting for {count} object(s) to be deleted before the PlatformOperator goes (first: \
         {first}); an object kept by a finalizer of its own needs that finalizer's controller"
    )]
    StillDeleting { count: usize, first: String },
    /// Adopting a webhook bundle: OLM v0's configurations stay until POM's own are registered
    /// (`pom_policy::adopt::webhooks::retire_now`); the reconcile fails before its status write,
    /// so the next one proves the adoption again (review of issue 36, H2).
    #[error(
        "adopting: OLM v0's {count} webhook configuration(s) stay registered until POM's own are, once the webhook Service lists a ready pod of the current template; retried (a paused Deployment must be resumed)"
    )]
    WebhookHandOverPending { count: usize },
    /// Adopting a webhook bundle: the API server refused every release of a serving Secret
    /// POM never reads (`pom_policy::adopt::webhooks::unread_release_patches`), so it is not
    /// OLM's for the CSV adopted; nothing else was released yet (the Secrets go first).
    #[error(
        "adopting: the API server refused to release Secret {namespace}/{name} from OLM v0 ({why}): it is neither OLM's for ClusterServiceVersion {csv} (an owner reference to it, by uid) nor this PlatformOperator's, and nothing was released; if the admission guard refused it, hand it over with `kubectl annotate secret/{name} -n {namespace} platform.openshift.io/adopt={po}`, else delete the Secret if it is left over"
    )]
    SecretNotReleased {
        namespace: String,
        name: String,
        csv: String,
        po: String,
        why: String,
    },
    /// What the API server says it serves cannot be used to judge a bundle's CRD claims:
    /// refusing to apply is safer than applying unchecked (review M4).
    #[error(
        "API discovery cannot be used to check the bundle's CRDs against what the API server serves: {detail}; POM needs aggregated discovery (/apis, Kubernetes 1.30 or later) and retries"
    )]
    DiscoveryUnusable { detail: String },
    /// Issue 22 item 4: drift repair re-applies only what was applied at the move.
    #[error(
        "bundle {bundle} cannot be re-applied as it was applied: no catalog carries its manifests as they were at its move (they changed, or left every catalog); what runs keeps running, unrepaired, until the next move"
    )]
    AppliedContentGone { bundle: String },
    /// Issue 22 item 2: the admission guard is not in place, so nothing is deleted either.
    #[error("{message}")]
    AdmissionGuardMissing { message: String },
    #[error("object without {field} in bundle {bundle}")]
    InvalidObject { bundle: String, field: &'static str },
    #[error(
        "bundle {bundle} has neither an image nor olm.bundle.object manifests in its catalog, and none was recorded when it was applied; ask the catalog's publisher to fix the bundle entry"
    )]
    NoBundleContent { bundle: String },
    #[error("finalizer: {0}")]
    Finalizer(String),
    #[error("providing webhook serving certificates in namespace {namespace}: {source}")]
    WebhookCertificates {
        namespace: String,
        #[source]
        source: Box<crate::operator::CertError>,
    },
}

impl Error {
    /// The `Installed` condition reason this error reports.
    #[must_use]
    pub fn reason(&self) -> Reason {
        match self {
            Self::Kube { .. }
            | Self::ReadDeadline { .. }
            | Self::InvalidObject { .. }
            | Self::Finalizer(_)
            | Self::StillDeleting { .. }
            | Self::DiscoveryUnusable { .. }
            | Self::AppliedContentGone { .. }
            | Self::WebhookCertificates { .. } => Reason::InstallFailed,
            Self::WebhookHandOverPending { .. } => Reason::Installing,
            Self::AdmissionGuardMissing { .. } => Reason::AdmissionGuardMissing,
            Self::BundlePull { .. }
            | Self::RegistryAccess { .. }
            | Self::NoBundleContent { .. } => Reason::UnpackFailed,
            Self::Render { source, .. } => match **source {
                RenderError::InstallModeNotSupported { .. }
                | RenderError::InvalidWatchNamespace { .. } => Reason::InstallModeUnsupported,
                RenderError::ContentPolicy(_) | RenderError::InstallNamespaceReserved { .. } => {
                    Reason::ContentPolicyViolation
                }
                _ => Reason::UnpackFailed,
            },
            Self::UnsafeCrdChange { .. } => Reason::UnsafeCRDChange,
            Self::NamespaceClash { .. } => Reason::InstallModeUnsupported,
            Self::OwnershipConflict { .. } => Reason::OwnershipConflict,
            Self::AdoptionRefused { .. } | Self::SecretExists { .. } => Reason::AdoptionRefused,
            Self::SecretNotReleased { .. } => Reason::AdoptionNotProven,
            Self::ReservedSecretName { .. } | Self::CrdClaimsServedApi { .. } => {
                Reason::ContentPolicyViolation
            }
        }
    }

    /// Helper for `map_err` on API calls.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube {
            action,
            source: Box::new(source),
        }
    }
}
