//! The manager as a separate process, for tests of what only a process has: signals, exit
//! codes, leader election between replicas, its own credentials, its HTTP endpoints.
//!
//! The binary is `pom-manager-e2e` of this crate: it calls `pom_controller::cli::main`, the very
//! entry point of `pom-manager`, and cargo builds it before any test of this crate runs (a
//! test cannot rely on another package's binary being built). `POM_MANAGER_BIN` overrides it,
//! e.g. to test a release build of `pom-manager` itself.
//!
//! Like the control plane's processes, the manager runs under a small `sh` guardian that kills
//! it when the test process dies; signals go to the manager's own PID (written by the guardian),
//! and the guardian's exit status is the manager's.
//!
//! The guardian leads a process group of its own, which the manager shares; whatever drops the
//! guardian's handle (a [`ManagerProcess`] dropped, a panic, or the future of
//! [`ManagerProcess::spawn`] dropped before it returned, as `tokio::select!` drops a branch
//! that lost) SIGKILLs that whole group. Killing only the guardian, as `kill_on_drop` did,
//! orphaned a manager it had already started: reparented to init, it kept retrying its dead
//! API server long after the test had passed (issue 25 item 12; `tests/harness_leaks.rs`).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use tokio::process::{Child, Command};

use crate::HarnessError;

const GUARDIAN: &str = r#"parent=$1; pidfile=$2; shift 2
"$@" & child=$!
echo "$child" > "$pidfile"
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.1; done
kill -0 "$child" 2>/dev/null && kill -9 "$child" 2>/dev/null
wait "$child""#;

/// The manager binary under test: `POM_MANAGER_BIN`, else `built`, which a test passes as
/// `env!("CARGO_BIN_EXE_pom-manager-e2e")` (cargo defines it for integration tests only).
#[must_use]
pub fn manager_binary(built: &str) -> PathBuf {
    std::env::var_os("POM_MANAGER_BIN").map_or_else(|| PathBuf::from(built), PathBuf::from)
}

/// The guardian's handle: dropping it before the guardian was reaped SIGKILLs the guardian's
/// process group (the guardian and the manager), then reaps the guardian.
struct Guardian {
    child: Child,
    reaped: bool,
}

