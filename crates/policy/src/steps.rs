//! The PlatformOperator reconcile as a list of named steps (gather → decide → **plan** → act →
//! report).
//!
//! [`plan`] turns a decision and what the PO's status records into the ordered [`Step`]s one
//! reconcile takes; the controller's executor runs each step's I/O, in order, and nothing else.
//! Why a list: every feature the reconcile gained (reusing a clean check, finishing an
//! interrupted prune, recording intent, announcing the admin's overrides, remembering that an
//! operator reports, prune after settle) used to be one more branch of one function, and the
//! states nobody could leave lived where those branches met. Here each is a step with one
//! job, the order is data a table test reads, and a new feature is a new step or a new case of
//! [`plan`], never a branch inside the executor.
//!
//! The predicates a step needs from what earlier steps found ([`settled_on`],
//! [`keeps_clean_check`], [`marks_reported`]) are pure too, and tested here.

use std::time::Duration;

use pom_api::platform_operator::PlatformOperatorStatus;

use crate::decide::{Action, PoDecision};
use crate::inventory;
use crate::status::{self, ActOutcome};

/// How soon to look again while a Catalog the PO uses has not been read since the start.
pub const CATALOG_WARMUP_RETRY: Duration = Duration::from_secs(2);
/// How soon to look again after finishing an interrupted prune: the move it held back starts
/// then, from a fresh gather.
pub const AFTER_PRUNE_RETRY: Duration = Duration::from_secs(1);

/// One step of a PlatformOperator reconcile. The executor runs them in the order [`plan`]
/// lists them; a step whose input an earlier step did not produce (nothing prepared, a move
/// that did not settle) does nothing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Finish the prune after settle of `bundle` that a crash (or a failed write) cut short,
    /// before the next move starts: a move never records more than the two bundles it moves
    /// between.
    FinishInterruptedPrune { bundle: String },
    /// Stand on the last clean full check: nothing it read has changed, so no read is needed.
    ReuseCleanCheck,
    /// Fetch, render and check the bundle the decision puts on the cluster (reads only).
    Prepare,
    /// `spec.adoptFrom`, nothing installed yet: prove the prepared objects are what OLM v0
    /// runs (`pom_policy::adopt::prove`, reads only); unproven, the prepared bundle is dropped
    /// and nothing is written.
    ProveAdoption,
    /// Adopting a webhook bundle, or its hand-over not finished: judge which of OLM v0's webhook
    /// configurations POM's replace (`pom_policy::adopt::webhooks::retire`), before any write:
    /// one POM renders no counterpart of stops the move unwritten.
    JudgeOlmWebhooks,
    /// Record the move's intent in status before its first object is written, so a crash
    /// anywhere in the apply resumes the move and never skips it.
    RecordIntent,
    /// Move each proven object from OLM to POM (one patch each: OLM's owner references and
    /// labels out, POM's owner labels in), after the intent and before the apply.
    ReleaseFromOlm,
    /// The admin asked to give the adopted operator back to OLM v0
    /// (`platform.openshift.io/give-back`): hand every object adoption released back to the
    /// ClusterServiceVersion (`pom_policy::adopt::give_back`), POM's owner labels out; nothing
    /// is applied while the annotation is set.
    GiveBack,
    /// Say what a move carries out on the admin's word: content-policy exceptions, an unsafe
    /// CRD change overridden, the action on a move that did not settle (Warning/Normal Events).
    AnnounceMove,
    /// Apply the prepared bundle (server-side apply, in dependency order).
    Apply,
    /// Adopting a webhook bundle: delete the webhook configurations OLM made that POM's just
    /// applied replace ([`Step::JudgeOlmWebhooks`]), each conditional on the resourceVersion
    /// read; only after the apply, and only once POM's are registered, so the API server
    /// always has one to call.
    RetireOlmWebhooks,
    /// Remember on the PO that its operator reports OperatorConditions (`upgradeGate: Auto`),
    /// when the gather or the apply saw it report.
    MarkReported,
    /// Delete what the inventory records in `namespace`, another PlatformOperator's install
    /// namespace this one was refused to watch, and drop it from the inventory the status
    /// records (issue 33 item 5): a refused PO keeps no powers there.
    Withdraw { namespace: String },
    /// Compute the status from the decision and the outcome ([`status::compute`], pure).
    Report,
    /// Keep a full check that found a settled bundle and wrote nothing for reuse, or forget
    /// the last one.
    RememberCleanCheck,
    /// Write the status [`Step::Report`] computed, when it changed.
    WriteStatus,
    /// Remove what only the bundles a settled move replaced owned.
    PruneAfterSettle,
    /// Look again after `Next`.
    Requeue(Next),
}

