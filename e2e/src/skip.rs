//! What an e2e test does when something it needs is missing: one policy for every test.
//!
//! A skipped test returns early and passes, and libtest captures what a passing test prints
//! (`eprintln!` and `println!` alike), so a "skipped" line alone is invisible in `cargo test`
//! and a suite that ran nothing looks green. Skipping is therefore opt-in:
//!
//! * in CI (`CI` set) a missing prerequisite always fails the test;
//! * elsewhere it fails the test too, with what is missing and how to get it, unless the
//!   developer opts in with `POM_ALLOW_SKIP=1`; then the test prints `skipped: <reason>`
//!   (visible with `--nocapture`) and skips.
//!
//! `make test` and `make e2e` build the binaries first and CI runs with `../shared` next to the
//! checkout, so neither path needs the opt-in.

/// The variable that lets tests skip outside CI.
pub const ALLOW_SKIP: &str = "POM_ALLOW_SKIP";

/// Reports that a test cannot do all it claims because of `reason`; returns only when the
/// test may go on without it (skip, or run with less, as the caller says).
///
/// # Panics
/// In CI; outside CI unless `POM_ALLOW_SKIP=1`.
pub fn skip(reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("e2e cannot run in CI: {reason}");
    }
    if std::env::var(ALLOW_SKIP).as_deref() != Ok("1") {
        panic!(
            "{reason}\n(to skip instead, set {ALLOW_SKIP}=1: a skipped test passes, and its \
             notice is shown only with --nocapture)"
        );
    }
    eprintln!("skipped: {reason}");
}
