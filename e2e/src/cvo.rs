//! A stand-in for the cluster-version operator (CVO), following its documented contract with
//! ClusterOperators (reference page "OpenShift and OLM contracts" §2–§3). Tests and the demo
//! use it to drive cluster updates against the real API server, so that POM is judged by the
//! same rules the CVO applies in a real cluster:
//!
//! - **Upgradeable gates minor and major updates only.** [`Cvo::start_update`] refuses a minor
//!   or major update while *any* ClusterOperator (not only the payload ones) reports
//!   `Upgradeable=False`, the way the CVO's `ClusterVersionUpgradeable` precondition does
//!   (`ReleaseAccepted=False`, a `PreconditionBlock`). A patch update starts regardless. The
//!   other preconditions are mirrored too: no jump of more than one minor, no major jump except
//!   4.x → 5.0, and rollbacks only within a z-stream to the previous release ([`Cvo::rollback`]).
//! - **Completion waits on the payload ClusterOperators.** [`Cvo::try_complete`] marks the update
//!   `Completed` only when every payload ClusterOperator (the list given to [`Cvo::install`])
//!   reports `versions[operator]` equal to the new release, `Available=True` and `Degraded`
//!   *explicitly* `False` (the CVO starts from "degraded" and a missing condition keeps it so).
//!   `Progressing` is never consulted. ClusterOperators outside the payload cannot hold an
//!   update open.
//!
//! Operator versions are compared exactly, as the CVO does: a payload operator reaches the new
//! release only by reporting it. The real CVO gets there by rolling out the new payload's
//! operator with `RELEASE_VERSION` set to the new release; POM's manager reports
//! `versions.operator = settings.release_version` once every PlatformOperator reached its pin.
//! So a test or the demo plays that rollout by restarting the in-process manager with
//! `release_version` set to the target after [`Cvo::start_update`] (see `docs/demo.md`). We
//! chose this over a "version tracking" shortcut so that a manager that reports too early or
//! never is caught, not excused.
//!
//! What is simplified: no payload, images or manifests are applied (the image is a fake digest
//! of the version); throttling of the Upgradeable check, `force`, overrides and admin-acks are
//! not modelled; every status write replaces the whole ClusterVersion status (the CVO owns it).

use std::fmt;
use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::Client;
use kube::api::{Api, PostParams};
use pom_api::openshift::{
    CLUSTER_VERSION_NAME, ClusterOperator, ClusterOperatorSpec, ClusterOperatorStatus,
    ClusterOperatorStatusCondition, ClusterVersion, ClusterVersionSpec, ClusterVersionStatus,
    Release, Update, UpdateHistory,
};
use semver::Version;
use sha2::{Digest, Sha256};

/// The most history entries the CVO keeps.
const HISTORY_LIMIT: usize = 100;
/// The field written into `spec.clusterID` (any UUID will do).
const CLUSTER_ID: &str = "5d0c3b9e-0000-4000-8000-00000000c0de";

/// What kind of update a version change is, as the CVO's `UpdateType` classifies it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateKind {
    /// Same major.minor, higher version: never blocked by Upgradeable.
    Patch,
    /// Same major, higher minor: blocked by any `Upgradeable=False`.
    Minor,
    /// Higher major: blocked by any `Upgradeable=False`.
    Major,
    /// Lower version: only within the z-stream, through [`Cvo::rollback`].
    Rollback,
    /// The version the cluster is already heading to.
    Same,
}

impl UpdateKind {
    /// Classifies `from` → `to` by semver precedence.
    #[must_use]
    pub fn of(from: &Version, to: &Version) -> Self {
        match to.cmp_precedence(from) {
            std::cmp::Ordering::Equal => Self::Same,
            std::cmp::Ordering::Less => Self::Rollback,
            std::cmp::Ordering::Greater if to.major > from.major => Self::Major,
            std::cmp::Ordering::Greater if to.minor > from.minor => Self::Minor,
            std::cmp::Ordering::Greater => Self::Patch,
        }
    }
}

impl fmt::Display for UpdateKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Patch => "patch",
            Self::Minor => "minor",
            Self::Major => "major",
            Self::Rollback => "rollback",
            Self::Same => "no-op",
        })
    }
}

