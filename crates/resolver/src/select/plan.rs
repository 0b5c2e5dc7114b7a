//! The whole path an update would take, one hop at a time.
//!
//! POM moves one catalog edge per move and waits for each move to settle (§7), so "where will
//! this PO end up, and through which bundles?" is a walk: resolve, pretend the chosen bundle is
//! installed, resolve again, until the answer stays. The controller shows the next hop; `pomctl
//! plan` shows them all before the maintenance window.

use std::collections::BTreeSet;

use super::{ChosenBundle, InstalledBundle, Resolution, ResolveError, ResolveRequest, resolve};
use crate::pin::Pin;

/// One move of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Hop {
    /// What runs before the hop (`None` for the first install).
    pub from: Option<InstalledBundle>,
    /// What runs after it.
    pub to: ChosenBundle,
    /// The pin the hop was chosen under.
    pub pin: Pin,
}

/// How the walk ended.
#[derive(Debug, Clone, PartialEq)]
pub enum PlanEnd {
    /// The last bundle stays: the PO has reached its pin.
    Settled,
    /// A later hop has no candidate: the PO stops at the last hop's bundle, for this reason.
    Blocked(Box<ResolveError>),
    /// The walk came back to a bundle it had already left (a catalog cycle): it stops there.
    Cycle { bundle: String },
    /// More hops than there are bundles: a safety stop that a sane catalog never reaches.
    HopLimit { limit: usize },
}

/// The hops from the installed bundle (or from nothing) to where the PO settles.
#[derive(Debug, Clone, PartialEq)]
pub struct HopPlan {
    /// The first resolution, exactly what [`resolve`] answers for the request (its pin and its
    /// rejections explain the first hop or the stay).
    pub first: Resolution,
    /// Every move, in order; empty when the PO stays.
    pub hops: Vec<Hop>,
    pub end: PlanEnd,
}

impl HopPlan {
    /// Where the PO ends: the last hop's bundle, or the first resolution's when it stays.
    pub fn final_bundle(&self) -> &ChosenBundle {
        self.hops.last().map_or(&self.first.bundle, |hop| &hop.to)
    }
}

/// Walks [`resolve`] from the request's installed bundle until the answer stays.
///
/// The cluster phase, ranges and catalogs are held fixed: this is the path under one cluster
/// update. The walk is bounded by the number of bundles of the package (plus one) and stops on
/// the first revisited bundle, so it terminates on any catalog. The first resolution's error is
/// returned as is; a later one ends the plan with [`PlanEnd::Blocked`].
pub fn plan_hops(req: &ResolveRequest<'_>) -> Result<HopPlan, ResolveError> {
    let first = resolve(req)?;
    let limit = bundle_count(req).saturating_add(1);
    let mut hops = Vec::new();
    let mut visited: BTreeSet<String> = req.installed.iter().map(|i| i.name.clone()).collect();
    let mut current = first.clone();
    let mut step = req.clone();
    loop {
        if current.stays {
            return Ok(HopPlan {
                first,
                hops,
                end: PlanEnd::Settled,
            });
        }
        if hops.len() >= limit {
            return Ok(HopPlan {
                first,
                hops,
                end: PlanEnd::HopLimit { limit },
            });
        }
        let to = current.bundle.clone();
        hops.push(Hop {
            from: step.installed.clone(),
            to: to.clone(),
            pin: current.pin.clone(),
        });
        if !visited.insert(to.name.clone()) {
            return Ok(HopPlan {
                first,
                hops,
                end: PlanEnd::Cycle { bundle: to.name },
            });
        }
        step.installed = Some(InstalledBundle {
            name: to.name,
            version: to.version,
        });
        current = match resolve(&step) {
            Ok(next) => next,
            Err(err) => {
                return Ok(HopPlan {
                    first,
                    hops,
                    end: PlanEnd::Blocked(Box::new(err)),
                });
            }
        };
    }
}

fn bundle_count(req: &ResolveRequest<'_>) -> usize {
    req.catalogs
        .iter()
        .filter_map(|(_, _, catalog)| catalog.packages.get(req.package))
        .map(|package| package.bundles.len())
        .sum()
}
