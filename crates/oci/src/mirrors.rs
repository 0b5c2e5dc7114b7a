//! Where a pull goes on a cluster with image mirrors (PRODUCT §10): the list of locations to
//! try for a reference, in order, as CRI-O tries them on the cluster's nodes.
//!
//! On OpenShift, `ImageDigestMirrorSet` (IDMS), `ImageTagMirrorSet` (ITMS) and the older
//! `ImageContentSourcePolicy` (ICSP) objects are rendered by the machine-config operator (MCO)
//! into the nodes' `/etc/containers/registries.conf`, which containers/image reads on every
//! pull. POM's own pulls must go where the nodes' pulls go, or a disconnected cluster could
//! run operators POM cannot read (or POM could contact a registry the admin forbade). So
//! [`MirrorRules`] is built from the objects as the MCO renders them, and
//! [`MirrorRules::pull_sources`] answers as containers/image answers from the rendered file.
//! Pure and synchronous: no I/O, no clock; the puller tries the list in order.
//!
//! Rendering (openshift/runtime-utils `pkg/registries/registries.go`, `EditRegistriesConfig`,
//! as vendored by openshift/machine-config-operator; validation from MCO
//! `pkg/controller/container-runtime-config/helpers.go`, `validateRegistriesConfScopes`):
//! - Rules are validated first and any error refuses the whole configuration (the MCO then
//!   renders nothing and the nodes keep their previous file): `source` must be
//!   `host[:port][/path]` or `*.host`, each mirror `host[:port][/path]`; every rule naming the
//!   same `source` (IDMS, ITMS and ICSP together, mirrors or not) must state the same
//!   `mirrorSourcePolicy` (unset and ICSP count as `AllowContactingSource`); a rule that says
//!   `NeverContactSource` may not list its own source as a mirror.
//! - IDMS and ICSP rules are digest rules (ICSP's policy is always "allow"), ITMS rules tag
//!   rules. A rule with no mirror other than its source is ignored (its policy too).
//! - Rules of one kind naming the same `source` are merged: each rule's mirror list, followed
//!   by the source unless it lists it, is a chain of "tried before" edges, and the merged list
//!   is the topological order of all chains, ties broken by byte order, a cycle broken by taking
//!   the smallest unused location (runtime-utils `topoGraph.Sorted`); the source, when last,
//!   is dropped (it is tried last anyway). So `a, b, c` and `c, d, e` give `a, b, c, d, e`.
//! - One registries.conf entry per `source`: its digest mirrors (`pull-from-mirror =
//!   digest-only`), then its tag mirrors (`tag-only`); `blocked` when its rules say
//!   `NeverContactSource`.
//!
//! Resolution (containers/image `pkg/sysregistriesv2/system_registries_v2.go`:
//! `FindRegistry`, `refMatchingPrefix`, `refMatchingSubdomainPrefix`,
//! `Registry.PullSourcesFromReference`, `Endpoint.rewriteReference`; and
//! `docker/docker_image_src.go` `newImageSource` with `docker/docker_client.go`
//! `newDockerClient` for `blocked`):
//! - The reference's `registry/repository` (Docker Hub names normalised: `docker.io/library/x`)
//!   is matched against every `source`: equal, or `source` followed by `/` in the name (a path
//!   component boundary: `quay.io/foo` never matches `quay.io/foobar`); `*.example.com`
//!   matches a host ending in `.example.com` (not `example.com` itself). The longest `source`
//!   wins (a wildcard counts its `*`; on a tie, the first in byte order). Only that entry
//!   applies: the objects naming the most specific source are used, the others not.
//! - A pull by digest uses the entry's digest mirrors, a pull by tag its tag mirrors, in order;
//!   each mirror replaces the matched part of the name, the tag and digest are kept. Then the
//!   source itself, unless the entry is blocked (`NeverContactSource`).
//! - A mirror whose own location falls (longest match) under a blocked entry is refused too,
//!   as containers/image refuses any endpoint under a blocked entry.
//! - A mirror that turns the reference into something that is not a canonical reference fails
//!   the whole pull (containers/image's `rewriteReference` error).
//!
//! One deliberate difference: containers/image also matches a host-only `source` such as
//! `example.com` against `example.com:5000/...` (its code says this is unintended and not to
//! be relied on); here a `source` without a port matches only that host without a port.
//! Not covered (other inputs than these objects): `image.config.openshift.io`'s
//! `blockedRegistries`/`insecureRegistries` and hand-written registries.conf entries.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use oci_client::Reference;
use pom_api::openshift::image_mirrors::{
    ImageContentSourcePolicy, ImageDigestMirrorSet, ImageTagMirrorSet, MirrorSourcePolicy,
};

