//! CRD upgrade safety, one table row per rule (safe and unsafe), plus upstream CRDs from
//! ../shared/testdata/crds compared with themselves and with edited copies.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

use pom_render::{CrdViolation, CrdViolationKind as K, check_crd_upgrade};
use serde_json::{Value, json};

/// A namespaced CRD `widgets.example.com` with one served+storage version `v1`.
fn crd(spec_properties: Value) -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "names": {"kind": "Widget", "plural": "widgets"},
            "scope": "Namespaced",
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": spec_properties}},
                }},
            }],
        },
    })
}

fn base() -> Value {
    crd(json!({
        "size": {"type": "integer", "minimum": 1, "maximum": 10, "description": "how big"},
        "mode": {"type": "string", "enum": ["fast", "slow"]},
        "color": {"type": "string"},
        "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 5},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "nested": {"type": "object", "properties": {"deep": {"type": "string"}}},
    }))
}

/// Applies `edit` to the `spec` properties of a copy of the base CRD.
fn edited(edit: impl FnOnce(&mut serde_json::Map<String, Value>)) -> Value {
    let mut new = base();
    let props =
        new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
            .as_object_mut()
            .unwrap();
    edit(props);
    new
}

fn violations(old: &Value, new: &Value) -> Vec<CrdViolation> {
    check_crd_upgrade(old, new).err().unwrap_or_default()
}

/// (version, path, kind) of each violation.
fn summary(old: &Value, new: &Value) -> Vec<(Option<String>, Option<String>, K)> {
    violations(old, new)
        .into_iter()
        .map(|v| (v.version, v.path, v.kind))
        .collect()
}

fn at(path: &str, kind: K) -> (Option<String>, Option<String>, K) {
    (Some("v1".to_owned()), Some(path.to_owned()), kind)
}

#[test]
fn identical_and_additive_changes_are_safe() {
    assert_eq!(check_crd_upgrade(&base(), &base()), Ok(()));
    // A new optional field, a new enum value, a looser bound, a removed enum, a new description.
    let new = edited(|p| {
        p.insert("extra".into(), json!({"type": "string"}));
        p["mode"]["enum"] = json!(["fast", "slow", "medium"]);
        p["size"]["maximum"] = json!(20);
        p["size"]["description"] = json!("how large");
        p["color"] = json!({"type": "string", "description": "any colour"});
        p["tags"].as_object_mut().unwrap().remove("maxItems");
    });
    assert_eq!(check_crd_upgrade(&base(), &new), Ok(()));
    // Lifting an enum restriction entirely is safe too.
    let new = edited(|p| {
        p["mode"].as_object_mut().unwrap().remove("enum");
    });
    assert_eq!(check_crd_upgrade(&base(), &new), Ok(()));
}

#[test]
fn scope_change() {
    let mut new = base();
    new["spec"]["scope"] = json!("Cluster");
    assert_eq!(
        summary(&base(), &new),
        vec![(
            None,
            None,
            K::ScopeChanged {
                from: "Namespaced".into(),
                to: "Cluster".into()
            }
        )]
    );
}

#[test]
fn stored_version_removed_from_status_or_storage_flag() {
    // Old CRD as read from the cluster: v1alpha1 is still in status.storedVersions.
    let mut old = base();
    let v1alpha1 = json!({"name": "v1alpha1", "served": false, "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object"}}});
    old["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(v1alpha1);
    old["status"] = json!({"storedVersions": ["v1alpha1", "v1"]});
    let new = base();
    assert_eq!(
        summary(&old, &new),
        vec![(Some("v1alpha1".into()), None, K::StoredVersionRemoved)]
    );

    // Old CRD from a bundle (no status): the storage version counts as stored.
    let mut new = base();
    new["spec"]["versions"][0]["name"] = json!("v2");
    let found = summary(&base(), &new);
    assert_eq!(
        found,
        vec![(Some("v1".into()), None, K::StoredVersionRemoved)]
    );
}

#[test]
fn served_version_removed() {
    let mut old = base();
    let v1beta1 = json!({"name": "v1beta1", "served": true, "storage": false,
        "schema": {"openAPIV3Schema": {"type": "object"}}});
    old["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(v1beta1);
    assert_eq!(
        summary(&old, &base()),
        vec![(Some("v1beta1".into()), None, K::ServedVersionRemoved)]
    );
    // Keeping it, unserved, is the safe path.
    let mut new = old.clone();
    new["spec"]["versions"][1]["served"] = json!(false);
    assert_eq!(check_crd_upgrade(&old, &new), Ok(()));
}

#[test]
fn new_required_field() {
    let mut new = base();
    new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
        json!(["color", "size"]);
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec",
            K::RequiredFieldsAdded {
                fields: vec!["color".into(), "size".into()]
            }
        )]
    );
}

#[test]
fn field_removed_reports_the_topmost_field_only() {
    let new = edited(|p| {
        p.remove("nested");
        p.remove("color");
    });
    assert_eq!(
        summary(&base(), &new),
        vec![
            at("^.spec.color", K::FieldRemoved),
            at("^.spec.nested", K::FieldRemoved)
        ]
    );
    // Map values and array items are fields too.
    let new = edited(|p| {
        p["labels"] = json!({"type": "object"});
    });
    assert_eq!(
        summary(&base(), &new),
        vec![at("^.spec.labels.*", K::FieldRemoved)]
    );
}

