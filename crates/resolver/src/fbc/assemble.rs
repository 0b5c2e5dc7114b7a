//! Blobs to the indexed model: packages, channels, bundles and deprecations joined by name.
//!
//! Blobs may come in any order and from any file (a bundle before its package, channels in a
//! separate folder), so [`Assembler`] collects them first and joins them in [`Assembler::finish`],
//! which also runs the cross-blob checks (duplicates, unknown packages, channel graphs).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use serde_json::Value;

use super::blob::{
    BlobWire, EntryWire, SCHEMA_BUNDLE, SCHEMA_CHANNEL, SCHEMA_DEPRECATIONS, SCHEMA_PACKAGE,
};
use super::error::{DuplicateDetail, FbcError, InvalidSkipRangeDetail};
use super::fields::Str;
use super::index::{
    BlobAt, ContentSource, PackageIndex, ScopedCatalog, SpanRecorder, read_package,
};
use super::model::{
    Bundle, Catalog, Channel, ChannelEntry, Deprecations, Interner, Origin, Package,
};
use super::parallel;
use super::properties;
use super::validate;
use crate::range::SkipRange;
use crate::version::parse_bundle_version;

/// A package as its `olm.package` blob declares it.
struct PackageSeed {
    package: Package,
    origin: Origin,
}

/// A channel waiting for its package (the one it is gathered under).
struct ChannelSeed {
    channel: Channel,
    origin: Origin,
}

/// Deprecations waiting for their package (the one they are gathered under).
struct DeprecationsSeed {
    deprecations: Deprecations,
    origin: Origin,
}

/// The packages whose content a load keeps whole (see [`super::index`]).
pub(crate) type Scope = Arc<BTreeSet<String>>;

/// Collects decoded blobs, then joins them into a [`Catalog`].
#[derive(Default)]
pub(crate) struct Assembler {
    /// Each package's blobs, in file order, by the package they name: gathered as they come,
    /// so the join moves no bundle from one list to another.
    packages: BTreeMap<String, PackageBlobs>,
    others: Vec<Value>,
    /// The strings bundles repeat (package, file, APIs, install modes), one copy each.
    interner: Interner,
    /// With a scope: packages outside it are validated one at a time and kept only as index
    /// entries; every blob's span is recorded for the index.
    scoped: Option<Box<Scoping>>,
}

/// A scoped load's state for the packages out of scope.
///
/// Catalogs keep a package's blobs together (opm renders them so, and split folders hold a
/// package per file), so an out-of-scope package is collected while its blobs arrive and
/// validated ("sealed") as soon as a blob of another package comes: its model never
/// accumulates with the others'. A package whose blobs turn out to be scattered is
/// "reopened": it is validated at the end from its blobs read back, as a whole load would.
#[derive(Default)]
struct Scoping {
    scope: Scope,
    recorder: SpanRecorder,
    /// The out-of-scope package whose blobs are arriving, collected on its own.
    open: Option<(String, Box<Assembler>)>,
    /// Validated out-of-scope packages: `None` when valid, or why they are not.
    sealed: BTreeMap<String, Option<FbcError>>,
    /// Out-of-scope packages whose blobs came apart: validated at the end.
    reopened: BTreeSet<String>,
    /// Where each out-of-scope package's `olm.package` blob was (duplicates are refused).
    package_origins: BTreeMap<String, Origin>,
}

impl Scoping {
    /// Validates the open package and forgets its model.
    fn seal_open(&mut self) -> Result<(), FbcError> {
        if let Some((name, open)) = self.open.take() {
            let mut joined = open.join(JoinThreads::ONE)?;
            let verdict = if joined.packages.contains_key(&name) {
                None
            } else {
                joined.invalid_packages.remove(&name)
            };
            self.sealed.insert(name, verdict);
        }
        Ok(())
    }

    /// Whether blobs of `name` were seen before the open package's.
    fn seen(&self, name: &str) -> bool {
        self.sealed.contains_key(name) || self.reopened.contains(name)
    }