impl Step {
    /// The step's name, as the reconcile's stage: a reconcile cut at its deadline says which
    /// step it was in.
    #[must_use]
    pub fn name(&self) -> &'static str {
        match self {
            Self::FinishInterruptedPrune { .. } => "finish an interrupted prune",
            Self::ReuseCleanCheck => "reuse the clean check",
            Self::Prepare => "prepare",
            Self::ProveAdoption => "prove adoption",
            Self::JudgeOlmWebhooks => "judge which of OLM's webhook configurations POM's replace",
            Self::ReleaseFromOlm => "release from OLM",
            Self::GiveBack => "give back to OLM",
            Self::RecordIntent => "record intent",
            Self::AnnounceMove => "announce the move",
            Self::Apply => "apply",
            Self::RetireOlmWebhooks => "retire OLM's webhook configurations",
            Self::MarkReported => "mark reported",
            Self::Withdraw { .. } => "withdraw from another's namespace",
            Self::Report => "report",
            Self::RememberCleanCheck => "remember the clean check",
            Self::WriteStatus => "write status",
            Self::PruneAfterSettle => "prune after settle",
            Self::Requeue(_) => "requeue",
        }
    }
}

/// When the reconcile looks again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// After [`CATALOG_WARMUP_RETRY`]: judging before the catalog is read would report a
    /// running operator as failed.
    CatalogWarmup,
    /// After [`AFTER_PRUNE_RETRY`].
    AfterPrune,
    /// When the status just computed says ([`status::requeue`]).
    AsStatusSays,
}

impl Next {
    /// The fixed delay of this requeue; `None` for [`Next::AsStatusSays`].
    #[must_use]
    pub fn fixed_delay(self) -> Option<Duration> {
        match self {
            Self::CatalogWarmup => Some(CATALOG_WARMUP_RETRY),
            Self::AfterPrune => Some(AFTER_PRUNE_RETRY),
            Self::AsStatusSays => None,
        }
    }
}

/// What the plan is made of besides the decision: what the status records and what the
/// gather found.
#[derive(Debug, Clone, Copy)]
pub struct PlanInput<'a> {
    pub decision: &'a PoDecision,
    /// The PO's status as recorded.
    pub recorded: &'a PlatformOperatorStatus,
    /// The last clean full check still holds (nothing it read has changed).
    pub clean_check_reusable: bool,
    /// The admission guard is in place: the manager may write more than status.
    pub writes_allowed: bool,
    /// The PO already carries the annotation saying its operator reports.
    pub reported_mark_present: bool,
    /// The PO adopts an OLM v0 installation (`spec.adoptFrom`) and has installed nothing yet.
    pub adopting: bool,
    /// The PO adopted an OLM v0 installation and its first move has not settled: OLM's webhook
    /// configurations may still be left to retire once POM's are registered
    /// (`pom_policy::adopt::takeover::handing_over`).
    pub handing_over: bool,
    /// The PO carries the admin's `platform.openshift.io/give-back` annotation.
    pub giving_back: bool,
}

/// The ordered steps of one reconcile.
#[must_use]
pub fn plan(input: &PlanInput<'_>) -> Vec<Step> {
    // Giving back comes first and alone: while the admin asks for it, POM applies nothing
    // (an apply would take the objects over again) and needs no catalog.
    if input.giving_back {
        let mut steps = Vec::new();
        if input.writes_allowed {
            steps.push(Step::GiveBack);
        }
        steps.extend([
            Step::Report,
            Step::RememberCleanCheck,
            Step::WriteStatus,
            Step::Requeue(Next::AsStatusSays),
        ]);
        return steps;
    }
    if let Action::WaitForCatalog { .. } = input.decision.action {
        return vec![Step::Requeue(Next::CatalogWarmup)];
    }
    if let Some(bundle) = interrupted_prune(input.decision, input.recorded) {
        return vec![
            Step::FinishInterruptedPrune {
                bundle: bundle.to_owned(),
            },
            Step::Requeue(Next::AfterPrune),
        ];
    }
    let mut steps = act_steps(input);
    if input.writes_allowed && !input.reported_mark_present {
        steps.push(Step::MarkReported);
    }
    if let Some(namespace) = withdraws_from(input) {
        steps.push(Step::Withdraw {
            namespace: namespace.to_owned(),
        });
    }
    steps.push(Step::Report);
    if !reuses_clean_check(input) {
        steps.push(Step::RememberCleanCheck);
    }
    steps.extend([
        Step::WriteStatus,
        Step::PruneAfterSettle,
        Step::Requeue(Next::AsStatusSays),
    ]);
    steps
}

