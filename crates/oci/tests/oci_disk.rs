#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Catalog content on disk (issue 10): layers applied to a folder give the same files as in
//! memory (prefix, whiteouts, opaque folders, hard links), with the same refusals and limits;
//! `pull_to_dir` against an in-process registry gives what `pull_files` gives, reuses a complete
//! content folder, ignores and removes what a crashed pull left, refuses a blob whose bytes do
//! not match its digest without publishing anything; `retain_pulled` removes other digests; and
//! a 64 MiB file is pulled to disk with a peak RSS far below its size.

use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use flate2::Compression;
use flate2::write::GzEncoder;
use pom_oci::disk::DiskStorage;
use pom_oci::layers::{LayerFormat, LayerStack, MAX_LAYER_ENTRIES, NAME_COPIES};
use pom_oci::mirrors::MirrorRules;
use pom_oci::{ImagePuller, LayerError, OciError, RegistryAccess, retain_pulled};
use sha2::{Digest, Sha256};

// ---------------------------------------------------------------------------------------------
// Layers

/// One tar entry to write.
enum Entry<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    HardLink(&'a str, &'a str),
    Symlink(&'a str, &'a str),
    /// A path written into the header raw, bypassing the tar crate's own checks.
    RawPath(&'a [u8], &'a [u8]),
}

fn tarball(entries: &[Entry<'_>]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for entry in entries {
        let mut header = tar::Header::new_gnu();
        header.set_mode(0o644);
        match entry {
            Entry::File(path, data) => {
                header.set_size(data.len() as u64);
                header.set_entry_type(tar::EntryType::Regular);
                builder.append_data(&mut header, path, *data).unwrap();
            }
            Entry::Dir(path) => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Directory);
                builder.append_data(&mut header, path, &[][..]).unwrap();
            }
            Entry::HardLink(path, target) => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Link);
                builder.append_link(&mut header, path, target).unwrap();
            }
            Entry::Symlink(path, target) => {
                header.set_size(0);
                header.set_entry_type(tar::EntryType::Symlink);
                builder.append_link(&mut header, path, target).unwrap();
            }
            Entry::RawPath(path, data) => {
                header.set_size(data.len() as u64);
                header.set_entry_type(tar::EntryType::Regular);
                header.as_old_mut().name[..path.len()].copy_from_slice(path);
                header.set_cksum();
                builder.append(&header, *data).unwrap();
            }
        }
    }
    builder.into_inner().unwrap()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::default());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

/// A fresh folder for one test, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Self {
        static COUNT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "pom-oci-test-{name}-{}-{}",
            std::process::id(),
            COUNT.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Self(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Every regular file under `dir`, by path relative to it; panics on anything else but
/// folders (no symlink or device is ever written).
fn walk(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn visit(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let entry = entry.unwrap();
            let kind = entry.file_type().unwrap();
            let path = entry.path();
            if kind.is_dir() {
                visit(base, &path, out);
            } else {
                assert!(kind.is_file(), "only files and folders: {path:?}");
                let key = path
                    .strip_prefix(base)
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .to_owned();
                out.insert(key, std::fs::read(&path).unwrap());
            }
        }
    }
    let mut out = BTreeMap::new();
    visit(dir, dir, &mut out);
    out
}

/// The names directly under `dir`.
fn names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

const LIMIT: u64 = 1024 * 1024;

/// Applies `layers` in memory and on disk; both must agree (result or error kind).
fn both(
    prefix: &str,
    limit: u64,
    layers: &[(LayerFormat, Vec<u8>)],
) -> Result<BTreeMap<String, Vec<u8>>, LayerError> {
    let mut memory = LayerStack::new(prefix, limit);
    let memory = layers
        .iter()
        .try_for_each(|(format, blob)| memory.apply(*format, blob))
        .map(|()| memory.into_files());
    let scratch = Scratch::new("both");
    let tree = scratch.0.join("tree");
    let mut disk = LayerStack::with_storage(prefix, limit, DiskStorage::new(&tree).unwrap());
    let disk = layers
        .iter()
        .try_for_each(|(format, blob)| disk.apply_reader(*format, blob.as_slice()))
        .map(|()| {
            let index = disk.index().clone();
            let files = walk(&tree);
            assert_eq!(
                index,
                files
                    .iter()
                    .map(|(k, v)| (k.clone(), v.len() as u64))
                    .collect::<BTreeMap<_, _>>(),
                "the index is what is on disk"
            );
            files
        });
    match (&memory, &disk) {
        (Ok(m), Ok(d)) => assert_eq!(m, d, "memory and disk give the same files"),
        (Err(m), Err(d)) => assert_eq!(
            std::mem::discriminant(m),
            std::mem::discriminant(d),
            "{m:?} / {d:?}"
        ),
        _ => panic!("memory {memory:?} / disk {disk:?}"),
    }
    disk
}

