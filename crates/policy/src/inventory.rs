//! The inventory: which objects each bundle POM applied owns (`status.inventory`), and what
//! prune and cleanup therefore delete.
//!
//! Why an inventory and not a label query: a label query can only cover a fixed list of kinds
//! (a bundle may ship any allowed kind), costs a cluster-wide list per kind on every prune, and
//! reads every Secret in the cluster to find POM's own. The inventory is recorded in the same
//! status write as the intent of a move, before the move's first object is written, so nothing
//! POM creates is ever missing from it, and a crash anywhere leaves a record that covers what
//! was applied. Like kapp's and Helm's records it lives next to what it describes; unlike
//! them it is in the PlatformOperator's status, where `kubectl get -o yaml` shows it, and the
//! only writer is the manager (status subresource).

use std::collections::BTreeSet;

use pom_api::platform_operator::{BundleInventory, InventoryObject};

/// Kinds that are recorded but never deleted (§6: custom resources must survive their
/// operator, and a CRD's deletion deletes them all).
const NEVER_DELETED: &[(&str, &str)] = &[("apiextensions.k8s.io", "CustomResourceDefinition")];

/// Whether prune and cleanup leave `object` alone.
#[must_use]
pub fn never_deleted(object: &InventoryObject) -> bool {
    NEVER_DELETED
        .iter()
        .any(|(group, kind)| object.group() == *group && object.kind == *kind)
}

/// `inventory` with `bundle`'s entry set to `objects` (added after the others, or replaced in
/// place), sorted and without duplicates.
#[must_use]
pub fn with_bundle(
    inventory: &[BundleInventory],
    bundle: &str,
    objects: &[InventoryObject],
) -> Vec<BundleInventory> {
    let sorted: Vec<InventoryObject> = objects
        .iter()
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let entry = BundleInventory {
        bundle: bundle.to_owned(),
        objects: sorted,
    };
    let mut out: Vec<BundleInventory> = inventory.to_vec();
    match out.iter_mut().find(|e| e.bundle == bundle) {
        Some(existing) => *existing = entry,
        None => out.push(entry),
    }
    out
}

/// An object's identity on the cluster: group, kind, namespace and name. The API version is
/// not part of it: `autoscaling.k8s.io/v1beta2` and `/v1` name the same VerticalPodAutoscaler.
fn identity(object: &InventoryObject) -> (&str, &str, Option<&str>, &str) {
    (
        object.group(),
        object.kind.as_str(),
        object.namespace.as_deref(),
        object.name.as_str(),
    )
}

