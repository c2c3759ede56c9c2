//! Sizes are checked where they are made: every value's byte size and byte strides, and the
//! byte offset of every kernel load, must fit in i64 (E0025). Past the verifier nothing
//! re-checks them: the interpreter, the backend and the runtime compute sizes and addresses
//! in i64/usize, where an overflow would wrap into a wrong size, a wild address or a crash.

use crate::diag::{codes, Diagnostic, Diagnostics};
use crate::ir::instance::{visit_loads, Affine, Instance, Src};
use crate::ir::{Graph, NodeKind, TensorType};
use std::collections::HashMap;

const LIMIT: i128 = i64::MAX as i128;

/// The bytes a value spans, counting a zero extent as 1: its strides are computed either way.
fn span_bytes(t: &TensorType) -> i128 {
    t.shape
        .iter()
        .fold(t.dtype.size_bytes() as i128, |acc, &d| {
            acc.saturating_mul(d.max(1) as i128)
        })
}

/// Checks every typed value of `g` and every load of its applies; one diagnostic per oversized
/// value (values computed from an oversized one are not reported again).
pub(super) fn check_graph(
    g: &Graph,
    instances: &HashMap<usize, Instance>,
    diags: &mut Diagnostics,
) {
    let mut oversized = vec![false; g.values.len()];
    for (i, n) in g.nodes.iter().enumerate() {
        if n.kind.operands().iter().any(|v| oversized[v.index()]) {
            n.results.iter().for_each(|v| oversized[v.index()] = true);
            continue;
        }
        for v in &n.results {
            let def = g.value(*v);
            let Some(t) = &def.ty else { continue };
            let bytes = span_bytes(t);
            if bytes > LIMIT {
                oversized[v.index()] = true;
                diags.push(too_large(
                    n.span,
                    format!("`%{}` is {t}: {} bytes", def.name, show(bytes)),
                ));
            }
        }
        if let (NodeKind::Apply(_), Some(inst)) = (&n.kind, instances.get(&i)) {
            if let Some(worst) = widest_load(inst) {
                diags.push(too_large(
                    n.span,
                    format!("a load of this apply reaches byte offset {}", show(worst)),
                ));
            }
        }
    }
}

fn show(bytes: i128) -> String {
    if bytes >= i128::MAX / 2 {
        "more than 2^126".into()
    } else {
        bytes.to_string()
    }
}

fn too_large(span: crate::diag::Span, what: String) -> Diagnostic {
    Diagnostic::error(
        codes::TOO_LARGE,
        format!("{what}, more than i64 can address"),
    )
    .primary(span, "too large")
    .note(format!(
        "sizes, strides and offsets must fit in i64: at most {} bytes per value",
        i64::MAX
    ))
}

/// The largest |partial sum| of a load's byte offset over the apply's index box, if it exceeds
/// i64 (`None` when every load fits): Σ stride·(|constant − origin| + Σ |coeff|·max|var|).
fn widest_load(inst: &Instance) -> Option<i128> {
    let bound = |v: usize| {
        let (lo, hi) = inst.vars[v].range;
        (lo as i128).abs().max((hi as i128 - 1).abs())
    };
    let mut worst = None;
    for st in inst.stmts.iter().flatten() {
        visit_loads(&st.value, &mut |src, index: &[Affine]| {
            let Src::Input(k) = src else { return };
            let (t, origin) = (&inst.inputs[k], &inst.origins[k]);
            let mut stride = t.dtype.size_bytes() as i128;
            let mut total: i128 = 0;
            for d in (0..index.len().min(t.shape.len())).rev() {
                let a = &index[d];
                let o = origin.get(d).copied().unwrap_or(0) as i128;
                let reach = a
                    .terms
                    .iter()
                    .fold((a.constant as i128 - o).abs(), |s, &(v, c)| {
                        s.saturating_add((c as i128).abs().saturating_mul(bound(v)))
                    });
                total = total.saturating_add(reach.saturating_mul(stride));
                stride = stride.saturating_mul(t.shape[d].max(1) as i128);
            }
            if total > LIMIT && worst.is_none_or(|w| total > w) {
                worst = Some(total);
            }
        });
    }
    worst
}
