//! A typed view of the cluster-wide proxy configuration, `Proxy` (`config.openshift.io/v1`,
//! openshift/api `config/v1/types_proxy.go`), which POM reads (and watches) so that its own
//! catalog and bundle pulls leave the cluster the way every other platform component's do
//! (PRODUCT §10, issue 23 item 2).
//!
//! - `status` holds the **effective** values: the cluster network operator validates `spec`,
//!   adds the cluster's own networks, `localhost`, `127.0.0.1`, `.svc` and `.cluster.local` to
//!   `noProxy`, and writes the result here. Components read `status`, never `spec`, so POM
//!   does too.
//! - `spec.trustedCA` names a ConfigMap in `openshift-config` with the admin's extra CA
//!   certificates; the network operator merges it with the system bundle and injects the
//!   result into every ConfigMap labelled `config.openshift.io/inject-trusted-cabundle: "true"`.
//!   POM reads its own injected ConfigMap, not the one named here; it reads the name only to
//!   say what is missing when nothing was injected.
//!
//! This is a **read-only view**: it is not in [`crate::crds`] (the platform owns the kind, POM
//! never installs or writes it), so `crds/` does not change. Only the fields POM uses are kept;
//! unknown fields (`spec.httpProxy`, `spec.readinessEndpoints`, ...) are ignored when read.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The name of the cluster's one `Proxy` object; objects of other names are ignored upstream.
pub const CLUSTER_PROXY_NAME: &str = "cluster";

/// The label the cluster network operator looks for to inject the merged trusted CA bundle
/// into a ConfigMap (any namespace, key [`TRUSTED_CA_BUNDLE_KEY`]).
pub const INJECT_TRUSTED_CA_BUNDLE_LABEL: &str = "config.openshift.io/inject-trusted-cabundle";

/// The key the injected PEM bundle is written under.
pub const TRUSTED_CA_BUNDLE_KEY: &str = "ca-bundle.crt";

/// `Proxy` spec: only the trusted CA reference is read (the proxy URLs are read from status).
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "Proxy",
    plural = "proxies",
    status = "ProxyStatus",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ProxySpec {
    /// The admin's ConfigMap (in `openshift-config`) of extra trusted CA certificates; an
    /// empty name means none.
    #[serde(rename = "trustedCA", default, skip_serializing_if = "Option::is_none")]
    pub trusted_ca: Option<ConfigMapNameReference>,
}

/// A ConfigMap by name, its namespace implied by the field that holds it (openshift/api
/// `ConfigMapNameReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct ConfigMapNameReference {
    #[serde(default)]
    pub name: String,
}

/// `Proxy` status: the effective proxy settings, each empty when unset.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxyStatus {
    /// The proxy for `http://` requests (an `http://` URL).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub http_proxy: String,
    /// The proxy for `https://` requests (an `http://` or `https://` URL).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub https_proxy: String,
    /// Comma-separated hosts, domains, IPs and CIDRs reached without the proxy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub no_proxy: String,
}

impl Proxy {
    /// The name of `spec.trustedCA`, when one is set.
    #[must_use]
    pub fn trusted_ca_name(&self) -> Option<&str> {
        self.spec
            .trusted_ca
            .as_ref()
            .map(|reference| reference.name.as_str())
            .filter(|name| !name.is_empty())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn the_object_as_the_network_operator_writes_it_is_read() {
        let proxy: Proxy = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Proxy",
            "metadata": {"name": "cluster"},
            "spec": {
                "httpProxy": "http://spec-only.example:3128",
                "noProxy": "example.com",
                "readinessEndpoints": ["http://www.google.com"],
                "trustedCA": {"name": "user-ca-bundle"}
            },
            "status": {
                "httpProxy": "http://proxy.example:3128",
                "httpsProxy": "http://proxy.example:3128",
                "noProxy": ".cluster.local,.svc,10.0.0.0/16,127.0.0.1,example.com,localhost"
            }
        }))
        .unwrap();
        let status = proxy.status.clone().unwrap();
        assert_eq!(status.http_proxy, "http://proxy.example:3128");
        assert_eq!(status.https_proxy, "http://proxy.example:3128");
        assert!(status.no_proxy.contains("10.0.0.0/16"));
        assert_eq!(proxy.trusted_ca_name(), Some("user-ca-bundle"));
    }

    #[test]
    fn a_cluster_without_a_proxy_reads_as_empty_settings() {
        // What an installer writes on a cluster without a proxy: an empty spec, an empty
        // status (or none yet), `trustedCA.name` empty.
        let proxy: Proxy = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Proxy",
            "metadata": {"name": "cluster"},
            "spec": {"trustedCA": {"name": ""}},
            "status": {}
        }))
        .unwrap();
        assert_eq!(proxy.status, Some(ProxyStatus::default()));
        assert_eq!(proxy.trusted_ca_name(), None);
        let bare: Proxy = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "Proxy",
            "metadata": {"name": "cluster"},
            "spec": {}
        }))
        .unwrap();
        assert_eq!(bare.status, None);
        assert_eq!(bare.trusted_ca_name(), None);
    }

    #[test]
    fn fields_are_spelled_as_upstream() {
        let status = ProxyStatus {
            http_proxy: "http://p:1".into(),
            https_proxy: "https://p:2".into(),
            no_proxy: "a,b".into(),
        };
        assert_eq!(
            serde_json::to_value(&status).unwrap(),
            serde_json::json!({"httpProxy": "http://p:1", "httpsProxy": "https://p:2", "noProxy": "a,b"})
        );
        let spec = ProxySpec {
            trusted_ca: Some(ConfigMapNameReference { name: "ca".into() }),
        };
        assert_eq!(
            serde_json::to_value(&spec).unwrap(),
            serde_json::json!({"trustedCA": {"name": "ca"}})
        );
    }

    #[test]
    fn the_view_is_cluster_scoped_with_a_status_and_not_among_poms_crds() {
        let crd = Proxy::crd();
        assert_eq!(crd.spec.scope, "Cluster");
        assert_eq!(crd.spec.names.plural, "proxies");
        let version = &crd.spec.versions[0];
        assert!(
            version
                .subresources
                .as_ref()
                .and_then(|s| s.status.as_ref())
                .is_some(),
            "status is a subresource upstream (the network operator writes it)"
        );
        assert!(
            !crate::crds()
                .iter()
                .any(|crd| crd.spec.names.kind == "Proxy"),
            "Proxy is in crds()"
        );
        assert!(
            crate::external_test_crds()
                .iter()
                .any(|crd| crd.spec.names.kind == "Proxy"),
            "the e2e control planes serve it"
        );
    }
}
