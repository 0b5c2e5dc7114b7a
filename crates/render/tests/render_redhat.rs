//! Issue 33, must show: Red Hat's optional OpenShift operators in
//! `../shared/testdata/real/redhat-operators/` (SOURCES.md), each in its suggested namespace.
//! cert-manager-operator, cluster-logging-operator and windows-machine-config-operator render
//! with the admin's consent only (their refusal names consent and nothing else);
//! external-dns-operator renders with its refusal's own lift: three bindings omitted, each for
//! the rule it meets. Plus hostile bundles for the rules of issue 33 items 2 and 5.
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

use std::collections::{BTreeMap, BTreeSet};

use pom_render::{
    BundleFiles, ContentRule, Lift, OmittedObject, PowerClass, RenderError, RenderOptions,
    RenderedBundle, default_install_namespace, render,
};

const ADMIN: PowerClass = PowerClass::ClusterAdminEquivalent;
const PRIVILEGED: PowerClass = PowerClass::PrivilegedWorkloads;
const PLATFORM: PowerClass = PowerClass::PlatformConfig;

/// The bundle and the options of its first render (no consent, its default namespace).
fn redhat(name: &str) -> Option<(BundleFiles, RenderOptions)> {
    let dir = shared_support::shared_dir("real/redhat-operators")?.join(name);
    let files = BundleFiles::load_dir(&dir).unwrap();
    let namespace = default_install_namespace(&files, name).unwrap();
    Some((files, RenderOptions::new(namespace)))
}

