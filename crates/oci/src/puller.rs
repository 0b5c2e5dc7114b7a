//! [`ImagePuller`]: tag → digest resolution and by-digest pulls of the files under a folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256, Sha512};

use super::auth::{ChosenCredential, RegistryAccess};
use super::cache::{FileCache, Files};
use super::disk::{DiskStorage, Staging, content_dir_name, remove_leftovers};
use super::error::{CredentialsTried, LayerError, OciError};
use super::layers::{COPY_BUFFER_BYTES, DEFAULT_MAX_BYTES, LayerFormat, LayerStack};
use super::mirrors::{MirrorRules, PullSource};
use super::network::PullNetwork;
use super::reference::parse_reference;

/// Bytes of pulled (image, prefix) content kept in memory (twice the per-image limit, so the
/// catalog in use and the bundle being moved to always fit).
pub const MAX_CACHE_BYTES: u64 = 2 * DEFAULT_MAX_BYTES;

/// Most registry clients kept (one per CA bundle, registry and credential in use); past it the
/// cache is emptied and clients are rebuilt as needed (tokens are fetched again).
pub const MAX_CLIENTS: usize = 64;

/// What a registry client is built for. The registry client remembers the first credential it
/// is given per registry (and tokens per repository), so a client is never shared between
/// credentials; extra roots and proxies are fixed when it is built, so neither between CA
/// bundles, trusted CA bundles or proxy settings (digests: a proxy URL may hold a password).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    ca_bundle: Option<[u8; 32]>,
    registry: String,
    credential: Option<[u8; 32]>,
    proxy: Option<[u8; 32]>,
    trusted_ca: Option<[u8; 32]>,
}

/// A reference resolved to a digest, and which location answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    /// `registry/repository@<digest>`, named by the reference's own registry and repository
    /// (never the mirror's): what content is cached, stored and compared by.
    pub by_digest: String,
    /// The location that resolved the tag (a mirror or the reference's own registry); `None`
    /// when the reference already named a digest and nothing was contacted.
    pub resolved_by: Option<PullSource>,
}

/// Pulled content, and which locations served it.
#[derive(Debug, Clone)]
pub struct Pulled<T> {
    /// The files (in memory) or the content folder (on disk).
    pub content: T,
    /// As [`Resolved::by_digest`].
    pub by_digest: String,
    /// As [`Resolved::resolved_by`].
    pub resolved_by: Option<PullSource>,
    /// The location the content was read from; `None` when it was already at hand (cached in
    /// memory for [`ImagePuller::pull_files`], its folder on disk for
    /// [`ImagePuller::pull_to_dir`]) and no location was asked for it.
    pub content_from: Option<PullSource>,
}

/// What [`ImagePuller::resolve_now`] found.
struct Resolution {
    by_digest: String,
    digest: String,
    resolved_by: Option<PullSource>,
    content: ContentSources,
}

/// Where the content of a resolved reference may be read.
enum ContentSources {
    /// The locations after tag resolution: the one that answered, then those after it.
    Listed(Vec<PullSource>),
    /// A reference by digest: its digest sources, planned when content is needed.
    ByDigest(Reference),
}

impl Resolution {
    fn pulled<T>(self, content: T, content_from: Option<PullSource>) -> Pulled<T> {
        Pulled {
            content,
            by_digest: self.by_digest,
            resolved_by: self.resolved_by,
            content_from,
        }
    }
}

/// A pull from one location that failed, with the extraction slot when no extraction holds
/// it any more (then the next location may use it).
struct Failed {
    error: OciError,
    slot: Option<ExtractionSlot>,
}

impl Failed {
    fn with_slot(error: OciError, slot: ExtractionSlot) -> Self {
        Self {
            error,
            slot: Some(slot),
        }
    }

    fn without_slot(error: OciError) -> Self {
        Self { error, slot: None }
    }
}

/// Where [`ImagePuller::dir_from`] publishes: the content folder `name` under `root`, for
/// the by-digest reference `digest_ref` and `prefix`; and whether a location follows.
#[derive(Clone, Copy)]
struct ContentDir<'a> {
    digest_ref: &'a str,
    prefix: &'a str,
    root: &'a Path,
    name: &'a str,
    /// Whether another location may be asked if this one fails.
    more: bool,
}

/// Pulls catalog and bundle images, always by digest, with the credentials and CA bundle of
/// each pull ([`RegistryAccess`]), and keeps recent content in memory so that reconciles of
/// unchanged images cost one manifest `HEAD` at most. Content is cached by digest whatever
/// credential fetched it: a digest names the same bytes for everyone.
pub struct ImagePuller {
    insecure_registries: Vec<String>,
    /// Built on first use: building an HTTPS client needs the process-wide rustls provider,
    /// which `main` installs after the context may have been created.
    clients: Mutex<HashMap<ClientKey, Arc<Client>>>,
    /// The cluster's proxy and trusted CA bundle, replaced when the cluster's settings change
    /// ([`Self::set_network`]); each pull reads it once, when it picks its client.
    network: RwLock<Arc<PullNetwork>>,
    cache: FileCache,
    max_bytes: u64,
    /// One lock per (image, prefix) being extracted, held by the extraction itself (moved into
    /// its blocking task), so a retry after a deadline waits for the stale extraction to see
    /// its cancellation and stop instead of running beside it. Only locks in use are kept.
    extractions: Mutex<HashMap<(String, String), ExtractionLock>>,
}

impl std::fmt::Debug for ImagePuller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ImagePuller")
            .field("insecure_registries", &self.insecure_registries)
            .field("max_bytes", &self.max_bytes)
            .finish_non_exhaustive()
    }
}

