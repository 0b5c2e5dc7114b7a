//! The PlatformOperator reconcile's gather step and the executor of its planned steps.
//!
//! [`gather`] reads everything one reconcile judges from, once ([`Gathered`]); the reconcile
//! then decides ([`pom_policy::decide`]) and plans ([`pom_policy::steps::plan`]), both pure,
//! and hands each [`Step`] to [`Run::execute`]. The executor carries out one step's I/O and
//! records its typed outcome on the [`Run`]; it decides nothing a pure function could (which
//! steps run, whether a check is clean, what settled, what the status says are all in
//! `pom-policy`). A new feature is a new step or a new case of a pure function, never a branch
//! here.

use std::sync::LazyLock;
use std::time::Duration;

use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use pom_api::PlatformOperator;
use pom_api::labels;
use pom_api::platform_operator::InventoryObject;
use pom_api::platform_operator::PlatformOperatorStatus;
use pom_policy::adopt::give_back::{self, Restore};
use pom_policy::adopt::takeover::{self, OlmSource, Pair, TakeOver, TakeOverInput};
use pom_policy::adopt::webhooks;
use pom_policy::namespace_clash::{self, NamespaceClash};
use pom_policy::snapshot::{GuardState, OperatorGate};
use pom_policy::status::{self, ActOutcome, StatusInput};
use pom_policy::steps::{self, Next, PlanInput, Step};
use pom_policy::{Action, PoDecision, PoSnapshot, Problem, inventory};

use super::announce;
use super::gather::{self, ClusterReading, GatheredCatalogs};
use super::install::{self, Content, Target};
use super::quiet;
use super::reconcile::PoContext;
use super::seen_clock::Recorded;
use crate::context::{PO_ANNOTATIONS_FIELD_MANAGER, PO_STATUS_FIELD_MANAGER};
use crate::error::Error;
use crate::fail_point::{self, FailPoint};

/// Everything one reconcile of a PO judges from, read once.
pub(super) struct Gathered {
    /// What a full check starts from (read first: an event from here on makes it stale).
    pub observed: quiet::Observed,
    pub catalogs: GatheredCatalogs,
    /// The last clean full check, when nothing it read has changed.
    pub reusable: Option<quiet::Clean>,
    /// The operator's gate: as the reusable check read it, or read now.
    pub gate: OperatorGate,
    cluster: ClusterReading,
    found_bundle_label: Option<String>,
    guard: GuardState,
    duplicate_of: Option<String>,
    namespace_clash: Option<NamespaceClash>,
    /// The install namespace when it is already fixed ([`fixed_namespace`]), read once for the
    /// OperatorCondition read and the prepare step alike.
    namespace: Option<String>,
    /// What OLM v0's objects say about the installation the PO adopts, while it adopts
    /// ([`pom_policy::adopt::takeover::adopting`]) or gives it back.
    olm: Option<OlmSource>,
    /// The PO adopts (`spec.adoptFrom`, nothing installed yet).
    adopting: bool,
    /// The PO adopted and its first move has not settled
    /// ([`pom_policy::adopt::takeover::handing_over`]).
    handing_over: bool,
    /// The CSV the admin gives the operator back to (`platform.openshift.io/give-back`).
    give_back: Option<String>,
}

impl Gathered {
    /// What the plan is made of besides the decision (`pom_policy::steps::plan`).
    pub fn plan_input<'s>(
        &self,
        po: &'s PlatformOperator,
        decision: &'s PoDecision,
        writes_allowed: bool,
    ) -> PlanInput<'s> {
        static NOTHING_RECORDED: LazyLock<PlatformOperatorStatus> =
            LazyLock::new(PlatformOperatorStatus::default);
        PlanInput {
            decision,
            recorded: po.status.as_ref().unwrap_or(&NOTHING_RECORDED),
            clean_check_reusable: self.reusable.is_some(),
            writes_allowed,
            reported_mark_present: po
                .annotations()
                .contains_key(labels::OPERATOR_CONDITION_REPORTED),
            adopting: self.adopting,
            handing_over: self.handing_over,
            giving_back: self.give_back.is_some(),
        }
    }

    /// The patch update the cluster is asked to take, if any.
    pub fn requested_patch(&self) -> Option<&semver::Version> {
        self.cluster.requested_patch.as_ref()
    }

    /// The PO's snapshot, judged at `Timestamp::now()`.
    pub fn snapshot(&self, po: &PlatformOperator, pctx: &PoContext) -> PoSnapshot<'_> {
        let mut snapshot = gather::snapshot(
            po,
            self.duplicate_of.clone(),
            self.namespace_clash.clone(),
            self.cluster.clone(),
            &self.catalogs,
            self.gate.clone(),
            Timestamp::now(),
            self.found_bundle_label.clone(),
            self.guard.clone(),
            &pctx.ctx.operator_proxy.borrow(),
        );
        // The progress deadline and the soak count from times perhaps another replica wrote:
        // what this manager watched itself bounds them (`pom_policy::clock`).
        if let Some(hop) = snapshot.hop.as_mut() {
            // The replaced move's start first: it was read as `HopStarted` until this move's
            // intent replaced it.
            if let Some(replaced) = hop.replaced.as_mut() {
                replaced.seen_for =
                    pctx.seen
                        .seen_for(&snapshot.name, Recorded::ReplacedStarted, replaced.at);
            }
            hop.started_seen_for =
                pctx.seen
                    .seen_for(&snapshot.name, Recorded::HopStarted, hop.started_at);
            hop.settled_seen_for = hop.settled_at.map_or(Duration::ZERO, |at| {
                pctx.seen.seen_for(&snapshot.name, Recorded::Settled, at)
            });
        }
        snapshot
    }
}