/// Renders once, and again with exactly what the refusal pastes; returns the refusal's lifts
/// and the bundle rendered with them.
fn with_own_lift(
    files: &BundleFiles,
    opts: &RenderOptions,
) -> (BTreeSet<Lift>, pom_render::PolicyViolations, RenderedBundle) {
    let Err(RenderError::ContentPolicy(violations)) = render(files, opts) else {
        panic!("expected a content-policy refusal");
    };
    assert_eq!(violations.unliftable(), 0, "{violations}");
    let lifts: BTreeSet<Lift> = violations.lifts().into_iter().cloned().collect();
    let mut lifted = opts.clone();
    for lift in &lifts {
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
    let bundle = render(files, &lifted).unwrap_or_else(|e| panic!("with its own lift: {e}"));
    (lifts, violations, bundle)
}

fn consents(classes: &[PowerClass]) -> BTreeSet<Lift> {
    classes.iter().map(|c| Lift::Consent(*c)).collect()
}

/// (bundle, the consent classes its refusal names).
const CONSENT_ONLY: &[(&str, &[PowerClass])] = &[
    // Token requests, webhooks, CRDs, APIServices, workloads everywhere; relabels namespaces;
    // writes config.openshift.io and operator.openshift.io; asks for cluster monitoring.
    ("cert-manager-operator", &[ADMIN, PRIVILEGED, PLATFORM]),
    // escalate/bind, impersonate, SCC writes; uses SCCs; Endpoints; cluster monitoring.
    ("cluster-logging-operator", &[ADMIN, PRIVILEGED, PLATFORM]),
    // CSR approval, Secret writes everywhere (and its system:wicd-nodes binding, a grant to
    // another principal); hostNetwork and SCCs; cluster monitoring.
    (
        "windows-machine-config-operator",
        &[ADMIN, PRIVILEGED, PLATFORM],
    ),
];

#[test]
fn three_red_hat_operators_render_with_consent_only() {
    for (name, classes) in CONSENT_ONLY {
        let Some((files, opts)) = redhat(name) else {
            return;
        };
        let (lifts, _, bundle) = with_own_lift(&files, &opts);
        assert_eq!(lifts, consents(classes), "{name}");
        assert_eq!(
            bundle.consents_used,
            classes.iter().copied().collect(),
            "{name}"
        );
        assert!(
            bundle.omitted.is_empty() && bundle.exceptions_used.is_empty(),
            "{name}"
        );
        // The cluster-monitoring opt-in is shown as a PlatformConfig power of the namespace.
        assert!(
            bundle
                .powers
                .of(PLATFORM)
                .any(|p| p.kind == "Namespace" && p.detail.contains("cluster-monitoring")),
            "{name}: {:?}",
            bundle.powers
        );
        assert_eq!(
            bundle
                .namespace_metadata
                .labels
                .get("openshift.io/cluster-monitoring"),
            Some(&"true".to_owned()),
            "{name}"
        );
    }
}

/// cert-manager-operator's CRDs in `operator.openshift.io` (certmanagers, istiocsrs,
/// trustmanagers) are kinds the platform does not serve; its ConsoleQuickStart is one of OLM
/// v0's supported kinds.
#[test]
fn cert_manager_claims_only_kinds_the_platform_does_not_serve() {
    let Some((files, mut opts)) = redhat("cert-manager-operator") else {
        return;
    };
    opts.consent = [ADMIN, PRIVILEGED, PLATFORM].into();
    let bundle = render(&files, &opts).unwrap();
    assert!(
        bundle
            .crds
            .contains(&"certmanagers.operator.openshift.io".to_owned())
    );
    assert!(
        bundle
            .objects
            .iter()
            .any(|o| o["kind"] == "ConsoleQuickStart")
    );
}

/// cluster-logging-operator's and windows-machine-config-operator's Prometheus RoleBindings
/// (reading pods, services, endpoints, endpointslices, and a ConfigMap) need nothing; WMCO's
/// binding of the group `system:wicd-nodes` is shown as a ClusterAdminEquivalent power.
#[test]
fn monitoring_reads_need_nothing_and_a_trusted_operator_shows_its_other_grants() {
    let Some((files, mut opts)) = redhat("windows-machine-config-operator") else {
        return;
    };
    let Err(RenderError::ContentPolicy(violations)) = render(&files, &opts) else {
        panic!("refused without consent");
    };
    let wicd = violations
        .0
        .iter()
        .find(|v| v.object.contains("\"system-wicd-nodes\""))
        .expect("the system:wicd-nodes binding is named");
    assert_eq!(wicd.rule, ContentRule::SystemSubjectBinding);
    assert_eq!(wicd.lift, Some(Lift::Consent(ADMIN)));
    assert!(wicd.detail.contains("spec.omitObjects"), "{}", wicd.detail);
    opts.consent = [ADMIN, PRIVILEGED, PLATFORM].into();
    let bundle = render(&files, &opts).unwrap();
    assert!(
        bundle
            .powers
            .of(ADMIN)
            .any(|p| p.name == "system-wicd-nodes" && p.detail.contains("system:wicd-nodes")),
        "{:?}",
        bundle.powers
    );
    assert!(
        !bundle
            .powers
            .found
            .iter()
            .any(|p| p.name.starts_with("prometheus"))
    );
    let Some((logging, mut opts)) = redhat("cluster-logging-operator") else {
        return;
    };
    opts.consent = [ADMIN, PRIVILEGED, PLATFORM].into();
    let bundle = render(&logging, &opts).unwrap();
    assert!(
        bundle
            .objects
            .iter()
            .any(|o| o["kind"] == "RoleBinding" && o["metadata"]["name"] == "prometheus")
    );
    assert!(!bundle.powers.found.iter().any(|p| p.name == "prometheus"));
}

/// external-dns-operator: its refusal's own lift omits three bindings, each for the rule it
/// meets; the group of its install namespace's accounts and OpenShift's Prometheus reading the
/// install namespace are its own to grant. It needs no consent.
#[test]
fn external_dns_renders_with_its_own_lift() {
    let Some((files, opts)) = redhat("external-dns-operator") else {
        return;
    };
    assert_eq!(opts.install_namespace, "external-dns-operator");
    let (lifts, violations, bundle) = with_own_lift(&files, &opts);
    let omit = |kind: &str, name: &str| {
        Lift::Omit(OmittedObject {
            kind: kind.into(),
            name: name.into(),
        })
    };
    assert_eq!(
        lifts,
        BTreeSet::from([
            omit("ClusterRoleBinding", "external-dns"),
            omit("RoleBinding", "prometheus"),
            omit("RoleBinding", "prometheus-k8s"),
        ])
    );
    let mut rules: BTreeMap<String, BTreeSet<ContentRule>> = BTreeMap::new();
    for v in &violations.0 {
        let name = v.object.split('"').nth(1).unwrap().to_owned();
        rules.entry(name).or_default().insert(v.rule);
    }
    let expected: BTreeMap<String, BTreeSet<ContentRule>> = [
        // system:serviceaccounts:external-dns: the operand namespace's accounts.
        (
            "external-dns",
            vec![ContentRule::ForeignServiceAccountBinding],
        ),
        // Role "prometheus" is not in the bundle; monitoring/prometheus-k8s: no such
        // namespace on OpenShift.
        (
            "prometheus",
            vec![
                ContentRule::ForeignRoleBinding,
                ContentRule::ForeignServiceAccountBinding,
            ],
        ),
        // monitoring/prometheus-k8s, next to openshift-monitoring's (which is allowed).
        (
            "prometheus-k8s",
            vec![ContentRule::ForeignServiceAccountBinding],
        ),
    ]
    .into_iter()
    .map(|(n, r)| (n.to_owned(), r.into_iter().collect()))
    .collect();
    assert_eq!(rules, expected);
    let details: Vec<&str> = violations.0.iter().map(|v| v.detail.as_str()).collect();
    assert!(
        details
            .iter()
            .any(|d| d.contains("every ServiceAccount of namespace \"external-dns\"")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.contains("of namespace \"monitoring\"")),
        "{details:?}"
    );
    assert!(
        details
            .iter()
            .any(|d| d.contains("Role \"prometheus\", which the bundle does not ship")),
        "{details:?}"
    );
    assert!(bundle.consents_used.is_empty());
    assert_eq!(bundle.omitted.len(), 3);
}

// Hostile bundles: one per new rule, refused (or asking exactly its consent), and the
// legitimate neighbour that passes.

const INSTALL_NS: &str = "widgets";

fn plain(manifest: &str) -> BundleFiles {
    BundleFiles::new(
        [
            (
                "metadata/annotations.yaml".to_owned(),
                b"annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: plain+v0\n"
                    .to_vec(),
            ),
            (
                "manifests/extra.yaml".to_owned(),
                manifest.as_bytes().to_vec(),
            ),
        ]
        .into_iter()
        .collect::<BTreeMap<_, _>>(),
    )
}

fn options(consent: &[PowerClass]) -> RenderOptions {
    RenderOptions {
        consent: consent.iter().copied().collect(),
        ..RenderOptions::new(INSTALL_NS)
    }
}

fn refusal(result: Result<RenderedBundle, RenderError>) -> pom_render::PolicyViolations {
    match result {
        Err(RenderError::ContentPolicy(v)) => v,
        Err(other) => panic!("expected a content-policy refusal, got {other}"),
        Ok(b) => panic!("expected a refusal, rendered {:?}", b.objects),
    }
}

fn binding(kind: &str, role: &str, subject: &str) -> String {
    let role_kind = if kind == "ClusterRoleBinding" {
        "ClusterRole"
    } else {
        "Role"
    };
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata: {{name: b}}\nroleRef: {{apiGroup: rbac.authorization.k8s.io, kind: {role_kind}, name: {role}}}\nsubjects: [{subject}]\n"
    )
}

