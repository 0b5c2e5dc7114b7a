//! Giving an adopted operator back to OLM v0 (issue 36 item 3), pure: the exact inverse of
//! adoption's release, for an admin who changes their mind while OLM's Subscription and
//! ClusterServiceVersion still exist.
//!
//! The admin asks with the PlatformOperator annotation `platform.openshift.io/give-back`
//! naming the CSV adopted. [`judge`] says whether POM can: the PlatformOperator adopted
//! (`spec.adoptFrom`), still runs the bundle it adopted (no move since: OLM's CSV would run
//! another version than what runs), and the Subscription still names that CSV, which exists
//! (its current uid is what the restored owner references name). Then, per object the
//! inventory records, [`restore`] says what to write: on what adoption released from OLM (the
//! [`ReleaseRecord`] the release left on it), OLM's labels and owner reference to the CSV as it
//! had them, POM's owner labels and the record out, in one conditional patch; the adopted
//! install namespace loses POM's owner labels only (OLM never marks it); what POM created
//! itself is left POM's, so deleting the PlatformOperator removes it and nothing else.
//!
//! Why a record on each object rather than a recomputation: which objects OLM marked, and
//! with what, is known only at the release (POM also creates objects of its own that OLM never
//! had); reconstructing it would guess, and a guess that adds an owner reference to the CSV
//! hands the object to the garbage collector.

use std::collections::BTreeSet;

use serde_json::{Map, Value, json};

use super::ObjectKey;
use super::takeover::{
    CSV_KIND, OLM_OWNER, OLM_OWNER_KIND, OLM_OWNER_NAMESPACE, OlmSource, component_label,
};

/// The longest marks label read (a label value is at most 63 characters anyway).
pub const MAX_MARKS_LABEL_BYTES: usize = 63;

/// One of OLM's marks an object carried when adoption released it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Mark {
    /// `olm.owner: <csv>`.
    Owner,
    /// `olm.owner.namespace: <namespace>`.
    Namespace,
    /// `olm.owner.kind: ClusterServiceVersion`.
    Kind,
    /// `operators.coreos.com/<package>.<namespace>: ""`.
    Component,
    /// An owner reference to the CSV.
    Reference,
}

impl Mark {
    const ALL: [Mark; 5] = [
        Self::Owner,
        Self::Namespace,
        Self::Kind,
        Self::Component,
        Self::Reference,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Self::Owner => "owner",
            Self::Namespace => "namespace",
            Self::Kind => "kind",
            Self::Component => "component",
            Self::Reference => "reference",
        }
    }
}

/// What OLM marked one object with when adoption released it, as its
/// `platform.openshift.io/released-from-olm` and `released-olm-marks` labels record it
/// (labels: an annotation change would bump a Deployment's generation). Give-back writes each
/// mark as OLM writes it for the CSV (`olm.owner` its name, `olm.owner.namespace` its
/// namespace, a non-blocking owner reference to its current uid).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReleaseRecord {
    /// The CSV the object belonged to.
    pub csv: String,
    pub marks: BTreeSet<Mark>,
}

impl ReleaseRecord {
    /// The record's labels.
    #[must_use]
    pub fn labels(&self) -> [(&'static str, String); 2] {
        let marks: Vec<&str> = self.marks.iter().map(|m| m.as_str()).collect();
        [
            (
                pom_api::labels::RELEASED_FROM_OLM,
                pom_api::labels::label_value(&self.csv),
            ),
            (pom_api::labels::RELEASED_OLM_MARKS, marks.join(".")),
        ]
    }

    /// Reads the marks label, bounded.
    ///
    /// # Errors
    /// Why the value is not one POM wrote.
    pub fn parse_marks(text: &str) -> Result<BTreeSet<Mark>, String> {
        if text.len() > MAX_MARKS_LABEL_BYTES {
            return Err(format!(
                "{} bytes, more than the {MAX_MARKS_LABEL_BYTES} of a label value",
                text.len()
            ));
        }
        text.split('.')
            .filter(|w| !w.is_empty())
            .map(|w| {
                Mark::ALL
                    .into_iter()
                    .find(|m| m.as_str() == w)
                    .ok_or_else(|| format!("{w:?} is not one of OLM's marks"))
            })
            .collect()
    }
}

/// What [`judge`] judges.
#[derive(Debug, Clone, Copy)]
pub struct GiveBackInput<'a> {
    pub po: &'a str,
    /// The annotation's value: the CSV the admin gives the operator back to.
    pub requested: &'a str,
    /// The bundle the status records installed.
    pub installed: Option<&'a str>,
    /// What OLM's objects say, read from `spec.adoptFrom`; `None` when the PO adopted nothing.
    pub olm: Option<&'a OlmSource>,
}

