//! Version ranges. TEMPORARY CONTRACT STUB: the range helper replaces the bodies.

use std::fmt;

use semver::Version;

/// Why a range string was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid version range {input:?}: {reason}")]
pub struct RangeError {
    pub input: String,
    pub reason: String,
}

/// A Masterminds/semver v3 constraint (admin `versionRange`, pins).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionRange {
    text: String,
}

impl VersionRange {
    /// Parses Masterminds v3 syntax.
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        Err(RangeError { input: input.to_owned(), reason: "not implemented".to_owned() })
    }
    /// Masterminds v3 evaluation (pre-releases admitted only when a comparator of the AND group
    /// carries one; build metadata ignored).
    pub fn matches(&self, _version: &Version) -> bool {
        false
    }
}

impl fmt::Display for VersionRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// A blang/semver range (catalog `skipRange`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkipRange {
    text: String,
}

impl SkipRange {
    /// Parses blang/semver v4 `ParseRange` syntax.
    pub fn parse(input: &str) -> Result<Self, RangeError> {
        Err(RangeError { input: input.to_owned(), reason: "not implemented".to_owned() })
    }
    /// blang evaluation (plain precedence, pre-releases not special).
    pub fn contains(&self, _version: &Version) -> bool {
        false
    }
}

impl fmt::Display for SkipRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}
