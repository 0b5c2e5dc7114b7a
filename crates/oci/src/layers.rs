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

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};

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
    /// Tar entries read so far, all layers.
    entries: u64,
    storage: S,
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
            entries: 0,
            storage,
        }
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
        match format {
            LayerFormat::Tar => self.apply_tar(reader, format),
            LayerFormat::TarGzip => self.apply_tar(MultiGzDecoder::new(reader), format),
        }
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
    fn apply_tar(&mut self, reader: impl Read, format: LayerFormat) -> Result<(), LayerError> {
        let corrupt = |err: std::io::Error| LayerError::Corrupt {
            format: format.name(),
            reason: err.to_string(),
        };
        let mut archive = tar::Archive::new(reader);
        // Raw entries: GNU long names and PAX headers come to POM as entries of their own, so
        // their size is checked before they are read (see MAX_EXTENDED_HEADER_BYTES).
        let entries = archive.entries().map_err(corrupt)?.raw(true);
        // Paths this layer wrote: an opaque whiteout only hides what lower layers put there.
        let mut written = BTreeSet::new();
        // Folders this layer made opaque already (a repeat changes nothing).
        let mut opaqued = BTreeSet::new();
        let mut long_path: Option<String> = None;
        let mut long_link: Option<String> = None;
        let mut buffer = vec![0_u8; COPY_BUFFER_BYTES];
        for entry in entries {
            let mut entry = entry.map_err(corrupt)?;
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
                let size = entry.header().size().map_err(corrupt)?;
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
                    .map_err(corrupt)?;
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
                let size = entry.header().size().map_err(corrupt)?;
                self.make_room(&key, size)?;
                let mut sink = self.storage.create(&key, size)?;
                let mut left = size;
                while left > 0 {
                    let step = usize::try_from(left.min(COPY_BUFFER_BYTES as u64))
                        .unwrap_or(COPY_BUFFER_BYTES);
                    let chunk = buffer.get_mut(..step).unwrap_or_default();
                    let read = entry.read(chunk).map_err(corrupt)?;
                    if read == 0 {
                        return Err(corrupt(std::io::ErrorKind::UnexpectedEof.into()));
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
    fn make_room(&mut self, key: &str, size: u64) -> Result<(), LayerError> {
        let replaced = self.index.get(key).copied().unwrap_or(0);
        check_budget(self.used.saturating_sub(replaced), size, self.max_bytes)?;
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
        self.used += size;
        if let Some(old) = self.index.insert(key, size) {
            self.used = self.used.saturating_sub(old);
        }
    }

    fn remove_key(&mut self, key: &str) -> Result<(), LayerError> {
        if let Some(old) = self.index.remove(key) {
            self.used = self.used.saturating_sub(old);
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
