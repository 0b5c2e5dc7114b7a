//! The serving certificate of the metrics endpoint, and a TLS listener that uses it.
//!
//! On OpenShift the certificate comes from the service-ca operator: it writes the Secret named
//! by the Service's `service.beta.openshift.io/serving-cert-secret-name` annotation and renews
//! it before expiry (and when the service CA rotates); the kubelet then swaps the mounted files.
//! A process that read the files once would keep serving the old certificate until it expires
//! and Prometheus refuses it, so [`ServingCert`] re-reads them on a timer ([`watch`]) and new
//! handshakes use the new pair. Polling two small files every few seconds costs nothing
//! measurable and, unlike inotify, survives the kubelet's symlink swap without special cases.
//!
//! A pair that does not load (a certificate already swapped, its key not yet) is refused and the
//! previous pair stays in use; the next poll tries again.
//!
//! [`TlsListener`] does handshakes in their own tasks, bounded by a timeout, so one client that
//! connects and never speaks cannot stall everyone else's scrape.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use sha2::{Digest, Sha256};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;
use tokio_util::sync::CancellationToken;

/// How often the certificate files are re-read.
pub const RELOAD_INTERVAL: Duration = Duration::from_secs(10);
/// A client must finish its TLS handshake within this time.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Why a certificate pair could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("reading {path}: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: not PEM: {source}")]
    Pem {
        path: PathBuf,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("{path}: no certificate")]
    NoCertificate { path: PathBuf },
    #[error("{cert} with {key}: {source}")]
    Pair {
        cert: PathBuf,
        key: PathBuf,
        #[source]
        source: rustls::Error,
    },
    #[error("TLS configuration: {0}")]
    Config(#[source] rustls::Error),
}

/// The certificate and key files, and the pair currently served.
pub struct ServingCert {
    cert_path: PathBuf,
    key_path: PathBuf,
    provider: Arc<CryptoProvider>,
    current: RwLock<Loaded>,
}

struct Loaded {
    /// SHA-256 over both files' bytes: what the next poll compares against.
    fingerprint: [u8; 32],
    key: Arc<CertifiedKey>,
}

impl fmt::Debug for ServingCert {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServingCert")
            .field("cert_path", &self.cert_path)
            .field("key_path", &self.key_path)
            .finish_non_exhaustive()
    }
}

impl ServingCert {
    /// Loads the pair now, so that bad files fail the start rather than the first scrape.
    ///
    /// # Errors
    /// [`CertError`] when a file cannot be read or parsed, or the key does not match.
    pub fn load(cert_path: &Path, key_path: &Path) -> Result<Arc<Self>, CertError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let loaded = read_pair(cert_path, key_path, &provider)?;
        Ok(Arc::new(Self {
            cert_path: cert_path.to_owned(),
            key_path: key_path.to_owned(),
            provider,
            current: RwLock::new(loaded),
        }))
    }

    /// Re-reads both files: `Ok(true)` when a different pair is now served, `Ok(false)` when
    /// they are unchanged.
    ///
    /// # Errors
    /// [`CertError`] when the new files do not load; the previous pair stays in use.
    pub fn reload_if_changed(&self) -> Result<bool, CertError> {
        let (cert, key) = (read(&self.cert_path)?, read(&self.key_path)?);
        if fingerprint(&cert, &key) == self.fingerprint() {
            return Ok(false);
        }
        let loaded = parse_pair(&self.cert_path, &cert, &self.key_path, &key, &self.provider)?;
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = loaded;
        Ok(true)
    }

    fn fingerprint(&self) -> [u8; 32] {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .fingerprint
    }

    /// A TLS server configuration whose certificate is always the current pair (HTTP/1.1).
    ///
    /// # Errors
    /// [`CertError::Config`] if the crypto provider refuses the default protocol versions.
    pub fn server_config(self: &Arc<Self>) -> Result<Arc<ServerConfig>, CertError> {
        let mut config = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(CertError::Config)?
            .with_no_client_auth()
            .with_cert_resolver(self.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Arc::new(config))
    }
}

impl ResolvesServerCert for ServingCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(
            self.current
                .read()
                .unwrap_or_else(PoisonError::into_inner)
                .key
                .clone(),
        )
    }
}

/// Re-reads the files every `interval` until `shutdown`, logging what changed or failed.
pub fn watch(
    cert: Arc<ServingCert>,
    interval: Duration,
    shutdown: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut ticks = tokio::time::interval(interval);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        ticks.tick().await;
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match cert.reload_if_changed() {
                Ok(true) => {
                    tracing::info!(cert = %cert.cert_path.display(), "metrics serving certificate reloaded")
                }
                Ok(false) => {}
                Err(err) => {
                    tracing::warn!(%err, "metrics serving certificate not reloaded; the previous one stays in use")
                }
            }
        }
    })
}

