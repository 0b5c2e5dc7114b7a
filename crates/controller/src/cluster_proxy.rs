//! The cluster-wide proxy and trusted CA bundle, as the manager's own pulls use them (PRODUCT
//! §10, issue 23 item 2). The proxy operators get (OLM v0 injects it, issue 23 item 3) is only
//! published from here ([`OperatorProxy`], `Context::operator_proxy`): the PO controller
//! gathers it, and judges a change as a configuration change of each operator.
//!
//! On OpenShift every component reaches registries outside the cluster through the `Proxy`
//! `cluster` (`status.httpProxy`, `httpsProxy`, `noProxy`: the effective values the cluster
//! network operator writes), and trusts the CA certificates the admin names in
//! `Proxy.spec.trustedCA`. The network operator merges those with the system roots and injects
//! the bundle into every ConfigMap labelled `config.openshift.io/inject-trusted-cabundle:
//! "true"`; an operator ships such a ConfigMap, empty, and reads it. POM does that:
//! [`TRUSTED_CA_CONFIGMAP`] in the manager's namespace, shipped with the OpenShift manifests,
//! so the manager needs no read in `openshift-config` and gets exactly what the platform's own
//! components trust. On plain Kubernetes there is no `Proxy` kind (no proxy), and an admin
//! may create that ConfigMap with key `ca-bundle.crt` themselves.
//!
//! - gather: a watch of the `Proxy` named `cluster` and one of [`TRUSTED_CA_CONFIGMAP`] feed a
//!   [`Views`] (pure: what is known of each). A kind the API server does not serve (no CRD)
//!   or an object that does not exist means no proxy / no trusted CA; the watches keep
//!   retrying (kube's backoff, at most 30 s apart), so a CRD installed later is picked up, and
//!   an object created later is seen at once;
//! - decide: [`decide`] (pure, table-tested) gives the [`State`]: the
//!   [`PullNetwork`] in force and what is wrong. Settings that cannot be used (a proxy URL the
//!   network operator would refuse, a bundle with no usable certificate) or cannot be read
//!   leave **the last good ones** in force: dropping a proxy or a CA would break every pull of
//!   a cluster that needs them;
//! - act: the network is handed to the puller ([`pom_oci::ImagePuller::set_network`]), which
//!   builds new registry clients from then on. Every pull after that uses it: a failing
//!   Catalog at its next backoff retry, a serving one at its next poll;
//! - report: a change in force is logged (info); a refusal is logged (warn) and published as a
//!   Warning Event on the object at fault (the `Proxy` `cluster`, or the ConfigMap), so
//!   `kubectl describe` shows it; the end of a problem is logged.
//!
//! The watches run in the leader, the only replica that pulls: [`start`] is called when the
//! controllers start and returns once both were read (or after [`FIRST_READ_WAIT`]), so the
//! first pulls already go through the proxy. They stop with the controllers.

use std::sync::Arc;
use std::time::Duration;

use futures::{Stream, StreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use kube::api::Api;
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Resource as _, ResourceExt as _};
use pom_api::openshift::proxy::{CLUSTER_PROXY_NAME, Proxy, TRUSTED_CA_BUNDLE_KEY};
use pom_api::platform_operator::ClusterProxyEnv;
use pom_oci::auth::ConfigMapKey;
use pom_oci::network::{ProxyError, ProxySettings, PullNetwork, TrustedCa, TrustedCaError};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::Context;
use crate::events::{Event, EventType};

/// The ConfigMap in the manager's namespace the cluster network operator injects the trusted
/// CA bundle into (labelled `config.openshift.io/inject-trusted-cabundle: "true"` in the
/// OpenShift manifests), key `ca-bundle.crt`.
pub const TRUSTED_CA_CONFIGMAP: &str = "platform-operators-trusted-ca-bundle";

/// How long the controllers' start waits for the first reading of the proxy and the trusted
/// CA (two single-object lists: milliseconds; this covers an API server slow at start-up).
/// Past it they start anyway, and pick the settings up when read.
pub const FIRST_READ_WAIT: Duration = Duration::from_secs(10);

/// Longest Event note (the API's limit is 1 kB).
const MAX_EVENT_NOTE_BYTES: usize = 1000;

/// The cluster proxy operators get: the `Proxy` `cluster`'s status values as listed, copied as
/// they are (as OLM v0 does; the manager's own pulls judge them apart, in [`State`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum OperatorProxy {
    /// Not listed yet (or its first list failed): the PO controller keeps what each operator
    /// runs with, so a manager that cannot read the Proxy restarts no operator.
    #[default]
    Unknown,
    /// Listed: its status values, `None` with no Proxy (or no Proxy kind) or an empty status.
    Listed(Option<ClusterProxyEnv>),
}

