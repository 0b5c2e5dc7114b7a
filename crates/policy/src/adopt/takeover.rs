//! Step 4 of adoption (issue 36 item 2), pure: before the manager writes anything to an
//! installation OLM v0 made, [`prove`] shows that what runs is what POM would apply, and says
//! what adoption then takes over, creates and releases from OLM.
//!
//! What is proven, object by object, over exactly the objects the manager's own prepare
//! rendered (the Subscription's installed ClusterServiceVersion being the bundle POM would
//! install):
//! - every rendered object that exists is OLM's for that CSV (its `olm.owner*` labels, an
//!   owner reference to that CSV, its uid, on an object of its namespace, or, for CRDs, the
//!   operator's component label), or already this PlatformOperator's (an adoption a crash cut
//!   short resumes);
//! - every rendered Deployment and ServiceAccount exists: OLM created them before the CSV
//!   could succeed, so one missing means OLM runs the operator under other names, and POM
//!   creating it would run a second copy beside OLM's;
//! - every rendered Deployment has the running one's selector and a pod template the apply
//!   leaves as it is: every field POM sets holds the same value on the cluster (lists compared
//!   whole), and beyond those the cluster's template carries only what is allowed, nothing
//!   else (an allowlist, as anything else is configuration adoption would keep and no longer
//!   manage): OLM's own annotations (`olm.*`, the CSV's annotations, which OLM copies there as
//!   POM does) and fields holding exactly the value the API server writes when they are left
//!   out (`imagePullPolicy`, `dnsPolicy`, a probe's `periodSeconds`, ...; `server_default`):
//!   server-side apply leaves fields it does not set to their manager, and those are no one's
//!   configuration.
//!
//! Then [`release_patch`] is the one write that moves an object from OLM to POM: conditional
//! on the resourceVersion proven, it removes OLM's owner references (to the CSV, so that
//! deleting the CSV garbage-collects nothing) and OLM's owner and component labels (so OLM's
//! label-based cleanup finds nothing), and adds POM's owner labels, in one request: no object
//! is ever nobody's (or both's) between two writes.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::ObjectKey;
use super::give_back::{Mark, ReleaseRecord};
use super::webhooks::{
    self, OLM_CA_HASH_ANNOTATION, OlmWebhookConfiguration, Retire, UnreadRelease,
};

/// OLM's owner labels on what it generates for a CSV (`pkg/lib/ownerutil`).
pub const OLM_OWNER: &str = "olm.owner";
pub const OLM_OWNER_NAMESPACE: &str = "olm.owner.namespace";
pub const OLM_OWNER_KIND: &str = "olm.owner.kind";
/// The prefix of the operator's component label, `operators.coreos.com/<package>.<namespace>`.
pub const COMPONENT_LABEL_PREFIX: &str = "operators.coreos.com/";
/// The kind OLM's owner references name.
pub const CSV_KIND: &str = "ClusterServiceVersion";
/// The most objects one adoption proves: a bundle renders tens; more is not a bundle POM
/// would install either, and bounds the work of one reconcile.
pub const MAX_ADOPTED_OBJECTS: usize = 1024;

/// Kinds OLM creates for a Succeeded CSV before anything runs (its install strategy's
/// Deployments and the ServiceAccounts they run as): one POM renders that is not on the cluster
/// means OLM runs the operator under other names, and creating it would start a second copy
/// beside OLM's.
const MUST_EXIST: &[(&str, &str)] = &[("apps/v1", "Deployment"), ("v1", "ServiceAccount")];

/// What OLM's objects say about the installation the PlatformOperator names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OlmSource {
    /// `namespace/name` of the Subscription (`spec.adoptFrom`).
    pub subscription: String,
    pub namespace: String,
    /// Whether the Subscription exists.
    pub found: bool,
    /// The package it installs (`spec.name`).
    pub package: String,
    /// `status.installedCSV`.
    pub installed_csv: Option<String>,
    /// That CSV's `status.phase`; `None` when the CSV is not there.
    pub csv_phase: Option<String>,
    /// That CSV's `metadata.uid`: OLM's owner references name it, and only a reference with
    /// this uid is to this CSV (not to an earlier one of the same name).
    pub csv_uid: Option<String>,
    /// That CSV's annotation keys (OLM copies them onto the pod templates).
    pub csv_annotations: BTreeSet<String>,
    /// The webhook configurations OLM created for that CSV (its owner labels name it).
    pub webhook_configurations: Vec<OlmWebhookConfiguration>,
    /// The list of them stopped at [`webhooks::MAX_OLM_WEBHOOK_CONFIGURATIONS`] of a kind with
    /// more left: `webhook_configurations` is not all of them, and adoption stops.
    pub webhook_configurations_beyond_limit: bool,
    /// OLM's CA (PEM), as its webhook configurations or its CRDs' conversion trust it: public
    /// data, read so that POM's webhooks trust it too while the operator may still serve
    /// OLM's certificate ([`webhooks::trusted_olm_ca`]).
    pub ca_bundle: Option<String>,
}

/// One object the bundle renders, with what the cluster holds under its identity.
#[derive(Debug, Clone, Copy)]
pub struct Pair<'a> {
    pub key: &'a ObjectKey,
    pub desired: &'a Value,
    /// `None`: absent (or a Secret, which the manager never reads).
    pub live: Option<&'a Value>,
}

impl<'a> Pair<'a> {
    /// The pairs of `view`: each object to apply, as rendered and as read.
    #[must_use]
    pub fn all(view: &'a [(ObjectKey, Value, Option<Value>)]) -> Vec<Self> {
        view.iter()
            .map(|(key, desired, live)| Self {
                key,
                desired,
                live: live.as_ref(),
            })
            .collect()
    }
}

/// What [`prove`] judges.
#[derive(Debug, Clone, Copy)]
pub struct TakeOverInput<'a> {
    /// The adopting PlatformOperator, and the package it names.
    pub po: &'a str,
    pub package: &'a str,
    /// The bundle POM would apply.
    pub bundle: &'a str,
    pub olm: &'a OlmSource,
    pub objects: &'a [Pair<'a>],
    /// The shipped admission guard is in force ([`super::guard`]).
    pub guarded: bool,
    /// The install namespace as read (`None`: absent): adoption labels it as this
    /// PlatformOperator's, so under the guard it must be handed over too.
    pub install_namespace: Option<&'a Value>,
}

/// Why an adoption stops, changing nothing: each message names what differs and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotProven {
    #[error(
        "Subscription {subscription} (spec.adoptFrom) does not exist: name the Subscription OLM installed the operator with, or remove spec.adoptFrom to install anew"
    )]
    SubscriptionMissing { subscription: String },
    #[error(
        "Subscription {subscription} installs package {olm}, not {po}: name the Subscription of this package in spec.adoptFrom"
    )]
    PackageDiffers {
        subscription: String,
        olm: String,
        po: String,
    },
    #[error(
        "Subscription {subscription} has installed nothing (status.installedCSV is empty): let OLM finish, then adoption resumes"
    )]
    NotInstalled { subscription: String },
    #[error(
        "ClusterServiceVersion {csv} is {}, not Succeeded: POM adopts only what runs as OLM intended; fix the install, then adoption resumes",
        phase.as_deref().map_or_else(|| "missing".to_owned(), |p| format!("in phase {p:?}"))
    )]
    CsvNotSucceeded { csv: String, phase: Option<String> },
    #[error(
        "OLM installed {csv} but this PlatformOperator would install {bundle}: adopting would move the operator; pin spec.package.versionRange to the installed version (`pomctl adopt --subscription` writes it)"
    )]
    BundleDiffers { csv: String, bundle: String },
    #[error(
        "{object} exists but is not OLM's for {csv} (no olm.owner label or owner reference naming it): adoption takes over only what OLM installed; remove it or hand it over with the platform.openshift.io/adopt annotation"
    )]
    NotOlms { object: ObjectKey, csv: String },
    #[error(
        "Deployment {deployment}: the running spec.selector differs from the bundle's (an immutable field): POM cannot take it over without replacing it; reinstall instead"
    )]
    SelectorDiffers { deployment: String },
    #[error(
        "Deployment {deployment}: the running pod template differs from what POM would apply at {path} (running: {running}; POM: {pom}), so taking it over would restart the operator; undo the change on the Deployment (or set spec.config to it) and adoption resumes"
    )]
    PodTemplateDiffers {
        deployment: String,
        path: String,
        running: String,
        pom: String,
    },
    #[error(
        "{object} is not on the cluster although ClusterServiceVersion {csv} is Succeeded: OLM runs the operator under other names than POM renders, and creating it would start a second copy beside OLM's; check that the Catalog's bundle is the one OLM installed, or uninstall with OLM and remove spec.adoptFrom to install anew"
    )]
    RenderedMissing { object: ObjectKey, csv: String },
    #[error("the bundle renders {count} objects, more than the {limit} one adoption proves")]
    TooManyObjects { count: usize, limit: usize },
    #[error(
        "more than {limit} Validating- or MutatingWebhookConfigurations carry OLM's owner labels for {csv}: adoption reads at most {limit} of a kind (a bundle renders a few); delete the ones left over, then adoption resumes"
    )]
    TooManyWebhookConfigurations { csv: String, limit: usize },
    #[error(
        "ClusterServiceVersion {csv} has no metadata.uid: nothing proves that {object}, which POM never reads, is OLM's for it, so it cannot be released (and left to OLM, the garbage collector would delete it with the CSV); adoption resumes once the CSV is read whole"
    )]
    CsvUidUnknown { csv: String, object: ObjectKey },
    #[error(
        "{object} is OLM's webhook configuration for description {generate_name:?}, which the bundle POM would apply does not render: once POM serves its own certificate it would call the webhook trusting a CA that no longer signs; check that the Catalog's bundle is the one OLM installed, or delete it if it is left over"
    )]
    WebhookConfigurationUnmatched {
        object: ObjectKey,
        generate_name: String,
    },
    #[error(
        "the admission guard refuses the manager's change of {} object(s) OLM made that carry no platform.openshift.io/adopt annotation ({}): hand them to this PlatformOperator, and adoption resumes: {commands}",
        objects.len(), objects.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
    )]
    AdmissionGuard {
        objects: Vec<ObjectKey>,
        commands: String,
    },
}

