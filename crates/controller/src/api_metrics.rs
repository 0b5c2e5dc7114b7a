//! Counts the manager's own requests to the Kubernetes API, as `pom_api_requests_total`
//! `{verb, kind, resource}`.
//!
//! Why: "no writes in a steady state" is a property POM promises (every reconcile compares
//! before it writes), and the API server's audit log is not at hand in every cluster. Counting
//! at the client makes the promise observable from `/metrics` alone, and the `resource` label
//! says which object type a stray write touched.
//!
//! The count is taken where the request enters the client's service stack, so a request that
//! kube's own retry layer repeats counts once: this measures what the manager asks for, not
//! network attempts. Labels stay bounded: `resource` is a type (`deployments.apps`,
//! `platformoperators.platform.openshift.io/status`), never an object name or namespace.

use std::fmt;
use std::task::{Context, Poll};

use http::{Method, Request, Uri};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use tower_layer::Layer;
use tower_service::Service;

/// `kind` of a request that changes state: POST, PUT, PATCH, DELETE.
pub const WRITE: &str = "write";
/// `kind` of every other request (GET, including lists and watches).
pub const READ: &str = "read";

/// The labels of one series.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    /// The Kubernetes verb: get, list, watch, create, update, patch, delete, deletecollection
    /// (`other` for a method the API does not map to a verb).
    pub verb: &'static str,
    /// [`WRITE`] or [`READ`].
    pub kind: &'static str,
    /// `<plural>[.<group>][/<subresource>]`, or the first path segment for non-resource URLs.
    pub resource: String,
}

/// The request counters, shared by every clone (the client's service and `/metrics`).
#[derive(Clone, Default)]
pub struct ApiRequests {
    family: Family<RequestLabels, Counter>,
}

impl fmt::Debug for ApiRequests {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiRequests").finish_non_exhaustive()
    }
}

impl ApiRequests {
    /// Counts one request.
    pub fn record(&self, method: &Method, uri: &Uri) {
        self.family.get_or_create(&classify(method, uri)).inc();
    }

    /// A tower layer counting every request passed through it into these counters.
    #[must_use]
    pub fn layer(&self) -> ApiRequestsLayer {
        ApiRequestsLayer {
            requests: self.clone(),
        }
    }

    /// The counter family, for encoding.
    #[must_use]
    pub fn family(&self) -> &Family<RequestLabels, Counter> {
        &self.family
    }
}

/// The labels of a request: its verb, whether it writes, and the resource type it targets.
#[must_use]
pub fn classify(method: &Method, uri: &Uri) -> RequestLabels {
    let target = Target::parse(uri.path());
    let watch = uri.query().is_some_and(|q| {
        q.split('&')
            .any(|pair| pair == "watch=true" || pair == "watch=1")
    });
    let (verb, kind) = match *method {
        Method::GET if watch => ("watch", READ),
        Method::GET if target.collection => ("list", READ),
        Method::GET => ("get", READ),
        // TokenReviews and SubjectAccessReviews (the `/metrics` guard) are POSTs that store
        // nothing: counting them as writes would break "no writes in a steady state".
        Method::POST if target.is_review() => ("create", READ),
        Method::POST => ("create", WRITE),
        Method::PUT => ("update", WRITE),
        Method::PATCH => ("patch", WRITE),
        Method::DELETE if target.collection => ("deletecollection", WRITE),
        Method::DELETE => ("delete", WRITE),
        _ => ("other", READ),
    };
    RequestLabels {
        verb,
        kind,
        resource: target.resource,
    }
}

/// What a request path addresses.
struct Target {
    resource: String,
    /// The path names a collection (no object name), so GET is a list.
    collection: bool,
}

impl Target {
    /// Parses `/api/<v>/...` and `/apis/<group>/<v>/...`, namespaced or not; anything else is
    /// a non-resource URL named by its first segment.
    fn parse(path: &str) -> Self {
        let segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
        let (group, rest) = match segments.as_slice() {
            ["api", _version, rest @ ..] => ("", rest),
            ["apis", group, _version, rest @ ..] => (*group, rest),
            other => {
                return Self {
                    resource: other.first().map_or("/", |s| *s).to_owned(),
                    collection: false,
                };
            }
        };
        // `namespaces/<ns>/<resource>...` addresses a namespaced resource, except the
        // namespace's own subresources (`namespaces/<ns>/status`, `.../finalize`).
        let rest = match rest {
            ["namespaces", _ns, next, ..] if !matches!(*next, "status" | "finalize") => &rest[2..],
            _ => rest,
        };
        let (plural, collection, subresource) = match rest {
            [] => ("", true, None),
            [plural] => (*plural, true, None),
            [plural, _name] => (*plural, false, None),
            [plural, _name, sub, ..] => (*plural, false, Some(*sub)),
        };
        let mut resource = plural.to_owned();
        if !group.is_empty() {
            resource.push('.');
            resource.push_str(group);
        }
        if let Some(sub) = subresource {
            resource.push('/');
            resource.push_str(sub);
        }
        Self {
            resource,
            collection,
        }
    }
}

impl Target {
    /// An authentication or authorisation review, which the API server answers without storing.
    fn is_review(&self) -> bool {
        self.resource.ends_with("reviews.authentication.k8s.io")
            || self.resource.ends_with("reviews.authorization.k8s.io")
    }
}

/// Wraps a service in [`CountRequests`].
#[derive(Clone, Debug)]
pub struct ApiRequestsLayer {
    requests: ApiRequests,
}

