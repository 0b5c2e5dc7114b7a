#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 33, must show: Red Hat's own optional operators, the operators POM exists for,
//! installed on the real API server from `../shared/testdata/real/redhat-operators/`
//! (SOURCES.md), byte for byte as Red Hat published them, pushed as bundle images to the
//! loopback registry and listed in one catalog.
//!
//! Each PO grants exactly what the bundle's first refusal asks and nothing else: three need the
//! admin's consent only (cert-manager-operator, cluster-logging-operator,
//! windows-machine-config-operator), external-dns-operator the refusal's own lift (bindings
//! omitted, no consent). The test fails when a bundle asks for anything else, when POM refuses
//! it, or when it is not installed as the API server shows it (PO `Installed=True`, each
//! Deployment rolled out and the PO's, each CRD Established), when an omitted binding was
//! applied, or when a PO's `status.powers` is not what `pomctl render --permissions` computes.
//!
//! The plane serves what an OpenShift cluster serves beside them: the monitoring
//! (prometheus-operator) and console (openshift/api) CRDs as published
//! (`e2e/tools/platform-crds.sh`), and its simulated node carries the control-plane role label
//! an OpenShift control-plane node has (windows-machine-config-operator runs there).

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use k8s_openapi::api::core::v1::Node;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::discovery::ApiResource;
use pom_e2e::Registry;
use pom_e2e::manager::Manager;
use pom_e2e::published_crds::PLATFORM;
use pom_e2e::real_install::{Published, csv_identity, granting, publish, wait_installed};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_catalog_serves};
use pom_render::{
    BundleFiles, Lift, PowerClass, RenderError, RenderOptions, RenderedBundle,
    default_install_namespace, render,
};
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(300);

/// What each bundle's refusal asks: the consent classes, and whether it omits bindings.
const EXPECTED: &[(&str, &[PowerClass], bool)] = &[
    (
        "cert-manager-operator",
        &[
            ADMIN,
            PowerClass::PrivilegedWorkloads,
            PowerClass::PlatformConfig,
        ],
        false,
    ),
    (
        "cluster-logging-operator",
        &[
            ADMIN,
            PowerClass::PrivilegedWorkloads,
            PowerClass::PlatformConfig,
        ],
        false,
    ),
    (
        "windows-machine-config-operator",
        &[
            ADMIN,
            PowerClass::PrivilegedWorkloads,
            PowerClass::PlatformConfig,
        ],
        false,
    ),
    ("external-dns-operator", &[], true),
];
const ADMIN: PowerClass = PowerClass::ClusterAdminEquivalent;

struct Listed {
    package: String,
    /// Where POM installs it: its suggested namespace unless that is one of the platform's.
    namespace: String,
    dir: PathBuf,
    csv: String,
    version: String,
    bundle: RenderedBundle,
    spec: Value,
}

fn redhat_dir() -> Option<PathBuf> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()?
        .parent()?
        .join("shared/testdata/real/redhat-operators");
    if dir.is_dir() {
        Some(dir)
    } else {
        pom_e2e::skip::skip(&format!("{} is absent", dir.display()));
        None
    }
}

/// Each bundle rendered as the manager renders it, with nothing granted: what its refusal asks
/// must be what [`EXPECTED`] says; the PO grants exactly that.
fn listed(root: &std::path::Path) -> Vec<Listed> {
    EXPECTED
        .iter()
        .map(|(package, consent, omits)| {
            let dir = root.join(package);
            let files = BundleFiles::load_dir(&dir).unwrap();
            let (csv, version) = csv_identity(&files).unwrap();
            let opts = RenderOptions {
                operator_condition: true,
                manager_namespace: Some("openshift-platform-operators".into()),
                ..RenderOptions::new(default_install_namespace(&files, package).unwrap())
            };
            let Err(RenderError::ContentPolicy(refusal)) = render(&files, &opts) else {
                panic!("{package}: expected a refusal that asks for consent");
            };
            assert_eq!(refusal.unliftable(), 0, "{package}: {refusal}");
            let lifts: BTreeSet<Lift> = refusal.lifts().into_iter().cloned().collect();
            let asked: BTreeSet<PowerClass> = lifts
                .iter()
                .filter_map(|l| match l {
                    Lift::Consent(class) => Some(*class),
                    _ => None,
                })
                .collect();
            assert_eq!(
                asked,
                consent.iter().copied().collect(),
                "{package}: consent"
            );
            let omitted = lifts.iter().any(|l| matches!(l, Lift::Omit(_)));
            assert_eq!(omitted, *omits, "{package}: omissions in {lifts:?}");
            assert!(
                lifts
                    .iter()
                    .all(|l| matches!(l, Lift::Consent(_) | Lift::Omit(_))),
                "{package}: no exception or webhook consent expected: {lifts:?}"
            );
            let (bundle, spec) = granting(&files, package, &opts, lifts);
            Listed {
                package: (*package).to_owned(),
                namespace: opts.install_namespace.clone(),
                dir,
                csv,
                version,
                bundle,
                spec,
            }
        })
        .collect()
}

