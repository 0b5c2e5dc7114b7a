//! The Masterminds/semver v3 constraint grammar, as OLM v1 accepts it in
//! `ClusterExtension.spec.source.catalog.version` and POM in `versionRange` and pins.
//!
//! ```text
//! range      = group *( "||" group )
//! group      = *space item *( separator item ) *space
//! separator  = 1*space / *space "," *space
//! item       = [op] *space version / version 1*space "-" 1*space version   ; hyphen range
//! op         = "=" / "!=" / ">" / ">=" / "=>" / "<" / "<=" / "=<" / "~" / "~>" / "^"
//! version    = ["v"] part ["." part ["." part]] ["-" ids] ["+" ids]
//! part       = 1*DIGIT / "x" / "X" / "*"
//! ```
//!
//! A bare version is `=`. A hyphen range `A - B` is `>=A <=B`; Masterminds rewrites it in place
//! with a regular expression that swallows the whitespace around it, so it must be joined to
//! other comparators of its group by a comma (`1.0.0 - 2.0.0, !=1.5.0`), never by spaces alone.
//!
//! Differences from Masterminds, all on input the ClusterExtension CRD refuses anyway: numeric
//! parts with leading zeros are refused (Masterminds reads `01` as `1`), and parts written after
//! a wildcard (`1.x.3`) must still be numbers or wildcards (Masterminds ignores them, `|` too).

use semver::Prerelease;

use super::RangeError;
use super::comparator::{Comparator, Op, PartialVersion, Wildcard};
use super::cursor::{Cursor, describe_at, error_at, error_whole, is_space};

/// The AND groups of a range, in order, each with its comparators in order.
pub(super) type Groups = Vec<Vec<Comparator>>;

/// Parses a whole Masterminds range.
pub(super) fn parse(input: &str) -> Result<Groups, RangeError> {
    if input.bytes().all(is_space) {
        return Err(error_whole(
            input,
            "the range is empty; write at least one comparator such as \">=1.2.3\" or \"=1.2.3\""
                .to_owned(),
        ));
    }
    let mut groups = Vec::new();
    let mut start = 0;
    loop {
        let end = input
            .get(start..)
            .and_then(|rest| rest.find("||"))
            .map_or(input.len(), |i| start + i);
        groups.push(parse_group(input, start, end)?);
        if end >= input.len() {
            return Ok(groups);
        }
        start = end + 2;
    }
}

/// How the previous item of a group was joined to the next one.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Joint {
    Start,
    Comma,
    Space,
}

/// Parses the AND group in `input[start..end]`.
fn parse_group(input: &str, start: usize, end: usize) -> Result<Vec<Comparator>, RangeError> {
    let mut cursor = Cursor::new(input, start, end);
    cursor.skip_space();
    if cursor.at_end() {
        let reason = if start == 0 {
            "the range starts with \"||\"; put a comparator before it".to_owned()
        } else if end >= input.len() {
            format!(
                "\"||\" at position {} is not followed by a comparator",
                char_pos(input, start - 2)
            )
        } else {
            format!(
                "\"||\" at position {} is followed by nothing before the next \"||\"",
                char_pos(input, start - 2)
            )
        };
        return Err(error_at(input, start, reason));
    }

    let mut comparators = Vec::new();
    let mut joint = Joint::Start;
    loop {
        let item_start = cursor.pos();
        let item = parse_item(input, &mut cursor)?;
        let is_hyphen = matches!(item, Item::Hyphen(..));
        if is_hyphen && joint == Joint::Space {
            return Err(hyphen_needs_comma(input, item_start));
        }
        match item {
            Item::Single(comparator) => comparators.push(comparator),
            Item::Hyphen(lower, upper) => {
                comparators.push(Comparator::new(Op::Ge, lower));
                comparators.push(Comparator::new(Op::Le, upper));
            }
        }

        let after_item = cursor.pos();
        let spaces = cursor.skip_space();
        if cursor.at_end() {
            return Ok(comparators);
        }
        joint = if cursor.peek() == Some(b',') {
            cursor.bump();
            cursor.skip_space();
            if cursor.at_end() {
                let reason = format!(
                    "the comma at position {} is not followed by a comparator",
                    char_pos(input, after_item)
                );
                return Err(error_at(input, after_item, reason));
            }
            Joint::Comma
        } else if spaces > 0 {
            Joint::Space
        } else {
            let reason = format!(
                "unexpected {} at position {} after \"{}\"; separate comparators with a space or a comma",
                describe_at(input, after_item),
                char_pos(input, after_item),
                slice(input, item_start, after_item),
            );
            return Err(error_at(input, after_item, reason));
        };
        if is_hyphen && joint == Joint::Space {
            return Err(hyphen_needs_comma(input, item_start));
        }
    }
}

