//! Certificates for one control plane, generated in memory and written to its directory:
//! a serving CA + certificate for 127.0.0.1, a client CA + an admin certificate in
//! `system:masters`, and a service-account signing key.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose,
};

use crate::HarnessError;

/// Paths of the PEM files a control plane is started with.
pub struct CertFiles {
    pub serving_ca: PathBuf,
    pub serving_cert: PathBuf,
    pub serving_key: PathBuf,
    pub client_ca: PathBuf,
    pub sa_key: PathBuf,
    pub sa_public_key: PathBuf,
    /// PEM contents, for the in-memory kubeconfig.
    pub serving_ca_pem: String,
    pub admin_cert_pem: String,
    pub admin_key_pem: String,
}

fn ca(common_name: &str) -> Result<CertifiedIssuer<'static, KeyPair>, HarnessError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params
        .distinguished_name
        .push(DnType::CommonName, common_name);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    Ok(CertifiedIssuer::self_signed(params, KeyPair::generate()?)?)
}

/// Generates every certificate and writes them under `dir`.
pub fn generate(dir: &Path) -> Result<CertFiles, HarnessError> {
    let serving_ca = ca("pom-e2e-serving-ca")?;
    let client_ca = ca("pom-e2e-client-ca")?;

    let serving_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(vec![
        "localhost".to_owned(),
        "127.0.0.1".to_owned(),
        "kubernetes.default.svc".to_owned(),
        "10.0.0.1".to_owned(),
    ])?;
    params
        .distinguished_name
        .push(DnType::CommonName, "kube-apiserver");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = params.signed_by(&serving_key, &serving_ca)?;

    let admin_key = KeyPair::generate()?;
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params
        .distinguished_name
        .push(DnType::CommonName, "pom-e2e-admin");
    params
        .distinguished_name
        .push(DnType::OrganizationName, "system:masters");
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let admin_cert = params.signed_by(&admin_key, &client_ca)?;

    let sa_key = KeyPair::generate()?;

    let write = |name: &str, pem: &str| -> Result<PathBuf, HarnessError> {
        let path = dir.join(name);
        std::fs::write(&path, pem)
            .map_err(HarnessError::io(format!("writing {}", path.display())))?;
        Ok(path)
    };
    Ok(CertFiles {
        serving_ca: write("serving-ca.crt", &serving_ca.pem())?,
        serving_cert: write("apiserver.crt", &serving_cert.pem())?,
        serving_key: write("apiserver.key", &serving_key.serialize_pem())?,
        client_ca: write("client-ca.crt", &client_ca.pem())?,
        sa_key: write("sa-signer.key", &sa_key.serialize_pem())?,
        sa_public_key: write("sa-signer.pub", &sa_key.public_key_pem())?,
        serving_ca_pem: serving_ca.pem(),
        admin_cert_pem: admin_cert.pem(),
        admin_key_pem: admin_key.serialize_pem(),
    })
}
