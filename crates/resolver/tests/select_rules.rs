//! One table test per rule of §5 (and the pins of §4.2 as the selector applies them).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod select_support;

use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::model::Catalog;
use pom_resolver::pin::PinReason;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, InstalledBundle, PinPolicy, PlanEnd, RejectReason, ResolveError, ResolveRequest,
    plan_hops, resolve,
};
use select_support::*;

fn request<'a>(catalogs: &'a [CatalogInput<'a>], package: &'a str) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs,
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

fn installed(package: &str, version: &str) -> Option<InstalledBundle> {
    Some(InstalledBundle {
        name: name(package, version),
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

fn chosen(req: &ResolveRequest<'_>) -> String {
    match resolve(req) {
        Ok(resolution) => resolution.bundle.version.to_string(),
        Err(err) => panic!("expected a bundle, got: {err}"),
    }
}

fn reason_for(req: &ResolveRequest<'_>, version: &str) -> RejectReason {
    let rejected = match resolve(req) {
        Ok(resolution) => resolution.rejected,
        Err(err) => err.rejections().to_vec(),
    };
    rejected
        .into_iter()
        .find(|r| r.version == v(version))
        .unwrap_or_else(|| panic!("{version} was not rejected"))
        .reason
}

fn one(catalog: &Catalog) -> [CatalogInput<'_>; 1] {
    [("main", 0, catalog)]
}

#[test]
fn unknown_package_lists_what_exists() {
    let cat = PackageBuilder::new("etcd")
        .chain("stable", &["1.0.0"])
        .catalog();
    let cats = one(&cat);
    let err = resolve(&request(&cats, "etdc")).unwrap_err();
    assert!(matches!(&err, ResolveError::UnknownPackage { known, .. } if known == &["etcd"]));
    assert!(
        err.to_string().contains("\"etdc\"") && err.to_string().contains("etcd"),
        "{err}"
    );
    let err = resolve(&request(&[], "etcd")).unwrap_err();
    assert!(matches!(err, ResolveError::NoCatalogs { .. }));
}

#[test]
fn channels_are_case_sensitive_and_default_when_unset() {
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0"])
        .chain("fast", &["1.0.0", "1.1.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    assert_eq!(
        chosen(&req),
        "1.0.0",
        "defaultChannel is stable (first added)"
    );
    req.channel = Some("fast");
    assert_eq!(chosen(&req), "1.1.0");
    req.channel = Some("Stable");
    let err = resolve(&req).unwrap_err();
    assert!(
        matches!(&err, ResolveError::UnknownChannel { available, .. } if available == &["fast", "stable"])
    );
    assert!(err.to_string().contains("did you mean \"stable\""), "{err}");

    let no_default = PackageBuilder::new("p")
        .chain("a", &["1.0.0"])
        .default_channel(None)
        .catalog();
    let cats = one(&no_default);
    assert!(matches!(
        resolve(&request(&cats, "p")),
        Err(ResolveError::NoDefaultChannel { .. })
    ));
}

#[test]
fn install_takes_the_highest_release_and_skips_prereleases() {
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0-rc.1"])
        .catalog();
    let cats = one(&cat);
    let req = request(&cats, "p");
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.1.0"));
    assert_eq!(
        (resolution.pin.reason, resolution.pin.range.as_str()),
        (PinReason::Install, "*")
    );
    assert!(!resolution.stays);
    assert!(matches!(
        reason_for(&req, "1.2.0-rc.1"),
        RejectReason::PreReleaseOutsidePin { .. }
    ));
}

#[test]
fn install_admits_a_prerelease_the_admin_range_names() {
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0-rc.1"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.version_range = Some(VersionRange::parse(">=1.2.0-0").unwrap());
    assert_eq!(chosen(&req), "1.2.0-rc.1");
    req.version_range = Some(VersionRange::parse("<1.1.0").unwrap());
    assert_eq!(chosen(&req), "1.0.0");
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::OutsideVersionRange { .. }
    ));
}

#[test]
fn successor_rule_replaces_and_skips_one_hop() {
    // 1.1.0 replaces 1.0.0; 1.2.0 replaces 1.1.0; 1.3.0 skips 1.0.0 in channel "skip".
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .bundle("1.3.0", |_| {})
        .chain("skip", &["1.0.0", "1.1.0"])
        .entry("skip", "1.3.0", Some("1.1.0"), &["1.0.0"], None)
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.0", "4.17.0");
    assert_eq!(
        chosen(&req),
        "1.1.0",
        "one hop: 1.2.0 does not replace 1.0.0"
    );
    assert!(matches!(
        reason_for(&req, "1.2.0"),
        RejectReason::NotSuccessor { .. }
    ));
    req.channel = Some("skip");
    assert_eq!(
        chosen(&req),
        "1.3.0",
        "skips makes 1.3.0 a direct successor"
    );
}

#[test]
fn successor_rule_skip_range_and_missing_installed_bundle() {
    // The installed 1.0.5 is not in the catalog at all; 1.2.0's skipRange covers it, while
    // 1.1.0 only replaces 1.0.0 (a dangling edge).
    let cat = PackageBuilder::new("p")
        .bundles(&["1.1.0", "1.2.0"])
        .entry("stable", "1.1.0", Some("1.0.0"), &[], None)
        .entry(
            "stable",
            "1.2.0",
            Some("1.1.0"),
            &[],
            Some(">=1.0.0 <1.2.0"),
        )
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.5");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.0", "4.17.0");
    assert_eq!(chosen(&req), "1.2.0");
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::NotSuccessor { .. }
    ));
}

