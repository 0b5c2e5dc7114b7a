//! Finding catalog files on disk: one file, or a folder walked recursively in sorted order.
//!
//! Like operator-registry, only `.json`, `.yaml` and `.yml` files are read (so READMEs, licences
//! and Dockerfiles next to a catalog are fine), `.indexignore` files are honoured, and symbolic
//! links to folders are not followed (no loops). Sorting makes error messages and `others`
//! order independent of the file system.

use std::fs;
use std::path::{Path, PathBuf};

use super::error::FbcError;
use super::ignore::{INDEXIGNORE, IgnoreRules};

/// A catalog file to read: where it is and the label blobs from it carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct CatalogFile {
    pub(crate) path: PathBuf,
    pub(crate) label: String,
}

fn io_error(path: &Path, error: &std::io::Error) -> FbcError {
    FbcError::Io {
        path: path.display().to_string(),
        reason: error.to_string(),
    }
}

/// Whether a file name has a catalog extension.
fn is_catalog_file(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    [".json", ".yaml", ".yml"]
        .iter()
        .any(|ext| lower.ends_with(ext))
}

/// The catalog files at `path`: the file itself, or the files found under the folder.
pub(crate) fn catalog_files(path: &Path) -> Result<Vec<CatalogFile>, FbcError> {
    catalog_files_labelled(path, None)
}

/// [`catalog_files`], each labelled `label_prefix` followed by its path under `path` (its
/// name, for a file) when a prefix is given, by its path on disk otherwise.
pub(crate) fn catalog_files_labelled(
    path: &Path,
    label_prefix: Option<&str>,
) -> Result<Vec<CatalogFile>, FbcError> {
    let metadata = fs::metadata(path).map_err(|e| io_error(path, &e))?;
    if !metadata.is_dir() {
        let label = match label_prefix {
            Some(prefix) => format!(
                "{prefix}{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            ),
            None => path.display().to_string(),
        };
        return Ok(vec![CatalogFile {
            path: path.to_path_buf(),
            label,
        }]);
    }
    let mut files = Vec::new();
    walk(path, "", &IgnoreRules::default(), &mut files)?;
    if let Some(prefix) = label_prefix {
        for file in &mut files {
            let relative = file.path.strip_prefix(path).unwrap_or(&file.path);
            file.label = format!("{prefix}{}", relative.display());
        }
    }
    Ok(files)
}

fn walk(
    dir: &Path,
    relative: &str,
    inherited: &IgnoreRules,
    out: &mut Vec<CatalogFile>,
) -> Result<(), FbcError> {
    let mut entries: Vec<(String, PathBuf, fs::FileType)> = Vec::new();
    for entry in fs::read_dir(dir).map_err(|e| io_error(dir, &e))? {
        let entry = entry.map_err(|e| io_error(dir, &e))?;
        let file_type = entry.file_type().map_err(|e| io_error(&entry.path(), &e))?;
        entries.push((
            entry.file_name().to_string_lossy().into_owned(),
            entry.path(),
            file_type,
        ));
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));

    let mut rules = inherited.clone();
    if let Some((_, ignore_path, _)) = entries
        .iter()
        .find(|(name, _, t)| name == INDEXIGNORE && !t.is_dir())
    {
        let content = fs::read_to_string(ignore_path).map_err(|e| io_error(ignore_path, &e))?;
        rules
            .add_file(relative, &content)
            .map_err(|reason| FbcError::Io {
                path: ignore_path.display().to_string(),
                reason: format!("{reason}; shorten the pattern"),
            })?;
    }

    for (name, path, file_type) in entries {
        let child = if relative.is_empty() {
            name.clone()
        } else {
            format!("{relative}/{name}")
        };
        if file_type.is_dir() {
            if !rules.is_ignored(&child, true) {
                walk(&path, &child, &rules, out)?;
            }
            continue;
        }
        // Symbolic links are followed to files only.
        let is_file = file_type.is_file() || (file_type.is_symlink() && path.is_file());
        if is_file
            && name != INDEXIGNORE
            && is_catalog_file(&name)
            && !rules.is_ignored(&child, false)
        {
            out.push(CatalogFile {
                label: path.display().to_string(),
                path,
            });
        }
    }
    Ok(())
}

/// Reads one catalog file.
pub(crate) fn read(file: &CatalogFile) -> Result<Vec<u8>, FbcError> {
    fs::read(&file.path).map_err(|e| io_error(&file.path, &e))
}
