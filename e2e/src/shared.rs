//! One control plane shared by the tests of a test binary that only read or write their own
//! uniquely named objects (admission tests), so they do not pay the start-up each time.

use tokio::sync::OnceCell;

use crate::{ControlPlane, Workloads};

static SHARED: OnceCell<Option<ControlPlane>> = OnceCell::const_new();

/// The test binary's shared control plane (no workloads), started on first use; `None` when
/// the binaries are missing outside CI (a `SKIPPED` line is written; see [`crate::skip`]).
/// Build a client per test with [`ControlPlane::client`].
///
/// # Panics
/// When the control plane cannot start, and in CI when binaries are missing: e2e never skips
/// silently.
pub async fn shared_control_plane() -> Option<&'static ControlPlane> {
    SHARED
        .get_or_init(|| async {
            crate::binaries::require(crate::binaries::CONTROL_PLANE)?;
            match ControlPlane::start(Workloads::None).await {
                Ok(plane) => Some(plane),
                Err(err) => panic!("starting the shared control plane: {err}"),
            }
        })
        .await
        .as_ref()
}
