//! The content policy (issues 14 and 24, §6, §10): one small in-memory bundle per refusal class
//! of the threat model, the rule and object it names, what an admin's exception or consent can
//! and cannot lift, that what was lifted is reported, and that every violation of a bundle is
//! reported at once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::{BTreeMap, BTreeSet};

use pom_render::{
    BundleFiles, ContentException, ContentRule, Lift, PowerClass, RenderError, RenderOptions,
    RenderedBundle, render,
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

/// The first violation of a refused bundle: its rule, object, and the whole message.
fn refusal(result: Result<RenderedBundle, RenderError>) -> (ContentRule, String, String) {
    let (rule, object, message, _) = refusal_and_lift(result);
    (rule, object, message)
}

fn refusal_and_lift(
    result: Result<RenderedBundle, RenderError>,
) -> (ContentRule, String, String, Option<Lift>) {
    match result {
        Err(RenderError::ContentPolicy(violations)) => {
            let message = RenderError::ContentPolicy(violations.clone()).to_string();
            let first = violations.0[0].clone();
            (first.rule, first.object, message, first.lift)
        }
        Err(other) => panic!("expected a content-policy refusal, got: {other}"),
        Ok(bundle) => panic!("expected a refusal, rendered {:?}", bundle.objects),
    }
}

const CLUSTER_ROLE_BINDING: &str =
    "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding\nmetadata: {name: grab}\n";

fn crd_with_conversion(client_config: &str) -> String {
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: gadgets.example.com}}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {{kind: Gadget, plural: gadgets}}\n  conversion:\n    strategy: Webhook\n    webhook:\n      conversionReviewVersions: [v1]\n      clientConfig: {client_config}\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}]\n"
    )
}

