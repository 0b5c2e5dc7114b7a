//! The one policy for tests that read `../shared/testdata` (real catalogs and bundles, upstream
//! CRDs, range cases): shared by the resolver's tests through `mod shared_support;` and by
//! the renderer's and pomctl's through `#[path = "../../resolver/tests/shared_support/mod.rs"]`.
//!
//! Why a policy at all: a test that returns early passes, and libtest captures what a passing
//! test prints with `println!`/`eprintln!`, so the old `println!("skipped: ...")` was invisible
//! and a checkout without `../shared` ran green while testing nothing. libtest cannot mark a
//! test ignored at run time, so the choice is between failing and skipping loudly:
//!
//! * in CI (`CI` set, non-empty and not `false`) missing data fails the test, naming the path:
//!   CI always has `../shared`, so its absence there is a broken setup, never a skip;
//! * elsewhere the test skips, and says so on the process's real stderr (`io::stderr()`
//!   written directly is not captured by libtest, unlike `eprintln!`), so `cargo test` shows a
//!   `SKIPPED <test>: <path> is absent` line even though the test is reported `ok`.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `shared/testdata` next to the checkout (`/work/shared/testdata` for `/work/main`), from a
/// crate under `crates/`: the manifest dir's third ancestor is the checkout's parent.
pub fn testdata_root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest
        .ancestors()
        .nth(3)
        .unwrap_or(manifest)
        .join("shared")
        .join("testdata")
}

/// Whether the tests run in CI: `CI` set to anything but the empty string or `false` (in any
/// case), which is how CI services and `CI=false make test` spell it.
pub fn in_ci() -> bool {
    ci_means_ci(std::env::var_os("CI").as_deref())
}

/// The rule of [`in_ci`] on a given value of `CI`.
pub fn ci_means_ci(value: Option<&OsStr>) -> bool {
    value.is_some_and(|value| !value.is_empty() && !value.eq_ignore_ascii_case("false"))
}

/// `relative` under `shared/testdata` (`""` for the root itself), or `None` when it is absent
/// outside CI: the caller then returns early (the test skips, visibly).
///
/// # Panics
/// In CI when the path is absent, with a message naming it.
pub fn shared_dir(relative: &str) -> Option<PathBuf> {
    let root = testdata_root();
    let path = if relative.is_empty() {
        root
    } else {
        root.join(relative)
    };
    require(&path, in_ci(), &mut std::io::stderr())
}

/// The policy itself, with CI and the notice's destination given (so it can be tested without
/// touching the environment or the real stderr).
///
/// # Panics
/// When `path` is absent and `ci` is true.
pub fn require(path: &Path, ci: bool, notice: &mut dyn Write) -> Option<PathBuf> {
    if path.exists() {
        return Some(path.to_path_buf());
    }
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    if ci {
        panic!(
            "{test}: {} is missing, and CI is set, so this test fails instead of skipping: CI must \
             have ../shared next to the checkout",
            path.display()
        );
    }
    // Best effort: a notice that cannot be written must not turn a skip into a failure.
    let _ = writeln!(
        notice,
        "SKIPPED {test}: {} is absent (tests reading ../shared skip outside CI and fail in CI)",
        path.display()
    );
    None
}
