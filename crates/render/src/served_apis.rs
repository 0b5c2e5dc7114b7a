//! What Kubernetes and OpenShift serve, per API group: the claims a bundle's CRD may not make
//! (issue 33 item 3). A CRD is refused when its group and resource are served by the platform,
//! never because of its group's name alone: `operator.openshift.io` serves `consoles` and
//! `etcds`, and `certmanagers.operator.openshift.io` is cert-manager-operator's own.
//!
//! Two kinds of rows:
//! - [`Serves::Group`]: every resource of the group is the server's. Kubernetes' groups (its API
//!   server serves each group from Go types; a CRD there would shadow or be shadowed), the
//!   groups OpenShift's aggregated API servers serve (openshift-apiserver, oauth-apiserver:
//!   a whole group-version is routed to them), the cluster's configuration and machines
//!   (`config.openshift.io`, `machine.openshift.io`, `machineconfiguration.openshift.io`), OLM
//!   v0's groups and POM's own.
//! - [`Serves::Resources`]: groups the platform shares with optional operators; only the
//!   listed resources (plural names) are the platform's. From openshift/api's published CRD
//!   manifests, plus resources OpenShift served earlier (a cluster upgraded from then may hold
//!   them).
//!
//! Versioned and sourced: [`KUBERNETES_VERSION`] and [`OPENSHIFT_API_VERSION`] name what the
//! table was taken from, the versions the e2e suite pins (`e2e/tools/versions.env`). The test
//! `tests/served_apis.rs` fails when either pin moves without the table, and, offline from the
//! Go module cache when present, when a group `k8s.io/api` registers or a CRD openshift/api
//! publishes is missing here. The live cluster may serve more (an aggregated APIService, a
//! platform CRD added later): the manager reads discovery before it applies a CRD
//! ([`judge_live_claims`]).

use std::fmt;

/// The Kubernetes release whose groups the table lists (`k8s.io/api` v0.36.3, with
/// `apiextensions.k8s.io` and `apiregistration.k8s.io`, which the API server itself serves):
/// `KUBERNETES_VERSION` in `e2e/tools/versions.env`.
pub const KUBERNETES_VERSION: &str = "1.36.3";

/// The openshift/api module version (commit `264e80a2b6e7`, 2025-10-15) whose groups and CRD
/// manifests the table lists: `OPENSHIFT_API_VERSION` in `e2e/tools/versions.env`.
pub const OPENSHIFT_API_VERSION: &str = "0.0.0-20251015095338-264e80a2b6e7";

/// Who serves a row's resources.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Server {
    /// Kubernetes' API server (`k8s.io/api`, apiextensions-apiserver, kube-aggregator).
    Kubernetes,
    /// OpenShift's aggregated API servers (openshift-apiserver, oauth-apiserver).
    OpenShiftApiServer,
    /// CRDs OpenShift installs from openshift/api's manifests.
    OpenShiftCrds,
    /// OLM v0 (its CRDs and its packageserver's aggregated API).
    OlmV0,
    /// POM itself.
    Pom,
}

impl fmt::Display for Server {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Kubernetes => "Kubernetes",
            Self::OpenShiftApiServer => "OpenShift's aggregated API servers",
            Self::OpenShiftCrds => "OpenShift (its CRDs from openshift/api)",
            Self::OlmV0 => "OLM v0",
            Self::Pom => "POM",
        })
    }
}

/// What of a group a row claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serves {
    /// Every resource of the group.
    Group,
    /// These resources (plural names) only.
    Resources(&'static [&'static str]),
}

/// One row: a group, what of it is served, and by whom.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServedGroup {
    pub group: &'static str,
    pub serves: Serves,
    pub server: Server,
}

const fn whole(group: &'static str, server: Server) -> ServedGroup {
    ServedGroup {
        group,
        serves: Serves::Group,
        server,
    }
}

