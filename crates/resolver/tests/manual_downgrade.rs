//! Manual downgrades through `spec.steadyStateVersionRange` (§3, §4.2, §5).
//!
//! The override is how an admin moves a PO by hand, downward included. Catalog edges only point
//! forward, so a lower bundle is never a successor: under the override, and only for bundles
//! below the installed version, the selector skips the successor filter. Everything else still
//! applies, an override that still contains the running version does not move the PO, and no
//! other pin ever goes down.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod select_support;

use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::model::Catalog;
use pom_resolver::pin::PinReason;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, InstalledBundle, PinPolicy, PlanEnd, RejectReason, ResolveRequest, plan_hops,
    resolve,
};
use select_support::*;

const PKG: &str = "p";

fn request<'a>(catalogs: &'a [CatalogInput<'a>], installed_version: &str) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs,
        package: PKG,
        channel: None,
        installed: Some(InstalledBundle {
            name: name(PKG, installed_version),
            version: v(installed_version),
        }),
        version_range: None,
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::FollowCluster,
    }
}

fn range(text: &str) -> Option<VersionRange> {
    Some(VersionRange::parse(text).unwrap())
}

fn phase(kind: PhaseKind, current: &str, target: &str) -> Option<ClusterPhase> {
    Some(ClusterPhase {
        kind,
        current: v(current),
        target: v(target),
    })
}

/// The version chosen, or `"none: <codes of the rejections>"` when nothing was.
fn outcome(req: &ResolveRequest<'_>) -> String {
    match resolve(req) {
        Ok(resolution) => resolution.bundle.version.to_string(),
        Err(err) => format!(
            "none: {}",
            err.rejections()
                .iter()
                .map(|r| format!("{}={}", r.version, r.reason.code()))
                .collect::<Vec<_>>()
                .join(",")
        ),
    }
}

fn reason_for(req: &ResolveRequest<'_>, version: &str) -> Option<RejectReason> {
    let rejected = match resolve(req) {
        Ok(resolution) => resolution.rejected,
        Err(err) => err.rejections().to_vec(),
    };
    rejected
        .into_iter()
        .find(|r| r.version == v(version))
        .map(|r| r.reason)
}

/// A plain `replaces` chain 1.0.0 → 1.1.0 → 1.2.0 → 1.3.0.
fn chain() -> Catalog {
    PackageBuilder::new(PKG)
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0", "1.3.0"])
        .catalog()
}

fn one(catalog: &Catalog) -> [CatalogInput<'_>; 1] {
    [("main", 0, catalog)]
}

#[test]
fn override_to_an_exact_lower_version_downgrades() {
    let cat = chain();
    let cats = one(&cat);
    let mut req = request(&cats, "1.3.0");
    req.steady_state_range = range("=1.2.0");

    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.2.0"));
    assert_eq!(
        (resolution.pin.reason, resolution.pin.range.as_str()),
        (PinReason::Override, "=1.2.0")
    );
    assert!(!resolution.stays);
    // The other lower bundles are refused by the override itself, not as non-successors.
    for version in ["1.0.0", "1.1.0", "1.3.0"] {
        assert!(
            matches!(
                reason_for(&req, version),
                Some(RejectReason::OutsidePin {
                    reason: PinReason::Override,
                    ..
                })
            ),
            "{version}: {:?}",
            reason_for(&req, version)
        );
    }

    // One move, then the override admits what runs: settled.
    let plan = plan_hops(&req).unwrap();
    let hops: Vec<String> = plan.hops.iter().map(|h| h.to.version.to_string()).collect();
    assert_eq!(hops, ["1.2.0"]);
    assert_eq!(plan.end, PlanEnd::Settled);

    // Two hops back: no edge needed either.
    req.steady_state_range = range("=1.0.0");
    assert_eq!(outcome(&req), "1.0.0");

    // The installed bundle may have left the catalog (OLM v1 allows it): still a downgrade.
    let gone = PackageBuilder::new(PKG)
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    let cats = one(&gone);
    let mut req = request(&cats, "1.3.0");
    req.steady_state_range = range("=1.2.0");
    assert_eq!(outcome(&req), "1.2.0");
}

