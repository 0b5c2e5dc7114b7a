#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Registries as OpenShift has them (issue 14 item 7), against a real API server and a real
//! registry that wants credentials and serves TLS signed by a private CA (the CNCF
//! distribution registry, htpasswd auth, on 127.0.0.1):
//!
//! - a Catalog with the right pull secret and CA bundle serves, and a PlatformOperator installs
//!   from a bundle image on the same registry (pulled with the catalog's credentials and CA);
//! - without a pull secret the Catalog is not Serving (`RegistryUnauthorized`) and the message
//!   says where credentials go; once the cluster's global pull secret
//!   (`openshift-config/pull-secret`) has an entry for the registry, it serves;
//! - with a wrong password it is not Serving, the message names the Secret to check, and the
//!   password appears nowhere in the Catalog or in any Event; the Catalog's own secret keeps
//!   precedence over the global one;
//! - without the CA bundle the certificate is refused with `RegistryCertificateUntrusted`, and
//!   the message names `spec.source.image.caBundle`;
//! - the right pull secret or CA bundle in a namespace the admin has not listed in ConfigMap
//!   `platform-operators-catalog-sources` is refused (`UntrustedCatalogSource`) and never read:
//!   the Catalog never serves over a window longer than every poll and resync, and serves once
//!   the namespace is listed.

use std::path::Path;
use std::time::{Duration, Instant};

use base64::Engine;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kube::Client;
use kube::api::{Api, ListParams, PostParams};
use pom_api::Catalog;
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::oci_publish::{PushLogin, push_files_as};
use pom_e2e::process::{Process, free_port};
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    WAIT, apply_catalog, create_in, create_po, simulated_plane, wait_po_condition,
};
use pom_policy::source_trust::SOURCES_CONFIG_MAP;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};
use serde_json::json;

const USER: &str = "pom-e2e";
/// The registry's password, and a bcrypt hash of it (cost 4) for its htpasswd file, computed
/// once with golang.org/x/crypto/bcrypt: the e2e crate has no bcrypt of its own.
const PASSWORD: &str = "pom-e2e-correct-horse-7d1f";
const PASSWORD_BCRYPT: &str = "$2a$04$PgGIptHpY9FmhgIK61SF/.oolKOfdQQbs1Ki/4o.GurnQuNf8jFNi";
/// A wrong password, distinctive enough that finding it anywhere is a leak.
const WRONG_PASSWORD: &str = "wrong-battery-staple-93kq";
const NAMESPACE: &str = "registry-auth";

/// The distribution registry with htpasswd auth and TLS from a private CA, in memory.
struct AuthRegistry {
    _process: Process,
    port: u16,
    ca_pem: String,
    _dir: tempfile::TempDir,
}

impl AuthRegistry {
    async fn start(bin_dir: &Path) -> Self {
        let dir = tempfile::Builder::new()
            .prefix("pom-auth-registry-")
            .tempdir()
            .unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "pom-e2e-registry-ca");
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params =
            CertificateParams::new(vec!["127.0.0.1".to_owned(), "localhost".to_owned()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, "pom-e2e-registry");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca).unwrap();
        let path = |name: &str| dir.path().join(name);
        std::fs::write(path("tls.crt"), cert.pem()).unwrap();
        std::fs::write(path("tls.key"), key.serialize_pem()).unwrap();
        std::fs::write(path("htpasswd"), format!("{USER}:{PASSWORD_BCRYPT}\n")).unwrap();
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
            "auth": {"htpasswd": {"realm": "pom-e2e", "path": path("htpasswd").display().to_string()}},
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
        while tokio::net::TcpStream::connect(("127.0.0.1", port))
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

    fn host(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    fn login(&self) -> PushLogin<'_> {
        PushLogin {
            username: USER,
            password: PASSWORD,
            ca_pem: &self.ca_pem,
        }
    }
}

/// A `kubernetes.io/dockerconfigjson` Secret with one entry for `host`.
async fn pull_secret(client: &Client, namespace: &str, name: &str, host: &str, password: &str) {
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{password}"));
    let config = json!({"auths": {host: {"auth": auth}}}).to_string();
    create_in(
        Api::<Secret>::namespaced(client.clone(), namespace),
        json!({
            "metadata": {"name": name, "namespace": namespace},
            "type": "kubernetes.io/dockerconfigjson",
            "stringData": {".dockerconfigjson": config},
        }),
    )
    .await;
}

async fn namespace(client: &Client, name: &str) {
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
}

/// Catalog `name` on `reference`, polled every 2 s, with the optional pull secret
/// (`namespace`, `name`) and CA bundle (ConfigMap `registry-ca` of the namespace given).
async fn image_catalog(
    client: &Client,
    name: &str,
    reference: &str,
    secret: Option<(&str, &str)>,
    ca: Option<&str>,
) {
    let mut image = json!({"ref": reference, "pollInterval": "2s"});
    if let Some((namespace, secret)) = secret {
        image["pullSecret"] = json!({"name": secret, "namespace": namespace});
    }
    if let Some(namespace) = ca {
        image["caBundle"] = json!({"name": "registry-ca", "namespace": namespace});
    }
    apply_catalog(client, name, json!({"image": image}), 0).await;
}

