//! Where the Go-built binaries are, and what to do when they are not there.

use std::path::{Path, PathBuf};

use crate::HarnessError;

/// The binaries a full control plane with simulated workloads needs.
pub const CONTROL_PLANE: &[&str] = &["etcd", "kube-apiserver"];
/// Extra binaries for real rollouts on simulated nodes.
pub const WORKLOADS: &[&str] = &["kube-controller-manager", "kube-scheduler", "kwok"];
/// The OCI registry.
pub const REGISTRY: &[&str] = &["registry"];

/// Finds the directory holding `names`: `POM_TEST_BIN_DIR`, else the build script's cache
/// directory for the pinned versions in `e2e/tools/versions.env`.
///
/// # Errors
/// [`HarnessError::MissingBinaries`] naming what is missing and how to build it.
pub fn locate(names: &[&str]) -> Result<PathBuf, HarnessError> {
    let dir = match std::env::var_os("POM_TEST_BIN_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => default_cache_dir()?,
    };
    let missing: Vec<String> = names
        .iter()
        .filter(|name| !dir.join(name).is_file())
        .map(|name| (*name).to_owned())
        .collect();
    if missing.is_empty() {
        Ok(dir)
    } else {
        Err(HarnessError::MissingBinaries { dir, missing })
    }
}

/// The binaries' directory for a test, or `None` when the test must skip. Every e2e test
/// calls this before starting anything, so it also checks `../shared/testdata`: each control
/// plane installs the upstream ClusterVersion/ClusterOperator/OperatorCondition CRDs from it
/// (without it the harness falls back to CRDs generated from our own types, which cannot
/// catch a write the real schemas refuse). Both go through [`crate::skip::skip`]: a failure in
/// CI, a visible `SKIPPED` line elsewhere.
///
/// # Panics
/// In CI, when something is missing.
#[must_use]
pub fn require(names: &[&str]) -> Option<PathBuf> {
    if crate::shared_testdata().is_none() {
        crate::skip::skip(
            "../shared/testdata is absent: the upstream CRD schemas are not checked (the \
             control plane gets CRDs generated from our types instead)",
        );
    }
    match locate(names) {
        Ok(dir) => Some(dir),
        Err(err) => {
            crate::skip::skip(&err.to_string());
            None
        }
    }
}

/// The directory of the CNCF distribution registry (`registry`, htpasswd auth and TLS):
/// `POM_TEST_DISTRIBUTION_DIR`, else the build script's `distribution-<version>` cache
/// directory. Kept apart from the other binaries so that adding or bumping it never rebuilds
/// the control plane.
///
/// # Errors
/// [`HarnessError::MissingBinaries`] when the binary is not there.
pub fn locate_distribution() -> Result<PathBuf, HarnessError> {
    let dir = match std::env::var_os("POM_TEST_DISTRIBUTION_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => cache_root()
            .join("bin")
            .join(format!("distribution-{}", version("DISTRIBUTION_VERSION")?)),
    };
    if dir.join("registry").is_file() {
        Ok(dir)
    } else {
        Err(HarnessError::MissingBinaries {
            dir,
            missing: vec!["registry (distribution)".to_owned()],
        })
    }
}

/// The distribution registry's directory for a test, or `None` when the test must skip (as
/// [`require`]).
///
/// # Panics
/// In CI, when it is missing.
#[must_use]
pub fn require_distribution() -> Option<PathBuf> {
    match locate_distribution() {
        Ok(dir) => Some(dir),
        Err(err) => {
            crate::skip::skip(&err.to_string());
            None
        }
    }
}

/// `opm` (operator-registry, pinned as `OPM_VERSION`): `POM_TEST_OPM_DIR`, else the build
/// script's `opm-<version>` cache directory (its own, as [`locate_distribution`]).
///
/// # Errors
/// [`HarnessError::MissingBinaries`] when the binary is not there.
pub fn locate_opm() -> Result<PathBuf, HarnessError> {
    let dir = match std::env::var_os("POM_TEST_OPM_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => cache_root()
            .join("bin")
            .join(format!("opm-{}", version("OPM_VERSION")?)),
    };
    found(dir, "opm")
}

