//! Tolerant where OLM is (issue 33 item 6): a manifest that repeats a key within one mapping
//! renders as OLM reads it, the last value winning, with a warning naming the file, the document
//! and the key (the content policy judges that last value, which is what is applied); a Service
//! the bundle ships under the name of the Service POM renders for a Deployment's webhooks is
//! replaced by POM's, as OLM v0 replaces it, with a warning.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use pom_render::{BundleFiles, RenderOptions, RenderWarning, render};
use serde_json::Value;

const ANNOTATIONS: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n";

/// A CSV whose install strategy repeats the container's `image` (the last is `i:2`), and
/// whose permissions repeat `verbs` (the last grants every verb on Secrets).
const CSV: &str = "apiVersion: operators.coreos.com/v1alpha1
kind: ClusterServiceVersion
metadata:
  name: op.v1
spec:
  installModes:
  - {type: AllNamespaces, supported: true}
  install:
    strategy: deployment
    spec:
      permissions:
      - serviceAccountName: op
        rules:
        - apiGroups: ['']
          resources: [configmaps]
          verbs: [get]
          verbs: [get, list, watch, create]
      deployments:
      - name: op
        spec:
          selector: {matchLabels: {a: b}}
          template:
            metadata: {labels: {a: b}}
            spec:
              serviceAccountName: op
              containers:
              - name: m
                image: i:1
                image: i:2
";

/// A plain+v0 Deployment whose `replicas` is written twice (the last is 3), in a file's
/// second document.
const DEPLOYMENT: &str = "apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: ns}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: ns}
spec:
  replicas: 1
  selector: {matchLabels: {a: b}}
  template:
    metadata: {labels: {a: b}}
    spec:
      containers: [{name: m, image: i}]
  replicas: 3
";

/// `files` on top of `base`.
fn bundle_over(mut base: BTreeMap<String, Vec<u8>>, files: &[(&str, &str)]) -> BundleFiles {
    for (path, text) in files {
        base.insert((*path).to_owned(), text.as_bytes().to_vec());
    }
    BundleFiles::new(base)
}

fn bundle(files: &[(&str, &str)]) -> BundleFiles {
    bundle_over(BTreeMap::new(), files)
}

/// The object of `kind` whose name starts with `name`.
fn object<'b>(objects: &'b [Value], kind: &str, name: &str) -> &'b Value {
    objects
        .iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(name))
        })
        .unwrap_or_else(|| panic!("no {kind} {name}*"))
}

