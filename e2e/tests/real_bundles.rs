#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Real bundles on the real API server (issue 21 item 6, issue 34 item 10): community
//! operators' latest bundles from `../shared/testdata/real/community-operators-heads/`, byte
//! for byte as their authors published them, pushed as bundle images to the loopback registry,
//! listed in a catalog, each installed by its own PlatformOperator.
//!
//! The bundles are a fixed list, [`BUNDLES`], each with what it is (webhooks, OwnNamespace
//! only, a suggested namespace, plain) and exactly what its PO must grant for it to install
//! (the consent classes, the omitted bindings, the content exceptions; nothing: installed as
//! published). The test fails when a listed bundle renders differently from its row (refused
//! for anything else, or needing another consent, omission or exception, or a consent it no
//! longer needs), when POM refuses it, or when it is not installed as the API server shows it:
//! its PO `Installed=True`, every Deployment it ships rolled out (observed, updated, ready and
//! available replicas as many as asked) and labelled as the PO's, every CRD it ships
//! Established.
//!
//! How the list was chosen (from the 102 heads): every bundle that ships webhooks or needs an
//! omitted binding, every OwnNamespace-only one, then the ones with a suggested namespace in
//! name order, 36 in all (each more costs CI time: all 88 that qualify install in ~7 minutes on
//! 2 cores). The 11 ACK controllers listed all suggest `ack-system`, all created at once: the
//! API server shows it recorded by exactly one, the others installed under their own names. Left out: bundles that share cluster-scoped names with one already
//! listed (every ACK controller ships the same two CRDs; an admin could not install both under
//! OLM either); bundles that ship sample custom resources of their own CRDs (operator-registry's
//! kinds do not include them, their refusal names a `KindNotAllowed` exception, and POM cannot
//! apply a resource of a CRD it has not yet created in the same pass); bundles whose pods
//! select nodes by labels or affinity that kwok's simulated node does not match
//! (`beta.kubernetes.io/os`, control-plane roles); bundles that ship Prometheus-operator or
//! console kinds, which the test's control plane does not serve. The test checks the list
//! still keeps those rules, so a changed bundle fails by name rather than by a timeout.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, ListParams};
use pom_e2e::Registry;
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::real_install::{Published, csv_identity, granting, publish, wait_installed};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_catalog_serves};
use pom_render::{
    BundleFiles, ContentException, ContentRule, InstallMode, Lift, OmittedObject, PowerClass,
    RenderError, RenderOptions, RenderedBundle, WebhookConsent, default_install_namespace, render,
};
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(300);

/// What a listed bundle is, as rendered (what the list covers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// Ships admission or conversion webhooks.
    Webhooks,
    /// Installs only without a binding nothing can allow (`spec.omitObjects`; no webhooks).
    Omits,
    /// Supports OwnNamespace only (neither of the above).
    OwnNamespace,
    /// AllNamespaces, with a suggested install namespace.
    Suggested,
    /// AllNamespaces, installed in the PO's name.
    Plain,
}

/// One thing a listed bundle's PO grants: a consent class, a binding omitted
/// (`spec.omitObjects`: kind, name), a content exception (rule, kind, name), or a webhook's
/// consent bound to what it covers (`spec.consent.webhooks`: name, digest).
#[derive(Debug, Clone, Copy)]
#[allow(dead_code)] // no listed bundle needs an exception since webhooks are consented
enum Grant {
    Consent(PowerClass),
    Omit(&'static str, &'static str),
    Except(ContentRule, &'static str, &'static str),
    Webhook(&'static str, &'static str),
}

use Grant::{Consent, Omit, Webhook};
use PowerClass::{ClusterAdminEquivalent, PlatformConfig, PrivilegedWorkloads};
use Shape::{Omits, OwnNamespace, Suggested, Webhooks};

