//! Labels and annotations POM puts on what it installs, so that ownership can be read back
//! from the cluster alone (drift repair, pruning, deletion, `pomctl status`).

/// Names the owning PlatformOperator on every object POM applies.
pub const OWNER_PO: &str = "platform.openshift.io/owner";
/// Names the package the object belongs to.
pub const PACKAGE: &str = "platform.openshift.io/package";
/// Names the bundle that last applied the object (pruning removes objects of older bundles
/// that the new bundle no longer has).
pub const BUNDLE: &str = "platform.openshift.io/bundle";
/// `app.kubernetes.io/managed-by` value on everything POM applies.
pub const MANAGED_BY_VALUE: &str = "platform-operators-manager";
/// The recommended Kubernetes label for the manager of an object.
pub const MANAGED_BY: &str = "app.kubernetes.io/managed-by";
/// The finalizer that lets POM remove what it installed before a PlatformOperator goes away.
pub const FINALIZER: &str = "platform.openshift.io/cleanup";
/// Set on a PlatformOperator once its operator has reported an OperatorCondition under POM:
/// with `upgradeGate: Auto` it must then report again after every move (§7).
pub const OPERATOR_CONDITION_REPORTED: &str = "platform.openshift.io/operator-condition-reported";

/// Kubernetes label values are at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends; bundle names usually fit, long ones are shortened deterministically.
#[must_use]
pub fn label_value(value: &str) -> String {
    let cleaned: String = value
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "._-".contains(c) {
                c
            } else {
                '-'
            }
        })
        .collect();
    let short: String = cleaned.chars().take(63).collect();
    short
        .trim_matches(|c: char| !c.is_ascii_alphanumeric())
        .to_owned()
}

/// The one owner-label builder: the labels POM puts on everything it applies for PO `po`
/// (package `package`), from bundle `bundle` when the object belongs to one bundle.
#[must_use]
pub fn owner_labels(
    po: &str,
    package: &str,
    bundle: Option<&str>,
) -> std::collections::BTreeMap<String, String> {
    let mut labels = std::collections::BTreeMap::from([
        (OWNER_PO.to_owned(), label_value(po)),
        (PACKAGE.to_owned(), label_value(package)),
        (MANAGED_BY.to_owned(), MANAGED_BY_VALUE.to_owned()),
    ]);
    if let Some(bundle) = bundle {
        labels.insert(BUNDLE.to_owned(), label_value(bundle));
    }
    labels
}

/// The label selector of everything POM applied for PO `po`.
#[must_use]
pub fn owned_by(po: &str) -> String {
    format!("{OWNER_PO}={}", label_value(po))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_valid() {
        assert_eq!(label_value("op.v1.2.3"), "op.v1.2.3");
        assert_eq!(label_value(&"a".repeat(80)).len(), 63);
        assert_eq!(label_value("x+build_"), "x-build");
    }

    #[test]
    fn owner_labels_name_the_bundle_only_when_given() {
        let with = owner_labels("po", "pkg", Some("pkg.v1"));
        assert_eq!(with.get(BUNDLE).map(String::as_str), Some("pkg.v1"));
        assert_eq!(with.get(OWNER_PO).map(String::as_str), Some("po"));
        assert!(!owner_labels("po", "pkg", None).contains_key(BUNDLE));
    }
}
