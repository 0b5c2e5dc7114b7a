//! The aggregated ClusterOperator `platform-operators-aggregated` (§8.2): what the CVO reads.
//!
//! [`compute`] is pure (all PlatformOperators → the ClusterOperator status); [`run`] recomputes
//! it whenever a PlatformOperator changes (and every 30 s), creates the ClusterOperator if the
//! payload did not, and writes only when the status changed.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::runtime::{WatchStreamExt, reflector, watcher};
use pom_api::PlatformOperator;
use pom_api::conditions::{reasons, types};
use pom_api::openshift::{
    AGGREGATED_CLUSTER_OPERATOR, ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus,
    ObjectReference, OperandVersion,
};
use pom_resolver::verdict::{self, Verdict, VerdictStatus};
use tokio_util::sync::CancellationToken;

use crate::conditions::{self, Desired, Status, merge_cluster_operator};
use crate::context::{CLUSTER_OPERATOR_FIELD_MANAGER, Context};
use crate::error::Error;

/// What the writer knows of the cluster's update phase, to tell whether a PO's pin was
/// computed for the phase the cluster is in now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterPhaseView {
    /// The ClusterVersion could not be read or judged: never report a new version.
    Unknown,
    /// Plain Kubernetes: no ClusterVersion.
    Absent,
    Known(pom_resolver::cluster::PhaseKind),
}

impl ClusterPhaseView {
    /// Whether a PO whose `status.pin.reason` is `reason` was evaluated for this phase.
    fn matches(self, reason: &str) -> bool {
        use pom_resolver::cluster::PhaseKind;
        match self {
            Self::Unknown => false,
            Self::Absent => true,
            Self::Known(PhaseKind::Steady) => reason == "Steady" || reason == "Override",
            Self::Known(PhaseKind::PatchUpgrade) => reason == "PatchUpgrade",
            Self::Known(PhaseKind::MinorUpgrade) => reason == "MinorUpgrade",
            Self::Known(PhaseKind::Rollback) => reason == "Rollback",
        }
    }
}

/// Computes the ClusterOperator status from every PlatformOperator. `versions[operator]`
/// reaches `release_version` only once every PO has settled at its pin for the cluster's
/// current phase, with no further hop pending.
#[must_use]
pub fn compute(
    pos: &[Arc<PlatformOperator>],
    previous: &ClusterOperatorStatus,
    release_version: &str,
    manager_namespace: &str,
    cluster: ClusterPhaseView,
    now: &Time,
) -> ClusterOperatorStatus {
    let mut pos: Vec<&PlatformOperator> = pos.iter().map(AsRef::as_ref).collect();
    pos.sort_by_key(|po| po.name_any());
    let cond = |po: &PlatformOperator, t: &str| {
        po.status
            .as_ref()
            .and_then(|s| conditions::find(&s.conditions, t).cloned())
    };

    let mut not_available = Vec::new();
    let mut progressing = Vec::new();
    let mut degraded = Vec::new();
    let mut verdicts = Vec::new();
    let mut all_at_pin = true;
    for po in &pos {
        let name = po.name_any();
        let status = po.status.clone().unwrap_or_default();
        let current = status.observed_generation == po.metadata.generation;
        let installed = cond(po, types::INSTALLED);
        if status.installed_bundle.is_none()
            && let Some(c) = installed.as_ref().filter(|c| {
                c.status == "False"
                    && c.reason != reasons::INSTALLING
                    && c.reason != reasons::DUPLICATE_PACKAGE
            })
        {
            not_available.push(format!("{name}: {}", c.message));
        }
        if let Some(c) = cond(po, types::PROGRESSING).filter(|c| c.status == "True") {
            progressing.push(format!("{name}: {}", c.reason));
        }
        if let Some(c) = cond(po, types::DEGRADED).filter(|c| c.status == "True") {
            degraded.push(format!("{name}: {}", c.message));
        }
        // Fail closed: a PO that has not reported Upgradeable for its current generation is
        // not judged upgradeable (seed 000).
        let verdict = match cond(po, types::UPGRADEABLE) {
            Some(c) if current => Verdict {
                status: match c.status.as_str() {
                    "True" => VerdictStatus::True,
                    "False" => VerdictStatus::False,
                    _ => VerdictStatus::Unknown,
                },
                reason: c.reason,
                message: c.message,
            },
            _ => Verdict::unknown("has not reported whether it is upgradeable yet"),
        };
        verdicts.push((name, verdict));
        let settled = status.active_hop.as_ref().is_some_and(|h| h.settled)
            && status.desired_bundle.is_none();
        let failed_without_install = status.installed_bundle.is_none();
        let pin_for_phase = status
            .pin
            .as_ref()
            .is_some_and(|p| cluster.matches(&p.reason));
        all_at_pin &= current && ((settled && pin_for_phase) || failed_without_install);
    }

    let mut desired = Vec::new();
    if not_available.is_empty() {
        let msg = if pos.is_empty() {
            "No platform operators are present in the cluster".to_owned()
        } else {
            "All platform operators have a working installation".to_owned()
        };
        desired.push(Desired::new(
            types::AVAILABLE,
            Status::True,
            reasons::AS_EXPECTED,
            msg,
        ));
    } else {
        desired.push(Desired::new(
            types::AVAILABLE,
            Status::False,
            reasons::PLATFORM_OPERATOR_FAILED,
            not_available.join("\n"),
        ));
    }
    if progressing.is_empty() {
        desired.push(Desired::new(
            types::PROGRESSING,
            Status::False,
            reasons::AS_EXPECTED,
            "All platform operators are at their desired bundles",
        ));
    } else {
        desired.push(Desired::new(
            types::PROGRESSING,
            Status::True,
            "PlatformOperatorsProgressing",
            progressing.join("\n"),
        ));
    }
    if degraded.is_empty() {
        desired.push(Desired::new(
            types::DEGRADED,
            Status::False,
            reasons::AS_EXPECTED,
            "No platform operator is degraded",
        ));
    } else {
        desired.push(Desired::new(
            types::DEGRADED,
            Status::True,
            reasons::PLATFORM_OPERATOR_FAILED,
            degraded.join("\n"),
        ));
    }
    let upgradeable = if verdicts.is_empty() {
        Verdict::upgradeable("No platform operators are present in the cluster")
    } else {
        verdict::aggregate(&verdicts)
    };
    let upgradeable_status = match upgradeable.status {
        VerdictStatus::True => Status::True,
        // Unknown is not upgradeable: the CVO treats Unknown as "not False", so say False.
        VerdictStatus::False | VerdictStatus::Unknown => Status::False,
    };
    desired.push(Desired::new(
        types::UPGRADEABLE,
        upgradeable_status,
        upgradeable.reason,
        upgradeable.message,
    ));

    let versions = if all_at_pin {
        vec![OperandVersion {
            name: "operator".into(),
            version: release_version.to_owned(),
        }]
    } else {
        previous.versions.clone()
    };
    let mut related = vec![
        ObjectReference {
            group: String::new(),
            resource: "namespaces".into(),
            namespace: None,
            name: manager_namespace.to_owned(),
        },
        ObjectReference {
            group: pom_api::GROUP.into(),
            resource: "platformoperators".into(),
            namespace: None,
            name: String::new(),
        },
        ObjectReference {
            group: pom_api::GROUP.into(),
            resource: "catalogs".into(),
            namespace: None,
            name: String::new(),
        },
    ];
    let mut install_namespaces: Vec<String> = pos
        .iter()
        .map(|po| {
            po.spec
                .install_namespace
                .clone()
                .unwrap_or_else(|| po.name_any())
        })
        .collect();
    install_namespaces.sort();
    install_namespaces.dedup();
    related.extend(install_namespaces.into_iter().map(|ns| ObjectReference {
        group: String::new(),
        resource: "namespaces".into(),
        namespace: None,
        name: ns,
    }));

    ClusterOperatorStatus {
        conditions: merge_cluster_operator(&previous.conditions, &desired, now),
        versions,
        related_objects: related,
    }
}

