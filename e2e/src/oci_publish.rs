//! Publishing test images to the loopback [`Registry`](crate::Registry): catalogs (FBC under
//! `/configs`, the index-image layout) and registry+v1 bundles (`/manifests`, `/metadata`).
//!
//! Each image is one gzip tar layer plus a minimal OCI config, pushed over plain HTTP with
//! oci-client, the same client the manager pulls with. Entries carry fixed owners, modes and
//! times, so the same files always give the same digest.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write;
use std::path::Path;

use flate2::Compression;
use flate2::write::GzEncoder;
use oci_client::client::{
    Certificate, CertificateEncoding, ClientConfig, ClientProtocol, Config, ImageLayer,
};
use oci_client::errors::OciDistributionError;
use oci_client::manifest::OciImageManifest;
use oci_client::secrets::RegistryAuth;
use oci_client::{Client, Reference};
use sha2::{Digest, Sha256};

use crate::HarnessError;

/// Pushes `files` (path in the image, content) as `host/repository:tag` and returns the
/// by-digest reference `host/repository@sha256:...` of what was pushed.
///
/// # Errors
/// When the archive cannot be built or the registry refuses the push.
pub async fn push_files(
    host: &str,
    repository: &str,
    tag: &str,
    files: &[(String, Vec<u8>)],
) -> Result<String, HarnessError> {
    push_image(host, repository, tag, files, BTreeMap::new(), None).await
}

/// Credentials and trust for pushing to a registry that wants them, over HTTPS.
pub struct PushLogin<'a> {
    pub username: &'a str,
    pub password: &'a str,
    /// The PEM CA that signed the registry's certificate.
    pub ca_pem: &'a str,
}

/// As [`push_files`], to an HTTPS registry requiring HTTP Basic credentials.
///
/// # Errors
/// As [`push_files`].
pub async fn push_files_as(
    host: &str,
    repository: &str,
    tag: &str,
    files: &[(String, Vec<u8>)],
    login: &PushLogin<'_>,
) -> Result<String, HarnessError> {
    push_image(host, repository, tag, files, BTreeMap::new(), Some(login)).await
}

/// Pushes a catalog image whose only file is `/configs/catalog.json` with `fbc` in it (JSON or
/// YAML file-based catalog content); returns the by-digest reference.
///
/// # Errors
/// As [`push_files`].
pub async fn push_catalog(
    host: &str,
    repository: &str,
    tag: &str,
    fbc: &str,
) -> Result<String, HarnessError> {
    let files = [("configs/catalog.json".to_owned(), fbc.as_bytes().to_vec())];
    push_files(host, repository, tag, &files).await
}

/// Pushes every file of a registry+v1 bundle folder (`manifests/`, `metadata/`, ...) at the
/// same paths in the image; the `metadata/annotations.yaml` annotations also become image
/// labels, as `opm`-built bundle images have them. Returns the by-digest reference.
///
/// # Errors
/// When the folder cannot be read, or as [`push_files`].
pub async fn push_bundle_dir(
    host: &str,
    repository: &str,
    tag: &str,
    dir: &Path,
) -> Result<String, HarnessError> {
    let mut files = Vec::new();
    collect_files(dir, dir, &mut files)?;
    files.sort();
    let labels = files
        .iter()
        .find(|(path, _)| path == "metadata/annotations.yaml")
        .map(|(_, data)| annotations(data))
        .transpose()?
        .unwrap_or_default();
    push_image(host, repository, tag, &files, labels, None).await
}

