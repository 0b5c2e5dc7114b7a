//! Image content on disk, for catalogs (issue 10): a catalog image of 150 MB must not cost
//! hundreds of MiB of memory, so its layers are streamed to a file, applied from that file and
//! the kept files written to a directory, never held whole in memory.
//!
//! Layout under a root folder owned by the manager (an emptyDir, so content survives restarts
//! of the manager within its pod):
//!
//! - `<algorithm>-<hex>` (the manifest digest, for the prefix `""`), or
//!   `<algorithm>-<hex>_<prefix>` (the prefix without its slashes at either end, with every
//!   byte other than `[A-Za-z0-9.-]` written `%XX`): one complete content folder per pulled
//!   (digest, prefix). Content addressed by digest never changes, so a folder that exists is
//!   reused as is.
//! - `.staging-<name>-<pid>-<n>-<nanos>`: a pull in progress. It holds `lock` (an exclusive
//!   `flock` held by the pulling process for as long as the staging folder lives), `blob` (the
//!   layer being downloaded) and `tree` (the files kept so far). When every layer is applied,
//!   the files and folders of `tree` are fsynced, `tree` is renamed to the content folder in one
//!   atomic `rename` and the root folder is fsynced: a content folder is either complete or
//!   absent, whatever crash happens when.
//! - `.trash-<name>-<pid>-<n>-<nanos>`: a content folder being removed ([`retain_pulled`]);
//!   renamed away first, so a content folder never exists half-removed.
//!
//! Leftovers of a crash (a staging folder whose lock no living process holds, trash) are removed
//! by the next pull or [`retain_pulled`].

use std::collections::BTreeSet;
use std::fs::{self, File};
use std::io::{self, ErrorKind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use crate::error::LayerError;
use crate::layers::Storage;

const STAGING_PREFIX: &str = ".staging-";
const TRASH_PREFIX: &str = ".trash-";
const LOCK_FILE: &str = "lock";
const NEW_LOCK_FILE: &str = "lock.new";
const BLOB_FILE: &str = "blob";
const TREE_DIR: &str = "tree";
/// A staging folder without its lock file is one whose creator died between `mkdir` and
/// creating the lock (microseconds); past this age it is removed.
const UNLOCKED_STAGING_GRACE: Duration = Duration::from_secs(600);
/// Longest prefix written out in a content folder name; longer ones are named by hash, so
/// that names stay within the 255 bytes file systems take.
const MAX_PREFIX_IN_NAME: usize = 96;

/// Keeps files in a folder on disk (the `tree` of a staging folder). Each file is written as
/// the layer is read, in [`crate::layers::COPY_BUFFER_BYTES`] steps; nothing is buffered whole.
#[derive(Debug)]
pub struct DiskStorage {
    tree: PathBuf,
}

impl DiskStorage {
    /// Keeps files under `tree`, which is created if missing and should be empty.
    ///
    /// # Errors
    /// [`LayerError::Storage`] when the folder cannot be created.
    pub fn new(tree: &Path) -> Result<Self, LayerError> {
        fs::create_dir_all(tree).map_err(|err| storage_error(tree, "create the folder", &err))?;
        Ok(Self {
            tree: tree.to_owned(),
        })
    }

    /// The folder the files are kept in.
    #[must_use]
    pub fn tree(&self) -> &Path {
        &self.tree
    }

    fn path(&self, key: &str) -> PathBuf {
        // Keys are clean relative paths (see `Storage`): joining cannot leave the tree.
        self.tree.join(key)
    }

    /// Clears the way for a file at `path`: its folder exists, and no (empty, left over)
    /// folder stands where the file goes.
    fn prepare(&self, path: &Path) -> Result<(), LayerError> {
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent)
                .map_err(|err| storage_error(parent, "create the folder", &err))?;
        }
        match fs::symlink_metadata(path) {
            Ok(meta) if meta.is_dir() => fs::remove_dir_all(path)
                .map_err(|err| storage_error(path, "remove the folder", &err)),
            _ => Ok(()),
        }
    }

    /// Removes the folders above `path` that became empty, up to the tree itself, so that a
    /// whiteout leaves no empty folders behind.
    fn prune(&self, path: &Path) {
        let mut dir = path.parent();
        while let Some(current) = dir {
            if current == self.tree || !current.starts_with(&self.tree) {
                break;
            }
            // Fails (and stops) at the first folder that still holds something.
            if fs::remove_dir(current).is_err() {
                break;
            }
            dir = current.parent();
        }
    }

    /// Makes the kept files and every folder of the tree durable, so that the rename that
    /// publishes the tree never publishes files whose bytes a power loss would lose.
    ///
    /// # Errors
    /// [`LayerError::Storage`] when a file or folder cannot be synced.
    pub fn sync<'a>(&self, keys: impl IntoIterator<Item = &'a str>) -> Result<(), LayerError> {
        let mut folders = BTreeSet::new();
        folders.insert(self.tree.clone());
        for key in keys {
            let path = self.path(key);
            File::open(&path)
                .and_then(|file| file.sync_all())
                .map_err(|err| storage_error(&path, "sync", &err))?;
            let mut dir = path.parent();
            while let Some(current) = dir {
                if !current.starts_with(&self.tree) || !folders.insert(current.to_owned()) {
                    break;
                }
                dir = current.parent();
            }
        }
        for folder in folders {
            sync_dir(&folder)?;
        }
        Ok(())
    }
}

