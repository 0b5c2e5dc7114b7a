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
//!   Secret holds; it releases it unread with a JSON patch whose `test` ops make the API
//!   server refuse it unless the Secret's owner reference is to this CSV (by uid), removing
//!   that reference and adding POM's owner labels ([`unread_release_patches`]), so deleting
//!   the CSV garbage-collects nothing, and its apply then writes POM's own serving
//!   certificate into it. The pods keep running: a Secret volume's files change in place, and
//!   an operator that watches them reloads; one written for OLM may not (OLM rotates by
//!   rolling the pods), so OLM's CA stays trusted beside POM's ([`TrustedOlmCa`]);
//! - OLM's webhook configurations have generated names (`<generateName>-xxxxx`) where POM's
//!   are named `<generateName>`, and trust OLM's CA, which stops signing once POM's
//!   certificate is served: adoption retires them ([`Retire`]), deleted conditionally on the
//!   resourceVersion read, after POM's own configurations are applied, so the API server
//!   always has one to call.

use std::collections::BTreeSet;

use serde_json::{Value, json};

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
/// The most webhook configurations of one kind adoption lists for a CSV (OLM makes one per
/// webhook description, a bundle has a few): the list is asked with this limit, and one that
/// has more left stops the adoption ([`NotProven::TooManyWebhookConfigurations`]) rather than
/// retiring some and leaving the rest trusting a CA nothing signs with.
pub const MAX_OLM_WEBHOOK_CONFIGURATIONS: usize = 128;

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

/// A serving Secret released from OLM without being read ([`unread_release_patches`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnreadRelease {
    pub key: ObjectKey,
    /// The uid of the CSV whose owner reference is removed: the API server refuses the release
    /// unless the Secret's owner reference names it.
    pub csv_uid: String,
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

/// The unread release of a serving Secret in the CSV's namespace.
///
/// # Errors
/// [`NotProven::CsvUidUnknown`] without the CSV's uid: nothing would then say which owner
/// reference is OLM's, and a Secret left with it would be garbage-collected with the CSV.
pub fn unread_release(
    key: &ObjectKey,
    csv: &str,
    csv_uid: Option<&str>,
) -> Result<UnreadRelease, NotProven> {
    let Some(uid) = csv_uid.filter(|u| !u.is_empty()) else {
        return Err(NotProven::CsvUidUnknown {
            csv: csv.to_owned(),
            object: key.clone(),
        });
    };
    Ok(UnreadRelease {
        key: key.clone(),
        csv_uid: uid.to_owned(),
    })
}

/// The JSON patches (RFC 6902) that release an unread serving Secret, tried in this order
/// until the API server accepts one (`test` ops make it refuse one that does not hold, and
/// refused, a JSON patch writes nothing):
/// 1. OLM's Secret: its first owner reference is this CSV's (by uid and kind: OLM writes the
///    Secret whole with exactly that one reference, `certresources.go`), removed, and POM's
///    owner labels added to its labels;
/// 2. the same for a Secret with no labels at all (an OLM before its labeller: adding under
///    an absent `/metadata/labels` fails patch 1), its labels set to POM's;
/// 3. already released to this PlatformOperator (a crash after the release: the next
///    reconcile proves again): only tests its owner label, writes nothing.
///
/// None accepted, the Secret is not OLM's for this CSV nor this PlatformOperator's: adoption
/// stops with the API server's refusal, having written nothing to it.
#[must_use]
pub fn unread_release_patches(
    release: &UnreadRelease,
    pom_labels: &std::collections::BTreeMap<String, String>,
) -> [Value; 3] {
    let olms = [
        json!({"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": release.csv_uid}),
        json!({"op": "test", "path": "/metadata/ownerReferences/0/kind", "value": super::takeover::CSV_KIND}),
        json!({"op": "remove", "path": "/metadata/ownerReferences/0"}),
    ];
    let mut labelled: Vec<Value> = olms.to_vec();
    labelled.extend(pom_labels.iter().map(|(k, v)| {
        json!({"op": "add", "path": format!("/metadata/labels/{}", pointer_token(k)), "value": v})
    }));
    let mut unlabelled: Vec<Value> = olms.to_vec();
    unlabelled.push(json!({"op": "add", "path": "/metadata/labels", "value": pom_labels}));
    let owner = pom_labels
        .get(pom_api::labels::OWNER_PO)
        .cloned()
        .unwrap_or_default();
    let resumed = vec![json!({"op": "test",
        "path": format!("/metadata/labels/{}", pointer_token(pom_api::labels::OWNER_PO)),
        "value": owner})];
    [
        Value::Array(labelled),
        Value::Array(unlabelled),
        Value::Array(resumed),
    ]
}

