//! Property tests of the selector: whatever the catalog, once something is installed the answer
//! is the installed bundle or a direct successor, it is inside the pin and the admin's range, and
//! it does not depend on the order of entries, blobs or catalogs.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pom_resolver::cluster::{ClusterPhase, PhaseKind};
use pom_resolver::fbc::model::{Catalog, ChannelEntry};
use pom_resolver::fbc::parse::parse_documents;
use pom_resolver::pin::PinReason;
use pom_resolver::range::VersionRange;
use pom_resolver::select::{InstalledBundle, PinPolicy, Resolution, ResolveRequest, resolve};
use pom_resolver::version::cmp_version_release;
use proptest::prelude::*;
use semver::Version;
use serde_json::json;

const PACKAGE: &str = "p";

/// A generated channel entry: bundle index, edges by index (an index past the end dangles).
#[derive(Debug, Clone)]
struct GenEntry {
    version: Version,
    replaces: Option<usize>,
    skips: Vec<usize>,
    skip_range: Option<String>,
    max_ocp: Option<u64>,
}

#[derive(Debug, Clone)]
struct Scenario {
    entries: Vec<GenEntry>,
    installed: Option<(usize, Option<Version>)>,
    phase: Option<PhaseKind>,
    version_range: Option<String>,
    permutation: Vec<usize>,
}

fn version() -> impl Strategy<Value = Version> {
    (
        1u64..3,
        0u64..4,
        0u64..4,
        prop::option::weighted(0.15, 1u64..3),
    )
        .prop_map(|(ma, mi, pa, pre)| {
            let text = match pre {
                Some(n) => format!("{ma}.{mi}.{pa}-rc.{n}"),
                None => format!("{ma}.{mi}.{pa}"),
            };
            Version::parse(&text).unwrap()
        })
}

fn scenario() -> impl Strategy<Value = Scenario> {
    prop::collection::vec(
        (
            version(),
            prop::option::of(0usize..14),
            prop::collection::vec(0usize..14, 0..3),
            prop::option::weighted(0.3, (version(), version())),
            prop::option::weighted(0.3, 15u64..19),
        ),
        1..12,
    )
    .prop_flat_map(|raw| {
        // A graph the parser accepts: a `replaces` chain by index (one head, nothing stranded,
        // no cycle; the tail may dangle) plus `skips` to older entries; versions in any order.
        let entries: Vec<GenEntry> = raw
            .into_iter()
            .enumerate()
            .map(|(i, (version, dangling, skips, range, max_ocp))| GenEntry {
                version,
                replaces: if i == 0 {
                    dangling.map(|d| d + 20)
                } else {
                    Some(i - 1)
                },
                skips: {
                    let mut skips: Vec<usize> = skips.into_iter().filter(|k| k + 1 < i).collect();
                    skips.sort_unstable();
                    skips.dedup();
                    skips
                },
                skip_range: range.map(|(a, b)| format!(">={a} <{b}")),
                max_ocp,
            })
            .collect();
        let n = entries.len();
        (
            Just(entries),
            prop::option::of((0..n + 2, prop::option::of(version()))),
            prop::option::of(prop_oneof![
                Just(PhaseKind::Steady),
                Just(PhaseKind::PatchUpgrade),
                Just(PhaseKind::MinorUpgrade),
                Just(PhaseKind::Rollback),
            ]),
            prop::option::weighted(
                0.4,
                prop_oneof![
                    Just(">=1.1.0".to_owned()),
                    Just("<2.0.0".to_owned()),
                    Just("~1.2".to_owned()),
                    Just(">=1.0.0-0".to_owned()),
                    Just("!=1.3.3".to_owned()),
                ],
            ),
            Just((0..n).collect::<Vec<_>>()).prop_shuffle(),
        )
    })
    .prop_map(
        |(entries, installed, phase, version_range, permutation)| Scenario {
            entries,
            installed,
            phase,
            version_range,
            permutation,
        },
    )
}

fn bundle_name(index: usize) -> String {
    format!("p.b{index:02}")
}

