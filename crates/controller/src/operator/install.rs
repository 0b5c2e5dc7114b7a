//! Installing one bundle: fetch its content (image by digest, or objects carried by the
//! catalog), render it (pure), refuse unsafe CRD changes and objects owned by another PO, apply
//! what differs, and report what the move still waits for. Objects of the bundle moved from are
//! pruned only once the move settled (`reconcile.rs`): until then both stay, and a failed move
//! removes nothing (§6, §7).

use std::collections::BTreeSet;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ObjectMeta, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::platform_operator::{AppliedConfig, InstalledBundle, InventoryObject};
use pom_policy::inventory::is_webhook_configuration;
use pom_policy::namespace_clash::{ClashSide, ClashWinner, NamespaceClash};
use pom_policy::ownership::{self, Ownership};
use pom_policy::status::{
    self, InstallReport, OperatorConditionReport, UnavailableDeployment, Wait,
};
use pom_policy::{MoveTarget, render_request, webhook_serving};
use pom_render::webhooks::inject_ca_bundle;
use pom_render::{
    self as render, BundleFiles, CertificateSource, NamespaceMetadata, PowerClass, RenderError,
    RenderOptions, check_crd_upgrade, pod_security,
};
use pom_resolver::fbc::{Bundle, Catalog as FbcCatalog, MaxOpenShiftVersion};
use serde_json::Value;

use super::first_checks::{FirstChecks, ObjectKey};
use super::objects::{self, KindCache, apply_if_changed, get_opt, label, object_id};
use super::operator_condition::{self, OperatorConditionFor};
use super::served_apis::{self, LiveApisCache};
use super::webhook_certs;
use crate::catalog::access;
use crate::context::BUNDLE_FIELD_MANAGER;
use crate::context::Context;
use crate::error::Error;
use crate::fail_point::{self, FailPoint};

/// The bundle to put on the cluster, with where its content comes from.
pub struct Target {
    pub name: String,
    pub version: String,
    pub content: Content,
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
    /// The Catalog that lists the bundle, whose pull secret and CA bundle its image is pulled
    /// with (`None`: no catalog lists it any more; the global pull secret alone is used).
    pub catalog: Option<String>,
}

/// Where a bundle's manifests come from.
pub enum Content {
    /// A bundle image (by digest when the catalog gives one).
    Image(String),
    /// `olm.bundle.object` manifests carried by the catalog.
    Objects(Vec<String>),
}

impl Target {
    /// The bundle a move goes to, as the catalog that offered it describes it.
    ///
    /// # Errors
    /// When the catalog gives the bundle neither an image nor objects.
    pub fn for_move(target: &MoveTarget, catalogs: &[(&str, &FbcCatalog)]) -> Result<Self, Error> {
        let bundle = find_bundle(catalogs, Some(&target.catalog), &target.name).map(|(_, b)| b);
        Ok(Self {
            catalog: Some(target.catalog.clone()),
            name: target.name.clone(),
            version: target.version.to_string(),
            content: content_of(&target.name, target.image.as_deref(), bundle)?,
            max_openshift_version: target.max_openshift_version.clone(),
        })
    }

    /// What runs now, re-applied (drift repair, or a move in flight): exactly the content
    /// recorded when it was applied, never what a catalog carries under its name now (issue 22
    /// item 4: else a catalog, a lower-priority one included, would change a running operator
    /// with no move, no settle and no gate). An image bundle: the image digest recorded. A
    /// catalog-carried one: the manifests of the first catalog, by priority, whose copy of the
    /// bundle has the digest recorded (a status from before digests were recorded: the first by
    /// priority).
    ///
    /// # Errors
    /// When neither the status nor a catalog holds that content.
    pub fn for_keep(
        installed: &InstalledBundle,
        max_openshift_version: Option<MaxOpenShiftVersion>,
        catalogs: &[(&str, &FbcCatalog)],
    ) -> Result<Self, Error> {
        let target = |catalog: Option<&str>, content| Self {
            catalog: catalog.map(str::to_owned),
            name: installed.name.clone(),
            version: installed.version.clone(),
            content,
            max_openshift_version: max_openshift_version.clone(),
        };
        if let Some(image) = installed.image.as_deref().filter(|i| !i.is_empty()) {
            return Ok(target(None, Content::Image(image.to_owned())));
        }
        let recorded = installed.objects_digest.as_deref();
        catalogs
            .iter()
            .filter_map(|(name, catalog)| {
                let bundle = catalog
                    .packages
                    .values()
                    .find_map(|p| p.bundles.get(&installed.name))?;
                let objects = &bundle.properties.objects;
                (!objects.is_empty()
                    && recorded.is_none_or(|digest| objects_digest(objects) == digest))
                .then(|| target(Some(name), Content::Objects(objects.clone())))
            })
            .next()
            .ok_or_else(|| Error::AppliedContentGone {
                bundle: installed.name.clone(),
            })
    }
}

/// `sha256:<hex>` of catalog-carried manifests, each length-prefixed so that no two lists
/// collide by concatenation.
#[must_use]
pub fn objects_digest(objects: &[String]) -> String {
    use sha2::{Digest, Sha256};
    let mut hasher = Sha256::new();
    for object in objects {
        hasher.update((object.len() as u64).to_be_bytes());
        hasher.update(object.as_bytes());
    }
    let hex: String = hasher
        .finalize()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    format!("sha256:{hex}")
}

/// A core Secret: never read by the manager (issue 22 item 3).
pub(crate) fn is_secret(gvk: &kube::core::GroupVersionKind) -> bool {
    gvk.group.is_empty() && gvk.kind == "Secret"
}

/// Refuses, before anything is written, a bundle Secret that exists but is not this PO's: one
/// its inventory does not record. The Secret is not read (issue 22 item 3); a dry-run create,
/// which the API server answers with a conflict when the name is taken, says whether it
/// exists. Recorded Secrets cost no request, so a steady state makes none.
async fn unread_secret_is_free(
    api: &Api<kube::api::DynamicObject>,
    id: &objects::ObjectId,
    object: &Value,
    recorded: &std::collections::BTreeSet<InventoryObject>,
) -> Result<(), Error> {
    if recorded.contains(&id.to_inventory()) {
        return Ok(());
    }
    let probe: kube::api::DynamicObject = serde_json::from_value(object.clone()).map_err(|e| {
        Error::kube(format!("reading Secret {}", id.name))(kube::Error::SerdeError(e))
    })?;
    let params = kube::api::PostParams {
        dry_run: true,
        field_manager: Some(crate::context::BUNDLE_FIELD_MANAGER.to_owned()),
    };
    match api.create(&params, &probe).await {
        // Free; or its namespace does not exist yet (a first install), so neither does it.
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Err(Error::SecretExists {
            namespace: id.namespace.clone().unwrap_or_default(),
            name: id.name.clone(),
        }),
        Err(err) => Err(Error::kube(format!("checking Secret {}", id.name))(err)),
    }
}

/// Whether PO `po` (of `package`) may write an object carrying these labels and annotations
/// (`pom_policy::ownership`), as the error that refuses it.
fn may_write(
    live_labels: Option<&std::collections::BTreeMap<String, String>>,
    live_annotations: Option<&std::collections::BTreeMap<String, String>>,
    kind: &str,
    (namespace, name): (Option<&str>, &str),
    (po, package): (&str, &str),
    po_exists: &(dyn Fn(&str) -> bool + Sync),
) -> Result<(), Error> {
    let carried = ownership::LiveOwnership {
        owner: live_labels
            .and_then(|m| m.get(labels::OWNER_PO))
            .map(String::as_str),
        package: live_labels
            .and_then(|m| m.get(labels::PACKAGE))
            .map(String::as_str),
        adopt: live_annotations
            .and_then(|m| m.get(labels::ADOPT))
            .map(String::as_str),
    };
    match ownership::judge(carried, po, package, po_exists) {
        Ownership::Ours | Ownership::Adopt => Ok(()),
        Ownership::OwnedBy(owner) => Err(Error::OwnershipConflict {
            kind: kind.to_owned(),
            name: name.to_owned(),
            owner,
        }),
        Ownership::NotPoms => Err(Error::AdoptionRefused {
            kind: kind.to_owned(),
            name: name.to_owned(),
            namespace: namespace.map(str::to_owned),
            po: po.to_owned(),
        }),
    }
}

