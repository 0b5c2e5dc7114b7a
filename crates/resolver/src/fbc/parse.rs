//! The catalog parser's entry points: from disk ([`load_path`]) or from memory
//! ([`parse_documents`]).
//!
//! Both accept every form real catalogs come in: JSON streams (concatenated objects, JSON
//! Lines), YAML multi-document files, and folders split into any number of such files. The
//! result is the indexed [`Catalog`] every resolution reads, or the first [`FbcError`] found
//! (files in sorted order, blobs in file order), which names the file, the line when known and
//! the field, and says what to change.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use super::assemble::{Assembler, JoinThreads, Scope};
use super::decode::{AliasBudget, STREAM_WINDOW_BYTES, decode_document};
pub use super::error::{DuplicateDetail, FbcError, InvalidSkipRangeDetail};
use super::index::{ContentSource, ScopedCatalog};
use super::model::Catalog;
use super::parallel::{self, MIN_CUT_COST, MIN_PARALLEL_COST, Unit};
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
    /// Catalogs that cost less than this ([`parallel::cost`]) are decoded on one core.
    min_parallel: u64,
    /// Documents that cost less than this are not cut.
    min_cut: u64,
    /// How the packages are joined and validated.
    join: JoinThreads,
}

impl Default for Threads {
    fn default() -> Self {
        Self {
            workers: parallel::workers(),
            min_parallel: MIN_PARALLEL_COST,
            min_cut: MIN_CUT_COST,
            join: JoinThreads::default(),
        }
    }
}

/// Loads a catalog as [`load_path`] does, but keeps whole only the packages named in `scope`;
/// every other valid package is indexed, to be read again from the files when needed
/// ([`super::PackageIndex::materialize`]). Blob origins are labelled `label_prefix` followed
/// by the file's path under `path` (for example `/configs/` for an image's catalog folder).
/// The files must not change while the result is used (a content-addressed folder).
pub fn load_path_scoped(
    path: &Path,
    label_prefix: &str,
    scope: BTreeSet<String>,
) -> Result<ScopedCatalog, FbcError> {
    let scope = Arc::new(scope);
    let files = source::catalog_files_labelled(path, Some(label_prefix))?;
    let assembler = load_files(&files, Threads::default(), Some(&scope))?;
    assembler.finish_scoped(files_source(&files))
}

/// Parses in-memory documents as [`parse_documents`] does, keeping whole only the packages
/// named in `scope` (see [`load_path_scoped`]); the documents are kept to read the others
/// again (use it for small sources, such as a ConfigMap key).
pub fn parse_documents_scoped(
    docs: impl IntoIterator<Item = (String, Vec<u8>)>,
    scope: BTreeSet<String>,
) -> Result<ScopedCatalog, FbcError> {
    let scope = Arc::new(scope);
    let docs: Vec<(String, Vec<u8>)> = docs.into_iter().collect();
    let borrowed: Vec<(&str, &[u8])> = docs
        .iter()
        .map(|(label, bytes)| (label.as_str(), bytes.as_slice()))
        .collect();
    let assembler = parse_into(&borrowed, Threads::default(), Some(&scope))?;
    assembler.finish_scoped(ContentSource::Memory(Arc::new(docs)))
}

/// Where each file of a load is, by its label.
fn files_source(files: &[CatalogFile]) -> ContentSource {
    ContentSource::Files(Arc::new(
        files
            .iter()
            .map(|file| (file.label.clone(), file.path.clone()))
            .collect(),
    ))
}

fn load_path_on(path: &Path, threads: Threads) -> Result<Catalog, FbcError> {
    let files = source::catalog_files(path)?;
    load_files(&files, threads, None)?.finish_on(threads.join)
}

