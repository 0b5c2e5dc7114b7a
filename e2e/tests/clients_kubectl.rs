#![allow(clippy::unwrap_used, clippy::expect_used)]
//! kubectl, as admins use it (issue 11 item 2), with the `kubectl` on the machine against a
//! real API server: the short names and the category resolve to POM's kinds alone, among every
//! kind the plane serves (built-in, OpenShift and OLM); `kubectl explain` describes every spec
//! and status field; `kubectl get` prints the printer columns with the values status holds;
//! `kubectl wait --for=condition=Installed` returns once POM installed the operator (and
//! times out on a condition that does not hold); `kubectl describe` lists the Events POM
//! records on condition transitions; and `kubectl apply --server-side` of an admin's YAML
//! round-trips, before and after POM reconciled it, without conflicts with POM's field managers
//! and without changing what they own, and changes the admin's own fields.
//!
//! A missing `kubectl` fails the test in CI and skips it elsewhere ([`pom_e2e::skip`]).

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::process::Output;
use std::time::Duration;

use futures::StreamExt as _;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use kube::{Client, CustomResourceExt as _, ResourceExt};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::ControlPlane;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::scenario::{configmap_catalog, set_cluster, simulated_plane};
use pom_e2e::shared_control_plane;
use serde_json::Value;

const WAIT: Duration = Duration::from_secs(120);
const PO: &str = "kctl";
const CATALOG: &str = "kctl-local";

/// The `kubectl` on `PATH`, run with the plane's admin kubeconfig and a cache of its own.
struct Kubectl {
    binary: PathBuf,
    kubeconfig: PathBuf,
    cache: PathBuf,
    dir: PathBuf,
}

impl Kubectl {
    /// `None` (after [`pom_e2e::skip::skip`], which fails in CI) when `kubectl` is not on
    /// `PATH`.
    fn find(plane: &ControlPlane, tag: &str) -> Option<Self> {
        let binary = std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("kubectl"))
                .find(|candidate| candidate.is_file())
        });
        let Some(binary) = binary else {
            pom_e2e::skip::skip("kubectl is not on PATH");
            return None;
        };
        let dir = plane.dir().join(format!("kubectl-{tag}"));
        std::fs::create_dir_all(&dir).unwrap();
        Some(Self {
            binary,
            kubeconfig: plane.kubeconfig_path().to_path_buf(),
            cache: dir.join("cache"),
            dir,
        })
    }

    async fn run(&self, args: &[&str]) -> Output {
        tokio::process::Command::new(&self.binary)
            .arg(format!("--kubeconfig={}", self.kubeconfig.display()))
            .arg(format!("--cache-dir={}", self.cache.display()))
            .args(args)
            .env_remove("KUBECONFIG")
            .kill_on_drop(true)
            .output()
            .await
            .unwrap_or_else(|err| panic!("running kubectl {args:?}: {err}"))
    }

    /// Runs `kubectl args...`, asserts it succeeded, and returns its standard output.
    async fn ok(&self, args: &[&str]) -> String {
        let out = self.run(args).await;
        assert!(
            out.status.success(),
            "kubectl {args:?} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    }

    /// Writes `yaml` to a file of its own and returns its path (for `apply -f`).
    fn file(&self, name: &str, yaml: &str) -> String {
        let path = self.dir.join(name);
        std::fs::write(&path, yaml).unwrap();
        path.display().to_string()
    }
}

/// The rows of a table kubectl printed, each cell under the header word it is aligned with
/// (kubectl pads columns to the header's left edge, so cells may contain single spaces).
fn table(text: &str, header_starts_with: &str) -> Vec<BTreeMap<String, String>> {
    let mut lines = text
        .lines()
        .skip_while(|l| !l.trim_start().starts_with(header_starts_with));
    let header = lines
        .next()
        .unwrap_or_else(|| panic!("no table with header {header_starts_with:?} in:\n{text}"));
    let mut columns: Vec<(usize, String)> = Vec::new();
    let mut previous_blank = true;
    for (at, ch) in header.char_indices() {
        if ch != ' ' && previous_blank {
            columns.push((at, String::new()));
        }
        if ch != ' ' {
            columns.last_mut().unwrap().1.push(ch);
        }
        previous_blank = ch == ' ';
    }
    // Words of one heading are separated by single spaces only in describe's tables, which have
    // none; kubectl's own headings are single words.
    lines
        .take_while(|l| !l.trim().is_empty())
        .filter(|l| !l.trim_start().starts_with("----"))
        .map(|line| {
            columns
                .iter()
                .enumerate()
                .map(|(i, (start, name))| {
                    let end = columns.get(i + 1).map_or(line.len(), |(s, _)| *s);
                    let cell = line.get(*start..end.min(line.len())).unwrap_or("");
                    (name.clone(), cell.trim().to_owned())
                })
                .collect()
        })
        .collect()
}

/// Every field path under `spec` and `status` of a CRD's schema (array items are walked
/// through, as `kubectl explain` does).
fn field_paths(schema: &Value, prefix: &str, out: &mut Vec<String>) {
    let schema = schema.get("items").unwrap_or(schema);
    if let Some(properties) = schema.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            let path = format!("{prefix}.{name}");
            out.push(path.clone());
            field_paths(child, &path, out);
        }
    }
}

