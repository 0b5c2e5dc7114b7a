#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The puller's behaviour that needs no registry: digest references short-circuit, bad
//! references and unreachable registries map to the right condition reasons.

use pom_oci::{ImagePuller, OciError};

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
    assert_eq!(puller.resolve_digest(&reference).await.unwrap(), reference);
    // A tag next to the digest is dropped: the digest is what is pulled.
    let tagged = format!("registry.invalid:5000/team/catalog:v1@{DIGEST}");
    assert_eq!(puller.resolve_digest(&tagged).await.unwrap(), reference);
}

#[tokio::test]
async fn an_invalid_reference_says_what_is_expected() {
    let puller = ImagePuller::new(Vec::new());
    let err = puller.resolve_digest("Not A Reference!").await.unwrap_err();
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
        .resolve_digest("127.0.0.1:1/catalog:latest")
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
        .pull_files(&format!("127.0.0.1:1/catalog@{DIGEST}"), "configs/")
        .await
        .unwrap_err();
    assert_eq!(err.reason().as_str(), "RegistryUnreachable", "{err}");
}
