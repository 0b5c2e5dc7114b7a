//! The Catalog reconciler: read the source, update the cache, report status.
//!
//! Image sources are re-resolved every `pollInterval` (a requeue) and pulled only when the digest
//! moved; ConfigMap sources are re-read when the ConfigMap changes (a watch mapped to the
//! Catalogs naming it). Status is written by server-side apply, only when it changed. Deleted
//! Catalogs leave the cache within seconds (no finalizer: there is nothing to clean up).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::events::{Event, EventType};
use backon::{BackoffBuilder, ExponentialBuilder};
use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Patch, PatchParams};
use kube::runtime::controller::{self, Action};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Api, Resource, ResourceExt};
use pom_api::{Catalog, CatalogStatus};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use super::source::{self, SourceError};
use super::status;
use crate::Context;
use crate::context::CATALOG_STATUS_FIELD_MANAGER;
use crate::watch_cache::{Readiness, cached_controller};
use pom_policy::duration::parse_go_duration;
use pom_policy::source_trust::SOURCES_CONFIG_MAP;

/// Shortest poll interval honoured, whatever the spec says.
const MIN_POLL_INTERVAL: Duration = Duration::from_secs(1);
/// How often cache entries of deleted Catalogs are looked for.
const PRUNE_INTERVAL: Duration = Duration::from_secs(2);

/// Why a reconcile must be retried with backoff.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    /// The source could not be read (already reported in status).
    #[error(transparent)]
    Source(#[from] SourceError),
    /// The status could not be written.
    #[error("writing the status of Catalog {name}: {source}")]
    Status {
        name: String,
        #[source]
        source: Box<kube::Error>,
    },
}

/// The controller's own state next to the shared context.
struct Reconciler {
    ctx: Arc<Context>,
    store: Store<Catalog>,
    /// Consecutive failures per Catalog, for the backoff; reset on success.
    attempts: Mutex<HashMap<String, u32>>,
}

impl Reconciler {
    fn reset(&self, name: &str) {
        self.attempts
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(name);
    }

    fn next_attempt(&self, name: &str) -> u32 {
        let mut attempts = self.attempts.lock().unwrap_or_else(PoisonError::into_inner);
        let attempt = attempts.entry(name.to_owned()).or_insert(0);
        *attempt = attempt.saturating_add(1);
        *attempt
    }

    /// Whether `catalog` (this very object, by uid) is still in the cluster.
    fn still_exists(&self, catalog: &Catalog) -> bool {
        self.store
            .get(&ObjectRef::from_obj(catalog))
            .is_some_and(|live| live.uid() == catalog.uid())
    }
}

/// Runs the Catalog controller until `shutdown` is cancelled, filling `ctx.catalogs`.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let catalogs: Api<Catalog> = Api::all(ctx.client.clone());
    let config_maps: Api<ConfigMap> = Api::all(ctx.client.clone());
    let (controller, store, listed) = cached_controller(catalogs, watcher::Config::default());
    let reconciler = Arc::new(Reconciler {
        ctx: ctx.clone(),
        store: store.clone(),
        attempts: Mutex::new(HashMap::new()),
    });
    let prune = tokio::spawn(prune_deleted(
        ctx.clone(),
        store.clone(),
        listed,
        shutdown.clone(),
    ));
    let mapper_store = store;
    let manager_namespace = ctx.settings.manager_namespace.clone();
    controller
        .watches(config_maps, watcher::Config::default(), move |config_map| {
            catalogs_reading(&mapper_store, &manager_namespace, &config_map)
        })
        .graceful_shutdown_on(shutdown.clone().cancelled_owned())
        .run(reconcile, error_policy, reconciler)
        .for_each(|result| {
            match result {
                Ok((catalog, _)) => debug!(catalog = %catalog.name, "reconciled"),
                Err(controller::Error::ObjectNotFound(catalog)) => {
                    ctx.catalogs.remove(&catalog.name);
                    ctx.metrics.catalog_removed(&catalog.name);
                }
                Err(err) => warn!(error = %err, "catalog controller"),
            }
            futures::future::ready(())
        })
        .await;
    shutdown.cancel();
    if let Err(err) = prune.await {
        warn!(error = %err, "catalog prune task");
    }
}