/// The DESCRIPTION paragraph of `kubectl explain` output.
fn explained(text: &str) -> String {
    text.lines()
        .skip_while(|l| l.trim() != "DESCRIPTION:")
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with(' '))
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join(" ")
}

async fn our_crds(client: &Client) -> Vec<CustomResourceDefinition> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut crds = Vec::new();
    for name in [PlatformOperator::crd_name(), Catalog::crd_name()] {
        crds.push(api.get(name).await.unwrap());
    }
    crds
}

#[tokio::test]
async fn short_names_and_category_resolve_to_our_kinds_alone_and_explain_describes_every_field() {
    let Some(plane) = shared_control_plane().await else {
        return;
    };
    let Some(kubectl) = Kubectl::find(plane, "static") else {
        return;
    };
    let client = plane.client().await.unwrap();
    let crds = our_crds(&client).await;
    // The API server publishes a new CRD's OpenAPI a moment after it is Established.
    for crd in &crds {
        let plural = &crd.spec.names.plural;
        eventually(
            WAIT,
            &format!("kubectl explain to know {plural}"),
            || async {
                kubectl
                    .run(&["explain", plural])
                    .await
                    .status
                    .success()
                    .then_some(())
            },
        )
        .await;
    }

    // Discovery as kubectl sees it: every kind the plane serves.
    let listing = kubectl.ok(&["api-resources", "-o", "wide"]).await;
    let resources = table(&listing, "NAME");
    assert!(
        resources.iter().any(|r| r["KIND"] == "Pod")
            && resources.iter().any(|r| r["KIND"] == "ClusterOperator"),
        "discovery lacks built-in or OpenShift kinds:\n{listing}"
    );
    let words = |cell: &str| -> BTreeSet<String> {
        cell.split(',')
            .map(str::trim)
            .filter(|w| !w.is_empty())
            .map(str::to_owned)
            .collect()
    };
    let group_of = |row: &BTreeMap<String, String>| {
        row["APIVERSION"]
            .rsplit_once('/')
            .map_or(String::new(), |(g, _)| g.to_owned())
    };
    let ours = |row: &BTreeMap<String, String>, crd: &CustomResourceDefinition| {
        group_of(row) == crd.spec.group && row["KIND"] == crd.spec.names.kind
    };
    let mut categories: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for crd in &crds {
        let names = &crd.spec.names;
        let short_names = names.short_names.clone().unwrap_or_default();
        assert!(!short_names.is_empty(), "{} has no short name", names.kind);
        for short in &short_names {
            // No other resource claims it as a short name, a plural or a kind (kubectl
            // resolves all three, and built-in ones first).
            let claimed: Vec<String> = resources
                .iter()
                .filter(|r| {
                    words(&r["SHORTNAMES"]).contains(short)
                        || r["NAME"] == *short
                        || r["KIND"].to_lowercase() == *short
                })
                .map(|r| format!("{} {}", r["APIVERSION"], r["KIND"]))
                .collect();
            assert_eq!(
                claimed,
                vec![format!("{}/v1alpha1 {}", crd.spec.group, names.kind)],
                "short name {short} must resolve to {} alone",
                names.kind
            );
            // And kubectl resolves it so.
            let explain = kubectl.ok(&["explain", short]).await;
            assert!(
                explain.contains(&format!("KIND:       {}", names.kind))
                    && explain.contains(&format!("GROUP:      {}", crd.spec.group)),
                "kubectl explain {short}:\n{explain}"
            );
        }
        for category in names.categories.clone().unwrap_or_default() {
            categories
                .entry(category)
                .or_default()
                .insert(names.kind.clone());
        }
    }
    assert!(!categories.is_empty(), "our kinds are in no category");
    for (category, kinds) in &categories {
        let members: BTreeSet<String> = resources
            .iter()
            .filter(|r| words(&r["CATEGORIES"]).contains(category))
            .map(|r| {
                assert!(
                    crds.iter().any(|crd| ours(r, crd)),
                    "{} {} is also in category {category}",
                    r["APIVERSION"],
                    r["KIND"]
                );
                r["KIND"].clone()
            })
            .collect();
        assert_eq!(&members, kinds, "category {category}");
        assert!(
            !resources.iter().any(|r| r["NAME"] == *category
                || words(&r["SHORTNAMES"]).contains(category)
                || r["KIND"].to_lowercase() == *category),
            "category {category} is also a resource name"
        );
    }

    // Every spec and status field has a description in `kubectl explain`.
    let mut paths = Vec::new();
    for crd in &crds {
        let schema = serde_json::to_value(
            crd.spec.versions[0]
                .schema
                .as_ref()
                .unwrap()
                .open_api_v3_schema
                .as_ref()
                .unwrap(),
        )
        .unwrap();
        let resource = &crd.spec.names.plural;
        paths.push(resource.clone());
        for top in ["spec", "status"] {
            let path = format!("{resource}.{top}");
            paths.push(path.clone());
            field_paths(&schema["properties"][top], &path, &mut paths);
        }
    }
    assert!(
        paths.len() > 40,
        "too few fields found in the schemas: {paths:?}"
    );
    assert!(paths.contains(&"platformoperators.status.installedBundle.version".to_owned()));
    let undescribed: Vec<String> = futures::stream::iter(paths.iter())
        .map(|path| {
            let kubectl = &kubectl;
            async move {
                let text = kubectl.ok(&["explain", path]).await;
                let description = explained(&text);
                (description.is_empty() || description == "<empty>")
                    .then(|| format!("{path}:\n{text}"))
            }
        })
        .buffer_unordered(6)
        .filter_map(|missing| async move { missing })
        .collect()
        .await;
    assert!(
        undescribed.is_empty(),
        "kubectl explain shows no description for:\n{}",
        undescribed.join("\n")
    );
}

