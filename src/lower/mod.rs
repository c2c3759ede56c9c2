//! Lowering: syntax tree to IR. Resolves value names, dtypes and instruction names, and checks
//! everything that needs no shapes (arity, attribute forms, duplicate names, literal ranges,
//! SSA use-before-def). Shape and type checks live in the verifier. Lowering reports every
//! problem it finds and keeps going.
//!
//! It is not part of the front end: it depends on the syntax tree, the IR and diagnostics,
//! and nothing depends on it but `compile_source`. Files, each using only those below it:
//! `graph` (graphs), `op` (ops, kernels, extern signatures) and `gather` (gathered indices)
//! extend the shared context in `cx`; `instr` lowers selectors and generators (and `scatter` its scatters); `literal` parses checked numbers, attribute
//! values and list elements.

mod cx;
mod gather;
mod graph;
mod instr;
mod literal;
mod op;
mod scatter;
mod state;

use crate::diag::{Diagnostics, Span};
use crate::ir::graph::ApplySpans;
use crate::ir::kernel::Stub;
use crate::ir::Module;
use crate::syntax::ast;
use cx::Cx;
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
    /// Per graph, per node: where an apply's arguments, parameters and range are written
    /// (empty for other nodes).
    pub arg_spans: Vec<Vec<ApplySpans>>,
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
