//! Webhook serving certificates from POM's own CA (§6), where OpenShift's service-ca does not
//! provide them: gather what the Secrets record, [`pom_policy::certificates::plan`], issue
//! what it says, and hand back the Secrets as bundle objects (applied, inventoried, repaired
//! and removed like every other object of the bundle) with the caBundle to set.
//!
//! One CA per install namespace, in the Secret [`CA_SECRET`] (`ca.crt`, `ca.key`, and
//! `ca-bundle.crt`: the current CA, plus the previous one while it is valid); one
//! `kubernetes.io/tls` Secret per webhook Service, named by the renderer (`<service>-cert`).
//! Key material is generated here and never leaves the cluster.
//!
//! The CA Secret is the only Secret read (issue 22 item 3: no cluster-wide Secret read; the
//! manager may `get` Secrets named [`CA_SECRET`] and no other in an install namespace): it also
//! keeps each serving certificate (`<secret>.tls.crt`, `<secret>.tls.key`) and what the plan
//! reads of it (`<secret>.facts`: validity end, the CA that signed it, the names it covers).
//! The serving Secrets the operator mounts are written from there, never read back.

use base64::Engine as _;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::jiff::Timestamp;
use kube::api::Api;
use pom_policy::certificates::{
    self, CA_VALIDITY_SECONDS, CaAction, CaFacts, SERVING_VALIDITY_SECONDS, ServingFacts,
};
use pom_policy::serving_roll::{self, TemplateFacts, TemplateHash};
use pom_render::WebhookService;
use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::error::Error;

/// The Secret of POM's webhook CA in an install namespace.
pub const CA_SECRET: &str = "pom-webhook-ca";
const CA_CERT_KEY: &str = "ca.crt";
const CA_KEY_KEY: &str = "ca.key";
const CA_BUNDLE_KEY: &str = "ca-bundle.crt";
const PREVIOUS_CA_KEY: &str = "previous-ca.crt";
const NOT_AFTER: &str = "platform.openshift.io/not-after";
const PREVIOUS_NOT_AFTER: &str = "platform.openshift.io/previous-not-after";
const FINGERPRINT: &str = "platform.openshift.io/fingerprint";
const SIGNED_BY: &str = "platform.openshift.io/signed-by";
const DNS_NAMES: &str = "platform.openshift.io/dns-names";
const TLS_CERT_KEY: &str = "tls.crt";
const TLS_KEY_KEY: &str = "tls.key";
/// Where OLM v0 puts the CA of a serving Secret (`certresources.go`, `OLMCAPEMKey`): operators
/// written for OLM read it (to set a CRD's conversion or a ServiceMonitor's CA), so POM's
/// serving Secrets carry POM's there too, and an adopted Secret's apply replaces OLM's.
const OLM_CA_PEM_KEY: &str = "olmCAKey";
/// The suffix of the key, in the CA Secret, of a serving certificate's facts (JSON).
const FACTS_SUFFIX: &str = "facts";
/// OLM v0's CA, in the CA Secret, while POM's webhooks trust it after adopting
/// (`pom_policy::adopt::webhooks::trusted_olm_ca`: until it expires).
const OLM_CA_KEY: &str = "olm-ca.crt";
/// The prefix of the key, in the CA Secret, of POM's `olmcahash` for a serving Deployment when
/// OLM's value was first kept (adoption), recorded while OLM's CA is: a later value differs
/// only by a renewal, which rolls the pods (`serving_roll::TemplateFacts::pom_at_adoption`).
const POM_AT_ADOPTION_PREFIX: &str = "pom-at-adoption.";
/// POM's values are its prefix and a hex SHA-256 (68 bytes); a longer record is not POM's
/// and is read as none (then the current value is recorded).
const MAX_RECORDED_VALUE_BYTES: usize = 128;

/// What the certificates' consumers depend on beyond the CA Secret: what POM's webhooks are
/// to trust of OLM v0's CA beside POM's own, and what the serving Deployments' pod-template
/// annotation is decided by (`pom_policy::serving_roll`).
#[derive(Debug, Clone, Default)]
pub struct OlmTrust {
    /// The CA read from OLM's objects now (when the PlatformOperator adopts, or its adoption
    /// has not settled).
    pub read: Option<String>,
    /// The PlatformOperator adopts now: no pod template may change.
    pub adopting: bool,
    /// A hop to another bundle: the pods roll anyway, so POM's value applies at once.
    pub hopping: bool,
}

/// The Secrets to apply, the caBundle (PEM) the webhooks are to trust, and the annotation
/// each serving Deployment's pod template is to carry.
pub struct Provided {
    pub secrets: Vec<Value>,
    pub ca_bundle: String,
    /// POM's value per serving Deployment (`pom_policy::serving_roll`), by name.
    pom_values: std::collections::BTreeMap<String, String>,
    pub templates: Vec<TemplateHashOf>,
}

/// The `olmcahash` a serving Deployment's pod template is to carry, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateHashOf {
    pub deployment: String,
    /// `None`: none is set (an adopted template without one).
    pub value: Option<String>,
    pub decision: TemplateHash,
}

/// What the cluster holds of a serving Deployment: its template's annotation, and whether it
/// rolled out.
#[derive(Debug, Clone, PartialEq, Eq)]
struct LiveDeployment {
    name: String,
    running: Option<String>,
    rolled_out: bool,
}

/// Why a certificate could not be issued.
#[derive(Debug, thiserror::Error)]
pub enum CertError {
    #[error("generating a key or certificate: {0}")]
    Generate(#[from] rcgen::Error),
    #[error(
        "Secret {namespace}/{name} holds no usable {key}; delete the Secret and POM issues a new one"
    )]
    Unusable {
        namespace: String,
        name: String,
        key: &'static str,
    },
}

