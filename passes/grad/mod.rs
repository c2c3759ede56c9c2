//! `grad`: lowers every `%d1, ... = grad %loss wrt %w1, ...` statement into ordinary ops and
//! selectors (docs/passes/grad.md).
//!
//! The graph is rebuilt in order. An apply of a kernel with several statements that lies
//! between a `wrt` value and a loss is split into one apply per statement, so that its
//! temporaries become graph values the backward pass can read (the forward values are reused,
//! never recomputed). At a `grad` statement the backward pass is written in place: a reverse
//! topological sweep over the nodes that both depend on a `wrt` value and reach the loss, the
//! adjoints of a value with several readers summed by an op, one adjoint op per kernel
//! statement and input (`@mlp_grad_w1`), selectors for selectors. A construct with no adjoint
//! rule yet is E0110 naming it, never a wrong gradient.

mod backward;
mod emit;
mod expr;
mod kernel;
mod rules;
mod scatter;
mod softmax;
mod split;
mod symbols;
mod unroll;
mod views;

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::{Graph, Node, NodeKind, ValueId};
use crate::ir::instance::{Instance, Src, Target};
use crate::ir::{Module, OpDef, TensorType};
use crate::passes::context::PassContext;
use crate::passes::pass::{Pass, PassOptions};
use crate::passes::rewrite::Builder;
use crate::verify::GraphFacts;
use emit::Emitter;
use kernel::{PortRef, StmtCx};
use std::collections::{HashMap, HashSet};

pub fn create(opts: &PassOptions) -> Result<Box<dyn Pass>, String> {
    match opts.first() {
        Some((k, _)) => Err(format!("unknown option `{k}` (grad takes none)")),
        None => Ok(Box::new(GradPass)),
    }
}

struct GradPass;

impl Pass for GradPass {
    fn name(&self) -> &'static str {
        "grad"
    }
    fn run(&mut self, m: &mut Module, cx: &mut PassContext) -> Result<bool, Diagnostic> {
        if !m.graphs.iter().any(Graph::has_grad) {
            return Ok(false);
        }
        // One `grad` per graph at a time, first in text order, then the module re-verified: a
        // later `grad` may differentiate the ops an earlier one wrote, which need instances.
        while m.graphs.iter().any(Graph::has_grad) {
            let facts = cx.take_facts(m)?;
            for (gi, f) in facts.iter().enumerate() {
                if m.graphs[gi].has_grad() {
                    let (g, ops) = lower_graph(m, gi, f)?;
                    m.graphs[gi] = g;
                    m.ops.extend(ops);
                }
            }
            cx.refresh(m)?;
        }
        Ok(true)
    }
}

/// One statement of an apply in the rebuilt graph: its instance and statement, and the value
/// each of its sources is (an argument, or a split temporary).
#[derive(Clone)]
struct StmtRef {
    old_node: usize,
    stmt: usize,
    srcs: HashMap<Src, ValueId>,
}

struct Lowering<'a> {
    e: Emitter<'a>,
    facts: &'a GraphFacts,
    /// Per node of the rebuilt graph: the statement an apply computes.
    stmts: HashMap<usize, StmtRef>,
    /// Per node of the rebuilt graph: a softmax or log-softmax kept whole (its old node and
    /// form), whose adjoint is one row-local op.
    rowwise: HashMap<usize, (usize, softmax::Rowwise)>,
}

fn lower_graph(
    m: &Module,
    gi: usize,
    facts: &GraphFacts,
) -> Result<(Graph, Vec<OpDef>), Diagnostic> {
    let old = &m.graphs[gi];
    let mut l = Lowering {
        e: Emitter {
            b: Builder::new(old, false),
            ops: Vec::new(),
            taken: crate::passes::fuse::emit::Names::with(m.ops.iter().map(|o| o.name.clone())),
            span: old.span,
        },
        facts,
        stmts: HashMap::new(),
        rowwise: HashMap::new(),
    };
    let first = old
        .nodes
        .iter()
        .position(|n| matches!(n.kind, NodeKind::Grad { .. }));
    let Some(first) = first else {
        return Ok((old.clone(), vec![]));
    };
    for r in &old.nodes[first].results {
        l.e.b.fresh(&old.value(*r).name);
    }
    let split = on_path(old, first);
    for (i, n) in old.nodes.iter().enumerate() {
        l.e.span = n.span;
        match &n.kind {
            NodeKind::Grad { loss, wrt } if i == first => l.grad(n, *loss, wrt)?,
            NodeKind::Apply(a) if a.range.is_none() && facts.instances.contains_key(&i) => {
                l.apply(i, n, split.contains(&i))?
            }
            _ => l.e.b.copy_node(n)?,
        }
    }
    l.e.ops.iter_mut().for_each(symbols::generalize);
    Ok((l.e.b.new, l.e.ops))
}

/// The nodes that depend on a `wrt` value of `grad` node `at` and reach its loss (the applies
/// worth splitting).
fn on_path(g: &Graph, at: usize) -> HashSet<usize> {
    let NodeKind::Grad { loss, wrt } = &g.nodes[at].kind else {
        return HashSet::new();
    };
    let dep = depends(g, wrt);
    let anc = reaches(g, *loss);
    (0..g.nodes.len())
        .filter(|&i| g.nodes[i].results.iter().any(|v| dep[v.index()]) && anc[i])
        .collect()
}

/// Per value: it is one of `roots` or is computed from one.
fn depends(g: &Graph, roots: &[ValueId]) -> Vec<bool> {
    let mut dep = vec![false; g.values.len()];
    roots.iter().for_each(|v| dep[v.index()] = true);
    for n in &g.nodes {
        if n.kind.operands().iter().any(|v| dep[v.index()])
            && !matches!(n.kind, NodeKind::Grad { .. })
        {
            n.results.iter().for_each(|v| dep[v.index()] = true);
        }
    }
    dep
}

