//! `olm.maxOpenShiftVersion`, decoded exactly as OLM v0 does (contracts §5.1).
//!
//! OLM v0 takes the property's raw JSON, trims `"` from both ends, parses the rest with blang's
//! `ParseTolerant` and requires the result to equal its `major.minor` truncation. Anything else,
//! and a second copy of the property, makes the bundle "invalid", which blocks cluster minor
//! updates (fail closed). POM keeps invalid values as data rather than refusing the catalog, so
//! the verdict can name the bundle and the reason.
//!
//! [`MaxOpenShiftVersion::parse`] is the one decoding of the property's text, used by the catalog
//! parser here and meant for every other reader (the manager reading back
//! `status.maxOpenShiftVersion`, `pomctl plan`), so that no two parts of POM can disagree on
//! whether a value such as `v4.16` is valid. Its [`Display`](std::fmt::Display) prints the
//! canonical `X.Y` of a valid value (what status shows) and the raw text of an invalid one, and
//! `parse` reads both back to the same value.

use std::fmt;

use serde_json::value::RawValue;

use super::model::MaxOpenShiftVersion;

impl MaxOpenShiftVersion {
    /// Decodes one `olm.maxOpenShiftVersion` value as OLM v0 does: surrounding `"` trimmed (OLM
    /// trims them from the raw JSON), then blang `ParseTolerant` (surrounding spaces, a leading
    /// `v`, leading zeros and a missing minor or patch tolerated), then "must be exactly
    /// major.minor" (a non-zero patch or a pre-release is invalid; build metadata is ignored).
    ///
    /// Never fails: anything unusable is [`MaxOpenShiftVersion::Invalid`] carrying `text` as
    /// given and the reason, because an invalid value must block minor updates (fail closed)
    /// and be named in the message, not be dropped. Accepted: `4.16`, `v4.16`, `4.16.0`,
    /// ` 4.16 `, `04.16`, `4`, `4.16.0+build`, `"4.16"`. Invalid: `4.16.1`, `4.16.0-rc.1`,
    /// `4.x`, `four` and the empty string.
    pub fn parse(text: &str) -> MaxOpenShiftVersion {
        match parse_major_minor(text.trim_matches('"')) {
            Ok((major, minor)) => MaxOpenShiftVersion::Valid { major, minor },
            Err(reason) => MaxOpenShiftVersion::Invalid {
                raw: text.to_owned(),
                reason,
            },
        }
    }
}

/// `X.Y` for a valid value (as `status.maxOpenShiftVersion` shows it), the raw text for an
/// invalid one; [`MaxOpenShiftVersion::parse`] reads either back to an equal value.
impl fmt::Display for MaxOpenShiftVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MaxOpenShiftVersion::Valid { major, minor } => write!(f, "{major}.{minor}"),
            MaxOpenShiftVersion::Invalid { raw, .. } => f.write_str(raw),
        }
    }
}

/// The text OLM sees for a property value: the raw JSON with surrounding quotes trimmed.
///
/// A JSON string is unescaped first (then trimmed of quotes it may itself carry). Anything else
/// is used as written: a JSON number `4.10` stays `4.10`, as in OLM, which reads the raw bytes.
/// Values from YAML were printed back from a parsed tree, so there a number `4.10` reads `4.1`;
/// real catalogs quote the value.
pub(crate) fn raw_text(value: &RawValue) -> String {
    let text = value.get();
    if text.starts_with('"')
        && let Ok(unescaped) = serde_json::from_str::<String>(text)
    {
        return unescaped.trim_matches('"').to_owned();
    }
    text.trim_matches('"').to_owned()
}

/// Decodes every `olm.maxOpenShiftVersion` value of one bundle (in property order).
pub(crate) fn decode(raws: &[String]) -> Option<MaxOpenShiftVersion> {
    match raws {
        [] => None,
        [raw] => Some(MaxOpenShiftVersion::parse(raw)),
        several => Some(MaxOpenShiftVersion::Invalid {
            raw: several.join(", "),
            reason: format!(
                "olm.maxOpenShiftVersion is defined {} times; OLM allows it once",
                several.len()
            ),
        }),
    }
}

/// blang `ParseTolerant` followed by OLM's "must be exactly major.minor" check.
fn parse_major_minor(raw: &str) -> Result<(u64, u64), String> {
    if raw.is_empty() {
        return Err("the value is empty".to_owned());
    }
    let text = raw.trim();
    let text = text.strip_prefix('v').unwrap_or(text);
    let mut parts: Vec<String> = text.splitn(3, '.').map(strip_leading_zeros).collect();
    if parts.len() < 3 {
        if parts.last().is_some_and(|p| p.contains(['+', '-'])) {
            return Err(format!(
                "{raw:?} is a short version with a pre-release or build suffix"
            ));
        }
        parts.resize(3, "0".to_owned());
    }
    let normalized = parts.join(".");
    let version = semver::Version::parse(&normalized)
        .map_err(|e| format!("{raw:?} is not a version ({e})"))?;
    if version.patch != 0 || !version.pre.is_empty() {
        return Err(format!(
            "{raw:?} must name only a major.minor version such as \"4.16\" (OLM rejects a patch or \
             pre-release)"
        ));
    }
    Ok((version.major, version.minor))
}