/// The test operator built on operator-lib (`e2e/tools/oplib-operator`, pinned as
/// `OPERATOR_LIB_VERSION`): `POM_TEST_OPLIB_OPERATOR_DIR`, else the build script's
/// `oplib-operator-<version>-<hash of its sources>` cache directory, so an edited `main.go` is
/// never run stale.
///
/// # Errors
/// [`HarnessError::MissingBinaries`] when the binary is not there (or was built from other
/// sources).
pub fn locate_oplib_operator() -> Result<PathBuf, HarnessError> {
    use sha2::Digest as _;
    let dir = match std::env::var_os("POM_TEST_OPLIB_OPERATOR_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => {
            let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/oplib-operator");
            let mut hash = sha2::Sha256::new();
            for file in ["go.mod", "go.sum", "main.go"] {
                let path = src.join(file);
                hash.update(
                    std::fs::read(&path)
                        .map_err(HarnessError::io(format!("reading {}", path.display())))?,
                );
            }
            let stamp = hex::encode(hash.finalize());
            cache_root().join("bin").join(format!(
                "oplib-operator-{}-{}",
                version("OPERATOR_LIB_VERSION")?,
                stamp.get(..12).unwrap_or_default()
            ))
        }
    };
    found(dir, "oplib-operator")
}

/// `promtool` (Prometheus, pinned as `PROMTOOL_VERSION`): `POM_TEST_PROMTOOL_DIR`, else the
/// build script's `promtool-<version>` cache directory (its own, as [`locate_distribution`]).
///
/// # Errors
/// [`HarnessError::MissingBinaries`] when the binary is not there.
pub fn locate_promtool() -> Result<PathBuf, HarnessError> {
    let dir = match std::env::var_os("POM_TEST_PROMTOOL_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => cache_root()
            .join("bin")
            .join(format!("promtool-{}", version("PROMTOOL_VERSION")?)),
    };
    found(dir, "promtool")
}

/// The directory of [`locate_promtool`], or `None` when the test must skip (as [`require`]).
///
/// # Panics
/// In CI, when it is missing.
#[must_use]
pub fn require_promtool() -> Option<PathBuf> {
    skip_unless(locate_promtool())
}

/// The directory of [`locate_opm`], or `None` when the test must skip (as [`require`]).
///
/// # Panics
/// In CI, when it is missing.
#[must_use]
pub fn require_opm() -> Option<PathBuf> {
    skip_unless(locate_opm())
}

/// The directory of [`locate_oplib_operator`], or `None` when the test must skip (as
/// [`require`]).
///
/// # Panics
/// In CI, when it is missing.
#[must_use]
pub fn require_oplib_operator() -> Option<PathBuf> {
    skip_unless(locate_oplib_operator())
}

fn found(dir: PathBuf, binary: &str) -> Result<PathBuf, HarnessError> {
    if dir.join(binary).is_file() {
        Ok(dir)
    } else {
        Err(HarnessError::MissingBinaries {
            dir,
            missing: vec![binary.to_owned()],
        })
    }
}

fn skip_unless(located: Result<PathBuf, HarnessError>) -> Option<PathBuf> {
    match located {
        Ok(dir) => Some(dir),
        Err(err) => {
            crate::skip::skip(&err.to_string());
            None
        }
    }
}

/// A pinned version from `e2e/tools/versions.env`.
pub(crate) fn version(key: &str) -> Result<String, HarnessError> {
    let versions_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/versions.env");
    let text = std::fs::read_to_string(&versions_file).map_err(HarnessError::io(format!(
        "reading {}",
        versions_file.display()
    )))?;
    text.lines()
        .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().to_owned())
        .ok_or_else(|| HarnessError::Other(format!("{key} missing in {}", versions_file.display())))
}

/// `POM_CACHE`, else `$XDG_CACHE_HOME/pom`, else `~/.cache/pom` (as the build script).
pub(crate) fn cache_root() -> PathBuf {
    match std::env::var_os("POM_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(dir) => PathBuf::from(dir).join("pom"),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pom"),
        },
    }
}

fn default_cache_dir() -> Result<PathBuf, HarnessError> {
    let versions_file = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/versions.env");
    let text = std::fs::read_to_string(&versions_file).map_err(HarnessError::io(format!(
        "reading {}",
        versions_file.display()
    )))?;
    let get = |key: &str| -> Result<String, HarnessError> {
        text.lines()
            .find_map(|line| line.strip_prefix(key)?.strip_prefix('='))
            .map(|v| v.trim().to_owned())
            .ok_or_else(|| {
                HarnessError::Other(format!("{key} missing in {}", versions_file.display()))
            })
    };
    let cache = match std::env::var_os("POM_CACHE") {
        Some(dir) => PathBuf::from(dir),
        None => match std::env::var_os("XDG_CACHE_HOME") {
            Some(dir) => PathBuf::from(dir).join("pom"),
            None => PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(".cache/pom"),
        },
    };
    Ok(cache.join("bin").join(format!(
        "k8s-{}-etcd-{}-kwok-{}-ggcr-{}",
        get("KUBERNETES_VERSION")?,
        get("ETCD_VERSION")?,
        get("KWOK_VERSION")?,
        get("GGCR_VERSION")?
    )))
}
