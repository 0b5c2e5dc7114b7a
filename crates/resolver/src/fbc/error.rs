//! Everything that makes a catalog unusable, each naming where and what to do.
//!
//! A catalog that fails here is refused as a whole (as operator-registry refuses it): resolving
//! against half a catalog could pick a bundle the full catalog would never offer. Oddities that
//! real catalogs ship with (dangling `replaces`, unsorted entries, build metadata) are not errors.

use super::model::Origin;

/// Formats an origin as `file:line` (or `file` when the line is unknown).
pub(crate) fn at(origin: &Origin) -> String {
    match origin.line {
        Some(line) => format!("{}:{line}", origin.file),
        None => origin.file.to_string(),
    }
}

/// Why a file-based catalog could not be read or is invalid.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FbcError {
    /// The path (or something under it) could not be read.
    #[error("cannot read {path}: {reason}; check that the catalog path exists and is readable")]
    Io { path: String, reason: String },

    /// A file is not valid JSON (line and column point at the problem).
    #[error(
        "{}:{column}: malformed JSON: {reason}; a catalog file holds JSON objects one after \
         another (or YAML documents separated by `---`)",
        at(.origin)
    )]
    MalformedJson {
        origin: Origin,
        column: usize,
        reason: String,
    },

    /// A file is not valid YAML (line and column point at the problem).
    #[error(
        "{}:{column}: malformed YAML: {reason}; fix the document (YAML documents are separated \
         by `---`)",
        at(.origin)
    )]
    MalformedYaml {
        origin: Origin,
        column: usize,
        reason: String,
    },

    /// YAML anchors and aliases in this catalog expand to more than the catalog-wide budget
    /// (`MAX_CATALOG_ALIAS_EVENTS`), counted across all its files and documents.
    #[error(
        "{}: YAML aliases in this catalog expand to more than {limit} events in total \
         (limit MAX_CATALOG_ALIAS_EVENTS); write the content out instead of using anchors and \
         aliases (opm never writes them)",
        at(.origin)
    )]
    AliasBudgetExceeded { origin: Origin, limit: usize },

    /// A blob is well-formed but a field has the wrong shape, or two keys collide.
    #[error("{}: invalid {what}: {reason}", at(.origin))]
    InvalidBlob {
        origin: Origin,
        what: String,
        reason: String,
    },

    /// A blob has no `schema`, so nothing can tell what it is.
    #[error(
        "{}: blob has no `schema` field; every catalog blob needs one (olm.package, \
         olm.channel, olm.bundle, olm.deprecations or a custom schema)",
        at(.origin)
    )]
    MissingSchema { origin: Origin },

    /// A required field of a known schema is absent or empty.
    #[error("{}: {schema} blob has no `{field}`; add it", at(.origin))]
    MissingField {
        origin: Origin,
        schema: String,
        field: String,
    },

    /// A channel, bundle or deprecations blob names a package no `olm.package` blob declares.
    #[error(
        "{}: {schema} {name:?} belongs to package {package:?}, but the catalog has no \
         olm.package blob named {package:?}; add the package blob or fix the `package` field",
        at(.origin)
    )]
    UnknownPackage {
        origin: Origin,
        schema: String,
        name: String,
        package: String,
    },

    /// Two `olm.package` blobs with the same name.
    #[error(
        "{}: package {package:?} is declared twice (first at {}); keep one olm.package blob",
        at(.second), at(.first)
    )]
    DuplicatePackage {
        package: String,
        first: Origin,
        second: Origin,
    },

    /// Two `olm.channel` blobs with the same (case-sensitive) name in one package (`name` is
    /// the channel). Boxed to keep parser `Result`s under clippy's `result_large_err` limit.
    #[error(
        "{}: channel {:?} of package {:?} is declared twice (first at {}); merge the two \
         olm.channel blobs",
        at(&.0.second), .0.name, .0.package, at(&.0.first)
    )]
    DuplicateChannel(Box<DuplicateDetail>),

    /// Two `olm.bundle` blobs with the same name in one package (`name` is the bundle). Boxed
    /// like [`FbcError::DuplicateChannel`].
    #[error(
        "{}: bundle {:?} of package {:?} is declared twice (first at {}); bundle names must be \
         unique within a package",
        at(&.0.second), .0.name, .0.package, at(&.0.first)
    )]
    DuplicateBundle(Box<DuplicateDetail>),

    /// Two `olm.deprecations` blobs for one package.
    #[error(
        "{}: package {package:?} has two olm.deprecations blobs (first at {}); merge them \
         into one",
        at(.second), at(.first)
    )]
    DuplicateDeprecations {
        package: String,
        first: Origin,
        second: Origin,
    },

    /// A channel lists the same bundle twice.
    #[error(
        "{}: channel {channel:?} of package {package:?} lists entry {entry:?} twice; keep one",
        at(.origin)
    )]
    DuplicateChannelEntry {
        origin: Origin,
        package: String,
        channel: String,
        entry: String,
    },

    /// A channel entry names a bundle the package does not have.
    #[error(
        "{}: channel {channel:?} of package {package:?} has entry {entry:?}, but the package \
         has no olm.bundle named {entry:?}; add the bundle or remove the entry",
        at(.origin)
    )]
    UnknownBundle {
        origin: Origin,
        package: String,
        channel: String,
        entry: String,
    },

    /// A channel has no single head (the entry nothing replaces or skips).
    #[error(
        "{}: channel {channel:?} of package {package:?} {}; exactly one entry must be neither \
         replaced nor skipped by another (add `replaces`/`skips` so one entry leads)",
        at(.origin), describe_heads(.heads)
    )]
    ChannelHeads {
        origin: Origin,
        package: String,
        channel: String,
        heads: Vec<String>,
    },

    /// Following `replaces` within a channel comes back to where it started.
    #[error(
        "{}: channel {channel:?} of package {package:?} has a replaces cycle {}; an upgrade \
         graph must not loop, so fix a `replaces` field on that cycle",
        at(.origin), .cycle.join(" -> ")
    )]
    ReplacesCycle {
        origin: Origin,
        package: String,
        channel: String,
        cycle: Vec<String>,
    },

    /// A `skipRange` does not parse as a blang/semver range. Boxed: with the six names it
    /// carries, the variant alone made every parser `Result` larger than clippy's
    /// `result_large_err` limit.
    #[error(
        "{}: channel {:?} of package {:?}, entry {:?}: invalid skipRange {:?}: {}; use blang \
         ranges such as \">=1.2.0 <1.3.0\"",
        at(&.0.origin), .0.channel, .0.package, .0.entry, .0.range, .0.reason
    )]
    InvalidSkipRange(Box<InvalidSkipRangeDetail>),

    /// A package whose `defaultChannel` is missing or names no channel of it (operator-registry
    /// refuses both: "default channel must be set", "invalid channel ...: channel must contain
    /// at least one bundle").
    #[error(
        "{}: package {package:?} {}; set `defaultChannel` to one of its channels",
        at(.origin), describe_default_channel(.default_channel.as_deref(), .channels)
    )]
    DefaultChannel {
        origin: Origin,
        package: String,
        default_channel: Option<String>,
        /// The package's channels, sorted.
        channels: Vec<String>,
    },

    /// A bundle no channel of its package lists (operator-registry: "not found in any channel
    /// entries"); nothing could ever install it.
    #[error(
        "{}: bundle {bundle:?} of package {package:?} is in no channel; add it to a channel's \
         entries or remove it",
        at(.origin)
    )]
    BundleInNoChannel {
        origin: Origin,
        package: String,
        bundle: String,
    },

    /// A bundle has no `olm.package` property (or more than one).
    #[error(
        "{}: bundle {bundle:?} of package {package:?} has {count} olm.package properties; it \
         needs exactly one, \
         {{\"type\": \"olm.package\", \"value\": {{\"packageName\": ..., \"version\": ...}}}}",
        at(.origin)
    )]
    PackagePropertyCount {
        origin: Origin,
        package: String,
        bundle: String,
        count: usize,
    },

    /// The bundle's `package` field and its `olm.package` property disagree.
    #[error(
        "{}: bundle {bundle:?} is in package {package:?} but its olm.package property says \
         packageName {property_package:?}; make them agree",
        at(.origin)
    )]
    PackagePropertyMismatch {
        origin: Origin,
        bundle: String,
        package: String,
        property_package: String,
    },

    /// The `version` of the `olm.package` property is not a semantic version.
    #[error(
        "{}: bundle {bundle:?}: olm.package property field `version` is invalid: {reason}",
        at(.origin)
    )]
    InvalidVersion {
        origin: Origin,
        bundle: String,
        version: String,
        reason: String,
    },

    /// A property POM interprets has a malformed value.
    #[error("{}: bundle {bundle:?}: invalid {property} property: {reason}", at(.origin))]
    InvalidProperty {
        origin: Origin,
        bundle: String,
        property: String,
        reason: String,
    },

    /// An `olm.deprecations` entry cannot be understood.
    #[error(
        "{}: olm.deprecations for package {package:?}: {reason}; each entry needs \
         `reference: {{schema: olm.package | olm.channel | olm.bundle, name}}` and a `message`",
        at(.origin)
    )]
    InvalidDeprecation {
        origin: Origin,
        package: String,
        reason: String,
    },
}

fn describe_default_channel(default_channel: Option<&str>, channels: &[String]) -> String {
    let known = if channels.is_empty() {
        "it has no channels".to_owned()
    } else {
        format!("its channels are {}", channels.join(", "))
    };
    match default_channel {
        None => format!("has no defaultChannel ({known})"),
        Some(name) => {
            format!("has defaultChannel {name:?}, which is not one of its channels ({known})")
        }
    }
}

fn describe_heads(heads: &[String]) -> String {
    if heads.is_empty() {
        "has no head (every entry is replaced or skipped by another)".to_owned()
    } else {
        format!("has {} heads ({})", heads.len(), heads.join(", "))
    }
}

/// What [`FbcError::DuplicateChannel`] and [`FbcError::DuplicateBundle`] report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateDetail {
    pub package: String,
    /// The channel or bundle declared twice.
    pub name: String,
    pub first: Origin,
    pub second: Origin,
}

/// What [`FbcError::InvalidSkipRange`] reports: where the range is and why it does not parse.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidSkipRangeDetail {
    pub origin: Origin,
    pub package: String,
    pub channel: String,
    pub entry: String,
    /// The `skipRange` text as written.
    pub range: String,
    pub reason: String,
}
