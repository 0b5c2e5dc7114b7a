//! Pre-update paths (issue 35 item 1): the shortest chain of catalog edges to a bundle that runs
//! on both the current and the requested OpenShift version, one table row per rule.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod select_support;

use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::model::Catalog;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{
    CatalogInput, InstalledBundle, PinPolicy, PreUpdate, ResolveRequest, Shortfall, pre_update_path,
};
use select_support::*;

const PKG: &str = "op";

fn request<'a>(
    catalogs: &'a [CatalogInput<'a>],
    installed: &str,
    current: &str,
    version_range: Option<&str>,
) -> ResolveRequest<'a> {
    ResolveRequest {
        catalogs,
        package: PKG,
        channel: None,
        installed: Some(InstalledBundle {
            name: name(PKG, installed),
            version: v(installed),
        }),
        version_range: version_range.map(|r| VersionRange::parse(r).unwrap()),
        steady_state_range: None,
        cluster: Some(ClusterPhase::steady(v(current))),
        kube_version: None,
        pin_policy: PinPolicy::FollowCluster,
    }
}

/// What a path looks like in a table: the versions of its hops, or why there is none.
#[derive(Debug, PartialEq)]
enum Want {
    NotNeeded,
    Path(&'static [&'static str]),
    /// The nearest bundle's version, and whether it is reachable (lacking only the max).
    NoPath(Option<(&'static str, bool)>),
}

/// [`Want`] for an answer, with owned text.
#[derive(Debug, PartialEq)]
enum Got {
    NotNeeded,
    Path(Vec<String>),
    NoPath(Option<(String, bool)>),
}

impl From<&Want> for Got {
    fn from(want: &Want) -> Self {
        match want {
            Want::NotNeeded => Got::NotNeeded,
            Want::Path(versions) => Got::Path(versions.iter().map(|s| (*s).to_owned()).collect()),
            Want::NoPath(nearest) => {
                Got::NoPath(nearest.map(|(version, reachable)| (version.to_owned(), reachable)))
            }
        }
    }
}

fn shape(answer: &PreUpdate) -> Got {
    match answer {
        PreUpdate::NotNeeded => Got::NotNeeded,
        PreUpdate::Path(hops) => Got::Path(hops.iter().map(|h| h.version.to_string()).collect()),
        PreUpdate::NoPath(no) => Got::NoPath(no.nearest.as_ref().map(|(bundle, why)| {
            (
                bundle.version.to_string(),
                matches!(why, Shortfall::DoesNotRunOnRequested(_)),
            )
        })),
    }
}

fn check(label: &str, catalog: &Catalog, installed: &str, range: Option<&str>, want: Want) {
    let catalogs: Vec<CatalogInput<'_>> = vec![("main", 0, catalog)];
    let req = request(&catalogs, installed, "4.16.3", range);
    let answer = pre_update_path(&req, &v("4.17.0")).unwrap();
    assert_eq!(shape(&answer), Got::from(&want), "{label}: {answer:?}");
}

#[test]
fn the_shortest_path_to_a_bundle_that_runs_on_both_versions() {
    // 1.0 (max 4.16) → 1.1 (max 4.16) → 1.2 (no max): two hops, the first through a bundle
    // that runs only on the current version.
    let two_hops = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("1.2.0", |_| {})
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    check(
        "two hops",
        &two_hops,
        "1.0.0",
        None,
        Want::Path(&["1.1.0", "1.2.0"]),
    );

    // A skip edge makes it one hop; the shorter path wins over the longer chain.
    let skip = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("1.2.0", |_| {})
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", Some("1.0.0"), &[], None)
        .entry("stable", "1.2.0", Some("1.1.0"), &["1.0.0"], None)
        .catalog();
    check(
        "a skip is one hop",
        &skip,
        "1.0.0",
        None,
        Want::Path(&["1.2.0"]),
    );

    // Among the shortest, the highest final version: both 1.1.0 and 1.3.0 skipRange 1.0.0.
    let highest = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 17))
        .bundle("1.3.0", max_ocp(4, 18))
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", Some("1.0.0"), &[], None)
        .entry("stable", "1.3.0", None, &[], Some(">=1.0.0 <1.3.0"))
        .catalog();
    check(
        "the highest of the shortest",
        &highest,
        "1.0.0",
        None,
        Want::Path(&["1.3.0"]),
    );

    // What runs already runs on the requested version: nothing before the update.
    let fine = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 17))
        .bundle("1.1.0", |_| {})
        .chain("stable", &["1.0.0", "1.1.0"])
        .catalog();
    check("not needed", &fine, "1.0.0", None, Want::NotNeeded);
}

