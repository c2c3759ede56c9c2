//! Placement and transfers of a distributed (`--mpi`) schedule.
//!
//! Every task runs on one node: an apply on its `on N` (node 0 when unplaced), a gather or
//! generator on the node of its first consumer (node 0 when only a sink reads it). A generator
//! task (`iota`, `rand`: its elements are functions of their global coordinates) also runs on
//! every other node that reads it (node 0 for a sink), each computing only the rows it reads,
//! so its output never moves: the cost model takes generators as available everywhere. Then, for
//! every region a task reads (its footprint, from the same projections the cost model
//! charges) and every earlier writer of that buffer on another node, the intersection of the
//! two regions becomes one [`Transfer`] of exactly those elements. Sources live on node 0 and
//! sinks are gathered there, as the cost model assumes. A node that reads the same remote
//! bytes for two tasks receives them twice, again as the model counts. The union of what a
//! node's tasks read of each source is its input window: what its rank reads from the file.
//! A split reduction whose partials combine through a collective (`collective.rs`) has no
//! transfer into its combines nor of its result to the nodes that read it.
//! The tasks that write a state's update also run on every node that reads the state
//! (`replicate.rs`): such a replica reads its inputs on its node like any task, and its node
//! never receives what it writes.

use super::replicate;
use super::schedule::{KernelSpec, Region, Schedule};
use tapc_runtime::mpi::dist::{
    intersect, normalize, region_runs, subtract, Dist, Replica, Runs, Transfer, Window,
};
use tapc_runtime::plan::Init;

fn runs_of(r: &Region) -> Runs {
    region_runs(r.offset, &r.shape, &r.strides)
}

/// A task (`None`: a source) that wrote `runs` of a buffer on a node.
type Writer = (Option<u32>, u32, Runs);

/// The distributed section for `s` (its tasks' nodes and the transfers between them).
pub fn plan(s: &Schedule) -> Dist {
    let tasks = &s.plan.tasks;
    let n = tasks.len();
    let mut dependents = vec![Vec::new(); n];
    for (i, t) in tasks.iter().enumerate() {
        for &d in &t.deps {
            dependents[d as usize].push(i);
        }
    }
    let mut nodes: Vec<Option<u32>> = s.access.iter().map(|a| a.node).collect();
    for i in (0..n).rev() {
        if nodes[i].is_none() {
            nodes[i] = Some(dependents[i].iter().find_map(|&d| nodes[d]).unwrap_or(0));
        }
    }
    let nodes: Vec<u32> = nodes.into_iter().map(|x| x.unwrap_or(0)).collect();
    let updates = replicate::update_replicas(s, &nodes);
    let on = |i: usize| replicate::task_nodes(&nodes, &updates, i);
    let mut replicas = replicas(s, &nodes, &dependents, &updates);
    let reductions = super::collective::reductions(s, &nodes, &updates);
    // (buffer, node, runs): what an update's replica writes there, which that node never
    // receives.
    let replica_writes: Vec<(u32, u32, Runs)> = (updates.iter())
        .flat_map(|p| {
            let writes = &s.access[p.task as usize].writes;
            writes.iter().map(|w| (w.buffer, p.node, runs_of(w)))
        })
        .collect();
    // A group's combines read nothing remote, and its result reaches its targets by the
    // collective: (the last combine, a target node).
    let combined: Vec<u32> = reductions.iter().flat_map(|g| g.combines.clone()).collect();
    let delivered: Vec<(u32, u32)> = (reductions.iter())
        .flat_map(|g| g.targets.iter().map(move |&n| (g.last(), n)))
        .collect();
    // (buffer, node): a generator's output computed on that node, which never receives it.
    let mut generated: Vec<(u32, u32)> = Vec::new();
    let mut writers: Vec<Vec<Writer>> = vec![Vec::new(); s.plan.buffers.len()];
    for (b, buf) in s.plan.buffers.iter().enumerate() {
        if let Init::Source(k) = buf.init {
            let src = &s.plan.sources[k as usize];
            let numel: usize = src.shape.iter().product();
            if numel > 0 {
                writers[b].push((None, 0, vec![(0, numel as i64)]));
            }
        }
    }
    let mut transfers = Vec::new();
    let mut fetch = |r: &Region,
                     to: u32,
                     before: Option<u32>,
                     writers: &[Vec<Writer>],
                     generated: &[(u32, u32)]| {
        if generated.contains(&(r.buffer, to)) {
            return;
        }
        let mut wanted = runs_of(r);
        for (_, _, runs) in (replica_writes.iter()).filter(|w| (w.0, w.1) == (r.buffer, to)) {
            wanted = subtract(&wanted, runs);
        }
        for (w, from, wruns) in &writers[r.buffer as usize] {
            if *from == to || w.is_some_and(|w| delivered.contains(&(w, to))) {
                continue;
            }
            let runs = intersect(&wanted, wruns);
            if !runs.is_empty() {
                transfers.push(Transfer {
                    value: r.value.clone(),
                    from: *from,
                    to,
                    buffer: r.buffer,
                    elem: r.elem,
                    runs,
                    after: *w,
                    before,
                });
            }
        }
    };
    for (i, a) in s.access.iter().enumerate() {
        let reads = if combined.contains(&(i as u32)) {
            &[][..]
        } else {
            &a.reads[..]
        };
        for (r, n) in reads
            .iter()
            .flat_map(|r| on(i).into_iter().map(move |n| (r, n)))
        {
            fetch(r, n, Some(i as u32), &writers, &generated);
        }
        for w in &a.writes {
            writers[w.buffer as usize].push((Some(i as u32), nodes[i], runs_of(w)));
            let copies = replicas.iter().filter(|p| p.task == i as u32);
            generated.extend(copies.map(|p| (w.buffer, p.node)));
        }
    }
    for r in &s.sink_reads {
        fetch(r, 0, None, &writers, &generated);
    }
    let reads = (s.access.iter().enumerate()).flat_map(|(i, a)| {
        on(i)
            .into_iter()
            .flat_map(move |n| a.reads.iter().map(move |r| (n, r)))
    });
    let state_reads = replicate::state_reads(s, &nodes, &updates);
    let sinks = s.sink_reads.iter().map(|r| (0, r));
    let windows = windows(s, reads.chain(sinks).chain(state_reads));
    let broadcasts = broadcasts(&transfers);
    replicas.extend(updates);
    Dist {
        nodes,
        transfers,
        windows,
        broadcasts,
        replicas,
        reductions,
    }
}

