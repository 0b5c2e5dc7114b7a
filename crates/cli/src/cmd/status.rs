//! `pomctl status` (live, §9): every PlatformOperator with what it runs, its pin and its
//! conditions, then the aggregated ClusterOperator the CVO reads, in one view, so an admin does
//! not have to piece it together from `oc get pop` and `oc get co`.
//!
//! A condition that describes an older generation of its PlatformOperator is shown as `?`
//! (human) or `stale: true` (JSON/YAML): the manager has not judged the current spec yet.
//!
//! Exit codes: 0 the status was shown; 2 the cluster could not be read.

use std::collections::BTreeMap;
use std::process::ExitCode;

use kube::ResourceExt;
use pom_api::PlatformOperator;
use pom_api::conditions::types;
use pom_api::openshift::{AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, OperandVersion};
use pom_api::platform_operator::{ActiveHop, BundleRef, InstalledBundle, PinStatus};
use serde::Serialize;

use crate::cmd::resolve::Output;
use crate::live;

/// Flags of `pomctl status`.
#[derive(clap::Args)]
pub struct Args {
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// The whole report, as printed with `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report {
    pub platform_operators: Vec<PoReport>,
    /// `None` when the aggregated ClusterOperator does not exist (yet).
    pub cluster_operator: Option<CoReport>,
}

/// One PlatformOperator.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoReport {
    pub name: String,
    pub package: String,
    pub installed: Option<InstalledBundle>,
    pub desired: Option<BundleRef>,
    pub pin: Option<PinStatus>,
    pub active_hop: Option<ActiveHop>,
    /// True when the status describes an older generation than the spec.
    pub stale: bool,
    /// Conditions by type.
    pub conditions: BTreeMap<String, ConditionReport>,
}

/// A condition's status, reason and message.
#[derive(Debug, Serialize)]
pub struct ConditionReport {
    pub status: String,
    pub reason: String,
    pub message: String,
}

/// The aggregated ClusterOperator.
#[derive(Debug, Serialize)]
pub struct CoReport {
    pub name: String,
    pub conditions: BTreeMap<String, ConditionReport>,
    pub versions: Vec<OperandVersion>,
}

/// Runs `pomctl status`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let report = live::block_on(gather())??;
    match args.output {
        Output::Human => print!("{}", human(&report)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&report)?),
    }
    Ok(ExitCode::SUCCESS)
}

async fn gather() -> anyhow::Result<Report> {
    let client = live::client().await?;
    let pos = live::platform_operators(&client).await?;
    let co = live::aggregated_cluster_operator(&client).await?;
    Ok(Report {
        platform_operators: pos.iter().map(po_report).collect(),
        cluster_operator: co.as_ref().map(co_report),
    })
}

fn po_report(po: &PlatformOperator) -> PoReport {
    let status = po.status.clone().unwrap_or_default();
    PoReport {
        name: po.name_any(),
        package: po.spec.package.name.clone(),
        stale: status.observed_generation != po.metadata.generation,
        conditions: status
            .conditions
            .iter()
            .map(|c| {
                let report = ConditionReport {
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                };
                (c.type_.clone(), report)
            })
            .collect(),
        installed: status.installed_bundle,
        desired: status.desired_bundle,
        pin: status.pin,
        active_hop: status.active_hop,
    }
}

fn co_report(co: &ClusterOperator) -> CoReport {
    let status = co.status.clone().unwrap_or_default();
    CoReport {
        name: co.name_any(),
        conditions: status
            .conditions
            .iter()
            .map(|c| {
                let report = ConditionReport {
                    status: c.status.clone(),
                    reason: c.reason.clone().unwrap_or_default(),
                    message: c.message.clone().unwrap_or_default(),
                };
                (c.type_.clone(), report)
            })
            .collect(),
        versions: status.versions,
    }
}

