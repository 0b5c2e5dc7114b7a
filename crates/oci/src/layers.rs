//! Applying image layers in order to get the files under one folder, in memory or on disk.
//!
//! Catalog and bundle images carry their content in a known folder (`/configs`, `/manifests`,
//! `/metadata`), so POM never unpacks a whole image: it reads each tar stream, keeps the regular
//! files under the wanted prefix and applies whiteouts the simple way (`.wh.<name>` deletes
//! `<name>` and everything below it; `.wh..wh..opq` empties the folder of what lower layers put
//! there). Symbolic links, devices and folders are not content and are skipped; hard links copy
//! the file they name when it was kept; a file replaces a kept file at an ancestor path or the
//! kept files below its own path, as on a file system.
//!
//! The decisions are [`LayerStack`]'s; where the kept bytes go is a [`Storage`]: [`Memory`] for
//! bundles (small, read whole right away), [`crate::disk::DiskStorage`] for catalogs (issue 10:
//! a big catalog must not cost its size in memory). Both see the same calls, so both give the
//! same files.

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use flate2::read::MultiGzDecoder;

use super::error::LayerError;

/// Default bound on the bytes kept in memory for one image (512 MiB).
pub const DEFAULT_MAX_BYTES: u64 = 512 * 1024 * 1024;
/// Most tar entries POM reads from one image, all layers together (catalogs of the size of
/// OpenShift's own hold a few thousand files).
pub const MAX_LAYER_ENTRIES: u64 = 100_000;
/// Largest GNU long-name/long-link or PAX extended header POM reads (a path is at most a few
/// KiB; the tar crate would otherwise read any size into memory before POM could look).
pub const MAX_EXTENDED_HEADER_BYTES: u64 = 64 * 1024;

/// Longest path of an entry (or of a hard link's target) POM accepts: 4 KiB, Linux's
/// `PATH_MAX`, so no file system POM writes to could hold a longer one and no well-built image
/// has one. Long names and PAX paths may otherwise be up to [`MAX_EXTENDED_HEADER_BYTES`] (64
/// KiB) each, and a kept name is held [`NAME_COPIES`] times.
pub const MAX_PATH_BYTES: u64 = 4096;
/// How many copies of a kept file's name extraction holds (the index of kept files, the set of
/// paths the layer wrote, the storage's key), so what each kept name is charged against the
/// byte budget per byte: names cost memory as content does.
pub const NAME_COPIES: u64 = 3;
/// Most bytes of kept file names, all kept files together, counted once (16 MiB: held
/// [`NAME_COPIES`] times, at most 48 MiB). A catalog pulled to disk keeps its content on disk
/// but its names in memory, so the byte budget (512 MiB) alone would let names cost the
/// manager hundreds of MiB. Real catalogs are far below: the 1,033 files of
/// `community-operators` have 91 KB of names; [`MAX_LAYER_ENTRIES`] files of 167 bytes fit.
pub const MAX_NAME_BYTES: u64 = 16 * 1024 * 1024;
/// Most bytes POM reads from the tar streams of one image, all layers together, after
/// decompression, skipped entries included (4 GiB). Only the compressed size of a layer is
/// checked before download (512 MiB), and gzip expands up to ~1,000 times: without this a
/// layer could make POM inflate and skip ~500 GB. Inflating and skipping 4 GiB takes seconds,
/// well within [`crate::PULL_DEADLINE`]; OpenShift's index images (opm, its base image, the
/// catalog and its cache) are about 1 GB uncompressed.
pub const MAX_DECOMPRESSED_BYTES: u64 = 4 * 1024 * 1024 * 1024;
/// Most bytes a gzip layer may expand to per compressed byte, beyond
/// [`EXPANSION_ALLOWANCE_BYTES`]: 128. Tar+gzip layers of catalogs expand 6 to 16 times
/// (`../shared/testdata/real`), and binaries less; runs of zeros expand ~1,000 times (64 MiB
/// of zeros is 65 KB of gzip). Refusing a bomb here takes a fraction of a second where
/// [`MAX_DECOMPRESSED_BYTES`] alone would let it cost seconds of work on every retry.
pub const MAX_EXPANSION_RATIO: u64 = 128;
/// Decompressed bytes of a gzip layer never refused for its expansion ratio (64 MiB): the
/// first bytes of a stream (tar headers of many empty files compress very well) and small
/// layers are not judged by their ratio.
pub const EXPANSION_ALLOWANCE_BYTES: u64 = 64 * 1024 * 1024;
/// Longest part of an entry's path quoted in an error message.
const QUOTED_PATH_BYTES: usize = 200;

