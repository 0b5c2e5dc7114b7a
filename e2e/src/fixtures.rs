//! Test bundles and catalogs written by us, generated in code so that each scenario states the
//! versions, upgrade edges and properties it needs. Bundles are registry+v1 (a CSV with an
//! AllNamespaces install mode, one Deployment, RBAC, one owned CRD) carried in the catalog as
//! `olm.bundle.object` properties, or pushed as images with [`crate::oci_publish`].

use base64::Engine as _;
use serde_json::{Value, json};

/// One bundle of a test package.
#[derive(Debug, Clone)]
pub struct TestBundle {
    pub package: String,
    pub version: String,
    /// Bundle name this one replaces (same package).
    pub replaces: Option<String>,
    pub skip_range: Option<String>,
    pub max_openshift_version: Option<String>,
    /// Install modes marked supported (default: AllNamespaces and OwnNamespace).
    pub install_modes: Vec<&'static str>,
    /// The CRD's `spec.size` type (`integer` normally; change it to make an unsafe CRD upgrade).
    pub crd_size_type: &'static str,
    /// Replicas of the operator Deployment.
    pub replicas: i32,
    /// API group of the owned CRD (default `<package>.example.com`); two packages sharing one
    /// make an ownership conflict.
    pub crd_group: Option<String>,
    /// Whether the bundle owns its CRD (default true); see [`TestBundle::without_crd`].
    pub with_crd: bool,
    /// The CSV's `metadata.name` when it differs from the bundle name; see
    /// [`TestBundle::csv_name`].
    pub csv_name: Option<String>,
    /// The operator Deployment's name when not the default; see [`TestBundle::deployment`].
    pub deployment: Option<String>,
    /// Further manifests the bundle ships as they are; see [`TestBundle::with_object`].
    pub extra: Vec<Value>,
    /// A plain+v0 bundle (a Deployment plus `extra`, no CSV) instead of registry+v1.
    pub plain: bool,
    /// A plain+v0 bundle of `extra` only, without the Deployment; see
    /// [`TestBundle::without_deployment`].
    pub no_deployment: bool,
    /// `spec.webhookdefinitions` of the CSV; see [`TestBundle::with_webhooks`].
    pub webhooks: Vec<Value>,
    /// More annotations of the CSV; see [`TestBundle::annotate`].
    pub csv_annotations: Vec<(String, String)>,
    /// Webhooks that fail closed and a CRD with a second version; see
    /// [`TestBundle::webhooks_served`].
    pub webhooks_served: bool,
    /// The operator's pods select a node that does not exist; see [`TestBundle::never_ready`].
    pub never_ready: bool,
    /// The path prefix the operator's pods serve webhooks under (annotated on the pod template
    /// as [`SERVES_ANNOTATION`]); see [`TestBundle::with_webhooks`].
    pub webhook_prefix: Option<String>,
    /// The Deployment's `minReadySeconds`; see [`TestBundle::min_ready_seconds`].
    pub min_ready_seconds: Option<i32>,
}

/// The pod-template annotation naming the path prefix a bundle's pods serve webhooks under, so
/// the stand-in webhook server (`crate::webhook_server`) answers a path only while a ready
/// endpoint of a pod serving it exists, as a real Service would.
pub const SERVES_ANNOTATION: &str = "pom-e2e/serves-webhooks-under";

impl TestBundle {
    #[must_use]
    pub fn new(package: &str, version: &str) -> Self {
        Self {
            package: package.to_owned(),
            version: version.to_owned(),
            replaces: None,
            skip_range: None,
            max_openshift_version: None,
            install_modes: vec!["AllNamespaces", "OwnNamespace"],
            crd_size_type: "integer",
            replicas: 1,
            crd_group: None,
            with_crd: true,
            csv_name: None,
            deployment: None,
            extra: Vec::new(),
            plain: false,
            no_deployment: false,
            webhooks: Vec::new(),
            csv_annotations: Vec::new(),
            webhooks_served: false,
            never_ready: false,
            webhook_prefix: None,
            min_ready_seconds: None,
        }
    }

    /// Adds an annotation to the CSV (`operatorframework.io/suggested-namespace`, ...).
    #[must_use]
    pub fn annotate(mut self, key: &str, value: &str) -> Self {
        self.csv_annotations
            .push((key.to_owned(), value.to_owned()));
        self
    }

