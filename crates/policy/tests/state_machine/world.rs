//! The simulated world: two catalogs, a ClusterVersion, two PlatformOperators with their
//! operators, Deployments and OperatorConditions, and the manager's reconcile driven through
//! gather → `decide` → act → `status::compute` → `aggregate::compute`. The world keeps its
//! own truth (what runs, whether it rolled out, what the operator said) beside the statuses the
//! code under test writes; the checks in `super::checks` compare the two.

use std::collections::BTreeMap;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::openshift::ClusterOperatorStatus;
use pom_api::platform_operator::{
    AppliedConfig, ClusterProxyEnv, InstalledBundle, InventoryObject, OperatorConfig, PackageSpec,
    PlatformOperatorSpec, PlatformOperatorStatus, PreUpdateHops, UpgradeApproval, UpgradeGate,
};
use pom_policy::aggregate::{self, ClusterPhaseView};
use pom_policy::inventory;
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, GateReading, Hop, Installed, OperatorGate, PoSnapshot,
};
use pom_policy::snapshot::{ConfigView, GuardState, ReplacedStart, unsettled_move_of};
use pom_policy::status::{
    self, ActOutcome, InstallReport, OperatorConditionReport, StatusInput, UnavailableDeployment,
    Wait,
};
use pom_policy::{Action, PoRequest, Problem, decide};
use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::{
    Bundle, BundleProperties, Catalog, Channel, ChannelEntry, Deprecations, MaxOpenShiftVersion,
    Origin, Package,
};
use pom_resolver::range::SkipRange;
use semver::Version;

use super::checks;
use super::oracle::{self, v};

/// The bundles every package may have, in replaces order.
pub const VERSIONS: [&str; 9] = [
    "1.0.0", "1.0.1", "1.1.0", "1.1.1", "1.2.0", "1.2.1", "2.0.0", "2.0.1", "2.1.0",
];
/// `skipRange`s of channel stable, by index into [`VERSIONS`].
pub const SKIP_RANGES: [(usize, &str); 2] = [(4, ">=1.0.0 <1.2.0"), (8, ">=2.0.0 <2.1.0")];
pub const PACKAGES: [&str; 2] = ["alpha", "beta"];
/// The default channel first.
pub const CHANNELS: [&str; 2] = ["stable", "fast"];
pub const CATALOGS: [&str; 2] = ["operatorhub", "extra"];
/// The choices of the admin's spec edits.
pub const VERSION_RANGES: [Option<&str>; 5] = [
    None,
    Some("<2.0.0"),
    Some("<1.2.0"),
    Some(">=1.0.1"),
    Some(">=1.1.0 <2.1.0"),
];
pub const OVERRIDES: [Option<&str>; 5] = [
    None,
    Some(">=1.0.0 <1.2.0"),
    Some("=1.0.1"),
    Some(">=2.0.0 <3.0.0"),
    Some(">=1.1.0"),
];
/// `spec.config` choices: the operator's `LOG_LEVEL` (`None`: no configuration).
pub const CONFIGS: [Option<&str>; 3] = [None, Some("debug"), Some("trace")];
pub const DEADLINE: Duration = Duration::from_secs(600);

/// The admin's annotations on a PlatformOperator (the keys of `pom_api::labels`).
pub const UNSETTLED_MOVE: &str = "platform.openshift.io/unsettled-move";
pub const CONFIG_CHANGE_OVERRIDE: &str = "platform.openshift.io/config-change-override";
pub const CRD_SAFETY_OVERRIDE: &str = "platform.openshift.io/crd-safety-override";

/// `spec.config` for choice `c` of [`CONFIGS`].
pub fn config_of(c: usize) -> Option<OperatorConfig> {
    CONFIGS[c].map(|level| {
        serde_json::from_value(serde_json::json!({"env": [{"name": "LOG_LEVEL", "value": level}]}))
            .unwrap()
    })
}

/// The `LOG_LEVEL` a rendered configuration sets (`None`: none).
pub fn level_of(config: &AppliedConfig) -> Option<usize> {
    let value = serde_json::to_value(&config.config).unwrap();
    let level = value["env"][0]["value"].as_str()?;
    CONFIGS.iter().position(|c| *c == Some(level))
}

/// The cluster proxy when one is set.
pub fn proxy_env() -> ClusterProxyEnv {
    ClusterProxyEnv {
        http_proxy: "http://proxy.example:3128".into(),
        https_proxy: "http://proxy.example:3128".into(),
        no_proxy: ".cluster.local".into(),
    }
}

/// The settle window of issue 25 item 9 the manager runs with (`None`: no window).
pub fn auto_settle_window() -> Option<Duration> {
    Some(status::AUTO_SETTLE_WINDOW)
}

/// The name of the older PlatformOperator of PO `i`'s package.
pub fn older_name(i: usize) -> String {
    format!("{}-older", PACKAGES[i])
}

pub fn bundle_name(package: &str, index: usize) -> String {
    format!("{package}.v{}", VERSIONS[index])
}

fn index_of(package: &str, name: &str) -> Option<usize> {
    (0..VERSIONS.len()).find(|i| bundle_name(package, *i) == name)
}

/// What the operator of the running bundle has written on its OperatorCondition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Says {
    /// The OperatorCondition exists (POM created it) with nothing from the operator.
    Never,
    True,
    False,
    /// The operator wrote, but no `Upgradeable` for the current generation (Unknown, stale).
    Pending,
    /// The OperatorCondition was deleted (POM recreates it, empty, at its next apply).
    Deleted,
}

impl Says {
    fn reported(self) -> bool {
        matches!(self, Says::True | Says::False | Says::Pending)
    }
}

impl SimPo {
    /// The gate's word on the running operator: the admin's override, else the operator's.
    pub fn word(&self) -> Says {
        if self.gate_overridden && self.says != Says::Deleted {
            Says::True
        } else {
            self.says
        }
    }
}

