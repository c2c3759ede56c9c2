//! Lowering of graphs: resolves value names (SSA, use after definition), checks sources,
//! sinks, sequence points and pins, and lowers applies and instructions. A statement that fails
//! defines its results as poisoned values (no node, no type), so later uses are not reported
//! again and the rest of the graph is still verified.

use super::cx::{err, Cx};
use super::instr::lower_instr;
use super::state::{source_word, update_word, StateBook};
use crate::diag::{codes, Span};
use crate::ir::graph::*;
use crate::ir::TensorType;
use crate::syntax::ast::{self, GraphStmt, Rhs};
use std::collections::{HashMap, HashSet};

impl Cx<'_> {
    /// The graph, whether it lowered cleanly, and the argument spans of its applies.
    pub(super) fn graph(
        &mut self,
        g: &ast::GraphDecl,
        broken_ops: &HashSet<String>,
        stubbed: &HashSet<String>,
    ) -> (Graph, bool, Vec<ApplySpans>) {
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
            defined_in_text: defined_in_text(g),
            states: StateBook::default(),
        };
        for st in &g.stmts {
            self.graph_stmt(&mut gb, st);
        }
        gb.states.finish(self);
        // A statement with a syntax error (already reported) leaves the graph incomplete.
        let parsed = !g
            .stmts
            .iter()
            .any(|st| matches!(st, GraphStmt::Error(_) | GraphStmt::Broken { .. }));
        let ok = self.diags.0.len() == before && parsed && !gb.applies_broken_op;
        gb.arg_spans
            .resize(gb.graph.nodes.len(), ApplySpans::default());
        (gb.graph, ok, gb.arg_spans)
    }

    /// Lowers one statement; one that fails defines its results as poisoned values.
    fn graph_stmt(&mut self, gb: &mut GraphBuilder, st: &GraphStmt) {
        let before = gb.graph.nodes.len();
        let kind = match st {
            GraphStmt::Error(_) | GraphStmt::Broken { .. } => None,
            GraphStmt::Def { results, rhs, span } => {
                match rhs {
                    Rhs::Source(s) => self.source(gb, results, s, *span),
                    Rhs::Apply(a) => self.apply(gb, results, a, *span),
                    Rhs::Instr(i) => self.instr(gb, results, i, *span),
                    Rhs::Grad(d) => self.grad(gb, results, d, *span),
                };
                None
            }
            GraphStmt::Sink { sink, value, .. } => self.sink(gb, sink, value, false),
            GraphStmt::WordSink {
                word, sink, value, ..
            } => {
                if update_word(self, word) && gb.states.update(self, sink) {
                    self.sink(gb, sink, value, true)
                } else {
                    None
                }
            }
            GraphStmt::Sequence { before, after, .. } => self.sequence(gb, before, after),
            GraphStmt::Word { word, target, .. } => self.word(gb, word, target),
        };
        // Sinks, sequence points and pins define no value.
        if let Some(kind) = kind {
            gb.graph.nodes.push(Node {
                kind,
                results: vec![],
                span: st.span(),
            });
        }
        if gb.graph.nodes.len() == before {
            gb.poison(st);
        }
    }

    /// `%x = source @name : type`.
    fn source(
        &mut self,
        gb: &mut GraphBuilder,
        results: &[ast::Name],
        s: &ast::SourceRhs,
        span: Span,
    ) -> Option<()> {
        let state = source_word(self, &s.word)?;
        if state {
            gb.states.state(&s.source);
        }
        let ty = self.concrete_type(&s.ty)?;
        if let Some(prev) = gb.sources.insert(s.source.text.clone(), s.source.span) {
            self.report(
                err(
                    codes::DUPLICATE,
                    format!("source `@{}` is declared twice", s.source.text),
                    s.source.span,
                    "second declaration",
                )
                .secondary(prev, "first declared here"),
            );
            return None;
        }
        if results.len() != 1 {
            self.report(err(
                codes::ARITY,
                "a source defines exactly one value",
                span,
                "one result expected",
            ));
            return None;
        }
        let kind = NodeKind::Source {
            name: s.source.text.clone(),
            ty: ty.clone(),
            state,
        };
        gb.push(self, kind, results, vec![Some(ty)], span);
        Some(())
    }

    /// `sink @name %v`, or `update @name %v`.
    fn sink(
        &mut self,
        gb: &mut GraphBuilder,
        sink: &ast::Name,
        value: &ast::Name,
        update: bool,
    ) -> Option<NodeKind> {
        let v = gb.resolve(self, value)?;
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
            return None;
        }
        Some(NodeKind::Sink {
            name: sink.text.clone(),
            value: v,
            update,
        })
    }

    /// `sequence a, b -> c, d`.
    fn sequence(
        &mut self,
        gb: &GraphBuilder,
        before: &[(bool, ast::Name)],
        after: &[(bool, ast::Name)],
    ) -> Option<NodeKind> {
        let b: Vec<_> = before.iter().map(|r| self.seq_ref(gb, r)).collect();
        let a: Vec<_> = after.iter().map(|r| self.seq_ref(gb, r)).collect();
        Some(NodeKind::Sequence {
            before: b.into_iter().collect::<Option<_>>()?,
            after: a.into_iter().collect::<Option<_>>()?,
        })
    }

    /// `WORD REF`: only `pin %v` is a statement.
    fn word(
        &mut self,
        gb: &GraphBuilder,
        word: &ast::Name,
        target: &(bool, ast::Name),
    ) -> Option<NodeKind> {
        if word.text != "pin" {
            self.report(
                err(
                    codes::UNKNOWN_INSTR,
                    format!("unknown graph statement `{}`", word.text),
                    word.span,
                    "not a statement",
                )
                .note("graph statements are `%v = ...`, `sink @name %v`, `update @name %v`, `sequence ... -> ...` and `pin %v`"),
            );
            return None;
        }
        let value = self.pin_target(gb, target)?;
        Some(NodeKind::Pin { value })
    }

    /// `%a, %b = apply @op<params>(args) @[range] on N : types`.
    fn apply(
        &mut self,
        gb: &mut GraphBuilder,
        results: &[ast::Name],
        a: &ast::ApplyRhs,
        span: Span,
    ) -> Option<()> {
        // An undefined argument (reported) is a poisoned stand-in, so that what it cannot
        // change (parameters, arity, the number of results) is still checked.
        let args: Vec<_> = a
            .args
            .iter()
            .map(|v| gb.resolve(self, v).unwrap_or_else(|| gb.stand_in(v)))
            .collect();
        let params: Vec<_> = a
            .params
            .iter()
            .map(|(n, v)| Some((n.text.clone(), self.signed(v)?)))
            .collect();
        let range = a.range.as_ref().map(|r| self.range(r));
        let placement = a.placement.as_ref().map(|p| self.placement(p));
        let tys: Vec<_> = a.types.iter().map(|t| self.concrete_type(t)).collect();
        let params = params.into_iter().collect::<Option<_>>()?;
        // A range or placement written but not lowered (reported) fails the statement.
        let range = match range {
            Some(None) => return None,
            r => r.flatten(),
        };
        let placement = match placement {
            Some(None) => return None,
            p => p.flatten(),
        };
        let tys = self.annotations(tys, results.len(), span)?;
        if gb.broken_ops.contains(&a.op.text) {
            // The op's own errors are reported; the verifier types this apply from the
            // op's ports if they are sound (`Lowered::stubs`), else poisons it.
            gb.applies_broken_op = true;
            if !gb.stubbed.contains(a.op.text.as_str()) {
                return None;
            }
        }
        let kind = NodeKind::Apply(Apply {
            op: a.op.text.clone(),
            params,
            args,
            range,
            placement,
            op_span: a.op.span,
        });
        gb.arg_spans
            .resize(gb.graph.nodes.len(), ApplySpans::default());
        gb.arg_spans.push(ApplySpans {
            args: a.args.iter().map(|v| v.span).collect(),
            params: a.params.iter().map(|(n, _)| n.span).collect(),
            range: a
                .range
                .iter()
                .flatten()
                .map(|(l, h)| l.span.to(h.span))
                .collect(),
        });
        gb.push(self, kind, results, tys, span);
        Some(())
    }

    /// `@[lo:hi, ...]`.
    fn range(&mut self, r: &[(ast::Signed, ast::Signed)]) -> Option<Vec<(i64, i64)>> {
        r.iter()
            .map(|(lo, hi)| Some((self.signed(lo)?, self.signed(hi)?)))
            .collect()
    }

    /// `%r = NAME args attrs : type`: a selector or generator.
    fn instr(
        &mut self,
        gb: &mut GraphBuilder,
        results: &[ast::Name],
        i: &ast::InstrRhs,
        span: Span,
    ) -> Option<()> {
        let args: Vec<_> = i.args.iter().map(|a| gb.resolve(self, a)).collect();
        let tys: Vec<_> = i.types.iter().map(|t| self.concrete_type(t)).collect();
        let args = args.into_iter().collect::<Option<Vec<_>>>()?;
        let tys = self.annotations(tys, results.len(), span)?;
        if results.len() != 1 {
            self.report(err(
                codes::ARITY,
                format!(
                    "`{}` defines one value, not {}",
                    i.instr.text,
                    results.len()
                ),
                span,
                "too many results",
            ));
            return None;
        }
        let placement = i.placement.as_ref().map(|p| (self.placement(p), p.span));
        let mut kind = lower_instr(self.diags, &i.instr, &args, &i.attrs, tys[0].as_ref(), span)?;
        match (&mut kind, placement) {
            (_, None) => {}
            (NodeKind::Scatter(s), Some((p, _))) => s.placement = Some(p?),
            (_, Some((_, at))) => {
                self.report(err(
                    codes::BAD_RANGE,
                    format!("`{}` takes no placement `on N`", i.instr.text),
                    at,
                    "only `apply` and `scatter` are placed on nodes",
                ));
                return None;
            }
        }
        gb.push(self, kind, results, tys, span);
        Some(())
    }

    /// `%d1, ... = grad %loss wrt %w1, ...`: one result per `wrt` value.
    fn grad(
        &mut self,
        gb: &mut GraphBuilder,
        results: &[ast::Name],
        d: &ast::GradRhs,
        span: Span,
    ) -> Option<()> {
        let unknown = |w: &ast::Name, what: &str| {
            err(
                codes::UNKNOWN_INSTR,
                format!(
                    "unknown graph instruction `{} ... {} ...`",
                    d.instr.text, d.word.text
                ),
                w.span,
                format!("not {what}"),
            )
            .note("a gradient is written `%d1, %d2 = grad %loss wrt %w1, %w2`")
        };
        if d.instr.text != "grad" {
            self.report(unknown(&d.instr, "`grad`"));
            return None;
        }
        if d.word.text != "wrt" {
            self.report(unknown(&d.word, "`wrt`"));
            return None;
        }
        let loss: Vec<_> = d.args.iter().map(|a| gb.resolve(self, a)).collect();
        let wrt: Vec<_> = d.wrt.iter().map(|a| gb.resolve(self, a)).collect();
        let tys: Vec<_> = d.types.iter().map(|t| self.concrete_type(t)).collect();
        let (loss, wrt) = (
            loss.into_iter().collect::<Option<Vec<_>>>()?,
            wrt.into_iter().collect::<Option<Vec<_>>>()?,
        );
        let tys = self.annotations(tys, results.len(), span)?;
        if loss.len() != 1 || results.len() != wrt.len() {
            let msg = if loss.len() != 1 {
                format!("`grad` takes one loss value, not {}", loss.len())
            } else {
                format!(
                    "`grad` with respect to {} value(s) defines as many results, but {} are named",
                    wrt.len(),
                    results.len()
                )
            };
            self.report(err(codes::ARITY, msg, span, "one result per `wrt` value"));
            return None;
        }
        let kind = NodeKind::Grad { loss: loss[0], wrt };
        gb.push(self, kind, results, tys, span);
        Some(())
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
    /// Per node so far: where an apply's parts are written (filled up lazily).
    arg_spans: Vec<ApplySpans>,
    /// Every value the graph's text defines, at its first definition: a use above it is
    /// "used before its definition", not "not defined".
    defined_in_text: HashMap<String, Span>,
    states: StateBook,
}

