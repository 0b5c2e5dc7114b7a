//! Issue 33 item 6: every refusal's paste-ready lift renders when pasted. Over every shared real
//! bundle (`../shared/testdata/real/community-operators-heads/` and `redhat-operators/`, each in
//! its default install namespace), a bundle refused as published has its refusal's own
//! suggestion pasted back: the text the refusal prints (`add to the PlatformOperator's spec:
//! consent: {...}, contentExceptions: [...], omitObjects: [...]`) read as the YAML an admin would
//! paste, the install namespace or watch namespace the refusal asks for, and rendered again;
//! what it lifts is lifted, and a refusal that names a next lift gets that pasted too, up to
//! [`ROUNDS`] rounds. Printed: how many rendered as published, how many after how many rounds,
//! and what nothing lifts (`cargo test -p pom-render --test render_lifts -- --nocapture`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../../resolver/tests/shared_support/mod.rs"]
mod shared_support;

use std::collections::BTreeMap;
use std::path::PathBuf;

use pom_render::{
    BundleFiles, ContentException, ContentRule, Lift, OmittedObject, PowerClass, RenderError,
    RenderOptions, WebhookConsent, default_install_namespace, render,
};
use serde_json::Value;

/// How many refusals in a row a bundle may name lifts for.
const ROUNDS: usize = 4;

/// Bundles that cannot be rendered as published, whatever the admin gives, and why (their
/// refusal names no lift, and none is expected).
const BROKEN_AS_PUBLISHED: &[(&str, &str)] = &[
    (
        "community/k8gb",
        "no ClusterServiceVersion POM can read as published (docs/content-policy.md: broken as published)",
    ),
    (
        "community/universal-crossplane",
        "no ClusterServiceVersion POM can read as published (docs/content-policy.md: broken as published)",
    ),
];

/// The namespace an admin picks when the refusal says to choose one (a reserved install
/// namespace, a SingleNamespace operator's watch namespace).
const ADMINS_NAMESPACE: &str = "pom-chosen";

/// Every bundle directory: (source/package, files).
fn bundles() -> Option<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    let heads = shared_support::shared_dir("real/community-operators-heads")?;
    for package in std::fs::read_dir(&heads).unwrap() {
        let package = package.unwrap().path();
        if !package.is_dir() {
            continue;
        }
        for version in std::fs::read_dir(&package).unwrap() {
            let dir = version.unwrap().path();
            let name = package.file_name().unwrap().to_string_lossy().into_owned();
            found.push((format!("community/{name}"), dir));
        }
    }
    let redhat = shared_support::shared_dir("real/redhat-operators")?;
    for package in std::fs::read_dir(&redhat).unwrap() {
        let dir = package.unwrap().path();
        if dir.is_dir() {
            let name = dir.file_name().unwrap().to_string_lossy().into_owned();
            found.push((format!("redhat/{name}"), dir));
        }
    }
    found.sort();
    Some(found)
}

/// Pastes `spec` (the refusal's `spec_to_add` text, as an admin pastes it into the
/// PlatformOperator's spec) into `opts`, reading it as YAML the way the API server would.
fn paste(spec: &str, opts: &mut RenderOptions) {
    let parsed: Value = serde_saphyr::from_str(&format!("{{{spec}}}"))
        .unwrap_or_else(|e| panic!("the paste-ready lift is not YAML: {spec}: {e}"));
    let text = |v: &Value, field: &str| -> String {
        v[field]
            .as_str()
            .or_else(|| v[field].as_bool().map(|b| if b { "true" } else { "false" }))
            .unwrap_or_else(|| panic!("{field} of {v} in {spec}"))
            .to_owned()
    };
    if let Some(consent) = parsed.get("consent").and_then(Value::as_object) {
        for (field, given) in consent {
            if field == PowerClass::AdmissionWebhooks.consent_field() {
                for webhook in given.as_array().unwrap_or_else(|| panic!("{spec}")) {
                    opts.webhook_consent.insert(WebhookConsent {
                        name: text(webhook, "name"),
                        covers: text(webhook, "covers"),
                    });
                }
                continue;
            }
            let class = PowerClass::ALL
                .into_iter()
                .find(|c| c.consent_field() == field)
                .unwrap_or_else(|| panic!("consent field {field} in {spec}"));
            assert_eq!(given, &Value::Bool(true), "{spec}");
            opts.consent.insert(class);
        }
    }
    for exception in parsed
        .get("contentExceptions")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let rule = ContentRule::parse(&text(exception, "rule"))
            .filter(|r| r.exceptable())
            .unwrap_or_else(|| panic!("rule of {exception} in {spec}"));
        opts.exceptions.push(ContentException {
            rule,
            kind: text(exception, "kind"),
            name: text(exception, "name"),
        });
    }
    for omission in parsed
        .get("omitObjects")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let kind = text(omission, "kind");
        assert!(
            ["RoleBinding", "ClusterRoleBinding", "Secret"].contains(&kind.as_str()),
            "{spec}"
        );
        opts.omit.push(OmittedObject {
            kind,
            name: text(omission, "name"),
        });
    }
}

/// What became of one bundle.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Renders,
    /// Rendered after this many refusals' lifts were pasted.
    RendersAfter(usize),
    /// Refused for something no lift allows (the refusal says so).
    NothingLifts(String),
}

