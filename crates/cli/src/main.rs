//! `pomctl`: the admin's view of POM (§9 of the product spec).
//!
//! Exit codes: 0 success; 1 the question has no answer (e.g. no bundle satisfies the
//! constraints, details on stderr); 2 bad input (flags, unreadable or invalid files).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

mod cmd;
mod live;

#[derive(Parser)]
#[command(name = "pomctl", version, about = "Platform Operators Manager CLI")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Resolve a package offline against a file-based catalog (file or folder).
    Resolve(cmd::resolve::Args),
    /// Print the objects POM would apply for a bundle directory, as YAML.
    Render(cmd::render::Args),
    /// Live: what a cluster update to VERSION would do to every PlatformOperator, and whether
    /// Upgradeable would block it (exit 1 when blocked).
    Plan(cmd::plan::Args),
    /// Live: every PlatformOperator and the aggregated ClusterOperator.
    Status(cmd::status::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let outcome = match cli.command {
        Command::Resolve(args) => cmd::resolve::run(&args),
        Command::Render(args) => cmd::render::run(&args),
        Command::Plan(args) => cmd::plan::run(&args),
        Command::Status(args) => cmd::status::run(&args),
    };
    match outcome {
        Ok(code) => code,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::from(2)
        }
    }
}
