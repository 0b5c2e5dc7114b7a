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
use std::sync::{Arc, Mutex, OnceLock, mpsc};
use std::thread;

use super::assemble::{Assembler, Scope};
use super::decode::{AliasBudget, Window, decode_document, decode_piece, is_json, read_in_windows};
use super::source::{self, CatalogFile};

/// Catalogs that cost less than this (in [`cost`] units: bytes of YAML) are decoded on one
/// core. Measured on the real catalogs in the test data: 64 KiB of YAML takes about 1 ms on a
/// core and a second thread about 0.1 ms, so from there on two cores pay (the real YAML
/// catalogs of 0.1-0.85 MiB went from 44-83 to 64-112 MiB/s); a 100 KiB JSON catalog, which
/// takes 0.25 ms, got slower on two, hence JSON's lower [`cost`].
pub(crate) const MIN_PARALLEL_COST: u64 = 64 << 10;

/// Documents that cost at least this are cut into one piece per worker.
pub(crate) const MIN_CUT_COST: u64 = 64 << 10;

/// A byte of JSON costs about an eighth of a byte of YAML to decode (measured per core: about
/// 450 against 50 MiB/s).
const JSON_BYTES_PER_COST: u64 = 8;

/// What decoding `bytes` bytes costs, in bytes of YAML: what shares and thresholds weigh.
pub(crate) fn cost(bytes: u64, json: bool) -> u64 {
    if json {
        bytes / JSON_BYTES_PER_COST
    } else {
        bytes
    }
}

/// At most this many workers, whatever the machine has.
const MAX_WORKERS: usize = 8;

/// Workers to use: the cores this process may run on, at most [`MAX_WORKERS`], asked once per
/// process. The standard library asks the kernel at each call (it opens and reads the cgroup
/// files), and a package read back at its first view asked every time: 5.8% of a manager's CPU
/// in a restart at 1,000 POs (`docs/benchmarks.md`, session 25). A CPU limit changed in place
/// is seen at the next start.
pub(crate) fn workers() -> usize {
    static WORKERS: OnceLock<usize> = OnceLock::new();
    *WORKERS.get_or_init(|| {
        thread::available_parallelism()
            .map_or(1, NonZeroUsize::get)
            .min(MAX_WORKERS)
    })
}

/// One piece of a catalog, in file order.
pub(crate) enum Unit<'a> {
    /// A file not read yet: its worker reads it, so a split folder is never in memory whole.
    /// Its cost is judged from its size and name (`.json` or not) before it is read.
    File { file: &'a CatalogFile, cost: u64 },
    /// A range of a document already in memory.
    Piece {
        label: &'a str,
        bytes: &'a [u8],
        range: Range<usize>,
        json: bool,
    },
}

impl Unit<'_> {
    /// A file of the catalog, to be read by its worker.
    pub(crate) fn file(file: &CatalogFile) -> Unit<'_> {
        let len = std::fs::metadata(&file.path).map_or(0, |m| m.len());
        let json = file
            .path
            .extension()
            .is_some_and(|ext| ext.eq_ignore_ascii_case("json"));
        Unit::File {
            file,
            cost: cost(len, json),
        }
    }

    pub(crate) fn cost(&self) -> u64 {
        match self {
            Unit::File { cost, .. } => *cost,
            Unit::Piece { range, json, .. } => cost(range.len() as u64, *json),
        }
    }
}

/// What decoding in-memory documents costs (see [`cost`]).
pub(crate) fn documents_cost(docs: &[(&str, &[u8])]) -> u64 {
    docs.iter()
        .map(|(_, bytes)| cost(bytes.len() as u64, is_json(bytes)))
        .sum()
}

/// The pieces of in-memory documents: each one that costs at least `min_cut` (normally
/// [`MIN_CUT_COST`]) cut in `workers`.
pub(crate) fn pieces<'a>(
    docs: &[(&'a str, &'a [u8])],
    workers: usize,
    min_cut: u64,
) -> Vec<Unit<'a>> {
    let mut units = Vec::new();
    for &(label, bytes) in docs {
        let json = is_json(bytes);
        let ranges = if cost(bytes.len() as u64, json) >= min_cut {
            super::decode::cut(bytes, workers)
        } else {
            std::iter::once(0..bytes.len()).collect()
        };
        units.extend(ranges.into_iter().map(|range| Unit::Piece {
            label,
            bytes,
            range,
            json,
        }));
    }
    units
}

/// Contiguous shares of `units` of about equal cost, at most `workers` of them.
fn partition(units: &[Unit<'_>], workers: usize) -> Vec<Range<usize>> {
    let total: u64 = units.iter().map(Unit::cost).sum();
    let workers = workers.max(1) as u64;
    let mut shares = Vec::new();
    let mut start = 0;
    let mut done = 0u64;
    for (i, unit) in units.iter().enumerate() {
        done += unit.cost();
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
                ..
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
