//! Registry credentials and trust, as OpenShift has them: pull secrets in the
//! `kubernetes.io/dockerconfigjson` format (the cluster's global `openshift-config/pull-secret`
//! and a Catalog's own), and a PEM CA bundle for registries signed by a private CA.
//!
//! Everything here is pure: the manager reads the Secret and ConfigMap, these types parse and
//! match them. Credentials never leave this module in a printable form: [`Credential`]'s
//! `Debug` is redacted, parse errors name the entry and never echo its content, and
//! [`Credential::redact`] scrubs registry answers before they reach a condition message.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use oci_client::secrets::RegistryAuth;
use sha2::{Digest, Sha256};

/// Largest pull secret POM parses (1 MiB, the API server's own limit on a Secret): the data is
/// decoded into memory before it is read.
pub const MAX_PULL_SECRET_BYTES: usize = 1024 * 1024;
/// Largest CA bundle POM parses (1 MiB, the API server's own limit on a ConfigMap); a bundle
/// of every public root CA is about 220 KiB.
pub const MAX_CA_BUNDLE_BYTES: usize = 1024 * 1024;
/// Most registry entries read from one pull secret (OpenShift's global one has a handful).
pub const MAX_PULL_SECRET_ENTRIES: usize = 1000;

/// A Secret by namespace and name, for messages ("check Secret openshift-config/pull-secret").
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SecretName {
    pub namespace: String,
    pub name: String,
}

impl fmt::Display for SecretName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A ConfigMap key holding a CA bundle, for messages.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ConfigMapKey {
    pub namespace: String,
    pub name: String,
    pub key: String,
}

impl fmt::Display for ConfigMapKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "ConfigMap {}/{} key {:?}",
            self.namespace, self.name, self.key
        )
    }
}

/// A user name and password (or token) for one registry. `Debug` shows the user name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credential {
    username: String,
    password: String,
}

impl fmt::Debug for Credential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credential")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

impl Credential {
    /// The credential as the registry client takes it.
    pub(crate) fn registry_auth(&self) -> RegistryAuth {
        RegistryAuth::Basic(self.username.clone(), self.password.clone())
    }

    /// A digest identifying the credential (clients are cached per credential, since the
    /// registry client remembers the first credential it was given for a registry).
    pub(crate) fn fingerprint(&self) -> [u8; 32] {
        let mut hasher = Sha256::new();
        hasher.update(self.username.as_bytes());
        hasher.update([0]);
        hasher.update(self.password.as_bytes());
        hasher.finalize().into()
    }

    /// `text` with the password, and the base64 `user:password` it travels as, replaced by
    /// `<redacted>`: registry answers and client errors go into status messages.
    #[must_use]
    pub fn redact(&self, text: &str) -> String {
        if self.password.is_empty() {
            return text.to_owned();
        }
        let basic = STANDARD.encode(format!("{}:{}", self.username, self.password));
        text.replace(&basic, "<redacted>")
            .replace(&self.password, "<redacted>")
    }
}

/// Why a pull secret could not be read. No variant carries any of the secret's content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PullSecretError {
    /// The data is larger than POM reads.
    #[error("it is {size} bytes, above the {limit}-byte limit (MAX_PULL_SECRET_BYTES)")]
    TooLarge { size: usize, limit: usize },
    /// Not JSON, or not the dockerconfigjson shape (position only: the content is secret).
    #[error(
        "it is not a dockerconfigjson document (error at line {line}, column {column}); it must \
         be {{\"auths\": {{\"<registry host>\": {{\"auth\": \"<base64 user:password>\"}}}}}}"
    )]
    Malformed { line: usize, column: usize },
    /// More registry entries than POM reads.
    #[error("it has more than {limit} registry entries (MAX_PULL_SECRET_ENTRIES)")]
    TooManyEntries { limit: usize },
    /// One entry is unusable (named by its registry key, which is not secret).
    #[error("its entry for {registry:?} {problem}")]
    InvalidEntry {
        registry: String,
        problem: &'static str,
    },
}

