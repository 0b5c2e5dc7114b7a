//! Issue 33: hostile registry+v1 bundles whose CSV asks, cluster-wide, for one escalation path
//! each (workload creation, Secret writes, ephemeral containers, operator installation, OpenShift
//! identities, namespace relabelling, PersistentVolumes, Endpoints). Each is held for exactly
//! the consent its path's class needs and renders with it; the same grant in the install
//! namespace (`permissions`), or read-only cluster-wide, needs none, but for the paths a
//! namespace's own objects open (OLM v0's namespaced kinds, relabelling that namespace).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use pom_render::{
    BundleFiles, ContentRule, Lift, PowerClass, RenderError, RenderOptions, RenderedBundle, render,
};

const REGISTRY: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n";
const INSTALL_NS: &str = "widgets";

const ADMIN: PowerClass = PowerClass::ClusterAdminEquivalent;
const PRIVILEGED: PowerClass = PowerClass::PrivilegedWorkloads;
const PLATFORM: PowerClass = PowerClass::PlatformConfig;

/// (API group, resource, verb, the class the path puts its holder in).
const PATHS: &[(&str, &str, &str, PowerClass)] = &[
    ("", "pods", "create", ADMIN),
    ("", "replicationcontrollers", "create", ADMIN),
    ("apps", "deployments", "create", ADMIN),
    ("apps", "replicasets", "create", ADMIN),
    ("apps", "statefulsets", "create", ADMIN),
    ("apps", "daemonsets", "create", ADMIN),
    ("batch", "jobs", "create", ADMIN),
    ("batch", "cronjobs", "create", ADMIN),
    ("apps.openshift.io", "deploymentconfigs", "create", ADMIN),
    ("", "secrets", "create", ADMIN),
    ("", "secrets", "patch", ADMIN),
    ("", "pods/ephemeralcontainers", "patch", ADMIN),
    (
        "platform.openshift.io",
        "platformoperators",
        "create",
        ADMIN,
    ),
    ("platform.openshift.io", "catalogs", "create", ADMIN),
    ("operators.coreos.com", "subscriptions", "create", ADMIN),
    ("operators.coreos.com", "installplans", "patch", ADMIN),
    (
        "operators.coreos.com",
        "clusterserviceversions",
        "create",
        ADMIN,
    ),
    ("operators.coreos.com", "operatorgroups", "create", ADMIN),
    ("operators.coreos.com", "catalogsources", "create", ADMIN),
    (
        "olm.operatorframework.io",
        "clusterextensions",
        "create",
        ADMIN,
    ),
    (
        "olm.operatorframework.io",
        "clustercatalogs",
        "create",
        ADMIN,
    ),
    ("oauth.openshift.io", "oauthaccesstokens", "create", ADMIN),
    ("oauth.openshift.io", "oauthclients", "create", ADMIN),
    ("user.openshift.io", "groups", "update", ADMIN),
    ("user.openshift.io", "identities", "create", ADMIN),
    ("", "namespaces", "patch", PRIVILEGED),
    ("", "persistentvolumes", "create", PRIVILEGED),
    ("", "endpoints", "create", PLATFORM),
    ("discovery.k8s.io", "endpointslices", "patch", PLATFORM),
];

/// The paths of `PATHS` that open in the install namespace too: OLM v0 installs an operator,
/// its cluster-wide RBAC included, from a Subscription, InstallPlan, ClusterServiceVersion or
/// OperatorGroup of any namespace; a Role may relabel its own namespace (its Pod Security level).
const ALSO_IN_THE_INSTALL_NAMESPACE: &[(&str, &str)] = &[
    ("operators.coreos.com", "subscriptions"),
    ("operators.coreos.com", "installplans"),
    ("operators.coreos.com", "clusterserviceversions"),
    ("operators.coreos.com", "operatorgroups"),
    ("", "namespaces"),
];

/// A registry+v1 bundle whose CSV grants `rule` to its operator's ServiceAccount, cluster-wide
/// (`clusterPermissions`) or where it watches (`permissions`: every namespace in AllNamespaces
/// mode, as OLM renders it; the install namespace in OwnNamespace mode).
fn bundle(permissions: &str, rule: &str) -> BundleFiles {
    let csv = format!(
        "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata: {{name: op.v1}}\nspec:\n  installModes: [{{type: AllNamespaces, supported: true}}, {{type: OwnNamespace, supported: true}}]\n  install:\n    strategy: deployment\n    spec:\n      {permissions}:\n      - serviceAccountName: op\n        rules: [{rule}]\n      deployments:\n      - name: op\n        spec:\n          selector: {{matchLabels: {{a: b}}}}\n          template:\n            metadata: {{labels: {{a: b}}}}\n            spec:\n              serviceAccountName: op\n              containers: [{{name: m, image: i}}]\n"
    );
    BundleFiles::new(
        [
            (
                "metadata/annotations.yaml".to_owned(),
                REGISTRY.as_bytes().to_vec(),
            ),
            ("manifests/csv.yaml".to_owned(), csv.into_bytes()),
        ]
        .into_iter()
        .collect::<BTreeMap<_, _>>(),
    )
}

