//! POM's catalog loader against operator-registry's (`make bench-compare`, issue 10 item 6).
//!
//! ```sh
//! make bench-compare                                  # builds the Go side, then runs this
//! cargo bench -p pom-resolver --bench bench_compare -- --go <bench-compare binary> \
//!     [--packages 500] [--bundles 50] [--runs 5] [--work DIR] [--only json-file,yaml-file]
//! cargo bench -p pom-resolver --bench bench_compare -- --no-go ...   # POM and the floor only
//! ```
//!
//! Without `--go` or `--no-go` (as `cargo bench -p pom-resolver` runs it) it does nothing.
//!
//! Generates the synthetic catalog of `common/mod.rs` in four layouts (`common/inputs.rs`:
//! JSON and YAML, one file and one folder per package), then, `--runs` rounds, times in a fresh
//! process each of:
//!
//! * `pom`: `pom_resolver::fbc::load_path` on the folder (reads and parses every file, builds
//!   and validates the model);
//! * `go`: operator-registry v1.64.0 `declcfg.LoadFS` + `declcfg.ConvertToModel` on the same
//!   folder (`e2e/tools/bench-compare`, built by `e2e/tools/build-bench-compare.sh`);
//! * `floor`: the same files read and passed through the parser alone: serde_json into
//!   `serde::de::IgnoredAny` for JSON, granit-parser's events (the YAML parser POM drives,
//!   re-exported by serde-saphyr) for YAML.
//!
//! The order of the three rotates every round, so load changes on a shared machine hit all of
//! them alike; ratios are the medians of each round's ratio. Every process reports its own wall
//! time of the load (files read from the page cache included, process start excluded), its CPU
//! time (all threads) and its peak RSS (`VmHWM` / `ru_maxrss`). POM's and Go's counts of
//! packages, channels and bundles must agree with each other and with the generator, or the
//! run fails.
//!
//! `--child pom|floor DIR` is the child mode this binary re-executes itself in.

#[path = "common/mod.rs"]
mod common;
#[path = "common/inputs.rs"]
mod inputs;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use inputs::{Counts, Input};
use serde::de::IgnoredAny;
use serde_json::{Value, json};

type Error = Box<dyn std::error::Error>;

/// What one process measured.
#[derive(Debug, Clone, Copy)]
struct Sample {
    wall_ns: u64,
    cpu_ns: u64,
    peak_kib: u64,
    counts: Option<Counts>,
}

const TOOLS: [&str; 3] = ["pom", "floor", "go"];

struct Args {
    go: Option<PathBuf>,
    packages: usize,
    bundles: usize,
    runs: usize,
    work: Option<PathBuf>,
    only: Option<Vec<String>>,
}

fn parse_args(raw: &[String]) -> Result<Args, Error> {
    let mut args = Args {
        go: None,
        packages: 500,
        bundles: 50,
        runs: 5,
        work: None,
        only: None,
    };
    let mut it = raw.iter();
    while let Some(flag) = it.next() {
        let mut value = || {
            it.next()
                .cloned()
                .ok_or_else(|| format!("{flag} needs a value"))
        };
        match flag.as_str() {
            "--bench" => {}
            "--go" => args.go = Some(PathBuf::from(value()?)),
            "--no-go" => args.go = None,
            "--packages" => args.packages = value()?.parse()?,
            "--bundles" => args.bundles = value()?.parse()?,
            "--runs" => args.runs = value()?.parse::<usize>()?.max(1),
            "--work" => args.work = Some(PathBuf::from(value()?)),
            "--only" => args.only = Some(value()?.split(',').map(str::to_owned).collect()),
            other => return Err(format!("unknown argument {other}").into()),
        }
    }
    Ok(args)
}

// ---------------------------------------------------------------- child side

/// A `kB` figure from `/proc/self/status`.
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            let line = status.lines().find(|l| l.starts_with(field))?.to_owned();
            line.split_whitespace().nth(1)?.parse().ok()
        })
        .unwrap_or(0)
}

/// CPU time of this process, all threads (`/proc/self/stat` utime + stime, in clock ticks of
/// 10 ms: the kernel's USER_HZ is 100 on every Linux this runs on).
fn process_cpu_ns() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0;
    };
    // Fields after the command name (which is in parentheses and may hold spaces).
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    let fields: Vec<&str> = after.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of stat(5); `after` starts at field 3.
    (ticks(11) + ticks(12)) * 10_000_000
}

/// Catalog files under `dir`, sorted (as `load_path` reads them).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), Error> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files_under(&path, out)?;
        } else {
            out.push(path);
        }
    }
    Ok(())
}

/// The parser alone over every file: serde_json (a stream of values) into `IgnoredAny`, or
/// granit-parser's event stream over a multi-document YAML file (the parser POM drives; until
/// its YAML front end read events, the floor was serde-saphyr into `IgnoredAny`, about half as
/// fast).
fn floor(dir: &Path) -> Result<(), Error> {
    let mut files = Vec::new();
    files_under(dir, &mut files)?;
    for file in files {
        let bytes = std::fs::read(&file)?;
        if bytes.first() == Some(&b'{') {
            for value in serde_json::Deserializer::from_slice(&bytes).into_iter::<IgnoredAny>() {
                value?;
            }
        } else {
            let text = std::str::from_utf8(&bytes)?;
            for event in serde_saphyr::granit_parser::Parser::new_from_str(text) {
                std::hint::black_box(event?);
            }
        }
    }
    Ok(())
}

