#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Table tests of adoption: every obstacle, the PlatformOperator's fields, the proof.

use std::collections::{BTreeMap, BTreeSet};

use pom_api::PlatformOperator;
use pom_api::olm::{ClusterServiceVersion, OperatorGroup, Subscription};
use pom_api::platform_operator::UpgradeApproval;
use pom_render::{BundleFiles, PowerClass};
use pom_resolver::fbc::{Catalog, parse_documents};
use serde_json::{Value, json};

use super::*;

const NS: &str = "widgets";
const PACKAGE: &str = "widget-operator";
const CSV: &str = "widget-operator.v1.2.0";

fn subscription(ns: &str, name: &str, package: &str, extra: Value) -> Subscription {
    let mut sub = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "Subscription",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"name": package, "channel": "stable", "source": "redhat-operators",
                 "sourceNamespace": "openshift-marketplace"},
        "status": {"installedCSV": CSV, "currentCSV": CSV, "state": "AtLatestKnown"},
    });
    merge(&mut sub, extra);
    serde_json::from_value(sub).unwrap()
}

fn csv(ns: &str, extra: Value) -> ClusterServiceVersion {
    let mut csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": CSV, "namespace": ns},
        "spec": {"version": "1.2.0", "installModes": [
            {"type": "OwnNamespace", "supported": true}, {"type": "SingleNamespace", "supported": true},
            {"type": "MultiNamespace", "supported": false}, {"type": "AllNamespaces", "supported": true}]},
        "status": {"phase": "Succeeded"},
    });
    merge(&mut csv, extra);
    serde_json::from_value(csv).unwrap()
}

fn group(ns: &str, name: &str, spec: Value, status: Value) -> OperatorGroup {
    serde_json::from_value(json!({
        "apiVersion": "operators.coreos.com/v1", "kind": "OperatorGroup",
        "metadata": {"name": name, "namespace": ns}, "spec": spec, "status": status,
    }))
    .unwrap()
}

fn po(name: &str, package: &str) -> PlatformOperator {
    serde_json::from_value(json!({
        "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
        "metadata": {"name": name}, "spec": {"package": {"name": package}},
    }))
    .unwrap()
}

/// Deep-merges `extra` into `base` (objects merged, anything else replaced; `null` removes).
fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (b, e) => *b = e,
    }
}

/// The cluster: Subscriptions, CSVs, OperatorGroups, PlatformOperators.
struct Cluster {
    subs: Vec<Subscription>,
    csvs: Vec<ClusterServiceVersion>,
    groups: Vec<OperatorGroup>,
    pos: Vec<PlatformOperator>,
}

impl Cluster {
    /// One AllNamespaces install of the package in [`NS`].
    fn one() -> Self {
        Self {
            subs: vec![subscription(NS, PACKAGE, PACKAGE, json!({}))],
            csvs: vec![csv(NS, json!({}))],
            groups: vec![group(NS, "global", json!({}), json!({"namespaces": [""]}))],
            pos: Vec::new(),
        }
    }

    fn proposal(&self) -> Result<Proposal, NotAdoptable> {
        let all = installs(&self.subs, &self.csvs, &self.groups, &self.pos);
        let mine = all
            .iter()
            .find(|i| i.key() == format!("{NS}/{PACKAGE}"))
            .unwrap();
        propose(mine)
    }
}

fn kind(result: &Result<Proposal, NotAdoptable>) -> &'static str {
    match result {
        Ok(_) => "Ok",
        Err(e) => e.as_str(),
    }
}

