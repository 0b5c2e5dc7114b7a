//! `pomctl render` end to end: the real binary on the renderer's fixture bundles.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::process::{Command, Output};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../render/tests/fixtures/bundles")
        .join(name)
}

fn pomctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pomctl"))
        .args(args)
        .output()
        .unwrap()
}

fn documents(stdout: &[u8]) -> Vec<serde_json::Value> {
    let text = String::from_utf8(stdout.to_vec()).unwrap();
    serde_saphyr::from_str_multiple(&text).unwrap()
}

#[test]
fn renders_a_registry_bundle_as_a_yaml_stream() {
    let dir = fixture("registry-v1");
    let out = pomctl(&["render", dir.to_str().unwrap(), "--namespace", "widgets"]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = documents(&out.stdout);
    assert!(docs.len() > 5);
    assert_eq!(docs[0]["kind"], "CustomResourceDefinition");
    let deployment = docs.last().unwrap();
    assert_eq!(deployment["kind"], "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], "widgets");
    assert_eq!(
        deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"],
        ""
    );
}

#[test]
fn namespace_defaults_to_the_package_name() {
    let dir = fixture("registry-v1");
    let out = pomctl(&["render", dir.to_str().unwrap(), "--operator-condition"]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let docs = documents(&out.stdout);
    let deployment = docs.last().unwrap();
    assert_eq!(deployment["metadata"]["namespace"], "widget-operator");
    let env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        .as_array()
        .unwrap();
    assert!(env.iter().any(|e| e["name"] == "OPERATOR_CONDITION_NAME"));
}

#[test]
fn json_output() {
    let dir = fixture("plain-v0");
    let out = pomctl(&[
        "render",
        dir.to_str().unwrap(),
        "-n",
        "gadgets",
        "-o",
        "json",
    ]);
    assert!(
        out.status.success(),
        "stderr: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let objects: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(objects[0]["kind"], "CustomResourceDefinition");
    assert!(
        objects
            .iter()
            .filter(|o| o["metadata"]["namespace"].is_string())
            .all(|o| o["metadata"]["namespace"] == "gadgets")
    );
}

#[test]
fn refusal_exits_2_with_the_reason_on_stderr() {
    // Owned APIServices are still refused (webhooks render since issue 21).
    let dir = fixture("apiservice");
    let out = pomctl(&["render", dir.to_str().unwrap(), "--namespace", "x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("apiservicedefinitions.owned"), "{stderr}");

    let out = pomctl(&["render", "/nonexistent/bundle"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/bundle"));
}

#[test]
fn plain_bundle_without_package_needs_a_namespace() {
    let dir = fixture("plain-v0");
    let out = pomctl(&["render", dir.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--namespace"));
}

/// Issue 33 item 1: a binding of a built-in role shows the power of what the role holds, the
/// binding as evidence; with a role that holds none, "none".
#[test]
fn permissions_show_what_a_bound_built_in_role_grants() {
    let bundle = |role: &str| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("metadata")).unwrap();
        std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
        std::fs::write(
            dir.path().join("metadata/annotations.yaml"),
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n",
        )
        .unwrap();
        std::fs::write(
            dir.path().join("manifests/binding.yaml"),
            format!(
                "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {{name: op-scc}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: '{role}'}}\nsubjects: [{{kind: ServiceAccount, name: op, namespace: widgets}}]\n"
            ),
        )
        .unwrap();
        dir
    };
    let privileged = bundle("system:openshift:scc:privileged");
    let out = pomctl(&[
        "render",
        privileged.path().to_str().unwrap(),
        "--namespace",
        "widgets",
        "--consent",
        "privileged-workloads",
        "--permissions",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("PrivilegedWorkloads (consented: spec.consent.privilegedWorkloads: true)")
            && stdout.contains(
                "ClusterRoleBinding \"op-scc\": binds the built-in ClusterRole \"system:openshift:scc:privileged\" cluster-wide"
            ),
        "{stdout}"
    );
    let restricted = bundle("system:openshift:scc:restricted-v2");
    let out = pomctl(&[
        "render",
        restricted.path().to_str().unwrap(),
        "--namespace",
        "widgets",
        "--permissions",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("powers: none"), "{stdout}");
}
