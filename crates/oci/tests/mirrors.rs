#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Image mirrors (issue 23 item 1): resolution through ImageDigestMirrorSet,
//! ImageTagMirrorSet and ImageContentSourcePolicy against the registries.conf semantics the
//! machine-config operator renders and containers/image applies (`pom_oci::mirrors` cites the
//! upstream code for each rule), as tables and as properties; then the puller trying the
//! locations in order against in-process registries: mirrors first, the source last or never,
//! fallback on a missing image or an unreachable mirror, content checked by digest and cached
//! under the source's name.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::io::Write;
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::write::GzEncoder;
use pom_api::openshift::image_mirrors::{
    ImageContentSourcePolicy, ImageContentSourcePolicySpec, ImageDigestMirrorSet,
    ImageDigestMirrorSetSpec, ImageDigestMirrors, ImageTagMirrorSet, ImageTagMirrorSetSpec,
    ImageTagMirrors, MirrorSourcePolicy, RepositoryDigestMirrors,
};
use pom_oci::mirrors::{
    MAX_MIRROR_RULES, MAX_MIRRORS_PER_RULE, MAX_MIRRORS_PER_SOURCE, MirrorRule, MirrorRules,
    MirrorRulesError, MirrorSetKind, ObjectRef, PullKind, PullSource, SourceRole,
};
use pom_oci::{ImagePuller, OciError, RegistryAccess};
use proptest::prelude::*;
use sha2::{Digest, Sha256};

const D: &str = "sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

use MirrorSetKind::{
    ImageContentSourcePolicy as Icsp, ImageDigestMirrorSet as Idms, ImageTagMirrorSet as Itms,
};
use MirrorSourcePolicy::{AllowContactingSource as Allow, NeverContactSource as Never};

fn object(kind: MirrorSetKind, name: &str) -> ObjectRef {
    ObjectRef {
        kind,
        name: name.to_owned(),
    }
}

fn rule(
    kind: MirrorSetKind,
    name: &str,
    source: &str,
    mirrors: &[&str],
    policy: MirrorSourcePolicy,
) -> MirrorRule {
    MirrorRule {
        object: object(kind, name),
        source: source.to_owned(),
        mirrors: mirrors.iter().map(|m| (*m).to_owned()).collect(),
        policy,
    }
}

fn rules(list: Vec<MirrorRule>) -> MirrorRules {
    MirrorRules::new(list).unwrap()
}

/// The references tried, in order, with `*` after the mirrors (the source has none).
fn tried(rules: &MirrorRules, reference: &str) -> Vec<String> {
    rules
        .pull_sources(reference)
        .unwrap()
        .into_iter()
        .map(|s| {
            if s.is_mirror() {
                format!("{}*", s.reference)
            } else {
                s.reference
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Resolution tables

#[test]
fn no_rules_pull_from_the_reference_itself() {
    let none = MirrorRules::default();
    assert!(none.is_empty());
    assert_eq!(
        tried(&none, &format!("quay.io/ns/repo@{D}")),
        [format!("quay.io/ns/repo@{D}")]
    );
    // Docker Hub names are normalised as containers/image names them.
    assert_eq!(
        tried(&none, "busybox"),
        ["docker.io/library/busybox:latest"]
    );
    assert!(matches!(
        none.pull_sources("Not A Reference"),
        Err(OciError::InvalidReference { .. })
    ));
}

#[test]
fn digest_mirrors_serve_pulls_by_digest_and_tag_mirrors_pulls_by_tag() {
    let rules = rules(vec![
        rule(Idms, "digests", "quay.io/ns", &["dm.local/ns"], Allow),
        rule(Itms, "tags", "quay.io/ns", &["tm.local/ns"], Allow),
    ]);
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/repo@{D}")),
        [
            format!("dm.local/ns/repo@{D}*"),
            format!("quay.io/ns/repo@{D}")
        ]
    );
    assert_eq!(
        tried(&rules, "quay.io/ns/repo:v1"),
        ["tm.local/ns/repo:v1*", "quay.io/ns/repo:v1"]
    );
    // A tag beside a digest: a pull by digest, both kept in the rewritten reference.
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/repo:v1@{D}")),
        [
            format!("dm.local/ns/repo:v1@{D}*"),
            format!("quay.io/ns/repo:v1@{D}")
        ]
    );
    // Each mirror says which object listed it.
    let sources = rules.pull_sources(&format!("quay.io/ns/repo@{D}")).unwrap();
    assert_eq!(
        sources[0].role,
        SourceRole::Mirror {
            scope: "quay.io/ns".to_owned(),
            listed_by: vec![object(Idms, "digests")],
        }
    );
    assert_eq!(sources[1].role, SourceRole::Source);
    assert_eq!(
        sources[0].to_string(),
        format!("dm.local/ns/repo@{D} (mirror of quay.io/ns from ImageDigestMirrorSet/digests)")
    );
    assert_eq!(
        sources[1].to_string(),
        format!("quay.io/ns/repo@{D} (the source)")
    );
}

#[test]
fn never_contact_source_leaves_only_the_mirrors() {
    let rules = rules(vec![rule(
        Idms,
        "strict",
        "quay.io/ns",
        &["a.local/ns", "b.local/ns"],
        Never,
    )]);
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/repo@{D}")),
        [
            format!("a.local/ns/repo@{D}*"),
            format!("b.local/ns/repo@{D}*")
        ]
    );
    // A pull by tag has no digest mirror and may not contact the source: nothing to try, and
    // the plan says why, naming the object.
    let plan = rules.plan("quay.io/ns/repo:v1").unwrap();
    assert!(plan.sources.is_empty());
    assert_eq!(plan.pulls, PullKind::Tag);
    let reason = plan.no_source_reason().unwrap();
    assert!(
        reason.contains("ImageDigestMirrorSet/strict")
            && reason.contains("NeverContactSource")
            && reason.contains("quay.io/ns")
            && reason.contains("by digest only"),
        "{reason}"
    );
    // Outside the source: untouched.
    assert_eq!(tried(&rules, "quay.io/other:v1"), ["quay.io/other:v1"]);
}

#[test]
fn mirrors_are_tried_in_the_order_listed() {
    let rules = rules(vec![rule(
        Idms,
        "ordered",
        "quay.io/ns",
        &["c.local/x", "a.local/y", "b.local/z"],
        Allow,
    )]);
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/r@{D}")),
        [
            format!("c.local/x/r@{D}*"),
            format!("a.local/y/r@{D}*"),
            format!("b.local/z/r@{D}*"),
            format!("quay.io/ns/r@{D}"),
        ]
    );
}

