//! `pomctl plan --to VERSION` across more than one minor (issue 35 item 2): 4.16 → 4.19 walks
//! 4.17 and 4.18 (or the versions `--via` names, for EUS-to-EUS paths), and shows for each
//! step and each PlatformOperator the hops before the cluster moves (`spec.preUpdateHops`),
//! whether the PO would block the step, and the hops during the update; and the first step at
//! which a PO has no path, so the admin learns it before the maintenance window.
//!
//! Pure once gathered: [`pom_policy::chain::chain`] per PO (the manager's `decide`, driven
//! step by step). As for a single update, each move is taken to settle at once and each
//! approval as given (marked "needs approval"); the operators' real gates are read only for
//! the first step. Intermediate minors are planned at `X.Y.0`: the patch the CVO's graph
//! offers is not known offline, and `maxOpenShiftVersion` judges minors only.

use std::process::ExitCode;

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use pom_policy::chain::{self, ChainedPlan};
use pom_policy::plan::PlannedHop;
use pom_resolver::cluster::{PhaseKind, cluster_phase};
use semver::Version;
use serde::Serialize;

use super::plan::{HopView, Inputs, po_snapshot, snapshot};

/// The chained plan, as printed with `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Chain {
    /// The last completed version.
    pub current: String,
    /// Each update of the chain, in order (`from → to`).
    pub steps: Vec<String>,
    pub platform_operators: Vec<PoChain>,
    /// The first step some PO would block, and which.
    pub first_blocked: Option<FirstBlocked>,
}

/// The first step a PO would block.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct FirstBlocked {
    pub step: String,
    pub platform_operator: String,
}

/// One PlatformOperator along the chain.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoChain {
    pub name: String,
    /// Every step it gets through, and the one it blocks (its last).
    pub steps: Vec<PoStep>,
}

/// One PlatformOperator in one update of the chain.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoStep {
    pub from: String,
    pub to: String,
    /// The CVO runs this update already (the chain's first step, mid-update): no hop before it.
    pub in_flight: bool,
    /// Hops before the cluster moves (while it stays at `from`).
    pub pre_update_hops: Vec<HopView>,
    /// Why the PO would block this update (its `Upgradeable=False` message).
    pub blocks: Option<String>,
    /// Hops during the update.
    pub hops: Vec<HopView>,
    /// Where the PO runs once this step is done.
    pub bundle: Option<String>,
}

/// Whether `--to` (with `--via`) asks for a chain: intermediate versions named, or more than
/// one minor from the version the cluster heads to.
#[must_use]
pub fn is_chain(desired: &Version, target: &Version, via: &[Version]) -> bool {
    !via.is_empty() || (target.major == desired.major && target.minor > desired.minor + 1)
}

/// The chained plan to `target` through `via` (pure: everything comes from `inputs`).
///
/// # Errors
/// When the ClusterVersion cannot be judged.
pub fn compute(inputs: &Inputs, target: &Version, via: &[Version]) -> anyhow::Result<Chain> {
    let live = snapshot(&inputs.cluster_version)?;
    let now = cluster_phase(&live).context("reading the cluster's current version")?;
    let current = now.current.clone();
    // An update in flight is the chain's first step (review M3): the CVO heads to
    // `status.desired`, and the next steps go on from there, as `is_chain` judged.
    let in_flight = (now.kind != PhaseKind::Steady).then(|| now.target.clone());
    let heads_to = in_flight.clone().unwrap_or_else(|| current.clone());
    let steps: Vec<Version> = in_flight
        .iter()
        .cloned()
        .chain(if via.is_empty() {
            chain::minor_steps(&heads_to, target)
        } else {
            via.iter().cloned().chain([target.clone()]).collect()
        })
        .filter(|step| step.cmp_precedence(&heads_to).is_gt() || Some(step) == in_flight.as_ref())
        .collect();
    let at = Timestamp::now();
    let mut platform_operators = Vec::new();
    let mut first_blocked: Option<(usize, String)> = None;
    for po in &inputs.platform_operators {
        let planned = chain::chain(&po_snapshot(po, inputs, &now, at), &current, &steps);
        if let Some(index) = planned.steps.iter().position(|s| s.blocks.is_some())
            && first_blocked
                .as_ref()
                .is_none_or(|(first, _)| index < *first)
        {
            first_blocked = Some((index, po.name_any()));
        }
        platform_operators.push(PoChain {
            name: po.name_any(),
            steps: po_steps(&planned),
        });
    }
    let labels: Vec<String> = std::iter::once(&current)
        .chain(&steps)
        .collect::<Vec<_>>()
        .windows(2)
        .map(|pair| format!("{} → {}", pair[0], pair[1]))
        .collect();
    Ok(Chain {
        current: current.to_string(),
        first_blocked: first_blocked.map(|(index, po)| FirstBlocked {
            step: labels[index].clone(),
            platform_operator: po,
        }),
        steps: labels,
        platform_operators,
    })
}

