//! OLM v0 on a test control plane (issue 36 item 4): its CRDs as operator-framework publishes
//! them (`e2e/tools/olm-v0-crds.sh`), and the objects OLM v0 leaves for an installed bundle,
//! laid out as OLM's own code writes them, so that adoption is tested against what a real
//! cluster holds. Nothing of OLM runs: the objects are written once, statuses included.
//!
//! What OLM v0 writes, from its sources (operator-lifecycle-manager `pkg/lib/ownerutil`,
//! `pkg/controller/install`, `pkg/controller/operators/olm`):
//! - objects it generates for a CSV carry `olm.owner=<csv>`, `olm.owner.namespace=<ns>`,
//!   `olm.owner.kind=ClusterServiceVersion`; namespaced ones also a non-blocking, non-controller
//!   owner reference to the CSV; cluster-scoped ones (ClusterRoles, ClusterRoleBindings,
//!   webhook configurations) have generated names and only the labels;
//! - `olm.managed: "true"` on what OLM's informers filter by (Deployments, Services, Secrets);
//! - the operator's component label `operators.coreos.com/<package>.<namespace>: ""` (OLM's
//!   Operator API) on the Subscription, CSV, CRDs and generated objects;
//! - the CSV annotated by its OperatorGroup (`olm.operatorGroup`, `olm.operatorNamespace`,
//!   `olm.targetNamespaces`, `""` for every namespace), annotations OLM copies onto the
//!   Deployment's pod template; `OPERATOR_CONDITION_NAME=<csv>` injected into its containers, and
//!   `revisionHistoryLimit: 1` on its Deployments;
//! - copies of the CSV in the watched namespaces, labelled `olm.copiedFrom=<namespace>`;
//! - the OperatorGroup's `status.namespaces` resolved (`[""]` for every namespace), the
//!   Subscription's `status.installedCSV`, the CSV's `status.phase: Succeeded`.

use std::path::{Path, PathBuf};

use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::core::GroupVersionKind;
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use crate::HarnessError;
use crate::fixtures::TestBundle;

/// The folder of OLM v0's published CRDs ([`crate::published_crds::OLM_V0`]).
///
/// # Errors
/// When a CRD file is not there (run `e2e/tools/olm-v0-crds.sh`).
pub fn crds_dir() -> Result<PathBuf, HarnessError> {
    crate::published_crds::OLM_V0.dir()
}

/// [`crds_dir`], or `None` when the test must skip (a failure in CI).
#[must_use]
pub fn require_crds() -> Option<PathBuf> {
    crate::published_crds::OLM_V0.require()
}

/// Installs OLM v0's CRDs from `dir` and waits until they are Established.
///
/// # Errors
/// A file that is not a CRD, or a CRD the API server refuses.
pub async fn install_crds(client: &Client, dir: &Path) -> Result<(), HarnessError> {
    crate::published_crds::OLM_V0.install(client, dir).await
}

/// The namespaces an install's OperatorGroup targets.
#[derive(Debug, Clone)]
pub enum Targets {
    All,
    Own,
    Namespaces(Vec<String>),
}

/// One install as OLM v0 leaves it.
#[derive(Debug, Clone)]
pub struct Install {
    pub bundle: TestBundle,
    pub namespace: String,
    pub targets: Targets,
    /// `Automatic` or `Manual`.
    pub approval: &'static str,
    /// The Subscription's `spec.config`.
    pub config: Option<Value>,
    /// Days until OLM's webhook CA expires (its serving certificate a day earlier, as
    /// `certs.go` issues it); `None`: far in the future.
    pub ca_expires_in_days: Option<i64>,
}

impl Install {
    #[must_use]
    pub fn new(bundle: TestBundle, namespace: &str, targets: Targets) -> Self {
        Self {
            bundle,
            namespace: namespace.to_owned(),
            targets,
            approval: "Automatic",
            config: None,
            ca_expires_in_days: None,
        }
    }

    fn target_list(&self) -> Vec<String> {
        match &self.targets {
            Targets::All => vec![String::new()],
            Targets::Own => vec![self.namespace.clone()],
            Targets::Namespaces(list) => list.clone(),
        }
    }

    fn component_label(&self) -> String {
        format!(
            "operators.coreos.com/{}.{}",
            self.bundle.package, self.namespace
        )
    }

