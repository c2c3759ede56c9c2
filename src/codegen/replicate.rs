//! State under `--mpi` (issue 19): the tasks that compute a state's update also run on every
//! node that reads the state, so that between steps (`--steps N`) each rank replaces its own
//! windows of the state in place, from values it computed itself, and no state moves.
//!
//! A state `@w` is a source (its buffer) and an update sink (a region of the update's buffer).
//! Its *readers* are the nodes of the tasks that read the source buffer (their replicas
//! included), and node 0 when a sink reads it. Every task that writes part of the update's
//! region gets a whole [`Replica`] on each reader node other than its own. A replica reads what
//! its task reads: a source from the node's own window, a generator computed there, a split
//! reduction's result delivered there by the collective (an allreduce when every partial's node
//! reads it whole: the data-parallel gradient), anything else by the transfers `distribute`
//! plans as for any task (the plan's bytes). Replicating an update can make its node read
//! another state (a momentum), whose update is then replicated in turn, until nothing changes.
//! An update that no task writes (a source's or a constant's region) is read from each reader
//! node's own input window ([`state_reads`]).

use super::schedule::{Region, Schedule};
use tapc_runtime::mpi::dist::{intersect, region_runs, Replica};

fn runs_of(r: &Region) -> Vec<(i64, i64)> {
    region_runs(r.offset, &r.shape, &r.strides)
}

/// The nodes that run task `t`: its own and its replicas'.
pub fn task_nodes(nodes: &[u32], replicas: &[Replica], t: usize) -> Vec<u32> {
    let mut on = vec![nodes[t]];
    for r in replicas.iter().filter(|r| r.task as usize == t) {
        if !on.contains(&r.node) {
            on.push(r.node);
        }
    }
    on
}

/// The nodes that read buffer `buffer`: the nodes of its reading tasks (with `replicas`), and
/// node 0 when a sink reads it.
fn reader_nodes(s: &Schedule, nodes: &[u32], replicas: &[Replica], buffer: u32) -> Vec<u32> {
    let mut out: Vec<u32> = Vec::new();
    for (t, a) in s.access.iter().enumerate() {
        if a.reads.iter().any(|r| r.buffer == buffer) {
            out.extend(task_nodes(nodes, replicas, t));
        }
    }
    if s.sink_reads.iter().any(|r| r.buffer == buffer) {
        out.push(0);
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The tasks that write part of region `r`.
fn writers(s: &Schedule, r: &Region) -> Vec<usize> {
    let want = runs_of(r);
    (s.access.iter().enumerate())
        .filter(|(_, a)| {
            (a.writes.iter())
                .any(|w| w.buffer == r.buffer && !intersect(&runs_of(w), &want).is_empty())
        })
        .map(|(t, _)| t)
        .collect()
}

/// Per state of `s` (in plan order), the nodes that read it, given `replicas`.
pub fn state_readers(s: &Schedule, nodes: &[u32], replicas: &[Replica]) -> Vec<Vec<u32>> {
    (s.plan.states.iter())
        .map(|&(k, _)| {
            let buffer = s.plan.sources[k as usize].buffer;
            reader_nodes(s, nodes, replicas, buffer)
        })
        .collect()
}

/// The replicas of the tasks that write the states' updates (see the module docs).
pub fn update_replicas(s: &Schedule, nodes: &[u32]) -> Vec<Replica> {
    let mut out: Vec<Replica> = Vec::new();
    loop {
        let before = out.len();
        let readers = state_readers(s, nodes, &out);
        for (&(_, j), on) in s.plan.states.iter().zip(&readers) {
            for t in writers(s, &s.sink_reads[j as usize]) {
                let rows = s.plan.tasks[t].range.first().copied().unwrap_or((0, 0));
                for &n in on {
                    let known = task_nodes(nodes, &out, t).contains(&n);
                    if !known {
                        out.push(Replica {
                            task: t as u32,
                            node: n,
                            rows,
                        });
                    }
                }
            }
        }
        if out.len() == before {
            return out;
        }
    }
}

/// What each state's reader nodes read of its update besides their tasks' reads: the update's
/// region, so that an update no task writes (a source's region) is in their input windows.
pub fn state_reads<'a>(
    s: &'a Schedule,
    nodes: &[u32],
    replicas: &[Replica],
) -> Vec<(u32, &'a Region)> {
    let readers = state_readers(s, nodes, replicas);
    (s.plan.states.iter().zip(readers))
        .flat_map(|(&(_, j), on)| on.into_iter().map(move |n| (n, &s.sink_reads[j as usize])))
        .collect()
}
