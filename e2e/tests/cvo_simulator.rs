#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The CVO simulator against a real API server, with plain ClusterOperators playing the payload
//! operators: minor updates wait for Upgradeable (of any ClusterOperator), patch updates do not;
//! completion waits for the payload's versions, Available=True and an explicit Degraded=False;
//! rollbacks stay within the z-stream.

use std::time::Duration;

use pom_api::openshift::{ClusterOperatorStatus, ClusterVersion, OperandVersion};
use pom_e2e::cvo::{Cvo, Progress, UpdateKind, condition, write_cluster_operator};
use pom_e2e::{ControlPlane, Workloads, binaries};

async fn plane() -> Option<ControlPlane> {
    binaries::require(binaries::CONTROL_PLANE)?;
    Some(ControlPlane::start(Workloads::None).await.unwrap())
}

/// A payload operator's status: `operator` at `version`, the given Available and Degraded
/// (`None` leaves the condition out).
fn payload_status(
    version: &str,
    available: Option<&str>,
    degraded: Option<&str>,
) -> ClusterOperatorStatus {
    let mut conditions = Vec::new();
    if let Some(s) = available {
        conditions.push(condition("Available", s, Some("AsExpected"), "available"));
    }
    if let Some(s) = degraded {
        conditions.push(condition("Degraded", s, Some("AsExpected"), "degraded?"));
    }
    ClusterOperatorStatus {
        conditions,
        versions: vec![OperandVersion {
            name: "operator".into(),
            version: version.into(),
        }],
        related_objects: Vec::new(),
    }
}

fn upgradeable(status: &str, reason: &str, message: &str) -> ClusterOperatorStatus {
    ClusterOperatorStatus {
        conditions: vec![condition("Upgradeable", status, Some(reason), message)],
        ..Default::default()
    }
}

fn cv_condition(cv: &ClusterVersion, type_: &str) -> (String, String, String) {
    let c = cv
        .status
        .as_ref()
        .unwrap()
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_}"));
    (
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    )
}

#[tokio::test]
async fn minor_updates_wait_for_upgradeable_and_completion_waits_for_the_payload() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let cvo = Cvo::install(client.clone(), "4.16.3", &["payload-a"])
        .await
        .unwrap();
    let cv = cvo.cluster_version().await.unwrap();
    let status = cv.status.clone().unwrap();
    assert_eq!(status.desired.version, "4.16.3");
    assert_eq!(status.history.len(), 1);
    assert_eq!(status.history[0].state, "Completed");
    assert_eq!(cv_condition(&cv, "Available").0, "True");
    assert_eq!(cv_condition(&cv, "Progressing").0, "False");
    assert_eq!(cv_condition(&cv, "Failing").0, "False");
    assert_eq!(
        cvo.try_complete().await.unwrap(),
        Progress::Steady("4.16.3".into())
    );

    // A ClusterOperator outside the payload still blocks minor updates (the CVO reads them all).
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "finish the migration first"),
    )
    .await
    .unwrap();
    let err = cvo.start_update("4.17.0").await.unwrap_err();
    assert_eq!(err.refusal_reason(), Some("MigrationPending"), "{err}");
    assert!(err.to_string().contains("Cluster operator outsider should not be upgraded between minor or major versions: finish the migration first"), "{err}");
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        cv.status.as_ref().unwrap().desired.version,
        "4.16.3",
        "a refused update changes nothing"
    );
    assert_eq!(cv.status.as_ref().unwrap().history.len(), 1);
    assert_eq!(cv_condition(&cv, "ReleaseAccepted").0, "False");
    assert_eq!(cv_condition(&cv, "ReleaseAccepted").1, "PreconditionChecks");
    assert_eq!(cv_condition(&cv, "Upgradeable").1, "MigrationPending");
    assert_eq!(
        cv.spec.desired_update.as_ref().unwrap().version.as_deref(),
        Some("4.17.0")
    );
    // Two blockers: the summary reason.
    write_cluster_operator(
        &client,
        "outsider-2",
        upgradeable("False", "Other", "another"),
    )
    .await
    .unwrap();
    let err = cvo.start_update("4.17.0").await.unwrap_err();
    assert_eq!(
        err.refusal_reason(),
        Some("ClusterOperatorsNotUpgradeable"),
        "{err}"
    );
    write_cluster_operator(
        &client,
        "outsider-2",
        upgradeable("True", "AsExpected", "fine"),
    )
    .await
    .unwrap();
    // More than one minor at once, whatever Upgradeable says.
    let err = cvo.start_update("4.18.0").await.unwrap_err();
    assert_eq!(
        err.refusal_reason(),
        Some("MultipleMinorVersionsUpdate"),
        "{err}"
    );

    // A patch update starts regardless of Upgradeable=False.
    assert_eq!(cvo.start_update("4.16.4").await.unwrap(), UpdateKind::Patch);
    let cv = cvo.cluster_version().await.unwrap();
    let status = cv.status.clone().unwrap();
    assert_eq!(status.desired.version, "4.16.4");
    assert_eq!(
        (
            status.history[0].state.as_str(),
            status.history[0].completion_time.is_none()
        ),
        ("Partial", true)
    );
    assert_eq!(status.history[1].version, "4.16.3");
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "True".into(),
            String::new(),
            "Working towards 4.16.4".into()
        )
    );
    assert_eq!(cv_condition(&cv, "ReleaseAccepted").0, "True");

    // Completion waits for the payload operator's version...
    let Progress::Waiting(waiting) = cvo.try_complete().await.unwrap() else {
        panic!("completed too early")
    };
    assert!(
        waiting[0].contains("payload-a is updating versions"),
        "{waiting:?}"
    );
    // ...then for an explicit Degraded=False (missing counts as degraded)...
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), None),
    )
    .await
    .unwrap();
    let Progress::Waiting(waiting) = cvo.try_complete().await.unwrap() else {
        panic!("a missing Degraded must count as degraded")
    };
    assert!(waiting[0].contains("degraded"), "{waiting:?}");
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        cv_condition(&cv, "Progressing").1,
        "ClusterOperatorDegraded"
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), Some("True")),
    )
    .await
    .unwrap();
    assert!(
        matches!(cvo.try_complete().await.unwrap(), Progress::Waiting(_)),
        "Degraded=True must hold the update"
    );
    // ...and Available=True; Progressing of the operator is never consulted.
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("False"), Some("False")),
    )
    .await
    .unwrap();
    let Progress::Waiting(waiting) = cvo.try_complete().await.unwrap() else {
        panic!("Available=False must hold the update")
    };
    assert!(waiting[0].contains("not available"), "{waiting:?}");
    let mut done = payload_status("4.16.4", Some("True"), Some("False"));
    done.conditions.push(condition(
        "Progressing",
        "True",
        Some("Moving"),
        "still moving",
    ));
    write_cluster_operator(&client, "payload-a", done)
        .await
        .unwrap();
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(10)).await.unwrap(),
        "4.16.4"
    );
    let cv = cvo.cluster_version().await.unwrap();
    let status = cv.status.clone().unwrap();
    assert_eq!(
        (
            status.history[0].state.as_str(),
            status.history[0].completion_time.is_some()
        ),
        ("Completed", true)
    );
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "False".into(),
            String::new(),
            "Cluster version is 4.16.4".into()
        )
    );
    assert_eq!(cvo.current_version().await.unwrap(), "4.16.4");

    // Once nothing says Upgradeable=False, the minor update starts; a timeout names the waits.
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("True", "AsExpected", "done"),
    )
    .await
    .unwrap();
    assert_eq!(cvo.start_update("4.17.0").await.unwrap(), UpdateKind::Minor);
    let err = cvo
        .wait_completed(Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("payload-a is updating versions"),
        "{err}"
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.17.0", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(10)).await.unwrap(),
        "4.17.0"
    );
    // A rollback never leaves the z-stream.
    let err = cvo.rollback("4.16.4").await.unwrap_err();
    assert_eq!(err.refusal_reason(), Some("LowDesiredVersion"), "{err}");
    assert_eq!(cvo.current_version().await.unwrap(), "4.17.0");
}