#[test]
fn override_range_below_installed_picks_the_highest_admitted_lower_bundle() {
    let cat = chain();
    let cats = one(&cat);
    // (installed, steadyStateVersionRange, expected)
    let table = [
        ("1.3.0", ">=1.1.0 <1.3.0", "1.2.0"),
        ("1.3.0", "<1.2.0", "1.1.0"),
        ("1.3.0", "~1.1", "1.1.0"),
        ("1.3.0", "1.0.0 - 1.1.5", "1.1.0"),
        ("1.3.0", "<1.3.0 !=1.2.0", "1.1.0"),
        ("1.3.0", "=1.0.0 || =1.2.0", "1.2.0"),
        ("1.2.0", "<1.2.0", "1.1.0"),
    ];
    for (installed, override_range, expected) in table {
        let mut req = request(&cats, installed);
        req.steady_state_range = range(override_range);
        assert_eq!(
            outcome(&req),
            expected,
            "installed {installed}, steadyStateVersionRange {override_range:?}"
        );
    }

    // Across a major, by hand (§3).
    let major = PackageBuilder::new(PKG)
        .chain("stable", &["1.1.0", "1.2.0", "2.0.0", "2.1.0"])
        .catalog();
    let cats = one(&major);
    let mut req = request(&cats, "2.1.0");
    req.steady_state_range = range("^1");
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.2.0"));
    assert_eq!(resolution.pin.reason, PinReason::Override);
}

#[test]
fn an_override_that_contains_the_installed_version_stays() {
    let cat = chain();
    let cats = one(&cat);
    // (steadyStateVersionRange, expected): the range decides, not the mere presence of lower
    // bundles in it. The first two rows are the contrast: there the installed version is out.
    let table = [
        ("<1.3.0", "1.2.0"),
        (">=1.0.0 <1.3.0", "1.2.0"),
        ("<=1.3.0", "1.3.0"),
        (">=1.0.0", "1.3.0"),
        ("*", "1.3.0"),
        ("=1.2.0 || =1.3.0", "1.3.0"),
        ("~1.2 || ~1.3", "1.3.0"),
    ];
    for (override_range, expected) in table {
        let mut req = request(&cats, "1.3.0");
        req.steady_state_range = range(override_range);
        assert_eq!(outcome(&req), expected, "{override_range:?}");
        if expected == "1.3.0" {
            assert!(resolve(&req).unwrap().stays, "{override_range:?}");
            // Lower bundles keep today's reason: no downgrade was asked for.
            assert!(
                matches!(
                    reason_for(&req, "1.2.0"),
                    Some(RejectReason::NotSuccessor { .. })
                ),
                "{override_range:?}: {:?}",
                reason_for(&req, "1.2.0")
            );
        }
    }

    // Even a deprecated installed bundle stays while the override admits it: the admin asked
    // for nothing, and deprecation alone never moves a PO down.
    let deprecated = PackageBuilder::new(PKG)
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0", "1.3.0"])
        .deprecate_bundle("1.3.0", "1.3.0 corrupts data")
        .catalog();
    let cats = one(&deprecated);
    let mut req = request(&cats, "1.3.0");
    req.steady_state_range = range(">=1.0.0");
    let resolution = resolve(&req).unwrap();
    assert!(resolution.stays);
    assert!(resolution.bundle.deprecation.is_some());
    // Excluding it is the way down.
    req.steady_state_range = range("<1.3.0");
    assert_eq!(outcome(&req), "1.2.0");
}

