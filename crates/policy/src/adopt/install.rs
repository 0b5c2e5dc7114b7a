//! Steps 1 and 2 of adoption: an OLM v0 install from the objects OLM left, and the
//! PlatformOperator that would adopt it, judged from those objects alone.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pom_api::PlatformOperator;
use pom_api::olm::v0_install::{COPIED_FROM_LABEL, CSV_SUCCEEDED};
use pom_api::olm::{ClusterServiceVersion, OperatorGroup, Subscription};
use pom_api::platform_operator::{
    AdoptFrom, Consent, OperatorConfig, PackageSpec, PlatformOperatorSpec, SubscriptionRef,
    UpgradeApproval, UpgradeGate,
};
use pom_resolver::version::parse_tolerant;
use semver::Version;

use super::NotAdoptable;

/// Most bytes of a Subscription's `spec.config` adoption reads (the API server bounds objects
/// at about 1.5 MiB; a configuration is a few KiB).
pub const MAX_SUBSCRIPTION_CONFIG_BYTES: usize = 256 * 1024;

/// The longest package name a PlatformOperator may name (its CRD's limit).
const MAX_PACKAGE_NAME: usize = 56;

/// What OLM v0 left for one Subscription, with what adoption must know of its neighbours.
#[derive(Debug, Clone)]
pub struct OlmInstall<'a> {
    pub subscription: &'a Subscription,
    /// The CSV named by `status.installedCSV`, in the Subscription's namespace (never a copy).
    pub csv: Option<&'a ClusterServiceVersion>,
    /// Every OperatorGroup of the namespace.
    pub operator_groups: Vec<&'a OperatorGroup>,
    /// The other Subscriptions of the namespace (`namespace/name`).
    pub namespace_neighbours: Vec<String>,
    /// The other Subscriptions of the same package elsewhere (`namespace/name`).
    pub same_package: Vec<String>,
    /// The PlatformOperator that already manages the package, if any.
    pub managed_by: Option<String>,
}

impl OlmInstall<'_> {
    /// `namespace/name` of the Subscription.
    #[must_use]
    pub fn key(&self) -> String {
        key(self.subscription)
    }

    /// The Subscription's namespace.
    #[must_use]
    pub fn namespace(&self) -> String {
        namespace_of(&self.subscription.metadata)
    }
}

/// An object's namespace (`""` for none).
fn namespace_of(meta: &ObjectMeta) -> String {
    meta.namespace.clone().unwrap_or_default()
}

/// An object's name (`""` for none).
fn name_of(meta: &ObjectMeta) -> String {
    meta.name.clone().unwrap_or_default()
}

fn key(sub: &Subscription) -> String {
    format!("{}/{}", namespace_of(&sub.metadata), name_of(&sub.metadata))
}

/// One [`OlmInstall`] per Subscription, sorted by namespace and name.
#[must_use]
pub fn installs<'a>(
    subscriptions: &'a [Subscription],
    csvs: &'a [ClusterServiceVersion],
    groups: &'a [OperatorGroup],
    platform_operators: &[PlatformOperator],
) -> Vec<OlmInstall<'a>> {
    let mut by_namespace: BTreeMap<String, Vec<&Subscription>> = BTreeMap::new();
    let mut by_package: BTreeMap<&str, Vec<&Subscription>> = BTreeMap::new();
    for sub in subscriptions {
        by_namespace
            .entry(namespace_of(&sub.metadata))
            .or_default()
            .push(sub);
        by_package.entry(&sub.spec.name).or_default().push(sub);
    }
    let others = |list: Option<&Vec<&Subscription>>, me: &Subscription| -> Vec<String> {
        let mut keys: Vec<String> = list
            .into_iter()
            .flatten()
            .filter(|s| key(s) != key(me))
            .map(|s| key(s))
            .collect();
        keys.sort();
        keys
    };
    let mut out: Vec<OlmInstall<'a>> = subscriptions
        .iter()
        .map(|sub| {
            let namespace = namespace_of(&sub.metadata);
            let installed = sub.status.as_ref().and_then(|s| s.installed_csv.as_deref());
            OlmInstall {
                subscription: sub,
                csv: installed.and_then(|name| {
                    csvs.iter().find(|c| {
                        name_of(&c.metadata) == name
                            && namespace_of(&c.metadata) == namespace
                            && !c
                                .metadata
                                .labels
                                .as_ref()
                                .is_some_and(|l| l.contains_key(COPIED_FROM_LABEL))
                    })
                }),
                operator_groups: groups
                    .iter()
                    .filter(|g| namespace_of(&g.metadata) == namespace)
                    .collect(),
                namespace_neighbours: others(by_namespace.get(&namespace), sub),
                same_package: others(by_package.get(sub.spec.name.as_str()), sub),
                managed_by: platform_operators
                    .iter()
                    .find(|po| po.spec.package.name == sub.spec.name)
                    .map(|po| name_of(&po.metadata)),
            }
        })
        .collect();
    out.sort_by_key(OlmInstall::key);
    out
}

