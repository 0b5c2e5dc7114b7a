//! What an admission webhook of a bundle reaches (issue 33 items 3 and 4): its rules expanded
//! to (group, resource, operation) triples, each judged by one table ([`REACH_TABLE`]).
//!
//! A webhook sees (and a mutating one changes) every object its rules match, in every
//! namespace its selector lets through: over kinds that are not the bundle's own it is a power
//! of the bundle, like an RBAC grant. A triple is the bundle's own only when one of its CRDs
//! defines exactly that group and plural (a subresource of it included), never because the
//! group is one of its CRDs' groups: a group holds other bundles' kinds too. The others are
//! refused (RBAC, ServiceAccounts, admission, CRDs, nodes, certificates, namespaces, POM's own
//! kinds, every resource of a group), or a power: the classes of the rows they match, and
//! always [`PowerClass::AdmissionWebhooks`], whose consent names the webhook and the digest of
//! what it covers ([`WebhookConsent`]), so a later bundle whose webhook covers anything more
//! asks again.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::content_policy::ContentRule;
use super::powers::PowerClass;

/// How many (group, resource, operation) triples one webhook configuration's rules may expand
/// to: more is refused before anything is judged (the rules are the publisher's input; real
/// webhooks match a few dozen).
pub const MAX_WEBHOOK_TRIPLES: usize = 4096;

/// The operations an admission rule names (`*` is all of them).
pub const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

/// POM's API group: no webhook may ever see its kinds.
pub const POM_API_GROUP: &str = "platform.openshift.io";

/// The admin's consent to one webhook, bound to what it covers: the webhook configuration's
/// name and the digest of the triples it matches outside the bundle's own kinds
/// (`spec.consent.webhooks[]`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct WebhookConsent {
    pub name: String,
    /// `sha256:<64 hex>` of [`WebhookReach::covered`].
    pub covers: String,
}

impl fmt::Display for WebhookConsent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{name: {}, covers: \"{}\"}}", self.name, self.covers)
    }
}

/// What a row of [`REACH_TABLE`] makes of a triple it matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowReach {
    /// Never: the rule that refuses it.
    Refused(ContentRule),
    /// A power of that class (besides [`PowerClass::AdmissionWebhooks`]).
    Consent(PowerClass),
}

/// One row: the group, the resources (empty: every resource of the group), what it means,
/// and where the judgement comes from.
#[derive(Debug, PartialEq, Eq)]
pub struct ReachRow {
    pub group: &'static str,
    pub resources: &'static [&'static str],
    pub reach: RowReach,
    pub what: &'static str,
    pub source: &'static str,
}

const REFUSED: RowReach = RowReach::Refused(ContentRule::WebhookMatchesProtectedKind);
const ADMIN: RowReach = RowReach::Consent(PowerClass::ClusterAdminEquivalent);

