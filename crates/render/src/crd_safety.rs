//! CRD upgrade safety: may POM replace a CustomResourceDefinition on the cluster with the one a
//! new bundle ships, without dropping stored data or breaking custom resources that exist?
//!
//! The rules follow OLM v1's preflight (operator-controller `crdupgradesafety`, now built on
//! crdify), contracts §6.3, applied to two CRDs as JSON so the check is pure:
//! - CRD-wide: the scope may not change; no stored version (the old CRD's
//!   `status.storedVersions`, or its `storage: true` version when it has no status) may
//!   disappear; and, beyond OLM, no served version may disappear from `spec.versions` (clients
//!   of that version would break).
//! - Per version present in both, per schema field (`^` is the root of `openAPIV3Schema`,
//!   `.name` a property, `[*]` array items, `.*` map values): a field may not be removed, change
//!   `type`, gain `required` entries, gain an `enum` where there was none or lose enum values,
//!   add, change or remove a `default`, raise a minimum (`minimum`, `minLength`, `minItems`,
//!   `minProperties`) or lower a maximum (or add either). Description changes are ignored, as
//!   OLM does. Any other change to a field's schema is refused as unhandled (fail-closed, as
//!   OLM does).
//!
//! Not checked (OLM v1 does): schema differences between the served versions of the new CRD.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::{Map, Value};

use super::names::canonical_json;
use super::objects::{at, str_at};

/// One reason a CRD upgrade is unsafe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdViolation {
    /// The CRD's name (`plural.group`).
    pub crd: String,
    /// The version concerned, for version and field rules.
    pub version: Option<String>,
    /// The schema path (`^.spec.replicas`), for field rules.
    pub path: Option<String>,
    pub kind: CrdViolationKind,
}

/// What exactly is unsafe.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CrdViolationKind {
    /// The two objects are different CRDs.
    DifferentCrd {
        old: String,
        new: String,
    },
    ScopeChanged {
        from: String,
        to: String,
    },
    /// A version that holds stored objects is gone from `spec.versions`.
    StoredVersionRemoved,
    /// A served version is gone from `spec.versions`.
    ServedVersionRemoved,
    FieldRemoved,
    TypeChanged {
        from: String,
        to: String,
    },
    RequiredFieldsAdded {
        fields: Vec<String>,
    },
    /// An enum now restricts a field that accepted any value.
    EnumRestrictionAdded {
        allowed: Vec<String>,
    },
    EnumValuesRemoved {
        values: Vec<String>,
    },
    /// A default was added (`from` None), removed (`to` None) or changed.
    DefaultChanged {
        from: Option<String>,
        to: Option<String>,
    },
    /// `maximum`, `maxLength`, `maxItems` or `maxProperties` added or lowered.
    MaximumTightened {
        constraint: &'static str,
        from: Option<String>,
        to: String,
    },
    /// `minimum`, `minLength`, `minItems` or `minProperties` added or raised.
    MinimumTightened {
        constraint: &'static str,
        from: Option<String>,
        to: String,
    },
    /// Other schema keywords changed; POM cannot tell that the change is safe.
    UnhandledChange {
        keywords: Vec<String>,
    },
}

