//! `make demo`: POM, installed as an admin installs it, managing two platform operators
//! through a scripted cluster update, on a local control plane (simulated workloads) with a
//! loopback OCI registry and the simulated CVO. See `docs/demo.md` for what it shows and how
//! to explore it.
//!
//! The install: every object of `manifests/kubernetes/` but the Deployment is applied with
//! `kubectl apply --server-side` (namespace, CRDs, ServiceAccount, RBAC, the admission guard,
//! the catalog-sources policy); the manager binary (`pom-manager`) then runs as a local
//! process in place of the Deployment's pod, with the Deployment's arguments and a kubeconfig
//! holding a token of its ServiceAccount, so it has exactly the shipped RBAC and the guard
//! bounds it. A few settings are shortened for a demo (see [`manager_env`]).
//!
//! The script: publish bundle images and a catalog image; create a Catalog (image source) and
//! two PlatformOperators; install ClusterVersion at 4.16.3; wait until both are installed;
//! publish z-stream fixes and update to 4.16.4 (a patch: POs move within their minor, the
//! block stays); publish newer bundles and ask for 4.17.0: the CVO refuses and keeps the
//! request, POM offers a pre-update hop, the demo approves it (as `pomctl approve` does), the
//! PO hops while the cluster stays at 4.16.4, and the CVO's own retry starts 4.17.0 once
//! nothing blocks it; POs then move within their major.
//!
//! Each update plays the CVO's rollout of the new payload: once POM has taken the update's
//! pins, the manager process is restarted with `RELEASE_VERSION` = the target, as the CVO
//! would roll out the new POM image; the update completes when the aggregated ClusterOperator
//! reports that version (only once every PO reached its pin), Available=True and
//! Degraded=False.

mod report;
pub mod sample;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pom_api::openshift::{CLUSTER_VERSION_NAME, ClusterVersion};
use pom_api::{Catalog, PlatformOperator};
use serde_json::json;

use crate::cvo::{Admission, Cvo, CvoError, CvoTiming, Progress};
use crate::manager_process::{ManagerProcess, free_address};
use crate::{ControlPlane, HarnessError, Registry, Workloads};
use report::HopLog;

/// The cluster version the demo installs, and the two updates it scripts.
pub const INITIAL_VERSION: &str = "4.16.3";
pub const PATCH_VERSION: &str = "4.16.4";
pub const MINOR_VERSION: &str = "4.17.0";

/// Where the shipped install puts the manager, and its ServiceAccount.
pub const MANAGER_NAMESPACE: &str = "openshift-platform-operators";
pub const MANAGER_SERVICE_ACCOUNT: &str = "platform-operators-manager";
/// The PO whose bundle blocks 4.17 and which the demo moves by a pre-update hop.
pub const PRE_UPDATE_PO: &str = "demo-metrics";

/// How long one wait (installs, pins, an update) may take before the demo gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(150);
/// How long to wait for a message the demo only points out (not needed to go on).
const ADVICE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped manager may take to exit (its `--shutdown-timeout` is 25 s).
const MANAGER_EXIT_TIMEOUT: Duration = Duration::from_secs(35);
/// How long the manager's ServiceAccount token is valid: a day, so that a demo left running
/// (`make demo` without `DEMO_ONCE`) keeps working for a working day.
const TOKEN_LIFETIME: Duration = Duration::from_secs(24 * 3600);

/// Why the demo stopped early.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    #[error(transparent)]
    Harness(#[from] HarnessError),
    #[error(transparent)]
    Cvo(#[from] CvoError),
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
    #[error("timed out after {seconds}s waiting for {what}")]
    Timeout { what: String, seconds: u64 },
    #[error(
        "installing POM with `{command}` failed ({status}): {stderr}; check that this kubectl can reach the demo cluster (set POM_KUBECTL to another kubectl)"
    )]
    Install {
        command: String,
        status: String,
        stderr: String,
    },
    #[error("{0}")]
    Tool(String),
}

fn kube_err(what: &str) -> impl FnOnce(kube::Error) -> DemoError + '_ {
    move |source| DemoError::Kube {
        what: what.to_owned(),
        source,
    }
}

