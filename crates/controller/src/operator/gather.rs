//! Gather: everything one decision about a PlatformOperator depends on, read once per
//! reconcile into a [`PoSnapshot`]. The cluster's phase comes from a ClusterVersion watch, the
//! API server's version and whether this is OpenShift from one discovery per manager run (the
//! API server's version is read again while the cluster rolls back); only the PO's own
//! OperatorCondition, and the objects of a status that records nothing, are read per reconcile.

use std::sync::Arc;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::olm::OperatorCondition;
use pom_api::openshift::{CLUSTER_VERSION_NAME, ClusterVersion};
use pom_policy::PoRequest;
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, Hop, Installed, OperatorGate, PoSnapshot,
    recover_installed, unsettled_move_of,
};
use pom_render::CertificateSource;
use pom_resolver::cluster::{PhaseKind, cluster_phase};
use pom_resolver::fbc::Catalog as FbcCatalog;
use tokio::sync::OnceCell;
use tokio_util::sync::CancellationToken;

use super::first_checks::{FirstChecks, LabelledKey};
use super::objects::{KindCache, PRUNABLE_KINDS, is_not_served};
use crate::catalog::{CatalogCache, CatalogState, ServedCatalog};
use crate::cluster_proxy::OperatorProxy;
use crate::error::Error;
use crate::watch_cache::{Readiness, cached_watcher};
use pom_policy::namespace_clash::NamespaceClash;
use pom_policy::snapshot::{ConfigView, GuardState, gate_of};

/// The API group whose presence makes a cluster OpenShift.
pub const OPENSHIFT_CONFIG_GROUP: &str = "config.openshift.io";
/// The API group of OpenShift's operator configurations, the service-ca's among them: where
/// it is served, the service-ca signs webhook serving certificates.
pub const OPENSHIFT_OPERATOR_GROUP: &str = pom_api::openshift::OPERATOR_GROUP;

/// What one discovery at start tells about the cluster.
#[derive(Debug, Clone)]
pub struct Discovery {
    /// `config.openshift.io` is served: ClusterVersion `version` must exist and be judged.
    pub openshift: bool,
    /// The API server's version (`None` when it cannot be parsed: `minKubeVersion` unchecked).
    pub kube_version: Option<semver::Version>,
    /// Who signs webhook serving certificates: OpenShift's service-ca where its operator's
    /// API group is served, else POM's own CA.
    pub certificates: CertificateSource,
}

/// The longest one API read of a gather may take before the reconcile gives up and retries.
pub const READ_DEADLINE: std::time::Duration = std::time::Duration::from_secs(15);

/// The cluster facts every PO decision shares: a ClusterVersion watch and one discovery.
#[derive(Clone)]
pub struct ClusterWatch {
    cluster_versions: Store<ClusterVersion>,
    /// Every PO reconcile waits for the first list at once: see [`Readiness`].
    cluster_versions_ready: Readiness,
    discovery: Arc<OnceCell<Discovery>>,
    client: kube::Client,
}

impl ClusterWatch {
    /// Starts the ClusterVersion watch; every change of the cluster *phase* (not every status
    /// field) is sent on `changes`.
    #[must_use]
    pub fn start(
        client: &kube::Client,
        shutdown: &CancellationToken,
        changes: tokio::sync::watch::Sender<u64>,
    ) -> Self {
        let (watch, stream) = Self::with_stream(client);
        let shutdown = shutdown.clone();
        tokio::spawn(async move {
            let mut last = None;
            let drain = stream.for_each(|event| {
                match event {
                    Ok(cv) => {
                        let phase = pom_policy::snapshot::cluster_version_snapshot(&cv)
                            .map(|s| cluster_phase(&s).map_err(|e| e.to_string()));
                        if last.as_ref() != Some(&phase) {
                            last = Some(phase);
                            changes.send_modify(|n| *n = n.wrapping_add(1));
                        }
                    }
                    // On plain Kubernetes the kind does not exist: the watch retries quietly.
                    Err(err) => tracing::debug!(%err, "ClusterVersion watch"),
                }
                futures::future::ready(())
            });
            tokio::select! {
                () = shutdown.cancelled() => {}
                () = drain => {}
            }
        });
        watch
    }

