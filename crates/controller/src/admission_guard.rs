//! The manager's admission guard: a ValidatingAdmissionPolicy, shipped with the install
//! manifests, that holds the manager's own ServiceAccount to the content-policy rules no admin
//! exception can lift, inside the API server.
//!
//! Why: the manager needs `escalate` and `bind` and cluster-wide write access to the kinds
//! bundles ship, and RBAC cannot say "except kube-system", "except my own role" or "except
//! objects someone else owns". The renderer refuses such content, but that is POM's own code;
//! this policy makes the API server refuse the same writes from the manager's identity, so a bug
//! in POM, or a compromised manager, cannot use the grant to take over the cluster:
//! - no write to its own RBAC objects (`platform-operators-manager*`), nor a binding to them;
//! - no write in one of the platform's namespaces (`pom_api::namespaces`: `kube-*`,
//!   `default`, `openshift-config*`, `openshift-monitoring`, its own...), nor in any other
//!   `openshift-*` namespace unless POM owns it (its owner label, read from
//!   `namespaceObject`): Red Hat's operators install into `openshift-*` namespaces POM creates;
//! - no binding of `system:` users or groups but the group of a non-platform namespace's own
//!   ServiceAccounts, nor of ServiceAccounts of platform namespaces but the content policy's
//!   named platform readers (OpenShift's Prometheus) in a RoleBinding (§6);
//! - no update or delete of an object POM does not own (no owner label) unless the admin
//!   annotated it for adoption;
//! - no webhook configuration but one shaped as the renderer shapes a bundle's: calling a
//!   Service outside the platform's namespaces, excluding POM-managed objects, never matching
//!   POM's API group or every group;
//! - no binding of a `system:` ClusterRole the content policy's table of built-in roles does
//!   not know (issue 33 item 1: the roles it knows, `cluster-admin` included, are grants of what
//!   they hold, under the consent their power needs, bounded by their subjects as a role the
//!   bundle ships is), and no ServiceAccount token Secret (with `create` on Secrets and a
//!   binding, a manager could mint itself any power);
//! - no change to the spec of a PlatformOperator or Catalog (the admin's: its consent, its
//!   exceptions), only their finalizers and status; no ClusterOperator but the aggregated one.
//!
//! It matches every kind the manager may write ([`crate::manifests::cluster_role_rules`]; CRDs,
//! Namespaces and OperatorCondition status included, so the owner rule holds for them too),
//! but Events and the reviews of `/metrics` tokens, and only requests of the manager's
//! ServiceAccount, so other clients never pay for it.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicyBindingSpec,
    ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta};
use pom_api::labels::{ADOPT, OWNER_PO, PACKAGE};
use pom_api::namespaces::{OWNED_ONLY_PREFIX, platform_namespace_cel};
use pom_api::openshift::AGGREGATED_CLUSTER_OPERATOR;
use pom_policy::snapshot::GuardState;

use crate::manifests::{NAME, NAMESPACE, cluster_role_rules};
use pom_render::built_in_roles::{BUILT_IN_ROLES, looks_built_in};
use pom_render::content_policy::PLATFORM_READERS;

/// Name of the policy and of its binding.
pub const GUARD: &str = "platform-operators-manager-guard";

/// The manager's ServiceAccount as the API server names its requests.
fn manager_user() -> String {
    format!("system:serviceaccount:{NAMESPACE}:{NAME}")
}

/// The policy (see the module documentation).
#[must_use]
pub fn policy() -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(GUARD.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(guarded_resources()),
                ..MatchResources::default()
            }),
            match_conditions: Some(vec![MatchCondition {
                name: "the-manager-only".to_owned(),
                expression: format!("request.userInfo.username == '{}'", manager_user()),
            }]),
            variables: Some(vec![
                Variable {
                    name: "target".to_owned(),
                    expression: "object != null ? object : oldObject".to_owned(),
                },
                Variable {
                    name: "binding".to_owned(),
                    expression: "object != null && request.resource.resource in \
                                 ['rolebindings', 'clusterrolebindings']"
                        .to_owned(),
                },
            ]),
            validations: Some(validations()),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    }
}

