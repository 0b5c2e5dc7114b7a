#![allow(clippy::unwrap_used, clippy::expect_used)]
//! POM against the CVO as it really behaves (issue 12; the rules are listed in `pom_e2e::cvo`'s
//! module docs): a cached Upgradeable, refused requests retried on every sync, an update never
//! re-checked once accepted, `force`, the update-in-progress block, rollbacks of an in-flight
//! update, and Failing as the CVO reports it. The simulated CVO runs its own sync loop; the
//! manager runs in-process, restarted with the target's `release_version` to play the CVO's
//! rollout of the new payload.
//!
//! - a refused minor request stays pending and starts by itself once POM lifts the block;
//! - a minor update in flight while POM says Upgradeable=False (admitted by a stale cache, or
//!   by force): POM stays truthful, withholds `versions[operator]`, and the update does not
//!   complete until every PO reached its pin;
//! - a minor request during an in-flight patch update is refused (the update in progress), and
//!   starts once the patch completed;
//! - rolling back an in-flight patch update gives POM Rollback pins;
//! - a PO failing mid-update (its next bundle's image is missing) shows on the ClusterVersion
//!   as the CVO reports it: progress for the grace period, then Failing=True; once the image
//!   is published the update completes and Failing clears.

use std::time::{Duration, Instant};

use kube::Client;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::olm::OperatorCondition;
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, CLUSTER_VERSION_NAME, ClusterOperator, ClusterOperatorStatus,
    ClusterVersion, OperandVersion,
};
use pom_controller::context::Settings;
use pom_e2e::Registry;
use pom_e2e::cvo::{
    Admission, Cvo, CvoTiming, SyncLoop, UPDATE_IN_PROGRESS_MESSAGE, UpdateKind, condition,
    write_cluster_operator,
};
use pom_e2e::fixtures::{TestBundle, catalog_json};
use pom_e2e::manager::{Manager, eventually};
use pom_e2e::oci_publish::push_files;
use pom_e2e::quiet::QuietWindow;
use pom_e2e::scenario::{
    WAIT, co_condition, configmap_catalog, create_po, now, simulated_plane, wait_catalog_serves,
    wait_po_condition,
};
use pom_e2e::watch_log::WatchLog;
use serde_json::json;

const FROM: &str = "4.16.3";
const PATCH: &str = "4.16.4";
const TO: &str = "4.17.0";
/// How often the simulated CVO syncs.
const SYNC_EVERY: Duration = Duration::from_millis(500);

/// The manager built from release `release`: a 5 s PlatformOperator resync (catalog poll 5 s
/// too), so that the quiet windows, which must outlast every resync, stay short.
fn settings(release: &str) -> Settings {
    Settings {
        resync_interval: Duration::from_secs(5),
        release_version: release.to_owned(),
        ..Manager::test_settings(vec![])
    }
}

/// A released CVO with short intervals: Upgradeable reused for 3 s (1 s for 10 s after a
/// refusal), a degraded payload operator tolerated for 25 s.
fn released_short() -> CvoTiming {
    CvoTiming {
        upgradeable_cache: Duration::from_secs(3),
        after_refusal_recheck: Duration::from_secs(1),
        after_refusal_window: Duration::from_secs(10),
        degraded_grace: Duration::from_secs(25),
        ..CvoTiming::released()
    }
}

/// The CVO rolls out the new payload: the manager restarts with `release_version` = `release`.
async fn roll_out(old: Manager, client: &Client, release: &str) -> Manager {
    old.stop().await;
    Manager::start(client.clone(), settings(release))
}

/// Publishes `bundles` as ConfigMap catalog `scenarios` and waits until the manager serves it.
async fn publish_served(client: &Client, bundles: &[TestBundle]) {
    let fbc = catalog_json(bundles, &[]);
    configmap_catalog(client, "scenarios", &fbc, 0).await;
    wait_catalog_serves(client, "scenarios", &fbc).await;
}

/// Publishes `bundles` without waiting (before the manager runs).
async fn publish(client: &Client, bundles: &[TestBundle]) {
    configmap_catalog(client, "scenarios", &catalog_json(bundles, &[]), 0).await;
}

fn pos(client: &Client) -> Api<PlatformOperator> {
    Api::all(client.clone())
}

fn cvs(client: &Client) -> Api<ClusterVersion> {
    Api::all(client.clone())
}

/// (installed version, pin range, pin reason, settled with nothing pending).
fn standing(po: &PlatformOperator) -> Option<(String, String, String, bool)> {
    let status = po.status.as_ref()?;
    let pin = status.pin.as_ref()?;
    Some((
        status.installed_bundle.as_ref()?.version.clone(),
        pin.range.clone(),
        pin.reason.to_string(),
        status.active_hop.as_ref()?.settled
            && status.desired_bundle.is_none()
            && status.observed_generation == po.metadata.generation,
    ))
}

