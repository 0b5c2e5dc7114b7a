//! The content policy (issue 14, §6, §10): one small in-memory bundle per refusal class, the
//! rule and object it names, what an admin's exception can and cannot lift, and that the
//! exceptions used are reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;

use pom_resolver::render::{
    BundleFiles, ContentException, ContentRule, RenderError, RenderOptions, RenderedBundle, render,
};

const PLAIN: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n";
const REGISTRY: &str =
    "annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n";
const INSTALL_NS: &str = "widgets";

fn options(exceptions: &[(ContentRule, &str, &str)]) -> RenderOptions {
    RenderOptions {
        manager_namespace: Some("pom-system".into()),
        manager_service_account: Some("pom-manager".into()),
        exceptions: exceptions
            .iter()
            .map(|(rule, kind, name)| ContentException {
                rule: *rule,
                kind: (*kind).into(),
                name: (*name).into(),
            })
            .collect(),
        ..RenderOptions::new(INSTALL_NS)
    }
}

/// A plain+v0 bundle of one Deployment plus `manifest`.
fn plain(manifest: &str) -> BundleFiles {
    files(&[
        ("metadata/annotations.yaml", PLAIN),
        (
            "manifests/deployment.yaml",
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: op}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      containers: [{name: m, image: i}]\n",
        ),
        ("manifests/extra.yaml", manifest),
    ])
}

fn files(list: &[(&str, &str)]) -> BundleFiles {
    BundleFiles::new(
        list.iter()
            .map(|(p, c)| ((*p).to_owned(), c.as_bytes().to_vec()))
            .collect::<BTreeMap<_, _>>(),
    )
}

fn refusal(result: Result<RenderedBundle, RenderError>) -> (ContentRule, String, String) {
    match result {
        Err(RenderError::ContentPolicy(violation)) => {
            let message = RenderError::ContentPolicy(violation.clone()).to_string();
            (violation.rule, violation.object.clone(), message)
        }
        Err(other) => panic!("expected a content-policy refusal, got: {other}"),
        Ok(bundle) => panic!("expected a refusal, rendered {:?}", bundle.objects),
    }
}

const CLUSTER_ROLE_BINDING: &str =
    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: grab}\n";

