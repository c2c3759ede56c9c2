//! The verifier: shape inference and unification, dtype checks, SSA order, acyclicity and
//! static bounds. It fills in every value's type and canonicalizes selector attributes, and
//! returns the per-apply [`Instance`]s that the interpreter and passes use.

mod bind;
mod instance;
mod kernel;
mod probe;
mod scatter;
mod signature;
mod size;
mod stub;
mod symbolic;
mod views;

pub use crate::ir::instance::visit_loads;
pub use bind::Site;
pub use instance::{instantiate, instantiate_with, Written};
pub use probe::verify_one;
pub use symbolic::check_ops;
pub use views::canonical_slice;

use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use crate::ir::graph::ApplySpans;
use crate::ir::instance::Instance;
use crate::ir::kernel::{OpDef, Stub};
use crate::ir::{Graph, Module, NodeKind, SeqRef};
use bind::at_argument;
use petgraph::graph::DiGraph;
use std::collections::HashMap;

/// What verification learned about one graph: the instance of every apply, by node index.
#[derive(Clone, Debug, Default)]
pub struct GraphFacts {
    pub instances: HashMap<usize, Instance>,
}

/// Verifies every graph of `m`, filling in types. Diagnostics are sorted by position.
pub fn verify(m: &mut Module) -> (Diagnostics, Vec<GraphFacts>) {
    verify_with(m, &[], &[])
}

/// [`verify`], with where every apply's parts are written (per graph, per node; see
/// `lower::Lowered`) so that argument, parameter and range errors are labelled there. Values
/// without a node (poisoned by lowering) are allowed: their users are skipped. Applies of
/// `stubs` (ops that failed to lower) are checked against their known ports (see [`Stub`]).
pub fn verify_with(
    m: &mut Module,
    spans: &[Vec<ApplySpans>],
    stubs: &[Stub],
) -> (Diagnostics, Vec<GraphFacts>) {
    let mut diags = Diagnostics::default();
    let mut facts = Vec::new();
    let ops: HashMap<&str, &OpDef> = m.ops.iter().map(|o| (o.name.as_str(), o)).collect();
    let names: Vec<&str> = m.ops.iter().map(|o| o.name.as_str()).collect();
    let stubs: HashMap<&str, &Stub> = stubs.iter().map(|o| (o.name.as_str(), o)).collect();
    for (k, g) in m.graphs.iter_mut().enumerate() {
        let cx = GraphCx {
            ops: &ops,
            stubs: &stubs,
            names: &names,
            spans: spans.get(k).map_or(&[], Vec::as_slice),
        };
        facts.push(verify_graph(&cx, g, &mut diags));
    }
    (diags.sorted(), facts)
}

/// What checking one graph needs from the module: its ops by name.
struct GraphCx<'a> {
    ops: &'a HashMap<&'a str, &'a OpDef>,
    stubs: &'a HashMap<&'a str, &'a Stub>,
    names: &'a [&'a str],
    spans: &'a [ApplySpans],
}

/// The spans of an apply that lowering did not record (a graph built by a pass).
static UNWRITTEN: ApplySpans = ApplySpans {
    args: Vec::new(),
    params: Vec::new(),
    range: Vec::new(),
};

impl GraphCx<'_> {
    fn spans(&self, n: usize) -> &ApplySpans {
        self.spans.get(n).unwrap_or(&UNWRITTEN)
    }
}

