//! Which namespaces a Catalog may take its content and credentials from (issue 22 item 4).
//!
//! Why: whatever a Catalog serves is installed with the manager's privileges. A ConfigMap
//! catalog, a CA bundle that decides which registry is trusted, and a pull secret are all read
//! from a namespace the Catalog names; if any namespace would do, anyone who can edit a
//! ConfigMap anywhere could publish bundles POM installs. So a Catalog may name only the
//! manager's own namespace or a namespace the admin listed, under key [`LISTED_KEY`] of the
//! ConfigMap [`SOURCES_CONFIG_MAP`] in the manager's namespace (comma-separated). The same list
//! is enforced twice: at admission, by a ValidatingAdmissionPolicy that takes that ConfigMap as
//! its parameter (the shipped `platform-operators-catalog-sources` policy), and here, by the
//! controller, before it reads anything a Catalog names (a namespace removed from the list
//! stops being read at the next reconcile, and no admission layer is assumed).
//!
//! Pure: the controller reads the ConfigMap, this module judges.

use std::collections::BTreeSet;
use std::fmt;

use pom_api::catalog::CatalogSource;

/// The ConfigMap, in the manager's namespace, listing the namespaces Catalogs may name.
pub const SOURCES_CONFIG_MAP: &str = "platform-operators-catalog-sources";
/// Its key: namespace names separated by commas (spaces around a name are ignored).
pub const LISTED_KEY: &str = "namespaces";
/// Most namespaces read from the list; the rest are ignored (and said so in the error that
/// names one of them). The list is the admin's, but it is still input read on every reconcile.
pub const MAX_LISTED_NAMESPACES: usize = 256;

/// The field of a Catalog's spec that names a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SourceField {
    ConfigMap,
    PullSecret,
    CaBundle,
}

impl SourceField {
    /// The field's path, as the admin writes it.
    #[must_use]
    pub fn path(self) -> &'static str {
        match self {
            Self::ConfigMap => "spec.source.configMap.namespace",
            Self::PullSecret => "spec.source.image.pullSecret.namespace",
            Self::CaBundle => "spec.source.image.caBundle.namespace",
        }
    }
}

/// A Catalog names a namespace it may not read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UntrustedSource {
    pub field: SourceField,
    pub namespace: String,
    /// The manager's namespace (always trusted), for the message.
    pub manager_namespace: String,
    /// Whether the list was longer than [`MAX_LISTED_NAMESPACES`] (its tail is not read).
    pub list_truncated: bool,
}

