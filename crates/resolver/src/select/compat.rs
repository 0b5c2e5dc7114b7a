//! Compatibility of a bundle with the cluster it will run on (§5 step 3).
//!
//! Shared by the selector (which refuses incompatible candidates) and the verdict (which asks
//! whether a bundle would survive the next minor update), so both read the catalog metadata the
//! same way: a missing `maxOpenShiftVersion` is compatible (as in OLM), an invalid one is not
//! (fail closed), and an unreadable `minKubeVersion` is not either.

use semver::Version;

use crate::cluster::{max_supports, normalize_minor};
use crate::fbc::model::{Bundle, MaxOpenShiftVersion};

use super::reject::RejectReason;

/// Checks `olm.maxOpenShiftVersion` against the OpenShift version the bundle will run on.
pub(crate) fn check_openshift(bundle: &Bundle, running_on: &Version) -> Result<(), RejectReason> {
    match &bundle.properties.max_openshift_version {
        None => Ok(()),
        Some(MaxOpenShiftVersion::Invalid { raw, reason }) => {
            Err(RejectReason::InvalidMaxOpenShiftVersion {
                raw: raw.clone(),
                reason: reason.clone(),
            })
        }
        Some(MaxOpenShiftVersion::Valid { major, minor }) => {
            if max_supports((*major, *minor), running_on.major, running_on.minor) {
                Ok(())
            } else {
                Err(RejectReason::MaxOpenShiftVersionTooLow {
                    max: (*major, *minor),
                    required: normalize_minor(running_on.major, running_on.minor),
                    cluster: running_on.clone(),
                })
            }
        }
    }
}

/// Checks `minKubeVersion` (from `olm.csv.metadata`) against the API server's version.
///
/// Only `major.minor.patch` are compared: API servers report pre-release and build suffixes
/// (`v1.33.0-rc.1`, `v1.33.2+k3s1`) that say nothing about which APIs they serve.
pub(crate) fn check_kube(bundle: &Bundle, kube: &Version) -> Result<(), RejectReason> {
    let Some(raw) = bundle.properties.min_kube_version.as_deref() else {
        return Ok(());
    };
    if raw.trim().is_empty() {
        return Ok(());
    }
    let Some(min) = parse_loose_core(raw) else {
        return Err(RejectReason::InvalidMinKubeVersion {
            raw: raw.to_owned(),
        });
    };
    if (kube.major, kube.minor, kube.patch) >= min {
        Ok(())
    } else {
        Err(RejectReason::MinKubeVersionTooHigh {
            min_kube: raw.to_owned(),
            kube: kube.clone(),
        })
    }
}

/// `v1.19`, `1.19.0`, `1.19.0-0` → `(1, 19, 0)`; junk → `None`.
fn parse_loose_core(raw: &str) -> Option<(u64, u64, u64)> {
    let trimmed = raw.trim();
    let trimmed = trimmed.strip_prefix('v').unwrap_or(trimmed);
    let core = trimmed.split(['-', '+']).next().unwrap_or_default();
    let mut parts = core.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    let patch = parts.next().map_or(Some(0), |part| part.parse().ok())?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loose_kube_versions() {
        assert_eq!(parse_loose_core("1.19"), Some((1, 19, 0)));
        assert_eq!(parse_loose_core("v1.19.3"), Some((1, 19, 3)));
        assert_eq!(parse_loose_core("1.25.0-0"), Some((1, 25, 0)));
        assert_eq!(parse_loose_core("1"), Some((1, 0, 0)));
        assert_eq!(parse_loose_core("one.two"), None);
        assert_eq!(parse_loose_core("1.2.3.4"), None);
        assert_eq!(parse_loose_core(""), None);
    }
}