const WHITEOUT_PREFIX: &str = ".wh.";
const OPAQUE_WHITEOUT: &str = ".wh..wh..opq";

/// How a layer blob is encoded, from its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LayerFormat {
    /// An uncompressed tar stream.
    Tar,
    /// A gzip-compressed tar stream.
    TarGzip,
}

impl LayerFormat {
    /// Maps OCI and Docker layer media types to a format; anything else (zstd, encrypted,
    /// foreign artifacts) is refused so that an image is never half-read.
    ///
    /// # Errors
    /// [`LayerError::UnsupportedMediaType`] for a media type POM cannot read.
    pub fn from_media_type(media_type: &str) -> Result<Self, LayerError> {
        match media_type {
            "application/vnd.oci.image.layer.v1.tar"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar"
            | "application/vnd.docker.image.rootfs.diff.tar" => Ok(Self::Tar),
            "application/vnd.oci.image.layer.v1.tar+gzip"
            | "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip"
            | "application/vnd.docker.image.rootfs.diff.tar.gzip"
            | "application/vnd.docker.image.rootfs.foreign.diff.tar.gzip" => Ok(Self::TarGzip),
            other => Err(LayerError::UnsupportedMediaType {
                media_type: other.to_owned(),
            }),
        }
    }

    fn name(self) -> &'static str {
        match self {
            Self::Tar => "tar",
            Self::TarGzip => "tar+gzip",
        }
    }
}

/// Where a [`LayerStack`] keeps the files it decides to keep: the decisions (prefix, whiteouts,
/// hard links, limits, path checks) are the stack's, the bytes are the storage's. Keys are clean
/// relative paths (no `..`, no empty or `.` component, no leading `/`), with the prefix removed;
/// the stack never keeps a key and one of its ancestors at once, so a storage may map keys to
/// files in a real directory tree.
pub trait Storage {
    /// What a file's bytes are written into while an entry is read.
    type Sink: Write;
    /// Starts the file `key` of `size` bytes (already within the byte budget), replacing any
    /// file of that key.
    ///
    /// # Errors
    /// [`LayerError::Storage`] when the file cannot be created.
    fn create(&mut self, key: &str, size: u64) -> Result<Self::Sink, LayerError>;
    /// Ends the file `key` whose bytes were all written into `sink`.
    ///
    /// # Errors
    /// [`LayerError::Storage`] when the file cannot be completed.
    fn finish(&mut self, key: &str, sink: Self::Sink) -> Result<(), LayerError>;
    /// The error for a failed write of `key` (reads failing are the archive's fault and are
    /// reported as [`LayerError::Corrupt`] by the stack).
    fn write_failed(&self, key: &str, err: &std::io::Error) -> LayerError;
    /// Makes `to` a copy of the kept file `from` (a hard link in the image).
    ///
    /// # Errors
    /// [`LayerError::Storage`] when the copy cannot be made.
    fn copy(&mut self, from: &str, to: &str) -> Result<(), LayerError>;
    /// Forgets the kept file `key`.
    ///
    /// # Errors
    /// [`LayerError::Storage`] when the file cannot be removed.
    fn remove(&mut self, key: &str) -> Result<(), LayerError>;
}

