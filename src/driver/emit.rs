//! Alternative outputs of `tapc opt`: Graphviz dot and per-apply signatures.

use crate::ir::graph::{Graph, NodeKind, SeqRef};
use crate::ir::Module;
use crate::print::{apply_signature, node_text, scatter_signature};
use crate::verify::GraphFacts;
use std::fmt::Write;

/// One digraph per graph: sources/sinks as `cds`, applies as `rarrow`, selectors as
/// parallelograms, generators as ellipses, sequence points as octagons (the whitepaper's shapes).
pub fn dot(m: &Module) -> String {
    let mut s = String::new();
    for g in &m.graphs {
        let _ = writeln!(s, "digraph \"{}\" {{\n  rankdir=LR;", g.name);
        for (i, n) in g.nodes.iter().enumerate() {
            let (shape, fill) = match &n.kind {
                NodeKind::Source { .. } | NodeKind::Sink { .. } => ("cds", "#E5E8E8"),
                NodeKind::Apply(_) => ("rarrow", "#E5E8E8"),
                NodeKind::View(_) => ("parallelogram", "#a0d0d0"),
                NodeKind::Generator(_) => ("ellipse", "#d0d0ff"),
                NodeKind::Sequence { .. } => ("octagon", "#B4F8C8"),
                NodeKind::Pin { .. } => ("note", "#F8E8B4"),
                NodeKind::Grad { .. } => ("invtrapezium", "#F8D0D0"),
                NodeKind::Scatter(_) => ("larrow", "#E5E8E8"),
            };
            let label = node_text(g, n).replace('\\', "\\\\").replace('"', "\\\"");
            let _ = writeln!(
                s,
                "  n{i} [label=\"{label}\", shape={shape}, style=filled, fillcolor=\"{fill}\"];"
            );
        }
        for (i, n) in g.nodes.iter().enumerate() {
            for v in n.kind.operands() {
                let _ = writeln!(
                    s,
                    "  n{} -> n{i} [label=\"%{}\"];",
                    g.value(v).node,
                    g.value(v).name
                );
            }
            if let NodeKind::Sequence { before, after } = &n.kind {
                for r in before {
                    let _ = writeln!(s, "  n{} -> n{i} [style=dashed];", seq_node(g, r));
                }
                for r in after {
                    let _ = writeln!(s, "  n{i} -> n{} [style=dashed];", seq_node(g, r));
                }
            }
        }
        s.push_str("}\n");
    }
    s
}

fn seq_node(g: &Graph, r: &SeqRef) -> usize {
    match r {
        SeqRef::Value(v) => g.value(*v).node,
        SeqRef::Sink(name) => g
            .nodes
            .iter()
            .position(|n| matches!(&n.kind, NodeKind::Sink { name: s, .. } if s == name))
            .unwrap_or(0),
    }
}

/// Per apply: its index space, each port's projection (extern-op syntax) and derived costs
/// ([`apply_signature`]); per scatter, its index space and projections ([`scatter_signature`]).
pub fn signatures(m: &Module, facts: &[GraphFacts]) -> String {
    let mut s = String::new();
    for (g, f) in m.graphs.iter().zip(facts) {
        let _ = writeln!(s, "graph @{}", g.name);
        for (i, n) in g.nodes.iter().enumerate() {
            if let Some(inst) = f.instances.get(&i) {
                s.push_str(&apply_signature(g, n, inst));
            }
            if let Some(sig) = scatter_signature(g, n) {
                s.push_str(&sig);
            }
        }
    }
    s
}