    /// Declares webhooks served by the operator Deployment on port 9443, as operator-sdk
    /// scaffolds them: a validating webhook on its Widgets at `<path_prefix>/validate` (failure
    /// policy `Ignore`, since simulated pods serve nothing, unless
    /// [`TestBundle::webhooks_served`]) and a conversion webhook for its CRD.
    #[must_use]
    pub fn with_webhooks(mut self, path_prefix: &str) -> Self {
        let deployment = self.deployment_name();
        self.webhook_prefix = Some(path_prefix.to_owned());
        self.webhooks = vec![
            json!({
                "type": "ValidatingAdmissionWebhook",
                "generateName": format!("v{}", self.crd_name()),
                "deploymentName": deployment,
                "containerPort": 443,
                "targetPort": 9443,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": if self.webhooks_served { "Fail" } else { "Ignore" },
                "webhookPath": format!("{path_prefix}/validate"),
                "rules": [{"apiGroups": [self.crd_group()], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}],
            }),
            json!({
                "type": "ConversionWebhook",
                "generateName": format!("c{}", self.crd_name()),
                "deploymentName": deployment,
                "containerPort": 443,
                "targetPort": 9443,
                "admissionReviewVersions": ["v1"],
                // Required by OLM v0's published CSV schema for every webhook definition.
                "sideEffects": "None",
                "webhookPath": format!("{path_prefix}/convert"),
                "conversionCRDs": [self.crd_name()],
            }),
        ];
        self
    }

    /// For a test that serves the webhooks itself (`pom_e2e::webhook_server`): call before
    /// [`TestBundle::with_webhooks`]. The validating webhook fails closed, so a write with
    /// nothing serving it is refused, and the CRD serves a second version `v2`, so reading a
    /// Widget at `v2` calls the conversion webhook.
    #[must_use]
    pub fn webhooks_served(mut self) -> Self {
        self.webhooks_served = true;
        self
    }

    /// The Deployment's `minReadySeconds`: a new pod is Ready (an endpoint of its Service) that
    /// long before it counts as available, so a rolling update keeps the old pods that long
    /// after the new ones serve, the window a webhook configuration can be switched in.
    #[must_use]
    pub fn min_ready_seconds(mut self, seconds: i32) -> Self {
        self.min_ready_seconds = Some(seconds);
        self
    }

    /// The operator's pods select a node label no node has, so they are never scheduled and its
    /// Deployment never becomes available: a move to this bundle never settles.
    #[must_use]
    pub fn never_ready(mut self) -> Self {
        self.never_ready = true;
        self
    }

    /// Ships `object` as one more manifest of the bundle (what a hostile catalog would add).
    #[must_use]
    pub fn with_object(mut self, object: Value) -> Self {
        self.extra.push(object);
        self
    }

    /// Makes the bundle plain+v0: its operator Deployment and the [`TestBundle::with_object`]
    /// manifests, applied as they are.
    #[must_use]
    pub fn plain(mut self) -> Self {
        self.plain = true;
        self
    }

    /// Makes the bundle plain+v0 with no Deployment at all: only the
    /// [`TestBundle::with_object`] manifests (ConfigMaps, RBAC, ...).
    #[must_use]
    pub fn without_deployment(mut self) -> Self {
        self.plain = true;
        self.no_deployment = true;
        self
    }

    /// Names the CSV `csv` instead of the bundle name (OLM allows them to differ: the catalog's
    /// `olm.bundle` name and the CSV's `metadata.name` are independent). OperatorConditions are
    /// named after the CSV.
    #[must_use]
    pub fn csv_name(mut self, csv: &str) -> Self {
        self.csv_name = Some(csv.to_owned());
        self
    }

    /// Names the operator Deployment `name` instead of `<package>-controller`.
    #[must_use]
    pub fn deployment(mut self, name: &str) -> Self {
        self.deployment = Some(name.to_owned());
        self
    }

    /// The CSV's `metadata.name`: the bundle name unless [`TestBundle::csv_name`] set another.
    #[must_use]
    pub fn csv(&self) -> String {
        self.csv_name.clone().unwrap_or_else(|| self.name())
    }

    /// A bundle without the CRD: what is left per package (namespace, Deployment, SA, RBAC) is
    /// shared-nothing, so benchmarks with hundreds of packages do not load the API server with
    /// as many CRDs (each one adds a served API group and its discovery and OpenAPI rebuilds).
    #[must_use]
    pub fn without_crd(mut self) -> Self {
        self.with_crd = false;
        self
    }

