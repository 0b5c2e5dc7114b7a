//! Table tests of the graph model through the offline pipeline (`Offline` → `plan_hops` →
//! `for_request`), on a small catalog and one real catalog; and structural checks of the two
//! renderers (no snapshots: what is asserted is what a reader relies on).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use super::*;
use crate::cmd::graph::offline_graph;
use crate::cmd::resolve::{Offline, Query};

use crate::shared_support;

/// `p`, channel `stable` (edges read upwards):
/// 0.9.0 (absent) <-replaces- 1.0.0 (max 4.16) <- 1.1.0 (max 4.17) <- 1.2.0 (max 4.17)
/// <- 1.2.5 (needs etcd) ; 1.2.0 <- 1.3.0 (max 4.16) <- 2.0.0 (skips 1.2.0 and 1.2.5)
const SMALL: &str = r#"
{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[
  {"name":"p.v1.0.0","replaces":"p.v0.9.0"},
  {"name":"p.v1.1.0","replaces":"p.v1.0.0"},
  {"name":"p.v1.2.0","replaces":"p.v1.1.0"},
  {"name":"p.v1.2.5","replaces":"p.v1.2.0"},
  {"name":"p.v1.3.0","replaces":"p.v1.2.0"},
  {"name":"p.v2.0.0","replaces":"p.v1.3.0","skips":["p.v1.2.0","p.v1.2.5"]}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"q/p@sha256:10",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.1.0","image":"q/p@sha256:11",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.1.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.2.0","image":"q/p@sha256:12",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.2.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.2.5","image":"q/p@sha256:125",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.2.5"}},
               {"type":"olm.package.required","value":{"packageName":"etcd","versionRange":">=3.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.3.0","image":"q/p@sha256:13",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.3.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"p","name":"p.v2.0.0","image":"q/p@sha256:20",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}
"#;

struct Case {
    installed: Option<&'static str>,
    installed_version: Option<&'static str>,
    cluster: Option<(&'static str, &'static str)>,
}

fn query(catalog: PathBuf, package: &str, channel: Option<&str>, case: &Case) -> Query {
    Query {
        catalog,
        package: package.to_owned(),
        channel: channel.map(str::to_owned),
        installed: case.installed.map(str::to_owned),
        installed_version: case.installed_version.map(str::to_owned),
        version_range: None,
        steady_state_range: None,
        cluster_version: case.cluster.map(|c| c.0.to_owned()),
        cluster_target: case.cluster.map(|c| c.1.to_owned()),
        kube_version: None,
    }
}

fn small(case: &Case) -> UpgradeGraph {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    std::fs::write(&path, SMALL).unwrap();
    let offline = Offline::load(&query(path, "p", None, case)).unwrap();
    offline_graph(&offline).unwrap()
}

fn code(graph: &UpgradeGraph, name: &str) -> Option<&'static str> {
    graph
        .node(name)
        .unwrap_or_else(|| panic!("no node {name}"))
        .rejection
        .as_ref()
        .map(RejectReason::code)
}

fn edge<'g>(graph: &'g UpgradeGraph, from: &str, to: &str) -> Option<&'g Edge> {
    let index = |name: &str| graph.nodes.iter().position(|n| n.name == name);
    let (from, to) = (index(from)?, index(to)?);
    graph.edges.iter().find(|e| e.from == from && e.to == to)
}

#[test]
fn minor_update_walks_two_hops_and_says_why_it_stops() {
    let graph = small(&Case {
        installed: Some("p.v1.0.0"),
        installed_version: None,
        cluster: Some(("4.16.3", "4.17.0")),
    });
    assert_eq!(graph.path(), ["p.v1.1.0", "p.v1.2.0"]);
    assert_eq!(graph.stop, Stop::Settled);
    let pin = graph.pin.as_ref().unwrap();
    assert_eq!(pin.range, ">=1.0.0 <2.0.0-0", "the pin in force now");
    assert!(graph.node("p.v1.0.0").unwrap().installed);
    // Why not further, from where the walk ends (1.2.0):
    assert_eq!(
        code(&graph, "p.v1.3.0"),
        Some("MaxOpenShiftVersionTooLow"),
        "1.3.0 replaces 1.2.0 but cannot run on 4.17"
    );
    assert_eq!(code(&graph, "p.v1.2.5"), Some("HasDependencies"));
    assert_eq!(code(&graph, "p.v2.0.0"), Some("OutsidePin"));
    // The bundles on the walk carry no rejection; the one it passed is drawn as a hop.
    assert_eq!(code(&graph, "p.v1.1.0"), None);
    assert_eq!(code(&graph, "p.v1.0.0"), None);
    // The window: the minor pin admits every 1.x, not 2.0.0.
    let in_pin: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.in_pin)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(
        in_pin,
        ["p.v1.0.0", "p.v1.1.0", "p.v1.2.0", "p.v1.2.5", "p.v1.3.0"]
    );
    // Edges: hops on catalog edges, and the catalog's own edges.
    let hop1 = edge(&graph, "p.v1.0.0", "p.v1.1.0").unwrap();
    assert_eq!(
        (hop1.hop, hop1.kinds.as_slice()),
        (Some(1), &[EdgeKind::Replaces][..])
    );
    assert_eq!(edge(&graph, "p.v1.1.0", "p.v1.2.0").unwrap().hop, Some(2));
    assert_eq!(
        edge(&graph, "p.v1.2.0", "p.v2.0.0").unwrap().kinds,
        [EdgeKind::Skips]
    );
    assert_eq!(edge(&graph, "p.v1.2.0", "p.v1.3.0").unwrap().hop, None);
    assert!(edge(&graph, "p.v1.0.0", "p.v2.0.0").is_none());
    assert_eq!(graph.node("p.v1.3.0").unwrap().class(), NodeClass::Rejected);
    assert_eq!(graph.node("p.v1.2.0").unwrap().class(), NodeClass::Hop);
}

