//! The content policy (§6, §10): what a bundle may ask POM to apply.
//!
//! POM applies bundles with cluster-wide rights. The threat model (PRODUCT §6): an admin who adds
//! a Catalog trusts its publisher to run the operators it ships with the powers their bundles
//! declare for their own ServiceAccounts, visibly; nobody reaches past that through POM. This
//! module applies it on the rendered objects, before anything is applied, and reports every
//! [`PolicyViolation`] of a bundle at once, each naming the object, the rule and what to do:
//!
//! - refusals no admin can lift: the kinds in [`NEVER_ALLOWED`]; namespaced objects outside the
//!   install namespace (but the Roles an Own/SingleNamespace operator needs where it watches);
//!   bindings to roles the bundle does not ship (but the built-in roles
//!   [`super::built_in_roles`] knows, a grant of what they hold, judged as powers); a `system:`
//!   role the table does not know; `aggregate-to-*` labels
//!   beyond the bundle's own kinds; CRD conversion webhooks that are not the bundle's own;
//!   admission webhooks over protected kinds (`super::webhook_reach`);
//!   CRDs claiming what Kubernetes or the platform serves (`super::served_apis`); Services with `externalIPs`; a
//!   PriorityClass that is the cluster's global default; ServiceAccount token Secrets;
//! - subjects by who they are (`subjects::who`): the install namespace's ServiceAccounts are
//!   the bundle's own; [`PLATFORM_READERS`] may read non-secret objects of the install namespace,
//!   and anything more to them is a power (consent); POM's manager never; anyone else (users,
//!   groups, other namespaces' accounts) is refused and omittable, but shown as a
//!   `ClusterAdminEquivalent` power instead when the admin consented to that class (such an
//!   operator could make the binding itself at runtime);
//! - refusals an admin lifts for one named object ([`ContentException`],
//!   `spec.contentExceptions`): kinds outside the format's allowlist, LoadBalancer Services;
//! - powers ([`super::powers`]): the classes that need consent (`spec.consent`) refuse the
//!   bundle until the admin gives it; an admission webhook over kinds that are not the
//!   bundle's own is a power too (`AdmissionWebhooks`, and `ClusterAdminEquivalent` over
//!   workloads and Secrets), consented webhook by webhook and bound to the digest of what it
//!   covers (`spec.consent.webhooks`), so a webhook a later bundle widens asks again.
//!
//! What was lifted is returned with the rendered bundle ([`Judgement`]), never silent.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde_json::Value;

use super::BundleFormat;
use super::assemble::bundle_crd_scopes;
use super::built_in_roles::{BUILT_IN_ROLES_VERSION, built_in_role, looks_built_in};
use super::csv::CLUSTER_MONITORING_LABEL;
use super::kinds::{PLAIN_V0_KINDS, REGISTRY_V1_KINDS};
use super::objects::{ObjectKey, str_at};
use super::powers::{self, Power, PowerClass, Powers};
use super::served_apis;
use super::subjects::{self, Who};
use super::webhook_reach::{self, WebhookConsent};

/// Kinds no bundle may carry, exception or not: they would let a bundle take over the cluster
/// or other tenants (namespaces, admission, aggregated APIs, node and certificate objects).
pub const NEVER_ALLOWED: &[(&str, &str)] = &[
    ("", "Namespace"),
    ("", "Node"),
    (
        "admissionregistration.k8s.io",
        "MutatingWebhookConfiguration",
    ),
    (
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    ),
    ("admissionregistration.k8s.io", "ValidatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "ValidatingAdmissionPolicyBinding",
    ),
    ("admissionregistration.k8s.io", "MutatingAdmissionPolicy"),
    (
        "admissionregistration.k8s.io",
        "MutatingAdmissionPolicyBinding",
    ),
    ("apiregistration.k8s.io", "APIService"),
    ("certificates.k8s.io", "CertificateSigningRequest"),
    ("certificates.k8s.io", "ClusterTrustBundle"),
    ("flowcontrol.apiserver.k8s.io", "FlowSchema"),
    ("flowcontrol.apiserver.k8s.io", "PriorityLevelConfiguration"),
    ("security.openshift.io", "SecurityContextConstraints"),
    ("config.openshift.io", "ClusterOperator"),
    ("config.openshift.io", "ClusterVersion"),
    ("platform.openshift.io", "PlatformOperator"),
    ("platform.openshift.io", "Catalog"),
];

/// OpenShift's platform Prometheus, the first of [`PLATFORM_READERS`] (the admission guard
/// lets the manager bind it in a RoleBinding).
pub const MONITORING_SUBJECT: (&str, &str) = ("openshift-monitoring", "prometheus-k8s");

pub use super::subjects::PLATFORM_READERS;

/// The verbs of read-only access, what a [`PLATFORM_READERS`] identity may receive.
const READ_VERBS: &[&str] = &["get", "list", "watch"];

/// The subresources a read-only grant may name (`get pods/exec` is exec, `get
/// services/proxy` reaches the Service: not reading).
const READ_SUBRESOURCES: &[&str] = &["status", "log"];

/// Label prefixes whose `aggregate-to-*` labels feed the cluster's built-in roles (admin, edit,
/// view, cluster-reader...): a role carrying one gives every holder of those roles its rules.
const AGGREGATION_LABEL_PREFIXES: &[&str] = &[
    "rbac.authorization.k8s.io/aggregate-to-",
    "authorization.openshift.io/aggregate-to-",
];

pub use pom_platform::{PLATFORM_NAMESPACE_PREFIXES, PLATFORM_NAMESPACES, is_platform_namespace};