fn hyphen_needs_comma(input: &str, at: usize) -> RangeError {
    let reason = format!(
        "the hyphen range at position {} must be joined to the other comparators of its group with a comma \
         (Masterminds rewrites \"A - B\" in place and would glue it to a neighbour joined by spaces only)",
        char_pos(input, at)
    );
    error_at(input, at, reason)
}

/// One item of a group: a comparator, or a hyphen range that becomes two.
enum Item {
    Single(Comparator),
    Hyphen(PartialVersion, PartialVersion),
}

/// Parses `[op] version` or `version - version` at the cursor.
fn parse_item(input: &str, cursor: &mut Cursor<'_>) -> Result<Item, RangeError> {
    let op_start = cursor.pos();
    cursor.eat_while(|b| matches!(b, b'<' | b'>' | b'=' | b'!' | b'~' | b'^'));
    let symbol = slice(input, op_start, cursor.pos());
    let Some(op) = Op::from_symbol(symbol) else {
        let reason = format!(
            "unknown operator {symbol:?} at position {}; use one of = != > >= < <= ~ ^ (or =>, =<, ~>)",
            char_pos(input, op_start)
        );
        return Err(error_at(input, op_start, reason));
    };
    cursor.skip_space();
    if !starts_version(cursor.peek()) {
        let at = cursor.pos();
        if symbol.is_empty() {
            let reason = format!(
                "expected a comparator at position {}, found {}",
                char_pos(input, at),
                describe_at(input, at)
            );
            return Err(error_at(input, at, reason));
        }
        let reason = if cursor.at_end() || matches!(cursor.peek(), Some(b',' | b'|')) {
            format!(
                "operator {symbol:?} at position {} has no version",
                char_pos(input, op_start)
            )
        } else {
            format!(
                "operator {symbol:?} at position {} must be followed by a version, found {} at position {}",
                char_pos(input, op_start),
                describe_at(input, at),
                char_pos(input, at)
            )
        };
        return Err(error_at(input, op_start, reason));
    }
    let version = parse_version(input, cursor)?;

    if symbol.is_empty() && hyphen_follows(cursor) {
        cursor.skip_space();
        let dash = cursor.pos();
        cursor.bump();
        cursor.skip_space();
        if !starts_version(cursor.peek()) {
            let reason = format!(
                "the \"-\" at position {} of a hyphen range has no upper version after it",
                char_pos(input, dash)
            );
            return Err(error_at(input, dash, reason));
        }
        let upper = parse_version(input, cursor)?;
        return Ok(Item::Hyphen(version, upper));
    }
    Ok(Item::Single(Comparator::new(op, version)))
}

/// Whether the cursor is at `<space>+ "-" <space>+`, the middle of a hyphen range.
fn hyphen_follows(cursor: &Cursor<'_>) -> bool {
    let mut offset = 0;
    while cursor.peek_at(offset).is_some_and(is_space) {
        offset += 1;
    }
    offset > 0
        && cursor.peek_at(offset) == Some(b'-')
        && cursor.peek_at(offset + 1).is_some_and(is_space)
}

fn starts_version(b: Option<u8>) -> bool {
    b.is_some_and(|b| b == b'v' || is_part_byte(b))
}

fn is_part_byte(b: u8) -> bool {
    b.is_ascii_digit() || matches!(b, b'x' | b'X' | b'*')
}

fn is_identifier_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

