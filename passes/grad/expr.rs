//! Kernel expressions for the `grad` pass: an instance's typed expression ([`CExpr`]) written
//! back as a kernel expression ([`KExpr`]) with its reduction variables renamed fresh, small
//! constructors, and the renaming of index variables in an expression already built.

use crate::diag::Span;
use crate::ir::instance::{Affine, CExpr, CKind, GatherLoad, Scalar, Src};
use crate::ir::kernel::{BinOp, Func, Gather, IExpr, IOp, Index, KExpr, KExprKind, UnOp};
use crate::ir::DType;
use std::collections::HashMap;

/// What writing an instance's expressions back needs: the names of its index variables and
/// sources, and a counter for fresh reduction variables.
pub struct Writer<'a> {
    /// Per index variable of the instance: its name in the generated kernel.
    pub vars: Vec<String>,
    /// The port name of each source.
    pub src_name: &'a dyn Fn(&Src) -> String,
    fresh: usize,
}

impl<'a> Writer<'a> {
    pub fn new(vars: Vec<String>, src_name: &'a dyn Fn(&Src) -> String) -> Writer<'a> {
        Writer {
            vars,
            src_name,
            fresh: 0,
        }
    }

    /// A variable name used nowhere else in the kernel being built.
    pub fn fresh(&mut self) -> String {
        loop {
            let n = format!("r{}", self.fresh);
            self.fresh += 1;
            if !self.vars.contains(&n) {
                return n;
            }
        }
    }

    /// `e` as a kernel expression; its reductions bind fresh variables, so a copy can be placed
    /// anywhere without shadowing.
    pub fn write(&mut self, e: &CExpr) -> KExpr {
        let mut local = HashMap::new();
        self.write_in(e, &mut local)
    }

    /// `e` with the variables `vars` renamed fresh (a second copy of a reduction's body).
    pub fn write_bound(&mut self, e: &CExpr, vars: &[usize]) -> (Vec<String>, KExpr) {
        let names: Vec<String> = vars.iter().map(|_| self.fresh()).collect();
        let mut local: HashMap<usize, String> = vars.iter().copied().zip(names.clone()).collect();
        let body = self.write_in(e, &mut local);
        (names, body)
    }

    fn var(&self, v: usize, local: &HashMap<usize, String>) -> String {
        local
            .get(&v)
            .cloned()
            .unwrap_or_else(|| self.vars[v].clone())
    }

    fn write_in(&mut self, e: &CExpr, local: &mut HashMap<usize, String>) -> KExpr {
        match &e.kind {
            CKind::Const(s) => constant(*s),
            CKind::Var(v) => k(KExprKind::Name(self.var(*v, local))),
            CKind::Load { src, index, .. } => {
                let idx = index
                    .iter()
                    .map(|a| affine(a, &|v| self.var(v, local)))
                    .collect();
                access(&(self.src_name)(src), idx)
            }
            CKind::Gather(g) => self.write_gather(g, local),
            CKind::Reduce { kind, vars, body } => {
                let saved: Vec<_> = vars.iter().map(|v| (*v, local.get(v).cloned())).collect();
                let names: Vec<String> = vars.iter().map(|_| self.fresh()).collect();
                for (v, n) in vars.iter().zip(&names) {
                    local.insert(*v, n.clone());
                }
                let b = self.write_in(body, local);
                for (v, old) in saved {
                    match old {
                        Some(o) => local.insert(v, o),
                        None => local.remove(&v),
                    };
                }
                reduce(*kind, names, b)
            }
            CKind::Call(f, args) => {
                let a = args.iter().map(|a| self.write_in(a, local)).collect();
                call(*f, a)
            }
            CKind::Unary(op, a) => k(KExprKind::Unary(*op, Box::new(self.write_in(a, local)))),
            CKind::Binary(op, a, b) => {
                let (a, b) = (self.write_in(a, local), self.write_in(b, local));
                bin(*op, a, b)
            }
        }
    }
}

impl Writer<'_> {
    /// `E[ids[b], h]`: each gathered dimension as its index load plus the affine offset.
    fn write_gather(&self, g: &GatherLoad, local: &HashMap<usize, String>) -> KExpr {
        let name = |v: usize| self.var(v, local);
        let idx = (g.index.iter().zip(&g.by))
            .map(|(a, by)| match by.as_ref().map(|b| &b.kind) {
                Some(CKind::Load { src, index, .. }) => Index::Gather(Gather {
                    tensor: (self.src_name)(src),
                    indices: index.iter().map(|i| affine(i, &name)).collect(),
                    offset: gather_offset(a, &name),
                    span: Span::default(),
                    tensor_span: Span::default(),
                }),
                _ => Index::Expr(affine(a, &name)),
            })
            .collect();
        k(KExprKind::Access(
            (self.src_name)(&Src::Input(g.input)),
            idx,
        ))
    }
}

