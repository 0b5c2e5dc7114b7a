//! Parity with OLM v1 (operator-framework/operator-controller) under `PinPolicy::Unpinned`.
//!
//! Without a pin, `resolve` must choose what operator-controller's `CatalogResolver` chooses:
//! candidates are the installed bundle itself (exact version and release) and its direct
//! successors (`replaces`, `skips`, a blang `skipRange` containing the installed version),
//! filtered by the Masterminds version range; ranked bundle-level non-deprecated first, then by
//! version and release (pre-releases are ordinary candidates); across catalogs non-deprecated
//! first, then priority, and a tie is an error.
//!
//! The cases restate facts from operator-controller's tests (`resolve/catalog_test.go`,
//! `catalogmetadata/filter/successors_test.go` and `bundle_predicates_test.go`,
//! `catalogmetadata/compare/compare_test.go`); the code is ours. Where POM's model differs,
//! the case says how it was adapted: POM resolves one channel (the default one when unset)
//! where OLM v1 without `channels` looks at every bundle of the package, so each case names the
//! channel in which OLM's answer lies, and bundles OLM keeps outside any channel are put in one.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod select_support;

use std::collections::BTreeSet;

use pom_resolver::fbc::model::Catalog;
use pom_resolver::pin::PinReason;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, InstalledBundle, PinPolicy, ResolveError, ResolveRequest, resolve,
};
use select_support::*;

const PKG: &str = "pkg";

/// What OLM v1 answers.
#[derive(Debug)]
enum Expect {
    /// This bundle version (from the only catalog holding the package, or any).
    Version(&'static str),
    /// This version from this catalog.
    From(&'static str, &'static str),
    /// No bundle: OLM's "no bundles found for package ...".
    Nothing,
    /// OLM's "found bundles ... in multiple catalogs with the same priority": these catalogs.
    Ambiguous(&'static [&'static str]),
}

struct Case {
    /// operator-controller test (and sub-case) the facts come from.
    olm: &'static str,
    catalogs: Vec<(&'static str, i32, Catalog)>,
    channel: Option<&'static str>,
    /// Version of the installed bundle `pkg.v<version>`.
    installed: Option<&'static str>,
    range: Option<&'static str>,
    expect: Expect,
}

fn request<'a>(case: &'a Case, cats: &'a [CatalogInput<'a>]) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs: cats,
        package: PKG,
        channel: case.channel,
        installed: case.installed.map(|version| InstalledBundle {
            name: name(PKG, version),
            version: v(version),
        }),
        version_range: case
            .range
            .map(|r| VersionRange::parse(r).unwrap_or_else(|e| panic!("{}: {r}: {e}", case.olm))),
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::Unpinned,
    }
}