/// What adoption does once proven.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TakeOver {
    /// On the cluster and rendered: POM takes them over.
    pub take_over: Vec<ObjectKey>,
    /// Rendered only: POM creates them (its RBAC names, its OperatorCondition wiring).
    pub create: Vec<ObjectKey>,
    /// The objects to release from OLM, with what to remove.
    pub releases: Vec<Release>,
    /// The webhook serving Secrets released unread ([`super::webhooks`]).
    pub unread_releases: Vec<UnreadRelease>,
    /// OLM's webhook configurations POM's replace, deleted after the apply.
    pub retire: Vec<Retire>,
}

/// What OLM marks on one object adoption takes over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    pub key: ObjectKey,
    /// The resourceVersion proven: the patch applies to exactly that object, or fails and the
    /// next reconcile proves again.
    pub resource_version: Option<String>,
    /// The owner references without OLM's (to its CSVs); `None` when OLM had none.
    pub owner_references: Option<Vec<Value>>,
    /// OLM's owner and component labels present on it.
    pub labels: Vec<String>,
    /// What OLM marked it with, left on it (`platform.openshift.io/released-from-olm`) so that
    /// giving the operator back restores exactly that ([`super::give_back`]).
    pub record: ReleaseRecord,
}

/// Proves the running installation is what POM would apply (module documentation).
///
/// # Errors
/// The first difference found, as the reason adoption stops.
pub fn prove(input: &TakeOverInput<'_>) -> Result<TakeOver, NotProven> {
    let olm = input.olm;
    let csv = installed_csv(input)?;
    let owner = OlmOwner {
        csv,
        csv_uid: olm.csv_uid.as_deref(),
        namespace: &olm.namespace,
        component: component_label(input.package, &olm.namespace),
    };
    let mut out = TakeOver::default();
    // What the manager would change that the admission guard refuses (OLM's, not annotated).
    let mut unannotated: Vec<ObjectKey> = Vec::new();
    for pair in input.objects {
        if pair.live.is_none() && webhooks::is_serving_secret(pair.key, input.objects) {
            // OLM's serving Secret, never read: released unread (the API server refuses the
            // release unless it is the CSV's), then POM writes its own certificate into it
            // (module `webhooks`).
            out.unread_releases.push(webhooks::unread_release(
                pair.key,
                csv,
                olm.csv_uid.as_deref(),
            )?);
            out.create.push(pair.key.clone());
            continue;
        }
        let Some(live) = pair.live else {
            let key = pair.key;
            if MUST_EXIST
                .iter()
                .any(|(v, k)| key.api_version == *v && key.kind == *k)
            {
                return Err(NotProven::RenderedMissing {
                    object: key.clone(),
                    csv: csv.to_owned(),
                });
            }
            out.create.push(pair.key.clone());
            continue;
        };
        let release = owner.release_of(pair.key, live);
        if release.is_some() && !super::guard::handed_over(live) {
            unannotated.push(pair.key.clone());
        }
        if release.is_none() && !is_pos(live, input.po) {
            return Err(NotProven::NotOlms {
                object: pair.key.clone(),
                csv: csv.to_owned(),
            });
        }
        if pair.key.kind == "Deployment" {
            same_pods(pair.key, pair.desired, live, &olm.csv_annotations)?;
        }
        out.take_over.push(pair.key.clone());
        out.releases.extend(release);
    }
    out.retire = webhooks::retire(&olm.webhook_configurations, input.objects)?;
    unannotated.extend(
        olm.webhook_configurations
            .iter()
            .filter(|c| !c.handed_over)
            .map(|c| c.key.clone()),
    );
    if let Some(namespace) = input
        .install_namespace
        .filter(|ns| super::guard::needs(ns, input.po))
    {
        unannotated.push(ObjectKey {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            namespace: None,
            name: namespace
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or(&olm.namespace)
                .to_owned(),
        });
    }
    if input.guarded && !unannotated.is_empty() {
        // The serving Secrets are never read, so whether they carry the annotation is not
        // known: listed with the rest, so one round of annotating hands everything over (their
        // release runs first, so a refusal of theirs still writes nothing else).
        unannotated.extend(out.unread_releases.iter().map(|r| r.key.clone()));
        return Err(NotProven::AdmissionGuard {
            commands: super::guard::listed_commands(&unannotated, input.po),
            objects: unannotated,
        });
    }
    Ok(out)
}

/// The CSV the Subscription installed, when it is the PO's package and bundle, has succeeded,
/// and has no more objects than adoption reads: what must hold before any object is compared.
fn installed_csv<'a>(input: &TakeOverInput<'a>) -> Result<&'a str, NotProven> {
    let olm = input.olm;
    if !olm.found {
        return Err(NotProven::SubscriptionMissing {
            subscription: olm.subscription.clone(),
        });
    }
    if olm.package != input.package {
        return Err(NotProven::PackageDiffers {
            subscription: olm.subscription.clone(),
            olm: olm.package.clone(),
            po: input.package.to_owned(),
        });
    }
    let Some(csv) = olm.installed_csv.as_deref().filter(|c| !c.is_empty()) else {
        return Err(NotProven::NotInstalled {
            subscription: olm.subscription.clone(),
        });
    };
    if olm.csv_phase.as_deref() != Some(pom_api::olm::v0_install::CSV_SUCCEEDED) {
        return Err(NotProven::CsvNotSucceeded {
            csv: csv.to_owned(),
            phase: olm.csv_phase.clone(),
        });
    }
    if csv != input.bundle {
        return Err(NotProven::BundleDiffers {
            csv: csv.to_owned(),
            bundle: input.bundle.to_owned(),
        });
    }
    if input.objects.len() > MAX_ADOPTED_OBJECTS {
        return Err(NotProven::TooManyObjects {
            count: input.objects.len(),
            limit: MAX_ADOPTED_OBJECTS,
        });
    }
    if olm.webhook_configurations_beyond_limit {
        return Err(NotProven::TooManyWebhookConfigurations {
            csv: csv.to_owned(),
            limit: webhooks::MAX_OLM_WEBHOOK_CONFIGURATIONS,
        });
    }
    Ok(csv)
}

/// Whether `po` is adopting: it names an OLM v0 installation (`spec.adoptFrom`) and its status
/// records nothing installed yet. Once its first apply is recorded it lives as any other.
#[must_use]
pub fn adopting(po: &pom_api::PlatformOperator) -> Option<&pom_api::platform_operator::AdoptFrom> {
    let installed = po
        .status
        .as_ref()
        .is_some_and(|s| s.installed_bundle.is_some());
    po.spec.adopt_from.as_ref().filter(|_| !installed)
}

/// Whether `po` adopted an OLM v0 installation and its first move, the adoption, has not
/// settled: OLM's webhook configurations may still be left to retire once POM's are
/// registered ([`webhooks::retire_now`]), so the manager keeps reading OLM's objects.
#[must_use]
pub fn handing_over(po: &pom_api::PlatformOperator) -> bool {
    po.spec.adopt_from.is_some()
        && adopting(po).is_none()
        && po
            .status
            .as_ref()
            .and_then(|s| s.active_hop.as_ref())
            .is_some_and(|hop| hop.from.is_none() && !hop.settled)
}

