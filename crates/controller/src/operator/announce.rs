//! The Kubernetes Events a PlatformOperator reconcile publishes: what a move carries out on the
//! admin's word (content-policy exceptions, an unsafe CRD change overridden, the action on a
//! move that did not settle), and one Event per condition that changed. An Event that cannot be
//! published is logged at debug and never fails the reconcile: Events are a courtesy to the
//! admin, the status is the record.

use kube::{Resource, ResourceExt};
use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::labels;
use pom_api::platform_operator::PlatformOperatorStatus;
use pom_policy::snapshot::UnsettledMoveAction;
use pom_render::RenderWarning;

use super::reconcile::PoContext;
use crate::conditions;
use crate::events::{Event, EventType};

/// The longest note an Event carries (the API server's own limit is 1 KiB).
const NOTE_LIMIT: usize = 1000;

/// Publishes `event` on `po`.
async fn publish(po: &PlatformOperator, pctx: &PoContext, event: Event) {
    if let Err(err) = pctx.ctx.events.publish(&event, &po.object_ref(&())).await {
        tracing::debug!(%err, "publishing an event");
    }
}

/// An Event on the PO with `reason` for `action`, its note cut to [`NOTE_LIMIT`].
fn event(type_: EventType, reason: Reason, note: &str, action: &str) -> Event {
    Event {
        type_,
        reason: reason.as_str().to_owned(),
        note: Some(bounded(note)),
        action: action.to_owned(),
        secondary: None,
    }
}

/// `note` cut to [`NOTE_LIMIT`] characters.
fn bounded(note: &str) -> String {
    note.chars().take(NOTE_LIMIT).collect()
}

/// A move applied with the admin's content-policy exceptions says so, once per move (a
/// Warning Event on the PlatformOperator and a log line): an exception is never silent.
pub(super) async fn exceptions(
    po: &PlatformOperator,
    pctx: &PoContext,
    bundle: &str,
    list: &[String],
) {
    if list.is_empty() {
        return;
    }
    let note = format!(
        "bundle {bundle} is applied with what spec.contentExceptions and spec.consent allow: {}",
        list.join("; ")
    );
    tracing::warn!(po = %po.name_any(), %bundle, exceptions = %list.join("; "), "applying a bundle with content-policy exceptions");
    let event = event(
        EventType::Warning,
        Reason::ContentExceptionUsed,
        &note,
        "Install",
    );
    publish(po, pctx, event).await;
}

/// A move applies a bundle whose render warned (a manifest's repeated key, its last value
/// kept; a shipped Service replaced by its webhooks' Service): one Warning Event per warning and a log line (issue 33 item 6).
pub(super) async fn render_warnings(
    po: &PlatformOperator,
    pctx: &PoContext,
    bundle: &str,
    warnings: &[RenderWarning],
) {
    for warning in warnings {
        let reason = match warning {
            RenderWarning::DuplicateKey { .. } => Reason::DuplicateManifestKey,
            RenderWarning::WebhookServiceReplaced { .. } => Reason::WebhookServiceReplaced,
        };
        tracing::warn!(po = %po.name_any(), %bundle, %warning, "applying a bundle the render warned about");
        let note = format!("bundle {bundle}: {warning}");
        publish(
            po,
            pctx,
            event(EventType::Warning, reason, &note, "Install"),
        )
        .await;
    }
}

/// An unsafe CRD change is applied on the admin's `crd-safety-override` annotation: a Warning
/// Event and a log line say which bundle and what the check refused (issue 23 item 5).
pub(super) async fn crd_safety_override(
    po: &PlatformOperator,
    pctx: &PoContext,
    bundle: &str,
    details: &str,
) {
    let note = format!(
        "bundle {bundle} changes CRDs in a way POM judges unsafe ({details}); applied anyway because annotation {}={bundle} says so",
        labels::CRD_SAFETY_OVERRIDE
    );
    tracing::warn!(po = %po.name_any(), %bundle, %details, "applying an unsafe CRD change on the admin's override");
    let event = event(
        EventType::Warning,
        Reason::CRDSafetyOverridden,
        &note,
        "Upgrade",
    );
    publish(po, pctx, event).await;
}

