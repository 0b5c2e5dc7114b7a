//! Writes POM's CRDs to stdout as multi-document YAML (`make crds` saves it to `crds/`).

fn main() -> std::process::ExitCode {
    match pom_api::crds_yaml(&pom_api::crds()) {
        Ok(yaml) => {
            print!("{yaml}");
            std::process::ExitCode::SUCCESS
        }
        Err(err) => {
            eprintln!("crdgen: cannot serialise the CRDs: {err}");
            std::process::ExitCode::FAILURE
        }
    }
}