/// Every refusal class: (what, manifest, rule, object named, words the message must have).
fn cases() -> Vec<(
    &'static str,
    String,
    ContentRule,
    &'static str,
    &'static str,
)> {
    let view_binding = |subject: &str| {
        format!(
            "{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}}\nsubjects: [{subject}]\n"
        )
    };
    let role_binding = |role: &str| {
        format!(
            "{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: '{role}'}}\nsubjects: [{{kind: ServiceAccount, name: default, namespace: {INSTALL_NS}}}]\n"
        )
    };
    let cluster_role = |name: &str, rules: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: {name}}}\nrules:\n{rules}"
        )
    };
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
            // Issue 33 item 1: a binding of a built-in role is a grant of what it holds (was
            // refused by name as ForeignRoleBinding).
            "a binding of cluster-admin",
            role_binding("cluster-admin"),
            ContentRule::PowerNotConsented,
            "ClusterRoleBinding \"grab\"",
            "ClusterAdminEquivalent: binds the built-in ClusterRole \"cluster-admin\" cluster-wide",
        ),
        (
            "a binding of a role nobody ships",
            role_binding("another-operators-role"),
            ContentRule::ForeignRoleBinding,
            "ClusterRoleBinding.rbac.authorization.k8s.io \"grab\"",
            "ClusterRole \"another-operators-role\", which the bundle does not ship",
        ),
        (
            "a binding of the aggregation controller's role",
            role_binding("system:controller:clusterrole-aggregation-controller"),
            ContentRule::ForeignRoleBinding,
            "\"grab\"",
            "\"system:controller:clusterrole-aggregation-controller\", which the bundle does not ship and which looks like one the cluster defines, but POM's table of built-in roles",
        ),
        (
            // Issue 33 item 1: was refused by name as ForeignRoleBinding.
            "a binding of the privileged SCC's role",
            role_binding("system:openshift:scc:privileged"),
            ContentRule::PowerNotConsented,
            "\"grab\"",
            "PrivilegedWorkloads: binds the built-in ClusterRole \"system:openshift:scc:privileged\"",
        ),
        (
            "a binding of system:authenticated",
            view_binding("{kind: Group, name: 'system:authenticated', apiGroup: rbac.authorization.k8s.io}"),
            ContentRule::SystemSubjectBinding,
            "\"grab\"",
            "group \"system:authenticated\"",
        ),
        (
            // Issue 33: a subject by who it is: this user is kube-system's default account.
            "a binding of a system: user",
            view_binding("{kind: User, name: 'system:serviceaccount:kube-system:default', apiGroup: rbac.authorization.k8s.io}"),
            ContentRule::ForeignServiceAccountBinding,
            "\"grab\"",
            "user \"system:serviceaccount:kube-system:default\"",
        ),
        (
            "a binding of a user",
            view_binding("{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}"),
            ContentRule::UserOrGroupBinding,
            "\"grab\"",
            "user \"alice\"",
        ),
        (
            "a binding of a group",
            view_binding("{kind: Group, name: developers, apiGroup: rbac.authorization.k8s.io}"),
            ContentRule::UserOrGroupBinding,
            "\"grab\"",
            "group \"developers\"",
        ),
        (
            "a binding of POM's own ServiceAccount",
            view_binding("{kind: ServiceAccount, name: pom-manager, namespace: pom-system}"),
            ContentRule::ForeignServiceAccountBinding,
            "\"grab\"",
            "POM's own ServiceAccount",
        ),
        (
            "a binding of another namespace's ServiceAccount",
            view_binding("{kind: ServiceAccount, name: builder, namespace: ci}"),
            ContentRule::ForeignServiceAccountBinding,
            "\"grab\"",
            "ServiceAccount \"builder\" of namespace \"ci\"",
        ),
        (
            "a cluster-wide binding of OpenShift's Prometheus",
            format!("{}---\n{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: scrape}}\nsubjects: [{{kind: ServiceAccount, name: prometheus-k8s, namespace: openshift-monitoring}}]\n",
                cluster_role("scrape", "- {apiGroups: [''], resources: [pods, services, endpoints], verbs: [get, list, watch]}\n")),
            // Issue 33: a platform identity given more than reading in the install namespace
            // is a power of the bundle, asking consent.
            ContentRule::PowerNotConsented,
            "\"grab\"",
            "grants the platform identity ServiceAccount openshift-monitoring/prometheus-k8s more than read-only access",
        ),
        (
            "a role aggregated into view",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: leak, labels: {rbac.authorization.k8s.io/aggregate-to-view: 'true'}}\nrules:\n- {apiGroups: [''], resources: [secrets], verbs: [get]}\n".into(),
            ContentRule::AggregationLabel,
            "\"leak\"",
            "rbac.authorization.k8s.io/aggregate-to-view",
        ),
        (
            "a CRD converted by an arbitrary URL",
            crd_with_conversion("{url: 'https://evil.example.com/convert'}"),
            ContentRule::ForeignWebhookEndpoint,
            "\"gadgets.example.com\"",
            "calls the URL \"https://evil.example.com/convert\"",
        ),
        (
            "a CRD converted by a Service in kube-system",
            crd_with_conversion("{service: {name: sniffer, namespace: kube-system, path: /convert}}"),
            ContentRule::ForeignWebhookEndpoint,
            "\"gadgets.example.com\"",
            "Service \"sniffer\" in namespace \"kube-system\"",
        ),
        (
            "a second MachineConfig definition",
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: machineconfigs2.machineconfiguration.openshift.io}\nspec:\n  group: machineconfiguration.openshift.io\n  scope: Cluster\n  names: {kind: MachineConfig, plural: machineconfigs2}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n".into(),
            ContentRule::BuiltInApiGroup,
            "\"machineconfigs2.machineconfiguration.openshift.io\"",
            "machineconfiguration.openshift.io",
        ),
        (
            "a ConfigMap redefined cluster-scoped",
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: configmaps.core}\nspec:\n  group: ''\n  scope: Cluster\n  names: {kind: ConfigMap, plural: configmaps}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n".into(),
            ContentRule::BuiltInApiGroup,
            "\"configmaps.core\"",
            "Kubernetes or the platform serves",
        ),
        (
            "a Service with externalIPs",
            "apiVersion: v1\nkind: Service\nmetadata: {name: mitm}\nspec: {ports: [{port: 443}], externalIPs: [10.0.0.1]}\n".into(),
            ContentRule::ServiceExternalIps,
            "Service \"mitm\"",
            "CVE-2020-8554",
        ),
        (
            "a LoadBalancer Service",
            "apiVersion: v1\nkind: Service\nmetadata: {name: public}\nspec: {type: LoadBalancer, ports: [{port: 443}]}\n".into(),
            ContentRule::LoadBalancerService,
            "Service \"public\"",
            "reachable from outside the cluster",
        ),
        (
            "a role that can escalate",
            cluster_role("rbac-admin", "- {apiGroups: [rbac.authorization.k8s.io], resources: [clusterroles], verbs: [get, escalate]}\n"),
            ContentRule::PowerNotConsented,
            "ClusterRole \"rbac-admin\"",
            "ClusterAdminEquivalent: rules[0] grants: escalate on roles",
        ),
        (
            "a role that can bind",
            cluster_role("binder", "- {apiGroups: ['*'], resources: [roles], verbs: [bind]}\n"),
            ContentRule::PowerNotConsented,
            "ClusterRole \"binder\"",
            "bind on roles",
        ),
        (
            "a role that can impersonate",
            cluster_role("actor", "- {apiGroups: [''], resources: [users, groups], verbs: [impersonate]}\n"),
            ContentRule::PowerNotConsented,
            "\"actor\"",
            "impersonate users",
        ),
        (
            "a role granting everything",
            cluster_role("god", "- {apiGroups: ['*'], resources: ['*'], verbs: ['*']}\n"),
            ContentRule::PowerNotConsented,
            "\"god\"",
            "ClusterAdminEquivalent",
        ),
        (
            "a role minting tokens",
            cluster_role("minter", "- {apiGroups: [''], resources: [serviceaccounts/token], verbs: [create]}\n"),
            ContentRule::PowerNotConsented,
            "\"minter\"",
            "create tokens for any ServiceAccount",
        ),
        (
            "a role reaching the kubelet",
            cluster_role("kubelet", "- {apiGroups: [''], resources: [nodes/proxy], verbs: [get]}\n"),
            ContentRule::PowerNotConsented,
            "\"kubelet\"",
            "nodes/proxy",
        ),
        (
            "a role writing machine configs",
            cluster_role("mco", "- {apiGroups: [machineconfiguration.openshift.io], resources: [machineconfigs], verbs: [create]}\n"),
            ContentRule::PowerNotConsented,
            "\"mco\"",
            "PlatformConfig",
        ),
        (
            "an aggregating role",
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: collector}\naggregationRule:\n  clusterRoleSelectors: [{matchLabels: {x: y}}]\nrules: []\n".into(),
            ContentRule::PowerNotConsented,
            "\"collector\"",
            "aggregationRule",
        ),
        (
            "a privileged host-root DaemonSet",
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: agent}\nspec:\n  selector: {matchLabels: {a: b}}\n  template:\n    metadata: {labels: {a: b}}\n    spec:\n      hostPID: true\n      volumes: [{name: root, hostPath: {path: /}}]\n      containers: [{name: c, image: i, securityContext: {privileged: true}}]\n".into(),
            ContentRule::PowerNotConsented,
            "DaemonSet \"agent\"",
            "PrivilegedWorkloads",
        ),
    ]
}