    /// OLM's owner labels for what it generates for the CSV.
    fn owner_labels(&self) -> serde_json::Map<String, Value> {
        let mut labels = serde_json::Map::new();
        labels.insert("olm.owner".into(), json!(self.bundle.csv()));
        labels.insert("olm.owner.namespace".into(), json!(self.namespace));
        labels.insert("olm.owner.kind".into(), json!("ClusterServiceVersion"));
        labels.insert(self.component_label(), json!(""));
        labels
    }
}

/// Writes every object OLM v0 leaves for `install`, statuses included.
///
/// # Errors
/// An object the API server refuses.
pub async fn lay_out(client: &Client, install: &Install) -> Result<(), HarnessError> {
    let ns = install.namespace.as_str();
    let csv_name = install.bundle.csv();
    let package = install.bundle.package.clone();
    let og_name = format!("{ns}-og");
    create(
        client,
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}),
    )
    .await?;
    for target in install
        .target_list()
        .iter()
        .filter(|t| !t.is_empty() && *t != ns)
    {
        let _ = create(
            client,
            json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": target}}),
        )
        .await;
    }
    let og_spec = match &install.targets {
        Targets::All => json!({}),
        _ => json!({"targetNamespaces": install.target_list()}),
    };
    create(client, json!({"apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": og_name, "namespace": ns, "annotations": {"olm.providedAPIs": format!("Widget.v1.{}", install.bundle.crd_group())}},
        "spec": og_spec})).await?;
    set_status(
        client,
        "operators.coreos.com/v1",
        "OperatorGroup",
        ns,
        &og_name,
        json!({"namespaces": install.target_list(), "lastUpdated": "2026-01-01T00:00:00Z"}),
    )
    .await?;

    // The CSV, annotated by its OperatorGroup.
    let manifests: Vec<Value> = install
        .bundle
        .manifests()
        .iter()
        .map(|m| serde_json::from_str(m).unwrap_or(Value::Null))
        .collect();
    let mut csv = without_nulls(manifests[0].clone());
    let targets = install.target_list().join(",");
    let og_annotations = json!({"olm.operatorGroup": og_name, "olm.operatorNamespace": ns, "olm.targetNamespaces": targets});
    csv["metadata"]["namespace"] = json!(ns);
    merge_map(&mut csv["metadata"]["annotations"], &og_annotations);
    csv["metadata"]["labels"] = json!({install.component_label(): ""});
    let csv = create(client, csv).await?;
    let csv_uid = csv.metadata.uid.clone().unwrap_or_default();
    set_status(client, "operators.coreos.com/v1alpha1", "ClusterServiceVersion", ns, &csv_name,
        json!({"phase": "Succeeded", "reason": "InstallSucceeded", "message": "install strategy completed with no errors",
               "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})).await?;
    // OLM copies the CSV into the namespaces the operator watches (here: each target, or
    // `default` for every namespace), labelled with where it came from.
    let copies: Vec<String> = match &install.targets {
        Targets::All => vec!["default".to_owned()],
        _ => install
            .target_list()
            .into_iter()
            .filter(|t| t != ns)
            .collect(),
    };
    for target in copies {
        let mut copy = csv.data.clone();
        copy["apiVersion"] = json!("operators.coreos.com/v1alpha1");
        copy["kind"] = json!("ClusterServiceVersion");
        copy["metadata"] = json!({"name": csv_name, "namespace": target,
            "labels": {"olm.copiedFrom": ns}, "annotations": csv.metadata.annotations});
        create(client, copy).await?;
        set_status(client, "operators.coreos.com/v1alpha1", "ClusterServiceVersion", &target, &csv_name,
            json!({"phase": "Succeeded", "reason": "Copied", "message": format!("The operator is running in {ns} but is managing this namespace"),
                   "lastUpdateTime": "2026-01-01T00:00:00Z", "lastTransitionTime": "2026-01-01T00:00:00Z"})).await?;
    }
    let owner = json!([{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "name": csv_name, "uid": csv_uid, "blockOwnerDeletion": false, "controller": false}]);

    // The Subscription and the InstallPlan that installed the CSV.
    let mut sub_spec = json!({"name": package, "channel": "stable", "source": "pom-e2e-operators",
        "sourceNamespace": "openshift-marketplace", "installPlanApproval": install.approval});
    if let Some(config) = &install.config {
        sub_spec["config"] = config.clone();
    }
    let sub = create(client, json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": package, "namespace": ns, "labels": {install.component_label(): ""}}, "spec": sub_spec})).await?;
    let plan_name = format!("install-{}", &csv_uid.get(..5).unwrap_or("abcde"));
    create(client, json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan",
        "metadata": {"name": plan_name, "namespace": ns, "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "Subscription", "name": package, "uid": sub.metadata.uid.clone().unwrap_or_default(),
            "blockOwnerDeletion": false, "controller": false}]},
        "spec": {"clusterServiceVersionNames": [csv_name], "approval": install.approval, "approved": true, "generation": 1}})).await?;
    set_status(client, "operators.coreos.com/v1alpha1", "Subscription", ns, &package,
        json!({"installedCSV": csv_name, "currentCSV": csv_name, "state": "AtLatestKnown",
               "installPlanRef": {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "InstallPlan", "name": plan_name, "namespace": ns},
               "lastUpdated": "2026-01-01T00:00:00Z"})).await?;

    // The CRDs the bundle ships.
    for crd in manifests
        .iter()
        .skip(1)
        .filter(|m| m["kind"] == "CustomResourceDefinition")
    {
        let mut crd = crd.clone();
        crd["metadata"]["labels"] = json!({install.component_label(): "", "olm.managed": "true"});
        create(client, crd).await?;
    }

    // The install strategy's objects.
    let strategy = &csv_spec(&manifests[0])["install"]["spec"];
    let labels = Value::Object(install.owner_labels());
    let mut managed = install.owner_labels();
    managed.insert("olm.managed".into(), json!("true"));
    let managed = Value::Object(managed);
    let mut accounts: Vec<String> = Vec::new();
    for (i, perm) in strategy["permissions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let sa = perm["serviceAccountName"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let role = format!("{csv_name}-{}", generated(&csv_uid, i, "role"));
        create(client, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": role, "namespace": ns, "labels": labels, "ownerReferences": owner}, "rules": perm["rules"]})).await?;
        create(
            client,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": role, "namespace": ns, "labels": labels, "ownerReferences": owner},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]}),
        )
        .await?;
        accounts.push(sa);
    }
    for (i, perm) in strategy["clusterPermissions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let sa = perm["serviceAccountName"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        // Cluster-scoped: a generated name and the owner labels, no owner reference.
        let role = format!("{csv_name}-{}", generated(&csv_uid, i, "clusterrole"));
        create(
            client,
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": role, "labels": labels}, "rules": perm["rules"]}),
        )
        .await?;
        create(client, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": role, "labels": labels},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "ServiceAccount", "name": sa, "namespace": ns}]})).await?;
        accounts.push(sa);
    }
    accounts.sort();
    accounts.dedup();
    for sa in &accounts {
        create(
            client,
            json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": sa, "namespace": ns, "labels": labels, "ownerReferences": owner}}),
        )
        .await?;
    }
    let pod_annotations = {
        let mut a = csv_annotations(&manifests[0]);
        merge_map(&mut a, &og_annotations);
        a
    };
    // OLM's CA and one serving pair per Deployment serving webhooks (`certresources.go`).
    let webhooks: Vec<Value> = csv_spec(&manifests[0])["webhookdefinitions"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    let ca = if webhooks.is_empty() {
        None
    } else {
        Some(OlmCa::generate(install.ca_expires_in_days)?)
    };
    for (i, dep) in strategy["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
    {
        let mut spec = dep["spec"].clone();
        // OLM does not roll back: it keeps one old ReplicaSet (`pkg/controller/install`).
        spec["revisionHistoryLimit"] = json!(1);
        merge_map(
            &mut spec["template"]["metadata"]["annotations"],
            &pod_annotations,
        );
        let serves = webhooks.iter().any(|w| w["deploymentName"] == dep["name"]);
        if let (Some(ca), true) = (&ca, serves) {
            let service = format!("{}-service", dep["name"].as_str().unwrap_or_default());
            mount_serving_cert(&mut spec, &format!("{service}-cert"));
            merge_map(
                &mut spec["template"]["metadata"]["annotations"],
                &json!({OLM_CA_HASH: ca.hash()}),
            );
        }
        for container in spec["template"]["spec"]["containers"]
            .as_array_mut()
            .into_iter()
            .flatten()
        {
            let env = container["env"].as_array().cloned().unwrap_or_default();
            let mut env: Vec<Value> = env
                .into_iter()
                .filter(|e| e["name"] != "OPERATOR_CONDITION_NAME")
                .collect();
            env.push(json!({"name": "OPERATOR_CONDITION_NAME", "value": csv_name}));
            container["env"] = Value::Array(env);
        }
        let mut dep_labels = managed.clone();
        merge_map(&mut dep_labels, &dep["label"]);
        dep_labels["olm.deployment-spec-hash"] = json!(generated(&csv_uid, i, "deployment"));
        create(client, json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": dep["name"], "namespace": ns, "labels": dep_labels, "ownerReferences": owner},
            "spec": spec})).await?;
    }

    // Webhooks (`certresources.go`, `webhook.go`): per serving Deployment a Service, the
    // serving pair OLM's CA signs for it in a Secret (annotated with the CA's hash, the CA in
    // `olmCAKey`), a Role and RoleBinding letting the Deployment's ServiceAccount read it;
    // each admission webhook's configuration under a generated name, trusting OLM's CA; each
    // conversion webhook on its CRDs.
    for (i, hook) in webhooks.iter().enumerate() {
        let Some(ca) = &ca else { break };
        let deployment = hook["deploymentName"].as_str().unwrap_or_default();
        let service = format!("{deployment}-service");
        let secret = format!("{service}-cert");
        let _ = create(client, json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": service, "namespace": ns, "labels": managed, "ownerReferences": owner},
            "spec": {"selector": dep_selector(strategy, deployment), "ports": [{"name": hook["containerPort"].to_string(), "port": hook["containerPort"], "targetPort": hook["targetPort"]}]}})).await;
        if i == 0
            || webhooks[..i]
                .iter()
                .all(|w| w["deploymentName"] != hook["deploymentName"])
        {
            let (cert, key) = ca.serving(&service, ns)?;
            create(client, json!({"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/tls",
                "metadata": {"name": secret, "namespace": ns, "labels": {"olm.managed": "true"}, "ownerReferences": owner,
                             "annotations": {OLM_CA_HASH: ca.hash()}},
                "stringData": {"tls.crt": cert, "tls.key": key, "olmCAKey": ca.pem}})).await?;
            let account = strategy["deployments"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|d| d["name"] == deployment)
                .and_then(|d| d["spec"]["template"]["spec"]["serviceAccountName"].as_str())
                .unwrap_or("default")
                .to_owned();
            create(client, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": secret, "namespace": ns, "labels": {"olm.managed": "true"}, "ownerReferences": owner},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"], "resourceNames": [secret]}]})).await?;
            create(client, json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": secret, "namespace": ns, "labels": {"olm.managed": "true"}, "ownerReferences": owner},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": secret},
                "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": ns}]})).await?;
        }
        let service_ref = json!({"namespace": ns, "name": service, "path": hook["webhookPath"], "port": hook["containerPort"]});
        if hook["type"] == "ConversionWebhook" {
            for crd in hook["conversionCRDs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
            {
                patch_crd_conversion(
                    client,
                    crd,
                    json!({"strategy": "Webhook", "webhook": {
                    "clientConfig": {"service": service_ref, "caBundle": ca.bundle()},
                    "conversionReviewVersions": hook["admissionReviewVersions"]}}),
                )
                .await?;
            }
            continue;
        }
        let kind = match hook["type"].as_str() {
            Some("ValidatingAdmissionWebhook") => "ValidatingWebhookConfiguration",
            Some("MutatingAdmissionWebhook") => "MutatingWebhookConfiguration",
            _ => continue,
        };
        let generate = hook["generateName"].as_str().unwrap_or_default();
        let mut config_labels = labels.clone();
        config_labels["olm.webhook-description-generate-name"] = json!(generate);
        create(client, json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": kind,
            "metadata": {"name": format!("{generate}-{}", generated(&csv_uid, i, "webhook")), "labels": config_labels},
            "webhooks": [{"name": generate, "admissionReviewVersions": hook["admissionReviewVersions"],
                "sideEffects": hook["sideEffects"], "failurePolicy": hook["failurePolicy"], "rules": hook["rules"],
                "clientConfig": {"service": service_ref, "caBundle": ca.bundle()}}]})).await?;
    }
    Ok(())
}

