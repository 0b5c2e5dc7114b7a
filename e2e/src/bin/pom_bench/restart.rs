//! `pom-bench --restart` and `--failover` (issue 32 item 4): every cluster update restarts
//! POM, so its restart is on the path of every update.
//!
//! With N settled POs:
//! - `--restart`: SIGKILL the manager (one replica, `--leader-elect=false` as the install bench
//!   runs it) and start a fresh one with the same flags; the clock starts at the spawn;
//! - `--failover`: two replicas with leader election, the second a warm standby; SIGKILL the
//!   leader; the clock starts at the kill, and the take-over (the Lease expiring, 5-15 s by
//!   its 15 s duration) is reported apart so that what the new leader costs is seen alone.
//!
//! Measured, on the new process: the time to a correct aggregated ClusterOperator (between the
//! kill and the new process the bench changes one condition message of it, so only a write by
//! the new process makes it correct again: a ClusterOperator left by the old process does not
//! count), the time to every PO reconciled (every PO has been judged, seen in the new process's
//! own `planned` debug line of `pom_controller::operator::reconcile`, and no reconcile is in
//! flight, from `pom_reconciles_total` against `pom_reconcile_duration_seconds_count`), its API
//! requests and writes by verb and resource until it settled (no write for 10 s), and its peak
//! RSS.
//!
//! Writes allowed: the ClusterOperator status the marker made stale (1), one PO status write per
//! PO whose status differs from before the kill, and (failover) the Lease. Any other write makes
//! the bench exit 1.
//!
//! The floor, on the same plane right after (the managers stopped), three times, the median
//! used: a fresh client lists every PO and every Catalog, reads each Catalog's ConfigMap and
//! parses it as the manager does (`pom_resolver::fbc::parse_documents_scoped` with the POs'
//! packages in scope), computes the aggregate (`pom_policy::aggregate::compute`) and writes the
//! ClusterOperator status once.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, Result, bail};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::{Client, ResourceExt as _};
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, ClusterOperatorStatus};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::ControlPlane;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager_process::{ManagerProcess, free_address, http_get};
use pom_policy::aggregate::{ClusterPhaseView, compute};
use pom_policy::snapshot::GuardState;
use serde_json::{Value, json};

use super::{
    MANAGER_NAMESPACE, Memory, Options, QUIET, Series, Snapshot, configmap_catalog,
    create_namespace, create_pos, ensure_running, load_average, mib, print_breakdown,
    print_log_warnings, sample, start_plane, wait_all_installed, wait_catalogs_serving, wait_ready,
    watch_installed,
};

const RELEASE_VERSION: &str = "4.99.0-pom-bench";
/// The message the bench puts in the ClusterOperator's first condition between the kill and the
/// new process: only the new process's write takes it out.
const MARKER: &str = "pom-bench: stale, written before the new manager started";
/// The Lease writes of leader election (allowed in a failover).
const LEASES: &str = "leases.coordination.k8s.io";
const CO_STATUS: &str = "clusteroperators.config.openshift.io/status";
const PO_STATUS: &str = "platformoperators.platform.openshift.io/status";
/// Floor runs per measurement; the median is the floor.
const FLOOR_RUNS: usize = 3;

/// One manager replica and where it answers.
struct Replica {
    process: ManagerProcess,
    health: SocketAddr,
    metrics: SocketAddr,
    memory: Memory,
}

impl Replica {
    async fn spawn(
        options: &Options,
        plane: &ControlPlane,
        binary: &Path,
        name: &str,
        leader_elect: bool,
    ) -> Result<Self> {
        let health = free_address()?;
        let metrics = free_address()?;
        let args = super::manager_args(options, leader_elect, health, metrics);
        let process = ManagerProcess::spawn(
            binary,
            name,
            plane.kubeconfig_path(),
            &args,
            &[
                ("POD_NAMESPACE", MANAGER_NAMESPACE),
                ("RELEASE_VERSION", RELEASE_VERSION),
                // The reconciler's per-PO `planned` line says which POs a process judged.
                (
                    "RUST_LOG",
                    "info,kube=warn,hyper=warn,tower=warn,pom_controller::operator::reconcile=debug",
                ),
            ],
            plane.dir(),
        )
        .await?;
        let memory = Memory::new(process.pid());
        Ok(Self {
            process,
            health,
            metrics,
            memory,
        })
    }