const fn some(group: &'static str, resources: &'static [&'static str]) -> ServedGroup {
    ServedGroup {
        group,
        serves: Serves::Resources(resources),
        server: Server::OpenShiftCrds,
    }
}

/// The table, one row per group.
pub const SERVED_GROUPS: &[ServedGroup] = &[
    // Kubernetes 1.36.3: the GroupName of every package of k8s.io/api, and the two groups the
    // API server serves from its other modules.
    whole("", Server::Kubernetes),
    whole("admission.k8s.io", Server::Kubernetes),
    whole("admissionregistration.k8s.io", Server::Kubernetes),
    whole("apidiscovery.k8s.io", Server::Kubernetes),
    whole("apiextensions.k8s.io", Server::Kubernetes),
    whole("apiregistration.k8s.io", Server::Kubernetes),
    whole("apps", Server::Kubernetes),
    whole("authentication.k8s.io", Server::Kubernetes),
    whole("authorization.k8s.io", Server::Kubernetes),
    whole("autoscaling", Server::Kubernetes),
    whole("batch", Server::Kubernetes),
    whole("certificates.k8s.io", Server::Kubernetes),
    whole("coordination.k8s.io", Server::Kubernetes),
    whole("discovery.k8s.io", Server::Kubernetes),
    whole("events.k8s.io", Server::Kubernetes),
    whole("extensions", Server::Kubernetes),
    whole("flowcontrol.apiserver.k8s.io", Server::Kubernetes),
    whole("imagepolicy.k8s.io", Server::Kubernetes),
    whole("internal.apiserver.k8s.io", Server::Kubernetes),
    whole("networking.k8s.io", Server::Kubernetes),
    whole("node.k8s.io", Server::Kubernetes),
    whole("policy", Server::Kubernetes),
    whole("rbac.authorization.k8s.io", Server::Kubernetes),
    whole("resource.k8s.io", Server::Kubernetes),
    whole("scheduling.k8s.io", Server::Kubernetes),
    whole("storage.k8s.io", Server::Kubernetes),
    whole("storagemigration.k8s.io", Server::Kubernetes),
    // OpenShift's aggregated API servers: groups of openshift/api with no CRD manifest.
    whole("apps.openshift.io", Server::OpenShiftApiServer),
    whole("authorization.openshift.io", Server::OpenShiftApiServer),
    whole("build.openshift.io", Server::OpenShiftApiServer),
    whole("image.openshift.io", Server::OpenShiftApiServer),
    whole("oauth.openshift.io", Server::OpenShiftApiServer),
    whole("project.openshift.io", Server::OpenShiftApiServer),
    whole("quota.openshift.io", Server::OpenShiftApiServer),
    whole("route.openshift.io", Server::OpenShiftApiServer),
    whole("security.openshift.io", Server::OpenShiftApiServer),
    whole("template.openshift.io", Server::OpenShiftApiServer),
    whole("user.openshift.io", Server::OpenShiftApiServer),
    // The cluster's own configuration and machines: no optional operator adds kinds there.
    whole("config.openshift.io", Server::OpenShiftCrds),
    whole("machine.openshift.io", Server::OpenShiftCrds),
    whole("machineconfiguration.openshift.io", Server::OpenShiftCrds),
    // OLM v0 and POM.
    whole("operators.coreos.com", Server::OlmV0),
    whole("packages.operators.coreos.com", Server::OlmV0),
    whole("platform.openshift.io", Server::Pom),
    // Groups the platform shares: openshift/api's CRD manifests.
    some("apiserver.openshift.io", &["apirequestcounts"]),
    some("cloud.network.openshift.io", &["cloudprivateipconfigs"]),
    some(
        "console.openshift.io",
        &[
            "consoleclidownloads",
            "consoleexternalloglinks",
            "consolelinks",
            "consolenotifications",
            "consoleplugins",
            "consolequickstarts",
            "consolesamples",
            "consoleyamlsamples",
        ],
    ),
    some(
        "controlplane.operator.openshift.io",
        &["podnetworkconnectivitychecks"],
    ),
    some(
        "helm.openshift.io",
        &["helmchartrepositories", "projecthelmchartrepositories"],
    ),
    some(
        "imageregistry.operator.openshift.io",
        &["configs", "imagepruners"],
    ),
    some("ingress.operator.openshift.io", &["dnsrecords"]),
    some("insights.openshift.io", &["datagathers"]),
    some(
        "monitoring.openshift.io",
        &["alertingrules", "alertrelabelconfigs"],
    ),
    some(
        "network.openshift.io",
        &[
            "clusternetworks",
            "dnsnameresolvers",
            "egressnetworkpolicies",
            "hostsubnets",
            "netnamespaces",
        ],
    ),
    some("network.operator.openshift.io", &["egressrouters"]),
    // `operator/v1` and `operator/v1alpha1`, and (the last three) what OpenShift served earlier.
    some(
        "operator.openshift.io",
        &[
            "authentications",
            "cloudcredentials",
            "clustercsidrivers",
            "clusterversionoperators",
            "configs",
            "consoles",
            "csisnapshotcontrollers",
            "dnses",
            "etcdbackups",
            "etcds",
            "imagecontentsourcepolicies",
            "ingresscontrollers",
            "insightsoperators",
            "kubeapiservers",
            "kubecontrollermanagers",
            "kubeschedulers",
            "kubestorageversionmigrators",
            "machineconfigurations",
            "networks",
            "olms",
            "openshiftapiservers",
            "openshiftcontrollermanagers",
            "servicecas",
            "storages",
            "ingresses",
            "servicecatalogapiservers",
            "servicecatalogcontrollermanagers",
        ],
    ),
    some("samples.operator.openshift.io", &["configs"]),
    some("security.internal.openshift.io", &["rangeallocations"]),
    some(
        "sharedresource.openshift.io",
        &["sharedconfigmaps", "sharedsecrets"],
    ),
];

/// The row that claims `plural` in `group`, if any.
#[must_use]
pub fn served_by(group: &str, plural: &str) -> Option<&'static ServedGroup> {
    SERVED_GROUPS.iter().find(|row| {
        row.group == group
            && match row.serves {
                Serves::Group => true,
                Serves::Resources(resources) => resources.contains(&plural),
            }
    })
}

