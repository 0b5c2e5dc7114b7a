//! `pomctl plan --to VERSION` (live, §9): the preflight of a cluster update. For every
//! PlatformOperator it answers, before the maintenance window, what the update will do:
//! the pin it will be held to, every hop it will take and where it ends, and whether
//! Upgradeable would stop the CVO from starting the update at all, and why.
//!
//! It reads ClusterVersion `version`, every PlatformOperator, every Catalog's content (see
//! [`crate::live`]) and every ClusterOperator, then calls the resolver's pure functions (the
//! ones the manager calls): [`cluster_phase`] on the update as the CVO would start it,
//! [`plan_hops`] per PO, and [`bundle_upgradeability`] for `maxOpenShiftVersion`.
//!
//! What would block, following the CVO's preconditions: a minor or major update is refused
//! while any ClusterOperator says `Upgradeable=False`. So it is blocked when a PO is not
//! upgradeable now (its own `Upgradeable` condition is not True for its current generation:
//! fail closed, as the aggregated ClusterOperator is), when a PO's installed bundle has a
//! `maxOpenShiftVersion` below the target's minor (`IncompatibleOperatorsInstalled`, with the
//! bundle that would lift it), or when another ClusterOperator says `Upgradeable=False`. The CVO
//! also refuses more than one minor at once, major updates other than 4.x → 5.0, and rollbacks
//! outside the z-stream. Patch updates are never blocked by Upgradeable.
//!
//! The plan starts from the last completed version, even when another update is in flight.
//! A PO that cannot be planned (catalog unreadable, no candidate at all) is reported with the
//! reason and stays where it is; that alone does not block the update.
//!
//! Exit codes: 0 the CVO would start the update; 1 the update would be blocked (the blockers
//! are listed); 2 errors (no ClusterVersion, unreadable cluster, bad `--to`).

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use pom_api::PlatformOperator;
use pom_api::conditions::types;
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, CLUSTER_VERSION_NAME, ClusterOperator, ClusterVersion,
};
use pom_resolver::cluster::{
    ClusterPhase, ClusterVersionSnapshot, HistoryEntry, PhaseKind, cluster_phase, max_supports,
    next_minor, normalize_minor,
};
use pom_resolver::fbc::model::{Catalog as FbcCatalog, MaxOpenShiftVersion};
use pom_resolver::pin::pin_for;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, HopPlan, InstalledBundle, PlanEnd, ResolveRequest, plan_hops,
};
use pom_resolver::verdict::{Verdict, VerdictStatus, bundle_upgradeability};
use pom_resolver::version::parse_tolerant;
use semver::Version;
use serde::Serialize;

use crate::cmd::resolve::Output;
use crate::live::{self, FetchedCatalog};

/// Flags of `pomctl plan`.
#[derive(clap::Args)]
pub struct Args {
    /// The OpenShift version the cluster would update to (as `oc adm upgrade --to`).
    #[arg(long, value_name = "VERSION")]
    pub to: String,
    /// Registries to reach over plain HTTP when pulling image catalogs (`host:port`; repeat or
    /// comma-separate), as the manager's `--insecure-registries`.
    #[arg(
        long = "insecure-registry",
        value_name = "HOST",
        env = "POM_INSECURE_REGISTRIES",
        value_delimiter = ','
    )]
    pub insecure_registries: Vec<String>,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// Everything the plan is computed from: read from the cluster, then judged purely.
#[derive(Debug)]
pub struct Inputs {
    pub cluster_version: ClusterVersion,
    pub platform_operators: Vec<PlatformOperator>,
    pub catalogs: Vec<FetchedCatalog>,
    pub cluster_operators: Vec<ClusterOperator>,
    pub kube_version: Option<Version>,
}

/// The plan, as printed with `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Plan {
    pub cluster: ClusterUpdate,
    /// Whether the CVO would start the update.
    pub admitted: bool,
    /// Why not, when it would not (empty when admitted).
    pub blockers: Vec<Blocker>,
    pub platform_operators: Vec<PoPlan>,
    pub catalogs: Vec<CatalogSummary>,
}

/// The update itself.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterUpdate {
    /// The last completed version.
    pub current: String,
    pub target: String,
    /// `patch`, `minor`, `major`, `rollback` or `none`.
    pub update: String,
    /// The phase POM will see while the update runs (it decides the pins).
    pub phase: PhaseKind,
    /// The target of an update already in flight, if any.
    pub in_flight: Option<String>,
}