#[test]
fn type_change() {
    let new = edited(|p| p["color"]["type"] = json!("integer"));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.color",
            K::TypeChanged {
                from: "string".into(),
                to: "integer".into()
            }
        )]
    );
    let new = edited(|p| p["tags"]["items"]["type"] = json!("integer"));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.tags[*]",
            K::TypeChanged {
                from: "string".into(),
                to: "integer".into()
            }
        )]
    );
}

#[test]
fn enum_rules() {
    let new = edited(|p| p["mode"]["enum"] = json!(["fast"]));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.mode",
            K::EnumValuesRemoved {
                values: vec!["\"slow\"".into()]
            }
        )]
    );
    let new = edited(|p| p["color"]["enum"] = json!(["red", "blue"]));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.color",
            K::EnumRestrictionAdded {
                allowed: vec!["\"blue\"".into(), "\"red\"".into()]
            }
        )]
    );
}

#[test]
fn default_rules() {
    let new = edited(|p| p["color"]["default"] = json!("red"));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.color",
            K::DefaultChanged {
                from: None,
                to: Some("\"red\"".into())
            }
        )]
    );
}

#[test]
fn bound_rules() {
    let new = edited(|p| {
        p["size"]["minimum"] = json!(2);
        p["size"]["maximum"] = json!(5);
        p["color"]["maxLength"] = json!(16);
    });
    assert_eq!(
        summary(&base(), &new),
        vec![
            at(
                "^.spec.color",
                K::MaximumTightened {
                    constraint: "maxLength",
                    from: None,
                    to: "16".into()
                }
            ),
            at(
                "^.spec.size",
                K::MaximumTightened {
                    constraint: "maximum",
                    from: Some("10".into()),
                    to: "5".into()
                }
            ),
            at(
                "^.spec.size",
                K::MinimumTightened {
                    constraint: "minimum",
                    from: Some("1".into()),
                    to: "2".into()
                }
            ),
        ]
    );
}

#[test]
fn unknown_changes_fail_closed() {
    let new = edited(|p| p["color"]["pattern"] = json!("^[a-z]+$"));
    assert_eq!(
        summary(&base(), &new),
        vec![at(
            "^.spec.color",
            K::UnhandledChange {
                keywords: vec!["pattern".into()]
            }
        )]
    );
}

#[test]
fn different_crds_are_not_compared() {
    let mut new = base();
    new["metadata"]["name"] = json!("gadgets.example.com");
    let found = violations(&base(), &new);
    assert_eq!(found.len(), 1);
    assert!(matches!(found[0].kind, K::DifferentCrd { .. }));
}

#[test]
fn messages_name_crd_version_and_path() {
    let new = edited(|p| p["color"]["type"] = json!("integer"));
    let message = violations(&base(), &new)[0].to_string();
    assert!(
        message.starts_with("CRD widgets.example.com version v1 field ^.spec.color: type changed"),
        "{message}"
    );
}

#[test]
fn garbage_never_panics() {
    for (old, new) in [
        (json!(null), json!(null)),
        (json!([]), json!({"spec": {"versions": "x"}})),
        (
            json!({"spec": {"versions": [{"name": "v1", "schema": {"openAPIV3Schema": 3}}]}}),
            base(),
        ),
        (
            base(),
            json!({"metadata": {"name": "widgets.example.com"}, "spec": {"versions": [{"name": "v1"}]}}),
        ),
    ] {
        let _ = check_crd_upgrade(&old, &new);
    }
}

/// A CRD under `../shared/testdata/crds`; `None` (skip, said on stderr) when the shared data is
/// absent outside CI, a failure in CI (see `shared_support`). A file missing from present data
/// is a failure everywhere.
fn upstream_crd(relative: &str) -> Option<Value> {
    let path = shared_support::shared_dir("crds")?.join(relative);
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    Some(serde_saphyr::from_str(&text).unwrap())
}

#[test]
fn upstream_crds_against_themselves_and_edits() {
    let Some(operator_conditions) =
        upstream_crd("operator-framework-api/operators.coreos.com_operatorconditions.yaml")
    else {
        return;
    };
    for relative in [
        "operator-framework-api/operators.coreos.com_operatorconditions.yaml",
        "openshift-api/0000_00_cluster-version-operator_01_clusteroperators.crd.yaml",
        "openshift-api/0000_00_cluster-version-operator_01_clusterversions-Default.crd.yaml",
    ] {
        let crd = upstream_crd(relative).unwrap();
        assert_eq!(check_crd_upgrade(&crd, &crd), Ok(()), "{relative}");
    }

    // Dropping v1 (served, not storage) from OperatorCondition breaks v1 clients.
    let mut new = operator_conditions.clone();
    new["spec"]["versions"].as_array_mut().unwrap().remove(0);
    let found = violations(&operator_conditions, &new);
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].version.as_deref(), Some("v1"));
    assert_eq!(found[0].kind, K::ServedVersionRemoved);

    // Making spec.overrides required in v2 breaks existing OperatorConditions.
    let mut new = operator_conditions.clone();
    new["spec"]["versions"][1]["schema"]["openAPIV3Schema"]["properties"]["spec"]["required"] =
        json!(["overrides"]);
    let found = violations(&operator_conditions, &new);
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!(found[0].path.as_deref(), Some("^.spec"));
    assert!(
        matches!(&found[0].kind, K::RequiredFieldsAdded { fields } if fields == &["overrides"])
    );
}
