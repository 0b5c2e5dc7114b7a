//! A test webhook server that stands in for an operator's pods, so the API server really calls
//! the webhooks POM installed (issue 21 item 6).
//!
//! With [`crate::Workloads::SimulatedServingOnLoopback`], Services get ClusterIPs in
//! [`crate::LOOPBACK_SERVICE_CIDR`] and the API server calls a webhook at its Service's
//! ClusterIP and port. [`WebhookServer::serve`] listens on every address of that range at the
//! Service's port, with the serving certificate POM provisioned (the Secret's `tls.crt` and
//! `tls.key`), so it answers for the Service, and the API server verifies POM's certificate
//! for `<service>.<namespace>.svc` against the caBundle POM set.
//!
//! Served [`Behind`] a Service (issue 34 item 9), it answers a path only while the Service's
//! EndpointSlices list a ready endpoint whose Pod serves that path (its pod template's
//! [`SERVES_ANNOTATION`] names the path prefix of the bundle version it runs), as a real
//! Service would: a webhook configuration pointing at a path no ready pod serves (switched
//! before the new pods serve, or after the old ones went) is answered 503, so the API server
//! refuses a write its webhook fails closed on. Every such call is counted per path
//! ([`WebhookServer::unserved`]). How a call is routed is the [`Routing`]: to whichever ready
//! pod serves the path (what this stand-in did first), or, as a real Service does, to one
//! ready endpoint per call, in turn (review H1), so that in a hop's overlap a share of the calls
//! reach the other version's pods.
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
use axum::http::{StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ListParams};

use crate::HarnessError;
use crate::fixtures::SERVES_ANNOTATION;

/// An object carrying this label is refused by the validating webhook.
pub const REFUSE_LABEL: &str = "pom-e2e/refuse";
/// The message of that refusal, so a test can find it in the API server's answer.
pub const REFUSAL_MESSAGE: &str = "refused by the pom-e2e test webhook";
/// The annotation the conversion webhook puts on every object it converts.
pub const CONVERTED_BY: &str = "pom-e2e/converted-by";

/// Calls per request path.
type Calls = Arc<Mutex<BTreeMap<String, u64>>>;

/// How a call reaches the pods behind the Service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Routing {
    /// Answered when any ready endpoint's Pod serves the path: kinder than a Service, it never
    /// sends a call to the wrong version's pod.
    AnyServingEndpoint,
    /// Each call goes to one ready endpoint, in turn (round robin over the endpoints listed at
    /// the call, by Pod name), and is answered only when that Pod serves the path: what a
    /// Service's proxy does, up to its choice of endpoint.
    OneEndpointPerCall,
}

/// The Service whose ready endpoints decide which paths are served, and the API server that
/// holds its EndpointSlices and Pods.
#[derive(Clone)]
pub struct Behind {
    pub client: kube::Client,
    pub namespace: String,
    pub service: String,
    pub routing: Routing,
}

/// What the handler shares: calls answered and calls refused for want of a serving pod, and
/// the turn of [`Routing::OneEndpointPerCall`].
#[derive(Clone, Default)]
struct Shared {
    calls: Calls,
    unserved: Calls,
    behind: Option<Behind>,
    turn: Arc<std::sync::atomic::AtomicUsize>,
}

/// Listening until dropped.
pub struct WebhookServer {
    shared: Shared,
    tasks: JoinSet<()>,
    /// What new connections are served with ([`WebhookServer::reload`]).
    acceptor: Arc<std::sync::RwLock<TlsAcceptor>>,
}

impl WebhookServer {
    /// Listens on every address of the loopback Service range at `port`, serving `cert_pem` and
    /// `key_pem` (a Secret's `tls.crt` and `tls.key`).
    ///
    /// # Errors
    /// When the certificate or key does not parse, or an address cannot be bound.
    pub async fn serve(cert_pem: &[u8], key_pem: &[u8], port: u16) -> Result<Self, HarnessError> {
        Self::start(cert_pem, key_pem, port, None).await
    }

    /// [`WebhookServer::serve`], answering a path only while `behind`'s Service lists a ready
    /// endpoint whose Pod serves it (see the module's doc).
    ///
    /// # Errors
    /// As [`WebhookServer::serve`].
    pub async fn serve_behind(
        cert_pem: &[u8],
        key_pem: &[u8],
        port: u16,
        behind: Behind,
    ) -> Result<Self, HarnessError> {
        Self::start(cert_pem, key_pem, port, Some(behind)).await
    }

    async fn start(
        cert_pem: &[u8],
        key_pem: &[u8],
        port: u16,
        behind: Option<Behind>,
    ) -> Result<Self, HarnessError> {
        let acceptor = Arc::new(std::sync::RwLock::new(tls_acceptor(cert_pem, key_pem)?));
        let shared = Shared {
            behind,
            ..Shared::default()
        };
        let router = Router::new()
            .fallback(axum::routing::post(review))
            .with_state(shared.clone());
        let mut tasks = JoinSet::new();
        for address in service_addresses() {
            let listener = TcpListener::bind(SocketAddr::from((address, port)))
                .await
                .map_err(HarnessError::io("binding a loopback Service address"))?;
            tasks.spawn(accept(listener, acceptor.clone(), router.clone()));
        }
        Ok(Self {
            shared,
            tasks,
            acceptor,
        })
    }