#[derive(Debug, Clone)]
pub enum Event {
    Reconcile(usize),
    RolloutFinishes(usize),
    Operator(usize, Says),
    /// The running Deployment stops being available.
    Regress(usize),
    FailNextApply(usize),
    /// The admin sets `spec.overrides` `Upgradeable=True` on the running bundle's
    /// OperatorCondition.
    OverrideGate(usize),
    /// A policy engine refuses every apply of this bundle of the PO's package, for good.
    Refuse(usize, usize),
    /// The manager dies right after recording the next move's intent, before applying it.
    CrashDuringNextMove(usize),
    /// The PO is restored without its status (annotations kept).
    LoseStatus(usize),
    EditVersionRange(usize, usize),
    EditChannel(usize, usize),
    EditGate(usize, UpgradeGate),
    EditOverride(usize, usize),
    EditCatalog(usize, usize),
    /// `spec.upgradeApproval`: Manual (true) or Automatic.
    EditApproval(usize, bool),
    /// The admin approves what the PO waits for (`status.desiredBundle`), as `pomctl approve`
    /// does; nothing when it waits for nothing.
    Approve(usize),
    /// The admin approves a bundle by name (`pomctl approve --bundle`), waited for or not.
    ApproveBundle(usize, usize),
    /// `spec.paused`.
    Pause(usize, bool),
    /// The manager dies after the next apply of the PO, before its status write (the objects
    /// are written, the status is not).
    CrashAfterNextApply(usize),
    /// A policy engine admits this bundle's first objects and refuses its Deployment, for
    /// good: a partial apply.
    RefusePartly(usize, usize),
    /// `spec.config`: choice of [`CONFIGS`].
    EditConfig(usize, usize),
    /// A policy engine refuses, for good, the PO's Deployments with this `LOG_LEVEL` (index
    /// into [`CONFIGS`]).
    RefuseConfig(usize, usize),
    /// The PO's Deployments with this `LOG_LEVEL` (index into [`CONFIGS`]) are admitted and
    /// never become Available (a flag the operator cannot start with): the configuration
    /// applies and never settles (review H1).
    UnavailableConfig(usize, usize),
    /// The PO's Deployments of this bundle are admitted and never become Available (its image
    /// crashes, cannot be pulled or scheduled): a hop to it applies and never settles, whatever
    /// its configuration.
    UnavailableBundle(usize, usize),
    /// The cluster Proxy sets (true) or clears its proxy: every PO's configuration changes.
    SetProxy(bool),
    /// This bundle changes its CRDs unsafely: the manager refuses it (nothing written)
    /// unless the PO's `crd-safety-override` annotation names it.
    UnsafeCrd(usize, usize),
    /// The admin writes (or clears) an annotation on the PO.
    Annotate(usize, Annotation),
    /// The admin adds `!=<version>` of this bundle to `spec.package.versionRange`.
    ExcludeVersion(usize, usize),
    /// The admin takes a bundle's `!=<version>` out of `versionRange` (a way out only).
    ReadmitVersion(usize, usize),
    /// The admin sets `spec.config` back: to what the status records applied when that
    /// settled, else to what last ran settled; to a configuration the operator runs with when
    /// the admin has seen that one fail (never Available, or refused).
    RevertConfig(usize),
    /// The admin lifts every policy that refuses the PO's objects (bundles, Deployments,
    /// configurations, unsafe CRDs). What never becomes Available is no policy: it stays.
    LiftRefusals(usize),
    /// Another PlatformOperator for the same package, created before this one (restored from
    /// a backup, say), appears (true) or is deleted (false): the older one wins the package.
    OlderDuplicate(usize, bool),
    /// The admin deletes the PO (mid-move or not): the finalizer deletes every object its
    /// inventory lists (CRDs aside); then the admin creates it again with the same spec.
    DeleteAndRecreate(usize),
    StartPatch,
    StartMinor,
    /// The ClusterVersion's desired version changes mid-update.
    Retarget,
    CompleteUpdate,
    RollBack,
    /// An in-flight patch update rolled back to the version it left.
    InFlightRollback,
    ClusterVersionUnreadable(bool),
    AddBundle(usize, usize),
    RemoveBundle(usize, usize),
    CatalogDown(usize),
    CatalogUp(usize),
    FlipPriorities,
    RestartManager,
    /// The admin requests the next minor (`spec.desiredUpdate`) while the cluster is steady;
    /// the CVO has not accepted it (issue 35 item 1).
    RequestMinor,
    /// The admin withdraws the request.
    WithdrawRequest,
    /// `spec.preUpdateHops`: Take (true) or Offer.
    EditPreUpdate(usize, bool),
    /// Time passes (seconds).
    Wait(u64),
}

/// The annotations the admin writes, as the model chooses them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Annotation {
    /// `unsettled-move=abandon:<bundle>` (a bundle index: possibly stale, forgotten).
    Abandon(usize),
    /// `unsettled-move=skip:<bundle>`.
    Skip(usize),
    /// `unsettled-move=abandon:` naming the move the status records, as the admin reads it.
    AbandonRecorded,
    /// `config-change-override=<digest>` of the configuration asked for now.
    ConfigOverride,
    /// `crd-safety-override=<bundle>`.
    CrdSafety(usize),
    /// Every annotation removed.
    Clear,
    /// An annotation as a status names it (key, value).
    Named(&'static str, String),
}

pub struct SimCatalog {
    pub name: &'static str,
    pub priority: i32,
    /// The bundles the source has now.
    pub present: [bool; VERSIONS.len()],
    /// The bundles served (the last good content, kept while the catalog is down).
    pub served: [bool; VERSIONS.len()],
    pub down: bool,
    /// Shared: a reconcile reads it without copying it.
    pub content: std::sync::Arc<Catalog>,
}

/// The cluster as a verdict depends on it: phase, current and target major.minor.
pub type ClusterKey = (PhaseKind, (u64, u64), (u64, u64));

/// What a reconcile of a PO saw, by the world, when it last ran to its status write.
#[derive(Debug, Clone)]
pub struct Read {
    pub generation: i64,
    /// The cluster as judged then (`None`: unreadable).
    pub cluster: Option<ClusterKey>,
    /// Why, by the world, the PO was not upgradeable at that read.
    pub blockers: Vec<String>,
    /// The move to the running bundle had settled and no hop was owed.
    pub at_pin: bool,
}

/// One PlatformOperator and its operator.
pub struct SimPo {
    pub po: PlatformOperator,
    /// World truth: the bundle whose objects are applied.
    pub running: Option<usize>,
    pub rolled_out: bool,
    pub regressed: bool,
    /// When a reconcile first saw the running bundle's rollout complete.
    pub rolled_out_seen_at: Option<Timestamp>,
    pub says: Says,
    /// The admin's `spec.overrides` `Upgradeable=True` on the running bundle's
    /// OperatorCondition (§7, as in OLM v0): the gate reads it in place of the operator's word.
    /// A new bundle's OperatorCondition has none; a deleted one loses it.
    pub gate_overridden: bool,
    /// A reconcile has seen this PO's operator report (latched, §7 `Auto`).
    pub reported_seen: bool,
    /// The move to the running bundle has settled (latched when a reconcile sees §7 hold).
    pub settled: bool,
    /// When the running bundle's objects were first applied (or, after the status was lost,
    /// re-applied: the restored PO cannot know older).
    pub move_started_at: Timestamp,
    pub status_lost: bool,
    /// The last apply put a new bundle on the cluster.
    pub applied_now: bool,
    /// The PO's `operator-condition-reported` annotation, as the manager writes it.
    pub annotated: bool,
    pub fail_next_apply: bool,
    pub crash_during_next_move: bool,
    /// A move recorded as intent when the manager died, or whose apply failed: it must be
    /// resumed, never dropped (while it qualifies).
    pub intent_at_crash: Option<String>,
    /// The catalogs were not read since the manager (re)started.
    pub catalogs_loading: bool,
    pub last_read: Option<Read>,
    pub crash_after_next_apply: bool,
    /// World truth: the configuration the running Deployments were rendered with.
    pub config_runs: AppliedConfig,
    /// A configuration change recorded as intent and never applied (refused, or the manager
    /// died): the manager resumes it as it was judged then.
    pub config_intent: Option<String>,
    /// World truth: the objects POM wrote for this PO and did not delete (since its status
    /// was last lost: older ones are found by their labels, not by the inventory).
    pub on_cluster: Vec<InventoryObject>,
    /// World truth: what runs (the bundle and what the Deployments run with) was applied by an
    /// apply whose status write a crash lost, and no apply was recorded since: the status
    /// cannot know it.
    pub config_unrecorded: bool,
    /// `spec.config` of the configuration that last ran settled: where the admin's revert of
    /// a change that applied goes back to (the admin's own record of the edit).
    pub settled_spec_config: Option<OperatorConfig>,
}

pub struct World {
    pub pos: Vec<SimPo>,
    pub catalogs: Vec<SimCatalog>,
    pub max_ocp: [Option<u64>; VERSIONS.len()],
    /// `minKubeVersion` of each bundle: `1.<minor>.<patch>`.
    pub min_kube: [Option<(u64, u64)>; VERSIONS.len()],
    /// The API server's version now (it follows the cluster: a completed update raises it, a
    /// rollback lowers it at once).
    pub kube: Version,
    pub refused: Vec<(usize, usize)>,
    /// (PO, bundle) whose Deployment a policy engine refuses after its first objects.
    pub refused_partly: Vec<(usize, usize)>,
    /// (PO, `LOG_LEVEL` choice) a policy engine refuses.
    pub refused_configs: Vec<(usize, usize)>,
    /// (PO, `LOG_LEVEL` choice) whose Deployments never become Available.
    pub unavailable_configs: Vec<(usize, usize)>,
    /// (PO, bundle) whose Deployments never become Available.
    pub unavailable_bundles: Vec<(usize, usize)>,
    /// (PO, bundle) whose Deployments rolled out at some point: never made broken afterwards.
    pub rolled_out_bundles: Vec<(usize, usize)>,
    /// (PO, bundle) whose CRD change is unsafe.
    pub unsafe_crds: Vec<(usize, usize)>,
    /// The cluster proxy.
    pub proxy: Option<ClusterProxyEnv>,
    /// Per PO: an older PlatformOperator naming the same package (it manages it outside the
    /// model).
    pub older: Vec<Option<PlatformOperator>>,
    pub phase: ClusterPhase,
    pub cv_unreadable: bool,
    /// ClusterVersion `spec.desiredUpdate` when it names a version the CVO has not accepted.
    pub requested: Option<Version>,
    pub now: Timestamp,
    pub co: ClusterOperatorStatus,
    pub moves: usize,
    /// The ways out the liveness admin took, by PO, in order (scripted tests assert them).
    pub ways_taken: Vec<(usize, super::way_out::WayOut)>,
}

