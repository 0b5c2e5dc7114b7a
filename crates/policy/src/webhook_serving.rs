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
//! Which endpoints are updated pods is told by what a Service routes to (review M1): the ready
//! endpoints of its EndpointSlices, each naming its Pod (`targetRef`), and the Deployment's
//! current ReplicaSet, the one whose `deployment.kubernetes.io/revision` is the Deployment's
//! own (the Deployment controller writes both when it syncs a template, before it records the
//! generation observed). POM reads no Pod: a ReplicaSet's Pods are named by the API server's
//! name generator from the ReplicaSet's name, `<replicaset>-` cut to
//! [`GENERATED_NAME_PREFIX_MAX`] characters, then [`GENERATED_NAME_SUFFIX`] random ones, and
//! the ReplicaSets of one Deployment are `<deployment>-<pod-template-hash>` with a hash of
//! letters and digits only, so a ready endpoint is one of the current ReplicaSet's pods exactly
//! when its name is that prefix and five characters. Only when a Deployment's name is so long
//! that two of its ReplicaSets' prefixes are cut to the same characters (no shorter than 47
//! characters) are pods told by the Deployment's counts instead, as before: its status
//! counts its non-terminating pods (`replicas`) and those of the current template
//! (`updatedReplicas`), so more ready endpoints than `replicas - updatedReplicas` means one is
//! a new pod; that rule can race the EndpointSlice controller, the names cannot. Only a status
//! that observed the current generation is judged: an older one has a revision (and counts)
//! of a template the Deployment no longer has.

use crate::status::Wait;

/// The characters of a `generateName` the API server keeps before its random suffix
/// (Kubernetes' `names.SimpleNameGenerator`: 63 less the suffix).
pub const GENERATED_NAME_PREFIX_MAX: usize = 58;
/// The random characters the API server appends to a `generateName`.
pub const GENERATED_NAME_SUFFIX: usize = 5;

/// What the Deployment behind a webhook Service reports (its status, for its generation).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RolloutCounts {
    /// `metadata.generation`.
    pub generation: i64,
    /// `status.observedGeneration`.
    pub observed_generation: i64,
    /// `status.replicas`: its non-terminating pods, of every template.
    pub replicas: i32,
    /// `status.updatedReplicas`: its pods of the current template.
    pub updated_replicas: i32,
    /// Its `deployment.kubernetes.io/revision` annotation: the current ReplicaSet's revision.
    pub revision: Option<String>,
    /// `spec.paused`: the Deployment controller creates no ReplicaSet for a new template and
    /// keeps the old revision, while it still records the generation observed.
    pub paused: bool,
}

/// One ReplicaSet the Deployment controls (its controller owner reference).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplicaSetSeen {
    /// Its name, which its pods' names begin with.
    pub name: String,
    /// Its `deployment.kubernetes.io/revision` annotation.
    pub revision: Option<String>,
}

/// What the reconcile observed of one webhook Service.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceObservation {
    /// The Service's name.
    pub service: String,
    /// The Deployment behind it; `None` when it does not exist (yet).
    pub rollout: Option<RolloutCounts>,
    /// The ReplicaSets the Deployment controls; `None` when more than could be read (a bound):
    /// pods are then told by the counts.
    pub replica_sets: Option<Vec<ReplicaSetSeen>>,
    /// The Pods of the ready endpoints listed by the Service's EndpointSlices, each once.
    pub ready_pods: Vec<String>,
    /// Ready endpoints listed by the Service's EndpointSlices, each counted once (those
    /// naming no Pod included), which the counts judge.
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
    /// The Deployment is paused with no pod of its current template (`kubectl rollout
    /// pause`): its old ReplicaSet keeps the revision, so only old pods serve until it is
    /// resumed.
    Paused,
    /// No ReplicaSet the Deployment controls has its revision (not created, or not read yet).
    NoCurrentReplicaSet,
    /// No ready endpoint's Pod is of the current ReplicaSet (`ready_pods` are all older).
    NoCurrentPodReady { ready_pods: usize },
    /// Told by the counts: no ready endpoint is proven to be an updated pod,
    /// `ready_endpoints` is at most the `old_pods` the Deployment still runs (or no updated
    /// pod exists).
    NoNewPodReady {
        ready_endpoints: usize,
        old_pods: usize,
    },
}

/// Judges one webhook Service (see the module's doc).
#[must_use]
pub fn serving(observation: &ServiceObservation) -> Serving {
    let Some(rollout) = observation.rollout.as_ref() else {
        return Serving::NoDeployment;
    };
    if rollout.observed_generation < rollout.generation {
        return Serving::StaleStatus;
    }
    if rollout.paused && rollout.updated_replicas == 0 {
        return Serving::Paused;
    }
    let Some(replica_sets) = observation.replica_sets.as_deref() else {
        return by_counts(rollout, observation.ready_endpoints);
    };
    let Some(current) = current_replica_set(rollout, replica_sets) else {
        return Serving::NoCurrentReplicaSet;
    };
    let prefix = pod_name_prefix(&current.name);
    let shared = replica_sets
        .iter()
        .any(|rs| rs.name != current.name && pod_name_prefix(&rs.name) == prefix);
    if shared {
        return by_counts(rollout, observation.ready_endpoints);
    }
    let new_pod_ready = observation
        .ready_pods
        .iter()
        .filter_map(|pod| pod.strip_prefix(prefix.as_str()))
        .any(|suffix| suffix.chars().count() == GENERATED_NAME_SUFFIX);
    if new_pod_ready {
        Serving::NewPodsServe
    } else {
        Serving::NoCurrentPodReady {
            ready_pods: observation.ready_pods.len(),
        }
    }
}