/// The CA and serving-certificate Secrets of `namespace` for `services`, issued or renewed
/// as the plan says, as of `now`, and the annotation of each serving Deployment's template
/// (read live: adoption keeps OLM's value, `pom_policy::serving_roll`).
pub async fn provide(
    client: &kube::Client,
    namespace: &str,
    services: &[WebhookService],
    po: &str,
    now: Timestamp,
    olm: &OlmTrust,
) -> Result<Provided, Error> {
    let ca = Api::<Secret>::namespaced(client.clone(), namespace)
        .get_opt(CA_SECRET)
        .await
        .map_err(Error::kube(format!(
            "reading Secret {namespace}/{CA_SECRET}"
        )))?;
    // Only POM's own CA for this PO is trusted to sign: one an admin left, or planted, under
    // that name is refused rather than used or overwritten.
    if let Some(ca) = &ca
        && ca
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(pom_api::labels::OWNER_PO))
            != Some(&pom_api::labels::label_value(po))
    {
        return Err(Error::SecretExists {
            namespace: namespace.to_owned(),
            name: CA_SECRET.to_owned(),
        });
    }
    let mut provided =
        issue(namespace, services, ca.as_ref(), now.as_second()).map_err(|source| {
            Error::WebhookCertificates {
                namespace: namespace.to_owned(),
                source: Box::new(source),
            }
        })?;
    // The live templates matter only where OLM's pods may run (L1): a PO that adopts or
    // hands over, or one whose CA Secret records OLM's CA; elsewhere no read.
    let olms_recorded = ca
        .as_ref()
        .and_then(|ca| ca.data.as_ref())
        .is_some_and(|data| data.contains_key(OLM_CA_KEY));
    let live = if olm.adopting || olm.read.is_some() || olms_recorded {
        live_deployments(client, namespace, services).await?
    } else {
        Vec::new()
    };
    let olm_until = trust_olm_ca(&mut provided, ca.as_ref(), olm, now.as_second(), &live);
    let at_adoption = record_pom_at_adoption(&mut provided, ca.as_ref(), olm_until.is_some());
    provided.templates = templates(
        &provided.pom_values,
        (&live, &at_adoption),
        olm_until,
        olm,
        now.as_second(),
    );
    Ok(provided)
}

/// The serving Deployments as the cluster holds them (one read each: a bundle has a few).
async fn live_deployments(
    client: &kube::Client,
    namespace: &str,
    services: &[WebhookService],
) -> Result<Vec<LiveDeployment>, Error> {
    let api = Api::<Deployment>::namespaced(client.clone(), namespace);
    let names: std::collections::BTreeSet<&str> =
        services.iter().map(|s| s.deployment.as_str()).collect();
    let mut live = Vec::with_capacity(names.len());
    for name in names {
        let deployment = api.get_opt(name).await.map_err(Error::kube(format!(
            "reading Deployment {namespace}/{name}"
        )))?;
        live.push(LiveDeployment {
            name: name.to_owned(),
            running: deployment.as_ref().and_then(template_annotation),
            rolled_out: deployment
                .as_ref()
                .is_some_and(super::install::is_rolled_out),
        });
    }
    Ok(live)
}

/// The `olmcahash` of a Deployment's pod template.
fn template_annotation(deployment: &Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .metadata
        .as_ref()?
        .annotations
        .as_ref()?
        .get(serving_roll::ANNOTATION)
        .cloned()
}

/// POM's value per serving Deployment when OLM's value was first kept: the one the CA Secret
/// records, else the current one (adopting now, or an adoption from before the record), and
/// recorded again in the CA Secret while OLM's CA is trusted (`olm_trusted`); once it is not,
/// the record leaves with it (no pod may serve OLM's certificate then).
fn record_pom_at_adoption(
    provided: &mut Provided,
    ca_secret: Option<&Secret>,
    olm_trusted: bool,
) -> std::collections::BTreeMap<String, String> {
    let recorded = |deployment: &str| {
        let bytes = ca_secret?
            .data
            .as_ref()?
            .get(&format!("{POM_AT_ADOPTION_PREFIX}{deployment}"))?;
        let value = std::str::from_utf8(&bytes.0).ok()?;
        (value.len() <= MAX_RECORDED_VALUE_BYTES && serving_roll::is_poms(value))
            .then(|| value.to_owned())
    };
    let at_adoption: std::collections::BTreeMap<String, String> = provided
        .pom_values
        .iter()
        .map(|(deployment, pom)| {
            let value = recorded(deployment).unwrap_or_else(|| pom.clone());
            (deployment.clone(), value)
        })
        .collect();
    if olm_trusted && let Some(ca) = provided.secrets.first_mut() {
        for (deployment, value) in &at_adoption {
            ca["data"][format!("{POM_AT_ADOPTION_PREFIX}{deployment}")] = json!(b64(value));
        }
    }
    at_adoption
}

/// Each serving Deployment's annotation as `serving_roll::template_hash` decides it.
fn templates(
    pom_values: &std::collections::BTreeMap<String, String>,
    (live, at_adoption): (
        &[LiveDeployment],
        &std::collections::BTreeMap<String, String>,
    ),
    olm_ca_until: Option<i64>,
    olm: &OlmTrust,
    now: i64,
) -> Vec<TemplateHashOf> {
    pom_values
        .iter()
        .map(|(deployment, pom)| {
            let running = live
                .iter()
                .find(|l| l.name == *deployment)
                .and_then(|l| l.running.as_deref());
            let decision = serving_roll::template_hash(&TemplateFacts {
                pom,
                running,
                olm_ca_until,
                pom_at_adoption: at_adoption.get(deployment).map(String::as_str),
                adopting: olm.adopting,
                hopping: olm.hopping,
                now,
            });
            TemplateHashOf {
                deployment: deployment.clone(),
                value: decision.value(pom).map(str::to_owned),
                decision,
            }
        })
        .collect()
}