fn judge(name: &str, files: &BundleFiles, namespace: &str) -> Outcome {
    let mut opts = RenderOptions::new(namespace);
    for round in 0..=ROUNDS {
        let error = match render(files, &opts) {
            Ok(_) if round == 0 => return Outcome::Renders,
            Ok(_) => return Outcome::RendersAfter(round),
            Err(error) => error,
        };
        assert!(
            round < ROUNDS,
            "{name}: still refused after {ROUNDS} lifts: {error}"
        );
        match &error {
            RenderError::ContentPolicy(violations) => {
                let message = error.to_string();
                let Some(spec) = violations.spec_to_add() else {
                    return Outcome::NothingLifts(format!(
                        "content policy: {}",
                        rules_nothing_lifts(violations)
                    ));
                };
                // The paste-ready text is what the message tells the admin to add: the whole
                // spec for several findings, the one field for one.
                let printed = match violations.0.as_slice() {
                    [one] => match &one.lift {
                        Some(Lift::Consent(class)) => {
                            format!("spec.consent.{}: true", class.consent_field())
                        }
                        Some(Lift::Webhook(webhook)) => {
                            format!("spec.consent.webhooks: [{webhook}]")
                        }
                        Some(_) => format!("spec.{spec}"),
                        None => spec.clone(),
                    },
                    _ => spec.clone(),
                };
                assert!(message.contains(&printed), "{name}: {printed} / {message}");
                let unliftable = violations.unliftable();
                if round > 0 {
                    println!("{name}: round {} pastes {spec}", round + 1);
                }
                paste(&spec, &mut opts);
                if unliftable > 0 {
                    // What the paste lifts is lifted: exactly the findings nothing lifts remain.
                    match render(files, &opts) {
                        Err(RenderError::ContentPolicy(left)) => {
                            assert_eq!(left.unliftable(), unliftable, "{name}: {left}");
                            assert_eq!(left.0.len(), unliftable, "{name}: {left}");
                        }
                        other => panic!("{name}: {:?}", other.map(|b| b.objects.len())),
                    }
                    return Outcome::NothingLifts(format!(
                        "content policy: {}",
                        rules_nothing_lifts(violations)
                    ));
                }
            }
            // "set spec.installNamespace on the PlatformOperator to a namespace of its own".
            RenderError::InstallNamespaceReserved { .. } => {
                opts.install_namespace = ADMINS_NAMESPACE.to_owned();
            }
            // "it watches one namespace: set spec.watchNamespace ...".
            RenderError::InstallModeNotSupported { hint, .. }
                if hint.contains("set spec.watchNamespace") && opts.watch_namespace.is_none() =>
            {
                opts.watch_namespace = Some(format!("{ADMINS_NAMESPACE}-watched"));
            }
            other => return Outcome::NothingLifts(kind_of(other)),
        }
    }
    unreachable!("{name}: the loop returns or asserts")
}

fn rules_nothing_lifts(violations: &pom_render::PolicyViolations) -> String {
    let mut rules: Vec<String> = violations
        .0
        .iter()
        .filter(|v| v.lift.is_none())
        .map(|v| v.rule.to_string())
        .collect();
    rules.sort();
    rules.dedup();
    rules.join(", ")
}

fn kind_of(error: &RenderError) -> String {
    match error {
        RenderError::NoCsv { .. } | RenderError::SeveralCsvs { .. } => {
            "broken as published (no CSV)".into()
        }
        RenderError::InstallModeNotSupported { .. } => "install mode".into(),
        RenderError::ApiServicesNotSupported { .. } => "APIServices".into(),
        other => format!("other: {other}"),
    }
}

#[test]
fn every_refusals_own_lift_renders_when_pasted() {
    let Some(bundles) = bundles() else {
        return;
    };
    let mut outcomes: BTreeMap<Outcome, Vec<String>> = BTreeMap::new();
    for (name, dir) in &bundles {
        let files = BundleFiles::load_dir(dir).unwrap();
        let package = name.rsplit('/').next().unwrap();
        if let Some((_, why)) = BROKEN_AS_PUBLISHED.iter().find(|(n, _)| n == name) {
            let error = render(&files, &RenderOptions::new(package)).unwrap_err();
            println!("excluded {name}: {why}: {error}");
            assert!(
                matches!(
                    error,
                    RenderError::NoCsv { .. } | RenderError::SeveralCsvs { .. }
                ),
                "{name}: {why}: {error}"
            );
            continue;
        }
        let namespace =
            default_install_namespace(&files, package).unwrap_or_else(|_| package.to_owned());
        let outcome = judge(name, &files, &namespace);
        outcomes.entry(outcome).or_default().push(name.clone());
    }
    let count = |pick: fn(&Outcome) -> bool| -> usize {
        outcomes
            .iter()
            .filter(|(o, _)| pick(o))
            .map(|(_, names)| names.len())
            .sum()
    };
    let renders = count(|o| *o == Outcome::Renders);
    let lifted = count(|o| matches!(o, Outcome::RendersAfter(_)));
    let refused = count(|o| matches!(o, Outcome::NothingLifts(_)));
    println!(
        "{} bundles ({} excluded as broken as published): {renders} render as published, {lifted} render with their refusals' own lifts pasted, {refused} are refused for something nothing lifts",
        bundles.len(),
        BROKEN_AS_PUBLISHED.len()
    );
    for (outcome, names) in &outcomes {
        if *outcome != Outcome::Renders {
            println!("  {outcome:?}: {} {}", names.len(), names.join(", "));
        }
    }
    // Every bundle refused as published renders with its refusal's own lifts, but for findings
    // the refusal itself says nothing lifts (content policy); the floor this round reached.
    for (outcome, names) in &outcomes {
        if let Outcome::NothingLifts(why) = outcome {
            assert!(why.starts_with("content policy: "), "{why}: {names:?}");
        }
    }
    // 97 since a ServiceAccount token Secret is omittable (its refusal names the omission).
    assert!(lifted >= 97, "{lifted}");
}