#[test]
fn no_downgrade_without_the_override() {
    let cat = chain();
    let cats = one(&cat);
    let steady = phase(PhaseKind::Steady, "4.16.3", "4.16.3");
    let patch = phase(PhaseKind::PatchUpgrade, "4.16.3", "4.16.5");
    let minor = phase(PhaseKind::MinorUpgrade, "4.16.3", "4.17.0");
    let rollback = phase(PhaseKind::Rollback, "4.16.5", "4.16.3");
    // (label, cluster, pin policy, steadyStateVersionRange, versionRange, expected, pin reason)
    let table = [
        // The contrast: the override, cluster steady, moves down.
        (
            "override",
            steady.clone(),
            PinPolicy::FollowCluster,
            Some("=1.2.0"),
            None,
            "1.3.0→1.2.0",
            PinReason::Override,
        ),
        (
            "steady =X.Y.Z",
            steady.clone(),
            PinPolicy::FollowCluster,
            None,
            None,
            "1.3.0",
            PinReason::Steady,
        ),
        (
            "plain Kubernetes =X.Y.Z",
            None,
            PinPolicy::FollowCluster,
            None,
            None,
            "1.3.0",
            PinReason::Steady,
        ),
        (
            "a versionRange below is no downgrade request",
            steady.clone(),
            PinPolicy::FollowCluster,
            None,
            Some("<1.3.0"),
            "none",
            PinReason::Steady,
        ),
        (
            "patch update: the override excludes what runs, which stays",
            patch.clone(),
            PinPolicy::FollowCluster,
            Some("=1.2.0"),
            None,
            "1.3.0",
            PinReason::PatchUpgrade,
        ),
        (
            "minor update: the override excludes what runs, which stays",
            minor.clone(),
            PinPolicy::FollowCluster,
            Some("=1.2.0"),
            None,
            "1.3.0",
            PinReason::MinorUpgrade,
        ),
        (
            "rollback hold ignores the override",
            rollback.clone(),
            PinPolicy::FollowCluster,
            Some("=1.2.0"),
            None,
            "1.3.0",
            PinReason::Rollback,
        ),
        (
            "unpinned ignores the override",
            None,
            PinPolicy::Unpinned,
            Some("=1.2.0"),
            None,
            "1.3.0",
            PinReason::Unpinned,
        ),
    ];
    for (label, cluster, pin_policy, override_range, version_range, expected, reason) in table {
        let mut req = request(&cats, "1.3.0");
        req.cluster = cluster;
        req.pin_policy = pin_policy;
        req.steady_state_range = override_range.and_then(range);
        req.version_range = version_range.and_then(range);
        let got = match resolve(&req) {
            Ok(resolution) => {
                assert_eq!(resolution.pin.reason, reason, "{label}");
                if resolution.stays {
                    resolution.bundle.version.to_string()
                } else {
                    format!("1.3.0→{}", resolution.bundle.version)
                }
            }
            Err(_) => "none".to_owned(),
        };
        assert_eq!(got, expected, "{label}");
        if reason != PinReason::Override {
            // Outside the override a lower bundle is refused exactly as before.
            assert!(
                matches!(
                    reason_for(&req, "1.2.0"),
                    Some(RejectReason::NotSuccessor { installed_version }) if installed_version == v("1.3.0")
                ),
                "{label}: {:?}",
                reason_for(&req, "1.2.0")
            );
        }
    }
}

