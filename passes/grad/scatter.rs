//! The adjoint of a gathered load (`E[ids[b, s], h]` with respect to `E`): a scatter-add. The
//! load's adjoint is computed at every point of the variables in scope (an op over them, the
//! gathered dimension's place taken by the variables that do not index the table), the
//! gathered coordinate likewise (`i64(ids[b, s]) + offset`), both reshaped to the table's shape
//! but along the gathered dimension (one entry per point), and scatter-added into zeros
//! (`backward.rs`). Supported: one gathered dimension, every other dimension indexed by one
//! variable over the whole dimension (an embedding `E[ids[..], h]`, a GatherElements
//! `x[i, idx[i, j]]`, a gather inside a sum); anything else stays E0110. And the converse: the
//! adjoint of a `scatter … reduce add` is the adjoint itself for the base and a gather of it for
//! the updates.

use super::emit::Emitter;
use super::expr::{self, bin, call, constant, mul, name};
use super::kernel::{fresh_port, port, Piece, PortRef, ScatterPiece, StmtCx};
use super::rules::Contribution;
use super::views::one_stmt;
use crate::diag::Span;
use crate::ir::graph::{Scatter, ScatterReduce, ValueId};
use crate::ir::instance::{Affine, GatherLoad, Scalar};
use crate::ir::kernel::{BinOp, Func, Gather, IExpr, Index, KExpr, KExprKind};
use crate::ir::{DType, TensorType};

/// `e + a` with `a` an affine integer value over the variables' names (`e` when it is 0).
fn plus_affine(e: KExpr, a: &Affine, names: &[String]) -> KExpr {
    let mut out = e;
    for &(v, c) in &a.terms {
        let v = name(names[v].clone());
        let term = if c == 1 {
            v
        } else {
            mul(constant(Scalar::I(c)), v)
        };
        out = bin(BinOp::Add, out, term);
    }
    if a.constant > 0 {
        out = bin(BinOp::Add, out, constant(Scalar::I(a.constant)));
    } else if a.constant < 0 {
        out = bin(BinOp::Sub, out, constant(Scalar::I(-a.constant)));
    }
    out
}

impl StmtCx<'_> {
    /// The scatter piece of gathered load `g` (contribution `c`) of source `x` of type `xty`;
    /// `out` names the adjoint port, `extra` the statement's own value and adjoint ports.
    pub(super) fn scatter_piece(
        &self,
        w: &mut expr::Writer,
        c: &Contribution,
        g: &GatherLoad,
        (x, xty): (&str, &TensorType),
        out: &str,
        extra: &[(&str, PortRef)],
    ) -> Result<Piece, String> {
        let gathered: Vec<usize> = g.gathered().map(|(d, _)| d).collect();
        let [axis] = gathered[..] else {
            return Err(format!(
                "the load of `{x}` gathers {} dimensions (a scatter-add along one is supported)",
                gathered.len()
            ));
        };
        let names = self.var_names();
        let mut own = Vec::new();
        for (d, a) in c.index.iter().enumerate().filter(|(d, _)| *d != axis) {
            match a.terms.as_slice() {
                [(v, 1)]
                    if a.constant == 0
                        && !own.contains(v)
                        && self.inst.vars[*v].range == (0, xty.shape[d]) =>
                {
                    own.push(*v)
                }
                _ => return Err(format!(
                    "the gathered load of `{x}` reads dimension {d} by other than one variable over the whole dimension (its adjoint is a scatter-add along the gathered dimension only)"
                )),
            }
        }
        let others: Vec<usize> = c
            .bound
            .iter()
            .copied()
            .filter(|v| !own.contains(v))
            .collect();
        if let Some(v) = others.iter().find(|v| self.inst.vars[**v].range.0 != 0) {
            return Err(format!(
                "the gathered load of `{x}` is read over a shard of `{}`",
                names[*v]
            ));
        }
        let mut order = own;
        order.splice(axis..axis, others.iter().copied());
        let lhs: Vec<String> = order.iter().map(|v| names[*v].clone()).collect();
        let extents: Vec<i64> = order.iter().map(|v| self.inst.vars[*v].range.1).collect();
        let value = self.term(w, c, &order, &lhs, xty.dtype)?;
        let upd = TensorType::new(xty.dtype, extents.clone());
        let gen = self.assemble("", value, (out, &upd), lhs.clone(), extra);
        let by = g.by[axis].as_ref().expect("a gathered dimension");
        let load = call(Func::Cast(DType::I64), vec![w.write(by)]);
        let at = plus_affine(load, &g.index[axis], &names);
        let at_port = fresh_port(&format!("at_{x}"), &self.port_names(&self.target_name()));
        let at_ty = TensorType::new(DType::I64, extents);
        let idx = self.assemble("", at, (&at_port, &at_ty), lhs, &[]);
        let mut shape = xty.shape.clone();
        shape[axis] = others.iter().map(|v| self.inst.vars[*v].range.1).product();
        Ok(Piece {
            gen,
            places: vec![],
            scatter: Some(ScatterPiece { idx, axis, shape }),
        })
    }
}

impl Emitter<'_> {
    /// The adjoints of a `scatter … reduce add` (operands of the rebuilt graph) given the
    /// adjoint `dy` of its value: the base's is `dy` itself, the updates' `dy` gathered back at
    /// the indices (`d[i0, .., ia, ..] = dy[i0, .., idx[i0, .., ia, ..], ..]`, wrapping a
    /// negative index as the scatter did). Other reductions have no adjoint yet (an error).
    pub fn scatter_adjoint(
        &mut self,
        s: &Scatter,
        dy: ValueId,
        want: &dyn Fn(ValueId) -> bool,
    ) -> Result<Vec<(ValueId, ValueId)>, String> {
        if s.reduce != ScatterReduce::Add {
            return Err(format!("a `scatter … reduce {}`", s.reduce.name()));
        }
        let mut out = vec![(s.base, dy)];
        if want(s.upd) && self.ty(s.upd).dtype.is_float() {
            let (ut, it, yt) = (self.ty(s.upd), self.ty(s.idx), self.ty(dy));
            let lhs: Vec<String> = (0..ut.rank()).map(|d| format!("i{d}")).collect();
            let sp = Span::default();
            let idx = (0..ut.rank())
                .map(|d| match d == s.axis {
                    true => Index::Gather(Gather {
                        tensor: "idx".into(),
                        indices: lhs.iter().map(|v| IExpr::Name(v.clone(), sp)).collect(),
                        offset: None,
                        span: sp,
                        tensor_span: sp,
                    }),
                    false => Index::Expr(IExpr::Name(lhs[d].clone(), sp)),
                })
                .collect();
            let value = KExpr {
                kind: KExprKind::Access("dy".into(), idx),
                span: sp,
            };
            let name = format!("d_{}", self.name(s.upd));
            let op = one_stmt(
                self.op_name(&format!("grad_{}", self.name(s.upd))),
                vec![port("dy", &yt), port("idx", &it)],
                &ut,
                lhs,
                value,
            );
            let d = self.apply(op, vec![dy, s.idx], &[name])[0];
            out.push((s.upd, d));
        }
        Ok(out)
    }
}
