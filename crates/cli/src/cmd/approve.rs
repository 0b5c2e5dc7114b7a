//! `pomctl approve PO [--bundle BUNDLE]` (live, issue 23 item 5): the admin's approval of a
//! move under `spec.upgradeApproval: Manual`.
//!
//! It writes what the PlatformOperator asks for: `spec.approvedBundle` set to the bundle the PO
//! waits for (its `status.desiredBundle` while its Installed or Progressing condition says
//! `UpgradePendingApproval` for its current generation), or to `--bundle`. The manager starts
//! the move to exactly that bundle and no other; the next move waits again. The write is a
//! server-side apply of that one field, by field manager `pomctl-approve` (forced, so an
//! approval written earlier by hand is taken over rather than refused).
//!
//! Without `--bundle`, a PlatformOperator that waits for nothing is an error that says why
//! (its approval is Automatic, its status is not current, or what it does instead). With
//! `--bundle`, the approval is written even when the PO does not wait for that bundle now (an
//! approval ahead of a cluster update), with a note saying so.
//!
//! Exit codes: 0 approved (or already approved); 1 the PlatformOperator waits for no approval
//! (nothing written); 2 errors (no such PlatformOperator, the cluster could not be read or
//! written).

use std::process::ExitCode;

use anyhow::Context as _;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::conditions::types;
use pom_api::platform_operator::{PreUpdateHops, UpgradeApproval};
use serde_json::json;

use crate::cmd::plan::waiting_for_approval;
use crate::live;

/// The field manager of the approvals `pomctl approve` writes.
pub const FIELD_MANAGER: &str = "pomctl-approve";

/// Flags of `pomctl approve`.
#[derive(clap::Args)]
pub struct Args {
    /// The PlatformOperator whose move to approve.
    #[arg(value_name = "PLATFORM_OPERATOR")]
    pub name: String,
    /// The bundle to approve (as the catalog names it, e.g. `cert-manager.v1.15.0`). Default:
    /// the bundle the PlatformOperator waits for.
    #[arg(long, value_name = "BUNDLE")]
    pub bundle: Option<String>,
}

/// What `pomctl approve` does for one PlatformOperator, judged from the object alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write `spec.approvedBundle: bundle`; `note` tells the admin something worth knowing.
    Approve {
        bundle: String,
        note: Option<String>,
    },
    /// `spec.approvedBundle` already names `bundle`: nothing to write.
    AlreadyApproved { bundle: String },
    /// Nothing to approve, and why (nothing written).
    NotWaiting { why: String },
}

/// What to approve on `po`: `bundle` when given, else the bundle it waits for.
#[must_use]
pub fn judge(po: &PlatformOperator, bundle: Option<&str>) -> Verdict {
    let name = po.metadata.name.as_deref().unwrap_or_default();
    let manual = po.spec.upgrade_approval == UpgradeApproval::Manual;
    let waiting = waiting_for_approval(po);
    let approved = po.spec.approved_bundle.as_deref();
    let Some(bundle) = bundle.map(str::to_owned).or_else(|| waiting.clone()) else {
        return Verdict::NotWaiting {
            why: not_waiting(po, name, manual),
        };
    };
    if approved == Some(bundle.as_str()) {
        return Verdict::AlreadyApproved { bundle };
    }
    let note = if let Some(offered) = offered_pre_update_hop(po, manual, waiting.as_deref()) {
        Some(if offered == bundle {
            format!(
                "PlatformOperator {name} offers the pre-update hop to {offered} before the requested cluster update (spec.preUpdateHops: Offer): this approval lets that hop start now, while the cluster stays where it is; each further hop of the path waits for its own approval"
            )
        } else {
            format!(
                "PlatformOperator {name} offers the pre-update hop to {offered} before the requested cluster update (spec.preUpdateHops: Offer), not {bundle}: {offered} still waits; {bundle} is approved for when POM chooses it"
            )
        })
    } else if !manual {
        Some(format!(
            "spec.upgradeApproval of PlatformOperator {name} is Automatic: its moves do not wait for an approval; {bundle} is recorded as approved for when it is Manual"
        ))
    } else {
        match &waiting {
            Some(waits) if *waits != bundle => Some(format!(
                "PlatformOperator {name} waits for the approval of {waits}, not {bundle}: {waits} still waits; {bundle} is approved for when POM chooses it"
            )),
            Some(_) => None,
            None => Some(format!(
                "PlatformOperator {name} waits for no approval now: {bundle} is approved for when POM chooses it"
            )),
        }
    };
    Verdict::Approve { bundle, note }
}