/// Why the simulated CVO refused something, or could not do it.
#[derive(Debug, thiserror::Error)]
pub enum CvoError {
    /// A precondition failed: the CVO reports `ReleaseAccepted=False` with this reason and
    /// message and keeps running the current release.
    #[error("update to {version} refused (ReleaseAccepted=False, {reason}): {message}")]
    Refused {
        version: String,
        reason: String,
        message: String,
    },
    /// A version that is not a semantic version.
    #[error("{value:?} is not a release version: {reason}")]
    BadVersion { value: String, reason: String },
    /// No update is in flight, or the ClusterVersion does not exist.
    #[error("{0}")]
    State(String),
    /// The update did not complete in time; `waiting` says on what.
    #[error("update to {version} did not complete within {seconds}s; waiting on: {}", waiting.join("; "))]
    Timeout {
        version: String,
        seconds: u64,
        waiting: Vec<String>,
    },
    #[error("{what}: {source}")]
    Kube {
        what: String,
        #[source]
        source: kube::Error,
    },
}

impl CvoError {
    /// The `ReleaseAccepted=False` reason of a refusal, if this is one.
    #[must_use]
    pub fn refusal_reason(&self) -> Option<&str> {
        match self {
            Self::Refused { reason, .. } => Some(reason),
            _ => None,
        }
    }
}

fn kube_err(what: impl Into<String>) -> impl FnOnce(kube::Error) -> CvoError {
    let what = what.into();
    move |source| CvoError::Kube { what, source }
}

/// Where an update stands after [`Cvo::try_complete`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Progress {
    /// No update in flight: the cluster runs this version.
    Steady(String),
    /// The update to this version just completed (or had completed).
    Completed(String),
    /// Still applying: one line per payload ClusterOperator not done yet.
    Waiting(Vec<String>),
}

/// The simulated CVO of one cluster. Cheap to clone; holds no state besides the API.
#[derive(Clone)]
pub struct Cvo {
    client: Client,
    payload: Vec<String>,
}

impl fmt::Debug for Cvo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cvo")
            .field("payload", &self.payload)
            .finish_non_exhaustive()
    }
}

impl Cvo {
    /// Creates ClusterVersion `version` as an installed cluster at `version`: one `Completed`
    /// history entry, `desired` = it, Available=True, Progressing=False, Failing=False.
    /// `payload` names the ClusterOperators of the release payload, the only ones an update
    /// waits for (e.g. `["platform-operators-aggregated"]`).
    ///
    /// # Errors
    /// A bad version, or the API refusing the object (e.g. it already exists).
    pub async fn install(
        client: Client,
        version: &str,
        payload: &[&str],
    ) -> Result<Self, CvoError> {
        parse(version)?;
        let api: Api<ClusterVersion> = Api::all(client.clone());
        let spec = ClusterVersionSpec {
            cluster_id: CLUSTER_ID.to_owned(),
            ..ClusterVersionSpec::default()
        };
        let created = api
            .create(
                &PostParams::default(),
                &ClusterVersion::new(CLUSTER_VERSION_NAME, spec),
            )
            .await
            .map_err(kube_err("creating ClusterVersion version"))?;
        let now = now();
        let mut cv = created;
        cv.status = Some(ClusterVersionStatus {
            desired: release(version),
            history: vec![UpdateHistory {
                state: "Completed".into(),
                started_time: now.clone(),
                completion_time: Some(now.clone()),
                version: version.to_owned(),
                image: release(version).image,
                verified: false,
            }],
            observed_generation: cv.metadata.generation.unwrap_or(1),
            version_hash: version_hash(version),
            conditions: Vec::new(),
            available_updates: None,
        });
        let cvo = Self {
            client,
            payload: payload.iter().map(|s| (*s).to_owned()).collect(),
        };
        let status = cv.status.get_or_insert_with(ClusterVersionStatus::default);
        set(
            status,
            condition(
                "Available",
                "True",
                None,
                &format!("Done applying {version}"),
            ),
        );
        set(
            status,
            condition(
                "Progressing",
                "False",
                None,
                &format!("Cluster version is {version}"),
            ),
        );
        set(status, condition("Failing", "False", None, ""));
        set(
            status,
            condition(
                "ReleaseAccepted",
                "True",
                Some("PayloadLoaded"),
                &payload_loaded(version),
            ),
        );
        cvo.write(&cv).await?;
        Ok(cvo)
    }

    /// The payload ClusterOperators this CVO waits for.
    #[must_use]
    pub fn payload(&self) -> &[String] {
        &self.payload
    }