/// Waits until PO `name` runs `version`, settled, nothing pending, under a pin of `reason`;
/// returns the pin's range. A timeout shows the PO's status.
async fn wait_at(client: &Client, name: &str, version: &str, reason: &str) -> String {
    let started = Instant::now();
    loop {
        let po = pos(client).get(name).await.ok();
        if let Some((v, range, r, settled)) = po.as_ref().and_then(standing)
            && v == version
            && r == reason
            && settled
        {
            return range;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for {name} settled at {version} with pin reason \
             {reason}; its status: {}",
            serde_json::to_string_pretty(&po.and_then(|p| p.status)).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Condition `type_` of the ClusterVersion as (status, reason, message).
fn cv_condition(cv: &ClusterVersion, type_: &str) -> Option<(String, String, String)> {
    let c = cv
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)?;
    Some((
        c.status.clone(),
        c.reason.clone().unwrap_or_default(),
        c.message.clone().unwrap_or_default(),
    ))
}

/// (state, version, closed) of each history entry, newest first.
fn history(cv: &ClusterVersion) -> Vec<(String, String, bool)> {
    cv.status
        .iter()
        .flat_map(|s| s.history.iter())
        .map(|h| {
            (
                h.state.clone(),
                h.version.clone(),
                h.completion_time.is_some(),
            )
        })
        .collect()
}

fn entry(state: &str, version: &str, closed: bool) -> (String, String, bool) {
    (state.to_owned(), version.to_owned(), closed)
}

/// Waits until `check` accepts the ClusterVersion; a timeout shows its status.
async fn wait_cv<T>(
    client: &Client,
    what: &str,
    check: impl Fn(&ClusterVersion) -> Option<T>,
) -> T {
    let started = Instant::now();
    loop {
        let cv = cvs(client).get(CLUSTER_VERSION_NAME).await.unwrap();
        if let Some(found) = check(&cv) {
            return found;
        }
        assert!(
            started.elapsed() < WAIT,
            "timed out after {WAIT:?} waiting for the ClusterVersion: {what}; its status: {}",
            serde_json::to_string_pretty(&cv.status).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Waits until the update to `version` completed (history[0] Completed).
async fn wait_completed(client: &Client, version: &str) {
    wait_cv(
        client,
        &format!("the update to {version} Completed"),
        |cv| {
            history(cv)
                .first()
                .filter(|h| **h == entry("Completed", version, true))
                .map(|_| ())
        },
    )
    .await;
}

/// `versions[operator]` of the aggregated ClusterOperator.
fn operator_version(co: &ClusterOperator) -> Option<String> {
    co.status
        .as_ref()?
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.clone())
}

async fn co_version(client: &Client) -> Option<String> {
    let co = Api::<ClusterOperator>::all(client.clone())
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .ok()??;
    operator_version(&co)
}

/// Waits until the aggregated ClusterOperator's `Upgradeable` has `status`; returns (reason,
/// message).
async fn wait_co_upgradeable(client: &Client, status: &str, contains: &str) -> (String, String) {
    eventually(
        WAIT,
        &format!("the ClusterOperator Upgradeable={status} saying {contains:?}"),
        || async {
            co_condition(client, "Upgradeable")
                .await
                .filter(|c| c.0 == status && c.2.contains(contains))
                .map(|c| (c.1, c.2))
        },
    )
    .await
}

/// Plays the operator: `spec.conditions` of its OperatorCondition becomes one `Upgradeable`.
async fn report(client: &Client, namespace: &str, csv: &str, upgradeable: bool, message: &str) {
    let api: Api<OperatorCondition> = Api::namespaced(client.clone(), namespace);
    eventually(
        WAIT,
        &format!("OperatorCondition {namespace}/{csv} to exist"),
        || async { api.get_opt(csv).await.ok()? },
    )
    .await;
    let condition = json!({
        "type": "Upgradeable",
        "status": if upgradeable { "True" } else { "False" },
        "reason": if upgradeable { "Ready" } else { "Migrating" },
        "message": message,
        "lastTransitionTime": now(),
    });
    api.patch(
        csv,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"conditions": [condition]}})),
    )
    .await
    .unwrap();
}

/// Stops the CVO's loop; it must have met no error.
async fn stop(sync_loop: SyncLoop) {
    let errors = sync_loop.stop().await;
    assert!(errors.is_empty(), "the CVO's syncs failed: {errors:#?}");
}

