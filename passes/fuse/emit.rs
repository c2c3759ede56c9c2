//! Printing an [`FKernel`] as an op definition.
//!
//! - **Ports** get one shape symbol per dim. A dim keeps the symbol its source op used
//!   (`x: f32[B, K]`) when the port still has the source's shape and the name is free; other
//!   dims get fresh symbols (`X0`, `X1`, ...). Symbols shared by the source op stay shared.
//! - **Output dims** name the symbol of an input dim read by exactly that index variable with
//!   the same size (`y: f32[B, N]`); otherwise they are the concrete size.
//! - **Kernel bodies are concrete**: every index is the composed affine function with its
//!   constants evaluated (`a[9 - i]`, `x[2 * i + 1, k]`); no symbol appears in a body.
//! - **Typing is preserved exactly.** Literals and index variables are weakly typed in TEG and
//!   take their dtype from their context; composition changes contexts (an output statement
//!   becomes a temporary, a load becomes an expression). Each weakly typed subtree is printed
//!   bare when its new context gives it the dtype it had, and otherwise with every leaf cast
//!   (`f64(2)`), which yields exactly the same arithmetic.
//! - Names (ports, temporaries, variables, symbols) are made valid, distinct identifiers;
//!   reduction variables only need to differ from what is in scope.

use super::affine::{as_var, canonical, Res};
use super::kernel::{ident_ok, FKernel};
use crate::diag::Span;
use crate::ir::instance::{Affine, CExpr, CKind, CStmt, Scalar, Src, Target};
use crate::ir::kernel::{
    BinOp, Dim, Func, IExpr, IOp, Index, IndexVar, KExpr, KExprKind, OpBody, OpDef, PortDef, Stmt,
    UnOp,
};
use std::collections::{HashMap, HashSet};
use tapc_runtime::DType;

/// The printed op and the names its index variables received.
pub struct Emitted {
    pub op: OpDef,
    /// The name of each parallel variable, in order.
    pub parallel: Vec<String>,
}

/// A set of taken names that hands out fresh ones.
#[derive(Default)]
pub struct Names {
    taken: HashSet<String>,
}

impl Names {
    /// A set holding `taken` already.
    pub fn with(taken: impl IntoIterator<Item = String>) -> Names {
        Names {
            taken: taken.into_iter().collect(),
        }
    }

    pub fn fresh(&mut self, want: &str) -> String {
        let mut base = crate::syntax::lexer::identifier_chars(want);
        if base.is_empty() || base.starts_with(|c: char| c.is_ascii_digit()) {
            base = format!("t{base}");
        }
        if ident_ok(&base) && self.taken.insert(base.clone()) {
            return base;
        }
        (1..)
            .map(|k| format!("{base}{k}"))
            .find(|n| ident_ok(n) && self.taken.insert(n.clone()))
            .expect("an unused name exists")
    }
}

/// How a weakly typed expression would type if re-lowered in isolation.
#[derive(Clone, Copy, Debug, PartialEq)]
enum W {
    Strong,
    Int,
    Float,
}

fn join(a: W, b: W) -> W {
    match (a, b) {
        (W::Strong, _) | (_, W::Strong) => W::Strong,
        (W::Float, _) | (_, W::Float) => W::Float,
        _ => W::Int,
    }
}

fn is_cmp(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
    )
}

fn weak(e: &CExpr) -> W {
    match &e.kind {
        CKind::Const(Scalar::B(_)) | CKind::Load { .. } | CKind::Gather(_) => W::Strong,
        CKind::Const(Scalar::I(_)) | CKind::Var(_) => W::Int,
        CKind::Const(Scalar::F(_)) => W::Float,
        CKind::Reduce { body, .. } => weak(body),
        CKind::Call(Func::Cast(_), _) => W::Strong,
        CKind::Call(Func::Select, a) => join(weak(&a[1]), weak(&a[2])),
        CKind::Call(Func::Max | Func::Min, a) => join(weak(&a[0]), weak(&a[1])),
        CKind::Call(Func::Abs | Func::Popcount, a) => weak(&a[0]),
        CKind::Call(Func::Pow, a) => match join(weak(&a[0]), weak(&a[1])) {
            W::Strong => W::Strong,
            _ => W::Float,
        },
        CKind::Call(_, a) => match weak(&a[0]) {
            W::Strong => W::Strong,
            _ => W::Float,
        },
        CKind::Unary(UnOp::Neg | UnOp::BitNot, a) => weak(a),
        CKind::Unary(UnOp::Not, _) => W::Strong,
        CKind::Binary(op, _, _) if is_cmp(*op) || matches!(op, BinOp::And | BinOp::Or) => W::Strong,
        CKind::Binary(_, a, b) => join(weak(a), weak(b)),
    }
}

