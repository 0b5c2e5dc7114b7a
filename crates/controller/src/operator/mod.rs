//! The PlatformOperator reconciler: resolve (§5) → fetch → render → apply → prune → wait →
//! status (§8.1), with drift repair and a cleanup finalizer.

mod install;
mod objects;
mod operator_condition;
mod reconcile;
pub mod snapshot;
pub mod status;

pub use objects::{KindCache, PRUNABLE_KINDS, is_subset, label_value};
pub use reconcile::run;
