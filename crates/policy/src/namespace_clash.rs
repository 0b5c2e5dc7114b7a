//! Install and watch namespaces of different PlatformOperators never coincide (issue 33 item 5,
//! review finding): an operator that watches a namespace gets a watcher's RBAC there (Roles
//! over Secrets, ServiceAccounts, Deployments), so watching another PlatformOperator's install
//! namespace would hand it that other operator's powers.
//!
//! The judgement is two-way and does not depend on which PlatformOperator is reconciled first:
//!
//! - **the Namespace's owner label decides when it is set**: a namespace POM created or was
//!   handed for a PlatformOperator carries that PO's owner label (written by the create that
//!   claims it, so two POs never both get it); no other PO may watch it, whatever their ages;
//! - **otherwise the older PlatformOperator wins** (creation time, then name: the rule of
//!   duplicate packages, [`seniority`]): a PO whose watch namespace is the (recorded or asked)
//!   install namespace of an older one is refused, and so is a PO that would install into the
//!   watch namespace of an older one, before anything of it is written there.
//!
//! A PO that has installed already owns its namespace by the label (it is labelled when first
//! applied): the watcher is the one refused then, even if older. A refused watcher's objects in
//! the other's namespace are withdrawn ([`crate::inventory::in_namespace`]): it must not keep
//! powers there.

use std::collections::BTreeMap;

use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::labels::{self, label_value};

/// Which side of the clash the refused PlatformOperator is on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClashSide {
    /// Its `spec.watchNamespace` is the other's install namespace: its objects there are
    /// withdrawn.
    Watches,
    /// Its install namespace is the other's `spec.watchNamespace`: it is refused before it
    /// installs.
    InstallsInto,
}

/// Why the other PlatformOperator holds the namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClashWinner {
    /// The Namespace carries the other's owner label (it is its install namespace on the
    /// cluster).
    NamespaceOwner,
    /// The other is older (created first, then by name).
    Older,
}

/// A PlatformOperator refused because another holds the namespace it watches or installs into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceClash {
    /// The namespace both name.
    pub namespace: String,
    /// The PlatformOperator that holds it (its name; or, for a Namespace labelled for a PO the
    /// manager does not know, the label's value).
    pub other: String,
    pub side: ClashSide,
    pub winner: ClashWinner,
}

impl NamespaceClash {
    /// What the admin reads: the field, the other PO, why it wins and what to do.
    #[must_use]
    pub fn message(&self) -> String {
        let Self {
            namespace,
            other,
            side,
            winner,
        } = self;
        let why = match winner {
            ClashWinner::NamespaceOwner => {
                format!("Namespace {namespace} carries the owner label of PlatformOperator {other}")
            }
            ClashWinner::Older => format!("PlatformOperator {other} is older and wins"),
        };
        match side {
            ClashSide::Watches => format!(
                "spec.watchNamespace {namespace:?} is the install namespace of PlatformOperator {other} ({why}): an operator may not watch (and get RBAC in) another PlatformOperator's namespace; what this PlatformOperator applied there is removed; delete and recreate this PlatformOperator with a spec.watchNamespace of its own"
            ),
            ClashSide::InstallsInto => format!(
                "install namespace {namespace:?} is the spec.watchNamespace of PlatformOperator {other} ({why}): its operator would get RBAC over this one's objects; set spec.installNamespace to a namespace no PlatformOperator watches (delete and recreate this PlatformOperator), or delete {other}"
            ),
        }
    }
}

/// The order in which PlatformOperators hold what they both ask for: the older first, then by
/// name (a PO without a creation time, as in tests, counts as oldest). The rule of duplicate
/// packages too.
#[must_use]
pub fn seniority(po: &PlatformOperator) -> (Option<Timestamp>, String) {
    (
        po.metadata.creation_timestamp.as_ref().map(|t| t.0),
        po.metadata.name.clone().unwrap_or_default(),
    )
}

/// Whether `po` has put something on the cluster (a bundle installed or an inventory
/// recorded): its install namespace is then labelled as its own.
#[must_use]
pub fn has_installed(po: &PlatformOperator) -> bool {
    po.status
        .as_ref()
        .is_some_and(|s| s.installed_bundle.is_some() || !s.inventory.is_empty())
}