/// One rule of the policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ContentRule {
    /// A (group, kind) outside the format's allowlist.
    KindNotAllowed,
    /// A kind in [`NEVER_ALLOWED`].
    KindNeverAllowed,
    /// A namespaced object in a namespace other than the install namespace.
    ObjectOutsideInstallNamespace,
    /// A binding naming a `system:` user or group.
    SystemSubjectBinding,
    /// A binding naming any other user or group.
    UserOrGroupBinding,
    /// A binding naming a ServiceAccount outside the install namespace (but the monitoring one).
    ForeignServiceAccountBinding,
    /// A binding to a role the bundle does not ship (but the built-in roles of
    /// [`super::built_in_roles`], judged by what they grant).
    ForeignRoleBinding,
    /// A ClusterRole labelled to aggregate into the cluster's built-in roles.
    AggregationLabel,
    /// A CRD whose conversion webhook is not the bundle's own Service.
    ForeignWebhookEndpoint,
    /// A CRD in a Kubernetes or platform API group.
    BuiltInApiGroup,
    /// A Service with `externalIPs` (CVE-2020-8554).
    ServiceExternalIps,
    /// A Service of type LoadBalancer (reachable from outside the cluster).
    LoadBalancerService,
    /// The bundle's ServiceAccounts would hold a power class the admin has not consented to.
    PowerNotConsented,
    /// An admission webhook whose rules could match POM's own kinds (`platform.openshift.io`,
    /// or every group).
    WebhookMatchesPlatformOperators,
    /// An admission webhook whose rules match a kind no webhook may see (RBAC,
    /// ServiceAccounts, admission configuration, CRDs, nodes, certificates, namespaces, SCCs,
    /// or every resource of a group): `webhook_reach::REACH_TABLE`.
    WebhookMatchesProtectedKind,
    /// A PriorityClass with `globalDefault: true`: every pod of the cluster without a
    /// `priorityClassName` would get its priority.
    PriorityClassGlobalDefault,
    /// A Secret of type `kubernetes.io/service-account-token`: the token controller fills it
    /// with a long-lived token of the ServiceAccount it names.
    ServiceAccountTokenSecret,
}

impl ContentRule {
    /// Every rule, in the order they are documented.
    pub const ALL: [ContentRule; 17] = [
        Self::KindNotAllowed,
        Self::KindNeverAllowed,
        Self::ObjectOutsideInstallNamespace,
        Self::SystemSubjectBinding,
        Self::UserOrGroupBinding,
        Self::ForeignServiceAccountBinding,
        Self::ForeignRoleBinding,
        Self::AggregationLabel,
        Self::ForeignWebhookEndpoint,
        Self::BuiltInApiGroup,
        Self::ServiceExternalIps,
        Self::LoadBalancerService,
        Self::PowerNotConsented,
        Self::WebhookMatchesPlatformOperators,
        Self::WebhookMatchesProtectedKind,
        Self::PriorityClassGlobalDefault,
        Self::ServiceAccountTokenSecret,
    ];

    /// The CamelCase name (as written in `spec.contentExceptions[].rule`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::KindNotAllowed => "KindNotAllowed",
            Self::KindNeverAllowed => "KindNeverAllowed",
            Self::ObjectOutsideInstallNamespace => "ObjectOutsideInstallNamespace",
            Self::SystemSubjectBinding => "SystemSubjectBinding",
            Self::UserOrGroupBinding => "UserOrGroupBinding",
            Self::ForeignServiceAccountBinding => "ForeignServiceAccountBinding",
            Self::ForeignRoleBinding => "ForeignRoleBinding",
            Self::AggregationLabel => "AggregationLabel",
            Self::ForeignWebhookEndpoint => "ForeignWebhookEndpoint",
            Self::BuiltInApiGroup => "BuiltInApiGroup",
            Self::ServiceExternalIps => "ServiceExternalIps",
            Self::LoadBalancerService => "LoadBalancerService",
            Self::PowerNotConsented => "PowerNotConsented",
            Self::WebhookMatchesPlatformOperators => "WebhookMatchesPlatformOperators",
            Self::WebhookMatchesProtectedKind => "WebhookMatchesProtectedKind",
            Self::PriorityClassGlobalDefault => "PriorityClassGlobalDefault",
            Self::ServiceAccountTokenSecret => "ServiceAccountTokenSecret",
        }
    }

    /// Parses [`ContentRule::as_str`].
    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Whether an admin may lift the rule for one named object (`spec.contentExceptions`).
    /// The rules that keep a bundle inside its namespace and its own principals (the threat
    /// model's "nobody reaches past that through POM") never are; powers are lifted by consent.
    pub fn exceptable(self) -> bool {
        matches!(self, Self::KindNotAllowed | Self::LoadBalancerService)
    }
}

impl ContentRule {
    /// Whether the admin may install the bundle without the object this rule refuses
    /// (`spec.omitObjects`): the rules about whom a binding grants, and what, and the
    /// ServiceAccount token Secret (leaving it out mints no token). An omission only ever
    /// grants less.
    pub fn omittable(self) -> bool {
        matches!(
            self,
            Self::SystemSubjectBinding
                | Self::UserOrGroupBinding
                | Self::ForeignServiceAccountBinding
                | Self::ForeignRoleBinding
                | Self::ServiceAccountTokenSecret
        )
    }
}

impl fmt::Display for ContentRule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An admin's exception: `rule` does not apply to the object of `kind` named `name`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContentException {
    pub rule: ContentRule,
    /// The kind with its API group, as POM names objects: `Kind.group` (`Service.ecs.services.k8s.aws`,
    /// `ValidatingWebhookConfiguration.admissionregistration.k8s.io`), or `Kind` alone for the
    /// core group (`Service`, `Pod`). An exception matches only that group's kind (issue 33
    /// item 6: `Service` never excuses a custom resource of kind Service).
    pub kind: String,
    pub name: String,
}

impl fmt::Display for ContentException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} for {} {:?}", self.rule, self.kind, self.name)
    }
}

/// An object the bundle ships that the admin asked POM not to apply (`spec.omitObjects`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OmittedObject {
    /// `RoleBinding`, `ClusterRoleBinding` (RBAC) or `Secret` (core).
    pub kind: String,
    pub name: String,
}

impl OmittedObject {
    /// Whether `key` is the object this omission names, the kind within its own API group
    /// (a custom resource of kind Secret is never omitted by it).
    #[must_use]
    pub fn names(&self, key: &ObjectKey) -> bool {
        OMITTABLE_KINDS
            .iter()
            .any(|(group, kind)| key.group == *group && key.kind == *kind)
            && key.kind == self.kind
            && key.name == self.name
    }
}

impl fmt::Display for OmittedObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {:?} omitted (spec.omitObjects)",
            self.kind, self.name
        )
    }
}

/// The kinds (group, kind) an omission names, and whose refusals it lifts: leaving a binding
/// or a Secret out only ever grants less.
const OMITTABLE_KINDS: &[(&str, &str)] = &[
    ("rbac.authorization.k8s.io", "RoleBinding"),
    ("rbac.authorization.k8s.io", "ClusterRoleBinding"),
    ("", "Secret"),
];

/// What would lift a violation, when something can.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Lift {
    /// An entry of `spec.contentExceptions`.
    Exception(ContentException),
    /// A field of `spec.consent`.
    Consent(PowerClass),
    /// An entry of `spec.consent.webhooks`: one webhook, bound to the digest of what it covers.
    Webhook(WebhookConsent),
    /// An entry of `spec.omitObjects`: install without the object (a binding nothing can allow).
    Omit(OmittedObject),
}