#[test]
fn steady_stays_and_patch_minor_pins_bound_the_move() {
    let cat = PackageBuilder::new("p")
        .bundles(&["1.0.0", "1.0.1", "1.0.2-rc.1", "1.1.0", "2.0.0"])
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.0.1", Some("1.0.0"), &[], None)
        .entry("stable", "1.0.2-rc.1", Some("1.0.1"), &["1.0.0"], None)
        .entry(
            "stable",
            "1.1.0",
            Some("1.0.2-rc.1"),
            &["1.0.0", "1.0.1"],
            None,
        )
        .entry("stable", "2.0.0", Some("1.1.0"), &["1.0.0", "1.0.1"], None)
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");

    let steady = resolve(&req).unwrap();
    assert!(steady.stays);
    assert_eq!(
        (steady.pin.reason, steady.pin.range.as_str()),
        (PinReason::Steady, "=1.0.0")
    );
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::OutsidePin {
            reason: PinReason::Steady,
            ..
        }
    ));

    req.cluster = phase(PhaseKind::PatchUpgrade, "4.16.1", "4.16.5");
    assert_eq!(chosen(&req), "1.0.1");
    assert!(matches!(
        reason_for(&req, "1.0.2-rc.1"),
        RejectReason::PreReleaseOutsidePin { .. }
    ));
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::OutsidePin {
            reason: PinReason::PatchUpgrade,
            ..
        }
    ));

    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.1", "4.17.0");
    assert_eq!(
        chosen(&req),
        "1.1.0",
        "minor update: within the major, never 2.0.0"
    );
    assert!(matches!(
        reason_for(&req, "2.0.0"),
        RejectReason::OutsidePin {
            reason: PinReason::MinorUpgrade,
            ..
        }
    ));
}

#[test]
fn steady_state_override_moves_by_hand() {
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "2.0.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");
    req.steady_state_range = Some(VersionRange::parse("=2.0.0").unwrap());
    let resolution = resolve(&req).unwrap();
    assert_eq!(
        resolution.bundle.version,
        v("2.0.0"),
        "an admin may cross a major by hand"
    );
    assert_eq!(resolution.pin.reason, PinReason::Override);
    // During a cluster update the phase pin rules, not the override.
    req.cluster = phase(PhaseKind::PatchUpgrade, "4.16.1", "4.16.2");
    assert_eq!(chosen(&req), "1.0.0");
}

