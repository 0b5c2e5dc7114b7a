//! One module per `pomctl` subcommand.

pub mod plan;
pub mod render;
pub mod resolve;
pub mod status;
