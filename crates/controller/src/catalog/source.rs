//! Reading a Catalog's content from its source: an index image (files under `/configs`) or a
//! ConfigMap key. Content that has not changed since it was last served is reused as is.

use std::sync::Arc;

use k8s_openapi::api::core::v1::ConfigMap;
use kube::Api;
use pom_api::catalog::{CatalogSource, ConfigMapSource, ImageSource};
use pom_api::conditions::Reason;
use pom_resolver::fbc::{FbcError, ScopedCatalog, load_path_scoped, parse_documents_scoped};
use sha2::{Digest, Sha256};

use super::access::{self, AccessError};
use super::cache::ServedCatalog;
use crate::Context;
use crate::oci::OciError;

/// Where catalogs keep their file-based catalog inside an index image.
pub(crate) const IMAGE_PREFIX: &str = "configs/";
/// The ConfigMap key read when `spec.source.configMap.key` is not set.
pub(crate) const DEFAULT_CONFIG_MAP_KEY: &str = "catalog.json";

/// Why a Catalog's source could not be served.
#[derive(Debug, thiserror::Error)]
pub enum SourceError {
    /// The image could not be resolved or pulled (the message names the image).
    #[error("{source}")]
    Image {
        reference: String,
        #[source]
        source: OciError,
    },
    /// The pull secret or CA bundle the image source names is unusable.
    #[error(transparent)]
    Access(#[from] AccessError),
    /// The image has no catalog files where index images keep them.
    #[error(
        "image {reference} has no .json or .yaml file under /configs; build the index image \
         with its file-based catalog in /configs (the layout opm produces)"
    )]
    EmptyImage { reference: String },
    /// The ConfigMap does not exist.
    #[error(
        "ConfigMap {namespace}/{name} was not found; create it with the file-based catalog \
         under key {key:?}, or fix spec.source.configMap"
    )]
    ConfigMapNotFound {
        namespace: String,
        name: String,
        key: String,
    },
    /// The ConfigMap exists without the key.
    #[error(
        "ConfigMap {namespace}/{name} has no key {key:?} (it has {available:?}); add the key \
         or set spec.source.configMap.key"
    )]
    ConfigMapKeyMissing {
        namespace: String,
        name: String,
        key: String,
        available: Vec<String>,
    },
    /// Reading the ConfigMap failed (permissions, API server).
    #[error(
        "reading ConfigMap {namespace}/{name}: {source}; check the manager's RBAC for ConfigMaps"
    )]
    ConfigMapRead {
        namespace: String,
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
    /// The content is not a valid file-based catalog (the error names the file).
    #[error("{source_name} holds an invalid file-based catalog: {error}")]
    Invalid {
        source_name: String,
        error: Box<FbcError>,
    },
    /// The spec names no source (only possible if the CRD validation was bypassed).
    #[error("spec.source sets neither image nor configMap; set exactly one")]
    NoSource,
    /// The parse task was interrupted (shutdown).
    #[error("parsing the catalog was interrupted: {0}")]
    Interrupted(String),
}

impl SourceError {
    /// The `Serving=False` condition reason.
    #[must_use]
    pub fn reason(&self) -> Reason {
        match self {
            Self::Image { source, .. } => source.reason(),
            Self::Access(source) => source.reason(),
            Self::EmptyImage { .. } | Self::Invalid { .. } | Self::NoSource => {
                Reason::InvalidCatalog
            }
            Self::ConfigMapNotFound { .. } => Reason::ConfigMapNotFound,
            Self::ConfigMapKeyMissing { .. } => Reason::ConfigMapKeyNotFound,
            Self::ConfigMapRead { .. } | Self::Interrupted(_) => Reason::SourceFailed,
        }
    }

    /// Whether what the Catalog served before may no longer be served: its source is in a
    /// namespace Catalogs may not read from.
    #[must_use]
    pub fn distrusts_content(&self) -> bool {
        matches!(self, Self::Access(AccessError::Untrusted(_)))
    }