    async fn text(&self) -> Result<String> {
        for _ in 0..5 {
            if let Some((200, _, body)) = http_get(self.metrics, "/metrics").await {
                return Ok(body);
            }
            ensure_running(&self.process)?;
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        bail!("the manager's /metrics did not answer at {}", self.metrics)
    }

    async fn scrape(&self) -> Result<Snapshot> {
        Ok(Snapshot::parse(&self.text().await?))
    }

    async fn kill(&mut self) -> Result<()> {
        self.process.signal("KILL");
        if self
            .process
            .wait_exit(Duration::from_secs(10))
            .await
            .is_none()
        {
            bail!("{} did not exit on SIGKILL", self.process.name);
        }
        Ok(())
    }

    async fn stop(&mut self) {
        self.process.signal("TERM");
        let _ = self.process.wait_exit(Duration::from_secs(30)).await;
    }
}

/// A sample of one metric series, the first whose labels include `label` (any when `None`).
fn metric(text: &str, name: &str, label: Option<(&str, &str)>) -> Option<u64> {
    text.lines().find_map(|line| {
        let (n, labels, value) = sample(line)?;
        let matches = label.is_none_or(|(k, v)| labels.get(k).is_some_and(|x| x == v));
        (n == name && matches).then_some(value)
    })
}

/// Reconciles of POs started and finished; `None` unless the scrape holds both counters (an
/// empty or failed scrape must never read as "none in flight").
fn po_reconciles(text: &str) -> Option<(u64, u64)> {
    let label = Some(("controller", "platformoperator"));
    Some((
        metric(text, "pom_reconciles_total", label)?,
        metric(text, "pom_reconcile_duration_seconds_count", label)?,
    ))
}

/// Drops ANSI escape sequences (the manager's text log colours its fields).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for d in chars.by_ref() {
                if d.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The POs a log names in a reconciler `planned` line from byte `from` on, but for plans that
/// only wait for the catalogs to be read (`Requeue(CatalogWarmup)`: not judged yet); and how
/// many such waits it logged.
fn planned_pos(log: &str, from: usize) -> (BTreeSet<String>, usize) {
    let mut judged = BTreeSet::new();
    let mut warmups = 0;
    let text = log.get(from..).unwrap_or_default();
    for line in text.lines().filter(|l| l.contains("planned")) {
        let line = strip_ansi(line);
        if !line.contains(" planned") {
            continue;
        }
        if line.contains("CatalogWarmup") {
            warmups += 1;
            continue;
        }
        if let Some(po) = line
            .split_whitespace()
            .find_map(|word| word.strip_prefix("po="))
        {
            judged.insert(po.to_owned());
        }
    }
    (judged, warmups)
}

/// What a ClusterOperator says, as the CVO reads it: conditions without their times, versions,
/// related objects.
fn co_view(status: &ClusterOperatorStatus) -> Value {
    let mut conditions: Vec<Value> = status
        .conditions
        .iter()
        .map(|c| json!([c.type_, c.status, c.reason, c.message]))
        .collect();
    conditions.sort_by_key(ToString::to_string);
    json!({"conditions": conditions, "versions": status.versions, "relatedObjects": status.related_objects})
}

async fn co_status(client: &Client) -> Result<ClusterOperatorStatus> {
    Ok(Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .context("reading the aggregated ClusterOperator")?
        .and_then(|co| co.status)
        .unwrap_or_default())
}

/// Makes the ClusterOperator stale: its first condition's message becomes [`MARKER`].
async fn mark_co(client: &Client, settled: &ClusterOperatorStatus) -> Result<()> {
    let mut status = settled.clone();
    let Some(first) = status.conditions.first_mut() else {
        bail!("the aggregated ClusterOperator has no condition to mark");
    };
    first.message = Some(MARKER.to_owned());
    Api::<ClusterOperator>::all(client.clone())
        .patch_status(
            AGGREGATED_CLUSTER_OPERATOR,
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"conditions": status.conditions}})),
        )
        .await
        .context("marking the aggregated ClusterOperator stale")?;
    if co_view(&co_status(client).await?) == co_view(settled) {
        bail!("the marker did not change the aggregated ClusterOperator");
    }
    Ok(())
}

