#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The cluster-wide proxy and trusted CA bundle for the manager's own pulls (issue 23 item 2),
//! against a real API server, real registries and a real forward proxy
//! ([`pom_e2e::forward_proxy`]), with the whole manager running in-process:
//!
//! - with the registry in `Proxy.status.noProxy` the Catalog's pull goes direct, and once the
//!   admin takes it out, the pulls go through `httpProxy` (absolute-form plain HTTP);
//! - a TLS registry signed by a private CA is reached through `httpsProxy` (a CONNECT tunnel)
//!   and is trusted once the cluster's trusted CA bundle (the ConfigMap the network operator
//!   injects into) holds that CA, without any Catalog `caBundle`; a malformed bundle keeps the
//!   last good one and is reported with a Warning Event on the ConfigMap.
//!
//! Everything stays on loopback, and the direct route is observable. The registries are named
//! `0.0.0.0:<port>`: not a loopback address by the rules POM applies (Go's, as every OpenShift
//! component: `localhost` and 127/8 are never proxied), so the proxy applies to it, yet Linux
//! connects to it on the loopback interface. That port is a relay counting its connections in
//! front of the registry, while the forward proxy connects to the registry itself: a relay
//! count that moves means a direct pull, a proxy count that moves means a proxied one.
//!
//! The `Proxy` CRD is installed by the tests from POM's read-only view (the harness installs
//! the upstream CRDs it has, which do not include it).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::{conditions, wait::await_condition};
use kube::{Client, CustomResourceExt as _};
use pom_api::Catalog;
use pom_api::openshift::proxy::Proxy;
use pom_controller::cluster_proxy::TRUSTED_CA_CONFIGMAP;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::forward_proxy::ForwardProxy;
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::oci_publish::{PushLogin, push_catalog, push_files_as};
use pom_e2e::process::{Process, free_port};
use pom_e2e::scenario::apply_catalog;
use pom_e2e::{ControlPlane, Registry, Workloads, binaries};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::json;

/// How long each wait may take (each test finishes in well under it).
const WAIT: Duration = Duration::from_secs(60);

/// The manager's namespace in the e2e settings, where it reads the trusted CA bundle.
const MANAGER_NAMESPACE: &str = "openshift-platform-operators";

/// The proxied registry's name: see the module documentation.
fn unspecified(port: u16) -> String {
    format!("0.0.0.0:{port}")
}

/// What the cluster network operator adds to every cluster's `noProxy`.
const CLUSTER_NO_PROXY: &str = ".cluster.local,.svc,127.0.0.1,localhost";

/// A control plane without workloads (Catalogs only), or `None` when binaries are missing.
async fn plane() -> Option<ControlPlane> {
    let mut needed = binaries::CONTROL_PLANE.to_vec();
    needed.extend_from_slice(binaries::REGISTRY);
    binaries::require(&needed)?;
    Some(ControlPlane::start(Workloads::None).await.unwrap())
}

/// Applies the `Proxy` CRD (POM's view of it) and waits until it is served.
async fn install_proxy_crd(client: &Client) {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let crd = Proxy::crd();
    let name = crd.metadata.name.clone().unwrap();
    api.patch(
        &name,
        &PatchParams::apply("pom-e2e").force(),
        &Patch::Apply(&crd),
    )
    .await
    .unwrap();
    tokio::time::timeout(
        WAIT,
        await_condition(api, &name, conditions::is_crd_established()),
    )
    .await
    .unwrap_or_else(|_| panic!("CRD {name} not established"))
    .unwrap();
}

/// Sets the status of the `Proxy` `cluster` (creating it first), as the cluster network operator
/// does.
async fn set_proxy_status(client: &Client, http: &str, https: &str, no_proxy: &str) {
    let api: Api<Proxy> = Api::all(client.clone());
    if api.get_opt("cluster").await.unwrap().is_none() {
        let proxy: Proxy = serde_json::from_value(json!({
            "apiVersion": "config.openshift.io/v1", "kind": "Proxy",
            "metadata": {"name": "cluster"}, "spec": {}
        }))
        .unwrap();
        api.create(&PostParams::default(), &proxy).await.unwrap();
    }
    api.patch_status(
        "cluster",
        &PatchParams::default(),
        &Patch::Merge(
            json!({"status": {"httpProxy": http, "httpsProxy": https, "noProxy": no_proxy}}),
        ),
    )
    .await
    .unwrap();
}

/// Catalog `name` on `reference`, polled every 2 s.
async fn image_catalog(client: &Client, name: &str, reference: &str) {
    apply_catalog(
        client,
        name,
        json!({"image": {"ref": reference, "pollInterval": "2s"}}),
        0,
    )
    .await;
}

/// Waits for Catalog `name`'s `Serving` condition to have `status` and `reason`; returns its
/// message.
async fn wait_serving(client: &Client, name: &str, status: &str, reason: &str) -> String {
    let api: Api<Catalog> = Api::all(client.clone());
    eventually(
        WAIT,
        &format!("Catalog {name} Serving={status}/{reason}"),
        || async {
            let catalog = api.get(name).await.ok()?;
            let serving = catalog
                .status?
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Serving")?;
            (serving.status == status && serving.reason == reason).then_some(serving.message)
        },
    )
    .await
}

