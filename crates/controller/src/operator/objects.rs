//! Applying, comparing and pruning the objects of an installed bundle.
//!
//! Every object POM applies carries labels naming the owning PlatformOperator, the package and
//! the bundle. An object is applied (server-side apply, one forced field manager) only when the
//! live object differs from what the bundle wants: that is drift repair, and it keeps a steady
//! state free of writes. Pruning deletes the PO's objects that carry an older bundle's label,
//! never CustomResourceDefinitions (custom resources must survive).

use std::collections::HashMap;
use std::sync::Mutex;

use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use crate::context::BUNDLE_FIELD_MANAGER;
use crate::error::Error;
use pom_api::labels;

/// Kinds pruned and cleaned up besides those in the current bundle: what registry+v1 and
/// plain+v0 bundles commonly ship.
pub const PRUNABLE_KINDS: &[(&str, &str, &str)] = &[
    ("apps", "v1", "Deployment"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Service"),
    ("", "v1", "ConfigMap"),
    ("", "v1", "Secret"),
    ("rbac.authorization.k8s.io", "v1", "Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("operators.coreos.com", "v2", "OperatorCondition"),
];

/// Caches API discovery per kind (resource name and scope never change while we run).
#[derive(Default)]
pub struct KindCache {
    kinds: Mutex<HashMap<GroupVersionKind, (ApiResource, ApiCapabilities)>>,
}

impl KindCache {
    /// The `Api` for an object of `gvk` in `namespace` (ignored for cluster-scoped kinds).
    pub async fn api(
        &self,
        client: &Client,
        gvk: &GroupVersionKind,
        namespace: Option<&str>,
    ) -> Result<(Api<DynamicObject>, bool), Error> {
        let cached = self
            .kinds
            .lock()
            .map(|k| k.get(gvk).cloned())
            .ok()
            .flatten();
        let (resource, caps) = match cached {
            Some(found) => found,
            None => {
                let found =
                    kube::discovery::pinned_kind(client, gvk)
                        .await
                        .map_err(Error::kube(format!(
                            "discovering {}/{} {}",
                            gvk.group, gvk.version, gvk.kind
                        )))?;
                if let Ok(mut kinds) = self.kinds.lock() {
                    kinds.insert(gvk.clone(), found.clone());
                }
                found
            }
        };
        let namespaced = caps.scope == Scope::Namespaced;
        let api = match (namespaced, namespace) {
            (true, Some(ns)) => Api::namespaced_with(client.clone(), ns, &resource),
            (true, None) => Api::all_with(client.clone(), &resource),
            (false, _) => Api::all_with(client.clone(), &resource),
        };
        Ok((api, namespaced))
    }

    /// Forgets a kind (after a 404 from discovery, e.g. a CRD not yet served).
    pub fn forget(&self, gvk: &GroupVersionKind) {
        if let Ok(mut kinds) = self.kinds.lock() {
            kinds.remove(gvk);
        }
    }
}

/// Identity of a rendered object.
pub struct ObjectId {
    pub gvk: GroupVersionKind,
    pub name: String,
    pub namespace: Option<String>,
}

/// Reads apiVersion/kind/name/namespace of a rendered object.
pub fn object_id(object: &Value, bundle: &str) -> Result<ObjectId, Error> {
    let api_version = object["apiVersion"].as_str().ok_or(Error::InvalidObject {
        bundle: bundle.to_owned(),
        field: "apiVersion",
    })?;
    let kind = object["kind"].as_str().ok_or(Error::InvalidObject {
        bundle: bundle.to_owned(),
        field: "kind",
    })?;
    let name = object["metadata"]["name"]
        .as_str()
        .ok_or(Error::InvalidObject {
            bundle: bundle.to_owned(),
            field: "metadata.name",
        })?;
    let (group, version) = api_version.rsplit_once('/').unwrap_or(("", api_version));
    Ok(ObjectId {
        gvk: GroupVersionKind::gvk(group, version, kind),
        name: name.to_owned(),
        namespace: object["metadata"]["namespace"].as_str().map(str::to_owned),
    })
}

/// Adds POM's ownership labels to a rendered object.
pub fn label(object: &mut Value, po: &str, package: &str, bundle: &str) {
    if !object["metadata"].is_object() {
        object["metadata"] = Value::Object(serde_json::Map::new());
    }
    let metadata = &mut object["metadata"];
    if !metadata["labels"].is_object() {
        metadata["labels"] = Value::Object(serde_json::Map::new());
    }
    let labels_map = &mut metadata["labels"];
    for (key, value) in labels::owner_labels(po, package, Some(bundle)) {
        labels_map[key] = Value::String(value);
    }
}

/// Whether every field `desired` sets has the same value in `live` (lists compared whole).
#[must_use]
pub fn is_subset(desired: &Value, live: &Value) -> bool {
    match (desired, live) {
        (Value::Object(want), Value::Object(have)) => want
            .iter()
            .all(|(k, v)| have.get(k).is_some_and(|h| is_subset(v, h))),
        (Value::Array(want), Value::Array(have)) => {
            want.len() == have.len() && want.iter().zip(have).all(|(w, h)| is_subset(w, h))
        }
        (Value::Number(a), Value::Number(b)) => a.as_f64() == b.as_f64(),
        _ => desired == live,
    }
}

/// Applies `object` unless the live object already matches; returns whether it wrote.
pub async fn apply_if_changed(
    api: &Api<DynamicObject>,
    name: &str,
    object: &Value,
    live: Option<&DynamicObject>,
) -> Result<bool, Error> {
    if let Some(live) = live {
        let live_value = serde_json::to_value(live).unwrap_or(Value::Null);
        if is_subset(object, &live_value) {
            return Ok(false);
        }
    }
    api.patch(
        name,
        &PatchParams::apply(BUNDLE_FIELD_MANAGER).force(),
        &Patch::Apply(object),
    )
    .await
    .map_err(Error::kube(format!("applying {name}")))?;
    Ok(true)
}

/// Reads an object, `None` when absent.
pub async fn get_opt(api: &Api<DynamicObject>, name: &str) -> Result<Option<DynamicObject>, Error> {
    api.get_opt(name)
        .await
        .map_err(Error::kube(format!("reading {name}")))
}

/// Deletes the PO's objects of the prunable kinds whose bundle label is not `keep_bundle`
/// (all of them when `keep_bundle` is `None`); CRDs are never touched. Returns how many.
pub async fn prune(
    kinds: &KindCache,
    client: &Client,
    po: &str,
    keep_bundle: Option<&str>,
) -> Result<usize, Error> {
    let mut selector = labels::owned_by(po);
    if let Some(bundle) = keep_bundle {
        selector.push_str(&format!(
            ",{}!={}",
            labels::BUNDLE,
            labels::label_value(bundle)
        ));
    }
    let mut deleted = 0;
    for (group, version, kind) in PRUNABLE_KINDS {
        let gvk = GroupVersionKind::gvk(group, version, kind);
        let Ok((api, _)) = kinds.api(client, &gvk, None).await else {
            continue;
        };
        let list = api.list(&ListParams::default().labels(&selector)).await;
        let Ok(list) = list else { continue };
        for object in list.items {
            let name = object.metadata.name.clone().unwrap_or_default();
            let api = match object.metadata.namespace.as_deref() {
                Some(ns) => kinds.api(client, &gvk, Some(ns)).await?.0,
                None => api.clone(),
            };
            match api.delete(&name, &DeleteParams::background()).await {
                Ok(_) => deleted += 1,
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => return Err(Error::kube(format!("deleting {kind} {name}"))(err)),
            }
        }
    }
    Ok(deleted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_ignores_server_defaults_but_sees_changes() {
        let desired = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let live = json!({"metadata": {"uid": "u"}, "spec": {"replicas": 1, "strategy": {}, "template": {"spec": {"containers": [{"name": "a", "image": "x", "imagePullPolicy": "Always"}]}}}});
        assert!(is_subset(&desired, &live));
        let drifted = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        assert!(!is_subset(&desired, &drifted));
    }
}