/// Files kept in memory, for bundles (small, read whole right away).
#[derive(Debug, Default)]
pub struct Memory {
    files: BTreeMap<String, Vec<u8>>,
}

impl Storage for Memory {
    type Sink = Vec<u8>;

    fn create(&mut self, _key: &str, size: u64) -> Result<Vec<u8>, LayerError> {
        // `size` was checked against the byte budget before this is called.
        Ok(Vec::with_capacity(usize::try_from(size).unwrap_or(0)))
    }

    fn finish(&mut self, key: &str, sink: Vec<u8>) -> Result<(), LayerError> {
        self.files.insert(key.to_owned(), sink);
        Ok(())
    }

    fn write_failed(&self, key: &str, err: &std::io::Error) -> LayerError {
        LayerError::Storage {
            path: key.to_owned(),
            action: "keep in memory",
            reason: err.to_string(),
        }
    }

    fn copy(&mut self, from: &str, to: &str) -> Result<(), LayerError> {
        if let Some(data) = self.files.get(from).cloned() {
            self.files.insert(to.to_owned(), data);
        }
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<(), LayerError> {
        self.files.remove(key);
        Ok(())
    }
}

/// Bytes read from an entry per step when a kept file is copied into its storage: the only
/// buffer whose size depends on POM, not on the image.
pub const COPY_BUFFER_BYTES: usize = 64 * 1024;

/// Files under a prefix, built up layer by layer, kept in memory ([`Memory`], the default) or
/// elsewhere (a [`Storage`], such as a directory on disk for catalogs).
#[derive(Debug)]
pub struct LayerStack<S: Storage = Memory> {
    prefix: String,
    max_bytes: u64,
    /// Size of every kept file by key: the decisions need sizes and key ranges, never bytes,
    /// so they are the same whatever the storage.
    index: BTreeMap<String, u64>,
    /// Bytes of the kept files, kept up to date on every insert and removal.
    used: u64,
    /// Bytes of the kept files' names (counted once; see [`MAX_NAME_BYTES`]).
    names: u64,
    /// Bytes read from the tar streams after decompression so far, all layers.
    decompressed: u64,
    /// Tar entries read so far, all layers.
    entries: u64,
    storage: S,
    /// Set by whoever started the extraction to stop it (a pull dropped at its deadline).
    cancel: Option<Arc<AtomicBool>>,
}

impl LayerStack {
    /// Starts an empty file tree in memory that keeps files under `prefix` (for example
    /// `configs/`, or `""` for everything) and refuses to hold more than `max_bytes`.
    #[must_use]
    pub fn new(prefix: &str, max_bytes: u64) -> Self {
        Self::with_storage(prefix, max_bytes, Memory::default())
    }

    /// The kept files, keyed by their path with the prefix removed.
    #[must_use]
    pub fn into_files(self) -> BTreeMap<String, Vec<u8>> {
        self.storage.files
    }

    /// Applies one layer on top of the previous ones.
    ///
    /// # Errors
    /// When the stream is not a valid archive of `format`, when an entry's path escapes the root
    /// (`..`), or when the kept files would exceed the size limit.
    pub fn apply(&mut self, format: LayerFormat, blob: &[u8]) -> Result<(), LayerError> {
        self.apply_reader(format, blob)
    }
}

impl<S: Storage> LayerStack<S> {
    /// Starts an empty file tree kept in `storage`, with the same rules as [`LayerStack::new`].
    #[must_use]
    pub fn with_storage(prefix: &str, max_bytes: u64, storage: S) -> Self {
        let prefix = prefix.trim_start_matches("./").trim_start_matches('/');
        Self {
            prefix: prefix.to_owned(),
            max_bytes,
            index: BTreeMap::new(),
            used: 0,
            names: 0,
            decompressed: 0,
            entries: 0,
            storage,
            cancel: None,
        }
    }