fn text(files: &BTreeMap<String, Vec<u8>>) -> BTreeMap<&str, &str> {
    files
        .iter()
        .map(|(k, v)| (k.as_str(), std::str::from_utf8(v).unwrap()))
        .collect()
}

#[test]
fn the_prefix_filters_and_is_stripped_on_disk_as_in_memory() {
    let layer = tarball(&[
        Entry::Dir("configs/"),
        Entry::File("configs/foo/catalog.json", b"{}"),
        Entry::File("./configs/bar.yaml", b"bar"),
        Entry::RawPath(b"/configs/abs.json", b"abs"),
        Entry::File("bin/opm", b"binary"),
        Entry::File("configsx/no.json", b"no"),
        Entry::Symlink("configs/link.json", "/etc/passwd"),
    ]);
    for prefix in ["configs/", "configs", "/configs/"] {
        let files = both(prefix, LIMIT, &[(LayerFormat::Tar, layer.clone())]).unwrap();
        assert_eq!(
            text(&files),
            BTreeMap::from([
                ("abs.json", "abs"),
                ("bar.yaml", "bar"),
                ("foo/catalog.json", "{}")
            ])
        );
    }
    let files = both("", LIMIT, &[(LayerFormat::TarGzip, gzip(&layer))]).unwrap();
    assert_eq!(files.len(), 5, "{:?}", files.keys());
}

#[test]
fn whiteouts_and_opaque_folders_across_layers_on_disk() {
    let lower = tarball(&[
        Entry::File("configs/keep.json", b"k"),
        Entry::File("configs/gone.json", b"g"),
        Entry::File("configs/pkg/a.json", b"a"),
        Entry::File("configs/pkg/deep/b.json", b"b"),
        Entry::File("configs/pkgx/c.json", b"c"),
        Entry::File("configs/opq/old.json", b"old"),
        Entry::File("configs/opq/sub/old.json", b"old"),
    ]);
    let upper = tarball(&[
        Entry::File("configs/.wh.gone.json", b""),
        Entry::File("configs/.wh.pkg", b""),
        Entry::File("configs/opq/new.json", b"new"),
        Entry::File("configs/opq/.wh..wh..opq", b""),
        Entry::File("configs/keep.json", b"k2"),
    ]);
    let layers = [
        (LayerFormat::Tar, lower),
        (LayerFormat::TarGzip, gzip(&upper)),
    ];
    let files = both("configs/", LIMIT, &layers).unwrap();
    assert_eq!(
        text(&files),
        BTreeMap::from([
            ("keep.json", "k2"),
            ("opq/new.json", "new"),
            ("pkgx/c.json", "c")
        ])
    );
    // Whiting out the kept folder itself empties it.
    let files = both(
        "configs/",
        LIMIT,
        &[
            layers[0].clone(),
            (
                LayerFormat::Tar,
                tarball(&[Entry::File(".wh.configs", b"")]),
            ),
        ],
    )
    .unwrap();
    assert!(files.is_empty());
}

#[test]
fn whiteouts_leave_no_empty_folders_behind() {
    let scratch = Scratch::new("prune");
    let tree = scratch.0.join("tree");
    let mut stack = LayerStack::with_storage("", LIMIT, DiskStorage::new(&tree).unwrap());
    stack
        .apply_reader(
            LayerFormat::Tar,
            tarball(&[Entry::File("a/b/c/d.json", b"d"), Entry::File("e", b"e")]).as_slice(),
        )
        .unwrap();
    stack
        .apply_reader(
            LayerFormat::Tar,
            tarball(&[Entry::File("a/b/c/.wh.d.json", b"")]).as_slice(),
        )
        .unwrap();
    assert_eq!(names(&tree), ["e"]);
}

