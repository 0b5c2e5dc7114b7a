//! Liveness under admin actions: every state a PO can be stuck in has a way out that its
//! status names, and taking it gets the PO out. The ways out the model knows, how a status
//! names each (read from its conditions' messages, as an admin reads them), and the world event
//! that performs it: one table, [`WayOut`] → [`WayOut::events`].

use pom_api::platform_operator::PlatformOperatorStatus;

use super::world::{
    Annotation, CATALOGS, CONFIG_CHANGE_OVERRIDE, Event, PACKAGES, UNSETTLED_MOVE, VERSIONS, World,
    bundle_name,
};

/// An action the admin can take, as a status names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WayOut {
    /// `pomctl approve <po> --bundle <bundle>` (or the `spec.approvedBundle` patch).
    Approve(usize),
    /// The `spec.paused: false` patch.
    Resume,
    /// `kubectl annotate ... unsettled-move=abandon:<bundle>`.
    Abandon(usize),
    /// "add `!=<version>` to" `spec.package.versionRange`.
    ExcludeVersion(usize),
    /// "exclude it with `!=<version>` in spec.package.versionRange and delete the
    /// PlatformOperator": both, one after the other, as the one remedy they are.
    ExcludeAndDelete(usize),
    /// "re-admit <bundle> in spec.package.versionRange": its `!=<version>` removed.
    Readmit(usize),
    /// "change spec.config ... back": to the configuration the status records applied.
    RevertConfig,
    /// "remove the annotation" (`unsettled-move`).
    RemoveAnnotation,
    /// A resolution that fails on the pin of the admin's `steadyStateVersionRange` ("no
    /// bundle ... satisfies pin ... (Override)" or "(Install)" under it, each rejected bundle
    /// listed with its filter): the admin clears it.
    ClearOverride,
    /// `kubectl annotate ... config-change-override=<digest>`.
    ConfigOverride(String),
    /// `spec.overrides` `Upgradeable=True` on the running bundle's OperatorCondition (§7).
    GateOverride,
    /// `kubectl annotate ... crd-safety-override=<bundle>`.
    CrdSafetyOverride(usize),
    /// "add the catalog that offers it" (the bundle that runs) or "add <bundle> back to a
    /// catalog": that bundle served again.
    AddToCatalog(Option<usize>),
    /// "fix what refuses it": the admin lifts the policy that refuses the PO's objects.
    FixRefusal,
    /// "delete the PlatformOperator" (and create it again).
    Delete,
    /// "delete this PlatformOperator or <older>": the older one goes.
    DeleteOlder,
}

impl WayOut {
    /// Approvals and resuming are what the admin is asked for in the ordinary course (each
    /// Manual hop, a pause): taken as soon as they are named. The others are taken only once
    /// the PO is stuck.
    pub fn routine(&self) -> bool {
        matches!(self, WayOut::Approve(_) | WayOut::Resume)
    }

    /// The world events that perform it for PO `i`.
    pub fn events(&self, world: &World, i: usize) -> Vec<Event> {
        match self {
            WayOut::Approve(b) => vec![Event::ApproveBundle(i, *b)],
            WayOut::Resume => vec![Event::Pause(i, false)],
            WayOut::Abandon(b) => vec![Event::Annotate(
                i,
                Annotation::Named(
                    UNSETTLED_MOVE,
                    format!("abandon:{}", bundle_name(PACKAGES[i], *b)),
                ),
            )],
            WayOut::ExcludeVersion(b) => vec![Event::ExcludeVersion(i, *b)],
            WayOut::ExcludeAndDelete(b) => {
                vec![Event::ExcludeVersion(i, *b), Event::DeleteAndRecreate(i)]
            }
            WayOut::Readmit(b) => vec![Event::ReadmitVersion(i, *b)],
            WayOut::RevertConfig => vec![Event::RevertConfig(i)],
            WayOut::RemoveAnnotation => vec![Event::Annotate(i, Annotation::Clear)],
            WayOut::ClearOverride => vec![Event::EditOverride(i, 0)],
            WayOut::ConfigOverride(digest) => vec![Event::Annotate(
                i,
                Annotation::Named(CONFIG_CHANGE_OVERRIDE, digest.clone()),
            )],
            WayOut::GateOverride => vec![Event::OverrideGate(i)],
            WayOut::CrdSafetyOverride(b) => vec![Event::Annotate(i, Annotation::CrdSafety(*b))],
            WayOut::AddToCatalog(named_bundle) => {
                let named = world.pos[i].po.spec.package.catalog.as_deref();
                let c = (0..CATALOGS.len())
                    .find(|c| named.is_none_or(|n| n == CATALOGS[*c]))
                    .unwrap_or(0);
                named_bundle
                    .or(world.pos[i].running)
                    .map(|r| vec![Event::AddBundle(c, r)])
                    .unwrap_or_default()
            }
            WayOut::FixRefusal => vec![Event::LiftRefusals(i)],
            WayOut::Delete => vec![Event::DeleteAndRecreate(i)],
            WayOut::DeleteOlder => vec![Event::OlderDuplicate(i, false)],
        }
    }
}

