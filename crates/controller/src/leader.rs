//! Leader election on a `coordination.k8s.io/v1` Lease, with kube-lease-manager (kube has none,
//! rust-stack.md §1.4).
//!
//! Only the leader runs the reconcilers. [`acquire`] waits for the Lease; the returned
//! [`Leadership`] renews it in the background until [`Leadership::release`] (graceful shutdown:
//! the next replica takes over at its next poll instead of waiting for expiry) or until the
//! lease is lost, which [`Leadership::lost`] reports so the caller stops writing at once and
//! exits non-zero, as controller-runtime does.
//!
//! kube-lease-manager only re-reads a Lease held by someone else when it expires, so a standby
//! replica would not see a release before then. A standby therefore asks again every
//! [`LeaseSettings::retry_period`] with a fresh manager (one GET), like controller-runtime's
//! `RetryPeriod`: hand-over after a graceful release takes about one retry period, after a crash
//! at most the lease duration plus a retry period.
//!
//! Renewal has a deadline: every Lease request goes through a client that gives up after
//! [`LeaseSettings::request_timeout`], so a hung PATCH (an API server that accepts the
//! connection and never answers) becomes an error in time, and a failed renewal is retried only
//! while the Lease stays ours for longer than one more attempt can take. Leadership is therefore
//! given up (and every write stopped) before the Lease expires, that is before another replica
//! can take it.

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Client;
use kube::api::Api;
use kube_lease_manager::{LeaseManager, LeaseManagerBuilder, LeaseManagerError};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Field manager of the Lease writes (one per identity, as kube-lease-manager requires).
const FIELD_MANAGER_PREFIX: &str = "platform-operators-manager/lease";

/// How the Lease is held.
#[derive(Debug, Clone)]
pub struct LeaseSettings {
    /// Lease name (`platform-operators-manager`).
    pub name: String,
    /// The manager's namespace.
    pub namespace: String,
    /// This replica (POD_NAME).
    pub identity: String,
    /// How long a lease is valid after its last renewal, in seconds.
    pub duration_seconds: u64,
    /// How long before expiry the holder renews, in seconds (also the tolerated clock skew).
    pub grace_seconds: u64,
    /// How often a standby replica checks whether the Lease became free.
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// The defaults of the shipped manifests: 15 s lease, renewed 5 s before expiry, 2 s retry,
    /// 2 s per Lease request.
    #[must_use]
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        Self {
            name: "platform-operators-manager".into(),
            namespace: namespace.into(),
            identity: identity.into(),
            duration_seconds: 15,
            grace_seconds: 5,
            retry_period: Duration::from_secs(2),
        }
    }

    /// How long one Lease request (read, renewal, release) may take before it counts as
    /// failed: a third of the grace period, at most 2 s, so a renewal that hangs is noticed,
    /// and retried or given up, while the Lease is still valid.
    #[must_use]
    pub fn request_timeout(&self) -> Duration {
        Duration::from_secs(2).min(Duration::from_secs(self.grace_seconds) / 3)
    }

    /// Whether a failed renewal may be retried with `seconds_left` of validity: one more
    /// attempt (at most one request timeout) plus the validity check after it (one more) must
    /// end before the Lease expires.
    fn may_retry(&self, seconds_left: f64) -> bool {
        seconds_left > 2.0 * self.request_timeout().as_secs_f64() + 0.5
    }
}

/// A [`Client`] whose requests fail after `timeout` (until the response headers arrive): the
/// kube client's own read timeout is made for watches (minutes), far longer than a Lease.
fn with_deadline(client: &Client, timeout: Duration) -> Client {
    Client::new(
        Deadline {
            inner: client.clone(),
            timeout,
        },
        client.default_namespace().to_owned(),
    )
}

/// The tower service behind [`with_deadline`].
#[derive(Clone)]
struct Deadline {
    inner: Client,
    timeout: Duration,
}

/// A Lease request that did not complete within [`LeaseSettings::request_timeout`].
#[derive(Debug, thiserror::Error)]
#[error("the Lease request did not complete within {0:?}")]
struct LeaseRequestTimedOut(Duration);

impl tower_service::Service<http::Request<kube::client::Body>> for Deadline {
    type Response = http::Response<kube::client::Body>;
    type Error = Box<dyn std::error::Error + Send + Sync>;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<kube::client::Body>) -> Self::Future {
        let inner = self.inner.clone();
        let timeout = self.timeout;
        Box::pin(async move {
            match tokio::time::timeout(timeout, inner.send(request)).await {
                Ok(response) => response.map_err(Into::into),
                Err(_) => Err(LeaseRequestTimedOut(timeout).into()),
            }
        })
    }
}

