//! The PlatformOperator reconciler: gather → decide (`pom-policy`) → act (fetch, render,
//! apply, prune, wait) → report (§8.1), with drift repair and a cleanup finalizer.

mod announce;
mod first_checks;
pub mod gather;
mod install;
mod objects;
mod operator_condition;
mod pipeline;
mod quiet;
mod reconcile;
mod seen_clock;
mod served_apis;
pub(crate) mod webhook_certs;
mod webhook_endpoints;

pub use install::is_rolled_out;
pub use objects::{KindCache, PRUNABLE_KINDS, is_subset, label};
pub use pom_api::labels::label_value;
pub use reconcile::run;
pub use webhook_certs::CertError;