#[test]
fn the_longest_source_wins_and_only_it_applies() {
    let rules = rules(vec![
        rule(Idms, "host", "quay.io", &["h.local/quay"], Allow),
        rule(Idms, "ns", "quay.io/ns", &["n.local/ns"], Never),
        rule(Idms, "repo", "quay.io/ns/repo", &["r.local/repo"], Allow),
        rule(Itms, "tags", "quay.io/tagged", &["t.local/tagged"], Allow),
    ]);
    let cases = [
        // The repository's own rule, whose source is allowed though quay.io/ns's is not.
        (
            format!("quay.io/ns/repo@{D}"),
            vec![format!("r.local/repo@{D}*"), format!("quay.io/ns/repo@{D}")],
        ),
        (
            format!("quay.io/ns/repo/sub@{D}"),
            vec![
                format!("r.local/repo/sub@{D}*"),
                format!("quay.io/ns/repo/sub@{D}"),
            ],
        ),
        (
            format!("quay.io/ns/other@{D}"),
            vec![format!("n.local/ns/other@{D}*")],
        ),
        (
            format!("quay.io/x/y@{D}"),
            vec![format!("h.local/quay/x/y@{D}*"), format!("quay.io/x/y@{D}")],
        ),
        // quay.io/tagged has only tag mirrors: the more general quay.io digest rule does not
        // apply to it (each source is treated independently).
        (
            format!("quay.io/tagged/a@{D}"),
            vec![format!("quay.io/tagged/a@{D}")],
        ),
    ];
    for (reference, want) in cases {
        assert_eq!(tried(&rules, &reference), want, "{reference}");
    }
}

#[test]
fn sources_match_whole_path_components_and_whole_hosts() {
    let rules = rules(vec![
        rule(Idms, "foo", "quay.io/foo", &["m.local/foo"], Never),
        rule(Idms, "host", "registry.io", &["m.local/reg"], Never),
    ]);
    // quay.io/foo does not match quay.io/foobar.
    assert_eq!(
        tried(&rules, &format!("quay.io/foobar/x@{D}")),
        [format!("quay.io/foobar/x@{D}")]
    );
    assert_eq!(
        tried(&rules, &format!("quay.io/foo/x@{D}")),
        [format!("m.local/foo/x@{D}*")]
    );
    assert_eq!(
        tried(&rules, &format!("quay.io/foo@{D}")),
        [format!("m.local/foo@{D}*")]
    );
    // A host-only source is the whole registry on that host, and not another port of it.
    assert_eq!(
        tried(&rules, &format!("registry.io/a/b@{D}")),
        [format!("m.local/reg/a/b@{D}*")]
    );
    assert_eq!(
        tried(&rules, &format!("registry.io:5000/a/b@{D}")),
        [format!("registry.io:5000/a/b@{D}")]
    );
    assert_eq!(
        tried(&rules, &format!("registry.iox/a@{D}")),
        [format!("registry.iox/a@{D}")]
    );
}

#[test]
fn wildcard_sources_match_subdomains() {
    let rules = rules(vec![
        rule(Idms, "wild", "*.example.com", &["m.local/ex"], Never),
        rule(Idms, "same-length", "a.example.com", &["s.local/a"], Allow),
    ]);
    // openshift/api's example: *.redhat.io + mirror.local/redhat turns
    // registry.redhat.io/product/repo into mirror.local/redhat/product/repo.
    assert_eq!(
        tried(&rules, &format!("b.example.com/product/repo@{D}")),
        [format!("m.local/ex/product/repo@{D}*")]
    );
    assert_eq!(
        tried(&rules, &format!("x.y.example.com/r@{D}")),
        [format!("m.local/ex/r@{D}*")]
    );
    // Not the domain itself, nor a longer domain, nor a path.
    for other in [
        format!("example.com/r@{D}"),
        format!("b.example.community/r@{D}"),
        format!("quay.io/b.example.com/r@{D}"),
    ] {
        assert_eq!(
            tried(&rules, &other),
            std::slice::from_ref(&other),
            "{other}"
        );
    }
    // `*.example.com` and `a.example.com` are equally long: the first in byte order, the
    // wildcard, wins (as containers/image's sorted entries do).
    assert_eq!(
        tried(&rules, &format!("a.example.com/r@{D}")),
        [format!("m.local/ex/r@{D}*")]
    );
}