/// Whether an object carries OLM's marks of the installation in `namespace` of `package`: its
/// owner labels naming a CSV of that namespace, an owner reference to a CSV, or the
/// operator's component label. The manager's prepare reads such objects as the adopted
/// installation's instead of refusing them; [`prove`] then judges each one exactly (the CSV
/// the Subscription installed) before anything is written.
#[must_use]
pub fn marked_by_olm<'a>(
    labels: Option<&BTreeMap<String, String>>,
    mut owner_kinds: impl Iterator<Item = (&'a str, &'a str)>,
    namespace: &str,
    package: &str,
) -> bool {
    let label = |k: &str| labels.and_then(|l| l.get(k)).map(String::as_str);
    (label(OLM_OWNER).is_some() && label(OLM_OWNER_NAMESPACE) == Some(namespace))
        || label(&component_label(package, namespace)).is_some()
        || owner_kinds.any(|(api_version, kind)| {
            kind == CSV_KIND && api_version.starts_with("operators.coreos.com/")
        })
}

/// The operator's component label, as OLM's Operator API names it.
#[must_use]
pub fn component_label(package: &str, namespace: &str) -> String {
    format!("{COMPONENT_LABEL_PREFIX}{package}.{namespace}")
}

/// The CSV an installation's objects belong to.
struct OlmOwner<'a> {
    csv: &'a str,
    csv_uid: Option<&'a str>,
    namespace: &'a str,
    component: String,
}

impl OlmOwner<'_> {
    /// What marks `live` as OLM's for this CSV, `None` when nothing does.
    fn release_of(&self, key: &ObjectKey, live: &Value) -> Option<Release> {
        let labels = live.pointer("/metadata/labels").and_then(Value::as_object);
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let labelled = label(OLM_OWNER) == Some(self.csv)
            && label(OLM_OWNER_NAMESPACE) == Some(self.namespace);
        let component = label(&self.component).is_some();
        let references: Vec<&Value> = live
            .pointer("/metadata/ownerReferences")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .collect();
        // A reference to a CSV of this name: released whatever its uid (one to an earlier CSV
        // of the name would have the garbage collector delete the object once POM owns it).
        let is_olms = |r: &&Value| {
            r["kind"] == CSV_KIND
                && r["name"] == self.csv
                && r["apiVersion"]
                    .as_str()
                    .is_some_and(|v| v.starts_with("operators.coreos.com/"))
        };
        // What proves the object OLM's: a reference to exactly this CSV (its uid), on an object
        // in the CSV's namespace: the garbage collector honours no other (a cluster-scoped or
        // other-namespace dependent of a namespaced owner), so OLM writes no other.
        let to_this_csv =
            |r: &&Value| is_olms(r) && self.csv_uid.is_some_and(|uid| r["uid"] == uid);
        let owned_by_csv =
            key.namespace.as_deref() == Some(self.namespace) && references.iter().any(to_this_csv);
        let strip = references.iter().any(is_olms);
        // A CRD carries only the component label (OLM never owns CRDs by label).
        let crd_of_operator = key.kind == "CustomResourceDefinition" && component;
        if !(labelled || owned_by_csv || crd_of_operator) {
            return None;
        }
        let mut removed: Vec<String> = [OLM_OWNER, OLM_OWNER_NAMESPACE, OLM_OWNER_KIND]
            .iter()
            .filter(|k| label(k).is_some())
            .map(|k| (*k).to_owned())
            .collect();
        if component {
            removed.push(self.component.clone());
        }
        let present = |k: &str| label(k).is_some();
        let record = ReleaseRecord {
            csv: self.csv.to_owned(),
            marks: [
                (present(OLM_OWNER), Mark::Owner),
                (present(OLM_OWNER_NAMESPACE), Mark::Namespace),
                (present(OLM_OWNER_KIND), Mark::Kind),
                (component, Mark::Component),
                (strip, Mark::Reference),
            ]
            .into_iter()
            .filter_map(|(has, mark)| has.then_some(mark))
            .collect(),
        };
        Some(Release {
            record,
            key: key.clone(),
            resource_version: live
                .pointer("/metadata/resourceVersion")
                .and_then(Value::as_str)
                .map(str::to_owned),
            owner_references: strip.then(|| {
                references
                    .iter()
                    .filter(|r| !is_olms(r))
                    .map(|r| (*r).clone())
                    .collect()
            }),
            labels: removed,
        })
    }
}

/// Whether `live` carries this PlatformOperator's owner label (an adoption resumed).
fn is_pos(live: &Value, po: &str) -> bool {
    live.pointer("/metadata/labels")
        .and_then(|l| l.get(pom_api::labels::OWNER_PO))
        .and_then(Value::as_str)
        == Some(pom_api::labels::label_value(po).as_str())
}

/// The rendered Deployment's selector and pod template, against the running one's.
fn same_pods(
    key: &ObjectKey,
    desired: &Value,
    live: &Value,
    csv_annotations: &BTreeSet<String>,
) -> Result<(), NotProven> {
    let deployment = format!(
        "{}/{}",
        key.namespace.as_deref().unwrap_or_default(),
        key.name
    );
    let selector = |v: &Value| v.pointer("/spec/selector").cloned().unwrap_or(Value::Null);
    if !same(&selector(desired), &selector(live)) {
        return Err(NotProven::SelectorDiffers { deployment });
    }
    let template = |v: &Value| v.pointer("/spec/template").cloned().unwrap_or(json!({}));
    match template_difference(&template(desired), &template(live), csv_annotations) {
        None => Ok(()),
        Some(d) => Err(NotProven::PodTemplateDiffers {
            deployment,
            path: format!("spec.template{}", d.path),
            running: d.running,
            pom: d.pom,
        }),
    }
}

/// Where two pod templates differ.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// `.spec.containers[0].image`, ...
    pub path: String,
    pub running: String,
    pub pom: String,
}

/// The first place where the running pod template `live` would change under POM's `pom`, or
/// carries anything POM does not render (module documentation). An allowlist: beyond POM's
/// fields the running template may carry only OLM's own annotations and what the API server
/// writes when a field is left out (`server_default`); anything else (an admin's `resources`,
/// probes, `securityContext`, tolerations, ...) is configuration adoption would keep and no
/// longer manage, so it is a difference, named by its path.
#[must_use]
pub fn template_difference(
    pom: &Value,
    live: &Value,
    csv_annotations: &BTreeSet<String>,
) -> Option<Difference> {
    let extra_allowed = |path: &[String], value: &Value, parent: &Map<String, Value>| -> bool {
        let p: Vec<&str> = path.iter().map(String::as_str).collect();
        match p.as_slice() {
            ["metadata", "annotations", key] => {
                key.starts_with("olm.")
                    || *key == OLM_CA_HASH_ANNOTATION
                    || csv_annotations.contains(*key)
            }
            _ => server_default(&p, value, parent),
        }
    };
    first_difference(pom, live, &mut Vec::new(), &extra_allowed)
}

/// The containers of a pod spec (ephemeral ones are never in a template).
const CONTAINER_LISTS: &[&str] = &["containers", "initContainers"];
/// The probes of a container, each defaulted alike (`SetDefaults_Probe`).
const PROBES: &[&str] = &["livenessProbe", "readinessProbe", "startupProbe"];
/// The volume sources whose `defaultMode` the API server sets (0644).
const MODED_VOLUMES: &[&str] = &["secret", "configMap", "downwardAPI", "projected"];

