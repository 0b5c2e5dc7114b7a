//! `pomctl render BUNDLE_DIR [--namespace NS]`: the objects POM would apply for a bundle
//! folder, offline (§9). Lets a platform team check a bundle before publishing it, and an admin
//! see what a PlatformOperator will create, without a cluster.
//!
//! Output: a multi-document YAML stream in apply order (or a JSON list with `-o json`) on
//! stdout, or with `--permissions` what the bundle's ServiceAccounts could do, by power class.
//! A bundle POM refuses, or cannot read, is reported on stderr with exit code 2, every
//! violation at once and the spec lines that would lift them. `--po FILE` renders for a
//! PlatformOperator's spec (its exceptions, consent and watch namespace) exactly as the
//! controller would; `--exception`, `--consent`, `--omit` and `--watch-namespace` give them by
//! hand.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use pom_api::PlatformOperator;
use pom_policy::render_request;
use pom_render::{
    BundleFiles, ContentException, ContentRule, OmittedObject, PowerClass, RenderOptions,
    RenderedBundle, WebhookConsent, default_install_namespace, render,
};

/// Flags of `pomctl render`.
#[derive(clap::Args)]
pub struct Args {
    /// The bundle folder (with manifests/ and usually metadata/).
    pub bundle_dir: PathBuf,
    /// Install namespace for namespaced objects [default: the bundle's package name].
    #[arg(long, short = 'n')]
    pub namespace: Option<String>,
    /// Wire the OperatorCondition gate: inject OPERATOR_CONDITION_NAME and its RBAC.
    #[arg(long)]
    pub operator_condition: bool,
    /// Render for this PlatformOperator (YAML or JSON file): its installNamespace, watchNamespace,
    /// consent, contentExceptions and omitObjects, as the controller would.
    #[arg(long, value_name = "FILE")]
    pub po: Option<PathBuf>,
    /// The namespace the operator watches (OwnNamespace when equal to the install namespace,
    /// SingleNamespace otherwise) [default: AllNamespaces if supported, else OwnNamespace].
    #[arg(long, value_name = "NS")]
    pub watch_namespace: Option<String>,
    /// Consent to a power class (repeatable), as `spec.consent` gives it.
    #[arg(long, value_enum, value_name = "CLASS")]
    pub consent: Vec<Consent>,
    /// Consent to one admission webhook NAME=sha256:DIGEST (repeatable), as
    /// `spec.consent.webhooks` gives it: bound to what it covers, as the refusal prints it.
    #[arg(long, value_name = "NAME=sha256:DIGEST", value_parser = parse_webhook_consent)]
    pub consent_webhook: Vec<WebhookConsent>,
    /// A content-policy exception RULE:KIND:NAME (repeatable), as in `spec.contentExceptions`:
    /// KIND with its API group (`ValidatingWebhookConfiguration.admissionregistration.k8s.io`),
    /// alone for the core group (`Service`).
    #[arg(long, value_name = "RULE:KIND:NAME", value_parser = parse_exception)]
    pub exception: Vec<ContentException>,
    /// A binding of the bundle not to apply, KIND:NAME with KIND RoleBinding or
    /// ClusterRoleBinding (repeatable), as in `spec.omitObjects`.
    #[arg(long, value_name = "KIND:NAME", value_parser = parse_omission)]
    pub omit: Vec<OmittedObject>,
    /// Print what the bundle's ServiceAccounts could do, by power class, instead of the objects.
    #[arg(long)]
    pub permissions: bool,
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
}

/// A power class an admin can consent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Consent {
    ClusterAdminEquivalent,
    PrivilegedWorkloads,
    PlatformConfig,
}

impl Consent {
    fn class(self) -> PowerClass {
        match self {
            Self::ClusterAdminEquivalent => PowerClass::ClusterAdminEquivalent,
            Self::PrivilegedWorkloads => PowerClass::PrivilegedWorkloads,
            Self::PlatformConfig => PowerClass::PlatformConfig,
        }
    }
}

