//! The adjoint rules of kernel expressions: a walk from a statement's value down to the loads
//! of one source, carrying the adjoint of each sub-expression as a kernel expression over the
//! variables in scope (the statement's and the enclosing reductions'). Each load of the source
//! that is reached gives a [`Contribution`]; `kernel.rs` sums them into the source's adjoint.
//! Forward sub-expressions a rule needs (`exp(u)` for `exp`) are recomputed pointwise in the
//! adjoint kernel; forward graph values are never recomputed.

use super::expr::{self, bin, call, div, float, mul, neg, select, typed, Writer};
use crate::ir::instance::{Affine, CExpr, CKind, GatherLoad, Src};
use crate::ir::kernel::{BinOp, Func, KExpr, Reduction, UnOp};

/// One load of the source reached with its adjoint: `index` is the load's affine index,
/// `bound` the variables in scope there (the statement's first, then reductions').
pub struct Contribution {
    pub index: Vec<Affine>,
    pub adj: KExpr,
    pub bound: Vec<usize>,
    /// A gathered load (`E[ids[b], h]`): its adjoint is a scatter-add (`scatter.rs`).
    pub gather: Option<Box<GatherLoad>>,
}

pub struct Back<'w, 'a> {
    pub w: &'w mut Writer<'a>,
    /// The source whose loads are collected.
    pub source: Src,
    /// The statement's own value at its point (`y[i, j]`), for a `max`/`min` at the root.
    pub root: KExpr,
    pub out: Vec<Contribution>,
}

