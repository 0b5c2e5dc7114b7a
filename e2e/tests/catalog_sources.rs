#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Catalog sources against a real API server and a real registry, with the Catalog controller
//! running in-process: image and ConfigMap catalogs become `Serving`, failures are reported
//! with a reason and a message naming the source, a moved tag is followed at the next poll,
//! an unchanged source never rewrites the status, a registry outage keeps the last good content
//! in the cache, and deleted Catalogs leave it.
//!
//! One control plane, registry and controller serve every scenario (they run in sequence):
//! starting them is most of the cost, and two controllers in one cluster would both reconcile
//! every Catalog.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use pom_api::Catalog;
use pom_controller::Context;
use pom_controller::catalog::CatalogState;
use pom_controller::context::Settings;
use pom_e2e::oci_publish::push_catalog;
use pom_e2e::{ControlPlane, Registry, Workloads, binaries};
use serde_json::json;
use tokio_util::sync::CancellationToken;

const TIMEOUT: Duration = Duration::from_secs(60);

/// A small file-based catalog: package `pkg` with one bundle per version, chained by
/// `replaces` in channel `stable`, as a JSON stream.
fn fbc(pkg: &str, versions: &[&str]) -> String {
    let mut blobs = vec![json!({"schema": "olm.package", "name": pkg, "defaultChannel": "stable"})];
    let entries: Vec<_> = versions
        .iter()
        .enumerate()
        .map(|(i, v)| match i {
            0 => json!({"name": format!("{pkg}.v{v}")}),
            _ => json!({"name": format!("{pkg}.v{v}"), "replaces": format!("{pkg}.v{}", versions[i - 1])}),
        })
        .collect();
    blobs.push(
        json!({"schema": "olm.channel", "package": pkg, "name": "stable", "entries": entries}),
    );
    for v in versions {
        blobs.push(json!({
            "schema": "olm.bundle", "package": pkg, "name": format!("{pkg}.v{v}"),
            "image": format!("example.invalid/{pkg}-bundle:v{v}"),
            "properties": [{"type": "olm.package", "value": {"packageName": pkg, "version": v}}]
        }));
    }
    blobs.iter().map(|b| format!("{b}\n")).collect()
}

fn catalog(name: &str, source: serde_json::Value) -> Catalog {
    serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "Catalog",
        "metadata": {"name": name}, "spec": {"source": source}
    }))
    .unwrap()
}

/// The `Serving` condition as (status, reason, message), if any.
fn serving(catalog: &Catalog) -> Option<(String, String, String)> {
    let condition = catalog
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == "Serving")?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
    ))
}