/// The bundles installed (`<package>/<version>` under the heads), what each is, and what its
/// PO grants (empty: installed as published).
#[rustfmt::skip]
const BUNDLES: &[(&str, Shape, &[Grant])] = &[
    ("alloydb-omni-operator/1.8.0", Webhooks, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads)]),
    ("bpfman-operator/0.6.0", Omits, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Omit("RoleBinding", "bpfman-agent-rolebinding")]),
    ("eclipse-che/7.121.0", Webhooks, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads)]),
    ("edp-keycloak-operator/1.35.0", Webhooks, &[Consent(ClusterAdminEquivalent)]),
    ("hermes-operator/0.1.20", Webhooks, &[Consent(ClusterAdminEquivalent)]),
    ("infinispan/2.5.14", Webhooks, &[Consent(ClusterAdminEquivalent), Consent(PlatformConfig)]),
    ("layer7-operator/1.3.0", Webhooks, &[Consent(ClusterAdminEquivalent)]),
    ("marin3r/0.13.1", Webhooks, &[Consent(ClusterAdminEquivalent),
        Webhook("sidecar-injector.marin3r.3scale.net", "sha256:91d7435014ecfbae6f8d7f763e9203ba45658b109947658c832488f3e27beb36"),
    ]),
    ("ndb-operator/1.10.0", Webhooks, &[Consent(ClusterAdminEquivalent)]),
    ("nexus-operator/3.5.0", Webhooks, &[]),
    ("node-maintenance-operator/0.21.0", Webhooks, &[Consent(ClusterAdminEquivalent)]),
    ("opendatahub-operator/3.5.0", Webhooks, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Consent(PlatformConfig),
        Webhook("connection-notebook.opendatahub.io", "sha256:938ff6880468c12244c8dca882b53c930052868cc110b2e87fb984648b350726"),
        Webhook("dashboard-acceleratorprofile-validator.opendatahub.io", "sha256:fca108825729980ede44772065815f4e67687d540e0c4469b4f52e78ef255629"),
        Webhook("dashboard-hardwareprofile-validator.opendatahub.io", "sha256:31c34e98011f835911ce2cd28dd009136d51a6f2e8dd355a66af342e52d1f6e7"),
        Webhook("hardwareprofile-notebook-injector.opendatahub.io", "sha256:938ff6880468c12244c8dca882b53c930052868cc110b2e87fb984648b350726"),
        Webhook("podmonitor-injector.opendatahub.io", "sha256:2e2f62c4279029736c5ac1c1aed94df32e7783ce76f117d3bf71abd4458eff77"),
        Webhook("servicemonitor-injector.opendatahub.io", "sha256:0829f4867c4e84c37a9ea0582c07bf8448b760b24fad852ae68d511bf93bf18b"),
    ]),
    ("slurm-operator/1.0.1", Webhooks, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads)]),
    ("apicurito/1.0.3", OwnNamespace, &[]),
    ("assisted-service-operator/0.7.74", OwnNamespace, &[Consent(ClusterAdminEquivalent)]),
    ("beegfs-csi-driver-operator/1.8.0", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads)]),
    ("ember-csi-community-operator/0.9.9", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Consent(PlatformConfig)]),
    ("hedvig-operator/1.0.2", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Consent(PlatformConfig)]),
    ("keycloak-permissions-operator/1.4.1", OwnNamespace, &[Consent(ClusterAdminEquivalent)]),
    ("microcks/1.10.0", OwnNamespace, &[]),
    ("multicluster-global-hub-operator/1.7.0", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads)]),
    ("oadp-operator/0.5.6", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Consent(PlatformConfig)]),
    ("odoo-operator/0.0.2", OwnNamespace, &[]),
    ("stolostron/0.8.2", OwnNamespace, &[Consent(ClusterAdminEquivalent), Consent(PrivilegedWorkloads), Consent(PlatformConfig)]),
    ("t8c/42.22.0", OwnNamespace, &[]),
    ("ack-acmpca-controller/1.4.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-bedrock-controller/1.3.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-bedrockagentcorecontrol-controller/1.14.0", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-cloudfront-controller/1.7.0", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-codeartifact-controller/1.6.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-eks-controller/1.20.0", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-elbv2-controller/1.6.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-eventbridge-controller/1.5.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-firehose-controller/0.4.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-kafka-controller/1.11.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
    ("ack-keyspaces-controller/1.5.1", Suggested, &[Consent(ClusterAdminEquivalent)]),
];

