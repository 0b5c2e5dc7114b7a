#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Image mirrors (issue 23 item 1) against a real API server and real registries, with the
//! whole manager running in-process: the cluster's `ImageDigestMirrorSet` sends the manager's
//! catalog and bundle pulls to a mirror, `Catalog.status.servedFrom` says so, and a source the
//! admin marked `NeverContactSource` receives no request even when only it has the image.
//!
//! The mirror kinds' CRDs are installed by the tests (the harness installs the upstream
//! OpenShift CRDs it has, which do not include them), from POM's own read-only views.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::{Client, CustomResourceExt as _};
use pom_api::openshift::image_mirrors::{
    ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet,
};
use pom_api::{Catalog, PlatformOperator};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::oci_publish::{push_catalog, push_files};
use pom_e2e::scenario::{apply_catalog, create_po, simulated_plane, wait_po_condition};
use pom_e2e::{ControlPlane, Registry, Workloads, binaries};
use serde_json::json;

/// How long each wait may take (each test finishes in well under it).
const WAIT: Duration = Duration::from_secs(60);

/// Applies the CRDs of the three mirror kinds (POM's views of them) and waits until they are
/// served.
async fn install_mirror_crds(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crds = [
        ImageDigestMirrorSet::crd(),
        ImageTagMirrorSet::crd(),
        ImageContentSourcePolicy::crd(),
    ];
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap();
        api.patch(
            &name,
            &PatchParams::apply("pom-e2e").force(),
            &Patch::Apply(crd),
        )
        .await
        .unwrap();
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap();
        tokio::time::timeout(
            WAIT,
            await_condition(api.clone(), &name, conditions::is_crd_established()),
        )
        .await
        .unwrap_or_else(|_| panic!("CRD {name} not established"))
        .unwrap();
    }
}

/// Creates ImageDigestMirrorSet `name` with one rule.
async fn create_idms(client: &Client, name: &str, rule: serde_json::Value) {
    let idms: ImageDigestMirrorSet = serde_json::from_value(json!({
        "apiVersion": "config.openshift.io/v1", "kind": "ImageDigestMirrorSet",
        "metadata": {"name": name}, "spec": {"imageDigestMirrors": [rule]}
    }))
    .unwrap();
    Api::<ImageDigestMirrorSet>::all(client.clone())
        .create(&PostParams::default(), &idms)
        .await
        .unwrap();
}

/// The `Serving` condition (status, reason, message) and `status.servedFrom` of Catalog `name`.
async fn serving(client: &Client, name: &str) -> Option<(String, String, String, Option<String>)> {
    let catalog = Api::<Catalog>::all(client.clone())
        .get_opt(name)
        .await
        .ok()??;
    let status = catalog.status?;
    let condition = status.conditions.iter().find(|c| c.type_ == "Serving")?;
    Some((
        condition.status.clone(),
        condition.reason.clone(),
        condition.message.clone(),
        status.served_from.clone(),
    ))
}

