//! Placeholder: being written (see issue 3).

use std::process::ExitCode;

/// Flags of `pomctl resolve`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pomctl resolve`.
pub fn run(_args: &Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("pomctl resolve is not implemented yet")
}
