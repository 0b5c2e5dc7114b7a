//! `pom-catalog-rss`: the manager's memory with a large catalog image (issue 10 items 1 and 2).
//!
//! Starts kube-apiserver and etcd (`Workloads::None`: nothing has to run) and the loopback OCI
//! registry, pushes the resolver benchmarks' synthetic catalog (`crates/resolver/benches/common`,
//! by default 1,000 packages x 50 bundles, about 149 MiB of JSON) as a catalog image laid out as
//! OpenShift's index images are (`/configs/<package>/catalog.json`), runs the release-built
//! manager as its own process (`pom-manager-e2e`, `--leader-elect=false`, the registry
//! insecure), creates a `Catalog` naming the image and waits until it is `Serving`. Then it
//! creates PlatformOperators in steps (by default 10, then up to 1,000), each naming a distinct
//! package, and after every step waits until each PO has been reconciled (its status describes
//! its generation and has an `Installed` condition) and the reasons stopped changing.
//!
//! At each point it prints the manager's `VmHWM` (peak RSS) and `VmRSS` from
//! `/proc/<pid>/status`, with `RssAnon` and `RssFile`, and the states the POs reached. The
//! bundle images of the synthetic catalog are rewritten to name the loopback registry, where
//! they do not exist: POs resolve and then fail to pull, without any request leaving the
//! machine.
//!
//! Build and run (release):
//! `cargo build --release -p pom-e2e --bin pom-catalog-rss --bin pom-manager-e2e &&
//! POM_TEST_BIN_DIR=<cache> target/release/pom-catalog-rss`. Flags: `--packages N`,
//! `--bundles N`, `--steps 10,1000`, `--settle-seconds S`. `POM_MANAGER_BIN` names another
//! manager binary. Exit code 0 when every step was measured, 2 otherwise.

// The generator of the resolver's benchmarks, so that this is the catalog they measure.
#[path = "../../../crates/resolver/benches/common/mod.rs"]
mod synthetic;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::Namespace;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::manager_process::{ManagerProcess, free_address, http_get};
use pom_e2e::oci_publish::push_files;
use pom_e2e::{ControlPlane, Registry, Workloads};
use serde_json::json;

const MANAGER_NAMESPACE: &str = "openshift-platform-operators";
const CATALOG_NAME: &str = "synthetic";