use crate::error::OciError;
use crate::reference::parse_reference;

/// Most rules (one `source` entry of one object) POM reads from the cluster. The objects are
/// cluster input and every reference is matched against every rule; real configurations
/// (oc-mirror writes one rule per mirrored repository) stay far below this.
pub const MAX_MIRROR_RULES: usize = 10_000;

/// Most mirrors one rule may list. Each mirror is a network attempt (with its retries) within
/// one pull's deadline ([`crate::PULL_DEADLINE`]): a longer list could not be tried anyway.
pub const MAX_MIRRORS_PER_RULE: usize = 32;

/// Most mirrors one `source` may have for one kind of pull once the rules naming it are
/// merged, for the same reason as [`MAX_MIRRORS_PER_RULE`].
pub const MAX_MIRRORS_PER_SOURCE: usize = 32;

/// The kind of object a rule comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MirrorSetKind {
    /// `config.openshift.io/v1` `ImageDigestMirrorSet`: mirrors for pulls by digest.
    ImageDigestMirrorSet,
    /// `config.openshift.io/v1` `ImageTagMirrorSet`: mirrors for pulls by tag.
    ImageTagMirrorSet,
    /// `operator.openshift.io/v1alpha1` `ImageContentSourcePolicy`: mirrors for pulls by
    /// digest, the source always allowed.
    ImageContentSourcePolicy,
}

impl MirrorSetKind {
    /// The kind of pull this object's mirrors serve.
    #[must_use]
    pub fn serves(self) -> PullKind {
        match self {
            Self::ImageDigestMirrorSet | Self::ImageContentSourcePolicy => PullKind::Digest,
            Self::ImageTagMirrorSet => PullKind::Tag,
        }
    }

    /// The object's kind, as Kubernetes spells it.
    #[must_use]
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ImageDigestMirrorSet => "ImageDigestMirrorSet",
            Self::ImageTagMirrorSet => "ImageTagMirrorSet",
            Self::ImageContentSourcePolicy => "ImageContentSourcePolicy",
        }
    }
}

/// Whether a pull names a digest (`repo@sha256:…`, a tag beside it is ignored) or a tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PullKind {
    /// A pull by digest: digest mirrors (IDMS, ICSP) apply.
    Digest,
    /// A pull by tag: tag mirrors (ITMS) apply.
    Tag,
}

impl fmt::Display for PullKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Digest => "by digest",
            Self::Tag => "by tag",
        })
    }
}

/// One mirror object, by kind and name (the objects are cluster-scoped).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    pub kind: MirrorSetKind,
    pub name: String,
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.kind.as_str(), self.name)
    }
}

/// One rule as written in one object: the input of [`MirrorRules::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorRule {
    /// The object that holds it; its kind decides the kind of pull its mirrors serve.
    pub object: ObjectRef,
    /// `host[:port][/namespace…][/repo]` or `*.host`.
    pub source: String,
    /// `host[:port][/namespace…][/repo]`, in the order the object lists them.
    pub mirrors: Vec<String>,
    /// The rule's `mirrorSourcePolicy` (unset, and always for ICSP: allow).
    pub policy: MirrorSourcePolicy,
}