/// Parses `["v"] part ["." part ["." part]] ["-" ids] ["+" ids]` at the cursor.
fn parse_version(input: &str, cursor: &mut Cursor<'_>) -> Result<PartialVersion, RangeError> {
    let start = cursor.pos();
    if cursor.peek() == Some(b'v') {
        cursor.bump();
    }
    let mut parts: Vec<(usize, &str)> = Vec::with_capacity(3);
    loop {
        let part_start = cursor.pos();
        cursor.eat_while(is_part_byte);
        if cursor.pos() == part_start {
            let reason = format!(
                "version \"{}\" at position {} has an empty or invalid part at position {}: expected a number, \"x\", \"X\" or \"*\", found {}",
                slice(input, start, part_start),
                char_pos(input, start),
                char_pos(input, part_start),
                describe_at(input, part_start)
            );
            return Err(error_at(input, part_start, reason));
        }
        parts.push((part_start, slice(input, part_start, cursor.pos())));
        if parts.len() == 3 || cursor.peek() != Some(b'.') {
            break;
        }
        cursor.bump();
    }
    let pre = parse_identifiers(input, cursor, b'-', start)?;
    let _build = parse_identifiers(input, cursor, b'+', start)?;
    let text = slice(input, start, cursor.pos());

    let mut numbers = [0_u64; 3];
    let mut wildcard = Wildcard::None;
    let levels = [Wildcard::Major, Wildcard::Minor, Wildcard::Patch];
    for (index, level) in levels.into_iter().enumerate() {
        let Some(&(part_start, part)) = parts.get(index) else {
            // A missing part opens it, like a wildcard: `1.2` is `1.2.x`.
            if wildcard == Wildcard::None {
                wildcard = level;
            }
            continue;
        };
        let is_wildcard = matches!(part, "x" | "X" | "*");
        if !is_wildcard && !part.bytes().all(|b| b.is_ascii_digit()) {
            let reason = format!(
                "version {text:?} at position {}: {} part {part:?} must be a number or one of \"x\", \"X\", \"*\"",
                char_pos(input, start),
                PART_NAMES[index]
            );
            return Err(error_at(input, part_start, reason));
        }
        if wildcard != Wildcard::None {
            continue; // Parts after a wildcard are ignored, as Masterminds ignores them.
        }
        if is_wildcard {
            wildcard = level;
            continue;
        }
        let value = number(part).map_err(|problem| {
            let reason = format!(
                "version {text:?} at position {}: {} part {part:?} {problem}",
                char_pos(input, start),
                PART_NAMES[index]
            );
            error_at(input, part_start, reason)
        })?;
        if let Some(slot) = numbers.get_mut(index) {
            *slot = value;
        }
    }
    let [major, minor, patch] = numbers;
    let pre = match pre {
        None => Prerelease::EMPTY,
        Some(pre_text) => Prerelease::new(pre_text).map_err(|e| {
            let reason = format!(
                "version {text:?} at position {}: pre-release {pre_text:?}: {e}",
                char_pos(input, start)
            );
            error_at(input, start, reason)
        })?,
    };
    Ok(PartialVersion {
        major,
        minor,
        patch,
        pre,
        wildcard,
    })
}

const PART_NAMES: [&str; 3] = ["major", "minor", "patch"];

/// A numeric part: no leading zero, fits in 64 bits.
fn number(part: &str) -> Result<u64, &'static str> {
    if part.len() > 1 && part.starts_with('0') {
        return Err("has a leading zero");
    }
    part.parse::<u64>().map_err(|_| "does not fit in 64 bits")
}

/// Parses `marker ids` (a pre-release after `-` or build metadata after `+`) if the cursor is at
/// `marker`, and returns the identifiers' text.
fn parse_identifiers<'a>(
    input: &'a str,
    cursor: &mut Cursor<'_>,
    marker: u8,
    version_start: usize,
) -> Result<Option<&'a str>, RangeError> {
    if cursor.peek() != Some(marker) {
        return Ok(None);
    }
    let what = if marker == b'-' {
        "pre-release"
    } else {
        "build metadata"
    };
    cursor.bump();
    let start = cursor.pos();
    loop {
        let id_start = cursor.pos();
        cursor.eat_while(is_identifier_byte);
        if cursor.pos() == id_start {
            let reason = format!(
                "version \"{}\" at position {}: the {what} has an empty identifier at position {} (found {}); \
                 identifiers are non-empty [0-9A-Za-z-] separated by dots",
                slice(input, version_start, id_start),
                char_pos(input, version_start),
                char_pos(input, id_start),
                describe_at(input, id_start)
            );
            return Err(error_at(input, id_start, reason));
        }
        if cursor.peek() != Some(b'.') {
            return Ok(Some(slice(input, start, cursor.pos())));
        }
        cursor.bump();
    }
}

