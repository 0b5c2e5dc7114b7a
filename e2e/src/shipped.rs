//! The shipped install under test: every object of `manifests/kubernetes/` applied as the admin
//! would (the Deployment aside: tests run the manager as a local process instead), and
//! kubeconfigs holding a ServiceAccount's token, so a process runs with exactly the RBAC a
//! ServiceAccount was given and nothing else.

use std::path::{Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::Client;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::discovery::{ApiResource, Scope, pinned_kind};

use crate::{ControlPlane, HarnessError};

/// Applies every object of the shipped plain-Kubernetes install except the Deployment; the
/// `Kind/name` of each, in apply order.
///
/// # Errors
/// When a file does not parse or the API server refuses an object.
pub async fn apply_kubernetes_manifests(client: &Client) -> Result<Vec<String>, HarnessError> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../manifests/kubernetes");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .map_err(HarnessError::io(format!("reading {}", dir.display())))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let mut applied = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file)
            .map_err(HarnessError::io(format!("reading {}", file.display())))?;
        for doc in text.split("\n---\n").skip(1) {
            let object: DynamicObject = serde_saphyr::from_str(doc)
                .map_err(|e| HarnessError::Other(format!("{}: {e}", file.display())))?;
            let Some(types) = object.types.clone() else {
                return Err(HarnessError::Other(format!(
                    "{}: an object without apiVersion/kind",
                    file.display()
                )));
            };
            if types.kind == "Deployment" {
                continue;
            }
            let (group, version) = types
                .api_version
                .rsplit_once('/')
                .unwrap_or(("", &types.api_version));
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &types.kind);
            let (resource, caps): (ApiResource, _) = pinned_kind(client, &gvk)
                .await
                .map_err(HarnessError::kube(format!("discovering {}", types.kind)))?;
            let api: Api<DynamicObject> = match (caps.scope, object.metadata.namespace.as_deref()) {
                (Scope::Namespaced, Some(ns)) => {
                    Api::namespaced_with(client.clone(), ns, &resource)
                }
                _ => Api::all_with(client.clone(), &resource),
            };
            let name = object.metadata.name.clone().unwrap_or_default();
            api.patch(
                &name,
                &PatchParams::apply("pom-e2e").force(),
                &Patch::Apply(&object),
            )
            .await
            .map_err(HarnessError::kube(format!(
                "applying {}/{name}",
                types.kind
            )))?;
            applied.push(format!("{}/{name}", types.kind));
        }
    }
    Ok(applied)
}

/// How long a test's ServiceAccount token is valid.
const TEST_TOKEN_LIFETIME: Duration = Duration::from_secs(3600);

/// A bound token (TokenRequest API, one hour) of the ServiceAccount `namespace/name`.
///
/// # Errors
/// When the API server refuses the TokenRequest.
pub async fn service_account_token(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<String, HarnessError> {
    service_account_token_valid_for(client, namespace, name, TEST_TOKEN_LIFETIME).await
}

/// A bound token of the ServiceAccount `namespace/name`, valid for `lifetime`.
///
/// # Errors
/// When the API server refuses the TokenRequest.
pub async fn service_account_token_valid_for(
    client: &Client,
    namespace: &str,
    name: &str,
    lifetime: Duration,
) -> Result<String, HarnessError> {
    let sas: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let request: TokenRequest = serde_json::from_value(
        serde_json::json!({"spec": {"audiences": [], "expirationSeconds": lifetime.as_secs()}}),
    )
    .map_err(|e| HarnessError::Other(e.to_string()))?;
    let status = sas
        .create_token_request(name, &PostParams::default(), &request)
        .await
        .map_err(HarnessError::kube(format!(
            "a token for {namespace}/{name}"
        )))?
        .status
        .ok_or_else(|| HarnessError::Other(format!("no token for {namespace}/{name}")))?;
    Ok(status.token)
}

/// A kubeconfig for the ServiceAccount `namespace/name` (see [`service_account_token`]),
/// written to `<plane dir>/<file>`.
///
/// # Errors
/// When no token can be had or the file cannot be written.
pub async fn service_account_kubeconfig(
    plane: &ControlPlane,
    client: &Client,
    namespace: &str,
    name: &str,
    file: &str,
) -> Result<PathBuf, HarnessError> {
    service_account_kubeconfig_valid_for(plane, client, namespace, name, file, TEST_TOKEN_LIFETIME)
        .await
}

/// [`service_account_kubeconfig`] with a token valid for `lifetime`.
///
/// # Errors
/// When no token can be had or the file cannot be written.
pub async fn service_account_kubeconfig_valid_for(
    plane: &ControlPlane,
    client: &Client,
    namespace: &str,
    name: &str,
    file: &str,
    lifetime: Duration,
) -> Result<PathBuf, HarnessError> {
    let token = service_account_token_valid_for(client, namespace, name, lifetime).await?;
    let cluster = plane
        .kubeconfig()
        .clusters
        .first()
        .and_then(|c| c.cluster.clone())
        .ok_or_else(|| HarnessError::Other("the admin kubeconfig has no cluster".into()))?;
    let yaml = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: pom-e2e\n  cluster:\n    server: {}\n    certificate-authority-data: {}\nusers:\n- name: {name}\n  user:\n    token: {token}\ncontexts:\n- name: {name}\n  context:\n    cluster: pom-e2e\n    user: {name}\ncurrent-context: {name}\n",
        cluster.server.unwrap_or_default(),
        cluster.certificate_authority_data.unwrap_or_default(),
    );
    let path = plane.dir().join(file);
    std::fs::write(&path, yaml).map_err(HarnessError::io(format!("writing {}", path.display())))?;
    Ok(path)
}