    /// The ClusterVersion watch as a stream for a controller to drive: each object it yields
    /// is already in this watch's store, so a reconcile it triggers reads what triggered it.
    pub fn with_stream(
        client: &kube::Client,
    ) -> (
        Self,
        impl futures::Stream<Item = Result<ClusterVersion, watcher::Error>> + Send + 'static,
    ) {
        let (reader, writer) = reflector::store();
        let (listed, cluster_versions_ready) = Readiness::new();
        let api: Api<ClusterVersion> = Api::all(client.clone());
        let config =
            watcher::Config::default().fields(&format!("metadata.name={CLUSTER_VERSION_NAME}"));
        let stream = reflector::reflector(writer, cached_watcher(api, config))
            .default_backoff()
            .inspect(move |event| {
                if let Ok(event) = event {
                    listed.observe(event);
                }
            })
            .touched_objects();
        let watch = Self {
            cluster_versions_ready,
            cluster_versions: reader,
            discovery: Arc::new(OnceCell::new()),
            client: client.clone(),
        };
        (watch, stream)
    }

    /// Discovery, done once per manager run.
    pub async fn discovery(&self) -> Result<&Discovery, Error> {
        self.discovery
            .get_or_try_init(|| async {
                let groups = self
                    .client
                    .list_api_groups()
                    .await
                    .map_err(Error::kube("discovering API groups"))?;
                let openshift = groups.groups.iter().any(|g| g.name == OPENSHIFT_CONFIG_GROUP);
                let certificates = if groups.groups.iter().any(|g| g.name == OPENSHIFT_OPERATOR_GROUP) {
                    CertificateSource::ServiceCa
                } else {
                    CertificateSource::Pom
                };
                let kube_version = match self.client.apiserver_version().await {
                    Ok(info) => pom_resolver::version::parse_tolerant(&info.git_version).ok(),
                    Err(err) => {
                        tracing::warn!(%err, "reading the API server version: minKubeVersion is not checked");
                        None
                    }
                };
                tracing::info!(openshift, ?kube_version, ?certificates, "cluster discovered");
                Ok(Discovery {
                    openshift,
                    kube_version,
                    certificates,
                })
            })
            .await
    }

    /// The cluster as decisions see it: the phase and the update requested, read from one
    /// copy of ClusterVersion (`pom_policy::snapshot::read_cluster_version`), and the API
    /// server's version.
    pub async fn view(&self) -> Result<ClusterReading, Error> {
        let discovery = self.discovery().await?;
        if !discovery.openshift {
            return Ok(ClusterReading {
                view: ClusterView::Kubernetes,
                kube_version: discovery.kube_version.clone(),
                requested_update: None,
                requested_patch: None,
            });
        }
        let reading = if self.cluster_versions_ready.wait().await.is_err() {
            Err("the ClusterVersion watch stopped".to_owned())
        } else {
            match self.cluster_versions.state().first() {
                None => Err(format!(
                    "ClusterVersion {CLUSTER_VERSION_NAME:?} does not exist on this OpenShift cluster"
                )),
                Some(cv) => Ok(pom_policy::snapshot::read_cluster_version(cv)),
            }
        };
        let (phase, requested_update, requested_patch) = match reading {
            Ok(reading) => (
                reading.phase,
                reading.requested_update,
                reading.requested_patch,
            ),
            Err(why) => (Err(why), None, None),
        };
        // A rollback rolls the API server back too: what runs is judged against the version
        // it serves now, not the one it served when the manager started (issue 34 item 4).
        let kube_version = match &phase {
            Ok(phase) if phase.kind == PhaseKind::Rollback => {
                self.current_kube_version(discovery).await
            }
            _ => discovery.kube_version.clone(),
        };
        Ok(ClusterReading {
            view: ClusterView::OpenShift(phase),
            kube_version,
            requested_update,
            requested_patch,
        })
    }

    /// The API server's version, read now; the discovered one when it cannot be read.
    async fn current_kube_version(&self, discovery: &Discovery) -> Option<semver::Version> {
        match tokio::time::timeout(READ_DEADLINE, self.client.apiserver_version()).await {
            Ok(Ok(info)) => pom_resolver::version::parse_tolerant(&info.git_version)
                .ok()
                .or_else(|| discovery.kube_version.clone()),
            Ok(Err(err)) => {
                tracing::warn!(%err, "reading the API server version during a rollback: judged with the version discovered at start");
                discovery.kube_version.clone()
            }
            Err(_) => {
                tracing::warn!(
                    "reading the API server version during a rollback timed out: judged with the version discovered at start"
                );
                discovery.kube_version.clone()
            }
        }
    }
}

/// Catalog content a PO may resolve from, owned (the snapshot borrows from it).
pub enum GatheredCatalogs {
    Loading(String),
    Unavailable(String),
    Ready {
        catalogs: Vec<(String, i32, Arc<FbcCatalog>)>,
        unavailable: Vec<String>,
    },
}