/// OLM's annotation of its CA's hash, on the serving Secret and the pod template.
pub const OLM_CA_HASH: &str = "olmcahash";

/// The CA OLM generates for a CSV's webhooks (`certresources.go`: organization "Red Hat,
/// Inc.", serving pairs for `<service>.<namespace>` and `<service>.<namespace>.svc`).
struct OlmCa {
    pem: String,
    issuer: rcgen::Issuer<'static, rcgen::KeyPair>,
}

impl OlmCa {
    fn generate(expires_in_days: Option<i64>) -> Result<Self, HarnessError> {
        let err = |e: rcgen::Error| HarnessError::Other(format!("OLM's webhook CA: {e}"));
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).map_err(err)?;
        if let Some(days) = expires_in_days {
            let end = jiff::Timestamp::now()
                .checked_add(jiff::SignedDuration::from_hours(24 * days))
                .map_err(|e| HarnessError::Other(format!("OLM's webhook CA: {e}")))?
                .to_zoned(jiff::tz::TimeZone::UTC)
                .date();
            let month = u8::try_from(end.month()).unwrap_or(1);
            let day = u8::try_from(end.day()).unwrap_or(1);
            params.not_after = rcgen::date_time_ymd(i32::from(end.year()), month, day);
        }
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Red Hat, Inc.");
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let cert = params.self_signed(&key).map_err(err)?;
        Ok(Self {
            pem: cert.pem(),
            issuer: rcgen::Issuer::new(params, key),
        })
    }

    /// The SHA-256 of the CA's PEM, hex, as OLM annotates it.
    fn hash(&self) -> String {
        use sha2::Digest as _;
        hex::encode(sha2::Sha256::digest(self.pem.as_bytes()))
    }

    /// The caBundle OLM sets: the CA's PEM, base64 as the API carries bytes.
    fn bundle(&self) -> String {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(self.pem.as_bytes())
    }

    /// A serving pair for `service` in `namespace`: (certificate, key), PEM.
    fn serving(&self, service: &str, namespace: &str) -> Result<(String, String), HarnessError> {
        let err = |e: rcgen::Error| HarnessError::Other(format!("OLM's serving certificate: {e}"));
        let mut params = rcgen::CertificateParams::new(vec![
            format!("{service}.{namespace}"),
            format!("{service}.{namespace}.svc"),
        ])
        .map_err(err)?;
        params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let key = rcgen::KeyPair::generate().map_err(err)?;
        let cert = params.signed_by(&key, &self.issuer).map_err(err)?;
        Ok((cert.pem(), key.serialize_pem()))
    }
}