fn verify_graph(cx: &GraphCx, g: &mut Graph, diags: &mut Diagnostics) -> GraphFacts {
    let mut facts = GraphFacts::default();
    for n in 0..g.nodes.len() {
        let operands = g.nodes[n].kind.operands();
        // An unknown op is reported whatever its arguments are.
        if let NodeKind::Apply(a) = &g.nodes[n].kind {
            if let Some(stub) = cx.stubs.get(a.op.as_str()) {
                stub_apply(cx, g, n, stub, diags);
                continue;
            }
            if !cx.ops.contains_key(a.op.as_str()) {
                diags.push(undefined_op(cx.names, &a.op, a.op_span));
                poison(g, n);
                continue;
            }
        }
        // An operand without a type had its own error already: skip silently, and poison
        // this node's results so that their users are skipped too.
        let Some(args) = operands
            .iter()
            .map(|v| g.ty(*v).cloned())
            .collect::<Option<Vec<_>>>()
        else {
            poisoned_apply(cx, g, n, operands.len(), diags);
            poison(g, n);
            continue;
        };
        let span = g.nodes[n].span;
        let tys = match &mut g.nodes[n].kind {
            NodeKind::Source { ty, .. } => Ok(vec![ty.clone()]),
            NodeKind::Generator(gen) => views::check_generator(gen, span)
                .map(|_| vec![gen.ty.clone()])
                .map_err(|d| vec![d]),
            NodeKind::View(v) => views::view_type(v, &args.iter().collect::<Vec<_>>(), span)
                .map(|t| vec![t])
                .map_err(|d| vec![d]),
            NodeKind::Apply(_) => apply_types(cx, g, n, &args, &mut facts),
            NodeKind::Sink { .. } | NodeKind::Sequence { .. } | NodeKind::Pin { .. } => Ok(vec![]),
            NodeKind::Grad { .. } => grad_types(g, n, &args, span),
            NodeKind::Scatter(s) => scatter::scatter_type(s, &args, span)
                .map(|t| vec![t])
                .map_err(|d| vec![d]),
        };
        match tys {
            Err(ds) => {
                ds.into_iter().for_each(|d| diags.push(d));
                // An apply whose op's kernel has errors still has the types its ports declare.
                match declared(cx, g, n, &args) {
                    Some(tys) => assign_types(g, n, tys.into_iter().map(Some).collect(), diags),
                    None => {
                        // Whatever failed, the op's outputs still pair up with the names.
                        let outputs = apply_op(cx, g, n).map(|op| op.outputs.len());
                        if let Some(d) = outputs.and_then(|k| result_count(g, n, k)) {
                            diags.push(d);
                        }
                        poison(g, n);
                    }
                }
            }
            Ok(tys) => assign_types(g, n, tys.into_iter().map(Some).collect(), diags),
        }
    }
    size::check_graph(g, &facts.instances, diags);
    check_acyclic(g, diags);
    check_updates(g, diags);
    facts
}

/// The result types of `grad %loss wrt %w...` (`args` are the loss's type, then the `wrt`
/// values'): the loss must be a rank-0 float (E0060), each `wrt` a float tensor (E0061); each
/// result has its `wrt`'s type. A `wrt` the loss does not depend on has a zero gradient.
fn grad_types(
    g: &Graph,
    n: usize,
    args: &[crate::ir::TensorType],
    span: crate::diag::Span,
) -> Result<Vec<crate::ir::TensorType>, Vec<Diagnostic>> {
    let NodeKind::Grad { loss, wrt } = &g.nodes[n].kind else {
        return Ok(vec![]);
    };
    let loss = *loss;
    let mut ds = Vec::new();
    let l = &args[0];
    if !l.shape.is_empty() || !l.dtype.is_float() {
        ds.push(
            Diagnostic::error(
                codes::BAD_GRAD_LOSS,
                format!(
                    "the loss `%{}` of `grad` is {l}, not a rank-0 float value",
                    g.value(loss).name
                ),
            )
            .primary(span, "loss must be a scalar float")
            .note("reduce it first, e.g. `y[] = sum[i, j](x[i, j])`"),
        );
    }
    for (w, t) in wrt.iter().zip(&args[1..]) {
        if !t.dtype.is_float() {
            ds.push(
                Diagnostic::error(
                    codes::BAD_GRAD_WRT,
                    format!(
                        "cannot differentiate with respect to `%{}` of type {t}: only float values have gradients",
                        g.value(*w).name
                    ),
                )
                .primary(span, "not a float value"),
            );
        }
    }
    if ds.is_empty() {
        Ok(args[1..].to_vec())
    } else {
        Err(ds)
    }
}

/// The output types of apply `n` of a sound op, with typed `args` (its instance goes to
/// `facts`), or its diagnostics, at the arguments, parameters and range entries at fault.
fn apply_types(
    cx: &GraphCx,
    g: &Graph,
    n: usize,
    args: &[crate::ir::TensorType],
    facts: &mut GraphFacts,
) -> Result<Vec<crate::ir::TensorType>, Vec<Diagnostic>> {
    let NodeKind::Apply(a) = &g.nodes[n].kind else {
        return Ok(vec![]);
    };
    let Some(op) = cx.ops.get(a.op.as_str()) else {
        return Ok(vec![]); // reported by the caller
    };
    let span = g.nodes[n].span;
    let names: Vec<String> = a.args.iter().map(|v| g.value(*v).name.clone()).collect();
    let spans = cx.spans(n);
    let written = Written {
        spans: Some(spans),
        args: &names,
    };
    match instantiate_with(
        op,
        &a.params,
        args,
        a.range.as_deref(),
        Site { span },
        written,
    ) {
        Ok(inst) => {
            let t = inst.outputs.clone();
            facts.instances.insert(n, inst);
            Ok(t)
        }
        Err(ds) => Err(ds
            .into_iter()
            .map(|d| at_argument(d, op, &spans.args, span))
            .collect()),
    }
}