/// Every refusal class: (manifest, rule, object named, words the message must have).
fn cases() -> Vec<(
    &'static str,
    String,
    ContentRule,
    &'static str,
    &'static str,
)> {
    vec![
        (
            "a Namespace",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: mine}\n".into(),
            ContentRule::KindNeverAllowed,
            "Namespace \"mine\"",
            "POM creates the install namespace itself",
        ),
        (
            "a validating webhook",
            "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingWebhookConfiguration\nmetadata: {name: hook}\nwebhooks: []\n".into(),
            ContentRule::KindNeverAllowed,
            "ValidatingWebhookConfiguration.admissionregistration.k8s.io \"hook\"",
            "may not create",
        ),
        (
            "an APIService",
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata: {name: v1.example.com}\n".into(),
            ContentRule::KindNeverAllowed,
            "APIService.apiregistration.k8s.io \"v1.example.com\"",
            "aggregated APIs",
        ),
        (
            "a kind outside the allowlist",
            "apiVersion: v1\nkind: Pod\nmetadata: {name: loose}\nspec: {containers: [{name: c, image: i}]}\n".into(),
            ContentRule::KindNotAllowed,
            "Pod \"loose\"",
            "is not a kind a plain+v0 bundle may contain",
        ),
        (
            "a Secret of another API group",
            "apiVersion: evil.example.com/v1\nkind: Secret\nmetadata: {name: s}\n".into(),
            ContentRule::KindNotAllowed,
            "Secret.evil.example.com \"s\"",
            "allowed:",
        ),
        (
            "an object in kube-system",
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: kube-system}\n".into(),
            ContentRule::ObjectOutsideInstallNamespace,
            "ConfigMap \"c\" in namespace \"kube-system\"",
            "must be in the install namespace \"widgets\"",
        ),
        (
            "a binding of cluster-admin",
            format!("{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}}\nsubjects: [{{kind: ServiceAccount, name: default, namespace: {INSTALL_NS}}}]\n"),
            ContentRule::PrivilegedRoleBinding,
            "ClusterRoleBinding.rbac.authorization.k8s.io \"grab\"",
            "built-in ClusterRole \"cluster-admin\"",
        ),
        (
            "a binding of edit",
            format!("apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: grab}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: edit}}\nsubjects: [{{kind: ServiceAccount, name: default, namespace: {INSTALL_NS}}}]\n"),
            ContentRule::PrivilegedRoleBinding,
            "RoleBinding.rbac.authorization.k8s.io \"grab\" in namespace \"widgets\"",
            "\"edit\"",
        ),
        (
            "a binding of system:authenticated",
            format!("{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}}]\n"),
            ContentRule::SystemSubjectBinding,
            "\"grab\"",
            "group \"system:authenticated\"",
        ),
        (
            "a binding of a system: user",
            format!("{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: User, name: 'system:serviceaccount:kube-system:default', apiGroup: rbac.authorization.k8s.io}}]\n"),
            ContentRule::SystemSubjectBinding,
            "\"grab\"",
            "user \"system:serviceaccount:kube-system:default\"",
        ),
        (
            "a binding of POM's own ServiceAccount",
            format!("{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: ServiceAccount, name: pom-manager, namespace: pom-system}}]\n"),
            ContentRule::ForeignServiceAccountBinding,
            "\"grab\"",
            "POM's own ServiceAccount",
        ),
        (
            "a binding of another namespace's ServiceAccount",
            format!("{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{{kind: ServiceAccount, name: builder, namespace: ci}}]\n"),
            ContentRule::ForeignServiceAccountBinding,
            "\"grab\"",
            "ServiceAccount \"builder\" in namespace \"ci\"",
        ),
        (
            "a role that can escalate",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: rbac-admin}\nrules:\n- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [get, escalate]}\n".into(),
            ContentRule::EscalatingRole,
            "ClusterRole.rbac.authorization.k8s.io \"rbac-admin\"",
            "escalate clusterroles.rbac.authorization.k8s.io",
        ),
        (
            "a role that can bind",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {name: binder}\nrules:\n- {apiGroups: ['*'], resources: [roles], verbs: [bind]}\n".into(),
            ContentRule::EscalatingRole,
            "Role.rbac.authorization.k8s.io \"binder\"",
            "bind roles",
        ),
        (
            "a role that can impersonate",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: actor}\nrules:\n- {apiGroups: [''], resources: [users, groups], verbs: [impersonate]}\n".into(),
            ContentRule::EscalatingRole,
            "\"actor\"",
            "impersonate users, impersonate groups",
        ),
        (
            "a role granting everything",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: god}\nrules:\n- {apiGroups: ['*'], resources: ['*'], verbs: ['*']}\n".into(),
            ContentRule::WildcardRole,
            "\"god\"",
            "every verb on every resource",
        ),
        (
            "an aggregating role",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: collector}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {x: y}}]\nrules: []\n".into(),
            ContentRule::AggregatingRole,
            "\"collector\"",
            "aggregationRule",
        ),
    ]
}

#[test]
fn every_refusal_class_names_the_object_and_the_rule() {
    for (what, manifest, rule, object, words) in cases() {
        let (got_rule, got_object, message) = refusal(render(&plain(&manifest), &options(&[])));
        assert_eq!(got_rule, rule, "{what}: {message}");
        assert!(
            got_object.contains(object),
            "{what}: {got_object} / {message}"
        );
        assert!(message.contains(words), "{what}: {message}");
        assert!(
            message.contains("manifests/extra.yaml"),
            "{what}: {message}"
        );
        if rule.exceptable() {
            assert!(
                message.contains(&format!("spec.contentExceptions: [{{rule: {rule}")),
                "{what}: {message}"
            );
        } else {
            assert!(
                message.contains("no exception can allow this"),
                "{what}: {message}"
            );
        }
    }
}

