//! Typed views of OLM v0's APIs: the `operators.coreos.com/v2` OperatorCondition, which POM
//! creates for each installed CSV and reads as the upgrade gate (§7), so operators built on
//! operator-lib work unchanged; and the Subscription, ClusterServiceVersion and OperatorGroup
//! OLM v0 leaves for an install, which `pomctl adopt` reads (issue 36).

mod operator_condition;
pub mod v0_install;

pub use operator_condition::*;
pub use v0_install::{ClusterServiceVersion, OperatorGroup, Subscription};
