//! Piecewise buffers (issue 17): a rank allocates, of every buffer of the plan, only the byte
//! windows it touches, each as a local buffer of its own.
//!
//! The windows of a buffer on a rank are the byte extents of its local tasks' arguments
//! (`offset + lo .. offset + hi`, which include the send and receive tasks' runs), of the
//! sinks it writes and of the source runs it reads from files. Each maximal interval of their
//! union (starts rounded down to 64 bytes, so a piece keeps the original buffer's alignment
//! modulo a cache line) becomes a *piece*: a buffer of its own, freed after its own last use.
//! Every argument and sink view is rebased into its piece (the kernel ABI passes a pointer to
//! element 0 of each view and the strides are compiled in, so moving the offset is enough; an
//! interval never splits one argument's extent). A buffer the rank does not touch has no
//! piece. A row split of a row-major tensor so holds exactly its rows plus halos; a column
//! split holds the hull of its rows' runs (every row from its first to its last), the limit
//! until kernels take per-window strides.
//!
//! A source piece is a source of its own in the local plan, a 1-D tensor of the piece's
//! elements, of which the rank reads only its runs ([`Read`]); a constant piece keeps its
//! bytes.

use super::dist::{intersect, Runs};
use crate::plan::{extent, Buffer, Init, Plan, Source};

/// What a rank reads of one source's file into one piece.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Read {
    /// The source's index in the whole plan.
    pub source: usize,
    /// The piece: its first element and its length, in elements of the source.
    pub piece: (usize, usize),
    /// The element runs read (inside the piece); the rest stays zero.
    pub runs: Runs,
}

/// Pieces start at multiples of this many bytes (a multiple of every element size).
const ALIGN: i64 = 64;

/// One piece: bytes `start..end` of buffer `buffer` of the unsplit plan.
#[derive(Clone, Copy, Debug)]
struct Piece {
    buffer: u32,
    start: i64,
    end: i64,
}

/// `plan` (this rank's local plan, with whole buffers) with every buffer replaced by its
/// pieces, and what to read into each source piece. `reads` are, per local source of `plan`
/// (in order), the global source index and the element runs read (`None`: all of them).
pub(crate) fn split(mut plan: Plan, reads: &[(usize, Option<Runs>)]) -> (Plan, Vec<Read>) {
    let spans = touched(&plan, reads);
    let mut pieces: Vec<Vec<Piece>> = Vec::with_capacity(spans.len());
    let mut first = Vec::with_capacity(spans.len());
    let mut count = 0u32;
    for (b, s) in spans.into_iter().enumerate() {
        first.push(count);
        let merged = merge(b as u32, s);
        count += merged.len() as u32;
        pieces.push(merged);
    }
    let find = |b: u32, lo: i64, hi: i64| -> (u32, i64) {
        let ps = &pieces[b as usize];
        let i = ps.partition_point(|p| p.start <= lo).saturating_sub(1);
        debug_assert!(ps.get(i).is_some_and(|p| p.start <= lo && hi <= p.end));
        (
            first[b as usize] + i as u32,
            ps.get(i).map_or(0, |p| p.start),
        )
    };
    for a in plan.tasks.iter_mut().flat_map(|t| t.args.iter_mut()) {
        let (id, start) = find(a.buffer, a.offset + a.lo, a.offset + a.hi);
        (a.buffer, a.offset) = (id, a.offset - start);
    }
    for s in &mut plan.sinks {
        let elem = s.dtype.size_bytes() as i64;
        let (lo, hi) = sink_bytes(s);
        let (id, start) = find(s.view.buffer, lo, hi);
        (s.view.buffer, s.view.offset) = (id, s.view.offset - start / elem);
    }
    let (buffers, sources, reads) = rebuild(&plan, &pieces, reads);
    plan.buffers = buffers;
    plan.sources = sources;
    (plan, reads)
}

/// The byte extent of a sink's view in its buffer.
fn sink_bytes(s: &crate::plan::Sink) -> (i64, i64) {
    let elem = s.dtype.size_bytes();
    let shape: Vec<i64> = s.dims().iter().map(|&d| d as i64).collect();
    let (lo, hi) = extent(&shape, &s.view.strides, elem).unwrap_or((0, 0));
    let at = s.view.offset * elem as i64;
    (at + lo, at + hi)
}

/// Per buffer of `plan`, the byte intervals this rank touches.
fn touched(plan: &Plan, reads: &[(usize, Option<Runs>)]) -> Vec<Vec<(i64, i64)>> {
    let mut spans = vec![Vec::new(); plan.buffers.len()];
    for a in plan.tasks.iter().flat_map(|t| &t.args) {
        spans[a.buffer as usize].push((a.offset + a.lo, a.offset + a.hi));
    }
    for s in &plan.sinks {
        spans[s.view.buffer as usize].push(sink_bytes(s));
    }
    for (k, (_, runs)) in reads.iter().enumerate() {
        let s = &plan.sources[k];
        let elem = s.dtype.size_bytes() as i64;
        let b = s.buffer as usize;
        match runs {
            Some(runs) => spans[b].extend(runs.iter().map(|&(a, n)| (a * elem, (a + n) * elem))),
            None => spans[b].push((0, plan.buffers[b].bytes as i64)),
        }
    }
    spans
}

/// The maximal intervals of the union of `spans` of buffer `b`, starts rounded down to
/// [`ALIGN`].
fn merge(b: u32, mut spans: Vec<(i64, i64)>) -> Vec<Piece> {
    for s in &mut spans {
        s.0 -= s.0.rem_euclid(ALIGN);
    }
    spans.sort_unstable();
    let mut out: Vec<Piece> = Vec::new();
    for (lo, hi) in spans {
        match out.last_mut() {
            Some(p) if lo <= p.end => p.end = p.end.max(hi),
            _ => out.push(Piece {
                buffer: b,
                start: lo,
                end: hi.max(lo),
            }),
        }
    }
    out
}

/// The pieces as buffers (in order), the local sources (one per source piece) and what to read
/// into each.
fn rebuild(
    plan: &Plan,
    pieces: &[Vec<Piece>],
    reads: &[(usize, Option<Runs>)],
) -> (Vec<Buffer>, Vec<Source>, Vec<Read>) {
    let (mut buffers, mut sources, mut out) = (Vec::new(), Vec::new(), Vec::new());
    for p in pieces.iter().flatten() {
        let bytes = (p.end - p.start) as u64;
        let init = match &plan.buffers[p.buffer as usize].init {
            Init::Scratch => Init::Scratch,
            Init::Const(c) => {
                let (lo, hi) = (p.start as usize, p.end as usize);
                Init::Const(c[lo.min(c.len())..hi.min(c.len())].to_vec())
            }
            Init::Source(k) => {
                let (k, src) = (*k as usize, &plan.sources[*k as usize]);
                let elem = src.dtype.size_bytes();
                let piece = (p.start as usize / elem, bytes as usize / elem);
                let whole = [(
                    0i64,
                    crate::tensor::checked_numel(&src.shape).unwrap_or(0) as i64,
                )];
                let runs = reads[k].1.as_deref().unwrap_or(&whole);
                out.push(Read {
                    source: reads[k].0,
                    piece,
                    runs: intersect(runs, &[(piece.0 as i64, piece.1 as i64)]),
                });
                sources.push(Source {
                    shape: vec![piece.1],
                    buffer: buffers.len() as u32,
                    ..src.clone()
                });
                Init::Source(sources.len() as u32 - 1)
            }
        };
        buffers.push(Buffer { bytes, init });
    }
    (buffers, sources, out)
}
