//! The content policy (§6, §10): what a bundle may ask POM to apply.
//!
//! POM applies bundles with cluster-wide rights, so a catalog is trusted only as far as this
//! policy lets it be. It runs on the rendered objects, before anything is applied, and refuses
//! with a [`PolicyViolation`] that names the object, the rule and what to do:
//!
//! - per bundle format, an allowlist of (API group, kind); a plain+v0 bundle may also carry
//!   custom resources of the CRDs it ships. Namespaces, webhooks, APIServices and the other
//!   kinds in [`NEVER_ALLOWED`] are refused whatever the admin says;
//! - every namespaced object lands in the install namespace;
//! - the install namespace is not a system namespace (`kube-*`, `openshift-*`, `default`) or
//!   the manager's own;
//! - bindings may not grant `cluster-admin`, `admin`, `edit` or a role of the bundle that is
//!   itself refused, and may not name `system:` users or groups or a ServiceAccount outside
//!   the install namespace (the manager's own among them);
//! - roles may not grant `escalate`, `bind` or `impersonate`, every verb on every resource, or
//!   aggregate other roles' rules.
//!
//! Some operators legitimately manage RBAC or ship a kind outside the allowlist: the rules
//! marked [`ContentRule::exceptable`] can be lifted for one named object by the admin
//! ([`ContentException`], `spec.contentExceptions` of the PlatformOperator), never silently: the
//! exceptions used are returned with the rendered bundle.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::BundleFormat;
use super::assemble::bundle_crd_scopes;
use super::kinds::{PLAIN_V0_KINDS, REGISTRY_V1_KINDS};
use super::objects::{ObjectKey, str_at};

/// Kinds no bundle may carry, exception or not: they would let a bundle take over the cluster
/// or other tenants (namespaces, admission, aggregated APIs, node and certificate objects).
pub const NEVER_ALLOWED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("security.openshift.io", "SecurityContextConstraints"),
    ("config.openshift.io", "ClusterOperator"),
    ("config.openshift.io", "ClusterVersion"),
    ("platform.openshift.io", "PlatformOperator"),
    ("platform.openshift.io", "Catalog"),
];

/// Built-in ClusterRoles a bundle may not bind: they grant broad write access to everything.
pub const PRIVILEGED_CLUSTER_ROLES: &[&str] = &["cluster-admin", "admin", "edit"];

/// Namespace prefixes (and names) reserved for the platform.
const SYSTEM_NAMESPACE_PREFIXES: &[&str] = &["kube-", "openshift-"];
const SYSTEM_NAMESPACES: &[&str] = &["default", "kube-system", "kube-public", "openshift"];

/// One rule of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContentRule {
    /// A (group, kind) outside the format's allowlist.
    KindNotAllowed,
    /// A kind in [`NEVER_ALLOWED`].
    KindNeverAllowed,
    /// A namespaced object in a namespace other than the install namespace.
    ObjectOutsideInstallNamespace,
    /// A binding to `cluster-admin`, `admin`, `edit`, or to a role of the bundle that grants
    /// everything.
    PrivilegedRoleBinding,
    /// A binding naming a `system:` user or group.
    SystemSubjectBinding,
    /// A binding naming a ServiceAccount outside the install namespace.
    ForeignServiceAccountBinding,
    /// A role granting `escalate`, `bind` or `impersonate`.
    EscalatingRole,
    /// A role granting every verb on every resource.
    WildcardRole,
    /// A ClusterRole with an `aggregationRule` (it collects other roles' rules).
    AggregatingRole,
}

impl ContentRule {
    /// Every rule, in the order they are documented.
    pub const ALL: [ContentRule; 9] = [
        Self::KindNotAllowed,
        Self::KindNeverAllowed,
        Self::ObjectOutsideInstallNamespace,
        Self::PrivilegedRoleBinding,
        Self::SystemSubjectBinding,
        Self::ForeignServiceAccountBinding,
        Self::EscalatingRole,
        Self::WildcardRole,
        Self::AggregatingRole,
    ];

