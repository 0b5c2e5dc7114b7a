//! The blang/semver v4 `ParseRange` grammar used for catalog `skipRange` (operator-registry,
//! OLM v0 and OLM v1's legacy successor rule all evaluate skipRange with it).
//!
//! The facts this parser reproduces, from blang/semver v4.0.0 `range.go`:
//!
//! - The string is cut at single spaces (not tabs) into tokens, except that a space right after
//!   `>`, `<` or `=` does not cut (`> 1.0.0` is one token); spaces inside a token are then
//!   removed. Tokens of one byte are dropped, so `1.2.3 - 2.3.4` reads as `1.2.3 2.3.4`.
//! - A `||` token separates OR groups; every other token is one comparator, ANDed in its group.
//! - A comparator is an operator (`=`, `==`, `!=`, `!`, `>`, `>=`, `<`, `<=` or nothing, which is
//!   `=`) followed by a strict SemVer version; the operator ends at the first digit.
//! - A token containing `x` is expanded first. Only a trailing `x` is a wildcard: `1.2.x` (patch)
//!   and `1.x` (minor); `1.x.x` counts as a patch wildcard because it has three parts. The "flat"
//!   version replaces the first `.x` by `.0` (after folding `.x.x` to `.x`) and pads `1.0` to
//!   `1.0.0`. Then `>=` keeps the flat version, `<` keeps it, `>` becomes `>=` the next
//!   minor/major, `<=` becomes `<` the next minor/major, `=` becomes `>=flat <next`, and `!=`
//!   becomes `<flat >=next`, which is an AND and so matches nothing.
//! - Comparisons are plain SemVer precedence: pre-releases are ordinary versions, build metadata
//!   is ignored.
//!
//! Deliberate differences, on strings no catalog should hold: blang turns an `x` token with an
//! operator outside the list (`~1.2.x`, `v1.x`) into an exact version by accident; POM refuses
//! it. blang builds a range that crashes on use for an empty OR group (`1.0.0 || || 2.0.0`);
//! POM refuses it. A version with two `.x` identifiers (`1.0.0-a.x.b.x`), of which blang
//! rewrites only the first, is refused too: its canonical form would not parse back the same.

use std::fmt;

use semver::{BuildMetadata, Version};

use super::RangeError;
use super::cursor::{char_position, error_at, error_whole};
use crate::version::parse_bundle_version;

/// A blang comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum BlangOp {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
}

impl BlangOp {
    fn from_symbol(symbol: &str) -> Option<BlangOp> {
        Some(match symbol {
            "" | "=" | "==" => BlangOp::Eq,
            "!" | "!=" => BlangOp::Ne,
            ">" => BlangOp::Gt,
            ">=" => BlangOp::Ge,
            "<" => BlangOp::Lt,
            "<=" => BlangOp::Le,
            _ => return None,
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            BlangOp::Eq => "=",
            BlangOp::Ne => "!=",
            BlangOp::Gt => ">",
            BlangOp::Ge => ">=",
            BlangOp::Lt => "<",
            BlangOp::Le => "<=",
        }
    }
}

/// One comparator of a skipRange AND group. The version has no build metadata: blang ignores it
/// when comparing, so it is dropped to make equal ranges compare equal.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct BlangComparator {
    pub(super) op: BlangOp,
    pub(super) version: Version,
}

impl BlangComparator {
    /// Whether `v` passes, by plain SemVer precedence.
    pub(super) fn admits(&self, v: &Version) -> bool {
        let order = v.cmp_precedence(&self.version);
        match self.op {
            BlangOp::Eq => order.is_eq(),
            BlangOp::Ne => order.is_ne(),
            BlangOp::Gt => order.is_gt(),
            BlangOp::Ge => order.is_ge(),
            BlangOp::Lt => order.is_lt(),
            BlangOp::Le => order.is_le(),
        }
    }
}

impl fmt::Display for BlangComparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}{}", self.op.symbol(), self.version)
    }
}

/// The AND groups of a skipRange.
pub(super) type BlangGroups = Vec<Vec<BlangComparator>>;

/// A token of the range and the byte offset where it starts.
struct Token {
    start: usize,
    text: String,
}

