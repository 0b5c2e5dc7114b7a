//! The owner-label guard: a ValidatingAdmissionPolicy, shipped with the install manifests
//! beside the manager's guard ([`crate::admission_guard`]), that keeps the
//! `platform.openshift.io/owner` label the manager's alone (issue 33 items 4, 5).
//!
//! Why: the label marks an object POM manages. POM's own rules read it (the manager's guard
//! lets the manager change only what carries it; ownership between PlatformOperators compares
//! its value), and every webhook POM installs for a bundle excludes the objects that carry it
//! (`objectSelector` `DoesNotExist`), so that one operator's webhook never sees another's
//! objects. A tenant who could add it to its own objects would exempt them from every such
//! webhook, and one who could change its value would hand an object to another
//! PlatformOperator. So no one but the manager and the platform's own identities may set,
//! change or remove it: a CREATE that carries it and an UPDATE that changes its value (added,
//! changed, removed) are refused.
//!
//! One principled exception (review finding): an operator POM installed copies labels from
//! the objects POM applied for it (operator-lib makes a ServiceMonitor from its metrics
//! Service's labels; controllers doing CreateOrUpdate copy the Deployment's labels onto the
//! children), so a ServiceAccount of a namespace may mark an object *in that same namespace*
//! with the owner label's value *that the Namespace itself carries* (the PlatformOperator POM
//! installed there), at creation or by adding it. That marks nothing for another PO and
//! exempts nothing outside the namespace that PO's operator already holds; it never changes
//! nor removes the value. POM never deletes such an object: its owner-label sweep deletes only
//! what POM's own field manager wrote (`operator/objects.rs`), and prune and cleanup otherwise
//! delete by the inventory.
//!
//! Who it applies to: every request but those of `system:` identities (the API server's
//! controllers, nodes, and the platform's namespaces' ServiceAccounts, the manager's
//! included, but not those of the platform namespaces where third-party code runs, such as
//! OLM v0's `openshift-operators`) and of the break-glass group `system:masters`, judged in the API server before the object is stored. Updates and deletes of
//! labelled objects that leave the label alone are not refused: an operator updates the webhook
//! configurations and CRDs POM applied for it (their CA bundles), and the manager repairs any
//! other change as drift.

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ValidatingAdmissionPolicy,
    ValidatingAdmissionPolicyBinding, ValidatingAdmissionPolicySpec, Validation,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pom_api::labels::{ADOPT, OWNER_PO};
use pom_api::namespaces::platform_namespace_cel;

use crate::admission_guard::label_cel;
use crate::manifests::NAME;

/// Name of the policy and of its binding.
pub const OWNER_LABEL_GUARD: &str = "platform-operators-owner-label-guard";

/// The prefix of a ServiceAccount's username.
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// Platform namespaces where code the platform did not ship runs: OLM v0's global operator
/// namespace (every AllNamespaces operator OLM installs), the catalog pods of the marketplace,
/// and the two namespaces any admin deploys into. Their ServiceAccounts are tenants here,
/// although the namespaces are the platform's (never an install namespace).
const THIRD_PARTY_CODE_NAMESPACES: &[&str] = &[
    "default",
    "openshift",
    "openshift-operators",
    "openshift-marketplace",
];

/// The group whose members bypass authorization altogether (break-glass): the guard cannot
/// restrict them (they may delete it), so it does not pretend to, and leaves them a way to
/// detach an object from POM by hand.
const BREAK_GLASS_GROUP: &str = "system:masters";

/// CEL: the request comes from a tenant: a user that is not a `system:` identity (nor in
/// [`BREAK_GLASS_GROUP`]), or a ServiceAccount of a namespace that is not the platform's
/// control plane's ([`THIRD_PARTY_CODE_NAMESPACES`] count as tenants').
fn tenant_cel() -> String {
    let user = "request.userInfo.username";
    let namespace = format!(
        "{user}.substring({}).split(':')[0]",
        SERVICE_ACCOUNT_PREFIX.len()
    );
    let third_party = THIRD_PARTY_CODE_NAMESPACES
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "!(has(request.userInfo.groups) && '{BREAK_GLASS_GROUP}' in request.userInfo.groups) && \
         (!{user}.startsWith('system:') || ({user}.startsWith('{SERVICE_ACCOUNT_PREFIX}') && \
         ({namespace} in [{third_party}] || !{})))",
        platform_namespace_cel(&namespace)
    )
}

