#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Our typed views of ClusterVersion, ClusterOperator and OperatorCondition write objects that
//! the upstream CRD schemas (from `shared/testdata/crds`, which the harness installs when
//! present) accept, and read back what they stored.

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use pom_api::olm::{OperatorCondition, OperatorConditionSpec};
use pom_api::openshift::{
    ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus, ClusterOperatorStatusCondition,
    ClusterVersion, ClusterVersionSpec, ClusterVersionStatus, ObjectReference, OperandVersion,
    Release, UpdateHistory,
};
use pom_e2e::shared_control_plane;

fn now() -> Time {
    Time(jiff_now())
}

/// The API server stores times with second precision.
fn jiff_now() -> k8s_openapi::jiff::Timestamp {
    k8s_openapi::jiff::Timestamp::from_second(k8s_openapi::jiff::Timestamp::now().as_second())
        .unwrap()
}

#[tokio::test]
async fn upstream_schemas_are_installed_when_present() {
    let Some(plane) = shared_control_plane().await else {
        return;
    };
    if pom_e2e::shared_testdata().is_none() {
        eprintln!(
            "skipped: ../shared/testdata not present (the harness installed our generated CRDs instead)"
        );
        return;
    }
    let client = plane.client().await.unwrap();
    let crds: Api<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition> =
        Api::all(client);
    let co = crds
        .get("clusteroperators.config.openshift.io")
        .await
        .unwrap();
    // Our generated CRD has no description on the root schema; the upstream one does.
    let root = co.spec.versions[0]
        .schema
        .as_ref()
        .unwrap()
        .open_api_v3_schema
        .as_ref()
        .unwrap();
    assert!(
        root.description
            .as_deref()
            .unwrap_or_default()
            .contains("ClusterOperator"),
        "upstream CRD expected"
    );
}

#[tokio::test]
async fn cluster_version_round_trips() {
    let Some(plane) = shared_control_plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let api: Api<ClusterVersion> = Api::all(client);
    let mut cv = ClusterVersion::new(
        "version",
        ClusterVersionSpec {
            cluster_id: "5d0c3b9e-0000-4000-8000-000000000001".into(),
            ..Default::default()
        },
    );
    cv.metadata.name = Some("version".into());
    api.create(&PostParams::default(), &cv).await.unwrap();
    let status = ClusterVersionStatus {
        desired: Release {
            version: "4.16.3".into(),
            image: "quay.io/openshift-release-dev/ocp-release@sha256:00".into(),
        },
        history: vec![UpdateHistory {
            state: "Completed".into(),
            started_time: now(),
            completion_time: Some(now()),
            version: "4.16.3".into(),
            image: "quay.io/openshift-release-dev/ocp-release@sha256:00".into(),
            verified: false,
        }],
        observed_generation: 1,
        version_hash: "abc".into(),
        ..Default::default()
    };
    let patch = serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterVersion", "status": status});
    api.patch_status(
        "version",
        &PatchParams::apply("pom-e2e").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
    let back = api.get("version").await.unwrap();
    assert_eq!(back.status.unwrap().history[0].version, "4.16.3");
}

#[tokio::test]
async fn cluster_operator_round_trips() {
    let Some(plane) = shared_control_plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let api: Api<ClusterOperator> = Api::all(client);
    let co = ClusterOperator::new("views-test", ClusterOperatorSpec {});
    api.create(&PostParams::default(), &co).await.unwrap();
    let status = ClusterOperatorStatus {
        conditions: vec![ClusterOperatorStatusCondition {
            type_: "Upgradeable".into(),
            status: "False".into(),
            last_transition_time: now(),
            reason: Some("IncompatibleOperatorsInstalled".into()),
            message: Some("a: move to 1.2.0".into()),
        }],
        versions: vec![OperandVersion {
            name: "operator".into(),
            version: "0.1.0".into(),
        }],
        related_objects: vec![ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: "openshift-platform-operators".into(),
        }],
    };
    let patch = serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "status": status});
    api.patch_status(
        "views-test",
        &PatchParams::apply("pom-e2e").force(),
        &Patch::Apply(&patch),
    )
    .await
    .unwrap();
    let back = api.get("views-test").await.unwrap().status.unwrap();
    assert_eq!(back, status);
}

