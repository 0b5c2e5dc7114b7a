#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The named limits of layer extraction (issue 14, item 4), each at limit−1 and limit+1, with
//! a refusal that names the limit and how big the input was; long names and PAX paths read
//! through POM's own bounded path; whiteouts that remove exactly what they name; and a crafted
//! layer declaring a huge long name refused with bounded memory.

use std::io::Write;

use flate2::Compression;
use flate2::write::GzEncoder;
use pom_oci::LayerError;
use pom_oci::layers::{
    LayerFormat, LayerStack, MAX_EXTENDED_HEADER_BYTES, MAX_LAYER_ENTRIES, MAX_PATH_BYTES,
    NAME_COPIES,
};

const BYTES: u64 = 1024 * 1024;

/// A 512-byte tar header of `kind` for `name` declaring `size` bytes of data.
fn header(kind: tar::EntryType, name: &str, size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_mode(0o644);
    header.set_entry_type(kind);
    header.set_size(size);
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.set_cksum();
    header
}

/// A tar with one file whose path is given by a GNU long-name entry of `path`.
fn gnu_long_name(path: &str, data: &[u8]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    let mut name = path.as_bytes().to_vec();
    name.push(0);
    builder
        .append(
            &header(
                tar::EntryType::GNULongName,
                "././@LongLink",
                name.len() as u64,
            ),
            name.as_slice(),
        )
        .unwrap();
    builder
        .append(
            &header(tar::EntryType::Regular, "short", data.len() as u64),
            data,
        )
        .unwrap();
    builder.into_inner().unwrap()
}

/// A tar with one file whose path is given by a PAX `path` record.
fn pax_path(path: &str, data: &[u8]) -> Vec<u8> {
    let body = format!(" path={path}\n");
    // The record length counts its own digits.
    let mut len = body.len() + 1;
    while format!("{len}{body}").len() != len {
        len += 1;
    }
    let record = format!("{len}{body}");
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append(
            &header(tar::EntryType::XHeader, "PaxHeaders/x", record.len() as u64),
            record.as_bytes(),
        )
        .unwrap();
    builder
        .append(
            &header(tar::EntryType::Regular, "short", data.len() as u64),
            data,
        )
        .unwrap();
    builder.into_inner().unwrap()
}

/// A path of exactly `total` bytes under `configs/` (one long name: nothing is written to a
/// file system, so the 255-byte component limit does not apply).
fn long_path(total: usize) -> String {
    format!("configs/{}", "a".repeat(total - "configs/".len()))
}

#[test]
fn gnu_long_names_up_to_the_limit_are_read_and_above_it_refused() {
    let limit = usize::try_from(MAX_EXTENDED_HEADER_BYTES).unwrap();
    // limit − 1 bytes of header data (the name plus its NUL): read through the bounded path,
    // then refused for its length (MAX_PATH_BYTES, issue 22 item 6; names up to that length
    // are kept: tests/oci_costs.rs).
    let fits = long_path(limit - 2);
    let err = LayerStack::new("configs/", BYTES)
        .apply(LayerFormat::Tar, &gnu_long_name(&fits, b"kept"))
        .unwrap_err();
    assert!(
        matches!(err, LayerError::PathTooLong { size, limit: l, .. } if size == fits.len() as u64 && l == MAX_PATH_BYTES),
        "{err:?}"
    );
    // limit + 1.
    let err = LayerStack::new("configs/", BYTES)
        .apply(LayerFormat::Tar, &gnu_long_name(&long_path(limit), b"x"))
        .unwrap_err();
    assert!(
        matches!(err, LayerError::HeaderTooLarge { size, limit: l } if size == MAX_EXTENDED_HEADER_BYTES + 1 && l == MAX_EXTENDED_HEADER_BYTES),
        "{err:?}"
    );
    let message = err.to_string();
    assert!(
        message.contains("MAX_EXTENDED_HEADER_BYTES")
            && message.contains(&format!("{} bytes", MAX_EXTENDED_HEADER_BYTES + 1)),
        "{message}"
    );
}

#[test]
fn pax_paths_are_honoured_and_bounded() {
    let mut stack = LayerStack::new("configs/", BYTES);
    stack
        .apply(
            LayerFormat::Tar,
            &pax_path("configs/pkg/catalog.json", b"{}"),
        )
        .unwrap();
    assert_eq!(
        stack.into_files().keys().cloned().collect::<Vec<_>>(),
        ["pkg/catalog.json"]
    );
    // A PAX path still goes through the traversal check.
    let err = LayerStack::new("", BYTES)
        .apply(
            LayerFormat::Tar,
            &pax_path("configs/../../etc/passwd", b"x"),
        )
        .unwrap_err();
    assert!(matches!(err, LayerError::UnsafePath { .. }), "{err:?}");
    let limit = usize::try_from(MAX_EXTENDED_HEADER_BYTES).unwrap();
    let err = LayerStack::new("configs/", BYTES)
        .apply(LayerFormat::Tar, &pax_path(&long_path(limit), b"x"))
        .unwrap_err();
    assert!(matches!(err, LayerError::HeaderTooLarge { .. }), "{err:?}");
}