impl fmt::Display for CrdViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "CRD {}", self.crd)?;
        if let Some(version) = &self.version {
            write!(f, " version {version}")?;
        }
        if let Some(path) = &self.path {
            write!(f, " field {path}")?;
        }
        f.write_str(": ")?;
        let existing = "existing custom resources could stop validating";
        match &self.kind {
            CrdViolationKind::DifferentCrd { old, new } => {
                write!(f, "compared with CRD {old:?}, a different CRD (new is {new:?}); compare a CRD with its own new version")
            }
            CrdViolationKind::ScopeChanged { from, to } => write!(
                f,
                "scope changed from {from} to {to}; existing custom resources cannot move, keep the scope or ship a new CRD"
            ),
            CrdViolationKind::StoredVersionRemoved => f.write_str(
                "a stored version was removed; objects stored in it would become unreadable, keep the version (served: false is fine) until it is migrated out of status.storedVersions",
            ),
            CrdViolationKind::ServedVersionRemoved => f.write_str(
                "a served version was removed; clients using it would break, keep it with served: false first",
            ),
            CrdViolationKind::FieldRemoved => {
                write!(f, "field removed; {existing} or lose data, keep the field (it may be deprecated)")
            }
            CrdViolationKind::TypeChanged { from, to } => {
                write!(f, "type changed from {from:?} to {to:?}; {existing}, add a new field instead")
            }
            CrdViolationKind::RequiredFieldsAdded { fields } => write!(
                f,
                "new required fields [{}]; {existing}, make them optional with a default in the controller",
                fields.join(", ")
            ),
            CrdViolationKind::EnumRestrictionAdded { allowed } => write!(
                f,
                "an enum [{}] now restricts a field that accepted any value; {existing}",
                allowed.join(", ")
            ),
            CrdViolationKind::EnumValuesRemoved { values } => {
                write!(f, "enum values [{}] removed; {existing}, keep accepting them", values.join(", "))
            }
            CrdViolationKind::DefaultChanged { from, to } => match (from, to) {
                (None, Some(to)) => write!(f, "default {to} added; it would change existing objects silently"),
                (Some(from), None) => write!(f, "default {from} removed; it would change existing objects silently"),
                (from, to) => write!(
                    f,
                    "default changed from {} to {}; it would change existing objects silently",
                    from.as_deref().unwrap_or("none"),
                    to.as_deref().unwrap_or("none")
                ),
            },
            CrdViolationKind::MaximumTightened { constraint, from, to } => match from {
                Some(from) => write!(f, "{constraint} lowered from {from} to {to}; {existing}"),
                None => write!(f, "{constraint} {to} added; {existing}"),
            },
            CrdViolationKind::MinimumTightened { constraint, from, to } => match from {
                Some(from) => write!(f, "{constraint} raised from {from} to {to}; {existing}"),
                None => write!(f, "{constraint} {to} added; {existing}"),
            },
            CrdViolationKind::UnhandledChange { keywords } => write!(
                f,
                "schema keywords [{}] changed and POM cannot prove the change safe; {existing}",
                keywords.join(", ")
            ),
        }
    }
}

/// Checks whether `new` may replace `old` (both CRDs as JSON, `apiextensions.k8s.io/v1`).
/// `old` is best the live object, whose `status.storedVersions` says which versions hold data.
/// Violations come in a stable order: CRD-wide, then by version, then by field path.
pub fn check_crd_upgrade(old: &Value, new: &Value) -> Result<(), Vec<CrdViolation>> {
    let old_name = str_at(old, &["metadata", "name"]).unwrap_or_default();
    let new_name = str_at(new, &["metadata", "name"]).unwrap_or_default();
    let crd = if new_name.is_empty() {
        old_name
    } else {
        new_name
    };
    let mut findings = Findings {
        crd: crd.to_owned(),
        violations: Vec::new(),
    };
    if old_name != new_name {
        findings.push(
            None,
            None,
            CrdViolationKind::DifferentCrd {
                old: old_name.to_owned(),
                new: new_name.to_owned(),
            },
        );
        return Err(findings.violations);
    }

    check_scope(old, new, &mut findings);
    let old_versions = versions(old);
    let new_versions = versions(new);
    check_removed_versions(old, &old_versions, &new_versions, &mut findings);
    for (name, old_version) in &old_versions {
        if let Some(new_version) = new_versions.get(name) {
            check_schema(name, old_version.schema, new_version.schema, &mut findings);
        }
    }

    if findings.violations.is_empty() {
        Ok(())
    } else {
        Err(findings.violations)
    }
}

/// The violations found so far, in the order found: every one names the same CRD.
struct Findings {
    crd: String,
    violations: Vec<CrdViolation>,
}

impl Findings {
    fn push(&mut self, version: Option<&str>, path: Option<&str>, kind: CrdViolationKind) {
        self.violations.push(CrdViolation {
            crd: self.crd.clone(),
            version: version.map(str::to_owned),
            path: path.map(str::to_owned),
            kind,
        });
    }
}

/// A namespaced CRD cannot become cluster-scoped (or back): its objects would not be found.
fn check_scope(old: &Value, new: &Value, findings: &mut Findings) {
    let old_scope = str_at(old, &["spec", "scope"]).unwrap_or_default();
    let new_scope = str_at(new, &["spec", "scope"]).unwrap_or_default();
    if old_scope != new_scope {
        findings.push(
            None,
            None,
            CrdViolationKind::ScopeChanged {
                from: old_scope.to_owned(),
                to: new_scope.to_owned(),
            },
        );
    }
}

