//! The built-in ClusterRoles of Kubernetes and OpenShift that bundles bind, with the rules each
//! holds (issue 33 item 1: a binding of a built-in role is a grant of what that role holds,
//! never a refusal by name).
//!
//! A bundle that binds `edit` or `system:openshift:scc:privileged` instead of shipping a role
//! gives its subjects that role's rules: the content policy and the powers table
//! ([`super::powers`]) judge the binding as if the bundle had shipped those rules, at the
//! binding's scope (a ClusterRoleBinding: cluster-wide; a RoleBinding: in its namespace). A role
//! whose name looks built-in (`system:`) but is not in [`BUILT_IN_ROLES`] nor shipped by the
//! bundle is refused: the table does not know what it grants.
//!
//! One row per role, each naming where its definition comes from; the table is versioned
//! ([`BUILT_IN_ROLES_VERSION`]): the rules are those of the releases named there.

use serde_json::{Value, json};

/// The releases whose definitions the table holds.
pub const BUILT_IN_ROLES_VERSION: &str = "Kubernetes 1.33, OpenShift 4.19";

/// One rule of a built-in role, as RBAC writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltInRule {
    pub api_groups: &'static [&'static str],
    pub resources: &'static [&'static str],
    pub verbs: &'static [&'static str],
    pub resource_names: &'static [&'static str],
    pub non_resource_urls: &'static [&'static str],
}

/// A built-in ClusterRole: its name, where its definition comes from, and its rules (the
/// rules of the roles it aggregates, for `admin`, `edit` and `view`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltInRole {
    pub name: &'static str,
    /// Where the definition comes from (shown with the power a binding of it gives).
    pub source: &'static str,
    /// Its rules, in parts (an aggregated role lists the roles it aggregates).
    pub rules: &'static [&'static [BuiltInRule]],
}

impl BuiltInRole {
    /// The role as a ClusterRole object, what [`super::powers`] judges.
    #[must_use]
    pub fn cluster_role(&self) -> Value {
        let rules: Vec<Value> = self
            .rules
            .iter()
            .flat_map(|part| part.iter())
            .map(|rule| {
                let mut value = json!({"verbs": rule.verbs});
                if rule.non_resource_urls.is_empty() {
                    value["apiGroups"] = json!(rule.api_groups);
                    value["resources"] = json!(rule.resources);
                } else {
                    value["nonResourceURLs"] = json!(rule.non_resource_urls);
                }
                if !rule.resource_names.is_empty() {
                    value["resourceNames"] = json!(rule.resource_names);
                }
                value
            })
            .collect();
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": self.name},
            "rules": rules,
        })
    }
}

/// The built-in role named `name`, if the table knows it.
#[must_use]
pub fn built_in_role(name: &str) -> Option<&'static BuiltInRole> {
    BUILT_IN_ROLES.iter().find(|role| role.name == name)
}

/// Whether `name` looks like a role the cluster defines (Kubernetes' and OpenShift's system
/// roles are all `system:`): a bundle binding one the table does not know is refused.
#[must_use]
pub fn looks_built_in(name: &str) -> bool {
    name.starts_with("system:")
}

const fn rule(
    api_groups: &'static [&'static str],
    resources: &'static [&'static str],
    verbs: &'static [&'static str],
) -> BuiltInRule {
    BuiltInRule {
        api_groups,
        resources,
        verbs,
        resource_names: &[],
        non_resource_urls: &[],
    }
}

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "update", "patch", "delete", "deletecollection"];
const READ_WRITE: &[&str] = &[
    "get",
    "list",
    "watch",
    "create",
    "update",
    "patch",
    "delete",
    "deletecollection",
];

/// Kubernetes' own roles. The rows of `admin`, `edit` and `view` are *at least* these rules: on
/// OpenShift more roles aggregate into them, and the table does not model those (so a binding of
/// them may grant more than it shows): OLM's `aggregate-olm-edit` (create/update/patch of
/// `subscriptions.operators.coreos.com`, which installs an operator where an OperatorGroup
/// exists), `builds`/`buildconfigs` (a build runs a pod), `deploymentconfigs` (workload
/// creation), `projects`, and OpenShift's image streams, routes and templates.
const KUBERNETES_BOOTSTRAP: &str =
    "Kubernetes bootstrap policy, plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go";

/// `cluster-admin`: everything.
const CLUSTER_ADMIN: &[BuiltInRule] = &[
    rule(&["*"], &["*"], &["*"]),
    BuiltInRule {
        api_groups: &[],
        resources: &[],
        verbs: &["*"],
        resource_names: &[],
        non_resource_urls: &["*"],
    },
];

