//! The harness never leaks a process: neither when a control plane is dropped normally, nor
//! when the test process is killed outright (SIGKILL: no destructor runs, only the guardians
//! notice). Every binary of a control plane has the plane's temporary directory on its command
//! line, so a survivor is found by scanning `/proc/*/cmdline` for that path.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pom_e2e::process::STOP_GRACE_SECONDS;
use pom_e2e::scenario::simulated_plane;

/// When set, this test binary is the child that starts a plane and waits to be killed; the
/// value is the file where it writes the plane's directory.
const CHILD_ENV: &str = "POM_HARNESS_LEAK_CHILD";

/// Processes (pid, command line) whose command line mentions `needle`, except this process.
fn processes_mentioning(needle: &str) -> Vec<(u32, String)> {
    let me = std::process::id();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != me)
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let cmdline = String::from_utf8_lossy(&raw).replace('\0', " ");
            cmdline.contains(needle).then_some((pid, cmdline))
        })
        .collect()
}

/// Waits until no process mentions `needle`; panics naming the survivors after `timeout`.
fn assert_none_survive(needle: &str, timeout: Duration) -> Duration {
    let started = Instant::now();
    loop {
        let left = processes_mentioning(needle);
        if left.is_empty() {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < timeout,
            "{} process(es) outlived their control plane after {timeout:?}: {left:#?}",
            left.len()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[tokio::test]
async fn a_dropped_control_plane_leaves_no_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let dir = plane.dir().to_string_lossy().into_owned();
    assert!(
        !processes_mentioning(&dir).is_empty(),
        "the scan must see the running plane's processes"
    );
    drop(plane);
    // Drop waits for every process: nothing may be left the moment it returns.
    assert_none_survive(&dir, Duration::from_millis(1));
}

#[tokio::test]
async fn a_killed_test_process_leaves_no_process() {
    if let Some(out) = std::env::var_os(CHILD_ENV) {
        // The child: start a plane, say where it lives, then wait to be killed.
        let Some(plane) = simulated_plane(false).await else {
            std::fs::write(&out, "skipped").unwrap();
            return;
        };
        std::fs::write(&out, plane.dir().to_string_lossy().as_bytes()).unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("plane-dir");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "a_killed_test_process_leaves_no_process",
            "--nocapture",
        ])
        .env(CHILD_ENV, &out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let dir = wait_for_file(&out, Duration::from_secs(120));
    if dir == "skipped" {
        let _ = child.kill();
        let _ = child.wait();
        return;
    }
    assert!(
        processes_mentioning(&dir).len() >= 3,
        "etcd, kube-apiserver and the workload binaries run under {dir}"
    );
    child.kill().unwrap(); // SIGKILL: no destructor, only the guardians
    child.wait().unwrap();
    // Each guardian notices within 0.5 s, sends SIGTERM, and SIGKILL after the grace.
    let took = assert_none_survive(
        &dir,
        Duration::from_secs(u64::from(STOP_GRACE_SECONDS) + 10),
    );
    eprintln!("all processes of the killed test's control plane gone after {took:?}");
}

fn wait_for_file(path: &Path, timeout: Duration) -> String {
    let started = Instant::now();
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && !text.is_empty()
        {
            return text;
        }
        assert!(
            started.elapsed() < timeout,
            "the child test did not start its control plane within {timeout:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A binary that ignores SIGTERM (as a kube-apiserver stuck in its graceful shutdown does) is
/// killed after the grace period, both when its owner drops it and when the test process dies.
#[test]
fn a_binary_that_ignores_sigterm_is_killed_after_the_grace() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let marker = format!("pom-leak-marker-{}", std::process::id());
    let script = format!("trap '' TERM; while true; do sleep 0.2; done # {marker}");
    let stubborn = pom_e2e::process::Process::spawn(
        "stubborn",
        Path::new("/bin/sh"),
        &["-c".to_owned(), script],
        scratch.path(),
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    assert!(!processes_mentioning(&marker).is_empty(), "it runs");
    let started = Instant::now();
    drop(stubborn);
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(u64::from(STOP_GRACE_SECONDS) + 3),
        "stopping took {took:?}"
    );
    assert_none_survive(&marker, Duration::from_secs(2));
}
