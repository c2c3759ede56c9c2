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

use super::dist::{intersect, normalize, region_runs, subtract, Place, Runs};
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
    /// A run of update sink `sink` from its element `first` (C order) on, which the rank
    /// copies into its windows of the state between steps ([`state_sinks`]); not written.
    State { sink: usize, first: u64 },
}

impl Out {
    /// The sink and first element of a run, and whether it is a state's.
    fn run(&self) -> Option<(usize, u64, bool)> {
        match *self {
            Out::Whole(_) => None,
            Out::Run { sink, first } => Some((sink, first, false)),
            Out::State { sink, first } => Some((sink, first, true)),
        }
    }
}

/// Per sink of `plan`, whether the ranks write it directly: all of them, unless
/// `--gather-sinks` (`gather`).
pub(super) fn direct(plan: &Plan, gather: bool) -> Vec<bool> {
    vec![!gather; plan.sinks.len()]
}

/// The buffer elements of sink `s` (a direct one) that rank `at` writes.
fn owned(plan: &Plan, at: Place, s: &Sink) -> Runs {
    let shape: Vec<i64> = s.dims().iter().map(|&d| d as i64).collect();
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
        let base = Sink {
            deps: deps(&s.deps),
            ..s.clone()
        };
        add_runs(&mut sinks, &mut outs, &base, |file, off, len, step| {
            let segs = segments(off, len, step, &mine).into_iter();
            segs.map(|(k0, m)| {
                let out = Out::Run {
                    sink: k,
                    first: file as u64 + k0 as u64,
                };
                (out, (off + k0 * step, m, step))
            })
            .collect()
        });
    }
    (sinks, outs)
}

/// Walks sink `base`'s view in C order and adds the runs `pick` selects of each chunk of it
/// (given its first element in C order, its buffer offset, length and step): each an [`Out`]
/// and its `(buffer offset, length, step)`.
fn add_runs(
    sinks: &mut Vec<Sink>,
    outs: &mut Vec<Out>,
    base: &Sink,
    mut pick: impl FnMut(i64, i64, usize, i64) -> Vec<(Out, (i64, i64, i64))>,
) {
    let n = checked_numel(&base.shape).unwrap_or(0);
    let mut file = 0i64;
    runs(
        n,
        base.dims(),
        base.view.offset,
        &base.view.strides,
        |off, len, step| {
            for (out, run) in pick(file, off, len, step) {
                push_run(sinks, outs, base, out, run);
            }
            file += len as i64;
        },
    );
}

/// Adds the run `out` (of sink `base`, from a file element on) of `m` buffer elements from
/// `at` by `step`, extending the last run when it continues it in the buffer and the file.
fn push_run(
    sinks: &mut Vec<Sink>,
    outs: &mut Vec<Out>,
    base: &Sink,
    out: Out,
    (at, m, step): (i64, i64, i64),
) {
    let (last, prev) = (sinks.last_mut(), outs.last().and_then(Out::run));
    if let (Some(last), Some((sink, f, state)), Some((k, first, s))) = (last, prev, out.run()) {
        let n = last.shape[0] as i64;
        let (o, st) = (last.view.offset, last.view.strides[0]);
        let next = o + n * step == at && f + n as u64 == first;
        if (sink, state) == (k, s) && st == step && next {
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
        blocks: None,
        ..base.clone()
    });
    outs.push(out);
}

/// The sinks of a rank's local plan through which it reads, after each step, the update of
/// every state it holds: per state `i` of `plan.states`, the C-order element runs `needs[i]`
/// of the state that the rank holds (its windows), as 1-D runs of the update's view in its
/// buffer; `deps` maps the update's dependencies to local tasks.
pub(super) fn state_sinks(
    plan: &Plan,
    needs: &[Runs],
    deps: &dyn Fn(&[u32]) -> Vec<u32>,
) -> (Vec<Sink>, Vec<Out>) {
    let (mut sinks, mut outs) = (Vec::new(), Vec::new());
    for (&(_, j), need) in plan.states.iter().zip(needs) {
        let (j, s) = (j as usize, &plan.sinks[j as usize]);
        if need.is_empty() {
            continue;
        }
        let base = Sink {
            deps: deps(&s.deps),
            ..s.clone()
        };
        add_runs(&mut sinks, &mut outs, &base, |file, off, len, step| {
            let hits = intersect(&[(file, len as i64)], need).into_iter();
            hits.map(|(a, m)| {
                let out = Out::State {
                    sink: j,
                    first: a as u64,
                };
                (out, (off + (a - file) * step, m, step))
            })
            .collect()
        });
    }
    (sinks, outs)
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