/// Why the policy refuses an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyViolation {
    pub rule: ContentRule,
    /// `Kind.group "name" in namespace "ns"`.
    pub object: String,
    /// The bundle file the object came from.
    pub origin: String,
    /// What is wrong with it, in a sentence.
    pub detail: String,
    /// What the admin could give to lift it (`None`: nothing can).
    pub lift: Option<Lift>,
}

impl fmt::Display for PolicyViolation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({}) breaks POM's content policy, rule {}: {}",
            self.object, self.origin, self.rule, self.detail
        )?;
        match &self.lift {
            Some(Lift::Exception(e)) => write!(
                f,
                "; if you trust this bundle, allow it on the PlatformOperator with spec.contentExceptions: [{{rule: {}, kind: {}, name: {}}}]",
                e.rule, e.kind, e.name
            ),
            Some(Lift::Consent(class)) => write!(
                f,
                "; if you trust this bundle with {class}, consent on the PlatformOperator with spec.consent.{}: true",
                class.consent_field()
            ),
            Some(Lift::Webhook(consent)) => write!(
                f,
                "; if you trust this bundle's webhook with what its rules match, consent on the PlatformOperator with spec.consent.webhooks: [{consent}] (bound to what it covers: a webhook that matches anything else asks again)"
            ),
            Some(Lift::Omit(o)) => write!(
                f,
                "; no exception can allow this: ask the bundle's publisher for a bundle without it, or, if the operator can run without the binding, install it without with spec.omitObjects: [{{kind: {}, name: {}}}]",
                o.kind, o.name
            ),
            None => f.write_str(
                "; no exception can allow this, ask the bundle's publisher for a bundle without it",
            ),
        }
    }
}

/// Every violation of a bundle, reported at once (an admin fixes them in one pass).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyViolations(pub Vec<PolicyViolation>);

impl PolicyViolations {
    /// The exceptions and consents that would lift every liftable violation.
    pub fn lifts(&self) -> BTreeSet<&Lift> {
        self.0.iter().filter_map(|v| v.lift.as_ref()).collect()
    }

    /// How many violations nothing can lift.
    pub fn unliftable(&self) -> usize {
        self.0.iter().filter(|v| v.lift.is_none()).count()
    }

    /// The spec fields that would lift every liftable violation, ready to paste
    /// (`consent: {...}, contentExceptions: [...]`), or `None` when nothing can be lifted.
    pub fn spec_to_add(&self) -> Option<String> {
        let lifts = self.lifts();
        let mut consents: Vec<String> = lifts
            .iter()
            .filter_map(|l| match l {
                Lift::Consent(class) => Some(format!("{}: true", class.consent_field())),
                _ => None,
            })
            .collect();
        let webhooks: Vec<String> = lifts
            .iter()
            .filter_map(|l| match l {
                Lift::Webhook(consent) => Some(consent.to_string()),
                _ => None,
            })
            .collect();
        if !webhooks.is_empty() {
            consents.push(format!(
                "{}: [{}]",
                PowerClass::AdmissionWebhooks.consent_field(),
                webhooks.join(", ")
            ));
        }
        let exceptions: Vec<String> = lifts
            .iter()
            .filter_map(|l| match l {
                Lift::Exception(e) => Some(format!(
                    "{{rule: {}, kind: {}, name: {}}}",
                    e.rule, e.kind, e.name
                )),
                _ => None,
            })
            .collect();
        let omissions: Vec<String> = lifts
            .iter()
            .filter_map(|l| match l {
                Lift::Omit(o) => Some(format!("{{kind: {}, name: {}}}", o.kind, o.name)),
                _ => None,
            })
            .collect();
        let mut parts = Vec::new();
        if !consents.is_empty() {
            parts.push(format!("consent: {{{}}}", consents.join(", ")));
        }
        if !exceptions.is_empty() {
            parts.push(format!("contentExceptions: [{}]", exceptions.join(", ")));
        }
        if !omissions.is_empty() {
            parts.push(format!("omitObjects: [{}]", omissions.join(", ")));
        }
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}

impl fmt::Display for PolicyViolations {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let [one] = self.0.as_slice() {
            return write!(f, "{one}");
        }
        write!(f, "{} findings break POM's content policy:", self.0.len())?;
        for (index, violation) in self.0.iter().enumerate() {
            write!(f, " ({}) {violation};", index + 1)?;
        }
        match (self.spec_to_add(), self.unliftable()) {
            (Some(spec), 0) => write!(
                f,
                " to allow them all, add to the PlatformOperator's spec: {spec}"
            ),
            (Some(spec), n) => write!(
                f,
                " {n} of them nothing can allow; the others would need: {spec}"
            ),
            (None, _) => f.write_str(" nothing can allow them"),
        }
    }
}

/// What the policy needs besides the objects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PolicyContext<'a> {
    pub format: Option<BundleFormat>,
    pub install_namespace: &'a str,
    /// The namespace an OwnNamespace/SingleNamespace operator watches: its generated Roles and
    /// RoleBindings live there too.
    pub watch_namespace: Option<&'a str>,
    /// The manager's own namespace and ServiceAccount, when known.
    pub manager_namespace: Option<&'a str>,
    pub manager_service_account: Option<&'a str>,
    pub exceptions: &'a [ContentException],
    /// The power classes the admin consented to.
    pub consent: &'a BTreeSet<PowerClass>,
    /// The webhooks the admin consented to, each bound to what it covers.
    pub webhook_consent: &'a BTreeSet<WebhookConsent>,
    /// What POM rendered from `spec.webhookdefinitions`, as (kind, name): the webhook
    /// configurations, and the CRDs whose conversion it set. Only these may carry webhooks.
    pub rendered_webhooks: &'a BTreeSet<(String, String)>,
    /// Whether the bundle asks for its install namespace to be labelled
    /// `openshift.io/cluster-monitoring=true` (the CSV's `operatorframework.io/cluster-monitoring`
    /// annotation, or its suggested-namespace template): a `PlatformConfig` power.
    pub cluster_monitoring: bool,
}

/// What a bundle that passes the policy holds and needed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Judgement {
    pub powers: Powers,
    /// The admin's exceptions this bundle needed (reported, never silent).
    pub exceptions_used: Vec<ContentException>,
    /// The consented classes this bundle's powers fall in (reported, never silent).
    pub consents_used: BTreeSet<PowerClass>,
}