fn content_of(name: &str, image: Option<&str>, bundle: Option<&Bundle>) -> Result<Content, Error> {
    if let Some(bundle) = bundle.filter(|b| !b.properties.objects.is_empty()) {
        return Ok(Content::Objects(bundle.properties.objects.clone()));
    }
    image
        .or_else(|| bundle.and_then(|b| b.image.as_deref()))
        .filter(|i| !i.is_empty())
        .map(|i| Content::Image(i.to_owned()))
        .ok_or_else(|| Error::NoBundleContent {
            bundle: name.to_owned(),
        })
}

fn find_bundle<'a>(
    catalogs: &[(&'a str, &'a FbcCatalog)],
    catalog: Option<&str>,
    bundle: &str,
) -> Option<(&'a str, &'a Bundle)> {
    catalogs
        .iter()
        .filter(|(name, _)| catalog.is_none_or(|c| c == *name))
        .find_map(|(name, c)| {
            c.packages
                .values()
                .find_map(|p| p.bundles.get(bundle))
                .map(|b| (*name, b))
        })
}

/// A bundle fetched, rendered and checked against the cluster, nothing written yet.
pub struct Prepared {
    rendered: render::RenderedBundle,
    desired: Vec<(objects::ObjectId, Value)>,
    live_objects: Vec<(
        Api<kube::api::DynamicObject>,
        Option<kube::api::DynamicObject>,
    )>,
    max_openshift_version: Option<MaxOpenShiftVersion>,
    /// The bundle image by digest (`None` for catalog-carried objects).
    image: Option<String>,
    /// The namespace it is applied into.
    namespace: String,
    /// The unsafe CRD changes applied anyway on the admin's override (issue 23 item 5).
    crd_safety_overridden: Option<String>,
    /// The install namespace as read and judged here (`None`: absent then): the apply writes
    /// it from this read, not a second one.
    live_namespace: Option<Namespace>,
    /// The bundle's OperatorCondition as read and judged here, likewise.
    live_operator_condition: Option<pom_api::olm::OperatorCondition>,
    /// The serving Deployments whose pods this apply rolls off OLM v0's certificate
    /// (`pom_policy::serving_roll`), announced once applied.
    serving_rolls: Vec<webhook_certs::TemplateHashOf>,
    /// The caBundle POM's webhooks are to trust (`None`: POM issues no certificate here).
    ca_bundle: Option<String>,
    /// Adopting, or the adoption not settled: the serving Secrets are written only in a
    /// reconcile where POM's webhook configurations (trusting OLM's CA and POM's) are
    /// registered, and after OLM's are retired ([`HeldSecrets`]). Written earlier, an operator
    /// that reloads at once would serve POM's certificate to calls still made through OLM's
    /// configuration, which trusts OLM's CA alone.
    hold_serving_secrets: bool,
}

impl Prepared {
    /// What the bundle needed lifted, one line each (reported when it is applied): the
    /// exceptions, each consented power with its evidence, and the bindings omitted.
    #[must_use]
    pub fn lifted(&self) -> Vec<String> {
        let exceptions = self
            .rendered
            .exceptions_used
            .iter()
            .map(ToString::to_string);
        let consents = self.rendered.consents_used.iter().flat_map(|class| {
            self.rendered.powers.of(*class).map(move |power| {
                format!(
                    "{power} (consented: spec.consent.{})",
                    class.consent_field()
                )
            })
        });
        let omitted = self.rendered.omitted.iter().map(ToString::to_string);
        exceptions.chain(consents).chain(omitted).collect()
    }

    /// What the render accepted with a warning (a manifest's repeated key), announced when the
    /// bundle is applied.
    #[must_use]
    pub fn warnings(&self) -> &[pom_render::RenderWarning] {
        &self.rendered.warnings
    }

    /// The unsafe CRD changes the admin's `crd-safety-override` annotation lets through.
    #[must_use]
    pub fn crd_safety_overridden(&self) -> Option<&str> {
        self.crd_safety_overridden.as_deref()
    }

    /// The serving Deployments this apply rolls off OLM v0's certificate.
    #[must_use]
    pub fn serving_rolls(&self) -> &[webhook_certs::TemplateHashOf] {
        &self.serving_rolls
    }

    /// The bundle image by digest (`None` for catalog-carried objects), recorded with the
    /// intent of a move.
    #[must_use]
    pub fn image(&self) -> Option<&str> {
        self.image.as_deref()
    }

    /// Each object to apply, by identity, with what the cluster holds of it (`None`: absent,
    /// or a Secret, never read): what adoption proves (`pom_policy::adopt::prove`).
    #[must_use]
    pub fn adoption_view(&self) -> Vec<(pom_policy::adopt::ObjectKey, Value, Option<Value>)> {
        self.desired
            .iter()
            .zip(&self.live_objects)
            .map(|((id, object), (_, live))| {
                let key = pom_policy::adopt::ObjectKey {
                    api_version: object["apiVersion"].as_str().unwrap_or_default().to_owned(),
                    kind: id.gvk.kind.clone(),
                    namespace: id.namespace.clone(),
                    name: id.name.clone(),
                };
                let live = live.as_ref().and_then(|l| serde_json::to_value(l).ok());
                (key, object.clone(), live)
            })
            .collect()
    }

    /// The install namespace as read (`None`: absent): adoption's proof checks that the
    /// admission guard lets the manager label it.
    #[must_use]
    pub fn live_namespace(&self) -> Option<Value> {
        self.live_namespace
            .as_ref()
            .and_then(|ns| serde_json::to_value(ns).ok())
    }

    /// The namespace the bundle is applied into (recorded at the first install).
    #[must_use]
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// Every object applying this bundle into `namespace` creates or owns, its
    /// OperatorCondition included: what the inventory records before the first is written.
    #[must_use]
    pub fn inventory(&self, namespace: &str) -> Vec<InventoryObject> {
        let mut objects: Vec<InventoryObject> = self
            .desired
            .iter()
            .map(|(id, _)| id.to_inventory())
            .collect();
        if let Some(csv) = &self.rendered.csv_name {
            objects.push(InventoryObject {
                api_version: "operators.coreos.com/v2".to_owned(),
                kind: "OperatorCondition".to_owned(),
                namespace: Some(namespace.to_owned()),
                name: csv.clone(),
            });
        }
        objects
    }
}

/// Fetches and renders `target` for `po` into `namespace` (when not yet fixed: the bundle's
/// suggested namespace if POM may use it, else the PO's name) and refuses what would break
/// running things (unsafe CRD changes, objects owned by another PO). Reads only: a refusal
/// here has written nothing, so nothing needs to be resumed or undone.
#[allow(clippy::too_many_arguments)]
pub async fn prepare(
    ctx: &Context,
    reads: &Reads<'_>,
    po: &PlatformOperator,
    namespace: Option<&str>,
    target: &Target,
    certificates: (CertificateSource, &webhook_certs::OlmTrust),
    config: &AppliedConfig,
    now: Timestamp,
    others: &OtherPos<'_>,
) -> Result<Prepared, Error> {
    let (certificates, olm_trust) = certificates;
    let client = &ctx.client;
    let writer = WritingPo::of(po, others.po_exists);

    let (files, image) = fetch(ctx, target).await?;
    let namespace = match namespace {
        Some(fixed) => fixed.to_owned(),
        None => {
            first_install_namespace(
                client,
                &files,
                (&writer.po, writer.package),
                &target.name,
                others.install_clash,
            )
            .await?
        }
    };
    let namespace = namespace.as_str();
    // Before its first write: an older PO watching the namespace chosen wins (issue 33 item 5).
    if !pom_policy::namespace_clash::has_installed(po)
        && let Some(clash) = (others.install_clash)(namespace)
    {
        return Err(Error::NamespaceClash { clash });
    }
    let live_namespace = install_namespace_if_ours(client, reads.first, namespace, &writer).await?;
    let namespace_exists = live_namespace.is_some();

    let rendered = render_bundle(ctx, po, namespace, config, certificates, target, &files)?;
    let max_ocp = max_openshift_version(target, &rendered);
    let (bundle_objects, serving_rolls, ca_bundle) = with_webhook_certificates(
        client,
        (certificates, olm_trust),
        &rendered,
        namespace,
        &writer.po,
        target,
        now,
    )
    .await?;

    // Refuse what would break running things, before writing anything.
    let desired = labelled(bundle_objects, &writer.po, writer.package, &target.name)?;
    other_namespaces_unclaimed(client, &desired, namespace, &writer.po).await?;
    let (live_objects, unsafe_changes) =
        read_and_judge_live(client, reads, &desired, namespace_exists, &writer).await?;
    let live: Vec<bool> = live_objects
        .iter()
        .map(|(_, live)| live.is_some())
        .collect();
    served_apis::check(
        client,
        reads.served,
        &target.name,
        &served_apis::claims(&desired, &live),
    )
    .await?;
    let live_operator_condition = operator_condition_is_writable(
        client,
        reads.first,
        namespace,
        rendered.csv_name.as_deref(),
        &writer,
    )
    .await?;
    // The admin's break-glass names this bundle: applied anyway, and said so (a Warning Event).
    let crd_safety_overridden = crd_safety_verdict(po, &target.name, &unsafe_changes)?;
    Ok(Prepared {
        rendered,
        desired,
        live_objects,
        max_openshift_version: max_ocp,
        image,
        namespace: namespace.to_owned(),
        crd_safety_overridden,
        live_namespace,
        live_operator_condition,
        serving_rolls,
        ca_bundle,
        hold_serving_secrets: writer.serving_secrets_olms,
    })
}

