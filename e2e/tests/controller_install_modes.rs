#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Install modes and pod security against a real API server (issues 21 and 24, PRODUCT §3,
//! §6): an OwnNamespace-only bundle installs with its permissions as Roles of its namespace; a
//! SingleNamespace PlatformOperator gets its Roles where it watches and nowhere else; the
//! watched namespace reaches the operator as `olm.targetNamespaces`; the install namespace POM
//! creates enforces the `baseline` Pod Security level, `privileged` only for an operator whose
//! admin consented to privileged workloads; a namespace POM did not create keeps its labels.
//! POs whose bundles suggest the same namespace, created at once, get it once: one takes it,
//! the others install under their own names, and nothing of one is ever written into another's.

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use kube::ResourceExt;
use kube::api::{Api, ListParams, PostParams};
use pom_api::labels;
use pom_e2e::event_log::{EventLog, Recorded};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::Manager;
use pom_e2e::quiet::{Objects, QuietWindow};
use pom_e2e::scenario::{
    configmap_catalog, create_po, simulated_plane, wait_catalog_serves, wait_po_condition,
};
use serde_json::json;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";

async fn target_namespaces(client: &kube::Client, namespace: &str, name: &str) -> String {
    let deployment = Api::<Deployment>::namespaced(client.clone(), namespace)
        .get(name)
        .await
        .unwrap();
    deployment
        .spec
        .and_then(|s| s.template.metadata)
        .and_then(|m| m.annotations)
        .and_then(|a| a.get("olm.targetNamespaces").cloned())
        .unwrap_or_else(|| panic!("{namespace}/{name} has no olm.targetNamespaces"))
}

async fn enforce_label(client: &kube::Client, namespace: &str) -> Option<String> {
    Api::<Namespace>::all(client.clone())
        .get(namespace)
        .await
        .unwrap()
        .metadata
        .labels
        .and_then(|l| l.get(ENFORCE).cloned())
}