/// One reason the CVO would refuse the update.
#[derive(Debug, Clone, Serialize)]
pub struct Blocker {
    /// `PlatformOperator/<name>`, `ClusterOperator/<name>` or `ClusterVersion`.
    pub source: String,
    pub reason: String,
    pub message: String,
}

/// One PlatformOperator under the update.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PoPlan {
    pub name: String,
    pub package: String,
    pub installed: Option<BundleView>,
    /// The pin while the update runs.
    pub pin: Option<PinView>,
    /// Where the PO ends (the installed bundle when it stays).
    pub bundle: Option<BundleView>,
    /// Every move, in order (empty when it stays).
    pub hops: Vec<HopView>,
    /// `Settled`, or why the walk stopped early.
    pub end: String,
    /// Why the PO cannot be planned at all (it stays where it is).
    pub error: Option<String>,
    /// This PO's part of Upgradeable for this update.
    pub upgradeable: VerdictView,
    /// Whether this PO makes the CVO refuse the update.
    pub blocks_update: bool,
    /// The verdict for the next minor after the update, on the bundle the PO ends on.
    pub upgradeable_after: Option<VerdictView>,
}

/// A bundle by name and version.
#[derive(Debug, Clone, Serialize)]
pub struct BundleView {
    pub name: String,
    pub version: String,
}

/// A pin.
#[derive(Debug, Clone, Serialize)]
pub struct PinView {
    pub range: String,
    pub reason: String,
}

/// One hop.
#[derive(Debug, Serialize)]
pub struct HopView {
    pub from: Option<String>,
    pub to: String,
    pub version: String,
    pub pin: String,
}

/// An Upgradeable verdict.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictView {
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl From<&Verdict> for VerdictView {
    fn from(v: &Verdict) -> Self {
        Self {
            status: v.status.to_string(),
            reason: v.reason.clone(),
            message: v.message.clone(),
        }
    }
}

/// A Catalog and whether its content could be read.
#[derive(Debug, Serialize)]
pub struct CatalogSummary {
    pub name: String,
    pub priority: i32,
    pub source: String,
    pub packages: Option<usize>,
    pub error: Option<String>,
}