    fn reopen(&mut self, name: String) {
        self.sealed.remove(&name);
        self.reopened.insert(name);
    }
}

/// Takes a required string field, refusing absence and the empty string.
fn required(
    value: Option<Str<'_>>,
    origin: &Origin,
    schema: &str,
    field: &str,
) -> Result<String, FbcError> {
    match value {
        Some(s) if !s.as_str().is_empty() => Ok(s.into_string()),
        _ => Err(FbcError::MissingField {
            origin: origin.clone(),
            schema: schema.to_owned(),
            field: field.to_owned(),
        }),
    }
}

/// An optional string field; the empty string means absent (as Go's zero value does).
fn optional(value: Option<Str<'_>>) -> Option<String> {
    value
        .filter(|s| !s.as_str().is_empty())
        .map(Str::into_string)
}

impl Assembler {
    /// An assembler that keeps only the packages of `scope` whole and indexes every package.
    pub(crate) fn scoped(scope: Scope) -> Self {
        Self {
            scoped: Some(Box::new(Scoping {
                scope,
                ..Scoping::default()
            })),
            ..Self::default()
        }
    }

    /// Adds a blob of a schema POM interprets (the caller checked `schema`); `at` says where
    /// its bytes are, for the index of a scoped load.
    pub(crate) fn add(
        &mut self,
        blob: BlobWire<'_>,
        origin: Origin,
        at: &BlobAt<'_>,
    ) -> Result<(), FbcError> {
        let out_of_scope = self.scoped.as_ref().and_then(|scoping| {
            let schema = blob.schema.as_ref().map_or("", |s| s.as_str());
            let owner = if schema == SCHEMA_PACKAGE {
                blob.name.as_ref()
            } else {
                blob.package.as_ref()
            };
            owner
                .map(|s| s.as_str())
                .filter(|name| !name.is_empty() && !scoping.scope.contains(*name))
                .map(str::to_owned)
        });
        let Some(owner) = out_of_scope else {
            let package = self.add_unrecorded(blob, origin)?;
            if let Some(scoping) = &mut self.scoped {
                scoping.recorder.record(&package, at);
            }
            return Ok(());
        };
        let Some(scoping) = self.scoped.as_mut() else {
            return Ok(());
        };
        let declares = blob
            .schema
            .as_ref()
            .is_some_and(|s| s.as_str() == SCHEMA_PACKAGE);
        if declares && let Some(first) = scoping.package_origins.get(&owner) {
            return Err(FbcError::DuplicatePackage {
                package: owner,
                first: first.clone(),
                second: origin,
            });
        }
        let blob_origin = origin.clone();
        if scoping.seen(&owner) {
            // Decoded as any blob is (its errors are the catalog's), then left: the package is
            // validated at the end from its blobs read back.
            Assembler::default().add_unrecorded(blob, origin)?;
            scoping.reopen(owner.clone());
        } else {
            if scoping
                .open
                .as_ref()
                .is_some_and(|(name, _)| *name != owner)
            {
                scoping.seal_open()?;
            }
            let (_, open) = scoping
                .open
                .get_or_insert_with(|| (owner.clone(), Box::default()));
            open.add_unrecorded(blob, origin)?;
        }
        if declares {
            scoping.package_origins.insert(owner.clone(), blob_origin);
        }
        scoping.recorder.record(&owner, at);
        Ok(())
    }

    /// Adds a blob to this assembler's own collections; returns its package.
    fn add_unrecorded(&mut self, blob: BlobWire<'_>, origin: Origin) -> Result<String, FbcError> {
        let schema = blob.schema.as_ref().map_or("", |s| s.as_str());
        match schema {
            SCHEMA_PACKAGE => self.add_package(blob, origin),
            SCHEMA_CHANNEL => self.add_channel(blob, origin),
            SCHEMA_BUNDLE => self.add_bundle(blob, origin),
            SCHEMA_DEPRECATIONS => self.add_deprecations(blob, origin),
            _ => Err(FbcError::MissingSchema { origin }),
        }
    }