#[test]
fn every_obstacle_of_the_install_itself() {
    type Edit = fn(&mut Cluster);
    let cases: &[(&str, Edit, &str)] = &[
        ("as OLM left it", |_| {}, "Ok"),
        (
            "nothing installed yet",
            |c| {
                c.subs[0] = subscription(
                    NS,
                    PACKAGE,
                    PACKAGE,
                    json!({"status": {"installedCSV": null, "state": "UpgradePending"}}),
                )
            },
            "NotInstalled",
        ),
        ("the CSV is gone", |c| c.csvs.clear(), "CsvMissing"),
        (
            "only a copied CSV is there",
            |c| {
                c.csvs[0] = csv(
                    NS,
                    json!({"metadata": {"labels": {"olm.copiedFrom": "elsewhere"}}}),
                )
            },
            "CsvMissing",
        ),
        (
            "the CSV failed",
            |c| c.csvs[0] = csv(NS, json!({"status": {"phase": "Failed"}})),
            "CsvNotSucceeded",
        ),
        (
            "the CSV's version is junk",
            |c| c.csvs[0] = csv(NS, json!({"spec": {"version": "one"}})),
            "CsvVersionUnreadable",
        ),
        ("no OperatorGroup", |c| c.groups.clear(), "NoOperatorGroup"),
        (
            "two OperatorGroups",
            |c| c.groups.push(group(NS, "other", json!({}), json!({}))),
            "SeveralOperatorGroups",
        ),
        (
            "a label-selected OperatorGroup OLM has not resolved",
            |c| {
                c.groups[0] = group(
                    NS,
                    "sel",
                    json!({"selector": {"matchLabels": {"a": "b"}}}),
                    json!({}),
                )
            },
            "OperatorGroupUnresolved",
        ),
        (
            "MultiNamespace",
            |c| {
                c.groups[0] = group(
                    NS,
                    "multi",
                    json!({"targetNamespaces": ["a", "b"]}),
                    json!({"namespaces": ["a", "b"]}),
                )
            },
            "MultiNamespace",
        ),
        (
            "OLM's global namespace",
            |c| {
                c.subs[0] = subscription("openshift-operators", PACKAGE, PACKAGE, json!({}));
                c.csvs[0] = csv("openshift-operators", json!({}));
                c.groups[0] = group(
                    "openshift-operators",
                    "global-operators",
                    json!({}),
                    json!({"namespaces": [""]}),
                );
                // Looked up under its own namespace below.
                c.subs
                    .push(subscription(NS, PACKAGE, "unrelated", json!({})));
            },
            "PlatformNamespace",
        ),
        (
            "a namespace shared with another Subscription",
            |c| {
                c.subs
                    .push(subscription(NS, "other", "other-operator", json!({})))
            },
            "SharedNamespace",
        ),
        (
            "the package installed twice",
            |c| {
                c.subs
                    .push(subscription("elsewhere", PACKAGE, PACKAGE, json!({})))
            },
            "PackageInstalledTwice",
        ),
        (
            "a PlatformOperator already manages the package",
            |c| c.pos.push(po("widgets-po", PACKAGE)),
            "AlreadyManaged",
        ),
        (
            "an owned APIService",
            |c| {
                c.csvs[0] = csv(
                    NS,
                    json!({"spec": {"apiservicedefinitions": {"owned": [{"name": "v1.metrics.example.com", "version": "v1", "kind": "Metric"}]}}}),
                )
            },
            "OwnsApiService",
        ),
        (
            "a required CRD",
            |c| {
                c.csvs[0] = csv(
                    NS,
                    json!({"spec": {"customresourcedefinitions": {"required": [{"name": "gadgets.example.com", "version": "v1", "kind": "Gadget"}]}}}),
                )
            },
            "Dependencies",
        ),
        (
            "a config field POM does not apply",
            |c| {
                c.subs[0] = subscription(
                    NS,
                    PACKAGE,
                    PACKAGE,
                    json!({"spec": {"config": {"priorityClassName": "x"}}}),
                )
            },
            "ConfigNotMappable",
        ),
        (
            "a config over the PlatformOperator's limits",
            |c| {
                let env: Vec<Value> = (0..65)
                    .map(|i| json!({"name": format!("E{i}"), "value": "v"}))
                    .collect();
                c.subs[0] = subscription(
                    NS,
                    PACKAGE,
                    PACKAGE,
                    json!({"spec": {"config": {"env": env}}}),
                );
            },
            "ConfigNotMappable",
        ),
    ];
    for (what, edit, want) in cases {
        let mut cluster = Cluster::one();
        edit(&mut cluster);
        let got = if *what == "OLM's global namespace" {
            let all = installs(&cluster.subs, &cluster.csvs, &cluster.groups, &cluster.pos);
            propose(
                all.iter()
                    .find(|i| i.namespace() == "openshift-operators")
                    .unwrap(),
            )
        } else {
            cluster.proposal()
        };
        assert_eq!(kind(&got), *want, "{what}: {got:?}");
        if let Err(e) = &got {
            assert!(!e.to_string().is_empty());
        }
    }
}