/// The one table. A triple no row matches, outside the bundle's own kinds, is a power of
/// [`PowerClass::AdmissionWebhooks`] only.
pub const REACH_TABLE: &[ReachRow] = &[
    ReachRow {
        group: POM_API_GROUP,
        resources: &[],
        reach: RowReach::Refused(ContentRule::WebhookMatchesPlatformOperators),
        what: "POM's own PlatformOperators and Catalogs",
        source: "PRODUCT §6: no webhook sees POM's kinds",
    },
    ReachRow {
        group: "rbac.authorization.k8s.io",
        resources: &[],
        reach: REFUSED,
        what: "RBAC: who may do what",
        source: "PRODUCT §6: no change to any other principal's permissions; Kubernetes RBAC good practices: escalate and bind verbs",
    },
    ReachRow {
        group: "",
        resources: &["serviceaccounts"],
        reach: REFUSED,
        what: "ServiceAccounts and their tokens",
        source: "Kubernetes RBAC good practices: token request; rbac-police token_request",
    },
    ReachRow {
        group: "admissionregistration.k8s.io",
        resources: &[],
        reach: REFUSED,
        what: "admission configuration (webhooks and policies)",
        source: "Kubernetes RBAC good practices: control admission webhooks",
    },
    ReachRow {
        group: "apiextensions.k8s.io",
        resources: &[],
        reach: REFUSED,
        what: "CustomResourceDefinitions (every other operator's API)",
        source: "PRODUCT §6: CRD conversion is a webhook; a bundle's claim ends at its own CRDs",
    },
    ReachRow {
        group: "apiregistration.k8s.io",
        resources: &[],
        reach: REFUSED,
        what: "APIServices (aggregated APIs)",
        source: "PRODUCT §6: aggregated APIs",
    },
    ReachRow {
        group: "",
        resources: &["nodes"],
        reach: REFUSED,
        what: "Nodes",
        source: "Kubernetes RBAC good practices: access to proxy subresource of Nodes; PRODUCT §6: node objects are the cluster's",
    },
    ReachRow {
        group: "certificates.k8s.io",
        resources: &[],
        reach: REFUSED,
        what: "certificate signing requests and trust bundles",
        source: "Kubernetes RBAC good practices: CSRs and certificate issuing; rbac-police approve_csrs",
    },
    ReachRow {
        group: "",
        resources: &["namespaces"],
        reach: REFUSED,
        what: "Namespaces (their Pod Security and run-level labels)",
        source: "Kubernetes RBAC good practices: namespace modification",
    },
    ReachRow {
        group: "security.openshift.io",
        resources: &["securitycontextconstraints"],
        reach: REFUSED,
        what: "SecurityContextConstraints",
        source: "OpenShift: SCCs decide which pods are admitted",
    },
    ReachRow {
        group: "",
        resources: &["pods", "replicationcontrollers"],
        reach: ADMIN,
        what: "every tenant's workloads (it sees every pod spec, decides which run, and a mutating one changes what they run, as any ServiceAccount)",
        source: "Kubernetes RBAC good practices: workload creation and control admission webhooks; rbac-police assign_sa, modify_pods",
    },
    ReachRow {
        group: "apps",
        resources: &["deployments", "replicasets", "statefulsets", "daemonsets"],
        reach: ADMIN,
        what: "every tenant's workloads",
        source: "Kubernetes RBAC good practices: workload creation; rbac-police assign_sa",
    },
    ReachRow {
        group: "batch",
        resources: &["jobs", "cronjobs"],
        reach: ADMIN,
        what: "every tenant's workloads",
        source: "Kubernetes RBAC good practices: workload creation; rbac-police assign_sa",
    },
    ReachRow {
        group: "apps.openshift.io",
        resources: &["deploymentconfigs"],
        reach: ADMIN,
        what: "every tenant's workloads",
        source: "Kubernetes RBAC good practices: workload creation; rbac-police assign_sa",
    },
    ReachRow {
        group: "",
        resources: &["secrets"],
        reach: ADMIN,
        what: "every tenant's Secrets, ServiceAccount token Secrets included as the token controller fills them",
        source: "rbac-police issue_token_secrets, list_secrets",
    },
];

/// One thing a webhook's rules match.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Triple {
    pub group: String,
    /// The resource as the rule names it (`pods`, `pods/ephemeralcontainers`, `*`).
    pub resource: String,
    pub operation: String,
}

impl Triple {
    /// The resource without its subresource (`pods/exec` → `pods`).
    fn base(&self) -> &str {
        self.resource.split('/').next().unwrap_or_default()
    }

    /// `resource.group`, or `resource` for the core group.
    fn resource_display(&self) -> String {
        if self.group.is_empty() {
            self.resource.clone()
        } else {
            format!("{}.{}", self.resource, self.group)
        }
    }
}

/// How one triple is judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judged {
    /// A kind one of the bundle's CRDs defines (or a subresource of one).
    Own,
    /// Every group, or every resource of a group: refused (`WebhookMatchesPlatformOperators`
    /// for every group, which includes POM's; `WebhookMatchesProtectedKind` otherwise).
    Wildcard(ContentRule),
    /// A row of [`REACH_TABLE`].
    Row(&'static ReachRow),
    /// Outside the bundle's own kinds, no row: an admission-webhook power only.
    Other,
}