/// An apply of a sound op with a poisoned argument: what its arguments cannot change is still
/// checked (parameters, arity, the number of results).
fn poisoned_apply(cx: &GraphCx, g: &Graph, n: usize, given: usize, diags: &mut Diagnostics) {
    let (NodeKind::Apply(a), span) = (&g.nodes[n].kind, g.nodes[n].span) else {
        return;
    };
    let Some(op) = cx.ops.get(a.op.as_str()) else {
        return;
    };
    let at = &cx.spans(n).params;
    let (_, ds) = bind::check_call(op, &a.params, at, given, Site { span });
    ds.into_iter().for_each(|d| diags.push(d));
    if let Some(d) = result_count(g, n, op.outputs.len()) {
        diags.push(d);
    }
}

/// An apply of an op with errors (see [`Stub`]). With its sound part (the kernel with failed
/// statements poisoned, or the signature without its bad cost entries) and typed arguments it
/// is instantiated like any apply, so its range, bounds and result count are checked; else it
/// is checked against the known ports, and typed from them where they decide the type.
fn stub_apply(cx: &GraphCx, g: &mut Graph, n: usize, stub: &Stub, diags: &mut Diagnostics) {
    let NodeKind::Apply(a) = &g.nodes[n].kind else {
        return;
    };
    let operands = g.nodes[n].kind.operands();
    let args: Vec<_> = operands.iter().map(|v| g.ty(*v).cloned()).collect();
    let site = Site {
        span: g.nodes[n].span,
    };
    let spans = cx.spans(n);
    let results = g.nodes[n].results.len();
    let (ds, tys) = stub::check_apply(stub, &a.params, &args, spans, results, site);
    let typed: Option<Vec<_>> = args.iter().cloned().collect();
    if let (Some(def), Some(typed)) = (&stub.kernel, typed) {
        let names: Vec<String> = a.args.iter().map(|v| g.value(*v).name.clone()).collect();
        let written = Written {
            spans: Some(spans),
            args: &names,
        };
        match instantiate_with(def, &a.params, &typed, a.range.as_deref(), site, written) {
            Ok(inst) => {
                assign_types(g, n, inst.outputs.into_iter().map(Some).collect(), diags);
                return;
            }
            Err(es) => {
                let es = es
                    .into_iter()
                    .map(|d| at_argument(d, def, &spans.args, site.span));
                es.for_each(|d| diags.push(d));
            }
        }
    } else {
        ds.into_iter().for_each(|d| diags.push(d));
    }
    if a.range.is_some() {
        // A shard's result types come from its range, which only the op's body knows.
        if let Some(outs) = &stub.outputs {
            if let Some(d) = result_count(g, n, outs.len()) {
                diags.push(d);
            }
        }
        poison(g, n);
        return;
    }
    assign_types(g, n, tys, diags);
}

/// The op that node `n` applies, if it is an apply of a sound op.
fn apply_op<'a>(cx: &GraphCx<'a>, g: &Graph, n: usize) -> Option<&'a OpDef> {
    match &g.nodes[n].kind {
        NodeKind::Apply(a) => cx.ops.get(a.op.as_str()).copied(),
        _ => None,
    }
}

/// The declared output types of apply `n` when only its op's kernel failed.
fn declared(
    cx: &GraphCx,
    g: &Graph,
    n: usize,
    args: &[crate::ir::TensorType],
) -> Option<Vec<crate::ir::TensorType>> {
    let NodeKind::Apply(a) = &g.nodes[n].kind else {
        return None;
    };
    let op = cx.ops.get(a.op.as_str())?;
    let span = g.nodes[n].span;
    if a.range.is_some() {
        return None;
    }
    instance::declared_outputs(op, &a.params, args, Site { span })
}

/// A node that failed: its results get no type, so their users are not checked again.
fn poison(g: &mut Graph, n: usize) {
    for v in g.nodes[n].results.clone() {
        g.values[v.index()].ty = None;
    }
}