/// Runs `pomctl plan`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let target =
        parse_tolerant(&args.to).with_context(|| format!("--to {:?} is not a version", args.to))?;
    let inputs = live::block_on(gather(&args.insecure_registries))??;
    let plan = compute(&inputs, &args.to, &target)?;
    match args.output {
        Output::Human => print!("{}", human(&plan)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&plan)?),
    }
    Ok(if plan.admitted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

async fn gather(insecure_registries: &[String]) -> anyhow::Result<Inputs> {
    let client = live::client().await?;
    let cluster_version = match Api::<ClusterVersion>::all(client.clone())
        .get_opt(CLUSTER_VERSION_NAME)
        .await
    {
        Ok(Some(cv)) => cv,
        Ok(None) | Err(kube::Error::Api(_)) => bail!(
            "ClusterVersion {CLUSTER_VERSION_NAME:?} not found: this is not an OpenShift cluster, so there is no cluster update to plan"
        ),
        Err(err) => return Err(err).context("reading ClusterVersion version"),
    };
    let cluster_operators = Api::<ClusterOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
        .context("listing ClusterOperators")?
        .items;
    let platform_operators = live::platform_operators(&client).await?;
    let catalogs = live::fetch_catalogs(&client, insecure_registries).await?;
    let kube_version = client
        .apiserver_version()
        .await
        .ok()
        .and_then(|info| parse_tolerant(&info.git_version).ok());
    Ok(Inputs {
        cluster_version,
        platform_operators,
        catalogs,
        cluster_operators,
        kube_version,
    })
}

/// The plan for an update to `to` (pure: everything comes from `inputs`).
///
/// # Errors
/// When the ClusterVersion cannot be judged (no status, unparsable versions).
pub fn compute(inputs: &Inputs, to: &str, target: &Version) -> anyhow::Result<Plan> {
    let live = snapshot(&inputs.cluster_version)?;
    let now = cluster_phase(&live).context("reading the cluster's current version")?;
    let current = now.current.clone();
    let in_flight = (now.kind != PhaseKind::Steady).then(|| now.target.to_string());
    let hypothetical = ClusterVersionSnapshot {
        history: vec![
            HistoryEntry {
                state: "Partial".into(),
                version: to.to_owned(),
                completion_time: None,
            },
            HistoryEntry {
                state: "Completed".into(),
                version: current.to_string(),
                completion_time: Some("now".into()),
            },
        ],
        desired_version: Some(to.to_owned()),
        progressing: Some(true),
    };
    let phase = cluster_phase(&hypothetical).with_context(|| format!("--to {to:?}"))?;
    let update = update_kind(&current, target);
    let gated = matches!(update, "minor" | "major");

    let mut blockers = cvo_preconditions(update, &current, target);
    let platform_operators: Vec<PoPlan> = inputs
        .platform_operators
        .iter()
        .map(|po| plan_po(po, inputs, &phase, gated))
        .collect();
    for po in platform_operators.iter().filter(|p| p.blocks_update) {
        blockers.push(Blocker {
            source: format!("PlatformOperator/{}", po.name),
            reason: po.upgradeable.reason.clone(),
            message: po.upgradeable.message.clone(),
        });
    }
    if gated {
        let pos_block = platform_operators.iter().any(|p| p.blocks_update);
        for co in &inputs.cluster_operators {
            let Some(c) = co
                .status
                .as_ref()
                .and_then(|s| s.conditions.iter().find(|c| c.type_ == types::UPGRADEABLE))
            else {
                continue;
            };
            // The aggregated ClusterOperator speaks for the POs judged above; it is listed
            // only when it blocks for a reason the per-PO judgement did not find.
            if c.status != "False" || (co.name_any() == AGGREGATED_CLUSTER_OPERATOR && pos_block) {
                continue;
            }
            blockers.push(Blocker {
                source: format!("ClusterOperator/{}", co.name_any()),
                reason: c.reason.clone().unwrap_or_default(),
                message: c.message.clone().unwrap_or_default(),
            });
        }
    }
    let catalogs = inputs
        .catalogs
        .iter()
        .map(|c| CatalogSummary {
            name: c.name.clone(),
            priority: c.priority,
            source: c.source.clone(),
            packages: c.content.as_ref().ok().map(|c| c.packages.len()),
            error: c.content.as_ref().err().cloned(),
        })
        .collect();
    Ok(Plan {
        cluster: ClusterUpdate {
            current: current.to_string(),
            target: to.to_owned(),
            update: update.to_owned(),
            phase: phase.kind,
            in_flight,
        },
        admitted: blockers.is_empty(),
        blockers,
        platform_operators,
        catalogs,
    })
}

fn snapshot(cv: &ClusterVersion) -> anyhow::Result<ClusterVersionSnapshot> {
    pom_controller::operator::snapshot::snapshot_of(cv).ok_or_else(|| {
        anyhow::anyhow!(
            "ClusterVersion version has no status yet: the cluster-version operator has not reported"
        )
    })
}

fn update_kind(current: &Version, target: &Version) -> &'static str {
    match target.cmp_precedence(current) {
        std::cmp::Ordering::Equal => "none",
        std::cmp::Ordering::Less => "rollback",
        std::cmp::Ordering::Greater if target.major > current.major => "major",
        std::cmp::Ordering::Greater if target.minor > current.minor => "minor",
        std::cmp::Ordering::Greater => "patch",
    }
}

/// The CVO's other preconditions (GiantHop, Rollback): refused whatever Upgradeable says.
fn cvo_preconditions(update: &str, current: &Version, target: &Version) -> Vec<Blocker> {
    let refuse = |reason: &str, message: String| {
        vec![Blocker {
            source: "ClusterVersion".into(),
            reason: reason.into(),
            message,
        }]
    };
    match update {
        "rollback" if (current.major, current.minor) != (target.major, target.minor) => refuse(
            "LowDesiredVersion",
            format!(
                "the CVO rolls back only within a z-stream (to the previous {}.{} release); {target} is outside it",
                current.major, current.minor
            ),
        ),
        "major" if !(current.major == 4 && target.major == 5 && target.minor == 0) => refuse(
            "MajorVersionUpdate",
            format!("the CVO does not update across major versions from {current} to {target}"),
        ),
        "minor" if target.minor > current.minor.saturating_add(1) => refuse(
            "MultipleMinorVersionsUpdate",
            format!(
                "the CVO updates one minor at a time: update to {}.{} first",
                current.major,
                current.minor + 1
            ),
        ),
        _ => Vec::new(),
    }
}

