//! `pomctl adopt --dry-run` (live, issue 36 item 1): which operators OLM v0 installed POM could
//! take over, and the PlatformOperator that would adopt each one. It writes nothing.
//!
//! It lists every Subscription, ClusterServiceVersion and OperatorGroup, the PlatformOperators,
//! every Catalog's content (read as `pomctl plan` reads it, [`crate::live`]) and the cluster's
//! phase, then judges each Subscription with [`pom_policy::adopt`]: the install's own facts,
//! then the resolver's choice for the proposed PlatformOperator, then the bundle (pulled as the
//! manager pulls it) rendered with that PlatformOperator's options. Nothing is decided here.
//!
//! Output: a table (subscription, package, installed CSV, install mode, verdict, why), or
//! `-o json|yaml`; with `--subscription NAMESPACE/NAME` the PlatformOperator's YAML alone on
//! stdout, ready to apply (with the consent its bundle needs).
//!
//! Exit codes: 0 the Subscriptions were judged (or the one asked for is adoptable); 1 the
//! Subscription asked for is not adoptable, or does not exist; 2 errors (unreadable cluster,
//! `--dry-run=false`, which issue 36 item 2 brings).

use std::process::ExitCode;

use anyhow::{Context as _, bail};
use kube::api::{Api, ListParams};
use kube::{Client, Resource};
use pom_api::PlatformOperator;
use pom_api::olm::v0_install::COPIED_FROM_LABEL;
use pom_api::olm::{ClusterServiceVersion, OperatorGroup, Subscription};
use pom_api::openshift::{CLUSTER_VERSION_NAME, ClusterVersion, OPERATOR_GROUP};
use pom_oci::ImagePuller;
use pom_policy::adopt::{self, Adoption, AdoptionProof, Located, RenderContext, Verdict};
use pom_render::{BundleFiles, CertificateSource};
use pom_resolver::cluster::{ClusterPhase, cluster_phase};
use pom_resolver::select::CatalogInput;
use pom_resolver::version::parse_tolerant;
use semver::Version;
use serde::Serialize;

use crate::cmd::resolve::Output;
use crate::live::{self, FetchedCatalog};

/// Most objects of one OLM v0 kind read (one page): a cluster with more Subscriptions than
/// this is not judged partly.
const MAX_OLM_OBJECTS: u32 = 5_000;

/// Flags of `pomctl adopt`.
#[derive(clap::Args)]
pub struct Args {
    /// Only judge and print (the default, and for now the only mode: the manager's adoption
    /// comes next).
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set, num_args = 0..=1,
          default_missing_value = "true", value_name = "BOOL")]
    pub dry_run: bool,
    /// Print the PlatformOperator that would adopt this Subscription (`NAMESPACE/NAME`), as
    /// YAML ready to apply.
    #[arg(long, value_name = "NAMESPACE/NAME")]
    pub subscription: Option<String>,
    /// Give this adopted PlatformOperator back to OLM v0: print what will happen and the
    /// annotation that asks for it (`platform.openshift.io/give-back`, naming its installed
    /// ClusterServiceVersion); with `--dry-run=false`, set it.
    #[arg(long, value_name = "PLATFORMOPERATOR", conflicts_with = "subscription")]
    pub give_back: Option<String>,
    /// Output format of the table (ignored with --subscription).
    #[arg(short = 'o', long = "output", value_enum, default_value_t = Output::Human)]
    pub output: Output,
    #[command(flatten)]
    pub access: live::CatalogAccess,
}

/// What the judgement is made from, read once.
#[derive(Debug)]
pub struct Inputs {
    pub subscriptions: Vec<Subscription>,
    pub csvs: Vec<ClusterServiceVersion>,
    pub operator_groups: Vec<OperatorGroup>,
    pub platform_operators: Vec<PlatformOperator>,
    pub catalogs: Vec<FetchedCatalog>,
    /// `None` without a ClusterVersion (plain Kubernetes).
    pub phase: Option<ClusterPhase>,
    pub kube_version: Option<Version>,
    pub certificates: CertificateSource,
}

/// One Subscription, as printed with `-o json|yaml`.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub subscription: String,
    pub package: String,
    #[serde(rename = "installedCSV")]
    pub installed_csv: Option<String>,
    /// `Adoptable`, `AdoptableWithConsent` or `NotAdoptable`.
    pub verdict: String,
    /// The obstacle's name when not adoptable.
    pub reason: Option<String>,
    pub message: Option<String>,
    /// The `spec.consent` fields the PlatformOperator carries.
    pub consent: Vec<String>,
    pub proof: Option<ProofView>,
    pub platform_operator: Option<PlatformOperator>,
}

