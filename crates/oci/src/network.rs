//! The cluster's network settings for POM's own pulls (PRODUCT §10, issue 23 item 2): the
//! cluster-wide proxy and the trusted CA bundle, which every pull of an
//! [`ImagePuller`](crate::ImagePuller) goes through besides its own
//! [`RegistryAccess`](crate::RegistryAccess).
//!
//! - [`ProxySettings`]: `Proxy.status` (`httpProxy`, `httpsProxy`, `noProxy`) as OpenShift's
//!   components apply it. They are Go programs whose transports use
//!   `golang.org/x/net/http/httpproxy`, so its rules are the contract: `http://` requests use
//!   `httpProxy`, `https://` requests `httpsProxy` (no fallback between them); `noProxy`
//!   entries are hosts (with their subdomains), `.domains` and `*.domains` (subdomains only),
//!   IPs, CIDRs, any of the first three or an IP with a `:port`, or `*` for everything; and
//!   `localhost` and loopback IPs are never proxied (a proxy would connect to its own
//!   loopback, never the manager's).
//! - The registry client (reqwest, through oci-client) matches `noProxy` itself on every
//!   request, redirects to a blob store included, but with curl's rules: no `:port` entries,
//!   `.domain` also matches `domain`, no loopback exception. POM does not re-implement that
//!   matching; [`ProxySettings::uses_proxy`] decides the registry itself exactly as Go does,
//!   and [`ProxySettings::client_settings`] hands reqwest the list rewritten so that it agrees
//!   for that registry (clients are built per registry): entries with a port become the bare
//!   host when they match it and are left out otherwise, a `.domain` that Go would not apply
//!   to the registry is left out, and the loopback exceptions are added.
//! - [`TrustedCa`]: the cluster's trusted CA bundle (on OpenShift the system roots merged with
//!   `Proxy.spec.trustedCA`), PEM parsed by [`CaBundle`] with its limits. Certificates rustls
//!   cannot use as trust anchors are skipped and counted, as rustls-platform-verifier does with
//!   the system's own roots: one odd certificate among the hundred-odd system ones must not
//!   stop every pull. Its roots are trusted for every pull, besides a Catalog's own caBundle.
//!
//! Proxy URLs may carry credentials (`http://user:password@proxy:3128`): `Debug` and
//! `Display` show them as `<redacted>`, and errors name the field, never the value.

use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::auth::{CaBundle, CaBundleError, ConfigMapKey};

/// Longest proxy URL read (a URL is a few dozen bytes; this bounds what cluster input costs).
pub const MAX_PROXY_URL_BYTES: usize = 4096;

/// Longest `noProxy` read. On OpenShift it lists the cluster's networks and domains besides
/// the admin's entries, typically well under 1 KiB; a list past this is refused.
pub const MAX_NO_PROXY_BYTES: usize = 64 * 1024;

/// What every pull goes through besides its own access: the cluster-wide proxy and trusted CA
/// bundle. The default (none of either) is how POM pulls on plain Kubernetes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PullNetwork {
    /// The proxy, when the cluster has one.
    pub proxy: Option<ProxySettings>,
    /// Roots trusted for every pull.
    pub trusted_ca: Option<Arc<TrustedCa>>,
}

/// Why proxy settings cannot be used. Values are never quoted: a proxy URL may hold a password.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProxyError {
    /// Not an `http://` or `https://` URL with a host (as the cluster network operator and
    /// Go's `httpproxy` require).
    #[error("{field} is not an http:// or https:// URL with a host")]
    InvalidUrl { field: &'static str },
    /// Longer than POM reads.
    #[error("{field} is {size} bytes, above the {limit}-byte limit")]
    TooLong {
        field: &'static str,
        size: usize,
        limit: usize,
    },
}

/// The cluster's proxy for POM's pulls, from `Proxy.status`.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxySettings {
    http_proxy: Option<String>,
    https_proxy: Option<String>,
    no_proxy: NoProxy,
    /// Of the three values: registry clients are cached per settings.
    digest: [u8; 32],
}

impl fmt::Debug for ProxySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxySettings")
            .field("http_proxy", &self.http_proxy.as_deref().map(redact_url))
            .field("https_proxy", &self.https_proxy.as_deref().map(redact_url))
            .field("no_proxy", &self.no_proxy.raw)
            .finish()
    }
}

impl fmt::Display for ProxySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown =
            |url: &Option<String>| url.as_deref().map_or_else(|| "none".to_owned(), redact_url);
        write!(
            f,
            "httpProxy {}, httpsProxy {}, noProxy {:?}",
            shown(&self.http_proxy),
            shown(&self.https_proxy),
            self.no_proxy.raw
        )
    }
}

