use std::path::PathBuf;

/// Why the harness could not provide a control plane or registry.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    #[error(
        "control-plane binaries not found in {dir}: missing {missing:?}; run `make e2e-binaries` (builds them from the Go module proxy) or set POM_TEST_BIN_DIR"
    )]
    MissingBinaries { dir: PathBuf, missing: Vec<String> },
    #[error("{what}: {source}")]
    Io {
        what: String,
        #[source]
        source: std::io::Error,
    },
    #[error("generating test certificates: {0}")]
    Certs(#[from] rcgen::Error),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("{component} did not become ready within {seconds}s; last log lines:\n{log_tail}")]
    NotReady {
        component: String,
        seconds: u64,
        log_tail: String,
    },
    #[error("{0}")]
    Other(String),
}

impl HarnessError {
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Self {
        let what = what.into();
        move |source| Self::Io { what, source }
    }
    pub(crate) fn kube(what: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let what = what.into();
        move |source| Self::Kube { what, source }
    }
}