/// Why an install namespace is refused, if it is.
pub fn reserved_namespace(namespace: &str, manager_namespace: Option<&str>) -> Option<String> {
    if Some(namespace) == manager_namespace {
        return Some("it is the namespace POM itself runs in".to_owned());
    }
    if is_platform_namespace(namespace) {
        return Some(
            "it is one of the platform's own namespaces (kube-*, default, openshift, openshift-operators, openshift-config*, openshift-kube-*, openshift-monitoring, ...); other openshift-* namespaces are allowed when POM creates them for the PlatformOperator".to_owned(),
        );
    }
    None
}

/// Why `namespace` may not be watched by a SingleNamespace operator, if it may not: a
/// namespace that may not be an install namespace ([`reserved_namespace`]), and any other
/// `openshift-*` namespace too, since POM uses those only when it created and owns them for
/// the PlatformOperator, which it never does for a watched namespace (issue 33 item 5; that it
/// is not another PlatformOperator's install namespace is the manager's check, which knows
/// them).
#[must_use]
pub fn reserved_watch_namespace(
    namespace: &str,
    manager_namespace: Option<&str>,
) -> Option<String> {
    reserved_namespace(namespace, manager_namespace).or_else(|| {
        namespace.starts_with(pom_platform::OWNED_ONLY_PREFIX).then(|| {
            format!(
                "it is an {}* namespace, which POM uses only as a PlatformOperator's own install namespace, never as a watched one",
                pom_platform::OWNED_ONLY_PREFIX
            )
        })
    })
}

/// Checks `objects` (rendered, with their origins) against the policy. Returns the bundle's
/// powers and the exceptions and consents it needed, or every violation, in apply order.
pub fn check(
    objects: &[Value],
    origins: &[String],
    ctx: &PolicyContext<'_>,
) -> Result<Judgement, PolicyViolations> {
    let own = OwnObjects::of(objects);
    let mut run = Check::new(objects, origins, ctx, &own);
    run.cluster_monitoring();
    for (index, object) in objects.iter().enumerate() {
        run.object(index, object);
    }
    run.ask_consent();
    run.finish()
}

/// One run of [`check`]: the steps share what was found so far.
struct Check<'a> {
    objects: &'a [Value],
    origins: &'a [String],
    ctx: &'a PolicyContext<'a>,
    own: &'a OwnObjects,
    /// The powers of the bundle's roles and pod templates (`powers::compute`).
    powers: Powers,
    /// Powers found by the policy itself (bindings to other principals, cluster monitoring).
    granted: Vec<Power>,
    /// The admission-webhook powers, each with the consent that would allow it.
    webhooks: Vec<(Power, WebhookConsent)>,
    used: BTreeSet<ContentException>,
    consents_used: BTreeSet<PowerClass>,
    violations: Vec<PolicyViolation>,
    /// Whether the bundle's own ServiceAccounts are cluster-admin-equivalent (then a grant to
    /// another principal asks that same consent), and whether the admin trusts it so.
    holds_admin: bool,
    trusted_admin: bool,
}

impl<'a> Check<'a> {
    fn new(
        objects: &'a [Value],
        origins: &'a [String],
        ctx: &'a PolicyContext<'a>,
        own: &'a OwnObjects,
    ) -> Self {
        let powers = powers::compute(objects);
        let holds_admin = powers
            .classes()
            .contains(&PowerClass::ClusterAdminEquivalent);
        Self {
            objects,
            origins,
            ctx,
            own,
            powers,
            granted: Vec::new(),
            webhooks: Vec::new(),
            used: BTreeSet::new(),
            consents_used: BTreeSet::new(),
            violations: Vec::new(),
            holds_admin,
            trusted_admin: ctx.consent.contains(&PowerClass::ClusterAdminEquivalent),
        }
    }

    fn origin_of(&self, index: usize) -> String {
        self.origins
            .get(index)
            .map_or("the bundle", String::as_str)
            .to_owned()
    }

    /// The opt-in to cluster monitoring is a `PlatformConfig` power.
    fn cluster_monitoring(&mut self) {
        if !self.ctx.cluster_monitoring {
            return;
        }
        self.granted.push(Power {
            class: PowerClass::PlatformConfig,
            kind: "Namespace".to_owned(),
            name: self.ctx.install_namespace.to_owned(),
            detail: format!(
                "the bundle asks for its install namespace to be labelled {CLUSTER_MONITORING_LABEL}=true (the ClusterServiceVersion's operatorframework.io/cluster-monitoring annotation or suggested-namespace template): the platform's Prometheus then scrapes its ServiceMonitors and evaluates its PrometheusRules with the cluster's own alerting [OpenShift: cluster monitoring; the console asks for the same opt-in]"
            ),
        });
    }

    /// Every rule one object breaks, and the powers it adds.
    fn object(&mut self, index: usize, object: &Value) {
        let key = ObjectKey::of(object);
        let mut found = findings(object, &key, self.ctx, self.own);
        if key.group == RBAC_GROUP
            && matches!(key.kind.as_str(), "RoleBinding" | "ClusterRoleBinding")
        {
            self.subjects(index, object, &key, &mut found);
        }
        if is_rendered_webhook(&key, self.ctx) {
            self.webhook(object, &key, &mut found);
        }
        for (rule, detail) in found {
            self.record(index, &key, rule, detail);
        }
    }

    /// The subjects of a binding: refused, a power, or (trusted as cluster-admin-equivalent)
    /// a grant shown as that power.
    fn subjects(
        &mut self,
        index: usize,
        object: &Value,
        key: &ObjectKey,
        found: &mut Vec<(ContentRule, String)>,
    ) {
        for subject in subject_findings(object, key, self.ctx, self.own) {
            let power = |class: PowerClass, detail: String| Power {
                class,
                kind: key.kind.clone(),
                name: key.name.clone(),
                detail,
            };
            match subject {
                SubjectFinding::Refused(rule, detail) => found.push((rule, detail)),
                SubjectFinding::Power(class, detail) => self.granted.push(power(class, detail)),
                SubjectFinding::Foreign { grant, .. } if self.trusted_admin => {
                    self.granted
                        .push(power(PowerClass::ClusterAdminEquivalent, grant));
                }
                SubjectFinding::Foreign { rule, detail, .. } if self.holds_admin => {
                    self.violations.push(PolicyViolation {
                        rule,
                        object: key.to_string(),
                        origin: self.origin_of(index),
                        detail: format!(
                            "{detail}; the bundle's own ServiceAccounts are {} already, and an operator trusted so could make this binding itself at runtime, so that consent allows it (or install without it: spec.omitObjects: [{{kind: {}, name: {}}}])",
                            PowerClass::ClusterAdminEquivalent,
                            key.kind,
                            key.name
                        ),
                        lift: Some(Lift::Consent(PowerClass::ClusterAdminEquivalent)),
                    });
                }
                SubjectFinding::Foreign { rule, detail, .. } => found.push((rule, detail)),
            }
        }
    }

