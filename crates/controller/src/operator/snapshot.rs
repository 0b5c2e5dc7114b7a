//! Gathering what a PlatformOperator's decision depends on: the cluster's phase, the Kubernetes
//! version, and the catalogs to resolve from.

use std::sync::Arc;

use kube::Api;
use pom_api::openshift::{CLUSTER_VERSION_NAME, ClusterVersion};
use pom_resolver::cluster::{ClusterPhase, ClusterVersionSnapshot, HistoryEntry, cluster_phase};
use pom_resolver::fbc::Catalog as FbcCatalog;

use crate::catalog::{CatalogCache, CatalogState};
use crate::error::Error;

/// The cluster's update phase: `Ok(None)` on plain Kubernetes (no ClusterVersion: OpenShift
/// checks are off), `Err` with a message when the ClusterVersion cannot be judged (reported,
/// never guessed).
pub async fn cluster(client: &kube::Client) -> Result<Result<Option<ClusterPhase>, String>, Error> {
    let api: Api<ClusterVersion> = Api::all(client.clone());
    let cv = match api.get_opt(CLUSTER_VERSION_NAME).await {
        Ok(cv) => cv,
        // The CRD itself is absent on plain Kubernetes.
        Err(kube::Error::Api(status)) if status.code == 404 => None,
        Err(err) => return Err(Error::kube("reading ClusterVersion version")(err)),
    };
    let Some(cv) = cv else { return Ok(Ok(None)) };
    let Some(snapshot) = snapshot_of(&cv) else {
        return Ok(Err("ClusterVersion version has no status yet".to_owned()));
    };
    Ok(cluster_phase(&snapshot)
        .map(Some)
        .map_err(|e| e.to_string()))
}

/// The plain view of a ClusterVersion the resolver judges the cluster phase from (§4.1);
/// `None` while the CVO has not written a status. Shared with `pomctl plan`.
#[must_use]
pub fn snapshot_of(cv: &ClusterVersion) -> Option<ClusterVersionSnapshot> {
    let status = cv.status.as_ref()?;
    Some(ClusterVersionSnapshot {
        history: status
            .history
            .iter()
            .map(|h| HistoryEntry {
                state: h.state.clone(),
                version: h.version.clone(),
                completion_time: h.completion_time.as_ref().map(|t| t.0.to_string()),
            })
            .collect(),
        desired_version: Some(status.desired.version.clone()).filter(|v| !v.is_empty()),
        progressing: status
            .conditions
            .iter()
            .find(|c| c.type_ == "Progressing")
            .map(|c| c.status == "True"),
    })
}

/// Whether a Catalog the PO may resolve from exists but has not been processed by this
/// manager yet (cache warming up after a start). Only lists Catalogs when the cache lacks the
/// relevant entries, so a warm manager pays nothing.
pub async fn catalogs_loading(
    client: &kube::Client,
    cache: &CatalogCache,
    named: Option<&str>,
) -> Result<bool, Error> {
    let known = |name: &str| cache.get(name).is_some();
    if let Some(name) = named
        && known(name)
    {
        return Ok(false);
    }
    if named.is_none() && !cache.snapshot().is_empty() {
        // Some catalogs are known; a missing one shows up as soon as it is processed.
        return Ok(false);
    }
    let api: Api<pom_api::Catalog> = Api::all(client.clone());
    let catalogs = api
        .list_metadata(&kube::api::ListParams::default())
        .await
        .map_err(Error::kube("listing Catalogs"))?;
    Ok(catalogs.items.iter().any(|c| {
        let name = c.metadata.name.as_deref().unwrap_or_default();
        named.is_none_or(|n| n == name) && !known(name)
    }))
}

/// The catalogs a PO resolves from: the one it names, or all; serving content only, falling
/// back to the last good content of an unavailable catalog. The error says why none is usable.
pub fn catalogs(
    cache: &CatalogCache,
    named: Option<&str>,
) -> Result<Vec<(String, i32, Arc<FbcCatalog>)>, String> {
    let entries = match named {
        Some(name) => match cache.get(name) {
            Some(entry) => vec![entry],
            None => {
                return Err(format!(
                    "Catalog {name:?} (spec.package.catalog) does not exist or has not been unpacked yet"
                ));
            }
        },
        None => cache.snapshot(),
    };
    let mut usable = Vec::new();
    let mut problems = Vec::new();
    for entry in entries {
        match &entry.state {
            CatalogState::Serving(served) => {
                usable.push((entry.name.clone(), entry.priority, served.content.clone()))
            }
            CatalogState::Unavailable {
                last_good: Some(served),
                ..
            } => {
                usable.push((entry.name.clone(), entry.priority, served.content.clone()));
            }
            CatalogState::Unavailable { message, .. } => {
                problems.push(format!("Catalog {}: {message}", entry.name))
            }
        }
    }
    if usable.is_empty() {
        if problems.is_empty() {
            return Err("no Catalog is serving content yet: create a Catalog".to_owned());
        }
        return Err(problems.join("; "));
    }
    Ok(usable)
}
