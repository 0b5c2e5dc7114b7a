//! Rendering real bundles from public repositories (../shared/testdata/real), read in place.
//! For each bundle the test states whether POM must render or refuse it, and why.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

use pom_render::{
    BundleFiles, BundleFormat, ContentRule, InstallMode, Lift, PowerClass, RenderError,
    RenderOptions, render,
};
use serde_json::json;

/// A bundle under `../shared/testdata/real`; `None` (skip, said on stderr) when the shared data
/// is absent outside CI, a failure in CI (see `shared_support`).
fn load(relative: &str) -> Option<BundleFiles> {
    let dir = shared_support::shared_dir("real")?.join(relative);
    Some(BundleFiles::load_dir(&dir).unwrap())
}

fn community(package_and_version: &str) -> Option<BundleFiles> {
    load(&format!(
        "redhat-openshift-ecosystem__community-operators-prod/operators/{package_and_version}"
    ))
}

fn opts() -> RenderOptions {
    RenderOptions {
        operator_condition: true,
        ..RenderOptions::new("pom-test")
    }
}

/// The power classes nfs-provisioner-operator's ClusterRole holds, each by an escalation path
/// (§6): it writes SecurityContextConstraints (cluster-admin equivalent), PersistentVolumes
/// (hostPath: privileged workloads) and Endpoints in every namespace (platform configuration,
/// CVE-2021-25740).
const NFS_CLASSES: [PowerClass; 3] = [
    PowerClass::ClusterAdminEquivalent,
    PowerClass::PrivilegedWorkloads,
    PowerClass::PlatformConfig,
];

/// What nfs-provisioner-operator needs: the admin's consent to each class it holds.
fn nfs_opts() -> RenderOptions {
    let mut options = opts();
    options.consent.extend(NFS_CLASSES);
    options
}

/// nfs-provisioner-operator 0.0.3 supports AllNamespaces, has no webhooks or APIServices and
/// only v1 APIs: it renders once the admin consents to the power classes its ClusterRole declares (SCC,
/// PersistentVolume and Endpoints writes). Its permissions name the `default` ServiceAccount, which is never
/// generated (the namespace has it), and it ships the same ClusterRole twice (one file is
/// misnamed v1beta1 but holds v1): identical duplicates collapse into one object.
#[test]
fn nfs_provisioner_renders() {
    let Some(files) = community("nfs-provisioner-operator/0.0.3") else {
        return;
    };
    let refused = render(&files, &opts()).unwrap_err();
    let RenderError::ContentPolicy(violations) = &refused else {
        panic!("expected a content-policy refusal, got {refused}");
    };
    assert!(
        violations
            .0
            .iter()
            .all(|v| v.rule == ContentRule::PowerNotConsented),
        "{refused}"
    );
    assert!(
        refused
            .to_string()
            .contains("spec.consent.clusterAdminEquivalent"),
        "{refused}"
    );
    let bundle = render(&files, &nfs_opts()).unwrap();
    assert_eq!(
        bundle.powers.classes(),
        std::collections::BTreeSet::from(NFS_CLASSES)
    );
    assert_eq!(
        bundle.consents_used,
        std::collections::BTreeSet::from(NFS_CLASSES)
    );
    assert_eq!(bundle.format, BundleFormat::RegistryV1);
    assert_eq!(
        bundle.csv_name.as_deref(),
        Some("nfs-provisioner-operator.v0.0.3")
    );
    assert_eq!(
        bundle.package_name.as_deref(),
        Some("nfs-provisioner-operator")
    );
    assert_eq!(bundle.crds, vec!["nfsprovisioners.cache.jhouse.com"]);
    assert_eq!(
        bundle.deployments,
        vec!["nfs-provisioner-operator-controller-manager"]
    );
    assert_eq!(bundle.service_accounts, vec!["default"]);
    assert!(
        !bundle.objects.iter().any(|o| o["kind"] == "ServiceAccount"),
        "default SA must not be generated"
    );
    let metrics_readers = bundle
        .objects
        .iter()
        .filter(|o| o["metadata"]["name"] == "nfs-provisioner-operator-metrics-reader")
        .count();
    assert_eq!(metrics_readers, 1);
    // Every namespaced object is in the install namespace.
    for object in &bundle.objects {
        let kind = object["kind"].as_str().unwrap();
        if ["Service", "Role", "RoleBinding", "Deployment"].contains(&kind) {
            assert_eq!(object["metadata"]["namespace"], "pom-test", "{kind}");
        }
    }
    // The maxOpenShiftVersion from the CSV annotation travels with the bundle.
    assert_eq!(
        bundle.property_values("olm.maxOpenShiftVersion"),
        vec![&json!("4.9")]
    );
    // Both containers of the manager get the OperatorCondition name.
    let deployment = bundle
        .objects
        .iter()
        .find(|o| o["kind"] == "Deployment")
        .unwrap();
    for container in deployment["spec"]["template"]["spec"]["containers"]
        .as_array()
        .unwrap()
    {
        assert!(
            container["env"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "OPERATOR_CONDITION_NAME")
        );
    }
}

