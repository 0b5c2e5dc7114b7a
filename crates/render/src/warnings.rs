//! What a render accepted but the admin should know: carried out of the render in
//! [`crate::RenderedBundle::warnings`], printed by `pomctl render` and published by the manager
//! as a Warning Event on the PlatformOperator.

use std::fmt;

/// One warning of a render.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RenderWarning {
    /// A manifest repeats a key within one mapping. OLM reads the last value, and so does
    /// POM: that value is what the content policy judged and what is applied (issue 33 item 6).
    DuplicateKey {
        /// The file in the bundle.
        file: String,
        /// 1-based position of the document in its file.
        document: usize,
        /// 1-based line where the document starts.
        line: usize,
        /// The repeated key's path in the document (`spec.replicas`, `spec.containers[0].env`).
        key: String,
    },
    /// The bundle ships a Service named like the one POM renders for a Deployment's webhooks
    /// (`<deployment>-service`): POM's replaces it, with the webhooks' ports and the
    /// Deployment's selector, as OLM v0 replaces it (issue 33 item 6).
    WebhookServiceReplaced {
        /// The Service's name.
        service: String,
        /// Where the bundle ships it.
        file: String,
    },
}

impl fmt::Display for RenderWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateKey {
                file,
                document,
                line,
                key,
            } => write!(
                f,
                "{file} (document {document}, line {line}) repeats the key {key}: the last value \
                 is used, as OLM reads it, and is what POM judged and applies; ask the bundle's \
                 publisher to remove the other"
            ),
            Self::WebhookServiceReplaced { service, file } => write!(
                f,
                "Service {service} ({file}) is named like the Service POM renders for its \
                 Deployment's webhooks: POM's replaces it (the webhooks' ports, the Deployment's \
                 selector), as OLM v0 does; a port only the bundle's Service had is not served"
            ),
        }
    }
}
