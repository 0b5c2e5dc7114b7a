#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Layer extraction on in-memory tarballs: formats, prefixes, layer order, whiteouts, and the
//! refusals (path traversal, size limit, unknown media types, corrupt streams).

use std::collections::BTreeMap;
use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use pom_oci::LayerError;
use pom_oci::layers::{LayerFormat, LayerStack, NAME_COPIES};

/// One tar entry to write.
enum Entry<'a> {
    File(&'a str, &'a [u8]),
    Dir(&'a str),
    HardLink(&'a str, &'a str),
    /// A path written into the header raw, bypassing the tar crate's own `..` check.
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

fn files(stack: LayerStack) -> BTreeMap<String, String> {
    stack
        .into_files()
        .into_iter()
        .map(|(path, data)| (path, String::from_utf8(data).unwrap()))
        .collect()
}

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

const LIMIT: u64 = 1024 * 1024;

#[test]
fn tar_layer_keeps_files_under_the_prefix_with_the_prefix_stripped() {
    let layer = tarball(&[
        Entry::Dir("configs/"),
        Entry::Dir("configs/foo/"),
        Entry::File("configs/foo/catalog.json", b"{}"),
        Entry::File("./configs/bar.yaml", b"bar"),
        Entry::File("bin/opm", b"binary"),
        Entry::File("configsx/not-a-catalog.json", b"no"),
    ]);
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack.apply(LayerFormat::Tar, &layer).unwrap();
    assert_eq!(
        files(stack),
        map(&[("bar.yaml", "bar"), ("foo/catalog.json", "{}")])
    );
}

#[test]
fn a_prefix_without_trailing_slash_is_a_folder_not_a_string_prefix() {
    let layer = tarball(&[
        Entry::File("configs/a.json", b"a"),
        Entry::File("configsx/b.json", b"b"),
    ]);
    let mut stack = LayerStack::new("configs", LIMIT);
    stack.apply(LayerFormat::Tar, &layer).unwrap();
    assert_eq!(files(stack), map(&[("a.json", "a")]));
}

#[test]
fn empty_prefix_keeps_every_regular_file_of_a_bundle() {
    let layer = gzip(&tarball(&[
        Entry::Dir("manifests/"),
        Entry::File("manifests/csv.yaml", b"csv"),
        Entry::File("metadata/annotations.yaml", b"ann"),
    ]));
    let mut stack = LayerStack::new("", LIMIT);
    stack.apply(LayerFormat::TarGzip, &layer).unwrap();
    assert_eq!(
        files(stack),
        map(&[
            ("manifests/csv.yaml", "csv"),
            ("metadata/annotations.yaml", "ann")
        ])
    );
}

#[test]
fn gzip_and_plain_tar_give_the_same_files() {
    let tar = tarball(&[Entry::File(
        "configs/c.json",
        b"{\"schema\":\"olm.package\"}",
    )]);
    let mut plain = LayerStack::new("configs/", LIMIT);
    plain.apply(LayerFormat::Tar, &tar).unwrap();
    let mut zipped = LayerStack::new("configs/", LIMIT);
    zipped.apply(LayerFormat::TarGzip, &gzip(&tar)).unwrap();
    assert_eq!(files(plain), files(zipped));
}

#[test]
fn later_layers_override_earlier_ones() {
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("configs/a.json", b"old"),
                Entry::File("configs/b.json", b"b"),
            ]),
        )
        .unwrap();
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[Entry::File("configs/a.json", b"new")]),
        )
        .unwrap();
    assert_eq!(files(stack), map(&[("a.json", "new"), ("b.json", "b")]));
}

#[test]
fn whiteouts_delete_files_and_folders_of_lower_layers() {
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("configs/keep.json", b"k"),
                Entry::File("configs/gone.json", b"g"),
                Entry::File("configs/pkg/a.json", b"a"),
                Entry::File("configs/pkg/b.json", b"b"),
                Entry::File("configs/pkgx/c.json", b"c"),
            ]),
        )
        .unwrap();
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("configs/.wh.gone.json", b""),
                Entry::File("configs/.wh.pkg", b""),
            ]),
        )
        .unwrap();
    assert_eq!(
        files(stack),
        map(&[("keep.json", "k"), ("pkgx/c.json", "c")])
    );
}

#[test]
fn whiting_out_the_prefix_folder_itself_empties_it() {
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[Entry::File("configs/a.json", b"a")]),
        )
        .unwrap();
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[Entry::File(".wh.configs", b"")]),
        )
        .unwrap();
    assert!(stack.into_files().is_empty());
}