/// dbaas-operator 0.5.0 (AllNamespaces) defines conversion webhooks: its CRDs convert through
/// the bundle's own Service, whose certificate is mounted into the serving Deployment.
#[test]
fn dbaas_renders_its_conversion_webhooks() {
    let Some(files) = community("dbaas-operator/0.5.0") else {
        return;
    };
    // Its bindings of users, groups and foreign accounts are refused whatever the admin says
    // (tested elsewhere); without them, the rest renders with the consent it names.
    let kept: std::collections::BTreeMap<String, Vec<u8>> = files
        .files
        .iter()
        .filter(|(path, _)| !path.contains("rolebinding"))
        .map(|(path, bytes)| (path.clone(), bytes.clone()))
        .collect();
    let files = BundleFiles::new(kept);
    let bundle = match render(&files, &opts()) {
        Ok(bundle) => bundle,
        Err(RenderError::ContentPolicy(violations)) if violations.unliftable() == 0 => {
            let mut lifted = opts();
            for lift in violations.lifts() {
                match lift {
                    Lift::Consent(class) => {
                        lifted.consent.insert(*class);
                    }
                    Lift::Exception(e) => lifted.exceptions.push(e.clone()),
                    Lift::Omit(o) => lifted.omit.push(o.clone()),
                    Lift::Webhook(w) => {
                        lifted.webhook_consent.insert(w.clone());
                    }
                }
            }
            render(&files, &lifted).unwrap()
        }
        Err(err) => panic!("{err}"),
    };
    assert_eq!(
        bundle.webhook_services.len(),
        1,
        "{:?}",
        bundle.webhook_services
    );
    let service = &bundle.webhook_services[0];
    let crd = bundle
        .objects
        .iter()
        .find(|o| {
            o["kind"] == "CustomResourceDefinition"
                && o["metadata"]["name"] == "dbaasconnections.dbaas.redhat.com"
        })
        .unwrap();
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["name"],
        service.name.as_str()
    );
    assert_eq!(
        crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["namespace"],
        "pom-test"
    );
}

/// gitlab-operator-kubernetes 1.6.0 supports only OwnNamespace, which POM renders by default,
/// with its admission webhooks limited to that namespace.
#[test]
fn gitlab_renders_own_namespace_with_its_webhooks() {
    let Some(files) = community("gitlab-operator-kubernetes/1.6.0") else {
        return;
    };
    match render(&files, &opts()) {
        Ok(bundle) => {
            assert_eq!(bundle.install_mode, Some(InstallMode::OwnNamespace));
            assert!(!bundle.webhook_services.is_empty());
        }
        // Whatever else its refusal names, it is neither the webhooks nor the mode.
        Err(RenderError::ContentPolicy(_)) => {}
        Err(err) => panic!("{err}"),
    }
    // Asked for AllNamespaces' opposite explicitly, the mode is judged first.
    let single = RenderOptions {
        watch_namespace: Some("elsewhere".into()),
        ..opts()
    };
    let err = render(&files, &single).unwrap_err();
    assert!(
        matches!(&err, RenderError::InstallModeNotSupported { supported, .. } if supported == &["OwnNamespace"]),
        "{err}"
    );
}

/// infinispan 2.1.0 supports AllNamespaces, but its CRDs are apiextensions.k8s.io/v1beta1,
/// removed in Kubernetes 1.22: no cluster POM supports could accept them, so it is refused
/// before anything is applied.
#[test]
fn infinispan_is_refused_for_removed_crd_api() {
    let Some(files) = community("infinispan/2.1.0") else {
        return;
    };
    let err = render(&files, &opts()).unwrap_err();
    assert!(
        matches!(&err, RenderError::RemovedApiVersion { api_version, object, .. }
            if api_version == "apiextensions.k8s.io/v1beta1" && object == "CustomResourceDefinition \"backups.infinispan.org\""),
        "{err}"
    );
    assert!(err.to_string().contains("apiextensions.k8s.io/v1"));
}

