//! Masterminds v3 constraints (`versionRange`): parse never panics, and a parsed range can
//! be evaluated.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pom_resolver::range::VersionRange;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(range) = VersionRange::parse(text) {
        let _ = range.matches(&semver::Version::new(1, 2, 3));
    }
});
