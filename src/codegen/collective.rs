//! Split reductions of a distributed schedule that combine through one MPI collective
//! (issue 17): the reduction groups of the plan (`tapc_runtime::mpi::group`).
//!
//! The shard pass turns `y = reduce[k](...)` split over nodes into partial results and a left
//! fold of *combine* applies (`@tapc.sum.f32(acc, p)`, ...). A combine is an apply of an op
//! the shard pass made (`@tapc.…`) whose kernel is one statement `y[..i] = a[..i] OP b[..i]`
//! (`+`, `*`, `max`, `min`) over two inputs of the output's type. A tree of combines of one monoid, each inner one read
//! only by the next, whose leaves are partial results written whole by one task each, becomes
//! a group when:
//! - its leaves are on at least two nodes, and the nodes it delivers the result to hold a
//!   leaf (every rank of the collective contributes): the one node that reads the result
//!   (node 0 for a sink); or, when exactly the leaves' nodes read it, each whole, all of them
//!   (an allreduce); or, when only tasks on leaves' nodes read it, each node a part disjoint
//!   from the others' and together the whole result, those nodes with their parts (a
//!   reduce-scatter rooted at the last combine's node: in any order of the parts, as each
//!   rank packs its partials in the order of the ranks' parts); else the last combine's own
//!   node, which sends the other readers their parts as before (what the cost model plans:
//!   the combine on its sink node);
//! - the leaves and the result have one shape and one set of strides (their runs correspond
//!   element by element);
//! - the dtype has an MPI datatype: f16, bf16 (and bool) keep the point-to-point transfers
//!   and combine tasks (widening them to f32 for the collective is not done).
//!
//! `distribute` then plans no transfer into a combine and none of the result to its readers:
//! the collective delivers it (a reduce to the one reader's node, an allreduce when several
//! nodes read it whole, a reduce-scatter when they read parts).

use super::replicate::task_nodes;
use super::schedule::{KernelSpec, Region, Schedule};
use crate::ir::instance::{CExpr, CKind, CStmt, Src, Target};
use crate::ir::kernel::{BinOp, Func};
use crate::ir::DType;
use tapc_runtime::mpi::dist::{
    intersect, normalize, region_runs, Leaf, ReduceOp, Reduction, Replica, Runs,
};

/// The monoid of a combine kernel (see the module docs), or `None`.
fn combine_op(k: &KernelSpec) -> Option<ReduceOp> {
    let KernelSpec::Apply { inst, .. } = k else {
        return None;
    };
    let same = inst.inputs.len() == 2
        && inst.outputs.len() == 1
        && inst.inputs.iter().all(|t| *t == inst.outputs[0])
        && inst.temps.is_empty()
        && inst.vars.len() == inst.parallel;
    let [stmt] = inst.stmts.as_deref()? else {
        return None;
    };
    if !same || stmt.target != Target::Output(0) {
        return None;
    }
    let (op, a, b): (_, &CExpr, &CExpr) = match &stmt.value.kind {
        CKind::Binary(BinOp::Add, a, b) => (ReduceOp::Sum, a, b),
        CKind::Binary(BinOp::Mul, a, b) => (ReduceOp::Prod, a, b),
        CKind::Call(Func::Max, args) if args.len() == 2 => (ReduceOp::Max, &args[0], &args[1]),
        CKind::Call(Func::Min, args) if args.len() == 2 => (ReduceOp::Min, &args[0], &args[1]),
        _ => return None,
    };
    (identity_load(stmt, &a.kind, 0) && identity_load(stmt, &b.kind, 1)).then_some(op)
}

/// Whether `e` loads input `k` at the statement's own coordinates.
fn identity_load(stmt: &CStmt, e: &CKind, k: usize) -> bool {
    let CKind::Load { src, index, .. } = e else {
        return false;
    };
    *src == Src::Input(k)
        && index.len() == stmt.vars.len()
        && (index.iter().zip(&stmt.vars)).all(|(a, &v)| a.constant == 0 && a.terms == [(v, 1)])
}