/// One registry entry of a dockerconfigjson `auths` map.
#[derive(serde::Deserialize)]
struct AuthEntry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

#[derive(serde::Deserialize)]
struct DockerConfig {
    auths: BTreeMap<String, AuthEntry>,
}

/// Where a credential applies: a registry host (with port, as written in image references)
/// and optionally a repository path prefix (`quay.io/myorg`), as the kubelet reads keys.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Scope {
    host: String,
    path: String,
}

impl Scope {
    /// Reads a dockerconfigjson key: `quay.io`, `https://quay.io/v2/`, `quay.io/org/repo`,
    /// `https://index.docker.io/v1/` (Docker Hub's historical key).
    fn from_key(key: &str) -> Option<Self> {
        let bare = key
            .trim()
            .trim_start_matches("https://")
            .trim_start_matches("http://")
            .trim_end_matches('/');
        let (host, path) = bare.split_once('/').unwrap_or((bare, ""));
        if host.is_empty() {
            return None;
        }
        // `/v1`, `/v2` name the API, not a repository.
        let path = match path {
            "v1" | "v2" => "",
            other => other,
        };
        Some(Self {
            host: canonical_host(host),
            path: path.to_owned(),
        })
    }

    /// How specific a match of `repository` on `host` is (longer path wins), or `None`.
    fn matches(&self, host: &str, repository: &str) -> Option<usize> {
        if self.host != canonical_host(host) {
            return None;
        }
        if self.path.is_empty() {
            return Some(0);
        }
        let under = repository == self.path
            || repository
                .strip_prefix(self.path.as_str())
                .is_some_and(|rest| rest.starts_with('/'));
        under.then_some(self.path.len())
    }
}

/// Docker Hub answers to several names; its pull secrets use any of them.
fn canonical_host(host: &str) -> String {
    let host = host.to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            "docker.io".to_owned()
        }
        _ => host,
    }
}

/// A parsed pull secret: credentials per registry, and the Secret they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSecret {
    origin: SecretName,
    entries: Vec<(Scope, Credential)>,
}

impl PullSecret {
    /// Parses the `.dockerconfigjson` data of `origin`.
    ///
    /// # Errors
    /// Data above [`MAX_PULL_SECRET_BYTES`], not in the dockerconfigjson shape, or an entry
    /// without a usable user name and password. The error never contains the data.
    pub fn parse(origin: SecretName, data: &[u8]) -> Result<Self, PullSecretError> {
        if data.len() > MAX_PULL_SECRET_BYTES {
            return Err(PullSecretError::TooLarge {
                size: data.len(),
                limit: MAX_PULL_SECRET_BYTES,
            });
        }
        let config: DockerConfig =
            serde_json::from_slice(data).map_err(|err| PullSecretError::Malformed {
                line: err.line(),
                column: err.column(),
            })?;
        if config.auths.len() > MAX_PULL_SECRET_ENTRIES {
            return Err(PullSecretError::TooManyEntries {
                limit: MAX_PULL_SECRET_ENTRIES,
            });
        }
        let mut entries = Vec::with_capacity(config.auths.len());
        for (key, entry) in config.auths {
            let invalid = |problem| PullSecretError::InvalidEntry {
                registry: key.clone(),
                problem,
            };
            let scope = Scope::from_key(&key).ok_or_else(|| invalid("names no registry host"))?;
            let credential = match (entry.auth.filter(|a| !a.is_empty()), entry.username) {
                (Some(auth), _) => {
                    let decoded = STANDARD
                        .decode(auth.trim())
                        .map_err(|_| invalid("has an `auth` value that is not base64"))?;
                    let text = String::from_utf8(decoded)
                        .map_err(|_| invalid("has an `auth` value that is not UTF-8 text"))?;
                    let (username, password) = text.split_once(':').ok_or_else(|| {
                        invalid("has an `auth` value that is not base64 of user:password")
                    })?;
                    Credential {
                        username: username.to_owned(),
                        password: password.to_owned(),
                    }
                }
                (None, Some(username)) => Credential {
                    username,
                    password: entry.password.unwrap_or_default(),
                },
                (None, None) => {
                    return Err(invalid("has neither `auth` nor `username`/`password`"));
                }
            };
            entries.push((scope, credential));
        }
        Ok(Self { origin, entries })
    }