#[test]
fn a_downgrade_still_passes_every_other_filter() {
    // Steady on 4.17: 1.2.0 stops at 4.16, 1.1.0 runs on 4.17, 1.0.0 declares a dependency,
    // 0.9.0 needs a newer Kubernetes.
    let cat = PackageBuilder::new(PKG)
        .bundle("0.9.0", min_kube("1.40.0"))
        .bundle("1.0.0", requires_package("etcd", ">=1.0.0"))
        .bundle("1.1.0", max_ocp(4, 17))
        .bundle("1.2.0", max_ocp(4, 16))
        .bundle("1.3.0", max_ocp(4, 18))
        .chain("stable", &["0.9.0", "1.0.0", "1.1.0", "1.2.0", "1.3.0"])
        .catalog();
    let cats = one(&cat);
    let steady = phase(PhaseKind::Steady, "4.17.2", "4.17.2");
    // (steadyStateVersionRange, versionRange, expected)
    let table = [
        (
            "=1.2.0",
            None,
            "none: 0.9.0=OutsidePin,1.0.0=OutsidePin,1.1.0=OutsidePin,\
             1.2.0=MaxOpenShiftVersionTooLow,1.3.0=OutsidePin",
        ),
        ("<1.3.0", None, "1.1.0"),
        (
            "<1.3.0",
            Some(">=1.2.0"),
            "none: 0.9.0=OutsideVersionRange,1.0.0=OutsideVersionRange,1.1.0=OutsideVersionRange,1.2.0=MaxOpenShiftVersionTooLow,1.3.0=OutsidePin",
        ),
        (
            "=1.1.0",
            Some("!=1.1.0"),
            "none: 0.9.0=OutsidePin,1.0.0=OutsidePin,1.1.0=OutsideVersionRange,1.2.0=OutsidePin,1.3.0=OutsidePin",
        ),
        (
            "=1.0.0",
            None,
            "none: 0.9.0=OutsidePin,1.0.0=HasDependencies,1.1.0=OutsidePin,1.2.0=OutsidePin,1.3.0=OutsidePin",
        ),
        (
            "=0.9.0",
            None,
            "none: 0.9.0=MinKubeVersionTooHigh,1.0.0=OutsidePin,1.1.0=OutsidePin,1.2.0=OutsidePin,1.3.0=OutsidePin",
        ),
    ];
    for (override_range, version_range, expected) in table {
        let mut req = request(&cats, "1.3.0");
        req.cluster = steady.clone();
        req.kube_version = Some(v("1.30.4"));
        req.steady_state_range = range(override_range);
        req.version_range = version_range.and_then(range);
        assert_eq!(
            outcome(&req),
            expected,
            "steadyStateVersionRange {override_range:?}, versionRange {version_range:?}"
        );
    }

    // Refused: the PO keeps what it runs and says why.
    let mut req = request(&cats, "1.3.0");
    req.cluster = steady;
    req.steady_state_range = range("=1.2.0");
    let err = resolve(&req).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("keeping the installed bundle p.v1.3.0"),
        "{text}"
    );
    assert!(text.contains("olm.maxOpenShiftVersion is 4.16"), "{text}");
}

#[test]
fn an_upward_successor_beats_a_lower_bundle() {
    // 1.4.0 replaces the installed 1.3.0; 1.5.0 does not.
    let cat = PackageBuilder::new(PKG)
        .chain(
            "stable",
            &["1.0.0", "1.1.0", "1.2.0", "1.3.0", "1.4.0", "1.5.0"],
        )
        .catalog();
    let cats = one(&cat);
    // (steadyStateVersionRange, expected, whether 1.2.0 was a candidate that lost)
    let table = [
        ("!=1.3.0", "1.4.0", true),
        ("<1.3.0 || >1.3.0", "1.4.0", true),
        ("<1.3.0 || =1.5.0", "1.2.0", false),
        ("<1.3.0", "1.2.0", false),
    ];
    for (override_range, expected, lost) in table {
        let mut req = request(&cats, "1.3.0");
        req.steady_state_range = range(override_range);
        assert_eq!(outcome(&req), expected, "{override_range:?}");
        assert!(
            matches!(
                reason_for(&req, "1.5.0"),
                Some(RejectReason::NotSuccessor { .. })
            ),
            "{override_range:?}: an upward move still needs an edge"
        );
        if lost {
            assert_eq!(
                reason_for(&req, "1.2.0"),
                None,
                "{override_range:?}: 1.2.0 passed every filter and lost on rank"
            );
        }
    }

    // Even a deprecated successor: "up" ranks before "not deprecated".
    let deprecated = PackageBuilder::new(PKG)
        .chain("stable", &["1.2.0", "1.3.0", "1.4.0"])
        .deprecate_bundle("1.4.0", "use 1.5")
        .catalog();
    let cats = one(&deprecated);
    let mut req = request(&cats, "1.3.0");
    req.steady_state_range = range("!=1.3.0");
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.4.0"));
    assert_eq!(reason_for(&req, "1.2.0"), None);

    // Across catalogs too: a higher-priority catalog offering only a lower bundle does not turn
    // an upgrade into a downgrade, and the two do not tie.
    let old = PackageBuilder::new(PKG)
        .chain("stable", &["1.1.0", "1.2.0"])
        .catalog();
    let new = PackageBuilder::new(PKG)
        .chain("stable", &["1.2.0", "1.3.0", "1.4.0"])
        .catalog();
    for old_priority in [10, 0] {
        let cats = [("old", old_priority, &old), ("new", 0, &new)];
        let mut req = request(&cats, "1.3.0");
        req.steady_state_range = range("!=1.3.0");
        let resolution = resolve(&req).unwrap();
        assert_eq!(
            (
                resolution.bundle.catalog.as_str(),
                resolution.bundle.version.to_string()
            ),
            ("new", "1.4.0".to_owned()),
            "old catalog at priority {old_priority}"
        );
        assert!(
            resolution
                .rejected
                .iter()
                .all(|r| !(r.version == v("1.2.0") && &*r.catalog == "old")),
            "1.2.0 from old was a candidate"
        );
    }
}

