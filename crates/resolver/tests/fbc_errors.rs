//! One test per catalog error: a small inline catalog, the variant it must produce, and a
//! message that names the file and line (or the field) so an operator can find and fix it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pom_resolver::fbc::{Catalog, FbcError, load_path, parse_documents};

const PACKAGE: &str = r#"{"schema":"olm.package","name":"foo","defaultChannel":"stable"}"#;
const CHANNEL: &str = r#"{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.0.0"},{"name":"foo.v1.1.0","replaces":"foo.v1.0.0"}]}"#;

fn bundle(name: &str, version: &str) -> String {
    format!(
        r#"{{"schema":"olm.bundle","package":"foo","name":"{name}","image":"quay.io/foo@sha256:1","properties":[{{"type":"olm.package","value":{{"packageName":"foo","version":"{version}"}}}}]}}"#
    )
}

/// A valid catalog: package, channel, two bundles (one blob per line).
fn valid_lines() -> Vec<String> {
    vec![
        PACKAGE.to_owned(),
        CHANNEL.to_owned(),
        bundle("foo.v1.0.0", "1.0.0"),
        bundle("foo.v1.1.0", "1.1.0"),
    ]
}

fn parse(label: &str, text: &str) -> Result<Catalog, FbcError> {
    parse_documents([(label.to_owned(), text.as_bytes().to_vec())])
}

fn parse_lines(lines: &[String]) -> Result<Catalog, FbcError> {
    parse("catalog.json", &lines.join("\n"))
}

/// Runs `result`, expecting an error whose message contains every `needle`: the catalog's
/// own (it cannot be read at all), or the one package it leaves out (an inconsistency inside
/// a package is scoped to that package, which is then not served).
fn error_of(result: Result<Catalog, FbcError>, needles: &[&str]) -> FbcError {
    let error = match result {
        Err(error) => error,
        Ok(catalog) => {
            let mut invalid = catalog.invalid_packages.into_iter();
            let (package, error) = invalid
                .next()
                .expect("the catalog, or one package of it, must be refused");
            assert!(invalid.next().is_none(), "one package is invalid");
            assert!(
                !catalog.packages.contains_key(&package),
                "an invalid package is not served"
            );
            error
        }
    };
    let message = error.to_string();
    for needle in needles {
        assert!(
            message.contains(needle),
            "message {message:?} should mention {needle:?}"
        );
    }
    error
}

#[test]
fn the_base_catalog_is_valid() {
    let catalog = parse_lines(&valid_lines()).unwrap();
    assert_eq!(catalog.packages["foo"].bundles.len(), 2);
}

#[test]
fn malformed_json_names_file_line_and_column() {
    let text = format!("{PACKAGE}\n{CHANNEL}\n{{\"schema\": \"olm.bundle\", \"name\": }}\n");
    let error = error_of(
        parse("catalog.json", &text),
        &["catalog.json:3:", "malformed JSON"],
    );
    assert!(matches!(error, FbcError::MalformedJson { column, .. } if column > 1));
}

#[test]
fn malformed_yaml_names_file_and_line() {
    let text = "---\nschema: olm.package\nname: foo\n---\nschema: olm.channel\nentries: [a, b\n";
    let error = error_of(
        parse("index.yaml", text),
        &["index.yaml:", "malformed YAML"],
    );
    let FbcError::MalformedYaml { origin, .. } = error else {
        panic!("{error:?}")
    };
    assert!(origin.line.unwrap() >= 5, "{origin:?}");
}

#[test]
fn blob_without_schema() {
    let mut lines = valid_lines();
    lines.push(r#"{"name":"mystery"}"#.to_owned());
    let error = error_of(parse_lines(&lines), &["catalog.json:5", "`schema`"]);
    assert!(matches!(error, FbcError::MissingSchema { .. }));
}

#[test]
fn bundle_without_package_property() {
    let mut lines = valid_lines();
    lines[3] = r#"{"schema":"olm.bundle","package":"foo","name":"foo.v1.1.0","image":"i","properties":[{"type":"olm.gvk","value":{"group":"g","version":"v1","kind":"K"}}]}"#.to_owned();
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:4", "foo.v1.1.0", "olm.package"],
    );
    assert!(matches!(
        error,
        FbcError::PackagePropertyCount { count: 0, .. }
    ));
}

