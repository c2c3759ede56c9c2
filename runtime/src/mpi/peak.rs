//! A rank's planned peak memory (issue 17), computed from the plan alone: the one figure a rank
//! checks against `--max-memory` before it reads any input, that `--time` prints as its
//! planned peak, and that the cost pass reports (and `cost{max_memory=...}` checks) per node.
//!
//! It is the peak of the rank's local plan ([`super::local`]) in plan order
//! ([`crate::memory::peak`]): the pieces of every buffer it touches, each allocated when its
//! first task is ready and freed after its last use, the source pieces (read straight into
//! their buffers, which live from the start until their last use) included; plus its message
//! buffers (every receive is posted before the run and every packed send is kept until it
//! ends, so all of them count; a source window sent in place is no message, its source piece
//! is held until the release task at the end of the run). It needs no MPI: the local plan is
//! built as the rank builds it.

use super::dist::Place;
use super::local::{local_plan, Flags, Local};
use crate::memory;
use crate::plan::Plan;

/// What one rank holds at its peak, in bytes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RankPeak {
    /// The local plan's buffers at their peak (source pieces included).
    pub buffers: u64,
    /// Of the buffers, the source pieces the rank reads (live from the start).
    pub inputs: u64,
    /// Message buffers, all held at once.
    pub messages: u64,
}

impl RankPeak {
    /// Buffers and messages: what the rank plans to hold at its peak.
    pub fn total(&self) -> u64 {
        self.buffers.saturating_add(self.messages)
    }

    /// The peak of a rank's local plan.
    pub(super) fn of(local: &Local) -> RankPeak {
        let inputs = (local.plan.sources.iter())
            .map(|s| local.plan.buffers[s.buffer as usize].bytes)
            .sum();
        RankPeak {
            buffers: memory::peak(&local.plan).0,
            inputs,
            messages: local.messages,
        }
    }
}

/// How a job runs, as far as a rank's memory depends on it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunFlags {
    /// `--inputs-on-root`: rank 0 reads every source window and sends them.
    pub inputs_on_root: bool,
    /// `--gather-sinks`: every sink is gathered to rank 0.
    pub gather_sinks: bool,
}

/// The planned peak of every rank of a job of `ranks` ranks running `plan` (a plan with its
/// distributed section) with `flags`, in rank order.
pub fn rank_peaks(plan: &Plan, ranks: u32, flags: RunFlags) -> Vec<RankPeak> {
    // The send and receive kernels follow the program's; their indices do not change memory.
    let send_kernel = (plan.tasks.iter()).map(|t| t.kernel + 1).max().unwrap_or(0);
    (0..ranks)
        .map(|rank| {
            let at = Place { rank, size: ranks };
            let run = Flags {
                on_root: flags.inputs_on_root,
                gather: flags.gather_sinks,
                carry: false,
            };
            let local = local_plan(plan, at, send_kernel, run);
            RankPeak::of(&local)
        })
        .collect()
}
