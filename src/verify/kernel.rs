//! Lowering a kernel to concrete form for one instance: numbering index variables, inferring
//! reduction extents, making accesses affine, and typing every expression (with weakly typed
//! literals, index variables and symbols taking the type their context asks for).

mod gather;

use super::bind::{Bindings, Site};
use crate::diag::{codes, Diagnostic, Span};
use crate::ir::instance::*;
use crate::ir::kernel::*;
use crate::ir::TensorType;
use crate::print::{gather_text, iexpr_text};
use std::collections::{HashMap, HashSet};
use tapc_runtime::DType;

pub struct Lowered {
    pub vars: Vec<Var>,
    pub parallel: usize,
    pub temps: Vec<Temp>,
    pub stmts: Vec<CStmt>,
    pub outputs: Vec<TensorType>,
}

/// The type of an expression while it is being built: weak types adapt to their context.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Ty {
    Known(DType),
    WeakInt,
    WeakFloat,
}

#[derive(Clone)]
enum Scope {
    Var(usize),
    List(Vec<usize>),
}

struct Lx<'a> {
    op: &'a OpDef,
    b: &'a Bindings,
    inputs: &'a [TensorType],
    site: Site,
    vars: Vec<Var>,
    temps: Vec<Temp>,
    /// Extent of each temp dimension (the shard's range of its variable).
    temp_shapes: Vec<Vec<(i64, i64)>>,
    /// Each temp's index in `temps`, by name (lookups stay constant-time in big kernels).
    temp_of: HashMap<String, usize>,
    /// Every assignment target of the kernel.
    targets: HashSet<&'a str>,
    /// Temporaries whose assignment failed (already reported): their uses are not reported.
    failed: HashSet<String>,
    errs: Vec<Diagnostic>,
}

type R<T> = Result<T, ()>;

/// Lowers `stmts` of `op`; `outputs` are the full output types, `range` the shard's sub-range.
/// When some statements fail, what lowered is kept: the statements that lowered (their
/// accesses can still be bounds-checked) with the errors of the others. `Err` when the index
/// space itself fails.
pub fn lower(
    op: &OpDef,
    stmts: &[Stmt],
    b: &Bindings,
    inputs: &[TensorType],
    outputs: &[TensorType],
    range: Option<&[(i64, i64)]>,
    site: Site,
) -> Result<(Lowered, Vec<Diagnostic>), Vec<Diagnostic>> {
    let mut lx = Lx {
        op,
        b,
        inputs,
        site,
        vars: vec![],
        temps: vec![],
        temp_shapes: vec![],
        temp_of: HashMap::new(),
        targets: stmts.iter().map(|s| s.target.as_str()).collect(),
        failed: HashSet::from([POISONED.to_string()]),
        errs: vec![],
    };
    let parallel = lx.index_space(stmts, outputs, range);
    let Ok(parallel) = parallel else {
        return Err(lx.errs);
    };
    // The index space's variables are created first (a variadic name stands for several).
    let n = lx.vars.len();
    let mut out = Vec::new();
    let mut assigned = vec![false; op.outputs.len()];
    for st in stmts {
        match lx.stmt(st, &parallel, &mut assigned) {
            Ok(s) => out.push(s),
            // Its own error was reported; do not also call the output unassigned, or a
            // temporary's uses unassigned.
            Err(()) => match op.outputs.iter().position(|p| p.name == st.target) {
                Some(k) => assigned[k] = true,
                None => {
                    lx.failed.insert(st.target.clone());
                }
            },
        }
    }
    for (k, done) in assigned.iter().enumerate() {
        if !done {
            let p = &op.outputs[k];
            lx.errs.push(
                Diagnostic::error(
                    codes::MISSING_OUTPUT,
                    format!("output `{}` of `@{}` is never assigned", p.name, op.name),
                )
                .primary(p.span, "declared here")
                .note(format!(
                    "add a statement `{}[...] = ...` to the kernel",
                    p.name
                )),
            );
        }
    }
    let outputs = (0..op.outputs.len())
        .map(|k| {
            let vars = &parallel.out_vars[k];
            outputs[k].with_shape(vars.iter().map(|&v| lx.vars[v].extent()).collect())
        })
        .collect();
    let low = Lowered {
        vars: lx.vars,
        parallel: n,
        temps: lx.temps,
        stmts: out,
        outputs,
    };
    Ok((low, lx.errs))
}

/// The op's index space: variable names (expanded) and, per output, the vars of its dims.
struct Parallel {
    names: HashMap<String, Scope>,
    out_vars: Vec<Vec<usize>>,
}