    /// Appends what `later` collected from the blobs that follow this assembler's in file order
    /// (a later piece of the catalog decoded on another core). Returns `false`, leaving `self`
    /// partly merged, when a package is declared in both: the caller then decodes the catalog
    /// again in one piece, so the duplicate is reported as a sequential pass reports it.
    pub(crate) fn absorb(&mut self, later: Assembler) -> bool {
        for (name, theirs) in later.packages {
            match self.packages.entry(name) {
                Entry::Vacant(slot) => {
                    slot.insert(theirs);
                }
                Entry::Occupied(mut slot) => {
                    if !slot.get_mut().append(theirs) {
                        return false;
                    }
                }
            }
        }
        self.others.extend(later.others);
        if let (Some(mine), Some(theirs)) = (&mut self.scoped, later.scoped) {
            let theirs = *theirs;
            for (name, origin) in theirs.package_origins {
                match mine.package_origins.entry(name) {
                    Entry::Occupied(_) => return false,
                    Entry::Vacant(slot) => {
                        slot.insert(origin);
                    }
                }
            }
            // My open package ends here, unless their blobs continue it (then it is reopened).
            if mine.seal_open().is_err() {
                return false;
            }
            for (name, verdict) in theirs.sealed {
                if mine.seen(&name) {
                    mine.reopen(name);
                } else {
                    mine.sealed.insert(name, verdict);
                }
            }
            for name in theirs.reopened {
                mine.reopen(name);
            }
            if let Some((name, open)) = theirs.open {
                if mine.seen(&name) {
                    mine.reopen(name);
                } else {
                    mine.open = Some((name, open));
                }
            }
            mine.recorder.absorb(theirs.recorder);
        }
        true
    }

    /// Keeps a blob of a schema POM does not interpret.
    pub(crate) fn add_other(&mut self, value: Value) {
        self.others.push(value);
    }

    fn add_package(&mut self, blob: BlobWire<'_>, origin: Origin) -> Result<String, FbcError> {
        let name = required(blob.name, &origin, SCHEMA_PACKAGE, "name")?;
        let package = Package {
            name: name.clone(),
            default_channel: optional(blob.default_channel),
            description: optional(blob.description),
            channels: BTreeMap::new(),
            bundles: BTreeMap::new(),
            deprecations: Deprecations::default(),
        };
        with_blobs(&mut self.packages, &name, |blobs| match &blobs.declared {
            Some(first) => Err(FbcError::DuplicatePackage {
                package: name.clone(),
                first: first.origin.clone(),
                second: origin,
            }),
            None => {
                blobs.declared = Some(PackageSeed { package, origin });
                Ok(())
            }
        })?;
        Ok(name)
    }

    fn add_channel(&mut self, blob: BlobWire<'_>, origin: Origin) -> Result<String, FbcError> {
        let package = required(blob.package, &origin, SCHEMA_CHANNEL, "package")?;
        let name = required(blob.name, &origin, SCHEMA_CHANNEL, "name")?;
        let mut entries = Vec::with_capacity(blob.entries.as_ref().map_or(0, Vec::len));
        for wire in blob.entries.unwrap_or_default() {
            entries.push(channel_entry(wire, &package, &name, &origin)?);
        }
        entries.sort_by(|a: &ChannelEntry, b| a.name.cmp(&b.name));
        if let Some(pair) = entries.windows(2).find(|pair| pair[0].name == pair[1].name) {
            return Err(FbcError::DuplicateChannelEntry {
                origin,
                package,
                channel: name,
                entry: pair[0].name.clone(),
            });
        }
        let seed = ChannelSeed {
            channel: Channel { name, entries },
            origin,
        };
        with_blobs(&mut self.packages, &package, |blobs| {
            blobs.channels.push(seed)
        });
        Ok(package)
    }