    /// Stops extraction with [`LayerError::Cancelled`] as soon as `cancel` is set: checked
    /// before every entry and every read of the layer stream (at most 64 KiB apart), skipped
    /// entries included, so a pull dropped at its deadline stops its extraction within
    /// milliseconds instead of finishing it beside the retry.
    #[must_use]
    pub fn with_cancel(mut self, cancel: Arc<AtomicBool>) -> Self {
        self.cancel = Some(cancel);
        self
    }

    /// Applies one layer read from `reader` (a file, a socket...) on top of the previous ones.
    /// Nothing is read whole: entries are read one by one, extended headers up to
    /// [`MAX_EXTENDED_HEADER_BYTES`], file data in [`COPY_BUFFER_BYTES`] steps after the byte
    /// budget was checked against the size the entry declares.
    ///
    /// # Errors
    /// As [`LayerStack::apply`], and [`LayerError::Storage`] when the storage fails.
    pub fn apply_reader(
        &mut self,
        format: LayerFormat,
        reader: impl Read,
    ) -> Result<(), LayerError> {
        let meter = Meter {
            decompressed: Cell::new(self.decompressed),
            layer_decompressed: Cell::new(0),
            compressed: Cell::new(0),
            gzip: format == LayerFormat::TarGzip,
            cancel: self.cancel.clone(),
            stopped: Cell::new(None),
        };
        let result = match format {
            LayerFormat::Tar => self.apply_tar(Metered::new(reader, &meter), format, &meter),
            LayerFormat::TarGzip => self.apply_tar(
                Metered::new(
                    MultiGzDecoder::new(Compressed {
                        inner: reader,
                        meter: &meter,
                    }),
                    &meter,
                ),
                format,
                &meter,
            ),
        };
        self.decompressed = meter.decompressed.get();
        result
    }

    /// The kept files by key with their sizes, in key order.
    #[must_use]
    pub fn index(&self) -> &BTreeMap<String, u64> {
        &self.index
    }

    /// The storage, once every layer is applied.
    #[must_use]
    pub fn into_storage(self) -> S {
        self.storage
    }

    /// The storage and the index of kept files.
    #[must_use]
    pub fn into_parts(self) -> (S, BTreeMap<String, u64>) {
        (self.storage, self.index)
    }

