//! The indexed catalog model that resolution works on.
//!
//! Parsing ([`super::parse`]) turns FBC blobs into this model once per catalog content; the
//! controller caches it per catalog digest and every resolution reads it. Maps are `BTreeMap`s so
//! iteration order (and hence every answer and every message) is deterministic, whatever order
//! the files or entries came in.

use std::borrow::Borrow;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

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
    /// The package's name, shared by all its bundles.
    pub package: SharedStr,
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
    pub min_kube_version: Option<SharedStr>,
    /// `olm.csv.metadata` `installModes` that are `supported: true`, e.g. `AllNamespaces`.
    pub supported_install_modes: Vec<SharedStr>,
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
    pub group: SharedStr,
    pub version: SharedStr,
    pub kind: SharedStr,
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
    /// The file's path as the caller named it (or a label such as `configmap/ns/name:key`),
    /// shared by the blobs of a file.
    pub file: SharedStr,
    /// 1-based line of the blob's start when known.
    pub line: Option<usize>,
}

/// An immutable string shared by every place that holds the same text: the strings a
/// catalog repeats per bundle (its package's name, file, APIs, install modes) are one
/// allocation per package, not one per bundle (issue 32 item 5). Reads, prints, orders and
/// compares as the `str` it holds (with `str`, `&str` and `String` on either side).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SharedStr(Arc<str>);

impl SharedStr {
    /// The text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for SharedStr {
    fn default() -> Self {
        Self(Arc::from(""))
    }
}

impl Deref for SharedStr {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for SharedStr {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for SharedStr {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

impl fmt::Display for SharedStr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&*self.0, f)
    }
}

impl From<&str> for SharedStr {
    fn from(text: &str) -> Self {
        Self(Arc::from(text))
    }
}

impl From<String> for SharedStr {
    fn from(text: String) -> Self {
        Self(Arc::from(text))
    }
}

impl From<&String> for SharedStr {
    fn from(text: &String) -> Self {
        Self(Arc::from(text.as_str()))
    }
}

impl From<SharedStr> for String {
    fn from(text: SharedStr) -> Self {
        text.0.as_ref().to_owned()
    }
}

impl PartialEq<str> for SharedStr {
    fn eq(&self, other: &str) -> bool {
        *self.0 == *other
    }
}

impl PartialEq<&str> for SharedStr {
    fn eq(&self, other: &&str) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<String> for SharedStr {
    fn eq(&self, other: &String) -> bool {
        *self.0 == *other.as_str()
    }
}

impl PartialEq<SharedStr> for str {
    fn eq(&self, other: &SharedStr) -> bool {
        *self == *other.0
    }
}

impl PartialEq<SharedStr> for &str {
    fn eq(&self, other: &SharedStr) -> bool {
        **self == *other.0
    }
}

impl PartialEq<SharedStr> for String {
    fn eq(&self, other: &SharedStr) -> bool {
        *self.as_str() == *other.0
    }
}

/// Hands out one [`SharedStr`] per distinct text: what a parse shares between the bundles of
/// a package.
#[derive(Debug, Default)]
pub(crate) struct Interner(HashSet<SharedStr>);

impl Interner {
    /// The shared copy of `text`.
    pub(crate) fn intern(&mut self, text: &str) -> SharedStr {
        if let Some(shared) = self.0.get(text) {
            return shared.clone();
        }
        let shared = SharedStr::from(text);
        self.0.insert(shared.clone());
        shared
    }
}