/// Why leadership ended or could not be had.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// kube-lease-manager panics on these, so they are refused first.
    #[error(
        "invalid lease timing: grace ({grace}s) must be positive and shorter than the duration ({duration}s)"
    )]
    InvalidTiming { duration: u64, grace: u64 },
    /// Another replica holds the Lease now.
    #[error("leader election lost: Lease {namespace}/{name} is no longer held by {identity}")]
    Lost {
        namespace: String,
        name: String,
        identity: String,
    },
    /// The Lease could not be renewed before it would expire.
    #[error("leader election lost: cannot renew Lease {namespace}/{name}: {source}")]
    RenewFailed {
        namespace: String,
        name: String,
        #[source]
        source: Box<LeaseManagerError>,
    },
    /// Releasing the Lease failed (the next leader waits for expiry instead).
    #[error("releasing Lease {namespace}/{name}: {source}")]
    Release {
        namespace: String,
        name: String,
        #[source]
        source: Box<LeaseManagerError>,
    },
    /// The renewal task ended abnormally.
    #[error("the lease renewal task failed: {0}")]
    Task(String),
}

/// A held Lease, renewed in the background.
pub struct Leadership {
    lost: CancellationToken,
    stop: CancellationToken,
    task: JoinHandle<Result<(), LeaderError>>,
}

impl Leadership {
    /// Resolves as soon as the Lease is lost (never after a [`release`](Self::release)).
    pub async fn lost(&self) {
        self.lost.cancelled().await;
    }

    /// The token cancelled when the Lease is lost, for futures that must outlive `&self`.
    #[must_use]
    pub fn lost_token(&self) -> CancellationToken {
        self.lost.clone()
    }

    /// Stops renewing and gives the Lease up. Returns why leadership ended when it was lost
    /// before the release.
    ///
    /// # Errors
    /// [`LeaderError::Lost`]/[`LeaderError::RenewFailed`] when the Lease was lost first,
    /// [`LeaderError::Release`] when the release write failed.
    pub async fn release(self) -> Result<(), LeaderError> {
        self.stop.cancel();
        self.task
            .await
            .map_err(|e| LeaderError::Task(e.to_string()))?
    }
}

async fn build(
    client: &Client,
    settings: &LeaseSettings,
) -> Result<LeaseManager, LeaseManagerError> {
    LeaseManagerBuilder::new(client.clone(), &settings.name)
        .with_namespace(&settings.namespace)
        .with_identity(&settings.identity)
        .with_duration(settings.duration_seconds)
        .with_grace(settings.grace_seconds)
        .with_field_manager(format!("{FIELD_MANAGER_PREFIX}-{}", settings.identity))
        .build()
        .await
}

/// Waits until this replica holds the Lease. Returns `Ok(None)` when `shutdown` came first
/// (having given back a Lease taken in that very instant).
///
/// # Errors
/// Only for invalid settings; API errors are retried every retry period.
pub async fn acquire(
    client: &Client,
    settings: &LeaseSettings,
    shutdown: &CancellationToken,
) -> Result<Option<Leadership>, LeaderError> {
    if settings.grace_seconds == 0 || settings.grace_seconds >= settings.duration_seconds {
        return Err(LeaderError::InvalidTiming {
            duration: settings.duration_seconds,
            grace: settings.grace_seconds,
        });
    }
    let client = &with_deadline(client, settings.request_timeout());
    loop {
        let attempt = async {
            let manager = build(client, settings).await?;
            // Bounded: a Lease held by someone else makes `changed` sleep until its expiry.
            match tokio::time::timeout(settings.retry_period, manager.changed()).await {
                Ok(Ok(true)) => Ok(Some(manager)),
                Ok(Ok(false)) | Err(_) => Ok(None),
                Ok(Err(err)) => Err(err),
            }
        };
        let outcome = tokio::select! {
            () = shutdown.cancelled() => {
                // A timeout or shutdown may have interrupted a successful take-over.
                give_back_if_held(client, settings).await;
                return Ok(None);
            }
            outcome = attempt => outcome,
        };
        match outcome {
            Ok(Some(manager)) => {
                tracing::info!(lease = %settings.name, identity = %settings.identity, "acquired the leader lease");
                return Ok(Some(spawn_renewal(
                    client.clone(),
                    manager,
                    settings.clone(),
                )));
            }
            Ok(None) => {
                tracing::debug!(lease = %settings.name, "leader lease held by another replica")
            }
            Err(err) => {
                tracing::warn!(%err, lease = %settings.name, "leader election: retrying");
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(None),
                    () = tokio::time::sleep(settings.retry_period) => {}
                }
            }
        }
    }
}