/// The CSV the objects go back to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    pub csv: String,
    pub uid: String,
    /// The CSV's namespace: the install namespace adoption took over.
    pub namespace: String,
}

/// Why POM does not give the operator back: nothing is written, and each message says what
/// to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error(
        "PlatformOperator {po} adopted nothing (no spec.adoptFrom): there is no OLM v0 installation to give it back to; remove the platform.openshift.io/give-back annotation"
    )]
    NotAdopted { po: String },
    #[error(
        "PlatformOperator {po} has installed nothing (no status.installedBundle): there is nothing to give back; remove the platform.openshift.io/give-back annotation"
    )]
    NothingInstalled { po: String },
    #[error(
        "PlatformOperator {po} runs a bundle with webhooks ({}): giving it back is not supported, as the serving Secret holds POM's certificate and OLM's webhook configurations were replaced by POM's, which give-back would not restore; remove the platform.openshift.io/give-back annotation and keep the operator under POM, or move it back to OLM by reinstalling (delete the PlatformOperator, then let the Subscription install the operator again)",
        objects.join(", ")
    )]
    WebhookBundle { po: String, objects: Vec<String> },
    #[error(
        "the annotation platform.openshift.io/give-back names {requested}, but {installed} is installed: name the installed bundle, the ClusterServiceVersion adopted"
    )]
    NamesAnother {
        requested: String,
        installed: String,
    },
    #[error(
        "Subscription {subscription} is gone: OLM would not manage the operator again; remove the annotation and keep it under POM (or reinstall it with OLM)"
    )]
    SubscriptionMissing { subscription: String },
    #[error(
        "Subscription {subscription} has installed {}, not {adopted} (the ClusterServiceVersion adopted): OLM would run another version than what runs; remove the annotation and keep the operator under POM",
        installed.as_deref().unwrap_or("nothing")
    )]
    CsvNotAdopted {
        subscription: String,
        adopted: String,
        installed: Option<String>,
    },
    #[error(
        "ClusterServiceVersion {namespace}/{csv} (the one adopted) is gone: giving objects back to it would have the garbage collector delete them; remove the annotation and keep the operator under POM"
    )]
    CsvGone { csv: String, namespace: String },
    #[error(
        "{object}: its platform.openshift.io/released-olm-marks label cannot be read ({why}): POM cannot tell what OLM marked it with; restore OLM's labels and owner reference by hand, or remove the annotation"
    )]
    RecordUnreadable { object: String, why: String },
    #[error(
        "{object} was released from ClusterServiceVersion {recorded} (its platform.openshift.io/released-from-olm label), not {csv}: it is not the adopted installation's; remove the annotation and keep the operator under POM"
    )]
    RecordOfAnother {
        /// The object, as `ObjectKey` displays it.
        object: String,
        recorded: String,
        csv: String,
    },
}

