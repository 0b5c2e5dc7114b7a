//! Conditions: the pure helpers live in `pom_policy::conditions`; this adds the clock.

pub use pom_policy::conditions::*;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

/// Now, truncated to whole seconds as the API server stores it.
#[must_use]
pub fn now() -> Time {
    to_api_time(Timestamp::now())
}
