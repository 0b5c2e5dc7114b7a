//! What a bundle's ServiceAccounts can do, computed from the objects POM would apply and sorted
//! into the few classes an admin must see (PRODUCT §6, threat model).
//!
//! A catalog's publisher is trusted to run its operators with the powers their bundles declare,
//! *visibly*: this module makes them visible. It reads the rendered objects only (no cluster):
//! every Role and ClusterRole the bundle ships, at the scope its bindings give it (a ClusterRole
//! bound by a ClusterRoleBinding, or bound by nothing and so there for the operator to bind, is
//! cluster-wide; one bound only by RoleBindings grants in those namespaces), with RBAC's own
//! wildcard matching (`*` verbs, groups and resources; `pods/*`, `*/exec`), plus the pod
//! templates of its workloads judged against the `baseline` Pod Security level.
//!
//! The classes ([`PowerClass`]), each cluster-wide grant by the escalation path it opens (one
//! row of `CLUSTER_CHECKS` per path, each naming where the path is documented):
//! - `ClusterAdminEquivalent`: grants that let the holder give itself anything: `escalate`,
//!   `bind`, `impersonate`, tokens for other accounts (token requests, Secret writes), admission
//!   and CRD conversion control, aggregated APIs, the kubelet API (`nodes/proxy`),
//!   `exec`/`attach`/ephemeral containers in every pod, creating or changing workloads in every
//!   namespace (a pod runs as any ServiceAccount), signing certificates, SCC definitions,
//!   installing operators (POM's, OLM v0's and v1's kinds; OLM v0's namespaced kinds in one
//!   namespace too, so every verb on everything of a namespace), OpenShift's OAuth tokens, users
//!   and groups, and roles whose rules are collected by an aggregationRule;
//! - `PrivilegedWorkloads`: pod templates beyond `baseline`, `use` of an SCC other than the
//!   restricted and nonroot ones, relabelling namespaces (their Pod Security level; a Role its
//!   own namespace's), writing PersistentVolumes (hostPath);
//! - `PlatformConfig`: writes to the platform's configuration (`config.openshift.io`,
//!   `machineconfiguration.openshift.io`, `operator.openshift.io`) and to Endpoints and
//!   EndpointSlices in every namespace (where any Service's traffic goes, CVE-2021-25740);
//! - `SecretsClusterWide`: reading Secrets in every namespace (shown, no consent needed: 86% of
//!   the community bundles POM renders do), or pulling every namespace's images.
//!
//! The first three need the admin's consent on the PlatformOperator (`spec.consent`); the
//! content policy asks for it ([`super::content_policy`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::built_in_roles::{BUILT_IN_ROLES_VERSION, BuiltInRole, built_in_role};
use super::objects::{ObjectKey, str_at};
use super::pod_security;

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// A class of power that a bundle's ServiceAccounts hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PowerClass {
    /// Can grant itself anything (escalate, bind, impersonate, admission control, ...).
    ClusterAdminEquivalent,
    /// Runs pods beyond the `baseline` Pod Security level, or uses a privileged SCC.
    PrivilegedWorkloads,
    /// Writes the platform's configuration (config, machine-config, operator groups).
    PlatformConfig,
    /// Reads Secrets in every namespace (or pulls every namespace's images).
    SecretsClusterWide,
    /// An admission webhook over kinds that are not the bundle's own (issue 33 item 4): it
    /// sees, and may block or change, other workloads' objects. Consented per webhook, bound to
    /// the digest of what it covers (`spec.consent.webhooks`), never by class: a webhook a later
    /// bundle widens asks again.
    AdmissionWebhooks,
}

impl PowerClass {
    /// Every class, most dangerous first.
    pub const ALL: [PowerClass; 5] = [
        Self::ClusterAdminEquivalent,
        Self::PrivilegedWorkloads,
        Self::PlatformConfig,
        Self::AdmissionWebhooks,
        Self::SecretsClusterWide,
    ];

    /// The CamelCase name, as shown in status and by `pomctl render --permissions`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterAdminEquivalent => "ClusterAdminEquivalent",
            Self::PrivilegedWorkloads => "PrivilegedWorkloads",
            Self::PlatformConfig => "PlatformConfig",
            Self::SecretsClusterWide => "SecretsClusterWide",
            Self::AdmissionWebhooks => "AdmissionWebhooks",
        }
    }

    /// Parses [`PowerClass::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// Whether the admin must consent before POM applies a bundle with this power.
    pub fn needs_consent(self) -> bool {
        !matches!(self, Self::SecretsClusterWide)
    }

    /// The field of the PlatformOperator's `spec.consent` that gives it.
    pub fn consent_field(self) -> &'static str {
        match self {
            Self::ClusterAdminEquivalent => "clusterAdminEquivalent",
            Self::PrivilegedWorkloads => "privilegedWorkloads",
            Self::PlatformConfig => "platformConfig",
            Self::SecretsClusterWide => "secretsClusterWide",
            Self::AdmissionWebhooks => "webhooks",
        }
    }

    /// Whether `spec.consent.<field>: true` gives the class: not for
    /// [`Self::AdmissionWebhooks`], consented webhook by webhook, each bound to what it covers.
    pub fn consented_by_class(self) -> bool {
        self.needs_consent() && self != Self::AdmissionWebhooks
    }
}

impl fmt::Display for PowerClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One piece of evidence: an object of the bundle that gives its ServiceAccounts a power.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Power {
    pub class: PowerClass,
    /// The object's kind and name (what the admin looks up).
    pub kind: String,
    pub name: String,
    /// What it grants, in a sentence (`rules[2] grants bind clusterroles.rbac.authorization.k8s.io`).
    pub detail: String,
}

impl fmt::Display for Power {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: {} {:?} {}",
            self.class, self.kind, self.name, self.detail
        )
    }
}

/// Every power of a bundle, sorted by class, then object.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Powers {
    pub found: Vec<Power>,
}

impl Powers {
    /// The classes present.
    pub fn classes(&self) -> BTreeSet<PowerClass> {
        self.found.iter().map(|p| p.class).collect()
    }

    /// The evidence of one class.
    pub fn of(&self, class: PowerClass) -> impl Iterator<Item = &Power> {
        self.found.iter().filter(move |p| p.class == class)
    }