    /// The CamelCase name (as written in `spec.contentExceptions[].rule`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KindNotAllowed => "KindNotAllowed",
            Self::KindNeverAllowed => "KindNeverAllowed",
            Self::ObjectOutsideInstallNamespace => "ObjectOutsideInstallNamespace",
            Self::PrivilegedRoleBinding => "PrivilegedRoleBinding",
            Self::SystemSubjectBinding => "SystemSubjectBinding",
            Self::ForeignServiceAccountBinding => "ForeignServiceAccountBinding",
            Self::EscalatingRole => "EscalatingRole",
            Self::WildcardRole => "WildcardRole",
            Self::AggregatingRole => "AggregatingRole",
        }
    }

    /// Whether an admin may lift the rule for one named object. Rules that would let a bundle
    /// reach outside its namespace, impersonate the platform or bind the manager never are.
    pub fn exceptable(self) -> bool {
        matches!(
            self,
            Self::KindNotAllowed
                | Self::PrivilegedRoleBinding
                | Self::EscalatingRole
                | Self::WildcardRole
                | Self::AggregatingRole
        )
    }
}

impl fmt::Display for ContentRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An admin's exception: `rule` does not apply to the object of `kind` named `name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentException {
    pub rule: ContentRule,
    pub kind: String,
    pub name: String,
}

impl fmt::Display for ContentException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {} {:?}", self.rule, self.kind, self.name)
    }
}

/// Why the policy refuses an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyViolation {
    pub rule: ContentRule,
    /// `Kind.group "name" in namespace "ns"`.
    pub object: String,
    /// The bundle file the object came from.
    pub origin: String,
    /// What is wrong with it, in a sentence.
    pub detail: String,
    /// The kind and name an exception would have to give, when the rule is exceptable.
    pub exception_kind: String,
    pub exception_name: String,
}

impl fmt::Display for PolicyViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) breaks POM's content policy, rule {}: {}",
            self.object, self.origin, self.rule, self.detail
        )?;
        if self.rule.exceptable() {
            write!(
                f,
                "; if you trust this bundle, allow it on the PlatformOperator with spec.contentExceptions: [{{rule: {}, kind: {}, name: {}}}]",
                self.rule, self.exception_kind, self.exception_name
            )
        } else {
            f.write_str(
                "; no exception can allow this, ask the bundle's publisher for a bundle without it",
            )
        }
    }
}

/// What the policy needs besides the objects.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyContext<'a> {
    pub format: Option<BundleFormat>,
    pub install_namespace: &'a str,
    /// The manager's own namespace and ServiceAccount, when known.
    pub manager_namespace: Option<&'a str>,
    pub manager_service_account: Option<&'a str>,
    pub exceptions: &'a [ContentException],
}

/// Why an install namespace is refused, if it is.
pub fn reserved_namespace(namespace: &str, manager_namespace: Option<&str>) -> Option<String> {
    if Some(namespace) == manager_namespace {
        return Some("it is the namespace POM itself runs in".to_owned());
    }
    if SYSTEM_NAMESPACES.contains(&namespace)
        || SYSTEM_NAMESPACE_PREFIXES
            .iter()
            .any(|prefix| namespace.starts_with(prefix))
    {
        return Some(
            "kube-*, openshift-* and default are the platform's own namespaces".to_owned(),
        );
    }
    None
}

/// Checks `objects` (rendered, with their origins) against the policy. Returns the exceptions
/// that were needed (and so used), or the first violation in apply order.
pub fn check(
    objects: &[Value],
    origins: &[String],
    ctx: &PolicyContext<'_>,
) -> Result<Vec<ContentException>, Box<PolicyViolation>> {
    let own_kinds = bundle_crd_scopes(objects);
    let refused_roles = refused_role_names(objects);
    let mut used = BTreeSet::new();
    for (index, object) in objects.iter().enumerate() {
        let origin = origins.get(index).map_or("the bundle", String::as_str);
        let key = ObjectKey::of(object);
        let findings = findings(object, &key, ctx, &own_kinds, &refused_roles);
        for (rule, detail) in findings {
            let exception = ContentException {
                rule,
                kind: key.kind.clone(),
                name: key.name.clone(),
            };
            if rule.exceptable() && ctx.exceptions.contains(&exception) {
                used.insert(exception);
                continue;
            }
            return Err(Box::new(PolicyViolation {
                rule,
                object: key.to_string(),
                origin: origin.to_owned(),
                detail,
                exception_kind: key.kind.clone(),
                exception_name: key.name.clone(),
            }));
        }
    }
    Ok(used.into_iter().collect())
}

