//! Pulling catalog and bundle images (PRODUCT §3, §6): tags are resolved to digests, content is
//! pulled by digest; bundles are unpacked in memory and cached by digest, catalogs are streamed
//! to a content-addressed folder on disk.
//!
//! - [`ImagePuller`]: the registry side (oci-client, HTTPS except for the registries
//!   configured as insecure), with the credentials and CA bundle of each pull.
//! - [`auth`]: pull secrets (dockerconfigjson) matched to registries, CA bundles, redaction.
//! - [`layers`]: applying layers in order (tar, tar+gzip, whiteouts), with path and size
//!   checks, into memory or a folder; tested on generated tarballs.
//! - [`disk`]: catalog content on disk (streamed layers, a content-addressed folder per
//!   digest published by atomic rename, [`retain_pulled`] to remove what is no longer served).
//! - [`OciError`] / [`LayerError`]: what went wrong, worded for status messages, with a
//!   CamelCase condition reason.

pub mod auth;
mod cache;
pub mod disk;
mod error;
pub mod layers;
pub mod mirrors;
pub mod network;
mod puller;
mod reference;

pub use auth::RegistryAccess;
pub use cache::Files;
pub use disk::retain_pulled;
pub use error::{CredentialsTried, LayerError, OciError};
pub use puller::{ImagePuller, PULL_DEADLINE, Pulled, Resolved};