/// The install namespace of `po` as the manager knows it: recorded in its status, else asked
/// for in its spec, else (a PO installed by a manager that recorded none: its default) its
/// name. `None` before a first install that names none: the default is chosen when the bundle
/// is read, and judged then by [`install_clash`].
#[must_use]
pub fn known_install_namespace(po: &PlatformOperator) -> Option<String> {
    po.status
        .as_ref()
        .and_then(|s| s.install_namespace.clone())
        .or_else(|| po.spec.install_namespace.clone())
        .or_else(|| has_installed(po).then(|| po.metadata.name.clone().unwrap_or_default()))
}

/// The namespace `po` watches apart from its own (`None` for AllNamespaces and OwnNamespace).
fn watched_elsewhere(po: &PlatformOperator) -> Option<&str> {
    let watched = po
        .spec
        .watch_namespace
        .as_deref()
        .filter(|w| !w.is_empty())?;
    (known_install_namespace(po).as_deref() != Some(watched)).then_some(watched)
}

/// The PlatformOperator that wins `po`'s package when several name it (the oldest, by
/// [`seniority`]; one being deleted no longer competes), when that is not `po` itself: the
/// manager's gather and `pomctl plan` both ask this, so a plan never shows a duplicate moving.
#[must_use]
pub fn duplicate_winner<'p>(
    po: &PlatformOperator,
    others: impl IntoIterator<Item = &'p PlatformOperator>,
) -> Option<String> {
    others
        .into_iter()
        .filter(|other| {
            other.spec.package.name == po.spec.package.name
                && other.metadata.deletion_timestamp.is_none()
        })
        .min_by_key(|other| seniority(other))
        .filter(|winner| winner.metadata.name != po.metadata.name)
        .and_then(|winner| winner.metadata.name.clone())
}

/// Whether `po` is refused because another PlatformOperator holds a namespace it names:
/// `others` are the PlatformOperators the manager knows (`po` among them is skipped; one being
/// deleted still holds its namespaces until it is gone); `watched_owner` is the owner label of
/// the Namespace `po` watches as the cluster holds it (`None`: absent or unlabelled).
#[must_use]
pub fn namespace_clash<'p>(
    po: &PlatformOperator,
    others: impl IntoIterator<Item = &'p PlatformOperator> + Clone,
    watched_owner: Option<&str>,
) -> Option<NamespaceClash> {
    watch_clash(po, others.clone(), watched_owner).or_else(|| {
        // Installed: the namespace is labelled as this PO's, and an older watcher is refused
        // by that label; before, the older watcher wins.
        if has_installed(po) {
            return None;
        }
        install_clash(po, &known_install_namespace(po)?, others)
    })
}

/// `po` watches a namespace another PlatformOperator holds: labelled as its own, or its known
/// install namespace while it is older.
fn watch_clash<'p>(
    po: &PlatformOperator,
    others: impl IntoIterator<Item = &'p PlatformOperator>,
    watched_owner: Option<&str>,
) -> Option<NamespaceClash> {
    let watched = watched_elsewhere(po)?;
    let name = po.metadata.name.clone().unwrap_or_default();
    let others: Vec<&PlatformOperator> = others
        .into_iter()
        .filter(|other| other.metadata.name.as_deref() != Some(name.as_str()))
        .collect();
    if let Some(owner) = watched_owner.filter(|owner| *owner != label_value(&name)) {
        let other = others
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .find(|o| label_value(o) == owner)
            .unwrap_or_else(|| owner.to_owned());
        return Some(NamespaceClash {
            namespace: watched.to_owned(),
            other,
            side: ClashSide::Watches,
            winner: ClashWinner::NamespaceOwner,
        });
    }
    let me = seniority(po);
    others
        .into_iter()
        .filter(|other| known_install_namespace(other).as_deref() == Some(watched))
        .filter(|other| seniority(other) < me)
        .min_by_key(|other| seniority(other))
        .map(|other| NamespaceClash {
            namespace: watched.to_owned(),
            other: seniority(other).1,
            side: ClashSide::Watches,
            winner: ClashWinner::Older,
        })
}

