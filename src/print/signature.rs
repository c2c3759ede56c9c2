//! The signature derived for one apply, as `tapc opt --emit signature` prints it and the
//! language server shows it on hover: the apply, its index space, each port's projection (in
//! the syntax of an `extern op`) and its costs.

use super::text::node_text;
use crate::ir::graph::{Graph, Node};
use crate::ir::instance::{Instance, Projection};
use std::fmt::Write;

fn affine_text(row: &[i64], offset: i64, names: &[String]) -> String {
    let mut terms: Vec<String> = Vec::new();
    for (c, n) in row.iter().zip(names) {
        match *c {
            0 => {}
            1 => terms.push(n.clone()),
            -1 => terms.push(format!("-{n}")),
            c => terms.push(format!("{c} * {n}")),
        }
    }
    if offset != 0 || terms.is_empty() {
        terms.push(offset.to_string());
    }
    terms.join(" + ").replace("+ -", "- ")
}

fn projection_text(p: &Projection, names: &[String]) -> String {
    let start: Vec<String> = p
        .matrix
        .iter()
        .zip(&p.offset)
        .map(|(r, o)| affine_text(r, *o, names))
        .collect();
    let shape: Vec<String> = p.shape.iter().map(i64::to_string).collect();
    format!("[{}] + [{}]", start.join(", "), shape.join(", "))
}

/// One apply's block of `--emit signature`: the node, its index space, projections and costs.
pub fn apply_signature(g: &Graph, n: &Node, inst: &Instance) -> String {
    let mut s = String::new();
    let sig = &inst.signature;
    let names: Vec<String> = sig.index.iter().map(|(n, _)| n.clone()).collect();
    let _ = writeln!(s, "  {}", node_text(g, n));
    let index: Vec<String> = sig.index.iter().map(|(n, e)| format!("{n}: {e}")).collect();
    let _ = writeln!(s, "    index [{}]", index.join(", "));
    for p in sig.inputs.iter().chain(&sig.outputs) {
        let _ = writeln!(
            s,
            "    {}: {}",
            p.name,
            projection_text(&p.projection, &names)
        );
    }
    let marg: Vec<String> = sig
        .marginal
        .iter()
        .map(|(d, r)| {
            format!(
                "{d}: {{ {} }}",
                r.iter()
                    .map(|(k, v)| format!("{k}: {v}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
        .collect();
    let _ = writeln!(s, "    cost {{ {} }}", marg.join(", "));
    let _ = writeln!(
        s,
        "    per index point: {} flops, {} bytes",
        sig.flops_per_point, sig.bytes_per_point
    );
    s
}