    /// The ClusterVersion as stored now.
    ///
    /// # Errors
    /// When it cannot be read.
    pub async fn cluster_version(&self) -> Result<ClusterVersion, CvoError> {
        Api::<ClusterVersion>::all(self.client.clone())
            .get(CLUSTER_VERSION_NAME)
            .await
            .map_err(kube_err("reading ClusterVersion version"))
    }

    /// The version of the newest `Completed` history entry: what the cluster runs.
    ///
    /// # Errors
    /// When the ClusterVersion cannot be read or has no completed entry.
    pub async fn current_version(&self) -> Result<String, CvoError> {
        let cv = self.cluster_version().await?;
        completed_version(&cv)
            .ok_or_else(|| CvoError::State("ClusterVersion has no Completed history entry".into()))
    }

    /// What `oc adm upgrade --to VERSION` asks for. Runs the CVO's preconditions against the
    /// live cluster; on acceptance sets `spec.desiredUpdate` and `status.desired`, pushes a
    /// `Partial` history entry (closing a superseded one) and sets `Progressing=True` "Working
    /// towards VERSION". Returns the kind of update started.
    ///
    /// # Errors
    /// [`CvoError::Refused`] when a precondition fails (also written to the ClusterVersion as
    /// `ReleaseAccepted=False`); a lower version must go through [`Cvo::rollback`].
    pub async fn start_update(&self, to: &str) -> Result<UpdateKind, CvoError> {
        let target = parse(to)?;
        let mut cv = self.cluster_version().await?;
        let desired = cv
            .status
            .as_ref()
            .map(|s| s.desired.version.clone())
            .unwrap_or_default();
        // The precondition compares with status.desired.version (the CVO's "current" there).
        let kind = UpdateKind::of(&parse(&desired)?, &target);
        let refusal = match kind {
            UpdateKind::Same => return Ok(kind),
            UpdateKind::Rollback => Some((
                "LowDesiredVersion".to_owned(),
                format!(
                    "{to} is lower than the current version {desired}; use a rollback (z-stream only)"
                ),
            )),
            UpdateKind::Minor | UpdateKind::Major => {
                self.minor_update_refusal(&parse(&desired)?, &target)
                    .await?
            }
            UpdateKind::Patch => None,
        };
        self.accept_or_refuse(&mut cv, to, refusal).await?;
        Ok(kind)
    }

    /// A z-stream rollback to the previous release: `to` must be lower than the current
    /// version, in the same major.minor, and the version of the previous completed history
    /// entry (the CVO's rollback precondition). Upgradeable is not consulted.
    ///
    /// # Errors
    /// [`CvoError::Refused`] (`LowDesiredVersion`) outside those limits.
    pub async fn rollback(&self, to: &str) -> Result<(), CvoError> {
        let target = parse(to)?;
        let mut cv = self.cluster_version().await?;
        let current_text = completed_version(&cv).unwrap_or_default();
        let current = parse(&current_text)?;
        let previous = cv
            .status
            .iter()
            .flat_map(|s| s.history.iter())
            .filter(|h| h.state == "Completed")
            .map(|h| h.version.clone())
            .find(|v| *v != current_text);
        let refusal = if UpdateKind::of(&current, &target) != UpdateKind::Rollback {
            Some((
                "LowDesiredVersion".to_owned(),
                format!("{to} is not lower than the current version {current_text}"),
            ))
        } else if (target.major, target.minor) != (current.major, current.minor) {
            Some((
                "LowDesiredVersion".to_owned(),
                format!(
                    "rollback from {current_text} to {to} leaves the z-stream; only rollbacks within {}.{} are supported",
                    current.major, current.minor
                ),
            ))
        } else if previous.as_deref() != Some(to) {
            Some((
                "LowDesiredVersion".to_owned(),
                format!(
                    "rollback to {to} is not to the previous release ({})",
                    previous.unwrap_or_else(|| "none".into())
                ),
            ))
        } else {
            None
        };
        self.accept_or_refuse(&mut cv, to, refusal).await
    }

