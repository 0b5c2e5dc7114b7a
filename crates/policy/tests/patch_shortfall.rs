//! Issue 35 item 3: whether the patch update the cluster is asked to take would leave a
//! PlatformOperator without a bundle that runs there (`precheck::patch_shortfall`), one row
//! per rule: the manager's own walk under the update's pin decides where the PO ends.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::jiff::Timestamp;
use pom_api::PlatformOperator;
use pom_api::platform_operator::{InstalledBundle, PackageSpec, PlatformOperatorSpec};
use pom_policy::precheck::patch_shortfall;
use pom_policy::snapshot::{
    CatalogContent, CatalogView, ClusterView, ConfigView, GuardState, Installed, OperatorGate,
    PoSnapshot,
};
use pom_resolver::cluster::ClusterPhase;
use pom_resolver::fbc::{Catalog, parse_documents};
use semver::Version;

fn bundle(version: &str, replaces: Option<&str>, max: Option<&str>) -> (String, String) {
    let entry = match replaces {
        Some(r) => format!(r#"{{"name":"demo.v{version}","replaces":"demo.v{r}"}}"#),
        None => format!(r#"{{"name":"demo.v{version}"}}"#),
    };
    let max = max.map_or(String::new(), |m| {
        format!(r#",{{"type":"olm.maxOpenShiftVersion","value":"{m}"}}"#)
    });
    let doc = format!(
        r#"{{"schema":"olm.bundle","package":"demo","name":"demo.v{version}","image":"quay.example/demo:{version}","properties":[{{"type":"olm.package","value":{{"packageName":"demo","version":"{version}"}}}}{max}]}}"#
    );
    (entry, doc)
}

/// A `stable` channel of `bundles` (version, replaces, max).
fn catalog(bundles: &[(&str, Option<&str>, Option<&str>)]) -> Catalog {
    let parts: Vec<(String, String)> = bundles.iter().map(|(v, r, m)| bundle(v, *r, *m)).collect();
    let entries: Vec<&str> = parts.iter().map(|(e, _)| e.as_str()).collect();
    let mut fbc = format!(
        "{{\"schema\":\"olm.package\",\"name\":\"demo\",\"defaultChannel\":\"stable\"}}\n{{\"schema\":\"olm.channel\",\"package\":\"demo\",\"name\":\"stable\",\"entries\":[{}]}}\n",
        entries.join(",")
    );
    for (_, doc) in &parts {
        fbc.push_str(doc);
        fbc.push('\n');
    }
    parse_documents([("c.json".to_owned(), fbc.into_bytes())]).unwrap()
}

fn v(text: &str) -> Version {
    Version::parse(text).unwrap()
}

fn snapshot<'a>(
    catalog: &'a Catalog,
    installed: &str,
    max: Option<&str>,
    cluster: &str,
) -> PoSnapshot<'a> {
    let mut po = PlatformOperator::new(
        "demo",
        PlatformOperatorSpec {
            package: PackageSpec {
                name: "demo".to_owned(),
                ..PackageSpec::default()
            },
            ..serde_json::from_value(serde_json::json!({"package": {"name": "demo"}})).unwrap()
        },
    );
    po.metadata.generation = Some(1);
    PoSnapshot {
        name: "demo".to_owned(),
        request: pom_policy::PoRequest::from_spec("demo", &po.spec),
        duplicate_of: None,
        namespace_clash: None,
        requested_update: None,
        installed: Some(Installed::from_status(
            &InstalledBundle {
                name: format!("demo.v{installed}"),
                version: installed.to_owned(),
                image: None,
                objects_digest: None,
            },
            max,
        )),
        hop: None,
        cluster: ClusterView::OpenShift(Ok(ClusterPhase::steady(v(cluster)))),
        kube_version: None,
        catalogs: CatalogView::Ready {
            catalogs: vec![CatalogContent {
                name: "redhat".to_owned(),
                priority: 0,
                content: catalog,
            }],
            unavailable: vec![],
        },
        gate: OperatorGate::absent(),
        now: Timestamp::from_second(1_717_243_200).unwrap(),
        found_bundle_label: None,
        unsettled_move: None,
        guard: GuardState::Intact,
        paused: false,
        config: ConfigView::of(&po, None),
    }
}

/// (label, catalog, installed, its recorded max, cluster now, patch requested, shortfall)
type Row<'a> = (
    &'a str,
    &'a Catalog,
    &'a str,
    Option<&'a str>,
    &'a str,
    &'a str,
    bool,
);

#[test]
fn patch_shortfall_table() {
    let alone = catalog(&[("1.0.0", None, Some("4.16"))]);
    let fix_in_pin = catalog(&[
        ("1.0.0", None, Some("4.16")),
        ("1.0.1", Some("1.0.0"), None),
    ]);
    let fix_out_of_pin = catalog(&[
        ("1.0.0", None, Some("4.16")),
        ("1.1.0", Some("1.0.0"), None),
    ]);
    let capped_fix = catalog(&[
        ("1.0.0", None, Some("4.16")),
        ("1.0.1", Some("1.0.0"), Some("4.16")),
    ]);
    let rows: &[Row<'_>] = &[
        (
            "runs on the minor: a patch keeps it",
            &alone,
            "1.0.0",
            Some("4.16"),
            "4.16.3",
            "4.16.4",
            false,
        ),
        (
            "no max at all",
            &alone,
            "1.0.0",
            None,
            "4.17.0",
            "4.17.1",
            false,
        ),
        (
            "forced past its max, nothing to move to",
            &alone,
            "1.0.0",
            Some("4.16"),
            "4.17.0",
            "4.17.1",
            true,
        ),
        (
            "forced past, a fix within the patch pin: the walk takes it",
            &fix_in_pin,
            "1.0.0",
            Some("4.16"),
            "4.17.0",
            "4.17.1",
            false,
        ),
        (
            "forced past, the fix is a new minor of the operator (outside the pin)",
            &fix_out_of_pin,
            "1.0.0",
            Some("4.16"),
            "4.17.0",
            "4.17.1",
            true,
        ),
        (
            "forced past, the next bundle stops at 4.16 too",
            &capped_fix,
            "1.0.0",
            Some("4.16"),
            "4.17.0",
            "4.17.1",
            true,
        ),
        (
            "an invalid recorded max never runs",
            &alone,
            "1.0.0",
            Some("4.16.7"),
            "4.16.3",
            "4.16.4",
            true,
        ),
    ];
    for (label, catalog, installed, max, cluster, requested, want) in rows {
        let got = patch_shortfall(&snapshot(catalog, installed, *max, cluster), &v(requested));
        assert_eq!(got.is_some(), *want, "{label}: {got:?}");
        if let Some(why) = got {
            assert!(
                why.contains(requested)
                    && why.contains("demo.v")
                    && why.contains("olm.maxOpenShiftVersion"),
                "{label}: the message names the update, the bundle and its limit: {why}"
            );
        }
    }
    // Nothing installed: nothing to leave behind.
    let mut empty = snapshot(&alone, "1.0.0", Some("4.16"), "4.17.0");
    empty.installed = None;
    assert_eq!(patch_shortfall(&empty, &v("4.17.1")), None);
}
