//! Table tests for range evaluation. Each row is (range, versions that match, versions that do
//! not); the upstream-derived cases live in `tests/version_ranges.rs`, these pin down the rules
//! those cases leave open.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use semver::Version;

use super::{SkipRange, VersionRange};

fn v(s: &str) -> Version {
    Version::parse(s).unwrap()
}

fn check_masterminds(rows: &[(&str, &[&str], &[&str])]) {
    let mut failures = Vec::new();
    for (range_text, matches, rejects) in rows {
        let range = VersionRange::parse(range_text).unwrap();
        for version in *matches {
            if !range.matches(&v(version)) {
                failures.push(format!("{range_text:?} should match {version}"));
            }
        }
        for version in *rejects {
            if range.matches(&v(version)) {
                failures.push(format!("{range_text:?} should reject {version}"));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn each_operator_on_full_versions() {
    check_masterminds(&[
        (
            "=1.2.3",
            &["1.2.3", "1.2.3+b"],
            &["1.2.2", "1.2.4", "1.2.3-rc.1"],
        ),
        ("1.2.3", &["1.2.3"], &["1.2.4"]),
        (
            "!=1.2.3",
            &["1.2.2", "1.2.4"],
            &["1.2.3", "1.2.3+b", "1.2.4-rc.1"],
        ),
        (
            ">1.2.3",
            &["1.2.4", "2.0.0"],
            &["1.2.3", "1.2.3+b", "1.3.0-rc.1"],
        ),
        (">=1.2.3", &["1.2.3", "1.2.4"], &["1.2.2", "1.2.4-rc.1"]),
        ("<1.2.3", &["1.2.2", "0.0.0"], &["1.2.3", "1.2.3-rc.1"]),
        (
            "<=1.2.3",
            &["1.2.3", "1.2.3+b", "0.1.0"],
            &["1.2.4", "1.2.3-rc.1"],
        ),
        ("=>1.2.3", &["1.2.3"], &["1.2.2"]),
        ("=<1.2.3", &["1.2.3"], &["1.2.4"]),
    ]);
}

#[test]
fn wildcards_per_operator() {
    check_masterminds(&[
        (
            "1.2.x",
            &["1.2.0", "1.2.99"],
            &["1.1.9", "1.3.0", "1.2.5-rc.1"],
        ),
        ("1.x", &["1.0.0", "1.99.0"], &["0.9.0", "2.0.0"]),
        ("*", &["0.0.0", "99.0.0"], &["1.0.0-rc.1"]),
        (">1.2", &["1.3.0", "2.0.0"], &["1.2.9", "1.2.0"]),
        (">1.x", &["2.0.0"], &["1.9.9"]),
        (">*", &["0.0.1", "1.0.0"], &["0.0.0"]),
        ("<=1.2", &["1.2.9", "0.5.0"], &["1.3.0"]),
        ("<= 2.x", &["2.9.9"], &["3.0.0"]),
        ("<=*", &["0.0.0", "0.0.7"], &["0.1.0", "1.0.0"]),
        (">=1.2.x", &["1.2.0"], &["1.1.9"]),
        ("<1.2.x", &["1.1.9"], &["1.2.0"]),
        ("<1.x", &["0.9.9"], &["1.0.0"]),
        ("!=1.x", &["0.9.9", "2.0.0"], &["1.0.0", "1.9.9"]),
        ("!=1.2.x", &["1.1.9", "1.3.0", "2.2.0"], &["1.2.0", "1.2.9"]),
        ("!=*", &["0.0.1", "1.0.0"], &["0.0.0"]),
    ]);
}

#[test]
fn tilde_rules() {
    check_masterminds(&[
        ("~1.2.3", &["1.2.3", "1.2.9"], &["1.2.2", "1.3.0"]),
        ("~1.2", &["1.2.0", "1.2.9"], &["1.1.9", "1.3.0"]),
        ("~1", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("~0.2.3", &["0.2.3", "0.2.9"], &["0.2.2", "0.3.0"]),
        ("~0", &["0.0.0", "0.9.9"], &["1.0.0"]),
        ("~0.0", &["0.0.0", "0.0.9"], &["0.1.0"]),
        // `~0.0.0` and `~*` are "anything" in Masterminds.
        ("~0.0.0", &["0.0.0", "5.0.0"], &["1.0.0-rc.1"]),
        ("~*", &["0.0.0", "5.0.0"], &[]),
        ("~>1.2.3", &["1.2.4"], &["1.3.0"]),
    ]);
}

#[test]
fn caret_rules_including_zero_major() {
    check_masterminds(&[
        ("^1.2.3", &["1.2.3", "1.9.9"], &["1.2.2", "2.0.0"]),
        ("^1.2", &["1.2.0", "1.9.9"], &["1.1.9", "2.0.0"]),
        ("^1", &["1.0.0", "1.9.9"], &["0.9.9", "2.0.0"]),
        ("^0.2.3", &["0.2.3", "0.2.9"], &["0.2.2", "0.3.0", "1.0.0"]),
        ("^0.2", &["0.2.0", "0.2.9"], &["0.1.9", "0.3.0"]),
        (
            "^0.0.3",
            &["0.0.3", "0.0.3+b"],
            &["0.0.2", "0.0.4", "0.1.3", "1.0.3"],
        ),
        ("^0.0.0", &["0.0.0"], &["0.0.1", "0.1.0"]),
        ("^0.0", &["0.0.0", "0.0.9"], &["0.1.0"]),
        ("^0.0.x", &["0.0.0", "0.0.9"], &["0.1.0"]),
        ("^0", &["0.0.0", "0.9.9"], &["1.0.0"]),
        ("^0.x", &["0.0.0", "0.9.9"], &["1.0.0"]),
        // Masterminds' code (not its comment) makes `^*` the `^0.0.0` rule.
        ("^*", &["0.0.0"], &["0.0.1", "1.0.0"]),
    ]);
}

#[test]
fn prerelease_admission_is_per_and_group() {
    check_masterminds(&[
        // A `-0` upper bound admits pre-releases below it and none of the bound's own.
        (
            "<1.3.0-0",
            &["1.2.9", "1.2.9-rc.1"],
            &["1.3.0-rc.1", "1.3.0-0", "1.3.0"],
        ),
        (
            ">=1.2.3 <1.3.0-0",
            &["1.2.4-rc.1", "1.2.3"],
            &["1.2.3-rc.1", "1.3.0-0"],
        ),
        (">=1.2.3 <1.3.0", &["1.2.9"], &["1.2.4-rc.1", "1.3.0-rc.1"]),
        (">=1.2.3-0 <1.3.0", &["1.2.3-0", "1.3.0-rc.1"], &["1.2.2"]),
        // Only the group that carries a pre-release admits them.
        (
            ">=2.0.0-0 || >=1.0.0",
            &["2.0.0-rc.1", "1.5.0"],
            &["1.5.0-rc.1"],
        ),
        (">=1.0.0 || >=2.0.0-0", &["2.0.0-rc.1"], &["1.5.0-rc.1"]),
        (
            "=1.2.3-rc.1",
            &["1.2.3-rc.1", "1.2.3-rc.1+b"],
            &["1.2.3-rc.2", "1.2.3"],
        ),
        (
            "!=1.2.x-beta",
            &["1.2.5-rc.1", "1.3.0-beta"],
            &["1.2.5-beta", "1.2.0-beta"],
        ),
        (
            "~1.2.3-beta",
            &["1.2.3-beta", "1.2.9-rc.1", "1.2.3"],
            &["1.2.3-alpha", "1.3.0-rc.1"],
        ),
        (
            "^0.2.3-rc.1",
            &["0.2.3-rc.1", "0.2.9-alpha"],
            &["0.3.0-alpha", "0.2.3-rc.0"],
        ),
        (
            "1.2-1.4.5",
            &["1.2.0-1.4.5", "1.2.0", "1.2.7-a"],
            &["1.3.0", "1.2.0-1.4.4"],
        ),
    ]);
}

#[test]
fn build_metadata_is_ignored_on_both_sides() {
    check_masterminds(&[
        ("1.0.0+1", &["1.0.0", "1.0.0+1", "1.0.0+2"], &["1.0.1"]),
        ("<1.0.0+5", &["0.9.9"], &["1.0.0", "1.0.0+1"]),
        (">1.0.0+5", &["1.0.1"], &["1.0.0+9"]),
    ]);
    assert_eq!(
        VersionRange::parse("1.0.0+1").unwrap(),
        VersionRange::parse("=1.0.0").unwrap()
    );
}

#[test]
fn hyphen_ranges_are_inclusive_with_wildcard_upper_bounds() {
    check_masterminds(&[
        ("1.2 - 1.4.5", &["1.2.0", "1.4.5"], &["1.1.9", "1.4.6"]),
        ("2.3.4 - 4.5", &["2.3.4", "4.5.9"], &["2.3.3", "4.6.0"]),
        ("1.0.0 - 2.0.0, !=1.5.0", &["1.4.0", "2.0.0"], &["1.5.0"]),
    ]);
}

#[test]
fn pins_print_as_written_and_mean_what_they_say() {
    for pin in ["=1.2.3", ">=1.2.3 <1.3.0-0", ">=1.2.3 <2.0.0-0"] {
        assert_eq!(VersionRange::parse(pin).unwrap().to_string(), pin);
    }
}

#[test]
fn display_is_canonical_and_reparses_equal() {
    let cases = [
        ("1.2.3", "=1.2.3"),
        (" >= v1.2 , < 2 ", ">=1.2.0 <2.0.0"),
        ("=>1.2.3 || =<1.0.0||~>2.1", ">=1.2.3 || <=1.0.0 || ~2.1.x"),
        ("X", "*"),
        ("^0.x", "^0.x"),
        ("1.2 - 1.4.5", ">=1.2.0 <=1.4.5"),
    ];
    for (input, canonical) in cases {
        let range = VersionRange::parse(input).unwrap();
        assert_eq!(range.to_string(), canonical, "{input}");
        assert_eq!(VersionRange::parse(canonical).unwrap(), range, "{input}");
    }
    for (input, canonical) in [
        ("1.2.x", ">=1.2.0 <1.3.0"),
        ("!1.0.0 || 2.0.0+b", "!=1.0.0 || =2.0.0"),
    ] {
        let range = SkipRange::parse(input).unwrap();
        assert_eq!(range.to_string(), canonical, "{input}");
        assert_eq!(SkipRange::parse(canonical).unwrap(), range, "{input}");
    }
}

#[test]
fn skip_range_uses_plain_precedence() {
    let range = SkipRange::parse(">=1.2.x <1.3.0").unwrap();
    assert!(
        range.contains(&v("1.3.0-rc.1")),
        "pre-releases are ordinary versions"
    );
    assert!(range.contains(&v("1.2.5-beta.1")));
    assert!(!range.contains(&v("1.2.0-rc.1")));
    assert!(range.contains(&v("1.2.0+build")));
    assert!(
        !SkipRange::parse("!= 1.x").unwrap().contains(&v("5.0.0")),
        "expansion is an AND"
    );
    assert!(
        !SkipRange::parse("1.2.3 - 2.3.4")
            .unwrap()
            .contains(&v("1.2.3")),
        "two exact versions ANDed"
    );
}

#[test]
fn from_str_and_serde_use_the_string_form() {
    let range: VersionRange = ">= 1.2, <2".parse().unwrap();
    let json = serde_json::to_string(&range).unwrap();
    assert_eq!(json, r#"">=1.2.0 <2.0.0""#);
    assert_eq!(serde_json::from_str::<VersionRange>(&json).unwrap(), range);
    let err = serde_json::from_str::<VersionRange>(r#""<""#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("operator \"<\" at position 0 has no version"),
        "{err}"
    );

    let skip: SkipRange = ">=4.1.0 <4.1.2".parse().unwrap();
    let json = serde_json::to_string(&skip).unwrap();
    assert_eq!(serde_json::from_str::<SkipRange>(&json).unwrap(), skip);
    assert!(serde_json::from_str::<SkipRange>(r#""~1.0.0""#).is_err());
}

#[test]
fn errors_carry_the_position() {
    let err = VersionRange::parse(">=1.2.3 <").unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid version range ">=1.2.3 <": operator "<" at position 8 has no version"#
    );
    assert_eq!(err.position, Some(8));
    assert_eq!(err.input, ">=1.2.3 <");
    let err = VersionRange::parse("é >=1 <").unwrap_err();
    assert_eq!(err.position, Some(0), "{err}");
    let err = VersionRange::parse(">=1 é").unwrap_err();
    assert_eq!(err.position, Some(4), "positions count characters: {err}");
}