/// `count` folder entries (no data: the cheapest entries there are).
fn many_entries(count: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap() * 512 + 1024);
    for index in 0..count {
        let h = header(tar::EntryType::Directory, &format!("d{index}/"), 0);
        out.extend_from_slice(h.as_bytes());
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

#[test]
fn entry_count_at_the_limit_passes_and_above_it_is_refused() {
    LayerStack::new("", BYTES)
        .apply(LayerFormat::Tar, &many_entries(MAX_LAYER_ENTRIES))
        .unwrap();
    let err = LayerStack::new("", BYTES)
        .apply(LayerFormat::Tar, &many_entries(MAX_LAYER_ENTRIES + 1))
        .unwrap_err();
    assert!(
        matches!(err, LayerError::TooManyEntries { limit } if limit == MAX_LAYER_ENTRIES),
        "{err:?}"
    );
    assert!(err.to_string().contains("MAX_LAYER_ENTRIES"), "{err}");
    // The count is per image: two layers of half the limit plus one are refused together.
    let mut stack = LayerStack::new("", BYTES);
    stack
        .apply(LayerFormat::Tar, &many_entries(MAX_LAYER_ENTRIES / 2))
        .unwrap();
    let err = stack
        .apply(LayerFormat::Tar, &many_entries(MAX_LAYER_ENTRIES / 2 + 1))
        .unwrap_err();
    assert!(matches!(err, LayerError::TooManyEntries { .. }), "{err:?}");
}

#[test]
fn the_byte_budget_names_how_big_the_content_would_be() {
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append(&header(tar::EntryType::Regular, "a", 10), &[b'a'; 10][..])
        .unwrap();
    let ten = builder.into_inner().unwrap();
    // 10 bytes of content and the one-byte name `a` held NAME_COPIES times.
    let cost = 10 + NAME_COPIES;
    LayerStack::new("", cost)
        .apply(LayerFormat::Tar, &ten)
        .unwrap();
    let err = LayerStack::new("", cost - 1)
        .apply(LayerFormat::Tar, &ten)
        .unwrap_err();
    assert!(
        matches!(err, LayerError::TooLarge { size, limit } if size == cost && limit == cost - 1),
        "{err:?}"
    );
    assert!(err.to_string().contains(&format!("{cost} bytes")), "{err}");
}

#[test]
fn whiteouts_remove_exactly_the_tree_they_name() {
    let mut builder = tar::Builder::new(Vec::new());
    // Keys that sort between `a` and `a/…` (`-` and `.` sort before `/`).
    for path in ["a", "a-b", "a.c", "a/x", "a/y/z", "ab", "b/a"] {
        builder
            .append(&header(tar::EntryType::Regular, path, 1), &b"1"[..])
            .unwrap();
    }
    let lower = builder.into_inner().unwrap();
    let mut builder = tar::Builder::new(Vec::new());
    builder
        .append(&header(tar::EntryType::Regular, ".wh.a", 0), &[][..])
        .unwrap();
    builder
        .append(
            &header(tar::EntryType::Regular, "b/.wh..wh..opq", 0),
            &[][..],
        )
        .unwrap();
    let upper = builder.into_inner().unwrap();
    let mut stack = LayerStack::new("", BYTES);
    stack.apply(LayerFormat::Tar, &lower).unwrap();
    stack.apply(LayerFormat::Tar, &upper).unwrap();
    assert_eq!(
        stack.into_files().keys().cloned().collect::<Vec<_>>(),
        ["a-b", "a.c", "ab"]
    );
}

/// Peak resident memory of this process so far (VmHWM), in KiB.
fn peak_rss_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// A gzip layer whose GNU long-name entry declares `declared` bytes and really carries
/// `carried` of them (highly compressible, so the layer itself is small).
fn hostile_long_name_layer(declared: u64, carried: u64) -> Vec<u8> {
    let mut encoder = GzEncoder::new(Vec::new(), Compression::fast());
    encoder
        .write_all(header(tar::EntryType::GNULongName, "././@LongLink", declared).as_bytes())
        .unwrap();
    let chunk = vec![b'a'; 1 << 20];
    let mut left = carried;
    while left > 0 {
        let n = left.min(chunk.len() as u64);
        encoder
            .write_all(&chunk[..usize::try_from(n).unwrap()])
            .unwrap();
        left -= n;
    }
    encoder.finish().unwrap()
}

/// Run alone in a fresh process (the other tests of this binary allocate tens of MiB, which
/// would hide a peak): the parent starts this test binary again for this one test.
#[test]
fn a_layer_declaring_a_1_gib_long_name_is_refused_with_bounded_memory() {
    const GIB: u64 = 1 << 30;
    const CHILD: &str = "POM_OCI_LIMITS_RSS_CHILD";
    if std::env::var_os(CHILD).is_some() {
        // 64 MiB really carried: enough that reading it would show in the peak.
        let layer = hostile_long_name_layer(GIB, 64 << 20);
        let err = LayerStack::new("", 512 << 20)
            .apply(LayerFormat::TarGzip, &layer)
            .unwrap_err();
        assert!(
            matches!(err, LayerError::HeaderTooLarge { size, .. } if size == GIB),
            "{err:?}"
        );
        println!("LAYER_BYTES={} PEAK_KIB={}", layer.len(), peak_rss_kib());
        return;
    }
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "a_layer_declaring_a_1_gib_long_name_is_refused_with_bounded_memory",
            "--exact",
            "--nocapture",
        ])
        .env(CHILD, "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
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
    let (layer, peak) = (field("LAYER_BYTES="), field("PEAK_KIB="));
    println!(
        "1 GiB long-name layer ({layer} bytes gzip, 64 MiB of name carried): refused, peak RSS {peak} KiB"
    );
    assert!(layer < 1 << 20, "the layer is small: {layer} bytes");
    // The whole process: the test harness, the layer and the gzip state; reading the name
    // would add at least 64 MiB.
    assert!(peak < 48 * 1024, "peak RSS {peak} KiB");
}