impl Storage for DiskStorage {
    type Sink = File;

    fn create(&mut self, key: &str, _size: u64) -> Result<File, LayerError> {
        let path = self.path(key);
        self.prepare(&path)?;
        File::create(&path).map_err(|err| storage_error(&path, "create", &err))
    }

    fn finish(&mut self, _key: &str, _sink: File) -> Result<(), LayerError> {
        // Synced once, at the end, only for the files still kept (see `sync`).
        Ok(())
    }

    fn write_failed(&self, key: &str, err: &io::Error) -> LayerError {
        storage_error(&self.path(key), "write", err)
    }

    fn copy(&mut self, from: &str, to: &str) -> Result<(), LayerError> {
        let (source, target) = (self.path(from), self.path(to));
        self.prepare(&target)?;
        // A copy, not a hard link: a later layer rewriting one of the two must not change the
        // other (files are rewritten in place).
        fs::copy(&source, &target).map_err(|err| storage_error(&target, "copy", &err))?;
        Ok(())
    }

    fn remove(&mut self, key: &str) -> Result<(), LayerError> {
        let path = self.path(key);
        match fs::remove_file(&path) {
            Ok(()) => {
                self.prune(&path);
                Ok(())
            }
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(()),
            Err(err) => Err(storage_error(&path, "remove", &err)),
        }
    }
}

fn storage_error(path: &Path, action: &'static str, err: &io::Error) -> LayerError {
    LayerError::Storage {
        path: path.display().to_string(),
        action,
        reason: err.to_string(),
    }
}

fn sync_dir(dir: &Path) -> Result<(), LayerError> {
    File::open(dir)
        .and_then(|file| file.sync_all())
        .map_err(|err| storage_error(dir, "sync the folder", &err))
}