#[test]
fn the_operator_group_decides_the_watch_namespace() {
    let cases: &[(Value, Value, Option<&str>, &str)] = &[
        (
            json!({}),
            json!({"namespaces": [""]}),
            None,
            "AllNamespaces",
        ),
        (json!({}), json!({}), None, "AllNamespaces"),
        (
            json!({"targetNamespaces": [NS]}),
            json!({"namespaces": [NS]}),
            Some(NS),
            "OwnNamespace",
        ),
        (
            json!({"targetNamespaces": ["team-a"]}),
            json!({}),
            Some("team-a"),
            "SingleNamespace",
        ),
        // OLM's resolved list wins over the spec.
        (
            json!({"selector": {"matchLabels": {"team": "a"}}}),
            json!({"namespaces": ["team-a"]}),
            Some("team-a"),
            "SingleNamespace",
        ),
    ];
    for (spec, status, watch, mode) in cases {
        let mut cluster = Cluster::one();
        cluster.groups[0] = group(NS, "og", spec.clone(), status.clone());
        let proposal = cluster.proposal().unwrap();
        assert_eq!(proposal.target.mode(), *mode, "{spec} {status}");
        assert_eq!(
            proposal.platform_operator.spec.watch_namespace.as_deref(),
            *watch,
            "{spec} {status}"
        );
    }
}

#[test]
fn the_platform_operator_pins_the_installed_bundle() {
    let proposal = Cluster::one().proposal().unwrap();
    let po = &proposal.platform_operator;
    assert_eq!(po.metadata.name.as_deref(), Some(PACKAGE));
    assert_eq!(po.spec.package.name, PACKAGE);
    assert_eq!(po.spec.package.channel.as_deref(), Some("stable"));
    assert_eq!(po.spec.package.version_range.as_deref(), Some("=1.2.0"));
    assert_eq!(po.spec.install_namespace.as_deref(), Some(NS));
    assert_eq!(po.spec.upgrade_approval, UpgradeApproval::Automatic);
    assert_eq!(po.spec.approved_bundle, None);
    assert_eq!(po.spec.config, None);
    // The pin reads as POM's range syntax and admits exactly the installed version.
    let range =
        pom_resolver::range::VersionRange::parse(po.spec.package.version_range.as_deref().unwrap())
            .unwrap();
    for (version, admitted) in [("1.2.0", true), ("1.2.1", false), ("1.1.9", false)] {
        assert_eq!(
            range.matches(&semver::Version::parse(version).unwrap()),
            admitted,
            "{version}"
        );
    }
}

#[test]
fn manual_approval_and_config_carry_over() {
    let mut cluster = Cluster::one();
    cluster.subs[0] = subscription(
        NS,
        PACKAGE,
        PACKAGE,
        json!({"spec": {"installPlanApproval": "Manual", "channel": null, "config": {
            "selector": {"matchLabels": {"ignored": "by OLM"}},
            "env": [{"name": "LOG_LEVEL", "value": "debug"}],
            "nodeSelector": {"node-role.kubernetes.io/infra": ""},
            "tolerations": [{"key": "infra", "operator": "Exists"}],
            "resources": {"limits": {"memory": "256Mi"}},
        }}}),
    );
    let po = cluster.proposal().unwrap().platform_operator;
    assert_eq!(po.spec.upgrade_approval, UpgradeApproval::Manual);
    // OLM approved this bundle already: adopting it does not wait for a second approval.
    assert_eq!(po.spec.approved_bundle.as_deref(), Some(CSV));
    assert_eq!(
        po.spec.package.channel, None,
        "the default channel stays the default"
    );
    let config = po.spec.config.unwrap();
    assert_eq!(config.env.len(), 1);
    assert_eq!(config.env[0].value.as_deref(), Some("debug"));
    assert_eq!(config.tolerations.len(), 1);
    assert!(config.resources.is_some());
    assert_eq!(
        config.node_selector,
        Some(BTreeMap::from([(
            "node-role.kubernetes.io/infra".to_owned(),
            String::new()
        )]))
    );
    // An empty config is none.
    let mut cluster = Cluster::one();
    cluster.subs[0] = subscription(NS, PACKAGE, PACKAGE, json!({"spec": {"config": {}}}));
    assert_eq!(
        cluster.proposal().unwrap().platform_operator.spec.config,
        None
    );
}

// ---- step 3: catalogs, resolver, render ----

