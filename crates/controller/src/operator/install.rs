//! Installing one bundle: fetch its content (image by digest, or objects carried by the
//! catalog), render it (pure), refuse unsafe CRD changes and objects owned by another PO, apply
//! what differs, prune what the bundle no longer has, and report whether the move has settled.

use std::sync::Arc;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::platform_operator::{InstalledBundle, UpgradeGate};
use pom_resolver::fbc::{Bundle, Catalog as FbcCatalog};
use pom_resolver::render::{self, BundleFiles, RenderOptions, check_crd_upgrade};
use pom_resolver::select::Resolution;
use serde_json::Value;

use super::objects::{self, apply_if_changed, get_opt, label, label_value, object_id};
use super::operator_condition::{self, Gate};
use super::reconcile::PoContext;
use crate::context::BUNDLE_FIELD_MANAGER;
use crate::error::Error;

/// The bundle to put on the cluster.
pub struct Target {
    pub name: String,
    pub version: String,
    pub image: Option<String>,
    /// `olm.bundle.object` manifests from the catalog, when it carries them.
    pub objects: Vec<String>,
    pub max_openshift_version: Option<String>,
}

impl Target {
    /// The resolved bundle.
    pub fn from_resolution(res: &Resolution, catalogs: &[(String, i32, Arc<FbcCatalog>)]) -> Self {
        let bundle = find_bundle(catalogs, &res.bundle.catalog, &res.bundle.name);
        Self::from_parts(
            &res.bundle.name,
            &res.bundle.version.to_string(),
            res.bundle.image.clone(),
            bundle,
        )
    }

    /// The installed bundle again (held while a move settles): re-applied for drift repair.
    pub fn installed(
        installed: Option<&InstalledBundle>,
        res: &Resolution,
        catalogs: &[(String, i32, Arc<FbcCatalog>)],
    ) -> Self {
        let Some(installed) = installed else {
            return Self::from_resolution(res, catalogs);
        };
        let bundle = catalogs
            .iter()
            .find_map(|(name, _, _)| find_bundle(catalogs, name, &installed.name));
        Self::from_parts(
            &installed.name,
            &installed.version,
            installed.image.clone(),
            bundle,
        )
    }

    fn from_parts(
        name: &str,
        version: &str,
        image: Option<String>,
        bundle: Option<&Bundle>,
    ) -> Self {
        Self {
            name: name.to_owned(),
            version: version.to_owned(),
            image: image
                .or_else(|| bundle.and_then(|b| b.image.clone()))
                .filter(|i| !i.is_empty()),
            objects: bundle
                .map(|b| b.properties.objects.clone())
                .unwrap_or_default(),
            max_openshift_version: bundle.and_then(|b| match &b.properties.max_openshift_version {
                Some(pom_resolver::fbc::MaxOpenShiftVersion::Valid { major, minor }) => {
                    Some(format!("{major}.{minor}"))
                }
                Some(pom_resolver::fbc::MaxOpenShiftVersion::Invalid { raw, .. }) => {
                    Some(raw.clone())
                }
                None => None,
            }),
        }
    }
}

fn find_bundle<'a>(
    catalogs: &'a [(String, i32, Arc<FbcCatalog>)],
    catalog: &str,
    bundle: &str,
) -> Option<&'a Bundle> {
    catalogs
        .iter()
        .filter(|(name, _, _)| name == catalog)
        .find_map(|(_, _, c)| c.packages.values().find_map(|p| p.bundles.get(bundle)))
}

/// What an install achieved.
pub struct Installed {
    pub bundle: InstalledBundle,
    /// `None` once every CRD is Established and every Deployment rolled out; else what is awaited.
    pub waiting_for: Option<String>,
    pub max_openshift_version: Option<String>,
    /// How many objects were written (0 in a steady state).
    pub wrote: usize,
    /// The bundle's OperatorCondition gate, when it has a CSV and the cluster the API.
    pub gate: Option<Gate>,
}

