//! The platform's namespaces as the API enforces them: the CRD's CEL rule on
//! `spec.installNamespace`/`spec.watchNamespace` and (through [`platform_namespace_cel`]) the
//! manager's admission guard, generated from `pom_platform`'s one list.

pub use pom_platform::{
    OWNED_ONLY_PREFIX, PLATFORM_NAMESPACE_PREFIXES, PLATFORM_NAMESPACES, is_platform_namespace,
};

/// A CEL expression true when the string expression `ns` names a platform namespace.
#[must_use]
pub fn platform_namespace_cel(ns: &str) -> String {
    let names = PLATFORM_NAMESPACES
        .iter()
        .map(|n| format!("'{n}'"))
        .collect::<Vec<_>>()
        .join(", ");
    let prefixes = PLATFORM_NAMESPACE_PREFIXES
        .iter()
        .map(|p| format!("{ns}.startsWith('{p}')"))
        .collect::<Vec<_>>()
        .join(" || ");
    format!("({ns} in [{names}] || {prefixes})")
}

/// The CRD rule on `spec.installNamespace` and `spec.watchNamespace`.
#[must_use]
pub fn not_platform_namespace_rule(field: &str) -> kube::core::Rule {
    kube::core::Rule::new(format!("!{}", platform_namespace_cel("self"))).message(kube::core::Message::Message(format!(
        "spec.{field} may not be one of the platform's own namespaces (kube-*, default, openshift, openshift-operators, openshift-config*, openshift-kube-*, openshift-monitoring, ... see docs/content-policy.md): choose a namespace of the operator's own"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cel_names_every_entry() {
        let cel = platform_namespace_cel("self");
        for entry in PLATFORM_NAMESPACES
            .iter()
            .chain(PLATFORM_NAMESPACE_PREFIXES)
        {
            assert!(cel.contains(&format!("'{entry}'")), "{entry}");
        }
    }
}