/// An admin's PlatformOperator, as they would write it.
fn admin_yaml(extra_spec: &str) -> String {
    format!(
        "apiVersion: platform.openshift.io/v1alpha1\nkind: PlatformOperator\nmetadata:\n  name: {PO}\n  labels:\n    team: platform\nspec:\n  package:\n    name: {PO}\n    channel: stable\n    catalog: {CATALOG}\n{extra_spec}"
    )
}

/// The managed-fields entries of `po` by (manager, operation, subresource).
fn managers(po: &PlatformOperator) -> BTreeMap<(String, String, String), Value> {
    po.metadata
        .managed_fields
        .iter()
        .flatten()
        .map(|m| {
            (
                (
                    m.manager.clone().unwrap_or_default(),
                    m.operation.clone().unwrap_or_default(),
                    m.subresource.clone().unwrap_or_default(),
                ),
                serde_json::to_value(&m.fields_v1).unwrap(),
            )
        })
        .collect()
}

/// The row `kubectl get pop` prints for the PO compared with what its status holds.
async fn assert_po_columns(kubectl: &Kubectl, client: &Client) {
    let po = Api::<PlatformOperator>::all(client.clone())
        .get(PO)
        .await
        .unwrap();
    let status = po.status.clone().unwrap();
    let condition = |type_: &str| {
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.clone())
            .unwrap_or_else(|| panic!("{PO} has no {type_} condition: {status:?}"))
    };
    let text = kubectl.ok(&["get", "platformoperators"]).await;
    let rows = table(&text, "NAME");
    let row = rows
        .iter()
        .find(|r| r["NAME"] == PO)
        .unwrap_or_else(|| panic!("no row for {PO}:\n{text}"));
    let want: BTreeMap<String, String> = [
        ("NAME", PO.to_owned()),
        ("PACKAGE", po.spec.package.name.clone()),
        (
            "INSTALLED",
            status.installed_bundle.clone().unwrap().version,
        ),
        ("PIN", status.pin.clone().unwrap().range),
        ("STATUS", condition("Installed")),
        ("UPGRADEABLE", condition("Upgradeable")),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut got = row.clone();
    let age = got
        .remove("AGE")
        .unwrap_or_else(|| panic!("no AGE column:\n{text}"));
    assert_eq!(got, want, "kubectl get platformoperators:\n{text}");
    assert!(
        age.starts_with(|c: char| c.is_ascii_digit()) && age.ends_with(['s', 'm', 'h', 'd']),
        "AGE {age:?}"
    );
}

