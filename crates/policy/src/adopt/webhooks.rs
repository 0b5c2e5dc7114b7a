//! Adopting a bundle with webhooks (issue 36, the webhook case of [`super::takeover::prove`]),
//! pure: what OLM v0 left for the webhooks and how each piece passes to POM without a pod
//! restart.
//!
//! OLM v0 lays a webhook bundle out as POM renders it (operator-lifecycle-manager
//! `pkg/controller/install/certresources.go`, `webhook.go`): per serving Deployment a Service
//! `<deployment>-service` and a `kubernetes.io/tls` Secret `<service>-cert` (a non-blocking
//! owner reference to the CSV), mounted in the pod template as the volumes `apiservice-cert`
//! and `webhook-cert` at the same paths, with the same items, so the pod templates are equal.
//! What differs, and what adoption does about it:
//! - the pod template carries OLM's CA hash annotation [`OLM_CA_HASH_ANNOTATION`]: OLM's own,
//!   allowed and left as it is (changing it would restart the pods);
//! - the serving Secret: POM never reads Secrets (issue 22), so it cannot prove what the
//!   Secret holds; it releases it unread with a strategic merge patch that removes exactly the
//!   owner reference to this CSV (by uid) and OLM's labels ([`unread_release_patch`]), so
//!   deleting the CSV garbage-collects nothing, and its apply then writes POM's own serving
//!   certificate into it. The pods keep running: a Secret volume's files change in place and
//!   the operator reloads them as it does for OLM's rotation (controller-runtime watches them);
//! - OLM's webhook configurations have generated names (`<generateName>-xxxxx`) where POM's
//!   are named `<generateName>`, and trust OLM's CA, which stops signing once POM's
//!   certificate is served: adoption retires them ([`Retire`]), deleted conditionally on the
//!   resourceVersion read, after POM's own configurations are applied, so the API server
//!   always has one to call.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::ObjectKey;
use super::takeover::{NotProven, Pair};

/// OLM's annotation of the CA hash on a serving Deployment's pod template (and on the serving
/// Secret): `certresources.go` sets it so that a new CA rolls the pods out.
pub const OLM_CA_HASH_ANNOTATION: &str = "olmcahash";
/// OLM's label naming the `generateName` of the webhook description a configuration is for.
pub const OLM_WEBHOOK_DESCRIPTION_LABEL: &str = "olm.webhook-description-generate-name";
/// The kinds of OLM's webhook configurations.
pub const WEBHOOK_CONFIGURATION_KINDS: &[&str] = &[
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
];
const SECRET_SUFFIX: &str = "-cert";

/// A webhook configuration OLM created for the installed CSV (found by its owner labels).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OlmWebhookConfiguration {
    pub key: ObjectKey,
    pub resource_version: Option<String>,
    /// Its [`OLM_WEBHOOK_DESCRIPTION_LABEL`].
    pub generate_name: Option<String>,
    /// Whether it carries `platform.openshift.io/adopt` (the shipped admission guard lets the
    /// manager delete it only then: [`super::guard`]).
    pub handed_over: bool,
}

/// A serving Secret released from OLM without being read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadRelease {
    pub key: ObjectKey,
    /// The uid of the CSV whose owner reference is removed (no other reference is touched).
    pub csv_uid: String,
    /// OLM's labels removed (absent ones are no-ops).
    pub labels: Vec<String>,
}

/// An OLM webhook configuration POM's own replaces, deleted after POM's are applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retire {
    pub key: ObjectKey,
    /// The deletion's precondition: a configuration changed since the proof is not deleted.
    pub resource_version: Option<String>,
}

/// The Service whose serving-certificate Secret is named `secret` (`<service>-cert`), if the
/// name is one.
#[must_use]
pub fn service_of_serving_secret(secret: &str) -> Option<&str> {
    secret.strip_suffix(SECRET_SUFFIX).filter(|s| !s.is_empty())
}

/// The serving-certificate Secret of `service` (the inverse of [`service_of_serving_secret`]).
#[must_use]
pub fn serving_secret_of(service: &str) -> String {
    format!("{service}{SECRET_SUFFIX}")
}

