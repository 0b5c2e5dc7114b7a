//! Every refusal of rendering, one small in-memory bundle each: the right variant, and a
//! message that names the place and says what to do. Also: no input panics.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use pom_render::{BundleFiles, ContentRule, RenderError, RenderOptions, render};
use proptest::prelude::*;

const ANNOTATIONS: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n";

fn bundle(files: &[(&str, &str)]) -> BundleFiles {
    BundleFiles::new(
        files
            .iter()
            .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn render_files(files: &[(&str, &str)]) -> Result<pom_render::RenderedBundle, RenderError> {
    render(&bundle(files), &RenderOptions::new("ns"))
}

/// A CSV with AllNamespaces and one Deployment, with `extra` appended under `spec:`.
fn csv(name: &str, install: &str) -> String {
    format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: {name}\nspec:\n  installModes:\n  - {{type: AllNamespaces, supported: true}}\n{install}"
    )
}

const INSTALL: &str = "  install:\n    strategy: deployment\n    spec:\n      deployments:\n      - name: op\n        spec:\n          selector: {matchLabels: {a: b}}\n          template:\n            metadata: {labels: {a: b}}\n            spec:\n              containers: [{name: m, image: i}]\n";

#[test]
fn a_minimal_bundle_renders() {
    let bundle = render_files(&[
        ("metadata/annotations.yaml", ANNOTATIONS),
        ("manifests/csv.yaml", &csv("op.v1", INSTALL)),
    ])
    .unwrap();
    assert_eq!(bundle.deployments, vec!["op"]);
}

#[test]
fn no_csv() {
    let err = render_files(&[
        ("metadata/annotations.yaml", ANNOTATIONS),
        (
            "manifests/cm.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        ),
    ])
    .unwrap_err();
    assert!(matches!(err, RenderError::NoCsv { .. }), "{err}");
    assert!(err.to_string().contains("manifests/"));
}

#[test]
fn several_csvs() {
    let err = render_files(&[
        ("manifests/a.yaml", &csv("a.v1", INSTALL)),
        ("manifests/b.yaml", &csv("b.v1", INSTALL)),
    ])
    .unwrap_err();
    assert!(
        matches!(&err, RenderError::SeveralCsvs { files } if files == &["manifests/a.yaml", "manifests/b.yaml"])
    );
}

#[test]
fn malformed_yaml_names_the_file() {
    let err = render_files(&[(
        "manifests/broken.yaml",
        "apiVersion: v1\nkind: [ConfigMap\n",
    )])
    .unwrap_err();
    assert!(
        matches!(&err, RenderError::MalformedYaml { file, .. } if file == "manifests/broken.yaml"),
        "{err}"
    );
}

#[test]
fn objects_need_api_version_kind_and_name() {
    for (text, missing) in [
        ("kind: ConfigMap\nmetadata: {name: c}\n", "apiVersion"),
        ("apiVersion: v1\nmetadata: {name: c}\n", "kind"),
        (
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {generateName: c-}\n",
            "metadata.name",
        ),
    ] {
        let file =
            format!("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {{name: ok}}\n---\n{text}");
        let err = render_files(&[("manifests/x.yaml", &file)]).unwrap_err();
        assert!(
            matches!(&err, RenderError::IncompleteObject { file, document: 2, line: 6, missing: m } if file == "manifests/x.yaml" && *m == missing),
            "{err}"
        );
    }
    let err = render_files(&[("manifests/x.yaml", "- a\n- b\n")]).unwrap_err();
    assert!(matches!(
        err,
        RenderError::NotAnObject {
            found: "a list",
            ..
        }
    ));
}

#[test]
fn missing_install_strategy_and_no_deployments() {
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", ""))]).unwrap_err();
    assert!(
        matches!(err, RenderError::MissingInstallStrategy { .. }),
        "{err}"
    );
    let err = render_files(&[(
        "manifests/csv.yaml",
        &csv("op.v1", "  install:\n    strategy: helm\n    spec: {}\n"),
    )])
    .unwrap_err();
    assert!(err.to_string().contains("\"helm\""), "{err}");
    let empty = "  install:\n    strategy: deployment\n    spec:\n      deployments: []\n";
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", empty))]).unwrap_err();
    assert!(matches!(err, RenderError::NoDeployments { .. }), "{err}");
}

#[test]
fn malformed_csv_fields_are_named() {
    let install = INSTALL.replace("      - name: op\n", "      - name: Op_Bad\n");
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", &install))]).unwrap_err();
    assert!(
        matches!(&err, RenderError::InvalidCsvField { field, .. } if field == "spec.install.spec.deployments[0].name"),
        "{err}"
    );
    let install = format!(
        "{INSTALL}      permissions:\n      - serviceAccountName: sa\n        rules: nope\n"
    );
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", &install))]).unwrap_err();
    assert!(
        err.to_string()
            .contains("spec.install.spec.permissions[0].rules"),
        "{err}"
    );
    let twice = format!(
        "{INSTALL}{}",
        INSTALL
            .lines()
            .skip(4)
            .map(|l| format!("{l}\n"))
            .collect::<String>()
    );
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", &twice))]).unwrap_err();
    assert!(
        matches!(err, RenderError::DuplicateDeployment { .. }),
        "{err}"
    );
}

#[test]
fn owned_crd_must_be_shipped() {
    let spec = format!(
        "  customresourcedefinitions:\n    owned:\n    - {{name: things.example.com, version: v1, kind: Thing}}\n{INSTALL}"
    );
    let err = render_files(&[("manifests/csv.yaml", &csv("op.v1", &spec))]).unwrap_err();
    assert!(
        matches!(&err, RenderError::OwnedCrdMissing { crd, .. } if crd == "things.example.com"),
        "{err}"
    );
}

#[test]
fn unsupported_kind_in_registry_bundle() {
    let err = render_files(&[
        ("manifests/csv.yaml", &csv("op.v1", INSTALL)),
        (
            "manifests/job.yaml",
            "apiVersion: batch/v1\nkind: Job\nmetadata: {name: once}\n",
        ),
    ])
    .unwrap_err();
    assert!(
        matches!(&err, RenderError::ContentPolicy(v) if v.0[0].rule == ContentRule::KindNotAllowed && v.0[0].object.starts_with("Job.batch")),
        "{err}"
    );
    assert!(
        err.to_string().contains("registry+v1 bundle may contain"),
        "{err}"
    );
}

#[test]
fn removed_api_versions() {
    let err = render_files(&[(
        "manifests/r.yaml",
        "apiVersion: rbac.authorization.k8s.io/v1beta1\nkind: ClusterRole\nmetadata: {name: r}\n",
    )])
    .unwrap_err();
    assert!(
        matches!(
            &err,
            RenderError::RemovedApiVersion {
                removed_in: "1.22",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn conflicting_objects() {
    let err = render_files(&[
        (
            "manifests/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '1'}\n",
        ),
        (
            "manifests/b.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\ndata: {a: '2'}\n",
        ),
    ])
    .unwrap_err();
    assert!(
        matches!(&err, RenderError::ConflictingObjects { first, second, .. } if first == "manifests/a.yaml" && second == "manifests/b.yaml"),
        "{err}"
    );
}

#[test]
fn media_type_and_namespace_checks() {
    let err = render_files(&[
        (
            "metadata/annotations.yaml",
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: helm+v3\n",
        ),
        (
            "manifests/a.yaml",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
        ),
    ])
    .unwrap_err();
    assert!(
        matches!(err, RenderError::UnsupportedMediaType { .. }),
        "{err}"
    );
    let err = render(&bundle(&[]), &RenderOptions::new("Bad_NS")).unwrap_err();
    assert!(matches!(err, RenderError::InvalidInstallNamespace { .. }));
    let err = render_files(&[("manifests/empty.yaml", "# nothing\n")]).unwrap_err();
    assert!(matches!(err, RenderError::NoManifests { .. }));
}

#[test]
fn malformed_properties() {
    let install = INSTALL.to_owned();
    let text = csv("op.v1", &install).replace(
        "  name: op.v1\n",
        "  name: op.v1\n  annotations:\n    olm.properties: 'not json'\n",
    );
    let err = render_files(&[("manifests/csv.yaml", &text)]).unwrap_err();
    assert!(
        matches!(err, RenderError::MalformedProperties { .. }),
        "{err}"
    );
}

proptest! {
    /// Arbitrary bytes in a manifest, or in the annotations, never panic.
    #[test]
    fn arbitrary_files_never_panic(manifest in ".{0,200}", annotations in ".{0,120}") {
        let _ = render_files(&[("manifests/x.yaml", &manifest)]);
        let _ = render_files(&[("metadata/annotations.yaml", &annotations), ("manifests/x.yaml", &manifest)]);
    }

    /// Arbitrary YAML-ish CSV bodies never panic either.
    #[test]
    fn arbitrary_csv_specs_never_panic(body in "(  [a-z]{1,12}: (\\[\\]|\\{\\}|x|1|true|null)\n){0,6}") {
        let _ = render_files(&[("manifests/csv.yaml", &csv("op.v1", &body))]);
    }
}
