//! A PlatformOperator's spec, parsed once into typed values (§3). The manager and `pomctl plan`
//! both build their [`PoRequest`] here, so a range or a deadline can never be read two ways.

use std::time::Duration;

use pom_api::PlatformOperatorSpec;
use pom_api::platform_operator::{PreUpdateHops, UpgradeApproval, UpgradeGate};
use pom_resolver::range::VersionRange;

use crate::duration::parse_go_duration;
use crate::soak::MAX_SOAK;

/// What the admin asked for, typed.
#[derive(Debug, Clone, PartialEq)]
pub struct PoRequest {
    pub package: String,
    /// `None`: each catalog's `defaultChannel`.
    pub channel: Option<String>,
    /// `None`: every Catalog.
    pub catalog: Option<String>,
    pub version_range: Option<VersionRange>,
    pub steady_state_range: Option<VersionRange>,
    pub upgrade_gate: UpgradeGate,
    pub progress_deadline: Duration,
    /// `spec.installNamespace`, defaulting to the PO's name.
    pub install_namespace: String,
    /// `spec.upgradeApproval`: under `Manual` a move starts only to `approved_bundle`.
    pub upgrade_approval: UpgradeApproval,
    /// `spec.approvedBundle`: the bundle the admin approved a move to.
    pub approved_bundle: Option<String>,
    /// `spec.preUpdateHops`: whether hops before a requested cluster update are offered or
    /// taken ([`crate::pre_update`]).
    pub pre_update_hops: PreUpdateHops,
    /// `spec.soak`: how long a settled move is left alone before the next hop and the
    /// release's version report ([`crate::soak`]); zero when not asked for.
    pub soak: Duration,
}

/// A spec field that cannot be used, naming the field, the value and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestError {
    #[error(
        "{field} {value:?} is not a valid version range ({problem}); fix {field} on the PlatformOperator"
    )]
    Range {
        field: &'static str,
        value: String,
        problem: String,
    },
    #[error(
        "spec.progressDeadline {value:?} is not a Go duration such as \"10m\" or \"1h30m\"; fix spec.progressDeadline on the PlatformOperator"
    )]
    ProgressDeadline { value: String },
    #[error(
        "spec.soak {value:?} is not a Go duration of at most 24h such as \"10m\"; fix spec.soak on the PlatformOperator"
    )]
    Soak { value: String },
}

impl PoRequest {
    /// Parses the spec of PlatformOperator `name`.
    ///
    /// # Errors
    /// The first field that cannot be used (the CRD schema refuses most of these; an older
    /// schema or a direct etcd write may still let them through).
    pub fn from_spec(name: &str, spec: &PlatformOperatorSpec) -> Result<Self, RequestError> {
        let range = |field: &'static str, text: Option<&str>| {
            text.map(|t| {
                VersionRange::parse(t).map_err(|e| RequestError::Range {
                    field,
                    value: t.to_owned(),
                    problem: e.to_string(),
                })
            })
            .transpose()
        };
        let version_range = range(
            "spec.package.versionRange",
            spec.package.version_range.as_deref(),
        )?;
        let steady_state_range = range(
            "spec.steadyStateVersionRange",
            spec.steady_state_version_range.as_deref(),
        )?;
        let progress_deadline = parse_go_duration(&spec.progress_deadline).ok_or_else(|| {
            RequestError::ProgressDeadline {
                value: spec.progress_deadline.clone(),
            }
        })?;
        let soak = match spec.soak.as_deref() {
            None => Duration::ZERO,
            Some(text) => parse_go_duration(text)
                .filter(|soak| *soak <= MAX_SOAK)
                .ok_or_else(|| RequestError::Soak {
                    value: text.to_owned(),
                })?,
        };
        Ok(Self {
            package: spec.package.name.clone(),
            channel: spec.package.channel.clone(),
            catalog: spec.package.catalog.clone(),
            version_range,
            steady_state_range,
            upgrade_gate: spec.upgrade_gate,
            progress_deadline,
            install_namespace: spec
                .install_namespace
                .clone()
                .unwrap_or_else(|| name.to_owned()),
            upgrade_approval: spec.upgrade_approval,
            approved_bundle: spec.approved_bundle.clone(),
            pre_update_hops: spec.pre_update_hops,
            soak,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pom_api::platform_operator::PackageSpec;

    fn spec() -> PlatformOperatorSpec {
        PlatformOperatorSpec {
            package: PackageSpec {
                name: "cert-manager".into(),
                ..PackageSpec::default()
            },
            steady_state_version_range: None,
            install_namespace: None,
            upgrade_gate: UpgradeGate::Auto,
            progress_deadline: "10m".into(),
            soak: None,
            content_exceptions: Vec::new(),
            omit_objects: Vec::new(),
            consent: Default::default(),
            watch_namespace: None,
            upgrade_approval: UpgradeApproval::Automatic,
            pre_update_hops: Default::default(),
            approved_bundle: None,
            paused: false,
            config: None,
            adopt_from: None,
        }
    }

    #[test]
    fn defaults_are_typed() {
        let request = PoRequest::from_spec("cm", &spec()).unwrap();
        assert_eq!(request.install_namespace, "cm");
        assert_eq!(request.progress_deadline, Duration::from_secs(600));
        assert_eq!(request.version_range, None);
    }

    #[test]
    fn a_bad_deadline_is_an_error_not_600_seconds() {
        let mut bad = spec();
        bad.progress_deadline = "ten minutes".into();
        let err = PoRequest::from_spec("cm", &bad).unwrap_err();
        assert!(
            err.to_string()
                .contains("spec.progressDeadline \"ten minutes\""),
            "{err}"
        );
    }

    #[test]
    fn a_soak_is_a_bounded_duration_and_none_is_zero() {
        assert_eq!(
            PoRequest::from_spec("cm", &spec()).unwrap().soak,
            Duration::ZERO
        );
        let mut soaking = spec();
        soaking.soak = Some("1h30m".into());
        assert_eq!(
            PoRequest::from_spec("cm", &soaking).unwrap().soak,
            Duration::from_secs(5400)
        );
        for bad in ["25h", "a while", ""] {
            soaking.soak = Some(bad.into());
            let err = PoRequest::from_spec("cm", &soaking).unwrap_err();
            assert!(err.to_string().starts_with("spec.soak"), "{bad}: {err}");
        }
    }

    #[test]
    fn a_bad_range_names_its_field() {
        let mut bad = spec();
        bad.steady_state_version_range = Some(">=1.0 <<2".into());
        let err = PoRequest::from_spec("cm", &bad).unwrap_err();
        assert!(
            err.to_string().starts_with("spec.steadyStateVersionRange"),
            "{err}"
        );
    }
}
