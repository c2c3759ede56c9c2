//! The backward sweep written at a `grad` statement: adjoints flow from the loss (seeded with
//! `ones`) to the `wrt` values in reverse topological order over the nodes that depend on a
//! `wrt` value and reach the loss; each value's adjoints are summed once all its readers are
//! done; a `wrt` value the loss does not depend on gets `zeros`.

use super::kernel::{Generated, PortRef};
use super::{depends, reaches, unsupported, Lowering};
use crate::diag::Diagnostic;
use crate::ir::graph::{GenKind, Generator, Node, NodeKind, ValueId};
use std::collections::{HashMap, HashSet};

impl Lowering<'_> {
    /// Writes the backward pass of `grad %loss wrt %wrt...` (old graph's values) and maps the
    /// statement's results to the gradients.
    pub(super) fn grad(
        &mut self,
        n: &Node,
        loss: ValueId,
        wrt: &[ValueId],
    ) -> Result<(), Diagnostic> {
        let loss = self.e.b.mapped(loss);
        let wrt: Vec<ValueId> = wrt.iter().map(|v| self.e.b.mapped(*v)).collect();
        let end = self.e.b.new.nodes.len();
        let first_value = self.e.b.new.values.len();
        let dep = depends(&self.e.b.new, &wrt);
        let anc = reaches(&self.e.b.new, loss);
        let lt = self.e.ty(loss);
        let seed = Generator {
            kind: GenKind::Ones,
            ty: lt.clone(),
        };
        let seed_name = format!("d_{}", self.e.name(loss));
        let seed = self
            .e
            .b
            .emit(NodeKind::Generator(seed), &seed_name, lt, n.span);
        let mut adj: HashMap<ValueId, Vec<ValueId>> = HashMap::from([(loss, vec![seed])]);
        let mut fin: HashMap<ValueId, ValueId> = HashMap::new();
        for j in (0..end).rev() {
            let node = self.e.b.new.nodes[j].clone();
            if !anc[j] || !node.results.iter().any(|v| dep[v.index()]) {
                continue;
            }
            for r in &node.results {
                if let Some(parts) = adj.remove(r) {
                    let name = format!("d_{}", self.e.name(*r));
                    fin.insert(*r, self.e.accumulate(&parts, &name));
                }
            }
            let Some(&dy) = node.results.first().and_then(|r| fin.get(r)) else {
                continue;
            };
            if !node.kind.operands().iter().any(|v| dep[v.index()]) {
                continue; // a `wrt` value's own node: its operands need no adjoint
            }
            let parts = match &node.kind {
                NodeKind::Apply(_) => self.apply_adjoint(j, &node, dy, &dep)?,
                NodeKind::View(v) => self
                    .e
                    .view_adjoint(v, dy, &|x| dep[x.index()])
                    .map_err(|w| unsupported(format!("the selector {w}"), node.span))?,
                NodeKind::Scatter(s) => self
                    .e
                    .scatter_adjoint(s, dy, &|x| dep[x.index()])
                    .map_err(|w| {
                        unsupported(format!("{w} (only `reduce add` has an adjoint)"), node.span)
                    })?,
                _ => vec![],
            };
            for (x, d) in parts {
                if dep[x.index()] {
                    adj.entry(x).or_default().push(d);
                }
            }
        }
        let mut claimed = HashSet::new();
        for (r, w) in n.results.iter().zip(&wrt) {
            let v = match fin.get(w) {
                Some(&v) => v,
                None => {
                    let ty = self.e.ty(*w);
                    let z = Generator {
                        kind: GenKind::Zeros,
                        ty: ty.clone(),
                    };
                    let name = self.e.b.old.value(*r).name.clone();
                    self.e
                        .b
                        .emit(NodeKind::Generator(z), &format!("{name}.zero"), ty, n.span)
                }
            };
            if v.index() >= first_value && claimed.insert(v) {
                self.e.b.new.values[v.index()].name = self.e.b.old.value(*r).name.clone();
            }
            self.e.b.map[r.index()] = Some(v);
        }
        Ok(())
    }

    /// The adjoints of the operands of apply `j` (a single statement) given its adjoint `dy`.
    fn apply_adjoint(
        &mut self,
        j: usize,
        node: &Node,
        dy: ValueId,
        dep: &[bool],
    ) -> Result<Vec<(ValueId, ValueId)>, Diagnostic> {
        let NodeKind::Apply(a) = &node.kind else {
            return Ok(vec![]);
        };
        if let Some(&(old, r)) = self.rowwise.get(&j) {
            return Ok(self.rowwise_adjoint(old, r, a, node, dy, dep));
        }
        let Some(sr) = self.stmts.get(&j).cloned() else {
            let what = format!("`@{}` is sharded or has no kernel (an extern op)", a.op);
            return Err(unsupported(what, node.span));
        };
        let y = node.results[0];
        let yt = self.e.ty(y);
        let mut srcs: Vec<_> = sr.srcs.iter().map(|(s, v)| (s.clone(), *v)).collect();
        srcs.sort();
        let mut out = Vec::new();
        for (s, x) in srcs {
            if !dep[x.index()] || !self.e.ty(x).dtype.is_float() {
                continue;
            }
            let xname = self.e.name(x);
            let cx = self.stmt_cx(sr.old_node, sr.stmt, &sr.srcs, yt.clone());
            let pieces = cx
                .adjoint(&s)
                .map_err(|w| unsupported(format!("in `@{}`, {w}", a.op), node.span))?;
            let bind = |g: &Generated| -> Vec<ValueId> {
                g.inputs
                    .iter()
                    .map(|r| match r {
                        PortRef::Src(s) => sr.srcs[s],
                        PortRef::Target => y,
                        PortRef::DTarget => dy,
                    })
                    .collect()
            };
            for p in pieces {
                let args = bind(&p.gen);
                let mut op = p.gen.op;
                op.name = self.e.op_name(&format!("grad_{xname}"));
                let name = format!("d_{xname}");
                let d = self.e.apply(op, args, std::slice::from_ref(&name))[0];
                let d = match p.scatter {
                    Some(sp) => {
                        let args = bind(&sp.idx);
                        self.e.scatter_add(d, sp, args, x, &name)
                    }
                    None => self.e.place(d, &p.places, x, &name),
                };
                out.push((x, d));
            }
        }
        Ok(out)
    }

    /// The adjoint of a softmax or log-softmax kept whole: one row-local op of its output
    /// and `dy` (passes/grad/softmax.rs).
    fn rowwise_adjoint(
        &mut self,
        old: usize,
        r: super::softmax::Rowwise,
        a: &crate::ir::graph::Apply,
        node: &Node,
        dy: ValueId,
        dep: &[bool],
    ) -> Vec<(ValueId, ValueId)> {
        let x = a.args[0];
        if !dep[x.index()] {
            return vec![];
        }
        let xname = self.e.name(x);
        let name = self.e.op_name(&format!("grad_{xname}"));
        let op = super::softmax::adjoint_op(self.inst(old), r, &name);
        let d = self
            .e
            .apply(op, vec![node.results[0], dy], &[format!("d_{xname}")])[0];
        vec![(x, d)]
    }
}