    /// An admission webhook POM rendered: its refusals, and its powers over kinds that are not
    /// the bundle's own (`webhook_reach`).
    fn webhook(&mut self, object: &Value, key: &ObjectKey, found: &mut Vec<(ContentRule, String)>) {
        let reach = webhook_reach::reach(object, &self.own.plurals);
        found.extend(reach.refused.iter().cloned());
        let power = |class: PowerClass, detail: String| Power {
            class,
            kind: kind_display(key),
            name: key.name.clone(),
            detail,
        };
        for ((class, what, source), triples) in &reach.classes {
            self.granted.push(power(
                *class,
                format!(
                    "its rules match {}: {what} [{source}]",
                    webhook_reach::describe(triples)
                ),
            ));
        }
        if reach.covered.is_empty() {
            return;
        }
        let consent = WebhookConsent {
            name: key.name.clone(),
            covers: reach.covers(&key.kind),
        };
        let detail = format!(
            "its rules match, outside the bundle's own kinds: {}; it sees (and may block{}) them in every namespace its selector lets through [covers {}]",
            webhook_reach::describe(&reach.covered),
            if key.kind.starts_with("Mutating") {
                " or change"
            } else {
                ""
            },
            consent.covers
        );
        self.webhooks
            .push((power(PowerClass::AdmissionWebhooks, detail), consent));
    }

    /// A finding, lifted by the admin's exception or recorded with what would lift it.
    fn record(&mut self, index: usize, key: &ObjectKey, rule: ContentRule, mut detail: String) {
        let exception = ContentException {
            rule,
            kind: kind_display(key),
            name: key.name.clone(),
        };
        if rule.exceptable() && self.ctx.exceptions.contains(&exception) {
            self.used.insert(exception);
            return;
        }
        if rule.exceptable()
            && !key.group.is_empty()
            && self
                .ctx
                .exceptions
                .iter()
                .any(|e| e.rule == rule && e.kind == key.kind && e.name == key.name)
        {
            detail.push_str(&format!(
                " (spec.contentExceptions names kind {} without its API group, which means the core group's kind; this object is {}: name it kind: {})",
                key.kind, exception.kind, exception.kind
            ));
        }
        let lift = if rule.exceptable() {
            Some(Lift::Exception(exception))
        } else if rule.omittable()
            && OMITTABLE_KINDS
                .iter()
                .any(|(group, kind)| key.group == *group && key.kind == *kind)
        {
            Some(Lift::Omit(OmittedObject {
                kind: key.kind.clone(),
                name: key.name.clone(),
            }))
        } else {
            None
        };
        self.violations.push(PolicyViolation {
            rule,
            object: key.to_string(),
            origin: self.origin_of(index),
            detail,
            lift,
        });
    }

    /// Each power of a class that needs consent, and each webhook over kinds not the bundle's
    /// own, refused until the admin gives it (the webhook's consent bound to what it covers).
    fn ask_consent(&mut self) {
        self.powers.found.append(&mut self.granted);
        self.powers.found.sort();
        self.powers.found.dedup();
        let classes = self.powers.classes();
        for class in classes.into_iter().filter(|c| c.consented_by_class()) {
            if self.ctx.consent.contains(&class) {
                self.consents_used.insert(class);
                continue;
            }
            let asked: Vec<Power> = self.powers.of(class).cloned().collect();
            for power in asked {
                self.refuse_power(&power, Lift::Consent(class));
            }
        }
        for (power, consent) in std::mem::take(&mut self.webhooks) {
            if self.ctx.webhook_consent.contains(&consent) {
                self.consents_used.insert(PowerClass::AdmissionWebhooks);
            } else {
                self.refuse_power(&power, Lift::Webhook(consent));
            }
            self.powers.found.push(power);
        }
        self.powers.found.sort();
    }

    fn refuse_power(&mut self, power: &Power, lift: Lift) {
        let index = self.objects.iter().position(|o| {
            let key = ObjectKey::of(o);
            (key.kind == power.kind || kind_display(&key) == power.kind) && key.name == power.name
        });
        self.violations.push(PolicyViolation {
            rule: ContentRule::PowerNotConsented,
            object: format!("{} {:?}", power.kind, power.name),
            origin: index.map_or_else(|| "the bundle".to_owned(), |i| self.origin_of(i)),
            detail: format!("it makes the operator {}: {}", power.class, power.detail),
            lift: Some(lift),
        });
    }

    fn finish(self) -> Result<Judgement, PolicyViolations> {
        if self.violations.is_empty() {
            Ok(Judgement {
                powers: self.powers,
                exceptions_used: self.used.into_iter().collect(),
                consents_used: self.consents_used,
            })
        } else {
            Err(PolicyViolations(self.violations))
        }
    }
}

/// Whether `key` is a webhook configuration POM rendered from `spec.webhookdefinitions`.
fn is_rendered_webhook(key: &ObjectKey, ctx: &PolicyContext<'_>) -> bool {
    key.group == ADMISSION_GROUP
        && ctx
            .rendered_webhooks
            .contains(&(key.kind.clone(), key.name.clone()))
}

const ADMISSION_GROUP: &str = "admissionregistration.k8s.io";

const RBAC_GROUP: &str = "rbac.authorization.k8s.io";

/// What the bundle itself ships, that its other objects may refer to.
struct OwnObjects {
    /// (group, kind) → cluster-scoped, of the bundle's CRDs.
    kinds: BTreeMap<(String, String), bool>,
    /// (kind, name) → rules, of its Roles and ClusterRoles.
    roles: BTreeMap<(String, String), Vec<Value>>,
    /// (namespace, name) of its Services.
    services: BTreeSet<(String, String)>,
    /// (group, plural) of its CRDs: the kinds that are its own, never whole groups.
    plurals: BTreeSet<(String, String)>,
}

impl OwnObjects {
    fn of(objects: &[Value]) -> Self {
        let mut roles = BTreeMap::new();
        let mut services = BTreeSet::new();
        let mut plurals = BTreeSet::new();
        for object in objects {
            let key = ObjectKey::of(object);
            match (key.group.as_str(), key.kind.as_str()) {
                (RBAC_GROUP, "Role" | "ClusterRole") => {
                    let rules = object
                        .get("rules")
                        .and_then(Value::as_array)
                        .cloned()
                        .unwrap_or_default();
                    roles.insert((key.kind, key.name), rules);
                }
                ("", "Service") => {
                    services.insert((key.namespace, key.name));
                }
                ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                    if let (Some(group), Some(plural)) = (
                        str_at(object, &["spec", "group"]),
                        str_at(object, &["spec", "names", "plural"]),
                    ) {
                        plurals.insert((group.to_owned(), plural.to_owned()));
                    }
                }
                _ => {}
            }
        }
        Self {
            kinds: bundle_crd_scopes(objects),
            roles,
            services,
            plurals,
        }
    }
}