/// How one registry client is built: reqwest's proxy settings, rewritten for its registry
/// ([`ProxySettings::client_settings`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct ClientProxy {
    pub(crate) http_proxy: Option<String>,
    pub(crate) https_proxy: Option<String>,
    pub(crate) no_proxy: Option<String>,
}

impl ProxySettings {
    /// The settings `Proxy.status` gives (each value empty when unset); `Ok(None)` when
    /// neither proxy is set (a `noProxy` alone changes nothing).
    ///
    /// # Errors
    /// A proxy that is not an `http://` or `https://` URL with a host, or a value above
    /// [`MAX_PROXY_URL_BYTES`] / [`MAX_NO_PROXY_BYTES`].
    pub fn from_status(
        http_proxy: &str,
        https_proxy: &str,
        no_proxy: &str,
    ) -> Result<Option<Self>, ProxyError> {
        let http = proxy_url("httpProxy", http_proxy)?;
        let https = proxy_url("httpsProxy", https_proxy)?;
        if no_proxy.len() > MAX_NO_PROXY_BYTES {
            return Err(ProxyError::TooLong {
                field: "noProxy",
                size: no_proxy.len(),
                limit: MAX_NO_PROXY_BYTES,
            });
        }
        if http.is_none() && https.is_none() {
            return Ok(None);
        }
        let mut hasher = Sha256::new();
        for part in [
            http.as_deref().unwrap_or_default(),
            https.as_deref().unwrap_or_default(),
            no_proxy,
        ] {
            hasher.update(part.len().to_le_bytes());
            hasher.update(part.as_bytes());
        }
        Ok(Some(Self {
            http_proxy: http,
            https_proxy: https,
            no_proxy: NoProxy::parse(no_proxy),
            digest: hasher.finalize().into(),
        }))
    }

    /// The proxy for `http://` requests, with any credentials in it redacted.
    #[must_use]
    pub fn http_proxy_redacted(&self) -> Option<String> {
        self.http_proxy.as_deref().map(redact_url)
    }

    /// The proxy for `https://` requests, with any credentials in it redacted.
    #[must_use]
    pub fn https_proxy_redacted(&self) -> Option<String> {
        self.https_proxy.as_deref().map(redact_url)
    }

    /// Whether a request to `registry` (`host[:port]` as image references write it, over HTTPS
    /// when `secure`, else plain HTTP) goes through the proxy, as Go's `httpproxy` decides.
    #[must_use]
    pub fn uses_proxy(&self, registry: &str, secure: bool) -> bool {
        let proxy = if secure {
            &self.https_proxy
        } else {
            &self.http_proxy
        };
        if proxy.is_none() {
            return false;
        }
        let (host, port) = split_host_port(registry, secure);
        !self.no_proxy.bypasses(&host, port)
    }

    /// reqwest's settings for a client of `registry` (over HTTPS when `secure`): both proxies,
    /// and `noProxy` rewritten so that reqwest's matching agrees with
    /// [`Self::uses_proxy`] for the registry (see the module documentation).
    #[must_use]
    pub(crate) fn client_settings(&self, registry: &str, secure: bool) -> ClientProxy {
        let (host, port) = split_host_port(registry, secure);
        let mut entries: Vec<String> = Vec::new();
        if self.no_proxy.all {
            entries.push("*".to_owned());
        }
        for entry in &self.no_proxy.entries {
            let written = match entry {
                Entry::Cidr { network, prefix } => Some(format!("{network}/{prefix}")),
                Entry::Ip { ip, port: None } => Some(ip.to_string()),
                Entry::Domain {
                    suffix,
                    apex,
                    port: None,
                } => {
                    let bare = suffix.trim_start_matches('.');
                    if *apex {
                        Some(bare.to_owned())
                    } else if bare == host {
                        // reqwest would apply `.domain` to `domain` itself; Go does not.
                        None
                    } else {
                        Some(suffix.clone())
                    }
                }
                // reqwest has no `:port` entries: the one for this registry's port becomes its
                // bare host (the client serves this registry only).
                Entry::Ip { port: Some(_), .. } | Entry::Domain { port: Some(_), .. } => {
                    entry.matches(&host, port).then(|| host.clone())
                }
            };
            if let Some(written) = written
                && !entries.contains(&written)
            {
                entries.push(written);
            }
        }
        // Go never proxies loopback; reqwest would.
        entries.extend(["127.0.0.0/8".to_owned(), "::1".to_owned()]);
        if host == "localhost" {
            entries.push(host);
        }
        ClientProxy {
            http_proxy: self.http_proxy.clone(),
            https_proxy: self.https_proxy.clone(),
            no_proxy: Some(entries.join(",")),
        }
    }