    fn add_bundle(&mut self, blob: BlobWire<'_>, origin: Origin) -> Result<String, FbcError> {
        let package = required(blob.package, &origin, SCHEMA_BUNDLE, "package")?;
        let name = required(blob.name, &origin, SCHEMA_BUNDLE, "name")?;
        let origin = Origin {
            file: self.interner.intern(&origin.file),
            line: origin.line,
        };
        let decoded = properties::decode(
            blob.properties.unwrap_or_default(),
            &name,
            &origin,
            &mut self.interner,
        )?;
        let [package_property] = decoded.packages.as_slice() else {
            return Err(FbcError::PackagePropertyCount {
                origin,
                package,
                bundle: name,
                count: decoded.packages.len(),
            });
        };
        if package_property.package_name != package {
            return Err(FbcError::PackagePropertyMismatch {
                origin,
                bundle: name,
                package,
                property_package: package_property.package_name.clone(),
            });
        }
        let version = parse_bundle_version(&package_property.version).map_err(|e| {
            FbcError::InvalidVersion {
                origin: origin.clone(),
                bundle: name.clone(),
                version: package_property.version.clone(),
                reason: e.to_string(),
            }
        })?;
        let bundle = Bundle {
            name,
            package: self.interner.intern(&package),
            image: optional(blob.image),
            version,
            properties: decoded.properties,
            origin,
        };
        with_blobs(&mut self.packages, &package, |blobs| {
            blobs.bundles.push(bundle)
        });
        Ok(package)
    }

    fn add_deprecations(&mut self, blob: BlobWire<'_>, origin: Origin) -> Result<String, FbcError> {
        let package = required(blob.package, &origin, SCHEMA_DEPRECATIONS, "package")?;
        let mut deprecations = Deprecations::default();
        for wire in blob.entries.unwrap_or_default() {
            let invalid = |reason: String| FbcError::InvalidDeprecation {
                origin: origin.clone(),
                package: package.clone(),
                reason,
            };
            let message = optional(wire.message).unwrap_or_default();
            let Some(reference) = wire.reference else {
                return Err(invalid("an entry has no `reference`".to_owned()));
            };
            let schema = optional(reference.schema).unwrap_or_default();
            let name = optional(reference.name);
            match (schema.as_str(), name) {
                (SCHEMA_PACKAGE, _) => {
                    deprecations.package.get_or_insert(message);
                }
                (SCHEMA_CHANNEL, Some(name)) => {
                    deprecations.channels.entry(name).or_insert(message);
                }
                (SCHEMA_BUNDLE, Some(name)) => {
                    deprecations.bundles.entry(name).or_insert(message);
                }
                (SCHEMA_CHANNEL | SCHEMA_BUNDLE, None) => {
                    return Err(invalid(format!("a {schema} reference has no `name`")));
                }
                _ => {
                    return Err(invalid(format!(
                        "reference schema {schema:?} is not one of olm.package, olm.channel, olm.bundle"
                    )));
                }
            }
        }
        let seed = DeprecationsSeed {
            deprecations,
            origin,
        };
        with_blobs(&mut self.packages, &package, |blobs| {
            blobs.deprecations.push(seed);
        });
        Ok(package)
    }

    /// Joins everything by package and validates the result. An inconsistency inside one
    /// package (duplicates, a channel that is not one replaces chain, blobs of a package with
    /// no `olm.package`) leaves that package out with its error; the rest is served.
    pub(crate) fn finish(self) -> Result<Catalog, FbcError> {
        self.finish_on(JoinThreads::default())
    }

    /// [`Self::finish`], with the join shared out as `threads` says.
    pub(crate) fn finish_on(mut self, threads: JoinThreads) -> Result<Catalog, FbcError> {
        self.scoped = None;
        self.join(threads)
    }

