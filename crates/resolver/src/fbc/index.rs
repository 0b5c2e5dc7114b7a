//! A catalog loaded for some packages only: the full content of the packages in scope, and an
//! index of every other valid package (where its blobs are, and a fingerprint of them) from
//! which its content is read again when some PlatformOperator starts naming it.
//!
//! Why: a catalog is tens to hundreds of megabytes and its parsed model is about 1.5× that,
//! while a cluster's PlatformOperators name a handful of its packages. OLM v1 had to add a
//! filtered catalog API for the same reason. Every blob is still decoded and checked at load
//! (so a malformed catalog fails as a whole, as before, and every package's graph is validated
//! and `invalidPackages` stays complete), but a package out of scope keeps only its skeleton
//! (names, versions, channels) until validation is done, and then only its index entry.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read as _, Seek as _, SeekFrom};
use std::path::PathBuf;
use std::sync::Arc;

use sha2::{Digest as _, Sha256};

use super::assemble::Assembler;
use super::decode::{AliasBudget, BlobFormat, decode_blob_span};
use super::error::FbcError;
use super::model::Catalog;

/// A package's blobs in one file, contiguous: re-decoding `len` bytes from `offset` yields
/// exactly those blobs (and maybe blobs of schemas POM does not interpret, which are ignored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BlobSpan {
    /// The label of the file (as origins name it).
    pub(crate) file: Arc<str>,
    pub(crate) offset: u64,
    pub(crate) len: u64,
    /// 1-based line of the span's first byte.
    pub(crate) first_line: usize,
    pub(crate) format: BlobFormat,
}

impl BlobSpan {
    fn end(&self) -> u64 {
        self.offset.saturating_add(self.len)
    }
}

/// A digest of a package's blobs (their bytes, files and order): equal fingerprints mean equal
/// content, so a catalog update re-resolves only the PlatformOperators of packages whose
/// fingerprint moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Fingerprint([u8; 32]);

/// One package of the index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexedPackage {
    pub(crate) fingerprint: Fingerprint,
    pub(crate) spans: Vec<BlobSpan>,
}

/// Where a catalog's bytes can be read again.
#[derive(Debug, Clone)]
pub enum ContentSource {
    /// Files on disk, by the label blobs from them carry. The content must not change while
    /// the index is in use (content-addressed folders).
    Files(Arc<BTreeMap<String, PathBuf>>),
    /// Documents kept in memory (small sources, such as a ConfigMap key), in order, by label
    /// (labels are unique: the first document of a label is read).
    Memory(Arc<Vec<(String, Vec<u8>)>>),
}

impl ContentSource {
    fn read(&self, span: &BlobSpan) -> Result<Vec<u8>, FbcError> {
        let len = usize::try_from(span.len).unwrap_or(usize::MAX);
        let gone = |path: &str, reason: &str| FbcError::Io {
            path: path.to_owned(),
            reason: format!(
                "{reason}; the catalog's unpacked content changed or was removed: reload the catalog"
            ),
        };
        match self {
            Self::Memory(documents) => {
                let start = usize::try_from(span.offset).unwrap_or(usize::MAX);
                documents
                    .iter()
                    .find(|(label, _)| label.as_str() == span.file.as_ref())
                    .and_then(|(_, bytes)| bytes.get(start..start.saturating_add(len)))
                    .map(<[u8]>::to_vec)
                    .ok_or_else(|| gone(&span.file, "the indexed content is no longer held"))
            }
            Self::Files(paths) => {
                let path = paths
                    .get(span.file.as_ref())
                    .ok_or_else(|| gone(&span.file, "no such file in the catalog"))?;
                let io =
                    |error: std::io::Error| gone(&path.display().to_string(), &error.to_string());
                let mut file = File::open(path).map_err(io)?;
                file.seek(SeekFrom::Start(span.offset)).map_err(io)?;
                let mut bytes = Vec::with_capacity(len);
                file.take(span.len).read_to_end(&mut bytes).map_err(io)?;
                if bytes.len() != len {
                    return Err(io(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)));
                }
                Ok(bytes)
            }
        }
    }
}

/// Every valid package of a catalog: where its blobs are, and their fingerprint.
#[derive(Debug, Clone)]
pub struct PackageIndex {
    packages: BTreeMap<String, IndexedPackage>,
    source: ContentSource,
}

impl PackageIndex {
    pub(crate) fn new(packages: BTreeMap<String, IndexedPackage>, source: ContentSource) -> Self {
        Self { packages, source }
    }

    /// How many valid packages the catalog has.
    #[must_use]
    pub fn len(&self) -> usize {
        self.packages.len()
    }

