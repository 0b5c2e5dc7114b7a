//! [`ImagePuller`]: tag → digest resolution and by-digest pulls of the files under a folder.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use super::cache::{FileCache, Files};
use super::error::{LayerError, OciError};
use super::layers::{DEFAULT_MAX_BYTES, LayerFormat, LayerStack};

/// Bytes of pulled (image, prefix) content kept in memory (twice the per-image limit, so the
/// catalog in use and the bundle being moved to always fit).
pub const MAX_CACHE_BYTES: u64 = 2 * DEFAULT_MAX_BYTES;

/// Pulls catalog and bundle images anonymously, always by digest, and keeps recent content in
/// memory so that reconciles of unchanged images cost one manifest `HEAD` at most.
pub struct ImagePuller {
    insecure_registries: Vec<String>,
    /// Built on first use: building an HTTPS client needs the process-wide rustls provider,
    /// which `main` installs after the context may have been created.
    client: OnceLock<Client>,
    cache: FileCache,
    max_bytes: u64,
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
            client: OnceLock::new(),
            cache: FileCache::new(MAX_CACHE_BYTES),
            max_bytes: DEFAULT_MAX_BYTES,
        }
    }

    /// Resolves `reference` to the by-digest reference `registry/repository@sha256:...` of what
    /// it names now. A reference that already carries a digest is returned in that form
    /// without contacting the registry.
    ///
    /// # Errors
    /// An invalid reference, or the registry being unreachable, refusing access or not having
    /// the image.
    pub async fn resolve_digest(&self, reference: &str) -> Result<String, OciError> {
        with_deadline(reference, self.resolve_digest_now(reference)).await
    }

    async fn resolve_digest_now(&self, reference: &str) -> Result<String, OciError> {
        let parsed = parse(reference)?;
        if let Some(digest) = parsed.digest() {
            return Ok(by_digest(&parsed, digest));
        }
        let client = self.client()?;
        let digest = (|| async {
            client
                .fetch_manifest_digest(&parsed, &RegistryAuth::Anonymous)
                .await
                .map_err(|err| classify(reference, &parsed, err))
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
    pub async fn pull_files(&self, reference: &str, prefix: &str) -> Result<Files, OciError> {
        with_deadline(reference, self.pull_files_now(reference, prefix)).await
    }

    async fn pull_files_now(&self, reference: &str, prefix: &str) -> Result<Files, OciError> {
        let digest_ref = self.resolve_digest_now(reference).await?;
        if let Some(files) = self.cache.get(&digest_ref, prefix) {
            return Ok(files);
        }
        let parsed = parse(&digest_ref)?;
        let client = self.client()?;
        let manifest = (|| async {
            client
                .pull_image_manifest(&parsed, &RegistryAuth::Anonymous)
                .await
                .map_err(|err| classify(&digest_ref, &parsed, err))
        })
        .retry(retry_policy())
        .when(OciError::is_transient)
        .await?
        .0;
        // Refuse unreadable layers before downloading anything.
        let mut plan = Vec::with_capacity(manifest.layers.len());
        for layer in &manifest.layers {
            let format = LayerFormat::from_media_type(&layer.media_type)
                .map_err(|source| layer_error(&digest_ref, layer, source))?;
            let size = u64::try_from(layer.size).unwrap_or(0);
            if size > self.max_bytes {
                return Err(OciError::TooLarge {
                    reference: digest_ref.clone(),
                    what: format!("layer {}", layer.digest),
                    size,
                    limit: self.max_bytes,
                });
            }
            plan.push((layer, format));
        }
        let mut stack = LayerStack::new(prefix, self.max_bytes);
        for (layer, format) in plan {
            let blob = (|| self.pull_blob(client, &parsed, &digest_ref, layer))
                .retry(retry_policy())
                .when(OciError::is_transient)
                .await?;
            let reference = digest_ref.clone();
            let descriptor = layer.clone();
            stack = tokio::task::spawn_blocking(move || {
                stack
                    .apply(format, &blob)
                    .map(|()| stack)
                    .map_err(|source| layer_error(&reference, &descriptor, source))
            })
            .await
            .map_err(|err| OciError::Interrupted {
                reference: digest_ref.clone(),
                detail: err.to_string(),
            })??;
        }
        let files: Files = Arc::new(stack.into_files());
        self.cache.insert(&digest_ref, prefix, files.clone());
        Ok(files)
    }

    /// Downloads one blob, refusing more bytes than the limit and checking its sha256 digest.
    async fn pull_blob(
        &self,
        client: &Client,
        image: &Reference,
        digest_ref: &str,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, OciError> {
        let mut stream = client
            .pull_blob_stream(image, layer)
            .await
            .map_err(|err| classify(digest_ref, image, err))?;
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

    fn client(&self) -> Result<&Client, OciError> {
        if let Some(client) = self.client.get() {
            return Ok(client);
        }
        if rustls::crypto::CryptoProvider::get_default().is_none() {
            return Err(OciError::NoCryptoProvider);
        }
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(self.insecure_registries.clone()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config).map_err(|err| OciError::Registry {
            reference: String::new(),
            detail: format!("building the registry client: {err}"),
        })?;
        // A concurrent first use may have won the race; either client is equivalent.
        let _ = self.client.set(client);
        self.client.get().ok_or(OciError::NoCryptoProvider)
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
    reference
        .trim()
        .parse::<Reference>()
        .map_err(|err| OciError::InvalidReference {
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

fn layer_error(reference: &str, layer: &OciDescriptor, source: LayerError) -> OciError {
    OciError::Layer {
        reference: reference.to_owned(),
        layer: layer.digest.clone(),
        source,
    }
}

/// Sorts the client's errors into what an admin can act on.
fn classify(reference: &str, parsed: &Reference, err: OciDistributionError) -> OciError {
    let reference = reference.to_owned();
    let detail = chain(&err);
    match &err {
        OciDistributionError::RequestError(request) => match request.status().map(|s| s.as_u16()) {
            Some(404) => OciError::NotFound { reference, detail },
            Some(401 | 403) => OciError::Unauthorized { reference, detail },
            Some(_) => OciError::Registry { reference, detail },
            None => OciError::Unreachable {
                reference,
                registry: parsed.registry().to_owned(),
                detail,
            },
        },
        OciDistributionError::UnauthorizedError { .. }
        | OciDistributionError::AuthenticationFailure(_) => {
            OciError::Unauthorized { reference, detail }
        }
        OciDistributionError::ImageManifestNotFoundError(_) => {
            OciError::NotFound { reference, detail }
        }
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
                OciError::NotFound { reference, detail }
            } else if codes()
                .any(|c| matches!(c, OciErrorCode::Unauthorized | OciErrorCode::Denied))
            {
                OciError::Unauthorized { reference, detail }
            } else {
                OciError::Registry { reference, detail }
            }
        }
        OciDistributionError::ServerError { code: 404, .. } => {
            OciError::NotFound { reference, detail }
        }
        OciDistributionError::ServerError {
            code: 401 | 403, ..
        } => OciError::Unauthorized { reference, detail },
        _ => OciError::Registry { reference, detail },
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
