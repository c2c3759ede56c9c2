//! Lowering: syntax tree to IR. Resolves value names, dtypes and instruction names, and checks
//! everything that needs no shapes (arity, attribute forms, duplicate names). Shape and type
//! checks live in the verifier. Lowering reports every problem it finds and keeps going.
//! Selector and generator instructions are lowered by `instr`, literals parsed by `literal`.

use super::ast::{self, ExprKind, GraphStmt, OpStmt};
use super::literal;
use crate::diag::{codes, Code, Diagnostic, Diagnostics, Span};
use crate::ir::graph::*;
use crate::ir::kernel::*;
use crate::ir::{DType, Module, TensorType};
use crate::verify::Stub;
use std::collections::{HashMap, HashSet};

/// Lowers a parsed file; items with errors are left out so later stages see only sound IR.
pub fn lower(file: &ast::File, diags: &mut Diagnostics) -> Module {
    lower_all(file, diags).into_clean()
}

/// Everything lowering produced, including graphs with errors (whose bad statements define
/// poisoned values: no node, no type), so that the verifier can still check the rest of them.
#[derive(Debug, Default)]
pub struct Lowered {
    pub module: Module,
    /// Per graph: true when it had errors (it is verified for diagnostics, then left out).
    pub broken: Vec<bool>,
    /// Per graph, per node: the spans of an apply's arguments (empty for other nodes).
    pub arg_spans: Vec<Vec<Vec<Span>>>,
    /// The known header of every op with errors: its applies are kept (in broken graphs),
    /// checked against the known ports and typed from them, so their users are still checked.
    pub stubs: Vec<Stub>,
}

impl Lowered {
    /// The module without its broken graphs.
    pub fn into_clean(mut self) -> Module {
        let mut broken = self.broken.into_iter();
        self.module
            .graphs
            .retain(|_| !broken.next().unwrap_or(false));
        self.module
    }
}

/// Lowers every item; see [`Lowered`].
pub fn lower_all(file: &ast::File, diags: &mut Diagnostics) -> Lowered {
    let mut cx = Cx { diags, stub: None };
    let mut out = Lowered::default();
    let mut seen: HashMap<&str, Span> = HashMap::new();
    // Ops left out for their own errors: applies of them are not reported again as undefined.
    let mut broken: HashSet<String> = HashSet::new();
    let mut graphs = Vec::new();
    for item in &file.items {
        let name = match item {
            ast::Item::Op(op) => &op.name,
            ast::Item::Graph(g) => &g.name,
            ast::Item::Error(_) => continue,
        };
        if let Some(prev) = seen.insert(&name.text, name.span) {
            cx.duplicate(&format!("@{}", name.text), name.span, prev);
            continue;
        }
        match item {
            ast::Item::Op(op) => match cx.op(op) {
                Some(op) => out.module.ops.push(op),
                None => {
                    broken.insert(op.name.text.clone());
                    out.stubs.extend(cx.stub.take());
                }
            },
            // Graphs come after every op is known, wherever they are in the file.
            ast::Item::Graph(g) => graphs.push(g),
            ast::Item::Error(_) => {}
        }
    }
    let stubbed: HashSet<String> = out.stubs.iter().map(|o| o.name.clone()).collect();
    for g in graphs {
        let (g, ok, spans) = cx.graph(g, &broken, &stubbed);
        out.module.graphs.push(g);
        out.broken.push(!ok);
        out.arg_spans.push(spans);
    }
    out
}

struct Cx<'d> {
    diags: &'d mut Diagnostics,
    /// The known header of the op last lowered (see `Lowered::stubs`).
    stub: Option<Stub>,
}

fn err(code: Code, msg: impl Into<String>, span: Span, label: impl Into<String>) -> Diagnostic {
    Diagnostic::error(code, msg).primary(span, label)
}

