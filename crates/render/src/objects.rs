//! Kubernetes objects as JSON values: validation of the minimum every manifest needs, identity
//! keys, and small accessors so the generators read like the fields they touch.

use std::fmt;

use serde_json::{Map, Value};

use super::bundle::Document;
use super::error::RenderError;
use super::kinds::group_of;

/// A manifest that has apiVersion, kind and metadata.name, with where it came from.
#[derive(Debug, Clone)]
pub struct Manifest {
    pub file: String,
    pub document: usize,
    pub line: usize,
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub value: Value,
}

impl Manifest {
    /// Checks the fields every object needs and keeps them at hand.
    pub fn from_document(doc: Document) -> Result<Self, RenderError> {
        let Document {
            file,
            index,
            line,
            value,
            ..
        } = doc;
        let found = match &value {
            Value::Object(_) => None,
            Value::Array(_) => Some("a list"),
            Value::String(_) => Some("a string"),
            Value::Number(_) => Some("a number"),
            Value::Bool(_) => Some("a boolean"),
            Value::Null => Some("nothing"),
        };
        if let Some(found) = found {
            return Err(RenderError::NotAnObject {
                file,
                document: index,
                line,
                found,
            });
        }
        let missing = |missing: &'static str| RenderError::IncompleteObject {
            file: file.clone(),
            document: index,
            line,
            missing,
        };
        let api_version =
            non_empty_str(&value, &["apiVersion"]).ok_or_else(|| missing("apiVersion"))?;
        let kind = non_empty_str(&value, &["kind"]).ok_or_else(|| missing("kind"))?;
        let name =
            non_empty_str(&value, &["metadata", "name"]).ok_or_else(|| missing("metadata.name"))?;
        let (api_version, kind, name) = (api_version.to_owned(), kind.to_owned(), name.to_owned());
        Ok(Self {
            file,
            document: index,
            line,
            api_version,
            kind,
            name,
            value,
        })
    }

    /// `file`, plus the document number and its first line when the file holds several.
    pub fn origin(&self) -> String {
        if self.document > 1 {
            format!(
                "{} (document {}, line {})",
                self.file, self.document, self.line
            )
        } else {
            self.file.clone()
        }
    }

    pub fn group(&self) -> &str {
        group_of(&self.api_version)
    }

    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.group() == group && self.kind == kind
    }
}

/// The identity of an object on a cluster: version-independent.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    pub group: String,
    pub kind: String,
    pub namespace: String,
    pub name: String,
}

impl ObjectKey {
    /// The key of a rendered object (which always has apiVersion, kind and metadata.name).
    pub fn of(value: &Value) -> Self {
        let text = |path: &[&str]| str_at(value, path).unwrap_or_default().to_owned();
        Self {
            group: group_of(str_at(value, &["apiVersion"]).unwrap_or_default()).to_owned(),
            kind: text(&["kind"]),
            namespace: text(&["metadata", "namespace"]),
            name: text(&["metadata", "name"]),
        }
    }
}

impl fmt::Display for ObjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.group.is_empty() {
            self.kind.clone()
        } else {
            format!("{}.{}", self.kind, self.group)
        };
        if self.namespace.is_empty() {
            write!(f, "{kind} {:?}", self.name)
        } else {
            write!(
                f,
                "{kind} {:?} in namespace {:?}",
                self.name, self.namespace
            )
        }
    }
}

/// The value at `path`, if every step is an object key.
pub fn at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(value, |current, key| current.get(key))
}

/// The string at `path`.
pub fn str_at<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    at(value, path).and_then(Value::as_str)
}

fn non_empty_str<'a>(value: &'a Value, path: &[&str]) -> Option<&'a str> {
    str_at(value, path).filter(|s| !s.trim().is_empty())
}

/// The object at `path` inside `value`, creating (or replacing any non-object on the way with)
/// empty objects. `None` cannot happen in practice; it keeps this free of panics.
pub fn object_at_mut<'a>(
    value: &'a mut Value,
    path: &[&str],
) -> Option<&'a mut Map<String, Value>> {
    let mut current = value;
    for key in path {
        if !current.is_object() {
            *current = Value::Object(Map::new());
        }
        let map = current.as_object_mut()?;
        current = map.entry((*key).to_owned()).or_insert(Value::Null);
    }
    if !current.is_object() {
        *current = Value::Object(Map::new());
    }
    current.as_object_mut()
}

/// A scalar annotation value as the string Kubernetes would hold (annotations are strings;
/// YAML may have typed `true` or `1`).
pub fn scalar_to_string(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}
