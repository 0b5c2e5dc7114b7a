//! plain+v0: a folder of manifests applied as they are (rukpak's plain format).
//!
//! Nothing is generated. Namespaced objects that name no namespace go to the install
//! namespace; objects that name one keep it (a plain bundle may lay out its own namespaces).

use super::assemble::Sourced;
use super::error::RenderError;
use super::objects::Manifest;
use super::{Parts, check_removed_apis};

/// Renders a plain+v0 bundle.
pub fn render(manifests: &[Manifest]) -> Result<Parts, RenderError> {
    check_removed_apis(manifests)?;
    let objects = manifests
        .iter()
        .map(|m| Sourced {
            value: m.value.clone(),
            origin: m.origin(),
            generated: false,
        })
        .collect();
    Ok(Parts {
        csv: None,
        csv_name: None,
        objects,
        install_mode: None,
        watch_namespace: None,
        suggested_namespace: None,
        webhook_services: Vec::new(),
        rendered_webhooks: Default::default(),
        namespace_metadata: Default::default(),
    })
}