#[test]
fn opaque_whiteout_hides_lower_content_but_keeps_its_own_layer() {
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("configs/pkg/old.json", b"old"),
                Entry::File("configs/other.json", b"o"),
            ]),
        )
        .unwrap();
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("configs/pkg/new.json", b"new"),
                Entry::File("configs/pkg/.wh..wh..opq", b""),
            ]),
        )
        .unwrap();
    assert_eq!(
        files(stack),
        map(&[("other.json", "o"), ("pkg/new.json", "new")])
    );
}

#[test]
fn hard_links_copy_the_linked_file() {
    let layer = tarball(&[
        Entry::File("configs/a.json", b"same"),
        Entry::HardLink("configs/b.json", "configs/a.json"),
    ]);
    let mut stack = LayerStack::new("configs/", LIMIT);
    stack.apply(LayerFormat::Tar, &layer).unwrap();
    assert_eq!(files(stack), map(&[("a.json", "same"), ("b.json", "same")]));
}

#[test]
fn path_traversal_is_refused() {
    let layer = tarball(&[Entry::RawPath(b"configs/../../etc/passwd", b"root")]);
    let mut stack = LayerStack::new("configs/", LIMIT);
    let err = stack.apply(LayerFormat::Tar, &layer).unwrap_err();
    assert!(
        matches!(&err, LayerError::UnsafePath { path } if path == "configs/../../etc/passwd"),
        "{err:?}"
    );
    assert!(err.to_string().contains("escapes the image root"), "{err}");
}

#[test]
fn traversal_in_a_hard_link_target_is_refused() {
    let mut header = tar::Header::new_gnu();
    header.set_size(0);
    header.set_entry_type(tar::EntryType::Link);
    header.set_path("configs/x.json").unwrap();
    header.as_old_mut().linkname[..10].copy_from_slice(b"../etc/pwd");
    header.set_cksum();
    let mut builder = tar::Builder::new(Vec::new());
    builder.append(&header, &[][..]).unwrap();
    let layer = builder.into_inner().unwrap();
    let err = LayerStack::new("configs/", LIMIT)
        .apply(LayerFormat::Tar, &layer)
        .unwrap_err();
    assert!(matches!(err, LayerError::UnsafePath { .. }), "{err:?}");
}

#[test]
fn size_limit_applies_to_kept_files_across_layers() {
    // 10 bytes of content and the name `a.json`, held NAME_COPIES times (issue 22 item 6).
    let budget = 10 + NAME_COPIES * 6;
    let mut stack = LayerStack::new("configs/", budget);
    // Files outside the prefix do not count.
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[
                Entry::File("bin/opm", &[0; 4096]),
                Entry::File("configs/a.json", b"123456"),
            ]),
        )
        .unwrap();
    // Replacing a file counts its new size only.
    stack
        .apply(
            LayerFormat::Tar,
            &tarball(&[Entry::File("configs/a.json", b"1234567890")]),
        )
        .unwrap();
    let err = stack
        .apply(
            LayerFormat::TarGzip,
            &gzip(&tarball(&[Entry::File("configs/b.json", b"x")])),
        )
        .unwrap_err();
    assert!(
        matches!(err, LayerError::TooLarge { limit, .. } if limit == budget),
        "{err:?}"
    );
}

#[test]
fn media_types_map_to_formats_and_unknown_ones_are_refused() {
    for (media_type, format) in [
        ("application/vnd.oci.image.layer.v1.tar", LayerFormat::Tar),
        (
            "application/vnd.oci.image.layer.v1.tar+gzip",
            LayerFormat::TarGzip,
        ),
        (
            "application/vnd.docker.image.rootfs.diff.tar.gzip",
            LayerFormat::TarGzip,
        ),
        (
            "application/vnd.docker.image.rootfs.diff.tar",
            LayerFormat::Tar,
        ),
    ] {
        assert_eq!(LayerFormat::from_media_type(media_type).unwrap(), format);
    }
    let err =
        LayerFormat::from_media_type("application/vnd.oci.image.layer.v1.tar+zstd").unwrap_err();
    assert!(
        matches!(&err, LayerError::UnsupportedMediaType { media_type } if media_type.ends_with("zstd")),
        "{err:?}"
    );
    assert!(
        err.to_string().contains("tar+gzip"),
        "the message says what works: {err}"
    );
}

#[test]
fn corrupt_streams_are_reported() {
    let err = LayerStack::new("", LIMIT)
        .apply(LayerFormat::TarGzip, b"definitely not gzip")
        .unwrap_err();
    assert!(
        matches!(
            err,
            LayerError::Corrupt {
                format: "tar+gzip",
                ..
            }
        ),
        "{err:?}"
    );
    let mut truncated = tarball(&[Entry::File("configs/a.json", &[b'x'; 2000])]);
    truncated.truncate(1024);
    let err = LayerStack::new("", LIMIT)
        .apply(LayerFormat::Tar, &truncated)
        .unwrap_err();
    assert!(
        matches!(err, LayerError::Corrupt { format: "tar", .. }),
        "{err:?}"
    );
}
