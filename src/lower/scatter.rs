//! Lowering of `%y = scatter %base, %idx, %upd axis A reduce R` (docs/teg.md §9.1): the
//! attributes are exactly `axis N` (N ≥ 0) and `reduce add|max|min|none`, in either order;
//! anything else is E0041. Shapes and dtypes are the verifier's (`verify/scatter.rs`).

use super::literal::{attr_span, signed};
use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use crate::ir::graph::{Scatter, ScatterReduce, ValueId};
use crate::syntax::ast::{self, Attr};

fn bad(span: Span, msg: impl Into<String>) -> Diagnostic {
    let msg = msg.into();
    Diagnostic::error(codes::BAD_SCATTER_ATTR, msg.clone())
        .primary(span, msg)
        .note(
            "a scatter is written `%y = scatter %base, %idx, %upd axis A reduce add|max|min|none`",
        )
}

/// The scatter of the three operands `args` with attributes `attrs`.
pub(super) fn lower_scatter(
    diags: &mut Diagnostics,
    args: &[ValueId],
    attrs: &[Attr],
    span: Span,
) -> Option<Scatter> {
    let mut axis = None;
    let mut reduce = None;
    let mut ok = true;
    let mut i = 0;
    while i < attrs.len() {
        let next = attrs.get(i + 1);
        match (&attrs[i], next) {
            (Attr::Word(w), Some(Attr::Number(ast::Literal::Int(s), ns))) if w.text == "axis" => {
                i += 1;
                let v = signed(diags, s)?;
                match usize::try_from(v) {
                    Ok(a) if axis.is_none() => axis = Some(a),
                    Ok(_) => ok = report(diags, bad(w.span, "`axis` is given twice")),
                    Err(_) => ok = report(diags, bad(*ns, "`axis` must not be negative")),
                }
            }
            (Attr::Word(w), Some(Attr::Word(k))) if w.text == "reduce" => {
                i += 1;
                match ScatterReduce::ALL.iter().find(|r| r.name() == k.text) {
                    Some(r) if reduce.is_none() => reduce = Some(*r),
                    Some(_) => ok = report(diags, bad(w.span, "`reduce` is given twice")),
                    None => {
                        let msg = format!("unknown scatter reduction `{}`", k.text);
                        ok = report(diags, bad(k.span, msg));
                    }
                }
            }
            (a, _) => {
                let msg = "`scatter` takes `axis N` and `reduce add|max|min|none` only";
                ok = report(diags, bad(attr_span(a), msg));
            }
        }
        i += 1;
    }
    let (Some(axis), Some(reduce)) = (axis, reduce) else {
        if ok {
            let missing = if axis.is_none() { "axis N" } else { "reduce R" };
            diags.push(bad(span, format!("`scatter` needs `{missing}`")));
        }
        return None;
    };
    ok.then_some(Scatter {
        base: args[0],
        idx: args[1],
        upd: args[2],
        axis,
        reduce,
        placement: None,
    })
}

fn report(diags: &mut Diagnostics, d: Diagnostic) -> bool {
    diags.push(d);
    false
}