impl Lx<'_> {
    fn err(&mut self, code: crate::diag::Code, msg: String, at: Span, label: &str) {
        let d = self.site.err(code, msg, at, label);
        self.errs.push(d);
    }

    /// Expands an assignment's left-hand side against a port's dims: `(scope entries, vars in order)`.
    fn expand_lhs(&mut self, st: &Stmt, port: &PortDef) -> R<Vec<(String, Scope, Span)>> {
        let shape_of = |d: &Dim| matches!(d, Dim::Variadic(..));
        if st.indices.len() != port.dims.len()
            || st
                .indices
                .iter()
                .zip(&port.dims)
                .any(|(i, d)| matches!(i, IndexVar::Variadic(..)) != shape_of(d))
        {
            let msg = if st.indices.len() == port.dims.len() {
                format!(
                    "`{}` must be indexed with `..i` exactly where its port has a `..S` list",
                    st.target
                )
            } else {
                format!(
                    "`{}` is indexed with {} entries but is declared with {} dimension(s)",
                    st.target,
                    st.indices.len(),
                    port.dims.len()
                )
            };
            self.err(
                codes::BAD_TARGET,
                msg,
                st.target_span,
                "does not match the port's declared dimensions",
            );
            return Err(());
        }
        let mut out = Vec::new();
        for (i, d) in st.indices.iter().zip(&port.dims) {
            match (i, d) {
                (IndexVar::Var(n, s), _) => out.push((n.clone(), Scope::Var(usize::MAX), *s)),
                (IndexVar::Variadic(n, s), Dim::Variadic(sym, _)) => {
                    let len = self.b.variadic.get(sym).map_or(0, Vec::len);
                    out.push((n.clone(), Scope::List(vec![usize::MAX; len]), *s));
                }
                _ => unreachable!("checked above"),
            }
        }
        Ok(out)
    }

    fn index_space(
        &mut self,
        stmts: &[Stmt],
        outputs: &[TensorType],
        range: Option<&[(i64, i64)]>,
    ) -> R<Parallel> {
        let mut names: HashMap<String, Scope> = HashMap::new();
        let mut out_vars = vec![Vec::new(); self.op.outputs.len()];
        let mut first = true;
        for st in stmts {
            let Some(k) = self.op.outputs.iter().position(|p| p.name == st.target) else {
                continue;
            };
            let lhs = self.expand_lhs(st, &self.op.outputs[k])?;
            let mut dims = Vec::new();
            for (name, entry, span) in lhs {
                if first {
                    if names.contains_key(&name) {
                        self.err(
                            codes::DUPLICATE,
                            format!("index variable `{name}` appears twice on the left-hand side"),
                            span,
                            "repeated",
                        );
                        return Err(());
                    }
                    let entry = match entry {
                        Scope::Var(_) => Scope::Var(self.new_var(name.clone(), (0, 0))),
                        Scope::List(v) => Scope::List(
                            (0..v.len())
                                .map(|i| self.new_var(format!("{name}.{i}"), (0, 0)))
                                .collect(),
                        ),
                    };
                    names.insert(name.clone(), entry);
                }
                match names.get(&name) {
                    Some(Scope::Var(v)) => dims.push(*v),
                    Some(Scope::List(v)) => dims.extend(v),
                    None => {
                        self.err(
                            codes::BAD_TARGET,
                            format!(
                                "`{name}` is not an index variable of the first output statement"
                            ),
                            span,
                            "every output must be indexed by the same variables",
                        );
                        return Err(());
                    }
                }
            }
            if !first && dims.len() != self.vars.len() {
                self.err(
                    codes::BAD_TARGET,
                    "every output must be indexed by all the op's index variables".into(),
                    st.target_span,
                    "missing index variables",
                );
                return Err(());
            }
            first = false;
            out_vars[k] = dims;
        }
        if first {
            return Ok(Parallel { names, out_vars });
        }
        let n = self.vars.len();
        if let Some(r) = range {
            if r.len() != n {
                let msg = format!(
                    "the op's index space has {n} dimension(s) but the range has {}",
                    r.len()
                );
                let d = Diagnostic::error(codes::BAD_RANGE, msg)
                    .primary(self.site.span, "wrong number of ranges");
                self.errs.push(d);
                return Err(());
            }
        }
        for (k, vars) in out_vars.iter().enumerate() {
            for (d, &v) in vars.iter().enumerate() {
                let want = match range {
                    Some(r) => r[v],
                    None => (0, outputs[k].shape[d]),
                };
                let var = &mut self.vars[v];
                if var.range != (0, 0) && var.range != want {
                    let msg = format!(
                        "index variable `{}` would range over two different extents",
                        var.name
                    );
                    let span = self.op.outputs[k].span;
                    self.err(codes::SHAPE_MISMATCH, msg, span, "output dims disagree");
                    return Err(());
                }
                var.range = want;
            }
        }
        Ok(Parallel { names, out_vars })
    }

    fn new_var(&mut self, name: String, range: (i64, i64)) -> usize {
        self.vars.push(Var { name, range });
        self.vars.len() - 1
    }

    fn stmt(&mut self, st: &Stmt, par: &Parallel, assigned: &mut [bool]) -> R<CStmt> {
        if self.op.inputs.iter().any(|p| p.name == st.target) {
            self.err(
                codes::BAD_TARGET,
                format!("`{}` is an input and cannot be assigned", st.target),
                st.target_span,
                "input port",
            );
            return Err(());
        }
        let out = self.op.outputs.iter().position(|p| p.name == st.target);
        let mut scope: HashMap<String, Scope> = HashMap::new();
        let mut vars = Vec::new();
        for iv in &st.indices {
            let (IndexVar::Var(n, s) | IndexVar::Variadic(n, s)) = iv;
            match par.names.get(n) {
                Some(e) => {
                    if scope.insert(n.clone(), e.clone()).is_some() {
                        self.err(
                            codes::DUPLICATE,
                            format!("index variable `{n}` appears twice on the left-hand side"),
                            *s,
                            "repeated",
                        );
                        return Err(());
                    }
                    match e {
                        Scope::Var(v) => vars.push(*v),
                        Scope::List(l) => vars.extend(l),
                    }
                }
                None => {
                    self.err(
                        codes::BAD_TARGET,
                        format!("`{n}` is not one of the op's index variables"),
                        *s,
                        "temporaries are indexed by the outputs' index variables",
                    );
                    return Err(());
                }
            }
        }
        let value = self.expr(&st.value, &mut scope)?;
        let target = match out {
            Some(k) => {
                if std::mem::replace(&mut assigned[k], true) {
                    self.err(
                        codes::BAD_TARGET,
                        format!("output `{}` is assigned twice", st.target),
                        st.target_span,
                        "second assignment",
                    );
                    return Err(());
                }
                Target::Output(k)
            }
            None => {
                if self.temp_of.contains_key(&st.target) {
                    self.err(
                        codes::BAD_TARGET,
                        format!("temporary `{}` is assigned twice", st.target),
                        st.target_span,
                        "second assignment",
                    );
                    return Err(());
                }
                let dtype = match value.1 {
                    Ty::Known(d) => d,
                    Ty::WeakInt => DType::I64,
                    Ty::WeakFloat => DType::F32,
                };
                self.temp_of.insert(st.target.clone(), self.temps.len());
                self.temps.push(Temp {
                    name: st.target.clone(),
                    dtype,
                    vars: vars.clone(),
                });
                self.temp_shapes
                    .push(vars.iter().map(|&v| self.vars[v].range).collect());
                Target::Temp(self.temps.len() - 1)
            }
        };
        let want = match target {
            Target::Output(k) => self.op.outputs[k].dtype,
            Target::Temp(t) => self.temps[t].dtype,
        };
        let value = self.coerce(value, want, st.value.span)?;
        Ok(CStmt {
            target,
            vars,
            value,
        })
    }

    fn expr(&mut self, e: &KExpr, scope: &mut HashMap<String, Scope>) -> R<(CExpr, Ty)> {
        let (kind, ty) = match &e.kind {
            KExprKind::Int(v) => (CKind::Const(Scalar::I(*v)), Ty::WeakInt),
            KExprKind::Float(v) => (CKind::Const(Scalar::F(*v)), Ty::WeakFloat),
            KExprKind::Bool(v) => (CKind::Const(Scalar::B(*v)), Ty::Known(DType::Bool)),
            KExprKind::Name(n) => match scope.get(n) {
                Some(Scope::Var(v)) => (CKind::Var(*v), Ty::WeakInt),
                Some(Scope::List(_)) => {
                    self.err(
                        codes::UNDEFINED_NAME,
                        format!("`{n}` is a list of index variables; use `..{n}` inside `[...]`"),
                        e.span,
                        "not a scalar",
                    );
                    return Err(());
                }
                None => match self.b.get(n) {
                    Some(v) => (CKind::Const(Scalar::I(v)), Ty::WeakInt),
                    None => {
                        self.undefined(n, e.span);
                        return Err(());
                    }
                },
            },
            KExprKind::Access(name, idx) => return self.access(name, idx, e.span, scope),
            KExprKind::Reduce(kind, vars, body) => {
                return self.reduce(*kind, vars, body, e.span, scope)
            }
            KExprKind::Call(f, args) => return self.call(*f, args, e.span, scope),
            KExprKind::Unary(op, a) => {
                let a = self.expr(a, scope)?;
                let ty = match op {
                    UnOp::Neg if a.1 != Ty::Known(DType::Bool) => a.1,
                    UnOp::Not if a.1 == Ty::Known(DType::Bool) => a.1,
                    UnOp::BitNot if a.1 == Ty::WeakInt => a.1,
                    UnOp::BitNot if matches!(a.1, Ty::Known(d) if d.is_int()) => a.1,
                    _ => {
                        let what = match op {
                            UnOp::Neg => "`-` needs a number",
                            UnOp::Not => "`!` needs a bool",
                            UnOp::BitNot => "`~` needs an integer",
                        };
                        self.err(
                            codes::DTYPE_MISMATCH,
                            what.into(),
                            e.span,
                            "wrong operand type",
                        );
                        return Err(());
                    }
                };
                return Ok((
                    CExpr {
                        kind: CKind::Unary(*op, Box::new(a.0)),
                        dtype: placeholder(ty),
                    },
                    ty,
                ));
            }
            KExprKind::Binary(op, a, b) => return self.binary(*op, a, b, e.span, scope),
        };
        Ok((
            CExpr {
                kind,
                dtype: placeholder(ty),
            },
            ty,
        ))
    }

    fn undefined(&mut self, n: &str, span: Span) {
        let is_port = self.op.ports().any(|p| p.name == n) || self.temp_of.contains_key(n);
        let d = self.site.err(
            codes::UNDEFINED_NAME,
            format!("`{n}` is not defined here"),
            span,
            "unknown name",
        );
        self.errs.push(if is_port {
            d.note(format!("`{n}` is a tensor; index it, e.g. `{n}[...]` (`{n}[]` for a scalar)"))
        } else {
            d.note("names in a kernel are index variables of this statement, reduction variables, shape symbols, parameters or tensors")
        });
    }

    fn access(
        &mut self,
        name: &str,
        idx: &[Index],
        span: Span,
        scope: &mut HashMap<String, Scope>,
    ) -> R<(CExpr, Ty)> {
        let (src, dtype, shape) =
            if let Some(k) = self.op.inputs.iter().position(|p| p.name == name) {
                (
                    Src::Input(k),
                    self.inputs[k].dtype,
                    self.inputs[k].shape.clone(),
                )
            } else if let Some(&t) = self.temp_of.get(name) {
                let shape = self.temp_shapes[t].iter().map(|r| r.1).collect();
                (Src::Temp(t), self.temps[t].dtype, shape)
            } else if self.op.outputs.iter().any(|p| p.name == name) {
                self.err(
                    codes::USE_BEFORE_DEF,
                    format!("output `{name}` cannot be read in the kernel"),
                    span,
                    "outputs are write-only",
                );
                return Err(());
            } else if self.failed.contains(name) {
                return Err(());
            } else {
                if self.targets.contains(name) {
                    self.err(
                        codes::USE_BEFORE_DEF,
                        format!("temporary `{name}` is used before it is assigned"),
                        span,
                        "not yet assigned",
                    );
                } else {
                    self.undefined(name, span);
                }
                return Err(());
            };
        let mut index = Vec::new();
        let mut texts = Vec::new();
        let mut by = Vec::new();
        for i in idx {
            by.resize(index.len(), None);
            match i {
                Index::Gather(g) => {
                    let (load, offset) = self.gathered(g, scope)?;
                    index.push(offset);
                    by.push(Some(load));
                    texts.push((g.span, gather_text(g)));
                }
                Index::Expr(e) => {
                    index.push(self.affine(e, scope)?);
                    texts.push((e.span(), iexpr_text(e)));
                }
                Index::Variadic(n, s) => match scope.get(n) {
                    Some(Scope::List(vs)) => {
                        for (k, &v) in vs.iter().enumerate() {
                            index.push(Affine::var(v));
                            texts.push((*s, format!("{n}.{k}")));
                        }
                    }
                    _ => {
                        self.err(
                            codes::UNDEFINED_NAME,
                            format!("`..{n}` is not a variadic index variable here"),
                            *s,
                            "unknown variadic index",
                        );
                        return Err(());
                    }
                },
            }
        }
        if index.len() != shape.len() {
            self.err(
                codes::RANK_MISMATCH,
                format!(
                    "`{name}` has rank {} but is indexed with {} indices",
                    shape.len(),
                    index.len()
                ),
                span,
                "wrong number of indices",
            );
            return Err(());
        }
        let kind = if by.iter().any(Option::is_some) {
            by.resize(index.len(), None);
            self.gather_load(name, src, index, by, texts, span)?
        } else {
            // Temps are stored over the shard's range; shift to local coordinates at load time.
            CKind::Load { src, index, texts }
        };
        Ok((CExpr { kind, dtype }, Ty::Known(dtype)))
    }

    fn affine(&mut self, e: &IExpr, scope: &HashMap<String, Scope>) -> R<Affine> {
        let b = self.b;
        let lookup = |n: &str| match scope.get(n) {
            Some(Scope::Var(v)) => Some(Affine::var(*v)),
            Some(Scope::List(_)) => None,
            None => b.get(n).map(Affine::constant),
        };
        match affine_of(e, &lookup) {
            Ok(a) => Ok(a),
            Err(AffineError::Unknown(n, s)) => {
                self.undefined(&n, s);
                Err(())
            }
            Err(AffineError::NonAffine(why)) => {
                let text = iexpr_text(e);
                let msg = format!("index `{text}` is not affine in the index variables");
                let d = self.site.err(codes::NON_AFFINE, msg, e.span(), why);
                self.errs.push(d.note(INDEX_RULE));
                Err(())
            }
        }
    }

    fn reduce(
        &mut self,
        kind: Reduction,
        vars: &[IndexVar],
        body: &KExpr,
        span: Span,
        scope: &mut HashMap<String, Scope>,
    ) -> R<(CExpr, Ty)> {
        let mut ids = Vec::new();
        let mut saved = Vec::new();
        for v in vars {
            let IndexVar::Var(n, s) = v else {
                let (IndexVar::Var(_, s) | IndexVar::Variadic(_, s)) = v;
                self.err(
                    codes::BAD_REDUCTION,
                    "variadic reduction variables are not supported".into(),
                    *s,
                    "write the variables out",
                );
                return Err(());
            };
            if scope.contains_key(n)
                || ids
                    .iter()
                    .any(|&(m, _): &(usize, Span)| self.vars[m].name == *n)
            {
                self.err(
                    codes::BAD_REDUCTION,
                    format!("reduction variable `{n}` shadows an index variable in scope"),
                    *s,
                    "already in scope",
                );
                return Err(());
            }
            let id = self.new_var(n.clone(), (0, 0));
            saved.push((n.clone(), scope.insert(n.clone(), Scope::Var(id))));
            ids.push((id, *s));
        }
        let result = self.expr(body, scope);
        for (n, old) in saved {
            match old {
                Some(o) => scope.insert(n, o),
                None => scope.remove(&n),
            };
        }
        let (body_c, ty) = result?;
        for &(id, s) in &ids {
            match extent_of(&body_c, id, self) {
                Some(ext) => self.vars[id].range = (0, ext),
                None => {
                    let name = self.vars[id].name.clone();
                    let d = self
                        .site
                        .err(codes::UNKNOWN_EXTENT, format!("cannot infer the extent of reduction variable `{name}`"), s, "extent unknown")
                        .note(format!("use `{name}` alone as an index of some input dimension, e.g. `x[{name}]`"));
                    self.errs.push(d);
                    return Err(());
                }
            }
        }
        if ty == Ty::Known(DType::Bool) {
            self.err(
                codes::BAD_REDUCTION,
                format!("`{}` over bool values", kind.name()),
                span,
                "reduce numbers, or cast first",
            );
            return Err(());
        }
        let vars: Vec<usize> = ids.into_iter().map(|(v, _)| v).collect();
        if kind.is_arg() {
            return self.arg_reduce(kind, vars, (body_c, ty), span);
        }
        if kind == Reduction::Mean {
            return self.mean(vars, (body_c, ty), span);
        }
        Ok((
            CExpr {
                kind: CKind::Reduce {
                    kind,
                    vars,
                    body: Box::new(body_c),
                },
                dtype: placeholder(ty),
            },
            ty,
        ))
    }

    /// `mean[k..](e)`: `sum[k..](e)` divided by the number of points, a constant of the float
    /// dtype (0/0, a NaN, for an empty range); integer bodies are E0038.
    fn mean(&mut self, vars: Vec<usize>, body: (CExpr, Ty), span: Span) -> R<(CExpr, Ty)> {
        let (body, ty) = body;
        if matches!(ty, Ty::WeakInt) || matches!(ty, Ty::Known(d) if !d.is_float()) {
            self.err(
                codes::BAD_REDUCTION,
                "`mean` of integers".into(),
                span,
                "cast the body to a float dtype, e.g. `mean[k](f32(x[k]))`",
            );
            return Err(());
        }
        let count = (vars.iter())
            .map(|&v| self.vars[v].range)
            .fold(1f64, |n, (lo, hi)| n * (hi - lo) as f64);
        let dtype = placeholder(ty);
        let sum = CExpr {
            kind: CKind::Reduce {
                kind: Reduction::Sum,
                vars,
                body: Box::new(body),
            },
            dtype,
        };
        let count = CExpr {
            kind: CKind::Const(Scalar::F(count)),
            dtype,
        };
        let kind = CKind::Binary(BinOp::Div, Box::new(sum), Box::new(count));
        Ok((CExpr { kind, dtype }, ty))
    }

    /// `argmax`/`argmin`: one reduction variable; the body keeps its dtype (a weak one takes
    /// its default, i64 or f64) and the result is an i64 index.
    fn arg_reduce(
        &mut self,
        kind: Reduction,
        vars: Vec<usize>,
        body: (CExpr, Ty),
        span: Span,
    ) -> R<(CExpr, Ty)> {
        if vars.len() != 1 {
            self.err(
                codes::BAD_REDUCTION,
                format!(
                    "`{}` takes one reduction variable, not {}",
                    kind.name(),
                    vars.len()
                ),
                span,
                "one variable, e.g. `argmax[k](x[i, k])`",
            );
            return Err(());
        }
        let want = default_of(body.1);
        let body = self.coerce(body, want, span)?;
        let t = Ty::Known(DType::I64);
        let kind = CKind::Reduce {
            kind,
            vars,
            body: Box::new(body),
        };
        Ok((
            CExpr {
                kind,
                dtype: DType::I64,
            },
            t,
        ))
    }

    fn call(
        &mut self,
        f: Func,
        args: &[KExpr],
        span: Span,
        scope: &mut HashMap<String, Scope>,
    ) -> R<(CExpr, Ty)> {
        // Every argument is checked, whichever fails.
        let cargs: Vec<_> = args.iter().map(|a| self.expr(a, scope)).collect();
        let mut cargs = cargs.into_iter().collect::<R<Vec<_>>>()?;
        let bad = |lx: &mut Self, what: &str| {
            lx.err(
                codes::DTYPE_MISMATCH,
                format!("`{}` {what}", f.name()),
                span,
                "wrong argument type",
            );
            Err(())
        };
        let ty = match f {
            Func::Cast(d) => {
                let (a, t) = cargs.pop().ok_or(())?;
                let a = self.coerce((a, t), default_of(t), span)?;
                return Ok((
                    CExpr {
                        kind: CKind::Call(f, vec![a]),
                        dtype: d,
                    },
                    Ty::Known(d),
                ));
            }
            Func::Select => {
                let (c, b, e) = (cargs.remove(0), cargs.remove(0), cargs.remove(0));
                let c = self.coerce(c, DType::Bool, span)?;
                let ty = self.unify(b.1, e.1, span)?;
                // A weak branch takes the other's dtype now (so an f32 literal rounds to f32).
                let (b, e) = match ty {
                    Ty::Known(d) => (self.coerce(b, d, span)?, self.coerce(e, d, span)?),
                    _ => (b.0, e.0),
                };
                return Ok((
                    CExpr {
                        kind: CKind::Call(f, vec![c, b, e]),
                        dtype: placeholder(ty),
                    },
                    ty,
                ));
            }
            Func::Max | Func::Min => {
                let ty = self.unify(cargs[0].1, cargs[1].1, span)?;
                if let Ty::Known(d) = ty {
                    for a in std::mem::take(&mut cargs) {
                        let e = self.coerce(a, d, span)?;
                        cargs.push((e, ty));
                    }
                }
                ty
            }
            Func::Abs => cargs[0].1,
            Func::Popcount => match cargs[0].1 {
                Ty::WeakInt => Ty::WeakInt,
                Ty::Known(d) if d.is_int() => Ty::Known(d),
                _ => return bad(self, "needs an integer argument"),
            },
            Func::Pow => match self.unify(cargs[0].1, cargs[1].1, span)? {
                Ty::Known(d) if !d.is_float() => {
                    return bad(self, "needs float arguments (cast ints with `f32(...)`)")
                }
                Ty::Known(d) => {
                    for a in std::mem::take(&mut cargs) {
                        let e = self.coerce(a, d, span)?;
                        cargs.push((e, Ty::Known(d)));
                    }
                    Ty::Known(d)
                }
                _ => Ty::WeakFloat,
            },
            _ => match cargs[0].1 {
                Ty::WeakInt | Ty::WeakFloat => Ty::WeakFloat,
                Ty::Known(d) if d.is_float() => Ty::Known(d),
                _ => return bad(self, "needs a float argument (cast ints with `f32(...)`)"),
            },
        };
        if ty == Ty::Known(DType::Bool) {
            return bad(self, "does not take bool arguments");
        }
        let args = cargs.into_iter().map(|a| a.0).collect();
        Ok((
            CExpr {
                kind: CKind::Call(f, args),
                dtype: placeholder(ty),
            },
            ty,
        ))
    }

    fn binary(
        &mut self,
        op: BinOp,
        a: &KExpr,
        b: &KExpr,
        span: Span,
        scope: &mut HashMap<String, Scope>,
    ) -> R<(CExpr, Ty)> {
        // Both sides are checked: a mistake in one does not hide the other's.
        let (x, y) = (self.expr(a, scope), self.expr(b, scope));
        let (x, y) = (x?, y?);
        let logic = matches!(op, BinOp::And | BinOp::Or);
        let cmp = matches!(
            op,
            BinOp::Lt | BinOp::Le | BinOp::Gt | BinOp::Ge | BinOp::Eq | BinOp::Ne
        );
        if logic {
            let x = self.coerce(x, DType::Bool, a.span)?;
            let y = self.coerce(y, DType::Bool, b.span)?;
            let t = Ty::Known(DType::Bool);
            return Ok((
                CExpr {
                    kind: CKind::Binary(op, Box::new(x), Box::new(y)),
                    dtype: DType::Bool,
                },
                t,
            ));
        }
        let ty = self.unify(x.1, y.1, span)?;
        if ty == Ty::Known(DType::Bool) && !matches!(op, BinOp::Eq | BinOp::Ne) {
            self.err(
                codes::DTYPE_MISMATCH,
                "arithmetic and ordering need numbers, not bool".into(),
                span,
                "bool operand",
            );
            return Err(());
        }
        let int = matches!(ty, Ty::WeakInt) || matches!(ty, Ty::Known(d) if d.is_int());
        if op.is_bitwise() && !int {
            self.err(
                codes::DTYPE_MISMATCH,
                format!(
                    "bitwise operators need integers, not {}",
                    match ty {
                        Ty::Known(d) => d.name(),
                        _ => "a float literal",
                    }
                ),
                span,
                "cast to an integer dtype first",
            );
            return Err(());
        }
        if cmp {
            // Comparisons fix their operands' type now; the result is always bool.
            let d = default_of(ty);
            let x = self.coerce(x, d, a.span)?;
            let y = self.coerce(y, d, b.span)?;
            return Ok((
                CExpr {
                    kind: CKind::Binary(op, Box::new(x), Box::new(y)),
                    dtype: DType::Bool,
                },
                Ty::Known(DType::Bool),
            ));
        }
        // A weak operand takes the other's dtype now (so an f32 literal rounds to f32).
        let (x, y) = match ty {
            Ty::Known(d) => (self.coerce(x, d, a.span)?, self.coerce(y, d, b.span)?),
            _ => (x.0, y.0),
        };
        Ok((
            CExpr {
                kind: CKind::Binary(op, Box::new(x), Box::new(y)),
                dtype: placeholder(ty),
            },
            ty,
        ))
    }

    fn unify(&mut self, a: Ty, b: Ty, span: Span) -> R<Ty> {
        Ok(match (a, b) {
            (Ty::Known(x), Ty::Known(y)) if x == y => a,
            (Ty::Known(x), Ty::Known(y)) => {
                self.err(
                    codes::DTYPE_MISMATCH,
                    format!("operands have different dtypes: {x} and {y}"),
                    span,
                    "cast one side, e.g. `f32(...)`",
                );
                return Err(());
            }
            (Ty::Known(d), w) | (w, Ty::Known(d)) => {
                if w == Ty::WeakFloat && !d.is_float() {
                    self.err(
                        codes::DTYPE_MISMATCH,
                        format!("a float literal cannot be {d}"),
                        span,
                        "float used with an integer or bool",
                    );
                    return Err(());
                }
                Ty::Known(d)
            }
            (Ty::WeakFloat, _) | (_, Ty::WeakFloat) => Ty::WeakFloat,
            _ => Ty::WeakInt,
        })
    }

    /// Fixes the weak parts of `e` to `want`, or reports a mismatch.
    fn coerce(&mut self, (mut e, ty): (CExpr, Ty), want: DType, span: Span) -> R<CExpr> {
        match ty {
            Ty::Known(d) if d == want => Ok(e),
            Ty::Known(d) => {
                self.err(
                    codes::DTYPE_MISMATCH,
                    format!("expected {want} but this is {d}"),
                    span,
                    &format!("cast with `{want}(...)`"),
                );
                Err(())
            }
            Ty::WeakFloat if !want.is_float() => {
                self.err(
                    codes::DTYPE_MISMATCH,
                    format!("expected {want} but this is a float"),
                    span,
                    "float value here",
                );
                Err(())
            }
            Ty::WeakInt if want == DType::Bool => {
                self.err(
                    codes::DTYPE_MISMATCH,
                    "expected bool but this is an integer".into(),
                    span,
                    "use a comparison",
                );
                Err(())
            }
            _ => {
                settle(&mut e, want);
                if let Some(text) = unfit_literal(&e) {
                    self.err(
                        codes::BAD_LITERAL,
                        format!("the literal {text} does not fit in {want}"),
                        span,
                        &format!("this is {want}"),
                    );
                    return Err(());
                }
                Ok(e)
            }
        }
    }
}