/// Binds [`policy`] cluster-wide with `Deny`.
#[must_use]
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    deny_binding(GUARD)
}

/// A binding of the policy `name`, of the same name, cluster-wide with `Deny`.
#[must_use]
pub(crate) fn deny_binding(name: &str) -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(name.to_owned()),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    }
}

/// The verbs that write: a rule granting any of them is guarded.
const WRITE_VERBS: &[&str] = &["create", "update", "patch", "delete"];

/// Written by the manager but outside the guard: Events (on cluster-scoped POs they go to
/// `default`, a platform namespace) and the reviews that authenticate `/metrics` scrapes (not
/// stored).
const UNGUARDED_RESOURCES: &[&str] = &["events", "tokenreviews", "subjectaccessreviews"];

/// POM's own API group: its objects are the admin's, never a bundle's.
const POM_GROUP_CEL: &str = "request.resource.group == 'platform.openshift.io'";

/// Every resource the manager's ClusterRole lets it write.
fn guarded_resources() -> Vec<NamedRuleWithOperations> {
    cluster_role_rules()
        .into_iter()
        .filter(|rule| {
            rule.verbs
                .iter()
                .any(|verb| WRITE_VERBS.contains(&verb.as_str()))
        })
        .filter_map(|mut rule| {
            let resources = rule
                .resources
                .take()?
                .into_iter()
                .filter(|r| !UNGUARDED_RESOURCES.contains(&r.as_str()))
                .collect::<Vec<_>>();
            (!resources.is_empty()).then(|| {
                rule.resources = Some(resources);
                rule
            })
        })
        .map(|rule| NamedRuleWithOperations {
            api_groups: rule.api_groups,
            api_versions: Some(vec!["*".to_owned()]),
            operations: Some(vec![
                "CREATE".to_owned(),
                "UPDATE".to_owned(),
                "DELETE".to_owned(),
            ]),
            resources: rule.resources,
            ..NamedRuleWithOperations::default()
        })
        .collect()
}

/// A CEL test of whether the request's namespace is one the manager may write in: not the
/// platform's, and an `openshift-*` one only when POM owns it.
fn writable_request_namespace() -> String {
    format!(
        "!{} && (!request.namespace.startsWith('{OWNED_ONLY_PREFIX}') || \
         (namespaceObject != null && has(namespaceObject.metadata.labels) && \
         '{OWNER_PO}' in namespaceObject.metadata.labels))",
        platform_namespace_cel("request.namespace")
    )
}

fn rule(expression: String, message: String) -> Validation {
    Validation {
        expression,
        message: Some(message),
        reason: Some("Forbidden".to_owned()),
        ..Validation::default()
    }
}

/// A CEL list literal of the `system:` names of the built-in roles the content policy's table
/// knows ([`BUILT_IN_ROLES`]).
fn known_system_roles() -> String {
    let names: Vec<String> = BUILT_IN_ROLES
        .iter()
        .filter(|role| looks_built_in(role.name))
        .map(|role| format!("'{}'", role.name))
        .collect();
    format!("[{}]", names.join(", "))
}

/// A CEL test that `role` (a binding's `roleRef.name`) is a built-in-looking ClusterRole no
/// consent allows a bundle to bind: a `system:` role the content policy's table of built-in
/// roles does not know. The roles the table knows (cluster-admin, admin, edit, the SCC
/// roles...) are grants of what they hold, allowed under the consent their power needs: the
/// guard cannot see consent, and bounds them as it bounds the roles a bundle ships (by their
/// subjects; docs/decisions.md, issue 33).
fn forbidden_built_in_role(role: &str) -> String {
    format!(
        "object.roleRef.kind == 'ClusterRole' && {role}.startsWith('system:') && \
         !({role} in {known})",
        known = known_system_roles(),
    )
}

/// CEL: the value of label `label` on `object` (`object`, `oldObject`), `''` when it has none
/// or is absent (a CREATE's `oldObject`, a DELETE's `object`).
pub(crate) fn label_cel(object: &str, label: &str) -> String {
    format!(
        "({object} == null || !has({object}.metadata.labels) || !('{label}' in \
         {object}.metadata.labels) ? '' : {object}.metadata.labels['{label}'])"
    )
}