/// `system:aggregate-to-view`.
const AGGREGATE_TO_VIEW: &[BuiltInRule] = &[
    rule(
        &[""],
        &[
            "pods",
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/status",
            "endpoints",
            "persistentvolumeclaims",
            "persistentvolumeclaims/status",
            "configmaps",
        ],
        READ,
    ),
    rule(
        &[""],
        &[
            "limitranges",
            "resourcequotas",
            "bindings",
            "events",
            "pods/status",
            "resourcequotas/status",
            "namespaces/status",
            "replicationcontrollers/status",
            "pods/log",
        ],
        READ,
    ),
    rule(&[""], &["namespaces"], READ),
    rule(&["discovery.k8s.io"], &["endpointslices"], READ),
    rule(
        &["apps"],
        &[
            "controllerrevisions",
            "statefulsets",
            "statefulsets/status",
            "statefulsets/scale",
            "daemonsets",
            "daemonsets/status",
            "deployments",
            "deployments/status",
            "deployments/scale",
            "replicasets",
            "replicasets/status",
            "replicasets/scale",
        ],
        READ,
    ),
    rule(
        &["autoscaling"],
        &[
            "horizontalpodautoscalers",
            "horizontalpodautoscalers/status",
        ],
        READ,
    ),
    rule(
        &["batch"],
        &["jobs", "cronjobs", "cronjobs/status", "jobs/status"],
        READ,
    ),
    rule(
        &["policy"],
        &["poddisruptionbudgets", "poddisruptionbudgets/status"],
        READ,
    ),
    rule(
        &["networking.k8s.io"],
        &["networkpolicies", "ingresses", "ingresses/status"],
        READ,
    ),
];

/// `system:aggregate-to-edit`.
const AGGREGATE_TO_EDIT: &[BuiltInRule] = &[
    rule(
        &[""],
        &[
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
            "secrets",
            "services/proxy",
        ],
        READ,
    ),
    rule(&[""], &["serviceaccounts"], &["impersonate"]),
    rule(
        &[""],
        &[
            "pods",
            "pods/attach",
            "pods/proxy",
            "pods/exec",
            "pods/portforward",
        ],
        WRITE,
    ),
    rule(&[""], &["pods/eviction"], &["create"]),
    rule(
        &[""],
        // `events` (and `leases` below) are in OpenShift's Kubernetes (openshift/kubernetes,
        // bootstrappolicy/policy.go), which is what the table models; kept, though upstream
        // Kubernetes may lack them: they open no path either way.
        &[
            "replicationcontrollers",
            "replicationcontrollers/scale",
            "serviceaccounts",
            "services",
            "services/proxy",
            "persistentvolumeclaims",
            "configmaps",
            "secrets",
            "events",
        ],
        WRITE,
    ),
    rule(&[""], &["serviceaccounts/token"], &["create"]),
    rule(
        &["apps"],
        &[
            "statefulsets",
            "statefulsets/scale",
            "daemonsets",
            "deployments",
            "deployments/scale",
            "deployments/rollback",
            "replicasets",
            "replicasets/scale",
        ],
        WRITE,
    ),
    rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
    rule(&["batch"], &["jobs", "cronjobs"], WRITE),
    rule(&["policy"], &["poddisruptionbudgets"], WRITE),
    rule(
        &["networking.k8s.io"],
        &["networkpolicies", "ingresses"],
        WRITE,
    ),
    rule(&["coordination.k8s.io"], &["leases"], READ_WRITE),
];

/// `system:aggregate-to-admin`.
const AGGREGATE_TO_ADMIN: &[BuiltInRule] = &[
    rule(
        &["authorization.k8s.io"],
        &["localsubjectaccessreviews"],
        &["create"],
    ),
    rule(
        &["rbac.authorization.k8s.io"],
        &["roles", "rolebindings"],
        READ_WRITE,
    ),
];

/// `system:auth-delegator`: token and access reviews (kube-rbac-proxy, metrics auth).
const AUTH_DELEGATOR: &[BuiltInRule] = &[
    rule(&["authentication.k8s.io"], &["tokenreviews"], &["create"]),
    rule(
        &["authorization.k8s.io"],
        &["subjectaccessreviews"],
        &["create"],
    ),
];

const IMAGE_GROUPS: &[&str] = &["image.openshift.io", ""];
const PROJECT_GROUPS: &[&str] = &["project.openshift.io", ""];

/// `registry-viewer`: pulls from the registry (bound cluster-wide: every namespace's images,
/// shown as `SecretsClusterWide`).
const REGISTRY_VIEWER: &[BuiltInRule] = &[
    rule(
        IMAGE_GROUPS,
        &[
            "imagestreams",
            "imagestreammappings",
            "imagestreamtags",
            "imagestreamimages",
            "imagetags",
        ],
        READ,
    ),
    rule(IMAGE_GROUPS, &["imagestreams/layers"], &["get"]),
    rule(PROJECT_GROUPS, &["projects"], &["get"]),
];

