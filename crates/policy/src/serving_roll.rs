//! Which serving certificate the pods of a webhook Deployment should serve, told by the
//! pod-template annotation OLM v0 itself rolls its pods with (`olmcahash`), where POM issues
//! the certificates (issue 36, review of session 21). Pure: the controller reads the live
//! Deployment's annotation and rollout, calls [`template_hash`] and [`olm_ca_still_served`],
//! and writes what they say.
//!
//! Why an annotation: an operator may read its serving certificate only when it starts (every
//! operator written for OLM may: OLM rotates by changing this annotation, which rolls the
//! pods). POM's value names the certificates the Deployment serves ([`pom_value`]), so a
//! renewal (of a serving certificate, or of the CA, which re-issues them) changes it and rolls
//! the pods, as OLM's rotation does; a reloading operator merely restarts once a renewal.
//!
//! After adopting from OLM v0 the pods serve OLM's certificate until they restart, and OLM's
//! serving certificate expires a day before OLM's CA ([`OLM_SERVING_EXPIRES_BEFORE_CA_SECONDS`],
//! OLM's `certs.go`). Adoption must restart nothing, so OLM's value is kept while adopting and
//! until [`OLM_ROLL_MARGIN_SECONDS`] before OLM's serving certificate expires; then POM's value
//! rolls the pods (announced). A hop rolls the pods anyway: POM's value then applies at once.
//!
//! Kept past adoption, OLM's value would also hide POM's own renewals: a pod that restarted
//! after adoption (a drain, a crash) serves the certificate POM issued then, which expires long
//! before OLM's CA does. So POM's value at adoption is recorded ([`TemplateFacts::pom_at_adoption`]),
//! and once POM's value differs (a renewal) the pods roll at once (review of session 22, H1).

use crate::adopt::webhooks::OLM_CA_HASH_ANNOTATION;

/// The pod-template annotation that names the certificate the pods serve (OLM's own).
pub const ANNOTATION: &str = OLM_CA_HASH_ANNOTATION;
/// POM's values begin so; OLM's (a hash of its CA, hex) never do. What tells "the pods started
/// after POM wrote its certificate" from "the pods may serve OLM's" without reading a Pod.
pub const POM_VALUE_PREFIX: &str = "pom-";
/// OLM v0 issues its serving certificate to expire this long before its CA (`certs.go`:
/// the CA's `notAfter` less a day).
pub const OLM_SERVING_EXPIRES_BEFORE_CA_SECONDS: i64 = DAY;
/// POM rolls adopted pods still serving OLM's certificate once less than this remains before
/// it expires: a month leaves a failed roll (an image gone, a quota) time to be seen and
/// mended before any webhook call fails, and OLM's CA lives two years, so an adoption keeps
/// OLM's pods running for most of it.
pub const OLM_ROLL_MARGIN_SECONDS: i64 = 30 * DAY;
const DAY: i64 = 24 * 60 * 60;

/// Whether `value` is one of POM's (any of its certificates, not only the current one).
#[must_use]
pub fn is_poms(value: &str) -> bool {
    value.starts_with(POM_VALUE_PREFIX)
}

/// What is known of one serving Deployment when its pod template is written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateFacts<'a> {
    /// POM's value now.
    pub pom: &'a str,
    /// The live Deployment's annotation (`None`: no Deployment, or no annotation).
    pub running: Option<&'a str>,
    /// The `notAfter` of OLM v0's CA while POM's webhooks trust it (adopted, OLM's pods may
    /// still run: `adopt::webhooks::trusted_olm_ca`); `None` otherwise.
    pub olm_ca_until: Option<i64>,
    /// POM's value recorded when OLM's value was first kept (at adoption; the CA Secret keeps
    /// it beside OLM's CA). `None`: none recorded, then the current one is (an adoption from
    /// before the record): a renewal after it still rolls.
    pub pom_at_adoption: Option<&'a str>,
    /// The PlatformOperator adopts now (its first apply): nothing may restart.
    pub adopting: bool,
    /// A hop to another bundle than the one running: its pods roll anyway.
    pub hopping: bool,
    pub now: i64,
}

/// The annotation's value for the pod template, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TemplateHash {
    /// POM's value: the pods serve POM's certificate (a first install, a renewal, a hop, or
    /// a POM install from before this annotation: one roll then, as OLM's rotation does).
    Pom,
    /// The running value is kept: the pods may serve OLM's certificate and adoption restarts
    /// nothing; `value` `None` when the running template carries none (then none is set).
    /// POM's value replaces it from `roll_at` (`None`: kept only while adopting).
    KeepOlms {
        value: Option<String>,
        roll_at: Option<i64>,
    },
    /// POM's value replaces OLM's, rolling pods that may serve OLM's certificate before it
    /// expires (`olm_serving_expires`; `None` when OLM's CA is no longer trusted, expired or
    /// never read), or, `renewed`, pods that may serve the certificate POM issued at adoption,
    /// since renewed: announced by an Event.
    RollFromOlm {
        olm_serving_expires: Option<i64>,
        renewed: bool,
    },
}