fn role(kind: &str, rules: &str) -> String {
    format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: {kind}\nmetadata: {{name: r}}\nrules: [{rules}]\n---\n"
    )
}

#[test]
fn the_install_namespaces_accounts_are_the_bundles_own() {
    let rules = "{apiGroups: [''], resources: [configmaps], verbs: ['*']}";
    for subject in [
        "{kind: Group, name: 'system:serviceaccounts:widgets'}",
        "{kind: User, name: 'system:serviceaccount:widgets:op'}",
        "{kind: ServiceAccount, name: op, namespace: widgets}",
    ] {
        let manifest = role("ClusterRole", rules) + &binding("ClusterRoleBinding", "r", subject);
        render(&plain(&manifest), &options(&[])).unwrap_or_else(|e| panic!("{subject}: {e}"));
    }
    // Another namespace's group of accounts is not.
    let manifest = role("ClusterRole", rules)
        + &binding(
            "ClusterRoleBinding",
            "r",
            "{kind: Group, name: 'system:serviceaccounts:operand'}",
        );
    let refused = refusal(render(&plain(&manifest), &options(&[])));
    assert_eq!(refused.0[0].rule, ContentRule::ForeignServiceAccountBinding);
    assert!(
        refused.0[0]
            .detail
            .contains("every ServiceAccount of namespace \"operand\"")
    );
    assert!(matches!(refused.0[0].lift, Some(Lift::Omit(_))));
}