#[test]
fn every_refusal_class_names_the_object_and_the_rule() {
    for (what, manifest, rule, object, words) in cases() {
        let (got_rule, got_object, message, lift) =
            refusal_and_lift(render(&plain(&manifest), &options(&[])));
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
        match lift {
            Some(Lift::Exception(_)) => {
                assert!(rule.exceptable(), "{what}");
                assert!(
                    message.contains(&format!("spec.contentExceptions: [{{rule: {rule}")),
                    "{what}: {message}"
                );
            }
            Some(Lift::Consent(class)) => {
                assert_eq!(rule, ContentRule::PowerNotConsented, "{what}");
                assert!(
                    message.contains(&format!("spec.consent.{}: true", class.consent_field())),
                    "{what}: {message}"
                );
            }
            // A plain bundle ships no webhook POM renders (tests/render_fixtures.rs has them).
            Some(Lift::Webhook(w)) => panic!("{what}: {w}"),
            Some(Lift::Omit(omission)) => {
                assert!(rule.omittable() && !rule.exceptable(), "{what}");
                assert!(
                    message.contains("no exception can allow this")
                        && message.contains(&format!(
                            "spec.omitObjects: [{{kind: {}, name: {}}}]",
                            omission.kind, omission.name
                        )),
                    "{what}: {message}"
                );
            }
            None => {
                assert!(!rule.exceptable(), "{what}");
                assert!(
                    message.contains("no exception can allow this"),
                    "{what}: {message}"
                );
            }
        }
    }
}

