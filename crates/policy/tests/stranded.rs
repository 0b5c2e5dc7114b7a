//! Issue 34 "states nobody can leave", items 1-3, as scripted sequences: each reconcile reads
//! the PlatformOperator as the gather does (`ConfigView::of`, `unsettled_move_of`, the status'
//! installed bundle and hop), then `decide` → `status::intent` → a simulated apply (which the
//! API server may refuse) → `status::compute`, as the manager's pipeline chains them.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, LazyLock};
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::conditions::{ConditionStatus, Reason, types};
use pom_api::platform_operator::{
    InstalledBundle, OperatorConfig, PackageSpec, PlatformOperatorSpec, PlatformOperatorStatus,
    UpgradeGate,
};
use pom_policy::aggregate::{self, ClusterPhaseView};
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, ConfigView, GuardState, Hop, Installed, OperatorGate,
    PoSnapshot, unsettled_move_of,
};
use pom_policy::status::{self, ActOutcome, InstallReport, StatusInput};
use pom_policy::{Action, HoldReason, PoDecision, Problem, decide};
use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::{Catalog, parse_documents};
use semver::Version;

/// `demo`, channel `stable`: 1.0.0 → 1.1.0 (max 4.17) → 1.1.1.
const FBC: &str = r#"
{"schema":"olm.package","name":"demo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"demo","name":"stable","entries":[
  {"name":"demo.v1.0.0"},
  {"name":"demo.v1.1.0","replaces":"demo.v1.0.0"},
  {"name":"demo.v1.1.1","replaces":"demo.v1.1.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.example/demo-bundle:v1.0.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.1.0","image":"quay.example/demo-bundle:v1.1.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.1.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.1.1","image":"quay.example/demo-bundle:v1.1.1","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.1.1"}}]}
"#;

static DEMO: LazyLock<Catalog> =
    LazyLock::new(|| parse_documents([("demo.json".to_owned(), FBC.as_bytes().to_vec())]).unwrap());

const ABANDON: &str = "platform.openshift.io/unsettled-move";

fn steady() -> ClusterView {
    phase(PhaseKind::Steady, "4.16.3")
}

fn patch() -> ClusterView {
    phase(PhaseKind::PatchUpgrade, "4.16.4")
}

fn phase(kind: PhaseKind, target: &str) -> ClusterView {
    ClusterView::OpenShift(Ok(ClusterPhase {
        kind,
        current: Version::parse("4.16.3").unwrap(),
        target: Version::parse(target).unwrap(),
    }))
}

/// What the API server refuses to apply.
#[derive(Default)]
struct Refuses {
    bundle: Option<String>,
    config: Option<String>,
    /// A configuration (digest) the API server accepts but whose Deployment never becomes
    /// Available (a bad flag, an image that cannot pull through the new proxy): it applies
    /// and never settles.
    unavailable_config: Option<String>,
}

/// One PlatformOperator, its cluster and what its API server refuses.
struct Sim {
    po: PlatformOperator,
    cluster: ClusterView,
    refuses: Refuses,
    /// Seconds since the start.
    clock: i64,
}

impl Sim {
    fn new(version_range: Option<&str>) -> Self {
        let mut po = PlatformOperator::new(
            "demo",
            PlatformOperatorSpec {
                package: PackageSpec {
                    name: "demo".to_owned(),
                    version_range: version_range.map(str::to_owned),
                    ..PackageSpec::default()
                },
                steady_state_version_range: None,
                install_namespace: None,
                upgrade_gate: UpgradeGate::Rollout,
                progress_deadline: "10m".to_owned(),
                soak: None,
                content_exceptions: Vec::new(),
                omit_objects: Vec::new(),
                consent: Default::default(),
                watch_namespace: None,
                upgrade_approval: Default::default(),
                pre_update_hops: Default::default(),
                approved_bundle: None,
                paused: false,
                config: None,
                adopt_from: None,
            },
        );
        po.metadata.generation = Some(1);
        Self {
            po,
            cluster: steady(),
            refuses: Refuses::default(),
            clock: 0,
        }
    }

    fn status(&self) -> PlatformOperatorStatus {
        self.po.status.clone().unwrap_or_default()
    }

    fn now(&self) -> Timestamp {
        Timestamp::from_second(1_717_243_200 + self.clock).unwrap()
    }