#[test]
fn platform_readers_read_non_secrets_of_the_install_namespace_and_ask_consent_for_more() {
    let readers = [
        "{kind: ServiceAccount, name: prometheus-k8s, namespace: openshift-monitoring}",
        "{kind: ServiceAccount, name: prometheus-user-workload, namespace: openshift-user-workload-monitoring}",
    ];
    let reading = "{apiGroups: [''], resources: [pods, services, endpoints, configmaps], verbs: [get, list, watch]}";
    for reader in readers {
        let ok = role("Role", reading) + &binding("RoleBinding", "r", reader);
        let bundle = render(&plain(&ok), &options(&[])).unwrap_or_else(|e| panic!("{reader}: {e}"));
        assert!(
            bundle.powers.found.is_empty(),
            "{reader}: {:?}",
            bundle.powers
        );
        // (rules, binding kind, the class of the path it opens besides the grant to another
        // principal, `ClusterAdminEquivalent`, that any grant beyond reading is)
        let beyond = [
            (
                "{apiGroups: [''], resources: [secrets], verbs: [get]}",
                "RoleBinding",
                ADMIN,
            ),
            (
                "{apiGroups: [''], resources: ['*'], verbs: [get]}",
                "RoleBinding",
                ADMIN,
            ),
            (
                "{apiGroups: [''], resources: [pods/exec], verbs: [get]}",
                "RoleBinding",
                ADMIN,
            ),
            (
                "{apiGroups: [''], resources: [configmaps], verbs: [update]}",
                "RoleBinding",
                ADMIN,
            ),
            (reading, "ClusterRoleBinding", ADMIN),
            (
                "{apiGroups: [''], resources: [endpoints], verbs: [create]}",
                "ClusterRoleBinding",
                PLATFORM,
            ),
            (
                "{apiGroups: [''], resources: [namespaces], verbs: [patch]}",
                "ClusterRoleBinding",
                PRIVILEGED,
            ),
            (
                "{apiGroups: [security.openshift.io], resources: [securitycontextconstraints], resourceNames: [privileged], verbs: [use]}",
                "RoleBinding",
                PRIVILEGED,
            ),
        ];
        for (rules, kind, class) in beyond {
            let asked: BTreeSet<PowerClass> = [ADMIN, class].into();
            let role_kind = if kind == "ClusterRoleBinding" {
                "ClusterRole"
            } else {
                "Role"
            };
            let manifest = role(role_kind, rules) + &binding(kind, "r", reader);
            let what = format!("{reader} {kind} {rules}");
            let refused = refusal(render(&plain(&manifest), &options(&[])));
            assert!(
                refused
                    .0
                    .iter()
                    .all(|v| v.rule == ContentRule::PowerNotConsented),
                "{what}: {refused}"
            );
            let lifts: BTreeSet<Lift> = refused.lifts().into_iter().cloned().collect();
            assert_eq!(
                lifts,
                asked.iter().map(|c| Lift::Consent(*c)).collect(),
                "{what}: {refused}"
            );
            let asked: Vec<PowerClass> = asked.into_iter().collect();
            let bundle = render(&plain(&manifest), &options(&asked))
                .unwrap_or_else(|e| panic!("{what}: {e}"));
            for class in asked {
                assert!(
                    bundle
                        .powers
                        .of(class)
                        .any(|p| p.detail.contains("platform identity")),
                    "{what}: {class}"
                );
            }
        }
    }
    // Another account of openshift-monitoring is anyone else.
    let manifest = role("Role", reading)
        + &binding(
            "RoleBinding",
            "r",
            "{kind: ServiceAccount, name: alertmanager-main, namespace: openshift-monitoring}",
        );
    assert_eq!(
        refusal(render(&plain(&manifest), &options(&[]))).0[0].rule,
        ContentRule::ForeignServiceAccountBinding
    );
}