    /// What `self` grants that `installed` did not: what an upgrade would add. Compared by
    /// class and grant, not by object: the roles POM generates from a CSV are named after the
    /// CSV (so every version's differ), and a rule that moves within its role is not new.
    pub fn added_since(&self, installed: &Powers) -> Vec<&Power> {
        let before: BTreeSet<(PowerClass, String)> = installed
            .found
            .iter()
            .map(|p| (p.class, p.grant()))
            .collect();
        self.found
            .iter()
            .filter(|p| !before.contains(&(p.class, p.grant())))
            .collect()
    }
}

impl Power {
    /// What it grants, as an upgrade compares it: without the index of the rule that grants it
    /// (`rules[N] `, a built-in role's included), nor the provenance of a built-in role's rules
    /// (` [its rules: <source>, <BUILT_IN_ROLES_VERSION>]`), which a newer table changes
    /// without the bundle granting anything new.
    fn grant(&self) -> String {
        let detail = match self.detail.rfind(BUILT_IN_PROVENANCE) {
            Some(at) if self.detail.ends_with(']') => &self.detail[..at],
            _ => self.detail.as_str(),
        };
        let mut key = String::with_capacity(detail.len());
        let mut rest = detail;
        while let Some(at) = rest.find("rules[") {
            key.push_str(&rest[..at]);
            let after = &rest[at + "rules[".len()..];
            let digits = after.len() - after.trim_start_matches(|c: char| c.is_ascii_digit()).len();
            match after[digits..].strip_prefix("] ") {
                Some(tail) if digits > 0 => rest = tail,
                _ => {
                    key.push_str("rules[");
                    rest = after;
                }
            }
        }
        key.push_str(rest);
        key
    }
}

/// What follows the evidence of a built-in role's power: where its rules come from.
const BUILT_IN_PROVENANCE: &str = " [its rules: ";

/// Where a role's rules apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scope {
    Cluster,
    Namespace,
}

/// Computes the powers of the bundle's ServiceAccounts from its rendered objects.
pub fn compute(objects: &[Value]) -> Powers {
    let scopes = role_scopes(objects);
    let shipped = shipped_roles(objects);
    let mut found = BTreeSet::new();
    for object in objects {
        let key = ObjectKey::of(object);
        let mut add = |class: PowerClass, detail: String| {
            found.insert(Power {
                class,
                kind: key.kind.clone(),
                name: key.name.clone(),
                detail,
            });
        };
        if key.group == RBAC_GROUP && matches!(key.kind.as_str(), "Role" | "ClusterRole") {
            let scope = scopes
                .get(&(key.kind.clone(), key.name.clone()))
                .copied()
                .unwrap_or(if key.kind == "ClusterRole" {
                    Scope::Cluster
                } else {
                    Scope::Namespace
                });
            for (class, detail) in role_powers(object, scope) {
                add(class, detail);
            }
        }
        if let Some((role, scope)) = bound_built_in_role(object, &key, &shipped) {
            let (role_scope, scope_text) = match scope {
                Scope::Cluster => (Scope::Cluster, "cluster-wide"),
                Scope::Namespace => (Scope::Namespace, "in its namespace"),
            };
            for (class, detail) in role_powers(&role.cluster_role(), role_scope) {
                add(
                    class,
                    format!(
                        "binds the built-in ClusterRole {:?} {scope_text}, whose {detail}{BUILT_IN_PROVENANCE}{}, {}]",
                        role.name, role.source, BUILT_IN_ROLES_VERSION
                    ),
                );
            }
        }
        for violation in pod_security::baseline_violations(object) {
            add(
                PowerClass::PrivilegedWorkloads,
                format!("{violation} (beyond the baseline Pod Security level)"),
            );
        }
    }
    Powers {
        found: found.into_iter().collect(),
    }
}

/// The (kind, name) of every Role and ClusterRole the bundle ships.
pub(crate) fn shipped_roles(objects: &[Value]) -> BTreeSet<(String, String)> {
    objects
        .iter()
        .map(ObjectKey::of)
        .filter(|key| {
            key.group == RBAC_GROUP && matches!(key.kind.as_str(), "Role" | "ClusterRole")
        })
        .map(|key| (key.kind, key.name))
        .collect()
}

/// The built-in ClusterRole a binding of the bundle binds (one the bundle does not ship itself,
/// and the table knows), with the scope the binding gives it: judged as if the bundle granted
/// its rules (issue 33: a binding of a built-in role is a grant of what that role holds).
fn bound_built_in_role(
    object: &Value,
    key: &ObjectKey,
    shipped: &BTreeSet<(String, String)>,
) -> Option<(&'static BuiltInRole, Scope)> {
    if key.group != RBAC_GROUP {
        return None;
    }
    let scope = match key.kind.as_str() {
        "ClusterRoleBinding" => Scope::Cluster,
        "RoleBinding" => Scope::Namespace,
        _ => return None,
    };
    let role_kind = str_at(object, &["roleRef", "kind"])?;
    let role_name = str_at(object, &["roleRef", "name"])?;
    if role_kind != "ClusterRole" || shipped.contains(&(role_kind.to_owned(), role_name.to_owned()))
    {
        return None;
    }
    built_in_role(role_name).map(|role| (role, scope))
}

/// (role kind, name) → scope, from the bundle's bindings. A ClusterRole bound only by
/// RoleBindings applies in their namespaces; anything else keeps its own scope.
fn role_scopes(objects: &[Value]) -> BTreeMap<(String, String), Scope> {
    let mut scopes: BTreeMap<(String, String), Scope> = BTreeMap::new();
    for object in objects {
        let key = ObjectKey::of(object);
        if key.group != RBAC_GROUP {
            continue;
        }
        let scope = match key.kind.as_str() {
            "ClusterRoleBinding" => Scope::Cluster,
            "RoleBinding" => Scope::Namespace,
            _ => continue,
        };
        let role_kind = str_at(object, &["roleRef", "kind"]).unwrap_or_default();
        let role_name = str_at(object, &["roleRef", "name"]).unwrap_or_default();
        let slot = scopes
            .entry((role_kind.to_owned(), role_name.to_owned()))
            .or_insert(scope);
        if scope == Scope::Cluster {
            *slot = Scope::Cluster;
        }
    }
    scopes
}

