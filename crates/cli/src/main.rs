//! `pomctl`: the admin's view of POM (§9 of the product spec).
//!
//! Exit codes: 0 success; 1 the question has no answer (e.g. no bundle satisfies the
//! constraints, details on stderr); 2 bad input (flags, unreadable or invalid files).

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod cmd;
mod graph;
mod live;
mod version;

// The one policy for tests reading ../shared (fail in CI, skip visibly elsewhere).
#[cfg(test)]
#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

#[derive(Parser)]
#[command(
    name = "pomctl",
    version,
    long_version = version::LONG_VERSION,
    about = "Platform Operators Manager CLI"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Resolve a package offline against a file-based catalog (file or folder).
    Resolve(cmd::resolve::Args),
    /// Draw a channel's upgrade graph with what POM would do on it: the installed bundle, the
    /// pin's window, the hops and why every other bundle is refused (Mermaid, DOT or SVG).
    Graph(cmd::graph::Args),
    /// Print the objects POM would apply for a bundle directory, as YAML.
    Render(cmd::render::Args),
    /// Live: what a cluster update to VERSION would do to every PlatformOperator, and whether
    /// Upgradeable would block it (exit 1 when blocked).
    Plan(cmd::plan::Args),
    /// Live: every PlatformOperator and the aggregated ClusterOperator.
    Status(cmd::status::Args),
    /// Live: approve the move a PlatformOperator waits for under `spec.upgradeApproval: Manual`
    /// (writes `spec.approvedBundle`; exit 1 when it waits for nothing).
    Approve(cmd::approve::Args),
    /// Live: which operators OLM v0 installed POM could adopt, and why not the others;
    /// `--subscription NS/NAME` prints the PlatformOperator that would adopt one (writes
    /// nothing).
    Adopt(cmd::adopt::Args),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions(cmd::completions::Args),
    /// Print the man page, or write every page into a directory with --out.
    Man(cmd::man::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Resolve(args) => cmd::resolve::run(&args),
        Command::Graph(args) => cmd::graph::run(&args),
        Command::Render(args) => cmd::render::run(&args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Status(args) => cmd::status::run(&args),
        Command::Approve(args) => cmd::approve::run(&args),
        Command::Adopt(args) => cmd::adopt::run(&args),
        Command::Completions(args) => Ok(cmd::completions::run(&args, Cli::command())),
        Command::Man(args) => cmd::man::run(&args, Cli::command()),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