#[test]
fn anyone_else_is_refused_and_omittable_but_shown_under_cluster_admin_consent() {
    let subjects = [
        ("{kind: User, name: alice}", ContentRule::UserOrGroupBinding),
        (
            "{kind: Group, name: admins}",
            ContentRule::UserOrGroupBinding,
        ),
        (
            "{kind: Group, name: 'system:authenticated'}",
            ContentRule::SystemSubjectBinding,
        ),
        (
            "{kind: ServiceAccount, name: builder, namespace: ci}",
            ContentRule::ForeignServiceAccountBinding,
        ),
        (
            "{kind: ServiceAccount, name: prometheus-k8s, namespace: monitoring}",
            ContentRule::ForeignServiceAccountBinding,
        ),
    ];
    let view = "{apiGroups: [''], resources: [configmaps], verbs: [get]}";
    for (subject, rule) in subjects {
        let manifest = role("ClusterRole", view) + &binding("ClusterRoleBinding", "r", subject);
        let files = plain(&manifest);
        let refused = refusal(render(&files, &options(&[])));
        assert_eq!(refused.0.len(), 1, "{subject}: {refused}");
        assert_eq!(refused.0[0].rule, rule, "{subject}");
        assert!(refused.0[0].object.contains("\"b\""), "{subject}");
        assert!(
            matches!(refused.0[0].lift, Some(Lift::Omit(_))),
            "{subject}"
        );
        // Consent to the other classes lifts nothing; cluster-admin-equivalent shows it.
        assert!(
            render(&files, &options(&[PRIVILEGED, PLATFORM])).is_err(),
            "{subject}"
        );
        let bundle =
            render(&files, &options(&[ADMIN])).unwrap_or_else(|e| panic!("{subject}: {e}"));
        assert!(
            bundle
                .powers
                .of(ADMIN)
                .any(|p| p.kind == "ClusterRoleBinding" && p.name == "b"),
            "{subject}"
        );
        assert_eq!(bundle.consents_used, BTreeSet::from([ADMIN]), "{subject}");
    }
    // POM's own manager: never, whatever the consent.
    let manifest = role("ClusterRole", view)
        + &binding(
            "ClusterRoleBinding",
            "r",
            "{kind: ServiceAccount, name: pom-manager, namespace: pom-system}",
        );
    let mut opts = options(&PowerClass::ALL);
    opts.manager_namespace = Some("pom-system".into());
    opts.manager_service_account = Some("pom-manager".into());
    let refused = refusal(render(&plain(&manifest), &opts));
    assert_eq!(refused.0[0].rule, ContentRule::ForeignServiceAccountBinding);
    assert!(refused.0[0].detail.contains("POM's own ServiceAccount"));
}