#[test]
fn hard_links_copy_the_linked_file_on_disk() {
    let layers = [
        (
            LayerFormat::Tar,
            tarball(&[
                Entry::File("configs/a.json", b"same"),
                Entry::HardLink("configs/b.json", "configs/a.json"),
                // A link to a file outside the prefix is not content.
                Entry::File("other/x", b"x"),
                Entry::HardLink("configs/x", "other/x"),
            ]),
        ),
        // Rewriting the original does not change the copy.
        (
            LayerFormat::Tar,
            tarball(&[Entry::File("configs/a.json", b"changed")]),
        ),
    ];
    let files = both("configs/", LIMIT, &layers).unwrap();
    assert_eq!(
        text(&files),
        BTreeMap::from([("a.json", "changed"), ("b.json", "same")])
    );
}

#[test]
fn a_file_replaces_a_folder_and_a_folder_replaces_a_file_as_on_a_file_system() {
    let files = both(
        "",
        LIMIT,
        &[
            (
                LayerFormat::Tar,
                tarball(&[Entry::File("a/x", b"x"), Entry::File("b", b"b")]),
            ),
            (
                LayerFormat::Tar,
                tarball(&[Entry::File("a", b"file"), Entry::File("b/y", b"y")]),
            ),
        ],
    )
    .unwrap();
    assert_eq!(text(&files), BTreeMap::from([("a", "file"), ("b/y", "y")]));
}

#[test]
fn path_escapes_are_refused_and_nothing_is_written_outside() {
    let scratch = Scratch::new("escape");
    let tree = scratch.0.join("a/b/tree");
    for raw in [&b"configs/../../x"[..], b"../../x", b"configs/./../../../x"] {
        let layer = tarball(&[Entry::RawPath(raw, b"root")]);
        let err = LayerStack::with_storage("", LIMIT, DiskStorage::new(&tree).unwrap())
            .apply_reader(LayerFormat::Tar, layer.as_slice())
            .unwrap_err();
        assert!(matches!(err, LayerError::UnsafePath { .. }), "{err:?}");
        assert!(err.to_string().contains("escapes the image root"), "{err}");
    }
    assert_eq!(names(&scratch.0), ["a"]);
    assert_eq!(names(&scratch.0.join("a")), ["b"]);
    assert!(walk(&scratch.0).is_empty());
}

#[test]
fn the_byte_budget_is_checked_before_a_file_is_written() {
    let scratch = Scratch::new("budget");
    let tree = scratch.0.join("tree");
    // 10 bytes of content and the name `a.json` held NAME_COPIES times (issue 22 item 6).
    let budget = 10 + NAME_COPIES * 6;
    let mut stack = LayerStack::with_storage("configs/", budget, DiskStorage::new(&tree).unwrap());
    stack
        .apply_reader(
            LayerFormat::Tar,
            tarball(&[
                Entry::File("bin/opm", &[0; 4096]),
                Entry::File("configs/a.json", b"1234567890"),
            ])
            .as_slice(),
        )
        .unwrap();
    let err = stack
        .apply_reader(
            LayerFormat::Tar,
            tarball(&[Entry::File("configs/b.json", b"x")]).as_slice(),
        )
        .unwrap_err();
    assert!(
        matches!(
            err,
            LayerError::TooLarge { size, limit } if size == budget + 1 + NAME_COPIES * 6 && limit == budget
        ),
        "{err:?}"
    );
    assert!(
        !tree.join("b.json").exists(),
        "refused before it was created"
    );
    assert_eq!(names(&tree), ["a.json"]);
}

#[test]
fn the_entry_limit_applies_on_disk() {
    let mut tar = Vec::with_capacity(usize::try_from(MAX_LAYER_ENTRIES + 3).unwrap() * 512);
    for index in 0..=MAX_LAYER_ENTRIES {
        let mut header = tar::Header::new_gnu();
        header.set_entry_type(tar::EntryType::Directory);
        header.set_size(0);
        header.set_path(format!("d{index}/")).unwrap();
        header.set_cksum();
        tar.extend_from_slice(header.as_bytes());
    }
    tar.extend_from_slice(&[0; 1024]);
    let err = both("", LIMIT, &[(LayerFormat::Tar, tar)]).unwrap_err();
    assert!(
        matches!(err, LayerError::TooManyEntries { limit } if limit == MAX_LAYER_ENTRIES),
        "{err:?}"
    );
}

