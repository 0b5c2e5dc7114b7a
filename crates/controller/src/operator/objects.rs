//! Applying, comparing and pruning the objects of an installed bundle.
//!
//! Every object POM applies carries labels naming the owning PlatformOperator, the package and
//! the bundle. An object is applied (server-side apply, one forced field manager) only when the
//! live object differs from what the bundle wants: that is drift repair, and it keeps a steady
//! state free of writes. Pruning deletes the PO's objects that carry an older bundle's label,
//! never CustomResourceDefinitions (custom resources must survive).

use std::collections::HashMap;
use std::sync::Mutex;

use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, Preconditions};
use kube::core::GroupVersionKind;
use kube::discovery::{ApiCapabilities, ApiResource, Scope};
use serde_json::Value;

use crate::context::BUNDLE_FIELD_MANAGER;
use crate::error::Error;
use crate::fail_point::{self, FailPoint};
use pom_api::labels;
use pom_api::platform_operator::InventoryObject;

/// Kinds the owner-label sweep covers (cleanup, and prune of a PO installed before the
/// inventory): what registry+v1 and plain+v0 bundles commonly ship. Secrets are left out on
/// purpose: listing them would need `list` on every Secret of the cluster, and the inventory
/// already names every Secret POM applied, which it deletes by name.
pub const PRUNABLE_KINDS: &[(&str, &str, &str)] = &[
    // Webhooks first: nothing may call a webhook whose Deployment is gone.
    (
        "admissionregistration.k8s.io",
        "v1",
        "ValidatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "MutatingWebhookConfiguration",
    ),
    ("apps", "v1", "Deployment"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Service"),
    ("", "v1", "ConfigMap"),
    ("rbac.authorization.k8s.io", "v1", "Role"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("operators.coreos.com", "v2", "OperatorCondition"),
];

/// The resourceVersion of each bundle Secret as this manager's last apply of it returned it.
/// Secrets are applied without being read (issue 22 item 3), so every reconcile sends their
/// apply; one that returns the version already seen changed nothing on the server (a
/// server-side apply with nothing new keeps the version) and is not counted as a write, so a
/// steady state stays write-free for the reconciler's quiet checks. In memory: after a
/// restart, the first apply of each Secret counts once.
#[derive(Default)]
pub struct AppliedSecrets {
    versions: Mutex<HashMap<(String, String), String>>,
}

impl AppliedSecrets {
    /// Records what the apply of Secret `namespace/name` returned; whether it changed it.
    pub fn changed(&self, namespace: &str, name: &str, version: Option<&str>) -> bool {
        let Some(version) = version else {
            return true;
        };
        let Ok(mut versions) = self.versions.lock() else {
            return true;
        };
        versions.insert((namespace.to_owned(), name.to_owned()), version.to_owned())
            != Some(version.to_owned())
    }
}

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
#[derive(Clone)]
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

/// The CRD to apply while its new conversion webhook is not served yet (issue 34 item 9):
/// `desired` with the live CRD's webhook conversion, when the live CRD converts through a
/// webhook and `desired` changes it; `None` otherwise. A conversion webhook is switched like a
/// webhook configuration, once the new pods serve (see `pom_policy::webhook_serving`):
/// switched with the CRD's apply, the new path would be called before any pod serves it.
/// Only a live *webhook* converter is kept: a live `None` strategy (what the API server
/// defaults a CRD without conversion to) is never kept beside the new versions, since objects
/// read at a new version would then be relabelled, not converted, and written back with
/// their fields lost (review H2); the CRD is applied whole and conversions fail loudly until
/// the new pods serve.
#[must_use]
pub fn conversion_held_back(desired: &Value, live: &Value) -> Option<Value> {
    let wanted = desired.pointer("/spec/conversion")?;
    let running = live.pointer("/spec/conversion")?;
    let live_webhook = running.get("strategy").and_then(Value::as_str) == Some("Webhook");
    if !live_webhook || is_subset(wanted, running) {
        return None;
    }
    let mut held = desired.clone();
    held.get_mut("spec")?["conversion"] = running.clone();
    Some(held)
}

/// What trusts POM's webhook CA in a namespace: the Services its serving certificates are for,
/// and the bundle (PEM) their webhooks are to trust now.
pub struct Trust<'a> {
    pub services: &'a [pom_render::WebhookService],
    pub ca_bundle: &'a str,
}

/// A webhook configuration or CRD held back from the apply (`held`: as it runs, the CRD's
/// held-back form), trusting now what its new form trusts: POM's caBundle on each webhook
/// calling one of POM's Services. A CA renewal rolls pods that serve a certificate of the new
/// CA, so the configurations must trust it before any new pod serves, not once the
/// `WebhookServed` wait lets the new configuration in (the bundle keeps the previous CA, so
/// pods still serving its certificate stay trusted). `None` when it already trusts that.
#[must_use]
pub fn trusting_now(desired: &Value, held: &Value, trust: &Trust<'_>) -> Option<Value> {
    let kind = desired
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let mut now = if kind == "CustomResourceDefinition" {
        held.clone()
    } else {
        let mut metadata = serde_json::Map::new();
        for key in ["name", "labels", "annotations"] {
            if let Some(value) = desired.pointer(&format!("/metadata/{key}")) {
                metadata.insert(key.to_owned(), value.clone());
            }
        }
        serde_json::json!({
            "apiVersion": desired.get("apiVersion").cloned().unwrap_or(Value::Null),
            "kind": kind,
            "metadata": metadata,
            "webhooks": held.get("webhooks").cloned().unwrap_or_else(|| Value::Array(Vec::new())),
        })
    };
    pom_render::webhooks::inject_ca_bundle(
        std::slice::from_mut(&mut now),
        trust.services,
        trust.ca_bundle,
    );
    (!is_subset(&now, held)).then_some(now)
}

/// The webhook configurations whose trust widens in this apply ([`trusting_now`]: a CA
/// renewal's new CA joins their caBundle), by index in `desired`, each with what to write.
/// The apply writes these first, before any Secret or Deployment: the Secret then holds the
/// new CA's serving certificate and the Deployment rolls onto it, and a failure between must
/// not leave pods serving a certificate the registered configurations do not trust (review
/// of session 22, M1). A CRD's conversion trusts it at once too, and CRDs come first by rank.
/// `running`: the live object, per desired one (read only for webhook configurations).
#[must_use]
pub fn widen_first(
    desired: &[(ObjectId, Value)],
    running: &[Option<Value>],
    trust: &Trust<'_>,
) -> Vec<(usize, Value)> {
    desired
        .iter()
        .zip(running)
        .enumerate()
        .filter(|(_, ((id, _), _))| {
            pom_policy::inventory::is_webhook_configuration(&id.to_inventory())
        })
        .filter_map(|(index, ((_, object), running))| {
            Some((index, trusting_now(object, running.as_ref()?, trust)?))
        })
        .collect()
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

/// Applies `object` unless the live object already matches. Returns the object as the server
/// answered the apply (`None` when it matched and nothing was written): what the waits after
/// the apply read, instead of reading it again.
pub async fn apply_if_changed(
    api: &Api<DynamicObject>,
    name: &str,
    object: &Value,
    live: Option<&DynamicObject>,
) -> Result<Option<DynamicObject>, Error> {
    if let Some(live) = live {
        let live_value = serde_json::to_value(live).unwrap_or(Value::Null);
        if is_subset(object, &live_value) {
            return Ok(None);
        }
    }
    let applied = api
        .patch(
            name,
            &PatchParams::apply(BUNDLE_FIELD_MANAGER).force(),
            &Patch::Apply(object),
        )
        .await
        .map_err(Error::kube(format!("applying {name}")))?;
    Ok(Some(applied))
}

/// Reads an object, `None` when absent.
pub async fn get_opt(api: &Api<DynamicObject>, name: &str) -> Result<Option<DynamicObject>, Error> {
    api.get_opt(name)
        .await
        .map_err(Error::kube(format!("reading {name}")))
}

impl ObjectId {
    /// The object as the inventory records it.
    #[must_use]
    pub fn to_inventory(&self) -> InventoryObject {
        InventoryObject {
            api_version: self.gvk.api_version(),
            kind: self.gvk.kind.clone(),
            namespace: self.namespace.clone(),
            name: self.name.clone(),
        }
    }
}

/// The kind of a recorded object.
fn gvk_of(object: &InventoryObject) -> GroupVersionKind {
    let (group, version) = object
        .api_version
        .rsplit_once('/')
        .unwrap_or(("", object.api_version.as_str()));
    GroupVersionKind::gvk(group, version, &object.kind)
}

/// The `Api` of a recorded object; `None` when its kind is no longer served (then no such
/// object can exist).
pub(super) async fn api_of(
    kinds: &KindCache,
    client: &Client,
    object: &InventoryObject,
) -> Result<Option<Api<DynamicObject>>, Error> {
    let gvk = gvk_of(object);
    match kinds.api(client, &gvk, object.namespace.as_deref()).await {
        Ok((api, _)) => Ok(Some(api)),
        Err(Error::Kube { source, .. }) if is_not_served(&source) => {
            kinds.forget(&gvk);
            Ok(None)
        }
        Err(err) => Err(err),
    }
}

/// Discovery's answer for a kind the server does not serve.
pub(crate) fn is_not_served(err: &kube::Error) -> bool {
    match err {
        kube::Error::Api(status) => status.code == 404,
        kube::Error::Discovery(_) => true,
        _ => false,
    }
}

/// What is known of a recorded object before deleting it.
enum Recorded {
    /// Read, and carrying the owner's label: deleted on the condition of its uid.
    Owned { uid: Option<String> },
    /// A Secret in a namespace the PO owns, not read.
    UnreadSecret,
    /// Gone, or not the owner's.
    Skip,
}

/// The recorded object as it is now, when it is PO `po`'s (issue 22 item 5): it carries the
/// PO's owner label. An inventory is status, which whoever can write a PO's status can edit;
/// an object it names that carries another owner's label, or none, is not this PO's to delete,
/// and is left as it is (and not waited for). A Secret, which the manager may not read (issue 22
/// item 3), is judged by its namespace instead: the live Namespace must carry `po`'s owner
/// label (no other PO installs there; the recorded install namespace is status too, so it is
/// not trusted for this).
async fn recorded_state(
    client: &Client,
    api: &Api<DynamicObject>,
    object: &InventoryObject,
    po: &str,
) -> Result<Recorded, Error> {
    if object.api_version == "v1" && object.kind == "Secret" {
        let owned = match object.namespace.as_deref() {
            Some(namespace) => Api::<Namespace>::all(client.clone())
                .get_opt(namespace)
                .await
                .map_err(Error::kube(format!("reading namespace {namespace}")))?
                .is_some_and(|ns| {
                    ns.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(labels::OWNER_PO))
                        == Some(&labels::label_value(po))
                }),
            None => false,
        };
        if owned {
            return Ok(Recorded::UnreadSecret);
        }
        tracing::warn!(
            po,
            object = %object.describe(),
            "the inventory names a Secret outside a namespace this PlatformOperator owns; left in place"
        );
        return Ok(Recorded::Skip);
    }
    Ok(live_if_owned(api, object, po)
        .await?
        .map_or(Recorded::Skip, |live| Recorded::Owned {
            uid: live.metadata.uid,
        }))
}

async fn live_if_owned(
    api: &Api<DynamicObject>,
    object: &InventoryObject,
    po: &str,
) -> Result<Option<DynamicObject>, Error> {
    let live = get_opt(api, &object.name).await?;
    let ours = labels::label_value(po);
    Ok(live.filter(|live| {
        let owned = live
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(labels::OWNER_PO))
            == Some(&ours);
        if !owned {
            tracing::warn!(
                po,
                object = %object.describe(),
                "the inventory names an object this PlatformOperator does not own; left in place"
            );
        }
        owned
    }))
}