impl GatheredCatalogs {
    /// The view `decide` reads.
    #[must_use]
    pub fn view(&self) -> CatalogView<'_> {
        match self {
            Self::Loading(catalog) => CatalogView::Loading {
                catalog: catalog.clone(),
            },
            Self::Unavailable(message) => CatalogView::Unavailable(message.clone()),
            Self::Ready {
                catalogs,
                unavailable,
            } => CatalogView::Ready {
                catalogs: catalogs
                    .iter()
                    .map(|(name, priority, content)| CatalogContent {
                        name: name.clone(),
                        priority: *priority,
                        content,
                    })
                    .collect(),
                unavailable: unavailable.clone(),
            },
        }
    }

    /// Every catalog's content (for finding a bundle's objects by name).
    #[must_use]
    /// The catalogs' contents by priority, highest first (then by name): a bundle looked up by
    /// name is never found in whichever catalog the cache happens to list first.
    pub fn contents(&self) -> Vec<(&str, &FbcCatalog)> {
        match self {
            Self::Ready { catalogs, .. } => {
                let mut by_priority: Vec<_> = catalogs.iter().collect();
                by_priority.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
                by_priority
                    .into_iter()
                    .map(|(name, _, content)| (name.as_str(), content.as_ref()))
                    .collect()
            }
            _ => Vec::new(),
        }
    }
}

/// The catalogs PO of `package` resolves from: the one it names, or all. `known` lists every
/// Catalog object (from the manager's watch cache) so that one not processed yet reads as
/// loading.
#[must_use]
pub fn catalogs(
    cache: &CatalogCache,
    package: &str,
    named: Option<&str>,
    known: &[String],
) -> GatheredCatalogs {
    if let Some(loading) = known
        .iter()
        .filter(|k| named.is_none_or(|n| n == k.as_str()))
        .find(|k| cache.get(k).is_none())
    {
        return GatheredCatalogs::Loading(loading.clone());
    }
    let entries = match named {
        Some(name) => match cache.get(name) {
            Some(entry) => vec![entry],
            None => {
                return GatheredCatalogs::Unavailable(format!(
                    "Catalog {name:?} (spec.package.catalog) does not exist; create it or fix spec.package.catalog"
                ));
            }
        },
        None => cache.snapshot(),
    };
    let mut usable = Vec::new();
    let mut unavailable = Vec::new();
    let mut empty = Vec::new();
    // Each catalog as resolving `package` sees it (the package read back if it is not held).
    let view = |name: &str, served: &ServedCatalog| {
        served.view(package).map_err(|error| {
            format!(
                "Catalog {name}: package {package:?} could not be read back from its unpacked content ({error}); the catalog is unpacked again at its next poll if its folder is gone; if this persists, remove the catalog's folder from the manager's --catalog-content-dir"
            )
        })
    };
    for entry in entries {
        match &entry.state {
            CatalogState::Serving(served) => match view(&entry.name, served) {
                Ok(content) => usable.push((entry.name.clone(), entry.priority, content)),
                Err(message) => empty.push(message),
            },
            CatalogState::Unavailable {
                last_good: Some(served),
                message,
                ..
            } => {
                // Only a catalog that offers the package can change its judgement.
                if served.offers(package) {
                    unavailable.push(format!("Catalog {}: {message}", entry.name));
                }
                match view(&entry.name, served) {
                    Ok(content) => usable.push((entry.name.clone(), entry.priority, content)),
                    Err(message) => empty.push(message),
                }
            }
            CatalogState::Unavailable { message, .. } => {
                empty.push(format!("Catalog {}: {message}", entry.name));
            }
        }
    }
    if usable.is_empty() {
        if empty.is_empty() {
            return GatheredCatalogs::Unavailable(
                "no Catalog is serving content yet: create a Catalog".to_owned(),
            );
        }
        return GatheredCatalogs::Unavailable(empty.join("; "));
    }
    // A catalog with no content at all may offer the package: fail closed on judging.
    unavailable.extend(empty);
    GatheredCatalogs::Ready {
        catalogs: usable,
        unavailable,
    }
}