/// What `prepare` asks of the other PlatformOperators the manager knows.
pub struct OtherPos<'a> {
    /// Whether an owner-label value is that of a PlatformOperator that exists.
    pub po_exists: &'a (dyn Fn(&str) -> bool + Sync),
    /// Whether installing into a namespace is refused: an older PO watches it
    /// (`pom_policy::namespace_clash::install_clash`).
    pub install_clash: &'a (dyn Fn(&str) -> Option<NamespaceClash> + Sync),
}

/// Where a full check's reads come from: the kinds' APIs, and the start-up snapshot a first
/// check after a start takes current objects from (`first_checks.rs`).
pub struct Reads<'a> {
    pub kinds: &'a KindCache,
    pub first: &'a FirstChecks,
    /// What the API server serves, read before a CRD is applied (`served_apis.rs`).
    pub served: &'a LiveApisCache,
}

/// The PO about to write: who it is, as ownership judges it (so each object read is checked
/// by one call), and what it recorded owning before.
struct WritingPo<'a> {
    po: String,
    package: &'a str,
    po_exists: &'a (dyn Fn(&str) -> bool + Sync),
    /// What this PO's inventory recorded before: a Secret named there is its own.
    recorded: BTreeSet<InventoryObject>,
    /// The namespace of the OLM v0 installation it adopts (`spec.adoptFrom`), while it adopts:
    /// OLM's objects there are read as the installation's (the proof judges them next).
    adopting: Option<&'a str>,
    /// Adopting, or the adoption not settled: OLM's serving Secrets (never read; released
    /// unread by `ReleaseFromOlm`) are POM's to write, not refused.
    serving_secrets_olms: bool,
}

impl<'a> WritingPo<'a> {
    /// `po` as it writes now: its name and package, and the inventory its status records.
    fn of(po: &'a PlatformOperator, po_exists: &'a (dyn Fn(&str) -> bool + Sync)) -> Self {
        Self {
            po: po.name_any(),
            package: &po.spec.package.name,
            po_exists,
            recorded: recorded_inventory(po),
            adopting: pom_policy::adopt::takeover::adopting(po)
                .map(|from| from.subscription.namespace.as_str()),
            serving_secrets_olms: pom_policy::adopt::takeover::adopting(po).is_some()
                || pom_policy::adopt::takeover::handing_over(po),
        }
    }

    /// [`may_write`] for an object the cluster holds, judged by its labels and annotations.
    fn may_write(
        &self,
        live: &ObjectMeta,
        kind: &str,
        (namespace, name): (Option<&str>, &str),
    ) -> Result<(), Error> {
        if self.adopted(live, kind, name) {
            return Ok(());
        }
        may_write(
            live.labels.as_ref(),
            live.annotations.as_ref(),
            kind,
            (namespace, name),
            (&self.po, self.package),
            self.po_exists,
        )
    }
}

impl WritingPo<'_> {
    /// Whether, adopting, the object is the OLM v0 installation's: its namespace (the admin
    /// named it in `spec.adoptFrom`), or an object with OLM's marks of it
    /// (`pom_policy::adopt::takeover::marked_by_olm`). Never another PlatformOperator's: an
    /// object with POM's owner label is judged by ownership as always.
    fn adopted(&self, live: &ObjectMeta, kind: &str, name: &str) -> bool {
        let Some(namespace) = self.adopting else {
            return false;
        };
        if live
            .labels
            .as_ref()
            .is_some_and(|l| l.contains_key(labels::OWNER_PO))
        {
            return false;
        }
        if kind == "Namespace" {
            return name == namespace;
        }
        let owners = live.owner_references.iter().flatten();
        pom_policy::adopt::takeover::marked_by_olm(
            live.labels.as_ref(),
            owners.map(|r| (r.api_version.as_str(), r.kind.as_str())),
            namespace,
            self.package,
        )
    }
}

/// The bundle's files, and the image digest to record as applied (`None` for catalog-carried
/// objects). A bundle image named by tag is resolved to its digest here, and the digest is
/// what gets recorded as applied (`installedBundle.image`): drift repair re-applies that
/// digest, so a tag that moves never changes the running operator outside a move.
async fn fetch(ctx: &Context, target: &Target) -> Result<(BundleFiles, Option<String>), Error> {
    match &target.content {
        Content::Image(image) => {
            let (files, by_digest) = match ctx.images.cached_files(image, "") {
                // Content already pulled by digest needs no credentials (nor their Secrets): a
                // running bundle is repaired even while its catalog's pull secret is broken.
                Some((by_digest, pulled)) => (BundleFiles::new(pulled), by_digest),
                None => pull_bundle_image(ctx, target.catalog.as_deref(), image).await?,
            };
            Ok((files, Some(by_digest)))
        }
        Content::Objects(objects) => Ok((BundleFiles::from_objects(objects.clone()), None)),
    }
}

/// Pulls a bundle image with the credentials and CA of the Catalog that lists it, through the
/// cluster's mirrors as the nodes pull; returns its files and its reference by digest.
async fn pull_bundle_image(
    ctx: &Context,
    catalog: Option<&str>,
    image: &str,
) -> Result<(BundleFiles, String), Error> {
    let pull_error = |source| Error::BundlePull {
        image: image.to_owned(),
        source: Box::new(source),
    };
    let access =
        access::for_catalog(ctx, catalog)
            .await
            .map_err(|source| Error::RegistryAccess {
                image: image.to_owned(),
                source: Box::new(source),
            })?;
    let mirrors = ctx
        .image_mirrors
        .for_pull(image)
        .await
        .map_err(pull_error)?;
    let by_digest = ctx
        .images
        .resolve_digest(image, &access, mirrors.rules())
        .await
        .map(|resolved| resolved.by_digest)
        .map_err(|err| pull_error(mirrors.explain(image, err)))?;
    let pulled = ctx
        .images
        .pull_files(&by_digest, "", &access, mirrors.rules())
        .await
        .map(|pulled| pulled.content)
        .map_err(|err| pull_error(mirrors.explain(&by_digest, err)))?;
    Ok((BundleFiles::new(pulled), by_digest))
}

/// The install namespace as the cluster holds it (`None`: not created yet), refused unless it
/// is this PO's or handed to it by an admin (issue 22 item 5): POM never installs into a
/// namespace it did not create, nor into another PO's (one's Deployment could run as the
/// other's ServiceAccount).
async fn install_namespace_if_ours(
    client: &kube::Client,
    first: &FirstChecks,
    namespace: &str,
    writer: &WritingPo<'_>,
) -> Result<Option<Namespace>, Error> {
    let key = ObjectKey::new(
        &kube::core::GroupVersionKind::gvk("", "v1", "Namespace"),
        None,
        namespace,
    );
    let live_namespace = first
        .current_or(&key, read_namespace(client, namespace))
        .await?;
    if let Some(live) = &live_namespace {
        writer.may_write(&live.metadata, "Namespace", (None, namespace))?;
    }
    Ok(live_namespace)
}