/// Why the cluster's mirror objects cannot be used. Like the machine-config operator, POM
/// then uses none of them (the caller keeps its previous rules and reports this).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MirrorRulesError {
    /// More rules than [`MAX_MIRROR_RULES`].
    #[error(
        "the cluster's ImageDigestMirrorSets, ImageTagMirrorSets and \
         ImageContentSourcePolicies hold {count} rules, above POM's limit of {limit} \
         (MAX_MIRROR_RULES); merge rules that share a source or mirror whole namespaces"
    )]
    TooManyRules { count: usize, limit: usize },
    /// A rule lists more mirrors than [`MAX_MIRRORS_PER_RULE`].
    #[error(
        "{object} lists {count} mirrors for source {scope}, above POM's limit of {limit} \
         (MAX_MIRRORS_PER_RULE): a pull could not try them all within its deadline; list fewer"
    )]
    TooManyMirrors {
        object: ObjectRef,
        scope: String,
        count: usize,
        limit: usize,
    },
    /// The rules naming one source give it more mirrors than [`MAX_MIRRORS_PER_SOURCE`].
    #[error(
        "the rules for source {scope} ({objects}) give it {count} mirrors for pulls {pulls}, \
         above POM's limit of {limit} (MAX_MIRRORS_PER_SOURCE): a pull could not try them all \
         within its deadline; list fewer"
    )]
    TooManyMergedMirrors {
        scope: String,
        pulls: PullKind,
        objects: String,
        count: usize,
        limit: usize,
    },
    /// A `source` that is neither `host[:port][/path]` nor `*.host`.
    #[error(
        "{object}: source {scope:?} is neither host[:port][/namespace…][/repo] nor *.host \
         (the machine-config operator refuses it too); fix or remove the rule"
    )]
    InvalidSource { object: ObjectRef, scope: String },
    /// A mirror that is not `host[:port][/path]`.
    #[error(
        "{object}: mirror {mirror:?} of source {scope} is not host[:port][/namespace…][/repo] \
         (the machine-config operator refuses it too); fix or remove it"
    )]
    InvalidMirror {
        object: ObjectRef,
        scope: String,
        mirror: String,
    },
    /// Two rules naming the same source disagree on `mirrorSourcePolicy`.
    #[error(
        "{first} and {second} set different mirrorSourcePolicy for source {scope} \
         ({first_policy:?} and {second_policy:?}; unset and ImageContentSourcePolicy mean \
         AllowContactingSource); the machine-config operator refuses this too: make them agree"
    )]
    ConflictingPolicy {
        scope: String,
        first: ObjectRef,
        first_policy: MirrorSourcePolicy,
        second: ObjectRef,
        second_policy: MirrorSourcePolicy,
    },
    /// `NeverContactSource` with the source among the mirrors.
    #[error(
        "{object}: mirrorSourcePolicy NeverContactSource for source {scope}, which is also one \
         of its mirrors (the machine-config operator refuses this too); remove one of them"
    )]
    SourceAmongMirrors { object: ObjectRef, scope: String },
}

/// The cluster's mirror configuration, merged and validated as the machine-config operator
/// renders it into registries.conf; [`Self::pull_sources`] resolves references through it.
/// The default is no mirrors at all: every reference is pulled from where it names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorRules {
    /// One per `source` with at least one real mirror, in byte order of `source`.
    entries: Vec<Entry>,
}

/// One registries.conf `[[registry]]` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// The rules' `source` (the entry's prefix).
    scope: String,
    /// Digest mirrors in merged order, then tag mirrors in merged order.
    mirrors: Vec<Mirror>,
    /// The objects whose rules say `NeverContactSource` (sorted): the entry is blocked when
    /// there is any.
    never_contact_source: Vec<ObjectRef>,
}

impl Entry {
    fn blocked(&self) -> bool {
        !self.never_contact_source.is_empty()
    }
}

/// One `[[registry.mirror]]`.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Mirror {
    location: String,
    serves: PullKind,
    /// The objects that list this location for this source (sorted).
    listed_by: Vec<ObjectRef>,
}

/// One location to try for a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullSource {
    /// What to contact: `registry/repository` with the reference's tag and/or digest.
    pub reference: String,
    /// A mirror, or the reference's own location.
    pub role: SourceRole,
}

/// Whether a [`PullSource`] is a mirror (and whose) or the source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceRole {
    /// A mirror of `scope`, the `source` that matched the reference, listed by `listed_by`
    /// (empty only when the merge put the source itself among its mirrors).
    Mirror {
        scope: String,
        listed_by: Vec<ObjectRef>,
    },
    /// The reference's own location.
    Source,
}

impl PullSource {
    /// Whether this is a mirror rather than the reference's own location.
    #[must_use]
    pub fn is_mirror(&self) -> bool {
        matches!(self.role, SourceRole::Mirror { .. })
    }
}

impl fmt::Display for PullSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.role {
            SourceRole::Source => write!(f, "{} (the source)", self.reference),
            SourceRole::Mirror { scope, listed_by } if listed_by.is_empty() => {
                write!(f, "{} (mirror of {scope})", self.reference)
            }
            SourceRole::Mirror { scope, listed_by } => write!(
                f,
                "{} (mirror of {scope} from {})",
                self.reference,
                join(listed_by)
            ),
        }
    }
}

/// The rule entry that matched a reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MatchedRule {
    /// The `source` that matched (the most specific one).
    pub scope: String,
    /// The objects that forbid contacting it (`NeverContactSource`); empty when allowed.
    pub never_contact_source: Vec<ObjectRef>,
    /// Mirrors of that source for the other kind of pull (not tried for this one).
    pub mirrors_for_other_pulls: usize,
    /// Mirrors of this kind refused because their own location is under a blocked source.
    pub mirrors_blocked: Vec<String>,
}

