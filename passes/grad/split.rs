//! Long adjoint statements written as several: the parser refuses a statement with more than
//! `MAX_NESTING` operators and brackets (E0005), and the adjoint of a deep kernel that reads
//! its input many times (one term per load, each recomputing its path, rule 4) can pass that.
//! Sub-expressions that read only the statement's own variables move into temporaries
//! `t[lhs vars]`, the largest that fits first, until every statement fits: the same values,
//! in text that re-parses.

use crate::ir::kernel::{IExpr, Index, IndexVar, KExpr, KExprKind, Stmt};
use crate::syntax::MAX_NESTING;

/// Expression nodes per statement: each prints at most two of the tokens the parser counts
/// (an operator and a bracket), with room for the statement's own.
const BUDGET: usize = MAX_NESTING / 2 - 8;

/// `stmt` as statements each within [`BUDGET`]; temporaries are named apart from `taken`.
pub fn split(stmt: Stmt, taken: &[String]) -> Vec<Stmt> {
    let lhs: Option<Vec<String>> = (stmt.indices.iter())
        .map(|v| match v {
            IndexVar::Var(n, _) => Some(n.clone()),
            IndexVar::Variadic(..) => None,
        })
        .collect();
    let Some(lhs) = lhs else {
        return vec![stmt];
    };
    let (mut out, mut last) = (Vec::new(), stmt);
    // A temporary's access costs this much: hoisting anything smaller would not shorten.
    let access = 2 + 2 * lhs.len();
    while size(&last.value) > BUDGET {
        let Some(path) = largest(&last.value, access, &mut Vec::new()).map(|b| b.1) else {
            break;
        };
        let name = fresh(taken, &out);
        let access = KExpr {
            kind: KExprKind::Access(name.clone(), lhs.iter().map(|v| var_index(v)).collect()),
            span: last.span,
        };
        let sub = std::mem::replace(at(&mut last.value, &path), access);
        out.push(Stmt {
            target: name,
            indices: last.indices.clone(),
            value: sub,
            span: last.span,
            target_span: last.target_span,
        });
    }
    out.push(last);
    out
}

fn var_index(v: &str) -> Index {
    Index::Expr(IExpr::Name(v.to_string(), Default::default()))
}

/// `t1`, `t2`, ...: the first name neither `taken` nor a temporary of `made`.
fn fresh(taken: &[String], made: &[Stmt]) -> String {
    (1..)
        .map(|k| format!("t{k}"))
        .find(|n| !taken.contains(n) && !made.iter().any(|s| &s.target == n))
        .expect("an unused name")
}

/// Nodes of `e`, the index expressions of its accesses included.
fn size(e: &KExpr) -> usize {
    1 + match &e.kind {
        KExprKind::Access(_, idx) => idx.iter().map(index_size).sum(),
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => size(b),
        KExprKind::Call(_, args) => args.iter().map(size).sum(),
        KExprKind::Binary(_, a, b) => size(a) + size(b),
        KExprKind::Int(_) | KExprKind::Float(_) | KExprKind::Bool(_) | KExprKind::Name(_) => 0,
    }
}

fn index_size(i: &Index) -> usize {
    let mut n = 0;
    match i {
        Index::Expr(x) => x.visit_names(&mut |_, _| n += 1),
        Index::Gather(g) => g
            .indices
            .iter()
            .for_each(|x| x.visit_names(&mut |_, _| n += 1)),
        Index::Variadic(..) => {}
    }
    n + 1
}

/// The children of `e` that a temporary may stand for, with the variables each binds.
fn children(e: &KExpr) -> Vec<(&KExpr, Vec<String>)> {
    match &e.kind {
        KExprKind::Reduce(_, vars, b) => {
            let names = vars
                .iter()
                .map(|v| match v {
                    IndexVar::Var(n, _) | IndexVar::Variadic(n, _) => n.clone(),
                })
                .collect();
            vec![(b, names)]
        }
        KExprKind::Unary(_, b) => vec![(b, vec![])],
        KExprKind::Call(_, args) => args.iter().map(|a| (a, vec![])).collect(),
        KExprKind::Binary(_, a, b) => vec![(a, vec![]), (b, vec![])],
        _ => vec![],
    }
}

/// The largest proper sub-expression of `e` within [`BUDGET`] and above `least` nodes that
/// reads a tensor (so its dtype is known) and no variable a reduction around it binds
/// (`bound`): (size, path).
fn largest(e: &KExpr, least: usize, bound: &mut Vec<String>) -> Option<(usize, Vec<usize>)> {
    let mut best: Option<(usize, Vec<usize>)> = None;
    for (k, (c, binds)) in children(e).into_iter().enumerate() {
        let depth = bound.len();
        bound.extend(binds);
        let n = size(c);
        let free = !bound.iter().any(|v| super::expr::mentions(c, v).0);
        let here = (n <= BUDGET && n > least && free && reads(c)).then(|| (n, vec![k]));
        let below = largest(c, least, bound).map(|(m, mut p)| {
            p.insert(0, k);
            (m, p)
        });
        bound.truncate(depth);
        for cand in [here, below].into_iter().flatten() {
            if best.as_ref().is_none_or(|b| cand.0 > b.0) {
                best = Some(cand);
            }
        }
    }
    best
}

fn reads(e: &KExpr) -> bool {
    let mut r = Vec::new();
    super::expr::reads(e, &mut r);
    !r.is_empty()
}

/// The sub-expression of `e` at `path` (child positions as [`children`] lists them).
fn at<'a>(e: &'a mut KExpr, path: &[usize]) -> &'a mut KExpr {
    let Some((&k, rest)) = path.split_first() else {
        return e;
    };
    let child = match &mut e.kind {
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => b.as_mut(),
        KExprKind::Call(_, args) => &mut args[k],
        KExprKind::Binary(_, a, b) if k == 0 => a.as_mut(),
        KExprKind::Binary(_, _, b) => b.as_mut(),
        _ => unreachable!("a path through children"),
    };
    at(child, rest)
}
