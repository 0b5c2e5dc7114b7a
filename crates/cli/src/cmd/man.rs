//! `pomctl man [--out DIR]`: man pages (roff), generated from the clap definition.
//!
//! Without `--out` the page of `pomctl` itself goes to stdout (`pomctl man | man -l -`); with
//! it, one page per subcommand is written too (`pomctl.1`, `pomctl-graph.1`, ...), for
//! packagers.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;

/// Flags of `pomctl man`.
#[derive(clap::Args)]
pub struct Args {
    /// Write every page (pomctl.1 and one per subcommand) into this directory.
    #[arg(long, value_name = "DIR")]
    pub out: Option<PathBuf>,
}

/// Writes the pages.
pub fn run(args: &Args, command: clap::Command) -> anyhow::Result<ExitCode> {
    match &args.out {
        Some(dir) => {
            std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
            clap_mangen::generate_to(command, dir)
                .with_context(|| format!("writing man pages into {}", dir.display()))?;
        }
        None => clap_mangen::Man::new(command)
            .render(&mut std::io::stdout())
            .context("writing the man page")?,
    }
    Ok(ExitCode::SUCCESS)
}
