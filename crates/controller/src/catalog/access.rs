//! The credentials and CA bundle a pull uses (PRODUCT §3), gathered from the cluster: the
//! Catalog's own pull secret, the cluster's global pull secret (`openshift-config/pull-secret`,
//! when present) and the Catalog's CA bundle ConfigMap. Catalog images and the bundle images of
//! a catalog are pulled with the same access.
//!
//! Gathered on every reconcile (three GETs at most): a rotated Secret is used at the next poll
//! without a watch on Secrets (which would make the manager cache every Secret of the cluster).
//! Parsing and matching are pure (`pom_oci::auth`); nothing read here is logged.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Api;
use pom_api::Catalog;
use pom_api::catalog::{CaBundleReference, ImageSource, SecretReference};
use pom_api::conditions::Reason;
use pom_policy::source_trust::{LISTED_KEY, SOURCES_CONFIG_MAP, SourceTrust, UntrustedSource};

use crate::Context;
use crate::oci::RegistryAccess;
use crate::oci::auth::{
    CaBundle, CaBundleError, ConfigMapKey, PullSecret, PullSecretError, SecretName,
};

/// Where OpenShift keeps the cluster's global pull secret.
pub const GLOBAL_PULL_SECRET_NAMESPACE: &str = "openshift-config";
/// The global pull secret's name.
pub const GLOBAL_PULL_SECRET_NAME: &str = "pull-secret";
/// The data key of a `kubernetes.io/dockerconfigjson` Secret.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// The Secret type POM reads pull secrets from.
pub const DOCKER_CONFIG_JSON_TYPE: &str = "kubernetes.io/dockerconfigjson";
/// The CA bundle key read when `caBundle.key` is not set (OpenShift's trusted-CA injection key).
pub const DEFAULT_CA_BUNDLE_KEY: &str = "ca-bundle.crt";

/// Why the access for a pull could not be gathered. Messages name the object to fix and never
/// carry its content.
#[derive(Debug, thiserror::Error)]
pub enum AccessError {
    /// The Secret a Catalog names does not exist.
    #[error(
        "pull secret {secret} (spec.source.image.pullSecret) was not found; create it with \
         type {DOCKER_CONFIG_JSON_TYPE}, or fix the reference"
    )]
    PullSecretNotFound { secret: SecretName },
    /// The Secret is not a dockerconfigjson Secret.
    #[error(
        "pull secret {secret} has type {type_:?} and no {DOCKER_CONFIG_JSON_KEY:?} key; POM \
         reads pull secrets of type {DOCKER_CONFIG_JSON_TYPE} (kubectl create secret \
         docker-registry)"
    )]
    PullSecretWrongType { secret: SecretName, type_: String },
    /// The dockerconfigjson data is unusable.
    #[error("pull secret {secret} cannot be used: {source}")]
    PullSecretInvalid {
        secret: SecretName,
        #[source]
        source: PullSecretError,
    },
    /// The CA bundle ConfigMap does not exist.
    #[error(
        "CA bundle {config_map} (spec.source.image.caBundle) was not found; create the \
         ConfigMap with the PEM CA certificates under that key, or fix the reference"
    )]
    CaBundleNotFound { config_map: ConfigMapKey },
    /// The ConfigMap lacks the key.
    #[error(
        "CA bundle {config_map} (spec.source.image.caBundle): the ConfigMap has no such key \
         (it has {available:?}); add it or set caBundle.key"
    )]
    CaBundleKeyMissing {
        config_map: ConfigMapKey,
        available: Vec<String>,
    },
    /// The PEM is unusable.
    #[error("CA bundle {config_map} (spec.source.image.caBundle) cannot be used: {source}")]
    CaBundleInvalid {
        config_map: ConfigMapKey,
        #[source]
        source: CaBundleError,
    },
    /// The Catalog names a namespace Catalogs may not read from (`pom_policy::source_trust`).
    #[error(transparent)]
    Untrusted(#[from] UntrustedSource),
    /// The API server did not answer (or RBAC refused the read).
    #[error(
        "reading {what}: {source}; check the manager's RBAC (it reads ConfigMaps anywhere, and a \
         pull secret outside its own namespace only where an admin bound ClusterRole \
         platform-operators-manager-pull-secret-reader to it (kubectl -n <namespace> create \
         rolebinding platform-operators-pull-secrets \
         --clusterrole=platform-operators-manager-pull-secret-reader \
         --serviceaccount=openshift-platform-operators:platform-operators-manager))"
    )]
    Read {
        what: String,
        #[source]
        source: Box<kube::Error>,
    },
}

impl AccessError {
    /// The condition reason.
    #[must_use]
    pub fn reason(&self) -> Reason {
        match self {
            Self::PullSecretNotFound { .. }
            | Self::PullSecretWrongType { .. }
            | Self::PullSecretInvalid { .. } => Reason::PullSecretInvalid,
            Self::CaBundleNotFound { .. }
            | Self::CaBundleKeyMissing { .. }
            | Self::CaBundleInvalid { .. } => Reason::InvalidCABundle,
            Self::Untrusted(_) => Reason::UntrustedCatalogSource,
            Self::Read { .. } => Reason::SourceFailed,
        }
    }
}