impl TemplateHash {
    /// The value to write on the template, given POM's.
    #[must_use]
    pub fn value<'a>(&'a self, pom: &'a str) -> Option<&'a str> {
        match self {
            Self::Pom | Self::RollFromOlm { .. } => Some(pom),
            Self::KeepOlms { value, .. } => value.as_deref(),
        }
    }
}

/// The value of one serving Deployment's annotation (module documentation).
#[must_use]
pub fn template_hash(facts: &TemplateFacts<'_>) -> TemplateHash {
    // Adopting restarts nothing, whatever is known of OLM's CA (none read: still kept).
    if facts.adopting {
        return TemplateHash::KeepOlms {
            value: facts.running.map(str::to_owned),
            roll_at: facts.olm_ca_until.map(roll_at),
        };
    }
    let olms = facts.running.filter(|running| !is_poms(running));
    let may_serve_olms =
        olms.is_some() || (facts.running.is_none() && facts.olm_ca_until.is_some());
    if !may_serve_olms {
        return TemplateHash::Pom;
    }
    let olm_serving_expires = facts
        .olm_ca_until
        .map(|until| until - OLM_SERVING_EXPIRES_BEFORE_CA_SECONDS);
    let renewed = facts.pom_at_adoption.is_some_and(|at| at != facts.pom);
    match facts.olm_ca_until.map(roll_at) {
        Some(at) if !facts.hopping && !renewed && facts.now < at => TemplateHash::KeepOlms {
            value: olms.map(str::to_owned),
            roll_at: Some(at),
        },
        _ => TemplateHash::RollFromOlm {
            olm_serving_expires,
            renewed,
        },
    }
}

/// When POM's value replaces OLM's, given OLM's CA's `notAfter`.
#[must_use]
pub fn roll_at(olm_ca_until: i64) -> i64 {
    olm_ca_until - OLM_SERVING_EXPIRES_BEFORE_CA_SECONDS - OLM_ROLL_MARGIN_SECONDS
}

/// What is seen of one serving Deployment on the cluster, for [`olm_ca_still_served`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveServing<'a> {
    /// Its template's annotation (`None`: no Deployment, or no annotation).
    pub running: Option<&'a str>,
    /// Rolled out: the status observed the current generation, and every replica is updated
    /// and available (no pod of an older template left).
    pub rolled_out: bool,
}

