//! Typed views of `config.openshift.io/v1` (openshift/api `config/v1`): only the fields POM reads
//! or writes, plus those the upstream schema requires so our writes stay valid against it.

mod cluster_operator;
mod cluster_version;
pub mod image_mirrors;
pub mod proxy;

/// The API group whose presence means OpenShift's operators run, the service-ca among them:
/// webhook serving certificates are then the service-ca's to sign (the manager and `pomctl`
/// decide alike).
pub const OPERATOR_GROUP: &str = "operator.openshift.io";

pub use cluster_operator::*;
pub use cluster_version::*;
