//! The POM manager, as a library so that tests can run it in-process.
//!
//! Data flow: watches feed reconcilers; each reconciler gathers a snapshot (the object, the
//! cached catalogs, the cluster version, what is installed), asks `pom_resolver` what to do, then
//! writes with server-side apply and reports status. See `docs/architecture.md`.
//!
//! - [`catalog`]: the Catalog reconciler and the parsed-catalog cache it fills.
//! - [`oci`]: pulling catalog and bundle images by digest.
//! - [`operator`]: the PlatformOperator reconciler (resolve → fetch → render → apply → status).
//! - [`cluster_operator`]: the aggregated ClusterOperator the CVO reads.
//! - [`conditions`]: the one place conditions are computed (lastTransitionTime discipline).
//! - [`cli`], [`run`], [`leader`], [`health`], [`metrics`], [`cluster_state`]: the process around
//!   the controllers (flags, leader election, probes, metrics, graceful shutdown);
//!   [`api_metrics`] counts the manager's own API requests; [`metrics_auth`] and
//!   [`serving_cert`] make `/metrics` HTTPS for authorised scrapers only; [`watch_cache`] is
//!   what every watch cache keeps of an object; [`events`] publishes Kubernetes Events;
//!   [`image_mirrors`] keeps the cluster's image mirror configuration the pulls go through.

pub mod admission_guard;
pub mod api_metrics;
pub mod catalog;
pub mod catalog_sources_policy;
pub mod cli;
pub mod cluster_operator;
pub mod cluster_proxy;
pub mod cluster_state;
pub mod conditions;
pub mod context;
pub mod error;
pub mod events;
pub mod fail_point;
pub mod health;
pub mod image_mirrors;
pub mod leader;
pub mod liveness;
pub mod manifests;
pub mod metrics;
pub mod metrics_auth;
pub mod owner_label_guard;
pub use pom_oci as oci;
pub mod operator;
pub mod run;
pub mod serving_cert;
pub mod watch_cache;

pub use context::Context;
pub use error::Error;
