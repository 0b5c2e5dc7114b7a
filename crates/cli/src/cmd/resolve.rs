//! `pomctl resolve`: the controller's resolution, offline, on a catalog file or folder (§9).
//!
//! Admins use it to ask "what would POM install or move to, and why not the others?" before
//! touching a cluster. It calls the same pure functions as the controller, so the answer is the
//! one the controller would give for the same inputs.
//!
//! Without `--cluster-version` there is no cluster pin (§9): the resolution is pure successor
//! resolution, exactly OLM v1 operator-controller's (the highest successor of the installed
//! bundle allowed by `--version-range`, pre-releases included unless that range excludes them),
//! reported with pin reason `Unpinned`. With it, the controller's pin of §4.2 applies.
//!
//! Exit codes: 0 a bundle was chosen; 1 no bundle satisfies the constraints (every rejection on
//! stderr); 2 bad input (unreadable catalog, unknown package or channel, bad version or range,
//! `--steady-state-range` without `--cluster-version`).

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use pom_policy::Upgradeability;
use pom_resolver::cluster::{ClusterPhase, ClusterVersionSnapshot, HistoryEntry, cluster_phase};
use pom_resolver::fbc::model::{Catalog, MaxOpenShiftVersion};
use pom_resolver::fbc::parse::load_path;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, InstalledBundle, PinPolicy, Rejection, Resolution, ResolveError, ResolveRequest,
    resolve,
};
use pom_resolver::verdict::bundle_upgradeability;
use pom_resolver::version::parse_tolerant;
use semver::Version;
use serde_json::{Value, json};

/// Flags of `pomctl resolve`.
#[derive(clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub query: Query,
    /// Output format.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Human)]
    pub output: Output,
}

/// The resolution question, shared by `pomctl resolve` and `pomctl graph`: both ask the
/// resolver the same thing, so the request is built in one place ([`Offline`]).
#[derive(clap::Args)]
pub struct Query {
    /// FBC file or folder (JSON stream, YAML multi-doc, split folders).
    #[arg(long, value_name = "PATH")]
    pub catalog: PathBuf,
    /// Package name (`spec.package.name`).
    #[arg(long, value_name = "P")]
    pub package: String,
    /// Channel (case-sensitive); default: the package's defaultChannel.
    #[arg(long, value_name = "C")]
    pub channel: Option<String>,
    /// Name of the installed bundle; without it, resolution is a first install.
    #[arg(long, value_name = "BUNDLE_NAME")]
    pub installed: Option<String>,
    /// Version of the installed bundle, needed only when it is not in the catalog.
    #[arg(long, value_name = "V", requires = "installed")]
    pub installed_version: Option<String>,
    /// `spec.package.versionRange` (Masterminds syntax).
    #[arg(long, value_name = "R")]
    pub version_range: Option<String>,
    /// `spec.steadyStateVersionRange` (Masterminds syntax); replaces the steady pin, so it needs
    /// `--cluster-version` (without it there is no pin to replace).
    #[arg(long, value_name = "R")]
    pub steady_state_range: Option<String>,
    /// Current OpenShift version; without it there is no cluster pin (pure successor resolution).
    #[arg(long, value_name = "V")]
    pub cluster_version: Option<String>,
    /// Target OpenShift version of an update in flight (default: no update).
    #[arg(long, value_name = "V", requires = "cluster_version")]
    pub cluster_target: Option<String>,
    /// Kubernetes version of the API server, for minKubeVersion checks.
    #[arg(long, value_name = "V")]
    pub kube_version: Option<String>,
}

/// A [`Query`] read and checked: the catalog loaded, versions and ranges parsed. It owns what a
/// [`ResolveRequest`] borrows.
pub struct Offline {
    pub catalog: Catalog,
    pub catalog_name: String,
    pub package: String,
    pub channel: Option<String>,
    pub cluster: Option<ClusterPhase>,
    pub installed: Option<InstalledBundle>,
    pub version_range: Option<VersionRange>,
    pub steady_state_range: Option<VersionRange>,
    pub kube_version: Option<Version>,
}

impl Offline {
    /// Reads the catalog and parses the flags.
    ///
    /// # Errors
    /// An unreadable catalog, a bad version or range, `--steady-state-range` without
    /// `--cluster-version`, an installed bundle that is neither in the catalog nor given a
    /// version.
    pub fn load(query: &Query) -> anyhow::Result<Self> {
        let catalog = load_path(&query.catalog)
            .with_context(|| format!("cannot read the catalog at {}", query.catalog.display()))?;
        let cluster = cluster_from_flags(query)?;
        if cluster.is_none()
            && let Some(range) = &query.steady_state_range
        {
            bail!(
                "--steady-state-range {range:?} replaces the steady pin =X.Y.Z, which exists only with \
                 --cluster-version: without it there is no pin at all (pure successor resolution, as \
                 OLM v1); pass --cluster-version, or bound the resolution with --version-range"
            );
        }
        let installed = installed_from_flags(query, &catalog)?;
        let version_range = parse_range("--version-range", query.version_range.as_deref())?;
        let steady_state_range =
            parse_range("--steady-state-range", query.steady_state_range.as_deref())?;
        let kube_version = query
            .kube_version
            .as_deref()
            .map(|text| {
                parse_tolerant(text)
                    .with_context(|| format!("--kube-version {text:?} is not a version"))
            })
            .transpose()?;
        Ok(Self {
            catalog,
            catalog_name: query.catalog.display().to_string(),
            package: query.package.clone(),
            channel: query.channel.clone(),
            cluster,
            installed,
            version_range,
            steady_state_range,
            kube_version,
        })
    }