    pub(crate) fn digest(&self) -> [u8; 32] {
        self.digest
    }
}

/// `value` as a proxy URL (`None` when empty).
fn proxy_url(field: &'static str, value: &str) -> Result<Option<String>, ProxyError> {
    let value = value.trim();
    if value.is_empty() {
        return Ok(None);
    }
    if value.len() > MAX_PROXY_URL_BYTES {
        return Err(ProxyError::TooLong {
            field,
            size: value.len(),
            limit: MAX_PROXY_URL_BYTES,
        });
    }
    let invalid = ProxyError::InvalidUrl { field };
    if value.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(invalid);
    }
    let lower = value.to_ascii_lowercase();
    let rest = lower
        .strip_prefix("http://")
        .or_else(|| lower.strip_prefix("https://"))
        .ok_or(invalid.clone())?;
    let authority = rest.split(['/', '?', '#']).next().unwrap_or_default();
    let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if host_port.starts_with('[') {
        host_port.split(']').next().unwrap_or_default()
    } else {
        host_port.split(':').next().unwrap_or_default()
    };
    if host.trim_start_matches('[').is_empty() {
        return Err(invalid);
    }
    Ok(Some(value.to_owned()))
}

/// `url` with any `user:password@` replaced by `<redacted>@`.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return "<redacted>".to_owned();
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, path) = rest.split_at(end);
    match authority.rsplit_once('@') {
        Some((_, host)) => format!("{scheme}://<redacted>@{host}{path}"),
        None => url.to_owned(),
    }
}

/// `registry` (`host`, `host:port` or `[v6]:port`) as its lowercase host and port, the port
/// defaulting to the scheme's.
fn split_host_port(registry: &str, secure: bool) -> (String, u16) {
    let default = if secure { 443 } else { 80 };
    let registry = registry.trim().to_ascii_lowercase();
    if let Some(rest) = registry.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        let port = after
            .strip_prefix(':')
            .and_then(|p| p.parse().ok())
            .unwrap_or(default);
        return (host.to_owned(), port);
    }
    match registry.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => {
            (host.to_owned(), port.parse().unwrap_or(default))
        }
        _ => (registry, default),
    }
}

/// `noProxy`, parsed as Go's `httpproxy` parses it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct NoProxy {
    raw: String,
    /// `*`: nothing is proxied.
    all: bool,
    entries: Vec<Entry>,
}

/// One `noProxy` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// `10.0.0.0/16`: the network's address (host bits cleared) and prefix length.
    Cidr { network: IpAddr, prefix: u8 },
    /// `10.0.0.1`, `10.0.0.1:5000`, `[fd00::1]:5000`.
    Ip { ip: IpAddr, port: Option<u16> },
    /// `example.com` (`apex`: itself and its subdomains) or `.example.com` / `*.example.com`
    /// (subdomains only), optionally with a port; `suffix` starts with a dot.
    Domain {
        suffix: String,
        apex: bool,
        port: Option<u16>,
    },
}

impl NoProxy {
    fn parse(raw: &str) -> Self {
        let mut entries = Vec::new();
        for part in raw.split(',') {
            let part = part.trim().to_ascii_lowercase();
            if part.is_empty() {
                continue;
            }
            if part == "*" {
                return Self {
                    raw: raw.to_owned(),
                    all: true,
                    entries: Vec::new(),
                };
            }
            if let Some(entry) = Entry::parse(&part) {
                entries.push(entry);
            }
        }
        Self {
            raw: raw.to_owned(),
            all: false,
            entries,
        }
    }

    /// Whether a request to `host` on `port` goes without the proxy (Go's `useProxy`,
    /// negated).
    fn bypasses(&self, host: &str, port: u16) -> bool {
        let host = host.to_ascii_lowercase();
        if self.all || host == "localhost" {
            return true;
        }
        if host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
        {
            return true;
        }
        self.entries.iter().any(|entry| entry.matches(&host, port))
    }
}

