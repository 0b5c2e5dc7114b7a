//! What an e2e test does when something it needs is missing: the project's one policy for
//! missing prerequisites (the same as `crates/resolver/tests/shared_support` for
//! `../shared/testdata`, described in the README).
//!
//! A test that returns early passes, and libtest captures what a passing test prints with
//! `println!`/`eprintln!`, so a printed "skipped" line is invisible and a suite that ran
//! nothing looks green. libtest cannot mark a test ignored at run time, so:
//!
//! * in CI (`CI` set, non-empty and not `false`) a missing prerequisite fails the test, naming
//!   it: CI builds the binaries and has `../shared` next to the checkout;
//! * elsewhere the test skips (or runs with less, as the caller says) and says so with a
//!   `SKIPPED <test>: <reason>` line written straight to the process's stderr, which libtest
//!   does not capture (unlike `eprintln!`), so it shows in `cargo test`'s output even though
//!   the test is reported `ok`.

use std::ffi::OsStr;
use std::io::Write as _;

/// Whether the tests run in CI: `CI` set to anything but the empty string or `false` (in any
/// case).
#[must_use]
pub fn in_ci() -> bool {
    ci_means_ci(std::env::var_os("CI").as_deref())
}

/// The rule of [`in_ci`] on a given value of `CI`.
#[must_use]
pub fn ci_means_ci(value: Option<&OsStr>) -> bool {
    value.is_some_and(|value| !value.is_empty() && !value.eq_ignore_ascii_case("false"))
}

/// Reports that the running test cannot do all it claims because of `reason`, and returns
/// when it may go on without it (skip, or run with less, as the caller says).
///
/// # Panics
/// In CI.
pub fn skip(reason: &str) {
    let current = std::thread::current();
    let test = current.name().unwrap_or("this test");
    assert!(
        !in_ci(),
        "{test}: {reason}; CI is set, so this test fails instead of skipping"
    );
    // Best effort: a notice that cannot be written must not turn a skip into a failure.
    let _ = writeln!(std::io::stderr(), "SKIPPED {test}: {reason}");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ci_is_any_value_but_empty_or_false() {
        assert!(!ci_means_ci(None));
        assert!(!ci_means_ci(Some(OsStr::new(""))));
        assert!(!ci_means_ci(Some(OsStr::new("False"))));
        assert!(ci_means_ci(Some(OsStr::new("true"))));
        assert!(ci_means_ci(Some(OsStr::new("1"))));
    }
}