/// One RBAC policy rule, with RBAC's matching.
struct Rule<'a> {
    verbs: Vec<&'a str>,
    groups: Vec<&'a str>,
    resources: Vec<&'a str>,
    names: Vec<&'a str>,
}

impl<'a> Rule<'a> {
    fn of(rule: &'a Value) -> Self {
        let list = |field: &str| -> Vec<&'a str> {
            rule.get(field)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default()
        };
        Self {
            verbs: list("verbs"),
            groups: list("apiGroups"),
            resources: list("resources"),
            names: list("resourceNames"),
        }
    }

    fn has_verb(&self, verb: &str) -> bool {
        self.verbs.iter().any(|v| *v == "*" || *v == verb)
    }

    fn has_group(&self, group: &str) -> bool {
        self.groups.iter().any(|g| *g == "*" || *g == group)
    }

    /// RBAC's resource matching: `*`, the exact `resource[/subresource]`, `resource/*` for any
    /// subresource of it, `*/subresource` for that subresource of anything.
    fn has_resource(&self, wanted: &str) -> bool {
        let (base, sub) = match wanted.split_once('/') {
            Some((base, sub)) => (base, Some(sub)),
            None => (wanted, None),
        };
        self.resources.iter().any(|r| {
            *r == "*"
                || *r == wanted
                || sub.is_some() && r.strip_suffix("/*") == Some(base)
                || sub.is_some_and(|sub| r.strip_prefix("*/") == Some(sub))
        })
    }

    fn grants_everything(&self) -> bool {
        [&self.verbs, &self.groups, &self.resources]
            .iter()
            .all(|items| items.contains(&"*"))
    }

    fn allows(&self, verbs: &[&str], group: &str, resources: &[&str]) -> bool {
        verbs.iter().any(|v| self.has_verb(v))
            && self.has_group(group)
            && resources.iter().any(|r| self.has_resource(r))
    }
}

/// The verbs that change objects.
const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];

/// The verbs that give an object the content an escalation needs (deleting gives nothing).
const CREATE_OR_CHANGE: &[&str] = &["create", "update", "patch"];

/// Changing an existing object's content.
const CHANGE: &[&str] = &["update", "patch"];

/// One escalation path: a cluster-wide grant, the class it puts its holder in, and where the
/// path is documented. A rule matches when it allows one of `verbs` on one of `resources` of
/// `group` with RBAC's own matching ([`Rule::has_resource`]); no `resources` means any resource
/// of the group.
struct Check {
    class: PowerClass,
    verbs: &'static [&'static str],
    group: &'static str,
    resources: &'static [&'static str],
    /// What the grant lets its holder do, shown as the power's evidence.
    what: &'static str,
    /// Where the path is documented (shown after `what`).
    source: &'static str,
    /// The path needs the verb on *every* object of the resource (any namespace's workloads,
    /// any account's token Secret). A rule restricted by `resourceNames` reaches only the
    /// objects it names, so it does not count, except for `create`: RBAC cannot restrict
    /// `create` by name, so a rule that lists it with names is counted (conservatively).
    every_object: bool,
    /// The path opens in one namespace too: a Role, or a ClusterRole bound by RoleBindings,
    /// granting it where the bundle is installed reaches it (installing an operator through
    /// OLM v0's namespaced kinds, relabelling that namespace). The other paths need the grant
    /// in every namespace.
    also_in_namespace: bool,
}

impl Check {
    fn granted_by(&self, rule: &Rule<'_>) -> bool {
        let named = self.every_object && !rule.names.is_empty();
        let verb = self
            .verbs
            .iter()
            .any(|v| (!named || *v == "create") && rule.has_verb(v));
        let resource = if self.resources.is_empty() {
            !rule.resources.is_empty()
        } else {
            self.resources.iter().any(|r| rule.has_resource(r))
        };
        verb && rule.has_group(self.group) && resource
    }
}

/// Running a pod as any ServiceAccount: the pod and every controller that makes pods.
const WORKLOAD_CREATION: &str = "runs pods as any ServiceAccount of any namespace";
const WORKLOAD_SOURCE: &str =
    "Kubernetes RBAC good practices: workload creation; rbac-police: assign_sa";

/// Writes that install operators (POM's, OLM v0's, OLM v1's): any operator, any power.
const INSTALLS_OPERATORS: &str = "installs any operator, with whatever powers its bundle declares";

