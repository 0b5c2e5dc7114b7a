//! What the live subcommands (`status`, `plan`) share: a client, the cluster objects they read,
//! catalog content fetched the way the manager fetches it, and plain-text tables.
//!
//! The manager keeps parsed catalogs in memory only, so `pomctl plan` reads them itself: a
//! ConfigMap source through the API, an image source through the manager's own
//! [`ImagePuller`] (same by-digest pull, same layer and size checks, same insecure-registry
//! rule). Image catalogs are read at `status.resolvedSource` when the manager has resolved one,
//! so the plan uses exactly the content the manager serves, not a tag that moved since.

use std::fmt::Write as _;
use std::future::Future;
use std::sync::OnceLock;

use anyhow::Context as _;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, ListParams};
use kube::{Client, ResourceExt};
use pom_api::openshift::image_mirrors::{
    ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet,
};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
use pom_api::{Catalog, PlatformOperator};
use pom_oci::mirrors::MirrorRules;
use pom_oci::{ImagePuller, RegistryAccess};
use pom_policy::source_trust::{LISTED_KEY, SOURCES_CONFIG_MAP, SourceTrust};
use pom_resolver::fbc::Catalog as FbcCatalog;
use pom_resolver::fbc::parse_documents;

/// How `pomctl` reaches the Catalogs the manager reads (the flags `plan` and `adopt` share).
#[derive(clap::Args, Debug, Clone)]
pub struct CatalogAccess {
    /// Registries to reach over plain HTTP when pulling catalogs and bundles (`host:port`;
    /// repeat or comma-separate), as the manager's `--insecure-registries`.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "POM_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// The manager's namespace: Catalogs are read only from it and from the namespaces its
    /// `platform-operators-catalog-sources` ConfigMap lists, as the manager reads them.
    #[arg(
        long,
        value_name = "NAMESPACE",
        env = "POD_NAMESPACE",
        default_value = "openshift-platform-operators"
    )]
    pub manager_namespace: String,
}

/// Where index images keep their file-based catalog, and the default ConfigMap key (both as
/// the manager reads them).
const IMAGE_PREFIX: &str = "configs/";
const DEFAULT_CONFIG_MAP_KEY: &str = "catalog.json";

/// Most objects of one mirror kind read (one page): their rules together are bounded by
/// `MAX_MIRROR_RULES` anyway, so more objects than that cannot be a usable configuration.
const MAX_MIRROR_OBJECTS: u32 = 10_000;

/// The cluster's image mirror configuration, read once by [`fetch_catalogs`] and used by every
/// pull of this process (the bundle pulls of `plan` come after it): pomctl pulls where the
/// manager pulls.
static MIRRORS: OnceLock<MirrorRules> = OnceLock::new();

/// The cluster's image mirror configuration (ImageDigestMirrorSets, ImageTagMirrorSets,
/// ImageContentSourcePolicies), read once, as the manager's pulls go through it; a kind the
/// cluster does not serve (plain Kubernetes) holds no rules.
///
/// # Errors
/// A kind that cannot be listed, or a configuration the machine-config operator would refuse
/// (pomctl then pulls nothing rather than contact a source the cluster forbids).
pub async fn mirror_rules(client: &Client) -> anyhow::Result<MirrorRules> {
    let digest = list_mirror_objects::<ImageDigestMirrorSet>(client).await?;
    let tag = list_mirror_objects::<ImageTagMirrorSet>(client).await?;
    let policy = list_mirror_objects::<ImageContentSourcePolicy>(client).await?;
    MirrorRules::from_cluster(&digest, &tag, &policy)
        .context("the cluster's image mirror configuration cannot be used")
}

async fn list_mirror_objects<K>(client: &Client) -> anyhow::Result<Vec<K>>
where
    K: kube::Resource<DynamicType = (), Scope = kube::core::ClusterResourceScope>,
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let kind = K::kind(&());
    match Api::<K>::all(client.clone())
        .list(&ListParams::default().limit(MAX_MIRROR_OBJECTS))
        .await
    {
        Ok(list)
            if list
                .metadata
                .continue_
                .as_deref()
                .is_some_and(|c| !c.is_empty()) =>
        {
            anyhow::bail!("the cluster holds more than {MAX_MIRROR_OBJECTS} {kind}s; merge them")
        }
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(err) => Err(err).with_context(|| format!("listing {kind}s")),
    }
}

/// Runs `future` on a small runtime: the CLI is synchronous except for these API calls.
pub fn block_on<F: Future>(future: F) -> anyhow::Result<F::Output> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    Ok(runtime.block_on(future))
}

/// A client from `KUBECONFIG` (or `~/.kube/config`), else the in-cluster service account.
pub async fn client() -> anyhow::Result<Client> {
    // kube and oci-client both use rustls; the process picks one provider.
    let _ = rustls::crypto::ring::default_provider().install_default();
    Client::try_default()
        .await
        .context("connecting to the Kubernetes API (set KUBECONFIG, or run in a pod)")
}