/// The first definition of each value name in a graph's statements.
fn defined_in_text(g: &ast::GraphDecl) -> HashMap<String, Span> {
    let mut out = HashMap::new();
    for st in &g.stmts {
        if let GraphStmt::Def { results, .. } | GraphStmt::Broken { results, .. } = st {
            for r in results {
                out.entry(r.text.clone()).or_insert(r.span);
            }
        }
    }
    out
}

impl GraphBuilder<'_> {
    /// Defines the results of a statement that failed, so later uses do not report again.
    /// These values have no node (`usize::MAX`) and no type; the graph is left out of the module.
    fn poison(&mut self, st: &GraphStmt) {
        let results = match st {
            GraphStmt::Def { results, .. } | GraphStmt::Broken { results, .. } => results,
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

    /// A poisoned value (no node, no type) standing for the undefined `n` at one use. It has
    /// no name: `n` stays undefined, and lookups by name find its real definition, if any.
    fn stand_in(&mut self, n: &ast::Name) -> ValueId {
        let id = ValueId(self.graph.values.len() as u32);
        self.graph.values.push(ValueDef {
            name: String::new(),
            node: usize::MAX,
            ty: None,
            span: n.span,
        });
        id
    }

    fn resolve(&self, cx: &mut Cx, n: &ast::Name) -> Option<ValueId> {
        let v = self.names.get(&n.text).copied();
        if v.is_some() {
            return v;
        }
        if let Some(def) = self
            .defined_in_text
            .get(&n.text)
            .filter(|d| d.start > n.span.start)
        {
            cx.report(
                err(
                    codes::UNDEFINED_VALUE,
                    format!("`%{}` is used before its definition", n.text),
                    n.span,
                    "used here",
                )
                .secondary(*def, "defined here, below its use")
                .note(format!(
                    "help: move this statement below the definition of `%{}` (values are defined before their first use)",
                    n.text
                )),
            );
            return None;
        }
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