    /// Finishes a scoped load (an assembler made by [`Self::scoped`]): the packages in scope
    /// whole, and the index of every valid package, whose content can be read again from
    /// `source`.
    pub(crate) fn finish_scoped(
        mut self,
        source: ContentSource,
    ) -> Result<ScopedCatalog, FbcError> {
        let mut scoping = self.scoped.take().map(|s| *s).unwrap_or_default();
        scoping.seal_open()?;
        let mut held = self.join(JoinThreads::default())?;
        let mut valid: Vec<String> = held.packages.keys().cloned().collect();
        for (name, verdict) in scoping.sealed {
            match verdict {
                None => valid.push(name),
                Some(error) => {
                    held.invalid_packages.insert(name, error);
                }
            }
        }
        for name in scoping.reopened {
            let spans = scoping.recorder.spans_of(&name);
            let mut joined = read_package(&spans, &source)?;
            if joined.packages.contains_key(&name) {
                valid.push(name);
            } else if let Some(error) = joined.invalid_packages.remove(&name) {
                held.invalid_packages.insert(name, error);
            }
        }
        let index = scoping.recorder.into_index(valid.iter());
        held.packages.retain(|name, _| scoping.scope.contains(name));
        Ok(ScopedCatalog {
            held,
            index: PackageIndex::new(index, source),
        })
    }

    /// Joins and validates each package from its blobs, on every core when there are enough
    /// bundles to pay for threads: packages are independent, and each one's result is the one
    /// a pass over the whole catalog gives.
    fn join(self, threads: JoinThreads) -> Result<Catalog, FbcError> {
        let bundles: usize = self.packages.values().map(|b| b.bundles.len()).sum();
        let workers = if bundles >= threads.min_bundles {
            threads.workers
        } else {
            1
        };
        let joined = parallel::map_in_order(
            self.packages.into_iter().collect(),
            workers,
            |(_, blobs)| blobs.bundles.len() + 1,
            |(name, blobs)| {
                let result = blobs.join(&name);
                (name, result)
            },
        );
        let mut packages = Vec::with_capacity(joined.len());
        let mut invalid = BTreeMap::new();
        for (name, result) in joined {
            match result {
                Ok(package) => packages.push((name, package)),
                Err(error) => {
                    invalid.insert(name, error);
                }
            }
        }
        Ok(Catalog {
            // Already in name order, so collecting the map is one linear pass.
            packages: packages.into_iter().collect(),
            others: self.others,
            invalid_packages: invalid,
        })
    }
}

/// Catalogs with fewer bundles than this are joined on one core: threads cost more than the
/// join of a catalog this small (about 1 ms).
const MIN_PARALLEL_JOIN_BUNDLES: usize = 2_000;

/// How the join of a catalog is shared out between cores (tests lower the threshold).
#[derive(Debug, Clone, Copy)]
pub(crate) struct JoinThreads {
    pub(crate) workers: usize,
    /// Catalogs with fewer bundles are joined on one core.
    pub(crate) min_bundles: usize,
}

impl JoinThreads {
    /// On the calling thread only (one package, or a caller that wants no threads).
    pub(crate) const ONE: Self = Self {
        workers: 1,
        min_bundles: usize::MAX,
    };
}

impl Default for JoinThreads {
    fn default() -> Self {
        Self {
            workers: parallel::workers(),
            min_bundles: MIN_PARALLEL_JOIN_BUNDLES,
        }
    }
}

/// The blobs of one package, in file order, waiting to be joined.
#[derive(Default)]
struct PackageBlobs {
    /// Its `olm.package` blob, when there is one.
    declared: Option<PackageSeed>,
    channels: Vec<ChannelSeed>,
    bundles: Vec<Bundle>,
    deprecations: Vec<DeprecationsSeed>,
}

/// Runs `add` on the blobs gathered for `package`, a new entry when it has none yet.
fn with_blobs<R>(
    packages: &mut BTreeMap<String, PackageBlobs>,
    package: &str,
    add: impl FnOnce(&mut PackageBlobs) -> R,
) -> R {
    // Looked up first: most blobs find their package and need no copy of its name.
    match packages.get_mut(package) {
        Some(blobs) => add(blobs),
        None => add(packages.entry(package.to_owned()).or_default()),
    }
}

