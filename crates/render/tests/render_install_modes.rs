//! Install modes (issue 21 item 2): AllNamespaces, OwnNamespace and SingleNamespace rendered as
//! OLM v0 renders them, chosen by `watch_namespace` (default: AllNamespaces when supported,
//! else OwnNamespace), a mode the bundle does not declare refused naming the modes it has.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use pom_render::{BundleFiles, InstallMode, RenderError, RenderOptions, RenderedBundle, render};
use serde_json::Value;

const ANNOTATIONS: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n";

/// A CSV supporting `modes`, with one namespaced permission (configmaps) and one Deployment.
fn bundle(modes: &[&str]) -> BundleFiles {
    let modes: String = [
        "AllNamespaces",
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
    ]
    .iter()
    .map(|m| format!("  - {{type: {m}, supported: {}}}\n", modes.contains(m)))
    .collect();
    let csv = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: op.v1.0.0\nspec:\n  installModes:\n{modes}  install:\n    strategy: deployment\n    spec:\n      permissions:\n      - serviceAccountName: op\n        rules: [{{apiGroups: [\"\"], resources: [configmaps], verbs: [\"*\"]}}]\n      deployments:\n      - name: op\n        spec:\n          selector: {{matchLabels: {{a: b}}}}\n          template:\n            metadata: {{labels: {{a: b}}}}\n            spec:\n              serviceAccountName: op\n              containers: [{{name: m, image: i}}]\n"
    );
    BundleFiles::new(BTreeMap::from([
        (
            "metadata/annotations.yaml".to_owned(),
            ANNOTATIONS.as_bytes().to_vec(),
        ),
        ("manifests/csv.yaml".to_owned(), csv.into_bytes()),
    ]))
}

fn render_with(modes: &[&str], watch: Option<&str>) -> Result<RenderedBundle, RenderError> {
    let opts = RenderOptions {
        watch_namespace: watch.map(str::to_owned),
        ..RenderOptions::new("ops")
    };
    render(&bundle(modes), &opts)
}

/// (kind, namespace) of the generated RBAC.
fn rbac(bundle: &RenderedBundle) -> Vec<(String, String)> {
    bundle
        .objects
        .iter()
        .filter(|o| o["apiVersion"] == "rbac.authorization.k8s.io/v1")
        .map(|o| {
            (
                o["kind"].as_str().unwrap().to_owned(),
                o["metadata"]["namespace"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

fn target_namespaces(bundle: &RenderedBundle) -> Value {
    let deployment = bundle
        .objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    deployment["spec"]["template"]["metadata"]["annotations"]["olm.targetNamespaces"].clone()
}

fn pair(kind: &str, ns: &str) -> (String, String) {
    (kind.to_owned(), ns.to_owned())
}

#[test]
fn all_namespaces_is_the_default_when_supported() {
    let bundle = render_with(&["AllNamespaces", "OwnNamespace"], None).unwrap();
    assert_eq!(bundle.install_mode, Some(InstallMode::AllNamespaces));
    assert_eq!(target_namespaces(&bundle), "");
    let mut kinds = rbac(&bundle);
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            pair("ClusterRole", ""),
            pair("ClusterRoleBinding", ""),
            pair("Role", "ops"),
            pair("RoleBinding", "ops"),
        ]
    );
}

#[test]
fn own_namespace_is_the_default_otherwise_and_grants_only_there() {
    for watch in [None, Some("ops")] {
        let bundle = render_with(&["OwnNamespace", "SingleNamespace"], watch).unwrap();
        assert_eq!(
            bundle.install_mode,
            Some(InstallMode::OwnNamespace),
            "{watch:?}"
        );
        assert_eq!(target_namespaces(&bundle), "ops");
        assert_eq!(
            rbac(&bundle),
            vec![pair("Role", "ops"), pair("RoleBinding", "ops")]
        );
    }
}

#[test]
fn single_namespace_grants_in_the_watched_namespace_too() {
    let bundle = render_with(&["SingleNamespace"], Some("team-a")).unwrap();
    assert_eq!(bundle.install_mode, Some(InstallMode::SingleNamespace));
    assert_eq!(bundle.watch_namespace, "team-a");
    assert_eq!(target_namespaces(&bundle), "team-a");
    let mut kinds = rbac(&bundle);
    kinds.sort();
    assert_eq!(
        kinds,
        vec![
            pair("Role", "ops"),
            pair("Role", "team-a"),
            pair("RoleBinding", "ops"),
            pair("RoleBinding", "team-a"),
        ]
    );
    // The binding in the watched namespace names the ServiceAccount of the install namespace.
    let binding = bundle
        .objects
        .iter()
        .find(|o| o["kind"] == "RoleBinding" && o["metadata"]["namespace"] == "team-a")
        .unwrap();
    assert_eq!(binding["subjects"][0]["namespace"], "ops");
}

#[test]
fn an_undeclared_mode_is_refused_naming_the_modes_it_has() {
    let cases: [(&[&str], Option<&str>, &str); 4] = [
        (&["AllNamespaces"], Some("ops"), "OwnNamespace"),
        (
            &["AllNamespaces", "OwnNamespace"],
            Some("team-a"),
            "SingleNamespace",
        ),
        (&["SingleNamespace"], None, "spec.watchNamespace"),
        (&["MultiNamespace"], None, "ask the operator's publisher"),
    ];
    for (modes, watch, expected) in cases {
        let err = render_with(modes, watch).unwrap_err();
        let message = err.to_string();
        assert!(
            matches!(&err, RenderError::InstallModeNotSupported { supported, .. } if supported == modes),
            "{modes:?} {watch:?}: {message}"
        );
        assert!(message.contains(expected), "{modes:?} {watch:?}: {message}");
    }
}

#[test]
fn a_reserved_watch_namespace_is_refused() {
    // Issue 33 item 5: any openshift-* namespace too (POM uses one only as a PO's own install
    // namespace), and `default`.
    for watch in [
        "kube-system",
        "openshift-config",
        "Not_A_Name",
        "default",
        "openshift-logging",
        "openshift-anything",
    ] {
        let err = render_with(&["SingleNamespace"], Some(watch)).unwrap_err();
        assert!(
            matches!(&err, RenderError::InvalidWatchNamespace { namespace, .. } if namespace == watch),
            "{watch}: {err}"
        );
    }
}
