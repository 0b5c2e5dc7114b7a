#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Real bundles on the real API server (issue 21 item 6): community operators' latest bundles
//! from `../shared/testdata/real/community-operators-heads/`, byte for byte as their authors
//! published them, pushed as bundle images to the loopback registry, listed in a catalog, each
//! installed by its own PlatformOperator (with exactly the consent and exceptions `pomctl
//! render` names for it) and each seen `Installed=True` with kwok rolling its Deployments out.
//! The set holds every bundle that ships webhooks, every OwnNamespace-only one, the ones with
//! a suggested namespace, and others up to [`WANTED`]. Left out: bundles that share
//! cluster-scoped names with one already chosen (every ACK controller ships the same two CRDs;
//! an admin could not install both under OLM either); bundles that ship sample custom
//! resources of their own CRDs (operator-registry's kinds do not include them, their refusal
//! names a `KindNotAllowed` exception, and POM cannot apply a resource of a CRD it has not
//! yet created in the same pass); bundles whose pods select nodes by labels or affinity that
//! kwok's simulated node does not match (`beta.kubernetes.io/os`, control-plane roles); bundles
//! that ship Prometheus-operator or console kinds, which the test's control plane does not
//! serve.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::rbac::v1::{ClusterRoleBinding, RoleBinding};
use kube::api::{Api, ListParams};
use pom_api::PlatformOperator;
use pom_e2e::Registry;
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{configmap_catalog, create_po, simulated_plane, wait_catalog_serves};
use pom_render::{
    BundleFiles, ContentRule, InstallMode, Lift, PowerClass, RenderError, RenderOptions,
    RenderedBundle, default_install_namespace, render,
};
use serde_json::{Value, json};

/// How many real bundles the test installs (at least 30, issue 21 item 6; more costs CI time:
/// all 88 that qualify install in ~7 minutes on 2 cores).
const WANTED: usize = 36;
const WAIT: Duration = Duration::from_secs(300);

