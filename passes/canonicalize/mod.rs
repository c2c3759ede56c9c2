//! `canonicalize`: view-chain canonicalization, `slice(concat)` and `concat(slice...)` folding,
//! common-subexpression elimination and dead-code elimination, iterated to a fixed point.
//!
//! The graph is rebuilt node by node (so SSA order is kept by construction); a chain of
//! single-operand views is rewritten from its root at the value where it ends.
//! Sources, sinks and sequence points are never removed or merged; `rand` generators merge
//! only when seed and type are equal (they then compute identical values).

mod chain;
mod peephole;

pub use chain::{canonicalize as canonicalize_chain, Op};

use crate::diag::{codes, Diagnostic};
use crate::ir::graph::*;
use crate::ir::{Module, TensorType};
use crate::passes::manager::{Pass, PassContext, PassOptions};
use std::collections::{HashMap, HashSet};

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

/// Builds the canonical graph: chains rewritten from their roots, peepholes, CSE.
struct Builder<'a> {
    old: &'a Graph,
    new: Graph,
    map: Vec<Option<ValueId>>,
    names: HashSet<String>,
    cse: HashMap<String, ValueId>,
}

impl Builder<'_> {
    fn fresh(&mut self, base: &str) -> String {
        if self.names.insert(base.to_string()) {
            return base.to_string();
        }
        (0..)
            .map(|k| format!("{base}.c{k}"))
            .find(|n| self.names.insert(n.clone()))
            .expect("an unused name exists")
    }

    /// Adds a node defining one value named like `name`, unless CSE finds it already exists.
    fn emit(
        &mut self,
        kind: NodeKind,
        name: &str,
        ty: TensorType,
        span: crate::diag::Span,
    ) -> ValueId {
        let key = cse_key(&kind);
        if let Some(k) = &key {
            if let Some(&v) = self.cse.get(k) {
                return v;
            }
        }
        let id = ValueId(self.new.values.len() as u32);
        let name = self.fresh(name);
        self.new.values.push(ValueDef {
            name,
            node: self.new.nodes.len(),
            ty: Some(ty),
            span,
        });
        self.new.nodes.push(Node {
            kind,
            results: vec![id],
            span,
        });
        if let Some(k) = key {
            self.cse.insert(k, id);
        }
        id
    }

    fn mapped(&self, v: ValueId) -> ValueId {
        self.map[v.index()].expect("operands are rebuilt before their users")
    }
}

/// CSE key of a node; `None` for nodes that are never merged (sources, sinks, multi-result applies).
fn cse_key(kind: &NodeKind) -> Option<String> {
    match kind {
        NodeKind::View(v) => Some(format!("view {v:?}")),
        NodeKind::Generator(gen) => Some(format!("gen {gen:?}")),
        NodeKind::Apply(a) => Some(format!(
            "apply {} {:?} {:?} {:?} {:?}",
            a.op, a.params, a.args, a.range, a.placement
        )),
        _ => None,
    }
}