fn run(cases: Vec<Case>) {
    let mut failures = Vec::new();
    for case in &cases {
        let cats: Vec<CatalogInput<'_>> = case
            .catalogs
            .iter()
            .map(|(name, priority, catalog)| (*name, *priority, catalog))
            .collect();
        let answer = resolve(&request(case, &cats));
        let ok = match (&case.expect, &answer) {
            (Expect::Version(version), Ok(resolution)) => {
                resolution.bundle.version == v(version)
                    && resolution.pin.reason == PinReason::Unpinned
            }
            (Expect::From(catalog, version), Ok(resolution)) => {
                resolution.bundle.catalog == *catalog && resolution.bundle.version == v(version)
            }
            (Expect::Nothing, Err(ResolveError::NoCandidate { .. })) => true,
            (
                Expect::Ambiguous(expected),
                Err(ResolveError::AmbiguousCatalogs { catalogs, .. }),
            ) => catalogs == expected,
            _ => false,
        };
        if !ok {
            let got = match &answer {
                Ok(resolution) => format!(
                    "{} {} from {} (pin {})",
                    resolution.bundle.name,
                    resolution.bundle.version,
                    resolution.bundle.catalog,
                    resolution.pin
                ),
                Err(err) => format!("error: {err}"),
            };
            failures.push(format!(
                "{}: expected {:?}, got {got}",
                case.olm, case.expect
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ from OLM v1:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

/// operator-controller's `genPackage`: channels alpha (0.1.0; 1.0.0, 1.0.1, 1.0.2 each with
/// `skipRange: <self`; 2.0.0 with `>=1.0.0 <2.0.0`), beta (0.1.0; 1.0.2 `<1.0.2`) and gamma
/// (3.0.0 `>=2.0.0 <3.0.0`); bundles 1.0.0 and 1.0.1 deprecated (bundle-level entries).
fn gen_package() -> Catalog {
    PackageBuilder::new(PKG)
        .bundles(&["0.1.0", "1.0.0", "1.0.1", "1.0.2", "2.0.0", "3.0.0"])
        .entry("alpha", "0.1.0", None, &[], None)
        .entry("alpha", "1.0.0", None, &[], Some("<1.0.0"))
        .entry("alpha", "1.0.1", None, &[], Some("<1.0.1"))
        .entry("alpha", "1.0.2", None, &[], Some("<1.0.2"))
        .entry("alpha", "2.0.0", None, &[], Some(">=1.0.0 <2.0.0"))
        .entry("beta", "0.1.0", None, &[], None)
        .entry("beta", "1.0.2", None, &[], Some("<1.0.2"))
        .entry("gamma", "3.0.0", None, &[], Some(">=2.0.0 <3.0.0"))
        .deprecate_bundle("1.0.0", "bundle pkg.v1.0.0 is deprecated")
        .deprecate_bundle("1.0.1", "bundle pkg.v1.0.1 is deprecated")
        .catalog()
}

fn only(catalog: Catalog) -> Vec<(&'static str, i32, Catalog)> {
    vec![("c", 0, catalog)]
}

fn case(
    olm: &'static str,
    channel: &'static str,
    installed: Option<&'static str>,
    range: Option<&'static str>,
    expect: Expect,
) -> Case {
    Case {
        olm,
        catalogs: only(gen_package()),
        channel: Some(channel),
        installed,
        range,
        expect,
    }
}

/// `resolve/catalog_test.go`, one catalog holding `genPackage`.
#[test]
fn catalog_resolver_cases() {
    use Expect::*;
    run(vec![
        case(
            "TestPackageExists (gamma holds the highest, 3.0.0)",
            "gamma",
            None,
            None,
            Version("3.0.0"),
        ),
        case(
            "TestVersionExists",
            "alpha",
            None,
            Some(">=1.0.0 <2.0.0"),
            Version("1.0.2"),
        ),
        case(
            "TestVersionDoesNotExist",
            "alpha",
            None,
            Some("4.0.0"),
            Nothing,
        ),
        case("TestChannelExists", "beta", None, None, Version("1.0.2")),
        case(
            "TestChannelExistsButNotVersion",
            "beta",
            None,
            Some("3.0.0"),
            Nothing,
        ),
        case(
            "TestVersionExistsButNotChannel (1.0.0 is not in gamma)",
            "gamma",
            None,
            Some("1.0.0"),
            Nothing,
        ),
        case(
            "TestChannelAndVersionExist",
            "alpha",
            None,
            Some("0.1.0"),
            Version("0.1.0"),
        ),
        case(
            "TestMultipleChannels (alpha holds 2.0.0)",
            "alpha",
            None,
            None,
            Version("2.0.0"),
        ),
        case(
            "TestPreferNonDeprecated",
            "alpha",
            None,
            Some(">=0.1.0 <=1.0.0"),
            Version("0.1.0"),
        ),
        case(
            "TestAcceptDeprecated",
            "alpha",
            None,
            Some(">=1.0.0 <=1.0.1"),
            Version("1.0.1"),
        ),
        // 0.1.0 => 1.0.2 through the skipRange `<1.0.2`; 1.0.0 and 1.0.1 are successors too but
        // deprecated; 2.0.0's `>=1.0.0 <2.0.0` does not contain 0.1.0.
        case(
            "TestUpgradeFoundLegacy",
            "alpha",
            Some("0.1.0"),
            None,
            Version("1.0.2"),
        ),
        case(
            "TestUpgradeNotFoundLegacy",
            "alpha",
            Some("0.1.0"),
            Some("<1.0.0 >=2.0.0"),
            Nothing,
        ),
    ]);
}

/// Deprecation, as `TestAcceptDeprecated` shows it: when only deprecated bundles are left, the
/// highest is chosen and its bundle-level message is reported.
#[test]
fn accepted_deprecated_bundle_carries_its_message() {
    let catalog = gen_package();
    let cats = [("c", 0, &catalog)];
    let mut req = ResolveRequest {
        catalogs: &cats,
        package: PKG,
        channel: Some("alpha"),
        installed: None,
        version_range: Some(VersionRange::parse(">=1.0.0 <=1.0.1").unwrap()),
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::Unpinned,
    };
    let resolution = resolve(&req).unwrap();
    assert_eq!(
        resolution.bundle.deprecation.as_deref(),
        Some("bundle pkg.v1.0.1 is deprecated")
    );
    assert_eq!(resolution.package_deprecation, None);
    req.version_range = Some(VersionRange::parse(">=0.1.0 <=1.0.0").unwrap());
    assert_eq!(resolve(&req).unwrap().bundle.deprecation, None);
}

/// Only bundle-level entries rank (`compare.ByDeprecationFunc`, `isDeprecated` look at
/// `olm.bundle` references alone): a deprecated package or channel still yields its best
/// non-deprecated bundle, and its message is reported separately.
#[test]
fn only_bundle_deprecation_ranks() {
    let catalog = PackageBuilder::new(PKG)
        .chain("stable", &["1.0.0", "1.1.0"])
        .deprecate_bundle("1.1.0", "1.1.0 is broken")
        .deprecate_package("the package is deprecated")
        .deprecate_channel("stable", "the channel is deprecated")
        .catalog();
    let cats = [("c", 0, &catalog)];
    let req = ResolveRequest {
        catalogs: &cats,
        package: PKG,
        channel: None,
        installed: None,
        version_range: None,
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::Unpinned,
    };
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("1.0.0"));
    assert_eq!(resolution.bundle.deprecation, None);
    assert_eq!(
        resolution.package_deprecation.as_deref(),
        Some("the package is deprecated")
    );
    assert_eq!(
        resolution.channel_deprecation.as_deref(),
        Some("the channel is deprecated")
    );
}

/// `TestPackageVariationsBetweenCatalogs`: catalogs b (1.0.0, deprecated), c (1.0.1,
/// deprecated), d (1.0.2), e (1.0.3, deprecated), f (1.0.4, 1.0.5), all priority 0. OLM keeps
/// these bundles outside any channel; here each catalog has them in `stable`.
#[test]
fn package_variations_between_catalogs() {
    let one = |versions: &[&str], deprecated: Option<&str>| {
        let mut builder = PackageBuilder::new(PKG).chain("stable", versions);
        if let Some(version) = deprecated {
            builder = builder.deprecate_bundle(version, "deprecated");
        }
        builder.catalog()
    };
    let catalogs = || {
        vec![
            ("b", 0, one(&["1.0.0"], Some("1.0.0"))),
            ("c", 0, one(&["1.0.1"], Some("1.0.1"))),
            ("d", 0, one(&["1.0.2"], None)),
            ("e", 0, one(&["1.0.3"], Some("1.0.3"))),
            ("f", 0, one(&["1.0.4", "1.0.5"], None)),
        ]
    };
    let case = |olm, range, expect| Case {
        olm,
        catalogs: catalogs(),
        channel: None,
        installed: None,
        range: Some(range),
        expect,
    };
    use Expect::*;
    run(vec![
        case(
            "deprecated in all but one catalog: the only non-deprecated one",
            ">=1.0.0 <=1.0.3",
            From("d", "1.0.2"),
        ),
        case(
            "found and deprecated in multiple catalogs: ambiguous",
            ">=1.0.0 <=1.0.1",
            Ambiguous(&["b", "c"]),
        ),
        case(
            "found and not deprecated in multiple catalogs: ambiguous",
            ">=1.0.0 <=1.0.4",
            Ambiguous(&["d", "f"]),
        ),
        case(
            "all candidates from one catalog: highest semver",
            ">=1.0.4 <=1.0.5",
            From("f", "1.0.5"),
        ),
    ]);
}

/// `TestUnequalPriority` and `TestMultiplePriority`.
#[test]
fn catalog_priority() {
    use Expect::*;
    run(vec![
        Case {
            olm: "TestUnequalPriority: priority beats a higher version",
            catalogs: vec![
                (
                    "a",
                    1,
                    PackageBuilder::new(PKG)
                        .chain("alpha", &["1.0.0"])
                        .catalog(),
                ),
                (
                    "b",
                    0,
                    PackageBuilder::new(PKG)
                        .chain("alpha", &["1.1.0"])
                        .catalog(),
                ),
            ],
            channel: None,
            installed: None,
            range: None,
            expect: From("a", "1.0.0"),
        },
        // OLM's message lists a, b and c (it stops narrowing once the top two tie); the fact is
        // the refusal, and POM names the catalogs tied at the top.
        Case {
            olm: "TestMultiplePriority: a tie at the top priority is an error",
            catalogs: vec![
                ("a", 1, gen_package()),
                ("b", 0, gen_package()),
                ("c", 1, gen_package()),
            ],
            channel: Some("alpha"),
            installed: None,
            range: Some(">=1.0.0 <=1.0.1"),
            expect: Ambiguous(&["a", "c"]),
        },
    ]);
}

/// `filter/successors_test.go` `TestSuccessorsPredicate`: the candidates left after the
/// successor filter are exactly OLM's (the installed bundle itself, matched on exact version
/// *and* release, plus what replaces, skips or skipRanges it), and the winner is the highest.
/// Bundle 2.0.0+1 is outside the channel in OLM's fixture; here it is an entry without edges.
#[test]
fn successors_of_the_installed_bundle() {
    let catalog = PackageBuilder::new("test-package")
        .bundles(&[
            "2.0.0", "2.0.0+1", "2.1.0", "2.2.0", "2.2.1", "2.3.0", "2.4.0",
        ])
        .entry("stable", "2.0.0", None, &[], None)
        .entry("stable", "2.0.0+1", None, &[], None)
        .entry("stable", "2.1.0", Some("2.0.0"), &[], None)
        .entry("stable", "2.2.0", Some("2.1.0"), &["2.0.0+1"], None)
        .entry("stable", "2.2.1", None, &[], None)
        .entry("stable", "2.3.0", Some("2.2.0"), &["2.2.1"], None)
        .entry("stable", "2.4.0", None, &[], Some(">=2.3.0 <2.4.0"))
        .catalog();
    let cats = [("c", 0, &catalog)];
    let cases: [(&str, &str, &[&str]); 5] = [
        ("respect replaces", "2.0.0", &["2.0.0", "2.1.0"]),
        ("respect skips", "2.2.1", &["2.2.1", "2.3.0"]),
        ("respect skipRange", "2.3.0", &["2.3.0", "2.4.0"]),
        (
            "installed bundle matcher is exact (2.1.0 replaces 2.0.0, not 2.0.0+1)",
            "2.0.0+1",
            &["2.0.0+1", "2.2.0"],
        ),
        ("installed bundle not found", "9.0.0", &[]),
    ];
    let all: BTreeSet<String> = catalog.packages["test-package"]
        .bundles
        .values()
        .map(|b| b.version.to_string())
        .collect();
    for (label, installed, expected) in cases {
        let req = ResolveRequest {
            catalogs: &cats,
            package: "test-package",
            channel: None,
            installed: Some(InstalledBundle {
                name: name("test-package", installed),
                version: v(installed),
            }),
            version_range: None,
            steady_state_range: None,
            cluster: None,
            kube_version: None,
            pin_policy: PinPolicy::Unpinned,
        };
        let answer = resolve(&req);
        let rejected = match &answer {
            Ok(resolution) => &resolution.rejected,
            Err(err) => err.rejections(),
        };
        assert!(
            rejected.iter().all(|r| r.reason.code() == "NotSuccessor"),
            "{label}: only the successor filter may refuse: {rejected:?}"
        );
        let refused: BTreeSet<String> = rejected.iter().map(|r| r.version.to_string()).collect();
        let candidates: BTreeSet<String> = all.difference(&refused).cloned().collect();
        let expected_set: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        assert_eq!(candidates, expected_set, "{label}");
        match expected.last() {
            Some(highest) => assert_eq!(
                answer.map(|r| r.bundle.version.to_string()).ok().as_deref(),
                Some(*highest),
                "{label}"
            ),
            None => assert!(
                matches!(answer, Err(ResolveError::NoCandidate { .. })),
                "{label}: {answer:?}"
            ),
        }
    }
}

/// `filter/successors_test.go` `TestLegacySuccessor`: from 0.0.1 (absent from the catalog),
/// 0.0.2 replaces it, 0.0.4 skips it, 0.0.5's skipRange `<=0.0.1` contains it; 0.0.3 only
/// replaces 0.0.2. The highest of those, 0.0.5, is chosen in one hop.
#[test]
fn legacy_successor_edges() {
    let catalog = PackageBuilder::new("package1")
        .bundles(&["0.0.2", "0.0.3", "0.0.4", "0.0.5"])
        .entry("stable", "0.0.2", Some("0.0.1"), &[], None)
        .entry("stable", "0.0.3", Some("0.0.2"), &[], None)
        .entry("stable", "0.0.4", None, &["0.0.1"], None)
        .entry("stable", "0.0.5", None, &[], Some("<=0.0.1"))
        .catalog();
    let cats = [("c", 0, &catalog)];
    let req = ResolveRequest {
        catalogs: &cats,
        package: "package1",
        channel: None,
        installed: Some(InstalledBundle {
            name: name("package1", "0.0.1"),
            version: v("0.0.1"),
        }),
        version_range: None,
        steady_state_range: None,
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::Unpinned,
    };
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("0.0.5"));
    let refused: Vec<String> = resolution
        .rejected
        .iter()
        .map(|r| format!("{} {}", r.version, r.reason.code()))
        .collect();
    assert_eq!(refused, ["0.0.3 NotSuccessor"]);
}

/// `compare/compare_test.go` `TestByVersionAndRelease` (1.0.0 > 1.0.0-alpha+2 > 1.0.0-alpha+1 >
/// 0.0.1) and the pre-release rule of OLM v1: no pin, so a pre-release is an ordinary candidate
/// unless the range excludes it (Masterminds: a range without a pre-release does).
#[test]
fn version_release_order_and_prereleases() {
    let with_release = PackageBuilder::new(PKG)
        .chain(
            "stable",
            &["0.0.1", "1.0.0-alpha+1", "1.0.0-alpha+2", "1.0.0"],
        )
        .catalog();
    let without_release = PackageBuilder::new(PKG)
        .chain("stable", &["0.0.1", "1.0.0-alpha+1", "1.0.0-alpha+2"])
        .catalog();
    let on = |olm, catalog: &Catalog, installed: Option<&'static str>, range, expect| Case {
        olm,
        catalogs: only(catalog.clone()),
        channel: None,
        installed,
        range,
        expect,
    };
    use Expect::*;
    run(vec![
        on(
            "highest version wins",
            &with_release,
            None,
            None,
            Version("1.0.0"),
        ),
        on(
            "no range: the highest pre-release, by release",
            &without_release,
            None,
            None,
            Version("1.0.0-alpha+2"),
        ),
        on(
            "a range naming a pre-release admits it",
            &with_release,
            None,
            Some(">=1.0.0-0 <1.0.0"),
            Version("1.0.0-alpha+2"),
        ),
        on(
            "a range without a pre-release excludes them",
            &without_release,
            None,
            Some(">=0.0.1"),
            Version("0.0.1"),
        ),
        // A bare version is an exact pin ignoring build metadata (compare_test
        // TestNewVersionRange): 1.0.0-alpha matches both releases, the higher wins.
        on(
            "bare version matches every release of it",
            &without_release,
            None,
            Some("1.0.0-alpha"),
            Version("1.0.0-alpha+2"),
        ),
    ]);
}

/// Without a pin an installed bundle moves to its highest successor, even across a major and
/// onto a pre-release, where the controller's steady pin would hold it (§9: "as OLM v1").
#[test]
fn unpinned_moves_where_the_steady_pin_holds() {
    let catalog = PackageBuilder::new(PKG)
        .bundles(&["1.0.0", "1.1.0", "2.0.0-rc.1"])
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", Some("1.0.0"), &[], None)
        .entry("stable", "2.0.0-rc.1", Some("1.1.0"), &[], Some("<1.1.0"))
        .catalog();
    let cats = [("c", 0, &catalog)];
    let mut req = ResolveRequest {
        catalogs: &cats,
        package: PKG,
        channel: None,
        installed: Some(InstalledBundle {
            name: name(PKG, "1.0.0"),
            version: v("1.0.0"),
        }),
        version_range: None,
        steady_state_range: Some(VersionRange::parse("=1.0.0").unwrap()),
        cluster: None,
        kube_version: None,
        pin_policy: PinPolicy::Unpinned,
    };
    let resolution = resolve(&req).unwrap();
    assert_eq!(resolution.bundle.version, v("2.0.0-rc.1"));
    assert_eq!(
        (resolution.pin.range.as_str(), resolution.pin.reason),
        ("*", PinReason::Unpinned),
        "no pin, and the steady-state range is ignored"
    );
    assert!(!resolution.stays);

    req.version_range = Some(VersionRange::parse("<2.0.0").unwrap());
    assert_eq!(resolve(&req).unwrap().bundle.version, v("1.1.0"));

    req.pin_policy = PinPolicy::FollowCluster;
    req.steady_state_range = None;
    let held = resolve(&req).unwrap();
    assert!(held.stays, "plain Kubernetes, steady: =1.0.0");
    assert_eq!(held.pin.reason, PinReason::Steady);
}
