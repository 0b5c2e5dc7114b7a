#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The chaos suite (issue 13 item 9). Two manager replicas with leader election; a workload
//! installs many PlatformOperators, moves them across a minor cluster update (4.16 -> 4.17, each
//! PO hopping along its channel up to the head) and deletes some of them midway, while a driver
//! SIGKILLs the leader at random moments (and starts it again after a random short delay),
//! restarts kube-apiserver and etcd, and takes the bundle-image registry down and up. The
//! invariant monitor (`pom_e2e::chaos::Monitor`) judges every PlatformOperator version all
//! along; the checker (`pom_e2e::chaos::check`) runs once everything converged.
//!
//! Everything random comes from one seed, printed first: `POM_CHAOS_SEED=<seed>` replays the
//! same fault schedule and workload. Sizes come from the environment (defaults: the short run
//! of `make test`; `make chaos` runs the long one):
//! `POM_CHAOS_KILLS` (12), `POM_CHAOS_APISERVER_RESTARTS` (1), `POM_CHAOS_ETCD_RESTARTS` (0),
//! `POM_CHAOS_REGISTRY_OUTAGES` (1), `POM_CHAOS_POS` (6), `POM_CHAOS_CHAIN` (3 bundles).
//!
//! However the run ends (a violation, a timeout, any panic), its last lines are the record of
//! `pom_e2e::chaos::RunRecord`: `chaos result: FAILED seed=<n>; replay: <command>`, the first
//! panic, each violation on a line of its own, the summary, and the seed again, so a caller
//! that keeps only the last lines (`make chaos | tail`) can replay it. `make chaos` prints it
//! once more after cargo's own lines (`POM_CHAOS_REPORT`, kept in `target/chaos/report.txt`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use pom_api::openshift::ClusterVersion;
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::chaos::{Chains, Monitor, Rng, RunRecord, check, env_number, seed_from_env};
use pom_e2e::fixtures::{TestBundle, bundle_name, catalog_json};
use pom_e2e::manager_process::{ManagerProcess, free_address, manager_binary};
use pom_e2e::oci_publish::push_files;
use pom_e2e::scenario::{now, simulated_plane};
use pom_e2e::{ControlPlane, Registry, Workloads};
use serde_json::{Value, json};
use tokio::sync::RwLock;

const NAMESPACE: &str = "openshift-platform-operators";
const LEASE: &str = "platform-operators-manager";
const REPLICAS: [&str; 2] = ["pom-a", "pom-b"];
/// How long one phase of the workload, or the convergence after the last fault, may take.
const CONVERGE: Duration = Duration::from_secs(300);
const FROM: &str = "4.16.3";
const TO: &str = "4.17.0";

struct Params {
    seed: u64,
    kills: u64,
    apiserver_restarts: u64,
    etcd_restarts: u64,
    registry_outages: u64,
    pos: u64,
    chain: u64,
}

impl Params {
    /// The command that replays this run.
    fn replay(&self) -> String {
        format!(
            "POM_CHAOS_SEED={} POM_CHAOS_KILLS={} POM_CHAOS_APISERVER_RESTARTS={} \
             POM_CHAOS_ETCD_RESTARTS={} POM_CHAOS_REGISTRY_OUTAGES={} POM_CHAOS_POS={} \
             POM_CHAOS_CHAIN={} cargo test -p pom-e2e --test chaos -- --nocapture",
            self.seed,
            self.kills,
            self.apiserver_restarts,
            self.etcd_restarts,
            self.registry_outages,
            self.pos,
            self.chain
        )
    }

    fn from_env() -> Self {
        Self {
            seed: seed_from_env(),
            kills: env_number("POM_CHAOS_KILLS", 12),
            apiserver_restarts: env_number("POM_CHAOS_APISERVER_RESTARTS", 1),
            etcd_restarts: env_number("POM_CHAOS_ETCD_RESTARTS", 0),
            registry_outages: env_number("POM_CHAOS_REGISTRY_OUTAGES", 1),
            pos: env_number("POM_CHAOS_POS", 6).max(2),
            chain: env_number("POM_CHAOS_CHAIN", 3).max(2),
        }
    }
}