/// An object labelled for one PlatformOperator is not relabelled for another, but within its
/// package: the manager takes over only an object whose PO is gone and that belongs to the
/// same package (`pom_policy::ownership`); the owner label's value is compared, not only its
/// presence (issue 33 item 5).
fn owner_label_within_package() -> Validation {
    let (old_owner, new_owner) = (
        label_cel("oldObject", OWNER_PO),
        label_cel("object", OWNER_PO),
    );
    let (old_package, new_package) = (
        label_cel("oldObject", PACKAGE),
        label_cel("object", PACKAGE),
    );
    rule(
        format!(
            "request.operation != 'UPDATE' || {old_owner} == '' || {new_owner} == '' || \
             {new_owner} == {old_owner} || ({old_package} != '' && {new_package} == {old_package})"
        ),
        format!(
            "{GUARD}: the manager may not relabel an object of one PlatformOperator \
             ({OWNER_PO}) for another, but within its package ({PACKAGE})"
        ),
    )
}

/// The guard's rules on the manager, one function each, in the order the API server checks
/// them.
fn validations() -> Vec<Validation> {
    vec![
        own_rbac(),
        platform_namespaces(),
        platform_namespace_objects(),
        owned_objects_only(),
        owner_label_within_package(),
        bundle_shaped_webhooks(),
        own_roles_unbound(),
        known_built_in_roles(),
        no_token_secrets(),
        admin_specs(),
        one_cluster_operator(),
        bound_subjects(),
    ]
}

/// No write to its own RBAC objects.
fn own_rbac() -> Validation {
    rule(
        format!(
            "request.resource.group != 'rbac.authorization.k8s.io' || \
             !variables.target.metadata.name.startsWith('{NAME}')"
        ),
        format!(
            "{GUARD}: the manager may not change its own RBAC objects ({NAME}*); an admin \
             changes them through the install manifests"
        ),
    )
}

/// No write in a platform namespace, nor in an `openshift-*` one POM does not own.
fn platform_namespaces() -> Validation {
    rule(
        // `request.namespace` is absent, not empty, for cluster-scoped objects.
        format!(
            "!has(request.namespace) || request.namespace == '' || ({})",
            writable_request_namespace()
        ),
        format!(
            "{GUARD}: the manager may not write objects in a platform namespace (kube-*, \
             default, openshift-config*, openshift-monitoring, ...) nor in an openshift-* \
             namespace it does not own; bundles install into their PlatformOperator's \
             installNamespace"
        ),
    )
}

/// No creating or changing a platform namespace.
fn platform_namespace_objects() -> Validation {
    rule(
        format!(
            "request.resource.resource != 'namespaces' || !{}",
            platform_namespace_cel("variables.target.metadata.name")
        ),
        format!("{GUARD}: the manager may not create or change a platform namespace"),
    )
}

/// No update or delete of an object POM does not own, unless annotated for adoption.
fn owned_objects_only() -> Validation {
    rule(
        format!(
            "request.operation == 'CREATE' || {POM_GROUP_CEL} || \
             request.resource.resource == 'clusteroperators' || \
             (has(oldObject.metadata.labels) && '{OWNER_PO}' in oldObject.metadata.labels) || \
             (has(oldObject.metadata.annotations) && '{ADOPT}' in oldObject.metadata.annotations)"
        ),
        format!(
            "{GUARD}: the manager may not change or delete an object it does not own (no \
             {OWNER_PO} label); to let a PlatformOperator adopt it, annotate it {ADOPT}=<name>"
        ),
    )
}