struct Options {
    packages: usize,
    bundles: usize,
    /// Total POs after each step (each step adds POs for the next packages).
    steps: Vec<usize>,
    /// After every PO of a step was reconciled, the states must not change for this long.
    settle: Duration,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Self {
            packages: 1000,
            bundles: 50,
            steps: vec![10, 1000],
            settle: Duration::from_secs(15),
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = || args.next().ok_or_else(|| anyhow!("{arg} needs a value"));
            let number = |text: &str| -> Result<usize> {
                text.trim()
                    .parse()
                    .with_context(|| format!("{text:?} is not a number"))
            };
            match arg.as_str() {
                "--packages" => options.packages = number(&value()?)?,
                "--bundles" => options.bundles = number(&value()?)?.max(1),
                "--steps" => {
                    options.steps = value()?
                        .split(',')
                        .map(number)
                        .collect::<Result<Vec<_>>>()?;
                }
                "--settle-seconds" => {
                    options.settle = Duration::from_secs(number(&value()?)? as u64);
                }
                other => bail!(
                    "unknown argument {other:?} (flags: --packages N --bundles N --steps N[,N...] --settle-seconds S)"
                ),
            }
        }
        if options.steps.windows(2).any(|w| w[0] >= w[1]) {
            bail!("--steps must grow: {:?}", options.steps);
        }
        if let Some(&last) = options.steps.last()
            && last > options.packages
        {
            bail!(
                "--steps {last} names more packages than the catalog has ({})",
                options.packages
            );
        }
        Ok(options)
    }
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pom-catalog-rss: starting the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("pom-catalog-rss: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// One row of the results table.
struct Row {
    what: String,
    memory: MemorySample,
    states: String,
    /// [`smaps_breakdown`] at that point.
    mappings: String,
}

async fn run() -> Result<()> {
    let options = Options::parse()?;
    let started = Instant::now();
    let manager_bin = manager_binary()?;
    println!(
        "pom-catalog-rss: {} packages x {} bundles, steps {:?}, manager {}; load average {}",
        options.packages,
        options.bundles,
        options.steps,
        manager_bin.display(),
        load_average()
    );

    let plane = ControlPlane::start(Workloads::None)
        .await
        .context("starting the control plane (build the binaries with `make e2e-binaries`)")?;
    let client = plane.client().await?;
    let registry = Registry::start().await.context("starting the registry")?;
    let host = registry.host();
    println!(
        "control plane and registry {host} up in {:.1}s",
        started.elapsed().as_secs_f64()
    );

    let generated = Instant::now();
    let files = catalog_files(options.packages, options.bundles, &host);
    let bytes: usize = files.iter().map(|(_, data)| data.len()).sum();
    println!(
        "catalog: {} files, {:.1} MiB of JSON, generated in {:.1}s",
        files.len(),
        bytes as f64 / 1024.0 / 1024.0,
        generated.elapsed().as_secs_f64()
    );
    let pushed = Instant::now();
    let image = push_files(&host, "catalogs/synthetic", "v1", &files)
        .await
        .context("pushing the catalog image")?;
    drop(files);
    println!("pushed {image} in {:.1}s", pushed.elapsed().as_secs_f64());

    create_namespace(&client, MANAGER_NAMESPACE).await?;
    let health = free_address()?;
    let metrics = free_address()?;
    let content_dir = plane.dir().join("catalog-content");
    let args = vec![
        "--leader-elect=false".to_owned(),
        format!("--health-bind-address={health}"),
        format!("--metrics-bind-address={metrics}"),
        format!("--insecure-registries={host}"),
        format!("--catalog-content-dir={}", content_dir.display()),
    ];
    let manager = ManagerProcess::spawn(
        &manager_bin,
        "pom-catalog-rss-manager",
        plane.kubeconfig_path(),
        &args,
        &[
            ("POD_NAMESPACE", MANAGER_NAMESPACE),
            ("RELEASE_VERSION", "4.99.0-pom-catalog-rss"),
            ("RUST_LOG", "info,kube=warn,hyper=warn,tower=warn"),
            // As the shipped Deployment runs it (`manifests.rs`); an `MALLOC_ARENA_MAX` already
            // in this process's environment (to measure another value) wins.
            (
                "MALLOC_ARENA_MAX",
                &std::env::var("MALLOC_ARENA_MAX").unwrap_or_else(|_| "2".to_owned()),
            ),
        ],
        plane.dir(),
    )
    .await?;
    wait_ready(&manager, health).await?;
    let mut rows = vec![Row {
        what: "manager ready, no Catalog".to_owned(),
        memory: MemorySample::read(manager.pid())?,
        mappings: smaps_breakdown(manager.pid()),
        states: String::new(),
    }];
    print_row(&rows[rows.len() - 1]);

    let serving_started = Instant::now();
    let catalog: Catalog = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": CATALOG_NAME},
        "spec": {"source": {"image": {"ref": format!("{host}/catalogs/synthetic:v1")}}}
    }))?;
    Api::<Catalog>::all(client.clone())
        .create(&PostParams::default(), &catalog)
        .await
        .context("creating the Catalog")?;
    let (packages, invalid) = wait_serving(&client, &manager).await?;
    println!(
        "Catalog {CATALOG_NAME} Serving after {:.1}s: {packages} packages, {invalid} invalid",
        serving_started.elapsed().as_secs_f64()
    );
    settle(&client, &manager, 0, options.settle).await?;
    rows.push(Row {
        what: "Catalog Serving, 0 POs".to_owned(),
        memory: MemorySample::read(manager.pid())?,
        mappings: smaps_breakdown(manager.pid()),
        states: String::new(),
    });
    print_row(&rows[rows.len() - 1]);

    let mut created = 0;
    for &total in &options.steps {
        let step_started = Instant::now();
        create_pos(&client, created..total).await?;
        created = total;
        let states = settle(&client, &manager, total, options.settle).await?;
        println!(
            "{total} POs reconciled and settled {:.1}s after their creation",
            step_started.elapsed().as_secs_f64()
        );
        rows.push(Row {
            what: format!("{total} POs ({total} packages named)"),
            memory: MemorySample::read(manager.pid())?,
            mappings: smaps_breakdown(manager.pid()),
            states,
        });
        print_row(&rows[rows.len() - 1]);
    }

    let reconciles = scrape_reconciles(metrics).await;
    println!();
    println!("== pom-catalog-rss results ==");
    println!(
        "catalog: {} packages x {} bundles, {:.1} MiB JSON in {} files, image {image}",
        options.packages,
        options.bundles,
        bytes as f64 / 1024.0 / 1024.0,
        options.packages
    );
    println!(
        "| point | VmHWM MiB | VmRSS MiB | RssAnon MiB | RssFile MiB | threads | manager CPU s | PO states (Installed status/reason, resolved) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for row in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} | {:.1} | {} |",
            row.what,
            mib(row.memory.hwm),
            mib(row.memory.rss),
            mib(row.memory.anon),
            mib(row.memory.file),
            row.memory.threads,
            row.memory.cpu_ms as f64 / 1000.0,
            row.states
        );
    }
    println!(
        "PO reconciles: {}",
        reconciles.map_or_else(|| "?".to_owned(), |n| n.to_string())
    );
    let warnings = manager
        .log_text()
        .lines()
        .filter(|l| l.contains("WARN"))
        .count();
    println!("manager warnings in its log: {warnings}");
    println!(
        "wall time {:.0}s; load average at the end {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );

    manager.signal("TERM");
    drop(manager);
    drop(registry);
    drop(plane);
    Ok(())
}