/// The name of the content folder of `digest` (`sha256:<hex>`) and `prefix` under the root,
/// `None` when the digest is not `<algorithm>:<lowercase hex>` (the only digests registries
/// use; anything else could not be a safe file name).
#[must_use]
pub fn content_dir_name(digest: &str, prefix: &str) -> Option<String> {
    let (algorithm, hex) = digest.split_once(':')?;
    let algorithm_ok = !algorithm.is_empty()
        && algorithm
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let hex_ok = !hex.is_empty()
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    if !algorithm_ok || !hex_ok {
        return None;
    }
    let folder = prefix
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_end_matches('/');
    if folder.is_empty() {
        return Some(format!("{algorithm}-{hex}"));
    }
    let mut encoded = String::with_capacity(folder.len());
    for byte in folder.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'.' || byte == b'-' {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    if encoded.len() > MAX_PREFIX_IN_NAME {
        use sha2::Digest as _;
        let hash = hex::encode(sha2::Sha256::digest(folder.as_bytes()));
        encoded = format!("~{}", hash.get(..32).unwrap_or(&hash));
    }
    Some(format!("{algorithm}-{hex}_{encoded}"))
}

/// The digest part (`<algorithm>-<hex>`) of a content folder name, `None` for anything else in
/// the root (staging, trash, foreign files).
fn digest_part(name: &str) -> Option<&str> {
    let digest = name.split_once('_').map_or(name, |(digest, _)| digest);
    let (algorithm, hex) = digest.split_once('-')?;
    let ok = !algorithm.is_empty()
        && algorithm
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
        && !hex.is_empty()
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then_some(digest)
}

/// A name no other staging or trash folder has, in this process or another one sharing the
/// root: the pid, a counter and the clock.
fn unique_suffix() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    let nanos = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{}-{count}-{nanos}", std::process::id())
}

/// A pull in progress: its folder under the root and the lock that tells other pulls it is
/// alive. Dropping it (an error, a cancelled pull) removes the folder.
#[derive(Debug)]
pub(crate) struct Staging {
    dir: PathBuf,
    /// Held (flock) for as long as the staging folder lives; released by the kernel if the
    /// process dies, which is how a later pull tells a crash leftover from a live pull.
    lock: File,
}

impl Staging {
    /// Creates a fresh staging folder for content folder `name` under `root`, locked.
    pub(crate) fn create(root: &Path, name: &str) -> Result<Self, LayerError> {
        loop {
            let dir = root.join(format!("{STAGING_PREFIX}{name}-{}", unique_suffix()));
            match fs::create_dir(&dir) {
                Ok(()) => {}
                Err(err) if err.kind() == ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(storage_error(&dir, "create the staging folder", &err)),
            }
            // Locked under another name, then renamed: a cleaner only looks at `lock`, so it
            // never sees the file between its creation and its locking (and takes a staging
            // folder without one for a pull about to lock it, see UNLOCKED_STAGING_GRACE).
            let fresh = dir.join(NEW_LOCK_FILE);
            let lock = File::create(&fresh).map_err(|err| storage_error(&fresh, "create", &err))?;
            let staging = Self { dir, lock };
            staging
                .lock
                .try_lock()
                .map_err(|err| storage_error(&fresh, "lock", &io::Error::from(err)))?;
            let lock_path = staging.dir.join(LOCK_FILE);
            fs::rename(&fresh, &lock_path)
                .map_err(|err| storage_error(&lock_path, "rename the lock file to", &err))?;
            return Ok(staging);
        }
    }

    /// Where the layer being applied is downloaded to.
    pub(crate) fn blob(&self) -> PathBuf {
        self.dir.join(BLOB_FILE)
    }

    /// Where the kept files go.
    pub(crate) fn tree(&self) -> PathBuf {
        self.dir.join(TREE_DIR)
    }

    /// Publishes the tree as `root/name`: syncs it (files, folders), renames it into place and
    /// syncs the root. When another pull published the same content first, its folder is kept
    /// (same digest, same bytes) and this one dropped.
    pub(crate) fn publish<'a>(
        self,
        storage: &DiskStorage,
        keys: impl IntoIterator<Item = &'a str>,
        root: &Path,
        name: &str,
    ) -> Result<PathBuf, LayerError> {
        storage.sync(keys)?;
        let target = root.join(name);
        match fs::rename(storage.tree(), &target) {
            Ok(()) => {}
            Err(_) if target.is_dir() => {
                tracing::debug!(path = %target.display(), "another pull published the same content first");
            }
            Err(err) => return Err(storage_error(&target, "rename the staging tree to", &err)),
        }
        sync_dir(root)?;
        drop(self);
        Ok(target)
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        // Best effort: a folder that cannot be removed now is a leftover the next pull removes.
        if let Err(err) = fs::remove_dir_all(&self.dir)
            && err.kind() != ErrorKind::NotFound
        {
            tracing::warn!(path = %self.dir.display(), error = %err, "could not remove a staging folder; the next pull retries");
        }
    }
}