fn parse_exception(text: &str) -> Result<ContentException, String> {
    let mut parts = text.splitn(3, ':');
    let (Some(rule), Some(kind), Some(name)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(format!("{text:?} is not RULE:KIND:NAME"));
    };
    let rule = ContentRule::parse(rule)
        .filter(|r| r.exceptable())
        .ok_or_else(|| {
            let exceptable: Vec<&str> = ContentRule::ALL
                .into_iter()
                .filter(|r| r.exceptable())
                .map(ContentRule::as_str)
                .collect();
            format!(
                "{rule:?} is not a rule an exception lifts ({})",
                exceptable.join(", ")
            )
        })?;
    Ok(ContentException {
        rule,
        kind: kind.to_owned(),
        name: name.to_owned(),
    })
}

fn parse_webhook_consent(text: &str) -> Result<WebhookConsent, String> {
    match text.split_once('=') {
        Some((name, covers))
            if !name.is_empty()
                && covers.strip_prefix("sha256:").is_some_and(|hex| {
                    hex.len() == 64 && hex.bytes().all(|b| b.is_ascii_hexdigit())
                }) =>
        {
            Ok(WebhookConsent {
                name: name.to_owned(),
                covers: covers.to_owned(),
            })
        }
        _ => Err(format!(
            "{text:?} is not NAME=sha256:<64 hex> (the webhook configuration's name and the digest its refusal prints)"
        )),
    }
}

fn parse_omission(text: &str) -> Result<OmittedObject, String> {
    match text.split_once(':') {
        Some((kind @ ("RoleBinding" | "ClusterRoleBinding"), name)) if !name.is_empty() => {
            Ok(OmittedObject {
                kind: kind.to_owned(),
                name: name.to_owned(),
            })
        }
        _ => Err(format!(
            "{text:?} is not KIND:NAME with KIND RoleBinding or ClusterRoleBinding (only bindings can be omitted)"
        )),
    }
}

/// How `pomctl render` prints the objects.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// One YAML document per object, separated by `---`.
    Yaml,
    /// A JSON list of the objects.
    Json,
}