    /// The Secret this came from.
    #[must_use]
    pub fn origin(&self) -> &SecretName {
        &self.origin
    }

    /// The most specific credential for `repository` on `host` (host as written in the image
    /// reference, with its port), with how specific the match is.
    fn lookup(&self, host: &str, repository: &str) -> Option<(usize, &Credential)> {
        self.entries
            .iter()
            .filter_map(|(scope, credential)| {
                scope
                    .matches(host, repository)
                    .map(|rank| (rank, credential))
            })
            .max_by_key(|(rank, _)| *rank)
    }
}

/// Why a CA bundle could not be used. Certificates are public; the errors still only name
/// positions.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CaBundleError {
    /// The data is larger than POM reads.
    #[error("it is {size} bytes, above the {limit}-byte limit (MAX_CA_BUNDLE_BYTES)")]
    TooLarge { size: usize, limit: usize },
    /// No `-----BEGIN CERTIFICATE-----` block.
    #[error(
        "it holds no PEM certificate; it must hold one or more -----BEGIN CERTIFICATE----- blocks"
    )]
    NoCertificate,
    /// A certificate block is not closed or not base64.
    #[error("PEM certificate number {index} is malformed ({problem})")]
    Malformed { index: usize, problem: &'static str },
}

/// Extra root certificates for registries signed by a private CA, and where they came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaBundle {
    origin: ConfigMapKey,
    /// DER certificates.
    certificates: Vec<Vec<u8>>,
    /// Digest of the certificates: clients are cached per bundle content.
    digest: [u8; 32],
}

impl CaBundle {
    const BEGIN: &'static str = "-----BEGIN CERTIFICATE-----";
    const END: &'static str = "-----END CERTIFICATE-----";

    /// Parses the PEM certificates of `origin` (text outside the blocks, as in the system
    /// bundles, is ignored).
    ///
    /// # Errors
    /// Data above [`MAX_CA_BUNDLE_BYTES`], no certificate, or a malformed block.
    pub fn parse(origin: ConfigMapKey, pem: &[u8]) -> Result<Self, CaBundleError> {
        if pem.len() > MAX_CA_BUNDLE_BYTES {
            return Err(CaBundleError::TooLarge {
                size: pem.len(),
                limit: MAX_CA_BUNDLE_BYTES,
            });
        }
        let text = String::from_utf8_lossy(pem);
        let mut rest = text.as_ref();
        let mut certificates = Vec::new();
        while let Some(start) = rest.find(Self::BEGIN) {
            let index = certificates.len() + 1;
            let body = &rest[start + Self::BEGIN.len()..];
            let end = body.find(Self::END).ok_or(CaBundleError::Malformed {
                index,
                problem: "no -----END CERTIFICATE----- line",
            })?;
            let base64: String = body[..end]
                .chars()
                .filter(|c| !c.is_ascii_whitespace())
                .collect();
            let der = STANDARD
                .decode(base64)
                .map_err(|_| CaBundleError::Malformed {
                    index,
                    problem: "the body is not base64",
                })?;
            if der.is_empty() {
                return Err(CaBundleError::Malformed {
                    index,
                    problem: "the body is empty",
                });
            }
            certificates.push(der);
            rest = &body[end + Self::END.len()..];
        }
        if certificates.is_empty() {
            return Err(CaBundleError::NoCertificate);
        }
        let mut hasher = Sha256::new();
        for der in &certificates {
            hasher.update(der);
        }
        Ok(Self {
            origin,
            certificates,
            digest: hasher.finalize().into(),
        })
    }

