#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The puller's behaviour that needs no registry: digest references short-circuit, bad
//! references and unreachable registries map to the right condition reasons.

use std::sync::{Arc, Mutex};

use pom_oci::mirrors::MirrorRules;
use pom_oci::{ImagePuller, OciError, RegistryAccess};

const DIGEST: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn install_crypto_provider() {
    // Another test in this binary may have installed it already.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[tokio::test]
async fn a_digest_reference_resolves_to_itself_without_network() {
    // No crypto provider and no registry: any network use would fail.
    let puller = ImagePuller::new(Vec::new());
    let reference = format!("registry.invalid:5000/team/catalog@{DIGEST}");
    assert_eq!(
        puller
            .resolve_digest(
                &reference,
                &RegistryAccess::anonymous(),
                &MirrorRules::default()
            )
            .await
            .unwrap()
            .by_digest,
        reference
    );
    // A tag next to the digest is dropped: the digest is what is pulled.
    let tagged = format!("registry.invalid:5000/team/catalog:v1@{DIGEST}");
    assert_eq!(
        puller
            .resolve_digest(
                &tagged,
                &RegistryAccess::anonymous(),
                &MirrorRules::default()
            )
            .await
            .unwrap()
            .by_digest,
        reference
    );
}

#[tokio::test]
async fn an_invalid_reference_says_what_is_expected() {
    let puller = ImagePuller::new(Vec::new());
    let err = puller
        .resolve_digest(
            "Not A Reference!",
            &RegistryAccess::anonymous(),
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::InvalidReference { .. }), "{err:?}");
    assert_eq!(err.reason().as_str(), "InvalidImageReference");
    assert!(err.to_string().contains("registry/repository:tag"), "{err}");
}

#[tokio::test]
async fn an_unreachable_insecure_registry_is_reported_as_such() {
    install_crypto_provider();
    // Port 1 on loopback: nothing listens, the connection is refused at once.
    let puller = ImagePuller::new(vec!["127.0.0.1:1".to_owned()]);
    let err = puller
        .resolve_digest(
            "127.0.0.1:1/catalog:latest",
            &RegistryAccess::anonymous(),
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OciError::Unreachable { registry, .. } if registry == "127.0.0.1:1"),
        "{err:?}"
    );
    assert_eq!(err.reason().as_str(), "RegistryUnreachable");
    let message = err.to_string();
    assert!(
        message.contains("127.0.0.1:1/catalog:latest"),
        "names the image: {message}"
    );
    assert!(
        message.contains("insecure"),
        "says what to check: {message}"
    );
    assert!(err.is_transient());
}

#[tokio::test]
async fn pulls_fail_the_same_way_as_resolution() {
    install_crypto_provider();
    let puller = ImagePuller::new(vec!["127.0.0.1:1".to_owned()]);
    let err = puller
        .pull_files(
            &format!("127.0.0.1:1/catalog@{DIGEST}"),
            "configs/",
            &RegistryAccess::anonymous(),
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason().as_str(), "RegistryUnreachable", "{err}");
}

/// A registry on 127.0.0.1 (plain HTTP) that wants HTTP Basic credentials and refuses every
/// one, echoing the `Authorization` header it got in its error, as a careless registry might;
/// the headers it got are kept for the test to look at.
async fn refusing_registry() -> (u16, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_server = seen.clone();
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let seen = seen_by_server.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0_u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let authorization = text
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .starts_with("authorization:")
                            .then(|| l[14..].trim().to_owned())
                    })
                    .unwrap_or_default();
                seen.lock().unwrap().push(authorization.clone());
                let body = format!(
                    r#"{{"errors":[{{"code":"UNAUTHORIZED","message":"bad credentials {authorization}"}}]}}"#
                );
                let head = text.starts_with("HEAD");
                let response = format!(
                    "HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm=\"test\"\r\n\
                     Content-Type: application/json\r\nContent-Length: {}\r\n\
                     Connection: close\r\n\r\n{}",
                    body.len(),
                    if head { "" } else { body.as_str() }
                );
                let _ = socket.write_all(response.as_bytes()).await;
            });
        }
    });
    (port, seen)
}

fn pull_secret(host: &str, user: &str, password: &str) -> RegistryAccess {
    use base64::Engine;
    let auth = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    let json = format!(r#"{{"auths": {{"{host}": {{"auth": "{auth}"}}}}}}"#);
    let secret = pom_oci::auth::PullSecret::parse(
        pom_oci::auth::SecretName {
            namespace: "team".into(),
            name: "registry-creds".into(),
        },
        json.as_bytes(),
    )
    .unwrap();
    RegistryAccess::anonymous().with_pull_secret(Arc::new(secret))
}

#[tokio::test]
async fn refused_credentials_name_the_secret_and_never_the_password() {
    install_crypto_provider();
    let (port, seen) = refusing_registry().await;
    let host = format!("127.0.0.1:{port}");
    let puller = ImagePuller::new(vec![host.clone()]);
    let access = pull_secret(&host, "alice", "hunter2-very-secret");
    let reference = format!("{host}/team/catalog:latest");
    let err = puller
        .resolve_digest(&reference, &access, &MirrorRules::default())
        .await
        .unwrap_err();
    assert!(
        matches!(&err, OciError::Unauthorized { credentials, .. } if credentials.sent.is_some()),
        "{err:?}"
    );
    assert_eq!(err.reason().as_str(), "RegistryUnauthorized");
    let basic = "Basic YWxpY2U6aHVudGVyMi12ZXJ5LXNlY3JldA=="; // alice:hunter2-very-secret
    assert!(
        seen.lock().unwrap().iter().any(|h| h == basic),
        "the secret's credential was sent: {:?}",
        seen.lock().unwrap()
    );
    assert!(!err.is_transient(), "only a new secret fixes it");
    let message = err.to_string();
    let debug = format!("{err:?}");
    for text in [&message, &debug] {
        assert!(!text.contains("hunter2"), "the password leaked: {text}");
        assert!(
            !text.contains("YWxpY2U6aHVudGVy"),
            "the base64 credential leaked: {text}"
        );
    }
    assert!(
        message.contains("team/registry-creds") && message.contains(&host),
        "names the Secret and the registry to check: {message}"
    );

    // The same registry without an entry for it: the pull is anonymous, and the message says
    // where credentials go.
    let other = pull_secret("quay.io", "alice", "hunter2-very-secret");
    let err = puller
        .resolve_digest(&reference, &other, &MirrorRules::default())
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        matches!(&err, OciError::Unauthorized { credentials, .. } if credentials.sent.is_none()),
        "{err:?}"
    );
    assert!(
        message.contains("spec.source.image.pullSecret")
            && message.contains("openshift-config/pull-secret")
            && message.contains("no entry for"),
        "{message}"
    );
    assert!(!message.contains("hunter2"), "{message}");
}