/// The first hop of a pre-update path `po` offers and waits on (`spec.preUpdateHops: Offer`,
/// issue 35 item 1), when that is what it waits for: under `upgradeApproval: Automatic` an
/// offer is the only wait there is; under Manual the condition's message says which it is.
fn offered_pre_update_hop(
    po: &PlatformOperator,
    manual: bool,
    waiting: Option<&str>,
) -> Option<String> {
    let waiting = waiting?;
    if po.spec.pre_update_hops != PreUpdateHops::Offer {
        return None;
    }
    let mark = format!("spec.preUpdateHops is {}", PreUpdateHops::Offer.as_str());
    let says_offered = [types::PROGRESSING, types::INSTALLED]
        .iter()
        .any(|t| live::condition(po, t).is_some_and(|c| c.message.contains(&mark)));
    (!manual || says_offered).then(|| waiting.to_owned())
}

/// Why `po` waits for no approval, for the admin.
fn not_waiting(po: &PlatformOperator, name: &str, manual: bool) -> String {
    if !manual {
        return format!(
            "PlatformOperator {name} waits for no approval: its spec.upgradeApproval is Automatic (set it to Manual to approve each move), or name a bundle with --bundle"
        );
    }
    let status = po.status.as_ref();
    let observed = status.and_then(|s| s.observed_generation);
    if observed != po.metadata.generation {
        return format!(
            "the status of PlatformOperator {name} does not describe its current spec yet (generation {}, status of {}): wait for the manager, then try again, or name the bundle with --bundle",
            po.metadata
                .generation
                .map_or_else(|| "?".to_owned(), |g| g.to_string()),
            observed.map_or_else(|| "none".to_owned(), |g| g.to_string())
        );
    }
    let doing = live::condition(po, types::PROGRESSING).map_or_else(
        || "it reports no Progressing condition".to_owned(),
        |c| format!("Progressing is {} ({}): {}", c.status, c.reason, c.message),
    );
    format!("PlatformOperator {name} waits for no approval: {doing}")
}

/// Runs `pomctl approve`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    live::block_on(approve(args))?
}