/// Polls `check` every 200 ms until it returns `Some`, or panics naming `what` and the last
/// value seen.
async fn eventually<T, F, Fut>(what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, String>>,
{
    let started = Instant::now();
    loop {
        match check().await {
            Ok(value) => return value,
            Err(last) if started.elapsed() > TIMEOUT => {
                panic!("{what}: not reached within {TIMEOUT:?}; last seen: {last}")
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
}

/// Waits until Catalog `name` satisfies `pred` and returns it.
async fn wait_catalog(
    api: &Api<Catalog>,
    name: &str,
    what: &str,
    pred: impl Fn(&Catalog) -> bool,
) -> Catalog {
    eventually(what, || async {
        let catalog = api.get(name).await.map_err(|e| e.to_string())?;
        if pred(&catalog) {
            Ok(catalog)
        } else {
            Err(format!("{:?}", catalog.status))
        }
    })
    .await
}

struct Env {
    client: Client,
    registry: Registry,
    ctx: Arc<Context>,
    catalogs: Api<Catalog>,
}

#[tokio::test]
async fn catalog_sources() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::REGISTRY);
    if binaries::require(&needed).is_none() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let registry = Registry::start().await.unwrap();
    let client = plane.client().await.unwrap();
    let settings = Settings {
        insecure_registries: vec![registry.host()],
        default_poll_interval: Duration::from_secs(2),
        ..Settings::default()
    };
    let ctx = Context::new(client.clone(), settings);
    let token = CancellationToken::new();
    let controller = tokio::spawn(pom_controller::catalog::run(ctx.clone(), token.clone()));
    let mut env = Env {
        catalogs: Api::all(client.clone()),
        client,
        registry,
        ctx,
    };

    image_catalog_serves_and_follows_its_tag(&env).await;
    status_is_not_rewritten_when_nothing_changes(&env).await;
    config_map_catalog_serves_and_follows_the_config_map(&env).await;
    missing_image_is_reported_with_its_name(&env).await;
    invalid_catalog_is_reported_with_the_file(&env).await;
    deleted_catalog_leaves_the_cache(&env).await;
    registry_outage_keeps_the_last_good_content(&mut env).await;

    token.cancel();
    tokio::time::timeout(Duration::from_secs(30), controller)
        .await
        .expect("the catalog controller did not stop on cancellation")
        .unwrap();
}

async fn image_catalog_serves_and_follows_its_tag(env: &Env) {
    let host = env.registry.host();
    let first = push_catalog(&host, "catalogs/ops", "latest", &fbc("alpha", &["1.0.0"]))
        .await
        .unwrap();
    env.catalogs
        .create(&PostParams::default(), &catalog("ops", json!({"image": {"ref": format!("{host}/catalogs/ops:latest"), "pollInterval": "1s"}})))
        .await
        .unwrap();
    let served = wait_catalog(&env.catalogs, "ops", "image catalog serving", |c| {
        serving(c).is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    let status = served.status.clone().unwrap();
    assert_eq!(
        status.resolved_source.as_deref(),
        Some(first.as_str()),
        "resolvedSource is the pushed digest"
    );
    assert_eq!(status.packages, Some(1));
    assert_eq!(status.observed_generation, served.metadata.generation);
    assert!(status.last_unpacked.is_some());
    let (_, reason, message) = serving(&served).unwrap();
    assert_eq!(reason, "Unpacked");
    assert!(message.contains(&first), "{message}");
    let entry = env.ctx.catalogs.get("ops").expect("the catalog is cached");
    let CatalogState::Serving(content) = &entry.state else {
        panic!("{entry:?}")
    };
    // Unpacked to disk, one folder per digest; no PlatformOperator names `alpha` (only the
    // catalog controller runs here), so it is not held until asked for, then read back.
    let content_dir = |digest_ref: &str| {
        let hex = digest_ref.rsplit_once("@sha256:").unwrap().1.to_owned();
        env.ctx
            .settings
            .catalog_content_dir
            .join(format!("sha256-{hex}_configs"))
    };
    assert!(
        content_dir(&first).is_dir(),
        "{}",
        content_dir(&first).display()
    );
    assert!(
        content.held_packages().is_empty(),
        "{:?}",
        content.held_packages()
    );
    assert!(content.offers("alpha"));
    let alpha = content.view("alpha").unwrap();
    let bundle = &alpha.packages["alpha"].bundles["alpha.v1.0.0"];
    assert!(
        bundle.origin.file.starts_with("/configs/"),
        "{:?}",
        bundle.origin
    );
    assert_eq!(content.held_packages(), ["alpha"]);
    // Let go: a replaced content still read somewhere keeps its folder (checked below).
    drop(entry);

    // A transition is announced as an Event on the Catalog.
    let events: Api<Event> = Api::namespaced(env.client.clone(), "default");
    eventually("an Unpacked event for catalog ops", || async {
        let list = events
            .list(&ListParams::default())
            .await
            .map_err(|e| e.to_string())?;
        let found = list.items.iter().any(|e| {
            e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("ops")
                && e.reason.as_deref() == Some("Unpacked")
        });
        if found {
            Ok(())
        } else {
            Err(format!("{} events", list.items.len()))
        }
    })
    .await;

    // New content under the same tag is picked up at the next poll.
    let generation = env.ctx.catalogs.generation();
    let second = push_catalog(
        &host,
        "catalogs/ops",
        "latest",
        &(fbc("alpha", &["1.0.0", "1.1.0"]) + &fbc("beta", &["0.1.0"])),
    )
    .await
    .unwrap();
    assert_ne!(first, second);
    let moved = wait_catalog(
        &env.catalogs,
        "ops",
        "resolvedSource follows the tag",
        |c| c.status.as_ref().and_then(|s| s.resolved_source.as_deref()) == Some(second.as_str()),
    )
    .await;
    assert_eq!(moved.status.unwrap().packages, Some(2));
    assert!(
        env.ctx.catalogs.generation() > generation,
        "the cache generation moved for the PlatformOperator controller"
    );
    // The previous digest's folder is removed once nothing serves it.
    eventually("the first digest's unpacked folder is removed", || async {
        match (content_dir(&first).exists(), content_dir(&second).is_dir()) {
            (false, true) => Ok(()),
            state => Err(format!("(first exists, second exists) = {state:?}")),
        }
    })
    .await;
}

async fn status_is_not_rewritten_when_nothing_changes(env: &Env) {
    let before = env.catalogs.get("ops").await.unwrap();
    let generation = env.ctx.catalogs.generation();
    // Five poll cycles of the 1s pollInterval.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let after = env.catalogs.get("ops").await.unwrap();
    assert_eq!(
        before.metadata.resource_version, after.metadata.resource_version,
        "the status was rewritten although nothing changed: {:?} -> {:?}",
        before.status, after.status
    );
    assert_eq!(
        env.ctx.catalogs.generation(),
        generation,
        "the cache generation moved without a change"
    );
}

async fn config_map_catalog_serves_and_follows_the_config_map(env: &Env) {
    let config_maps: Api<ConfigMap> = Api::namespaced(env.client.clone(), "default");
    // The Catalog comes first: nothing is read from a namespace the admin has not listed
    // (issue 22 item 4); once listed (the list's ConfigMap is watched), the missing ConfigMap
    // is reported, then its creation is noticed.
    env.catalogs
        .create(&PostParams::default(), &catalog("from-cm", json!({"configMap": {"name": "fbc", "namespace": "default", "key": "catalog.yaml"}})))
        .await
        .unwrap();
    let untrusted = wait_catalog(
        &env.catalogs,
        "from-cm",
        "untrusted namespace refused",
        |c| {
            serving(c).is_some_and(|(status, reason, _)| {
                status == "False" && reason == "UntrustedCatalogSource"
            })
        },
    )
    .await;
    let (_, _, message) = serving(&untrusted).unwrap();
    for needle in [
        "spec.source.configMap.namespace",
        "\"default\"",
        "platform-operators-catalog-sources",
    ] {
        assert!(message.contains(needle), "{needle} missing: {message}");
    }
    pom_e2e::scenario::trust_catalog_namespace(&env.client, "default").await;
    let missing = wait_catalog(
        &env.catalogs,
        "from-cm",
        "missing ConfigMap reported",
        |c| {
            serving(c).is_some_and(|(status, reason, _)| {
                status == "False" && reason != "UntrustedCatalogSource"
            })
        },
    )
    .await;
    let (_, reason, message) = serving(&missing).unwrap();
    assert_eq!(reason, "ConfigMapNotFound");
    assert!(message.contains("default/fbc"), "{message}");

    let yaml = "schema: olm.package\nname: gamma\ndefaultChannel: stable\n---\nschema: olm.channel\npackage: gamma\nname: stable\nentries:\n- name: gamma.v1.0.0\n---\nschema: olm.bundle\npackage: gamma\nname: gamma.v1.0.0\nimage: example.invalid/gamma-bundle:v1.0.0\nproperties:\n- type: olm.package\n  value: {packageName: gamma, version: 1.0.0}\n";
    let config_map: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "fbc"}, "data": {"catalog.yaml": yaml}
    }))
    .unwrap();
    config_maps
        .create(&PostParams::default(), &config_map)
        .await
        .unwrap();
    let served = wait_catalog(&env.catalogs, "from-cm", "ConfigMap catalog serving", |c| {
        serving(c).is_some_and(|(status, _, _)| status == "True")
    })
    .await;
    let status = served.status.unwrap();
    assert_eq!(status.packages, Some(1));
    let first = status.resolved_source.unwrap();
    assert!(
        first.starts_with("configmap/default/fbc/catalog.yaml@sha256:"),
        "{first}"
    );

    // An edit of the key is seen through the ConfigMap watch.
    // JSON blobs are YAML flow mappings: one document each.
    let delta: String = fbc("delta", &["2.0.0"])
        .lines()
        .map(|blob| format!("---\n{blob}\n"))
        .collect();
    let edited = format!("{yaml}{delta}");
    config_maps
        .patch(
            "fbc",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"catalog.yaml": edited}})),
        )
        .await
        .unwrap();
    wait_catalog(&env.catalogs, "from-cm", "ConfigMap edit served", |c| {
        c.status.as_ref().is_some_and(|s| {
            s.packages == Some(2) && s.resolved_source.as_deref() != Some(first.as_str())
        })
    })
    .await;

    // Taken off the list: refused at once (the list is watched), and what it served is no
    // longer served, unlike a source that merely fails (which keeps its last good content).
    Api::<ConfigMap>::namespaced(env.client.clone(), pom_e2e::scenario::MANAGER_NAMESPACE)
        .patch(
            pom_policy::source_trust::SOURCES_CONFIG_MAP,
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {pom_policy::source_trust::LISTED_KEY: ""}})),
        )
        .await
        .unwrap();
    wait_catalog(&env.catalogs, "from-cm", "untrusted again", |c| {
        serving(c).is_some_and(|(status, reason, _)| {
            status == "False" && reason == "UntrustedCatalogSource"
        })
    })
    .await;
    let entry = env.ctx.catalogs.get("from-cm").unwrap();
    assert!(
        matches!(
            entry.state,
            CatalogState::Unavailable {
                last_good: None,
                ..
            }
        ),
        "the content of an untrusted source is dropped: {:?}",
        entry.state
    );
}