#[test]
fn steady_cluster_stays_and_refuses_by_the_first_failing_filter() {
    let graph = small(&Case {
        installed: Some("p.v1.0.0"),
        installed_version: None,
        cluster: Some(("4.16.3", "4.16.3")),
    });
    assert!(graph.path().is_empty());
    assert_eq!(graph.pin.as_ref().unwrap().range, "=1.0.0");
    // 1.1.0 replaces the installed bundle, so the pin is what refuses it; 1.2.0 is refused
    // earlier, by the successor filter.
    assert_eq!(code(&graph, "p.v1.1.0"), Some("OutsidePin"));
    assert_eq!(code(&graph, "p.v1.2.0"), Some("NotSuccessor"));
    assert_eq!(
        graph.node("p.v1.2.0").unwrap().class(),
        NodeClass::NotSuccessor
    );
    let in_pin: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.in_pin)
        .map(|n| n.name.as_str())
        .collect();
    assert_eq!(in_pin, ["p.v1.0.0"]);
}

#[test]
fn first_install_without_cluster_goes_to_the_head() {
    let graph = small(&Case {
        installed: None,
        installed_version: None,
        cluster: None,
    });
    assert_eq!(graph.path(), ["p.v2.0.0"]);
    assert!(graph.nodes.iter().all(|n| !n.installed));
    assert_eq!(graph.pin.as_ref().unwrap().reason.to_string(), "Unpinned");
    // Explained from where the walk ends (the head): every other bundle is behind it.
    for name in ["p.v1.0.0", "p.v1.1.0", "p.v1.2.0", "p.v1.2.5", "p.v1.3.0"] {
        assert_eq!(code(&graph, name), Some("NotSuccessor"), "{name}");
    }
    // No edge into the first install: nothing runs before it.
    assert!(graph.edges.iter().all(|e| e.hop.is_none()));
}

#[test]
fn an_installed_bundle_gone_from_the_catalog_is_drawn_with_its_edges() {
    let graph = small(&Case {
        installed: Some("p.v0.9.0"),
        installed_version: Some("0.9.0"),
        cluster: Some(("4.16.3", "4.16.3")),
    });
    let gone = graph.node("p.v0.9.0").unwrap();
    assert!(gone.installed && !gone.in_channel);
    assert!(look(gone).dashed);
    assert_eq!(
        edge(&graph, "p.v0.9.0", "p.v1.0.0").unwrap().kinds,
        [EdgeKind::Replaces]
    );
}

#[test]
fn no_candidate_keeps_what_runs_and_says_why_it_cannot_stay() {
    // 1.3.0 cannot run on 4.17 and 2.0.0 is another major: nothing to choose.
    let graph = small(&Case {
        installed: Some("p.v1.3.0"),
        installed_version: None,
        cluster: Some(("4.16.3", "4.17.0")),
    });
    assert_eq!(graph.stop, Stop::NoCandidate);
    assert!(graph.path().is_empty());
    assert_eq!(code(&graph, "p.v1.3.0"), Some("MaxOpenShiftVersionTooLow"));
    assert_eq!(code(&graph, "p.v2.0.0"), Some("OutsidePin"));
    assert_eq!(
        graph.node("p.v1.3.0").unwrap().class(),
        NodeClass::Installed
    );
}