    /// One pass of the CVO's completion check: when every payload ClusterOperator is done,
    /// marks the update `Completed` and sets Progressing=False "Cluster version is X";
    /// otherwise refreshes the Progressing message with what it waits on.
    ///
    /// # Errors
    /// When the API cannot be read or written.
    pub async fn try_complete(&self) -> Result<Progress, CvoError> {
        let mut cv = self.cluster_version().await?;
        let Some(status) = cv.status.as_mut() else {
            return Err(CvoError::State(
                "ClusterVersion version has no status".into(),
            ));
        };
        let target = status.desired.version.clone();
        let in_flight = status
            .history
            .first()
            .is_some_and(|h| h.state == "Partial" && h.completion_time.is_none());
        if !in_flight {
            return Ok(Progress::Steady(target));
        }
        let waiting = self.waiting_on(&target).await?;
        if waiting.is_empty() {
            let now = now();
            if let Some(entry) = status.history.first_mut() {
                entry.state = "Completed".into();
                entry.completion_time = Some(now);
            }
            status.version_hash = version_hash(&target);
            set(
                status,
                condition(
                    "Progressing",
                    "False",
                    None,
                    &format!("Cluster version is {target}"),
                ),
            );
            set(
                status,
                condition(
                    "Available",
                    "True",
                    None,
                    &format!("Done applying {target}"),
                ),
            );
            set(status, condition("Failing", "False", None, ""));
            self.refresh_upgradeable(status).await?;
            self.write(&cv).await?;
            return Ok(Progress::Completed(target));
        }
        let (reason, lines): (Vec<&str>, Vec<String>) =
            waiting.iter().map(|(r, l)| (*r, l.clone())).unzip();
        let reason = if reason.iter().all(|r| *r == reason[0]) {
            reason[0]
        } else {
            "MultipleErrors"
        };
        let message = format!("Working towards {target}: {}", lines.join("; "));
        let changed = find(&status.conditions, "Progressing").is_none_or(|c| {
            c.message.as_deref() != Some(message.as_str()) || c.reason.as_deref() != Some(reason)
        });
        if changed {
            set(
                status,
                condition("Progressing", "True", Some(reason), &message),
            );
            self.write(&cv).await?;
        }
        Ok(Progress::Waiting(lines))
    }

    /// Calls [`Cvo::try_complete`] every 500 ms until the update completes.
    ///
    /// # Errors
    /// [`CvoError::Timeout`] naming what the update still waits on.
    pub async fn wait_completed(&self, timeout: Duration) -> Result<String, CvoError> {
        let started = Instant::now();
        loop {
            match self.try_complete().await? {
                Progress::Completed(version) | Progress::Steady(version) => return Ok(version),
                Progress::Waiting(waiting) if started.elapsed() >= timeout => {
                    let version = self
                        .cluster_version()
                        .await?
                        .status
                        .map(|s| s.desired.version)
                        .unwrap_or_default();
                    return Err(CvoError::Timeout {
                        version,
                        seconds: timeout.as_secs(),
                        waiting,
                    });
                }
                Progress::Waiting(_) => tokio::time::sleep(Duration::from_millis(500)).await,
            }
        }
    }

    /// Every ClusterOperator reporting `Upgradeable=False`, as `(name, reason, message)`:
    /// what blocks minor and major updates.
    ///
    /// # Errors
    /// When ClusterOperators cannot be listed.
    pub async fn not_upgradeable(&self) -> Result<Vec<(String, String, String)>, CvoError> {
        let cos = Api::<ClusterOperator>::all(self.client.clone())
            .list(&Default::default())
            .await
            .map_err(kube_err("listing ClusterOperators"))?;
        let mut blockers: Vec<(String, String, String)> = cos
            .items
            .iter()
            .filter_map(|co| {
                let c = find(&co.status.as_ref()?.conditions, "Upgradeable")?;
                (c.status == "False").then(|| {
                    let name = co.metadata.name.clone().unwrap_or_default();
                    (
                        name,
                        c.reason.clone().unwrap_or_default(),
                        c.message.clone().unwrap_or_default(),
                    )
                })
            })
            .collect();
        blockers.sort();
        Ok(blockers)
    }

    /// The preconditions of a minor or major update: GiantHop, then Upgradeable.
    async fn minor_update_refusal(
        &self,
        from: &Version,
        to: &Version,
    ) -> Result<Option<(String, String)>, CvoError> {
        if to.major > from.major && !(from.major == 4 && to.major == 5 && to.minor == 0) {
            return Ok(Some((
                "MajorVersionUpdate".into(),
                format!("major version updates from {from} to {to} are not supported"),
            )));
        }
        if to.major == from.major && to.minor > from.minor.saturating_add(1) {
            return Ok(Some((
                "MultipleMinorVersionsUpdate".into(),
                format!(
                    "updating from {from} to {to} crosses more than one minor version; update to {}.{} first",
                    from.major,
                    from.minor + 1
                ),
            )));
        }
        let Some((reason, message)) = upgradeable_summary(&self.not_upgradeable().await?) else {
            return Ok(None);
        };
        Ok(Some((
            reason.clone(),
            format!(
                "Precondition \"ClusterVersionUpgradeable\" failed because of \"{reason}\": {message}"
            ),
        )))
    }