/// What operators get from what is known of the Proxy (pure).
fn operator_proxy(seen: &Seen<Proxy>) -> OperatorProxy {
    match seen {
        Seen::Pending | Seen::Failed(_) => OperatorProxy::Unknown,
        Seen::Listed(proxy) => OperatorProxy::Listed(
            proxy
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .map(|status| ClusterProxyEnv {
                    http_proxy: status.http_proxy.clone(),
                    https_proxy: status.https_proxy.clone(),
                    no_proxy: status.no_proxy.clone(),
                })
                .filter(|env| !env.is_empty()),
        ),
    }
}

/// What is known of one watched object.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Seen<T> {
    /// Nothing yet.
    Pending,
    /// The first list failed (not with "not served"); the watch retries.
    Failed(String),
    /// Listed: the object, or `None` when it does not exist or its kind is not served. Later
    /// watch failures leave it in force while the watch recovers.
    Listed(Option<T>),
}

/// A watch failure, as [`Seen`] tells them apart.
#[derive(Debug, Clone, PartialEq, Eq)]
enum WatchFailure {
    /// 404: the kind is not served (the `Proxy` CRD is not installed: plain Kubernetes).
    NotServed,
    /// Anything else (permissions, the API server), with its message.
    Other(String),
}

impl WatchFailure {
    fn of(err: &watcher::Error) -> Self {
        let not_found = match err {
            watcher::Error::InitialListFailed(kube::Error::Api(status))
            | watcher::Error::WatchStartFailed(kube::Error::Api(status))
            | watcher::Error::WatchFailed(kube::Error::Api(status))
            | watcher::Error::WatchError(status) => status.code == 404,
            _ => false,
        };
        if not_found {
            Self::NotServed
        } else {
            Self::Other(err.to_string())
        }
    }
}

/// One watched object (selected by name), from its watch's events.
#[derive(Debug, Clone)]
struct View<T> {
    seen: Seen<T>,
    /// A list in progress (between `Init` and `InitDone`).
    relist: Option<Option<T>>,
}

impl<T> Default for View<T> {
    fn default() -> Self {
        Self {
            seen: Seen::Pending,
            relist: None,
        }
    }
}

impl<T: Clone + PartialEq> View<T> {
    /// Takes in one watch event or failure; whether what the view says changed.
    fn observe(&mut self, event: Result<watcher::Event<T>, WatchFailure>) -> bool {
        let next = match event {
            Ok(watcher::Event::Init) => {
                self.relist = Some(None);
                return false;
            }
            Ok(watcher::Event::InitApply(object)) => {
                self.relist = Some(Some(object));
                return false;
            }
            Ok(watcher::Event::InitDone) => Seen::Listed(self.relist.take().flatten()),
            Ok(watcher::Event::Apply(object)) => Seen::Listed(Some(object)),
            Ok(watcher::Event::Delete(_)) => Seen::Listed(None),
            Err(WatchFailure::NotServed) => {
                self.relist = None;
                Seen::Listed(None)
            }
            Err(WatchFailure::Other(detail)) => {
                self.relist = None;
                match self.seen {
                    Seen::Pending | Seen::Failed(_) => Seen::Failed(detail),
                    // The last list stays in force while the watch recovers.
                    Seen::Listed(_) => return false,
                }
            }
        };
        let changed = self.seen != next;
        self.seen = next;
        changed
    }
}

/// What is known of the two objects.
#[derive(Debug, Clone, Default)]
struct Views {
    proxy: View<Proxy>,
    trusted_ca: View<ConfigMap>,
}

/// One event of one of the two watches.
enum Change {
    Proxy(Result<watcher::Event<Proxy>, WatchFailure>),
    TrustedCa(Result<watcher::Event<ConfigMap>, WatchFailure>),
}

impl Views {
    fn observe(&mut self, change: Change) -> bool {
        match change {
            Change::Proxy(event) => self.proxy.observe(event),
            Change::TrustedCa(event) => self.trusted_ca.observe(event),
        }
    }

    fn settled(&self) -> bool {
        !matches!(self.proxy.seen, Seen::Pending) && !matches!(self.trusted_ca.seen, Seen::Pending)
    }
}