fn child(tool: &str, dir: &Path) -> Result<(), Error> {
    // The model is kept until the figures are taken: freeing it is not loading (and the Go
    // side's model is not collected before its timing ends either).
    let mut keep = None;
    let cpu_start = process_cpu_ns();
    let start = Instant::now();
    let counts = match tool {
        "pom" => {
            let catalog = pom_resolver::fbc::load_path(dir)?;
            if !catalog.invalid_packages.is_empty() {
                return Err(format!(
                    "POM refused packages: {:?}",
                    catalog.invalid_packages.keys().collect::<Vec<_>>()
                )
                .into());
            }
            let counts = inputs::pom_counts(&catalog);
            keep = Some(std::hint::black_box(catalog));
            Some(counts)
        }
        "floor" => {
            floor(dir)?;
            None
        }
        other => return Err(format!("unknown child {other}").into()),
    };
    let wall_ns = u64::try_from(start.elapsed().as_nanos())?;
    let cpu_ns = process_cpu_ns().saturating_sub(cpu_start);
    drop(keep);
    let mut out = json!({ "wall_ns": wall_ns, "cpu_ns": cpu_ns, "peak_kib": status_kib("VmHWM:") });
    if let Some(c) = counts {
        out["packages"] = json!(c.packages);
        out["channels"] = json!(c.channels);
        out["bundles"] = json!(c.bundles);
    }
    println!("{out}");
    Ok(())
}

// ---------------------------------------------------------------- parent side

fn field(value: &Value, name: &str) -> Result<u64, Error> {
    value
        .get(name)
        .and_then(Value::as_u64)
        .ok_or_else(|| format!("no {name} in {value}").into())
}

