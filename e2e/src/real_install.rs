//! What the tests that install real, published bundles share (`real_bundles`,
//! `real_redhat`): a bundle's CSV identity, the PlatformOperator spec that grants a set of the
//! content policy's lifts, and what keeps an installed bundle from counting as installed, as
//! the API server shows it.

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::ResourceExt;
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_render::{BundleFiles, Lift, RenderOptions, RenderedBundle, render};
use serde_json::{Value, json};

use crate::manager::condition_of;

/// The CSV's name and version, read from the bundle's files.
#[must_use]
pub fn csv_identity(files: &BundleFiles) -> Option<(String, String)> {
    files.files.iter().find_map(|(path, bytes)| {
        if !path.starts_with("manifests/") {
            return None;
        }
        let value: Value = serde_saphyr::from_slice(bytes).ok()?;
        (value["kind"] == "ClusterServiceVersion").then(|| {
            let text = |v: &Value| v.as_str().unwrap_or_default().to_owned();
            (
                text(&value["metadata"]["name"]),
                text(&value["spec"]["version"]),
            )
        })
    })
}

/// Renders `files` with `opts` and `lifts` granted, and returns the result with the
/// PlatformOperator spec (package `package`) that grants exactly those lifts.
///
/// # Panics
/// When the bundle does not render with them (the caller's expectation failed).
#[must_use]
pub fn granting(
    files: &BundleFiles,
    package: &str,
    opts: &RenderOptions,
    lifts: impl IntoIterator<Item = Lift>,
) -> (RenderedBundle, Value) {
    let mut lifted = opts.clone();
    let mut consent = serde_json::Map::new();
    let mut exceptions = Vec::new();
    let mut omissions = Vec::new();
    let mut webhooks = Vec::new();
    for lift in lifts {
        match lift {
            Lift::Consent(class) => {
                lifted.consent.insert(class);
                consent.insert(class.consent_field().to_owned(), json!(true));
            }
            Lift::Exception(e) => {
                exceptions.push(json!({"rule": e.rule.as_str(), "kind": e.kind, "name": e.name}));
                lifted.exceptions.push(e);
            }
            Lift::Omit(o) => {
                omissions.push(json!({"kind": o.kind, "name": o.name}));
                lifted.omit.push(o);
            }
            Lift::Webhook(w) => {
                webhooks.push(json!({"name": w.name, "covers": w.covers}));
                lifted.webhook_consent.insert(w);
            }
        }
    }
    if !webhooks.is_empty() {
        consent.insert("webhooks".to_owned(), Value::Array(webhooks));
    }
    let bundle = render(files, &lifted)
        .unwrap_or_else(|err| panic!("{package} with what the test grants: {err}"));
    let mut spec = json!({"package": {"name": package}});
    if !consent.is_empty() {
        spec["consent"] = Value::Object(consent);
    }
    if !exceptions.is_empty() {
        spec["contentExceptions"] = Value::Array(exceptions);
    }
    if !omissions.is_empty() {
        spec["omitObjects"] = Value::Array(omissions);
    }
    (bundle, spec)
}

/// What keeps `bundle`, installed by the PlatformOperator named `po_name`, from counting as
/// installed, as the API server shows it: its PO's `Installed`, each of its Deployments
/// (present in the recorded install namespace, labelled as the PO's, rolled out) and CRDs
/// (Established). Empty once installed.
#[must_use]
pub fn not_installed(
    po_name: &str,
    bundle: &RenderedBundle,
    pos: &[PlatformOperator],
    deployments: &[Deployment],
    crds: &[CustomResourceDefinition],
) -> Vec<String> {
    let mut missing = Vec::new();
    let po = pos
        .iter()
        .find(|p| p.metadata.name.as_deref() == Some(po_name));
    match po.and_then(|p| condition_of(p, "Installed")) {
        Some((status, _, _)) if status == "True" => {}
        Some((_, reason, message)) => missing.push(format!("Installed: {reason}: {message}")),
        None => missing.push("no Installed condition".into()),
    }
    let namespace = po
        .and_then(|p| p.status.as_ref())
        .and_then(|s| s.install_namespace.clone())
        .unwrap_or_default();
    for name in &bundle.deployments {
        let Some(d) = deployments.iter().find(|d| {
            d.metadata.namespace.as_deref() == Some(namespace.as_str())
                && d.metadata.name.as_deref() == Some(name.as_str())
        }) else {
            missing.push(format!("Deployment {namespace}/{name} absent"));
            continue;
        };
        if d.labels().get(labels::OWNER_PO).map(String::as_str) != Some(po_name) {
            missing.push(format!(
                "Deployment {namespace}/{name} not labelled as the PO's"
            ));
        }
        let wanted = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
        let status = d.status.clone().unwrap_or_default();
        let rolled_out = status.observed_generation >= d.metadata.generation
            && status.updated_replicas.unwrap_or(0) == wanted
            && status.ready_replicas.unwrap_or(0) == wanted
            && status.available_replicas.unwrap_or(0) == wanted
            && status.replicas.unwrap_or(0) == wanted;
        if !rolled_out {
            missing.push(format!(
                "Deployment {namespace}/{name} not rolled out: {status:?}"
            ));
        }
    }
    for name in &bundle.crds {
        let established = crds
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(name.as_str()))
            .and_then(|c| c.status.as_ref()?.conditions.as_ref())
            .is_some_and(|conditions| {
                conditions
                    .iter()
                    .any(|c| c.type_ == "Established" && c.status == "True")
            });
        if !established {
            missing.push(format!("CRD {name} not Established"));
        }
    }
    missing
}