/// Every node that reads a generator task's output (node 0 when a sink reads it), with the
/// rows it reads (the hull of its reads along the first dimension; all rows unless the output
/// is a row-major value the task computes whole): each computes those rows itself.
fn replicas(
    s: &Schedule,
    nodes: &[u32],
    dependents: &[Vec<usize>],
    updates: &[Replica],
) -> Vec<Replica> {
    let mut out = Vec::new();
    for (i, t) in s.plan.tasks.iter().enumerate() {
        let generator = matches!(s.kernels[t.kernel as usize], KernelSpec::Generate { .. });
        let (Some(w), true) = (s.access[i].writes.first(), generator) else {
            continue;
        };
        let rows = t.range.first().copied().unwrap_or((0, 0));
        let per_row: Option<i64> =
            row_major(w, t.args.len(), rows).then(|| w.shape[1..].iter().product());
        let reads = (dependents[i].iter())
            .flat_map(|&d| {
                let on = replicate::task_nodes(nodes, updates, d);
                (on.into_iter()).flat_map(move |n| s.access[d].reads.iter().map(move |r| (n, r)))
            })
            .chain(s.sink_reads.iter().map(|r| (0, r)))
            .filter(|(_, r)| r.buffer == w.buffer);
        let at = out.len();
        for (node, r) in reads {
            let runs = runs_of(r);
            let (Some(first), Some(last)) = (runs.first(), runs.last()) else {
                continue;
            };
            let span = match per_row {
                Some(n) if n > 0 => {
                    let (a, b) = (first.0 - w.offset, last.0 + last.1 - w.offset);
                    (a / n, (b + n - 1) / n)
                }
                _ => rows,
            };
            match out[at..].iter_mut().find(|p: &&mut Replica| p.node == node) {
                Some(p) => p.rows = (p.rows.0.min(span.0), p.rows.1.max(span.1)),
                None => out.push(Replica {
                    task: i as u32,
                    node,
                    rows: span,
                }),
            }
        }
    }
    out
}

/// Whether `w`, the one argument of a task over `rows` of its first dimension, is a row-major
/// value that the task writes whole (so rows of its range are runs of its buffer).
fn row_major(w: &Region, args: usize, rows: (i64, i64)) -> bool {
    let mut stride = 1;
    let mut dense = true;
    for (&n, &st) in w.shape.iter().zip(&w.strides).rev() {
        dense &= n == 1 || st == stride;
        stride *= n;
    }
    args == 1 && dense && !w.shape.is_empty() && rows == (0, w.shape[0])
}

/// Receivers from which a broadcast beats point-to-point sends: a binomial tree reaches `n`
/// receivers in ⌈log2(n + 1)⌉ rounds, fewer than the root's `n` sequential sends when n ≥ 3;
/// each receiver still gets the data once, so the bytes moved (and the model's count) are
/// the same.
const BROADCAST_RECEIVERS: usize = 3;

/// Groups the transfers of the same data (writer, buffer, runs) to distinct task nodes into
/// broadcasts when they reach [`BROADCAST_RECEIVERS`] nodes. A second transfer of the same
/// data to a node already in the group stays point to point, so bytes moved are unchanged.
fn broadcasts(transfers: &[Transfer]) -> Vec<Vec<u32>> {
    let mut groups: Vec<Vec<u32>> = Vec::new();
    for (k, t) in transfers.iter().enumerate() {
        if t.before.is_none() {
            continue;
        }
        let same = |g: &&mut Vec<u32>| {
            let f = &transfers[g[0] as usize];
            (f.from, f.buffer, f.after, &f.runs) == (t.from, t.buffer, t.after, &t.runs)
        };
        match groups.iter_mut().find(same) {
            Some(g) if g.iter().all(|&j| transfers[j as usize].to != t.to) => g.push(k as u32),
            Some(_) => {}
            None => groups.push(vec![k as u32]),
        }
    }
    groups.retain(|g| g.len() >= BROADCAST_RECEIVERS);
    groups
}

/// Per node and source buffer, the union of the regions of it that `reads` (node, region) read.
fn windows<'a>(s: &Schedule, reads: impl Iterator<Item = (u32, &'a Region)>) -> Vec<Window> {
    let mut windows: Vec<Window> = Vec::new();
    for (node, r) in reads {
        if !matches!(s.plan.buffers[r.buffer as usize].init, Init::Source(_)) {
            continue;
        }
        let runs = runs_of(r);
        match windows
            .iter_mut()
            .find(|w| w.node == node && w.buffer == r.buffer)
        {
            Some(w) => w.runs.extend(runs),
            None => windows.push(Window {
                node,
                buffer: r.buffer,
                elem: r.elem,
                runs,
            }),
        }
    }
    for w in &mut windows {
        w.runs = normalize(std::mem::take(&mut w.runs));
    }
    windows.retain(|w| !w.runs.is_empty());
    windows
}
