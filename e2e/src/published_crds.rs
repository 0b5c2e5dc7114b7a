//! CRDs as their owners publish them, fetched from the Go module proxy into the cache by a
//! script of `e2e/tools` (never committed), found and installed here. One [`CrdSet`] per
//! script: OLM v0's kinds ([`OLM_V0`], for adoption) and the platform's monitoring and console
//! kinds real bundles ship beside their operator ([`PLATFORM`]).

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::wait::{await_condition, conditions};
use kube::{Client, ResourceExt};

use crate::HarnessError;

/// A set of published CRDs: where the cache keeps them, the files, and the script that fetches
/// them.
#[derive(Debug)]
pub struct CrdSet {
    /// What the set is, for messages.
    pub what: &'static str,
    /// The environment variable that names the folder instead of the cache.
    pub env: &'static str,
    /// The cache folder's name under `<cache>/crds`, with `{NAME}` replaced by the pinned
    /// version `NAME` of `e2e/tools/versions.env`.
    pub folder: &'static str,
    /// The files of the set.
    pub files: &'static [&'static str],
    /// The script that fills the folder.
    pub script: &'static str,
}

/// OLM v0's Subscription, ClusterServiceVersion, OperatorGroup, InstallPlan and CatalogSource
/// (operator-framework/api).
pub const OLM_V0: CrdSet = CrdSet {
    what: "OLM v0's CRDs",
    env: "POM_TEST_OLM_V0_CRDS_DIR",
    folder: "olm-v0-api-{OLM_API_VERSION}",
    files: &[
        "operators.coreos.com_subscriptions.yaml",
        "operators.coreos.com_clusterserviceversions.yaml",
        "operators.coreos.com_operatorgroups.yaml",
        "operators.coreos.com_installplans.yaml",
        "operators.coreos.com_catalogsources.yaml",
    ],
    script: "e2e/tools/olm-v0-crds.sh",
};

/// The monitoring (prometheus-operator) and console (openshift/api) kinds an OpenShift cluster
/// serves and real bundles ship.
pub const PLATFORM: CrdSet = CrdSet {
    what: "the platform's monitoring and console CRDs",
    env: "POM_TEST_PLATFORM_CRDS_DIR",
    folder: "platform-prometheus-operator-{PROMETHEUS_OPERATOR_VERSION}-openshift-api-{OPENSHIFT_API_VERSION}",
    files: &[
        "monitoring.coreos.com_servicemonitors.yaml",
        "monitoring.coreos.com_podmonitors.yaml",
        "monitoring.coreos.com_prometheusrules.yaml",
        "console.openshift.io_consolequickstarts.yaml",
        "console.openshift.io_consoleyamlsamples.yaml",
        "console.openshift.io_consoleclidownloads.yaml",
        "console.openshift.io_consolelinks.yaml",
        "console.openshift.io_consoleplugins.yaml",
    ],
    script: "e2e/tools/platform-crds.sh",
};

impl CrdSet {
    /// The set's folder: its environment variable, else the cache folder its script fills.
    ///
    /// # Errors
    /// A pinned version missing from `versions.env`, or a file not there (run the script).
    pub fn dir(&self) -> Result<PathBuf, HarnessError> {
        let dir = match std::env::var_os(self.env) {
            Some(dir) => PathBuf::from(dir),
            None => crate::binaries::cache_root()
                .join("crds")
                .join(self.folder_name()?),
        };
        let missing: Vec<&str> = self
            .files
            .iter()
            .copied()
            .filter(|f| !dir.join(f).is_file())
            .collect();
        if missing.is_empty() {
            Ok(dir)
        } else {
            Err(HarnessError::Other(format!(
                "{} are missing from {} ({}): run `bash {}`",
                self.what,
                dir.display(),
                missing.join(", "),
                self.script
            )))
        }
    }

    /// [`CrdSet::dir`], or `None` when the test must skip (a failure in CI).
    #[must_use]
    pub fn require(&self) -> Option<PathBuf> {
        match self.dir() {
            Ok(dir) => Some(dir),
            Err(err) => {
                crate::skip::skip(&err.to_string());
                None
            }
        }
    }

    /// Installs the set's CRDs from `dir` and waits until each is Established.
    ///
    /// # Errors
    /// A file that is not a CRD, or a CRD the API server refuses.
    pub async fn install(&self, client: &Client, dir: &Path) -> Result<(), HarnessError> {
        let api: Api<CustomResourceDefinition> = Api::all(client.clone());
        for file in self.files {
            let path = dir.join(file);
            let text = std::fs::read_to_string(&path)
                .map_err(HarnessError::io(format!("reading {}", path.display())))?;
            let crd: CustomResourceDefinition = serde_saphyr::from_str(&text)
                .map_err(|e| HarnessError::Other(format!("{}: {e}", path.display())))?;
            let name = crd.name_any();
            api.patch(
                &name,
                &PatchParams::apply("pom-e2e").force(),
                &Patch::Apply(&crd),
            )
            .await
            .map_err(HarnessError::kube(format!("applying CRD {name}")))?;
            tokio::time::timeout(
                Duration::from_secs(60),
                await_condition(api.clone(), &name, conditions::is_crd_established()),
            )
            .await
            .map_err(|_| HarnessError::Other(format!("CRD {name} not Established")))?
            .map_err(|e| HarnessError::Other(format!("waiting for CRD {name}: {e}")))?;
        }
        Ok(())
    }

    fn folder_name(&self) -> Result<String, HarnessError> {
        let mut name = String::new();
        let mut rest = self.folder;
        while let Some(open) = rest.find('{') {
            let close = rest[open..]
                .find('}')
                .map(|c| open + c)
                .ok_or_else(|| HarnessError::Other(format!("bad folder {}", self.folder)))?;
            name.push_str(&rest[..open]);
            name.push_str(&crate::binaries::version(&rest[open + 1..close])?);
            rest = &rest[close + 1..];
        }
        name.push_str(rest);
        Ok(name)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    #[test]
    fn a_folder_names_each_pinned_version() {
        let name = PLATFORM.folder_name().unwrap();
        assert!(
            name.starts_with("platform-prometheus-operator-0."),
            "{name}"
        );
        assert!(name.contains("-openshift-api-0.0.0-"), "{name}");
        assert!(!name.contains('{'), "{name}");
        let olm = OLM_V0.folder_name().unwrap();
        assert_eq!(
            olm,
            format!(
                "olm-v0-api-{}",
                crate::binaries::version("OLM_API_VERSION").unwrap()
            )
        );
    }
}