async fn missing_image_is_reported_with_its_name(env: &Env) {
    let reference = format!("{}/catalogs/missing:v1", env.registry.host());
    env.catalogs
        .create(
            &PostParams::default(),
            &catalog("missing", json!({"image": {"ref": reference}})),
        )
        .await
        .unwrap();
    let failed = wait_catalog(&env.catalogs, "missing", "missing image reported", |c| {
        serving(c).is_some_and(|(status, _, _)| status == "False")
    })
    .await;
    let (_, reason, message) = serving(&failed).unwrap();
    assert_eq!(reason, "ImageNotFound", "{message}");
    assert!(
        message.contains(&reference),
        "the message names the image: {message}"
    );
    assert!(failed.status.unwrap().resolved_source.is_none());
    let entry = env.ctx.catalogs.get("missing").unwrap();
    assert!(
        matches!(
            entry.state,
            CatalogState::Unavailable {
                last_good: None,
                ..
            }
        ),
        "{entry:?}"
    );
}

async fn invalid_catalog_is_reported_with_the_file(env: &Env) {
    let host = env.registry.host();
    let broken = format!(
        "{}{{\"schema\": \"olm.channel\", \"package\": ",
        fbc("epsilon", &["1.0.0"])
    );
    push_catalog(&host, "catalogs/broken", "v1", &broken)
        .await
        .unwrap();
    env.catalogs
        .create(
            &PostParams::default(),
            &catalog(
                "broken",
                json!({"image": {"ref": format!("{host}/catalogs/broken:v1")}}),
            ),
        )
        .await
        .unwrap();
    let failed = wait_catalog(&env.catalogs, "broken", "invalid catalog reported", |c| {
        serving(c).is_some_and(|(status, _, _)| status == "False")
    })
    .await;
    let (_, reason, message) = serving(&failed).unwrap();
    assert_eq!(reason, "InvalidCatalog", "{message}");
    assert!(
        message.contains("/configs/catalog.json"),
        "the message names the file: {message}"
    );
}

