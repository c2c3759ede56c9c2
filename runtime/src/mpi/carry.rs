//! Runs of several steps on a rank (`--steps N`, `--log-every K` under `mpirun`, issue 19):
//! the rank keeps the source pieces it read for every step ([`Held`]: read once, handed to
//! each step's run in place), and after each step but the last copies, of every state it
//! holds, the update's values into its own windows of the state ([`Held::refresh`]), from the
//! state sinks of its local plan (`sinks::state_sinks`). The compiler runs an update's tasks
//! on every node that reads the state (`codegen::replicate`), so those values were computed on
//! the rank itself: no state moves between steps. The one-element sinks of a logged step are
//! logged by the rank that writes them ([`log_step`]) and rank 0 prints every rank's lines in
//! the single process's order ([`merge_logs`]).

use super::local::Local;
use super::sinks::Out;
use crate::exec::{Borrowed, Input, SinkView, SourceBuf};
use crate::plan::Plan;
use crate::steps::scalar_text;
use crate::tensor::checked_numel;
use std::fmt::Write as _;
use std::sync::Mutex;

/// The source pieces of a rank, held for every step of the run.
pub(super) struct Held {
    bufs: Vec<SourceBuf>,
}

impl Held {
    /// Takes the pieces the rank read (one per source of its local plan).
    pub(super) fn take(slots: &[Mutex<Option<SourceBuf>>]) -> Result<Held, String> {
        let bufs = (slots.iter())
            .map(|m| m.lock().unwrap_or_else(|e| e.into_inner()).take())
            .collect::<Option<Vec<_>>>()
            .ok_or("internal error: a source piece was handed to a run before the steps")?;
        Ok(Held { bufs })
    }

    /// Each step's inputs: the held pieces, read in place.
    pub(super) fn inputs<'a>(&mut self, local: &'a Plan) -> Vec<Input<'a>> {
        (local.sources.iter().zip(&mut self.bufs))
            .map(|(s, b)| {
                // SAFETY: the piece holds the source's bytes for the whole run, aligned for
                // any element, and is written only between steps (`refresh`, while no run
                // reads it).
                Input::Borrowed(unsafe { Borrowed::new(b.bytes_mut().as_ptr(), s.dtype, &s.shape) })
            })
            .collect()
    }

    /// Copies, after a step, every state's update (the rank's state sinks among `views`) into
    /// the rank's windows of the state.
    pub(super) fn refresh(
        &mut self,
        plan: &Plan,
        local: &Local,
        views: &[SinkView],
    ) -> Result<(), String> {
        for (v, out) in views.iter().zip(&local.outs) {
            let Out::State { sink, first } = *out else {
                continue;
            };
            let Some(k) = plan.state_of_sink(sink) else {
                return Err(format!(
                    "internal error: sink {sink} is not a state's update"
                ));
            };
            let mut data = Vec::new();
            (v.write_data(&mut data)).map_err(|e| format!("state @{}: {e}", v.name))?;
            self.put(local, k, first, &data, v.dtype.size_bytes())?;
        }
        Ok(())
    }

    /// Writes `data` (elements of `elem` bytes) over source `k`'s elements from `first` on, in
    /// the pieces that hold them.
    fn put(
        &mut self,
        local: &Local,
        k: usize,
        first: u64,
        data: &[u8],
        elem: usize,
    ) -> Result<(), String> {
        let (lo, hi) = (first as usize, first as usize + data.len() / elem);
        let mut done = 0;
        for (r, buf) in local.reads.iter().zip(&mut self.bufs) {
            let (a, b) = (r.piece.0.max(lo), (r.piece.0 + r.piece.1).min(hi));
            if r.source != k || a >= b {
                continue;
            }
            let dst = &mut buf.bytes_mut()[(a - r.piece.0) * elem..(b - r.piece.0) * elem];
            dst.copy_from_slice(&data[(a - lo) * elem..(b - lo) * elem]);
            done += b - a;
        }
        match done == hi - lo {
            true => Ok(()),
            false => Err(format!(
                "internal error: elements {lo}..{hi} of a state are outside the rank's pieces"
            )),
        }
    }
}

/// Appends this rank's log entries of step `s` (one per one-element sink it writes, updates
/// excepted) to `log`, as `STEP\tSINK\tLINE` lines for [`merge_logs`].
pub(super) fn log_step(
    plan: &Plan,
    local: &Local,
    s: u64,
    views: &[SinkView],
    log: &mut String,
) -> Result<(), String> {
    for (v, out) in views.iter().zip(&local.outs) {
        let k = match *out {
            Out::Whole(k) | Out::Run { sink: k, .. } => k,
            Out::State { .. } => continue,
        };
        let sink = &plan.sinks[k];
        if checked_numel(&sink.shape) != Some(1) || plan.state_of_sink(k).is_some() {
            continue;
        }
        if let Some(text) = scalar_text(&v.to_tensor()?) {
            let _ = writeln!(log, "{s}\t{k}\t{s},{},{text}", sink.name);
        }
    }
    Ok(())
}

/// Every rank's log entries (`logs`) as the single process prints them: by step, then in the
/// graph's sink order.
pub(super) fn merge_logs(logs: &[&str]) -> String {
    let mut lines: Vec<(u64, usize, &str)> = (logs.iter())
        .flat_map(|l| l.lines())
        .filter_map(|l| {
            let mut f = l.splitn(3, '\t');
            let s = f.next()?.parse().ok()?;
            let k = f.next()?.parse().ok()?;
            Some((s, k, f.next()?))
        })
        .collect();
    lines.sort_by_key(|&(s, k, _)| (s, k));
    lines.iter().map(|l| format!("{}\n", l.2)).collect()
}