/// OLM's `AddDefaultCertVolumeAndVolumeMounts`: the serving Secret as the volumes
/// `apiservice-cert` (as `apiserver.crt`/`.key`) and `webhook-cert` (as `tls.crt`/`.key`),
/// replacing volumes of those names, mounted in every container (a mount of the same name
/// kept, one at the same path replaced).
fn mount_serving_cert(spec: &mut Value, secret: &str) {
    let mounts = [
        (
            "apiservice-cert",
            "/apiserver.local.config/certificates",
            ["apiserver.crt", "apiserver.key"],
        ),
        (
            "webhook-cert",
            "/tmp/k8s-webhook-server/serving-certs",
            ["tls.crt", "tls.key"],
        ),
    ];
    let pod = &mut spec["template"]["spec"];
    for (name, path, [crt, key]) in mounts {
        let volume = json!({"name": name, "secret": {"secretName": secret,
            "items": [{"key": "tls.crt", "path": crt}, {"key": "tls.key", "path": key}]}});
        if !pod["volumes"].is_array() {
            pod["volumes"] = json!([]);
        }
        if let Some(volumes) = pod["volumes"].as_array_mut() {
            match volumes.iter_mut().find(|v| v["name"] == name) {
                Some(v) => *v = volume,
                None => volumes.push(volume),
            }
        }
        for container in pod["containers"].as_array_mut().into_iter().flatten() {
            if !container["volumeMounts"].is_array() {
                container["volumeMounts"] = json!([]);
            }
            let mount = json!({"name": name, "mountPath": path});
            if let Some(list) = container["volumeMounts"].as_array_mut() {
                if list.iter().any(|m| m["name"] == name) {
                    continue;
                }
                match list.iter_mut().find(|m| m["mountPath"] == path) {
                    Some(m) => *m = mount,
                    None => list.push(mount),
                }
            }
        }
    }
}

