//! Applying image layers in order to get the files under one folder, in memory.
//!
//! Catalog and bundle images carry their content in a known folder (`/configs`, `/manifests`,
//! `/metadata`), so POM never writes layers to disk: it reads each tar stream, keeps the regular
//! files under the wanted prefix and applies whiteouts the simple way (`.wh.<name>` deletes
//! `<name>` and everything below it; `.wh..wh..opq` empties the folder of what lower layers put
//! there). Symbolic links, devices and folders are not content and are skipped; hard links copy
//! the file they name when it was kept.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;

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

/// Files under a prefix, built up layer by layer.
#[derive(Debug)]
pub struct LayerStack {
    prefix: String,
    max_bytes: u64,
    files: BTreeMap<String, Vec<u8>>,
    /// Bytes held in `files`, kept up to date on every insert and removal.
    used: u64,
    /// Tar entries read so far, all layers.
    entries: u64,
}

impl LayerStack {
    /// Starts an empty file tree that keeps files under `prefix` (for example `configs/`, or
    /// `""` for everything) and refuses to hold more than `max_bytes`.
    #[must_use]
    pub fn new(prefix: &str, max_bytes: u64) -> Self {
        let prefix = prefix.trim_start_matches("./").trim_start_matches('/');
        Self {
            prefix: prefix.to_owned(),
            max_bytes,
            files: BTreeMap::new(),
            used: 0,
            entries: 0,
        }
    }

    /// Applies one layer on top of the previous ones.
    ///
    /// # Errors
    /// When the stream is not a valid archive of `format`, when an entry's path escapes the root
    /// (`..`), or when the kept files would exceed the size limit.
    pub fn apply(&mut self, format: LayerFormat, blob: &[u8]) -> Result<(), LayerError> {
        match format {
            LayerFormat::Tar => self.apply_tar(blob, format),
            LayerFormat::TarGzip => self.apply_tar(MultiGzDecoder::new(blob), format),
        }
    }

    /// The kept files, keyed by their path with the prefix removed.
    #[must_use]
    pub fn into_files(self) -> BTreeMap<String, Vec<u8>> {
        self.files
    }

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
                    self.remove_under(dir, &written);
                }
                continue;
            }
            if let Some(hidden) = base.strip_prefix(WHITEOUT_PREFIX) {
                let target = join(dir, hidden);
                self.remove_path(&target);
                continue;
            }
            let Some(key) = self.key_for(&path) else {
                continue;
            };
            // A file replaced in place frees its old bytes.
            let replaced = self.files.get(&key).map_or(0, |data| data.len() as u64);
            let available_from = self.used.saturating_sub(replaced);
            let data = if kind.is_file() {
                let size = entry.header().size().map_err(corrupt)?;
                check_budget(available_from, size, self.max_bytes)?;
                let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
                (&mut entry)
                    .take(size)
                    .read_to_end(&mut data)
                    .map_err(corrupt)?;
                data
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
                let Some(data) = self.key_for(&target).and_then(|k| self.files.get(&k)) else {
                    continue;
                };
                check_budget(available_from, data.len() as u64, self.max_bytes)?;
                data.clone()
            } else {
                // A folder, symlink or device replaces a file of the same path.
                self.remove_key(&key);
                continue;
            };
            self.insert(key.clone(), data);
            written.insert(key);
        }
        Ok(())
    }

    fn insert(&mut self, key: String, data: Vec<u8>) {
        self.used += data.len() as u64;
        if let Some(old) = self.files.insert(key, data) {
            self.used = self.used.saturating_sub(old.len() as u64);
        }
    }

    fn remove_key(&mut self, key: &str) {
        if let Some(old) = self.files.remove(key) {
            self.used = self.used.saturating_sub(old.len() as u64);
        }
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
        let exact = self.files.contains_key(key).then(|| key.to_owned());
        exact
            .into_iter()
            .chain(
                self.files
                    .range(below.clone()..)
                    .map(|(k, _)| k)
                    .take_while(|k| k.starts_with(&below))
                    .cloned(),
            )
            .collect()
    }

    /// Removes `path` and everything below it (a whiteout).
    fn remove_path(&mut self, path: &str) {
        let doomed: Vec<String> = if self.covers_prefix(path) {
            self.files.keys().cloned().collect()
        } else {
            match self.key_for(path) {
                Some(key) => self.keys_below(&key),
                None => Vec::new(),
            }
        };
        for key in doomed {
            self.remove_key(&key);
        }
    }

    /// Removes what lower layers put under `dir` (an opaque whiteout).
    fn remove_under(&mut self, dir: &str, written: &BTreeSet<String>) {
        let candidates: Vec<String> = if self.covers_prefix(dir) {
            self.files.keys().cloned().collect()
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
                self.remove_key(&key);
            }
        }
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
