//! The indexed catalog model that resolution works on.
//!
//! Parsing ([`super::parse`]) turns FBC blobs into this model once per catalog content; the
//! controller caches it per catalog digest and every resolution reads it. Maps are `BTreeMap`s so
//! iteration order (and hence every answer and every message) is deterministic, whatever order
//! the files or entries came in.

use std::collections::BTreeMap;

use semver::Version;

use crate::range::SkipRange;

/// One catalog's content: every package it offers, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Catalog {
    /// Packages by `olm.package` name.
    pub packages: BTreeMap<String, Package>,
    /// Blobs with a schema POM does not interpret (kept, as operator-registry keeps `Others`).
    pub others: Vec<serde_json::Value>,
    /// Packages left out because their blobs are inconsistent (a channel with two heads, a
    /// duplicate bundle, blobs naming a package that has no `olm.package`), with why: one bad
    /// package never makes the rest of the catalog unreadable (OLM v1 scopes such errors to
    /// the package asked for).
    pub invalid_packages: BTreeMap<String, super::FbcError>,
}

/// A package: its channels, its bundles and what the catalog deprecates in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Package {
    pub name: String,
    /// `defaultChannel` of the `olm.package` blob; `None` when the blob omits it.
    pub default_channel: Option<String>,
    pub description: Option<String>,
    /// Channels by (case-sensitive) name.
    pub channels: BTreeMap<String, Channel>,
    /// Bundles by bundle name (graph nodes are bundle names).
    pub bundles: BTreeMap<String, Bundle>,
    pub deprecations: Deprecations,
}

/// A channel: the upgrade graph over bundle names.
#[derive(Debug, Clone, PartialEq)]
pub struct Channel {
    pub name: String,
    /// Entries sorted by bundle name (the input order carries no meaning).
    pub entries: Vec<ChannelEntry>,
}

/// One node of a channel's upgrade graph and its incoming edges.
#[derive(Debug, Clone, PartialEq)]
pub struct ChannelEntry {
    /// Bundle name.
    pub name: String,
    /// The bundle this one replaces (may dangle: the tail may replace a missing entry).
    pub replaces: Option<String>,
    /// Bundles this one skips.
    pub skips: Vec<String>,
    /// Installed versions this one may be installed over directly (blang range).
    pub skip_range: Option<SkipRange>,
}

/// A bundle, with the properties POM acts on already decoded.
#[derive(Debug, Clone, PartialEq)]
pub struct Bundle {
    pub name: String,
    pub package: String,
    /// Bundle image reference (usually by digest); `None` when the catalog carries the objects.
    pub image: Option<String>,
    /// From the `olm.package` property. Build metadata, if any, is kept: it orders releases.
    pub version: Version,
    pub properties: BundleProperties,
    /// Where the blob came from, for error messages and explanations.
    pub origin: Origin,
}

/// The bundle properties POM acts on, decoded. Nothing else of a bundle's properties is kept:
/// `olm.csv.metadata` alone is most of a catalog's bytes, and POM reads two of its fields. A
/// catalog on disk can be read again for the rest ([`super::PackageIndex::materialize`]); see
/// `docs/decisions.md`, "The catalog model keeps what POM acts on".
#[derive(Debug, Clone, Default, PartialEq)]
pub struct BundleProperties {
    /// `olm.maxOpenShiftVersion`; `None` when absent (compatible, as OLM treats it).
    pub max_openshift_version: Option<MaxOpenShiftVersion>,
    /// `olm.csv.metadata` `minKubeVersion`, verbatim.
    pub min_kube_version: Option<String>,
    /// `olm.csv.metadata` `installModes` that are `supported: true`, e.g. `AllNamespaces`.
    pub supported_install_modes: Vec<String>,
    /// `olm.gvk`: APIs the bundle provides.
    pub provided_gvks: Vec<Gvk>,
    /// `olm.gvk.required`, `olm.package.required` and `olm.constraint`: dependencies, which POM
    /// does not resolve and therefore refuses.
    pub dependencies: Vec<Dependency>,
    /// `olm.bundle.object` manifests, base64-decoded, in property order.
    pub objects: Vec<String>,
    /// `olm.bundle.mediatype`, e.g. `registry+v1` or `plain+v0`.
    pub media_type: Option<String>,
}

/// The `olm.maxOpenShiftVersion` property, decoded the way OLM v0 does (fail closed on junk).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MaxOpenShiftVersion {
    /// A valid `major.minor` (a `.0` patch is tolerated, as OLM's `ParseTolerant` does).
    Valid { major: u64, minor: u64 },
    /// Present but unusable (not `X.Y`, a non-zero patch, duplicated): the bundle cannot be
    /// judged, so it blocks minor updates (fail closed).
    Invalid { raw: String, reason: String },
}

/// A group/version/kind.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Gvk {
    pub group: String,
    pub version: String,
    pub kind: String,
}

/// A dependency declared by a bundle.
#[derive(Debug, Clone, PartialEq)]
pub enum Dependency {
    Package {
        package_name: String,
        version_range: String,
    },
    Gvk(Gvk),
    Constraint(serde_json::Value),
}

/// Deprecation messages from `olm.deprecations`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Deprecations {
    /// The whole package is deprecated, with this message.
    pub package: Option<String>,
    /// Channel name → message.
    pub channels: BTreeMap<String, String>,
    /// Bundle name → message.
    pub bundles: BTreeMap<String, String>,
}

/// Where a blob was read from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Origin {
    /// The file's path as the caller named it (or a label such as `configmap/ns/name:key`).
    pub file: String,
    /// 1-based line of the blob's start when known.
    pub line: Option<usize>,
}