/// Installs (or re-applies) `target` for `po` into `namespace`.
pub async fn install(
    pctx: &PoContext,
    po: &PlatformOperator,
    namespace: &str,
    target: &Target,
) -> Result<Installed, Error> {
    let ctx = &pctx.ctx;
    let client = &ctx.client;
    let po_name = po.name_any();
    let package = &po.spec.package.name;

    // Fetch.
    let files = if target.objects.is_empty() {
        let image = target.image.clone().unwrap_or_default();
        let pulled =
            ctx.images
                .pull_files(&image, "")
                .await
                .map_err(|source| Error::BundlePull {
                    image: image.clone(),
                    source,
                })?;
        BundleFiles::new((*pulled).clone())
    } else {
        BundleFiles::from_objects(target.objects.clone())
    };

    // Render (pure).
    let mut options = RenderOptions::new(namespace);
    options.operator_condition = true;
    let rendered = render::render(&files, &options).map_err(|e| Error::Render {
        bundle: target.name.clone(),
        source: Box::new(e),
    })?;
    let max_ocp = target.max_openshift_version.clone().or_else(|| {
        rendered
            .property_values("olm.maxOpenShiftVersion")
            .first()
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_owned))
    });

    // Refuse what would break running things, before writing anything.
    let mut desired: Vec<(objects::ObjectId, Value)> = Vec::new();
    for object in &rendered.objects {
        let mut object = object.clone();
        label(&mut object, &po_name, package, &target.name);
        desired.push((object_id(&object, &target.name)?, object));
    }
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut live_objects = Vec::with_capacity(desired.len());
    let mut unsafe_changes = Vec::new();
    let mut namespace_ready = false;
    for (id, object) in &desired {
        let ns = id.namespace.as_deref();
        if ns.is_some() && !namespace_ready {
            ensure_namespace(client, namespace, &po_name, package).await?;
            namespace_ready = true;
        }
        let (api, _) = pctx.kinds.api(client, &id.gvk, ns).await?;
        let live = get_opt(&api, &id.name).await?;
        if let Some(live) = &live {
            let owner = live.labels().get(labels::OWNER_PO).cloned();
            if let Some(owner) = owner
                && owner != label_value(&po_name)
            {
                return Err(Error::OwnershipConflict {
                    kind: id.gvk.kind.clone(),
                    name: id.name.clone(),
                    owner,
                });
            }
            if id.gvk.kind == "CustomResourceDefinition" {
                let old = crds
                    .get(&id.name)
                    .await
                    .map_err(Error::kube(format!("reading CRD {}", id.name)))?;
                let old = serde_json::to_value(old).unwrap_or(Value::Null);
                if let Err(violations) = check_crd_upgrade(&old, object) {
                    unsafe_changes.extend(violations.iter().map(ToString::to_string));
                }
            }
        }
        live_objects.push((api, live));
    }
    if !unsafe_changes.is_empty() {
        return Err(Error::UnsafeCrdChange {
            bundle: target.name.clone(),
            details: unsafe_changes.join("; "),
        });
    }
    if !namespace_ready {
        ensure_namespace(client, namespace, &po_name, package).await?;
    }

    // Apply what differs (drift repair included), then prune older bundles' objects.
    let mut wrote = 0;
    for ((id, object), (api, live)) in desired.iter().zip(&live_objects) {
        if apply_if_changed(api, &id.name, object, live.as_ref()).await? {
            wrote += 1;
        }
    }
    wrote += objects::prune(&pctx.kinds, client, &po_name, Some(&target.name)).await?;

    // Settle (rollout part of §7; never a readiness probe).
    let mut waiting = Vec::new();
    for crd_name in &rendered.crds {
        let established = crds
            .get_opt(crd_name)
            .await
            .map_err(Error::kube(format!("reading CRD {crd_name}")))?
            .and_then(|c| c.status)
            .and_then(|s| s.conditions)
            .is_some_and(|c| {
                c.iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if !established {
            waiting.push(format!("CRD {crd_name} to be Established"));
        }
    }
    let deployments: Api<Deployment> = Api::namespaced(client.clone(), namespace);
    for name in &rendered.deployments {
        let deployment = deployments
            .get_opt(name)
            .await
            .map_err(Error::kube(format!("reading Deployment {name}")))?;
        if !deployment.as_ref().is_some_and(is_rolled_out) {
            waiting.push(format!("Deployment {namespace}/{name} to roll out"));
        }
    }

    // The OperatorCondition gate (§7): never a readiness probe.
    let gate = match &rendered.csv_name {
        Some(csv) => {
            operator_condition::ensure(
                client,
                namespace,
                csv,
                &rendered.deployments,
                &rendered.service_accounts,
                &po_name,
                package,
            )
            .await?
        }
        None => None,
    };
    let reported_before = po
        .annotations()
        .contains_key(labels::OPERATOR_CONDITION_REPORTED);
    let requires_condition = match po.spec.upgrade_gate {
        UpgradeGate::Rollout => false,
        UpgradeGate::OperatorCondition => true,
        UpgradeGate::Auto => reported_before || gate.as_ref().is_some_and(|g| g.reported),
    };
    if requires_condition {
        let csv = rendered
            .csv_name
            .clone()
            .unwrap_or_else(|| target.name.clone());
        match &gate {
            Some(g) if g.upgradeable == Some(true) => {}
            Some(g) => waiting.push(format!(
                "OperatorCondition {namespace}/{csv} to report Upgradeable=True for its current generation (now: {})",
                g.message
            )),
            None => waiting.push(format!("OperatorCondition {namespace}/{csv}: the OperatorCondition API or object is missing")),
        }
    }

    Ok(Installed {
        bundle: InstalledBundle {
            name: target.name.clone(),
            version: target.version.clone(),
            image: target.image.clone(),
        },
        waiting_for: (!waiting.is_empty()).then(|| waiting.join(", ")),
        max_openshift_version: max_ocp,
        wrote,
        gate,
    })
}

/// A Deployment has rolled out when the controller observed its generation, every replica is
/// updated and it reports Available (OLM's DeploymentStatus rule, without readiness games).
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
        && status.replicas.unwrap_or(0) == status.updated_replicas.unwrap_or(0)
        && status.conditions.as_ref().is_some_and(|c| {
            c.iter()
                .any(|c| c.type_ == "Available" && c.status == "True")
        })
}

async fn ensure_namespace(
    client: &kube::Client,
    namespace: &str,
    po: &str,
    package: &str,
) -> Result<(), Error> {
    let api: Api<Namespace> = Api::all(client.clone());
    if api
        .get_opt(namespace)
        .await
        .map_err(Error::kube(format!("reading namespace {namespace}")))?
        .is_some()
    {
        return Ok(());
    }
    let ns = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": namespace, "labels": {
            labels::OWNER_PO: label_value(po),
            labels::PACKAGE: label_value(package),
            labels::MANAGED_BY: labels::MANAGED_BY_VALUE,
        }},
    });
    api.patch(
        namespace,
        &PatchParams::apply(BUNDLE_FIELD_MANAGER).force(),
        &Patch::Apply(&ns),
    )
    .await
    .map_err(Error::kube(format!("creating namespace {namespace}")))?;
    Ok(())
}