    #[must_use]
    pub fn replaces(mut self, version: &str) -> Self {
        self.replaces = Some(bundle_name(&self.package, version));
        self
    }

    #[must_use]
    pub fn max_ocp(mut self, max: &str) -> Self {
        self.max_openshift_version = Some(max.to_owned());
        self
    }

    /// The bundle name: `<package>.v<version>` (also the CSV's, unless
    /// [`TestBundle::csv_name`] set another).
    #[must_use]
    pub fn name(&self) -> String {
        bundle_name(&self.package, &self.version)
    }

    /// The CRD the bundle owns.
    #[must_use]
    pub fn crd_name(&self) -> String {
        format!("widgets.{}", self.crd_group())
    }

    #[must_use]
    pub fn crd_group(&self) -> String {
        self.crd_group
            .clone()
            .unwrap_or_else(|| format!("{}.example.com", self.package))
    }

    /// The files of the bundle as a registry+v1 image holds them (`manifests/`, `metadata/`).
    #[must_use]
    pub fn image_files(&self) -> Vec<(String, Vec<u8>)> {
        let mediatype = if self.plain {
            "plain+v0"
        } else {
            "registry+v1"
        };
        let annotations = format!(
            "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: {mediatype}\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.metadata.v1: metadata/\n  operators.operatorframework.io.bundle.package.v1: {}\n  operators.operatorframework.io.bundle.channels.v1: stable\n  operators.operatorframework.io.bundle.channel.default.v1: stable\n",
            self.package
        );
        let named = usize::from(!self.plain) + usize::from(!self.plain && self.with_crd);
        let mut files: Vec<(String, Vec<u8>)> = self
            .manifests()
            .into_iter()
            .enumerate()
            .map(|(index, manifest)| {
                let file = match index {
                    0 if !self.plain => {
                        format!("manifests/{}.clusterserviceversion.yaml", self.package)
                    }
                    1 if named == 2 => format!("manifests/{}.crd.yaml", self.package),
                    n => format!("manifests/object-{n}.yaml"),
                };
                (file, manifest.into_bytes())
            })
            .collect();
        files.push((
            "metadata/annotations.yaml".to_owned(),
            annotations.into_bytes(),
        ));
        files
    }

    /// The operator Deployment's name.
    #[must_use]
    pub fn deployment_name(&self) -> String {
        self.deployment
            .clone()
            .unwrap_or_else(|| format!("{}-controller", self.package))
    }

