//! POM's decisions, pure (gather → **decide** → act → report).
//!
//! A reconcile of a PlatformOperator gathers a [`PoSnapshot`] once (the spec parsed into a
//! [`PoRequest`], the installed bundle, the cluster phase, the catalogs, the operator's gate,
//! the last move, `now`), calls [`decide`], applies the [`Action`], and computes the status from
//! the decision and the [`status::ActOutcome`] with [`status::compute`]. The aggregated
//! ClusterOperator is [`aggregate::compute`] over every PO. `pomctl plan` drives the same
//! [`decide`] over a hypothetical cluster phase (see [`plan`]).
//!
//! This crate has no kube client and no async runtime in its dependencies, on purpose: every
//! function here is a function of its arguments, table- and property-tested.

pub mod adopt;
pub mod aggregate;
pub mod certificates;
pub mod chain;
pub mod clock;
pub mod conditions;
pub mod decide;
pub mod duration;
pub mod hop_powers;
pub mod inventory;
pub mod namespace_clash;
pub mod ownership;
pub mod plan;
pub mod pre_update;
pub mod precheck;
pub mod render_request;
pub mod request;
pub mod serving_roll;
pub mod snapshot;
pub mod soak;
pub mod source_trust;
pub mod status;
pub mod steps;
pub mod webhook_serving;

pub use decide::{
    Action, Held, HoldReason, MoveTarget, PinState, PoDecision, Problem, Upgradeability, decide,
};
pub use request::{PoRequest, RequestError};
pub use snapshot::{
    CatalogContent, CatalogView, ClusterView, GateReading, Hop, Installed, OperatorGate, PoSnapshot,
};
