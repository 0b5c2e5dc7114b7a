//! Property tests for the range parsers; this is the fuzz target CI runs (2,000 cases each).
//!
//! - parse → display → parse gives an equal range, and displaying again gives the same text;
//! - a range and its displayed form judge every version alike;
//! - no string, however malformed, makes a parser or a version parser panic.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pom_resolver::range::{SkipRange, VersionRange};
use pom_resolver::version::{cmp_version_release, parse_bundle_version, parse_tolerant};
use proptest::prelude::*;
use semver::Version;

const CASES: u32 = 2_000;

/// 2,000 cases per property, or `PROPTEST_CASES` when set (for a longer fuzzing run).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(CASES);
    ProptestConfig {
        cases,
        ..ProptestConfig::default()
    }
}

fn small_number() -> impl Strategy<Value = String> {
    prop_oneof![4 => (0_u64..4).prop_map(|n| n.to_string()), 1 => Just("10".to_owned())]
}

fn prerelease() -> impl Strategy<Value = String> {
    prop::sample::select(vec!["0", "rc.1", "rc.2", "alpha", "beta.2", "1.4.5", "x86"])
        .prop_map(str::to_owned)
}

/// Pre-releases without `x`: blang expands any comparator containing `x` as a wildcard, so
/// `=1.0.0-x86` is an error there (checked in the unit tests), not a range to round-trip.
fn prerelease_without_x() -> impl Strategy<Value = String> {
    prerelease().prop_filter("no x", |pre| !pre.contains('x'))
}

/// A Masterminds version: optional `v`, one to three parts that may be wildcards, optional
/// pre-release and build metadata.
fn masterminds_version() -> impl Strategy<Value = String> {
    let part = prop_oneof![6 => small_number(), 1 => prop::sample::select(vec!["x", "X", "*"]).prop_map(str::to_owned)];
    (
        any::<bool>(),
        prop::collection::vec(part, 1..=3),
        prop::option::of(prerelease()),
        prop::option::of(Just("build.7")),
    )
        .prop_map(|(v, parts, pre, build)| {
            let mut text = if v { "v".to_owned() } else { String::new() };
            text.push_str(&parts.join("."));
            if let Some(pre) = pre {
                text.push('-');
                text.push_str(&pre);
            }
            if let Some(build) = build {
                text.push('+');
                text.push_str(build);
            }
            text
        })
}

fn masterminds_comparator() -> impl Strategy<Value = String> {
    let ops = vec![
        "", "=", "!=", ">", ">=", "=>", "<", "<=", "=<", "~", "~>", "^",
    ];
    (
        prop::sample::select(ops),
        prop::sample::select(vec!["", " "]),
        masterminds_version(),
    )
        .prop_map(|(op, space, version)| format!("{op}{space}{version}"))
}

/// A Masterminds AND group: comparators joined by spaces or commas, or a lone hyphen range.
fn masterminds_group() -> impl Strategy<Value = String> {
    let joints = prop::sample::select(vec![" ", ",", ", ", " , ", "  "]);
    let comparators =
        prop::collection::vec((joints, masterminds_comparator()), 1..=3).prop_map(|items| {
            let mut text = String::new();
            for (index, (joint, comparator)) in items.into_iter().enumerate() {
                if index > 0 {
                    text.push_str(joint);
                }
                text.push_str(&comparator);
            }
            text
        });
    let hyphen =
        (masterminds_version(), masterminds_version()).prop_map(|(a, b)| format!("{a} - {b}"));
    prop_oneof![5 => comparators, 1 => hyphen]
}

fn masterminds_range() -> impl Strategy<Value = String> {
    prop::collection::vec(masterminds_group(), 1..=3).prop_map(|groups| groups.join(" || "))
}

/// A skipRange comparator: a blang operator and a full version or a trailing `x` wildcard.
fn blang_comparator() -> impl Strategy<Value = String> {
    let ops = vec!["", "=", "==", "!", "!=", ">", ">=", "<", "<="];
    let version = prop_oneof![
        3 => (small_number(), small_number(), small_number(), prop::option::of(prerelease_without_x())).prop_map(
            |(a, b, c, pre)| match pre {
                Some(pre) => format!("{a}.{b}.{c}-{pre}"),
                None => format!("{a}.{b}.{c}"),
            }
        ),
        1 => (small_number(), small_number()).prop_map(|(a, b)| format!("{a}.{b}.x")),
        1 => small_number().prop_map(|a| format!("{a}.x")),
    ];
    (
        prop::sample::select(ops),
        prop::sample::select(vec!["", " "]),
        version,
    )
        .prop_map(|(op, space, version)| {
            // blang lets a space follow only `>`, `<` and `=`.
            let space = if op.ends_with(['>', '<', '=']) {
                space
            } else {
                ""
            };
            format!("{op}{space}{version}")
        })
}

fn blang_range() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop::collection::vec(blang_comparator(), 1..=3).prop_map(|c| c.join(" ")),
        1..=3,
    )
    .prop_map(|groups| groups.join(" || "))
}

/// Versions near the ones the ranges name, with and without pre-release and build metadata.
fn candidate_version() -> impl Strategy<Value = Version> {
    (
        0_u64..5,
        0_u64..5,
        0_u64..5,
        prop::option::of(prerelease()),
        any::<bool>(),
    )
        .prop_map(|(major, minor, patch, pre, build)| {
            let mut text = format!("{major}.{minor}.{patch}");
            if let Some(pre) = pre {
                text.push('-');
                text.push_str(&pre);
            }
            if build {
                text.push_str("+b.1");
            }
            Version::parse(&text).unwrap()
        })
}