impl Guardian {
    /// SIGKILLs the guardian's process group and waits (bounded) until the guardian is reaped.
    /// Only while it is not reaped: until then no other process can take its PID, so the group
    /// named after it is still the one it leads.
    fn kill_group(&mut self) {
        if self.reaped {
            return;
        }
        if let Some(pgid) = self.child.id() {
            let _ = std::process::Command::new("kill")
                .args(["-s", "KILL", "--", &format!("-{pgid}")])
                .stderr(Stdio::null())
                .status();
        }
        let _ = self.child.start_kill();
        let started = Instant::now();
        while started.elapsed() < Duration::from_secs(2) {
            if !matches!(self.child.try_wait(), Ok(None)) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        self.reaped = true;
    }
}

impl Drop for Guardian {
    fn drop(&mut self) {
        self.kill_group();
    }
}

/// A running manager process.
pub struct ManagerProcess {
    pub name: String,
    pub log: PathBuf,
    pid: u32,
    guardian: Guardian,
    exit: Option<i32>,
}

impl ManagerProcess {
    /// Starts `binary` (see [`manager_binary`]) with `args`, `kubeconfig` and extra `env`,
    /// logging to `<log_dir>/<name>.log`. `POD_NAME` is `name`.
    ///
    /// # Errors
    /// When the process cannot be started or does not report its PID.
    pub async fn spawn(
        binary: &Path,
        name: &str,
        kubeconfig: &Path,
        args: &[String],
        env: &[(&str, &str)],
        log_dir: &Path,
    ) -> Result<Self, HarnessError> {
        let log = log_dir.join(format!("{name}.log"));
        let pidfile = log_dir.join(format!("{name}.pid"));
        let _ = std::fs::remove_file(&pidfile);
        let out = std::fs::File::create(&log)
            .map_err(HarnessError::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(HarnessError::io("cloning a log file handle"))?;
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg(GUARDIAN)
            .arg("pom-e2e-manager-guardian")
            .arg(std::process::id().to_string())
            .arg(&pidfile)
            .arg(binary)
            .args(args)
            .env("KUBECONFIG", kubeconfig)
            .env("POD_NAME", name)
            // Operators of the e2e fixtures never report unless a test makes them: a hop does
            // not wait the production two minutes for their first report (`env` overrides it).
            .env("POM_AUTO_SETTLE_WINDOW", "1s")
            // Most planes have no shipped install: a test that applies it asks for the guard
            // (`env` overrides this).
            .env("POM_REQUIRE_ADMISSION_GUARD", "false")
            .env(
                "RUST_LOG",
                "info,pom_controller=debug,kube=warn,hyper=warn,tower=warn",
            )
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own group, so that dropping the handle kills the manager too (see `Guardian`).
            .process_group(0)
            .kill_on_drop(true);
        for (key, value) in env {
            command.env(key, value);
        }
        // From here on every way out of this function, a drop of its future included, kills
        // the group: a manager already started is never left behind.
        let guardian = Guardian {
            child: command
                .spawn()
                .map_err(HarnessError::io("starting the manager"))?,
            reaped: false,
        };
        let started = Instant::now();
        let pid = loop {
            if let Some(pid) = std::fs::read_to_string(&pidfile)
                .ok()
                .and_then(|t| t.trim().parse().ok())
            {
                break pid;
            }
            if started.elapsed() > Duration::from_secs(10) {
                return Err(HarnessError::Other(format!("manager {name} did not start")));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        Ok(Self {
            name: name.to_owned(),
            log,
            pid,
            guardian,
            exit: None,
        })
    }

    /// The manager's PID.
    #[must_use]
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends `signal` (`TERM`, `KILL`, ...) to the manager itself.
    pub fn signal(&self, signal: &str) {
        let _ = std::process::Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(self.pid.to_string())
            .status();
    }

    /// Waits up to `timeout` for the manager to exit; its exit code (128 + signal when killed),
    /// or `None` when it is still running.
    pub async fn wait_exit(&mut self, timeout: Duration) -> Option<i32> {
        if self.exit.is_some() {
            return self.exit;
        }
        let status = tokio::time::timeout(timeout, self.guardian.child.wait())
            .await
            .ok()?
            .ok()?;
        self.guardian.reaped = true;
        self.exit = status.code();
        self.exit
    }

    /// Whether the manager process still runs.
    pub fn is_running(&self) -> bool {
        std::process::Command::new("kill")
            .arg("-0")
            .arg(self.pid.to_string())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    /// The whole log, for assertions and failure messages.
    #[must_use]
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The last `lines` lines of the log.
    #[must_use]
    pub fn log_tail(&self, lines: usize) -> String {
        let text = self.log_text();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }
}

impl Drop for ManagerProcess {
    fn drop(&mut self) {
        if self.exit.is_none() {
            self.signal("KILL");
        }
        self.guardian.kill_group();
    }
}

/// Sends a plain HTTP/1.0 GET to `address` and returns the status, the headers and the body.
pub async fn http_get(address: std::net::SocketAddr, path: &str) -> Option<(u16, String, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(address).await.ok()?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").as_bytes())
        .await
        .ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let (head, body) = response.split_once("\r\n\r\n")?;
    Some((status, head.to_owned(), body.to_owned()))
}

/// A GET over TLS as a scraper makes it: the server's certificate must chain to `ca_pem` and
/// name `server_name` (the Service's DNS name, as a ServiceMonitor's `tlsConfig.serverName`),
/// and `token`, when given, goes in `Authorization: Bearer`. The status, headers and body, or
/// why there were none.
///
/// # Errors
/// A message when the CA does not parse, the connection or handshake fails, or the answer is
/// not HTTP.
pub async fn https_get(
    address: std::net::SocketAddr,
    server_name: &str,
    ca_pem: &str,
    path: &str,
    token: Option<&str>,
) -> Result<(u16, String, String), String> {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, ServerName};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots
            .add(cert.map_err(|e| format!("CA: {e}"))?)
            .map_err(|e| format!("CA: {e}"))?;
    }
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| e.to_string())?
    .with_root_certificates(roots)
    .with_no_client_auth();
    let name = ServerName::try_from(server_name.to_owned()).map_err(|e| e.to_string())?;
    let tcp = tokio::net::TcpStream::connect(address)
        .await
        .map_err(|e| format!("connecting: {e}"))?;
    let mut tls = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| format!("TLS handshake: {e}"))?;
    let authorization =
        token.map_or_else(String::new, |t| format!("Authorization: Bearer {t}\r\n"));
    tls.write_all(
        format!("GET {path} HTTP/1.0\r\nHost: {server_name}\r\n{authorization}\r\n").as_bytes(),
    )
    .await
    .map_err(|e| format!("writing: {e}"))?;
    let mut bytes = Vec::new();
    // A server may close without TLS close_notify; what was read until then is the answer.
    if let Err(err) = tls.read_to_end(&mut bytes).await
        && bytes.is_empty()
    {
        return Err(format!("reading: {err}"));
    }
    let response = String::from_utf8_lossy(&bytes);
    let status = response
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("not HTTP: {response:?}"))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| format!("not HTTP: {response:?}"))?;
    Ok((status, head.to_owned(), body.to_owned()))
}

/// A free loopback address (the port is released again; a race is possible but rare).
///
/// # Errors
/// When no port can be bound.
pub fn free_address() -> Result<std::net::SocketAddr, HarnessError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(HarnessError::io("binding 127.0.0.1:0"))?;
    listener
        .local_addr()
        .map_err(HarnessError::io("reading a local address"))
}
