//! `pomctl completions SHELL`: shell completion scripts, generated from the same clap
//! definition that parses the flags, so they cannot go stale.

use std::process::ExitCode;

use clap_complete::Shell;

/// Flags of `pomctl completions`.
#[derive(clap::Args)]
pub struct Args {
    /// The shell to complete for (e.g. `source <(pomctl completions bash)`).
    #[arg(value_enum)]
    pub shell: Shell,
}

/// Prints the completion script for `args.shell` on stdout.
pub fn run(args: &Args, mut command: clap::Command) -> ExitCode {
    let name = command.get_name().to_owned();
    clap_complete::generate(args.shell, &mut command, name, &mut std::io::stdout());
    ExitCode::SUCCESS
}
