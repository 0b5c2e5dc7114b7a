//! Why a bundle was not chosen, in words an admin can act on.
//!
//! Every filter of §5 that refuses a bundle records one [`RejectReason`] (the first filter that
//! failed, in the order of §5), so "why did POM not move to X?" always has an answer.

use std::fmt;
use std::sync::Arc;

use semver::Version;

use crate::fbc::model::Dependency;
use crate::pin::PinReason;

/// One refused bundle.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejection {
    /// Bundle name.
    pub bundle: String,
    pub version: Version,
    /// Name of the catalog the bundle came from (shared by every rejection from that catalog).
    pub catalog: Arc<str>,
    pub reason: RejectReason,
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) from catalog {}: {}",
            self.bundle, self.version, self.catalog, self.reason
        )
    }
}

/// The filter that refused a bundle, with the data it judged.
#[derive(Debug, Clone, PartialEq)]
pub enum RejectReason {
    /// Not the installed bundle and no edge from it (§5 step 1). The installed bundle's name
    /// and the channel are the same for every rejection of a resolution and are named once, in
    /// its context (the `NoCandidate` message, `pomctl resolve` output), not copied 200 times.
    NotSuccessor { installed_version: Version },
    /// Outside the pin in force (§4.2).
    OutsidePin { pin: String, reason: PinReason },
    /// A pre-release, which a pin never admits unless the installed version is one.
    PreReleaseOutsidePin { pin: String, reason: PinReason },
    /// Outside the admin's `spec.package.versionRange`.
    OutsideVersionRange { range: String },
    /// `olm.maxOpenShiftVersion` below the minor the bundle would run on.
    MaxOpenShiftVersionTooLow {
        max: (u64, u64),
        required: (u64, u64),
        cluster: Version,
    },
    /// `olm.maxOpenShiftVersion` present but unusable (fail closed).
    InvalidMaxOpenShiftVersion { raw: String, reason: String },
    /// `minKubeVersion` above the API server's version.
    MinKubeVersionTooHigh { min_kube: String, kube: Version },
    /// `minKubeVersion` present but unreadable (fail closed).
    InvalidMinKubeVersion { raw: String },
    /// The bundle declares dependencies, which POM does not resolve (as OLM v1).
    HasDependencies { dependencies: Vec<String> },
}

impl RejectReason {
    /// A stable CamelCase code for scripts (`pomctl resolve -o json`) and metrics.
    pub fn code(&self) -> &'static str {
        match self {
            RejectReason::NotSuccessor { .. } => "NotSuccessor",
            RejectReason::OutsidePin { .. } => "OutsidePin",
            RejectReason::PreReleaseOutsidePin { .. } => "PreReleaseOutsidePin",
            RejectReason::OutsideVersionRange { .. } => "OutsideVersionRange",
            RejectReason::MaxOpenShiftVersionTooLow { .. } => "MaxOpenShiftVersionTooLow",
            RejectReason::InvalidMaxOpenShiftVersion { .. } => "InvalidMaxOpenShiftVersion",
            RejectReason::MinKubeVersionTooHigh { .. } => "MinKubeVersionTooHigh",
            RejectReason::InvalidMinKubeVersion { .. } => "InvalidMinKubeVersion",
            RejectReason::HasDependencies { .. } => "HasDependencies",
        }
    }
}

impl fmt::Display for RejectReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RejectReason::NotSuccessor { installed_version } => write!(
                f,
                "not a direct successor of the installed bundle ({installed_version}): its channel \
                 entry neither replaces nor skips it, and has no skipRange containing \
                 {installed_version} (POM moves one catalog edge at a time)"
            ),
            RejectReason::OutsidePin { pin, reason } => {
                write!(f, "outside the pin {pin} ({reason}){}", pin_hint(*reason))
            }
            RejectReason::PreReleaseOutsidePin { pin, reason } => write!(
                f,
                "a pre-release, which the pin {pin} ({reason}) does not admit because the \
                 installed version is not a pre-release{}",
                prerelease_hint(*reason)
            ),
            RejectReason::OutsideVersionRange { range } => {
                write!(f, "outside spec.package.versionRange {range:?}")
            }
            RejectReason::MaxOpenShiftVersionTooLow {
                max,
                required,
                cluster,
            } => write!(
                f,
                "olm.maxOpenShiftVersion is {}.{}, but it would run on OpenShift {cluster} (needs \
                 {}.{} or later)",
                max.0, max.1, required.0, required.1
            ),
            RejectReason::InvalidMaxOpenShiftVersion { raw, reason } => write!(
                f,
                "olm.maxOpenShiftVersion {raw:?} is invalid ({reason}), so its compatibility cannot \
                 be judged (the catalog publisher must fix it)"
            ),
            RejectReason::MinKubeVersionTooHigh { min_kube, kube } => write!(
                f,
                "minKubeVersion {min_kube} is above the cluster's Kubernetes version {kube}"
            ),
            RejectReason::InvalidMinKubeVersion { raw } => write!(
                f,
                "minKubeVersion {raw:?} is not a version, so its compatibility cannot be judged"
            ),
            RejectReason::HasDependencies { dependencies } => write!(
                f,
                "declares dependencies, which POM does not resolve: {}; install them as their own \
                 PlatformOperators and use a bundle without declared dependencies",
                dependencies.join(", ")
            ),
        }
    }
}

fn pin_hint(reason: PinReason) -> &'static str {
    match reason {
        PinReason::Steady => {
            "; set spec.steadyStateVersionRange on the PlatformOperator to move by hand"
        }
        PinReason::PatchUpgrade => {
            "; a cluster patch update moves a platform operator only within its minor"
        }
        PinReason::MinorUpgrade => "; major versions never move automatically",
        PinReason::Install | PinReason::Rollback | PinReason::Override | PinReason::Unpinned => "",
    }
}

fn prerelease_hint(reason: PinReason) -> &'static str {
    match reason {
        PinReason::Install => {
            "; set spec.package.versionRange to a range naming a pre-release (e.g. >=1.2.0-0) to allow it"
        }
        PinReason::Steady => "; set spec.steadyStateVersionRange to select a pre-release by hand",
        PinReason::PatchUpgrade
        | PinReason::MinorUpgrade
        | PinReason::Rollback
        | PinReason::Override
        | PinReason::Unpinned => "",
    }
}

/// How a dependency is named in messages, e.g. `olm.package.required etcd >=0.9.0`.
pub(crate) fn describe_dependency(dependency: &Dependency) -> String {
    match dependency {
        Dependency::Package {
            package_name,
            version_range,
        } => {
            format!("olm.package.required {package_name} {version_range}")
        }
        Dependency::Gvk(gvk) => {
            let group = if gvk.group.is_empty() {
                "core"
            } else {
                gvk.group.as_str()
            };
            format!("olm.gvk.required {group}/{}/{}", gvk.version, gvk.kind)
        }
        Dependency::Constraint(value) => {
            let text = value.to_string();
            let short: String = text.chars().take(120).collect();
            if short.len() < text.len() {
                format!("olm.constraint {short}…")
            } else {
                format!("olm.constraint {short}")
            }
        }
    }
}