/// Releases the Lease if (and only if) the server says this identity holds it.
async fn give_back_if_held(client: &Client, settings: &LeaseSettings) {
    if holder(client, settings).await.as_deref() != Some(settings.identity.as_str()) {
        return;
    }
    match build(client, settings).await {
        Ok(manager) => {
            if let Err(err) = manager.release().await {
                tracing::warn!(%err, "releasing the leader lease");
            }
        }
        Err(err) => tracing::warn!(%err, "releasing the leader lease"),
    }
}

async fn holder(client: &Client, settings: &LeaseSettings) -> Option<String> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);
    api.get_opt(&settings.name)
        .await
        .ok()??
        .spec?
        .holder_identity
}

/// Seconds of validity the server's copy of the Lease still grants this identity.
async fn remaining_validity(client: &Client, settings: &LeaseSettings) -> Option<f64> {
    let api: Api<Lease> = Api::namespaced(client.clone(), &settings.namespace);
    let spec = api.get_opt(&settings.name).await.ok()??.spec?;
    if spec.holder_identity.as_deref() != Some(settings.identity.as_str()) {
        return None;
    }
    let renewed = spec.renew_time?.0;
    let duration = f64::from(spec.lease_duration_seconds?);
    let age = k8s_openapi::jiff::Timestamp::now()
        .duration_since(renewed)
        .as_secs_f64();
    Some(duration - age)
}

fn spawn_renewal(client: Client, manager: LeaseManager, settings: LeaseSettings) -> Leadership {
    let lost = CancellationToken::new();
    let stop = CancellationToken::new();
    let task = tokio::spawn(renew(client, manager, settings, lost.clone(), stop.clone()));
    Leadership { lost, stop, task }
}

