//! blang/semver ranges (catalog `skipRange`): parse never panics.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pom_resolver::range::SkipRange;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(range) = SkipRange::parse(text) {
        let _ = range.contains(&semver::Version::new(1, 2, 3));
    }
});