/// Gathers what `po`'s reconcile judges from; `None` while the Catalog objects have not been
/// listed once (an empty store right after a start would read as "no Catalog" and judge a
/// running operator on nothing).
pub(super) async fn gather(
    po: &PlatformOperator,
    pctx: &PoContext,
) -> Result<Option<Gathered>, Error> {
    let ctx = &pctx.ctx;
    let name = po.name_any();
    // Right after a start: not before the owned-object watches have listed (bounded).
    pctx.first_checks.settled().await;
    let observed = quiet::Observed {
        epoch: pctx.checks.epoch(&name),
        catalogs: ctx.catalogs.package_generation(&po.spec.package.name),
        generation: po.metadata.generation,
    };
    pctx.stage(&name, "gather: catalog store");
    if pctx.catalog_objects_ready.wait().await.is_err() {
        return Ok(None);
    }
    pctx.stage(&name, "gather: cluster view");
    let cluster = pctx.cluster.view().await?;
    let catalogs = gather_catalogs(po, pctx);
    let installed = installed_name(po);
    let namespace = fixed_namespace(po);
    // A clean full check still holds when nothing it read has changed: its gate is current
    // (an OperatorCondition event would have made it stale) and no read is needed.
    let reusable = pctx.checks.reusable(&name, &observed, installed);
    let gate = match &reusable {
        Some(clean) => clean.gate.clone(),
        None => {
            pctx.stage(&name, "gather: operator condition");
            let namespace = namespace.clone().unwrap_or_else(|| name.clone());
            gather::operator_gate(&ctx.client, &pctx.first_checks, po, &namespace, installed)
                .await?
        }
    };
    pctx.stage(&name, "gather: objects of a lost status");
    let found_bundle_label = gather::found_bundle_label(&ctx.client, &pctx.kinds, po).await?;
    // The owner label of the namespace it watches, when that can have changed: any change of a
    // labelled Namespace makes the watcher's clean check stale (`reconcile.rs`), and a refused
    // PO never keeps one.
    let watched_owner = match &reusable {
        Some(_) => None,
        None => {
            pctx.stage(&name, "gather: watched namespace");
            gather::watched_namespace_owner(&ctx.client, po).await?
        }
    };
    let adopting = takeover::adopting(po).is_some();
    let handing_over = takeover::handing_over(po);
    let give_back = po.annotations().get(labels::GIVE_BACK).cloned();
    let olm = match po.spec.adopt_from.as_ref() {
        Some(from) if adopting || handing_over || give_back.is_some() => {
            pctx.stage(&name, "gather: the OLM v0 installation adopted");
            let moved_to = po
                .status
                .as_ref()
                .and_then(|s| s.active_hop.as_ref())
                .map(|hop| hop.to.as_str());
            Some(gather::olm_source(&ctx.client, from, moved_to).await?)
        }
        _ => None,
    };
    pctx.stage(&name, "gather: admission guard");
    let guard = pctx
        .state
        .admission_guard(ctx.settings.require_admission_guard)
        .await;
    Ok(Some(Gathered {
        observed,
        catalogs,
        reusable,
        gate,
        cluster,
        found_bundle_label,
        guard,
        duplicate_of: pctx.duplicate_winner(po),
        namespace_clash: pctx.namespace_clash(po, watched_owner.as_deref()),
        namespace,
        olm,
        adopting,
        handing_over,
        give_back,
    }))
}

/// The Catalogs `po` may resolve from, as the catalog cache holds them.
fn gather_catalogs(po: &PlatformOperator, pctx: &PoContext) -> GatheredCatalogs {
    let known: Vec<String> = pctx
        .catalog_objects
        .state()
        .iter()
        .map(|c| c.name_any())
        .collect();
    gather::catalogs(
        &pctx.ctx.catalogs,
        &po.spec.package.name,
        po.spec.package.catalog.as_deref(),
        &known,
    )
}

/// The installed bundle's name, as the status records it.
fn installed_name(po: &PlatformOperator) -> Option<&str> {
    po.status
        .as_ref()
        .and_then(|s| s.installed_bundle.as_ref())
        .map(|b| b.name.as_str())
}

/// The install namespace when it is already fixed: as recorded at the first install; else as
/// the spec names it; else, for a PO installed before POM recorded it, its name. `None`: the
/// bundle's suggestion, chosen when the bundle is read. The same rule judges namespace clashes.
fn fixed_namespace(po: &PlatformOperator) -> Option<String> {
    namespace_clash::known_install_namespace(po)
}

/// The owner labels POM puts on what it applies (`labels::owner_labels`): what giving back
/// removes.
const POM_LABELS: &[&str] = &[
    labels::OWNER_PO,
    labels::PACKAGE,
    labels::BUNDLE,
    labels::MANAGED_BY,
];

/// Whether the status recorded an inventory before the status write.
#[derive(Debug, Clone, Copy)]
struct InventoryBefore(bool);

