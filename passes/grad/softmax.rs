//! The row-local adjoint of a stabilised softmax or log-softmax kernel (docs/passes/grad.md,
//! rule 10). A kernel whose single output is, after its temporaries are substituted,
//!
//! - `y[R, j] = exp(x[R, j] - m[R]) / sum[k](exp(x[R, k] - m[R]))` (softmax), or
//! - `y[R, j] = x[R, j] - m[R] - log(sum[k](exp(x[R, k] - m[R])))` (log-softmax, also written
//!   `x[R, j] - (m[R] + log(s[R]))`),
//!
//! with `m[R] = max[k](x[R, k])`, its only input `x` read whole, is not split by the pass; its
//! adjoint is one op reading the forward's output `y` and the adjoint `d_y`:
//! `c[R] = sum[j](d_y[R, j] * y[R, j])`, `d_x[R, j] = y[R, j] * (d_y[R, j] - c[R])` (softmax) or
//! `c[R] = sum[j](d_y[R, j])`, `d_x[R, j] = d_y[R, j] - exp(y[R, j]) * c[R]` (log-softmax).
//! No adjoint flows through the max: the value does not depend on the shift `m` (the factor
//! `exp(-m)` cancels in the quotient, the term `-m` in `x - m - log(sum exp(x - m))`), so its
//! derivative with respect to `m` is zero, and the generic rule's terms for it cancel exactly
//! in real arithmetic. Any other kernel (a scaled exponent, an unshifted sum, a second input)
//! keeps the generic per-statement path.

use super::expr::{self, access_vars};
use super::kernel::{fresh_port, port};
use crate::diag::Span;
use crate::ir::instance::{CExpr, CKind, CStmt, Instance, Src, Target};
use crate::ir::kernel::{BinOp, Func, IndexVar, OpBody, OpDef, Reduction, Stmt};
use std::collections::HashMap;

/// Which row-wise kernel an instance computes, and along which dimension of its input.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Kind {
    Softmax,
    LogSoftmax,
}

#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rowwise {
    pub kind: Kind,
    pub axis: usize,
}

/// The instance's softmax or log-softmax form, if it is one.
pub fn recognise(inst: &Instance) -> Option<Rowwise> {
    let stmts = inst.stmts.as_ref()?;
    let (x, y) = (inst.inputs.first()?, inst.outputs.first()?);
    if inst.inputs.len() != 1 || inst.outputs.len() != 1 || x != y || !x.dtype.is_float() {
        return None;
    }
    let out = stmts.iter().find(|s| s.target == Target::Output(0))?;
    let m = Matcher {
        inst,
        stmts,
        out: &out.vars,
        axis: 0,
    };
    (0..x.shape.len()).find_map(|axis| {
        let m = Matcher { axis, ..m };
        let j = out.vars[axis];
        let kind = if m.softmax(&out.value, &HashMap::new(), j) {
            Kind::Softmax
        } else if m.log_softmax(&out.value, &HashMap::new(), j) {
            Kind::LogSoftmax
        } else {
            return None;
        };
        Some(Rowwise { kind, axis })
    })
}

/// Variable renaming from a temporary's statement to the output statement's variables.
type Sub = HashMap<usize, usize>;

#[derive(Clone, Copy)]
struct Matcher<'a> {
    inst: &'a Instance,
    stmts: &'a [CStmt],
    /// The output statement's variables, in the dimension order of `x`.
    out: &'a [usize],
    axis: usize,
}

impl<'a> Matcher<'a> {
    fn canon(sub: &Sub, v: usize) -> usize {
        sub.get(&v).copied().unwrap_or(v)
    }