#[test]
fn equal_length_paths_prefer_bundles_that_are_not_deprecated() {
    // Review M7: as the selector ranks (§5 step 4), a deprecated bundle loses to a sound one
    // before versions are compared. Two one-hop paths: to 1.2.0 (deprecated) or to 1.1.0.
    let goal = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", |_| {})
        .bundle("1.2.0", |_| {})
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", None, &[], Some(">=1.0.0 <1.1.0"))
        .entry("stable", "1.2.0", None, &[], Some(">=1.0.0 <1.2.0"))
        .deprecate_bundle("1.2.0", "use 1.1.0")
        .catalog();
    check(
        "a sound goal beats a higher deprecated one",
        &goal,
        "1.0.0",
        None,
        Want::Path(&["1.1.0"]),
    );
    // Every goal deprecated: the highest, as before.
    let all = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", |_| {})
        .bundle("1.2.0", |_| {})
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", None, &[], Some(">=1.0.0 <1.1.0"))
        .entry("stable", "1.2.0", None, &[], Some(">=1.0.0 <1.2.0"))
        .deprecate_bundle("1.1.0", "old")
        .deprecate_bundle("1.2.0", "old")
        .catalog();
    check(
        "all deprecated: the highest",
        &all,
        "1.0.0",
        None,
        Want::Path(&["1.2.0"]),
    );

    // Two-hop paths through 1.0.5 or 1.1.0 (both run only now) to 1.2.0: the hop goes through
    // the one that is not deprecated, whichever the catalog lists first.
    for (deprecated, through) in [("1.0.5", "1.1.0"), ("1.1.0", "1.0.5")] {
        let hops = PackageBuilder::new(PKG)
            .bundle("1.0.0", max_ocp(4, 16))
            .bundle("1.0.5", max_ocp(4, 16))
            .bundle("1.1.0", max_ocp(4, 16))
            .bundle("1.2.0", |_| {})
            .entry("stable", "1.0.0", None, &[], None)
            .entry("stable", "1.0.5", Some("1.0.0"), &[], None)
            .entry("stable", "1.1.0", None, &["1.0.0"], None)
            .entry("stable", "1.2.0", None, &[], Some(">=1.0.5 <1.2.0"))
            .deprecate_bundle(deprecated, "do not stop here")
            .catalog();
        let want: &'static [&'static str] = if through == "1.1.0" {
            &["1.1.0", "1.2.0"]
        } else {
            &["1.0.5", "1.2.0"]
        };
        check(
            &format!("through {through}, not the deprecated {deprecated}"),
            &hops,
            "1.0.0",
            None,
            Want::Path(want),
        );
    }
}

#[test]
fn every_bundle_on_the_way_passes_the_filters_a_move_would() {
    // The only way leads through a bundle that does not run on the current version (max
    // 4.15): no path, and the nearest is the one that would run on 4.17 but cannot be reached.
    let through_incompatible = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 15))
        .bundle("1.2.0", |_| {})
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    check(
        "through a bundle that does not run now",
        &through_incompatible,
        "1.0.0",
        None,
        Want::NoPath(Some(("1.2.0", false))),
    );

    // versionRange excludes the bundle that would run on 4.17.
    let in_range = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("1.2.0", |_| {})
        .chain("stable", &["1.0.0", "1.1.0", "1.2.0"])
        .catalog();
    check(
        "versionRange",
        &in_range,
        "1.0.0",
        Some("<1.2.0"),
        Want::NoPath(Some(("1.1.0", true))),
    );

    // A new major is never a pre-update hop (the pin of a minor update stays in the major).
    let major = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("2.0.0", |_| {})
        .chain("stable", &["1.0.0", "2.0.0"])
        .catalog();
    check("no new major", &major, "1.0.0", None, Want::NoPath(None));

    // A bundle with dependencies is never installed by POM, so never a hop.
    let dependencies = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", requires_package("other", ">=1.0.0"))
        .chain("stable", &["1.0.0", "1.1.0"])
        .catalog();
    check(
        "dependencies",
        &dependencies,
        "1.0.0",
        None,
        Want::NoPath(None),
    );

    // Nothing newer at all.
    let alone = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .chain("stable", &["1.0.0"])
        .catalog();
    check("nothing newer", &alone, "1.0.0", None, Want::NoPath(None));

    // Reachable but every reachable bundle stops at 4.16: the nearest names what it lacks.
    let capped = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .chain("stable", &["1.0.0", "1.1.0"])
        .catalog();
    let catalogs: Vec<CatalogInput<'_>> = vec![("main", 0, &capped)];
    let answer =
        pre_update_path(&request(&catalogs, "1.0.0", "4.16.3", None), &v("4.17.0")).unwrap();
    let PreUpdate::NoPath(no) = answer else {
        panic!("{answer:?}")
    };
    let text = no.to_string();
    assert!(
        text.contains("op.v1.1.0") && text.contains("4.17"),
        "the message names the nearest bundle and the version: {text}"
    );
}

#[test]
fn the_path_is_bounded_and_terminates_on_a_cycle() {
    // 1.1.0 and 1.2.0 replace each other (a broken catalog); 1.0.0 leads into the cycle.
    let cycle = PackageBuilder::new(PKG)
        .bundle("1.0.0", max_ocp(4, 16))
        .bundle("1.1.0", max_ocp(4, 16))
        .bundle("1.2.0", max_ocp(4, 16))
        .entry("stable", "1.0.0", None, &[], None)
        .entry("stable", "1.1.0", Some("1.0.0"), &["1.2.0"], None)
        .entry("stable", "1.2.0", Some("1.1.0"), &[], None)
        .catalog();
    check(
        "cycle",
        &cycle,
        "1.0.0",
        None,
        Want::NoPath(Some(("1.2.0", true))),
    );

    // A long chain: 200 bundles capped at 4.16, the last uncapped; the path walks all of them.
    let versions: Vec<String> = (0..=200).map(|i| format!("1.{i}.0")).collect();
    let refs: Vec<&str> = versions.iter().map(String::as_str).collect();
    let mut builder = PackageBuilder::new(PKG);
    for (i, version) in refs.iter().enumerate() {
        builder = if i == refs.len() - 1 {
            builder.bundle(version, |_| {})
        } else {
            builder.bundle(version, max_ocp(4, 16))
        };
    }
    let long = builder.chain("stable", &refs).catalog();
    let catalogs: Vec<CatalogInput<'_>> = vec![("main", 0, &long)];
    let answer =
        pre_update_path(&request(&catalogs, "1.0.0", "4.16.3", None), &v("4.17.0")).unwrap();
    let PreUpdate::Path(hops) = answer else {
        panic!("{answer:?}")
    };
    assert_eq!(hops.len(), 200);
    assert_eq!(hops.last().unwrap().version, v("1.200.0"));
}
