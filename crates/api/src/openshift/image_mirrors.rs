//! Typed views of the cluster's image mirror configuration, which POM reads (and watches) so
//! that its own pulls go where the nodes' pulls go (PRODUCT §10):
//!
//! - `ImageDigestMirrorSet` (`config.openshift.io/v1`): mirrors used only for pulls by digest;
//! - `ImageTagMirrorSet` (`config.openshift.io/v1`): mirrors used only for pulls by tag;
//! - `ImageContentSourcePolicy` (`operator.openshift.io/v1alpha1`): the older, digest-only form,
//!   which the machine-config operator treats as an `ImageDigestMirrorSet` whose
//!   `mirrorSourcePolicy` is unset.
//!
//! Field names and meanings follow openshift/api (`config/v1/types_image_digest_mirror_set.go`,
//! `config/v1/types_image_tag_mirror_set.go`, `operator/v1alpha1/types_image_content_source_policy.go`).
//! Only `spec` is read (their `status` is empty upstream). These types are **read-only views**:
//! they are not in [`crate::crds`] (POM never installs or writes them; the platform owns them),
//! so `crds/` does not change. How a pull resolves through them is `pom_oci::mirrors`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// What happens when every mirror of a source fails (openshift/api `MirrorSourcePolicy`).
/// Unset means [`MirrorSourcePolicy::AllowContactingSource`].
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum MirrorSourcePolicy {
    /// The source itself is never contacted: only its mirrors are (the node's registries.conf
    /// marks the source `blocked`).
    NeverContactSource,
    /// The source is tried after all its mirrors failed (the default).
    #[default]
    AllowContactingSource,
}

/// `ImageDigestMirrorSet` spec: mirrors for pulls by digest.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ImageDigestMirrorSet",
    plural = "imagedigestmirrorsets",
    shortname = "idms",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ImageDigestMirrorSetSpec {
    /// The mirror rules, each for one `source`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_digest_mirrors: Vec<ImageDigestMirrors>,
}

/// One rule of an `ImageDigestMirrorSet`: where images named under `source` may also be
/// pulled by digest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageDigestMirrors {
    /// `host[:port]`, `host[:port]/namespace[/namespace…][/repo]` or `*.host` (a wildcard
    /// matching any subdomain of `host`).
    pub source: String,
    /// `host[:port][/namespace…][/repo]`, tried in this order; each replaces the part of the
    /// reference that `source` matched.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// Whether the source is tried once the mirrors failed (unset: it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_source_policy: Option<MirrorSourcePolicy>,
}

/// `ImageTagMirrorSet` spec: mirrors for pulls by tag.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "config.openshift.io",
    version = "v1",
    kind = "ImageTagMirrorSet",
    plural = "imagetagmirrorsets",
    shortname = "itms",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagMirrorSetSpec {
    /// The mirror rules, each for one `source`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub image_tag_mirrors: Vec<ImageTagMirrors>,
}

/// One rule of an `ImageTagMirrorSet`: where images named under `source` may also be pulled
/// by tag. Same fields and formats as [`ImageDigestMirrors`].
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTagMirrors {
    /// `host[:port]`, `host[:port]/namespace[/namespace…][/repo]` or `*.host`.
    pub source: String,
    /// `host[:port][/namespace…][/repo]`, tried in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
    /// Whether the source is tried once the mirrors failed (unset: it is).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mirror_source_policy: Option<MirrorSourcePolicy>,
}

/// `ImageContentSourcePolicy` spec (deprecated upstream in favour of `ImageDigestMirrorSet`,
/// still honoured by the machine-config operator): digest-only mirrors, the source always
/// allowed.
#[derive(
    CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema,
)]
#[kube(
    group = "operator.openshift.io",
    version = "v1alpha1",
    kind = "ImageContentSourcePolicy",
    plural = "imagecontentsourcepolicies",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ImageContentSourcePolicySpec {
    /// The mirror rules, each for one `source`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repository_digest_mirrors: Vec<RepositoryDigestMirrors>,
}

/// One rule of an `ImageContentSourcePolicy`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
pub struct RepositoryDigestMirrors {
    /// `host[:port][/namespace…][/repo]` (no wildcard here).
    pub source: String,
    /// Tried in this order for pulls by digest, then the source.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub mirrors: Vec<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use kube::CustomResourceExt;

