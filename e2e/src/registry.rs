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
        crate::binaries::locate(crate::binaries::REGISTRY)?;
        let dir = tempfile::Builder::new()
            .prefix("pom-registry-")
            .tempdir()
            .map_err(HarnessError::io(
                "creating the registry's temporary directory",
            ))?;
        let port = free_port()?;
        let process = spawn(port, dir.path()).await?;
        Ok(Self {
            process,
            port,
            _dir: dir,
        })
    }

    /// Starts the registry again on the same port after [`Registry::stop`]; it comes back
    /// empty (its content was in memory), so images must be pushed again.
    ///
    /// # Errors
    /// When it does not answer `/v2/`.
    pub async fn restart(&mut self) -> Result<(), HarnessError> {
        self.process.stop();
        self.process = spawn(self.port, self._dir.path()).await?;
        Ok(())
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

async fn spawn(port: u16, dir: &std::path::Path) -> Result<Process, HarnessError> {
    let bin = crate::binaries::locate(crate::binaries::REGISTRY)?;
    let args = vec![format!("-port={port}")];
    let mut process = Process::spawn("registry", &bin.join("registry"), &args, dir)?;
    let started = Instant::now();
    loop {
        if let Some((200, _)) = http_get(port, "/v2/").await {
            return Ok(process);
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
