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
//!
//! One large file is not read whole: [`decode_file_in_windows`] reads it a window at a time on
//! the calling thread while the workers decode the windows already read, so it is never in
//! memory whole and still decodes on every core.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::io::Read;
use std::num::NonZeroUsize;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::thread;

use super::assemble::{Assembler, Scope};
use super::decode::{AliasBudget, Window, decode_document, decode_piece, read_in_windows};
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

/// An empty assembler, scoped when a scope is given.
fn assembler_for(scope: Option<&Scope>) -> Assembler {
    scope.map_or_else(Assembler::default, |s| Assembler::scoped(s.clone()))
}

/// One worker's share, or `None` when it failed or charged the alias budget.
fn decode_share(units: &[Unit<'_>], scope: Option<&Scope>) -> Option<Assembler> {
    let mut assembler = assembler_for(scope);
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

/// Decodes one file read `window` bytes at a time ([`read_in_windows`]): the calling thread
/// reads, `workers` threads decode each window into an assembler of its own, and the calling
/// thread joins the assemblers in file order as they come back (so what a window left open
/// is sealed early, not held to the end). At most `workers + 1` windows are in memory besides
/// what has been decoded. `None` when a window failed or, on several workers, used YAML
/// aliases (see the module documentation): the caller decodes the whole file instead.
pub(crate) fn decode_file_in_windows(
    label: &str,
    reader: impl Read,
    window: usize,
    workers: usize,
    scope: Option<&Scope>,
) -> std::io::Result<Option<Assembler>> {
    if workers <= 1 {
        // One core: the windows are decoded as they are read, into one assembler, with one
        // alias budget (so aliases need no whole-file pass), in one buffer used again.
        let mut assembler = assembler_for(scope);
        let mut aliases = AliasBudget::default();
        let spent: Cell<Option<Vec<u8>>> = Cell::new(None);
        let mut ok = true;
        let covered = read_in_windows(
            reader,
            window,
            || spent.take(),
            |piece| {
                ok = piece.decode(label, &mut assembler, &mut aliases);
                spent.set(Some(piece.bytes));
                ok
            },
        )?;
        return Ok((ok && covered).then_some(assembler));
    }
    // A window is read while every worker decodes one: at most `workers + 1` windows are in
    // use, and their buffers come back with the workers' results to be read into again.
    let (pieces, waiting) = mpsc::sync_channel::<(usize, Window)>(0);
    // Each worker holds the queue; when the last one ends (even by a panic), `send` fails
    // instead of waiting forever.
    let waiting = Arc::new(Mutex::new(waiting));
    let (decoded, parts) = mpsc::channel::<(usize, Option<Assembler>, Vec<u8>)>();
    let failed = AtomicBool::new(false);
    let mut joiner = Joiner::default();
    let spare: RefCell<Vec<Vec<u8>>> = RefCell::new(Vec::new());
    let covered = thread::scope(|threads| {
        for _ in 0..workers {
            let decoded = decoded.clone();
            let waiting = Arc::clone(&waiting);
            let failed = &failed;
            threads.spawn(move || {
                loop {
                    let next = waiting.lock().ok().and_then(|queue| queue.recv().ok());
                    let Some((seq, window)) = next else { break };
                    let mut assembler = assembler_for(scope);
                    let mut aliases = AliasBudget::default();
                    let ok = window.decode(label, &mut assembler, &mut aliases)
                        && aliases == AliasBudget::default();
                    if !ok {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if decoded
                        .send((seq, ok.then_some(assembler), window.bytes))
                        .is_err()
                    {
                        break;
                    }
                }
            });
        }
        drop(decoded);
        drop(waiting);
        let mut seq = 0usize;
        let covered = read_in_windows(
            reader,
            window,
            || spare.borrow_mut().pop(),
            |piece| {
                for (done, part, bytes) in parts.try_iter() {
                    joiner.accept(done, part);
                    spare.borrow_mut().push(bytes);
                }
                if joiner.broken {
                    failed.store(true, Ordering::Relaxed);
                }
                let sent = !failed.load(Ordering::Relaxed) && pieces.send((seq, piece)).is_ok();
                seq += 1;
                sent
            },
        );
        drop(pieces);
        covered
    })?;
    // Every worker has ended, so every part is in the channel.
    for (done, part, _) in parts.try_iter() {
        joiner.accept(done, part);
    }
    if !covered || failed.load(Ordering::Relaxed) || joiner.broken || !joiner.pending.is_empty() {
        return Ok(None);
    }
    Ok(Some(joiner.joined.unwrap_or_else(|| assembler_for(scope))))
}

/// Joins the windows' assemblers in file order as they arrive in any order.
#[derive(Default)]
struct Joiner {
    joined: Option<Assembler>,
    /// The window to join next.
    next: usize,
    /// Windows decoded ahead of `next`.
    pending: BTreeMap<usize, Option<Assembler>>,
    /// A window failed, or two declared the same package: the file is decoded whole instead.
    broken: bool,
}

impl Joiner {
    fn accept(&mut self, seq: usize, part: Option<Assembler>) {
        if self.broken {
            return;
        }
        self.pending.insert(seq, part);
        while let Some(part) = self.pending.remove(&self.next) {
            self.next += 1;
            let Some(part) = part else {
                self.broken = true;
                return;
            };
            match self.joined.as_mut() {
                None => self.joined = Some(part),
                Some(joined) => {
                    if !joined.absorb(part) {
                        self.broken = true;
                        return;
                    }
                }
            }
        }
    }
}

/// `map` over `items` on up to `workers` threads, each taking a contiguous run of about equal
/// `weight`; the results come back in the items' order. One worker (or one item) maps inline.
pub(crate) fn map_in_order<T: Send, R: Send>(
    items: Vec<T>,
    workers: usize,
    weight: impl Fn(&T) -> usize,
    map: impl Fn(T) -> R + Sync,
) -> Vec<R> {
    if workers <= 1 || items.len() < 2 {
        return items.into_iter().map(map).collect();
    }
    let total: usize = items.iter().map(&weight).sum();
    let per_worker = total.div_ceil(workers).max(1);
    let mut runs: Vec<Vec<T>> = Vec::with_capacity(workers);
    let mut run = Vec::new();
    let mut run_weight = 0;
    for item in items {
        run_weight += weight(&item);
        run.push(item);
        if run_weight >= per_worker && runs.len() + 1 < workers {
            runs.push(std::mem::take(&mut run));
            run_weight = 0;
        }
    }
    let last = run;
    let map = &map;
    thread::scope(|threads| {
        let handles: Vec<_> = runs
            .into_iter()
            .map(|run| threads.spawn(move || run.into_iter().map(map).collect::<Vec<R>>()))
            .collect();
        // The calling thread maps the last run rather than wait idle.
        let last: Vec<R> = last.into_iter().map(map).collect();
        let mut out = Vec::new();
        for handle in handles {
            match handle.join() {
                Ok(mapped) => out.extend(mapped),
                // A panic in `map` is the caller's, as it would be on one thread.
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        out.extend(last);
        out
    })
}
