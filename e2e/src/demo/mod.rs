//! `make demo`: POM managing two platform operators through a scripted cluster update, on a
//! local control plane (simulated workloads) with a loopback OCI registry and the simulated
//! CVO. See `docs/demo.md` for what it shows and how to explore it.
//!
//! The script: publish bundle images and a catalog image; run the manager in-process; create
//! a Catalog (image source) and two PlatformOperators; install ClusterVersion at 4.16.3; wait
//! until both are installed; publish newer bundles; ask for 4.17.0 (refused while a bundle
//! does not support 4.17); update to 4.16.4 (a patch: POs move within their minor, which lifts
//! the block); update to 4.17.0 (a minor: POs move within their major).
//!
//! Each update plays the CVO's rollout of the new payload: once POM has taken the update's
//! pins, the manager is restarted with `release_version` = the target, as the CVO would roll
//! out the new POM image with the new `RELEASE_VERSION`; the update completes when the
//! aggregated ClusterOperator reports that version (only once every PO reached its pin),
//! Available=True and Degraded=False.

mod report;
pub mod sample;

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pom_api::{Catalog, PlatformOperator};
use serde_json::json;

use crate::cvo::{Cvo, CvoError, Progress};
use crate::manager::Manager;
use crate::{ControlPlane, HarnessError, Registry, Workloads};
use report::HopLog;

/// The cluster version the demo installs, and the two updates it scripts.
pub const INITIAL_VERSION: &str = "4.16.3";
pub const PATCH_VERSION: &str = "4.16.4";
pub const MINOR_VERSION: &str = "4.17.0";

/// How long one wait (installs, pins, an update) may take before the demo gives up.
const STEP_TIMEOUT: Duration = Duration::from_secs(150);
/// How long to wait for a message the demo only points out (not needed to go on).
const ADVICE_TIMEOUT: Duration = Duration::from_secs(30);

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
}

fn kube_err(what: &str) -> impl FnOnce(kube::Error) -> DemoError + '_ {
    move |source| DemoError::Kube {
        what: what.to_owned(),
        source,
    }
}

/// What `pom-demo` was asked for.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// Exit once the script is done instead of waiting for Ctrl-C.
    pub once: bool,
}

/// Everything the demo runs; dropping it stops the manager, the registry and the control
/// plane (in that order) and removes their files.
pub struct Demo {
    manager: Option<Manager>,
    registry: Registry,
    plane: ControlPlane,
}

impl Demo {
    /// Starts the control plane and the registry.
    ///
    /// # Errors
    /// When a binary is missing or a process does not come up.
    pub async fn start() -> Result<Self, DemoError> {
        let plane = ControlPlane::start(Workloads::Simulated).await?;
        let registry = Registry::start().await?;
        Ok(Self {
            manager: None,
            registry,
            plane,
        })
    }