    /// The snapshot the gather builds from the PO.
    fn snapshot(&self) -> PoSnapshot<'static> {
        let status = self.status();
        PoSnapshot {
            name: "demo".to_owned(),
            request: pom_policy::PoRequest::from_spec("demo", &self.po.spec),
            duplicate_of: None,
            namespace_clash: None,
            requested_update: None,
            installed: status
                .installed_bundle
                .as_ref()
                .map(|b| Installed::from_status(b, status.max_open_shift_version.as_deref())),
            hop: status.active_hop.as_ref().map(Hop::from),
            cluster: self.cluster.clone(),
            kube_version: None,
            catalogs: CatalogView::Ready {
                catalogs: vec![CatalogContent {
                    name: "redhat".to_owned(),
                    priority: 0,
                    content: &DEMO,
                }],
                unavailable: vec![],
            },
            gate: OperatorGate::absent(),
            now: self.now(),
            found_bundle_label: None,
            unsettled_move: unsettled_move_of(&self.po),
            guard: GuardState::Intact,
            paused: self.po.spec.paused,
            config: ConfigView::of(&self.po, None),
        }
    }

    fn input<'a>(
        &self,
        previous: &'a PlatformOperatorStatus,
        decision: &'a PoDecision,
        outcome: &'a ActOutcome,
    ) -> StatusInput<'a> {
        StatusInput {
            previous,
            generation: self.po.metadata.generation,
            now: self.now(),
            decision,
            outcome,
            upgrade_gate: UpgradeGate::Rollout,
            reported_before: false,
            applying: &[],
            applying_image: None,
            applying_namespace: Some("demo"),
            auto_settle_window: Duration::ZERO,
            rolled_out_seen_for: std::time::Duration::ZERO,
            settled_seen_for: std::time::Duration::ZERO,
        }
    }

    /// The simulated apply: the bundle's objects as wanted and rolled out, unless the API
    /// server refuses the bundle or the configuration.
    fn apply(&self, decision: &PoDecision, recorded: &PlatformOperatorStatus) -> ActOutcome {
        let bundle = match &decision.action {
            Action::Move(target) => InstalledBundle {
                name: target.name.clone(),
                version: target.version.to_string(),
                image: target.image.clone(),
                objects_digest: None,
            },
            Action::Keep => recorded.installed_bundle.clone().unwrap(),
            Action::Nothing | Action::WaitForCatalog { .. } => return ActOutcome::Skipped,
        };
        let config = decision.config.as_ref().map(|c| c.digest.clone());
        if self.refuses.bundle.as_deref() == Some(bundle.name.as_str())
            || (self.refuses.config.is_some() && self.refuses.config == config)
        {
            return ActOutcome::Failed(Problem {
                reason: Reason::InstallFailed,
                message: "admission webhook \"gatekeeper\" denied the request".to_owned(),
                degrades: true,
            });
        }
        let max = DEMO.packages["demo"].bundles[&bundle.name]
            .properties
            .max_openshift_version
            .clone();
        let waits = if config.is_some() && self.refuses.unavailable_config == config {
            vec![status::Wait::Rollout {
                namespace: "demo".to_owned(),
                name: "demo-operator".to_owned(),
            }]
        } else {
            vec![]
        };
        ActOutcome::Applied(Box::new(InstallReport {
            bundle,
            max_openshift_version: max,
            waits,
            operator_condition: None,
            wrote: 1,
            objects: vec![],
            powers: vec![],
            unavailable: vec![],
        }))
    }

    /// One reconcile, 60 s after the last; returns its decision.
    fn reconcile(&mut self) -> PoDecision {
        self.clock += 60;
        let decision = decide(&self.snapshot());
        let recorded = self.status();
        let recorded = status::intent(&self.input(&recorded, &decision, &ActOutcome::Skipped))
            .unwrap_or(recorded);
        let outcome = self.apply(&decision, &recorded);
        let status = status::compute(&self.input(&recorded, &decision, &outcome));
        self.po.status = Some(status);
        decision
    }

    fn annotate(&mut self, value: &str) {
        self.po
            .metadata
            .annotations
            .get_or_insert_with(Default::default)
            .insert(ABANDON.to_owned(), value.to_owned());
    }

    /// The PO's condition of `type_`: status, reason, message.
    fn condition(&self, type_: &str) -> (String, String, String) {
        let status = self.status();
        let c = status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .unwrap_or_else(|| panic!("no {type_}"));
        (c.status.clone(), c.reason.clone(), c.message.clone())
    }

    fn installed(&self) -> Option<String> {
        self.status().installed_bundle.map(|b| b.name)
    }

    fn hop_settled(&self) -> bool {
        self.status().active_hop.is_some_and(|h| h.settled)
    }
}