/// What the live API server says serves a group/version or a resource, as the manager read it
/// (discovery and APIServices; gathered in the controller, judged here).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LiveApis {
    /// Group/versions an aggregated APIService routes to a Service: `(group, version)` →
    /// (APIService name, `namespace/name` of its Service).
    pub aggregated: std::collections::BTreeMap<(String, String), (String, String)>,
    /// Every `(group, plural)` discovery lists, whoever serves it.
    pub resources: std::collections::BTreeSet<(String, String)>,
}

/// A bundle CRD as [`judge_live_claims`] needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CrdClaim {
    /// `plural.group`.
    pub name: String,
    pub group: String,
    pub plural: String,
    pub versions: Vec<String>,
    /// A CRD of that name exists on the cluster (whose it is, ownership judges).
    pub live_crd: bool,
}

/// What serves a claimed resource, other than a CRD of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServedOtherwise {
    /// An aggregated APIService routes the group/version to a Service.
    Aggregated {
        version: String,
        api_service: String,
        service: String,
    },
    /// Discovery lists the resource, and no CRD of that name exists: the API server serves it
    /// itself (a built-in resource).
    BuiltIn,
}

/// A bundle CRD whose group and resource the live API server already serves by something
/// other than a CRD of that name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveClaimConflict {
    pub crd: String,
    pub group: String,
    pub plural: String,
    pub served: ServedOtherwise,
}

impl fmt::Display for LiveClaimConflict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let resource = format!("{}.{}", self.plural, self.group);
        match &self.served {
            ServedOtherwise::Aggregated {
                version,
                api_service,
                service,
            } => write!(
                f,
                "CRD {}: the API server routes {}/{version} to the aggregated APIService {api_service:?} (Service {service}), so the CRD would not be served there or would take {resource} from it; remove the CRD from the bundle, or remove that APIService if it is stale",
                self.crd, self.group
            ),
            ServedOtherwise::BuiltIn => write!(
                f,
                "CRD {}: the API server already serves {resource} itself (a built-in resource, not a CRD); a bundle may define only kinds no one serves",
                self.crd
            ),
        }
    }
}