/// ConfigMap `registry-ca` in `namespace` holding `pem`.
async fn ca_config_map(client: &Client, namespace: &str, pem: &str) {
    create_in(
        Api::<ConfigMap>::namespaced(client.clone(), namespace),
        json!({
            "metadata": {"name": "registry-ca", "namespace": namespace},
            "data": {"ca-bundle.crt": pem},
        }),
    )
    .await;
}

/// Waits for Catalog `name`'s `Serving` condition to have `status` and `reason`; returns the
/// Catalog.
async fn wait_serving(client: &Client, name: &str, status: &str, reason: &str) -> Catalog {
    let api: Api<Catalog> = Api::all(client.clone());
    eventually(
        WAIT,
        &format!("Catalog {name} Serving={status}/{reason}"),
        || async {
            let catalog = api.get(name).await.ok()?;
            let serving = catalog
                .status
                .as_ref()?
                .conditions
                .iter()
                .find(|c| c.type_ == "Serving")?;
            (serving.status == status && serving.reason == reason).then(|| catalog.clone())
        },
    )
    .await
}

fn serving_message(catalog: &Catalog) -> String {
    catalog
        .status
        .as_ref()
        .and_then(|s| s.conditions.iter().find(|c| c.type_ == "Serving"))
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

#[tokio::test]
async fn catalogs_and_bundles_on_an_authenticated_tls_registry() {
    let Some(dist) = pom_e2e::binaries::require_distribution() else {
        return;
    };
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    // The admin trusts the namespace holding the pull secrets and the CA bundle.
    pom_e2e::scenario::trust_catalog_namespace(&client, NAMESPACE).await;
    let registry = AuthRegistry::start(&dist).await;
    let host = registry.host();
    let login = registry.login();

    // A bundle image and a catalog image naming it, both behind the credentials.
    let bundle = TestBundle::new("secure", "1.0.0");
    let bundle_image = push_files_as(
        &host,
        "bundles/secure",
        "1.0.0",
        &bundle.image_files(),
        &login,
    )
    .await
    .unwrap();
    let fbc = catalog_json(
        std::slice::from_ref(&bundle),
        &[(bundle.name(), bundle_image.clone())],
    );
    let files = [("configs/catalog.json".to_owned(), fbc.into_bytes())];
    push_files_as(&host, "catalogs/secure", "latest", &files, &login)
        .await
        .unwrap();
    let catalog_ref = format!("{host}/catalogs/secure:latest");

    namespace(&client, NAMESPACE).await;
    pull_secret(&client, NAMESPACE, "good-creds", &host, PASSWORD).await;
    pull_secret(&client, NAMESPACE, "bad-creds", &host, WRONG_PASSWORD).await;
    ca_config_map(&client, NAMESPACE, &registry.ca_pem).await;

    // No insecure registries: the registry is reached over HTTPS only.
    let settings = Manager::test_settings(Vec::new());
    let manager = Manager::start(client.clone(), settings.clone());

    // The right secret and CA: the catalog serves, and the bundle image is pulled from the same
    // registry with the catalog's credentials and CA.
    image_catalog(
        &client,
        "secure",
        &catalog_ref,
        Some((NAMESPACE, "good-creds")),
        Some(NAMESPACE),
    )
    .await;
    let serving = wait_serving(&client, "secure", "True", "Unpacked").await;
    assert!(
        serving
            .status
            .as_ref()
            .and_then(|s| s.resolved_source.as_deref())
            .is_some_and(|r| r.starts_with(&format!("{host}/catalogs/secure@sha256:"))),
        "{:?}",
        serving.status
    );
    create_po(&client, "secure", json!({"package": {"name": "secure"}})).await;
    wait_po_condition(
        &client,
        "secure",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;

    // No pull secret at all: anonymous, refused, and the message says where credentials go.
    image_catalog(&client, "no-secret", &catalog_ref, None, Some(NAMESPACE)).await;
    let refused = wait_serving(&client, "no-secret", "False", "RegistryUnauthorized").await;
    let message = serving_message(&refused);
    assert!(
        message.contains("spec.source.image.pullSecret")
            && message.contains("openshift-config/pull-secret")
            && message.contains(&host),
        "{message}"
    );

    // A wrong password: refused, the Secret to check is named, the password is nowhere.
    image_catalog(
        &client,
        "wrong-password",
        &catalog_ref,
        Some((NAMESPACE, "bad-creds")),
        Some(NAMESPACE),
    )
    .await;
    let refused = wait_serving(&client, "wrong-password", "False", "RegistryUnauthorized").await;
    let message = serving_message(&refused);
    assert!(
        message.contains(&format!("{NAMESPACE}/bad-creds")) && message.contains(&host),
        "names the Secret and registry to check: {message}"
    );
    let wrong_auth =
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{WRONG_PASSWORD}"));
    let status = serde_json::to_string(&refused.status).unwrap();
    for secret in [WRONG_PASSWORD, wrong_auth.as_str(), PASSWORD] {
        assert!(!status.contains(secret), "a credential in status: {status}");
    }
    // Events are published with the status: wait for the Warning, then look at every Event.
    let events: Api<Event> = Api::all(client.clone());
    eventually(WAIT, "a RegistryUnauthorized Event", || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items
            .iter()
            .any(|e| e.reason.as_deref() == Some("RegistryUnauthorized"))
            .then_some(())
    })
    .await;
    let all = serde_json::to_string(&events.list(&ListParams::default()).await.unwrap()).unwrap();
    for secret in [WRONG_PASSWORD, wrong_auth.as_str(), PASSWORD] {
        assert!(!all.contains(secret), "a credential in an Event");
    }

    // No CA bundle: the private CA is not trusted, and the message names the field.
    image_catalog(
        &client,
        "untrusted",
        &catalog_ref,
        Some((NAMESPACE, "good-creds")),
        None,
    )
    .await;
    let refused = wait_serving(
        &client,
        "untrusted",
        "False",
        "RegistryCertificateUntrusted",
    )
    .await;
    let message = serving_message(&refused);
    assert!(
        message.contains("spec.source.image.caBundle") && message.contains(&host),
        "{message}"
    );

    unlisted_namespaces_are_never_read(&client, &settings, &registry, &catalog_ref).await;

    // The cluster's global pull secret: the catalog without a secret of its own now serves;
    // the catalog whose own secret is wrong stays refused (its secret takes precedence).
    namespace(&client, "openshift-config").await;
    pull_secret(&client, "openshift-config", "pull-secret", &host, PASSWORD).await;
    wait_serving(&client, "no-secret", "True", "Unpacked").await;
    let still = wait_serving(&client, "wrong-password", "False", "RegistryUnauthorized").await;
    assert!(
        serving_message(&still).contains(&format!("{NAMESPACE}/bad-creds")),
        "{}",
        serving_message(&still)
    );

    manager.stop().await;
}

/// The right credentials and CA, copied to `registry-unlisted`, a namespace not listed in
/// ConfigMap `platform-operators-catalog-sources`: a Catalog naming either there is refused
/// with `UntrustedCatalogSource`, naming the namespace and the ConfigMap, and is never
/// `Serving` over a window longer than every poll and resync (had the manager read the Secret
/// or the ConfigMap, it would have pulled: the other reference is the right one). Once the
/// admin lists the namespace, both serve: what was refused was the namespace, nothing else.
async fn unlisted_namespaces_are_never_read(
    client: &Client,
    settings: &pom_controller::context::Settings,
    registry: &AuthRegistry,
    catalog_ref: &str,
) {
    const UNLISTED: &str = "registry-unlisted";
    namespace(client, UNLISTED).await;
    pull_secret(client, UNLISTED, "good-creds", &registry.host(), PASSWORD).await;
    ca_config_map(client, UNLISTED, &registry.ca_pem).await;
    let catalogs: Api<Catalog> = Api::all(client.clone());
    let serves = |catalog: &Catalog| {
        catalog.status.as_ref().is_some_and(|s| {
            s.conditions
                .iter()
                .any(|c| c.type_ == "Serving" && c.status == "True")
        })
    };
    image_catalog(
        client,
        "unlisted-secret",
        catalog_ref,
        Some((UNLISTED, "good-creds")),
        Some(NAMESPACE),
    )
    .await;
    image_catalog(
        client,
        "unlisted-ca",
        catalog_ref,
        Some((NAMESPACE, "good-creds")),
        Some(UNLISTED),
    )
    .await;
    let window = QuietWindow::new(settings)
        .never(catalogs.clone(), "unlisted-secret", "Serving=True", serves)
        .never(catalogs.clone(), "unlisted-ca", "Serving=True", serves)
        .open()
        .await;
    for (name, field) in [
        ("unlisted-secret", "spec.source.image.pullSecret"),
        ("unlisted-ca", "spec.source.image.caBundle"),
    ] {
        let refused = wait_serving(client, name, "False", "UntrustedCatalogSource").await;
        let message = serving_message(&refused);
        assert!(
            message.contains(UNLISTED)
                && message.contains(SOURCES_CONFIG_MAP)
                && message.contains(field),
            "{name}: {message}"
        );
    }
    window.hold().await;
    pom_e2e::scenario::trust_catalog_namespace(client, UNLISTED).await;
    for name in ["unlisted-secret", "unlisted-ca"] {
        wait_serving(client, name, "True", "Unpacked").await;
    }
}