    #[allow(clippy::too_many_lines)]
    fn apply_tar(
        &mut self,
        reader: impl Read,
        format: LayerFormat,
        meter: &Meter,
    ) -> Result<(), LayerError> {
        // The entry read last, for messages: a limit reached while the tar reader skips the
        // rest of an entry is reached in that entry.
        let mut current = String::from("(the first entry)");
        // An error of the stream is the meter's stop (a limit, a cancellation) when it
        // stopped, else the archive's fault.
        let failed = |err: std::io::Error, current: &str| match meter.stopped.take() {
            Some(stop) => stop.error(current),
            None => LayerError::Corrupt {
                format: format.name(),
                reason: err.to_string(),
            },
        };
        let mut archive = tar::Archive::new(reader);
        // Raw entries: GNU long names and PAX headers come to POM as entries of their own, so
        // their size is checked before they are read (see MAX_EXTENDED_HEADER_BYTES).
        let entries = archive
            .entries()
            .map_err(|err| failed(err, &current))?
            .raw(true);
        // Paths this layer wrote: an opaque whiteout only hides what lower layers put there.
        let mut written = BTreeSet::new();
        // Folders this layer made opaque already (a repeat changes nothing).
        let mut opaqued = BTreeSet::new();
        let mut long_path: Option<String> = None;
        let mut long_link: Option<String> = None;
        let mut buffer = vec![0_u8; COPY_BUFFER_BYTES];
        for entry in entries {
            let mut entry = entry.map_err(|err| failed(err, &current))?;
            if let Some(stop) = meter.check_cancel() {
                return Err(stop.error(&current));
            }
            self.entries += 1;
            if self.entries > MAX_LAYER_ENTRIES {
                return Err(LayerError::TooManyEntries {
                    limit: MAX_LAYER_ENTRIES,
                });
            }
            let kind = entry.header().entry_type();
            if kind.is_gnu_longname()
                || kind.is_gnu_longlink()
                || kind.is_pax_local_extensions()
                || kind.is_pax_global_extensions()
            {
                current = String::from("(a long name or PAX header)");
                let size = entry.header().size().map_err(|err| failed(err, &current))?;
                if size > MAX_EXTENDED_HEADER_BYTES {
                    return Err(LayerError::HeaderTooLarge {
                        size,
                        limit: MAX_EXTENDED_HEADER_BYTES,
                    });
                }
                let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
                (&mut entry)
                    .take(size)
                    .read_to_end(&mut data)
                    .map_err(|err| failed(err, &current))?;
                if kind.is_gnu_longname() {
                    long_path = Some(gnu_text(&data));
                } else if kind.is_gnu_longlink() {
                    long_link = Some(gnu_text(&data));
                } else if kind.is_pax_local_extensions() {
                    for (key, value) in pax_records(&data) {
                        match key {
                            "path" => long_path = Some(value.to_owned()),
                            "linkpath" => long_link = Some(value.to_owned()),
                            _ => {}
                        }
                    }
                }
                continue;
            }
            let raw = long_path
                .take()
                .unwrap_or_else(|| String::from_utf8_lossy(&entry.path_bytes()).into_owned());
            let link = long_link.take();
            current = quoted(&raw);
            check_path_length(&raw)?;
            if let Some(link) = &link {
                check_path_length(link)?;
            }
            let Some(path) = normalize(&raw)? else {
                continue;
            };
            let (dir, base) = split(&path);
            if base == OPAQUE_WHITEOUT {
                if opaqued.insert(dir.to_owned()) {
                    self.remove_under(dir, &written)?;
                }
                continue;
            }
            if let Some(hidden) = base.strip_prefix(WHITEOUT_PREFIX) {
                let target = join(dir, hidden);
                self.remove_path(&target)?;
                continue;
            }
            let Some(key) = self.key_for(&path) else {
                continue;
            };
            if kind.is_file() {
                let size = entry.header().size().map_err(|err| failed(err, &current))?;
                self.make_room(&key, size)?;
                let mut sink = self.storage.create(&key, size)?;
                let mut left = size;
                while left > 0 {
                    let step = usize::try_from(left.min(COPY_BUFFER_BYTES as u64))
                        .unwrap_or(COPY_BUFFER_BYTES);
                    let chunk = buffer.get_mut(..step).unwrap_or_default();
                    let read = entry.read(chunk).map_err(|err| failed(err, &current))?;
                    if read == 0 {
                        return Err(failed(std::io::ErrorKind::UnexpectedEof.into(), &current));
                    }
                    sink.write_all(chunk.get(..read).unwrap_or_default())
                        .map_err(|err| self.storage.write_failed(&key, &err))?;
                    left -= read as u64;
                }
                self.storage.finish(&key, sink)?;
                self.record(key.clone(), size);
            } else if kind.is_hard_link() {
                let target = link.unwrap_or_else(|| {
                    entry
                        .link_name_bytes()
                        .map(|t| String::from_utf8_lossy(&t).into_owned())
                        .unwrap_or_default()
                });
                let Some(target) = normalize(&target)? else {
                    continue;
                };
                let Some((source, size)) = self
                    .key_for(&target)
                    .and_then(|k| self.index.get(&k).map(|size| (k, *size)))
                else {
                    continue;
                };
                if source == key {
                    // A link to itself changes nothing.
                    written.insert(key);
                    continue;
                }
                if source.starts_with(&format!("{key}/")) || key.starts_with(&format!("{source}/"))
                {
                    // A file linked from below itself or above itself: no file system holds
                    // both, the entry is skipped.
                    continue;
                }
                self.make_room(&key, size)?;
                self.storage.copy(&source, &key)?;
                self.record(key.clone(), size);
            } else {
                // A folder, symlink or device replaces a file of the same path.
                self.remove_key(&key)?;
                continue;
            }
            written.insert(key);
        }
        Ok(())
    }

