//! Gathered indices of kernel accesses: `E[ids[b, s], h]`, `x[i, idx[i, j] + 1]`. An index
//! that is an access of another tensor (plus or minus an affine offset) lowers to an
//! [`Index::Gather`]; its own indices must be affine (a nested gather is E0039). Whether the
//! tensor is an integer input is checked by the verifier, which knows the ports' dtypes.

use super::cx::{err, Cx};
use crate::diag::codes;
use crate::ir::kernel::{Gather, IOp, Index};
use crate::syntax::ast::{self, ExprKind};

/// `ids[...]`, `ids[...] ± e` or `e + ids[...]`: the access and the offset, if `e` has that
/// form.
fn split(e: &ast::Expr) -> Option<(&ast::Expr, Option<(IOp, &ast::Expr)>)> {
    match &e.kind {
        ExprKind::Access { .. } => Some((e, None)),
        ExprKind::Binary(op @ (ast::BinOp::Plus | ast::BinOp::Minus), a, b) => {
            let iop = if *op == ast::BinOp::Plus {
                IOp::Add
            } else {
                IOp::Sub
            };
            match (&a.kind, &b.kind) {
                (ExprKind::Access { .. }, _) if !contains_access(b) => Some((a, Some((iop, b)))),
                (_, ExprKind::Access { .. }) if iop == IOp::Add && !contains_access(a) => {
                    Some((b, Some((iop, a))))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// Whether `e` reads a tensor anywhere.
pub(super) fn contains_access(e: &ast::Expr) -> bool {
    match &e.kind {
        ExprKind::Access { .. } => true,
        ExprKind::Unary(_, a) => contains_access(a),
        ExprKind::Binary(_, a, b) => contains_access(a) || contains_access(b),
        ExprKind::Call { args, .. } => args.iter().any(contains_access),
        ExprKind::Reduce { body, .. } => contains_access(body),
        _ => false,
    }
}

impl Cx<'_> {
    /// The gathered index `e`, `None` when `e` reads no tensor (then it is an affine index);
    /// `Some(None)` when it reads one in a form that is not a gather (reported).
    pub(super) fn gather_index(&mut self, e: &ast::Expr) -> Option<Option<Index>> {
        if !contains_access(e) {
            return None;
        }
        let Some((access, offset)) = split(e) else {
            self.report(
                err(
                    codes::BAD_GATHER,
                    "a gathered index must be a tensor element plus or minus an affine offset",
                    e.span,
                    "not a gather",
                )
                .note("write `E[ids[i], j]` or `x[idx[i] + 1]`: the loaded integer is the index, as in numpy's `E[ids]`"),
            );
            return Some(None);
        };
        let ExprKind::Access { base, indices } = &access.kind else {
            unreachable!("split returns an access")
        };
        let mut inner = Vec::new();
        for i in indices {
            if contains_access(i) {
                self.report(
                    err(
                        codes::BAD_GATHER,
                        "nested gathers are not supported",
                        i.span,
                        "an index of a gathered index",
                    )
                    .note("the indices of the index tensor must be affine; gather the inner index into a tensor of its own first"),
                );
                return Some(None);
            }
            inner.push(self.iexpr(i, codes::NON_AFFINE, "tensor index"));
        }
        let offset = offset.map(|(op, o)| (op, self.iexpr(o, codes::NON_AFFINE, "tensor index")));
        let inner: Option<Vec<_>> = inner.into_iter().collect();
        let offset = match offset {
            Some((op, Some(o))) => Some((op, o)),
            Some((_, None)) => return Some(None),
            None => None,
        };
        Some(inner.map(|indices| {
            Index::Gather(Gather {
                tensor: base.text.clone(),
                indices,
                offset,
                span: e.span,
                tensor_span: base.span,
            })
        }))
    }
}