#[test]
fn bundle_with_two_package_properties() {
    let mut lines = valid_lines();
    lines[3] = lines[3].replace(
        r#""properties":["#,
        r#""properties":[{"type":"olm.package","value":{"packageName":"foo","version":"9.9.9"}},"#,
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:4", "2 olm.package properties"],
    );
    assert!(matches!(
        error,
        FbcError::PackagePropertyCount { count: 2, .. }
    ));
}

#[test]
fn bundle_whose_package_property_disagrees() {
    let mut lines = valid_lines();
    lines[3] = lines[3].replace(r#""packageName":"foo""#, r#""packageName":"bar""#);
    let error = error_of(parse_lines(&lines), &["catalog.json:4", "\"bar\""]);
    assert!(matches!(error, FbcError::PackagePropertyMismatch { .. }));
}

#[test]
fn duplicate_bundle_names_in_a_package() {
    let mut lines = valid_lines();
    lines.push(bundle("foo.v1.1.0", "1.1.0"));
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:5", "first at catalog.json:4", "foo.v1.1.0"],
    );
    assert!(matches!(error, FbcError::DuplicateBundle { .. }));
}

#[test]
fn duplicate_packages() {
    let mut lines = valid_lines();
    lines.push(PACKAGE.to_owned());
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:5", "first at catalog.json:1", "\"foo\""],
    );
    assert!(matches!(error, FbcError::DuplicatePackage { .. }));
}

#[test]
fn duplicate_channels_across_files() {
    let docs = [
        ("a.json".to_owned(), valid_lines().join("\n").into_bytes()),
        ("b.json".to_owned(), CHANNEL.as_bytes().to_vec()),
    ];
    let error = error_of(
        parse_documents(docs),
        &["b.json:1", "first at a.json:2", "\"stable\""],
    );
    assert!(matches!(error, FbcError::DuplicateChannel { .. }));
}

#[test]
fn channels_are_case_sensitive_so_stable_and_stable_differ() {
    let mut lines = valid_lines();
    lines.push(CHANNEL.replace(r#""name":"stable""#, r#""name":"Stable""#));
    let catalog = parse_lines(&lines).unwrap();
    assert_eq!(
        catalog.packages["foo"].channels.keys().collect::<Vec<_>>(),
        ["Stable", "stable"]
    );
}

#[test]
fn duplicate_entry_in_a_channel() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(
        r#"{"name":"foo.v1.0.0"}"#,
        r#"{"name":"foo.v1.0.0"},{"name":"foo.v1.0.0"}"#,
    );
    let error = error_of(parse_lines(&lines), &["catalog.json:2", "twice"]);
    assert!(matches!(error, FbcError::DuplicateChannelEntry { .. }));
}

#[test]
fn channel_entry_naming_a_missing_bundle() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(
        r#""replaces":"foo.v1.0.0"}"#,
        r#""replaces":"foo.v1.0.0"},{"name":"foo.v2.0.0","replaces":"foo.v1.1.0"}"#,
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:2", "\"foo.v2.0.0\"", "no olm.bundle"],
    );
    assert!(matches!(error, FbcError::UnknownBundle { .. }));
}

#[test]
fn two_channel_heads() {
    let mut lines = valid_lines();
    // v1.1.0 no longer replaces v1.0.0: both are heads.
    lines[1] = lines[1].replace(r#","replaces":"foo.v1.0.0""#, "");
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:2", "2 heads", "foo.v1.0.0, foo.v1.1.0"],
    );
    let FbcError::ChannelHeads { heads, .. } = error else {
        panic!()
    };
    assert_eq!(heads, ["foo.v1.0.0", "foo.v1.1.0"]);
}

