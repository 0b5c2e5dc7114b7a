//! Condition types and reasons (CamelCase constants), shared by the controller that writes them
//! and `pomctl` that reads them. Messages are built where the decision is made.

/// PlatformOperator condition types (§8.1).
pub mod types {
    pub const INSTALLED: &str = "Installed";
    pub const PROGRESSING: &str = "Progressing";
    pub const DEGRADED: &str = "Degraded";
    pub const UPGRADEABLE: &str = "Upgradeable";
    /// Catalog condition.
    pub const SERVING: &str = "Serving";
    /// ClusterOperator condition.
    pub const AVAILABLE: &str = "Available";
}

/// Condition reasons.
pub mod reasons {
    pub const AS_EXPECTED: &str = "AsExpected";
    // Installed
    pub const INSTALL_SUCCEEDED: &str = "InstallSucceeded";
    pub const SOURCE_FAILED: &str = "SourceFailed";
    pub const RESOLUTION_FAILED: &str = "ResolutionFailed";
    pub const UNPACK_FAILED: &str = "UnpackFailed";
    pub const INSTALL_FAILED: &str = "InstallFailed";
    pub const DUPLICATE_PACKAGE: &str = "DuplicatePackage";
    pub const INSTALL_MODE_UNSUPPORTED: &str = "InstallModeUnsupported";
    pub const UNSAFE_CRD_CHANGE: &str = "UnsafeCRDChange";
    pub const OWNERSHIP_CONFLICT: &str = "OwnershipConflict";
    pub const INSTALLING: &str = "Installing";
    // Progressing
    pub const UPGRADING: &str = "Upgrading";
    pub const WAITING_FOR_ROLLOUT: &str = "WaitingForRollout";
    pub const WAITING_FOR_OPERATOR_CONDITION: &str = "WaitingForOperatorCondition";
    // Degraded
    pub const PROGRESS_DEADLINE_EXCEEDED: &str = "ProgressDeadlineExceeded";
    // Upgradeable (§8.3)
    pub const INCOMPATIBLE_OPERATORS_INSTALLED: &str = "IncompatibleOperatorsInstalled";
    pub const OPERATOR_NOT_UPGRADEABLE: &str = "OperatorNotUpgradeable";
    pub const UPGRADEABILITY_UNKNOWN: &str = "UpgradeabilityUnknown";
    pub const MOVE_NOT_SETTLED: &str = "MoveNotSettled";
    pub const MULTIPLE_REASONS: &str = "MultipleReasons";
    // Catalog Serving
    pub const UNPACKED: &str = "Unpacked";
    pub const UNPACK_PENDING: &str = "UnpackPending";
    pub const INVALID_CATALOG: &str = "InvalidCatalog";
    // ClusterOperator
    pub const NO_PLATFORM_OPERATORS: &str = "NoPlatformOperators";
    pub const PLATFORM_OPERATOR_FAILED: &str = "PlatformOperatorFailed";
}
