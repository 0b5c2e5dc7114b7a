//! When a bundle's webhook configurations are registered (or switched to a new bundle's): the
//! pure part of the `WebhookServed` wait (issue 34 item 9, PRODUCT §6, §7).
//!
//! A webhook configuration names a path on a Service; the Service routes to the pods of the
//! Deployment behind it. Across a move whose webhook paths change, the old configuration is
//! only served by the old pods and the new one only by the new pods, and a rolling update keeps
//! the two together only from the first new pod being ready until the last old one is gone.
//! The switch must land in that overlap: not before a new pod is a ready endpoint (the new
//! path would be served by nothing), and not after the rollout completed (the old path no
//! longer is; this was POM's rule before). So the configuration is switched as soon as the
//! Service lists a ready endpoint that is one of the Deployment's *updated* pods.
//!
//! Which endpoints are updated pods is told without reading Pods (POM may not list them): the
//! Deployment's status counts its non-terminating pods (`replicas`) and those of the current
//! template (`updatedReplicas`), so at most `replicas - updatedReplicas` ready endpoints can be
//! old pods (a terminating pod's endpoint is not ready); more ready endpoints than that means
//! at least one is a new pod. Only a status that observed the current generation is judged: an
//! older one counts the pods of a template the Deployment no longer has as updated.

use crate::status::Wait;

/// What the Deployment behind a webhook Service reports (its status, for its generation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RolloutCounts {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.replicas`: its non-terminating pods, of every template.
    pub replicas: i32,
    /// `status.updatedReplicas`: its pods of the current template.
    pub updated_replicas: i32,
}

/// What the reconcile observed of one webhook Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceObservation {
    /// The Service's name.
    pub service: String,
    /// The Deployment behind it; `None` when it does not exist (yet).
    pub rollout: Option<RolloutCounts>,
    /// Ready endpoints listed by the Service's EndpointSlices, each counted once.
    pub ready_endpoints: usize,
}

/// Whether the Service serves the current template's pods, and why not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// A ready endpoint is one of the Deployment's updated pods.
    NewPodsServe,
    /// The Deployment behind the Service does not exist.
    NoDeployment,
    /// The Deployment's status has not observed its current generation.
    StaleStatus,
    /// No ready endpoint is proven to be an updated pod: `ready_endpoints` is at most the
    /// `old_pods` the Deployment still runs (or no updated pod exists).
    NoNewPodReady {
        ready_endpoints: usize,
        old_pods: usize,
    },
}

/// Judges one webhook Service (see the module's doc).
#[must_use]
pub fn serving(observation: &ServiceObservation) -> Serving {
    let Some(rollout) = observation.rollout else {
        return Serving::NoDeployment;
    };
    if rollout.observed_generation < rollout.generation {
        return Serving::StaleStatus;
    }
    let updated = usize::try_from(rollout.updated_replicas).unwrap_or(0);
    let all = usize::try_from(rollout.replicas).unwrap_or(0);
    let old_pods = all.saturating_sub(updated);
    if updated > 0 && observation.ready_endpoints > old_pods {
        Serving::NewPodsServe
    } else {
        Serving::NoNewPodReady {
            ready_endpoints: observation.ready_endpoints,
            old_pods,
        }
    }
}

/// What to do with the webhook configurations held back from the apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Registration {
    /// Apply them now: every webhook Service serves the current template's pods.
    pub register: bool,
    /// A wait for each Service not serving yet and, when not registering, for each held
    /// configuration (the status names every one).
    pub waits: Vec<Wait>,
}