#[test]
fn max_openshift_version_is_judged_on_the_target() {
    let cat = PackageBuilder::new("p")
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 17))
        .bundle("1.2.0", invalid_max_ocp("4.17.1"))
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", Some("1.0.0"), &[], None)
        .entry("stable", "1.2.0", Some("1.1.0"), &["1.0.0"], None)
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.3", "4.17.0");
    assert_eq!(chosen(&req), "1.1.0");
    assert!(matches!(
        reason_for(&req, "1.0.0"),
        RejectReason::MaxOpenShiftVersionTooLow { max: (4, 16), .. }
    ));
    assert!(matches!(
        reason_for(&req, "1.2.0"),
        RejectReason::InvalidMaxOpenShiftVersion { .. }
    ));
    // Plain Kubernetes (no ClusterVersion): no OpenShift check, steady.
    req.cluster = None;
    assert!(resolve(&req).unwrap().stays);
    // 4.23 is 5.0.
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.22.0", "5.0.0");
    let err = resolve(&req).unwrap_err();
    assert!(err.to_string().contains("needs 5.0"), "{err}");
}

#[test]
fn min_kube_version_is_checked_when_known() {
    let cat = PackageBuilder::new("p")
        .bundle("1.0.0", min_kube("1.25.0"))
        .bundle("1.1.0", min_kube("v1.34"))
        .bundle("1.2.0", min_kube("latest"))
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.kube_version = Some(v("1.33.2+k3s1"));
    assert_eq!(chosen(&req), "1.0.0");
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::MinKubeVersionTooHigh { .. }
    ));
    assert!(matches!(
        reason_for(&req, "1.2.0"),
        RejectReason::InvalidMinKubeVersion { .. }
    ));
    req.kube_version = None;
    assert_eq!(chosen(&req), "1.2.0");
}

#[test]
fn non_deprecated_beats_a_higher_deprecated_bundle() {
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "1.1.0"])
        .deprecate_bundle("1.1.0", "1.1.0 corrupts data")
        .catalog();
    let cats = one(&cat);
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(resolution.bundle.version, v("1.0.0"));
    assert_eq!(resolution.bundle.deprecation, None);
    assert_eq!(resolution.package_deprecation, None);
    assert_eq!(resolution.channel_deprecation, None);

    let all = PackageBuilder::new("p")
        .chain("stable", &["1.0.0"])
        .deprecate_package("gone")
        .catalog();
    let cats = one(&all);
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(
        resolution.bundle.version,
        v("1.0.0"),
        "deprecated still installs"
    );
    assert_eq!(
        resolution.bundle.deprecation, None,
        "the bundle itself is not deprecated"
    );
    assert_eq!(resolution.package_deprecation.as_deref(), Some("gone"));
}