async fn deleted_catalog_leaves_the_cache(env: &Env) {
    assert!(env.ctx.catalogs.get("broken").is_some());
    let generation = env.ctx.catalogs.generation();
    env.catalogs
        .delete("broken", &DeleteParams::default())
        .await
        .unwrap();
    eventually("deleted catalog removed from the cache", || async {
        match env.ctx.catalogs.get("broken") {
            None => Ok(()),
            Some(entry) => Err(format!("{entry:?}")),
        }
    })
    .await;
    assert!(env.ctx.catalogs.generation() > generation);
}

async fn registry_outage_keeps_the_last_good_content(env: &mut Env) {
    let served = env
        .catalogs
        .get("ops")
        .await
        .unwrap()
        .status
        .unwrap()
        .resolved_source
        .unwrap();
    env.registry.stop();
    let failed = wait_catalog(&env.catalogs, "ops", "registry outage reported", |c| {
        serving(c).is_some_and(|(status, _, _)| status == "False")
    })
    .await;
    let (_, reason, message) = serving(&failed).unwrap();
    assert_eq!(reason, "RegistryUnreachable", "{message}");
    assert!(message.contains("catalogs/ops:latest"), "{message}");
    // The status still describes the last good content, and the cache keeps it.
    assert_eq!(
        failed.status.unwrap().resolved_source.as_deref(),
        Some(served.as_str())
    );
    let entry = env.ctx.catalogs.get("ops").unwrap();
    let CatalogState::Unavailable {
        last_good: Some(last_good),
        ..
    } = &entry.state
    else {
        panic!("{entry:?}")
    };
    assert_eq!(last_good.resolved_source, served);
    assert_eq!(last_good.package_count(), 2);
}