/// Renews until `stop` (then releases) or until the Lease is lost (then cancels `lost`).
///
/// kube-lease-manager reports a failed renewal as an error but still believes it leads; a
/// failed renewal is therefore checked against the server: while the Lease is still ours for
/// more than a second the renewal is retried, otherwise leadership is over.
async fn renew(
    client: Client,
    manager: LeaseManager,
    settings: LeaseSettings,
    lost: CancellationToken,
    stop: CancellationToken,
) -> Result<(), LeaderError> {
    let result = loop {
        let changed = tokio::select! {
            biased;
            () = stop.cancelled() => {
                break manager.release().await.map_err(|source| LeaderError::Release {
                    namespace: settings.namespace.clone(),
                    name: settings.name.clone(),
                    source: Box::new(source),
                });
            }
            changed = manager.changed() => changed,
        };
        match changed {
            Ok(true) => {}
            Ok(false) => {
                break Err(LeaderError::Lost {
                    namespace: settings.namespace.clone(),
                    name: settings.name.clone(),
                    identity: settings.identity.clone(),
                });
            }
            Err(err) => {
                // Bounded by the client's request timeout.
                let left = remaining_validity(&client, &settings).await;
                if left.is_some_and(|s| settings.may_retry(s)) {
                    tracing::warn!(%err, seconds_left = left, "renewing the leader lease failed: retrying");
                    tokio::time::sleep(Duration::from_millis(250)).await;
                    continue;
                }
                break Err(LeaderError::RenewFailed {
                    namespace: settings.namespace.clone(),
                    name: settings.name.clone(),
                    source: Box::new(err),
                });
            }
        }
    };
    if result.is_err() && !stop.is_cancelled() {
        lost.cancel();
    }
    result
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Arc, Mutex};
    use std::time::Instant;

    use http::{Request, Response};
    use kube::client::Body;
    use serde_json::{Value, json};

    use super::*;

    /// An API server holding one Lease, answering GET, POST and PATCH (spec fields merged);
    /// while `hang` is set it accepts renewals and never answers them.
    #[derive(Clone, Default)]
    struct FakeLeaseServer {
        lease: Arc<Mutex<Option<Value>>>,
        hang: Arc<AtomicBool>,
    }

    impl FakeLeaseServer {
        fn client(&self) -> Client {
            let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
            let server = self.clone();
            tokio::spawn(async move {
                let mut hung = Vec::new();
                while let Some((request, respond)) = handle.next_request().await {
                    let method = request.method().clone();
                    let body = request.into_body().collect_bytes().await.unwrap();
                    if method == http::Method::PATCH && server.hang.load(Ordering::SeqCst) {
                        hung.push(respond);
                        continue;
                    }
                    let (status, value) = server.answer(&method, &body);
                    let bytes = serde_json::to_vec(&value).unwrap();
                    respond.send_response(
                        Response::builder()
                            .status(status)
                            .body(Body::from(bytes))
                            .unwrap(),
                    );
                }
            });
            Client::new(service, "ns")
        }

        fn answer(&self, method: &http::Method, body: &[u8]) -> (u16, Value) {
            let mut lease = self.lease.lock().unwrap();
            match (method.as_str(), lease.as_mut()) {
                ("GET", Some(stored)) => (200, stored.clone()),
                ("GET", None) => (
                    404,
                    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                           "reason": "NotFound", "code": 404, "message": "not found"}),
                ),
                ("POST", _) => {
                    let mut created: Value = serde_json::from_slice(body).unwrap();
                    created["metadata"]["resourceVersion"] = json!("1");
                    *lease = Some(created.clone());
                    (201, created)
                }
                ("PATCH", Some(stored)) => {
                    let patch: Value = serde_json::from_slice(body).unwrap();
                    if let Some(spec) = patch.get("spec").and_then(Value::as_object) {
                        for (key, value) in spec {
                            stored["spec"][key] = value.clone();
                        }
                    }
                    (200, stored.clone())
                }
                _ => (405, json!({"kind": "Status", "code": 405})),
            }
        }

        /// When the stored Lease expires (its renewTime plus duration).
        fn expiry(&self) -> k8s_openapi::jiff::Timestamp {
            let lease: Lease =
                serde_json::from_value(self.lease.lock().unwrap().clone().unwrap()).unwrap();
            let spec = lease.spec.unwrap();
            let seconds = i64::from(spec.lease_duration_seconds.unwrap());
            spec.renew_time.unwrap().0 + k8s_openapi::jiff::SignedDuration::from_secs(seconds)
        }
    }

    fn fast_settings() -> LeaseSettings {
        LeaseSettings {
            duration_seconds: 4,
            grace_seconds: 3,
            retry_period: Duration::from_millis(200),
            ..LeaseSettings::new("ns", "pod-a")
        }
    }

    #[tokio::test]
    async fn a_renewal_that_hangs_gives_up_leadership_before_the_lease_expires() {
        let server = FakeLeaseServer::default();
        let settings = fast_settings();
        let shutdown = CancellationToken::new();
        let leadership = acquire(&server.client(), &settings, &shutdown)
            .await
            .unwrap()
            .unwrap();
        // Answered renewals keep leadership for longer than the lease duration.
        let kept = tokio::time::timeout(Duration::from_secs(6), leadership.lost()).await;
        assert!(kept.is_err(), "leadership lost while the server answered");
        // From now on renewals hang: leadership must end before the Lease can expire.
        server.hang.store(true, Ordering::SeqCst);
        let expiry = server.expiry();
        let started = Instant::now();
        tokio::time::timeout(Duration::from_secs(10), leadership.lost())
            .await
            .expect("a hung renewal never ended leadership");
        let now = k8s_openapi::jiff::Timestamp::now();
        assert!(
            now < expiry,
            "leadership ended {:?} after the Lease expired (waited {:?})",
            now.duration_since(expiry),
            started.elapsed()
        );
        assert!(matches!(
            leadership.release().await,
            Err(LeaderError::RenewFailed { .. })
        ));
    }

    #[test]
    fn requests_time_out_within_the_grace_period() {
        let s = LeaseSettings::new("ns", "pod-a");
        assert_eq!(s.request_timeout(), Duration::from_secs(5) / 3);
        assert!(s.may_retry(4.0));
        assert!(!s.may_retry(3.8));
        let s = fast_settings();
        assert_eq!(s.request_timeout(), Duration::from_secs(1));
    }

    #[test]
    fn defaults_match_the_manifests() {
        let s = LeaseSettings::new("ns", "pod-a");
        assert_eq!(
            (s.name.as_str(), s.duration_seconds, s.grace_seconds),
            ("platform-operators-manager", 15, 5)
        );
    }
}