/// The programs the demo runs besides the control plane.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The manager binary (`pom-manager`, or any binary with its entry point).
    pub manager: PathBuf,
    /// The kubectl that applies the shipped manifests.
    pub kubectl: PathBuf,
}

impl Tools {
    /// As `make demo` finds them. The manager: `POM_MANAGER_BIN`, else `pom-manager` next to
    /// this executable (the Makefile builds it into the same target folder). kubectl:
    /// `POM_KUBECTL`, else `kubectl` in `POM_TEST_BIN_DIR` (built by
    /// `e2e/tools/build-binaries.sh` when `POM_WITH_KUBECTL=1` and none is on PATH; the control
    /// plane's own version), else `kubectl` on `PATH`.
    ///
    /// # Errors
    /// When either cannot be found, naming how to provide it.
    pub fn from_env() -> Result<Self, DemoError> {
        let manager = match std::env::var_os("POM_MANAGER_BIN") {
            Some(path) => PathBuf::from(path),
            None => std::env::current_exe()
                .ok()
                .and_then(|exe| exe.parent().map(|dir| dir.join("pom-manager")))
                .filter(|path| path.is_file())
                .ok_or_else(|| {
                    DemoError::Tool(
                        "no pom-manager next to pom-demo: build it with `cargo build -p pom-controller --bin pom-manager` (make demo does), or set POM_MANAGER_BIN".into(),
                    )
                })?,
        };
        let kubectl = std::env::var_os("POM_KUBECTL")
            .map(PathBuf::from)
            .or_else(|| {
                std::env::var_os("POM_TEST_BIN_DIR")
                    .map(|dir| PathBuf::from(dir).join("kubectl"))
                    .filter(|path| path.is_file())
            })
            .or_else(|| on_path("kubectl"))
            .ok_or_else(|| {
                DemoError::Tool(
                    "no kubectl: put one on PATH, set POM_KUBECTL, or run `POM_WITH_KUBECTL=1 bash e2e/tools/build-binaries.sh` (make demo does)".into(),
                )
            })?;
        Ok(Self { manager, kubectl })
    }
}

/// `name` in a folder of `PATH`, if there is one.
fn on_path(name: &str) -> Option<PathBuf> {
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|path| path.is_file())
}

/// The files of `manifests/kubernetes/` an admin applies, in order: all but the Deployment's
/// (the demo runs the manager as a local process in place of its pod).
///
/// # Errors
/// When the folder cannot be read.
pub fn manifest_files() -> Result<Vec<PathBuf>, HarnessError> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/kubernetes");
    let mut files = Vec::new();
    for entry in
        std::fs::read_dir(&dir).map_err(HarnessError::io(format!("reading {}", dir.display())))?
    {
        let path = entry
            .map_err(HarnessError::io(format!("reading {}", dir.display())))?
            .path();
        let text = std::fs::read_to_string(&path)
            .map_err(HarnessError::io(format!("reading {}", path.display())))?;
        if path.extension().is_some_and(|e| e == "yaml") && !text.contains("\nkind: Deployment\n") {
            files.push(path);
        }
    }
    files.sort();
    Ok(files)
}

/// The environment of the demo's manager process: the Deployment's (`RELEASE_VERSION`,
/// `POD_NAMESPACE`; `POD_NAME` comes from [`ManagerProcess`]) plus what a demo shortens or
/// needs: the loopback registry is plain HTTP, catalogs are polled and POs resynced often,
/// and the demo's operators never report, so a move settles after 1 s instead of the
/// production two minutes (`--auto-settle-window`). The admission guard is required, as in
/// production.
fn manager_env(release: &str, registry: &str) -> Vec<(&'static str, String)> {
    vec![
        ("RELEASE_VERSION", release.to_owned()),
        ("POD_NAMESPACE", MANAGER_NAMESPACE.to_owned()),
        ("POM_INSECURE_REGISTRIES", registry.to_owned()),
        ("POM_CATALOG_POLL_SECONDS", "5".to_owned()),
        ("POM_RESYNC_SECONDS", "20".to_owned()),
        ("POM_AUTO_SETTLE_WINDOW", "1s".to_owned()),
        ("POM_REQUIRE_ADMISSION_GUARD", "true".to_owned()),
        (
            "RUST_LOG",
            "info,kube=warn,hyper=warn,tower=warn".to_owned(),
        ),
    ]
}

