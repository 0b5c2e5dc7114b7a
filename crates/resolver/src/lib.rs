//! The pure heart of POM.
//!
//! Everything here is a deterministic function over plain data: the controller (and `pomctl`)
//! gather a snapshot of the world, call into this crate to decide, then write. Nothing here talks
//! to Kubernetes, spawns tasks or touches the network, so every decision can be unit-tested,
//! property-tested and replayed offline with `pomctl resolve`.
//!
//! - [`version`] and [`range`]: bundle versions, Masterminds v3 constraints (admin ranges and
//!   pins) and blang ranges (catalog `skipRange`).
//! - [`fbc`]: the file-based catalog model and its parser.
//! - [`cluster`] and [`pin`]: the cluster's update phase and the version pin it implies (§4).
//! - [`select`]: candidate selection with an explanation for every rejected bundle (§5).
//! - [`verdict`]: whether an installed bundle lets the cluster take its next minor update (§8.3).
//!
//! Rendering bundles into the objects POM applies (§6) and judging them (content policy, powers,
//! CRD upgrade safety) is the `pom-render` crate: it uses nothing of resolution.

pub mod cluster;
pub mod fbc;
pub mod pin;
pub mod range;
pub mod select;
pub mod verdict;
pub mod version;