#[test]
fn a_lift_lifts_only_its_finding_and_is_reported() {
    for (what, manifest, rule, _, _) in cases() {
        let files = plain(&manifest);
        let (_, object, _, lift) = refusal_and_lift(render(&files, &options(&[])));
        // The kind with its group, as the object is named (issue 33 item 6).
        let kind = object.split(' ').next().unwrap().to_owned();
        let name = object.split('"').nth(1).unwrap().to_owned();
        match lift {
            Some(Lift::Exception(exception)) => {
                let bundle = render(&files, &options(&[(rule, &kind, &name)]))
                    .unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(bundle.exceptions_used, vec![exception], "{what}");
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
                // Consent to every class lifts no exceptable finding.
                let mut all = options(&[]);
                all.consent = PowerClass::ALL.into_iter().collect();
                assert_eq!(refusal(render(&files, &all)).0, rule, "{what}");
            }
            Some(Lift::Consent(class)) => {
                let mut consented = options(&[]);
                consented.consent.insert(class);
                let bundle = render(&files, &consented).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(bundle.consents_used, BTreeSet::from([class]), "{what}");
                assert!(bundle.powers.classes().contains(&class), "{what}");
                // Consent to the other classes lifts nothing.
                let mut others = options(&[]);
                others.consent = PowerClass::ALL
                    .into_iter()
                    .filter(|c| *c != class)
                    .collect();
                assert_eq!(refusal(render(&files, &others)).0, rule, "{what}");
            }
            Some(Lift::Webhook(w)) => panic!("{what}: {w}"),
            Some(Lift::Omit(omission)) => {
                // Omitting the binding installs the bundle without it, and says so.
                let mut omitting = options(&[]);
                omitting.omit.push(omission.clone());
                let bundle = render(&files, &omitting).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(bundle.omitted, vec![omission.clone()], "{what}");
                assert!(
                    !bundle
                        .objects
                        .iter()
                        .any(|o| o["kind"] == omission.kind.as_str()
                            && o["metadata"]["name"] == omission.name.as_str()),
                    "{what}"
                );
                // Omitting another binding lifts nothing; consent to everything lifts only a
                // grant to another principal (issue 33: trusted as cluster-admin-equivalent,
                // the operator could make it at runtime), never one to POM's manager or of a
                // role the bundle does not ship.
                let mut everything = options(&[]);
                everything.consent = PowerClass::ALL.into_iter().collect();
                everything.omit.push(pom_render::OmittedObject {
                    kind: omission.kind.clone(),
                    name: "someone-else".into(),
                });
                let to_another_principal = matches!(
                    rule,
                    ContentRule::SystemSubjectBinding
                        | ContentRule::UserOrGroupBinding
                        | ContentRule::ForeignServiceAccountBinding
                ) && !manifest.contains("pom-system");
                if to_another_principal {
                    let bundle =
                        render(&files, &everything).unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert!(
                        bundle
                            .powers
                            .of(PowerClass::ClusterAdminEquivalent)
                            .any(|p| p.kind == omission.kind && p.name == omission.name),
                        "{what}: {:?}",
                        bundle.powers
                    );
                } else {
                    assert_eq!(refusal(render(&files, &everything)).0, rule, "{what}");
                }
            }
            None => {
                // Neither an exception naming it nor consent to everything lifts it.
                let mut everything = options(&[(rule, &kind, &name)]);
                everything.consent = PowerClass::ALL.into_iter().collect();
                assert_eq!(
                    refusal(render(&files, &everything)).0,
                    rule,
                    "{what}: nothing may lift it"
                );
            }
        }
    }
}

#[test]
fn every_violation_is_reported_at_once_with_the_spec_that_lifts_them() {
    let manifest = "apiVersion: v1\nkind: Pod\nmetadata: {name: loose}\nspec: {containers: [{name: c, image: i}]}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: god}\nrules:\n- {apiGroups: ['*'], resources: ['*'], verbs: ['*']}\n---\napiVersion: v1\nkind: Service\nmetadata: {name: mitm}\nspec: {ports: [{port: 443}], externalIPs: [10.0.0.1]}\n";
    let err = render(&plain(manifest), &options(&[])).unwrap_err();
    let RenderError::ContentPolicy(violations) = &err else {
        panic!("{err}");
    };
    let rules: BTreeSet<ContentRule> = violations.0.iter().map(|v| v.rule).collect();
    assert_eq!(
        rules,
        BTreeSet::from([
            ContentRule::KindNotAllowed,
            ContentRule::ServiceExternalIps,
            ContentRule::PowerNotConsented
        ])
    );
    assert_eq!(violations.unliftable(), 1);
    let message = err.to_string();
    assert!(
        message.contains("findings break POM's content policy"),
        "{message}"
    );
    assert!(
        message.contains("1 of them nothing can allow; the others would need: consent: {clusterAdminEquivalent: true}, contentExceptions: [{rule: KindNotAllowed, kind: Pod, name: loose}]"),
        "{message}"
    );
}