/// The namespaces an OLM v0 operator watches, as its OperatorGroup says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallTarget {
    AllNamespaces,
    OwnNamespace,
    SingleNamespace(String),
}

impl InstallTarget {
    /// `spec.watchNamespace` of the adopting PlatformOperator: none for AllNamespaces (the
    /// default when the bundle supports it, and OLM installed it so only if it does).
    #[must_use]
    pub fn watch_namespace(&self, install_namespace: &str) -> Option<String> {
        match self {
            Self::AllNamespaces => None,
            Self::OwnNamespace => Some(install_namespace.to_owned()),
            Self::SingleNamespace(ns) => Some(ns.clone()),
        }
    }

    /// The install mode's name, as OLM's `installModes[].type`.
    #[must_use]
    pub fn mode(&self) -> &'static str {
        match self {
            Self::AllNamespaces => "AllNamespaces",
            Self::OwnNamespace => "OwnNamespace",
            Self::SingleNamespace(_) => "SingleNamespace",
        }
    }
}

impl std::fmt::Display for InstallTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::SingleNamespace(ns) => write!(f, "SingleNamespace ({ns})"),
            other => f.write_str(other.mode()),
        }
    }
}

/// The PlatformOperator that would adopt an install, judged from the install alone.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub platform_operator: PlatformOperator,
    pub target: InstallTarget,
    /// The installed CSV's name: the bundle adopted.
    pub bundle: String,
    pub version: Version,
    pub package: String,
    pub install_namespace: String,
}

/// Step 2: the PlatformOperator for `install`, pinned to the bundle OLM installed, or the first
/// obstacle the install itself shows (checked in the order an admin must fix them).
///
/// # Errors
/// Why the install cannot be adopted, before any catalog or bundle is read.
pub fn propose(install: &OlmInstall<'_>) -> Result<Proposal, NotAdoptable> {
    let (csv, installed, version) = running_csv(install)?;
    let namespace = install.namespace();
    let target = target(&install.operator_groups, &namespace)?;
    placement(install, &namespace)?;
    no_dependencies(csv, &installed)?;
    let sub = install.subscription;
    let package = sub.spec.name.clone();
    let spec = spec(install, &installed, &version, &target)?;
    Ok(Proposal {
        platform_operator: PlatformOperator::new(&package, spec),
        target,
        bundle: installed,
        version,
        package,
        install_namespace: namespace,
    })
}

/// The CSV the Subscription installed, its name and version, when it runs as OLM intended.
fn running_csv<'a>(
    install: &OlmInstall<'a>,
) -> Result<(&'a ClusterServiceVersion, String, Version), NotAdoptable> {
    let status = install.subscription.status.clone().unwrap_or_default();
    let Some(installed) = status.installed_csv.filter(|c| !c.is_empty()) else {
        return Err(NotAdoptable::NotInstalled {
            state: status.state.unwrap_or_default(),
        });
    };
    let csv = install.csv.ok_or_else(|| NotAdoptable::CsvMissing {
        csv: installed.clone(),
    })?;
    let phase = csv
        .status
        .as_ref()
        .and_then(|s| s.phase.clone())
        .unwrap_or_default();
    if phase != CSV_SUCCEEDED {
        return Err(NotAdoptable::CsvNotSucceeded {
            csv: installed,
            phase,
        });
    }
    let raw_version = csv.spec.version.clone().unwrap_or_default();
    let version = parse_tolerant(&raw_version).map_err(|_| NotAdoptable::CsvVersionUnreadable {
        csv: installed.clone(),
        version: raw_version,
    })?;
    Ok((csv, installed, version))
}

