//! The e2e harness: a real Kubernetes control plane for POM's tests.
//!
//! [`ControlPlane::start`] launches etcd and kube-apiserver (built from the Go module proxy by
//! `e2e/tools/build-binaries.sh`, never committed) on free 127.0.0.1 ports with certificates
//! generated per run, installs POM's CRDs and the OpenShift/OLM CRDs POM talks to, and hands
//! out `kube::Client`s. With [`Workloads::Simulated`] it also runs kube-controller-manager,
//! kube-scheduler and kwok with one simulated node, so Deployments really roll out to
//! `Available`. [`Registry`] starts an OCI registry on loopback.
//!
//! Binaries are found through `POM_TEST_BIN_DIR` (set by the Makefile) or the build script's
//! cache directory. When they (or `../shared/testdata`) are missing, [`binaries::require`]
//! fails the test in CI, naming what is missing, and elsewhere skips it with a `SKIPPED` line
//! libtest does not capture (see [`skip`]). "Nothing happened" is proven with a
//! [`quiet::QuietWindow`].

pub mod binaries;
mod certs;
pub mod chaos;
mod control_plane;
pub mod cvo;
pub mod demo;
mod error;
pub mod event_log;
pub mod fixtures;
pub mod floor;
pub mod forward_proxy;
pub mod manager;
pub mod manager_process;
pub mod oci_publish;
pub mod olm_v0;
pub mod pomctl;
pub mod process;
pub mod published_crds;
pub mod quiet;
pub mod real_install;
mod registry;
pub mod scenario;
mod shared;
pub mod shipped;
pub mod skip;
pub mod watch_log;
pub mod webhook_server;

pub use control_plane::{ControlPlane, LOOPBACK_SERVICE_CIDR, Workloads};
pub use error::HarnessError;
pub use registry::Registry;
pub use shared::shared_control_plane;

/// Path of the repository's `shared/testdata` folder (next to the checkout), if present.
#[must_use]
pub fn shared_testdata() -> Option<std::path::PathBuf> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/testdata");
    path.is_dir().then_some(path)
}