    /// The admin kubeconfig of the demo cluster.
    #[must_use]
    pub fn kubeconfig_path(&self) -> &std::path::Path {
        self.plane.kubeconfig_path()
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
            "ClusterVersion at {INITIAL_VERSION} (simulated CVO; payload: the aggregated ClusterOperator)"
        ));
        let cvo = Cvo::install(
            client.clone(),
            INITIAL_VERSION,
            &[pom_api::openshift::AGGREGATED_CLUSTER_OPERATOR],
        )
        .await?;

        step(&format!(
            "manager running in-process (release version {INITIAL_VERSION}); Catalog and PlatformOperators created"
        ));
        self.restart_manager(&client, INITIAL_VERSION).await;
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
            &mut hops,
            "both PlatformOperators Installed and the ClusterOperator reporting",
            STEP_TIMEOUT,
            |pos, co| {
                let installed = pos.len() == sample::PACKAGES.len()
                    && pos.iter().all(|po| {
                        report::po_condition(po, "Installed").is_some_and(|c| c.0 == "True")
                    });
                installed && co.and_then(report::co_version).as_deref() == Some(INITIAL_VERSION)
            },
        )
        .await?;

        step(
            "the publisher ships newer bundles (catalog stage 2, same tag); steady pins keep every PO still",
        );
        let digest = sample::push_catalog_stage(&host, &images, 2).await?;
        println!("  catalog now {digest}");
        wait_for("the manager to serve catalog stage 2", || async {
            let catalog = Api::<Catalog>::all(client.clone())
                .get_opt("demo")
                .await
                .ok()
                .flatten()?;
            (catalog.status?.resolved_source? == digest).then_some(())
        })
        .await?;
        // The advice in the message names the bundle that lifts the block once the manager has
        // judged the new content.
        let advised = watch_until(
            &client,
            &mut hops,
            "the ClusterOperator to say Upgradeable=False and name demo-metrics.v2.3.1 as the way out",
            ADVICE_TIMEOUT,
            |_, co| {
                co.and_then(|co| report::co_condition(co, "Upgradeable"))
                    .is_some_and(|c| c.0 == "False" && c.2.contains("demo-metrics.v2.3.1"))
            },
        )
        .await;
        if let Err(err) = advised {
            println!("  NOTE: {err}; going on");
        }

        step(&format!(
            "admin asks for {MINOR_VERSION} now: the CVO refuses a minor update while Upgradeable=False"
        ));
        match cvo.start_update(MINOR_VERSION).await {
            Err(err @ CvoError::Refused { .. }) => println!("  refused, as expected:\n    {err}"),
            Err(err) => return Err(err.into()),
            Ok(kind) => {
                println!(
                    "  NOTE: the CVO accepted the {kind} update although a bundle supports only 4.16; following it through"
                );
                self.follow_update(&client, &cvo, &mut hops, MINOR_VERSION, "MinorUpgrade")
                    .await?;
                return Ok(());
            }
        }

        step(&format!(
            "patch update {INITIAL_VERSION} -> {PATCH_VERSION}: allowed whatever Upgradeable says; POs may move within their minor"
        ));
        cvo.start_update(PATCH_VERSION).await?;
        self.follow_update(&client, &cvo, &mut hops, PATCH_VERSION, "PatchUpgrade")
            .await?;

        step(&format!(
            "minor update {PATCH_VERSION} -> {MINOR_VERSION}: POs may move within their major"
        ));
        watch_until(
            &client,
            &mut hops,
            "the ClusterOperator to say Upgradeable=True",
            STEP_TIMEOUT,
            |_, co| {
                co.and_then(|co| report::co_condition(co, "Upgradeable"))
                    .is_some_and(|c| c.0 == "True")
            },
        )
        .await?;
        cvo.start_update(MINOR_VERSION).await?;
        self.follow_update(&client, &cvo, &mut hops, MINOR_VERSION, "MinorUpgrade")
            .await?;

        step("done: the cluster and both platform operators are updated");
        let pos = report::platform_operators(&client).await;
        print!(
            "{}",
            report::render(&pos, report::cluster_operator(&client).await.as_ref())
        );
        println!("moves observed:");
        for (po, from, to) in &hops.moves {
            println!("  {po}: {} -> {to}", from.as_deref().unwrap_or("nothing"));
        }
        Ok(())
    }

    /// Waits for POM to take the update's pins, plays the CVO's rollout of the new manager,
    /// then waits for the CVO to complete the update.
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
            hops,
            &format!("every PO to take a {pin_reason} pin"),
            STEP_TIMEOUT,
            |pos, _| {
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
            "  the CVO rolls out the new payload: manager restarted with release version {version}"
        );
        self.restart_manager(client, version).await;
        let deadline = Instant::now() + STEP_TIMEOUT;
        let mut last = String::new();
        loop {
            let pos = report::platform_operators(client).await;
            hops.observe(&pos);
            match cvo.try_complete().await? {
                Progress::Completed(v) | Progress::Steady(v) => {
                    println!("  CVO: update to {v} Completed");
                    let co = report::cluster_operator(client).await;
                    print!("{}", report::render(&pos, co.as_ref()));
                    return Ok(());
                }
                Progress::Waiting(waiting) => {
                    let text = waiting.join("; ").replace('\n', " | ");
                    if text != last {
                        println!("  CVO waiting: {text}");
                        last = text;
                    }
                    if Instant::now() > deadline {
                        return Err(DemoError::Timeout {
                            what: format!("the update to {version} ({last})"),
                            seconds: STEP_TIMEOUT.as_secs(),
                        });
                    }
                }
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    async fn restart_manager(&mut self, client: &Client, release_version: &str) {
        if let Some(old) = self.manager.take() {
            old.stop().await;
        }
        let mut settings = Manager::test_settings(vec![self.registry.host()]);
        settings.release_version = release_version.to_owned();
        self.manager = Some(Manager::start(client.clone(), settings));
    }

    /// Stops the manager (finishing in-flight reconciles); the rest stops on drop.
    pub async fn stop(mut self) {
        if let Some(manager) = self.manager.take() {
            manager.stop().await;
        }
    }
}

/// Prints the table every 2 s when it changed, and the hop log every 0.5 s, until `done`.
async fn watch_until(
    client: &Client,
    hops: &mut HopLog,
    what: &str,
    timeout: Duration,
    done: impl Fn(&[PlatformOperator], Option<&pom_api::openshift::ClusterOperator>) -> bool,
) -> Result<(), DemoError> {
    let started = Instant::now();
    let mut last_table = String::new();
    let mut last_print = Instant::now() - Duration::from_secs(2);
    loop {
        let pos = report::platform_operators(client).await;
        let co = report::cluster_operator(client).await;
        hops.observe(&pos);
        let finished = done(&pos, co.as_ref());
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