/// How one reference is pulled: the locations in order, and the rule that decided them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PullPlan {
    /// The reference, canonical (`registry/repository[:tag][@digest]`).
    pub reference: String,
    /// By digest or by tag.
    pub pulls: PullKind,
    /// Where to try, in order; empty when the source may not be contacted and no mirror
    /// applies (see [`Self::no_source_reason`]).
    pub sources: Vec<PullSource>,
    /// The rule entry that matched, if any (none: the list is just the source).
    pub matched: Option<MatchedRule>,
}

impl PullPlan {
    /// Why [`Self::sources`] is empty, worded for a condition message; `None` when it is not.
    #[must_use]
    pub fn no_source_reason(&self) -> Option<String> {
        if !self.sources.is_empty() {
            return None;
        }
        let matched = self.matched.as_ref()?;
        let mut reason = format!(
            "{} sets mirrorSourcePolicy NeverContactSource for source {}, so {} is never \
             contacted, and no mirror of it serves pulls {}",
            join(&matched.never_contact_source),
            matched.scope,
            self.reference,
            self.pulls
        );
        if matched.mirrors_for_other_pulls > 0 {
            reason.push_str(&format!(
                " (its {} mirror(s) serve pulls {} only: ImageDigestMirrorSet and \
                 ImageContentSourcePolicy mirrors serve pulls by digest, ImageTagMirrorSet \
                 mirrors pulls by tag)",
                matched.mirrors_for_other_pulls,
                match self.pulls {
                    PullKind::Digest => PullKind::Tag,
                    PullKind::Tag => PullKind::Digest,
                }
            ));
        }
        if !matched.mirrors_blocked.is_empty() {
            reason.push_str(&format!(
                " (mirror(s) {} are themselves under a source that may not be contacted)",
                matched.mirrors_blocked.join(", ")
            ));
        }
        Some(reason)
    }
}

impl MirrorRules {
    /// Validates and merges `rules` as the machine-config operator does (module
    /// documentation). The order of `rules` only decides which error is reported first.
    ///
    /// # Errors
    /// The first rule the machine-config operator would refuse, or a count above POM's limits.
    pub fn new(rules: impl IntoIterator<Item = MirrorRule>) -> Result<Self, MirrorRulesError> {
        let rules: Vec<MirrorRule> = rules.into_iter().collect();
        if rules.len() > MAX_MIRROR_RULES {
            return Err(MirrorRulesError::TooManyRules {
                count: rules.len(),
                limit: MAX_MIRROR_RULES,
            });
        }
        validate(&rules)?;

        // Per (source, kind of pull): the mirror chains to merge, who listed each location,
        // who forbade contacting the source.
        let mut sets: BTreeMap<(&str, PullKind), MergeInput<'_>> = BTreeMap::new();
        for rule in &rules {
            if !rule.mirrors.iter().any(|m| *m != rule.source) {
                continue; // no real mirror: not a mirror set, its policy ignored (as MCO does)
            }
            let set = sets
                .entry((rule.source.as_str(), rule.object.kind.serves()))
                .or_default();
            set.chains.push(&rule.mirrors);
            for mirror in &rule.mirrors {
                set.listed_by
                    .entry(mirror.as_str())
                    .or_default()
                    .insert(&rule.object);
            }
            if rule.policy == MirrorSourcePolicy::NeverContactSource {
                set.never_contact_source.insert(&rule.object);
            }
        }

        let mut entries: BTreeMap<&str, Entry> = BTreeMap::new();
        for ((scope, serves), set) in &sets {
            let order = merged_order(scope, &set.chains);
            if order.len() > MAX_MIRRORS_PER_SOURCE {
                let objects: BTreeSet<&ObjectRef> =
                    set.listed_by.values().flatten().copied().collect();
                return Err(MirrorRulesError::TooManyMergedMirrors {
                    scope: (*scope).to_owned(),
                    pulls: *serves,
                    objects: join(objects),
                    count: order.len(),
                    limit: MAX_MIRRORS_PER_SOURCE,
                });
            }
            let entry = entries.entry(scope).or_insert_with(|| Entry {
                scope: (*scope).to_owned(),
                mirrors: Vec::new(),
                never_contact_source: Vec::new(),
            });
            // BTreeMap order puts a source's digest set before its tag set, as MCO adds them.
            for location in order {
                let listed_by = set
                    .listed_by
                    .get(location)
                    .map(|objects| objects.iter().map(|o| (*o).clone()).collect())
                    .unwrap_or_default();
                entry.mirrors.push(Mirror {
                    location: location.to_owned(),
                    serves: *serves,
                    listed_by,
                });
            }
            for object in &set.never_contact_source {
                if !entry.never_contact_source.contains(object) {
                    entry.never_contact_source.push((*object).clone());
                }
            }
            entry.never_contact_source.sort();
        }
        Ok(Self {
            entries: entries.into_values().collect(),
        })
    }