/// Keeps the aggregated ClusterOperator up to date until `shutdown`.
pub async fn run(ctx: Arc<Context>, shutdown: CancellationToken) {
    let (reader, writer) = reflector::store();
    let pos: Api<PlatformOperator> = Api::all(ctx.client.clone());
    let notify = Arc::new(tokio::sync::Notify::new());
    let notifier = notify.clone();
    let watch = reflector(writer, watcher(pos, watcher::Config::default()))
        .default_backoff()
        .touched_objects()
        .for_each(move |_| {
            notifier.notify_one();
            async {}
        });
    let sync_loop = async {
        if reader.wait_until_ready().await.is_err() {
            return;
        }
        loop {
            if let Err(err) = sync(&ctx, &reader.state()).await {
                tracing::warn!(%err, "updating the aggregated ClusterOperator");
            }
            tokio::select! {
                () = notify.notified() => tokio::time::sleep(Duration::from_millis(200)).await,
                () = tokio::time::sleep(Duration::from_secs(30)) => {}
            }
        }
    };
    tokio::select! {
        () = shutdown.cancelled() => {}
        () = watch => {}
        () = sync_loop => {}
    }
}

/// One pass: create the ClusterOperator if absent, write its status if it changed.
pub async fn sync(ctx: &Context, pos: &[Arc<PlatformOperator>]) -> Result<(), Error> {
    let api: Api<ClusterOperator> = Api::all(ctx.client.clone());
    let existing = match api
        .get_opt(AGGREGATED_CLUSTER_OPERATOR)
        .await
        .map_err(Error::kube("reading the aggregated ClusterOperator"))?
    {
        Some(co) => co,
        None => {
            let co = ClusterOperator::new(AGGREGATED_CLUSTER_OPERATOR, ClusterOperatorSpec {});
            match api.create(&PostParams::default(), &co).await {
                Ok(created) => created,
                Err(kube::Error::Api(s)) if s.code == 409 => api
                    .get(AGGREGATED_CLUSTER_OPERATOR)
                    .await
                    .map_err(Error::kube("reading the aggregated ClusterOperator"))?,
                Err(err) => {
                    return Err(Error::kube("creating the aggregated ClusterOperator")(err));
                }
            }
        }
    };
    let previous = existing.status.clone().unwrap_or_default();
    let cluster = match crate::operator::snapshot::cluster(&ctx.client).await {
        Ok(Ok(Some(phase))) => ClusterPhaseView::Known(phase.kind),
        Ok(Ok(None)) => ClusterPhaseView::Absent,
        Ok(Err(_)) | Err(_) => ClusterPhaseView::Unknown,
    };
    let status = compute(
        pos,
        &previous,
        &ctx.settings.release_version,
        &ctx.settings.manager_namespace,
        cluster,
        &conditions::now(),
    );
    if status == previous {
        return Ok(());
    }
    let patch = serde_json::json!({"apiVersion": "config.openshift.io/v1", "kind": "ClusterOperator", "status": status});
    api.patch_status(
        AGGREGATED_CLUSTER_OPERATOR,
        &PatchParams::apply(CLUSTER_OPERATOR_FIELD_MANAGER).force(),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube("writing the aggregated ClusterOperator status"))?;
    Ok(())
}