/// Deletes each recorded object that is still PO `po`'s (already gone counts as deleted; the
/// deletion is conditional on the uid read, so an object replaced meanwhile is not deleted);
/// any other error fails, so a prune or cleanup is never reported done with objects left
/// behind. Returns how many deletions the server accepted.
pub async fn delete_recorded(
    kinds: &KindCache,
    client: &Client,
    po: &str,
    recorded: &[InventoryObject],
    after_first: FailPoint,
) -> Result<usize, Error> {
    let mut deleted = 0;
    for object in recorded {
        let Some(api) = api_of(kinds, client, object).await? else {
            continue;
        };
        let uid = match recorded_state(client, &api, object, po).await? {
            Recorded::Owned { uid } => uid,
            Recorded::UnreadSecret => None,
            Recorded::Skip => continue,
        };
        let params = DeleteParams {
            preconditions: uid.map(|uid| Preconditions {
                uid: Some(uid),
                resource_version: None,
            }),
            ..DeleteParams::background()
        };
        match api.delete(&object.name, &params).await {
            Ok(_) => {
                deleted += 1;
                if deleted == 1 {
                    fail_point::hit(after_first);
                }
            }
            // Gone, or replaced by another object since it was read (uid precondition).
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(err) => return Err(Error::kube(format!("deleting {}", object.describe()))(err)),
        }
    }
    Ok(deleted)
}