fn po_steps(planned: &ChainedPlan) -> Vec<PoStep> {
    planned
        .steps
        .iter()
        .map(|step| PoStep {
            from: step.from.to_string(),
            to: step.to.to_string(),
            in_flight: step.before.is_none(),
            pre_update_hops: hop_views(step.before_hops()),
            blocks: step.blocks.clone(),
            hops: step
                .during
                .as_ref()
                .map(|walk| hop_views(&walk.hops))
                .unwrap_or_default(),
            bundle: step.last().map(|b| b.name.clone()),
        })
        .collect()
}

fn hop_views(hops: &[PlannedHop]) -> Vec<HopView> {
    hops.iter().map(HopView::from).collect()
}

/// The chain for people: each step, each PO's hops before and during it, and the first step
/// a PO would block.
#[must_use]
pub fn human(chain: &Chain) -> String {
    let mut out = format!(
        "Chained update from {} ({} steps): {}\n",
        chain.current,
        chain.steps.len(),
        chain.steps.join(", ")
    );
    for (index, step) in chain.steps.iter().enumerate() {
        out.push_str(&format!("\n{step}\n"));
        for po in &chain.platform_operators {
            let Some(s) = po.steps.get(index) else {
                out.push_str(&format!(
                    "  {}: not planned (blocked at an earlier step)\n",
                    po.name
                ));
                continue;
            };
            out.push_str(&format!("  {}:\n", po.name));
            if s.in_flight {
                out.push_str("    before the update: none (the update is in progress)\n");
            } else {
                out.push_str(&format!(
                    "    before the update: {}\n",
                    hops_text(&s.pre_update_hops)
                ));
            }
            match &s.blocks {
                Some(why) => out.push_str(&format!("    BLOCKS the update: {why}\n")),
                None => {
                    out.push_str(&format!("    during the update: {}\n", hops_text(&s.hops)));
                    if let Some(bundle) = &s.bundle {
                        out.push_str(&format!("    runs then: {bundle}\n"));
                    }
                }
            }
        }
    }
    match &chain.first_blocked {
        Some(first) => out.push_str(&format!(
            "\nFirst blocked: {} by PlatformOperator {}; the chain cannot go past it until that PO has a path (see above)\n",
            first.step, first.platform_operator
        )),
        None => out.push_str("\nNo PlatformOperator blocks any step of the chain\n"),
    }
    out
}

fn hops_text(hops: &[HopView]) -> String {
    if hops.is_empty() {
        return "none".to_owned();
    }
    hops.iter()
        .map(|h| match (h.in_flight, h.needs_approval) {
            (true, _) => format!("{} (in flight)", h.to),
            (false, true) => format!("{} (needs approval)", h.to),
            (false, false) => h.to.clone(),
        })
        .collect::<Vec<_>>()
        .join(" → ")
}

/// Prints the chain in `output`'s format; exit 1 when a PO blocks a step.
///
/// # Errors
/// When the output cannot be serialised.
pub fn print(chain: &Chain, output: super::plan::PlanOutput) -> anyhow::Result<ExitCode> {
    use super::plan::PlanOutput;
    match output {
        PlanOutput::Human | PlanOutput::Graph => print!("{}", human(chain)),
        PlanOutput::Json => println!("{}", serde_json::to_string_pretty(chain)?),
        PlanOutput::Yaml => print!("{}", serde_saphyr::to_string(chain)?),
    }
    Ok(if chain.first_blocked.is_some() {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}