/// Types the results of node `n`; a `None` type (unknown) poisons its value.
fn assign_types(
    g: &mut Graph,
    n: usize,
    tys: Vec<Option<crate::ir::TensorType>>,
    diags: &mut Diagnostics,
) {
    let results = g.nodes[n].results.clone();
    if let Some(d) = result_count(g, n, tys.len()) {
        diags.push(d);
        poison(g, n);
        return;
    }
    for (v, t) in results.into_iter().zip(tys) {
        let def = &mut g.values[v.index()];
        let Some(t) = t else {
            def.ty = None;
            continue;
        };
        match &def.ty {
            Some(written) if *written != t => {
                diags.push(
                    Diagnostic::error(
                        codes::ANNOTATION_MISMATCH,
                        format!("`%{}` is written as {written} but is {t}", def.name),
                    )
                    .primary(def.span, format!("inferred {t}")),
                );
                // Which of the two the user meant is unknown: check none of its users.
                def.ty = None;
            }
            _ => def.ty = Some(t),
        }
    }
}

/// E0015 when node `n`, which produces `produced` values, binds another number of names.
fn result_count(g: &Graph, n: usize, produced: usize) -> Option<Diagnostic> {
    let bound = g.nodes[n].results.len();
    (bound != produced).then(|| {
        Diagnostic::error(
            codes::ARITY,
            format!("this produces {produced} value(s) but {bound} name(s) are bound"),
        )
        .primary(g.nodes[n].span, "results and names must pair up")
    })
}

fn undefined_op(ops: &[&str], name: &str, span: Span) -> Diagnostic {
    let d = Diagnostic::error(codes::UNDEFINED_OP, format!("op `@{name}` is not defined"))
        .primary(span, "undefined op");
    match crate::diag::suggest::closest(name, ops.iter().copied()) {
        Some(best) => d.note(format!("help: did you mean `@{best}`?")),
        None => d,
    }
}

/// Each `update @w %v` gives `%v` the type of state `@w` (E0067); lowering checked the names.
fn check_updates(g: &Graph, diags: &mut Diagnostics) {
    for n in &g.nodes {
        let NodeKind::Sink {
            name,
            value,
            update: true,
        } = &n.kind
        else {
            continue;
        };
        let state = g.states().find(|(s, ..)| s == name).map(|(_, t, _)| t);
        let (Some(want), Some(got)) = (state, g.ty(*value)) else {
            continue;
        };
        if want != got {
            diags.push(
                Diagnostic::error(
                    codes::UPDATE_TYPE,
                    format!("update of state `@{name}` has type {got}, the state {want}"),
                )
                .primary(n.span, format!("expected {want}, found {got}"))
                .secondary(g.value(*value).span, format!("defined here as {got}"))
                .note("a state keeps one type across steps: the update must have its type"),
            );
        }
    }
}

/// Data edges always point forward in text order; sequence points could close a cycle.
fn check_acyclic(g: &Graph, diags: &mut Diagnostics) {
    let mut dg: DiGraph<usize, ()> = DiGraph::new();
    let ids: Vec<_> = (0..g.nodes.len()).map(|n| dg.add_node(n)).collect();
    let sink_node: HashMap<&str, usize> = g
        .nodes
        .iter()
        .enumerate()
        .filter_map(|(i, n)| {
            if let NodeKind::Sink { name, .. } = &n.kind {
                Some((name.as_str(), i))
            } else {
                None
            }
        })
        .collect();
    // Poisoned values (from statements that failed to lower) have no node.
    let defined = |v: crate::ir::ValueId| Some(g.value(v).node).filter(|&n| n < ids.len());
    let node_of = |r: &SeqRef| match r {
        SeqRef::Sink(s) => sink_node.get(s.as_str()).copied(),
        SeqRef::Value(v) => defined(*v),
    };
    for (i, n) in g.nodes.iter().enumerate() {
        for d in n.kind.operands().into_iter().filter_map(defined) {
            dg.add_edge(ids[d], ids[i], ());
        }
        if let NodeKind::Sequence { before, after } = &n.kind {
            for b in before.iter().filter_map(node_of) {
                dg.add_edge(ids[b], ids[i], ());
            }
            for a in after.iter().filter_map(node_of) {
                dg.add_edge(ids[i], ids[a], ());
            }
        }
    }
    if petgraph::algo::toposort(&dg, None).is_err() {
        // Report the sequence point written last among those in a cycle: the one that closed it.
        let n = petgraph::algo::tarjan_scc(&dg)
            .into_iter()
            .filter(|c| c.len() > 1)
            .filter_map(|c| {
                c.into_iter()
                    .map(|i| dg[i])
                    .filter(|&i| matches!(g.nodes[i].kind, NodeKind::Sequence { .. }))
                    .max()
            })
            .min()
            .unwrap_or(0);
        diags.push(
            Diagnostic::error(codes::CYCLE, "sequence points form a cycle")
                .primary(g.nodes[n].span, "this is part of the cycle")
                .note("a sequence point's `before` side must not depend on its `after` side"),
        );
    }
}