/// The recorded objects of PO `po` that still exist (deleting or not). Secrets are not read:
/// one whose deletion was accepted counts as gone.
pub async fn still_present(
    kinds: &KindCache,
    client: &Client,
    po: &str,
    recorded: &[InventoryObject],
) -> Result<Vec<InventoryObject>, Error> {
    let mut present = Vec::new();
    for object in recorded {
        let Some(api) = api_of(kinds, client, object).await? else {
            continue;
        };
        if matches!(
            recorded_state(client, &api, object, po).await?,
            Recorded::Owned { .. }
        ) {
            present.push(object.clone());
        }
    }
    Ok(present)
}

/// Whether one of POM's own field managers wrote `meta` (its managedFields name
/// [`BUNDLE_FIELD_MANAGER`] or one of its `platform-operators-manager/...` write sites): the
/// second marker the owner-label sweep requires. The owner label alone does not say POM made
/// an object: an operator POM installed may copy it from the objects POM applied for it onto
/// what it creates in its namespace (the owner-label guard admits that), and the sweep must
/// never delete what an operator made (a ServiceMonitor, a child ConfigMap holding state).
/// Every object POM applies is server-side applied by one of these managers, and always was.
#[must_use]
pub fn written_by_pom(meta: &kube::api::ObjectMeta) -> bool {
    meta.managed_fields.iter().flatten().any(|entry| {
        entry.manager.as_deref().is_some_and(|manager| {
            manager == BUNDLE_FIELD_MANAGER
                || manager
                    .strip_prefix(BUNDLE_FIELD_MANAGER)
                    .is_some_and(|rest| rest.starts_with('/'))
        })
    })
}