/// The bundle path of the puller against the real registry: a bundle folder pushed by
/// `push_bundle_dir` comes back file for file (prefix `""`), by digest, from the cache the
/// second time.
#[tokio::test]
async fn bundle_image_round_trips_through_the_registry() {
    if binaries::require(binaries::REGISTRY).is_none() {
        return;
    }
    let _ = rustls::crypto::ring::default_provider().install_default();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("manifests")).unwrap();
    std::fs::create_dir_all(dir.path().join("metadata")).unwrap();
    std::fs::write(
        dir.path().join("manifests/op.clusterserviceversion.yaml"),
        "kind: ClusterServiceVersion\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("manifests/crd.yaml"),
        "kind: CustomResourceDefinition\n",
    )
    .unwrap();
    let annotations = "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.package.v1: op\n";
    std::fs::write(dir.path().join("metadata/annotations.yaml"), annotations).unwrap();
    let pushed = pom_e2e::oci_publish::push_bundle_dir(&host, "bundles/op", "v1.0.0", dir.path())
        .await
        .unwrap();
    assert!(
        pushed.starts_with(&format!("{host}/bundles/op@sha256:")),
        "{pushed}"
    );

    let puller = pom_controller::oci::ImagePuller::new(vec![host.clone()]);
    let anonymous = pom_controller::oci::RegistryAccess::anonymous();
    let no_mirrors = pom_controller::oci::mirrors::MirrorRules::default();
    assert_eq!(
        puller
            .resolve_digest(
                &format!("{host}/bundles/op:v1.0.0"),
                &anonymous,
                &no_mirrors
            )
            .await
            .unwrap()
            .by_digest,
        pushed
    );
    let files = puller
        .pull_files(
            &format!("{host}/bundles/op:v1.0.0"),
            "",
            &anonymous,
            &no_mirrors,
        )
        .await
        .unwrap()
        .content;
    let paths: Vec<&str> = files.keys().map(String::as_str).collect();
    assert_eq!(
        paths,
        [
            "manifests/crd.yaml",
            "manifests/op.clusterserviceversion.yaml",
            "metadata/annotations.yaml"
        ]
    );
    assert_eq!(files["metadata/annotations.yaml"], annotations.as_bytes());
    let manifests = puller
        .pull_files(&pushed, "manifests/", &anonymous, &no_mirrors)
        .await
        .unwrap()
        .content;
    assert_eq!(
        manifests.keys().collect::<Vec<_>>(),
        ["crd.yaml", "op.clusterserviceversion.yaml"]
    );
    let again = puller
        .pull_files(&pushed, "", &anonymous, &no_mirrors)
        .await
        .unwrap()
        .content;
    assert!(
        Arc::ptr_eq(&files, &again),
        "the second pull of a digest is served from the cache"
    );

    let missing = puller
        .pull_files(
            &format!("{host}/bundles/op:v9"),
            "",
            &anonymous,
            &no_mirrors,
        )
        .await
        .unwrap_err();
    assert_eq!(missing.reason().as_str(), "ImageNotFound", "{missing}");
}