/// The dtype a weak expression gets under a cast or comparison.
fn cast_default(w: W) -> Option<DType> {
    match w {
        W::Strong => None,
        W::Int => Some(DType::I64),
        W::Float => Some(DType::F64),
    }
}

fn ke(kind: KExprKind) -> KExpr {
    KExpr {
        kind,
        span: Span::default(),
    }
}

fn sp() -> Span {
    Span::default()
}

struct Emitter<'a> {
    fk: &'a FKernel,
    /// Names of tensors (ports, temporaries) and symbols: never used for variables.
    global: HashSet<String>,
    var_names: HashMap<usize, String>,
    input_names: Vec<String>,
    temp_names: Vec<String>,
}

/// Prints `fk` as an op named `name`.
pub fn emit(fk: &FKernel, name: &str) -> Res<Emitted> {
    let mut names = Names::default();
    let input_names: Vec<String> = fk.inputs.iter().map(|p| names.fresh(&p.name)).collect();
    let output_names: Vec<String> = fk.outputs.iter().map(|p| names.fresh(&p.name)).collect();
    let temp_names: Vec<String> = fk.temp_names.iter().map(|t| names.fresh(t)).collect();
    let mut var_names = HashMap::new();
    let mut parallel = Vec::new();
    for v in 0..fk.parallel {
        // `..i` lists lower to `i.0, i.1, ...`: print them as `i, i1, ...`.
        let n = names.fresh(&list_var_name(&fk.vars[v].name));
        parallel.push(n.clone());
        var_names.insert(v, n);
    }
    let port_syms = shape_symbols(fk, &mut names, &input_names);
    let inputs = input_ports(fk, &input_names, &port_syms);
    let outputs = output_ports(fk, &output_names, &port_syms)?;
    let mut em = Emitter {
        fk,
        global: names
            .taken
            .iter()
            .filter(|n| !parallel.contains(n))
            .cloned()
            .collect(),
        var_names,
        input_names,
        temp_names,
    };
    let body = fk
        .stmts
        .iter()
        .map(|st| em.stmt(st, &output_names))
        .collect::<Res<Vec<_>>>()?;
    Ok(Emitted {
        op: OpDef {
            name: name.to_string(),
            params: vec![],
            inputs,
            outputs,
            body: OpBody::Kernel(body),
            span: sp(),
            name_span: sp(),
        },
        parallel,
    })
}

/// The shape symbol of every dim of every input: the source op's symbol when the port still
/// has its shape (one name per symbol and size), else a fresh `X0`-style name.
fn shape_symbols(fk: &FKernel, names: &mut Names, input_names: &[String]) -> Vec<Vec<String>> {
    let mut sym_of: HashMap<(usize, String), (String, i64)> = HashMap::new();
    let mut port_syms: Vec<Vec<String>> = Vec::new();
    for (k, p) in fk.inputs.iter().enumerate() {
        let mut dims = Vec::new();
        for (d, &size) in p.ty.shape.iter().enumerate() {
            let hint = p.hints.get(d).cloned().flatten();
            let s = match hint {
                Some(h) => match sym_of.get(&h) {
                    Some((s, sz)) if *sz == size => s.clone(),
                    Some(_) => names.fresh(&format!("{}{d}", input_names[k].to_uppercase())),
                    None => {
                        let s = names.fresh(&h.1);
                        sym_of.insert(h, (s.clone(), size));
                        s
                    }
                },
                None => names.fresh(&format!("{}{d}", input_names[k].to_uppercase())),
            };
            dims.push(s);
        }
        port_syms.push(dims);
    }
    port_syms
}

