//! The policy of `shared_support` for tests that read `../shared`: fail in CI, skip visibly
//! elsewhere; and, in CI, the data really is there.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod shared_support;

use std::ffi::OsStr;
use std::path::Path;

use shared_support::{ci_means_ci, in_ci, require, shared_dir, testdata_root};

const MISSING: &str = "/nonexistent/pom-shared-testdata/real";

#[test]
fn the_ci_variable() {
    assert!(!ci_means_ci(None));
    for off in ["", "false", "FALSE", "False"] {
        assert!(!ci_means_ci(Some(OsStr::new(off))), "{off:?}");
    }
    for on in ["true", "1", "yes", "TRUE"] {
        assert!(ci_means_ci(Some(OsStr::new(on))), "{on:?}");
    }
}

#[test]
#[should_panic(expected = "/nonexistent/pom-shared-testdata/real is missing, and CI is set")]
fn missing_shared_data_fails_in_ci() {
    let _ = require(Path::new(MISSING), true, &mut Vec::new());
}

#[test]
fn missing_shared_data_skips_with_a_notice_outside_ci() {
    let mut notice = Vec::new();
    assert_eq!(require(Path::new(MISSING), false, &mut notice), None);
    let notice = String::from_utf8(notice).unwrap();
    assert!(
        notice.starts_with("SKIPPED missing_shared_data_skips_with_a_notice_outside_ci: ")
            && notice.contains(MISSING),
        "{notice}"
    );
}

#[test]
fn present_data_is_used_in_and_out_of_ci() {
    let here = Path::new(env!("CARGO_MANIFEST_DIR"));
    for ci in [true, false] {
        let mut notice = Vec::new();
        assert_eq!(require(here, ci, &mut notice), Some(here.to_path_buf()));
        assert!(notice.is_empty());
    }
}

#[test]
fn the_root_is_next_to_the_checkout() {
    let root = testdata_root();
    assert!(root.ends_with("shared/testdata"), "{}", root.display());
    assert!(
        !root.components().any(|c| c.as_os_str() == ".."),
        "{}",
        root.display()
    );
}

/// A canary for the CI setup: there, `../shared/testdata` must exist with what the tests read.
#[test]
fn ci_has_the_shared_data() {
    for relative in ["real", "crds", "version-ranges"] {
        let found = shared_dir(relative);
        if in_ci() {
            assert!(found.is_some(), "{relative}");
        }
    }
}
