//! The safety net of every rewrite: the printed op is instantiated by the verifier for the new
//! apply's argument types, and its lowered kernel must be *the same computation* as the
//! composed [`FKernel`]: the same statements over the same variable ranges (reduction extents
//! included), the same temporaries, and expression trees equal node by node, dtypes included.
//!
//! Equality is up to variable numbering and three exact identities the printer relies on:
//! `d(literal)` is the literal of dtype `d`, `d(i)` is the variable `i` used as a `d`, and
//! `-literal` is the negated literal. If anything differs (an extent inferred from another
//! access, a literal typed differently, a bound the verifier rejects) the rewrite is dropped.

use super::affine::{canonical, Res};
use super::emit::Emitted;
use super::kernel::FKernel;
use crate::diag::Span;
use crate::ir::instance::{Affine, CExpr, CKind, Instance, Scalar, Target};
use crate::ir::kernel::{Func, UnOp};
use crate::ir::TensorType;
use crate::verify::{instantiate, Site};
use tapc_runtime::DType;

/// Instantiates the emitted op and compares it with `fk`; returns the instance.
pub fn check(fk: &FKernel, em: &Emitted, outputs: &[TensorType]) -> Res<Instance> {
    let args: Vec<TensorType> = fk.inputs.iter().map(|p| p.ty.clone()).collect();
    let site = Site {
        span: Span::default(),
    };
    let inst = instantiate(&em.op, &[], &args, fk.range.as_deref(), site)
        .map_err(|_| "the fused op does not verify")?;
    if inst.outputs != outputs {
        return Err("output types differ");
    }
    // Shards: every argument window must start where the composed loads assume.
    if inst.origins.len() != fk.inputs.len()
        || fk
            .inputs
            .iter()
            .zip(&inst.origins)
            .any(|(p, o)| p.origin != *o)
    {
        return Err("window origins differ");
    }
    if inst.parallel != fk.parallel || inst.temps.len() != fk.temps.len() {
        return Err("index space or temporaries differ");
    }
    let stmts = inst.stmts.as_deref().ok_or("no kernel")?;
    if stmts.len() != fk.stmts.len() {
        return Err("statement count differs");
    }
    let mut cmp = Cmp {
        fk,
        inst: &inst,
        map: vec![None; fk.vars.len()],
    };
    for p in 0..fk.parallel {
        if inst.vars[p].name != em.parallel[p] || inst.vars[p].range != fk.vars[p].range {
            return Err("parallel variables differ");
        }
        cmp.map[p] = Some(p);
    }
    for (a, b) in fk.temps.iter().zip(&inst.temps) {
        if a.dtype != b.dtype || !cmp.same_vars(&a.vars, &b.vars) {
            return Err("temporaries differ");
        }
    }
    for (a, b) in fk.stmts.iter().zip(stmts) {
        let same_target = match (a.target.clone(), b.target.clone()) {
            (Target::Output(x), Target::Output(y)) | (Target::Temp(x), Target::Temp(y)) => x == y,
            _ => false,
        };
        if !same_target || !cmp.same_vars(&a.vars, &b.vars) {
            return Err("statement targets differ");
        }
        if !cmp.same(&norm(&a.value), &norm(&b.value)) {
            return Err("statement values differ");
        }
    }
    Ok(inst)
}

struct Cmp<'a> {
    fk: &'a FKernel,
    inst: &'a Instance,
    /// Composed variable → lowered variable.
    map: Vec<Option<usize>>,
}

