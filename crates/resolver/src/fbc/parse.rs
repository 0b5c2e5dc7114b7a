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
use super::parallel::{self, MIN_CUT_BYTES, MIN_PARALLEL_BYTES, Unit};
use super::source::{self, CatalogFile};

/// Loads a catalog from a file or a folder (walked recursively, sorted, `.json`/`.yaml`/`.yml`
/// only, `.indexignore` honoured). Blob origins carry file paths as `path` names them.
///
/// Catalogs of at least 4 MiB are decoded on every core (up to 8): a folder's files are shared
/// out whole, one large file is cut between blobs. The result, errors included, is the one a
/// single pass gives ([`super::parallel`]).
pub fn load_path(path: &Path) -> Result<Catalog, FbcError> {
    load_path_on(path, Threads::default())
}

/// How a catalog is shared out between cores (tests lower the thresholds).
#[derive(Debug, Clone, Copy)]
struct Threads {
    workers: usize,
    /// Catalogs smaller than this are decoded on one core.
    min_parallel: u64,
    /// Documents smaller than this are not cut.
    min_cut: usize,
}

impl Default for Threads {
    fn default() -> Self {
        Self {
            workers: parallel::workers(),
            min_parallel: MIN_PARALLEL_BYTES,
            min_cut: MIN_CUT_BYTES,
        }
    }
}

fn load_path_on(path: &Path, threads: Threads) -> Result<Catalog, FbcError> {
    let files = source::catalog_files(path)?;
    if let [file] = files.as_slice() {
        let bytes = source::read(file)?;
        return parse_on(&[(&file.label, &bytes)], threads);
    }
    let workers = threads.workers;
    if workers > 1 {
        let units: Vec<Unit<'_>> = files
            .iter()
            .map(|file| Unit::File {
                file,
                len: std::fs::metadata(&file.path).map_or(0, |m| m.len()),
            })
            .collect();
        let total: u64 = units.iter().map(Unit::len).sum();
        if total >= threads.min_parallel
            && let Some(assembler) = parallel::decode(&units, workers)
        {
            return assembler.finish();
        }
    }
    load_files_sequentially(&files)
}

fn load_files_sequentially(files: &[CatalogFile]) -> Result<Catalog, FbcError> {
    let mut assembler = Assembler::default();
    let mut aliases = AliasBudget::default();
    for file in files {
        let bytes = source::read(file)?;
        decode_document(&file.label, &bytes, &mut assembler, &mut aliases)?;
    }
    assembler.finish()
}

/// Parses catalog content that is not on disk (a ConfigMap key, files pulled from an image):
/// `(label, bytes)` pairs, where the label names the content in errors and origins (for example
/// `configmap/ns/name:catalog.json`). Each document may be a JSON stream or YAML. Large content
/// is decoded on every core, as [`load_path`] does.
pub fn parse_documents(
    docs: impl IntoIterator<Item = (String, Vec<u8>)>,
) -> Result<Catalog, FbcError> {
    let docs: Vec<(String, Vec<u8>)> = docs.into_iter().collect();
    let borrowed: Vec<(&str, &[u8])> = docs
        .iter()
        .map(|(label, bytes)| (label.as_str(), bytes.as_slice()))
        .collect();
    parse_on(&borrowed, Threads::default())
}

