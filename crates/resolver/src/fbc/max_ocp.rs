//! `olm.maxOpenShiftVersion`, decoded exactly as OLM v0 does (contracts §5.1).
//!
//! OLM v0 takes the property's raw JSON, trims `"` from both ends, parses the rest with blang's
//! `ParseTolerant` and requires the result to equal its `major.minor` truncation. Anything else,
//! and a second copy of the property, makes the bundle "invalid", which blocks cluster minor
//! updates (fail closed). POM keeps invalid values as data rather than refusing the catalog, so
//! the verdict can name the bundle and the reason.

use serde_json::value::RawValue;

use super::model::MaxOpenShiftVersion;

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
        [raw] => Some(match parse_major_minor(raw) {
            Ok((major, minor)) => MaxOpenShiftVersion::Valid { major, minor },
            Err(reason) => MaxOpenShiftVersion::Invalid {
                raw: raw.clone(),
                reason,
            },
        }),
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
    fn raw_text_trims_quotes_and_keeps_numbers_as_written() {
        let raw = |text: &str| raw_text(&RawValue::from_string(text.to_owned()).unwrap());
        assert_eq!(raw(r#""\"4.9\"""#), "4.9");
        assert_eq!(raw(r#""4.9""#), "4.9");
        assert_eq!(raw("4.9"), "4.9");
        assert_eq!(raw("4.10"), "4.10");
        assert_eq!(raw("4"), "4");
    }
}