#[test]
fn a_global_default_priority_class_is_refused() {
    let class = |global: bool| {
        format!(
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {{name: urgent}}\nvalue: 1000000\nglobalDefault: {global}\n"
        )
    };
    let refused = refusal(render(&plain(&class(true)), &options(&PowerClass::ALL)));
    assert_eq!(refused.0[0].rule, ContentRule::PriorityClassGlobalDefault);
    assert!(
        refused.0[0]
            .object
            .contains("PriorityClass.scheduling.k8s.io \"urgent\"")
    );
    assert_eq!(refused.0[0].lift, None);
    let message = refused.to_string();
    assert!(
        message.contains("globalDefault: true") && message.contains("ask the bundle's publisher"),
        "{message}"
    );
    render(&plain(&class(false)), &options(&[])).unwrap();
}

#[test]
fn a_service_account_token_secret_is_refused() {
    let secret = |kind: &str| {
        format!(
            "apiVersion: v1\nkind: Secret\nmetadata: {{name: t, annotations: {{kubernetes.io/service-account.name: op}}}}\ntype: {kind}\n"
        )
    };
    let refused = refusal(render(
        &plain(&secret("kubernetes.io/service-account-token")),
        &options(&PowerClass::ALL),
    ));
    assert_eq!(refused.0[0].rule, ContentRule::ServiceAccountTokenSecret);
    assert!(refused.0[0].object.contains("Secret \"t\""));
    // Its lift is leaving it out: an omission mints no token (grants less, never more).
    let omission = OmittedObject {
        kind: "Secret".to_owned(),
        name: "t".to_owned(),
    };
    assert_eq!(refused.0[0].lift, Some(Lift::Omit(omission.clone())));
    assert!(refused.to_string().contains("TokenRequest"));
    let mut omitting = options(&PowerClass::ALL);
    omitting.omit.push(omission.clone());
    let rendered = render(
        &plain(&secret("kubernetes.io/service-account-token")),
        &omitting,
    )
    .unwrap();
    assert_eq!(rendered.omitted, [omission]);
    assert!(
        rendered.objects.iter().all(|o| o["kind"] != "Secret"),
        "the token Secret is not applied"
    );
    render(&plain(&secret("Opaque")), &options(&[])).unwrap();
}

#[test]
fn apparmor_unconfined_needs_privileged_workloads() {
    let deployment = |annotation: &str, profile: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: d}}\nspec:\n  selector: {{matchLabels: {{a: b}}}}\n  template:\n    metadata: {{labels: {{a: b}}, annotations: {{container.apparmor.security.beta.kubernetes.io/c: '{annotation}'}}}}\n    spec:\n      containers: [{{name: c, image: i, securityContext: {{appArmorProfile: {{type: {profile}}}}}}}]\n"
        )
    };
    for manifest in [
        deployment("unconfined", "RuntimeDefault"),
        deployment("runtime/default", "Unconfined"),
    ] {
        let refused = refusal(render(&plain(&manifest), &options(&[])));
        assert_eq!(
            refused.lifts(),
            BTreeSet::from([&Lift::Consent(PRIVILEGED)]),
            "{refused}"
        );
        assert!(refused.to_string().contains("AppArmor"), "{refused}");
        render(&plain(&manifest), &options(&[PRIVILEGED])).unwrap();
    }
    let confined = deployment("localhost/mine", "RuntimeDefault");
    render(&plain(&confined), &options(&[])).unwrap();
}

