//! Image layer extraction (tar and tar+gzip, whiteouts, long names, PAX): any bytes give
//! files within the byte budget or an error, never a panic or an unbounded allocation.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pom_oci::layers::{LayerFormat, LayerStack};

const BUDGET: u64 = 1 << 20;

fuzz_target!(|data: &[u8]| {
    for format in [LayerFormat::Tar, LayerFormat::TarGzip] {
        let mut stack = LayerStack::new("configs/", BUDGET);
        if stack.apply(format, data).is_ok() {
            let kept: u64 = stack.into_files().values().map(|f| f.len() as u64).sum();
            assert!(kept <= BUDGET);
        }
    }
});