/// Sets each serving Deployment's pod-template annotation in `objects` (the bundle's, beside
/// [`pom_render::webhooks::inject_ca_bundle`]): changing it rolls the pods, so they start
/// with the certificate the Secret holds now (module `pom_policy::serving_roll`).
pub fn annotate_templates(objects: &mut [Value], templates: &[TemplateHashOf]) {
    for TemplateHashOf {
        deployment, value, ..
    } in templates
    {
        let Some(value) = value else { continue };
        let Some(object) = objects.iter_mut().find(|o| {
            o["kind"] == "Deployment"
                && o["apiVersion"] == "apps/v1"
                && o["metadata"]["name"] == *deployment
        }) else {
            continue;
        };
        let Some(spec) = object.get_mut("spec").and_then(Value::as_object_mut) else {
            continue;
        };
        let template = spec.entry("template").or_insert_with(|| json!({}));
        if let Some(template) = template.as_object_mut() {
            let metadata = template.entry("metadata").or_insert_with(|| json!({}));
            if let Some(metadata) = metadata.as_object_mut() {
                let annotations = metadata.entry("annotations").or_insert_with(|| json!({}));
                if let Some(annotations) = annotations.as_object_mut() {
                    annotations.insert(serving_roll::ANNOTATION.to_owned(), json!(value));
                }
            }
        }
    }
}

/// Adds OLM v0's CA to what the webhooks trust while `trusted_olm_ca` says so (until it
/// expires, or every serving pod started under POM's value), and records it in the CA Secret,
/// which a restart reads back; no longer trusted, it is left out of both (the apply then
/// removes it). Returns its expiry while trusted.
fn trust_olm_ca(
    provided: &mut Provided,
    ca_secret: Option<&Secret>,
    olm: &OlmTrust,
    now: i64,
    live: &[LiveDeployment],
) -> Option<i64> {
    use pom_policy::adopt::webhooks::trusted_olm_ca;
    let poms = provided.ca_bundle.as_str();
    let recorded = ca_secret
        .and_then(|secret| secret.data.as_ref()?.get(OLM_CA_KEY))
        .and_then(|b| std::str::from_utf8(&b.0).ok())
        .and_then(|pem| olm_ca(pem, poms, now));
    let read = olm.read.as_deref().and_then(|pem| olm_ca(pem, poms, now));
    let seen: Vec<serving_roll::LiveServing<'_>> = live
        .iter()
        .map(|l| serving_roll::LiveServing {
            running: l.running.as_deref(),
            rolled_out: l.rolled_out,
        })
        .collect();
    let may_serve_olms = serving_roll::olm_ca_still_served(&seen);
    let trusted = trusted_olm_ca(recorded.as_ref(), read.as_ref(), now, may_serve_olms)?;
    if let Some(ca) = provided.secrets.first_mut() {
        ca["data"][OLM_CA_KEY] = json!(b64(&trusted.pem));
    }
    if !provided.ca_bundle.ends_with('\n') {
        provided.ca_bundle.push('\n');
    }
    provided.ca_bundle.push_str(&trusted.pem);
    Some(trusted.until)
}

/// OLM's CA in `pem`: each of its certificates that is not one of POM's own (`poms`, the
/// bundle of POM's CAs: a CRD POM applied holds both in its conversion caBundle, and OLM
/// labels the CRDs of a CSV it runs as its own, so what is read back may be POM's) nor expired
/// at `now`, each once, with the latest expiry among them; `None` when `pem` is over
/// `MAX_OLM_CA_BYTES` (checked before parsing) or holds no such certificate. Without this, a
/// CA read back from POM's own apply would be added again at every reconcile.
fn olm_ca(pem: &str, poms: &str, now: i64) -> Option<pom_policy::adopt::webhooks::TrustedOlmCa> {
    use pom_policy::adopt::webhooks::{MAX_OLM_CA_BYTES, TrustedOlmCa};
    if pem.len() > MAX_OLM_CA_BYTES {
        return None;
    }
    let own: std::collections::HashSet<Vec<u8>> = certificates(poms).map(|(der, _)| der).collect();
    let mut seen = std::collections::HashSet::new();
    let mut kept = String::new();
    let mut until = None;
    for (der, not_after) in certificates(pem) {
        if not_after <= now || own.contains(&der) || !seen.insert(der.clone()) {
            continue;
        }
        kept.push_str(&pem_text(&der));
        until = until.max(Some(not_after));
    }
    Some(TrustedOlmCa {
        pem: kept,
        until: until?,
    })
}

/// The certificates of a PEM bundle (DER) with each one's `notAfter`; blocks that are not
/// certificates are skipped.
fn certificates(pem: &str) -> impl Iterator<Item = (Vec<u8>, i64)> + '_ {
    x509_parser::pem::Pem::iter_from_buffer(pem.as_bytes())
        .filter_map(Result::ok)
        .filter_map(|block| {
            let not_after = block.parse_x509().ok()?.validity().not_after.timestamp();
            Some((block.contents, not_after))
        })
}

/// One certificate (DER) as PEM.
fn pem_text(der: &[u8]) -> String {
    use base64::Engine;
    let encoded = base64::engine::general_purpose::STANDARD.encode(der);
    let mut text = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in encoded.as_bytes().chunks(64) {
        text.push_str(std::str::from_utf8(line).unwrap_or_default());
        text.push('\n');
    }
    text.push_str("-----END CERTIFICATE-----\n");
    text
}

/// The issuing itself, given the CA Secret read (no I/O; randomness only).
fn issue(
    namespace: &str,
    services: &[WebhookService],
    ca_secret: Option<&Secret>,
    now: i64,
) -> Result<Provided, CertError> {
    let serving_secrets: Vec<Option<Secret>> = services
        .iter()
        .map(|service| ca_secret.and_then(|ca| kept_serving(ca, &service.secret)))
        .collect();
    let wanted = wanted_serving(services, &serving_secrets);
    let ca_facts = ca_secret.and_then(ca_facts);
    let plan = certificates::plan(ca_facts.as_ref(), &wanted, now);

    let ca = signing_ca(&plan, ca_secret, ca_facts.as_ref(), namespace, now)?;
    let (ca_annotations, mut ca_data) = ca.record();
    let issuer = ca.issuer(namespace)?;
    let mut secrets = Vec::with_capacity(services.len() + 1);
    let mut served: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    for (index, (service, (names, _))) in services.iter().zip(&wanted).enumerate() {
        let kept = serving_secrets
            .get(index)
            .and_then(Option::as_ref)
            .filter(|_| !plan.issue_serving.contains(&index));
        let serving = serving_certificate(kept, names, &issuer, namespace, &service.secret, now)?;
        let facts = json!({
            NOT_AFTER: serving.not_after,
            SIGNED_BY: ca.fingerprint,
            DNS_NAMES: names.join(","),
        });
        record_serving(&mut ca_data, &service.secret, &serving, &facts);
        served
            .entry(service.deployment.clone())
            .or_default()
            .push(serving.cert.clone());
        secrets.push(serving_secret(
            namespace,
            &service.secret,
            &serving,
            facts,
            &ca.bundle,
        ));
    }
    secrets.insert(
        0,
        secret_object(namespace, CA_SECRET, "Opaque", ca_annotations, ca_data),
    );
    Ok(Provided {
        secrets,
        ca_bundle: ca.bundle,
        pom_values: served
            .into_iter()
            .map(|(deployment, certificates)| (deployment, pom_value(&certificates)))
            .collect(),
        templates: Vec::new(),
    })
}

