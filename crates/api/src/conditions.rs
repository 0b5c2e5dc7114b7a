//! Condition types, statuses and reasons: the one vocabulary POM writes and reads.
//!
//! Reasons are an enum, not strings, so a reason is chosen where the decision is made and is
//! matched (never parsed out of a message) where it is read: the PlatformOperator reconciler,
//! the aggregated ClusterOperator and `pomctl` all use this one table. Messages are built where
//! the decision is made.

use std::fmt;
use std::str::FromStr;

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

/// A condition's status, as `metav1.Condition` spells it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ConditionStatus {
    True,
    False,
    Unknown,
}

impl ConditionStatus {
    /// The API spelling.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// `True` or `False`.
    #[must_use]
    pub fn from_bool(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }

    /// Reads a status written by anyone; anything but `True`/`False` is `Unknown` (fail closed).
    #[must_use]
    pub fn parse_lenient(text: &str) -> Self {
        match text {
            "True" => Self::True,
            "False" => Self::False,
            _ => Self::Unknown,
        }
    }
}

impl fmt::Display for ConditionStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

macro_rules! reasons {
    ($($(#[$doc:meta])* $variant:ident,)*) => {
        /// Every condition reason POM writes (CamelCase, as conditions require).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum Reason {
            $($(#[$doc])* $variant,)*
        }

        impl Reason {
            /// Every reason, in table order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The API spelling (the variant name).
            #[must_use]
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Reason::$variant => stringify!($variant),)*
                }
            }
        }
    };
}

