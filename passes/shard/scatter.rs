//! Sharding a `scatter` (docs/teg.md §9.1): its lines along the axis are independent, so it
//! splits along a dimension other than its axis into `parts` scatters of slices of the base,
//! indices and updates, whose results are concatenated back (a `canonicalize` then reads the
//! slices of sharded producers directly). With `dim=auto` the dimension is the first other than
//! the axis with at least `parts` elements (else the largest); `dim=N` names one by number; a
//! scatter whose other dimensions all have one element, or a named variable, stays whole. An
//! out-of-range index of a shard is reported in the shard's slice of the indices (`%idx.1`).
//! Part `k` is placed like an apply's shard (`on N`, round-robin over `nodes`), so under `--mpi`
//! the parts run on their ranks.

use super::{split, Config};
use crate::diag::Diagnostic;
use crate::ir::graph::{Node, NodeKind, Scatter, SliceDim, ValueId, View};
use crate::passes::rewrite::Builder;

/// The dimension to split scatter `s` of type `shape` along, when there is one.
fn choose(s: &Scatter, shape: &[i64], cfg: &Config) -> Option<usize> {
    let others = (0..shape.len()).filter(|&d| d != s.axis && shape[d] >= 2);
    let d = match &cfg.dim {
        Some(n) => n
            .parse::<usize>()
            .ok()
            .filter(|&d| others.clone().any(|o| o == d))?,
        None => others
            .clone()
            .find(|&d| shape[d] >= cfg.parts)
            .or_else(|| others.max_by_key(|&d| shape[d]))?,
    };
    (cfg.parts >= 2 && cfg.grid.is_none()).then_some(d)
}

/// Rebuilds scatter `node` as shards when it can be split; returns whether it was.
pub(super) fn shard_scatter(
    b: &mut Builder,
    node: &Node,
    s: &Scatter,
    cfg: &Config,
    next_node: &mut u32,
    report: &mut String,
) -> Result<bool, Diagnostic> {
    let r = node.results[0];
    let ty = b.old_ty(r)?;
    let Some(d) = choose(s, &ty.shape, cfg) else {
        return Ok(false);
    };
    let name = b.old.value(r).name.clone();
    let mut parts = Vec::new();
    let mut nodes = Vec::new();
    for (k, &(lo, hi)) in split(ty.shape[d], cfg.parts).iter().enumerate() {
        // Each slice is named after its operand (`%idx.1`), as its errors name it.
        let sliced = s.operands().map(|v| {
            let at = format!("{}.{k}", b.old.value(v).name);
            slice(b, b.mapped(v), d, (lo, hi), &at, node)
        });
        let [base, idx, upd] = sliced;
        let mut t = ty.clone();
        t.shape[d] = hi - lo;
        let placement = cfg.place(k, next_node);
        nodes.extend(placement.map(|n| n.to_string()));
        let kind = NodeKind::Scatter(Scatter {
            base,
            idx,
            upd,
            placement,
            ..s.clone()
        });
        parts.push(b.emit(kind, &format!("{name}.{k}"), t, node.span));
    }
    let whole = NodeKind::View(View::Concat {
        args: parts.clone(),
        axis: d,
    });
    let v = b.emit(whole, &name, ty, node.span);
    b.map[r.index()] = Some(v);
    report.push_str(&format!(
        "%{name}: scatter split along dimension {d} into {} on nodes [{}]\n",
        parts.len(),
        nodes.join(", ")
    ));
    Ok(true)
}

/// `slice v` to `[lo, hi)` along `d` (whole along the other dimensions).
fn slice(
    b: &mut Builder,
    v: ValueId,
    d: usize,
    (lo, hi): (i64, i64),
    name: &str,
    node: &Node,
) -> ValueId {
    let mut t = b.new.ty(v).cloned().expect("the rebuilt graph is typed");
    let dims = (0..t.shape.len())
        .map(|k| {
            let (a, z) = if k == d { (lo, hi) } else { (0, t.shape[k]) };
            SliceDim {
                start: Some(a),
                stop: Some(z),
                step: Some(1),
            }
        })
        .collect();
    t.shape[d] = hi - lo;
    b.emit(
        NodeKind::View(View::Slice { arg: v, dims }),
        name,
        t,
        node.span,
    )
}