/// Per node: `loss` is computed from its results.
fn reaches(g: &Graph, loss: ValueId) -> Vec<bool> {
    let mut need = vec![false; g.values.len()];
    need[loss.index()] = true;
    let mut anc = vec![false; g.nodes.len()];
    for (i, n) in g.nodes.iter().enumerate().rev() {
        if n.results.iter().any(|v| need[v.index()]) {
            anc[i] = true;
            n.kind
                .operands()
                .iter()
                .for_each(|v| need[v.index()] = true);
        }
    }
    anc
}

fn unsupported(what: String, span: Span) -> Diagnostic {
    Diagnostic::error(
        codes::GRAD_UNSUPPORTED,
        format!("no adjoint rule yet: {what}"),
    )
    .primary(span, "on the path from a `wrt` value to the loss")
    .note("docs/passes/grad.md lists the supported constructs")
}

impl<'a> Lowering<'a> {
    fn inst(&self, old_node: usize) -> &'a Instance {
        &self.facts.instances[&old_node]
    }

    /// Copies apply `i`, split into one apply per statement when `split` and it has several.
    fn apply(&mut self, i: usize, n: &Node, split: bool) -> Result<(), Diagnostic> {
        let NodeKind::Apply(a) = &n.kind else {
            return self.e.b.copy_node(n);
        };
        let inst = self.inst(i);
        let nstmts = inst.stmts.as_ref().map_or(0, Vec::len);
        let mut srcs: HashMap<Src, ValueId> = a
            .args
            .iter()
            .enumerate()
            .map(|(k, v)| (Src::Input(k), self.e.b.mapped(*v)))
            .collect();
        let rowwise = (split && nstmts > 1)
            .then(|| softmax::recognise(inst))
            .flatten();
        if let Some(r) = rowwise {
            self.e.b.copy_node(n)?;
            let node = self.e.b.new.nodes.len() - 1;
            self.rowwise.insert(node, (i, r));
            return Ok(());
        }
        if nstmts == 1 || (nstmts > 1 && !split) {
            self.e.b.copy_node(n)?;
            if nstmts == 1 {
                let node = self.e.b.new.nodes.len() - 1;
                self.stmts.insert(
                    node,
                    StmtRef {
                        old_node: i,
                        stmt: 0,
                        srcs,
                    },
                );
            }
            return Ok(());
        }
        for s in 0..nstmts {
            let inst = self.inst(i);
            let st = &inst.stmts.as_ref().expect("counted")[s];
            let (ty, name) = match st.target {
                Target::Output(o) => (
                    inst.outputs[o].clone(),
                    self.e.b.old.value(n.results[o]).name.clone(),
                ),
                Target::Temp(t) => {
                    let tmp = &inst.temps[t];
                    let shape = tmp.vars.iter().map(|v| inst.extent(*v)).collect();
                    let base = self.e.b.old.value(n.results[0]).name.clone();
                    (
                        TensorType::new(tmp.dtype, shape),
                        format!("{base}.{}", tmp.name),
                    )
                }
            };
            let cx = self.stmt_cx(i, s, &srcs, ty);
            let (g, target) = (cx.forward(""), cx.target_name());
            let mut op = g.op;
            op.name = self.e.op_name(&format!("{}_{target}", a.op));
            let args = g.inputs.iter().map(|p| match p {
                PortRef::Src(s) => srcs[s],
                _ => unreachable!("a forward statement reads only its sources"),
            });
            let args = args.collect();
            let v = self.e.apply(op, args, &[name])[0];
            self.stmts.insert(
                self.e.b.new.nodes.len() - 1,
                StmtRef {
                    old_node: i,
                    stmt: s,
                    srcs: srcs.clone(),
                },
            );
            match st.target {
                Target::Output(o) => self.e.b.map[n.results[o].index()] = Some(v),
                Target::Temp(t) => {
                    srcs.insert(Src::Temp(t), v);
                }
            }
        }
        Ok(())
    }

    fn stmt_cx<'s>(
        &'s self,
        i: usize,
        s: usize,
        srcs: &'s HashMap<Src, ValueId>,
        ty: TensorType,
    ) -> StmtCxOwned<'s> {
        StmtCxOwned {
            l: self,
            i,
            s,
            srcs,
            ty,
        }
    }
}

/// A [`StmtCx`] over the rebuilt graph's types.
struct StmtCxOwned<'s> {
    l: &'s Lowering<'s>,
    i: usize,
    s: usize,
    srcs: &'s HashMap<Src, ValueId>,
    ty: TensorType,
}

impl StmtCxOwned<'_> {
    fn with<R>(&self, f: impl FnOnce(&StmtCx) -> R) -> R {
        let inst = self.l.inst(self.i);
        let src_ty = |s: &Src| match self.srcs.get(s) {
            Some(v) => self.l.e.ty(*v),
            None => TensorType::new(crate::ir::DType::F32, vec![]),
        };
        let cx = StmtCx {
            inst,
            st: &inst.stmts.as_ref().expect("a kernel")[self.s],
            src_ty: &src_ty,
            target_ty: self.ty.clone(),
        };
        f(&cx)
    }
    fn adjoint(&self, x: &Src) -> Result<Vec<kernel::Piece>, String> {
        self.with(|c| c.adjoint(x))
    }
    fn forward(&self, name: &str) -> kernel::Generated {
        self.with(|c| c.forward(name))
    }
    fn target_name(&self) -> String {
        self.with(|c| c.target_name())
    }
}
