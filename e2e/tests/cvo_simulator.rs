#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The CVO simulator against a real API server, with plain ClusterOperators playing the payload
//! operators (the rules are listed in `pom_e2e::cvo`'s module docs):
//!
//! - the historical API: minor updates wait for Upgradeable (of any ClusterOperator), patch
//!   updates do not; completion waits for the payload's versions, Available=True and an
//!   explicit Degraded=False; rollbacks go to the previous history entry, within the z-stream;
//! - a refused request stays pending and every sync retries it; once accepted it is never
//!   re-checked; an update in progress refuses minor requests; `force` lets a refusal through;
//! - the released CVO's cached Upgradeable: a flip to False just before a request is missed,
//!   and a refusal is re-checked sooner;
//! - completion in the CVO's order (Available, Degraded, versions) and the Failing condition
//!   during an update (after the grace) and in steady state.

use std::time::{Duration, Instant};

use pom_api::openshift::{ClusterOperatorStatus, ClusterVersion, OperandVersion};
use pom_e2e::cvo::{
    Admission, Cvo, CvoTiming, Progress, ReasonFormat, UPDATE_IN_PROGRESS_MESSAGE, UpdateKind,
    condition, write_cluster_operator,
};
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
    // "Previous" is the first history entry whose version differs from status.desired,
    // whatever its state: 4.16.4, which never completed, not 4.16.3.
    let err = cvo.rollback("4.16.3").await.unwrap_err();
    assert_eq!(err.refusal_reason(), Some("LowDesiredVersion"), "{err}");
    assert!(
        err.to_string()
            .contains("the only supported rollback is to the cluster's previous version 4.16.4"),
        "{err}"
    );
    cvo.rollback("4.16.4").await.unwrap();
    let status = cvo.cluster_version().await.unwrap().status.unwrap();
    assert_eq!(status.desired.version, "4.16.4");
    assert_eq!(
        (
            status.history[0].state.as_str(),
            status.history[0].version.as_str()
        ),
        ("Partial", "4.16.4")
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(10)).await.unwrap(),
        "4.16.4"
    );
    assert_eq!(cvo.current_version().await.unwrap(), "4.16.4");

    // An in-flight patch update can be rolled back (its previous entry is the completed
    // release it started from).
    cvo.start_update("4.16.5").await.unwrap();
    assert!(matches!(
        cvo.try_complete().await.unwrap(),
        Progress::Waiting(_)
    ));
    cvo.rollback("4.16.4").await.unwrap();
    let history = cvo.cluster_version().await.unwrap().status.unwrap().history;
    let summary: Vec<(&str, &str, bool)> = history
        .iter()
        .take(3)
        .map(|h| {
            (
                h.state.as_str(),
                h.version.as_str(),
                h.completion_time.is_some(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        vec![
            ("Partial", "4.16.4", false),
            ("Partial", "4.16.5", true),
            ("Completed", "4.16.4", true)
        ]
    );
    assert_eq!(
        cvo.wait_completed(Duration::from_secs(10)).await.unwrap(),
        "4.16.4"
    );
}

fn desired(cv: &ClusterVersion) -> String {
    cv.status.as_ref().unwrap().desired.version.clone()
}

fn head(cv: &ClusterVersion) -> (String, String, bool) {
    let h = &cv.status.as_ref().unwrap().history[0];
    (
        h.state.clone(),
        h.version.clone(),
        h.completion_time.is_some(),
    )
}

fn requested(cv: &ClusterVersion) -> Option<String> {
    cv.spec.desired_update.as_ref()?.version.clone()
}

/// Newer CVOs: Upgradeable recomputed at every sync, risk names as reasons.
#[tokio::test]
async fn refused_requests_stay_pending_until_a_sync_admits_them_and_are_never_rechecked() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let cvo = Cvo::install_with(client.clone(), "4.16.3", &["payload-a"], CvoTiming::newer())
        .await
        .unwrap();
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "finish the migration first"),
    )
    .await
    .unwrap();

    // Refused: ReleaseAccepted=False, the request stays in spec.desiredUpdate. Newer CVOs word
    // the reason after the risk name, which a ClusterOperator blocker cannot be; the
    // ClusterOperator's message is kept verbatim.
    let Admission::Pending { reason, message } = cvo.request_update("4.17.0", false).await.unwrap()
    else {
        panic!("a minor update must be refused while outsider says Upgradeable=False")
    };
    assert_eq!(reason, "RiskNameNotCompatibleWithReasonProperty");
    assert_eq!(
        message,
        "Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": finish the migration first"
    );
    let cv = cvo.cluster_version().await.unwrap();
    let generation = cv.metadata.generation;
    assert_eq!(requested(&cv).as_deref(), Some("4.17.0"));
    assert_eq!(desired(&cv), "4.16.3");
    let (status, reason, text) = cv_condition(&cv, "ReleaseAccepted");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "PreconditionChecks")
    );
    assert!(
        text.starts_with("Preconditions failed for payload loaded version=\"4.17.0\" image=\"quay.io/openshift-release-dev/ocp-release@sha256:"),
        "{text}"
    );
    assert!(text.ends_with(&message), "{text}");
    assert_eq!(
        cv_condition(&cv, "Upgradeable"),
        (
            "False".into(),
            "RiskNameNotCompatibleWithReasonProperty".into(),
            "finish the migration first".into()
        )
    );
    // Every sync retries it while the block holds.
    for _ in 0..3 {
        let synced = cvo.sync().await.unwrap();
        assert!(
            matches!(synced.request, Some(Admission::Pending { .. })),
            "{synced:?}"
        );
        assert_eq!(synced.progress, Progress::Steady("4.16.3".into()));
    }

    // The block lifts: the next sync starts the update, with no new request.
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("True", "AsExpected", "done"),
    )
    .await
    .unwrap();
    let synced = cvo.sync().await.unwrap();
    assert_eq!(
        synced.request,
        Some(Admission::Accepted {
            kind: UpdateKind::Minor,
            accepted_risks: None
        })
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        cv.metadata.generation, generation,
        "the admin wrote nothing since the refusal"
    );
    assert_eq!(desired(&cv), "4.17.0");
    assert_eq!(head(&cv), ("Partial".into(), "4.17.0".into(), false));
    assert_eq!(cv_condition(&cv, "ReleaseAccepted").0, "True");

    // Once accepted, never re-checked: the block comes back, the update goes on. The cluster
    // is now not upgradeable for two reasons (the update in progress is one).
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "a second migration"),
    )
    .await
    .unwrap();
    let synced = cvo.sync().await.unwrap();
    assert_eq!(synced.request, None);
    assert_eq!(
        synced.progress,
        Progress::Waiting(vec![
            "Cluster operator payload-a is updating versions".into()
        ])
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(head(&cv), ("Partial".into(), "4.17.0".into(), false));
    let (status, reason, text) = cv_condition(&cv, "Upgradeable");
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("False", "MultipleReasons")
    );
    assert_eq!(
        text,
        format!(
            "Cluster should not be upgraded between minor or major versions for multiple reasons:\n* a second migration\n* {UPDATE_IN_PROGRESS_MESSAGE}."
        )
    );
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorUpdating".into(),
            "Working towards 4.17.0: waiting on payload-a".into()
        )
    );

    // During the minor update, a patch retarget passes with a warning, recorded as accepted.
    let Admission::Accepted {
        kind,
        accepted_risks,
    } = cvo.request_update("4.17.1", false).await.unwrap()
    else {
        panic!("a patch retarget is not blocked by Upgradeable")
    };
    assert_eq!(kind, UpdateKind::Patch);
    let warning = "Precondition \"ClusterVersionUpgradeable\" failed because of \"MinorVersionClusterUpgradeInProgress\": Retarget to 4.17.1 while a minor level upgrade from 4.16.3 to 4.17.1 is in progress";
    assert_eq!(accepted_risks.as_deref(), Some(warning));
    assert_eq!(
        cvo.accepted_risks().await.unwrap().as_deref(),
        Some(warning)
    );
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.17.1", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.sync().await.unwrap().progress,
        Progress::Completed("4.17.1".into())
    );
    assert_eq!(
        cvo.accepted_risks().await.unwrap().as_deref(),
        Some(warning),
        "acceptedRisks survives later status writes"
    );

    // `force` lets blocking failures through (here two: a giant hop and Upgradeable=False).
    let Admission::Accepted {
        kind,
        accepted_risks,
    } = cvo.request_update("4.19.0", true).await.unwrap()
    else {
        panic!("force must let the update in")
    };
    assert_eq!(kind, UpdateKind::Minor);
    let risks = accepted_risks.unwrap();
    assert!(
        risks.starts_with("Forced through blocking failures: Multiple precondition checks failed:\n* Precondition \"ClusterVersionGiantHop\" failed because of \"MultipleMinorVersionsUpdate\""),
        "{risks}"
    );
    assert!(
        risks.ends_with("* Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": a second migration"),
        "{risks}"
    );
    assert_eq!(cvo.accepted_risks().await.unwrap(), Some(risks));
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(head(&cv), ("Partial".into(), "4.19.0".into(), false));
    assert_eq!(cv_condition(&cv, "ReleaseAccepted").0, "True");
}

