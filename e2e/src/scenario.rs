//! Building blocks of the manager's e2e scenarios: a control plane with simulated workloads,
//! catalogs, PlatformOperators, a ClusterVersion in a given update state, and reading back
//! conditions. Each test file states its story with these.

use std::time::Duration;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, Patch, PatchParams, PostParams};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, ClusterVersion};
use pom_api::{Catalog, PlatformOperator};
use serde_json::{Value, json};

use crate::manager::{eventually, po_condition};
use crate::{ControlPlane, Workloads, binaries};

/// How long a scenario waits for the manager to reach a state.
pub const WAIT: Duration = Duration::from_secs(120);

/// A control plane where Deployments really roll out (plus the registry binary when asked);
/// `None` when the binaries are missing outside CI (a `SKIPPED` line is written; see
/// [`crate::skip`]).
///
/// # Panics
/// When the control plane cannot start, and in CI when binaries are missing.
pub async fn simulated_plane(with_registry: bool) -> Option<ControlPlane> {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    if with_registry {
        needed.extend_from_slice(binaries::REGISTRY);
    }
    binaries::require(&needed)?;
    match ControlPlane::start(Workloads::Simulated).await {
        Ok(plane) => Some(plane),
        Err(err) => panic!("starting the control plane: {err}"),
    }
}

/// [`simulated_plane`] whose pods' addresses a test can serve on: see
/// [`Workloads::SimulatedServingOnLoopback`] and [`crate::webhook_server`].
pub async fn serving_plane() -> Option<ControlPlane> {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::WORKLOADS);
    binaries::require(&needed)?;
    match ControlPlane::start(Workloads::SimulatedServingOnLoopback).await {
        Ok(plane) => Some(plane),
        Err(err) => panic!("starting the control plane: {err}"),
    }
}

fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|err| panic!("building a test object: {err}"))
}

/// Applies Catalog `name` with `source` (`{"image": ...}` or `{"configMap": ...}`).
///
/// # Panics
/// When the API refuses it.
pub async fn apply_catalog(client: &Client, name: &str, source: Value, priority: i32) {
    let catalog: Catalog = from_json(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": name},
        "spec": {"source": source, "priority": priority}
    }));
    if let Err(err) = Api::<Catalog>::all(client.clone())
        .patch(
            name,
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(&catalog),
        )
        .await
    {
        panic!("applying Catalog {name}: {err}");
    }
}

/// The manager's namespace in every e2e cluster (as shipped).
pub const MANAGER_NAMESPACE: &str = "openshift-platform-operators";

/// Lists `namespace` among those Catalogs may read from, as an admin does: adds it to key
/// `namespaces` of ConfigMap `platform-operators-catalog-sources` in the manager's namespace
/// (creating both when absent), keeping the names already listed.
///
/// # Panics
/// When the API refuses it.
pub async fn trust_catalog_namespace(client: &Client, namespace: &str) {
    use pom_policy::source_trust::{LISTED_KEY, SOURCES_CONFIG_MAP};
    let _ = Api::<Namespace>::all(client.clone())
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": MANAGER_NAMESPACE}})),
        )
        .await;
    let api: Api<ConfigMap> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let current = api
        .get_opt(SOURCES_CONFIG_MAP)
        .await
        .unwrap_or_else(|err| panic!("reading ConfigMap {SOURCES_CONFIG_MAP}: {err}"));
    let mut listed: Vec<String> = current
        .as_ref()
        .and_then(|cm| cm.data.as_ref())
        .and_then(|data| data.get(LISTED_KEY))
        .map(|text| {
            text.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    if listed.iter().any(|n| n == namespace) {
        return;
    }
    listed.push(namespace.to_owned());
    let cm: ConfigMap = from_json(json!({
        "metadata": {"name": SOURCES_CONFIG_MAP, "namespace": MANAGER_NAMESPACE},
        "data": {LISTED_KEY: listed.join(",")},
    }));
    let written = match current {
        Some(_) => api
            .patch(
                SOURCES_CONFIG_MAP,
                &PatchParams::default(),
                &Patch::Merge(&cm),
            )
            .await
            .map(|_| ()),
        None => api.create(&PostParams::default(), &cm).await.map(|_| ()),
    };
    if let Err(err) = written {
        panic!("listing {namespace} in ConfigMap {SOURCES_CONFIG_MAP}: {err}");
    }
}

/// Puts `fbc` in ConfigMap `catalogs/<name>` (key `catalog.json`), lists `catalogs` among the
/// namespaces Catalogs may read from, and points Catalog `name` at it; re-applying replaces the content (a catalog that gains bundles).
///
/// # Panics
/// When the API refuses it.
pub async fn configmap_catalog(client: &Client, name: &str, fbc: &str, priority: i32) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let _ = namespaces
        .create(
            &PostParams::default(),
            &from_json(json!({"metadata": {"name": "catalogs"}})),
        )
        .await;
    trust_catalog_namespace(client, "catalogs").await;
    let cm: ConfigMap =
        from_json(json!({"metadata": {"name": name}, "data": {"catalog.json": fbc}}));
    if let Err(err) = Api::<ConfigMap>::namespaced(client.clone(), "catalogs")
        .patch(
            name,
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(&cm),
        )
        .await
    {
        panic!("applying ConfigMap catalogs/{name}: {err}");
    }
    apply_catalog(
        client,
        name,
        json!({"configMap": {"name": name, "namespace": "catalogs"}}),
        priority,
    )
    .await;
}