/// One reconcile in flight: what it judged, and what each step found so far.
pub(super) struct Run<'a> {
    po: &'a PlatformOperator,
    pctx: &'a PoContext,
    name: String,
    gathered: &'a Gathered,
    snapshot: &'a PoSnapshot<'a>,
    decision: &'a PoDecision,
    /// The status as recorded: as read, then as the intent wrote it.
    recorded: PlatformOperatorStatus,
    /// What [`Step::Prepare`] readied, until [`Step::Apply`] takes it.
    prepared: Option<(Target, install::Prepared)>,
    /// The namespace the prepared bundle installs into.
    applied_namespace: Option<String>,
    outcome: ActOutcome,
    /// The status [`Step::Report`] computed.
    reported: Option<PlatformOperatorStatus>,
    /// Set once [`Step::WriteStatus`] wrote (or found nothing to write): whether the status
    /// held an inventory before it. Without one, prune sweeps by owner label (a PO installed by
    /// a manager that kept none); `None` (no status written) prunes nothing, so no plan can
    /// prune before a settled status is recorded.
    status_written: Option<InventoryBefore>,
    /// The namespace [`Step::Withdraw`] emptied: the status reports no inventory there.
    withdrawn: Option<String>,
    /// What [`Step::ProveAdoption`] proved, for [`Step::ReleaseFromOlm`].
    adoption: Option<TakeOver>,
    /// What [`Step::JudgeOlmWebhooks`] found: OLM's webhook configurations POM's replace,
    /// for [`Step::RetireOlmWebhooks`].
    retire: Vec<webhooks::Retire>,
    /// The serving Secrets [`Step::Apply`] held back while adopting, for
    /// [`Step::RetireOlmWebhooks`] to write once OLM's configurations are retired.
    held_secrets: Option<install::HeldSecrets>,
    /// What [`Step::GiveBack`] handed to OLM v0: the status no longer records it.
    given_back: Vec<InventoryObject>,
}

impl<'a> Run<'a> {
    pub fn new(
        po: &'a PlatformOperator,
        pctx: &'a PoContext,
        gathered: &'a Gathered,
        snapshot: &'a PoSnapshot<'a>,
        decision: &'a PoDecision,
    ) -> Self {
        Self {
            po,
            pctx,
            name: po.name_any(),
            gathered,
            snapshot,
            decision,
            recorded: po.status.clone().unwrap_or_default(),
            prepared: None,
            applied_namespace: None,
            outcome: ActOutcome::Skipped,
            reported: None,
            status_written: None,
            withdrawn: None,
            adoption: None,
            retire: Vec::new(),
            held_secrets: None,
            given_back: Vec::new(),
        }
    }

    /// Carries out `step`; `Some(delay)` ends the reconcile with a requeue after `delay`.
    pub async fn execute(&mut self, step: Step) -> Result<Option<Duration>, Error> {
        self.pctx.stage(&self.name, step.name());
        match step {
            Step::FinishInterruptedPrune { bundle } => {
                self.finish_interrupted_prune(&bundle).await?
            }
            Step::ReuseCleanCheck => self.reuse_clean_check(),
            Step::Prepare => self.prepare().await,
            Step::ProveAdoption => self.prove_adoption(),
            Step::JudgeOlmWebhooks => self.judge_olm_webhooks(),
            Step::ReleaseFromOlm => self.release_from_olm().await?,
            Step::GiveBack => self.give_back().await?,
            Step::RecordIntent => self.record_intent().await?,
            Step::AnnounceMove => self.announce_move().await,
            Step::Apply => self.apply().await,
            Step::RetireOlmWebhooks => self.retire_olm_webhooks().await?,
            Step::MarkReported => self.mark_reported().await?,
            Step::Withdraw { namespace } => self.withdraw(&namespace).await?,
            Step::Report => self.report(),
            Step::RememberCleanCheck => self.remember_clean_check(),
            Step::WriteStatus => self.write_status().await?,
            Step::PruneAfterSettle => self.prune_after_settle().await?,
            Step::Requeue(next) => return Ok(Some(self.delay(next))),
        }
        Ok(None)
    }

    async fn finish_interrupted_prune(&self, bundle: &str) -> Result<(), Error> {
        tracing::info!(po = %self.name, %bundle, "finishing an interrupted prune before the next move");
        let recorded_before = !self.recorded.inventory.is_empty();
        prune_settled(self.po, self.pctx, &self.recorded, bundle, recorded_before).await
    }

    /// Nothing the last full check read has changed: what it found still holds.
    fn reuse_clean_check(&mut self) {
        if let Some(clean) = &self.gathered.reusable {
            self.outcome = ActOutcome::Applied(Box::new(clean.report.clone()));
        }
    }

    async fn prepare(&mut self) {
        match prepare(
            self.pctx,
            self.po,
            self.snapshot,
            self.decision,
            self.gathered,
        )
        .await
        {
            Err(problem) => self.fail(problem),
            Ok(None) => self.outcome = ActOutcome::Skipped,
            Ok(Some((target, prepared))) => {
                self.applied_namespace = Some(prepared.namespace().to_owned());
                self.prepared = Some((target, prepared));
            }
        }
    }

    /// The prepared objects against what OLM v0 runs (`pom_policy::adopt::prove`, pure): not
    /// proven, the prepared bundle is dropped, so no later step writes anything.
    fn prove_adoption(&mut self) {
        let Some((target, prepared)) = &self.prepared else {
            return;
        };
        let Some(olm) = &self.gathered.olm else {
            return;
        };
        let bundle = target.name.clone();
        let view = prepared.adoption_view();
        let install_namespace = prepared.live_namespace();
        let pairs = Pair::all(&view);
        let proven = takeover::prove(&TakeOverInput {
            po: &self.name,
            package: &self.po.spec.package.name,
            bundle: &bundle,
            olm,
            objects: &pairs,
            guarded: self.gathered.guard.enforces_hand_over(),
            install_namespace: install_namespace.as_ref(),
        });
        match proven {
            Ok(adoption) => {
                tracing::info!(po = %self.name, subscription = %olm.subscription, %bundle,
                    take_over = adoption.take_over.len(), create = adoption.create.len(),
                    "adoption proven: what OLM v0 runs is what POM applies");
                self.adoption = Some(adoption);
            }
            Err(not_proven) => {
                self.prepared = None;
                self.applied_namespace = None;
                self.fail(Problem {
                    reason: pom_api::conditions::Reason::AdoptionNotProven,
                    message: format!(
                        "adopting {bundle} from Subscription {}: {not_proven}",
                        olm.subscription
                    ),
                    degrades: true,
                });
            }
        }
    }