/// Judged again just before writing (the decision judged a gather's read): every namespace the
/// bundle's objects go to besides the install namespace (where an Own/SingleNamespace operator
/// watches) is no other PlatformOperator's install namespace by its owner label, so two POs
/// created at once never end with one's RBAC in the other's namespace (issue 33 item 5).
async fn other_namespaces_unclaimed(
    client: &kube::Client,
    desired: &[(objects::ObjectId, Value)],
    install_namespace: &str,
    po: &str,
) -> Result<(), Error> {
    let others: BTreeSet<&str> = desired
        .iter()
        .filter_map(|(id, _)| id.namespace.as_deref())
        .filter(|ns| *ns != install_namespace)
        .collect();
    for namespace in others {
        let owner = Api::<Namespace>::all(client.clone())
            .get_metadata_opt(namespace)
            .await
            .map_err(Error::kube(format!("reading namespace {namespace}")))?
            .and_then(|ns| ns.labels().get(labels::OWNER_PO).cloned());
        if let Some(owner) = owner.filter(|owner| *owner != labels::label_value(po)) {
            return Err(Error::NamespaceClash {
                clash: NamespaceClash {
                    namespace: namespace.to_owned(),
                    other: owner,
                    side: ClashSide::Watches,
                    winner: ClashWinner::NamespaceOwner,
                },
            });
        }
    }
    Ok(())
}

/// Namespace `namespace` as the cluster holds it now.
async fn read_namespace(
    client: &kube::Client,
    namespace: &str,
) -> Result<Option<Namespace>, Error> {
    Api::<Namespace>::all(client.clone())
        .get_opt(namespace)
        .await
        .map_err(Error::kube(format!("reading namespace {namespace}")))
}

/// Renders the bundle (pure), with the configuration the decision renders the Deployments
/// with, so that what is applied is what was decided.
fn render_bundle(
    ctx: &Context,
    po: &PlatformOperator,
    namespace: &str,
    config: &AppliedConfig,
    certificates: CertificateSource,
    target: &Target,
    files: &BundleFiles,
) -> Result<render::RenderedBundle, Error> {
    let render_error = |e: RenderError| Error::Render {
        bundle: target.name.clone(),
        source: Box::new(e),
    };
    let options = RenderOptions {
        operator_condition: true,
        manager_namespace: Some(ctx.settings.manager_namespace.clone()),
        certificates,
        ..render_request::render_options(po, namespace, config)
            .map_err(|e| render_error(e.into()))?
    };
    render::render(files, &options).map_err(render_error)
}

/// The highest OpenShift version the bundle supports: the catalog's property wins; a bundle's
/// own metadata is read the same way (one decoder).
fn max_openshift_version(
    target: &Target,
    rendered: &render::RenderedBundle,
) -> Option<MaxOpenShiftVersion> {
    target.max_openshift_version.clone().or_else(|| {
        rendered
            .property_values("olm.maxOpenShiftVersion")
            .first()
            .map(|v| {
                MaxOpenShiftVersion::parse(
                    v.as_str()
                        .map_or_else(|| v.to_string(), str::to_owned)
                        .as_str(),
                )
            })
    })
}

/// The bundle's objects, with webhook serving certificates from POM's CA when POM provides
/// them (the service-ca's, by annotation, on OpenShift): their Secrets join the bundle's
/// objects, before the Deployments that mount them, its webhooks trust the CA, and the
/// Deployments' pod templates name the certificates their pods are to serve (a renewal rolls
/// them; `pom_policy::serving_roll`). Also returns the Deployments rolled off OLM v0's
/// certificate, to announce, and the caBundle.
async fn with_webhook_certificates(
    client: &kube::Client,
    (certificates, olm_trust): (CertificateSource, &webhook_certs::OlmTrust),
    rendered: &render::RenderedBundle,
    namespace: &str,
    po_name: &str,
    target: &Target,
    now: Timestamp,
) -> Result<Certified, Error> {
    let mut bundle_objects = rendered.objects.clone();
    if certificates != CertificateSource::Pom || rendered.webhook_services.is_empty() {
        return Ok((bundle_objects, Vec::new(), None));
    }
    let provided = webhook_certs::provide(
        client,
        namespace,
        &rendered.webhook_services,
        po_name,
        now,
        olm_trust,
    )
    .await?;
    if let Some(name) = reserved_secret_shipped(&provided.secrets, &bundle_objects) {
        return Err(Error::ReservedSecretName {
            bundle: target.name.clone(),
            name,
        });
    }
    inject_ca_bundle(
        &mut bundle_objects,
        &rendered.webhook_services,
        &provided.ca_bundle,
    );
    webhook_certs::annotate_templates(&mut bundle_objects, &provided.templates);
    // Before the Deployments that mount them.
    let at = bundle_objects
        .iter()
        .position(|o| o["kind"] == "Deployment" && o["apiVersion"] == "apps/v1")
        .unwrap_or(bundle_objects.len());
    bundle_objects.splice(at..at, provided.secrets);
    let rolls = provided
        .templates
        .into_iter()
        .filter(|t| {
            matches!(
                t.decision,
                pom_policy::serving_roll::TemplateHash::RollFromOlm { .. }
            )
        })
        .collect();
    Ok((bundle_objects, rolls, Some(provided.ca_bundle)))
}

/// The bundle's objects with POM's certificates, the Deployments rolled off OLM v0's
/// certificate, and the caBundle POM's webhooks trust (`None`: POM issues none here).
type Certified = (
    Vec<Value>,
    Vec<webhook_certs::TemplateHashOf>,
    Option<String>,
);

/// The name of one of POM's certificate Secrets that the bundle ships too. POM's certificate
/// Secrets are POM's: a bundle shipping one of those names would write its own key material
/// over them (both are applied by one field manager).
fn reserved_secret_shipped(ours: &[Value], bundle_objects: &[Value]) -> Option<String> {
    ours.iter().find_map(|ours| {
        let name = ours["metadata"]["name"].as_str()?;
        bundle_objects
            .iter()
            .any(|o| {
                o["kind"] == "Secret" && o["apiVersion"] == "v1" && o["metadata"]["name"] == name
            })
            .then(|| name.to_owned())
    })
}

/// Each object labelled as this PO's and this bundle's, with its identity: the labels are how
/// ownership, cleanup and drift watches find it.
fn labelled(
    bundle_objects: Vec<Value>,
    po_name: &str,
    package: &str,
    bundle: &str,
) -> Result<Vec<(objects::ObjectId, Value)>, Error> {
    let mut desired = Vec::with_capacity(bundle_objects.len());
    for mut object in bundle_objects {
        label(&mut object, po_name, package, bundle);
        desired.push((object_id(&object, bundle)?, object));
    }
    Ok(desired)
}

/// What this PO recorded before: a Secret named there is its own.
fn recorded_inventory(po: &PlatformOperator) -> BTreeSet<InventoryObject> {
    po.status
        .iter()
        .flat_map(|s| &s.inventory)
        .flat_map(|entry| entry.objects.iter().cloned())
        .collect()
}

/// An object's API and what the cluster holds of it (`None`: absent, or a Secret, never read).
type LiveObject = (
    Api<kube::api::DynamicObject>,
    Option<kube::api::DynamicObject>,
);