/// The installed operator's gate: the OperatorCondition POM created for the installed bundle
/// (found by owner and bundle labels, so a CSV named differently from its bundle is found).
/// A first check after a start takes it from the start-up snapshot when the watch vouches for
/// the copy (`first_checks.rs`), instead of one list per PO.
pub async fn operator_gate(
    client: &kube::Client,
    first: &FirstChecks,
    po: &PlatformOperator,
    namespace: &str,
    installed: Option<&str>,
) -> Result<OperatorGate, Error> {
    let reported_before = po
        .annotations()
        .contains_key(labels::OPERATOR_CONDITION_REPORTED);
    let Some(bundle) = installed else {
        return Ok(OperatorGate {
            reported: reported_before,
            ..OperatorGate::absent()
        });
    };
    let labelled = LabelledKey {
        group: OperatorCondition::group(&()).into_owned(),
        kind: OperatorCondition::kind(&()).into_owned(),
        namespace: namespace.to_owned(),
        owner: labels::label_value(&po.name_any()),
        bundle: labels::label_value(bundle),
    };
    let found = first
        .current_labelled_or(&labelled, list_operator_condition(client, &labelled))
        .await?;
    let mut gate = found.as_ref().map_or_else(OperatorGate::absent, gate_of);
    gate.reported |= reported_before;
    Ok(gate)
}

/// The first OperatorCondition carrying the owner and bundle labels of `key`, read by a list.
async fn list_operator_condition(
    client: &kube::Client,
    key: &LabelledKey,
) -> Result<Option<OperatorCondition>, Error> {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), &key.namespace);
    let selector = format!(
        "{}={},{}={}",
        labels::OWNER_PO,
        key.owner,
        labels::BUNDLE,
        key.bundle
    );
    let action = format!(
        "reading the OperatorCondition of bundle {} in {}",
        key.bundle, key.namespace
    );
    // A read that hangs (seen under load: a list that did not answer for a minute) fails
    // after READ_DEADLINE and the reconcile is retried, instead of holding the PO until the
    // whole reconcile is cut.
    let listed = tokio::time::timeout(
        READ_DEADLINE,
        api.list(&ListParams::default().labels(&selector)),
    )
    .await
    .map_err(|_| Error::ReadDeadline {
        action: action.clone(),
        deadline: READ_DEADLINE,
    })?;
    match listed {
        Ok(list) => Ok(list.items.into_iter().next()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(None),
        Err(err) => Err(Error::kube(action)(err)),
    }
}

/// The owner label of the Namespace `po` watches apart from its install namespace, as the
/// cluster holds it now (`None`: it watches no other namespace, or the Namespace is absent or
/// unlabelled). The label says which PlatformOperator's install namespace it is (written by the
/// create that claims it), so a watcher is judged by it whichever PO the store shows first.
///
/// # Errors
/// Reading the Namespace failed.
pub async fn watched_namespace_owner(
    client: &kube::Client,
    po: &PlatformOperator,
) -> Result<Option<String>, Error> {
    let Some(watched) = po.spec.watch_namespace.as_deref().filter(|w| !w.is_empty()) else {
        return Ok(None);
    };
    if pom_policy::namespace_clash::known_install_namespace(po).as_deref() == Some(watched) {
        return Ok(None);
    }
    let namespace = Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .get_metadata_opt(watched)
        .await
        .map_err(Error::kube(format!("reading namespace {watched}")))?;
    Ok(namespace.and_then(|ns| ns.labels().get(labels::OWNER_PO).cloned()))
}

/// When `po`'s status records nothing installed: the bundle label of the objects that carry
/// its owner label, if any is on the cluster (a PO restored without its status must not be
/// installed over, issue 25 item 4). Looked for through every kind POM applies and can list by
/// label ([`lost_status_kinds`]: Deployments first, then the rest, so a plain bundle without a
/// Deployment is found too, issue 34 item 5), at most two lists of one object each per kind,
/// stopping at the first kind that has one; and only then: a PO with an installed bundle (or a
/// move) in status never pays for it.
///
/// # Errors
/// When a kind the server serves cannot be listed.
pub async fn found_bundle_label(
    client: &kube::Client,
    kinds: &KindCache,
    po: &PlatformOperator,
) -> Result<Option<String>, Error> {
    let recorded = po
        .status
        .as_ref()
        .is_some_and(|s| s.installed_bundle.is_some());
    // A move recorded as intent (a first install in flight, or one that failed) is not a
    // lost status: its objects are the move's own.
    let moving = po.status.as_ref().is_some_and(|s| s.active_hop.is_some());
    if recorded || moving {
        return Ok(None);
    }
    let name = po.name_any();
    for (group, version, kind) in lost_status_kinds() {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let api = match kinds.api(client, &gvk, None).await {
            Ok((api, _)) => api,
            // A kind the server does not serve holds no objects of this PO.
            Err(Error::Kube { source, .. }) if is_not_served(&source) => continue,
            Err(err) => return Err(err),
        };
        let found = bundle_labels_of(&api, &name, kind).await?;
        if let Some(description) = describe_found(&found) {
            return Ok(Some(description));
        }
    }
    Ok(None)
}