    /// Writes the outcome of the preconditions: a refusal keeps the cluster where it is.
    async fn accept_or_refuse(
        &self,
        cv: &mut ClusterVersion,
        to: &str,
        refusal: Option<(String, String)>,
    ) -> Result<(), CvoError> {
        cv.spec.desired_update = Some(Update {
            version: Some(to.to_owned()),
            image: Some(release(to).image),
            force: Some(false),
        });
        let generation = cv.metadata.generation.unwrap_or(1);
        let status = cv.status.get_or_insert_with(ClusterVersionStatus::default);
        status.observed_generation = generation;
        self.refresh_upgradeable(status).await?;
        if let Some((reason, message)) = refusal {
            let text =
                format!("Preconditions failed for payload loaded version=\"{to}\": {message}");
            set(
                status,
                condition(
                    "ReleaseAccepted",
                    "False",
                    Some("PreconditionChecks"),
                    &text,
                ),
            );
            // The admin's request is recorded even when refused, as `oc adm upgrade` does.
            self.write_spec_and_status(cv).await?;
            return Err(CvoError::Refused {
                version: to.to_owned(),
                reason,
                message,
            });
        }
        let now = now();
        if let Some(open) = status
            .history
            .first_mut()
            .filter(|h| h.completion_time.is_none())
        {
            // A retarget closes the superseded entry; it stays Partial.
            open.completion_time = Some(now.clone());
        }
        status.history.insert(
            0,
            UpdateHistory {
                state: "Partial".into(),
                started_time: now,
                completion_time: None,
                version: to.to_owned(),
                image: release(to).image,
                verified: false,
            },
        );
        status.history.truncate(HISTORY_LIMIT);
        status.desired = release(to);
        set(
            status,
            condition(
                "ReleaseAccepted",
                "True",
                Some("PayloadLoaded"),
                &payload_loaded(to),
            ),
        );
        set(
            status,
            condition(
                "Progressing",
                "True",
                None,
                &format!("Working towards {to}"),
            ),
        );
        self.write_spec_and_status(cv).await
    }

    /// The payload ClusterOperators not done with `target`, as `(CVO reason, message)`.
    async fn waiting_on(&self, target: &str) -> Result<Vec<(&'static str, String)>, CvoError> {
        let api: Api<ClusterOperator> = Api::all(self.client.clone());
        let mut waiting = Vec::new();
        for name in &self.payload {
            let co = api
                .get_opt(name)
                .await
                .map_err(kube_err(format!("reading ClusterOperator {name}")))?;
            let status = co.and_then(|co| co.status).unwrap_or_default();
            if let Some(line) = operator_health(name, &status, target) {
                waiting.push(line);
            }
        }
        Ok(waiting)
    }

    /// Mirrors the CVO's own Upgradeable condition (the old aggregation, which keeps a sole
    /// blocker's reason).
    async fn refresh_upgradeable(&self, status: &mut ClusterVersionStatus) -> Result<(), CvoError> {
        let blockers = self.not_upgradeable().await?;
        match upgradeable_summary(&blockers) {
            Some((reason, message)) => set(
                status,
                condition("Upgradeable", "False", Some(&reason), &message),
            ),
            None => status.conditions.retain(|c| c.type_ != "Upgradeable"),
        }
        Ok(())
    }

    async fn write_spec_and_status(&self, cv: &ClusterVersion) -> Result<(), CvoError> {
        let api: Api<ClusterVersion> = Api::all(self.client.clone());
        let mut spec_only = cv.clone();
        spec_only.status = None;
        let replaced = api
            .replace(CLUSTER_VERSION_NAME, &PostParams::default(), &spec_only)
            .await
            .map_err(kube_err("writing ClusterVersion spec.desiredUpdate"))?;
        let mut with_status = cv.clone();
        with_status.metadata.resource_version = replaced.metadata.resource_version;
        if let Some(status) = with_status.status.as_mut() {
            status.observed_generation = replaced
                .metadata
                .generation
                .unwrap_or(status.observed_generation);
        }
        self.write(&with_status).await
    }

