//! Lowering of op declarations: ports, kernel statements and expressions, and the explicit
//! signature of an `extern op`. An op with errors is left out of the module; its known header
//! is kept as a [`Stub`] (with its kernel, failed values poisoned, when the header is sound).

use super::cx::{binop, err, unop, Cx};
use crate::diag::{codes, Span};
use crate::ir::kernel::*;
use crate::syntax::ast::{self, ExprKind, OpStmt};
use std::collections::HashMap;

impl Cx<'_> {
    /// The op, or `None` when it has errors (then `self.stub` holds its known header).
    pub(super) fn op(&mut self, op: &ast::OpDecl) -> Option<OpDef> {
        let before = self.diags.0.len();
        self.unique_names(op);
        let inputs: Vec<Option<PortDef>> = op.inputs.iter().map(|p| self.port(p)).collect();
        let outputs: Vec<Option<PortDef>> = op.outputs.iter().map(|p| self.port(p)).collect();
        let header_clean = self.diags.0.len() == before;
        let partial = op.partial.as_ref();
        let params: Vec<String> = op.params.iter().map(|p| p.text.clone()).collect();
        self.stub = Some(Stub {
            name: op.name.text.clone(),
            name_span: op.name.span,
            params: partial
                .is_none_or(|p| p.params_known)
                .then(|| params.clone()),
            inputs: by_position(partial.map(|p| &p.inputs), &inputs),
            outputs: by_position(partial.map(|p| &p.outputs), &outputs),
            kernel: None,
        });
        // A body is only checked against a complete header (else its names would cascade).
        if !partial.is_none_or(ast::Partial::complete) {
            return None;
        }
        let body = if op.is_extern {
            self.extern_body(op)
        } else {
            self.kernel_body(op)
        };
        // A body statement with a syntax error (already reported) leaves the op incomplete.
        let parsed = !op.body.iter().any(|st| matches!(st, OpStmt::Error(_)));
        let inputs = inputs.into_iter().collect::<Option<Vec<_>>>()?;
        let outputs = outputs.into_iter().collect::<Option<Vec<_>>>()?;
        let clean = self.diags.0.len() == before && parsed && partial.is_none();
        let kept = kept_every_statement(op, &body);
        let def = OpDef {
            name: op.name.text.clone(),
            params,
            inputs,
            outputs,
            body,
            span: op.span,
            name_span: op.name.span,
        };
        if clean {
            return Some(def);
        }
        if let (Some(stub), true) = (&mut self.stub, header_clean && parsed && kept) {
            stub.kernel = Some(def);
        }
        None
    }

    /// Parameters and ports share one namespace.
    fn unique_names(&mut self, op: &ast::OpDecl) {
        let mut names: HashMap<&str, Span> = HashMap::new();
        for p in op
            .params
            .iter()
            .chain(op.inputs.iter().map(|p| &p.name))
            .chain(op.outputs.iter().map(|p| &p.name))
        {
            if let Some(prev) = names.insert(&p.text, p.span) {
                self.duplicate(&p.text, p.span, prev);
            }
        }
    }

    fn port(&mut self, p: &ast::Port) -> Option<PortDef> {
        let variadic: Vec<_> =
            p.ty.dims
                .iter()
                .filter(|d| matches!(d.kind, ExprKind::Variadic(_)))
                .collect();
        if let Some(second) = variadic.get(1) {
            self.report(
                err(
                    codes::BAD_SHAPE,
                    "a port shape may contain at most one `..` list",
                    second.span,
                    "second `..` list",
                )
                .secondary(variadic[0].span, "first one here"),
            );
            return None;
        }
        let dtype = self.dtype(&p.ty.dtype)?;
        let dims =
            p.ty.dims
                .iter()
                .map(|d| self.dim(d))
                .collect::<Option<Vec<_>>>()?;
        Some(PortDef {
            name: p.name.text.clone(),
            dtype,
            dims,
            span: p.name.span.to(p.ty.span),
        })
    }

    fn dim(&mut self, e: &ast::Expr) -> Option<Dim> {
        match &e.kind {
            ExprKind::Variadic(s) => Some(Dim::Variadic(s.clone(), e.span)),
            _ => self.iexpr(e, codes::BAD_SHAPE, "shape").map(Dim::Expr),
        }
    }

    fn kernel_body(&mut self, op: &ast::OpDecl) -> OpBody {
        let mut stmts = Vec::new();
        for st in &op.body {
            match st {
                OpStmt::Assign { .. } => stmts.extend(self.assign(st)),
                OpStmt::IndexSpace { span, .. }
                | OpStmt::Projection { span, .. }
                | OpStmt::Cost { span, .. } => self.report(
                    err(
                        codes::BAD_SIGNATURE,
                        "explicit signatures belong in an `extern op`",
                        *span,
                        "only allowed in `extern op`",
                    )
                    .note("a kernel op derives its signature from its kernel"),
                ),
                OpStmt::Error(_) => {}
            }
        }
        OpBody::Kernel(stmts)
    }

    fn extern_body(&mut self, op: &ast::OpDecl) -> OpBody {
        let mut sig = ExternSig {
            index: vec![],
            projections: vec![],
            costs: vec![],
            kernel: vec![],
            index_span: op.name.span,
            cost_span: Span::default(),
        };
        let mut have_index = false;
        for st in &op.body {
            match st {
                OpStmt::Assign { .. } => sig.kernel.extend(self.assign(st)),
                OpStmt::IndexSpace { dims, span } => {
                    self.index_space(&mut sig, dims, *span, have_index);
                    have_index = true;
                }
                OpStmt::Projection {
                    port,
                    start,
                    shape,
                    span,
                } => {
                    let p = self.projection(port, start, shape, *span);
                    sig.projections.push(p);
                }
                OpStmt::Cost { dims, span } => {
                    if sig.cost_span.end == 0 {
                        sig.cost_span = *span;
                    }
                    self.costs(&mut sig, dims);
                }
                OpStmt::Error(_) => {}
            }
        }
        self.check_extern_names(op, &sig);
        if !have_index {
            self.report(
                err(
                    codes::BAD_SIGNATURE,
                    format!("extern op `@{}` declares no index space", op.name.text),
                    op.name.span,
                    "missing `index [...]`",
                )
                .note("write e.g. `index [i: M, j: N]` in the body"),
            );
        }
        OpBody::Extern(sig)
    }

    /// `index [i: M, j: N]`; `again` when one was declared before (reported, then merged).
    fn index_space(
        &mut self,
        sig: &mut ExternSig,
        dims: &[(ast::Name, ast::Expr)],
        span: Span,
        again: bool,
    ) {
        if again {
            self.report(err(
                codes::BAD_SIGNATURE,
                "the index space is declared twice",
                span,
                "second declaration",
            ));
        }
        sig.index_span = span;
        for (n, e) in dims {
            if let Some(e) = self.iexpr(e, codes::BAD_SIGNATURE, "index extent") {
                sig.index.push((n.text.clone(), e));
            }
        }
    }

    /// `port: [start] + [shape]`.
    fn projection(
        &mut self,
        port: &ast::Name,
        start: &[ast::Expr],
        shape: &[ast::Expr],
        span: Span,
    ) -> ExternProjection {
        let mut exprs = |es: &[ast::Expr]| -> Vec<IExpr> {
            es.iter()
                .filter_map(|e| self.iexpr(e, codes::BAD_SIGNATURE, "projection"))
                .collect()
        };
        let start = exprs(start);
        let shape = exprs(shape);
        ExternProjection {
            port: port.text.clone(),
            start,
            shape,
            span,
        }
    }

    /// `cost { i: { flops: 2 * K } }`.
    fn costs(&mut self, sig: &mut ExternSig, dims: &[(ast::Name, Vec<(ast::Name, ast::Expr)>)]) {
        for (d, entries) in dims {
            let entries = entries
                .iter()
                .filter_map(|(k, e)| {
                    Some((k.text.clone(), self.iexpr(e, codes::BAD_SIGNATURE, "cost")?))
                })
                .collect();
            sig.costs.push((d.text.clone(), entries));
        }
    }

    /// Every port has exactly one projection, and costs name declared index dims.
    fn check_extern_names(&mut self, op: &ast::OpDecl, sig: &ExternSig) {
        let mut seen: HashMap<&str, Span> = HashMap::new();
        for p in &sig.projections {
            if !op
                .inputs
                .iter()
                .chain(&op.outputs)
                .any(|q| q.name.text == p.port)
            {
                self.report(err(
                    codes::BAD_SIGNATURE,
                    format!("`{}` is not a port of `@{}`", p.port, op.name.text),
                    p.span,
                    "unknown port",
                ));
            } else if let Some(prev) = seen.insert(&p.port, p.span) {
                self.report(
                    err(
                        codes::BAD_SIGNATURE,
                        format!("port `{}` has two projections", p.port),
                        p.span,
                        "second projection",
                    )
                    .secondary(prev, "first one here"),
                );
            }
        }
        self.check_projection_entries(op);
        for q in op.inputs.iter().chain(&op.outputs) {
            if !seen.contains_key(q.name.text.as_str()) && !sig.index.is_empty() {
                self.report(err(
                    codes::BAD_SIGNATURE,
                    format!("port `{}` has no projection", q.name.text),
                    q.name.span,
                    "missing `port: [start] + [shape]`",
                ));
            }
        }
        let cost_dims = op.body.iter().flat_map(|st| match st {
            OpStmt::Cost { dims, .. } => dims.as_slice(),
            _ => &[],
        });
        for (d, _) in cost_dims {
            if !sig.index.iter().any(|(n, _)| *n == d.text) {
                let names: Vec<&str> = sig.index.iter().map(|(n, _)| n.as_str()).collect();
                self.report(
                    err(
                        codes::BAD_SIGNATURE,
                        format!("cost for `{}`, which is not an index dimension", d.text),
                        d.span,
                        "unknown cost dimension",
                    )
                    .note(format!("the index dimensions are {}", names.join(", "))),
                );
            }
        }
    }

    /// Each projection of a port has one start and one shape entry per dim of the port (as
    /// written: an entry that failed to lower still counts).
    fn check_projection_entries(&mut self, op: &ast::OpDecl) {
        for st in &op.body {
            let OpStmt::Projection {
                port,
                start,
                shape,
                span,
            } = st
            else {
                continue;
            };
            let ports = op.inputs.iter().chain(&op.outputs);
            let Some(p) = ports.into_iter().find(|p| p.name.text == port.text) else {
                continue;
            };
            let dims = p.ty.dims.len();
            if let Some(msg) = projection_entries_error(&port.text, dims, start.len(), shape.len())
            {
                self.report(err(codes::BAD_SIGNATURE, msg, *span, "in this signature"));
            }
        }
    }

    fn assign(&mut self, st: &OpStmt) -> Option<Stmt> {
        let OpStmt::Assign {
            target,
            indices,
            value,
            span,
        } = st
        else {
            return None;
        };
        let mut vars = Vec::new();
        for i in indices {
            match &i.kind {
                ExprKind::Name(n) => vars.push(IndexVar::Var(n.clone(), i.span)),
                ExprKind::Variadic(n) => vars.push(IndexVar::Variadic(n.clone(), i.span)),
                _ if super::gather::contains_access(i) => self.report(
                    err(
                        codes::BAD_GATHER,
                        "a gathered index cannot appear on the left-hand side",
                        i.span,
                        "an output is indexed by plain index variables",
                    )
                    .note("gather on the right-hand side (`y[i] = x[idx[i]]`); writing through an index is a scatter"),
                ),
                _ => self.report(
                    err(
                        codes::BAD_TARGET,
                        "an assignment target must be indexed by plain index variables",
                        i.span,
                        "not an index variable",
                    )
                    .note("write the computation on the right-hand side, e.g. `y[i] = x[2 * i]`"),
                ),
            }
        }
        let value_span = value.span;
        let value = self.kexpr(value);
        (vars.len() == indices.len()).then_some(())?;
        // A value that failed (reported) is poisoned: the op is left out, but the rest of its
        // kernel can still be checked (see `Stub::kernel`).
        let value = value.unwrap_or_else(|| poisoned(value_span));
        Some(Stmt {
            target: target.text.clone(),
            indices: vars,
            value,
            span: *span,
            target_span: target.span,
        })
    }

    fn kexpr(&mut self, e: &ast::Expr) -> Option<KExpr> {
        let kind = match &e.kind {
            ExprKind::Int(d) => KExprKind::Int(self.int(d, false, e.span)?),
            ExprKind::Float(f) => KExprKind::Float(self.float(f, e.span)?),
            ExprKind::Bool(b) => KExprKind::Bool(*b),
            ExprKind::Name(n) => KExprKind::Name(n.clone()),
            ExprKind::Variadic(n) => {
                self.report(err(
                    codes::BAD_TARGET,
                    format!("`..{n}` can only appear inside `[...]`"),
                    e.span,
                    "not a value",
                ));
                return None;
            }
            ExprKind::Access { base, indices } => self.access(base, indices)?,
            ExprKind::Reduce { kind, vars, body } => self.reduce(kind, vars, body)?,
            ExprKind::Call { func, args } => self.call(func, args, e.span)?,
            ExprKind::Unary(op, a) => KExprKind::Unary(unop(*op), self.operand(a)),
            ExprKind::Binary(op, a, b) => {
                KExprKind::Binary(binop(*op), self.operand(a), self.operand(b))
            }
        };
        Some(KExpr { kind, span: e.span })
    }

    /// Sub-expression `e`, poisoned where it failed (reported): the verifier then still checks
    /// the rest of its statement (the names of the other operands, say).
    fn operand(&mut self, e: &ast::Expr) -> Box<KExpr> {
        Box::new(self.kexpr(e).unwrap_or_else(|| poisoned(e.span)))
    }

    /// `base[indices]`: every index affine (checked by the verifier), a `..i` list or a gather.
    fn access(&mut self, base: &ast::Name, indices: &[ast::Expr]) -> Option<KExprKind> {
        let idx = indices
            .iter()
            .map(|i| match &i.kind {
                ExprKind::Variadic(n) => Some(Index::Variadic(n.clone(), i.span)),
                _ if super::gather::contains_access(i) => self.gather_index(i).flatten(),
                _ => self
                    .iexpr(i, codes::NON_AFFINE, "tensor index")
                    .map(Index::Expr),
            })
            .collect::<Vec<_>>();
        Some(KExprKind::Access(
            base.text.clone(),
            idx.into_iter().collect::<Option<_>>()?,
        ))
    }

    /// `sum[k](body)`: a known reduction over plain variable names.
    fn reduce(
        &mut self,
        kind: &ast::Name,
        vars: &[ast::Expr],
        body: &ast::Expr,
    ) -> Option<KExprKind> {
        let red = Reduction::from_name(&kind.text);
        if red.is_none() {
            self.report(
                err(
                    codes::BAD_REDUCTION,
                    format!("unknown reduction `{}`", kind.text),
                    kind.span,
                    "not a reduction",
                )
                .note("reductions are sum, mean, max, min, prod, argmax and argmin"),
            );
        }
        let mut vs = Vec::new();
        for v in vars {
            match &v.kind {
                ExprKind::Name(n) => vs.push(IndexVar::Var(n.clone(), v.span)),
                ExprKind::Variadic(n) => vs.push(IndexVar::Variadic(n.clone(), v.span)),
                _ => self.report(err(
                    codes::BAD_REDUCTION,
                    "reduction variables must be plain names",
                    v.span,
                    "not a name",
                )),
            }
        }
        let body = self.operand(body);
        (vs.len() == vars.len()).then_some(())?;
        Some(KExprKind::Reduce(red?, vs, body))
    }

    /// `f(args)`: a known function with its number of arguments.
    fn call(&mut self, func: &ast::Name, args: &[ast::Expr], span: Span) -> Option<KExprKind> {
        let args: Vec<_> = args.iter().map(|a| *self.operand(a)).collect();
        let Some(f) = Func::from_name(&func.text) else {
            self.report(
                err(codes::UNKNOWN_FUNCTION, format!("unknown function `{}`", func.text), func.span, "not a kernel function")
                    .note("functions: exp log sqrt tanh abs sin cos erf atan asin acos floor ceil max min pow select, and casts f32 f64 i32 i64 bool"),
            );
            return None;
        };
        if args.len() != f.arity() {
            self.report(err(
                codes::UNKNOWN_FUNCTION,
                format!(
                    "`{}` takes {} argument(s) but {} were given",
                    f.name(),
                    f.arity(),
                    args.len()
                ),
                span,
                "wrong number of arguments",
            ));
            return None;
        }
        Some(KExprKind::Call(f, args))
    }
}