#[test]
fn the_narrow_monitoring_binding_and_benign_built_ins_are_allowed() {
    let manifest = format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: scrape}}\nrules:\n- {{apiGroups: [''], resources: [pods, services, endpoints], verbs: [get, list, watch]}}\n- {{apiGroups: [discovery.k8s.io], resources: [endpointslices], verbs: [list]}}\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: scrape}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: scrape}}\nsubjects: [{{kind: ServiceAccount, name: prometheus-k8s, namespace: openshift-monitoring}}]\n---\n{CLUSTER_ROLE_BINDING}roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: 'system:auth-delegator'}}\nsubjects: [{{kind: ServiceAccount, name: op, namespace: {INSTALL_NS}}}]\n"
    );
    render(&plain(&manifest), &options(&[])).unwrap();
    // One verb more on the same role, and the allowance is gone.
    // Issue 33: reading ConfigMaps too is still read-only access to non-secret objects.
    let configmaps = manifest.replace(
        "resources: [pods, services, endpoints]",
        "resources: [pods, services, endpoints, configmaps]",
    );
    render(&plain(&configmaps), &options(&[])).unwrap();
    // One verb more on the same role, or Secrets, and it is a power of the bundle: consent.
    let wider = manifest.replace(
        "verbs: [get, list, watch]",
        "verbs: [get, list, watch, delete]",
    );
    let secrets = manifest.replace(
        "resources: [pods, services, endpoints]",
        "resources: [pods, secrets]",
    );
    for beyond in [wider, secrets] {
        let (rule, object, _, lift) = refusal_and_lift(render(&plain(&beyond), &options(&[])));
        assert_eq!(rule, ContentRule::PowerNotConsented, "{beyond}");
        assert!(object.contains("RoleBinding \"scrape\""), "{object}");
        assert_eq!(
            lift,
            Some(Lift::Consent(PowerClass::ClusterAdminEquivalent)),
            "{beyond}"
        );
    }
}

/// OpenShift's registry roles, judged by what they grant (issue 33 item 1; a ClusterRoleBinding
/// was refused by name as ForeignRoleBinding): a RoleBinding grants the ImageStreams of the
/// install namespace, no power; a ClusterRoleBinding pushes to every namespace's, which runs in
/// every workload tracking a tag: ClusterAdminEquivalent.
#[test]
fn registry_roles_grant_a_power_only_cluster_wide() {
    let binding = |kind: &str| {
        format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata: {{name: push}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: registry-editor}}\nsubjects: [{{kind: ServiceAccount, name: op, namespace: {INSTALL_NS}}}]\n"
        )
    };
    let bundle = render(&plain(&binding("RoleBinding")), &options(&[])).unwrap();
    assert!(bundle.powers.found.is_empty(), "{:?}", bundle.powers);
    let (rule, object, message, lift) = refusal_and_lift(render(
        &plain(&binding("ClusterRoleBinding")),
        &options(&[]),
    ));
    assert_eq!(rule, ContentRule::PowerNotConsented);
    assert!(object.contains("\"push\""), "{object}");
    assert!(message.contains("pushes or retags images"), "{message}");
    assert_eq!(
        lift,
        Some(Lift::Consent(PowerClass::ClusterAdminEquivalent))
    );
    // Its rules as OpenShift defines them: the Secrets of the namespaces it is bound in too,
    // so bound cluster-wide it reads (and writes) every namespace's.
    let mut consented = options(&[]);
    consented.consent = [PowerClass::ClusterAdminEquivalent].into();
    let editor = render(&plain(&binding("ClusterRoleBinding")), &consented).unwrap();
    let secrets: Vec<String> = editor
        .powers
        .of(PowerClass::SecretsClusterWide)
        .map(ToString::to_string)
        .collect();
    assert!(
        secrets.iter().any(|p| p.contains("reads Secrets")),
        "{secrets:?}"
    );
    assert!(
        editor
            .powers
            .of(PowerClass::ClusterAdminEquivalent)
            .any(|p| p.detail.contains("writes Secrets in every namespace")),
        "{:?}",
        editor.powers
    );
    // registry-viewer cluster-wide pulls every namespace's images, private ones included:
    // shown as reading Secrets everywhere is (no consent); in the install namespace, nothing.
    let viewer = |kind: &str| binding(kind).replace("registry-editor", "registry-viewer");
    let cluster_wide = render(&plain(&viewer("ClusterRoleBinding")), &options(&[])).unwrap();
    assert_eq!(
        cluster_wide.powers.classes(),
        BTreeSet::from([PowerClass::SecretsClusterWide]),
        "{:?}",
        cluster_wide.powers
    );
    assert!(
        cluster_wide.powers.found[0]
            .detail
            .contains("pulls the images of every namespace's image streams"),
        "{:?}",
        cluster_wide.powers
    );
    let namespaced = render(&plain(&viewer("RoleBinding")), &options(&[])).unwrap();
    assert!(
        namespaced.powers.found.is_empty(),
        "{:?}",
        namespaced.powers
    );
}