#[test]
fn rules_naming_one_source_are_merged_as_the_machine_config_operator_merges_them() {
    let merged = rules(vec![
        rule(
            Idms,
            "first",
            "quay.io/ns",
            &["a.local/ns", "b.local/ns", "c.local/ns"],
            Allow,
        ),
        rule(
            Idms,
            "second",
            "quay.io/ns",
            &["c.local/ns", "d.local/ns", "e.local/ns"],
            Allow,
        ),
        // ICSP rules merge with IDMS rules (the MCO converts them).
        rule(
            Icsp,
            "legacy",
            "quay.io/ns",
            &["b.local/ns", "x.local/ns"],
            Allow,
        ),
    ]);
    let sources = merged.pull_sources(&format!("quay.io/ns/r@{D}")).unwrap();
    let order: Vec<&str> = sources.iter().map(|s| s.reference.as_str()).collect();
    assert_eq!(
        order,
        [
            format!("a.local/ns/r@{D}"),
            format!("b.local/ns/r@{D}"),
            // Freed with c (both after b), x waits in the queue before d (Kahn's order).
            format!("c.local/ns/r@{D}"),
            format!("x.local/ns/r@{D}"),
            format!("d.local/ns/r@{D}"),
            format!("e.local/ns/r@{D}"),
            format!("quay.io/ns/r@{D}"),
        ]
    );
    // c is listed by both IDMSs, b by an IDMS and the ICSP.
    let listed = |i: usize| match &sources[i].role {
        SourceRole::Mirror { listed_by, .. } => listed_by.clone(),
        SourceRole::Source => Vec::new(),
    };
    assert_eq!(listed(1), [object(Idms, "first"), object(Icsp, "legacy")]);
    assert_eq!(listed(2), [object(Idms, "first"), object(Idms, "second")]);
    // The result does not depend on the order of the objects.
    let reversed = rules(vec![
        rule(
            Icsp,
            "legacy",
            "quay.io/ns",
            &["b.local/ns", "x.local/ns"],
            Allow,
        ),
        rule(
            Idms,
            "second",
            "quay.io/ns",
            &["c.local/ns", "d.local/ns", "e.local/ns"],
            Allow,
        ),
        rule(
            Idms,
            "first",
            "quay.io/ns",
            &["a.local/ns", "b.local/ns", "c.local/ns"],
            Allow,
        ),
    ]);
    assert_eq!(reversed, merged);
    // Conflicting orders are not refused (openshift/api: the order is then unspecified).
    let conflicting = rules(vec![
        rule(
            Idms,
            "ab",
            "quay.io/ns",
            &["a.local/ns", "b.local/ns"],
            Allow,
        ),
        rule(
            Idms,
            "ba",
            "quay.io/ns",
            &["b.local/ns", "a.local/ns"],
            Allow,
        ),
    ]);
    let tried_conflicting = tried(&conflicting, &format!("quay.io/ns/r@{D}"));
    assert_eq!(tried_conflicting.len(), 3, "{tried_conflicting:?}");
    assert_eq!(tried_conflicting[2], format!("quay.io/ns/r@{D}"));
    // Same NeverContactSource in both objects: merged, both named.
    let strict = rules(vec![
        rule(Idms, "one", "quay.io/ns", &["a.local/ns"], Never),
        rule(Idms, "two", "quay.io/ns", &["b.local/ns"], Never),
    ]);
    let plan = strict.plan("quay.io/ns/r:v1").unwrap();
    assert_eq!(
        plan.matched.unwrap().never_contact_source,
        [object(Idms, "one"), object(Idms, "two")]
    );
}

#[test]
fn icsp_mirrors_serve_pulls_by_digest_and_always_allow_the_source() {
    let policy = ImageContentSourcePolicy::new(
        "legacy",
        ImageContentSourcePolicySpec {
            repository_digest_mirrors: vec![RepositoryDigestMirrors {
                source: "quay.io/ocp/release".to_owned(),
                mirrors: vec!["mirror.local/ocp/release".to_owned()],
            }],
        },
    );
    let rules = MirrorRules::from_cluster(&[], &[], &[policy]).unwrap();
    assert_eq!(
        tried(&rules, &format!("quay.io/ocp/release@{D}")),
        [
            format!("mirror.local/ocp/release@{D}*"),
            format!("quay.io/ocp/release@{D}")
        ]
    );
    assert_eq!(
        tried(&rules, "quay.io/ocp/release:4.16"),
        ["quay.io/ocp/release:4.16"]
    );
    let sources = rules
        .pull_sources(&format!("quay.io/ocp/release@{D}"))
        .unwrap();
    assert_eq!(
        sources[0].to_string(),
        format!(
            "mirror.local/ocp/release@{D} (mirror of quay.io/ocp/release from \
             ImageContentSourcePolicy/legacy)"
        )
    );
}