/// Waits until Catalog `name` serves exactly `fbc` (its `status.resolvedSource` names the
/// content's sha256, as the manager computes it for ConfigMap catalogs): the manager has taken
/// the new content in. Returns the resolved source.
pub async fn wait_catalog_serves(client: &Client, name: &str, fbc: &str) -> String {
    use sha2::Digest as _;
    let digest = format!(
        "@sha256:{}",
        hex::encode(sha2::Sha256::digest(fbc.as_bytes()))
    );
    eventually(
        WAIT,
        &format!("Catalog {name} to serve the new content ({digest})"),
        || async {
            let catalog = Api::<Catalog>::all(client.clone()).get(name).await.ok()?;
            let resolved = catalog.status?.resolved_source?;
            resolved.ends_with(&digest).then_some(resolved)
        },
    )
    .await
}

/// Creates the cluster-scoped object `object` (JSON of kind `K`).
///
/// # Panics
/// When `object` is not a `K` or the API refuses it.
pub async fn create_cluster_scoped<K>(client: &Client, object: Value)
where
    K: kube::Resource<DynamicType = (), Scope = k8s_openapi::ClusterResourceScope>
        + serde::de::DeserializeOwned
        + serde::Serialize
        + Clone
        + std::fmt::Debug,
{
    create_in(Api::<K>::all(client.clone()), object).await;
}

/// Creates the object `object` (JSON of kind `K`) through `api` (`Api::namespaced` for a
/// namespaced kind, as the object's namespace).
///
/// # Panics
/// When `object` is not a `K` or the API refuses it.
pub async fn create_in<K>(api: Api<K>, object: Value)
where
    K: kube::Resource + serde::de::DeserializeOwned + serde::Serialize + Clone + std::fmt::Debug,
{
    let object: K = from_json(object);
    if let Err(err) = api.create(&PostParams::default(), &object).await {
        panic!("creating {object:?}: {err}");
    }
}

/// Creates PlatformOperator `name` with `spec`.
///
/// # Panics
/// When the API refuses it.
pub async fn create_po(client: &Client, name: &str, spec: Value) {
    let po: PlatformOperator = from_json(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": name}, "spec": spec
    }));
    if let Err(err) = Api::<PlatformOperator>::all(client.clone())
        .create(&PostParams::default(), &po)
        .await
    {
        panic!("creating PlatformOperator {name}: {err}");
    }
}

/// Sets `spec.steadyStateVersionRange` of PO `po` (an admin moving it by hand).
///
/// # Panics
/// When the API refuses it.
pub async fn set_steady_state_range(client: &Client, po: &str, range: &str) {
    if let Err(err) = Api::<PlatformOperator>::all(client.clone())
        .patch(
            po,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": range}})),
        )
        .await
    {
        panic!("setting steadyStateVersionRange of {po}: {err}");
    }
}

