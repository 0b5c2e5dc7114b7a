//! Step 3 of adoption: what POM itself says about the bundle OLM installed, with the functions
//! the manager calls (the resolver's `resolve` on the request built from the proposed
//! PlatformOperator, the renderer's `render` with that PlatformOperator's options, and the
//! consent judgement of [`crate::hop_powers`]): nothing is decided a second way.
//!
//! The [`AdoptionProof`] is what adoption (issue 36 item 2) checks against what runs before its
//! first write: the bundle, the catalog and channel it comes from, the install mode, the powers
//! and consent, and every object POM would apply, by identity ([`AdoptionProof::compare`]).

use std::collections::{BTreeMap, BTreeSet};

use pom_api::platform_operator::AppliedConfig;
use pom_render::{BundleFiles, CertificateSource, PowerClass, RenderOptions, render};
use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::Dependency;
use pom_resolver::select::{CatalogInput, ChosenBundle, resolve};
use semver::Version;

use super::{NotAdoptable, Proposal, Verdict};
use crate::PoRequest;
use crate::hop_powers::{HopPowersError, hop_powers};
use crate::render_request::render_options;

/// A proposal whose bundle POM's catalogs list and its resolver would install.
#[derive(Debug, Clone, PartialEq)]
pub struct Located {
    pub proposal: Proposal,
    /// The resolver's answer: exactly the installed bundle.
    pub chosen: ChosenBundle,
}

/// Step 3a: the bundle in the catalogs, without dependencies, and the resolver's own choice
/// for the proposed PlatformOperator (nothing installed yet, as adoption starts) being exactly
/// it. `phase` is the cluster's (`None` on plain Kubernetes).
///
/// # Errors
/// Why POM's catalogs or resolver do not lead to the installed bundle.
pub fn locate(
    proposal: Proposal,
    catalogs: &[CatalogInput<'_>],
    phase: Option<&ClusterPhase>,
    kube_version: Option<&Version>,
) -> Result<Located, NotAdoptable> {
    let listed = catalogs.iter().find_map(|(name, _, content)| {
        content
            .packages
            .get(&proposal.package)
            .and_then(|p| p.bundles.get(&proposal.bundle))
            .map(|b| (*name, b))
    });
    let Some((catalog, bundle)) = listed else {
        return Err(NotAdoptable::NotInCatalog {
            bundle: proposal.bundle.clone(),
            package: proposal.package.clone(),
        });
    };
    if bundle.version != proposal.version {
        return Err(NotAdoptable::VersionMismatch {
            bundle: proposal.bundle.clone(),
            catalog: catalog.to_owned(),
            catalog_version: bundle.version.to_string(),
            csv_version: proposal.version.to_string(),
        });
    }
    if !bundle.properties.dependencies.is_empty() {
        return Err(NotAdoptable::Dependencies {
            what: format!("bundle {} (Catalog {catalog})", proposal.bundle),
            names: bundle
                .properties
                .dependencies
                .iter()
                .map(dependency_name)
                .collect(),
        });
    }
    let disagrees = |why: String| NotAdoptable::ResolverDisagrees {
        bundle: proposal.bundle.clone(),
        why,
    };
    let name = proposal
        .platform_operator
        .metadata
        .name
        .clone()
        .unwrap_or_default();
    let request = PoRequest::from_spec(&name, &proposal.platform_operator.spec)
        .map_err(|e| disagrees(e.to_string()))?;
    let resolved = resolve(&crate::decide::resolve_request(
        &request,
        catalogs,
        None,
        phase,
        kube_version,
    ))
    .map_err(|e| disagrees(e.to_string()))?;
    if resolved.bundle.name != proposal.bundle {
        return Err(disagrees(format!(
            "it would install {} (Catalog {}) instead",
            resolved.bundle.name, resolved.bundle.catalog
        )));
    }
    Ok(Located {
        proposal,
        chosen: resolved.bundle,
    })
}

fn dependency_name(dependency: &Dependency) -> String {
    match dependency {
        Dependency::Package {
            package_name,
            version_range,
        } => format!("package {package_name} {version_range}"),
        Dependency::Gvk(gvk) => format!("API {}/{} {}", gvk.group, gvk.version, gvk.kind),
        Dependency::Constraint(_) => "an olm.constraint".to_owned(),
    }
}

/// How the manager renders, where the CLI (or the manager) knows it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RenderContext {
    /// The manager's namespace (refused as an install namespace).
    pub manager_namespace: Option<String>,
    /// Who signs webhook serving certificates on this cluster.
    pub certificates: CertificateSource,
}