/// Issue 25 item 1: with `steadyStateVersionRange: ">=1.3.0 <1.4.0"` (what POM's own
/// IncompatibleOperatorsInstalled message suggests), a minor update moves the PO within the
/// override (to 1.3.5, not to 1.5.0), so when the update completes the override admits what
/// runs and nothing moves down. A first install also lands within the override.
#[test]
fn a_cluster_update_moves_within_the_override_so_its_end_never_moves_down() {
    let cat = PackageBuilder::new(PKG)
        .chain("stable", &["1.3.0", "1.3.5", "1.5.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "1.3.0");
    req.steady_state_range = range(">=1.3.0 <1.4.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.3", "4.17.0");
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.3.5"));
    assert_eq!(
        (resolution.pin.reason, resolution.pin.range.as_str()),
        (PinReason::MinorUpgrade, ">=1.3.0 <2.0.0-0 >=1.3.0 <1.4.0")
    );
    // The update completes: the override admits 1.3.5, which stays.
    let mut after = request(&cats, "1.3.5");
    after.steady_state_range = range(">=1.3.0 <1.4.0");
    after.cluster = phase(PhaseKind::Steady, "4.17.0", "4.17.0");
    assert!(resolve(&after).unwrap().stays);
    after.cluster = phase(PhaseKind::MinorUpgrade, "4.16.3", "4.17.0");
    assert!(matches!(
        reason_for(&after, "1.5.0"),
        Some(RejectReason::OutsidePin {
            reason: PinReason::MinorUpgrade,
            ..
        })
    ));
    // The whole update, hop by hop, never leaves the override (from 1.3.5, 1.5.0 is a
    // successor, refused by the pin).
    let plan = plan_hops(&req).unwrap();
    assert!(matches!(plan.end, PlanEnd::Settled), "{:?}", plan.end);
    assert!(
        plan.hops.iter().all(|h| h.to.version < v("1.4.0")) && !plan.hops.is_empty(),
        "{:?}",
        plan.hops
    );
    // A first install with the override set lands within it.
    let mut install = request(&cats, "1.3.0");
    install.installed = None;
    install.steady_state_range = range(">=1.3.0 <1.4.0");
    let resolution = resolve(&install).unwrap();
    assert_eq!(resolution.bundle.version, v("1.3.5"));
    assert_eq!(resolution.pin.range, ">=1.3.0 <1.4.0");
    // Without the override, the same update goes to 1.5.0, as before.
    req.steady_state_range = None;
    assert_eq!(plan_hops(&req).unwrap().final_bundle().version, v("1.5.0"));
}