/// The Catalogs whose source is `config_map`, or whose image source trusts the CA bundle in it
/// (a rotated CA is used at once; pull secrets are re-read at each poll instead, see
/// [`super::access`]); every Catalog when it is the list of namespaces Catalogs may read from
/// (`pom_policy::source_trust`), so a change to the list is applied at once.
fn catalogs_reading(
    store: &Store<Catalog>,
    manager_namespace: &str,
    config_map: &ConfigMap,
) -> Vec<ObjectRef<Catalog>> {
    let (Some(namespace), name) = (config_map.namespace(), config_map.name_any()) else {
        return Vec::new();
    };
    let trust_list = namespace == manager_namespace && name == SOURCES_CONFIG_MAP;
    store
        .state()
        .iter()
        .filter(|catalog| {
            if trust_list {
                return true;
            }
            let source = &catalog.spec.source;
            let catalog_source = source
                .config_map
                .as_ref()
                .is_some_and(|source| source.namespace == namespace && source.name == name);
            let ca_bundle = source
                .image
                .as_ref()
                .and_then(|image| image.ca_bundle.as_ref())
                .is_some_and(|ca| ca.namespace == namespace && ca.name == name);
            catalog_source || ca_bundle
        })
        .map(|catalog| ObjectRef::from_obj(catalog.as_ref()))
        .collect()
}

/// Drops cache entries of Catalogs that are gone. The controller never reconciles a deleted
/// object, so this is how the cache learns about deletions. It waits on `listed`, never on the
/// store itself: the controller's runner already does, and a store wakes only one waiter
/// ([`Readiness`]).
async fn prune_deleted(
    ctx: Arc<Context>,
    store: Store<Catalog>,
    listed: Readiness,
    shutdown: CancellationToken,
) {
    tokio::select! {
        () = shutdown.cancelled() => return,
        ready = listed.wait() => if ready.is_err() { return },
    }
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            () = tokio::time::sleep(PRUNE_INTERVAL) => {}
        }
        let live: HashSet<String> = store.state().iter().map(|c| c.name_any()).collect();
        for name in ctx.catalogs.names() {
            if !live.contains(&name) {
                info!(catalog = %name, "catalog deleted; no longer served");
                ctx.catalogs.remove(&name);
                ctx.metrics.catalog_removed(&name);
            }
        }
    }
}

async fn reconcile(
    catalog: Arc<Catalog>,
    reconciler: Arc<Reconciler>,
) -> Result<Action, CatalogError> {
    let ctx = &reconciler.ctx;
    let name = catalog.name_any();
    let _running = ctx.liveness.begin("catalog", &name);
    let priority = catalog.spec.priority;
    let previous = ctx
        .catalogs
        .get(&name)
        .and_then(|entry| entry.state.latest_good().cloned());
    let fetched = source::fetch(ctx, &catalog.spec.source, previous.clone()).await;
    match &fetched {
        Ok(served) => {
            // Packages no PlatformOperator names any more are let go at each poll.
            served.retain(&ctx.catalogs.wanted_packages());
            ctx.catalogs.serve(&name, priority, served.clone());
            ctx.metrics.catalog_refreshed(&name);
            remove_unserved_content(ctx, &reconciler.store).await;
        }
        Err(err) if err.distrusts_content() => {
            ctx.catalogs
                .refuse(&name, priority, err.reason(), &err.to_string());
            remove_unserved_content(ctx, &reconciler.store).await;
        }
        Err(err) => {
            if let Some(kept) = &previous {
                kept.retain(&ctx.catalogs.wanted_packages());
            }
            ctx.catalogs
                .mark_unavailable(&name, priority, err.reason(), &err.to_string());
        }
    }
    if !reconciler.still_exists(&catalog) {
        // Deleted while its source was read: do not leave it behind.
        ctx.catalogs.remove(&name);
        ctx.metrics.catalog_removed(&name);
        return Ok(Action::await_change());
    }
    let outcome = match &fetched {
        Ok(served) => Ok(served),
        Err(err) => Err((err.reason(), err.to_string())),
    };
    write_status(ctx, &catalog, &outcome).await?;
    let poll = poll_interval(ctx, &catalog);
    match fetched {
        Ok(_) => {
            reconciler.reset(&name);
            Ok(Action::requeue(poll))
        }
        Err(err) if !err.retry_with_backoff() => {
            reconciler.reset(&name);
            Ok(Action::requeue(poll))
        }
        Err(err) => Err(err.into()),
    }
}

fn error_policy(catalog: Arc<Catalog>, err: &CatalogError, reconciler: Arc<Reconciler>) -> Action {
    let name = catalog.name_any();
    let attempt = reconciler.next_attempt(&name);
    let delay = backoff_delay(attempt).min(poll_interval(&reconciler.ctx, &catalog));
    warn!(catalog = %name, attempt, retry_in = ?delay, error = %err, "catalog not served");
    Action::requeue(delay)
}

