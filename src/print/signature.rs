//! The signature derived for one apply, as `tapc opt --emit signature` prints it and the
//! language server shows it on hover: the apply, its index space, each port's projection (in
//! the syntax of an `extern op`) and its costs; and the signature of a `scatter` (§9.1 of
//! docs/teg.md), whose scattered axis projects to the whole dimension.

use super::text::node_text;
use crate::ir::graph::{Graph, Node, NodeKind};
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

/// A scatter's block of `--emit signature` (`None` for other nodes, or one not verified): the
/// index space is the updates' shape (`i0`, `i1`, ...); the indices and updates project one to
/// one, the base and the result one to one but along the axis, which they cover whole.
pub fn scatter_signature(g: &Graph, n: &Node) -> Option<String> {
    let NodeKind::Scatter(sc) = &n.kind else {
        return None;
    };
    let upd = g.ty(sc.upd)?;
    let base = g.ty(sc.base)?;
    let names: Vec<String> = (0..upd.rank()).map(|d| format!("i{d}")).collect();
    let port = |whole: bool| {
        let (start, shape): (Vec<String>, Vec<String>) = (0..upd.rank())
            .map(|d| match (whole, d == sc.axis) {
                (true, true) => ("0".to_string(), base.shape[d].to_string()),
                _ => (names[d].clone(), "1".to_string()),
            })
            .unzip();
        format!("[{}] + [{}]", start.join(", "), shape.join(", "))
    };
    let mut s = String::new();
    let _ = writeln!(s, "  {}", node_text(g, n));
    let index: Vec<String> = names
        .iter()
        .zip(&upd.shape)
        .map(|(n, e)| format!("{n}: {e}"))
        .collect();
    let _ = writeln!(s, "    index [{}]", index.join(", "));
    let ports = [("base", true), ("idx", false), ("upd", false)];
    for (name, whole) in ports {
        let _ = writeln!(s, "    {name}: {}", port(whole));
    }
    let _ = writeln!(s, "    {}: {}", g.value(n.results[0]).name, port(true));
    Some(s)
}