/// POM's `olmcahash` for a Deployment serving `certificates` (PEM, in its Services' order):
/// `serving_roll::POM_VALUE_PREFIX` and their SHA-256. The serving certificates only, never
/// the caBundle: dropping OLM's CA from what the webhooks trust rolls nothing.
fn pom_value(certificates: &[String]) -> String {
    let mut hasher = Sha256::new();
    for pem in certificates {
        hasher.update(pem.as_bytes());
        hasher.update([0]);
    }
    format!(
        "{}{}",
        serving_roll::POM_VALUE_PREFIX,
        hex::encode(hasher.finalize())
    )
}

/// What the plan is asked to judge, per Service: the names its certificate must cover
/// (sorted, so an unchanged set never reads as a change) and what the kept one records.
fn wanted_serving(
    services: &[WebhookService],
    serving_secrets: &[Option<Secret>],
) -> Vec<(Vec<String>, Option<ServingFacts>)> {
    services
        .iter()
        .zip(serving_secrets)
        .map(|(service, secret)| {
            (
                sorted(service.dns_names()),
                secret.as_ref().and_then(serving_facts),
            )
        })
        .collect()
}

/// The CA that signs a namespace's serving certificates, and the bundle its webhooks trust.
struct SigningCa {
    cert: String,
    key: String,
    /// The CA this one replaced, with its validity end: still trusted until then, so
    /// certificates it signed keep working while they are reissued.
    previous: Option<(String, i64)>,
    not_after: i64,
    fingerprint: String,
    /// The current CA, then the previous one while it is kept.
    bundle: String,
}

/// The CA to sign with, as the plan says: the one the Secret holds (its previous one kept
/// unless the plan drops it), or a new one (on renewal, the one it replaces kept as previous).
fn signing_ca(
    plan: &certificates::CertificatePlan,
    ca_secret: Option<&Secret>,
    ca_facts: Option<&CaFacts>,
    namespace: &str,
    now: i64,
) -> Result<SigningCa, CertError> {
    let (cert, key, previous) = match (plan.ca, ca_secret) {
        (CaAction::Keep, Some(secret)) => {
            let cert = text(secret, CA_CERT_KEY, namespace, CA_SECRET)?;
            let key = text(secret, CA_KEY_KEY, namespace, CA_SECRET)?;
            let previous = text(secret, PREVIOUS_CA_KEY, namespace, CA_SECRET)
                .ok()
                .zip(annotation(secret, PREVIOUS_NOT_AFTER).and_then(|v| v.parse().ok()))
                .filter(|_| !plan.drop_previous);
            (cert, key, previous)
        }
        (action, current) => {
            let previous = (action == CaAction::Renew)
                .then(|| {
                    let secret = current?;
                    let cert = text(secret, CA_CERT_KEY, namespace, CA_SECRET).ok()?;
                    let end = annotation(secret, NOT_AFTER)?.parse::<i64>().ok()?;
                    Some((cert, end))
                })
                .flatten();
            let (cert, key) = new_ca(namespace, now)?;
            (cert, key, previous)
        }
    };
    let not_after = match plan.ca {
        CaAction::Keep => ca_facts.map_or(now, |f| f.not_after),
        CaAction::Issue | CaAction::Renew => now + CA_VALIDITY_SECONDS,
    };
    let fingerprint = fingerprint(&cert);
    let mut bundle = cert.clone();
    if let Some((previous_cert, _)) = &previous {
        bundle.push_str(previous_cert);
    }
    Ok(SigningCa {
        cert,
        key,
        previous,
        not_after,
        fingerprint,
        bundle,
    })
}

impl SigningCa {
    /// The CA Secret's annotations (what the next plan reads of the CA) and data (the key pair,
    /// the bundle, the previous CA); the serving records are added to the data as issued.
    fn record(&self) -> (Value, Value) {
        let mut annotations = json!({
            NOT_AFTER: self.not_after.to_string(),
            FINGERPRINT: self.fingerprint,
        });
        let mut data = json!({
            CA_CERT_KEY: b64(&self.cert),
            CA_KEY_KEY: b64(&self.key),
            CA_BUNDLE_KEY: b64(&self.bundle),
        });
        if let Some((previous_cert, end)) = &self.previous {
            annotations[PREVIOUS_NOT_AFTER] = json!(end.to_string());
            data[PREVIOUS_CA_KEY] = json!(b64(previous_cert));
        }
        (annotations, data)
    }

    /// The issuer serving certificates are signed by; a key or certificate that does not parse
    /// is named, so the admin knows which Secret to delete.
    fn issuer(&self, namespace: &str) -> Result<Issuer<'static, KeyPair>, CertError> {
        let unusable = |key| CertError::Unusable {
            namespace: namespace.to_owned(),
            name: CA_SECRET.to_owned(),
            key,
        };
        let issuer_key = KeyPair::from_pem(&self.key).map_err(|_| unusable(CA_KEY_KEY))?;
        Issuer::from_ca_cert_pem(&self.cert, issuer_key).map_err(|_| unusable(CA_CERT_KEY))
    }
}

