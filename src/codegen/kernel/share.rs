//! Row values computed once (issue 22, softmax): a row statistic `s[i] = sum[r](e(i, r))`
//! whose body `e` calls a math function (softmax's `exp(x[i, r] - m[i])`), followed by a
//! statement over `[i, j]` that computes the same `e(i, j)` again (`y[i, j] = exp(x[i, j] -
//! m[i]) / s[i]`), gets a row temporary `t[i, j] = e(i, j)` written first; the sum reads
//! `t[i, r]` and the later statement `t[i, j]`. With `i` fused, `t` is one row (in L1 at
//! softmax widths), so the function runs once per element instead of twice, for one extra
//! pass over the row in cache. The values are the same as computing `e` twice. The sum is
//! not indexed by `j`, so no task is split along `j` (`plan`): every chunk writes the whole
//! row of `t` that its sum reads.

use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Src, Target, Temp};
use crate::ir::kernel::Reduction;

/// `e` with variable `from` renamed `to`.
fn rename(e: &CExpr, from: usize, to: usize) -> CExpr {
    let ren = |a: &Affine| Affine {
        terms: a
            .terms
            .iter()
            .map(|&(v, c)| (if v == from { to } else { v }, c))
            .collect(),
        constant: a.constant,
    };
    let kind = match &e.kind {
        CKind::Var(v) if *v == from => CKind::Var(to),
        CKind::Load { src, index, texts } => CKind::Load {
            src: src.clone(),
            index: index.iter().map(ren).collect(),
            texts: texts.clone(),
        },
        CKind::Gather(g) => {
            let mut g = g.clone();
            g.index = g.index.iter().map(ren).collect();
            g.by =
                g.by.iter()
                    .map(|b| b.as_ref().map(|b| rename(b, from, to)))
                    .collect();
            CKind::Gather(g)
        }
        CKind::Reduce { kind, vars, body } => CKind::Reduce {
            kind: *kind,
            vars: vars.clone(),
            body: Box::new(rename(body, from, to)),
        },
        CKind::Call(f, a) => CKind::Call(*f, a.iter().map(|x| rename(x, from, to)).collect()),
        CKind::Unary(op, a) => CKind::Unary(*op, Box::new(rename(a, from, to))),
        CKind::Binary(op, a, b) => CKind::Binary(
            *op,
            Box::new(rename(a, from, to)),
            Box::new(rename(b, from, to)),
        ),
        k => k.clone(),
    };
    CExpr {
        kind,
        dtype: e.dtype,
    }
}

/// Replaces every occurrence of `what` in `e` (outside reductions) by `by`; how many.
fn replace(e: &mut CExpr, what: &CExpr, by: &CExpr) -> usize {
    if e == what {
        *e = by.clone();
        return 1;
    }
    match &mut e.kind {
        CKind::Call(_, a) => a.iter_mut().map(|x| replace(x, what, by)).sum(),
        CKind::Unary(_, a) => replace(a, what, by),
        CKind::Binary(_, a, b) => replace(a, what, by) + replace(b, what, by),
        _ => 0,
    }
}

fn calls(e: &CExpr) -> bool {
    match &e.kind {
        CKind::Call(..) => true,
        CKind::Unary(_, a) => calls(a),
        CKind::Binary(_, a, b) => calls(a) || calls(b),
        _ => false,
    }
}

/// A load of temporary `t` at `vars`, `r` standing for `j`.
fn temp_load(t: usize, vars: &[usize], j: usize, r: usize, e: &CExpr) -> CExpr {
    let index = vars
        .iter()
        .map(|&v| Affine::var(if v == j { r } else { v }))
        .collect();
    CExpr {
        kind: CKind::Load {
            src: Src::Temp(t),
            index,
            texts: vec![],
        },
        dtype: e.dtype,
    }
}

/// The first sum statement of `stmts` whose body a later statement recomputes, rewritten as
/// described in the module docs: the instance with the new temporary and the statements.
/// Only rows of `fused` variables (one row of the temporary at a time) are shared.
pub fn share_rows(
    inst: &Instance,
    stmts: &[CStmt],
    fused: &[usize],
) -> Option<(Instance, Vec<CStmt>)> {
    for (a, sa) in stmts.iter().enumerate() {
        if sa.vars.is_empty() || !sa.vars.iter().all(|v| fused.contains(v)) {
            continue;
        }
        let CKind::Reduce {
            kind: Reduction::Sum,
            vars,
            body,
        } = &sa.value.kind
        else {
            continue;
        };
        let ([r], Target::Temp(_)) = (vars.as_slice(), &sa.target) else {
            continue;
        };
        if !calls(body) {
            continue;
        }
        for b in a + 1..stmts.len() {
            let sb = &stmts[b];
            let rest: Vec<usize> = sb
                .vars
                .iter()
                .copied()
                .filter(|v| !sa.vars.contains(v))
                .collect();
            let [j] = rest.as_slice() else { continue };
            if sb.vars.len() != sa.vars.len() + 1 || inst.vars[*j].range != inst.vars[*r].range {
                continue;
            }
            let at_j = rename(body, *r, *j);
            let mut value = sb.value.clone();
            let t = inst.temps.len();
            if replace(&mut value, &at_j, &temp_load(t, &sb.vars, *j, *j, body)) == 0 {
                continue;
            }
            let mut inst = inst.clone();
            inst.temps.push(Temp {
                name: "shared".into(),
                dtype: body.dtype,
                vars: sb.vars.clone(),
            });
            let mut out = stmts.to_vec();
            out[b].value = value;
            out[a].value = CExpr {
                kind: CKind::Reduce {
                    kind: Reduction::Sum,
                    vars: vars.clone(),
                    body: Box::new(temp_load(t, &sb.vars, *j, *r, body)),
                },
                dtype: sa.value.dtype,
            };
            out.insert(
                a,
                CStmt {
                    target: Target::Temp(t),
                    vars: sb.vars.clone(),
                    value: at_j,
                },
            );
            return Some((inst, out));
        }
    }
    None
}
