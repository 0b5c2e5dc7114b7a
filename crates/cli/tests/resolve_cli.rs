//! `pomctl resolve` end to end: the built binary on small catalogs written to a tempdir and on a
//! real catalog from `/work/shared/testdata/real`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

// One policy for tests reading ../shared (fail in CI, skip visibly elsewhere), kept with the
// resolver's tests.
#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

use std::process::{Command, Output};

use serde_json::Value;

/// `p`: 1.0.0 (max 4.16) <- 1.1.0 (max 4.17) <- 1.2.0 (needs etcd) in `stable`; 2.0.0 skips 1.1.0.
const SMALL: &str = r#"
{"schema":"olm.package","name":"p","defaultChannel":"stable"}
{"schema":"olm.channel","package":"p","name":"stable","entries":[
  {"name":"p.v1.0.0"},
  {"name":"p.v1.1.0","replaces":"p.v1.0.0"},
  {"name":"p.v1.2.0","replaces":"p.v1.1.0"},
  {"name":"p.v2.0.0","replaces":"p.v1.2.0","skips":["p.v1.1.0"]}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.0.0","image":"quay.example/p@sha256:10",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.0.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.16"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.1.0","image":"quay.example/p@sha256:11",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.1.0"}},
               {"type":"olm.maxOpenShiftVersion","value":"4.17"}]}
{"schema":"olm.bundle","package":"p","name":"p.v1.2.0","image":"quay.example/p@sha256:12",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"1.2.0"}},
               {"type":"olm.package.required","value":{"packageName":"etcd","versionRange":">=3.0.0"}}]}
{"schema":"olm.bundle","package":"p","name":"p.v2.0.0","image":"quay.example/p@sha256:20",
 "properties":[{"type":"olm.package","value":{"packageName":"p","version":"2.0.0"}}]}
"#;

fn pomctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .arg("resolve")
        .args(args)
        .output()
        .unwrap()
}

fn small_catalog() -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    std::fs::write(&path, SMALL).unwrap();
    let text = path.display().to_string();
    (dir, text)
}

fn stdout_json(output: &Output) -> Value {
    assert!(
        output.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

#[test]
fn install_prints_the_bundle_the_pin_and_the_rejections() {
    let (_dir, catalog) = small_catalog();
    let out = pomctl(&["--catalog", &catalog, "--package", "p"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(text.contains("bundle:  p.v2.0.0 (2.0.0)"), "{text}");
    assert!(
        text.contains("pin:     * (Unpinned)"),
        "no --cluster-version, no pin: {text}"
    );
    assert!(
        text.contains("p.v1.2.0 (1.2.0): declares dependencies"),
        "{text}"
    );
}

#[test]
fn json_output_with_a_cluster_has_upgradeable() {
    let (_dir, catalog) = small_catalog();
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v1.0.0",
        "--cluster-version",
        "4.16.2",
        "--cluster-target",
        "4.17.0",
        "-o",
        "json",
    ]);
    let json = stdout_json(&out);
    // Minor update to 4.17: pin >=1.0.0 <2.0.0-0; 1.1.0 replaces 1.0.0 and supports 4.17.
    assert_eq!(json["bundle"]["name"], "p.v1.1.0");
    assert_eq!(json["bundle"]["version"], "1.1.0");
    assert_eq!(json["pin"]["range"], ">=1.0.0 <2.0.0-0");
    assert_eq!(json["pin"]["reason"], "MinorUpgrade");
    assert_eq!(json["stays"], false);
    // After the update, on 4.17, 1.1.0 (max 4.17) blocks 4.18; 2.0.0 skips 1.1.0 and has no max.
    assert_eq!(json["upgradeable"]["status"], "False");
    assert_eq!(
        json["upgradeable"]["reason"],
        "IncompatibleOperatorsInstalled"
    );
    let message = json["upgradeable"]["message"].as_str().unwrap();
    assert!(
        message.contains("p.v2.0.0") && message.contains("\"=2.0.0\""),
        "{message}"
    );
    let rejected = json["rejected"].as_array().unwrap();
    let codes: Vec<(&str, &str)> = rejected
        .iter()
        .map(|r| (r["bundle"].as_str().unwrap(), r["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            ("p.v1.0.0", "MaxOpenShiftVersionTooLow"),
            ("p.v1.2.0", "NotSuccessor"),
            ("p.v2.0.0", "NotSuccessor")
        ]
    );
    assert!(
        rejected
            .iter()
            .all(|r| r["reason"].as_str().is_some_and(|s| !s.is_empty()))
    );
}

/// §9: without `--cluster-version` there is no cluster pin; the answer is OLM v1's, the highest
/// direct successor (2.0.0 skips 1.1.0; 1.2.0 replaces it but needs etcd), and no verdict.
#[test]
fn without_cluster_version_there_is_no_pin() {
    let (_dir, catalog) = small_catalog();
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v1.1.0",
        "-o",
        "json",
    ]);
    let json = stdout_json(&out);
    assert_eq!(json["bundle"]["name"], "p.v2.0.0");
    assert_eq!(json["stays"], false);
    assert_eq!(json["pin"]["range"], "*");
    assert_eq!(json["pin"]["reason"], "Unpinned");
    assert!(json.get("upgradeable").is_none());
    let codes: Vec<(&str, &str)> = json["rejected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| (r["bundle"].as_str().unwrap(), r["code"].as_str().unwrap()))
        .collect();
    assert_eq!(
        codes,
        [
            ("p.v1.0.0", "NotSuccessor"),
            ("p.v1.2.0", "HasDependencies")
        ]
    );
    // --version-range still bounds it, as in OLM v1.
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v1.1.0",
        "--version-range",
        "<2.0.0",
        "-o",
        "json",
    ]);
    let json = stdout_json(&out);
    assert_eq!(json["bundle"]["name"], "p.v1.1.0");
    assert_eq!(json["stays"], true);
}