/// Whether `value` at `path` of a pod template (absent from what POM renders) is exactly what
/// the API server writes there when the field is left out, for an apps/v1 Deployment's
/// template (Kubernetes `pkg/apis/core/v1` defaults: `SetDefaults_PodSpec`, `_Container`,
/// `_Probe`, `_HTTPGetAction`, `_ObjectFieldSelector`, the volume sources', and the declarative
/// `+default` of a container port's protocol and a gRPC probe's service). `parent` is the
/// object holding the field. `SetDefaults_Pod` (`enableServiceLinks`, requests from limits)
/// applies to Pods only, never to templates, so those are differences. Empty values (`{}`,
/// `[]`, null: the pod `securityContext`, a container's `resources`) are "none" and never
/// reach here.
fn server_default(path: &[&str], value: &Value, parent: &Map<String, Value>) -> bool {
    let is = |want: &Value| same(value, want);
    let container = |list: &str| CONTAINER_LISTS.contains(&list);
    match path {
        ["spec", "dnsPolicy"] => is(&json!("ClusterFirst")),
        ["spec", "restartPolicy"] => is(&json!("Always")),
        ["spec", "schedulerName"] => is(&json!("default-scheduler")),
        ["spec", "terminationGracePeriodSeconds"] => is(&json!(30)),
        // The deprecated field, written from serviceAccountName by the conversion.
        ["spec", "serviceAccount"] => parent.get("serviceAccountName").is_some_and(&is),
        ["spec", list, _, "imagePullPolicy"] if container(list) => is(&json!(default_pull_policy(
            parent.get("image").and_then(Value::as_str).unwrap_or("")
        ))),
        ["spec", list, _, "terminationMessagePath"] if container(list) => {
            is(&json!("/dev/termination-log"))
        }
        ["spec", list, _, "terminationMessagePolicy"] if container(list) => is(&json!("File")),
        ["spec", list, _, "ports", _, "protocol"] if container(list) => is(&json!("TCP")),
        ["spec", list, _, probe, field] if container(list) && PROBES.contains(probe) => {
            match *field {
                "timeoutSeconds" | "successThreshold" => is(&json!(1)),
                "periodSeconds" => is(&json!(10)),
                "failureThreshold" => is(&json!(3)),
                _ => false,
            }
        }
        // In a probe or a lifecycle handler.
        ["spec", list, .., "httpGet", "path"] if container(list) => is(&json!("/")),
        ["spec", list, .., "httpGet", "scheme"] if container(list) => is(&json!("HTTP")),
        ["spec", list, .., "grpc", "service"] if container(list) => is(&json!("")),
        // In an env var's or a downward API volume item's source.
        ["spec", .., "fieldRef", "apiVersion"] => is(&json!("v1")),
        ["spec", "volumes", _, source, "defaultMode"] if MODED_VOLUMES.contains(source) => {
            is(&json!(0o644))
        }
        [
            "spec",
            "volumes",
            _,
            "projected",
            "sources",
            _,
            "serviceAccountToken",
            "expirationSeconds",
        ] => is(&json!(3600)),
        ["spec", "volumes", _, "hostPath", "type"] => is(&json!("")),
        _ => false,
    }
}

/// The `imagePullPolicy` the API server gives a container of `image`: `Always` for the tag
/// `latest`, or no tag and no digest (which means `latest`), `IfNotPresent` otherwise.
fn default_pull_policy(image: &str) -> &'static str {
    let (name, digest) = match image.split_once('@') {
        Some((name, _)) => (name, true),
        None => (image, false),
    };
    // A registry's port (`host:5000/op`) is no tag: the tag follows the last path segment.
    let last = name.rsplit('/').next().unwrap_or(name);
    match last.split_once(':').map(|(_, tag)| tag) {
        Some("latest") => "Always",
        Some(_) => "IfNotPresent",
        None if digest => "IfNotPresent",
        None => "Always",
    }
}

/// What may be on the cluster where POM renders nothing: the path, the value, the object
/// holding it.
type ExtraAllowed<'a> = dyn Fn(&[String], &Value, &Map<String, Value>) -> bool + 'a;

fn first_difference(
    pom: &Value,
    live: &Value,
    path: &mut Vec<String>,
    extra_allowed: &ExtraAllowed<'_>,
) -> Option<Difference> {
    let here = |path: &[String], running: &Value, pom: &Value| Difference {
        path: render_path(path),
        running: short(running),
        pom: short(pom),
    };
    match (pom, live) {
        (Value::Object(want), Value::Object(have)) => {
            for (k, v) in want {
                path.push(k.clone());
                let found = match have.get(k) {
                    Some(h) => first_difference(v, h, path, extra_allowed),
                    // The API server drops an empty value POM renders: the same "none".
                    None if is_empty(v) => None,
                    None => Some(here(path, &Value::Null, v)),
                };
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            for (k, h) in have.iter().filter(|(k, _)| !want.contains_key(*k)) {
                path.push(k.clone());
                let allowed = is_empty(h) || extra_allowed(path, h, have);
                let found = (!allowed).then(|| here(path, h, &Value::Null));
                path.pop();
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        (Value::Array(want), Value::Array(have)) if want.len() == have.len() => {
            want.iter().zip(have).enumerate().find_map(|(i, (w, h))| {
                path.push(i.to_string());
                let found = first_difference(w, h, path, extra_allowed);
                path.pop();
                found
            })
        }
        _ => (!same(pom, live)).then(|| here(path, live, pom)),
    }
}

/// Equal, numbers by value.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(v, w)| same(v, w))
        }
        _ => a == b,
    }
}

/// An empty map or list, or null: what the API server writes for "none".
fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

/// `.spec.containers[0].env`.
fn render_path(path: &[String]) -> String {
    path.iter()
        .map(|p| {
            if p.chars().all(|c| c.is_ascii_digit()) {
                format!("[{p}]")
            } else {
                format!(".{p}")
            }
        })
        .collect()
}

