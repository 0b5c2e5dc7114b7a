//! When POM issues webhook serving certificates (§6, where OpenShift's service-ca does not):
//! a CA per install namespace, a serving certificate per webhook Service, each renewed well
//! before it expires, without downtime.
//!
//! Pure: the controller reads what its Secrets record (validity end, the CA a certificate was
//! signed by, the names it covers), calls [`plan`], issues what the plan says, and applies the
//! Secrets with the bundle's other objects. The rotation that keeps webhooks answering:
//! a renewed CA goes into the caBundle *next to* the previous one, which stays until it expires,
//! so a pod still serving the certificate the previous CA signed (the kubelet swaps mounted
//! Secrets within a minute or so) is trusted throughout; the serving certificate is re-issued
//! by the new CA in the same step.

/// How long POM's webhook CA is valid (OLM v0's, two years).
pub const CA_VALIDITY_SECONDS: i64 = 730 * DAY;
/// A CA is renewed once less than this remains (half its life, as OLM v0 renews).
pub const CA_RENEW_BEFORE_SECONDS: i64 = 365 * DAY;
/// How long a serving certificate is valid.
pub const SERVING_VALIDITY_SECONDS: i64 = 365 * DAY;
/// A serving certificate is renewed once less than this remains.
pub const SERVING_RENEW_BEFORE_SECONDS: i64 = 180 * DAY;
const DAY: i64 = 24 * 60 * 60;

/// What the CA Secret records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaFacts {
    /// Validity end of the current CA (Unix seconds).
    pub not_after: i64,
    /// Fingerprint of the current CA certificate.
    pub fingerprint: String,
    /// Validity end of the previous CA still in the bundle, if any.
    pub previous_not_after: Option<i64>,
}

/// What a serving certificate Secret records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServingFacts {
    pub not_after: i64,
    /// Fingerprint of the CA that signed it.
    pub signed_by: String,
    /// The DNS names it covers, sorted.
    pub dns_names: Vec<String>,
}

/// What to do about the CA.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaAction {
    /// The current CA serves.
    Keep,
    /// No usable CA (none, unreadable, or expired): issue one; the bundle holds it alone.
    Issue,
    /// The CA nears its end: issue a new one and keep the current one in the bundle until it
    /// expires.
    Renew,
}

/// The plan for one install namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CertificatePlan {
    pub ca: CaAction,
    /// The previous CA leaves the bundle (it has expired).
    pub drop_previous: bool,
    /// Index (into the services given) of each serving certificate to issue.
    pub issue_serving: Vec<usize>,
}