/// Why the cluster's current proxy or trusted CA is not the one in force.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The `Proxy` cannot be read (other than "not served").
    #[error(
        "reading the cluster's Proxy failed: {0}; the manager's ClusterRole must grant get, \
         list and watch on proxies.config.openshift.io (re-apply the shipped manifests)"
    )]
    ProxyUnreadable(String),
    /// `Proxy.status` holds settings no client could use.
    #[error("Proxy/cluster status: {0}")]
    ProxyRefused(ProxyError),
    /// The trusted CA ConfigMap cannot be read.
    #[error("reading ConfigMap {namespace}/{TRUSTED_CA_CONFIGMAP} failed: {detail}")]
    TrustedCaUnreadable { namespace: String, detail: String },
    /// The trusted CA bundle holds no usable certificate.
    #[error("the trusted CA bundle is refused: {0}")]
    TrustedCaRefused(TrustedCaError),
    /// `Proxy.spec.trustedCA` names the admin's CA, but nothing was injected to read.
    #[error(
        "Proxy/cluster spec.trustedCA names ConfigMap openshift-config/{trusted_ca}, but \
         ConfigMap {namespace}/{TRUSTED_CA_CONFIGMAP} holds no {TRUSTED_CA_BUNDLE_KEY}: the \
         cluster network operator injects it into that ConfigMap while it carries the label \
         config.openshift.io/inject-trusted-cabundle=\"true\" (re-apply the shipped manifests); \
         until then registries signed by that CA are not trusted"
    )]
    TrustedCaNotInjected {
        trusted_ca: String,
        namespace: String,
    },
}

impl Problem {
    /// Whether settings were read and refused (a Warning Event on the object at fault), as
    /// opposed to not read.
    fn is_refusal(&self) -> bool {
        matches!(
            self,
            Self::ProxyRefused(_) | Self::TrustedCaRefused(_) | Self::TrustedCaNotInjected { .. }
        )
    }
}

/// The network in force, and why the cluster's current settings are not, when they are not.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State {
    /// What pulls go through: from the last settings read and usable.
    pub network: PullNetwork,
    /// Why the cluster's current proxy is not `network.proxy`.
    pub proxy_problem: Option<Problem>,
    /// Why the cluster's current trusted CA is not `network.trusted_ca` (or, when nothing was
    /// injected, what is missing).
    pub trusted_ca_problem: Option<Problem>,
}

/// The state after reading `views` (pure): usable settings replace the previous ones; settings
/// that cannot be read or used leave the previous ones in force, with the reason.
fn decide(previous: &State, views: &Views, namespace: &str) -> State {
    let mut next = previous.clone();
    match &views.proxy.seen {
        Seen::Pending => {}
        Seen::Failed(detail) => next.proxy_problem = Some(Problem::ProxyUnreadable(detail.clone())),
        Seen::Listed(proxy) => {
            let status = proxy
                .as_ref()
                .and_then(|p| p.status.clone())
                .unwrap_or_default();
            match ProxySettings::from_status(
                &status.http_proxy,
                &status.https_proxy,
                &status.no_proxy,
            ) {
                Ok(settings) => {
                    next.network.proxy = settings;
                    next.proxy_problem = None;
                }
                Err(err) => next.proxy_problem = Some(Problem::ProxyRefused(err)),
            }
        }
    }
    let named = match &views.proxy.seen {
        Seen::Listed(Some(proxy)) => proxy.trusted_ca_name().map(str::to_owned),
        _ => None,
    };
    match &views.trusted_ca.seen {
        Seen::Pending => {}
        Seen::Failed(detail) => {
            next.trusted_ca_problem = Some(Problem::TrustedCaUnreadable {
                namespace: namespace.to_owned(),
                detail: detail.clone(),
            });
        }
        Seen::Listed(config_map) => {
            let pem = config_map
                .as_ref()
                .and_then(|cm| cm.data.as_ref())
                .and_then(|data| data.get(TRUSTED_CA_BUNDLE_KEY))
                .filter(|pem| !pem.trim().is_empty());
            match pem {
                // Nothing injected (yet), or the admin emptied it: no trusted CA.
                None => {
                    next.network.trusted_ca = None;
                    next.trusted_ca_problem =
                        named.map(|trusted_ca| Problem::TrustedCaNotInjected {
                            trusted_ca,
                            namespace: namespace.to_owned(),
                        });
                }
                Some(pem) => match TrustedCa::parse(trusted_ca_origin(namespace), pem.as_bytes()) {
                    Ok(trusted) => {
                        // The same bundle keeps its allocation (and compares equal cheaply).
                        if previous.network.trusted_ca.as_deref() != Some(&trusted) {
                            next.network.trusted_ca = Some(Arc::new(trusted));
                        }
                        next.trusted_ca_problem = None;
                    }
                    Err(err) => next.trusted_ca_problem = Some(Problem::TrustedCaRefused(err)),
                },
            }
        }
    }
    next
}

fn trusted_ca_origin(namespace: &str) -> ConfigMapKey {
    ConfigMapKey {
        namespace: namespace.to_owned(),
        name: TRUSTED_CA_CONFIGMAP.to_owned(),
        key: TRUSTED_CA_BUNDLE_KEY.to_owned(),
    }
}

/// What to tell the admin about a change of state.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Report {
    /// New proxy settings are in force (shown redacted), or none.
    ProxyInForce(Option<String>),
    /// A new trusted CA bundle is in force (how many certificates, which were skipped), or
    /// none.
    TrustedCaInForce(Option<(usize, Vec<usize>)>),
    /// A new problem: warn, and an Event when settings were refused.
    Problem(Problem),
    /// A problem is over.
    Resolved(Problem),
}