/// The kinds a lost status is looked for through, in order: Deployments first (every
/// registry+v1 bundle has one, and they are few), then every other kind of [`PRUNABLE_KINDS`]
/// (what POM applies and may list by label, Secrets excluded), in that list's order.
#[must_use]
pub fn lost_status_kinds() -> Vec<(&'static str, &'static str, &'static str)> {
    let mut kinds = PRUNABLE_KINDS.to_vec();
    kinds.sort_by_key(|(_, _, kind)| *kind != "Deployment");
    kinds
}

/// The bundle labels of at most two objects of one kind labelled for PO `po`: the first one
/// found, and (when that one names a bundle) one that does not carry that bundle's label, so
/// objects of several bundles (or without a bundle label) are seen without listing them all.
async fn bundle_labels_of(
    api: &Api<DynamicObject>,
    po: &str,
    kind: &str,
) -> Result<Vec<Option<String>>, Error> {
    let owned = labels::owned_by(po);
    let mut found = list_bundle_labels(api, &owned, po, kind).await?;
    if let Some(Some(first)) = found.first() {
        let others = format!("{owned},{}!={first}", labels::BUNDLE);
        found.extend(list_bundle_labels(api, &others, po, kind).await?);
    }
    Ok(found)
}

/// The bundle label of at most one object of `api` matching `selector` (404: none).
async fn list_bundle_labels(
    api: &Api<DynamicObject>,
    selector: &str,
    po: &str,
    kind: &str,
) -> Result<Vec<Option<String>>, Error> {
    let action = format!("listing {kind} objects labelled for PlatformOperator {po}");
    let listed = tokio::time::timeout(
        READ_DEADLINE,
        api.list_metadata(&ListParams::default().labels(selector).limit(1)),
    )
    .await
    .map_err(|_| Error::ReadDeadline {
        action: action.clone(),
        deadline: READ_DEADLINE,
    })?;
    match listed {
        Ok(list) => Ok(list
            .items
            .iter()
            .take(1)
            .map(|o| o.labels().get(labels::BUNDLE).cloned())
            .collect()),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(err) => Err(Error::kube(action)(err)),
    }
}

/// What the objects of a lost status name, from their bundle labels (`None` for an object
/// without one); `None` when there are none. One bundle's objects name what runs. Objects of
/// several bundles (a status lost mid-move) or without a bundle label name nothing POM can
/// trust: the description then matches no catalog bundle, and the PO is refused rather than
/// installed over them.
#[must_use]
pub fn describe_found(bundle_labels: &[Option<String>]) -> Option<String> {
    if bundle_labels.is_empty() {
        return None;
    }
    let mut bundles: Vec<&str> = bundle_labels
        .iter()
        .map(|label| label.as_deref().unwrap_or("(no bundle label)"))
        .collect();
    bundles.sort_unstable();
    bundles.dedup();
    Some(bundles.join(" and "))
}

/// The cluster as one reconcile reads it.
#[derive(Debug, Clone)]
pub struct ClusterReading {
    pub view: ClusterView,
    /// The API server's version.
    pub kube_version: Option<semver::Version>,
    /// The minor update requested and not started, read with the phase
    /// (`pom_policy::snapshot::requested_update`).
    pub requested_update: Option<semver::Version>,
    /// The patch update the cluster is asked to take, read with the phase
    /// (`pom_policy::snapshot::requested_patch`).
    pub requested_patch: Option<semver::Version>,
}

/// The PO's snapshot from what was gathered.
#[must_use]
#[allow(clippy::too_many_arguments)]
pub fn snapshot<'a>(
    po: &PlatformOperator,
    duplicate_of: Option<String>,
    namespace_clash: Option<NamespaceClash>,
    cluster: ClusterReading,
    catalogs: &'a GatheredCatalogs,
    gate: OperatorGate,
    now: Timestamp,
    found_bundle_label: Option<String>,
    guard: GuardState,
    proxy: &OperatorProxy,
) -> PoSnapshot<'a> {
    let name = po.name_any();
    let status = po.status.clone().unwrap_or_default();
    let catalogs = catalogs.view();
    let recorded = status
        .installed_bundle
        .as_ref()
        .map(|b| Installed::from_status(b, status.max_open_shift_version.as_deref()));
    // A PO restored without its status: what runs, from its objects' bundle label.
    let installed = recorded.or_else(|| match (&catalogs, found_bundle_label.as_deref()) {
        (CatalogView::Ready { catalogs, .. }, Some(label)) => {
            recover_installed(catalogs, &po.spec.package.name, label)
        }
        _ => None,
    });
    PoSnapshot {
        request: PoRequest::from_spec(&name, &po.spec),
        name,
        duplicate_of,
        namespace_clash,
        installed,
        hop: status.active_hop.as_ref().map(Hop::from),
        cluster: cluster.view,
        requested_update: cluster.requested_update,
        kube_version: cluster.kube_version,
        catalogs,
        gate,
        now,
        found_bundle_label,
        unsettled_move: unsettled_move_of(po),
        guard,
        paused: po.spec.paused,
        config: config_view(po, proxy),
    }
}

