//! [`ImagePuller`]: tag → digest resolution and by-digest pulls of the files under a folder.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
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
use super::reference::parse_reference;

/// Bytes of pulled (image, prefix) content kept in memory (twice the per-image limit, so the
/// catalog in use and the bundle being moved to always fit).
pub const MAX_CACHE_BYTES: u64 = 2 * DEFAULT_MAX_BYTES;

/// Most registry clients kept (one per CA bundle, registry and credential in use); past it the
/// cache is emptied and clients are rebuilt as needed (tokens are fetched again).
pub const MAX_CLIENTS: usize = 64;

/// What a registry client is built for. The registry client remembers the first credential it
/// is given per registry (and tokens per repository), so a client is never shared between
/// credentials; extra roots are fixed when it is built, so neither between CA bundles.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct ClientKey {
    ca_bundle: Option<[u8; 32]>,
    registry: String,
    credential: Option<[u8; 32]>,
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
            cache: FileCache::new(MAX_CACHE_BYTES),
            max_bytes: DEFAULT_MAX_BYTES,
            extractions: Mutex::new(HashMap::new()),
        }
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
    /// without contacting the registry.
    ///
    /// # Errors
    /// An invalid reference, or the registry being unreachable, refusing access or not having
    /// the image.
    pub async fn resolve_digest(
        &self,
        reference: &str,
        access: &RegistryAccess,
    ) -> Result<String, OciError> {
        with_deadline(reference, self.resolve_digest_now(reference, access)).await
    }

    async fn resolve_digest_now(
        &self,
        reference: &str,
        access: &RegistryAccess,
    ) -> Result<String, OciError> {
        let parsed = parse(reference)?;
        if let Some(digest) = parsed.digest() {
            return Ok(by_digest(&parsed, digest));
        }
        let (client, auth, chosen) = self.client_for(&parsed, access)?;
        let digest = (|| async {
            client
                .fetch_manifest_digest(&parsed, &auth)
                .await
                .map_err(|err| classify(reference, &parsed, access, chosen.as_ref(), err))
        })
        .retry(retry_policy())
        .when(OciError::is_transient)
        .await?;
        Ok(by_digest(&parsed, &digest))
    }

    /// Pulls `reference` by digest and returns its regular files under `prefix` (for example
    /// `configs/` for a catalog, `""` for a bundle), keyed by path with the prefix removed.
    /// Layers are applied in order with whiteouts; the result is cached by digest.
    ///
    /// # Errors
    /// Registry errors as for [`Self::resolve_digest`]; a layer POM cannot read, a path
    /// escaping the root, or content above the size limit.
    pub async fn pull_files(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
    ) -> Result<Files, OciError> {
        with_deadline(reference, self.pull_files_now(reference, prefix, access)).await
    }

    async fn pull_files_now(
        &self,
        reference: &str,
        prefix: &str,
        access: &RegistryAccess,
    ) -> Result<Files, OciError> {
        let digest_ref = self.resolve_digest_now(reference, access).await?;
        if let Some(files) = self.cache.get(&digest_ref, prefix) {
            return Ok(files);
        }
        let cancel = CancelOnDrop::default();
        let slot = self.extraction_slot(&digest_ref, prefix).await;
        if let Some(files) = self.cache.get(&digest_ref, prefix) {
            return Ok(files);
        }
        let parsed = parse(&digest_ref)?;
        let (client, auth, chosen) = self.client_for(&parsed, access)?;
        let client = client.as_ref();
        let plan = self
            .layer_plan(client, &parsed, &digest_ref, &auth, access, chosen.as_ref())
            .await?;
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
                    .await?;
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
            .map_err(|err| OciError::Interrupted {
                reference: digest_ref.clone(),
                detail: err.to_string(),
            })??;
        }
        let files: Files = Arc::new(held.0.into_files());
        self.cache.insert(&digest_ref, prefix, files.clone());
        Ok(files)
    }

    /// The layers of the by-digest image `parsed`, each with its format, from its manifest;
    /// refuses unreadable or oversized layers before anything is downloaded.
    async fn layer_plan(
        &self,
        client: &Client,
        parsed: &Reference,
        digest_ref: &str,
        auth: &RegistryAuth,
        access: &RegistryAccess,
        chosen: Option<&Chosen>,
    ) -> Result<Vec<(OciDescriptor, LayerFormat)>, OciError> {
        let manifest = (|| async {
            client
                .pull_image_manifest(parsed, auth)
                .await
                .map_err(|err| classify(digest_ref, parsed, access, chosen, err))
        })
        .retry(retry_policy())
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
    /// path with the prefix removed.
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
    /// so it survives crashes and restarts; leftovers of crashed pulls are removed here.
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
    ) -> Result<PathBuf, OciError> {
        with_deadline(
            reference,
            self.pull_to_dir_now(reference, prefix, access, root),
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
    ) -> Result<PathBuf, OciError> {
        let digest_ref = self.resolve_digest_now(reference, access).await?;
        let parsed = parse(&digest_ref)?;
        let digest = parsed.digest().unwrap_or_default();
        let name = content_dir_name(digest, prefix).ok_or_else(|| OciError::InvalidReference {
            reference: digest_ref.clone(),
            reason: format!(
                "digest {digest:?} is not <algorithm>:<lowercase hex>, which POM needs to \
                     name its content folder"
            ),
        })?;
        let target = root.join(&name);
        if target.is_dir() {
            return Ok(target);
        }
        let cancel = CancelOnDrop::default();
        let slot = self.extraction_slot(&digest_ref, prefix).await;
        if target.is_dir() {
            return Ok(target);
        }
        let storage_error = |source| OciError::Storage {
            reference: digest_ref.clone(),
            source,
        };
        let (root_dir, staging_name) = (root.to_owned(), name.clone());
        let staging = blocking(&digest_ref, move || {
            std::fs::create_dir_all(&root_dir).map_err(|err| LayerError::Storage {
                path: root_dir.display().to_string(),
                action: "create the folder",
                reason: err.to_string(),
            })?;
            remove_leftovers(&root_dir);
            let staging = Staging::create(&root_dir, &staging_name)?;
            let storage = DiskStorage::new(&staging.tree())?;
            Ok((staging, storage))
        })
        .await?
        .map_err(storage_error)?;
        let (staging, storage) = staging;
        let (client, auth, chosen) = self.client_for(&parsed, access)?;
        let client = client.as_ref();
        let plan = self
            .layer_plan(client, &parsed, &digest_ref, &auth, access, chosen.as_ref())
            .await?;
        let blob = staging.blob();
        let mut pull = (
            staging,
            LayerStack::with_storage(prefix, self.max_bytes, storage).with_cancel(cancel.flag()),
            slot,
        );
        for (layer, format) in &plan {
            let format = *format;
            (|| {
                self.download_blob(
                    client,
                    &parsed,
                    &digest_ref,
                    layer,
                    access,
                    chosen.as_ref(),
                    &blob,
                )
            })
            .retry(retry_policy())
            .when(OciError::is_transient)
            .await?;
            let (blob, descriptor) = (blob.clone(), layer.clone());
            pull = blocking(&digest_ref, move || {
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
            .await?
            .map_err(|source| layer_error(&digest_ref, &descriptor, source))?;
        }
        let root_dir = root.to_owned();
        blocking(&digest_ref, move || {
            let (staging, stack, _slot) = pull;
            let (storage, index) = stack.into_parts();
            staging.publish(&storage, index.keys().map(String::as_str), &root_dir, &name)
        })
        .await?
        .map_err(storage_error)
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
        let key = ClientKey {
            ca_bundle: access.ca_bundle().map(|b| b.digest()),
            registry: image.resolve_registry().to_owned(),
            credential: chosen.as_ref().map(|c| c.credential.fingerprint()),
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
        let extra_root_certificates = access
            .ca_bundle()
            .map(|bundle| {
                bundle
                    .certificates()
                    .iter()
                    .map(|der| Certificate {
                        encoding: CertificateEncoding::Der,
                        data: der.clone(),
                    })
                    .collect()
            })
            .unwrap_or_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.insecure_registries.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            extra_root_certificates,
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
                stopped_tx.send(std::time::Instant::now()).unwrap();
                drop(slot);
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
