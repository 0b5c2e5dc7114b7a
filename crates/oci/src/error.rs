//! Why an image could not be resolved or pulled, worded for the admin who reads it in a
//! condition message, with a CamelCase reason for the condition itself.

use pom_api::conditions::Reason;

use crate::auth::{ConfigMapKey, SecretName};

/// Why a layer could not be applied. Kept apart from [`OciError`] so that layer extraction can be
/// tested on in-memory tarballs without a registry.
#[derive(Debug, thiserror::Error)]
pub enum LayerError {
    /// The manifest lists a layer format POM cannot read (zstd, foreign or encrypted layers).
    #[error(
        "layer media type {media_type} is not supported; build the image with plain tar or \
         tar+gzip layers (docker or OCI media types)"
    )]
    UnsupportedMediaType { media_type: String },
    /// The layer is not a readable tar (or gzip) stream.
    #[error("layer is not a valid {format} archive: {reason}; rebuild and push the image")]
    Corrupt {
        format: &'static str,
        reason: String,
    },
    /// A path escapes the image root (`..`), which a well-built image never contains.
    #[error(
        "layer entry {path:?} escapes the image root; refusing the image (rebuild it without \
         `..` in paths)"
    )]
    UnsafePath { path: String },
    /// The files POM would keep (in memory for bundles, on disk for catalogs) exceed the limit.
    #[error(
        "content would reach {size} bytes (file bytes, and each kept path counted NAME_COPIES \
         times), above the {limit}-byte limit (DEFAULT_MAX_BYTES); POM refuses larger content: \
         split the catalog or bundle"
    )]
    TooLarge { size: u64, limit: u64 },
    /// More tar entries than POM reads from one image.
    #[error(
        "the image has more than {limit} tar entries (MAX_LAYER_ENTRIES); POM refuses it: a \
         catalog or bundle image needs far fewer files, rebuild it"
    )]
    TooManyEntries { limit: u64 },
    /// A GNU long-name/long-link or PAX extended header larger than POM reads.
    #[error(
        "a tar extended header (long file name or PAX record) of {size} bytes is above the \
         {limit}-byte limit (MAX_EXTENDED_HEADER_BYTES); POM refuses the image: rebuild it \
         with sane file names"
    )]
    HeaderTooLarge { size: u64, limit: u64 },
    /// An entry's path (or a hard link's target) is longer than any file system takes.
    #[error(
        "layer entry {path:?} has a path of {size} bytes, above the {limit}-byte limit \
         (MAX_PATH_BYTES); POM refuses the image: rebuild it with shorter paths"
    )]
    PathTooLong { path: String, size: u64, limit: u64 },
    /// The names of the kept files together are larger than POM holds.
    #[error(
        "the names of the kept files would reach {size} bytes at entry {path:?}, above the \
         {limit}-byte limit (MAX_NAME_BYTES); POM refuses the image: keep fewer files or \
         shorter paths in the catalog or bundle folder"
    )]
    NamesTooLarge { path: String, size: u64, limit: u64 },
    /// The layers decompress to more bytes than POM reads from one image.
    #[error(
        "the image's layers decompress to more than {limit} bytes (MAX_DECOMPRESSED_BYTES, \
         skipped files included), reached in entry {entry:?}; POM refuses the image: put the \
         catalog or bundle in a smaller image (FROM scratch or a small base)"
    )]
    TooMuchData { entry: String, limit: u64 },
    /// A gzip layer expands far more than real layers do (a decompression bomb).
    #[error(
        "the gzip layer expands to {decompressed} bytes from {compressed} compressed bytes at \
         entry {entry:?}, more than {ratio} times (MAX_EXPANSION_RATIO) beyond the first \
         {allowance} bytes; POM refuses the image: remove the large runs of identical bytes \
         (zero-filled files) from it"
    )]
    ExpansionTooHigh {
        entry: String,
        decompressed: u64,
        compressed: u64,
        ratio: u64,
        allowance: u64,
    },
    /// The extraction was stopped because its pull was cancelled or ran out of time.
    #[error(
        "extraction stopped at entry {entry:?}: the pull was cancelled or ran past its \
         deadline; POM retries"
    )]
    Cancelled { entry: String },
    /// The place kept files go to failed: the disk is full or read-only, or a path is longer
    /// than the file system takes. Kept apart from the image's own faults because the fix is
    /// on the manager's side (its volume), not the image's.
    #[error(
        "could not {action} {path}: {reason}; POM unpacks catalog images to its scratch volume \
         (the emptyDir mounted at /tmp in the manager's Deployment): check that it is writable \
         and has room for the catalog, POM retries"
    )]
    Storage {
        path: String,
        action: &'static str,
        reason: String,
    },
}