/// Runs `pomctl render`: exit 0 with the objects on stdout, or an error (exit 2) on refusal.
pub fn run(args: &Args) -> anyhow::Result<ExitCode> {
    let files = BundleFiles::load_dir(&args.bundle_dir)
        .with_context(|| format!("cannot load bundle {}", args.bundle_dir.display()))?;
    let po = args.po.as_deref().map(read_po).transpose()?;
    let namespace = match (&args.namespace, &po) {
        (Some(namespace), _) => namespace.clone(),
        // As the controller chooses at a first install: the spec's, else the bundle's
        // suggestion (when POM may create it), else the PO's (or the package's) name.
        (None, Some(po)) => match &po.spec.install_namespace {
            Some(namespace) => namespace.clone(),
            None => default_install_namespace(&files, &kube::ResourceExt::name_any(po))?,
        },
        (None, None) => {
            default_install_namespace(&files, &package_name(&files, &args.bundle_dir)?)?
        }
    };
    let mut opts = match &po {
        // The spec's configuration, without the cluster proxy (offline: none to read; the
        // manager adds the cluster's, see docs/decisions.md).
        Some(po) => render_request::render_options(
            po,
            &namespace,
            &pom_api::platform_operator::AppliedConfig::of(po.spec.config.as_ref(), None),
        )
        .map_err(|e| {
            anyhow::anyhow!("PlatformOperator {}: {e}", kube::ResourceExt::name_any(po))
        })?,
        None => RenderOptions::new(namespace),
    };
    opts.operator_condition = args.operator_condition;
    opts.consent.extend(args.consent.iter().map(|c| c.class()));
    opts.webhook_consent
        .extend(args.consent_webhook.iter().cloned());
    opts.exceptions.extend(args.exception.iter().cloned());
    opts.omit.extend(args.omit.iter().cloned());
    if args.watch_namespace.is_some() {
        opts.watch_namespace.clone_from(&args.watch_namespace);
    }
    let bundle = render(&files, &opts)
        .with_context(|| format!("POM would refuse bundle {}", args.bundle_dir.display()))?;
    // On stderr, so stdout stays the objects: what the manager publishes as Warning Events.
    for warning in &bundle.warnings {
        eprintln!("warning: {warning}");
    }
    let text = match (args.permissions, args.output) {
        (true, Output::Yaml) => permissions_text(&bundle),
        (true, Output::Json) => format!(
            "{}\n",
            serde_json::to_string_pretty(&permissions_json(&bundle))?
        ),
        (false, Output::Yaml) => to_yaml_stream(&bundle)?,
        (false, Output::Json) => format!("{}\n", serde_json::to_string_pretty(&bundle.objects)?),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

fn read_po(path: &std::path::Path) -> anyhow::Result<PlatformOperator> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read PlatformOperator {}", path.display()))?;
    serde_saphyr::from_str(&text)
        .with_context(|| format!("{} is not a PlatformOperator", path.display()))
}

/// The power classes, each with its evidence, and what is ordinary.
fn permissions_text(bundle: &RenderedBundle) -> String {
    let mut out = String::new();
    let mode = bundle
        .install_mode
        .map_or_else(|| "plain+v0".to_owned(), |m| m.to_string());
    out.push_str(&format!("install mode: {mode}\n"));
    if bundle.powers.found.is_empty() {
        out.push_str("powers: none beyond ordinary operator permissions\n");
    }
    for class in PowerClass::ALL {
        let evidence: Vec<_> = bundle.powers.of(class).collect();
        if evidence.is_empty() {
            continue;
        }
        let consent = if class == PowerClass::AdmissionWebhooks {
            " (consented one by one, bound to what each covers: spec.consent.webhooks)".to_owned()
        } else if class.needs_consent() {
            format!(" (consented: spec.consent.{}: true)", class.consent_field())
        } else {
            " (shown; no consent needed)".to_owned()
        };
        out.push_str(&format!("{class}{consent}\n"));
        for power in evidence {
            out.push_str(&format!(
                "  {} {:?}: {}\n",
                power.kind, power.name, power.detail
            ));
        }
    }
    out
}

fn permissions_json(bundle: &RenderedBundle) -> serde_json::Value {
    let classes: serde_json::Map<String, serde_json::Value> = PowerClass::ALL
        .into_iter()
        .filter_map(|class| {
            let evidence: Vec<serde_json::Value> = bundle
                .powers
                .of(class)
                .map(|p| serde_json::json!({"kind": p.kind, "name": p.name, "detail": p.detail}))
                .collect();
            (!evidence.is_empty()).then(|| (class.as_str().to_owned(), evidence.into()))
        })
        .collect();
    serde_json::json!({
        "installMode": bundle.install_mode.map(|m| m.as_str()),
        "watchNamespace": bundle.watch_namespace,
        "powers": classes,
    })
}

/// The default install namespace: the package name, as POM defaults it to the PO's name, which
/// is usually the package's.
fn package_name(files: &BundleFiles, dir: &std::path::Path) -> anyhow::Result<String> {
    let package = pom_render::package_name(files)
        .with_context(|| format!("POM would refuse bundle {}", dir.display()))?;
    package.ok_or_else(|| {
        anyhow::anyhow!(
            "bundle {} names no package (metadata/annotations.yaml); pass --namespace NS",
            dir.display()
        )
    })
}

/// Each object through serde-saphyr, joined by `---` lines.
fn to_yaml_stream(bundle: &RenderedBundle) -> anyhow::Result<String> {
    let mut out = String::new();
    for object in &bundle.objects {
        out.push_str("---\n");
        let yaml = serde_saphyr::to_string(object).context("cannot write an object as YAML")?;
        out.push_str(&yaml);
        if !yaml.ends_with('\n') {
            out.push('\n');
        }
    }
    Ok(out)
}