/// The reports for the change from `previous` to `next` (pure).
fn reports(previous: &State, next: &State) -> Vec<Report> {
    let mut out = Vec::new();
    if next.network.proxy != previous.network.proxy {
        out.push(Report::ProxyInForce(
            next.network.proxy.as_ref().map(ToString::to_string),
        ));
    }
    if next.network.trusted_ca != previous.network.trusted_ca {
        out.push(Report::TrustedCaInForce(
            next.network
                .trusted_ca
                .as_ref()
                .map(|ca| (ca.trusted(), ca.skipped().to_vec())),
        ));
    }
    for (before, after) in [
        (&previous.proxy_problem, &next.proxy_problem),
        (&previous.trusted_ca_problem, &next.trusted_ca_problem),
    ] {
        if before == after {
            continue;
        }
        if let Some(problem) = after {
            out.push(Report::Problem(problem.clone()));
        } else if let Some(problem) = before {
            out.push(Report::Resolved(problem.clone()));
        }
    }
    out
}

/// Starts watching the `Proxy` `cluster` and [`TRUSTED_CA_CONFIGMAP`] for `ctx`'s puller until
/// `stop`, and returns once both were read (or after [`FIRST_READ_WAIT`]).
pub async fn start(ctx: Arc<Context>, stop: CancellationToken) {
    let (settled_tx, mut settled) = watch::channel(false);
    tokio::spawn(keep_watching(ctx, settled_tx, stop));
    if tokio::time::timeout(FIRST_READ_WAIT, settled.wait_for(|done| *done))
        .await
        .is_err()
    {
        tracing::warn!(
            wait = ?FIRST_READ_WAIT,
            "the cluster's proxy and trusted CA bundle were not read in time: pulls start without them and use them once read"
        );
    }
}

/// A watch of the one object named `name` of `api`, with kube's backoff between failures.
fn watch_named<K>(
    api: Api<K>,
    name: &str,
) -> impl Stream<Item = Result<watcher::Event<K>, WatchFailure>> + use<K>
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    watcher(
        api,
        watcher::Config::default().fields(&format!("metadata.name={name}")),
    )
    .default_backoff()
    .modify(|object: &mut K| {
        let meta = object.meta_mut();
        meta.managed_fields = None;
        meta.annotations = None;
    })
    .map(|event| event.map_err(|err| WatchFailure::of(&err)))
}

/// The watch task: applies each event, hands each new network to the puller, reports.
async fn keep_watching(ctx: Arc<Context>, settled: watch::Sender<bool>, stop: CancellationToken) {
    let namespace = ctx.settings.manager_namespace.clone();
    let changes = futures::stream::select(
        watch_named(Api::<Proxy>::all(ctx.client.clone()), CLUSTER_PROXY_NAME).map(Change::Proxy),
        watch_named(
            Api::<ConfigMap>::namespaced(ctx.client.clone(), &namespace),
            TRUSTED_CA_CONFIGMAP,
        )
        .map(Change::TrustedCa),
    );
    let mut changes = std::pin::pin!(changes);
    let mut views = Views::default();
    let mut state = State::default();
    loop {
        let change = tokio::select! {
            () = stop.cancelled() => return,
            change = changes.next() => change,
        };
        let Some(change) = change else {
            tracing::error!(
                "the cluster proxy watches ended: proxy and trusted CA changes are no longer seen"
            );
            return;
        };
        if let Change::Proxy(Err(WatchFailure::Other(err)))
        | Change::TrustedCa(Err(WatchFailure::Other(err))) = &change
        {
            tracing::debug!(error = %err, "cluster proxy watch");
        }
        if views.observe(change) {
            let proxy = operator_proxy(&views.proxy.seen);
            ctx.operator_proxy
                .send_if_modified(|current| std::mem::replace(current, proxy.clone()) != proxy);
            let next = decide(&state, &views, &namespace);
            ctx.images.set_network(next.network.clone());
            for report in reports(&state, &next) {
                act(report, &views, &ctx).await;
            }
            state = next;
        }
        if views.settled() {
            settled.send_if_modified(|done| !std::mem::replace(done, true));
        }
    }
}