/// Which pull secrets a refused pull consulted, and whose entry it sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CredentialsTried {
    /// The Secret whose entry for the registry was sent; `None` when no pull secret had one
    /// (the pull was anonymous).
    pub sent: Option<SecretName>,
    /// The pull secrets consulted, in order of precedence.
    pub consulted: Vec<SecretName>,
}

/// Why an image could not be resolved to a digest or pulled.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    /// The reference does not parse as `registry/repository[:tag][@digest]`.
    #[error(
        "{reference:?} is not a valid image reference ({reason}); use registry/repository:tag or registry/repository@sha256:<digest>"
    )]
    InvalidReference { reference: String, reason: String },
    /// No TCP/TLS connection to the registry (down, wrong host, DNS, TLS handshake).
    #[error(
        "registry {registry} is unreachable while fetching {reference}: {detail}; check the \
         host name, the network path from the cluster and, for a plain-HTTP registry, that it \
         is listed as insecure"
    )]
    Unreachable {
        reference: String,
        registry: String,
        detail: String,
    },
    /// The registry answered, and the repository, tag or digest does not exist.
    #[error(
        "image {reference} was not found in the registry ({detail}); check the repository and tag, and that the image was pushed"
    )]
    NotFound { reference: String, detail: String },
    /// The registry refused the credentials POM sent, or their absence. Not transient: only
    /// a change of the pull secret (or of the registry's permissions) fixes it. The detail is
    /// scrubbed of the credential (see `Credential::redact`).
    #[error("registry {registry} refused {}", unauthorized_advice(.reference, .registry, .detail, .credentials))]
    Unauthorized {
        reference: String,
        registry: String,
        detail: String,
        credentials: Box<CredentialsTried>,
    },
    /// The registry's TLS certificate is not signed by a trusted CA.
    #[error("{}", untrusted_advice(.reference, .registry, .detail, .ca_bundle.as_deref()))]
    UntrustedCertificate {
        reference: String,
        registry: String,
        detail: String,
        /// The CA bundle that was trusted besides the system roots, if any.
        ca_bundle: Option<Box<ConfigMapKey>>,
    },
    /// The CA bundle parsed as PEM, and the TLS library still refused a certificate in it.
    #[error(
        "the CA bundle in {ca_bundle} cannot be used: {detail}; put PEM CA certificates \
         (-----BEGIN CERTIFICATE-----) in it"
    )]
    InvalidCaBundle {
        ca_bundle: Box<ConfigMapKey>,
        detail: String,
    },
    /// A layer is unusable (format, size, paths).
    #[error("image {reference}, layer {layer}: {source}")]
    Layer {
        reference: String,
        layer: String,
        #[source]
        source: LayerError,
    },
    /// The scratch volume failed outside any one layer (creating the staging folder,
    /// publishing the content folder): a problem of the manager's volume, not of the image.
    #[error("image {reference}: {source}")]
    Storage {
        reference: String,
        #[source]
        source: LayerError,
    },
    /// A manifest or blob is bigger than POM accepts before even downloading it.
    #[error(
        "image {reference}: {what} is {size} bytes, above the {limit}-byte limit; POM refuses \
         images this large: split the content"
    )]
    TooLarge {
        reference: String,
        what: String,
        size: u64,
        limit: u64,
    },
    /// Any other answer of the registry (5xx, malformed manifest, digest mismatch, no layers).
    #[error(
        "registry error for {reference}: {detail}; retrying, check the registry if it persists"
    )]
    Registry { reference: String, detail: String },
    /// No rustls crypto provider is installed, so no HTTPS client can be built.
    #[error(
        "no TLS crypto provider is installed; the manager must call \
         rustls::crypto::ring::default_provider().install_default() at start-up"
    )]
    NoCryptoProvider,
    /// The blocking extraction task panicked or was cancelled.
    #[error("extracting {reference} was interrupted: {detail}")]
    Interrupted { reference: String, detail: String },
    /// The pull did not finish within its overall deadline.
    #[error(
        "pulling {reference} did not finish within {seconds} s (the registry answers too slowly or not at all); check the registry, POM retries"
    )]
    DeadlineExceeded { reference: String, seconds: u64 },
}