    /// The ConfigMap key this came from.
    #[must_use]
    pub fn origin(&self) -> &ConfigMapKey {
        &self.origin
    }

    pub(crate) fn certificates(&self) -> &[Vec<u8>] {
        &self.certificates
    }

    pub(crate) fn digest(&self) -> [u8; 32] {
        self.digest
    }
}

/// How to reach the registries of one pull: pull secrets in order of precedence (a Catalog's
/// own before the cluster's global one) and extra trusted roots. The default is anonymous
/// with the system roots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RegistryAccess {
    pull_secrets: Vec<Arc<PullSecret>>,
    ca_bundle: Option<Arc<CaBundle>>,
}

/// The credential chosen for one registry, and the Secret it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChosenCredential<'a> {
    pub credential: &'a Credential,
    pub origin: &'a SecretName,
}

impl RegistryAccess {
    /// Anonymous, system roots.
    #[must_use]
    pub fn anonymous() -> Self {
        Self::default()
    }

    /// Adds a pull secret after those already given (it is used for the registries they
    /// have no entry for).
    #[must_use]
    pub fn with_pull_secret(mut self, secret: Arc<PullSecret>) -> Self {
        self.pull_secrets.push(secret);
        self
    }

    /// Trusts `bundle`'s certificates besides the system roots.
    #[must_use]
    pub fn with_ca_bundle(mut self, bundle: Arc<CaBundle>) -> Self {
        self.ca_bundle = Some(bundle);
        self
    }

    /// The CA bundle in use, if any.
    #[must_use]
    pub fn ca_bundle(&self) -> Option<&CaBundle> {
        self.ca_bundle.as_deref()
    }

    /// The Secrets consulted, in order (for messages when none had an entry).
    #[must_use]
    pub fn pull_secret_names(&self) -> Vec<&SecretName> {
        self.pull_secrets.iter().map(|s| s.origin()).collect()
    }

