//! Layer extraction fed hostile names (issue 22 items 6 and 7): GNU long names, PAX `path` and
//! `linkpath` records and plain header names of any bytes and any length up to past the
//! 64 KiB extended-header limit, as files, hard links, whiteouts, folders and symlinks.
//! Whatever the names, extraction gives an error or files within every limit: no kept path
//! longer than `MAX_PATH_BYTES` or with an empty, `.` or `..` component, names within
//! `MAX_NAME_BYTES`, content plus names (held `NAME_COPIES` times) within the byte budget.
#![no_main]

use libfuzzer_sys::fuzz_target;
use pom_oci::layers::{LayerFormat, LayerStack, MAX_NAME_BYTES, MAX_PATH_BYTES, NAME_COPIES};

const BUDGET: u64 = 1 << 20;

/// Reads the fuzz input as a list of entries.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn byte(&mut self) -> Option<u8> {
        let (first, rest) = self.0.split_first()?;
        self.0 = rest;
        Some(*first)
    }

    /// A name: a seed of up to 32 input bytes repeated to a length the input chooses, from a
    /// few bytes to past 64 KiB (so long names cost the fuzzer nothing to find).
    fn name(&mut self) -> Option<Vec<u8>> {
        let seed_len = usize::from(self.byte()? % 32) + 1;
        let scale = self.byte()?;
        let take = seed_len.min(self.0.len());
        let (seed, rest) = self.0.split_at(take);
        self.0 = rest;
        if seed.is_empty() {
            return None;
        }
        let len = match scale >> 6 {
            0 => usize::from(scale),
            1 => usize::from(scale & 63) * 64,
            2 => 4096 + usize::from(scale & 63) - 32,
            _ => 65_536 + usize::from(scale & 63) - 32,
        };
        Some(seed.iter().copied().cycle().take(len.max(1)).collect())
    }
}

fn header(kind: tar::EntryType, name: &[u8], size: u64) -> tar::Header {
    let mut header = tar::Header::new_gnu();
    header.set_mode(0o644);
    header.set_entry_type(kind);
    header.set_size(size);
    let name = &name[..name.len().min(100)];
    header.as_old_mut().name[..name.len()].copy_from_slice(name);
    header.set_cksum();
    header
}

fn push(out: &mut Vec<u8>, header: &tar::Header, data: &[u8]) {
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn pax(key: &str, value: &[u8]) -> Vec<u8> {
    let body_len = 1 + key.len() + 1 + value.len() + 1;
    let mut len = body_len + 1;
    while format!("{len}").len() + body_len != len {
        len += 1;
    }
    let mut record = format!("{len} {key}=").into_bytes();
    record.extend_from_slice(value);
    record.push(b'\n');
    record
}

/// The tar the input describes.
fn layer(mut input: Input<'_>) -> Vec<u8> {
    let mut out = Vec::new();
    let prefixes: [&[u8]; 4] = [b"configs/", b"", b"./configs/", b"configs/.wh."];
    while let Some(op) = input.byte() {
        let Some(mut name) = input.name() else { break };
        let mut path = prefixes[usize::from(op >> 6)].to_vec();
        path.append(&mut name);
        let data = [op; 3];
        let kind = match op % 5 {
            0 | 1 => tar::EntryType::Regular,
            2 => tar::EntryType::Link,
            3 => tar::EntryType::Directory,
            _ => tar::EntryType::Symlink,
        };
        let size = if kind == tar::EntryType::Regular {
            3
        } else {
            0
        };
        match (op >> 3) % 3 {
            // GNU long name (and long link for links).
            0 => {
                let mut long = path.clone();
                long.push(0);
                push(
                    &mut out,
                    &header(
                        tar::EntryType::GNULongName,
                        b"././@LongLink",
                        long.len() as u64,
                    ),
                    &long,
                );
                if kind == tar::EntryType::Link {
                    let target = input.name().unwrap_or_default();
                    let mut long = b"configs/".to_vec();
                    long.extend_from_slice(&target);
                    long.push(0);
                    push(
                        &mut out,
                        &header(
                            tar::EntryType::GNULongLink,
                            b"././@LongLink",
                            long.len() as u64,
                        ),
                        &long,
                    );
                }
            }
            // PAX path (and linkpath).
            1 => {
                let mut records = pax("path", &path);
                if kind == tar::EntryType::Link {
                    let target = input.name().unwrap_or_default();
                    records.extend_from_slice(&pax("linkpath", &target));
                }
                push(
                    &mut out,
                    &header(
                        tar::EntryType::XHeader,
                        b"PaxHeaders/x",
                        records.len() as u64,
                    ),
                    &records,
                );
            }
            // The header's own 100 bytes.
            _ => {}
        }
        push(
            &mut out,
            &header(kind, &path, size),
            &data[..usize::try_from(size).unwrap_or(0)],
        );
    }
    out.extend_from_slice(&[0; 1024]);
    out
}

fuzz_target!(|data: &[u8]| {
    let tar = layer(Input(data));
    let mut stack = LayerStack::new("configs/", BUDGET);
    // Two layers: the second sees what the first kept (whiteouts, links, replacements).
    if stack.apply(LayerFormat::Tar, &tar).is_err() || stack.apply(LayerFormat::Tar, &tar).is_err()
    {
        return;
    }
    let files = stack.into_files();
    let names: u64 = files.keys().map(|k| k.len() as u64).sum();
    let content: u64 = files.values().map(|f| f.len() as u64).sum();
    assert!(names <= MAX_NAME_BYTES, "{names} bytes of names");
    assert!(
        content + NAME_COPIES * names <= BUDGET,
        "{content} + names {names}"
    );
    for key in files.keys() {
        assert!(
            key.len() as u64 <= MAX_PATH_BYTES,
            "a {}-byte path was kept",
            key.len()
        );
        assert!(
            !key.is_empty() && key.split('/').all(|part| !matches!(part, "" | "." | "..")),
            "unclean key {key:?}"
        );
    }
});
