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

    fn kept_bytes(&self) -> u64 {
        self.files.values().map(|data| data.len() as u64).sum()
    }

    fn apply_tar(&mut self, reader: impl Read, format: LayerFormat) -> Result<(), LayerError> {
        let corrupt = |err: std::io::Error| LayerError::Corrupt {
            format: format.name(),
            reason: err.to_string(),
        };
        let mut archive = tar::Archive::new(reader);
        // Paths this layer wrote: an opaque whiteout only hides what lower layers put there.
        let mut written = BTreeSet::new();
        let mut used = self.kept_bytes();
        for entry in archive.entries().map_err(corrupt)? {
            let mut entry = entry.map_err(corrupt)?;
            let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
            let Some(path) = normalize(&raw)? else {
                continue;
            };
            let (dir, base) = split(&path);
            if base == OPAQUE_WHITEOUT {
                self.remove_under(dir, &written);
                used = self.kept_bytes();
                continue;
            }
            if let Some(hidden) = base.strip_prefix(WHITEOUT_PREFIX) {
                let target = join(dir, hidden);
                self.remove_path(&target);
                used = self.kept_bytes();
                continue;
            }
            let Some(key) = self.key_for(&path) else {
                continue;
            };
            let kind = entry.header().entry_type();
            // A file replaced in place frees its old bytes.
            let replaced = self.files.get(&key).map_or(0, |data| data.len() as u64);
            let available_from = used.saturating_sub(replaced);
            let data = if kind.is_file() {
                let size = entry.header().size().map_err(corrupt)?;
                check_budget(available_from, size, self.max_bytes)?;
                let mut data = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
                entry.read_to_end(&mut data).map_err(corrupt)?;
                data
            } else if kind.is_hard_link() {
                let Some(target) = entry.link_name_bytes() else {
                    continue;
                };
                let target = String::from_utf8_lossy(&target).into_owned();
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
                if let Some(old) = self.files.remove(&key) {
                    used = used.saturating_sub(old.len() as u64);
                }
                continue;
            };
            used += data.len() as u64;
            if let Some(old) = self.files.insert(key.clone(), data) {
                used = used.saturating_sub(old.len() as u64);
            }
            written.insert(key);
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

    /// Removes `path` and everything below it (a whiteout).
    fn remove_path(&mut self, path: &str) {
        let below = format!("{path}/");
        let prefix = self.prefix.clone();
        self.files.retain(|key, _| {
            let full = format!("{prefix}{}{key}", separator(&prefix));
            full != path && !full.starts_with(&below)
        });
    }

    /// Removes what lower layers put under `dir` (an opaque whiteout).
    fn remove_under(&mut self, dir: &str, written: &BTreeSet<String>) {
        let below = if dir.is_empty() {
            String::new()
        } else {
            format!("{dir}/")
        };
        let prefix = self.prefix.clone();
        self.files.retain(|key, _| {
            let full = format!("{prefix}{}{key}", separator(&prefix));
            written.contains(key) || !full.starts_with(&below)
        });
    }
}

/// The separator between a prefix and a key: none when the prefix ends with `/` or is empty.
fn separator(prefix: &str) -> &'static str {
    if prefix.is_empty() || prefix.ends_with('/') {
        ""
    } else {
        "/"
    }
}

fn check_budget(used: u64, more: u64, limit: u64) -> Result<(), LayerError> {
    if used.saturating_add(more) > limit {
        Err(LayerError::TooLarge { limit })
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