impl Back<'_, '_> {
    /// Walks `e` with adjoint `adj`; `root` says `e` is the statement's whole value.
    pub fn back(&mut self, e: &CExpr, adj: KExpr, bound: &mut Vec<usize>, root: bool) {
        if !e.dtype.is_float() {
            return; // integer and bool values have no gradient (docs/passes/grad.md)
        }
        match &e.kind {
            CKind::Const(_) | CKind::Var(_) => {}
            CKind::Load { src, index, .. } => {
                if *src == self.source {
                    self.out.push(Contribution {
                        index: index.clone(),
                        adj,
                        bound: bound.clone(),
                        gather: None,
                    });
                }
            }
            CKind::Gather(g) if Src::Input(g.input) == self.source => self.out.push(Contribution {
                index: g.index.clone(),
                adj,
                bound: bound.clone(),
                gather: Some(g.clone()),
            }),
            CKind::Gather(_) => {}
            CKind::Reduce { kind, vars, body } => {
                self.reduce(e, *kind, vars, body, adj, bound, root)
            }
            CKind::Call(f, args) => self.call(*f, args, adj, bound),
            CKind::Unary(UnOp::Neg, a) => self.back(a, neg(adj), bound, false),
            CKind::Unary(..) => {}
            CKind::Binary(op, a, b) => self.binary(*op, a, b, adj, bound),
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        e: &CExpr,
        kind: Reduction,
        vars: &[usize],
        body: &CExpr,
        adj: KExpr,
        bound: &mut Vec<usize>,
        root: bool,
    ) {
        let n = bound.len();
        bound.extend_from_slice(vars);
        match kind {
            Reduction::Sum => self.back(body, adj, bound, false),
            Reduction::Max | Reduction::Min => {
                // Ties share the adjoint equally (as `jax.grad` of `jnp.max` does).
                let r = if root {
                    self.root.clone()
                } else {
                    self.w.write(e)
                };
                let hit = bin(BinOp::Eq, self.w.write(body), r.clone());
                let (names, again) = self.w.write_bound(body, vars);
                let d = body.dtype;
                let tie = select(bin(BinOp::Eq, again, r), typed(1.0, d), typed(0.0, d));
                let count = expr::reduce(Reduction::Sum, names, tie);
                let a = select(hit, div(adj, count), float(0.0));
                self.back(body, a, bound, false)
            }
            Reduction::Prod => {
                // The product of the other factors, computed as such (exact where a factor is 0).
                let (names, again) = self.w.write_bound(body, vars);
                let same = vars
                    .iter()
                    .zip(&names)
                    .map(|(v, n)| {
                        let (a, b) = (self.w.vars[*v].clone(), n.clone());
                        bin(BinOp::Eq, expr::name(a), expr::name(b))
                    })
                    .reduce(|a, b| bin(BinOp::And, a, b))
                    .expect("a reduction has variables");
                let others = select(same, typed(1.0, body.dtype), again);
                let a = mul(adj, expr::reduce(Reduction::Prod, names, others));
                self.back(body, a, bound, false)
            }
            // `mean` is a sum and a division once verified; arg positions carry no gradient.
            Reduction::Mean | Reduction::ArgMax | Reduction::ArgMin => {}
        }
        bound.truncate(n);
    }

    fn call(&mut self, f: Func, args: &[CExpr], adj: KExpr, bound: &mut Vec<usize>) {
        let u = |s: &mut Self, i: usize| s.w.write(&args[i]);
        match f {
            Func::Cast(_) => {
                let inner = args[0].dtype;
                self.back(&args[0], call(Func::Cast(inner), vec![adj]), bound, false)
            }
            Func::Select => {
                let c = u(self, 0);
                let a = select(c.clone(), adj.clone(), float(0.0));
                self.back(&args[1], a, bound, false);
                self.back(&args[2], select(c, float(0.0), adj), bound, false)
            }
            Func::Max | Func::Min => {
                let op = if f == Func::Max { BinOp::Gt } else { BinOp::Lt };
                // `max(a, b)` is `a` where `a > b`, else `b` (ties go to `b`, as the value does).
                let c = bin(op, u(self, 0), u(self, 1));
                let a = select(c.clone(), adj.clone(), float(0.0));
                self.back(&args[0], a, bound, false);
                self.back(&args[1], select(c, float(0.0), adj), bound, false)
            }
            Func::Pow => {
                let (x, y) = (u(self, 0), u(self, 1));
                let dx = mul(
                    y.clone(),
                    call(Func::Pow, vec![x.clone(), sub(y.clone(), float(1.0))]),
                );
                let dy = mul(
                    call(Func::Pow, vec![x.clone(), y]),
                    call(Func::Log, vec![x]),
                );
                self.back(&args[0], mul(adj.clone(), dx), bound, false);
                self.back(&args[1], mul(adj, dy), bound, false)
            }
            Func::Floor | Func::Ceil => {} // zero almost everywhere, as in JAX
            _ => {
                let x = u(self, 0);
                let a = unary_adjoint(f, x, adj);
                self.back(&args[0], a, bound, false)
            }
        }
    }

    fn binary(&mut self, op: BinOp, a: &CExpr, b: &CExpr, adj: KExpr, bound: &mut Vec<usize>) {
        match op {
            BinOp::Add => {
                self.back(a, adj.clone(), bound, false);
                self.back(b, adj, bound, false)
            }
            BinOp::Sub => {
                self.back(a, adj.clone(), bound, false);
                self.back(b, neg(adj), bound, false)
            }
            BinOp::Mul => {
                let (x, y) = (self.w.write(a), self.w.write(b));
                self.back(a, mul(adj.clone(), y), bound, false);
                self.back(b, mul(adj, x), bound, false)
            }
            BinOp::Div => {
                let (x, y) = (self.w.write(a), self.w.write(b));
                self.back(a, div(adj.clone(), y.clone()), bound, false);
                let db = neg(div(mul(adj, x), mul(y.clone(), y)));
                self.back(b, db, bound, false)
            }
            BinOp::Rem => {
                // a % b = a - b·floor(a / b)
                let (x, y) = (self.w.write(a), self.w.write(b));
                self.back(a, adj.clone(), bound, false);
                let fl = call(Func::Floor, vec![div(x, y)]);
                self.back(b, neg(mul(adj, fl)), bound, false)
            }
            _ => {} // comparisons, logic and bitwise operators are not float-valued
        }
    }
}

fn sub(a: KExpr, b: KExpr) -> KExpr {
    bin(BinOp::Sub, a, b)
}

/// The adjoint `adj · f'(x)` of a one-argument function.
fn unary_adjoint(f: Func, x: KExpr, adj: KExpr) -> KExpr {
    let sq = |x: &KExpr| mul(x.clone(), x.clone());
    match f {
        Func::Exp => mul(adj, call(Func::Exp, vec![x])),
        Func::Log => div(adj, x),
        Func::Sqrt => div(adj, mul(float(2.0), call(Func::Sqrt, vec![x]))),
        Func::Tanh => {
            let t = call(Func::Tanh, vec![x]);
            mul(adj, sub(float(1.0), sq(&t)))
        }
        Func::Sin => mul(adj, call(Func::Cos, vec![x])),
        Func::Cos => neg(mul(adj, call(Func::Sin, vec![x]))),
        Func::Erf => {
            let e = call(Func::Exp, vec![neg(sq(&x))]);
            mul(adj, mul(float(std::f64::consts::FRAC_2_SQRT_PI), e))
        }
        Func::Atan => div(adj, expr::bin(BinOp::Add, float(1.0), sq(&x))),
        Func::Asin => div(adj, call(Func::Sqrt, vec![sub(float(1.0), sq(&x))])),
        Func::Acos => neg(div(adj, call(Func::Sqrt, vec![sub(float(1.0), sq(&x))]))),
        Func::Abs => {
            let lt = bin(BinOp::Lt, x.clone(), float(0.0));
            let gt = bin(BinOp::Gt, x, float(0.0));
            select(lt, neg(adj.clone()), select(gt, adj, float(0.0)))
        }
        // Floor, ceil (zero almost everywhere), casts, select, max, min and pow are the
        // caller's; this arm is never reached.
        _ => mul(adj, float(0.0)),
    }
}