impl fmt::Display for UntrustedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {:?}, a namespace Catalogs may not read from: a Catalog's content is \
             installed with the manager's privileges, so it may come only from {:?} or a \
             namespace the admin lists; add {:?} to key {LISTED_KEY:?} of ConfigMap {}/{} \
             (comma-separated) if whoever can write ConfigMaps and Secrets there may publish \
             operators, or move the object into a listed namespace",
            self.field.path(),
            self.namespace,
            self.manager_namespace,
            self.namespace,
            self.manager_namespace,
            SOURCES_CONFIG_MAP,
        )?;
        if self.list_truncated {
            write!(
                f,
                " (only the first {MAX_LISTED_NAMESPACES} names of the list are read; shorten it)"
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for UntrustedSource {}

/// The namespaces Catalogs may read from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourceTrust {
    manager_namespace: String,
    listed: BTreeSet<String>,
    truncated: bool,
}

impl SourceTrust {
    /// The manager's namespace plus those listed in `listed` (the value of [`LISTED_KEY`], if
    /// the ConfigMap and key exist), parsed as the admission policy parses it: split at commas,
    /// each name trimmed, empty names dropped.
    #[must_use]
    pub fn new(manager_namespace: &str, listed: Option<&str>) -> Self {
        let text = listed.unwrap_or_default();
        let listed = parse_listed(text);
        Self {
            manager_namespace: manager_namespace.to_owned(),
            truncated: listed.len() == MAX_LISTED_NAMESPACES
                && text.split(',').filter(|n| !n.trim().is_empty()).count() > MAX_LISTED_NAMESPACES,
            listed,
        }
    }

    /// Whether `namespace` may be read from.
    #[must_use]
    pub fn trusts(&self, namespace: &str) -> bool {
        namespace == self.manager_namespace || self.listed.contains(namespace)
    }

    /// Every namespace `source` names, checked; the first it may not read from is the error.
    ///
    /// # Errors
    /// [`UntrustedSource`] naming the field and the namespace.
    pub fn check(&self, source: &CatalogSource) -> Result<(), UntrustedSource> {
        let image = source.image.as_ref();
        let named = [
            (
                SourceField::ConfigMap,
                source.config_map.as_ref().map(|c| c.namespace.as_str()),
            ),
            (
                SourceField::PullSecret,
                image
                    .and_then(|i| i.pull_secret.as_ref())
                    .map(|s| s.namespace.as_str()),
            ),
            (
                SourceField::CaBundle,
                image
                    .and_then(|i| i.ca_bundle.as_ref())
                    .map(|c| c.namespace.as_str()),
            ),
        ];
        named
            .into_iter()
            .filter_map(|(field, namespace)| Some((field, namespace?)))
            .find(|(_, namespace)| !self.trusts(namespace))
            .map_or(Ok(()), |(field, namespace)| {
                Err(UntrustedSource {
                    field,
                    namespace: namespace.to_owned(),
                    manager_namespace: self.manager_namespace.clone(),
                    list_truncated: self.truncated,
                })
            })
    }
}

/// The listed names: split at commas, trimmed (Unicode white space, as CEL's `trim()`), empty
/// ones dropped, at most [`MAX_LISTED_NAMESPACES`].
fn parse_listed(text: &str) -> BTreeSet<String> {
    text.split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
        .take(MAX_LISTED_NAMESPACES)
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use pom_api::catalog::{CaBundleReference, ConfigMapSource, ImageSource, SecretReference};
    use proptest::prelude::*;

    use super::*;

    const OWN: &str = "openshift-platform-operators";

    fn config_map(namespace: &str) -> CatalogSource {
        CatalogSource {
            config_map: Some(ConfigMapSource {
                name: "catalog".into(),
                namespace: namespace.into(),
                key: None,
            }),
            image: None,
        }
    }

    fn image(pull_secret: Option<&str>, ca_bundle: Option<&str>) -> CatalogSource {
        CatalogSource {
            image: Some(ImageSource {
                reference: "quay.io/example/catalog:latest".into(),
                poll_interval: None,
                pull_secret: pull_secret.map(|namespace| SecretReference {
                    name: "pull".into(),
                    namespace: namespace.into(),
                }),
                ca_bundle: ca_bundle.map(|namespace| CaBundleReference {
                    name: "ca".into(),
                    namespace: namespace.into(),
                    key: None,
                }),
            }),
            config_map: None,
        }
    }

    /// A case: its name, the source, and the field and namespace refused (if any).
    type Case = (
        &'static str,
        CatalogSource,
        Option<(SourceField, &'static str)>,
    );

    #[test]
    fn the_trust_table() {
        let listed = Some(" catalogs, ,team-a,");
        let cases: &[Case] = &[
            ("own namespace", config_map(OWN), None),
            ("listed, trimmed", config_map("catalogs"), None),
            ("listed last", config_map("team-a"), None),
            (
                "elsewhere",
                config_map("kube-public"),
                Some((SourceField::ConfigMap, "kube-public")),
            ),
            (
                "a prefix of a listed name is not it",
                config_map("team"),
                Some((SourceField::ConfigMap, "team")),
            ),
            ("image with nothing named", image(None, None), None),
            (
                "image, both trusted",
                image(Some(OWN), Some("catalogs")),
                None,
            ),
            (
                "pull secret elsewhere",
                image(Some("default"), Some(OWN)),
                Some((SourceField::PullSecret, "default")),
            ),
            (
                "CA bundle elsewhere",
                image(Some(OWN), Some("team-b")),
                Some((SourceField::CaBundle, "team-b")),
            ),
        ];
        let trust = SourceTrust::new(OWN, listed);
        for (name, source, expected) in cases {
            let got = trust
                .check(source)
                .err()
                .map(|e| (e.field, e.namespace.clone()));
            let expected = expected.map(|(f, n)| (f, n.to_owned()));
            assert_eq!(got, expected, "{name}");
        }
    }

    #[test]
    fn without_the_config_map_only_the_managers_namespace_is_trusted() {
        let trust = SourceTrust::new(OWN, None);
        assert!(trust.trusts(OWN));
        assert!(!trust.trusts("catalogs"));
        assert!(!trust.trusts(""));
    }

    #[test]
    fn the_message_names_the_field_the_namespace_and_the_fix() {
        let err = SourceTrust::new(OWN, None)
            .check(&image(Some("team-b"), None))
            .unwrap_err()
            .to_string();
        for needle in [
            "spec.source.image.pullSecret.namespace",
            "\"team-b\"",
            SOURCES_CONFIG_MAP,
            LISTED_KEY,
            OWN,
        ] {
            assert!(err.contains(needle), "{needle} missing from: {err}");
        }
    }

    #[test]
    fn the_list_is_bounded() {
        let long: Vec<String> = (0..MAX_LISTED_NAMESPACES + 10)
            .map(|i| format!("ns-{i:04}"))
            .collect();
        let trust = SourceTrust::new(OWN, Some(&long.join(",")));
        assert_eq!(trust.listed.len(), MAX_LISTED_NAMESPACES);
        assert!(trust.trusts("ns-0000"));
        let beyond = format!("ns-{:04}", MAX_LISTED_NAMESPACES + 5);
        assert!(!trust.trusts(&beyond));
        let err = trust.check(&config_map(&beyond)).unwrap_err().to_string();
        assert!(err.contains("only the first 256 names"), "{err}");
        let short = SourceTrust::new(OWN, Some("a,b"));
        assert!(
            !short
                .check(&config_map("c"))
                .unwrap_err()
                .to_string()
                .contains("only the first")
        );
    }

    proptest! {
        /// A namespace is trusted iff it is the manager's or one of the listed names, however
        /// the list is spaced.
        #[test]
        fn trusted_iff_own_or_listed(
            names in proptest::collection::vec("[a-z][a-z0-9-]{0,8}", 0..8),
            probe in "[a-z][a-z0-9-]{0,8}",
            pad in "[ \t]{0,2}",
        ) {
            let text = names.iter().map(|n| format!("{pad}{n}{pad}")).collect::<Vec<_>>().join(",");
            let trust = SourceTrust::new(OWN, Some(&text));
            prop_assert_eq!(trust.trusts(&probe), probe == OWN || names.contains(&probe));
        }
    }
}
