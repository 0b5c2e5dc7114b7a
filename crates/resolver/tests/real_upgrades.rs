//! Upgrade questions answered on real catalogs (`/work/shared/testdata/real`, read in place).
//! Each test says, from the file content, why the answer is right.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod shared_support;

use std::path::PathBuf;

use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::model::Catalog;
use pom_resolver::fbc::parse::load_path;
use pom_resolver::pin::PinReason;
use pom_resolver::select::{
    InstalledBundle, PinPolicy, PlanEnd, RejectReason, ResolveRequest, plan_hops, resolve,
};
use pom_resolver::verdict::{Judgement, bundle_upgradeability_of};
use semver::Version;

/// A catalog under `../shared/testdata/real`; `None` (skip, said on stderr) when the shared data
/// is absent outside CI, a failure in CI (see `shared_support`).
fn load(relative: &str) -> Option<Catalog> {
    let path: PathBuf = shared_support::shared_dir("real")?.join(relative);
    Some(load_path(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display())))
}

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn request<'a>(cats: &'a [(&'a str, i32, &'a Catalog)], package: &'a str) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs: cats,
        package,
        channel: None,
        installed: None,
        version_range: None,
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::FollowCluster,
    }
}

fn installed(name: &str, version: &str) -> Option<InstalledBundle> {
    Some(InstalledBundle {
        name: name.to_owned(),
        version: v(version),
    })
}

fn phase(kind: PhaseKind, current: &str, target: &str) -> Option<ClusterPhase> {
    Some(ClusterPhase {
        kind,
        current: v(current),
        target: v(target),
    })
}

const INFINISPAN: &str =
    "redhat-openshift-ecosystem__community-operators-prod/catalogs/v4.20/infinispan";

#[test]
fn infinispan_install_takes_the_stable_head() {
    let Some(cat) = load(INFINISPAN) else { return };
    let cats = [("community", 0, &cat)];
    // defaultChannel is `stable`; its highest version is 2.5.14 (the entry replacing 2.5.13).
    let resolution = resolve(&request(&cats, "infinispan")).unwrap();
    assert_eq!(resolution.bundle.name, "infinispan-operator.v2.5.14");
    assert_eq!(resolution.bundle.channel, "stable");
    assert_eq!(resolution.pin.reason, PinReason::Install);
}

#[test]
fn infinispan_minor_update_jumps_through_the_skip_range() {
    let Some(cat) = load(INFINISPAN) else { return };
    let cats = [("community", 0, &cat)];
    let mut req = request(&cats, "infinispan");
    req.installed = installed("infinispan-operator.v2.4.18", "2.4.18");
    // Steady: pinned to =2.4.18, it stays although 2.5.0 replaces it.
    let steady = resolve(&req).unwrap();
    assert!(steady.stays);
    // Patch update of the cluster: pin >=2.4.18 <2.5.0-0; every successor is a 2.5.x: stay.
    req.cluster = phase(PhaseKind::PatchUpgrade, "4.20.1", "4.20.3");
    assert!(resolve(&req).unwrap().stays);
    // Minor update: 2.5.7..2.5.14 carry skipRange ">=2.4.18 <2.5.N", which contains 2.4.18, so
    // each is a direct successor; the highest, 2.5.14, wins in one hop (OLM v1 picks highest).
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.20.1", "4.21.0");
    let minor = resolve(&req).unwrap();
    assert_eq!(minor.bundle.name, "infinispan-operator.v2.5.14");
    assert_eq!(minor.pin.range, ">=2.4.18 <3.0.0-0");
    // 2.5.1 replaces 2.5.0, not 2.4.18, and has no skipRange: not a successor.
    let not_successor = minor
        .rejected
        .iter()
        .find(|r| r.bundle == "infinispan-operator.v2.5.1")
        .unwrap();
    assert!(matches!(
        not_successor.reason,
        RejectReason::NotSuccessor { .. }
    ));
}

#[test]
fn infinispan_replaces_chain_is_walked_one_hop_at_a_time() {
    let Some(cat) = load(INFINISPAN) else { return };
    let cats = [("community", 0, &cat)];
    let mut req = request(&cats, "infinispan");
    req.installed = installed("infinispan-operator.v2.4.5", "2.4.5");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.20.1", "4.21.0");
    // In `stable`, only 2.4.6 replaces 2.4.5 (the 2.5.x skipRanges start at 2.4.18), so the
    // walk is 2.4.6, ..., 2.4.18 (13 hops by `replaces`), then 2.5.14 through its skipRange.
    let plan = plan_hops(&req).unwrap();
    assert_eq!(plan.end, PlanEnd::Settled);
    let versions: Vec<String> = plan.hops.iter().map(|h| h.to.version.to_string()).collect();
    assert_eq!(versions.first().map(String::as_str), Some("2.4.6"));
    assert_eq!(versions.len(), 14, "{versions:?}");
    assert_eq!(versions[12], "2.4.18");
    assert_eq!(plan.final_bundle().name, "infinispan-operator.v2.5.14");
}

#[test]
fn infinispan_skips_list_and_case_sensitive_channels() {
    let Some(cat) = load(INFINISPAN) else { return };
    let cats = [("community", 0, &cat)];
    let mut req = request(&cats, "infinispan");
    // 2.3.8 lists 2.3.0 in `skips`; 2.4.0 replaces 2.3.8 only. In a minor update from 2.3.0
    // the one hop goes to 2.3.8.
    req.installed = installed("infinispan-operator.v2.3.0", "2.3.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.20.1", "4.21.0");
    assert_eq!(
        resolve(&req).unwrap().bundle.name,
        "infinispan-operator.v2.3.8"
    );
    // Channel `2.2.x` exists; `2.2.X` does not (names are case-sensitive).
    req.channel = Some("2.2.X");
    let err = resolve(&req).unwrap_err().to_string();
    assert!(
        err.contains("2.2.x") && err.contains("case-sensitive"),
        "{err}"
    );
}