/// Every PlatformOperator, sorted by name.
pub async fn platform_operators(client: &Client) -> anyhow::Result<Vec<PlatformOperator>> {
    let mut pos = Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing PlatformOperators (are POM's CRDs installed?)")?
        .items;
    pos.sort_by_key(ResourceExt::name_any);
    Ok(pos)
}

/// The aggregated ClusterOperator; `None` when it does not exist (or the API is absent, on
/// plain Kubernetes without the OpenShift CRDs).
pub async fn aggregated_cluster_operator(
    client: &Client,
) -> anyhow::Result<Option<ClusterOperator>> {
    match Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
    {
        Ok(co) => Ok(co),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(err).context("reading the aggregated ClusterOperator"),
    }
}

/// A PlatformOperator condition, only when it describes the current generation: a stale
/// condition is not an answer (the same rule the aggregated ClusterOperator applies).
pub fn condition<'a>(po: &'a PlatformOperator, type_: &str) -> Option<&'a Condition> {
    let status = po.status.as_ref()?;
    if status.observed_generation != po.metadata.generation {
        return None;
    }
    status.conditions.iter().find(|c| c.type_ == type_)
}

/// One Catalog and its content, or why the content could not be read.
#[derive(Debug)]
pub struct FetchedCatalog {
    pub name: String,
    pub priority: i32,
    /// What was read: `image <ref>` or `configMap <ns>/<name>:<key>`.
    pub source: String,
    pub content: Result<FbcCatalog, String>,
}

/// Reads every Catalog's content. A catalog that cannot be read is returned with its error,
/// so that only the PlatformOperators depending on it become unplannable.
pub async fn fetch_catalogs(
    client: &Client,
    insecure_registries: &[String],
    manager_namespace: &str,
) -> anyhow::Result<Vec<FetchedCatalog>> {
    let listed = Api::<ConfigMap>::namespaced(client.clone(), manager_namespace)
        .get_opt(SOURCES_CONFIG_MAP)
        .await
        .with_context(|| format!("reading ConfigMap {manager_namespace}/{SOURCES_CONFIG_MAP}"))?;
    let trust = SourceTrust::new(
        manager_namespace,
        listed
            .as_ref()
            .and_then(|cm| cm.data.as_ref())
            .and_then(|data| data.get(LISTED_KEY))
            .map(String::as_str),
    );
    let mut catalogs = Api::<Catalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing Catalogs")?
        .items;
    catalogs.sort_by_key(ResourceExt::name_any);
    let read = mirror_rules(client).await?;
    let mirrors = MIRRORS.get_or_init(|| read);
    let puller = ImagePuller::new(insecure_registries.to_vec());
    let mut fetched = Vec::with_capacity(catalogs.len());
    for catalog in &catalogs {
        let source = &catalog.spec.source;
        // What the manager refuses to read is not read here either.
        let (label, content) = match (&source.image, &source.config_map) {
            _ if let Err(untrusted) = trust.check(source) => {
                ("untrusted".to_owned(), Err(untrusted.to_string()))
            }
            (Some(image), _) => {
                // The digest the manager serves, when it has resolved one.
                let reference = catalog
                    .status
                    .as_ref()
                    .and_then(|s| s.resolved_source.clone())
                    .filter(|r| r.contains("@sha256:"))
                    .unwrap_or_else(|| image.reference.clone());
                let content = fetch_image(&puller, &reference, mirrors).await;
                (format!("image {reference}"), content)
            }
            (None, Some(cm)) => {
                let key = cm.key.as_deref().unwrap_or(DEFAULT_CONFIG_MAP_KEY);
                let content = fetch_config_map(client, &cm.namespace, &cm.name, key).await;
                (
                    format!("configMap {}/{}:{key}", cm.namespace, cm.name),
                    content,
                )
            }
            (None, None) => (
                "none".to_owned(),
                Err("spec.source sets neither image nor configMap".to_owned()),
            ),
        };
        fetched.push(FetchedCatalog {
            name: catalog.name_any(),
            priority: catalog.spec.priority,
            source: label,
            content,
        });
    }
    Ok(fetched)
}

async fn fetch_image(
    puller: &ImagePuller,
    reference: &str,
    mirrors: &MirrorRules,
) -> Result<FbcCatalog, String> {
    let files = puller
        .pull_files(
            reference,
            IMAGE_PREFIX,
            &RegistryAccess::anonymous(),
            mirrors,
        )
        .await
        .map(|pulled| pulled.content)
        .map_err(|e| e.to_string())?;
    let documents: Vec<(String, Vec<u8>)> = files
        .iter()
        .filter(|(path, _)| is_catalog_file(path))
        .map(|(path, data)| (format!("/{IMAGE_PREFIX}{path}"), data.clone()))
        .collect();
    if documents.is_empty() {
        return Err(format!(
            "image {reference} has no .json or .yaml file under /configs"
        ));
    }
    parse_documents(documents).map_err(|e| format!("image {reference}: {e}"))
}