impl Entry {
    /// One entry, lowercased and trimmed; `None` for what Go ignores (no host).
    fn parse(part: &str) -> Option<Self> {
        if let Some((address, prefix)) = part.split_once('/') {
            // Go takes only a well-formed CIDR; anything else with a slash is a domain that
            // never matches a host.
            let ip = address.parse::<IpAddr>().ok()?;
            let prefix: u8 = prefix.parse().ok()?;
            let bits = if ip.is_ipv4() { 32 } else { 128 };
            if prefix > bits {
                return None;
            }
            return Some(Self::Cidr {
                network: mask(ip, prefix),
                prefix,
            });
        }
        let (host, port) = split_entry(part);
        if host.is_empty() {
            return None;
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Some(Self::Ip { ip, port });
        }
        let host = host.strip_prefix('*').unwrap_or(host);
        // What no host name can end with (`[::1` without its bracket) never matches anything.
        if !host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
        {
            return None;
        }
        let (suffix, apex) = match host.strip_prefix('.') {
            Some(_) => (host.to_owned(), false),
            None => (format!(".{host}"), true),
        };
        (suffix.len() > 1).then_some(Self::Domain { suffix, apex, port })
    }

    /// Whether this entry keeps `host` on `port` off the proxy (Go's matchers).
    fn matches(&self, host: &str, port: u16) -> bool {
        let port_ok = |want: &Option<u16>| want.is_none_or(|p| p == port);
        match self {
            Self::Cidr { network, prefix } => host
                .parse::<IpAddr>()
                .is_ok_and(|ip| same_family(ip, *network) && mask(ip, *prefix) == *network),
            Self::Ip { ip, port: want } => {
                host.parse::<IpAddr>()
                    .is_ok_and(|h| h.to_canonical() == ip.to_canonical())
                    && port_ok(want)
            }
            Self::Domain {
                suffix,
                apex,
                port: want,
            } => {
                (host.ends_with(suffix.as_str()) || (*apex && host == &suffix[1..]))
                    && port_ok(want)
            }
        }
    }
}

/// `part` as host and optional port, as Go's `net.SplitHostPort` splits an entry (brackets
/// removed from an IPv6 host); an entry without a valid port is all host.
fn split_entry(part: &str) -> (&str, Option<u16>) {
    if let Some(rest) = part.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
        return (host, port);
    }
    match part.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (part, None),
        },
        _ => (part, None),
    }
}

fn same_family(a: IpAddr, b: IpAddr) -> bool {
    a.to_canonical().is_ipv4() == b.is_ipv4()
}

/// `ip` with the bits past `prefix` cleared (an IPv4-mapped IPv6 address as IPv4).
fn mask(ip: IpAddr, prefix: u8) -> IpAddr {
    match ip.to_canonical() {
        IpAddr::V4(v4) => {
            let bits = u32::from(v4);
            let kept = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V4((bits & kept).into())
        }
        IpAddr::V6(v6) => {
            let bits = u128::from(v6);
            let kept = u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0);
            IpAddr::V6((bits & kept).into())
        }
    }
}

/// Why a trusted CA bundle cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TrustedCaError {
    /// Not readable as PEM certificates (the [`CaBundle`] limits and checks).
    #[error("{origin}: {source}")]
    Unreadable {
        origin: Box<ConfigMapKey>,
        source: CaBundleError,
    },
    /// PEM certificates, none of which rustls accepts as a trust anchor.
    #[error(
        "{origin}: none of its {count} PEM certificates can be used as a trust anchor (they are \
         not X.509 certificates)"
    )]
    NoUsableCertificate {
        origin: Box<ConfigMapKey>,
        count: usize,
    },
}

/// The cluster's trusted CA bundle: the certificates of a [`CaBundle`] usable as trust
/// anchors, and which were not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedCa {
    bundle: CaBundle,
    /// DER certificates rustls accepts as trust anchors.
    anchors: Vec<Vec<u8>>,
    /// 1-based positions in the bundle of the certificates skipped.
    skipped: Vec<usize>,
}

impl TrustedCa {
    /// Parses the PEM bundle of `origin` and keeps the certificates usable as trust anchors.
    ///
    /// # Errors
    /// PEM that [`CaBundle::parse`] refuses, or no usable certificate.
    pub fn parse(origin: ConfigMapKey, pem: &[u8]) -> Result<Self, TrustedCaError> {
        let bundle =
            CaBundle::parse(origin.clone(), pem).map_err(|source| TrustedCaError::Unreadable {
                origin: Box::new(origin.clone()),
                source,
            })?;
        let mut anchors = Vec::new();
        let mut skipped = Vec::new();
        for (index, der) in bundle.certificates().iter().enumerate() {
            // The check the registry client's verifier makes of each extra root
            // (rustls-platform-verifier adds them with `RootCertStore::add`).
            let mut store = rustls::RootCertStore::empty();
            match store.add(rustls::pki_types::CertificateDer::from(der.clone())) {
                Ok(()) => anchors.push(der.clone()),
                Err(_) => skipped.push(index + 1),
            }
        }
        if anchors.is_empty() {
            return Err(TrustedCaError::NoUsableCertificate {
                origin: Box::new(origin),
                count: skipped.len(),
            });
        }
        Ok(Self {
            bundle,
            anchors,
            skipped,
        })
    }