/// What POM established about the bundle.
#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ProofView {
    pub bundle: String,
    pub version: String,
    pub catalog: String,
    pub channel: String,
    pub image: Option<String>,
    pub install_mode: String,
    /// Every object POM would apply (`Kind namespace/name`).
    pub objects: Vec<String>,
}

impl From<&AdoptionProof> for ProofView {
    fn from(p: &AdoptionProof) -> Self {
        Self {
            bundle: p.bundle.clone(),
            version: p.version.to_string(),
            catalog: p.catalog.clone(),
            channel: p.channel.clone(),
            image: p.image.clone(),
            install_mode: p.target.to_string(),
            objects: p.objects.iter().map(ToString::to_string).collect(),
        }
    }
}

/// Runs `pomctl adopt`.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    if let Some(po) = &args.give_back {
        return give_back(po, args.dry_run);
    }
    if !args.dry_run {
        bail!(
            "--dry-run=false: pomctl adopt writes nothing but the give-back annotation (--give-back PO); to adopt, apply the PlatformOperator `pomctl adopt --subscription NAMESPACE/NAME` prints (`| kubectl apply -f -`), and the manager adopts it"
        );
    }
    let wanted = args
        .subscription
        .as_deref()
        .map(|s| {
            s.split_once('/')
                .filter(|(ns, name)| !ns.is_empty() && !name.is_empty())
                .map(|_| s.to_owned())
                .with_context(|| format!("--subscription {s:?} is not NAMESPACE/NAME"))
        })
        .transpose()?;
    let adoptions = live::block_on(async {
        let client = live::client().await?;
        let inputs = gather(
            &client,
            &args.access.insecure_registries,
            &args.access.manager_namespace,
        )
        .await?;
        for catalog in &inputs.catalogs {
            if let Err(e) = &catalog.content {
                eprintln!(
                    "warning: Catalog {} cannot be read, its bundles count as absent: {}",
                    catalog.name,
                    live::short(e, 200)
                );
            }
        }
        let adoptions = judge_all(
            &inputs,
            &args.access.insecure_registries,
            &args.access.manager_namespace,
        )
        .await;
        let hand_over = match wanted.as_deref() {
            Some(wanted) => hand_over_commands(&client, &adoptions, wanted).await?,
            None => Vec::new(),
        };
        anyhow::Ok((adoptions, hand_over))
    })??;
    let (adoptions, hand_over) = adoptions;
    if let Some(wanted) = wanted {
        return one(&adoptions, &wanted, &hand_over);
    }
    let rows: Vec<Row> = adoptions.iter().map(row).collect();
    match args.output {
        Output::Human => print!("{}", human(&rows)),
        Output::Json => println!("{}", serde_json::to_string_pretty(&rows)?),
        Output::Yaml => print!("{}", serde_saphyr::to_string(&rows)?),
    }
    Ok(ExitCode::SUCCESS)
}