/// One published bundle to list: its package, CSV name and version, and its folder as
/// published.
#[derive(Debug, Clone, Copy)]
pub struct Published<'a> {
    pub package: &'a str,
    pub csv: &'a str,
    pub version: &'a str,
    pub dir: &'a std::path::Path,
}

/// Pushes each bundle byte for byte to the registry at `host` (repository
/// `<prefix>/<package>`) and returns the file-based catalog that offers each as the only
/// entry of its package's `stable` channel.
///
/// # Panics
/// A push the registry refuses.
pub async fn publish(host: &str, prefix: &str, bundles: &[Published<'_>]) -> String {
    let mut entries = Vec::new();
    for b in bundles {
        let image = crate::oci_publish::push_bundle_dir(
            host,
            &format!("{prefix}/{}", b.package),
            b.version,
            b.dir,
        )
        .await
        .unwrap_or_else(|err| panic!("pushing {}: {err}", b.package));
        entries
            .push(json!({"schema": "olm.package", "name": b.package, "defaultChannel": "stable"}));
        entries.push(
            json!({"schema": "olm.channel", "package": b.package, "name": "stable",
            "entries": [{"name": b.csv}]}),
        );
        entries.push(
            json!({"schema": "olm.bundle", "package": b.package, "name": b.csv,
            "image": image, "properties": [
                {"type": "olm.package", "value": {"packageName": b.package, "version": b.version}}
            ]}),
        );
    }
    entries
        .iter()
        .map(Value::to_string)
        .collect::<Vec<_>>()
        .join("\n")
}

/// Waits until every `(PO name, bundle)` counts as installed ([`not_installed`] is empty for
/// each) and returns the PlatformOperators as then listed, with how long it took.
///
/// # Panics
/// After `wait`, naming what each bundle still lacks; or a list the API server refuses.
pub async fn wait_installed(
    client: &kube::Client,
    bundles: &[(&str, &RenderedBundle)],
    wait: std::time::Duration,
) -> (Vec<PlatformOperator>, std::time::Duration) {
    use kube::api::Api;
    let pos: Api<PlatformOperator> = Api::all(client.clone());
    let deployments: Api<Deployment> = Api::all(client.clone());
    let crds: Api<CustomResourceDefinition> = Api::all(client.clone());
    let started = std::time::Instant::now();
    loop {
        let list = pos
            .list(&Default::default())
            .await
            .unwrap_or_else(|err| panic!("listing: {err}"))
            .items;
        let running = deployments
            .list(&Default::default())
            .await
            .unwrap_or_else(|err| panic!("listing: {err}"))
            .items;
        let defined = crds
            .list(&Default::default())
            .await
            .unwrap_or_else(|err| panic!("listing: {err}"))
            .items;
        let missing: std::collections::BTreeMap<&str, Vec<String>> = bundles
            .iter()
            .map(|(po, bundle)| (*po, not_installed(po, bundle, &list, &running, &defined)))
            .filter(|(_, why)| !why.is_empty())
            .collect();
        if missing.is_empty() {
            return (list, started.elapsed());
        }
        assert!(
            started.elapsed() < wait,
            "after {wait:?}, {} of {} bundles are not installed: {missing:#?}",
            missing.len(),
            bundles.len()
        );
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
    }
}