/// One object POM would apply, by identity.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub api_version: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.namespace {
            Some(ns) => write!(f, "{} {ns}/{}", self.kind, self.name),
            None => write!(f, "{} {}", self.kind, self.name),
        }
    }
}

/// What POM established about an installed bundle before adopting it.
#[derive(Debug, Clone, PartialEq)]
pub struct AdoptionProof {
    pub bundle: String,
    pub version: Version,
    pub catalog: String,
    pub channel: String,
    pub image: Option<String>,
    /// The install mode the OperatorGroup gives and the render agreed to.
    pub target: super::InstallTarget,
    /// How many powers of each class the bundle's ServiceAccounts would hold.
    pub powers: BTreeMap<PowerClass, usize>,
    /// The classes the admin must consent to.
    pub consent: BTreeSet<PowerClass>,
    /// The webhooks the admin must consent to, each bound to what it covers.
    pub webhook_consent: BTreeSet<pom_render::WebhookConsent>,
    /// Every object POM would apply, sorted.
    pub objects: Vec<ObjectKey>,
}

/// Rendered against running: what adoption would take over, write anew, or leave to OLM.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Comparison {
    /// On the cluster and rendered: adoption takes them over.
    pub both: Vec<ObjectKey>,
    /// Rendered only: adoption creates them.
    pub rendered_only: Vec<ObjectKey>,
    /// On the cluster only (OLM's generated RBAC names, its copied CSVs): adoption leaves them,
    /// and says so.
    pub running_only: Vec<ObjectKey>,
}

impl AdoptionProof {
    /// Compares the rendered objects with `running` (the install's objects as the cluster holds
    /// them, found by OLM's owner labels).
    #[must_use]
    pub fn compare(&self, running: &[ObjectKey]) -> Comparison {
        let rendered: BTreeSet<&ObjectKey> = self.objects.iter().collect();
        let running: BTreeSet<&ObjectKey> = running.iter().collect();
        Comparison {
            both: rendered
                .intersection(&running)
                .map(|k| (*k).clone())
                .collect(),
            rendered_only: rendered
                .difference(&running)
                .map(|k| (*k).clone())
                .collect(),
            running_only: running
                .difference(&rendered)
                .map(|k| (*k).clone())
                .collect(),
        }
    }
}

/// Step 3b: the bundle rendered as the manager would render it for the proposed
/// PlatformOperator: refused (for more than consent) or in another install mode is not
/// adoptable; dangerous powers make it adoptable with consent, which the returned
/// PlatformOperator then carries.
#[must_use]
pub fn judge(
    located: &Located,
    files: Result<&BundleFiles, &str>,
    context: &RenderContext,
) -> (Verdict, Option<AdoptionProof>, pom_api::PlatformOperator) {
    let proposal = &located.proposal;
    let mut po = proposal.platform_operator.clone();
    let not = |n: NotAdoptable| (Verdict::NotAdoptable(n), None);
    let (verdict, proof) = match files {
        Err(why) => not(NotAdoptable::BundleUnreadable {
            bundle: proposal.bundle.clone(),
            why: why.to_owned(),
        }),
        Ok(files) => match rendered_proof(located, files, context) {
            Err(n) => not(n),
            Ok(proof) => {
                set_consent(&mut po.spec.consent, &proof.consent);
                po.spec.consent.webhooks = proof
                    .webhook_consent
                    .iter()
                    .map(|w| pom_api::platform_operator::WebhookConsentSpec {
                        name: w.name.clone(),
                        covers: w.covers.clone(),
                    })
                    .collect();
                let verdict = if proof.consent.is_empty() && proof.webhook_consent.is_empty() {
                    Verdict::Adoptable
                } else {
                    Verdict::AdoptableWithConsent {
                        powers: proof.consent.clone(),
                    }
                };
                (verdict, Some(proof))
            }
        },
    };
    (verdict, proof, po)
}