    /// Checks that `size` more bytes at `key` fit the budget (a file replaced in place frees
    /// its old bytes), then clears the way for a file at `key`: a kept file at an ancestor
    /// path or kept files below `key` are replaced by it, as on a real file system.
    ///
    /// The name is charged too: [`NAME_COPIES`] times its length against the byte budget, and
    /// once against [`MAX_NAME_BYTES`] when it is a new key.
    fn make_room(&mut self, key: &str, size: u64) -> Result<(), LayerError> {
        let name = key.len() as u64;
        let replaced = self
            .index
            .get(key)
            .map_or(0, |old| old.saturating_add(NAME_COPIES * name));
        let cost = size.saturating_add(NAME_COPIES * name);
        check_budget(self.used.saturating_sub(replaced), cost, self.max_bytes)?;
        if !self.index.contains_key(key) {
            let names = self.names.saturating_add(name);
            if names > MAX_NAME_BYTES {
                return Err(LayerError::NamesTooLarge {
                    path: quoted(key),
                    size: names,
                    limit: MAX_NAME_BYTES,
                });
            }
        }
        let mut ancestor = key;
        while let Some((parent, _)) = ancestor.rsplit_once('/') {
            if self.index.contains_key(parent) {
                self.remove_key(parent)?;
            }
            ancestor = parent;
        }
        for below in self.keys_below(key).into_iter().filter(|k| k != key) {
            self.remove_key(&below)?;
        }
        Ok(())
    }

    fn record(&mut self, key: String, size: u64) {
        let name = key.len() as u64;
        self.used += size + NAME_COPIES * name;
        match self.index.insert(key, size) {
            Some(old) => self.used = self.used.saturating_sub(old + NAME_COPIES * name),
            None => self.names += name,
        }
    }

    fn remove_key(&mut self, key: &str) -> Result<(), LayerError> {
        if let Some(old) = self.index.remove(key) {
            let name = key.len() as u64;
            self.used = self.used.saturating_sub(old + NAME_COPIES * name);
            self.names = self.names.saturating_sub(name);
            self.storage.remove(key)?;
        }
        Ok(())
    }

    /// The map key of an image path, when it lies under the prefix.
    fn key_for(&self, path: &str) -> Option<String> {
        if self.prefix.is_empty() {
            return Some(path.to_owned());
        }
        let rest = path.strip_prefix(&self.prefix)?;
        // `configs/` keeps `configs/a`; `configs` (no slash) keeps `configs/a` and not `configsx`.
        let rest = if self.prefix.ends_with('/') {
            rest
        } else {
            rest.strip_prefix('/')?
        };
        (!rest.is_empty()).then(|| rest.to_owned())
    }

    /// Whether `path` is the kept folder itself or one of its ancestors (so deleting or
    /// emptying it reaches every kept file).
    fn covers_prefix(&self, path: &str) -> bool {
        let folder = self.prefix.trim_end_matches('/');
        path.is_empty() || folder == path || folder.starts_with(&format!("{path}/"))
    }

    /// Keys at or below `key`, in order: `key` itself, then `key/…` (found by range, so a
    /// whiteout costs what it removes, not what the image holds).
    fn keys_below(&self, key: &str) -> Vec<String> {
        let below = format!("{key}/");
        let exact = self.index.contains_key(key).then(|| key.to_owned());
        exact
            .into_iter()
            .chain(
                self.index
                    .range(below.clone()..)
                    .map(|(k, _)| k)
                    .take_while(|k| k.starts_with(&below))
                    .cloned(),
            )
            .collect()
    }

    /// Removes `path` and everything below it (a whiteout).
    fn remove_path(&mut self, path: &str) -> Result<(), LayerError> {
        let doomed: Vec<String> = if self.covers_prefix(path) {
            self.index.keys().cloned().collect()
        } else {
            match self.key_for(path) {
                Some(key) => self.keys_below(&key),
                None => Vec::new(),
            }
        };
        for key in doomed {
            self.remove_key(&key)?;
        }
        Ok(())
    }