/// The ways out the status of PO `i` names, most specific first (the admin takes the first).
pub fn named(i: usize, status: &PlatformOperatorStatus, overridden: bool) -> Vec<WayOut> {
    let text: String = status
        .conditions
        .iter()
        .map(|c| format!("{}: {}\n", c.reason, c.message))
        .collect();
    let bundle = |prefix: &str| -> Option<usize> {
        let at = text.find(prefix)? + prefix.len();
        let name: String = text[at..]
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '`' && *c != ')' && *c != ',')
            .collect();
        (0..VERSIONS.len()).find(|b| bundle_name(PACKAGES[i], *b) == name)
    };
    let mut ways = Vec::new();
    if let Some(b) = bundle(&format!("pomctl approve {} --bundle ", PACKAGES[i])) {
        ways.push(WayOut::Approve(b));
    }
    if text.contains("\"paused\":false") {
        ways.push(WayOut::Resume);
    }
    if let Some(b) = bundle(&format!("{UNSETTLED_MOVE}=abandon:")) {
        ways.push(WayOut::Abandon(b));
    }
    // `abandon:` refused because the way back left every catalog: that bundle served again,
    // the refusal's own remedy (found by the random soak, seed 271828:
    // `a_broken_hop_whose_way_back_left_the_catalog_is_abandoned_once_it_is_back`).
    if text.contains("add a catalog that offers it")
        && let Some(b) = bundle("the bundle that ran before it (")
    {
        ways.push(WayOut::AddToCatalog(Some(b)));
    }
    if let Some(b) = bundle("re-admit ") {
        ways.push(WayOut::Readmit(b));
    }
    // `abandon:` held by the operator's gate (an operator that never ran cannot report): the
    // override the refusal names is its own remedy, before the generic ways of Degraded.
    if text.contains("cannot be taken now: it waits") && text.contains("(spec.overrides)") {
        ways.push(WayOut::GateOverride);
    }
    // A configuration the admin wrote is undone before the bundle is given up: a first install
    // or hop that never becomes Available names both, and excluding the bundle for its
    // configuration's fault would cost the one exclusion the admin takes (found by the
    // state-machine test once bundles could never become Available).
    if text.contains("change spec.config") {
        ways.push(WayOut::RevertConfig);
    }
    if let Some(at) = text.find("`!=") {
        let version: String = text[at + 3..].chars().take_while(|c| *c != '`').collect();
        // "exclude it with `!=X` in spec.package.versionRange and delete the PlatformOperator"
        // is one remedy, taken as one (found by soak seed 5150517: the exclusion alone left a
        // pin nothing satisfies, whose own remedy the admin took before the deletion).
        let and_delete = text[at + 3 + version.len()..]
            .starts_with("` in spec.package.versionRange and delete the PlatformOperator");
        if let Some(b) = VERSIONS.iter().position(|v| *v == version) {
            ways.push(if and_delete {
                WayOut::ExcludeAndDelete(b)
            } else {
                WayOut::ExcludeVersion(b)
            });
        }
    }
    if text.contains("exclude it with spec.package.versionRange")
        && let Some(b) = bundle("the move to ")
    {
        ways.push(WayOut::ExcludeVersion(b));
    }
    if let Some(at) = text.find(&format!("{CONFIG_CHANGE_OVERRIDE}=")) {
        let digest: String = text[at + CONFIG_CHANGE_OVERRIDE.len() + 1..]
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '`')
            .collect();
        ways.push(WayOut::ConfigOverride(digest));
    }
    if text.contains("(spec.overrides)") {
        ways.push(WayOut::GateOverride);
    }
    if let Some(b) = bundle("crd-safety-override=") {
        ways.push(WayOut::CrdSafetyOverride(b));
    }
    if text.contains("add the catalog that offers it") {
        ways.push(WayOut::AddToCatalog(None));
    }
    if let Some(b) = bundle("the first install of ").filter(|_| text.contains("back to a catalog"))
    {
        ways.push(WayOut::AddToCatalog(Some(b)));
    }
    if overridden && text.contains("satisfies pin") {
        ways.push(WayOut::ClearOverride);
    }
    if text.contains("remove the annotation") {
        ways.push(WayOut::RemoveAnnotation);
    }
    // The refusal itself names what refuses it (the API server's message: an admission
    // webhook that denied an object): the admin's way out is that policy.
    if text.contains("fix what refuses it") || text.contains(" denied ") {
        ways.push(WayOut::FixRefusal);
    }
    if text.contains(&format!(
        "delete this PlatformOperator or {}",
        super::world::older_name(i)
    )) {
        ways.push(WayOut::DeleteOlder);
    }
    if text.contains("delete the PlatformOperator") {
        ways.push(WayOut::Delete);
    }
    ways
}

/// Whether the world refuses, for good, an apply PO `i` needs: a bundle (whole or its
/// Deployment), a configuration, or an unsafe CRD change of what runs or of the recorded move.
pub fn refused_for_good(world: &World, i: usize) -> bool {
    let sim = &world.pos[i];
    let hop_to = world
        .status(i)
        .and_then(|s| s.active_hop.as_ref())
        .filter(|h| !h.settled)
        .and_then(|h| (0..VERSIONS.len()).find(|b| bundle_name(PACKAGES[i], *b) == h.to));
    let needed = |b: usize| sim.running == Some(b) || hop_to == Some(b);
    // An unsafe CRD change refuses only a move to the bundle from another one (the
    // re-apply of what runs, a first install included, changes no CRD of its own).
    let moved_to = |b: usize| hop_to == Some(b) && sim.running != Some(b);
    world
        .refused
        .iter()
        .chain(&world.refused_partly)
        .any(|(p, b)| *p == i && needed(*b))
        || world
            .unsafe_crds
            .iter()
            .any(|(p, b)| *p == i && moved_to(*b))
        // A configuration is refused for what it applies only once it was applied: one the
        // operator's gate holds is not tried, so nothing refused it yet (found by the
        // property: `a_held_configuration_the_cluster_would_refuse_is_not_a_refusal`).
        || world.refused_configs.iter().any(|(p, c)| {
            let desired = world.desired_config(i);
            *p == i
                && super::world::level_of(&desired) == Some(*c)
                && sim.config_intent.as_deref() == Some(desired.digest.as_str())
        })
}
