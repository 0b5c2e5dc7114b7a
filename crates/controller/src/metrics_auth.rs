//! Who may read `/metrics`: the bearer token of every request is authenticated by a TokenReview
//! and authorised by a SubjectAccessReview for `get` on the non-resource URL `/metrics`, the
//! same checks kube-rbac-proxy and controller-runtime's metrics filter make, done in-process so
//! that the payload ships no sidecar (docs/decisions.md).
//!
//! Answers: 401 without a bearer token or with one the API server does not authenticate (no
//! API call at all without a token), 403 when the authenticated user may not `get /metrics`,
//! 503 when the API server could not be asked (never cached: the next scrape asks again).
//!
//! Verdicts are cached per token (by its SHA-256, never the token itself) for a short time, so
//! that a Prometheus scraping every 30 s costs two reviews every [`ALLOWED_TTL`] rather than two
//! per scrape. Refusals are cached for a shorter [`REFUSED_TTL`], which still stops a client
//! retrying a bad token in a loop from turning each attempt into two API calls. The cache is
//! bounded ([`CACHE_CAPACITY`] entries), so a stream of distinct tokens cannot grow it.
//!
//! Reviews of tokens the cache does not know are rate limited ([`REVIEWS_PER_SECOND`], bursts of
//! [`REVIEW_BURST`]): a client sending a new bogus token on every request would otherwise turn
//! each request into a TokenReview, an API call the manager makes on an anonymous client's
//! behalf. Past the limit the answer is 429 with `Retry-After`, without an API call. A token
//! the cache still remembers as allowed (its verdict expired, not yet evicted) is re-reviewed
//! whatever the limit, so a flood does not lock out the real scraper.
//!
//! The decisions (which header is a token, what a review means, which status answers it, what
//! the cache keeps) are pure functions; [`MetricsAuth`] only adds the two API calls.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::authentication::v1::{
    TokenReview, TokenReviewSpec, TokenReviewStatus, UserInfo,
};
use k8s_openapi::api::authorization::v1::{
    NonResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec, SubjectAccessReviewStatus,
};
use kube::api::{Api, PostParams};
use sha2::{Digest, Sha256};

/// The non-resource URL a scraper must be allowed to `get`.
pub const METRICS_PATH: &str = "/metrics";
/// How long an allowed token is trusted without asking again. Revoking a scraper's access takes
/// effect within this time.
pub const ALLOWED_TTL: Duration = Duration::from_secs(120);
/// How long a refused token stays refused without asking again. Granting access takes effect
/// within this time.
pub const REFUSED_TTL: Duration = Duration::from_secs(10);
/// Most tokens remembered at once (Prometheus replicas each use one).
pub const CACHE_CAPACITY: usize = 256;
/// Reviews of unknown tokens per second, sustained (each is one TokenReview, and one
/// SubjectAccessReview when the token authenticates). A platform Prometheus needs one per
/// replica every [`ALLOWED_TTL`]; two a second is plenty for scrapers and caps what bogus
/// tokens cost the API server at two TokenReviews a second.
pub const REVIEWS_PER_SECOND: u32 = 2;
/// Reviews of unknown tokens allowed at once before [`REVIEWS_PER_SECOND`] applies: both
/// Prometheus replicas and a few humans with `curl` starting together.
pub const REVIEW_BURST: u32 = 10;
/// Longest wait for either review.
const REVIEW_TIMEOUT: Duration = Duration::from_secs(10);

/// What the reviews concluded about one token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Authenticated and allowed to `get /metrics`.
    Allowed,
    /// No token, or one the API server does not authenticate.
    Unauthenticated,
    /// Authenticated, but not allowed.
    Forbidden,
}

impl Verdict {
    /// The refusal to answer with, or `None` to serve the request.
    #[must_use]
    pub fn refusal(self) -> Option<StatusCode> {
        match self {
            Self::Allowed => None,
            Self::Unauthenticated => Some(StatusCode::UNAUTHORIZED),
            Self::Forbidden => Some(StatusCode::FORBIDDEN),
        }
    }