/// Logs a report, and publishes a refusal as a Warning Event on the object at fault.
async fn act(report: Report, views: &Views, ctx: &Context) {
    match report {
        Report::ProxyInForce(Some(settings)) => {
            tracing::info!(%settings, "the cluster proxy is in force for the manager's pulls");
        }
        Report::ProxyInForce(None) => {
            tracing::info!("no cluster proxy: the manager's pulls go direct");
        }
        Report::TrustedCaInForce(Some((trusted, skipped))) => {
            if skipped.is_empty() {
                tracing::info!(
                    certificates = trusted,
                    configmap = TRUSTED_CA_CONFIGMAP,
                    "the cluster's trusted CA bundle is in force for the manager's pulls"
                );
            } else {
                tracing::warn!(certificates = trusted, skipped = ?skipped, configmap = TRUSTED_CA_CONFIGMAP, "the cluster's trusted CA bundle is in force for the manager's pulls; the certificates at these positions are not usable as trust anchors and are skipped");
            }
        }
        Report::TrustedCaInForce(None) => {
            tracing::info!(
                "no cluster trusted CA bundle: the manager's pulls trust the system roots (and each Catalog's caBundle)"
            );
        }
        Report::Resolved(problem) => {
            tracing::info!(was = %problem, "the cluster's proxy and trusted CA settings are in force again");
        }
        Report::Problem(problem) => {
            tracing::warn!(error = %problem, "the cluster's proxy or trusted CA settings are not in force; pulls go through the last usable ones");
            if !problem.is_refusal() {
                return;
            }
            let Some(regarding) = regarding(&problem, views, &ctx.settings.manager_namespace)
            else {
                return;
            };
            let (reason, keeping) = match &problem {
                Problem::ProxyRefused(_) => (
                    "ProxyRefused",
                    "keeps pulling through the last usable proxy settings (none: direct)",
                ),
                Problem::TrustedCaRefused(_) => (
                    "TrustedCABundleRefused",
                    "keeps trusting the last usable bundle (none: the system roots)",
                ),
                _ => (
                    "TrustedCABundleNotInjected",
                    "trusts the system roots and each Catalog's caBundle",
                ),
            };
            let event = Event {
                type_: EventType::Warning,
                reason: reason.to_owned(),
                note: Some(cut_bytes(
                    &format!("{problem}; POM {keeping}"),
                    MAX_EVENT_NOTE_BYTES,
                )),
                action: "ReadClusterProxy".to_owned(),
                secondary: None,
            };
            if let Err(err) = ctx.events.publish(&event, &regarding).await {
                tracing::warn!(error = %err, "publishing an event");
            }
        }
    }
}

/// The object a refusal is about: the `Proxy` for its settings, else the ConfigMap.
fn regarding(problem: &Problem, views: &Views, namespace: &str) -> Option<ObjectReference> {
    match problem {
        Problem::ProxyRefused(_) | Problem::TrustedCaNotInjected { .. } => {
            let Seen::Listed(Some(proxy)) = &views.proxy.seen else {
                return None;
            };
            Some(ObjectReference {
                api_version: Some(Proxy::api_version(&()).into_owned()),
                kind: Some(Proxy::kind(&()).into_owned()),
                name: Some(proxy.name_any()),
                uid: proxy.uid(),
                ..ObjectReference::default()
            })
        }
        Problem::TrustedCaRefused(_) => {
            let Seen::Listed(Some(config_map)) = &views.trusted_ca.seen else {
                return None;
            };
            Some(ObjectReference {
                api_version: Some("v1".to_owned()),
                kind: Some("ConfigMap".to_owned()),
                name: Some(config_map.name_any()),
                namespace: Some(namespace.to_owned()),
                uid: config_map.uid(),
                ..ObjectReference::default()
            })
        }
        Problem::ProxyUnreadable(_) | Problem::TrustedCaUnreadable { .. } => None,
    }
}