/// Decides what to issue at `now` (Unix seconds). `services` are the serving certificates
/// wanted, each with the names it must cover (sorted) and what its Secret records.
#[must_use]
pub fn plan(
    ca: Option<&CaFacts>,
    services: &[(Vec<String>, Option<ServingFacts>)],
    now: i64,
) -> CertificatePlan {
    let ca_action = match ca {
        None => CaAction::Issue,
        Some(ca) if ca.not_after <= now => CaAction::Issue,
        Some(ca) if ca.not_after - now < CA_RENEW_BEFORE_SECONDS => CaAction::Renew,
        Some(_) => CaAction::Keep,
    };
    let drop_previous = ca_action == CaAction::Keep
        && ca
            .and_then(|ca| ca.previous_not_after)
            .is_some_and(|end| end <= now);
    let current = ca.map(|ca| ca.fingerprint.as_str());
    let issue_serving = services
        .iter()
        .enumerate()
        .filter(|(_, (names, facts))| {
            ca_action != CaAction::Keep
                || facts.as_ref().is_none_or(|facts| {
                    Some(facts.signed_by.as_str()) != current
                        || facts.dns_names != *names
                        || facts.not_after - now < SERVING_RENEW_BEFORE_SECONDS
                })
        })
        .map(|(index, _)| index)
        .collect();
    CertificatePlan {
        ca: ca_action,
        drop_previous,
        issue_serving,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const NOW: i64 = 1_800_000_000;

    fn ca(remaining: i64, previous: Option<i64>) -> CaFacts {
        CaFacts {
            not_after: NOW + remaining,
            fingerprint: "ca-1".into(),
            previous_not_after: previous,
        }
    }

    fn names() -> Vec<String> {
        vec!["svc.ns.svc".into(), "svc.ns.svc.cluster.local".into()]
    }

    fn serving(remaining: i64, signed_by: &str) -> ServingFacts {
        ServingFacts {
            not_after: NOW + remaining,
            signed_by: signed_by.into(),
            dns_names: names(),
        }
    }

    /// (case, CA, serving, CA action, drop previous, serving issued)
    type Case = (
        &'static str,
        Option<CaFacts>,
        Option<ServingFacts>,
        CaAction,
        bool,
        bool,
    );

    #[test]
    fn the_plan_table() {
        let fresh_ca = ca(CA_VALIDITY_SECONDS - DAY, None);
        let fresh = Some(serving(SERVING_VALIDITY_SECONDS - DAY, "ca-1"));
        let cases: Vec<Case> = vec![
            ("first install", None, None, CaAction::Issue, false, true),
            (
                "steady",
                Some(fresh_ca.clone()),
                fresh.clone(),
                CaAction::Keep,
                false,
                false,
            ),
            (
                "serving Secret lost",
                Some(fresh_ca.clone()),
                None,
                CaAction::Keep,
                false,
                true,
            ),
            (
                "serving near its end",
                Some(fresh_ca.clone()),
                Some(serving(SERVING_RENEW_BEFORE_SECONDS - 1, "ca-1")),
                CaAction::Keep,
                false,
                true,
            ),
            (
                "serving signed by another CA",
                Some(fresh_ca.clone()),
                Some(serving(SERVING_VALIDITY_SECONDS, "ca-0")),
                CaAction::Keep,
                false,
                true,
            ),
            (
                "CA near its end: renewed, serving re-issued",
                Some(ca(CA_RENEW_BEFORE_SECONDS - 1, None)),
                fresh.clone(),
                CaAction::Renew,
                false,
                true,
            ),
            (
                "CA expired",
                Some(ca(0, None)),
                fresh.clone(),
                CaAction::Issue,
                false,
                true,
            ),
            (
                "previous CA still valid stays",
                Some(ca(CA_VALIDITY_SECONDS - DAY, Some(NOW + DAY))),
                fresh.clone(),
                CaAction::Keep,
                false,
                false,
            ),
            (
                "previous CA expired leaves the bundle",
                Some(ca(CA_VALIDITY_SECONDS - DAY, Some(NOW))),
                fresh.clone(),
                CaAction::Keep,
                true,
                false,
            ),
        ];
        for (case, ca, serving, action, drop, issue) in cases {
            let plan = plan(ca.as_ref(), &[(names(), serving)], NOW);
            assert_eq!(plan.ca, action, "{case}");
            assert_eq!(plan.drop_previous, drop, "{case}");
            assert_eq!(plan.issue_serving == vec![0], issue, "{case}");
        }
    }

    #[test]
    fn a_service_whose_names_changed_gets_a_new_certificate() {
        let fresh_ca = ca(CA_VALIDITY_SECONDS - DAY, None);
        let mut other = serving(SERVING_VALIDITY_SECONDS, "ca-1");
        other.dns_names = vec!["old.ns.svc".into()];
        let plan = plan(
            Some(&fresh_ca),
            &[
                (names(), Some(serving(SERVING_VALIDITY_SECONDS, "ca-1"))),
                (names(), Some(other)),
            ],
            NOW,
        );
        assert_eq!(plan.issue_serving, vec![1]);
    }

    /// Renewal happens well before expiry: a certificate is never used in its last
    /// `..._RENEW_BEFORE_SECONDS`, and the renewal period is shorter than the validity.
    #[test]
    fn renewal_windows_leave_room() {
        const {
            assert!(CA_RENEW_BEFORE_SECONDS < CA_VALIDITY_SECONDS);
            assert!(SERVING_RENEW_BEFORE_SECONDS < SERVING_VALIDITY_SECONDS);
            // A serving certificate issued just before its CA's renewal outlives nothing:
            // the CA's renewal re-issues it.
            assert!(SERVING_VALIDITY_SECONDS <= CA_RENEW_BEFORE_SECONDS);
        }
    }
}