const GATEKEEPER: &str = "stolostron__gatekeeper-operator-fbc/catalog-4-20";

#[test]
fn gatekeeper_releases_in_build_metadata_order_a_patch_update() {
    let Some(cat) = load(GATEKEEPER) else { return };
    let cats = [("acm", 0, &cat)];
    let mut req = request(&cats, "gatekeeper-operator-product");
    req.installed = installed("gatekeeper-operator-product.v3.15.1", "3.15.1");
    // Patch update: pin >=3.15.1 <3.16.0-0. In `stable`, three 3.15.1 releases exist; the entry
    // `...v3.15.1-0.1727189912.p` skips v3.15.1 and has the highest release (0.1727189912.p,
    // build metadata of its olm.package version 3.15.1+0.1727189912.p). The 3.17+ entries have
    // skipRanges containing 3.15.1 but are outside the pin.
    req.cluster = phase(PhaseKind::PatchUpgrade, "4.20.1", "4.20.2");
    let patch = resolve(&req).unwrap();
    assert_eq!(patch.bundle.version, v("3.15.1+0.1727189912.p"));
    assert_eq!(
        patch.bundle.name,
        "gatekeeper-operator-product.v3.15.1-0.1727189912.p"
    );
    // Minor update: every 3.17.0..3.21.0 entry has skipRange "<3.N.0" containing 3.15.1, so the
    // highest, 3.21.0, is a direct successor and wins.
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.20.1", "4.21.0");
    assert_eq!(resolve(&req).unwrap().bundle.version, v("3.21.0"));
    // Install: the default channel `stable` has 3.21.0 as its highest version.
    req.installed = None;
    assert_eq!(resolve(&req).unwrap().bundle.version, v("3.21.0"));
}

const RABBITMQ: &str = "redhat-openshift-ecosystem__community-operators-prod/catalogs/v4.20/rabbitmq-cluster-operator/catalog.yaml";

#[test]
fn rabbitmq_patch_and_minor_updates() {
    let Some(cat) = load(RABBITMQ) else { return };
    let cats = [("community", 0, &cat)];
    let mut req = request(&cats, "rabbitmq-cluster-operator");
    req.installed = installed("rabbitmq-cluster-operator.v2.20.0", "2.20.0");
    // `stable` is a pure `replaces` chain: ... 2.20.0 <- 2.20.1 <- 2.21.1 <- 2.22.1 <- 2.22.2 <- 2.22.3.
    // Patch update: only 2.20.1 replaces 2.20.0 and it is inside >=2.20.0 <2.21.0-0; after it,
    // 2.21.1 is outside the pin, so the plan is one hop.
    req.cluster = phase(PhaseKind::PatchUpgrade, "4.20.1", "4.20.2");
    let plan = plan_hops(&req).unwrap();
    let versions: Vec<String> = plan.hops.iter().map(|h| h.to.version.to_string()).collect();
    assert_eq!(versions, ["2.20.1"]);
    // Minor update: the same chain, hop by hop, to the head.
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.20.1", "4.21.0");
    let plan = plan_hops(&req).unwrap();
    let versions: Vec<String> = plan.hops.iter().map(|h| h.to.version.to_string()).collect();
    assert_eq!(versions, ["2.20.1", "2.21.1", "2.22.1", "2.22.2", "2.22.3"]);
}

const ODF: &str = "red-hat-storage__odf-operator/catalog";

#[test]
fn odf_dependencies_is_refused_for_its_dependencies() {
    let Some(cat) = load(ODF) else { return };
    let cats = [("odf", 0, &cat)];
    // odf-dependencies.v4.22.0 declares olm.package.required on cephcsi-operator and others;
    // POM does not resolve dependencies, so the only bundle of channel `alpha` is refused.
    let err = resolve(&request(&cats, "odf-dependencies")).unwrap_err();
    let rejected = err.rejections();
    assert_eq!(rejected.len(), 1, "{err}");
    assert!(matches!(
        rejected[0].reason,
        RejectReason::HasDependencies { .. }
    ));
    assert!(
        err.to_string()
            .contains("olm.package.required cephcsi-operator"),
        "{err}"
    );
}

#[test]
fn odf_max_openshift_version_4_23_means_5_0() {
    let Some(cat) = load(ODF) else { return };
    // Its olm.maxOpenShiftVersion is "4.23", which OLM normalises to 5.0: on 4.22 the next minor
    // (5.0) is supported; on 4.23 (= 5.0) the next one (5.1) is not.
    let package = &cat.packages["odf-dependencies"];
    let bundle = &package.bundles["odf-dependencies.v4.22.0"];
    let on_4_22 = bundle_upgradeability_of(bundle, &v("4.22.3"), Some(package), None);
    assert_eq!(on_4_22.judgement, Judgement::Compatible, "{on_4_22:?}");
    let on_5_0 = bundle_upgradeability_of(bundle, &v("5.0.0"), Some(package), None);
    assert_eq!(on_5_0.judgement, Judgement::Incompatible, "{on_5_0:?}");
    assert!(
        on_5_0.message.contains("cannot be updated to 5.1"),
        "{}",
        on_5_0.message
    );
}