/// A gather's offset as the parser reads it back from the printed text: none for 0, `- c` for
/// a negative constant (written `+ -c` it would re-parse as a negation), else `+ a`.
fn gather_offset(a: &Affine, name: &dyn Fn(usize) -> String) -> Option<(IOp, IExpr)> {
    if *a == Affine::constant(0) {
        return None;
    }
    if a.terms.is_empty() && a.constant < 0 {
        return Some((IOp::Sub, IExpr::Int(-a.constant, Span::default())));
    }
    Some((IOp::Add, affine(a, name)))
}

fn k(kind: KExprKind) -> KExpr {
    KExpr {
        kind,
        span: Span::default(),
    }
}

/// A literal of the instance's scalar domain.
pub fn constant(s: Scalar) -> KExpr {
    match s {
        Scalar::F(v) if v < 0.0 => neg(k(KExprKind::Float(-v))),
        Scalar::F(v) => k(KExprKind::Float(v)),
        Scalar::I(v) if v < 0 => neg(k(KExprKind::Int(v.unsigned_abs() as i64))),
        Scalar::I(v) => k(KExprKind::Int(v)),
        Scalar::B(b) => k(KExprKind::Bool(b)),
    }
}

/// `v` of dtype `d`, written `d(v)` so that it has that dtype in any context.
pub fn typed(v: f64, d: DType) -> KExpr {
    call(Func::Cast(d), vec![constant(Scalar::F(v))])
}

pub fn float(v: f64) -> KExpr {
    constant(Scalar::F(v))
}

/// An affine index written with variable names.
pub fn affine(a: &Affine, name: &dyn Fn(usize) -> String) -> IExpr {
    let sp = Span::default();
    let mut out: Option<IExpr> = None;
    for &(v, c) in &a.terms {
        let term = match c {
            1 => IExpr::Name(name(v), sp),
            c => IExpr::Bin(
                IOp::Mul,
                Box::new(IExpr::Int(c, sp)),
                Box::new(IExpr::Name(name(v), sp)),
                sp,
            ),
        };
        out = Some(match out {
            None => term,
            Some(o) => IExpr::Bin(IOp::Add, Box::new(o), Box::new(term), sp),
        });
    }
    match out {
        None => IExpr::Int(a.constant, sp),
        Some(o) if a.constant == 0 => o,
        Some(o) => IExpr::Bin(
            IOp::Add,
            Box::new(o),
            Box::new(IExpr::Int(a.constant, sp)),
            sp,
        ),
    }
}

/// An index variable used as a value.
pub fn name(v: String) -> KExpr {
    k(KExprKind::Name(v))
}

pub fn access(t: &str, idx: Vec<IExpr>) -> KExpr {
    k(KExprKind::Access(
        t.to_string(),
        idx.into_iter().map(Index::Expr).collect(),
    ))
}

/// `t[v0, v1, ...]`.
pub fn access_vars(t: &str, vars: &[String]) -> KExpr {
    let sp = Span::default();
    access(t, vars.iter().map(|v| IExpr::Name(v.clone(), sp)).collect())
}

pub fn reduce(kind: crate::ir::kernel::Reduction, vars: Vec<String>, body: KExpr) -> KExpr {
    let sp = Span::default();
    let vars = vars
        .into_iter()
        .map(|v| crate::ir::kernel::IndexVar::Var(v, sp))
        .collect();
    k(KExprKind::Reduce(kind, vars, Box::new(body)))
}

pub fn call(f: Func, args: Vec<KExpr>) -> KExpr {
    k(KExprKind::Call(f, args))
}

pub fn bin(op: BinOp, a: KExpr, b: KExpr) -> KExpr {
    k(KExprKind::Binary(op, Box::new(a), Box::new(b)))
}

pub fn mul(a: KExpr, b: KExpr) -> KExpr {
    bin(BinOp::Mul, a, b)
}

pub fn div(a: KExpr, b: KExpr) -> KExpr {
    bin(BinOp::Div, a, b)
}

pub fn neg(a: KExpr) -> KExpr {
    k(KExprKind::Unary(UnOp::Neg, Box::new(a)))
}

/// `select(c, a, b)`.
pub fn select(c: KExpr, a: KExpr, b: KExpr) -> KExpr {
    call(Func::Select, vec![c, a, b])
}

/// Renames the free index variables of `e` by `map` (in values and in accesses); reduction
/// variables written by [`Writer`] are fresh, so they are never in `map`.
pub fn rename(e: &mut KExpr, map: &HashMap<String, String>) {
    match &mut e.kind {
        KExprKind::Name(n) => {
            if let Some(m) = map.get(n) {
                *n = m.clone();
            }
        }
        KExprKind::Access(_, idx) => idx.iter_mut().for_each(|i| rename_entry(i, map)),
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => rename(b, map),
        KExprKind::Call(_, args) => args.iter_mut().for_each(|a| rename(a, map)),
        KExprKind::Binary(_, a, b) => {
            rename(a, map);
            rename(b, map);
        }
        KExprKind::Int(_) | KExprKind::Float(_) | KExprKind::Bool(_) => {}
    }
}