/// The objects of `wanted`'s install the manager would change that carry neither POM's owner
/// label nor `platform.openshift.io/adopt` (what the shipped admission guard refuses), as the
/// commands handing each to its PlatformOperator: every object POM would apply that exists, and
/// OLM's webhook configurations for the CSV, which adoption retires. Metadata only is read.
async fn hand_over_commands(
    client: &Client,
    adoptions: &[Adoption],
    wanted: &str,
) -> anyhow::Result<Vec<String>> {
    use kube::core::{ApiResource, DynamicObject, GroupVersionKind};
    use pom_policy::adopt::guard::{annotate_command, needs_handing_over};
    let Some(adoption) = adoptions.iter().find(|a| a.subscription == wanted) else {
        return Ok(Vec::new());
    };
    let (Some(proof), Some(po), Some(csv)) = (
        &adoption.proof,
        adoption
            .platform_operator
            .as_ref()
            .and_then(|p| p.metadata.name.as_deref()),
        adoption.installed_csv.as_deref(),
    ) else {
        return Ok(Vec::new());
    };
    let mut commands = Vec::new();
    // Beyond the rendered objects: the install namespace (adoption labels it as POM's) and
    // the serving Secret of each webhook Service (POM writes its certificate there).
    let namespace = adopt::ObjectKey {
        api_version: "v1".to_owned(),
        kind: "Namespace".to_owned(),
        namespace: None,
        name: adoption.namespace.clone(),
    };
    let secrets = proof
        .objects
        .iter()
        .filter(|k| k.kind == "Service" && k.api_version == "v1")
        .map(|k| adopt::ObjectKey {
            kind: "Secret".to_owned(),
            name: pom_policy::adopt::webhooks::serving_secret_of(&k.name),
            ..k.clone()
        });
    let keys: Vec<adopt::ObjectKey> = std::iter::once(namespace)
        .chain(proof.objects.iter().cloned())
        .chain(secrets)
        .collect();
    for key in &keys {
        let (group, version) = key
            .api_version
            .split_once('/')
            .unwrap_or(("", key.api_version.as_str()));
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(group, version, &key.kind));
        let api: Api<DynamicObject> = match &key.namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
            None => Api::all_with(client.clone(), &resource),
        };
        let meta = api
            .get_metadata_opt(&key.name)
            .await
            .with_context(|| format!("reading {key}"))?;
        if let Some(meta) = meta
            && needs_handing_over(
                meta.metadata.labels.as_ref(),
                meta.metadata.annotations.as_ref(),
            )
        {
            commands.push(annotate_command(key, po));
        }
    }
    let selector = format!("olm.owner={csv},olm.owner.namespace={}", adoption.namespace);
    for kind in pom_policy::adopt::webhooks::WEBHOOK_CONFIGURATION_KINDS {
        let resource = ApiResource::from_gvk(&GroupVersionKind::gvk(
            "admissionregistration.k8s.io",
            "v1",
            kind,
        ));
        let api: Api<DynamicObject> = Api::all_with(client.clone(), &resource);
        let list = api
            .list_metadata(
                &ListParams::default()
                    .labels(&selector)
                    .limit(MAX_OLM_OBJECTS),
            )
            .await
            .with_context(|| format!("listing the {kind}s OLM made for {csv}"))?;
        for item in list.items.iter().filter(|i| {
            needs_handing_over(i.metadata.labels.as_ref(), i.metadata.annotations.as_ref())
        }) {
            let key = adopt::ObjectKey {
                api_version: "admissionregistration.k8s.io/v1".to_owned(),
                kind: (*kind).to_owned(),
                namespace: None,
                name: item.metadata.name.clone().unwrap_or_default(),
            };
            commands.push(annotate_command(&key, po));
        }
    }
    Ok(commands)
}

/// The PlatformOperator for `wanted` on stdout, preceded (as YAML comments) by the commands
/// handing OLM's objects over under the admission guard; why not on stderr (exit 1).
fn one(adoptions: &[Adoption], wanted: &str, hand_over: &[String]) -> anyhow::Result<ExitCode> {
    let Some(adoption) = adoptions.iter().find(|a| a.subscription == wanted) else {
        eprintln!("Subscription {wanted} does not exist");
        return Ok(ExitCode::from(1));
    };
    match (&adoption.verdict, &adoption.platform_operator) {
        (Verdict::NotAdoptable(why), _) => {
            eprintln!("Subscription {wanted} cannot be adopted: {why}");
            Ok(ExitCode::from(1))
        }
        (verdict, Some(po)) => {
            if let Verdict::AdoptableWithConsent { powers } = verdict {
                let fields: Vec<String> = powers
                    .iter()
                    .map(|p| format!("spec.consent.{}", p.consent_field()))
                    .collect();
                eprintln!(
                    "note: applying this PlatformOperator consents to {}: its bundle's ServiceAccounts hold those powers",
                    fields.join(", ")
                );
            }
            print!("{}", hand_over_comment(hand_over));
            print!("{}", serde_saphyr::to_string(&applyable(po))?);
            Ok(ExitCode::SUCCESS)
        }
        (_, None) => bail!("Subscription {wanted}: judged adoptable without a PlatformOperator"),
    }
}