    #[test]
    fn objects_as_the_api_server_returns_them_read() {
        let idms: ImageDigestMirrorSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "ImageDigestMirrorSet",
            "metadata": {"name": "digest-mirrors", "generation": 2},
            "spec": {"imageDigestMirrors": [
                {"source": "registry.redhat.io/redhat", "mirrors": ["mirror.local/redhat"],
                 "mirrorSourcePolicy": "NeverContactSource"},
                {"source": "*.example.com", "mirrors": ["mirror.local/example"]},
                {"source": "quay.io/only-a-policy"}
            ]},
            "status": {}
        }))
        .unwrap();
        let rules = &idms.spec.image_digest_mirrors;
        assert_eq!(rules.len(), 3);
        assert_eq!(
            rules[0].mirror_source_policy,
            Some(MirrorSourcePolicy::NeverContactSource)
        );
        assert_eq!(rules[1].mirror_source_policy, None);
        assert!(rules[2].mirrors.is_empty());

        let itms: ImageTagMirrorSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "ImageTagMirrorSet",
            "metadata": {"name": "tag-mirrors"},
            "spec": {"imageTagMirrors": [
                {"source": "quay.io/team", "mirrors": ["a.local/team", "b.local/team"],
                 "mirrorSourcePolicy": "AllowContactingSource"}
            ]}
        }))
        .unwrap();
        assert_eq!(
            itms.spec.image_tag_mirrors[0].mirrors,
            ["a.local/team", "b.local/team"]
        );

        let icsp: ImageContentSourcePolicy = serde_json::from_value(serde_json::json!({
            "apiVersion": "operator.openshift.io/v1alpha1",
            "kind": "ImageContentSourcePolicy",
            "metadata": {"name": "legacy"},
            "spec": {"repositoryDigestMirrors": [
                {"source": "quay.io/openshift-release-dev/ocp-release",
                 "mirrors": ["mirror.local/ocp/release"]}
            ]}
        }))
        .unwrap();
        assert_eq!(
            icsp.spec.repository_digest_mirrors[0].source,
            "quay.io/openshift-release-dev/ocp-release"
        );

        // An empty spec (the field is optional upstream) reads as no rules.
        let empty: ImageTagMirrorSet = serde_json::from_value(serde_json::json!({
            "apiVersion": "config.openshift.io/v1",
            "kind": "ImageTagMirrorSet",
            "metadata": {"name": "empty"},
            "spec": {}
        }))
        .unwrap();
        assert!(empty.spec.image_tag_mirrors.is_empty());
    }

    #[test]
    fn an_unknown_policy_is_refused_rather_than_guessed() {
        // The upstream schema enumerates the two values; anything else is not silently read
        // as "allowed" (which would contact a source the admin may have meant to forbid).
        let parsed = serde_json::from_value::<ImageDigestMirrors>(serde_json::json!({
            "source": "quay.io/x", "mirrors": ["m.local/x"], "mirrorSourcePolicy": "Sometimes"
        }));
        assert!(parsed.is_err());
    }

    #[test]
    fn the_policy_serialises_as_upstream_spells_it() {
        let rule = ImageTagMirrors {
            source: "quay.io/x".to_owned(),
            mirrors: vec!["m.local/x".to_owned()],
            mirror_source_policy: Some(MirrorSourcePolicy::NeverContactSource),
        };
        assert_eq!(
            serde_json::to_value(&rule).unwrap(),
            serde_json::json!({"source": "quay.io/x", "mirrors": ["m.local/x"],
                               "mirrorSourcePolicy": "NeverContactSource"})
        );
        assert_eq!(
            MirrorSourcePolicy::default(),
            MirrorSourcePolicy::AllowContactingSource
        );
    }

    #[test]
    fn the_views_are_cluster_scoped_and_not_among_poms_crds() {
        for crd in [
            ImageDigestMirrorSet::crd(),
            ImageTagMirrorSet::crd(),
            ImageContentSourcePolicy::crd(),
        ] {
            assert_eq!(crd.spec.scope, "Cluster", "{}", crd.spec.names.kind);
        }
        let ours: Vec<String> = crate::crds()
            .into_iter()
            .map(|crd| crd.spec.names.kind)
            .collect();
        for kind in [
            "ImageDigestMirrorSet",
            "ImageTagMirrorSet",
            "ImageContentSourcePolicy",
        ] {
            assert!(!ours.iter().any(|k| k == kind), "{kind} is in crds()");
        }
    }
}