/// The configuration asked for with the cluster proxy as last listed; before it is listed,
/// with the proxy what runs was applied with (a proxy POM has not read restarts nothing).
fn config_view(po: &PlatformOperator, proxy: &OperatorProxy) -> ConfigView {
    match proxy {
        OperatorProxy::Listed(proxy) => ConfigView::of(po, proxy.as_ref()),
        OperatorProxy::Unknown => ConfigView::keeping_proxy(po),
    }
}

/// What OLM v0's objects say about the installation `from` names (`spec.adoptFrom`): the
/// Subscription and the CSV it installed. An absent object (or OLM's API not served) is read
/// as absent: the proof then says so.
///
/// # Errors
/// A read that failed otherwise.
/// `moved_to` names the CSV when the Subscription no longer does (deleted: the adoption's move
/// names the bundle, which is the CSV adopted).
pub async fn olm_source(
    client: &kube::Client,
    from: &pom_api::platform_operator::AdoptFrom,
    moved_to: Option<&str>,
) -> Result<pom_policy::adopt::OlmSource, Error> {
    use pom_api::olm::{ClusterServiceVersion, Subscription};
    let sub_ref = &from.subscription;
    let namespace = sub_ref.namespace.as_str();
    let subscription = format!("{namespace}/{}", sub_ref.name);
    let sub = Api::<Subscription>::namespaced(client.clone(), namespace)
        .get_opt(&sub_ref.name)
        .await
        .or_else(absent_if_not_served)
        .map_err(Error::kube(format!("reading Subscription {subscription}")))?;
    let installed_csv = sub
        .as_ref()
        .and_then(|s| s.status.as_ref())
        .and_then(|s| s.installed_csv.clone())
        .filter(|c| !c.is_empty());
    let csv_name = installed_csv
        .clone()
        .or_else(|| moved_to.map(str::to_owned));
    let csv = match &csv_name {
        Some(name) => Api::<ClusterServiceVersion>::namespaced(client.clone(), namespace)
            .get_opt(name)
            .await
            .or_else(absent_if_not_served)
            .map_err(Error::kube(format!(
                "reading ClusterServiceVersion {namespace}/{name}"
            )))?,
        None => None,
    };
    let ((webhook_configurations, webhook_configurations_beyond_limit), mut cas) = match &csv_name {
        Some(csv) => olm_webhook_configurations(client, csv, namespace).await?,
        None => ((Vec::new(), false), std::collections::BTreeSet::new()),
    };
    if let Some(sub) = &sub {
        cas.extend(olm_crd_cas(client, &sub.spec.name, namespace).await?);
    }
    Ok(pom_policy::adopt::OlmSource {
        subscription,
        namespace: namespace.to_owned(),
        found: sub.is_some(),
        package: sub.map(|s| s.spec.name).unwrap_or_default(),
        installed_csv,
        csv_phase: csv.as_ref().map(|c| {
            c.status
                .as_ref()
                .and_then(|s| s.phase.clone())
                .unwrap_or_default()
        }),
        csv_uid: csv.as_ref().and_then(|c| c.metadata.uid.clone()),
        csv_annotations: csv
            .map(|c| c.annotations().keys().cloned().collect())
            .unwrap_or_default(),
        webhook_configurations,
        webhook_configurations_beyond_limit,
        ca_bundle: (!cas.is_empty())
            .then(|| cas.iter().map(|pem| format!("{}\n", pem.trim())).collect()),
    })
}

/// The CAs OLM's webhook configurations trust (public data: OLM wrote its CA into each
/// webhook's caBundle), as PEM.
fn trusted_cas(
    validating: &[k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration],
    mutating: &[k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration],
) -> std::collections::BTreeSet<String> {
    let pem = |config: &k8s_openapi::api::admissionregistration::v1::WebhookClientConfig| {
        config
            .ca_bundle
            .as_ref()
            .and_then(|b| String::from_utf8(b.0.clone()).ok())
    };
    validating
        .iter()
        .flat_map(|c| c.webhooks.iter().flatten().map(|w| pem(&w.client_config)))
        .chain(
            mutating
                .iter()
                .flat_map(|c| c.webhooks.iter().flatten().map(|w| pem(&w.client_config))),
        )
        .flatten()
        .collect()
}