/// Parses a whole skipRange.
pub(super) fn parse(input: &str) -> Result<BlangGroups, RangeError> {
    let tokens = tokenize(input);
    if tokens.is_empty() {
        return Err(error_whole(
            input,
            "the range is empty; write at least one comparator such as \">=1.2.0 <1.3.0\""
                .to_owned(),
        ));
    }
    let mut groups: BlangGroups = Vec::new();
    let mut current = Vec::new();
    let last_index = tokens.len() - 1;
    for (index, token) in tokens.iter().enumerate() {
        if token.text == "||" {
            let at = char_position(input, token.start);
            if index == 0 {
                return Err(error_at(
                    input,
                    token.start,
                    format!("the range starts with \"||\" at position {at}"),
                ));
            }
            if index == last_index {
                return Err(error_at(
                    input,
                    token.start,
                    format!("the range ends with \"||\" at position {at}"),
                ));
            }
            if current.is_empty() {
                let reason = format!(
                    "\"||\" at position {at} follows another \"||\" with no comparator between them"
                );
                return Err(error_at(input, token.start, reason));
            }
            groups.push(std::mem::take(&mut current));
            continue;
        }
        current.extend(parse_token(input, token)?);
    }
    groups.push(current);
    Ok(groups)
}

/// Cuts the range into tokens the way blang's `splitAndTrim` does.
fn tokenize(input: &str) -> Vec<Token> {
    let bytes = input.as_bytes();
    let mut tokens = Vec::new();
    let mut start = 0;
    let mut last_non_space: Option<u8> = None;
    let mut push = |start: usize, end: usize| {
        // blang keeps a token only when it is at least two bytes long.
        if end >= start + 2 {
            let raw = input.get(start..end).unwrap_or("");
            tokens.push(Token {
                start,
                text: raw.replace(' ', ""),
            });
        }
    };
    for (index, &byte) in bytes.iter().enumerate() {
        if byte == b' ' {
            if !matches!(last_non_space, Some(b'>' | b'<' | b'=')) {
                push(start, index);
                start = index + 1;
            }
        } else {
            last_non_space = Some(byte);
        }
    }
    push(start, bytes.len());
    tokens
}

/// Parses one comparator token, expanding an `x` wildcard into one or two comparators.
fn parse_token(input: &str, token: &Token) -> Result<Vec<BlangComparator>, RangeError> {
    let at = char_position(input, token.start);
    let text = token.text.as_str();
    let Some(digit) = text.find(|c: char| c.is_ascii_digit()) else {
        let reason = if text.bytes().all(|b| matches!(b, b'<' | b'>' | b'=' | b'!')) {
            format!("operator {text:?} at position {at} has no version")
        } else {
            format!("comparator {text:?} at position {at} has no version number")
        };
        return Err(error_at(input, token.start, reason));
    };
    let (symbol, version_text) = text.split_at(digit);
    let Some(op) = BlangOp::from_symbol(symbol) else {
        let reason = format!(
            "unknown operator {symbol:?} in {text:?} at position {at}; skipRange (blang/semver) accepts \
             = == != ! > >= < <= and no ~, ^ or \"v\" prefix"
        );
        return Err(error_at(input, token.start, reason));
    };
    if !text.contains('x') {
        let version = strict_version(input, token, version_text, None)?;
        return Ok(vec![BlangComparator { op, version }]);
    }
    expand_wildcard(input, token, op, version_text)
}

/// Which trailing part of a blang version is an `x` wildcard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum TrailingWildcard {
    None,
    Minor,
    Patch,
}