/// An update in progress makes the cluster not upgradeable: a minor request during a patch
/// update is refused, and starts by itself once the patch completed.
#[tokio::test]
async fn a_minor_request_during_a_patch_update_is_refused_then_starts_after_it() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let timing = CvoTiming::released();
    let cvo = Cvo::install_with(
        client.clone(),
        "4.16.3",
        &["payload-a"],
        CvoTiming {
            upgradeable_cache: Duration::ZERO,
            after_refusal_recheck: Duration::ZERO,
            ..timing
        },
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.request_update("4.16.4", false).await.unwrap(),
        Admission::Accepted {
            kind: UpdateKind::Patch,
            accepted_risks: None
        }
    );
    let Admission::Pending { reason, message } = cvo.request_update("4.17.0", false).await.unwrap()
    else {
        panic!("a minor request during a patch update must be refused")
    };
    assert_eq!(reason, "UpdateInProgress");
    assert_eq!(
        message,
        format!(
            "Precondition \"ClusterVersionUpgradeable\" failed because of \"UpdateInProgress\": {UPDATE_IN_PROGRESS_MESSAGE}"
        )
    );
    // The patch update goes on (the accepted payload keeps being applied), and completes.
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(desired(&cv), "4.16.4");
    assert_eq!(requested(&cv).as_deref(), Some("4.17.0"));
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let synced = cvo.sync().await.unwrap();
    assert_eq!(synced.progress, Progress::Completed("4.16.4".into()));
    assert!(matches!(synced.request, Some(Admission::Pending { .. })));
    // The next sync sees no update in progress, and starts the pending minor update.
    let synced = cvo.sync().await.unwrap();
    assert_eq!(
        synced.request,
        Some(Admission::Accepted {
            kind: UpdateKind::Minor,
            accepted_risks: None
        })
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(head(&cv), ("Partial".into(), "4.17.0".into(), false));
    assert_eq!(
        cv.status.unwrap().history[1].state,
        "Completed",
        "the patch update completed first"
    );
}