/// A JSON pointer's reference token for `key` (RFC 6901: `~` as `~0`, `/` as `~1`).
fn pointer_token(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// The largest OLM CA (PEM) POM's webhooks take on trust: one CA certificate is a few KiB;
/// what OLM's objects hold beyond this is not a CA and is not trusted (nor recorded).
pub const MAX_OLM_CA_BYTES: usize = 16 * 1024;

/// OLM v0's CA as POM's webhooks trust it beside POM's own after an adoption.
///
/// Why trusted at all, and why until the CA itself expires (review of issue 36): POM writes
/// its own certificate into the serving Secret when it adopts, but an operator written for
/// OLM need not reload a rewritten Secret (OLM rotates by changing the `olmcahash` pod
/// annotation, which rolls the pods), so it serves OLM's certificate until its pods restart,
/// at POM's next hop or any time later. A bound shorter than OLM's CA's own life would break
/// every webhook call of such an operator once it passed. OLM's serving certificate itself
/// expires a day before its CA: POM rolls the pods before then (`crate::serving_roll`), and
/// once every serving pod started under POM's value OLM's CA is no longer trusted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrustedOlmCa {
    /// PEM, read from OLM's webhook configurations or CRD conversion (public data).
    pub pem: String,
    /// The CA's own `notAfter` (Unix seconds): past it, it signs nothing valid.
    pub until: i64,
}