/// Sets `spec.conversion` of CRD `name`, as OLM's `createOrUpdateConversionWebhook` does.
async fn patch_crd_conversion(
    client: &Client,
    name: &str,
    conversion: Value,
) -> Result<(), HarnessError> {
    let api = api_for(
        client,
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        None,
    );
    api.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"conversion": conversion}})),
    )
    .await
    .map_err(|e| {
        HarnessError::Other(format!("setting the conversion webhook of CRD {name}: {e}"))
    })?;
    Ok(())
}

fn csv_spec(csv: &Value) -> &Value {
    &csv["spec"]
}

fn csv_annotations(csv: &Value) -> Value {
    match &csv["metadata"]["annotations"] {
        Value::Object(map) => Value::Object(map.clone()),
        _ => json!({}),
    }
}

fn dep_selector(strategy: &Value, deployment: &str) -> Value {
    strategy["deployments"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|d| d["name"] == deployment)
        .map_or_else(
            || json!({}),
            |d| d["spec"]["selector"]["matchLabels"].clone(),
        )
}

/// A short name suffix derived from the CSV's uid, as OLM's generated names are random.
fn generated(uid: &str, index: usize, what: &str) -> String {
    use sha2::Digest as _;
    let digest = hex::encode(sha2::Sha256::digest(format!("{uid}/{what}/{index}")));
    digest.get(..5).unwrap_or("00000").to_owned()
}

