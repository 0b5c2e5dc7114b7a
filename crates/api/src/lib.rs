//! POM's API surface, in one place.
//!
//! - [`platform_operator`] and [`catalog`]: our CRDs (`platform.openshift.io/v1alpha1`). These
//!   types are the single source of truth for `crds/` (written by the `crdgen` binary; a test
//!   fails when the committed files are stale).
//! - [`openshift`] and [`olm`]: typed views of the external APIs POM reads and writes
//!   (ClusterVersion, ClusterOperator, OperatorCondition). They carry only the fields POM uses
//!   plus those the upstream schemas require, and their `crd()` output is used only by tests
//!   when the upstream CRDs are not available.
//! - [`conditions`]: condition types and reasons shared by the controller and `pomctl`.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

pub mod catalog;
pub mod conditions;
pub mod labels;
pub mod namespaces;
pub mod olm;
pub mod openshift;
pub mod platform_operator;
mod validation;

pub use catalog::{Catalog, CatalogSpec, CatalogStatus};
pub use platform_operator::{PlatformOperator, PlatformOperatorSpec, PlatformOperatorStatus};

/// The API group of POM's own resources.
pub const GROUP: &str = "platform.openshift.io";

/// POM's own CRDs, in the order they are written to `crds/` and installed.
#[must_use]
pub fn crds() -> Vec<CustomResourceDefinition> {
    vec![PlatformOperator::crd(), Catalog::crd()]
}

/// CRDs for the external APIs POM talks to, generated from our typed views. Tests install them
/// on a bare control plane when the upstream CRDs (`shared/testdata/crds/`) are not at hand.
#[must_use]
pub fn external_test_crds() -> Vec<CustomResourceDefinition> {
    vec![
        openshift::ClusterVersion::crd(),
        openshift::ClusterOperator::crd(),
        olm::OperatorCondition::crd(),
        // Read-only views POM watches for its own pulls (issue 23 item 1).
        openshift::image_mirrors::ImageDigestMirrorSet::crd(),
        openshift::image_mirrors::ImageTagMirrorSet::crd(),
        openshift::image_mirrors::ImageContentSourcePolicy::crd(),
        // Read-only view POM watches for its own pulls' proxy (issue 23 item 2).
        openshift::proxy::Proxy::crd(),
    ]
}

/// Renders CRDs as the multi-document YAML committed under `crds/`.
///
/// # Errors
/// When a CRD cannot be serialised (never expected for our derived types).
pub fn crds_yaml(crds: &[CustomResourceDefinition]) -> Result<String, serde_saphyr::ser::Error> {
    let mut out = String::new();
    for crd in crds {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(crd)?);
    }
    Ok(out)
}