fn log_level(level: &str) -> OperatorConfig {
    serde_json::from_value(serde_json::json!({"env": [{"name": "LOG_LEVEL", "value": level}]}))
        .unwrap()
}

/// 1.1.0 installed (versionRange `<=1.1.0`) and settled on a steady 4.16.3.
fn settled_at_1_1_0() -> Sim {
    let mut sim = Sim::new(Some("<=1.1.0"));
    sim.reconcile();
    sim.reconcile();
    assert_eq!(sim.installed().as_deref(), Some("demo.v1.1.0"));
    assert!(sim.hop_settled(), "{:#?}", sim.status());
    sim
}

/// Item 1: a configuration change the API server refuses is not what runs, is counted and
/// backed off, and the admin's revert (or a newer change) replaces it; the next hop is not
/// held behind it.
#[test]
fn a_refused_configuration_change_is_not_what_runs_and_a_revert_replaces_it() {
    let mut sim = settled_at_1_1_0();
    let debug = pom_api::platform_operator::AppliedConfig::of(Some(&log_level("debug")), None);
    sim.refuses.config = Some(debug.digest.clone());
    sim.po.spec.config = Some(log_level("debug"));
    sim.reconcile();
    sim.reconcile();
    let status = sim.status();
    assert_ne!(
        status.applied_config.as_ref().map(|c| c.digest.clone()),
        Some(debug.digest.clone()),
        "a refused configuration is recorded as what runs"
    );
    let hop = status.active_hop.clone().unwrap();
    assert_eq!(
        (hop.config.as_deref(), hop.settled, hop.failed_attempts),
        (Some(debug.digest.as_str()), false, 2),
        "the refused change is counted"
    );
    assert_eq!(
        status::requeue(
            &status,
            &ActOutcome::Failed(Problem {
                reason: Reason::InstallFailed,
                message: String::new(),
                degrades: true
            }),
            Duration::from_secs(3600),
            sim.now()
        ),
        Duration::from_secs(30),
        "backed off as a hop's"
    );
    let (_, _, degraded) = sim.condition(types::DEGRADED);
    assert!(
        degraded.contains("2 failed attempts") && degraded.contains("change spec.config"),
        "{degraded}"
    );
    let (_, _, upgradeable) = sim.condition(types::UPGRADEABLE);
    assert!(
        upgradeable.contains("refuses") && !upgradeable.contains("wait for it"),
        "{upgradeable}"
    );

    // The admin reverts: nothing waits behind the change that never applied.
    sim.po.spec.config = None;
    let decision = sim.reconcile();
    assert_eq!(decision.config_change, None, "{decision:#?}");
    sim.reconcile();
    assert!(sim.hop_settled(), "{:#?}", sim.status().active_hop);
    assert_eq!(sim.status().applied_config, None);
    assert_eq!(sim.condition(types::UPGRADEABLE).0, "True");

    // A newer change, refused again, is replaced by the next newer one (not held behind it).
    let trace = pom_api::platform_operator::AppliedConfig::of(Some(&log_level("trace")), None);
    sim.refuses.config = Some(trace.digest.clone());
    sim.po.spec.config = Some(log_level("trace"));
    sim.reconcile();
    sim.po.spec.config = Some(log_level("info"));
    let decision = sim.reconcile();
    assert_eq!(
        decision.config_change.as_ref().map(|c| c.held.clone()),
        Some(None),
        "the newer change starts: {decision:#?}"
    );
    sim.reconcile();
    assert!(sim.hop_settled(), "{:#?}", sim.status().active_hop);
    assert_eq!(
        sim.status().applied_config.map(|c| c.digest),
        Some(pom_api::platform_operator::AppliedConfig::of(Some(&log_level("info")), None).digest)
    );

    // ...and a refused change that is still asked for holds no later hop.
    sim.po.spec.config = Some(log_level("trace"));
    sim.reconcile();
    sim.po.spec.package.version_range = None;
    sim.cluster = patch();
    let decision = sim.reconcile();
    assert!(
        matches!(&decision.action, Action::Move(t) if t.name == "demo.v1.1.1"),
        "the next hop is held behind a change that never applied: {decision:#?}"
    );
}