#[test]
fn a_write_failure_names_the_path_and_the_volume_to_check() {
    let scratch = Scratch::new("readonly");
    let tree = scratch.0.join("tree");
    let mut stack = LayerStack::with_storage("", LIMIT, DiskStorage::new(&tree).unwrap());
    // A file where the layer needs a folder's parent: the storage cannot create `x/..`.
    std::fs::remove_dir(&tree).unwrap();
    std::fs::write(&tree, b"not a folder").unwrap();
    let err = stack
        .apply_reader(
            LayerFormat::Tar,
            tarball(&[Entry::File("x/a.json", b"a")]).as_slice(),
        )
        .unwrap_err();
    assert!(matches!(err, LayerError::Storage { .. }), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains(&tree.display().to_string()) && message.contains("emptyDir"),
        "{message}"
    );
}

// ---------------------------------------------------------------------------------------------
// An in-process registry

fn sha256(data: &[u8]) -> String {
    format!("sha256:{}", hex::encode(Sha256::digest(data)))
}

const GZIP: &str = "application/vnd.oci.image.layer.v1.tar+gzip";
const TAR: &str = "application/vnd.oci.image.layer.v1.tar";

/// A registry holding images of `team/catalog` by tag; it logs every request (`METHOD path`)
/// and can serve other bytes than a blob's own for a digest (`tampered`).
#[derive(Default)]
struct Registry {
    manifests: HashMap<String, (String, Vec<u8>)>,
    blobs: HashMap<String, Vec<u8>>,
    log: Mutex<Vec<String>>,
}

impl Registry {
    /// Adds an image of `layers` (media type, blob) under `tag`; returns its manifest digest.
    fn push(&mut self, tag: &str, layers: &[(&str, Vec<u8>)]) -> String {
        let config = b"{}".to_vec();
        let config_digest = sha256(&config);
        let descriptors: Vec<serde_json::Value> = layers
            .iter()
            .map(|(media_type, blob)| {
                serde_json::json!({"mediaType": media_type, "digest": sha256(blob), "size": blob.len()})
            })
            .collect();
        let manifest = serde_json::to_vec(&serde_json::json!({
            "schemaVersion": 2,
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": config_digest, "size": config.len()},
            "layers": descriptors,
        }))
        .unwrap();
        let digest = sha256(&manifest);
        self.blobs.insert(config_digest, config);
        for (_, blob) in layers {
            self.blobs.insert(sha256(blob), blob.clone());
        }
        self.manifests
            .insert(tag.to_owned(), (digest.clone(), manifest.clone()));
        self.manifests
            .insert(digest.clone(), (digest.clone(), manifest));
        digest
    }

    fn requests(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }

    fn respond(&self, method: &str, path: &str) -> (u16, Vec<(&'static str, String)>, Vec<u8>) {
        self.log.lock().unwrap().push(format!("{method} {path}"));
        if path == "/v2/" {
            return (200, vec![], b"{}".to_vec());
        }
        let rest = path.strip_prefix("/v2/team/catalog/").unwrap_or_default();
        if let Some(reference) = rest.strip_prefix("manifests/")
            && let Some((digest, body)) = self.manifests.get(reference)
        {
            return (
                200,
                vec![
                    (
                        "Content-Type",
                        "application/vnd.oci.image.manifest.v1+json".to_owned(),
                    ),
                    ("Docker-Content-Digest", digest.clone()),
                ],
                body.clone(),
            );
        }
        if let Some(digest) = rest.strip_prefix("blobs/")
            && let Some(body) = self.blobs.get(digest)
        {
            return (200, vec![], body.clone());
        }
        (
            404,
            vec![("Content-Type", "application/json".to_owned())],
            br#"{"errors":[{"code":"MANIFEST_UNKNOWN","message":"unknown"}]}"#.to_vec(),
        )
    }
}

/// Serves `registry` on 127.0.0.1 (plain HTTP, one request per connection); returns the host.
async fn serve(registry: Arc<Registry>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let host = format!("127.0.0.1:{}", listener.local_addr().unwrap().port());
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let registry = registry.clone();
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0_u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let text = String::from_utf8_lossy(&request);
                let mut first = text.lines().next().unwrap_or_default().split(' ');
                let (method, path) = (
                    first.next().unwrap_or_default(),
                    first.next().unwrap_or_default(),
                );
                let (status, headers, body) = registry.respond(method, path);
                let mut head = format!(
                    "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
                    body.len()
                );
                for (name, value) in headers {
                    head.push_str(&format!("{name}: {value}\r\n"));
                }
                head.push_str("\r\n");
                let _ = socket.write_all(head.as_bytes()).await;
                if method != "HEAD" {
                    let _ = socket.write_all(&body).await;
                }
                let _ = socket.shutdown().await;
            });
        }
    });
    host
}