/// The catalogs a PO resolves from: the one it names, or every readable one.
fn catalogs_for<'a>(
    po: &PlatformOperator,
    catalogs: &'a [FetchedCatalog],
) -> Result<Vec<(&'a str, i32, &'a FbcCatalog)>, String> {
    let chosen: Vec<&FetchedCatalog> = match po.spec.package.catalog.as_deref() {
        Some(name) => catalogs.iter().filter(|c| c.name == name).collect(),
        None => catalogs.iter().collect(),
    };
    if chosen.is_empty() {
        return Err(match po.spec.package.catalog.as_deref() {
            Some(name) => format!("Catalog {name:?} (spec.package.catalog) does not exist"),
            None => "no Catalog exists".to_owned(),
        });
    }
    let readable: Vec<(&str, i32, &FbcCatalog)> = chosen
        .iter()
        .filter_map(|c| {
            c.content
                .as_ref()
                .ok()
                .map(|content| (c.name.as_str(), c.priority, content))
        })
        .collect();
    if readable.is_empty() {
        let errors: Vec<String> = chosen
            .iter()
            .filter_map(|c| {
                c.content
                    .as_ref()
                    .err()
                    .map(|e| format!("Catalog {}: {e}", c.name))
            })
            .collect();
        return Err(errors.join("; "));
    }
    Ok(readable)
}

fn plan_po(po: &PlatformOperator, inputs: &Inputs, phase: &ClusterPhase, gated: bool) -> PoPlan {
    let status = po.status.clone().unwrap_or_default();
    let installed = status.installed_bundle.as_ref().and_then(|b| {
        parse_tolerant(&b.version).ok().map(|v| InstalledBundle {
            name: b.name.clone(),
            version: v,
        })
    });
    let mut result = PoPlan {
        name: po.name_any(),
        package: po.spec.package.name.clone(),
        installed: installed.as_ref().map(|i| BundleView {
            name: i.name.clone(),
            version: i.version.to_string(),
        }),
        pin: None,
        bundle: None,
        hops: Vec::new(),
        end: String::new(),
        error: None,
        upgradeable: VerdictView::from(&Verdict::upgradeable(
            "not a minor or major update: Upgradeable is not consulted",
        )),
        blocks_update: false,
        upgradeable_after: None,
    };
    let ranges = parse_range(
        po.spec.package.version_range.as_deref(),
        "spec.package.versionRange",
    )
    .and_then(|vr| {
        Ok((
            vr,
            parse_range(
                po.spec.steady_state_version_range.as_deref(),
                "spec.steadyStateVersionRange",
            )?,
        ))
    });
    let catalogs = catalogs_for(po, &inputs.catalogs);
    let package = catalogs.as_ref().ok().and_then(|cs| {
        cs.iter()
            .find_map(|(_, _, c)| c.packages.get(&po.spec.package.name))
    });
    let fallback_pin = pin_for(installed.as_ref().map(|i| &i.version), Some(phase), None);
    result.pin = Some(PinView {
        range: fallback_pin.range.clone(),
        reason: fallback_pin.reason.to_string(),
    });

    match (&ranges, &catalogs) {
        (Err(e), _) | (_, Err(e)) => {
            result.error = Some(e.clone());
            result.end = "Unplanned".into();
        }
        (Ok((version_range, steady)), Ok(catalogs)) => {
            let inputs_for: Vec<CatalogInput<'_>> = catalogs.clone();
            let request = ResolveRequest {
                catalogs: &inputs_for,
                package: &po.spec.package.name,
                channel: po.spec.package.channel.as_deref(),
                installed: installed.clone(),
                version_range: version_range.clone(),
                steady_state_range: steady.clone(),
                cluster: Some(phase.clone()),
                kube_version: inputs.kube_version.clone(),
            };
            match plan_hops(&request) {
                Ok(plan) => fill_hops(
                    &mut result,
                    &plan,
                    phase,
                    package,
                    po.spec.package.channel.as_deref(),
                ),
                Err(err) => {
                    result.error = Some(err.to_string());
                    result.end = "Unplanned".into();
                }
            }
        }
    }

    if gated {
        let verdict = upgradeable_for_update(
            po,
            installed.as_ref(),
            &status.max_open_shift_version,
            package,
            phase,
        );
        result.blocks_update = !verdict.allows_update();
        result.upgradeable = VerdictView::from(&verdict);
    }
    result
}