/// Renames in one index entry: an affine index, or a gather's inner indices and offset.
fn rename_entry(i: &mut Index, map: &HashMap<String, String>) {
    match i {
        Index::Expr(x) => rename_index(x, map),
        Index::Gather(g) => {
            g.indices.iter_mut().for_each(|x| rename_index(x, map));
            if let Some((_, x)) = &mut g.offset {
                rename_index(x, map);
            }
        }
        Index::Variadic(..) => {}
    }
}

fn rename_index(x: &mut IExpr, map: &HashMap<String, String>) {
    match x {
        IExpr::Name(n, _) => {
            if let Some(m) = map.get(n) {
                *n = m.clone();
            }
        }
        IExpr::Neg(a, _) => rename_index(a, map),
        IExpr::Bin(_, a, b, _) => {
            rename_index(a, map);
            rename_index(b, map);
        }
        IExpr::Int(..) => {}
    }
}

/// The tensors `e` reads (a gather's index tensors too).
pub fn reads(e: &KExpr, out: &mut Vec<String>) {
    let mut add = |t: &String| {
        if !out.contains(t) {
            out.push(t.clone());
        }
    };
    match &e.kind {
        KExprKind::Access(t, idx) => {
            add(t);
            idx.iter().for_each(|i| {
                if let Index::Gather(g) = i {
                    add(&g.tensor);
                }
            });
        }
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => reads(b, out),
        KExprKind::Call(_, args) => args.iter().for_each(|a| reads(a, out)),
        KExprKind::Binary(_, a, b) => {
            reads(a, out);
            reads(b, out);
        }
        KExprKind::Name(_) | KExprKind::Int(_) | KExprKind::Float(_) | KExprKind::Bool(_) => {}
    }
}

/// Whether index `x` mentions `v`, and whether it is `v` alone.
fn index_mentions(x: &IExpr, v: &str) -> (bool, bool) {
    let mut seen = false;
    x.visit_names(&mut |n, _| seen |= n == v);
    (seen, matches!(x, IExpr::Name(n, _) if n == v))
}

/// Whether `e` mentions variable `v` (as a value or in an index), and whether some access
/// indexes a dimension by `v` alone (what fixes a reduction variable's extent).
pub fn mentions(e: &KExpr, v: &str) -> (bool, bool) {
    let or = |a: (bool, bool), b: (bool, bool)| (a.0 || b.0, a.1 || b.1);
    match &e.kind {
        KExprKind::Name(n) => (n == v, false),
        KExprKind::Access(_, idx) => idx.iter().fold((false, false), |acc, i| match i {
            Index::Expr(x) => or(acc, index_mentions(x, v)),
            // An index tensor's own indices fix a variable's extent as an input's do.
            Index::Gather(g) => {
                let inner = g
                    .indices
                    .iter()
                    .fold(acc, |acc, x| or(acc, index_mentions(x, v)));
                let off = g.offset.as_ref().map(|o| index_mentions(&o.1, v));
                or(inner, (off.is_some_and(|o| o.0), false))
            }
            Index::Variadic(..) => acc,
        }),
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => mentions(b, v),
        KExprKind::Call(_, args) => args
            .iter()
            .fold((false, false), |a, x| or(a, mentions(x, v))),
        KExprKind::Binary(_, a, b) => or(mentions(a, v), mentions(b, v)),
        KExprKind::Int(_) | KExprKind::Float(_) | KExprKind::Bool(_) => (false, false),
    }
}

/// Replaces index variable `v` by the constant `c` in `e` (in values and in indices).
pub fn substitute(e: &mut KExpr, v: &str, c: i64) {
    match &mut e.kind {
        KExprKind::Name(n) if n == v => e.kind = KExprKind::Int(c),
        KExprKind::Access(_, idx) => idx.iter_mut().for_each(|i| match i {
            Index::Expr(x) => substitute_index(x, v, c),
            Index::Gather(g) => {
                g.indices.iter_mut().for_each(|x| substitute_index(x, v, c));
                if let Some((_, x)) = &mut g.offset {
                    substitute_index(x, v, c);
                }
            }
            Index::Variadic(..) => {}
        }),
        KExprKind::Reduce(_, _, b) | KExprKind::Unary(_, b) => substitute(b, v, c),
        KExprKind::Call(_, args) => args.iter_mut().for_each(|a| substitute(a, v, c)),
        KExprKind::Binary(_, a, b) => {
            substitute(a, v, c);
            substitute(b, v, c);
        }
        _ => {}
    }
}

fn substitute_index(x: &mut IExpr, v: &str, c: i64) {
    match x {
        IExpr::Name(n, sp) if n == v => *x = IExpr::Int(c, *sp),
        IExpr::Neg(a, _) => substitute_index(a, v, c),
        IExpr::Bin(_, a, b, _) => {
            substitute_index(a, v, c);
            substitute_index(b, v, c);
        }
        IExpr::Name(..) | IExpr::Int(..) => {}
    }
}