/// A version that holds data (stored: `status.storedVersions` or the `storage: true` one)
/// may not disappear, nor may a served one, whose clients would break.
fn check_removed_versions(
    old: &Value,
    old_versions: &BTreeMap<&str, Version<'_>>,
    new_versions: &BTreeMap<&str, Version<'_>>,
    findings: &mut Findings,
) {
    let mut stored: BTreeSet<&str> = match at(old, &["status", "storedVersions"]) {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => BTreeSet::new(),
    };
    stored.extend(old_versions.values().filter(|v| v.storage).map(|v| v.name));
    for version in &stored {
        if !new_versions.contains_key(version) {
            findings.push(Some(version), None, CrdViolationKind::StoredVersionRemoved);
        }
    }
    for version in old_versions.values() {
        if version.served
            && !stored.contains(version.name)
            && !new_versions.contains_key(version.name)
        {
            findings.push(
                Some(version.name),
                None,
                CrdViolationKind::ServedVersionRemoved,
            );
        }
    }
}

/// One version's schema, field by field: a removed field is one violation (not one per
/// descendant: a removed parent covers its children), a kept one is compared keyword by keyword.
fn check_schema(version: &str, old: &Value, new: &Value, findings: &mut Findings) {
    let old_fields = flatten(old);
    let new_fields = flatten(new);
    for (path, old_field) in &old_fields {
        let Some(new_field) = new_fields.get(path) else {
            let parent_removed = old_field
                .parent
                .as_ref()
                .is_some_and(|parent| !new_fields.contains_key(parent));
            if !parent_removed {
                findings.push(Some(version), Some(path), CrdViolationKind::FieldRemoved);
            }
            continue;
        };
        for kind in compare_field(&old_field.keywords, &new_field.keywords) {
            findings.push(Some(version), Some(path), kind);
        }
    }
}

/// One entry of `spec.versions`.
struct Version<'a> {
    name: &'a str,
    served: bool,
    storage: bool,
    schema: &'a Value,
}

const EMPTY_SCHEMA: Value = Value::Null;

fn versions(crd: &Value) -> BTreeMap<&str, Version<'_>> {
    let Some(Value::Array(items)) = at(crd, &["spec", "versions"]) else {
        return BTreeMap::new();
    };
    items
        .iter()
        .filter_map(|item| {
            let name = str_at(item, &["name"])?;
            Some((
                name,
                Version {
                    name,
                    served: item.get("served").and_then(Value::as_bool).unwrap_or(false),
                    storage: item
                        .get("storage")
                        .and_then(Value::as_bool)
                        .unwrap_or(false),
                    schema: at(item, &["schema", "openAPIV3Schema"]).unwrap_or(&EMPTY_SCHEMA),
                },
            ))
        })
        .collect()
}

/// A schema node without its children and description.
struct Field {
    parent: Option<String>,
    keywords: Map<String, Value>,
}

/// Every node of a schema by path, root `^`.
fn flatten(schema: &Value) -> BTreeMap<String, Field> {
    let mut fields = BTreeMap::new();
    flatten_into(schema, "^".to_owned(), None, &mut fields);
    fields
}

fn flatten_into(
    schema: &Value,
    path: String,
    parent: Option<String>,
    out: &mut BTreeMap<String, Field>,
) {
    let mut keywords = match schema {
        Value::Object(map) => map.clone(),
        _ => Map::new(),
    };
    keywords.remove("description");
    let mut children: Vec<(String, Value)> = Vec::new();
    if let Some(Value::Object(properties)) = keywords.remove("properties") {
        for (name, child) in properties {
            children.push((format!("{path}.{name}"), child));
        }
    }
    if matches!(keywords.get("items"), Some(Value::Object(_)))
        && let Some(items) = keywords.remove("items")
    {
        children.push((format!("{path}[*]"), items));
    }
    if matches!(keywords.get("additionalProperties"), Some(Value::Object(_)))
        && let Some(values) = keywords.remove("additionalProperties")
    {
        children.push((format!("{path}.*"), values));
    }
    out.insert(path.clone(), Field { parent, keywords });
    for (child_path, child) in children {
        flatten_into(&child, child_path, Some(path.clone()), out);
    }
}