    /// Replaces the whole status (PUT keeps the null `completionTime` the schema requires).
    async fn write(&self, cv: &ClusterVersion) -> Result<(), CvoError> {
        Api::<ClusterVersion>::all(self.client.clone())
            .replace_status(CLUSTER_VERSION_NAME, &PostParams::default(), cv)
            .await
            .map_err(kube_err("writing ClusterVersion status"))?;
        Ok(())
    }
}

/// The CVO's `checkOperatorHealth` for one payload ClusterOperator: `None` when done with
/// `target`, else the reason and message of what is missing. Checked in the CVO's order:
/// versions, Available, then Degraded (explicitly False; missing counts as degraded).
#[must_use]
pub fn operator_health(
    name: &str,
    status: &ClusterOperatorStatus,
    target: &str,
) -> Option<(&'static str, String)> {
    let version = status
        .versions
        .iter()
        .find(|v| v.name == "operator")
        .map(|v| v.version.as_str());
    if version != Some(target) {
        let now = version.unwrap_or("no operator version");
        return Some((
            "ClusterOperatorUpdating",
            format!("Cluster operator {name} is updating versions ({now}, want {target})"),
        ));
    }
    let state = |t: &str| {
        find(&status.conditions, t)
            .map(|c| (c.status.clone(), c.message.clone().unwrap_or_default()))
    };
    match state("Available") {
        Some((s, _)) if s == "True" => {}
        other => {
            let why = other.map_or_else(
                || "no Available condition".to_owned(),
                |(s, m)| format!("Available={s}: {m}"),
            );
            return Some((
                "ClusterOperatorNotAvailable",
                format!("Cluster operator {name} is not available ({why})"),
            ));
        }
    }
    match state("Degraded") {
        Some((s, _)) if s == "False" => None,
        Some((s, m)) => Some((
            "ClusterOperatorDegraded",
            format!("Cluster operator {name} is degraded (Degraded={s}: {m})"),
        )),
        None => Some((
            "ClusterOperatorDegraded",
            format!(
                "Cluster operator {name} is degraded (no Degraded condition: the CVO counts it as degraded)"
            ),
        )),
    }
}

/// The old CVO's aggregation of `Upgradeable=False` ClusterOperators: a sole blocker keeps its
/// reason; several give `ClusterOperatorsNotUpgradeable` and a bulleted list.
fn upgradeable_summary(blockers: &[(String, String, String)]) -> Option<(String, String)> {
    match blockers {
        [] => None,
        [(name, reason, message)] => Some((
            if reason.is_empty() {
                "ClusterOperatorNotUpgradeable".into()
            } else {
                reason.clone()
            },
            format!(
                "Cluster operator {name} should not be upgraded between minor or major versions: {message}"
            ),
        )),
        many => {
            let lines: Vec<String> = many.iter().map(|(name, reason, message)| format!("* Cluster operator {name} should not be upgraded between minor or major versions: {reason}: {message}")).collect();
            Some((
                "ClusterOperatorsNotUpgradeable".into(),
                format!(
                    "Multiple cluster operators should not be upgraded between minor or major versions:\n{}",
                    lines.join("\n")
                ),
            ))
        }
    }
}

/// Creates ClusterOperator `name` if needed and replaces its status: tests use it to play
/// payload operators (or any other operator that may block minor updates).
///
/// # Errors
/// When the API refuses the object or the status.
pub async fn write_cluster_operator(
    client: &Client,
    name: &str,
    status: ClusterOperatorStatus,
) -> Result<(), CvoError> {
    let api: Api<ClusterOperator> = Api::all(client.clone());
    let existing = match api
        .get_opt(name)
        .await
        .map_err(kube_err(format!("reading ClusterOperator {name}")))?
    {
        Some(co) => co,
        None => api
            .create(
                &PostParams::default(),
                &ClusterOperator::new(name, ClusterOperatorSpec {}),
            )
            .await
            .map_err(kube_err(format!("creating ClusterOperator {name}")))?,
    };
    let mut co = existing;
    co.status = Some(status);
    api.replace_status(name, &PostParams::default(), &co)
        .await
        .map_err(kube_err(format!("writing ClusterOperator {name} status")))?;
    Ok(())
}