/// Deletes the PO's objects of the prunable kinds whose bundle label is not `keep_bundle`
/// (all of them when `keep_bundle` is `None`) and that POM wrote ([`written_by_pom`]); CRDs
/// are never touched. Returns how many.
///
/// The label query that predates the inventory: used once for a PO installed by a manager
/// that kept no inventory, and by cleanup as a second sweep. A list error fails the call.
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
        let api = match kinds.api(client, &gvk, None).await {
            Ok((api, _)) => api,
            // A kind the server does not serve has no objects to delete.
            Err(Error::Kube { source, .. }) if is_not_served(&source) => continue,
            Err(err) => return Err(err),
        };
        let list = api
            .list(&ListParams::default().labels(&selector))
            .await
            .map_err(Error::kube(format!("listing {kind} objects of {po}")))?;
        for object in list.items {
            if !written_by_pom(&object.metadata) {
                // Labelled by an operator copying labels, not applied by POM: not POM's to delete.
                continue;
            }
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
    #[test]
    fn a_crd_keeps_its_live_conversion_until_the_new_one_is_served() {
        use serde_json::json;
        let hook = |path: &str| json!({"strategy": "Webhook", "webhook": {"clientConfig": {"service": {"name": "op-service", "path": path}}}});
        let crd = |conversion: Option<Value>| {
            let mut crd = json!({"kind": "CustomResourceDefinition", "spec": {"group": "g", "versions": [{"name": "v2"}]}});
            if let Some(conversion) = conversion {
                crd["spec"]["conversion"] = conversion;
            }
            crd
        };
        let mut live_v1 = crd(Some(hook("/v1/convert")));
        // Server defaults the desired object does not set do not make a difference.
        live_v1["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["port"] = json!(443);
        // (what, desired, live, the conversion applied meanwhile: None = desired as it is)
        let cases = [
            (
                "same path",
                crd(Some(hook("/v1/convert"))),
                live_v1.clone(),
                None,
            ),
            (
                "a new path: the live one is kept",
                crd(Some(hook("/v2/convert"))),
                live_v1.clone(),
                Some(Some(live_v1["spec"]["conversion"].clone())),
            ),
            (
                "a conversion added to a CRD without one: applied whole (review H2)",
                crd(Some(hook("/v2/convert"))),
                crd(None),
                None,
            ),
            (
                "a conversion added where the API server says None: applied whole (review H2)",
                crd(Some(hook("/v2/convert"))),
                crd(Some(json!({"strategy": "None"}))),
                None,
            ),
            ("a conversion dropped", crd(None), live_v1.clone(), None),
        ];
        for (what, desired, live, kept) in cases {
            let held = conversion_held_back(&desired, &live);
            match kept {
                None => assert_eq!(held, None, "{what}"),
                Some(conversion) => {
                    let held = held.unwrap_or_else(|| panic!("{what}: not held back"));
                    assert_eq!(
                        held.pointer("/spec/conversion").cloned(),
                        conversion,
                        "{what}"
                    );
                    assert_eq!(
                        held["spec"]["versions"], desired["spec"]["versions"],
                        "{what}"
                    );
                }
            }
        }
    }

    use super::*;
    use serde_json::json;

    #[test]
    fn the_sweep_deletes_only_what_a_pom_field_manager_wrote() {
        let meta = |managers: &[&str]| -> kube::api::ObjectMeta {
            serde_json::from_value(json!({
                "name": "x",
                "labels": {"platform.openshift.io/owner": "op"},
                "managedFields": managers.iter().map(|m| json!({"manager": m, "operation": "Apply"})).collect::<Vec<_>>(),
            }))
            .unwrap()
        };
        assert!(written_by_pom(&meta(&["platform-operators-manager"])));
        assert!(written_by_pom(&meta(&[
            "kube-controller-manager",
            "platform-operators-manager/operatorcondition"
        ])));
        // An operator's copy of the label: created by its own manager.
        assert!(!written_by_pom(&meta(&[
            "operator-lib",
            "kubectl-client-side-apply"
        ])));
        assert!(!written_by_pom(&meta(&[
            "platform-operators-manager-lookalike"
        ])));
        assert!(!written_by_pom(&meta(&[])));
    }

    #[test]
    fn subset_ignores_server_defaults_but_sees_changes() {
        let desired = json!({"spec": {"replicas": 1, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        let live = json!({"metadata": {"uid": "u"}, "spec": {"replicas": 1, "strategy": {}, "template": {"spec": {"containers": [{"name": "a", "image": "x", "imagePullPolicy": "Always"}]}}}});
        assert!(is_subset(&desired, &live));
        let drifted = json!({"spec": {"replicas": 3, "template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}});
        assert!(!is_subset(&desired, &drifted));
    }

    /// A CA renewal: the held-back webhook configuration and CRD conversion (their paths
    /// changed, so they wait for the new pods) trust the new CA bundle at once, as they run
    /// otherwise; one already trusting it writes nothing; another Service's webhook is left
    /// as it is. Before this, the caBundle waited with the rest for a new pod to be a ready
    /// endpoint, so the new pods served a certificate nothing trusted yet.
    #[test]
    fn a_held_configuration_trusts_the_new_ca_at_once() {
        use base64::Engine as _;
        let services = [pom_render::WebhookService {
            namespace: "ns".into(),
            name: "op-service".into(),
            secret: "op-service-cert".into(),
            deployment: "op".into(),
        }];
        let b64 = |pem: &str| base64::engine::general_purpose::STANDARD.encode(pem);
        let trust = Trust {
            services: &services,
            ca_bundle: "NEW+OLD",
        };
        let hook = |name: &str, service: &str, path: &str, ca: &str| {
            json!({"name": name, "clientConfig": {"caBundle": b64(ca),
                "service": {"namespace": "ns", "name": service, "path": path, "port": 443}},
                "sideEffects": "None", "timeoutSeconds": 10})
        };
        let desired = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "vop", "labels": {"platform.openshift.io/owner": "op"}},
            "webhooks": [hook("w.op", "op-service", "/v2", "NEW+OLD")]});
        let live = json!({"apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": {"name": "vop", "resourceVersion": "7", "labels": {"platform.openshift.io/owner": "op"}},
            "webhooks": [hook("w.op", "op-service", "/v1", "OLD"), hook("other", "elsewhere", "/x", "THEIRS")]});
        let now = trusting_now(&desired, &live, &trust).unwrap();
        assert_eq!(
            now["webhooks"],
            json!([
                hook("w.op", "op-service", "/v1", "NEW+OLD"),
                hook("other", "elsewhere", "/x", "THEIRS")
            ]),
            "the running paths, the new trust"
        );
        assert_eq!(
            now["metadata"],
            json!({"name": "vop", "labels": {"platform.openshift.io/owner": "op"}})
        );
        let mut trusting = live.clone();
        trusting["webhooks"][0]["clientConfig"]["caBundle"] = json!(b64("NEW+OLD"));
        assert_eq!(
            trusting_now(&desired, &trusting, &trust),
            None,
            "nothing to write"
        );
        // The CRD's held-back conversion (the running path) trusts the new bundle too.
        let crd = |path: &str, ca: &str| {
            json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "w.g"}, "spec": {"conversion": {"strategy": "Webhook",
                "webhook": {"clientConfig": {"caBundle": b64(ca),
                "service": {"namespace": "ns", "name": "op-service", "path": path}}}}}})
        };
        let held = conversion_held_back(&crd("/v2", "NEW+OLD"), &crd("/v1", "OLD")).unwrap();
        assert_eq!(
            trusting_now(&crd("/v2", "NEW+OLD"), &held, &trust),
            Some(crd("/v1", "NEW+OLD"))
        );
        // The apply's first pass (review M1): the configuration's widened trust, before the
        // Secret of the new CA's certificate and the Deployment (earlier in rank order).
        let id = |group: &str, version: &str, kind: &str, name: &str| ObjectId {
            gvk: kube::api::GroupVersionKind::gvk(group, version, kind),
            name: name.into(),
            namespace: None,
        };
        let apply = [
            (
                id("", "v1", "Secret", "op-service-cert"),
                json!({"kind": "Secret"}),
            ),
            (
                id("apps", "v1", "Deployment", "op"),
                json!({"kind": "Deployment"}),
            ),
            (
                id(
                    "admissionregistration.k8s.io",
                    "v1",
                    "ValidatingWebhookConfiguration",
                    "vop",
                ),
                desired,
            ),
        ];
        let running = [
            Some(json!({"kind": "Secret"})),
            Some(json!({"kind": "Deployment"})),
            Some(live),
        ];
        assert_eq!(widen_first(&apply, &running, &trust), vec![(2, now)]);
        let running = [None, None, Some(trusting)];
        assert_eq!(
            widen_first(&apply, &running, &trust),
            vec![],
            "nothing to widen"
        );
    }
}