    /// The one catalog, as the resolver takes catalogs.
    pub fn catalogs(&self) -> [CatalogInput<'_>; 1] {
        [(self.catalog_name.as_str(), 0, &self.catalog)]
    }

    /// The resolver's request for these flags.
    pub fn request<'a>(&'a self, catalogs: &'a [CatalogInput<'a>]) -> ResolveRequest<'a> {
        ResolveRequest {
            catalogs,
            package: &self.package,
            channel: self.channel.as_deref(),
            installed: self.installed.clone(),
            version_range: self.version_range.clone(),
            steady_state_range: self.steady_state_range.clone(),
            cluster: self.cluster.clone(),
            kube_version: self.kube_version.clone(),
            // §9: no cluster, no pin. `cluster: None` under FollowCluster would mean a steady
            // plain Kubernetes cluster and pin =X.Y.Z, so nothing would ever move.
            pin_policy: if self.cluster.is_some() {
                PinPolicy::FollowCluster
            } else {
                PinPolicy::Unpinned
            },
        }
    }
}

/// Output formats.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    Human,
    Json,
    Yaml,
}

/// Runs `pomctl resolve`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let offline = Offline::load(&args.query)?;
    let catalogs = offline.catalogs();
    let request = offline.request(&catalogs);
    let installed = offline.installed.clone();
    let cluster = offline.cluster.clone();
    let resolution = match resolve(&request) {
        Ok(resolution) => resolution,
        Err(err @ ResolveError::NoCandidate { .. })
        | Err(err @ ResolveError::AmbiguousCatalogs { .. }) => {
            eprintln!("error: {err}");
            return Ok(ExitCode::from(1));
        }
        Err(err) => bail!(err),
    };

    let upgradeable = cluster
        .as_ref()
        .map(|phase| verdict_for(&resolution, phase, &offline.catalog, &offline.package));
    match args.output {
        Output::Human => print!(
            "{}",
            human(&resolution, installed.as_ref(), upgradeable.as_ref())
        ),
        Output::Json => {
            let value = machine(
                &resolution,
                installed.as_ref(),
                cluster.as_ref(),
                upgradeable.as_ref(),
            );
            println!("{}", serde_json::to_string_pretty(&value)?);
        }
        Output::Yaml => {
            let value = machine(
                &resolution,
                installed.as_ref(),
                cluster.as_ref(),
                upgradeable.as_ref(),
            );
            print!("{}", serde_saphyr::to_string(&value)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `--cluster-version` alone is a steady cluster; with `--cluster-target` an update in flight.
fn cluster_from_flags(args: &Query) -> anyhow::Result<Option<ClusterPhase>> {
    let Some(current) = args.cluster_version.as_deref() else {
        return Ok(None);
    };
    let target = args.cluster_target.as_deref().unwrap_or(current);
    let moving = target != current;
    let mut history = Vec::new();
    if moving {
        history.push(HistoryEntry {
            state: "Partial".to_owned(),
            version: target.to_owned(),
            completion_time: None,
        });
    }
    history.push(HistoryEntry {
        state: "Completed".to_owned(),
        version: current.to_owned(),
        completion_time: Some("offline".to_owned()),
    });
    let snapshot = ClusterVersionSnapshot {
        history,
        desired_version: Some(target.to_owned()),
        requested_version: None,
        progressing: Some(moving),
    };
    let phase = cluster_phase(&snapshot)
        .map_err(|err| anyhow::anyhow!("--cluster-version/--cluster-target: {err}"))?;
    Ok(Some(phase))
}

/// The installed bundle: its version from the catalog, else from `--installed-version`.
fn installed_from_flags(
    args: &Query,
    catalog: &Catalog,
) -> anyhow::Result<Option<InstalledBundle>> {
    let Some(name) = args.installed.as_deref() else {
        return Ok(None);
    };
    let from_catalog = catalog
        .packages
        .get(&args.package)
        .and_then(|package| package.bundles.get(name));
    let version = match (&args.installed_version, from_catalog) {
        (Some(text), _) => Version::parse(text.trim().trim_start_matches('v'))
            .with_context(|| format!("--installed-version {text:?} is not a semantic version"))?,
        (None, Some(bundle)) => bundle.version.clone(),
        (None, None) => bail!(
            "bundle {name:?} is not in package {:?} of the catalog: pass --installed-version with its version",
            args.package
        ),
    };
    Ok(Some(InstalledBundle {
        name: name.to_owned(),
        version,
    }))
}

fn parse_range(flag: &str, text: Option<&str>) -> anyhow::Result<Option<VersionRange>> {
    text.map(|text| VersionRange::parse(text).with_context(|| format!("{flag} {text:?}")))
        .transpose()
}

/// §8.3 for the resulting bundle, judged on the version the cluster is heading to.
fn verdict_for(
    resolution: &Resolution,
    phase: &ClusterPhase,
    catalog: &Catalog,
    package: &str,
) -> Upgradeability {
    let chosen = InstalledBundle {
        name: resolution.bundle.name.clone(),
        version: resolution.bundle.version.clone(),
    };
    Upgradeability::from(bundle_upgradeability(
        &chosen,
        resolution.bundle.max_openshift_version.as_ref(),
        phase.running_on(),
        catalog.packages.get(package),
        Some(resolution.bundle.channel.as_str()),
    ))
}

fn human(
    resolution: &Resolution,
    installed: Option<&InstalledBundle>,
    upgradeable: Option<&Upgradeability>,
) -> String {
    let mut out = String::new();
    let bundle = &resolution.bundle;
    let _ = writeln!(out, "bundle:  {} ({})", bundle.name, bundle.version);
    let _ = writeln!(
        out,
        "from:    catalog {}, channel {}",
        bundle.catalog, bundle.channel
    );
    match (installed, resolution.stays) {
        (Some(_), true) => {
            let _ = writeln!(out, "move:    none, the installed bundle stays");
        }
        (Some(from), false) => {
            let _ = writeln!(
                out,
                "move:    {} ({}) -> {} ({})",
                from.name, from.version, bundle.name, bundle.version
            );
        }
        (None, _) => {
            let _ = writeln!(out, "move:    install");
        }
    }
    let _ = writeln!(
        out,
        "pin:     {} ({})",
        resolution.pin.range, resolution.pin.reason
    );
    if let Some(image) = &bundle.image {
        let _ = writeln!(out, "image:   {image}");
    }
    if let Some(max) = &bundle.max_openshift_version {
        let _ = writeln!(out, "maxOpenShiftVersion: {}", max_text(max));
    }
    if let Some(message) = &bundle.deprecation {
        let _ = writeln!(out, "deprecated: {message}");
    }
    if let Some(message) = &resolution.channel_deprecation {
        let _ = writeln!(out, "channel deprecated: {message}");
    }
    if let Some(message) = &resolution.package_deprecation {
        let _ = writeln!(out, "package deprecated: {message}");
    }
    if let Some(verdict) = upgradeable {
        let _ = writeln!(
            out,
            "upgradeable: {} ({}): {}",
            verdict.status, verdict.reason, verdict.message
        );
    }
    if resolution.rejected.is_empty() {
        let _ = writeln!(out, "rejected: none");
    } else {
        let _ = writeln!(out, "rejected ({}):", resolution.rejected.len());
        for rejection in &resolution.rejected {
            let _ = writeln!(
                out,
                "  - {} ({}): {}",
                rejection.bundle, rejection.version, rejection.reason
            );
        }
    }
    out
}

fn machine(
    resolution: &Resolution,
    installed: Option<&InstalledBundle>,
    cluster: Option<&ClusterPhase>,
    upgradeable: Option<&Upgradeability>,
) -> Value {
    let bundle = &resolution.bundle;
    let mut value = json!({
        "bundle": {
            "name": bundle.name,
            "version": bundle.version.to_string(),
            "image": bundle.image,
            "catalog": bundle.catalog,
            "channel": bundle.channel,
            "maxOpenShiftVersion": bundle.max_openshift_version.as_ref().map(max_text),
            "deprecation": bundle.deprecation,
        },
        "installed": installed.map(|i| json!({"name": i.name, "version": i.version.to_string()})),
        "stays": resolution.stays,
        "pin": resolution.pin,
        "deprecations": {
            "bundle": bundle.deprecation,
            "channel": resolution.channel_deprecation,
            "package": resolution.package_deprecation,
        },
        "rejected": resolution.rejected.iter().map(rejection_json).collect::<Vec<_>>(),
    });
    if let Some(phase) = cluster {
        value["cluster"] = json!({
            "phase": phase.kind.to_string(),
            "current": phase.current.to_string(),
            "target": phase.target.to_string(),
        });
    }
    if let Some(verdict) = upgradeable {
        value["upgradeable"] = json!({
            "status": verdict.status.to_string(),
            "reason": verdict.reason.as_str(),
            "message": verdict.message,
        });
    }
    value
}

fn rejection_json(rejection: &Rejection) -> Value {
    json!({
        "bundle": rejection.bundle,
        "version": rejection.version.to_string(),
        "catalog": &*rejection.catalog,
        "code": rejection.reason.code(),
        "reason": rejection.reason.to_string(),
    })
}

fn max_text(max: &MaxOpenShiftVersion) -> String {
    match max {
        MaxOpenShiftVersion::Valid { major, minor } => format!("{major}.{minor}"),
        MaxOpenShiftVersion::Invalid { raw, reason } => format!("invalid {raw:?} ({reason})"),
    }
}