/// Judges `triple` against the bundle's own (group, plural) pairs and the table.
pub fn judge(triple: &Triple, own_plurals: &BTreeSet<(String, String)>) -> Judged {
    if triple.group == "*" {
        return Judged::Wildcard(ContentRule::WebhookMatchesPlatformOperators);
    }
    let row = REACH_TABLE.iter().find(|row| {
        row.group == triple.group
            && (row.resources.is_empty() || row.resources.contains(&triple.base()))
    });
    match row {
        // A refused group (POM's) is refused by its own rule, `*` resources included.
        Some(row) if matches!(row.reach, RowReach::Refused(_)) => Judged::Row(row),
        _ if triple.base() == "*" => Judged::Wildcard(ContentRule::WebhookMatchesProtectedKind),
        Some(row) => Judged::Row(row),
        None if own_plurals.contains(&(triple.group.clone(), triple.base().to_owned())) => {
            Judged::Own
        }
        None => Judged::Other,
    }
}

/// What one webhook configuration reaches.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WebhookReach {
    /// The refusals: rule and sentence.
    pub refused: Vec<(ContentRule, String)>,
    /// The rows its triples match that are powers (class, what, source), each with the
    /// triples it matches.
    pub classes: BTreeMap<(PowerClass, &'static str, &'static str), BTreeSet<Triple>>,
    /// Every triple outside the bundle's own kinds that is not refused: what the consent of
    /// [`PowerClass::AdmissionWebhooks`] is bound to.
    pub covered: BTreeSet<Triple>,
}

impl WebhookReach {
    /// The digest of `kind` and [`Self::covered`]: `sha256:<64 hex>`.
    ///
    /// Each field is hashed after its length, so no two lists of fields hash the same input
    /// (the fields are the publisher's strings: a resource named `"pods\nDELETE pods"` must
    /// not stand for two triples).
    pub fn covers(&self, kind: &str) -> String {
        let mut hasher = Sha256::new();
        let mut field = |text: &str| {
            hasher.update((text.len() as u64).to_le_bytes());
            hasher.update(text.as_bytes());
        };
        field(kind);
        for triple in &self.covered {
            field(&triple.operation);
            field(&triple.resource);
            field(&triple.group);
        }
        format!("sha256:{}", hex::encode(hasher.finalize()))
    }
}

/// `triples` as an admin reads them: `CREATE, UPDATE pods; DELETE deployments.apps`.
pub fn describe(triples: &BTreeSet<Triple>) -> String {
    let mut by_resource: BTreeMap<String, Vec<&str>> = BTreeMap::new();
    for triple in triples {
        by_resource
            .entry(triple.resource_display())
            .or_default()
            .push(triple.operation.as_str());
    }
    by_resource
        .into_iter()
        .map(|(resource, ops)| format!("{} {resource}", ops.join(", ")))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The strings of `field` of `value` (a non-string item reads as `*`: it matches nothing
/// narrower, so it is judged as the widest).
fn strings<'a>(value: &'a Value, field: &str) -> Vec<&'a str> {
    value
        .get(field)
        .and_then(Value::as_array)
        .map(|items| items.iter().map(|i| i.as_str().unwrap_or("*")).collect())
        .unwrap_or_default()
}

/// Every triple the rules of `configuration`'s webhooks match, or `None` past
/// [`MAX_WEBHOOK_TRIPLES`].
pub fn expand(configuration: &Value) -> Option<BTreeSet<Triple>> {
    let mut triples = BTreeSet::new();
    let webhooks = configuration
        .get("webhooks")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let rules = webhooks.iter().flat_map(|webhook| {
        webhook
            .get("rules")
            .and_then(Value::as_array)
            .map(Vec::as_slice)
            .unwrap_or_default()
    });
    for rule in rules {
        let operations: Vec<&str> = strings(rule, "operations")
            .into_iter()
            .flat_map(|op| {
                if op == "*" {
                    OPERATIONS.to_vec()
                } else {
                    vec![op]
                }
            })
            .collect();
        for group in strings(rule, "apiGroups") {
            for resource in strings(rule, "resources") {
                for operation in &operations {
                    triples.insert(Triple {
                        group: group.to_owned(),
                        resource: resource.to_owned(),
                        operation: (*operation).to_owned(),
                    });
                    if triples.len() > MAX_WEBHOOK_TRIPLES {
                        return None;
                    }
                }
            }
        }
    }
    Some(triples)
}