    /// The rules of the cluster's objects, as the machine-config operator reads them
    /// (`ImageContentSourcePolicy` as digest rules whose source is always allowed).
    ///
    /// # Errors
    /// As [`Self::new`].
    pub fn from_cluster(
        digest_sets: &[ImageDigestMirrorSet],
        tag_sets: &[ImageTagMirrorSet],
        policies: &[ImageContentSourcePolicy],
    ) -> Result<Self, MirrorRulesError> {
        let object = |kind, name: &Option<String>| ObjectRef {
            kind,
            name: name.clone().unwrap_or_default(),
        };
        let mut rules = Vec::new();
        for set in digest_sets {
            let object = object(MirrorSetKind::ImageDigestMirrorSet, &set.metadata.name);
            rules.extend(set.spec.image_digest_mirrors.iter().map(|r| MirrorRule {
                object: object.clone(),
                source: r.source.clone(),
                mirrors: r.mirrors.clone(),
                policy: r.mirror_source_policy.unwrap_or_default(),
            }));
        }
        for policy in policies {
            let object = object(
                MirrorSetKind::ImageContentSourcePolicy,
                &policy.metadata.name,
            );
            rules.extend(
                policy
                    .spec
                    .repository_digest_mirrors
                    .iter()
                    .map(|r| MirrorRule {
                        object: object.clone(),
                        source: r.source.clone(),
                        mirrors: r.mirrors.clone(),
                        policy: MirrorSourcePolicy::AllowContactingSource,
                    }),
            );
        }
        for set in tag_sets {
            let object = object(MirrorSetKind::ImageTagMirrorSet, &set.metadata.name);
            rules.extend(set.spec.image_tag_mirrors.iter().map(|r| MirrorRule {
                object: object.clone(),
                source: r.source.clone(),
                mirrors: r.mirrors.clone(),
                policy: r.mirror_source_policy.unwrap_or_default(),
            }));
        }
        Self::new(rules)
    }

    /// No mirror rule at all.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The locations to try for `reference`, in order (mirrors first, then the source unless
    /// forbidden). See [`Self::plan`].
    ///
    /// # Errors
    /// As [`Self::plan`].
    pub fn pull_sources(&self, reference: &str) -> Result<Vec<PullSource>, OciError> {
        self.plan(reference).map(|plan| plan.sources)
    }

    /// How `reference` is pulled: the locations to try in order, and the rule that matched.
    ///
    /// # Errors
    /// [`OciError::InvalidReference`] for a reference that does not parse, or when a mirror
    /// turns it into one that does not (containers/image fails such a pull too).
    pub fn plan(&self, reference: &str) -> Result<PullPlan, OciError> {
        let parsed =
            parse_reference(reference.trim()).map_err(|err| OciError::InvalidReference {
                reference: reference.to_owned(),
                reason: err.to_string(),
            })?;
        self.plan_parsed(&parsed)
    }

