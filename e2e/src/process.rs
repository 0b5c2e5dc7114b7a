//! Child processes that cannot outlive the test process.
//!
//! Each binary runs under a tiny `sh` guardian that stops it as soon as the test process is
//! gone (even after SIGKILL or a panic in a static), so no etcd or apiserver is ever left
//! behind; `Drop` stops it early when the owner goes away first. Stopping is SIGTERM, then
//! SIGKILL after [`STOP_GRACE_SECONDS`]: a kube-apiserver whose etcd is already gone can hang in
//! its graceful shutdown forever, and a guardian that only waits would leak it (seen after a
//! green CI run: two orphaned API servers, 250 MB each).

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::HarnessError;

/// A running binary and its log file.
pub struct Process {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

/// How long a stopped binary may take to exit after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE_SECONDS: u32 = 5;

const GUARDIAN: &str = r#"parent=$1; grace=$2; shift 2
"$@" & child=$!
stop() {
  kill "$child" 2>/dev/null
  ticks=0
  while kill -0 "$child" 2>/dev/null; do
    ticks=$((ticks + 1))
    if [ "$ticks" -ge $((grace * 10)) ]; then kill -9 "$child" 2>/dev/null; break; fi
    sleep 0.1
  done
  wait "$child" 2>/dev/null
}
trap 'stop; exit 0' TERM INT
while kill -0 "$parent" 2>/dev/null && kill -0 "$child" 2>/dev/null; do sleep 0.5; done
stop"#;

impl Process {
    /// Starts `bin` with `args`, logging stdout and stderr to `<log_dir>/<name>.log`.
    pub fn spawn(
        name: &str,
        bin: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> Result<Self, HarnessError> {
        let log = log_dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log)
            .map_err(HarnessError::io(format!("creating {}", log.display())))?;
        let err = out
            .try_clone()
            .map_err(HarnessError::io("cloning a log file handle"))?;
        let child = Command::new("sh")
            .arg("-c")
            .arg(GUARDIAN)
            .arg("pom-e2e-guardian")
            .arg(std::process::id().to_string())
            .arg(STOP_GRACE_SECONDS.to_string())
            .arg(bin)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .spawn()
            .map_err(HarnessError::io(format!("starting {}", bin.display())))?;
        Ok(Self {
            name: name.to_owned(),
            child,
            log,
        })
    }

    /// The last `lines` lines of the log, for error messages.
    #[must_use]
    pub fn log_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// The guardian's process id (the binary is its only child).
    #[must_use]
    pub fn guardian_pid(&self) -> u32 {
        self.child.id()
    }

    /// Whether the process has exited.
    pub fn has_exited(&mut self) -> bool {
        !matches!(self.child.try_wait(), Ok(None))
    }

    /// Asks the guardian to stop the binary (SIGTERM) and waits for it.
    pub fn stop(&mut self) {
        let _ = Command::new("kill")
            .arg(self.child.id().to_string())
            .status();
        let _ = self.child.wait();
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A free TCP port on 127.0.0.1 (the listener is closed again; a race is possible but rare).
pub fn free_port() -> Result<u16, HarnessError> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(HarnessError::io("binding 127.0.0.1:0"))?;
    Ok(listener
        .local_addr()
        .map_err(HarnessError::io("reading a local address"))?
        .port())
}

/// Sends a plain HTTP/1.0 GET to 127.0.0.1 and returns the status code and body.
pub async fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut stream = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .ok()?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n");
    stream.write_all(request.as_bytes()).await.ok()?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await.ok()?;
    let status = response.split_whitespace().nth(1)?.parse().ok()?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Some((status, body))
}
