//! Folds across multi-operand views: a slice that selects within one part of a concat reads
//! that part directly, and a concat of adjacent slices of one value is one slice.

use crate::ir::graph::{Graph, NodeKind, SliceDim, ValueId, View};
use crate::ir::TensorType;

pub enum Folded {
    /// The view is this existing value.
    Value(ValueId),
    /// The view is this (simpler) view.
    View(View),
}

/// Tries the folds on `v`, whose operands are values of the graph being built, `g`.
pub fn fold(v: &View, g: &Graph, out: &TensorType) -> Option<Folded> {
    match v {
        View::Slice { arg, dims } => slice_of_concat(*arg, dims, g),
        View::Concat { args, axis } => concat_of_slices(args, *axis, g, out),
        _ => None,
    }
}

/// The concat operand that `v` is exactly, when `v` is a slice of a concat selecting one whole
/// operand (`slice (concat %a, %b axis 0) [2:4, ..]` with `%a` two rows: `%b`). `fuse` reads
/// through such slices with this same fold, so a consumer shard meets its producer shard.
pub fn whole_part(g: &Graph, v: ValueId) -> Option<ValueId> {
    let NodeKind::View(View::Slice { arg, dims }) = def(g, v) else {
        return None;
    };
    match slice_of_concat(*arg, dims, g)? {
        Folded::Value(part) => Some(part),
        Folded::View(_) => None,
    }
}

fn def(g: &Graph, v: ValueId) -> &NodeKind {
    &g.nodes[g.value(v).node].kind
}

fn slice_of_concat(arg: ValueId, dims: &[SliceDim], g: &Graph) -> Option<Folded> {
    let NodeKind::View(View::Concat { args, axis }) = def(g, arg) else {
        return None;
    };
    let d = dims[*axis];
    let (start, step) = (d.start?, d.step?);
    let stop = d.stop.unwrap_or(-1);
    let count = if step > 0 {
        (stop - start + step - 1) / step
    } else {
        (start - stop - step - 1) / -step
    };
    if count <= 0 {
        return None;
    }
    let last = start + (count - 1) * step;
    let (lo, hi) = (start.min(last), start.max(last));
    let mut base = 0;
    for &a in args {
        let n = g.ty(a)?.shape[*axis];
        if lo >= base && hi < base + n {
            let mut nd = dims.to_vec();
            nd[*axis] = SliceDim::from_count(start - base, step, count);
            let full = nd
                .iter()
                .zip(&g.ty(a)?.shape)
                .all(|(x, &n)| x.start == Some(0) && x.step == Some(1) && x.stop == Some(n));
            return Some(if full {
                Folded::Value(a)
            } else {
                Folded::View(View::Slice { arg: a, dims: nd })
            });
        }
        base += n;
    }
    None
}

fn concat_of_slices(args: &[ValueId], axis: usize, g: &Graph, out: &TensorType) -> Option<Folded> {
    let mut src = None;
    let mut dims_acc: Option<Vec<SliceDim>> = None;
    let mut next_start = None;
    for &a in args {
        let NodeKind::View(View::Slice { arg, dims }) = def(g, a) else {
            return None;
        };
        if *src.get_or_insert(*arg) != *arg {
            return None;
        }
        let d = dims[axis];
        if d.step != Some(1) {
            return None;
        }
        if let Some(ns) = next_start {
            if d.start != Some(ns) {
                return None;
            }
        }
        next_start = d.stop;
        match &mut dims_acc {
            None => dims_acc = Some(dims.clone()),
            Some(acc) => {
                let same_elsewhere = acc
                    .iter()
                    .zip(dims)
                    .enumerate()
                    .all(|(k, (x, y))| k == axis || x == y);
                if !same_elsewhere {
                    return None;
                }
                acc[axis].stop = d.stop;
            }
        }
    }
    let dims = dims_acc?;
    let _ = out;
    Some(Folded::View(View::Slice { arg: src?, dims }))
}