/// Whether the install's namespace and package can become one PlatformOperator's.
fn placement(install: &OlmInstall<'_>, namespace: &str) -> Result<(), NotAdoptable> {
    let package = install.subscription.spec.name.clone();
    if pom_api::namespaces::is_platform_namespace(namespace) {
        return Err(NotAdoptable::PlatformNamespace {
            namespace: namespace.to_owned(),
        });
    }
    if !install.namespace_neighbours.is_empty() {
        return Err(NotAdoptable::SharedNamespace {
            namespace: namespace.to_owned(),
            others: install.namespace_neighbours.clone(),
        });
    }
    if !install.same_package.is_empty() {
        return Err(NotAdoptable::PackageInstalledTwice {
            package,
            others: install.same_package.clone(),
        });
    }
    if let Some(po) = &install.managed_by {
        return Err(NotAdoptable::AlreadyManaged {
            package,
            po: po.clone(),
        });
    }
    if !is_package_name(&package) {
        return Err(NotAdoptable::PackageNameInvalid { package });
    }
    Ok(())
}

/// What the CSV itself says POM cannot install: owned APIServices, required APIs.
fn no_dependencies(csv: &ClusterServiceVersion, installed: &str) -> Result<(), NotAdoptable> {
    let owned_apis: Vec<String> = csv
        .spec
        .apiservicedefinitions
        .iter()
        .flat_map(|a| &a.owned)
        .map(|a| a.name.clone())
        .collect();
    if !owned_apis.is_empty() {
        return Err(NotAdoptable::OwnsApiService {
            csv: installed.to_owned(),
            names: owned_apis,
        });
    }
    let required: Vec<String> = csv
        .spec
        .customresourcedefinitions
        .iter()
        .flat_map(|c| &c.required)
        .chain(
            csv.spec
                .apiservicedefinitions
                .iter()
                .flat_map(|a| &a.required),
        )
        .map(|r| format!("{} {}", r.kind, r.name))
        .collect();
    if required.is_empty() {
        Ok(())
    } else {
        Err(NotAdoptable::Dependencies {
            what: format!("ClusterServiceVersion {installed}"),
            names: required,
        })
    }
}

/// The adopting PlatformOperator's spec (`docs/decisions.md` says why each field).
fn spec(
    install: &OlmInstall<'_>,
    installed: &str,
    version: &Version,
    target: &InstallTarget,
) -> Result<PlatformOperatorSpec, NotAdoptable> {
    let sub = install.subscription;
    let namespace = install.namespace();
    let manual = sub.spec.install_plan_approval.as_deref() == Some("Manual");
    Ok(PlatformOperatorSpec {
        package: PackageSpec {
            name: sub.spec.name.clone(),
            channel: sub.spec.channel.clone().filter(|c| !c.is_empty()),
            catalog: None,
            // POM's pins print an explicit `=`: a bare version is an exact pin too, but
            // `=X.Y.Z` reads as one.
            version_range: Some(format!("={version}")),
        },
        steady_state_version_range: None,
        install_namespace: Some(namespace.clone()),
        upgrade_gate: UpgradeGate::Auto,
        progress_deadline: "10m".to_owned(),
        soak: None,
        content_exceptions: Vec::new(),
        omit_objects: Vec::new(),
        consent: Consent::default(),
        watch_namespace: target.watch_namespace(&namespace),
        upgrade_approval: if manual {
            UpgradeApproval::Manual
        } else {
            UpgradeApproval::Automatic
        },
        // The admin approved this bundle in OLM already (its InstallPlan ran): adopting it
        // must not wait for a second approval of the same bundle.
        // Adopting takes over what runs: never a hop before a cluster update unless the
        // admin says so (the default).
        pre_update_hops: Default::default(),
        approved_bundle: manual.then(|| installed.to_owned()),
        paused: false,
        config: config(sub.spec.config.as_ref())?,
        // The installation it takes over: the manager adopts it (issue 36 item 2).
        adopt_from: Some(AdoptFrom {
            subscription: SubscriptionRef {
                namespace: namespace.clone(),
                name: name_of(&sub.metadata),
            },
        }),
    })
}