/// A ClusterOperator condition stamped now; `reason` may be absent (the schema allows it).
#[must_use]
pub fn condition(
    type_: &str,
    status: &str,
    reason: Option<&str>,
    message: &str,
) -> ClusterOperatorStatusCondition {
    ClusterOperatorStatusCondition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        last_transition_time: now(),
        reason: reason.map(str::to_owned),
        message: (!message.is_empty()).then(|| message.to_owned()),
    }
}

/// Sets a condition, keeping `lastTransitionTime` when the status does not change.
fn set(status: &mut ClusterVersionStatus, mut new: ClusterOperatorStatusCondition) {
    match status.conditions.iter_mut().find(|c| c.type_ == new.type_) {
        Some(old) => {
            if old.status == new.status {
                new.last_transition_time = old.last_transition_time.clone();
            }
            *old = new;
        }
        None => status.conditions.push(new),
    }
}

fn find<'a>(
    conditions: &'a [ClusterOperatorStatusCondition],
    type_: &str,
) -> Option<&'a ClusterOperatorStatusCondition> {
    conditions.iter().find(|c| c.type_ == type_)
}

fn completed_version(cv: &ClusterVersion) -> Option<String> {
    cv.status
        .as_ref()?
        .history
        .iter()
        .find(|h| h.state == "Completed")
        .map(|h| h.version.clone())
}

fn parse(version: &str) -> Result<Version, CvoError> {
    Version::parse(version.strip_prefix('v').unwrap_or(version)).map_err(|e| CvoError::BadVersion {
        value: version.to_owned(),
        reason: e.to_string(),
    })
}

/// A release with a stable fake payload image (the digest of the version).
fn release(version: &str) -> Release {
    Release {
        version: version.to_owned(),
        image: format!(
            "quay.io/openshift-release-dev/ocp-release@sha256:{}",
            hex::encode(Sha256::digest(version.as_bytes()))
        ),
    }
}

fn version_hash(version: &str) -> String {
    hex::encode(&Sha256::digest(format!("hash:{version}").as_bytes())[..8])
}

fn payload_loaded(version: &str) -> String {
    format!(
        "Payload loaded version=\"{version}\" image=\"{}\"",
        release(version).image
    )
}

/// Now, at the second precision the API server stores.
fn now() -> Time {
    let seconds = jiff::Timestamp::now().as_second();
    Time(
        k8s_openapi::jiff::Timestamp::from_second(seconds)
            .unwrap_or_else(|_| k8s_openapi::jiff::Timestamp::now()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use pom_api::openshift::OperandVersion;

    fn v(s: &str) -> Version {
        Version::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn update_kinds_follow_the_cvo() {
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.16.4")),
            UpdateKind::Patch
        );
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.17.0")),
            UpdateKind::Minor
        );
        assert_eq!(UpdateKind::of(&v("4.22.3"), &v("5.0.0")), UpdateKind::Major);
        assert_eq!(
            UpdateKind::of(&v("4.16.3"), &v("4.16.2")),
            UpdateKind::Rollback
        );
        assert_eq!(UpdateKind::of(&v("4.16.3"), &v("4.16.3")), UpdateKind::Same);
    }

    #[test]
    fn health_checks_versions_then_available_then_explicit_degraded() {
        let mut status = ClusterOperatorStatus::default();
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorUpdating")
        );
        status.versions.push(OperandVersion {
            name: "operator".into(),
            version: "4.17.0".into(),
        });
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorNotAvailable")
        );
        status
            .conditions
            .push(condition("Available", "True", Some("AsExpected"), "ok"));
        assert_eq!(
            operator_health("x", &status, "4.17.0").map(|h| h.0),
            Some("ClusterOperatorDegraded")
        );
        status
            .conditions
            .push(condition("Degraded", "False", Some("AsExpected"), "ok"));
        assert_eq!(operator_health("x", &status, "4.17.0"), None);
    }

    #[test]
    fn one_blocker_keeps_its_reason() {
        let one = [(
            "a".to_owned(),
            "IncompatibleOperatorsInstalled".to_owned(),
            "move".to_owned(),
        )];
        assert_eq!(
            upgradeable_summary(&one).map(|s| s.0),
            Some("IncompatibleOperatorsInstalled".to_owned())
        );
        let two = [
            one[0].clone(),
            ("b".to_owned(), "X".to_owned(), "y".to_owned()),
        ];
        assert_eq!(
            upgradeable_summary(&two).map(|s| s.0),
            Some("ClusterOperatorsNotUpgradeable".to_owned())
        );
    }
}
