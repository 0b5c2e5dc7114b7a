//! Typed view of OLM v0's `operators.coreos.com/v2` OperatorCondition, which POM creates for each
//! installed CSV and reads as the upgrade gate (§7), so operators built on operator-lib work
//! unchanged.

mod operator_condition;

pub use operator_condition::*;