/// Whether two regions are the same elements in the same layout.
fn same_region(a: &Region, b: &Region) -> bool {
    (a.buffer, a.offset, &a.shape, &a.strides) == (b.buffer, b.offset, &b.shape, &b.strides)
}

/// Each read of task `t`'s one output by a task or a sink (`None`): the reader, its node
/// (node 0 for a sink) and the runs it reads of that output.
fn readers(
    s: &Schedule,
    nodes: &[u32],
    updates: &[Replica],
    t: usize,
) -> Vec<(Option<usize>, u32, Runs)> {
    let Some(w) = s.access[t].writes.first() else {
        return vec![];
    };
    let wr = region_runs(w.offset, &w.shape, &w.strides);
    let read = |r: &Region| {
        let runs = intersect(&region_runs(r.offset, &r.shape, &r.strides), &wr);
        (r.buffer == w.buffer && !runs.is_empty()).then_some(runs)
    };
    let tasks = (s.access.iter().enumerate())
        .filter(|(i, _)| *i != t)
        .flat_map(|(i, a)| {
            let on = task_nodes(nodes, updates, i);
            let reads = a.reads.iter().filter_map(read);
            reads.flat_map(move |x| on.clone().into_iter().map(move |n| (Some(i), n, x.clone())))
        });
    let sinks = s.sink_reads.iter().filter_map(read).map(|x| (None, 0, x));
    tasks.chain(sinks).collect()
}

/// The task that writes region `r` whole (its only output), if any.
fn writer(s: &Schedule, r: &Region) -> Option<usize> {
    (s.access.iter()).position(|a| a.writes.len() == 1 && same_region(&a.writes[0], r))
}

/// The reduction groups of `s` whose tasks run on `nodes` (and the state updates' replicas
/// `updates`, `replicate.rs`, which read on their own nodes).
pub fn reductions(s: &Schedule, nodes: &[u32], updates: &[Replica]) -> Vec<Reduction> {
    let kernel = |t: usize| &s.kernels[s.plan.tasks[t].kernel as usize];
    // Only the shard pass's own combines: a user's `a + b` on two nodes stays an add (an
    // MPI reduction would reassociate a user's chain, and the cost model plans it as an add).
    let shard_made = |t: usize| s.plan.tasks[t].name.starts_with("apply @tapc.");
    let ops: Vec<Option<ReduceOp>> = (0..s.plan.tasks.len())
        .map(|t| combine_op(kernel(t)).filter(|_| shard_made(t)))
        .collect();
    // A combine read only by one combine of its monoid is an inner one of that tree.
    let inner = |t: usize| match readers(s, nodes, updates, t)[..] {
        [(Some(c), ..)] => ops[c].is_some() && ops[c] == ops[t],
        _ => false,
    };
    let mut out = Vec::new();
    for t in 0..ops.len() {
        if ops[t].is_none() || inner(t) {
            continue;
        }
        if let Some(g) = group(s, (nodes, updates), t, &ops, &inner) {
            out.push(g);
        }
    }
    out
}