#[tokio::test]
async fn own_and_single_namespace_operators_install_with_roles_where_they_watch() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let mut own = TestBundle::new("ownop", "1.0.0");
    own.install_modes = vec!["OwnNamespace"];
    let mut single = TestBundle::new("singleop", "1.0.0");
    single.install_modes = vec!["SingleNamespace"];
    // Another SingleNamespace package (two POs of one package are a DuplicatePackage).
    let mut unwatched = TestBundle::new("lonelyop", "1.0.0");
    unwatched.install_modes = vec!["SingleNamespace"];
    let rooter = TestBundle::new("rooter", "1.0.0")
        .plain()
        .with_object(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "rooter-node"},
            "spec": {
                "selector": {"matchLabels": {"app": "rooter-node"}},
                "template": {"metadata": {"labels": {"app": "rooter-node"}}, "spec": {
                    "hostPID": true,
                    "containers": [{"name": "c", "image": "example.invalid/x",
                        "securityContext": {"privileged": true}}]
                }}
            }
        }));
    let fbc = catalog_json(
        &[own.clone(), single.clone(), unwatched, rooter.clone()],
        &[],
    );
    configmap_catalog(&client, "local", &fbc, 0).await;
    let tenant: Namespace =
        serde_json::from_value(json!({"metadata": {"name": "tenant-a"}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &tenant)
        .await
        .unwrap();
    create_po(&client, "ownop", json!({"package": {"name": "ownop"}})).await;
    // SingleNamespace without a watch namespace is refused with what to set.
    create_po(
        &client,
        "lonelyop",
        json!({"package": {"name": "lonelyop"}}),
    )
    .await;
    create_po(
        &client,
        "singleop-tenant",
        json!({"package": {"name": "singleop"}, "watchNamespace": "tenant-a"}),
    )
    .await;
    create_po(
        &client,
        "rooter",
        json!({"package": {"name": "rooter"}, "consent": {"privilegedWorkloads": true}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;

    let message = wait_po_condition(
        &client,
        "lonelyop",
        "Installed",
        "False",
        Some("InstallModeUnsupported"),
    )
    .await;
    assert!(message.contains("set spec.watchNamespace"), "{message}");
    for po in ["ownop", "singleop-tenant", "rooter"] {
        wait_po_condition(&client, po, "Installed", "True", Some("InstallSucceeded")).await;
    }

    // OwnNamespace: the operator watches its own namespace; its permissions are a Role there,
    // and nothing of it is cluster-wide but its CRD's ClusterRole binding.
    assert_eq!(
        target_namespaces(&client, "ownop", &own.deployment_name()).await,
        "ownop"
    );
    let own_roles = Api::<Role>::namespaced(client.clone(), "ownop")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(!own_roles.items.is_empty(), "ownop has no Role");
    // SingleNamespace: Roles in the watched namespace and bound to the operator's account.
    assert_eq!(
        target_namespaces(&client, "singleop-tenant", &single.deployment_name()).await,
        "tenant-a"
    );
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), "tenant-a")
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        bindings.items.iter().any(|b| b
            .subjects
            .iter()
            .flatten()
            .any(|s| s.kind == "ServiceAccount"
                && s.name == "singleop"
                && s.namespace.as_deref() == Some("singleop-tenant"))),
        "no RoleBinding in tenant-a for singleop-tenant/singleop: {:?}",
        bindings
            .items
            .iter()
            .map(|b| &b.metadata.name)
            .collect::<Vec<_>>()
    );
    // The namespaced permissions (configmaps) never become cluster-wide for Own/SingleNamespace:
    // only the CSV's clusterPermissions are bound by ClusterRoleBindings.
    let crbs = Api::<ClusterRoleBinding>::all(client.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    let cluster_roles = Api::<ClusterRole>::all(client.clone());
    let mut cluster_bound = 0;
    for crb in &crbs.items {
        let ours = crb.subjects.iter().flatten().any(|s| {
            s.kind == "ServiceAccount"
                && ["ownop", "singleop-tenant"].contains(&s.namespace.as_deref().unwrap_or(""))
        });
        if !ours {
            continue;
        }
        cluster_bound += 1;
        let role = cluster_roles.get(&crb.role_ref.name).await.unwrap();
        for rule in role.rules.iter().flatten() {
            assert!(
                !rule.resources.iter().flatten().any(|r| r == "configmaps"),
                "ClusterRole {} grants the namespaced permissions cluster-wide",
                crb.role_ref.name
            );
        }
    }
    assert_eq!(
        cluster_bound, 2,
        "one clusterPermissions binding per operator"
    );

    // Pod security: baseline where POM created the namespace, privileged only with consent.
    assert_eq!(
        enforce_label(&client, "ownop").await.as_deref(),
        Some("baseline")
    );
    assert_eq!(
        enforce_label(&client, "singleop-tenant").await.as_deref(),
        Some("baseline")
    );
    assert_eq!(
        enforce_label(&client, "rooter").await.as_deref(),
        Some("privileged")
    );
    // The namespace POM did not create is left as the admin made it.
    assert_eq!(enforce_label(&client, "tenant-a").await, None);
    manager.stop().await;
}

/// The default install namespace (PRODUCT §3): the bundle's suggestion, recorded at the first
/// install, labelled for platform monitoring when the CSV asks; a suggestion another PO
/// already owns (every ACK controller suggests `ack-system`) or one of the platform's own
/// (`openshift-operators`) gives way to the PO's name. The monitoring opt-in needs the
/// admin's `platformConfig` consent.
#[tokio::test]
async fn suggested_namespaces_are_used_once_and_never_the_platforms() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let first = TestBundle::new("acka", "1.0.0")
        .annotate("operatorframework.io/suggested-namespace", "ack-system")
        .annotate("operatorframework.io/cluster-monitoring", "true")
        // The console's template: the allowlisted annotation is taken, Pod Security is not.
        .annotate(
            "operatorframework.io/suggested-namespace-template",
            r#"{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ack-system", "annotations": {"openshift.io/node-selector": ""}, "labels": {"pod-security.kubernetes.io/enforce": "privileged",},}}"#,
        );
    let second = TestBundle::new("ackb", "1.0.0")
        .annotate("operatorframework.io/suggested-namespace", "ack-system");
    let global = TestBundle::new("globalop", "1.0.0").annotate(
        "operatorframework.io/suggested-namespace",
        "openshift-operators",
    );
    let fbc = catalog_json(&[first, second, global], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    // Opting the install namespace into cluster monitoring is a platform-configuration power
    // (issue 33 item 5): acka asks for it, so its PO consents.
    create_po(
        &client,
        "acka",
        json!({"package": {"name": "acka"}, "consent": {"platformConfig": true}}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(
        &client,
        "acka",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    create_po(&client, "ackb", json!({"package": {"name": "ackb"}})).await;
    create_po(
        &client,
        "globalop",
        json!({"package": {"name": "globalop"}}),
    )
    .await;
    for po in ["ackb", "globalop"] {
        wait_po_condition(&client, po, "Installed", "True", Some("InstallSucceeded")).await;
    }
    let pos = Api::<pom_api::PlatformOperator>::all(client.clone());
    for (po, namespace) in [
        ("acka", "ack-system"),
        ("ackb", "ackb"),
        ("globalop", "globalop"),
    ] {
        let status = pos.get(po).await.unwrap().status.unwrap();
        assert_eq!(status.install_namespace.as_deref(), Some(namespace), "{po}");
        assert!(
            Api::<Deployment>::namespaced(client.clone(), namespace)
                .get_opt(&format!("{po}-controller"))
                .await
                .unwrap()
                .is_some(),
            "{po} runs in {namespace}"
        );
    }
    let metadata = Api::<Namespace>::all(client.clone())
        .get("ack-system")
        .await
        .unwrap()
        .metadata;
    let labels = metadata.labels.unwrap();
    assert_eq!(
        labels
            .get("openshift.io/cluster-monitoring")
            .map(String::as_str),
        Some("true")
    );
    assert_eq!(
        labels
            .get("pod-security.kubernetes.io/enforce")
            .map(String::as_str),
        Some("baseline"),
        "Pod Security comes from consent, not from the template"
    );
    assert_eq!(
        metadata
            .annotations
            .unwrap_or_default()
            .get("openshift.io/node-selector")
            .map(String::as_str),
        Some("")
    );
    assert!(
        Api::<Namespace>::all(client.clone())
            .get_opt("openshift-operators")
            .await
            .unwrap()
            .is_none(),
        "POM never creates a platform namespace"
    );
    manager.stop().await;
}

/// Every object of `events` labelled as a PO's (`platform.openshift.io/owner`) that lives
/// outside the namespace `installed_in` records for that PO, as `kind key owned by po`.
fn written_elsewhere<K: kube::Resource<DynamicType = ()>>(
    events: &[Recorded<K>],
    installed_in: &BTreeMap<String, String>,
) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| {
            let owner = e.object.meta().labels.as_ref()?.get(labels::OWNER_PO)?;
            let namespace = e.object.meta().namespace.as_deref()?;
            (installed_in.get(owner).map(String::as_str) != Some(namespace)).then(|| {
                format!(
                    "{} {} owned by {owner} ({:?})",
                    K::kind(&()),
                    e.key,
                    e.change
                )
            })
        })
        .collect()
}

/// The shared suggested-namespace race (issue 34 item 12): three POs whose bundles all suggest
/// `race-system`, created before the manager starts so their first reconciles run at once.
/// Exactly one records `race-system` (the namespace carries its owner label); the others
/// install under their own names; and no Deployment or ServiceAccount of one PO is ever
/// written, not even for a moment, into another's namespace (every write watched from before
/// the manager started until a window longer than every resync after the installs, judged by
/// the objects' owner labels).
#[tokio::test]
async fn a_suggested_namespace_raced_for_goes_to_exactly_one_po() {
    const SUGGESTED: &str = "race-system";
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let names = ["racea", "raceb", "racec"];
    let bundles: Vec<TestBundle> = names
        .iter()
        .map(|po| {
            TestBundle::new(po, "1.0.0")
                .annotate("operatorframework.io/suggested-namespace", SUGGESTED)
        })
        .collect();
    let fbc = catalog_json(&bundles, &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    for po in names {
        create_po(&client, po, json!({"package": {"name": po}})).await;
    }
    let deployments = EventLog::start(Api::<Deployment>::all(client.clone())).await;
    let accounts = EventLog::start(Api::<ServiceAccount>::all(client.clone())).await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "local", &fbc).await;
    for po in names {
        wait_po_condition(&client, po, "Installed", "True", Some("InstallSucceeded")).await;
    }
    // The logs keep recording through every periodic reconcile of the three POs.
    tokio::time::sleep(QuietWindow::new(&settings).length()).await;
    let pos = Api::<pom_api::PlatformOperator>::all(client.clone());
    let mut installed_in = BTreeMap::new();
    for po in names {
        let status = pos.get(po).await.unwrap().status.unwrap();
        installed_in.insert(po.to_owned(), status.install_namespace.unwrap());
    }
    let winners: Vec<&String> = installed_in
        .iter()
        .filter(|(_, ns)| *ns == SUGGESTED)
        .map(|(po, _)| po)
        .collect();
    assert_eq!(winners.len(), 1, "{installed_in:?}");
    let winner = winners[0].clone();
    for (po, namespace) in &installed_in {
        if *po != winner {
            assert_eq!(namespace, po, "{installed_in:?}");
        }
        // Each runs in the namespace it records.
        let running = Api::<Deployment>::namespaced(client.clone(), namespace)
            .get(&format!("{po}-controller"))
            .await
            .unwrap();
        assert_eq!(
            running.labels().get(labels::OWNER_PO),
            Some(po),
            "{po} in {namespace}"
        );
    }
    let claimed = Api::<Namespace>::all(client.clone())
        .get(SUGGESTED)
        .await
        .unwrap();
    assert_eq!(claimed.labels().get(labels::OWNER_PO), Some(&winner));
    let mut misplaced = written_elsewhere(&deployments.events(), &installed_in);
    misplaced.extend(written_elsewhere(&accounts.events(), &installed_in));
    assert!(misplaced.is_empty(), "{misplaced:#?}");
    manager.stop().await;
}

/// Issue 33 item 5 (review finding): install and watch namespaces of different POs never
/// coincide, judged both ways. A SingleNamespace PO installed watching `team` keeps its Roles
/// there while a younger PO asking to install into `team` (handed to it by the admin) is
/// refused before writing anything there. Once `team` carries another PO's owner label (its
/// install namespace on the cluster, as a PO installed by an older manager or a race leaves
/// it), the watcher is refused and what it applied in `team` is removed, and stays removed over
/// a window longer than every resync; its operator keeps running in its own namespace. Judged
/// by the RoleBindings and Deployments the API server holds.
#[tokio::test]
async fn a_watch_namespace_is_never_another_pos_install_namespace_whichever_comes_first() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let mut single = TestBundle::new("watcher", "1.0.0");
    single.install_modes = vec!["SingleNamespace"];
    let intruder = TestBundle::new("intruder", "1.0.0");
    let fbc = catalog_json(&[single.clone(), intruder.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    let namespaces = Api::<Namespace>::all(client.clone());
    let team: Namespace = serde_json::from_value(json!({"metadata": {"name": "team"}})).unwrap();
    namespaces
        .create(&PostParams::default(), &team)
        .await
        .unwrap();
    // The admin's own RoleBinding in `team` (the window below watches every RoleBinding there).
    let admins: RoleBinding = serde_json::from_value(json!({
        "metadata": {"name": "team-admins"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "team"}]
    }))
    .unwrap();
    let team_bindings = Api::<RoleBinding>::namespaced(client.clone(), "team");
    team_bindings
        .create(&PostParams::default(), &admins)
        .await
        .unwrap();
    create_po(
        &client,
        "watcher",
        json!({"package": {"name": "watcher"}, "watchNamespace": "team"}),
    )
    .await;
    let settings = Manager::test_settings(vec![]);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(
        &client,
        "watcher",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let owned_by_watcher =
        |rb: &RoleBinding| rb.labels().get(labels::OWNER_PO).map(String::as_str) == Some("watcher");
    let watcher_bindings = || async {
        team_bindings
            .list(&ListParams::default())
            .await
            .unwrap()
            .items
            .into_iter()
            .filter(|rb| owned_by_watcher(rb))
            .count()
    };
    assert!(
        watcher_bindings().await > 0,
        "the watcher has RoleBindings in team"
    );

    // (a) Installing into the watched namespace: the younger PO is refused, even with the
    // admin's hand-over, and nothing of it is written.
    namespaces
        .patch(
            "team",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(
                json!({"metadata": {"annotations": {labels::ADOPT: "intruder"}}}),
            ),
        )
        .await
        .unwrap();
    create_po(
        &client,
        "intruder",
        json!({"package": {"name": "intruder"}, "installNamespace": "team"}),
    )
    .await;
    let message = wait_po_condition(
        &client,
        "intruder",
        "Installed",
        "False",
        Some("InstallModeUnsupported"),
    )
    .await;
    assert!(
        message.contains("is the spec.watchNamespace of PlatformOperator watcher"),
        "{message}"
    );
    let intruders = Api::<Deployment>::namespaced(client.clone(), "team");
    assert!(
        intruders
            .get_opt(&intruder.deployment_name())
            .await
            .unwrap()
            .is_none()
    );
    assert_eq!(
        namespaces
            .get("team")
            .await
            .unwrap()
            .labels()
            .get(labels::OWNER_PO),
        None,
        "the refused PO never labelled the namespace as its own"
    );

    // (c) The namespace becomes another PO's on the cluster (its owner label): the watcher is
    // refused and withdraws its RoleBindings from it.
    namespaces
        .patch(
            "team",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"metadata": {"labels": {labels::OWNER_PO: "legacy"}}})),
        )
        .await
        .unwrap();
    let message = wait_po_condition(
        &client,
        "watcher",
        "Degraded",
        "True",
        Some("InstallModeUnsupported"),
    )
    .await;
    assert!(
        message.contains("carries the owner label of PlatformOperator legacy"),
        "{message}"
    );
    pom_e2e::manager::eventually(
        std::time::Duration::from_secs(60),
        "the watcher's RoleBindings withdrawn from team",
        || async { (watcher_bindings().await == 0).then_some(()) },
    )
    .await;
    let pos = Api::<pom_api::PlatformOperator>::all(client.clone());
    let status = pos.get("watcher").await.unwrap().status.unwrap();
    assert!(
        status
            .inventory
            .iter()
            .flat_map(|e| &e.objects)
            .all(|o| o.namespace.as_deref() != Some("team")),
        "the inventory still records objects in team: {:?}",
        status.inventory
    );
    // Withdrawn for good: no RoleBinding of the watcher comes back; its operator still runs.
    let window = QuietWindow::new(&settings)
        .never(
            team_bindings.clone(),
            Objects::All,
            "a RoleBinding of the watcher",
            owned_by_watcher,
        )
        .open()
        .await;
    window.hold().await;
    assert!(
        Api::<Deployment>::namespaced(client.clone(), "watcher")
            .get_opt(&single.deployment_name())
            .await
            .unwrap()
            .is_some(),
        "what runs keeps running"
    );
    manager.stop().await;
}

/// Review M5: deleting a PlatformOperator keeps its install namespace (custom resources may live
/// there) but takes its owner labels off, so the namespace no longer names a PO that is gone: a
/// later PlatformOperator may watch it. Before, every later watcher was refused for good
/// ("carries the owner label of PlatformOperator first"). Judged by the Namespace's labels and
/// the watcher's RoleBindings on the API server.
#[tokio::test]
async fn a_deleted_pos_namespace_keeps_no_owner_label_and_can_be_watched() {
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let first = TestBundle::new("first", "1.0.0");
    let mut watcher = TestBundle::new("watcher", "1.0.0");
    watcher.install_modes = vec!["SingleNamespace"];
    let fbc = catalog_json(&[first.clone(), watcher.clone()], &[]);
    configmap_catalog(&client, "local", &fbc, 0).await;
    create_po(
        &client,
        "first",
        json!({"package": {"name": "first"}, "installNamespace": "kept"}),
    )
    .await;
    let manager = Manager::start(client.clone(), Manager::test_settings(vec![]));
    wait_catalog_serves(&client, "local", &fbc).await;
    wait_po_condition(
        &client,
        "first",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let namespaces = Api::<Namespace>::all(client.clone());
    let owner = |ns: &Namespace| ns.labels().get(labels::OWNER_PO).cloned();
    assert_eq!(
        owner(&namespaces.get("kept").await.unwrap()).as_deref(),
        Some("first")
    );

    let pos = Api::<pom_api::PlatformOperator>::all(client.clone());
    pos.delete("first", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    pom_e2e::manager::eventually(
        std::time::Duration::from_secs(90),
        "PlatformOperator first deleted",
        || async { pos.get_opt("first").await.unwrap().is_none().then_some(()) },
    )
    .await;
    let kept = namespaces.get("kept").await.unwrap();
    assert!(
        kept.metadata.deletion_timestamp.is_none(),
        "the namespace is kept"
    );
    assert_eq!(owner(&kept), None, "owner label left: {:?}", kept.labels());
    assert_eq!(
        kept.labels().get(labels::PACKAGE),
        None,
        "{:?}",
        kept.labels()
    );

    create_po(
        &client,
        "watcher",
        json!({"package": {"name": "watcher"}, "watchNamespace": "kept"}),
    )
    .await;
    wait_po_condition(
        &client,
        "watcher",
        "Installed",
        "True",
        Some("InstallSucceeded"),
    )
    .await;
    let bindings = Api::<RoleBinding>::namespaced(client.clone(), "kept")
        .list(&ListParams::default())
        .await
        .unwrap()
        .items;
    assert!(
        bindings
            .iter()
            .any(|rb| rb.labels().get(labels::OWNER_PO).map(String::as_str) == Some("watcher")),
        "the watcher has its RoleBindings where it watches"
    );
    manager.stop().await;
}
