//! Sharded outputs (issue 17): each rank writes its own windows of every sink straight into the
//! final `.npy` files, staged and committed all or nothing across the job.
//!
//! Every sink is written *directly*, unless `--gather-sinks` is given (then every sink is
//! gathered to rank 0, the planned sink transfers, and written whole there, as before). The
//! elements of a sink a rank owns are those its nodes wrote: on a rank other than 0, the runs
//! of the sink transfers from its nodes; on rank 0 the rest of the view (what its nodes wrote,
//! sources and constants). Walking the sink's view in C order, each run of file elements the
//! rank owns becomes a sink of the rank's local plan: a 1-D view of its buffer elements at one
//! stride (which keeps its piece alive until the writes), tagged with its place in the file
//! ([`Out`]). A sink computed by row blocks is so one run per rank; a transposed one a run per
//! row of the file.
//!
//! The protocol ([`stage`], [`write_runs`], `run.rs`): rank 0 stages every direct sink in the
//! output's staging directory (the [`Outputs`] transaction), writes its header and gives it its
//! full size, and broadcasts the staged paths; after the run every rank `pwrite`s its runs at
//! their offsets and syncs; an all-reduce of success is the agreement; rank 0 then commits
//! through the ordinary [`Outputs::commit`]. A failing rank aborts the job (`MPI_Abort`): rank
//! 0, terminated by `mpirun` with SIGTERM, removes its staging directory (the signal handler of
//! [`crate::signals`]); a staging directory left by a SIGKILLed rank 0 is swept by the next run
//! writing there ([`crate::paths::sweep_stale`]).

use super::dist::{intersect, normalize, region_runs, Place, Runs};
use crate::exec::{runs, SinkView};
use crate::npy::header_bytes;
use crate::output::{create_staged, ensure_dir, sink_targets, Outputs};
use crate::paths::Origin;
use crate::plan::{Plan, Sink, View};
use crate::tensor::checked_numel;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

/// What a sink of a rank's local plan is.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Out {
    /// A whole sink gathered to rank 0 (global sink index).
    Whole(usize),
    /// A run of direct sink `sink` starting at element `first` of its file's data.
    Run { sink: usize, first: u64 },
}

/// Per sink of `plan`, whether the ranks write it directly: all of them, unless
/// `--gather-sinks` (`gather`).
pub(super) fn direct(plan: &Plan, gather: bool) -> Vec<bool> {
    vec![!gather; plan.sinks.len()]
}

/// The buffer elements of sink `s` (a direct one) that rank `at` writes.
fn owned(plan: &Plan, at: Place, s: &Sink) -> Runs {
    let shape: Vec<i64> = s.shape.iter().map(|&d| d as i64).collect();
    let view = region_runs(s.view.offset, &shape, &s.view.strides);
    let remote = |mine: &dyn Fn(u32) -> bool| -> Runs {
        let runs = (plan.dist.transfers.iter())
            .filter(|t| t.before.is_none() && t.buffer == s.view.buffer && mine(t.from))
            .flat_map(|t| t.runs.iter().copied())
            .collect();
        intersect(&normalize(runs), &view)
    };
    if at.rank != 0 {
        return remote(&|node| at.rank_of(node) == at.rank);
    }
    subtract(&view, &remote(&|node| at.rank_of(node) != 0))
}

/// The runs of `a` not in `b` (both sorted and disjoint).
fn subtract(a: &[(i64, i64)], b: &[(i64, i64)]) -> Runs {
    let (mut out, mut j) = (Vec::new(), 0);
    for &(start, n) in a {
        let (mut at, end) = (start, start + n);
        while j < b.len() && b[j].0 + b[j].1 <= at {
            j += 1;
        }
        let mut k = j;
        while k < b.len() && b[k].0 < end {
            if b[k].0 > at {
                out.push((at, b[k].0 - at));
            }
            at = at.max(b[k].0 + b[k].1);
            k += 1;
        }
        if end > at {
            out.push((at, end - at));
        }
    }
    out
}

/// The `(first k, count)` runs of the `k < len` whose element `off + k * step` is in `owned`.
fn segments(off: i64, len: usize, step: i64, owned: &[(i64, i64)]) -> Runs {
    if step == 1 {
        let hit = intersect(&[(off, len as i64)], owned);
        return hit.into_iter().map(|(a, n)| (a - off, n)).collect();
    }
    let has = |e: i64| {
        let i = owned.partition_point(|r| r.0 <= e);
        i > 0 && e < owned[i - 1].0 + owned[i - 1].1
    };
    let mut out: Runs = Vec::new();
    for k in (0..len as i64).filter(|&k| has(off + k * step)) {
        match out.last_mut() {
            Some((k0, n)) if *k0 + *n == k => *n += 1,
            _ => out.push((k, 1)),
        }
    }
    out
}