/// A TCP relay on loopback in front of `target`, counting the connections it accepts: a pull
/// that reaches the registry by the relay's port came direct.
struct CountingRelay {
    port: u16,
    connections: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl CountingRelay {
    async fn start(target: SocketAddr) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    if let Ok(mut outbound) = tokio::net::TcpStream::connect(target).await {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                });
            }
        });
        Self {
            port,
            connections,
            task,
        }
    }

    fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

impl Drop for CountingRelay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn loopback(port: u16) -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], port))
}

/// `noProxy` naming the registry keeps the Catalog's pulls off the proxy; once the admin takes
/// it out, the manager's pulls go through `httpProxy` (the registry is plain HTTP), without a
/// restart and without a change to the Catalog.
#[tokio::test]
async fn pulls_go_through_the_cluster_proxy_unless_no_proxy_names_the_registry() {
    let started = Instant::now();
    let Some(plane) = plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    install_proxy_crd(&client).await;
    let registry = Registry::start().await.unwrap();
    let registry_port: u16 = registry.host().rsplit_once(':').unwrap().1.parse().unwrap();
    for (repository, package) in [("team/first", "first"), ("team/second", "second")] {
        let fbc = catalog_json(&[TestBundle::new(package, "1.0.0")], &[]);
        push_catalog(&registry.host(), repository, "v1", &fbc)
            .await
            .unwrap();
    }
    let relay = CountingRelay::start(loopback(registry_port)).await;
    let host = unspecified(relay.port);
    let proxy = ForwardProxy::start(HashMap::from([(host.clone(), loopback(registry_port))]))
        .await
        .unwrap();

    // The registry is in noProxy when the manager starts.
    set_proxy_status(
        &client,
        &proxy.url(),
        &proxy.url(),
        &format!("{CLUSTER_NO_PROXY},0.0.0.0"),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![host.clone()]));
    image_catalog(&client, "first", &format!("{host}/team/first:v1")).await;
    wait_serving(&client, "first", "True", "Unpacked").await;
    assert!(relay.connections() > 0, "pulled direct");
    assert_eq!(
        proxy.forwarded_to(&host),
        0,
        "nothing went through the proxy: {:?}",
        proxy.forwarded()
    );

    // Out of noProxy: the Catalog's next poll goes through the proxy.
    set_proxy_status(&client, &proxy.url(), &proxy.url(), CLUSTER_NO_PROXY).await;
    eventually(WAIT, "a poll through the proxy", || async {
        (proxy.forwarded_to(&host) > 0).then_some(())
    })
    .await;
    // A pull that started before the change may still finish direct.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let direct = relay.connections();
    let proxied = proxy.forwarded_to(&host);
    image_catalog(&client, "second", &format!("{host}/team/second:v1")).await;
    wait_serving(&client, "second", "True", "Unpacked").await;
    assert!(
        proxy.forwarded_to(&host) > proxied,
        "the new Catalog's pull went through the proxy"
    );
    assert_eq!(relay.connections(), direct, "and never direct");
    manager.stop().await;
    eprintln!("proxy test took {:?}", started.elapsed());
}

/// The distribution registry over TLS from a private CA, without credentials, in memory; its
/// certificate names 127.0.0.1 (for pushing) and 0.0.0.0 (the name the Catalog uses).
struct TlsRegistry {
    _process: Process,
    port: u16,
    ca_pem: String,
    _dir: tempfile::TempDir,
}

impl TlsRegistry {
    async fn start(bin_dir: &Path) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pom-proxy-registry-")
            .tempdir()
            .unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "pom-e2e-proxy-ca");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "0.0.0.0".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "pom-e2e-proxied-registry");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca).unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("tls.crt"), cert.pem()).unwrap();
        std::fs::write(path("tls.key"), key.serialize_pem()).unwrap();
        let port = free_port().unwrap();
        let config = json!({
            "version": 0.1,
            "log": {"level": "info", "accesslog": {"disabled": true}},
            "storage": {"inmemory": {}},
            "http": {
                "addr": format!("127.0.0.1:{port}"),
                "secret": "pom-e2e-not-a-secret",
                "tls": {
                    "certificate": path("tls.crt").display().to_string(),
                    "key": path("tls.key").display().to_string(),
                },
            },
        });
        // YAML is a superset of JSON.
        std::fs::write(path("config.yml"), config.to_string()).unwrap();
        // No OpenTelemetry exporter: it would try to reach a collector on localhost.
        let args = vec![
            "OTEL_TRACES_EXPORTER=none".to_owned(),
            bin_dir.join("registry").display().to_string(),
            "serve".to_owned(),
            path("config.yml").display().to_string(),
        ];
        let mut process =
            Process::spawn("distribution", Path::new("/usr/bin/env"), &args, dir.path()).unwrap();
        let started = Instant::now();
        while tokio::net::TcpStream::connect(loopback(port))
            .await
            .is_err()
        {
            assert!(
                !process.has_exited() && started.elapsed() < Duration::from_secs(30),
                "the distribution registry did not start: {}",
                process.log_tail(30)
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        Self {
            _process: process,
            port,
            ca_pem: ca.pem(),
            _dir: dir,
        }
    }
}