impl OciError {
    /// The CamelCase condition reason for this failure, so status says what kind of problem it
    /// is without parsing the message.
    #[must_use]
    pub fn reason(&self) -> Reason {
        match self {
            Self::InvalidReference { .. } => Reason::InvalidImageReference,
            Self::Unreachable { .. } => Reason::RegistryUnreachable,
            Self::NotFound { .. } => Reason::ImageNotFound,
            Self::Unauthorized { .. } => Reason::RegistryUnauthorized,
            Self::UntrustedCertificate { .. } => Reason::RegistryCertificateUntrusted,
            Self::InvalidCaBundle { .. } => Reason::InvalidCABundle,
            Self::Layer { source, .. } => match source {
                LayerError::UnsupportedMediaType { .. } => Reason::UnsupportedLayerMediaType,
                LayerError::Corrupt { .. } => Reason::InvalidImageLayer,
                LayerError::UnsafePath { .. } => Reason::UnsafeImagePath,
                LayerError::TooLarge { .. }
                | LayerError::TooManyEntries { .. }
                | LayerError::HeaderTooLarge { .. }
                | LayerError::PathTooLong { .. }
                | LayerError::NamesTooLarge { .. }
                | LayerError::TooMuchData { .. }
                | LayerError::ExpansionTooHigh { .. } => Reason::ImageTooLarge,
                LayerError::Storage { .. } => Reason::UnpackFailed,
                LayerError::Cancelled { .. } => Reason::PullInterrupted,
            },
            Self::Storage { .. } => Reason::UnpackFailed,
            Self::TooLarge { .. } => Reason::ImageTooLarge,
            Self::Registry { .. } => Reason::RegistryError,
            Self::NoCryptoProvider => Reason::TlsNotConfigured,
            Self::Interrupted { .. } => Reason::PullInterrupted,
            Self::DeadlineExceeded { .. } => Reason::RegistryUnreachable,
        }
    }

    /// Whether trying again soon may succeed (network, registry hiccups), as opposed to a
    /// problem that only a change of the image or of its reference fixes.
    #[must_use]
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            Self::Unreachable { .. }
                | Self::Registry { .. }
                | Self::Interrupted { .. }
                | Self::DeadlineExceeded { .. }
                | Self::Storage { .. }
                | Self::Layer {
                    source: LayerError::Storage { .. } | LayerError::Cancelled { .. },
                    ..
                }
        )
    }
}

/// What to do about a refusal: check the Secret that was sent, or add one.
fn unauthorized_advice(
    reference: &str,
    registry: &str,
    detail: &str,
    credentials: &CredentialsTried,
) -> String {
    let consulted = &credentials.consulted;
    match &credentials.sent {
        Some(secret) => format!(
            "the credentials for {registry} from pull secret {secret} while fetching \
             {reference} ({detail}); check the user name and password (or token) of the \
             {registry} entry in Secret {secret}, and that this account may pull the repository"
        ),
        None => {
            let consulted = if consulted.is_empty() {
                "no pull secret is set".to_owned()
            } else {
                let names: Vec<String> = consulted.iter().map(ToString::to_string).collect();
                format!(
                    "no entry for {registry} in pull secret {}",
                    names.join(", ")
                )
            };
            format!(
                "anonymous access to {reference} ({detail}) and {consulted}; name a \
                 kubernetes.io/dockerconfigjson Secret with an entry for {registry} in the \
                 Catalog's spec.source.image.pullSecret, or add {registry} to the cluster's \
                 global pull secret openshift-config/pull-secret"
            )
        }
    }
}

/// What to do about a certificate POM does not trust: name the CA bundle field.
fn untrusted_advice(
    reference: &str,
    registry: &str,
    detail: &str,
    ca_bundle: Option<&ConfigMapKey>,
) -> String {
    match ca_bundle {
        None => format!(
            "the TLS certificate of registry {registry} is not trusted while fetching \
             {reference} ({detail}); if it is signed by a private CA, put that CA (PEM) in a \
             ConfigMap and name it in the Catalog's spec.source.image.caBundle"
        ),
        Some(bundle) => format!(
            "the TLS certificate of registry {registry} is trusted neither by the system roots \
             nor by the CA bundle in {bundle} (spec.source.image.caBundle) while fetching \
             {reference} ({detail}); put the CA that signed the registry's certificate in it"
        ),
    }
}
