//! `pomctl graph` (§9): the channel's upgrade graph for an offline resolution, with the
//! installed bundle, the pin's window, the hops POM would take and every other bundle marked
//! with the resolver's reason for not going there.
//!
//! It asks the question `pomctl resolve` asks (same flags, same request: [`Offline`]), walks it
//! with the resolver's [`plan_hops`] (the whole path under one cluster phase, as `pomctl plan`
//! shows it) and draws the answer ([`crate::graph`]). `opm alpha render-graph` draws the
//! channel; this draws what POM would do on it.
//!
//! Exit codes: 0 the graph was drawn (also when no bundle can be chosen: the drawing says
//! why); 2 bad input (unreadable catalog, unknown package or channel, bad version or range) or
//! `-o svg` without Graphviz.

use std::ffi::OsStr;
use std::io::Write as _;
use std::process::ExitCode;

use anyhow::bail;
use pom_resolver::select::{PlanEnd, ResolveError, plan_hops};

use crate::cmd::resolve::{Offline, Query};
use crate::graph::{self, HopTo, Stop, UpgradeGraph, dot, mermaid, svg};

/// Flags of `pomctl graph`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub query: Query,
    /// Drawing format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Format::Mermaid)]
    pub output: Format,
}

/// Drawing formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Mermaid flowchart text (renders on GitHub in a ```mermaid block).
    Mermaid,
    /// Graphviz DOT text.
    Dot,
    /// SVG, through Graphviz's `dot` (must be on PATH).
    Svg,
}

/// The Graphviz program `-o svg` runs.
const DOT_PROGRAM: &str = "dot";

/// Runs `pomctl graph`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let offline = Offline::load(&args.query)?;
    let graph = offline_graph(&offline)?;
    emit(&[graph], args.output)?;
    Ok(ExitCode::SUCCESS)
}

/// The graph for an offline question: the resolver's walk, drawn.
///
/// # Errors
/// The resolver's errors other than "no candidate" (unknown package or channel).
pub fn offline_graph(offline: &Offline) -> anyhow::Result<UpgradeGraph> {
    let catalogs = offline.catalogs();
    let request = offline.request(&catalogs);
    let (hops, stop) = match plan_hops(&request) {
        Ok(plan) => {
            let hops = plan
                .hops
                .iter()
                .map(|hop| HopTo {
                    name: hop.to.name.clone(),
                    version: hop.to.version.clone(),
                })
                .collect();
            (hops, stop_of(plan.end))
        }
        Err(ResolveError::NoCandidate { .. }) => (Vec::new(), Stop::NoCandidate),
        Err(err) => bail!(err),
    };
    Ok(graph::for_request(
        offline.package.clone(),
        &request,
        &hops,
        stop,
    )?)
}

fn stop_of(end: PlanEnd) -> Stop {
    match end {
        PlanEnd::Settled => Stop::Settled,
        PlanEnd::Blocked(err) => match *err {
            ResolveError::NoCandidate { .. } => Stop::NoCandidate,
            other => Stop::Blocked {
                why: other.to_string(),
            },
        },
        PlanEnd::Cycle { bundle } => Stop::Cycle { bundle },
        PlanEnd::HopLimit { .. } => Stop::HopLimit,
    }
}

/// Prints `graphs` in `format` on stdout (shared with `pomctl plan -o graph`).
///
/// # Errors
/// `-o svg` without Graphviz (or Graphviz failing); a closed stdout.
pub fn emit(graphs: &[UpgradeGraph], format: Format) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match format {
        Format::Mermaid => stdout.write_all(mermaid::render(graphs).as_bytes())?,
        Format::Dot => stdout.write_all(dot::render(graphs).as_bytes())?,
        Format::Svg => {
            let svg = svg::render(&dot::render(graphs), OsStr::new(DOT_PROGRAM))?;
            stdout.write_all(&svg)?;
        }
    }
    stdout.flush()?;
    Ok(())
}
