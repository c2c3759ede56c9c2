//! The per-node peak memory of a plan the cost pass carries out (issue 17), as the MPI runtime
//! plans it: the pass builds the program's schedule of the rewritten graph (the native
//! backend's [`schedule::build`] and [`distribute::plan`], exactly what `tapc FILE --mpi`
//! embeds), and each node's peak is [`tapc_runtime::mpi::peak::rank_peaks`] of it: the very
//! function a rank calls before it reads any input, and whose figure `--time` prints as the
//! rank's planned peak (node `n` runs on rank `n` when there are as many ranks as nodes). So
//! the figure the report gives, and that `max_memory` checks, equals the runtime's planned
//! per-rank peak by construction: freed pieces, message buffers and generators included.
//!
//! The search's memory objective stays the model's estimate (`model::eval`: every window a
//! node holds, never freed; no messages; generators free), which is what ranks the frontier;
//! it is exact only in what it counts and can be above or below the plan's figure.

use super::machine::{Machine, Placement};
use crate::codegen::{distribute, schedule, target};
use crate::ir::Module;
use crate::verify::GraphFacts;
use std::fmt::Write;
use tapc_runtime::mpi::peak::{rank_peaks, RankPeak, RunFlags};

/// The run flags that match the machine's sources and sinks for graph `gi` of `m`: sources
/// all on node 0 is `--inputs-on-root`, all on shared storage the default; sinks gathered on
/// node 0 is `--gather-sinks`, distributed the default. Any other setting has no run of its
/// own (the runtime reads sources from shared storage or on rank 0, and gathers on rank 0).
pub fn run_flags(machine: &Machine, sources: &[String]) -> Result<RunFlags, String> {
    let places: Vec<Placement> = sources.iter().map(|s| machine.source(s)).collect();
    let inputs_on_root = if places.iter().all(|p| *p == Placement::Shared) {
        false
    } else if places.iter().all(|p| *p == Placement::Node(0)) {
        true
    } else {
        return Err("the runtime runs sources all on node 0 (`--inputs-on-root`) or all on shared storage, not this machine's mix".into());
    };
    if !machine.distributed_sinks && machine.sink_node != 0 {
        return Err(format!(
            "the runtime gathers sinks on node 0, not on node {}",
            machine.sink_node
        ));
    }
    Ok(RunFlags {
        inputs_on_root,
        gather_sinks: !machine.distributed_sinks,
    })
}

/// Each node's planned peak for graph `gi` of `m` (verified, with its `facts`) on the
/// machine's nodes, run with the flags that match the machine ([`run_flags`]).
pub fn node_peaks(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
    machine: &Machine,
) -> Result<Vec<RankPeak>, String> {
    let lanes = target::host()?.lanes;
    let mut sched =
        schedule::build_for(m, &m.graphs[gi], facts, lanes, true).map_err(|d| d.message)?;
    sched.plan.dist = distribute::plan(&sched);
    let sources: Vec<String> = sched.plan.sources.iter().map(|s| s.name.clone()).collect();
    let flags = run_flags(machine, &sources)?;
    Ok(rank_peaks(&sched.plan, machine.len() as u32, flags))
}

/// The largest node peak.
pub fn max_peak(peaks: &[RankPeak]) -> u64 {
    peaks.iter().map(RankPeak::total).max().unwrap_or(0)
}

/// The report's lines: `  per-node peak (the runtime's plan): N B; node 0 N B (buffers B, of
/// which inputs I, messages M), ...`, or why there is none.
pub fn describe(peaks: &Result<Vec<RankPeak>, String>) -> String {
    let mut s = String::new();
    match peaks {
        Ok(v) => {
            let _ = writeln!(
                s,
                "  per-node peak memory (the runtime's plan): {} B",
                max_peak(v)
            );
            for (n, p) in v.iter().enumerate() {
                let _ = writeln!(
                    s,
                    "    node {n}: {} B (buffers {}, of which inputs {}, messages {})",
                    p.total(),
                    p.buffers,
                    p.inputs,
                    p.messages
                );
            }
        }
        Err(e) => {
            let _ = writeln!(s, "  per-node peak memory (the runtime's plan): none: {e}");
        }
    }
    s
}