/// Which bundle CRDs claim what the live API server already serves by other means: a
/// group/version routed to an aggregated APIService, or a resource discovery lists while no CRD
/// of that name exists. A CRD that exists is left to ownership (POM's or refused there).
#[must_use]
pub fn judge_live_claims(claims: &[CrdClaim], live: &LiveApis) -> Vec<LiveClaimConflict> {
    let mut conflicts = Vec::new();
    for claim in claims {
        let aggregated = claim.versions.iter().find_map(|version| {
            live.aggregated
                .get(&(claim.group.clone(), version.clone()))
                .map(|(api_service, service)| ServedOtherwise::Aggregated {
                    version: version.clone(),
                    api_service: api_service.clone(),
                    service: service.clone(),
                })
        });
        let served = aggregated.or_else(|| {
            (!claim.live_crd
                && live
                    .resources
                    .contains(&(claim.group.clone(), claim.plural.clone())))
            .then_some(ServedOtherwise::BuiltIn)
        });
        if let Some(served) = served {
            conflicts.push(LiveClaimConflict {
                crd: claim.name.clone(),
                group: claim.group.clone(),
                plural: claim.plural.clone(),
                served,
            });
        }
    }
    conflicts
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_claims_its_group_or_its_listed_resources_only() {
        let cases = [
            ("", "pods", Some(Server::Kubernetes)),
            ("apps", "anything", Some(Server::Kubernetes)),
            (
                "route.openshift.io",
                "routes",
                Some(Server::OpenShiftApiServer),
            ),
            (
                "operator.openshift.io",
                "consoles",
                Some(Server::OpenShiftCrds),
            ),
            (
                "operator.openshift.io",
                "etcds",
                Some(Server::OpenShiftCrds),
            ),
            ("operator.openshift.io", "certmanagers", None),
            ("operator.openshift.io", "kubedeschedulers", None),
            (
                "console.openshift.io",
                "consoleplugins",
                Some(Server::OpenShiftCrds),
            ),
            ("console.openshift.io", "widgets", None),
            (
                "platform.openshift.io",
                "platformoperators",
                Some(Server::Pom),
            ),
            ("operators.coreos.com", "subscriptions", Some(Server::OlmV0)),
            ("example.com", "widgets", None),
        ];
        for (group, plural, server) in cases {
            assert_eq!(
                served_by(group, plural).map(|row| row.server),
                server,
                "{plural}.{group}"
            );
        }
    }

    #[test]
    fn every_group_has_one_row_and_resource_rows_are_not_empty() {
        let mut groups: Vec<&str> = SERVED_GROUPS.iter().map(|row| row.group).collect();
        groups.sort_unstable();
        let before = groups.len();
        groups.dedup();
        assert_eq!(groups.len(), before, "a group with two rows");
        for row in SERVED_GROUPS {
            if let Serves::Resources(resources) = row.serves {
                assert!(!resources.is_empty(), "{}", row.group);
            }
        }
    }

    fn claim(group: &str, plural: &str, versions: &[&str], live_crd: bool) -> CrdClaim {
        CrdClaim {
            name: format!("{plural}.{group}"),
            group: group.to_owned(),
            plural: plural.to_owned(),
            versions: versions.iter().map(|v| (*v).to_owned()).collect(),
            live_crd,
        }
    }

    #[test]
    fn live_claims_are_judged_by_what_serves_them() {
        let live = LiveApis {
            aggregated: [(
                ("metrics.example.io".to_owned(), "v1beta1".to_owned()),
                (
                    "v1beta1.metrics.example.io".to_owned(),
                    "monitoring/adapter".to_owned(),
                ),
            )]
            .into(),
            resources: [
                ("metrics.example.io".to_owned(), "pods".to_owned()),
                ("gadgets.example.io".to_owned(), "gadgets".to_owned()),
                ("own.example.io".to_owned(), "widgets".to_owned()),
            ]
            .into(),
        };
        let cases = [
            // A version the aggregated API serves: refused, naming the APIService.
            (
                claim("metrics.example.io", "nodes", &["v1", "v1beta1"], false),
                Some("Aggregated"),
            ),
            // Even when a CRD of that name exists: the aggregation shadows it.
            (
                claim("metrics.example.io", "nodes", &["v1beta1"], true),
                Some("Aggregated"),
            ),
            // Another version of that group: not routed to the APIService.
            (claim("metrics.example.io", "nodes", &["v1"], false), None),
            // A resource discovery lists with no CRD of that name: built-in.
            (
                claim("gadgets.example.io", "gadgets", &["v1"], false),
                Some("BuiltIn"),
            ),
            // Listed because a CRD of that name serves it: ownership's business.
            (claim("own.example.io", "widgets", &["v1"], true), None),
            // Nothing serves it yet.
            (claim("new.example.io", "widgets", &["v1"], false), None),
        ];
        for (claim, expected) in cases {
            let found = judge_live_claims(std::slice::from_ref(&claim), &live);
            let kind = found.first().map(|c| match c.served {
                ServedOtherwise::Aggregated { .. } => "Aggregated",
                ServedOtherwise::BuiltIn => "BuiltIn",
            });
            assert_eq!(kind, expected, "{claim:?}");
            if let Some(conflict) = found.first() {
                let text = conflict.to_string();
                assert!(text.contains(&claim.name), "{text}");
                assert!(
                    text.contains(&format!("{}.{}", claim.plural, claim.group))
                        || text.contains(&claim.group),
                    "{text}"
                );
            }
        }
        let text = judge_live_claims(
            &[claim("metrics.example.io", "nodes", &["v1beta1"], false)],
            &live,
        )[0]
        .to_string();
        assert!(
            text.contains("v1beta1.metrics.example.io") && text.contains("monitoring/adapter"),
            "{text}"
        );
    }
}