/// The CAs OLM's CRDs of the installation trust for their conversion webhook (found by the
/// operator's component label): where a bundle with only a conversion webhook keeps OLM's CA.
async fn olm_crd_cas(
    client: &kube::Client,
    package: &str,
    namespace: &str,
) -> Result<std::collections::BTreeSet<String>, Error> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let label = pom_policy::adopt::takeover::component_label(package, namespace);
    let limit = u32::try_from(pom_policy::adopt::takeover::MAX_ADOPTED_OBJECTS).unwrap_or(u32::MAX);
    let crds = Api::<CustomResourceDefinition>::all(client.clone())
        .list(&kube::api::ListParams::default().labels(&label).limit(limit))
        .await
        .map_err(Error::kube(format!(
            "listing the CRDs OLM v0 labelled {label}"
        )))?;
    Ok(crds
        .items
        .iter()
        .filter_map(|crd| {
            let conversion = crd.spec.conversion.as_ref()?.webhook.as_ref()?;
            let pem = conversion.client_config.as_ref()?.ca_bundle.as_ref()?;
            String::from_utf8(pem.0.clone()).ok()
        })
        .collect())
}

/// The webhook configurations OLM v0 created for `csv` of `namespace`, found by its owner
/// labels (`webhook.go` lists them so too): adoption retires them once POM's replace them.
/// Each kind is listed with a limit (`webhooks::MAX_OLM_WEBHOOK_CONFIGURATIONS`); `true` when
/// a kind had more (the proof then stops the adoption, naming the limit).
#[allow(clippy::type_complexity)]
async fn olm_webhook_configurations(
    client: &kube::Client,
    csv: &str,
    namespace: &str,
) -> Result<
    (
        (
            Vec<pom_policy::adopt::webhooks::OlmWebhookConfiguration>,
            bool,
        ),
        std::collections::BTreeSet<String>,
    ),
    Error,
> {
    use k8s_openapi::api::admissionregistration::v1::{
        MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
    };
    use pom_policy::adopt::takeover::{OLM_OWNER, OLM_OWNER_NAMESPACE};
    use pom_policy::adopt::webhooks::{
        MAX_OLM_WEBHOOK_CONFIGURATIONS, OLM_WEBHOOK_DESCRIPTION_LABEL, OlmWebhookConfiguration,
    };
    let Some(selector) = label_selector(&[(OLM_OWNER, csv), (OLM_OWNER_NAMESPACE, namespace)])
    else {
        // A name no label value can hold labels nothing: OLM made nothing under it.
        return Ok(((Vec::new(), false), std::collections::BTreeSet::new()));
    };
    let limit = u32::try_from(MAX_OLM_WEBHOOK_CONFIGURATIONS).unwrap_or(u32::MAX);
    let params = kube::api::ListParams::default()
        .labels(&selector)
        .limit(limit);
    let more_left = |meta: &kube::api::ListMeta, count: usize| {
        count > MAX_OLM_WEBHOOK_CONFIGURATIONS
            || meta.continue_.as_ref().is_some_and(|c| !c.is_empty())
    };
    let found = |meta: &kube::api::ObjectMeta, kind: &str| OlmWebhookConfiguration {
        key: pom_policy::adopt::ObjectKey {
            api_version: "admissionregistration.k8s.io/v1".to_owned(),
            kind: kind.to_owned(),
            namespace: None,
            name: meta.name.clone().unwrap_or_default(),
        },
        resource_version: meta.resource_version.clone(),
        generate_name: meta
            .labels
            .as_ref()
            .and_then(|l| l.get(OLM_WEBHOOK_DESCRIPTION_LABEL))
            .cloned(),
        handed_over: meta
            .annotations
            .as_ref()
            .is_some_and(|a| a.contains_key(pom_api::labels::ADOPT)),
    };
    let mut out = Vec::new();
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .list(&params)
        .await
        .map_err(Error::kube(format!(
            "listing the ValidatingWebhookConfigurations OLM v0 made for {csv}"
        )))?;
    out.extend(
        validating
            .items
            .iter()
            .map(|c| found(&c.metadata, "ValidatingWebhookConfiguration")),
    );
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone())
        .list(&params)
        .await
        .map_err(Error::kube(format!(
            "listing the MutatingWebhookConfigurations OLM v0 made for {csv}"
        )))?;
    out.extend(
        mutating
            .items
            .iter()
            .map(|c| found(&c.metadata, "MutatingWebhookConfiguration")),
    );
    let beyond = more_left(&validating.metadata, validating.items.len())
        || more_left(&mutating.metadata, mutating.items.len());
    let cas = trusted_cas(&validating.items, &mutating.items);
    Ok(((out, beyond), cas))
}