/// Retries `write` until it succeeds (the API server may be restarting); panics after
/// [`CONVERGE`].
async fn retry<T, F, Fut>(what: &str, mut write: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, kube::Error>>,
{
    let started = Instant::now();
    loop {
        match write().await {
            Ok(value) => return value,
            Err(err) => assert!(
                started.elapsed() < CONVERGE,
                "{what} kept failing for {CONVERGE:?}: {err}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
}

fn object<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap()
}

async fn apply_catalog(client: &Client, fbc: &str) {
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns: Namespace = object(json!({"metadata": {"name": "catalogs"}}));
    retry("creating namespace catalogs", || async {
        match namespaces.create(&PostParams::default(), &ns).await {
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            other => other.map(|_| ()),
        }
    })
    .await;
    let cm: ConfigMap =
        object(json!({"metadata": {"name": "chaos"}, "data": {"catalog.json": fbc}}));
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "catalogs");
    let apply = PatchParams::apply("pom-e2e").force();
    retry("applying the catalog ConfigMap", || async {
        cms.patch("chaos", &apply, &Patch::Apply(&cm)).await
    })
    .await;
    pom_e2e::scenario::trust_catalog_namespace(client, "catalogs").await;
    let catalog: Catalog = object(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": "chaos"},
        "spec": {"source": {"configMap": {"name": "chaos", "namespace": "catalogs"}}}
    }));
    let catalogs: Api<Catalog> = Api::all(client.clone());
    retry("applying the Catalog", || async {
        catalogs
            .patch("chaos", &apply, &Patch::Apply(&catalog))
            .await
    })
    .await;
}

/// ClusterVersion `version` as the CVO writes it: `history` newest first (version, completed).
async fn set_cluster(client: &Client, history: &[(&str, bool)]) {
    let api: Api<ClusterVersion> = Api::all(client.clone());
    let cv: ClusterVersion = object(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "metadata": {"name": "version"},
        "spec": {"clusterID": "00000000-0000-4000-8000-000000000000"}
    }));
    retry("creating ClusterVersion", || async {
        match api.create(&PostParams::default(), &cv).await {
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
            other => other.map(|_| ()),
        }
    })
    .await;
    let desired = history[0].0;
    let in_flight = !history[0].1;
    let entries: Vec<Value> = history
        .iter()
        .map(|(v, completed)| {
            json!({"state": if *completed {"Completed"} else {"Partial"}, "startedTime": now(),
                   "completionTime": if *completed {json!(now())} else {json!(null)},
                   "version": v, "image": format!("example.invalid/release:{v}"), "verified": false})
        })
        .collect();
    let patch = json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "status": {
        "desired": {"version": desired, "image": format!("example.invalid/release:{desired}")},
        "history": entries, "observedGeneration": 1, "versionHash": "x", "availableUpdates": null,
        "conditions": [{"type": "Progressing", "status": if in_flight {"True"} else {"False"},
                        "lastTransitionTime": now(), "message": format!("Working towards {desired}")}]}});
    let apply = PatchParams::apply("cvo-simulator").force();
    retry("writing ClusterVersion status", || async {
        api.patch_status("version", &apply, &Patch::Apply(&patch))
            .await
    })
    .await;
}

/// Whether PO `po` runs `version` with its move settled, nothing owed and one inventory entry.
fn settled_on(po: &PlatformOperator, version: &str) -> bool {
    po.status.as_ref().is_some_and(|s| {
        s.observed_generation == po.metadata.generation
            && s.installed_bundle
                .as_ref()
                .is_some_and(|b| b.version == version)
            && s.active_hop.as_ref().is_some_and(|h| h.settled)
            && s.desired_bundle.is_none()
            && s.inventory.len() == 1
    })
}

