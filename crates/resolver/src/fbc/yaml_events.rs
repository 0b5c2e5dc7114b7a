//! A YAML document to a `serde_json::Value` straight from the parser's events, for the
//! documents catalogs are made of; serde-saphyr decides every other document.
//!
//! Why: half of serde-saphyr's time goes to its serde layer, not to its parser (granit-parser,
//! which it re-exports and which this module drives directly). Catalog documents use a small
//! part of YAML: mappings, sequences and untagged scalars. For those, building the value from
//! the events is exact and about twice as fast.
//!
//! Exact by construction: this module *declines* (returns [`Declined`]) whenever a document holds
//! anything whose meaning it does not reproduce bit for bit, and the caller then decodes that
//! document with serde-saphyr as before, errors included. It declines on parse errors, tags,
//! anchors and aliases (the alias budget stays with serde-saphyr), merge keys (`<<`), keys
//! that are not plain strings, duplicate keys, `%YAML` directives, plain scalars whose resolution
//! is not one of the simple forms below, and documents that come within half of any of
//! serde-saphyr's default budgets (events, nodes, depth, scalar and comment bytes).
//!
//! Plain scalars resolve as serde-saphyr's `deserialize_any` resolves them with its default
//! options (YAML 1.1 booleans, YAML 1.2 core numbers, non-finite floats refused): null
//! spellings, booleans, decimal integers without a leading zero, and `digits.digits`
//! decimals; a scalar that holds a byte no number or special spelling can contain is a
//! string. Everything between (hex, octal, exponents, `.inf`, leading zeros, underscores ...)
//! is declined. `tests` compares both on random scalars and documents, and
//! `tests/fbc_real.rs` on every real YAML catalog.

use serde_json::{Map, Number, Value};
use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle};

/// The limits under which this module builds a document: half of serde-saphyr's defaults, so
/// every document near a limit is serde-saphyr's to accept or refuse, however the two count.
#[derive(Debug, Clone, Copy)]
struct Limits {
    events: usize,
    nodes: usize,
    depth: usize,
    scalar_bytes: usize,
    comment_bytes: usize,
}

impl Limits {
    fn half_of_serde_saphyr() -> Self {
        let budget = serde_saphyr::Budget::default();
        Self {
            events: budget.max_events / 2,
            nodes: budget.max_nodes / 2,
            depth: budget.max_depth / 2,
            scalar_bytes: budget.max_total_scalar_bytes / 2,
            comment_bytes: budget.max_total_comment_bytes / 2,
        }
    }
}

/// The parser options serde-saphyr uses with its default `Options` and `Budget`, so that this
/// module never accepts a document serde-saphyr's parser would refuse.
fn parser_options() -> Options {
    let budget = serde_saphyr::Budget::default();
    let mut options = Options::default();
    options.simple_key_max_lookahead = budget.simple_key_max_lookahead;
    options.flow_nesting_limit = budget.flow_nesting_limit;
    options.block_nesting_limit = options
        .block_nesting_limit
        .max(budget.max_depth.saturating_add(1));
    options.set_emit_comments(true);
    options.max_buffered_comment_events = budget.max_buffered_comment_events;
    options
}

/// Why the front end left a document to serde-saphyr.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Declined {
    /// The parser refused the text (serde-saphyr reports the error).
    ParseError,
    /// More or less than one document, or a `%YAML` directive.
    DocumentShape,
    /// A tag, an anchor or an alias.
    TagOrAlias,
    /// A key that is not a plain string, or the merge key `<<`.
    Key,
    /// A key given twice (serde-saphyr refuses it by default).
    DuplicateKey,
    /// A plain scalar whose resolution is not one of the simple forms.
    Scalar,
    /// The document came within half of one of serde-saphyr's budgets.
    Budget,
}

/// A collection being built.
enum Frame {
    Sequence(Vec<Value>),
    Mapping {
        map: Map<String, Value>,
        key: Option<String>,
    },
}