/// The group whose last combine is `last`, if it qualifies (see the module docs).
fn group(
    s: &Schedule,
    (nodes, updates): (&[u32], &[Replica]),
    last: usize,
    ops: &[Option<ReduceOp>],
    inner: &dyn Fn(usize) -> bool,
) -> Option<Reduction> {
    let out = s.access[last].writes.first()?;
    let (mut combines, mut leaves, mut todo) = (vec![], vec![], vec![last]);
    while let Some(c) = todo.pop() {
        combines.push(c as u32);
        for r in &s.access[c].reads {
            let w = writer(s, r)?;
            if ops[w] == ops[last] && inner(w) {
                todo.push(w);
            } else if r.shape == out.shape && r.strides == out.strides {
                leaves.push(Leaf {
                    task: w as u32,
                    buffer: r.buffer,
                    runs: region_runs(r.offset, &r.shape, &r.strides),
                });
            } else {
                return None;
            }
        }
    }
    let dtype = dtype_of(s, last)?;
    if matches!(dtype, DType::F16 | DType::BF16 | DType::Bool) {
        return None;
    }
    let leaf_nodes = sorted(leaves.iter().map(|l| nodes[l.task as usize]));
    let runs = region_runs(out.offset, &out.shape, &out.strides);
    let (targets, scatter) = targets(s, (nodes, updates), last, &runs, &leaf_nodes)?;
    if leaf_nodes.len() < 2 {
        return None;
    }
    combines.sort_unstable();
    leaves.sort_by_key(|l| l.task);
    Some(Reduction {
        value: out.value.clone(),
        op: ops[last]?,
        dtype,
        leaves,
        combines,
        buffer: out.buffer,
        runs,
        targets,
        scatter,
    })
}

/// The nodes the collective delivers the result of `last` (runs `runs`) to, and their parts
/// when it scatters: the one node that reads it; every leaf node when exactly those read it,
/// each whole (an allreduce); the reader nodes with the part each reads, when only tasks read
/// it, on leaf nodes, each a part disjoint from the others' and together the whole result (a
/// reduce-scatter from the last combine's node); else the last combine's own node, from which
/// the other readers receive their parts as before (a reduce there, as the cost model combines
/// on its sink node). `None` when the root holds no partial.
fn targets(
    s: &Schedule,
    (nodes, updates): (&[u32], &[Replica]),
    last: usize,
    runs: &[(i64, i64)],
    leaf_nodes: &[u32],
) -> Option<(Vec<u32>, Vec<Runs>)> {
    let readers = readers(s, nodes, updates, last);
    let reader_nodes = sorted(readers.iter().map(|r| r.1));
    let whole = readers.iter().all(|r| r.2 == runs);
    let root = match reader_nodes[..] {
        [n] => n,
        _ if whole && reader_nodes == leaf_nodes => return Some((reader_nodes, vec![])),
        _ => nodes[last],
    };
    if !leaf_nodes.contains(&root) {
        return None;
    }
    let on_leaves = reader_nodes.iter().all(|n| leaf_nodes.contains(n));
    match parts(&readers, &reader_nodes, runs) {
        Some(parts) if on_leaves => Some((reader_nodes, parts)),
        _ => Some((vec![root], vec![])),
    }
}

/// Per reader node (`reader_nodes`), the runs it reads, when at least two nodes and only tasks
/// read the result (runs `runs`) and their parts are disjoint and together all of it.
fn parts(
    readers: &[(Option<usize>, u32, Runs)],
    reader_nodes: &[u32],
    runs: &[(i64, i64)],
) -> Option<Vec<Runs>> {
    if reader_nodes.len() < 2 || readers.iter().any(|r| r.0.is_none()) {
        return None;
    }
    let parts: Vec<Runs> = (reader_nodes.iter())
        .map(|&n| {
            let of = readers.iter().filter(|r| r.1 == n);
            normalize(of.flat_map(|r| r.2.iter().copied()).collect())
        })
        .collect();
    let count = |r: &[(i64, i64)]| r.iter().map(|x| x.1).sum::<i64>();
    let union = normalize(parts.iter().flatten().copied().collect());
    let disjoint = parts.iter().map(|p| count(p)).sum::<i64>() == count(runs);
    (disjoint && union == runs).then_some(parts)
}

fn sorted(it: impl Iterator<Item = u32>) -> Vec<u32> {
    let mut v: Vec<u32> = it.collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// The dtype of combine task `t`'s output.
fn dtype_of(s: &Schedule, t: usize) -> Option<DType> {
    match &s.kernels[s.plan.tasks[t].kernel as usize] {
        KernelSpec::Apply { inst, .. } => Some(inst.outputs[0].dtype),
        _ => None,
    }
}