/// Waits until every PO of `live` is settled on its version (`version(po)`) and every PO of
/// `gone` is gone; a timeout names the POs still off.
async fn converge(
    client: &Client,
    live: &[String],
    gone: &[String],
    version: impl Fn(&str) -> String,
    what: &str,
) {
    let api: Api<PlatformOperator> = Api::all(client.clone());
    let started = Instant::now();
    loop {
        let mut off = Vec::new();
        if let Ok(list) = api.list(&Default::default()).await {
            for po in live {
                let found = list
                    .items
                    .iter()
                    .find(|p| p.metadata.name.as_ref() == Some(po));
                if !found.is_some_and(|p| settled_on(p, &version(po))) {
                    off.push(format!(
                        "{po}: {:?}",
                        found.and_then(|p| p.status.as_ref()).map(|s| (
                            &s.installed_bundle,
                            &s.active_hop,
                            &s.desired_bundle,
                            s.inventory.iter().map(|e| &e.bundle).collect::<Vec<_>>(),
                            s.conditions
                                .iter()
                                .map(|c| format!(
                                    "{}={} {}: {}",
                                    c.type_, c.status, c.reason, c.message
                                ))
                                .collect::<Vec<_>>()
                        ))
                    ));
                }
            }
            for po in gone {
                if list
                    .items
                    .iter()
                    .any(|p| p.metadata.name.as_ref() == Some(po))
                {
                    off.push(format!("{po}: not gone yet"));
                }
            }
            if off.is_empty() {
                return;
            }
        } else {
            off.push("cannot list".into());
        }
        assert!(
            started.elapsed() < CONVERGE,
            "{what}: not converged after {CONVERGE:?}: {off:#?}"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// The Lease's holder and when it last renewed it.
async fn leader(client: &Client) -> Option<(String, Timestamp)> {
    let spec = Api::<Lease>::namespaced(client.clone(), NAMESPACE)
        .get_opt(LEASE)
        .await
        .ok()??
        .spec?;
    Some((spec.holder_identity?, spec.renew_time?.0))
}

/// Keeps the log of a replica that is gone (its successor of the same name starts a new one).
fn keep_log(process: &ManagerProcess) {
    for n in 1.. {
        let kept = process.log.with_extension(format!("log.{n}"));
        if !kept.exists() {
            let _ = std::fs::copy(&process.log, kept);
            return;
        }
    }
}

/// A manager replica and when it was started.
struct Replica {
    process: ManagerProcess,
    since: Timestamp,
}

async fn start_replica(plane: &ControlPlane, name: &str, registry: &str) -> Replica {
    let since = Timestamp::now();
    let process = start_manager(plane, name, registry).await;
    Replica { process, since }
}

async fn start_manager(plane: &ControlPlane, name: &str, registry: &str) -> ManagerProcess {
    let args = vec![
        "--leader-elect".to_owned(),
        "--lease-duration-seconds=4".to_owned(),
        "--lease-grace-seconds=2".to_owned(),
        format!("--health-bind-address={}", free_address().unwrap()),
        "--resync-seconds=10".to_owned(),
    ];
    ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        name,
        plane.kubeconfig_path(),
        &args,
        &[
            ("POD_NAMESPACE", NAMESPACE),
            ("RELEASE_VERSION", "4.99.0-pom-test"),
            ("POM_INSECURE_REGISTRIES", registry),
        ],
        plane.dir(),
    )
    .await
    .unwrap()
}

/// Plays the kubelet: a replica that exited by itself (it exits when it cannot renew the Lease,
/// e.g. while the API server restarts, as controller-runtime managers do) is started again.
/// Returns how many were.
async fn revive(managers: &mut [Option<Replica>; 2], plane: &ControlPlane, host: &str) -> u64 {
    let mut revived = 0;
    for (slot, manager) in managers.iter_mut().enumerate() {
        if manager.as_ref().is_some_and(|m| !m.process.is_running()) {
            let mut exited = manager.take().unwrap().process;
            let code = exited.wait_exit(Duration::from_secs(10)).await;
            keep_log(&exited);
            println!(
                "chaos: {} exited by itself ({code:?}): {}",
                exited.name,
                exited.log_tail(1)
            );
            *manager = Some(start_replica(plane, REPLICAS[slot], host).await);
            revived += 1;
        }
    }
    revived
}

/// What the driver did.
#[derive(Default, Debug)]
struct Faults {
    /// Replicas that exited by themselves and were started again.
    self_exits: u64,
    kills: u64,
    apiserver_restarts: u64,
    etcd_restarts: u64,
    registry_outages: u64,
    last: Option<Instant>,
}

/// The bundle images, to push again after the registry comes back empty.
type Images = Vec<(String, String, Vec<(String, Vec<u8>)>)>;

async fn push_all(host: &str, images: &Images) -> Vec<String> {
    let mut refs = Vec::new();
    for (repository, tag, files) in images {
        refs.push(push_files(host, repository, tag, files).await.unwrap());
    }
    refs
}

/// The fault driver: `kills` SIGKILLs of the leader at random moments, each replica started
/// again after a random short delay; the other faults after randomly chosen kills. Takes the
/// `gate` for writing while the API server or etcd restarts, so the workload's writes wait.
#[allow(clippy::too_many_arguments)]
async fn drive(
    params: &Params,
    rng: &mut Rng,
    plane: &mut ControlPlane,
    registry: &mut Registry,
    images: &Images,
    managers: &mut [Option<Replica>; 2],
    gate: &RwLock<()>,
    workload_done: &AtomicBool,
    kills_done: &AtomicU64,
) -> Faults {
    let client = plane.client().await.unwrap();
    let host = registry.host();
    let mut faults = Faults::default();
    let after = |rng: &mut Rng, count: u64| -> Vec<u64> {
        (0..count).map(|_| rng.below(params.kills.max(1))).collect()
    };
    let apiserver_at = after(rng, params.apiserver_restarts);
    let etcd_at = after(rng, params.etcd_restarts);
    let registry_at = after(rng, params.registry_outages);
    let mut waited_for_leader = Duration::ZERO;
    while faults.kills < params.kills {
        // Faster when the workload is done, so the schedule ends soon after.
        let pause = if workload_done.load(Ordering::Relaxed) {
            rng.millis(500, 2500)
        } else {
            rng.millis(1000, 5000)
        };
        tokio::time::sleep(pause).await;
        faults.self_exits += revive(managers, plane, &host).await;
        let Some((holder, renewed)) = leader(&client).await else {
            continue;
        };
        let Some(slot) = REPLICAS.iter().position(|r| *r == holder) else {
            panic!("the Lease names {holder}, not a replica");
        };
        // The leader is the replica the Lease names that renewed it since it started (the
        // Lease still names a killed leader until it expires; its successor of the same name
        // leads only once it renewed).
        let leading = managers[slot]
            .as_ref()
            .is_some_and(|m| m.process.is_running() && renewed > m.since);
        if !leading {
            waited_for_leader += pause;
            continue;
        }
        let mut killed = managers[slot].take().unwrap().process;
        killed.signal("KILL");
        let code = killed.wait_exit(Duration::from_secs(10)).await;
        assert_eq!(code, Some(137), "{holder} must die by SIGKILL");
        keep_log(&killed);
        drop(killed);
        faults.kills += 1;
        kills_done.store(faults.kills, Ordering::Relaxed);
        faults.last = Some(Instant::now());
        let index = faults.kills - 1;
        // Sometimes back before the Lease expires (it takes its Lease again), sometimes after
        // (the standby took over).
        tokio::time::sleep(rng.millis(200, 7000)).await;
        managers[slot] = Some(start_replica(plane, REPLICAS[slot], &host).await);

        for _ in apiserver_at.iter().filter(|&&i| i == index) {
            let _writes = gate.write().await;
            plane.restart_apiserver().await.unwrap();
            faults.apiserver_restarts += 1;
            faults.last = Some(Instant::now());
        }
        for _ in etcd_at.iter().filter(|&&i| i == index) {
            let _writes = gate.write().await;
            plane.restart_etcd().await.unwrap();
            faults.etcd_restarts += 1;
            faults.last = Some(Instant::now());
        }
        for _ in registry_at.iter().filter(|&&i| i == index) {
            registry.stop();
            tokio::time::sleep(rng.millis(2000, 8000)).await;
            registry.restart().await.unwrap();
            push_all(&host, images).await;
            faults.registry_outages += 1;
            faults.last = Some(Instant::now());
        }
    }
    println!("chaos: the driver waited {waited_for_leader:?} in all for a leader to kill");
    faults
}

#[tokio::test]
async fn chaos() {
    let params = Params::from_env();
    println!(
        "chaos: seed {} (replay with POM_CHAOS_SEED={})",
        params.seed, params.seed
    );
    // Told last, whichever way the run ends (issue 25 item 12).
    let mut record = RunRecord::new(params.seed, params.replay());
    let Some(mut plane) = simulated_plane(true).await else {
        return;
    };
    let started = Instant::now();
    let mut rng = Rng::new(params.seed);
    let client = plane.client().await.unwrap();
    let mut registry = Registry::start().await.unwrap();
    let host = registry.host();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    namespaces
        .create(
            &PostParams::default(),
            &object(json!({"metadata": {"name": NAMESPACE}})),
        )
        .await
        .unwrap();

    // The packages: chaos-NN, a straight channel 1.0.0 -> 1.1.0 -> ... (each bundle ships a
    // PriorityClass named after its version, so what only an old bundle had is visible); every
    // third package's bundles are images in the registry, the others are inline in the catalog.
    let names: Vec<String> = (0..params.pos).map(|i| format!("chaos-{i:02}")).collect();
    let mut chains = Chains::default();
    let mut bundles = Vec::new();
    let mut images: Images = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let versions: Vec<String> = (0..params.chain).map(|m| format!("1.{m}.0")).collect();
        for (m, version) in versions.iter().enumerate() {
            let mut bundle = TestBundle::new(name, version).with_object(json!({
                "apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": format!("{name}-v{m}")}, "value": 1000
            }));
            if m > 0 {
                bundle = bundle.replaces(&versions[m - 1]);
            }
            if i % 3 == 2 {
                images.push((
                    format!("bundles/{name}"),
                    version.clone(),
                    bundle.image_files(),
                ));
            }
            bundles.push(bundle);
        }
        chains.0.insert(name.clone(), versions);
    }
    let refs = push_all(&host, &images).await;
    let image_refs: Vec<(String, String)> = images
        .iter()
        .zip(&refs)
        .map(|((repo, tag, _), r)| {
            let package = repo.trim_start_matches("bundles/");
            (bundle_name(package, tag), r.clone())
        })
        .collect();
    let firsts: Vec<TestBundle> = bundles
        .iter()
        .filter(|b| b.version == "1.0.0")
        .cloned()
        .collect();
    let deleted: Vec<String> = rng
        .pick(params.pos, usize::try_from(params.pos / 3).unwrap())
        .into_iter()
        .map(|i| names[usize::try_from(i).unwrap()].clone())
        .collect();
    let live: Vec<String> = names
        .iter()
        .filter(|n| !deleted.contains(n))
        .cloned()
        .collect();

    let mut order: Vec<(Duration, &String)> = deleted
        .iter()
        .map(|name| (rng.millis(0, 8000), name))
        .collect();
    order.sort();
    let mut driver_rng = Rng::new(rng.next_u64());
    let monitor = Monitor::start(client.clone(), chains.clone());
    let mut managers: [Option<Replica>; 2] = [
        Some(start_replica(&plane, REPLICAS[0], &host).await),
        Some(start_replica(&plane, REPLICAS[1], &host).await),
    ];
    let gate = RwLock::new(());
    let workload_done = AtomicBool::new(false);
    let kills_done = AtomicU64::new(0);

    let workload = async {
        let pos: Api<PlatformOperator> = Api::all(client.clone());
        // 1. A steady 4.16 cluster; the catalog has only 1.0.0 of each package; every PO is
        //    created and installs 1.0.0.
        {
            let _writes = gate.read().await;
            set_cluster(&client, &[(FROM, true)]).await;
            apply_catalog(&client, &catalog_json(&firsts, &image_refs)).await;
        }
        for name in &names {
            let _writes = gate.read().await;
            let po: PlatformOperator = object(json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": name}, "spec": {"package": {"name": name}}
            }));
            retry(&format!("creating {name}"), || async {
                match pos.create(&PostParams::default(), &po).await {
                    Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
                    other => other.map(|_| ()),
                }
            })
            .await;
        }
        converge(&client, &names, &[], |_| "1.0.0".into(), "installs").await;
        println!("chaos: every PO installed 1.0.0 at {:?}", started.elapsed());
        // The moves start once a third of the kills happened, so faults hit installs, hops
        // and deletes alike.
        while kills_done.load(Ordering::Relaxed) < params.kills / 3 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        // 2. The publisher ships the whole channel (a steady pin keeps each PO where it is);
        //    the minor update 4.16 -> 4.17 starts: each PO hops along its channel to the head.
        //    Meanwhile a third of the POs are deleted at random moments.
        {
            let _writes = gate.read().await;
            apply_catalog(&client, &catalog_json(&bundles, &image_refs)).await;
        }
        tokio::time::sleep(Duration::from_secs(2)).await;
        {
            let _writes = gate.read().await;
            set_cluster(&client, &[(TO, false), (FROM, true)]).await;
        }
        let mut slept = Duration::ZERO;
        for (at, name) in order {
            tokio::time::sleep(at.saturating_sub(slept)).await;
            slept = at;
            let _writes = gate.read().await;
            retry(&format!("deleting {name}"), || async {
                match pos.delete(name, &DeleteParams::default()).await {
                    Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
                    other => other.map(|_| ()),
                }
            })
            .await;
        }
        let head = |po: &str| chains.head(po).unwrap().to_owned();
        converge(&client, &live, &deleted, head, "the minor update").await;
        {
            let _writes = gate.read().await;
            set_cluster(&client, &[(TO, true), (FROM, true)]).await;
        }
        println!(
            "chaos: every PO at its head, deleted ones gone, at {:?}",
            started.elapsed()
        );
        workload_done.store(true, Ordering::Relaxed);
    };
    let driver = drive(
        &params,
        &mut driver_rng,
        &mut plane,
        &mut registry,
        &images,
        &mut managers,
        &gate,
        &workload_done,
        &kills_done,
    );
    let ((), mut faults) = tokio::join!(workload, driver);

    // Convergence after the last fault: every PO settled on its head (replicas that exit
    // by themselves meanwhile are started again), then both replicas must still run.
    let last_fault = faults.last.unwrap_or_else(Instant::now);
    let head = |po: &str| chains.head(po).unwrap().to_owned();
    let supervise = async {
        loop {
            faults.self_exits += revive(&mut managers, &plane, &host).await;
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    };
    tokio::select! {
        () = converge(&client, &live, &deleted, head, "after the last fault") => {}
        () = supervise => {}
    }
    let to_converge = last_fault.elapsed();
    for manager in managers.iter().flatten() {
        assert!(
            manager.process.is_running(),
            "{} died: {}",
            manager.process.name,
            manager.process.log_tail(30)
        );
    }
    let report = monitor.stop().await;
    let checked = check(&client, &chains, &live, &deleted).await;
    let violations: Vec<&String> = report.violations.iter().chain(&checked).collect();
    let summary = format!(
        "chaos summary: seed={} kills={} apiserver_restarts={} etcd_restarts={} \
         registry_outages={} replica_self_exits={} pos={} deleted={} moves={} versions_judged={} deletions_judged={} deletions_unjudged={} settles_judged={} \
         settles_unjudged={} co_upgradeable_judged={} co_upgradeable_unjudged={} rewatches={} \
         upgradeable_with_pending_bundle={} seconds_to_converge_after_last_fault={:.1} \
         violations={} total_seconds={:.0}",
        params.seed,
        faults.kills,
        faults.apiserver_restarts,
        faults.etcd_restarts,
        faults.registry_outages,
        faults.self_exits,
        params.pos,
        deleted.len(),
        report.moves.len(),
        report.versions_seen,
        report.deletions.judged,
        report.deletions.unjudged,
        report.settles.judged,
        report.settles.unjudged,
        report.co_upgradeable.judged,
        report.co_upgradeable.unjudged,
        report.rewatches,
        report.upgradeable_with_pending_bundle,
        to_converge.as_secs_f64(),
        violations.len(),
        started.elapsed().as_secs_f64(),
    );
    println!("{summary}");
    record.summary(summary);
    record.violations(violations.iter().map(|v| (*v).clone()).collect());
    assert!(
        violations.is_empty(),
        "seed {}: {} invariant violation(s), each listed below as `chaos result: violation`",
        params.seed,
        violations.len()
    );
    assert_eq!(faults.kills, params.kills);
    assert_eq!(faults.apiserver_restarts, params.apiserver_restarts);
    assert_eq!(faults.etcd_restarts, params.etcd_restarts);
    assert_eq!(faults.registry_outages, params.registry_outages);
    // Every live PO made every hop of its channel, each seen by the monitor (or at least the
    // last one, when a relist after a restart hid a short-lived one).
    for po in &live {
        let last = chains.0[po].len() - 1;
        let head = bundle_name(po, &chains.0[po][last]);
        assert!(
            report.moves.iter().any(|(p, _, to)| p == po && *to == head),
            "no move of {po} to {head} was seen: {:?}",
            report.moves
        );
    }
}