/// A webhook only in the shape the renderer gives a bundle's.
fn bundle_shaped_webhooks() -> Validation {
    rule(
        // A webhook the manager registers is a bundle's, shaped as the renderer shapes it:
        // it calls a Service outside the platform's namespaces, never sees objects POM
        // manages, and never matches POM's API group or every group.
        format!(
            "object == null || !(request.resource.resource in \
             ['validatingwebhookconfigurations', 'mutatingwebhookconfigurations']) || \
             !has(object.webhooks) || object.webhooks.all(w, \
             has(w.clientConfig.service) && !has(w.clientConfig.url) && \
             !{platform} && \
             has(w.objectSelector) && has(w.objectSelector.matchExpressions) && \
             w.objectSelector.matchExpressions.exists(e, e.key == '{OWNER_PO}' && \
             e.operator == 'DoesNotExist') && \
             (!has(w.rules) || w.rules.all(r, !has(r.apiGroups) || \
             !r.apiGroups.exists(g, g == '*' || g == '{POM_GROUP}'))))",
            platform = platform_namespace_cel("w.clientConfig.service.namespace"),
            POM_GROUP = pom_api::GROUP,
        ),
        format!(
            "{GUARD}: a webhook the manager registers must call a Service outside the \
             platform's namespaces, exclude objects labelled {OWNER_PO} and never match \
             the {} group or every group",
            pom_api::GROUP
        ),
    )
}

/// No binding of its own roles.
fn own_roles_unbound() -> Validation {
    rule(
        format!("!variables.binding || !object.roleRef.name.startsWith('{NAME}')"),
        format!("{GUARD}: the manager may not bind its own roles ({NAME}*) to anyone"),
    )
}

/// No binding of a `system:` ClusterRole the built-in roles table does not know.
fn known_built_in_roles() -> Validation {
    rule(
        format!(
            "!variables.binding || !({})",
            forbidden_built_in_role("object.roleRef.name")
        ),
        format!(
            "{GUARD}: the manager may not bind a system: ClusterRole that the content \
             policy's table of built-in roles does not know (docs/content-policy.md); a \
             bundle's power comes from the roles it ships and the built-in roles it binds, \
             judged by what they grant"
        ),
    )
}

/// No ServiceAccount token Secrets.
fn no_token_secrets() -> Validation {
    rule(
        "object == null || request.resource.resource != 'secrets' || !has(object.type) || \
         object.type != 'kubernetes.io/service-account-token'"
            .to_owned(),
        format!(
            "{GUARD}: the manager may not create ServiceAccount token Secrets; an operator's \
             pods get their tokens from the kubelet"
        ),
    )
}

/// No change to the spec of a PlatformOperator or Catalog.
fn admin_specs() -> Validation {
    rule(
        format!(
            "!({POM_GROUP_CEL}) || (has(request.subResource) && request.subResource != '') || \
             object == null || \
             oldObject == null || \
             (has(object.spec) == has(oldObject.spec) && \
             (!has(object.spec) || object.spec == oldObject.spec))"
        ),
        format!(
            "{GUARD}: the manager may not change the spec of a PlatformOperator or Catalog \
             (its consent, exceptions and source are the admin's); it writes their \
             finalizers and status only"
        ),
    )
}

/// One ClusterOperator, the aggregated one.
fn one_cluster_operator() -> Validation {
    rule(
        format!(
            "request.resource.resource != 'clusteroperators' || \
             variables.target.metadata.name == '{AGGREGATED_CLUSTER_OPERATOR}'"
        ),
        format!(
            "{GUARD}: the manager writes one ClusterOperator, {AGGREGATED_CLUSTER_OPERATOR}; \
             other operators report their own"
        ),
    )
}

/// No binding of `system:` users or groups or platform ServiceAccounts.
fn bound_subjects() -> Validation {
    rule(
        format!(
            "!variables.binding || !has(object.subjects) || object.subjects.all(s, \
             !((s.kind == 'User' || s.kind == 'Group') && s.name.startsWith('system:') && \
             !({own_group})) && \
             !(s.kind == 'ServiceAccount' && has(s.namespace) && {} && \
             !(request.resource.resource == 'rolebindings' && ({readers}))))",
            platform_namespace_cel("s.namespace"),
            own_group = namespace_accounts_group_cel(),
            readers = platform_readers_cel(),
        ),
        format!(
            "{GUARD}: the manager may not bind system: users or groups (but the group of a \
             namespace's own ServiceAccounts outside the platform's namespaces), nor \
             ServiceAccounts of platform namespaces (its own included) but the platform's \
             named readers (OpenShift's Prometheus) in a RoleBinding"
        ),
    )
}