    /// How long this verdict may be reused.
    #[must_use]
    pub fn ttl(self) -> Duration {
        match self {
            Self::Allowed => ALLOWED_TTL,
            Self::Unauthenticated | Self::Forbidden => REFUSED_TTL,
        }
    }
}

/// Why a token could not be reviewed.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("{review}: {source}")]
    Api {
        review: &'static str,
        #[source]
        source: kube::Error,
    },
    #[error("{0}: no answer within {REVIEW_TIMEOUT:?}")]
    Timeout(&'static str),
    /// Too many unknown tokens to review: more than [`REVIEWS_PER_SECOND`] (bursts of
    /// [`REVIEW_BURST`]); the client should retry after a second.
    #[error(
        "more than {REVIEWS_PER_SECOND} reviews a second of unknown tokens (bursts of \
         {REVIEW_BURST}, REVIEWS_PER_SECOND); retry later"
    )]
    RateLimited,
}

/// A token bucket: [`REVIEW_BURST`] reviews at once, refilled at [`REVIEWS_PER_SECOND`].
#[derive(Debug)]
pub struct ReviewLimiter {
    /// Reviews available now, in thousandths (so refills of a fraction of a review count).
    milli_tokens: u64,
    capacity: u64,
    per_second: u64,
    last: Instant,
}

impl ReviewLimiter {
    #[must_use]
    pub fn new(burst: u32, per_second: u32, now: Instant) -> Self {
        let capacity = u64::from(burst) * 1000;
        Self {
            milli_tokens: capacity,
            capacity,
            per_second: u64::from(per_second),
            last: now,
        }
    }

