//! A test webhook server that stands in for an operator's pods, so the API server really calls
//! the webhooks POM installed (issue 21 item 6).
//!
//! With [`crate::Workloads::SimulatedServingOnLoopback`], Services get ClusterIPs in
//! [`crate::LOOPBACK_SERVICE_CIDR`] and the API server calls a webhook at its Service's
//! ClusterIP and port. [`WebhookServer::serve`] listens on every address of that range at the
//! Service's port, with the serving certificate POM provisioned (the Secret's `tls.crt` and
//! `tls.key`), so it answers for the Service, and the API server verifies POM's certificate
//! for `<service>.<namespace>.svc` against the caBundle POM set. (Whether pods are ready
//! behind the Service is POM's `WebhookServed` wait's business, which this does not replace.)
//!
//! It answers `AdmissionReview`s (refusing objects labelled [`REFUSE_LABEL`], so a test can
//! tell a call happened from a call that did not) and `ConversionReview`s (marking each
//! converted object with the annotation [`CONVERTED_BY`]), and counts the calls per path.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};

use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::Uri;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use crate::HarnessError;

/// An object carrying this label is refused by the validating webhook.
pub const REFUSE_LABEL: &str = "pom-e2e/refuse";
/// The message of that refusal, so a test can find it in the API server's answer.
pub const REFUSAL_MESSAGE: &str = "refused by the pom-e2e test webhook";
/// The annotation the conversion webhook puts on every object it converts.
pub const CONVERTED_BY: &str = "pom-e2e/converted-by";

/// Calls per request path.
type Calls = Arc<Mutex<BTreeMap<String, u64>>>;

/// Listening until dropped.
pub struct WebhookServer {
    calls: Calls,
    tasks: JoinSet<()>,
}

impl WebhookServer {
    /// Listens on every address of the loopback Service range at `port`, serving `cert_pem` and
    /// `key_pem` (a Secret's `tls.crt` and `tls.key`).
    ///
    /// # Errors
    /// When the certificate or key does not parse, or an address cannot be bound.
    pub async fn serve(cert_pem: &[u8], key_pem: &[u8], port: u16) -> Result<Self, HarnessError> {
        let chain = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| HarnessError::Other(format!("the serving certificate: {e}")))?;
        let key = PrivateKeyDer::from_pem_slice(key_pem)
            .map_err(|e| HarnessError::Other(format!("the serving key: {e}")))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| HarnessError::Other(format!("TLS versions: {e}")))?
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .map_err(|e| HarnessError::Other(format!("the serving certificate: {e}")))?;
        let acceptor = TlsAcceptor::from(Arc::new(tls));
        let calls = Calls::default();
        let router = Router::new()
            .fallback(axum::routing::post(review))
            .with_state(calls.clone());
        let mut tasks = JoinSet::new();
        for address in service_addresses() {
            let listener = TcpListener::bind(SocketAddr::from((address, port)))
                .await
                .map_err(HarnessError::io("binding a loopback Service address"))?;
            tasks.spawn(accept(listener, acceptor.clone(), router.clone()));
        }
        Ok(Self { calls, tasks })
    }

    /// How many requests arrived at `path` so far.
    #[must_use]
    pub fn calls(&self, path: &str) -> u64 {
        self.calls
            .lock()
            .map_or(0, |calls| calls.get(path).copied().unwrap_or(0))
    }
}

impl Drop for WebhookServer {
    fn drop(&mut self) {
        self.tasks.abort_all();
    }
}

/// The host addresses of [`crate::LOOPBACK_SERVICE_CIDR`] (a /24).
fn service_addresses() -> impl Iterator<Item = Ipv4Addr> {
    (1..=254).map(|host| Ipv4Addr::new(127, 2, 0, host))
}

async fn accept(listener: TcpListener, acceptor: TlsAcceptor, router: Router) {
    while let Ok((stream, _)) = listener.accept().await {
        let acceptor = acceptor.clone();
        let service = TowerToHyperService::new(router.clone());
        tokio::spawn(async move {
            // A handshake the peer abandons is the peer's business, not this test's.
            if let Ok(stream) = acceptor.accept(stream).await {
                let _ = Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        });
    }
}

/// Answers an `AdmissionReview` or a `ConversionReview`, whichever arrived.
async fn review(State(calls): State<Calls>, uri: Uri, Json(review): Json<Value>) -> Json<Value> {
    if let Ok(mut calls) = calls.lock() {
        *calls.entry(uri.path().to_owned()).or_default() += 1;
    }
    let request = &review["request"];
    let uid = request["uid"].clone();
    Json(match review["kind"].as_str() {
        Some("ConversionReview") => {
            let desired = request["desiredAPIVersion"].clone();
            let converted: Vec<Value> = request["objects"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|object| {
                    let mut object = object.clone();
                    object["apiVersion"] = desired.clone();
                    if !object["metadata"]["annotations"].is_object() {
                        object["metadata"]["annotations"] = json!({});
                    }
                    object["metadata"]["annotations"][CONVERTED_BY] = json!("pom-e2e");
                    object
                })
                .collect();
            json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
                "response": {"uid": uid, "convertedObjects": converted, "result": {"status": "Success"}}
            })
        }
        _ => {
            let refused = request["object"]["metadata"]["labels"][REFUSE_LABEL].is_string();
            let mut response = json!({"uid": uid, "allowed": !refused});
            if refused {
                response["status"] = json!({"code": 403, "message": REFUSAL_MESSAGE});
            }
            json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response})
        }
    })
}