/// A literal that `settle` gave a dtype it does not fit (an i32 beyond 32 bits, an f32 or
/// f16 overflow, a negative u8; see [`Scalar::fits`]).
fn unfit_literal(e: &CExpr) -> Option<String> {
    let fits = |v: Scalar, d: DType| v.fits(d);
    match &e.kind {
        CKind::Unary(UnOp::Neg, a) => match a.kind {
            CKind::Const(Scalar::I(v)) => {
                (!fits(Scalar::I(v.wrapping_neg()), a.dtype)).then(|| format!("-{v}"))
            }
            _ => unfit_literal(a),
        },
        CKind::Const(v) => (!fits(*v, e.dtype)).then(|| match v {
            Scalar::F(f) => crate::ir::types::float_text(*f),
            _ => format!("{}", v.as_i64()),
        }),
        CKind::Var(_) | CKind::Load { .. } | CKind::Gather(_) => None,
        CKind::Reduce { body: a, .. } | CKind::Unary(_, a) => unfit_literal(a),
        CKind::Call(_, args) => args.iter().find_map(unfit_literal),
        CKind::Binary(_, a, b) => unfit_literal(a).or_else(|| unfit_literal(b)),
    }
}

/// Weak nodes carry this until they are settled; it never survives lowering.
fn placeholder(t: Ty) -> DType {
    match t {
        Ty::Known(d) => d,
        Ty::WeakInt => DType::I64,
        Ty::WeakFloat => DType::F64,
    }
}