/// `text` cut to at most `max` bytes on a character boundary, marked when cut.
fn cut_bytes(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub('…'.len_utf8());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use serde_json::json;

    const NS: &str = "openshift-platform-operators";

    /// A self-signed CA certificate (EC P-256), generated once with openssl for these tests.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBozCCAUmgAwIBAgIUJrVVp5AsAHKTV40mt3OF+CfZ9TswCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTcG9tLW5ldHdvcmstdGVzdC1jYTAgFw0yNjEyMDUxMjUxMzNa
GA8yMTI2MTExMTEyNTEzM1owHjEcMBoGA1UEAwwTcG9tLW5ldHdvcmstdGVzdC1j
YTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABA8lRTt7KjQKKltTyMGIvFYWRJnl
OtXPRzNPkiimGTC9pawOC0lZiI8fBX1reU7QD4WUQS3rLXtOkgiWczlqIn6jYzBh
MB0GA1UdDgQWBBTCCMqLauB6x0izrWhOH0cWdeLunjAfBgNVHSMEGDAWgBTCCMqL
auB6x0izrWhOH0cWdeLunjAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIC
BDAKBggqhkjOPQQDAgNIADBFAiAQApCpfuTmY7p3npD+SRVrLCCBf/jvbyBFV3HS
1Kh1tQIhAMgYRd0N+/GD58q2DBSkOFv/yGUd6LkU++AYFRA8aPqN
-----END CERTIFICATE-----
";

    fn proxy(status: serde_json::Value, trusted_ca: &str) -> Proxy {
        serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Proxy",
            "metadata": {"name": "cluster", "uid": "uid-proxy"},
            "spec": {"trustedCA": {"name": trusted_ca}},
            "status": status,
        }))
        .unwrap()
    }

    fn proxied(http: &str, no_proxy: &str) -> Proxy {
        proxy(
            json!({"httpProxy": http, "httpsProxy": http, "noProxy": no_proxy}),
            "",
        )
    }

    /// Operators get the Proxy's status values as listed (a value the manager's pulls refuse
    /// included: OLM copies them as they are); nothing before the first list, and the last
    /// list while the watch recovers (the view keeps it).
    #[test]
    fn operators_get_the_listed_proxy_status_as_it_is() {
        let env = |http: &str, https: &str, no: &str| ClusterProxyEnv {
            http_proxy: http.into(),
            https_proxy: https.into(),
            no_proxy: no.into(),
        };
        for (seen, expected) in [
            (Seen::Pending, OperatorProxy::Unknown),
            (Seen::Failed("forbidden".into()), OperatorProxy::Unknown),
            (Seen::Listed(None), OperatorProxy::Listed(None)),
            (
                Seen::Listed(Some(proxy(json!({}), ""))),
                OperatorProxy::Listed(None),
            ),
            (
                Seen::Listed(Some(proxied("http://proxy:3128", ".svc"))),
                OperatorProxy::Listed(Some(env("http://proxy:3128", "http://proxy:3128", ".svc"))),
            ),
            (
                Seen::Listed(Some(proxy(json!({"httpProxy": "not a url"}), ""))),
                OperatorProxy::Listed(Some(env("not a url", "", ""))),
            ),
        ] {
            assert_eq!(operator_proxy(&seen), expected, "{seen:?}");
        }
    }

    fn bundle(pem: &str) -> ConfigMap {
        serde_json::from_value(json!({
            "metadata": {"name": TRUSTED_CA_CONFIGMAP, "namespace": NS, "uid": "uid-cm"},
            "data": {"ca-bundle.crt": pem},
        }))
        .unwrap()
    }

    fn views(proxy: Option<Proxy>, config_map: Option<ConfigMap>) -> Views {
        let mut views = Views::default();
        views.observe(Change::Proxy(Ok(watcher::Event::Init)));
        if let Some(proxy) = proxy {
            views.observe(Change::Proxy(Ok(watcher::Event::InitApply(proxy))));
        }
        views.observe(Change::Proxy(Ok(watcher::Event::InitDone)));
        views.observe(Change::TrustedCa(Ok(watcher::Event::Init)));
        if let Some(config_map) = config_map {
            views.observe(Change::TrustedCa(Ok(watcher::Event::InitApply(config_map))));
        }
        views.observe(Change::TrustedCa(Ok(watcher::Event::InitDone)));
        views
    }

    fn settings(http: &str, no_proxy: &str) -> Option<ProxySettings> {
        ProxySettings::from_status(http, http, no_proxy).unwrap()
    }

    #[test]
    fn each_object_is_known_once_listed_or_not_served() {
        struct Case {
            name: &'static str,
            events: Vec<Result<watcher::Event<Proxy>, WatchFailure>>,
            seen: Seen<&'static str>,
        }
        let p = || proxied("http://p:3128", "");
        let cases = [
            Case {
                name: "nothing yet",
                events: vec![],
                seen: Seen::Pending,
            },
            Case {
                name: "a list in progress is not the list",
                events: vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitApply(p()))],
                seen: Seen::Pending,
            },
            Case {
                name: "listed",
                events: vec![
                    Ok(watcher::Event::InitApply(p())),
                    Ok(watcher::Event::InitDone),
                ],
                seen: Seen::Listed(Some("cluster")),
            },
            Case {
                name: "listed and absent",
                events: vec![Ok(watcher::Event::Init), Ok(watcher::Event::InitDone)],
                seen: Seen::Listed(None),
            },
            Case {
                name: "no CRD: no proxy, as on plain Kubernetes",
                events: vec![Err(WatchFailure::NotServed)],
                seen: Seen::Listed(None),
            },
            Case {
                name: "a CRD installed later, with its object",
                events: vec![
                    Err(WatchFailure::NotServed),
                    Ok(watcher::Event::Init),
                    Ok(watcher::Event::InitApply(p())),
                    Ok(watcher::Event::InitDone),
                ],
                seen: Seen::Listed(Some("cluster")),
            },
            Case {
                name: "an object created later",
                events: vec![Ok(watcher::Event::InitDone), Ok(watcher::Event::Apply(p()))],
                seen: Seen::Listed(Some("cluster")),
            },
            Case {
                name: "deleted",
                events: vec![
                    Ok(watcher::Event::InitApply(p())),
                    Ok(watcher::Event::InitDone),
                    Ok(watcher::Event::Delete(p())),
                ],
                seen: Seen::Listed(None),
            },
            Case {
                name: "a first list refused is a failure, not an absence",
                events: vec![Err(WatchFailure::Other("forbidden".into()))],
                seen: Seen::Failed("forbidden".into()),
            },
            Case {
                name: "a watch failure after a list keeps the list",
                events: vec![
                    Ok(watcher::Event::InitApply(p())),
                    Ok(watcher::Event::InitDone),
                    Err(WatchFailure::Other("connection reset".into())),
                ],
                seen: Seen::Listed(Some("cluster")),
            },
        ];
        for case in cases {
            let mut view = View::default();
            for event in case.events {
                view.observe(event);
            }
            let got = match &view.seen {
                Seen::Pending => Seen::Pending,
                Seen::Failed(detail) => Seen::Failed(detail.clone()),
                Seen::Listed(object) => Seen::Listed(object.as_ref().map(|_| "cluster")),
            };
            assert_eq!(got, case.seen, "{}", case.name);
        }
    }

    #[test]
    fn the_network_follows_the_proxy_status_and_the_injected_bundle() {
        struct Case {
            name: &'static str,
            proxy: Option<Proxy>,
            config_map: Option<ConfigMap>,
            want_proxy: Option<ProxySettings>,
            want_ca: bool,
            problem: Option<&'static str>,
        }
        let cases = [
            Case {
                name: "plain Kubernetes: nothing",
                proxy: None,
                config_map: None,
                want_proxy: None,
                want_ca: false,
                problem: None,
            },
            Case {
                name: "a proxy, read from status (spec is not effective)",
                proxy: Some(proxied("http://p:3128", ".svc")),
                config_map: None,
                want_proxy: settings("http://p:3128", ".svc"),
                want_ca: false,
                problem: None,
            },
            Case {
                name: "a Proxy without status: no proxy",
                proxy: Some(proxy(json!(null), "")),
                config_map: None,
                want_proxy: None,
                want_ca: false,
                problem: None,
            },
            Case {
                name: "the injected bundle is trusted",
                proxy: Some(proxied("http://p:3128", "")),
                config_map: Some(bundle(TEST_CA)),
                want_proxy: settings("http://p:3128", ""),
                want_ca: true,
                problem: None,
            },
            Case {
                name: "an admin's bundle on plain Kubernetes is trusted too",
                proxy: None,
                config_map: Some(bundle(TEST_CA)),
                want_proxy: None,
                want_ca: true,
                problem: None,
            },
            Case {
                name: "the shipped empty ConfigMap, nothing asked: no trusted CA, no problem",
                proxy: Some(proxied("http://p:3128", "")),
                config_map: Some(bundle("  ")),
                want_proxy: settings("http://p:3128", ""),
                want_ca: false,
                problem: None,
            },
            Case {
                name: "spec.trustedCA set, nothing injected: said",
                proxy: Some(proxy(json!({}), "user-ca-bundle")),
                config_map: Some(bundle("")),
                want_proxy: None,
                want_ca: false,
                problem: Some("openshift-config/user-ca-bundle"),
            },
        ];
        for case in cases {
            let state = decide(&State::default(), &views(case.proxy, case.config_map), NS);
            assert_eq!(state.network.proxy, case.want_proxy, "{}", case.name);
            assert_eq!(
                state.network.trusted_ca.is_some(),
                case.want_ca,
                "{}",
                case.name
            );
            let problems: Vec<String> = [&state.proxy_problem, &state.trusted_ca_problem]
                .into_iter()
                .flatten()
                .map(ToString::to_string)
                .collect();
            match case.problem {
                None => assert!(problems.is_empty(), "{}: {problems:?}", case.name),
                Some(want) => assert!(
                    problems.iter().any(|p| p.contains(want)),
                    "{}: {problems:?}",
                    case.name
                ),
            }
        }
    }

    #[test]
    fn unusable_settings_keep_the_last_good_ones() {
        let good = decide(
            &State::default(),
            &views(Some(proxied("http://p:3128", "")), Some(bundle(TEST_CA))),
            NS,
        );
        assert!(good.network.proxy.is_some() && good.network.trusted_ca.is_some());

        // A proxy URL no client can use, and a bundle with no certificate.
        let bad = decide(
            &good,
            &views(
                Some(proxied("proxy-without-scheme:3128", "")),
                Some(bundle("garbage")),
            ),
            NS,
        );
        assert_eq!(
            bad.network, good.network,
            "the last good settings stay in force"
        );
        assert!(matches!(bad.proxy_problem, Some(Problem::ProxyRefused(_))));
        let refused = bad.trusted_ca_problem.clone().unwrap().to_string();
        assert!(refused.contains("holds no PEM certificate"), "{refused}");
        assert!(refused.contains(TRUSTED_CA_CONFIGMAP), "{refused}");

        // Unreadable (RBAC): the same, with what to do.
        let mut unreadable = views(None, None);
        unreadable.proxy = View {
            seen: Seen::Failed("forbidden".into()),
            relist: None,
        };
        let kept = decide(&good, &unreadable, NS);
        assert_eq!(kept.network.proxy, good.network.proxy);
        assert!(
            kept.proxy_problem
                .unwrap()
                .to_string()
                .contains("proxies.config.openshift.io")
        );

        // Fixed: the new settings, no problem.
        let fixed = decide(
            &bad,
            &views(Some(proxied("http://q:3128", "")), Some(bundle(TEST_CA))),
            NS,
        );
        assert_eq!(fixed.network.proxy, settings("http://q:3128", ""));
        assert_eq!(fixed.proxy_problem, None);
        assert_eq!(fixed.trusted_ca_problem, None);
        assert!(
            Arc::ptr_eq(
                fixed.network.trusted_ca.as_ref().unwrap(),
                good.network.trusted_ca.as_ref().unwrap()
            ),
            "the same bundle is the same value: no client is rebuilt for it"
        );

        // A deleted Proxy is a decision, not a failure: no proxy.
        let gone = decide(&fixed, &views(None, Some(bundle(TEST_CA))), NS);
        assert_eq!(gone.network.proxy, None);
    }

    #[test]
    fn before_anything_is_read_nothing_changes() {
        let good = decide(
            &State::default(),
            &views(Some(proxied("http://p:3128", "")), None),
            NS,
        );
        let pending = decide(&good, &Views::default(), NS);
        assert_eq!(pending, good);
        assert!(!Views::default().settled());
        assert!(views(None, None).settled());
    }

    #[test]
    fn reports_name_each_transition_once() {
        let none = State::default();
        let good = decide(
            &none,
            &views(
                Some(proxied("http://alice:pw@p:3128", "")),
                Some(bundle(TEST_CA)),
            ),
            NS,
        );
        let reported = reports(&none, &good);
        assert_eq!(reported.len(), 2, "{reported:?}");
        let Report::ProxyInForce(Some(shown)) = &reported[0] else {
            panic!("{reported:?}")
        };
        assert!(
            shown.contains("<redacted>@p:3128") && !shown.contains("pw"),
            "{shown}"
        );
        assert_eq!(reported[1], Report::TrustedCaInForce(Some((1, vec![]))));

        let bad = decide(
            &good,
            &views(Some(proxied("nope", "")), Some(bundle(TEST_CA))),
            NS,
        );
        let reported = reports(&good, &bad);
        assert!(
            matches!(
                reported.as_slice(),
                [Report::Problem(Problem::ProxyRefused(_))]
            ),
            "{reported:?}"
        );
        assert_eq!(reports(&bad, &bad.clone()), []);
        let fixed = decide(
            &bad,
            &views(
                Some(proxied("http://alice:pw@p:3128", "")),
                Some(bundle(TEST_CA)),
            ),
            NS,
        );
        assert!(
            matches!(
                reports(&bad, &fixed).as_slice(),
                [Report::Resolved(Problem::ProxyRefused(_))]
            ),
            "the same settings as before: only the end of the problem"
        );
    }

    #[test]
    fn events_are_about_the_object_at_fault() {
        let views = views(Some(proxied("nope", "")), Some(bundle("garbage")));
        let state = decide(&State::default(), &views, NS);
        let proxy = regarding(state.proxy_problem.as_ref().unwrap(), &views, NS).unwrap();
        assert_eq!(proxy.kind.as_deref(), Some("Proxy"));
        assert_eq!(proxy.api_version.as_deref(), Some("config.openshift.io/v1"));
        assert_eq!(proxy.uid.as_deref(), Some("uid-proxy"));
        assert_eq!(proxy.namespace, None);
        let config_map = regarding(state.trusted_ca_problem.as_ref().unwrap(), &views, NS).unwrap();
        assert_eq!(config_map.kind.as_deref(), Some("ConfigMap"));
        assert_eq!(config_map.namespace.as_deref(), Some(NS));
        assert_eq!(config_map.uid.as_deref(), Some("uid-cm"));
        assert!(state.proxy_problem.unwrap().is_refusal());
        assert!(!Problem::ProxyUnreadable("x".into()).is_refusal());
    }

    #[test]
    fn event_notes_are_cut_on_a_character_boundary() {
        assert_eq!(cut_bytes("short", 10), "short");
        let cut = cut_bytes(&"é".repeat(600), MAX_EVENT_NOTE_BYTES);
        assert!(
            cut.len() <= MAX_EVENT_NOTE_BYTES && cut.ends_with('…'),
            "{cut}"
        );
    }
}
