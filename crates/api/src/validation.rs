//! Patterns and limits shared by the CRD schemas, so each rule is written once.

/// DNS-1123 label, anchored (phase 0's pattern was unanchored, so `Foo_Bar` passed).
pub const DNS1123_LABEL: &str = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";
/// DNS-1123 subdomain, anchored.
pub const DNS1123_SUBDOMAIN: &str =
    "^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// Characters a version range may contain (Masterminds v3 syntax); the full parse is the
/// resolver's, which reports what is wrong in the PlatformOperator's status.
pub const VERSION_RANGE: &str = "^[0-9A-Za-z.+\\-<>=!~^*|, ]+$";
/// A Go-style duration such as `10m`, `1h30m` or `90s`.
pub const DURATION: &str = "^([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+$";
/// A kind with its API group as POM names objects: `Kind` (the core group) or `Kind.group`,
/// the group a DNS-1123 subdomain.
pub const KIND_WITH_GROUP: &str =
    "^[A-Za-z][A-Za-z0-9]*(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*)?$";