/// The sinks of rank `at`'s local plan: on rank 0 the gathered sinks whole, then on every rank
/// a 1-D sink per run of the file it owns of each direct sink (its elements in the buffer at
/// one stride); `deps` maps a sink's dependencies to local tasks (`late`: the receives of
/// gathered data, for the whole sinks).
pub(super) fn local_sinks(
    plan: &Plan,
    at: Place,
    direct: &[bool],
    deps: &dyn Fn(&[u32]) -> Vec<u32>,
    late: &[u32],
) -> (Vec<Sink>, Vec<Out>) {
    let (mut sinks, mut outs) = (Vec::new(), Vec::new());
    for (k, s) in plan.sinks.iter().enumerate() {
        if direct[k] || at.rank != 0 {
            continue;
        }
        let mut s = s.clone();
        s.deps = deps(&s.deps);
        s.deps.extend_from_slice(late);
        sinks.push(s);
        outs.push(Out::Whole(k));
    }
    for (k, s) in plan.sinks.iter().enumerate().filter(|(k, _)| direct[*k]) {
        let mine = owned(plan, at, s);
        if mine.is_empty() {
            continue;
        }
        let n = checked_numel(&s.shape).unwrap_or(0);
        let base = Sink {
            deps: deps(&s.deps),
            ..s.clone()
        };
        let mut file = 0u64;
        runs(
            n,
            &s.shape,
            s.view.offset,
            &s.view.strides,
            |off, len, step| {
                for (k0, m) in segments(off, len, step, &mine) {
                    let first = file + k0 as u64;
                    push_run(
                        &mut sinks,
                        &mut outs,
                        &base,
                        k,
                        (off + k0 * step, m, step),
                        first,
                    );
                }
                file += len as u64;
            },
        );
    }
    (sinks, outs)
}

/// Adds the run of `m` buffer elements from `at` by `step` of sink `k` (`base`), file elements
/// from `first` on, extending the last run when it continues it in the buffer and the file.
fn push_run(
    sinks: &mut Vec<Sink>,
    outs: &mut Vec<Out>,
    base: &Sink,
    k: usize,
    (at, m, step): (i64, i64, i64),
    first: u64,
) {
    if let (Some(last), Some(Out::Run { sink, first: f })) = (sinks.last_mut(), outs.last()) {
        let n = last.shape[0] as i64;
        let (o, st) = (last.view.offset, last.view.strides[0]);
        if *sink == k && st == step && o + n * step == at && *f + n as u64 == first {
            last.shape[0] += m as usize;
            return;
        }
    }
    sinks.push(Sink {
        shape: vec![m as usize],
        view: View {
            buffer: base.view.buffer,
            offset: at,
            strides: vec![step],
        },
        ..base.clone()
    });
    outs.push(Out::Run { sink: k, first });
}

/// On rank 0: stages every direct sink of `plan` as `out_dir/NAME.npy` in `outputs`, with its
/// header and its full size; returns the staged path per sink (`None`: gathered).
pub(super) fn stage(
    plan: &Plan,
    direct: &[bool],
    outputs: &mut Outputs,
    out_dir: &std::path::Path,
) -> Result<Vec<Option<PathBuf>>, String> {
    let targets = sink_targets(out_dir, plan.sinks.iter().map(|s| s.name.as_str()))
        .map_err(|e| e.to_string())?;
    if direct.contains(&true) {
        ensure_dir(out_dir).map_err(|e| e.to_string())?;
    }
    let mut staged = Vec::new();
    for (k, s) in plan.sinks.iter().enumerate() {
        if !direct[k] {
            staged.push(None);
            continue;
        }
        let path = (outputs.stage_as(&targets[k], Origin::Sink)).map_err(|e| e.to_string())?;
        let header = header_bytes(s.dtype, &s.shape);
        let data = checked_numel(&s.shape).unwrap_or(0) * s.dtype.size_bytes();
        let made = create_staged(&path).and_then(|mut f| {
            f.write_all(&header)?;
            f.set_len((header.len() + data) as u64)
        });
        made.map_err(|e| format!("cannot write {}: {e}", targets[k].display()))?;
        staged.push(Some(path));
    }
    Ok(staged)
}

/// A writer at a place of a file (`pwrite`).
struct At<'f> {
    file: &'f File,
    pos: u64,
}

impl Write for At<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write_at(buf, self.pos)?;
        self.pos += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Writes every run (`views`, tagged by `outs`) of this rank into the staged files (`staged`,
/// per global sink) and syncs them; returns the data bytes written.
pub(super) fn write_runs(
    plan: &Plan,
    views: &[SinkView],
    outs: &[Out],
    staged: &[Option<PathBuf>],
) -> Result<u64, String> {
    let mut files: Vec<Option<File>> = staged.iter().map(|_| None).collect();
    let mut bytes = 0u64;
    for (v, out) in views.iter().zip(outs) {
        let Out::Run { sink, first } = *out else {
            continue;
        };
        let s = &plan.sinks[sink];
        let Some(path) = &staged[sink] else {
            return Err(format!("sink @{} was not staged by rank 0", s.name));
        };
        let shown = || crate::paths::shown(path);
        if files[sink].is_none() {
            let f = OpenOptions::new().write(true).open(path);
            files[sink] = Some(f.map_err(|e| format!("cannot write {}: {e}", shown()))?);
        }
        let file = files[sink].as_ref().expect("opened above");
        let elem = s.dtype.size_bytes() as u64;
        let pos = header_bytes(s.dtype, &s.shape).len() as u64 + first * elem;
        let mut w = At { file, pos };
        v.write_data(&mut w)
            .map_err(|e| format!("cannot write {}: {e}", shown()))?;
        bytes += w.pos - pos;
    }
    for f in files.iter().flatten() {
        f.sync_all()
            .map_err(|e| format!("cannot sync a sink: {e}"))?;
    }
    Ok(bytes)
}