#[test]
fn an_exception_lifts_only_its_rule_for_only_its_object_and_is_reported() {
    for (what, manifest, rule, _, _) in cases() {
        let files = plain(&manifest);
        let (_, object, _) = refusal(render(&files, &options(&[])));
        let kind = object.split(['.', ' ']).next().unwrap().to_owned();
        let name = object.split('"').nth(1).unwrap().to_owned();
        let exception = [(rule, kind.as_str(), name.as_str())];
        let result = render(&files, &options(&exception));
        if rule.exceptable() {
            let bundle = result.unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(
                bundle.exceptions_used,
                vec![ContentException {
                    rule,
                    kind: kind.clone(),
                    name: name.clone()
                }],
                "{what}"
            );
            // The same rule for another name, or another rule for this object, lifts nothing.
            let other_name = [(rule, kind.as_str(), "someone-else")];
            assert_eq!(
                refusal(render(&files, &options(&other_name))).0,
                rule,
                "{what}"
            );
            let other_rule = ContentRule::ALL
                .into_iter()
                .find(|r| *r != rule && r.exceptable())
                .unwrap();
            let wrong = [(other_rule, kind.as_str(), name.as_str())];
            assert_eq!(refusal(render(&files, &options(&wrong))).0, rule, "{what}");
        } else {
            assert_eq!(
                refusal(result).0,
                rule,
                "{what}: an exception must not lift it"
            );
        }
    }
}

#[test]
fn a_bundle_without_findings_uses_no_exception() {
    let bundle = render(
        &plain("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"),
        &options(&[(ContentRule::WildcardRole, "ClusterRole", "god")]),
    )
    .unwrap();
    assert!(bundle.exceptions_used.is_empty());
}

#[test]
fn custom_resources_of_the_bundles_own_crds_are_allowed_in_plain_bundles() {
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Gadget, plural: gadgets, singular: gadget, listKind: GadgetList}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n";
    let cr = "apiVersion: example.com/v1\nkind: Gadget\nmetadata: {name: g}\n";
    let bundle = render(&plain(&format!("{crd}---\n{cr}")), &options(&[])).unwrap();
    assert!(bundle.objects.iter().any(|o| o["kind"] == "Gadget"));
    // Someone else's kind is not.
    let other = "apiVersion: other.example.com/v1\nkind: Gadget\nmetadata: {name: g}\n";
    assert_eq!(
        refusal(render(&plain(other), &options(&[]))).0,
        ContentRule::KindNotAllowed
    );
}

/// A registry+v1 CSV asking for cluster-admin-like permissions is refused through the objects
/// rendering generates from it (the ClusterRole named after the CSV's permissions).
#[test]
fn csv_permissions_go_through_the_same_policy() {
    let csv = "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata: {name: op.v1}\nspec:\n  installModes: [{type: AllNamespaces, supported: true}]\n  install:\n    strategy: deployment\n    spec:\n      clusterPermissions:\n      - serviceAccountName: op\n        rules: [{apiGroups: ['*'], resources: ['*'], verbs: ['*']}]\n      deployments:\n      - name: op\n        spec:\n          selector: {matchLabels: {a: b}}\n          template:\n            metadata: {labels: {a: b}}\n            spec:\n              serviceAccountName: op\n              containers: [{name: m, image: i}]\n";
    let bundle = files(&[
        ("metadata/annotations.yaml", REGISTRY),
        ("manifests/csv.yaml", csv),
    ]);
    let (rule, object, message) = refusal(render(&bundle, &options(&[])));
    assert_eq!(rule, ContentRule::WildcardRole, "{message}");
    assert!(object.starts_with("ClusterRole."), "{object}");
    assert!(
        message.contains("generated from ClusterServiceVersion op.v1"),
        "{message}"
    );
}

#[test]
fn system_and_manager_namespaces_are_refused_as_install_namespaces() {
    let bundle = plain("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n");
    for namespace in [
        "kube-system",
        "kube-public",
        "openshift-config",
        "default",
        "pom-system",
    ] {
        let opts = RenderOptions {
            manager_namespace: Some("pom-system".into()),
            ..RenderOptions::new(namespace)
        };
        let err = render(&bundle, &opts).unwrap_err();
        assert!(
            matches!(&err, RenderError::InstallNamespaceReserved { namespace: n, .. } if n == namespace),
            "{namespace}: {err}"
        );
        assert!(err.to_string().contains("spec.installNamespace"), "{err}");
    }
    for namespace in ["widgets", "kubernetes-dashboard", "my-openshift-tools"] {
        render(&bundle, &RenderOptions::new(namespace))
            .unwrap_or_else(|e| panic!("{namespace}: {e}"));
    }
}