/// A catalog of the package with bundles 1.1.0 → 1.2.0 → 1.3.0 in `stable` (1.2.0 also in
/// `fast`), `deps` on 1.2.0.
fn catalog(version_of_csv: &str, deps: bool) -> Catalog {
    let bundle = |name: &str, version: &str, extra: Vec<Value>| {
        let mut properties = vec![
            json!({"type": "olm.package", "value": {"packageName": PACKAGE, "version": version}}),
        ];
        properties.extend(extra);
        json!({"schema": "olm.bundle", "name": name, "package": PACKAGE,
               "image": format!("registry.example.com/widget-bundle:{version}"), "properties": properties})
    };
    let dep = if deps {
        vec![
            json!({"type": "olm.package.required", "value": {"packageName": "gadget-operator", "versionRange": ">=1.0.0"}}),
        ]
    } else {
        Vec::new()
    };
    let docs = [
        json!({"schema": "olm.package", "name": PACKAGE, "defaultChannel": "stable"}),
        json!({"schema": "olm.channel", "name": "stable", "package": PACKAGE, "entries": [
            {"name": "widget-operator.v1.1.0"},
            {"name": CSV, "replaces": "widget-operator.v1.1.0"},
            {"name": "widget-operator.v1.3.0", "replaces": CSV}]}),
        json!({"schema": "olm.channel", "name": "fast", "package": PACKAGE, "entries": [
            {"name": "widget-operator.v1.3.0"}]}),
        bundle("widget-operator.v1.1.0", "1.1.0", Vec::new()),
        bundle(CSV, version_of_csv, dep),
        bundle("widget-operator.v1.3.0", "1.3.0", Vec::new()),
    ];
    let text: String = docs.iter().map(|d| format!("{d}\n")).collect();
    parse_documents([("catalog.json".to_owned(), text.into_bytes())]).unwrap()
}

fn located(cluster: &Cluster, content: &Catalog) -> Result<Located, NotAdoptable> {
    let inputs = [("main", 0, content)];
    locate(cluster.proposal().unwrap(), &inputs, None, None)
}