    /// The ConfigMap key it was read from.
    #[must_use]
    pub fn origin(&self) -> &ConfigMapKey {
        self.bundle.origin()
    }

    /// How many certificates are trusted.
    #[must_use]
    pub fn trusted(&self) -> usize {
        self.anchors.len()
    }

    /// 1-based positions of the certificates skipped (not usable as trust anchors).
    #[must_use]
    pub fn skipped(&self) -> &[usize] {
        &self.skipped
    }

    pub(crate) fn anchors(&self) -> &[Vec<u8>] {
        &self.anchors
    }

    /// Of the whole bundle: the anchors are derived from it.
    pub(crate) fn digest(&self) -> [u8; 32] {
        self.bundle.digest()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use std::time::Duration;

    /// Go's `useProxy` cases, over this `noProxy` (the registry reached over plain HTTP, port
    /// 80 unless written).
    const NO_PROXY: &str = "foobar.com, .barbaz.net, *.wildcard.io, 192.168.1.1, \
        192.168.1.2:81, 192.168.1.3:80, 10.0.0.0/30, 2001:db8::52:0:1, [2001:db8::52:0:2]:443, \
        [2001:db8::52:0:3]:80, 2002:db8:a::45/64, registry.internal:5000";

    fn settings(no_proxy: &str) -> ProxySettings {
        ProxySettings::from_status(
            "http://proxy.example:3128",
            "http://proxy.example:3128",
            no_proxy,
        )
        .unwrap()
        .unwrap()
    }

    #[test]
    fn which_registries_go_through_the_proxy_as_go_decides() {
        let proxy = settings(NO_PROXY);
        let cases: &[(&str, bool, &str)] = &[
            // (registry, proxied, why)
            ("localhost", false, "localhost is never proxied"),
            ("localhost:5000", false, "whatever the port"),
            ("127.0.0.1:5000", false, "loopback"),
            ("127.0.0.2", false, "all of 127/8"),
            ("[::1]:5000", false, "IPv6 loopback"),
            ("[::2]", true, "not loopback"),
            ("local.localhost", true, "only localhost itself"),
            ("192.168.1.1", false, "exact IPv4"),
            ("192.168.1.2", true, "port 81 listed, 80 asked"),
            ("192.168.1.2:81", false, "the listed port"),
            ("192.168.1.3", false, "IPv4:80, the default port"),
            ("192.168.1.4", true, "not listed"),
            ("10.0.0.2", false, "in 10.0.0.0/30"),
            ("10.0.0.4", true, "past 10.0.0.0/30"),
            ("[2001:db8::52:0:1]", false, "exact IPv6"),
            ("[2001:db8::52:0:2]", true, "listed for 443 only"),
            ("[2001:db8::52:0:3]", false, "[IPv6]:80"),
            ("[2002:db8:a::123]:5000", false, "in the IPv6 CIDR"),
            ("[fe80::424b:c8be:1643:a1b6]", true, "not listed"),
            ("barbaz.net", true, ".barbaz.net: subdomains only"),
            ("www.barbaz.net", false, "a subdomain of .barbaz.net"),
            ("foobar.com", false, "foobar.com itself"),
            ("www.foobar.com", false, "and its subdomains"),
            ("foofoobar.com", true, "not a subdomain"),
            ("baz.com", true, "not a suffix on a dot"),
            ("localhost.net", true, "not localhost"),
            ("wildcard.io", true, "*.wildcard.io: subdomains only"),
            ("nested.wildcard.io", false, "a subdomain of *.wildcard.io"),
            ("awildcard.io", true, "not a subdomain"),
            ("FOOBAR.COM", false, "case-insensitive"),
            ("registry.internal:5000", false, "host and listed port"),
            ("registry.internal:5001", true, "another port"),
            ("registry.internal", true, "port 80 by default"),
            ("quay.io", true, "not listed"),
        ];
        for (registry, proxied, why) in cases {
            assert_eq!(
                proxy.uses_proxy(registry, false),
                *proxied,
                "{registry}: {why}"
            );
        }
        // Over HTTPS the default port is 443.
        assert!(!proxy.uses_proxy("[2001:db8::52:0:2]", true));
        assert!(proxy.uses_proxy("192.168.1.3", true));
    }

    #[test]
    fn each_scheme_uses_its_own_proxy_and_star_means_none() {
        let https_only = ProxySettings::from_status("", "http://p:3128", "")
            .unwrap()
            .unwrap();
        assert!(https_only.uses_proxy("quay.io", true));
        assert!(
            !https_only.uses_proxy("insecure.local:5000", false),
            "no httpProxy: plain HTTP goes direct (Go does not fall back to httpsProxy)"
        );
        let http_only = ProxySettings::from_status("http://p:3128", "", "")
            .unwrap()
            .unwrap();
        assert!(!http_only.uses_proxy("quay.io", true));
        assert!(http_only.uses_proxy("insecure.local:5000", false));
        let star = settings("example.com, *");
        assert!(!star.uses_proxy("quay.io", true));
        assert_eq!(
            star.client_settings("quay.io", true).no_proxy.unwrap(),
            "*,127.0.0.0/8,::1"
        );
    }

    #[test]
    fn the_client_gets_the_list_rewritten_for_its_registry() {
        let proxy = settings(NO_PROXY);
        let common = "foobar.com,.barbaz.net,.wildcard.io,192.168.1.1,10.0.0.0/30,\
                      2001:db8::52:0:1,2002:db8:a::/64";
        let cases: &[(&str, bool, String)] = &[
            // Port entries that do not match this registry are left out.
            ("quay.io", true, format!("{common},127.0.0.0/8,::1")),
            // `registry.internal:5000` matches: it becomes the bare host.
            (
                "registry.internal:5000",
                true,
                format!("{common},registry.internal,127.0.0.0/8,::1"),
            ),
            // 192.168.1.3:80 matches plain HTTP on port 80.
            (
                "192.168.1.3",
                false,
                "foobar.com,.barbaz.net,.wildcard.io,192.168.1.1,192.168.1.3,10.0.0.0/30,\
                 2001:db8::52:0:1,2002:db8:a::/64,127.0.0.0/8,::1"
                    .to_owned(),
            ),
            // Go proxies `barbaz.net` itself: reqwest must not see `.barbaz.net` for it.
            (
                "barbaz.net",
                true,
                "foobar.com,.wildcard.io,192.168.1.1,10.0.0.0/30,2001:db8::52:0:1,\
                 2002:db8:a::/64,127.0.0.0/8,::1"
                    .to_owned(),
            ),
            // localhost by name is added for a registry named so.
            (
                "localhost:5000",
                true,
                format!("{common},127.0.0.0/8,::1,localhost"),
            ),
        ];
        for (registry, secure, want) in cases {
            let client = proxy.client_settings(registry, *secure);
            assert_eq!(
                client.no_proxy.as_deref(),
                Some(want.as_str()),
                "{registry}"
            );
            assert_eq!(
                client.http_proxy.as_deref(),
                Some("http://proxy.example:3128")
            );
            assert_eq!(
                client.https_proxy.as_deref(),
                Some("http://proxy.example:3128")
            );
        }
    }

    #[test]
    fn malformed_entries_are_ignored_as_go_ignores_them() {
        let proxy = settings(" , :80, 10.0.0.0/40, not/a/cidr, [::1, .,*.");
        assert!(proxy.uses_proxy("quay.io", true));
        assert!(proxy.uses_proxy("10.0.0.1", true));
        assert_eq!(
            proxy.client_settings("quay.io", true).no_proxy.unwrap(),
            "127.0.0.0/8,::1"
        );
    }

    #[test]
    fn proxy_urls_are_checked_and_never_shown_with_credentials() {
        assert_eq!(ProxySettings::from_status("", "", "example.com"), Ok(None));
        assert_eq!(ProxySettings::from_status("  ", "", ""), Ok(None));
        for bad in [
            "proxy.example:3128",
            "socks5://proxy.example:1080",
            "http://",
            "http://user:pw@/",
            "http://proxy example:3128",
            "http://:3128",
        ] {
            assert_eq!(
                ProxySettings::from_status(bad, "", ""),
                Err(ProxyError::InvalidUrl { field: "httpProxy" }),
                "{bad}"
            );
        }
        assert!(
            ProxySettings::from_status("", "https://[fd00::1]:3128", "")
                .unwrap()
                .is_some()
        );
        let long = format!("http://{}", "a".repeat(MAX_PROXY_URL_BYTES));
        assert!(matches!(
            ProxySettings::from_status("", &long, ""),
            Err(ProxyError::TooLong {
                field: "httpsProxy",
                ..
            })
        ));
        assert!(matches!(
            ProxySettings::from_status("http://p", "", &",".repeat(MAX_NO_PROXY_BYTES + 1)),
            Err(ProxyError::TooLong {
                field: "noProxy",
                ..
            })
        ));

        let secret = ProxySettings::from_status(
            "http://alice:s3cr3t@proxy.example:3128",
            "https://alice:s3cr3t@proxy.example:3129/path",
            "",
        )
        .unwrap()
        .unwrap();
        for shown in [format!("{secret:?}"), secret.to_string()] {
            assert!(!shown.contains("s3cr3t"), "{shown}");
            assert!(!shown.contains("alice"), "{shown}");
            assert!(shown.contains("<redacted>@proxy.example:3128"), "{shown}");
        }
        assert_eq!(
            secret.https_proxy_redacted().as_deref(),
            Some("https://<redacted>@proxy.example:3129/path")
        );
        // The client still gets the credentials.
        assert_eq!(
            secret
                .client_settings("quay.io", true)
                .https_proxy
                .as_deref(),
            Some("https://alice:s3cr3t@proxy.example:3129/path")
        );
    }

    #[test]
    fn settings_differ_by_digest_when_any_value_differs() {
        let a = settings("a");
        assert_eq!(a.digest(), settings("a").digest());
        assert_ne!(a.digest(), settings("b").digest());
        let other =
            ProxySettings::from_status("http://proxy.example:3128", "http://other:3128", "a")
                .unwrap()
                .unwrap();
        assert_ne!(a.digest(), other.digest());
    }

    /// A self-signed CA certificate (EC P-256), generated once with openssl for these tests.
    const TEST_CA: &str = "-----BEGIN CERTIFICATE-----
MIIBozCCAUmgAwIBAgIUJrVVp5AsAHKTV40mt3OF+CfZ9TswCgYIKoZIzj0EAwIw
HjEcMBoGA1UEAwwTcG9tLW5ldHdvcmstdGVzdC1jYTAgFw0yNjEyMDUxMjUxMzNa
GA8yMTI2MTExMTEyNTEzM1owHjEcMBoGA1UEAwwTcG9tLW5ldHdvcmstdGVzdC1j
YTBZMBMGByqGSM49AgEGCCqGSM49AwEHA0IABA8lRTt7KjQKKltTyMGIvFYWRJnl
OtXPRzNPkiimGTC9pawOC0lZiI8fBX1reU7QD4WUQS3rLXtOkgiWczlqIn6jYzBh
MB0GA1UdDgQWBBTCCMqLauB6x0izrWhOH0cWdeLunjAfBgNVHSMEGDAWgBTCCMqL
auB6x0izrWhOH0cWdeLunjAPBgNVHRMBAf8EBTADAQH/MA4GA1UdDwEB/wQEAwIC
BDAKBggqhkjOPQQDAgNIADBFAiAQApCpfuTmY7p3npD+SRVrLCCBf/jvbyBFV3HS
1Kh1tQIhAMgYRd0N+/GD58q2DBSkOFv/yGUd6LkU++AYFRA8aPqN
-----END CERTIFICATE-----
";

    /// Valid PEM and base64, but not a certificate.
    const NOT_A_CERTIFICATE: &str =
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";

    fn origin() -> ConfigMapKey {
        ConfigMapKey {
            namespace: "openshift-platform-operators".into(),
            name: "platform-operators-trusted-ca-bundle".into(),
            key: "ca-bundle.crt".into(),
        }
    }

    #[test]
    fn a_trusted_bundle_keeps_the_usable_certificates_and_counts_the_others() {
        let trusted = TrustedCa::parse(origin(), TEST_CA.as_bytes()).unwrap();
        assert_eq!((trusted.trusted(), trusted.skipped()), (1, &[][..]));

        let mixed = format!("# system roots\n{NOT_A_CERTIFICATE}{TEST_CA}");
        let trusted = TrustedCa::parse(origin(), mixed.as_bytes()).unwrap();
        assert_eq!((trusted.trusted(), trusted.skipped()), (1, &[1][..]));
        assert_ne!(
            trusted.digest(),
            TrustedCa::parse(origin(), TEST_CA.as_bytes())
                .unwrap()
                .digest(),
            "clients are rebuilt when the bundle changes"
        );
    }

    #[test]
    fn an_unusable_trusted_bundle_is_refused_naming_its_configmap() {
        let cases: &[(&str, &str)] = &[
            ("", "holds no PEM certificate"),
            (
                "-----BEGIN CERTIFICATE-----\n%%%\n-----END CERTIFICATE-----\n",
                "malformed",
            ),
            (NOT_A_CERTIFICATE, "none of its 1 PEM certificates"),
        ];
        for (pem, want) in cases {
            let err = TrustedCa::parse(origin(), pem.as_bytes())
                .unwrap_err()
                .to_string();
            assert!(err.contains(want), "{err}");
            assert!(
                err.contains("openshift-platform-operators/platform-operators-trusted-ca-bundle"),
                "{err}"
            );
        }
        let huge = vec![b'a'; crate::auth::MAX_CA_BUNDLE_BYTES + 1];
        assert!(matches!(
            TrustedCa::parse(origin(), &huge),
            Err(TrustedCaError::Unreadable {
                source: CaBundleError::TooLarge { .. },
                ..
            })
        ));
    }

    /// A proxy on loopback that refuses every request (502) and records each request line.
    struct RecordingProxy {
        url: String,
        lines: Arc<std::sync::Mutex<Vec<String>>>,
        task: tokio::task::JoinHandle<()>,
    }

    impl RecordingProxy {
        async fn start() -> Self {
            use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}", listener.local_addr().unwrap());
            let lines = Arc::new(std::sync::Mutex::new(Vec::new()));
            let seen = lines.clone();
            let task = tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let seen = seen.clone();
                    tokio::spawn(async move {
                        let mut head = Vec::new();
                        let mut buf = [0u8; 1024];
                        while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                            match stream.read(&mut buf).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => head.extend_from_slice(&buf[..n]),
                            }
                        }
                        let text = String::from_utf8_lossy(&head);
                        seen.lock()
                            .unwrap()
                            .push(text.lines().next().unwrap_or_default().to_owned());
                        let _ = stream
                            .write_all(
                                b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                            )
                            .await;
                    });
                }
            });
            Self { url, lines, task }
        }

        fn lines(&self) -> Vec<String> {
            self.lines.lock().unwrap().clone()
        }
    }

    impl Drop for RecordingProxy {
        fn drop(&mut self) {
            self.task.abort();
        }
    }

    fn through(proxy: &RecordingProxy, no_proxy: &str) -> PullNetwork {
        PullNetwork {
            proxy: ProxySettings::from_status(&proxy.url, &proxy.url, no_proxy).unwrap(),
            trusted_ca: None,
        }
    }

    async fn resolve(puller: &crate::ImagePuller, reference: &str) {
        let result = puller
            .resolve_digest(
                reference,
                &crate::RegistryAccess::anonymous(),
                &crate::mirrors::MirrorRules::default(),
            )
            .await;
        assert!(result.is_err(), "the proxy refuses everything: {result:?}");
    }

    /// The puller's clients send plain HTTP as absolute-form requests to `httpProxy` and
    /// tunnel HTTPS through `httpsProxy` with CONNECT; new settings build new clients; a
    /// loopback registry is reached directly whatever the proxy. Only loopback is contacted:
    /// the registries' names are never resolved (the proxy would).
    #[tokio::test]
    async fn pulls_go_through_the_proxy_in_force() {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let first = RecordingProxy::start().await;
        let second = RecordingProxy::start().await;
        let puller = crate::ImagePuller::new(vec!["registry.example:5000".to_owned()]);

        assert!(puller.set_network(through(&first, "")));
        resolve(&puller, "registry.example:5000/team/catalog:v1").await;
        let lines = first.lines();
        assert!(
            lines
                .iter()
                .all(|l| l.contains(" http://registry.example:5000/v2/")),
            "absolute-form requests to the registry: {lines:?}"
        );
        assert!(!lines.is_empty());
        resolve(&puller, "secure.example/team/catalog:v1").await;
        assert!(
            first
                .lines()
                .contains(&"CONNECT secure.example:443 HTTP/1.1".to_owned()),
            "HTTPS is tunnelled: {:?}",
            first.lines()
        );

        // New settings: the clients built for the old ones are not used again.
        let before = first.lines().len();
        assert!(puller.set_network(through(&second, "")));
        assert!(!puller.set_network(through(&second, "")), "unchanged");
        resolve(&puller, "registry.example:5000/team/catalog:v1").await;
        assert_eq!(first.lines().len(), before, "the old proxy is not used");
        assert!(!second.lines().is_empty());

        // A registry on loopback is reached directly (Go never proxies loopback).
        let registry = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let host = registry.local_addr().unwrap().to_string();
        let puller = crate::ImagePuller::new(vec![host.clone()]);
        puller.set_network(through(&second, ""));
        let asked = second.lines().len();
        let accept = tokio::spawn(async move { registry.accept().await.is_ok() });
        let _ = tokio::time::timeout(
            Duration::from_secs(5),
            puller.resolve_digest(
                &format!("{host}/team/catalog:v1"),
                &crate::RegistryAccess::anonymous(),
                &crate::mirrors::MirrorRules::default(),
            ),
        )
        .await;
        assert!(accept.await.unwrap(), "the loopback registry was contacted");
        assert_eq!(second.lines().len(), asked, "not through the proxy");
    }
}