/// The scenario as FBC JSON blobs (one per bundle, one channel, one package), in `order`.
fn blobs(s: &Scenario, order: &[usize]) -> Vec<(String, Vec<u8>)> {
    let entries: Vec<_> = order
        .iter()
        .map(|&i| {
            let e = &s.entries[i];
            let mut entry = json!({"name": bundle_name(i)});
            if let Some(r) = e.replaces {
                entry["replaces"] = json!(bundle_name(r));
            }
            if !e.skips.is_empty() {
                entry["skips"] = json!(e.skips.iter().map(|k| bundle_name(*k)).collect::<Vec<_>>());
            }
            if let Some(range) = &e.skip_range {
                entry["skipRange"] = json!(range);
            }
            entry
        })
        .collect();
    let mut docs = vec![
        json!({"schema": "olm.package", "name": PACKAGE, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "package": PACKAGE, "name": "stable", "entries": entries}),
    ];
    for &i in order {
        let e = &s.entries[i];
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": PACKAGE, "version": e.version.to_string()}}),
        ];
        if let Some(minor) = e.max_ocp {
            properties
                .push(json!({"type": "olm.maxOpenShiftVersion", "value": format!("4.{minor}")}));
        }
        docs.push(json!({"schema": "olm.bundle", "package": PACKAGE, "name": bundle_name(i), "image": format!("img/{i}"), "properties": properties}));
    }
    // One document per blob. For any order but the identity, the package and channel blobs come
    // last, so the parser sees bundles before the package that owns them.
    let identity = order.iter().enumerate().all(|(k, i)| k == *i);
    if !identity {
        docs.rotate_left(2);
    }
    docs.iter()
        .enumerate()
        .map(|(k, doc)| (format!("doc{k:03}.json"), doc.to_string().into_bytes()))
        .collect()
}

fn catalog(s: &Scenario, order: &[usize]) -> Catalog {
    parse_documents(blobs(s, order))
        .unwrap_or_else(|err| panic!("generated catalog refused: {err}"))
}

fn installed(s: &Scenario) -> Option<InstalledBundle> {
    s.installed
        .as_ref()
        .map(|(index, version)| InstalledBundle {
            name: bundle_name(*index),
            version: s
                .entries
                .get(*index)
                .map(|e| e.version.clone())
                .or_else(|| version.clone())
                .unwrap_or_else(|| Version::new(1, 0, 0)),
        })
}

fn run(s: &Scenario, cat: &Catalog) -> Result<Resolution, String> {
    run_with(s, cat, PinPolicy::FollowCluster)
}