/// Whether a pod may still serve OLM's certificate, so POM's webhooks keep trusting OLM's CA:
/// until every serving Deployment's template carries one of POM's values and has rolled out
/// (every pod then started after POM's certificate was written), not only until OLM's CA
/// expires. No serving Deployment seen (none rendered) keeps the trust: nothing proves it.
#[must_use]
pub fn olm_ca_still_served(deployments: &[LiveServing<'_>]) -> bool {
    deployments.is_empty()
        || !deployments
            .iter()
            .all(|d| d.rolled_out && d.running.is_some_and(is_poms))
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_800_000_000;
    const OLMS: &str = "0a1b2c";

    fn facts(running: Option<&'static str>, olm_ca_until: Option<i64>) -> TemplateFacts<'static> {
        TemplateFacts {
            pom: "pom-new",
            running,
            olm_ca_until,
            pom_at_adoption: None,
            adopting: false,
            hopping: false,
            now: NOW,
        }
    }

    #[test]
    fn pom_values_are_told_from_olms() {
        assert!(is_poms("pom-0a1b"));
        assert!(!is_poms(OLMS));
    }

    /// The table: adopting, adopted before the deadline, past it, a hop, POM's renewals, a POM
    /// install from before the annotation.
    #[test]
    fn the_annotation_keeps_olms_value_until_the_deadline() {
        let far = NOW + 400 * DAY;
        let near = NOW + 20 * DAY;
        let deadline = far - DAY - OLM_ROLL_MARGIN_SECONDS;
        let keep = |roll_at| TemplateHash::KeepOlms {
            value: Some(OLMS.to_owned()),
            roll_at,
        };
        let roll = |until: i64| TemplateHash::RollFromOlm {
            olm_serving_expires: Some(until - DAY),
            renewed: false,
        };
        let renewed = |until: i64| TemplateHash::RollFromOlm {
            olm_serving_expires: Some(until - DAY),
            renewed: true,
        };
        let cases: Vec<(&str, TemplateFacts<'_>, TemplateHash)> = vec![
            (
                "a first install, or a POM install from before the annotation (one roll)",
                facts(None, None),
                TemplateHash::Pom,
            ),
            ("steady", facts(Some("pom-new"), None), TemplateHash::Pom),
            (
                "POM renewed (serving or CA): the new value rolls",
                facts(Some("pom-old"), None),
                TemplateHash::Pom,
            ),
            (
                "adopting: OLM's value, whatever the deadline",
                TemplateFacts {
                    adopting: true,
                    ..facts(Some(OLMS), Some(near))
                },
                keep(Some(near - DAY - OLM_ROLL_MARGIN_SECONDS)),
            ),
            (
                "adopting an OLM template without the annotation: none set",
                TemplateFacts {
                    adopting: true,
                    ..facts(None, Some(far))
                },
                TemplateHash::KeepOlms {
                    value: None,
                    roll_at: Some(deadline),
                },
            ),
            (
                "adopting, OLM's CA unread: still kept",
                TemplateFacts {
                    adopting: true,
                    ..facts(Some(OLMS), None)
                },
                TemplateHash::KeepOlms {
                    value: Some(OLMS.to_owned()),
                    roll_at: None,
                },
            ),
            (
                "adopted, before the deadline",
                facts(Some(OLMS), Some(far)),
                keep(Some(deadline)),
            ),
            (
                "adopted, a second before the deadline",
                TemplateFacts {
                    now: deadline - 1,
                    ..facts(Some(OLMS), Some(far))
                },
                keep(Some(deadline)),
            ),
            (
                "adopted, at the deadline",
                TemplateFacts {
                    now: deadline,
                    ..facts(Some(OLMS), Some(far))
                },
                roll(far),
            ),
            (
                "adopted, past it",
                facts(Some(OLMS), Some(near)),
                roll(near),
            ),
            (
                "a hop: the pods roll anyway",
                TemplateFacts {
                    hopping: true,
                    ..facts(Some(OLMS), Some(far))
                },
                roll(far),
            ),
            (
                "OLM's CA no longer trusted (expired): roll now",
                facts(Some(OLMS), None),
                TemplateHash::RollFromOlm {
                    olm_serving_expires: None,
                    renewed: false,
                },
            ),
            (
                "adopting, no annotation and OLM's CA unread: none set (not POM's)",
                TemplateFacts {
                    adopting: true,
                    ..facts(None, None)
                },
                TemplateHash::KeepOlms {
                    value: None,
                    roll_at: None,
                },
            ),
            (
                "adopted, POM's value still the one recorded at adoption: OLM's kept",
                TemplateFacts {
                    pom_at_adoption: Some("pom-new"),
                    ..facts(Some(OLMS), Some(far))
                },
                keep(Some(deadline)),
            ),
            (
                "adopted, POM renewed since adoption: roll before the deadline",
                TemplateFacts {
                    pom_at_adoption: Some("pom-old"),
                    ..facts(Some(OLMS), Some(far))
                },
                renewed(far),
            ),
            (
                "recreated after adoption (no annotation), POM renewed since: roll",
                TemplateFacts {
                    pom_at_adoption: Some("pom-old"),
                    ..facts(None, Some(far))
                },
                renewed(far),
            ),
            (
                "recreated after adoption, not renewed: none set",
                TemplateFacts {
                    pom_at_adoption: Some("pom-new"),
                    ..facts(None, Some(far))
                },
                TemplateHash::KeepOlms {
                    value: None,
                    roll_at: Some(deadline),
                },
            ),
            (
                "rolled to POM's, OLM's CA not dropped yet: POM's",
                facts(Some("pom-new"), Some(far)),
                TemplateHash::Pom,
            ),
            (
                "rolled to POM's, then renewed before the drop: POM's new value",
                facts(Some("pom-old"), Some(far)),
                TemplateHash::Pom,
            ),
        ];
        for (name, facts, want) in cases {
            assert_eq!(template_hash(&facts), want, "{name}");
        }
        assert_eq!(keep(None).value("pom-new"), Some(OLMS));
        assert_eq!(roll(far).value("pom-new"), Some("pom-new"));
    }

    #[test]
    fn olms_ca_is_trusted_until_every_serving_pod_started_under_poms_value() {
        let live = |running, rolled_out| LiveServing {
            running,
            rolled_out,
        };
        let cases = [
            ("nothing seen", vec![], true),
            ("OLM's value", vec![live(Some(OLMS), true)], true),
            ("no value", vec![live(None, true)], true),
            ("POM's, rolling", vec![live(Some("pom-a"), false)], true),
            ("POM's, rolled out", vec![live(Some("pom-a"), true)], false),
            (
                "one of two still OLM's",
                vec![live(Some("pom-a"), true), live(Some(OLMS), true)],
                true,
            ),
            (
                "both POM's (any of its values), rolled out",
                vec![live(Some("pom-a"), true), live(Some("pom-b"), true)],
                false,
            ),
        ];
        for (name, deployments, want) in cases {
            assert_eq!(olm_ca_still_served(&deployments), want, "{name}");
        }
    }
}