/// A platform reader (OpenShift's Prometheus) given more than reading in the install namespace
/// receives a grant as any other principal would: `ClusterAdminEquivalent`, whatever other
/// classes the role it is given opens (they never stand in for that consent).
#[test]
fn a_platform_reader_given_more_than_reading_asks_the_consent_of_a_grant_to_another_principal() {
    for role in ["cluster-admin", "system:openshift:scc:privileged"] {
        let files = plain(&format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: scrape}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: '{role}'}}\nsubjects: [{{kind: ServiceAccount, name: prometheus-k8s, namespace: openshift-monitoring}}]\n"
        ));
        let mut privileged = options(&[]);
        privileged.consent = [PowerClass::PrivilegedWorkloads].into();
        let (rule, object, message, lift) = refusal_and_lift(render(&files, &privileged));
        assert_eq!(rule, ContentRule::PowerNotConsented, "{role}: {message}");
        assert!(
            object.contains("RoleBinding \"scrape\""),
            "{role}: {object}"
        );
        assert_eq!(
            lift,
            Some(Lift::Consent(PowerClass::ClusterAdminEquivalent)),
            "{role}: {message}"
        );
        let mut both = privileged.clone();
        both.consent.insert(PowerClass::ClusterAdminEquivalent);
        let bundle = render(&files, &both).unwrap_or_else(|e| panic!("{role}: {e}"));
        assert!(
            bundle
                .powers
                .of(PowerClass::ClusterAdminEquivalent)
                .any(|p| p.detail.contains("prometheus-k8s")
                    && p.detail.contains("a grant to another principal")),
            "{role}: {:?}",
            bundle.powers
        );
    }
}

