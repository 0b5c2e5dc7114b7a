//! `pom-bench`: the issue-4 benchmark. N PlatformOperators (default 200) against a real control
//! plane with simulated workloads (kube-apiserver, etcd, controller-manager, scheduler, a kwok
//! node), the manager running as its own process so that its memory is measured alone.
//!
//! It reports the time until every PlatformOperator is `Installed=True`, the API writes the
//! manager made (from its own `pom_api_requests_total`, so writes by the controller-manager or by
//! this program never count), the writes during a steady window that must have none, and the
//! manager's peak RSS (`VmHWM`). Exit code: 0 when the steady window had no write, 1 when it had
//! some (the breakdown by verb and resource is printed), 2 when the benchmark could not run.
//!
//! With `--floor` (issue 10 items 1 and 4) it also measures the floor (`pom_e2e::floor`): the
//! very objects POM applies for each PO (rendered by the same `pom_render` call), applied by
//! a minimal server-side-apply client with `--floor-concurrency` bundles in flight, waited for
//! like POM waits (CRDs Established, Deployments rolled out). Each floor run and each POM run
//! gets a fresh control plane; with `--rounds R` they alternate (floor, POM, floor, POM, ...)
//! so that load on the shared machine hits both, and the POM ÷ floor ratio is printed.
//!
//! With `--restart` and/or `--failover` (issue 32 item 4, `pom_bench/restart.rs`) it measures,
//! with the POs settled, a fresh manager after a SIGKILL and a leader failover of two replicas:
//! the time to a correct aggregated ClusterOperator and to every PO reconciled, the writes and
//! API requests of the new process, against a floor measured on the same plane (a list of every
//! PO and Catalog, the catalog load, one aggregate write). Exit code 1 when the new process
//! wrote anything but status that changed (and, in a failover, the Lease).
//!
//! Run it with `make bench-install` (release build). Flags: `--pos N`, `--per-catalog N`,
//! `--steady-seconds S`, `--resync-seconds S`, `--no-crds`, `--install-timeout-seconds S`,
//! `--held`, `--floor`, `--floor-only`, `--floor-concurrency N[,N...]`, `--rounds R`,
//! `--compare-manager PATH` (a second manager binary, run after the first in every round),
//! `--restart`, `--failover`.

#[path = "pom_bench/restart.rs"]
mod restart;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, anyhow, bail};
use futures::{StreamExt as _, TryStreamExt as _};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Node};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt as _, watcher};
use kube::{Client, ResourceExt as _};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::floor::{self, FloorBundle, FloorResult};
use pom_e2e::manager_process::{ManagerProcess, free_address, http_get};
use pom_e2e::scenario::set_cluster;
use pom_e2e::{ControlPlane, Workloads};
use serde_json::json;

const MANAGER_NAMESPACE: &str = "openshift-platform-operators";
const CATALOG_NAMESPACE: &str = "catalogs";
/// After the last PO is Installed, writes may still trail (pins settle, the ClusterOperator
/// catches up); the steady window starts once the manager has not written for this long.
const QUIET: Duration = Duration::from_secs(10);
/// A catalog ConfigMap must stay under the API server's 1 MiB object limit (etcd's request
/// limit is 1.5 MiB; ConfigMap data is capped at 1 MiB).
const CONFIGMAP_LIMIT: usize = 1024 * 1024;

#[derive(Debug)]
struct Options {
    pos: usize,
    per_catalog: usize,
    steady: Duration,
    resync_seconds: u64,
    crds: bool,
    install_timeout: Duration,
    /// After settling, hold every PO's next hop by its operator's `Upgradeable=False` during a
    /// minor cluster update, and measure that state instead of a settled one.
    held: bool,
    /// Also measure the floor (`pom_e2e::floor`).
    floor: bool,
    /// Only the floor (no manager).
    floor_only: bool,
    /// Bundles in flight in the floor; several values are each measured (each on a fresh
    /// control plane) and the fastest is the floor.
    floor_concurrency: Vec<usize>,
    /// Floor and POM alternate this many times.
    rounds: usize,
    /// A second manager binary, run after the first in every round (an A/B of a change).
    compare_manager: Option<PathBuf>,
    /// Measure a restart after SIGKILL with the POs settled (`restart.rs`).
    restart: bool,
    /// Measure a leader failover of two replicas with the POs settled (`restart.rs`).
    failover: bool,
}