/// A TCP proxy on loopback in front of `target_port`, counting the connections it accepts: the
/// registry behind it is "contacted" exactly when this count moves.
struct CountingProxy {
    host: String,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingProxy {
    async fn start(target_port: u16) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) =
                        tokio::net::TcpStream::connect(("127.0.0.1", target_port)).await
                    {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            host,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn port_of(host: &str) -> u16 {
    host.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// A catalog and its bundle published only to a mirror; the Catalog and the catalog's bundle
/// reference name a source registry where nothing listens, and an ImageDigestMirrorSet maps the
/// source to the mirror: the Catalog serves from the mirror (`servedFrom` says so, naming the
/// ImageDigestMirrorSet), and a PlatformOperator installs the bundle pulled from it.
#[tokio::test]
async fn a_catalog_and_its_bundle_are_pulled_from_the_mirror() {
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    install_mirror_crds(&client).await;
    let mirror = Registry::start().await.unwrap();
    let mirror_host = mirror.host();
    // Nothing listens there: any pull from the source fails.
    let source_host = format!("127.0.0.1:{}", pom_e2e::process::free_port().unwrap());

    let bundle = TestBundle::new("mirrored", "1.0.0");
    let pushed_bundle = push_files(
        &mirror_host,
        "team/mirrored-bundle",
        "1.0.0",
        &bundle.image_files(),
    )
    .await
    .unwrap();
    let bundle_digest = pushed_bundle.rsplit_once('@').unwrap().1;
    let bundle_at_source = format!("{source_host}/team/mirrored-bundle@{bundle_digest}");
    let fbc = catalog_json(
        std::slice::from_ref(&bundle),
        &[(bundle.name(), bundle_at_source.clone())],
    );
    let pushed_catalog = push_catalog(&mirror_host, "team/catalog", "v1", &fbc)
        .await
        .unwrap();
    let catalog_digest = pushed_catalog.rsplit_once('@').unwrap().1;
    let catalog_at_source = format!("{source_host}/team/catalog@{catalog_digest}");

    create_idms(
        &client,
        "to-the-mirror",
        json!({"source": format!("{source_host}/team"), "mirrors": [format!("{mirror_host}/team")]}),
    )
    .await;
    apply_catalog(
        &client,
        "mirrored",
        json!({"image": {"ref": catalog_at_source}}),
        0,
    )
    .await;
    create_po(
        &client,
        "mirrored",
        json!({"package": {"name": "mirrored"}}),
    )
    .await;
    let manager = Manager::start(
        client.clone(),
        Manager::test_settings(vec![mirror_host.clone(), source_host.clone()]),
    );

    let (_, _, message, served_from) = eventually(WAIT, "Catalog mirrored serving", || async {
        serving(&client, "mirrored")
            .await
            .filter(|(status, ..)| status == "True")
    })
    .await;
    assert!(
        message.contains(&catalog_at_source),
        "named by the source: {message}"
    );
    assert_eq!(
        served_from.as_deref(),
        Some(
            format!(
                "{mirror_host}/team/catalog@{catalog_digest} (mirror of {source_host}/team from \
                 ImageDigestMirrorSet/to-the-mirror)"
            )
            .as_str()
        ),
    );
    let resolved = Api::<Catalog>::all(client.clone())
        .get("mirrored")
        .await
        .unwrap()
        .status
        .unwrap()
        .resolved_source;
    assert_eq!(
        resolved.as_deref(),
        Some(catalog_at_source.as_str()),
        "content is named by the source, whoever served it"
    );

    wait_po_condition(
        &client,
        "mirrored",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let installed = Api::<PlatformOperator>::all(client.clone())
        .get("mirrored")
        .await
        .unwrap()
        .status
        .unwrap()
        .installed_bundle
        .unwrap();
    assert_eq!(installed.image.as_deref(), Some(bundle_at_source.as_str()));
    manager.stop().await;
}

/// `mirrorSourcePolicy: NeverContactSource` with a mirror that lacks the image: the source
/// (running, holding the image, behind a proxy that counts connections) receives none, and the
/// Catalog's failure names the ImageDigestMirrorSet; a Catalog naming the image by tag fails
/// too (the set's mirrors serve pulls by digest only, as on the nodes). Once the mirror has the
/// image, the Catalog serves from it, still without a word to the source.
#[tokio::test]
async fn a_source_never_to_be_contacted_is_never_contacted() {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::REGISTRY);
    if binaries::require(&needed).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let client = plane.client().await.unwrap();
    install_mirror_crds(&client).await;
    let source = Registry::start().await.unwrap();
    let mirror = Registry::start().await.unwrap();
    let mirror_host = mirror.host();
    let proxy = CountingProxy::start(port_of(&source.host())).await;
    let source_host = proxy.host.clone();

    let fbc = catalog_json(&[TestBundle::new("guarded", "1.0.0")], &[]);
    let pushed = push_catalog(&source_host, "team/catalog", "v1", &fbc)
        .await
        .unwrap();
    let digest = pushed.rsplit_once('@').unwrap().1.to_owned();
    let by_digest = format!("{source_host}/team/catalog@{digest}");
    // The proxy sees pulls: one without mirror rules goes through it.
    let before = proxy.connections();
    pom_controller::oci::ImagePuller::new(vec![source_host.clone()])
        .pull_files(
            &format!("{source_host}/team/catalog:v1"),
            "configs/",
            &pom_controller::oci::RegistryAccess::anonymous(),
            &pom_controller::oci::mirrors::MirrorRules::default(),
        )
        .await
        .unwrap();
    assert!(proxy.connections() > before, "the proxy counts pulls");

    create_idms(
        &client,
        "never-the-source",
        json!({"source": format!("{source_host}/team"), "mirrors": [format!("{mirror_host}/team")],
               "mirrorSourcePolicy": "NeverContactSource"}),
    )
    .await;
    let contacted_before = proxy.connections();
    let manager = Manager::start(
        client.clone(),
        Manager::test_settings(vec![mirror_host.clone(), source_host.clone()]),
    );
    apply_catalog(
        &client,
        "by-digest",
        json!({"image": {"ref": by_digest}}),
        0,
    )
    .await;
    apply_catalog(
        &client,
        "by-tag",
        json!({"image": {"ref": format!("{source_host}/team/catalog:v1")}}),
        0,
    )
    .await;

    let (_, reason, message, _) = eventually(WAIT, "Catalog by-digest failing", || async {
        serving(&client, "by-digest")
            .await
            .filter(|(status, ..)| status == "False")
    })
    .await;
    assert_eq!(reason, "ImageNotFound", "{message}");
    assert!(
        message.contains(&format!("{mirror_host}/team/catalog@{digest}")),
        "the mirror was asked: {message}"
    );
    assert!(
        message.contains(
            "ImageDigestMirrorSet/never-the-source set mirrorSourcePolicy NeverContactSource"
        ),
        "the failure names the object that kept the source out: {message}"
    );
    let (_, _, message, _) = eventually(WAIT, "Catalog by-tag failing", || async {
        serving(&client, "by-tag")
            .await
            .filter(|(status, ..)| status == "False")
    })
    .await;
    assert!(
        message.contains("ImageDigestMirrorSet/never-the-source")
            && message.contains("no mirror of it serves pulls by tag"),
        "{message}"
    );
    // Both Catalogs retry with backoff (1 s, 2 s, ...): the source stays out through retries.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        proxy.connections(),
        contacted_before,
        "the source was contacted"
    );

    // The mirror gets the image: served from it, the source still untouched.
    let mirrored = push_catalog(&mirror_host, "team/catalog", "v1", &fbc)
        .await
        .unwrap();
    assert!(mirrored.ends_with(&digest), "{mirrored} is the same image");
    let (_, _, _, served_from) = eventually(WAIT, "Catalog by-digest serving", || async {
        serving(&client, "by-digest")
            .await
            .filter(|(status, ..)| status == "True")
    })
    .await;
    assert_eq!(
        served_from.as_deref(),
        Some(
            format!(
                "{mirror_host}/team/catalog@{digest} (mirror of {source_host}/team from \
                 ImageDigestMirrorSet/never-the-source)"
            )
            .as_str()
        )
    );
    assert_eq!(
        proxy.connections(),
        contacted_before,
        "the source was contacted"
    );
    manager.stop().await;
}