/// Every rule `object` breaks, with a sentence each.
fn findings(
    object: &Value,
    key: &ObjectKey,
    ctx: &PolicyContext<'_>,
    own: &OwnObjects,
) -> Vec<(ContentRule, String)> {
    let group_kind = (key.group.as_str(), key.kind.as_str());
    let rendered_webhook = ctx
        .rendered_webhooks
        .contains(&(key.kind.clone(), key.name.clone()));
    // Judged by `Check::webhook`, rule by rule (`webhook_reach`).
    if is_rendered_webhook(key, ctx) {
        return Vec::new();
    }
    if NEVER_ALLOWED.contains(&group_kind) {
        return vec![(
            ContentRule::KindNeverAllowed,
            format!(
                "a bundle may not create {} objects (POM creates the install namespace itself, and admission, aggregated APIs and platform objects are the cluster's)",
                kind_display(key)
            ),
        )];
    }
    let mut found = Vec::new();
    let own_kind = own
        .kinds
        .contains_key(&(key.group.clone(), key.kind.clone()));
    let allowed = allowed_kind(ctx.format, group_kind)
        || (ctx.format == Some(BundleFormat::PlainV0) && own_kind);
    if !allowed {
        found.push((
            ContentRule::KindNotAllowed,
            format!(
                "{} is not a kind a {} bundle may contain (allowed: {})",
                kind_display(key),
                ctx.format.map_or("bundle", BundleFormat::as_str),
                allowed_list(ctx.format)
            ),
        ));
    }
    let watched_rbac = ctx.watch_namespace == Some(key.namespace.as_str())
        && key.group == RBAC_GROUP
        && matches!(key.kind.as_str(), "Role" | "RoleBinding");
    if !key.namespace.is_empty() && key.namespace != ctx.install_namespace && !watched_rbac {
        found.push((
            ContentRule::ObjectOutsideInstallNamespace,
            format!(
                "every namespaced object must be in the install namespace {:?}, this one names {:?}",
                ctx.install_namespace, key.namespace
            ),
        ));
    }
    match group_kind {
        (RBAC_GROUP, "RoleBinding" | "ClusterRoleBinding") => {
            found.extend(binding_findings(object, own));
        }
        (RBAC_GROUP, "ClusterRole") => found.extend(aggregation_label_findings(object, own)),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            found.extend(crd_findings(object, ctx, own, rendered_webhook));
        }
        ("", "Service") => found.extend(service_findings(object)),
        ("scheduling.k8s.io", "PriorityClass")
            if object.get("globalDefault").and_then(Value::as_bool) == Some(true) =>
        {
            found.push((
                ContentRule::PriorityClassGlobalDefault,
                "it sets globalDefault: true, so every pod of the cluster created without a priorityClassName would get its priority (preempting, or being preempted by, every other workload); a bundle's PriorityClass must be one its own pods name".to_owned(),
            ));
        }
        ("", "Secret") if str_at(object, &["type"]) == Some(SERVICE_ACCOUNT_TOKEN_TYPE) => {
            found.push((
                ContentRule::ServiceAccountTokenSecret,
                format!(
                    "it is of type {SERVICE_ACCOUNT_TOKEN_TYPE}, which the token controller fills with a long-lived token of the ServiceAccount it names (of any account, the platform's included); operators get short-lived tokens from the TokenRequest API (projected volumes)"
                ),
            ));
        }
        _ => {}
    }
    found
}

/// The Secret type the token controller fills with a ServiceAccount's token.
const SERVICE_ACCOUNT_TOKEN_TYPE: &str = "kubernetes.io/service-account-token";

fn kind_display(key: &ObjectKey) -> String {
    if key.group.is_empty() {
        key.kind.clone()
    } else {
        format!("{}.{}", key.kind, key.group)
    }
}

fn allowed_kind(format: Option<BundleFormat>, group_kind: (&str, &str)) -> bool {
    match format {
        Some(BundleFormat::RegistryV1) | None => REGISTRY_V1_KINDS.contains(&group_kind),
        Some(BundleFormat::PlainV0) => PLAIN_V0_KINDS.contains(&group_kind),
    }
}

fn allowed_list(format: Option<BundleFormat>) -> String {
    let list = match format {
        Some(BundleFormat::PlainV0) => PLAIN_V0_KINDS,
        Some(BundleFormat::RegistryV1) | None => REGISTRY_V1_KINDS,
    };
    let mut names: Vec<String> = list
        .iter()
        .map(|(g, k)| {
            if g.is_empty() {
                (*k).to_owned()
            } else {
                format!("{k}.{g}")
            }
        })
        .collect();
    if format == Some(BundleFormat::PlainV0) {
        names.push("custom resources of the bundle's own CRDs".to_owned());
    }
    names.join(", ")
}

fn binding_findings(object: &Value, own: &OwnObjects) -> Vec<(ContentRule, String)> {
    let role_kind = str_at(object, &["roleRef", "kind"]).unwrap_or_default();
    let role_name = str_at(object, &["roleRef", "name"]).unwrap_or_default();
    let role = (role_kind.to_owned(), role_name.to_owned());
    if own.roles.contains_key(&role) {
        return Vec::new();
    }
    // A built-in role the table knows: a grant of what it holds, judged by the powers table
    // (`powers::compute`), like a role the bundle ships.
    if role_kind == "ClusterRole" && built_in_role(role_name).is_some() {
        return Vec::new();
    }
    let detail = if role_kind == "ClusterRole" && looks_built_in(role_name) {
        format!(
            "it binds ClusterRole {role_name:?}, which the bundle does not ship and which looks like one the cluster defines, but POM's table of built-in roles ({BUILT_IN_ROLES_VERSION}) does not know what it grants, so POM cannot show the power it would give; a bundle may bind its own roles and the built-in roles the table knows (docs/content-policy.md)"
        )
    } else {
        format!(
            "it binds {role_kind} {role_name:?}, which the bundle does not ship (another operator's or the cluster's own, whose rules are not in the bundle); a bundle may bind its own roles and the built-in roles POM's table knows (cluster-admin, admin, edit, view, the SCC roles..., judged by what they grant), so what its ServiceAccounts can do is visible"
        )
    };
    vec![(ContentRule::ForeignRoleBinding, detail)]
}