/// The table of POs, then the ClusterOperator's conditions (multi-line messages continue on
/// their own rows, since they hold one line per PO).
pub fn human(report: &Report) -> String {
    let mut out = String::new();
    if report.platform_operators.is_empty() {
        out.push_str("No PlatformOperators.\n");
    } else {
        let rows: Vec<Vec<String>> = report.platform_operators.iter().map(po_row).collect();
        out.push_str(&live::table(
            &[
                "NAME",
                "PACKAGE",
                "VERSION",
                "PIN",
                "INSTALLED",
                "PROGRESSING",
                "UPGRADEABLE",
                "MESSAGE",
            ],
            &rows,
        ));
    }
    out.push('\n');
    let Some(co) = &report.cluster_operator else {
        out.push_str(&format!(
            "ClusterOperator {AGGREGATED_CLUSTER_OPERATOR}: not found (is the manager running?)\n"
        ));
        return out;
    };
    let versions: Vec<String> = co
        .versions
        .iter()
        .map(|v| format!("{}={}", v.name, v.version))
        .collect();
    out.push_str(&format!(
        "ClusterOperator {} (versions: {})\n",
        co.name,
        if versions.is_empty() {
            "none reported".to_owned()
        } else {
            versions.join(", ")
        }
    ));
    let mut rows = Vec::new();
    for type_ in ["Available", "Progressing", "Degraded", "Upgradeable"] {
        let Some(c) = co.conditions.get(type_) else {
            rows.push(vec![
                type_.to_owned(),
                "(missing)".into(),
                String::new(),
                String::new(),
            ]);
            continue;
        };
        let mut lines = c.message.lines();
        rows.push(vec![
            type_.to_owned(),
            c.status.clone(),
            c.reason.clone(),
            lines.next().unwrap_or_default().to_owned(),
        ]);
        for line in lines {
            rows.push(vec![
                String::new(),
                String::new(),
                String::new(),
                line.to_owned(),
            ]);
        }
    }
    out.push_str(&live::table(
        &["TYPE", "STATUS", "REASON", "MESSAGE"],
        &rows,
    ));
    out
}

fn po_row(po: &PoReport) -> Vec<String> {
    let cell = |type_: &str| match po.conditions.get(type_) {
        None => "-".to_owned(),
        Some(_) if po.stale => "?".to_owned(),
        Some(c) => c.status.clone(),
    };
    let version = match (&po.installed, &po.desired) {
        (Some(i), Some(d)) => format!("{} -> {}", i.version, d.version),
        (Some(i), None) => i.version.clone(),
        (None, Some(d)) => format!("- -> {}", d.version),
        (None, None) => "-".to_owned(),
    };
    let pin = po
        .pin
        .as_ref()
        .map_or_else(|| "-".to_owned(), |p| format!("{} ({})", p.range, p.reason));
    vec![
        po.name.clone(),
        po.package.clone(),
        version,
        pin,
        cell(types::INSTALLED),
        cell(types::PROGRESSING),
        cell(types::UPGRADEABLE),
        headline(po),
    ]
}

/// The one message worth a glance: the first unhappy condition (not installed, degraded,
/// progressing, not upgradeable), else the Installed message.
fn headline(po: &PoReport) -> String {
    if po.stale {
        return "status describes an older generation; the manager has not caught up".to_owned();
    }
    let unhappy = [
        (types::INSTALLED, "True"),
        (types::DEGRADED, "False"),
        (types::PROGRESSING, "False"),
        (types::UPGRADEABLE, "True"),
    ]
    .iter()
    .find_map(|(t, happy)| po.conditions.get(*t).filter(|c| c.status != *happy));
    let chosen = unhappy.or_else(|| po.conditions.get(types::INSTALLED));
    chosen.map_or_else(String::new, |c| {
        live::short(&format!("{}: {}", c.reason, c.message), 100)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cond(status: &str, reason: &str, message: &str) -> ConditionReport {
        ConditionReport {
            status: status.into(),
            reason: reason.into(),
            message: message.into(),
        }
    }

    #[test]
    fn the_table_shows_pin_versions_and_the_unhappy_message() {
        let mut conditions = BTreeMap::new();
        conditions.insert("Installed".into(), cond("True", "InstallSucceeded", "ok"));
        conditions.insert("Progressing".into(), cond("False", "AsExpected", "done"));
        conditions.insert(
            "Upgradeable".into(),
            cond(
                "False",
                "IncompatibleOperatorsInstalled",
                "move to 2.3.1\nmore",
            ),
        );
        let report = Report {
            platform_operators: vec![PoReport {
                name: "a".into(),
                package: "pa".into(),
                installed: Some(InstalledBundle {
                    name: "pa.v1.0.0".into(),
                    version: "1.0.0".into(),
                    image: None,
                    objects_digest: None,
                }),
                desired: None,
                pin: Some(PinStatus {
                    range: "=1.0.0".into(),
                    reason: pom_api::platform_operator::PinReason::Steady,
                    cluster_version: None,
                }),
                active_hop: None,
                stale: false,
                conditions,
            }],
            cluster_operator: Some(CoReport {
                name: AGGREGATED_CLUSTER_OPERATOR.into(),
                conditions: [(
                    "Upgradeable".to_owned(),
                    cond("False", "X", "a: one\nb: two"),
                )]
                .into_iter()
                .collect(),
                versions: vec![],
            }),
        };
        let text = human(&report);
        assert!(text.contains("=1.0.0 (Steady)"), "{text}");
        assert!(
            text.contains("IncompatibleOperatorsInstalled: move to 2.3.1 …"),
            "{text}"
        );
        assert!(text.contains("Available    (missing)"), "{text}");
        assert!(text.lines().any(|l| l.trim() == "b: two"), "{text}");
        assert!(text.contains("versions: none reported"), "{text}");
    }
}
