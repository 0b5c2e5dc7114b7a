//! Every real file-based catalog under `../shared/testdata/real` parses, and what it says
//! arrives in the model (spot checks whose expected values were read from the files by hand;
//! each check says where).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod shared_support;

use std::path::{Path, PathBuf};

use pom_resolver::fbc::{Catalog, Dependency, MaxOpenShiftVersion, load_path};
use semver::Version;

/// `../shared/testdata/real`; `None` (skip, said on stderr) when absent outside CI, a failure
/// in CI (see `shared_support`).
fn real() -> Option<PathBuf> {
    shared_support::shared_dir("real")
}

fn load(root: &Path, relative: &str) -> Catalog {
    match load_path(&root.join(relative)) {
        Ok(catalog) => catalog,
        Err(error) => panic!("{relative} must parse: {error}"),
    }
}

/// Catalog folders: folders named `catalog*` not inside another one (registry+v1 bundle folders
/// such as `operators/<pkg>/<version>/` and rukpak's `testdata/bundles` are not catalogs).
fn catalog_folders(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    entries.sort();
    for path in entries {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.starts_with("catalog") {
            out.push(path);
        } else {
            catalog_folders(&path, out);
        }
    }
}

#[test]
fn every_real_catalog_parses() {
    let Some(root) = real() else { return };
    let mut folders = Vec::new();
    catalog_folders(&root, &mut folders);
    let relative: Vec<String> = folders
        .iter()
        .map(|p| {
            p.strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .replace('\\', "/")
        })
        .collect();
    // SOURCES.md lists these five FBC sources; the walk must find them all.
    assert_eq!(
        relative,
        [
            "openshift__secondary-scheduler-operator/v4.18/catalog",
            "operator-framework__operator-controller/testdata/catalogs",
            "red-hat-storage__odf-operator/catalog",
            "redhat-openshift-ecosystem__community-operators-prod/catalogs",
            "stolostron__gatekeeper-operator-fbc/catalog-4-20",
        ]
    );
    for folder in &folders {
        let catalog = load_path(folder).unwrap_or_else(|e| panic!("{}: {e}", folder.display()));
        assert!(!catalog.packages.is_empty(), "{}", folder.display());
        for package in catalog.packages.values() {
            for channel in package.channels.values() {
                let names: Vec<&str> = channel.entries.iter().map(|e| e.name.as_str()).collect();
                assert!(
                    names.is_sorted(),
                    "entries of {}/{} are sorted",
                    package.name,
                    channel.name
                );
            }
        }
    }
    // Each community package folder is also a catalog on its own (one rendered file each).
    let community =
        root.join("redhat-openshift-ecosystem__community-operators-prod/catalogs/v4.20");
    let mut packages: Vec<PathBuf> = std::fs::read_dir(&community)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    packages.sort();
    assert_eq!(packages.len(), 10);
    for package in packages {
        let file = package.join("catalog.yaml");
        let catalog = load_path(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let name = package.file_name().unwrap().to_string_lossy().into_owned();
        assert_eq!(catalog.packages.keys().collect::<Vec<_>>(), [&name]);
    }
}

/// JSON stream (pretty-printed objects one after another), skipRange-only channel.
#[test]
fn secondary_scheduler_json_stream() {
    let Some(root) = real() else { return };
    let catalog = load(
        &root,
        "openshift__secondary-scheduler-operator/v4.18/catalog",
    );
    let package = &catalog.packages["openshift-secondary-scheduler-operator"];
    // `"defaultChannel": "stable"` in the first blob; 14 olm.bundle blobs (v1.1.0 .. v1.4.2).
    assert_eq!(package.default_channel.as_deref(), Some("stable"));
    assert_eq!(package.bundles.len(), 14);
    let bundle = &package.bundles["secondaryscheduleroperator.v1.4.2"];
    assert_eq!(bundle.version, Version::new(1, 4, 2));
    // The blob's `{` is on line 1599 of catalog.json; its csv.metadata says minKubeVersion
    // "1.31.0" and only OwnNamespace and SingleNamespace are `supported: true`.
    assert!(bundle.origin.file.ends_with("catalog.json"));
    assert_eq!(bundle.origin.line, Some(1599));
    assert_eq!(
        bundle.properties.min_kube_version.as_deref(),
        Some("1.31.0")
    );
    assert_eq!(
        bundle.properties.supported_install_modes,
        ["OwnNamespace", "SingleNamespace"]
    );
    assert_eq!(bundle.properties.provided_gvks.len(), 1);
    assert_eq!(bundle.properties.max_openshift_version, None);
    assert!(
        bundle
            .image
            .as_deref()
            .unwrap()
            .starts_with("registry.redhat.io/")
    );
    // The head entry replaces v1.3.0, skips the 13 older bundles and has skipRange
    // ">=1.3.0 <1.4.2"; the others only carry a skipRange.
    let entry = package.channels["stable"]
        .entries
        .iter()
        .find(|e| e.name.ends_with("v1.4.2"))
        .unwrap();
    assert_eq!(
        entry.replaces.as_deref(),
        Some("secondaryscheduleroperator.v1.3.0")
    );
    assert_eq!(entry.skips.len(), 21);
    let range = entry.skip_range.as_ref().unwrap();
    assert!(range.contains(&Version::new(1, 3, 5)));
    assert!(!range.contains(&Version::new(1, 4, 2)));
    assert!(!range.contains(&Version::new(1, 2, 9)));
}

/// Split folder: package.yaml + channels/*.yaml + bundles/*.yaml, versions with build metadata.
#[test]
fn gatekeeper_split_directory() {
    let Some(root) = real() else { return };
    let catalog = load(&root, "stolostron__gatekeeper-operator-fbc/catalog-4-20");
    let package = &catalog.packages["gatekeeper-operator-product"];
    // package.yaml: defaultChannel stable; channels/ holds 7 files; bundles/ holds 18 files.
    assert_eq!(package.default_channel.as_deref(), Some("stable"));
    assert_eq!(
        package.channels.keys().collect::<Vec<_>>(),
        ["3.15", "3.17", "3.18", "3.19", "3.20", "3.21", "stable"]
    );
    assert_eq!(package.bundles.len(), 18);
    // bundles/bundle-v3.15.1+0.1725401534.p.yaml: name uses `-`, the version keeps `+build`.
    let bundle = &package.bundles["gatekeeper-operator-product.v3.15.1-0.1725401534.p"];
    assert_eq!(
        bundle.version,
        Version::parse("3.15.1+0.1725401534.p").unwrap()
    );
    assert_eq!(bundle.version.build.as_str(), "0.1725401534.p");
    assert!(
        bundle
            .origin
            .file
            .ends_with("bundle-v3.15.1+0.1725401534.p.yaml")
    );
    // channels/channel-3.15.yaml: the unsorted entries come out sorted; v3.15.1-0.1727189912.p
    // skips three bundles and has skipRange "<3.15.1".
    let entry = package.channels["3.15"]
        .entries
        .iter()
        .find(|e| e.name == "gatekeeper-operator-product.v3.15.1-0.1727189912.p")
        .unwrap();
    assert_eq!(entry.skips.len(), 3);
    assert!(
        entry
            .skip_range
            .as_ref()
            .unwrap()
            .contains(&Version::new(3, 14, 9))
    );
    assert_eq!(package.channels["stable"].entries.len(), 12);
}

/// YAML multi-doc per package, case-sensitive channel names, unquoted YAML timestamps.
#[test]
fn community_catalogs() {
    let Some(root) = real() else { return };
    let catalog = load(
        &root,
        "redhat-openshift-ecosystem__community-operators-prod/catalogs",
    );
    assert_eq!(catalog.packages.len(), 10);
    // aws-neuron-operator/catalog.yaml: `defaultChannel: Fast`, channels `Fast` and `Stable`.
    let neuron = &catalog.packages["aws-neuron-operator"];
    assert_eq!(neuron.default_channel.as_deref(), Some("Fast"));
    assert_eq!(
        neuron.channels.keys().collect::<Vec<_>>(),
        ["Fast", "Stable"]
    );
    assert!(!neuron.channels.contains_key("fast"));
    // rabbitmq-cluster-operator/catalog.yaml: the v2.13.0 blob starts after the `---` on line
    // 545 (its annotations carry the unquoted `createdAt: 2025-06-24T14:07:09`, line 590, which
    // stays the string it was written as: `fbc/yaml_events.rs` and `tests/yaml_fast_path.rs`).
    let rabbit = &catalog.packages["rabbitmq-cluster-operator"];
    let bundle = &rabbit.bundles["rabbitmq-cluster-operator.v2.13.0"];
    assert_eq!(bundle.origin.line, Some(546));
    assert!(
        bundle
            .origin
            .file
            .ends_with("rabbitmq-cluster-operator/catalog.yaml")
    );
    assert_eq!(bundle.version, Version::new(2, 13, 0));
    // The first bundles declare `minKubeVersion: 1.19.0`.
    assert_eq!(
        rabbit.bundles["rabbitmq-cluster-operator.v2.0.0"]
            .properties
            .min_kube_version
            .as_deref(),
        Some("1.19.0")
    );
    // infinispan/catalog.yaml: 49 olm.bundle blobs, channels 2.2.x, 2.3.x, 2.4.x, stable.
    let infinispan = &catalog.packages["infinispan"];
    assert_eq!(infinispan.bundles.len(), 49);
    assert_eq!(
        infinispan.channels.keys().collect::<Vec<_>>(),
        ["2.2.x", "2.3.x", "2.4.x", "stable"]
    );
}

/// Multi-package catalog with olm.bundle.object, maxOpenShiftVersion and dependencies; some
/// packages ship channels but no bundles (the subset copied, and odf-operator upstream too).
#[test]
fn odf_bundle_objects_and_max_openshift_version() {
    let Some(root) = real() else { return };
    let catalog = load(&root, "red-hat-storage__odf-operator/catalog");
    // index.yaml declares 16 packages.
    assert_eq!(catalog.packages.len(), 16);
    assert!(catalog.packages["odf-operator"].bundles.is_empty());
    // odf-dependencies.yaml: `olm.maxOpenShiftVersion` value "4.23", ten
    // olm.package.required, one olm.bundle.object holding the CSV as base64 JSON.
    let bundle = &catalog.packages["odf-dependencies"].bundles["odf-dependencies.v4.22.0"];
    assert_eq!(
        bundle.properties.max_openshift_version,
        Some(MaxOpenShiftVersion::Valid {
            major: 4,
            minor: 23
        })
    );
    let required: Vec<&str> = bundle
        .properties
        .dependencies
        .iter()
        .filter_map(|d| match d {
            Dependency::Package { package_name, .. } => Some(package_name.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(required.len(), 10);
    assert_eq!(required[0], "cephcsi-operator");
    assert_eq!(bundle.properties.objects.len(), 1);
    assert!(bundle.properties.objects[0].starts_with(
        r#"{"apiVersion":"operators.coreos.com/v1alpha1","kind":"ClusterServiceVersion""#
    ));
    // ibm.yaml carries 7 olm.bundle.object properties, ibm-csi.yaml 4.
    assert_eq!(
        catalog.packages["ibm-storage-odf-operator"].bundles["ibm-storage-odf-operator.v1.9.0"]
            .properties
            .objects
            .len(),
        7
    );
    assert_eq!(
        catalog.packages["ibm-block-csi-operator"].bundles["ibm-block-csi-operator.v1.13.2"]
            .properties
            .objects
            .len(),
        4
    );
    // index.yaml: ibm-storage-odf-operator's defaultChannel is stable-v1.9.
    assert_eq!(
        catalog.packages["ibm-storage-odf-operator"]
            .default_channel
            .as_deref(),
        Some("stable-v1.9")
    );
}

/// Historic operator-controller test catalog: a plain+v0 bundle via olm.bundle.mediatype.
#[test]
fn operator_controller_plain_bundle() {
    let Some(root) = real() else { return };
    let catalog = load(
        &root,
        "operator-framework__operator-controller/testdata/catalogs",
    );
    // test-catalog/catalog.yaml: packages plain and prometheus; plain.0.1.0 is plain+v0.
    assert_eq!(
        catalog.packages.keys().collect::<Vec<_>>(),
        ["plain", "prometheus"]
    );
    let plain = &catalog.packages["plain"].bundles["plain.0.1.0"];
    assert_eq!(plain.properties.media_type.as_deref(), Some("plain+v0"));
    let beta = &catalog.packages["prometheus"].channels["beta"];
    assert_eq!(beta.entries.len(), 4);
    assert_eq!(
        beta.entries[3].replaces.as_deref(),
        Some("prometheus-operator.1.2.0")
    );
}