/// What a binding's subject means for the bundle (besides the role it binds).
enum SubjectFinding {
    /// Never allowed (POM's manager): refused, omittable.
    Refused(ContentRule, String),
    /// A grant that is a power of the bundle (more than reading to a platform identity).
    Power(PowerClass, String),
    /// A grant to anyone else: refused (omittable), or a `ClusterAdminEquivalent` power under
    /// that consent (`grant` is its evidence).
    Foreign {
        rule: ContentRule,
        detail: String,
        grant: String,
    },
}

/// Each subject of a binding the bundle ships that is not the bundle's own, judged by who it is
/// (`subjects::who`) and, for a platform identity, by what the binding grants.
fn subject_findings(
    object: &Value,
    key: &ObjectKey,
    ctx: &PolicyContext<'_>,
    own: &OwnObjects,
) -> Vec<SubjectFinding> {
    let role_kind = str_at(object, &["roleRef", "kind"]).unwrap_or_default();
    let role_name = str_at(object, &["roleRef", "name"]).unwrap_or_default();
    let subjects = object
        .get("subjects")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let mut found = Vec::new();
    for subject in subjects {
        let who = subjects::who(
            subject,
            &key.namespace,
            ctx.install_namespace,
            (ctx.manager_namespace, ctx.manager_service_account),
        );
        match who {
            Who::Own | Who::Unknown => {}
            Who::Manager(whom) => found.push(SubjectFinding::Refused(
                ContentRule::ForeignServiceAccountBinding,
                format!(
                    "it binds {whom}, POM's own ServiceAccount: a bundle may never grant the manager anything; a bundle may bind ServiceAccounts of its install namespace {:?}",
                    ctx.install_namespace
                ),
            )),
            Who::PlatformReader(whom) => {
                if let Some(beyond) = reader_grant_beyond(key, role_kind, role_name, ctx, own) {
                    for (class, what) in beyond {
                        found.push(SubjectFinding::Power(
                            class,
                            format!(
                                "grants the platform identity {whom} more than read-only access to non-secret objects of the install namespace (what it may get without consent): {what}"
                            ),
                        ));
                    }
                }
            }
            Who::Other(rule, whom) => found.push(SubjectFinding::Foreign {
                rule,
                detail: format!(
                    "it binds {whom} to {role_kind} {role_name:?}; a bundle may bind the ServiceAccounts of its install namespace {:?} (and give the platform's monitoring read-only access there), no other principal",
                    ctx.install_namespace
                ),
                grant: format!(
                    "binds {whom} to {role_kind} {role_name:?}: a grant to a principal other than the bundle's own, allowed because the admin trusts the operator as cluster-admin-equivalent (it could make this binding itself at runtime) [PRODUCT §6: who receives a grant]"
                ),
            }),
        }
    }
    found
}

/// What a binding grants a platform identity beyond read-only access (`get`, `list`, `watch`)
/// to non-secret objects of the install namespace, by class, or `None` when it grants no more.
/// Any grant beyond that is a grant to another principal, `ClusterAdminEquivalent` as for
/// anyone else, together with the classes of the escalation paths its role opens at the
/// binding's scope (`powers`).
fn reader_grant_beyond(
    binding: &ObjectKey,
    role_kind: &str,
    role_name: &str,
    ctx: &PolicyContext<'_>,
    own: &OwnObjects,
) -> Option<Vec<(PowerClass, String)>> {
    let in_install_namespace =
        binding.kind == "RoleBinding" && binding.namespace == ctx.install_namespace;
    let built_in = (role_kind == "ClusterRole")
        .then(|| built_in_role(role_name))
        .flatten()
        .and_then(|role| {
            role.cluster_role()
                .get("rules")
                .and_then(Value::as_array)
                .cloned()
        });
    let rules = own
        .roles
        .get(&(role_kind.to_owned(), role_name.to_owned()))
        .cloned()
        .or(built_in);
    let reads_only = match &rules {
        // The built-in `view`: read access to what a namespace holds, Secrets excepted (its
        // `get` of `/scale` subresources included).
        _ if (role_kind, role_name) == ("ClusterRole", "view")
            && !own
                .roles
                .contains_key(&(role_kind.to_owned(), role_name.to_owned())) =>
        {
            true
        }
        Some(rules) => !rules.is_empty() && rules.iter().all(rule_reads_non_secrets),
        // A role nobody ships nor the table knows is refused already (`ForeignRoleBinding`):
        // no power to ask for.
        None => return None,
    };
    if in_install_namespace && reads_only {
        return None;
    }
    let cluster_wide = binding.kind == "ClusterRoleBinding";
    let scope = if cluster_wide {
        "cluster-wide"
    } else {
        "in its namespace"
    };
    let role = serde_json::json!({ "rules": rules.unwrap_or_default() });
    // Always a grant to another principal (what the admin trusts only a cluster-admin-equivalent
    // operator to make), besides whatever paths the role opens for that principal: the classes
    // of its paths never stand in for it (a `cluster-admin` RoleBinding to the platform's
    // Prometheus is not only `PrivilegedWorkloads`).
    let mut classes: Vec<(PowerClass, String)> = vec![(
        PowerClass::ClusterAdminEquivalent,
        format!(
            "{role_kind} {role_name:?} {scope} (writes, Secrets, or beyond the install namespace: a grant to another principal)"
        ),
    )];
    classes.extend(
        powers::grant_powers(&role, cluster_wide)
            .into_iter()
            .filter(|(class, _)| class.needs_consent())
            .map(|(class, what)| (class, format!("{role_kind} {role_name:?} {scope}: {what}"))),
    );
    Some(classes)
}