    /// Whether to retry with backoff: everything but content that is wrong as published, which
    /// only a new push (seen at the next poll) or a ConfigMap edit (seen by the watch) fixes,
    /// and a namespace the admin has not listed (the list's ConfigMap is watched too).
    #[must_use]
    pub fn retry_with_backoff(&self) -> bool {
        !matches!(
            self,
            Self::EmptyImage { .. }
                | Self::Invalid { .. }
                | Self::NoSource
                | Self::Access(AccessError::Untrusted(_))
        )
    }
}

/// Reads the content `source` names now. `previous` is the content last served for this
/// Catalog: when the source still holds exactly that, it is returned without pulling or parsing.
pub(crate) async fn fetch(
    ctx: &Context,
    source: &CatalogSource,
    previous: Option<Arc<ServedCatalog>>,
) -> Result<Arc<ServedCatalog>, SourceError> {
    // Nothing a Catalog names is read unless its namespace is trusted (issue 22 item 4).
    access::source_trust(ctx)
        .await?
        .check(source)
        .map_err(AccessError::from)?;
    match (&source.image, &source.config_map) {
        (Some(image), _) => fetch_image(ctx, image, previous).await,
        (None, Some(config_map)) => fetch_config_map(ctx, config_map, previous).await,
        (None, None) => Err(SourceError::NoSource),
    }
}

async fn fetch_image(
    ctx: &Context,
    image: &ImageSource,
    previous: Option<Arc<ServedCatalog>>,
) -> Result<Arc<ServedCatalog>, SourceError> {
    let reference = image.reference.clone();
    let image_error = |source| SourceError::Image {
        reference: reference.clone(),
        source,
    };
    let access = access::for_image_source(ctx, image).await?;
    let mirrors = ctx
        .image_mirrors
        .for_pull(&image.reference)
        .await
        .map_err(image_error)?;
    let resolved = ctx
        .images
        .resolve_digest(&image.reference, &access, mirrors.rules())
        .await
        .map(|resolved| resolved.by_digest)
        .map_err(|err| image_error(mirrors.explain(&image.reference, err)))?;
    // The same digest is served as it is, unless its folder went missing (then it is pulled
    // again: packages not held are read back from there).
    let root = &ctx.settings.catalog_content_dir;
    if let Some(previous) = previous.filter(|p| {
        p.resolved_source == resolved
            && ctx
                .images
                .pulled_dir(&resolved, IMAGE_PREFIX, root)
                .is_some()
    }) {
        return Ok(previous);
    }
    let in_use = ctx.catalogs.loading(&resolved);
    // Unpacked to disk, never whole in memory: the parse reads the files, keeps the packages
    // PlatformOperators name, and reads the others back from the folder when they are named.
    // A tag was resolved above (through tag mirrors); the content is read by digest, through
    // digest mirrors, as the nodes pull the by-digest reference POM records.
    let pulled = ctx
        .images
        .pull_to_dir(&resolved, IMAGE_PREFIX, &access, root, mirrors.rules())
        .await
        .map_err(|err| image_error(mirrors.explain(&resolved, err)))?;
    let served_from = pulled
        .content_from
        .as_ref()
        .map(crate::image_mirrors::served_from);
    let dir = pulled.content;
    let scope = ctx.catalogs.wanted_packages();
    let source_name = format!("image {resolved}");
    let content = tokio::task::spawn_blocking(move || {
        if !has_catalog_file(&dir, "") {
            return Ok(None);
        }
        load_path_scoped(&dir, &format!("/{IMAGE_PREFIX}"), scope)
            .map(Some)
            .map_err(Box::new)
    })
    .await
    .map_err(|err| SourceError::Interrupted(err.to_string()))?
    .map_err(|error| SourceError::Invalid { source_name, error })?
    .ok_or(SourceError::EmptyImage { reference })?;
    Ok(Arc::new(
        ServedCatalog::new(
            resolved,
            content,
            jiff::Timestamp::now(),
            ctx.settings.catalog_held_bytes,
        )
        .keeping(in_use)
        .with_served_from(served_from),
    ))
}

