//! Epilogue fusion at code generation: a temporary that one later statement reads at exactly
//! its own point (`h[i, j] = sum[k](...) + b[j]` then `z[i, j] = h[i, j] + r[i, j]`, what `fuse`
//! makes of a linear layer and a residual add) is substituted into that statement, so the
//! reduction keeps its register blocking and packing and the epilogue runs once per output
//! tile, in registers. Repeated uses of the substituted reduction (an activation reading `h`
//! three times) are evaluated once: the kernel memoises top-level reductions per tile.
//!
//! Values are unchanged: the substituted expression has the temporary's dtype and is computed
//! by the same operations, only without the round trip through memory.

use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Instance, Src, Target};
use crate::verify::visit_loads;

/// The statements of `inst` with every inlinable temporary substituted into its reader; the
/// statements that wrote those temporaries are dropped.
pub fn inline_epilogues(inst: &Instance) -> Vec<CStmt> {
    let Some(stmts) = inst.stmts.as_deref() else {
        return vec![];
    };
    let mut out: Vec<CStmt> = stmts.to_vec();
    let mut s = 0;
    while s < out.len() {
        match inlinable(inst, &out, s) {
            Some((t, reader)) => {
                let def = out.remove(s);
                let r = reader - 1;
                let mut value = out[r].value.clone();
                substitute(&mut value, t, &def.value);
                out[r].value = value;
            }
            None => s += 1,
        }
    }
    out
}

/// `Some((temp, reader))` when statement `s` writes a temporary that can be substituted into
/// statement `reader`.
fn inlinable(inst: &Instance, stmts: &[CStmt], s: usize) -> Option<(usize, usize)> {
    let def = &stmts[s];
    let Target::Temp(t) = def.target else {
        return None;
    };
    let temp = &inst.temps[t];
    if def.vars != temp.vars || def.value.dtype != temp.dtype || reads_temps(&def.value) {
        return None;
    }
    let exact: Vec<Affine> = temp.vars.iter().map(|&v| Affine::var(v)).collect();
    let mut reader = None;
    for (r, st) in stmts.iter().enumerate() {
        if r != s && st.target == Target::Temp(t) {
            return None; // written twice
        }
        let mut uses = 0;
        let mut ok = true;
        count_uses(&st.value, t, &exact, false, &mut uses, &mut ok);
        if !ok {
            return None;
        }
        if uses == 0 {
            continue;
        }
        let same_point =
            st.vars.len() == def.vars.len() && st.vars.iter().all(|v| def.vars.contains(v));
        // Only a reduction is worth memoising; an elementwise temporary is inlined when read once.
        let cheap_enough = uses == 1 || has_reduce(&def.value);
        if r < s || reader.is_some() || !same_point || !cheap_enough {
            return None;
        }
        reader = Some(r);
    }
    reader.map(|r| (t, r))
}

fn reads_temps(e: &CExpr) -> bool {
    let mut any = false;
    visit_loads(e, &mut |src, _| any |= matches!(src, Src::Temp(_)));
    any
}

pub fn has_reduce(e: &CExpr) -> bool {
    match &e.kind {
        CKind::Reduce { .. } => true,
        CKind::Call(_, a) => a.iter().any(has_reduce),
        CKind::Unary(_, a) => has_reduce(a),
        CKind::Binary(_, a, b) => has_reduce(a) || has_reduce(b),
        _ => false,
    }
}

/// Counts loads of temporary `t` in `e`; `ok` turns false on a load that is not at `exact` or
/// that sits inside a reduction (it would be evaluated once per reduction point).
fn count_uses(
    e: &CExpr,
    t: usize,
    exact: &[Affine],
    in_reduce: bool,
    n: &mut usize,
    ok: &mut bool,
) {
    match &e.kind {
        CKind::Load { src, index, .. } => {
            if *src == Src::Temp(t) {
                *n += 1;
                *ok &= !in_reduce && index == exact;
            }
        }
        CKind::Reduce { body, .. } => count_uses(body, t, exact, true, n, ok),
        CKind::Call(_, a) => a
            .iter()
            .for_each(|x| count_uses(x, t, exact, in_reduce, n, ok)),
        CKind::Unary(_, a) => count_uses(a, t, exact, in_reduce, n, ok),
        CKind::Binary(_, a, b) => {
            count_uses(a, t, exact, in_reduce, n, ok);
            count_uses(b, t, exact, in_reduce, n, ok);
        }
        // Gathers read inputs only, never a temporary.
        CKind::Const(_) | CKind::Var(_) | CKind::Gather(_) => {}
    }
}

/// Replaces every load of temporary `t` in `e` by `value`.
fn substitute(e: &mut CExpr, t: usize, value: &CExpr) {
    match &mut e.kind {
        CKind::Load { src, .. } if *src == Src::Temp(t) => *e = value.clone(),
        CKind::Load { .. } | CKind::Const(_) | CKind::Var(_) | CKind::Gather(_) => {}
        CKind::Reduce { body, .. } => substitute(body, t, value),
        CKind::Call(_, a) => a.iter_mut().for_each(|x| substitute(x, t, value)),
        CKind::Unary(_, a) => substitute(a, t, value),
        CKind::Binary(_, a, b) => {
            substitute(a, t, value);
            substitute(b, t, value);
        }
    }
}
