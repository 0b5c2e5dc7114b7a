//! `make demo`: a local control plane with POM installed from `manifests/kubernetes/`, its
//! manager binary running under its ServiceAccount, walked through a scripted cluster update
//! (see `docs/demo.md` and [`pom_e2e::demo`]).
//!
//! `--once` (`make demo DEMO_ONCE=1`): no terminal needed; exits 0 once both platform operators
//! are installed and the scripted update completed, non-zero with the reason otherwise (the
//! whole run is bounded by 5 minutes). Without it, the cluster stays up until Ctrl-C.
//! Either way everything it started is stopped and its files removed.

use std::process::ExitCode;
use std::time::{Duration, Instant};

use pom_e2e::demo::{Demo, Tools};

/// The bound of a `--once` run.
const ONCE_TIMEOUT: Duration = Duration::from_secs(300);

#[tokio::main]
async fn main() -> ExitCode {
    let once = std::env::args().any(|a| a == "--once");
    let started = Instant::now();
    println!(
        "pom-demo: starting a control plane (etcd, kube-apiserver, controller-manager, scheduler, kwok) and an OCI registry"
    );
    let tools = match Tools::from_env() {
        Ok(tools) => tools,
        Err(err) => {
            eprintln!("pom-demo: {err}");
            return ExitCode::FAILURE;
        }
    };
    let mut demo = match Demo::start(tools).await {
        Ok(demo) => demo,
        Err(err) => {
            eprintln!("pom-demo: {err}");
            return ExitCode::FAILURE;
        }
    };
    let kubeconfig = demo.kubeconfig_path().display().to_string();
    let exports = format!(
        "  export KUBECONFIG={kubeconfig} POM_DEMO_REGISTRY={}",
        demo.registry_host()
    );
    println!(
        "pom-demo: cluster up and POM installed in {:.1}s; to look around while it runs (README, \"Looking around the demo\"):",
        started.elapsed().as_secs_f32()
    );
    println!("{exports}");
    println!("  pomctl status   # or: kubectl get pop,pocat,co,clusterversion");

    let outcome = if once {
        match tokio::time::timeout(ONCE_TIMEOUT, demo.run(started)).await {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err(format!(
                "the demo did not finish within {}s",
                ONCE_TIMEOUT.as_secs()
            )),
        }
    } else {
        tokio::select! {
            result = demo.run(started) => result.map_err(|e| e.to_string()),
            _ = tokio::signal::ctrl_c() => Err("interrupted".to_owned()),
        }
    };
    let code = match &outcome {
        Ok(()) => {
            println!(
                "\npom-demo: finished in {:.1}s",
                started.elapsed().as_secs_f32()
            );
            ExitCode::SUCCESS
        }
        Err(reason) => {
            eprintln!(
                "\npom-demo: FAILED after {:.1}s: {reason}",
                started.elapsed().as_secs_f32()
            );
            ExitCode::FAILURE
        }
    };
    if !once && outcome.is_ok() {
        println!("pom-demo: the cluster stays up; press Ctrl-C to stop and clean up.");
        println!("{exports}");
        println!("  pomctl status");
        println!("  pomctl plan --to 4.18.0 --insecure-registry \"$POM_DEMO_REGISTRY\"");
        if let Some(log) = demo.manager_log() {
            println!("  tail -f {}   # the manager's log", log.display());
        }
        let _ = tokio::signal::ctrl_c().await;
        println!("pom-demo: stopping");
    }
    demo.stop().await;
    code
}