/// Whether `key` is the serving-certificate Secret of a Service the bundle renders
/// (`<service>-cert`, OLM's `SecretName(ServiceName(deployment))` and POM's alike).
#[must_use]
pub fn is_serving_secret(key: &ObjectKey, objects: &[Pair<'_>]) -> bool {
    if key.kind != "Secret" || key.api_version != "v1" {
        return false;
    }
    let Some(service) = service_of_serving_secret(&key.name) else {
        return false;
    };
    objects.iter().any(|p| {
        p.key.kind == "Service"
            && p.key.api_version == "v1"
            && p.key.namespace == key.namespace
            && p.key.name == service
    })
}

/// The unread release of a serving Secret in the CSV's namespace; `None` without the CSV's uid
/// (nothing then says which owner reference is OLM's).
#[must_use]
pub fn unread_release(
    key: &ObjectKey,
    namespace: &str,
    csv_uid: Option<&str>,
    olm_labels: &[String],
) -> Option<UnreadRelease> {
    (key.namespace.as_deref() == Some(namespace)).then_some(())?;
    Some(UnreadRelease {
        key: key.clone(),
        csv_uid: csv_uid?.to_owned(),
        labels: olm_labels.to_vec(),
    })
}

/// The strategic merge patch releasing an unread Secret: the owner reference with the CSV's
/// uid deleted (owner references merge by uid, so no other is touched, and a Secret without
/// it is left as it is), OLM's labels out, `pom_labels` in.
#[must_use]
pub fn unread_release_patch(
    release: &UnreadRelease,
    pom_labels: &std::collections::BTreeMap<String, String>,
) -> Value {
    let mut labels = Map::new();
    for label in &release.labels {
        labels.insert(label.clone(), Value::Null);
    }
    for (k, v) in pom_labels {
        labels.insert(k.clone(), Value::String(v.clone()));
    }
    json!({"metadata": {
        "labels": labels,
        "ownerReferences": [{"$patch": "delete", "uid": release.csv_uid}],
    }})
}

/// Whether OLM's webhook configurations may be retired after this apply: only once POM's own
/// are registered, that is when the apply left no `WebhookServed` wait (a pod not ready yet, a
/// paused Deployment). Retired earlier, no configuration would be registered at all while POM's
/// wait, and the adoption, recorded installed, would never be proven again (review of issue 36,
/// H2): the reconcile fails before its status write instead, and the next one proves again.
#[must_use]
pub fn retire_now(waits: &[crate::status::Wait]) -> bool {
    !waits
        .iter()
        .any(|wait| matches!(wait, crate::status::Wait::WebhookServed { .. }))
}

/// OLM's webhook configurations for the CSV that POM's replace: each must be for a webhook
/// description POM renders a configuration of the same kind for (named after the same
/// `generateName`), else adoption would leave a configuration trusting a CA nothing signs
/// with any more.
///
/// # Errors
/// [`NotProven::WebhookConfigurationUnmatched`] for a configuration POM renders no
/// counterpart of.
pub fn retire(
    olm: &[OlmWebhookConfiguration],
    objects: &[Pair<'_>],
) -> Result<Vec<Retire>, NotProven> {
    let rendered: BTreeSet<(&str, &str)> = objects
        .iter()
        .filter(|p| WEBHOOK_CONFIGURATION_KINDS.contains(&p.key.kind.as_str()))
        .map(|p| (p.key.kind.as_str(), p.key.name.as_str()))
        .collect();
    olm.iter()
        .map(|c| {
            let matched = c
                .generate_name
                .as_deref()
                .is_some_and(|g| rendered.contains(&(c.key.kind.as_str(), g)));
            if matched {
                Ok(Retire {
                    key: c.key.clone(),
                    resource_version: c.resource_version.clone(),
                })
            } else {
                Err(NotProven::WebhookConfigurationUnmatched {
                    object: c.key.clone(),
                    generate_name: c.generate_name.clone().unwrap_or_default(),
                })
            }
        })
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::status::Wait;

    #[test]
    fn olms_configurations_are_retired_only_once_poms_are_registered() {
        let rollout = Wait::Rollout {
            namespace: "gamma-system".to_owned(),
            name: "gamma".to_owned(),
        };
        let held = Wait::WebhookServed {
            kind: "ValidatingWebhookConfiguration".to_owned(),
            name: "gamma-validating".to_owned(),
        };
        let service = Wait::WebhookServed {
            kind: "Service".to_owned(),
            name: "gamma-service".to_owned(),
        };
        // (what, waits after the apply, retire now)
        let cases = [
            ("nothing left to wait for", vec![], true),
            (
                "a rollout still going: POM's are registered",
                vec![rollout.clone()],
                true,
            ),
            (
                "POM's held until the Service serves",
                vec![rollout, held],
                false,
            ),
            ("the Service itself not serving", vec![service], false),
        ];
        for (what, waits, expected) in cases {
            assert_eq!(retire_now(&waits), expected, "{what}");
        }
    }

    fn key(kind: &str, name: &str, namespace: Option<&str>) -> ObjectKey {
        let api_version = if WEBHOOK_CONFIGURATION_KINDS.contains(&kind) {
            "admissionregistration.k8s.io/v1"
        } else {
            "v1"
        };
        ObjectKey {
            api_version: api_version.into(),
            kind: kind.into(),
            namespace: namespace.map(str::to_owned),
            name: name.into(),
        }
    }

    #[test]
    fn the_serving_secret_is_the_cert_of_a_rendered_service() {
        let service = key("Service", "op-service", Some("ns"));
        let desired = json!({});
        let objects = [Pair {
            key: &service,
            desired: &desired,
            live: None,
        }];
        let cases = [
            (
                "OLM's and POM's name",
                key("Secret", "op-service-cert", Some("ns")),
                true,
            ),
            ("another Secret", key("Secret", "op-tls", Some("ns")), false),
            (
                "a Service's, elsewhere",
                key("Secret", "op-service-cert", Some("other")),
                false,
            ),
            (
                "no such Service",
                key("Secret", "other-service-cert", Some("ns")),
                false,
            ),
            (
                "not a Secret",
                key("ConfigMap", "op-service-cert", Some("ns")),
                false,
            ),
        ];
        for (case, k, want) in cases {
            assert_eq!(is_serving_secret(&k, &objects), want, "{case}");
        }
    }

    #[test]
    fn an_unread_release_needs_the_csv_uid_and_its_namespace() {
        let k = key("Secret", "op-service-cert", Some("ns"));
        let labels = vec!["olm.owner".to_owned()];
        assert_eq!(
            service_of_serving_secret(&serving_secret_of("op-service")),
            Some("op-service")
        );
        assert_eq!(service_of_serving_secret("-cert"), None);
        assert!(unread_release(&k, "ns", None, &labels).is_none());
        assert!(unread_release(&k, "other", Some("u1"), &labels).is_none());
        let release = unread_release(&k, "ns", Some("u1"), &labels).unwrap();
        assert_eq!(release.csv_uid, "u1");
        let pom = [("platform.openshift.io/owner".to_owned(), "po".to_owned())].into();
        assert_eq!(
            unread_release_patch(&release, &pom),
            json!({"metadata": {
                "labels": {"olm.owner": null, "platform.openshift.io/owner": "po"},
                "ownerReferences": [{"$patch": "delete", "uid": "u1"}]}})
        );
    }

    #[test]
    fn olms_configurations_are_retired_only_for_what_pom_renders() {
        let vwc = key("ValidatingWebhookConfiguration", "vwidgets", None);
        let mwc = key("MutatingWebhookConfiguration", "mwidgets", None);
        let desired = json!({});
        let pair = |k| Pair {
            key: k,
            desired: &desired,
            live: None,
        };
        let objects = [pair(&vwc), pair(&mwc)];
        let olm = |kind: &str, name: &str, generate: Option<&str>| OlmWebhookConfiguration {
            key: key(kind, name, None),
            resource_version: Some("7".into()),
            generate_name: generate.map(str::to_owned),
            handed_over: false,
        };
        let ok = retire(
            &[
                olm(
                    "ValidatingWebhookConfiguration",
                    "vwidgets-abcde",
                    Some("vwidgets"),
                ),
                olm(
                    "MutatingWebhookConfiguration",
                    "mwidgets-fghij",
                    Some("mwidgets"),
                ),
            ],
            &objects,
        )
        .unwrap();
        assert_eq!(
            ok.iter().map(|r| r.key.name.as_str()).collect::<Vec<_>>(),
            ["vwidgets-abcde", "mwidgets-fghij"]
        );
        assert_eq!(ok[0].resource_version.as_deref(), Some("7"));
        assert!(retire(&[], &objects).unwrap().is_empty());
        for (case, config) in [
            (
                "another description",
                olm("ValidatingWebhookConfiguration", "x-abcde", Some("x")),
            ),
            (
                "the other kind",
                olm(
                    "MutatingWebhookConfiguration",
                    "vwidgets-abcde",
                    Some("vwidgets"),
                ),
            ),
            (
                "no description label",
                olm("ValidatingWebhookConfiguration", "vwidgets-abcde", None),
            ),
        ] {
            let err = retire(&[config], &objects).unwrap_err();
            assert!(
                matches!(err, NotProven::WebhookConfigurationUnmatched { .. }),
                "{case}: {err}"
            );
        }
    }
}