/// Reads what the cluster holds of each desired object, refuses one another PO owns (or no
/// PO), and collects the unsafe changes the bundle's CRDs would make: all before anything is
/// written, so a refusal leaves nothing half-applied.
async fn read_and_judge_live(
    client: &kube::Client,
    reads: &Reads<'_>,
    desired: &[(objects::ObjectId, Value)],
    namespace_exists: bool,
    writer: &WritingPo<'_>,
) -> Result<(Vec<LiveObject>, Vec<String>), Error> {
    let mut live_objects = Vec::with_capacity(desired.len());
    let mut unsafe_changes = Vec::new();
    for (id, object) in desired {
        let ns = id.namespace.as_deref();
        let (api, namespaced) = reads.kinds.api(client, &id.gvk, ns).await?;
        let key = ObjectKey::new(&id.gvk, ns.filter(|_| namespaced), &id.name);
        // Adopting, OLM's serving Secret of a webhook Service exists and is not this PO's:
        // adoption releases it unread (`pom_policy::adopt::webhooks`), so it is not refused.
        let olms_serving_secret = writer.serving_secrets_olms
            && is_secret(&id.gvk)
            && pom_policy::adopt::webhooks::service_of_serving_secret(&id.name).is_some_and(
                |service| {
                    desired.iter().any(|(d, _)| {
                        d.gvk.group.is_empty()
                            && d.gvk.kind == "Service"
                            && d.namespace == id.namespace
                            && d.name == service
                    })
                },
            );
        let live = if olms_serving_secret {
            None
        } else {
            read_unless_secret(
                reads.first,
                (&api, &key),
                id,
                object,
                namespace_exists,
                &writer.recorded,
            )
            .await?
        };
        if let Some(live) = &live {
            writer.may_write(&live.metadata, &id.gvk.kind, (ns, &id.name))?;
            if id.gvk.kind == "CustomResourceDefinition" {
                unsafe_changes.extend(unsafe_crd_changes(live, object));
            }
        }
        live_objects.push((api, live));
    }
    Ok((live_objects, unsafe_changes))
}

/// What the cluster holds of one object; `None` for a Secret, which is never read (issue 22
/// item 3: the manager has no `get` on them but POM's webhook CA): they are applied as the
/// inventory says. Their ownership is the install namespace's, judged before (no other PO
/// installs there), and the admission guard refuses the manager's change of a Secret it does
/// not own.
async fn read_unless_secret(
    first: &FirstChecks,
    (api, key): (&Api<kube::api::DynamicObject>, &ObjectKey),
    id: &objects::ObjectId,
    object: &Value,
    namespace_exists: bool,
    recorded: &BTreeSet<InventoryObject>,
) -> Result<Option<kube::api::DynamicObject>, Error> {
    if !is_secret(&id.gvk) {
        return first.current_or(key, get_opt(api, &id.name)).await;
    }
    if namespace_exists {
        unread_secret_is_free(api, id, object, recorded).await?;
    }
    Ok(None)
}

/// The unsafe changes applying CRD `desired` over `live` would make, judged on the CRD just
/// read (not a second read of it).
fn unsafe_crd_changes(live: &kube::api::DynamicObject, desired: &Value) -> Vec<String> {
    let old = serde_json::to_value(live).unwrap_or(Value::Null);
    match check_crd_upgrade(&old, desired) {
        Ok(()) => Vec::new(),
        Err(violations) => violations.iter().map(ToString::to_string).collect(),
    }
}

/// The bundle's OperatorCondition is written at apply (before its Deployment); one POM did
/// not create for this PO is never overwritten (issue 22 item 5): checked with the rest,
/// before anything is written.
async fn operator_condition_is_writable(
    client: &kube::Client,
    first: &FirstChecks,
    namespace: &str,
    csv: Option<&str>,
    writer: &WritingPo<'_>,
) -> Result<Option<pom_api::olm::OperatorCondition>, Error> {
    let Some(csv) = csv else {
        return Ok(None);
    };
    let key = ObjectKey::new(
        &kube::core::GroupVersionKind::gvk("operators.coreos.com", "v2", "OperatorCondition"),
        Some(namespace),
        csv,
    );
    let live = first
        .current_or(&key, operator_condition::live(client, namespace, csv))
        .await?;
    if let Some(live) = &live {
        writer.may_write(&live.metadata, "OperatorCondition", (Some(namespace), csv))?;
    }
    Ok(live)
}

/// Whether unsafe CRD changes refuse the bundle (`Err`: the refusal, with the details) or are
/// applied anyway because the PO's `crd-safety-override` annotation names `bundle`
/// (`Ok(Some)`: the details, for the Warning Event); `Ok(None)` when there are none. Pure.
fn crd_safety_verdict(
    po: &PlatformOperator,
    bundle: &str,
    unsafe_changes: &[String],
) -> Result<Option<String>, Error> {
    if unsafe_changes.is_empty() {
        return Ok(None);
    }
    let details = unsafe_changes.join("; ");
    let overridden = po
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(labels::CRD_SAFETY_OVERRIDE))
        .is_some_and(|named| named == bundle);
    if overridden {
        Ok(Some(details))
    } else {
        Err(Error::UnsafeCrdChange {
            bundle: bundle.to_owned(),
            details,
        })
    }
}

/// Where a first install goes when the PO names no namespace: the bundle's suggested one
/// (`render::default_install_namespace`), unless another PlatformOperator already owns it
/// (the 24 ACK controllers all suggest `ack-system`; two POs never share a namespace), then
/// the PO's name.
async fn first_install_namespace(
    client: &kube::Client,
    files: &BundleFiles,
    (po, package): (&str, &str),
    bundle: &str,
    install_clash: &(dyn Fn(&str) -> Option<NamespaceClash> + Sync),
) -> Result<String, Error> {
    let suggested = render::default_install_namespace(files, po).map_err(|e| Error::Render {
        bundle: bundle.to_owned(),
        source: Box::new(e),
    })?;
    // A suggestion an older PO watches is taken, as one another PO owns (issue 33 item 5).
    if suggested == po || install_clash(&suggested).is_some() {
        return Ok(po.to_owned());
    }
    let namespaces = Api::<Namespace>::all(client.clone());
    let mut live = namespaces
        .get_opt(&suggested)
        .await
        .map_err(Error::kube(format!("reading namespace {suggested}")))?;
    if live.is_none() {
        // Claimed by creating it, labelled as this PO's: two POs suggested the same namespace
        // (the ACK controllers all suggest `ack-system`) and reconciled at once must not both
        // see it free. The API server lets one create win; the other reads the winner's.
        let claim = serde_json::from_value::<Namespace>(serde_json::json!({
            "metadata": {"name": suggested, "labels": labels::owner_labels(po, package, None)},
        }))
        .map_err(|e| {
            Error::kube(format!("claiming namespace {suggested}"))(kube::Error::SerdeError(e))
        })?;
        match namespaces
            .create(&kube::api::PostParams::default(), &claim)
            .await
        {
            Ok(_) => return Ok(suggested),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                live = namespaces
                    .get_opt(&suggested)
                    .await
                    .map_err(Error::kube(format!("reading namespace {suggested}")))?;
            }
            Err(err) => return Err(Error::kube(format!("claiming namespace {suggested}"))(err)),
        }
    }
    // Free: absent, already this PO's, or handed to it by the admin.
    let taken = live.is_some_and(|ns| {
        ns.labels().get(labels::OWNER_PO) != Some(&labels::label_value(po))
            && ns.annotations().get(labels::ADOPT).map(String::as_str) != Some(po)
    });
    Ok(if taken { po.to_owned() } else { suggested })
}