/// Builds the one document in `text`, or declines: see the module's documentation.
pub(crate) fn document_value(text: &str) -> Result<Value, Declined> {
    let limits = Limits::half_of_serde_saphyr();
    let mut events = 0usize;
    let mut nodes = 0usize;
    let mut scalar_bytes = 0usize;
    let mut comment_bytes = 0usize;
    let mut documents = 0usize;
    let mut stack: Vec<Frame> = Vec::new();
    let mut root: Option<Value> = None;
    for item in Parser::new_from_str_with_options(text, parser_options()) {
        let (event, _span) = item.map_err(|_| Declined::ParseError)?;
        events += 1;
        if events > limits.events {
            return Err(Declined::Budget);
        }
        let node = match event {
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd => continue,
            Event::DocumentStart(_, version) => {
                documents += 1;
                if documents > 1 || version.is_some() {
                    return Err(Declined::DocumentShape);
                }
                continue;
            }
            Event::Comment(body, _) => {
                comment_bytes += body.len();
                if comment_bytes > limits.comment_bytes {
                    return Err(Declined::Budget);
                }
                continue;
            }
            Event::Alias(_) | Event::Anchor(..) | Event::UnresolvedAlias(_) => {
                return Err(Declined::TagOrAlias);
            }
            Event::Scalar(value, style, anchor, tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(Declined::TagOrAlias);
                }
                scalar_bytes += value.len();
                if scalar_bytes > limits.scalar_bytes {
                    return Err(Declined::Budget);
                }
                if let Some(Frame::Mapping {
                    key: key @ None, ..
                }) = stack.last_mut()
                {
                    *key = Some(mapping_key(value.as_ref(), style).ok_or(Declined::Key)?);
                    continue;
                }
                match style {
                    ScalarStyle::Plain => resolve_plain(&value).ok_or(Declined::Scalar)?,
                    _ => Value::String(value.into_owned()),
                }
            }
            Event::SequenceStart(_, anchor, ref tag) | Event::MappingStart(_, anchor, ref tag) => {
                if anchor != 0 || tag.is_some() {
                    return Err(Declined::TagOrAlias);
                }
                if in_key_position(&stack) {
                    return Err(Declined::Key);
                }
                if stack.len() >= limits.depth {
                    return Err(Declined::Budget);
                }
                stack.push(match event {
                    Event::SequenceStart(..) => Frame::Sequence(Vec::new()),
                    _ => Frame::Mapping {
                        map: Map::new(),
                        key: None,
                    },
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Sequence(items)) => Value::Array(items),
                _ => return Err(Declined::ParseError),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Mapping { map, key: None }) => Value::Object(map),
                _ => return Err(Declined::ParseError),
            },
            // An event kind added by a later parser: serde-saphyr knows what it means.
            _ => return Err(Declined::ParseError),
        };
        nodes += 1;
        if nodes > limits.nodes {
            return Err(Declined::Budget);
        }
        match stack.last_mut() {
            None => {
                if root.replace(node).is_some() {
                    return Err(Declined::DocumentShape);
                }
            }
            Some(Frame::Sequence(items)) => items.push(node),
            Some(Frame::Mapping { map, key }) => {
                let key = key.take().ok_or(Declined::ParseError)?;
                if map.insert(key, node).is_some() {
                    // serde-saphyr refuses duplicate keys (its default policy); let it say so.
                    return Err(Declined::DuplicateKey);
                }
            }
        }
    }
    if !stack.is_empty() {
        return Err(Declined::ParseError);
    }
    root.ok_or(Declined::DocumentShape)
}

/// Whether the next node would be a mapping key.
fn in_key_position(stack: &[Frame]) -> bool {
    matches!(stack.last(), Some(Frame::Mapping { key: None, .. }))
}

/// A mapping key this module takes as it is: quoted or block text, or a plain scalar that
/// resolves to a string and is not the merge key.
fn mapping_key(text: &str, style: ScalarStyle) -> Option<String> {
    match style {
        ScalarStyle::Plain => match resolve_plain(text)? {
            Value::String(key) if key != "<<" => Some(key),
            _ => None,
        },
        _ => Some(text.to_owned()),
    }
}

/// Bytes of the numbers serde-saphyr resolves: digits, signs, `.`, `_`, hex digits (which
/// include the exponent `e` and the binary prefix `b`), and the radix prefixes `x` and `o`.
fn is_number_byte(byte: u8) -> bool {
    byte.is_ascii_hexdigit()
        || matches!(byte, b'+' | b'-' | b'.' | b'_' | b'x' | b'X' | b'o' | b'O')
}

