//! `pomctl graph`, `completions`, `man` and `--version`: the built binary.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::process::{Command, Output};

/// `p`: 1.0.0 <- 1.1.0 <- 2.0.0 in `stable`.
const SMALL: &str = r#"
{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[
  {"name":"p.v1.0.0"},
  {"name":"p.v1.1.0","replaces":"p.v1.0.0"},
  {"name":"p.v2.0.0","replaces":"p.v1.1.0"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"q/p@sha256:10",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.1.0","image":"q/p@sha256:11",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.1.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v2.0.0","image":"q/p@sha256:20",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}
"#;

fn pomctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .args(args)
        .output()
        .unwrap()
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

fn catalog() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    std::fs::write(&path, SMALL).unwrap();
    let text = path.display().to_string();
    (dir, text)
}

const MINOR: [&str; 8] = [
    "--package",
    "p",
    "--installed",
    "p.v1.0.0",
    "--cluster-version",
    "4.16.3",
    "--cluster-target",
    "4.17.0",
];

#[test]
fn graph_draws_mermaid_and_dot() {
    let (_dir, catalog) = catalog();
    let mut args = vec!["graph", "--catalog", &catalog];
    args.extend(MINOR);
    let out = pomctl(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let mermaid = text(&out.stdout);
    assert!(mermaid.starts_with("flowchart LR"), "{mermaid}");
    // One hop within the major, 2.0.0 refused by the pin.
    assert!(mermaid.contains("p.v1.1.0<br/>hop 1"), "{mermaid}");
    assert!(mermaid.contains("outside pin"), "{mermaid}");

    args.extend(["-o", "dot"]);
    let out = pomctl(&args);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dot = text(&out.stdout);
    assert!(dot.starts_with("digraph upgrade_graph {"), "{dot}");
    assert_eq!(dot.matches("style=bold").count(), 1, "{dot}");
}

#[test]
fn graph_svg_without_graphviz_is_a_clear_error() {
    let (_dir, catalog) = catalog();
    let empty = tempfile::tempdir().unwrap();
    let mut args = vec!["graph", "--catalog", &catalog];
    args.extend(MINOR);
    args.extend(["-o", "svg"]);
    let out = Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .args(&args)
        .env("PATH", empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.contains("`dot`") && err.contains("-o dot"), "{err}");
    assert!(out.stdout.is_empty());
}

#[test]
fn graph_of_an_unknown_channel_is_bad_input() {
    let (_dir, catalog) = catalog();
    let out = pomctl(&[
        "graph",
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--channel",
        "Stable",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("did you mean \"stable\""));
}

#[test]
fn bash_completion_knows_the_subcommands_and_flags() {
    let out = pomctl(&["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = text(&out.stdout);
    for word in [
        "resolve",
        "graph",
        "render",
        "plan",
        "status",
        "completions",
        "man",
        "--cluster-target",
        "--graph-format",
    ] {
        assert!(script.contains(word), "{word} missing");
    }
    assert!(script.contains("complete -F"), "a bash completion script");
}

#[test]
fn man_pages_are_written_and_render() {
    let dir = tempfile::tempdir().unwrap();
    let out = pomctl(&["man", "--out", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for page in [
        "pomctl.1",
        "pomctl-graph.1",
        "pomctl-plan.1",
        "pomctl-resolve.1",
    ] {
        let roff = std::fs::read_to_string(dir.path().join(page)).unwrap();
        assert!(roff.contains(".TH "), "{page}");
        assert!(roff.contains(".SH NAME"), "{page}");
    }
    let main = std::fs::read_to_string(dir.path().join("pomctl.1")).unwrap();
    assert!(main.contains("graph"));
    // Rendered by groff when it is installed (it is a man(7) page, not just text).
    let rendered = Command::new("groff")
        .args(["-man", "-Tutf8", "-ww"])
        .arg(dir.path().join("pomctl-graph.1"))
        .output();
    if let Ok(rendered) = rendered {
        assert!(rendered.status.success(), "{}", text(&rendered.stderr));
        let page = text(&rendered.stdout);
        assert!(page.contains("--cluster-version"), "{page}");
    }
    // Without --out: the main page on stdout.
    let out = pomctl(&["man"]);
    assert!(out.status.success());
    assert!(
        text(&out.stdout).starts_with(".ie"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn version_names_what_it_was_tested_against() {
    let out = pomctl(&["--version"]);
    assert!(out.status.success());
    let version = text(&out.stdout);
    assert!(
        version.starts_with(&format!("pomctl {}", env!("CARGO_PKG_VERSION"))),
        "{version}"
    );
    assert!(version.contains("Kubernetes 1."), "{version}");
    assert!(version.contains("OpenShift"), "{version}");
}

/// `docs/graph-example.md` shows a drawing and the command that drew it: running that command
/// from the checkout's root must still draw exactly that (a stale example fails here).
#[test]
fn the_committed_example_is_what_its_command_draws() {
    #[path = "../../resolver/tests/shared_support/mod.rs"]
    mod shared_support;
    if shared_support::shared_dir("real").is_none() {
        return;
    }
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let doc = std::fs::read_to_string(root.join("docs/graph-example.md")).unwrap();
    let block = |fence: &str| -> String {
        let start = doc.find(fence).unwrap() + fence.len();
        let end = start + doc[start..].find("\n```").unwrap();
        doc[start..end].trim_start_matches('\n').to_owned()
    };
    let command = block("```sh\n");
    let words: Vec<&str> = command.split_whitespace().collect();
    assert_eq!(words[..2], ["pomctl", "graph"], "{command}");
    let out = Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .args(&words[1..])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).trim_end(),
        block("```mermaid\n").trim_end(),
        "regenerate docs/graph-example.md with the command it shows"
    );
}