    /// Takes one review if one is available at `now`.
    pub fn try_take(&mut self, now: Instant) -> bool {
        let elapsed = now.saturating_duration_since(self.last);
        let refill = u64::try_from(elapsed.as_millis())
            .unwrap_or(u64::MAX)
            .saturating_mul(self.per_second);
        if refill > 0 {
            self.milli_tokens = self.milli_tokens.saturating_add(refill).min(self.capacity);
            self.last = now;
        }
        if self.milli_tokens >= 1000 {
            self.milli_tokens -= 1000;
            true
        } else {
            false
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header (scheme case-insensitive, RFC 7235).
#[must_use]
pub fn bearer_token(headers: &HeaderMap) -> Option<&str> {
    let value = headers.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = value.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The user a TokenReview authenticated, if it did.
#[must_use]
pub fn authenticated_user(status: Option<TokenReviewStatus>) -> Option<UserInfo> {
    let status = status?;
    if status.authenticated != Some(true) {
        return None;
    }
    status.user.filter(|u| u.username.is_some())
}

/// The SubjectAccessReview asking whether `user` may `get /metrics`.
#[must_use]
pub fn access_review(user: UserInfo) -> SubjectAccessReview {
    SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: user.username,
            groups: user.groups,
            uid: user.uid,
            extra: user.extra,
            non_resource_attributes: Some(NonResourceAttributes {
                path: Some(METRICS_PATH.to_owned()),
                verb: Some("get".to_owned()),
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    }
}

/// Allowed only when the authoriser said allowed and did not also say denied.
#[must_use]
pub fn access_verdict(status: Option<&SubjectAccessReviewStatus>) -> Verdict {
    match status {
        Some(s) if s.allowed && s.denied != Some(true) => Verdict::Allowed,
        _ => Verdict::Forbidden,
    }
}

type TokenKey = [u8; 32];

fn token_key(token: &str) -> TokenKey {
    Sha256::digest(token.as_bytes()).into()
}

/// Verdicts by token hash, each until its expiry, at most `capacity` of them.
#[derive(Debug)]
pub struct ReviewCache {
    capacity: usize,
    entries: HashMap<TokenKey, (Verdict, Instant)>,
}

impl ReviewCache {
    #[must_use]
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            entries: HashMap::new(),
        }
    }

    /// The verdict on `token` if one is still valid at `now`.
    #[must_use]
    pub fn get(&self, token: &str, now: Instant) -> Option<Verdict> {
        self.entries
            .get(&token_key(token))
            .filter(|(_, expires)| now < *expires)
            .map(|(verdict, _)| *verdict)
    }

    /// Whether `token`'s last verdict, still remembered even if expired, was `Allowed`: its
    /// re-review is not rate limited.
    #[must_use]
    pub fn was_allowed(&self, token: &str) -> bool {
        self.entries
            .get(&token_key(token))
            .is_some_and(|(verdict, _)| *verdict == Verdict::Allowed)
    }

    /// Remembers `verdict` for its TTL; when full, drops expired entries first, then the one
    /// expiring soonest.
    pub fn insert(&mut self, token: &str, verdict: Verdict, now: Instant) {
        let key = token_key(token);
        if self.capacity == 0 {
            return;
        }
        if !self.entries.contains_key(&key) && self.entries.len() >= self.capacity {
            self.entries.retain(|_, (_, expires)| now < *expires);
            if self.entries.len() >= self.capacity
                && let Some(oldest) = self
                    .entries
                    .iter()
                    .min_by_key(|(_, (_, expires))| *expires)
                    .map(|(k, _)| *k)
            {
                self.entries.remove(&oldest);
            }
        }
        self.entries.insert(key, (verdict, now + verdict.ttl()));
    }

    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

/// Reviews tokens with the manager's client (which needs `create` on tokenreviews and
/// subjectaccessreviews) and caches the verdicts.
pub struct MetricsAuth {
    client: kube::Client,
    cache: Mutex<ReviewCache>,
    limiter: Mutex<ReviewLimiter>,
}

impl std::fmt::Debug for MetricsAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MetricsAuth").finish_non_exhaustive()
    }
}

impl MetricsAuth {
    #[must_use]
    pub fn new(client: kube::Client) -> Arc<Self> {
        Arc::new(Self {
            client,
            cache: Mutex::new(ReviewCache::new(CACHE_CAPACITY)),
            limiter: Mutex::new(ReviewLimiter::new(
                REVIEW_BURST,
                REVIEWS_PER_SECOND,
                Instant::now(),
            )),
        })
    }

    /// The verdict on `token`, from the cache or from a TokenReview and a SubjectAccessReview.
    ///
    /// # Errors
    /// [`ReviewError`] when the API server cannot be asked; nothing is cached then.
    /// [`ReviewError::RateLimited`] without any API call when too many unknown tokens came.
    pub async fn verdict(&self, token: &str) -> Result<Verdict, ReviewError> {
        let was_allowed = {
            let cache = self.lock();
            if let Some(verdict) = cache.get(token, Instant::now()) {
                return Ok(verdict);
            }
            cache.was_allowed(token)
        };
        if !was_allowed
            && !self
                .limiter
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .try_take(Instant::now())
        {
            return Err(ReviewError::RateLimited);
        }
        let verdict = self.review(token).await?;
        self.lock().insert(token, verdict, Instant::now());
        Ok(verdict)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, ReviewCache> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    async fn review(&self, token: &str) -> Result<Verdict, ReviewError> {
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: Some(token.to_owned()),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let reviewed = create(
            Api::<TokenReview>::all(self.client.clone()),
            &review,
            "TokenReview",
        )
        .await?;
        let Some(user) = authenticated_user(reviewed.status) else {
            return Ok(Verdict::Unauthenticated);
        };
        let username = user.username.clone().unwrap_or_default();
        let access = create(
            Api::<SubjectAccessReview>::all(self.client.clone()),
            &access_review(user),
            "SubjectAccessReview",
        )
        .await?;
        let verdict = access_verdict(access.status.as_ref());
        if verdict == Verdict::Forbidden {
            tracing::debug!(user = %username, "refused a /metrics scrape: not allowed to get /metrics");
        }
        Ok(verdict)
    }
}

async fn create<K>(api: Api<K>, object: &K, review: &'static str) -> Result<K, ReviewError>
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    tokio::time::timeout(REVIEW_TIMEOUT, api.create(&PostParams::default(), object))
        .await
        .map_err(|_| ReviewError::Timeout(review))?
        .map_err(|source| ReviewError::Api { review, source })
}

/// axum middleware: serves the request only for a token allowed to `get /metrics`.
pub async fn require_metrics_reader(
    State(auth): State<Arc<MetricsAuth>>,
    request: Request,
    next: Next,
) -> Response {
    let verdict = match bearer_token(request.headers()) {
        None => Ok(Verdict::Unauthenticated),
        Some(token) => auth.verdict(token).await,
    };
    match verdict {
        Ok(verdict) => match verdict.refusal() {
            None => next.run(request).await,
            Some(StatusCode::UNAUTHORIZED) => (
                StatusCode::UNAUTHORIZED,
                [(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"))],
                "Unauthorized\n",
            )
                .into_response(),
            Some(status) => (status, "Forbidden: get /metrics is not allowed\n").into_response(),
        },
        Err(ReviewError::RateLimited) => {
            tracing::debug!("refused a /metrics scrape: too many unknown tokens to review");
            (
                StatusCode::TOO_MANY_REQUESTS,
                [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                "too many unknown tokens to review; retry later\n",
            )
                .into_response()
        }
        Err(err) => {
            tracing::warn!(%err, "could not review a /metrics scrape's token");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                "cannot review the token now\n",
            )
                .into_response()
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(header::AUTHORIZATION, HeaderValue::from_str(value).unwrap());
        headers
    }

    /// A fake API server answering reviews: the first TokenReview fails with a 500, later
    /// ones authenticate `alice`; SubjectAccessReviews allow her. Counts the calls.
    fn fake_api(calls: Arc<std::sync::atomic::AtomicUsize>) -> kube::Client {
        use http::{Request, Response};
        use kube::client::Body;
        let (service, mut handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
        tokio::spawn(async move {
            while let Some((request, respond)) = handle.next_request().await {
                let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let path = request.uri().path().to_owned();
                let (status, body) = if path.ends_with("/tokenreviews") && n == 0 {
                    (
                        500,
                        serde_json::json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": "etcd is down", "code": 500}),
                    )
                } else if path.ends_with("/tokenreviews") {
                    (
                        200,
                        serde_json::json!({"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": {},
                        "status": {"authenticated": true, "user": {"username": "alice"}}}),
                    )
                } else {
                    (
                        200,
                        serde_json::json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
                        "spec": {}, "status": {"allowed": true}}),
                    )
                };
                respond.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(serde_json::to_vec(&body).unwrap()))
                        .unwrap(),
                );
            }
        });
        kube::Client::new(service, "default")
    }

    #[tokio::test]
    async fn an_api_error_is_not_cached_and_a_verdict_is() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let auth = MetricsAuth::new(fake_api(calls.clone()));
        let calls_now = || calls.load(std::sync::atomic::Ordering::SeqCst);
        let err = auth.verdict("token").await.unwrap_err();
        assert!(
            matches!(
                err,
                ReviewError::Api {
                    review: "TokenReview",
                    ..
                }
            ),
            "{err}"
        );
        assert_eq!(calls_now(), 1);
        // The failure was not remembered: the next scrape asks again, both reviews.
        assert_eq!(auth.verdict("token").await.unwrap(), Verdict::Allowed);
        assert_eq!(calls_now(), 3);
        // From the cache: no more calls.
        for _ in 0..5 {
            assert_eq!(auth.verdict("token").await.unwrap(), Verdict::Allowed);
        }
        assert_eq!(calls_now(), 3);
        // Another token is reviewed on its own.
        assert_eq!(auth.verdict("other").await.unwrap(), Verdict::Allowed);
        assert_eq!(calls_now(), 5);
    }

    #[tokio::test]
    async fn reviews_of_unknown_tokens_are_rate_limited_and_the_known_scraper_is_not() {
        let calls = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let auth = MetricsAuth::new(fake_api(calls.clone()));
        let calls_now = || calls.load(std::sync::atomic::Ordering::SeqCst);
        // The first TokenReview of the fake fails: spend it.
        auth.verdict("warm-up").await.unwrap_err();
        assert_eq!(auth.verdict("prometheus").await.unwrap(), Verdict::Allowed);
        // A flood of distinct bogus tokens: the burst is reviewed, the rest refused unasked.
        let mut limited = 0;
        for i in 0..200 {
            match auth.verdict(&format!("bogus-{i}")).await {
                Err(ReviewError::RateLimited) => limited += 1,
                other => assert!(other.is_ok(), "{other:?}"),
            }
        }
        let reviewed = usize::try_from(REVIEW_BURST).unwrap();
        assert!(limited >= 200 - reviewed - 1, "{limited} limited");
        assert!(
            calls_now() <= 1 + 2 + 2 * (reviewed + 1),
            "{} calls",
            calls_now()
        );
        assert!(
            auth.verdict("bogus-new")
                .await
                .unwrap_err()
                .to_string()
                .contains("REVIEWS_PER_SECOND")
        );
        // The scraper's verdict expired meanwhile: re-reviewed although the bucket is empty.
        {
            let mut cache = auth.lock();
            let expired = Instant::now().checked_sub(ALLOWED_TTL).unwrap();
            cache.insert("prometheus", Verdict::Allowed, expired);
        }
        assert_eq!(auth.verdict("prometheus").await.unwrap(), Verdict::Allowed);
    }

    #[test]
    fn the_review_limiter_refills_at_its_rate() {
        let now = Instant::now();
        let mut limiter = ReviewLimiter::new(3, 2, now);
        assert!((0..3).all(|_| limiter.try_take(now)));
        assert!(!limiter.try_take(now));
        // Half a second: one review.
        let later = now + Duration::from_millis(500);
        assert!(limiter.try_take(later));
        assert!(!limiter.try_take(later));
        // Never more than the burst, however long it waited.
        let much_later = later + Duration::from_secs(3600);
        assert_eq!((0..10).filter(|_| limiter.try_take(much_later)).count(), 3);
    }

    #[test]
    fn bearer_tokens() {
        assert_eq!(bearer_token(&HeaderMap::new()), None);
        assert_eq!(bearer_token(&headers("Bearer abc")), Some("abc"));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Some("abc"));
        assert_eq!(bearer_token(&headers("Basic YTpi")), None);
        assert_eq!(bearer_token(&headers("Bearer ")), None);
        assert_eq!(bearer_token(&headers("Bearer")), None);
    }

    #[test]
    fn verdicts_map_to_statuses() {
        assert_eq!(Verdict::Allowed.refusal(), None);
        assert_eq!(
            Verdict::Unauthenticated.refusal(),
            Some(StatusCode::UNAUTHORIZED)
        );
        assert_eq!(Verdict::Forbidden.refusal(), Some(StatusCode::FORBIDDEN));
        assert!(Verdict::Allowed.ttl() > Verdict::Forbidden.ttl());
    }

    #[test]
    fn only_an_authenticated_review_with_a_user_names_one() {
        let user = UserInfo {
            username: Some("system:serviceaccount:mon:prom".into()),
            groups: Some(vec!["system:serviceaccounts".into()]),
            ..UserInfo::default()
        };
        let status = |authenticated, user: Option<UserInfo>| {
            Some(TokenReviewStatus {
                authenticated,
                user,
                ..TokenReviewStatus::default()
            })
        };
        assert_eq!(authenticated_user(None), None);
        assert_eq!(authenticated_user(status(None, Some(user.clone()))), None);
        assert_eq!(
            authenticated_user(status(Some(false), Some(user.clone()))),
            None
        );
        assert_eq!(authenticated_user(status(Some(true), None)), None);
        assert_eq!(
            authenticated_user(status(Some(true), Some(user.clone()))),
            Some(user)
        );
    }

    #[test]
    fn the_access_review_asks_for_get_on_metrics_as_the_user() {
        let review = access_review(UserInfo {
            username: Some("alice".into()),
            uid: Some("u-1".into()),
            groups: Some(vec!["g".into()]),
            extra: None,
        });
        let json = serde_json::to_value(&review).unwrap();
        assert_eq!(
            json["spec"],
            serde_json::json!({
                "user": "alice", "uid": "u-1", "groups": ["g"],
                "nonResourceAttributes": {"path": "/metrics", "verb": "get"}
            })
        );
    }

    #[test]
    fn denied_wins_over_allowed() {
        let status = |allowed, denied| SubjectAccessReviewStatus {
            allowed,
            denied,
            ..SubjectAccessReviewStatus::default()
        };
        assert_eq!(access_verdict(None), Verdict::Forbidden);
        assert_eq!(access_verdict(Some(&status(true, None))), Verdict::Allowed);
        assert_eq!(
            access_verdict(Some(&status(true, Some(false)))),
            Verdict::Allowed
        );
        assert_eq!(
            access_verdict(Some(&status(true, Some(true)))),
            Verdict::Forbidden
        );
        assert_eq!(
            access_verdict(Some(&status(false, None))),
            Verdict::Forbidden
        );
    }

    #[test]
    fn the_cache_expires_by_verdict() {
        let now = Instant::now();
        let mut cache = ReviewCache::new(4);
        cache.insert("good", Verdict::Allowed, now);
        cache.insert("bad", Verdict::Forbidden, now);
        let later = |d: Duration| now + d;
        assert_eq!(cache.get("good", now), Some(Verdict::Allowed));
        assert_eq!(cache.get("other", now), None);
        assert_eq!(
            cache.get("bad", later(REFUSED_TTL - Duration::from_millis(1))),
            Some(Verdict::Forbidden)
        );
        assert_eq!(cache.get("bad", later(REFUSED_TTL)), None);
        assert_eq!(
            cache.get("good", later(REFUSED_TTL)),
            Some(Verdict::Allowed)
        );
        assert_eq!(cache.get("good", later(ALLOWED_TTL)), None);
    }

    #[test]
    fn the_cache_stays_bounded_dropping_expired_then_soonest_expiring() {
        let now = Instant::now();
        let mut cache = ReviewCache::new(3);
        cache.insert("refused", Verdict::Unauthenticated, now);
        cache.insert("a", Verdict::Allowed, now);
        cache.insert("b", Verdict::Allowed, now + Duration::from_secs(1));
        // Full; nothing expired: the soonest-expiring entry (the refusal) goes.
        cache.insert("c", Verdict::Allowed, now + Duration::from_secs(2));
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("refused", now), None);
        assert_eq!(cache.get("a", now), Some(Verdict::Allowed));
        // Updating a present token does not evict anyone.
        cache.insert("a", Verdict::Forbidden, now + Duration::from_secs(3));
        assert_eq!(cache.len(), 3);
        assert_eq!(
            cache.get("a", now + Duration::from_secs(3)),
            Some(Verdict::Forbidden)
        );
        // Once a and b expired, a newcomer replaces the expired ones.
        let much_later = now + ALLOWED_TTL + Duration::from_millis(1500);
        cache.insert("d", Verdict::Allowed, much_later);
        assert_eq!(cache.len(), 2, "c and d");
        assert_eq!(cache.get("c", much_later), Some(Verdict::Allowed));
        assert_eq!(cache.get("d", much_later), Some(Verdict::Allowed));

        // A flood of bad tokens evicts refusals (they expire first), not the allowed scraper.
        let mut cache = ReviewCache::new(3);
        cache.insert("prometheus", Verdict::Allowed, now);
        for i in 0..1000 {
            cache.insert(&format!("t{i}"), Verdict::Unauthenticated, now);
        }
        assert_eq!(cache.len(), 3);
        assert_eq!(cache.get("prometheus", now), Some(Verdict::Allowed));
        assert!(!cache.is_empty());
    }
}
