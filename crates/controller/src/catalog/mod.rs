//! Catalogs (PRODUCT §3): where file-based catalog content comes from, and the parsed content
//! every PlatformOperator resolves against.
//!
//! - [`CatalogCache`]: the parsed catalogs by name, with their availability and a generation
//!   counter the PlatformOperator controller watches to re-resolve.
//! - [`run`]: the Catalog controller that fills the cache from image and ConfigMap sources and
//!   reports `status` (`Serving`, `resolvedSource`, `packages`, `lastUnpacked`).
//! - [`access`]: the pull secrets and CA bundle a Catalog's images (and its bundles' images)
//!   are pulled with.

pub mod access;
mod cache;
mod held;

mod reconcile;
mod source;
mod status;

pub use cache::{CatalogCache, CatalogEntry, CatalogState, LoadingGuard, ServedCatalog};
pub use held::DEFAULT_HELD_SOURCE_BUDGET;
pub use pom_policy::duration::parse_go_duration;
pub use reconcile::{CatalogError, run};
pub use source::SourceError;