/// Writes a prepared bundle: its namespace, its OperatorCondition, then every object that
/// differs from the cluster (drift repair included); reports what the move still waits for.
pub async fn apply(
    ctx: &Context,
    po: &PlatformOperator,
    namespace: &str,
    target: &Target,
    prepared: Prepared,
    applied_secrets: &objects::AppliedSecrets,
) -> Result<(InstallReport, HeldSecrets), Error> {
    let client = &ctx.client;
    let po_name = po.name_any();
    let package = &po.spec.package.name;
    let inventory = prepared.inventory(namespace);
    let Prepared {
        rendered,
        desired,
        live_objects,
        max_openshift_version: max_ocp,
        image,
        namespace: _,
        crd_safety_overridden: _,
        live_namespace,
        live_operator_condition,
        serving_rolls: _,
        ca_bundle,
        hold_serving_secrets,
    } = prepared;
    ensure_namespace(
        client,
        (namespace, live_namespace),
        &po_name,
        package,
        rendered
            .consents_used
            .contains(&PowerClass::PrivilegedWorkloads),
        &rendered.namespace_metadata,
    )
    .await?;
    let operator_condition = ensure_operator_condition(
        client,
        (namespace, live_operator_condition),
        po,
        &target.name,
        &rendered,
    )
    .await?;

    let mut wrote = 0;
    let trust = ca_bundle.as_deref().map(|ca_bundle| objects::Trust {
        services: &rendered.webhook_services,
        ca_bundle,
    });
    let hold_secrets: BTreeSet<String> = rendered
        .webhook_services
        .iter()
        .filter(|_| hold_serving_secrets && trust.is_some())
        .map(|s| s.secret.clone())
        .collect();
    let (now, held) = apply_objects(
        &desired,
        live_objects,
        (applied_secrets, trust.as_ref(), &hold_secrets),
        &mut wrote,
    )
    .await?;
    let (mut waits, unavailable) = settle(client, namespace, &rendered, &desired, &now).await?;
    register_webhooks_once_served(
        client,
        namespace,
        &rendered.webhook_services,
        held.webhooks,
        &mut waits,
        &mut wrote,
    )
    .await?;
    // Adopting: the serving Secrets once POM's configurations are registered and OLM's
    // retired (`write_held_secrets`, after `Step::RetireOlmWebhooks`; else the next reconcile
    // writes them).
    let held_secrets = HeldSecrets(
        held.secrets
            .into_iter()
            .map(|h| (h.id.clone(), h.object.clone(), h.api))
            .collect(),
    );

    let report = InstallReport {
        bundle: installed_bundle(target, image),
        max_openshift_version: max_ocp,
        waits,
        operator_condition,
        wrote,
        objects: inventory,
        powers: status::power_summaries(&rendered.powers),
        unavailable,
    };
    Ok((report, held_secrets))
}

/// Adopting: the serving Secrets the apply held back, written only once POM's configurations
/// are registered and OLM's (trusting OLM's CA only) retired: a reloading operator then
/// serves POM's certificate only where every registered configuration trusts POM's CA (review
/// of session 22, M2). Deleting OLM's first is safe: POM's trust both CAs, and the pods still
/// serve OLM's certificate until the Secret changes.
pub struct HeldSecrets(Vec<(objects::ObjectId, Value, Api<kube::api::DynamicObject>)>);

impl HeldSecrets {
    /// Whether nothing was held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Writes the held serving Secrets ([`HeldSecrets`]); returns how many it wrote.
pub async fn write_held_secrets(
    held: HeldSecrets,
    applied_secrets: &objects::AppliedSecrets,
) -> Result<usize, Error> {
    let mut wrote = 0;
    for (id, object, api) in held.0 {
        apply_one(&api, &id, &object, None, applied_secrets, &mut wrote).await?;
    }
    Ok(wrote)
}

/// The OperatorCondition (§7) exists before the operator's Deployment is written, as OLM v0
/// does: an operator built on operator-lib writes its condition at start-up.
async fn ensure_operator_condition(
    client: &kube::Client,
    (namespace, read): (&str, Option<pom_api::olm::OperatorCondition>),
    po: &PlatformOperator,
    bundle: &str,
    rendered: &render::RenderedBundle,
) -> Result<Option<OperatorConditionReport>, Error> {
    let Some(csv) = &rendered.csv_name else {
        return Ok(None);
    };
    let gate = operator_condition::ensure(
        client,
        &OperatorConditionFor {
            namespace,
            csv,
            bundle,
            deployments: &rendered.deployments,
            service_accounts: &rendered.service_accounts,
            po: &po.name_any(),
            package: &po.spec.package.name,
        },
        read,
    )
    .await?;
    Ok(Some(OperatorConditionReport {
        namespace: namespace.to_owned(),
        name: csv.clone(),
        gate,
    }))
}

/// A webhook configuration held back until what it calls is served, with its API and what
/// the cluster held of it.
struct HeldWebhook<'a> {
    id: &'a objects::ObjectId,
    object: &'a Value,
    api: Api<kube::api::DynamicObject>,
    live: Option<kube::api::DynamicObject>,
}

/// What the apply holds back and lets in later: the webhook configurations and CRD
/// conversions until their new pods serve ([`register_webhooks_once_served`]), and, while
/// adopting, OLM's serving Secrets until POM's configurations are registered and OLM's
/// retired ([`HeldSecrets`]).
struct Held<'a> {
    webhooks: Vec<HeldWebhook<'a>>,
    secrets: Vec<HeldWebhook<'a>>,
}

/// Writes the webhook configurations' widened trust ([`objects::widen_first`]) before any
/// other object of the apply, and keeps what the server answered as their live state.
async fn widen_trust_first(
    desired: &[(objects::ObjectId, Value)],
    live_objects: &mut [LiveObject],
    trust: &objects::Trust<'_>,
    applied_secrets: &objects::AppliedSecrets,
    wrote: &mut usize,
) -> Result<(), Error> {
    let running: Vec<Option<Value>> = desired
        .iter()
        .zip(live_objects.iter())
        .map(|((id, _), (_, live))| {
            live.as_ref()
                .filter(|_| is_webhook_configuration(&id.to_inventory()))
                .and_then(|live| serde_json::to_value(live).ok())
        })
        .collect();
    for (index, trusting) in objects::widen_first(desired, &running, trust) {
        let (Some((id, _)), Some((api, live))) = (desired.get(index), live_objects.get_mut(index))
        else {
            continue;
        };
        *live = apply_one(api, id, &trusting, live.take(), applied_secrets, wrote).await?;
    }
    Ok(())
}

/// Applies what differs (drift repair included), webhook configurations and a CRD's switch
/// to a new conversion webhook aside (held back, see [`register_webhooks_once_served`], but
/// trusting the new CA at once, [`objects::trusting_now`]), and the serving Secrets named in
/// `hold_secrets` (adopting: [`Prepared::hold_serving_secrets`]). Returns what the server
/// holds now, per object (the apply's answer, or the object just read when nothing was
/// written), and what was held.
async fn apply_objects<'a>(
    desired: &'a [(objects::ObjectId, Value)],
    live_objects: Vec<LiveObject>,
    (applied_secrets, trust, hold_secrets): (
        &objects::AppliedSecrets,
        Option<&objects::Trust<'_>>,
        &BTreeSet<String>,
    ),
    wrote: &mut usize,
) -> Result<(Vec<Option<kube::api::DynamicObject>>, Held<'a>), Error> {
    let mut now: Vec<Option<kube::api::DynamicObject>> = Vec::with_capacity(desired.len());
    let mut held = Held {
        webhooks: Vec::new(),
        secrets: Vec::new(),
    };
    let mut live_objects = live_objects;
    if let Some(trust) = trust {
        widen_trust_first(desired, &mut live_objects, trust, applied_secrets, wrote).await?;
    }
    for ((id, object), (api, live)) in desired.iter().zip(live_objects) {
        if is_secret(&id.gvk) && hold_secrets.contains(&id.name) {
            held.secrets.push(HeldWebhook {
                id,
                object,
                api,
                live: None,
            });
            now.push(None);
            continue;
        }
        if is_webhook_configuration(&id.to_inventory()) {
            // Its trust widened first (`widen_trust_first`); the rest once served.
            held.webhooks.push(HeldWebhook {
                id,
                object,
                api,
                live: live.clone(),
            });
            now.push(live);
            continue;
        }
        let held_conversion = live
            .as_ref()
            .filter(|_| id.gvk.kind == "CustomResourceDefinition")
            .and_then(|live| serde_json::to_value(live).ok())
            .and_then(|live| objects::conversion_held_back(object, &live))
            .map(|conversion| match trust {
                Some(trust) => {
                    objects::trusting_now(object, &conversion, trust).unwrap_or(conversion)
                }
                None => conversion,
            });
        if let Some(conversion) = held_conversion {
            // The CRD's versions and schema now, its converter once the new pods serve it.
            let applied = apply_one(&api, id, &conversion, live, applied_secrets, wrote).await?;
            held.webhooks.push(HeldWebhook {
                id,
                object,
                api,
                live: applied.clone(),
            });
            now.push(applied);
            continue;
        }
        now.push(apply_one(&api, id, object, live, applied_secrets, wrote).await?);
    }
    Ok((now, held))
}