/// How a case starts.
#[derive(Debug, Clone)]
pub struct Setup {
    pub max_ocp: [Option<u64>; VERSIONS.len()],
    pub min_kube: [Option<(u64, u64)>; VERSIONS.len()],
    pub gates: Vec<UpgradeGate>,
    pub ranges: Vec<usize>,
    pub extra: [bool; VERSIONS.len()],
    pub extra_wins: bool,
}

impl World {
    pub fn new(setup: &Setup) -> Self {
        let now = Timestamp::from_second(1_800_000_000).unwrap();
        let pos = PACKAGES
            .iter()
            .enumerate()
            .map(|(i, package)| {
                let mut po = PlatformOperator::new(
                    package,
                    PlatformOperatorSpec {
                        package: PackageSpec {
                            name: (*package).to_owned(),
                            version_range: VERSION_RANGES[setup.ranges[i]].map(str::to_owned),
                            ..PackageSpec::default()
                        },
                        steady_state_version_range: None,
                        install_namespace: None,
                        upgrade_gate: setup.gates[i],
                        progress_deadline: "10m".to_owned(),
                        soak: None,
                        content_exceptions: Vec::new(),
                        omit_objects: Vec::new(),
                        consent: Default::default(),
                        watch_namespace: None,
                        upgrade_approval: UpgradeApproval::Automatic,
                        pre_update_hops: Default::default(),
                        approved_bundle: None,
                        paused: false,
                        config: None,
                        adopt_from: None,
                    },
                );
                po.metadata.generation = Some(1);
                po.metadata.creation_timestamp =
                    Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(now));
                SimPo {
                    po,
                    running: None,
                    rolled_out: false,
                    regressed: false,
                    rolled_out_seen_at: None,
                    says: Says::Never,
                    gate_overridden: false,
                    reported_seen: false,
                    settled: false,
                    move_started_at: now,
                    status_lost: false,
                    applied_now: false,
                    annotated: false,
                    fail_next_apply: false,
                    crash_during_next_move: false,
                    intent_at_crash: None,
                    catalogs_loading: false,
                    last_read: None,
                    crash_after_next_apply: false,
                    config_runs: AppliedConfig::none(),
                    config_intent: None,
                    on_cluster: Vec::new(),
                    config_unrecorded: false,
                    settled_spec_config: None,
                }
            })
            .collect();
        let hub = [true, true, true, false, true, false, true, true, false];
        let catalog = |name, priority, present: [bool; VERSIONS.len()]| SimCatalog {
            name,
            priority,
            present,
            served: present,
            down: false,
            content: std::sync::Arc::new(content(&present, &setup.max_ocp, &setup.min_kube)),
        };
        let (p0, p1) = if setup.extra_wins { (0, 1) } else { (1, 0) };
        Self {
            pos,
            catalogs: vec![
                catalog(CATALOGS[0], p0, hub),
                catalog(CATALOGS[1], p1, setup.extra),
            ],
            max_ocp: setup.max_ocp,
            min_kube: setup.min_kube,
            kube: oracle::kube_of(&v("4.16.3")),
            refused: Vec::new(),
            refused_partly: Vec::new(),
            refused_configs: Vec::new(),
            unavailable_configs: Vec::new(),
            unavailable_bundles: Vec::new(),
            rolled_out_bundles: Vec::new(),
            unsafe_crds: Vec::new(),
            proxy: None,
            older: vec![None; PACKAGES.len()],
            phase: ClusterPhase::steady(v("4.16.3")),
            cv_unreadable: false,
            requested: None,
            now,
            co: ClusterOperatorStatus::default(),
            moves: 0,
            ways_taken: Vec::new(),
        }
    }

    pub fn status(&self, i: usize) -> Option<&PlatformOperatorStatus> {
        self.pos[i].po.status.as_ref()
    }

    fn bump(&mut self, i: usize, edit: impl FnOnce(&mut PlatformOperatorSpec)) {
        let po = &mut self.pos[i].po;
        let before = po.spec.clone();
        edit(&mut po.spec);
        if po.spec != before {
            po.metadata.generation = Some(po.metadata.generation.unwrap_or(1) + 1);
        }
    }

    /// Deletion: what the finalizer removes is what the inventory lists, so everything POM
    /// wrote for the PO must be listed (unless the status was lost: then what was written is
    /// found by its labels); the PO comes back as new.
    fn delete_and_recreate(&mut self, i: usize) -> Result<(), String> {
        let sim = &self.pos[i];
        let listed: Vec<&InventoryObject> = sim
            .po
            .status
            .iter()
            .flat_map(|s| s.inventory.iter())
            .flat_map(|e| e.objects.iter())
            .collect();
        if !sim.status_lost
            && let Some(left) = sim.on_cluster.iter().find(|o| !listed.contains(o))
        {
            return Err(format!(
                "deleting {}: {left:?} was written for it and its inventory does not list it, so the finalizer leaves it behind",
                PACKAGES[i]
            ));
        }
        let sim = &mut self.pos[i];
        sim.po.status = None;
        sim.po.metadata.annotations = None;
        sim.po.metadata.generation = Some(1);
        sim.po.spec.approved_bundle = None;
        sim.po.spec.paused = false;
        sim.running = None;
        sim.rolled_out = false;
        sim.regressed = false;
        sim.rolled_out_seen_at = None;
        sim.says = Says::Never;
        sim.gate_overridden = false;
        sim.reported_seen = false;
        sim.settled = false;
        sim.status_lost = false;
        sim.applied_now = false;
        sim.annotated = false;
        sim.intent_at_crash = None;
        sim.config_runs = AppliedConfig::none();
        sim.config_intent = None;
        sim.on_cluster.clear();
        sim.last_read = None;
        sim.config_unrecorded = false;
        sim.settled_spec_config = None;
        Ok(())
    }

    /// The configuration PO `i` asks for now (`spec.config` and the cluster proxy).
    pub fn desired_config(&self, i: usize) -> AppliedConfig {
        AppliedConfig::of(self.pos[i].po.spec.config.as_ref(), self.proxy.as_ref())
    }

    /// The value of annotation `key` on PO `i`.
    pub fn annotation(&self, i: usize, key: &str) -> Option<&str> {
        self.pos[i]
            .po
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(key))
            .map(String::as_str)
    }

    /// The admin writes an annotation (annotations do not bump the generation).
    pub fn annotate(&mut self, i: usize, annotation: &Annotation) {
        let recorded = self
            .status(i)
            .and_then(|s| s.active_hop.as_ref())
            .filter(|h| !h.settled)
            .map(|h| h.to.clone());
        let desired = self.desired_config(i).digest;
        let (key, value) = match annotation {
            Annotation::Abandon(b) => (
                UNSETTLED_MOVE,
                format!("abandon:{}", bundle_name(PACKAGES[i], *b)),
            ),
            Annotation::Skip(b) => (
                UNSETTLED_MOVE,
                format!("skip:{}", bundle_name(PACKAGES[i], *b)),
            ),
            Annotation::AbandonRecorded => match recorded {
                Some(to) => (UNSETTLED_MOVE, format!("abandon:{to}")),
                None => return,
            },
            Annotation::ConfigOverride => (CONFIG_CHANGE_OVERRIDE, desired),
            Annotation::CrdSafety(b) => (CRD_SAFETY_OVERRIDE, bundle_name(PACKAGES[i], *b)),
            Annotation::Clear => {
                self.pos[i].po.metadata.annotations = None;
                return;
            }
            Annotation::Named(key, value) => (*key, value.clone()),
        };
        self.pos[i]
            .po
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(key.to_owned(), value);
    }

    pub fn apply(&mut self, event: &Event) -> Result<(), String> {
        self.now = Timestamp::from_second(self.now.as_second() + 7).unwrap();
        match *event {
            Event::Reconcile(i) => self.reconcile(i)?,
            Event::RolloutFinishes(i)
                if self.pos[i].running.is_some() && !self.never_available(i) =>
            {
                self.pos[i].rolled_out = true;
                self.pos[i].regressed = false;
                if let Some(b) = self.pos[i].running
                    && !self.rolled_out_bundles.contains(&(i, b))
                {
                    self.rolled_out_bundles.push((i, b));
                }
            }
            // An operator writes its OperatorCondition only while it runs (its Deployment rolled
            // out and available: one that never becomes Available does not report); the admin
            // deletes it whenever.
            Event::Operator(i, says)
                if self.pos[i].running.is_some()
                    && (says == Says::Deleted
                        || (self.pos[i].rolled_out && !self.pos[i].regressed)) =>
            {
                self.pos[i].says = says;
                if says == Says::Deleted {
                    self.pos[i].gate_overridden = false;
                }
            }
            Event::OverrideGate(i) if self.pos[i].running.is_some() => {
                self.pos[i].gate_overridden = true;
            }
            Event::Regress(i) if self.pos[i].running.is_some() => self.pos[i].regressed = true,
            Event::FailNextApply(i) => self.pos[i].fail_next_apply = true,
            Event::Refuse(i, b) => self.refused.push((i, b)),
            Event::CrashDuringNextMove(i) => self.pos[i].crash_during_next_move = true,
            Event::LoseStatus(i) => {
                self.pos[i].po.status = None;
                self.pos[i].status_lost = true;
                // The restored PO judges what runs afresh: it records a new move to it.
                self.pos[i].settled = false;
                self.pos[i].rolled_out_seen_at = None;
                self.pos[i].intent_at_crash = None;
                self.pos[i].config_intent = None;
                // What was written before is found by its labels from now on, not by an
                // inventory (issue 34 item 5).
                self.pos[i].on_cluster.clear();
            }
            Event::CrashAfterNextApply(i) => self.pos[i].crash_after_next_apply = true,
            Event::RefusePartly(i, b) => self.refused_partly.push((i, b)),
            Event::EditConfig(i, c) => self.bump(i, |s| s.config = config_of(c)),
            Event::RefuseConfig(i, c) => self.refused_configs.push((i, c)),
            Event::UnavailableConfig(i, c) => self.unavailable_configs.push((i, c)),
            // One broken bundle per PO, never one that already rolled out here: with several
            // (or the running one turning broken) no bundle the PO may use need run at all,
            // and liveness asks a pin it can reach (left: see docs/decisions.md). "Rolled out
            // here" at any time: one that settled and then rolls out again with a newer
            // configuration is the running one turning broken (found by a random soak of the
            // review of session 22, seed 4102026).
            Event::UnavailableBundle(i, b)
                if !self.unavailable_bundles.iter().any(|(p, _)| *p == i)
                    && !self.rolled_out_bundles.contains(&(i, b)) =>
            {
                self.unavailable_bundles.push((i, b));
            }
            Event::SetProxy(on) => self.proxy = on.then(proxy_env),
            Event::UnsafeCrd(i, b) => self.unsafe_crds.push((i, b)),
            Event::Annotate(i, ref annotation) => self.annotate(i, annotation),
            Event::ExcludeVersion(i, b) => self.bump(i, |s| {
                let exclude = format!("!={}", VERSIONS[b]);
                s.package.version_range = Some(match s.package.version_range.take() {
                    Some(range) => format!("{range} {exclude}"),
                    None => exclude,
                });
            }),
            Event::ReadmitVersion(i, b) => self.bump(i, |s| {
                let exclude = format!("!={}", VERSIONS[b]);
                s.package.version_range = s.package.version_range.take().and_then(|range| {
                    let kept: Vec<&str> =
                        range.split_whitespace().filter(|t| *t != exclude).collect();
                    (!kept.is_empty()).then(|| kept.join(" "))
                });
            }),
            Event::RevertConfig(i) => {
                // Back to what the status records applied when that settled (the change
                // never applied); otherwise (a change that applied and never settled, or a
                // first install's configuration) to what last ran settled, as the admin recalls.
                // A configuration the admin has seen fail (its pods never Available, or refused:
                // `kubectl describe` and the Events say so) is not gone back to: then the admin
                // writes one the operator runs with (no `LOG_LEVEL`).
                let status = self.status(i);
                let back = if self.pos[i].settled {
                    status
                        .and_then(|s| s.applied_config.as_ref())
                        .and_then(|c| c.config.clone())
                } else {
                    self.pos[i].settled_spec_config.clone()
                };
                let fails = |c: usize| {
                    self.unavailable_configs.contains(&(i, c))
                        || self.refused_configs.contains(&(i, c))
                };
                let level = back
                    .as_ref()
                    .and_then(|config| level_of(&AppliedConfig::of(Some(config), None)));
                let back = if level.is_some_and(fails) { None } else { back };
                self.bump(i, |s| s.config = back);
            }
            Event::DeleteAndRecreate(i) => self.delete_and_recreate(i)?,
            Event::OlderDuplicate(i, exists) => {
                self.older[i] = exists.then(|| {
                    let mut older = self.pos[i].po.clone();
                    older.metadata.name = Some(older_name(i));
                    older.metadata.creation_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            Timestamp::from_second(1_700_000_000).unwrap(),
                        ));
                    // The winner at its best (review of session 23, M6): as settled at its pin
                    // as the PO it displaces was, so that what the loser contributes to the
                    // aggregate is what the invariants judge. Never reconciled by the model, it
                    // falls behind once the cluster's phase moves on.
                    older.status = self.pos[i].po.status.clone();
                    older
                });
            }
            Event::LiftRefusals(i) => {
                self.refused.retain(|(p, _)| *p != i);
                self.refused_partly.retain(|(p, _)| *p != i);
                self.refused_configs.retain(|(p, _)| *p != i);
                // A configuration the operator cannot start with is no policy to lift: its way
                // out is another configuration (review M2: this cured it).
                self.unsafe_crds.retain(|(p, _)| *p != i);
            }
            Event::EditVersionRange(i, r) => self.bump(i, |s| {
                s.package.version_range = VERSION_RANGES[r].map(str::to_owned);
            }),
            Event::EditChannel(i, c) => self.bump(i, |s| {
                s.package.channel = (c < CHANNELS.len()).then(|| CHANNELS[c].to_owned());
            }),
            Event::EditGate(i, gate) => self.bump(i, |s| s.upgrade_gate = gate),
            Event::EditOverride(i, r) => self.bump(i, |s| {
                s.steady_state_version_range = OVERRIDES[r].map(str::to_owned);
            }),
            Event::EditCatalog(i, c) => self.bump(i, |s| {
                s.package.catalog = (c < CATALOGS.len()).then(|| CATALOGS[c].to_owned());
            }),
            Event::EditApproval(i, manual) => self.bump(i, |s| {
                s.upgrade_approval = if manual {
                    UpgradeApproval::Manual
                } else {
                    UpgradeApproval::Automatic
                };
            }),
            Event::Approve(i) => {
                let waiting = self
                    .status(i)
                    .and_then(|s| s.desired_bundle.as_ref())
                    .map(|d| d.name.clone());
                if let Some(bundle) = waiting {
                    self.bump(i, |s| s.approved_bundle = Some(bundle));
                }
            }
            Event::ApproveBundle(i, b) => {
                self.bump(i, |s| s.approved_bundle = Some(bundle_name(PACKAGES[i], b)));
            }
            Event::Pause(i, paused) => self.bump(i, |s| s.paused = paused),
            Event::StartPatch if self.phase.kind == PhaseKind::Steady => {
                // A patch request replaces the minor one in `spec.desiredUpdate`.
                self.requested = None;
                let c = &self.phase.current;
                self.phase = ClusterPhase {
                    kind: PhaseKind::PatchUpgrade,
                    current: c.clone(),
                    target: Version::new(c.major, c.minor, c.patch + 1),
                };
            }
            Event::RequestMinor
                if self.phase.kind == PhaseKind::Steady && self.phase.current.minor < 19 =>
            {
                let c = &self.phase.current;
                self.requested = Some(Version::new(c.major, c.minor + 1, 0));
            }
            Event::WithdrawRequest => self.requested = None,
            Event::EditPreUpdate(i, take) => self.bump(i, |s| {
                s.pre_update_hops = if take {
                    PreUpdateHops::Take
                } else {
                    PreUpdateHops::Offer
                };
            }),
            Event::StartMinor
                if self.phase.kind == PhaseKind::Steady && self.phase.current.minor < 19 =>
            {
                // The CVO accepts the update: the request is where the cluster heads.
                self.requested = None;
                let c = &self.phase.current;
                self.phase = ClusterPhase {
                    kind: PhaseKind::MinorUpgrade,
                    current: c.clone(),
                    target: Version::new(c.major, c.minor + 1, 0),
                };
            }
            Event::Retarget => match self.phase.kind {
                PhaseKind::PatchUpgrade if self.phase.current.minor < 19 => {
                    let c = &self.phase.current;
                    self.phase.kind = PhaseKind::MinorUpgrade;
                    self.phase.target = Version::new(c.major, c.minor + 1, 0);
                }
                PhaseKind::MinorUpgrade => self.phase.target.patch += 1,
                _ => {}
            },
            Event::CompleteUpdate => {
                self.phase = ClusterPhase::steady(self.phase.target.clone());
                self.kube = oracle::kube_of(&self.phase.current);
            }
            Event::RollBack
                if self.phase.kind == PhaseKind::Steady && self.phase.current.patch > 0 =>
            {
                let c = &self.phase.current;
                self.phase = ClusterPhase {
                    kind: PhaseKind::Rollback,
                    current: c.clone(),
                    target: Version::new(c.major, c.minor, c.patch - 1),
                };
                // The API server is rolled back with the cluster; the manager reads its
                // version again while the phase is Rollback.
                self.kube = oracle::kube_of(&self.phase.target);
            }
            Event::InFlightRollback if self.phase.kind == PhaseKind::PatchUpgrade => {
                self.phase = ClusterPhase {
                    kind: PhaseKind::Rollback,
                    current: self.phase.current.clone(),
                    target: self.phase.current.clone(),
                };
            }
            Event::ClusterVersionUnreadable(unreadable) => self.cv_unreadable = unreadable,
            Event::AddBundle(c, b) => self.catalogs[c].present[b] = true,
            Event::RemoveBundle(c, b) => self.catalogs[c].present[b] = false,
            Event::CatalogDown(c) => self.catalogs[c].down = true,
            Event::CatalogUp(c) => self.catalogs[c].down = false,
            Event::FlipPriorities => {
                let p0 = self.catalogs[0].priority;
                self.catalogs[0].priority = self.catalogs[1].priority;
                self.catalogs[1].priority = p0;
            }
            Event::RestartManager => {
                for po in &mut self.pos {
                    po.catalogs_loading = true;
                }
            }
            Event::Wait(seconds) => {
                self.now = Timestamp::from_second(self.now.as_second() + seconds as i64).unwrap();
            }
            _ => {}
        }
        for c in &mut self.catalogs {
            if !c.down && c.served != c.present {
                c.served = c.present;
                c.content = std::sync::Arc::new(content(&c.present, &self.max_ocp, &self.min_kube));
            }
        }
        self.aggregate()
    }

    /// Whether the gather's read of an OperatorCondition (the one of the bundle the status
    /// records, by its name) reaches the running operator's.
    fn reads_running_condition(&self, i: usize) -> bool {
        let sim = &self.pos[i];
        sim.po
            .status
            .as_ref()
            .and_then(|s| s.installed_bundle.as_ref())
            .and_then(|b| index_of(PACKAGES[i], &b.name))
            .is_some_and(|r| Some(r) == sim.running)
    }

    /// The gate the manager reads: the OperatorCondition of the bundle the status records.
    fn gate_read(&self, i: usize) -> OperatorGate {
        let sim = &self.pos[i];
        let mut gate = if self.reads_running_condition(i) {
            oc_gate(sim.says, sim.gate_overridden)
        } else {
            OperatorGate::absent()
        };
        gate.reported |= sim.annotated;
        gate
    }

    /// The catalogs the PO may use, as served now: (name, priority, content, unavailable).
    fn catalogs_of(&self, i: usize) -> Vec<(String, i32, std::sync::Arc<Catalog>, bool)> {
        let named = self.pos[i].po.spec.package.catalog.as_deref();
        self.catalogs
            .iter()
            .filter(|c| named.is_none_or(|n| n == c.name))
            .map(|c| {
                (
                    c.name.to_owned(),
                    c.priority,
                    c.content.clone(),
                    c.down && c.served.iter().any(|b| *b),
                )
            })
            .collect()
    }

    /// Whether a catalog the PO may use is unavailable and offers its package.
    pub fn catalog_unavailable(&self, i: usize) -> bool {
        let named = self.pos[i].po.spec.package.catalog.as_deref();
        self.catalogs
            .iter()
            .any(|c| named.is_none_or(|n| n == c.name) && c.down && c.served.iter().any(|b| *b))
    }

    /// Whether the configuration PO `i`'s Deployments run with never becomes Available.
    pub fn config_unavailable(&self, i: usize) -> bool {
        level_of(&self.pos[i].config_runs)
            .is_some_and(|c| self.unavailable_configs.contains(&(i, c)))
    }

    /// Whether PO `i`'s running Deployments never become Available: their configuration, or
    /// the bundle itself.
    pub fn never_available(&self, i: usize) -> bool {
        self.config_unavailable(i)
            || self.pos[i]
                .running
                .is_some_and(|b| self.unavailable_bundles.contains(&(i, b)))
    }

    fn reconcile(&mut self, i: usize) -> Result<(), String> {
        let previous = self.pos[i].po.status.clone().unwrap_or_default();
        let gate = self.gate_read(i);
        let found_bundle_label = match (&previous.installed_bundle, &previous.active_hop) {
            (None, None) => self.pos[i]
                .running
                .map(|r| pom_api::labels::label_value(&bundle_name(PACKAGES[i], r))),
            _ => None,
        };
        let cluster = if self.cv_unreadable {
            ClusterView::OpenShift(Err("ClusterVersion version: the API did not answer".into()))
        } else {
            ClusterView::OpenShift(Ok(self.phase.clone()))
        };
        let sim = &self.pos[i];
        let contents = self.catalogs_of(i);
        let catalogs = if sim.catalogs_loading {
            CatalogView::Loading {
                catalog: contents[0].0.clone(),
            }
        } else {
            CatalogView::Ready {
                catalogs: contents
                    .iter()
                    .map(|(name, priority, content, _)| CatalogContent {
                        name: name.clone(),
                        priority: *priority,
                        content,
                    })
                    .collect(),
                unavailable: contents
                    .iter()
                    .filter(|c| c.3)
                    .map(|c| format!("Catalog {}: registry unreachable", c.0))
                    .collect(),
            }
        };
        let recorded = previous
            .installed_bundle
            .as_ref()
            .map(|b| Installed::from_status(b, previous.max_open_shift_version.as_deref()));
        let installed = recorded.or_else(|| match (&catalogs, found_bundle_label.as_deref()) {
            (CatalogView::Ready { catalogs, .. }, Some(label)) => {
                pom_policy::snapshot::recover_installed(catalogs, PACKAGES[i], label)
            }
            _ => None,
        });
        let snapshot = PoSnapshot {
            name: PACKAGES[i].into(),
            request: PoRequest::from_spec(PACKAGES[i], &sim.po.spec),
            // As the gather asks it, of the PlatformOperators the manager knows.
            duplicate_of: pom_policy::namespace_clash::duplicate_winner(
                &sim.po,
                self.older[i].iter().chain(std::iter::once(&sim.po)),
            ),
            namespace_clash: None,
            // As the manager reads it: a request the CVO has not started, while steady.
            requested_update: match &cluster {
                ClusterView::OpenShift(Ok(phase)) => self
                    .requested
                    .clone()
                    .filter(|r| phase.kind == PhaseKind::Steady && r.minor > phase.current.minor),
                _ => None,
            },
            installed,
            // The model's manager is one replica that never forgets: it watched every
            // recorded instant since it was written (`pom_policy::clock`).
            hop: previous.active_hop.as_ref().map(|active| Hop {
                started_seen_for: pom_policy::snapshot::elapsed(self.now, active.started_at.0),
                settled_seen_for: active.settled_at.as_ref().map_or(Duration::ZERO, |at| {
                    pom_policy::snapshot::elapsed(self.now, at.0)
                }),
                replaced: active.replaces.as_ref().map(|r| ReplacedStart {
                    at: r.started_at.0,
                    seen_for: pom_policy::snapshot::elapsed(self.now, r.started_at.0),
                }),
                ..Hop::from(active)
            }),
            cluster,
            kube_version: Some(self.kube.clone()),
            catalogs,
            gate: gate.clone(),
            now: self.now,
            found_bundle_label,
            // As the gather reads them from the PO.
            unsettled_move: unsettled_move_of(&sim.po),
            guard: GuardState::Intact,
            paused: sim.po.spec.paused,
            config: ConfigView::of(&sim.po, self.proxy.as_ref()),
        };
        let decision = decide(&snapshot);
        if std::env::var_os("POM_STATE_MACHINE_TRACE").is_some() {
            // A replayed sequence's decisions, for whoever debugs it.
            eprintln!(
                "{} (generation {:?}): {decision:?}",
                PACKAGES[i], self.pos[i].po.metadata.generation
            );
        }
        if let Action::WaitForCatalog { .. } = &decision.action {
            self.pos[i].catalogs_loading = false;
            return Ok(());
        }

        // The world as this reconcile reads it: whether its operator has reported, on the
        // OperatorCondition the reconcile reads (the bundle the status records: one whose
        // apply a crash left unrecorded reports where no reconcile looks; known open, see
        // docs/decisions.md).
        let now = self.now;
        if self.reads_running_condition(i) && self.pos[i].says.reported() {
            self.pos[i].reported_seen = true;
        }
        if gate.reported {
            // The manager remembers a report it read, not only one the apply's
            // OperatorCondition shows (`reconcile.rs`, the fix of bug "annotation").
            self.pos[i].annotated = true;
        }
        let owed = oracle::next_move(self, i);
        checks::decision(self, i, &decision, owed)?;

        // Intent before writes, then act, as the manager does, on the simulated cluster.
        let generation = self.pos[i].po.metadata.generation;
        let upgrade_gate = self.pos[i].po.spec.upgrade_gate;
        let applying = match &decision.action {
            Action::Move(target) => objects_of(PACKAGES[i], &target.name),
            _ => Vec::new(),
        };
        let intent = status::intent(&status_input(
            &previous,
            generation,
            now,
            &decision,
            &ActOutcome::Skipped,
            upgrade_gate,
            gate.reported,
            &applying,
        ));
        let previous = match intent {
            Some(intent) => {
                checks::intent_inventory(&intent, &applying)?;
                self.pos[i].po.status = Some(intent.clone());
                if self.pos[i].crash_during_next_move {
                    self.pos[i].intent_at_crash = intent.active_hop.as_ref().map(|h| h.to.clone());
                    if let Some(change) =
                        decision.config_change.as_ref().filter(|c| c.held.is_none())
                    {
                        self.pos[i].config_intent = Some(change.digest.clone());
                    }
                    // The manager dies here: a new one starts with cold caches.
                    for po in &mut self.pos {
                        po.crash_during_next_move = false;
                        po.catalogs_loading = true;
                    }
                    return Ok(());
                }
                intent
            }
            None => previous,
        };
        let target = match &decision.action {
            Action::WaitForCatalog { .. } | Action::Nothing => None,
            Action::Move(target) => Some((
                InstalledBundle {
                    name: target.name.clone(),
                    version: target.version.to_string(),
                    image: target.image.clone(),
                    objects_digest: None,
                },
                target.max_openshift_version.clone(),
            )),
            Action::Keep => snapshot.installed.as_ref().map(|installed| {
                (
                    installed.bundle.clone(),
                    installed.max_openshift_version.clone(),
                )
            }),
        };
        drop(snapshot);
        let outcome = self.act(i, target, decision.config.clone());
        let starting_config = decision
            .config_change
            .as_ref()
            .filter(|c| c.held.is_none())
            .map(|c| c.digest.clone());
        match &outcome {
            ActOutcome::Failed(_) => {
                if starting_config.is_some() {
                    self.pos[i].config_intent = starting_config;
                }
            }
            ActOutcome::Applied(_) => {
                self.pos[i].config_intent = None;
                if !self.pos[i].crash_after_next_apply {
                    self.pos[i].config_unrecorded = false;
                }
            }
            ActOutcome::Skipped => {}
        }
        if self.pos[i].crash_after_next_apply && !matches!(&outcome, ActOutcome::Skipped) {
            // The manager dies after the apply, before the status write: the status keeps the
            // intent (or what it had), the cluster has what was written. A move it recorded is
            // resumed by the next manager (it cannot know that it applied).
            if matches!(&outcome, ActOutcome::Applied(_)) {
                self.pos[i].config_unrecorded = true;
            }
            if let Action::Move(target) = &decision.action {
                self.pos[i].intent_at_crash = Some(target.name.clone());
            }
            // A PO recovering from a lost status is still recovering: nothing recorded it,
            // whether no status was written since or only one that records no bundle and no
            // move (a failed re-apply's conditions; found by soak seed 7077077), so the re-apply
            // that records it starts the clock of its move again.
            if self.pos[i]
                .po
                .status
                .as_ref()
                .is_none_or(|s| s.installed_bundle.is_none() && s.active_hop.is_none())
            {
                self.pos[i].status_lost = true;
                self.pos[i].on_cluster.clear();
            }
            for po in &mut self.pos {
                po.crash_after_next_apply = false;
                po.catalogs_loading = true;
            }
            return Ok(());
        }
        if matches!(&outcome, ActOutcome::Applied(_)) && !self.pos[i].applied_now {
            // What the apply saw of the running bundle: its rollout, and whether the move to it
            // has settled by §7 (judged by the oracle, latched).
            // The Auto window listens for a first report once nothing else holds the move: a
            // rollout seen under a gate that asks the operator's word starts no window (found
            // by soak seed 4242: a gate edited to Auto after a long wait for the word).
            // A move resumed over what already runs (its apply before a crash went unrecorded)
            // is judged by the reconcile after the one that records it running: that one's
            // verdict was made before it ran (found when a resumed install regressed at once).
            let records_it_now = matches!(&decision.action, Action::Move(t)
                if previous.installed_bundle.as_ref().is_none_or(|b| b.name != t.name));
            // Nor does Auto's window start there: the reconcile that records it checks its
            // objects again before anything else (release soak, seed 20261209).
            let sim = &mut self.pos[i];
            if sim.rolled_out
                && !sim.regressed
                && sim.rolled_out_seen_at.is_none()
                && !oracle::gate_requires_report(sim)
                && !records_it_now
            {
                sim.rolled_out_seen_at = Some(now);
            }
            if !records_it_now && oracle::settles_now(self, &self.pos[i]) {
                self.pos[i].settled = true;
                self.pos[i].settled_spec_config = self.pos[i].config_runs.config.clone();
            }
        }
        if let (ActOutcome::Failed(_), Action::Move(target)) = (&outcome, &decision.action) {
            // Recorded as intent, not applied: resumed like a crash's.
            self.pos[i].intent_at_crash = Some(target.name.clone());
        }
        let new_status = status::compute(&status_input(
            &previous,
            generation,
            now,
            &decision,
            &outcome,
            upgrade_gate,
            gate.reported,
            &[],
        ));
        let mut new_status = new_status;
        // Prune after settle, as the manager does: what only older bundles own goes, never
        // anything the installed bundle owns, and the inventory keeps the installed entry.
        if let (Some(installed), ActOutcome::Applied(_)) = (&new_status.installed_bundle, &outcome)
            && new_status.active_hop.as_ref().is_none_or(|h| h.settled)
        {
            let pruned = inventory::to_prune(&new_status.inventory, &installed.name);
            let owned = objects_of(PACKAGES[i], &installed.name);
            if let Some(lost) = pruned.iter().find(|o| owned.contains(o)) {
                return Err(format!(
                    "prune would delete {lost:?}, which the installed {} owns",
                    installed.name
                ));
            }
            new_status.inventory = inventory::after_prune(&new_status.inventory, &installed.name);
            self.pos[i].on_cluster.retain(|o| !pruned.contains(o));
        }
        // A move by the world: an apply that changed what runs (a bundle, or its
        // configuration); re-applying what runs as a "move" to itself moves nothing.
        let moved_now = matches!(&outcome, ActOutcome::Applied(_))
            && matches!(&decision.action, Action::Move(_))
            && self.pos[i].applied_now;
        let sim = &self.pos[i];
        let read = Read {
            generation: sim.po.metadata.generation.unwrap_or(1),
            cluster: self.cluster_key(),
            blockers: checks::blockers(
                self,
                i,
                owed.filter(|_| !moved_now),
                matches!(&outcome, ActOutcome::Applied(_)),
            ),
            at_pin: sim.settled && owed.is_none() && !moved_now,
        };
        checks::status(self, i, &new_status, &outcome, &read)?;
        checks::written_objects_listed(self, i, &new_status)?;
        checks::resumed_intent(self, i, &new_status)?;
        let _ = status::requeue(&new_status, &outcome, Duration::from_secs(300), now);
        self.pos[i].po.status = Some(new_status);
        self.pos[i].last_read = Some(read);
        Ok(())
    }

    /// Applies `target` (a move, or a re-apply of what runs) on the simulated cluster.
    fn act(
        &mut self,
        i: usize,
        target: Option<(InstalledBundle, Option<MaxOpenShiftVersion>)>,
        config: Option<AppliedConfig>,
    ) -> ActOutcome {
        let Some((bundle, max)) = target else {
            return ActOutcome::Skipped;
        };
        let config = config.unwrap_or_else(AppliedConfig::none);
        let index = index_of(PACKAGES[i], &bundle.name).unwrap();
        let refused = self.refused.contains(&(i, index));
        // A CRD change is a change from what runs (a first install changes no CRD of its own).
        let unsafe_crd = self.unsafe_crds.contains(&(i, index))
            && self.pos[i].running.is_some_and(|r| r != index)
            && self.annotation(i, CRD_SAFETY_OVERRIDE) != Some(bundle.name.as_str());
        // What a policy engine refuses after the first objects are written: the Deployment.
        let deployment_refused = self.refused_partly.contains(&(i, index))
            || level_of(&config).is_some_and(|c| self.refused_configs.contains(&(i, c)));
        let now = self.now;
        let sim = &mut self.pos[i];
        sim.applied_now = false;
        if sim.fail_next_apply || refused {
            sim.fail_next_apply = false;
            return ActOutcome::Failed(Problem {
                reason: pom_api::conditions::Reason::InstallFailed,
                message: if refused {
                    format!("admission webhook denied {}", bundle.name)
                } else {
                    "registry unreachable".into()
                },
                degrades: true,
            });
        }
        if unsafe_crd {
            // The manager's refusal before any write (`crates/controller`, `Error::UnsafeCrdChange`,
            // its message's shape: the controller is not a dependency of this crate).
            return ActOutcome::Failed(Problem {
                reason: pom_api::conditions::Reason::UnsafeCRDChange,
                message: format!(
                    "bundle {} would change CRDs unsafely, so the running version is kept: widgets.example.com drops stored version v1. Publish a bundle whose CRD change keeps stored versions and existing custom resources valid; if you judge this check wrong for this bundle, `kubectl annotate platformoperator <name> {CRD_SAFETY_OVERRIDE}={}` applies it once, with a Warning Event",
                    bundle.name, bundle.name
                ),
                degrades: true,
            });
        }
        let objects = objects_of(PACKAGES[i], &bundle.name);
        if deployment_refused {
            // Everything before the Deployment is written; the Deployment is refused. (While
            // the PO recovers from a lost status, its objects are found by their labels.)
            for o in objects
                .iter()
                .filter(|o| o.kind != "Deployment" && !sim.status_lost)
            {
                if !sim.on_cluster.contains(o) {
                    sim.on_cluster.push(o.clone());
                }
            }
            return ActOutcome::Failed(Problem {
                reason: pom_api::conditions::Reason::InstallFailed,
                message: format!(
                    "admission webhook \"policy\" denied Deployment {}/{}",
                    PACKAGES[i], bundle.name
                ),
                degrades: true,
            });
        }
        for o in &objects {
            if !sim.on_cluster.contains(o) {
                sim.on_cluster.push(o.clone());
            }
        }
        if sim.running == Some(index) && sim.config_runs.digest != config.digest {
            // A configuration change restarts the operator: a move of its own.
            sim.rolled_out = false;
            sim.regressed = false;
            sim.rolled_out_seen_at = None;
            sim.settled = false;
            sim.move_started_at = now;
            sim.applied_now = true;
        }
        sim.config_runs = config;
        if sim.running != Some(index) {
            sim.running = Some(index);
            sim.rolled_out = false;
            sim.regressed = false;
            sim.rolled_out_seen_at = None;
            sim.says = Says::Never;
            sim.gate_overridden = false;
            sim.settled = false;
            sim.move_started_at = now;
            sim.intent_at_crash = None;
            sim.applied_now = true;
            self.moves += 1;
        }
        let sim = &mut self.pos[i];
        if std::mem::take(&mut sim.status_lost) && sim.running == Some(index) {
            sim.move_started_at = now;
            sim.applied_now = true;
        }
        if sim.says == Says::Deleted {
            // POM creates the bundle's OperatorCondition with every apply.
            sim.says = Says::Never;
        }
        let gate_after = oc_gate(sim.says, sim.gate_overridden);
        if gate_after.reported {
            sim.annotated = true;
        }
        let mut waits = Vec::new();
        if !sim.rolled_out || sim.regressed {
            waits.push(Wait::Rollout {
                namespace: PACKAGES[i].into(),
                name: "operator".into(),
            });
        }
        ActOutcome::Applied(Box::new(InstallReport {
            bundle: bundle.clone(),
            max_openshift_version: max,
            waits,
            operator_condition: Some(OperatorConditionReport {
                namespace: PACKAGES[i].into(),
                name: format!("{}-csv", bundle.name),
                gate: Some(gate_after),
            }),
            wrote: 0,
            objects: objects_of(PACKAGES[i], &bundle.name),
            powers: Vec::new(),
            unavailable: if sim.regressed {
                vec![UnavailableDeployment {
                    namespace: PACKAGES[i].into(),
                    name: "operator".into(),
                    why: "MinimumReplicasUnavailable".into(),
                }]
            } else {
                Vec::new()
            },
        }))
    }

    pub fn cluster_key(&self) -> Option<ClusterKey> {
        (!self.cv_unreadable).then(|| {
            let p = &self.phase;
            (
                p.kind,
                (p.current.major, p.current.minor),
                (p.target.major, p.target.minor),
            )
        })
    }

    fn aggregate(&mut self) -> Result<(), String> {
        // Every PlatformOperator the API server holds, the older ones naming a package included
        // (the aggregator lists them all; the model never reconciles an older one, so it has
        // not reported: found by the release soak, seed 20261207).
        let pos: Vec<std::sync::Arc<PlatformOperator>> = self
            .pos
            .iter()
            .map(|p| &p.po)
            .chain(self.older.iter().flatten())
            .map(|po| std::sync::Arc::new(po.clone()))
            .collect();
        let now = pom_policy::conditions::to_api_time(self.now);
        // The manager is updated with the payload: it reports the version the cluster goes to.
        let release = self.release();
        let reported_before = self.co.versions.iter().any(|v| v.version == release);
        let view = if self.cv_unreadable {
            ClusterPhaseView::Unknown
        } else {
            ClusterPhaseView::Known {
                kind: self.phase.kind,
                target: self.phase.target.clone(),
            }
        };
        self.co = aggregate::compute(
            &pos,
            &self.co,
            &release,
            "pom",
            view,
            &GuardState::Intact,
            &now,
        );
        let reported_now = self.co.versions.iter().any(|v| v.version == release);
        checks::aggregate(self, reported_now && !reported_before)
    }

    pub fn release(&self) -> String {
        self.phase.target.to_string()
    }

    /// `spec.progressDeadline` as the world sets it ("10m"), in seconds.
    pub fn deadline_secs(&self) -> i64 {
        DEADLINE.as_secs() as i64
    }
}