#[tokio::test]
async fn a_refused_minor_request_stays_pending_and_starts_by_itself_once_pom_lifts_the_block() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let timing = released_short();
    let cvo = Cvo::install_with(
        client.clone(),
        FROM,
        &[AGGREGATED_CLUSTER_OPERATOR],
        timing.clone(),
    )
    .await
    .unwrap();
    let v100 = TestBundle::new("compat", "1.0.0").max_ocp("4.16");
    let v110 = TestBundle::new("compat", "1.1.0")
        .replaces("1.0.0")
        .max_ocp("4.18");
    publish(&client, std::slice::from_ref(&v100)).await;
    create_po(&client, "compat", json!({"package": {"name": "compat"}})).await;
    let settings = settings(FROM);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_at(&client, "compat", "1.0.0", "Steady").await;
    publish_served(&client, &[v100, v110]).await;
    let (reason, co_message) = wait_co_upgradeable(&client, "False", "compat.v1.1.0").await;
    assert_eq!(reason, "IncompatibleOperatorsInstalled", "{co_message}");
    let sync_loop = cvo.spawn_sync_loop(SYNC_EVERY);

    // The admin asks for 4.17.0: refused with POM's message; the request stays.
    let Admission::Pending { message, .. } = cvo.request_update(TO, false).await.unwrap() else {
        panic!("the CVO must refuse a minor update while POM says Upgradeable=False")
    };
    assert!(
        message.ends_with(&format!(
            "Cluster operator {AGGREGATED_CLUSTER_OPERATOR} should not be upgraded between minor or major versions: {co_message}"
        )),
        "the refusal must carry POM's message verbatim: {message}"
    );
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    let generation = cv.metadata.generation;
    let refused = cv_condition(&cv, "ReleaseAccepted").unwrap();
    assert_eq!(
        (refused.0.as_str(), refused.1.as_str()),
        ("False", "PreconditionChecks")
    );

    // Nothing starts while POM blocks: over a window longer than every resync of the manager
    // and than the CVO's cache, while the CVO retries the request at every sync, the cluster
    // stays where it is, the request stays, and POM keeps its steady pin.
    let window = QuietWindow::new(&settings)
        .unchanged(
            cvs(&client),
            CLUSTER_VERSION_NAME,
            "status.desired, the history and spec.desiredUpdate",
            |cv| {
                json!({"desired": cv.status.as_ref().map(|s| &s.desired.version),
                       "history": history(cv),
                       "requested": cv.spec.desired_update.as_ref().and_then(|u| u.version.clone())})
            },
        )
        .never(
            cvs(&client),
            CLUSTER_VERSION_NAME,
            "ReleaseAccepted=True",
            |cv| cv_condition(cv, "ReleaseAccepted").is_some_and(|c| c.0 == "True"),
        )
        .unchanged(
            pos(&client),
            "compat",
            "the installed bundle and the pin",
            |po| json!(standing(po)),
        );
    assert!(
        window.length() > timing.upgradeable_cache + timing.after_refusal_recheck + SYNC_EVERY,
        "the window must outlast the CVO's cache and its sync interval"
    );
    let syncs = sync_loop.syncs();
    window.open().await.hold().await;
    assert!(
        sync_loop.syncs() >= syncs + 10,
        "the CVO retried only {} times",
        sync_loop.syncs() - syncs
    );
    // Still refused for the same reason; once POM saw the request, its message (which the
    // CVO's retries carry) names the pre-update hop it offers (issue 35 item 1).
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    let again = cv_condition(&cv, "ReleaseAccepted").unwrap();
    assert_eq!((&again.0, &again.1), (&refused.0, &refused.1));
    assert!(
        again
            .2
            .contains("before the requested update to 4.17.0 POM offers the hops compat.v1.1.0"),
        "{}",
        again.2
    );

    // The admin moves compat to 1.1.0, as POM's message says: POM lifts the block, and the CVO
    // starts the update by itself, with no new request.
    pos(&client)
        .patch(
            "compat",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"steadyStateVersionRange": "=1.1.0"}})),
        )
        .await
        .unwrap();
    wait_at(&client, "compat", "1.1.0", "Override").await;
    wait_co_upgradeable(&client, "True", "").await;
    let cv = wait_cv(&client, "the pending request to start", |cv| {
        let head = history(cv).first().cloned()?;
        (head == entry("Partial", TO, false)
            && cv_condition(cv, "ReleaseAccepted").is_some_and(|c| c.0 == "True"))
        .then(|| cv.clone())
    })
    .await;
    assert_eq!(
        cv.metadata.generation, generation,
        "the admin wrote nothing since the refusal"
    );
    assert_eq!(
        history(&cv),
        vec![entry("Partial", TO, false), entry("Completed", FROM, true)]
    );
    // The update's pin holds within the admin's override (issue 25 item 1): compat stays on
    // the 1.1.0 the admin asked for.
    assert_eq!(
        wait_at(&client, "compat", "1.1.0", "MinorUpgrade").await,
        ">=1.1.0 <2.0.0-0 =1.1.0"
    );
    let manager = roll_out(manager, &client, TO).await;
    wait_completed(&client, TO).await;
    assert_eq!(co_version(&client).await.as_deref(), Some(TO));
    stop(sync_loop).await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// How the minor update got in while POM said Upgradeable=False.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Admitted {
    /// A released CVO's cached Upgradeable predates POM's False.
    StaleCache,
    /// `oc adm upgrade --force` (a newer CVO: Upgradeable recomputed at every sync).
    Force,
}