/// The length of `system:serviceaccounts:`, where a namespace's accounts group names it.
const ACCOUNTS_GROUP_PREFIX_LEN: usize = "system:serviceaccounts:".len();

/// CEL: subject `s` is the group of one namespace's ServiceAccounts
/// (`system:serviceaccounts:<ns>`) of a namespace that is not the platform's. The same grant
/// as binding each of that namespace's ServiceAccounts, which the guard allows outside the
/// platform's namespaces; the content policy allows only the install namespace's (issue 33
/// item 2).
fn namespace_accounts_group_cel() -> String {
    let namespace = format!("s.name.substring({ACCOUNTS_GROUP_PREFIX_LEN})");
    format!(
        "s.kind == 'Group' && s.name.startsWith('system:serviceaccounts:') && \
         size(s.name) > {ACCOUNTS_GROUP_PREFIX_LEN} && !{namespace}.contains(':') && !{}",
        platform_namespace_cel(&namespace)
    )
}

/// CEL: ServiceAccount subject `s` is one of the platform identities the content policy lets
/// a bundle give read access to its install namespace ([`PLATFORM_READERS`]).
fn platform_readers_cel() -> String {
    PLATFORM_READERS
        .iter()
        .map(|(namespace, name)| format!("(s.namespace == '{namespace}' && s.name == '{name}')"))
        .collect::<Vec<_>>()
        .join(" || ")
}