#[test]
fn a_skip_edge_is_an_edge_for_heads_but_skip_range_is_not() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(r#""replaces":"foo.v1.0.0""#, r#""skips":["foo.v1.0.0"]"#);
    assert!(parse_lines(&lines).unwrap().invalid_packages.is_empty());
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(r#""replaces":"foo.v1.0.0""#, r#""skipRange":"<1.1.0""#);
    assert!(matches!(
        parse_lines(&lines).unwrap().invalid_packages.get("foo"),
        Some(FbcError::ChannelHeads { .. })
    ));
}

#[test]
fn replaces_cycle() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(
        r#"{"name":"foo.v1.0.0"}"#,
        r#"{"name":"foo.v1.0.0","replaces":"foo.v1.1.0"}"#,
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:2", "foo.v1.0.0 -> foo.v1.1.0 -> foo.v1.0.0"],
    );
    assert!(matches!(error, FbcError::ReplacesCycle { .. }));
}

#[test]
fn dangling_replaces_and_unsorted_entries_are_fine() {
    let mut lines = valid_lines();
    lines[1] = r#"{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1.1.0","replaces":"foo.v1.0.0"},{"name":"foo.v1.0.0","replaces":"foo.v0.9.0"}]}"#.to_owned();
    let catalog = parse_lines(&lines).unwrap();
    let entries = &catalog.packages["foo"].channels["stable"].entries;
    assert_eq!(entries[0].name, "foo.v1.0.0");
    assert_eq!(entries[0].replaces.as_deref(), Some("foo.v0.9.0"));
}

#[test]
fn invalid_version() {
    let mut lines = valid_lines();
    lines[3] = bundle("foo.v1.1.0", "v1.1");
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:4", "`version`", "v1.1"],
    );
    assert!(matches!(error, FbcError::InvalidVersion { .. }));
}

#[test]
fn invalid_skip_range() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(
        r#""replaces":"foo.v1.0.0""#,
        r#""replaces":"foo.v1.0.0","skipRange":"^1.0.0""#,
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:2", "skipRange", "\"^1.0.0\"", "foo.v1.1.0"],
    );
    assert!(matches!(error, FbcError::InvalidSkipRange { .. }));
}

