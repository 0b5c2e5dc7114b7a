//! Adoption under the shipped admission guard (issue 36), pure: the guard
//! (`manifests/*/03_admission_guard.yaml`, a ValidatingAdmissionPolicy) refuses every change
//! the manager makes to an object that carries neither POM's owner label nor the
//! `platform.openshift.io/adopt` annotation, so adoption's first writes (releasing OLM's
//! objects, retiring OLM's webhook configurations) would be refused one by one, half done.
//! Under the guard the proof therefore names, before any write, every object it would change
//! that lacks the annotation, with the `kubectl annotate` command that hands each one over.

use super::ObjectKey;

/// The most commands one message lists (the rest are counted): a condition message stays
/// readable, and `pomctl adopt --subscription` prints them all.
pub const MAX_LISTED_COMMANDS: usize = 12;

/// The `kubectl annotate` command handing `key` to PlatformOperator `po` (the guard then lets
/// the manager change it). The resource is named `kind.group` so that kubectl resolves it
/// whatever else the cluster serves under the same kind.
#[must_use]
pub fn annotate_command(key: &ObjectKey, po: &str) -> String {
    let kind = key.kind.to_ascii_lowercase();
    let resource = match key.api_version.split_once('/') {
        Some((group, _)) => format!("{kind}.{group}"),
        None => kind,
    };
    let namespace = key
        .namespace
        .as_deref()
        .map(|ns| format!(" -n {ns}"))
        .unwrap_or_default();
    format!(
        "kubectl annotate {resource}/{}{namespace} {}={po}",
        key.name,
        pom_api::labels::ADOPT
    )
}

/// The commands for `keys`, at most [`MAX_LISTED_COMMANDS`], then how many more, joined for a
/// message.
#[must_use]
pub fn listed_commands(keys: &[ObjectKey], po: &str) -> String {
    let mut listed: Vec<String> = keys
        .iter()
        .take(MAX_LISTED_COMMANDS)
        .map(|k| annotate_command(k, po))
        .collect();
    if keys.len() > MAX_LISTED_COMMANDS {
        listed.push(format!(
            "and {} more (`pomctl adopt --subscription` prints them all)",
            keys.len() - MAX_LISTED_COMMANDS
        ));
    }
    listed.join("; ")
}

/// Whether an object's annotations hand it to a PlatformOperator
/// (`platform.openshift.io/adopt`, any value: the guard checks presence; ownership judges the
/// value as for any object).
#[must_use]
pub fn handed_over(live: &serde_json::Value) -> bool {
    live.pointer("/metadata/annotations")
        .and_then(|a| a.get(pom_api::labels::ADOPT))
        .is_some()
}

/// Whether the manager's change of `live` needs handing over first under the guard: neither
/// PlatformOperator `po`'s (its owner label) nor annotated.
#[must_use]
pub fn needs(live: &serde_json::Value, po: &str) -> bool {
    let owner = live
        .pointer("/metadata/labels")
        .and_then(|l| l.get(pom_api::labels::OWNER_PO))
        .and_then(serde_json::Value::as_str);
    owner != Some(pom_api::labels::label_value(po).as_str()) && !handed_over(live)
}

/// Whether an object with these labels and annotations must be handed over before the
/// manager may change it under the guard: neither POM's (its owner label) nor annotated.
#[must_use]
pub fn needs_handing_over(
    labels: Option<&std::collections::BTreeMap<String, String>>,
    annotations: Option<&std::collections::BTreeMap<String, String>>,
) -> bool {
    !labels.is_some_and(|l| l.contains_key(pom_api::labels::OWNER_PO))
        && !annotations.is_some_and(|a| a.contains_key(pom_api::labels::ADOPT))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    use crate::adopt::test_key as key;

    #[test]
    fn the_command_names_the_resource_by_group_and_the_namespace() {
        let cases = [
            (
                key("apps/v1", "Deployment", Some("ns"), "op"),
                "kubectl annotate deployment.apps/op -n ns platform.openshift.io/adopt=po",
            ),
            (
                key("v1", "ServiceAccount", Some("ns"), "op"),
                "kubectl annotate serviceaccount/op -n ns platform.openshift.io/adopt=po",
            ),
            (
                key(
                    "admissionregistration.k8s.io/v1",
                    "ValidatingWebhookConfiguration",
                    None,
                    "vop-x7k2q",
                ),
                "kubectl annotate validatingwebhookconfiguration.admissionregistration.k8s.io/vop-x7k2q platform.openshift.io/adopt=po",
            ),
        ];
        for (k, want) in cases {
            assert_eq!(annotate_command(&k, "po"), want);
        }
    }

    #[test]
    fn a_long_list_is_bounded_and_counted() {
        let keys: Vec<ObjectKey> = (0..MAX_LISTED_COMMANDS + 3)
            .map(|i| key("v1", "ConfigMap", Some("ns"), &format!("c{i}")))
            .collect();
        let text = listed_commands(&keys, "po");
        assert_eq!(
            text.matches("kubectl annotate").count(),
            MAX_LISTED_COMMANDS
        );
        assert!(text.ends_with("and 3 more (`pomctl adopt --subscription` prints them all)"));
        assert_eq!(listed_commands(&keys[..1], "po").matches("; ").count(), 0);
    }

    #[test]
    fn what_needs_handing_over() {
        let map = |k: &str| std::collections::BTreeMap::from([(k.to_owned(), "po".to_owned())]);
        let (owned, adopt, other) = (
            map("platform.openshift.io/owner"),
            map("platform.openshift.io/adopt"),
            map("olm.owner"),
        );
        assert!(needs_handing_over(None, None));
        assert!(needs_handing_over(Some(&other), Some(&other)));
        assert!(!needs_handing_over(Some(&owned), None));
        assert!(!needs_handing_over(None, Some(&adopt)));
        // The annotation counts as an annotation only, the owner label as a label only.
        assert!(needs_handing_over(Some(&adopt), Some(&owned)));
    }

    #[test]
    fn handed_over_is_the_annotations_presence() {
        use serde_json::json;
        assert!(handed_over(
            &json!({"metadata": {"annotations": {"platform.openshift.io/adopt": "po"}}})
        ));
        assert!(!handed_over(
            &json!({"metadata": {"labels": {"platform.openshift.io/adopt": "po"}}})
        ));
        assert!(!handed_over(&json!({"metadata": {}})));
    }
}
