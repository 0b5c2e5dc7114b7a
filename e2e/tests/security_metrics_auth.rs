#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Metrics that can be scraped safely: the manager, a process under the shipped RBAC, serves
//! `/metrics` over HTTPS with a certificate this test issued for the metrics Service's DNS name,
//! and answers
//! - nothing to plain HTTP on that port;
//! - 401 without a token, and with a token the API server does not authenticate;
//! - 403 to a ServiceAccount that may not `get /metrics`;
//! - 200 with OpenMetrics to a ServiceAccount bound to the shipped metrics-reader ClusterRole;
//!
//! and, when the certificate files are replaced (as the service-ca operator renews them),
//! serves the new certificate without a restart.
//!
//! It also measures the review cache: the manager counts its own TokenReviews and
//! SubjectAccessReviews (`pom_api_requests_total`), so the test can see that repeated scrapes
//! with one token cost one review pair, not one per scrape, and prints the latency of a scrape
//! that had to ask the API server against one answered from the cache.

use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::ClusterRoleBinding;
use kube::api::{Api, PostParams};
use pom_controller::manifests::{METRICS_READER, METRICS_SERVICE, NAMESPACE};
use pom_e2e::manager::eventually;
use pom_e2e::manager_process::{ManagerProcess, free_address, http_get, https_get, manager_binary};
use pom_e2e::shipped::{
    apply_kubernetes_manifests, service_account_kubeconfig, service_account_token,
};
use pom_e2e::{ControlPlane, Workloads, binaries};
use serde_json::json;

const SCRAPERS: &str = "monitoring";
const TOKEN_REVIEWS: &str = "pom_api_requests_total{verb=\"create\",kind=\"read\",resource=\"tokenreviews.authentication.k8s.io\"}";
const ACCESS_REVIEWS: &str = "pom_api_requests_total{verb=\"create\",kind=\"read\",resource=\"subjectaccessreviews.authorization.k8s.io\"}";

/// A CA and a serving certificate for the metrics Service's DNS name, as the service-ca
/// operator would issue, written to `metrics-tls.{crt,key}` (the key first, as a rotation
/// would not be atomic either); the CA's PEM, and the certificate and key files.
fn serving_certificate(
    dir: &std::path::Path,
    server_name: &str,
    ca_name: &str,
) -> (String, std::path::PathBuf, std::path::PathBuf) {
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, ca_name);
    ca_params.key_usages = vec![
        rcgen::KeyUsagePurpose::KeyCertSign,
        rcgen::KeyUsagePurpose::DigitalSignature,
    ];
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, rcgen::KeyPair::generate().unwrap())
        .unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![server_name.to_owned()]).unwrap();
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let cert = params.signed_by(&key, &ca).unwrap();
    let (cert_file, key_file) = (dir.join("metrics-tls.crt"), dir.join("metrics-tls.key"));
    std::fs::write(&key_file, key.serialize_pem()).unwrap();
    std::fs::write(&cert_file, cert.pem()).unwrap();
    (ca.pem(), cert_file, key_file)
}

/// The value of the sample `series` in an OpenMetrics body (0 when absent: a counter never
/// incremented has no series).
fn sample(body: &str, series: &str) -> f64 {
    body.lines()
        .find_map(|line| line.strip_prefix(series)?.strip_prefix(' '))
        .map_or(0.0, |v| v.parse().unwrap())
}