#[tokio::test]
async fn operator_condition_round_trips() {
    let Some(plane) = shared_control_plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let namespaces: Api<Namespace> = Api::all(client.clone());
    let ns = Namespace {
        metadata: ObjectMeta {
            name: Some("views-oc".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    namespaces
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let api: Api<OperatorCondition> = Api::namespaced(client, "views-oc");
    let oc = OperatorCondition::new(
        "op.v1.0.0",
        OperatorConditionSpec {
            deployments: vec!["op".into()],
            service_accounts: vec!["op".into()],
            conditions: vec![Condition {
                type_: "Upgradeable".into(),
                status: "False".into(),
                reason: "Migrating".into(),
                message: "database migration running".into(),
                last_transition_time: now(),
                observed_generation: None,
            }],
            ..Default::default()
        },
    );
    let created = api.create(&PostParams::default(), &oc).await.unwrap();
    assert_eq!(created.spec.conditions[0].reason, "Migrating");
    assert!(created.metadata.generation.is_some());
}

/// POM's Events (`pom_controller::events`): a repeat is a `series` patch on the Event already
/// sent, which the API server's validation of `events.k8s.io/v1` accepts; another reason is
/// another Event; an Event deleted meanwhile is created again rather than lost.
#[tokio::test]
async fn events_count_repeats_as_a_series_the_api_server_accepts() {
    use k8s_openapi::api::core::v1::ObjectReference as CoreReference;
    use k8s_openapi::api::events::v1::Event as K8sEvent;
    use kube::api::{DeleteParams, ListParams};
    use pom_controller::events::{Event, EventPublisher, EventType, Reporter};

    let Some(plane) = shared_control_plane().await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let publisher = EventPublisher::new(
        client.clone(),
        Reporter {
            controller: "platform-operators-manager".into(),
            instance: "views-test".into(),
        },
    );
    let regarding = CoreReference {
        api_version: Some("platform.openshift.io/v1alpha1".into()),
        kind: Some("PlatformOperator".into()),
        name: Some("views-events".into()),
        uid: Some("6f1c5a8e-0000-4000-8000-000000000001".into()),
        ..Default::default()
    };
    let event = |reason: &str, note: &str| Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note.into()),
        action: "Installed".into(),
        secondary: None,
    };
    let events: Api<K8sEvent> = Api::namespaced(client, "default");
    let ours = || async {
        let mut list = events
            .list(&ListParams::default().fields("regarding.name=views-events"))
            .await
            .unwrap()
            .items;
        list.sort_by_key(|e| e.metadata.creation_timestamp.clone().map(|t| t.0));
        list
    };
    for attempt in 1..=3 {
        publisher
            .publish(
                &event("UnpackFailed", &format!("attempt {attempt}")),
                &regarding,
            )
            .await
            .unwrap();
    }
    let list = ours().await;
    assert_eq!(list.len(), 1, "{list:#?}");
    let series = list[0].series.as_ref().expect("a series after repeats");
    assert_eq!(series.count, 3);
    assert_eq!(list[0].reason.as_deref(), Some("UnpackFailed"));
    assert_eq!(list[0].note.as_deref(), Some("attempt 1"));
    assert_eq!(
        list[0].reporting_controller.as_deref(),
        Some("platform-operators-manager")
    );
    assert_eq!(list[0].reporting_instance.as_deref(), Some("views-test"));
    assert_eq!(list[0].type_.as_deref(), Some("Warning"));

    publisher
        .publish(&event("ResolutionFailed", "no bundle"), &regarding)
        .await
        .unwrap();
    assert_eq!(ours().await.len(), 2);

    // The series' Event is deleted (as the API server's event TTL does): the next repeat
    // creates a new one.
    let first = list[0].metadata.name.clone().unwrap();
    events
        .delete(&first, &DeleteParams::default())
        .await
        .unwrap();
    publisher
        .publish(&event("UnpackFailed", "attempt 4"), &regarding)
        .await
        .unwrap();
    let list = ours().await;
    assert_eq!(list.len(), 2, "{list:#?}");
    let recreated = list
        .iter()
        .find(|e| e.reason.as_deref() == Some("UnpackFailed"))
        .unwrap();
    assert_ne!(recreated.metadata.name.as_deref(), Some(first.as_str()));
    assert_eq!(recreated.note.as_deref(), Some("attempt 4"));
    assert!(recreated.series.is_none());
}