/// The namespaces Catalogs may read from now: the manager's, and those the admin lists in
/// [`SOURCES_CONFIG_MAP`] (one GET per reconcile, so a namespace taken off the list is not read
/// again; the catalog controller also watches the ConfigMap).
///
/// # Errors
/// The API server failing (a missing ConfigMap is an empty list).
pub async fn source_trust(ctx: &Context) -> Result<SourceTrust, AccessError> {
    let namespace = &ctx.settings.manager_namespace;
    let listed = Api::<ConfigMap>::namespaced(ctx.client.clone(), namespace)
        .get_opt(SOURCES_CONFIG_MAP)
        .await
        .map_err(|err| AccessError::Read {
            what: format!("ConfigMap {namespace}/{SOURCES_CONFIG_MAP}"),
            source: Box::new(err),
        })?;
    let listed = listed
        .as_ref()
        .and_then(|cm| cm.data.as_ref())
        .and_then(|data| data.get(LISTED_KEY));
    Ok(SourceTrust::new(namespace, listed.map(String::as_str)))
}

/// The access for pulls of `image` (a Catalog's image source) and of its bundles.
///
/// # Errors
/// A named Secret or ConfigMap missing or unusable, the global pull secret unusable, or the
/// API server failing.
pub async fn for_image_source(
    ctx: &Context,
    image: &ImageSource,
) -> Result<RegistryAccess, AccessError> {
    let mut access = RegistryAccess::anonymous();
    if let Some(reference) = &image.pull_secret {
        access = access.with_pull_secret(Arc::new(catalog_pull_secret(ctx, reference).await?));
    }
    if let Some(global) = global_pull_secret(ctx).await? {
        access = access.with_pull_secret(Arc::new(global));
    }
    if let Some(reference) = &image.ca_bundle {
        access = access.with_ca_bundle(Arc::new(ca_bundle(ctx, reference).await?));
    }
    Ok(access)
}

/// The access for a bundle image listed by Catalog `catalog` (its pull secret and CA bundle
/// plus the global pull secret); the global pull secret alone when the catalog is unknown, gone
/// or not an image catalog.
///
/// # Errors
/// As [`for_image_source`].
pub async fn for_catalog(
    ctx: &Context,
    catalog: Option<&str>,
) -> Result<RegistryAccess, AccessError> {
    let source = match catalog {
        Some(name) => {
            let catalog = Api::<Catalog>::all(ctx.client.clone())
                .get_opt(name)
                .await
                .map_err(|err| AccessError::Read {
                    what: format!("Catalog {name}"),
                    source: Box::new(err),
                })?;
            if let Some(catalog) = &catalog {
                // Its pull secret and CA bundle are read only from a trusted namespace.
                source_trust(ctx).await?.check(&catalog.spec.source)?;
            }
            catalog.and_then(|c| c.spec.source.image)
        }
        None => None,
    };
    for_image_source(ctx, &source.unwrap_or_default()).await
}

async fn catalog_pull_secret(
    ctx: &Context,
    reference: &SecretReference,
) -> Result<PullSecret, AccessError> {
    let name = SecretName {
        namespace: reference.namespace.clone(),
        name: reference.name.clone(),
    };
    let secret = read_secret(ctx, &name)
        .await?
        .ok_or_else(|| AccessError::PullSecretNotFound {
            secret: name.clone(),
        })?;
    parse_pull_secret(name, &secret)
}

/// The global pull secret, `None` when absent (not an OpenShift cluster, or none configured)
/// or not readable: the manager reads it through a Role the OpenShift manifests ship, which a
/// plain Kubernetes install has no reason to grant (issue 22 item 3). A pull that needed it
/// then fails as unauthorized, naming the Secrets consulted.
async fn global_pull_secret(ctx: &Context) -> Result<Option<PullSecret>, AccessError> {
    let name = SecretName {
        namespace: GLOBAL_PULL_SECRET_NAMESPACE.to_owned(),
        name: GLOBAL_PULL_SECRET_NAME.to_owned(),
    };
    let read = Api::<Secret>::namespaced(ctx.client.clone(), &name.namespace)
        .get_opt(&name.name)
        .await;
    let read = match read {
        Err(kube::Error::Api(status)) if status.code == 403 => {
            tracing::debug!(secret = %name, "the global pull secret is not readable; not used");
            return Ok(None);
        }
        other => other.map_err(|err| AccessError::Read {
            what: format!("pull secret {name}"),
            source: Box::new(err),
        })?,
    };
    match read {
        Some(secret) => parse_pull_secret(name, &secret).map(Some),
        None => Ok(None),
    }
}

async fn read_secret(ctx: &Context, name: &SecretName) -> Result<Option<Secret>, AccessError> {
    Api::<Secret>::namespaced(ctx.client.clone(), &name.namespace)
        .get_opt(&name.name)
        .await
        .map_err(|err| AccessError::Read {
            what: format!("pull secret {name}"),
            source: Box::new(err),
        })
}