/// The ReplicaSet of the Deployment's revision, when it is also the newest: going back to an
/// older template, the Deployment controller gives that template's ReplicaSet the next
/// revision in one sync and the Deployment's annotation only in the next, so for one sync the
/// Deployment still names the ReplicaSet being left (review of M1).
fn current_replica_set<'a>(
    rollout: &RolloutCounts,
    replica_sets: &'a [ReplicaSetSeen],
) -> Option<&'a ReplicaSetSeen> {
    let number = |rs: &ReplicaSetSeen| rs.revision.as_deref().and_then(|r| r.parse::<u64>().ok());
    let current = replica_sets
        .iter()
        .find(|rs| rs.revision.is_some() && rs.revision == rollout.revision)?;
    let newest = replica_sets.iter().filter_map(number).max();
    (number(current) == newest).then_some(current)
}

/// What the API server's name generator keeps of `<replicaset>-` before a pod's random suffix.
fn pod_name_prefix(replica_set: &str) -> String {
    format!("{replica_set}-")
        .chars()
        .take(GENERATED_NAME_PREFIX_MAX)
        .collect()
}

/// The counts rule (see the module's doc), for Deployments whose pods' names cannot tell.
fn by_counts(rollout: &RolloutCounts, ready_endpoints: usize) -> Serving {
    let updated = usize::try_from(rollout.updated_replicas).unwrap_or(0);
    let all = usize::try_from(rollout.replicas).unwrap_or(0);
    let old_pods = all.saturating_sub(updated);
    if updated > 0 && ready_endpoints > old_pods {
        Serving::NewPodsServe
    } else {
        Serving::NoNewPodReady {
            ready_endpoints,
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
            revision: Some("2".to_owned()),
            paused: false,
        }
    }

    /// A Service judged by the counts alone (its ReplicaSets beyond the bound).
    fn service(rollout: Option<RolloutCounts>, ready_endpoints: usize) -> ServiceObservation {
        ServiceObservation {
            service: "op-service".to_owned(),
            rollout,
            replica_sets: None,
            ready_pods: vec![],
            ready_endpoints,
        }
    }

    fn rs(name: &str, revision: &str) -> ReplicaSetSeen {
        ReplicaSetSeen {
            name: name.to_owned(),
            revision: Some(revision.to_owned()),
        }
    }

    /// The ReplicaSets of Deployment `op` across a hop: revision 1 the old template's.
    fn hop_replica_sets() -> Vec<ReplicaSetSeen> {
        vec![rs("op-7d9f8b6c5d", "1"), rs("op-5b4c7f9d8x", "2")]
    }

    /// A Service judged by its ready endpoints' Pods' names.
    fn named(
        rollout: RolloutCounts,
        replica_sets: Vec<ReplicaSetSeen>,
        ready_pods: &[&str],
    ) -> ServiceObservation {
        ServiceObservation {
            service: "op-service".to_owned(),
            rollout: Some(rollout),
            replica_sets: Some(replica_sets),
            ready_pods: ready_pods.iter().map(|p| (*p).to_owned()).collect(),
            ready_endpoints: ready_pods.len(),
        }
    }

    /// (what, rollout, replica sets, ready endpoints' pods, verdict)
    type NamedCase = (
        &'static str,
        RolloutCounts,
        Vec<ReplicaSetSeen>,
        Vec<String>,
        Serving,
    );

    #[test]
    fn a_ready_endpoint_serves_the_new_pods_only_when_its_pod_is_of_the_current_replica_set() {
        let old = "op-7d9f8b6c5d-abcde";
        let old_too = "op-7d9f8b6c5d-fghij";
        let new = "op-5b4c7f9d8x-klmno";
        let long = "a-deployment-name-of-fifty-characters-long-as-it-is";
        let longer = "a-deployment-name-that-is-long-enough-for-two-prefixes-to-meet";
        let cut = |name: &str| {
            name.chars()
                .take(GENERATED_NAME_PREFIX_MAX)
                .collect::<String>()
        };
        // (what, rollout, replica sets, ready endpoints' pods, verdict)
        let cases: Vec<NamedCase> = vec![
            (
                "maxUnavailable 1: an old pod terminating still listed ready, the new one not \
                 ready (the counts said served: 2 ready endpoints, 1 old pod counted)",
                counts(2, 2, 2, 1),
                hop_replica_sets(),
                vec![old.into(), old_too.into()],
                Serving::NoCurrentPodReady { ready_pods: 2 },
            ),
            (
                "old and new ready: the overlap the switch belongs in",
                counts(2, 2, 2, 1),
                hop_replica_sets(),
                vec![old.into(), new.into()],
                Serving::NewPodsServe,
            ),
            (
                "the new pod ready, the counts not caught up (status says no updated pod)",
                counts(2, 2, 1, 0),
                hop_replica_sets(),
                vec![new.into()],
                Serving::NewPodsServe,
            ),
            (
                "first install: one ReplicaSet, its pod ready",
                RolloutCounts {
                    revision: Some("1".to_owned()),
                    ..counts(1, 1, 1, 1)
                },
                vec![rs("op-7d9f8b6c5d", "1")],
                vec![old.into()],
                Serving::NewPodsServe,
            ),
            (
                "the current ReplicaSet not read yet",
                counts(2, 2, 2, 1),
                vec![rs("op-7d9f8b6c5d", "1")],
                vec![old.into(), new.into()],
                Serving::NoCurrentReplicaSet,
            ),
            (
                "a Deployment without a revision yet",
                RolloutCounts {
                    revision: None,
                    ..counts(1, 1, 0, 0)
                },
                vec![ReplicaSetSeen {
                    name: "op-7d9f8b6c5d".to_owned(),
                    revision: None,
                }],
                vec![old.into()],
                Serving::NoCurrentReplicaSet,
            ),
            (
                "paused after the new template was applied: no new ReplicaSet, the old one \
                 keeps the revision and its pods serve (the name rule alone said served)",
                RolloutCounts {
                    revision: Some("1".to_owned()),
                    paused: true,
                    ..counts(2, 2, 1, 0)
                },
                vec![rs("op-7d9f8b6c5d", "1")],
                vec![old.into()],
                Serving::Paused,
            ),
            (
                "paused with the current template's pods running: they serve",
                RolloutCounts {
                    paused: true,
                    ..counts(2, 2, 2, 1)
                },
                hop_replica_sets(),
                vec![old.into(), new.into()],
                Serving::NewPodsServe,
            ),
            (
                "back to an older template: its ReplicaSet took revision 3 in this sync, the \
                 Deployment still names revision 2 (the one being left)",
                counts(2, 2, 2, 1),
                vec![rs("op-7d9f8b6c5d", "3"), rs("op-5b4c7f9d8x", "2")],
                vec![new.into()],
                Serving::NoCurrentReplicaSet,
            ),
            (
                "a stale status is not judged, whatever the pods",
                counts(3, 2, 2, 1),
                hop_replica_sets(),
                vec![new.into()],
                Serving::StaleStatus,
            ),
            (
                "a pod of another Deployment whose name begins the same is not one",
                counts(2, 2, 2, 1),
                hop_replica_sets(),
                vec![
                    "op-5b4c7f9d8x-klmno-extra".into(),
                    "op-5b4c7f9d8x-kl".into(),
                ],
                Serving::NoCurrentPodReady { ready_pods: 2 },
            ),
            (
                "a long name cut by the generator, the prefixes still apart",
                counts(2, 2, 2, 1),
                vec![
                    rs(&format!("{long}-7d9f8b6c5d"), "1"),
                    rs(&format!("{long}-5b4c7f9d8x"), "2"),
                ],
                vec![format!("{}vwxyz", cut(&format!("{long}-5b4c7f9d8x-")))],
                Serving::NewPodsServe,
            ),
            (
                "a long name cut by the generator: an old pod is not taken for a new one",
                counts(2, 2, 2, 1),
                vec![
                    rs(&format!("{long}-7d9f8b6c5d"), "1"),
                    rs(&format!("{long}-5b4c7f9d8x"), "2"),
                ],
                vec![format!("{}vwxyz", cut(&format!("{long}-7d9f8b6c5d-")))],
                Serving::NoCurrentPodReady { ready_pods: 1 },
            ),
            (
                "prefixes cut to the same characters: the counts judge (2 ready, 1 old)",
                counts(2, 2, 2, 1),
                vec![
                    rs(&format!("{longer}-7d9f8b6c5d"), "1"),
                    rs(&format!("{longer}-5b4c7f9d8x"), "2"),
                ],
                vec![
                    format!("{}abcde", cut(longer)),
                    format!("{}fghij", cut(longer)),
                ],
                Serving::NewPodsServe,
            ),
        ];
        for (what, rollout, replica_sets, pods, expected) in cases {
            let pods: Vec<&str> = pods.iter().map(String::as_str).collect();
            assert_eq!(
                serving(&named(rollout, replica_sets, &pods)),
                expected,
                "{what}"
            );
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
            ..named(
                counts(2, 2, 2, 1),
                hop_replica_sets(),
                &["op-7d9f8b6c5d-abcde"],
            )
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
        let overlap = named(
            counts(2, 2, 2, 1),
            hop_replica_sets(),
            &["op-7d9f8b6c5d-abcde", "op-5b4c7f9d8x-klmno"],
        );
        assert!(registration(&[overlap], false, &held()).register);
    }
}