fn install_crypto_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

/// Three layers exercising every rule: a tar+gzip base, a plain tar on top with whiteouts,
/// an opaque folder and a hard link, and a layer outside the prefix only.
fn catalog_layers() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        (
            GZIP,
            gzip(&tarball(&[
                Entry::Dir("configs/"),
                Entry::File(
                    "configs/a/catalog.json",
                    b"{\"schema\":\"olm.package\",\"name\":\"a\"}",
                ),
                Entry::File("configs/b/catalog.json", b"{\"name\":\"b\"}"),
                Entry::File("configs/c/old.json", b"old"),
                Entry::File("configs/gone.json", b"gone"),
                Entry::File("bin/opm", &[7; 10_000]),
            ])),
        ),
        (
            TAR,
            tarball(&[
                Entry::File("configs/.wh.gone.json", b""),
                Entry::File("configs/c/new.json", b"new"),
                Entry::File("configs/c/.wh..wh..opq", b""),
                Entry::HardLink("configs/a/copy.json", "configs/a/catalog.json"),
                Entry::File("configs/b/catalog.json", b"{\"name\":\"b2\"}"),
            ]),
        ),
        (GZIP, gzip(&tarball(&[Entry::File("etc/labels", b"x")]))),
    ]
}

fn expected_catalog() -> BTreeMap<&'static str, &'static str> {
    BTreeMap::from([
        (
            "a/catalog.json",
            "{\"schema\":\"olm.package\",\"name\":\"a\"}",
        ),
        ("a/copy.json", "{\"schema\":\"olm.package\",\"name\":\"a\"}"),
        ("b/catalog.json", "{\"name\":\"b2\"}"),
        ("c/new.json", "new"),
    ])
}

