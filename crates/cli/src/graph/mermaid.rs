//! Mermaid flowchart text for [`UpgradeGraph`]s: renders on GitHub inside a ```` ```mermaid ````
//! block, so a graph can be pasted into an issue or committed in docs as is.
//!
//! One `flowchart LR` with a subgraph per graph (a live plan draws every PlatformOperator in
//! one picture). Hops are thick arrows, `skipRange` edges dotted, other catalog edges plain.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{UpgradeGraph, caption, edge_label, heading, label_lines, look};

/// Renders `graphs` as one Mermaid flowchart.
pub fn render(graphs: &[UpgradeGraph]) -> String {
    let mut out = String::from("flowchart LR\n");
    let mut classes: BTreeMap<String, String> = BTreeMap::new();
    let mut assignments = String::new();
    for (g, graph) in graphs.iter().enumerate() {
        let _ = writeln!(out, "  subgraph g{g}[\"{}\"]", escape(&heading(graph)));
        let _ = writeln!(out, "    direction LR");
        let _ = writeln!(
            out,
            "    g{g}caption[\"{}\"]:::caption",
            escape(&caption(graph))
        );
        for (n, node) in graph.nodes.iter().enumerate() {
            let label = label_lines(node)
                .iter()
                .map(|line| escape(line))
                .collect::<Vec<_>>()
                .join("<br/>");
            let _ = writeln!(out, "    g{g}n{n}[\"{label}\"]");
            let look = look(node);
            let class = format!(
                "{:?}{}{}",
                node.class(),
                if look.thick { "InPin" } else { "" },
                if look.dashed { "Gone" } else { "" }
            );
            classes.entry(class.clone()).or_insert_with(|| {
                let mut def = format!(
                    "fill:{},stroke:{},color:{},stroke-width:{}",
                    look.fill,
                    look.stroke,
                    look.text,
                    if look.thick { "3px" } else { "1px" }
                );
                if look.dashed {
                    def.push_str(",stroke-dasharray:5 5");
                }
                def
            });
            let _ = writeln!(assignments, "  class g{g}n{n} {class}");
        }
        let _ = writeln!(out, "  end");
        for edge in &graph.edges {
            let arrow = if edge.hop.is_some() {
                "==>"
            } else if edge.kinds == [super::EdgeKind::SkipRange] {
                "-.->"
            } else {
                "-->"
            };
            let _ = writeln!(
                out,
                "  g{g}n{} {arrow}|\"{}\"| g{g}n{}",
                edge.from,
                escape(&edge_label(edge)),
                edge.to
            );
        }
    }
    out.push_str(&assignments);
    for (class, def) in &classes {
        let _ = writeln!(out, "  classDef {class} {def}");
    }
    out.push_str("  classDef caption fill:none,stroke:none,color:#495057\n");
    out
}

/// Mermaid labels are quoted strings where `"` ends the label and `<`/`>` are read as HTML:
/// entity codes keep pins like `>=1.2.3 <1.3.0-0` intact.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '"' => out.push_str("#quot;"),
            '<' => out.push_str("#lt;"),
            '>' => out.push_str("#gt;"),
            '\n' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}