async fn approve(args: &Args) -> anyhow::Result<ExitCode> {
    let client = live::client().await?;
    let api: Api<PlatformOperator> = Api::all(client);
    let po = api
        .get_opt(&args.name)
        .await
        .with_context(|| format!("reading PlatformOperator {}", args.name))?
        .with_context(|| format!("PlatformOperator {} does not exist", args.name))?;
    match judge(&po, args.bundle.as_deref()) {
        Verdict::NotWaiting { why } => {
            eprintln!("error: {why}");
            Ok(ExitCode::from(1))
        }
        Verdict::AlreadyApproved { bundle } => {
            println!(
                "PlatformOperator {}: {bundle} is already approved (spec.approvedBundle); nothing to write",
                args.name
            );
            Ok(ExitCode::SUCCESS)
        }
        Verdict::Approve { bundle, note } => {
            if let Some(note) = note {
                eprintln!("note: {note}");
            }
            let patch = json!({
                "apiVersion": "platform.openshift.io/v1alpha1",
                "kind": "PlatformOperator",
                "metadata": {"name": args.name},
                "spec": {"approvedBundle": bundle},
            });
            api.patch(
                &args.name,
                &PatchParams::apply(FIELD_MANAGER).force(),
                &Patch::Apply(&patch),
            )
            .await
            .with_context(|| {
                format!(
                    "writing spec.approvedBundle of PlatformOperator {}",
                    args.name
                )
            })?;
            println!(
                "PlatformOperator {}: approved {bundle} (spec.approvedBundle); the move to it starts once nothing else holds it",
                args.name
            );
            Ok(ExitCode::SUCCESS)
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use serde_json::Value;

    /// PO `demo` at generation 2: `spec` extra fields, and a status (for generation
    /// `observed`) with `conditions` (type, reason) and a desired bundle.
    fn po(
        spec: Value,
        observed: i64,
        conditions: &[(&str, &str)],
        desired: Option<&str>,
    ) -> PlatformOperator {
        let mut full = json!({"package": {"name": "demo"}});
        if let (Some(full), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
            full.extend(extra.clone());
        }
        let conditions: Vec<Value> = conditions
            .iter()
            .map(|(t, r)| {
                json!({"type": t, "status": "False", "reason": r, "message": format!("{r} says so"),
                       "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": observed})
            })
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": "demo", "generation": 2},
            "spec": full,
            "status": {
                "observedGeneration": observed,
                "conditions": conditions,
                "desiredBundle": desired.map(|d| json!({"name": d, "version": "1.1.1"})),
            },
        }))
        .unwrap()
    }

    fn manual() -> Value {
        json!({"upgradeApproval": "Manual"})
    }

    #[test]
    fn approves_the_bundle_the_po_waits_for() {
        let waiting = po(
            manual(),
            2,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        assert_eq!(
            judge(&waiting, None),
            Verdict::Approve {
                bundle: "demo.v1.1.1".into(),
                note: None
            }
        );
        // A first install waits on Installed.
        let first = po(
            manual(),
            2,
            &[("Installed", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        assert_eq!(
            judge(&first, None),
            Verdict::Approve {
                bundle: "demo.v1.1.1".into(),
                note: None
            }
        );
    }

    #[test]
    fn a_po_waiting_for_nothing_is_an_error_that_says_why() {
        // Moving for another reason: the desired bundle is not waiting for the admin.
        let held = po(
            manual(),
            2,
            &[("Progressing", "Upgrading")],
            Some("demo.v1.1.1"),
        );
        let Verdict::NotWaiting { why } = judge(&held, None) else {
            panic!("{:?}", judge(&held, None));
        };
        assert!(why.contains("Progressing is False (Upgrading)"), "{why}");
        // Automatic: nothing ever waits.
        let automatic = po(json!({}), 2, &[("Progressing", "AsExpected")], None);
        let Verdict::NotWaiting { why } = judge(&automatic, None) else {
            panic!();
        };
        assert!(why.contains("spec.upgradeApproval is Automatic"), "{why}");
        // A status of an older generation is not an answer (the approval may be for a move
        // the current spec no longer asks for).
        let stale = po(
            manual(),
            1,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        let Verdict::NotWaiting { why } = judge(&stale, None) else {
            panic!();
        };
        assert!(why.contains("generation 2, status of 1"), "{why}");
    }

    #[test]
    fn a_named_bundle_is_approved_with_a_note_when_it_is_not_the_one_waiting() {
        let waiting = po(
            manual(),
            2,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        let Verdict::Approve { bundle, note } = judge(&waiting, Some("demo.v1.2.0")) else {
            panic!();
        };
        assert_eq!(bundle, "demo.v1.2.0");
        assert!(
            note.as_deref()
                .is_some_and(|n| n.contains("waits for the approval of demo.v1.1.1")),
            "{note:?}"
        );
        let automatic = po(json!({}), 2, &[], None);
        let Verdict::Approve { note, .. } = judge(&automatic, Some("demo.v1.2.0")) else {
            panic!();
        };
        assert!(
            note.as_deref().is_some_and(|n| n.contains("Automatic")),
            "{note:?}"
        );
    }

    #[test]
    fn an_offered_pre_update_hop_is_named_in_the_note() {
        // Review M6: under spec.preUpdateHops: Offer (upgradeApproval Automatic) the PO waits
        // for the first hop of the path; the note says the approval lets that hop start.
        let offered = po(
            json!({"preUpdateHops": "Offer"}),
            2,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        let Verdict::Approve { bundle, note } = judge(&offered, None) else {
            panic!("{:?}", judge(&offered, None));
        };
        assert_eq!(bundle, "demo.v1.1.1");
        let note = note.unwrap_or_default();
        assert!(
            note.contains("pre-update hop to demo.v1.1.1") && note.contains("lets that hop start"),
            "{note}"
        );
        assert!(!note.contains("Automatic"), "{note}");
        // Another bundle named: the offered hop still waits, and is named.
        let Verdict::Approve { note, .. } = judge(&offered, Some("demo.v1.2.0")) else {
            panic!();
        };
        let note = note.unwrap_or_default();
        assert!(
            note.contains("pre-update hop to demo.v1.1.1")
                && note.contains("demo.v1.1.1 still waits"),
            "{note}"
        );
        // Manual too: the condition's message says the wait is the offer.
        let mut manual_offer = po(
            json!({"upgradeApproval": "Manual", "preUpdateHops": "Offer"}),
            2,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        if let Some(status) = manual_offer.status.as_mut() {
            status.conditions[0].message = "the move to demo.v1.1.1 waits for the admin's approval (the requested cluster update to 4.17.0 needs the pre-update hops demo.v1.1.1 first (spec.preUpdateHops is Offer): ...)".into();
        }
        let Verdict::Approve { note, .. } = judge(&manual_offer, None) else {
            panic!();
        };
        assert!(
            note.as_deref()
                .is_some_and(|n| n.contains("lets that hop start")),
            "{note:?}"
        );
    }

    #[test]
    fn an_approval_already_written_writes_nothing() {
        let mut spec = manual();
        spec["approvedBundle"] = json!("demo.v1.1.1");
        let waiting = po(
            spec,
            2,
            &[("Progressing", "UpgradePendingApproval")],
            Some("demo.v1.1.1"),
        );
        assert_eq!(
            judge(&waiting, None),
            Verdict::AlreadyApproved {
                bundle: "demo.v1.1.1".into()
            }
        );
    }
}