/// The escalation paths a cluster-wide grant opens, one row per path (PRODUCT §6: classified
/// by the escalation path it opens); the rows marked `also_in_namespace` open in one namespace
/// too. Each row names its source; docs/content-policy.md lists them ("Powers: escalation
/// paths").
const CLUSTER_CHECKS: &[Check] = &[
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["escalate"],
        group: RBAC_GROUP,
        resources: &["roles", "clusterroles"],
        what: "escalate on roles (grant permissions it does not hold)",
        source: "Kubernetes RBAC good practices: escalate verb; rbac-police: escalate_roles",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["bind"],
        group: RBAC_GROUP,
        resources: &["roles", "clusterroles"],
        what: "bind on roles (bind any role, cluster-admin included)",
        source: "Kubernetes RBAC good practices: bind verb; rbac-police: bind_roles",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["impersonate"],
        group: "",
        resources: &["users", "groups", "serviceaccounts"],
        what: "impersonate users, groups or service accounts",
        source: "Kubernetes RBAC good practices: impersonate verb; rbac-police: impersonate",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["impersonate"],
        group: "authentication.k8s.io",
        resources: &["userextras/scopes", "uids"],
        what: "impersonate user extras or uids",
        source: "Kubernetes RBAC good practices: impersonate verb",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["create"],
        group: "",
        resources: &["serviceaccounts/token"],
        what: "create tokens for any ServiceAccount",
        source: "Kubernetes RBAC good practices: token request; rbac-police: token_request",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "",
        resources: &["secrets"],
        what: "writes Secrets in every namespace (mints ServiceAccount token Secrets for any account)",
        source: "rbac-police: issue_token_secrets",
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: WRITE_VERBS,
        group: "admissionregistration.k8s.io",
        resources: &[
            "mutatingwebhookconfigurations",
            "validatingwebhookconfigurations",
            "validatingadmissionpolicies",
            "validatingadmissionpolicybindings",
            "mutatingadmissionpolicies",
            "mutatingadmissionpolicybindings",
        ],
        what: "writes admission webhooks or policies (sees or changes every request)",
        source: "Kubernetes RBAC good practices: control admission webhooks; rbac-police: control_webhooks",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: WRITE_VERBS,
        group: "apiextensions.k8s.io",
        resources: &["customresourcedefinitions"],
        what: "writes CustomResourceDefinitions (a conversion webhook on any CRD sees all its objects)",
        source: "PRODUCT §6: CRD conversion is a webhook",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: WRITE_VERBS,
        group: "apiregistration.k8s.io",
        resources: &["apiservices"],
        what: "writes APIServices (serves any API group)",
        source: "PRODUCT §6: aggregated APIs",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["get", "create"],
        group: "",
        resources: &["nodes/proxy"],
        what: "nodes/proxy (the kubelet API: exec in any pod on any node)",
        source: "Kubernetes RBAC good practices: access to proxy subresource of Nodes; rbac-police: nodes_proxy",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["create", "get"],
        group: "",
        resources: &["pods/exec", "pods/attach"],
        what: "exec or attach in pods of every namespace",
        source: "rbac-police: pods_exec",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CHANGE,
        group: "",
        resources: &["pods/ephemeralcontainers"],
        what: "adds ephemeral containers to pods of every namespace (runs code in any pod, like exec)",
        source: "rbac-police: pods_ephemeral_ctrs",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["create"],
        group: "",
        resources: &["pods"],
        what: WORKLOAD_CREATION,
        source: WORKLOAD_SOURCE,
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CHANGE,
        group: "",
        resources: &["pods"],
        what: "changes pods of every namespace (a new image runs as the pod's ServiceAccount)",
        source: "rbac-police: modify_pods",
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "",
        resources: &["replicationcontrollers"],
        what: WORKLOAD_CREATION,
        source: WORKLOAD_SOURCE,
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "apps",
        resources: &["deployments", "replicasets", "statefulsets", "daemonsets"],
        what: WORKLOAD_CREATION,
        source: WORKLOAD_SOURCE,
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "batch",
        resources: &["jobs", "cronjobs"],
        what: WORKLOAD_CREATION,
        source: WORKLOAD_SOURCE,
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "apps.openshift.io",
        resources: &["deploymentconfigs"],
        what: WORKLOAD_CREATION,
        source: WORKLOAD_SOURCE,
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "image.openshift.io",
        resources: &[
            "imagestreams/layers",
            "imagestreamtags",
            "imagetags",
            "imagestreammappings",
            "imagestreamimports",
        ],
        what: "pushes or retags images in every namespace's image streams (a workload that tracks a tag runs what it is given, as its own ServiceAccount)",
        source: "OpenShift: image stream tags trigger deployments; the registry authorizes a push by update on imagestreams/layers",
        every_object: true,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["update", "patch"],
        group: "certificates.k8s.io",
        resources: &["certificatesigningrequests/approval"],
        what: "approves certificate signing requests",
        source: "Kubernetes RBAC good practices: CSRs and certificate issuing; rbac-police: approve_csrs",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: &["approve", "sign"],
        group: "certificates.k8s.io",
        resources: &["signers"],
        what: "approves or signs for certificate signers",
        source: "Kubernetes RBAC good practices: CSRs and certificate issuing",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: WRITE_VERBS,
        group: "security.openshift.io",
        resources: &["securitycontextconstraints"],
        what: "writes SecurityContextConstraints",
        source: "OpenShift: SCCs decide which pods are admitted",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "platform.openshift.io",
        resources: &["platformoperators", "catalogs"],
        what: INSTALLS_OPERATORS,
        source: "PRODUCT §6: POM installs what its PlatformOperators and Catalogs name",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "operators.coreos.com",
        resources: &[
            "subscriptions",
            "installplans",
            "clusterserviceversions",
            "operatorgroups",
        ],
        what: INSTALLS_OPERATORS,
        source: "OLM v0: a CSV, Subscription or InstallPlan installs an operator with its RBAC, its cluster-wide RBAC included, from any namespace",
        every_object: false,
        also_in_namespace: true,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "operators.coreos.com",
        resources: &["catalogsources"],
        what: INSTALLS_OPERATORS,
        source: "OLM v0: a CatalogSource offers its operators to every namespace's Subscriptions",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "olm.operatorframework.io",
        resources: &["clusterextensions", "clustercatalogs"],
        what: INSTALLS_OPERATORS,
        source: "OLM v1: a ClusterExtension installs an operator with its RBAC",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "oauth.openshift.io",
        resources: &[
            "oauthaccesstokens",
            "oauthauthorizetokens",
            "oauthclients",
            "useroauthaccesstokens",
        ],
        what: "writes OAuth tokens or clients (authenticates as any user)",
        source: "OpenShift authentication: OAuth access tokens are bearer credentials",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::ClusterAdminEquivalent,
        verbs: CREATE_OR_CHANGE,
        group: "user.openshift.io",
        resources: &["users", "groups", "identities", "useridentitymappings"],
        what: "writes users, groups or identities (joins any group, logs in as any user)",
        source: "OpenShift authentication: group membership and identity mappings grant roles",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::PrivilegedWorkloads,
        verbs: CHANGE,
        group: "",
        resources: &["namespaces"],
        what: "relabels namespaces (pod-security and openshift.io/run-level labels lift confinement; in a Role, its own namespace's)",
        source: "Kubernetes RBAC good practices: namespace modification",
        every_object: false,
        also_in_namespace: true,
    },
    Check {
        class: PowerClass::PrivilegedWorkloads,
        verbs: CREATE_OR_CHANGE,
        group: "",
        resources: &["persistentvolumes"],
        what: "writes PersistentVolumes (hostPath PersistentVolumes reach the node's filesystem)",
        source: "Kubernetes RBAC good practices: persistent volume creation",
        every_object: false,
        also_in_namespace: false,
    },
    // Endpoints redirect a Service's traffic wherever they say: not a grant to the holder (no
    // identity, no privileged pod), but a change to what every client of the cluster's
    // Services reaches, cluster-wide. That is the platform's configuration (as its network
    // and ingress configuration is), so it needs that consent. Kubernetes removed these writes
    // from the aggregated `edit` and `admin` roles for the same reason (docs/decisions.md).
    Check {
        class: PowerClass::PlatformConfig,
        verbs: CREATE_OR_CHANGE,
        group: "",
        resources: &["endpoints"],
        what: "writes Endpoints in every namespace (redirects any Service's traffic)",
        source: "CVE-2021-25740",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::PlatformConfig,
        verbs: CREATE_OR_CHANGE,
        group: "discovery.k8s.io",
        resources: &["endpointslices"],
        what: "writes EndpointSlices in every namespace (redirects any Service's traffic)",
        source: "CVE-2021-25740",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::PlatformConfig,
        verbs: WRITE_VERBS,
        group: "config.openshift.io",
        resources: &[],
        what: "writes the platform's configuration (config.openshift.io)",
        source: "OpenShift: the cluster's configuration API",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::PlatformConfig,
        verbs: WRITE_VERBS,
        group: "machineconfiguration.openshift.io",
        resources: &[],
        what: "writes the nodes' configuration (machineconfiguration.openshift.io)",
        source: "OpenShift: the Machine Config Operator's API",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::PlatformConfig,
        verbs: WRITE_VERBS,
        group: "operator.openshift.io",
        resources: &[],
        what: "writes the platform operators' configuration (operator.openshift.io)",
        source: "OpenShift: the cluster operators' configuration API",
        every_object: false,
        also_in_namespace: false,
    },
    Check {
        class: PowerClass::SecretsClusterWide,
        verbs: &["get", "list", "watch"],
        group: "",
        resources: &["secrets"],
        what: "reads Secrets in every namespace",
        source: "Kubernetes RBAC good practices: listing secrets; rbac-police: list_secrets",
        every_object: false,
        also_in_namespace: false,
    },
    // A pull is a read: of every namespace's images, private ones included, the same kind of
    // reach as reading Secrets everywhere (shown, no consent).
    Check {
        class: PowerClass::SecretsClusterWide,
        verbs: &["get"],
        group: "image.openshift.io",
        resources: &["imagestreams/layers"],
        what: "pulls the images of every namespace's image streams (private images included)",
        source: "OpenShift: the registry authorizes a pull by get on imagestreams/layers",
        every_object: true,
        also_in_namespace: false,
    },
];