/// Every rule `object` breaks, with a sentence each.
fn findings(
    object: &Value,
    key: &ObjectKey,
    ctx: &PolicyContext<'_>,
    own_kinds: &BTreeMap<(String, String), bool>,
    refused_roles: &BTreeSet<(String, String)>,
) -> Vec<(ContentRule, String)> {
    let group_kind = (key.group.as_str(), key.kind.as_str());
    if NEVER_ALLOWED.contains(&group_kind) {
        return vec![(
            ContentRule::KindNeverAllowed,
            format!(
                "a bundle may not create {} objects (POM creates the install namespace itself, and admission, aggregated APIs and platform objects are the cluster's)",
                kind_display(key)
            ),
        )];
    }
    let mut found = Vec::new();
    let own_kind = own_kinds.contains_key(&(key.group.clone(), key.kind.clone()));
    let allowed = allowed_kind(ctx.format, group_kind)
        || (ctx.format == Some(BundleFormat::PlainV0) && own_kind);
    if !allowed {
        found.push((
            ContentRule::KindNotAllowed,
            format!(
                "{} is not a kind a {} bundle may contain (allowed: {})",
                kind_display(key),
                ctx.format.map_or("bundle", BundleFormat::as_str),
                allowed_list(ctx.format)
            ),
        ));
    }
    if !key.namespace.is_empty() && key.namespace != ctx.install_namespace {
        found.push((
            ContentRule::ObjectOutsideInstallNamespace,
            format!(
                "every namespaced object must be in the install namespace {:?}, this one names {:?}",
                ctx.install_namespace, key.namespace
            ),
        ));
    }
    if key.group == "rbac.authorization.k8s.io" {
        match key.kind.as_str() {
            "RoleBinding" | "ClusterRoleBinding" => {
                found.extend(binding_findings(object, key, ctx, refused_roles));
            }
            "Role" | "ClusterRole" => found.extend(role_findings(object)),
            _ => {}
        }
    }
    found
}

fn kind_display(key: &ObjectKey) -> String {
    if key.group.is_empty() {
        key.kind.clone()
    } else {
        format!("{}.{}", key.kind, key.group)
    }
}

fn allowed_kind(format: Option<BundleFormat>, group_kind: (&str, &str)) -> bool {
    match format {
        Some(BundleFormat::RegistryV1) | None => REGISTRY_V1_KINDS.contains(&group_kind),
        Some(BundleFormat::PlainV0) => PLAIN_V0_KINDS.contains(&group_kind),
    }
}

fn allowed_list(format: Option<BundleFormat>) -> String {
    let list = match format {
        Some(BundleFormat::PlainV0) => PLAIN_V0_KINDS,
        Some(BundleFormat::RegistryV1) | None => REGISTRY_V1_KINDS,
    };
    let mut names: Vec<String> = list
        .iter()
        .map(|(g, k)| {
            if g.is_empty() {
                (*k).to_owned()
            } else {
                format!("{k}.{g}")
            }
        })
        .collect();
    if format == Some(BundleFormat::PlainV0) {
        names.push("custom resources of the bundle's own CRDs".to_owned());
    }
    names.join(", ")
}

/// (kind, name) of the bundle's roles that grant everything: binding them is privileged.
fn refused_role_names(objects: &[Value]) -> BTreeSet<(String, String)> {
    objects
        .iter()
        .filter(|o| {
            let key = ObjectKey::of(o);
            key.group == "rbac.authorization.k8s.io"
                && matches!(key.kind.as_str(), "Role" | "ClusterRole")
                && role_findings(o)
                    .iter()
                    .any(|(rule, _)| *rule == ContentRule::WildcardRole)
        })
        .map(|o| {
            let key = ObjectKey::of(o);
            (key.kind, key.name)
        })
        .collect()
}