/// The value of a plain, untagged scalar, or `None` when it is not one of the forms this
/// module resolves (serde-saphyr then decides the document).
fn resolve_plain(text: &str) -> Option<Value> {
    if text.starts_with([' ', '\t', '\r', '\n']) || text.ends_with([' ', '\t', '\r', '\n']) {
        // serde-saphyr trims such padding before resolving; the parser never leaves any on a
        // plain scalar, so this is only a guard.
        return None;
    }
    match text {
        "" | "~" | "null" | "Null" | "NULL" => return Some(Value::Null),
        _ => {}
    }
    for (spellings, value) in [
        (["true", "yes", "y", "on"], true),
        (["false", "no", "n", "off"], false),
    ] {
        if spellings.iter().any(|s| text.eq_ignore_ascii_case(s)) {
            return Some(Value::Bool(value));
        }
    }
    // Every number starts, after one sign, with a digit or a dot (`.5`, `.inf`, `.nan`, which
    // are left to serde-saphyr); `inf` and `nan` without the dot are strings to serde-saphyr.
    // So is a text that starts with a digit and holds a byte no number has.
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    if unsigned.starts_with('.') {
        return None;
    }
    if !unsigned.starts_with(|c: char| c.is_ascii_digit()) || !text.bytes().all(is_number_byte) {
        return Some(Value::String(text.to_owned()));
    }
    if text.starts_with('+') {
        return None;
    }
    let negative = text.starts_with('-');
    let is_digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if is_digits(unsigned) {
        if unsigned.len() > 1 && unsigned.starts_with('0') {
            return None;
        }
        return if negative {
            text.parse::<i64>().ok().map(Value::from)
        } else {
            text.parse::<u64>().ok().map(Value::from)
        };
    }
    if let Some((whole, fraction)) = unsigned.split_once('.')
        && is_digits(whole)
        && is_digits(fraction)
    {
        return text
            .parse::<f64>()
            .ok()
            .and_then(Number::from_f64)
            .map(Value::Number);
    }
    if text.bytes().filter(|&b| b == b'.').count() >= 2 {
        // No integer or float form has two dots: `1.2.3` is a string.
        return Some(Value::String(text.to_owned()));
    }
    None
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;

    fn saphyr(text: &str) -> Result<Value, String> {
        serde_saphyr::from_str::<Value>(text).map_err(|e| e.to_string())
    }

    /// The property: whatever the front end builds, serde-saphyr builds the same.
    fn agrees(text: &str) -> Result<Option<Value>, String> {
        match document_value(text) {
            Err(_) => Ok(None),
            Ok(fast) => match saphyr(text) {
                Ok(slow) if slow == fast => Ok(Some(fast)),
                other => Err(format!("{text:?}: events {fast:?}, serde-saphyr {other:?}")),
            },
        }
    }

    #[test]
    fn catalog_scalars_are_built_as_serde_saphyr_resolves_them() {
        for (scalar, expected) in [
            ("foo.v0.1.0", Value::from("foo.v0.1.0")),
            ("0.1.0", Value::from("0.1.0")),
            ("1.2.3-beta.1", Value::from("1.2.3-beta.1")),
            ("3scale-operator", Value::from("3scale-operator")),
            ("data", Value::from("data")),
            ("inf", Value::from("inf")),
            ("-foo", Value::from("-foo")),
            ("4.12", Value::from(4.12)),
            ("-0.5", Value::from(-0.5)),
            ("42", Value::from(42u64)),
            ("-7", Value::from(-7i64)),
            ("0", Value::from(0u64)),
            ("true", Value::Bool(true)),
            ("Yes", Value::Bool(true)),
            ("off", Value::Bool(false)),
            ("~", Value::Null),
            ("NULL", Value::Null),
            (
                "quay.io/org/image@sha256:abc",
                Value::from("quay.io/org/image@sha256:abc"),
            ),
            // Unquoted timestamps stay the text they were written as (rabbitmq-cluster-operator's
            // real catalog has `createdAt: 2025-06-24T14:07:09`).
            ("2025-06-24T14:07:09", Value::from("2025-06-24T14:07:09")),
        ] {
            let document = format!("k: {scalar}\n");
            let built = agrees(&document).unwrap();
            assert_eq!(
                built,
                Some(serde_json::json!({ "k": expected })),
                "{document:?}"
            );
        }
        // An empty plain value is null.
        assert_eq!(
            agrees("k:\n").unwrap(),
            Some(serde_json::json!({ "k": null }))
        );
    }

    #[test]
    fn anything_else_is_declined_for_serde_saphyr_to_decide() {
        for (document, reason) in [
            ("k: 0x1F\n", Declined::Scalar),
            ("k: 1e5\n", Declined::Scalar),
            ("k: .inf\n", Declined::Scalar),
            ("k: 0127\n", Declined::Scalar),
            ("k: +5\n", Declined::Scalar),
            ("k: 1_000\n", Declined::Scalar),
            ("k: 99999999999999999999\n", Declined::Scalar),
            ("k: !!str 1\n", Declined::TagOrAlias),
            ("a: &x 1\nb: *x\n", Declined::TagOrAlias),
            ("base: {a: 1}\nother:\n  <<: {b: 2}\n", Declined::Key),
            ("1: one\n", Declined::Key),
            ("true: yes\n", Declined::Key),
            ("? [a]\n: b\n", Declined::Key),
            ("k: 1\nk: 2\n", Declined::DuplicateKey),
            ("%YAML 1.2\n---\nk: v\n", Declined::DocumentShape),
            ("k: v\n---\nl: w\n", Declined::DocumentShape),
            ("k: [unclosed\n", Declined::ParseError),
        ] {
            assert_eq!(document_value(document), Err(reason), "{document:?}");
        }
        let deep = "[".repeat(40) + &"]".repeat(40);
        assert_eq!(document_value(&deep), Err(Declined::Budget));
    }

    #[test]
    fn quoted_and_block_scalars_are_strings() {
        let document = "a: '1'\nb: \"true\"\nc: |\n  x: 1\n  y\nd: >-\n  folded\n  text\n";
        assert_eq!(
            agrees(document).unwrap(),
            Some(serde_json::json!({"a": "1", "b": "true", "c": "x: 1\ny\n", "d": "folded text"}))
        );
    }

    /// Scalar texts made of the bytes resolution turns on, and special spellings.
    fn scalar_text() -> impl Strategy<Value = String> {
        prop_oneof![
            "[0-9a-fA-FxXoOnNiItTyYlLsSuUrR+._~-]{0,9}",
            "[-+]?[0-9]{1,22}(\\.[0-9]{0,4})?([eE][-+]?[0-9]{1,3})?",
            "[-+]?\\.(inf|Inf|INF|nan|NaN|NAN)",
            "(true|True|TRUE|false|yes|No|ON|off|y|N|null|Null|~|inf|nan|infinity)",
            "[a-z0-9]{1,6}(\\.[0-9]{1,3}){0,3}(-[a-z0-9.]{1,5})?",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

        #[test]
        fn plain_scalars_resolve_as_serde_saphyr_resolves_them(text in scalar_text()) {
            for document in [format!("k: {text}\n"), format!("- {text}\n"), format!("k: [{text}]\n")] {
                if let Err(difference) = agrees(&document) {
                    prop_assert!(false, "{}", difference);
                }
            }
        }

        #[test]
        fn plain_keys_are_taken_only_as_serde_saphyr_takes_them(key in scalar_text()) {
            if let Err(difference) = agrees(&format!("{key}: v\nother: w\n")) {
                prop_assert!(false, "{}", difference);
            }
        }

        #[test]
        fn documents_decode_alike(tree in document_tree()) {
            let mut text = String::new();
            emit(&tree, 0, &mut text);
            if let Err(difference) = agrees(&text) {
                prop_assert!(false, "{}", difference);
            }
        }
    }

    /// A document tree: mappings with keys from a small set (so duplicates occur), sequences,
    /// and scalars written plain, quoted or as block text.
    #[derive(Debug, Clone)]
    enum Tree {
        Scalar(String, ScalarStyle),
        Sequence(Vec<Tree>),
        Mapping(Vec<(String, Tree)>),
    }

    fn document_tree() -> impl Strategy<Value = Tree> {
        let style = prop_oneof![
            Just(ScalarStyle::Plain),
            Just(ScalarStyle::SingleQuoted),
            Just(ScalarStyle::DoubleQuoted),
            Just(ScalarStyle::Literal),
        ];
        let leaf = (scalar_text(), style).prop_map(|(text, style)| Tree::Scalar(text, style));
        leaf.prop_recursive(4, 40, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 1..4).prop_map(Tree::Sequence),
                prop::collection::vec(("(name|schema|value|type|<<|data|k[0-9])", inner), 1..5)
                    .prop_map(Tree::Mapping),
            ]
        })
        .prop_map(|tree| match tree {
            Tree::Mapping(_) => tree,
            other => Tree::Mapping(vec![("root".to_owned(), other)]),
        })
    }

    fn emit(tree: &Tree, indent: usize, out: &mut String) {
        let pad = " ".repeat(indent);
        match tree {
            Tree::Mapping(entries) => {
                for (key, value) in entries {
                    out.push_str(&format!("{pad}{key}:"));
                    emit_value(value, indent, out);
                }
            }
            Tree::Sequence(items) => {
                for item in items {
                    out.push_str(&format!("{pad}-"));
                    emit_value(item, indent, out);
                }
            }
            Tree::Scalar(..) => emit_value(tree, indent, out),
        }
    }

    fn emit_value(tree: &Tree, indent: usize, out: &mut String) {
        match tree {
            Tree::Scalar(text, style) => match style {
                ScalarStyle::SingleQuoted => {
                    out.push_str(&format!(" '{}'\n", text.replace('\'', "''")));
                }
                ScalarStyle::DoubleQuoted => out.push_str(&format!(" {text:?}\n")),
                ScalarStyle::Literal => {
                    out.push_str(&format!(" |\n{}  {text}\n", " ".repeat(indent)));
                }
                _ => out.push_str(&format!(" {text}\n")),
            },
            nested => {
                out.push('\n');
                emit(nested, indent + 2, out);
            }
        }
    }
}