/// What `configuration` (a webhook configuration POM rendered) reaches, given the bundle's own
/// (group, plural) pairs.
pub fn reach(configuration: &Value, own_plurals: &BTreeSet<(String, String)>) -> WebhookReach {
    let mut reach = WebhookReach::default();
    let Some(triples) = expand(configuration) else {
        reach.refused.push((
            ContentRule::WebhookMatchesProtectedKind,
            format!(
                "its rules expand to more than {MAX_WEBHOOK_TRIPLES} (group, resource, operation) triples (MAX_WEBHOOK_TRIPLES); name the groups, resources and operations the webhook needs"
            ),
        ));
        return reach;
    };
    let mut refused: BTreeMap<(ContentRule, String), BTreeSet<Triple>> = BTreeMap::new();
    for triple in triples {
        match judge(&triple, own_plurals) {
            Judged::Own => {}
            Judged::Wildcard(rule) => {
                let what = if rule == ContentRule::WebhookMatchesPlatformOperators {
                    "every API group, POM's own PlatformOperators and Catalogs included"
                } else {
                    "every resource of a group, whatever other operators define there (a webhook is judged kind by kind)"
                };
                refused
                    .entry((rule, what.to_owned()))
                    .or_default()
                    .insert(triple);
            }
            Judged::Row(row) => match row.reach {
                RowReach::Refused(rule) => {
                    refused
                        .entry((rule, format!("{} [{}]", row.what, row.source)))
                        .or_default()
                        .insert(triple);
                }
                RowReach::Consent(class) => {
                    reach
                        .classes
                        .entry((class, row.what, row.source))
                        .or_default()
                        .insert(triple.clone());
                    reach.covered.insert(triple);
                }
            },
            Judged::Other => {
                reach.covered.insert(triple);
            }
        }
    }
    for ((rule, what), triples) in refused {
        reach.refused.push((
            rule,
            format!(
                "its rules match {} ({what}); a webhook may never see them",
                describe(&triples)
            ),
        ));
    }
    reach
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use serde_json::json;

    use super::*;

    fn triple(group: &str, resource: &str, operation: &str) -> Triple {
        Triple {
            group: group.to_owned(),
            resource: resource.to_owned(),
            operation: operation.to_owned(),
        }
    }

    fn own() -> BTreeSet<(String, String)> {
        BTreeSet::from([("example.com".to_owned(), "widgets".to_owned())])
    }

    /// What each triple is judged, one per kind of outcome and per row.
    #[test]
    fn triples_are_judged_kind_by_kind() {
        let refused = |rule| {
            move |j: Judged| {
                matches!(j, Judged::Row(r) if r.reach == RowReach::Refused(rule))
                    || j == Judged::Wildcard(rule)
            }
        };
        let admin = |j: Judged| matches!(j, Judged::Row(r) if r.reach == RowReach::Consent(PowerClass::ClusterAdminEquivalent));
        let protected = refused(ContentRule::WebhookMatchesProtectedKind);
        let pom = refused(ContentRule::WebhookMatchesPlatformOperators);
        let cases: Vec<(Triple, &dyn Fn(Judged) -> bool)> = vec![
            (triple("example.com", "widgets", "CREATE"), &|j| {
                j == Judged::Own
            }),
            (triple("example.com", "widgets/status", "UPDATE"), &|j| {
                j == Judged::Own
            }),
            (triple("example.com", "gadgets", "CREATE"), &|j| {
                j == Judged::Other
            }),
            (triple("example.com", "*", "CREATE"), &protected),
            (triple("", "configmaps", "CREATE"), &|j| j == Judged::Other),
            (triple("", "pods", "CREATE"), &admin),
            (triple("", "pods/exec", "CONNECT"), &admin),
            (triple("apps", "daemonsets", "UPDATE"), &admin),
            (triple("", "secrets", "UPDATE"), &admin),
            (triple("", "serviceaccounts/token", "CREATE"), &protected),
            (
                triple("rbac.authorization.k8s.io", "clusterroles", "CREATE"),
                &protected,
            ),
            (triple("", "namespaces", "UPDATE"), &protected),
            (triple("", "*", "UPDATE"), &protected),
            (triple("*", "pods", "CREATE"), &pom),
            (triple("platform.openshift.io", "*", "CREATE"), &pom),
        ];
        for (t, expected) in cases {
            let got = judge(&t, &own());
            assert!(expected(got), "{t:?}: {got:?}");
        }
    }

    #[test]
    fn every_row_names_its_source_and_no_two_rows_overlap() {
        for (i, row) in REACH_TABLE.iter().enumerate() {
            assert!(!row.source.is_empty() && !row.what.is_empty(), "{row:?}");
            for other in &REACH_TABLE[i + 1..] {
                let overlap = row.group == other.group
                    && (row.resources.is_empty()
                        || other.resources.is_empty()
                        || row.resources.iter().any(|r| other.resources.contains(r)));
                assert!(!overlap, "{row:?} / {other:?}");
            }
        }
    }

    #[test]
    fn rules_expand_to_triples_and_are_bounded() {
        let config = |rules: Value| json!({"webhooks": [{"rules": rules}]});
        let got = expand(&config(json!([
            {"apiGroups": ["", "apps"], "resources": ["pods", "deployments"], "operations": ["*"]}
        ])))
        .unwrap();
        assert_eq!(got.len(), 2 * 2 * OPERATIONS.len());
        let groups: Vec<String> = (0..100).map(|i| format!("g{i}.example.com")).collect();
        let resources: Vec<String> = (0..100).map(|i| format!("r{i}")).collect();
        let wide = config(
            json!([{"apiGroups": groups, "resources": resources, "operations": ["CREATE"]}]),
        );
        assert_eq!(expand(&wide), None);
        let refused = reach(&wide, &own()).refused;
        assert!(refused[0].1.contains("MAX_WEBHOOK_TRIPLES"), "{refused:?}");
    }

    proptest! {
        /// The consent's digest is bound to what the webhook covers: two webhooks have the same
        /// digest exactly when they cover the same triples (and are of the same kind).
        #[test]
        fn the_digest_is_bound_to_the_covered_triples(
            a in proptest::collection::btree_set((0..4usize, 0..4usize, 0..4usize), 0..12),
            b in proptest::collection::btree_set((0..4usize, 0..4usize, 0..4usize), 0..12),
        ) {
            let groups = ["", "apps", "other.example.org", "example.com"];
            let resources = ["pods", "configmaps", "deployments", "things"];
            let to_reach = |set: &BTreeSet<(usize, usize, usize)>| WebhookReach {
                covered: set
                    .iter()
                    .map(|&(g, r, o)| triple(groups[g], resources[r], OPERATIONS[o]))
                    .collect(),
                ..WebhookReach::default()
            };
            let (ra, rb) = (to_reach(&a), to_reach(&b));
            prop_assert_eq!(
                ra.covers("ValidatingWebhookConfiguration") == rb.covers("ValidatingWebhookConfiguration"),
                ra.covered == rb.covered
            );
            prop_assert_ne!(
                ra.covers("ValidatingWebhookConfiguration"),
                ra.covers("MutatingWebhookConfiguration")
            );
        }
    }

    #[test]
    fn a_field_cannot_stand_for_two() {
        let one = WebhookReach {
            covered: BTreeSet::from([triple("", "pods DELETE pods", "CREATE")]),
            ..WebhookReach::default()
        };
        let two = WebhookReach {
            covered: BTreeSet::from([triple("", "pods", "CREATE"), triple("", "pods", "DELETE")]),
            ..WebhookReach::default()
        };
        assert_ne!(one.covers("K"), two.covers("K"));
    }
}