impl Options {
    fn parse() -> Result<Self> {
        let mut options = Self {
            pos: 200,
            per_catalog: 50,
            steady: Duration::from_secs(60),
            // Shorter than the window, so every PO is re-reconciled at least once while the
            // window checks that a reconcile with nothing to do writes nothing.
            resync_seconds: 30,
            crds: true,
            install_timeout: Duration::from_secs(20 * 60),
            held: false,
            floor: false,
            floor_only: false,
            floor_concurrency: vec![64],
            rounds: 1,
            compare_manager: None,
            restart: false,
            failover: false,
        };
        let mut timeout_given = false;
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            let mut value = |name: &str| -> Result<String> {
                args.next().ok_or_else(|| anyhow!("{name} needs a value"))
            };
            let number = |name: &str, value: String| -> Result<u64> {
                value
                    .parse()
                    .with_context(|| format!("{name} {value:?} is not a number"))
            };
            match arg.as_str() {
                "--held" => options.held = true,
                "--restart" => options.restart = true,
                "--failover" => options.failover = true,
                "--floor" => options.floor = true,
                "--floor-only" => {
                    options.floor = true;
                    options.floor_only = true;
                }
                "--floor-concurrency" => {
                    let list = value(&arg)?;
                    options.floor_concurrency = list
                        .split(',')
                        .map(|n| Ok(usize::try_from(number(&arg, n.trim().to_owned())?)?.max(1)))
                        .collect::<Result<_>>()?;
                }
                "--rounds" => options.rounds = usize::try_from(number(&arg, value(&arg)?)?)?.max(1),
                "--pos" => options.pos = usize::try_from(number(&arg, value(&arg)?)?)?,
                "--per-catalog" => {
                    options.per_catalog = usize::try_from(number(&arg, value(&arg)?)?)?.max(1);
                }
                "--steady-seconds" => {
                    options.steady = Duration::from_secs(number(&arg, value(&arg)?)?);
                }
                "--resync-seconds" => options.resync_seconds = number(&arg, value(&arg)?)?,
                "--install-timeout-seconds" => {
                    options.install_timeout = Duration::from_secs(number(&arg, value(&arg)?)?);
                    timeout_given = true;
                }
                "--no-crds" => options.crds = false,
                "--compare-manager" => options.compare_manager = Some(value(&arg)?.into()),
                other => bail!(
                    "unknown argument {other:?} (flags: --pos N --per-catalog N --steady-seconds S --resync-seconds S --install-timeout-seconds S --no-crds --held --floor --floor-only --floor-concurrency N[,N...] --rounds R --compare-manager PATH --restart --failover)"
                ),
            }
        }
        if !timeout_given {
            // 20 minutes covers 200 POs many times over; beyond that, about 1.2 s per PO.
            options.install_timeout = options
                .install_timeout
                .max(Duration::from_millis(1200 * options.pos as u64));
        }
        Ok(options)
    }

    /// How long settling may take: 3 minutes, plus a tenth of a second per PO.
    fn settle_limit(&self) -> Duration {
        Duration::from_secs(180) + Duration::from_millis(100 * self.pos as u64)
    }
}

fn main() -> ExitCode {
    // kube uses rustls; pick the provider once, as the manager does.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("pom-bench: starting the async runtime: {err}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run()) {
        Ok(0) => ExitCode::SUCCESS,
        Ok(_) => ExitCode::FAILURE,
        Err(err) => {
            eprintln!("pom-bench: {err:#}");
            ExitCode::from(2)
        }
    }
}

/// The load average of the machine (1, 5, 15 minutes), as `/proc/loadavg` says.
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

/// One round's times: the best floor, POM, the compared manager; the load average after it.
type Round = (Option<Duration>, Option<Duration>, Option<Duration>, String);

/// What one POM run measured.
struct PomResult {
    installed_after: Duration,
    /// The manager's CPU time until every PO was Installed: unlike the wall time, barely moved
    /// by what else runs on the machine, so two builds compare by it under load.
    cpu_at_installed: Option<Duration>,
    steady_writes: u64,
}

