#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The harness never leaks a process: neither when a control plane is dropped normally, nor
//! when the test process is killed outright (SIGKILL: no destructor runs, only the guardians
//! notice). Every binary of a control plane has the plane's temporary directory on its command
//! line, so a survivor is found by scanning `/proc/*/cmdline` for that path.
//!
//! The same holds for manager replicas ([`ManagerProcess`], as the chaos suite runs them):
//! killed and restarted ones, ones whose start was abandoned half-way (the future of
//! [`ManagerProcess::spawn`] dropped after the guardian had started the binary, as a
//! `tokio::select!` does when the other branch wins), ones dropped by a panic, and ones whose
//! test process was SIGKILLed (issue 25 item 12: a replica outlived a passed chaos run).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use pom_e2e::manager_process::ManagerProcess;
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

/// A stand-in for a replica that never gives up (as one retrying a dead API server): a shell
/// that ignores SIGTERM, with `marker` on its command line.
fn stubborn_replica_args(marker: &str) -> Vec<String> {
    vec![
        "-c".to_owned(),
        format!("trap '' TERM; while true; do sleep 0.2; done # {marker}"),
    ]
}

/// Starts replica `name` through the harness as the chaos suite does (the binary is a stub).
async fn spawn_replica(dir: &Path, name: &str, marker: &str) -> ManagerProcess {
    ManagerProcess::spawn(
        Path::new("/bin/sh"),
        name,
        &dir.join("kubeconfig"),
        &stubborn_replica_args(marker),
        &[],
        dir,
    )
    .await
    .unwrap()
}

/// Makes the PID file of replica `name` unwritable (a directory stands in its place): its
/// guardian still starts the binary, but [`ManagerProcess::spawn`] never learns its PID, so the
/// start stays pending (and fails after its 10 s), deterministically.
fn block_pid_file(dir: &Path, name: &str) {
    std::fs::create_dir_all(dir.join(format!("{name}.pid"))).unwrap();
}

/// Polls the start of replica `name` once, waits until its guardian has forked the binary
/// (two processes carry `marker`: the guardian and its child), then drops the unfinished
/// start, as `tokio::select!` drops a branch that lost.
async fn abandon_start(dir: &Path, name: &str, marker: &str) {
    block_pid_file(dir, name);
    let kubeconfig = dir.join("kubeconfig");
    let args = stubborn_replica_args(marker);
    let mut start = Box::pin(ManagerProcess::spawn(
        Path::new("/bin/sh"),
        name,
        &kubeconfig,
        &args,
        &[],
        dir,
    ));
    let first = futures::poll!(start.as_mut());
    assert!(
        first.is_pending(),
        "the start must still wait for the PID file after its first poll"
    );
    let started = Instant::now();
    while processes_mentioning(marker).len() < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the guardian did not start the binary: {:?}",
            processes_mentioning(marker)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(start);
}

#[tokio::test]
async fn killed_restarted_and_abandoned_manager_replicas_leave_no_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let marker = format!("pom-replica-marker-{}-a", std::process::id());
    let mut a = spawn_replica(scratch.path(), "pom-a", &marker).await;
    let b = spawn_replica(scratch.path(), "pom-b", &marker).await;
    assert!(a.is_running() && b.is_running());
    // The driver kills the leader and starts it again under the same name.
    a.signal("KILL");
    assert_eq!(a.wait_exit(Duration::from_secs(10)).await, Some(137));
    drop(a);
    let a = spawn_replica(scratch.path(), "pom-a", &marker).await;
    assert!(a.is_running());
    // The supervisor was reviving a replica when convergence won the select.
    abandon_start(scratch.path(), "pom-c", &marker).await;
    drop((a, b));
    assert_none_survive(&marker, Duration::from_secs(3));
}

#[tokio::test]
async fn a_manager_replica_whose_start_fails_leaves_no_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let marker = format!("pom-replica-marker-{}-d", std::process::id());
    block_pid_file(scratch.path(), "pom-a");
    let started = ManagerProcess::spawn(
        Path::new("/bin/sh"),
        "pom-a",
        &scratch.path().join("kubeconfig"),
        &stubborn_replica_args(&marker),
        &[],
        scratch.path(),
    )
    .await;
    assert!(started.is_err(), "its PID was never written");
    assert_none_survive(&marker, Duration::from_secs(3));
}

#[tokio::test]
async fn manager_replicas_dropped_by_a_panic_leave_no_process() {
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let marker = format!("pom-replica-marker-{}-b", std::process::id());
    let dir = scratch.path().to_owned();
    let task_marker = marker.clone();
    let outcome = tokio::spawn(async move {
        let _a = spawn_replica(&dir, "pom-a", &task_marker).await;
        let _b = spawn_replica(&dir, "pom-b", &task_marker).await;
        assert!(
            processes_mentioning(&task_marker).len() >= 4,
            "two guardians, two replicas"
        );
        panic!("a chaos assertion failed while both replicas ran");
    })
    .await;
    assert!(outcome.is_err_and(|e| e.is_panic()));
    assert_none_survive(&marker, Duration::from_secs(3));
}

/// When set, this test binary is the child that starts replicas and waits to be killed; the
/// value is the file where it writes its marker.
const REPLICA_CHILD_ENV: &str = "POM_HARNESS_LEAK_REPLICA_CHILD";

#[tokio::test]
async fn manager_replicas_of_a_killed_test_process_leave_no_process() {
    if let Some(out) = std::env::var_os(REPLICA_CHILD_ENV) {
        let scratch = tempfile::tempdir().unwrap();
        let marker = format!("pom-replica-marker-{}-c", std::process::id());
        let _a = spawn_replica(scratch.path(), "pom-a", &marker).await;
        let _b = spawn_replica(scratch.path(), "pom-b", &marker).await;
        std::fs::write(&out, &marker).unwrap();
        tokio::time::sleep(Duration::from_secs(600)).await;
        return;
    }
    if std::env::var_os(CHILD_ENV).is_some() {
        return;
    }
    let scratch = tempfile::tempdir().unwrap();
    let out = scratch.path().join("marker");
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "manager_replicas_of_a_killed_test_process_leave_no_process",
            "--nocapture",
        ])
        .env(REPLICA_CHILD_ENV, &out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let marker = wait_for_file(&out, Duration::from_secs(60));
    assert!(
        processes_mentioning(&marker).len() >= 4,
        "two guardians, two replicas"
    );
    child.kill().unwrap(); // SIGKILL: no destructor, only the guardians
    child.wait().unwrap();
    // Each guardian notices within 0.1 s and SIGKILLs its replica.
    assert_none_survive(&marker, Duration::from_secs(5));
}