    /// Moves each proven object from OLM to POM: one conditional patch each, after the intent
    /// (a crash resumes: the next reconcile proves again, reading what it released as this
    /// PO's) and before the apply. The serving Secrets go first: never read, theirs are the
    /// writes the proof could not check (the guard's annotation, OLM's owner reference), so a
    /// refusal there leaves every other object OLM's.
    async fn release_from_olm(&mut self) -> Result<(), Error> {
        let (Some(adoption), Some((target, _))) = (&self.adoption, &self.prepared) else {
            return Ok(());
        };
        let client = &self.pctx.ctx.client;
        let ours = labels::owner_labels(&self.name, &self.po.spec.package.name, Some(&target.name));
        let params = PatchParams {
            field_manager: Some(crate::context::BUNDLE_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let csv = target.name.as_str();
        for release in &adoption.unread_releases {
            release_unread(client, release, (&self.name, csv, &ours), &params).await?;
        }
        for release in &adoption.releases {
            let key = &release.key;
            let (group, version) = key
                .api_version
                .split_once('/')
                .unwrap_or(("", key.api_version.as_str()));
            let gvk = kube::core::GroupVersionKind::gvk(group, version, &key.kind);
            let (api, _) = self
                .pctx
                .kinds
                .api(client, &gvk, key.namespace.as_deref())
                .await?;
            let patch = takeover::release_patch(release, &ours);
            api.patch(&key.name, &params, &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!("releasing {key} from OLM v0")))?;
        }
        tracing::info!(po = %self.name, released = adoption.releases.len(), "released the adopted objects from OLM v0");
        Ok(())
    }

    /// Which of OLM's webhook configurations POM's replace (`webhooks::retire`, pure): each
    /// is retired once POM's are registered, whether OLM's CSV still exists or not (OLM v0
    /// cannot install over what adoption released: `ownerutil.Adoptable` refuses an object
    /// with no owner, so its reinstall stops at the serving Service before it writes a
    /// configuration or the Secret); one POM renders no counterpart of stops the move,
    /// unwritten.
    fn judge_olm_webhooks(&mut self) {
        let (Some((_, prepared)), Some(olm)) = (&self.prepared, self.gathered.olm.as_ref()) else {
            return;
        };
        let view = prepared.adoption_view();
        let pairs = Pair::all(&view);
        match webhooks::retire(&olm.webhook_configurations, &pairs) {
            Ok(retire) => self.retire = retire,
            Err(not_proven) => {
                self.prepared = None;
                self.applied_namespace = None;
                self.fail(Problem {
                    reason: pom_api::conditions::Reason::AdoptionNotProven,
                    message: format!("retiring OLM v0's webhook configurations: {not_proven}"),
                    degrades: true,
                });
            }
        }
    }

    /// After the apply: deletes OLM's webhook configurations POM's replace, each conditional on
    /// the resourceVersion read (a changed one is left, and the reconcile fails before its
    /// status write, so the next one judges again); then writes the serving Secrets the apply
    /// held back ([`install::HeldSecrets`]: only where no configuration trusting OLM's CA
    /// alone is left registered).
    async fn retire_olm_webhooks(&mut self) -> Result<(), Error> {
        let ActOutcome::Applied(report) = &mut self.outcome else {
            return Ok(());
        };
        let retire = std::mem::take(&mut self.retire);
        if retire.is_empty() {
            return Ok(());
        }
        if !webhooks::retire_now(&report.waits) {
            return Err(Error::WebhookHandOverPending {
                count: retire.len(),
            });
        }
        self.delete_olm_webhooks(&retire).await?;
        self.write_held_secrets().await
    }

    /// Deletes OLM's webhook configurations POM's replace (`retire_olm_webhooks`).
    async fn delete_olm_webhooks(&self, retire: &[webhooks::Retire]) -> Result<(), Error> {
        let client = &self.pctx.ctx.client;
        for retire in retire {
            let key = &retire.key;
            let params = kube::api::DeleteParams {
                preconditions: Some(kube::api::Preconditions {
                    resource_version: retire.resource_version.clone(),
                    uid: None,
                }),
                ..kube::api::DeleteParams::default()
            };
            let gvk =
                kube::core::GroupVersionKind::gvk("admissionregistration.k8s.io", "v1", &key.kind);
            let (api, _) = self.pctx.kinds.api(client, &gvk, None).await?;
            match api.delete(&key.name, &params).await {
                Ok(_) => {}
                Err(kube::Error::Api(status)) if status.code == 404 => {}
                Err(err) => {
                    return Err(Error::kube(format!(
                        "deleting {key}, OLM v0's, which POM's replaces"
                    ))(err));
                }
            }
        }
        tracing::info!(po = %self.name, retired = retire.len(), "deleted OLM v0's webhook configurations POM's replace");
        Ok(())
    }

    /// Hands the adopted operator back to OLM v0 (`pom_policy::adopt::give_back`): judged
    /// first, every recorded object read and judged before the first write (a refusal writes
    /// nothing), then one conditional patch per object. Done, the outcome is a problem that does
    /// not degrade (`GivenBack`: the operator runs, OLM's again) and the report drops what went
    /// back from the inventory, so deleting the PO deletes only what POM created.
    async fn give_back(&mut self) -> Result<(), Error> {
        let Some(owner) = self.judge_give_back() else {
            return Ok(());
        };
        let plan = match self.read_give_back(&owner).await? {
            Ok(plan) => plan,
            Err(refused) => {
                self.refuse_give_back(&refused);
                return Ok(());
            }
        };
        let given = plan.writes.len();
        let created = plan.created;
        let mut gone = plan.gone;
        gone.extend(self.write_give_back(plan.writes).await?);
        tracing::info!(po = %self.name, csv = %owner.csv, given, created, "gave the adopted operator back to OLM v0");
        self.given_back = gone;
        self.outcome = ActOutcome::Failed(Problem {
            reason: pom_api::conditions::Reason::GivenBack,
            message: format!(
                "given back to OLM v0: ClusterServiceVersion {}/{} owns what it owned before adoption again, and POM applies nothing while the platform.openshift.io/give-back annotation is set; delete this PlatformOperator (it deletes only the {created} objects POM created itself)",
                owner.namespace, owner.csv
            ),
            degrades: false,
        });
        Ok(())
    }

    /// Whether the give-back asked for can be done (`give_back::csv_to_give_back`, then
    /// `give_back::judge`); refused, the outcome says why and `None` writes nothing.
    fn judge_give_back(&mut self) -> Option<give_back::Owner> {
        let requested = self.gathered.give_back.as_deref()?;
        let judged = give_back::csv_to_give_back(self.po).and_then(|installed| {
            give_back::judge(&give_back::GiveBackInput {
                po: &self.name,
                requested,
                installed: Some(installed),
                olm: self.gathered.olm.as_ref(),
            })
        });
        match judged {
            Ok(owner) => Some(owner),
            Err(refused) => {
                self.refuse_give_back(&refused);
                None
            }
        }
    }

    /// Every recorded object, CRDs included (OLM marked them too), once, and the install
    /// namespace adoption labelled as this PO's (the inventory does not record it): read and
    /// judged (`give_back::restore`) before any write.
    async fn read_give_back(
        &self,
        owner: &give_back::Owner,
    ) -> Result<Result<GiveBackPlan, give_back::Refused>, Error> {
        let client = &self.pctx.ctx.client;
        let mut recorded: std::collections::BTreeSet<InventoryObject> = self
            .recorded
            .inventory
            .iter()
            .flat_map(|e| e.objects.iter().cloned())
            .collect();
        recorded.insert(InventoryObject {
            api_version: "v1".to_owned(),
            kind: "Namespace".to_owned(),
            namespace: None,
            name: owner.namespace.clone(),
        });
        let mut plan = GiveBackPlan::default();
        for object in recorded {
            // Secrets are never read (issue 22 item 3): POM's own, as adoption takes none.
            if object.api_version == "v1" && object.kind == "Secret" {
                plan.created += 1;
                continue;
            }
            let Some(api) = super::objects::api_of(&self.pctx.kinds, client, &object).await? else {
                continue;
            };
            let live = api
                .get_opt(&object.name)
                .await
                .map_err(Error::kube(format!("reading {}", object.describe())))?;
            let Some(live) = live.and_then(|l| serde_json::to_value(l).ok()) else {
                plan.gone.push(object);
                continue;
            };
            let key = pom_policy::adopt::ObjectKey {
                api_version: object.api_version.clone(),
                kind: object.kind.clone(),
                namespace: object.namespace.clone(),
                name: object.name.clone(),
            };
            let restored = give_back::restore(
                &key,
                &live,
                (&self.name, &self.po.spec.package.name),
                owner,
                POM_LABELS,
            );
            match restored {
                Err(refused) => return Ok(Err(refused)),
                Ok(Restore::Give(patch)) => plan.writes.push((object, api, patch)),
                Ok(Restore::NotOurs) => plan.gone.push(object),
                Ok(Restore::Created) => plan.created += 1,
            }
        }
        Ok(Ok(plan))
    }

    /// The give-back's writes, one conditional merge patch each; what was written.
    async fn write_give_back(
        &self,
        writes: Vec<(
            InventoryObject,
            Api<kube::api::DynamicObject>,
            serde_json::Value,
        )>,
    ) -> Result<Vec<InventoryObject>, Error> {
        let params = PatchParams {
            field_manager: Some(crate::context::BUNDLE_FIELD_MANAGER.to_owned()),
            ..PatchParams::default()
        };
        let mut given = Vec::with_capacity(writes.len());
        for (object, api, patch) in writes {
            api.patch(&object.name, &params, &Patch::Merge(&patch))
                .await
                .map_err(Error::kube(format!(
                    "giving {} back to OLM v0",
                    object.describe()
                )))?;
            given.push(object);
        }
        Ok(given)
    }

    fn refuse_give_back(&mut self, refused: &give_back::Refused) {
        self.fail(Problem {
            reason: pom_api::conditions::Reason::GiveBackRefused,
            message: format!("not given back to OLM v0: {refused}"),
            degrades: true,
        });
    }

    async fn record_intent(&mut self) -> Result<(), Error> {
        let (Some((_, prepared)), Some(namespace)) = (&self.prepared, &self.applied_namespace)
        else {
            return Ok(());
        };
        let applying = prepared.inventory(namespace);
        let intent = status::intent(&StatusInput {
            applying: &applying,
            applying_image: prepared.image(),
            applying_namespace: Some(namespace),
            ..self.status_input(&ActOutcome::Skipped)
        });
        if let Some(intent) = intent {
            write_status(self.po, self.pctx, &self.recorded, intent.clone()).await?;
            self.recorded = intent;
        }
        Ok(())
    }

    async fn announce_move(&self) {
        let Some((target, prepared)) = &self.prepared else {
            return;
        };
        announce::exceptions(self.po, self.pctx, &target.name, &prepared.lifted()).await;
        announce::render_warnings(self.po, self.pctx, &target.name, prepared.warnings()).await;
        if let Some(details) = prepared.crd_safety_overridden() {
            announce::crd_safety_override(self.po, self.pctx, &target.name, details).await;
        }
        if let Some(action) = &self.decision.unsettled_move_action {
            announce::unsettled_move_action(self.po, self.pctx, action, &target.name).await;
        }
    }

    async fn apply(&mut self) {
        let (Some((target, prepared)), Some(namespace)) =
            (self.prepared.take(), self.applied_namespace.clone())
        else {
            return;
        };
        let ctx = &self.pctx.ctx;
        let rolls = prepared.serving_rolls().to_vec();
        let applied = install::apply(
            ctx,
            self.po,
            &namespace,
            &target,
            prepared,
            &self.pctx.applied_secrets,
        )
        .await;
        match applied {
            Ok((report, held_secrets)) => {
                self.held_secrets = Some(held_secrets);
                if report.wrote > 0 {
                    fail_point::hit(FailPoint::BetweenApplyAndStatus);
                    tracing::info!(po = %self.name, bundle = %report.bundle.name, objects = report.wrote, "applied bundle objects");
                }
                if let Content::Objects(objects) = &target.content {
                    self.pctx.remember_objects(&target.name, objects);
                }
                announce::serving_rolls(self.po, self.pctx, &namespace, &rolls).await;
                self.outcome = ActOutcome::Applied(Box::new(report));
                // Nothing of OLM's to retire first (judged none, or not handing over): the
                // held Secrets now, else after `Step::RetireOlmWebhooks`.
                if self.retire.is_empty()
                    && let Err(err) = self.write_held_secrets().await
                {
                    self.fail(problem_of(&err, true));
                }
            }
            Err(err) => self.fail(problem_of(&err, true)),
        }
    }

    /// Writes the serving Secrets the apply held back while adopting, once POM's
    /// configurations are registered (else the next reconcile writes them).
    async fn write_held_secrets(&mut self) -> Result<(), Error> {
        let ActOutcome::Applied(report) = &mut self.outcome else {
            return Ok(());
        };
        let Some(held) = self.held_secrets.take().filter(|h| !h.is_empty()) else {
            return Ok(());
        };
        if webhooks::retire_now(&report.waits) {
            report.wrote += install::write_held_secrets(held, &self.pctx.applied_secrets).await?;
        }
        Ok(())
    }

    /// The act failed: what ran before keeps running.
    fn fail(&mut self, problem: Problem) {
        tracing::warn!(po = %self.name, reason = %problem.reason, message = %problem.message, "applying the decision failed; what ran before keeps running");
        self.outcome = ActOutcome::Failed(problem);
    }

    async fn mark_reported(&self) -> Result<(), Error> {
        if steps::marks_reported(self.snapshot.gate.reported, &self.outcome) {
            let written = mark_reported(&self.pctx.ctx.client, &self.name).await?;
            self.pctx.remember_write(&self.name, &written);
        }
        Ok(())
    }

    /// Deletes what the inventory records in `namespace` (another PO's, this one refused to
    /// watch it) and drops it from the inventory the report carries; a failed deletion fails
    /// the reconcile, which retries (the inventory still names what is left).
    async fn withdraw(&mut self, namespace: &str) -> Result<(), Error> {
        let doomed = inventory::in_namespace(&self.recorded.inventory, namespace);
        let deleted = super::objects::delete_recorded(
            &self.pctx.kinds,
            &self.pctx.ctx.client,
            &self.name,
            &doomed,
            FailPoint::MidPrune,
        )
        .await?;
        tracing::warn!(po = %self.name, %namespace, deleted, "withdrew what a refused watcher had applied in another PlatformOperator's namespace");
        self.withdrawn = Some(namespace.to_owned());
        Ok(())
    }

    fn report(&mut self) {
        let mut reported = status::compute(&StatusInput {
            applying_namespace: self.applied_namespace.as_deref(),
            ..self.status_input(&self.outcome)
        });
        if let Some(namespace) = &self.withdrawn {
            reported.inventory = inventory::without_namespace(&reported.inventory, namespace);
        }
        if !self.given_back.is_empty() {
            reported.inventory = inventory::without_objects(&reported.inventory, &self.given_back);
        }
        self.reported = Some(reported);
    }

    /// A full check of what runs that wrote nothing and found it settled can stand for the
    /// next reconciles until something it read changes.
    /// A check gathered while adopting or handing over judged by the hand-over's rules (the
    /// serving pods' template kept as OLM left it, `serving_roll`): not a clean check of the
    /// operator installed, so the first reconcile after the hand-over settled checks anew.
    fn remember_clean_check(&self) {
        let checks = &self.pctx.checks;
        let handing_over = self.gathered.adopting || self.gathered.handing_over;
        match (&self.outcome, &self.reported) {
            (ActOutcome::Applied(report), Some(status))
                if !handing_over
                    && steps::keeps_clean_check(self.decision, &self.outcome, status) =>
            {
                checks.record(
                    &self.name,
                    quiet::Clean {
                        observed: self.gathered.observed,
                        bundle: report.bundle.name.clone(),
                        gate: self.gathered.gate.clone(),
                        report: (**report).clone(),
                        checked_at: std::time::Instant::now(),
                    },
                );
            }
            _ => checks.forget(&self.name),
        }
    }

    async fn write_status(&mut self) -> Result<(), Error> {
        let Some(status) = &self.reported else {
            return Ok(());
        };
        let before = InventoryBefore(!self.recorded.inventory.is_empty());
        write_status(self.po, self.pctx, &self.recorded, status.clone()).await?;
        self.status_written = Some(before);
        Ok(())
    }

    /// Prune after settle (§6, §7): what the bundle moved from still owns stays until the move
    /// has settled; a failed or unsettled move removes nothing.
    async fn prune_after_settle(&self) -> Result<(), Error> {
        let (Some(status), Some(InventoryBefore(recorded_before))) =
            (&self.reported, self.status_written)
        else {
            return Ok(());
        };
        match steps::settled_on(&self.outcome, status) {
            Some(bundle) => {
                prune_settled(self.po, self.pctx, status, &bundle, recorded_before).await
            }
            None => Ok(()),
        }
    }

    fn delay(&self, next: Next) -> Duration {
        let resync = self.pctx.ctx.settings.resync_interval;
        match (next.fixed_delay(), &self.reported) {
            (Some(delay), _) => delay,
            (None, Some(status)) => {
                status::requeue(status, &self.outcome, resync, self.snapshot.now)
            }
            (None, None) => resync,
        }
    }

    /// What the status is computed from, with `outcome`.
    fn status_input<'s>(&'s self, outcome: &'s ActOutcome) -> StatusInput<'s> {
        StatusInput {
            applying: &[],
            applying_image: None,
            applying_namespace: None,
            previous: &self.recorded,
            generation: self.po.metadata.generation,
            now: self.snapshot.now,
            decision: self.decision,
            outcome,
            upgrade_gate: self.po.spec.upgrade_gate,
            reported_before: self.snapshot.gate.reported,
            auto_settle_window: self.pctx.ctx.settings.auto_settle_window,
            rolled_out_seen_for: self
                .recorded
                .active_hop
                .as_ref()
                .and_then(|hop| hop.rolled_out_at.as_ref())
                .map_or(Duration::ZERO, |at| {
                    self.pctx
                        .seen
                        .seen_for(&self.snapshot.name, Recorded::RolledOut, at.0)
                }),
            settled_seen_for: self
                .recorded
                .active_hop
                .as_ref()
                .and_then(|hop| hop.settled_at.as_ref())
                .map_or(Duration::ZERO, |at| {
                    self.pctx
                        .seen
                        .seen_for(&self.snapshot.name, Recorded::Settled, at.0)
                }),
        }
    }
}

/// The bundle the decision puts on the cluster, fetched, rendered and checked (nothing
/// written): `None` when there is nothing to put; a problem says why it cannot be (what ran
/// before keeps running).
/// Releases one of OLM's serving Secrets unread: the JSON patches of
/// `webhooks::unread_release_patches`, in order, until the API server accepts one (a refused
/// `test` is a 422 and writes nothing; the admission guard's refusal a 403 or 422). An absent
/// Secret has nothing to release (the apply creates it).
async fn release_unread(
    client: &kube::Client,
    release: &webhooks::UnreadRelease,
    (po, csv, ours): (&str, &str, &std::collections::BTreeMap<String, String>),
    params: &PatchParams,
) -> Result<(), Error> {
    let key = &release.key;
    let namespace = key.namespace.clone().unwrap_or_default();
    let api = Api::<k8s_openapi::api::core::v1::Secret>::namespaced(client.clone(), &namespace);
    let mut why = String::new();
    for patch in webhooks::unread_release_patches(release, ours) {
        let patch: json_patch::Patch = serde_json::from_value(patch).map_err(|e| {
            Error::kube(format!("releasing {key} from OLM v0"))(kube::Error::SerdeError(e))
        })?;
        match api
            .patch(&key.name, params, &Patch::<()>::Json(patch))
            .await
        {
            Ok(_) => return Ok(()),
            Err(kube::Error::Api(status)) if status.code == 404 => return Ok(()),
            Err(kube::Error::Api(status)) if matches!(status.code, 403 | 422) => {
                why = status.message;
            }
            Err(err) => return Err(Error::kube(format!("releasing {key} from OLM v0"))(err)),
        }
    }
    Err(Error::SecretNotReleased {
        namespace,
        name: key.name.clone(),
        csv: csv.to_owned(),
        po: po.to_owned(),
        why,
    })
}

/// What giving back writes, judged before the first write (`Run::read_give_back`).
#[derive(Default)]
struct GiveBackPlan {
    /// Each object handed back, with its API and its patch.
    writes: Vec<(
        InventoryObject,
        Api<kube::api::DynamicObject>,
        serde_json::Value,
    )>,
    /// Recorded objects no longer this PO's (gone, or not POM's): the status drops them.
    gone: Vec<InventoryObject>,
    /// What POM created itself: it stays POM's.
    created: usize,
}

async fn prepare(
    pctx: &PoContext,
    po: &PlatformOperator,
    snapshot: &PoSnapshot<'_>,
    decision: &PoDecision,
    gathered: &Gathered,
) -> Result<Option<(Target, install::Prepared)>, Problem> {
    let Some(target) = target_of(pctx, po, snapshot, decision, &gathered.catalogs)? else {
        return Ok(None);
    };
    let certificates = pctx
        .cluster
        .discovery()
        .await
        .map_err(|err| problem_of(&err, true))?
        .certificates;
    // OLM v0's CA, trusted beside POM's after an adoption (`webhooks::trusted_olm_ca`), and
    // what the serving pod templates' annotation is decided by (`serving_roll`).
    let olm_trust = super::webhook_certs::OlmTrust {
        read: gathered.olm.as_ref().and_then(|o| o.ca_bundle.clone()),
        // Until the adoption settles, its serving Secrets may be held back (`install::apply`):
        // no pod may start before POM's certificate is in them.
        adopting: gathered.adopting || gathered.handing_over,
        hopping: matches!(decision.action, Action::Move(_))
            && snapshot
                .installed
                .as_ref()
                .is_some_and(|installed| installed.bundle.name != target.name),
    };
    let reads = install::Reads {
        kinds: &pctx.kinds,
        first: &pctx.first_checks,
        served: &pctx.served_apis,
    };
    let prepared = install::prepare(
        &pctx.ctx,
        &reads,
        po,
        gathered.namespace.as_deref(),
        &target,
        (certificates, &olm_trust),
        decision.config.as_ref().unwrap_or(&snapshot.config.desired),
        snapshot.now,
        &install::OtherPos {
            po_exists: &|owner: &str| pctx.is_po_owner_label(owner),
            install_clash: &|namespace: &str| pctx.install_clash(po, namespace),
        },
    )
    .await;
    // Its first full check since the start is done (read from the snapshot or not).
    pctx.first_checks.checked(&po.name_any());
    let prepared = prepared.map_err(|err| problem_of(&err, true))?;
    Ok(Some((target, prepared)))
}

/// What the decision puts on the cluster: the move's target, or what runs (drift repair).
fn target_of(
    pctx: &PoContext,
    po: &PlatformOperator,
    snapshot: &PoSnapshot<'_>,
    decision: &PoDecision,
    catalogs: &GatheredCatalogs,
) -> Result<Option<Target>, Problem> {
    let contents = catalogs.contents();
    match &decision.action {
        Action::Nothing | Action::WaitForCatalog { .. } => Ok(None),
        Action::Move(target) => {
            let mut target =
                Target::for_move(target, &contents).map_err(|err| problem_of(&err, true))?;
            // A move recorded before a crash applies the digest its intent recorded, not what
            // the catalog's tag names now: the running operator only changes through a move.
            if let Some(digest) = recorded_digest(po, &target.name)
                && matches!(target.content, Content::Image(_))
            {
                target.content = Content::Image(digest);
            }
            Ok(Some(target))
        }
        Action::Keep => {
            let Some(installed) = &snapshot.installed else {
                return Ok(None);
            };
            let max = installed.max_openshift_version.clone();
            match Target::for_keep(&installed.bundle, max.clone(), &contents) {
                Ok(target) => Ok(Some(target)),
                Err(err) => match pctx.remembered_objects(&installed.bundle.name) {
                    Some(objects) => Ok(Some(Target {
                        name: installed.bundle.name.clone(),
                        version: installed.bundle.version.clone(),
                        content: Content::Objects(objects.to_vec()),
                        max_openshift_version: max,
                        catalog: None,
                    })),
                    // What runs keeps running; only its repair is lost (not a failure of it).
                    None => Err(problem_of(&err, false)),
                },
            }
        }
    }
}

/// The image digest the intent of the unsettled move to `bundle` recorded.
fn recorded_digest(po: &PlatformOperator, bundle: &str) -> Option<String> {
    po.status
        .as_ref()
        .and_then(|s| s.active_hop.as_ref())
        .filter(|hop| !hop.settled && hop.to == bundle)
        .and_then(|hop| hop.image.clone())
}

/// A failure to report; `degrades` unless only drift repair of a running operator is lost.
fn problem_of(err: &Error, degrades: bool) -> Problem {
    Problem {
        reason: err.reason(),
        message: if degrades {
            err.to_string()
        } else {
            format!("drift repair is paused: {err}")
        },
        degrades,
    }
}

/// Removes what only the bundles `settled` replaced owned, by the inventory (nothing to do,
/// and no API call, in a steady state), then drops their entries from it. A PO installed by a
/// manager that kept no inventory is swept once by owner label instead.
pub(super) async fn prune_settled(
    po: &PlatformOperator,
    pctx: &PoContext,
    status: &PlatformOperatorStatus,
    settled: &str,
    recorded_before: bool,
) -> Result<(), Error> {
    let name = po.name_any();
    let client = &pctx.ctx.client;
    let pruned = if recorded_before {
        if !inventory::has_other_bundles(&status.inventory, settled) {
            return Ok(());
        }
        let doomed = inventory::to_prune(&status.inventory, settled);
        super::objects::delete_recorded(&pctx.kinds, client, &name, &doomed, FailPoint::MidPrune)
            .await?
    } else {
        super::objects::prune(&pctx.kinds, client, &name, Some(settled)).await?
    };
    if pruned > 0 {
        tracing::info!(po = %name, bundle = %settled, pruned, "removed what older bundles had and this one does not");
    }
    let after = PlatformOperatorStatus {
        inventory: inventory::after_prune(&status.inventory, settled),
        ..status.clone()
    };
    write_status(po, pctx, status, after).await
}

/// Remembers on the PO that its operator reports OperatorConditions (`upgradeGate: Auto`).
async fn mark_reported(client: &kube::Client, name: &str) -> Result<PlatformOperator, Error> {
    let api: Api<PlatformOperator> = Api::all(client.clone());
    let patch = serde_json::json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "metadata": {"name": name, "annotations": {labels::OPERATOR_CONDITION_REPORTED: "true"}},
    });
    api.patch(
        name,
        &PatchParams::apply(PO_ANNOTATIONS_FIELD_MANAGER),
        &Patch::Apply(&patch),
    )
    .await
    .map_err(Error::kube(format!("annotating PlatformOperator {name}")))
}