/// OLM v1 ranks on bundle-level deprecation only: a package- or channel-level one covers every
/// candidate alike and must not make a deprecated bundle tie with (and, being higher, beat) a
/// sound one. Both are still reported, for status.
#[test]
fn package_and_channel_deprecations_do_not_rank() {
    for (label, builder) in [
        (
            "package",
            PackageBuilder::new("p").deprecate_package("use q instead"),
        ),
        (
            "channel",
            PackageBuilder::new("p").deprecate_channel("stable", "stable ends in June"),
        ),
    ] {
        let cat = builder
            .chain("stable", &["1.0.0", "1.1.0"])
            .deprecate_bundle("1.1.0", "1.1.0 corrupts data")
            .catalog();
        let cats = one(&cat);
        let resolution = resolve(&request(&cats, "p")).unwrap();
        assert_eq!(
            resolution.bundle.version,
            v("1.0.0"),
            "{label}: the non-deprecated bundle wins"
        );
        assert_eq!(resolution.bundle.deprecation, None, "{label}");
        match label {
            "package" => {
                assert_eq!(
                    resolution.package_deprecation.as_deref(),
                    Some("use q instead")
                );
                assert_eq!(resolution.channel_deprecation, None);
            }
            _ => {
                assert_eq!(resolution.package_deprecation, None);
                assert_eq!(
                    resolution.channel_deprecation.as_deref(),
                    Some("stable ends in June")
                );
            }
        }
    }

    // Only deprecated bundles left: the highest one, with its own message.
    let cat = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "1.1.0"])
        .deprecate_bundle("1.0.0", "old")
        .deprecate_bundle("1.1.0", "1.1.0 corrupts data")
        .deprecate_channel("stable", "stable ends in June")
        .catalog();
    let cats = one(&cat);
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(resolution.bundle.version, v("1.1.0"));
    assert_eq!(
        resolution.bundle.deprecation.as_deref(),
        Some("1.1.0 corrupts data")
    );
    assert_eq!(
        resolution.channel_deprecation.as_deref(),
        Some("stable ends in June")
    );
}

/// Across catalogs too, "a non-deprecated winner first" means bundle-level: a package-level
/// deprecation in the higher-priority catalog does not hand the answer to a lower one.
#[test]
fn across_catalogs_only_bundle_deprecation_outranks_priority() {
    let high = PackageBuilder::new("p")
        .chain("stable", &["1.0.0"])
        .deprecate_package("moving to a new catalog")
        .catalog();
    let low = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "2.0.0"])
        .catalog();
    let cats = [("low", 0, &low), ("high", 10, &high)];
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(resolution.bundle.catalog, "high");
    assert_eq!(
        resolution.package_deprecation.as_deref(),
        Some("moving to a new catalog")
    );

    // A bundle-level deprecation of the high catalog's winner does hand it to the low one.
    let high = PackageBuilder::new("p")
        .chain("stable", &["1.0.0"])
        .deprecate_bundle("1.0.0", "broken")
        .catalog();
    let cats = [("low", 0, &low), ("high", 10, &high)];
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(
        (
            resolution.bundle.catalog.as_str(),
            resolution.bundle.version.to_string()
        ),
        ("low", "2.0.0".to_owned())
    );
    assert_eq!(resolution.package_deprecation, None);
}

#[test]
fn dependencies_are_refused_by_name() {
    let cat = PackageBuilder::new("p")
        .bundle("1.1.0", requires_package("etcd", ">=0.9.0"))
        .chain("stable", &["1.0.0", "1.1.0"])
        .catalog();
    let cats = one(&cat);
    let req = request(&cats, "p");
    assert_eq!(chosen(&req), "1.0.0");
    let reason = reason_for(&req, "1.1.0");
    assert!(
        reason
            .to_string()
            .contains("olm.package.required etcd >=0.9.0"),
        "{reason}"
    );
}

#[test]
fn release_orders_equal_versions() {
    let cat = PackageBuilder::new("p")
        .bundles(&["3.15.1+0.1725401534.p", "3.15.1+0.1727189912.p", "3.15.1"])
        .entry("stable", "3.15.1", None, &[], None)
        .entry("stable", "3.15.1+0.1725401534.p", None, &[], None)
        .entry("stable", "3.15.1+0.1727189912.p", None, &[], None)
        .catalog();
    let cats = one(&cat);
    assert_eq!(chosen(&request(&cats, "p")), "3.15.1+0.1727189912.p");
}

