//! Grids of blocks for distributed sinks (issue 17): a `concat` tree that assembles the
//! equal blocks of a 2-D grid of apply outputs (what `shard{parts=RxC,dim=i*j}` makes of a
//! matmul: rows of column blocks) and is read only by sinks. In an `--mpi` plan the scheduler
//! lays each block out dense in the concat's buffer (block `(bi, bj)` at `(bi·C + bj)·h·w`),
//! so the rank computing a block holds exactly that block (a column block placed in a
//! row-major buffer would hold the hull of its rows), and the sink reads the buffer through
//! the blocked view `[R, h, C, w]`, whose C order is the sink's.

use crate::ir::graph::{NodeKind, View};
use crate::ir::{Graph, ValueId};
use std::collections::HashMap;

/// The grid of node `i` of `g`, a concat whose result only (non-update) sinks read: its leaf
/// values by rows (`R` rows of `C` blocks, `C > 1`, all of one 2-D shape, each an apply
/// placed into its region: `placed` maps a value to the concat and operand it is placed in).
pub fn grid(
    g: &Graph,
    placed: &HashMap<ValueId, (usize, usize)>,
    i: usize,
) -> Option<Vec<Vec<ValueId>>> {
    let n = &g.nodes[i];
    let NodeKind::View(View::Concat { axis, .. }) = &n.kind else {
        return None;
    };
    let r = n.results[0];
    if placed.contains_key(&r) || !read_by_sinks_only(g, r) || g.ty(r)?.rank() != 2 {
        return None;
    }
    let rows = match axis {
        1 => vec![leaves(g, placed, i)?],
        0 => (n.kind.operands().iter().enumerate())
            .map(|(k, &a)| {
                let j = g.value(a).node;
                let inner = matches!(
                    &g.nodes[j].kind,
                    NodeKind::View(View::Concat { axis: 1, .. })
                );
                (inner && placed.get(&a) == Some(&(i, k))).then(|| leaves(g, placed, j))?
            })
            .collect::<Option<Vec<_>>>()?,
        _ => return None,
    };
    let first = g.ty(rows[0][0])?.shape.clone();
    let mut all: Vec<ValueId> = rows.iter().flatten().copied().collect();
    let same = (all.iter()).all(|&v| g.ty(v).is_some_and(|t| t.shape == first));
    let cols = rows[0].len();
    all.sort_unstable();
    all.dedup();
    let distinct = all.len() == rows.len() * cols;
    (same && distinct && cols > 1 && rows.iter().all(|r| r.len() == cols)).then_some(rows)
}

/// The operands of concat node `j`, if every one is an apply's output placed into its region.
fn leaves(g: &Graph, placed: &HashMap<ValueId, (usize, usize)>, j: usize) -> Option<Vec<ValueId>> {
    (g.nodes[j].kind.operands().iter().enumerate())
        .map(|(k, &a)| {
            let apply = matches!(g.nodes[g.value(a).node].kind, NodeKind::Apply(_));
            (apply && placed.get(&a) == Some(&(j, k))).then_some(a)
        })
        .collect()
}

/// Whether every use of `v` is a sink that is not a state's update.
fn read_by_sinks_only(g: &Graph, v: ValueId) -> bool {
    let mut used = false;
    for n in &g.nodes {
        if n.kind.operands().contains(&v) {
            used = true;
            if !matches!(n.kind, NodeKind::Sink { update: false, .. }) {
                return false;
            }
        }
    }
    used
}

/// The blocked view of an `R × C` grid of `h × w` blocks: its shape and strides.
pub fn blocked_view(r: i64, c: i64, h: i64, w: i64) -> (Vec<i64>, Vec<i64>) {
    (vec![r, h, c, w], vec![c * h * w, w, h * w, 1])
}