/// SCCs that add nothing to what the restricted level allows.
const UNPRIVILEGED_SCCS: &[&str] = &[
    "restricted",
    "restricted-v2",
    "restricted-v3",
    "nonroot",
    "nonroot-v2",
];

/// The classes `role`'s rules put a holder in, with a sentence each: cluster-wide (a
/// ClusterRoleBinding) or in one namespace (a RoleBinding). What a binding to another
/// principal than the bundle's own grants is judged with the same table (content policy).
pub(crate) fn grant_powers(role: &Value, cluster_wide: bool) -> Vec<(PowerClass, String)> {
    role_powers(
        role,
        if cluster_wide {
            Scope::Cluster
        } else {
            Scope::Namespace
        },
    )
}

/// The classes one role puts its holders in, with a sentence each.
fn role_powers(role: &Value, scope: Scope) -> Vec<(PowerClass, String)> {
    let mut found = Vec::new();
    if role.get("aggregationRule").is_some_and(|r| !r.is_null()) {
        found.push((
            PowerClass::ClusterAdminEquivalent,
            "has an aggregationRule: it grants whatever any ClusterRole matching its selector grants, now or later".to_owned(),
        ));
    }
    let rules = role
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, value) in rules.iter().enumerate() {
        let rule = Rule::of(value);
        if rule.grants_everything() {
            // cluster-admin itself (or its namespaced form): one finding, not every grant it implies.
            found.push(match scope {
                Scope::Cluster => (
                    PowerClass::ClusterAdminEquivalent,
                    format!("rules[{index}] grants every verb on every resource of every API group (cluster-admin)"),
                ),
                Scope::Namespace => (
                    PowerClass::ClusterAdminEquivalent,
                    format!("rules[{index}] grants every verb on every resource in its namespace: OLM v0's Subscriptions, InstallPlans, ClusterServiceVersions and OperatorGroups there included (installs any operator, with whatever powers its bundle declares, cluster-wide RBAC included), as are the use of every SCC and relabelling the namespace"),
                ),
            });
            continue;
        }
        let mut by_class: BTreeMap<PowerClass, Vec<String>> = BTreeMap::new();
        let mut add = |class: PowerClass, what: String| {
            let whats = by_class.entry(class).or_default();
            if !whats.contains(&what) {
                whats.push(what);
            }
        };
        // In one namespace, only the paths a namespace's own objects open.
        let opened = CLUSTER_CHECKS.iter().filter(|check| {
            (scope == Scope::Cluster || check.also_in_namespace) && check.granted_by(&rule)
        });
        for check in opened {
            add(check.class, format!("{} [{}]", check.what, check.source));
        }
        let uses_scc = rule.allows(
            &["use"],
            "security.openshift.io",
            &["securitycontextconstraints"],
        );
        let only_unprivileged = !rule.names.is_empty()
            && rule
                .names
                .iter()
                .all(|name| UNPRIVILEGED_SCCS.contains(name));
        if uses_scc && !only_unprivileged {
            add(
                PowerClass::PrivilegedWorkloads,
                "uses SecurityContextConstraints other than restricted or nonroot".to_owned(),
            );
        }
        for (class, what) in by_class {
            found.push((class, format!("rules[{index}] grants: {}", what.join("; "))));
        }
    }
    found
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use serde_json::json;

    use super::*;

    fn cluster_role(name: &str, rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
               "metadata": {"name": name}, "rules": rules})
    }

    fn classes_of(rules: Value) -> BTreeSet<PowerClass> {
        compute(&[cluster_role("r", rules)]).classes()
    }

    fn rule(groups: &[&str], resources: &[&str], verbs: &[&str]) -> Value {
        json!([{"apiGroups": groups, "resources": resources, "verbs": verbs}])
    }

    #[test]
    fn each_cluster_admin_grant_is_classified() {
        let cases = [
            rule(
                &["rbac.authorization.k8s.io"],
                &["clusterroles"],
                &["escalate"],
            ),
            rule(&["rbac.authorization.k8s.io"], &["roles"], &["bind"]),
            rule(&["rbac.authorization.k8s.io"], &["*"], &["*"]),
            rule(&[""], &["users"], &["impersonate"]),
            rule(&[""], &["serviceaccounts/token"], &["create"]),
            rule(&[""], &["serviceaccounts/*"], &["create"]),
            rule(&["admissionregistration.k8s.io"], &["*"], &["*"]),
            rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["patch"],
            ),
            rule(&["apiregistration.k8s.io"], &["apiservices"], &["create"]),
            rule(&[""], &["nodes/proxy"], &["get"]),
            rule(&[""], &["*/exec"], &["create"]),
            rule(&[""], &["pods/exec"], &["create"]),
            rule(&["certificates.k8s.io"], &["signers"], &["sign"]),
            rule(
                &["security.openshift.io"],
                &["securitycontextconstraints"],
                &["update"],
            ),
            rule(&["*"], &["*"], &["*"]),
            rule(&[""], &["*"], &["*"]),
        ];
        for rules in cases {
            assert!(
                classes_of(rules.clone()).contains(&PowerClass::ClusterAdminEquivalent),
                "{rules}"
            );
        }
    }

    #[test]
    fn ordinary_operator_rules_are_in_no_class() {
        let cases = [
            // Reading and deleting workloads everywhere runs nothing (creating them does:
            // `escalation_paths_have_their_classes`).
            rule(
                &["apps"],
                &["deployments"],
                &["get", "list", "watch", "delete"],
            ),
            rule(&[""], &["configmaps", "services"], &["*"]),
            rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
            rule(
                &["rbac.authorization.k8s.io"],
                &["roles", "rolebindings"],
                &["create", "get", "list"],
            ),
            rule(
                &["apiextensions.k8s.io"],
                &["customresourcedefinitions"],
                &["get", "list", "watch"],
            ),
            rule(
                &["config.openshift.io"],
                &["infrastructures", "clusterversions"],
                &["get", "list"],
            ),
            rule(&[""], &["pods/log"], &["get"]),
            rule(&["example.com"], &["*"], &["*"]),
        ];
        for rules in cases {
            assert_eq!(classes_of(rules.clone()), BTreeSet::new(), "{rules}");
        }
    }

    /// One hostile grant per escalation path added for issue 33: (group, resource, verb, class).
    const ESCALATION_PATHS: &[(&str, &str, &str, PowerClass)] = &[
        ("", "pods", "create", PowerClass::ClusterAdminEquivalent),
        ("", "pods", "patch", PowerClass::ClusterAdminEquivalent),
        (
            "",
            "replicationcontrollers",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps",
            "deployments",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps",
            "deployments",
            "patch",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps",
            "replicasets",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps",
            "statefulsets",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps",
            "daemonsets",
            "update",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "batch",
            "jobs",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "batch",
            "cronjobs",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "apps.openshift.io",
            "deploymentconfigs",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        ("", "secrets", "create", PowerClass::ClusterAdminEquivalent),
        ("", "secrets", "update", PowerClass::ClusterAdminEquivalent),
        ("", "secrets", "patch", PowerClass::ClusterAdminEquivalent),
        (
            "",
            "pods/ephemeralcontainers",
            "patch",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "",
            "pods/ephemeralcontainers",
            "update",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "platform.openshift.io",
            "platformoperators",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "platform.openshift.io",
            "catalogs",
            "patch",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "operators.coreos.com",
            "subscriptions",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "operators.coreos.com",
            "installplans",
            "update",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "operators.coreos.com",
            "clusterserviceversions",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "operators.coreos.com",
            "operatorgroups",
            "patch",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "operators.coreos.com",
            "catalogsources",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "olm.operatorframework.io",
            "clusterextensions",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "olm.operatorframework.io",
            "clustercatalogs",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "oauth.openshift.io",
            "oauthaccesstokens",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "oauth.openshift.io",
            "oauthauthorizetokens",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "oauth.openshift.io",
            "oauthclients",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "oauth.openshift.io",
            "useroauthaccesstokens",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "user.openshift.io",
            "users",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "user.openshift.io",
            "groups",
            "update",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "user.openshift.io",
            "identities",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            "user.openshift.io",
            "useridentitymappings",
            "create",
            PowerClass::ClusterAdminEquivalent,
        ),
        ("", "namespaces", "patch", PowerClass::PrivilegedWorkloads),
        ("", "namespaces", "update", PowerClass::PrivilegedWorkloads),
        (
            "",
            "persistentvolumes",
            "create",
            PowerClass::PrivilegedWorkloads,
        ),
        (
            "",
            "persistentvolumes",
            "patch",
            PowerClass::PrivilegedWorkloads,
        ),
        ("", "endpoints", "create", PowerClass::PlatformConfig),
        ("", "endpoints", "patch", PowerClass::PlatformConfig),
        (
            "discovery.k8s.io",
            "endpointslices",
            "create",
            PowerClass::PlatformConfig,
        ),
        (
            "discovery.k8s.io",
            "endpointslices",
            "update",
            PowerClass::PlatformConfig,
        ),
    ];

    /// The rows of `ESCALATION_PATHS` whose path opens in one namespace too: OLM v0 installs
    /// an operator, with its cluster-wide RBAC, from a namespace's Subscription, InstallPlan,
    /// ClusterServiceVersion or OperatorGroup; a Role may relabel its own namespace.
    const ALSO_IN_A_NAMESPACE: &[(&str, &str)] = &[
        ("operators.coreos.com", "subscriptions"),
        ("operators.coreos.com", "installplans"),
        ("operators.coreos.com", "clusterserviceversions"),
        ("operators.coreos.com", "operatorgroups"),
        ("", "namespaces"),
    ];

    fn role_in_namespace(rules: Value) -> Value {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
               "metadata": {"name": "r", "namespace": "ns"}, "rules": rules})
    }

    #[test]
    fn escalation_paths_have_their_classes() {
        for (group, resource, verb, class) in ESCALATION_PATHS {
            let rules = rule(&[group], &[resource], &[verb]);
            assert_eq!(
                classes_of(rules.clone()),
                BTreeSet::from([*class]),
                "cluster-wide {rules}"
            );
            // Bound by a ClusterRoleBinding: the same.
            let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "b"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "r"},
                "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]});
            assert_eq!(
                compute(&[cluster_role("r", rules.clone()), binding]).classes(),
                BTreeSet::from([*class]),
                "bound cluster-wide {rules}"
            );
            // The same grant in the install namespace only is no class, but for the paths a
            // namespace's own objects open.
            let in_a_namespace = if ALSO_IN_A_NAMESPACE.contains(&(*group, *resource)) {
                BTreeSet::from([*class])
            } else {
                BTreeSet::new()
            };
            assert_eq!(
                compute(&[role_in_namespace(rules.clone())]).classes(),
                in_a_namespace,
                "in a Role {rules}"
            );
            // Reading is not the path (reading Secrets is its own, shown-only class).
            let read = classes_of(rule(&[group], &[resource], &["get", "list", "watch"]));
            assert!(
                !read.contains(class),
                "read-only {group}/{resource}: {read:?}"
            );
        }
    }

    #[test]
    fn escalation_paths_use_rbac_matching() {
        let cases = [
            rule(&["apps"], &["*"], &["create"]),
            rule(&["*"], &["daemonsets"], &["*"]),
            rule(&[""], &["pods/*"], &["patch"]),
            rule(&[""], &["*/ephemeralcontainers"], &["update"]),
            rule(&["operators.coreos.com"], &["*"], &["create"]),
            rule(&["batch"], &["cronjobs", "jobs"], &["create", "get"]),
        ];
        for rules in cases {
            // (`*` groups also write the platform's configuration groups.)
            assert!(
                classes_of(rules.clone()).contains(&PowerClass::ClusterAdminEquivalent),
                "{rules}"
            );
        }
        // A subresource is not its resource: writing a PlatformOperator's status or a pod's
        // log installs and runs nothing.
        assert_eq!(
            classes_of(rule(
                &["platform.openshift.io"],
                &["platformoperators/status"],
                &["update", "patch"]
            )),
            BTreeSet::new()
        );
        assert_eq!(
            classes_of(rule(&[""], &["pods/status"], &["patch"])),
            BTreeSet::new()
        );
    }

    #[test]
    fn resource_names_narrow_changes_but_not_create() {
        let named = |resource: &str, group: &str, verbs: &[&str]| {
            classes_of(json!([{"apiGroups": [group], "resources": [resource],
                               "resourceNames": ["mine"], "verbs": verbs}]))
        };
        let admin = BTreeSet::from([PowerClass::ClusterAdminEquivalent]);
        // Changing named objects reaches only them.
        assert_eq!(named("secrets", "", &["update", "patch"]), BTreeSet::new());
        assert_eq!(named("deployments", "apps", &["patch"]), BTreeSet::new());
        assert_eq!(named("pods", "", &["update"]), BTreeSet::new());
        // RBAC cannot restrict `create` by name: counted.
        assert_eq!(named("secrets", "", &["create", "patch"]), admin);
        assert_eq!(named("deployments", "apps", &["create"]), admin);
        assert_eq!(named("pods", "", &["*"]), admin);
    }

    #[test]
    fn every_escalation_path_names_its_source() {
        for check in CLUSTER_CHECKS {
            assert!(!check.source.trim().is_empty(), "{}", check.what);
        }
        let powers = compute(&[cluster_role(
            "r",
            rule(&["discovery.k8s.io"], &["endpointslices"], &["patch"]),
        )]);
        assert!(
            powers.found[0].detail.ends_with("[CVE-2021-25740]"),
            "{}",
            powers.found[0]
        );
    }

    #[test]
    fn secrets_platform_config_and_sccs_have_their_classes() {
        assert_eq!(
            classes_of(rule(&[""], &["secrets"], &["get", "list"])),
            BTreeSet::from([PowerClass::SecretsClusterWide])
        );
        assert_eq!(
            classes_of(rule(
                &["machineconfiguration.openshift.io"],
                &["machineconfigs"],
                &["create"]
            )),
            BTreeSet::from([PowerClass::PlatformConfig])
        );
        assert_eq!(
            classes_of(rule(
                &["security.openshift.io"],
                &["securitycontextconstraints"],
                &["use"]
            )),
            BTreeSet::from([PowerClass::PrivilegedWorkloads])
        );
        let restricted = json!([{"apiGroups": ["security.openshift.io"], "resources": ["securitycontextconstraints"],
                                 "resourceNames": ["restricted-v2", "nonroot-v2"], "verbs": ["use"]}]);
        assert_eq!(classes_of(restricted), BTreeSet::new());
    }

    #[test]
    fn a_cluster_role_bound_only_in_a_namespace_grants_only_there() {
        let role = cluster_role("secrets", rule(&[""], &["secrets"], &["*"]));
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
            "metadata": {"name": "b", "namespace": "ns"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "secrets"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]});
        assert_eq!(
            compute(&[role.clone(), binding.clone()]).classes(),
            BTreeSet::new()
        );
        // Bound cluster-wide as well: cluster scope wins (`*` on Secrets reads and writes them).
        let mut cluster_binding = binding;
        cluster_binding["kind"] = json!("ClusterRoleBinding");
        assert_eq!(
            compute(&[role, cluster_binding]).classes(),
            BTreeSet::from([
                PowerClass::ClusterAdminEquivalent,
                PowerClass::SecretsClusterWide
            ])
        );
    }

    #[test]
    fn namespaced_escalation_is_judged_by_the_paths_a_namespace_opens() {
        // Everything in its own namespace: escalate and Secrets there are no class, but `*`
        // includes OLM v0's kinds there (an operator installed with its cluster-wide RBAC), as
        // well as `use` of every SCC and relabelling the namespace.
        let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "ns"}, "rules": rule(&["*"], &["*"], &["*"])});
        let powers = compute(&[role]);
        assert_eq!(
            powers.classes(),
            BTreeSet::from([PowerClass::ClusterAdminEquivalent])
        );
        assert!(
            powers.found[0].detail.contains("OLM v0's Subscriptions"),
            "{}",
            powers.found[0]
        );
        // Core `*` in its namespace includes relabelling it; OLM's `*` there installs.
        assert_eq!(
            compute(&[role_in_namespace(rule(&[""], &["*"], &["*"]))]).classes(),
            BTreeSet::from([PowerClass::PrivilegedWorkloads])
        );
        assert_eq!(
            compute(&[role_in_namespace(rule(
                &["operators.coreos.com"],
                &["*"],
                &["create"]
            ))])
            .classes(),
            BTreeSet::from([PowerClass::ClusterAdminEquivalent])
        );
        // A CatalogSource of its own namespace offers operators but installs none; reading
        // OLM's kinds or its namespace is no path.
        assert_eq!(
            compute(&[role_in_namespace(json!([
                {"apiGroups": ["operators.coreos.com"], "resources": ["catalogsources"], "verbs": ["create", "patch"]},
                {"apiGroups": ["operators.coreos.com"], "resources": ["*"], "verbs": ["get", "list", "watch", "delete"]},
                {"apiGroups": [""], "resources": ["namespaces"], "verbs": ["get", "list", "watch"]},
            ]))])
            .classes(),
            BTreeSet::new()
        );
        let rbac = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
            "metadata": {"name": "r", "namespace": "ns"},
            "rules": rule(&["rbac.authorization.k8s.io"], &["*"], &["*"])});
        assert_eq!(compute(&[rbac]).classes(), BTreeSet::new());
    }

    #[test]
    fn aggregation_and_privileged_pods_are_classified_with_their_evidence() {
        let aggregating = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "collects"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"a": "b"}}]}});
        let daemonset = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "agent", "namespace": "ns"},
            "spec": {"template": {"spec": {"hostNetwork": true, "containers": [{"name": "a", "securityContext": {"privileged": true}}]}}}});
        let powers = compute(&[aggregating, daemonset]);
        assert_eq!(
            powers.classes(),
            BTreeSet::from([
                PowerClass::ClusterAdminEquivalent,
                PowerClass::PrivilegedWorkloads
            ])
        );
        let privileged: Vec<String> = powers
            .of(PowerClass::PrivilegedWorkloads)
            .map(ToString::to_string)
            .collect();
        assert_eq!(privileged.len(), 2, "{privileged:?}");
        assert!(
            privileged.iter().all(|p| p.contains("DaemonSet \"agent\"")),
            "{privileged:?}"
        );
    }

    #[test]
    fn the_rule_index_names_the_rule() {
        let rules = json!([
            {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]},
            {"apiGroups": ["rbac.authorization.k8s.io"], "resources": ["clusterroles"], "verbs": ["bind"]},
        ]);
        let powers = compute(&[cluster_role("r", rules)]);
        assert_eq!(powers.found.len(), 1);
        assert!(
            powers.found[0].detail.starts_with("rules[1] grants: bind"),
            "{}",
            powers.found[0]
        );
    }

    #[test]
    fn added_since_lists_what_an_upgrade_adds() {
        let old = compute(&[cluster_role("r", rule(&[""], &["secrets"], &["get"]))]);
        let new = compute(&[cluster_role(
            "r",
            json!([{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]),
        )]);
        let added = new.added_since(&old);
        assert_eq!(added.len(), 1);
        assert_eq!(added[0].class, PowerClass::ClusterAdminEquivalent);
        assert!(new.added_since(&new).is_empty());
        // The same grant in a role of another name (the next CSV's generated role), at another
        // index, is not new.
        let renamed = compute(&[cluster_role(
            "op.v2-generated",
            json!([{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]},
                   {"apiGroups": [""], "resources": ["serviceaccounts/token"], "verbs": ["create"]}]),
        )]);
        assert!(renamed.added_since(&new).is_empty());
    }

    #[test]
    fn added_since_ignores_the_built_in_role_tables_version_and_rule_indexes() {
        let binding = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "b"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "op", "namespace": "ns"}]});
        let installed = compute(&[binding]);
        assert!(!installed.found.is_empty());
        assert!(
            installed
                .found
                .iter()
                .all(|p| p.detail.contains(BUILT_IN_ROLES_VERSION)),
            "{installed:?}"
        );
        // The same powers, as a newer table (another version, its rules reordered) shows them.
        let mut newer = installed.clone();
        for power in &mut newer.found {
            power.detail = power
                .detail
                .replace(BUILT_IN_ROLES_VERSION, "Kubernetes 1.34, OpenShift 4.20")
                .replace("rules[", "rules[1");
        }
        assert_ne!(newer, installed);
        assert!(newer.added_since(&installed).is_empty(), "{newer:?}");
        // A grant that is new still is.
        let mut added = newer.clone();
        added.found[0].detail = added.found[0].detail.replace("whose", "whose also");
        assert_eq!(added.added_since(&installed).len(), 1);
        // A detail that only looks like an index keeps its text.
        let odd = Power {
            class: PowerClass::PlatformConfig,
            kind: "ClusterRole".to_owned(),
            name: "r".to_owned(),
            detail: "rules[x] grants: z".to_owned(),
        };
        assert_eq!(odd.grant(), "rules[x] grants: z");
    }

    #[test]
    fn pulling_every_namespaces_images_is_shown_like_reading_their_secrets() {
        let pull = rule(&["image.openshift.io"], &["imagestreams/layers"], &["get"]);
        assert_eq!(
            classes_of(pull.clone()),
            BTreeSet::from([PowerClass::SecretsClusterWide])
        );
        assert_eq!(
            compute(&[role_in_namespace(pull)]).classes(),
            BTreeSet::new()
        );
        let named = json!([{"apiGroups": ["image.openshift.io"], "resources": ["imagestreams/layers"],
                            "resourceNames": ["mine"], "verbs": ["get"]}]);
        assert_eq!(classes_of(named), BTreeSet::new());
    }
}