/// `gated` (upgrade gate OperatorCondition) runs 1.0.0, settled; the catalog has 1.1.0. The
/// operator starts a migration and says Upgradeable=False; the minor update gets in anyway.
async fn minor_update_admitted_while_pom_says_not_upgradeable(admitted: Admitted) {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let cache = Duration::from_secs(30);
    let timing = match admitted {
        Admitted::StaleCache => CvoTiming {
            upgradeable_cache: cache,
            ..released_short()
        },
        Admitted::Force => CvoTiming::newer(),
    };
    let cvo = Cvo::install_with(client.clone(), FROM, &[AGGREGATED_CLUSTER_OPERATOR], timing)
        .await
        .unwrap();
    let v100 = TestBundle::new("gated", "1.0.0");
    let v110 = TestBundle::new("gated", "1.1.0").replaces("1.0.0");
    publish(&client, std::slice::from_ref(&v100)).await;
    create_po(
        &client,
        "gated",
        json!({"package": {"name": "gated"}, "upgradeGate": "OperatorCondition"}),
    )
    .await;
    let settings = settings(FROM);
    let manager = Manager::start(client.clone(), settings.clone());
    report(&client, "gated", &v100.csv(), true, "ready").await;
    wait_at(&client, "gated", "1.0.0", "Steady").await;
    publish_served(&client, &[v100.clone(), v110.clone()]).await;
    wait_co_upgradeable(&client, "True", "").await;

    // The CVO computes Upgradeable now, while POM says True.
    let computed = Instant::now();
    cvo.sync().await.unwrap();
    // The operator starts a migration: POM turns Upgradeable=False, with its words.
    report(
        &client,
        "gated",
        &v100.csv(),
        false,
        "migrating the database",
    )
    .await;
    let (reason, co_message) =
        wait_co_upgradeable(&client, "False", "migrating the database").await;
    assert_eq!(reason, "OperatorNotUpgradeable", "{co_message}");

    let admission = cvo
        .request_update(TO, admitted == Admitted::Force)
        .await
        .unwrap();
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    match admitted {
        Admitted::StaleCache => {
            assert!(
                computed.elapsed() < cache,
                "the request came after the cache expired; the test proves nothing"
            );
            assert_eq!(
                admission,
                Admission::Accepted {
                    kind: UpdateKind::Minor,
                    accepted_risks: None
                },
                "the cached Upgradeable predates POM's False"
            );
            assert_eq!(
                cv_condition(&cv, "Upgradeable"),
                None,
                "the CVO has not seen POM's False yet"
            );
        }
        Admitted::Force => {
            let expected = format!(
                "Forced through blocking failures: Precondition \"ClusterVersionUpgradeable\" failed because of \"RiskNameNotCompatibleWithReasonProperty\": {co_message}"
            );
            assert_eq!(
                admission,
                Admission::Accepted {
                    kind: UpdateKind::Minor,
                    accepted_risks: Some(expected.clone())
                }
            );
            assert_eq!(cvo.accepted_risks().await.unwrap(), Some(expected));
        }
    }
    assert_eq!(history(&cv)[0], entry("Partial", TO, false));
    let sync_loop = cvo.spawn_sync_loop(SYNC_EVERY);
    let manager = roll_out(manager, &client, TO).await;

    // POM takes the minor update's pin but holds the hop (the operator says False), stays
    // truthful and withholds the version: the update stays open, over a window longer than
    // every resync of the manager and than the CVO's cache.
    let status = eventually(WAIT, "gated to take the MinorUpgrade pin", || async {
        let status = pos(&client).get("gated").await.ok()?.status?;
        status
            .pin
            .as_ref()
            .is_some_and(|p| p.reason.as_str() == "MinorUpgrade")
            .then_some(status)
    })
    .await;
    assert_eq!(status.pin.unwrap().range, ">=1.0.0 <2.0.0-0");
    let window = QuietWindow::new(&settings)
        .never(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
            &format!("versions[operator]={TO}"),
            |co| operator_version(co).as_deref() == Some(TO),
        )
        .never(
            Api::<ClusterOperator>::all(client.clone()),
            AGGREGATED_CLUSTER_OPERATOR,
            "Upgradeable other than False/OperatorNotUpgradeable",
            |co| {
                !co.status.as_ref().is_some_and(|s| {
                    s.conditions.iter().any(|c| {
                        c.type_ == "Upgradeable"
                            && c.status == "False"
                            && c.reason.as_deref() == Some("OperatorNotUpgradeable")
                    })
                })
            },
        )
        .never(
            cvs(&client),
            CLUSTER_VERSION_NAME,
            &format!("the update to {TO} Completed"),
            |cv| {
                history(cv)
                    .first()
                    .is_some_and(|h| h.0 == "Completed" && h.1 == TO)
            },
        )
        .unchanged(pos(&client), "gated", "the installed bundle", |po| {
            json!(
                po.status
                    .as_ref()
                    .and_then(|s| s.installed_bundle.as_ref())
                    .map(|b| &b.version)
            )
        });
    assert!(window.length() > cache + SYNC_EVERY);
    window.open().await.hold().await;
    let (_, _, now_saying) = co_condition(&client, "Upgradeable").await.unwrap();
    assert!(
        now_saying.contains("migrating the database"),
        "POM still says why: {now_saying}"
    );
    // The CVO's cache has caught up: it now says what POM says (a released CVO: POM's reason
    // and message, and the update in progress), but it never re-checks the accepted update.
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    let (status, _, message) = cv_condition(&cv, "Upgradeable").unwrap();
    assert_eq!(status, "False");
    // (POM's message as it is now: its header names the next minor only while the cluster is
    // steady, so it changed when the update began.)
    assert!(message.contains(&now_saying), "{message}");
    assert_eq!(history(&cv)[0], entry("Partial", TO, false));
    assert_eq!(
        cv_condition(&cv, "Progressing").map(|c| c.2),
        Some(format!(
            "Working towards {TO}: waiting on {AGGREGATED_CLUSTER_OPERATOR}"
        ))
    );
    assert_eq!(
        cv_condition(&cv, "Failing").map(|c| c.0).as_deref(),
        Some("False")
    );

    // The migration ends: the hop to 1.1.0 happens, 1.1.0 says it is ready, POM reports the
    // version and the update completes. The PO settles at 1.1.0 under the minor update's pin,
    // and then, once the update completes, under a Steady pin: that can all happen within one
    // poll (the CVO syncs every 500 ms), so every version of the PO is recorded and searched.
    let po_log = WatchLog::start(pos(&client), Some("gated")).await;
    report(&client, "gated", &v100.csv(), true, "migration done").await;
    report(&client, "gated", &v110.csv(), true, "ready").await;
    wait_completed(&client, TO).await;
    let states: Vec<_> = po_log
        .versions("gated")
        .iter()
        .filter_map(standing)
        .collect();
    assert!(
        states
            .iter()
            .any(|(version, _, reason, settled)| version == "1.1.0"
                && reason == "MinorUpgrade"
                && *settled),
        "gated never settled at 1.1.0 under the minor update's pin: {states:?}"
    );
    po_log.stop().await;
    assert_eq!(co_version(&client).await.as_deref(), Some(TO));
    stop(sync_loop).await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_minor_update_admitted_by_a_stale_cache_holds_versions_until_every_po_reaches_its_pin() {
    minor_update_admitted_while_pom_says_not_upgradeable(Admitted::StaleCache).await;
}

#[tokio::test]
async fn a_minor_update_forced_past_pom_holds_versions_until_every_po_reaches_its_pin() {
    minor_update_admitted_while_pom_says_not_upgradeable(Admitted::Force).await;
}

#[tokio::test]
async fn a_minor_request_during_an_in_flight_patch_update_is_refused_and_starts_after_it() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let timing = released_short();
    let cvo = Cvo::install_with(
        client.clone(),
        FROM,
        &[AGGREGATED_CLUSTER_OPERATOR],
        timing.clone(),
    )
    .await
    .unwrap();
    let v100 = TestBundle::new("zop", "1.0.0");
    let v101 = TestBundle::new("zop", "1.0.1").replaces("1.0.0");
    publish(&client, std::slice::from_ref(&v100)).await;
    create_po(&client, "zop", json!({"package": {"name": "zop"}})).await;
    let settings = settings(FROM);
    let manager = Manager::start(client.clone(), settings.clone());
    wait_at(&client, "zop", "1.0.0", "Steady").await;
    publish_served(&client, &[v100, v101]).await;
    wait_co_upgradeable(&client, "True", "").await;
    let sync_loop = cvo.spawn_sync_loop(SYNC_EVERY);

    // The patch update starts; zop moves within its minor. It stays in flight until the new
    // payload's POM reports 4.16.4 (not rolled out yet).
    assert_eq!(
        cvo.request_update(PATCH, false).await.unwrap(),
        Admission::Accepted {
            kind: UpdateKind::Patch,
            accepted_risks: None
        }
    );
    let patch_pin = wait_at(&client, "zop", "1.0.1", "PatchUpgrade").await;
    assert_eq!(patch_pin, ">=1.0.1 <1.1.0-0");
    // The CVO says the cluster is not upgradeable: an update is in progress.
    wait_cv(
        &client,
        "Upgradeable=False for the update in progress",
        |cv| {
            cv_condition(cv, "Upgradeable")
                .filter(|c| c.0 == "False" && c.2 == UPDATE_IN_PROGRESS_MESSAGE)
        },
    )
    .await;
    let Admission::Pending { message, .. } = cvo.request_update(TO, false).await.unwrap() else {
        panic!("a minor request during a patch update must be refused")
    };
    assert!(message.ends_with(UPDATE_IN_PROGRESS_MESSAGE), "{message}");
    let generation = cvs(&client)
        .get(CLUSTER_VERSION_NAME)
        .await
        .unwrap()
        .metadata
        .generation;

    // While the patch is in flight, the refused minor update does not start and POM keeps the
    // patch's pins, over a window longer than every resync and than the CVO's cache.
    let window = QuietWindow::new(&settings)
        .unchanged(
            cvs(&client),
            CLUSTER_VERSION_NAME,
            "status.desired and the history",
            |cv| json!({"desired": cv.status.as_ref().map(|s| &s.desired.version), "history": history(cv)}),
        )
        .unchanged(pos(&client), "zop", "the installed bundle and the pin", |po| {
            json!(standing(po))
        });
    assert!(window.length() > timing.upgradeable_cache + SYNC_EVERY);
    window.open().await.hold().await;
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    assert_eq!(
        history(&cv),
        vec![
            entry("Partial", PATCH, false),
            entry("Completed", FROM, true)
        ]
    );
    assert_eq!(
        cv.spec.desired_update.and_then(|u| u.version).as_deref(),
        Some(TO)
    );

    // The patch's payload rolls out: POM reports 4.16.4, the patch completes, and the CVO
    // starts the refused minor update by itself.
    let manager = roll_out(manager, &client, PATCH).await;
    let cv = wait_cv(&client, "the pending minor update to start", |cv| {
        (history(cv).first() == Some(&entry("Partial", TO, false))).then(|| cv.clone())
    })
    .await;
    assert_eq!(
        history(&cv),
        vec![
            entry("Partial", TO, false),
            entry("Completed", PATCH, true),
            entry("Completed", FROM, true)
        ]
    );
    assert_eq!(cv.metadata.generation, generation, "no new request");
    assert_eq!(
        wait_at(&client, "zop", "1.0.1", "MinorUpgrade").await,
        ">=1.0.1 <2.0.0-0"
    );
    let manager = roll_out(manager, &client, TO).await;
    wait_completed(&client, TO).await;
    stop(sync_loop).await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

/// A payload operator played by the test at `version`, Available, Degraded as given.
fn sim_operator(version: &str, degraded: bool) -> ClusterOperatorStatus {
    ClusterOperatorStatus {
        conditions: vec![
            condition("Available", "True", Some("AsExpected"), "available"),
            if degraded {
                condition("Degraded", "True", Some("Broken"), "the patch broke it")
            } else {
                condition("Degraded", "False", Some("AsExpected"), "fine")
            },
        ],
        versions: vec![OperandVersion {
            name: "operator".into(),
            version: version.into(),
        }],
        related_objects: Vec::new(),
    }
}

/// The CVO's "previous" is the newest history entry whose version differs from the target,
/// whatever its state, so an in-flight patch can be rolled back; POM reads the target below
/// the partly rolled-out 4.16.4 as a Rollback (`crates/resolver/src/cluster.rs`,
/// `cluster_phase`) and pins every PO where it is.
#[tokio::test]
async fn rolling_back_an_in_flight_patch_update_gives_pom_rollback_pins() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(false).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    write_cluster_operator(&client, "sim-operator", sim_operator(FROM, false))
        .await
        .unwrap();
    let cvo = Cvo::install_with(
        client.clone(),
        FROM,
        &[AGGREGATED_CLUSTER_OPERATOR, "sim-operator"],
        released_short(),
    )
    .await
    .unwrap();
    let v100 = TestBundle::new("rbop", "1.0.0");
    let v101 = TestBundle::new("rbop", "1.0.1").replaces("1.0.0");
    publish(&client, std::slice::from_ref(&v100)).await;
    create_po(&client, "rbop", json!({"package": {"name": "rbop"}})).await;
    let manager = Manager::start(client.clone(), settings(FROM));
    wait_at(&client, "rbop", "1.0.0", "Steady").await;
    publish_served(&client, &[v100, v101]).await;
    let sync_loop = cvo.spawn_sync_loop(SYNC_EVERY);

    // The patch update: rbop moves to 1.0.1, POM's payload reports 4.16.4, but sim-operator,
    // updated, is degraded: the update stays in flight.
    cvo.request_update(PATCH, false).await.unwrap();
    wait_at(&client, "rbop", "1.0.1", "PatchUpgrade").await;
    let manager = roll_out(manager, &client, PATCH).await;
    write_cluster_operator(&client, "sim-operator", sim_operator(PATCH, true))
        .await
        .unwrap();
    eventually(WAIT, "the ClusterOperator to report 4.16.4", || async {
        (co_version(&client).await.as_deref() == Some(PATCH)).then_some(())
    })
    .await;
    wait_cv(&client, "the patch update waiting on sim-operator", |cv| {
        cv_condition(cv, "Progressing").filter(|c| {
            c.2 == format!("Working towards {PATCH}: waiting up to 40 minutes on sim-operator")
        })
    })
    .await;

    // The admin rolls the in-flight patch back: the CVO allows it (the previous entry is the
    // completed 4.16.3), and rolls out the old payload (POM at 4.16.3).
    assert_eq!(
        cvo.request_update(FROM, false).await.unwrap(),
        Admission::Accepted {
            kind: UpdateKind::Rollback,
            accepted_risks: None
        }
    );
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    assert_eq!(
        history(&cv),
        vec![
            entry("Partial", FROM, false),
            entry("Partial", PATCH, true),
            entry("Completed", FROM, true)
        ]
    );
    let manager = roll_out(manager, &client, FROM).await;

    // POM sees a rollback: rbop is pinned where it is, for the rollback.
    let pin = eventually(WAIT, "rbop to leave its PatchUpgrade pin", || async {
        let pin = pos(&client).get("rbop").await.ok()?.status?.pin?;
        (pin.reason.as_str() != "PatchUpgrade").then_some(pin)
    })
    .await;
    assert_eq!(
        (pin.range.as_str(), pin.reason.as_str()),
        ("=1.0.1", "Rollback"),
        "rolling back the in-flight patch update 4.16.3 -> 4.16.4 to 4.16.3 is a rollback \
         (history: {:?})",
        history(&cv)
    );
    assert_eq!(
        wait_at(&client, "rbop", "1.0.1", "Rollback").await,
        "=1.0.1"
    );

    // sim-operator is back at 4.16.3: the rollback completes; rbop is steady at 1.0.1.
    write_cluster_operator(&client, "sim-operator", sim_operator(FROM, false))
        .await
        .unwrap();
    wait_completed(&client, FROM).await;
    assert_eq!(wait_at(&client, "rbop", "1.0.1", "Steady").await, "=1.0.1");
    stop(sync_loop).await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}

