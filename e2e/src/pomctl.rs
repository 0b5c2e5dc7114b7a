//! Running the real `pomctl` binary from e2e tests.

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::OnceLock;

/// Builds `pomctl` once per test binary (cargo builds only the tested package's own binaries
/// for integration tests) and returns the executable's path.
///
/// # Panics
/// When the build fails: the test cannot run without the binary.
#[must_use]
pub fn path() -> PathBuf {
    static PATH: OnceLock<PathBuf> = OnceLock::new();
    PATH.get_or_init(|| {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
        let out = std::process::Command::new(cargo)
            .args([
                "build",
                "-p",
                "pomctl",
                "--bin",
                "pomctl",
                "--message-format=json",
            ])
            .current_dir(&root)
            .output();
        let out = match out {
            Ok(out) if out.status.success() => out,
            Ok(out) => panic!(
                "building pomctl failed:\n{}",
                String::from_utf8_lossy(&out.stderr)
            ),
            Err(err) => panic!("running cargo to build pomctl: {err}"),
        };
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
            .filter(|m| m["reason"] == "compiler-artifact" && m["target"]["name"] == "pomctl")
            .find_map(|m| m["executable"].as_str().map(PathBuf::from))
            .unwrap_or_else(|| panic!("cargo reported no pomctl executable"))
    })
    .clone()
}

/// Runs `pomctl args...` against the cluster of `kubeconfig`.
///
/// # Panics
/// When the binary cannot be started.
pub async fn run(kubeconfig: &Path, args: &[&str]) -> Output {
    match tokio::process::Command::new(path())
        .args(args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
    {
        Ok(out) => out,
        Err(err) => panic!("running pomctl: {err}"),
    }
}