    pub(crate) fn plan_parsed(&self, parsed: &Reference) -> Result<PullPlan, OciError> {
        let name = format!("{}/{}", parsed.registry(), parsed.repository());
        let suffix = match (parsed.tag(), parsed.digest()) {
            (Some(tag), Some(digest)) => format!(":{tag}@{digest}"),
            (None, Some(digest)) => format!("@{digest}"),
            (Some(tag), None) => format!(":{tag}"),
            (None, None) => String::new(),
        };
        let pulls = if parsed.digest().is_some() {
            PullKind::Digest
        } else {
            PullKind::Tag
        };
        let canonical = format!("{name}{suffix}");
        let source = PullSource {
            reference: canonical.clone(),
            role: SourceRole::Source,
        };
        let Some((entry, matched_len)) = self.find(&name) else {
            return Ok(PullPlan {
                reference: canonical,
                pulls,
                sources: vec![source],
                matched: None,
            });
        };
        let rest = name.get(matched_len..).unwrap_or_default();
        let mut sources = Vec::new();
        let mut mirrors_blocked = Vec::new();
        let mut mirrors_for_other_pulls = 0;
        for mirror in &entry.mirrors {
            if mirror.serves != pulls {
                mirrors_for_other_pulls += 1;
                continue;
            }
            let mirrored_name = format!("{}{rest}", mirror.location);
            let mirrored = format!("{mirrored_name}{suffix}");
            let canonical_name = parse_reference(&mirrored)
                .ok()
                .map(|p| format!("{}/{}", p.registry(), p.repository()));
            if canonical_name.as_deref() != Some(mirrored_name.as_str()) {
                return Err(OciError::InvalidReference {
                    reference: mirrored,
                    reason: format!(
                        "mirror {} of source {} (from {}) turns {canonical} into this, which is \
                         not a canonical image reference; fix the mirror",
                        mirror.location,
                        entry.scope,
                        join(&mirror.listed_by)
                    ),
                });
            }
            if self.find(&mirrored_name).is_some_and(|(e, _)| e.blocked()) {
                mirrors_blocked.push(mirrored);
                continue;
            }
            sources.push(PullSource {
                reference: mirrored,
                role: SourceRole::Mirror {
                    scope: entry.scope.clone(),
                    listed_by: mirror.listed_by.clone(),
                },
            });
        }
        if !entry.blocked() {
            sources.push(source);
        }
        Ok(PullPlan {
            reference: canonical,
            pulls,
            sources,
            matched: Some(MatchedRule {
                scope: entry.scope.clone(),
                never_contact_source: entry.never_contact_source.clone(),
                mirrors_for_other_pulls,
                mirrors_blocked,
            }),
        })
    }

    /// The entry with the longest `source` matching `name` (`registry/repository`), with the
    /// length of `name` it matched; on equal lengths the first in byte order (a wildcard
    /// before a host of the same length), as `FindRegistry` over its sorted entries.
    fn find(&self, name: &str) -> Option<(&Entry, usize)> {
        let mut best: Option<(&Entry, usize)> = None;
        for entry in &self.entries {
            if let Some(len) = matched_len(&entry.scope, name)
                && best.is_none_or(|(b, _)| entry.scope.len() > b.scope.len())
            {
                best = Some((entry, len));
            }
        }
        best
    }
}

/// The rules to merge for one (source, kind of pull).
#[derive(Default)]
struct MergeInput<'a> {
    chains: Vec<&'a [String]>,
    listed_by: BTreeMap<&'a str, BTreeSet<&'a ObjectRef>>,
    never_contact_source: BTreeSet<&'a ObjectRef>,
}

/// MCO's checks before rendering (`validateRegistriesConfScopes`), plus POM's count limit.
fn validate(rules: &[MirrorRule]) -> Result<(), MirrorRulesError> {
    let mut policies: BTreeMap<&str, (&ObjectRef, MirrorSourcePolicy)> = BTreeMap::new();
    for rule in rules {
        let scope = || rule.source.clone();
        if rule.mirrors.len() > MAX_MIRRORS_PER_RULE {
            return Err(MirrorRulesError::TooManyMirrors {
                object: rule.object.clone(),
                scope: scope(),
                count: rule.mirrors.len(),
                limit: MAX_MIRRORS_PER_RULE,
            });
        }
        if !is_valid_source(&rule.source) {
            return Err(MirrorRulesError::InvalidSource {
                object: rule.object.clone(),
                scope: scope(),
            });
        }
        match policies.get(rule.source.as_str()) {
            Some((first, policy)) if *policy != rule.policy => {
                return Err(MirrorRulesError::ConflictingPolicy {
                    scope: scope(),
                    first: (*first).clone(),
                    first_policy: *policy,
                    second: rule.object.clone(),
                    second_policy: rule.policy,
                });
            }
            Some(_) => {}
            None => {
                policies.insert(&rule.source, (&rule.object, rule.policy));
            }
        }
        for mirror in &rule.mirrors {
            if !is_valid_location(mirror) {
                return Err(MirrorRulesError::InvalidMirror {
                    object: rule.object.clone(),
                    scope: scope(),
                    mirror: mirror.clone(),
                });
            }
            if rule.policy == MirrorSourcePolicy::NeverContactSource && *mirror == rule.source {
                return Err(MirrorRulesError::SourceAmongMirrors {
                    object: rule.object.clone(),
                    scope: scope(),
                });
            }
        }
    }
    Ok(())
}