fn rendered_proof(
    located: &Located,
    files: &BundleFiles,
    context: &RenderContext,
) -> Result<AdoptionProof, NotAdoptable> {
    let proposal = &located.proposal;
    let po = &proposal.platform_operator;
    let refused = |why: String| NotAdoptable::Refused {
        bundle: proposal.bundle.clone(),
        why,
    };
    let config = AppliedConfig::of(po.spec.config.as_ref(), None);
    let options = RenderOptions {
        operator_condition: true,
        manager_namespace: context.manager_namespace.clone(),
        certificates: context.certificates,
        ..render_options(po, &proposal.install_namespace, &config)
            .map_err(|e| NotAdoptable::ConfigNotMappable { why: e.to_string() })?
    };
    let judged = hop_powers(files, None, &options).map_err(|e| match e {
        HopPowersError::Refused(e) => refused(e.to_string()),
    })?;
    let mut consented = options;
    consented
        .consent
        .extend(judged.consent_needed.iter().copied());
    consented
        .webhook_consent
        .extend(judged.webhooks_needed.iter().cloned());
    let rendered = render(files, &consented).map_err(|e| refused(e.to_string()))?;
    let pom_mode = rendered
        .install_mode
        .map_or("no install mode (plain+v0)", |m| m.as_str());
    let same_watch = match &proposal.target {
        super::InstallTarget::SingleNamespace(ns) => &rendered.watch_namespace == ns,
        _ => true,
    };
    if pom_mode != proposal.target.mode() || !same_watch {
        return Err(NotAdoptable::InstallModeMismatch {
            bundle: proposal.bundle.clone(),
            olm: proposal.target.to_string(),
            pom: format!("{pom_mode} (watching {:?})", rendered.watch_namespace),
        });
    }
    let mut objects: Vec<ObjectKey> = rendered.objects.iter().filter_map(object_key).collect();
    objects.sort();
    Ok(AdoptionProof {
        bundle: proposal.bundle.clone(),
        version: proposal.version.clone(),
        catalog: located.chosen.catalog.clone(),
        channel: located.chosen.channel.clone(),
        image: located.chosen.image.clone(),
        target: proposal.target.clone(),
        powers: judged.classes,
        consent: judged.consent_needed,
        webhook_consent: judged.webhooks_needed,
        objects,
    })
}

/// The identity of a rendered object (every rendered object has one: the renderer refuses
/// objects without `apiVersion`, `kind` or `metadata.name`).
fn object_key(object: &serde_json::Value) -> Option<ObjectKey> {
    let text = |pointer: &str| object.pointer(pointer).and_then(|v| v.as_str());
    Some(ObjectKey {
        api_version: text("/apiVersion")?.to_owned(),
        kind: text("/kind")?.to_owned(),
        namespace: text("/metadata/namespace").map(str::to_owned),
        name: text("/metadata/name")?.to_owned(),
    })
}

/// The consent fields of `classes` (a class without a field needs no consent).
fn set_consent(consent: &mut pom_api::platform_operator::Consent, classes: &BTreeSet<PowerClass>) {
    for class in classes {
        match class {
            PowerClass::ClusterAdminEquivalent => consent.cluster_admin_equivalent = true,
            PowerClass::PrivilegedWorkloads => consent.privileged_workloads = true,
            PowerClass::PlatformConfig => consent.platform_config = true,
            // Consented per webhook, bound to what it covers (`consent.webhooks`).
            PowerClass::SecretsClusterWide | PowerClass::AdmissionWebhooks => {}
        }
    }
}