/// Whether a rule only reads (`get`, `list`, `watch`) named resources that are not Secrets
/// (nor a wildcard that includes them, nor a subresource that does more than read).
fn rule_reads_non_secrets(rule: &Value) -> bool {
    let strings = |field: &str| -> Vec<&str> {
        rule.get(field)
            .and_then(Value::as_array)
            .map(|items| items.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default()
    };
    let verbs = strings("verbs");
    let groups = strings("apiGroups");
    let resources = strings("resources");
    let core = groups.iter().any(|g| g.is_empty() || *g == "*");
    rule.get("nonResourceURLs").is_none()
        && !verbs.is_empty()
        && verbs.iter().all(|v| READ_VERBS.contains(v))
        && !resources.is_empty()
        && resources.iter().all(|resource| {
            let (base, sub) = match resource.split_once('/') {
                Some((base, sub)) => (base, Some(sub)),
                None => (*resource, None),
            };
            base != "*"
                && !(core && base == "secrets")
                && sub.is_none_or(|sub| READ_SUBRESOURCES.contains(&sub))
        })
}

/// A ClusterRole labelled to aggregate into built-in roles may grant only the bundle's own API
/// groups (the usual "let admins and editors use our custom resources" role).
fn aggregation_label_findings(object: &Value, own: &OwnObjects) -> Vec<(ContentRule, String)> {
    let labels: Vec<&str> = object
        .get("metadata")
        .and_then(|m| m.get("labels"))
        .and_then(Value::as_object)
        .map(|labels| {
            labels
                .keys()
                .map(String::as_str)
                .filter(|key| {
                    AGGREGATION_LABEL_PREFIXES
                        .iter()
                        .any(|prefix| key.starts_with(prefix))
                })
                .collect()
        })
        .unwrap_or_default();
    if labels.is_empty() {
        return Vec::new();
    }
    let rules = object
        .get("rules")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or_default();
    let outside: Vec<String> = rules
        .iter()
        .enumerate()
        .filter(|(_, rule)| !grants_only_own_kinds(rule, own))
        .map(|(index, _)| format!("rules[{index}]"))
        .collect();
    if outside.is_empty() {
        return Vec::new();
    }
    vec![(
        ContentRule::AggregationLabel,
        format!(
            "it is labelled {} (so every holder of those built-in roles gains its rules) and {} grants beyond the bundle's own kinds; such a role may grant only the kinds the bundle's CRDs define (group and plural, their subresources included)",
            labels.join(", "),
            outside.join(", ")
        ),
    )]
}

/// Whether an RBAC rule names only kinds the bundle's CRDs define (issue 33 item 3: a
/// bundle's own kinds are its CRDs' group and plural, so a kind of its group that no CRD of it
/// defines is not its own). One exception, kept until decided (`docs/decisions.md`): `*`
/// resources of a group one of its CRDs uses, as before, since apicurito aggregates
/// `apicur.io/*` into `admin` and `edit` and nothing would lift the refusal.
fn grants_only_own_kinds(rule: &Value, own: &OwnObjects) -> bool {
    let strings = |field: &str| -> Option<Vec<&str>> {
        rule.get(field)
            .and_then(Value::as_array)
            .map(|items| items.iter().map(|i| i.as_str().unwrap_or("*")).collect())
    };
    let (Some(groups), Some(resources)) = (strings("apiGroups"), strings("resources")) else {
        return false;
    };
    rule.get("nonResourceURLs").is_none()
        && !groups.is_empty()
        && !resources.is_empty()
        && groups.iter().all(|group| {
            resources.iter().all(|resource| {
                let base = resource.split('/').next().unwrap_or_default();
                own.plurals
                    .contains(&((*group).to_owned(), base.to_owned()))
                    || (*resource == "*" && own.kinds.keys().any(|(g, _)| g == group))
            })
        })
}

fn crd_findings(
    object: &Value,
    ctx: &PolicyContext<'_>,
    own: &OwnObjects,
    conversion_rendered: bool,
) -> Vec<(ContentRule, String)> {
    let mut found = Vec::new();
    let group = str_at(object, &["spec", "group"]).unwrap_or_default();
    let plural = str_at(object, &["spec", "names", "plural"]).unwrap_or_default();
    match served_apis::served_by(group, plural) {
        Some(row) if row.serves == served_apis::Serves::Group => found.push((
            ContentRule::BuiltInApiGroup,
            format!(
                "it defines kinds in the API group {group:?}, which Kubernetes or the platform serves ({} serves every resource of it, per POM's table of served APIs from Kubernetes {} and openshift/api {}); a bundle's CRDs must use groups of its own",
                row.server,
                served_apis::KUBERNETES_VERSION,
                served_apis::OPENSHIFT_API_VERSION
            ),
        )),
        Some(_) => found.push((
            ContentRule::BuiltInApiGroup,
            format!(
                "it defines {plural}.{group}, which the platform serves (openshift/api {} publishes its CRD; the group holds the platform's own kinds next to optional operators' kinds); a bundle's CRDs must define kinds of its own",
                served_apis::OPENSHIFT_API_VERSION
            ),
        )),
        None => {}
    }
    // A conversion POM rendered from spec.webhookdefinitions calls the bundle's own Service.
    if str_at(object, &["spec", "conversion", "strategy"]) == Some("Webhook")
        && !conversion_rendered
    {
        let config = ["spec", "conversion", "webhook", "clientConfig"];
        let mut path = config.to_vec();
        let url = str_at(object, &[path.as_slice(), &["url"]].concat()).map(str::to_owned);
        path.push("service");
        let namespace = str_at(object, &[path.as_slice(), &["namespace"]].concat());
        let name = str_at(object, &[path.as_slice(), &["name"]].concat());
        let detail = match (url, namespace, name) {
            (Some(url), _, _) => format!("its conversion webhook calls the URL {url:?}"),
            (None, Some(ns), Some(name))
                if ns == ctx.install_namespace
                    && own.services.contains(&(ns.to_owned(), name.to_owned())) =>
            {
                format!(
                    "its conversion webhook calls the bundle's Service {name:?}, but POM provisions serving certificates only for webhooks the ClusterServiceVersion declares in spec.webhookdefinitions"
                )
            }
            (None, ns, name) => format!(
                "its conversion webhook calls Service {:?} in namespace {:?}, not a Service of the bundle in its install namespace",
                name.unwrap_or_default(),
                ns.unwrap_or_default()
            ),
        };
        found.push((
            ContentRule::ForeignWebhookEndpoint,
            format!("{detail} (the API server would send it every object of the CRD)"),
        ));
    }
    found
}

fn service_findings(object: &Value) -> Vec<(ContentRule, String)> {
    let mut found = Vec::new();
    if object
        .get("spec")
        .and_then(|s| s.get("externalIPs"))
        .and_then(Value::as_array)
        .is_some_and(|ips| !ips.is_empty())
    {
        found.push((
            ContentRule::ServiceExternalIps,
            "it sets spec.externalIPs, which lets it take over traffic to any address (CVE-2020-8554)".to_owned(),
        ));
    }
    if str_at(object, &["spec", "type"]) == Some("LoadBalancer") {
        found.push((
            ContentRule::LoadBalancerService,
            "it is of type LoadBalancer, reachable from outside the cluster".to_owned(),
        ));
    }
    found
}
