//! `pomctl render BUNDLE_DIR [--namespace NS]`: the objects POM would apply for a bundle
//! folder, offline (§9). Lets a platform team check a bundle before publishing it, and an admin
//! see what a PlatformOperator will create, without a cluster.
//!
//! Output: a multi-document YAML stream in apply order (or a JSON list with `-o json`) on
//! stdout. A bundle POM refuses, or cannot read, is reported on stderr with exit code 2.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use pom_resolver::render::{BundleFiles, RenderOptions, RenderedBundle, render};

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
    /// Output format.
    #[arg(long, short = 'o', value_enum, default_value_t = Output::Yaml)]
    pub output: Output,
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
    let namespace = match &args.namespace {
        Some(namespace) => namespace.clone(),
        None => package_name(&files, &args.bundle_dir)?,
    };
    let opts = RenderOptions {
        operator_condition: args.operator_condition,
        ..RenderOptions::new(namespace)
    };
    let bundle = render(&files, &opts)
        .with_context(|| format!("POM would refuse bundle {}", args.bundle_dir.display()))?;
    let text = match args.output {
        Output::Yaml => to_yaml_stream(&bundle)?,
        Output::Json => format!("{}\n", serde_json::to_string_pretty(&bundle.objects)?),
    };
    std::io::stdout()
        .lock()
        .write_all(text.as_bytes())
        .context("cannot write to stdout")?;
    Ok(ExitCode::SUCCESS)
}

/// The default install namespace: the package name, as POM defaults it to the PO's name, which
/// is usually the package's. Rendering once without a namespace finds it.
fn package_name(files: &BundleFiles, dir: &std::path::Path) -> anyhow::Result<String> {
    let probe = render(files, &RenderOptions::new("pomctl-probe"))
        .with_context(|| format!("POM would refuse bundle {}", dir.display()))?;
    probe.package_name.ok_or_else(|| {
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