/// Expands a token that contains `x`, following blang's `expandWildcardVersion` rules.
fn expand_wildcard(
    input: &str,
    token: &Token,
    op: BlangOp,
    version_text: &str,
) -> Result<Vec<BlangComparator>, RangeError> {
    let parts: Vec<&str> = version_text.split('.').collect();
    let wildcard = match (parts.len(), parts.last()) {
        (2, Some(&"x")) => TrailingWildcard::Minor,
        (3, Some(&"x")) => TrailingWildcard::Patch,
        _ => TrailingWildcard::None,
    };
    let mut flat = version_text
        .replacen(".x.x", ".x", 1)
        .replacen(".x", ".0", 1);
    if flat.split('.').count() == 2 {
        flat.push_str(".0");
    }
    if flat.contains(".x") {
        // blang rewrites only the first `.x`; a second one would be rewritten again when the
        // canonical form is parsed back, so the range could not be shown faithfully.
        let reason = format!(
            "comparator {:?} at position {}: blang rewrites only the first \".x\" of {version_text:?} to \".0\" and \
             keeps the others; write the version without \".x\" identifiers",
            token.text,
            char_position(input, token.start)
        );
        return Err(error_at(input, token.start, reason));
    }
    let next = || -> Result<String, RangeError> { next_version(input, token, &flat, wildcard) };
    let expanded: Vec<(BlangOp, String)> = match op {
        BlangOp::Gt => vec![(BlangOp::Ge, next()?)],
        BlangOp::Ge => vec![(BlangOp::Ge, flat.clone())],
        BlangOp::Lt => vec![(BlangOp::Lt, flat.clone())],
        BlangOp::Le => vec![(BlangOp::Lt, next()?)],
        BlangOp::Eq => vec![(BlangOp::Ge, flat.clone()), (BlangOp::Lt, next()?)],
        BlangOp::Ne => vec![(BlangOp::Lt, flat.clone()), (BlangOp::Ge, next()?)],
    };
    expanded
        .into_iter()
        .map(|(op, text)| {
            let expansion = format!("{}{text}", op.symbol());
            strict_version(input, token, &text, Some(&expansion))
                .map(|version| BlangComparator { op, version })
        })
        .collect()
}

/// The version just above a wildcard: next minor for `1.2.x`, next major for `1.x`.
fn next_version(
    input: &str,
    token: &Token,
    flat: &str,
    wildcard: TrailingWildcard,
) -> Result<String, RangeError> {
    let at = char_position(input, token.start);
    let index = match wildcard {
        TrailingWildcard::Minor => 0,
        TrailingWildcard::Patch => 1,
        TrailingWildcard::None => {
            let reason = format!(
                "comparator {:?} at position {at} contains \"x\" but not as a trailing wildcard (\"1.2.x\" or \"1.x\"), \
                 so its operator cannot be expanded",
                token.text
            );
            return Err(error_at(input, token.start, reason));
        }
    };
    let mut parts: Vec<String> = flat.split('.').map(str::to_owned).collect();
    let bumped = parts
        .get(index)
        .filter(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|part| part.parse::<u64>().ok())
        .and_then(|number| number.checked_add(1));
    match (bumped, parts.get_mut(index)) {
        (Some(bumped), Some(slot)) => {
            *slot = bumped.to_string();
            Ok(parts.join("."))
        }
        _ => {
            let reason = format!(
                "comparator {:?} at position {at}: the part before the \"x\" wildcard is not a number that can be increased",
                token.text
            );
            Err(error_at(input, token.start, reason))
        }
    }
}