/// Issue 33 item 1: a binding of a built-in role is a grant of what that role holds, judged by
/// the powers table at the binding's scope: (what, binding kind, role, the classes needing
/// consent it asks, or the rule refusing it).
#[test]
fn built_in_roles_are_judged_by_what_they_grant() {
    use PowerClass::{ClusterAdminEquivalent as Admin, PrivilegedWorkloads as Privileged};
    type Expected = Result<&'static [PowerClass], ContentRule>;
    let cases: &[(&str, &str, &str, Expected)] = &[
        (
            "cluster-admin cluster-wide",
            "ClusterRoleBinding",
            "cluster-admin",
            Ok(&[Admin]),
        ),
        (
            // Every verb in the namespace includes OLM v0's kinds there: any operator installed,
            // its cluster-wide RBAC included.
            "cluster-admin in the install namespace",
            "RoleBinding",
            "cluster-admin",
            Ok(&[Admin]),
        ),
        (
            "admin cluster-wide",
            "ClusterRoleBinding",
            "admin",
            Ok(&[Admin]),
        ),
        (
            "admin in the install namespace",
            "RoleBinding",
            "admin",
            Ok(&[]),
        ),
        (
            "edit cluster-wide",
            "ClusterRoleBinding",
            "edit",
            Ok(&[Admin]),
        ),
        (
            "edit in the install namespace",
            "RoleBinding",
            "edit",
            Ok(&[]),
        ),
        ("view cluster-wide", "ClusterRoleBinding", "view", Ok(&[])),
        (
            "registry-editor cluster-wide",
            "ClusterRoleBinding",
            "registry-editor",
            Ok(&[Admin]),
        ),
        (
            "registry-viewer cluster-wide (shown only)",
            "ClusterRoleBinding",
            "registry-viewer",
            Ok(&[]),
        ),
        (
            "auth-delegator",
            "ClusterRoleBinding",
            "system:auth-delegator",
            Ok(&[]),
        ),
        (
            "the privileged SCC",
            "ClusterRoleBinding",
            "system:openshift:scc:privileged",
            Ok(&[Privileged]),
        ),
        (
            "the privileged SCC in the install namespace",
            "RoleBinding",
            "system:openshift:scc:privileged",
            Ok(&[Privileged]),
        ),
        (
            "the hostnetwork SCC",
            "ClusterRoleBinding",
            "system:openshift:scc:hostnetwork",
            Ok(&[Privileged]),
        ),
        (
            "the anyuid SCC",
            "RoleBinding",
            "system:openshift:scc:anyuid",
            Ok(&[Privileged]),
        ),
        (
            "the restricted-v2 SCC",
            "ClusterRoleBinding",
            "system:openshift:scc:restricted-v2",
            Ok(&[]),
        ),
        (
            "the nonroot SCC",
            "RoleBinding",
            "system:openshift:scc:nonroot",
            Ok(&[]),
        ),
        (
            "an SCC the table does not know",
            "ClusterRoleBinding",
            "system:openshift:scc:custom",
            Err(ContentRule::ForeignRoleBinding),
        ),
        (
            "OLM's role",
            "ClusterRoleBinding",
            "system:controller:operator-lifecycle-manager",
            Err(ContentRule::ForeignRoleBinding),
        ),
    ];
    for (what, kind, role, expected) in cases {
        let binding = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata: {{name: grant}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: '{role}'}}\nsubjects: [{{kind: ServiceAccount, name: op, namespace: {INSTALL_NS}}}]\n"
        );
        let files = plain(&binding);
        match expected {
            Ok(classes) => {
                let mut consented = options(&[]);
                consented.consent = classes.iter().copied().collect();
                let bundle = render(&files, &consented).unwrap_or_else(|e| panic!("{what}: {e}"));
                assert_eq!(
                    bundle.consents_used,
                    classes.iter().copied().collect::<BTreeSet<_>>(),
                    "{what}: {:?}",
                    bundle.powers
                );
                for power in bundle
                    .powers
                    .found
                    .iter()
                    .filter(|p| p.class.needs_consent())
                {
                    assert!(
                        power
                            .detail
                            .contains(&format!("binds the built-in ClusterRole \"{role}\"")),
                        "{what}: {power}"
                    );
                }
                if let Some(first) = classes.first() {
                    let mut fewer = consented.clone();
                    fewer.consent.remove(first);
                    let (rule, _, message, lift) = refusal_and_lift(render(&files, &fewer));
                    assert_eq!(rule, ContentRule::PowerNotConsented, "{what}: {message}");
                    assert_eq!(lift, Some(Lift::Consent(*first)), "{what}: {message}");
                }
            }
            Err(expected_rule) => {
                let mut everything = options(&[]);
                everything.consent = PowerClass::ALL.into_iter().collect();
                let (rule, _, message, lift) = refusal_and_lift(render(&files, &everything));
                assert_eq!(rule, *expected_rule, "{what}: {message}");
                assert!(
                    message.contains(role) && message.contains("does not know what it grants"),
                    "{what}: {message}"
                );
                assert!(matches!(lift, Some(Lift::Omit(_))), "{what}: {message}");
            }
        }
    }
}