/// The ClusterServiceVersion a give-back of `po` names: its installed bundle, which for an
/// adopted PlatformOperator that never moved is the CSV adopted. The manager judges the
/// annotation against it ([`judge`]'s `installed`) and `pomctl adopt --give-back` writes it:
/// one rule.
///
/// # Errors
/// [`Refused::NotAdopted`] without `spec.adoptFrom`; [`Refused::WebhookBundle`] when the
/// inventory records webhook objects ([`webhook_objects`]); [`Refused::NothingInstalled`] when
/// nothing is installed.
pub fn csv_to_give_back(po: &pom_api::PlatformOperator) -> Result<&str, Refused> {
    let name = po.metadata.name.clone().unwrap_or_default();
    if po.spec.adopt_from.is_none() {
        return Err(Refused::NotAdopted { po: name });
    }
    let webhooks = webhook_objects(po);
    if !webhooks.is_empty() {
        return Err(Refused::WebhookBundle {
            po: name,
            objects: webhooks,
        });
    }
    po.status
        .as_ref()
        .and_then(|s| s.installed_bundle.as_ref())
        .map(|b| b.name.as_str())
        .ok_or(Refused::NothingInstalled { po: name })
}

/// The webhook objects `po`'s inventory records (its webhook configurations, the serving
/// Service `<deployment>-service` of a recorded Deployment, and the serving Secret
/// `<service>-cert` of a recorded Service), as `kind/name`. Adoption replaces OLM's
/// configurations with POM's and writes POM's certificate into the Secret (a recorded Service
/// whose Secret is not yet recorded counts too: the Secret is released before it is applied);
/// giving back restores none of it (POM
/// never reads the Secret to restore OLM's owner reference and certificate), so a webhook
/// bundle is refused rather than given back half.
#[must_use]
pub fn webhook_objects(po: &pom_api::PlatformOperator) -> Vec<String> {
    let objects: BTreeSet<&pom_api::platform_operator::InventoryObject> = po
        .status
        .iter()
        .flat_map(|s| s.inventory.iter())
        .flat_map(|e| e.objects.iter())
        .collect();
    let recorded = |kind: &str, namespace: &Option<String>, name: &str| {
        objects
            .iter()
            .any(|o| o.kind == kind && &o.namespace == namespace && o.name == name)
    };
    objects
        .iter()
        .filter(|o| {
            let core = o.api_version == "v1";
            super::webhooks::WEBHOOK_CONFIGURATION_KINDS.contains(&o.kind.as_str())
                || (core
                    && o.kind == "Secret"
                    && super::webhooks::service_of_serving_secret(&o.name)
                        .is_some_and(|s| recorded("Service", &o.namespace, s)))
                || (core
                    && o.kind == "Service"
                    && o.name
                        .strip_suffix(SERVING_SERVICE_SUFFIX)
                        .is_some_and(|d| recorded("Deployment", &o.namespace, d)))
        })
        .map(|o| format!("{}/{}", o.kind, o.name))
        .collect()
}

/// OLM's (and POM's) name of a Deployment's webhook Service: `<deployment>-service`
/// (`certresources.go`, `ServiceName`).
const SERVING_SERVICE_SUFFIX: &str = "-service";

/// Whether the operator can go back to OLM (module documentation).
///
/// # Errors
/// The first reason it cannot.
pub fn judge(input: &GiveBackInput<'_>) -> Result<Owner, Refused> {
    let Some(olm) = input.olm else {
        return Err(Refused::NotAdopted {
            po: input.po.to_owned(),
        });
    };
    let Some(installed) = input.installed else {
        return Err(Refused::NothingInstalled {
            po: input.po.to_owned(),
        });
    };
    if installed != input.requested {
        return Err(Refused::NamesAnother {
            requested: input.requested.to_owned(),
            installed: installed.to_owned(),
        });
    }
    if !olm.found {
        return Err(Refused::SubscriptionMissing {
            subscription: olm.subscription.clone(),
        });
    }
    if olm.installed_csv.as_deref() != Some(input.requested) {
        return Err(Refused::CsvNotAdopted {
            subscription: olm.subscription.clone(),
            adopted: input.requested.to_owned(),
            installed: olm.installed_csv.clone(),
        });
    }
    let Some(uid) = olm.csv_uid.clone().filter(|_| olm.csv_phase.is_some()) else {
        return Err(Refused::CsvGone {
            csv: input.requested.to_owned(),
            namespace: olm.namespace.clone(),
        });
    };
    Ok(Owner {
        csv: input.requested.to_owned(),
        uid,
        namespace: olm.namespace.clone(),
    })
}