#[test]
fn catalog_priority_wins_and_a_tie_is_an_error() {
    let high = PackageBuilder::new("p")
        .chain("stable", &["1.0.0"])
        .catalog();
    let low = PackageBuilder::new("p")
        .chain("stable", &["1.0.0", "2.0.0"])
        .catalog();
    let cats = [("low", 0, &low), ("high", 10, &high)];
    let resolution = resolve(&request(&cats, "p")).unwrap();
    assert_eq!(
        (
            resolution.bundle.catalog.as_str(),
            resolution.bundle.version.to_string()
        ),
        ("high", "1.0.0".to_owned())
    );

    let tie = [("b", 5, &low), ("a", 5, &high)];
    let err = resolve(&request(&tie, "p")).unwrap_err();
    assert!(
        matches!(&err, ResolveError::AmbiguousCatalogs { priority: 5, catalogs, .. } if catalogs == &["a", "b"]),
        "{err}"
    );

    // A catalog without the package, or without candidates, does not tie.
    let other = PackageBuilder::new("q")
        .chain("stable", &["1.0.0"])
        .catalog();
    let cats = [("low", 0, &low), ("other", 10, &other)];
    assert_eq!(chosen(&request(&cats, "p")), "2.0.0");
}

#[test]
fn no_candidate_reports_every_rejection() {
    let cat = PackageBuilder::new("p")
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", requires_package("etcd", ">=1.0.0"))
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.0", "4.17.0");
    let err = resolve(&req).unwrap_err();
    let codes: Vec<&str> = err.rejections().iter().map(|r| r.reason.code()).collect();
    assert_eq!(
        codes,
        [
            "MaxOpenShiftVersionTooLow",
            "HasDependencies",
            "NotSuccessor"
        ]
    );
    let text = err.to_string();
    assert!(
        text.contains("keeping the installed bundle p.v1.0.0"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4, "{text}");
}

#[test]
fn rollback_holds_or_pivots_down() {
    let cat = PackageBuilder::new("p")
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("1.2.0", max_ocp(4, 17))
        .bundle("0.9.0", max_ocp(4, 16))
        .chain("stable", &["0.9.0", "1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    // Rolling back 4.16.5 -> 4.16.4: 1.1.0 runs there, hold it.
    req.installed = installed("p", "1.1.0");
    req.cluster = phase(PhaseKind::Rollback, "4.16.5", "4.16.4");
    let hold = resolve(&req).unwrap();
    assert!(hold.stays);
    assert_eq!(
        (hold.pin.reason, hold.pin.range.as_str()),
        (PinReason::Rollback, "=1.1.0")
    );
    // Rolling back 4.17.1 -> 4.16.9 with 1.2.0 installed... 1.2.0 supports 4.17 and so 4.16: hold.
    req.installed = installed("p", "1.2.0");
    req.cluster = phase(PhaseKind::Rollback, "4.17.1", "4.16.9");
    assert!(resolve(&req).unwrap().stays);
    // A bundle capped at 4.16 installed while rolling back 4.17.2 -> 4.17.1 (forced update):
    // incompatible, so pivot down to the highest compatible bundle below it in the major.
    let cat2 = PackageBuilder::new("p")
        .bundle("1.0.0", max_ocp(4, 17))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("0.9.0", max_ocp(4, 17))
        .chain("stable", &["0.9.0", "1.0.0", "1.1.0"])
        .catalog();
    let cats2 = one(&cat2);
    let mut req = request(&cats2, "p");
    req.installed = installed("p", "1.1.0");
    req.cluster = phase(PhaseKind::Rollback, "4.17.2", "4.17.1");
    let pivot = resolve(&req).unwrap();
    assert_eq!(pivot.bundle.version, v("1.0.0"), "0.9.0 is another major");
    assert_eq!(pivot.pin.range, ">=1.0.0 <1.1.0");
    assert!(matches!(
        reason_for(&req, "1.1.0"),
        RejectReason::MaxOpenShiftVersionTooLow { .. }
    ));
    assert!(matches!(
        reason_for(&req, "0.9.0"),
        RejectReason::OutsidePin { .. }
    ));
}

/// Issue 34 item 4: a rollback judges what runs by every check of §5 step 3 on the cluster
/// rolled back to. `maxOpenShiftVersion` alone can never exclude a lower OpenShift version, so
/// a lower API server below the installed bundle's `minKubeVersion` must step it down.
#[test]
fn rollback_steps_down_when_the_api_server_is_below_min_kube_version() {
    let cat = PackageBuilder::new("p")
        .bundle("0.9.0", min_kube("1.20.0"))
        .bundle("1.0.0", min_kube("1.28.0"))
        .bundle("1.1.0", min_kube("1.29.0"))
        .bundle("1.2.0", min_kube("1.29.6"))
        .chain("stable", &["0.9.0", "1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.2.0");
    req.cluster = phase(PhaseKind::Rollback, "4.16.4", "4.16.3");

    // The API server still runs what the bundle needs: hold it.
    req.kube_version = Some(v("1.29.7"));
    let hold = resolve(&req).unwrap();
    assert!(hold.stays);
    assert_eq!(
        (hold.pin.reason, hold.pin.range.as_str()),
        (PinReason::Rollback, "=1.2.0")
    );

    // The API server rolled back below 1.2.0's minKubeVersion: one step down, to the highest
    // bundle of the major below it that runs there (not 1.0.0, not another major).
    req.kube_version = Some(v("1.29.5"));
    let pivot = resolve(&req).unwrap();
    assert!(!pivot.stays);
    assert_eq!(pivot.bundle.version, v("1.1.0"));
    assert_eq!(
        (pivot.pin.reason, pivot.pin.range.as_str()),
        (PinReason::Rollback, ">=1.0.0 <1.2.0")
    );
    assert!(matches!(
        reason_for(&req, "1.2.0"),
        RejectReason::MinKubeVersionTooHigh { .. }
    ));

    // Lower still: 1.1.0 does not run either, 1.0.0 does.
    req.kube_version = Some(v("1.28.3"));
    assert_eq!(chosen(&req), "1.0.0");

    // No bundle of the major runs: keep what runs, and say that it does not run there and
    // that no lower bundle does either.
    req.kube_version = Some(v("1.27.0"));
    let err = resolve(&req).unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("keeping the installed bundle p.v1.2.0")
            && text.contains("does not run on the cluster being rolled back to")
            && text.contains("no lower bundle"),
        "{text}"
    );
    assert!(matches!(
        reason_for(&req, "1.2.0"),
        RejectReason::MinKubeVersionTooHigh { .. }
    ));
    assert!(matches!(
        reason_for(&req, "1.0.0"),
        RejectReason::MinKubeVersionTooHigh { .. }
    ));

    // Without a known API server version nothing can be judged against it: hold.
    req.kube_version = None;
    assert!(resolve(&req).unwrap().stays);
}

#[test]
fn plan_walks_hop_by_hop_until_it_stays() {
    let cat = PackageBuilder::new("p")
        .bundle("1.0.0", max_ocp(4, 16))
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0", "2.0.0"])
        .catalog();
    let cats = one(&cat);
    let mut req = request(&cats, "p");
    req.installed = installed("p", "1.0.0");
    req.cluster = phase(PhaseKind::MinorUpgrade, "4.16.0", "4.17.0");
    let plan = plan_hops(&req).unwrap();
    let hops: Vec<String> = plan.hops.iter().map(|h| h.to.version.to_string()).collect();
    assert_eq!(hops, ["1.1.0", "1.2.0"]);
    assert_eq!(plan.end, PlanEnd::Settled);
    assert_eq!(plan.final_bundle().version, v("1.2.0"));
    assert_eq!(
        plan.hops[1].from.as_ref().map(|f| f.version.clone()),
        Some(v("1.1.0"))
    );

    req.cluster = None;
    let plan = plan_hops(&req).unwrap();
    assert!(plan.hops.is_empty() && plan.first.stays);

    req.installed = None;
    let plan = plan_hops(&req).unwrap();
    assert_eq!(plan.hops.len(), 1, "install is one move, then steady");
    assert_eq!(plan.final_bundle().version, v("2.0.0"));
}