struct Listed {
    package: String,
    /// Where POM installs it first when free: its suggested namespace unless that is one of
    /// the platform's, else the package's name.
    default_namespace: String,
    dir: PathBuf,
    csv: String,
    version: String,
    bundle: RenderedBundle,
    spec: Value,
}

fn heads() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .parent()?
        .join("shared/testdata/real/community-operators-heads");
    if dir.is_dir() {
        Some(dir)
    } else if pom_e2e::skip::in_ci() {
        panic!("{} is absent", dir.display());
    } else {
        pom_e2e::skip::skip(&format!("{} is absent", dir.display()));
        None
    }
}

/// The lifts a grant is, as the content policy names them.
fn lift(grant: Grant) -> Lift {
    match grant {
        Consent(class) => Lift::Consent(class),
        Omit(kind, name) => Lift::Omit(OmittedObject {
            kind: kind.to_owned(),
            name: name.to_owned(),
        }),
        Grant::Except(rule, kind, name) => Lift::Exception(ContentException {
            rule,
            kind: kind.to_owned(),
            name: name.to_owned(),
        }),
        Webhook(name, covers) => Lift::Webhook(WebhookConsent {
            name: name.to_owned(),
            covers: covers.to_owned(),
        }),
    }
}

/// Renders `files` as the controller will, with nothing granted: what the content policy asks
/// must be exactly `grants`. Then renders with them, and returns the result with the PO spec
/// that grants them.
fn judge(files: &BundleFiles, package: &str, grants: &[Grant]) -> (RenderedBundle, Value) {
    let namespace = default_install_namespace(files, package).unwrap();
    let opts = RenderOptions {
        operator_condition: true,
        manager_namespace: Some("openshift-platform-operators".into()),
        ..RenderOptions::new(namespace)
    };
    let listed: BTreeSet<Lift> = grants.iter().copied().map(lift).collect();
    let asked: BTreeSet<Lift> = match render(files, &opts) {
        Ok(_) => BTreeSet::new(),
        Err(RenderError::ContentPolicy(violations)) => {
            assert_eq!(
                violations.unliftable(),
                0,
                "{package} is refused for good: {violations:?}"
            );
            violations.lifts().into_iter().cloned().collect()
        }
        Err(err) => panic!("{package} does not render: {err}"),
    };
    assert_eq!(
        asked, listed,
        "{package}: what the content policy asks (left) is not what the list grants (right)"
    );
    granting(files, package, &opts, listed)
}

fn shape(bundle: &RenderedBundle) -> Shape {
    if !bundle.webhook_services.is_empty() {
        Webhooks
    } else if !bundle.omitted.is_empty() {
        Omits
    } else if bundle.install_mode == Some(InstallMode::OwnNamespace) {
        OwnNamespace
    } else if bundle.suggested_namespace.is_some() {
        Suggested
    } else {
        Shape::Plain
    }
}

