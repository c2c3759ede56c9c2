//! The signatures of the ops the `grad` pass writes, made symbolic: each concrete extent of an
//! input port becomes a shape symbol (`N1024`), one per distinct extent, and an output extent
//! equal to one of them the same symbol. The body is untouched: the extents it uses as values
//! (a mean's divisor, a summed variable's count) stay the literals of the whole tensor. So the
//! shard pass can instantiate the op on a block of its arguments (`shard{dim=i}` splitting a
//! gradient along the batch); an apply whose blocks would bind one symbol to two extents (two
//! equal extents of unrelated dimensions, one of them split) is refused by the shard pass as
//! before (E0106), never given another meaning.

use crate::diag::Span;
use crate::ir::kernel::{Dim, IExpr, IndexVar, OpBody, OpDef, PortDef};
use std::collections::HashMap;

/// Replaces `op`'s concrete input extents by symbols, and the output extents equal to one.
pub fn generalize(op: &mut OpDef) {
    let OpBody::Kernel(stmts) = &op.body else {
        return;
    };
    let used = |name: &str| {
        op.inputs.iter().chain(&op.outputs).any(|p| p.name == name)
            || stmts.iter().any(|s| {
                s.target == name
                || s.indices.iter().any(
                    |i| matches!(i, IndexVar::Var(v, _) | IndexVar::Variadic(v, _) if v == name),
                )
                || super::expr::mentions(&s.value, name).0
            })
    };
    let mut symbols: HashMap<i64, String> = HashMap::new();
    for p in &op.inputs {
        for d in &p.dims {
            if let Dim::Expr(IExpr::Int(n, _)) = d {
                if !symbols.contains_key(n) {
                    let mut name = format!("N{n}");
                    while used(&name) {
                        name.push('_');
                    }
                    symbols.insert(*n, name);
                }
            }
        }
    }
    let rename = |p: &mut PortDef| {
        for d in &mut p.dims {
            if let Dim::Expr(IExpr::Int(n, _)) = d {
                if let Some(s) = symbols.get(n) {
                    *d = Dim::Expr(IExpr::Name(s.clone(), Span::default()));
                }
            }
        }
    };
    op.inputs.iter_mut().for_each(rename);
    op.outputs.iter_mut().for_each(rename);
}