/// Every PO's status, by name.
async fn po_statuses(client: &Client) -> Result<BTreeMap<String, Value>> {
    let pos = Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing PlatformOperators")?;
    pos.items
        .iter()
        .map(|po| Ok((po.name_any(), serde_json::to_value(&po.status)?)))
        .collect()
}

/// What one restart or failover measured.
struct Measured {
    /// From the clock's start to the new process leading (failover; zero for a restart).
    took_over: Option<Duration>,
    co_correct: Duration,
    reconciled: Duration,
    /// The new process's requests from the clock's start to both points, and to settled.
    at_done: Vec<(Series, u64)>,
    at_settled: Vec<(Series, u64)>,
    settled_after: Duration,
    peak_kib: u64,
    /// Reconciles that only waited for the catalogs to be read.
    warmups: usize,
}

/// Where a measurement starts.
struct Start<'a> {
    /// The clock's start (the spawn, or the kill).
    at: Instant,
    /// The new process's counters then.
    baseline: &'a Snapshot,
    /// The new process's log length then.
    log_from: usize,
    /// The ClusterOperator status a correct one has (`None`: not waited for).
    settled_co: Option<&'a ClusterOperatorStatus>,
    /// Whether the new process must first take the Lease.
    failover: bool,
}

/// Waits, from `start`, until the new process `replica` made the ClusterOperator correct and
/// reconciled every PO; then until it has not written for [`QUIET`].
async fn measure(
    client: &Client,
    replica: &Replica,
    start: &Start<'_>,
    pos: usize,
    limit: Duration,
) -> Result<Measured> {
    let Start {
        at: started,
        baseline,
        log_from,
        settled_co,
        failover,
    } = *start;
    let want = settled_co.map(co_view);
    let mut took_over = None;
    let mut co_correct = want.is_none().then(Duration::default);
    let mut reconciled = None;
    let mut planned = BTreeSet::new();
    let mut warmups = 0;
    let mut last_report = Instant::now();
    while co_correct.is_none() || reconciled.is_none() {
        replica.memory.sample();
        ensure_running(&replica.process)?;
        // One try: a process still starting does not answer yet, and must not slow the poll.
        let text = match http_get(replica.metrics, "/metrics").await {
            Some((200, _, body)) => body,
            _ => String::new(),
        };
        if failover && took_over.is_none() && metric(&text, "pom_leader", None) == Some(1) {
            took_over = Some(started.elapsed());
        }
        if co_correct.is_none() && Some(co_view(&co_status(client).await?)) == want {
            co_correct = Some(started.elapsed());
        }
        if reconciled.is_none() {
            (planned, warmups) = planned_pos(&replica.process.log_text(), log_from);
            let idle = po_reconciles(&text).is_some_and(|(begun, finished)| begun == finished);
            if planned.len() >= pos && idle {
                reconciled = Some(started.elapsed());
            }
        }
        if last_report.elapsed() >= Duration::from_secs(10) {
            println!(
                "  {:>5.1}s: leading {}, ClusterOperator {}, {} of {pos} POs judged, RSS {} MiB",
                started.elapsed().as_secs_f64(),
                took_over.is_some(),
                if co_correct.is_some() {
                    "correct"
                } else {
                    "stale"
                },
                planned.len(),
                mib(replica.memory.rss_kib())
            );
            last_report = Instant::now();
        }
        if started.elapsed() > limit {
            bail!(
                "after {}s: ClusterOperator correct {}, {} of {pos} POs judged; log tail:\n{}",
                limit.as_secs(),
                co_correct.is_some(),
                planned.len(),
                replica.process.log_tail(30)
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let at_done = replica.scrape().await?.diff(baseline);
    let (settled_after, at_settled) = settle(replica, started, limit).await?;
    Ok(Measured {
        took_over,
        co_correct: co_correct.unwrap_or_default(),
        reconciled: reconciled.unwrap_or_default(),
        at_done,
        at_settled: at_settled.diff(baseline),
        settled_after,
        peak_kib: replica.memory.peak_kib(),
        warmups,
    })
}

/// Writes but the Lease's (renewed every 10 s by a leader).
fn writes_but_lease(snapshot: &Snapshot) -> u64 {
    snapshot
        .requests
        .iter()
        .filter(|(s, _)| s.kind == "write" && s.resource != LEASES)
        .map(|(_, n)| n)
        .sum()
}

/// Until `replica` has not written (but its Lease) for [`QUIET`]: when it last wrote (from
/// `started`), and its counters then.
async fn settle(
    replica: &Replica,
    started: Instant,
    limit: Duration,
) -> Result<(Duration, Snapshot)> {
    let mut last = replica.scrape().await?;
    let mut last_change = Instant::now();
    let mut settled_at = started.elapsed();
    while last_change.elapsed() < QUIET && started.elapsed() < limit {
        tokio::time::sleep(Duration::from_millis(500)).await;
        replica.memory.sample();
        let now = replica.scrape().await?;
        if writes_but_lease(&now) != writes_but_lease(&last) {
            last_change = Instant::now();
            settled_at = started.elapsed();
        }
        last = now;
    }
    Ok((settled_at, last))
}

/// One floor run: a fresh client lists every PO and Catalog, loads each catalog as the manager
/// does, computes the aggregate and writes it once.
async fn floor_once(plane: &ControlPlane, previous: &ClusterOperatorStatus) -> Result<Duration> {
    let client = plane.client().await?;
    let started = Instant::now();
    let pos: Vec<Arc<PlatformOperator>> = Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("floor: listing PlatformOperators")?
        .items
        .into_iter()
        .map(Arc::new)
        .collect();
    let catalogs = Api::<Catalog>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("floor: listing Catalogs")?;
    let scope: BTreeSet<String> = pos.iter().map(|po| po.spec.package.name.clone()).collect();
    let loads = catalogs.items.iter().filter_map(|catalog| {
        let source = catalog.spec.source.config_map.clone()?;
        let client = client.clone();
        let scope = scope.clone();
        Some(async move {
            let key = source.key.as_deref().unwrap_or("catalog.json").to_owned();
            let cm = Api::<ConfigMap>::namespaced(client, &source.namespace)
                .get(&source.name)
                .await?;
            let bytes = cm
                .data
                .and_then(|mut data| data.remove(&key))
                .unwrap_or_default()
                .into_bytes();
            let label = format!("configmap/{}/{}:{key}", source.namespace, source.name);
            let parsed = tokio::task::spawn_blocking(move || {
                pom_resolver::fbc::parse_documents_scoped([(label, bytes)], scope)
            })
            .await??;
            anyhow::Ok(parsed)
        })
    });
    let loaded = futures::future::try_join_all(loads).await?;
    if loaded.len() != catalogs.items.len() {
        bail!("floor: a Catalog is not a ConfigMap catalog");
    }
    let now = pom_controller::conditions::now();
    let status = compute(
        &pos,
        previous,
        RELEASE_VERSION,
        MANAGER_NAMESPACE,
        ClusterPhaseView::Absent,
        &GuardState::Unchecked,
        &now,
    );
    let patch = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "status": status});
    Api::<ClusterOperator>::all(client)
        .patch_status(
            AGGREGATED_CLUSTER_OPERATOR,
            &PatchParams::apply("pom-bench-floor").force(),
            &Patch::Apply(&patch),
        )
        .await
        .context("floor: writing the aggregated ClusterOperator status")?;
    Ok(started.elapsed())
}

/// The median of [`FLOOR_RUNS`] floor runs, and every run.
async fn floor(plane: &ControlPlane, previous: &ClusterOperatorStatus) -> Result<Duration> {
    let mut runs = Vec::new();
    for _ in 0..FLOOR_RUNS {
        runs.push(floor_once(plane, previous).await?);
    }
    let listed: Vec<String> = runs
        .iter()
        .map(|d| format!("{:.3}s", d.as_secs_f64()))
        .collect();
    runs.sort();
    let median = runs[runs.len() / 2];
    println!(
        "floor (list every PO and Catalog, load the catalogs, one aggregate write): {} -> median {:.3}s (load average {})",
        listed.join(", "),
        median.as_secs_f64(),
        load_average()
    );
    Ok(median)
}

/// Prints one measurement against `floor`; returns its unexpected writes.
fn report(
    title: &str,
    measured: &Measured,
    floor: Duration,
    changed_pos: usize,
    failover: bool,
) -> u64 {
    let from = measured.took_over.unwrap_or_default();
    let ratio = |d: Duration| d.saturating_sub(from).as_secs_f64() / floor.as_secs_f64().max(1e-6);
    println!();
    println!("== {title} ==");
    if let Some(took_over) = measured.took_over.filter(|_| failover) {
        println!(
            "take-over (Lease) after the kill:   {:.1}s; the times below count from it",
            took_over.as_secs_f64()
        );
    }
    println!(
        "correct ClusterOperator:            {:.2}s ({:.2}x the floor)",
        measured.co_correct.saturating_sub(from).as_secs_f64(),
        ratio(measured.co_correct)
    );
    println!(
        "every PO reconciled:                {:.2}s ({:.2}x the floor)",
        measured.reconciled.saturating_sub(from).as_secs_f64(),
        ratio(measured.reconciled)
    );
    println!(
        "reconciles that waited for catalogs: {} (2 s each before the PO is judged)",
        measured.warmups
    );
    println!(
        "floor:                              {:.3}s; goal <= 1.5x: {}",
        floor.as_secs_f64(),
        if ratio(measured.co_correct.max(measured.reconciled)) <= 1.5 {
            "met"
        } else {
            "not met"
        }
    );
    println!(
        "settled (last write) after:         {:.1}s",
        measured.settled_after.saturating_sub(from).as_secs_f64()
    );
    let requests = |diff: &[(Series, u64)]| diff.iter().map(|(_, n)| n).sum::<u64>();
    println!(
        "API requests to both points:        {} ({} until settled)",
        requests(&measured.at_done),
        requests(&measured.at_settled)
    );
    print_breakdown("requests until settled", &measured.at_settled, "read");
    print_breakdown("writes until settled", &measured.at_settled, "write");
    println!(
        "peak RSS of the new process:        {} MiB",
        mib(measured.peak_kib)
    );
    let mut unexpected = 0;
    for (series, n) in measured
        .at_settled
        .iter()
        .filter(|(s, _)| s.kind == "write")
    {
        let allowed = match series.resource.as_str() {
            CO_STATUS => 1,
            PO_STATUS => changed_pos as u64,
            LEASES if failover => u64::MAX,
            _ => 0,
        };
        if *n > allowed {
            println!(
                "UNEXPECTED: {} {} {} (allowed {allowed}: {changed_pos} PO statuses changed)",
                n, series.verb, series.resource
            );
            unexpected += n - allowed;
        }
    }
    println!(
        "writes other than changed status:   {unexpected} (PO statuses that changed: {changed_pos})"
    );
    unexpected
}

/// The whole `--restart`/`--failover` run on one plane; returns the unexpected writes.
pub(super) async fn run(
    options: &Options,
    bundles: &[TestBundle],
    manager_bin: &Path,
) -> Result<u64> {
    let started = Instant::now();
    let (plane, client) = start_plane(options).await?;
    create_namespace(&client, MANAGER_NAMESPACE).await?;
    let bench = Bench {
        options,
        plane: &plane,
        client,
        manager_bin,
        limit: options.settle_limit(),
    };
    // The install, by one replica (with leader election when only the failover is measured).
    let mut manager = bench.install(bundles, !options.restart).await?;
    let mut unexpected = 0;
    if options.restart {
        let (fresh, writes) = bench.restart(manager).await?;
        manager = fresh;
        unexpected += writes;
    }
    if options.failover {
        unexpected += bench.failover(manager).await?;
    }
    println!(
        "\ntotal wall time: {:.0}s; load average at the end {}",
        started.elapsed().as_secs_f64(),
        load_average()
    );
    drop(plane);
    Ok(unexpected)
}

/// One plane and what every phase needs.
struct Bench<'a> {
    options: &'a Options,
    plane: &'a ControlPlane,
    client: Client,
    manager_bin: &'a Path,
    /// How long a manager may take to settle.
    limit: Duration,
}