#[test]
fn the_cluster_objects_read_as_their_rules() {
    let digest_set = ImageDigestMirrorSet::new(
        "digests",
        ImageDigestMirrorSetSpec {
            image_digest_mirrors: vec![ImageDigestMirrors {
                source: "registry.redhat.io".to_owned(),
                mirrors: vec!["mirror.local/redhat".to_owned()],
                mirror_source_policy: Some(Never),
            }],
        },
    );
    let tag_set = ImageTagMirrorSet::new(
        "tags",
        ImageTagMirrorSetSpec {
            image_tag_mirrors: vec![ImageTagMirrors {
                source: "registry.redhat.io".to_owned(),
                mirrors: vec!["mirror.local/redhat".to_owned()],
                mirror_source_policy: Some(Never),
            }],
        },
    );
    let rules =
        MirrorRules::from_cluster(std::slice::from_ref(&digest_set), &[tag_set], &[]).unwrap();
    assert_eq!(
        tried(
            &rules,
            "registry.redhat.io/redhat/redhat-operator-index:v4.16"
        ),
        ["mirror.local/redhat/redhat/redhat-operator-index:v4.16*"]
    );
    assert_eq!(
        tried(&rules, &format!("registry.redhat.io/ubi9/ubi@{D}")),
        [format!("mirror.local/redhat/ubi9/ubi@{D}*")]
    );
    // An ITMS that leaves the policy unset disagrees with the IDMS's NeverContactSource for
    // the same source: refused, as the MCO refuses it.
    let lax = ImageTagMirrorSet::new(
        "lax",
        ImageTagMirrorSetSpec {
            image_tag_mirrors: vec![ImageTagMirrors {
                source: "registry.redhat.io".to_owned(),
                mirrors: vec!["other.local/redhat".to_owned()],
                mirror_source_policy: None,
            }],
        },
    );
    let err = MirrorRules::from_cluster(&[digest_set], &[lax], &[]).unwrap_err();
    assert_eq!(
        err,
        MirrorRulesError::ConflictingPolicy {
            scope: "registry.redhat.io".to_owned(),
            first: object(Idms, "digests"),
            first_policy: Never,
            second: object(Itms, "lax"),
            second_policy: Allow,
        }
    );
    assert!(err.to_string().contains("ImageTagMirrorSet/lax"), "{err}");
}

#[test]
fn a_mirror_under_a_source_that_may_not_be_contacted_is_skipped() {
    let rules = rules(vec![
        rule(
            Idms,
            "outer",
            "quay.io/ns",
            &["fenced.local/ns", "open.local/ns"],
            Allow,
        ),
        rule(Idms, "fence", "fenced.local", &["elsewhere.local/f"], Never),
    ]);
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/r@{D}")),
        [format!("open.local/ns/r@{D}*"), format!("quay.io/ns/r@{D}")]
    );
    let plan = rules.plan(&format!("quay.io/ns/r@{D}")).unwrap();
    assert_eq!(
        plan.matched.unwrap().mirrors_blocked,
        [format!("fenced.local/ns/r@{D}")]
    );
}

#[test]
fn a_rule_without_a_real_mirror_is_ignored_with_its_policy() {
    let rules = rules(vec![
        rule(Idms, "empty", "quay.io/a", &[], Never),
        rule(Idms, "itself", "quay.io/b", &["quay.io/b"], Allow),
    ]);
    assert!(rules.is_empty());
    assert_eq!(
        tried(&rules, &format!("quay.io/a/r@{D}")),
        [format!("quay.io/a/r@{D}")]
    );
}

#[test]
fn the_source_listed_among_its_mirrors_keeps_its_place() {
    let rules = rules(vec![rule(
        Idms,
        "src-first",
        "quay.io/ns",
        &["quay.io/ns", "m.local/ns"],
        Allow,
    )]);
    assert_eq!(
        tried(&rules, &format!("quay.io/ns/r@{D}")),
        [
            format!("quay.io/ns/r@{D}*"),
            format!("m.local/ns/r@{D}*"),
            format!("quay.io/ns/r@{D}")
        ]
    );
}

#[test]
fn a_mirror_that_cannot_name_the_image_fails_the_pull() {
    // `m.local` + `@digest` is no canonical reference: containers/image fails the pull too.
    let rules = rules(vec![rule(
        Idms,
        "bad",
        "quay.io/ns/repo",
        &["m.local"],
        Allow,
    )]);
    let err = rules
        .pull_sources(&format!("quay.io/ns/repo@{D}"))
        .unwrap_err();
    assert!(
        matches!(&err, OciError::InvalidReference { reason, .. }
            if reason.contains("ImageDigestMirrorSet/bad")),
        "{err:?}"
    );
    // Pulls by tag do not use that mirror.
    assert_eq!(tried(&rules, "quay.io/ns/repo:v1"), ["quay.io/ns/repo:v1"]);
}