    /// The credential for `repository` on `host`: the first pull secret with an entry for the
    /// host wins (within it, the most specific path).
    #[must_use]
    pub fn credential_for(&self, host: &str, repository: &str) -> Option<ChosenCredential<'_>> {
        self.pull_secrets.iter().find_map(|secret| {
            secret
                .lookup(host, repository)
                .map(|(_, credential)| ChosenCredential {
                    credential,
                    origin: secret.origin(),
                })
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;

    fn secret(name: &str, json: &str) -> Arc<PullSecret> {
        Arc::new(
            PullSecret::parse(
                SecretName {
                    namespace: "ns".into(),
                    name: name.into(),
                },
                json.as_bytes(),
            )
            .unwrap(),
        )
    }

    fn auth(user: &str, pass: &str) -> String {
        STANDARD.encode(format!("{user}:{pass}"))
    }

    #[test]
    fn entries_are_read_from_auth_or_username_and_password() {
        let json = format!(
            r#"{{"auths": {{
                "quay.io": {{"auth": "{}", "email": "x@example.com"}},
                "registry.example.com:5000": {{"username": "bob", "password": "pw2"}},
                "pass.example.com": {{"auth": "{}"}}
            }}}}"#,
            auth("alice", "pw1"),
            auth("carol", "a:b:c"),
        );
        let s = secret("s", &json);
        let cases = [
            ("quay.io", "org/repo", Some(("alice", "pw1"))),
            ("registry.example.com:5000", "repo", Some(("bob", "pw2"))),
            // Only the first colon separates user and password.
            ("pass.example.com", "repo", Some(("carol", "a:b:c"))),
            // The port is part of the host.
            ("registry.example.com", "repo", None),
            ("other.io", "repo", None),
        ];
        let access = RegistryAccess::anonymous().with_pull_secret(s);
        for (host, repo, want) in cases {
            let got = access.credential_for(host, repo).map(|c| {
                (
                    c.credential.username.as_str(),
                    c.credential.password.as_str(),
                )
            });
            assert_eq!(got, want, "{host}/{repo}");
        }
    }

    #[test]
    fn keys_match_by_host_scheme_docker_hub_alias_and_path_prefix() {
        let json = format!(
            r#"{{"auths": {{
                "https://index.docker.io/v1/": {{"auth": "{}"}},
                "https://Quay.io/v2/": {{"auth": "{}"}},
                "quay.io/team": {{"auth": "{}"}},
                "quay.io/team/special": {{"auth": "{}"}}
            }}}}"#,
            auth("hub", "1"),
            auth("quay", "2"),
            auth("team", "3"),
            auth("special", "4"),
        );
        let access = RegistryAccess::anonymous().with_pull_secret(secret("s", &json));
        let cases = [
            ("docker.io", "library/busybox", Some("hub")),
            ("index.docker.io", "library/busybox", Some("hub")),
            ("quay.io", "other/repo", Some("quay")),
            ("QUAY.IO", "other/repo", Some("quay")),
            ("quay.io", "team/repo", Some("team")),
            ("quay.io", "team", Some("team")),
            // A path prefix is a whole path segment.
            ("quay.io", "teamster/repo", Some("quay")),
            ("quay.io", "team/special/x", Some("special")),
            ("quay.io", "team/special", Some("special")),
        ];
        for (host, repo, want) in cases {
            let got = access
                .credential_for(host, repo)
                .map(|c| c.credential.username.as_str());
            assert_eq!(got, want, "{host}/{repo}");
        }
    }

    #[test]
    fn the_first_secret_with_an_entry_for_the_host_wins() {
        let catalog = secret(
            "catalog",
            &format!(
                r#"{{"auths": {{"quay.io": {{"auth": "{}"}}}}}}"#,
                auth("mine", "1")
            ),
        );
        let global = secret(
            "global",
            &format!(
                r#"{{"auths": {{"quay.io": {{"auth": "{}"}}, "registry.redhat.io": {{"auth": "{}"}}}}}}"#,
                auth("global", "2"),
                auth("rh", "3")
            ),
        );
        let access = RegistryAccess::anonymous()
            .with_pull_secret(catalog)
            .with_pull_secret(global);
        let quay = access.credential_for("quay.io", "a/b").unwrap();
        assert_eq!(
            (quay.credential.username.as_str(), quay.origin.name.as_str()),
            ("mine", "catalog")
        );
        let rh = access.credential_for("registry.redhat.io", "a/b").unwrap();
        assert_eq!(
            (rh.credential.username.as_str(), rh.origin.name.as_str()),
            ("rh", "global")
        );
        assert!(access.credential_for("example.com", "a").is_none());
    }

    #[test]
    fn malformed_secrets_are_refused_without_echoing_their_content() {
        let origin = || SecretName {
            namespace: "ns".into(),
            name: "s".into(),
        };
        let big = vec![b' '; MAX_PULL_SECRET_BYTES + 1];
        let cases: Vec<(Vec<u8>, PullSecretError)> = vec![
            (
                big,
                PullSecretError::TooLarge {
                    size: MAX_PULL_SECRET_BYTES + 1,
                    limit: MAX_PULL_SECRET_BYTES,
                },
            ),
            (
                br#"{"auths": "hunter2-topsecret"}"#.to_vec(),
                PullSecretError::Malformed {
                    line: 1,
                    column: 29,
                },
            ),
            (
                br#"{"auths": {"quay.io": {"auth": "hunter2-topsecret!"}}}"#.to_vec(),
                PullSecretError::InvalidEntry {
                    registry: "quay.io".into(),
                    problem: "has an `auth` value that is not base64",
                },
            ),
            (
                format!(
                    r#"{{"auths": {{"quay.io": {{"auth": "{}"}}}}}}"#,
                    STANDARD.encode("hunter2-topsecret")
                )
                .into_bytes(),
                PullSecretError::InvalidEntry {
                    registry: "quay.io".into(),
                    problem: "has an `auth` value that is not base64 of user:password",
                },
            ),
            (
                br#"{"auths": {"quay.io": {"email": "a@b"}}}"#.to_vec(),
                PullSecretError::InvalidEntry {
                    registry: "quay.io".into(),
                    problem: "has neither `auth` nor `username`/`password`",
                },
            ),
            (
                br#"{"auths": {"": {"username": "u"}}}"#.to_vec(),
                PullSecretError::InvalidEntry {
                    registry: String::new(),
                    problem: "names no registry host",
                },
            ),
        ];
        for (data, want) in cases {
            let err = PullSecret::parse(origin(), &data).unwrap_err();
            assert_eq!(err, want);
            assert!(!err.to_string().contains("hunter2"), "{err}");
        }
    }

    #[test]
    fn credentials_are_redacted_in_debug_and_in_text() {
        let s = secret(
            "s",
            &format!(
                r#"{{"auths": {{"quay.io": {{"auth": "{}"}}}}}}"#,
                auth("alice", "hunter2")
            ),
        );
        assert!(!format!("{s:?}").contains("hunter2"), "{s:?}");
        let access = RegistryAccess::anonymous().with_pull_secret(s);
        assert!(!format!("{access:?}").contains("hunter2"));
        let chosen = access.credential_for("quay.io", "r").unwrap();
        let text = format!(
            "denied: password hunter2 in header Basic {}",
            auth("alice", "hunter2")
        );
        let redacted = chosen.credential.redact(&text);
        assert!(!redacted.contains("hunter2"), "{redacted}");
        assert!(!redacted.contains(&auth("alice", "hunter2")), "{redacted}");
        assert_eq!(
            redacted,
            "denied: password <redacted> in header Basic <redacted>"
        );
    }

    #[test]
    fn ca_bundles_are_parsed_and_refused_with_the_certificate_number() {
        let origin = || ConfigMapKey {
            namespace: "ns".into(),
            name: "ca".into(),
            key: "ca-bundle.crt".into(),
        };
        let block = |body: &str| format!("{}\n{body}\n{}\n", CaBundle::BEGIN, CaBundle::END);
        let two = format!("# comment\n{}{}", block("AAEC"), block("AwQF"));
        let bundle = CaBundle::parse(origin(), two.as_bytes()).unwrap();
        assert_eq!(bundle.certificates(), &[vec![0, 1, 2], vec![3, 4, 5]]);
        let same = CaBundle::parse(
            origin(),
            format!("{}{}", block("AAEC"), block("AwQF")).as_bytes(),
        )
        .unwrap();
        assert_eq!(
            bundle.digest(),
            same.digest(),
            "comments do not change the key"
        );
        let cases = [
            ("no pem here".to_owned(), CaBundleError::NoCertificate),
            (
                format!("{}{}\nAAEC", block("AAEC"), CaBundle::BEGIN),
                CaBundleError::Malformed {
                    index: 2,
                    problem: "no -----END CERTIFICATE----- line",
                },
            ),
            (
                block("not*base64"),
                CaBundleError::Malformed {
                    index: 1,
                    problem: "the body is not base64",
                },
            ),
            (
                block(""),
                CaBundleError::Malformed {
                    index: 1,
                    problem: "the body is empty",
                },
            ),
        ];
        for (pem, want) in cases {
            assert_eq!(CaBundle::parse(origin(), pem.as_bytes()).unwrap_err(), want);
        }
        assert!(matches!(
            CaBundle::parse(origin(), &vec![b'a'; MAX_CA_BUNDLE_BYTES + 1]),
            Err(CaBundleError::TooLarge { .. })
        ));
    }
}
