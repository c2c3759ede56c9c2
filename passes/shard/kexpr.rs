//! Walks over kernel expressions (`KExpr`) that both halves of sharding need: finding the
//! reduction over a variable, the tensors an expression reads, and replacing one node. Kept
//! apart so that `split.rs` (kernels split into pieces) and `reduce.rs` (reductions split into
//! partials) each depend on it and not on each other.

use crate::ir::kernel::*;

/// The single reduction over `var` in `e` (and not inside another reduction).
pub fn find_reduce<'e>(e: &'e KExpr, var: &str) -> Vec<&'e KExpr> {
    match &e.kind {
        KExprKind::Reduce(_, vars, _)
            if vars
                .iter()
                .any(|v| matches!(v, IndexVar::Var(n, _) if n == var)) =>
        {
            vec![e]
        }
        KExprKind::Reduce(..) => vec![],
        KExprKind::Call(_, args) => args.iter().flat_map(|a| find_reduce(a, var)).collect(),
        KExprKind::Unary(_, a) => find_reduce(a, var),
        KExprKind::Binary(_, a, b) => find_reduce(a, var)
            .into_iter()
            .chain(find_reduce(b, var))
            .collect(),
        _ => vec![],
    }
}

/// `e` with the node at `target` (by address) replaced by `with`.
pub fn replace(e: &KExpr, target: *const KExpr, with: &KExpr) -> KExpr {
    if std::ptr::eq(e, target) {
        return with.clone();
    }
    let kind = match &e.kind {
        KExprKind::Call(f, args) => {
            KExprKind::Call(*f, args.iter().map(|a| replace(a, target, with)).collect())
        }
        KExprKind::Unary(op, a) => KExprKind::Unary(*op, Box::new(replace(a, target, with))),
        KExprKind::Binary(op, a, b) => KExprKind::Binary(
            *op,
            Box::new(replace(a, target, with)),
            Box::new(replace(b, target, with)),
        ),
        other => other.clone(),
    };
    KExpr { kind, span: e.span }
}

/// Names of the tensors `e` reads.
pub fn reads(e: &KExpr, out: &mut Vec<String>) {
    match &e.kind {
        KExprKind::Access(n, idx) => {
            if !out.contains(n) {
                out.push(n.clone());
            }
            for i in idx {
                match i {
                    Index::Gather(g) if !out.contains(&g.tensor) => out.push(g.tensor.clone()),
                    _ => {}
                }
            }
        }
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => reads(b, out),
        KExprKind::Call(_, args) => args.iter().for_each(|a| reads(a, out)),
        KExprKind::Binary(_, a, b) => {
            reads(a, out);
            reads(b, out);
        }
        _ => {}
    }
}

/// `e` with each shape symbol of `syms` used as a value replaced by its extent (an epilogue
/// keeps the whole tensor's `B` after dropping the port that bound it).
pub fn with_extents(e: &KExpr, syms: &std::collections::HashMap<String, i64>) -> KExpr {
    let go = |a: &KExpr| Box::new(with_extents(a, syms));
    let kind = match &e.kind {
        KExprKind::Name(n) => match syms.get(n) {
            Some(v) => KExprKind::Int(*v),
            None => KExprKind::Name(n.clone()),
        },
        KExprKind::Call(f, args) => {
            KExprKind::Call(*f, args.iter().map(|a| with_extents(a, syms)).collect())
        }
        KExprKind::Unary(op, a) => KExprKind::Unary(*op, go(a)),
        KExprKind::Binary(op, a, b) => KExprKind::Binary(*op, go(a), go(b)),
        KExprKind::Reduce(r, vars, b) => KExprKind::Reduce(*r, vars.clone(), go(b)),
        other => other.clone(),
    };
    KExpr { kind, span: e.span }
}
