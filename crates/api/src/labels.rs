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
