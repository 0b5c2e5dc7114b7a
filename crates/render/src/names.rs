//! Stable names for the objects rendering generates, and a canonical JSON text to hash.
//!
//! Generated RBAC names must be the same on every render of the same bundle (server-side apply
//! and pruning key on names), unique between entries, and short enough for every name field
//! and label value (63 characters).

use serde_json::Value;
use sha2::{Digest, Sha256};

/// The longest name rendering generates.
pub const MAX_NAME_LEN: usize = 63;

/// Hex characters of the hash suffix.
const HASH_LEN: usize = 8;

/// `<base>-<hash>` where the hash covers `hash_input`, with `base` cut so the whole name fits
/// in 63 characters. The base is kept readable (`<csv>-<serviceaccount>`); the hash makes two
/// entries that share a base distinct and changes when what they grant changes.
pub fn hashed_name(base: &str, hash_input: &str) -> String {
    let digest = Sha256::digest(hash_input.as_bytes());
    let hash = hex::encode(digest);
    let suffix = hash.get(..HASH_LEN).unwrap_or(&hash);
    let room = MAX_NAME_LEN - HASH_LEN - 1;
    let mut cut: String = base.chars().take(room).collect();
    while cut.ends_with(['-', '.']) {
        cut.pop();
    }
    if cut.is_empty() {
        return suffix.to_owned();
    }
    format!("{cut}-{suffix}")
}

/// JSON text with object keys sorted at every level, so a hash over it does not depend on the
/// map implementation serde_json was built with (feature unification can switch it to
/// insertion order).
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_canonical(value, &mut out);
    out
}

fn write_canonical(value: &Value, out: &mut String) {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, key) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String((*key).clone()).to_string());
                out.push(':');
                if let Some(child) = map.get(*key) {
                    write_canonical(child, out);
                }
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        scalar => out.push_str(&scalar.to_string()),
    }
}

/// Whether `name` is a DNS-1123 label (namespace names).
pub fn is_dns1123_label(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_NAME_LEN
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
        && !name.ends_with('-')
}

/// Whether `name` is a DNS-1123 subdomain (Deployment and most object names).
pub fn is_dns1123_subdomain(name: &str) -> bool {
    name.len() <= 253
        && !name.is_empty()
        && name.split('.').all(|part| {
            !part.is_empty()
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !part.starts_with('-')
                && !part.ends_with('-')
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_fit_and_are_stable() {
        let long = "a".repeat(100);
        let name = hashed_name(&long, "x");
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert_eq!(name, hashed_name(&long, "x"));
        assert_ne!(name, hashed_name(&long, "y"));
        assert!(hashed_name("csv.v1.0.0-sa", "x").starts_with("csv.v1.0.0-sa-"));
    }

    #[test]
    fn cut_never_ends_in_a_separator() {
        let base = format!("{}-b", "a".repeat(53));
        let name = hashed_name(&base, "x");
        assert!(!name.contains("--"), "{name}");
    }

    #[test]
    fn canonical_json_sorts_keys() {
        assert_eq!(
            canonical_json(&json!({"b": 1, "a": [{"d": 1, "c": 2}]})),
            r#"{"a":[{"c":2,"d":1}],"b":1}"#
        );
    }

    #[test]
    fn dns_names() {
        assert!(is_dns1123_label("openshift-operators"));
        assert!(!is_dns1123_label("Bad"));
        assert!(!is_dns1123_label("a.b"));
        assert!(is_dns1123_subdomain("a.b-c"));
        assert!(!is_dns1123_subdomain("a..b"));
    }
}