/// Reads the dockerconfigjson of `secret` (pure).
fn parse_pull_secret(name: SecretName, secret: &Secret) -> Result<PullSecret, AccessError> {
    let Some(data) = secret
        .data
        .as_ref()
        .and_then(|data| data.get(DOCKER_CONFIG_JSON_KEY))
    else {
        return Err(AccessError::PullSecretWrongType {
            secret: name,
            type_: secret.type_.clone().unwrap_or_default(),
        });
    };
    PullSecret::parse(name.clone(), &data.0).map_err(|source| AccessError::PullSecretInvalid {
        secret: name,
        source,
    })
}

async fn ca_bundle(ctx: &Context, reference: &CaBundleReference) -> Result<CaBundle, AccessError> {
    let origin = ConfigMapKey {
        namespace: reference.namespace.clone(),
        name: reference.name.clone(),
        key: reference
            .key
            .clone()
            .unwrap_or_else(|| DEFAULT_CA_BUNDLE_KEY.to_owned()),
    };
    let config_map = Api::<ConfigMap>::namespaced(ctx.client.clone(), &origin.namespace)
        .get_opt(&origin.name)
        .await
        .map_err(|err| AccessError::Read {
            what: origin.to_string(),
            source: Box::new(err),
        })?
        .ok_or_else(|| AccessError::CaBundleNotFound {
            config_map: origin.clone(),
        })?;
    parse_ca_bundle(origin, &config_map)
}

/// Reads the PEM of `config_map` (pure).
fn parse_ca_bundle(origin: ConfigMapKey, config_map: &ConfigMap) -> Result<CaBundle, AccessError> {
    let Some(pem) = config_map
        .data
        .as_ref()
        .and_then(|data| data.get(&origin.key))
    else {
        let mut available: Vec<String> = config_map
            .data
            .iter()
            .flatten()
            .map(|(k, _)| k.clone())
            .collect();
        available.sort();
        return Err(AccessError::CaBundleKeyMissing {
            config_map: origin,
            available,
        });
    };
    CaBundle::parse(origin.clone(), pem.as_bytes()).map_err(|source| AccessError::CaBundleInvalid {
        config_map: origin,
        source,
    })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::ByteString;

    use super::*;

    fn name() -> SecretName {
        SecretName {
            namespace: "team".into(),
            name: "creds".into(),
        }
    }

    fn secret(type_: &str, key: &str, data: &[u8]) -> Secret {
        Secret {
            type_: Some(type_.into()),
            data: Some(BTreeMap::from([(
                key.to_owned(),
                ByteString(data.to_vec()),
            )])),
            ..Secret::default()
        }
    }

    #[test]
    fn pull_secrets_are_read_from_dockerconfigjson_secrets_only() {
        let good = br#"{"auths": {"quay.io": {"username": "u", "password": "hunter2"}}}"#;
        let parsed = parse_pull_secret(
            name(),
            &secret(DOCKER_CONFIG_JSON_TYPE, ".dockerconfigjson", good),
        )
        .unwrap();
        assert_eq!(parsed.origin(), &name());

        let opaque = secret("Opaque", "password", b"hunter2");
        let err = parse_pull_secret(name(), &opaque).unwrap_err();
        assert!(
            matches!(err, AccessError::PullSecretWrongType { .. }),
            "{err:?}"
        );
        assert_eq!(err.reason(), Reason::PullSecretInvalid);
        let message = err.to_string();
        assert!(
            message.contains("team/creds") && message.contains("\"Opaque\""),
            "{message}"
        );

        let bad = secret(
            DOCKER_CONFIG_JSON_TYPE,
            ".dockerconfigjson",
            br#"{"auths": {"quay.io": {"auth": "hunter2"}}}"#,
        );
        let err = parse_pull_secret(name(), &bad).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("team/creds") && message.contains("quay.io"),
            "{message}"
        );
        assert!(!message.contains("hunter2"), "{message}");
    }

    #[test]
    fn a_bad_ca_bundle_names_the_config_map_and_key() {
        let origin = ConfigMapKey {
            namespace: "team".into(),
            name: "registry-ca".into(),
            key: DEFAULT_CA_BUNDLE_KEY.into(),
        };
        let config_map = |key: &str, value: &str| ConfigMap {
            data: Some(BTreeMap::from([(key.to_owned(), value.to_owned())])),
            ..ConfigMap::default()
        };
        let err = parse_ca_bundle(
            origin.clone(),
            &config_map(DEFAULT_CA_BUNDLE_KEY, "not a certificate"),
        )
        .unwrap_err();
        assert_eq!(err.reason(), Reason::InvalidCABundle);
        let message = err.to_string();
        assert!(
            message.contains("ConfigMap team/registry-ca key \"ca-bundle.crt\"")
                && message.contains("spec.source.image.caBundle")
                && message.contains("no PEM certificate"),
            "{message}"
        );
        let err = parse_ca_bundle(origin, &config_map("ca.crt", "x")).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains("[\"ca.crt\"]") && message.contains("caBundle.key"),
            "{message}"
        );
    }
}