async fn fetch_config_map(
    client: &Client,
    namespace: &str,
    name: &str,
    key: &str,
) -> Result<FbcCatalog, String> {
    let cm = Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| format!("reading ConfigMap {namespace}/{name}: {e}"))?
        .ok_or_else(|| format!("ConfigMap {namespace}/{name} does not exist"))?;
    let text = cm
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .map(|t| t.as_bytes().to_vec());
    let binary = || {
        cm.binary_data
            .as_ref()
            .and_then(|d| d.get(key))
            .map(|b| b.0.clone())
    };
    let bytes = text
        .or_else(binary)
        .ok_or_else(|| format!("ConfigMap {namespace}/{name} has no key {key:?}"))?;
    parse_documents([(format!("configmap/{namespace}/{name}:{key}"), bytes)])
        .map_err(|e| format!("ConfigMap {namespace}/{name}: {e}"))
}

/// The files `opm serve` reads: JSON and YAML, not hidden ones.
fn is_catalog_file(path: &str) -> bool {
    let hidden = path.split('/').any(|part| part.starts_with('.'));
    !hidden && [".json", ".yaml", ".yml"].iter().any(|e| path.ends_with(e))
}

/// The first line of `text`, cut to `max` characters, with a marker when anything was left out
/// (human tables only; JSON and YAML carry the full text).
pub fn short(text: &str, max: usize) -> String {
    let mut lines = text.lines();
    let first = lines.next().unwrap_or_default();
    let more = lines.next().is_some();
    let mut out: String = first.chars().take(max).collect();
    if more || first.chars().count() > max {
        out.push_str(" …");
    }
    out
}

/// A left-aligned table with two spaces between columns.
pub fn table(headers: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = headers.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (i, cell) in row.iter().enumerate() {
            if let Some(w) = widths.get_mut(i) {
                *w = (*w).max(cell.chars().count());
            }
        }
    }
    let mut out = String::new();
    let mut line = |cells: Vec<&str>| {
        let last = cells.len().saturating_sub(1);
        let mut text = String::new();
        for (i, cell) in cells.iter().enumerate() {
            if i == last {
                text.push_str(cell);
            } else {
                let pad = widths[i].saturating_sub(cell.chars().count()) + 2;
                let _ = write!(text, "{cell}{}", " ".repeat(pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(headers.to_vec());
    for row in rows {
        line(row.iter().map(String::as_str).collect());
    }
    out
}

/// A bundle's files, from the objects its catalog carries (`olm.bundle.object`) or its image.
///
/// # Errors
/// The pull's error, as text, when the image cannot be read.
pub async fn bundle_files(
    puller: &ImagePuller,
    bundle: &pom_resolver::fbc::Bundle,
) -> Result<pom_render::BundleFiles, String> {
    if !bundle.properties.objects.is_empty() {
        return Ok(pom_render::BundleFiles::from_objects(
            bundle.properties.objects.clone(),
        ));
    }
    let image = bundle
        .image
        .as_deref()
        .filter(|i| !i.is_empty())
        .ok_or_else(|| format!("bundle {} has neither an image nor objects", bundle.name))?;
    bundle_image_files(puller, image).await
}

/// The files of a bundle image (anonymous pull, as catalogs are read here), through the mirror
/// configuration [`fetch_catalogs`] read.
///
/// # Errors
/// The pull's error, as text.
pub async fn bundle_image_files(
    puller: &ImagePuller,
    image: &str,
) -> Result<pom_render::BundleFiles, String> {
    let mirrors = MIRRORS.get().ok_or_else(|| {
        format!(
            "pulling bundle image {image}: the cluster's image mirror configuration has not been \
             read (pomctl reads it with the catalogs), and nothing is pulled without it"
        )
    })?;
    puller
        .pull_files(image, "", &RegistryAccess::anonymous(), mirrors)
        .await
        .map(|pulled| pom_render::BundleFiles::new(pulled.content))
        .map_err(|e| format!("pulling bundle image {image}: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_and_trim() {
        let text = table(
            &["A", "BB", "C"],
            &[vec!["xxx".into(), "y".into(), "z".into()]],
        );
        assert_eq!(text, "A    BB  C\nxxx  y   z\n");
    }

    #[test]
    fn short_marks_cuts() {
        assert_eq!(short("one\ntwo", 10), "one …");
        assert_eq!(short("abcdef", 3), "abc …");
        assert_eq!(short("abc", 3), "abc");
    }

    #[test]
    fn catalog_files_are_json_or_yaml_and_not_hidden() {
        assert!(is_catalog_file("a/catalog.json"));
        assert!(is_catalog_file("b.yml"));
        assert!(!is_catalog_file(".indexignore"));
        assert!(!is_catalog_file("a/.hidden.json"));
        assert!(!is_catalog_file("README.md"));
    }
}