fn slice(input: &str, start: usize, end: usize) -> &str {
    input.get(start..end).unwrap_or("")
}

fn char_pos(input: &str, byte_pos: usize) -> usize {
    super::cursor::char_position(input, byte_pos)
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
    fn operators_and_aliases_fold_to_canonical_symbols() {
        let cases = [
            ("1.2.3", "=1.2.3"),
            ("=1.2.3", "=1.2.3"),
            ("!=1.2.3", "!=1.2.3"),
            (">1.2.3", ">1.2.3"),
            (">=1.2.3", ">=1.2.3"),
            ("=>1.2.3", ">=1.2.3"),
            ("<1.2.3", "<1.2.3"),
            ("<=1.2.3", "<=1.2.3"),
            ("=<1.2.3", "<=1.2.3"),
            ("~1.2.3", "~1.2.3"),
            ("~>1.2.3", "~1.2.3"),
            ("^1.2.3", "^1.2.3"),
            (">= 1.2.3", ">=1.2.3"),
            ("v1.2.3", "=1.2.3"),
            (">=v1.2.3", ">=1.2.3"),
            ("1.2.3+build.1", "=1.2.3"),
            ("1.2.3-rc.1+b", "=1.2.3-rc.1"),
        ];
        for (input, expected) in cases {
            assert_eq!(shape(input), expected, "{input}");
        }
    }

    #[test]
    fn wildcards_and_partial_versions() {
        let cases = [
            ("1.2.x", "=1.2.x"),
            ("1.2.X", "=1.2.x"),
            ("1.2.*", "=1.2.x"),
            ("1.2", "=1.2.x"),
            ("1", "=1.x"),
            ("1.x.x", "=1.x"),
            ("1.x.3", "=1.x"),
            ("*", "*"),
            ("x", "*"),
            ("X.1.2", "*"),
            ("*-beta", "*-beta"),
            ("<= 2.x", "<=2.x"),
            (">1.2", ">1.2.x"),
            // `>=` and `<` ignore wildcards in Masterminds, so they are stored closed.
            (">= 1.2.x", ">=1.2.0"),
            ("<1.x", "<1.0.0"),
            (">=*", ">=0.0.0"),
            ("1.2-1.4.5", "=1.2.x-1.4.5"),
            ("1.x-beta", "=1.x-beta"),
        ];
        for (input, expected) in cases {
            assert_eq!(shape(input), expected, "{input}");
        }
    }

    #[test]
    fn separators_or_groups_and_hyphen_ranges() {
        let cases = [
            (">=3.0, <3.6", ">=3.0.0 <3.6.0"),
            (">=3.0,<3.6", ">=3.0.0 <3.6.0"),
            (">=3.0 <3.6", ">=3.0.0 <3.6.0"),
            (">=3.0 , <3.6", ">=3.0.0 <3.6.0"),
            ("\t>=3.0\n<3.6 ", ">=3.0.0 <3.6.0"),
            ("<1.2.3||>2.3.4", "<1.2.3 || >2.3.4"),
            ("<1.2.3 ||>2.3.4", "<1.2.3 || >2.3.4"),
            (">= 1.2 < 3.0.0 || >= 4.2.3", ">=1.2.0 <3.0.0 || >=4.2.3"),
            ("1.2 - 1.4.5", ">=1.2.0 <=1.4.5"),
            ("2.3.4 - 4.5", ">=2.3.4 <=4.5.x"),
            ("1.0.0 - 2.0.0, !=1.5.0", ">=1.0.0 <=2.0.0 !=1.5.0"),
            ("!=1.5.0, 1.0.0 - 2.0.0", "!=1.5.0 >=1.0.0 <=2.0.0"),
            ("1.0.0 - 2.0.0 || 3.0.0", ">=1.0.0 <=2.0.0 || =3.0.0"),
        ];
        for (input, expected) in cases {
            assert_eq!(shape(input), expected, "{input}");
        }
    }

    #[test]
    fn each_error_says_what_and_where() {
        let cases = [
            ("", "the range is empty"),
            ("   ", "the range is empty"),
            (">=1.2.3 <", "operator \"<\" at position 8 has no version"),
            (">=1.2.3, <", "operator \"<\" at position 9 has no version"),
            (">=", "operator \">=\" at position 0 has no version"),
            ("|| 1.0.0", "starts with \"||\""),
            (
                "1.0.0 ||",
                "\"||\" at position 6 is not followed by a comparator",
            ),
            (
                "1.0.0 || || 2.0.0",
                "\"||\" at position 6 is followed by nothing",
            ),
            (
                "1.0.0,",
                "the comma at position 5 is not followed by a comparator",
            ),
            (
                "1.0.0,,2.0.0",
                "expected a comparator at position 6, found ','",
            ),
            (",1.0.0", "expected a comparator at position 0, found ','"),
            ("==1.2.3", "unknown operator \"==\" at position 0"),
            ("!1.2.3", "unknown operator \"!\" at position 0"),
            ("<<1.2.3", "unknown operator \"<<\" at position 0"),
            (">~1.2.3", "unknown operator \">~\" at position 0"),
            ("=!1.2.3", "unknown operator \"=!\" at position 0"),
            (
                "> =1.2.3",
                "operator \">\" at position 0 must be followed by a version, found '=' at position 2",
            ),
            (
                "invalid-semver",
                "expected a comparator at position 0, found 'i'",
            ),
            ("1.2.3.4", "unexpected '.' at position 5 after \"1.2.3\""),
            ("1.2.3.alpha", "unexpected '.' at position 5"),
            ("1..2.3", "empty or invalid part at position 2"),
            (".1.2.3", "expected a comparator at position 0, found '.'"),
            ("1.2.-3", "empty or invalid part at position 4"),
            ("1.Y", "empty or invalid part at position 2"),
            ("1.2.3-beta!", "unexpected '!' at position 10"),
            ("1.2.3-pre+bad_metadata", "unexpected '_' at position 13"),
            (
                "1.2.3-",
                "the pre-release has an empty identifier at position 6",
            ),
            (
                "1.2.3-a..b",
                "the pre-release has an empty identifier at position 8",
            ),
            (
                "1.2.3+",
                "the build metadata has an empty identifier at position 6",
            ),
            ("1.2.3-01", "pre-release \"01\""),
            ("01.2.3", "major part \"01\" has a leading zero"),
            ("1.02.3", "minor part \"02\" has a leading zero"),
            ("1.2.03", "patch part \"03\" has a leading zero"),
            ("1x.2.3", "major part \"1x\" must be a number"),
            (
                "1.2.99999999999999999999",
                "patch part \"99999999999999999999\" does not fit in 64 bits",
            ),
            (
                ">1.2.3 && <2.3.4",
                "expected a comparator at position 7, found '&'",
            ),
            (">1.2.3;<2.3.4", "unexpected ';' at position 6"),
            (
                ">1.0.0<2.0.0",
                "unexpected '<' at position 6 after \">1.0.0\"",
            ),
            (
                "1.0.0 - ",
                "the \"-\" at position 6 of a hyphen range has no upper version after it",
            ),
            (
                "1.0.0 - >2.0.0",
                "the \"-\" at position 6 of a hyphen range has no upper version after it",
            ),
            (
                ">=1.0.0 - 2.0.0",
                "expected a comparator at position 8, found '-'",
            ),
            (
                "1.0.0 - 2.0.0 <1.5.0",
                "the hyphen range at position 0 must be joined",
            ),
            (
                "<1.5.0 1.0.0 - 2.0.0",
                "the hyphen range at position 7 must be joined",
            ),
            ("V1.2.3", "expected a comparator at position 0, found 'V'"),
            ("1.2.3 ¿", "expected a comparator at position 6, found '¿'"),
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