/// Released CVOs reuse a computed Upgradeable for 2 minutes (15 s for 2 minutes after a
/// refusal): here 60 s, 3 s within 60 s.
#[tokio::test]
async fn a_released_cvo_misses_a_flip_within_its_cache_and_rechecks_sooner_after_a_refusal() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let timing = CvoTiming {
        upgradeable_cache: Duration::from_secs(60),
        after_refusal_recheck: Duration::from_secs(3),
        after_refusal_window: Duration::from_secs(60),
        ..CvoTiming::released()
    };
    assert_eq!(timing.reasons, ReasonFormat::Released);
    let cvo = Cvo::install_with(client.clone(), "4.16.3", &["payload-a"], timing)
        .await
        .unwrap();
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "finish the migration first"),
    )
    .await
    .unwrap();
    // Upgradeable computed now (not upgradeable), then reused.
    let computed = Instant::now();
    cvo.sync().await.unwrap();
    let Admission::Pending { reason, .. } = cvo.request_update("4.17.0", false).await.unwrap()
    else {
        panic!("refused")
    };
    assert_eq!(
        reason, "MigrationPending",
        "released CVOs keep a sole blocker's reason"
    );

    // The block lifts: the cached "not upgradeable" holds for the short recheck interval, then
    // a sync admits the request.
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("True", "AsExpected", "done"),
    )
    .await
    .unwrap();
    let before = computed.elapsed();
    let synced = cvo.sync().await.unwrap();
    if before < Duration::from_secs(2) {
        assert!(
            matches!(synced.request, Some(Admission::Pending { .. })),
            "within the recheck interval the cached refusal holds: {synced:?}"
        );
    }
    let accepted = loop {
        let synced = cvo.sync().await.unwrap();
        if let Some(Admission::Accepted { kind, .. }) = synced.request {
            break kind;
        }
        assert!(
            computed.elapsed() < Duration::from_secs(30),
            "the request was not re-checked sooner than the 60 s cache"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(accepted, UpdateKind::Minor);
    assert!(computed.elapsed() >= Duration::from_secs(3));

    // The cache computed then says "upgradeable": a ClusterOperator turning False, and the
    // update in progress, are both missed until it expires.
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "a new migration"),
    )
    .await
    .unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.17.0", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(
        cvo.sync().await.unwrap().progress,
        Progress::Completed("4.17.0".into())
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert!(
        cv.status
            .as_ref()
            .unwrap()
            .conditions
            .iter()
            .all(|c| c.type_ != "Upgradeable"),
        "the cached Upgradeable is still the one computed before outsider turned False"
    );
    assert_eq!(
        cvo.request_update("4.18.0", false).await.unwrap(),
        Admission::Accepted {
            kind: UpdateKind::Minor,
            accepted_risks: None
        },
        "a stale cache lets the minor update in although outsider says Upgradeable=False"
    );
}