#[test]
fn the_last_value_of_a_repeated_key_is_rendered_and_warned_about() {
    struct Case {
        name: &'static str,
        files: Vec<(&'static str, &'static str)>,
        /// (kind, name, JSON pointer, the value rendered).
        rendered: Vec<(&'static str, &'static str, &'static str, Value)>,
        /// (file, document, key) of each warning.
        warnings: Vec<(&'static str, usize, &'static str)>,
    }
    let cases = [
        Case {
            name: "a Deployment manifest",
            files: vec![("manifests/objects.yaml", DEPLOYMENT)],
            rendered: vec![("Deployment", "d", "/spec/replicas", Value::from(3))],
            warnings: vec![("manifests/objects.yaml", 2, "spec.replicas")],
        },
        Case {
            name: "a CSV",
            files: vec![
                ("metadata/annotations.yaml", ANNOTATIONS),
                ("manifests/csv.yaml", CSV),
            ],
            rendered: vec![
                (
                    "Deployment",
                    "op",
                    "/spec/template/spec/containers/0/image",
                    Value::from("i:2"),
                ),
                (
                    "Role",
                    "op",
                    "/rules/0/verbs",
                    serde_json::json!(["get", "list", "watch", "create"]),
                ),
            ],
            warnings: vec![
                (
                    "manifests/csv.yaml",
                    1,
                    "spec.install.spec.permissions[0].rules[0].verbs",
                ),
                (
                    "manifests/csv.yaml",
                    1,
                    "spec.install.spec.deployments[0].spec.template.spec.containers[0].image",
                ),
            ],
        },
    ];
    for case in cases {
        let rendered = render(&bundle(&case.files), &RenderOptions::new("ns"))
            .unwrap_or_else(|err| panic!("{}: {err}", case.name));
        for (kind, name, pointer, value) in &case.rendered {
            let object = object(&rendered.objects, kind, name);
            assert_eq!(object.pointer(pointer), Some(value), "{}", case.name);
        }
        let warnings: Vec<(&str, usize, &str)> = rendered
            .warnings
            .iter()
            .filter_map(|w| match w {
                RenderWarning::DuplicateKey {
                    file,
                    document,
                    key,
                    ..
                } => Some((file.as_str(), *document, key.as_str())),
                RenderWarning::WebhookServiceReplaced { .. } => None,
            })
            .collect();
        assert_eq!(warnings, case.warnings, "{}", case.name);
        for warning in &rendered.warnings {
            let text = warning.to_string();
            assert!(text.contains("the last value"), "{text}");
        }
    }
}

/// What is judged is the last value: a repeated `verbs` whose last value grants more is
/// judged by that grant (here, writing Secrets in the install namespace is an ordinary power;
/// reading them cluster-wide is not).
#[test]
fn the_content_policy_judges_the_last_value() {
    let csv = CSV.replace(
        "        - apiGroups: ['']\n          resources: [configmaps]\n          verbs: [get]\n          verbs: [get, list, watch, create]\n",
        "",
    );
    let csv = csv.replace(
        "      permissions:\n      - serviceAccountName: op\n        rules:\n",
        "      clusterPermissions:\n      - serviceAccountName: op\n        rules:\n        - apiGroups: ['']\n          resources: [secrets]\n          verbs: [get]\n          verbs: ['*']\n      permissions:\n      - serviceAccountName: op\n        rules:\n        - apiGroups: ['']\n          resources: [configmaps]\n          verbs: [get]\n",
    );
    let files = [
        ("metadata/annotations.yaml", ANNOTATIONS),
        ("manifests/csv.yaml", csv.as_str()),
    ];
    let first_only = csv.replace("          verbs: ['*']\n", "");
    let judged_first = render(
        &bundle(&[
            ("metadata/annotations.yaml", ANNOTATIONS),
            ("manifests/csv.yaml", first_only.as_str()),
        ]),
        &RenderOptions::new("ns"),
    );
    let judged_last = render(&bundle(&files), &RenderOptions::new("ns"));
    let powers = |r: &Result<pom_render::RenderedBundle, pom_render::RenderError>| match r {
        Ok(bundle) => bundle.powers.found.len(),
        Err(_) => usize::MAX,
    };
    assert!(
        powers(&judged_last) > powers(&judged_first),
        "the last value (every verb on Secrets cluster-wide) is judged: {:?} vs {:?}",
        judged_last.as_ref().map(|b| &b.powers.found),
        judged_first.as_ref().map(|b| &b.powers.found)
    );
}

/// The webhooks fixture with `extra` manifests added.
fn webhooks_bundle(extra: &[(&str, &str)]) -> BundleFiles {
    let dir =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/bundles/webhooks");
    bundle_over((*BundleFiles::load_dir(&dir).unwrap().files).clone(), extra)
}

/// A bundle Service named `<deployment>-service` (opentelemetry-operator ships one) is the
/// webhook Service OLM v0 renders: OLM deletes it and creates its own with the webhooks' ports
/// and the Deployment's selector. POM renders the same, and says so; a Service of another
/// name, or an identical one, is left alone and says nothing.
#[test]
fn a_shipped_service_named_like_the_webhook_service_is_replaced_as_olm_does() {
    const SHIPPED: &str = "apiVersion: v1
kind: Service
metadata:
  name: webhooks-controller-service
  labels: {from: bundle}
spec:
  selector: {control-plane: manager}
  ports:
  - {name: metrics, port: 8443, targetPort: 8443}
";
    let other = SHIPPED.replace("webhooks-controller-service", "metrics");
    struct Case {
        name: &'static str,
        extra: Vec<(&'static str, String)>,
        warned: Vec<(&'static str, &'static str)>,
    }
    let cases = [
        Case {
            name: "none shipped",
            extra: vec![],
            warned: vec![],
        },
        Case {
            name: "shipped under the webhook Service's name",
            extra: vec![("manifests/service.yaml", SHIPPED.to_owned())],
            warned: vec![("webhooks-controller-service", "manifests/service.yaml")],
        },
        Case {
            name: "shipped under another name",
            extra: vec![("manifests/service.yaml", other)],
            warned: vec![],
        },
    ];
    let generated = render(&webhooks_bundle(&[]), &RenderOptions::new("ns")).unwrap();
    let webhook_service =
        object(&generated.objects, "Service", "webhooks-controller-service").clone();
    assert_eq!(
        webhook_service["spec"]["selector"],
        serde_json::json!({"app": "x"})
    );
    for case in cases {
        let extra: Vec<(&str, &str)> = case.extra.iter().map(|(p, t)| (*p, t.as_str())).collect();
        let rendered = render(&webhooks_bundle(&extra), &RenderOptions::new("ns"))
            .unwrap_or_else(|err| panic!("{}: {err}", case.name));
        let service = object(&rendered.objects, "Service", "webhooks-controller-service");
        assert_eq!(*service, webhook_service, "{}", case.name);
        let warned: Vec<(&str, &str)> = rendered
            .warnings
            .iter()
            .filter_map(|w| match w {
                RenderWarning::WebhookServiceReplaced { service, file } => {
                    Some((service.as_str(), file.as_str()))
                }
                RenderWarning::DuplicateKey { .. } => None,
            })
            .collect();
        assert_eq!(warned, case.warned, "{}", case.name);
        for warning in &rendered.warnings {
            assert!(warning.to_string().contains("OLM v0"), "{warning}");
        }
    }
}