/// blang removes leading zeros from each dot-separated part before parsing.
fn strip_leading_zeros(part: &str) -> String {
    if part.len() <= 1 {
        return part.to_owned();
    }
    let trimmed = part.trim_start_matches('0');
    if trimmed.starts_with(|c: char| c.is_ascii_digit()) {
        trimmed.to_owned()
    } else {
        format!("0{trimmed}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Every valid value survives printing and parsing (what status stores and the manager
        /// reads back), whatever the numbers.
        #[test]
        fn valid_values_round_trip(major in 0u64..100_000, minor in 0u64..100_000) {
            let value = MaxOpenShiftVersion::Valid { major, minor };
            prop_assert_eq!(MaxOpenShiftVersion::parse(&value.to_string()), value);
        }

        /// Printing and parsing back any decoded value gives the same value: a valid one by its
        /// canonical `X.Y`, an invalid one by its raw text (and the same reason).
        #[test]
        fn parse_of_display_is_idempotent(text in "[ v\"0-9.+a-z-]{0,12}") {
            let once = MaxOpenShiftVersion::parse(&text);
            prop_assert_eq!(MaxOpenShiftVersion::parse(&once.to_string()), once);
        }

        /// Equivalent spellings OLM accepts decode to the same value as the canonical one.
        #[test]
        fn tolerant_spellings_match_the_canonical_one(major in 0u64..1_000, minor in 0u64..1_000) {
            let canonical = MaxOpenShiftVersion::parse(&format!("{major}.{minor}"));
            for spelling in [
                format!("v{major}.{minor}"),
                format!("{major}.{minor}.0"),
                format!(" {major}.{minor} "),
                format!("\"{major}.{minor}\""),
            ] {
                prop_assert_eq!(&MaxOpenShiftVersion::parse(&spelling), &canonical, "{}", spelling);
            }
        }
    }

    fn one(raw: &str) -> Option<MaxOpenShiftVersion> {
        decode(&[raw.to_owned()])
    }

    #[test]
    fn olm_v0_rules() {
        let valid = |major, minor| Some(MaxOpenShiftVersion::Valid { major, minor });
        assert_eq!(one("4.9"), valid(4, 9));
        assert_eq!(one("4.9.0"), valid(4, 9));
        assert_eq!(one("v4.12"), valid(4, 12));
        assert_eq!(one(" 4.16 "), valid(4, 16));
        assert_eq!(one("04.09"), valid(4, 9));
        assert_eq!(one("4"), valid(4, 0));
        assert_eq!(one("4.9.0+build"), valid(4, 9));
        for bad in [
            "4.9.1",
            "",
            "4.9.0-rc1",
            "four",
            "4.9-rc1",
            "4.x",
            "4.9.0.1",
        ] {
            assert!(
                matches!(one(bad), Some(MaxOpenShiftVersion::Invalid { .. })),
                "{bad}"
            );
        }
        assert!(matches!(
            decode(&["4.9".to_owned(), "4.9".to_owned()]),
            Some(MaxOpenShiftVersion::Invalid { .. })
        ));
        assert_eq!(decode(&[]), None);
    }

    #[test]
    fn parse_is_the_decoder_and_display_is_canonical() {
        let valid = |major, minor| MaxOpenShiftVersion::Valid { major, minor };
        for (text, expected) in [
            ("4.16", valid(4, 16)),
            ("v4.16", valid(4, 16)),
            ("4.16.0", valid(4, 16)),
            (" 4.16 ", valid(4, 16)),
            ("\"4.16\"", valid(4, 16)),
            ("04.09", valid(4, 9)),
            ("4", valid(4, 0)),
            ("5.0", valid(5, 0)),
            ("4.9.0+build", valid(4, 9)),
        ] {
            assert_eq!(MaxOpenShiftVersion::parse(text), expected, "{text:?}");
            assert_eq!(one(text), Some(expected.clone()), "{text:?}");
        }
        assert_eq!(valid(4, 16).to_string(), "4.16");
        assert_eq!(MaxOpenShiftVersion::parse("v4.16").to_string(), "4.16");
        for bad in ["4.16.1", "", "4.16.0-rc.1", "4.x", "four", "4.9.0.1"] {
            let parsed = MaxOpenShiftVersion::parse(bad);
            assert!(
                matches!(&parsed, MaxOpenShiftVersion::Invalid { raw, .. } if raw == bad),
                "{bad:?}: {parsed:?}"
            );
            assert_eq!(parsed.to_string(), bad);
            assert_eq!(MaxOpenShiftVersion::parse(&parsed.to_string()), parsed);
        }
    }

    #[test]
    fn raw_text_trims_quotes_and_keeps_numbers_as_written() {
        let raw = |text: &str| raw_text(&RawValue::from_string(text.to_owned()).unwrap());
        assert_eq!(raw(r#""\"4.9\"""#), "4.9");
        assert_eq!(raw(r#""4.9""#), "4.9");
        assert_eq!(raw("4.9"), "4.9");
        assert_eq!(raw("4.10"), "4.10");
        assert_eq!(raw("4"), "4");
    }
}
