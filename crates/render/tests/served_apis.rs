#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The table of served APIs (`pom_render::served_apis`, issue 33 item 3) against its sources,
//! offline, so it fails when stale:
//! - always: the versions it names are the ones the e2e suite pins (`e2e/tools/versions.env`),
//!   so moving a pin without regenerating the table fails here;
//! - when the Go module cache holds them (the e2e suite's `build-binaries.sh` and
//!   `platform-crds.sh` download both): every API group `k8s.io/api` registers at that
//!   Kubernetes version is a whole-group row served by Kubernetes; every CRD openshift/api
//!   publishes at that commit is claimed (by a whole-group row or by its resource), and every
//!   group openshift/api registers without a CRD manifest (an aggregated API server's) is a
//!   whole-group row. Absent modules are reported and skipped (the pins are still checked).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use pom_render::served_apis::{
    KUBERNETES_VERSION, OPENSHIFT_API_VERSION, SERVED_GROUPS, Server, Serves, served_by,
};

/// The e2e suite's pins.
fn pins() -> BTreeMap<String, String> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../e2e/tools/versions.env");
    std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned()))
        .collect()
}

#[test]
fn the_table_names_the_versions_the_e2e_suite_pins() {
    let pins = pins();
    assert_eq!(
        pins.get("KUBERNETES_VERSION").map(String::as_str),
        Some(KUBERNETES_VERSION),
        "e2e/tools/versions.env pins another Kubernetes than the table of served APIs was taken from: regenerate crates/render/src/served_apis.rs from k8s.io/api at that version (this test lists what is missing) and update KUBERNETES_VERSION"
    );
    assert_eq!(
        pins.get("OPENSHIFT_API_VERSION").map(String::as_str),
        Some(OPENSHIFT_API_VERSION),
        "e2e/tools/versions.env pins another openshift/api than the table of served APIs was taken from: regenerate crates/render/src/served_apis.rs from its CRD manifests (this test lists what is missing) and update OPENSHIFT_API_VERSION"
    );
}

/// Where Go module caches may be: `$GOMODCACHE`, POM's (`platform-crds.sh`), Go's default.
fn module_caches() -> Vec<PathBuf> {
    let home = std::env::var_os("HOME").map(PathBuf::from);
    let pom_cache = std::env::var_os("POM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|x| PathBuf::from(x).join("pom")))
        .or_else(|| home.as_ref().map(|h| h.join(".cache/pom")));
    [
        std::env::var_os("GOMODCACHE").map(PathBuf::from),
        pom_cache.map(|p| p.join("gomodcache")),
        home.map(|h| h.join("go/pkg/mod")),
    ]
    .into_iter()
    .flatten()
    .collect()
}

fn module(path: &str) -> Option<PathBuf> {
    let found = module_caches()
        .into_iter()
        .map(|cache| cache.join(path))
        .find(|dir| dir.is_dir());
    // A check skipped for a missing prerequisite fails in CI: `.ci/run` fetches both modules
    // (e2e/tools/platform-crds.sh) before the tests run.
    assert!(
        found.is_some() || std::env::var_os("CI").is_none(),
        "{path} is in no Go module cache ({:?}); run e2e/tools/platform-crds.sh",
        module_caches()
    );
    found
}

/// Every file under `dir` whose name ends with `suffix`.
fn files(dir: &Path, suffix: &str, found: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            files(&path, suffix, found);
        } else if path.to_string_lossy().ends_with(suffix) {
            found.push(path);
        }
    }
}

/// The `GroupName` a `register.go` declares (`const GroupName = "apps"`, or `GroupName = ...`
/// in a `const`/`var` block).
fn group_name(register_go: &Path) -> Option<String> {
    let text = std::fs::read_to_string(register_go).ok()?;
    text.lines().find_map(|line| {
        let line = line.trim().trim_start_matches("const ");
        let (name, value) = line.split_once('=')?;
        let name = name.split_whitespace().next()?;
        if name != "GroupName" {
            return None;
        }
        let quoted = value.trim().strip_prefix('"')?;
        quoted.split_once('"').map(|(group, _)| group.to_owned())
    })
}

