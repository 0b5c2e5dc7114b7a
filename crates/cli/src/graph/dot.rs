//! Graphviz DOT text for [`UpgradeGraph`]s (`dot -Tsvg` turns it into a picture).
//!
//! One `digraph` with a `cluster_` subgraph per graph. Hops are bold, `skipRange` edges dashed;
//! a rejected node's tooltip carries the resolver's full reason (SVG viewers show it on hover).

use std::fmt::Write as _;

use super::{EdgeKind, UpgradeGraph, caption, edge_label, heading, label_lines, look};

/// Renders `graphs` as one DOT digraph.
pub fn render(graphs: &[UpgradeGraph]) -> String {
    let mut out = String::from(
        "digraph upgrade_graph {\n  rankdir=LR;\n  fontname=\"Helvetica\";\n  \
         node [shape=box, style=\"rounded,filled\", fontname=\"Helvetica\", fontsize=10];\n  \
         edge [fontname=\"Helvetica\", fontsize=9];\n",
    );
    for (g, graph) in graphs.iter().enumerate() {
        let _ = writeln!(out, "  subgraph cluster_{g} {{");
        let _ = writeln!(
            out,
            "    label=\"{}\\n{}\";\n    labelloc=t;\n    labeljust=l;",
            escape(&heading(graph)),
            escape(&caption(graph))
        );
        for (n, node) in graph.nodes.iter().enumerate() {
            let look = look(node);
            let label = label_lines(node)
                .iter()
                .map(|line| escape(line))
                .collect::<Vec<_>>()
                .join("\\n");
            let style = if look.dashed {
                "rounded,filled,dashed"
            } else {
                "rounded,filled"
            };
            let tooltip = node
                .rejection
                .as_ref()
                .map_or_else(|| node.name.clone(), ToString::to_string);
            let _ = writeln!(
                out,
                "    g{g}n{n} [label=\"{label}\", style=\"{style}\", fillcolor=\"{}\", color=\"{}\", \
                 fontcolor=\"{}\", penwidth={}, tooltip=\"{}\"];",
                look.fill,
                look.stroke,
                look.text,
                if look.thick { "2.5" } else { "1" },
                escape(&tooltip)
            );
        }
        for edge in &graph.edges {
            let style = if edge.hop.is_some() {
                "bold"
            } else if edge.kinds == [EdgeKind::SkipRange] {
                "dashed"
            } else {
                "solid"
            };
            let color = if edge.hop.is_some() {
                "#198754"
            } else {
                "#6c757d"
            };
            let _ = writeln!(
                out,
                "    g{g}n{} -> g{g}n{} [label=\"{}\", style={style}, color=\"{color}\"{}];",
                edge.from,
                edge.to,
                escape(&edge_label(edge)),
                if edge.hop.is_some() {
                    ", penwidth=2.5"
                } else {
                    ""
                }
            );
        }
        out.push_str("  }\n");
    }
    out.push_str("}\n");
    out
}

/// DOT double-quoted strings: backslash and quote are escaped, newlines become `\n`.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}