async fn push_image(
    host: &str,
    repository: &str,
    tag: &str,
    files: &[(String, Vec<u8>)],
    labels: BTreeMap<String, String>,
    login: Option<&PushLogin<'_>>,
) -> Result<String, HarnessError> {
    // The e2e tests are the process's only TLS users besides kube, which uses ring too.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tar = tarball(files)?;
    let diff_id = format!("sha256:{}", hex::encode(Sha256::digest(&tar)));
    let layer = ImageLayer::oci_v1_gzip(gzip(&tar)?, None);
    let config = serde_json::json!({
        "architecture": architecture(),
        "os": "linux",
        "config": {"Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    });
    let config = Config::oci_v1(
        serde_json::to_vec(&config).map_err(|e| other("encoding the image config", &e))?,
        None,
    );
    let reference = Reference::with_tag(host.to_owned(), repository.to_owned(), tag.to_owned());
    let (protocol, extra_root_certificates, auth) = match login {
        None => (
            ClientProtocol::HttpsExcept(vec![host.to_owned()]),
            Vec::new(),
            RegistryAuth::Anonymous,
        ),
        Some(login) => (
            ClientProtocol::Https,
            vec![Certificate {
                encoding: CertificateEncoding::Pem,
                data: login.ca_pem.as_bytes().to_vec(),
            }],
            RegistryAuth::Basic(login.username.to_owned(), login.password.to_owned()),
        ),
    };
    let client = Client::try_from(ClientConfig {
        protocol,
        extra_root_certificates,
        use_monolithic_push: true,
        ..ClientConfig::default()
    })
    .map_err(|e| other("building the registry client", &e))?;
    client.store_auth_if_needed(host, &auth).await;
    let manifest = OciImageManifest::build(std::slice::from_ref(&layer), &config, None);
    push_blob(
        &client,
        &reference,
        layer.data.to_vec(),
        &manifest.layers[0].digest,
    )
    .await?;
    push_blob(
        &client,
        &reference,
        config.data.to_vec(),
        &manifest.config.digest,
    )
    .await?;
    client
        .push_manifest(&reference, &manifest.into())
        .await
        .map_err(|e| other(&format!("pushing the manifest of {reference}"), &e))?;
    let digest = client
        .fetch_manifest_digest(&reference, &auth)
        .await
        .map_err(|e| other(&format!("reading back the digest of {reference}"), &e))?;
    Ok(format!("{host}/{repository}@{digest}"))
}

/// Uploads one blob. go-containerregistry's registry completes uploads without the `Location`
/// header oci-client expects, so that error is accepted when the blob is then found.
async fn push_blob(
    client: &Client,
    reference: &Reference,
    data: Vec<u8>,
    digest: &str,
) -> Result<(), HarnessError> {
    match client.push_blob(reference, data, digest).await {
        Ok(_) | Err(OciDistributionError::RegistryNoLocationError) => {}
        Err(e) => return Err(other(&format!("pushing blob {digest} of {reference}"), &e)),
    }
    let found = client
        .blob_exists(reference, digest)
        .await
        .map_err(|e| other(&format!("checking blob {digest} of {reference}"), &e))?;
    if found {
        Ok(())
    } else {
        Err(HarnessError::Other(format!(
            "blob {digest} of {reference} is missing after its upload"
        )))
    }
}

/// A tar stream of `files` with their parent folders, sorted, with fixed metadata.
fn tarball(files: &[(String, Vec<u8>)]) -> Result<Vec<u8>, HarnessError> {
    let mut folders = BTreeSet::new();
    for (path, _) in files {
        let mut parent = Path::new(path).parent();
        while let Some(dir) = parent.filter(|d| !d.as_os_str().is_empty()) {
            folders.insert(format!("{}/", dir.display()));
            parent = dir.parent();
        }
    }
    let mut sorted: Vec<&(String, Vec<u8>)> = files.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let mut builder = tar::Builder::new(Vec::new());
    let failed = |what: &str| HarnessError::io(format!("adding {what} to the layer"));
    for folder in &folders {
        let mut header = header(tar::EntryType::Directory, 0o755, 0);
        builder
            .append_data(&mut header, folder, std::io::empty())
            .map_err(failed(folder))?;
    }
    for (path, data) in sorted {
        let mut header = header(tar::EntryType::Regular, 0o644, data.len() as u64);
        builder
            .append_data(&mut header, path, data.as_slice())
            .map_err(failed(path))?;
    }
    builder
        .into_inner()
        .map_err(HarnessError::io("finishing the layer"))
}

fn header(kind: tar::EntryType, mode: u32, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_entry_type(kind);
    header.set_mode(mode);
    header.set_size(size);
    header.set_mtime(0);
    header.set_uid(0);
    header.set_gid(0);
    header
}

fn gzip(data: &[u8]) -> Result<Vec<u8>, HarnessError> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder
        .write_all(data)
        .map_err(HarnessError::io("compressing the layer"))?;
    encoder
        .finish()
        .map_err(HarnessError::io("compressing the layer"))
}

/// Every regular file under `dir`, as (path relative to `root` with `/`, content).
fn collect_files(
    root: &Path,
    dir: &Path,
    out: &mut Vec<(String, Vec<u8>)>,
) -> Result<(), HarnessError> {
    let entries =
        std::fs::read_dir(dir).map_err(HarnessError::io(format!("reading {}", dir.display())))?;
    for entry in entries {
        let path = entry
            .map_err(HarnessError::io(format!("reading {}", dir.display())))?
            .path();
        if path.is_dir() {
            collect_files(root, &path, out)?;
        } else if path.is_file() {
            let data = std::fs::read(&path)
                .map_err(HarnessError::io(format!("reading {}", path.display())))?;
            let relative = path
                .strip_prefix(root)
                .map_err(|e| other(&format!("relative path of {}", path.display()), &e))?;
            let parts: Vec<String> = relative
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push((parts.join("/"), data));
        }
    }
    Ok(())
}

/// The `annotations` map of a bundle's `metadata/annotations.yaml`.
fn annotations(data: &[u8]) -> Result<BTreeMap<String, String>, HarnessError> {
    #[derive(serde::Deserialize)]
    struct Annotations {
        #[serde(default)]
        annotations: BTreeMap<String, String>,
    }
    let text = std::str::from_utf8(data).map_err(|e| other("metadata/annotations.yaml", &e))?;
    let parsed: Annotations =
        serde_saphyr::from_str(text).map_err(|e| other("parsing metadata/annotations.yaml", &e))?;
    Ok(parsed.annotations)
}

/// The OCI architecture name of this machine (only informative: images are single-platform).
fn architecture() -> &'static str {
    match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

fn other(what: &str, err: &dyn std::fmt::Display) -> HarnessError {
    HarnessError::Other(format!("{what}: {err}"))
}