/// CEL: the request comes from a ServiceAccount of the namespace it writes in.
fn own_namespace_service_account_cel() -> String {
    format!(
        "request.namespace != '' && request.userInfo.username.startsWith('{SERVICE_ACCOUNT_PREFIX}' + request.namespace + ':')"
    )
}

/// CEL: the owner label is unchanged, or a ServiceAccount of the namespace adds (at creation
/// or later) the value the Namespace itself carries (the exception in the module
/// documentation). `namespaceObject` is null for cluster-scoped objects, which
/// [`label_cel`] reads as no label.
fn owner_label_rule() -> String {
    let (old_owner, new_owner, namespace_owner) = (
        label_cel("oldObject", OWNER_PO),
        label_cel("object", OWNER_PO),
        label_cel("namespaceObject", OWNER_PO),
    );
    format!(
        "{new_owner} == {old_owner} || ({} && {old_owner} == '' && {new_owner} == {namespace_owner})",
        own_namespace_service_account_cel()
    )
}

/// The policy (see the module documentation).
#[must_use]
pub fn policy() -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(OWNER_LABEL_GUARD.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec!["*".to_owned()]),
                    api_versions: Some(vec!["*".to_owned()]),
                    operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                    resources: Some(vec!["*".to_owned()]),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            match_conditions: Some(vec![MatchCondition {
                name: "tenants-only".to_owned(),
                expression: tenant_cel(),
            }]),
            validations: Some(vec![Validation {
                expression: owner_label_rule(),
                message: Some(format!(
                    "{OWNER_LABEL_GUARD}: only {NAME} sets, changes or removes the {OWNER_PO} \
                     label (it marks the objects POM manages, which the webhooks POM installs \
                     leave alone), but that an operator's ServiceAccount may copy its own \
                     namespace's value onto what it creates there; to hand an object to a \
                     PlatformOperator, annotate it {ADOPT}=<name>"
                )),
                reason: Some("Forbidden".to_owned()),
                ..Validation::default()
            }]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    }
}

/// Binds [`policy`] cluster-wide with `Deny`.
#[must_use]
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    crate::admission_guard::deny_binding(OWNER_LABEL_GUARD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn applies_to_tenants_on_every_kind_and_compares_the_value() {
        let spec = policy().spec.unwrap();
        let condition = &spec.match_conditions.unwrap()[0].expression;
        // The manager's ServiceAccount is of a platform namespace: never a tenant.
        assert!(
            condition.contains("'openshift-platform-operators'")
                || condition.contains("openshift-platform-operators"),
            "{condition}"
        );
        assert!(condition.contains("!request.userInfo.username.startsWith('system:')"));
        // Where OLM v0 runs third-party operators, ServiceAccounts are tenants.
        assert!(
            condition.contains(
                "in ['default', 'openshift', 'openshift-operators', 'openshift-marketplace']"
            ),
            "{condition}"
        );
        assert!(condition.contains("'system:masters' in request.userInfo.groups"));
        let rules = spec.match_constraints.unwrap().resource_rules.unwrap();
        assert_eq!(rules[0].resources.as_deref(), Some(&["*".to_owned()][..]));
        assert_eq!(
            rules[0].operations.as_deref(),
            Some(&["CREATE".to_owned(), "UPDATE".to_owned()][..])
        );
        let validation = &spec.validations.unwrap()[0];
        assert!(
            validation
                .expression
                .contains(&format!("metadata.labels['{OWNER_PO}']"))
        );
        // Unchanged passes; otherwise only the namespace's own value, added by one of its
        // ServiceAccounts in it, never a change or a removal.
        let expression = &validation.expression;
        assert!(expression.starts_with(&format!(
            "{} == {} || (",
            label_cel("object", OWNER_PO),
            label_cel("oldObject", OWNER_PO)
        )));
        assert!(expression.contains(
            "request.userInfo.username.startsWith('system:serviceaccount:' + request.namespace + ':')"
        ));
        assert!(expression.contains("request.namespace != ''"));
        assert!(expression.contains(&format!("{} == ''", label_cel("oldObject", OWNER_PO))));
        assert!(expression.contains(&format!(
            "{} == {}",
            label_cel("object", OWNER_PO),
            label_cel("namespaceObject", OWNER_PO)
        )));
        // A cluster-scoped object has no namespaceObject: read as no label, so never equal
        // to a label it carries.
        assert!(label_cel("namespaceObject", OWNER_PO).starts_with("(namespaceObject == null ||"));
        assert_eq!(
            binding().spec.unwrap().validation_actions,
            Some(vec!["Deny".to_owned()])
        );
    }
}