#[test]
fn bundle_of_an_undeclared_package() {
    let mut lines = valid_lines();
    lines.push(
        bundle("bar.v1", "1.0.0")
            .replace(r#""package":"foo""#, r#""package":"bar""#)
            .replace(r#""packageName":"foo""#, r#""packageName":"bar""#),
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:5", "no olm.package blob named \"bar\""],
    );
    assert!(matches!(error, FbcError::UnknownPackage { ref schema, .. } if schema == "olm.bundle"));
}

#[test]
fn channel_of_an_undeclared_package() {
    let lines = [CHANNEL.replace(r#""package":"foo""#, r#""package":"bar""#)];
    let error = error_of(parse_lines(&lines), &["catalog.json:1", "\"bar\""]);
    assert!(
        matches!(error, FbcError::UnknownPackage { ref schema, .. } if schema == "olm.channel")
    );
}

#[test]
fn keys_colliding_after_case_folding() {
    let mut lines = valid_lines();
    lines[0] = r#"{"schema":"olm.package","name":"foo","Name":"foo"}"#.to_owned();
    let error = error_of(parse_lines(&lines), &["catalog.json:1", "`name`", "case"]);
    assert!(matches!(error, FbcError::InvalidBlob { .. }));
    // Unknown top-level keys collide too, as in operator-registry's Meta.
    lines[0] = r#"{"schema":"olm.package","name":"foo","icon":{},"ICON":{}}"#.to_owned();
    assert!(matches!(
        parse_lines(&lines),
        Err(FbcError::InvalidBlob { .. })
    ));
}

#[test]
fn field_of_the_wrong_type_names_the_field() {
    let mut lines = valid_lines();
    lines[1] = lines[1].replace(r#""replaces":"foo.v1.0.0""#, r#""replaces":42"#);
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:2", "invalid olm.channel", "field `replaces`"],
    );
    assert!(matches!(error, FbcError::InvalidBlob { .. }));
}

#[test]
fn missing_required_field() {
    let mut lines = valid_lines();
    lines[0] = r#"{"schema":"olm.package","defaultChannel":"stable"}"#.to_owned();
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:1", "olm.package blob has no `name`"],
    );
    assert!(matches!(error, FbcError::MissingField { .. }));
}

#[test]
fn bundle_object_that_is_not_base64() {
    let mut lines = valid_lines();
    lines[3] = lines[3].replace(
        r#""properties":["#,
        r#""properties":[{"type":"olm.bundle.object","value":{"data":"not base64!"}},"#,
    );
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:4", "olm.bundle.object", "`data`"],
    );
    assert!(matches!(error, FbcError::InvalidProperty { .. }));
}

#[test]
fn property_value_of_the_wrong_shape() {
    let mut lines = valid_lines();
    lines[3] = lines[3].replace(
        r#""properties":["#,
        r#""properties":[{"type":"olm.gvk","value":"apps/v1"},"#,
    );
    let error = error_of(parse_lines(&lines), &["catalog.json:4", "olm.gvk"]);
    assert!(matches!(error, FbcError::InvalidProperty { .. }));
}

#[test]
fn deprecation_with_an_unknown_reference_schema() {
    let mut lines = valid_lines();
    lines.push(r#"{"schema":"olm.deprecations","package":"foo","entries":[{"reference":{"schema":"olm.thing","name":"x"},"message":"m"}]}"#.to_owned());
    let error = error_of(parse_lines(&lines), &["catalog.json:5", "\"olm.thing\""]);
    assert!(matches!(error, FbcError::InvalidDeprecation { .. }));
}

#[test]
fn deprecations_twice_for_one_package() {
    let mut lines = valid_lines();
    let deprecations = r#"{"schema":"olm.deprecations","package":"foo","entries":[]}"#.to_owned();
    lines.push(deprecations.clone());
    lines.push(deprecations);
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:6", "first at catalog.json:5"],
    );
    assert!(matches!(error, FbcError::DuplicateDeprecations { .. }));
}

#[test]
fn missing_path() {
    let error = load_path(std::path::Path::new("/nonexistent/pom/catalog")).unwrap_err();
    assert!(matches!(error, FbcError::Io { .. }));
    assert!(error.to_string().contains("/nonexistent/pom/catalog"));
}

#[test]
fn one_bad_package_never_blocks_the_others() {
    // foo is fine; bar has a channel with two heads.
    let mut lines = valid_lines();
    lines.push(r#"{"schema":"olm.package","name":"bar","defaultChannel":"stable"}"#.to_owned());
    lines.push(r#"{"schema":"olm.channel","package":"bar","name":"stable","entries":[{"name":"bar.v1"},{"name":"bar.v2"}]}"#.to_owned());
    for (name, version) in [("bar.v1", "1.0.0"), ("bar.v2", "2.0.0")] {
        lines.push(
            bundle(name, version)
                .replace(r#""package":"foo""#, r#""package":"bar""#)
                .replace(r#""packageName":"foo""#, r#""packageName":"bar""#),
        );
    }
    let catalog = parse_lines(&lines).unwrap();
    assert_eq!(catalog.packages.keys().collect::<Vec<_>>(), ["foo"]);
    let error = &catalog.invalid_packages["bar"];
    assert!(matches!(error, FbcError::ChannelHeads { .. }), "{error}");
    assert!(error.to_string().contains("bar.v1, bar.v2"), "{error}");
}

// ---- what `opm validate` refuses per package (e2e/tests/catalog_opm.rs runs opm itself) ----

#[test]
fn default_channel_must_name_a_channel() {
    let mut lines = valid_lines();
    lines[0] = r#"{"schema":"olm.package","name":"foo","defaultChannel":"fast"}"#.to_owned();
    let error = error_of(
        parse_lines(&lines),
        &[
            "catalog.json:1",
            "\"foo\"",
            "defaultChannel \"fast\"",
            "stable",
        ],
    );
    assert!(matches!(error, FbcError::DefaultChannel { .. }));
    lines[0] = r#"{"schema":"olm.package","name":"foo"}"#.to_owned();
    let error = error_of(
        parse_lines(&lines),
        &["catalog.json:1", "\"foo\"", "no defaultChannel"],
    );
    assert!(matches!(
        error,
        FbcError::DefaultChannel {
            default_channel: None,
            ..
        }
    ));
}

#[test]
fn a_bundle_in_no_channel_is_refused() {
    let mut lines = valid_lines();
    lines.push(bundle("foo.v2.0.0", "2.0.0"));
    let error = error_of(
        parse_lines(&lines),
        &[
            "catalog.json:5",
            "\"foo.v2.0.0\"",
            "\"foo\"",
            "in no channel",
        ],
    );
    assert!(matches!(error, FbcError::BundleInNoChannel { .. }));
}

#[test]
fn a_deprecation_must_name_an_existing_bundle_or_channel() {
    for (reference, needle) in [
        (
            r#"{"schema":"olm.bundle","name":"foo.v9.9.9"}"#,
            "bundle \"foo.v9.9.9\"",
        ),
        (
            r#"{"schema":"olm.channel","name":"fast"}"#,
            "channel \"fast\"",
        ),
    ] {
        let mut lines = valid_lines();
        lines.push(format!(
            r#"{{"schema":"olm.deprecations","package":"foo","entries":[{{"reference":{reference},"message":"gone"}}]}}"#
        ));
        let error = error_of(parse_lines(&lines), &["catalog.json:5", "\"foo\"", needle]);
        assert!(matches!(error, FbcError::InvalidDeprecation { .. }));
    }
}

#[test]
fn a_package_without_bundles_is_let_through() {
    // The catalog ships the bundles elsewhere (see validate::channel): no default channel
    // check, no bundle-in-no-channel check.
    let lines = [
        r#"{"schema":"olm.package","name":"foo"}"#.to_owned(),
        CHANNEL.to_owned(),
    ];
    let catalog = parse_lines(&lines).unwrap();
    assert!(catalog.invalid_packages.is_empty());
    assert!(catalog.packages.contains_key("foo"));
}

/// The property values POM reads in passing when their type comes first (`olm.csv.metadata`,
/// `olm.package`, `olm.gvk`, `olm.gvk.required`, `olm.package.required`) are read from text
/// when it comes after; a value of the wrong shape is the same property error either way, and
/// in YAML (the blob is decoded again with values as text to report it).
#[test]
fn property_values_of_the_wrong_shape_are_one_property_error_in_any_key_order_and_format() {
    let cases = [
        (
            "olm.csv.metadata",
            r#"{"minKubeVersion":"1.27.0","installModes":"AllNamespaces"}"#,
        ),
        ("olm.package", r#"{"packageName":5,"version":"1.1.0"}"#),
        ("olm.gvk", r#"{"group":[],"version":"v1","kind":"K"}"#),
        (
            "olm.gvk.required",
            r#"{"group":"g","version":"v1","kind":{}}"#,
        ),
        (
            "olm.package.required",
            r#"{"packageName":"bar","versionRange":true}"#,
        ),
    ];
    for (kind, bad) in cases {
        let mut messages = Vec::new();
        for property in [
            format!(r#"{{"type":"{kind}","value":{bad}}}"#),
            format!(r#"{{"value":{bad},"type":"{kind}"}}"#),
            format!(r#"{{"type":"{kind}","value":null}}"#),
        ] {
            let mut lines = valid_lines();
            lines[3] = lines[3].replace(
                r#""properties":["#,
                &format!(r#""properties":[{property},"#),
            );
            let error = error_of(parse_lines(&lines), &["catalog.json:4", kind]);
            assert!(matches!(error, FbcError::InvalidProperty { .. }), "{error}");
            messages.push(error.to_string());
        }
        assert_eq!(
            messages[0], messages[1],
            "{kind}: the key order changes nothing"
        );
        let yaml: String = valid_lines()
            .iter()
            .enumerate()
            .map(|(i, line)| {
                let mut blob: serde_json::Value = serde_json::from_str(line).unwrap();
                if i == 3 {
                    let bad: serde_json::Value = serde_json::from_str(bad).unwrap();
                    blob["properties"]
                        .as_array_mut()
                        .unwrap()
                        .insert(0, serde_json::json!({"type": kind, "value": bad}));
                }
                format!("---\n{}", serde_saphyr::to_string(&blob).unwrap())
            })
            .collect();
        let error = error_of(parse("catalog.yaml", &yaml), &["catalog.yaml:", kind]);
        assert!(matches!(error, FbcError::InvalidProperty { .. }), "{error}");
        let reason = |message: &str| {
            message
                .split_once(&format!("invalid {kind} property: "))
                .map(|(_, r)| r.to_owned())
        };
        assert!(reason(&messages[0]).is_some(), "{}", messages[0]);
        assert_eq!(
            reason(&error.to_string()),
            reason(&messages[0]),
            "{kind}: YAML says the same"
        );
    }
}

/// The same catalog with every property's keys in either order decodes to the same model.
#[test]
fn property_key_order_does_not_change_the_model() {
    let mut lines = valid_lines();
    lines[3] = lines[3].replace(
        r#""properties":["#,
        concat!(
            r#""properties":[{"type":"olm.csv.metadata","value":{"minKubeVersion":"1.27.0","#,
            r#""installModes":[{"type":"AllNamespaces","supported":true},"#,
            r#"{"type":"OwnNamespace","supported":false}],"description":"long"}},"#,
            r#"{"type":"olm.gvk","value":{"group":"g","version":"v1","kind":"K"}},"#,
            r#"{"type":"olm.gvk.required","value":{"group":"h","version":"v2","kind":"R"}},"#,
            r#"{"type":"olm.package.required","value":{"packageName":"bar","#,
            r#""versionRange":">=1.0.0"}},"#,
            r#"{"type":"example.com/custom","value":[1,{"a":"b"}]},"#,
        ),
    );
    let swapped: Vec<String> = lines
        .iter()
        .map(|line| {
            let blob: serde_json::Value = serde_json::from_str(line).unwrap();
            let Some(properties) = blob.get("properties").and_then(|p| p.as_array()) else {
                return line.clone();
            };
            let rewritten: Vec<String> = properties
                .iter()
                .map(|p| format!(r#"{{"value":{},"type":{}}}"#, p["value"], p["type"]))
                .collect();
            let mut head = blob.clone();
            head.as_object_mut().unwrap().remove("properties");
            let head = head.to_string();
            format!(
                "{},\"properties\":[{}]}}",
                &head[..head.len() - 1],
                rewritten.join(",")
            )
        })
        .collect();
    assert_ne!(lines, swapped);
    let catalog = parse_lines(&lines).unwrap();
    let bundle = &catalog.packages["foo"].bundles["foo.v1.1.0"];
    assert_eq!(
        bundle.properties.min_kube_version.as_deref(),
        Some("1.27.0")
    );
    assert_eq!(bundle.properties.supported_install_modes, ["AllNamespaces"]);
    assert_eq!(bundle.properties.provided_gvks.len(), 1);
    assert_eq!(bundle.properties.dependencies.len(), 2);
    assert_eq!(catalog, parse_lines(&swapped).unwrap());
}