/// What giving back writes on one recorded object.
#[derive(Debug, Clone, PartialEq)]
pub enum Restore {
    /// The merge patch (RFC 7386) that hands it back, conditional on its resourceVersion.
    Give(Value),
    /// Not this PlatformOperator's (already given back, or never taken): nothing to write.
    NotOurs,
    /// POM created it for this PlatformOperator (no record): it stays POM's, and deleting the
    /// PlatformOperator deletes it.
    Created,
}

/// What to write on `live` (the object `key`, as the cluster holds it) to give it back to
/// `owner` (module documentation), for PlatformOperator `po` of `package`. `pom_labels` are
/// the owner-label keys POM puts on what it applies.
///
/// # Errors
/// A record that cannot be read, or that names another CSV.
pub fn restore(
    key: &ObjectKey,
    live: &Value,
    (po, package): (&str, &str),
    owner: &Owner,
    pom_labels: &[&str],
) -> Result<Restore, Refused> {
    let labels = live.pointer("/metadata/labels").and_then(Value::as_object);
    let ours = labels
        .and_then(|l| l.get(pom_api::labels::OWNER_PO))
        .and_then(Value::as_str)
        == Some(pom_api::labels::label_value(po).as_str());
    if !ours {
        return Ok(Restore::NotOurs);
    }
    let mut metadata = Map::new();
    if let Some(rv) = live.pointer("/metadata/resourceVersion") {
        metadata.insert("resourceVersion".to_owned(), rv.clone());
    }
    // The namespace adoption was told to take over (OLM never marks it): POM's owner labels
    // out, by the rule cleanup releases a kept install namespace with.
    if key.kind == "Namespace" && key.api_version == "v1" && key.name == owner.namespace {
        let live_labels: std::collections::BTreeMap<String, String> = labels
            .into_iter()
            .flatten()
            .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
            .collect();
        let released = crate::namespace_clash::labels_to_release(&live_labels, po)
            .into_iter()
            .map(|k| (k.to_owned(), Value::Null))
            .collect();
        metadata.insert("labels".to_owned(), Value::Object(released));
        return Ok(Restore::Give(json!({ "metadata": metadata })));
    }
    let mut patch_labels: Map<String, Value> = pom_labels
        .iter()
        .filter(|k| labels.is_some_and(|l| l.contains_key(**k)))
        .map(|k| ((*k).to_owned(), Value::Null))
        .collect();
    let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
    let Some(recorded) = label(pom_api::labels::RELEASED_FROM_OLM) else {
        return Ok(Restore::Created);
    };
    if recorded != pom_api::labels::label_value(&owner.csv) {
        return Err(Refused::RecordOfAnother {
            object: key.to_string(),
            recorded: recorded.to_owned(),
            csv: owner.csv.clone(),
        });
    }
    let marks =
        ReleaseRecord::parse_marks(label(pom_api::labels::RELEASED_OLM_MARKS).unwrap_or_default())
            .map_err(|why| Refused::RecordUnreadable {
                object: key.to_string(),
                why,
            })?;
    for record_label in [
        pom_api::labels::RELEASED_FROM_OLM,
        pom_api::labels::RELEASED_OLM_MARKS,
    ] {
        patch_labels.insert(record_label.to_owned(), Value::Null);
    }
    for mark in &marks {
        let (k, v) = match mark {
            Mark::Owner => (OLM_OWNER.to_owned(), owner.csv.clone()),
            Mark::Namespace => (OLM_OWNER_NAMESPACE.to_owned(), owner.namespace.clone()),
            Mark::Kind => (OLM_OWNER_KIND.to_owned(), CSV_KIND.to_owned()),
            Mark::Component => (component_label(package, &owner.namespace), String::new()),
            Mark::Reference => continue,
        };
        patch_labels.insert(k, Value::String(v));
    }
    metadata.insert("labels".to_owned(), Value::Object(patch_labels));
    if marks.contains(&Mark::Reference) {
        metadata.insert(
            "ownerReferences".to_owned(),
            Value::Array(owner_references(live, owner)),
        );
    }
    Ok(Restore::Give(json!({ "metadata": metadata })))
}