#[tokio::test]
async fn pull_to_dir_gives_the_files_pull_files_gives() {
    install_crypto_provider();
    let mut registry = Registry::default();
    let digest = registry.push("v1", &catalog_layers());
    let registry = Arc::new(registry);
    let host = serve(registry.clone()).await;
    let puller = ImagePuller::new(vec![host.clone()]);
    let anonymous = RegistryAccess::anonymous();
    let scratch = Scratch::new("equal");
    let root = scratch.0.join("catalogs");
    let reference = format!("{host}/team/catalog:v1");
    let dir = puller
        .pull_to_dir(
            &reference,
            "configs/",
            &anonymous,
            &root,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    let hex = digest.strip_prefix("sha256:").unwrap();
    assert_eq!(dir, root.join(format!("sha256-{hex}_configs")));
    let on_disk = walk(&dir);
    assert_eq!(text(&on_disk), expected_catalog());
    let in_memory = puller
        .pull_files(&reference, "configs/", &anonymous, &MirrorRules::default())
        .await
        .unwrap()
        .content;
    assert_eq!(*in_memory, on_disk, "same file set and bytes");
    // Only the content folder is left: no staging folder, no downloaded blob.
    assert_eq!(names(&root), [format!("sha256-{hex}_configs")]);
    // The whole image is another folder of the same digest.
    let whole = puller
        .pull_to_dir(&reference, "", &anonymous, &root, &MirrorRules::default())
        .await
        .unwrap()
        .content;
    assert_eq!(whole, root.join(format!("sha256-{hex}")));
    assert_eq!(
        walk(&whole),
        *puller
            .pull_files(&reference, "", &anonymous, &MirrorRules::default())
            .await
            .unwrap()
            .content
    );
}

#[tokio::test]
async fn a_complete_content_folder_is_reused_without_pulling() {
    install_crypto_provider();
    let mut registry = Registry::default();
    let digest = registry.push("v1", &catalog_layers());
    let registry = Arc::new(registry);
    let host = serve(registry.clone()).await;
    let anonymous = RegistryAccess::anonymous();
    let scratch = Scratch::new("reuse");
    let root = scratch.0.clone();
    let first = ImagePuller::new(vec![host.clone()])
        .pull_to_dir(
            &format!("{host}/team/catalog:v1"),
            "configs",
            &anonymous,
            &root,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    assert!(
        registry.requests().iter().any(|r| r.contains("/blobs/")),
        "{:?}",
        registry.requests()
    );
    registry.log.lock().unwrap().clear();
    // A new puller (the manager restarted, the emptyDir kept the folder), by tag: the tag is
    // resolved, nothing else is fetched.
    let puller = ImagePuller::new(vec![host.clone()]);
    let again = puller
        .pull_to_dir(
            &format!("{host}/team/catalog:v1"),
            "configs/",
            &anonymous,
            &root,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    assert_eq!(again, first);
    let requests = registry.requests();
    assert!(
        requests
            .iter()
            .all(|r| !r.contains("/blobs/") && !r.contains(&digest)),
        "{requests:?}"
    );
    // By digest: no request at all.
    registry.log.lock().unwrap().clear();
    let by_digest = format!("{host}/team/catalog@{digest}");
    assert_eq!(
        puller
            .pull_to_dir(
                &by_digest,
                "configs/",
                &anonymous,
                &root,
                &MirrorRules::default()
            )
            .await
            .unwrap()
            .content,
        first
    );
    assert_eq!(registry.requests(), Vec::<String>::new());
    assert_eq!(
        puller.pulled_dir(&by_digest, "configs/", &root),
        Some(first.clone())
    );
    assert_eq!(puller.pulled_dir(&by_digest, "manifests/", &root), None);
    assert_eq!(
        puller.pulled_dir(&format!("{host}/team/catalog:v1"), "configs/", &root),
        None,
        "a tag is never looked up offline"
    );
}

#[tokio::test]
async fn leftovers_of_a_crashed_pull_are_ignored_and_removed() {
    install_crypto_provider();
    let mut registry = Registry::default();
    let digest = registry.push("v1", &catalog_layers());
    let registry = Arc::new(registry);
    let host = serve(registry.clone()).await;
    let scratch = Scratch::new("crash");
    let root = scratch.0.clone();
    let hex = digest.strip_prefix("sha256:").unwrap();
    // What a pull killed half-way leaves: its staging folder with an unheld lock, a partial
    // tree and blob; and a removal killed half-way leaves trash.
    let stale = root.join(format!(".staging-sha256-{hex}_configs-1-0-12345"));
    std::fs::create_dir_all(stale.join("tree/a")).unwrap();
    std::fs::write(stale.join("tree/a/half.json"), b"{\"na").unwrap();
    std::fs::write(stale.join("blob"), b"partial").unwrap();
    std::fs::write(stale.join("lock"), b"").unwrap();
    let trash = root.join(".trash-sha256-00-1-0-1");
    std::fs::create_dir_all(trash.join("x")).unwrap();
    let dir = ImagePuller::new(vec![host.clone()])
        .pull_to_dir(
            &format!("{host}/team/catalog:v1"),
            "configs/",
            &RegistryAccess::anonymous(),
            &root,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    assert_eq!(
        text(&walk(&dir)),
        expected_catalog(),
        "nothing of the leftover"
    );
    assert_eq!(names(&root), [format!("sha256-{hex}_configs")]);
}

#[tokio::test]
async fn a_blob_whose_bytes_do_not_match_its_digest_is_refused_and_nothing_published() {
    install_crypto_provider();
    let layers = catalog_layers();
    let mut registry = Registry::default();
    registry.push("v1", &layers);
    // Same length, other bytes.
    let layer_digest = sha256(&layers[1].1);
    let mut tampered = layers[1].1.clone();
    tampered[600] ^= 0xff;
    registry.blobs.insert(layer_digest.clone(), tampered);
    let registry = Arc::new(registry);
    let host = serve(registry.clone()).await;
    let scratch = Scratch::new("mismatch");
    let root = scratch.0.join("root");
    let err = ImagePuller::new(vec![host.clone()])
        .pull_to_dir(
            &format!("{host}/team/catalog:v1"),
            "configs/",
            &RegistryAccess::anonymous(),
            &root,
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, OciError::Registry { .. }), "{err:?}");
    assert!(err.to_string().contains(&layer_digest), "{err}");
    assert_eq!(
        names(&root),
        Vec::<String>::new(),
        "no content folder, no staging folder"
    );
    // Retried like any registry error.
    assert!(err.is_transient());
}

#[tokio::test]
async fn registry_failures_are_classified_as_for_pull_files() {
    install_crypto_provider();
    let registry = Arc::new(Registry::default());
    let host = serve(registry).await;
    let scratch = Scratch::new("notfound");
    let puller = ImagePuller::new(vec![host.clone(), "127.0.0.1:1".to_owned()]);
    let err = puller
        .pull_to_dir(
            &format!("{host}/team/catalog:missing"),
            "configs/",
            &RegistryAccess::anonymous(),
            &scratch.0,
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason().as_str(), "ImageNotFound", "{err}");
    let err = puller
        .pull_to_dir(
            "127.0.0.1:1/catalog:v1",
            "configs/",
            &RegistryAccess::anonymous(),
            &scratch.0,
            &MirrorRules::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.reason().as_str(), "RegistryUnreachable", "{err}");
}

#[tokio::test]
async fn concurrent_pulls_of_one_digest_publish_one_folder() {
    install_crypto_provider();
    let mut registry = Registry::default();
    registry.push("v1", &catalog_layers());
    let host = serve(Arc::new(registry)).await;
    let scratch = Scratch::new("concurrent");
    let puller = ImagePuller::new(vec![host.clone()]);
    let anonymous = RegistryAccess::anonymous();
    let reference = format!("{host}/team/catalog:v1");
    let no_mirrors = MirrorRules::default();
    let pulls = (0..4)
        .map(|_| puller.pull_to_dir(&reference, "configs/", &anonymous, &scratch.0, &no_mirrors));
    let dirs: Vec<PathBuf> = futures::future::join_all(pulls)
        .await
        .into_iter()
        .map(|pulled| pulled.unwrap().content)
        .collect();
    assert!(dirs.iter().all(|d| *d == dirs[0]), "{dirs:?}");
    assert_eq!(text(&walk(&dirs[0])), expected_catalog());
    assert_eq!(names(&scratch.0).len(), 1, "{:?}", names(&scratch.0));
}

#[tokio::test]
async fn retain_pulled_removes_the_digests_no_longer_served() {
    install_crypto_provider();
    let mut registry = Registry::default();
    let old = registry.push("v1", &catalog_layers());
    let new = registry.push(
        "v2",
        &[(GZIP, gzip(&tarball(&[Entry::File("configs/z.json", b"z")])))],
    );
    let host = serve(Arc::new(registry)).await;
    let scratch = Scratch::new("retain");
    let puller = ImagePuller::new(vec![host.clone()]);
    let anonymous = RegistryAccess::anonymous();
    let old_dir = puller
        .pull_to_dir(
            &format!("{host}/team/catalog:v1"),
            "configs/",
            &anonymous,
            &scratch.0,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    let new_ref = format!("{host}/team/catalog@{new}");
    let new_dir = puller
        .pull_to_dir(
            &new_ref,
            "configs/",
            &anonymous,
            &scratch.0,
            &MirrorRules::default(),
        )
        .await
        .unwrap()
        .content;
    let removed = retain_pulled(&scratch.0, [new_ref.as_str()]).unwrap();
    assert_eq!(removed, std::slice::from_ref(&old_dir));
    assert!(!old_dir.exists() && new_dir.is_dir());
    assert_eq!(
        puller.pulled_dir(
            &format!("{host}/team/catalog@{old}"),
            "configs/",
            &scratch.0
        ),
        None
    );
    assert_eq!(names(&scratch.0).len(), 1);
    // Nothing to keep: everything goes; a missing root is not an error.
    retain_pulled(&scratch.0, []).unwrap();
    assert!(names(&scratch.0).is_empty());
    assert!(
        retain_pulled(&scratch.0.join("missing"), [])
            .unwrap()
            .is_empty()
    );
}

// ---------------------------------------------------------------------------------------------
// Memory

/// Peak resident memory of this process so far (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A 64 MiB file (zeros, so the gzip layer itself is about 300 KiB) pulled to disk from the
/// in-process registry raises the process' peak RSS by no more than a 1 MiB file does: memory
/// does not grow with the content, which it would by 64 MiB if the blob, the decompressed
/// stream or the file were held whole anywhere. Each size runs alone in a fresh process (other
/// tests of this binary allocate more), as in `oci_limits`; the peak is read from the kernel
/// (VmHWM), before and after the pull.
#[test]
fn a_64_mib_file_is_pulled_to_disk_with_bounded_memory() {
    const MIB: u64 = 1 << 20;
    const CHILD: &str = "POM_OCI_DISK_RSS_MIB";
    if let Some(mib) = std::env::var(CHILD)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(async {
            install_crypto_provider();
            // Built streaming, so the test itself never holds the file.
            let mut header = tar::Header::new_gnu();
            header.set_mode(0o644);
            header.set_entry_type(tar::EntryType::Regular);
            header.set_size(mib * MIB);
            header.set_path("configs/big/catalog.json").unwrap();
            header.set_cksum();
            let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
            encoder.write_all(header.as_bytes()).unwrap();
            let zeros = vec![0_u8; 1 << 20];
            for _ in 0..mib {
                encoder.write_all(&zeros).unwrap();
            }
            encoder.write_all(&[0; 1024]).unwrap();
            let layer = encoder.finish().unwrap();
            drop(zeros);
            let layer_bytes = layer.len();
            let mut registry = Registry::default();
            registry.push("big", &[(GZIP, layer)]);
            let host = serve(Arc::new(registry)).await;
            let scratch = Scratch::new("rss");
            let before = peak_rss_kib();
            let dir = ImagePuller::new(vec![host.clone()])
                .pull_to_dir(
                    &format!("{host}/team/catalog:big"),
                    "configs/",
                    &RegistryAccess::anonymous(),
                    &scratch.0,
                    &MirrorRules::default(),
                )
                .await
                .unwrap()
                .content;
            let size = std::fs::metadata(dir.join("big/catalog.json"))
                .unwrap()
                .len();
            assert_eq!(size, mib * MIB);
            println!(
                "LAYER_BYTES={layer_bytes} BEFORE_KIB={before} PEAK_KIB={}",
                peak_rss_kib()
            );
        });
        return;
    }
    let run = |mib: u64| -> (u64, u64, u64) {
        let output = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "a_64_mib_file_is_pulled_to_disk_with_bounded_memory",
                "--exact",
                "--nocapture",
            ])
            .env(CHILD, mib.to_string())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
        assert!(
            output.status.success(),
            "{stdout}{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let field = |name: &str| -> u64 {
            stdout
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name))
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no {name} in {stdout}"))
        };
        (
            field("LAYER_BYTES="),
            field("BEFORE_KIB="),
            field("PEAK_KIB="),
        )
    };
    let (_, small_before, small_peak) = run(1);
    let (layer, before, peak) = run(64);
    let (small_rise, rise) = (
        small_peak.saturating_sub(small_before),
        peak.saturating_sub(before),
    );
    println!(
        "pulled to disk: a 1 MiB file raised peak RSS by {small_rise} KiB, a 64 MiB file \
         ({layer} bytes gzip layer) by {rise} KiB (peak {peak} KiB)"
    );
    assert!(layer < 1 << 20, "the layer is small: {layer} bytes");
    // The fixed part (HTTP client, TLS roots, blocking threads) is the same in both; 64 MiB
    // more content may cost buffers of a few MiB at most, never the content.
    assert!(
        rise < small_rise + 8 * 1024,
        "1 MiB: +{small_rise} KiB, 64 MiB: +{rise} KiB"
    );
    assert!(peak < 64 * 1024, "peak RSS {peak} KiB");
}