/// The whole benchmark; returns the number of writes in the steady windows.
async fn run() -> Result<u64> {
    let options = Options::parse()?;
    let started = Instant::now();
    println!(
        "pom-bench: {} PlatformOperators ({} per catalog, CRDs {}), upgradeGate Rollout, resync {}s, steady window {}s{}; load average {}",
        options.pos,
        options.per_catalog,
        if options.crds { "on" } else { "off" },
        options.resync_seconds,
        options.steady.as_secs(),
        if options.floor {
            format!(
                ", floor with {:?} bundles in flight, {} round(s)",
                options.floor_concurrency, options.rounds
            )
        } else {
            String::new()
        },
        load_average()
    );
    let bundles: Vec<TestBundle> = (0..options.pos)
        .map(|i| {
            let bundle = TestBundle::new(&format!("bench-{i:03}"), "1.0.0");
            if options.crds {
                bundle
            } else {
                bundle.without_crd()
            }
        })
        .collect();
    if options.restart || options.failover {
        return restart::run(&options, &bundles, &manager_binary()?).await;
    }
    let manager_bin = if options.floor_only {
        None
    } else {
        Some(manager_binary()?)
    };

    let mut floors: Vec<FloorResult> = Vec::new();
    let mut poms: Vec<PomResult> = Vec::new();
    // Per POM run: the round, the manager binary and its CPU time until all were Installed.
    let mut cpu_runs: Vec<(usize, PathBuf, Option<Duration>)> = Vec::new();
    // Per round: the best floor, the POM time and the compared manager's, for ratios of
    // neighbours.
    let mut pairs: Vec<Round> = Vec::new();
    for round in 1..=options.rounds {
        let mut best: Option<Duration> = None;
        if options.floor {
            let rendered = bundles
                .iter()
                .map(|b| floor::render_bundle(b, MANAGER_NAMESPACE))
                .collect::<Result<Vec<_>, _>>()?;
            for &concurrency in &options.floor_concurrency {
                println!(
                    "\n== round {round}: floor, {concurrency} bundles in flight (load average {}) ==",
                    load_average()
                );
                let result = run_floor(&options, &rendered, concurrency).await?;
                best = Some(best.map_or(result.ready_after, |b| b.min(result.ready_after)));
                floors.push(result);
            }
        }
        let mut pom = None;
        if let Some(manager_bin) = &manager_bin {
            println!(
                "\n== round {round}: POM (load average {}) ==",
                load_average()
            );
            let result = run_pom(&options, &bundles, manager_bin).await?;
            pom = Some(result.installed_after);
            cpu_runs.push((round, manager_bin.clone(), result.cpu_at_installed));
            poms.push(result);
        }
        let mut compared = None;
        if let Some(other) = options
            .compare_manager
            .as_deref()
            .filter(|_| !options.floor_only)
        {
            println!(
                "\n== round {round}: POM with {} (load average {}) ==",
                other.display(),
                load_average()
            );
            let result = run_pom(&options, &bundles, other).await?;
            compared = Some(result.installed_after);
            cpu_runs.push((round, other.to_owned(), result.cpu_at_installed));
            poms.push(result);
        }
        pairs.push((best, pom, compared, load_average()));
    }

    if options.floor {
        println!();
        println!("== POM against the floor ({} POs) ==", options.pos);
        for result in &floors {
            println!(
                "floor, {:>4} in flight: all ready {:>6.1}s (writes done {:.1}s, {} writes; per bundle p50 {:.1}s, p90 {:.1}s)",
                result.concurrency,
                result.ready_after.as_secs_f64(),
                result.applied_after.as_secs_f64(),
                result.writes,
                duration_percentile(&result.per_bundle, 50).as_secs_f64(),
                duration_percentile(&result.per_bundle, 90).as_secs_f64(),
            );
        }
        let seconds = |d: &Option<Duration>| {
            d.map_or_else(|| "-".to_owned(), |d| format!("{:.1}s", d.as_secs_f64()))
        };
        let mut ratios = Vec::new();
        let mut compared_ratios = Vec::new();
        for (round, (floor_time, pom_time, compared, load)) in pairs.iter().enumerate() {
            let ratio = |time: &Option<Duration>, into: &mut Vec<f64>| match (floor_time, time) {
                (Some(f), Some(p)) if !f.is_zero() => {
                    let ratio = p.as_secs_f64() / f.as_secs_f64();
                    into.push(ratio);
                    format!("{ratio:.2}x")
                }
                _ => "-".to_owned(),
            };
            let pom_ratio = ratio(pom_time, &mut ratios);
            let compared_ratio = ratio(compared, &mut compared_ratios);
            print!(
                "round {}: floor (best) {}, POM {}, POM / floor {pom_ratio}",
                round + 1,
                seconds(floor_time),
                seconds(pom_time),
            );
            if compared.is_some() {
                print!(
                    "; compared manager {}, its / floor {compared_ratio}",
                    seconds(compared)
                );
            }
            println!(" (load average after: {load})");
        }
        for (name, ratios) in [
            ("POM", &mut ratios),
            ("compared manager", &mut compared_ratios),
        ] {
            if ratios.is_empty() {
                continue;
            }
            ratios.sort_by(f64::total_cmp);
            let middle = ratios.len() / 2;
            let median = if ratios.len() % 2 == 0 {
                f64::midpoint(ratios[middle - 1], ratios[middle])
            } else {
                ratios[middle]
            };
            println!(
                "{name} / floor: median {median:.2}x over {} round(s) (min {:.2}x, max {:.2}x)",
                ratios.len(),
                ratios[0],
                ratios[ratios.len() - 1]
            );
        }
    }
    if cpu_runs.len() > 1 {
        println!();
        println!("== manager CPU until all Installed, per run ==");
        for (round, manager, cpu) in &cpu_runs {
            let cpu = cpu.map_or_else(|| "-".to_owned(), |c| format!("{:.1}s", c.as_secs_f64()));
            println!("round {round}: {cpu} ({})", manager.display());
        }
    }
    println!(
        "total wall time:                   {:.0}s; load average at the end {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    Ok(poms.iter().map(|p| p.steady_writes).sum())
}

/// A fresh control plane with simulated workloads, its node roomy enough for every PO's pod.
async fn start_plane(options: &Options) -> Result<(ControlPlane, Client)> {
    let started = Instant::now();
    let plane = ControlPlane::start(Workloads::Simulated)
        .await
        .context("starting the control plane (build the binaries with `make e2e-binaries`)")?;
    let client = plane.client().await?;
    // The simulated node takes 1,000 pods; every PO runs one (and a rollout briefly two).
    let pods = (options.pos * 2).max(1000).to_string();
    let status = json!({"status": {"capacity": {"pods": pods}, "allocatable": {"pods": pods}}});
    Api::<Node>::all(client.clone())
        .patch_status(
            "kwok-node-0",
            &PatchParams::default(),
            &Patch::Merge(&status),
        )
        .await
        .context("raising the simulated node's pod capacity")?;
    println!(
        "control plane up in {:.1}s ({})",
        started.elapsed().as_secs_f64(),
        plane.dir().display()
    );
    Ok((plane, client))
}

/// The manager's flags: leader election, where it serves health and plain-HTTP metrics, the
/// resync period.
fn manager_args(
    options: &Options,
    leader_elect: bool,
    health: SocketAddr,
    metrics: SocketAddr,
) -> Vec<String> {
    vec![
        format!("--leader-elect={leader_elect}"),
        format!("--health-bind-address={health}"),
        format!("--metrics-bind-address={metrics}"),
        format!("--resync-seconds={}", options.resync_seconds),
    ]
}

/// The floor on a fresh control plane.
async fn run_floor(
    options: &Options,
    bundles: &[FloorBundle],
    concurrency: usize,
) -> Result<FloorResult> {
    let (plane, client) = start_plane(options).await?;
    let result = floor::run(&client, bundles, concurrency, options.install_timeout)
        .await
        .context("the floor")?;
    println!(
        "floor: {} bundles ({} writes) applied in {:.1}s, all ready in {:.1}s ({} in flight; per bundle p50 {:.1}s, p90 {:.1}s)",
        bundles.len(),
        result.writes,
        result.applied_after.as_secs_f64(),
        result.ready_after.as_secs_f64(),
        concurrency,
        duration_percentile(&result.per_bundle, 50).as_secs_f64(),
        duration_percentile(&result.per_bundle, 90).as_secs_f64(),
    );
    drop(plane);
    Ok(result)
}

fn duration_percentile(sorted: &[Duration], p: usize) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let index = (sorted.len() * p).div_ceil(100).saturating_sub(1);
    sorted[index.min(sorted.len() - 1)]
}