impl Cx<'_> {
    fn report(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    fn duplicate(&mut self, what: &str, span: Span, prev: Span) {
        self.report(
            err(
                codes::DUPLICATE,
                format!("`{what}` is defined twice"),
                span,
                "defined again here",
            )
            .secondary(prev, "first defined here"),
        );
    }

    // ---- ops ------------------------------------------------------------------------------

    fn op(&mut self, op: &ast::OpDecl) -> Option<OpDef> {
        let before = self.diags.0.len();
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
        // Every kernel statement kept (a failed value poisoned): the kernel can still be checked.
        let kept = match &body {
            OpBody::Kernel(stmts) => {
                let written = op
                    .body
                    .iter()
                    .filter(|st| matches!(st, OpStmt::Assign { .. }));
                stmts.len() == written.count()
            }
            OpBody::Extern(_) => false,
        };
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

    fn dtype(&mut self, n: &ast::Name) -> Option<DType> {
        let d = DType::from_name(&n.text);
        if d.is_none() {
            self.report(
                err(
                    codes::UNKNOWN_DTYPE,
                    format!("unknown dtype `{}`", n.text),
                    n.span,
                    "not a dtype",
                )
                .note("dtypes are f32, f64, i32, i64 and bool"),
            );
        }
        d
    }

    fn dim(&mut self, e: &ast::Expr) -> Option<Dim> {
        match &e.kind {
            ExprKind::Variadic(s) => Some(Dim::Variadic(s.clone(), e.span)),
            _ => self.iexpr(e, codes::BAD_SHAPE, "shape").map(Dim::Expr),
        }
    }

    /// An integer expression over names; `what` says where it appears, for the message.
    fn iexpr(&mut self, e: &ast::Expr, code: Code, what: &str) -> Option<IExpr> {
        let s = e.span;
        Some(match &e.kind {
            ExprKind::Int(d) => IExpr::Int(self.int(d, false, s)?, s),
            ExprKind::Name(n) => IExpr::Name(n.clone(), s),
            ExprKind::Unary(ast::UnOp::Neg, inner) => {
                IExpr::Neg(Box::new(self.iexpr(inner, code, what)?), s)
            }
            ExprKind::Binary(op, a, b) => {
                let op = match op {
                    ast::BinOp::Add => IOp::Add,
                    ast::BinOp::Sub => IOp::Sub,
                    ast::BinOp::Mul => IOp::Mul,
                    ast::BinOp::Div => IOp::Div,
                    ast::BinOp::Rem => IOp::Rem,
                    _ => return self.not_integer(e, code, what),
                };
                let a = self.iexpr(a, code, what);
                let b = self.iexpr(b, code, what);
                IExpr::Bin(op, Box::new(a?), Box::new(b?), s)
            }
            _ => return self.not_integer(e, code, what),
        })
    }

    fn not_integer<T>(&mut self, e: &ast::Expr, code: Code, what: &str) -> Option<T> {
        self.report(
            err(
                code,
                format!("a {what} expression must be an integer expression"),
                e.span,
                "not allowed here",
            )
            .note("only integers, names, + - * / % and parentheses may appear here"),
        );
        None
    }

    fn int(&mut self, digits: &str, negative: bool, span: Span) -> Option<i64> {
        literal::int(self.diags, digits, negative, span)
    }

    fn signed(&mut self, s: &ast::Signed) -> Option<i64> {
        literal::signed(self.diags, s)
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
        };
        let mut have_index = false;
        for st in &op.body {
            match st {
                OpStmt::Assign { .. } => sig.kernel.extend(self.assign(st)),
                OpStmt::IndexSpace { dims, span } => {
                    if have_index {
                        self.report(err(
                            codes::BAD_SIGNATURE,
                            "the index space is declared twice",
                            *span,
                            "second declaration",
                        ));
                    }
                    have_index = true;
                    sig.index_span = *span;
                    for (n, e) in dims {
                        if let Some(e) = self.iexpr(e, codes::BAD_SIGNATURE, "index extent") {
                            sig.index.push((n.text.clone(), e));
                        }
                    }
                }
                OpStmt::Projection {
                    port,
                    start,
                    shape,
                    span,
                } => {
                    let start: Vec<_> = start
                        .iter()
                        .filter_map(|e| self.iexpr(e, codes::BAD_SIGNATURE, "projection"))
                        .collect();
                    let shape: Vec<_> = shape
                        .iter()
                        .filter_map(|e| self.iexpr(e, codes::BAD_SIGNATURE, "projection"))
                        .collect();
                    sig.projections.push(ExternProjection {
                        port: port.text.clone(),
                        start,
                        shape,
                        span: *span,
                    });
                }
                OpStmt::Cost { dims, .. } => {
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
        for (d, _) in &sig.costs {
            if !sig.index.iter().any(|(n, _)| n == d) {
                self.report(err(
                    codes::BAD_SIGNATURE,
                    format!("cost for `{d}`, which is not an index dimension"),
                    op.name.span,
                    "unknown cost dimension",
                ));
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
        let value = value.unwrap_or_else(|| KExpr {
            kind: KExprKind::Access(crate::verify::POISONED.into(), Vec::new()),
            span: value_span,
        });
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
            ExprKind::Access { base, indices } => {
                let idx = indices
                    .iter()
                    .map(|i| match &i.kind {
                        ExprKind::Variadic(n) => Some(Index::Variadic(n.clone(), i.span)),
                        _ => self
                            .iexpr(i, codes::NON_AFFINE, "tensor index")
                            .map(Index::Expr),
                    })
                    .collect::<Vec<_>>();
                KExprKind::Access(base.text.clone(), idx.into_iter().collect::<Option<_>>()?)
            }
            ExprKind::Reduce { kind, vars, body } => {
                let red = Reduction::from_name(&kind.text);
                if red.is_none() {
                    self.report(
                        err(
                            codes::BAD_REDUCTION,
                            format!("unknown reduction `{}`", kind.text),
                            kind.span,
                            "not a reduction",
                        )
                        .note("reductions are sum, max, min and prod"),
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
                let body = self.kexpr(body);
                (vs.len() == vars.len()).then_some(())?;
                KExprKind::Reduce(red?, vs, Box::new(body?))
            }
            ExprKind::Call { func, args } => {
                let args: Vec<_> = args.iter().map(|a| self.kexpr(a)).collect();
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
                        e.span,
                        "wrong number of arguments",
                    ));
                    return None;
                }
                KExprKind::Call(f, args.into_iter().collect::<Option<_>>()?)
            }
            ExprKind::Unary(op, a) => KExprKind::Unary(*op, Box::new(self.kexpr(a)?)),
            ExprKind::Binary(op, a, b) => {
                let a = self.kexpr(a);
                let b = self.kexpr(b);
                KExprKind::Binary(*op, Box::new(a?), Box::new(b?))
            }
        };
        Some(KExpr { kind, span: e.span })
    }

    fn float(&mut self, text: &str, span: Span) -> Option<f64> {
        literal::float(self.diags, text, span)
    }

    // ---- graphs ---------------------------------------------------------------------------

    /// The graph, whether it lowered cleanly, and the argument spans of its applies.
    fn graph(
        &mut self,
        g: &ast::GraphDecl,
        broken_ops: &HashSet<String>,
        stubbed: &HashSet<String>,
    ) -> (Graph, bool, Vec<Vec<Span>>) {
        let before = self.diags.0.len();
        let mut gb = GraphBuilder {
            graph: Graph {
                name: g.name.text.clone(),
                span: g.span,
                name_span: g.name.span,
                ..Graph::default()
            },
            names: HashMap::new(),
            sinks: HashMap::new(),
            sources: HashMap::new(),
            broken_ops,
            stubbed,
            applies_broken_op: false,
            arg_spans: Vec::new(),
        };
        for st in &g.stmts {
            self.graph_stmt(&mut gb, st);
        }
        // A statement with a syntax error (already reported) leaves the graph incomplete.
        let parsed = !g
            .stmts
            .iter()
            .any(|st| matches!(st, GraphStmt::Error(_) | GraphStmt::Broken { .. }));
        let ok = self.diags.0.len() == before && parsed && !gb.applies_broken_op;
        gb.arg_spans.resize(gb.graph.nodes.len(), Vec::new());
        (gb.graph, ok, gb.arg_spans)
    }

    fn graph_stmt(&mut self, gb: &mut GraphBuilder, st: &GraphStmt) {
        let before = gb.graph.nodes.len();
        self.graph_stmt_inner(gb, st);
        if gb.graph.nodes.len() == before {
            gb.poison(st);
        }
    }

    fn graph_stmt_inner(&mut self, gb: &mut GraphBuilder, st: &GraphStmt) {
        let span = st.span();
        let kind = match st {
            GraphStmt::Error(_) | GraphStmt::Broken { .. } => return,
            GraphStmt::Source {
                results,
                source,
                ty,
                ..
            } => {
                let Some(ty) = self.concrete_type(ty) else {
                    return;
                };
                if let Some(prev) = gb.sources.insert(source.text.clone(), source.span) {
                    self.report(
                        err(
                            codes::DUPLICATE,
                            format!("source `@{}` is declared twice", source.text),
                            source.span,
                            "second declaration",
                        )
                        .secondary(prev, "first declared here"),
                    );
                    return;
                }
                if results.len() != 1 {
                    self.report(err(
                        codes::ARITY,
                        "a source defines exactly one value",
                        span,
                        "one result expected",
                    ));
                    return;
                }
                let kind = NodeKind::Source {
                    name: source.text.clone(),
                    ty: ty.clone(),
                };
                return gb.push(self, kind, results, vec![Some(ty)], span);
            }
            GraphStmt::Sink { sink, value, .. } => {
                let Some(v) = gb.resolve(self, value) else {
                    return;
                };
                if let Some(prev) = gb.sinks.insert(sink.text.clone(), sink.span) {
                    self.report(
                        err(
                            codes::BAD_SINK,
                            format!("sink `@{}` is defined twice", sink.text),
                            sink.span,
                            "second sink with this name",
                        )
                        .secondary(prev, "first defined here"),
                    );
                    return;
                }
                NodeKind::Sink {
                    name: sink.text.clone(),
                    value: v,
                }
            }
            GraphStmt::Sequence { before, after, .. } => {
                let b: Vec<_> = before.iter().map(|r| self.seq_ref(gb, r)).collect();
                let a: Vec<_> = after.iter().map(|r| self.seq_ref(gb, r)).collect();
                let (Some(before), Some(after)) =
                    (b.into_iter().collect(), a.into_iter().collect())
                else {
                    return;
                };
                NodeKind::Sequence { before, after }
            }
            GraphStmt::Word { word, target, .. } => {
                if word.text != "pin" {
                    self.report(
                        err(
                            codes::UNKNOWN_INSTR,
                            format!("unknown graph statement `{}`", word.text),
                            word.span,
                            "not a statement",
                        )
                        .note("graph statements are `%v = ...`, `sink @name %v`, `sequence ... -> ...` and `pin %v`"),
                    );
                    return;
                }
                let Some(value) = self.pin_target(gb, target) else {
                    return;
                };
                NodeKind::Pin { value }
            }
            GraphStmt::Apply {
                results,
                op,
                params,
                args,
                range,
                placement,
                types,
                ..
            } => {
                let ast_args = args;
                let args: Vec<_> = args.iter().map(|a| gb.resolve(self, a)).collect();
                let params: Vec<_> = params
                    .iter()
                    .map(|(n, v)| Some((n.text.clone(), self.signed(v)?)))
                    .collect();
                let range = range.as_ref().map(|r| {
                    r.iter()
                        .map(|(lo, hi)| Some((self.signed(lo)?, self.signed(hi)?)))
                        .collect::<Option<Vec<_>>>()
                });
                let placement = placement.as_ref().map(|p| self.placement(p));
                let tys: Vec<_> = types.iter().map(|t| self.concrete_type(t)).collect();
                let (Some(args), Some(params)) =
                    (args.into_iter().collect(), params.into_iter().collect())
                else {
                    return;
                };
                let range = match range {
                    Some(None) => return,
                    Some(Some(r)) => Some(r),
                    None => None,
                };
                let placement = match placement {
                    Some(None) => return,
                    Some(Some(p)) => Some(p),
                    None => None,
                };
                let Some(tys) = self.annotations(tys, results.len(), span) else {
                    return;
                };
                if gb.broken_ops.contains(&op.text) {
                    // The op's own errors are reported; the verifier types this apply from the
                    // op's ports if they are sound (`Lowered::stubs`), else poisons it.
                    gb.applies_broken_op = true;
                    if !gb.stubbed.contains(op.text.as_str()) {
                        return;
                    }
                }
                let arg_spans = ast_args.iter().map(|a| a.span).collect();
                let kind = NodeKind::Apply(Apply {
                    op: op.text.clone(),
                    params,
                    args,
                    range,
                    placement,
                    op_span: op.span,
                });
                gb.arg_spans.resize(gb.graph.nodes.len(), Vec::new());
                gb.arg_spans.push(arg_spans);
                return gb.push(self, kind, results, tys, span);
            }
            GraphStmt::Instr {
                results,
                instr,
                args,
                attrs,
                types,
                ..
            } => {
                let args: Vec<_> = args.iter().map(|a| gb.resolve(self, a)).collect();
                let tys: Vec<_> = types.iter().map(|t| self.concrete_type(t)).collect();
                let Some(args) = args.into_iter().collect::<Option<Vec<_>>>() else {
                    return;
                };
                let Some(tys) = self.annotations(tys, results.len(), span) else {
                    return;
                };
                if results.len() != 1 {
                    self.report(err(
                        codes::ARITY,
                        format!("`{}` defines one value, not {}", instr.text, results.len()),
                        span,
                        "too many results",
                    ));
                    return;
                }
                let Some(kind) = super::instr::lower_instr(
                    self.diags,
                    instr,
                    &args,
                    attrs,
                    tys[0].as_ref(),
                    span,
                ) else {
                    return;
                };
                return gb.push(self, kind, results, tys, span);
            }
        };
        gb.graph.nodes.push(Node {
            kind,
            results: vec![],
            span,
        });
    }

    fn placement(&mut self, p: &ast::Signed) -> Option<u32> {
        let v = self.signed(p)?;
        let ok = u32::try_from(v).ok();
        if ok.is_none() {
            self.report(err(
                codes::BAD_RANGE,
                format!("placement `on {v}` is not a node number"),
                p.span,
                "must be 0 or more",
            ));
        }
        ok
    }

    fn annotations(
        &mut self,
        tys: Vec<Option<TensorType>>,
        results: usize,
        span: Span,
    ) -> Option<Vec<Option<TensorType>>> {
        if tys.iter().any(Option::is_none) {
            return None;
        }
        match tys.len() {
            0 => Some(vec![None; results]),
            n if n == results => Some(tys),
            n => {
                self.report(err(
                    codes::ARITY,
                    format!("{results} result(s) but {n} type(s) written"),
                    span,
                    "types and results must pair up",
                ));
                None
            }
        }
    }

    /// The value `pin` names: a `%value` defined above (E0053 otherwise).
    fn pin_target(
        &mut self,
        gb: &GraphBuilder,
        (is_sink, r): &(bool, ast::Name),
    ) -> Option<ValueId> {
        if !is_sink {
            if let Some(&v) = gb.names.get(r.text.as_str()) {
                return Some(v);
            }
        }
        let d = if *is_sink {
            err(
                codes::BAD_PIN,
                format!("`@{}` is a sink, not a value", r.text),
                r.span,
                "cannot be pinned",
            )
            .note("pin the value the sink reads (`pin %v`); a sunk value is kept anyway")
        } else {
            err(
                codes::BAD_PIN,
                format!("`%{}` is not a value defined above", r.text),
                r.span,
                "cannot be pinned",
            )
            .note("`pin %v` must follow the statement that defines `%v`")
        };
        self.report(d);
        None
    }

    fn seq_ref(&mut self, gb: &GraphBuilder, (is_sink, r): &(bool, ast::Name)) -> Option<SeqRef> {
        if *is_sink && gb.sinks.contains_key(&r.text) {
            return Some(SeqRef::Sink(r.text.clone()));
        }
        match gb.names.get(r.text.as_str()) {
            Some(&v)
                if !is_sink
                    && gb
                        .graph
                        .nodes
                        .get(gb.graph.values[v.index()].node)
                        .is_some_and(|n| matches!(n.kind, NodeKind::Apply(_))) =>
            {
                Some(SeqRef::Value(v))
            }
            _ => {
                let sigil = if *is_sink { "@" } else { "%" };
                self.report(
                    err(codes::BAD_SEQUENCE, format!("`{sigil}{}` is not a sink or apply result defined above", r.text), r.span, "cannot be ordered")
                        .note("sequence points order sinks (`@name`) and applies (`%value`) defined earlier in the graph"),
                );
                None
            }
        }
    }

    pub(super) fn concrete_type(&mut self, t: &ast::TypeExpr) -> Option<TensorType> {
        let dtype = self.dtype(&t.dtype);
        let mut shape = Vec::new();
        for d in &t.dims {
            let v =
                self.iexpr(d, codes::BAD_SHAPE, "shape")
                    .and_then(|e| match e.eval(&|_| None) {
                        Ok(Some(v)) if v >= 0 => Some(v),
                        _ => {
                            self.report(err(
                                codes::BAD_SHAPE,
                                "a graph shape must be a non-negative integer",
                                d.span,
                                "not a constant size",
                            ));
                            None
                        }
                    });
            shape.push(v);
        }
        let shape: Vec<i64> = shape.into_iter().collect::<Option<_>>()?;
        if crate::verify::checked_elements(&shape).is_none() {
            self.report(err(
                codes::BAD_SHAPE,
                "this shape has more elements than fit in i64",
                t.span,
                "too large",
            ));
            return None;
        }
        Some(TensorType::new(dtype?, shape))
    }
}

struct GraphBuilder<'o> {
    graph: Graph,
    names: HashMap<String, ValueId>,
    sinks: HashMap<String, Span>,
    sources: HashMap<String, Span>,
    /// Ops that failed to lower, and whether this graph applies one (it is then left out).
    broken_ops: &'o HashSet<String>,
    /// Broken ops with sound ports (`Lowered::stubs`): their applies are kept.
    stubbed: &'o HashSet<String>,
    applies_broken_op: bool,
    /// Per node so far: an apply's argument spans (filled up lazily).
    arg_spans: Vec<Vec<Span>>,
}

impl GraphBuilder<'_> {
    /// Defines the results of a statement that failed, so later uses do not report again.
    /// These values have no node (`usize::MAX`) and no type; the graph is left out of the module.
    fn poison(&mut self, st: &GraphStmt) {
        let results = match st {
            GraphStmt::Source { results, .. }
            | GraphStmt::Apply { results, .. }
            | GraphStmt::Instr { results, .. }
            | GraphStmt::Broken { results, .. } => results,
            _ => return,
        };
        for r in results {
            if !self.names.contains_key(&r.text) {
                let id = ValueId(self.graph.values.len() as u32);
                self.graph.values.push(ValueDef {
                    name: r.text.clone(),
                    node: usize::MAX,
                    ty: None,
                    span: r.span,
                });
                self.names.insert(r.text.clone(), id);
            }
        }
    }

    fn resolve(&self, cx: &mut Cx, n: &ast::Name) -> Option<ValueId> {
        let v = self.names.get(&n.text).copied();
        if v.is_none() {
            let d = err(
                codes::UNDEFINED_VALUE,
                format!("`%{}` is not defined", n.text),
                n.span,
                "undefined value",
            );
            cx.report(if self.sinks.contains_key(&n.text) {
                d.note(format!("`@{}` is a sink; sinks produce no value and can only be ordered by sequence points", n.text))
            } else {
                d.note("values must be defined above their first use")
            });
        }
        v
    }

    fn push(
        &mut self,
        cx: &mut Cx,
        kind: NodeKind,
        results: &[ast::Name],
        tys: Vec<Option<TensorType>>,
        span: Span,
    ) {
        let node = self.graph.nodes.len();
        let mut ids = Vec::new();
        let mut dup = false;
        for (r, ty) in results.iter().zip(tys) {
            if let Some(&prev) = self.names.get(&r.text) {
                cx.duplicate(
                    &format!("%{}", r.text),
                    r.span,
                    self.graph.values[prev.index()].span,
                );
                dup = true;
                continue;
            }
            let id = ValueId(self.graph.values.len() as u32);
            self.graph.values.push(ValueDef {
                name: r.text.clone(),
                node,
                ty,
                span: r.span,
            });
            self.names.insert(r.text.clone(), id);
            ids.push(id);
        }
        if dup {
            // Left out: checking it would only find that its results do not pair up. Its
            // fresh results are poisoned (no node).
            for id in ids {
                self.graph.values[id.index()].node = usize::MAX;
            }
            return;
        }
        self.graph.nodes.push(Node {
            kind,
            results: ids,
            span,
        });
    }
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