    /// Removes what lower layers put under `dir` (an opaque whiteout).
    fn remove_under(&mut self, dir: &str, written: &BTreeSet<String>) -> Result<(), LayerError> {
        let candidates: Vec<String> = if self.covers_prefix(dir) {
            self.index.keys().cloned().collect()
        } else {
            match self.key_for(dir) {
                Some(key) => self
                    .keys_below(&key)
                    .into_iter()
                    .filter(|k| *k != key)
                    .collect(),
                None => Vec::new(),
            }
        };
        for key in candidates {
            if !written.contains(&key) {
                self.remove_key(&key)?;
            }
        }
        Ok(())
    }
}

/// What stopped a layer stream: a limit on decompressed bytes or a cancellation.
#[derive(Debug, Clone, Copy)]
enum Stop {
    Total,
    Ratio { decompressed: u64, compressed: u64 },
    Cancelled,
}

impl Stop {
    fn error(self, entry: &str) -> LayerError {
        let entry = entry.to_owned();
        match self {
            Self::Total => LayerError::TooMuchData {
                entry,
                limit: MAX_DECOMPRESSED_BYTES,
            },
            Self::Ratio {
                decompressed,
                compressed,
            } => LayerError::ExpansionTooHigh {
                entry,
                decompressed,
                compressed,
                ratio: MAX_EXPANSION_RATIO,
                allowance: EXPANSION_ALLOWANCE_BYTES,
            },
            Self::Cancelled => LayerError::Cancelled { entry },
        }
    }
}

/// What one layer's stream cost so far, charged as the tar reader reads (skipped entries
/// included: the tar reader skips by reading).
struct Meter {
    /// Decompressed bytes of the image so far (this layer and the ones before).
    decompressed: Cell<u64>,
    /// Decompressed bytes of this layer.
    layer_decompressed: Cell<u64>,
    /// Compressed bytes of this layer read by the decoder (gzip only).
    compressed: Cell<u64>,
    gzip: bool,
    cancel: Option<Arc<AtomicBool>>,
    /// Why the stream was stopped, for the stack to report instead of the read error.
    stopped: Cell<Option<Stop>>,
}

impl Meter {
    fn check_cancel(&self) -> Option<Stop> {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
            .then_some(Stop::Cancelled)
    }

    /// Charges `read` decompressed bytes; the stop when a limit is passed.
    fn charge(&self, read: u64) -> Option<Stop> {
        let total = self.decompressed.get().saturating_add(read);
        self.decompressed.set(total);
        let layer = self.layer_decompressed.get().saturating_add(read);
        self.layer_decompressed.set(layer);
        if total > MAX_DECOMPRESSED_BYTES {
            return Some(Stop::Total);
        }
        let compressed = self.compressed.get();
        let allowed = compressed
            .saturating_mul(MAX_EXPANSION_RATIO)
            .saturating_add(EXPANSION_ALLOWANCE_BYTES);
        if self.gzip && layer > allowed {
            return Some(Stop::Ratio {
                decompressed: layer,
                compressed,
            });
        }
        None
    }
}

/// The compressed side of a gzip layer, counted.
struct Compressed<'a, R> {
    inner: R,
    meter: &'a Meter,
}

impl<R: Read> Read for Compressed<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let read = self.inner.read(buf)?;
        self.meter
            .compressed
            .set(self.meter.compressed.get().saturating_add(read as u64));
        Ok(read)
    }
}

/// The decompressed tar stream, charged to the meter and stopped (an error the stack replaces
/// with the meter's reason) once a limit is passed or the extraction is cancelled.
struct Metered<'a, R> {
    inner: R,
    meter: &'a Meter,
}

impl<'a, R> Metered<'a, R> {
    fn new(inner: R, meter: &'a Meter) -> Self {
        Self { inner, meter }
    }
}