/// Where a chain of single-operand views ending at `v` starts, its ops in order, and the
/// values the ops define.
fn chain_of(g: &Graph, v: ValueId) -> Result<(ValueId, Vec<Op>, Vec<ValueId>), Diagnostic> {
    let mut ops = Vec::new();
    let mut vals = Vec::new();
    let mut cur = v;
    loop {
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
    let mut b = Builder {
        old: g,
        new: Graph {
            name: g.name.clone(),
            span: g.span,
            name_span: g.name_span,
            ..Graph::default()
        },
        map: vec![None; g.values.len()],
        names: HashSet::new(),
        cse: HashMap::new(),
    };
    let inner = chain_interior(g);
    for node in &g.nodes {
        match &node.kind {
            NodeKind::View(view) if view.args().len() == 1 && as_op(view, &[], &[]).is_some() => {
                let v = node.results[0];
                if inner[v.index()] {
                    continue; // only chain ends are rebuilt; interior views die with the old chain
                }
                let (root, ops, vals) = chain_of(g, v)?;
                let root_ty = ty(g, root)?.clone();
                let mut canon = chain::canonicalize(&root_ty.shape, &ops);
                let mut cur = b.mapped(root);
                let mut shape = root_ty.shape.clone();
                let mut folded_any = false;
                if let Some(first @ Op::Slice(_)) = canon.first() {
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
                let out = match peephole::fold(&mapped, &b.new, &t) {
                    Some(peephole::Folded::Value(x)) => x,
                    Some(peephole::Folded::View(nv)) => {
                        b.emit(NodeKind::View(nv), &g.value(v).name, t, node.span)
                    }
                    None => b.emit(NodeKind::View(mapped), &g.value(v).name, t, node.span),
                };
                b.map[v.index()] = Some(out);
            }
            _ => copy_node(&mut b, node)?,
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

/// Values whose only uses are as the operand of chainable single-operand views.
fn chain_interior(g: &Graph) -> Vec<bool> {
    let mut other_use = vec![false; g.values.len()];
    let mut chain_use = vec![false; g.values.len()];
    for n in &g.nodes {
        let chainable = matches!(&n.kind, NodeKind::View(v) if v.args().len() == 1 && as_op(v, &[], &[]).is_some());
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
    match &mut nv {
        View::Concat { args, .. } | View::Interleave { args, .. } => {
            args.iter_mut().for_each(|a| *a = b.mapped(*a))
        }
        View::Transpose { arg, .. }
        | View::Reverse { arg, .. }
        | View::Slice { arg, .. }
        | View::Squeeze { arg, .. }
        | View::Unsqueeze { arg, .. }
        | View::Broadcast { arg, .. }
        | View::Reshape { arg, .. }
        | View::Repeat { arg, .. }
        | View::Pad { arg, .. } => *arg = b.mapped(*arg),
    }
    nv
}

fn copy_node(b: &mut Builder, node: &Node) -> Result<(), Diagnostic> {
    let mut kind = node.kind.clone();
    match &mut kind {
        NodeKind::Apply(a) => a.args.iter_mut().for_each(|x| *x = b.mapped(*x)),
        NodeKind::Sink { value, .. } => *value = b.mapped(*value),
        NodeKind::Sequence { before, after } => {
            for r in before.iter_mut().chain(after.iter_mut()) {
                if let SeqRef::Value(v) = r {
                    *v = b.mapped(*v);
                }
            }
        }
        NodeKind::Source { .. } | NodeKind::Generator(_) | NodeKind::View(_) => {}
    }
    if node.results.len() == 1 && !matches!(kind, NodeKind::Source { .. }) {
        let v = node.results[0];
        let t = ty(b.old, v)?.clone();
        let name = b.old.value(v).name.clone();
        let id = b.emit(kind, &name, t, node.span);
        b.map[v.index()] = Some(id);
        return Ok(());
    }
    let idx = b.new.nodes.len();
    let mut results = Vec::new();
    for &v in &node.results {
        let id = ValueId(b.new.values.len() as u32);
        let name = b.fresh(&b.old.value(v).name.clone());
        b.new.values.push(ValueDef {
            name,
            node: idx,
            ty: b.old.ty(v).cloned(),
            span: b.old.value(v).span,
        });
        b.map[v.index()] = Some(id);
        results.push(id);
    }
    b.new.nodes.push(Node {
        kind,
        results,
        span: node.span,
    });
    Ok(())
}

/// Removes every node that reaches no sink or sequence point (sources stay: they are the
/// graph's interface), renumbering values.
pub fn dce(g: &Graph) -> Graph {
    let mut live = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        let root = match &n.kind {
            NodeKind::Sink { .. } | NodeKind::Sequence { .. } | NodeKind::Source { .. } => true,
            _ => false,
        };
        if root {
            live[i] = true;
        }
        if let NodeKind::Sequence { before, after } = &n.kind {
            for r in before.iter().chain(after) {
                if let SeqRef::Value(v) = r {
                    live[g.value(*v).node] = true;
                }
            }
        }
        if live[i] {
            for v in n.kind.operands() {
                live[g.value(v).node] = true;
            }
        }
    }
    // Sequence points may name later applies; propagate liveness once more in reverse order.
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if live[i] {
            for v in n.kind.operands() {
                live[g.value(v).node] = true;
            }
        }
    }
    let mut out = Graph {
        name: g.name.clone(),
        span: g.span,
        name_span: g.name_span,
        ..Graph::default()
    };
    let mut map: Vec<Option<ValueId>> = vec![None; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let mut kind = n.kind.clone();
        let m = |v: &mut ValueId| *v = map[v.index()].expect("live operands are kept");
        match &mut kind {
            NodeKind::Apply(a) => a.args.iter_mut().for_each(m),
            NodeKind::View(v) => match v {
                View::Concat { args, .. } | View::Interleave { args, .. } => {
                    args.iter_mut().for_each(m)
                }
                View::Transpose { arg, .. }
                | View::Reverse { arg, .. }
                | View::Slice { arg, .. }
                | View::Squeeze { arg, .. }
                | View::Unsqueeze { arg, .. }
                | View::Broadcast { arg, .. }
                | View::Reshape { arg, .. }
                | View::Repeat { arg, .. }
                | View::Pad { arg, .. } => m(arg),
            },
            NodeKind::Sink { value, .. } => m(value),
            NodeKind::Sequence { before, after } => {
                before.iter_mut().chain(after.iter_mut()).for_each(|r| {
                    if let SeqRef::Value(v) = r {
                        m(v)
                    }
                })
            }
            NodeKind::Source { .. } | NodeKind::Generator(_) => {}
        }
        let idx = out.nodes.len();
        let results = n
            .results
            .iter()
            .map(|&v| {
                let id = ValueId(out.values.len() as u32);
                out.values.push(ValueDef {
                    node: idx,
                    ..g.value(v).clone()
                });
                map[v.index()] = Some(id);
                id
            })
            .collect();
        out.nodes.push(Node {
            kind,
            results,
            span: n.span,
        });
    }
    out
}