fn fill_hops(
    result: &mut PoPlan,
    plan: &HopPlan,
    phase: &ClusterPhase,
    package: Option<&pom_resolver::fbc::model::Package>,
    channel: Option<&str>,
) {
    result.pin = Some(PinView {
        range: plan.first.pin.range.clone(),
        reason: plan.first.pin.reason.to_string(),
    });
    result.hops = plan
        .hops
        .iter()
        .map(|h| HopView {
            from: h.from.as_ref().map(|f| f.name.clone()),
            to: h.to.name.clone(),
            version: h.to.version.to_string(),
            pin: h.pin.range.clone(),
        })
        .collect();
    let last = plan.final_bundle();
    result.bundle = Some(BundleView {
        name: last.name.clone(),
        version: last.version.to_string(),
    });
    result.end = match &plan.end {
        PlanEnd::Settled => "Settled".to_owned(),
        PlanEnd::Blocked(err) => format!("Blocked: {err}"),
        PlanEnd::Cycle { bundle } => format!("Cycle: the catalog leads back to {bundle}"),
        PlanEnd::HopLimit { limit } => format!("HopLimit: more than {limit} hops"),
    };
    if phase.kind != PhaseKind::Steady {
        let end = InstalledBundle {
            name: last.name.clone(),
            version: last.version.clone(),
        };
        let after = bundle_upgradeability(
            &end,
            last.max_openshift_version.as_ref(),
            &phase.target,
            package,
            channel,
        );
        result.upgradeable_after = Some(VerdictView::from(&after));
    }
}

/// This PO's part of Upgradeable for a minor or major update: the installed bundle must run on
/// the target's minor, and the PO must be upgradeable now (its condition, for its current
/// generation; anything else fails closed, as the aggregated ClusterOperator does).
fn upgradeable_for_update(
    po: &PlatformOperator,
    installed: Option<&InstalledBundle>,
    status_max: &Option<String>,
    package: Option<&pom_resolver::fbc::model::Package>,
    phase: &ClusterPhase,
) -> Verdict {
    if let Some(installed) = installed {
        let max = status_max.as_deref().map(parse_max_ocp).or_else(|| {
            package
                .and_then(|p| p.bundles.get(&installed.name))
                .and_then(|b| b.properties.max_openshift_version.clone())
        });
        let target_minor = normalize_minor(phase.target.major, phase.target.minor);
        let verdict = if next_minor(&phase.current) == target_minor {
            // The CVO's own question: may the cluster take its next minor? (with the advice).
            bundle_upgradeability(
                installed,
                max.as_ref(),
                &phase.current,
                package,
                po.spec.package.channel.as_deref(),
            )
        } else {
            match &max {
                Some(MaxOpenShiftVersion::Valid { major, minor })
                    if !max_supports((*major, *minor), target_minor.0, target_minor.1) =>
                {
                    Verdict::blocked(
                        pom_resolver::verdict::reason::INCOMPATIBLE_OPERATORS_INSTALLED,
                        format!(
                            "bundle {} ({}) supports OpenShift up to {major}.{minor}, below {}",
                            installed.name, installed.version, phase.target
                        ),
                    )
                }
                _ => Verdict::upgradeable("compatible"),
            }
        };
        if !verdict.allows_update() {
            return verdict;
        }
    }
    match live::condition(po, types::UPGRADEABLE) {
        Some(c) if c.status == "True" => Verdict::upgradeable(c.message.clone()),
        Some(c) => Verdict {
            status: if c.status == "False" {
                VerdictStatus::False
            } else {
                VerdictStatus::Unknown
            },
            reason: c.reason.clone(),
            message: c.message.clone(),
        },
        None => Verdict::unknown(
            "the PlatformOperator has not reported Upgradeable for its current generation (the manager counts that as not upgradeable)",
        ),
    }
}

fn parse_range(text: Option<&str>, field: &str) -> Result<Option<VersionRange>, String> {
    text.map(|t| VersionRange::parse(t).map_err(|e| format!("{field}: {e}")))
        .transpose()
}

/// `status.maxOpenShiftVersion` (`X.Y`) as the manager writes it.
fn parse_max_ocp(text: &str) -> MaxOpenShiftVersion {
    let parsed = text
        .trim()
        .split_once('.')
        .and_then(|(a, b)| Some((a.parse().ok()?, b.parse().ok()?)));
    match parsed {
        Some((major, minor)) => MaxOpenShiftVersion::Valid { major, minor },
        None => MaxOpenShiftVersion::Invalid {
            raw: text.to_owned(),
            reason: "not X.Y".to_owned(),
        },
    }
}