#[allow(clippy::too_many_arguments)]
fn status_input<'a>(
    previous: &'a PlatformOperatorStatus,
    generation: Option<i64>,
    now: Timestamp,
    decision: &'a pom_policy::PoDecision,
    outcome: &'a ActOutcome,
    upgrade_gate: UpgradeGate,
    reported_before: bool,
    applying: &'a [InventoryObject],
) -> StatusInput<'a> {
    let image = match (&decision.action, applying.is_empty()) {
        (Action::Move(target), false) => target.image.as_deref(),
        _ => None,
    };
    StatusInput {
        previous,
        generation,
        now,
        decision,
        outcome,
        upgrade_gate,
        reported_before,
        applying,
        applying_image: image,
        applying_namespace: (!applying.is_empty()).then_some("ns"),
        auto_settle_window: auto_settle_window().unwrap_or(Duration::ZERO),
        // As for the hop's start: watched since it was recorded.
        rolled_out_seen_for: previous
            .active_hop
            .as_ref()
            .and_then(|hop| hop.rolled_out_at.as_ref())
            .map_or(Duration::ZERO, |at| {
                pom_policy::snapshot::elapsed(now, at.0)
            }),
        settled_seen_for: previous
            .active_hop
            .as_ref()
            .and_then(|hop| hop.settled_at.as_ref())
            .map_or(Duration::ZERO, |at| {
                pom_policy::snapshot::elapsed(now, at.0)
            }),
    }
}