    /// Serves `cert_pem` and `key_pem` from the next connection on, as an operator reloads the
    /// files of its mounted serving Secret (controller-runtime's certificate watcher): no
    /// restart, the listeners stay.
    ///
    /// # Errors
    /// When the certificate or key does not parse.
    pub fn reload(&self, cert_pem: &[u8], key_pem: &[u8]) -> Result<(), HarnessError> {
        let acceptor = tls_acceptor(cert_pem, key_pem)?;
        let mut current = self
            .acceptor
            .write()
            .map_err(|_| HarnessError::Other("the serving certificate lock".to_owned()))?;
        *current = acceptor;
        Ok(())
    }

    /// How many requests arrived at `path` and were answered so far.
    #[must_use]
    pub fn calls(&self, path: &str) -> u64 {
        count(&self.shared.calls, path)
    }

    /// How many requests arrived at `path` while no ready pod behind the Service served it.
    #[must_use]
    pub fn unserved(&self, path: &str) -> u64 {
        count(&self.shared.unserved, path)
    }
}

fn count(calls: &Calls, path: &str) -> u64 {
    calls
        .lock()
        .map_or(0, |calls| calls.get(path).copied().unwrap_or(0))
}

fn add(calls: &Calls, path: &str) {
    if let Ok(mut calls) = calls.lock() {
        *calls.entry(path.to_owned()).or_default() += 1;
    }
}

/// The path prefix each of the Service's ready endpoints serves, by Pod name (sorted, each
/// once): its Pod's [`SERVES_ANNOTATION`], empty when it has none (an endpoint without
/// readiness counts as ready, as the EndpointSlice API defines it; a terminating Pod's
/// endpoint is not ready).
async fn served_prefixes(behind: &Behind) -> Result<Vec<String>, kube::Error> {
    let slices: Api<EndpointSlice> = Api::namespaced(behind.client.clone(), &behind.namespace);
    let selector = format!("kubernetes.io/service-name={}", behind.service);
    let ready_pods: std::collections::BTreeSet<String> = slices
        .list(&ListParams::default().labels(&selector))
        .await?
        .items
        .into_iter()
        .flat_map(|slice| slice.endpoints)
        .filter(|e| e.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true))
        .filter_map(|e| e.target_ref.and_then(|r| r.name))
        .collect();
    let pods: Api<Pod> = Api::namespaced(behind.client.clone(), &behind.namespace);
    let mut prefixes: BTreeMap<String, String> = pods
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter_map(|pod| {
            let name = pod.metadata.name?;
            let prefix = pod
                .metadata
                .annotations
                .and_then(|mut a| a.remove(SERVES_ANNOTATION))
                .unwrap_or_default();
            Some((name, prefix))
        })
        .collect();
    Ok(ready_pods
        .into_iter()
        .map(|pod| prefixes.remove(&pod).unwrap_or_default())
        .collect())
}

/// Whether the call at `path` is served (always, when not served behind a Service): by any
/// ready endpoint's Pod, or by the one whose `turn` it is (see [`Routing`]).
async fn is_served(
    behind: Option<&Behind>,
    turn: &std::sync::atomic::AtomicUsize,
    path: &str,
) -> bool {
    let Some(behind) = behind else {
        return true;
    };
    let Ok(prefixes) = served_prefixes(behind).await else {
        return false;
    };
    let serves = |prefix: &String| !prefix.is_empty() && path.starts_with(&format!("{prefix}/"));
    match behind.routing {
        Routing::AnyServingEndpoint => prefixes.iter().any(serves),
        Routing::OneEndpointPerCall => {
            if prefixes.is_empty() {
                return false;
            }
            let turn = turn.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            prefixes.get(turn % prefixes.len()).is_some_and(serves)
        }
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

/// A TLS acceptor serving `cert_pem` (a chain) with `key_pem`.
fn tls_acceptor(cert_pem: &[u8], key_pem: &[u8]) -> Result<TlsAcceptor, HarnessError> {
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
    Ok(TlsAcceptor::from(Arc::new(tls)))
}

async fn accept(
    listener: TcpListener,
    acceptor: Arc<std::sync::RwLock<TlsAcceptor>>,
    router: Router,
) {
    while let Ok((stream, _)) = listener.accept().await {
        let Ok(acceptor) = acceptor.read().map(|a| a.clone()) else {
            return;
        };
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

/// Answers an `AdmissionReview` or a `ConversionReview`, whichever arrived, when a ready pod
/// serves the path; 503 when none does (what the API server gets from a Service with no
/// endpoint serving it).
async fn review(State(shared): State<Shared>, uri: Uri, Json(review): Json<Value>) -> Response {
    let path = uri.path();
    if !is_served(shared.behind.as_ref(), &shared.turn, path).await {
        add(&shared.unserved, path);
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("no ready pod behind the Service serves {path}"),
        )
            .into_response();
    }
    add(&shared.calls, path);
    answer(&review).into_response()
}

/// The answer to `review`: conversion marks each object, admission refuses what is labelled.
fn answer(review: &Value) -> Json<Value> {
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