impl PackageBlobs {
    /// Appends the blobs that follow these in file order; `false` (leaving `self` as it was)
    /// when both declare the package.
    fn append(&mut self, later: PackageBlobs) -> bool {
        if self.declared.is_some() && later.declared.is_some() {
            return false;
        }
        if later.declared.is_some() {
            self.declared = later.declared;
        }
        self.channels.extend(later.channels);
        self.bundles.extend(later.bundles);
        self.deprecations.extend(later.deprecations);
        true
    }

    /// Joins one package's blobs and validates it. The first inconsistency found is its error,
    /// in this order: channels, bundles, deprecations (each in file order), then the channel
    /// graphs (by channel name), then the package as a whole.
    fn join(self, name: &str) -> Result<Package, FbcError> {
        let Some(PackageSeed {
            mut package,
            origin,
        }) = self.declared
        else {
            return Err(self.undeclared(name));
        };
        let mut first_error: Option<FbcError> = None;
        let mut channel_origins: BTreeMap<String, Origin> = BTreeMap::new();
        for seed in self.channels {
            match channel_origins.entry(seed.channel.name.clone()) {
                Entry::Occupied(first) => {
                    first_error.get_or_insert_with(|| {
                        FbcError::DuplicateChannel(Box::new(DuplicateDetail {
                            package: name.to_owned(),
                            name: seed.channel.name,
                            first: first.get().clone(),
                            second: seed.origin,
                        }))
                    });
                }
                Entry::Vacant(slot) => {
                    slot.insert(seed.origin);
                    package
                        .channels
                        .insert(seed.channel.name.clone(), seed.channel);
                }
            }
        }
        let (bundles, duplicate) = bundles_by_name(self.bundles);
        package.bundles = bundles;
        if let Some((first, second)) = duplicate {
            first_error.get_or_insert_with(|| {
                FbcError::DuplicateBundle(Box::new(DuplicateDetail {
                    package: name.to_owned(),
                    name: second.name,
                    first,
                    second: second.origin,
                }))
            });
        }
        let mut deprecations_origin: Option<Origin> = None;
        for seed in self.deprecations {
            if let Some(first) = &deprecations_origin {
                first_error.get_or_insert_with(|| FbcError::DuplicateDeprecations {
                    package: name.to_owned(),
                    first: first.clone(),
                    second: seed.origin,
                });
                continue;
            }
            package.deprecations = seed.deprecations;
            deprecations_origin = Some(seed.origin);
        }
        for (channel, channel_origin) in &channel_origins {
            if first_error.is_some() {
                break;
            }
            if let Some(channel) = package.channels.get(channel)
                && let Err(error) = validate::channel(&package, channel, channel_origin)
            {
                first_error = Some(error);
            }
        }
        if first_error.is_none()
            && let Err(error) = validate::package(&package, &origin, deprecations_origin.as_ref())
        {
            first_error = Some(error);
        }
        first_error.map_or(Ok(package), Err)
    }

    /// Blobs that name a package no `olm.package` blob declares: the first of them (channels,
    /// then bundles, then deprecations, in file order) is the error.
    fn undeclared(self, name: &str) -> FbcError {
        if let Some(seed) = self.channels.into_iter().next() {
            return unknown_package(SCHEMA_CHANNEL, seed.channel.name, name, seed.origin);
        }
        if let Some(bundle) = self.bundles.into_iter().next() {
            return unknown_package(SCHEMA_BUNDLE, bundle.name, name, bundle.origin);
        }
        match self.deprecations.into_iter().next() {
            Some(seed) => unknown_package(SCHEMA_DEPRECATIONS, name.to_owned(), name, seed.origin),
            // Not reached: a package is gathered only for a blob that names it.
            None => unknown_package(SCHEMA_PACKAGE, name.to_owned(), name, Origin::default()),
        }
    }
}