/// What prune deletes once the move to `keep` settled: the objects of every other bundle that
/// `keep` does not also own (by identity, whatever API version each bundle named it by), CRDs
/// excepted.
#[must_use]
pub fn to_prune(inventory: &[BundleInventory], keep: &str) -> Vec<InventoryObject> {
    let kept: BTreeSet<_> = inventory
        .iter()
        .filter(|e| e.bundle == keep)
        .flat_map(|e| &e.objects)
        .map(identity)
        .collect();
    inventory
        .iter()
        .filter(|e| e.bundle != keep)
        .flat_map(|e| &e.objects)
        .filter(|o| !kept.contains(&identity(o)) && !never_deleted(o))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// The inventory once prune for `keep` succeeded: `keep`'s entry only.
#[must_use]
pub fn after_prune(inventory: &[BundleInventory], keep: &str) -> Vec<BundleInventory> {
    inventory
        .iter()
        .filter(|e| e.bundle == keep)
        .cloned()
        .collect()
}

/// Whether the inventory holds entries `after_prune(keep)` would drop.
#[must_use]
pub fn has_other_bundles(inventory: &[BundleInventory], keep: &str) -> bool {
    inventory.iter().any(|e| e.bundle != keep)
}

/// What cleanup deletes when the PlatformOperator goes: everything recorded, CRDs excepted;
/// webhook configurations first, so no request reaches a webhook whose Deployment is gone.
#[must_use]
pub fn to_clean_up(inventory: &[BundleInventory]) -> Vec<InventoryObject> {
    let mut objects: Vec<InventoryObject> = inventory
        .iter()
        .flat_map(|e| &e.objects)
        .filter(|o| !never_deleted(o))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    objects.sort_by_key(|o| !is_webhook_configuration(o));
    objects
}

/// What the inventory records in `namespace` (CRDs are cluster-scoped, so never among them):
/// what a PlatformOperator refused to watch another's install namespace withdraws from it.
#[must_use]
pub fn in_namespace(inventory: &[BundleInventory], namespace: &str) -> Vec<InventoryObject> {
    inventory
        .iter()
        .flat_map(|e| &e.objects)
        .filter(|o| o.namespace.as_deref() == Some(namespace))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `inventory` without what it records in `namespace`, once withdrawn from it.
#[must_use]
pub fn without_namespace(inventory: &[BundleInventory], namespace: &str) -> Vec<BundleInventory> {
    retaining(inventory, |o| o.namespace.as_deref() != Some(namespace))
}

/// `inventory` without `gone` (by identity, whatever API version named them): what a
/// give-back handed to OLM v0 is no longer POM's to delete.
#[must_use]
pub fn without_objects(
    inventory: &[BundleInventory],
    gone: &[InventoryObject],
) -> Vec<BundleInventory> {
    let gone: BTreeSet<_> = gone.iter().map(identity).collect();
    retaining(inventory, |o| !gone.contains(&identity(o)))
}

/// `inventory` with only the objects `keep` accepts, every bundle's entry kept.
fn retaining(
    inventory: &[BundleInventory],
    keep: impl Fn(&InventoryObject) -> bool,
) -> Vec<BundleInventory> {
    inventory
        .iter()
        .map(|e| BundleInventory {
            bundle: e.bundle.clone(),
            objects: e.objects.iter().filter(|o| keep(o)).cloned().collect(),
        })
        .collect()
}

/// A Validating- or MutatingWebhookConfiguration.
#[must_use]
pub fn is_webhook_configuration(object: &InventoryObject) -> bool {
    object
        .api_version
        .starts_with("admissionregistration.k8s.io/")
        && matches!(
            object.kind.as_str(),
            "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn obj(api_version: &str, kind: &str, namespace: Option<&str>, name: &str) -> InventoryObject {
        InventoryObject {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
            namespace: namespace.map(str::to_owned),
            name: name.to_owned(),
        }
    }

    fn deployment(name: &str) -> InventoryObject {
        obj("apps/v1", "Deployment", Some("ns"), name)
    }

    fn crd(name: &str) -> InventoryObject {
        obj(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            name,
        )
    }

    fn role(name: &str) -> InventoryObject {
        obj("rbac.authorization.k8s.io/v1", "ClusterRole", None, name)
    }

    #[test]
    fn what_was_given_back_leaves_the_inventory_by_identity() {
        let inventory = with_bundle(&[], "op.v1", &[deployment("a"), role("b"), crd("c")]);
        let gone = [obj("apps/v1beta1", "Deployment", Some("ns"), "a"), crd("c")];
        let after = without_objects(&inventory, &gone);
        assert_eq!(after[0].objects, vec![role("b")]);
        assert_eq!(after[0].bundle, "op.v1");
        assert_eq!(without_objects(&inventory, &[]), inventory);
    }

    #[test]
    fn recording_a_bundle_adds_or_replaces_its_entry_sorted_and_deduplicated() {
        let first = with_bundle(&[], "op.v1", &[role("b"), deployment("a"), role("b")]);
        assert_eq!(first.len(), 1);
        assert_eq!(first[0].objects, vec![deployment("a"), role("b")]);
        let both = with_bundle(&first, "op.v2", &[deployment("a2")]);
        assert_eq!(
            both.iter().map(|e| e.bundle.as_str()).collect::<Vec<_>>(),
            ["op.v1", "op.v2"]
        );
        let replaced = with_bundle(&both, "op.v1", &[deployment("a")]);
        assert_eq!(replaced[0].objects, vec![deployment("a")]);
        assert_eq!(replaced[1], both[1], "the other entry is untouched");
    }

    #[test]
    fn prune_takes_what_only_older_bundles_own_and_never_crds() {
        let inventory = with_bundle(
            &with_bundle(
                &[],
                "op.v1",
                &[
                    deployment("old-name"),
                    deployment("shared"),
                    crd("widgets"),
                    role("r1"),
                ],
            ),
            "op.v2",
            &[deployment("new-name"), deployment("shared"), crd("widgets")],
        );
        assert_eq!(
            to_prune(&inventory, "op.v2"),
            vec![deployment("old-name"), role("r1")]
        );
        // Nothing to prune when the kept bundle is the only one.
        let settled = after_prune(&inventory, "op.v2");
        assert_eq!(settled.len(), 1);
        assert!(to_prune(&settled, "op.v2").is_empty());
        assert!(!has_other_bundles(&settled, "op.v2"));
        assert!(has_other_bundles(&inventory, "op.v2"));
        // A rollback to v1 prunes v2's own objects, not what v1 also has.
        assert_eq!(to_prune(&inventory, "op.v1"), vec![deployment("new-name")]);
    }

    #[test]
    fn cleanup_takes_everything_but_crds_once() {
        let inventory = with_bundle(
            &with_bundle(&[], "op.v1", &[deployment("a"), crd("widgets")]),
            "op.v2",
            &[deployment("a"), role("r")],
        );
        assert_eq!(to_clean_up(&inventory), vec![deployment("a"), role("r")]);
        assert!(to_clean_up(&[]).is_empty());
    }

    #[test]
    fn only_crds_are_never_deleted() {
        assert!(never_deleted(&crd("x")));
        assert!(!never_deleted(&role("x")));
        // A kind named like a CRD in another group is an ordinary object.
        assert!(!never_deleted(&obj(
            "example.com/v1",
            "CustomResourceDefinition",
            None,
            "x"
        )));
    }

    #[test]
    fn cleanup_removes_webhooks_before_the_deployments_that_serve_them() {
        // "apps/v1" sorts before "admissionregistration.k8s.io/v1" in no order POM relies on:
        // a kind that sorts first is put there on purpose.
        let hook = obj(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
            "z-hook",
        );
        let inventory = vec![BundleInventory {
            bundle: "op.v1".into(),
            objects: vec![
                obj("v1", "Service", Some("ns"), "a-service"),
                deployment("a-op"),
                hook.clone(),
                crd("widgets.example.com"),
            ],
        }];
        let order = to_clean_up(&inventory);
        assert_eq!(order.first(), Some(&hook), "{order:?}");
        assert_eq!(order.len(), 3, "CRDs are never deleted: {order:?}");
    }

    /// An object whose API version changed between bundles is the same object: the new
    /// bundle just applied it, prune must not delete it (issue 25 item 6).
    #[test]
    fn prune_compares_identity_not_api_version() {
        let vpa = |version: &str| {
            obj(
                &format!("autoscaling.k8s.io/{version}"),
                "VerticalPodAutoscaler",
                Some("ns"),
                "op",
            )
        };
        let gone = obj("v1", "ConfigMap", Some("ns"), "old-only");
        let inventory = vec![
            BundleInventory {
                bundle: "op.v1".into(),
                objects: vec![vpa("v1beta2"), gone.clone(), deployment("op")],
            },
            BundleInventory {
                bundle: "op.v2".into(),
                objects: vec![vpa("v1"), deployment("op")],
            },
        ];
        assert_eq!(to_prune(&inventory, "op.v2"), vec![gone]);
    }

    #[test]
    fn a_namespace_is_withdrawn_from_every_bundle_and_only_it() {
        let rb = |ns: &str| {
            obj(
                "rbac.authorization.k8s.io/v1",
                "RoleBinding",
                Some(ns),
                "op",
            )
        };
        let inventory = vec![
            BundleInventory {
                bundle: "op.v1".into(),
                objects: vec![rb("team"), deployment("op"), crd("widgets.example.com")],
            },
            BundleInventory {
                bundle: "op.v2".into(),
                objects: vec![rb("team"), rb("ns")],
            },
        ];
        assert_eq!(in_namespace(&inventory, "team"), vec![rb("team")]);
        let after = without_namespace(&inventory, "team");
        assert!(in_namespace(&after, "team").is_empty());
        assert_eq!(
            after[0].objects,
            vec![deployment("op"), crd("widgets.example.com")]
        );
        assert_eq!(after[1].objects, vec![rb("ns")]);
        assert!(in_namespace(&inventory, "nowhere").is_empty());
    }
}
