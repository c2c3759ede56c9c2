//! `canonicalize`: view-chain canonicalization, `slice(concat)` and `concat(slice...)` folding,
//! common-subexpression elimination and dead-code elimination, iterated to a fixed point.
//!
//! The graph is rebuilt node by node (so SSA order is kept by construction); a chain of
//! single-operand views is rewritten from its root at the value where it ends.
//! Sources, sinks and sequence points are never removed or merged; `rand` generators merge
//! only when seed and type are equal (they then compute identical values).
//!
//! **Pinned values** (`pin %v`) stay as written and are read where they are: a pinned node is
//! never removed (DCE), never merged into an earlier identical node (CSE; later ones may merge
//! into it), never rewritten as part of a view chain (chains of views over it start at it), and
//! no fold looks through it (a slice of a pinned concat stays a slice of the concat).

pub mod chain;
pub mod peephole;

pub use chain::{canonicalize as canonicalize_chain, Op};

use crate::diag::{codes, Diagnostic};
use crate::ir::graph::*;
use crate::ir::{Module, TensorType};
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassOptions};
use crate::passes::rewrite::{dce, Builder};

pub fn create(opts: &PassOptions) -> Result<Box<dyn Pass>, String> {
    match opts.first() {
        Some((k, _)) => Err(format!("unknown option `{k}` (canonicalize takes none)")),
        None => Ok(Box::new(Canonicalize)),
    }
}

struct Canonicalize;

impl Pass for Canonicalize {
    fn name(&self) -> &'static str {
        "canonicalize"
    }
    fn run(&mut self, m: &mut Module, _: &mut PassContext) -> Result<bool, Diagnostic> {
        let mut changed = false;
        for g in &mut m.graphs {
            changed |= canonicalize_graph(g)?;
        }
        Ok(changed)
    }
}

/// Canonicalizes one verified graph in place; returns whether it changed.
pub fn canonicalize_graph(g: &mut Graph) -> Result<bool, Diagnostic> {
    let mut changed = false;
    for _ in 0..32 {
        let next = dce(&rebuild(g)?);
        if next == *g {
            return Ok(changed);
        }
        *g = next;
        changed = true;
    }
    Ok(changed)
}

fn ty(g: &Graph, v: ValueId) -> Result<&TensorType, Diagnostic> {
    g.ty(v).ok_or_else(|| {
        Diagnostic::error(
            codes::PASS_FAILED,
            format!(
                "canonicalize needs a verified graph (`%{}` has no type)",
                g.value(v).name
            ),
        )
    })
}

/// The chain op a view is, if it is a single-operand view that chains compose.
pub fn as_op(v: &View, input: &[i64], out: &[i64]) -> Option<Op> {
    Some(match v {
        View::Transpose { perm, .. } => Op::Perm(perm.clone()),
        View::Reverse { dims, .. } => {
            let mut d = dims.clone();
            d.sort_unstable();
            Op::Rev(d)
        }
        View::Slice { dims, .. } => Op::Slice(
            dims.iter()
                .zip(out)
                .map(|(d, &c)| (d.start.unwrap_or(0), d.step.unwrap_or(1), c))
                .collect(),
        ),
        View::Squeeze { .. } | View::Unsqueeze { .. } | View::Reshape { .. } => {
            Op::Reshape(out.to_vec())
        }
        View::Broadcast { shape, .. } => {
            let _ = input;
            Op::Bcast(shape.clone())
        }
        _ => return None,
    })
}

/// The view node for a chain op applied to `arg`.
pub fn to_view(op: &Op, arg: ValueId) -> View {
    match op {
        Op::Perm(perm) => View::Transpose {
            arg,
            perm: perm.clone(),
        },
        Op::Rev(dims) => View::Reverse {
            arg,
            dims: dims.clone(),
        },
        Op::Bcast(shape) => View::Broadcast {
            arg,
            shape: shape.clone(),
        },
        Op::Reshape(shape) => View::Reshape {
            arg,
            shape: shape.clone(),
        },
        Op::Slice(s) => View::Slice {
            arg,
            dims: s
                .iter()
                .map(|&(start, step, c)| SliceDim::from_count(start, step, c))
                .collect(),
        },
    }
}

/// Where a chain of single-operand views ending at `v` starts, its ops in order, and the
/// values the ops define.
/// A chain stops at a pinned value, which is then its root.
fn chain_of(
    g: &Graph,
    v: ValueId,
    pinned: &[bool],
) -> Result<(ValueId, Vec<Op>, Vec<ValueId>), Diagnostic> {
    let mut ops = Vec::new();
    let mut vals = Vec::new();
    let mut cur = v;
    loop {
        if cur != v && pinned[cur.index()] {
            break;
        }
        let node = &g.nodes[g.value(cur).node];
        let NodeKind::View(view) = &node.kind else {
            break;
        };
        let args = view.args();
        if args.len() != 1 {
            break;
        }
        let Some(op) = as_op(view, &ty(g, args[0])?.shape, &ty(g, cur)?.shape) else {
            break;
        };
        ops.push(op);
        vals.push(cur);
        cur = args[0];
    }
    ops.reverse();
    vals.reverse();
    Ok((cur, ops, vals))
}