/// Applies one object if it differs, counting the write; returns what the server holds of it
/// now. A Secret is never read, so it is always applied: one whose apply changed nothing (same
/// resourceVersion as the last apply returned) is not counted as a write.
async fn apply_one(
    api: &Api<kube::api::DynamicObject>,
    id: &objects::ObjectId,
    object: &Value,
    live: Option<kube::api::DynamicObject>,
    applied_secrets: &objects::AppliedSecrets,
    wrote: &mut usize,
) -> Result<Option<kube::api::DynamicObject>, Error> {
    let applied = apply_if_changed(api, &id.name, object, live.as_ref()).await?;
    let unchanged_secret = is_secret(&id.gvk)
        && applied.as_ref().is_some_and(|applied| {
            !applied_secrets.changed(
                id.namespace.as_deref().unwrap_or_default(),
                &id.name,
                applied.metadata.resource_version.as_deref(),
            )
        });
    if unchanged_secret {
        return Ok(applied);
    }
    Ok(wrote_one(wrote, applied, live))
}

/// The bundle's objects as the server holds them after the apply, from the apply's answers:
/// settling on them costs no read.
struct HeldAfterApply<'a> {
    desired: &'a [(objects::ObjectId, Value)],
    now: &'a [Option<kube::api::DynamicObject>],
}

impl HeldAfterApply<'_> {
    /// `name` of kind `K` as the apply left it; read only if the bundle did not carry it
    /// (`what` names the kind in the error).
    async fn or_read<K>(&self, api: &Api<K>, name: &str, what: &str) -> Result<Option<K>, Error>
    where
        K: k8s_openapi::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
    {
        let held = self
            .desired
            .iter()
            .zip(self.now)
            .find(|((id, _), _)| id.gvk.kind == K::KIND && id.name == name)
            .and_then(|(_, object)| object.as_ref())
            .and_then(|object| serde_json::to_value(object).ok());
        match held {
            Some(value) => Ok(serde_json::from_value(value).ok()),
            None => api
                .get_opt(name)
                .await
                .map_err(Error::kube(format!("reading {what} {name}"))),
        }
    }
}

/// What the bundle still waits for to settle (rollout part of §7; never a readiness probe),
/// judged on what the apply left (`desired` and `now`, one to one), and the Deployments that
/// exist but are not available.
async fn settle(
    client: &kube::Client,
    namespace: &str,
    rendered: &render::RenderedBundle,
    desired: &[(objects::ObjectId, Value)],
    now: &[Option<kube::api::DynamicObject>],
) -> Result<(Vec<Wait>, Vec<UnavailableDeployment>), Error> {
    let held = HeldAfterApply { desired, now };
    let mut waits = crd_waits(client, &rendered.crds, &held).await?;
    let (rollouts, unavailable) =
        deployment_waits(client, namespace, &rendered.deployments, &held).await?;
    waits.extend(rollouts);
    Ok((waits, unavailable))
}

/// A wait for each of the bundle's CRDs not Established yet: nothing may use them before.
async fn crd_waits(
    client: &kube::Client,
    crd_names: &[String],
    held: &HeldAfterApply<'_>,
) -> Result<Vec<Wait>, Error> {
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut waits = Vec::new();
    for crd_name in crd_names {
        let crd = held.or_read(&crds, crd_name, "CRD").await?;
        if !is_established(crd) {
            waits.push(Wait::CrdEstablished {
                name: crd_name.clone(),
            });
        }
    }
    Ok(waits)
}

/// Whether a CRD reports `Established`: its API is served.
fn is_established(crd: Option<CustomResourceDefinition>) -> bool {
    crd.and_then(|c| c.status)
        .and_then(|s| s.conditions)
        .is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Established" && c.status == "True")
        })
}

/// A wait for each of the bundle's Deployments not rolled out yet, and those that exist but
/// are not available, with why (reported, so an operator that cannot start is visible).
async fn deployment_waits(
    client: &kube::Client,
    namespace: &str,
    names: &[String],
    held: &HeldAfterApply<'_>,
) -> Result<(Vec<Wait>, Vec<UnavailableDeployment>), Error> {
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    let mut waits = Vec::new();
    let mut unavailable = Vec::new();
    for name in names {
        let deployment = held.or_read(&deployments, name, "Deployment").await?;
        if !deployment.as_ref().is_some_and(is_rolled_out) {
            waits.push(Wait::Rollout {
                namespace: namespace.to_owned(),
                name: name.clone(),
            });
        }
        if let Some(why) = deployment.as_ref().and_then(unavailable_because) {
            unavailable.push(UnavailableDeployment {
                namespace: namespace.to_owned(),
                name: name.clone(),
                why,
            });
        }
    }
    Ok((waits, unavailable))
}

/// Webhook configurations call the bundle's Deployments: they are registered (or changed
/// to the new bundle's) once each webhook Service lists a ready endpoint that is one of its
/// Deployment's current pods, in the overlap a rolling update keeps old and new pods ready
/// together: switched earlier, the new paths are served by nothing; once the rollout
/// completed, the old paths no longer are (issue 34 item 9; the decision is
/// [`webhook_serving::registration`]). Until then the bundle moved from keeps serving its own.
/// A move settles only once its webhooks are served (§7), conversion-only ones included.
async fn register_webhooks_once_served(
    client: &kube::Client,
    namespace: &str,
    services: &[render::WebhookService],
    webhooks: Vec<HeldWebhook<'_>>,
    waits: &mut Vec<Wait>,
    wrote: &mut usize,
) -> Result<(), Error> {
    let rolled_out = !waits.iter().any(|w| matches!(w, Wait::Rollout { .. }));
    let mut observed = Vec::with_capacity(services.len());
    for service in services {
        observed.push(super::webhook_endpoints::observe(client, namespace, service).await?);
    }
    let held: Vec<(String, String)> = webhooks
        .iter()
        .map(|w| (w.id.gvk.kind.clone(), w.id.name.clone()))
        .collect();
    let decision = webhook_serving::registration(&observed, rolled_out, &held);
    if decision.register {
        for HeldWebhook {
            id,
            object,
            api,
            live,
        } in webhooks
        {
            let applied = apply_if_changed(&api, &id.name, object, live.as_ref()).await?;
            wrote_one(wrote, applied, live);
        }
    }
    waits.extend(decision.waits);
    Ok(())
}

/// The bundle as recorded applied: the image by digest, or the digest of the catalog-carried
/// manifests, so drift repair re-applies exactly this content.
fn installed_bundle(target: &Target, image: Option<String>) -> InstalledBundle {
    InstalledBundle {
        name: target.name.clone(),
        version: target.version.clone(),
        image,
        objects_digest: match &target.content {
            Content::Objects(objects) => Some(objects_digest(objects)),
            Content::Image(_) => None,
        },
    }
}

/// What the server holds after one apply (`applied` when it wrote), counting the write.
fn wrote_one(
    wrote: &mut usize,
    applied: Option<kube::api::DynamicObject>,
    live: Option<kube::api::DynamicObject>,
) -> Option<kube::api::DynamicObject> {
    match applied {
        Some(applied) => {
            *wrote += 1;
            if *wrote == 1 {
                fail_point::hit(FailPoint::AfterFirstApply);
            }
            Some(applied)
        }
        None => live,
    }
}

/// Why a Deployment that exists is not available, when it is not: its `Available` condition is
/// False (its message says why), or none of the replicas it wants is available. A Deployment
/// the controller has not looked at yet (no status) is not judged here: that is a rollout.
#[must_use]
pub fn unavailable_because(deployment: &Deployment) -> Option<String> {
    let status = deployment.status.as_ref()?;
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    if let Some(condition) = status.conditions.as_ref().and_then(|c| {
        c.iter()
            .find(|c| c.type_ == "Available" && c.status == "False")
    }) {
        return Some(
            condition
                .message
                .clone()
                .unwrap_or_else(|| "its Available condition is False".to_owned()),
        );
    }
    (desired > 0 && status.available_replicas.unwrap_or(0) == 0 && status.conditions.is_some())
        .then(|| format!("0 of {desired} replicas available"))
}