/// `--give-back PO`: the CSV by the manager's own rule
/// (`pom_policy::adopt::give_back::csv_to_give_back`), what will happen, and (not a dry run)
/// the annotation set. Exit 1 when the PlatformOperator cannot be given back.
fn give_back(name: &str, dry_run: bool) -> anyhow::Result<ExitCode> {
    use kube::api::{Patch, PatchParams};
    live::block_on(async {
        let client = live::client().await?;
        let api = Api::<PlatformOperator>::all(client);
        let Some(po) = api
            .get_opt(name)
            .await
            .with_context(|| format!("reading PlatformOperator {name}"))?
        else {
            eprintln!("PlatformOperator {name} does not exist");
            return Ok(ExitCode::from(1));
        };
        let csv = match adopt::give_back::csv_to_give_back(&po) {
            Ok(csv) => csv.to_owned(),
            Err(why) => {
                eprintln!("PlatformOperator {name} cannot be given back: {why}");
                return Ok(ExitCode::from(1));
            }
        };
        let subscription = po
            .spec
            .adopt_from
            .as_ref()
            .map(|f| format!("{}/{}", f.subscription.namespace, f.subscription.name))
            .unwrap_or_default();
        print!("{}", give_back_plan(name, &csv, &subscription, dry_run));
        if !dry_run {
            let patch = serde_json::json!({"metadata": {"annotations": {
                pom_api::labels::GIVE_BACK: csv}}});
            api.patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .with_context(|| format!("annotating PlatformOperator {name}"))?;
        }
        anyhow::Ok(ExitCode::SUCCESS)
    })?
}

/// What giving `po` back to ClusterServiceVersion `csv` (of `subscription`) will do, and how.
fn give_back_plan(po: &str, csv: &str, subscription: &str, dry_run: bool) -> String {
    let annotation = pom_api::labels::GIVE_BACK;
    let how = if dry_run {
        format!(
            "Nothing written (dry run). To ask for it: pomctl adopt --give-back {po} --dry-run=false\n  (or: kubectl annotate platformoperator {po} {annotation}={csv})\n"
        )
    } else {
        format!("Annotated PlatformOperator {po} {annotation}={csv}.\n")
    };
    format!(
        "Giving PlatformOperator {po} back to OLM v0 (Subscription {subscription}, ClusterServiceVersion {csv}):\n\
         - the manager checks that the Subscription still names {csv} and the CSV exists, else it refuses (GiveBackRefused) and changes nothing;\n\
         - every object adoption released from OLM gets OLM's labels and owner reference to {csv} back and loses POM's labels; the pods do not restart;\n\
         - what POM created itself stays POM's; nothing is applied while the annotation is set;\n\
         - done, Installed says reason GivenBack; then delete the PlatformOperator (kubectl delete platformoperator {po}): it deletes only what POM created.\n\
         {how}"
    )
}

/// The hand-over commands as YAML comments (nothing when there are none).
fn hand_over_comment(commands: &[String]) -> String {
    if commands.is_empty() {
        return String::new();
    }
    let mut text = String::from(
        "# Under the shipped admission guard, the manager may change only what POM owns or what is\n# handed over: run these first (the adoption otherwise stops and names them).\n",
    );
    for command in commands {
        text.push_str(&format!("# {command}\n"));
    }
    text
}

/// The PlatformOperator as an admin applies it: apiVersion, kind, name and spec only.
fn applyable(po: &PlatformOperator) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": PlatformOperator::api_version(&()),
        "kind": PlatformOperator::kind(&()),
        "metadata": {"name": po.metadata.name},
        "spec": po.spec,
    })
}

async fn gather(
    client: &Client,
    insecure_registries: &[String],
    manager_namespace: &str,
) -> anyhow::Result<Inputs> {
    let subscriptions = list_olm::<Subscription>(client, None).await?;
    // Not OLM's copies: an AllNamespaces CSV is copied into every namespace, and a copy is
    // never an install.
    let not_copies = format!("!{COPIED_FROM_LABEL}");
    let csvs = list_olm::<ClusterServiceVersion>(client, Some(&not_copies)).await?;
    let operator_groups = list_olm::<OperatorGroup>(client, None).await?;
    let platform_operators = match Api::<PlatformOperator>::all(client.clone())
        .list(&ListParams::default())
        .await
    {
        Ok(list) => list.items,
        // POM not installed yet: no PlatformOperator manages anything.
        Err(kube::Error::Api(status)) if status.code == 404 => Vec::new(),
        Err(err) => return Err(err).context("listing PlatformOperators"),
    };
    let catalogs = live::fetch_catalogs(client, insecure_registries, manager_namespace).await?;
    let phase = match Api::<ClusterVersion>::all(client.clone())
        .get_opt(CLUSTER_VERSION_NAME)
        .await
    {
        Ok(Some(cv)) => {
            let snapshot = pom_policy::snapshot::cluster_version_snapshot(&cv).context(
                "ClusterVersion version has no status yet: the cluster-version operator has not reported",
            )?;
            Some(cluster_phase(&snapshot).context("reading the cluster's version")?)
        }
        Ok(None) | Err(kube::Error::Api(_)) => None,
        Err(err) => return Err(err).context("reading ClusterVersion version"),
    };
    let kube_version = client
        .apiserver_version()
        .await
        .ok()
        .and_then(|info| parse_tolerant(&info.git_version).ok());
    let groups = client
        .list_api_groups()
        .await
        .context("discovering API groups")?;
    let certificates = if groups.groups.iter().any(|g| g.name == OPERATOR_GROUP) {
        CertificateSource::ServiceCa
    } else {
        CertificateSource::Pom
    };
    Ok(Inputs {
        subscriptions,
        csvs,
        operator_groups,
        platform_operators,
        catalogs,
        phase,
        kube_version,
        certificates,
    })
}