/// POM on a fresh control plane: catalogs, every PO created at once, the time to all
/// Installed, settling, and the steady window.
async fn run_pom(
    options: &Options,
    bundles: &[TestBundle],
    manager_bin: &std::path::Path,
) -> Result<PomResult> {
    let started = Instant::now();
    let (plane, client) = start_plane(options).await?;

    create_namespace(&client, MANAGER_NAMESPACE).await?;
    let health = free_address()?;
    // Plain-HTTP metrics on loopback: the counters are read, no scraper is being measured.
    let metrics = free_address()?;
    // One replica: Lease renewals would be writes of leader election, not of the reconcilers.
    let args = manager_args(options, false, health, metrics);
    let mut manager = ManagerProcess::spawn(
        manager_bin,
        "pom-bench-manager",
        plane.kubeconfig_path(),
        &args,
        &[
            ("POD_NAMESPACE", MANAGER_NAMESPACE),
            ("RELEASE_VERSION", "4.99.0-pom-bench"),
            // Debug logs of 200 POs would measure the logger.
            ("RUST_LOG", "info,kube=warn,hyper=warn,tower=warn"),
        ],
        plane.dir(),
    )
    .await?;
    let memory = Memory::new(manager.pid());
    wait_ready(&manager, health).await?;
    println!(
        "manager ready (pid {}, {}), RSS {} MiB",
        manager.pid(),
        manager_bin.display(),
        mib(memory.rss_kib())
    );

    if options.held {
        set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    }
    let catalogs_started = Instant::now();
    let mut catalog_names = Vec::new();
    for (i, chunk) in bundles.chunks(options.per_catalog).enumerate() {
        let name = format!("bench-{i}");
        configmap_catalog(&client, &name, &catalog_json(chunk, &[])).await?;
        catalog_names.push(name);
    }
    wait_catalogs_serving(&client, &catalog_names).await?;
    println!(
        "{} catalogs serving in {:.1}s",
        catalog_names.len(),
        catalogs_started.elapsed().as_secs_f64()
    );

    let before = scrape(&manager, metrics).await?;
    let install_started = Instant::now();
    // Watch before the first create: the time to the last Installed is seen, not polled.
    let installed = tokio::spawn(watch_installed(client.clone(), options.pos));
    create_pos(&client, bundles).await?;
    let created = install_started.elapsed();
    println!(
        "{} PlatformOperators created in {:.1}s",
        options.pos,
        created.as_secs_f64()
    );
    let installed_after = wait_all_installed(
        installed,
        &manager,
        metrics,
        &memory,
        install_started,
        options.install_timeout,
    )
    .await?;
    let at_installed = scrape(&manager, metrics).await?;
    let install_times = install_durations(&client).await?;
    let peak_at_installed = memory.peak_kib();
    let cpu_at_installed = memory.cpu();

    let (settled, at_settled) = settle(&manager, metrics, &memory, options.settle_limit()).await?;
    if options.held {
        hold_every_po(
            &client,
            bundles,
            &catalog_names,
            options.per_catalog,
            options.settle_limit(),
        )
        .await?;
        settle(&manager, metrics, &memory, options.settle_limit()).await?;
    }
    let steady_start = scrape(&manager, metrics).await?;
    let window = Instant::now();
    while window.elapsed() < options.steady {
        memory.sample();
        ensure_running(&manager)?;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let steady_end = scrape(&manager, metrics).await?;
    memory.sample();

    let install_writes = at_installed.writes() - before.writes();
    let settle_writes = at_settled.writes() - at_installed.writes();
    let steady = steady_end.diff(&steady_start);
    let steady_writes: u64 = steady
        .iter()
        .filter(|(labels, _)| labels.kind == "write")
        .map(|(_, n)| n)
        .sum();
    let pos = options.pos.max(1) as f64;

    println!();
    println!("== pom-bench results ==");
    println!("PlatformOperators:                 {}", options.pos);
    println!(
        "bundle shape:                      Deployment + SA + RBAC{}",
        if options.crds { " + CRD" } else { " (no CRD)" }
    );
    println!(
        "time to all Installed=True:        {:.1}s (from the first create; creates took {:.1}s)",
        installed_after.as_secs_f64(),
        created.as_secs_f64()
    );
    println!(
        "per-PO install time (creation -> Installed, 1s resolution): p50 {}s, p90 {}s, max {}s",
        percentile(&install_times, 50),
        percentile(&install_times, 90),
        install_times.last().copied().unwrap_or_default()
    );
    if let Some(cpu) = cpu_at_installed {
        println!(
            "manager CPU until all Installed:   {:.1}s ({:.1} ms per PO)",
            cpu.as_secs_f64(),
            cpu.as_secs_f64() * 1000.0 / pos
        );
    }
    println!(
        "manager writes until all Installed: {install_writes} ({:.1} per PO)",
        install_writes as f64 / pos
    );
    println!(
        "manager reads until all Installed: {} ({:.1} per PO)",
        at_installed.reads() - before.reads(),
        (at_installed.reads() - before.reads()) as f64 / pos
    );
    println!(
        "PO reconciles until all Installed: {} ({:.1} per PO)",
        at_installed.reconciles("platformoperator") - before.reconciles("platformoperator"),
        (at_installed.reconciles("platformoperator") - before.reconciles("platformoperator"))
            as f64
            / pos
    );
    println!(
        "manager writes while settling:     {settle_writes} (settled {:.1}s after all Installed)",
        settled.as_secs_f64()
    );
    println!(
        "manager writes per PO, total:      {:.1}",
        (install_writes + settle_writes) as f64 / pos
    );
    println!(
        "manager reads until settled:       {}",
        at_settled.reads() - before.reads()
    );
    print_breakdown(
        "install + settle writes",
        &at_settled.diff(&before),
        "write",
    );
    print_breakdown("install + settle reads", &at_settled.diff(&before), "read");
    println!(
        "PO reconciles in the steady window: {}",
        steady_end.reconciles("platformoperator") - steady_start.reconciles("platformoperator")
    );
    println!(
        "writes in the {}s steady window:   {steady_writes}",
        options.steady.as_secs()
    );
    if steady_writes > 0 {
        print_breakdown("steady-state writes", &steady, "write");
    }
    // Every API request in the window (reads included: watches re-established, resync checks).
    let steady_requests =
        (steady_end.reads() + steady_end.writes()) - (steady_start.reads() + steady_start.writes());
    println!(
        "API requests in the steady window: {steady_requests} ({:.1}/min for {} POs)",
        steady_requests as f64 * 60.0 / options.steady.as_secs_f64().max(1.0),
        options.pos
    );
    print_breakdown("steady-state reads", &steady, "read");
    println!(
        "manager peak RSS (VmHWM):          {} MiB ({} MiB when all were Installed; VmRSS now {} MiB)",
        mib(memory.peak_kib()),
        mib(peak_at_installed),
        mib(memory.rss_kib())
    );
    println!(
        "POM run wall time:                 {:.0}s; load average {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );

    print_log_warnings(&manager.log_text());

    manager.signal("TERM");
    let _ = manager.wait_exit(Duration::from_secs(30)).await;
    drop(plane);
    Ok(PomResult {
        installed_after,
        cpu_at_installed,
        steady_writes,
    })
}

/// The manager's warnings (failed reconciles, reconciles cut at their deadline), counted by
/// message with the PO names and timestamps taken out.
fn print_log_warnings(log: &str) {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for line in log.lines().filter(|l| l.contains("WARN")) {
        let message: String = line
            .split_whitespace()
            .skip(1)
            .filter(|word| !word.starts_with("po=") && !word.starts_with("attempt="))
            .collect::<Vec<_>>()
            .join(" ");
        let message: String = message.chars().take(160).collect();
        *counts.entry(message).or_default() += 1;
    }
    println!(
        "manager warnings:                  {}",
        counts.values().sum::<usize>()
    );
    let mut rows: Vec<(String, usize)> = counts.into_iter().collect();
    rows.sort_by_key(|row| std::cmp::Reverse(row.1));
    for (message, n) in rows.iter().take(8) {
        println!("    {n:>7}  {message}");
    }
}

/// `POM_MANAGER_BIN`, else `pom-manager-e2e` next to this binary (cargo builds both into the
/// same directory).
fn manager_binary() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("POM_MANAGER_BIN") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("locating pom-bench")?;
    let path = exe.with_file_name("pom-manager-e2e");
    if !path.is_file() {
        bail!(
            "{} is missing: build it with `cargo build --release -p pom-e2e --bins` or set POM_MANAGER_BIN",
            path.display()
        );
    }
    Ok(path)
}

/// Peak and current resident memory of the manager, from `/proc/<pid>/status`.
struct Memory {
    pid: u32,
    peak: std::sync::atomic::AtomicU64,
}

impl Memory {
    fn new(pid: u32) -> Self {
        Self {
            pid,
            peak: std::sync::atomic::AtomicU64::new(0),
        }
    }

    fn field(&self, name: &str) -> Option<u64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid)).ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))?
            .trim_start_matches(':')
            .split_whitespace()
            .next()?
            .parse()
            .ok()
    }

    /// Remembers the kernel's high-water mark (it is lost once the process exits).
    fn sample(&self) {
        if let Some(hwm) = self.field("VmHWM") {
            self.peak
                .fetch_max(hwm, std::sync::atomic::Ordering::Relaxed);
        }
    }

    fn peak_kib(&self) -> u64 {
        self.sample();
        self.peak.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn rss_kib(&self) -> u64 {
        self.field("VmRSS").unwrap_or_default()
    }

    /// The CPU time the process has used so far (`pom_e2e::process::cpu_time`).
    fn cpu(&self) -> Option<Duration> {
        pom_e2e::process::cpu_time(self.pid)
    }
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
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

/// Puts an FBC stream in ConfigMap `catalogs/<name>` and a Catalog pointing at it.
async fn configmap_catalog(client: &Client, name: &str, fbc: &str) -> Result<()> {
    if fbc.len() >= CONFIGMAP_LIMIT {
        bail!(
            "catalog {name} is {} bytes, over a ConfigMap's 1 MiB: use a smaller --per-catalog",
            fbc.len()
        );
    }
    create_namespace(client, CATALOG_NAMESPACE).await?;
    pom_e2e::scenario::trust_catalog_namespace(client, CATALOG_NAMESPACE).await;
    let apply = PatchParams::apply("pom-bench").force();
    let cm: ConfigMap =
        serde_json::from_value(json!({"metadata": {"name": name}, "data": {"catalog.json": fbc}}))?;
    Api::<ConfigMap>::namespaced(client.clone(), CATALOG_NAMESPACE)
        .patch(name, &apply, &Patch::Apply(&cm))
        .await
        .with_context(|| format!("writing catalog ConfigMap {name} ({} bytes)", fbc.len()))?;
    let catalog: Catalog = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": name},
        "spec": {"source": {"configMap": {"name": name, "namespace": CATALOG_NAMESPACE}}}
    }))?;
    Api::<Catalog>::all(client.clone())
        .patch(name, &apply, &Patch::Apply(&catalog))
        .await
        .with_context(|| format!("writing Catalog {name}"))?;
    Ok(())
}