/// A package's bundles by name, the first of each name in file order kept, built in one pass
/// over them sorted (inserting one at a time shifts whole bundles within the tree's nodes). With
/// the duplicate a pass in file order meets first: the kept bundle's origin and the copy.
fn bundles_by_name(bundles: Vec<Bundle>) -> (BTreeMap<String, Bundle>, Option<(Origin, Bundle)>) {
    // Positions sorted by name; the sort is stable, so each name's run starts with its first.
    let mut order: Vec<usize> = (0..bundles.len()).collect();
    order.sort_by(|&a, &b| bundles[a].name.cmp(&bundles[b].name));
    let mut slots: Vec<Option<Bundle>> = bundles.into_iter().map(Some).collect();
    let mut kept: Vec<(String, Bundle)> = Vec::with_capacity(slots.len());
    // The copy that comes earliest in the file: its position, its name's first's origin, it.
    let mut duplicate: Option<(usize, Origin, Bundle)> = None;
    for at in order {
        let Some(bundle) = slots[at].take() else {
            continue;
        };
        match kept.last() {
            Some((name, first)) if *name == bundle.name => {
                if duplicate.as_ref().is_none_or(|(copy, ..)| at < *copy) {
                    duplicate = Some((at, first.origin.clone(), bundle));
                }
            }
            _ => kept.push((bundle.name.clone(), bundle)),
        }
    }
    let duplicate = duplicate.map(|(_, first, copy)| (first, copy));
    (kept.into_iter().collect(), duplicate)
}

fn unknown_package(schema: &str, name: String, package: &str, origin: Origin) -> FbcError {
    FbcError::UnknownPackage {
        origin,
        schema: schema.to_owned(),
        name,
        package: package.to_owned(),
    }
}

fn channel_entry(
    wire: EntryWire<'_>,
    package: &str,
    channel: &str,
    origin: &Origin,
) -> Result<ChannelEntry, FbcError> {
    let name = required(wire.name, origin, "olm.channel entry", "name")?;
    let skip_range = match optional(wire.skip_range) {
        None => None,
        Some(range) => Some(SkipRange::parse(&range).map_err(|e| {
            FbcError::InvalidSkipRange(Box::new(InvalidSkipRangeDetail {
                origin: origin.clone(),
                package: package.to_owned(),
                channel: channel.to_owned(),
                entry: name.clone(),
                reason: e.reason,
                range,
            }))
        })?),
    };
    Ok(ChannelEntry {
        name,
        replaces: optional(wire.replaces),
        skips: wire
            .skips
            .unwrap_or_default()
            .into_iter()
            .filter_map(|s| optional(Some(s)))
            .collect(),
        skip_range,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn bundle(name: &str, line: usize) -> Bundle {
        Bundle {
            name: name.to_owned(),
            package: "p".into(),
            image: None,
            version: parse_bundle_version("1.0.0").unwrap(),
            properties: Default::default(),
            origin: Origin {
                file: "c".into(),
                line: Some(line),
            },
        }
    }

    /// What a pass in file order does: insert each bundle, keep the first of a name, and
    /// report the first copy met, with the kept bundle's origin.
    fn one_at_a_time(bundles: Vec<Bundle>) -> (BTreeMap<String, Bundle>, Option<(Origin, Bundle)>) {
        let mut map = BTreeMap::new();
        let mut duplicate = None;
        for bundle in bundles {
            match map.entry(bundle.name.clone()) {
                Entry::Occupied(first) => {
                    let first: &Bundle = first.get();
                    duplicate.get_or_insert((first.origin.clone(), bundle));
                }
                Entry::Vacant(slot) => {
                    slot.insert(bundle);
                }
            }
        }
        (map, duplicate)
    }

    proptest! {
        #[test]
        fn bundles_by_name_is_a_pass_in_file_order(names in prop::collection::vec(0u8..12, 0..40)) {
            let bundles: Vec<Bundle> = names
                .iter()
                .enumerate()
                .map(|(line, n)| bundle(&format!("b{n}"), line))
                .collect();
            prop_assert_eq!(bundles_by_name(bundles.clone()), one_at_a_time(bundles));
        }
    }
}
