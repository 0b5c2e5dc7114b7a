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
//! The plan starts from the last completed version, even when another update is in flight;
//! the CVO's preconditions are judged against `status.desired` as the CVO judges them: while
//! an update is in flight a minor or major request is refused (`UpdateInProgress`), and a
//! rollback may go only to "previous" (the newest history entry of another version, whatever
//! its state, so an in-flight patch can be rolled back), within the z-stream.
//! A PO that cannot be planned (catalog unreadable, no candidate at all) is reported with the
//! reason and stays where it is; that alone does not block the update.
//!
//! For each PO's first hop the plan also reads the bundle (and the installed one) as the
//! manager would, catalog-carried objects or image, and shows what its ServiceAccounts could
//! do by power class, what is new against the installed bundle, and the `spec.consent` fields
//! the PO lacks, without which the manager holds that hop ([`hop_powers`]: the controller's own
//! render and refusal).
//!
//! Under `spec.upgradeApproval: Manual` (issue 23 item 5) the walk takes each approval as given
//! and marks each hop that waits for one (`needsApproval`, "(needs approval)"), and a PO that
//! waits for an approval now names the bundle (`waitingForApproval`, with the `pomctl approve`
//! command); its Upgradeable is then False, so it blocks a minor update. A paused PO's walk
//! stops at once (held), and it blocks too.
//!
//! Exit codes: 0 the CVO would start the update; 1 the update would be blocked (the blockers
//! are listed); 2 errors (no ClusterVersion, unreadable cluster, bad `--to`).

use std::collections::BTreeMap;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams};
use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::labels;
use pom_api::olm::OperatorCondition;
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, CLUSTER_VERSION_NAME, ClusterOperator, ClusterVersion,
};
use pom_oci::ImagePuller;
use pom_policy::chain;
use pom_policy::hop_powers::hop_powers;
use pom_policy::namespace_clash;
use pom_policy::plan::{self, MAX_PLANNED_HOPS, PlanEnd};
use pom_policy::render_request;
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, Hop, Installed, OperatorGate, PoSnapshot, gate_of,
    unsettled_move_of,
};
use pom_policy::snapshot::{ConfigView, GuardState};
use pom_policy::{PinState, PoRequest, Upgradeability, decide};
use pom_render::BundleFiles;
use pom_resolver::cluster::{
    ClusterPhase, ClusterVersionSnapshot, HistoryEntry, PhaseKind, cluster_phase,
};
use pom_resolver::select::{CatalogInput, InstalledBundle as ResolverInstalled};
use pom_resolver::version::parse_tolerant;
use semver::Version;
use serde::Serialize;

use crate::cmd::graph::{Format, emit};
use crate::cmd::plan_chain;
use crate::graph::{self, HopTo, Stop, UpgradeGraph};
use crate::live::{self, FetchedCatalog};

/// Flags of `pomctl plan`.
#[derive(clap::Args)]
pub struct Args {
    /// The OpenShift version the cluster would update to (as `oc adm upgrade --to`). More
    /// than one minor ahead, the plan walks every minor between (a chained update).
    #[arg(long, value_name = "VERSION")]
    pub to: String,
    /// The versions a chained update goes through, in order (comma-separated), for paths that
    /// are not every minor at `X.Y.0` (EUS-to-EUS: `--via 4.17.12`).
    #[arg(long, value_name = "VERSION", value_delimiter = ',')]
    pub via: Vec<String>,
    #[command(flatten)]
    pub access: live::CatalogAccess,
    /// Output format; `graph` draws each PlatformOperator's upgrade graph under the update.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = PlanOutput::Human)]
    pub output: PlanOutput,
    /// Drawing format for `-o graph`.
    #[arg(long, value_enum, default_value_t = Format::Mermaid)]
    pub graph_format: Format,
}

/// Output formats of `pomctl plan`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlanOutput {
    Human,
    Json,
    Yaml,
    /// The upgrade graph of every PlatformOperator (see `--graph-format`).
    Graph,
}

/// Everything the plan is computed from: read from the cluster, then judged purely.
#[derive(Debug)]
pub struct Inputs {
    pub cluster_version: ClusterVersion,
    pub platform_operators: Vec<PlatformOperator>,
    pub catalogs: Vec<FetchedCatalog>,
    pub cluster_operators: Vec<ClusterOperator>,
    /// The OperatorConditions POM created (labelled with their PlatformOperator).
    pub operator_conditions: Vec<OperatorCondition>,
    pub kube_version: Option<Version>,
    /// The owner label of each Namespace that carries one (name → the PlatformOperator it
    /// names): a watcher of another PO's install namespace is refused, as the manager does.
    pub namespace_owners: BTreeMap<String, String>,
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
    /// The hops POM offers or takes before a minor or major update the PO would block, while
    /// the cluster stays where it is (`spec.preUpdateHops`; issue 35 item 1): the first step
    /// of the chained plan, the same decision (review M2). Empty when none is needed.
    pub pre_update_hops: Vec<HopView>,
    /// Every move during the update, in order (empty when it stays), from where the
    /// pre-update hops end.
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
    /// What the first hop's bundle could do, what is new, and the consent it lacks (`None`
    /// without a hop).
    pub next_hop_powers: Option<HopPowersView>,
    /// The bundle the PO waits for the admin to approve now (`spec.upgradeApproval: Manual`),
    /// as its status says: `pomctl approve` approves it.
    pub waiting_for_approval: Option<String>,
    /// `spec.paused`: the PO moves nothing until it is resumed.
    pub paused: bool,
    /// A change of the operator's configuration (`spec.config`) the manager would apply now,
    /// or holds and why (issue 23 item 4), from the same `decide`.
    pub config_change: Option<String>,
}

/// The powers of a PO's first hop (issue 24): the controller's render of the bundle.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HopPowersView {
    pub bundle: String,
    /// Powers per class (`ClusterAdminEquivalent`, ...).
    pub classes: BTreeMap<String, usize>,
    /// The powers the installed bundle did not hold.
    pub added: Vec<String>,
    /// The `spec.consent` fields the PO lacks: the controller holds the hop until they are set.
    pub consent_needed: Vec<String>,
    /// Why the powers could not be judged (bundle unreadable, or refused for more than consent).
    pub error: Option<String>,
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
#[serde(rename_all = "camelCase")]
pub struct HopView {
    pub from: Option<String>,
    pub to: String,
    pub version: String,
    pub pin: String,
    /// Under `spec.upgradeApproval: Manual`, the hop waits until the admin approves its bundle
    /// (`pomctl approve`); false when `spec.approvedBundle` already names it.
    pub needs_approval: bool,
    /// The move was under way when the plan was made (the PO's unsettled move).
    pub in_flight: bool,
}