fn run_process(command: &mut Command, what: &str) -> Result<Sample, Error> {
    let output = command.output()?;
    if !output.status.success() {
        return Err(format!(
            "{what} failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )
        .into());
    }
    let stdout = String::from_utf8(output.stdout)?;
    let line = stdout.lines().last().ok_or("no output")?;
    let v: Value = serde_json::from_str(line)?;
    let counts = match v.get("packages") {
        Some(_) => Some(Counts {
            packages: usize::try_from(field(&v, "packages")?)?,
            channels: usize::try_from(field(&v, "channels")?)?,
            bundles: usize::try_from(field(&v, "bundles")?)?,
        }),
        None => None,
    };
    let sample = if v.get("load_ns").is_some() {
        // The Go program's line.
        Sample {
            wall_ns: field(&v, "load_ns")? + field(&v, "convert_ns")?,
            cpu_ns: field(&v, "cpu_ns").unwrap_or(0),
            peak_kib: field(&v, "max_rss_kib")?,
            counts,
        }
    } else {
        Sample {
            wall_ns: field(&v, "wall_ns")?,
            cpu_ns: field(&v, "cpu_ns")?,
            peak_kib: field(&v, "peak_kib")?,
            counts,
        }
    };
    Ok(sample)
}

fn measure(tool: &str, input: &Input, go: Option<&Path>) -> Result<Option<Sample>, Error> {
    let mut command = match tool {
        "go" => match go {
            Some(go) => {
                let mut c = Command::new(go);
                c.arg(&input.dir);
                c
            }
            None => return Ok(None),
        },
        _ => {
            let mut c = Command::new(std::env::current_exe()?);
            c.arg("--child").arg(tool).arg(&input.dir);
            c
        }
    };
    run_process(&mut command, &format!("{tool} on {}", input.name)).map(Some)
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    match values.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => values[n / 2],
        n => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn compare(args: &Args) -> Result<(), Error> {
    let work = args.work.clone().unwrap_or_else(|| {
        std::env::temp_dir().join(format!("pom-bench-compare-{}", std::process::id()))
    });
    println!(
        "generating {} packages x {} bundles under {}",
        args.packages,
        args.bundles,
        work.display()
    );
    let mut all = inputs::write_inputs(&work, args.packages, args.bundles)?;
    if let Some(only) = &args.only {
        all.retain(|i| only.iter().any(|o| o == i.name));
    }
    let expected = inputs::expected_counts(args.packages, args.bundles);
    let go = args.go.as_deref();
    if go.is_none() {
        println!("no --go: operator-registry's loader is not measured");
    }
    println!(
        "{} rounds, each tool in its own process, order rotating; load average before: {}",
        args.runs,
        load_average()
    );

    // samples[input][tool] = per-round samples.
    let mut samples: Vec<Vec<Vec<Sample>>> = vec![vec![Vec::new(); TOOLS.len()]; all.len()];
    for round in 0..args.runs {
        for (i, input) in all.iter().enumerate() {
            for k in 0..TOOLS.len() {
                let t = (k + round) % TOOLS.len();
                let Some(sample) = measure(TOOLS[t], input, go)? else {
                    continue;
                };
                if let Some(counts) = sample.counts
                    && counts != expected
                {
                    return Err(format!(
                        "{} on {}: counted {counts:?}, the generator wrote {expected:?}",
                        TOOLS[t], input.name
                    )
                    .into());
                }
                samples[i][t].push(sample);
            }
        }
        println!(
            "round {}/{} done (load {})",
            round + 1,
            args.runs,
            load_average()
        );
    }

    let mut table = String::new();
    let mut efficiency = String::from(
        "\nOn a shared machine the wall figures above depend on the cores other work leaves free. \
         Best round (the least disturbed) and throughput per CPU-second (all threads):\n\n\
         | input | POM best MiB/s | Go best MiB/s | floor best MiB/s | POM best ÷ floor best | POM MiB/CPU-s | Go MiB/CPU-s | floor MiB/CPU-s | POM cores in its best round |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    let _ = writeln!(
        table,
        "\n| input | MiB | POM MiB/s | Go MiB/s | floor MiB/s | POM ÷ Go | POM ÷ floor | POM cores | Go cores | POM peak ÷ input | Go peak ÷ input | floor peak ÷ input |"
    );
    let _ = writeln!(table, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for (i, input) in all.iter().enumerate() {
        let size = mib(input.bytes);
        let speed = |t: usize| {
            let mut v: Vec<f64> = samples[i][t]
                .iter()
                .map(|s| size / (s.wall_ns as f64 / 1e9))
                .collect();
            median(&mut v)
        };
        let cores = |t: usize| {
            let mut v: Vec<f64> = samples[i][t]
                .iter()
                .map(|s| s.cpu_ns as f64 / s.wall_ns.max(1) as f64)
                .collect();
            median(&mut v)
        };
        let peak = |t: usize| {
            let mut v: Vec<f64> = samples[i][t]
                .iter()
                .map(|s| s.peak_kib as f64 / 1024.0 / size)
                .collect();
            median(&mut v)
        };
        // Per-round ratio of throughputs (= inverse ratio of times), then the median.
        let ratio = |a: usize, b: usize| {
            let mut v: Vec<f64> = samples[i][a]
                .iter()
                .zip(&samples[i][b])
                .map(|(x, y)| y.wall_ns as f64 / x.wall_ns as f64)
                .collect();
            median(&mut v)
        };
        let best = |t: usize| {
            samples[i][t]
                .iter()
                .min_by_key(|s| s.wall_ns)
                .map_or((f64::NAN, f64::NAN), |s| {
                    (
                        size / (s.wall_ns as f64 / 1e9),
                        s.cpu_ns as f64 / s.wall_ns.max(1) as f64,
                    )
                })
        };
        let per_cpu = |t: usize| {
            let mut v: Vec<f64> = samples[i][t]
                .iter()
                .filter(|s| s.cpu_ns > 0)
                .map(|s| size / (s.cpu_ns as f64 / 1e9))
                .collect();
            median(&mut v)
        };
        let _ = writeln!(
            efficiency,
            "| {} | {:.1} | {:.1} | {:.1} | {:.0}% | {:.1} | {:.1} | {:.1} | {:.2} |",
            input.name,
            best(0).0,
            best(2).0,
            best(1).0,
            100.0 * best(0).0 / best(1).0,
            per_cpu(0),
            per_cpu(2),
            per_cpu(1),
            best(0).1,
        );
        let _ = writeln!(
            table,
            "| {} | {:.1} | {:.1} | {:.1} | {:.1} | {:.2}× | {:.0}% | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
            input.name,
            size,
            speed(0),
            speed(2),
            speed(1),
            ratio(0, 2),
            100.0 * ratio(0, 1),
            cores(0),
            cores(2),
            peak(0),
            peak(2),
            peak(1),
        );
    }
    println!("{table}{efficiency}");
    println!(
        "counts (POM{} and the generator agree): {} packages, {} channels, {} bundles",
        if go.is_some() {
            ", operator-registry"
        } else {
            ""
        },
        expected.packages,
        expected.channels,
        expected.bundles
    );
    println!("load average after: {}", load_average());
    if args.work.is_none() {
        std::fs::remove_dir_all(&work)?;
    }
    Ok(())
}

fn main() -> Result<(), Error> {
    let raw: Vec<String> = std::env::args().skip(1).collect();
    if raw.first().map(String::as_str) == Some("--child") {
        let tool = raw.get(1).ok_or("--child needs a tool")?;
        let dir = raw.get(2).ok_or("--child needs a folder")?;
        return child(tool, Path::new(dir));
    }
    // `cargo bench -p pom-resolver` (`make bench`) runs every bench target with criterion's
    // arguments: this one only runs when asked for, with `--go` or `--no-go`.
    if !raw.iter().any(|a| a == "--go" || a == "--no-go") {
        println!(
            "bench_compare: skipped (run it with `make bench-compare`, or --go PATH / --no-go)"
        );
        return Ok(());
    }
    compare(&parse_args(&raw)?)
}
