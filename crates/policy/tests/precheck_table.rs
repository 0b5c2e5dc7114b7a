//! Issue 35 item 3: which update risks a PlatformOperator's status carries, as the
//! `pom_platformoperator_update_risk` gauge and the shipped precheck alert read them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pom_api::PlatformOperator;
use pom_policy::precheck::{UpdateRisk, update_risks};
use serde_json::{Value, json};

fn cond(type_: &str, status: &str, reason: &str) -> Value {
    json!({"type": type_, "status": status, "reason": reason, "message": "m",
           "lastTransitionTime": "2026-01-01T00:00:00Z"})
}

fn po(status: Option<Value>) -> PlatformOperator {
    let mut object = json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "metadata": {"name": "p", "generation": 1}, "spec": {"package": {"name": "p"}}
    });
    if let Some(status) = status {
        object["status"] = status;
    }
    serde_json::from_value(object).unwrap()
}

fn hop(settled: bool) -> Value {
    json!({"from": "p.v1.0.0", "to": "p.v1.1.0", "startedAt": "2026-01-01T00:00:00Z",
           "settled": settled})
}

fn settled_conditions() -> Vec<Value> {
    vec![
        cond("Installed", "True", "InstallSucceeded"),
        cond("Progressing", "False", "AsExpected"),
        cond("Degraded", "False", "AsExpected"),
        cond("Upgradeable", "True", "AsExpected"),
    ]
}

struct Row {
    name: &'static str,
    po: PlatformOperator,
    want: &'static [UpdateRisk],
}

#[test]
fn update_risks_table() {
    use UpdateRisk::*;
    let rows = vec![
        Row {
            name: "no status yet: nothing POM did is a risk (the aggregated Upgradeable fails closed instead)",
            po: po(None),
            want: &[],
        },
        Row {
            name: "installed and settled: no risk",
            po: po(Some(
                json!({"conditions": settled_conditions(), "activeHop": hop(true)}),
            )),
            want: &[],
        },
        Row {
            name: "a hop applied, not settled",
            po: po(Some(json!({"conditions": [
                cond("Installed", "True", "InstallSucceeded"),
                cond("Progressing", "True", "Upgrading"),
            ], "activeHop": hop(false)}))),
            want: &[Unsettled],
        },
        Row {
            name: "Degraded=True, settled",
            po: po(Some(json!({"conditions": [
                cond("Installed", "True", "InstallSucceeded"),
                cond("Degraded", "True", "OperatorUnavailable"),
            ], "activeHop": hop(true)}))),
            want: &[Degraded],
        },
        Row {
            name: "Degraded=False is not degraded",
            po: po(Some(
                json!({"conditions": [cond("Degraded", "False", "OperatorUnavailable")]}),
            )),
            want: &[],
        },
        Row {
            name: "paused with something installed (Progressing says so)",
            po: po(Some(json!({"conditions": [
                cond("Installed", "True", "InstallSucceeded"),
                cond("Progressing", "False", "Paused"),
            ], "activeHop": hop(true)}))),
            want: &[Paused],
        },
        Row {
            name: "paused before the first install (Installed says so)",
            po: po(Some(
                json!({"conditions": [cond("Installed", "False", "Paused")]}),
            )),
            want: &[Paused],
        },
        Row {
            name: "a hop waiting for approval",
            po: po(Some(json!({"conditions": [
                cond("Installed", "True", "InstallSucceeded"),
                cond("Progressing", "False", "UpgradePendingApproval"),
                cond("Upgradeable", "False", "UpgradePendingApproval"),
            ], "activeHop": hop(true)}))),
            want: &[PendingApproval],
        },
        Row {
            name: "a first install waiting for approval",
            po: po(Some(
                json!({"conditions": [cond("Installed", "False", "UpgradePendingApproval")]}),
            )),
            want: &[PendingApproval],
        },
        Row {
            name: "an unsettled move that degraded while paused: every risk that applies",
            po: po(Some(json!({"conditions": [
                cond("Installed", "True", "InstallSucceeded"),
                cond("Progressing", "False", "Paused"),
                cond("Degraded", "True", "ProgressDeadlineExceeded"),
            ], "activeHop": hop(false)}))),
            want: &[Unsettled, Degraded, Paused],
        },
    ];
    for row in rows {
        let got: Vec<UpdateRisk> = update_risks(&row.po, false)
            .into_iter()
            .filter_map(|(risk, applies)| applies.then_some(risk))
            .collect();
        assert_eq!(got, row.want, "{}", row.name);
        // Every risk is always reported, in the one order.
        let order: Vec<UpdateRisk> = update_risks(&row.po, false)
            .iter()
            .map(|(r, _)| *r)
            .collect();
        assert_eq!(order, UpdateRisk::ALL, "{}", row.name);
        // The patch judgement is the manager's, added to what the status says.
        let with_patch: Vec<UpdateRisk> = update_risks(&row.po, true)
            .into_iter()
            .filter_map(|(risk, applies)| applies.then_some(risk))
            .collect();
        let mut want = row.want.to_vec();
        want.push(NoBundleForPatch);
        assert_eq!(with_patch, want, "{} with a patch shortfall", row.name);
    }
}

#[test]
fn labels_are_distinct_snake_case() {
    let labels: Vec<&str> = UpdateRisk::ALL.iter().map(|r| r.label()).collect();
    assert_eq!(
        labels,
        [
            "unsettled",
            "degraded",
            "paused",
            "pending_approval",
            "no_bundle_for_patch"
        ]
    );
    for risk in UpdateRisk::ALL {
        assert_eq!(risk.to_string(), risk.label());
    }
}
