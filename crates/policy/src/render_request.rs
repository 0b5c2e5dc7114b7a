//! What a PlatformOperator's spec asks of rendering: its exceptions, its consent, the bindings
//! it omits and its watch namespace as [`RenderOptions`]. One mapping, used by the controller and by `pomctl render
//! --po`, so what the CLI shows is what the controller would apply.

use std::collections::BTreeSet;

use pom_api::PlatformOperator;
use pom_api::platform_operator::{AppliedConfig, Consent, ExceptableContentRule};
use pom_render::deployment_config::DeploymentConfigError;
use pom_render::{
    ContentException, ContentRule, DeploymentConfig, OmittedObject, PowerClass, ProxyEnv,
    RenderOptions, WebhookConsent,
};

/// The render options for `po`, installed into `install_namespace`, with its Deployments
/// configured by `config` (`spec.config` and the cluster proxy: [`AppliedConfig::of`]; the
/// manager passes the one its decision renders with, see `decide`'s `config`).
///
/// # Errors
/// When the configuration does not read as a Deployment configuration (it always does when it
/// came from a `PlatformOperator` the API server validated).
pub fn render_options(
    po: &PlatformOperator,
    install_namespace: &str,
    config: &AppliedConfig,
) -> Result<RenderOptions, DeploymentConfigError> {
    let (deployment_config, proxy) = deployment_config(config)?;
    Ok(RenderOptions {
        exceptions: content_exceptions(po),
        consent: consented_classes(&po.spec.consent),
        webhook_consent: consented_webhooks(&po.spec.consent),
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
        deployment_config,
        proxy,
        ..RenderOptions::new(install_namespace)
    })
}

/// The renderer's form of a configuration: OLM's `SubscriptionConfig` as JSON, and the proxy.
///
/// # Errors
/// When the configuration does not read as a Deployment configuration.
pub fn deployment_config(
    config: &AppliedConfig,
) -> Result<(Option<DeploymentConfig>, Option<ProxyEnv>), DeploymentConfigError> {
    let deployment_config = match &config.config {
        None => None,
        Some(config) => Some(DeploymentConfig::from_json(
            serde_json::to_value(config).map_err(DeploymentConfigError::Json)?,
        )?),
    };
    let proxy = config.proxy.as_ref().map(|p| ProxyEnv {
        http_proxy: p.http_proxy.clone(),
        https_proxy: p.https_proxy.clone(),
        no_proxy: p.no_proxy.clone(),
    });
    Ok((deployment_config, proxy))
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
                ExceptableContentRule::WebhookRuleOutsideBundle
                | ExceptableContentRule::PrivilegedRoleBinding
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

/// The webhooks `consent` names, each bound to what it covers.
pub fn consented_webhooks(consent: &Consent) -> BTreeSet<WebhookConsent> {
    consent
        .webhooks
        .iter()
        .map(|w| WebhookConsent {
            name: w.name.clone(),
            covers: w.covers.clone(),
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
        let opts = render_options(&po, "p", &AppliedConfig::none()).unwrap();
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

    /// The configuration and the proxy reach the renderer as they are, so `pomctl render`
    /// and the manager configure the Deployments alike.
    #[test]
    fn the_config_and_the_proxy_map_to_render_options() {
        let po = po(serde_json::json!({
            "package": {"name": "p"},
            "config": {
                "env": [{"name": "HTTP_PROXY", "value": ""}],
                "nodeSelector": {"infra": "true"},
                "tolerations": [{"key": "infra", "operator": "Exists"}],
            },
        }));
        let proxy = pom_api::platform_operator::ClusterProxyEnv {
            http_proxy: "http://proxy:3128".into(),
            ..Default::default()
        };
        let config = AppliedConfig::of(po.spec.config.as_ref(), Some(&proxy));
        let opts = render_options(&po, "p", &config).unwrap();
        let deployment_config = opts.deployment_config.unwrap();
        assert_eq!(
            deployment_config.env,
            vec![serde_json::json!({"name": "HTTP_PROXY", "value": ""})]
        );
        assert_eq!(
            deployment_config.node_selector,
            Some([("infra".to_owned(), "true".to_owned())].into())
        );
        assert_eq!(deployment_config.tolerations.len(), 1);
        assert_eq!(opts.proxy.unwrap().http_proxy, "http://proxy:3128");
        let none = render_options(&po, "p", &AppliedConfig::none()).unwrap();
        assert_eq!((none.deployment_config, none.proxy), (None, None));
    }

    #[test]
    fn every_consent_field_gives_its_class() {
        let all = Consent {
            cluster_admin_equivalent: true,
            privileged_workloads: true,
            platform_config: true,
            webhooks: vec![pom_api::platform_operator::WebhookConsentSpec {
                name: "mpod.example.com".to_owned(),
                covers: format!("sha256:{}", "0".repeat(64)),
            }],
        };
        let given = consented_classes(&all);
        assert_eq!(
            given,
            PowerClass::ALL
                .into_iter()
                .filter(|c| c.consented_by_class())
                .collect()
        );
        assert!(consented_classes(&Consent::default()).is_empty());
        // Webhooks are consented one by one, bound to what they cover, never by class.
        assert_eq!(
            consented_webhooks(&all),
            BTreeSet::from([WebhookConsent {
                name: "mpod.example.com".to_owned(),
                covers: format!("sha256:{}", "0".repeat(64)),
            }])
        );
    }
}

#[cfg(test)]
mod shared_lists {
    /// The renderer (pure, no kube types) names POM's managed-object label for the webhooks'
    /// objectSelector; it must be the label POM applies (`pom_api::labels`).
    #[test]
    fn the_renderer_and_the_api_agree_on_the_owner_label() {
        assert_eq!(
            pom_render::webhooks::MANAGED_OBJECT_LABEL,
            pom_api::labels::OWNER_PO
        );
    }
}