    /// `e` with loads of temporaries replaced by their definitions (and the renaming they need).
    fn resolve<'e>(&self, mut e: &'e CExpr, sub: &Sub) -> (&'e CExpr, Sub)
    where
        'a: 'e,
    {
        let mut sub = sub.clone();
        while let CKind::Load {
            src: Src::Temp(t),
            index,
            ..
        } = &e.kind
        {
            let Some(def) = self.stmts.iter().find(|s| s.target == Target::Temp(*t)) else {
                break;
            };
            let mut next = Sub::new();
            for (a, v) in index.iter().zip(&def.vars) {
                match (a.terms.as_slice(), a.constant) {
                    ([(w, 1)], 0) => next.insert(*v, Self::canon(&sub, *w)),
                    _ => return (e, sub),
                };
            }
            (e, sub) = (&def.value, next);
        }
        (e, sub)
    }

    /// `x[R, j]`: the input read whole, the row variables in place and `j` along the axis.
    fn is_x(&self, e: &CExpr, sub: &Sub, j: usize) -> bool {
        let (e, sub) = self.resolve(e, sub);
        let CKind::Load {
            src: Src::Input(0),
            index,
            ..
        } = &e.kind
        else {
            return false;
        };
        let shape = &self.inst.inputs[0].shape;
        index.len() == shape.len()
            && index.iter().enumerate().all(|(d, a)| {
                let want = if d == self.axis { j } else { self.out[d] };
                match (a.terms.as_slice(), a.constant) {
                    ([(w, 1)], 0) => {
                        Self::canon(&sub, *w) == want && self.inst.vars[*w].range == (0, shape[d])
                    }
                    _ => false,
                }
            })
    }

    /// `red[k](f(k))` for a single fresh variable `k`.
    fn reduce(
        &self,
        e: &CExpr,
        sub: &Sub,
        kind: Reduction,
        f: impl Fn(&CExpr, &Sub, usize) -> bool,
    ) -> bool {
        let (e, mut sub) = self.resolve(e, sub);
        match &e.kind {
            CKind::Reduce {
                kind: r,
                vars,
                body,
            } if *r == kind && vars.len() == 1 => {
                sub.insert(vars[0], vars[0]);
                f(body, &sub, vars[0])
            }
            _ => false,
        }
    }

    /// `m[R] = max[k](x[R, k])`.
    fn is_max(&self, e: &CExpr, sub: &Sub) -> bool {
        self.reduce(e, sub, Reduction::Max, |b, s, k| self.is_x(b, s, k))
    }

    /// `x[R, j] - m[R]`.
    fn is_shift(&self, e: &CExpr, sub: &Sub, j: usize) -> bool {
        let (e, sub) = self.resolve(e, sub);
        match &e.kind {
            CKind::Binary(BinOp::Sub, a, b) => self.is_x(a, &sub, j) && self.is_max(b, &sub),
            _ => false,
        }
    }

    /// `exp(x[R, j] - m[R])`.
    fn is_exp_shift(&self, e: &CExpr, sub: &Sub, j: usize) -> bool {
        let (e, sub) = self.resolve(e, sub);
        match &e.kind {
            CKind::Call(Func::Exp, args) if args.len() == 1 => self.is_shift(&args[0], &sub, j),
            _ => false,
        }
    }

    /// `s[R] = sum[k](exp(x[R, k] - m[R]))`.
    fn is_sum(&self, e: &CExpr, sub: &Sub) -> bool {
        self.reduce(e, sub, Reduction::Sum, |b, s, k| self.is_exp_shift(b, s, k))
    }

    /// `log(s[R])`.
    fn is_log_sum(&self, e: &CExpr, sub: &Sub) -> bool {
        let (e, sub) = self.resolve(e, sub);
        match &e.kind {
            CKind::Call(Func::Log, args) if args.len() == 1 => self.is_sum(&args[0], &sub),
            _ => false,
        }
    }

    /// `exp(x[R, j] - m[R]) / s[R]`.
    fn softmax(&self, e: &CExpr, sub: &Sub, j: usize) -> bool {
        let (e, sub) = self.resolve(e, sub);
        match &e.kind {
            CKind::Binary(BinOp::Div, a, b) => {
                self.is_exp_shift(a, &sub, j) && self.is_sum(b, &sub)
            }
            _ => false,
        }
    }

    /// `x[R, j] - m[R] - log(s[R])` or `x[R, j] - (m[R] + log(s[R]))`.
    fn log_softmax(&self, e: &CExpr, sub: &Sub, j: usize) -> bool {
        let (e, sub) = self.resolve(e, sub);
        let CKind::Binary(BinOp::Sub, a, b) = &e.kind else {
            return false;
        };
        if self.is_shift(a, &sub, j) && self.is_log_sum(b, &sub) {
            return true;
        }
        let (b, bs) = self.resolve(b, &sub);
        match &b.kind {
            CKind::Binary(BinOp::Add, p, q) => {
                self.is_x(a, &sub, j)
                    && ((self.is_max(p, &bs) && self.is_log_sum(q, &bs))
                        || (self.is_log_sum(p, &bs) && self.is_max(q, &bs)))
            }
            _ => false,
        }
    }
}