fn load_files(
    files: &[CatalogFile],
    threads: Threads,
    scope: Option<&Scope>,
) -> Result<Assembler, FbcError> {
    if let [file] = files {
        // One large file is read in windows, decoded on every core as they arrive: it is never
        // in memory whole. When that cannot give the one-pass result, it is read whole.
        if std::fs::metadata(&file.path).is_ok_and(|m| m.len() >= MIN_STREAMED_BYTES)
            && let Some(assembler) =
                load_file_in_pieces(file, window_workers(threads, scope), scope)?
        {
            return Ok(assembler);
        }
        let bytes = source::read(file)?;
        return parse_into(&[(&file.label, &bytes)], threads, scope);
    }
    let workers = threads.workers;
    if workers > 1 {
        let units: Vec<Unit<'_>> = files.iter().map(Unit::file).collect();
        let total: u64 = units.iter().map(Unit::cost).sum();
        if total >= threads.min_parallel
            && let Some(assembler) = parallel::decode(&units, workers, scope)
        {
            return Ok(assembler);
        }
    }
    let mut assembler = new_assembler(scope);
    let mut aliases = AliasBudget::default();
    for file in files {
        let bytes = source::read(file)?;
        decode_document(&file.label, &bytes, &mut assembler, &mut aliases)?;
    }
    Ok(assembler)
}

/// Files at least this large are read in windows.
const MIN_STREAMED_BYTES: u64 = 2 * STREAM_WINDOW_BYTES as u64;

/// Workers for a file read in windows: every core for a whole load; one for a scoped load (the
/// manager's), whose memory matters more than its speed (each worker holds a window).
fn window_workers(threads: Threads, scope: Option<&Scope>) -> usize {
    if scope.is_some() { 1 } else { threads.workers }
}

/// One file decoded in windows ([`parallel::decode_file_in_windows`]); `None` when it must be
/// decoded whole instead.
fn load_file_in_pieces(
    file: &CatalogFile,
    workers: usize,
    scope: Option<&Scope>,
) -> Result<Option<Assembler>, FbcError> {
    let io = |e: std::io::Error| FbcError::Io {
        path: file.path.display().to_string(),
        reason: e.to_string(),
    };
    let reader = std::fs::File::open(&file.path).map_err(io)?;
    parallel::decode_file_in_windows(&file.label, reader, STREAM_WINDOW_BYTES, workers, scope)
        .map_err(io)
}

fn new_assembler(scope: Option<&Scope>) -> Assembler {
    scope.map_or_else(Assembler::default, |scope| Assembler::scoped(scope.clone()))
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
    parse_into(docs, threads, None)?.finish_on(threads.join)
}

fn parse_into(
    docs: &[(&str, &[u8])],
    threads: Threads,
    scope: Option<&Scope>,
) -> Result<Assembler, FbcError> {
    if threads.workers > 1 && parallel::documents_cost(docs) >= threads.min_parallel {
        let units = parallel::pieces(docs, threads.workers, threads.min_cut);
        if let Some(assembler) = parallel::decode(&units, threads.workers, scope) {
            return Ok(assembler);
        }
    }
    let mut assembler = new_assembler(scope);
    let mut aliases = AliasBudget::default();
    for (label, bytes) in docs {
        decode_document(label, bytes, &mut assembler, &mut aliases)?;
    }
    Ok(assembler)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used)]