/// Writes `new` as `po`'s status when it differs from `previous`, after publishing an Event per
/// condition that changed.
async fn write_status(
    po: &PlatformOperator,
    pctx: &PoContext,
    previous: &PlatformOperatorStatus,
    new: PlatformOperatorStatus,
) -> Result<(), Error> {
    if &new == previous {
        return Ok(());
    }
    let name = po.name_any();
    pctx.stage(&name, "events");
    announce::transitions(po, pctx, previous, &new).await;
    pctx.stage(&name, "write status: patch");
    let api: Api<PlatformOperator> = Api::all(pctx.ctx.client.clone());
    let patch = serde_json::json!({
        "apiVersion": "platform.openshift.io/v1alpha1",
        "kind": "PlatformOperator",
        "status": new,
    });
    // Shared with other PO writes; excludes the aggregator's check-and-write of Upgradeable=True.
    let _ordered = pctx.ctx.status_writes.read().await;
    let written = api
        .patch_status(
            &name,
            &PatchParams::apply(PO_STATUS_FIELD_MANAGER).force(),
            &Patch::Apply(&patch),
        )
        .await
        .map_err(Error::kube(format!(
            "writing the status of PlatformOperator {name}"
        )))?;
    pctx.remember_write(&name, &written);
    Ok(())
}