impl From<&plan::PlannedHop> for HopView {
    fn from(h: &plan::PlannedHop) -> Self {
        Self {
            from: h.from.clone(),
            to: h.to.name.clone(),
            version: h.to.version.clone(),
            pin: h.pin.range.clone(),
            needs_approval: h.needs_approval,
            in_flight: h.in_flight,
        }
    }
}

/// An Upgradeable verdict.
#[derive(Debug, Clone, Serialize)]
pub struct VerdictView {
    pub status: String,
    pub reason: String,
    pub message: String,
}

impl From<&Upgradeability> for VerdictView {
    fn from(v: &Upgradeability) -> Self {
        Self {
            status: v.status.to_string(),
            reason: v.reason.to_string(),
            message: v.message.clone(),
        }
    }
}

impl From<&PinState> for PinView {
    fn from(pin: &PinState) -> Self {
        Self {
            range: pin.range.clone(),
            reason: pin.reason.to_string(),
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
    let via = args
        .via
        .iter()
        .map(|v| parse_tolerant(v).with_context(|| format!("--via {v:?} is not a version")))
        .collect::<anyhow::Result<Vec<Version>>>()?;
    let inputs = live::block_on(gather(
        &args.access.insecure_registries,
        &args.access.manager_namespace,
    ))??;
    let desired = cluster_phase(&snapshot(&inputs.cluster_version)?)
        .context("reading the cluster's current version")?
        .target;
    if plan_chain::is_chain(&desired, &target, &via) {
        if args.output == PlanOutput::Graph {
            bail!("-o graph draws one update; plan each step with its own --to");
        }
        return plan_chain::print(&plan_chain::compute(&inputs, &target, &via)?, args.output);
    }
    let mut plan = compute(&inputs, &args.to, &target)?;
    let bundles = live::block_on(fetch_hop_bundles(
        &plan,
        &inputs,
        &args.access.insecure_registries,
    ))?;
    attach_hop_powers(&mut plan, &inputs, &bundles);
    match args.output {
        PlanOutput::Human => print!("{}", human(&plan)),
        PlanOutput::Json => println!("{}", serde_json::to_string_pretty(&plan)?),
        PlanOutput::Yaml => print!("{}", serde_saphyr::to_string(&plan)?),
        PlanOutput::Graph => {
            let drawn = graphs(&inputs, &args.to)?;
            for (name, why) in &drawn.undrawn {
                eprintln!("PlatformOperator {name}: no graph: {why}");
            }
            emit(&drawn.graphs, args.graph_format)?;
        }
    }
    Ok(if plan.admitted {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

pub(crate) async fn gather(
    insecure_registries: &[String],
    manager_namespace: &str,
) -> anyhow::Result<Inputs> {
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
    let catalogs = live::fetch_catalogs(&client, insecure_registries, manager_namespace).await?;
    // The cluster may have no OperatorCondition API (the gates are then absent).
    let operator_conditions = match Api::<OperatorCondition>::all(client.clone())
        .list(&ListParams::default().labels(labels::OWNER_PO))
        .await
    {
        Ok(list) => list.items,
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(err) => return Err(err).context("listing OperatorConditions"),
    };
    let kube_version = client
        .apiserver_version()
        .await
        .ok()
        .and_then(|info| parse_tolerant(&info.git_version).ok());
    let namespace_owners = Api::<Namespace>::all(client.clone())
        .list_metadata(&ListParams::default().labels(labels::OWNER_PO))
        .await
        .context("listing the Namespaces POM labelled")?
        .items
        .into_iter()
        .filter_map(|ns| {
            let owner = ns.labels().get(labels::OWNER_PO).cloned()?;
            Some((ns.name_any(), owner))
        })
        .collect();
    Ok(Inputs {
        cluster_version,
        platform_operators,
        catalogs,
        cluster_operators,
        operator_conditions,
        kube_version,
        namespace_owners,
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
    // The CVO judges a request against `status.desired`: the in-flight target, if any.
    let desired = now.target.clone();
    let in_flight = (now.kind != PhaseKind::Steady).then(|| desired.to_string());
    let phase = update_phase(&live, to)?;
    let update = update_kind(&desired, target);
    let gated = matches!(update, "minor" | "major");

    let mut blockers = cvo_preconditions(update, &live.history, &desired, target);
    if gated && let Some(flight) = &in_flight {
        blockers.push(Blocker {
            source: "ClusterVersion".into(),
            reason: "UpdateInProgress".into(),
            message: format!(
                "an update to {flight} is in progress; the CVO refuses minor and major updates \
                 until it completes (a request made now stays pending and starts by itself then)"
            ),
        });
    }
    let platform_operators: Vec<PoPlan> = inputs
        .platform_operators
        .iter()
        .map(|po| {
            let steady_at = in_flight.is_none().then_some(&current);
            let phases = Phases {
                live: &now,
                planned: &phase,
            };
            plan_po(po, inputs, phases, gated, steady_at, Timestamp::now())
        })
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

pub(crate) fn snapshot(cv: &ClusterVersion) -> anyhow::Result<ClusterVersionSnapshot> {
    pom_policy::snapshot::cluster_version_snapshot(cv).ok_or_else(|| {
        anyhow::anyhow!(
            "ClusterVersion version has no status yet: the cluster-version operator has not reported"
        )
    })
}

/// The phase POM will see once the CVO accepts an update to `to` (it decides the pins).
fn update_phase(live: &ClusterVersionSnapshot, to: &str) -> anyhow::Result<ClusterPhase> {
    // The history as the CVO would write it on accepting the request: a new Partial entry on
    // top, the one in flight (if any) superseded.
    let mut history = vec![HistoryEntry {
        state: "Partial".into(),
        version: to.to_owned(),
        completion_time: None,
    }];
    history.extend(live.history.iter().map(|entry| {
        HistoryEntry {
            completion_time: entry
                .completion_time
                .clone()
                .or_else(|| Some("superseded".into())),
            ..entry.clone()
        }
    }));
    let hypothetical = ClusterVersionSnapshot {
        history,
        desired_version: Some(to.to_owned()),
        requested_version: Some(to.to_owned()),
        progressing: Some(true),
    };
    cluster_phase(&hypothetical).with_context(|| format!("--to {to:?}"))
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

/// The CVO's other preconditions (GiantHop, Rollback), judged against `status.desired`:
/// refused whatever Upgradeable says (`pkg/payload/precondition/clusterversion/`).
fn cvo_preconditions(
    update: &str,
    history: &[HistoryEntry],
    current: &Version,
    target: &Version,
) -> Vec<Blocker> {
    let refuse = |reason: &str, message: String| {
        vec![Blocker {
            source: "ClusterVersion".into(),
            reason: reason.into(),
            message,
        }]
    };
    match update {
        // "previous" is the newest history entry whose version differs from the desired one,
        // whatever its state (an in-flight patch can be rolled back).
        "rollback" => match history
            .iter()
            .filter_map(|h| parse_tolerant(h.version.trim()).ok())
            .find(|v| v.cmp_precedence(current).is_ne())
        {
            None => refuse(
                "LowDesiredVersion",
                format!(
                    "{target} is below the current target {current}, and the cluster has no previous version to roll back to"
                ),
            ),
            Some(previous) if previous.cmp_precedence(target).is_ne() => refuse(
                "LowDesiredVersion",
                format!(
                    "{target} is below the current target {current}, and the CVO rolls back only to the cluster's previous version {previous}"
                ),
            ),
            Some(_) if (current.major, current.minor) != (target.major, target.minor) => refuse(
                "LowDesiredVersion",
                format!(
                    "the CVO rolls back only within a z-stream (to the previous {}.{} release); {target} is outside it",
                    current.major, current.minor
                ),
            ),
            Some(_) => Vec::new(),
        },
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

/// The catalogs a PO resolves from, as the manager would see them: the one it names, or every
/// Catalog; a Catalog whose content cannot be read counts as unavailable.
fn catalogs_for<'a>(po: &PlatformOperator, catalogs: &'a [FetchedCatalog]) -> CatalogView<'a> {
    let named = po.spec.package.catalog.as_deref();
    let chosen: Vec<&FetchedCatalog> = catalogs
        .iter()
        .filter(|c| named.is_none_or(|n| n == c.name))
        .collect();
    if chosen.is_empty() {
        return CatalogView::Unavailable(match named {
            Some(name) => format!("Catalog {name:?} (spec.package.catalog) does not exist"),
            None => "no Catalog exists".to_owned(),
        });
    }
    let unavailable: Vec<String> = chosen
        .iter()
        .filter_map(|c| {
            c.content
                .as_ref()
                .err()
                .map(|e| format!("Catalog {}: {e}", c.name))
        })
        .collect();
    let readable: Vec<CatalogContent<'a>> = chosen
        .iter()
        .filter_map(|c| {
            c.content.as_ref().ok().map(|content| CatalogContent {
                name: c.name.clone(),
                priority: c.priority,
                content,
            })
        })
        .collect();
    if readable.is_empty() || (named.is_some() && !unavailable.is_empty()) {
        return CatalogView::Unavailable(unavailable.join("; "));
    }
    CatalogView::Ready {
        catalogs: readable,
        unavailable,
    }
}

/// What the manager would gather for `po` once the update runs (the cluster in `phase`).
pub(crate) fn po_snapshot<'a>(
    po: &PlatformOperator,
    inputs: &'a Inputs,
    phase: &ClusterPhase,
    now: Timestamp,
) -> PoSnapshot<'a> {
    let name = po.name_any();
    let status = po.status.clone().unwrap_or_default();
    let watched_owner = po
        .spec
        .watch_namespace
        .as_deref()
        .and_then(|ns| inputs.namespace_owners.get(ns))
        .map(String::as_str);
    PoSnapshot {
        request: PoRequest::from_spec(&name, &po.spec),
        duplicate_of: namespace_clash::duplicate_winner(po, &inputs.platform_operators),
        namespace_clash: namespace_clash::namespace_clash(
            po,
            &inputs.platform_operators,
            watched_owner,
        ),
        name,
        requested_update: None,
        installed: status
            .installed_bundle
            .as_ref()
            .map(|b| Installed::from_status(b, status.max_open_shift_version.as_deref())),
        hop: status.active_hop.as_ref().map(Hop::from),
        cluster: ClusterView::OpenShift(Ok(phase.clone())),
        kube_version: inputs.kube_version.clone(),
        catalogs: catalogs_for(po, &inputs.catalogs),
        gate: gate_for(po, &inputs.operator_conditions),
        now,
        found_bundle_label: None,
        unsettled_move: unsettled_move_of(po),
        // The plan shows what the decisions would be; whether the manager may write is the
        // manager's own check (its ClusterOperator says when it may not).
        guard: GuardState::Unchecked,
        paused: po.spec.paused,
        // `spec.config` against what runs; the cluster proxy is the manager's to read (a
        // proxy change shows on the PO's status once the manager judged it).
        config: ConfigView::keeping_proxy(po),
    }
}

/// The upgrade graphs of `pomctl plan -o graph`, and the POs that could not be drawn.
#[derive(Debug)]
pub struct Drawn {
    pub graphs: Vec<UpgradeGraph>,
    /// `(PlatformOperator, why)`: no readable request or catalog content.
    pub undrawn: Vec<(String, String)>,
}

/// Every PO's upgrade graph under an update to `to` (pure: everything comes from `inputs`):
/// the hops are the plan's own walk ([`pom_policy::plan::plan`], the manager's `decide`), the
/// pin and the rejections the resolver's answers to the request the manager builds
/// ([`pom_policy::decide::resolve_request`]).
///
/// # Errors
/// When the ClusterVersion cannot be judged, as [`compute`].
pub fn graphs(inputs: &Inputs, to: &str) -> anyhow::Result<Drawn> {
    let live = snapshot(&inputs.cluster_version)?;
    let phase = update_phase(&live, to)?;
    let now = Timestamp::now();
    let mut drawn = Drawn {
        graphs: Vec::new(),
        undrawn: Vec::new(),
    };
    for po in &inputs.platform_operators {
        let snapshot = po_snapshot(po, inputs, &phase, now);
        match po_graph(&snapshot) {
            Ok(graph) => drawn.graphs.push(graph),
            Err(why) => drawn.undrawn.push((snapshot.name.clone(), why)),
        }
    }
    Ok(drawn)
}

fn po_graph(snapshot: &PoSnapshot<'_>) -> Result<UpgradeGraph, String> {
    let request = snapshot.request.as_ref().map_err(ToString::to_string)?;
    let catalogs = match &snapshot.catalogs {
        CatalogView::Ready { catalogs, .. } => catalogs,
        CatalogView::Loading { catalog } => {
            return Err(format!("Catalog {catalog} has not been read yet"));
        }
        CatalogView::Unavailable(why) => return Err(why.clone()),
    };
    let catalog_inputs: Vec<CatalogInput<'_>> = catalogs
        .iter()
        .map(|c| (c.name.as_str(), c.priority, c.content))
        .collect();
    let installed = snapshot
        .installed
        .as_ref()
        .map(|i| {
            i.version.clone().map(|version| ResolverInstalled {
                name: i.bundle.name.clone(),
                version,
            })
        })
        .transpose()?;
    let resolve_request = pom_policy::decide::resolve_request(
        request,
        &catalog_inputs,
        installed,
        snapshot.cluster.phase(),
        snapshot.kube_version.as_ref(),
    );
    let walk = plan::plan(snapshot);
    let hops = walk
        .hops
        .iter()
        .map(|h| {
            parse_tolerant(&h.to.version)
                .map(|version| HopTo {
                    name: h.to.name.clone(),
                    version,
                })
                .map_err(|e| format!("hop to {}: {e}", h.to.name))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let stop = match &walk.end {
        PlanEnd::Settled => Stop::Settled,
        PlanEnd::Held(why) => Stop::Held {
            why: why.to_string(),
        },
        PlanEnd::Problem(problem) => Stop::Blocked {
            why: problem.message.clone(),
        },
        PlanEnd::Cycle { bundle } => Stop::Cycle {
            bundle: bundle.clone(),
        },
        PlanEnd::HopLimit => Stop::HopLimit,
    };
    graph::for_request(
        format!("PlatformOperator {}", snapshot.name),
        &resolve_request,
        &hops,
        stop,
    )
    .map_err(|e| e.to_string())
}

/// One PO under the update: the manager's own `decide`, walked hop by hop
/// ([`pom_policy::plan::plan`]) over the phase the update will put the cluster in.
/// The files of each PO's first hop bundle and of its installed bundle, by bundle name, read
/// as the manager reads them (catalog-carried objects, else the image); an unreadable one is
/// kept with its error.
type FetchedBundles = BTreeMap<String, Result<BundleFiles, String>>;

async fn fetch_hop_bundles(
    plan: &Plan,
    inputs: &Inputs,
    insecure_registries: &[String],
) -> FetchedBundles {
    let puller = ImagePuller::new(insecure_registries.to_vec());
    let mut fetched = FetchedBundles::new();
    for (po, view) in inputs
        .platform_operators
        .iter()
        .zip(&plan.platform_operators)
    {
        let Some(hop) = view.pre_update_hops.first().or(view.hops.first()) else {
            continue;
        };
        let installed = po.status.as_ref().and_then(|s| s.installed_bundle.as_ref());
        let wanted = std::iter::once((hop.to.clone(), None))
            .chain(installed.map(|b| (b.name.clone(), b.image.clone())));
        for (name, recorded_image) in wanted {
            if fetched.contains_key(&name) {
                continue;
            }
            let files = match (catalog_bundle(inputs, &name), recorded_image) {
                (Some(bundle), _) => live::bundle_files(&puller, bundle).await,
                (None, Some(image)) => live::bundle_image_files(&puller, &image).await,
                (None, None) => Err(format!("no catalog lists bundle {name}")),
            };
            fetched.insert(name, files);
        }
    }
    fetched
}

/// Bundle `name` in the first readable catalog that lists it.
fn catalog_bundle<'a>(inputs: &'a Inputs, name: &str) -> Option<&'a pom_resolver::fbc::Bundle> {
    inputs.catalogs.iter().find_map(|c| {
        c.content
            .as_ref()
            .ok()?
            .packages
            .values()
            .find_map(|p| p.bundles.get(name))
    })
}

/// Judges the powers of each PO's first hop (pure: the bundles were fetched before).
fn attach_hop_powers(plan: &mut Plan, inputs: &Inputs, bundles: &FetchedBundles) {
    for (po, view) in inputs
        .platform_operators
        .iter()
        .zip(plan.platform_operators.iter_mut())
    {
        let Some(hop) = view.pre_update_hops.first().or(view.hops.first()) else {
            continue;
        };
        let status = po.status.clone().unwrap_or_default();
        let namespace = status
            .install_namespace
            .or_else(|| po.spec.install_namespace.clone())
            .unwrap_or_else(|| po.name_any());
        // What the first hop carries: the spec's configuration (the proxy adds no power).
        let config = pom_api::platform_operator::AppliedConfig::of(po.spec.config.as_ref(), None);
        let options = render_request::render_options(po, &namespace, &config);
        let installed = status
            .installed_bundle
            .as_ref()
            .and_then(|b| bundles.get(&b.name)?.as_ref().ok());
        let mut powers = HopPowersView {
            bundle: hop.to.clone(),
            classes: BTreeMap::new(),
            added: Vec::new(),
            consent_needed: Vec::new(),
            error: None,
        };
        match (bundles.get(&hop.to), options) {
            (_, Err(e)) => powers.error = Some(e.to_string()),
            (Some(Ok(next)), Ok(options)) => match hop_powers(next, installed, &options) {
                Ok(judged) => {
                    powers.classes = judged
                        .classes
                        .iter()
                        .map(|(class, n)| (class.to_string(), *n))
                        .collect();
                    powers.added = judged.added.iter().map(ToString::to_string).collect();
                    powers.consent_needed = judged
                        .consent_needed
                        .iter()
                        .map(|c| format!("spec.consent.{}: true", c.consent_field()))
                        .chain(
                            judged
                                .webhooks_needed
                                .iter()
                                .map(|w| format!("spec.consent.webhooks: [{w}]")),
                        )
                        .collect();
                }
                Err(e) => powers.error = Some(e.to_string()),
            },
            (Some(Err(e)), Ok(_)) => powers.error = Some(e.clone()),
            (None, Ok(_)) => powers.error = Some(format!("bundle {} was not fetched", hop.to)),
        }
        view.next_hop_powers = Some(powers);
    }
}

/// The cluster's phase as it is now, and the phase of the update planned.
#[derive(Clone, Copy)]
struct Phases<'a> {
    live: &'a ClusterPhase,
    planned: &'a ClusterPhase,
}

fn plan_po(
    po: &PlatformOperator,
    inputs: &Inputs,
    phases: Phases<'_>,
    gated: bool,
    steady_at: Option<&Version>,
    now: Timestamp,
) -> PoPlan {
    let phase = phases.planned;
    let name = po.name_any();
    let status = po.status.clone().unwrap_or_default();
    let snapshot = po_snapshot(po, inputs, phase, now);
    let walk = plan::plan(&snapshot);
    let mut result = PoPlan {
        name,
        package: po.spec.package.name.clone(),
        installed: status.installed_bundle.as_ref().map(|b| BundleView {
            name: b.name.clone(),
            version: b.version.clone(),
        }),
        pin: walk.first.pin.as_ref().map(PinView::from),
        bundle: walk.last.as_ref().map(|b| BundleView {
            name: b.name.clone(),
            version: b.version.clone(),
        }),
        pre_update_hops: Vec::new(),
        hops: walk.hops.iter().map(HopView::from).collect(),
        end: String::new(),
        error: None,
        upgradeable: VerdictView::from(&Upgradeability::yes(
            "not a minor or major update: Upgradeable is not consulted",
        )),
        blocks_update: false,
        upgradeable_after: None,
        next_hop_powers: None,
        waiting_for_approval: waiting_for_approval(po),
        paused: po.spec.paused,
        config_change: walk.first.config_change.as_ref().map(ToString::to_string),
    };
    (result.end, result.error) = end_of(&walk);
    // A minor or major update requested from a steady cluster: what the manager would do
    // before it (the pre-update hops) and during it, as the chained plan's first step
    // (`pom_policy::chain`), so both plans show the one decision.
    if gated
        && let Some(current) = steady_at
        && let Some(step) = chain::chain(
            &po_snapshot(po, inputs, &ClusterPhase::steady(current.clone()), now),
            current,
            std::slice::from_ref(&phase.target),
        )
        .steps
        .into_iter()
        .next()
        && !step.before_hops().is_empty()
    {
        result.pre_update_hops = step.before_hops().iter().map(HopView::from).collect();
        result.bundle = step.last().map(|b| BundleView {
            name: b.name.clone(),
            version: b.version.clone(),
        });
        result.hops = step
            .during
            .as_ref()
            .map(|during| during.hops.iter().map(HopView::from).collect())
            .unwrap_or_default();
        (result.end, result.error) = match (&step.blocks, &step.during) {
            (Some(why), _) => (format!("Blocked: {why}"), None),
            (None, Some(during)) => end_of(during),
            (None, None) => ("Settled".to_owned(), None),
        };
    }
    if phase.kind != PhaseKind::Steady
        && result.pre_update_hops.is_empty()
        && let Some(last) = &walk.last
    {
        // Once settled on the target, the next minor is judged from the target.
        let mut after = snapshot.clone();
        after.installed = Some(Installed::from_status(
            last,
            walk_max_ocp(&walk, &snapshot).as_deref(),
        ));
        after.hop = None;
        after.cluster = ClusterView::OpenShift(Ok(ClusterPhase::steady(phase.target.clone())));
        result.upgradeable_after = Some(VerdictView::from(&decide(&after).verdict));
    }
    if gated {
        // The CVO judges the request from where the cluster heads now (`status.desired`), so
        // what blocks it is the PO's verdict in the live phase, as the manager reports it.
        let live = decide(&po_snapshot(po, inputs, phases.live, now)).verdict;
        let verdict = upgradeable_for_update(po, &live);
        result.blocks_update = !verdict.allows_update();
        result.upgradeable = VerdictView::from(&verdict);
    }
    result
}

/// How a walk ends, for people, and why the PO cannot be planned when nothing moves at all.
fn end_of(walk: &plan::PoPlan) -> (String, Option<String>) {
    match &walk.end {
        PlanEnd::Settled => ("Settled".to_owned(), None),
        PlanEnd::Held(why) => (format!("Held: {why}"), None),
        PlanEnd::Problem(problem) => (
            if walk.hops.is_empty() {
                "Unplanned".to_owned()
            } else {
                format!("Blocked: {}", problem.message)
            },
            Some(problem.message.clone()),
        ),
        PlanEnd::Cycle { bundle } => (format!("Cycle: the catalog leads back to {bundle}"), None),
        PlanEnd::HopLimit => (format!("HopLimit: more than {MAX_PLANNED_HOPS} hops"), None),
    }
}

/// The bundle PlatformOperator `po` waits for the admin to approve, as its status (for its
/// current generation) says: the pending move's bundle while Installed or Progressing says
/// `UpgradePendingApproval`.
pub fn waiting_for_approval(po: &PlatformOperator) -> Option<String> {
    let waits = [types::INSTALLED, types::PROGRESSING].iter().any(|t| {
        live::condition(po, t).is_some_and(|c| c.reason == Reason::UpgradePendingApproval.as_str())
    });
    waits
        .then(|| po.status.as_ref()?.desired_bundle.as_ref())
        .flatten()
        .map(|b| b.name.clone())
}

/// The `maxOpenShiftVersion` of the bundle a walk ends on, as the manager would record it.
fn walk_max_ocp(walk: &plan::PoPlan, snapshot: &PoSnapshot<'_>) -> Option<String> {
    let last = walk.last.as_ref()?;
    if walk.hops.is_empty() {
        return snapshot
            .installed
            .as_ref()?
            .max_openshift_version
            .as_ref()
            .map(ToString::to_string);
    }
    let CatalogView::Ready { catalogs, .. } = &snapshot.catalogs else {
        return None;
    };
    catalogs
        .iter()
        .find_map(|c| {
            c.content
                .packages
                .values()
                .find_map(|p| p.bundles.get(&last.name))
        })
        .and_then(|b| b.properties.max_openshift_version.as_ref())
        .map(ToString::to_string)
}

/// The installed operator's gate, from the OperatorConditions POM labelled for this PO (as
/// the manager finds it: by owner and bundle labels).
fn gate_for(po: &PlatformOperator, conditions: &[OperatorCondition]) -> OperatorGate {
    let reported_before = po
        .annotations()
        .contains_key(labels::OPERATOR_CONDITION_REPORTED);
    let installed = po.status.as_ref().and_then(|s| s.installed_bundle.as_ref());
    let found = installed.and_then(|b| {
        conditions.iter().find(|oc| {
            let l = oc.labels();
            l.get(labels::OWNER_PO) == Some(&labels::label_value(&po.name_any()))
                && l.get(labels::BUNDLE) == Some(&labels::label_value(&b.name))
        })
    });
    let mut gate = found.map_or_else(OperatorGate::absent, gate_of);
    gate.reported |= reported_before;
    gate
}

/// This PO's part of Upgradeable for a minor or major update: the manager's verdict for the
/// next minor (compatibility and the operator's gate), and the PO must be upgradeable now (its
/// condition, for its current generation; anything else fails closed, as the aggregated
/// ClusterOperator does).
fn upgradeable_for_update(po: &PlatformOperator, verdict: &Upgradeability) -> Upgradeability {
    if !verdict.allows_update() {
        return verdict.clone();
    }
    match live::condition(po, types::UPGRADEABLE) {
        Some(c) if c.status == "True" => Upgradeability::yes(c.message.clone()),
        Some(c) => match c.reason.parse::<Reason>() {
            Ok(reason) => Upgradeability {
                status: ConditionStatus::parse_lenient(&c.status),
                reason,
                message: c.message.clone(),
            },
            Err(unknown) => Upgradeability::unknown(format!("{unknown}: {}", c.message)),
        },
        None => Upgradeability::unknown(
            "the PlatformOperator has not reported Upgradeable for its current generation (the manager counts that as not upgradeable)",
        ),
    }
}

/// The human report: the update, a table of POs, the hops, then the blockers and the answer.
/// The lines `human` prints under a PO's hops for its first hop's powers.
fn hop_powers_text(powers: &HopPowersView) -> String {
    if let Some(err) = &powers.error {
        return format!(
            "    powers of {}: not judged: {}\n",
            powers.bundle,
            live::short(err, 200)
        );
    }
    let classes: Vec<String> = powers
        .classes
        .iter()
        .map(|(class, n)| format!("{class} {n}"))
        .collect();
    let mut out = format!(
        "    powers of {}: {}\n",
        powers.bundle,
        if classes.is_empty() {
            "none beyond its own objects".to_owned()
        } else {
            classes.join(", ")
        }
    );
    for added in &powers.added {
        out.push_str(&format!("      new: {}\n", live::short(added, 200)));
    }
    if !powers.consent_needed.is_empty() {
        out.push_str(&format!(
            "      held until the PlatformOperator consents: {}\n",
            powers.consent_needed.join(", ")
        ));
    }
    out
}

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
                path.extend(p.hops.iter().map(|h| {
                    if h.needs_approval {
                        format!("{} (needs approval)", h.to)
                    } else {
                        h.to.clone()
                    }
                }));
                out.push_str(&format!("  {}: {}\n", p.name, path.join(" -> ")));
            }
            if !p.pre_update_hops.is_empty() {
                let path: Vec<String> = p
                    .pre_update_hops
                    .iter()
                    .map(|h| {
                        if h.needs_approval {
                            format!("{} (needs approval)", h.to)
                        } else {
                            h.to.clone()
                        }
                    })
                    .collect();
                out.push_str(&format!(
                    "    before the update, while the cluster stays at {}: {} (spec.preUpdateHops)\n",
                    c.current,
                    path.join(" -> ")
                ));
            }
            if p.paused {
                out.push_str(
                    "    paused (spec.paused): it moves nothing until resumed (spec.paused: false)\n",
                );
            }
            if let Some(change) = &p.config_change {
                out.push_str(&format!("    configuration: {change}\n"));
            }
            if let Some(bundle) = &p.waiting_for_approval {
                out.push_str(&format!(
                    "    waiting now for the admin's approval of {bundle}: pomctl approve {} --bundle {bundle}\n",
                    p.name
                ));
            }
            let approvals: Vec<&str> = p
                .hops
                .iter()
                .filter(|h| h.needs_approval)
                .map(|h| h.to.as_str())
                .collect();
            if !approvals.is_empty() {
                out.push_str(&format!(
                    "    spec.upgradeApproval is Manual: each of {} waits for `pomctl approve {} --bundle <bundle>`, and the update waits for the PlatformOperator to reach its pin\n",
                    approvals.join(", "),
                    p.name
                ));
            }
            if p.end != "Settled" {
                out.push_str(&format!("    then stops: {}\n", live::short(&p.end, 160)));
            }
            if let Some(powers) = &p.next_hop_powers {
                out.push_str(&hop_powers_text(powers));
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

    /// A ClusterVersion with `history` (state, version, completed) newest first.
    fn cluster_version(history: &[(&str, &str, bool)], progressing: bool) -> ClusterVersion {
        let entries: Vec<serde_json::Value> = history
            .iter()
            .map(|(state, version, done)| {
                serde_json::json!({
                    "state": state, "version": version, "image": format!("quay.io/ocp@{version}"),
                    "startedTime": "2026-01-01T00:00:00Z", "verified": false,
                    "completionTime": if *done { Some("2026-01-01T01:00:00Z") } else { None },
                })
            })
            .collect();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion",
            "metadata": {"name": "version"},
            "spec": {"clusterID": "c"},
            "status": {
                "desired": {"version": history[0].1, "image": "quay.io/ocp"},
                "history": entries,
                "observedGeneration": 1, "versionHash": "h", "availableUpdates": null,
                "conditions": [{"type": "Progressing", "status": if progressing { "True" } else { "False" },
                    "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            }
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    fn plan_for(cv: ClusterVersion, to: &str) -> Plan {
        let inputs = Inputs {
            cluster_version: cv,
            platform_operators: Vec::new(),
            catalogs: Vec::new(),
            cluster_operators: Vec::new(),
            operator_conditions: Vec::new(),
            kube_version: None,
            namespace_owners: BTreeMap::new(),
        };
        compute(&inputs, to, &v(to)).unwrap_or_else(|e| panic!("{e}"))
    }

    /// `p`: 1.0.0 <- 1.1.0 <- 1.2.0 <- 2.0.0 in `stable`.
    const CATALOG: &str = r#"
{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[
  {"name":"p.v1.0.0"},
  {"name":"p.v1.1.0","replaces":"p.v1.0.0"},
  {"name":"p.v1.2.0","replaces":"p.v1.1.0"},
  {"name":"p.v2.0.0","replaces":"p.v1.2.0"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"q/p@sha256:10",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.1.0","image":"q/p@sha256:11",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.1.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.2.0","image":"q/p@sha256:12",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.2.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v2.0.0","image":"q/p@sha256:20",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}
"#;

    fn po(name: &str, package: &str, installed: &str, version: &str) -> PlatformOperator {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": name, "generation": 1},
            "spec": {"package": {"name": package}},
            "status": {"observedGeneration": 1,
                       "installedBundle": {"name": installed, "version": version}},
        }))
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Issue 23 item 5: under Manual approval the plan walks every hop as the admin would
    /// approve it and marks each; a PO waiting for an approval now says which bundle, and
    /// blocks the update (its Upgradeable is False for it); a paused PO stops the walk and
    /// blocks.
    #[test]
    fn plan_shows_what_waits_for_approval_and_what_is_paused() {
        // One package per PO (`p`'s graph under each name): POs of one package are
        // duplicates, and only the oldest moves (review L4).
        let catalog: String = ["ahead", "waiting", "resting", "configured"]
            .iter()
            .map(|package| {
                CATALOG
                    .replace(r#""package":"p""#, &format!(r#""package":"{package}""#))
                    .replace(r#""name":"p","#, &format!(r#""name":"{package}","#))
                    .replace(
                        r#""packageName":"p""#,
                        &format!(r#""packageName":"{package}""#),
                    )
            })
            .collect();
        let content =
            pom_resolver::fbc::parse_documents([("catalog.json".to_owned(), catalog.into())])
                .unwrap_or_else(|e| panic!("{e}"));
        let with = |name: &str, spec: serde_json::Value, conditions: serde_json::Value| {
            let mut po = po(name, name, "p.v1.0.0", "1.0.0");
            let mut full = serde_json::json!({"package": {"name": name}});
            if let (Some(full), Some(extra)) = (full.as_object_mut(), spec.as_object()) {
                full.extend(extra.clone());
            }
            po.spec = serde_json::from_value(full).unwrap_or_else(|e| panic!("{e}"));
            let status = po.status.get_or_insert_with(Default::default);
            status.conditions =
                serde_json::from_value(conditions).unwrap_or_else(|e| panic!("{e}"));
            status.desired_bundle = Some(pom_api::platform_operator::BundleRef {
                name: "p.v1.1.0".into(),
                version: "1.1.0".into(),
            });
            po
        };
        let condition = |type_: &str, status: &str, reason: &str| {
            serde_json::json!({"type": type_, "status": status, "reason": reason,
                "message": format!("{reason}: pomctl approve"), "observedGeneration": 1,
                "lastTransitionTime": "2026-01-01T00:00:00Z"})
        };
        let inputs = Inputs {
            cluster_version: cluster_version(&[("Completed", "4.16.3", true)], false),
            platform_operators: vec![
                // Steady, waiting for nothing now; the first hop approved ahead (one bundle:
                // approving the next one replaces it).
                with(
                    "ahead",
                    serde_json::json!({"upgradeApproval": "Manual", "approvedBundle": "p.v1.1.0"}),
                    serde_json::json!([condition("Upgradeable", "True", "AsExpected")]),
                ),
                // Waiting for the approval of 1.1.0 now (an override moved its pin).
                with(
                    "waiting",
                    serde_json::json!({"upgradeApproval": "Manual"}),
                    serde_json::json!([
                        condition("Progressing", "False", "UpgradePendingApproval"),
                        condition("Upgradeable", "False", "UpgradePendingApproval"),
                    ]),
                ),
                with(
                    "resting",
                    serde_json::json!({"paused": true}),
                    serde_json::json!([condition("Upgradeable", "False", "Paused")]),
                ),
                // Stays on 1.0.0 with a configuration it does not run yet (issue 23 item 4).
                with(
                    "configured",
                    serde_json::json!({"package": {"name": "configured", "versionRange": "1.0.0"},
                        "config": {"env": [{"name": "LOG_LEVEL", "value": "debug"}]}}),
                    serde_json::json!([condition("Upgradeable", "True", "AsExpected")]),
                ),
                // A second PO of `ahead`'s package: the manager refuses it, so the plan
                // moves nothing of it (review L4).
                with(
                    "twin",
                    serde_json::json!({"package": {"name": "ahead"}}),
                    serde_json::json!([condition("Upgradeable", "True", "AsExpected")]),
                ),
            ],
            catalogs: vec![FetchedCatalog {
                name: "ops".into(),
                priority: 0,
                source: "configMap test".into(),
                content: Ok(content),
            }],
            cluster_operators: Vec::new(),
            operator_conditions: Vec::new(),
            kube_version: None,
            namespace_owners: BTreeMap::new(),
        };
        let plan = compute(&inputs, "4.17.0", &v("4.17.0")).unwrap_or_else(|e| panic!("{e}"));
        let of = |name: &str| {
            plan.platform_operators
                .iter()
                .find(|p| p.name == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        let hops = |name: &str| -> Vec<(String, bool)> {
            of(name)
                .hops
                .iter()
                .map(|h| (h.to.clone(), h.needs_approval))
                .collect()
        };
        assert_eq!(
            hops("ahead"),
            [
                ("p.v1.1.0".to_owned(), false),
                ("p.v1.2.0".to_owned(), true)
            ]
        );
        assert_eq!(of("ahead").end, "Settled");
        assert!(!of("ahead").blocks_update);
        assert_eq!(
            of("waiting").waiting_for_approval.as_deref(),
            Some("p.v1.1.0")
        );
        assert!(of("waiting").blocks_update);
        assert_eq!(of("waiting").upgradeable.reason, "UpgradePendingApproval");
        assert!(of("resting").hops.is_empty());
        assert!(
            of("resting")
                .end
                .starts_with("Held: the PlatformOperator is paused"),
            "{}",
            of("resting").end
        );
        assert!(of("resting").blocks_update);
        assert_eq!(of("resting").upgradeable.reason, "Paused");
        assert!(of("twin").hops.is_empty(), "{:?}", of("twin").hops);
        assert!(
            of("twin")
                .error
                .as_deref()
                .is_some_and(|e| e.contains("already managed by PlatformOperator ahead")),
            "{:#?}",
            of("twin")
        );
        assert!(of("twin").blocks_update);
        assert!(of("configured").hops.is_empty());
        assert!(of("configured").config_change.is_some());
        assert_eq!(of("ahead").config_change, None);
        let text = human(&plan);
        for line in [
            "  ahead: p.v1.0.0 -> p.v1.1.0 -> p.v1.2.0 (needs approval)\n",
            "each of p.v1.2.0 waits for `pomctl approve ahead --bundle <bundle>`",
            "waiting now for the admin's approval of p.v1.1.0: pomctl approve waiting --bundle p.v1.1.0",
            "    paused (spec.paused): it moves nothing until resumed",
            "  - PlatformOperator/waiting (UpgradePendingApproval)",
            "  - PlatformOperator/resting (Paused)",
            "    configuration: the configuration change sha256:",
            "restarts the operator; it is applied now\n",
        ] {
            assert!(text.contains(line), "{line:?} not in:\n{text}");
        }
    }

    /// `q`: 1.0.0 (max 4.16) <- 1.1.0 (max 4.16) <- 1.2.0 (no max) in `stable`.
    const CAPPED: &str = r#"
{"schema":"olm.package","name":"q","defaultChannel":"stable"}
{"schema":"olm.channel","package":"q","name":"stable","entries":[
  {"name":"q.v1.0.0"},
  {"name":"q.v1.1.0","replaces":"q.v1.0.0"},
  {"name":"q.v1.2.0","replaces":"q.v1.1.0"}]}
{"schema":"olm.bundle","package":"q","name":"q.v1.0.0","image":"q/q@sha256:10",
 "properties":[{"type":"olm.package","value":{"packageName":"q","version":"1.0.0"}},
   {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"q","name":"q.v1.1.0","image":"q/q@sha256:11",
 "properties":[{"type":"olm.package","value":{"packageName":"q","version":"1.1.0"}},
   {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"q","name":"q.v1.2.0","image":"q/q@sha256:12",
 "properties":[{"type":"olm.package","value":{"packageName":"q","version":"1.2.0"}}]}
"#;

    /// Review M2: the single-update plan to the next minor shows the pre-update hops a PO
    /// needs (the chained plan's first step, one decision), and the hops during the update
    /// go on from where they end.
    #[test]
    fn a_minor_update_plan_shows_the_pre_update_hops() {
        let content =
            pom_resolver::fbc::parse_documents([("catalog.json".to_owned(), CAPPED.into())])
                .unwrap_or_else(|e| panic!("{e}"));
        let mut capped = po("capped", "q", "q.v1.0.0", "1.0.0");
        if let Some(status) = capped.status.as_mut() {
            status.max_open_shift_version = Some("4.16".into());
        }
        let inputs = Inputs {
            cluster_version: cluster_version(&[("Completed", "4.16.3", true)], false),
            platform_operators: vec![capped],
            catalogs: vec![FetchedCatalog {
                name: "ops".into(),
                priority: 0,
                source: "configMap test".into(),
                content: Ok(content),
            }],
            cluster_operators: Vec::new(),
            operator_conditions: Vec::new(),
            kube_version: None,
            namespace_owners: BTreeMap::new(),
        };
        let plan = compute(&inputs, "4.17.0", &v("4.17.0")).unwrap_or_else(|e| panic!("{e}"));
        let capped = &plan.platform_operators[0];
        let hops = |hops: &[HopView]| -> Vec<(String, bool)> {
            hops.iter()
                .map(|h| (h.to.clone(), h.needs_approval))
                .collect()
        };
        assert_eq!(
            hops(&capped.pre_update_hops),
            [("q.v1.1.0".to_owned(), true), ("q.v1.2.0".to_owned(), true)],
            "spec.preUpdateHops defaults to Offer: each hop waits for an approval"
        );
        assert!(capped.hops.is_empty(), "{:?}", capped.hops);
        assert_eq!(
            capped.bundle.as_ref().map(|b| b.name.as_str()),
            Some("q.v1.2.0")
        );
        assert_eq!(capped.error, None);
        assert!(
            capped.blocks_update,
            "it blocks until the hops have settled"
        );
        let text = human(&plan);
        let line = "    before the update, while the cluster stays at 4.16.3: q.v1.1.0 (needs approval) -> q.v1.2.0 (needs approval) (spec.preUpdateHops)\n";
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }

    #[test]
    fn plan_graph_draws_each_po_under_the_update_with_the_walk_of_the_plan() {
        let content =
            pom_resolver::fbc::parse_documents([("catalog.json".to_owned(), CATALOG.into())])
                .unwrap_or_else(|e| panic!("{e}"));
        let inputs = Inputs {
            cluster_version: cluster_version(&[("Completed", "4.16.3", true)], false),
            platform_operators: vec![
                po("mine", "p", "p.v1.0.0", "1.0.0"),
                po("lost", "nope", "x.v1", "1.0.0"),
            ],
            catalogs: vec![FetchedCatalog {
                name: "ops".into(),
                priority: 0,
                source: "configMap test".into(),
                content: Ok(content),
            }],
            cluster_operators: Vec::new(),
            operator_conditions: Vec::new(),
            kube_version: None,
            namespace_owners: BTreeMap::new(),
        };
        let drawn = graphs(&inputs, "4.17.0").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(drawn.graphs.len(), 1);
        let graph = &drawn.graphs[0];
        assert_eq!(graph.title, "PlatformOperator mine");
        assert_eq!(graph.catalog, "ops");
        // The same walk `pomctl plan` prints: every hop within the major.
        let plan = compute(&inputs, "4.17.0", &v("4.17.0")).unwrap_or_else(|e| panic!("{e}"));
        let printed: Vec<&str> = plan
            .platform_operators
            .iter()
            .find(|p| p.name == "mine")
            .map(|p| p.hops.as_slice())
            .unwrap_or_default()
            .iter()
            .map(|h| h.to.as_str())
            .collect();
        assert_eq!(graph.path(), printed);
        assert_eq!(graph.path(), ["p.v1.1.0", "p.v1.2.0"]);
        assert_eq!(
            graph.pin.as_ref().map(|p| p.range.as_str()),
            Some(">=1.0.0 <2.0.0-0")
        );
        let head = graph.nodes.iter().find(|n| n.name == "p.v2.0.0");
        assert_eq!(
            head.and_then(|n| n.rejection.as_ref()).map(|r| r.code()),
            Some("OutsidePin")
        );
        // A PO whose package no catalog offers is named, not drawn.
        assert_eq!(drawn.undrawn.len(), 1);
        assert_eq!(drawn.undrawn[0].0, "lost");
        assert!(drawn.undrawn[0].1.contains("nope"), "{:?}", drawn.undrawn);
    }

    #[test]
    fn preconditions_are_judged_against_the_update_in_flight() {
        let in_flight = || {
            cluster_version(
                &[("Partial", "4.16.4", false), ("Completed", "4.16.3", true)],
                true,
            )
        };
        // A minor request during the patch update: refused for the update in progress.
        let minor = plan_for(in_flight(), "4.17.0");
        assert!(!minor.admitted);
        assert!(
            minor
                .blockers
                .iter()
                .any(|b| b.reason == "UpdateInProgress" && b.message.contains("4.16.4")),
            "{:?}",
            minor.blockers
        );
        // Rolling the patch back to the completed version: allowed, and POM pins for Rollback.
        let back = plan_for(in_flight(), "4.16.3");
        assert!(back.admitted, "{:?}", back.blockers);
        assert_eq!(back.cluster.update, "rollback");
        assert_eq!(back.cluster.phase, PhaseKind::Rollback);
        // Below "previous": refused.
        let below = plan_for(in_flight(), "4.16.2");
        assert_eq!(
            below
                .blockers
                .iter()
                .map(|b| b.reason.as_str())
                .collect::<Vec<_>>(),
            ["LowDesiredVersion"]
        );
        // A steady cluster: the minor update is admitted (nothing else blocks it here).
        let steady = cluster_version(&[("Completed", "4.16.3", true)], false);
        let plan = plan_for(steady, "4.17.0");
        assert!(plan.admitted, "{:?}", plan.blockers);
        assert_eq!(plan.cluster.phase, PhaseKind::MinorUpgrade);
    }

    #[test]
    fn update_kinds_and_the_cvo_preconditions() {
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.4")), "patch");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.17.0")), "minor");
        assert_eq!(update_kind(&v("4.22.1"), &v("5.0.0")), "major");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.2")), "rollback");
        assert_eq!(update_kind(&v("4.16.3"), &v("4.16.3")), "none");
        let reasons = |update: &str, history: &[&str], from: &str, to: &str| -> Vec<String> {
            let history: Vec<HistoryEntry> = history
                .iter()
                .map(|version| HistoryEntry {
                    state: "Completed".into(),
                    version: (*version).into(),
                    completion_time: Some("then".into()),
                })
                .collect();
            cvo_preconditions(update, &history, &v(from), &v(to))
                .into_iter()
                .map(|b| b.reason)
                .collect()
        };
        assert!(reasons("minor", &["4.16.3"], "4.16.3", "4.17.0").is_empty());
        assert_eq!(
            reasons("minor", &["4.16.3"], "4.16.3", "4.18.0"),
            ["MultipleMinorVersionsUpdate"]
        );
        assert!(reasons("major", &["4.22.1"], "4.22.1", "5.0.0").is_empty());
        assert_eq!(
            reasons("major", &["5.3.0"], "5.3.0", "6.0.0"),
            ["MajorVersionUpdate"]
        );
        // Only to "previous": the newest entry whose version differs from the desired one.
        assert!(reasons("rollback", &["4.16.3", "4.16.2"], "4.16.3", "4.16.2").is_empty());
        assert_eq!(
            reasons(
                "rollback",
                &["4.16.3", "4.16.2", "4.16.1"],
                "4.16.3",
                "4.16.1"
            ),
            ["LowDesiredVersion"]
        );
        assert_eq!(
            reasons("rollback", &["4.16.3"], "4.16.3", "4.16.2"),
            ["LowDesiredVersion"]
        );
        // An in-flight 4.16.4 (history[0]) rolls back to the completed 4.16.3.
        assert!(reasons("rollback", &["4.16.4", "4.16.3"], "4.16.4", "4.16.3").is_empty());
        assert_eq!(
            reasons("rollback", &["4.17.0", "4.16.9"], "4.17.0", "4.16.9"),
            ["LowDesiredVersion"]
        );
    }
}