/// The adjoint op of the row-wise kernel `r` of `inst`, named `name`: inputs `(y, d_y)` (the
/// forward's output and its adjoint), output the adjoint of the input, all of the input's type.
pub fn adjoint_op(inst: &Instance, r: Rowwise, name: &str) -> OpDef {
    let out = inst.stmts.as_ref().and_then(|s| {
        s.iter()
            .find(|s| s.target == Target::Output(0))
            .map(|s| s.vars.clone())
    });
    let out = out.expect("a recognised kernel has its output statement");
    let vars: Vec<String> = out
        .iter()
        .map(|v| inst.vars[*v].name.replace('.', "_"))
        .collect();
    let y = inst.signature.outputs[0].name.clone();
    let dy = fresh_port(&format!("d_{y}"), &vars_and(&vars, &[&y]));
    let dx_base = format!("d_{}", inst.signature.inputs[0].name);
    let dx = fresh_port(&dx_base, &vars_and(&vars, &[&y, &dy]));
    let c = fresh_port("c", &vars_and(&vars, &[&y, &dy, &dx]));
    let rows: Vec<String> = (vars.iter().enumerate())
        .filter(|(d, _)| *d != r.axis)
        .map(|(_, v)| v.clone())
        .collect();
    let (yv, dyv) = (access_vars(&y, &vars), access_vars(&dy, &vars));
    let cv = access_vars(&c, &rows);
    let j = vars[r.axis].clone();
    let (csum, value) = match r.kind {
        Kind::Softmax => (
            expr::mul(dyv.clone(), yv.clone()),
            expr::mul(yv.clone(), expr::bin(BinOp::Sub, dyv, cv)),
        ),
        Kind::LogSoftmax => (
            dyv.clone(),
            expr::bin(
                BinOp::Sub,
                dyv,
                expr::mul(expr::call(Func::Exp, vec![yv]), cv),
            ),
        ),
    };
    let ty = &inst.inputs[0];
    OpDef {
        name: name.to_string(),
        params: vec![],
        inputs: vec![port(&y, ty), port(&dy, ty)],
        outputs: vec![port(&dx, ty)],
        body: OpBody::Kernel(vec![
            stmt(&c, &rows, expr::reduce(Reduction::Sum, vec![j], csum)),
            stmt(&dx, &vars, value),
        ]),
        span: Span::default(),
        name_span: Span::default(),
    }
}

fn vars_and(vars: &[String], more: &[&str]) -> Vec<String> {
    let mut v = vars.to_vec();
    v.extend(more.iter().map(|s| s.to_string()));
    v
}

fn stmt(target: &str, lhs: &[String], value: crate::ir::kernel::KExpr) -> Stmt {
    let sp = Span::default();
    Stmt {
        target: target.to_string(),
        indices: lhs.iter().map(|v| IndexVar::Var(v.clone(), sp)).collect(),
        value,
        span: sp,
        target_span: sp,
    }
}