/// Every object of an OLM v0 kind; none when the cluster does not serve it (no OLM v0).
async fn list_olm<K>(client: &Client, selector: Option<&str>) -> anyhow::Result<Vec<K>>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>,
    K: Clone + std::fmt::Debug + serde::de::DeserializeOwned,
{
    let kind = K::kind(&());
    let mut params = ListParams::default().limit(MAX_OLM_OBJECTS);
    if let Some(selector) = selector {
        params = params.labels(selector);
    }
    match Api::<K>::all(client.clone()).list(&params).await {
        Ok(list)
            if list
                .metadata
                .continue_
                .as_deref()
                .is_some_and(|c| !c.is_empty()) =>
        {
            bail!(
                "the cluster holds more than {MAX_OLM_OBJECTS} {kind}s; pomctl adopt does not judge part of them"
            )
        }
        Ok(list) => Ok(list.items),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Vec::new()),
        Err(err) => Err(err).with_context(|| format!("listing {kind}s")),
    }
}

/// Judges every Subscription: steps 1 to 3a pure, the located bundles fetched, 3b pure.
async fn judge_all(
    inputs: &Inputs,
    insecure_registries: &[String],
    manager_namespace: &str,
) -> Vec<Adoption> {
    let catalog_inputs: Vec<CatalogInput<'_>> = inputs
        .catalogs
        .iter()
        .filter_map(|c| {
            c.content
                .as_ref()
                .ok()
                .map(|content| (c.name.as_str(), c.priority, content))
        })
        .collect();
    let installs = adopt::installs(
        &inputs.subscriptions,
        &inputs.csvs,
        &inputs.operator_groups,
        &inputs.platform_operators,
    );
    let context = RenderContext {
        manager_namespace: Some(manager_namespace.to_owned()),
        certificates: inputs.certificates,
    };
    let puller = ImagePuller::new(insecure_registries.to_vec());
    let mut adoptions = Vec::with_capacity(installs.len());
    for install in &installs {
        let located = adopt::propose(install).and_then(|proposal| {
            adopt::locate(
                proposal,
                &catalog_inputs,
                inputs.phase.as_ref(),
                inputs.kube_version.as_ref(),
            )
        });
        let mut adoption = Adoption {
            subscription: install.key(),
            namespace: install.namespace(),
            package: install.subscription.spec.name.clone(),
            installed_csv: install
                .subscription
                .status
                .as_ref()
                .and_then(|s| s.installed_csv.clone())
                .filter(|c| !c.is_empty()),
            verdict: Verdict::Adoptable,
            platform_operator: None,
            proof: None,
        };
        match located {
            Err(why) => adoption.verdict = Verdict::NotAdoptable(why),
            Ok(located) => {
                let files = fetch_bundle(&puller, inputs, &located).await;
                let (verdict, proof, po) =
                    adopt::judge(&located, files.as_ref().map_err(String::as_str), &context);
                adoption.platform_operator =
                    (!matches!(verdict, Verdict::NotAdoptable(_))).then_some(po);
                adoption.verdict = verdict;
                adoption.proof = proof;
            }
        }
        adoptions.push(adoption);
    }
    adoptions
}

/// The located bundle's files, as the manager reads them (catalog objects, else the image).
async fn fetch_bundle(
    puller: &ImagePuller,
    inputs: &Inputs,
    located: &Located,
) -> Result<BundleFiles, String> {
    let bundle = inputs
        .catalogs
        .iter()
        .filter(|c| c.name == located.chosen.catalog)
        .find_map(|c| {
            c.content
                .as_ref()
                .ok()?
                .packages
                .get(&located.proposal.package)?
                .bundles
                .get(&located.chosen.name)
        })
        .ok_or_else(|| {
            format!(
                "Catalog {} no longer lists {}",
                located.chosen.catalog, located.chosen.name
            )
        })?;
    live::bundle_files(puller, bundle).await
}