reasons! {
    /// Nothing to report: the happy reason of every condition.
    AsExpected,
    // Installed
    /// The bundle's objects are applied and the first install settled.
    InstallSucceeded,
    /// No Catalog could serve content for the package.
    SourceFailed,
    /// No bundle could be chosen (or the request itself is invalid).
    ResolutionFailed,
    /// The bundle image could not be pulled or unpacked.
    UnpackFailed,
    /// The bundle could not be rendered or applied.
    InstallFailed,
    /// An older PlatformOperator already manages the package.
    DuplicatePackage,
    /// The bundle supports no install mode POM can use.
    InstallModeUnsupported,
    /// The new bundle would change a CRD in a way that breaks stored objects.
    #[allow(clippy::upper_case_acronyms)]
    UnsafeCRDChange,
    /// An unsafe CRD change was applied anyway: the admin's `crd-safety-override` annotation
    /// named the bundle (a Warning Event).
    #[allow(clippy::upper_case_acronyms)]
    CRDSafetyOverridden,
    /// An object the bundle ships is owned by another PlatformOperator.
    OwnershipConflict,
    /// The bundle breaks POM's content policy (a kind, namespace, binding or role it may not
    /// ship), or the install namespace is reserved.
    ContentPolicyViolation,
    /// An object the bundle ships already exists and POM did not create it.
    AdoptionRefused,
    /// `spec.adoptFrom`: what OLM v0 runs is not what POM would apply (another bundle, a pod
    /// template that would change, an object not OLM's for the CSV): the adoption stops,
    /// changing nothing, and the message says what differs.
    AdoptionNotProven,
    /// The admin asked to give an adopted operator back to OLM v0
    /// (`platform.openshift.io/give-back`) and every object OLM owned is OLM's again: deleting
    /// the PlatformOperator now deletes nothing OLM owns.
    GivenBack,
    /// The admin asked to give an adopted operator back to OLM v0 and POM cannot (the
    /// ClusterServiceVersion adopted is gone or replaced, the operator moved since): nothing is
    /// changed and the message says why.
    GiveBackRefused,
    /// The manager's admission guard (its ValidatingAdmissionPolicy or the binding) is missing
    /// or not as shipped: POM writes nothing but status until it is back.
    AdmissionGuardMissing,
    /// (Event) A bundle was applied with the admin's content-policy exceptions.
    ContentExceptionUsed,
    /// (Event) A bundle's manifest repeats a key: its last value, as OLM reads it, is what POM
    /// judged and applies.
    DuplicateManifestKey,
    /// (Event) A bundle ships a Service named like the one POM renders for its webhooks: POM's
    /// replaces it, as OLM v0 does.
    WebhookServiceReplaced,
    /// (Event) The pods of an adopted webhook Deployment, which may serve OLM v0's serving
    /// certificate, are rolled to serve POM's before OLM's expires (its pod-template
    /// `olmcahash`, as OLM's own rotation rolls them).
    ServingCertificateRolled,
    /// The first install is in progress.
    Installing,
    // Progressing
    /// A move from one bundle to another is in progress.
    Upgrading,
    /// Waiting for CRDs to be Established or Deployments to roll out.
    WaitingForRollout,
    /// Waiting for the operator to report `Upgradeable=True` on its OperatorCondition.
    WaitingForOperatorCondition,
    /// A move is chosen but held until the one before it settles or the operator allows it.
    MovePending,
    /// `spec.soak`: the last move settled and is left alone until its soak ends; the next hop
    /// and the cluster's version report wait (as a PO's Upgradeable too: the cluster waits).
    Soaking,
    /// A move recorded as intent was abandoned for what runs: its target no longer qualifies
    /// (the admin's versionRange or channel, or what the cluster can run).
    MoveAbandoned,
    /// The `platform.openshift.io/unsettled-move` annotation cannot be read or carried out.
    InvalidUnsettledMoveAction,
    /// (Event) The admin let the next move start although the move before it had not settled.
    UnsettledMoveSkipped,
    /// (Event) The admin moved back from a move that did not settle to what ran before it.
    UnsettledMoveAbandoned,
    /// `spec.upgradeApproval` is `Manual` and the move POM chose (the first install included)
    /// waits until `spec.approvedBundle` names its bundle (`pomctl approve`); as a PO's
    /// Upgradeable, that move is owed and not approved.
    UpgradePendingApproval,
    /// `spec.paused`: POM writes nothing for the PlatformOperator but its status; as a PO's
    /// Upgradeable, POM neither moves, repairs nor checks what runs, so it cannot vouch for it.
    Paused,
    /// A change of the operator's configuration (`spec.config` or the cluster proxy) restarts
    /// it: it is applied as a move of its own, its Deployments rolling out again.
    Reconfiguring,
    /// A change of the operator's configuration waits: a move in flight has not settled, or
    /// the running operator says `Upgradeable=False` (or has not said it for its current
    /// generation); the `config-change-override` annotation naming its digest applies it anyway.
    ConfigChangeHeld,
    // Degraded
    /// The move did not settle within `spec.progressDeadline`.
    ProgressDeadlineExceeded,
    /// A settled operator's Deployment is no longer available (crash loop, OOM, evicted).
    OperatorUnavailable,
    // Upgradeable (§8.3)
    /// An installed bundle's `maxOpenShiftVersion` is below the next minor.
    IncompatibleOperatorsInstalled,
    /// The running operator reports `Upgradeable=False`.
    OperatorNotUpgradeable,
    /// Metadata, ClusterVersion or catalog could not be read: fail closed.
    UpgradeabilityUnknown,
    /// A move has not settled (or another one is pending).
    MoveNotSettled,
    /// Several POs block for different reasons.
    MultipleReasons,
    // Catalog Serving
    /// The catalog's content is unpacked and served.
    Unpacked,
    /// The catalog's content has not been unpacked yet.
    UnpackPending,
    /// The catalog's content is invalid.
    InvalidCatalog,
    /// The ConfigMap a Catalog names does not exist.
    ConfigMapNotFound,
    /// The ConfigMap a Catalog names lacks the key.
    ConfigMapKeyNotFound,
    /// The Catalog names a namespace (its ConfigMap, pull secret or CA bundle) that Catalogs
    /// may not read from: neither the manager's nor listed by the admin.
    UntrustedCatalogSource,
    // Image pulls (Catalog Serving, and a bundle's UnpackFailed message)
    /// The image reference cannot be parsed.
    InvalidImageReference,
    /// The registry cannot be reached.
    RegistryUnreachable,
    /// The registry does not have the image.
    ImageNotFound,
    /// The registry refused the credentials (or their absence).
    RegistryUnauthorized,
    /// A layer's media type is not one POM unpacks.
    UnsupportedLayerMediaType,
    /// A layer cannot be read.
    InvalidImageLayer,
    /// A layer writes outside its root.
    UnsafeImagePath,
    /// The image exceeds POM's size limits.
    ImageTooLarge,
    /// The registry answered with an error.
    RegistryError,
    /// The registry's TLS certificate is not signed by a trusted CA (system roots, or the
    /// Catalog's `caBundle`).
    RegistryCertificateUntrusted,
    /// The Catalog's CA bundle ConfigMap is missing, lacks the key or holds no usable PEM.
    #[allow(clippy::upper_case_acronyms)]
    InvalidCABundle,
    /// The pull secret a Catalog names is missing, of the wrong type or malformed.
    PullSecretInvalid,
    /// No TLS crypto provider is configured.
    TlsNotConfigured,
    /// The pull was interrupted (shutdown).
    PullInterrupted,
    // ClusterOperator
    /// No PlatformOperator exists.
    NoPlatformOperators,
    /// A PlatformOperator has failed.
    PlatformOperatorFailed,
    /// At least one PlatformOperator is progressing.
    PlatformOperatorsProgressing,
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A reason that is not in POM's table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownReason(pub String);

impl fmt::Display for UnknownReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} is not a reason POM writes", self.0)
    }
}

impl std::error::Error for UnknownReason {}

impl FromStr for Reason {
    type Err = UnknownReason;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Reason::ALL
            .iter()
            .copied()
            .find(|r| r.as_str() == text)
            .ok_or_else(|| UnknownReason(text.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_round_trips_and_is_camel_case() {
        for reason in Reason::ALL {
            let text = reason.as_str();
            assert_eq!(text.parse::<Reason>(), Ok(*reason));
            assert!(
                text.chars().next().is_some_and(char::is_uppercase),
                "{text}"
            );
            assert!(text.chars().all(char::is_alphanumeric), "{text}");
        }
        assert!("NotAReason".parse::<Reason>().is_err());
    }

    #[test]
    fn statuses_read_fail_closed() {
        assert_eq!(
            ConditionStatus::parse_lenient("True"),
            ConditionStatus::True
        );
        assert_eq!(
            ConditionStatus::parse_lenient("False"),
            ConditionStatus::False
        );
        assert_eq!(
            ConditionStatus::parse_lenient("true"),
            ConditionStatus::Unknown
        );
        assert_eq!(ConditionStatus::parse_lenient(""), ConditionStatus::Unknown);
    }
}