/// The watched namespaces, from the one OperatorGroup of `namespace`: OLM's resolved
/// `status.namespaces` when it has written them, else `spec.targetNamespaces`.
fn target(groups: &[&OperatorGroup], namespace: &str) -> Result<InstallTarget, NotAdoptable> {
    let group = match groups {
        [] => return Err(NotAdoptable::NoOperatorGroup),
        [one] => *one,
        several => {
            let mut names: Vec<String> = several.iter().map(|g| name_of(&g.metadata)).collect();
            names.sort();
            return Err(NotAdoptable::SeveralOperatorGroups { names });
        }
    };
    let resolved = group
        .status
        .as_ref()
        .map(|s| s.namespaces.clone())
        .unwrap_or_default();
    let targets = if !resolved.is_empty() {
        resolved
    } else if group.spec.selector.is_some() {
        return Err(NotAdoptable::OperatorGroupUnresolved {
            name: name_of(&group.metadata),
        });
    } else {
        group.spec.target_namespaces.clone()
    };
    let mut targets: Vec<String> = targets;
    targets.sort();
    targets.dedup();
    match targets.as_slice() {
        [] => Ok(InstallTarget::AllNamespaces),
        [all] if all.is_empty() => Ok(InstallTarget::AllNamespaces),
        [own] if own == namespace => Ok(InstallTarget::OwnNamespace),
        [single] => Ok(InstallTarget::SingleNamespace(single.clone())),
        several => Err(NotAdoptable::MultiNamespace {
            name: name_of(&group.metadata),
            targets: several.to_vec(),
        }),
    }
}

/// The fields of OLM's `SubscriptionConfig` POM maps; `selector` is accepted and dropped (OLM
/// never reads it either).
const CONFIG_FIELDS: &[&str] = &[
    "env",
    "envFrom",
    "volumes",
    "volumeMounts",
    "tolerations",
    "resources",
    "nodeSelector",
    "affinity",
    "annotations",
];

/// A Subscription's `spec.config` as `spec.config`, within the PlatformOperator's limits; an
/// empty one is none.
fn config(raw: Option<&serde_json::Value>) -> Result<Option<OperatorConfig>, NotAdoptable> {
    let why = |why: String| NotAdoptable::ConfigNotMappable { why };
    let Some(raw) = raw.filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let size = serde_json::to_vec(raw)
        .map(|b| b.len())
        .unwrap_or(usize::MAX);
    if size > MAX_SUBSCRIPTION_CONFIG_BYTES {
        return Err(why(format!(
            "it is {size} bytes, more than the {MAX_SUBSCRIPTION_CONFIG_BYTES} adoption reads"
        )));
    }
    let Some(fields) = raw.as_object() else {
        return Err(why("it is not an object".to_owned()));
    };
    let mut kept = serde_json::Map::new();
    for (field, value) in fields {
        match field.as_str() {
            "selector" => {}
            known if CONFIG_FIELDS.contains(&known) => {
                kept.insert(field.clone(), value.clone());
            }
            unknown => {
                return Err(why(format!(
                    "field {unknown:?} is not one of OLM's SubscriptionConfig fields POM applies ({})",
                    CONFIG_FIELDS.join(", ")
                )));
            }
        }
    }
    let config: OperatorConfig = serde_json::from_value(serde_json::Value::Object(kept))
        .map_err(|e| why(format!("it does not read as a SubscriptionConfig: {e}")))?;
    check_limits(&config).map_err(why)?;
    Ok((config != OperatorConfig::default()).then_some(config))
}

/// The PlatformOperator CRD's bounds on `spec.config`, checked before the admin applies it.
fn check_limits(config: &OperatorConfig) -> Result<(), String> {
    use pom_api::platform_operator as po;
    let counts = [
        ("env", config.env.len(), po::MAX_CONFIG_ENV),
        ("envFrom", config.env_from.len(), po::MAX_CONFIG_ENV_FROM),
        ("volumes", config.volumes.len(), po::MAX_CONFIG_VOLUMES),
        (
            "volumeMounts",
            config.volume_mounts.len(),
            po::MAX_CONFIG_VOLUME_MOUNTS,
        ),
        (
            "tolerations",
            config.tolerations.len(),
            po::MAX_CONFIG_TOLERATIONS,
        ),
        (
            "nodeSelector",
            config.node_selector.as_ref().map_or(0, BTreeMap::len),
            po::MAX_CONFIG_NODE_SELECTOR,
        ),
        (
            "annotations",
            config.annotations.len(),
            po::MAX_CONFIG_ANNOTATIONS,
        ),
    ];
    match counts.iter().find(|(_, n, max)| n > max) {
        Some((field, n, max)) => Err(format!(
            "config.{field} has {n} entries, more than the {max} a PlatformOperator allows"
        )),
        None => Ok(()),
    }
}

/// A DNS-1123 label of at most [`MAX_PACKAGE_NAME`] characters (the CRD's rule on
/// `spec.package.name` and on the PlatformOperator's name taken from it).
fn is_package_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && name.len() <= MAX_PACKAGE_NAME
        && bytes
            .iter()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
        && bytes.first().is_some_and(u8::is_ascii_alphanumeric)
        && bytes.last().is_some_and(u8::is_ascii_alphanumeric)
}