/// Completion and Failing as the CVO reports them (short grace periods stand for its 40 and
/// 30 minutes).
#[tokio::test]
async fn the_cvo_checks_available_then_degraded_then_versions_and_reports_failing() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    let grace = Duration::from_secs(3);
    let cvo = Cvo::install_with(
        client.clone(),
        "4.16.3",
        &["payload-a"],
        CvoTiming {
            degraded_grace: grace,
            slow_update: Duration::from_secs(4),
            ..CvoTiming::newer()
        },
    )
    .await
    .unwrap();
    let failing = |cv: &ClusterVersion| cv_condition(cv, "Failing");
    cvo.request_update("4.16.4", false).await.unwrap();
    let started = Instant::now();
    cvo.sync().await.unwrap();
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorUpdating".into(),
            "Working towards 4.16.4: waiting on payload-a".into()
        )
    );
    assert_eq!(failing(&cv).0, "False");

    // Degraded (here: no Degraded condition at all) at the old version: the CVO reports it
    // degraded, not updating; progress for the grace period.
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.3", Some("True"), None),
    )
    .await
    .unwrap();
    let synced = cvo.sync().await.unwrap();
    assert_eq!(
        synced.progress,
        Progress::Waiting(vec!["Cluster operator payload-a is degraded".into()])
    );
    assert_eq!(synced.failing, None);
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Working towards 4.16.4: waiting up to 40 minutes on payload-a".into()
        )
    );
    assert_eq!(failing(&cv).0, "False");
    // The historical pass reads the same operator as "updating versions".
    let Progress::Waiting(lines) = cvo.try_complete().await.unwrap() else {
        panic!("not complete")
    };
    assert!(lines[0].contains("is updating versions"), "{lines:?}");
    // After the grace, counted from when the operator started updating: Failing=True.
    tokio::time::sleep((grace + Duration::from_millis(500)).saturating_sub(started.elapsed()))
        .await;
    let synced = cvo.sync().await.unwrap();
    assert_eq!(
        synced.failing,
        Some((
            "ClusterOperatorDegraded".into(),
            "Cluster operator payload-a is degraded".into()
        ))
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        failing(&cv),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Cluster operator payload-a is degraded".into()
        )
    );
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Unable to apply 4.16.4: wait has exceeded 40 minutes for these operators: payload-a"
                .into()
        )
    );
    assert_eq!(head(&cv), ("Partial".into(), "4.16.4".into(), false));
    // Not available: failing at once, checked before Degraded.
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("False"), Some("True")),
    )
    .await
    .unwrap();
    cvo.sync().await.unwrap();
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        failing(&cv),
        (
            "True".into(),
            "ClusterOperatorNotAvailable".into(),
            "Cluster operator payload-a is not available".into()
        )
    );
    assert_eq!(
        cv_condition(&cv, "Progressing").2,
        "Unable to apply 4.16.4: the cluster operator payload-a is not available"
    );
    // Done (Progressing=True on the operator is not read): completed, Failing=False.
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
        cvo.sync().await.unwrap().progress,
        Progress::Completed("4.16.4".into())
    );
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(failing(&cv).0, "False");
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "False".into(),
            String::new(),
            "Cluster version is 4.16.4".into()
        )
    );

    // Steady state: the CVO keeps checking the payload operators.
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), Some("True")),
    )
    .await
    .unwrap();
    let synced = cvo.sync().await.unwrap();
    assert_eq!(synced.progress, Progress::Steady("4.16.4".into()));
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(
        failing(&cv),
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            "Cluster operator payload-a is degraded".into()
        )
    );
    assert_eq!(
        cv_condition(&cv, "Progressing"),
        (
            "False".into(),
            "ClusterOperatorDegraded".into(),
            "Error while reconciling 4.16.4: the cluster operator payload-a is degraded".into()
        )
    );
    assert_eq!(head(&cv), ("Completed".into(), "4.16.4".into(), true));
    // An operator outside the payload changes nothing.
    write_cluster_operator(
        &client,
        "outsider",
        payload_status("1.0.0", Some("False"), Some("True")),
    )
    .await
    .unwrap();
    write_cluster_operator(
        &client,
        "payload-a",
        payload_status("4.16.4", Some("True"), Some("False")),
    )
    .await
    .unwrap();
    assert_eq!(cvo.sync().await.unwrap().failing, None);
    let cv = cvo.cluster_version().await.unwrap();
    assert_eq!(failing(&cv).0, "False");
    assert_eq!(
        cv_condition(&cv, "Progressing").2,
        "Cluster version is 4.16.4"
    );

    // Updating versions for longer than expected: Failing=Unknown, SlowClusterOperator.
    cvo.request_update("4.16.5", false).await.unwrap();
    let started = Instant::now();
    cvo.sync().await.unwrap();
    tokio::time::sleep(Duration::from_millis(4500).saturating_sub(started.elapsed())).await;
    cvo.sync().await.unwrap();
    let cv = cvo.cluster_version().await.unwrap();
    let slow = "waiting on payload-a over 30 minutes which is longer than expected";
    assert_eq!(
        failing(&cv),
        ("Unknown".into(), "SlowClusterOperator".into(), slow.into())
    );
    assert_eq!(
        cv_condition(&cv, "Progressing").2,
        format!("Working towards 4.16.5: {slow}")
    );
}