fn run_with(s: &Scenario, cat: &Catalog, pin_policy: PinPolicy) -> Result<Resolution, String> {
    let cats = [("c", 0, cat)];
    let req = ResolveRequest {
        catalogs: &cats,
        package: PACKAGE,
        channel: None,
        installed: installed(s),
        version_range: s
            .version_range
            .as_deref()
            .map(|r| VersionRange::parse(r).unwrap()),
        steady_state_range: None,
        cluster: s.phase.map(|kind| ClusterPhase {
            kind,
            current: Version::new(4, 16, 2),
            target: match kind {
                PhaseKind::Steady => Version::new(4, 16, 2),
                PhaseKind::PatchUpgrade => Version::new(4, 16, 5),
                PhaseKind::MinorUpgrade => Version::new(4, 17, 0),
                PhaseKind::Rollback => Version::new(4, 16, 1),
            },
        }),
        kube_version: None,
        pin_policy,
    };
    resolve(&req).map_err(|err| err.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn never_a_non_successor_never_outside_pin_or_range(s in scenario()) {
        let cat = catalog(&s, &(0..s.entries.len()).collect::<Vec<_>>());
        let Ok(resolution) = run(&s, &cat) else { return Ok(()) };
        let package = &cat.packages[PACKAGE];
        let chosen = &package.bundles[&resolution.bundle.name];
        let installed = installed(&s);

        if let Some(installed) = &installed {
            if !resolution.pin.is_rollback_pivot() {
                let entry: &ChannelEntry = package.channels["stable"]
                    .entries
                    .iter()
                    .find(|e| e.name == chosen.name)
                    .unwrap();
                let itself = chosen.name == installed.name || chosen.version == installed.version;
                let successor = entry.replaces.as_deref() == Some(installed.name.as_str())
                    || entry.skips.contains(&installed.name)
                    || entry.skip_range.as_ref().is_some_and(|r| r.contains(&installed.version));
                prop_assert!(itself || successor, "{} is not a successor of {}", chosen.name, installed.name);
            }
            prop_assert_eq!(resolution.stays, chosen.name == installed.name);
        }
        let in_pin = resolution.pin.admits(&chosen.version, installed.as_ref().map(|i| &i.version));
        let install_prerelease = resolution.pin.reason == PinReason::Install
            && !chosen.version.pre.is_empty()
            && s.version_range.is_some();
        prop_assert!(in_pin || install_prerelease, "{} outside pin {}", chosen.version, resolution.pin.range);
        if let Some(range) = &s.version_range {
            prop_assert!(VersionRange::parse(range).unwrap().matches(&chosen.version));
        }
        prop_assert!(resolution.rejected.iter().all(|r| r.bundle != chosen.name));
    }

    /// Without a pin the answer is OLM v1's: the highest of the installed bundle itself and its
    /// direct successors that the admin's range admits (pre-releases included unless the range
    /// excludes them), computed here independently of the selector. Generated bundles declare
    /// no dependency and no deprecation, and without a cluster `maxOpenShiftVersion` is not
    /// judged, so nothing else can refuse a bundle.
    #[test]
    fn unpinned_is_the_highest_successor_in_range(mut s in scenario()) {
        s.phase = None;
        let cat = catalog(&s, &(0..s.entries.len()).collect::<Vec<_>>());
        let package = &cat.packages[PACKAGE];
        let installed = installed(&s);
        let range = s.version_range.as_deref().map(|r| VersionRange::parse(r).unwrap());
        let expected = package.channels["stable"]
            .entries
            .iter()
            .filter_map(|entry| package.bundles.get(&entry.name).map(|bundle| (entry, bundle)))
            .filter(|(entry, bundle)| match &installed {
                None => true,
                Some(installed) => {
                    bundle.name == installed.name
                        || bundle.version == installed.version
                        || entry.replaces.as_deref() == Some(installed.name.as_str())
                        || entry.skips.contains(&installed.name)
                        || entry.skip_range.as_ref().is_some_and(|r| r.contains(&installed.version))
                }
            })
            .filter(|(_, bundle)| range.as_ref().is_none_or(|r| r.matches(&bundle.version)))
            .map(|(_, bundle)| bundle.version.clone())
            .max_by(cmp_version_release);
        let answer = run_with(&s, &cat, PinPolicy::Unpinned);
        match (expected, answer) {
            (None, Err(_)) => {}
            (Some(version), Ok(resolution)) => {
                prop_assert_eq!(&resolution.bundle.version, &version);
                prop_assert_eq!(resolution.pin.reason, PinReason::Unpinned);
            }
            (expected, answer) => {
                prop_assert!(false, "expected {:?}, resolved {:?}", expected, answer.map(|r| r.bundle.version));
            }
        }
    }

    #[test]
    fn the_answer_does_not_depend_on_input_order(s in scenario()) {
        let sorted = catalog(&s, &(0..s.entries.len()).collect::<Vec<_>>());
        let shuffled = catalog(&s, &s.permutation);
        prop_assert_eq!(run(&s, &sorted), run(&s, &shuffled));
    }

    #[test]
    fn catalog_order_does_not_matter(s in scenario()) {
        let a = catalog(&s, &(0..s.entries.len()).collect::<Vec<_>>());
        let b = catalog(&s, &s.permutation);
        let forward = [("a", 1, &a), ("b", 0, &b)];
        let backward = [("b", 0, &b), ("a", 1, &a)];
        let request = |cats| ResolveRequest {
            catalogs: cats,
            package: PACKAGE,
            channel: None,
            installed: installed(&s),
            version_range: None,
            steady_state_range: None,
            cluster: None,
            kube_version: None,
            pin_policy: PinPolicy::FollowCluster,
        };
        let one = resolve(&request(&forward)).map_err(|e| e.to_string());
        let two = resolve(&request(&backward)).map_err(|e| e.to_string());
        prop_assert_eq!(&one, &two);
        if let Ok(resolution) = one {
            prop_assert_eq!(resolution.bundle.catalog.as_str(), "a", "the higher priority wins");
        }
    }
}
