//! Decoding a large catalog on several cores.
//!
//! The catalog is cut into pieces in file order — the files of a split folder, or ranges of one
//! large document ([`decode::cut`](super::decode::cut)) — and each worker decodes a contiguous
//! share into an [`Assembler`] of its own; the assemblers are then joined in file order, so
//! [`Assembler::finish`] sees the blobs in the order a single pass would.
//!
//! The result is the sequential one or nothing. When a piece fails to decode (a real error, or a
//! JSON cut that fell inside a pretty-printed blob), when a package is declared in two shares,
//! or when a YAML document used aliases (the catalog-wide alias budget must be charged in file
//! order), [`decode`] returns `None` and the caller decodes the catalog again on one core, which
//! reports exactly what it always reported. Errors cost a second pass; valid catalogs do not.

use std::num::NonZeroUsize;
use std::ops::Range;
use std::thread;

use super::assemble::{Assembler, Scope};
use super::decode::{AliasBudget, decode_document, decode_piece};
use super::source::{self, CatalogFile};

/// Catalogs smaller than this are decoded on one core: the real catalogs in the test data are
/// all under 1 MiB and take a few milliseconds.
pub(crate) const MIN_PARALLEL_BYTES: u64 = 4 << 20;

/// Documents at least this large are cut into one piece per worker.
pub(crate) const MIN_CUT_BYTES: usize = 1 << 20;

/// At most this many workers, whatever the machine has.
const MAX_WORKERS: usize = 8;

/// Workers to use: the cores this process may run on, at most [`MAX_WORKERS`].
pub(crate) fn workers() -> usize {
    thread::available_parallelism()
        .map_or(1, NonZeroUsize::get)
        .min(MAX_WORKERS)
}

/// One piece of a catalog, in file order.
pub(crate) enum Unit<'a> {
    /// A file not read yet: its worker reads it, so a split folder is never in memory whole.
    File { file: &'a CatalogFile, len: u64 },
    /// A range of a document already in memory.
    Piece {
        label: &'a str,
        bytes: &'a [u8],
        range: Range<usize>,
    },
}

impl Unit<'_> {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Unit::File { len, .. } => *len,
            Unit::Piece { range, .. } => range.len() as u64,
        }
    }
}

/// The pieces of in-memory documents: each one of at least `min_cut` bytes (normally
/// [`MIN_CUT_BYTES`]) cut in `workers`.
pub(crate) fn pieces<'a>(
    docs: &[(&'a str, &'a [u8])],
    workers: usize,
    min_cut: usize,
) -> Vec<Unit<'a>> {
    let mut units = Vec::new();
    for &(label, bytes) in docs {
        let ranges = if bytes.len() >= min_cut {
            super::decode::cut(bytes, workers)
        } else {
            std::iter::once(0..bytes.len()).collect()
        };
        units.extend(ranges.into_iter().map(|range| Unit::Piece {
            label,
            bytes,
            range,
        }));
    }
    units
}

/// Contiguous shares of `units` of about equal bytes, at most `workers` of them.
fn partition(units: &[Unit<'_>], workers: usize) -> Vec<Range<usize>> {
    let total: u64 = units.iter().map(Unit::len).sum();
    let workers = workers.max(1) as u64;
    let mut shares = Vec::new();
    let mut start = 0;
    let mut done = 0u64;
    for (i, unit) in units.iter().enumerate() {
        done += unit.len();
        let next = shares.len() as u64 + 1;
        if next < workers && done >= total / workers * next {
            shares.push(start..i + 1);
            start = i + 1;
        }
    }
    if start < units.len() {
        shares.push(start..units.len());
    }
    shares
}

/// Decodes `units` on up to `workers` threads into one assembler, in file order; `None` when
/// the catalog must be decoded sequentially instead (see the module documentation), including
/// when there is only one share.
pub(crate) fn decode(
    units: &[Unit<'_>],
    workers: usize,
    scope: Option<&Scope>,
) -> Option<Assembler> {
    let shares = partition(units, workers);
    if shares.len() < 2 {
        return None;
    }
    let parts: Vec<Option<Assembler>> = thread::scope(|threads| {
        let handles: Vec<_> = shares
            .iter()
            .map(|share| {
                let share = units.get(share.clone()).unwrap_or_default();
                threads.spawn(move || decode_share(share, scope))
            })
            .collect();
        handles
            .into_iter()
            .map(|handle| handle.join().ok().flatten())
            .collect()
    });
    let mut parts = parts.into_iter();
    let mut joined = parts.next().flatten()?;
    for part in parts {
        if !joined.absorb(part?) {
            return None;
        }
    }
    Some(joined)
}

/// One worker's share, or `None` when it failed or charged the alias budget.
fn decode_share(units: &[Unit<'_>], scope: Option<&Scope>) -> Option<Assembler> {
    let mut assembler = scope.map_or_else(Assembler::default, |s| Assembler::scoped(s.clone()));
    let mut aliases = AliasBudget::default();
    for unit in units {
        let decoded = match unit {
            Unit::File { file, .. } => source::read(file).and_then(|bytes| {
                decode_document(&file.label, &bytes, &mut assembler, &mut aliases)
            }),
            Unit::Piece {
                label,
                bytes,
                range,
            } => decode_piece(label, bytes, range.clone(), &mut assembler, &mut aliases),
        };
        if decoded.is_err() {
            return None;
        }
    }
    (aliases == AliasBudget::default()).then_some(assembler)
}