/// Whether deleting the PlatformOperator leaves an object it records in place rather than
/// deleting it (review M3): one adoption released from OLM (it carries the release record,
/// `labels`), while the PlatformOperator still adopts (its first install not recorded: the
/// admin deleted it mid-adoption) or gives the operator back (asked, not yet done). That
/// object is OLM's running operator, which the admin never asked POM to remove; once the
/// adoption is recorded, deleting the PlatformOperator removes what it owns, as any other.
#[must_use]
pub fn kept_at_cleanup(
    adopting: bool,
    giving_back: bool,
    labels: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    (adopting || giving_back)
        && labels.is_some_and(|l| l.contains_key(pom_api::labels::RELEASED_FROM_OLM))
}

/// The object's owner references with OLM's restored: every reference it has now but one to
/// the CSV, then the one OLM writes (`ownerutil.NonBlockingOwner`), to the CSV's current uid.
fn owner_references(live: &Value, owner: &Owner) -> Vec<Value> {
    let mut out: Vec<Value> = live
        .pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|r| !(r["kind"] == CSV_KIND && r["name"] == owner.csv.as_str()))
        .cloned()
        .collect();
    out.push(
        json!({"apiVersion": "operators.coreos.com/v1alpha1", "kind": CSV_KIND,
        "name": owner.csv, "uid": owner.uid, "blockOwnerDeletion": false, "controller": false}),
    );
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn olm() -> OlmSource {
        OlmSource {
            subscription: "ns/op".to_owned(),
            namespace: "ns".to_owned(),
            found: true,
            package: "op".to_owned(),
            installed_csv: Some("op.v1".to_owned()),
            csv_phase: Some("Succeeded".to_owned()),
            csv_uid: Some("u2".to_owned()),
            csv_annotations: std::collections::BTreeSet::new(),
            webhook_configurations: Vec::new(),
            webhook_configurations_beyond_limit: false,
            ca_bundle: None,
        }
    }

    fn owner() -> Owner {
        Owner {
            csv: "op.v1".into(),
            uid: "u2".into(),
            namespace: "ns".into(),
        }
    }

    use crate::adopt::test_key as key;

    fn record() -> ReleaseRecord {
        ReleaseRecord {
            csv: "op.v1".into(),
            marks: Mark::ALL.into(),
        }
    }

    /// An object as adoption left it: POM's labels, the record, another owner's reference.
    fn released() -> Value {
        let mut labels = json!({"platform.openshift.io/owner": "po", "platform.openshift.io/package": "op",
            "platform.openshift.io/bundle": "op.v1", "app.kubernetes.io/managed-by": "platform-operators-manager",
            "olm.managed": "true"});
        for (k, v) in record().labels() {
            labels[k] = json!(v);
        }
        json!({"metadata": {"name": "op", "namespace": "ns", "resourceVersion": "7", "labels": labels,
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "keep"}]}})
    }

    const POM: &[&str] = &[
        "platform.openshift.io/owner",
        "platform.openshift.io/package",
        "platform.openshift.io/bundle",
        "app.kubernetes.io/managed-by",
    ];

    #[test]
    fn the_csv_to_give_back_is_the_installed_bundle_of_an_adopting_po() {
        let po = |adopt: bool, installed: Option<&str>| {
            let mut spec = serde_json::json!({"package": {"name": "op"}});
            if adopt {
                spec["adoptFrom"] =
                    serde_json::json!({"subscription": {"namespace": "ns", "name": "op"}});
            }
            let mut po: pom_api::PlatformOperator = serde_json::from_value(serde_json::json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": "op"}, "spec": spec}))
            .unwrap();
            if let Some(name) = installed {
                po.status = Some(
                    serde_json::from_value(serde_json::json!({
                    "installedBundle": {"name": name, "version": "1.0.0"}}))
                    .unwrap(),
                );
            }
            po
        };
        assert_eq!(csv_to_give_back(&po(true, Some("op.v1"))), Ok("op.v1"));
        assert!(matches!(
            csv_to_give_back(&po(false, Some("op.v1"))),
            Err(Refused::NotAdopted { .. })
        ));
        assert!(matches!(
            csv_to_give_back(&po(true, None)),
            Err(Refused::NothingInstalled { .. })
        ));
    }

    #[test]
    fn a_webhook_bundle_is_refused_with_what_to_do() {
        let po = |objects: &[(&str, &str, Option<&str>, &str)]| -> pom_api::PlatformOperator {
            let objects: Vec<Value> = objects
                .iter()
                .map(
                    |(v, k, ns, n)| json!({"apiVersion": v, "kind": k, "namespace": ns, "name": n}),
                )
                .collect();
            serde_json::from_value(json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": "op"},
                "spec": {"package": {"name": "op"},
                    "adoptFrom": {"subscription": {"namespace": "ns", "name": "op"}}},
                "status": {"installedBundle": {"name": "op.v1", "version": "1.0.0"},
                    "inventory": [{"bundle": "op.v1", "objects": objects}]}}))
            .unwrap()
        };
        let deployment = ("apps/v1", "Deployment", Some("ns"), "op");
        let service = ("v1", "Service", Some("ns"), "op-service");
        let vwc = (
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
            "vop",
        );
        let mwc = (
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfiguration",
            None,
            "mop",
        );
        let cert = ("v1", "Secret", Some("ns"), "op-service-cert");
        // (case, inventory, refused naming)
        let plain_service = ("v1", "Service", Some("ns"), "op-metrics");
        let cases: Vec<(&str, Vec<_>, Option<&str>)> = vec![
            ("no webhook", vec![deployment, plain_service], None),
            (
                "the hand-over waiting: the serving Service of a Deployment",
                vec![deployment, service],
                Some("Service/op-service"),
            ),
            (
                "a validating configuration",
                vec![deployment, vwc],
                Some("ValidatingWebhookConfiguration/vop"),
            ),
            (
                "a mutating configuration",
                vec![mwc],
                Some("MutatingWebhookConfiguration/mop"),
            ),
            (
                "a conversion webhook only: the serving Secret of a Service",
                vec![deployment, service, cert],
                Some("Secret/op-service-cert"),
            ),
            (
                "a Secret named like one, no such Service",
                vec![deployment, cert],
                None,
            ),
            (
                "a Service named like one, no such Deployment",
                vec![service],
                None,
            ),
        ];
        for (case, objects, refused) in cases {
            let po = po(&objects);
            let got = csv_to_give_back(&po);
            match refused {
                None => assert_eq!(got, Ok("op.v1"), "{case}"),
                Some(object) => {
                    let Err(err @ Refused::WebhookBundle { .. }) = got else {
                        panic!("{case}: {got:?}");
                    };
                    let text = err.to_string();
                    assert!(text.contains(object), "{case}: {text}");
                    assert!(
                        text.contains("remove the platform.openshift.io/give-back annotation"),
                        "{case}: {text}"
                    );
                }
            }
        }
    }

    #[test]
    fn the_give_back_table() {
        /// name, the annotation, the installed bundle, OLM's objects, the verdict.
        type Case<'a> = (
            &'a str,
            &'a str,
            Option<&'a str>,
            Option<OlmSource>,
            Result<(), &'a str>,
        );
        let cases: Vec<Case<'_>> = vec![
            ("as adopted", "op.v1", Some("op.v1"), Some(olm()), Ok(())),
            (
                "never adopted",
                "op.v1",
                Some("op.v1"),
                None,
                Err("NotAdopted"),
            ),
            (
                "names another CSV",
                "op.v0",
                Some("op.v1"),
                Some(olm()),
                Err("NamesAnother"),
            ),
            (
                "moved since adoption",
                "op.v1",
                Some("op.v2"),
                Some(olm()),
                Err("NamesAnother"),
            ),
            (
                "nothing installed",
                "op.v1",
                None,
                Some(olm()),
                Err("NothingInstalled"),
            ),
            (
                "the Subscription is gone",
                "op.v1",
                Some("op.v1"),
                Some(OlmSource {
                    found: false,
                    ..olm()
                }),
                Err("SubscriptionMissing"),
            ),
            (
                "OLM installed another CSV since",
                "op.v1",
                Some("op.v1"),
                Some(OlmSource {
                    installed_csv: Some("op.v2".into()),
                    ..olm()
                }),
                Err("CsvNotAdopted"),
            ),
            (
                "the CSV is gone",
                "op.v1",
                Some("op.v1"),
                Some(OlmSource {
                    csv_phase: None,
                    csv_uid: None,
                    ..olm()
                }),
                Err("CsvGone"),
            ),
        ];
        for (name, requested, installed, olm, want) in cases {
            let got = judge(&GiveBackInput {
                po: "po",
                requested,
                installed,
                olm: olm.as_ref(),
            });
            match (want, got) {
                (Ok(()), Ok(o)) => assert_eq!(o, owner(), "{name}"),
                (Err(variant), Err(err)) => {
                    assert!(format!("{err:?}").starts_with(variant), "{name}: {err:?}");
                    assert!(!err.to_string().is_empty());
                }
                (want, got) => panic!("{name}: wanted {want:?}, got {got:?}"),
            }
        }
    }

    #[test]
    fn a_released_object_gets_olms_marks_back_with_the_csvs_current_uid() {
        let k = key("apps/v1", "Deployment", Some("ns"), "op");
        let Restore::Give(patch) = restore(&k, &released(), ("po", "op"), &owner(), POM).unwrap()
        else {
            panic!("not given back");
        };
        assert_eq!(
            patch,
            json!({"metadata": {"resourceVersion": "7",
                "labels": {"platform.openshift.io/owner": null, "platform.openshift.io/package": null,
                    "platform.openshift.io/bundle": null, "app.kubernetes.io/managed-by": null,
                    "platform.openshift.io/released-from-olm": null, "platform.openshift.io/released-olm-marks": null,
                    "olm.owner": "op.v1", "olm.owner.namespace": "ns",
                    "olm.owner.kind": "ClusterServiceVersion", "operators.coreos.com/op.ns": ""},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "keep"},
                    {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion",
                     "name": "op.v1", "uid": "u2", "controller": false, "blockOwnerDeletion": false}]}})
        );
    }

    #[test]
    fn labels_only_records_restore_no_reference() {
        let mut live = released();
        live["metadata"]["labels"]["platform.openshift.io/released-olm-marks"] = json!("component");
        let k = key(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            None,
            "a.b",
        );
        let Restore::Give(patch) = restore(&k, &live, ("po", "op"), &owner(), POM).unwrap() else {
            panic!("not given back");
        };
        assert!(
            patch["metadata"].get("ownerReferences").is_none(),
            "{patch}"
        );
        let labels = patch["metadata"]["labels"].as_object().unwrap();
        assert_eq!(labels["operators.coreos.com/op.ns"], json!(""));
        assert!(!labels.contains_key("olm.owner"), "{patch}");
    }

    #[test]
    fn what_is_not_given_back() {
        let k = key("v1", "ServiceAccount", Some("ns"), "op");
        // POM created it: no record.
        let mut created = released();
        let labels = created["metadata"]["labels"].as_object_mut().unwrap();
        labels.remove("platform.openshift.io/released-from-olm");
        labels.remove("platform.openshift.io/released-olm-marks");
        assert_eq!(
            restore(&k, &created, ("po", "op"), &owner(), POM).unwrap(),
            Restore::Created
        );
        // Already given back (or another PO's): no owner label of this PO.
        let mut given = released();
        given["metadata"]["labels"] = json!({"olm.owner": "op.v1"});
        assert_eq!(
            restore(&k, &given, ("po", "op"), &owner(), POM).unwrap(),
            Restore::NotOurs
        );
        assert_eq!(
            restore(&k, &released(), ("other", "op"), &owner(), POM).unwrap(),
            Restore::NotOurs
        );
        // The install namespace: POM's labels out, nothing of OLM's in.
        let ns = key("v1", "Namespace", None, "ns");
        let live = json!({"metadata": {"name": "ns", "resourceVersion": "3",
            "labels": {"platform.openshift.io/owner": "po", "kubernetes.io/metadata.name": "ns"}}});
        assert_eq!(
            restore(&ns, &live, ("po", "op"), &owner(), POM).unwrap(),
            Restore::Give(json!({"metadata": {"resourceVersion": "3",
                "labels": {"platform.openshift.io/owner": null}}}))
        );
        // Another namespace POM created: no record, so POM's.
        let other = key("v1", "Namespace", None, "other");
        assert_eq!(
            restore(&other, &live, ("po", "op"), &owner(), POM).unwrap(),
            Restore::Created
        );
    }

    #[test]
    fn what_a_deletion_mid_adoption_or_mid_give_back_leaves() {
        let released: std::collections::BTreeMap<String, String> = [(
            "platform.openshift.io/released-from-olm".to_owned(),
            "op.v1".to_owned(),
        )]
        .into();
        let created: std::collections::BTreeMap<String, String> =
            [("platform.openshift.io/owner".to_owned(), "po".to_owned())].into();
        for (adopting, giving_back, labels, kept) in [
            (true, false, Some(&released), true),
            (false, true, Some(&released), true),
            (true, true, Some(&released), true),
            (false, false, Some(&released), false),
            (true, false, Some(&created), false),
            (false, true, None, false),
        ] {
            assert_eq!(
                kept_at_cleanup(adopting, giving_back, labels),
                kept,
                "{adopting} {giving_back} {labels:?}"
            );
        }
    }

    #[test]
    fn records_are_read_bounded_and_must_name_the_csv() {
        let k = key("v1", "ServiceAccount", Some("ns"), "op");
        let with = |from: &str, marks: &str| {
            let mut live = released();
            live["metadata"]["labels"]["platform.openshift.io/released-from-olm"] = json!(from);
            live["metadata"]["labels"]["platform.openshift.io/released-olm-marks"] = json!(marks);
            restore(&k, &live, ("po", "op"), &owner(), POM)
        };
        for (name, from, marks, want) in [
            (
                "an unknown mark",
                "op.v1",
                "owner.other",
                "RecordUnreadable",
            ),
            (
                "too long",
                "op.v1",
                &"owner.".repeat(20),
                "RecordUnreadable",
            ),
            ("another CSV", "op.v0", "owner", "RecordOfAnother"),
        ] {
            let err = with(from, marks).unwrap_err();
            assert!(format!("{err:?}").starts_with(want), "{name}: {err:?}");
        }
        assert!(
            matches!(with("op.v1", ""), Ok(Restore::Give(_))),
            "no marks: POM's labels out only"
        );
        let [(_, csv), (_, marks)] = record().labels();
        assert_eq!(csv, "op.v1");
        assert_eq!(ReleaseRecord::parse_marks(&marks), Ok(Mark::ALL.into()));
    }
}
