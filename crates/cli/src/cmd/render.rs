//! Placeholder: being written (see issue 3).

use std::process::ExitCode;

/// Flags of `pomctl render`.
#[derive(clap::Args)]
pub struct Args {}

/// Runs `pomctl render`.
pub fn run(_args: &Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("pomctl render is not implemented yet")
}