/// Cluster-scoped names a bundle claims (CRDs, ClusterRoles and bindings, webhooks).
fn cluster_names(bundle: &RenderedBundle) -> BTreeSet<(String, String)> {
    bundle
        .objects
        .iter()
        .filter(|o| o["metadata"]["namespace"].is_null())
        .map(|o| {
            (
                o["kind"].as_str().unwrap_or_default().to_owned(),
                o["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
        .collect()
}

/// Every listed bundle, judged against its row and against the rules the list was chosen by.
fn listed(root: &Path) -> Vec<Listed> {
    let mut claimed = BTreeMap::new();
    BUNDLES
        .iter()
        .map(|(path, want, grants)| {
            let dir = root.join(path);
            let package = path.split('/').next().unwrap().to_owned();
            let files = BundleFiles::load_dir(&dir)
                .unwrap_or_else(|err| panic!("{}: {err}", dir.display()));
            let (csv, version) = csv_identity(&files)
                .unwrap_or_else(|| panic!("{path} has no ClusterServiceVersion"));
            let (bundle, spec) = judge(&files, &package, grants);
            assert_eq!(shape(&bundle), *want, "{path}");
            for name in cluster_names(&bundle) {
                if let Some(other) = claimed.insert(name.clone(), package.clone()) {
                    panic!("{path} and {other} both claim {name:?}");
                }
            }
            assert!(
                !selects_nodes(&bundle),
                "{path} selects nodes the simulated node does not match"
            );
            assert!(
                !needs_monitoring_kinds(&bundle),
                "{path} ships kinds the test's control plane does not serve"
            );
            Listed {
                default_namespace: default_install_namespace(&files, &package).unwrap(),
                package,
                dir,
                csv,
                version,
                bundle,
                spec,
            }
        })
        .collect()
}

/// Whether the bundle ships kinds of the Prometheus operator or the console, which the test's
/// control plane does not serve (an OpenShift cluster does).
fn needs_monitoring_kinds(bundle: &RenderedBundle) -> bool {
    bundle.objects.iter().any(|o| {
        let api_version = o["apiVersion"].as_str().unwrap_or_default();
        [
            "monitoring.coreos.com/",
            "console.openshift.io/",
            "autoscaling.k8s.io/",
        ]
        .iter()
        .any(|group| api_version.starts_with(group))
    })
}

/// The labels of the harness's simulated node (`kwok-node-0`).
const NODE_LABELS: &[(&str, &str)] = &[
    ("type", "kwok"),
    ("kubernetes.io/os", "linux"),
    ("kubernetes.io/arch", "amd64"),
    ("kubernetes.io/hostname", "kwok-node-0"),
];

/// Whether a Deployment's pods select nodes (nodeSelector, required node affinity) that kwok's
/// simulated node does not match, as the scheduler would judge them.
fn selects_nodes(bundle: &RenderedBundle) -> bool {
    let label = |key: &str| NODE_LABELS.iter().find(|(k, _)| *k == key).map(|(_, v)| *v);
    let expression_holds = |e: &Value| {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .map(|v| v.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        match (e["operator"].as_str(), label(key)) {
            (Some("In"), Some(value)) => values.contains(&value),
            (Some("NotIn"), value) => value.is_none_or(|v| !values.contains(&v)),
            (Some("Exists"), value) => value.is_some(),
            (Some("DoesNotExist"), value) => value.is_none(),
            _ => false,
        }
    };
    bundle
        .objects
        .iter()
        .filter(|o| o["kind"] == "Deployment")
        .any(|d| {
            let pod = &d["spec"]["template"]["spec"];
            let selector_misses = pod["nodeSelector"].as_object().is_some_and(|s| {
                s.iter()
                    .any(|(k, v)| label(k) != v.as_str())
            });
            let terms = &pod["affinity"]["nodeAffinity"]
                ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"];
            let affinity_misses = terms.as_array().is_some_and(|terms| {
                !terms.iter().any(|term| {
                    term["matchFields"].is_null()
                        && term["matchExpressions"]
                            .as_array()
                            .is_some_and(|all| all.iter().all(expression_holds))
                })
            });
            selector_misses || affinity_misses
        })
}

#[tokio::test]
async fn real_community_bundles_install_from_the_loopback_registry() {
    let Some(root) = heads() else {
        return;
    };
    // Judged before any process starts: a row that no longer holds fails by name.
    let chosen = listed(&root);
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();

    let published: Vec<Published<'_>> = chosen
        .iter()
        .map(|c| Published {
            package: &c.package,
            csv: &c.csv,
            version: &c.version,
            dir: &c.dir,
        })
        .collect();
    let fbc = publish(&host, "bundles", &published).await;
    configmap_catalog(&client, "real", &fbc, 0).await;
    for c in &chosen {
        create_po(&client, &c.package, c.spec.clone()).await;
    }
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![host.clone()]));
    wait_catalog_serves(&client, "real", &fbc).await;

    let installs: Vec<(&str, &RenderedBundle)> = chosen
        .iter()
        .map(|c| (c.package.as_str(), &c.bundle))
        .collect();
    let (list, took) = wait_installed(&client, &installs, WAIT).await;

    // A suggested namespace several listed bundles share is recorded by exactly one PO; the
    // others install under their own names.
    let recorded = |package: &str| {
        list.iter()
            .find(|p| p.metadata.name.as_deref() == Some(package))
            .and_then(|p| p.status.as_ref()?.install_namespace.clone())
            .unwrap_or_default()
    };
    let mut suggested: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for c in chosen.iter().filter(|c| c.default_namespace != c.package) {
        suggested
            .entry(&c.default_namespace)
            .or_default()
            .push(&c.package);
    }
    assert!(suggested.values().any(|packages| packages.len() > 1));
    for (namespace, packages) in suggested {
        let (holders, others): (Vec<&str>, Vec<&str>) = packages
            .into_iter()
            .partition(|package| recorded(package) == namespace);
        assert_eq!(holders.len(), 1, "{namespace} recorded by {holders:?}");
        for package in others {
            assert_eq!(recorded(package), package, "suggested {namespace}");
        }
    }

    // Each PO shows its bundle's powers by class, as `pomctl render --permissions` computes.
    for c in &chosen {
        let po = list
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(c.package.as_str()))
            .unwrap();
        let shown: BTreeSet<String> = po
            .status
            .as_ref()
            .unwrap()
            .powers
            .iter()
            .map(|p| p.class.clone())
            .collect();
        let computed: BTreeSet<String> = c
            .bundle
            .powers
            .classes()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, computed, "{}", c.package);
    }

    // What the set covered, and the webhooks really registered with POM's CA.
    let webhooks = chosen
        .iter()
        .filter(|c| !c.bundle.webhook_services.is_empty())
        .count();
    let own_namespace = chosen
        .iter()
        .filter(|c| c.bundle.install_mode == Some(InstallMode::OwnNamespace))
        .count();
    let consented = chosen
        .iter()
        .filter(|c| !c.bundle.consents_used.is_empty())
        .count();
    let monitoring = chosen
        .iter()
        .filter(|c| !c.bundle.namespace_metadata.labels.is_empty())
        .count();
    eprintln!(
        "real bundles installed: {} in {:?} (webhooks {webhooks}, OwnNamespace {own_namespace}, with consent {consented}, cluster-monitoring {monitoring})",
        chosen.len(),
        took
    );
    assert!(
        webhooks >= 5 && own_namespace >= 5,
        "{webhooks} webhook and {own_namespace} OwnNamespace bundles"
    );
    assert!(chosen.iter().any(|c| {
        c.bundle
            .consents_used
            .contains(&PowerClass::ClusterAdminEquivalent)
    }));
    // Installed without the bindings their POs omit (spec.omitObjects): none was applied.
    let omitted: Vec<_> = chosen.iter().flat_map(|c| &c.bundle.omitted).collect();
    assert!(!omitted.is_empty(), "no chosen bundle needed an omission");
    let role_bindings: Api<RoleBinding> = Api::all(client.clone());
    let cluster_role_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for omission in omitted {
        let present = match omission.kind.as_str() {
            "ClusterRoleBinding" => cluster_role_bindings
                .get_opt(&omission.name)
                .await
                .unwrap()
                .is_some(),
            _ => role_bindings
                .list(&ListParams::default())
                .await
                .unwrap()
                .items
                .iter()
                .any(|b| b.metadata.name.as_deref() == Some(omission.name.as_str())),
        };
        assert!(!present, "{omission} but applied");
    }
    let hooks: Api<ValidatingWebhookConfiguration> = Api::all(client.clone());
    eventually(
        Duration::from_secs(60),
        "webhook configurations with a caBundle",
        || async {
            let list = hooks.list(&Default::default()).await.ok()?.items;
            let registered = list
                .iter()
                .filter(|h| {
                    h.webhooks
                        .iter()
                        .flatten()
                        .all(|w| w.client_config.ca_bundle.is_some())
                })
                .count();
            (registered > 0 && registered == list.len()).then_some(())
        },
    )
    .await;
    manager.stop().await;
}