/// Review H1: a configuration change that applied but never settles (the new configuration's
/// Deployment never becomes Available) held the admin's revert behind it (the revert waited
/// for the move in flight, which was the change itself), and `abandon:` is refused for a
/// configuration change: no way out. A newer configuration (a revert included) replaces an
/// unsettled configuration change past its deadline, as it replaces one that never applied; a
/// bundle hop still waits for it.
#[test]
fn an_applied_configuration_change_that_never_settles_is_replaced_by_a_revert() {
    let mut sim = settled_at_1_1_0();
    let debug = pom_api::platform_operator::AppliedConfig::of(Some(&log_level("debug")), None);
    sim.refuses.unavailable_config = Some(debug.digest.clone());
    sim.po.spec.config = Some(log_level("debug"));
    sim.reconcile();
    sim.reconcile();
    let status = sim.status();
    assert_eq!(
        status.applied_config.as_ref().map(|c| c.digest.clone()),
        Some(debug.digest.clone()),
        "the change applied"
    );
    let hop = status.active_hop.clone().unwrap();
    assert_eq!(
        (hop.config.as_deref(), hop.settled),
        (Some(debug.digest.as_str()), false),
        "the change is unsettled"
    );
    // The next hop waits for it (it runs, unsettled).
    sim.po.spec.package.version_range = None;
    sim.cluster = patch();
    let decision = sim.reconcile();
    assert!(
        matches!(&decision.action, Action::Keep),
        "a hop starts while a configuration change that applied has not settled: {decision:#?}"
    );
    // `abandon:` is refused for a configuration change and names the revert.
    sim.annotate("abandon:demo.v1.1.0");
    sim.reconcile();
    let said: String = sim
        .status()
        .conditions
        .iter()
        .map(|c| format!("{}: {}\n", c.reason, c.message))
        .collect();
    assert!(
        said.contains("cannot be abandoned") && said.contains("change spec.config"),
        "{said}"
    );
    sim.po.metadata.annotations = None;

    // Before its deadline a newer configuration waits for it (review of session 22, finding 1:
    // a change refused over a move rolling out fine kept that move unsettled for good)...
    sim.po.spec.config = Some(log_level("trace"));
    let decision = sim.reconcile();
    assert_eq!(
        decision.config_change.as_ref().map(|c| c.held.clone()),
        Some(Some(HoldReason::MoveNotSettled)),
        "{decision:#?}"
    );
    // ...past it (10 minutes, judged with the clock-skew allowance), a newer configuration
    // replaces it (and never settles either)...
    sim.clock += 20 * 60;
    let trace = pom_api::platform_operator::AppliedConfig::of(Some(&log_level("trace")), None);
    sim.refuses.unavailable_config = Some(trace.digest.clone());
    sim.po.spec.config = Some(log_level("trace"));
    let decision = sim.reconcile();
    assert_eq!(
        decision.config_change.as_ref().map(|c| c.held.clone()),
        Some(None),
        "a newer configuration is held behind an unsettled configuration change: {decision:#?}"
    );
    assert_eq!(
        sim.status().applied_config.map(|c| c.digest),
        Some(trace.digest.clone())
    );
    // ...and the admin's revert replaces that: the PO settles where it was, then moves on.
    sim.po.spec.config = None;
    let decision = sim.reconcile();
    assert_eq!(
        decision.config_change.as_ref().map(|c| c.held.clone()),
        Some(None),
        "the revert is held behind an unsettled configuration change: {decision:#?}"
    );
    assert!(sim.hop_settled(), "{:#?}", sim.status().active_hop);
    assert_eq!(
        status::recorded_config_digest(&sim.status()),
        pom_api::platform_operator::AppliedConfig::none().digest
    );
    let decision = sim.reconcile();
    assert!(
        matches!(&decision.action, Action::Move(t) if t.name == "demo.v1.1.1"),
        "the next hop after the revert settled: {decision:#?}"
    );
}

/// Item 2: `abandon:` acts on a move whose apply the cluster refuses, and the status of such a
/// move names the ways out instead of "wait for it".
#[test]
fn abandon_acts_on_a_move_the_cluster_refuses() {
    let mut sim = settled_at_1_1_0();
    sim.refuses.bundle = Some("demo.v1.1.1".to_owned());
    sim.po.spec.package.version_range = None;
    sim.cluster = patch();
    sim.reconcile();
    sim.reconcile();
    let (status, reason, upgradeable) = sim.condition(types::UPGRADEABLE);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MoveNotSettled")
    );
    for text in [
        "refuses",
        "kubectl annotate platformoperator demo platform.openshift.io/unsettled-move=abandon:demo.v1.1.1",
        "!=1.1.1",
    ] {
        assert!(upgradeable.contains(text), "{text:?} in {upgradeable}");
    }
    assert!(!upgradeable.contains("wait for it"), "{upgradeable}");
    assert!(
        sim.condition(types::DEGRADED)
            .2
            .contains("abandon:demo.v1.1.1")
    );

    sim.annotate("abandon:demo.v1.1.1");
    let decision = sim.reconcile();
    assert_eq!(decision.action, Action::Keep, "{decision:#?}");
    sim.reconcile();
    let decision = sim.reconcile();
    assert_eq!(
        decision.action,
        Action::Keep,
        "the abandoned move is retried"
    );
    assert_eq!(sim.installed().as_deref(), Some("demo.v1.1.0"));
    assert!(sim.hop_settled(), "{:#?}", sim.status().active_hop);
    assert!(
        sim.condition(types::INSTALLED).2.contains("abandoned"),
        "{:?}",
        sim.condition(types::INSTALLED)
    );
}