#[test]
fn the_cluster_monitoring_opt_in_needs_platform_config() {
    let csv = |annotation: &str| {
        format!(
            "apiVersion: operators.coreos.com/v1alpha1\nkind: ClusterServiceVersion\nmetadata:\n  name: op.v1\n  annotations: {{{annotation}}}\nspec:\n  installModes: [{{type: AllNamespaces, supported: true}}]\n  install:\n    strategy: deployment\n    spec:\n      deployments:\n      - name: op\n        spec:\n          selector: {{matchLabels: {{a: b}}}}\n          template:\n            metadata: {{labels: {{a: b}}}}\n            spec: {{containers: [{{name: m, image: i}}]}}\n"
        )
    };
    let bundle = |annotation: &str| {
        BundleFiles::new(
            [
                (
                    "metadata/annotations.yaml".to_owned(),
                    b"annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n".to_vec(),
                ),
                ("manifests/csv.yaml".to_owned(), csv(annotation).into_bytes()),
            ]
            .into_iter()
            .collect::<BTreeMap<_, _>>(),
        )
    };
    let asking = bundle("operatorframework.io/cluster-monitoring: 'true'");
    let refused = refusal(render(&asking, &options(&[])));
    assert_eq!(refused.0.len(), 1, "{refused}");
    assert_eq!(refused.0[0].rule, ContentRule::PowerNotConsented);
    assert!(
        refused.0[0].object.contains("Namespace \"widgets\""),
        "{refused}"
    );
    assert_eq!(refused.lifts(), BTreeSet::from([&Lift::Consent(PLATFORM)]));
    let rendered = render(&asking, &options(&[PLATFORM])).unwrap();
    assert_eq!(
        rendered
            .namespace_metadata
            .labels
            .get("openshift.io/cluster-monitoring"),
        Some(&"true".to_owned())
    );
    // Not asking (or asking "false") needs nothing.
    for annotation in ["operatorframework.io/cluster-monitoring: 'false'", "x: y"] {
        let rendered = render(&bundle(annotation), &options(&[])).unwrap();
        assert!(
            rendered.namespace_metadata.labels.is_empty(),
            "{annotation}"
        );
    }
}

#[test]
fn a_kind_the_platform_serves_is_refused_and_one_it_does_not_is_not() {
    let crd = |plural: &str, group: &str| {
        format!(
            "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {{name: {plural}.{group}}}\nspec:\n  group: {group}\n  scope: Cluster\n  names: {{kind: X, plural: {plural}}}\n  versions: [{{name: v1, served: true, storage: true, schema: {{openAPIV3Schema: {{type: object}}}}}}]\n"
        )
    };
    // Resources openshift/api publishes CRDs for, in groups shared with optional operators
    // (issue 33 item 3: the console's, monitoring's and the others were not known before).
    for (served, group) in [
        ("consoles", "operator.openshift.io"),
        ("etcds", "operator.openshift.io"),
        ("kubeapiservers", "operator.openshift.io"),
        ("ingresscontrollers", "operator.openshift.io"),
        ("consoleplugins", "console.openshift.io"),
        ("consolequickstarts", "console.openshift.io"),
        ("alertingrules", "monitoring.openshift.io"),
        ("dnsrecords", "ingress.operator.openshift.io"),
        ("helmchartrepositories", "helm.openshift.io"),
    ] {
        let refused = refusal(render(
            &plain(&crd(served, group)),
            &options(&PowerClass::ALL),
        ));
        assert_eq!(refused.0[0].rule, ContentRule::BuiltInApiGroup, "{served}");
        assert!(
            refused.0[0].detail.contains("which the platform serves")
                && refused.0[0]
                    .detail
                    .contains(pom_render::served_apis::OPENSHIFT_API_VERSION),
            "{served}: {}",
            refused.0[0].detail
        );
    }
    // Whole groups: Kubernetes' (those k8s.io/api registers) and the aggregated API servers'.
    for (plural, group) in [
        ("migrations", "storagemigration.k8s.io"),
        ("gadgets", "packages.operators.coreos.com"),
        ("gadgets", "route.openshift.io"),
    ] {
        let refused = refusal(render(
            &plain(&crd(plural, group)),
            &options(&PowerClass::ALL),
        ));
        assert_eq!(refused.0[0].rule, ContentRule::BuiltInApiGroup, "{group}");
        assert!(
            refused.0[0].detail.contains("serves every resource of it"),
            "{group}: {}",
            refused.0[0].detail
        );
    }
    render(
        &plain(&crd("certmanagers", "operator.openshift.io")),
        &options(&[]),
    )
    .unwrap();
    render(
        &plain(&crd("widgets", "console.openshift.io")),
        &options(&[]),
    )
    .unwrap();
}
