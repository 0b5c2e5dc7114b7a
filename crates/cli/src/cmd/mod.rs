//! One module per `pomctl` subcommand.

pub mod render;
pub mod resolve;