/// The merged mirror order of one source (runtime-utils `topoSortRepos` and
/// `topoGraph.Sorted`): each chain is its mirrors, then the source unless listed; nodes come
/// out in topological order, those freed together in byte order, a cycle broken by the first
/// unused node in byte order; a trailing source is dropped.
fn merged_order<'a>(source: &'a str, chains: &[&'a [String]]) -> Vec<&'a str> {
    struct Node<'a> {
        ins: BTreeSet<&'a str>,
        outs: BTreeSet<&'a str>,
        used: bool,
    }
    let mut nodes: BTreeMap<&'a str, Node<'a>> = BTreeMap::new();
    let mut add_edge = |from: &'a str, to: &'a str| {
        for name in [from, to] {
            nodes.entry(name).or_insert_with(|| Node {
                ins: BTreeSet::new(),
                outs: BTreeSet::new(),
                used: false,
            });
        }
        if let Some(node) = nodes.get_mut(from) {
            node.outs.insert(to);
        }
        if let Some(node) = nodes.get_mut(to) {
            node.ins.insert(from);
        }
    };
    for chain in chains {
        for pair in chain.windows(2) {
            if let [from, to] = pair {
                add_edge(from, to);
            }
        }
        if !chain.iter().any(|m| m == source)
            && let Some(last) = chain.last()
        {
            add_edge(last, source);
        }
    }
    let all: Vec<&'a str> = nodes.keys().copied().collect();
    let mut ready: VecDeque<&'a str> = all
        .iter()
        .copied()
        .filter(|n| nodes.get(n).is_some_and(|node| node.ins.is_empty()))
        .collect();
    let mut order = Vec::with_capacity(all.len());
    let mut next_unused = 0;
    while !ready.is_empty() || next_unused < all.len() {
        let name = match ready.pop_front() {
            Some(name) => name,
            None => {
                // A cycle: break it with the first unused node in byte order.
                let name = all.get(next_unused).copied().unwrap_or_default();
                next_unused += 1;
                if nodes.get(name).is_none_or(|node| node.used) {
                    continue;
                }
                name
            }
        };
        let outs = match nodes.get_mut(name) {
            Some(node) => {
                node.used = true;
                node.outs.clone()
            }
            None => continue,
        };
        order.push(name);
        let mut freed = Vec::new();
        for out in outs {
            if let Some(node) = nodes.get_mut(out) {
                node.ins.remove(name);
                if node.ins.is_empty() && !node.used {
                    freed.push(out);
                }
            }
        }
        freed.sort_unstable();
        ready.extend(freed);
    }
    if order.last() == Some(&source) {
        order.pop();
    }
    order
}

/// How many bytes of `name` (`registry/repository`) the `source` `scope` matches, if it does
/// (containers/image `refMatchingPrefix`, minus its `host` ↔ `host:port` quirk).
fn matched_len(scope: &str, name: &str) -> Option<usize> {
    if let Some(domain) = scope.strip_prefix('*') {
        // `*.example.com`: the first `.example.com` in the name, within the host, followed by
        // the end of the host (`/`) or a port (`:`), as `refMatchingSubdomainPrefix`.
        let index = name.find(domain)?;
        if name.get(..index)?.contains('/') {
            return None;
        }
        let end = index + domain.len();
        return match name.as_bytes().get(end) {
            None | Some(b':' | b'/' | b'@') => Some(end),
            Some(_) => None,
        };
    }
    if name == scope {
        return Some(scope.len());
    }
    (name.starts_with(scope) && name.as_bytes().get(scope.len()) == Some(&b'/'))
        .then_some(scope.len())
}

/// openshift/api's `source` pattern: `*.` then domain components, or a location.
fn is_valid_source(source: &str) -> bool {
    match source.strip_prefix("*.") {
        Some(domain) => domain.split('.').all(is_domain_component),
        None => is_valid_location(source),
    }
}

/// openshift/api's `ImageMirror` pattern: `host[:port]` then `/`-separated path components.
fn is_valid_location(location: &str) -> bool {
    let mut parts = location.split('/');
    let host = parts.next().unwrap_or_default();
    let (host, port) = match host.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (host, None),
    };
    host.split('.').all(is_domain_component)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        && parts.all(is_path_component)
}

