//! Writes the install manifests (`make manifests`): `manifestgen DIR` replaces
//! `DIR/openshift/` and `DIR/kubernetes/` with what `pom_controller::manifests` renders.

use std::path::PathBuf;
use std::process::ExitCode;

use pom_controller::manifests::{Flavor, render};

fn main() -> ExitCode {
    let Some(dir) = std::env::args_os().nth(1).map(PathBuf::from) else {
        eprintln!("usage: manifestgen DIR");
        return ExitCode::from(2);
    };
    match write(&dir) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("manifestgen: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn write(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context as _;
    for flavor in [Flavor::OpenShift, Flavor::Kubernetes] {
        let out = dir.join(flavor.dir());
        // Start clean so a file the generator no longer makes does not linger.
        if out.exists() {
            std::fs::remove_dir_all(&out).with_context(|| format!("removing {}", out.display()))?;
        }
        std::fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
        for file in render(flavor)? {
            let path = out.join(&file.name);
            std::fs::write(&path, file.content)
                .with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}