/// Waits until PlatformOperator `name` no longer exists (its finalizer ran).
///
/// # Panics
/// After `timeout`.
pub async fn wait_po_gone(client: &Client, name: &str, timeout: Duration) {
    eventually(
        timeout,
        &format!("PlatformOperator {name} to be gone"),
        || async {
            Api::<PlatformOperator>::all(client.clone())
                .get_opt(name)
                .await
                .ok()?
                .is_none()
                .then_some(())
        },
    )
    .await;
}

/// Waits until condition `type_` of PO `po` (for its current generation) has `status` (and
/// `reason`, when given); returns its message.
pub async fn wait_po_condition(
    client: &Client,
    po: &str,
    type_: &str,
    status: &str,
    reason: Option<&str>,
) -> String {
    let what = format!(
        "{po} {type_}={status}{}",
        reason.map(|r| format!("/{r}")).unwrap_or_default()
    );
    eventually(WAIT, &what, || async {
        po_condition(client, po, type_)
            .await
            .filter(|(s, r, _)| s == status && reason.is_none_or(|want| r == want))
            .map(|(_, _, m)| m)
    })
    .await
}

/// Condition `type_` of the aggregated ClusterOperator as (status, reason, message).
pub async fn co_condition(client: &Client, type_: &str) -> Option<(String, String, String)> {
    let co = Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .ok()??;
    let c = co
        .status?
        .conditions
        .into_iter()
        .find(|c| c.type_ == type_)?;
    Some((
        c.status,
        c.reason.unwrap_or_default(),
        c.message.unwrap_or_default(),
    ))
}

/// Now, with the API server's second precision.
#[must_use]
pub fn now() -> Time {
    let secs = k8s_openapi::jiff::Timestamp::now().as_second();
    Time(
        k8s_openapi::jiff::Timestamp::from_second(secs)
            .unwrap_or(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
    )
}

/// Writes ClusterVersion `version` as the CVO would for this moment of an update: `history`
/// newest first as (version, completed), `desired` the target, Progressing while the newest
/// entry is not completed. (For the CVO's rules on starting and completing updates, see
/// [`crate::cvo::Cvo`].)
///
/// # Panics
/// When the API refuses it.
pub async fn set_cluster(client: &Client, history: &[(&str, bool)], desired: &str) {
    let api: Api<ClusterVersion> = Api::all(client.clone());
    if matches!(api.get_opt("version").await, Ok(None)) {
        let cv: ClusterVersion = from_json(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
            "spec": {"clusterID": "00000000-0000-4000-8000-000000000000"}
        }));
        if let Err(err) = api.create(&PostParams::default(), &cv).await {
            panic!("creating ClusterVersion: {err}");
        }
    }
    let in_flight = history.first().is_some_and(|(_, completed)| !completed);
    let history: Vec<Value> = history
        .iter()
        .map(|(v, completed)| {
            json!({"state": if *completed {"Completed"} else {"Partial"}, "startedTime": now(),
                   "completionTime": if *completed {json!(now())} else {json!(null)},
                   "version": v, "image": format!("example.invalid/release:{v}"), "verified": false})
        })
        .collect();
    let patch = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "status": {
        "desired": {"version": desired, "image": format!("example.invalid/release:{desired}")},
        "history": history, "observedGeneration": 1, "versionHash": "x", "availableUpdates": null,
        "conditions": [{"type": "Progressing", "status": if in_flight {"True"} else {"False"}, "lastTransitionTime": now(),
                        "message": format!("Working towards {desired}")}]}});
    if let Err(err) = api
        .patch_status(
            "version",
            &PatchParams::apply("cvo-simulator").force(),
            &Patch::Apply(&patch),
        )
        .await
    {
        panic!("writing ClusterVersion status: {err}");
    }
}

/// The image of the first container of Deployment `namespace/name`.
///
/// # Panics
/// When the Deployment cannot be read or has no container image.
pub async fn deployment_image(client: &Client, namespace: &str, name: &str) -> String {
    let deployment =
        Api::<k8s_openapi::api::apps::v1::Deployment>::namespaced(client.clone(), namespace)
            .get(name)
            .await
            .unwrap_or_else(|err| panic!("reading Deployment {namespace}/{name}: {err}"));
    deployment
        .spec
        .and_then(|spec| spec.template.spec)
        .and_then(|pod| pod.containers.into_iter().next())
        .and_then(|container| container.image)
        .unwrap_or_else(|| panic!("Deployment {namespace}/{name} has no container image"))
}