/// Whether installing `po` into `namespace` is refused: an older PlatformOperator watches it.
/// Judged on the known install namespace by [`namespace_clash`], and by the manager on the
/// default it chooses for a first install, before the namespace is claimed.
#[must_use]
pub fn install_clash<'p>(
    po: &PlatformOperator,
    namespace: &str,
    others: impl IntoIterator<Item = &'p PlatformOperator>,
) -> Option<NamespaceClash> {
    let me = seniority(po);
    others
        .into_iter()
        .filter(|other| other.metadata.name != po.metadata.name)
        .filter(|other| watched_elsewhere(other) == Some(namespace))
        .filter(|other| seniority(other) < me)
        .min_by_key(|other| seniority(other))
        .map(|other| NamespaceClash {
            namespace: namespace.to_owned(),
            other: seniority(other).1,
            side: ClashSide::InstallsInto,
            winner: ClashWinner::Older,
        })
}

/// The labels a deleted PlatformOperator takes off its install Namespace, which cleanup keeps
/// (custom resources the admin made may live there, §6): POM's owner labels, and only while the
/// Namespace still names `po` as its owner. Left there, the owner label would name a PO that no
/// longer exists, and every later PlatformOperator watching that namespace would be refused
/// for good (review M5). `app.kubernetes.io/managed-by` goes only when it is POM's value; the
/// Pod Security labels stay (the namespace is kept as it runs).
#[must_use]
pub fn labels_to_release(live: &BTreeMap<String, String>, po: &str) -> Vec<&'static str> {
    if live.get(labels::OWNER_PO) != Some(&label_value(po)) {
        return Vec::new();
    }
    [labels::OWNER_PO, labels::PACKAGE, labels::BUNDLE]
        .into_iter()
        .filter(|key| live.contains_key(*key))
        .chain(
            (live.get(labels::MANAGED_BY).map(String::as_str) == Some(labels::MANAGED_BY_VALUE))
                .then_some(labels::MANAGED_BY),
        )
        .collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;
    use pom_api::platform_operator::{BundleInventory, PlatformOperatorStatus};

    /// A PO named `name`, created at second `created` of the Unix epoch.
    fn po(name: &str, created: i64) -> PlatformOperator {
        let mut po = PlatformOperator::new(
            name,
            serde_json::from_value(serde_json::json!({"package": {"name": name}})).unwrap(),
        );
        po.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                Timestamp::from_second(created).unwrap(),
            ));
        po
    }

    fn watching(mut po: PlatformOperator, namespace: &str) -> PlatformOperator {
        po.spec.watch_namespace = Some(namespace.to_owned());
        po
    }

    fn installing(mut po: PlatformOperator, namespace: &str) -> PlatformOperator {
        po.spec.install_namespace = Some(namespace.to_owned());
        po
    }

    fn recorded(mut po: PlatformOperator, namespace: Option<&str>) -> PlatformOperator {
        po.status = Some(PlatformOperatorStatus {
            install_namespace: namespace.map(str::to_owned),
            inventory: vec![BundleInventory {
                bundle: "b.v1".to_owned(),
                objects: vec![],
            }],
            ..Default::default()
        });
        po
    }

    /// Both POs judged against both (the manager's store holds both).
    fn judge(a: &PlatformOperator, b: &PlatformOperator) -> [Option<NamespaceClash>; 2] {
        let all = [a.clone(), b.clone()];
        [
            namespace_clash(a, &all, None),
            namespace_clash(b, &all, None),
        ]
    }

    #[test]
    fn the_older_wins_whichever_side_it_is_on() {
        // The watcher older: the installer is refused before it installs.
        let watcher = watching(installing(po("w", 100), "w"), "team");
        let installer = installing(po("i", 200), "team");
        let [w, i] = judge(&watcher, &installer);
        assert_eq!(w, None, "the older watcher keeps watching");
        let i = i.unwrap();
        assert_eq!(
            (i.side, i.winner, i.other.as_str(), i.namespace.as_str()),
            (ClashSide::InstallsInto, ClashWinner::Older, "w", "team")
        );
        assert!(
            i.message().contains("spec.installNamespace"),
            "{}",
            i.message()
        );

        // The installer older: the watcher is refused.
        let watcher = watching(installing(po("w", 300), "w"), "team");
        let [w, i] = judge(&watcher, &installer);
        assert_eq!(i, None);
        let w = w.unwrap();
        assert_eq!(
            (w.side, w.winner, w.other.as_str()),
            (ClashSide::Watches, ClashWinner::Older, "i")
        );
        assert!(
            w.message().contains("spec.watchNamespace \"team\""),
            "{}",
            w.message()
        );
    }

    #[test]
    fn the_result_does_not_depend_on_the_order_of_the_store() {
        let watcher = watching(installing(po("w", 100), "w"), "team");
        let installer = installing(po("i", 200), "team");
        let forward = [watcher.clone(), installer.clone()];
        let backward = [installer.clone(), watcher.clone()];
        for po in [&watcher, &installer] {
            assert_eq!(
                namespace_clash(po, &forward, None),
                namespace_clash(po, &backward, None)
            );
        }
    }

    #[test]
    fn a_defaulted_install_namespace_counts_once_recorded_or_installed() {
        // Recorded at the first install's intent (the bundle's suggestion, or the PO's name).
        let installer = recorded(po("i", 100), Some("suggested"));
        let watcher = watching(installing(po("w", 200), "w"), "suggested");
        assert_eq!(judge(&watcher, &installer)[0].as_ref().unwrap().other, "i");
        // Installed by a manager that recorded no namespace: its default was its name.
        let legacy = recorded(po("legacy", 100), None);
        let watcher = watching(installing(po("w", 200), "w"), "legacy");
        let [w, _] = judge(&watcher, &legacy);
        assert_eq!(w.unwrap().namespace, "legacy");
        // Not decided yet: judged when the manager chooses it (install_clash).
        let undecided = po("u", 300);
        let all = [watcher.clone(), undecided.clone()];
        assert_eq!(namespace_clash(&undecided, &all, None), None);
        assert_eq!(
            install_clash(&undecided, "legacy", &all).unwrap().other,
            "w",
            "the default chosen is another's watched namespace"
        );
    }

    #[test]
    fn the_namespace_label_decides_once_set() {
        // The younger installer claimed the namespace first (a race): the older watcher is
        // refused by the label, and the installer, installed, is not.
        let watcher = watching(installing(po("w", 100), "w"), "team");
        let installer = recorded(installing(po("i", 200), "team"), Some("team"));
        let all = [watcher.clone(), installer.clone()];
        let w = namespace_clash(&watcher, &all, Some("i")).unwrap();
        assert_eq!(
            (w.side, w.winner, w.other.as_str()),
            (ClashSide::Watches, ClashWinner::NamespaceOwner, "i")
        );
        assert_eq!(namespace_clash(&installer, &all, None), None);
        // Labelled for a PO the manager does not know (yet): refused all the same.
        let alone = [watcher.clone()];
        assert_eq!(
            namespace_clash(&watcher, &alone, Some("stranger"))
                .unwrap()
                .other,
            "stranger"
        );
        // Its own label (OwnNamespace through the label) is no clash.
        assert_eq!(namespace_clash(&watcher, &alone, Some("w")), None);
    }

    #[test]
    fn own_namespace_and_all_namespaces_clash_with_nothing() {
        let own = watching(installing(po("a", 100), "a"), "a");
        let all_ns = installing(po("b", 200), "a-too");
        let [a, b] = judge(&own, &all_ns);
        assert_eq!((a, b), (None, None));
    }

    /// Review M5: what cleanup takes off the kept install Namespace, one row per case.
    #[test]
    fn a_deleted_pos_owner_labels_leave_its_namespace() {
        let map = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        let ours = [
            (labels::OWNER_PO, "demo"),
            (labels::PACKAGE, "demo-pkg"),
            (labels::MANAGED_BY, labels::MANAGED_BY_VALUE),
            ("pod-security.kubernetes.io/enforce", "restricted"),
        ];
        let rows: [(&str, BTreeMap<String, String>, Vec<&str>); 4] = [
            (
                "its own namespace: the owner labels go, Pod Security stays",
                map(&ours),
                vec![labels::OWNER_PO, labels::PACKAGE, labels::MANAGED_BY],
            ),
            (
                "another PO's namespace: nothing",
                map(&[(labels::OWNER_PO, "other"), (labels::PACKAGE, "demo-pkg")]),
                vec![],
            ),
            (
                "no owner label: nothing",
                map(&[(labels::MANAGED_BY, labels::MANAGED_BY_VALUE)]),
                vec![],
            ),
            (
                "someone else's managed-by value stays",
                map(&[(labels::OWNER_PO, "demo"), (labels::MANAGED_BY, "argocd")]),
                vec![labels::OWNER_PO],
            ),
        ];
        for (case, live, want) in rows {
            assert_eq!(labels_to_release(&live, "demo"), want, "{case}");
        }
    }
}