/// Exponential backoff from 1 s to 5 min with jitter, for the `attempt`-th consecutive failure.
fn backoff_delay(attempt: u32) -> Duration {
    let max = Duration::from_secs(300);
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_secs(1))
        .with_max_delay(max)
        .with_jitter()
        .without_max_times()
        .build()
        .nth(usize::try_from(attempt.saturating_sub(1)).unwrap_or(usize::MAX))
        .unwrap_or(max)
}

/// Removes unpacked images no Catalog serves any more (a previous digest, a deleted Catalog),
/// once every Catalog has been read at least once (so one not read yet keeps its folder).
async fn remove_unserved_content(ctx: &Context, store: &Store<Catalog>) {
    let all_read = store
        .state()
        .iter()
        .all(|catalog| ctx.catalogs.get(&catalog.name_any()).is_some());
    if !all_read {
        return;
    }
    let keep = ctx.catalogs.content_in_use();
    let root = ctx.settings.catalog_content_dir.clone();
    let removed = tokio::task::spawn_blocking(move || {
        crate::oci::retain_pulled(&root, keep.iter().map(String::as_str))
    })
    .await;
    match removed {
        Ok(Ok(removed)) if !removed.is_empty() => {
            debug!(
                folders = removed.len(),
                "removed unpacked catalog images no Catalog serves"
            );
        }
        Ok(Ok(_)) => {}
        Ok(Err(err)) => warn!(error = %err, "removing unpacked catalog images"),
        Err(err) => warn!(error = %err, "removing unpacked catalog images"),
    }
}

/// How often the source is re-read: the image's `pollInterval`, else the manager's default
/// (ConfigMaps are watched; the periodic re-read is only a safety net for them).
fn poll_interval(ctx: &Context, catalog: &Catalog) -> Duration {
    catalog
        .spec
        .source
        .image
        .as_ref()
        .and_then(|image| image.poll_interval.as_deref())
        .and_then(parse_go_duration)
        .unwrap_or(ctx.settings.default_poll_interval)
        .max(MIN_POLL_INTERVAL)
}

/// Applies the status when it differs from what the object has, and publishes an Event when
/// `Serving` flips or new content is served.
async fn write_status(
    ctx: &Context,
    catalog: &Catalog,
    outcome: &status::Outcome<'_>,
) -> Result<(), CatalogError> {
    let name = catalog.name_any();
    let old = catalog.status.clone().unwrap_or_default();
    let new = status::desired(
        &old,
        catalog.metadata.generation,
        outcome,
        jiff::Timestamp::now(),
    );
    if new == old {
        return Ok(());
    }
    let body = serde_json::json!({
        "apiVersion": Catalog::api_version(&()),
        "kind": Catalog::kind(&()),
        "status": status::owned(&new),
    });
    let api: Api<Catalog> = Api::all(ctx.client.clone());
    api.patch_status(
        &name,
        &PatchParams::apply(CATALOG_STATUS_FIELD_MANAGER).force(),
        &Patch::Apply(&body),
    )
    .await
    .map_err(|err| CatalogError::Status {
        name: name.clone(),
        source: Box::new(err),
    })?;
    publish_transition(ctx, catalog, &old, &new).await;
    Ok(())
}

async fn publish_transition(
    ctx: &Context,
    catalog: &Catalog,
    old: &CatalogStatus,
    new: &CatalogStatus,
) {
    let Some(now) = status::serving(new) else {
        return;
    };
    let before = status::serving(old);
    let flipped = before.is_none_or(|c| c.status != now.status);
    let new_content = now.status == "True" && old.resolved_source != new.resolved_source;
    if !flipped && !new_content {
        return;
    }
    let serving = now.status == "True";
    info!(catalog = %catalog.name_any(), serving, reason = %now.reason, message = %now.message, "catalog serving changed");
    let event = Event {
        type_: if serving {
            EventType::Normal
        } else {
            EventType::Warning
        },
        reason: now.reason.clone(),
        note: Some(truncate(&now.message, 1000)),
        action: "Unpack".to_owned(),
        secondary: None,
    };
    if let Err(err) = ctx.events.publish(&event, &catalog.object_ref(&())).await {
        warn!(catalog = %catalog.name_any(), error = %err, "publishing an event");
    }
}

/// Events notes are limited to 1 kB.
fn truncate(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    let mut end = max.saturating_sub(3);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &text[..end])
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        assert!(backoff_delay(1) <= Duration::from_secs(2));
        assert!(backoff_delay(4) >= Duration::from_secs(8));
        assert!(backoff_delay(100) <= Duration::from_secs(600));
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate("short", 10), "short");
        let long = "é".repeat(10);
        let cut = truncate(&long, 8);
        assert!(cut.len() <= 8 && cut.ends_with("..."), "{cut}");
    }
}