fn row(adoption: &Adoption) -> Row {
    let (reason, message) = match &adoption.verdict {
        Verdict::NotAdoptable(why) => (Some(why.as_str().to_owned()), Some(why.to_string())),
        _ => (None, None),
    };
    let consent = match &adoption.verdict {
        Verdict::AdoptableWithConsent { powers } => powers
            .iter()
            .map(|p| format!("spec.consent.{}: true", p.consent_field()))
            .collect(),
        _ => Vec::new(),
    };
    Row {
        subscription: adoption.subscription.clone(),
        package: adoption.package.clone(),
        installed_csv: adoption.installed_csv.clone(),
        verdict: adoption.verdict.to_string(),
        reason,
        message,
        consent,
        proof: adoption.proof.as_ref().map(ProofView::from),
        platform_operator: adoption.platform_operator.as_ref().map(|po| {
            let mut po = po.clone();
            po.metadata = kube::api::ObjectMeta {
                name: po.metadata.name.clone(),
                ..Default::default()
            };
            po
        }),
    }
}

/// The table, then one line per Subscription on what to do.
pub fn human(rows: &[Row]) -> String {
    if rows.is_empty() {
        return "No OLM v0 Subscriptions.\n".to_owned();
    }
    let table_rows: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            vec![
                r.subscription.clone(),
                r.package.clone(),
                r.installed_csv.clone().unwrap_or_else(|| "-".into()),
                r.proof
                    .as_ref()
                    .map_or_else(|| "-".into(), |p| p.install_mode.clone()),
                r.verdict.clone(),
                why(r),
            ]
        })
        .collect();
    let mut out = live::table(
        &[
            "SUBSCRIPTION",
            "PACKAGE",
            "INSTALLED CSV",
            "INSTALL MODE",
            "VERDICT",
            "REASON / CONSENT",
        ],
        &table_rows,
    );
    out.push('\n');
    for r in rows {
        match (&r.message, &r.proof) {
            (Some(message), _) => out.push_str(&format!(
                "{}: {}\n",
                r.subscription,
                live::short(message, 300)
            )),
            (None, Some(proof)) => out.push_str(&format!(
                "{}: bundle {} from Catalog {} (channel {}), {} objects; `pomctl adopt --subscription {}` prints its PlatformOperator\n",
                r.subscription,
                proof.bundle,
                proof.catalog,
                proof.channel,
                proof.objects.len(),
                r.subscription
            )),
            (None, None) => {}
        }
    }
    out
}

fn why(row: &Row) -> String {
    match (&row.reason, row.consent.is_empty()) {
        (Some(reason), _) => reason.clone(),
        (None, false) => row.consent.join(", "),
        (None, true) => "-".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_give_back_plan_names_the_csv_and_how_to_ask() {
        let dry = give_back_plan("op", "op.v1", "ns/op", true);
        assert!(dry.starts_with("Giving PlatformOperator op back to OLM v0 (Subscription ns/op, ClusterServiceVersion op.v1):\n"), "{dry}");
        assert!(dry.contains("Nothing written (dry run)"), "{dry}");
        assert!(
            dry.contains(
                "kubectl annotate platformoperator op platform.openshift.io/give-back=op.v1"
            ),
            "{dry}"
        );
        assert!(dry.contains("GivenBack"), "{dry}");
        let done = give_back_plan("op", "op.v1", "ns/op", false);
        assert!(
            done.ends_with(
                "Annotated PlatformOperator op platform.openshift.io/give-back=op.v1.\n"
            ),
            "{done}"
        );
        assert!(!done.contains("dry run"), "{done}");
    }

    #[test]
    fn the_hand_over_commands_are_yaml_comments_before_the_platform_operator() {
        assert_eq!(hand_over_comment(&[]), "");
        let text = hand_over_comment(&[
            "kubectl annotate deployment.apps/op -n ns platform.openshift.io/adopt=op".to_owned(),
        ]);
        assert!(text.lines().all(|l| l.starts_with("# ")), "{text}");
        assert!(
            text.ends_with(
                "# kubectl annotate deployment.apps/op -n ns platform.openshift.io/adopt=op\n"
            ),
            "{text}"
        );
        // Still one YAML document: what follows parses as the PlatformOperator.
        let yaml = format!("{text}apiVersion: v1\nkind: X\n");
        let parsed: serde_json::Value = serde_saphyr::from_str(&yaml).expect("parses");
        assert_eq!(parsed["kind"], "X");
    }
}
