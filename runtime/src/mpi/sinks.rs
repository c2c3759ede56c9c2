//! Sharded outputs (issue 17): each rank writes its own windows of every sink straight into the
//! final `.npy` files, staged and committed all or nothing across the job.
//!
//! A sink is written *directly* when its view is C-contiguous in its buffer (file element `i`
//! is buffer element `offset + i`) and no sink of the same buffer is strided, unless
//! `--gather-sinks` is given; the others are gathered to rank 0 (the planned sink transfers)
//! and written whole there, as before. The elements of a direct sink a rank owns are those its
//! nodes wrote: on a rank other than 0, the runs of the sink transfers from its nodes; on rank
//! 0 the rest of the view (what its nodes wrote, sources and constants). Each owned run is a
//! sink of the rank's local plan (a 1-D view of the run, which keeps its piece alive until the
//! writes) tagged with its place in the file ([`Out`]).
//!
//! The protocol ([`stage`], [`write_runs`], `run.rs`): rank 0 stages every direct sink in the
//! output's staging directory (the [`Outputs`] transaction), writes its header and gives it its
//! full size, and broadcasts the staged paths; after the run every rank `pwrite`s its runs at
//! their offsets and syncs; an all-reduce of success is the agreement; rank 0 then commits
//! through the ordinary [`Outputs::commit`]. A failing rank aborts the job (`MPI_Abort`): rank
//! 0, terminated by `mpirun` with SIGTERM, removes its staging directory (the signal handler of
//! [`crate::signals`]); a staging directory left by a SIGKILLed rank 0 is swept by the next run
//! writing there ([`crate::paths::sweep_stale`]).

use super::dist::{intersect, normalize, Place, Runs};
use crate::exec::SinkView;
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

/// Whether the elements of a view of `shape` with `strides` are its C order, one after another.
fn contiguous(shape: &[usize], strides: &[i64]) -> bool {
    let mut want = 1i64;
    for (&n, &st) in shape.iter().zip(strides).rev() {
        if n > 1 && st != want {
            return false;
        }
        want = want.saturating_mul(n as i64);
    }
    true
}

/// Per sink of `plan`, whether the ranks write it directly (see the module docs).
pub(super) fn direct(plan: &Plan, gather: bool) -> Vec<bool> {
    let flat = |s: &Sink| contiguous(&s.shape, &s.view.strides) && s.view.offset >= 0;
    let strided: Vec<u32> = (plan.sinks.iter())
        .filter(|s| !flat(s))
        .map(|s| s.view.buffer)
        .collect();
    (plan.sinks.iter())
        .map(|s| !gather && flat(s) && !strided.contains(&s.view.buffer))
        .collect()
}

/// The buffer elements of sink `s` (a direct one) that rank `at` writes.
fn owned(plan: &Plan, at: Place, s: &Sink) -> Runs {
    let n = checked_numel(&s.shape).unwrap_or(0) as i64;
    let view = [(s.view.offset, n)];
    let remote = |mine: &dyn Fn(u32) -> bool| -> Runs {
        let runs = (plan.dist.transfers.iter())
            .filter(|t| t.before.is_none() && t.buffer == s.view.buffer && mine(t.from))
            .flat_map(|t| t.runs.iter().copied())
            .collect();
        intersect(&normalize(runs), &view)
    };
    if n == 0 {
        return vec![];
    }
    if at.rank != 0 {
        return remote(&|node| at.rank_of(node) == at.rank);
    }
    complement(&view, &remote(&|node| at.rank_of(node) != 0))
}

/// The runs of `whole` (one run) not in `runs` (sorted, disjoint).
fn complement(whole: &[(i64, i64)], runs: &[(i64, i64)]) -> Runs {
    let (mut at, end) = (whole[0].0, whole[0].0 + whole[0].1);
    let mut out = Vec::new();
    for &(a, n) in runs {
        if a > at {
            out.push((at, a - at));
        }
        at = at.max(a + n);
    }
    if end > at {
        out.push((at, end - at));
    }
    out
}

/// The sinks of rank `at`'s local plan: on rank 0 the gathered sinks whole, then on every rank
/// a 1-D sink per run it owns of each direct sink; `deps` maps a sink's dependencies to local
/// tasks (`late`: the receives of gathered data, for the whole sinks).
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
        for (a, n) in owned(plan, at, s) {
            sinks.push(Sink {
                shape: vec![n as usize],
                view: View {
                    buffer: s.view.buffer,
                    offset: a,
                    strides: vec![1],
                },
                deps: deps(&s.deps),
                ..s.clone()
            });
            let first = (a - s.view.offset) as u64;
            outs.push(Out::Run { sink: k, first });
        }
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