#[tokio::test]
async fn get_wait_describe_and_server_side_apply_work_as_admins_use_them() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let Some(kubectl) = Kubectl::find(&plane, "dynamic") else {
        return;
    };
    let client = plane.client().await.unwrap();
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let v100 = TestBundle::new(PO, "1.0.0");
    let v110 = TestBundle::new(PO, "1.1.0").replaces("1.0.0");
    set_cluster(&client, &[("4.16.3", true)], "4.16.3").await;
    configmap_catalog(&client, CATALOG, &catalog_json(&[v100, v110], &[]), 0).await;

    // The admin applies their YAML before POM runs: created, owned by kubectl alone.
    let file = kubectl.file("po.yaml", &admin_yaml(""));
    let out = kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(
        out.contains(&format!(
            "platformoperator.platform.openshift.io/{PO} serverside-applied"
        )),
        "{out}"
    );
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));

    // kubectl wait returns once POM reports Installed=True; it times out on a condition that
    // does not hold, so it really reads the condition.
    let out = kubectl
        .ok(&[
            "wait",
            "--for=condition=Installed",
            &format!("platformoperator/{PO}"),
            "--timeout=120s",
        ])
        .await;
    assert!(out.contains("condition met"), "{out}");
    let installed = pos.get(PO).await.unwrap();
    assert!(
        installed
            .status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .any(|c| c.type_ == "Installed" && c.status == "True"),
        "kubectl wait returned before Installed=True: {:?}",
        installed.status
    );
    let refused = kubectl
        .run(&[
            "wait",
            "--for=condition=Degraded",
            &format!("platformoperator/{PO}"),
            "--timeout=2s",
        ])
        .await;
    assert!(
        !refused.status.success() && String::from_utf8_lossy(&refused.stderr).contains("timed out"),
        "kubectl wait for Degraded: {refused:?}"
    );
    kubectl
        .ok(&[
            "wait",
            "--for=condition=Serving",
            &format!("catalog/{CATALOG}"),
            "--timeout=60s",
        ])
        .await;

    // Settled: nothing more for POM to write.
    let settled = eventually(WAIT, "the install to settle on 1.1.0", || async {
        let po = pos.get(PO).await.ok()?;
        let status = po.status.as_ref()?;
        (status.installed_bundle.as_ref()?.version == "1.1.0"
            && status.active_hop.as_ref().is_some_and(|h| h.settled)
            && status.observed_generation == po.metadata.generation)
            .then_some(po)
    })
    .await;

    // kubectl get, of both kinds: the printer columns, with the values status holds.
    assert_po_columns(&kubectl, &client).await;
    let catalog = Api::<Catalog>::all(client.clone())
        .get(CATALOG)
        .await
        .unwrap();
    let catalog_status = catalog.status.clone().unwrap();
    let text = kubectl.ok(&["get", "catalogs"]).await;
    let mut row = table(&text, "NAME")
        .into_iter()
        .find(|r| r["NAME"] == CATALOG)
        .unwrap_or_else(|| panic!("no row for {CATALOG}:\n{text}"));
    assert!(
        row.remove("AGE").is_some_and(|age| !age.is_empty()),
        "{text}"
    );
    let serving = catalog_status
        .conditions
        .iter()
        .find(|c| c.type_ == "Serving")
        .map(|c| c.status.clone())
        .unwrap();
    let want: BTreeMap<String, String> = [
        ("NAME", CATALOG.to_owned()),
        ("PRIORITY", catalog.spec.priority.to_string()),
        ("SERVING", serving),
        ("PACKAGES", catalog_status.packages.unwrap().to_string()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    assert_eq!(row, want, "kubectl get catalogs:\n{text}");

    // The short names and the category list our objects, and only them.
    for crd in our_crds(&client).await {
        for short in crd.spec.names.short_names.clone().unwrap_or_default() {
            let names = kubectl.ok(&["get", &short, "-o", "name"]).await;
            let want = if crd.spec.names.kind == "PlatformOperator" {
                format!("platformoperator.platform.openshift.io/{PO}\n")
            } else {
                format!("catalog.platform.openshift.io/{CATALOG}\n")
            };
            assert_eq!(names, want, "kubectl get {short}");
        }
        for category in crd.spec.names.categories.clone().unwrap_or_default() {
            let names: BTreeSet<String> = kubectl
                .ok(&["get", &category, "-o", "name"])
                .await
                .lines()
                .map(str::to_owned)
                .collect();
            let want: BTreeSet<String> = [
                format!("platformoperator.platform.openshift.io/{PO}"),
                format!("catalog.platform.openshift.io/{CATALOG}"),
            ]
            .into();
            assert_eq!(names, want, "kubectl get {category}");
        }
    }

    // kubectl describe lists the Event of each condition's last transition, from POM, and the
    // earlier ones (the install started as Installed=False/Installing).
    let status = settled.status.clone().unwrap();
    assert!(status.conditions.len() >= 4, "{status:?}");
    let (describe, events) = eventually(WAIT, "kubectl describe to list POM's events", || async {
        let text = kubectl.ok(&["describe", "platformoperator", PO]).await;
        let (_, events) = text.split_once("\nEvents:")?;
        if !events.contains("Reason") {
            return None;
        }
        let events = table(events, "Type");
        status
            .conditions
            .iter()
            .all(|c| {
                events.iter().any(|e| {
                    e["Type"] == "Normal"
                        && e["Reason"] == c.reason
                        && e["From"] == "platform-operators-manager"
                        && e["Message"].starts_with(&format!("{}={}: ", c.type_, c.status))
                })
            })
            .then_some((text, events))
    })
    .await;
    assert!(
        describe.contains(&format!("Name:         {PO}")),
        "{describe}"
    );
    assert!(
        events
            .iter()
            .any(|e| e["Reason"] == "Installing" && e["Message"].starts_with("Installed=False: ")),
        "{describe}"
    );

    // Re-applied after POM reconciled it: no conflict with POM's field managers, nothing
    // changes (POM's finalizer, status and annotations stay, no new resourceVersion), and
    // kubectl owns only what the admin wrote.
    let out = kubectl.ok(&["apply", "--server-side", "-f", &file]).await;
    assert!(out.contains("serverside-applied"), "{out}");
    let after = pos.get(PO).await.unwrap();
    assert_eq!(after.spec, settled.spec);
    assert_eq!(after.status, settled.status);
    assert_eq!(after.finalizers(), settled.finalizers());
    assert!(!after.finalizers().is_empty(), "POM's finalizer is missing");
    assert_eq!(after.annotations(), settled.annotations());
    assert_eq!(
        after.resource_version(),
        settled.resource_version(),
        "re-applying the same YAML wrote the object"
    );
    let owned = managers(&after);
    assert_eq!(owned, managers(&settled), "managed fields changed");
    let by_kubectl: Vec<&Value> = owned
        .iter()
        .filter(|((m, _, _), _)| m == "kubectl")
        .map(|(_, fields)| fields)
        .collect();
    assert_eq!(by_kubectl.len(), 1, "{owned:#?}");
    assert_eq!(
        by_kubectl[0],
        &serde_json::json!({
            "f:metadata": {"f:labels": {"f:team": {}}},
            "f:spec": {"f:package": {"f:name": {}, "f:channel": {}, "f:catalog": {}}}
        }),
        "kubectl owns more than the admin wrote: {owned:#?}"
    );
    assert!(
        owned.iter().any(
            |((m, op, sub), fields)| m.starts_with("platform-operators-manager")
                && op == "Apply"
                && sub == "status"
                && fields.get("f:status").is_some()
        ),
        "POM's status field manager is gone: {owned:#?}"
    );

    // The admin changes their own fields by re-applying: accepted without forcing, and POM
    // acts on it (moves down to the version asked for).
    let changed = kubectl.file(
        "po-changed.yaml",
        &admin_yaml("  upgradeGate: Rollout\n  steadyStateVersionRange: \"=1.0.0\"\n"),
    );
    kubectl
        .ok(&["apply", "--server-side", "-f", &changed])
        .await;
    let po = pos.get(PO).await.unwrap();
    assert_eq!(
        po.spec.steady_state_version_range.as_deref(),
        Some("=1.0.0")
    );
    assert_eq!(
        po.spec.upgrade_gate,
        pom_api::platform_operator::UpgradeGate::Rollout
    );
    kubectl
        .ok(&[
            "wait",
            "--for=jsonpath={.status.installedBundle.version}=1.0.0",
            &format!("platformoperator/{PO}"),
            "--timeout=120s",
        ])
        .await;
    eventually(WAIT, "the move to 1.0.0 to settle", || async {
        let po = pos.get(PO).await.ok()?;
        let status = po.status.as_ref()?;
        (status.installed_bundle.as_ref()?.version == "1.0.0"
            && status.active_hop.as_ref().is_some_and(|h| h.settled)
            && status.observed_generation == po.metadata.generation
            && status
                .conditions
                .iter()
                .any(|c| c.type_ == "Installed" && c.status == "True"))
        .then_some(())
    })
    .await;
    assert_po_columns(&kubectl, &client).await;
    let owned = managers(&pos.get(PO).await.unwrap());
    let by_kubectl = owned
        .iter()
        .find(|((m, _, _), _)| m == "kubectl")
        .map(|(_, fields)| fields.clone())
        .unwrap();
    assert!(
        by_kubectl["f:spec"].get("f:upgradeGate").is_some()
            && by_kubectl["f:spec"]
                .get("f:steadyStateVersionRange")
                .is_some(),
        "{owned:#?}"
    );
    manager.stop().await;
}
