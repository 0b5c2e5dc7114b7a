//! One module per `pomctl` subcommand.

pub mod adopt;
pub mod approve;
pub mod completions;
pub mod graph;
pub mod man;
pub mod plan;
pub mod plan_chain;
pub mod render;
pub mod resolve;
pub mod status;