#[tokio::test]
async fn metrics_need_tls_and_a_token_allowed_to_get_metrics() {
    if binaries::require(binaries::CONTROL_PLANE).is_none() {
        return;
    }
    let plane = ControlPlane::start(Workloads::None).await.unwrap();
    let client = plane.client().await.unwrap();
    let applied = apply_kubernetes_manifests(&client).await.unwrap();
    assert!(
        applied.contains(&format!("ClusterRole/{METRICS_READER}")),
        "{applied:?}"
    );
    let kubeconfig = service_account_kubeconfig(
        &plane,
        &client,
        NAMESPACE,
        "platform-operators-manager",
        "manager-sa.kubeconfig",
    )
    .await
    .unwrap();

    // Two would-be scrapers: one bound to the shipped reader role, one not.
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": SCRAPERS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let sas = Api::<ServiceAccount>::namespaced(client.clone(), SCRAPERS);
    for name in ["prometheus", "stranger"] {
        let sa: ServiceAccount =
            serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
        sas.create(&PostParams::default(), &sa).await.unwrap();
    }
    let binding: ClusterRoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "prometheus-reads-pom-metrics"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": METRICS_READER},
        "subjects": [{"kind": "ServiceAccount", "name": "prometheus", "namespace": SCRAPERS}]
    }))
    .unwrap();
    Api::<ClusterRoleBinding>::all(client.clone())
        .create(&PostParams::default(), &binding)
        .await
        .unwrap();
    let prometheus = service_account_token(&client, SCRAPERS, "prometheus")
        .await
        .unwrap();
    let stranger = service_account_token(&client, SCRAPERS, "stranger")
        .await
        .unwrap();

    let server_name = format!("{METRICS_SERVICE}.{NAMESPACE}.svc");
    let (ca, cert_file, key_file) =
        serving_certificate(plane.dir(), &server_name, "pom-e2e-service-ca");
    let (health, metrics) = (free_address().unwrap(), free_address().unwrap());
    let args = vec![
        "--leader-elect=false".to_owned(),
        format!("--health-bind-address={health}"),
        format!("--metrics-bind-address={metrics}"),
        format!("--metrics-tls-cert-file={}", cert_file.display()),
        format!("--metrics-tls-key-file={}", key_file.display()),
    ];
    let manager = ManagerProcess::spawn(
        &manager_binary(env!("CARGO_BIN_EXE_pom-manager-e2e")),
        "manager-sa",
        &kubeconfig,
        &args,
        &[("POD_NAMESPACE", NAMESPACE)],
        plane.dir(),
    )
    .await
    .unwrap();
    let get = |token: Option<&str>| {
        let (ca, server_name, token) = (ca.clone(), server_name.clone(), token.map(str::to_owned));
        async move { https_get(metrics, &server_name, &ca, "/metrics", token.as_deref()).await }
    };
    // Listening once the certificate loaded; any HTTP answer will do here.
    eventually(
        Duration::from_secs(60),
        "the HTTPS metrics listener",
        || async { get(None).await.ok() },
    )
    .await;

    // Plain HTTP on the TLS port gets no HTTP answer at all.
    assert_eq!(
        http_get(metrics, "/metrics").await,
        None,
        "plain HTTP must not be answered"
    );
    // And the probes stay plain HTTP on their own listener, without metrics.
    assert_eq!(http_get(health, "/healthz").await.unwrap().0, 200);
    assert_eq!(http_get(health, "/metrics").await.unwrap().0, 404);

    let ask = |token: Option<&str>, want: u16| {
        let get = get(token);
        async move {
            let (status, head, body) = get.await.unwrap();
            assert_eq!(status, want, "{head}\n{body}");
            (head, body)
        }
    };
    // Every refusal twice: the second is answered from the cache (counted below).
    for _ in 0..2 {
        let (head, _) = ask(None, 401).await;
        assert!(
            head.to_ascii_lowercase()
                .contains("www-authenticate: bearer"),
            "{head}"
        );
        ask(Some("not-a-token"), 401).await;
        ask(Some(&stranger), 403).await;
    }

    let started = Instant::now();
    let (head, body) = ask(Some(&prometheus), 200).await;
    let first = started.elapsed();
    assert!(
        head.to_ascii_lowercase()
            .contains("content-type: application/openmetrics-text; version=1.0.0"),
        "{head}"
    );
    assert!(body.ends_with("# EOF\n"), "{body}");
    assert!(
        body.contains("# TYPE pom_platformoperators gauge\n"),
        "{body}"
    );

    let mut cached = Vec::new();
    let mut last = body;
    for _ in 0..10 {
        let started = Instant::now();
        last = ask(Some(&prometheus), 200).await.1;
        cached.push(started.elapsed());
    }
    cached.sort();
    eprintln!(
        "metrics scrape with reviews: {:.1} ms; answered from the review cache: median {:.1} ms (of {})",
        first.as_secs_f64() * 1000.0,
        cached[cached.len() / 2].as_secs_f64() * 1000.0,
        cached.len()
    );

    // Eleven allowed scrapes and six refused ones: one TokenReview per distinct token (the
    // missing one needs none) and one SubjectAccessReview per authenticated token.
    assert_eq!(
        (sample(&last, TOKEN_REVIEWS), sample(&last, ACCESS_REVIEWS)),
        (3.0, 2.0),
        "reviews are cached per token\n{last}\n{}",
        manager.log_tail(30)
    );

    // Rotation: a certificate from another CA replaces the files; new connections get it
    // within the reload interval, and the old CA no longer verifies.
    {
        let get_rotated = |ca: String| {
            let (server_name, token) = (server_name.clone(), prometheus.clone());
            async move { https_get(metrics, &server_name, &ca, "/metrics", Some(&token)).await }
        };
        let next = plane.dir().join("next");
        std::fs::create_dir_all(&next).unwrap();
        let (new_ca, new_cert, new_key) =
            serving_certificate(&next, &server_name, "pom-e2e-service-ca-2");
        let err = get_rotated(new_ca.clone()).await.unwrap_err();
        assert!(err.contains("TLS handshake"), "{err}");
        std::fs::copy(&new_key, &key_file).unwrap();
        std::fs::copy(&new_cert, &cert_file).unwrap();
        let started = Instant::now();
        eventually(
            Duration::from_secs(40),
            "the rotated certificate",
            || async {
                get_rotated(new_ca.clone())
                    .await
                    .ok()
                    .filter(|(status, _, _)| *status == 200)
            },
        )
        .await;
        eprintln!(
            "rotated certificate served after {:.1} s",
            started.elapsed().as_secs_f64()
        );
        let err = get_rotated(ca.clone()).await.unwrap_err();
        assert!(err.contains("TLS handshake"), "{err}");
    }

    let log = manager.log_text();
    assert!(
        !log.contains("could not review"),
        "the shipped RBAC must allow the reviews:\n{}",
        manager.log_tail(30)
    );
    assert!(
        log.contains("metrics serving certificate reloaded"),
        "{}",
        manager.log_tail(30)
    );
}