/// Removes what crashed pulls and removals left under `root`: staging folders whose lock no
/// living process holds (a live pull, of this process or another, holds its lock and is left
/// alone), and trash. Best effort: what cannot be removed now is retried next time.
pub(crate) fn remove_leftovers(root: &Path) {
    let Ok(entries) = fs::read_dir(root) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let path = entry.path();
        if name.starts_with(TRASH_PREFIX) {
            remove_quietly(&path);
        } else if name.starts_with(STAGING_PREFIX) && is_abandoned(&path) {
            tracing::info!(path = %path.display(), "removing the staging folder of an interrupted pull");
            remove_quietly(&path);
        }
    }
}

/// Whether no living process holds the staging folder's lock.
fn is_abandoned(dir: &Path) -> bool {
    match File::open(dir.join(LOCK_FILE)) {
        // The lock is released when this `File` is dropped, after the check: a removal racing
        // with nothing (the owner died) is safe.
        Ok(lock) => lock.try_lock().is_ok(),
        Err(err) if err.kind() == ErrorKind::NotFound => fs::symlink_metadata(dir)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .is_some_and(|age| age > UNLOCKED_STAGING_GRACE),
        Err(_) => false,
    }
}

fn remove_quietly(path: &Path) {
    if let Err(err) = fs::remove_dir_all(path)
        && err.kind() != ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %err, "could not remove a leftover folder; retried on the next pull");
    }
}