fn input_ports(fk: &FKernel, input_names: &[String], port_syms: &[Vec<String>]) -> Vec<PortDef> {
    fk.inputs
        .iter()
        .enumerate()
        .map(|(k, p)| PortDef {
            name: input_names[k].clone(),
            dtype: p.ty.dtype,
            dims: port_syms[k]
                .iter()
                .map(|s| Dim::Expr(IExpr::Name(s.clone(), sp())))
                .collect(),
            span: sp(),
        })
        .collect()
}

/// The output ports: each dim is the symbol of an input dim the variable indexing it spans
/// (a witness), else its size.
fn output_ports(
    fk: &FKernel,
    output_names: &[String],
    port_syms: &[Vec<String>],
) -> Res<Vec<PortDef>> {
    fk.outputs
        .iter()
        .enumerate()
        .map(|(o, p)| {
            let vars = fk
                .stmts
                .iter()
                .find(|s| s.target == Target::Output(o))
                .map(|s| s.vars.clone())
                .ok_or("an output is never assigned")?;
            let dims =
                p.ty.shape
                    .iter()
                    .enumerate()
                    .map(|(d, &size)| {
                        let sym = vars
                            .get(d)
                            .and_then(|&v| witness(fk, v, size))
                            .map(|(k, e)| port_syms[k][e].clone());
                        Dim::Expr(match sym {
                            Some(s) => IExpr::Name(s, sp()),
                            None => IExpr::Int(size, sp()),
                        })
                    })
                    .collect();
            Ok(PortDef {
                name: output_names[o].clone(),
                dtype: p.ty.dtype,
                dims,
                span: sp(),
            })
        })
        .collect()
}

impl Emitter<'_> {
    /// One statement of the body; a temporary's weak literal types as its value would.
    fn stmt(&mut self, st: &CStmt, output_names: &[String]) -> Res<Stmt> {
        let (target, want) = match st.target {
            Target::Output(k) => (output_names[k].clone(), Some(self.fk.outputs[k].ty.dtype)),
            Target::Temp(t) => {
                let d = match weak(&st.value) {
                    W::Strong => None,
                    W::Int => Some(DType::I64),
                    W::Float => Some(DType::F32),
                };
                (self.temp_names[t].clone(), d)
            }
        };
        let scope: Vec<String> = st
            .vars
            .iter()
            .map(|v| self.var_names.get(v).cloned().ok_or("unnamed variable"))
            .collect::<Res<_>>()?;
        let mut scope_c = scope.clone();
        let value = self.expr(&st.value, want, &mut scope_c)?;
        Ok(Stmt {
            target,
            indices: scope.into_iter().map(|n| IndexVar::Var(n, sp())).collect(),
            value,
            span: sp(),
            target_span: sp(),
        })
    }
}

/// `i.0, i.1, i.2` (a `..i` list) → `i, j, k`; other names unchanged.
pub fn list_var_name(name: &str) -> String {
    let Some((base, k)) = name.split_once('.') else {
        return name.to_string();
    };
    let k: u32 = k.parse().unwrap_or(0);
    match base.as_bytes() {
        [c] if c.is_ascii_lowercase() && u32::from(*c) + k <= u32::from(b'z') => {
            char::from_u32(u32::from(*c) + k).map_or(base.to_string(), String::from)
        }
        _ if k == 0 => base.to_string(),
        _ => format!("{base}{k}"),
    }
}

/// An input dim that variable `v` indexes alone somewhere and whose size is `size`.
fn witness(fk: &FKernel, v: usize, size: i64) -> Option<(usize, usize)> {
    for (k, p) in fk.inputs.iter().enumerate() {
        for (_, index) in fk.loads_of(k) {
            for (e, a) in index.iter().enumerate() {
                if as_var(a) == Some(v) && p.ty.shape.get(e) == Some(&size) {
                    return Some((k, e));
                }
            }
        }
    }
    None
}