fn binding_findings(
    object: &Value,
    key: &ObjectKey,
    ctx: &PolicyContext<'_>,
    refused_roles: &BTreeSet<(String, String)>,
) -> Vec<(ContentRule, String)> {
    let mut found = Vec::new();
    let role_kind = str_at(object, &["roleRef", "kind"]).unwrap_or_default();
    let role_name = str_at(object, &["roleRef", "name"]).unwrap_or_default();
    if role_kind == "ClusterRole" && PRIVILEGED_CLUSTER_ROLES.contains(&role_name) {
        found.push((
            ContentRule::PrivilegedRoleBinding,
            format!("it binds the built-in ClusterRole {role_name:?}, which grants write access to almost everything; ship a role with the permissions the operator needs"),
        ));
    } else if refused_roles.contains(&(role_kind.to_owned(), role_name.to_owned())) {
        found.push((
            ContentRule::PrivilegedRoleBinding,
            format!("it binds {role_kind} {role_name:?} of the same bundle, which grants every verb on every resource"),
        ));
    }
    let subjects = object
        .get("subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for subject in subjects {
        let kind = str_at(subject, &["kind"]).unwrap_or_default();
        let name = str_at(subject, &["name"]).unwrap_or_default();
        match kind {
            "User" | "Group" if name.starts_with("system:") => found.push((
                ContentRule::SystemSubjectBinding,
                format!("it binds the {} {name:?}: system: users and groups are the platform's own (all authenticated users, nodes, service accounts of every namespace)", kind.to_lowercase()),
            )),
            "ServiceAccount" => {
                // A subject without a namespace means the binding's own (none for a
                // ClusterRoleBinding, which the API server then refuses).
                let namespace = str_at(subject, &["namespace"])
                    .filter(|n| !n.is_empty())
                    .unwrap_or(key.namespace.as_str());
                if namespace != ctx.install_namespace {
                    let whose = if Some(namespace) == ctx.manager_namespace
                        && ctx.manager_service_account.is_none_or(|sa| sa == name)
                    {
                        " (POM's own ServiceAccount: a bundle may never grant the manager anything)"
                    } else {
                        ""
                    };
                    found.push((
                        ContentRule::ForeignServiceAccountBinding,
                        format!(
                            "it binds ServiceAccount {name:?} in namespace {namespace:?}{whose}; a bundle may bind only ServiceAccounts of its install namespace {:?}",
                            ctx.install_namespace
                        ),
                    ));
                }
            }
            _ => {}
        }
    }
    found
}

/// The (verb, group, resource) grants that let a holder raise its own rights.
const ESCALATING_GRANTS: &[(&str, &str, &str)] = &[
    ("escalate", "rbac.authorization.k8s.io", "roles"),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles"),
    ("bind", "rbac.authorization.k8s.io", "roles"),
    ("bind", "rbac.authorization.k8s.io", "clusterroles"),
    ("impersonate", "", "users"),
    ("impersonate", "", "groups"),
    ("impersonate", "", "serviceaccounts"),
    ("impersonate", "authentication.k8s.io", "userextras"),
    ("impersonate", "authentication.k8s.io", "uids"),
];

fn role_findings(object: &Value) -> Vec<(ContentRule, String)> {
    let mut found = Vec::new();
    if object.get("aggregationRule").is_some_and(|r| !r.is_null()) {
        found.push((
            ContentRule::AggregatingRole,
            "it has an aggregationRule, so it grants whatever any ClusterRole matching its selector grants, now or later".to_owned(),
        ));
    }
    let rules = object
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    for (index, rule) in rules.iter().enumerate() {
        let list = |field: &str| -> Vec<&str> {
            rule.get(field)
                .and_then(Value::as_array)
                .map(|items| items.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default()
        };
        let (verbs, groups, resources) = (list("verbs"), list("apiGroups"), list("resources"));
        let has =
            |items: &[&str], wanted: &str| items.iter().any(|item| *item == "*" || *item == wanted);
        if verbs.contains(&"*") && groups.contains(&"*") && resources.contains(&"*") {
            found.push((
                ContentRule::WildcardRole,
                format!("rules[{index}] grants every verb on every resource of every API group (cluster-admin)"),
            ));
            continue;
        }
        let escalating: Vec<String> = ESCALATING_GRANTS
            .iter()
            .filter(|(verb, group, resource)| {
                has(&verbs, verb) && has(&groups, group) && has(&resources, resource)
            })
            .map(|(verb, group, resource)| {
                if group.is_empty() {
                    format!("{verb} {resource}")
                } else {
                    format!("{verb} {resource}.{group}")
                }
            })
            .collect();
        if !escalating.is_empty() {
            found.push((
                ContentRule::EscalatingRole,
                format!(
                    "rules[{index}] grants {}, which lets its holder give itself any permission",
                    escalating.join(", ")
                ),
            ));
        }
    }
    found
}
