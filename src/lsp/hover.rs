//! Hover: a value's type and defining statement, an op's ports and parameters, an apply's
//! derived signature (as `tapc opt --emit signature` prints it) and a shard's footprint windows;
//! a scatter's signature likewise.

use super::analysis::Document;
use super::names::Sym;
use crate::ir::graph::{Graph, NodeKind};
use crate::print::{apply_signature, node_text};
use crate::verify::GraphFacts;
use std::fmt::Write;

/// Markdown for what is at `offset`, and the span it is about.
pub fn hover(doc: &Document, offset: usize) -> Option<(String, std::ops::Range<usize>)> {
    if let Some(o) = doc.names.at(offset) {
        let text = match &o.sym {
            Sym::Value { graph, name } => value(doc, *graph, name),
            Sym::Op(name) => {
                let mut s = op(doc, name)?;
                if let Some(sig) = apply_at(doc, offset) {
                    s.push_str(&sig);
                }
                Some(s)
            }
            Sym::Sink { graph, name } | Sym::Source { graph, name } => {
                let (g, _) = doc.graph(*graph)?;
                // A state and its update share a name: a source symbol shows the state.
                let source = matches!(o.sym, Sym::Source { .. });
                let n = g.nodes.iter().find(|n| match &n.kind {
                    NodeKind::Sink { name: s, .. } => !source && s == name,
                    NodeKind::Source { name: s, .. } => source && s == name,
                    _ => false,
                })?;
                Some(code(&node_text(g, n)))
            }
            Sym::Graph(name) => {
                let g = doc.module.graphs.iter().find(|g| g.name == *name)?;
                let applies = g
                    .nodes
                    .iter()
                    .filter(|n| matches!(n.kind, NodeKind::Apply(_)))
                    .count();
                Some(format!(
                    "{}\n{} nodes, {} values, {applies} applies",
                    code(&format!("graph @{name}")),
                    g.nodes.len(),
                    g.values.len()
                ))
            }
        };
        return text.map(|t| (t, o.span.clone()));
    }
    if let Some((g, i)) = scatter_node(doc, offset) {
        let sig = crate::print::scatter_signature(g, &g.nodes[i])?;
        return Some((
            format!("derived signature\n{}", code(&sig)),
            g.nodes[i].span.range(),
        ));
    }
    let (g, _, i) = apply_node(doc, offset)?;
    Some((apply_at(doc, offset)?, g.nodes[i].span.range()))
}

/// The graph and node index of the scatter whose statement holds `offset`.
fn scatter_node(doc: &Document, offset: usize) -> Option<(&Graph, usize)> {
    let (g, _) = graph_at(doc, offset)?;
    let i = g
        .nodes
        .iter()
        .position(|n| matches!(n.kind, NodeKind::Scatter(_)) && n.span.range().contains(&offset))?;
    Some((g, i))
}

fn code(text: &str) -> String {
    format!("```teg\n{}\n```\n", text.trim_end())
}

fn value(doc: &Document, graph: usize, name: &str) -> Option<String> {
    // From the IR when the value has a node (also in a graph with errors elsewhere).
    // Not when an operand stands for an undefined value (nameless): its text is the user's.
    let lowered = doc
        .value(graph, name)
        .and_then(|(g, v)| Some((g, v, g.nodes.get(v.node)?)))
        .filter(|(g, _, node)| {
            let operands = node.kind.operands();
            !operands.iter().any(|o| g.value(*o).name.is_empty())
        });
    if let Some((g, v, node)) = lowered {
        let ty =
            v.ty.as_ref()
                .map_or("(type unknown)".into(), |t| t.to_string());
        return Some(format!(
            "{}defined by\n{}",
            code(&format!("%{name} : {ty}")),
            code(&node_text(g, node))
        ));
    }
    // Its statement did not lower: show the defining statement as written.
    let def = doc.names.definition(&Sym::Value {
        graph,
        name: name.into(),
    })?;
    let stmt = doc
        .names
        .stmts
        .iter()
        .find(|s| s.span.contains(&def.span.start))?;
    Some(format!(
        "{}(type unknown: its statement has errors)\n",
        code(&doc.text[stmt.span.clone()])
    ))
}

/// The op's header: its parameters and ports.
fn op(doc: &Document, name: &str) -> Option<String> {
    let (header, lowered) = doc.op_header(name)?;
    let note = if lowered { "" } else { "(the op has errors)\n" };
    Some(format!("{}{note}", code(&header)))
}

/// The graph (and its facts) whose body holds `offset`, when it compiled.
fn graph_at(doc: &Document, offset: usize) -> Option<(&Graph, &GraphFacts)> {
    let graph = doc
        .names
        .items
        .iter()
        .filter(|it| it.is_graph)
        .position(|it| it.span.contains(&offset))?;
    doc.graph(graph)
}

/// The graph, facts and node index of the apply whose statement holds `offset`, when its
/// graph compiled.
fn apply_node(doc: &Document, offset: usize) -> Option<(&Graph, &GraphFacts, usize)> {
    let (g, facts) = graph_at(doc, offset)?;
    let i = g
        .nodes
        .iter()
        .position(|n| matches!(n.kind, NodeKind::Apply(_)) && n.span.range().contains(&offset))?;
    Some((g, facts, i))
}

/// The derived signature of the apply at `offset` and, for a shard, its footprint windows.
fn apply_at(doc: &Document, offset: usize) -> Option<String> {
    let (g, facts, i) = apply_node(doc, offset)?;
    let inst = facts.instances.get(&i)?;
    let mut s = format!(
        "derived signature\n{}",
        code(&apply_signature(g, &g.nodes[i], inst))
    );
    if inst.sharded {
        let range = inst.range();
        let sig = &inst.signature;
        let mut w = String::new();
        for p in sig.inputs.iter().chain(&sig.outputs) {
            let window: Vec<String> = p
                .projection
                .image(&range)
                .iter()
                .map(|(lo, hi)| format!("{lo}:{hi}"))
                .collect();
            let _ = writeln!(w, "{}: [{}]", p.name, window.join(", "));
        }
        let _ = write!(s, "footprint windows of this shard\n{}", code(&w));
    }
    Some(s)
}