fn default_of(t: Ty) -> DType {
    placeholder(t)
}

/// Gives a weakly typed subtree the concrete dtype `want` (stops at nodes of a fixed type).
fn settle(e: &mut CExpr, want: DType) {
    match &mut e.kind {
        CKind::Const(_) | CKind::Var(_) => e.dtype = want,
        CKind::Load { .. } | CKind::Gather(_) => {}
        CKind::Call(Func::Cast(_), _) => {}
        CKind::Binary(op, a, b)
            if !matches!(
                op,
                BinOp::Lt
                    | BinOp::Le
                    | BinOp::Gt
                    | BinOp::Ge
                    | BinOp::Eq
                    | BinOp::Ne
                    | BinOp::And
                    | BinOp::Or
            ) =>
        {
            settle(a, want);
            settle(b, want);
            e.dtype = want;
        }
        CKind::Binary(..) => {}
        CKind::Unary(UnOp::Neg | UnOp::BitNot, a) | CKind::Reduce { body: a, .. } => {
            settle(a, want);
            e.dtype = want;
        }
        CKind::Unary(UnOp::Not, _) => {}
        CKind::Call(Func::Select, args) => {
            for a in &mut args[1..] {
                settle(a, want);
            }
            e.dtype = want;
        }
        CKind::Call(_, args) => {
            for a in args {
                settle(a, want);
            }
            e.dtype = want;
        }
    }
}

