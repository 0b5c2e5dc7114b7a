//! Catalog memory proportional to use (issue 10 item 2): the manager's memory for a catalog
//! loaded whole (`load_path`, what POM did before) against one loaded with a scope of 0, 10 or
//! every package (`load_path_scoped`, what the manager does now: it holds the packages
//! PlatformOperators name and reads the others back when named).
//!
//! ```sh
//! cargo bench -p pom-resolver --bench catalog_memory                    # 1,000 x 50 (150 MB)
//! cargo bench -p pom-resolver --bench catalog_memory -- --packages 200  # smaller
//! ```
//!
//! It writes the synthetic catalog of `common/` (the one `bench_compare` uses) in its layouts,
//! then runs each case in a fresh process (so every peak is its own) and reports, per layout:
//! the peak RSS while loading (`VmHWM`), the RSS once loaded with the result kept (`VmRSS`),
//! both above an idle process's, the load time, and for scoped loads the time to read one
//! package back from the files. The floor of the table is the idle process; a whole load is
//! the peer. `held-1000` is the manager's path at 1,000 PlatformOperators: served with none
//! in use, then every package read back on its own and kept.

#[path = "common/mod.rs"]
mod common;
#[path = "common/inputs.rs"]
mod inputs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?.to_owned();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// One case in this (child) process: prints one JSON line.
fn child(mode: &str, dir: &Path, packages: usize) -> Result<(), Error> {
    let start = Instant::now();
    let mut read_back_us = Vec::new();
    let kept: Box<dyn std::any::Any> = match mode {
        "idle" => Box::new(()),
        "whole" => Box::new(pom_resolver::fbc::load_path(dir)?),
        // What the manager holds once N PlatformOperators name N packages after the catalog
        // was served with none in use: each package read back from the files on its own.
        held if held.starts_with("held-") => {
            let n: usize = held.strip_prefix("held-").ok_or("bad mode")?.parse()?;
            let catalog = pom_resolver::fbc::load_path_scoped(dir, "/configs/", BTreeSet::new())?;
            let mut kept = Vec::with_capacity(n);
            for p in 0..n.min(packages) {
                let read = catalog.index.materialize(&common::package_name(p))?;
                kept.push(read.ok_or_else(|| format!("package {p} did not read back"))?);
            }
            Box::new((catalog, kept))
        }
        scoped => {
            let n: usize = scoped.strip_prefix("scoped-").ok_or("bad mode")?.parse()?;
            let scope: BTreeSet<String> = (0..n.min(packages)).map(common::package_name).collect();
            let catalog = pom_resolver::fbc::load_path_scoped(dir, "/configs/", scope)?;
            if catalog.held.packages.len() != n.min(packages) || catalog.index.len() != packages {
                return Err(format!(
                    "held {} indexed {}, expected {} and {packages}",
                    catalog.held.packages.len(),
                    catalog.index.len(),
                    n.min(packages)
                )
                .into());
            }
            // Read back packages out of scope (freed at once: what one read-back costs).
            for p in (n..packages).step_by(((packages - n) / 20).max(1)).take(20) {
                let one = Instant::now();
                let read = catalog.index.materialize(&common::package_name(p))?;
                read_back_us.push(u64::try_from(one.elapsed().as_micros())?);
                if read.is_none_or(|c| c.packages.len() != 1) {
                    return Err(format!("package {p} did not read back").into());
                }
            }
            Box::new(catalog)
        }
    };
    let load_ms = u64::try_from(start.elapsed().as_millis())?;
    read_back_us.sort_unstable();
    let median = read_back_us.get(read_back_us.len() / 2).copied();
    let mut out = json!({
        "load_ms": load_ms,
        "peak_kib": status_kib("VmHWM:"),
        "rss_kib": status_kib("VmRSS:"),
        "read_back_us": median,
    });
    drop(kept);
    // What stays resident once the result is freed too: the allocator's retention, not data.
    out["rss_freed_kib"] = json!(status_kib("VmRSS:"));
    println!("{out}");
    Ok(())
}

fn run_child(mode: &str, dir: &Path, packages: usize) -> Result<Value, Error> {
    let output = Command::new(std::env::current_exe()?)
        .args(["--child", mode])
        .arg(dir)
        .arg(packages.to_string())
        .output()?;
    if !output.status.success() {
        return Err(format!(
            "child {mode} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        )
        .into());
    }
    let line = String::from_utf8(output.stdout)?;
    Ok(serde_json::from_str(line.trim())?)
}

fn kib(value: &Value, field: &str) -> u64 {
    value.get(field).and_then(Value::as_u64).unwrap_or(0)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--child") {
        let mode = args.get(1).ok_or("mode")?;
        let dir = PathBuf::from(args.get(2).ok_or("dir")?);
        let packages: usize = args.get(3).ok_or("packages")?.parse()?;
        return child(mode, &dir, packages);
    }
    let mut packages = 1000usize;
    let mut rounds = 2usize;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "--packages" => packages = it.next().ok_or("--packages N")?.parse()?,
            "--rounds" => rounds = it.next().ok_or("--rounds N")?.parse()?,
            // cargo bench passes --bench.
            "--bench" => {}
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    let root = std::env::temp_dir().join(format!("pom-catalog-memory-{packages}"));
    let inputs = inputs::write_inputs(&root, packages, 50)?;
    println!(
        "| layout | MiB | case | load ms | peak above idle MiB | RSS loaded above idle MiB | RSS once freed MiB | peak ÷ input | one read-back ms |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for input in inputs
        .iter()
        .filter(|i| ["json-split", "json-file", "yaml-split"].contains(&i.name))
    {
        let mib_in = input.bytes as f64 / 1048576.0;
        let cases = ["whole", "scoped-0", "scoped-10", "scoped-1000", "held-1000"];
        // Rounds alternate the cases; each figure is the smallest of its rounds (memory does
        // not vary much, time does with the machine's load).
        let mut best: Vec<Option<(Value, Value)>> = vec![None; cases.len()];
        for _ in 0..rounds {
            for (i, case) in cases.iter().enumerate() {
                let idle = run_child("idle", &input.dir, packages)?;
                let run = run_child(case, &input.dir, packages)?;
                let better = best[i]
                    .as_ref()
                    .is_none_or(|(_, b)| kib(&run, "load_ms") < kib(b, "load_ms"));
                if better {
                    best[i] = Some((idle, run));
                }
            }
        }
        for (case, figures) in cases.iter().zip(best) {
            let Some((idle, run)) = figures else { continue };
            let peak = kib(&run, "peak_kib").saturating_sub(kib(&idle, "peak_kib")) as f64 / 1024.0;
            let rss = kib(&run, "rss_kib").saturating_sub(kib(&idle, "rss_kib")) as f64 / 1024.0;
            let freed =
                kib(&run, "rss_freed_kib").saturating_sub(kib(&idle, "rss_kib")) as f64 / 1024.0;
            let read_back = run
                .get("read_back_us")
                .and_then(Value::as_u64)
                .map_or("-".to_owned(), |us| format!("{:.2}", us as f64 / 1000.0));
            println!(
                "| {} | {mib_in:.1} | {case} | {} | {peak:.1} | {rss:.1} | {freed:.1} | {:.2} | {read_back} |",
                input.name,
                kib(&run, "load_ms"),
                peak / mib_in,
            );
        }
    }
    Ok(())
}