impl<R: Read> Read for Metered<'_, R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let stop = |meter: &Meter, stop: Stop| {
            meter.stopped.set(Some(stop));
            std::io::Error::other("layer stream stopped")
        };
        if let Some(cancelled) = self.meter.check_cancel() {
            return Err(stop(self.meter, cancelled));
        }
        // Never more than a copy step at once, so limits and cancellation are seen often.
        let len = buf.len().min(COPY_BUFFER_BYTES);
        let read = self.inner.read(buf.get_mut(..len).unwrap_or_default())?;
        match self.meter.charge(read as u64) {
            Some(limit) => Err(stop(self.meter, limit)),
            None => Ok(read),
        }
    }
}

/// A path for a message, cut to [`QUOTED_PATH_BYTES`] (a refused path may be 64 KiB long).
fn quoted(path: &str) -> String {
    if path.len() <= QUOTED_PATH_BYTES {
        return path.to_owned();
    }
    let mut end = QUOTED_PATH_BYTES;
    while !path.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}... ({} bytes)",
        path.get(..end).unwrap_or_default(),
        path.len()
    )
}

/// Refuses a path longer than [`MAX_PATH_BYTES`].
fn check_path_length(path: &str) -> Result<(), LayerError> {
    let size = path.len() as u64;
    if size > MAX_PATH_BYTES {
        return Err(LayerError::PathTooLong {
            path: quoted(path),
            size,
            limit: MAX_PATH_BYTES,
        });
    }
    Ok(())
}

/// The text of a GNU long-name or long-link entry (NUL-terminated).
fn gnu_text(data: &[u8]) -> String {
    let end = data.iter().position(|b| *b == 0).unwrap_or(data.len());
    String::from_utf8_lossy(data.get(..end).unwrap_or_default()).into_owned()
}

/// The `key=value` records of a PAX extended header (`"<len> <key>=<value>\n"` each); a
/// malformed record ends the list.
fn pax_records(data: &[u8]) -> Vec<(&str, &str)> {
    let mut records = Vec::new();
    let mut rest = data;
    while !rest.is_empty() {
        let Some(space) = rest.iter().position(|b| *b == b' ') else {
            break;
        };
        let Some(len) = std::str::from_utf8(rest.get(..space).unwrap_or_default())
            .ok()
            .and_then(|n| n.parse::<usize>().ok())
        else {
            break;
        };
        let Some(record) = rest.get(space + 1..len) else {
            break;
        };
        let record = record.strip_suffix(b"\n").unwrap_or(record);
        if let Ok(text) = std::str::from_utf8(record)
            && let Some((key, value)) = text.split_once('=')
        {
            records.push((key, value));
        }
        rest = rest.get(len..).unwrap_or_default();
    }
    records
}

fn check_budget(used: u64, more: u64, limit: u64) -> Result<(), LayerError> {
    let size = used.saturating_add(more);
    if size > limit {
        Err(LayerError::TooLarge { size, limit })
    } else {
        Ok(())
    }
}

/// Turns a tar path into a clean relative path: no leading `/` or `./`, no empty or `.`
/// components. `None` for the root itself; an error for `..`.
fn normalize(raw: &str) -> Result<Option<String>, LayerError> {
    let mut parts = Vec::new();
    for part in raw.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err(LayerError::UnsafePath {
                    path: raw.to_owned(),
                });
            }
            other => parts.push(other),
        }
    }
    Ok((!parts.is_empty()).then(|| parts.join("/")))
}

/// Splits a clean path into its folder (possibly empty) and base name.
fn split(path: &str) -> (&str, &str) {
    match path.rsplit_once('/') {
        Some((dir, base)) => (dir, base),
        None => ("", path),
    }
}

fn join(dir: &str, base: &str) -> String {
    if dir.is_empty() {
        base.to_owned()
    } else {
        format!("{dir}/{base}")
    }
}
