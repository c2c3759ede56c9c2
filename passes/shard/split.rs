//! Splitting a multi-statement kernel into one op per statement, so that each piece can be
//! sharded on its own: softmax sharded on columns becomes a row max (partial max + combine),
//! a row sum (partial sum + combine) and an elementwise op sharded on columns. Temporaries
//! become graph values; their ports take the dims of the output dims their variables index.

use super::kexpr::{find_reduce, reads};
use crate::diag::Diagnostic;
use crate::ir::graph::*;
use crate::ir::kernel::*;
use crate::ir::{Module, TensorType};
use crate::passes::rewrite::Builder;
use crate::verify::GraphFacts;

/// Whether `var` is reduced in some statement of `op` that is not the last.
pub fn reduces_in_temp(op: &OpDef, var: &str) -> bool {
    let Some(stmts) = op.kernel() else {
        return false;
    };
    stmts.len() > 1
        && stmts[..stmts.len() - 1]
            .iter()
            .any(|s| !find_reduce(&s.value, var).is_empty())
}

/// The symbolic dim of each index variable, from the first output statement's left side.
fn var_dims(op: &OpDef, stmts: &[Stmt]) -> Option<Vec<(String, Dim)>> {
    let out = stmts
        .iter()
        .find(|s| op.outputs.iter().any(|p| p.name == s.target))?;
    let port = op.outputs.iter().find(|p| p.name == out.target)?;
    Some(
        out.indices
            .iter()
            .zip(&port.dims)
            .map(|(v, d)| {
                (
                    match v {
                        IndexVar::Var(n, _) | IndexVar::Variadic(n, _) => n.clone(),
                    },
                    d.clone(),
                )
            })
            .collect(),
    )
}

/// One op per statement of `op` (named `@OP.s0`, `@OP.s1`, ...), or `None` if the kernel cannot
/// be split (single statement, or a temporary over a variadic index list).
pub fn split_op(op: &OpDef) -> Option<Vec<(OpDef, String)>> {
    let stmts = op.kernel()?;
    if stmts.len() < 2
        || stmts.len()
            != stmts
                .iter()
                .filter(|s| s.indices.iter().all(|i| matches!(i, IndexVar::Var(..))))
                .count()
    {
        return None;
    }
    let dims = var_dims(op, stmts)?;
    let mut temps: Vec<PortDef> = Vec::new();
    let mut out = Vec::new();
    for (k, st) in stmts.iter().enumerate() {
        let mut used = Vec::new();
        reads(&st.value, &mut used);
        let mut inputs: Vec<PortDef> = op
            .inputs
            .iter()
            .filter(|p| used.contains(&p.name))
            .cloned()
            .collect();
        inputs.extend(temps.iter().filter(|p| used.contains(&p.name)).cloned());
        let output = match op.outputs.iter().find(|p| p.name == st.target) {
            Some(p) => p.clone(),
            None => {
                let d: Vec<Dim> = st
                    .indices
                    .iter()
                    .map(|v| {
                        let IndexVar::Var(n, _) = v else {
                            unreachable!("checked above")
                        };
                        dims.iter().find(|(m, _)| m == n).map(|x| x.1.clone())
                    })
                    .collect::<Option<_>>()?;
                // A temporary's dtype is its output's unless the kernel computes another one.
                let port = PortDef {
                    name: st.target.clone(),
                    dtype: op.outputs[0].dtype,
                    dims: d,
                    span: st.target_span,
                };
                temps.push(port.clone());
                port
            }
        };
        let name = format!("{}.s{k}", op.name);
        let def = OpDef {
            name: name.clone(),
            params: op.params.clone(),
            inputs,
            outputs: vec![output],
            body: OpBody::Kernel(vec![st.clone()]),
            span: op.span,
            name_span: op.name_span,
        };
        out.push((def, st.target.clone()));
    }
    Some(out)
}

/// Rewrites every apply of an op with a temporary reduced over `var` into applies of its pieces.
pub fn split_graph(
    m: &mut Module,
    gi: usize,
    facts: &GraphFacts,
    var: &str,
) -> Result<bool, Diagnostic> {
    let old = m.graphs[gi].clone();
    let mut b = Builder::new(&old, false);
    let mut changed = false;
    for (ni, node) in old.nodes.iter().enumerate() {
        let NodeKind::Apply(a) = &node.kind else {
            b.copy_node(node)?;
            continue;
        };
        let op = m.op(&a.op).cloned();
        let pieces = op
            .as_ref()
            .filter(|o| a.range.is_none() && reduces_in_temp(o, var))
            .and_then(split_op);
        let (Some(op), Some(pieces), Some(inst)) = (op, pieces, facts.instances.get(&ni)) else {
            b.copy_node(node)?;
            continue;
        };
        changed = true;
        let base = old.value(node.results[0]).name.clone();
        let mut values: Vec<(String, ValueId)> = op
            .inputs
            .iter()
            .zip(&a.args)
            .map(|(p, &v)| (p.name.clone(), b.mapped(v)))
            .collect();
        let temp_ty = |t: &str| {
            inst.temps.iter().find(|x| x.name == t).map(|x| {
                TensorType::new(
                    x.dtype,
                    x.vars
                        .iter()
                        .map(|&v| inst.vars[v].range.1 - inst.vars[v].range.0)
                        .collect(),
                )
            })
        };
        for (def, target) in pieces {
            let args = def
                .inputs
                .iter()
                .map(|p| {
                    values
                        .iter()
                        .find(|(n, _)| *n == p.name)
                        .map(|x| x.1)
                        .expect("inputs precede")
                })
                .collect();
            let out_k = op.outputs.iter().position(|p| p.name == target);
            let (name, ty) = match out_k {
                Some(k) => (
                    old.value(node.results[k]).name.clone(),
                    b.old_ty(node.results[k])?,
                ),
                None => (
                    format!("{base}.{target}"),
                    temp_ty(&target).expect("temps are lowered"),
                ),
            };
            let mut def = def;
            if out_k.is_none() {
                def.outputs[0].dtype = ty.dtype;
            }
            if m.op(&def.name).is_none() {
                m.ops.push(def.clone());
            }
            let kind = NodeKind::Apply(Apply {
                op: def.name.clone(),
                params: a.params.clone(),
                args,
                range: None,
                placement: a.placement,
                op_span: a.op_span,
            });
            let v = b.emit(kind, &name, ty, node.span);
            if let Some(k) = out_k {
                b.map[node.results[k].index()] = Some(v);
            }
            values.push((target, v));
        }
    }
    if changed {
        m.graphs[gi] = b.new;
    }
    Ok(changed)
}