    /// The bundle's manifests (the CSV, then the CRD unless [`TestBundle::without_crd`]) as
    /// JSON texts.
    #[must_use]
    pub fn manifests(&self) -> Vec<String> {
        let pkg = &self.package;
        if self.plain {
            let deployment = json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": self.deployment_name()},
                "spec": {
                    "replicas": self.replicas,
                    "selector": {"matchLabels": {"app": pkg}},
                    "template": {"metadata": {"labels": {"app": pkg}}, "spec": {
                        "containers": [{"name": "manager", "image": format!("example.invalid/{pkg}:{}", self.version)}]
                    }}
                }
            });
            return std::iter::once(deployment.to_string())
                .filter(|_| !self.no_deployment)
                .chain(self.extra.iter().map(Value::to_string))
                .collect();
        }
        let modes: Vec<Value> = [
            "AllNamespaces",
            "OwnNamespace",
            "SingleNamespace",
            "MultiNamespace",
        ]
        .iter()
        .map(|m| json!({"type": m, "supported": self.install_modes.contains(m)}))
        .collect();
        let mut annotations = serde_json::Map::new();
        if let Some(max) = &self.max_openshift_version {
            annotations.insert(
                "olm.properties".into(),
                Value::String(
                    json!([{"type": "olm.maxOpenShiftVersion", "value": max}]).to_string(),
                ),
            );
        }
        for (key, value) in &self.csv_annotations {
            annotations.insert(key.clone(), Value::String(value.clone()));
        }
        let owned: Vec<Value> = if self.with_crd {
            vec![json!({"name": self.crd_name(), "version": "v1", "kind": "Widget"})]
        } else {
            Vec::new()
        };
        let mut csv = json!({
            "apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion",
            "metadata": {"name": self.csv(), "annotations": annotations},
            "spec": {
                "displayName": pkg,
                "version": self.version,
                "replaces": self.replaces,
                "installModes": modes,
                "customresourcedefinitions": {"owned": owned},
                "webhookdefinitions": self.webhooks,
                "install": {"strategy": "deployment", "spec": {
                    "permissions": [{"serviceAccountName": pkg, "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}]}],
                    "clusterPermissions": [{"serviceAccountName": pkg, "rules": [{"apiGroups": [self.crd_group()], "resources": ["widgets"], "verbs": ["get", "list", "watch"]}]}],
                    "deployments": [{"name": self.deployment_name(), "spec": {
                        "replicas": self.replicas,
                        "selector": {"matchLabels": {"app": pkg}},
                        "template": {"metadata": {"labels": {"app": pkg}}, "spec": {
                            "serviceAccountName": pkg,
                            "containers": [{"name": "manager", "image": format!("example.invalid/{pkg}:{}", self.version)}]
                        }}
                    }}]
                }}
            }
        });
        let spec = &mut csv["spec"]["install"]["spec"]["deployments"][0]["spec"];
        if self.never_ready {
            spec["template"]["spec"]["nodeSelector"] = json!({"pom-e2e/no-such-node": "true"});
        }
        if let Some(prefix) = &self.webhook_prefix {
            spec["template"]["metadata"]["annotations"] = json!({SERVES_ANNOTATION: prefix});
        }
        if let Some(seconds) = self.min_ready_seconds {
            spec["minReadySeconds"] = json!(seconds);
        }
        let mut crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": self.crd_name()},
            "spec": {
                "group": self.crd_group(),
                "names": {"kind": "Widget", "listKind": "WidgetList", "plural": "widgets", "singular": "widget"},
                "scope": "Namespaced",
                "versions": [{"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {"spec": {"type": "object", "properties": {"size": {"type": self.crd_size_type}}}}
                }}}]
            }
        });
        if self.webhooks_served {
            let mut v2 = crd["spec"]["versions"][0].clone();
            v2["name"] = json!("v2");
            v2["storage"] = json!(false);
            if let Some(versions) = crd["spec"]["versions"].as_array_mut() {
                versions.push(v2);
            }
        }
        let mut manifests = vec![csv.to_string()];
        if self.with_crd {
            manifests.push(crd.to_string());
        }
        manifests.extend(self.extra.iter().map(Value::to_string));
        manifests
    }

    fn fbc_bundle(&self, image: Option<&str>) -> Value {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": self.package, "version": self.version}}),
        ];
        if let Some(max) = &self.max_openshift_version {
            properties.push(json!({"type": "olm.maxOpenShiftVersion", "value": max}));
        }
        if image.is_none() {
            for manifest in self.manifests() {
                let data = base64::engine::general_purpose::STANDARD.encode(manifest);
                properties.push(json!({"type": "olm.bundle.object", "value": {"data": data}}));
            }
        }
        json!({
            "schema": "olm.bundle",
            "package": self.package,
            "name": self.name(),
            "image": image.unwrap_or(""),
            "properties": properties,
        })
    }
}

/// `<package>.v<version>`.
#[must_use]
pub fn bundle_name(package: &str, version: &str) -> String {
    format!("{package}.v{version}")
}

/// An FBC JSON stream for `bundles` (all in channel `stable`, the default), with bundle
/// objects inline; `images` maps a bundle name to an image reference to use instead.
#[must_use]
pub fn catalog_json(bundles: &[TestBundle], images: &[(String, String)]) -> String {
    let mut packages: Vec<&str> = bundles.iter().map(|b| b.package.as_str()).collect();
    packages.sort_unstable();
    packages.dedup();
    let mut out = String::new();
    for package in packages {
        out.push_str(
            &json!({"schema": "olm.package", "name": package, "defaultChannel": "stable"})
                .to_string(),
        );
        out.push('\n');
        let entries: Vec<Value> = bundles
            .iter()
            .filter(|b| b.package == package)
            .map(|b| {
                let mut entry = json!({"name": b.name()});
                if let Some(r) = &b.replaces {
                    entry["replaces"] = Value::String(r.clone());
                }
                if let Some(s) = &b.skip_range {
                    entry["skipRange"] = Value::String(s.clone());
                }
                entry
            })
            .collect();
        out.push_str(&json!({"schema": "olm.channel", "package": package, "name": "stable", "entries": entries}).to_string());
        out.push('\n');
        for bundle in bundles.iter().filter(|b| b.package == package) {
            let image = images
                .iter()
                .find(|(name, _)| *name == bundle.name())
                .map(|(_, i)| i.as_str());
            out.push_str(&bundle.fbc_bundle(image).to_string());
            out.push('\n');
        }
    }
    out
}