/// A Deployment has rolled out when the controller observed its generation, every replica is
/// updated and available, and it reports Available (OLM's DeploymentStatus rule, without
/// readiness games).
#[must_use]
pub fn is_rolled_out(deployment: &Deployment) -> bool {
    let generation = deployment.metadata.generation.unwrap_or(0);
    let desired = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let Some(status) = &deployment.status else {
        return false;
    };
    status.observed_generation.unwrap_or(0) >= generation
        && status.updated_replicas.unwrap_or(0) >= desired
        && status.available_replicas.unwrap_or(0) >= desired
        && status.replicas.unwrap_or(0) == status.updated_replicas.unwrap_or(0)
        && status.conditions.as_ref().is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

/// Creates the install namespace, labelled as this PO's and with the Pod Security level its
/// consent allows, and keeps those labels (consent can change). [`prepare`] has judged the
/// namespace this PO's to write (its own, or handed to it: then it is labelled as its own).
async fn ensure_namespace(
    client: &kube::Client,
    (namespace, read): (&str, Option<Namespace>),
    po: &str,
    package: &str,
    privileged: bool,
    bundle_asks: &NamespaceMetadata,
) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    // Read once per reconcile: the copy `prepare` judged, unless it was absent then (another
    // PO may have created it since: read again).
    let live = match read {
        Some(live) => Some(live),
        None => read_namespace(client, namespace).await?,
    };
    let mut wanted = labels::owner_labels(po, package, None);
    for (key, value) in pod_security::namespace_labels(privileged) {
        wanted.insert(key.to_owned(), value.to_owned());
    }
    wanted.extend(bundle_asks.labels.clone());
    if let Some(live) = &live {
        let live_labels = live.labels();
        // Judged in `prepare`; checked again here, since another PO may have created it since
        // (never taken over: another package's PO owns it).
        if let Some(owner) = live_labels.get(labels::OWNER_PO)
            && *owner != labels::label_value(po)
            && live_labels.get(labels::PACKAGE) != Some(&labels::label_value(package))
        {
            return Err(Error::OwnershipConflict {
                kind: "Namespace".to_owned(),
                name: namespace.to_owned(),
                owner: owner.clone(),
            });
        }
        let current = wanted
            .iter()
            .all(|(key, value)| live_labels.get(key) == Some(value))
            && bundle_asks
                .annotations
                .iter()
                .all(|(key, value)| live.annotations().get(key) == Some(value));
        if current {
            return Ok(());
        }
    }
    let ns = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": wanted, "annotations": bundle_asks.annotations},
    });
    api.patch(
        namespace,
        &PatchParams::apply(BUNDLE_FIELD_MANAGER).force(),
        &Patch::Apply(&ns),
    )
    .await
    .map_err(Error::kube(format!("writing namespace {namespace}")))?;
    Ok(())
}

/// Takes a deleted PO's owner labels off its install Namespace, which cleanup keeps
/// ([`pom_policy::namespace_clash::labels_to_release`]): a merge patch conditional on the
/// resourceVersion read, so a Namespace relabelled meanwhile is judged again on the retry.
pub async fn release_namespace(
    client: &kube::Client,
    namespace: &str,
    po: &str,
) -> Result<(), Error> {
    let Some(live) = read_namespace(client, namespace).await? else {
        return Ok(());
    };
    let release = pom_policy::namespace_clash::labels_to_release(live.labels(), po);
    if release.is_empty() {
        return Ok(());
    }
    let removed: serde_json::Map<String, Value> = release
        .iter()
        .map(|key| ((*key).to_owned(), Value::Null))
        .collect();
    let patch = serde_json::json!({
        "metadata": {"resourceVersion": live.resource_version(), "labels": removed},
    });
    Api::<Namespace>::all(client.clone())
        .patch(namespace, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(Error::kube(format!(
            "taking the owner labels of PlatformOperator {po} off namespace {namespace} (its deletion waits for it; \
             if the manager may not patch Namespaces, remove them by hand: kubectl label namespace {namespace} {}-)",
            release.join("- ")
        )))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// A catalog whose bundle `op.v1.0.0` carries `manifest` (and, with `image`, an image).
    fn catalog_with(manifest: &str, image: Option<&str>) -> FbcCatalog {
        use base64::Engine;
        let data = base64::engine::general_purpose::STANDARD.encode(manifest);
        let bundle = serde_json::json!({
            "schema": "olm.bundle", "package": "op", "name": "op.v1.0.0", "image": image,
            "properties": [
                {"type": "olm.package", "value": {"packageName": "op", "version": "1.0.0"}},
                {"type": "olm.bundle.object", "value": {"data": data}}
            ]
        });
        let fbc = format!(
            "{}\n{}\n{}\n",
            serde_json::json!({"schema": "olm.package", "name": "op", "defaultChannel": "stable"}),
            serde_json::json!({"schema": "olm.channel", "package": "op", "name": "stable",
                               "entries": [{"name": "op.v1.0.0"}]}),
            bundle
        );
        pom_resolver::fbc::parse_documents([("c.json".to_owned(), fbc.into_bytes())]).unwrap()
    }

    fn installed(image: Option<&str>, objects_digest: Option<String>) -> InstalledBundle {
        InstalledBundle {
            name: "op.v1.0.0".into(),
            version: "1.0.0".into(),
            image: image.map(str::to_owned),
            objects_digest,
        }
    }

    /// Issue 22 item 4: drift repair re-applies what was applied at the move, found by
    /// priority, never what a catalog (a lower-priority one included) carries now.
    #[test]
    fn drift_repair_reapplies_what_was_applied_never_what_a_catalog_carries_now() {
        let applied = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"a"}}"#;
        let hostile = r#"{"kind":"ConfigMap","apiVersion":"v1","metadata":{"name":"b"}}"#;
        let good = catalog_with(applied, None);
        let other = catalog_with(hostile, None);
        let digest = objects_digest(&[applied.to_owned()]);

        // An image bundle: its recorded digest, although a catalog carries manifests for it.
        let kept = Target::for_keep(
            &installed(Some("registry.example/op@sha256:1"), None),
            None,
            &[("other", &other)],
        )
        .unwrap();
        assert!(
            matches!(kept.content, Content::Image(ref i) if i == "registry.example/op@sha256:1")
        );

        // Catalog-carried: the catalog whose copy has the recorded digest, wherever it sits.
        for order in [
            [("other", &other), ("good", &good)],
            [("good", &good), ("other", &other)],
        ] {
            let kept =
                Target::for_keep(&installed(None, Some(digest.clone())), None, &order).unwrap();
            assert_eq!(kept.catalog.as_deref(), Some("good"));
            assert!(matches!(kept.content, Content::Objects(ref o) if o == &[applied.to_owned()]));
        }
        // Changed everywhere: refused, not re-applied from what the catalog carries now.
        let err = Target::for_keep(&installed(None, Some(digest)), None, &[("other", &other)])
            .err()
            .unwrap();
        assert!(matches!(err, Error::AppliedContentGone { ref bundle } if bundle == "op.v1.0.0"));
        assert!(
            err.to_string().contains("as they were at its move"),
            "{err}"
        );
        // A status from before digests: the first catalog by priority.
        let kept = Target::for_keep(
            &installed(None, None),
            None,
            &[("good", &good), ("other", &other)],
        )
        .unwrap();
        assert_eq!(kept.catalog.as_deref(), Some("good"));
    }

    #[test]
    fn a_bundle_without_image_or_objects_is_an_error_not_an_empty_pull() {
        for image in [None, Some("")] {
            let err = content_of("op.v1.0.0", image, None).err().unwrap();
            assert!(matches!(err, Error::NoBundleContent { ref bundle } if bundle == "op.v1.0.0"));
            assert_eq!(err.reason(), pom_api::conditions::Reason::UnpackFailed);
            assert!(
                err.to_string()
                    .contains("neither an image nor olm.bundle.object"),
                "{err}"
            );
        }
        assert!(matches!(
            content_of("op.v1.0.0", Some("quay.example/op@sha256:1"), None),
            Ok(Content::Image(ref i)) if i == "quay.example/op@sha256:1"
        ));
    }
}