    /// Whether the catalog has no valid package.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.packages.is_empty()
    }

    /// Whether `package` is a valid package of the catalog.
    #[must_use]
    pub fn contains(&self, package: &str) -> bool {
        self.packages.contains_key(package)
    }

    /// Every valid package's name, sorted.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.packages.keys().map(String::as_str)
    }

    /// The fingerprint of `package`'s blobs, if it is a valid package of the catalog.
    #[must_use]
    pub fn fingerprint(&self, package: &str) -> Option<Fingerprint> {
        self.packages.get(package).map(|p| p.fingerprint)
    }

    /// How many bytes of catalog source `package`'s blobs take, if it is a valid package of the
    /// catalog: what reading it back reads and parses, known without parsing it.
    #[must_use]
    pub fn source_len(&self, package: &str) -> Option<u64> {
        self.packages
            .get(package)
            .map(|p| p.spans.iter().map(|span| span.len).sum())
    }

    /// Reads `package`'s blobs again and parses them: a catalog holding that package alone, as
    /// a full load of the catalog would have it (origins included). `None` when the catalog
    /// has no such valid package.
    ///
    /// # Errors
    /// [`FbcError::Io`] when the content cannot be read any more; any parse error (the bytes
    /// changed under the index).
    pub fn materialize(&self, package: &str) -> Result<Option<Catalog>, FbcError> {
        let Some(indexed) = self.packages.get(package) else {
            return Ok(None);
        };
        let mut catalog = read_package(&indexed.spans, &self.source)?;
        catalog.packages.retain(|name, _| name == package);
        catalog.invalid_packages.retain(|name, _| name == package);
        Ok(Some(catalog))
    }
}

/// Reads a package's spans back and parses them (blobs of schemas POM does not interpret
/// that share a span are dropped).
pub(crate) fn read_package(
    spans: &[BlobSpan],
    source: &ContentSource,
) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    let mut aliases = AliasBudget::default();
    for span in spans {
        let bytes = source.read(span)?;
        decode_blob_span(span, &bytes, &mut assembler, &mut aliases)?;
    }
    let mut catalog = assembler.finish()?;
    catalog.others.clear();
    Ok(catalog)
}

/// A catalog loaded with a scope: see the module documentation.
#[derive(Debug, Clone)]
pub struct ScopedCatalog {
    /// The packages in scope, whole; `invalid_packages` lists every invalid package of the
    /// catalog, in scope or not; `others` every blob of a schema POM does not interpret.
    pub held: Catalog,
    /// Every valid package of the catalog, in scope or not.
    pub index: PackageIndex,
}

/// What an assembler records per package while loading with a scope.
#[derive(Debug, Default)]
pub(crate) struct SpanRecorder {
    packages: BTreeMap<String, Recorded>,
    /// The label of the file read last, shared by its spans.
    file: Option<Arc<str>>,
}

/// One package's spans, and the digest of each of its blobs (with its file) in order: the
/// fingerprint does not depend on how blobs were merged into spans or cut between cores.
#[derive(Debug, Default)]
struct Recorded {
    spans: Vec<BlobSpan>,
    digests: Vec<[u8; 32]>,
}

/// Where a decoded blob came from, as the decoder saw it.
pub(crate) struct BlobAt<'a> {
    pub(crate) label: &'a str,
    /// Absolute byte offset of the blob in its file.
    pub(crate) offset: u64,
    /// Where the whitespace before the blob starts (its offset when there is none): when a
    /// span of the same package ends there, no other blob came between, and the span grows.
    pub(crate) gap_start: u64,
    pub(crate) first_line: usize,
    pub(crate) format: BlobFormat,
    pub(crate) bytes: &'a [u8],
}

impl SpanRecorder {
    pub(crate) fn record(&mut self, package: &str, at: &BlobAt<'_>) {
        let file = match &self.file {
            Some(file) if file.as_ref() == at.label => file.clone(),
            _ => {
                let file: Arc<str> = Arc::from(at.label);
                self.file = Some(file.clone());
                file
            }
        };
        let digest: [u8; 32] = Sha256::new()
            .chain_update(at.label.as_bytes())
            .chain_update([0])
            .chain_update(at.bytes)
            .finalize()
            .into();
        let recorded = match self.packages.get_mut(package) {
            Some(recorded) => recorded,
            None => self.packages.entry(package.to_owned()).or_default(),
        };
        recorded.digests.push(digest);
        let end = at.offset.saturating_add(at.bytes.len() as u64);
        match recorded.spans.last_mut() {
            Some(last)
                if last.file == file && last.format == at.format && last.end() == at.gap_start =>
            {
                last.len = end.saturating_sub(last.offset);
            }
            _ => recorded.spans.push(BlobSpan {
                file,
                offset: at.offset,
                len: at.bytes.len() as u64,
                first_line: at.first_line,
                format: at.format,
            }),
        }
    }

    /// The spans recorded for `package` so far.
    pub(crate) fn spans_of(&self, package: &str) -> Vec<BlobSpan> {
        self.packages
            .get(package)
            .map(|recorded| recorded.spans.clone())
            .unwrap_or_default()
    }

    /// Appends what a recorder of the blobs that follow in file order recorded.
    pub(crate) fn absorb(&mut self, later: SpanRecorder) {
        for (package, recorded) in later.packages {
            let mine = self.packages.entry(package).or_default();
            mine.spans.extend(recorded.spans);
            mine.digests.extend(recorded.digests);
        }
        self.file = later.file;
    }

    /// The index entries of `packages` (the valid ones).
    pub(crate) fn into_index<'a>(
        mut self,
        packages: impl Iterator<Item = &'a String>,
    ) -> BTreeMap<String, IndexedPackage> {
        packages
            .filter_map(|name| {
                let recorded = self.packages.remove(name)?;
                let mut hasher = Sha256::new();
                for digest in &recorded.digests {
                    hasher.update(digest);
                }
                Some((
                    name.clone(),
                    IndexedPackage {
                        fingerprint: Fingerprint(hasher.finalize().into()),
                        spans: recorded.spans,
                    },
                ))
            })
            .collect()
    }
}