/// Creates or replaces the trusted CA bundle ConfigMap's `ca-bundle.crt`, as the cluster
/// network operator injects it.
async fn inject_trusted_ca(client: &Client, pem: &str) {
    let config_map: ConfigMap = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {
            "name": TRUSTED_CA_CONFIGMAP, "namespace": MANAGER_NAMESPACE,
            "labels": {"config.openshift.io/inject-trusted-cabundle": "true"},
        },
        "data": {"ca-bundle.crt": pem},
    }))
    .unwrap();
    Api::<ConfigMap>::namespaced(client.clone(), MANAGER_NAMESPACE)
        .patch(
            TRUSTED_CA_CONFIGMAP,
            &PatchParams::apply("pom-e2e-network-operator").force(),
            &Patch::Apply(&config_map),
        )
        .await
        .unwrap();
}

/// A registry signed by a private CA, reached through `httpsProxy`: untrusted at first (the
/// tunnel is opened, the certificate refused), trusted once the cluster's trusted CA bundle
/// holds the CA, with no Catalog `caBundle`; a malformed bundle then keeps the last good one
/// in force and is reported on the ConfigMap.
#[tokio::test]
async fn a_registry_signed_by_the_trusted_ca_is_reached_through_the_proxy() {
    let started = Instant::now();
    let Some(dist) = binaries::require_distribution() else {
        return;
    };
    let Some(plane) = plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    install_proxy_crd(&client).await;
    let namespace: Namespace =
        serde_json::from_value(json!({"metadata": {"name": MANAGER_NAMESPACE}})).unwrap();
    match Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &namespace)
        .await
    {
        Ok(_) => {}
        Err(kube::Error::Api(status)) if status.code == 409 => {}
        Err(err) => panic!("creating namespace {MANAGER_NAMESPACE}: {err}"),
    }
    let registry = TlsRegistry::start(&dist).await;
    let login = PushLogin {
        username: "pom-e2e",
        password: "no-auth-configured",
        ca_pem: &registry.ca_pem,
    };
    for repository in ["team/catalog", "team/again"] {
        let fbc = catalog_json(&[TestBundle::new("trusted", "1.0.0")], &[]);
        let files = [("configs/catalog.json".to_owned(), fbc.into_bytes())];
        push_files_as(
            &format!("127.0.0.1:{}", registry.port),
            repository,
            "v1",
            &files,
            &login,
        )
        .await
        .unwrap();
    }
    let relay = CountingRelay::start(loopback(registry.port)).await;
    let host = unspecified(relay.port);
    let proxy = ForwardProxy::start(HashMap::from([(host.clone(), loopback(registry.port))]))
        .await
        .unwrap();
    // HTTPS only: no httpProxy.
    set_proxy_status(&client, "", &proxy.url(), CLUSTER_NO_PROXY).await;
    let manager = Manager::start(client.clone(), Manager::test_settings(Vec::new()));

    image_catalog(&client, "trusted", &format!("{host}/team/catalog:v1")).await;
    let message = wait_serving(&client, "trusted", "False", "RegistryCertificateUntrusted").await;
    assert!(message.contains(&host), "{message}");
    assert!(
        proxy.forwarded_to(&host) > 0,
        "the tunnel was opened: {:?}",
        proxy.forwarded()
    );

    // The network operator injects the bundle holding the CA: trusted, no caBundle needed.
    let system_roots_and_the_ca = format!("# system roots would be here\n{}", registry.ca_pem);
    inject_trusted_ca(&client, &system_roots_and_the_ca).await;
    wait_serving(&client, "trusted", "True", "Unpacked").await;

    // A malformed bundle: the last good one stays in force, and the ConfigMap says why.
    inject_trusted_ca(
        &client,
        "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n",
    )
    .await;
    let events: Api<Event> = Api::namespaced(client.clone(), MANAGER_NAMESPACE);
    let note = eventually(WAIT, "a TrustedCABundleRefused Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find_map(|event| {
            let about = event.regarding.as_ref()?;
            (event.reason.as_deref() == Some("TrustedCABundleRefused")
                && event.type_.as_deref() == Some("Warning")
                && about.kind.as_deref() == Some("ConfigMap")
                && about.name.as_deref() == Some(TRUSTED_CA_CONFIGMAP))
            .then(|| event.note.unwrap_or_default())
        })
    })
    .await;
    assert!(note.contains("malformed"), "{note}");
    assert!(
        note.contains("keeps trusting the last usable bundle"),
        "{note}"
    );
    image_catalog(&client, "trusted-again", &format!("{host}/team/again:v1")).await;
    wait_serving(&client, "trusted-again", "True", "Unpacked").await;
    assert_eq!(relay.connections(), 0, "every pull went through the proxy");
    manager.stop().await;
    eprintln!("trusted CA test took {:?}", started.elapsed());
}