#[test]
fn renderers_draw_every_node_and_edge_with_escaped_labels() {
    let graph = small(&Case {
        installed: Some("p.v1.0.0"),
        installed_version: None,
        cluster: Some(("4.16.3", "4.17.0")),
    });
    let graphs = [graph.clone(), graph.clone()];
    let hops = graph.edges.iter().filter(|e| e.hop.is_some()).count();

    let text = mermaid::render(&graphs);
    assert!(text.starts_with("flowchart LR\n"));
    assert_eq!(text.matches("  subgraph g").count(), 2);
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with("g0n") && l.contains("[\""))
            .count(),
        graph.nodes.len()
    );
    assert_eq!(text.matches(" ==>|").count(), 2 * hops);
    assert_eq!(
        text.matches("-->|").count() + text.matches("-.->|").count() + text.matches("==>|").count(),
        2 * graph.edges.len()
    );
    // Pins are escaped: no raw `<`/`>` inside a label other than the line breaks.
    for line in text.lines().filter(|l| l.contains("[\"")) {
        let label = line.replace("<br/>", "");
        let inner = &label[label.find("[\"").unwrap()..];
        assert!(!inner.contains('<') && !inner.contains('>'), "{line}");
    }
    assert!(
        text.contains("outside pin #gt;=1.2.0 #lt;2.0.0-0"),
        "{text}"
    );

    let text = dot::render(&graphs);
    assert!(text.starts_with("digraph upgrade_graph {"));
    assert_eq!(text.matches('{').count(), text.matches('}').count());
    assert_eq!(text.matches("subgraph cluster_").count(), 2);
    assert_eq!(
        text.lines()
            .filter(|l| l.trim_start().starts_with('g') && l.contains(" -> g"))
            .count(),
        2 * graph.edges.len()
    );
    assert_eq!(text.matches("style=bold").count(), 2 * hops);
    // The full reason travels as the tooltip.
    assert!(text.contains("olm.maxOpenShiftVersion is 4.16"), "{text}");
}

#[test]
fn svg_without_graphviz_names_the_program_and_the_way_around() {
    let err = svg::render(
        "digraph {}",
        std::ffi::OsStr::new("pomctl-test-no-such-dot"),
    )
    .unwrap_err();
    assert!(matches!(err, svg::SvgError::Missing { .. }), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("pomctl-test-no-such-dot") && text.contains("-o dot"),
        "{text}"
    );
}

#[test]
fn svg_through_graphviz_when_it_is_installed() {
    let Ok(svg) = svg::render("digraph { a -> b }", std::ffi::OsStr::new("dot")) else {
        // Graphviz is optional; without it the error path above is what runs.
        return;
    };
    assert!(String::from_utf8_lossy(&svg).contains("<svg"));
}

#[test]
fn real_catalog_patch_update_stays_in_its_minor() {
    let Some(root) = shared_support::shared_dir("real") else {
        return;
    };
    let catalog = root.join("stolostron__gatekeeper-operator-fbc/catalog-4-20");
    let case = Case {
        installed: Some("gatekeeper-operator-product.v3.17.0"),
        installed_version: None,
        cluster: Some(("4.20.1", "4.20.2")),
    };
    let q = query(
        catalog,
        "gatekeeper-operator-product",
        Some("stable"),
        &case,
    );
    let graph = offline_graph(&Offline::load(&q).unwrap()).unwrap();
    assert_eq!(graph.path(), ["gatekeeper-operator-product.v3.17.2"]);
    assert_eq!(graph.pin.as_ref().unwrap().range, ">=3.17.0 <3.18.0-0");
    for newer in ["v3.18.0", "v3.19.0", "v3.19.1", "v3.20.0", "v3.21.0"] {
        assert_eq!(
            code(&graph, &format!("gatekeeper-operator-product.{newer}")),
            Some("OutsidePin"),
            "{newer}"
        );
    }
    let in_pin: Vec<&str> = graph
        .nodes
        .iter()
        .filter(|n| n.in_pin)
        .map(|n| n.version.to_string())
        .map(|v| {
            if v.starts_with("3.17.") {
                "3.17"
            } else {
                "other"
            }
        })
        .collect();
    assert!(in_pin.iter().all(|v| *v == "3.17"), "{in_pin:?}");
    // Every entry has a skipRange over all earlier bundles; its edges are drawn only from
    // where the walk stands, so the drawing stays readable.
    let walked: Vec<usize> = graph
        .nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.installed || n.hop.is_some())
        .map(|(i, _)| i)
        .collect();
    for e in &graph.edges {
        if e.kinds.contains(&EdgeKind::SkipRange) {
            assert!(walked.contains(&e.from), "{e:?}");
        }
    }
    assert!(graph.nodes.iter().all(|n| n.skip_range.is_some()));
}