#[test]
fn the_machine_config_operators_refusals_are_refused() {
    let cases: Vec<(Vec<MirrorRule>, MirrorRulesError)> = vec![
        (
            vec![rule(Idms, "x", "quay.io/UPPER", &["m.local/a"], Allow)],
            MirrorRulesError::InvalidSource {
                object: object(Idms, "x"),
                scope: "quay.io/UPPER".to_owned(),
            },
        ),
        (
            vec![rule(Icsp, "x", "*.example.com/ns", &["m.local/a"], Allow)],
            MirrorRulesError::InvalidSource {
                object: object(Icsp, "x"),
                scope: "*.example.com/ns".to_owned(),
            },
        ),
        (
            vec![rule(Itms, "x", "quay.io/a", &["*.m.local"], Allow)],
            MirrorRulesError::InvalidMirror {
                object: object(Itms, "x"),
                scope: "quay.io/a".to_owned(),
                mirror: "*.m.local".to_owned(),
            },
        ),
        (
            vec![rule(Idms, "x", "quay.io/a", &["m.local/a:tag"], Allow)],
            MirrorRulesError::InvalidMirror {
                object: object(Idms, "x"),
                scope: "quay.io/a".to_owned(),
                mirror: "m.local/a:tag".to_owned(),
            },
        ),
        (
            vec![rule(
                Idms,
                "x",
                "quay.io/a",
                &["m.local/a", "quay.io/a"],
                Never,
            )],
            MirrorRulesError::SourceAmongMirrors {
                object: object(Idms, "x"),
                scope: "quay.io/a".to_owned(),
            },
        ),
        // ICSP counts as AllowContactingSource, even for a rule without mirrors.
        (
            vec![
                rule(Idms, "strict", "quay.io/a", &["m.local/a"], Never),
                rule(Icsp, "old", "quay.io/a", &[], Allow),
            ],
            MirrorRulesError::ConflictingPolicy {
                scope: "quay.io/a".to_owned(),
                first: object(Idms, "strict"),
                first_policy: Never,
                second: object(Icsp, "old"),
                second_policy: Allow,
            },
        ),
    ];
    for (input, want) in cases {
        assert_eq!(
            MirrorRules::new(input.clone()).unwrap_err(),
            want,
            "{input:?}"
        );
    }
}

#[test]
fn counts_above_the_limits_are_refused() {
    let many: Vec<String> = (0..=MAX_MIRRORS_PER_RULE)
        .map(|i| format!("m{i}.local/a"))
        .collect();
    let refs: Vec<&str> = many.iter().map(String::as_str).collect();
    let err = MirrorRules::new(vec![rule(Idms, "long", "quay.io/a", &refs, Allow)]).unwrap_err();
    assert!(
        matches!(err, MirrorRulesError::TooManyMirrors { count, .. } if count == MAX_MIRRORS_PER_RULE + 1),
        "{err:?}"
    );
    // Within the per-rule limit each, above the per-source limit merged.
    let halves: Vec<MirrorRule> = many
        .chunks(MAX_MIRRORS_PER_SOURCE.div_ceil(2) + 1)
        .enumerate()
        .map(|(i, chunk)| {
            let refs: Vec<&str> = chunk.iter().map(String::as_str).collect();
            rule(Idms, &format!("part{i}"), "quay.io/a", &refs, Allow)
        })
        .collect();
    let err = MirrorRules::new(halves).unwrap_err();
    assert!(
        matches!(
            err,
            MirrorRulesError::TooManyMergedMirrors {
                pulls: PullKind::Digest,
                ..
            }
        ),
        "{err:?}"
    );
    let rules: Vec<MirrorRule> = (0..=MAX_MIRROR_RULES)
        .map(|i| rule(Idms, "big", &format!("quay.io/r{i}"), &["m.local/a"], Allow))
        .collect();
    assert_eq!(
        MirrorRules::new(rules).unwrap_err(),
        MirrorRulesError::TooManyRules {
            count: MAX_MIRROR_RULES + 1,
            limit: MAX_MIRROR_RULES
        }
    );
}

// ---------------------------------------------------------------------------------------------
// Properties

const SOURCES: &[&str] = &[
    "quay.io",
    "quay.io/ns",
    "quay.io/ns/repo",
    "a.example.com/ns",
    "*.example.com",
    "*.a.example.com",
    "b.a.example.com",
    "reg.io:5000/ns",
];
const MIRRORS: &[&str] = &[
    "m1.local/a",
    "m2.local/b/c",
    "m3.local:5000/d",
    "m4.local/e",
];
const HOSTS: &[&str] = &[
    "quay.io",
    "a.example.com",
    "b.a.example.com",
    "reg.io:5000",
    "other.io",
];
const PATHS: &[&str] = &["ns/repo", "ns/repox", "ns/repo/sub", "other/x", "ns"];

/// The most specific matching source, written independently of the module: equal or
/// followed by `/`; a wildcard by host suffix; longest first, then byte order.
fn oracle_source<'a>(sources: impl Iterator<Item = &'a str>, name: &str) -> Option<&'a str> {
    let host = name.split('/').next().unwrap_or_default();
    let host = host.split(':').next().unwrap_or_default();
    let mut matching: Vec<&str> = sources
        .filter(|s| match s.strip_prefix("*.") {
            Some(domain) => host.ends_with(&format!(".{domain}")),
            None => name == *s || name.starts_with(&format!("{s}/")),
        })
        .collect();
    matching.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    matching.first().copied()
}