/// One Service's serving certificate: its key pair and validity end (`NOT_AFTER`'s text).
struct Serving {
    cert: String,
    key: String,
    not_after: String,
}

/// The serving certificate `kept` records when the plan keeps it, else a new one for `names`
/// signed by `issuer`.
fn serving_certificate(
    kept: Option<&Secret>,
    names: &[String],
    issuer: &Issuer<'_, KeyPair>,
    namespace: &str,
    secret: &str,
    now: i64,
) -> Result<Serving, CertError> {
    Ok(match kept {
        Some(kept) => Serving {
            cert: text(kept, TLS_CERT_KEY, namespace, secret)?,
            key: text(kept, TLS_KEY_KEY, namespace, secret)?,
            not_after: annotation(kept, NOT_AFTER).unwrap_or_default().to_owned(),
        },
        None => {
            let (cert, key) = new_serving(names, issuer, now)?;
            Serving {
                cert,
                key,
                not_after: (now + SERVING_VALIDITY_SECONDS).to_string(),
            }
        }
    })
}

/// Records serving certificate `secret` in the CA Secret's data: the one Secret read back,
/// so the next plan judges it without reading the serving Secret.
fn record_serving(ca_data: &mut Value, secret: &str, serving: &Serving, facts: &Value) {
    ca_data[format!("{secret}.{TLS_CERT_KEY}")] = json!(b64(&serving.cert));
    ca_data[format!("{secret}.{TLS_KEY_KEY}")] = json!(b64(&serving.key));
    ca_data[format!("{secret}.{FACTS_SUFFIX}")] = json!(b64(&facts.to_string()));
}

/// The `kubernetes.io/tls` Secret the operator mounts: the key pair it serves with, the CA
/// bundle as `ca.crt` and again as [`OLM_CA_PEM_KEY`], and its facts as annotations.
fn serving_secret(
    namespace: &str,
    name: &str,
    serving: &Serving,
    facts: Value,
    ca_bundle: &str,
) -> Value {
    secret_object(
        namespace,
        name,
        "kubernetes.io/tls",
        facts,
        json!({
            TLS_CERT_KEY: b64(&serving.cert),
            TLS_KEY_KEY: b64(&serving.key),
            "ca.crt": b64(ca_bundle),
            OLM_CA_PEM_KEY: b64(ca_bundle),
        }),
    )
}

fn new_ca(namespace: &str, now: i64) -> Result<(String, String), CertError> {
    let mut params = CertificateParams::new(Vec::<String>::new())?;
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.distinguished_name.push(
        DnType::CommonName,
        format!("pom-webhook-ca@{namespace}@{now}"),
    );
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params.not_before = at(now - 60);
    params.not_after = at(now + CA_VALIDITY_SECONDS);
    let key = KeyPair::generate()?;
    let cert = params.self_signed(&key)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn new_serving(
    names: &[String],
    issuer: &Issuer<'_, KeyPair>,
    now: i64,
) -> Result<(String, String), CertError> {
    let mut params = CertificateParams::new(names.to_vec())?;
    if let Some(first) = names.first() {
        params
            .distinguished_name
            .push(DnType::CommonName, first.as_str());
    }
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.not_before = at(now - 60);
    params.not_after = at(now + SERVING_VALIDITY_SECONDS);
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, issuer)?;
    Ok((cert.pem(), key.serialize_pem()))
}

fn at(unix: i64) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp(unix).unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

fn secret_object(
    namespace: &str,
    name: &str,
    type_: &str,
    annotations: Value,
    data: Value,
) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "type": type_,
        "data": data,
    })
}

fn ca_facts(secret: &Secret) -> Option<CaFacts> {
    Some(CaFacts {
        not_after: annotation(secret, NOT_AFTER)?.parse().ok()?,
        fingerprint: annotation(secret, FINGERPRINT)?.to_owned(),
        previous_not_after: annotation(secret, PREVIOUS_NOT_AFTER).and_then(|v| v.parse().ok()),
    })
    // A CA whose key or certificate is gone is no CA.
    .filter(|_| {
        let data = secret.data.as_ref();
        data.is_some_and(|d| d.contains_key(CA_CERT_KEY) && d.contains_key(CA_KEY_KEY))
    })
}

/// The serving certificate of Secret `name` as the CA Secret keeps it, in the shape of the
/// serving Secret (its key pair as data, its facts as annotations); `None` when not kept (a
/// namespace from before this record, or a new Service: the plan issues one).
fn kept_serving(ca: &Secret, name: &str) -> Option<Secret> {
    let data = ca.data.as_ref()?;
    let get = |suffix: &str| data.get(&format!("{name}.{suffix}")).cloned();
    let facts: std::collections::BTreeMap<String, String> =
        serde_json::from_slice(&get(FACTS_SUFFIX)?.0).ok()?;
    Some(Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.to_owned()),
            annotations: Some(facts),
            ..kube::api::ObjectMeta::default()
        },
        data: Some(std::collections::BTreeMap::from([
            (TLS_CERT_KEY.to_owned(), get(TLS_CERT_KEY)?),
            (TLS_KEY_KEY.to_owned(), get(TLS_KEY_KEY)?),
        ])),
        ..Secret::default()
    })
}

fn serving_facts(secret: &Secret) -> Option<ServingFacts> {
    let data = secret.data.as_ref()?;
    if !data.contains_key(TLS_CERT_KEY) || !data.contains_key(TLS_KEY_KEY) {
        return None;
    }
    Some(ServingFacts {
        not_after: annotation(secret, NOT_AFTER)?.parse().ok()?,
        signed_by: annotation(secret, SIGNED_BY)?.to_owned(),
        dns_names: sorted(
            annotation(secret, DNS_NAMES)?
                .split(',')
                .map(str::to_owned)
                .collect(),
        ),
    })
}

fn annotation<'a>(secret: &'a Secret, key: &str) -> Option<&'a str> {
    secret
        .metadata
        .annotations
        .as_ref()?
        .get(key)
        .map(String::as_str)
}