/// The synthetic catalog as one `configs/<package>/catalog.json` per package, with bundle
/// images moved to `host` (where they do not exist).
fn catalog_files(packages: usize, bundles: usize, host: &str) -> Vec<(String, Vec<u8>)> {
    let moved = format!("{host}/synthetic/");
    let mut files: Vec<(String, Vec<u8>)> = Vec::with_capacity(packages);
    synthetic::for_each_synthetic_blob(packages, bundles, |p, blob| {
        if files.len() <= p {
            files.push((
                format!("configs/{}/catalog.json", synthetic::package_name(p)),
                Vec::new(),
            ));
        }
        if let Some((_, data)) = files.last_mut() {
            let text = blob.to_string().replace("quay.io/synthetic/", &moved);
            data.extend_from_slice(text.as_bytes());
            data.push(b'\n');
        }
    });
    files
}

/// Creates the POs of packages `range` (20 requests in flight).
async fn create_pos(client: &Client, range: std::ops::Range<usize>) -> Result<()> {
    let api = Api::<PlatformOperator>::all(client.clone());
    futures::stream::iter(range)
        .map(|p| {
            let api = api.clone();
            async move {
                let package = synthetic::package_name(p);
                let po: PlatformOperator = serde_json::from_value(json!({
                    "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                    "metadata": {"name": package},
                    "spec": {"package": {"name": package}}
                }))?;
                api.create(&PostParams::default(), &po)
                    .await
                    .with_context(|| format!("creating PlatformOperator {package}"))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(20)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

/// What a PO's status says: `None` until it describes the current generation with an
/// `Installed` condition, else `<status>/<reason>` and whether a bundle was chosen.
fn state(po: &PlatformOperator) -> Option<String> {
    let status = po.status.as_ref()?;
    if status.observed_generation != po.metadata.generation {
        return None;
    }
    let installed = status.conditions.iter().find(|c| c.type_ == "Installed")?;
    let resolved = if status.desired_bundle.is_some() {
        "resolved"
    } else {
        "unresolved"
    };
    Some(format!(
        "{}/{} {resolved}",
        installed.status, installed.reason
    ))
}

/// Waits until all `expected` POs have a state and the counts of states stayed the same for
/// `quiet` (at most 30 minutes); returns the counts, most common first.
async fn settle(
    client: &Client,
    manager: &ManagerProcess,
    expected: usize,
    quiet: Duration,
) -> Result<String> {
    let api = Api::<PlatformOperator>::all(client.clone());
    let started = Instant::now();
    let mut last = String::new();
    let mut since = Instant::now();
    let mut reported = Instant::now();
    loop {
        ensure_running(manager)?;
        let pos = api.list(&ListParams::default()).await?;
        let mut counts: BTreeMap<String, usize> = BTreeMap::new();
        for po in &pos.items {
            *counts
                .entry(state(po).unwrap_or_else(|| "not reconciled yet".to_owned()))
                .or_default() += 1;
        }
        let mut sorted: Vec<(String, usize)> = counts.into_iter().collect();
        sorted.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        let summary = sorted
            .iter()
            .map(|(state, n)| format!("{n} {state}"))
            .collect::<Vec<_>>()
            .join(", ");
        let done = pos.items.len() == expected
            && !sorted
                .iter()
                .any(|(state, _)| state == "not reconciled yet");
        if summary != last || !done {
            if summary != last {
                since = Instant::now();
            }
            last = summary;
        } else if since.elapsed() >= quiet {
            return Ok(last);
        }
        if reported.elapsed() >= Duration::from_secs(15) {
            let memory = MemorySample::read(manager.pid())?;
            println!(
                "  {:>5.0}s: {} | VmRSS {} MiB, VmHWM {} MiB, load {}",
                started.elapsed().as_secs_f64(),
                if last.is_empty() { "no PO" } else { &last },
                mib(memory.rss),
                mib(memory.hwm),
                load_average()
            );
            reported = Instant::now();
        }
        if started.elapsed() > Duration::from_secs(30 * 60) {
            bail!("the POs did not settle within 30 minutes: {last}");
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Waits until the Catalog is `Serving=True`; its package count and invalid packages.
async fn wait_serving(client: &Client, manager: &ManagerProcess) -> Result<(i64, usize)> {
    let api = Api::<Catalog>::all(client.clone());
    let started = Instant::now();
    loop {
        ensure_running(manager)?;
        let catalog = api.get(CATALOG_NAME).await?;
        if let Some(status) = &catalog.status {
            let serving = status.conditions.iter().find(|c| c.type_ == "Serving");
            if let Some(condition) = serving {
                if condition.status == "True" {
                    return Ok((
                        status.packages.unwrap_or_default(),
                        status.invalid_packages.len(),
                    ));
                }
                if started.elapsed() > Duration::from_secs(600) {
                    bail!(
                        "the Catalog is not Serving after 600s: {} {}: {}",
                        condition.status,
                        condition.reason,
                        condition.message
                    );
                }
            }
        }
        if started.elapsed() > Duration::from_secs(600) {
            bail!(
                "the Catalog has no Serving condition after 600s; manager log:\n{}",
                manager.log_tail(20)
            );
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// The manager's memory at one moment, in KiB, from `/proc/<pid>/status`.
#[derive(Debug, Clone, Copy)]
struct MemorySample {
    hwm: u64,
    rss: u64,
    anon: u64,
    file: u64,
    threads: u64,
    /// CPU time used so far, every thread's, in milliseconds.
    cpu_ms: u128,
}

impl MemorySample {
    fn read(pid: u32) -> Result<Self> {
        let path = format!("/proc/{pid}/status");
        let status = std::fs::read_to_string(&path).with_context(|| format!("reading {path}"))?;
        let field = |name: &str| -> Result<u64> {
            status
                .lines()
                .find_map(|line| line.strip_prefix(name)?.strip_prefix(':'))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
                .with_context(|| format!("{name} in {path}"))
        };
        Ok(Self {
            hwm: field("VmHWM")?,
            rss: field("VmRSS")?,
            anon: field("RssAnon")?,
            file: field("RssFile")?,
            threads: field("Threads")?,
            cpu_ms: pom_e2e::process::cpu_time(pid).map_or(0, |cpu| cpu.as_millis()),
        })
    }
}

fn print_row(row: &Row) {
    println!(
        "[{}] VmHWM {} MiB, VmRSS {} MiB (anon {}, file {}; {} threads; CPU {:.1} s){}; load {}",
        row.what,
        mib(row.memory.hwm),
        mib(row.memory.rss),
        mib(row.memory.anon),
        mib(row.memory.file),
        row.memory.threads,
        row.memory.cpu_ms as f64 / 1000.0,
        if row.states.is_empty() {
            String::new()
        } else {
            format!("; POs: {}", row.states)
        },
        load_average()
    );
    println!("    where: {}", row.mappings);
}

/// Where the resident memory of `pid` is, from `/proc/<pid>/smaps`: the `[heap]` (glibc's main
/// arena), anonymous mappings (other arenas, large allocations, thread stacks), files.
fn smaps_breakdown(pid: u32) -> String {
    let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/smaps")) else {
        return "smaps unreadable".to_owned();
    };
    let (mut heap, mut anon, mut file, mut other) = (0u64, 0u64, 0u64, 0u64);
    let (mut anon_maps, mut big_anon_maps) = (0usize, 0usize);
    let mut kind = "";
    for line in text.lines() {
        let mut words = line.split_whitespace();
        let first = words.next().unwrap_or_default();
        if first.contains('-') && first.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            let path = words.nth(4).unwrap_or_default();
            kind = match path {
                "[heap]" => "heap",
                "" => "anon",
                p if p.starts_with('/') => "file",
                _ => "other",
            };
            continue;
        }
        if first == "Rss:" {
            let kib: u64 = words
                .next()
                .and_then(|n| n.parse().ok())
                .unwrap_or_default();
            match kind {
                "heap" => heap += kib,
                "anon" => {
                    anon += kib;
                    anon_maps += usize::from(kib > 0);
                    big_anon_maps += usize::from(kib > 1024);
                }
                "file" => file += kib,
                _ => other += kib,
            }
        }
    }
    format!(
        "[heap] {} MiB, anonymous mappings {} MiB ({anon_maps} resident, {big_anon_maps} over 1 MiB), files {} MiB, other {} MiB",
        mib(heap),
        mib(anon),
        mib(file),
        mib(other)
    )
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The load average of the machine (1, 5, 15 minutes).
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|text| {
            text.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        })
        .unwrap_or_else(|| "?".to_owned())
}

/// `pom_reconciles_total{controller="platformoperator"}` from the manager's `/metrics`.
async fn scrape_reconciles(metrics: SocketAddr) -> Option<u64> {
    let (_, _, body) = http_get(metrics, "/metrics").await?;
    body.lines()
        .filter(|l| l.starts_with("pom_reconciles_total{") && l.contains("platformoperator"))
        .filter_map(|l| l.rsplit_once(' ')?.1.parse::<f64>().ok())
        .map(|n| n as u64)
        .reduce(|a, b| a + b)
}

/// `POM_MANAGER_BIN`, else `pom-manager-e2e` next to this binary.
fn manager_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("POM_MANAGER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("locating pom-catalog-rss")?;
    let path = exe.with_file_name("pom-manager-e2e");
    if !path.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release -p pom-e2e --bin pom-catalog-rss --bin pom-manager-e2e` or set POM_MANAGER_BIN",
            path.display()
        );
    }
    Ok(path)
}

fn ensure_running(manager: &ManagerProcess) -> Result<()> {
    if manager.is_running() {
        Ok(())
    } else {
        bail!("the manager exited; its log:\n{}", manager.log_tail(40))
    }
}

async fn wait_ready(manager: &ManagerProcess, health: SocketAddr) -> Result<()> {
    let started = Instant::now();
    loop {
        if let Some((200, _, _)) = http_get(health, "/readyz").await {
            return Ok(());
        }
        ensure_running(manager)?;
        if started.elapsed() > Duration::from_secs(60) {
            bail!(
                "the manager was not ready within 60s; its log:\n{}",
                manager.log_tail(40)
            );
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn create_namespace(client: &Client, name: &str) -> Result<()> {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 409 => Ok(()),
        Err(err) => Err(err).with_context(|| format!("creating namespace {name}")),
    }
}