/// Whether the guard the API server holds is the one shipped (issue 22 item 2): both objects
/// there, the policy's spec carrying every field of [`policy`]'s as shipped (the API server's
/// defaults may add fields; any shipped field changed or removed, a validation included, is a
/// change), and the binding denying with the policy, on everything. Pure, for the watch.
#[must_use]
pub fn presence(
    live_policy: Option<&ValidatingAdmissionPolicy>,
    live_binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> GuardState {
    presence_of(GUARD, &policy(), live_policy, live_binding)
}

/// Whether both guards the install ships are in place: the manager's ([`presence`]) and the
/// owner-label guard ([`crate::owner_label_guard`]), each found by name among the live
/// policies and bindings; the first problem found. The owner-label guard bounds tenants, not
/// the manager: without it the state is [`GuardState::OwnerLabelGuardDown`] (Degraded, writes
/// go on), never a stop of POM's writes.
#[must_use]
pub fn presence_of_both(
    live_policies: &[&ValidatingAdmissionPolicy],
    live_bindings: &[&ValidatingAdmissionPolicyBinding],
) -> GuardState {
    use crate::owner_label_guard::{self, OWNER_LABEL_GUARD};
    let named = |name: &str| {
        (
            live_policies
                .iter()
                .copied()
                .find(|p| p.metadata.name.as_deref() == Some(name)),
            live_bindings
                .iter()
                .copied()
                .find(|b| b.metadata.name.as_deref() == Some(name)),
        )
    };
    let (policy_live, binding_live) = named(GUARD);
    match presence(policy_live, binding_live) {
        GuardState::Intact => {
            let (policy_live, binding_live) = named(OWNER_LABEL_GUARD);
            match presence_of(
                OWNER_LABEL_GUARD,
                &owner_label_guard::policy(),
                policy_live,
                binding_live,
            ) {
                GuardState::Missing { object } => GuardState::OwnerLabelGuardDown {
                    object,
                    detail: "does not exist".to_owned(),
                },
                GuardState::Changed { object, detail } => GuardState::OwnerLabelGuardDown {
                    object,
                    detail: format!("is not as shipped ({detail})"),
                },
                state => state,
            }
        }
        problem => problem,
    }
}

/// Whether the guard `name` is there as `shipped` (see [`presence`]).
fn presence_of(
    name: &str,
    shipped: &ValidatingAdmissionPolicy,
    live_policy: Option<&ValidatingAdmissionPolicy>,
    live_binding: Option<&ValidatingAdmissionPolicyBinding>,
) -> GuardState {
    let Some(live_policy) = live_policy else {
        return GuardState::Missing {
            object: format!("ValidatingAdmissionPolicy {name}"),
        };
    };
    let Some(live_binding) = live_binding else {
        return GuardState::Missing {
            object: format!("ValidatingAdmissionPolicyBinding {name}"),
        };
    };
    let shipped = serde_json::to_value(&shipped.spec).unwrap_or_default();
    let live = serde_json::to_value(&live_policy.spec).unwrap_or_default();
    if let Some(path) = first_difference(&shipped, &live, "spec") {
        return GuardState::Changed {
            object: format!("ValidatingAdmissionPolicy {name}"),
            detail: format!("{path} differs from the shipped policy"),
        };
    }
    let spec = live_binding.spec.clone().unwrap_or_default();
    let detail = if spec.policy_name.as_deref() != Some(name) {
        Some(format!("spec.policyName is not {name}"))
    } else if !spec
        .validation_actions
        .unwrap_or_default()
        .iter()
        .any(|a| a == "Deny")
    {
        Some("spec.validationActions does not include Deny".to_owned())
    } else if spec.param_ref.is_some() || spec.match_resources.as_ref().is_some_and(narrows) {
        Some("spec.matchResources or spec.paramRef narrows what it applies to".to_owned())
    } else {
        None
    };
    match detail {
        Some(detail) => GuardState::Changed {
            object: format!("ValidatingAdmissionPolicyBinding {name}"),
            detail,
        },
        None => GuardState::Intact,
    }
}

/// Whether a binding's `matchResources` applies the policy to less than everything.
fn narrows(resources: &MatchResources) -> bool {
    let selects = |selector: &Option<LabelSelector>| {
        selector.as_ref().is_some_and(|s| {
            s.match_labels.as_ref().is_some_and(|l| !l.is_empty())
                || s.match_expressions.as_ref().is_some_and(|e| !e.is_empty())
        })
    };
    selects(&resources.namespace_selector)
        || selects(&resources.object_selector)
        || resources
            .resource_rules
            .as_ref()
            .is_some_and(|r| !r.is_empty())
        || resources
            .exclude_resource_rules
            .as_ref()
            .is_some_and(|r| !r.is_empty())
}

/// The first path at which `live` lacks or changes what `shipped` has (fields `live` adds are
/// the API server's defaults); lists must match item for item.
fn first_difference(
    shipped: &serde_json::Value,
    live: &serde_json::Value,
    path: &str,
) -> Option<String> {
    use serde_json::Value;
    match (shipped, live) {
        (Value::Object(want), Value::Object(have)) => want.iter().find_map(|(key, value)| {
            let path = format!("{path}.{key}");
            match have.get(key) {
                Some(found) => first_difference(value, found, &path),
                None if value.is_null() => None,
                None => Some(path),
            }
        }),
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => want
            .iter()
            .zip(have)
            .enumerate()
            .find_map(|(i, (w, h))| first_difference(w, h, &format!("{path}[{i}]"))),
        _ if shipped == live => None,
        _ => Some(path.to_owned()),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn guards_every_kind_the_manager_may_write() {
        let resources: Vec<String> = guarded_resources()
            .into_iter()
            .flat_map(|rule| rule.resources.unwrap_or_default())
            .collect();
        for kind in [
            "clusterroles",
            "clusterrolebindings",
            "rolebindings",
            "secrets",
            // Issue 22 item 1: what the manager writes but never deletes.
            "customresourcedefinitions",
            "namespaces",
            "operatorconditions/status",
            "platformoperators",
            "clusteroperators",
        ] {
            assert!(
                resources.iter().any(|r| r == kind),
                "{kind} in {resources:?}"
            );
        }
        // Read-only kinds, Events and the `/metrics` reviews are not guarded.
        for kind in [
            "clusterversions",
            "endpointslices",
            "events",
            "tokenreviews",
            "subjectaccessreviews",
        ] {
            assert!(
                !resources.iter().any(|r| r == kind),
                "{kind} in {resources:?}"
            );
        }
    }

    #[test]
    fn applies_to_the_manager_only_and_denies() {
        let spec = policy().spec.unwrap();
        let condition = &spec.match_conditions.unwrap()[0];
        assert!(condition.expression.contains(&manager_user()));
        assert_eq!(spec.failure_policy.as_deref(), Some("Fail"));
        let binding = binding().spec.unwrap();
        assert_eq!(binding.policy_name.as_deref(), Some(GUARD));
        assert_eq!(binding.validation_actions.unwrap(), ["Deny"]);
    }

    #[test]
    fn both_guards_are_found_by_name_and_checked() {
        use crate::owner_label_guard::{self, OWNER_LABEL_GUARD};
        let (guard, guard_binding) = (policy(), binding());
        let (owner, owner_binding) = (owner_label_guard::policy(), owner_label_guard::binding());
        let mut other = policy();
        other.metadata.name = Some("someone-elses".into());
        assert_eq!(
            presence_of_both(&[&other, &owner, &guard], &[&owner_binding, &guard_binding]),
            GuardState::Intact
        );
        // The owner-label guard bounds tenants: without it, Degraded while writes go on.
        let down = presence_of_both(&[&guard, &other], &[&owner_binding, &guard_binding]);
        assert!(matches!(
            &down,
            GuardState::OwnerLabelGuardDown { object, detail } if *object == format!("ValidatingAdmissionPolicy {OWNER_LABEL_GUARD}") && detail == "does not exist"
        ));
        assert!(down.allows_writes() && down.problem().is_none());
        assert!(down.degradation().unwrap().contains(OWNER_LABEL_GUARD));
        let mut loosened = owner_label_guard::policy();
        loosened
            .spec
            .as_mut()
            .unwrap()
            .validations
            .as_mut()
            .unwrap()[0]
            .expression = "true".into();
        assert!(matches!(
            presence_of_both(&[&guard, &loosened], &[&owner_binding, &guard_binding]),
            GuardState::OwnerLabelGuardDown { object, detail } if object.contains(OWNER_LABEL_GUARD) && detail.contains("not as shipped")
        ));
        // The manager's own guard missing still stops every write.
        let stopped = presence_of_both(&[&owner], &[&owner_binding, &guard_binding]);
        assert!(!stopped.allows_writes() && stopped.degradation() == stopped.problem());
        assert!(matches!(
            presence_of_both(&[&owner], &[&owner_binding, &guard_binding]),
            GuardState::Missing { object } if object == format!("ValidatingAdmissionPolicy {GUARD}")
        ));
    }

    #[test]
    fn the_shipped_guard_is_intact_and_any_change_is_named() {
        let mut live = policy();
        // The API server adds defaults: not a change.
        if let Some(spec) = live.spec.as_mut() {
            spec.match_constraints.as_mut().unwrap().match_policy = Some("Equivalent".into());
        }
        assert_eq!(presence(Some(&live), Some(&binding())), GuardState::Intact);
        assert!(matches!(
            presence(None, Some(&binding())),
            GuardState::Missing { object } if object == format!("ValidatingAdmissionPolicy {GUARD}")
        ));
        assert!(matches!(
            presence(Some(&live), None),
            GuardState::Missing { object } if object.starts_with("ValidatingAdmissionPolicyBinding")
        ));
        // A validation dropped, or one loosened.
        let mut fewer = policy();
        fewer
            .spec
            .as_mut()
            .unwrap()
            .validations
            .as_mut()
            .unwrap()
            .pop();
        let mut looser = policy();
        looser.spec.as_mut().unwrap().validations.as_mut().unwrap()[0].expression = "true".into();
        let mut audit_only = binding();
        audit_only.spec.as_mut().unwrap().validation_actions = Some(vec!["Audit".into()]);
        let mut narrowed = binding();
        narrowed.spec.as_mut().unwrap().match_resources = Some(MatchResources {
            namespace_selector: Some(LabelSelector {
                match_labels: Some([("x".to_owned(), "y".to_owned())].into()),
                ..LabelSelector::default()
            }),
            ..MatchResources::default()
        });
        for (policy, binding, says) in [
            (&fewer, &binding(), "spec.validations"),
            (&looser, &binding(), "spec.validations[0].expression"),
            (&policy(), &audit_only, "Deny"),
            (&policy(), &narrowed, "narrows"),
        ] {
            match presence(Some(policy), Some(binding)) {
                GuardState::Changed { detail, .. } => assert!(detail.contains(says), "{detail}"),
                other => panic!("{says}: {other:?}"),
            }
        }
    }
}