/// Whether the held webhook configurations (`held`: kind and name of each) are registered
/// now, given what was observed of every webhook Service. All or none: a configuration
/// registered before another Service serves would be called with nothing behind it. Without
/// a webhook Service of POM's (configurations a plain bundle ships as they are), nothing tells
/// which pods serve them: they wait for every Deployment to have rolled out (`rolled_out`).
#[must_use]
pub fn registration(
    services: &[ServiceObservation],
    rolled_out: bool,
    held: &[(String, String)],
) -> Registration {
    let mut waits: Vec<Wait> = services
        .iter()
        .filter(|s| serving(s) != Serving::NewPodsServe)
        .map(|s| Wait::WebhookServed {
            kind: "Service".to_owned(),
            name: s.service.clone(),
        })
        .collect();
    let register = waits.is_empty() && (rolled_out || !services.is_empty());
    if !register {
        waits.extend(held.iter().map(|(kind, name)| Wait::WebhookServed {
            kind: kind.clone(),
            name: name.clone(),
        }));
    }
    Registration { register, waits }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(generation: i64, observed: i64, replicas: i32, updated: i32) -> RolloutCounts {
        RolloutCounts {
            generation,
            observed_generation: observed,
            replicas,
            updated_replicas: updated,
        }
    }

    fn service(rollout: Option<RolloutCounts>, ready_endpoints: usize) -> ServiceObservation {
        ServiceObservation {
            service: "op-service".to_owned(),
            rollout,
            ready_endpoints,
        }
    }

    #[test]
    fn a_service_serves_the_new_pods_only_once_a_ready_endpoint_must_be_one() {
        let not_ready = |ready_endpoints, old_pods| Serving::NoNewPodReady {
            ready_endpoints,
            old_pods,
        };
        // (what, rollout, ready endpoints, verdict)
        let cases = [
            ("no Deployment", None, 1, Serving::NoDeployment),
            (
                "a status of the template before the apply",
                Some(counts(2, 1, 1, 1)),
                1,
                Serving::StaleStatus,
            ),
            (
                "first install, the pod not ready yet",
                Some(counts(1, 1, 1, 1)),
                0,
                not_ready(0, 0),
            ),
            (
                "first install, the pod ready",
                Some(counts(1, 1, 1, 1)),
                1,
                Serving::NewPodsServe,
            ),
            (
                "a hop: the old pod ready, the new one created but not ready",
                Some(counts(2, 2, 2, 1)),
                1,
                not_ready(1, 1),
            ),
            (
                "a hop: old and new ready (the overlap the switch belongs in)",
                Some(counts(2, 2, 2, 1)),
                2,
                Serving::NewPodsServe,
            ),
            (
                "a hop, 3 replicas: 2 old ready, the first new one not yet",
                Some(counts(2, 2, 3, 1)),
                2,
                not_ready(2, 2),
            ),
            (
                "a hop, 3 replicas: 2 old and 1 new ready",
                Some(counts(2, 2, 4, 2)),
                3,
                Serving::NewPodsServe,
            ),
            (
                "rolled out: only new pods, one ready",
                Some(counts(2, 2, 1, 1)),
                1,
                Serving::NewPodsServe,
            ),
            (
                "the template not rolled yet: no updated pod",
                Some(counts(2, 2, 1, 0)),
                1,
                not_ready(1, 1),
            ),
            (
                "scaled to zero",
                Some(counts(1, 1, 0, 0)),
                0,
                not_ready(0, 0),
            ),
            (
                "a status counting more updated than all (torn read) is not trusted past the endpoints",
                Some(counts(1, 1, 1, 2)),
                0,
                not_ready(0, 0),
            ),
        ];
        for (what, rollout, ready, expected) in cases {
            assert_eq!(serving(&service(rollout, ready)), expected, "{what}");
        }
    }

    fn held() -> Vec<(String, String)> {
        vec![
            (
                "ValidatingWebhookConfiguration".to_owned(),
                "vhook".to_owned(),
            ),
            ("CustomResourceDefinition".to_owned(), "widgets".to_owned()),
        ]
    }

    #[test]
    fn every_held_configuration_is_registered_once_every_service_serves() {
        let serving_one = service(Some(counts(1, 1, 1, 1)), 1);
        assert_eq!(
            registration(&[serving_one.clone(), serving_one], false, &held()),
            Registration {
                register: true,
                waits: vec![]
            }
        );
    }

    #[test]
    fn one_service_not_serving_holds_every_configuration_and_the_waits_name_each() {
        let serves = service(Some(counts(1, 1, 1, 1)), 1);
        let other = ServiceObservation {
            service: "other-service".to_owned(),
            ..service(Some(counts(2, 2, 2, 1)), 1)
        };
        let got = registration(&[serves, other], true, &held());
        assert!(!got.register);
        let names: Vec<String> = got.waits.iter().map(ToString::to_string).collect();
        assert_eq!(names.len(), 3, "{names:#?}");
        assert!(names[0].starts_with("Service other-service "), "{names:#?}");
        assert!(names[1].starts_with("ValidatingWebhookConfiguration vhook "));
        assert!(names[2].starts_with("CustomResourceDefinition widgets "));
    }

    #[test]
    fn without_a_webhook_service_configurations_wait_for_the_rollout() {
        let held_back = registration(&[], false, &held());
        assert!(!held_back.register);
        assert_eq!(held_back.waits.len(), 2);
        assert_eq!(
            registration(&[], true, &held()),
            Registration {
                register: true,
                waits: vec![]
            }
        );
    }

    #[test]
    fn a_service_serving_registers_mid_rollout() {
        // The overlap: old and new pods both ready, the rollout not complete.
        let overlap = service(Some(counts(2, 2, 2, 1)), 2);
        assert!(registration(&[overlap], false, &held()).register);
    }
}