impl Bench<'_> {
    async fn spawn(&self, name: &str, leader_elect: bool) -> Result<Replica> {
        Replica::spawn(
            self.options,
            self.plane,
            self.manager_bin,
            name,
            leader_elect,
        )
        .await
    }

    /// A manager, the catalogs, every PO created and Installed, the manager settled.
    async fn install(&self, bundles: &[TestBundle], leader_elect: bool) -> Result<Replica> {
        let (options, client) = (self.options, &self.client);
        let manager = self.spawn("pom-bench-manager", leader_elect).await?;
        wait_ready(&manager.process, manager.health).await?;
        let mut catalog_names = Vec::new();
        for (i, chunk) in bundles.chunks(options.per_catalog).enumerate() {
            let name = format!("bench-{i}");
            configmap_catalog(client, &name, &catalog_json(chunk, &[])).await?;
            catalog_names.push(name);
        }
        wait_catalogs_serving(client, &catalog_names).await?;
        let install_started = Instant::now();
        let installed = tokio::spawn(watch_installed(client.clone(), options.pos));
        create_pos(client, bundles).await?;
        let installed_after = wait_all_installed(
            installed,
            &manager.process,
            manager.metrics,
            &manager.memory,
            install_started,
            options.install_timeout,
        )
        .await?;
        settle(&manager, Instant::now(), self.limit).await?;
        println!(
            "{} POs Installed in {:.1}s and settled; manager peak RSS {} MiB",
            options.pos,
            installed_after.as_secs_f64(),
            mib(manager.memory.peak_kib())
        );
        Ok(manager)
    }

    /// SIGKILLs `manager` and measures a fresh one; the fresh one (stopped), and the unexpected
    /// writes.
    async fn restart(&self, mut manager: Replica) -> Result<(Replica, u64)> {
        println!("\n== restart: SIGKILL, then a fresh manager with the same flags ==");
        let client = &self.client;
        let settled_co = co_status(client).await?;
        let before = po_statuses(client).await?;
        manager.kill().await?;
        mark_co(client, &settled_co).await?;
        let spawned = Instant::now();
        let mut fresh = self.spawn("pom-bench-manager-restarted", false).await?;
        let start = Start {
            at: spawned,
            baseline: &Snapshot::default(),
            log_from: 0,
            settled_co: Some(&settled_co),
            failover: false,
        };
        let measured = measure(client, &fresh, &start, self.options.pos, self.limit).await?;
        let changed = changed_pos(&before, &po_statuses(client).await?);
        print_log_warnings(&fresh.process.log_text());
        fresh.stop().await;
        let floor = floor(self.plane, &settled_co).await?;
        let title = format!("restart of one replica, {} POs", self.options.pos);
        let unexpected = report(&title, &measured, floor, changed, false);
        Ok((fresh, unexpected))
    }

    /// Two replicas with leader election (the leader `manager` when it elects, else a new
    /// one), SIGKILL the leader, measure the standby; the unexpected writes.
    async fn failover(&self, mut manager: Replica) -> Result<u64> {
        println!("\n== failover: two replicas with leader election, SIGKILL the leader ==");
        let client = &self.client;
        if self.options.restart {
            // The restart ran without leader election: the leader of the failover is started
            // now, on the settled POs, and settles before the standby joins.
            manager = self.spawn("pom-bench-leader", true).await?;
            wait_ready(&manager.process, manager.health).await?;
            let start = Start {
                at: Instant::now(),
                baseline: &Snapshot::default(),
                log_from: 0,
                settled_co: None,
                failover: true,
            };
            measure(client, &manager, &start, self.options.pos, self.limit).await?;
        }
        let mut standby = self.spawn("pom-bench-standby", true).await?;
        wait_ready(&standby.process, standby.health).await?;
        // The standby's caches have synced; a few seconds more for its watches to be quiet.
        tokio::time::sleep(Duration::from_secs(5)).await;
        if metric(&standby.text().await?, "pom_leader", None) == Some(1) {
            bail!("the standby leads before the leader was killed");
        }
        let settled_co = co_status(client).await?;
        let before = po_statuses(client).await?;
        let baseline = standby.scrape().await?;
        let log_from = standby.process.log_text().len();
        let killed = Instant::now();
        manager.kill().await?;
        mark_co(client, &settled_co).await?;
        let start = Start {
            at: killed,
            baseline: &baseline,
            log_from,
            settled_co: Some(&settled_co),
            failover: true,
        };
        // The Lease expires first (up to its 15 s duration).
        let limit = self.limit + Duration::from_secs(30);
        let measured = measure(client, &standby, &start, self.options.pos, limit).await?;
        let changed = changed_pos(&before, &po_statuses(client).await?);
        print_log_warnings(&standby.process.log_text());
        standby.stop().await;
        let floor = floor(self.plane, &settled_co).await?;
        let title = format!("leader failover of two replicas, {} POs", self.options.pos);
        Ok(report(&title, &measured, floor, changed, true))
    }
}