#[test]
fn the_catalogs_and_the_resolver_must_lead_to_the_installed_bundle() {
    let good = catalog("1.2.0", false);
    let found = located(&Cluster::one(), &good).unwrap();
    // Without the pin the resolver would take 1.3.0: the pin holds it to what runs.
    assert_eq!(found.chosen.name, CSV);
    assert_eq!(found.chosen.catalog, "main");
    assert_eq!(found.chosen.channel, "stable");

    let not = |r: Result<Located, NotAdoptable>| r.unwrap_err().as_str();
    assert_eq!(
        not(located(&Cluster::one(), &catalog("1.2.1", false))),
        "VersionMismatch"
    );
    assert_eq!(
        not(located(&Cluster::one(), &catalog("1.2.0", true))),
        "Dependencies"
    );
    let mut fast = Cluster::one();
    fast.subs[0] = subscription(NS, PACKAGE, PACKAGE, json!({"spec": {"channel": "fast"}}));
    assert_eq!(not(located(&fast, &good)), "ResolverDisagrees");
    let mut other = Cluster::one();
    other.subs[0] = subscription(NS, PACKAGE, "gadget-operator", json!({}));
    let proposal = {
        let all = installs(&other.subs, &other.csvs, &other.groups, &other.pos);
        propose(&all[0]).unwrap()
    };
    let inputs = [("main", 0, &good)];
    assert_eq!(not(locate(proposal, &inputs, None, None)), "NotInCatalog");
    let none: [pom_resolver::select::CatalogInput<'_>; 0] = [];
    assert_eq!(
        not(locate(
            Cluster::one().proposal().unwrap(),
            &none,
            None,
            None
        )),
        "NotInCatalog"
    );
}

/// A registry+v1 bundle of the CSV, supporting `modes`, whose ServiceAccount gets
/// `cluster_rules` cluster-wide, and `extra` manifests.
fn bundle(modes: &[&str], cluster_rules: Value, extra: &[(&str, &str)]) -> BundleFiles {
    let install_modes: Vec<Value> = [
        "OwnNamespace",
        "SingleNamespace",
        "MultiNamespace",
        "AllNamespaces",
    ]
    .iter()
    .map(|m| json!({"type": m, "supported": modes.contains(m)}))
    .collect();
    let csv = json!({
        "apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
        "metadata": {"name": CSV},
        "spec": {"version": "1.2.0", "installModes": install_modes, "install": {"strategy": "deployment", "spec": {
            "clusterPermissions": [{"serviceAccountName": "widget-operator", "rules": cluster_rules}],
            "deployments": [{"name": "widget-operator", "spec": {
                "selector": {"matchLabels": {"app": "widget"}},
                "template": {"metadata": {"labels": {"app": "widget"}}, "spec": {
                    "serviceAccountName": "widget-operator",
                    "containers": [{"name": "manager", "image": "registry.example.com/widget:1.2.0"}]}}}}]}}},
    });
    let mut files = BTreeMap::from([
        (
            "metadata/annotations.yaml".to_owned(),
            format!("annotations:\n  operators.operatorframework.io.bundle.mediatype.v1: registry+v1\n  operators.operatorframework.io.bundle.manifests.v1: manifests/\n  operators.operatorframework.io.bundle.package.v1: {PACKAGE}\n").into_bytes(),
        ),
        ("manifests/csv.yaml".to_owned(), csv.to_string().into_bytes()),
    ]);
    for (path, text) in extra {
        files.insert(format!("manifests/{path}"), text.as_bytes().to_vec());
    }
    BundleFiles::new(files)
}

const ALL: &[&str] = &["OwnNamespace", "SingleNamespace", "AllNamespaces"];

#[test]
fn the_render_decides_consent_refusal_and_install_mode() {
    let content = catalog("1.2.0", false);
    let found = located(&Cluster::one(), &content).unwrap();
    let context = RenderContext::default();
    let read = json!([{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]);
    let escalate = json!([{"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["escalate", "bind"]}]);

    // Adoptable as it is: the proof lists the objects, the PlatformOperator has no consent.
    let files = bundle(ALL, read.clone(), &[]);
    let (verdict, proof, po) = judge(&found, Ok(&files), &context);
    assert_eq!(verdict, Verdict::Adoptable);
    let proof = proof.unwrap();
    assert!(proof.consent.is_empty());
    assert_eq!(proof.target, InstallTarget::AllNamespaces);
    assert!(
        proof.objects.iter().any(|o| o.kind == "Deployment"
            && o.name == "widget-operator"
            && o.namespace.as_deref() == Some(NS)),
        "{:?}",
        proof.objects
    );
    assert!(po.spec.consent.is_empty());

    // Dangerous powers: adoptable with the consent they need, carried by the PlatformOperator.
    let files = bundle(ALL, escalate, &[]);
    let (verdict, proof, po) = judge(&found, Ok(&files), &context);
    assert_eq!(
        verdict,
        Verdict::AdoptableWithConsent {
            powers: BTreeSet::from([PowerClass::ClusterAdminEquivalent])
        }
    );
    assert!(po.spec.consent.cluster_admin_equivalent);
    assert!(proof.unwrap().powers[&PowerClass::ClusterAdminEquivalent] > 0);

    // Refused for more than consent: a Namespace in the bundle.
    let files = bundle(
        ALL,
        read.clone(),
        &[(
            "ns.yaml",
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: extra}\n",
        )],
    );
    let (verdict, proof, _) = judge(&found, Ok(&files), &context);
    assert!(
        matches!(verdict, Verdict::NotAdoptable(NotAdoptable::Refused { .. })),
        "{verdict:?}"
    );
    assert!(proof.is_none());

    // OLM runs it AllNamespaces, the bundle POM reads supports only OwnNamespace.
    let files = bundle(&["OwnNamespace"], read, &[]);
    let (verdict, _, _) = judge(&found, Ok(&files), &context);
    assert!(
        matches!(
            verdict,
            Verdict::NotAdoptable(NotAdoptable::InstallModeMismatch { .. })
        ),
        "{verdict:?}"
    );

    // A bundle that cannot be pulled cannot be judged.
    let (verdict, _, _) = judge(&found, Err("registry down"), &context);
    assert!(matches!(
        verdict,
        Verdict::NotAdoptable(NotAdoptable::BundleUnreadable { .. })
    ));
}

#[test]
fn the_proof_compares_rendered_and_running_objects() {
    let key = |kind: &str, name: &str| ObjectKey {
        api_version: "v1".into(),
        kind: kind.into(),
        namespace: Some(NS.into()),
        name: name.into(),
    };
    let content = catalog("1.2.0", false);
    let found = located(&Cluster::one(), &content).unwrap();
    let files = bundle(ALL, json!([]), &[]);
    let (_, proof, _) = judge(&found, Ok(&files), &RenderContext::default());
    let mut proof = proof.unwrap();
    proof.objects = vec![
        key("ServiceAccount", "widget-operator"),
        key("Service", "new"),
    ];
    let running = [
        key("ServiceAccount", "widget-operator"),
        key("Secret", "olm-generated"),
    ];
    let comparison = proof.compare(&running);
    assert_eq!(
        comparison.both,
        vec![key("ServiceAccount", "widget-operator")]
    );
    assert_eq!(comparison.rendered_only, vec![key("Service", "new")]);
    assert_eq!(
        comparison.running_only,
        vec![key("Secret", "olm-generated")]
    );
}