/// A sync loop does what repeated syncs do: a refused request starts once the block lifts.
#[tokio::test]
async fn a_sync_loop_admits_a_pending_request_once_the_block_lifts() {
    let Some(plane) = plane().await else { return };
    let client = plane.client().await.unwrap();
    let cvo = Cvo::install_with(client.clone(), "4.16.3", &[], CvoTiming::newer())
        .await
        .unwrap();
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("False", "MigrationPending", "finish the migration first"),
    )
    .await
    .unwrap();
    assert!(matches!(
        cvo.request_update("4.17.0", false).await.unwrap(),
        Admission::Pending { .. }
    ));
    let sync_loop = cvo.spawn_sync_loop(Duration::from_millis(200));
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(desired(&cvo.cluster_version().await.unwrap()), "4.16.3");
    write_cluster_operator(
        &client,
        "outsider",
        upgradeable("True", "AsExpected", "done"),
    )
    .await
    .unwrap();
    let started = Instant::now();
    loop {
        let cv = cvo.cluster_version().await.unwrap();
        if head(&cv).0 == "Completed" && desired(&cv) == "4.17.0" {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the loop did not start and complete the pending update: {:?}",
            cv.status
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(sync_loop.syncs() >= 5, "{}", sync_loop.syncs());
    assert_eq!(sync_loop.stop().await, Vec::<String>::new());
}
