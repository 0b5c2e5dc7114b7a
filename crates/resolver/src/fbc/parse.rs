//! The catalog parser's entry points: from disk ([`load_path`]) or from memory
//! ([`parse_documents`]).
//!
//! Both accept every form real catalogs come in: JSON streams (concatenated objects, JSON
//! Lines), YAML multi-document files, and folders split into any number of such files. The
//! result is the indexed [`Catalog`] every resolution reads, or the first [`FbcError`] found
//! (files in sorted order, blobs in file order), which names the file, the line when known and
//! the field, and says what to change.

use std::path::Path;

use super::assemble::Assembler;
use super::decode::{AliasBudget, decode_document};
pub use super::error::{DuplicateDetail, FbcError, InvalidSkipRangeDetail};
use super::model::Catalog;
use super::source;

/// Loads a catalog from a file or a folder (walked recursively, sorted, `.json`/`.yaml`/`.yml`
/// only, `.indexignore` honoured). Blob origins carry file paths as `path` names them.
pub fn load_path(path: &Path) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    let mut aliases = AliasBudget::default();
    for file in source::catalog_files(path)? {
        let bytes = source::read(&file)?;
        decode_document(&file.label, &bytes, &mut assembler, &mut aliases)?;
    }
    assembler.finish()
}

/// Parses catalog content that is not on disk (a ConfigMap key, files pulled from an image):
/// `(label, bytes)` pairs, where the label names the content in errors and origins (for example
/// `configmap/ns/name:catalog.json`). Each document may be a JSON stream or YAML.
pub fn parse_documents(
    docs: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    let mut aliases = AliasBudget::default();
    for (label, bytes) in docs {
        decode_document(&label, &bytes, &mut assembler, &mut aliases)?;
    }
    assembler.finish()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use super::*;
    use crate::fbc::model::MaxOpenShiftVersion;

    fn parse(label: &str, text: &str) -> Catalog {
        match parse_documents([(label.to_owned(), text.as_bytes().to_vec())]) {
            Ok(catalog) => catalog,
            Err(error) => panic!("{error}"),
        }
    }

    #[test]
    fn concatenated_json_objects_with_keys_in_any_case_and_order() {
        let text = concat!(
            r#"{"defaultChannel":"stable","NAME":"foo","Schema":"olm.package"}{"schema":"olm.channel","#,
            r#""Entries":[{"Name":"foo.v1","skipRange":"<1.0.0"}],"package":"foo","name":"stable"}"#,
            "\n",
            r#"{"properties":[{"value":{"PackageName":"foo","Version":"1.0.0"},"Type":"olm.package"},"#,
            r#"{"type":"olm.maxOpenShiftVersion","value":4.9},"#,
            r#"{"type":"olm.csv.metadata","value":{"installModes":[{"type":"AllNamespaces","supported":true},{"type":"OwnNamespace","supported":false}],"minKubeVersion":"1.27.0"}},"#,
            r#"{"type":"olm.gvk.required","value":{"group":"g","version":"v1","kind":"K"}},"#,
            r#"{"type":"olm.constraint","value":{"failureMessage":"x","cel":{"rule":"true"}}},"#,
            r#"{"type":"olm.bundle.object","value":{"data":"a2luZDogQ29uZmlnTWFw"}},"#,
            r#"{"type":"example.com/custom","value":[1,2]}],"#,
            r#""schema":"olm.bundle","name":"foo.v1","package":"foo","image":"quay.io/foo:1"}"#,
            r#"{"schema":"example.com/thing","entries":"not a list","n":1}"#,
        );
        let catalog = parse("stream.json", text);
        let package = &catalog.packages["foo"];
        assert_eq!(package.default_channel.as_deref(), Some("stable"));
        let bundle = &package.bundles["foo.v1"];
        assert_eq!(bundle.origin.line, Some(2));
        let props = &bundle.properties;
        assert_eq!(
            props.max_openshift_version,
            Some(MaxOpenShiftVersion::Valid { major: 4, minor: 9 })
        );
        assert_eq!(props.supported_install_modes, ["AllNamespaces"]);
        assert_eq!(props.min_kube_version.as_deref(), Some("1.27.0"));
        assert_eq!(props.dependencies.len(), 2);
        assert_eq!(props.objects, ["kind: ConfigMap"]);
        assert_eq!(props.raw.len(), 7);
        assert_eq!(props.raw[6].0, "example.com/custom");
        // JSON values are kept byte for byte, numbers included.
        assert_eq!(props.raw[1].1.get(), "4.9");
        assert_eq!(props.raw[6].1.get(), "[1,2]");
        assert_eq!(catalog.others.len(), 1);
        assert_eq!(catalog.others[0]["entries"], "not a list");
    }

    #[test]
    fn yaml_documents_keep_timestamps_as_strings_and_read_deprecations() {
        let text = "\
---
schema: olm.package
name: foo
---
schema: olm.bundle
name: foo.v1
package: foo
image: quay.io/foo:1
properties:
- type: olm.package
  value: {packageName: foo, version: 1.0.0}
- type: olm.maxOpenShiftVersion
  value: 4.9.1
- type: olm.csv.metadata
  value:
    annotations:
      createdAt: 2021-01-01T00:00:00Z
---
schema: olm.channel
package: foo
name: stable
entries:
- name: foo.v1
---
schema: olm.deprecations
package: foo
entries:
- reference: {schema: olm.package}
  message: foo is deprecated
- reference: {schema: olm.channel, name: stable}
  message: use fast
- reference: {schema: olm.bundle, name: foo.v1}
  message: broken
";
        let catalog = parse("catalog.yaml", text);
        let package = &catalog.packages["foo"];
        let bundle = &package.bundles["foo.v1"];
        assert_eq!(bundle.origin.line, Some(5));
        assert!(matches!(
            &bundle.properties.max_openshift_version,
            Some(MaxOpenShiftVersion::Invalid { raw, .. }) if raw == "4.9.1"
        ));
        let csv: serde_json::Value =
            serde_json::from_str(bundle.properties.raw[2].1.get()).unwrap();
        assert_eq!(csv["annotations"]["createdAt"], "2021-01-01T00:00:00Z");
        assert_eq!(
            package.deprecations.package.as_deref(),
            Some("foo is deprecated")
        );
        assert_eq!(package.deprecations.channels["stable"], "use fast");
        assert_eq!(package.deprecations.bundles["foo.v1"], "broken");
    }

    #[test]
    fn folders_are_walked_sorted_with_indexignore() {
        let root = std::env::temp_dir().join(format!("pom-fbc-walk-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("bundles/old")).unwrap();
        let write = |path: &str, text: &str| std::fs::write(root.join(path), text).unwrap();
        write("package.yaml", "schema: olm.package\nname: foo\n");
        write("README.md", "# not a catalog");
        write(
            "channel.json",
            r#"{"schema":"olm.channel","package":"foo","name":"stable","entries":[{"name":"foo.v1"}]}"#,
        );
        let bundle = r#"{"schema":"olm.bundle","package":"foo","name":"foo.v1","image":"i","properties":[{"type":"olm.package","value":{"packageName":"foo","version":"1.0.0"}}]}"#;
        write("bundles/foo.v1.json", bundle);
        write("bundles/old/foo.v1.json", bundle);
        write(".indexignore", "# skip old copies\nold/\n");
        let catalog = load_path(&root);
        let _ = std::fs::remove_dir_all(&root);
        let catalog = catalog.unwrap();
        assert!(
            catalog.packages["foo"].bundles["foo.v1"]
                .origin
                .file
                .ends_with("bundles/foo.v1.json")
        );
    }
}