/// `[a-zA-Z0-9]` or `[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`.
fn is_domain_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]+` runs joined by `.`, `_`, `__` or any number of `-`.
fn is_path_component(component: &str) -> bool {
    let alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    if !bytes.first().copied().is_some_and(alnum) || !bytes.last().copied().is_some_and(alnum) {
        return false;
    }
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if alnum(b) {
            i += 1;
            continue;
        }
        let end = match b {
            b'.' => i + 1,
            b'_' if bytes.get(i + 1) == Some(&b'_') => i + 2,
            b'_' => i + 1,
            b'-' => i + bytes.iter().skip(i).take_while(|c| **c == b'-').count(),
            _ => return false,
        };
        if !bytes.get(end).copied().is_some_and(alnum) {
            return false;
        }
        i = end;
    }
    true
}

fn join<T: fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|item| item.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn chains(lists: &[Vec<String>]) -> Vec<&[String]> {
        lists.iter().map(Vec::as_slice).collect()
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    /// The merge examples of openshift/api's documentation and runtime-utils' tests.
    #[test]
    fn merged_orders_follow_the_topological_sort_of_runtime_utils() {
        let cases: &[(&[&[&str]], &[&str])] = &[
            // Documented: `a, b, c` and `c, d, e` give `a, b, c, d, e`.
            (
                &[&["a", "b", "c"], &["c", "d", "e"]],
                &["a", "b", "c", "d", "e"],
            ),
            // (B, C) and (A, B) → (A, B, C).
            (&[&["b", "c"], &["a", "b"]], &["a", "b", "c"]),
            // Independent chains: freed nodes in byte order, level by level.
            (&[&["x", "y"], &["b", "c"]], &["b", "x", "c", "y"]),
            // A cycle is broken by the smallest unused node.
            (&[&["b", "a"], &["a", "b"]], &["a", "b"]),
            // The source listed as a mirror keeps its place; last, it is dropped.
            (&[&["m", "src"], &["n"]], &["m", "n"]),
            (&[&["src", "m"]], &["src", "m"]),
            // Duplicates inside one (ICSP) list.
            (&[&["a", "a", "b"]], &["a", "b"]),
        ];
        for (lists, want) in cases {
            let lists: Vec<Vec<String>> = lists.iter().map(|l| strings(l)).collect();
            assert_eq!(merged_order("src", &chains(&lists)), *want, "{lists:?}");
        }
    }

    #[test]
    fn sources_and_mirrors_are_validated_as_openshift_api_patterns() {
        for ok in [
            "quay.io",
            "quay.io:443",
            "localhost:5000/a/b",
            "registry.redhat.io/ubi9/ubi-minimal",
            "r.io/a__b/c---d/e.f_g",
            "Reg-1.Example.com/x",
        ] {
            assert!(is_valid_location(ok), "{ok}");
            assert!(is_valid_source(ok), "{ok}");
        }
        for bad in [
            "",
            "quay.io/",
            "quay.io//a",
            "quay.io/Upper",
            "quay.io:/a",
            "quay.io:x",
            "-quay.io",
            "quay.io/a@sha256:00",
            "quay.io/a:tag",
            "https://quay.io",
            "*.quay.io",
        ] {
            assert!(!is_valid_location(bad), "{bad}");
        }
        assert!(is_valid_source("*.example.com"));
        assert!(is_valid_source("*.com"));
        for bad in [
            "*",
            "*.",
            "*example.com",
            "*.example.com/a",
            "*.example.com:5000",
            "a.*.com",
        ] {
            assert!(!is_valid_source(bad), "{bad}");
        }
    }

    #[test]
    fn matching_is_at_path_boundaries_and_by_host_suffix_for_wildcards() {
        assert_eq!(matched_len("quay.io/foo", "quay.io/foo"), Some(11));
        assert_eq!(matched_len("quay.io/foo", "quay.io/foo/bar"), Some(11));
        assert_eq!(matched_len("quay.io/foo", "quay.io/foobar"), None);
        assert_eq!(matched_len("quay.io", "quay.io/foo"), Some(7));
        assert_eq!(matched_len("quay.io", "quay.io:443/foo"), None);
        assert_eq!(matched_len("*.example.com", "a.example.com/x"), Some(13));
        assert_eq!(matched_len("*.example.com", "a.b.example.com/x"), Some(15));
        assert_eq!(
            matched_len("*.example.com", "a.example.com:5000/x"),
            Some(13)
        );
        assert_eq!(matched_len("*.example.com", "example.com/x"), None);
        assert_eq!(matched_len("*.example.com", "a.example.community/x"), None);
        assert_eq!(
            matched_len("*.example.com", "quay.io/a.example.com/x"),
            None
        );
    }
}