async fn wait_catalogs_serving(client: &Client, names: &[String]) -> Result<()> {
    let api = Api::<Catalog>::all(client.clone());
    let started = Instant::now();
    loop {
        let catalogs = api.list(&ListParams::default()).await?;
        let serving = catalogs
            .items
            .iter()
            .filter(|c| names.iter().any(|n| c.metadata.name.as_deref() == Some(n)))
            .filter(|c| {
                c.status.as_ref().is_some_and(|s| {
                    s.conditions
                        .iter()
                        .any(|c| c.type_ == "Serving" && c.status == "True")
                })
            })
            .count();
        if serving == names.len() {
            return Ok(());
        }
        if started.elapsed() > Duration::from_secs(120) {
            bail!(
                "only {serving} of {} catalogs serve after 120s",
                names.len()
            );
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// Every operator says `Upgradeable=False` (it "migrates"), a 1.1.0 of every package is
/// published and a minor cluster update starts: every PO's hop to 1.1.0 is then held by its
/// operator. Returns once every PO says so.
async fn hold_every_po(
    client: &Client,
    bundles: &[TestBundle],
    catalogs: &[String],
    per_catalog: usize,
    limit: Duration,
) -> Result<()> {
    use pom_api::olm::OperatorCondition;
    for bundle in bundles {
        let conditions = json!({"spec": {"conditions": [{
            "type": "Upgradeable", "status": "False", "reason": "Migrating",
            "message": "migrating data", "lastTransitionTime": pom_e2e::scenario::now()
        }]}});
        Api::<OperatorCondition>::namespaced(client.clone(), &bundle.package)
            .patch(
                &bundle.csv(),
                &PatchParams::default(),
                &Patch::Merge(&conditions),
            )
            .await
            .with_context(|| format!("writing the OperatorCondition of {}", bundle.package))?;
    }
    for (chunk, name) in bundles.chunks(per_catalog).zip(catalogs) {
        let mut both = chunk.to_vec();
        both.extend(chunk.iter().map(|b| {
            let mut next = TestBundle::new(&b.package, "1.1.0").replaces("1.0.0");
            next.with_crd = b.with_crd;
            next
        }));
        configmap_catalog(client, name, &catalog_json(&both, &[])).await?;
    }
    set_cluster(client, &[("4.17.0", false), ("4.16.3", true)], "4.17.0").await;
    let api = Api::<PlatformOperator>::all(client.clone());
    let started = Instant::now();
    loop {
        let pos = api.list(&ListParams::default()).await?;
        let held = pos
            .items
            .iter()
            .filter(|po| {
                po.status.as_ref().is_some_and(|s| {
                    s.desired_bundle
                        .as_ref()
                        .is_some_and(|d| d.version == "1.1.0")
                        && s.installed_bundle
                            .as_ref()
                            .is_some_and(|i| i.version == "1.0.0")
                })
            })
            .count();
        if held == bundles.len() {
            let upgradeable = pos
                .items
                .first()
                .and_then(|po| po.status.as_ref())
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Upgradeable"))
                .map(|c| format!("{} {}: {}", c.status, c.reason, c.message))
                .unwrap_or_default();
            println!(
                "{held} PlatformOperators held at 1.0.0 in {:.1}s (first PO: Upgradeable={upgradeable})",
                started.elapsed().as_secs_f64()
            );
            return Ok(());
        }
        if started.elapsed() > limit {
            bail!(
                "only {held} of {} POs held their hop to 1.1.0",
                bundles.len()
            );
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

/// Creates every PlatformOperator at once (20 requests in flight).
async fn create_pos(client: &Client, bundles: &[TestBundle]) -> Result<()> {
    let api = Api::<PlatformOperator>::all(client.clone());
    futures::stream::iter(bundles)
        .map(|bundle| {
            let api = api.clone();
            async move {
                let po: PlatformOperator = serde_json::from_value(json!({
                    "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                    "metadata": {"name": bundle.package},
                    "spec": {"package": {"name": bundle.package}, "upgradeGate": "Rollout"}
                }))?;
                api.create(&PostParams::default(), &po)
                    .await
                    .with_context(|| format!("creating PlatformOperator {}", bundle.package))?;
                anyhow::Ok(())
            }
        })
        .buffer_unordered(20)
        .try_collect::<Vec<()>>()
        .await?;
    Ok(())
}

fn installed(po: &PlatformOperator) -> bool {
    po.status.as_ref().is_some_and(|s| {
        s.conditions
            .iter()
            .any(|c| c.type_ == "Installed" && c.status == "True")
    })
}

/// Watches PlatformOperators until `total` are Installed=True; returns when the last one was
/// seen. Progress goes to [`PROGRESS`].
async fn watch_installed(client: Client, total: usize) -> Result<Instant> {
    let mut events = watcher(
        Api::<PlatformOperator>::all(client),
        watcher::Config::default(),
    )
    .default_backoff()
    .applied_objects()
    .boxed();
    loop {
        match events.next().await {
            Some(Ok(po)) => {
                let done = PROGRESS
                    .lock()
                    .map(|mut progress| {
                        progress.insert(po.name_any(), waiting_on(&po));
                        progress.values().filter(|w| w.is_none()).count()
                    })
                    .unwrap_or_default();
                if done >= total {
                    return Ok(Instant::now());
                }
            }
            // The watcher retries with backoff.
            Some(Err(_)) => {}
            None => bail!("the PlatformOperator watch ended"),
        }
    }
}

/// What a PO is waiting for: `None` once Installed=True, else its Installed condition's
/// reason and message (or that it has none yet).
fn waiting_on(po: &PlatformOperator) -> Option<String> {
    if installed(po) {
        return None;
    }
    let condition = po
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Installed"));
    Some(condition.map_or_else(
        || "no Installed condition yet".to_owned(),
        |c| format!("{} {}: {}", c.status, c.reason, c.message),
    ))
}

/// Every PO the watch saw, with what it waits for (`None`: Installed).
static PROGRESS: std::sync::Mutex<BTreeMap<String, Option<String>>> =
    std::sync::Mutex::new(BTreeMap::new());

/// How many POs are Installed, and the reasons of those that are not, most common first
/// (at most 10 POs named with their message when few are left).
fn progress_report() -> (usize, String) {
    let Ok(progress) = PROGRESS.lock() else {
        return (0, String::new());
    };
    let done = progress.values().filter(|w| w.is_none()).count();
    let waiting: Vec<(&String, &String)> = progress
        .iter()
        .filter_map(|(name, w)| w.as_ref().map(|w| (name, w)))
        .collect();
    if waiting.len() <= 10 {
        let list: Vec<String> = waiting
            .iter()
            .map(|(name, why)| format!("{name}: {why}"))
            .collect();
        return (done, list.join("; "));
    }
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for (_, why) in waiting {
        let reason = why.split(':').next().unwrap_or_default().to_owned();
        *reasons.entry(reason).or_default() += 1;
    }
    let mut reasons: Vec<(String, usize)> = reasons.into_iter().collect();
    reasons.sort_by_key(|row| std::cmp::Reverse(row.1));
    let list: Vec<String> = reasons.iter().map(|(r, n)| format!("{n} {r}")).collect();
    (done, list.join(", "))
}

/// Waits for [`watch_installed`], printing progress every 15 s; the time since `started`.
async fn wait_all_installed(
    mut installed: tokio::task::JoinHandle<Result<Instant>>,
    manager: &ManagerProcess,
    metrics: SocketAddr,
    memory: &Memory,
    started: Instant,
    timeout: Duration,
) -> Result<Duration> {
    let mut last_report = Instant::now();
    loop {
        memory.sample();
        ensure_running(manager)?;
        if let Ok(finished) = tokio::time::timeout(Duration::from_secs(1), &mut installed).await {
            let at = finished.context("the PlatformOperator watch task")??;
            return Ok(at.duration_since(started));
        }
        let (done, waiting) = progress_report();
        if last_report.elapsed() >= Duration::from_secs(15) {
            let now = scrape(manager, metrics).await.ok();
            println!(
                "  {:>5.0}s: {done} Installed, manager writes {}, reads {}, reconciles {}, RSS {} MiB, load {}\n         waiting: {waiting}",
                started.elapsed().as_secs_f64(),
                now.as_ref()
                    .map_or_else(|| "?".to_owned(), |m| m.writes().to_string()),
                now.as_ref()
                    .map_or_else(|| "?".to_owned(), |m| m.reads().to_string()),
                now.as_ref().map_or_else(
                    || "?".to_owned(),
                    |m| m.reconciles("platformoperator").to_string()
                ),
                mib(memory.rss_kib()),
                load_average()
            );
            last_report = Instant::now();
        }
        if started.elapsed() > timeout {
            installed.abort();
            bail!(
                "only {done} PlatformOperators Installed after {}s; manager log tail:\n{}",
                timeout.as_secs(),
                manager.log_tail(40)
            );
        }
    }
}

/// Seconds from each PO's creation to its Installed transition, sorted.
async fn install_durations(client: &Client) -> Result<Vec<i64>> {
    let pos = Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await?;
    let mut seconds: Vec<i64> = pos
        .items
        .iter()
        .filter_map(|po| {
            let created = po.metadata.creation_timestamp.as_ref()?.0;
            let condition = po
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "Installed")?;
            Some(condition.last_transition_time.0.as_second() - created.as_second())
        })
        .collect();
    seconds.sort_unstable();
    Ok(seconds)
}

fn percentile(sorted: &[i64], p: usize) -> i64 {
    if sorted.is_empty() {
        return 0;
    }
    let index = (sorted.len() * p).div_ceil(100).saturating_sub(1);
    sorted[index.min(sorted.len() - 1)]
}

/// Waits until the manager has not written for [`QUIET`] (at most `limit`); how long
/// that took, and the counters at the last write.
async fn settle(
    manager: &ManagerProcess,
    metrics: SocketAddr,
    memory: &Memory,
    limit: Duration,
) -> Result<(Duration, Snapshot)> {
    let started = Instant::now();
    let mut last = scrape(manager, metrics).await?;
    let mut last_change = Instant::now();
    let mut settled_at = Duration::ZERO;
    while last_change.elapsed() < QUIET && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        memory.sample();
        let now = scrape(manager, metrics).await?;
        if now.writes() != last.writes() {
            last_change = Instant::now();
            settled_at = started.elapsed();
        }
        last = now;
    }
    Ok((settled_at, last))
}

/// Labels of one `pom_api_requests_total` series.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Series {
    verb: String,
    kind: String,
    resource: String,
}

/// The manager's counters at one scrape.
#[derive(Debug, Default)]
struct Snapshot {
    requests: BTreeMap<Series, u64>,
    reconciles: BTreeMap<String, u64>,
}

impl Snapshot {
    fn parse(text: &str) -> Self {
        let mut snapshot = Self::default();
        for line in text.lines() {
            let Some((name, labels, value)) = sample(line) else {
                continue;
            };
            match name {
                "pom_api_requests_total" => {
                    let get = |key: &str| labels.get(key).cloned().unwrap_or_default();
                    let series = Series {
                        verb: get("verb"),
                        kind: get("kind"),
                        resource: get("resource"),
                    };
                    snapshot.requests.insert(series, value);
                }
                "pom_reconciles_total" => {
                    let controller = labels.get("controller").cloned().unwrap_or_default();
                    snapshot.reconciles.insert(controller, value);
                }
                _ => {}
            }
        }
        snapshot
    }

    fn sum(&self, kind: &str) -> u64 {
        self.requests
            .iter()
            .filter(|(s, _)| s.kind == kind)
            .map(|(_, n)| n)
            .sum()
    }

    fn writes(&self) -> u64 {
        self.sum("write")
    }

    fn reads(&self) -> u64 {
        self.sum("read")
    }

    fn reconciles(&self, controller: &str) -> u64 {
        self.reconciles.get(controller).copied().unwrap_or_default()
    }

    /// The series that grew since `earlier`, with their growth.
    fn diff(&self, earlier: &Self) -> Vec<(Series, u64)> {
        self.requests
            .iter()
            .filter_map(|(series, n)| {
                let before = earlier.requests.get(series).copied().unwrap_or_default();
                (*n > before).then(|| (series.clone(), n - before))
            })
            .collect()
    }
}

/// One OpenMetrics sample line: `name{k="v",...} value`.
fn sample(line: &str) -> Option<(&str, BTreeMap<String, String>, u64)> {
    if line.starts_with('#') {
        return None;
    }
    let (head, value) = line.rsplit_once(' ')?;
    let value = value.parse::<f64>().ok()? as u64;
    let (name, labels) = match head.split_once('{') {
        Some((name, rest)) => (name, rest.strip_suffix('}')?),
        None => (head, ""),
    };
    let labels = labels
        .split(',')
        .filter_map(|pair| {
            let (key, value) = pair.split_once('=')?;
            Some((key.to_owned(), value.trim_matches('"').to_owned()))
        })
        .collect();
    Some((name, labels, value))
}

async fn scrape(manager: &ManagerProcess, metrics: SocketAddr) -> Result<Snapshot> {
    for _ in 0..5 {
        if let Some((200, _, body)) = http_get(metrics, "/metrics").await {
            return Ok(Snapshot::parse(&body));
        }
        ensure_running(manager)?;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    bail!("the manager's /metrics did not answer at {metrics}")
}

fn print_breakdown(title: &str, diff: &[(Series, u64)], kind: &str) {
    println!("  {title} by verb and resource:");
    let mut rows: Vec<&(Series, u64)> = diff.iter().filter(|(s, _)| s.kind == kind).collect();
    rows.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    for (series, n) in rows {
        println!("    {n:>7}  {:<7} {}", series.verb, series.resource);
    }
}
