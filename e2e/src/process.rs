//! Child processes that cannot outlive the test process.
//!
//! Each binary runs under a tiny `sh` guardian that stops it as soon as the test process is
//! gone (even after SIGKILL or a panic in a static), so no etcd or apiserver is ever left
//! behind; `Drop` stops it early when the owner goes away first. Stopping is SIGTERM, then
//! SIGKILL after [`STOP_GRACE_SECONDS`]: a kube-apiserver whose etcd is already gone can hang in
//! its graceful shutdown forever, and a guardian that only waits would leak it (seen after a
//! green CI run: two orphaned API servers, 250 MB each).
//!
//! A binary started with [`Process::spawn_restarting`] is started again when it crashes, as
//! systemd restarts a kubelet; only kwok is, because kwok v0.8.0 can die at start-up of a data
//! race in its CEL type registry (`fatal error: concurrent map writes` in
//! `easycel.getTypeValue`, called by two controllers initialising their stages at once; no
//! released easycel or kwok fixes it). kwok keeps no state of its own, so a restarted kwok
//! carries on from what the API server holds. Every restart is written to the binary's log.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use crate::HarnessError;

/// A running binary and its log file.
pub struct Process {
    pub name: String,
    child: Child,
    pub log: PathBuf,
}

/// The CPU time process `pid` has used so far, every thread's, user and system
/// (`/proc/<pid>/stat` fields 14 and 15, in the kernel's fixed 100 ticks a second;
/// `/proc/<pid>/schedstat` would count the main thread only). `None` once it is gone.
#[must_use]
pub fn cpu_time(pid: u32) -> Option<std::time::Duration> {
    const TICKS_PER_SECOND: u64 = 100;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After the command name (in parentheses, which may hold spaces): field 3 onwards.
    let mut fields = stat.rsplit_once(')')?.1.split_whitespace().skip(11);
    let user: u64 = fields.next()?.parse().ok()?;
    let system: u64 = fields.next()?.parse().ok()?;
    Some(std::time::Duration::from_millis(
        (user + system) * 1000 / TICKS_PER_SECOND,
    ))
}

/// How long a stopped binary may take to exit after SIGTERM before it gets SIGKILL.
pub const STOP_GRACE_SECONDS: u32 = 5;

/// How many times [`Process::spawn_restarting`] starts a crashed binary again.
pub const MAX_RESTARTS: u32 = 3;

/// Runs `"$@"`, restarting it up to `$3` times when it exits with a non-zero status, until the
/// test process (`$1`) is gone or the guardian is told to stop.
const GUARDIAN: &str = r#"parent=$1; grace=$2; restarts=$3; shift 3
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
while kill -0 "$parent" 2>/dev/null; do
  if ! kill -0 "$child" 2>/dev/null; then
    wait "$child"; status=$?
    if [ "$status" -eq 0 ] || [ "$restarts" -le 0 ]; then exit "$status"; fi
    restarts=$((restarts - 1))
    echo "pom-e2e-guardian: $1 exited with status $status; starting it again ($restarts restarts left)"
    "$@" & child=$!
  fi
  sleep 0.5
done
stop"#;

impl Process {
    /// Starts `bin` with `args`, logging stdout and stderr to `<log_dir>/<name>.log`.
    pub fn spawn(
        name: &str,
        bin: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> Result<Self, HarnessError> {
        Self::spawn_with_restarts(name, bin, args, log_dir, 0)
    }

    /// Like [`Process::spawn`], but a crash (non-zero exit) starts the binary again, up to
    /// [`MAX_RESTARTS`] times; only for binaries that keep no state of their own.
    pub fn spawn_restarting(
        name: &str,
        bin: &Path,
        args: &[String],
        log_dir: &Path,
    ) -> Result<Self, HarnessError> {
        Self::spawn_with_restarts(name, bin, args, log_dir, MAX_RESTARTS)
    }

    fn spawn_with_restarts(
        name: &str,
        bin: &Path,
        args: &[String],
        log_dir: &Path,
        restarts: u32,
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
            .arg(restarts.to_string())
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

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;

    /// Waits (bounded) for the guardian to exit and returns the log.
    fn log_after_exit(process: &mut Process) -> String {
        let started = Instant::now();
        while !process.has_exited() {
            assert!(
                started.elapsed() < Duration::from_secs(30),
                "the guardian did not exit: {}",
                process.log_tail(20)
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        std::fs::read_to_string(&process.log).unwrap()
    }

    fn crashing(dir: &Path, restarts: bool) -> Process {
        let args = ["-c".to_owned(), "echo started; exit 3".to_owned()];
        let spawn = if restarts {
            Process::spawn_restarting
        } else {
            Process::spawn
        };
        spawn("crasher", Path::new("/bin/sh"), &args, dir).unwrap()
    }

    #[test]
    fn a_restarting_binary_is_started_again_after_each_crash_up_to_the_limit() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = crashing(dir.path(), true);
        let log = log_after_exit(&mut process);
        let starts = log.lines().filter(|l| *l == "started").count();
        let restarts = log
            .lines()
            .filter(|l| l.starts_with("pom-e2e-guardian: /bin/sh exited with status 3"))
            .count();
        assert_eq!(starts as u32, MAX_RESTARTS + 1, "{log}");
        assert_eq!(restarts as u32, MAX_RESTARTS, "{log}");
        assert_eq!(process.child.wait().unwrap().code(), Some(3), "{log}");
    }

    #[test]
    fn a_plain_binary_is_not_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let mut process = crashing(dir.path(), false);
        let log = log_after_exit(&mut process);
        assert_eq!(log, "started\n");
        assert_eq!(process.child.wait().unwrap().code(), Some(3));
    }

    #[test]
    fn a_binary_that_exits_cleanly_is_not_started_again() {
        let dir = tempfile::tempdir().unwrap();
        let args = ["-c".to_owned(), "echo started".to_owned()];
        let mut process =
            Process::spawn_restarting("clean", Path::new("/bin/sh"), &args, dir.path()).unwrap();
        let log = log_after_exit(&mut process);
        assert_eq!(log, "started\n");
    }
}