/// How many POs' statuses differ between `before` and `after` in more than their timestamps: a
/// rewrite that only moves a time is a needless write, and must count as unexpected.
fn changed_pos(before: &BTreeMap<String, Value>, after: &BTreeMap<String, Value>) -> usize {
    after
        .iter()
        .filter(|(name, status)| {
            before.get(*name).map(without_times) != Some(without_times(status))
        })
        .count()
}

/// `value` without the fields that hold times (`lastTransitionTime`, `...At`, ...), recursively.
fn without_times(value: &Value) -> Value {
    match value {
        Value::Object(fields) => Value::Object(
            fields
                .iter()
                .filter(|(key, _)| !(key.ends_with("Time") || key.ends_with("At")))
                .map(|(key, field)| (key.clone(), without_times(field)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_times).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn statuses(status: Value) -> BTreeMap<String, Value> {
        BTreeMap::from([("web".to_owned(), status)])
    }

    #[test]
    fn a_status_rewritten_with_only_a_new_time_counts_as_unchanged_and_a_new_reason_as_changed() {
        let before = statuses(json!({"conditions": [
            {"type": "Installed", "status": "True", "reason": "Installed", "lastTransitionTime": "2026-12-06T09:00:00Z"}
        ]}));
        let only_time = statuses(json!({"conditions": [
            {"type": "Installed", "status": "True", "reason": "Installed", "lastTransitionTime": "2026-12-06T10:00:00Z"}
        ]}));
        let new_reason = statuses(json!({"conditions": [
            {"type": "Installed", "status": "True", "reason": "Upgraded", "lastTransitionTime": "2026-12-06T09:00:00Z"}
        ]}));
        assert_eq!(changed_pos(&before, &only_time), 0);
        assert_eq!(changed_pos(&before, &new_reason), 1);
    }

    #[test]
    fn a_scrape_without_the_reconcile_counters_never_reads_as_idle() {
        assert_eq!(po_reconciles(""), None);
        let text = "pom_reconciles_total{controller=\"platformoperator\"} 7\n\
                    pom_reconcile_duration_seconds_count{controller=\"platformoperator\"} 7\n";
        assert_eq!(po_reconciles(text), Some((7, 7)));
    }
}