/// A value for a message, bounded: messages land in a condition.
fn short(v: &Value) -> String {
    const MAX: usize = 120;
    let text = match v {
        Value::Null => "absent".to_owned(),
        other => other.to_string(),
    };
    if text.len() <= MAX {
        return text;
    }
    let mut end = MAX;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

/// The merge patch (RFC 7386) that moves `release`'s object from OLM to POM in one request:
/// conditional on the resourceVersion proven (a changed object fails the patch with a conflict,
/// and the next reconcile proves again), OLM's owner references and labels out, `pom_labels`
/// in, and the record of what OLM's marks were (for give-back) in.
#[must_use]
pub fn release_patch(release: &Release, pom_labels: &BTreeMap<String, String>) -> Value {
    let mut labels = serde_json::Map::new();
    for label in &release.labels {
        labels.insert(label.clone(), Value::Null);
    }
    for (k, v) in pom_labels {
        labels.insert(k.clone(), Value::String(v.clone()));
    }
    let mut metadata = serde_json::Map::new();
    if let Some(rv) = &release.resource_version {
        metadata.insert("resourceVersion".to_owned(), Value::String(rv.clone()));
    }
    if let Some(references) = &release.owner_references {
        metadata.insert(
            "ownerReferences".to_owned(),
            Value::Array(references.clone()),
        );
    }
    for (k, v) in release.record.labels() {
        labels.insert(k.to_owned(), Value::String(v));
    }
    metadata.insert("labels".to_owned(), Value::Object(labels));
    json!({ "metadata": metadata })
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;

    fn key(kind: &str, name: &str) -> ObjectKey {
        ObjectKey {
            api_version: "apps/v1".to_owned(),
            kind: kind.to_owned(),
            namespace: Some("ns".to_owned()),
            name: name.to_owned(),
        }
    }

    fn olm() -> OlmSource {
        OlmSource {
            subscription: "ns/op".to_owned(),
            namespace: "ns".to_owned(),
            found: true,
            package: "op".to_owned(),
            installed_csv: Some("op.v1".to_owned()),
            csv_phase: Some("Succeeded".to_owned()),
            csv_uid: Some("u1".to_owned()),
            csv_annotations: ["alm-examples".to_owned()].into(),
            webhook_configurations: Vec::new(),
            webhook_configurations_beyond_limit: false,
            ca_bundle: None,
        }
    }

    /// POM's Deployment as rendered.
    fn pom_deployment() -> Value {
        json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "op", "namespace": "ns", "labels": {"platform.openshift.io/owner": "po"}},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "op"}},
                "template": {"metadata": {"labels": {"app": "op"}, "annotations": {"alm-examples": "[]", "olm.targetNamespaces": ""}},
                    "spec": {"serviceAccountName": "op", "containers": [{"name": "op", "image": "op:1",
                        "env": [{"name": "OPERATOR_CONDITION_NAME", "value": "op.v1"}]}]}}}})
    }

    /// The same Deployment as OLM left it and the API server defaulted it.
    fn olm_deployment() -> Value {
        let mut d = pom_deployment();
        d["metadata"]["labels"] = json!({"olm.owner": "op.v1", "olm.owner.namespace": "ns",
            "olm.owner.kind": "ClusterServiceVersion", "operators.coreos.com/op.ns": "", "olm.managed": "true"});
        d["metadata"]["ownerReferences"] = json!([{"apiVersion": "operators.coreos.com/v1alpha1",
            "kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u1"}]);
        let t = &mut d["spec"]["template"];
        t["metadata"]["annotations"]["olm.operatorGroup"] = json!("og");
        t["metadata"]["creationTimestamp"] = Value::Null;
        t["spec"]["dnsPolicy"] = json!("ClusterFirst");
        t["spec"]["containers"][0]["imagePullPolicy"] = json!("IfNotPresent");
        t["spec"]["containers"][0]["resources"] = json!({});
        d
    }

    fn judged(
        olm: &OlmSource,
        desired: &Value,
        live: Option<&Value>,
    ) -> Result<TakeOver, NotProven> {
        let k = key("Deployment", "op");
        let objects = [Pair {
            key: &k,
            desired,
            live,
        }];
        prove(&TakeOverInput {
            po: "po",
            package: "op",
            bundle: "op.v1",
            olm,
            objects: &objects,
            guarded: false,
            install_namespace: None,
        })
    }

    #[test]
    fn the_proof_table() {
        let edit = |f: &dyn Fn(&mut Value)| {
            let mut d = olm_deployment();
            f(&mut d);
            d
        };
        let not_olms = {
            let mut d = pom_deployment();
            d["metadata"]["labels"] = json!({"app": "op"});
            d
        };
        let cases: Vec<(&str, OlmSource, Value, Result<(), &str>)> = vec![
            (
                "as OLM left it, server defaults and OLM's annotations aside",
                olm(),
                olm_deployment(),
                Ok(()),
            ),
            (
                "an adoption resumed: already this PO's",
                olm(),
                pom_deployment(),
                Ok(()),
            ),
            (
                "an admin's env var",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["spec"]["containers"][0]["env"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"name": "X", "value": "1"}));
                }),
                Err("PodTemplateDiffers"),
            ),
            (
                "another image",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["spec"]["containers"][0]["image"] = json!("op:2");
                }),
                Err("PodTemplateDiffers"),
            ),
            (
                "a nodeSelector POM does not render",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["spec"]["nodeSelector"] = json!({"a": "b"});
                }),
                Err("PodTemplateDiffers"),
            ),
            (
                "a pod annotation neither OLM's nor the CSV's",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["metadata"]["annotations"]["kubectl.kubernetes.io/restartedAt"] =
                        json!("now");
                }),
                Err("PodTemplateDiffers"),
            ),
            (
                "a pod label POM does not render",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["metadata"]["labels"]["extra"] = json!("1");
                }),
                Err("PodTemplateDiffers"),
            ),
            (
                "another selector",
                olm(),
                edit(&|d| {
                    d["spec"]["selector"] = json!({"matchLabels": {"app": "other"}});
                }),
                Err("SelectorDiffers"),
            ),
            ("not OLM's", olm(), not_olms, Err("NotOlms")),
            (
                "the Subscription is gone",
                OlmSource {
                    found: false,
                    ..olm()
                },
                olm_deployment(),
                Err("SubscriptionMissing"),
            ),
            (
                "another package",
                OlmSource {
                    package: "other".into(),
                    ..olm()
                },
                olm_deployment(),
                Err("PackageDiffers"),
            ),
            (
                "nothing installed",
                OlmSource {
                    installed_csv: None,
                    ..olm()
                },
                olm_deployment(),
                Err("NotInstalled"),
            ),
            (
                "CSV failed",
                OlmSource {
                    csv_phase: Some("Failed".into()),
                    ..olm()
                },
                olm_deployment(),
                Err("CsvNotSucceeded"),
            ),
            (
                "CSV missing",
                OlmSource {
                    csv_phase: None,
                    ..olm()
                },
                olm_deployment(),
                Err("CsvNotSucceeded"),
            ),
            (
                "OLM installed another bundle",
                OlmSource {
                    installed_csv: Some("op.v2".into()),
                    ..olm()
                },
                olm_deployment(),
                Err("BundleDiffers"),
            ),
            (
                "OLM's CA hash on a webhook Deployment's template (OLM's own annotation)",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["metadata"]["annotations"]["olmcahash"] = json!("ab12");
                }),
                Ok(()),
            ),
            (
                "a certificate volume POM does not render",
                olm(),
                edit(&|d| {
                    d["spec"]["template"]["spec"]["volumes"] = json!([{"name": "webhook-cert",
                        "secret": {"secretName": "op-service-cert", "defaultMode": 420}}]);
                }),
                Err("PodTemplateDiffers"),
            ),
        ];
        for (name, olm, live, want) in cases {
            let got = judged(&olm, &pom_deployment(), Some(&live));
            match (want, got) {
                (Ok(()), Ok(_)) => {}
                (Err(variant), Err(err)) => {
                    assert!(format!("{err:?}").starts_with(variant), "{name}: {err:?}");
                    assert!(!err.to_string().is_empty());
                }
                (want, got) => panic!("{name}: wanted {want:?}, got {got:?}"),
            }
        }
    }

    /// A webhook bundle as OLM v0 lays it out: the Deployment with OLM's certificate volumes
    /// (POM renders the same), its Service, its serving Secret (never read), and OLM's
    /// webhook configuration under a generated name.
    #[test]
    fn a_webhook_bundle_releases_its_secret_unread_and_retires_olms_configuration() {
        let volumes = json!([
            {"name": "apiservice-cert", "secret": {"secretName": "op-service-cert",
                "items": [{"key": "tls.crt", "path": "apiserver.crt"}, {"key": "tls.key", "path": "apiserver.key"}]}},
            {"name": "webhook-cert", "secret": {"secretName": "op-service-cert",
                "items": [{"key": "tls.crt", "path": "tls.crt"}, {"key": "tls.key", "path": "tls.key"}]}}]);
        let mounts = json!([
            {"name": "apiservice-cert", "mountPath": "/apiserver.local.config/certificates"},
            {"name": "webhook-cert", "mountPath": "/tmp/k8s-webhook-server/serving-certs"}]);
        let mut pom = pom_deployment();
        pom["spec"]["template"]["spec"]["volumes"] = volumes.clone();
        pom["spec"]["template"]["spec"]["containers"][0]["volumeMounts"] = mounts.clone();
        let mut live = olm_deployment();
        let t = &mut live["spec"]["template"];
        t["spec"]["volumes"] = volumes;
        t["spec"]["volumes"][0]["secret"]["defaultMode"] = json!(420);
        t["spec"]["volumes"][1]["secret"]["defaultMode"] = json!(420);
        t["spec"]["containers"][0]["volumeMounts"] = mounts;
        t["metadata"]["annotations"]["olmcahash"] = json!("ab12");
        let dep = key("Deployment", "op");
        let object = |kind: &str, name: &str| ObjectKey {
            api_version: "v1".into(),
            kind: kind.into(),
            namespace: Some("ns".into()),
            name: name.into(),
        };
        let (service, secret) = (
            object("Service", "op-service"),
            object("Secret", "op-service-cert"),
        );
        let vwc = ObjectKey {
            api_version: "admissionregistration.k8s.io/v1".into(),
            kind: "ValidatingWebhookConfiguration".into(),
            namespace: None,
            name: "vop".into(),
        };
        let live_service = json!({"metadata": {"name": "op-service", "namespace": "ns",
            "labels": {"olm.managed": "true"},
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u1"}]}});
        let empty = json!({});
        let objects = [
            Pair {
                key: &dep,
                desired: &pom,
                live: Some(&live),
            },
            Pair {
                key: &service,
                desired: &empty,
                live: Some(&live_service),
            },
            Pair {
                key: &secret,
                desired: &empty,
                live: None,
            },
            Pair {
                key: &vwc,
                desired: &empty,
                live: None,
            },
        ];
        let olm_config = |generate: &str| OlmWebhookConfiguration {
            key: ObjectKey {
                name: "vop-x7k2q".into(),
                ..vwc.clone()
            },
            resource_version: Some("9".into()),
            generate_name: Some(generate.into()),
            handed_over: false,
        };
        let source = OlmSource {
            webhook_configurations: vec![olm_config("vop")],
            ..olm()
        };
        let input = TakeOverInput {
            po: "po",
            package: "op",
            bundle: "op.v1",
            olm: &source,
            objects: &objects,
            guarded: false,
            install_namespace: None,
        };
        let out = prove(&input).unwrap();
        assert_eq!(out.take_over, vec![dep.clone(), service.clone()]);
        assert_eq!(out.create, vec![secret.clone(), vwc.clone()]);
        assert_eq!(out.unread_releases.len(), 1);
        assert_eq!(out.unread_releases[0].key, secret);
        assert_eq!(out.unread_releases[0].csv_uid, "u1");
        assert_eq!(out.retire.len(), 1);
        assert_eq!(out.retire[0].key.name, "vop-x7k2q");
        assert_eq!(out.retire[0].resource_version.as_deref(), Some("9"));
        // OLM's configuration for a description POM does not render: not proven, nothing done.
        let other = OlmSource {
            webhook_configurations: vec![olm_config("other")],
            ..olm()
        };
        let err = prove(&TakeOverInput {
            olm: &other,
            ..input
        })
        .unwrap_err();
        assert!(
            matches!(err, NotProven::WebhookConfigurationUnmatched { .. }),
            "{err}"
        );
        // More of OLM's configurations than adoption lists: not proven, nothing done.
        let beyond = OlmSource {
            webhook_configurations_beyond_limit: true,
            ..source.clone()
        };
        let err = prove(&TakeOverInput {
            olm: &beyond,
            ..input
        })
        .unwrap_err();
        assert_eq!(
            err,
            NotProven::TooManyWebhookConfigurations {
                csv: "op.v1".into(),
                limit: webhooks::MAX_OLM_WEBHOOK_CONFIGURATIONS
            }
        );
        assert!(err.to_string().contains("at most 128 of a kind"), "{err}");
        // Without the CSV's uid nothing says which owner reference is OLM's: not proven, so
        // nothing is written (the Secret left to OLM would go with the CSV).
        let unknown = OlmSource {
            csv_uid: None,
            ..olm()
        };
        let secret_only = [
            Pair {
                key: &secret,
                desired: &empty,
                live: None,
            },
            Pair {
                key: &service,
                desired: &empty,
                live: None,
            },
        ];
        let err = prove(&TakeOverInput {
            olm: &unknown,
            objects: &secret_only,
            guarded: false,
            ..input
        })
        .unwrap_err();
        assert_eq!(
            err,
            NotProven::CsvUidUnknown {
                csv: "op.v1".into(),
                object: secret.clone()
            }
        );
    }

    #[test]
    fn the_hand_over_lasts_while_the_adoption_has_not_settled() {
        let po = |adopt: bool, installed: bool, hop: Option<(Option<&str>, bool)>| {
            let mut spec = json!({"package": {"name": "op"}});
            if adopt {
                spec["adoptFrom"] = json!({"subscription": {"namespace": "ns", "name": "op"}});
            }
            let mut status = json!({});
            if installed {
                status["installedBundle"] = json!({"name": "op.v1", "version": "1.0.0"});
            }
            if let Some((from, settled)) = hop {
                status["activeHop"] = json!({"from": from, "to": "op.v1",
                    "startedAt": "2026-01-01T00:00:00Z", "settled": settled});
            }
            serde_json::from_value::<pom_api::PlatformOperator>(json!({
                "apiVersion": "platform.openshift.io/v1alpha1", "kind": "PlatformOperator",
                "metadata": {"name": "op"}, "spec": spec, "status": status}))
            .unwrap()
        };
        // (case, the PO, handing over)
        let cases = [
            (
                "adopting: not yet",
                po(true, false, Some((None, false))),
                false,
            ),
            (
                "adopted, unsettled",
                po(true, true, Some((None, false))),
                true,
            ),
            (
                "adopted, settled",
                po(true, true, Some((None, true))),
                false,
            ),
            (
                "a later hop",
                po(true, true, Some((Some("op.v0"), false))),
                false,
            ),
            ("never adopted", po(false, true, Some((None, false))), false),
            ("no move recorded", po(true, true, None), false),
        ];
        for (case, po, want) in cases {
            assert_eq!(handing_over(&po), want, "{case}");
        }
    }

    /// Under the shipped admission guard, everything of OLM's the manager would change must
    /// carry `platform.openshift.io/adopt`: the proof names what does not, with the commands.
    #[test]
    fn under_the_admission_guard_what_is_not_handed_over_is_named_with_its_command() {
        let dep = key("Deployment", "op");
        let (pom, live) = (pom_deployment(), olm_deployment());
        let mut annotated = olm_deployment();
        annotated["metadata"]["annotations"] = json!({"platform.openshift.io/adopt": "po"});
        let resumed = pom_deployment();
        let config = |handed_over: bool| OlmWebhookConfiguration {
            key: ObjectKey {
                api_version: "admissionregistration.k8s.io/v1".into(),
                kind: "ValidatingWebhookConfiguration".into(),
                namespace: None,
                name: "vop-x7k2q".into(),
            },
            resource_version: None,
            generate_name: Some("vop".into()),
            handed_over,
        };
        let vwc = ObjectKey {
            name: "vop".into(),
            ..config(false).key
        };
        let empty = json!({});
        let (service, secret) = (
            crate::adopt::test_key("v1", "Service", Some("ns"), "op-service"),
            crate::adopt::test_key("v1", "Secret", Some("ns"), "op-service-cert"),
        );
        // OLM's Service, handed over in every case (the Deployment stands for what is read).
        let live_service = json!({"metadata": {"name": "op-service", "namespace": "ns",
            "annotations": {"platform.openshift.io/adopt": "po"},
            "ownerReferences": [{"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u1"}]}});
        let namespace = |labels: Value, annotations: Value| json!({"metadata": {"name": "ns", "labels": labels, "annotations": annotations}});
        let ns_olm = namespace(json!({"olm.operatorgroup.uid/x": ""}), json!({}));
        let ns_annotated = namespace(json!({}), json!({"platform.openshift.io/adopt": "po"}));
        let ns_pos = namespace(json!({"platform.openshift.io/owner": "po"}), json!({}));
        let prove_with = |guarded: bool, live: &Value, handed_over: bool, ns: &Value| {
            let source = OlmSource {
                webhook_configurations: vec![config(handed_over)],
                ..olm()
            };
            let objects = [
                Pair {
                    key: &dep,
                    desired: &pom,
                    live: Some(live),
                },
                Pair {
                    key: &vwc,
                    desired: &empty,
                    live: None,
                },
                Pair {
                    key: &service,
                    desired: &empty,
                    live: Some(&live_service),
                },
                Pair {
                    key: &secret,
                    desired: &empty,
                    live: None,
                },
            ];
            prove(&TakeOverInput {
                po: "po",
                package: "op",
                bundle: "op.v1",
                olm: &source,
                objects: &objects,
                guarded,
                install_namespace: Some(ns),
            })
        };
        /// (case, guarded, the Deployment, OLM's configuration handed over, the namespace,
        /// the objects named when refused)
        type Case<'a> = (
            &'a str,
            bool,
            &'a Value,
            bool,
            &'a Value,
            Option<Vec<&'a str>>,
        );
        let cases: Vec<Case<'_>> = vec![
            (
                "no guard: nothing needs the annotation",
                false,
                &live,
                false,
                &ns_olm,
                None,
            ),
            (
                "guard, nothing handed over: all named, the unread Secret too",
                true,
                &live,
                false,
                &ns_olm,
                Some(vec![
                    "Deployment",
                    "ValidatingWebhookConfiguration",
                    "Namespace",
                    "Secret",
                ]),
            ),
            (
                "guard, the Deployment and the namespace handed over",
                true,
                &annotated,
                false,
                &ns_annotated,
                Some(vec!["ValidatingWebhookConfiguration", "Secret"]),
            ),
            (
                "guard, all handed over but the namespace",
                true,
                &annotated,
                true,
                &ns_olm,
                Some(vec!["Namespace", "Secret"]),
            ),
            (
                "guard, all handed over",
                true,
                &annotated,
                true,
                &ns_annotated,
                None,
            ),
            (
                "guard, a resumed adoption: the Deployment and namespace are POM's already",
                true,
                &resumed,
                true,
                &ns_pos,
                None,
            ),
        ];
        for (case, guarded, live, handed_over, ns, refused) in cases {
            match (prove_with(guarded, live, handed_over, ns), refused) {
                (Ok(_), None) => {}
                (Err(NotProven::AdmissionGuard { objects, commands }), Some(kinds)) => {
                    let named: Vec<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
                    assert_eq!(named, kinds, "{case}");
                    for (kind, command) in [
                        (
                            "ValidatingWebhookConfiguration",
                            "kubectl annotate validatingwebhookconfiguration.admissionregistration.k8s.io/vop-x7k2q platform.openshift.io/adopt=po",
                        ),
                        (
                            "Deployment",
                            "kubectl annotate deployment.apps/op -n ns platform.openshift.io/adopt=po",
                        ),
                        (
                            "Namespace",
                            "kubectl annotate namespace/ns platform.openshift.io/adopt=po",
                        ),
                        (
                            "Secret",
                            "kubectl annotate secret/op-service-cert -n ns platform.openshift.io/adopt=po",
                        ),
                    ] {
                        assert_eq!(
                            commands.contains(command),
                            kinds.contains(&kind),
                            "{case}: {commands}"
                        );
                    }
                }
                (got, want) => panic!("{case}: wanted {want:?} refused, got {got:?}"),
            }
        }
    }

    #[test]
    fn the_difference_names_the_field_and_both_values() {
        let mut live = olm_deployment();
        live["spec"]["template"]["spec"]["containers"][0]["image"] = json!("op:2");
        let err = judged(&olm(), &pom_deployment(), Some(&live)).unwrap_err();
        assert_eq!(
            err,
            NotProven::PodTemplateDiffers {
                deployment: "ns/op".into(),
                path: "spec.template.spec.containers[0].image".into(),
                running: "\"op:2\"".into(),
                pom: "\"op:1\"".into(),
            }
        );
    }

    #[test]
    fn what_is_taken_over_created_and_released() {
        let sa = ObjectKey {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some("ns".into()),
            name: "op".into(),
        };
        let role = ObjectKey {
            kind: "Role".into(),
            ..sa.clone()
        };
        let dep = key("Deployment", "op");
        let live_sa = json!({"metadata": {"name": "op", "labels": {"olm.owner": "op.v1", "olm.owner.namespace": "ns"},
            "ownerReferences": [{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "keep"},
                                {"apiVersion": "operators.coreos.com/v1alpha1", "kind": "ClusterServiceVersion", "name": "op.v1", "uid": "u2"}]}});
        let (pom, olm_dep) = (pom_deployment(), olm_deployment());
        let objects = [
            Pair {
                key: &sa,
                desired: &json!({}),
                live: Some(&live_sa),
            },
            Pair {
                key: &role,
                desired: &json!({}),
                live: None,
            },
            Pair {
                key: &dep,
                desired: &pom,
                live: Some(&olm_dep),
            },
        ];
        let out = prove(&TakeOverInput {
            po: "po",
            package: "op",
            bundle: "op.v1",
            olm: &olm(),
            objects: &objects,
            guarded: false,
            install_namespace: None,
        })
        .unwrap();
        assert_eq!(out.take_over, vec![sa.clone(), dep.clone()]);
        assert_eq!(out.create, vec![role]);
        assert_eq!(
            out.releases[0].owner_references,
            Some(vec![
                json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "keep"})
            ])
        );
        assert_eq!(
            out.releases[0].labels,
            vec!["olm.owner", "olm.owner.namespace"]
        );
        assert_eq!(
            out.releases[1].labels,
            vec![
                "olm.owner",
                "olm.owner.namespace",
                "olm.owner.kind",
                "operators.coreos.com/op.ns"
            ]
        );
        assert_eq!(out.releases[1].owner_references, Some(vec![]));
        // What give-back restores: which of OLM's marks each carried.
        assert_eq!(
            out.releases[0].record,
            ReleaseRecord {
                csv: "op.v1".into(),
                marks: [Mark::Owner, Mark::Namespace, Mark::Reference].into(),
            }
        );
        assert_eq!(
            out.releases[1].record.marks,
            [
                Mark::Owner,
                Mark::Namespace,
                Mark::Kind,
                Mark::Component,
                Mark::Reference
            ]
            .into()
        );
    }

    #[test]
    fn the_release_patch_is_conditional_removes_olms_marks_and_labels_as_poms() {
        let release = Release {
            key: key("Deployment", "op"),
            resource_version: Some("42".into()),
            owner_references: Some(vec![]),
            labels: vec!["olm.owner".into(), "operators.coreos.com/op.ns".into()],
            record: ReleaseRecord {
                csv: "op.v1".into(),
                marks: [Mark::Owner, Mark::Component, Mark::Reference].into(),
            },
        };
        let pom: BTreeMap<String, String> =
            [("platform.openshift.io/owner".to_owned(), "po".to_owned())].into();
        assert_eq!(
            release_patch(&release, &pom),
            json!({"metadata": {"resourceVersion": "42", "ownerReferences": [],
                "labels": {"olm.owner": null, "operators.coreos.com/op.ns": null, "platform.openshift.io/owner": "po",
                    "platform.openshift.io/released-from-olm": "op.v1",
                    "platform.openshift.io/released-olm-marks": "owner.component.reference"}}})
        );
        let labels_only = Release {
            owner_references: None,
            ..release
        };
        assert!(
            release_patch(&labels_only, &pom)["metadata"]
                .get("ownerReferences")
                .is_none()
        );
    }

    #[test]
    fn what_prepare_reads_as_olms() {
        let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let none = std::iter::empty;
        let owner = labels(&[("olm.owner", "op.v1"), ("olm.owner.namespace", "ns")]);
        assert!(marked_by_olm(Some(&owner), none(), "ns", "op"));
        assert!(
            !marked_by_olm(Some(&owner), none(), "other", "op"),
            "another namespace's"
        );
        let component = labels(&[("operators.coreos.com/op.ns", "")]);
        assert!(marked_by_olm(Some(&component), none(), "ns", "op"));
        assert!(
            !marked_by_olm(Some(&component), none(), "ns", "other"),
            "another package's"
        );
        assert!(marked_by_olm(
            None,
            [("operators.coreos.com/v1alpha1", "ClusterServiceVersion")].into_iter(),
            "ns",
            "op"
        ));
        assert!(!marked_by_olm(
            None,
            [("apps/v1", "ReplicaSet")].into_iter(),
            "ns",
            "op"
        ));
        assert!(!marked_by_olm(
            Some(&labels(&[("app", "op")])),
            none(),
            "ns",
            "op"
        ));
    }

    /// The pod template's difference, through [`prove`]: `None` when adopted.
    fn template_verdict(pom_template: &Value, live_template: &Value) -> Option<String> {
        let mut pom = pom_deployment();
        pom["spec"]["template"] = pom_template.clone();
        let mut live = olm_deployment();
        live["spec"]["template"] = live_template.clone();
        match judged(&olm(), &pom, Some(&live)) {
            Ok(_) => None,
            Err(NotProven::PodTemplateDiffers { path, .. }) => Some(path),
            Err(other) => panic!("not a template difference: {other:?}"),
        }
    }

    /// A template as the API server returns it for one POM renders with no defaulted field.
    fn server_defaulted(template: &Value) -> Value {
        let mut t = template.clone();
        let spec = &mut t["spec"];
        spec["dnsPolicy"] = json!("ClusterFirst");
        spec["restartPolicy"] = json!("Always");
        spec["schedulerName"] = json!("default-scheduler");
        spec["terminationGracePeriodSeconds"] = json!(30);
        spec["serviceAccount"] = spec["serviceAccountName"].clone();
        spec["securityContext"] = json!({});
        for c in spec["containers"].as_array_mut().unwrap() {
            c["imagePullPolicy"] = json!("IfNotPresent");
            c["terminationMessagePath"] = json!("/dev/termination-log");
            c["terminationMessagePolicy"] = json!("File");
            c["resources"] = json!({});
        }
        t["metadata"]["creationTimestamp"] = Value::Null;
        t
    }

    #[test]
    fn beyond_what_pom_renders_only_server_defaults_are_adopted() {
        let pom = pom_deployment()["spec"]["template"].clone();
        let defaulted = server_defaulted(&pom);
        assert_eq!(
            template_verdict(&pom, &defaulted),
            None,
            "the server's defaults"
        );
        let c0 = "spec.template.spec.containers[0]";
        let pod = "spec.template.spec";
        // (what is added or changed on the running template, the path named)
        let cases: Vec<(&str, &str, Value, String)> = vec![
            (
                "/spec/containers/0",
                "resources",
                json!({"limits": {"cpu": "1"}}),
                format!("{c0}.resources"),
            ),
            (
                "/spec/containers/0",
                "ports",
                json!([{"containerPort": 8080}]),
                format!("{c0}.ports"),
            ),
            (
                "/spec/containers/0",
                "livenessProbe",
                json!({"tcpSocket": {"port": 8080}}),
                format!("{c0}.livenessProbe"),
            ),
            (
                "/spec/containers/0",
                "readinessProbe",
                json!({"tcpSocket": {"port": 8080}}),
                format!("{c0}.readinessProbe"),
            ),
            (
                "/spec/containers/0",
                "lifecycle",
                json!({"preStop": {"exec": {"command": ["sleep", "5"]}}}),
                format!("{c0}.lifecycle"),
            ),
            (
                "/spec/containers/0",
                "workingDir",
                json!("/tmp"),
                format!("{c0}.workingDir"),
            ),
            (
                "/spec/containers/0",
                "imagePullPolicy",
                json!("Always"),
                format!("{c0}.imagePullPolicy"),
            ),
            (
                "/spec/containers/0",
                "terminationMessagePolicy",
                json!("FallbackToLogsOnError"),
                format!("{c0}.terminationMessagePolicy"),
            ),
            (
                "/spec",
                "securityContext",
                json!({"runAsNonRoot": true}),
                format!("{pod}.securityContext"),
            ),
            (
                "/spec",
                "topologySpreadConstraints",
                json!([{"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}]),
                format!("{pod}.topologySpreadConstraints"),
            ),
            (
                "/spec",
                "imagePullSecrets",
                json!([{"name": "pull"}]),
                format!("{pod}.imagePullSecrets"),
            ),
            (
                "/spec",
                "hostAliases",
                json!([{"ip": "10.0.0.1", "hostnames": ["a"]}]),
                format!("{pod}.hostAliases"),
            ),
            (
                "/spec",
                "dnsConfig",
                json!({"nameservers": ["1.1.1.1"]}),
                format!("{pod}.dnsConfig"),
            ),
            (
                "/spec",
                "nodeName",
                json!("node-1"),
                format!("{pod}.nodeName"),
            ),
            (
                "/spec",
                "automountServiceAccountToken",
                json!(false),
                format!("{pod}.automountServiceAccountToken"),
            ),
            (
                "/spec",
                "shareProcessNamespace",
                json!(true),
                format!("{pod}.shareProcessNamespace"),
            ),
            // Defaulted on Pods only (SetDefaults_Pod), never on a template.
            (
                "/spec",
                "enableServiceLinks",
                json!(true),
                format!("{pod}.enableServiceLinks"),
            ),
            (
                "/spec",
                "dnsPolicy",
                json!("Default"),
                format!("{pod}.dnsPolicy"),
            ),
            (
                "/spec",
                "terminationGracePeriodSeconds",
                json!(60),
                format!("{pod}.terminationGracePeriodSeconds"),
            ),
            (
                "/spec",
                "serviceAccount",
                json!("other"),
                format!("{pod}.serviceAccount"),
            ),
            (
                "/spec",
                "schedulerName",
                json!("custom"),
                format!("{pod}.schedulerName"),
            ),
            ("/spec", "priority", json!(0), format!("{pod}.priority")),
            (
                "/metadata",
                "labels",
                json!({"app": "op", "extra": "1"}),
                "spec.template.metadata.labels.extra".to_owned(),
            ),
        ];
        for (at, field, value, want) in cases {
            let mut live = defaulted.clone();
            live.pointer_mut(at).unwrap()[field] = value;
            assert_eq!(template_verdict(&pom, &live), Some(want.clone()), "{want}");
        }
    }

    #[test]
    fn defaults_nested_in_what_pom_renders_are_adopted_other_values_are_not() {
        let mut pom = pom_deployment()["spec"]["template"].clone();
        let c = &mut pom["spec"]["containers"][0];
        c["ports"] = json!([{"containerPort": 8080, "name": "metrics"}]);
        c["livenessProbe"] = json!({"httpGet": {"port": 8081, "path": "/healthz"}});
        c["readinessProbe"] = json!({"grpc": {"port": 9000}});
        c["lifecycle"] = json!({"preStop": {"httpGet": {"port": 8081}}});
        c["env"].as_array_mut().unwrap().push(
            json!({"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        );
        c["volumeMounts"] = json!([{"name": "cert", "mountPath": "/cert"}]);
        pom["spec"]["volumes"] = json!([
            {"name": "cert", "secret": {"secretName": "cert"}},
            {"name": "token", "projected": {"sources": [{"serviceAccountToken": {"path": "t"}}]}},
            {"name": "host", "hostPath": {"path": "/var"}}]);
        let mut live = server_defaulted(&pom);
        let lc = &mut live["spec"]["containers"][0];
        lc["ports"][0]["protocol"] = json!("TCP");
        lc["livenessProbe"] = json!({"httpGet": {"port": 8081, "path": "/healthz", "scheme": "HTTP"},
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
        lc["readinessProbe"] = json!({"grpc": {"port": 9000, "service": ""},
            "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3});
        lc["lifecycle"]["preStop"]["httpGet"] =
            json!({"port": 8081, "path": "/", "scheme": "HTTP"});
        lc["env"][1]["valueFrom"]["fieldRef"]["apiVersion"] = json!("v1");
        let lv = &mut live["spec"]["volumes"];
        lv[0]["secret"]["defaultMode"] = json!(420);
        lv[1]["projected"]["defaultMode"] = json!(420);
        lv[1]["projected"]["sources"][0]["serviceAccountToken"]["expirationSeconds"] = json!(3600);
        lv[2]["hostPath"]["type"] = json!("");
        assert_eq!(template_verdict(&pom, &live), None, "every nested default");

        let c0 = "spec.template.spec.containers[0]";
        let cases: Vec<(&str, Value, String)> = vec![
            ("/spec/containers/0/ports/0/protocol", json!("UDP"), format!("{c0}.ports[0].protocol")),
            ("/spec/containers/0/ports/0/hostPort", json!(8080), format!("{c0}.ports[0].hostPort")),
            ("/spec/containers/0/livenessProbe/periodSeconds", json!(20), format!("{c0}.livenessProbe.periodSeconds")),
            ("/spec/containers/0/livenessProbe/initialDelaySeconds", json!(5), format!("{c0}.livenessProbe.initialDelaySeconds")),
            ("/spec/containers/0/livenessProbe/httpGet/scheme", json!("HTTPS"), format!("{c0}.livenessProbe.httpGet.scheme")),
            ("/spec/containers/0/livenessProbe/httpGet/httpHeaders", json!([{"name": "a", "value": "b"}]), format!("{c0}.livenessProbe.httpGet.httpHeaders")),
            ("/spec/containers/0/volumeMounts/0/readOnly", json!(true), format!("{c0}.volumeMounts[0].readOnly")),
            ("/spec/volumes/0/secret/defaultMode", json!(0o600), "spec.template.spec.volumes[0].secret.defaultMode".to_owned()),
            ("/spec/volumes/0/secret/optional", json!(true), "spec.template.spec.volumes[0].secret.optional".to_owned()),
            ("/spec/volumes/1/projected/sources/0/serviceAccountToken/expirationSeconds", json!(7200), "spec.template.spec.volumes[1].projected.sources[0].serviceAccountToken.expirationSeconds".to_owned()),
        ];
        for (at, value, want) in cases {
            let mut edited = live.clone();
            let (parent, field) = at.rsplit_once('/').unwrap();
            edited.pointer_mut(parent).unwrap()[field] = value;
            assert_eq!(
                template_verdict(&pom, &edited),
                Some(want.clone()),
                "{want}"
            );
        }
    }

    #[test]
    fn the_default_pull_policy_follows_the_image_tag() {
        for (image, want) in [
            ("op:1", "IfNotPresent"),
            ("op", "Always"),
            ("op:latest", "Always"),
            ("registry:5000/team/op", "Always"),
            ("registry:5000/team/op:1", "IfNotPresent"),
            ("op@sha256:abc", "IfNotPresent"),
            ("op:latest@sha256:abc", "Always"),
        ] {
            assert_eq!(default_pull_policy(image), want, "{image}");
        }
        let mut pom = pom_deployment()["spec"]["template"].clone();
        pom["spec"]["containers"][0]["image"] = json!("op");
        let mut live = server_defaulted(&pom);
        live["spec"]["containers"][0]["imagePullPolicy"] = json!("Always");
        assert_eq!(template_verdict(&pom, &live), None);
    }

    #[test]
    fn a_rendered_deployment_or_service_account_missing_is_refused() {
        let err = judged(&olm(), &pom_deployment(), None).unwrap_err();
        assert_eq!(
            err,
            NotProven::RenderedMissing {
                object: key("Deployment", "op"),
                csv: "op.v1".into()
            }
        );
        assert!(err.to_string().contains("second copy"), "{err}");
        let sa = ObjectKey {
            api_version: "v1".into(),
            kind: "ServiceAccount".into(),
            namespace: Some("ns".into()),
            name: "op".into(),
        };
        let objects = [Pair {
            key: &sa,
            desired: &json!({}),
            live: None,
        }];
        let err = prove(&TakeOverInput {
            po: "po",
            package: "op",
            bundle: "op.v1",
            olm: &olm(),
            objects: &objects,
            guarded: false,
            install_namespace: None,
        })
        .unwrap_err();
        assert!(matches!(err, NotProven::RenderedMissing { .. }), "{err:?}");
    }

    #[test]
    fn an_owner_reference_proves_only_with_the_csvs_uid_in_its_namespace() {
        let referenced = |uid: &str| {
            let mut d = olm_deployment();
            d["metadata"]["labels"] = json!({});
            d["metadata"]["ownerReferences"][0]["uid"] = json!(uid);
            d
        };
        assert!(judged(&olm(), &pom_deployment(), Some(&referenced("u1"))).is_ok());
        let err = judged(&olm(), &pom_deployment(), Some(&referenced("u0"))).unwrap_err();
        assert!(
            matches!(err, NotProven::NotOlms { .. }),
            "an earlier CSV's: {err:?}"
        );
        let unknown = OlmSource {
            csv_uid: None,
            ..olm()
        };
        assert!(judged(&unknown, &pom_deployment(), Some(&referenced("u1"))).is_err());

        let prove_at = |namespace: Option<&str>| {
            let k = ObjectKey {
                namespace: namespace.map(str::to_owned),
                ..key("Deployment", "op")
            };
            let (pom, live) = (pom_deployment(), referenced("u1"));
            let objects = [Pair {
                key: &k,
                desired: &pom,
                live: Some(&live),
            }];
            prove(&TakeOverInput {
                po: "po",
                package: "op",
                bundle: "op.v1",
                olm: &olm(),
                objects: &objects,
                guarded: false,
                install_namespace: None,
            })
        };
        assert!(prove_at(Some("ns")).is_ok());
        assert!(matches!(
            prove_at(Some("other")),
            Err(NotProven::NotOlms { .. })
        ));
        assert!(matches!(prove_at(None), Err(NotProven::NotOlms { .. })));
    }

    #[test]
    fn messages_are_bounded() {
        let long = Value::String("x".repeat(10_000));
        assert!(short(&long).len() < 200);
    }
}