const MAXIMA: &[&str] = &["maximum", "maxLength", "maxItems", "maxProperties"];
const MINIMA: &[&str] = &["minimum", "minLength", "minItems", "minProperties"];

/// The violations between two versions of one field's own keywords.
fn compare_field(old: &Map<String, Value>, new: &Map<String, Value>) -> Vec<CrdViolationKind> {
    let mut found = Vec::new();
    let text = |v: Option<&Value>| v.map(canonical_json);

    let old_type = old.get("type").and_then(Value::as_str).unwrap_or_default();
    let new_type = new.get("type").and_then(Value::as_str).unwrap_or_default();
    if old.get("type") != new.get("type") {
        found.push(CrdViolationKind::TypeChanged {
            from: old_type.to_owned(),
            to: new_type.to_owned(),
        });
    }

    let old_required = string_set(old.get("required"));
    let added: Vec<String> = string_set(new.get("required"))
        .difference(&old_required)
        .cloned()
        .collect();
    if !added.is_empty() {
        found.push(CrdViolationKind::RequiredFieldsAdded { fields: added });
    }

    let old_enum = value_set(old.get("enum"));
    let new_enum = value_set(new.get("enum"));
    if old_enum.is_empty() && !new_enum.is_empty() {
        found.push(CrdViolationKind::EnumRestrictionAdded {
            allowed: new_enum.iter().cloned().collect(),
        });
    } else if !new_enum.is_empty() {
        // An emptied enum lifts the restriction: safe.
        let removed: Vec<String> = old_enum.difference(&new_enum).cloned().collect();
        if !removed.is_empty() {
            found.push(CrdViolationKind::EnumValuesRemoved { values: removed });
        }
    }

    if text(old.get("default")) != text(new.get("default")) {
        found.push(CrdViolationKind::DefaultChanged {
            from: text(old.get("default")),
            to: text(new.get("default")),
        });
    }

    for constraint in MAXIMA {
        if let Some((from, to)) =
            tightened(old.get(*constraint), new.get(*constraint), |o, n| n < o)
        {
            found.push(CrdViolationKind::MaximumTightened {
                constraint,
                from,
                to,
            });
        }
    }
    for constraint in MINIMA {
        if let Some((from, to)) =
            tightened(old.get(*constraint), new.get(*constraint), |o, n| n > o)
        {
            found.push(CrdViolationKind::MinimumTightened {
                constraint,
                from,
                to,
            });
        }
    }

    let handled: BTreeSet<&str> = ["type", "required", "enum", "default"]
        .into_iter()
        .chain(MAXIMA.iter().copied())
        .chain(MINIMA.iter().copied())
        .collect();
    let keywords: Vec<String> = old
        .keys()
        .chain(new.keys())
        .filter(|key| !handled.contains(key.as_str()))
        .filter(|key| old.get(*key) != new.get(*key))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    if !keywords.is_empty() {
        found.push(CrdViolationKind::UnhandledChange { keywords });
    }
    found
}

/// `Some((old, new))` when a bound is added, or moved in the tightening direction.
fn tightened(
    old: Option<&Value>,
    new: Option<&Value>,
    tighter: fn(f64, f64) -> bool,
) -> Option<(Option<String>, String)> {
    let new = new?;
    let new_number = new.as_f64();
    match old {
        None => Some((None, canonical_json(new))),
        Some(old) => match (old.as_f64(), new_number) {
            (Some(o), Some(n)) if !tighter(o, n) => None,
            (Some(_), Some(_)) => Some((Some(canonical_json(old)), canonical_json(new))),
            // Not numbers: refuse any change, allow equality.
            _ if old == new => None,
            _ => Some((Some(canonical_json(old)), canonical_json(new))),
        },
    }
}

fn string_set(value: Option<&Value>) -> BTreeSet<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => BTreeSet::new(),
    }
}

fn value_set(value: Option<&Value>) -> BTreeSet<String> {
    match value {
        Some(Value::Array(items)) => items.iter().map(canonical_json).collect(),
        _ => BTreeSet::new(),
    }
}