/// Item 2: the way back `abandon:` takes is judged as any move: it waits while the
/// ClusterVersion cannot be judged (the bundle declares a maxOpenShiftVersion) or the running
/// operator forbids it, is refused when the admin's versionRange excludes it, and says so.
#[test]
fn abandon_judges_the_way_back_like_any_move() {
    let mut sim = settled_at_1_1_0();
    sim.po.spec.package.version_range = None;
    sim.cluster = patch();
    sim.reconcile();
    assert_eq!(sim.installed().as_deref(), Some("demo.v1.1.1"));
    assert!(!sim.hop_settled());
    sim.annotate("abandon:demo.v1.1.1");

    let mut unjudgeable = sim.snapshot();
    unjudgeable.cluster = ClusterView::OpenShift(Err("status.desired.version is empty".into()));
    let decision = decide(&unjudgeable);
    assert_eq!(decision.action, Action::Keep, "{decision:#?}");
    assert!(matches!(
        decision.held.as_ref().map(|h| &h.why),
        Some(HoldReason::ClusterVersionUnknown { .. })
    ));
    let problem = decision.problem.clone().unwrap();
    assert_eq!(problem.reason, Reason::InvalidUnsettledMoveAction);
    assert!(
        problem.message.contains("cannot be taken now"),
        "{}",
        problem.message
    );

    let mut forbids = sim.snapshot();
    forbids.gate = OperatorGate {
        reported: true,
        reading: pom_policy::snapshot::GateReading::Says {
            upgradeable: false,
            message: "migrating".to_owned(),
            overridden: false,
        },
        object: None,
    };
    let decision = decide(&forbids);
    assert_eq!(decision.action, Action::Keep, "{decision:#?}");
    assert!(matches!(
        decision.held.as_ref().map(|h| &h.why),
        Some(HoldReason::OperatorNotUpgradeable { .. })
    ));

    sim.po.spec.package.version_range = Some(">=1.1.1".to_owned());
    let decision = decide(&sim.snapshot());
    assert_eq!(decision.action, Action::Keep, "{decision:#?}");
    assert!(
        decision.problem.as_ref().is_some_and(
            |p| p.message.contains("cannot be taken now") && p.message.contains("versionRange")
        ),
        "{decision:#?}"
    );

    // Nothing holds it: it moves back.
    sim.po.spec.package.version_range = None;
    let decision = decide(&sim.snapshot());
    assert!(
        matches!(&decision.action, Action::Move(t) if t.name == "demo.v1.1.0"),
        "{decision:#?}"
    );
}

/// Item 3: a first install whose apply failed (objects it wrote may run) is not "nothing
/// installed": not Upgradeable, and the ClusterOperator does not report its versions.
#[test]
fn a_failing_first_install_is_not_nothing_installed() {
    let mut sim = Sim::new(None);
    sim.refuses.bundle = Some("demo.v1.1.1".to_owned());
    sim.reconcile();
    sim.reconcile();
    assert_eq!(sim.installed(), None);
    let (status, reason, message) = sim.condition(types::UPGRADEABLE);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MoveNotSettled"),
        "{message}"
    );
    assert!(
        message.contains("may run") && message.contains("delete the PlatformOperator"),
        "{message}"
    );
    let co = aggregate::compute(
        &[Arc::new(sim.po.clone())],
        &Default::default(),
        "4.16.3",
        "openshift-platform-operators",
        ClusterPhaseView::Known {
            kind: PhaseKind::Steady,
            target: Version::parse("4.16.3").unwrap(),
        },
        &GuardState::Intact,
        &Time(sim.now()),
    );
    assert!(co.versions.is_empty(), "{:?}", co.versions);
    let upgradeable = co
        .conditions
        .iter()
        .find(|c| c.type_ == types::UPGRADEABLE)
        .unwrap();
    assert_eq!(upgradeable.status, ConditionStatus::False.as_str());
}