fn rule(group: &str, resource: &str, verbs: &str) -> String {
    format!("{{apiGroups: ['{group}'], resources: ['{resource}'], verbs: [{verbs}]}}")
}

fn consent(classes: &[PowerClass]) -> RenderOptions {
    RenderOptions {
        consent: classes.iter().copied().collect(),
        ..RenderOptions::new(INSTALL_NS)
    }
}

fn classes(bundle: &RenderedBundle) -> BTreeSet<PowerClass> {
    bundle.powers.classes()
}

#[test]
fn each_cluster_wide_escalation_path_needs_exactly_its_consent() {
    for (group, resource, verb, class) in PATHS {
        let files = bundle("clusterPermissions", &rule(group, resource, verb));
        let what = format!("{verb} {resource}.{group}");
        let refused = render(&files, &consent(&[])).expect_err(&what);
        let RenderError::ContentPolicy(violations) = &refused else {
            panic!("{what}: expected a content-policy refusal, got {refused}");
        };
        assert!(
            violations
                .0
                .iter()
                .all(|v| v.rule == ContentRule::PowerNotConsented),
            "{what}: {refused}"
        );
        assert_eq!(
            violations.lifts(),
            BTreeSet::from([&Lift::Consent(*class)]),
            "{what}: {refused}"
        );
        assert!(
            refused
                .to_string()
                .contains(&format!("spec.consent.{}", class.consent_field())),
            "{what}: {refused}"
        );
        // Consent to every other class does not lift it.
        let others: Vec<PowerClass> = PowerClass::ALL.into_iter().filter(|c| c != class).collect();
        assert!(render(&files, &consent(&others)).is_err(), "{what}");
        let rendered = render(&files, &consent(&[*class])).expect(&what);
        assert_eq!(classes(&rendered), BTreeSet::from([*class]), "{what}");
        assert_eq!(rendered.consents_used, BTreeSet::from([*class]), "{what}");
        // The evidence names the path's source.
        assert!(
            rendered
                .powers
                .of(*class)
                .all(|p| p.detail.contains(" [") && p.detail.ends_with(']')),
            "{what}: {:?}",
            rendered.powers
        );
    }
}

#[test]
fn the_same_grant_in_the_install_namespace_or_read_only_needs_no_consent() {
    for (group, resource, verb, class) in PATHS {
        let what = format!("{verb} {resource}.{group}");
        let own_namespace = RenderOptions {
            watch_namespace: Some(INSTALL_NS.to_owned()),
            ..consent(&[])
        };
        let files = bundle("permissions", &rule(group, resource, verb));
        if ALSO_IN_THE_INSTALL_NAMESPACE.contains(&(*group, *resource)) {
            let refused = render(&files, &own_namespace).expect_err(&what);
            let RenderError::ContentPolicy(violations) = &refused else {
                panic!("{what}: expected a content-policy refusal, got {refused}");
            };
            assert_eq!(
                violations.lifts(),
                BTreeSet::from([&Lift::Consent(*class)]),
                "{what} in a Role: {refused}"
            );
            let rendered = render(
                &files,
                &RenderOptions {
                    watch_namespace: Some(INSTALL_NS.to_owned()),
                    ..consent(&[*class])
                },
            )
            .expect(&what);
            assert_eq!(
                classes(&rendered),
                BTreeSet::from([*class]),
                "{what} in a Role"
            );
            continue;
        }
        let namespaced = render(&files, &own_namespace).expect(&what);
        assert!(
            namespaced
                .objects
                .iter()
                .any(|o| o["kind"] == "Role" && o["metadata"]["namespace"] == INSTALL_NS),
            "{what}: rendered as a Role of the install namespace"
        );
        assert_eq!(classes(&namespaced), BTreeSet::new(), "{what} in a Role");
        // In AllNamespaces mode `permissions` apply in every namespace, as OLM renders them.
        let everywhere = render(
            &bundle("permissions", &rule(group, resource, verb)),
            &consent(&[]),
        );
        assert!(
            matches!(everywhere, Err(RenderError::ContentPolicy(_))),
            "{what} in AllNamespaces mode"
        );
        let read = render(
            &bundle(
                "clusterPermissions",
                &rule(group, resource, "get, list, watch"),
            ),
            &consent(&[]),
        )
        .expect(&what);
        assert!(
            classes(&read)
                .iter()
                .all(|c| *c == PowerClass::SecretsClusterWide),
            "{what} read-only: {:?}",
            read.powers
        );
    }
}