struct Chosen {
    package: String,
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

/// The CSV's name and version, read from the bundle's files.
fn csv_identity(files: &BundleFiles) -> Option<(String, String)> {
    files.files.iter().find_map(|(path, bytes)| {
        if !path.starts_with("manifests/") {
            return None;
        }
        let value: Value = serde_saphyr::from_slice(bytes).ok()?;
        (value["kind"] == "ClusterServiceVersion").then(|| {
            (
                value["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
                value["spec"]["version"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            )
        })
    })
}

/// Renders as the controller will, lifting exactly what the refusal names; the PO spec that
/// gives it.
fn judge(files: &BundleFiles, package: &str) -> Option<(RenderedBundle, Value)> {
    let namespace = default_install_namespace(files, package).ok()?;
    let opts = RenderOptions {
        operator_condition: true,
        manager_namespace: Some("openshift-platform-operators".into()),
        ..RenderOptions::new(namespace)
    };
    let mut spec = json!({"package": {"name": package}});
    match render(files, &opts) {
        Ok(bundle) => Some((bundle, spec)),
        Err(RenderError::ContentPolicy(violations)) if violations.unliftable() == 0 => {
            let mut lifted = opts.clone();
            let mut consent = serde_json::Map::new();
            let mut exceptions = Vec::new();
            let mut omissions = Vec::new();
            for lift in violations.lifts() {
                match lift {
                    Lift::Consent(class) => {
                        lifted.consent.insert(*class);
                        consent.insert(class.consent_field().to_owned(), json!(true));
                    }
                    // A kind operator-registry does not know: see the module documentation.
                    Lift::Exception(e) if e.rule == ContentRule::KindNotAllowed => return None,
                    Lift::Exception(e) => {
                        lifted.exceptions.push(e.clone());
                        exceptions
                            .push(json!({"rule": e.rule.as_str(), "kind": e.kind, "name": e.name}));
                    }
                    Lift::Omit(o) => {
                        lifted.omit.push(o.clone());
                        omissions.push(json!({"kind": o.kind, "name": o.name}));
                    }
                }
            }
            let bundle = render(files, &lifted).ok()?;
            spec["consent"] = Value::Object(consent);
            if !exceptions.is_empty() {
                spec["contentExceptions"] = Value::Array(exceptions);
            }
            if !omissions.is_empty() {
                spec["omitObjects"] = Value::Array(omissions);
            }
            Some((bundle, spec))
        }
        Err(_) => None,
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

fn choose(root: &Path) -> Vec<Chosen> {
    let mut candidates = Vec::new();
    let mut packages: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    packages.sort();
    for package_dir in packages {
        let package = package_dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let dir = std::fs::read_dir(&package_dir)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let files = BundleFiles::load_dir(&dir).unwrap();
        let (Some((bundle, spec)), Some((csv, version))) =
            (judge(&files, &package), csv_identity(&files))
        else {
            continue;
        };
        // The interesting ones first: webhooks or omitted bindings, OwnNamespace, a suggested
        // namespace.
        let rank = if !bundle.webhook_services.is_empty() || !bundle.omitted.is_empty() {
            0
        } else if bundle.install_mode == Some(InstallMode::OwnNamespace) {
            1
        } else if bundle.suggested_namespace.is_some() {
            2
        } else {
            3
        };
        candidates.push((
            rank,
            Chosen {
                package,
                dir,
                csv,
                version,
                bundle,
                spec,
            },
        ));
    }
    candidates.sort_by_key(|(rank, c)| (*rank, c.package.clone()));
    let mut claimed = BTreeSet::new();
    let mut chosen = Vec::new();
    for (_, candidate) in candidates {
        let names = cluster_names(&candidate.bundle);
        if !names.is_disjoint(&claimed) {
            continue;
        }
        if selects_nodes(&candidate.bundle) || needs_monitoring_kinds(&candidate.bundle) {
            continue;
        }
        claimed.extend(names);
        chosen.push(candidate);
        if chosen.len() == WANTED {
            break;
        }
    }
    chosen
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
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();
    let chosen = choose(&root);
    assert!(
        chosen.len() >= WANTED,
        "only {} real bundles chosen",
        chosen.len()
    );

    let mut entries = Vec::new();
    for c in &chosen {
        let image = pom_e2e::oci_publish::push_bundle_dir(
            &host,
            &format!("bundles/{}", c.package),
            &c.version,
            &c.dir,
        )
        .await
        .unwrap();
        entries
            .push(json!({"schema": "olm.package", "name": c.package, "defaultChannel": "stable"}));
        entries.push(
            json!({"schema": "olm.channel", "package": c.package, "name": "stable",
            "entries": [{"name": c.csv}]}),
        );
        entries.push(
            json!({"schema": "olm.bundle", "package": c.package, "name": c.csv,
            "image": image, "properties": [
                {"type": "olm.package", "value": {"packageName": c.package, "version": c.version}}
            ]}),
        );
    }
    let fbc = entries
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n");
    configmap_catalog(&client, "real", &fbc, 0).await;
    for c in &chosen {
        create_po(&client, &c.package, c.spec.clone()).await;
    }
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![host.clone()]));
    wait_catalog_serves(&client, "real", &fbc).await;

    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let names: Vec<String> = chosen.iter().map(|c| c.package.clone()).collect();
    let not_installed = |list: &[PlatformOperator]| -> BTreeMap<String, String> {
        names
            .iter()
            .filter_map(|name| {
                let po = list
                    .iter()
                    .find(|p| p.metadata.name.as_deref() == Some(name));
                let installed = po
                    .and_then(|p| p.status.as_ref())
                    .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Installed"));
                match installed {
                    Some(c) if c.status == "True" => None,
                    Some(c) => Some((name.clone(), format!("{}: {}", c.reason, c.message))),
                    None => Some((name.clone(), "no Installed condition".into())),
                }
            })
            .collect()
    };
    let started = std::time::Instant::now();
    loop {
        let list = pos.list(&Default::default()).await.unwrap().items;
        let missing = not_installed(&list);
        if missing.is_empty() {
            break;
        }
        assert!(
            started.elapsed() < WAIT,
            "after {WAIT:?}, {} of {} real bundles are not Installed: {missing:#?}",
            missing.len(),
            names.len()
        );
        tokio::time::sleep(Duration::from_secs(2)).await;
    }

    // Each PO shows its bundle's powers by class, as `pomctl render --permissions` computes.
    let list = pos.list(&Default::default()).await.unwrap().items;
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
        started.elapsed()
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