async fn fetch_config_map(
    ctx: &Context,
    source: &ConfigMapSource,
    previous: Option<Arc<ServedCatalog>>,
) -> Result<Arc<ServedCatalog>, SourceError> {
    let (namespace, name) = (&source.namespace, &source.name);
    let key = source.key.as_deref().unwrap_or(DEFAULT_CONFIG_MAP_KEY);
    let api: Api<ConfigMap> = Api::namespaced(ctx.client.clone(), namespace);
    let config_map = api
        .get_opt(name)
        .await
        .map_err(|err| SourceError::ConfigMapRead {
            namespace: namespace.clone(),
            name: name.clone(),
            source: Box::new(err),
        })?
        .ok_or_else(|| SourceError::ConfigMapNotFound {
            namespace: namespace.clone(),
            name: name.clone(),
            key: key.to_owned(),
        })?;
    let text = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(key))
        .map(|text| text.as_bytes().to_vec());
    let binary = || {
        config_map
            .binary_data
            .as_ref()
            .and_then(|data| data.get(key))
            .map(|bytes| bytes.0.clone())
    };
    let Some(bytes) = text.or_else(binary) else {
        let mut available: Vec<String> = config_map
            .data
            .iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .collect();
        available.extend(
            config_map
                .binary_data
                .iter()
                .flatten()
                .map(|(k, _)| k.clone()),
        );
        available.sort();
        return Err(SourceError::ConfigMapKeyMissing {
            namespace: namespace.clone(),
            name: name.clone(),
            key: key.to_owned(),
            available,
        });
    };
    // The content's digest, not the resourceVersion: edits to other keys change nothing, and
    // the value is stable across manager restarts.
    let resolved = format!(
        "configmap/{namespace}/{name}/{key}@sha256:{}",
        hex::encode(Sha256::digest(&bytes))
    );
    if let Some(previous) = previous.filter(|p| p.resolved_source == resolved) {
        return Ok(previous);
    }
    let label = format!("configmap/{namespace}/{name}:{key}");
    let content = parse(
        ctx,
        format!("ConfigMap {namespace}/{name}"),
        vec![(label, bytes)],
    )
    .await?;
    Ok(Arc::new(ServedCatalog::new(
        resolved,
        content,
        jiff::Timestamp::now(),
        ctx.settings.catalog_held_bytes,
    )))
}

/// Parses off the async threads (real catalogs are tens of megabytes), keeping whole only the
/// packages PlatformOperators name now (the others are read back when named).
async fn parse(
    ctx: &Context,
    source_name: String,
    documents: Vec<(String, Vec<u8>)>,
) -> Result<ScopedCatalog, SourceError> {
    let scope = ctx.catalogs.wanted_packages();
    tokio::task::spawn_blocking(move || parse_documents_scoped(documents, scope).map_err(Box::new))
        .await
        .map_err(|err| SourceError::Interrupted(err.to_string()))?
        .map_err(|error| SourceError::Invalid { source_name, error })
}

/// Whether the folder holds a file [`is_catalog_file`] accepts (`relative` is its path so far).
fn has_catalog_file(dir: &std::path::Path, relative: &str) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|entry| {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = if relative.is_empty() {
            name
        } else {
            format!("{relative}/{name}")
        };
        match entry.file_type() {
            Ok(kind) if kind.is_dir() => has_catalog_file(&entry.path(), &path),
            Ok(_) => is_catalog_file(&path),
            Err(_) => false,
        }
    })
}

/// The files opm's `serve` reads: JSON and YAML, not hidden ones (`.indexignore`, editor files).
fn is_catalog_file(path: &str) -> bool {
    let hidden = path.split('/').any(|part| part.starts_with('.'));
    let catalog = [".json", ".yaml", ".yml"]
        .iter()
        .any(|ext| path.ends_with(ext));
    catalog && !hidden
}
