//! An OCI registry on 127.0.0.1 (go-containerregistry's `registry`, in memory).

use std::time::{Duration, Instant};

use crate::HarnessError;
use crate::process::{Process, free_port, http_get};

/// A running registry; dropping it stops the process (its content is in memory).
pub struct Registry {
    process: Process,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Registry {
    /// Starts a registry on a free loopback port.
    ///
    /// # Errors
    /// When the binary is missing or the registry does not answer `/v2/`.
    pub async fn start() -> Result<Self, HarnessError> {
        let bin = crate::binaries::locate(crate::binaries::REGISTRY)?;
        let dir = tempfile::Builder::new()
            .prefix("pom-registry-")
            .tempdir()
            .map_err(HarnessError::io(
                "creating the registry's temporary directory",
            ))?;
        let port = free_port()?;
        let args = vec![format!("-port={port}")];
        let mut process = Process::spawn("registry", &bin.join("registry"), &args, dir.path())?;
        let started = Instant::now();
        loop {
            if let Some((200, _)) = http_get(port, "/v2/").await {
                return Ok(Self {
                    process,
                    port,
                    _dir: dir,
                });
            }
            if process.has_exited() || started.elapsed() > Duration::from_secs(30) {
                return Err(HarnessError::NotReady {
                    component: "registry".into(),
                    seconds: started.elapsed().as_secs(),
                    log_tail: process.log_tail(20),
                });
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `127.0.0.1:<port>`, the host part of image references in this registry.
    #[must_use]
    pub fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// Stops the registry now (to simulate an outage); references to it start failing.
    pub fn stop(&mut self) {
        self.process.stop();
    }
}