impl ImagePuller {
    /// A puller that reaches the registries in `insecure_registries` (`host:port`, as written
    /// in image references) over plain HTTP and every other registry over HTTPS.
    #[must_use]
    pub fn new(insecure_registries: Vec<String>) -> Self {
        Self {
            insecure_registries,
            clients: Mutex::new(HashMap::new()),
            network: RwLock::new(Arc::default()),
            cache: FileCache::new(MAX_CACHE_BYTES),
            max_bytes: DEFAULT_MAX_BYTES,
            extractions: Mutex::new(HashMap::new()),
        }
    }

    /// Pulls from now on go through `network` (the cluster's proxy and trusted CA bundle);
    /// returns whether it differs from the settings in force. Clients built for the old
    /// settings are dropped; pulls already running finish with them.
    pub fn set_network(&self, network: PullNetwork) -> bool {
        {
            let mut current = self.network.write().unwrap_or_else(PoisonError::into_inner);
            if **current == network {
                return false;
            }
            *current = Arc::new(network);
        }
        self.clients
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        true
    }

    /// The proxy and trusted CA bundle pulls go through now.
    #[must_use]
    pub fn network(&self) -> Arc<PullNetwork> {
        self.network
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Waits until no other extraction of `reference` and `prefix` runs (a stale one, whose
    /// pull was dropped at its deadline, stops within milliseconds of its cancellation), and
    /// returns the lock that keeps it so: move it to wherever the extraction runs.
    async fn extraction_slot(&self, reference: &str, prefix: &str) -> ExtractionSlot {
        let lock = {
            let mut slots = self
                .extractions
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            slots.retain(|_, lock| Arc::strong_count(lock) > 1);
            slots
                .entry((reference.to_owned(), prefix.to_owned()))
                .or_default()
                .clone()
        };
        lock.lock_owned().await
    }

    /// Resolves `reference` to the by-digest reference `registry/repository@sha256:...` of what
    /// it names now. A reference that already carries a digest is returned in that form
    /// without contacting any registry.
    ///
    /// A tag is resolved through `mirrors` as a pull by tag is on the cluster's nodes
    /// ([`crate::mirrors`]): its tag mirrors in order, then its own registry unless a rule
    /// forbids it; a location that is unreachable, refuses access, does not have the tag or
    /// answers with an error passes the question to the next one. The by-digest reference is
    /// always named by `reference`'s own registry and repository (content is cached and
    /// compared by it); [`Resolved::resolved_by`] says which location answered.
    ///
    /// # Errors
    /// An invalid reference, no location that may be contacted, or the last location's error
    /// (unreachable, refusing access, not having the image), with the earlier ones in its
    /// detail.
    pub async fn resolve_digest(
        &self,
        reference: &str,
        access: &RegistryAccess,
        mirrors: &MirrorRules,
    ) -> Result<Resolved, OciError> {
        with_deadline(reference, async {
            self.resolve_now(reference, access, mirrors)
                .await
                .map(|resolution| Resolved {
                    by_digest: resolution.by_digest,
                    resolved_by: resolution.resolved_by,
                })
        })
        .await
    }

    async fn resolve_now(
        &self,
        reference: &str,
        access: &RegistryAccess,
        mirrors: &MirrorRules,
    ) -> Result<Resolution, OciError> {
        let parsed = parse(reference)?;
        if let Some(digest) = parsed.digest() {
            return Ok(Resolution {
                by_digest: by_digest(&parsed, digest),
                digest: digest.to_owned(),
                resolved_by: None,
                content: ContentSources::ByDigest(parsed.clone()),
            });
        }
        let sources = planned_sources(mirrors, &parsed, reference)?;
        let mut earlier = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            let more = index + 1 < sources.len();
            match self.digest_at(source, reference, access, more).await {
                Ok(digest) => {
                    return Ok(Resolution {
                        by_digest: by_digest(&parsed, &digest),
                        digest,
                        resolved_by: Some(source.clone()),
                        content: ContentSources::Listed(
                            sources.get(index..).unwrap_or_default().to_vec(),
                        ),
                    });
                }
                Err(err) if more && falls_back(&err) => {
                    tracing::debug!(location = %source, error = %err, "resolving a tag failed there; trying the next location");
                    earlier.push((source.clone(), err));
                }
                Err(err) => return Err(with_earlier_attempts(err, &earlier)),
            }
        }
        Err(no_location(reference))
    }

    /// The digest `source` gives for its tag. When more locations remain the question is not
    /// retried here: the next location is asked at once (as containers/image does).
    async fn digest_at(
        &self,
        source: &PullSource,
        reference: &str,
        access: &RegistryAccess,
        more: bool,
    ) -> Result<String, OciError> {
        let physical = parse(&source.reference)?;
        // Errors about the source itself name the reference as the caller wrote it.
        let shown = if source.is_mirror() {
            source.reference.as_str()
        } else {
            reference
        };
        let (client, auth, chosen) = self.client_for(&physical, access)?;
        (|| async {
            client
                .fetch_manifest_digest(&physical, &auth)
                .await
                .map_err(|err| classify(shown, &physical, access, chosen.as_ref(), err))
        })
        .retry(if more { no_retry() } else { retry_policy() })
        .when(OciError::is_transient)
        .await
    }

    /// Where the content of `resolution` may come from, in order: for a resolved tag, the
    /// location that answered and those after it (a pull by tag reads the blobs where it read
    /// the manifest); for a reference by digest, its digest sources.
    fn content_sources(
        resolution: &Resolution,
        mirrors: &MirrorRules,
        reference: &str,
    ) -> Result<Vec<PullSource>, OciError> {
        match &resolution.content {
            ContentSources::Listed(sources) => Ok(sources.clone()),
            ContentSources::ByDigest(parsed) => planned_sources(mirrors, parsed, reference),
        }
    }

    /// Pulls `reference` by digest and returns its regular files under `prefix` (for example
    /// `configs/` for a catalog, `""` for a bundle), keyed by path with the prefix removed.
    /// Layers are applied in order with whiteouts; the result is cached by digest.
    ///
    /// Through `mirrors` as [`Self::resolve_digest`]: a tag is resolved, then its content read
    /// from the location that answered (the next ones after it if that fails); a digest is
    /// read from its digest mirrors in order, then its own registry unless forbidden. A
    /// location that fails (unreachable, refused, missing the manifest or a blob, a registry
    /// error, bytes that do not match their digest) passes the pull to the next; the
    /// manifest and every blob are checked against their digests whoever serves them.
    ///
    /// # Errors
    /// Registry errors as for [`Self::resolve_digest`]; a layer POM cannot read, a path
    /// escaping the root, or content above the size limit.
    pub async fn pull_files(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
        mirrors: &MirrorRules,
    ) -> Result<Pulled<Files>, OciError> {
        with_deadline(
            reference,
            self.pull_files_now(reference, prefix, access, mirrors),
        )
        .await
    }

    async fn pull_files_now(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
        mirrors: &MirrorRules,
    ) -> Result<Pulled<Files>, OciError> {
        let resolution = self.resolve_now(reference, access, mirrors).await?;
        let digest_ref = resolution.by_digest.clone();
        if let Some(files) = self.cache.get(&digest_ref, prefix) {
            return Ok(resolution.pulled(files, None));
        }
        let cancel = CancelOnDrop::default();
        let mut slot = self.extraction_slot(&digest_ref, prefix).await;
        if let Some(files) = self.cache.get(&digest_ref, prefix) {
            return Ok(resolution.pulled(files, None));
        }
        let sources = Self::content_sources(&resolution, mirrors, reference)?;
        let mut earlier = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            let more = index + 1 < sources.len();
            let pulled = self
                .files_from(
                    source,
                    &resolution.digest,
                    prefix,
                    access,
                    &cancel,
                    slot,
                    more,
                )
                .await;
            match pulled {
                Ok(files) => {
                    self.cache.insert(&digest_ref, prefix, files.clone());
                    let from = source.clone();
                    return Ok(resolution.pulled(files, Some(from)));
                }
                Err(Failed {
                    error,
                    slot: Some(back),
                }) if more && falls_back(&error) => {
                    tracing::debug!(location = %source, error = %error, "pulling failed there; trying the next location");
                    earlier.push((source.clone(), error));
                    slot = back;
                }
                Err(Failed { error, .. }) => return Err(with_earlier_attempts(error, &earlier)),
            }
        }
        Err(no_location(reference))
    }