mod tests {
    use std::collections::BTreeMap;

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
schema: example.com/stamped
createdAt: 2021-01-01T00:00:00Z
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
        assert_eq!(catalog.others[0]["createdAt"], "2021-01-01T00:00:00Z");
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
        min_cut: u64::MAX,
        join: JoinThreads::ONE,
    };

    /// Two workers, every document cut, however small.
    const TWO_CORES: Threads = Threads {
        workers: 2,
        min_parallel: 0,
        min_cut: 0,
        join: JoinThreads {
            workers: 2,
            min_bundles: 0,
        },
    };

    const FOUR_CORES: Threads = Threads {
        workers: 4,
        min_parallel: 0,
        min_cut: 0,
        join: JoinThreads {
            workers: 4,
            min_bundles: 0,
        },
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
            assert!(parallel::decode(&units, 2, None).is_some());
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

    /// Packages joined on several cores are refused for the reasons, and with the errors, one
    /// core gives: a duplicate bundle, a duplicate channel, a second deprecations blob, a
    /// channel that is not one chain, blobs of an undeclared package; the rest are served.
    #[test]
    fn packages_joined_on_several_cores_are_refused_as_on_one() {
        let mut blobs = json_blobs(40);
        let at =
            |blobs: &[String], needle: &str| blobs.iter().position(|b| b.contains(needle)).unwrap();
        let bundle = at(&blobs, r#""name":"p3.v1""#);
        blobs.push(blobs[bundle].clone());
        let channel = at(&blobs, r#""package":"p11","name":"stable""#);
        blobs.push(blobs[channel].clone());
        for _ in 0..2 {
            blobs.push(
                r#"{"schema":"olm.deprecations","package":"p19","entries":[{"reference":{"schema":"olm.package"},"message":"gone"}]}"#
                    .to_owned(),
            );
        }
        let broken = at(&blobs, r#""package":"p27","name":"stable""#);
        blobs[broken] = blobs[broken].replace(r#","replaces":"p27.v1""#, "");
        blobs.push(
            r#"{"schema":"olm.bundle","name":"ghost.v1","package":"ghost","image":"i","properties":[{"type":"olm.package","value":{"packageName":"ghost","version":"1.0.0"}}]}"#
                .to_owned(),
        );
        let text = blobs.join("\n") + "\n";
        assert_same(&text);
        let catalog = on(FOUR_CORES, &text).unwrap();
        let refused: Vec<&str> = catalog
            .invalid_packages
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(refused, ["ghost", "p11", "p19", "p27", "p3"]);
        assert_eq!(catalog.packages.len(), 36);
        assert!(matches!(
            catalog.invalid_packages["p3"],
            FbcError::DuplicateBundle(_)
        ));
        assert!(matches!(
            catalog.invalid_packages["ghost"],
            FbcError::UnknownPackage { .. }
        ));
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

    /// What a scoped load must equal: the full load's packages in scope, all its invalid
    /// packages, an index of all its valid packages, each of which reads back as the full load
    /// has it (origins included).
    fn assert_scoped_matches(full: &Catalog, scoped: &ScopedCatalog, scope: &BTreeSet<String>) {
        let expected: BTreeMap<&String, &crate::fbc::Package> = full
            .packages
            .iter()
            .filter(|(name, _)| scope.contains(*name))
            .collect();
        let held: BTreeMap<&String, &crate::fbc::Package> = scoped.held.packages.iter().collect();
        assert!(held == expected, "held packages differ");
        assert_eq!(scoped.held.invalid_packages, full.invalid_packages);
        assert_eq!(scoped.held.others, full.others);
        let names: Vec<&str> = scoped.index.names().collect();
        let full_names: Vec<&str> = full.packages.keys().map(String::as_str).collect();
        assert_eq!(names, full_names);
        for (name, package) in &full.packages {
            let one = scoped.index.materialize(name).unwrap().unwrap();
            assert_eq!(one.packages.len(), 1, "{name}");
            assert!(
                one.packages.get(name) == Some(package),
                "{name} reads back differently"
            );
            assert!(one.invalid_packages.is_empty(), "{name}");
        }
        assert!(
            scoped
                .index
                .materialize("no-such-package")
                .unwrap()
                .is_none()
        );
    }

    fn scoped_on(threads: Threads, text: &str, scope: &BTreeSet<String>) -> ScopedCatalog {
        let docs = [("c", text.as_bytes())];
        let memory = vec![("c".to_owned(), text.as_bytes().to_vec())];
        parse_into(&docs, threads, Some(&Arc::new(scope.clone())))
            .unwrap()
            .finish_scoped(ContentSource::Memory(Arc::new(memory)))
            .unwrap()
    }

    fn names(list: &[&str]) -> BTreeSet<String> {
        list.iter().map(|n| (*n).to_owned()).collect()
    }

    #[test]
    fn a_scoped_load_holds_its_scope_and_reads_the_rest_back_as_a_full_load_has_it() {
        // An invalid package (two heads) and a package spread over the stream, out of order.
        let mut blobs = json_blobs(40);
        blobs.push(r#"{"schema":"olm.channel","package":"p3","name":"other","entries":[{"name":"p3.v1"},{"name":"p3.v2"}]}"#.to_owned());
        blobs.swap(5, 60);
        for text in [blobs.join("\n") + "\n", yaml_text(40)] {
            let full = on(ONE_CORE, &text).unwrap();
            for scope in [names(&[]), names(&["p1", "p3", "p39", "absent"])] {
                for threads in [ONE_CORE, TWO_CORES, FOUR_CORES] {
                    let scoped = scoped_on(threads, &text, &scope);
                    assert_scoped_matches(&full, &scoped, &scope);
                }
            }
        }
        let full = on(ONE_CORE, &(blobs.join("\n") + "\n")).unwrap();
        assert!(
            full.invalid_packages.contains_key("p3"),
            "the fixture has an invalid package"
        );
    }

    /// A file decoded in windows of `window` bytes on `workers` threads; `None` when it falls
    /// back to a whole read.
    fn in_windows(
        text: &str,
        window: usize,
        workers: usize,
        scope: Option<&Scope>,
    ) -> Option<Assembler> {
        parallel::decode_file_in_windows(
            "c",
            std::io::Cursor::new(text.as_bytes()),
            window,
            workers,
            scope,
        )
        .unwrap()
    }

    /// [`in_windows`], scoped, finished with the text as its content, on 1, 2 and 4 workers.
    fn in_pieces(
        text: &str,
        window: usize,
        scope: &BTreeSet<String>,
    ) -> [Option<ScopedCatalog>; 3] {
        let memory = Arc::new(vec![("c".to_owned(), text.as_bytes().to_vec())]);
        let scope = Arc::new(scope.clone());
        [1, 2, 4].map(|workers| {
            in_windows(text, window, workers, Some(&scope)).map(|assembler| {
                assembler
                    .finish_scoped(ContentSource::Memory(Arc::clone(&memory)))
                    .unwrap()
            })
        })
    }

    #[test]
    fn a_large_file_read_in_pieces_loads_as_one_pass_does() {
        let scope = names(&["p2", "p17"]);
        let with_bom = format!("\u{feff}{}", json_text(25));
        let yaml_with_bom = format!("\u{feff}{}", yaml_text(25));
        for text in [json_text(25), yaml_text(25), with_bom, yaml_with_bom] {
            let full = on(ONE_CORE, &text).unwrap();
            for window in [1, 100, 1000, 4096, 1 << 20] {
                for scoped in in_pieces(&text, window, &scope) {
                    let scoped = scoped.unwrap_or_else(|| panic!("window {window} fell back"));
                    assert_scoped_matches(&full, &scoped, &scope);
                }
                for workers in [1, 2, 4] {
                    let whole = in_windows(&text, window, workers, None)
                        .unwrap_or_else(|| panic!("window {window} fell back"))
                        .finish()
                        .unwrap();
                    assert_eq!(whole, full, "window {window}, {workers} workers");
                }
            }
        }
        // A `{` at the start of a line inside a pretty-printed blob, YAML directives, and YAML
        // aliases (the catalog's alias budget is charged in file order): the windows give up,
        // and the whole file is decoded instead.
        let pretty = json_blobs(10)
            .iter()
            .map(|b| b.replace(r#""value":{"#, "\"value\":\n{"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(in_pieces(&pretty, 300, &scope).iter().all(Option::is_none));
        let directives = format!("{}%YAML 1.2\n---\nschema: x.other\n", yaml_text(5));
        assert!(
            in_pieces(&directives, 100, &scope)
                .iter()
                .all(Option::is_none)
        );
        // YAML aliases: one worker charges them in order; several give up.
        let alias = yaml_text(25) + "---\nschema: example.com/alias\na: &x [1, 2]\nb: *x\n";
        let [one, two, four] = in_pieces(&alias, 1000, &scope);
        assert_scoped_matches(&on(ONE_CORE, &alias).unwrap(), &one.unwrap(), &scope);
        assert!(two.is_none() && four.is_none());
        // A broken blob in a later piece gives up too (the one pass reports it).
        let broken = json_text(10) + "{\"schema\":\n";
        assert!(in_pieces(&broken, 200, &scope).iter().all(Option::is_none));
    }

    /// Whatever the window and the workers, a windowed load that does not fall back is the
    /// one-pass load, errors included (found by review: a `---` at a window's end whose next
    /// byte makes it a key, `---x: 1`; a byte-order mark cut by the first window).
    #[test]
    fn windows_never_change_what_a_file_means() {
        let yaml_key = "---\nschema: olm.package\nname: a\n---x: 1\nschema: olm.package\nname: b\n";
        let bom_json = format!("\u{feff}{}", json_text(3));
        let bom_mixed = format!(
            "\u{feff}{}---\nschema: olm.bundle\n",
            json_blobs(2).join("\n")
        );
        for text in [yaml_key.to_owned(), bom_json, bom_mixed, yaml_text(3)] {
            let one_pass = on(ONE_CORE, &text).map_err(|e| e.to_string());
            for window in 1..80 {
                for workers in [1, 2] {
                    if let Some(assembler) = in_windows(&text, window, workers, None) {
                        let windowed = assembler.finish().map_err(|e| e.to_string());
                        assert_eq!(
                            windowed, one_pass,
                            "window {window}, {workers} workers: {text:?}"
                        );
                    }
                }
            }
        }
        // A file whose blobs never start a line is left to the whole-file pass after a few
        // windows, instead of growing one window and searching it again and again.
        let mut one_line = json_blobs(30).join(" ");
        while one_line.len() <= 1 << 20 {
            one_line = format!("{one_line} {one_line}");
        }
        for workers in [1, 2] {
            assert!(in_windows(&one_line, 4096, workers, None).is_none());
        }
    }

    #[test]
    fn a_package_declared_twice_far_apart_fails_a_scoped_load_as_a_whole_load() {
        let mut blobs = json_blobs(30);
        blobs.push(r#"{"schema":"olm.package","name":"p4","defaultChannel":"stable"}"#.to_owned());
        let text = blobs.join("\n") + "\n";
        let whole = on(ONE_CORE, &text).unwrap_err().to_string();
        for threads in [ONE_CORE, TWO_CORES, FOUR_CORES] {
            let docs = [("c", text.as_bytes())];
            let scoped = parse_into(&docs, threads, Some(&Arc::new(names(&["p9"]))))
                .err()
                .map(|e| e.to_string());
            assert_eq!(scoped.as_deref(), Some(whole.as_str()), "{threads:?}");
        }
        assert!(whole.contains("p4"), "{whole}");
    }

    #[test]
    fn scoped_loads_of_one_file_a_bare_folder_and_ordered_documents_read_back() {
        // A scattered package (read back at the end of the load) in one file, loaded with a
        // prefix and with none (labels are then relative to the folder, not to the process).
        let blobs = json_blobs(3);
        let mut text = blobs.join("\n");
        text.push('\n');
        text.push_str(&blobs[1]);
        let text = text.replace(&blobs[1], "").replacen("\n\n", "\n", 1) + "\n" + &blobs[1];
        let root = std::env::temp_dir().join(format!("pom-fbc-scoped-one-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let file = root.join("sub/c.json");
        std::fs::write(&file, &text).unwrap();
        let whole = load_path(&file).unwrap();
        for (path, prefix) in [(&file, "/configs/"), (&root, ""), (&root, "/configs/")] {
            let scoped = load_path_scoped(path, prefix, BTreeSet::new()).unwrap();
            for (name, package) in &whole.packages {
                let one = scoped.index.materialize(name).unwrap().unwrap();
                assert_eq!(
                    one.packages[name].bundles.len(),
                    package.bundles.len(),
                    "{name} {prefix:?}"
                );
            }
        }
        let _ = std::fs::remove_dir_all(&root);
        // Documents keep their order: the duplicate is reported as a whole parse reports it.
        let a = json_blobs(1).join("\n");
        let docs = || {
            vec![
                ("z.json".to_owned(), a.clone().into_bytes()),
                ("a.json".to_owned(), a.clone().into_bytes()),
            ]
        };
        let whole = parse_documents(docs()).unwrap_err().to_string();
        let scoped = parse_documents_scoped(docs(), BTreeSet::new())
            .unwrap_err()
            .to_string();
        assert_eq!(scoped, whole);
    }

    #[test]
    fn fingerprints_move_only_for_the_package_that_changed() {
        let text = json_text(20);
        let before = scoped_on(ONE_CORE, &text, &names(&["p2"]));
        let again = scoped_on(FOUR_CORES, &text, &names(&[]));
        let changed = text.replace(
            r#""name":"p7.v2","replaces":"p7.v1""#,
            r#""name":"p7.v2","replaces":"p7.v1","skips":["x"]"#,
        );
        assert_ne!(changed, text);
        let after = scoped_on(TWO_CORES, &changed, &names(&["p2"]));
        for name in before.index.names() {
            let same = before.index.fingerprint(name) == after.index.fingerprint(name);
            assert_eq!(same, name != "p7", "{name}");
            assert_eq!(
                before.index.fingerprint(name),
                again.index.fingerprint(name),
                "{name}: cores or scope changed the fingerprint"
            );
        }
    }

    #[test]
    fn a_package_reads_back_from_files_with_its_labels_and_lines() {
        let root = std::env::temp_dir().join(format!("pom-fbc-scoped-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("sub")).unwrap();
        let blobs = json_blobs(12);
        std::fs::write(root.join("a.json"), blobs[..20].join("\n")).unwrap();
        let yaml: String = blobs[20..].iter().map(|b| format!("---\n{b}\n")).collect();
        std::fs::write(root.join("sub/b.yaml"), yaml).unwrap();
        let scoped = load_path_scoped(&root, "/configs/", BTreeSet::new()).unwrap();
        let p11 = scoped.index.materialize("p11").unwrap().unwrap();
        let bundle = &p11.packages["p11"].bundles["p11.v2"];
        assert_eq!(bundle.origin.file, "/configs/sub/b.yaml");
        let full = load_path_on(&root, ONE_CORE).unwrap();
        let full_bundle = &full.packages["p11"].bundles["p11.v2"];
        assert_eq!(bundle.origin.line, full_bundle.origin.line);
        // The content changed under the index: an error that says to reload, never a panic.
        std::fs::write(root.join("sub/b.yaml"), "").unwrap();
        let error = scoped.index.materialize("p11").unwrap_err().to_string();
        let _ = std::fs::remove_dir_all(&root);
        assert!(error.contains("reload the catalog"), "{error}");
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
            // Scoped: nothing held, everything read back as the full load has it.
            if let Ok(full) = &one {
                let files = source::catalog_files(&path).unwrap();
                let keep: BTreeSet<String> = full.packages.keys().take(1).cloned().collect();
                for threads in [ONE_CORE, TWO_CORES] {
                    let scoped = load_files(&files, threads, Some(&Arc::new(keep.clone())))
                        .unwrap()
                        .finish_scoped(files_source(&files))
                        .unwrap();
                    assert_scoped_matches(full, &scoped, &keep);
                }
            }
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