/// The race of seed 2014 (issue 25 item 12), made deterministic: the aggregated ClusterOperator
/// said `Upgradeable=True` (rv354) while all six POs had recorded their unsettled installs
/// (rv283-313). A pass of the aggregator takes the cache's POs first, then reads the API (and,
/// at a leadership start, waits for discovery and the ClusterVersion list); the POs created
/// and moved meanwhile were not in what it computed from, "No platform operators are present
/// in the cluster". Here the pass gets the snapshot it would have had (no PO) while the API
/// already holds a PO whose install is recorded and unsettled: what it writes must not be
/// `Upgradeable=True`.
#[tokio::test]
async fn an_aggregator_pass_from_a_stale_snapshot_never_says_upgradeable_over_a_move() {
    use pom_api::conditions::types::UPGRADEABLE;
    use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator};
    use pom_controller::operator::gather::ClusterWatch;
    use pom_e2e::manager::Manager;
    use tokio_util::sync::CancellationToken;

    if pom_e2e::binaries::require(pom_e2e::binaries::CONTROL_PLANE).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let client = plane.client().await.unwrap();
    set_cluster(&client, &[(FROM, true)]).await;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let po: PlatformOperator = object(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "metadata": {"name": "race-00"}, "spec": {"package": {"name": "race-00"}}
    }));
    pos.create(&PostParams::default(), &po).await.unwrap();
    let installing = json!({"apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "status": {"observedGeneration": 1, "activeHop": {
            "to": bundle_name("race-00", "1.0.0"), "startedAt": now(), "settled": false}}});
    pos.patch_status(
        "race-00",
        &PatchParams::apply("pom-e2e").force(),
        &Patch::Apply(&installing),
    )
    .await
    .unwrap();

    let ctx = pom_controller::Context::new(client.clone(), Manager::test_settings(Vec::new()));
    let shutdown = CancellationToken::new();
    let (changes, _) = tokio::sync::watch::channel(0u64);
    let cluster = ClusterWatch::start(&client, &shutdown, changes);
    pom_controller::cluster_operator::sync(
        &ctx,
        &cluster,
        &[],
        // GuardState::Unchecked: the test plane has no admission guard to check.
        &Default::default(),
    )
    .await
    .unwrap();
    shutdown.cancel();

    let co = Api::<ClusterOperator>::all(client)
        .get(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .unwrap();
    let upgradeable = co
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == UPGRADEABLE))
        .unwrap_or_else(|| panic!("no Upgradeable condition: {co:?}"));
    assert_eq!(
        upgradeable.status, "False",
        "the ClusterOperator says Upgradeable while race-00's install is unsettled: {upgradeable:?}"
    );
}