/// Characters both grammars care about, to reach deep error paths with short strings.
const RANGE_ALPHABET: &str = "[ <>=!~^vVxX*0-9.,|+\\-a-zA-Z\t_é]{0,40}";

/// Checks the round-trip properties of any Masterminds range that parsed.
fn masterminds_round_trip(
    text: &str,
    range: &VersionRange,
    versions: &[Version],
) -> Result<(), TestCaseError> {
    let shown = range.to_string();
    let reparsed = VersionRange::parse(&shown).map_err(|e| {
        TestCaseError::fail(format!(
            "{text:?} displays as {shown:?}, which does not parse: {e}"
        ))
    })?;
    prop_assert_eq!(&reparsed, range, "{:?} displays as {:?}", text, shown);
    prop_assert_eq!(
        reparsed.to_string(),
        shown.clone(),
        "display is not a fixpoint for {:?}",
        text
    );
    for version in versions {
        prop_assert_eq!(
            range.matches(version),
            reparsed.matches(version),
            "{:?} vs {:?} on {}",
            text,
            shown,
            version
        );
    }
    Ok(())
}

fn blang_round_trip(
    text: &str,
    range: &SkipRange,
    versions: &[Version],
) -> Result<(), TestCaseError> {
    let shown = range.to_string();
    let reparsed = SkipRange::parse(&shown).map_err(|e| {
        TestCaseError::fail(format!(
            "{text:?} displays as {shown:?}, which does not parse: {e}"
        ))
    })?;
    prop_assert_eq!(&reparsed, range, "{:?} displays as {:?}", text, shown);
    prop_assert_eq!(
        reparsed.to_string(),
        shown.clone(),
        "display is not a fixpoint for {:?}",
        text
    );
    for version in versions {
        prop_assert_eq!(
            range.contains(version),
            reparsed.contains(version),
            "{:?} vs {:?} on {}",
            text,
            shown,
            version
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn masterminds_display_round_trips(text in masterminds_range(), versions in prop::collection::vec(candidate_version(), 8)) {
        let range = VersionRange::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        masterminds_round_trip(&text, &range, &versions)?;
    }

    #[test]
    fn blang_display_round_trips(text in blang_range(), versions in prop::collection::vec(candidate_version(), 8)) {
        let range = SkipRange::parse(&text).map_err(|e| TestCaseError::fail(e.to_string()))?;
        blang_round_trip(&text, &range, &versions)?;
    }

    #[test]
    fn parsers_never_panic_on_range_like_strings(text in RANGE_ALPHABET, version in candidate_version()) {
        if let Ok(range) = VersionRange::parse(&text) {
            masterminds_round_trip(&text, &range, std::slice::from_ref(&version))?;
        }
        if let Ok(range) = SkipRange::parse(&text) {
            blang_round_trip(&text, &range, std::slice::from_ref(&version))?;
        }
        let strict = parse_bundle_version(&text);
        let tolerant = parse_tolerant(&text);
        if let (Ok(strict), Ok(tolerant)) = (&strict, &tolerant) {
            prop_assert_eq!(strict, tolerant, "a strict version reads the same tolerantly");
        }
    }

    #[test]
    fn parsers_never_panic_on_mutated_valid_ranges(
        text in prop_oneof![masterminds_range(), blang_range()],
        edits in prop::collection::vec((any::<prop::sample::Index>(), prop::sample::select(vec!["", " ", "-", ".", "x", "|", ",", "=", "<", "0", "é"])), 1..4),
        version in candidate_version(),
    ) {
        let mut mutated = text;
        for (index, insert) in edits {
            let boundaries: Vec<usize> = mutated.char_indices().map(|(i, _)| i).chain([mutated.len()]).collect();
            let at = boundaries[index.index(boundaries.len())];
            if insert.is_empty() {
                // Delete the character at `at`, if any.
                if let Some(c) = mutated[at..].chars().next() {
                    mutated.replace_range(at..at + c.len_utf8(), "");
                }
            } else {
                mutated.insert_str(at, insert);
            }
        }
        if let Ok(range) = VersionRange::parse(&mutated) {
            masterminds_round_trip(&mutated, &range, std::slice::from_ref(&version))?;
        }
        if let Ok(range) = SkipRange::parse(&mutated) {
            blang_round_trip(&mutated, &range, std::slice::from_ref(&version))?;
        }
    }

    #[test]
    fn parsers_never_panic_on_any_string(text in any::<String>(), version in candidate_version()) {
        let _ = VersionRange::parse(&text).map(|range| range.matches(&version));
        let _ = SkipRange::parse(&text).map(|range| range.contains(&version));
        let _ = parse_bundle_version(&text);
        let _ = parse_tolerant(&text);
    }

    #[test]
    fn version_release_order_is_a_consistent_total_preorder(a in candidate_version(), b in candidate_version(), c in candidate_version()) {
        use std::cmp::Ordering;
        prop_assert_eq!(cmp_version_release(&a, &b), cmp_version_release(&b, &a).reverse());
        if cmp_version_release(&a, &b) != Ordering::Greater && cmp_version_release(&b, &c) != Ordering::Greater {
            prop_assert_ne!(cmp_version_release(&a, &c), Ordering::Greater);
        }
        if a.cmp_precedence(&b) != Ordering::Equal {
            prop_assert_eq!(cmp_version_release(&a, &b), a.cmp_precedence(&b));
        }
    }
}