/// rukpak's deliberately invalid registry+v1 bundle: its CSV supports only MultiNamespace (and
/// has no install strategy at all). Refused for the install mode.
#[test]
fn rukpak_invalid_registry_bundle_is_refused() {
    let Some(files) = load("operator-framework__rukpak/testdata/bundles/registry/invalid") else {
        return;
    };
    let err = render(&files, &opts()).unwrap_err();
    assert!(
        matches!(&err, RenderError::InstallModeNotSupported { supported, .. } if supported == &["MultiNamespace"]),
        "{err}"
    );
}

/// rukpak plain+v0 bundles (no annotations). The "provides" one is a CRD of OLM's own API group
/// (`operatorgroups.operators.coreos.com`), refused: a bundle may not claim a platform group;
/// "subdir" has a folder inside manifests/, refused as rukpak does; "invalid-crds-and-crs" and
/// "dependent" were built to fail at apply time on a cluster (missing CRDs), but each creates
/// a Namespace, which the content policy refuses first. "invalid-missing-crds" is OLM's own install manifest and contains
/// a ClusterServiceVersion (packageserver): without annotations a CSV makes a bundle registry+v1,
/// and that CSV owns an APIService, so it is refused.
#[test]
fn rukpak_plain_bundles() {
    let Some(provides) = load("operator-framework__rukpak/testdata/bundles/plain-v0/provides")
    else {
        return;
    };
    let err = render(&provides, &opts()).unwrap_err();
    assert!(
        matches!(&err, RenderError::ContentPolicy(v) if v.0.len() == 1 && v.0[0].rule == ContentRule::BuiltInApiGroup
            && v.0[0].object.contains("operatorgroups.operators.coreos.com")),
        "{err}"
    );

    let subdir = load("operator-framework__rukpak/testdata/bundles/plain-v0/subdir").unwrap();
    let err = render(&subdir, &opts()).unwrap_err();
    assert!(
        matches!(&err, RenderError::ManifestSubdirectory { path, .. } if path == "manifests/subdir/namespace-b.yaml")
    );

    let olm =
        load("operator-framework__rukpak/testdata/bundles/plain-v0/invalid-missing-crds").unwrap();
    let err = render(&olm, &opts()).unwrap_err();
    assert!(
        matches!(&err, RenderError::ApiServicesNotSupported { csv, .. } if csv == "packageserver"),
        "{err}"
    );

    // Both create a Namespace of their own: the content policy refuses that (POM creates the
    // install namespace itself), naming the object and the rule.
    for name in ["invalid-crds-and-crs", "dependent"] {
        let files = load(&format!(
            "operator-framework__rukpak/testdata/bundles/plain-v0/{name}"
        ))
        .unwrap();
        let err = render(&files, &opts()).unwrap_err();
        assert!(
            matches!(&err, RenderError::ContentPolicy(v) if v.0.iter().any(|v| v.rule == ContentRule::KindNeverAllowed && v.object.starts_with("Namespace "))),
            "{name}: {err}"
        );
    }
}

/// operator-controller's plain+v0 test bundle: one ConfigMap, put in the install namespace.
#[test]
fn operator_controller_plain_bundle() {
    let Some(files) =
        load("operator-framework__operator-controller/testdata/bundles/plain-v0/plain.v0.1.0")
    else {
        return;
    };
    let bundle = render(&files, &opts()).unwrap();
    assert_eq!(bundle.objects.len(), 1);
    assert_eq!(bundle.objects[0]["metadata"]["namespace"], "pom-test");
    assert!(
        bundle.objects[0]["data"]["game.properties"]
            .as_str()
            .unwrap()
            .contains("enemy.types")
    );
}

/// The same bundle given as `olm.bundle.object` manifests (as an FBC carries them) renders the
/// same objects as from its folder.
#[test]
fn objects_from_a_catalog_render_like_the_folder() {
    let Some(real) = shared_support::shared_dir("real") else {
        return;
    };
    let dir = real.join("redhat-openshift-ecosystem__community-operators-prod/operators/nfs-provisioner-operator/0.0.3");
    let mut manifests = Vec::new();
    for entry in std::fs::read_dir(dir.join("manifests")).unwrap() {
        manifests.push(std::fs::read_to_string(entry.unwrap().path()).unwrap());
    }
    manifests.sort();
    let from_objects = render(&BundleFiles::from_objects(manifests), &nfs_opts()).unwrap();
    let from_dir = render(&BundleFiles::load_dir(&dir).unwrap(), &nfs_opts()).unwrap();
    assert_eq!(from_objects.format, BundleFormat::RegistryV1);
    assert_eq!(from_objects.objects, from_dir.objects);
    assert_eq!(from_objects.package_name, None);
}
