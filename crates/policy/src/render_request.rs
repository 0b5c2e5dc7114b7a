//! What a PlatformOperator's spec asks of rendering: its exceptions, its consent, the bindings
//! it omits and its watch namespace as [`RenderOptions`]. One mapping, used by the controller and by `pomctl render
//! --po`, so what the CLI shows is what the controller would apply.

use std::collections::BTreeSet;

use pom_api::PlatformOperator;
use pom_api::platform_operator::{Consent, ExceptableContentRule};
use pom_resolver::render::{
    ContentException, ContentRule, OmittedObject, PowerClass, RenderOptions,
};

/// The render options for `po`, installed into `install_namespace`.
pub fn render_options(po: &PlatformOperator, install_namespace: &str) -> RenderOptions {
    RenderOptions {
        exceptions: content_exceptions(po),
        consent: consented_classes(&po.spec.consent),
        omit: po
            .spec
            .omit_objects
            .iter()
            .map(|o| OmittedObject {
                kind: o.kind.as_str().to_owned(),
                name: o.name.clone(),
            })
            .collect(),
        watch_namespace: po.spec.watch_namespace.clone(),
        ..RenderOptions::new(install_namespace)
    }
}

/// The admin's content-policy exceptions. The deprecated rules (whose findings are now power
/// classes, lifted by consent) lift nothing.
pub fn content_exceptions(po: &PlatformOperator) -> Vec<ContentException> {
    po.spec
        .content_exceptions
        .iter()
        .filter_map(|e| {
            let rule = match e.rule {
                ExceptableContentRule::KindNotAllowed => ContentRule::KindNotAllowed,
                ExceptableContentRule::LoadBalancerService => ContentRule::LoadBalancerService,
                ExceptableContentRule::WebhookRuleOutsideBundle => {
                    ContentRule::WebhookRuleOutsideBundle
                }
                ExceptableContentRule::PrivilegedRoleBinding
                | ExceptableContentRule::EscalatingRole
                | ExceptableContentRule::WildcardRole
                | ExceptableContentRule::AggregatingRole => return None,
            };
            Some(ContentException {
                rule,
                kind: e.kind.clone(),
                name: e.name.clone(),
            })
        })
        .collect()
}

/// The classes `consent` gives.
pub fn consented_classes(consent: &Consent) -> BTreeSet<PowerClass> {
    [
        (
            consent.cluster_admin_equivalent,
            PowerClass::ClusterAdminEquivalent,
        ),
        (
            consent.privileged_workloads,
            PowerClass::PrivilegedWorkloads,
        ),
        (consent.platform_config, PowerClass::PlatformConfig),
    ]
    .into_iter()
    .filter_map(|(given, class)| given.then_some(class))
    .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn po(spec: serde_json::Value) -> PlatformOperator {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
            "metadata": {"name": "p"}, "spec": spec,
        }))
        .unwrap()
    }

    #[test]
    fn the_spec_maps_to_render_options() {
        let po = po(serde_json::json!({
            "package": {"name": "p"},
            "watchNamespace": "team-a",
            "consent": {"privilegedWorkloads": true},
            "contentExceptions": [
                {"rule": "KindNotAllowed", "kind": "Pod", "name": "x"},
                {"rule": "EscalatingRole", "kind": "ClusterRole", "name": "y"},
            ],
        }));
        let opts = render_options(&po, "p");
        assert_eq!(opts.install_namespace, "p");
        assert_eq!(opts.watch_namespace.as_deref(), Some("team-a"));
        assert_eq!(
            opts.consent,
            BTreeSet::from([PowerClass::PrivilegedWorkloads])
        );
        assert_eq!(
            opts.exceptions,
            vec![ContentException {
                rule: ContentRule::KindNotAllowed,
                kind: "Pod".into(),
                name: "x".into()
            }],
            "a deprecated rule lifts nothing"
        );
    }

    #[test]
    fn every_consent_field_gives_its_class() {
        let all = Consent {
            cluster_admin_equivalent: true,
            privileged_workloads: true,
            platform_config: true,
        };
        let given = consented_classes(&all);
        assert_eq!(
            given,
            PowerClass::ALL
                .into_iter()
                .filter(|c| c.needs_consent())
                .collect()
        );
        assert!(consented_classes(&Consent::default()).is_empty());
    }
}

#[cfg(test)]
mod shared_lists {
    /// The renderer (pure, no kube types) names POM's managed-object label for the webhooks'
    /// objectSelector; it must be the label POM applies (`pom_api::labels`).
    #[test]
    fn the_renderer_and_the_api_agree_on_the_owner_label() {
        assert_eq!(
            pom_resolver::render::webhooks::MANAGED_OBJECT_LABEL,
            pom_api::labels::OWNER_PO
        );
    }
}