fn text(
    secret: &Secret,
    key: &'static str,
    namespace: &str,
    name: &str,
) -> Result<String, CertError> {
    secret
        .data
        .as_ref()
        .and_then(|d| d.get(key))
        .and_then(|bytes| String::from_utf8(bytes.0.clone()).ok())
        .ok_or_else(|| CertError::Unusable {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            key,
        })
}

fn fingerprint(pem: &str) -> String {
    hex::encode(Sha256::digest(pem.as_bytes()))
}

fn b64(text: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(text.as_bytes())
}

fn sorted(mut names: Vec<String>) -> Vec<String> {
    names.sort();
    names
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]
    use super::*;
    use k8s_openapi::ByteString;

    const NOW: i64 = 1_800_000_000;

    fn service() -> WebhookService {
        WebhookService {
            namespace: "ns".into(),
            name: "op-service".into(),
            secret: "op-service-cert".into(),
            deployment: "op".into(),
        }
    }

    /// What the API server would hold after applying `object`.
    fn as_secret(object: &Value) -> Secret {
        let mut object = object.clone();
        let data: std::collections::BTreeMap<String, ByteString> = object["data"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(k, v)| {
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(v.as_str().unwrap())
                    .unwrap();
                (k.clone(), ByteString(bytes))
            })
            .collect();
        object["data"] = serde_json::to_value(data).unwrap();
        serde_json::from_value(object).unwrap()
    }

    fn verify(serving: &Secret, ca_bundle: &str, name: &str, at: i64) {
        use rustls::client::danger::ServerCertVerifier as _;
        use rustls::pki_types::pem::PemObject;
        use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for ca in CertificateDer::pem_slice_iter(ca_bundle.as_bytes()) {
            roots.add(ca.unwrap()).unwrap();
        }
        let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(
            std::sync::Arc::new(roots),
            provider,
        )
        .build()
        .unwrap();
        let cert =
            CertificateDer::from_pem_slice(&serving.data.as_ref().unwrap()["tls.crt"].0).unwrap();
        verifier
            .verify_server_cert(
                &cert,
                &[],
                &ServerName::try_from(name.to_owned()).unwrap(),
                &[],
                UnixTime::since_unix_epoch(std::time::Duration::from_secs(
                    u64::try_from(at).unwrap(),
                )),
            )
            .unwrap();
    }

    #[test]
    fn a_first_issue_gives_a_serving_certificate_the_bundle_verifies() {
        let provided = issue("ns", &[service()], None, NOW).unwrap();
        assert_eq!(provided.secrets.len(), 2);
        let serving = as_secret(&provided.secrets[1]);
        assert_eq!(serving.type_.as_deref(), Some("kubernetes.io/tls"));
        let data = serving.data.as_ref().unwrap();
        assert_eq!(
            data[OLM_CA_PEM_KEY], data["ca.crt"],
            "OLM's field, POM's CA"
        );
        verify(
            &serving,
            &provided.ca_bundle,
            "op-service.ns.svc",
            NOW + 3600,
        );
    }

    /// Adopting from OLM v0: OLM's CA is trusted beside POM's until it expires (an operator
    /// written for OLM serves OLM's certificate until its pods restart), recorded in the CA
    /// Secret so that a restart, or OLM's objects gone, keeps it; expired, it is dropped from
    /// the bundle and the Secret. A PEM that is no certificate is never trusted.
    #[test]
    fn olms_ca_is_trusted_until_it_expires_across_restarts() {
        let expires = NOW + 86_400;
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_after = time::OffsetDateTime::from_unix_timestamp(expires).unwrap();
        let olm_pem = params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        let adopting = OlmTrust {
            read: Some(olm_pem.clone()),
            ..OlmTrust::default()
        };
        let mut first = issue("ns", &[service()], None, NOW).unwrap();
        let poms = first.ca_bundle.clone();
        trust_olm_ca(&mut first, None, &adopting, NOW, &[]);
        assert!(first.ca_bundle.starts_with(&poms) && first.ca_bundle.ends_with(&olm_pem));
        assert_eq!(first.ca_bundle.matches("BEGIN CERTIFICATE").count(), 2);
        // What a CRD POM applied holds (POM's CA and OLM's), read back as OLM's, with OLM's
        // repeated: OLM's CA once, never POM's own again (the bundle does not grow reconcile
        // by reconcile).
        let recorded = as_secret(&first.secrets[0]);
        let read_back = OlmTrust {
            read: Some(format!("{}{olm_pem}", first.ca_bundle)),
            ..OlmTrust::default()
        };
        let mut again = issue("ns", &[service()], Some(&recorded), NOW + 1).unwrap();
        assert_eq!(again.ca_bundle, poms, "the same CA of POM's");
        trust_olm_ca(&mut again, Some(&recorded), &read_back, NOW + 1, &[]);
        assert_eq!(again.ca_bundle, first.ca_bundle);
        let ca = as_secret(&first.secrets[0]);
        // A restart long after, OLM's objects gone: the recorded CA is still trusted.
        let mut later = issue("ns", &[service()], Some(&ca), expires - 1).unwrap();
        trust_olm_ca(
            &mut later,
            Some(&ca),
            &OlmTrust::default(),
            expires - 1,
            &[],
        );
        assert!(later.ca_bundle.ends_with(&olm_pem));
        let ca = as_secret(&later.secrets[0]);
        // Expired: POM's CA alone, and the Secret no longer records OLM's.
        let mut expired = issue("ns", &[service()], Some(&ca), expires).unwrap();
        trust_olm_ca(&mut expired, Some(&ca), &OlmTrust::default(), expires, &[]);
        assert!(!expired.ca_bundle.contains(&olm_pem));
        let ca = as_secret(&expired.secrets[0]);
        assert!(!ca.data.as_ref().unwrap().contains_key(OLM_CA_KEY));
        // Not a certificate: not trusted.
        let garbage = OlmTrust {
            read: Some("-----BEGIN CERTIFICATE-----\nOLM\n-----END CERTIFICATE-----\n".into()),
            ..OlmTrust::default()
        };
        let mut none = issue("ns", &[service()], None, NOW).unwrap();
        let alone = none.ca_bundle.clone();
        trust_olm_ca(&mut none, None, &garbage, NOW, &[]);
        assert_eq!(none.ca_bundle, alone);
    }

    #[test]
    fn a_steady_namespace_reissues_nothing() {
        let first = issue("ns", &[service()], None, NOW).unwrap();
        let ca = as_secret(&first.secrets[0]);
        let again = issue("ns", &[service()], Some(&ca), NOW + 60).unwrap();
        assert_eq!(
            again.secrets, first.secrets,
            "nothing changes, nothing is written"
        );
        assert_eq!(again.ca_bundle, first.ca_bundle);
    }

    /// A CA Secret written before it kept the serving certificates (issue 22 item 3): the CA
    /// is kept (the webhooks go on trusting it) and only the serving certificate is issued
    /// again, into the record the next plan reads.
    #[test]
    fn a_ca_secret_without_the_serving_record_keeps_the_ca_and_reissues_the_serving_certificate() {
        let first = issue("ns", &[service()], None, NOW).unwrap();
        let mut ca = as_secret(&first.secrets[0]);
        ca.data
            .as_mut()
            .unwrap()
            .retain(|key, _| !key.starts_with("op-service-cert."));
        let again = issue("ns", &[service()], Some(&ca), NOW + 60).unwrap();
        assert_eq!(again.ca_bundle, first.ca_bundle, "the CA is kept");
        assert_ne!(
            again.secrets[1], first.secrets[1],
            "the serving certificate is new"
        );
        let kept = as_secret(&again.secrets[0]);
        assert!(kept.data.unwrap().contains_key("op-service-cert.tls.crt"));
        let steady = issue(
            "ns",
            &[service()],
            Some(&as_secret(&again.secrets[0])),
            NOW + 120,
        )
        .unwrap();
        assert_eq!(steady.secrets, again.secrets, "then steady");
    }

    /// Renewal without downtime: the new bundle trusts both the certificate pods still serve
    /// and the new one; once the previous CA expires it leaves the bundle.
    #[test]
    fn a_renewed_ca_keeps_the_previous_one_in_the_bundle_until_it_expires() {
        let day = 24 * 3600;
        let issued = issue("ns", &[service()], None, NOW).unwrap();
        // The serving certificate is renewed (by the same CA) before its own end.
        let at = NOW + SERVING_VALIDITY_SECONDS - certificates::SERVING_RENEW_BEFORE_SECONDS + day;
        let first = issue("ns", &[service()], Some(&as_secret(&issued.secrets[0])), at).unwrap();
        assert_eq!(first.ca_bundle, issued.ca_bundle, "same CA");
        assert_ne!(first.secrets[1], issued.secrets[1], "serving renewed");
        let old_serving = as_secret(&first.secrets[1]);
        let later = NOW + CA_VALIDITY_SECONDS - certificates::CA_RENEW_BEFORE_SECONDS + 1;
        let renewed = issue(
            "ns",
            &[service()],
            Some(&as_secret(&first.secrets[0])),
            later,
        )
        .unwrap();
        assert!(
            renewed.ca_bundle.contains(&first.ca_bundle),
            "the old CA stays trusted"
        );
        let new_serving = as_secret(&renewed.secrets[1]);
        assert_ne!(
            new_serving.data, old_serving.data,
            "re-issued by the new CA"
        );
        // Both verify against the renewed bundle: the pods may serve either while the kubelet
        // swaps the mounted Secret.
        verify(
            &old_serving,
            &renewed.ca_bundle,
            "op-service.ns.svc.cluster.local",
            later + 3600,
        );
        verify(
            &new_serving,
            &renewed.ca_bundle,
            "op-service.ns.svc",
            later + 3600,
        );
        // After the previous CA's end, it leaves the bundle.
        let after = NOW + CA_VALIDITY_SECONDS + 1;
        let dropped = issue(
            "ns",
            &[service()],
            Some(&as_secret(&renewed.secrets[0])),
            after,
        )
        .unwrap();
        assert!(!dropped.ca_bundle.contains(&first.ca_bundle));
    }

    fn pom_value_of(provided: &Provided) -> String {
        provided.pom_values["op"].clone()
    }

    /// POM's `olmcahash` names the serving certificates: steady, it is stable (no reapply
    /// loop); a serving renewal changes it, and so does a CA renewal (which re-issues the
    /// serving certificates), so both roll non-reloading pods.
    #[test]
    fn a_serving_or_ca_renewal_changes_the_template_value() {
        let issued = issue("ns", &[service()], None, NOW).unwrap();
        let first = pom_value_of(&issued);
        assert!(serving_roll::is_poms(&first));
        let steady = issue(
            "ns",
            &[service()],
            Some(&as_secret(&issued.secrets[0])),
            NOW + 60,
        )
        .unwrap();
        assert_eq!(pom_value_of(&steady), first, "steady: the same value");
        let at = NOW + SERVING_VALIDITY_SECONDS - certificates::SERVING_RENEW_BEFORE_SECONDS + 1;
        let serving = issue("ns", &[service()], Some(&as_secret(&issued.secrets[0])), at).unwrap();
        assert_eq!(serving.ca_bundle, issued.ca_bundle, "same CA");
        let renewed = pom_value_of(&serving);
        assert_ne!(renewed, first, "a serving renewal rolls");
        let later = NOW + CA_VALIDITY_SECONDS - certificates::CA_RENEW_BEFORE_SECONDS + 1;
        let ca = issue(
            "ns",
            &[service()],
            Some(&as_secret(&serving.secrets[0])),
            later,
        )
        .unwrap();
        assert_ne!(ca.ca_bundle, serving.ca_bundle, "a new CA");
        assert_ne!(pom_value_of(&ca), renewed, "a CA renewal rolls");
    }

    /// The annotation written on the Deployment: POM's value on a first install; OLM's kept
    /// while the pods may serve OLM's certificate; POM's from the deadline (announced).
    #[test]
    fn the_template_keeps_olms_value_until_the_deadline_then_carries_poms() {
        let provided = issue("ns", &[service()], None, NOW).unwrap();
        let pom = pom_value_of(&provided);
        let live = |running: Option<&str>| {
            vec![LiveDeployment {
                name: "op".into(),
                running: running.map(str::to_owned),
                rolled_out: true,
            }]
        };
        let until = NOW + 400 * 24 * 3600;
        let adopted = OlmTrust::default();
        let none = std::collections::BTreeMap::new();
        let first = templates(
            &provided.pom_values,
            (&live(None), &none),
            None,
            &adopted,
            NOW,
        );
        assert_eq!(first[0].value.as_deref(), Some(pom.as_str()));
        let kept = templates(
            &provided.pom_values,
            (&live(Some("olm")), &none),
            Some(until),
            &adopted,
            NOW,
        );
        assert_eq!(kept[0].value.as_deref(), Some("olm"));
        let deadline = serving_roll::roll_at(until);
        let rolled = templates(
            &provided.pom_values,
            (&live(Some("olm")), &none),
            Some(until),
            &adopted,
            deadline,
        );
        assert_eq!(rolled[0].value.as_deref(), Some(pom.as_str()));
        assert!(matches!(
            rolled[0].decision,
            TemplateHash::RollFromOlm { .. }
        ));
        let mut objects = vec![json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "op"}, "spec": {"template": {"spec": {}}}})];
        annotate_templates(&mut objects, &rolled);
        assert_eq!(
            objects[0]["spec"]["template"]["metadata"]["annotations"][serving_roll::ANNOTATION],
            json!(pom)
        );
    }

    /// Adopted, OLM's value is kept only while POM's value is the one recorded at adoption: a
    /// pod that restarted since serves POM's first certificate, so POM's renewal (long before
    /// OLM's deadline) rolls the pods, and an adoption from before the record records it.
    #[test]
    fn a_pom_renewal_after_adoption_rolls_before_olms_deadline() {
        let olm_pem = olm_ca_pem(NOW + 400 * 86_400);
        let olm = OlmTrust {
            read: Some(olm_pem),
            ..OlmTrust::default()
        };
        let live = vec![LiveDeployment {
            name: "op".into(),
            running: Some("olm".into()),
            rolled_out: true,
        }];
        let decide = |ca: Option<&Secret>, at: i64| {
            let mut provided = issue("ns", &[service()], ca, at).unwrap();
            let until = trust_olm_ca(&mut provided, ca, &olm, at, &live);
            assert!(until.is_some(), "OLM's CA still trusted");
            let at_adoption = record_pom_at_adoption(&mut provided, ca, until.is_some());
            let t = templates(&provided.pom_values, (&live, &at_adoption), until, &olm, at);
            (provided, t)
        };
        let (adopted, kept) = decide(None, NOW);
        let first = pom_value_of(&adopted);
        assert_eq!(kept[0].value.as_deref(), Some("olm"), "adopted: OLM's kept");
        let ca = as_secret(&adopted.secrets[0]);
        let key = format!("{POM_AT_ADOPTION_PREFIX}op");
        assert_eq!(
            ca.data.as_ref().unwrap()[&key].0,
            first.as_bytes(),
            "recorded beside OLM's CA"
        );
        let (steady, kept) = decide(Some(&ca), NOW + 86_400);
        assert_eq!(kept[0].value.as_deref(), Some("olm"), "not renewed: kept");
        let at = NOW + SERVING_VALIDITY_SECONDS - certificates::SERVING_RENEW_BEFORE_SECONDS + 1;
        let ca = as_secret(&steady.secrets[0]);
        let (renewed, rolled) = decide(Some(&ca), at);
        assert_ne!(pom_value_of(&renewed), first, "renewed");
        assert_eq!(
            rolled[0].value.as_deref(),
            Some(pom_value_of(&renewed).as_str())
        );
        assert!(matches!(
            rolled[0].decision,
            TemplateHash::RollFromOlm { renewed: true, .. }
        ));
        // An adoption from before the record: the current value is recorded, then kept.
        let mut older = as_secret(&adopted.secrets[0]);
        older.data.as_mut().unwrap().remove(&key);
        let (_, kept) = decide(Some(&older), NOW + 86_400);
        assert_eq!(kept[0].value.as_deref(), Some("olm"));
    }

    fn olm_ca_pem(not_after: i64) -> String {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_after = time::OffsetDateTime::from_unix_timestamp(not_after).unwrap();
        params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .pem()
    }

    /// OLM's CA leaves the bundle and the CA Secret once every serving Deployment carries one
    /// of POM's values and rolled out, long before it expires; rolling, it stays.
    #[test]
    fn olms_ca_is_dropped_once_every_serving_pod_started_under_poms_value() {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.not_after = time::OffsetDateTime::from_unix_timestamp(NOW + 400 * 86_400).unwrap();
        let olm_pem = params
            .self_signed(&KeyPair::generate().unwrap())
            .unwrap()
            .pem();
        let olm = OlmTrust {
            read: Some(olm_pem.clone()),
            ..OlmTrust::default()
        };
        let live = |running: &str, rolled_out| {
            vec![LiveDeployment {
                name: "op".into(),
                running: Some(running.to_owned()),
                rolled_out,
            }]
        };
        let mut rolling = issue("ns", &[service()], None, NOW).unwrap();
        let pom = pom_value_of(&rolling);
        let until = trust_olm_ca(&mut rolling, None, &olm, NOW, &live(&pom, false));
        assert!(
            until.is_some() && rolling.ca_bundle.ends_with(&olm_pem),
            "rolling: kept"
        );
        let ca = as_secret(&rolling.secrets[0]);
        let mut rolled = issue("ns", &[service()], Some(&ca), NOW + 60).unwrap();
        let until = trust_olm_ca(&mut rolled, Some(&ca), &olm, NOW + 60, &live(&pom, true));
        assert_eq!(until, None);
        assert!(!rolled.ca_bundle.contains(&olm_pem), "rolled out: dropped");
        assert!(
            !as_secret(&rolled.secrets[0])
                .data
                .unwrap()
                .contains_key(OLM_CA_KEY)
        );
    }
}