/// `key=value,...`; `None` when a value is no valid label value (the selector would be refused).
fn label_selector(pairs: &[(&str, &str)]) -> Option<String> {
    let valid = |v: &str| {
        v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    };
    if pairs.iter().any(|(_, v)| !valid(v)) {
        return None;
    }
    Some(
        pairs
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// A 404 on a read by name (the object, or its whole API when OLM v0 is not installed) is an
/// absent object.
fn absent_if_not_served<T>(err: kube::Error) -> Result<Option<T>, kube::Error> {
    match &err {
        kube::Error::Api(status) if status.code == 404 => Ok(None),
        _ => Err(err),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Issue 23 item 3: the listed proxy is what is asked for; an unread one is what runs.
    #[test]
    fn an_unread_proxy_asks_for_what_runs() {
        use pom_api::platform_operator::{AppliedConfig, ClusterProxyEnv};
        let running = ClusterProxyEnv {
            http_proxy: "http://old:3128".into(),
            ..ClusterProxyEnv::default()
        };
        let listed = ClusterProxyEnv {
            http_proxy: "http://new:3128".into(),
            ..ClusterProxyEnv::default()
        };
        let mut po: PlatformOperator = serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": "p"}, "spec": {"package": {"name": "p"}},
        }))
        .unwrap();
        po.status = Some(pom_api::platform_operator::PlatformOperatorStatus {
            applied_config: Some(AppliedConfig::of(None, Some(&running))),
            ..Default::default()
        });
        let unread = config_view(&po, &OperatorProxy::Unknown);
        assert!(!unread.changed());
        let read = config_view(&po, &OperatorProxy::Listed(Some(listed.clone())));
        assert!(read.changed());
        assert_eq!(read.desired, AppliedConfig::of(None, Some(&listed)));
        assert!(config_view(&po, &OperatorProxy::Listed(None)).changed());
    }

    /// Issue 34 item 5: a lost status is looked for through every kind POM applies and can
    /// list, Deployments first, not through Deployments only.
    #[test]
    fn a_lost_status_is_looked_for_through_every_listable_kind() {
        let kinds = lost_status_kinds();
        assert_eq!(kinds.first().map(|k| k.2), Some("Deployment"));
        assert_eq!(kinds.len(), PRUNABLE_KINDS.len());
        for kind in PRUNABLE_KINDS {
            assert!(kinds.contains(kind), "{kind:?}");
        }
        for plain in [
            "ConfigMap",
            "ServiceAccount",
            "Role",
            "ClusterRole",
            "Service",
        ] {
            assert!(kinds.iter().any(|k| k.2 == plain), "{plain}");
        }
    }

    /// One bundle's objects name it; several, or one without a bundle label, name nothing a
    /// catalog lists; none name nothing at all.
    #[test]
    fn found_objects_describe_their_bundle() {
        let some = |s: &str| Some(s.to_owned());
        assert_eq!(describe_found(&[]), None);
        assert_eq!(describe_found(&[some("p.v1")]), some("p.v1"));
        assert_eq!(describe_found(&[some("p.v1"), some("p.v1")]), some("p.v1"));
        assert_eq!(
            describe_found(&[some("p.v2"), some("p.v1")]),
            some("p.v1 and p.v2")
        );
        assert_eq!(
            describe_found(&[some("p.v1"), None]),
            some("(no bundle label) and p.v1")
        );
    }

    /// Issue 22 item 4: a bundle looked up by name is looked up by catalog priority, never in
    /// the order the cache lists catalogs.
    #[test]
    fn catalog_contents_come_by_priority_then_name() {
        let content = Arc::new(FbcCatalog::default());
        let gathered = GatheredCatalogs::Ready {
            catalogs: [("low", -5), ("b-high", 10), ("a-high", 10), ("zero", 0)]
                .into_iter()
                .map(|(name, priority)| (name.to_owned(), priority, content.clone()))
                .collect(),
            unavailable: Vec::new(),
        };
        let names: Vec<&str> = gathered.contents().into_iter().map(|(n, _)| n).collect();
        assert_eq!(names, ["a-high", "b-high", "zero", "low"]);
    }
}