fn rebuild(g: &Graph) -> Result<Graph, Diagnostic> {
    let mut b = Builder::new(g, true);
    let inner = chain_interior(g, &b.pinned);
    for node in &g.nodes {
        match &node.kind {
            // A pinned view is kept as written.
            NodeKind::View(_) if b.pinned[node.results[0].index()] => b.copy_node(node)?,
            NodeKind::View(view) if view.args().len() == 1 && as_op(view, &[], &[]).is_some() => {
                let v = node.results[0];
                if inner[v.index()] {
                    continue; // only chain ends are rebuilt; interior views die with the old chain
                }
                let (root, ops, vals) = chain_of(g, v, &b.pinned)?;
                let root_ty = ty(g, root)?.clone();
                let mut canon = chain::canonicalize(&root_ty.shape, &ops);
                let mut cur = b.mapped(root);
                let mut shape = root_ty.shape.clone();
                let mut folded_any = false;
                let first = canon.first().filter(|_| !b.is_pinned_new(cur));
                if let Some(first @ Op::Slice(_)) = first {
                    // A chain that starts by slicing a concat may read one part directly.
                    let out = root_ty.with_shape(first.out_shape(&shape));
                    let folded = peephole::fold(&to_view(first, cur), &b.new, &out);
                    if let Some(f) = folded {
                        cur = match f {
                            peephole::Folded::Value(x) => x,
                            peephole::Folded::View(nv) => {
                                let last = canon.len() == 1;
                                let name = if last {
                                    g.value(v).name.clone()
                                } else {
                                    format!("{}.c", g.value(v).name)
                                };
                                b.emit(NodeKind::View(nv), &name, out.clone(), node.span)
                            }
                        };
                        shape = out.shape;
                        canon.remove(0);
                        folded_any = true;
                    }
                }
                if !folded_any && canon == ops {
                    // Already canonical: keep the written views and names.
                    for &x in &vals {
                        let n = &g.nodes[g.value(x).node];
                        let NodeKind::View(view) = &n.kind else {
                            unreachable!("chains are views")
                        };
                        let mut nv = view.clone();
                        set_arg(&mut nv, cur);
                        cur = b.emit(
                            NodeKind::View(nv),
                            &g.value(x).name,
                            ty(g, x)?.clone(),
                            n.span,
                        );
                    }
                    b.map[v.index()] = Some(cur);
                    continue;
                }
                for (k, op) in canon.iter().enumerate() {
                    shape = op.out_shape(&shape);
                    let base = g.value(v).name.clone();
                    let name = if k + 1 == canon.len() {
                        base
                    } else {
                        format!("{base}.c")
                    };
                    cur = b.emit(
                        NodeKind::View(to_view(op, cur)),
                        &name,
                        root_ty.with_shape(shape.clone()),
                        node.span,
                    );
                }
                b.map[v.index()] = Some(cur);
            }
            NodeKind::View(view) => {
                let v = node.results[0];
                let mapped = remap_view(view, &b);
                let t = ty(g, v)?.clone();
                let through_pin = mapped.args().iter().any(|&a| b.is_pinned_new(a));
                let folded = if through_pin {
                    None
                } else {
                    peephole::fold(&mapped, &b.new, &t)
                };
                let out = match folded {
                    Some(peephole::Folded::Value(x)) => x,
                    Some(peephole::Folded::View(nv)) => {
                        b.emit(NodeKind::View(nv), &g.value(v).name, t, node.span)
                    }
                    None => b.emit(NodeKind::View(mapped), &g.value(v).name, t, node.span),
                };
                b.map[v.index()] = Some(out);
            }
            _ => b.copy_node(node)?,
        }
    }
    Ok(b.new)
}

fn set_arg(v: &mut View, a: ValueId) {
    if let View::Transpose { arg, .. }
    | View::Reverse { arg, .. }
    | View::Slice { arg, .. }
    | View::Squeeze { arg, .. }
    | View::Unsqueeze { arg, .. }
    | View::Broadcast { arg, .. }
    | View::Reshape { arg, .. } = v
    {
        *arg = a;
    }
}

/// Values whose only uses are as the operand of chainable single-operand views (a pinned view
/// is not rewritten, so its operand is used as it is).
fn chain_interior(g: &Graph, pinned: &[bool]) -> Vec<bool> {
    let mut other_use = vec![false; g.values.len()];
    let mut chain_use = vec![false; g.values.len()];
    for n in &g.nodes {
        let chainable = matches!(&n.kind, NodeKind::View(v) if v.args().len() == 1 && as_op(v, &[], &[]).is_some())
            && !n.results.iter().any(|r| pinned[r.index()]);
        for v in n.kind.operands() {
            if chainable {
                chain_use[v.index()] = true
            } else {
                other_use[v.index()] = true
            }
        }
        if let NodeKind::Sequence { before, after } = &n.kind {
            for r in before.iter().chain(after) {
                if let SeqRef::Value(v) = r {
                    other_use[v.index()] = true;
                }
            }
        }
    }
    (0..g.values.len())
        .map(|i| {
            let chainable_def = matches!(&g.nodes[g.values[i].node].kind, NodeKind::View(v) if v.args().len() == 1 && as_op(v, &[], &[]).is_some());
            chainable_def && chain_use[i] && !other_use[i]
        })
        .collect()
}

fn remap_view(view: &View, b: &Builder) -> View {
    let mut nv = view.clone();
    nv.for_each_arg_mut(|a| *a = b.mapped(*a));
    nv
}