/// Whether POM's webhooks trust OLM's CA now: the one read from OLM's objects (while they are
/// read: adopting) else the one recorded in POM's CA Secret (a restart, or OLM's objects
/// gone), while it has not expired and a pod may still serve OLM's certificate
/// (`pods_may_serve_olms`: `serving_roll::olm_ca_still_served`, false once every serving
/// Deployment rolled out under POM's value); a PEM over [`MAX_OLM_CA_BYTES`] or empty is no CA.
#[must_use]
pub fn trusted_olm_ca(
    recorded: Option<&TrustedOlmCa>,
    read: Option<&TrustedOlmCa>,
    now: i64,
    pods_may_serve_olms: bool,
) -> Option<TrustedOlmCa> {
    let usable = |ca: &&TrustedOlmCa| !ca.pem.trim().is_empty() && ca.pem.len() <= MAX_OLM_CA_BYTES;
    read.filter(usable)
        .or_else(|| recorded.filter(usable))
        .filter(|ca| ca.until > now && pods_may_serve_olms)
        .cloned()
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

    #[test]
    fn olms_ca_is_trusted_until_it_expires() {
        let now = 1_000_000;
        let ca = |pem: &str, until: i64| TrustedOlmCa {
            pem: pem.into(),
            until,
        };
        let huge = "x".repeat(MAX_OLM_CA_BYTES + 1);
        // (case, recorded, read from OLM's objects, trusted)
        let cases = [
            ("nothing known", None, None, None),
            (
                "adopting: OLM's CA read",
                None,
                Some(ca("OLM", now + 10)),
                Some(ca("OLM", now + 10)),
            ),
            (
                "read wins over the recorded one",
                Some(ca("OLD", now + 10)),
                Some(ca("OLM", now + 20)),
                Some(ca("OLM", now + 20)),
            ),
            (
                "OLM's objects gone, or a restart: the recorded one, however long ago it was written",
                Some(ca("OLD", now + 1)),
                None,
                Some(ca("OLD", now + 1)),
            ),
            ("expired: dropped", Some(ca("OLD", now)), None, None),
            (
                "an empty caBundle read is no CA",
                None,
                Some(ca("  ", now + 10)),
                None,
            ),
            (
                "a read beyond the limit is no CA: the recorded one stays",
                Some(ca("OLD", now + 1)),
                Some(ca(&huge, now + 10)),
                Some(ca("OLD", now + 1)),
            ),
        ];
        for (case, recorded, read, want) in cases {
            assert_eq!(
                trusted_olm_ca(recorded.as_ref(), read.as_ref(), now, true),
                want,
                "{case}"
            );
            assert_eq!(
                trusted_olm_ca(recorded.as_ref(), read.as_ref(), now, false),
                None,
                "{case}: every serving pod started under POM's value, OLM's CA is dropped"
            );
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
    fn an_unread_release_needs_the_csv_uid() {
        let k = key("Secret", "op-service-cert", Some("ns"));
        assert_eq!(
            service_of_serving_secret(&serving_secret_of("op-service")),
            Some("op-service")
        );
        assert_eq!(service_of_serving_secret("-cert"), None);
        for uid in [None, Some("")] {
            assert!(matches!(
                unread_release(&k, "op.v1", uid),
                Err(NotProven::CsvUidUnknown { .. })
            ));
        }
        assert_eq!(
            unread_release(&k, "op.v1", Some("u1")).unwrap().csv_uid,
            "u1"
        );
    }

    /// The patches as the API server applies them: in order, the first accepted wins; `None`
    /// when every one is refused (a failed `test` refuses the whole patch).
    fn release_outcome(doc: &Value) -> Option<(usize, Value)> {
        let release = unread_release(
            &key("Secret", "op-service-cert", Some("ns")),
            "op.v1",
            Some("u1"),
        )
        .unwrap();
        let pom = [
            ("platform.openshift.io/owner".to_owned(), "po".to_owned()),
            ("platform.openshift.io/package".to_owned(), "op".to_owned()),
        ]
        .into();
        unread_release_patches(&release, &pom)
            .iter()
            .enumerate()
            .find_map(|(i, patch)| {
                let patch: json_patch::Patch = serde_json::from_value(patch.clone()).unwrap();
                let mut out = doc.clone();
                json_patch::patch(&mut out, &patch).ok().map(|()| (i, out))
            })
    }

    #[test]
    fn the_api_server_refuses_the_release_of_a_secret_not_olms_for_this_csv() {
        let csv = |uid: &str| {
            json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                "name": "op.v1", "uid": uid, "controller": false, "blockOwnerDeletion": false})
        };
        let secret = |labels: Option<Value>, refs: Value| {
            let mut meta = json!({"name": "op-service-cert", "namespace": "ns",
                "annotations": {"olmcahash": "h"}, "ownerReferences": refs});
            if let Some(labels) = labels {
                meta["labels"] = labels;
            }
            json!({"metadata": meta, "data": {"tls.crt": "x"}})
        };
        let released = json!({"olm.managed": "true", "platform.openshift.io/owner": "po",
            "platform.openshift.io/package": "op"});
        // (case, the Secret, which patch is accepted and the labels it leaves; None: refused)
        let cases = [
            (
                "OLM's, labelled by OLM's labeller",
                secret(Some(json!({"olm.managed": "true"})), json!([csv("u1")])),
                Some((0, released.clone())),
            ),
            (
                "OLM's, from an OLM that labels no Secret",
                secret(None, json!([csv("u1")])),
                Some((
                    1,
                    json!({"platform.openshift.io/owner": "po", "platform.openshift.io/package": "op"}),
                )),
            ),
            (
                "released already (a crash after the release)",
                secret(Some(released.clone()), json!([])),
                Some((2, released.clone())),
            ),
            (
                "an earlier CSV's of the same name",
                secret(Some(json!({"olm.managed": "true"})), json!([csv("u0")])),
                None,
            ),
            (
                "nobody's",
                secret(Some(json!({"olm.managed": "true"})), json!([])),
                None,
            ),
            (
                "owned by something else",
                secret(
                    None,
                    json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u1"}]),
                ),
                None,
            ),
            (
                "another PlatformOperator's",
                secret(
                    Some(json!({"platform.openshift.io/owner": "other"})),
                    json!([]),
                ),
                None,
            ),
        ];
        for (case, doc, want) in cases {
            let got = release_outcome(&doc);
            match (want, got) {
                (None, None) => {}
                (Some((patch, labels)), Some((i, out))) => {
                    assert_eq!(i, patch, "{case}");
                    assert_eq!(out["metadata"]["labels"], labels, "{case}");
                    assert_eq!(out["metadata"]["ownerReferences"], json!([]), "{case}");
                    assert_eq!(
                        out["data"], doc["data"],
                        "{case}: the Secret's data is untouched"
                    );
                }
                (want, got) => panic!("{case}: wanted {want:?}, got {got:?}"),
            }
        }
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