#[test]
fn every_group_kubernetes_registers_is_a_whole_group_row() {
    let minor_patch = KUBERNETES_VERSION.strip_prefix("1.").unwrap();
    let Some(dir) = module(&format!("k8s.io/api@v0.{minor_patch}")) else {
        eprintln!(
            "skipped: k8s.io/api@v0.{minor_patch} is not in any Go module cache ({:?}); e2e/tools/build-binaries.sh downloads it",
            module_caches()
        );
        return;
    };
    let mut registers = Vec::new();
    files(&dir, "/register.go", &mut registers);
    let groups: BTreeSet<String> = registers.iter().filter_map(|f| group_name(f)).collect();
    assert!(groups.len() > 20, "{groups:?} from {}", dir.display());
    let missing: Vec<&String> = groups
        .iter()
        .filter(|g| {
            !SERVED_GROUPS.iter().any(|row| {
                row.group == *g && row.serves == Serves::Group && row.server == Server::Kubernetes
            })
        })
        .collect();
    assert!(
        missing.is_empty(),
        "k8s.io/api v0.{minor_patch} registers groups the table of served APIs lacks (add them as whole groups served by Kubernetes): {missing:?}"
    );
}

/// `(group, plural)` of a CRD manifest, read as YAML.
fn crd_of(path: &Path) -> Option<(String, String)> {
    let text = std::fs::read_to_string(path).ok()?;
    if !text.lines().any(|l| l == "kind: CustomResourceDefinition") {
        return None;
    }
    let value: serde_json::Value =
        serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let group = value["spec"]["group"].as_str()?.to_owned();
    let plural = value["spec"]["names"]["plural"].as_str()?.to_owned();
    Some((group, plural))
}

#[test]
fn every_group_and_crd_openshift_api_publishes_is_claimed() {
    let Some(dir) = module(&format!(
        "github.com/openshift/api@v{OPENSHIFT_API_VERSION}"
    )) else {
        eprintln!(
            "skipped: github.com/openshift/api@v{OPENSHIFT_API_VERSION} is not in any Go module cache ({:?}); e2e/tools/platform-crds.sh downloads it",
            module_caches()
        );
        return;
    };
    // The example group is openshift/api's sample; the `*.config.openshift.io` groups other
    // than `config.openshift.io` are configuration file formats, never served; `unidling`
    // registers no type.
    let ignored = |group: &str| {
        group == "example.openshift.io"
            || group == "unidling.openshift.io"
            || (group.ends_with(".config.openshift.io"))
    };
    let mut manifests = Vec::new();
    files(&dir, ".yaml", &mut manifests);
    let crds: BTreeSet<(String, String)> = manifests
        .iter()
        .filter(|p| !p.starts_with(dir.join("example")))
        .filter_map(|p| crd_of(p))
        .filter(|(group, _)| !ignored(group))
        .collect();
    assert!(crds.len() > 50, "{} CRDs in {}", crds.len(), dir.display());
    let unclaimed: Vec<String> = crds
        .iter()
        .filter(|(group, plural)| served_by(group, plural).is_none())
        .map(|(group, plural)| format!("{plural}.{group}"))
        .collect();
    assert!(
        unclaimed.is_empty(),
        "openshift/api {OPENSHIFT_API_VERSION} publishes CRDs the table of served APIs does not claim (add each resource to its group's row): {unclaimed:?}"
    );

    let mut registers = Vec::new();
    files(&dir, "/register.go", &mut registers);
    let with_crds: BTreeSet<&str> = crds.iter().map(|(g, _)| g.as_str()).collect();
    let aggregated: BTreeSet<String> = registers
        .iter()
        .filter_map(|f| group_name(f))
        .filter(|g| !ignored(g) && !with_crds.contains(g.as_str()))
        .collect();
    assert!(aggregated.len() >= 5, "{aggregated:?}");
    let not_whole: Vec<&String> = aggregated
        .iter()
        .filter(|g| {
            !SERVED_GROUPS
                .iter()
                .any(|row| row.group == g.as_str() && row.serves == Serves::Group)
        })
        .collect();
    assert!(
        not_whole.is_empty(),
        "openshift/api {OPENSHIFT_API_VERSION} registers groups with no CRD manifest (served whole by an aggregated API server) that the table does not claim whole: {not_whole:?}"
    );
}