/// Everything the demo runs; dropping it stops the manager, the registry and the control
/// plane (in that order) and removes their files.
pub struct Demo {
    manager: Option<ManagerProcess>,
    tools: Tools,
    manager_kubeconfig: PathBuf,
    health: SocketAddr,
    registry: Registry,
    plane: ControlPlane,
}

impl Demo {
    /// Starts the control plane and the registry, and installs POM from
    /// `manifests/kubernetes/` with `tools.kubectl` (see the module docs).
    ///
    /// # Errors
    /// When a binary is missing, a process does not come up, or the install fails.
    pub async fn start(tools: Tools) -> Result<Self, DemoError> {
        let plane = ControlPlane::start(Workloads::Simulated).await?;
        let registry = Registry::start().await?;
        install_pom(&tools.kubectl, plane.kubeconfig_path()).await?;
        let client = plane.client().await?;
        let manager_kubeconfig = crate::shipped::service_account_kubeconfig_valid_for(
            &plane,
            &client,
            MANAGER_NAMESPACE,
            MANAGER_SERVICE_ACCOUNT,
            "manager.kubeconfig",
            TOKEN_LIFETIME,
        )
        .await?;
        Ok(Self {
            manager: None,
            tools,
            manager_kubeconfig,
            health: free_address()?,
            registry,
            plane,
        })
    }