/// What an OperatorCondition in state `says` reads as (`pom_policy::snapshot::gate_of`'s
/// shape: an OperatorCondition without the operator's word is pending, not absent; the
/// admin's override reads in place of the operator's word).
fn oc_gate(says: Says, overridden: bool) -> OperatorGate {
    let reading = match says {
        Says::Deleted => GateReading::Absent,
        _ if overridden => GateReading::Says {
            upgradeable: true,
            message: "admin override: the operator cannot run".into(),
            overridden: true,
        },
        Says::Never | Says::Pending => GateReading::Pending {
            message: "no Upgradeable condition for the current generation".into(),
        },
        Says::True | Says::False => GateReading::Says {
            upgradeable: says == Says::True,
            message: "migration".into(),
            overridden: false,
        },
    };
    OperatorGate {
        reported: says.reported(),
        reading,
        object: None,
    }
}

/// A catalog serving `present` for every package, with channels stable and fast.
fn content(
    present: &[bool; VERSIONS.len()],
    max_ocp: &[Option<u64>; VERSIONS.len()],
    min_kube: &[Option<(u64, u64)>; VERSIONS.len()],
) -> Catalog {
    let mut packages = BTreeMap::new();
    for package in PACKAGES {
        let mut bundles = BTreeMap::new();
        let mut channels = BTreeMap::new();
        for channel in CHANNELS {
            let mut entries = Vec::new();
            for (i, version) in VERSIONS.iter().enumerate() {
                if !present[i] || !oracle::in_channel(channel, i) {
                    continue;
                }
                let name = bundle_name(package, i);
                bundles.insert(
                    name.clone(),
                    Bundle {
                        name: name.clone(),
                        package: package.into(),
                        image: Some(format!("registry.example/{package}@sha256:{i}")),
                        version: v(version),
                        properties: BundleProperties {
                            max_openshift_version: max_ocp[i]
                                .map(|minor| MaxOpenShiftVersion::Valid { major: 4, minor }),
                            min_kube_version: min_kube[i]
                                .map(|(minor, patch)| format!("1.{minor}.{patch}").into()),
                            ..BundleProperties::default()
                        },
                        origin: Origin::default(),
                    },
                );
                let (skips, skip_range) = match channel {
                    "stable" => (
                        Vec::new(),
                        SKIP_RANGES
                            .iter()
                            .find(|(at, _)| *at == i)
                            .map(|(_, r)| SkipRange::parse(r).unwrap()),
                    ),
                    _ => (
                        i.checked_sub(2)
                            .map(|p| bundle_name(package, p))
                            .into_iter()
                            .collect(),
                        None,
                    ),
                };
                entries.push(ChannelEntry {
                    name,
                    replaces: i.checked_sub(1).map(|p| bundle_name(package, p)),
                    skips,
                    skip_range,
                });
            }
            entries.sort_by(|a, b| a.name.cmp(&b.name));
            if !entries.is_empty() {
                channels.insert(
                    channel.to_owned(),
                    Channel {
                        name: channel.to_owned(),
                        entries,
                    },
                );
            }
        }
        if bundles.is_empty() {
            continue;
        }
        packages.insert(
            package.to_owned(),
            Package {
                name: package.to_owned(),
                default_channel: Some(CHANNELS[0].to_owned()),
                description: None,
                channels,
                bundles,
                deprecations: Deprecations::default(),
            },
        );
    }
    Catalog {
        packages,
        others: Vec::new(),
        invalid_packages: Default::default(),
    }
}

/// The objects a bundle of `package` ships in this model, in the order they are written: a
/// ConfigMap of its own, a ServiceAccount every bundle shares, and a Deployment renamed by
/// every bundle (written last).
pub fn objects_of(package: &str, bundle: &str) -> Vec<InventoryObject> {
    vec![
        InventoryObject {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            namespace: Some(package.into()),
            name: format!("{bundle}-config"),
        },
        InventoryObject {
            api_version: "apps/v1".into(),
            kind: "Deployment".into(),
            namespace: Some(package.into()),
            name: bundle.into(),
        },
        InventoryObject {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some(package.into()),
            name: "operator".into(),
        },
    ]
}
