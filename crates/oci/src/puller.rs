//! [`ImagePuller`]: tag → digest resolution and by-digest pulls of the files under a folder.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use backon::{ExponentialBuilder, Retryable};
use futures::StreamExt;
use oci_client::client::{Certificate, CertificateEncoding, ClientConfig, ClientProtocol};
use oci_client::errors::{OciDistributionError, OciErrorCode};
use oci_client::manifest::OciDescriptor;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use super::auth::{ChosenCredential, RegistryAccess};
use super::cache::{FileCache, Files};
use super::error::{CredentialsTried, LayerError, OciError};
use super::layers::{DEFAULT_MAX_BYTES, LayerFormat, LayerStack};

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
        }
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
        let parsed = parse(&digest_ref)?;
        let (client, auth, chosen) = self.client_for(&parsed, access)?;
        let client = client.as_ref();
        let manifest = (|| async {
            client
                .pull_image_manifest(&parsed, &auth)
                .await
                .map_err(|err| classify(&digest_ref, &parsed, access, chosen.as_ref(), err))
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
            let blob =
                (|| self.pull_blob(client, &parsed, &digest_ref, layer, access, chosen.as_ref()))
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