#[tokio::test]
async fn rollbacks_go_back_to_the_previous_z_stream_release_and_retargets_close_the_old_entry() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let cvo = Cvo::install(client.clone(), "4.16.3", &["payload-a"])
        .await
        .unwrap();
    // Retarget 4.16.4 → 4.16.5 while the first is in flight: the old entry closes, stays Partial.
    cvo.start_update("4.16.4").await.unwrap();
    cvo.start_update("4.16.5").await.unwrap();
    let history = cvo.cluster_version().await.unwrap().status.unwrap().history;
    let summary: Vec<(String, String, bool)> = history
        .iter()
        .map(|h| {
            (
                h.state.clone(),
                h.version.clone(),
                h.completion_time.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Partial".into(), "4.16.5".into(), false),
            ("Partial".into(), "4.16.4".into(), true),
            ("Completed".into(), "4.16.3".into(), true)
        ]
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.5", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    cvo.wait_completed(Duration::from_secs(10)).await.unwrap();

    // Only to the previous release, only downwards.
    let err = cvo.rollback("4.16.1").await.unwrap_err();
    assert_eq!(err.refusal_reason(), Some("LowDesiredVersion"), "{err}");
    let err = cvo.rollback("4.16.6").await.unwrap_err();
    assert_eq!(err.refusal_reason(), Some("LowDesiredVersion"), "{err}");
    let err = cvo.start_update("4.16.3").await.unwrap_err();
    assert_eq!(
        err.refusal_reason(),
        Some("LowDesiredVersion"),
        "start_update never rolls back: {err}"
    );
    cvo.rollback("4.16.3").await.unwrap();
    let status = cvo.cluster_version().await.unwrap().status.unwrap();
    assert_eq!(status.desired.version, "4.16.3");
    assert_eq!(
        (
            status.history[0].state.as_str(),
            status.history[0].version.as_str()
        ),
        ("Partial", "4.16.3")
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(10)).await.unwrap(),
        "4.16.3"
    );
    assert_eq!(cvo.current_version().await.unwrap(), "4.16.3");
}