    /// The files under `prefix` of the image `digest` at `source` (`more`: another location
    /// follows). On a failure the extraction slot comes back when no extraction holds it any
    /// more, so the next location can use it.
    #[allow(clippy::too_many_arguments)]
    async fn files_from(
        &self,
        source: &PullSource,
        digest: &str,
        prefix: &str,
        access: &RegistryAccess,
        cancel: &CancelOnDrop,
        slot: ExtractionSlot,
        more: bool,
    ) -> Result<Files, Failed> {
        let (parsed, digest_ref) = match physical_by_digest(source, digest) {
            Ok(physical) => physical,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let (client, auth, chosen) = match self.client_for(&parsed, access) {
            Ok(client) => client,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let client = client.as_ref();
        let plan = match self
            .layer_plan(
                client,
                &parsed,
                &digest_ref,
                &auth,
                access,
                chosen.as_ref(),
                if more { no_retry() } else { retry_policy() },
            )
            .await
        {
            Ok(plan) => plan,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let mut held = (
            LayerStack::new(prefix, self.max_bytes).with_cancel(cancel.flag()),
            slot,
        );
        for (layer, format) in &plan {
            let (layer, format) = (layer, *format);
            let blob =
                (|| self.pull_blob(client, &parsed, &digest_ref, layer, access, chosen.as_ref()))
                    .retry(retry_policy())
                    .when(OciError::is_transient)
                    .await;
            let blob = match blob {
                Ok(blob) => blob,
                Err(error) => return Err(Failed::with_slot(error, held.1)),
            };
            let reference = digest_ref.clone();
            let descriptor = layer.clone();
            held = tokio::task::spawn_blocking(move || {
                let (mut stack, slot) = held;
                stack
                    .apply(format, &blob)
                    .map(|()| (stack, slot))
                    .map_err(|source| layer_error(&reference, &descriptor, source))
            })
            .await
            .map_err(|err| {
                Failed::without_slot(OciError::Interrupted {
                    reference: digest_ref.clone(),
                    detail: err.to_string(),
                })
            })?
            .map_err(Failed::without_slot)?;
        }
        Ok(Arc::new(held.0.into_files()))
    }

    /// The layers of the by-digest image `parsed`, each with its format, from its manifest;
    /// refuses unreadable or oversized layers before anything is downloaded. The manifest is
    /// fetched with `retry` ([`no_retry`] when another location may be asked instead).
    #[allow(clippy::too_many_arguments)]
    async fn layer_plan(
        &self,
        client: &Client,
        parsed: &Reference,
        digest_ref: &str,
        auth: &RegistryAuth,
        access: &RegistryAccess,
        chosen: Option<&Chosen>,
        retry: ExponentialBuilder,
    ) -> Result<Vec<(OciDescriptor, LayerFormat)>, OciError> {
        let manifest = (|| async {
            client
                .pull_image_manifest(parsed, auth)
                .await
                .map_err(|err| classify(digest_ref, parsed, access, chosen, err))
        })
        .retry(retry)
        .when(OciError::is_transient)
        .await?
        .0;
        let mut plan = Vec::with_capacity(manifest.layers.len());
        for layer in manifest.layers {
            let format = LayerFormat::from_media_type(&layer.media_type)
                .map_err(|source| layer_error(digest_ref, &layer, source))?;
            let size = u64::try_from(layer.size).unwrap_or(0);
            if size > self.max_bytes {
                return Err(OciError::TooLarge {
                    reference: digest_ref.to_owned(),
                    what: format!("layer {}", layer.digest),
                    size,
                    limit: self.max_bytes,
                });
            }
            plan.push((layer, format));
        }
        Ok(plan)
    }

    /// Pulls `reference` by digest and writes its regular files under `prefix` (for example
    /// `configs/`) into a content folder under `root`, returning that folder: `root/sha256-<hex>`
    /// for the prefix `""`, `root/sha256-<hex>_<prefix>` otherwise (layout in [`crate::disk`]).
    /// The files are those [`Self::pull_files`] returns for the same image and prefix, at their
    /// path with the prefix removed; locations are tried through `mirrors` as there.
    ///
    /// For catalogs, whose images are too big to hold in memory (issue 10): each layer blob is
    /// streamed to a file (size and digest checked while it arrives), then applied from that
    /// file with the same rules and limits as in memory, writing kept files straight to disk.
    /// Memory use is a few fixed buffers whatever the image size (plus the path and size of
    /// each kept file, at most [`crate::layers::MAX_LAYER_ENTRIES`] of them).
    ///
    /// Content addressed by digest never changes: when the folder exists it is returned at
    /// once (after resolving a tag, without any request for a by-digest reference). It is built
    /// in a staging folder under `root` and renamed into place only when complete and synced,
    /// so it survives crashes and restarts; leftovers of crashed pulls are removed here. A
    /// location that fails part-way leaves nothing: the next one starts a fresh staging folder.
    /// `root` (created if missing) must be a folder POM owns, on one file system.
    ///
    /// # Errors
    /// As [`Self::pull_files`], and [`OciError::Storage`] (or [`LayerError::Storage`] within
    /// [`OciError::Layer`]) when `root` cannot be written; those are transient.
    pub async fn pull_to_dir(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
        root: &Path,
        mirrors: &MirrorRules,
    ) -> Result<Pulled<PathBuf>, OciError> {
        with_deadline(
            reference,
            self.pull_to_dir_now(reference, prefix, access, root, mirrors),
        )
        .await
    }

    /// The content folder [`Self::pull_to_dir`] made for `reference` and `prefix` under
    /// `root`, when `reference` names a digest and the folder exists: what a pull would
    /// return, without credentials or network (content on disk outlives a broken pull secret).
    #[must_use]
    pub fn pulled_dir(&self, reference: &str, prefix: &str, root: &Path) -> Option<PathBuf> {
        let parsed = parse(reference).ok()?;
        let name = content_dir_name(parsed.digest()?, prefix)?;
        let dir = root.join(name);
        dir.is_dir().then_some(dir)
    }

    async fn pull_to_dir_now(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
        root: &Path,
        mirrors: &MirrorRules,
    ) -> Result<Pulled<PathBuf>, OciError> {
        let resolution = self.resolve_now(reference, access, mirrors).await?;
        let digest_ref = resolution.by_digest.clone();
        let digest = resolution.digest.as_str();
        let name = content_dir_name(digest, prefix).ok_or_else(|| OciError::InvalidReference {
            reference: digest_ref.clone(),
            reason: format!(
                "digest {digest:?} is not <algorithm>:<lowercase hex>, which POM needs to \
                     name its content folder"
            ),
        })?;
        let target = root.join(&name);
        if target.is_dir() {
            return Ok(resolution.pulled(target, None));
        }
        let cancel = CancelOnDrop::default();
        let mut slot = self.extraction_slot(&digest_ref, prefix).await;
        if target.is_dir() {
            return Ok(resolution.pulled(target, None));
        }
        let root_dir = root.to_owned();
        blocking(&digest_ref, move || {
            std::fs::create_dir_all(&root_dir).map_err(|err| LayerError::Storage {
                path: root_dir.display().to_string(),
                action: "create the folder",
                reason: err.to_string(),
            })?;
            remove_leftovers(&root_dir);
            Ok(())
        })
        .await?
        .map_err(|source| OciError::Storage {
            reference: digest_ref.clone(),
            source,
        })?;
        let sources = Self::content_sources(&resolution, mirrors, reference)?;
        let mut earlier = Vec::new();
        for (index, source) in sources.iter().enumerate() {
            let more = index + 1 < sources.len();
            let into = ContentDir {
                digest_ref: &digest_ref,
                prefix,
                root,
                name: &name,
                more,
            };
            let pulled = self
                .dir_from(source, digest, into, access, &cancel, slot)
                .await;
            match pulled {
                Ok(dir) => {
                    let from = source.clone();
                    return Ok(resolution.pulled(dir, Some(from)));
                }
                Err(Failed {
                    error,
                    slot: Some(back),
                }) if more && falls_back(&error) => {
                    tracing::debug!(location = %source, error = %error, "pulling failed there; trying the next location");
                    earlier.push((source.clone(), error));
                    slot = back;
                }
                Err(Failed { error, .. }) => return Err(with_earlier_attempts(error, &earlier)),
            }
        }
        Err(no_location(reference))
    }

    /// The content folder of the image `digest` at `source`, built in a fresh staging folder
    /// and published as `into.name` under `into.root`. On a failure the extraction slot comes
    /// back when no extraction holds it any more, so the next location can use it.
    async fn dir_from(
        &self,
        source: &PullSource,
        digest: &str,
        into: ContentDir<'_>,
        access: &RegistryAccess,
        cancel: &CancelOnDrop,
        slot: ExtractionSlot,
    ) -> Result<PathBuf, Failed> {
        let digest_ref = into.digest_ref;
        let storage_error = |source| OciError::Storage {
            reference: digest_ref.to_owned(),
            source,
        };
        let (parsed, physical_ref) = match physical_by_digest(source, digest) {
            Ok(physical) => physical,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let (root_dir, staging_name) = (into.root.to_owned(), into.name.to_owned());
        let staging = blocking(digest_ref, move || {
            let staging = Staging::create(&root_dir, &staging_name)?;
            let storage = DiskStorage::new(&staging.tree())?;
            Ok((staging, storage))
        })
        .await
        .and_then(|created| created.map_err(storage_error));
        let (staging, storage) = match staging {
            Ok(created) => created,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let (client, auth, chosen) = match self.client_for(&parsed, access) {
            Ok(client) => client,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let client = client.as_ref();
        let plan = match self
            .layer_plan(
                client,
                &parsed,
                &physical_ref,
                &auth,
                access,
                chosen.as_ref(),
                if into.more {
                    no_retry()
                } else {
                    retry_policy()
                },
            )
            .await
        {
            Ok(plan) => plan,
            Err(error) => return Err(Failed::with_slot(error, slot)),
        };
        let blob = staging.blob();
        let mut pull = (
            staging,
            LayerStack::with_storage(into.prefix, self.max_bytes, storage)
                .with_cancel(cancel.flag()),
            slot,
        );
        for (layer, format) in &plan {
            let format = *format;
            let downloaded = (|| {
                self.download_blob(
                    client,
                    &parsed,
                    &physical_ref,
                    layer,
                    access,
                    chosen.as_ref(),
                    &blob,
                )
            })
            .retry(retry_policy())
            .when(OciError::is_transient)
            .await;
            if let Err(error) = downloaded {
                let (staging, _stack, slot) = pull;
                drop(staging);
                return Err(Failed::with_slot(error, slot));
            }
            let (blob, descriptor) = (blob.clone(), layer.clone());
            pull = blocking(digest_ref, move || {
                let (staging, mut stack, slot) = pull;
                let file = std::fs::File::open(&blob).map_err(|err| LayerError::Storage {
                    path: blob.display().to_string(),
                    action: "open",
                    reason: err.to_string(),
                })?;
                let reader = std::io::BufReader::with_capacity(COPY_BUFFER_BYTES, file);
                stack.apply_reader(format, reader)?;
                Ok((staging, stack, slot))
            })
            .await
            .map_err(Failed::without_slot)?
            .map_err(|source| {
                Failed::without_slot(layer_error(&physical_ref, &descriptor, source))
            })?;
        }
        let (root_dir, name) = (into.root.to_owned(), into.name.to_owned());
        blocking(digest_ref, move || {
            let (staging, stack, _slot) = pull;
            let (storage, index) = stack.into_parts();
            staging.publish(&storage, index.keys().map(String::as_str), &root_dir, &name)
        })
        .await
        .map_err(Failed::without_slot)?
        .map_err(|source| Failed::without_slot(storage_error(source)))
    }

    /// Streams one blob into the file `path` (replacing it), refusing more bytes than its
    /// descriptor declares and checking its digest as the bytes arrive: only the chunk in
    /// flight is in memory.
    #[allow(clippy::too_many_arguments)]
    async fn download_blob(
        &self,
        client: &Client,
        image: &Reference,
        digest_ref: &str,
        layer: &OciDescriptor,
        access: &RegistryAccess,
        chosen: Option<&Chosen>,
        path: &Path,
    ) -> Result<(), OciError> {
        use tokio::io::AsyncWriteExt;
        let registry_error = |detail: String| OciError::Registry {
            reference: digest_ref.to_owned(),
            detail,
        };
        let declared = u64::try_from(layer.size).map_err(|_| {
            registry_error(format!(
                "the manifest gives layer {} the size {}",
                layer.digest, layer.size
            ))
        })?;
        let mut hasher = BlobHasher::for_digest(&layer.digest).ok_or_else(|| {
            registry_error(format!(
                "layer {} has a digest POM cannot verify (sha256 or sha512 only)",
                layer.digest
            ))
        })?;
        let write_error = |err: std::io::Error| {
            layer_error(
                digest_ref,
                layer,
                LayerError::Storage {
                    path: path.display().to_string(),
                    action: "write",
                    reason: err.to_string(),
                },
            )
        };
        let mut stream = client
            .pull_blob_stream(image, layer)
            .await
            .map_err(|err| classify(digest_ref, image, access, chosen, err))?;
        let mut file = tokio::fs::File::create(path).await.map_err(write_error)?;
        let mut received: u64 = 0;
        while let Some(chunk) = stream.next().await {
            let chunk = chunk
                .map_err(|err| registry_error(format!("reading layer {}: {err}", layer.digest)))?;
            received = received.saturating_add(chunk.len() as u64);
            if received > declared {
                return Err(registry_error(format!(
                    "layer {} sent more than the {declared} bytes its descriptor declares",
                    layer.digest
                )));
            }
            hasher.update(&chunk);
            file.write_all(&chunk).await.map_err(write_error)?;
        }
        file.flush().await.map_err(write_error)?;
        if received != declared {
            return Err(registry_error(format!(
                "layer {} arrived with {received} bytes, its descriptor declares {declared}",
                layer.digest
            )));
        }
        let actual = hasher.finish();
        if actual != layer.digest {
            return Err(registry_error(format!(
                "layer {} arrived with digest {actual}",
                layer.digest
            )));
        }
        Ok(())
    }

    /// The files of `reference` under `prefix` when `reference` names a digest and they are
    /// cached: what a pull would return, without credentials or network. A bundle already
    /// running is re-applied from here even while its catalog's pull secret is broken.
    /// Returns the by-digest reference (as [`Self::resolve_digest`] gives it) with the files.
    #[must_use]
    pub fn cached_files(&self, reference: &str, prefix: &str) -> Option<(String, Files)> {
        let parsed = parse(reference).ok()?;
        let digest_ref = by_digest(&parsed, parsed.digest()?);
        let files = self.cache.get(&digest_ref, prefix)?;
        Some((digest_ref, files))
    }

    /// Downloads one blob, refusing more bytes than the limit and checking its sha256 digest.
    async fn pull_blob(
        &self,
        client: &Client,
        image: &Reference,
        digest_ref: &str,
        layer: &OciDescriptor,
        access: &RegistryAccess,
        chosen: Option<&Chosen>,
    ) -> Result<Vec<u8>, OciError> {
        let mut stream = client
            .pull_blob_stream(image, layer)
            .await
            .map_err(|err| classify(digest_ref, image, access, chosen, err))?;
        let mut blob = Vec::with_capacity(usize::try_from(layer.size).unwrap_or(0));
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|err| OciError::Registry {
                reference: digest_ref.to_owned(),
                detail: format!("reading layer {}: {err}", layer.digest),
            })?;
            if (blob.len() + chunk.len()) as u64 > self.max_bytes {
                return Err(OciError::TooLarge {
                    reference: digest_ref.to_owned(),
                    what: format!("layer {}", layer.digest),
                    size: (blob.len() + chunk.len()) as u64,
                    limit: self.max_bytes,
                });
            }
            blob.extend_from_slice(&chunk);
        }
        if let Some(expected) = layer.digest.strip_prefix("sha256:") {
            let actual = hex::encode(Sha256::digest(&blob));
            if actual != expected {
                return Err(OciError::Registry {
                    reference: digest_ref.to_owned(),
                    detail: format!("layer {} arrived with digest sha256:{actual}", layer.digest),
                });
            }
        }
        Ok(blob)
    }

    /// The client, credential and its origin for pulling `image` with `access`: a cached
    /// client when one was built for the same CA bundle, registry and credential.
    fn client_for(
        &self,
        image: &Reference,
        access: &RegistryAccess,
    ) -> Result<(Arc<Client>, RegistryAuth, Option<Chosen>), OciError> {
        let chosen = access
            .credential_for(image.registry(), image.repository())
            .map(Chosen::from);
        let network = self.network();
        let key = ClientKey {
            ca_bundle: access.ca_bundle().map(|b| b.digest()),
            registry: image.resolve_registry().to_owned(),
            credential: chosen.as_ref().map(|c| c.credential.fingerprint()),
            proxy: network.proxy.as_ref().map(|p| p.digest()),
            trusted_ca: network.trusted_ca.as_ref().map(|t| t.digest()),
        };
        let auth = chosen
            .as_ref()
            .map_or(RegistryAuth::Anonymous, |c| c.credential.registry_auth());
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(client) = clients.get(&key) {
            return Ok((client.clone(), auth, chosen));
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(OciError::NoCryptoProvider);
        }
        // The Catalog's own CA bundle and the cluster's trusted one.
        let extra_root_certificates = access
            .ca_bundle()
            .map(|bundle| bundle.certificates())
            .unwrap_or_default()
            .iter()
            .chain(
                network
                    .trusted_ca
                    .as_ref()
                    .map(|trusted| trusted.anchors())
                    .unwrap_or_default(),
            )
            .map(|der| Certificate {
                encoding: CertificateEncoding::Der,
                data: der.clone(),
            })
            .collect();
        let secure = !self.insecure_registries.iter().any(|r| r == &key.registry);
        let proxy = network
            .proxy
            .as_ref()
            .map(|p| p.client_settings(&key.registry, secure))
            .unwrap_or_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.insecure_registries.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            extra_root_certificates,
            http_proxy: proxy.http_proxy,
            https_proxy: proxy.https_proxy,
            no_proxy: proxy.no_proxy,
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|err| match access.ca_bundle() {
            Some(bundle) => OciError::InvalidCaBundle {
                ca_bundle: Box::new(bundle.origin().clone()),
                detail: chain(&err),
            },
            None => OciError::Registry {
                reference: String::new(),
                detail: format!("building the registry client: {err}"),
            },
        })?;
        if clients.len() >= MAX_CLIENTS {
            clients.clear();
        }
        let client = Arc::new(client);
        clients.insert(key, client.clone());
        Ok((client, auth, chosen))
    }
}

/// The credential a pull sends and where it came from (owned, so that error classification in
/// retried closures does not borrow the access).
#[derive(Clone)]
struct Chosen {
    credential: crate::auth::Credential,
    origin: crate::auth::SecretName,
}

impl From<ChosenCredential<'_>> for Chosen {
    fn from(chosen: ChosenCredential<'_>) -> Self {
        Self {
            credential: chosen.credential.clone(),
            origin: chosen.origin.clone(),
        }
    }
}

/// The lock of one (image, prefix) extraction ([`ImagePuller::extraction_slot`]).
type ExtractionLock = Arc<tokio::sync::Mutex<()>>;
/// An extraction's hold on its lock.
type ExtractionSlot = tokio::sync::OwnedMutexGuard<()>;

/// Cancels the extraction of a pull when the pull is dropped (its deadline passed, or its
/// caller gave up): extraction runs on a blocking thread that dropping the future cannot stop,
/// so it is told through this flag, which it reads before every entry and every read.
#[derive(Debug, Default)]
struct CancelOnDrop(Arc<AtomicBool>);

impl CancelOnDrop {
    fn flag(&self) -> Arc<AtomicBool> {
        self.0.clone()
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// A couple of quick retries for network hiccups; longer outages are the reconciler's backoff.
/// The longest a resolution or a pull may take, retries included: per-read timeouts alone let
/// a registry that trickles bytes hold a reconcile (and a graceful shutdown) forever.
pub const PULL_DEADLINE: Duration = Duration::from_secs(180);

async fn with_deadline<T>(
    reference: &str,
    work: impl Future<Output = Result<T, OciError>>,
) -> Result<T, OciError> {
    tokio::time::timeout(PULL_DEADLINE, work)
        .await
        .unwrap_or_else(|_| {
            Err(OciError::DeadlineExceeded {
                reference: reference.to_owned(),
                seconds: PULL_DEADLINE.as_secs(),
            })
        })
}

fn retry_policy() -> ExponentialBuilder {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(200))
        .with_max_delay(Duration::from_secs(2))
        .with_max_times(2)
}

/// No retry: another location is asked instead.
fn no_retry() -> ExponentialBuilder {
    retry_policy().with_max_times(0)
}

fn parse(reference: &str) -> Result<Reference, OciError> {
    parse_reference(reference.trim()).map_err(|err| OciError::InvalidReference {
        reference: reference.to_owned(),
        reason: err.to_string(),
    })
}

fn by_digest(reference: &Reference, digest: &str) -> String {
    format!(
        "{}/{}@{digest}",
        reference.registry(),
        reference.repository()
    )
}

/// The locations to try for `parsed` through `mirrors`; an error when none may be contacted.
fn planned_sources(
    mirrors: &MirrorRules,
    parsed: &Reference,
    reference: &str,
) -> Result<Vec<PullSource>, OciError> {
    let plan = mirrors.plan_parsed(parsed)?;
    if plan.sources.is_empty() {
        return Err(OciError::Unreachable {
            reference: reference.to_owned(),
            registry: parsed.registry().to_owned(),
            detail: plan
                .no_source_reason()
                .unwrap_or_else(|| "no location may be contacted".to_owned()),
        });
    }
    Ok(plan.sources)
}

/// Never returned in practice (every list tried is non-empty); keeps the loops total.
fn no_location(reference: &str) -> OciError {
    OciError::Registry {
        reference: reference.to_owned(),
        detail: "no location was tried".to_owned(),
    }
}

/// The image `digest` at `source`, parsed, and as `registry/repository@digest` for messages.
fn physical_by_digest(source: &PullSource, digest: &str) -> Result<(Reference, String), OciError> {
    let located = parse(&source.reference)?;
    let text = by_digest(&located, digest);
    let parsed = Reference::with_digest(
        located.registry().to_owned(),
        located.repository().to_owned(),
        digest.to_owned(),
    );
    Ok((parsed, text))
}

/// Whether a failure at one location passes the pull to the next, as containers/image moves
/// to its next pull source: the location is unreachable or untrusted, refuses the
/// credentials, does not have the image or a blob, or answers with an error (5xx, bytes that
/// do not match their digest). What would fail the same everywhere (a layer POM cannot read,
/// content above the limits, the manager's own volume or configuration) does not.
fn falls_back(err: &OciError) -> bool {
    matches!(
        err,
        OciError::Unreachable { .. }
            | OciError::NotFound { .. }
            | OciError::Unauthorized { .. }
            | OciError::UntrustedCertificate { .. }
            | OciError::Registry { .. }
    )
}

/// Most earlier attempts named in an error's detail, and the most bytes of each one's text.
const EARLIER_ATTEMPTS_SHOWN: usize = 4;
const EARLIER_ATTEMPT_BYTES: usize = 240;

/// `err` (the last location's) with the locations tried before it in its detail, as
/// containers/image reports "(Mirrors also failed: …)".
fn with_earlier_attempts(mut err: OciError, earlier: &[(PullSource, OciError)]) -> OciError {
    if earlier.is_empty() {
        return err;
    }
    let mut shown: Vec<String> = earlier
        .iter()
        .take(EARLIER_ATTEMPTS_SHOWN)
        .map(|(source, failure)| {
            let mut text = match failure {
                OciError::NotFound { detail, .. } => format!("not found: {detail}"),
                OciError::Unauthorized { detail, .. } => format!("access refused: {detail}"),
                OciError::Unreachable { detail, .. } => format!("unreachable: {detail}"),
                OciError::UntrustedCertificate { detail, .. } => {
                    format!("certificate not trusted: {detail}")
                }
                OciError::Registry { detail, .. } => detail.clone(),
                other => other.to_string(),
            };
            if text.len() > EARLIER_ATTEMPT_BYTES {
                let mut end = EARLIER_ATTEMPT_BYTES;
                while !text.is_char_boundary(end) {
                    end -= 1;
                }
                text.truncate(end);
                text.push('…');
            }
            format!("{source}: {text}")
        })
        .collect();
    if earlier.len() > EARLIER_ATTEMPTS_SHOWN {
        shown.push(format!(
            "and {} more",
            earlier.len() - EARLIER_ATTEMPTS_SHOWN
        ));
    }
    let note = format!("; tried before it: [{}]", shown.join("; "));
    match &mut err {
        OciError::Unreachable { detail, .. }
        | OciError::NotFound { detail, .. }
        | OciError::Unauthorized { detail, .. }
        | OciError::UntrustedCertificate { detail, .. }
        | OciError::Registry { detail, .. } => detail.push_str(&note),
        _ => {}
    }
    err
}

/// Runs file-system work off the async threads; a panic or cancellation is reported as an
/// interrupted pull.
async fn blocking<T: Send + 'static>(
    reference: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<T, OciError> {
    tokio::task::spawn_blocking(work)
        .await
        .map_err(|err| OciError::Interrupted {
            reference: reference.to_owned(),
            detail: err.to_string(),
        })
}

/// The digest of a blob computed as it streams, in the algorithm its descriptor names.
enum BlobHasher {
    Sha256(Sha256),
    Sha512(Sha512),
}

impl BlobHasher {
    fn for_digest(digest: &str) -> Option<Self> {
        match digest.split_once(':')?.0 {
            "sha256" => Some(Self::Sha256(Sha256::new())),
            "sha512" => Some(Self::Sha512(Sha512::new())),
            _ => None,
        }
    }

    fn update(&mut self, data: &[u8]) {
        match self {
            Self::Sha256(hasher) => hasher.update(data),
            Self::Sha512(hasher) => hasher.update(data),
        }
    }

    fn finish(self) -> String {
        match self {
            Self::Sha256(hasher) => format!("sha256:{}", hex::encode(hasher.finalize())),
            Self::Sha512(hasher) => format!("sha512:{}", hex::encode(hasher.finalize())),
        }
    }
}

fn layer_error(reference: &str, layer: &OciDescriptor, source: LayerError) -> OciError {
    OciError::Layer {
        reference: reference.to_owned(),
        layer: layer.digest.clone(),
        source,
    }
}

/// Sorts the client's errors into what an admin can act on, with the credential scrubbed
/// from the detail (a registry may echo what it was sent).
fn classify(
    reference: &str,
    parsed: &Reference,
    access: &RegistryAccess,
    chosen: Option<&Chosen>,
    err: OciDistributionError,
) -> OciError {
    let detail = chain(&err);
    let detail = match chosen {
        Some(chosen) => chosen.credential.redact(&detail),
        None => detail,
    };
    match classify_kind(&err, &detail) {
        Kind::NotFound => OciError::NotFound {
            reference: reference.to_owned(),
            detail,
        },
        Kind::Unauthorized => OciError::Unauthorized {
            reference: reference.to_owned(),
            registry: parsed.registry().to_owned(),
            detail,
            credentials: Box::new(CredentialsTried {
                sent: chosen.map(|c| c.origin.clone()),
                consulted: access.pull_secret_names().into_iter().cloned().collect(),
            }),
        },
        Kind::Untrusted => OciError::UntrustedCertificate {
            reference: reference.to_owned(),
            registry: parsed.registry().to_owned(),
            detail,
            ca_bundle: access.ca_bundle().map(|b| Box::new(b.origin().clone())),
        },
        Kind::Unreachable => OciError::Unreachable {
            reference: reference.to_owned(),
            registry: parsed.registry().to_owned(),
            detail,
        },
        Kind::Registry => OciError::Registry {
            reference: reference.to_owned(),
            detail,
        },
    }
}

/// What kind of failure a client error is.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    NotFound,
    Unauthorized,
    Untrusted,
    Unreachable,
    Registry,
}

/// rustls reports a certificate it does not trust as `invalid peer certificate: ...`
/// (`UnknownIssuer`, `BadSignature`, expired...); reqwest only gives it as text in the chain.
const UNTRUSTED_CERTIFICATE: &str = "invalid peer certificate";

fn classify_kind(err: &OciDistributionError, detail: &str) -> Kind {
    match err {
        OciDistributionError::RequestError(request) => match request.status().map(|s| s.as_u16()) {
            Some(404) => Kind::NotFound,
            Some(401 | 403) => Kind::Unauthorized,
            Some(_) => Kind::Registry,
            None if detail.contains(UNTRUSTED_CERTIFICATE) => Kind::Untrusted,
            None => Kind::Unreachable,
        },
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => Kind::Unauthorized,
        OciDistributionError::ImageManifestNotFoundError(_) => Kind::NotFound,
        OciDistributionError::RegistryError { envelope, .. } => {
            let codes = || envelope.errors.iter().map(|e| &e.code);
            if codes().any(|c| {
                matches!(
                    c,
                    OciErrorCode::ManifestUnknown
                        | OciErrorCode::NameUnknown
                        | OciErrorCode::BlobUnknown
                        | OciErrorCode::NotFound
                )
            }) {
                Kind::NotFound
            } else if codes()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                Kind::Unauthorized
            } else {
                Kind::Registry
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => Kind::NotFound,
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => Kind::Unauthorized,
        _ => Kind::Registry,
    }
}

/// The error and its causes on one line: reqwest hides the interesting part (connection
/// refused, certificate unknown) in its sources.
fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let line = cause.to_string();
        if !text.contains(&line) {
            text.push_str(": ");
            text.push_str(&line);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    /// A pull dropped at its deadline cancels its extraction, and the retry waits for that
    /// extraction to stop before it extracts.
    #[tokio::test]
    async fn a_dropped_pull_cancels_its_extraction_and_the_retry_waits_for_it() {
        let puller = ImagePuller::new(Vec::new());
        let (stopped_tx, stopped_rx) = std::sync::mpsc::channel();
        let pull = async {
            let cancel = CancelOnDrop::default();
            let slot = puller.extraction_slot("reg/a@sha256:00", "configs/").await;
            let flag = cancel.flag();
            // A stale extraction: runs until it sees the cancellation.
            tokio::task::spawn_blocking(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(5));
                }
                std::thread::sleep(Duration::from_millis(50));
                let stopped = std::time::Instant::now();
                // Dropped before it is told: a guard's drop frees the lock before it lets go
                // of its `Arc`, so a slot dropped after the send could still be counted held
                // when the test checks that unheld locks are forgotten (seen once in CI).
                drop(slot);
                stopped_tx.send(stopped).unwrap();
            })
            .await
        };
        let timed_out = tokio::time::timeout(Duration::from_millis(100), pull).await;
        assert!(timed_out.is_err(), "the pull ran past its deadline");
        let retry = puller.extraction_slot("reg/a@sha256:00", "configs/").await;
        let started = std::time::Instant::now();
        let stale_stopped = stopped_rx.recv().unwrap();
        assert!(
            stale_stopped <= started,
            "the retry started extracting before the stale extraction stopped"
        );
        drop(retry);
        // Another image is not held up, and locks no one holds are forgotten.
        drop(puller.extraction_slot("reg/b@sha256:11", "configs/").await);
        let _c = puller.extraction_slot("reg/c@sha256:22", "configs/").await;
        assert_eq!(puller.extractions.lock().unwrap().len(), 1);
    }
}