/// Sets every key of `extra` (an object) on `target` (made an object if it is not).
fn merge_map(target: &mut Value, extra: &Value) {
    if !target.is_object() {
        *target = json!({});
    }
    if let (Some(t), Some(e)) = (target.as_object_mut(), extra.as_object()) {
        for (k, v) in e {
            t.insert(k.clone(), v.clone());
        }
    }
}

/// `value` without the keys whose value is null (the fixtures write absent fields as null).
fn without_nulls(value: Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.into_iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k, without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(without_nulls).collect()),
        other => other,
    }
}

fn api_for(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: Option<&str>,
) -> Api<DynamicObject> {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, kind));
    match namespace {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

/// Creates `object` (its apiVersion, kind and namespace say where).
async fn create(client: &Client, object: Value) -> Result<DynamicObject, HarnessError> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default().to_owned();
    let kind = object["kind"].as_str().unwrap_or_default().to_owned();
    let namespace = object["metadata"]["namespace"].as_str().map(str::to_owned);
    let name = object["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    let dynamic: DynamicObject = serde_json::from_value(object)
        .map_err(|e| HarnessError::Other(format!("{kind} {name}: {e}")))?;
    api_for(client, &api_version, &kind, namespace.as_deref())
        .create(&PostParams::default(), &dynamic)
        .await
        .map_err(HarnessError::kube(format!("creating {kind} {name}")))
}

/// Writes `status` through the status subresource, as OLM's controllers do.
async fn set_status(
    client: &Client,
    api_version: &str,
    kind: &str,
    namespace: &str,
    name: &str,
    status: Value,
) -> Result<(), HarnessError> {
    api_for(client, api_version, kind, Some(namespace))
        .patch_status(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .map(|_| ())
        .map_err(HarnessError::kube(format!(
            "writing the status of {kind} {namespace}/{name}"
        )))
}

/// Every object of the kinds OLM v0 and POM touch, by `kind namespace/name` → resourceVersion:
/// two snapshots equal mean nothing was written in between.
///
/// # Errors
/// A kind that cannot be listed.
pub async fn snapshot(
    client: &Client,
) -> Result<std::collections::BTreeMap<String, String>, HarnessError> {
    const KINDS: &[(&str, &str)] = &[
        ("v1", "Namespace"),
        ("v1", "ServiceAccount"),
        ("v1", "Service"),
        ("v1", "Secret"),
        ("v1", "ConfigMap"),
        ("apps/v1", "Deployment"),
        ("rbac.authorization.k8s.io/v1", "Role"),
        ("rbac.authorization.k8s.io/v1", "RoleBinding"),
        ("rbac.authorization.k8s.io/v1", "ClusterRole"),
        ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"),
        (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
        ),
        (
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
        ),
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition"),
        ("operators.coreos.com/v1alpha1", "Subscription"),
        ("operators.coreos.com/v1alpha1", "ClusterServiceVersion"),
        ("operators.coreos.com/v1alpha1", "InstallPlan"),
        ("operators.coreos.com/v1", "OperatorGroup"),
        ("platform.openshift.io/v1alpha1", "PlatformOperator"),
        ("platform.openshift.io/v1alpha1", "Catalog"),
    ];
    let mut out = std::collections::BTreeMap::new();
    for (api_version, kind) in KINDS {
        let list = api_for(client, api_version, kind, None)
            .list(&Default::default())
            .await
            .map_err(HarnessError::kube(format!("listing {kind}s")))?;
        for object in list.items {
            out.insert(
                format!(
                    "{kind} {}/{}",
                    object.namespace().unwrap_or_default(),
                    object.name_any()
                ),
                object.resource_version().unwrap_or_default(),
            );
        }
    }
    Ok(out)
}