/// Parses a comparator's version as blang `Parse` does (strict SemVer) and drops its build.
fn strict_version(
    input: &str,
    token: &Token,
    text: &str,
    expansion: Option<&str>,
) -> Result<Version, RangeError> {
    let mut version = parse_bundle_version(text).map_err(|e| {
        let at = char_position(input, token.start);
        let expanded = expansion
            .map(|e| format!(" (expanded from the wildcard to {e:?})"))
            .unwrap_or_default();
        let reason = format!(
            "comparator {:?} at position {at}{expanded}: {e}",
            token.text
        );
        error_at(input, token.start, reason)
    })?;
    version.build = BuildMetadata::EMPTY;
    Ok(version)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn shape(input: &str) -> String {
        parse(input)
            .unwrap()
            .iter()
            .map(|group| {
                group
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect::<Vec<_>>()
            .join(" || ")
    }

    #[test]
    fn operators() {
        let cases = [
            ("1.0.0", "=1.0.0"),
            ("=1.0.0", "=1.0.0"),
            ("==1.0.0", "=1.0.0"),
            ("!1.0.0", "!=1.0.0"),
            ("!=1.0.0", "!=1.0.0"),
            (">1.0.0", ">1.0.0"),
            (">=1.0.0", ">=1.0.0"),
            ("<1.0.0", "<1.0.0"),
            ("<=1.0.0", "<=1.0.0"),
            ("> 1.0.0  < 2.0.0", ">1.0.0 <2.0.0"),
            (">= 1.0.0", ">=1.0.0"),
            ("<1.0.0+build.5", "<1.0.0"),
            ("<2.0.0 || >=3.0.0", "<2.0.0 || >=3.0.0"),
            (
                ">1.0.0 <3.0.0 !2.0.3-beta.2",
                ">1.0.0 <3.0.0 !=2.0.3-beta.2",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(shape(input), expected, "{input}");
        }
    }

    #[test]
    fn wildcards_expand_as_blang_does() {
        let cases = [
            (">= 1.2.x", ">=1.2.0"),
            ("<= 1.2.x", "<1.3.0"),
            ("> 1.2.x", ">=1.3.0"),
            ("< 1.2.x", "<1.2.0"),
            ("!= 1.2.x", "<1.2.0 >=1.3.0"),
            (">= 1.x", ">=1.0.0"),
            ("<= 1.x", "<2.0.0"),
            ("> 1.x", ">=2.0.0"),
            ("!= 1.x", "<1.0.0 >=2.0.0"),
            ("1.2.x", ">=1.2.0 <1.3.0"),
            ("==1.2.x", ">=1.2.0 <1.3.0"),
            ("1.x", ">=1.0.0 <2.0.0"),
            // Three parts, so blang treats `1.x.x` as a patch wildcard of 1.0.
            ("1.x.x", ">=1.0.0 <1.1.0"),
            // An `x` that is not the trailing part only changes the flat version.
            (">=1.0.0-x", ">=1.0.0-x"),
            (">=1.0.0-rc.x.1", ">=1.0.0-rc.0.1"),
            (">=1.2.x <1.3.0", ">=1.2.0 <1.3.0"),
        ];
        for (input, expected) in cases {
            assert_eq!(shape(input), expected, "{input}");
        }
    }

    #[test]
    fn tokenizer_quirks() {
        // One-byte tokens vanish, so the hyphen of a would-be hyphen range disappears.
        assert_eq!(shape("1.2.3 - 2.3.4"), "=1.2.3 =2.3.4");
        assert_eq!(shape(">=1.0.0 , <2.0.0"), ">=1.0.0 <2.0.0");
        // A space after an operator character does not cut the token.
        assert_eq!(shape("> = 1.0.0"), ">=1.0.0");
        assert_eq!(shape("  <1.0.0   "), "<1.0.0");
        // A trailing one-byte operator is dropped with its token.
        assert_eq!(shape(">=1.0.0 <"), ">=1.0.0");
    }

    #[test]
    fn each_error_says_what_and_where() {
        let cases = [
            ("", "the range is empty"),
            ("  x ", "the range is empty"),
            ("|| 1.0.0", "starts with \"||\" at position 0"),
            ("1.0.0 ||", "ends with \"||\" at position 6"),
            (
                "1.0.0 || || 2.0.0",
                "\"||\" at position 9 follows another \"||\"",
            ),
            (">=1.0.0 <=", "operator \"<=\" at position 8 has no version"),
            ("1.2", "comparator \"1.2\" at position 0"),
            ("<1.0", "comparator \"<1.0\" at position 0"),
            (">1.00.1", "comparator \">1.00.1\" at position 0"),
            ("1.2.X", "comparator \"1.2.X\" at position 0"),
            ("1.2.*", "comparator \"1.2.*\" at position 0"),
            ("*", "the range is empty"),
            (
                "**",
                "comparator \"**\" at position 0 has no version number",
            ),
            ("^1.2.3", "unknown operator \"^\""),
            ("~1.2.3", "unknown operator \"~\""),
            ("~1.2.x", "unknown operator \"~\""),
            ("v1.0.0", "unknown operator \"v\""),
            (
                ">=1.2.3,<2.0.0",
                "comparator \">=1.2.3,<2.0.0\" at position 0",
            ),
            ("1.0.0||2.0.0", "comparator \"1.0.0||2.0.0\" at position 0"),
            (">1.0.0-x", "contains \"x\" but not as a trailing wildcard"),
            ("1.0.0-xyz", "contains \"x\" but not as a trailing wildcard"),
            (">=01.x", "expanded from the wildcard to \">=01.0.0\""),
            (
                "1.18446744073709551615.x",
                "not a number that can be increased",
            ),
            (
                "1.0.0\t<2.0.0",
                "comparator \"1.0.0\\t<2.0.0\" at position 0",
            ),
            (
                "1.0.0 >=x",
                "comparator \">=x\" at position 6 has no version number",
            ),
            (">=1.0.0-a.x.b.x", "rewrites only the first \".x\""),
        ];
        for (input, fragment) in cases {
            let err = parse(input).unwrap_err();
            let message = err.to_string();
            assert!(
                message.starts_with(&format!("invalid version range {input:?}: ")),
                "{message}"
            );
            assert!(message.contains(fragment), "{input:?}: {message}");
        }
    }
}