fn config() -> impl Strategy<Value = (Vec<MirrorRule>, BTreeMap<&'static str, MirrorSourcePolicy>)>
{
    let policies = prop::collection::vec(prop::bool::ANY, SOURCES.len());
    let one_rule = (
        0..3_usize,
        0..SOURCES.len(),
        prop::sample::subsequence(MIRRORS.to_vec(), 0..=MIRRORS.len()).prop_shuffle(),
        0..3_usize,
    );
    (policies, prop::collection::vec(one_rule, 0..10)).prop_map(|(never, rules)| {
        let policy_of = |i: usize| if never[i] { Never } else { Allow };
        let list = rules
            .into_iter()
            .map(|(kind, source, mirrors, name)| {
                let policy = policy_of(source);
                let kind = match kind {
                    0 => Idms,
                    1 => Itms,
                    // An ICSP may only name a source whose policy allows it (else refused).
                    _ if policy == Never => Idms,
                    _ => Icsp,
                };
                rule(kind, &format!("o{name}"), SOURCES[source], &mirrors, policy)
            })
            .collect();
        let policies = (0..SOURCES.len())
            .map(|i| (SOURCES[i], policy_of(i)))
            .collect();
        (list, policies)
    })
}

fn reference() -> impl Strategy<Value = (String, String)> {
    (
        prop::sample::select(HOSTS),
        prop::sample::select(PATHS),
        prop_oneof![
            Just(format!("@{D}")),
            Just(":v1".to_owned()),
            Just(format!(":v1@{D}"))
        ],
    )
        .prop_map(|(host, path, suffix)| (format!("{host}/{path}"), suffix))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    /// The source is tried iff no rule of the most specific matching source (with a real
    /// mirror) says NeverContactSource; it is tried last; every location keeps the
    /// reference's tag and digest; mirrors only come from rules of the pull's kind.
    #[test]
    fn the_source_is_tried_unless_forbidden_and_mirrors_keep_the_digest_or_tag(
        (list, policies) in config(),
        (name, suffix) in reference(),
    ) {
        let rules = MirrorRules::new(list.clone()).unwrap();
        let reference = format!("{name}{suffix}");
        let plan = rules.plan(&reference);
        // A broken cycle can put a wildcard source among its own mirrors, which names no
        // image: containers/image fails such a pull, and so does the plan.
        if let Err(err) = &plan {
            prop_assert!(matches!(err, OciError::InvalidReference { reference, .. } if reference.starts_with("*.")), "{:?}", err);
            return Ok(());
        }
        let plan = plan.unwrap();
        let mirrored: BTreeSet<&str> = list
            .iter()
            .filter(|r| r.mirrors.iter().any(|m| *m != r.source))
            .map(|r| r.source.as_str())
            .collect();
        let matched = oracle_source(mirrored.iter().copied(), &name);
        prop_assert_eq!(plan.matched.as_ref().map(|m| m.scope.as_str()), matched);
        let forbidden = matched.is_some_and(|s| policies[s] == Never);
        let sources: Vec<&PullSource> = plan.sources.iter().filter(|s| !s.is_mirror()).collect();
        prop_assert_eq!(sources.len(), usize::from(!forbidden), "{:?}", plan);
        if let Some(source) = sources.first() {
            prop_assert_eq!(&source.reference, &reference);
            prop_assert!(!plan.sources.last().unwrap().is_mirror(), "the source comes last");
        }
        let by_digest = suffix.contains('@');
        for location in &plan.sources {
            prop_assert!(location.reference.ends_with(&suffix), "{} keeps {}", location.reference, suffix);
            let tail = location.reference.strip_suffix(&suffix).unwrap();
            prop_assert!(!tail.contains('@') && !tail.rsplit('/').next().unwrap().contains(':'));
            if let SourceRole::Mirror { scope, listed_by } = &location.role {
                prop_assert_eq!(Some(scope.as_str()), matched);
                if listed_by.is_empty() {
                    // Only the source itself, placed among its mirrors by a broken cycle of
                    // conflicting orders (runtime-utils `topoGraph.Sorted`).
                    prop_assert_eq!(&location.reference, &reference);
                }
                for object in listed_by {
                    let digest_kind = object.kind != Itms;
                    prop_assert_eq!(digest_kind, by_digest, "{} serves the other kind", object);
                    prop_assert!(list.iter().any(|r| r.object == *object
                        && r.source == *scope
                        && r.mirrors.iter().any(|m| location.reference.starts_with(m.as_str()))));
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// The puller through mirrors, against in-process registries

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

const GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

fn catalog_layer(body: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_mode(0o644);
    header.set_size(body.len() as u64);
    header.set_entry_type(tar::EntryType::Regular);
    builder
        .append_data(&mut header, "configs/pkg/catalog.json", body)
        .unwrap();
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(&builder.into_inner().unwrap()).unwrap();
    encoder.finish().unwrap()
}

/// A registry of several repositories, on 127.0.0.1 over plain HTTP; every request is logged.
#[derive(Default)]
struct Registry {
    /// (repository, tag or digest) → (digest, manifest)
    manifests: HashMap<(String, String), (String, Vec<u8>)>,
    /// (repository, digest) → blob
    blobs: HashMap<(String, String), Vec<u8>>,
    log: Mutex<Vec<String>>,
}

impl Registry {
    /// Adds a one-layer image to `repository` under `tag`; returns its manifest digest.
    fn push(&mut self, repository: &str, tag: &str, layer: &[u8]) -> String {
        let config = b"{}".to_vec();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json",
                       "digest": sha256(&config), "size": config.len()},
            "layers": [{"mediaType": GZIP, "digest": sha256(layer), "size": layer.len()}],
        }))
        .unwrap();
        let digest = sha256(&manifest);
        let repo = repository.to_owned();
        self.blobs.insert((repo.clone(), sha256(&config)), config);
        self.blobs
            .insert((repo.clone(), sha256(layer)), layer.to_vec());
        for key in [tag.to_owned(), digest.clone()] {
            self.manifests
                .insert((repo.clone(), key), (digest.clone(), manifest.clone()));
        }
        digest
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn respond(&self, method: &str, path: &str) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
        self.log.lock().unwrap().push(format!("{method} {path}"));
        if path == "/v2/" {
            return (200, vec![], b"{}".to_vec());
        }
        let rest = path.strip_prefix("/v2/").unwrap_or_default();
        if let Some((repo, reference)) = rest.rsplit_once("/manifests/")
            && let Some((digest, body)) =
                self.manifests.get(&(repo.to_owned(), reference.to_owned()))
        {
            return (
                200,
                vec![
                    (
                        "Content-Type",
                        "application/vnd.oci.image.manifest.v1+json".to_owned(),
                    ),
                    ("Docker-Content-Digest", digest.clone()),
                ],
                body.clone(),
            );
        }
        if let Some((repo, digest)) = rest.rsplit_once("/blobs/")
            && let Some(body) = self.blobs.get(&(repo.to_owned(), digest.to_owned()))
        {
            return (200, vec![], body.clone());
        }
        (
            404,
            vec![("Content-Type", "application/json".to_owned())],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#.to_vec(),
        )
    }
}

/// Serves `registry` on 127.0.0.1 (plain HTTP, one request per connection); returns the host.
async fn serve(registry: Arc<Registry>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0_u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let mut first = text.lines().next().unwrap_or_default().split(' ');
                let (method, path) = (
                    first.next().unwrap_or_default(),
                    first.next().unwrap_or_default(),
                );
                let (status, headers, body) = registry.respond(method, path);
                let mut head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                if method != "HEAD" {
                    let _ = socket.write_all(&body).await;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    host
}

fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Nothing listens on port 1 of loopback: connections are refused at once.
const DEAD: &str = "127.0.0.1:1";

struct Scratch(std::path::PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        static COUNT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pom-oci-mirrors-{name}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[tokio::test]
async fn a_pull_by_digest_is_served_by_the_first_mirror_that_has_it() {
    install_crypto_provider();
    let layer = catalog_layer(b"{\"schema\":\"olm.package\"}");
    // The first mirror lacks the image, the second has it; the source is down.
    let empty = Arc::new(Registry::default());
    let mut full = Registry::default();
    let digest = full.push("mirrored/team/catalog", "v1", &layer);
    let full = Arc::new(full);
    let (empty_host, full_host) = (serve(empty.clone()).await, serve(full.clone()).await);
    let rules = rules(vec![rule(
        Idms,
        "catalogs",
        &format!("{DEAD}/team"),
        &[
            &format!("{empty_host}/team"),
            &format!("{full_host}/mirrored/team"),
        ],
        Allow,
    )]);
    let puller = ImagePuller::new(vec![DEAD.to_owned(), empty_host.clone(), full_host.clone()]);
    let reference = format!("{DEAD}/team/catalog@{digest}");
    let pulled = puller
        .pull_files(&reference, "configs/", &RegistryAccess::anonymous(), &rules)
        .await
        .unwrap();
    assert_eq!(
        pulled.content.get("pkg/catalog.json").map(Vec::as_slice),
        Some(&b"{\"schema\":\"olm.package\"}"[..])
    );
    // Named and cached by the source's name, served by the second mirror.
    assert_eq!(pulled.by_digest, reference);
    assert_eq!(pulled.resolved_by, None, "a digest needs no resolution");
    let from = pulled.content_from.unwrap();
    assert_eq!(
        from.reference,
        format!("{full_host}/mirrored/team/catalog@{digest}")
    );
    assert!(from.is_mirror());
    assert!(
        empty
            .requests()
            .iter()
            .any(|r| r.contains("/team/catalog/manifests/")),
        "the first mirror was asked first: {:?}",
        empty.requests()
    );
    assert!(puller.cached_files(&reference, "configs/").is_some());
    // The same content to disk, under the source's digest.
    let scratch = Scratch::new("digest");
    let dir = puller
        .pull_to_dir(
            &reference,
            "configs/",
            &RegistryAccess::anonymous(),
            &scratch.0,
            &rules,
        )
        .await
        .unwrap();
    assert_eq!(
        dir.content_from.map(|s| s.reference),
        Some(format!("{full_host}/mirrored/team/catalog@{digest}"))
    );
    assert_eq!(
        puller.pulled_dir(&reference, "configs/", &scratch.0),
        Some(dir.content)
    );
}

#[tokio::test]
async fn never_contact_source_keeps_the_pull_off_the_source() {
    install_crypto_provider();
    let layer = catalog_layer(b"{}");
    let mut source = Registry::default();
    let digest = source.push("team/catalog", "v1", &layer);
    let source = Arc::new(source);
    let source_host = serve(source.clone()).await;
    let missing = Arc::new(Registry::default());
    let missing_host = serve(missing.clone()).await;
    let rules = rules(vec![rule(
        Idms,
        "disconnected",
        &format!("{source_host}/team"),
        &[&format!("{missing_host}/team")],
        Never,
    )]);
    let puller = ImagePuller::new(vec![source_host.clone(), missing_host.clone()]);
    let access = RegistryAccess::anonymous();
    // By digest: the mirror does not have it, the source (which does) is never asked.
    let err = puller
        .pull_files(
            &format!("{source_host}/team/catalog@{digest}"),
            "",
            &access,
            &rules,
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason().as_str(), "ImageNotFound", "{err}");
    assert!(err.to_string().contains(&missing_host), "{err}");
    // By tag: no tag mirror and the source forbidden: nothing is contacted at all.
    let err = puller
        .resolve_digest(&format!("{source_host}/team/catalog:v1"), &access, &rules)
        .await
        .unwrap_err();
    let message = err.to_string();
    assert!(
        message.contains("NeverContactSource")
            && message.contains("ImageDigestMirrorSet/disconnected"),
        "{message}"
    );
    assert_eq!(
        source.requests(),
        Vec::<String>::new(),
        "the source was contacted"
    );
}

#[tokio::test]
async fn a_tag_resolves_through_tag_mirrors_and_its_content_comes_from_there() {
    install_crypto_provider();
    let layer = catalog_layer(b"{\"from\":\"mirror\"}");
    let mut mirror = Registry::default();
    let digest = mirror.push("m/team/catalog", "v1", &layer);
    let mirror = Arc::new(mirror);
    let mirror_host = serve(mirror.clone()).await;
    let rules = rules(vec![rule(
        Itms,
        "tags",
        &format!("{DEAD}/team"),
        &[
            &format!("{DEAD}/unreachable"),
            &format!("{mirror_host}/m/team"),
        ],
        Never,
    )]);
    let puller = ImagePuller::new(vec![DEAD.to_owned(), mirror_host.clone()]);
    let access = RegistryAccess::anonymous();
    let reference = format!("{DEAD}/team/catalog:v1");
    let resolved = puller
        .resolve_digest(&reference, &access, &rules)
        .await
        .unwrap();
    assert_eq!(resolved.by_digest, format!("{DEAD}/team/catalog@{digest}"));
    assert_eq!(
        resolved.resolved_by.unwrap().reference,
        format!("{mirror_host}/m/team/catalog:v1")
    );
    // A pull by tag reads the blobs where it read the tag, though no digest mirror exists.
    let scratch = Scratch::new("tag");
    let pulled = puller
        .pull_to_dir(&reference, "configs/", &access, &scratch.0, &rules)
        .await
        .unwrap();
    assert_eq!(pulled.by_digest, format!("{DEAD}/team/catalog@{digest}"));
    assert_eq!(
        pulled.content_from.unwrap().reference,
        format!("{mirror_host}/m/team/catalog:v1")
    );
    assert_eq!(
        std::fs::read(pulled.content.join("pkg/catalog.json")).unwrap(),
        b"{\"from\":\"mirror\"}"
    );
    // Pulling the by-digest reference is a pull by digest: no digest mirror, the source
    // forbidden, so nothing to try, and the error says why.
    let err = puller
        .pull_files(&resolved.by_digest, "configs/", &access, &rules)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("pulls by tag only"), "{err}");
}

#[tokio::test]
async fn when_every_location_fails_the_error_lists_the_earlier_ones() {
    install_crypto_provider();
    let empty = Arc::new(Registry::default());
    let empty_host = serve(empty.clone()).await;
    let rules = rules(vec![rule(
        Itms,
        "tags",
        &format!("{empty_host}/team"),
        &[&format!("{DEAD}/first"), &format!("{empty_host}/second")],
        Allow,
    )]);
    let puller = ImagePuller::new(vec![DEAD.to_owned(), empty_host.clone()]);
    let err = puller
        .resolve_digest(
            &format!("{empty_host}/team/catalog:v1"),
            &RegistryAccess::anonymous(),
            &rules,
        )
        .await
        .unwrap_err();
    // The source's own answer (the last location), with the mirrors' before it.
    assert_eq!(err.reason().as_str(), "ImageNotFound", "{err}");
    let message = err.to_string();
    assert!(
        message.contains(&format!("{empty_host}/team/catalog:v1"))
            && message.contains(&format!("{DEAD}/first/catalog:v1"))
            && message.contains("unreachable")
            && message.contains(&format!("{empty_host}/second/catalog:v1")),
        "{message}"
    );
}
