//! Labels and annotations POM puts on what it installs, so that ownership can be read back
//! from the cluster alone (drift repair, pruning, deletion, `pomctl status`).

use sha2::{Digest, Sha256};

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

/// The admin's way out of a move that never settles (issue 25 item 2), on the
/// PlatformOperator: `skip:<bundle>` lets the next move start although the move to `<bundle>`
/// has not settled (the vendor's fix replaces it); `abandon:<bundle>` moves back to the bundle
/// that ran before it. Naming the bundle makes a forgotten annotation inert: it acts only on
/// the unsettled move to that bundle, never on a later one.
pub const UNSETTLED_MOVE: &str = "platform.openshift.io/unsettled-move";

/// The admin's break-glass for a CRD-safety refusal the admin judges wrong (issue 23 item 5),
/// on the PlatformOperator: its value names the bundle whose unsafe CRD change is applied
/// anyway, with a Warning Event. Naming the bundle makes it act once: on the move to that
/// bundle, never on a later one (a forgotten annotation is inert).
pub const CRD_SAFETY_OVERRIDE: &str = "platform.openshift.io/crd-safety-override";

/// The admin's override of a configuration change held because the running operator says
/// `Upgradeable=False` (issue 23 item 4), on the PlatformOperator: its value is the digest of the
/// configuration to apply anyway (`sha256:...`, as the hold's message gives it). Naming the
/// digest makes it act once: a later change has another digest, and the annotation is inert.
pub const CONFIG_CHANGE_OVERRIDE: &str = "platform.openshift.io/config-change-override";

/// Marks an existing object the admin hands over to a PlatformOperator: its value is the
/// PlatformOperator's name. Without it, POM refuses to take over an object it did not create
/// (and so never deletes one).
pub const ADOPT: &str = "platform.openshift.io/adopt";

/// The admin's request to give an adopted operator back to OLM v0 (issue 36 item 3), on the
/// PlatformOperator: its value names the ClusterServiceVersion adopted (the installed bundle).
/// While it is set, POM applies nothing for the PlatformOperator and hands every object OLM
/// owned back to that CSV; naming the CSV makes a forgotten annotation inert after a move.
pub const GIVE_BACK: &str = "platform.openshift.io/give-back";

/// On each object adoption released from OLM v0: the ClusterServiceVersion it belonged to (as a
/// label value), so that giving the operator back hands exactly these objects back to it.
/// Labels, not annotations: an annotation change bumps a Deployment's generation.
pub const RELEASED_FROM_OLM: &str = "platform.openshift.io/released-from-olm";
/// Beside [`RELEASED_FROM_OLM`]: which of OLM's marks the object carried (`owner`,
/// `namespace`, `kind`, `component`, `reference`, joined by `.`), for give-back to restore
/// (`pom_policy::adopt::give_back`).
pub const RELEASED_OLM_MARKS: &str = "platform.openshift.io/released-olm-marks";

/// Kubernetes label values are at most 63 characters of `[A-Za-z0-9._-]`, alphanumeric at both
/// ends. A value that fits is used as it is; any other (too long, or with other characters) is
/// shortened to a readable prefix plus a hash of the whole value, so two different names can
/// never share a label value (and so never own, or prune, each other's objects).
#[must_use]
pub fn label_value(value: &str) -> String {
    let valid = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let fits = !value.is_empty()
        && value.len() <= 63
        && value.chars().all(valid)
        && value.starts_with(|c: char| c.is_ascii_alphanumeric())
        && value.ends_with(|c: char| c.is_ascii_alphanumeric());
    if fits {
        return value.to_owned();
    }
    let cleaned: String = value
        .chars()
        .map(|c| if valid(c) { c } else { '-' })
        .take(52)
        .collect();
    let prefix = cleaned.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    let digest = hex::encode(Sha256::digest(value.as_bytes()));
    let hash = digest.get(..10).unwrap_or(&digest);
    if prefix.is_empty() {
        hash.to_owned()
    } else {
        format!("{prefix}-{hash}")
    }
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
        let long = label_value(&"a".repeat(80));
        assert!(
            long.len() <= 63 && long.starts_with(&"a".repeat(52)),
            "{long}"
        );
        let cleaned = label_value("x+build_");
        assert!(
            cleaned.starts_with("x-build-") && cleaned.len() == 18,
            "{cleaned}"
        );
    }

    #[test]
    fn long_or_cleaned_values_never_collide() {
        // Two PlatformOperator names that share their first 63 characters.
        let base = "a".repeat(70);
        let (one, two) = (format!("{base}-one"), format!("{base}-two"));
        assert_ne!(label_value(&one), label_value(&two));
        // A name that would clean to another valid one.
        assert_ne!(label_value("x+build"), label_value("x-build"));
        assert_eq!(label_value("x-build"), "x-build");
        for value in [
            one.as_str(),
            two.as_str(),
            "x+build",
            "-lead",
            "trail.",
            "%%%",
        ] {
            let label = label_value(value);
            assert!(label.len() <= 63, "{value}: {label}");
            assert!(
                label
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "{value}: {label}"
            );
            assert!(
                label.starts_with(|c: char| c.is_ascii_alphanumeric()),
                "{value}: {label}"
            );
            assert!(
                label.ends_with(|c: char| c.is_ascii_alphanumeric()),
                "{value}: {label}"
            );
            assert_eq!(label, label_value(value), "stable");
        }
    }

    #[test]
    fn owner_labels_name_the_bundle_only_when_given() {
        let with = owner_labels("po", "pkg", Some("pkg.v1"));
        assert_eq!(with.get(BUNDLE).map(String::as_str), Some("pkg.v1"));
        assert_eq!(with.get(OWNER_PO).map(String::as_str), Some("po"));
        assert!(!owner_labels("po", "pkg", None).contains_key(BUNDLE));
    }
}