/// `registry-editor`: pushes to and pulls from the registry, with the ServiceAccounts and
/// Secrets (pull and push credentials) of the namespaces it is bound in.
const REGISTRY_EDITOR: &[BuiltInRule] = &[
    rule(&[""], &["serviceaccounts", "secrets"], READ_WRITE),
    rule(
        IMAGE_GROUPS,
        &[
            "imagestreamimages",
            "imagestreamtags",
            "imagestreams/secrets",
            "imagetags",
        ],
        &[
            "get", "list", "watch", "create", "update", "patch", "delete",
        ],
    ),
    rule(IMAGE_GROUPS, &["imagestreams"], READ_WRITE),
    rule(IMAGE_GROUPS, &["imagestreams/layers"], &["get", "update"]),
    rule(IMAGE_GROUPS, &["imagestreammappings"], &["create"]),
    rule(IMAGE_GROUPS, &["imagestreamimports"], &["create"]),
    rule(&[""], &["namespaces"], &["get"]),
    rule(PROJECT_GROUPS, &["projects"], &["get"]),
];

const OPENSHIFT_BOOTSTRAP: &str =
    "OpenShift bootstrap policy (openshift/openshift-apiserver, bootstrappolicy)";

/// The rule of `system:openshift:scc:<name>`: `use` of that SCC.
macro_rules! scc_role {
    ($name:literal) => {
        BuiltInRole {
            name: concat!("system:openshift:scc:", $name),
            source: "OpenShift: the ClusterRole of each default SecurityContextConstraints grants its use (docs: Managing security context constraints)",
            rules: &[&[BuiltInRule {
                api_groups: &["security.openshift.io"],
                resources: &["securitycontextconstraints"],
                verbs: &["use"],
                resource_names: &[$name],
                non_resource_urls: &[],
            }]],
        }
    };
}

/// The built-in ClusterRoles the table knows, by name.
pub const BUILT_IN_ROLES: &[BuiltInRole] = &[
    BuiltInRole {
        name: "cluster-admin",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[CLUSTER_ADMIN],
    },
    BuiltInRole {
        name: "admin",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_ADMIN, AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW],
    },
    BuiltInRole {
        name: "edit",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_EDIT, AGGREGATE_TO_VIEW],
    },
    BuiltInRole {
        name: "view",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_VIEW],
    },
    BuiltInRole {
        name: "system:aggregate-to-admin",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_ADMIN],
    },
    BuiltInRole {
        name: "system:aggregate-to-edit",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_EDIT],
    },
    BuiltInRole {
        name: "system:aggregate-to-view",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AGGREGATE_TO_VIEW],
    },
    BuiltInRole {
        name: "system:auth-delegator",
        source: KUBERNETES_BOOTSTRAP,
        rules: &[AUTH_DELEGATOR],
    },
    BuiltInRole {
        name: "registry-viewer",
        source: OPENSHIFT_BOOTSTRAP,
        rules: &[REGISTRY_VIEWER],
    },
    BuiltInRole {
        name: "registry-editor",
        source: OPENSHIFT_BOOTSTRAP,
        rules: &[REGISTRY_EDITOR],
    },
    scc_role!("anyuid"),
    scc_role!("hostaccess"),
    scc_role!("hostmount-anyuid"),
    scc_role!("hostnetwork"),
    scc_role!("hostnetwork-v2"),
    scc_role!("machine-api-termination-handler"),
    scc_role!("node-exporter"),
    scc_role!("nonroot"),
    scc_role!("nonroot-v2"),
    scc_role!("privileged"),
    scc_role!("restricted"),
    scc_role!("restricted-v2"),
    scc_role!("restricted-v3"),
];

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_role_has_rules_a_source_and_one_row() {
        let mut names = BTreeSet::new();
        for role in BUILT_IN_ROLES {
            assert!(names.insert(role.name), "{} twice", role.name);
            assert!(!role.source.is_empty(), "{}", role.name);
            let rules = role.cluster_role()["rules"].as_array().unwrap().len();
            assert!(rules > 0, "{}", role.name);
        }
    }

    #[test]
    fn admin_holds_what_edit_and_view_hold() {
        let rules = |name: &str| -> Vec<Value> {
            built_in_role(name).unwrap().cluster_role()["rules"]
                .as_array()
                .unwrap()
                .clone()
        };
        let admin = rules("admin");
        for rule in rules("edit").iter().chain(&rules("view")) {
            assert!(admin.contains(rule), "{rule}");
        }
        assert!(built_in_role("system:openshift:scc:unknown").is_none());
        assert!(looks_built_in("system:controller:namespace-controller"));
        assert!(!looks_built_in("edit"));
    }
}