impl Cmp<'_> {
    fn same_vars(&self, a: &[usize], b: &[usize]) -> bool {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(&x, &y)| self.map.get(x).copied().flatten() == Some(y))
    }

    fn same_affine(&self, a: &Affine, b: &Affine) -> bool {
        let mut terms = Vec::new();
        for &(v, c) in &a.terms {
            match self.map.get(v).copied().flatten() {
                Some(w) => terms.push((w, c)),
                None => return false,
            }
        }
        canonical(&Affine {
            terms,
            constant: a.constant,
        }) == canonical(b)
    }

    fn same(&mut self, a: &CExpr, b: &CExpr) -> bool {
        if a.dtype != b.dtype {
            return false;
        }
        match (&a.kind, &b.kind) {
            (CKind::Const(x), CKind::Const(y)) => same_scalar(x.cast(a.dtype), y.cast(b.dtype)),
            (CKind::Var(x), CKind::Var(y)) => self.map.get(*x).copied().flatten() == Some(*y),
            (
                CKind::Load {
                    src: s1, index: i1, ..
                },
                CKind::Load {
                    src: s2, index: i2, ..
                },
            ) => {
                s1 == s2
                    && i1.len() == i2.len()
                    && i1.iter().zip(i2).all(|(x, y)| self.same_affine(x, y))
            }
            (
                CKind::Reduce {
                    kind: k1,
                    vars: v1,
                    body: b1,
                },
                CKind::Reduce {
                    kind: k2,
                    vars: v2,
                    body: b2,
                },
            ) => {
                if k1 != k2 || v1.len() != v2.len() {
                    return false;
                }
                for (&x, &y) in v1.iter().zip(v2) {
                    if self.fk.vars[x].range != self.inst.vars[y].range {
                        return false;
                    }
                    match self.map.get(x).copied().flatten() {
                        Some(z) if z != y => return false,
                        _ => self.map[x] = Some(y),
                    }
                }
                self.same(b1, b2)
            }
            (CKind::Call(f1, a1), CKind::Call(f2, a2)) => {
                f1 == f2 && a1.len() == a2.len() && a1.iter().zip(a2).all(|(x, y)| self.same(x, y))
            }
            (CKind::Unary(o1, x), CKind::Unary(o2, y)) => o1 == o2 && self.same(x, y),
            (CKind::Binary(o1, x1, y1), CKind::Binary(o2, x2, y2)) => {
                o1 == o2 && self.same(x1, x2) && self.same(y1, y2)
            }
            _ => false,
        }
    }
}

fn same_scalar(a: Scalar, b: Scalar) -> bool {
    match (a, b) {
        (Scalar::F(x), Scalar::F(y)) => x.to_bits() == y.to_bits(),
        (Scalar::I(x), Scalar::I(y)) => x == y,
        (Scalar::B(x), Scalar::B(y)) => x == y,
        _ => false,
    }
}

/// Applies the identities `d(lit) = lit:d`, `d(i:i64) = i:d`, `-(lit:d) = (-lit):d`.
fn norm(e: &CExpr) -> CExpr {
    let kind = match &e.kind {
        CKind::Reduce { kind, vars, body } => CKind::Reduce {
            kind: *kind,
            vars: vars.clone(),
            body: Box::new(norm(body)),
        },
        CKind::Call(f, args) => {
            let args: Vec<CExpr> = args.iter().map(norm).collect();
            if let (Func::Cast(d), [a]) = (f, args.as_slice()) {
                match a.kind {
                    CKind::Const(s) => {
                        return CExpr {
                            kind: CKind::Const(s.cast(a.dtype).cast_from(a.dtype, *d)),
                            dtype: *d,
                        }
                    }
                    CKind::Var(v) if a.dtype == DType::I64 => {
                        return CExpr {
                            kind: CKind::Var(v),
                            dtype: *d,
                        }
                    }
                    _ => {}
                }
            }
            CKind::Call(*f, args)
        }
        CKind::Unary(op, a) => {
            let a = norm(a);
            if let (UnOp::Neg, CKind::Const(s)) = (op, &a.kind) {
                let v = match s.cast(a.dtype) {
                    Scalar::F(x) => Scalar::F(-x),
                    Scalar::I(x) => Scalar::I(x.wrapping_neg()),
                    b => b,
                };
                if !matches!(v, Scalar::B(_)) {
                    return CExpr {
                        kind: CKind::Const(v.cast(e.dtype)),
                        dtype: e.dtype,
                    };
                }
            }
            CKind::Unary(*op, Box::new(a))
        }
        CKind::Binary(op, a, b) => CKind::Binary(*op, Box::new(norm(a)), Box::new(norm(b))),
        k => k.clone(),
    };
    CExpr {
        kind,
        dtype: e.dtype,
    }
}