#[test]
fn an_aggregated_role_over_the_bundles_own_groups_is_allowed() {
    let crd = "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: gadgets.example.com}\nspec:\n  group: example.com\n  scope: Namespaced\n  names: {kind: Gadget, plural: gadgets}\n  versions: [{name: v1, served: true, storage: true, schema: {openAPIV3Schema: {type: object}}}]\n";
    let role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gadget-editor, labels: {rbac.authorization.k8s.io/aggregate-to-edit: 'true'}}\nrules:\n- {apiGroups: [example.com], resources: [gadgets, gadgets/status], verbs: ['*']}\n";
    render(&plain(&format!("{crd}---\n{role}")), &options(&[])).unwrap();
    // Issue 33 item 3: its own kinds: a kind of example.com no CRD of the bundle defines is
    // beyond them (`*` of its group is still allowed: docs/decisions.md, apicurito).
    let star = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: gadget-editor, labels: {rbac.authorization.k8s.io/aggregate-to-edit: 'true'}}\nrules:\n- {apiGroups: [example.com], resources: ['*'], verbs: [get]}\n";
    render(&plain(&format!("{crd}---\n{star}")), &options(&[])).unwrap();
    for rule in [
        "{apiGroups: [example.com], resources: [gadgets, widgets], verbs: [get]}",
        "{apiGroups: [example.com, other.example.com], resources: [gadgets], verbs: [get]}",
        "{apiGroups: [other.example.com], resources: ['*'], verbs: [get]}",
    ] {
        let role = format!(
            "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {{name: gadget-editor, labels: {{rbac.authorization.k8s.io/aggregate-to-edit: 'true'}}}}\nrules:\n- {rule}\n"
        );
        let (got, _, message) =
            refusal(render(&plain(&format!("{crd}---\n{role}")), &options(&[])));
        assert_eq!(got, ContentRule::AggregationLabel, "{rule}: {message}");
        assert!(
            message.contains("beyond the bundle's own kinds"),
            "{rule}: {message}"
        );
    }
}

#[test]
fn a_bundle_without_findings_uses_no_exception_or_consent() {
    let mut opts = options(&[(ContentRule::KindNotAllowed, "ClusterRole", "god")]);
    opts.consent = PowerClass::ALL.into_iter().collect();
    let bundle = render(
        &plain("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\n"),
        &opts,
    )
    .unwrap();
    assert!(bundle.exceptions_used.is_empty());
    assert!(bundle.consents_used.is_empty());
    assert!(bundle.powers.found.is_empty());
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
    assert_eq!(rule, ContentRule::PowerNotConsented, "{message}");
    assert!(object.starts_with("ClusterRole "), "{object}");
    // The origin names the CSV entry, so rules[0] is the CSV's own rule index.
    assert!(
        message.contains("generated from ClusterServiceVersion op.v1 (manifests/csv.yaml), spec.install.spec.clusterPermissions[0]"),
        "{message}"
    );
    assert!(message.contains("rules[0] grants"), "{message}");
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

/// Issue 33 item 6: an exception names the kind with its group (`Kind.group`, or `Kind` alone for
/// the core group) and matches only that group's kind: `Service` excuses the core Service, never
/// a custom resource of kind Service; the refusal says how to name it.
#[test]
fn exceptions_name_kinds_with_their_group() {
    let custom = "apiVersion: ecs.services.k8s.aws/v1alpha1\nkind: Service\nmetadata: {name: example}\nspec: {}\n";
    let core = "apiVersion: v1\nkind: Service\nmetadata: {name: example}\nspec: {type: LoadBalancer, ports: [{port: 443}]}\n";
    // The core group's kind name excuses neither the custom resource nor another rule...
    let bare = options(&[(ContentRule::KindNotAllowed, "Service", "example")]);
    let (rule, object, message, lift) = refusal_and_lift(render(&plain(custom), &bare));
    assert_eq!(rule, ContentRule::KindNotAllowed);
    assert!(
        object.starts_with("Service.ecs.services.k8s.aws \"example\""),
        "{object}"
    );
    assert!(
        message.contains("names kind Service without its API group")
            && message.contains(
                "{rule: KindNotAllowed, kind: Service.ecs.services.k8s.aws, name: example}"
            ),
        "{message}"
    );
    let Some(Lift::Exception(exception)) = lift else {
        panic!("{message}")
    };
    assert_eq!(exception.kind, "Service.ecs.services.k8s.aws");
    // ... the kind with its group does.
    let grouped = options(&[(
        ContentRule::KindNotAllowed,
        "Service.ecs.services.k8s.aws",
        "example",
    )]);
    let bundle = render(&plain(custom), &grouped).unwrap();
    assert_eq!(bundle.exceptions_used, vec![exception]);
    // The core Service: `Service` alone names it, the custom group's form does not.
    let lb = options(&[(ContentRule::LoadBalancerService, "Service", "example")]);
    render(&plain(core), &lb).unwrap();
    let wrong = options(&[(
        ContentRule::LoadBalancerService,
        "Service.ecs.services.k8s.aws",
        "example",
    )]);
    assert_eq!(
        refusal(render(&plain(core), &wrong)).0,
        ContentRule::LoadBalancerService
    );
}