fn read(path: &Path) -> Result<Vec<u8>, CertError> {
    std::fs::read(path).map_err(|source| CertError::Read {
        path: path.to_owned(),
        source,
    })
}

fn fingerprint(cert: &[u8], key: &[u8]) -> [u8; 32] {
    let mut hasher = Sha256::new();
    hasher.update((cert.len() as u64).to_be_bytes());
    hasher.update(cert);
    hasher.update(key);
    hasher.finalize().into()
}

fn read_pair(
    cert_path: &Path,
    key_path: &Path,
    provider: &CryptoProvider,
) -> Result<Loaded, CertError> {
    parse_pair(
        cert_path,
        &read(cert_path)?,
        key_path,
        &read(key_path)?,
        provider,
    )
}

fn parse_pair(
    cert_path: &Path,
    cert: &[u8],
    key_path: &Path,
    key: &[u8],
    provider: &CryptoProvider,
) -> Result<Loaded, CertError> {
    let chain = CertificateDer::pem_slice_iter(cert)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|source| CertError::Pem {
            path: cert_path.to_owned(),
            source,
        })?;
    if chain.is_empty() {
        return Err(CertError::NoCertificate {
            path: cert_path.to_owned(),
        });
    }
    let private = PrivateKeyDer::from_pem_slice(key).map_err(|source| CertError::Pem {
        path: key_path.to_owned(),
        source,
    })?;
    let certified =
        CertifiedKey::from_der(chain, private, provider).map_err(|source| CertError::Pair {
            cert: cert_path.to_owned(),
            key: key_path.to_owned(),
            source,
        })?;
    Ok(Loaded {
        fingerprint: fingerprint(cert, key),
        key: Arc::new(certified),
    })
}

/// An axum listener yielding TLS streams whose handshakes already succeeded.
pub struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    accept_task: JoinHandle<()>,
}

impl TlsListener {
    /// Accepts on `listener` and hands each connection's handshake to its own task.
    #[must_use]
    pub fn new(listener: TcpListener, local: SocketAddr, config: Arc<ServerConfig>) -> Self {
        let acceptor = TlsAcceptor::from(config);
        let (sender, ready) = mpsc::channel(64);
        let accept_task = tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // EMFILE and friends: back off instead of spinning.
                        tracing::debug!(%err, "metrics listener accept");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                let acceptor = acceptor.clone();
                let sender = sender.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(err)) => tracing::debug!(%err, %peer, "metrics TLS handshake"),
                        Err(_) => tracing::debug!(%peer, "metrics TLS handshake timed out"),
                    }
                });
            }
        });
        Self {
            local,
            ready,
            accept_task,
        }
    }
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.accept_task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task ended (it only does when this listener is dropped): never yield.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn pair(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), key.serialize_pem())
    }

    fn served(cert: &ServingCert) -> Vec<u8> {
        cert.current.read().unwrap().key.cert[0].to_vec()
    }

    #[test]
    fn a_rotated_pair_is_served_and_a_broken_one_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let (first_cert, first_key) = pair("first.svc");
        std::fs::write(&cert_path, &first_cert).unwrap();
        std::fs::write(&key_path, &first_key).unwrap();
        let cert = ServingCert::load(&cert_path, &key_path).unwrap();
        let first = served(&cert);
        assert!(!cert.reload_if_changed().unwrap(), "unchanged files");

        // Half-way through a swap: the new certificate with the old key is refused.
        let (second_cert, second_key) = pair("second.svc");
        std::fs::write(&cert_path, &second_cert).unwrap();
        let err = cert.reload_if_changed().unwrap_err();
        assert!(matches!(err, CertError::Pair { .. }), "{err}");
        assert_eq!(served(&cert), first, "the previous pair stays in use");

        std::fs::write(&key_path, &second_key).unwrap();
        assert!(cert.reload_if_changed().unwrap());
        let second = served(&cert);
        assert_ne!(second, first);
        assert!(!cert.reload_if_changed().unwrap());

        std::fs::write(&cert_path, "not pem").unwrap();
        assert!(cert.reload_if_changed().is_err());
        assert_eq!(served(&cert), second);
    }

    #[test]
    fn bad_files_fail_the_load_naming_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let (cert_path, key_path) = (dir.path().join("tls.crt"), dir.path().join("tls.key"));
        let err = ServingCert::load(&cert_path, &key_path).unwrap_err();
        assert!(err.to_string().contains("tls.crt"), "{err}");
        let (_, key) = pair("x");
        std::fs::write(&cert_path, "").unwrap();
        std::fs::write(&key_path, key).unwrap();
        let err = ServingCert::load(&cert_path, &key_path).unwrap_err();
        assert!(matches!(err, CertError::NoCertificate { .. }), "{err}");
    }
}