/// The steps that put the decision on the cluster: a reused clean check, or prepare →
/// (prove adoption) → intent → (release from OLM) → (announce) → apply. Adoption is a move
/// (the first install), so a Keep never proves nor releases.
fn act_steps(input: &PlanInput<'_>) -> Vec<Step> {
    if reuses_clean_check(input) {
        return vec![Step::ReuseCleanCheck];
    }
    let adopting = input.adopting && matches!(input.decision.action, Action::Move(_));
    let hands_over = adopting
        || (input.handing_over && matches!(input.decision.action, Action::Keep | Action::Move(_)));
    let mut steps = vec![Step::Prepare];
    if adopting {
        steps.push(Step::ProveAdoption);
    }
    if hands_over {
        steps.push(Step::JudgeOlmWebhooks);
    }
    steps.push(Step::RecordIntent);
    if adopting {
        steps.push(Step::ReleaseFromOlm);
    }
    if matches!(input.decision.action, Action::Move(_)) {
        steps.push(Step::AnnounceMove);
    }
    steps.push(Step::Apply);
    if hands_over {
        steps.push(Step::RetireOlmWebhooks);
    }
    steps
}

/// The namespace whose recorded objects this reconcile deletes: the decision withdraws from it,
/// the guard allows writes, and the inventory records something there.
fn withdraws_from<'a>(input: &PlanInput<'a>) -> Option<&'a str> {
    let namespace = input.decision.withdraw_from.as_deref()?;
    (input.writes_allowed
        && !inventory::in_namespace(&input.recorded.inventory, namespace).is_empty())
    .then_some(namespace)
}

/// A steady Keep with a clean check that still holds, and no configuration change to apply,
/// needs no read: what the check found still holds.
fn reuses_clean_check(input: &PlanInput<'_>) -> bool {
    input.clean_check_reusable
        && !input.handing_over
        && matches!(input.decision.action, Action::Keep)
        && !input.decision.reconfigures()
}

/// The settled bundle whose prune after settle a crash (or a failed write) cut short, when the
/// decision starts a move: it is finished first, so what only an older bundle had does not
/// outlive a second move (found by the chaos suite).
#[must_use]
pub fn interrupted_prune<'a>(
    decision: &PoDecision,
    recorded: &'a PlatformOperatorStatus,
) -> Option<&'a str> {
    let hop = recorded.active_hop.as_ref().filter(|h| h.settled)?;
    let installed = recorded.installed_bundle.as_ref().map(|b| b.name.as_str());
    (matches!(decision.action, Action::Move(_))
        && installed == Some(hop.to.as_str())
        && inventory::has_other_bundles(&recorded.inventory, &hop.to))
    .then_some(hop.to.as_str())
}

/// The bundle to prune after: the one applied, when the status just computed has no move in
/// flight. A failed or unsettled move removes nothing.
#[must_use]
pub fn settled_on(outcome: &ActOutcome, status: &PlatformOperatorStatus) -> Option<String> {
    match outcome {
        ActOutcome::Applied(report) if move_settled(status) => Some(report.bundle.name.clone()),
        _ => None,
    }
}

/// Whether a full check may stand for the next reconciles: it kept what runs, wrote nothing
/// and found it settled.
#[must_use]
pub fn keeps_clean_check(
    decision: &PoDecision,
    outcome: &ActOutcome,
    status: &PlatformOperatorStatus,
) -> bool {
    matches!(outcome, ActOutcome::Applied(report) if report.wrote == 0)
        && matches!(decision.action, Action::Keep)
        && move_settled(status)
}

/// Whether the PO is to be marked as one whose operator reports: seen by the gather or by the
/// apply. Remembered whenever it is seen, so an operator that reported keeps gating its moves
/// under `upgradeGate: Auto` even when the apply that saw it failed or its OperatorCondition is
/// gone since (found by the state-machine test).
#[must_use]
pub fn marks_reported(reported_before: bool, outcome: &ActOutcome) -> bool {
    reported_before
        || matches!(outcome, ActOutcome::Applied(report) if status::reported_now(report))
}

/// No move in flight: none recorded, or the last one settled.
fn move_settled(status: &PlatformOperatorStatus) -> bool {
    status.active_hop.as_ref().is_none_or(|h| h.settled)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests;