    /// The admin kubeconfig of the demo cluster.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &Path {
        self.plane.kubeconfig_path()
    }

    /// An admin client of the demo cluster.
    ///
    /// # Errors
    /// When the kubeconfig cannot be read.
    pub async fn client(&self) -> Result<Client, DemoError> {
        Ok(self.plane.client().await?)
    }

    /// The kubeconfig the manager runs with: a token of its ServiceAccount, nothing else.
    #[must_use]
    pub fn manager_kubeconfig_path(&self) -> &Path {
        &self.manager_kubeconfig
    }

    /// The manager's log file, once it runs.
    #[must_use]
    pub fn manager_log(&self) -> Option<&Path> {
        self.manager.as_ref().map(|m| m.log.as_path())
    }

    /// The registry's `host:port`.
    #[must_use]
    pub fn registry_host(&self) -> String {
        self.registry.host()
    }

    /// Runs the script (see the module docs).
    ///
    /// # Errors
    /// The first step that fails or times out, with what it waited for.
    pub async fn run(&mut self, started: Instant) -> Result<(), DemoError> {
        let client = self.plane.client().await?;
        let host = self.registry.host();
        let step = |text: &str| println!("\n[{:6.1}s] == {text}", started.elapsed().as_secs_f32());

        step("publishing bundle images and the catalog image (stage 1)");
        let images = sample::push_bundles(&host).await?;
        for (name, reference) in &images {
            println!("  {name}: {reference}");
        }
        let catalog_digest = sample::push_catalog_stage(&host, &images, 1).await?;
        println!(
            "  catalog {host}/{}:{} = {catalog_digest}",
            sample::CATALOG_REPOSITORY,
            sample::CATALOG_TAG
        );

        step(&format!(
            "ClusterVersion at {INITIAL_VERSION} (simulated CVO: a refused request stays and every sync retries it; payload: the aggregated ClusterOperator)"
        ));
        let cvo = Cvo::install_with(
            client.clone(),
            INITIAL_VERSION,
            &[pom_api::openshift::AGGREGATED_CLUSTER_OPERATOR],
            CvoTiming::newer(),
        )
        .await?;

        step(&format!(
            "the manager binary runs as ServiceAccount {MANAGER_NAMESPACE}/{MANAGER_SERVICE_ACCOUNT} (release version {INITIAL_VERSION}); the admin creates a Catalog and two PlatformOperators"
        ));
        self.restart_manager(INITIAL_VERSION).await?;
        if let Some(log) = self.manager_log() {
            println!("  manager log: {}", log.display());
        }
        create_catalog(
            &client,
            &format!(
                "{host}/{}:{}",
                sample::CATALOG_REPOSITORY,
                sample::CATALOG_TAG
            ),
        )
        .await?;
        for package in sample::PACKAGES {
            create_po(&client, package).await?;
        }

        let mut hops = HopLog::new(started);
        step(
            "waiting for both PlatformOperators to be Installed (table every 2 s while it changes)",
        );
        watch_until(
            &client,
            None,
            &mut hops,
            "both PlatformOperators Installed and the ClusterOperator reporting",
            STEP_TIMEOUT,
            |pos, co, _| {
                let installed = pos.len() == sample::PACKAGES.len()
                    && pos.iter().all(|po| {
                        report::po_condition(po, "Installed").is_some_and(|c| c.0 == "True")
                    });
                installed && co.and_then(report::co_version).as_deref() == Some(INITIAL_VERSION)
            },
        )
        .await?;

        step(
            "the publisher ships z-stream fixes (catalog stage 2, same tag); steady pins keep every PO still",
        );
        self.publish_stage(&client, &images, 2).await?;

        step(&format!(
            "patch update {INITIAL_VERSION} -> {PATCH_VERSION}: allowed whatever Upgradeable says; POs may move within their minor"
        ));
        match cvo.request_update(PATCH_VERSION, false).await? {
            Admission::Accepted { .. } => {}
            Admission::Pending { message, .. } => {
                return Err(DemoError::Tool(format!(
                    "the CVO refused the patch update to {PATCH_VERSION}: {message}"
                )));
            }
        }
        self.follow_update(&client, &cvo, &mut hops, PATCH_VERSION, "PatchUpgrade")
            .await?;

        step(
            "the publisher ships new minors (catalog stage 3): demo-metrics 2.4.0 runs on 4.16 and 4.17",
        );
        self.publish_stage(&client, &images, 3).await?;

        step(&format!(
            "admin asks for {MINOR_VERSION}: the CVO refuses while Upgradeable=False and keeps the request"
        ));
        match cvo.request_update(MINOR_VERSION, false).await? {
            Admission::Pending { message, .. } => {
                println!("  refused, as expected (ReleaseAccepted=False):");
                for line in message.lines() {
                    println!("    {line}");
                }
            }
            Admission::Accepted { kind, .. } => {
                println!(
                    "  NOTE: the CVO accepted the {kind} update although {PRE_UPDATE_PO} supports only 4.16; following it through"
                );
                self.follow_update(&client, &cvo, &mut hops, MINOR_VERSION, "MinorUpgrade")
                    .await?;
                return self.finish(&client, &mut hops).await;
            }
        }

        step(&format!(
            "POM offers a pre-update hop for {PRE_UPDATE_PO} (spec.preUpdateHops: Offer, the default); the cluster stays at {PATCH_VERSION}"
        ));
        let mut offered = None;
        watch_until(
            &client,
            Some(&cvo),
            &mut hops,
            &format!("{PRE_UPDATE_PO} to wait for the approval of a pre-update hop"),
            STEP_TIMEOUT,
            |pos, _, _| {
                offered = pos
                    .iter()
                    .find(|po| po.metadata.name.as_deref() == Some(PRE_UPDATE_PO))
                    .and_then(waiting_for_approval);
                offered.is_some()
            },
        )
        .await?;
        let bundle = offered.unwrap_or_default();
        // What the CVO reads names the offer once the manager has aggregated it.
        let named = watch_until(
            &client,
            Some(&cvo),
            &mut hops,
            &format!("the ClusterOperator's Upgradeable to name the offered {bundle}"),
            ADVICE_TIMEOUT,
            |_, co, _| {
                co.and_then(|co| report::co_condition(co, "Upgradeable"))
                    .is_some_and(|c| {
                        c.2.contains("offers the hops") && c.2.contains(bundle.as_str())
                    })
            },
        )
        .await;
        if let Err(err) = named {
            println!("  NOTE: {err}; going on");
        }
        if let Some(co) = report::cluster_operator(&client).await
            && let Some((status, _, message)) = report::co_condition(&co, "Upgradeable")
        {
            println!("  the ClusterOperator says Upgradeable={status}:");
            for line in message.lines() {
                println!("    {line}");
            }
        }
        println!(
            "  admin: pomctl approve {PRE_UPDATE_PO}   (writes spec.approvedBundle: {bundle})"
        );
        approve(&client, PRE_UPDATE_PO, &bundle).await?;

        step(&format!(
            "the pre-update hop runs while the cluster stays at {PATCH_VERSION}; the CVO retries {MINOR_VERSION} on every sync"
        ));
        watch_until(
            &client,
            Some(&cvo),
            &mut hops,
            &format!("the CVO to accept {MINOR_VERSION} once nothing blocks it"),
            STEP_TIMEOUT,
            |_, _, cv| {
                cv.and_then(|cv| cv.status.as_ref())
                    .is_some_and(|s| s.desired.version == MINOR_VERSION)
            },
        )
        .await?;
        println!("  the CVO accepted {MINOR_VERSION} by its own retry");

        step(&format!(
            "minor update {PATCH_VERSION} -> {MINOR_VERSION}: POs may move within their major"
        ));
        self.follow_update(&client, &cvo, &mut hops, MINOR_VERSION, "MinorUpgrade")
            .await?;
        self.finish(&client, &mut hops).await
    }

    async fn finish(&self, client: &Client, hops: &mut HopLog) -> Result<(), DemoError> {
        // Right after an update completes the aggregated ClusterOperator still carries the
        // judgement of the update phase (pins of the update, "next minor update" of the old
        // minor), then says UpgradeabilityUnknown until each PO is judged for the new steady
        // phase: the last table (and what an admin runs next) waits for that judgement.
        let next_minor = next_minor(MINOR_VERSION);
        watch_until(
            client,
            None,
            hops,
            &format!("every PO judged for the steady phase at {MINOR_VERSION} (Steady pins, the ClusterOperator naming the next minor update {next_minor})"),
            STEP_TIMEOUT,
            |pos, co, _| {
                let steady = pos.iter().all(|po| {
                    po.status
                        .as_ref()
                        .and_then(|s| s.pin.as_ref())
                        .is_some_and(|p| p.reason.as_str() == "Steady")
                });
                steady
                    && co
                        .and_then(|co| report::co_condition(co, "Upgradeable"))
                        .is_some_and(|c| {
                            c.1 != "UpgradeabilityUnknown"
                                && c.2.contains(&format!("next minor update: {next_minor}"))
                        })
            },
        )
        .await?;
        println!("\n== done: the cluster and both platform operators are updated");
        let pos = report::platform_operators(client).await;
        print!(
            "{}",
            report::render(&pos, report::cluster_operator(client).await.as_ref())
        );
        println!("moves observed:");
        for (po, from, to) in &hops.moves {
            println!("  {po}: {} -> {to}", from.as_deref().unwrap_or("nothing"));
        }
        Ok(())
    }

    /// Pushes catalog `stage` and waits until the manager serves it.
    async fn publish_stage(
        &self,
        client: &Client,
        images: &sample::BundleImages,
        stage: u8,
    ) -> Result<(), DemoError> {
        let digest = sample::push_catalog_stage(&self.registry.host(), images, stage).await?;
        println!("  catalog now {digest}");
        wait_for(
            &format!("the manager to serve catalog stage {stage}"),
            || async {
                let catalog = Api::<Catalog>::all(client.clone())
                    .get_opt("demo")
                    .await
                    .ok()
                    .flatten()?;
                (catalog.status?.resolved_source? == digest).then_some(())
            },
        )
        .await
    }

    /// Waits for POM to take the update's pins, plays the CVO's rollout of the new manager,
    /// then lets the CVO sync until the update completes.
    async fn follow_update(
        &mut self,
        client: &Client,
        cvo: &Cvo,
        hops: &mut HopLog,
        version: &str,
        pin_reason: &str,
    ) -> Result<(), DemoError> {
        println!("  ClusterVersion: desired {version}, history[0] Partial, Progressing=True");
        let pinned = watch_until(
            client,
            None,
            hops,
            &format!("every PO to take a {pin_reason} pin"),
            STEP_TIMEOUT,
            |pos, _, _| {
                pos.iter().all(|po| {
                    po.status
                        .as_ref()
                        .and_then(|s| s.pin.as_ref())
                        .is_some_and(|p| p.reason.as_str() == pin_reason)
                })
            },
        )
        .await;
        if let Err(err) = pinned {
            // Not fatal: the update below says what it waits on if POM never catches up.
            println!("  NOTE: {err}");
        }
        println!(
            "  the CVO rolls out the new payload: manager restarted with RELEASE_VERSION={version}"
        );
        self.restart_manager(version).await?;
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut last = String::new();
        loop {
            let pos = report::platform_operators(client).await;
            hops.observe(&pos);
            match cvo.sync().await?.progress {
                Progress::Completed(v) | Progress::Steady(v) if v == version => {
                    println!("  CVO: update to {v} Completed");
                    let co = report::cluster_operator(client).await;
                    print!("{}", report::render(&pos, co.as_ref()));
                    return Ok(());
                }
                Progress::Waiting(waiting) => {
                    let text = waiting.join("; ").replace('\n', " | ");
                    if text != last && !text.is_empty() {
                        println!("  CVO waiting: {text}");
                        last = text;
                    }
                }
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(DemoError::Timeout {
                    what: format!("the update to {version} ({last})"),
                    seconds: STEP_TIMEOUT.as_secs(),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Stops the manager process (SIGTERM, as a rollout does) and starts it again with
    /// `RELEASE_VERSION` = `release_version`.
    async fn restart_manager(&mut self, release_version: &str) -> Result<(), DemoError> {
        if let Some(mut old) = self.manager.take() {
            old.signal("TERM");
            if old.wait_exit(MANAGER_EXIT_TIMEOUT).await.is_none() {
                println!(
                    "  NOTE: the manager did not exit within {}s of SIGTERM; killed",
                    MANAGER_EXIT_TIMEOUT.as_secs()
                );
            }
        }
        let env = manager_env(release_version, &self.registry.host());
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        // The Deployment's arguments, with loopback addresses of the demo's own.
        let args = vec![
            "--leader-elect".to_owned(),
            format!("--health-bind-address={}", self.health),
            "--shutdown-timeout=25s".to_owned(),
        ];
        self.manager = Some(
            ManagerProcess::spawn(
                &self.tools.manager,
                "platform-operators-manager",
                &self.manager_kubeconfig,
                &args,
                &env,
                self.plane.dir(),
            )
            .await?,
        );
        Ok(())
    }

    /// Stops the manager (SIGTERM, finishing in-flight reconciles); the rest stops on drop.
    pub async fn stop(mut self) {
        if let Some(mut manager) = self.manager.take() {
            manager.signal("TERM");
            let _ = manager.wait_exit(MANAGER_EXIT_TIMEOUT).await;
        }
    }
}

/// Applies [`manifest_files`] with `kubectl apply --server-side` as the admin of
/// `kubeconfig`. Server-side: the CRDs are larger than the annotation a client-side apply
/// writes may be; `--force-conflicts`: the control plane installed the same CRDs already
/// under another field manager.
async fn install_pom(kubectl: &Path, kubeconfig: &Path) -> Result<(), DemoError> {
    let files = manifest_files()?;
    let mut args = vec![
        "apply".to_owned(),
        "--server-side".to_owned(),
        "--force-conflicts".to_owned(),
    ];
    for file in &files {
        args.push("-f".to_owned());
        args.push(file.display().to_string());
    }
    let shown = format!(
        "kubectl apply --server-side --force-conflicts {}",
        files
            .iter()
            .filter_map(|f| f.file_name())
            .map(|f| format!("-f manifests/kubernetes/{}", f.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    println!("pom-demo: installing POM as an admin would:\n  {shown}");
    let out = tokio::process::Command::new(kubectl)
        .args(&args)
        .env("KUBECONFIG", kubeconfig)
        .output()
        .await
        .map_err(|e| DemoError::Tool(format!("running {}: {e}", kubectl.display())))?;
    if !out.status.success() {
        return Err(DemoError::Install {
            command: shown,
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        });
    }
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        println!("  {line}");
    }
    Ok(())
}

/// The minor after `version` (`4.17.0` → `4.18`), as the manager's messages name it.
fn next_minor(version: &str) -> String {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or_default();
    let minor = parts
        .next()
        .and_then(|m| m.parse::<u64>().ok())
        .map_or(0, |m| m + 1);
    format!("{major}.{minor}")
}

/// The bundle `po` waits for the admin to approve (its `status.desiredBundle` while its
/// Installed or Progressing condition says `UpgradePendingApproval`), as `pomctl approve` reads it.
fn waiting_for_approval(po: &PlatformOperator) -> Option<String> {
    let waits = ["Installed", "Progressing"]
        .iter()
        .any(|t| report::po_condition(po, t).is_some_and(|c| c.1 == "UpgradePendingApproval"));
    waits
        .then(|| po.status.as_ref()?.desired_bundle.as_ref())
        .flatten()
        .map(|b| b.name.clone())
}

/// Writes what `pomctl approve PO` writes: `spec.approvedBundle`, by server-side apply of that
/// one field under pomctl's field manager.
async fn approve(client: &Client, po: &str, bundle: &str) -> Result<(), DemoError> {
    let patch = json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "metadata": {"name": po},
        "spec": {"approvedBundle": bundle},
    });
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            po,
            &PatchParams::apply("pomctl-approve").force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(kube_err("writing spec.approvedBundle"))?;
    Ok(())
}

/// Prints the table every 2 s when it changed, and the hop log every 0.5 s, until `done`.
/// With `cvo`, each tick is also one sync of the CVO's loop (which retries a refused request).
async fn watch_until(
    client: &Client,
    cvo: Option<&Cvo>,
    hops: &mut HopLog,
    what: &str,
    timeout: Duration,
    mut done: impl FnMut(
        &[PlatformOperator],
        Option<&pom_api::openshift::ClusterOperator>,
        Option<&ClusterVersion>,
    ) -> bool,
) -> Result<(), DemoError> {
    let started = Instant::now();
    let mut last_table = String::new();
    let mut last_print = Instant::now() - Duration::from_secs(2);
    loop {
        if let Some(cvo) = cvo {
            cvo.sync().await?;
        }
        let pos = report::platform_operators(client).await;
        let co = report::cluster_operator(client).await;
        let cv = Api::<ClusterVersion>::all(client.clone())
            .get_opt(CLUSTER_VERSION_NAME)
            .await
            .ok()
            .flatten();
        hops.observe(&pos);
        let finished = done(&pos, co.as_ref(), cv.as_ref());
        let table = report::render(&pos, co.as_ref());
        if table != last_table && (finished || last_print.elapsed() >= Duration::from_secs(2)) {
            print!("{table}");
            last_table = table;
            last_print = Instant::now();
        }
        if finished {
            return Ok(());
        }
        if started.elapsed() > timeout {
            return Err(DemoError::Timeout {
                what: what.to_owned(),
                seconds: timeout.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn wait_for<F, Fut>(what: &str, mut check: F) -> Result<(), DemoError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let started = Instant::now();
    while check().await.is_none() {
        if started.elapsed() > STEP_TIMEOUT {
            return Err(DemoError::Timeout {
                what: what.to_owned(),
                seconds: STEP_TIMEOUT.as_secs(),
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(())
}

async fn create_catalog(client: &Client, reference: &str) -> Result<(), DemoError> {
    let catalog: Catalog = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog", "metadata": {"name": "demo"},
        "spec": {"source": {"image": {"ref": reference, "pollInterval": "5s"}}}
    }))
    .map_err(|e| HarnessError::Other(format!("building the Catalog: {e}")))?;
    Api::<Catalog>::all(client.clone())
        .patch(
            "demo",
            &PatchParams::apply("pom-demo").force(),
            &Patch::Apply(&catalog),
        )
        .await
        .map_err(kube_err("creating Catalog demo"))?;
    Ok(())
}

async fn create_po(client: &Client, package: &str) -> Result<(), DemoError> {
    let po: PlatformOperator = serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator", "metadata": {"name": package},
        "spec": {"package": {"name": package}}
    }))
    .map_err(|e| HarnessError::Other(format!("building PlatformOperator {package}: {e}")))?;
    Api::<PlatformOperator>::all(client.clone())
        .patch(
            package,
            &PatchParams::apply("pom-demo").force(),
            &Patch::Apply(&po),
        )
        .await
        .map_err(kube_err("creating a PlatformOperator"))?;
    Ok(())
}