/// The plane's simulated node as an OpenShift control-plane node is labelled.
async fn label_control_plane_node(client: &kube::Client) {
    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            "kwok-node-0",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {
                "node-role.kubernetes.io/control-plane": "",
                "node-role.kubernetes.io/master": ""
            }}})),
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn red_hat_operators_install_with_the_consent_their_powers_need() {
    let Some(root) = redhat_dir() else {
        return;
    };
    let Some(crds_dir) = PLATFORM.require() else {
        return;
    };
    let chosen = listed(&root);
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    PLATFORM.install(&client, &crds_dir).await.unwrap();
    label_control_plane_node(&client).await;
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
    let fbc = publish(&host, "redhat", &published).await;
    configmap_catalog(&client, "redhat", &fbc, 0).await;
    for c in &chosen {
        create_po(&client, &c.package, c.spec.clone()).await;
    }
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![host.clone()]));
    wait_catalog_serves(&client, "redhat", &fbc).await;

    let installs: Vec<(&str, &RenderedBundle)> = chosen
        .iter()
        .map(|c| (c.package.as_str(), &c.bundle))
        .collect();
    let (list, took) = wait_installed(&client, &installs, WAIT).await;
    eprintln!("Red Hat operators installed: {} in {took:?}", chosen.len());

    for c in &chosen {
        let po = list
            .iter()
            .find(|p| p.metadata.name.as_deref() == Some(c.package.as_str()))
            .unwrap();
        let status = po.status.as_ref().unwrap();
        // Installed where the render put it (no two of these share a namespace).
        assert_eq!(
            status.install_namespace.as_deref(),
            Some(c.namespace.as_str()),
            "{}",
            c.package
        );
        // Its powers by class, as `pomctl render --permissions` computes them.
        let shown: BTreeSet<String> = status.powers.iter().map(|p| p.class.clone()).collect();
        let computed: BTreeSet<String> = c
            .bundle
            .powers
            .classes()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(shown, computed, "{}", c.package);
        for class in &c.bundle.consents_used {
            assert!(shown.contains(&class.to_string()), "{}: {class}", c.package);
        }
        // The shipped monitoring and console objects are on the API server.
        for object in c.bundle.objects.iter().filter(|o| {
            let api_version = o["apiVersion"].as_str().unwrap_or_default();
            api_version.starts_with("monitoring.coreos.com/")
                || api_version.starts_with("console.openshift.io/")
        }) {
            let (group, version) = object["apiVersion"]
                .as_str()
                .unwrap()
                .split_once('/')
                .unwrap();
            let kind = object["kind"].as_str().unwrap();
            let name = object["metadata"]["name"].as_str().unwrap();
            let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
            let api: Api<DynamicObject> = match object["metadata"]["namespace"].as_str() {
                Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
                None => Api::all_with(client.clone(), &resource),
            };
            assert!(
                api.get_opt(name).await.unwrap().is_some(),
                "{}: {kind} {name} not applied",
                c.package
            );
        }
    }

    // external-dns-operator: none of the bindings its PO omits was applied (a bundle's
    // RoleBindings go to its install namespace; cluster-logging ships one of the same name).
    let omitted: Vec<_> = chosen
        .iter()
        .flat_map(|c| c.bundle.omitted.iter().map(move |o| (c, o)))
        .collect();
    assert!(!omitted.is_empty());
    let cluster_role_bindings: Api<ClusterRoleBinding> = Api::all(client.clone());
    for (c, omission) in omitted {
        let present = match omission.kind.as_str() {
            "ClusterRoleBinding" => cluster_role_bindings
                .get_opt(&omission.name)
                .await
                .unwrap()
                .is_some(),
            _ => Api::<RoleBinding>::namespaced(client.clone(), &c.namespace)
                .get_opt(&omission.name)
                .await
                .unwrap()
                .is_some(),
        };
        assert!(!present, "{}: {omission} but applied", c.package);
    }
    manager.stop().await;
}