/// The stand-in for a kernel expression that failed to lower (see [`POISONED`]).
fn poisoned(span: Span) -> KExpr {
    KExpr {
        kind: KExprKind::Access(POISONED.into(), Vec::new()),
        span,
    }
}

/// Whether every kernel statement was kept (a failed value poisoned), so that the kernel can
/// still be checked on its own.
fn kept_every_statement(op: &ast::OpDecl, body: &OpBody) -> bool {
    match body {
        OpBody::Kernel(stmts) => {
            let written = op
                .body
                .iter()
                .filter(|st| matches!(st, OpStmt::Assign { .. }));
            stmts.len() == written.count()
        }
        OpBody::Extern(sig) => extern_sound(op, sig),
    }
}

/// Whether an extern op's signature lowered whole apart from its costs (an index declared once
/// with every extent, each port with one projection of lowered entries) and its reference
/// kernel kept every statement: then its applies are still instantiated (see `Stub::kernel`).
fn extern_sound(op: &ast::OpDecl, sig: &ExternSig) -> bool {
    let mut index = op.body.iter().filter_map(|st| match st {
        OpStmt::IndexSpace { dims, .. } => Some(dims.len()),
        _ => None,
    });
    let index_whole = index.next() == Some(sig.index.len()) && index.next().is_none();
    let written = op.body.iter().filter_map(|st| match st {
        OpStmt::Projection { start, shape, .. } => Some((start.len(), shape.len())),
        _ => None,
    });
    let lowered = sig
        .projections
        .iter()
        .map(|p| (p.start.len(), p.shape.len()));
    let projections_whole = written.eq(lowered);
    let mut ports: Vec<&str> = op
        .inputs
        .iter()
        .chain(&op.outputs)
        .map(|p| p.name.text.as_str())
        .collect();
    let mut named: Vec<&str> = sig.projections.iter().map(|p| p.port.as_str()).collect();
    ports.sort_unstable();
    named.sort_unstable();
    let assigns = op
        .body
        .iter()
        .filter(|st| matches!(st, OpStmt::Assign { .. }));
    index_whole && projections_whole && ports == named && assigns.count() == sig.kernel.len()
}

/// Lowered ports by position: `mask` (of a recovered header) says which positions parsed.
fn by_position(
    mask: Option<&Option<Vec<bool>>>,
    ports: &[Option<PortDef>],
) -> Option<Vec<Option<PortDef>>> {
    match mask {
        None => Some(ports.to_vec()),
        Some(None) => None,
        Some(Some(mask)) => {
            let mut known = ports.iter();
            Some(
                mask.iter()
                    .map(|&k| {
                        if k {
                            known.next().cloned().flatten()
                        } else {
                            None
                        }
                    })
                    .collect(),
            )
        }
    }
}