fn parse_on(docs: &[(&str, &[u8])], threads: Threads) -> Result<Catalog, FbcError> {
    let total: u64 = docs.iter().map(|(_, bytes)| bytes.len() as u64).sum();
    if threads.workers > 1 && total >= threads.min_parallel {
        let units = parallel::pieces(docs, threads.workers, threads.min_cut);
        if let Some(assembler) = parallel::decode(&units, threads.workers) {
            return assembler.finish();
        }
    }
    let mut assembler = Assembler::default();
    let mut aliases = AliasBudget::default();
    for (label, bytes) in docs {
        decode_document(label, bytes, &mut assembler, &mut aliases)?;
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
defaultChannel: stable
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
        assert_eq!(bundle.origin.line, Some(6));
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
        write(
            "package.yaml",
            "schema: olm.package\nname: foo\ndefaultChannel: stable\n",
        );
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

    // ---- several cores: the result, errors included, is the sequential one ----

    const ONE_CORE: Threads = Threads {
        workers: 1,
        min_parallel: u64::MAX,
        min_cut: usize::MAX,
    };

    /// Two workers, every document cut, however small.
    const TWO_CORES: Threads = Threads {
        workers: 2,
        min_parallel: 0,
        min_cut: 0,
    };

    const FOUR_CORES: Threads = Threads {
        workers: 4,
        min_parallel: 0,
        min_cut: 0,
    };

    /// Blobs of `packages` packages with two bundles each, one JSON object per line.
    fn json_blobs(packages: usize) -> Vec<String> {
        let mut blobs = Vec::new();
        for p in 0..packages {
            blobs.push(format!(
                r#"{{"schema":"olm.package","name":"p{p}","defaultChannel":"stable"}}"#
            ));
            for v in 1..=2 {
                blobs.push(format!(
                    r#"{{"schema":"olm.bundle","name":"p{p}.v{v}","package":"p{p}","image":"i","properties":[{{"type":"olm.package","value":{{"packageName":"p{p}","version":"{v}.0.0"}}}}]}}"#
                ));
            }
            blobs.push(format!(
                r#"{{"schema":"olm.channel","package":"p{p}","name":"stable","entries":[{{"name":"p{p}.v1"}},{{"name":"p{p}.v2","replaces":"p{p}.v1"}}]}}"#
            ));
            if p % 3 == 0 {
                blobs.push(format!(r#"{{"schema":"example.com/other","n":{p}}}"#));
            }
        }
        blobs
    }

    fn json_text(packages: usize) -> String {
        json_blobs(packages).join("\n") + "\n"
    }

    /// The same catalog as YAML documents (flow style, which YAML reads as JSON).
    fn yaml_text(packages: usize) -> String {
        json_blobs(packages)
            .iter()
            .map(|blob| format!("---\n{blob}\n"))
            .collect()
    }

    fn on(threads: Threads, text: &str) -> Result<Catalog, FbcError> {
        parse_on(&[("c", text.as_bytes())], threads)
    }

    /// Same catalog (origins included) or the same error message, on 1, 2 and 4 cores.
    fn assert_same(text: &str) {
        let one = on(ONE_CORE, text).map_err(|e| e.to_string());
        for threads in [TWO_CORES, FOUR_CORES] {
            let many = on(threads, text).map_err(|e| e.to_string());
            assert!(one == many, "{threads:?}:\n{one:?}\n{many:?}");
        }
    }

    #[test]
    fn cut_json_streams_and_yaml_files_parse_as_one_pass_does() {
        let json = json_text(30);
        let catalog = on(TWO_CORES, &json).unwrap();
        assert_eq!(catalog.packages.len(), 30);
        assert_eq!(catalog.others.len(), 10);
        // The second share's origins count lines from the start of the file.
        // (29 packages of 4 blobs and 10 others before it, then its package and first bundle.)
        assert_eq!(
            catalog.packages["p29"].bundles["p29.v2"].origin.line,
            Some(129)
        );
        // Valid catalogs really are decoded in pieces (no fallback to one pass).
        let yaml = yaml_text(30);
        for text in [&json, &yaml] {
            let units = parallel::pieces(&[("c", text.as_bytes())], 2, 0);
            assert_eq!(units.len(), 2);
            assert!(parallel::decode(&units, 2).is_some());
        }
        assert_same(&json);
        assert_same(&format!("\u{feff}{json}"));
        assert_same(&yaml_text(30));
        let cuts = crate::fbc::decode::cut(json.as_bytes(), 4);
        assert_eq!(cuts.len(), 4, "{cuts:?}");
        assert_eq!(crate::fbc::decode::cut(yaml.as_bytes(), 4).len(), 4);
        // Directives are never cut away from their document.
        let directive = format!("%YAML 1.2\n{yaml}");
        assert_eq!(crate::fbc::decode::cut(directive.as_bytes(), 4).len(), 1);
        assert_same(&directive);
    }

    #[test]
    fn errors_anywhere_are_the_ones_a_single_pass_reports() {
        let blobs = json_blobs(30);
        // A malformed blob late in the stream, and an invalid bundle version early and late.
        let mut late = blobs.clone();
        late[100] = r#"{"schema":"olm.bundle","name":"#.to_owned();
        assert_same(&(late.join("\n") + "\n"));
        let v2: Vec<usize> = (0..blobs.len())
            .filter(|&i| blobs[i].contains(r#""version":"2.0.0""#))
            .collect();
        for at in [v2[0], v2[v2.len() - 1]] {
            let mut bad = blobs.clone();
            bad[at] = bad[at].replace(r#""version":"2.0.0""#, r#""version":"two""#);
            let text = bad.join("\n") + "\n";
            assert!(on(TWO_CORES, &text).is_err());
            assert_same(&text);
        }
        // A package declared in the first and the last share: a duplicate, as in one pass.
        let mut dup = blobs.clone();
        dup.push(blobs[0].clone());
        let text = dup.join("\n") + "\n";
        assert!(matches!(
            on(TWO_CORES, &text),
            Err(FbcError::DuplicatePackage { .. })
        ));
        assert_same(&text);
        // The same in YAML.
        let yaml: String = dup.iter().map(|b| format!("---\n{b}\n")).collect();
        assert_same(&yaml);
        assert_same(&yaml.replace("p20.v1\"}", "p20.v1\"}]"));
    }

    #[test]
    fn a_cut_inside_a_pretty_printed_blob_falls_back_to_one_pass() {
        // `{` at the start of a line inside a blob: the cut before it fails and is retried.
        let blobs: Vec<String> = json_blobs(30)
            .iter()
            .map(|b| b.replace(r#""value":{"#, "\"value\":\n{"))
            .collect();
        let text = blobs.join("\n") + "\n";
        assert!(text.contains("\n{\"packageName"));
        assert_same(&text);
        assert_eq!(on(FOUR_CORES, &text).unwrap().packages.len(), 30);
    }

    #[test]
    fn yaml_aliases_are_charged_in_file_order() {
        // An alias in the last share: decoded again in one pass, so the catalog-wide budget
        // sees the documents in order (what `decode::tests` check for the budget itself).
        let mut yaml = yaml_text(30);
        yaml.push_str("---\nschema: example.com/alias\na: &x [1, 2]\nb: *x\n");
        let catalog = on(TWO_CORES, &yaml).unwrap();
        assert_eq!(catalog.others.len(), 11);
        assert_same(&yaml);
    }

    #[test]
    fn folders_are_shared_out_by_file() {
        let root = std::env::temp_dir().join(format!("pom-fbc-parallel-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let blobs = json_blobs(20);
        for (i, chunk) in blobs.chunks(7).enumerate() {
            let name = if i % 2 == 0 { "json" } else { "yaml" };
            let text: String = if i % 2 == 0 {
                chunk.join("\n")
            } else {
                chunk.iter().map(|b| format!("---\n{b}\n")).collect()
            };
            std::fs::write(root.join(format!("{i:02}.{name}")), text).unwrap();
        }
        let one = load_path_on(&root, ONE_CORE).unwrap();
        let two = load_path_on(&root, TWO_CORES).unwrap();
        let four = load_path_on(&root, FOUR_CORES).unwrap();
        // A broken file in the middle: the same error.
        std::fs::write(root.join("05.json"), "{\"schema\":").unwrap();
        let broken_one = load_path_on(&root, ONE_CORE).unwrap_err().to_string();
        let broken_two = load_path_on(&root, TWO_CORES).unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(one.packages.len(), 20);
        assert!(one == two && one == four);
        assert_eq!(broken_one, broken_two);
    }

    #[test]
    fn real_catalogs_parse_the_same_on_several_cores() {
        let real = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/testdata/real");
        if !real.is_dir() {
            // As `tests/shared_support` does: a failure in CI, a note elsewhere.
            assert!(
                std::env::var_os("CI").is_none(),
                "missing {}",
                real.display()
            );
            eprintln!(
                "SKIPPED real_catalogs_parse_the_same_on_several_cores: no {}",
                real.display()
            );
            return;
        }
        let folders = [
            "openshift__secondary-scheduler-operator/v4.18/catalog",
            "operator-framework__operator-controller/testdata/catalogs",
            "red-hat-storage__odf-operator/catalog",
            "redhat-openshift-ecosystem__community-operators-prod/catalogs",
            "stolostron__gatekeeper-operator-fbc/catalog-4-20",
        ];
        let mut files_cut = 0;
        for folder in folders {
            let path = real.join(folder);
            let one = load_path_on(&path, ONE_CORE).map_err(|e| e.to_string());
            let two = load_path_on(&path, TWO_CORES).map_err(|e| e.to_string());
            assert!(one == two, "{folder}");
            // Every file on its own, cut in two and in four.
            for file in source::catalog_files(&path).unwrap() {
                let bytes = source::read(&file).unwrap();
                let docs = [(file.label.as_str(), bytes.as_slice())];
                let one = parse_on(&docs, ONE_CORE).map_err(|e| e.to_string());
                for threads in [TWO_CORES, FOUR_CORES] {
                    let many = parse_on(&docs, threads).map_err(|e| e.to_string());
                    assert!(one == many, "{} {threads:?}", file.label);
                }
                files_cut += usize::from(super::super::decode::cut(&bytes, 2).len() > 1);
            }
        }
        assert!(files_cut > 5, "{files_cut}");
    }
}
