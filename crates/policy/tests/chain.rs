//! Plans across chained updates (issue 35 item 2): each step's pre-update hops, whether the PO
//! blocks the step, and its hops during the update, over a three-minor chain.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::LazyLock;

use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::platform_operator::{
    InstalledBundle, PackageSpec, PlatformOperatorSpec, PreUpdateHops,
};
use pom_policy::chain::{chain, minor_steps};
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, ConfigView, GuardState, Installed, OperatorGate,
    PoSnapshot,
};
use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::{Catalog, parse_documents};
use semver::Version;

/// `demo` 1.0.0 (max 4.16) → 1.1.0 (max 4.17) → 1.2.0 (max 4.17): enough for 4.17, nothing
/// for 4.18.
const FBC: &str = r#"
{"schema":"olm.package","name":"demo","defaultChannel":"stable"}
{"schema":"olm.channel","package":"demo","name":"stable","entries":[
  {"name":"demo.v1.0.0"},
  {"name":"demo.v1.1.0","replaces":"demo.v1.0.0"},
  {"name":"demo.v1.2.0","replaces":"demo.v1.1.0"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.0.0","image":"quay.example/demo-bundle:v1.0.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.0.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.1.0","image":"quay.example/demo-bundle:v1.1.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.1.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"demo","name":"demo.v1.2.0","image":"quay.example/demo-bundle:v1.2.0","properties":[
  {"type":"olm.package","value":{"packageName":"demo","version":"1.2.0"}},
  {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
"#;

static DEMO: LazyLock<Catalog> =
    LazyLock::new(|| parse_documents([("demo.json".to_owned(), FBC.as_bytes().to_vec())]).unwrap());

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn snapshot(installed: &str, policy: PreUpdateHops) -> PoSnapshot<'static> {
    let mut po = PlatformOperator::new(
        "demo",
        PlatformOperatorSpec {
            package: PackageSpec {
                name: "demo".to_owned(),
                ..PackageSpec::default()
            },
            pre_update_hops: policy,
            ..serde_json::from_value(serde_json::json!({"package": {"name": "demo"}})).unwrap()
        },
    );
    po.metadata.generation = Some(1);
    let max = DEMO.packages["demo"].bundles[&format!("demo.v{installed}")]
        .properties
        .max_openshift_version
        .as_ref()
        .map(ToString::to_string);
    PoSnapshot {
        name: "demo".to_owned(),
        request: pom_policy::PoRequest::from_spec("demo", &po.spec),
        duplicate_of: None,
        namespace_clash: None,
        requested_update: None,
        installed: Some(Installed::from_status(
            &InstalledBundle {
                name: format!("demo.v{installed}"),
                version: installed.to_owned(),
                image: None,
                objects_digest: None,
            },
            max.as_deref(),
        )),
        hop: None,
        cluster: ClusterView::OpenShift(Ok(ClusterPhase::steady(v("4.16.3")))),
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
        now: Timestamp::from_second(1_717_243_200).unwrap(),
        found_bundle_label: None,
        unsettled_move: None,
        guard: GuardState::Intact,
        paused: false,
        config: ConfigView::of(&po, None),
    }
}

fn hops(plan: &pom_policy::plan::PoPlan) -> Vec<(String, bool)> {
    plan.hops
        .iter()
        .map(|h| (h.to.version.clone(), h.needs_approval))
        .collect()
}

#[test]
fn the_minors_between_are_each_a_step() {
    assert_eq!(
        minor_steps(&v("4.16.3"), &v("4.19.0")),
        vec![v("4.17.0"), v("4.18.0"), v("4.19.0")]
    );
    assert_eq!(minor_steps(&v("4.16.3"), &v("4.16.9")), vec![v("4.16.9")]);
    assert_eq!(minor_steps(&v("4.18.2"), &v("5.0.0")), vec![v("5.0.0")]);
}

#[test]
fn a_three_minor_chain_stops_at_the_first_step_without_a_path() {
    let steps = minor_steps(&v("4.16.3"), &v("4.19.0"));
    for (policy, needs_approval) in [(PreUpdateHops::Offer, true), (PreUpdateHops::Take, false)] {
        let planned = chain(&snapshot("1.0.0", policy), &v("4.16.3"), &steps);
        assert_eq!(planned.steps.len(), 2, "{policy:?}: {planned:#?}");
        // 4.16 → 4.17: one pre-update hop to 1.1.0 (offered: needs approval; taken: not),
        // then the update's pin takes it to 1.2.0.
        let first = &planned.steps[0];
        assert_eq!(
            (first.from.clone(), first.to.clone()),
            (v("4.16.3"), v("4.17.0"))
        );
        assert_eq!(
            hops(first.before.as_ref().expect("steady: a before stage")),
            vec![("1.1.0".to_owned(), needs_approval)]
        );
        assert_eq!(first.blocks, None);
        let during = first.during.as_ref().expect("the update runs");
        assert_eq!(hops(during), vec![("1.2.0".to_owned(), false)]);
        // 4.17 → 4.18: nothing runs on 4.18, so the PO blocks; the chain stops.
        let second = &planned.steps[1];
        assert_eq!(
            (second.from.clone(), second.to.clone()),
            (v("4.17.0"), v("4.18.0"))
        );
        assert!(second.before_hops().is_empty());
        assert!(second.during.is_none());
        let why = second.blocks.as_deref().expect("blocks 4.18");
        assert!(
            why.contains("4.18") && why.contains("no catalog path"),
            "{policy:?}: {why}"
        );
        assert_eq!(
            planned.first_blocked().map(|s| s.to.clone()),
            Some(v("4.18.0"))
        );
    }
}

#[test]
fn a_po_that_runs_everywhere_takes_no_pre_update_hop() {
    let steps = minor_steps(&v("4.16.3"), &v("4.17.0"));
    let planned = chain(
        &snapshot("1.1.0", PreUpdateHops::Offer),
        &v("4.16.3"),
        &steps,
    );
    assert_eq!(planned.steps.len(), 1);
    assert!(planned.steps[0].before_hops().is_empty());
    assert_eq!(planned.steps[0].blocks, None);
    assert_eq!(
        hops(planned.steps[0].during.as_ref().unwrap()),
        vec![("1.2.0".to_owned(), false)]
    );
    assert!(planned.first_blocked().is_none());
}

/// The snapshot of `snapshot(installed)` with its move from `from` in flight (applied, not
/// settled), in `cluster`.
fn mid_hop(installed: &str, from: &str, cluster: ClusterPhase) -> PoSnapshot<'static> {
    let mut s = snapshot(installed, PreUpdateHops::Take);
    s.hop = Some(pom_policy::snapshot::Hop {
        from: Some(format!("demo.v{from}")),
        to: format!("demo.v{installed}"),
        started_at: s.now,
        settled: false,
        settled_at: None,
        started_seen_for: std::time::Duration::ZERO,
        settled_seen_for: std::time::Duration::ZERO,
        failed_attempts: 0,
        applied_unsettled: false,
        replaced: None,
    });
    s.cluster = ClusterView::OpenShift(Ok(cluster));
    s
}

fn in_flight(hops: &[pom_policy::plan::PlannedHop]) -> Vec<(String, bool)> {
    hops.iter()
        .map(|h| (h.to.version.clone(), h.in_flight))
        .collect()
}

/// Review M3: a PO mid-hop keeps that hop at the chain's first step, whether the cluster is
/// steady (the hop before the update) or already updating (the hop during it).
#[test]
fn a_move_in_flight_is_the_first_hop_of_the_first_step() {
    let steps = minor_steps(&v("4.16.3"), &v("4.18.0"));
    let steady = chain(
        &mid_hop("1.1.0", "1.0.0", ClusterPhase::steady(v("4.16.3"))),
        &v("4.16.3"),
        &steps,
    );
    let first = &steady.steps[0];
    assert_eq!(
        in_flight(first.before_hops()),
        vec![("1.1.0".to_owned(), true)],
        "{steady:#?}"
    );
    assert_eq!(first.blocks, None);
    assert_eq!(
        in_flight(&first.during.as_ref().unwrap().hops),
        vec![("1.2.0".to_owned(), false)]
    );

    // The CVO already runs 4.16.3 → 4.17.0: that update is the first step, with nothing
    // before it, and the move in flight is its first hop.
    let updating = ClusterPhase {
        kind: pom_resolver::cluster::PhaseKind::MinorUpgrade,
        current: v("4.16.3"),
        target: v("4.17.0"),
    };
    let planned = chain(&mid_hop("1.1.0", "1.0.0", updating), &v("4.16.3"), &steps);
    let first = &planned.steps[0];
    assert!(first.before.is_none(), "{planned:#?}");
    assert_eq!(first.blocks, None);
    assert_eq!(
        in_flight(&first.during.as_ref().unwrap().hops),
        vec![("1.1.0".to_owned(), true), ("1.2.0".to_owned(), false)]
    );
    assert_eq!(
        planned.first_blocked().map(|s| s.to.clone()),
        Some(v("4.18.0")),
        "nothing runs on 4.18"
    );

    // A settled move is not in flight: nothing is added.
    let mut settled = mid_hop("1.1.0", "1.0.0", ClusterPhase::steady(v("4.16.3")));
    if let Some(hop) = settled.hop.as_mut() {
        hop.settled = true;
    }
    let planned = chain(&settled, &v("4.16.3"), &steps);
    assert!(planned.steps[0].before_hops().is_empty(), "{planned:#?}");
}