/// Removes every content folder under `root` whose digest is not in `keep`, and the leftovers
/// of crashed pulls; returns the content folders removed. `keep` takes digests
/// (`sha256:<hex>`) or by-digest references (`registry/repository@sha256:<hex>`), every
/// prefix of a kept digest is kept. Entries that are not POM's (other names) are left alone.
///
/// Safe against pulls running at the same time: staging folders of live pulls are never
/// touched, and a content folder is renamed away (atomically) before it is deleted, so a pull
/// sees it either complete or absent. A pull of a digest not in `keep` that finishes after
/// this call leaves its folder until the next call: pass every digest in use or about to be.
///
/// # Errors
/// [`LayerError::Storage`] naming the first folder that could not be read or removed (the
/// others are still tried).
pub fn retain_pulled<'a>(
    root: &Path,
    keep: impl IntoIterator<Item = &'a str>,
) -> Result<Vec<PathBuf>, LayerError> {
    let keep: BTreeSet<String> = keep
        .into_iter()
        .map(|item| {
            let digest = item.rsplit_once('@').map_or(item, |(_, digest)| digest);
            digest.replacen(':', "-", 1)
        })
        .collect();
    let entries = match fs::read_dir(root) {
        Ok(entries) => entries,
        Err(err) if err.kind() == ErrorKind::NotFound => return Ok(Vec::new()),
        Err(err) => return Err(storage_error(root, "list", &err)),
    };
    let mut removed = Vec::new();
    let mut first_error = None;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            continue;
        };
        let Some(digest) = digest_part(name) else {
            continue;
        };
        if keep.contains(digest) || !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let trash = root.join(format!("{TRASH_PREFIX}{name}-{}", unique_suffix()));
        match fs::rename(&path, &trash) {
            Ok(()) => {
                remove_quietly(&trash);
                removed.push(path);
            }
            // Removed by a concurrent call.
            Err(err) if err.kind() == ErrorKind::NotFound => {}
            Err(err) => {
                first_error.get_or_insert(storage_error(&path, "remove", &err));
            }
        }
    }
    remove_leftovers(root);
    match first_error {
        Some(err) => Err(err),
        None => Ok(removed),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn names_encode_digest_and_prefix_without_ambiguity() {
        let digest = "sha256:00ff";
        assert_eq!(content_dir_name(digest, "").unwrap(), "sha256-00ff");
        assert_eq!(content_dir_name(digest, "/").unwrap(), "sha256-00ff");
        assert_eq!(
            content_dir_name(digest, "configs/").unwrap(),
            "sha256-00ff_configs"
        );
        // `configs` and `configs/` keep the same files.
        assert_eq!(
            content_dir_name(digest, "./configs").unwrap(),
            "sha256-00ff_configs"
        );
        assert_eq!(
            content_dir_name(digest, "a/b_c").unwrap(),
            "sha256-00ff_a%2Fb%5Fc"
        );
        let long = content_dir_name(digest, &"x".repeat(500)).unwrap();
        assert!(
            long.len() < 120 && long.starts_with("sha256-00ff_~"),
            "{long}"
        );
        assert_eq!(content_dir_name("sha256:00FF", ""), None);
        assert_eq!(content_dir_name("sha256:../x", ""), None);
        assert_eq!(content_dir_name("nodigest", ""), None);
        assert_eq!(digest_part("sha256-00ff_a%2Fb"), Some("sha256-00ff"));
        assert_eq!(digest_part(".staging-sha256-00ff-1-2-3"), None);
        assert_eq!(digest_part("lost+found"), None);
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("pom-oci-disk-{name}-{}", unique_suffix()));
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_live_staging_folder_is_kept_and_an_abandoned_one_removed() {
        let root = scratch("leftovers");
        let live = Staging::create(&root, "sha256-aa").unwrap();
        // A crashed pull: its folder and lock file exist, nobody holds the lock.
        let dead = root.join(".staging-sha256-bb-1-2-3");
        fs::create_dir_all(dead.join("tree/x")).unwrap();
        File::create(dead.join(LOCK_FILE)).unwrap();
        // A fresh staging folder whose lock is not created yet: within the grace period.
        let fresh = root.join(".staging-sha256-cc-1-2-3");
        fs::create_dir_all(&fresh).unwrap();
        let trash = root.join(".trash-sha256-dd-1-2-3");
        fs::create_dir_all(trash.join("a")).unwrap();
        remove_leftovers(&root);
        assert!(live.dir.is_dir(), "a live pull is left alone");
        assert!(!dead.exists(), "an abandoned pull is removed");
        assert!(
            fresh.exists(),
            "a pull about to take its lock is left alone"
        );
        assert!(!trash.exists());
        let dir = live.dir.clone();
        drop(live);
        assert!(!dir.exists(), "a dropped staging folder removes itself");
        fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn retain_removes_other_digests_only() {
        let root = scratch("retain");
        for name in [
            "sha256-aa",
            "sha256-aa_configs",
            "sha256-bb_configs",
            "sha256-cc",
            "lost+found",
            "notes",
        ] {
            fs::create_dir_all(root.join(name).join("sub")).unwrap();
        }
        fs::write(root.join("sha256-ee"), b"a file, not POM's").unwrap();
        let live = Staging::create(&root, "sha256-ff").unwrap();
        let mut removed = retain_pulled(&root, ["sha256:aa", "reg/repo@sha256:cc"]).unwrap();
        removed.sort();
        assert_eq!(removed, [root.join("sha256-bb_configs")]);
        let mut left: Vec<String> = fs::read_dir(&root)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with(STAGING_PREFIX))
            .collect();
        left.sort();
        assert_eq!(
            left,
            [
                "lost+found",
                "notes",
                "sha256-aa",
                "sha256-aa_configs",
                "sha256-cc",
                "sha256-ee"
            ]
        );
        assert!(live.dir.is_dir(), "a pull in progress is not touched");
        drop(live);
        fs::remove_dir_all(&root).unwrap();
    }
}