/// The extent of reduction variable `v`: the size of a tensor dimension it indexes alone.
fn extent_of(e: &CExpr, v: usize, lx: &Lx) -> Option<i64> {
    match &e.kind {
        CKind::Load { src, index, .. } => {
            let dim = index
                .iter()
                .position(|a| a.terms == [(v, 1)] && a.constant == 0)?;
            // Temps live over the shard's range, so only inputs can fix an extent.
            match src {
                Src::Input(k) => Some(lx.inputs[*k].shape[dim]),
                Src::Temp(_) => None,
            }
        }
        CKind::Gather(g) => {
            let alone = |(d, a): (usize, &Affine)| {
                (g.by[d].is_none() && a.terms == [(v, 1)] && a.constant == 0).then_some(d)
            };
            match g.index.iter().enumerate().find_map(alone) {
                Some(d) => Some(lx.inputs[g.input].shape[d]),
                None => g.gathered().find_map(|(_, b)| extent_of(b, v, lx)),
            }
        }
        CKind::Reduce { body, .. } | CKind::Unary(_, body) => extent_of(body, v, lx),
        CKind::Call(_, args) => args.iter().find_map(|a| extent_of(a, v, lx)),
        CKind::Binary(_, a, b) => extent_of(a, v, lx).or_else(|| extent_of(b, v, lx)),
        CKind::Const(_) | CKind::Var(_) => None,
    }
}