/// The human report: the update, a table of POs, the hops, then the blockers and the answer.
pub fn human(plan: &Plan) -> String {
    let c = &plan.cluster;
    let mut out = format!(
        "Cluster update {} -> {}: {} update; platform operators are pinned for {}.\n",
        c.current, c.target, c.update, c.phase
    );
    if let Some(flight) = &c.in_flight {
        out.push_str(&format!("(An update to {flight} is in flight; this plan starts from the last completed version {}.)\n", c.current));
    }
    out.push('\n');
    if plan.platform_operators.is_empty() {
        out.push_str("No PlatformOperators.\n");
    } else {
        let rows: Vec<Vec<String>> = plan
            .platform_operators
            .iter()
            .map(|p| {
                vec![
                    p.name.clone(),
                    p.installed
                        .as_ref()
                        .map_or_else(|| "-".into(), |b| b.version.clone()),
                    p.pin.as_ref().map_or_else(
                        || "-".into(),
                        |pin| format!("{} ({})", pin.range, pin.reason),
                    ),
                    p.bundle
                        .as_ref()
                        .map_or_else(|| "-".into(), |b| b.version.clone()),
                    p.hops.len().to_string(),
                    p.upgradeable.status.clone(),
                    if p.blocks_update {
                        "yes".into()
                    } else {
                        "no".into()
                    },
                ]
            })
            .collect();
        out.push_str(&live::table(
            &[
                "NAME",
                "INSTALLED",
                "PIN",
                "ENDS AT",
                "HOPS",
                "UPGRADEABLE",
                "BLOCKS",
            ],
            &rows,
        ));
        out.push_str("\nHops:\n");
        for p in &plan.platform_operators {
            if let Some(err) = &p.error {
                out.push_str(&format!(
                    "  {}: cannot be planned, stays as it is: {}\n",
                    p.name,
                    live::short(err, 160)
                ));
                continue;
            }
            if p.hops.is_empty() {
                let at = p.bundle.as_ref().map_or("-", |b| b.name.as_str());
                out.push_str(&format!("  {}: stays at {at}\n", p.name));
            } else {
                let mut path: Vec<String> = p
                    .hops
                    .first()
                    .and_then(|h| h.from.clone())
                    .into_iter()
                    .collect();
                path.extend(p.hops.iter().map(|h| h.to.clone()));
                out.push_str(&format!("  {}: {}\n", p.name, path.join(" -> ")));
            }
            if p.end != "Settled" {
                out.push_str(&format!("    then stops: {}\n", live::short(&p.end, 160)));
            }
            if let Some(after) = p.upgradeable_after.as_ref().filter(|a| a.status != "True") {
                out.push_str(&format!(
                    "    after the update, Upgradeable would be {} ({}): {}\n",
                    after.status,
                    after.reason,
                    live::short(&after.message, 200)
                ));
            }
        }
    }
    out.push('\n');
    if plan.admitted {
        out.push_str(&format!(
            "Result: the CVO would start this {} update; the platform operators move as shown.\n",
            c.update
        ));
    } else {
        out.push_str(&format!(
            "Result: the CVO would refuse this {} update:\n",
            c.update
        ));
        for b in &plan.blockers {
            out.push_str(&format!(
                "  - {} ({}): {}\n",
                b.source,
                b.reason,
                b.message.replace('\n', "\n      ")
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(text: &str) -> Version {
        Version::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn update_kinds_and_the_cvo_preconditions() {
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.4")), "patch");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.17.0")), "minor");
        assert_eq!(update_kind(&v("4.22.1"), &v("5.0.0")), "major");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.2")), "rollback");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.3")), "none");
        let reasons = |update: &str, from: &str, to: &str| -> Vec<String> {
            cvo_preconditions(update, &v(from), &v(to))
                .into_iter()
                .map(|b| b.reason)
                .collect()
        };
        assert!(reasons("minor", "4.16.3", "4.17.0").is_empty());
        assert_eq!(
            reasons("minor", "4.16.3", "4.18.0"),
            ["MultipleMinorVersionsUpdate"]
        );
        assert!(reasons("major", "4.22.1", "5.0.0").is_empty());
        assert_eq!(reasons("major", "5.3.0", "6.0.0"), ["MajorVersionUpdate"]);
        assert!(reasons("rollback", "4.16.3", "4.16.2").is_empty());
        assert_eq!(
            reasons("rollback", "4.17.0", "4.16.9"),
            ["LowDesiredVersion"]
        );
    }

    #[test]
    fn status_max_openshift_version_is_read_as_the_manager_writes_it() {
        assert_eq!(
            parse_max_ocp("4.17"),
            MaxOpenShiftVersion::Valid {
                major: 4,
                minor: 17
            }
        );
        assert!(matches!(
            parse_max_ocp("four"),
            MaxOpenShiftVersion::Invalid { .. }
        ));
    }
}