impl<S> Layer<S> for ApiRequestsLayer {
    type Service = CountRequests<S>;

    fn layer(&self, inner: S) -> Self::Service {
        CountRequests {
            inner,
            requests: self.requests.clone(),
        }
    }
}

/// A service that counts each request, then hands it on unchanged.
#[derive(Clone, Debug)]
pub struct CountRequests<S> {
    inner: S,
    requests: ApiRequests,
}

impl<S, B> Service<Request<B>> for CountRequests<S>
where
    S: Service<Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, request: Request<B>) -> Self::Future {
        self.requests.record(request.method(), request.uri());
        self.inner.call(request)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn labels(method: Method, uri: &str) -> (&'static str, &'static str, String) {
        let l = classify(&method, &uri.parse().unwrap());
        (l.verb, l.kind, l.resource)
    }

    fn l(
        verb: &'static str,
        kind: &'static str,
        resource: &str,
    ) -> (&'static str, &'static str, String) {
        (verb, kind, resource.to_owned())
    }

    #[test]
    fn classifies_verbs_and_resources() {
        let po = "/apis/platform.openshift.io/v1alpha1/platformoperators";
        assert_eq!(
            labels(Method::GET, &format!("{po}?watch=true&resourceVersion=5")),
            l("watch", READ, "platformoperators.platform.openshift.io")
        );
        assert_eq!(
            labels(Method::GET, po),
            l("list", READ, "platformoperators.platform.openshift.io")
        );
        assert_eq!(
            labels(
                Method::PATCH,
                &format!("{po}/alpha/status?fieldManager=pom")
            ),
            l(
                "patch",
                WRITE,
                "platformoperators.platform.openshift.io/status"
            )
        );
        assert_eq!(
            labels(
                Method::PATCH,
                "/apis/apps/v1/namespaces/alpha/deployments/alpha-controller"
            ),
            l("patch", WRITE, "deployments.apps")
        );
        assert_eq!(
            labels(
                Method::GET,
                "/api/v1/namespaces/alpha/serviceaccounts/alpha"
            ),
            l("get", READ, "serviceaccounts")
        );
        assert_eq!(
            labels(Method::POST, "/api/v1/namespaces/alpha/events"),
            l("create", WRITE, "events")
        );
        assert_eq!(
            labels(
                Method::PUT,
                "/apis/coordination.k8s.io/v1/namespaces/pom/leases/pom"
            ),
            l("update", WRITE, "leases.coordination.k8s.io")
        );
        assert_eq!(
            labels(Method::DELETE, "/api/v1/namespaces/alpha"),
            l("delete", WRITE, "namespaces")
        );
        assert_eq!(
            labels(Method::PUT, "/api/v1/namespaces/alpha/finalize"),
            l("update", WRITE, "namespaces/finalize")
        );
        assert_eq!(
            labels(Method::DELETE, "/api/v1/namespaces/alpha/configmaps"),
            l("deletecollection", WRITE, "configmaps")
        );
        assert_eq!(
            labels(Method::POST, "/apis/authentication.k8s.io/v1/tokenreviews"),
            l("create", READ, "tokenreviews.authentication.k8s.io")
        );
        assert_eq!(
            labels(
                Method::POST,
                "/apis/authorization.k8s.io/v1/subjectaccessreviews"
            ),
            l("create", READ, "subjectaccessreviews.authorization.k8s.io")
        );
        assert_eq!(labels(Method::GET, "/version"), l("get", READ, "version"));
        assert_eq!(labels(Method::GET, "/apis"), l("get", READ, "apis"));
    }

    #[tokio::test]
    async fn layer_counts_each_request_and_passes_it_on() {
        let requests = ApiRequests::default();
        let (service, mut handle) = tower_test::mock::pair::<Request<()>, &'static str>();
        let mut service = requests.layer().layer(service);
        let send = |method: Method, uri: &str| {
            Request::builder().method(method).uri(uri).body(()).unwrap()
        };
        let server = tokio::spawn(async move {
            let mut seen = Vec::new();
            while let Some((request, reply)) = handle.next_request().await {
                seen.push(request.method().clone());
                reply.send_response("ok");
            }
            seen
        });
        for (method, uri) in [
            (
                Method::PATCH,
                "/apis/platform.openshift.io/v1alpha1/platformoperators/a/status",
            ),
            (
                Method::PATCH,
                "/apis/platform.openshift.io/v1alpha1/platformoperators/b/status",
            ),
            (
                Method::GET,
                "/apis/platform.openshift.io/v1alpha1/platformoperators/a",
            ),
        ] {
            std::future::poll_fn(|cx| service.poll_ready(cx))
                .await
                .unwrap();
            assert_eq!(service.call(send(method, uri)).await.unwrap(), "ok");
        }
        drop(service);
        assert_eq!(
            server.await.unwrap(),
            [Method::PATCH, Method::PATCH, Method::GET]
        );
        let count = |verb, kind, resource: &str| {
            requests
                .family()
                .get_or_create(&RequestLabels {
                    verb,
                    kind,
                    resource: resource.to_owned(),
                })
                .get()
        };
        assert_eq!(
            count(
                "patch",
                WRITE,
                "platformoperators.platform.openshift.io/status"
            ),
            2
        );
        assert_eq!(
            count("get", READ, "platformoperators.platform.openshift.io"),
            1
        );
    }
}