/// The admin's action on a move that did not settle is carried out: a Normal Event and a log
/// line say which move and what starts now (issue 25 item 2).
pub(super) async fn unsettled_move_action(
    po: &PlatformOperator,
    pctx: &PoContext,
    action: &UnsettledMoveAction,
    bundle: &str,
) {
    let (reason, note) = match action {
        UnsettledMoveAction::Skip(unsettled) => (
            Reason::UnsettledMoveSkipped,
            format!(
                "the move to {unsettled} had not settled; as annotation {} asks, the move to {bundle} starts",
                labels::UNSETTLED_MOVE
            ),
        ),
        UnsettledMoveAction::Abandon(unsettled) => (
            Reason::UnsettledMoveAbandoned,
            format!(
                "the move to {unsettled} had not settled; as annotation {} asks, POM moves back to {bundle}, which ran before it",
                labels::UNSETTLED_MOVE
            ),
        ),
    };
    tracing::warn!(po = %po.name_any(), %bundle, %note, "carrying out the admin's action on an unsettled move");
    // The note names two bundles and an annotation: far below the limit.
    publish(po, pctx, event(EventType::Normal, reason, &note, "Upgrade")).await;
}

/// Pods that may serve OLM v0's serving certificate are rolled to serve POM's before OLM's
/// expires (`pom_policy::serving_roll`): a Normal Event per Deployment and a log line, since
/// a restart of an adopted operator is otherwise unexplained.
pub(super) async fn serving_rolls(
    po: &PlatformOperator,
    pctx: &PoContext,
    namespace: &str,
    rolls: &[super::webhook_certs::TemplateHashOf],
) {
    use pom_policy::serving_roll::TemplateHash;
    for roll in rolls {
        let TemplateHash::RollFromOlm {
            olm_serving_expires,
            renewed,
        } = roll.decision
        else {
            continue;
        };
        let when = olm_serving_expires
            .and_then(|at| k8s_openapi::jiff::Timestamp::from_second(at).ok())
            .map_or_else(
                || "is no longer trusted".to_owned(),
                |at| format!("expires at {at}"),
            );
        let renewal = if renewed {
            ", or the one POM issued at adoption, since renewed"
        } else {
            ""
        };
        let note = format!(
            "Deployment {namespace}/{} is rolled to serve POM's webhook certificate: its pods may serve OLM v0's, which {when}{renewal} (pod-template annotation {}, as OLM's own rotation rolls them)",
            roll.deployment,
            pom_policy::serving_roll::ANNOTATION,
        );
        tracing::info!(po = %po.name_any(), deployment = %roll.deployment, "rolling an adopted webhook Deployment off OLM v0's certificate");
        let event = event(
            EventType::Normal,
            Reason::ServingCertificateRolled,
            &note,
            "Rollout",
        );
        publish(po, pctx, event).await;
    }
}

/// One Kubernetes Event per condition that changed status or reason.
pub(super) async fn transitions(
    po: &PlatformOperator,
    pctx: &PoContext,
    previous: &PlatformOperatorStatus,
    new: &PlatformOperatorStatus,
) {
    for condition in &new.conditions {
        let old = conditions::find(&previous.conditions, &condition.type_);
        if old.is_some_and(|o| o.status == condition.status && o.reason == condition.reason) {
            continue;
        }
        let status = ConditionStatus::parse_lenient(&condition.status);
        let bad = (condition.type_ == types::DEGRADED && status == ConditionStatus::True)
            || (condition.type_ == types::INSTALLED
                && status == ConditionStatus::False
                && condition.reason != Reason::Installing.as_str());
        let event = Event {
            type_: if bad {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: condition.reason.clone(),
            note: Some(bounded(&format!(
                "{}={}: {}",
                condition.type_, condition.status, condition.message
            ))),
            action: condition.type_.clone(),
            secondary: None,
        };
        publish(po, pctx, event).await;
    }
}