#[test]
fn steady_cluster_installed_stays_with_an_exact_pin() {
    let (_dir, catalog) = small_catalog();
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v1.1.0",
        "--cluster-version",
        "4.16.2",
        "-o",
        "json",
    ]);
    let json = stdout_json(&out);
    assert_eq!(json["bundle"]["name"], "p.v1.1.0");
    assert_eq!(json["stays"], true);
    assert_eq!(json["pin"]["range"], "=1.1.0");
    assert_eq!(json["pin"]["reason"], "Steady");
    assert_eq!(json["upgradeable"]["status"], "True");
}

/// Only bundle-level deprecation ranks (as OLM v1); package and channel deprecations are
/// reported beside the chosen bundle.
#[test]
fn deprecations_are_reported_and_only_bundle_level_ranks() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("catalog.json");
    let deprecations = r#"
{"schema":"olm.deprecations","package":"p","entries":[
  {"reference":{"schema":"olm.package"},"message":"p is replaced by q"},
  {"reference":{"schema":"olm.channel","name":"stable"},"message":"stable ends"},
  {"reference":{"schema":"olm.bundle","name":"p.v2.0.0"},"message":"2.0.0 loses data"}]}
"#;
    std::fs::write(&path, format!("{SMALL}{deprecations}")).unwrap();
    let catalog = path.display().to_string();
    let out = pomctl(&["--catalog", &catalog, "--package", "p", "-o", "json"]);
    let json = stdout_json(&out);
    assert_eq!(
        json["bundle"]["name"], "p.v1.1.0",
        "1.2.0 needs etcd, 2.0.0 is deprecated"
    );
    assert_eq!(json["deprecations"]["bundle"], Value::Null);
    assert_eq!(json["deprecations"]["channel"], "stable ends");
    assert_eq!(json["deprecations"]["package"], "p is replaced by q");
    let out = pomctl(&["--catalog", &catalog, "--package", "p"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("channel deprecated: stable ends")
            && text.contains("package deprecated: p is replaced by q"),
        "{text}"
    );
}

#[test]
fn no_solution_exits_1_with_reasons_on_stderr() {
    let (_dir, catalog) = small_catalog();
    // Steady override to 1.2.0 only: 1.2.0 is a direct successor of 1.1.0 but needs etcd.
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v1.1.0",
        "--cluster-version",
        "4.17.0",
        "--steady-state-range",
        "=1.2.0",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("keeping the installed bundle p.v1.1.0"),
        "{stderr}"
    );
    assert!(
        stderr.contains("olm.package.required etcd >=3.0.0"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn bad_input_exits_2() {
    let (_dir, catalog) = small_catalog();
    let cases: [&[&str]; 7] = [
        &["--catalog", &catalog, "--package", "q"],
        &[
            "--catalog",
            &catalog,
            "--package",
            "p",
            "--channel",
            "Stable",
        ],
        &[
            "--catalog",
            &catalog,
            "--package",
            "p",
            "--version-range",
            ">=>1",
        ],
        &[
            "--catalog",
            &catalog,
            "--package",
            "p",
            "--installed",
            "p.v0.9.0",
        ],
        &[
            "--catalog",
            &catalog,
            "--package",
            "p",
            "--cluster-version",
            "4.16",
        ],
        &["--catalog", "/nonexistent/catalog", "--package", "p"],
        // A steady-state range replaces the steady pin, which needs a cluster.
        &[
            "--catalog",
            &catalog,
            "--package",
            "p",
            "--installed",
            "p.v1.1.0",
            "--steady-state-range",
            "=1.2.0",
        ],
    ];
    for args in cases {
        let out = pomctl(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(!out.stderr.is_empty());
    }
    // An installed bundle missing from the catalog is fine with its version.
    let out = pomctl(&[
        "--catalog",
        &catalog,
        "--package",
        "p",
        "--installed",
        "p.v0.9.0",
        "--installed-version",
        "0.9.0",
    ]);
    assert_eq!(out.status.code(), Some(1), "nothing replaces p.v0.9.0");
}

#[test]
fn real_catalog_minor_update() {
    let Some(root) = shared_support::shared_dir("real") else {
        return;
    };
    let catalog =
        root.join("redhat-openshift-ecosystem__community-operators-prod/catalogs/v4.20/infinispan");
    let out = pomctl(&[
        "--catalog",
        catalog.to_str().unwrap(),
        "--package",
        "infinispan",
        "--installed",
        "infinispan-operator.v2.4.18",
        "--cluster-version",
        "4.20.1",
        "--cluster-target",
        "4.21.0",
        "-o",
        "json",
    ]);
    let json = stdout_json(&out);
    // 2.5.14's skipRange ">=2.4.18 <2.5.14" contains 2.4.18: one hop to the head.
    assert_eq!(json["bundle"]["name"], "infinispan-operator.v2.5.14");
    assert_eq!(json["upgradeable"]["status"], "True");
}