#[tokio::test]
async fn a_po_failing_mid_update_shows_on_the_cluster_version_as_the_cvo_reports_it() {
    let started = Instant::now();
    let Some(plane) = simulated_plane(true).await else {
        return;
    };
    let client = plane.client().await.unwrap();
    let registry = Registry::start().await.unwrap();
    let host = registry.host();
    let timing = released_short();
    let cvo = Cvo::install_with(
        client.clone(),
        FROM,
        &[AGGREGATED_CLUSTER_OPERATOR],
        timing.clone(),
    )
    .await
    .unwrap();
    // 1.1.0's image is pushed to a staging repository only: the catalog's reference (same
    // digest, the release repository) does not exist yet.
    let v100 = TestBundle::new("stuck", "1.0.0");
    let v110 = TestBundle::new("stuck", "1.1.0").replaces("1.0.0");
    let staged = push_files(&host, "bundles/stuck-staging", "1.1.0", &v110.image_files())
        .await
        .unwrap();
    let image = staged.replace("/bundles/stuck-staging@", "/bundles/stuck@");
    let images = [(v110.name(), image.clone())];
    configmap_catalog(
        &client,
        "scenarios",
        &catalog_json(std::slice::from_ref(&v100), &[]),
        0,
    )
    .await;
    create_po(&client, "stuck", json!({"package": {"name": "stuck"}})).await;
    let with_registry = |release: &str| Settings {
        insecure_registries: vec![host.clone()],
        ..settings(release)
    };
    let manager = Manager::start(client.clone(), with_registry(FROM));
    wait_at(&client, "stuck", "1.0.0", "Steady").await;
    let fbc = catalog_json(&[v100, v110.clone()], &images);
    configmap_catalog(&client, "scenarios", &fbc, 0).await;
    wait_catalog_serves(&client, "scenarios", &fbc).await;
    wait_co_upgradeable(&client, "True", "").await;
    let sync_loop = cvo.spawn_sync_loop(SYNC_EVERY);

    assert!(matches!(
        cvo.request_update(TO, false).await.unwrap(),
        Admission::Accepted {
            kind: UpdateKind::Minor,
            ..
        }
    ));
    let accepted = Instant::now();
    manager.stop().await;
    let manager = Manager::start(client.clone(), with_registry(TO));

    // The hop to 1.1.0 cannot start (its image is missing): the PO and POM's ClusterOperator
    // are degraded, the operator keeps running 1.0.0.
    let po_message =
        wait_po_condition(&client, "stuck", "Degraded", "True", Some("UnpackFailed")).await;
    assert!(po_message.contains(&image), "{po_message}");
    let (_, co_reason, co_message) =
        eventually(WAIT, "the ClusterOperator Degraded=True", || async {
            co_condition(&client, "Degraded")
                .await
                .filter(|c| c.0 == "True")
        })
        .await;
    assert_eq!(co_reason, "PlatformOperatorFailed");
    assert_eq!(co_message, format!("stuck: {po_message}"));
    assert_eq!(
        co_condition(&client, "Available")
            .await
            .map(|c| c.0)
            .as_deref(),
        Some("True"),
        "the operator still works"
    );

    // The CVO reads a degraded payload operator as progress for its grace period (not as
    // "updating versions", although POM withholds the version too)...
    let progressing =
        format!("Working towards {TO}: waiting up to 40 minutes on {AGGREGATED_CLUSTER_OPERATOR}");
    let seen = wait_cv(&client, "the CVO waiting on the degraded operator", |cv| {
        cv_condition(cv, "Progressing")
            .filter(|c| c.2 == progressing)
            .map(|c| (c, cv_condition(cv, "Failing")))
    })
    .await;
    assert_eq!(seen.0.1, "ClusterOperatorDegraded");
    assert_eq!(seen.1.map(|c| c.0).as_deref(), Some("False"));
    assert!(
        accepted.elapsed() < timing.degraded_grace,
        "seen within the grace"
    );
    // ...then Failing=True, worded as the CVO words it; the update stays open.
    let failing = wait_cv(&client, "Failing=True", |cv| {
        cv_condition(cv, "Failing")
            .filter(|c| c.0 == "True")
            .map(|c| (c, cv_condition(cv, "Progressing"), history(cv)))
    })
    .await;
    assert!(accepted.elapsed() >= timing.degraded_grace);
    assert_eq!(
        failing.0,
        (
            "True".into(),
            "ClusterOperatorDegraded".into(),
            format!("Cluster operator {AGGREGATED_CLUSTER_OPERATOR} is degraded")
        )
    );
    assert_eq!(
        failing.1,
        Some((
            "True".into(),
            "ClusterOperatorDegraded".into(),
            format!(
                "Unable to apply {TO}: wait has exceeded 40 minutes for these operators: {AGGREGATED_CLUSTER_OPERATOR}"
            )
        ))
    );
    assert_eq!(failing.2[0], entry("Partial", TO, false));
    assert_ne!(co_version(&client).await.as_deref(), Some(TO));

    // The publisher pushes the missing image (same files, same digest): the hop happens, POM
    // reports the version, the update completes and Failing clears.
    // The settled 1.1.0 under the minor update's pin may last only until the CVO completes the
    // update (then the pin is Steady): it is looked for in every PO version, not polled.
    let log = pom_e2e::event_log::EventLog::start(pos(&client)).await;
    let pushed = push_files(&host, "bundles/stuck", "1.1.0", &v110.image_files())
        .await
        .unwrap();
    assert_eq!(pushed, image);
    wait_completed(&client, TO).await;
    let at_minor = log.events().iter().any(|e| {
        standing(&e.object).is_some_and(|(v, _, reason, settled)| {
            v == "1.1.0" && reason == "MinorUpgrade" && settled
        })
    });
    assert!(
        at_minor,
        "the PO never stood settled at 1.1.0 under the MinorUpgrade pin"
    );
    wait_at(&client, "stuck", "1.1.0", "Steady").await;
    let cv = cvs(&client).get(CLUSTER_VERSION_NAME).await.unwrap();
    assert_eq!(
        cv_condition(&cv, "Failing").map(|c| c.0).as_deref(),
        Some("False")
    );
    assert_eq!(
        cv_condition(&cv, "Progressing").map(|c| c.2),
        Some(format!("Cluster version is {TO}"))
    );
    stop(sync_loop).await;
    manager.stop().await;
    println!("test took {:?}", started.elapsed());
}
