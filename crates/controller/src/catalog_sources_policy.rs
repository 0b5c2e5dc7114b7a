//! The admission half of the catalog trust chain (issue 22 item 4): a ValidatingAdmissionPolicy,
//! shipped with the install manifests, that refuses a Catalog naming a namespace Catalogs may
//! not read from (its ConfigMap source, pull secret or CA bundle), with the ConfigMap that lists
//! the namespaces as its parameter.
//!
//! Why at admission as well as in the controller (`pom_policy::source_trust`): the admin who
//! writes such a Catalog learns at once, from `kubectl apply`, which field is wrong and how to
//! list the namespace, instead of from a condition later. The controller's check stays the rule
//! (it also covers a namespace taken off the list after the Catalog was admitted, and a cluster
//! without the policy); both parse the list the same way (split at commas, names trimmed).
//!
//! Only spec writes are judged (a create, or an update that changes `spec`): the manager's own
//! finalizer and status writes never depend on the list. Without the parameter ConfigMap every
//! Catalog write is refused (`parameterNotFoundAction: Deny`), so deleting the list fails closed;
//! the manifests ship it empty and create-only (the CVO never resets an admin's list).

use std::collections::BTreeMap;

use k8s_openapi::api::admissionregistration::v1::{
    MatchCondition, MatchResources, NamedRuleWithOperations, ParamKind, ParamRef,
    ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding,
    ValidatingAdmissionPolicyBindingSpec, ValidatingAdmissionPolicySpec, Validation, Variable,
};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use pom_policy::source_trust::{LISTED_KEY, SOURCES_CONFIG_MAP, SourceField};

use crate::manifests::NAMESPACE;

/// Name of the policy and of its binding (the same as the ConfigMap it reads).
pub const POLICY: &str = SOURCES_CONFIG_MAP;

/// The policy (see the module documentation).
#[must_use]
pub fn policy() -> ValidatingAdmissionPolicy {
    ValidatingAdmissionPolicy {
        metadata: ObjectMeta {
            name: Some(POLICY.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicySpec {
            failure_policy: Some("Fail".to_owned()),
            param_kind: Some(ParamKind {
                api_version: Some("v1".to_owned()),
                kind: Some("ConfigMap".to_owned()),
            }),
            match_constraints: Some(MatchResources {
                resource_rules: Some(vec![NamedRuleWithOperations {
                    api_groups: Some(vec![pom_api::GROUP.to_owned()]),
                    api_versions: Some(vec!["*".to_owned()]),
                    operations: Some(vec!["CREATE".to_owned(), "UPDATE".to_owned()]),
                    resources: Some(vec!["catalogs".to_owned()]),
                    ..NamedRuleWithOperations::default()
                }]),
                ..MatchResources::default()
            }),
            match_conditions: Some(vec![MatchCondition {
                name: "spec-written".to_owned(),
                expression: "oldObject == null || object.spec != oldObject.spec".to_owned(),
            }]),
            variables: Some(vec![
                Variable {
                    name: "trusted".to_owned(),
                    expression: format!(
                        "['{NAMESPACE}'] + (has(params.data) && '{LISTED_KEY}' in params.data ? \
                         params.data['{LISTED_KEY}'].split(',').map(n, n.trim()) : [])"
                    ),
                },
                Variable {
                    name: "source".to_owned(),
                    expression: "object.spec.source".to_owned(),
                },
            ]),
            validations: Some(vec![
                validation(
                    SourceField::ConfigMap,
                    "has(variables.source.configMap)",
                    "variables.source.configMap.namespace",
                ),
                validation(
                    SourceField::PullSecret,
                    "has(variables.source.image) && has(variables.source.image.pullSecret)",
                    "variables.source.image.pullSecret.namespace",
                ),
                validation(
                    SourceField::CaBundle,
                    "has(variables.source.image) && has(variables.source.image.caBundle)",
                    "variables.source.image.caBundle.namespace",
                ),
            ]),
            ..ValidatingAdmissionPolicySpec::default()
        }),
        status: None,
    }
}

/// A validation that `namespace` (a CEL path), when `present`, is trusted; its message names
/// the field, the namespace and where an admin lists more.
fn validation(field: SourceField, present: &str, namespace: &str) -> Validation {
    Validation {
        expression: format!("!({present}) || {namespace} in variables.trusted"),
        message_expression: Some(format!(
            "'{path} is ' + {namespace} + ', a namespace Catalogs may not read from (a \
             Catalog\\'s content is installed with the manager\\'s privileges); trusted: ' + \
             variables.trusted.join(', ') + '. An admin lists more, comma-separated, under key \
             {LISTED_KEY} of ConfigMap {NAMESPACE}/{SOURCES_CONFIG_MAP}'",
            path = field.path(),
        )),
        reason: Some("Forbidden".to_owned()),
        ..Validation::default()
    }
}

/// Binds [`policy`] with `Deny`, its parameter the ConfigMap [`SOURCES_CONFIG_MAP`] in the
/// manager's namespace; a missing ConfigMap denies.
#[must_use]
pub fn binding() -> ValidatingAdmissionPolicyBinding {
    ValidatingAdmissionPolicyBinding {
        metadata: ObjectMeta {
            name: Some(POLICY.to_owned()),
            ..ObjectMeta::default()
        },
        spec: Some(ValidatingAdmissionPolicyBindingSpec {
            policy_name: Some(POLICY.to_owned()),
            param_ref: Some(ParamRef {
                name: Some(SOURCES_CONFIG_MAP.to_owned()),
                namespace: Some(NAMESPACE.to_owned()),
                parameter_not_found_action: Some("Deny".to_owned()),
                ..ParamRef::default()
            }),
            validation_actions: Some(vec!["Deny".to_owned()]),
            ..ValidatingAdmissionPolicyBindingSpec::default()
        }),
    }
}

/// The CVO annotation that makes a payload manifest create-only: the CVO creates the object
/// when missing and never resets an admin's edits of it.
pub const CREATE_ONLY: &str = "release.openshift.io/create-only";

/// The list as shipped: empty (only the manager's namespace is trusted until an admin adds
/// one). On OpenShift the manifests add [`CREATE_ONLY`], so the CVO keeps the admin's edits.
#[must_use]
pub fn config_map() -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(SOURCES_CONFIG_MAP.to_owned()),
            namespace: Some(NAMESPACE.to_owned()),
            ..ObjectMeta::default()
        },
        data: Some(BTreeMap::from([(LISTED_KEY.to_owned(), String::new())])),
        ..ConfigMap::default()
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    #[test]
    fn every_field_the_controller_checks_is_checked_at_admission() {
        let spec = policy().spec.unwrap();
        let validations = spec.validations.unwrap();
        for field in [
            SourceField::ConfigMap,
            SourceField::PullSecret,
            SourceField::CaBundle,
        ] {
            assert!(
                validations.iter().any(|v| v
                    .message_expression
                    .as_deref()
                    .is_some_and(|m| m.contains(field.path()))),
                "{field:?}"
            );
        }
        let binding = binding().spec.unwrap();
        let param = binding.param_ref.unwrap();
        assert_eq!(param.parameter_not_found_action.as_deref(), Some("Deny"));
        assert_eq!(param.namespace.as_deref(), Some(NAMESPACE));
        assert_eq!(param.name.as_deref(), Some(SOURCES_CONFIG_MAP));
    }
}
