//! Catalog parsing throughput (parse + index into the model) and peak memory.
//!
//! Run with `cargo bench -p pom-resolver --bench fbc_parse`. Before the criterion groups run,
//! `main` parses the synthetic catalog once and prints peak-memory figures taken from
//! `/proc/self/status` (`VmHWM`, reset through `/proc/self/clear_refs`), so no allocator hooks
//! (and no `unsafe`) are needed. `POM_BENCH_PACKAGES` / `POM_BENCH_BUNDLES` shrink the synthetic
//! catalog (default 1,000 packages x 50 bundles).
//!
//! Goals (issue 3): at least 100 MB/s per core for parse + index on the synthetic stream, and a
//! peak during parse of at most 3x the input on top of it. Both hinge on bundle property values
//! never becoming `serde_json::Value` trees: the ones POM reads are decoded in passing, the
//! others skipped (`fbc/blob.rs`, `PropertyWire`).

#[path = "common/mod.rs"]
mod common;

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{BatchSize, Criterion, Throughput};
use pom_resolver::fbc::{load_path, parse_documents};

const REAL: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/testdata/real");

/// FBC folders under the real test data (see `tests/fbc_real.rs`).
const REAL_CATALOGS: [&str; 5] = [
    "openshift__secondary-scheduler-operator/v4.18/catalog",
    "operator-framework__operator-controller/testdata/catalogs",
    "red-hat-storage__odf-operator/catalog",
    "redhat-openshift-ecosystem__community-operators-prod/catalogs",
    "stolostron__gatekeeper-operator-fbc/catalog-4-20",
];

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn synthetic() -> Vec<u8> {
    let packages = env_usize("POM_BENCH_PACKAGES", 1_000);
    let bundles = env_usize("POM_BENCH_BUNDLES", 50);
    common::synthetic_catalog_json(packages, bundles).into_bytes()
}

/// A `kB` figure from `/proc/self/status`.
fn status_kb(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Nanoseconds this thread has spent on a CPU (`/proc/thread-self/schedstat`), so the
/// throughput per core can be told apart from wall time on a shared, busy machine.
fn thread_cpu_ns() -> Option<u64> {
    let schedstat = std::fs::read_to_string("/proc/thread-self/schedstat").ok()?;
    schedstat.split_whitespace().next()?.parse().ok()
}

/// Resets `VmHWM` to the current RSS (Linux: write 5 to clear_refs).
fn reset_peak() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

fn mib(kb: u64) -> f64 {
    kb as f64 / 1024.0
}

fn report_memory() {
    let input = synthetic();
    let input_kb = input.len() as u64 / 1024;
    if !reset_peak() {
        println!("memory: /proc/self/clear_refs not writable; peak figures unavailable");
        return;
    }
    let (Some(rss_before), Some(_)) = (status_kb("VmRSS:"), status_kb("VmHWM:")) else {
        println!("memory: /proc/self/status unavailable");
        return;
    };
    let cpu_start = thread_cpu_ns();
    let start = Instant::now();
    let catalog = parse_documents([("synthetic.json".to_owned(), input)]);
    let elapsed = start.elapsed();
    let cpu = cpu_start
        .zip(thread_cpu_ns())
        .map(|(before, after)| Duration::from_nanos(after.saturating_sub(before)));
    let peak = status_kb("VmHWM:").unwrap_or(0);
    let rss_after = status_kb("VmRSS:").unwrap_or(0);
    let (packages, bundles) = match &catalog {
        Ok(c) => (
            c.packages.len(),
            c.packages.values().map(|p| p.bundles.len()).sum::<usize>(),
        ),
        Err(e) => {
            println!("memory: synthetic catalog failed to parse: {e}");
            return;
        }
    };
    println!(
        "memory: input {:.1} MiB ({packages} packages, {bundles} bundles) parsed once in {:.2?} \
         ({:.0} MB/s)",
        mib(input_kb),
        elapsed,
        (input_kb as f64 * 1024.0 / 1e6) / elapsed.as_secs_f64()
    );
    if let Some(cpu) = cpu {
        println!(
            "memory: on-CPU time of that parse {:.2?} ({:.0} MB/s per core)",
            cpu,
            (input_kb as f64 * 1024.0 / 1e6) / cpu.as_secs_f64().max(1e-9)
        );
    }
    println!(
        "memory: RSS before parse {:.1} MiB (input included); peak during parse {:.1} MiB = input \
         + {:.1} MiB ({:.2}x input); retained model after the input is freed {:.1} MiB ({:.2}x input)",
        mib(rss_before),
        mib(peak),
        mib(peak.saturating_sub(rss_before)),
        peak.saturating_sub(rss_before) as f64 / input_kb.max(1) as f64,
        mib(rss_after.saturating_sub(rss_before.saturating_sub(input_kb))),
        rss_after.saturating_sub(rss_before.saturating_sub(input_kb)) as f64
            / input_kb.max(1) as f64,
    );
    drop(catalog);
}

fn bench_synthetic(c: &mut Criterion) {
    let input = synthetic();
    let mut group = c.benchmark_group("fbc_parse");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .throughput(Throughput::Bytes(input.len() as u64));
    group.bench_function("synthetic_json_stream", |b| {
        b.iter_batched(
            || input.clone(),
            |bytes| black_box(parse_documents([("synthetic.json".to_owned(), bytes)])),
            BatchSize::PerIteration,
        )
    });
    group.finish();
}

fn folder_bytes(path: &Path) -> u64 {
    let mut total = 0;
    if let Ok(entries) = std::fs::read_dir(path) {
        for entry in entries.flatten() {
            let path = entry.path();
            total += if path.is_dir() {
                folder_bytes(&path)
            } else {
                entry.metadata().map_or(0, |m| m.len())
            };
        }
    }
    total
}

fn bench_real(c: &mut Criterion) {
    let root = PathBuf::from(REAL);
    if !root.is_dir() {
        println!("skipped: ../shared/testdata not present");
        return;
    }
    let mut group = c.benchmark_group("fbc_parse_real");
    group.sample_size(10);
    for relative in REAL_CATALOGS {
        let path = root.join(relative);
        group.throughput(Throughput::Bytes(folder_bytes(&path)));
        let name = relative.split('/').next().unwrap_or(relative);
        group.bench_function(name, |b| b.iter(|| black_box(load_path(&path))));
    }
    group.finish();
}

fn main() {
    report_memory();
    let mut criterion = Criterion::default().configure_from_args();
    bench_synthetic(&mut criterion);
    bench_real(&mut criterion);
    criterion.final_summary();
}