impl Emitter<'_> {
    fn name_of(&self, v: usize) -> Res<String> {
        self.var_names
            .get(&v)
            .cloned()
            .ok_or("variable used out of scope")
    }

    fn iexpr(&self, a: &Affine) -> Res<IExpr> {
        let a = canonical(a);
        let mut parts: Vec<(bool, IExpr)> = Vec::new();
        for &(v, c) in &a.terms {
            let mag = c.checked_abs().ok_or("coefficient overflow")?;
            let name = IExpr::Name(self.name_of(v)?, sp());
            let t = if mag == 1 {
                name
            } else {
                IExpr::Bin(
                    IOp::Mul,
                    Box::new(IExpr::Int(mag, sp())),
                    Box::new(name),
                    sp(),
                )
            };
            parts.push((c < 0, t));
        }
        if a.constant != 0 {
            let mag = a.constant.checked_abs().ok_or("constant overflow")?;
            let lit = (a.constant < 0, IExpr::Int(mag, sp()));
            // `9 - i` reads better than `-i + 9`.
            if !lit.0 && parts.first().is_some_and(|p| p.0) {
                parts.insert(0, lit);
            } else {
                parts.push(lit);
            }
        }
        let mut it = parts.into_iter();
        let Some((neg, first)) = it.next() else {
            return Ok(IExpr::Int(0, sp()));
        };
        let mut acc = if neg {
            IExpr::Neg(Box::new(first), sp())
        } else {
            first
        };
        for (neg, t) in it {
            let op = if neg { IOp::Sub } else { IOp::Add };
            acc = IExpr::Bin(op, Box::new(acc), Box::new(t), sp());
        }
        Ok(acc)
    }

    fn literal(&self, s: Scalar) -> Res<KExpr> {
        Ok(match s {
            Scalar::B(b) => ke(KExprKind::Bool(b)),
            Scalar::I(v) if v < 0 => {
                let mag = v.checked_abs().ok_or("literal overflow")?;
                ke(KExprKind::Unary(
                    UnOp::Neg,
                    Box::new(ke(KExprKind::Int(mag))),
                ))
            }
            Scalar::I(v) => ke(KExprKind::Int(v)),
            Scalar::F(v) if !v.is_finite() => return Err("non-finite literal"),
            Scalar::F(v) if v.is_sign_negative() => ke(KExprKind::Unary(
                UnOp::Neg,
                Box::new(ke(KExprKind::Float(-v))),
            )),
            Scalar::F(v) => ke(KExprKind::Float(v)),
        })
    }

    /// Prints `e` where its context would give a weak `e` the dtype `ctx`.
    fn expr(&mut self, e: &CExpr, ctx: Option<DType>, scope: &mut Vec<String>) -> Res<KExpr> {
        let w = weak(e);
        if w != W::Strong {
            let force = ctx != Some(e.dtype);
            return self.weak_expr(e, force, scope);
        }
        Ok(ke(match &e.kind {
            CKind::Const(s) => return self.literal(*s),
            CKind::Var(_) => return Err("a variable is never strongly typed"),
            CKind::Gather(_) => return Err("a kernel with a gathered index"),
            CKind::Load { src, index, .. } => {
                let name = match src {
                    Src::Input(k) => self.input_names.get(*k),
                    Src::Temp(t) => self.temp_names.get(*t),
                }
                .cloned()
                .ok_or("unknown tensor")?;
                let idx = index
                    .iter()
                    .map(|a| Ok(Index::Expr(self.iexpr(a)?)))
                    .collect::<Res<Vec<_>>>()?;
                KExprKind::Access(name, idx)
            }
            CKind::Reduce { kind, vars, body } => {
                let names = self.bind(vars, scope);
                let b = self.expr(body, None, scope);
                scope.truncate(scope.len() - vars.len());
                KExprKind::Reduce(*kind, names, Box::new(b?))
            }
            CKind::Call(Func::Cast(d), args) => {
                let a = &args[0];
                let inner = self.expr(a, cast_default(weak(a)), scope)?;
                KExprKind::Call(Func::Cast(*d), vec![inner])
            }
            CKind::Call(f @ (Func::Max | Func::Min | Func::Pow), args) => {
                let (a, b) = self.pair(&args[0], &args[1], false, scope)?;
                KExprKind::Call(*f, vec![a, b])
            }
            CKind::Call(Func::Select, args) => {
                let c = self.expr(&args[0], Some(DType::Bool), scope)?;
                let (a, b) = self.pair(&args[1], &args[2], false, scope)?;
                KExprKind::Call(Func::Select, vec![c, a, b])
            }
            CKind::Call(f, args) => KExprKind::Call(
                *f,
                args.iter()
                    .map(|a| self.expr(a, None, scope))
                    .collect::<Res<_>>()?,
            ),
            CKind::Unary(op, a) => KExprKind::Unary(*op, Box::new(self.expr(a, None, scope)?)),
            CKind::Binary(op, a, b) if matches!(op, BinOp::And | BinOp::Or) => KExprKind::Binary(
                *op,
                Box::new(self.expr(a, Some(DType::Bool), scope)?),
                Box::new(self.expr(b, Some(DType::Bool), scope)?),
            ),
            CKind::Binary(op, a, b) => {
                let (x, y) = self.pair(a, b, is_cmp(*op), scope)?;
                KExprKind::Binary(*op, Box::new(x), Box::new(y))
            }
        }))
    }

    /// Two operands that unify: a weak one takes the strong one's dtype; two weak ones (only
    /// under a comparison) take the default dtype.
    fn pair(
        &mut self,
        a: &CExpr,
        b: &CExpr,
        cmp: bool,
        scope: &mut Vec<String>,
    ) -> Res<(KExpr, KExpr)> {
        let (wa, wb) = (weak(a), weak(b));
        let (ca, cb) = match (wa, wb) {
            (W::Strong, W::Strong) => (None, None),
            (W::Strong, _) => (None, Some(a.dtype)),
            (_, W::Strong) => (Some(b.dtype), None),
            _ => {
                let d = cast_default(join(wa, wb));
                if cmp && d == Some(a.dtype) && d == Some(b.dtype) {
                    (d, d)
                } else {
                    // Cast `a`'s leaves; `b` then takes `a`'s dtype from it.
                    (None, Some(a.dtype))
                }
            }
        };
        Ok((self.expr(a, ca, scope)?, self.expr(b, cb, scope)?))
    }

    /// A weakly typed subtree: bare if the context settles it to its dtype, else with every
    /// leaf cast to its dtype.
    fn weak_expr(&mut self, e: &CExpr, force: bool, scope: &mut Vec<String>) -> Res<KExpr> {
        let d = e.dtype;
        let cast = |k: KExpr| {
            if force {
                ke(KExprKind::Call(Func::Cast(d), vec![k]))
            } else {
                k
            }
        };
        Ok(match &e.kind {
            CKind::Const(s) => cast(self.literal(*s)?),
            CKind::Var(v) => cast(ke(KExprKind::Name(self.name_of(*v)?))),
            CKind::Reduce { kind, vars, body } => {
                let names = self.bind(vars, scope);
                let b = self.weak_expr(body, force, scope);
                scope.truncate(scope.len() - vars.len());
                ke(KExprKind::Reduce(*kind, names, Box::new(b?)))
            }
            CKind::Call(Func::Select, args) => {
                let c = self.expr(&args[0], Some(DType::Bool), scope)?;
                let a = self.weak_expr(&args[1], force, scope)?;
                let b = self.weak_expr(&args[2], force, scope)?;
                ke(KExprKind::Call(Func::Select, vec![c, a, b]))
            }
            CKind::Call(f, args) => ke(KExprKind::Call(
                *f,
                args.iter()
                    .map(|a| self.weak_expr(a, force, scope))
                    .collect::<Res<_>>()?,
            )),
            CKind::Unary(op, a) => ke(KExprKind::Unary(
                *op,
                Box::new(self.weak_expr(a, force, scope)?),
            )),
            CKind::Binary(op, a, b) => ke(KExprKind::Binary(
                *op,
                Box::new(self.weak_expr(a, force, scope)?),
                Box::new(self.weak_expr(b, force, scope)?),
            )),
            CKind::Load { .. } | CKind::Gather(_) => return Err("a load is never weakly typed"),
        })
    }

    /// Names reduction variables (distinct from everything in scope and every tensor and
    /// symbol) and puts them in scope.
    fn bind(&mut self, vars: &[usize], scope: &mut Vec<String>) -> Vec<IndexVar> {
        let mut out = Vec::new();
        for &v in vars {
            let mut names = Names {
                taken: self.global.iter().chain(scope.iter()).cloned().collect(),
            };
            let n = names.fresh(&self.fk.vars[v].name);
            self.var_names.insert(v, n.clone());
            scope.push(n.clone());
            out.push(IndexVar::Var(n, sp()));
        }
        out
    }
}
