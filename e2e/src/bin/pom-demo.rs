//! `make demo`: a local control plane running POM. (Placeholder until the manager lands: it
//! starts the control plane and registry and says so.)

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let once = std::env::args().any(|a| a == "--once");
    eprintln!("pom-demo: PLACEHOLDER: starts the control plane only; the manager is not wired yet");
    let plane = match pom_e2e::ControlPlane::start(pom_e2e::Workloads::None).await {
        Ok(plane) => plane,
        Err(err) => {
            eprintln!("pom-demo: {err}");
            return std::process::ExitCode::FAILURE;
        }
    };
    println!("export KUBECONFIG={}", plane.kubeconfig_path().display());
    if !once {
        let _ = tokio::signal::ctrl_c().await;
    }
    std::process::ExitCode::SUCCESS
}
