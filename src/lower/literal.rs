//! Checked parsing of the literals the syntax tree keeps as written (integers, floats, attribute
//! values, `[...]` list elements), shared by op and graph lowering (`lower`) and instruction
//! lowering (`instr`). An out-of-range number is an E0004 at its span.

use crate::diag::{codes, Diagnostic, Diagnostics, Span};
use crate::ir::Literal;
use crate::syntax::ast::{self, Attr, ListElem};

/// An integer literal, negated when `negative` (so that `-9223372036854775808` fits).
pub(super) fn int(
    diags: &mut Diagnostics,
    digits: &str,
    negative: bool,
    span: Span,
) -> Option<i64> {
    let text = if negative {
        format!("-{digits}")
    } else {
        digits.to_string()
    };
    let v = text.parse::<i64>().ok();
    if v.is_none() {
        diags.push(
            Diagnostic::error(
                codes::BAD_LITERAL,
                format!("integer literal `{text}` does not fit in i64"),
            )
            .primary(span, "too large"),
        );
    }
    v
}

/// A signed integer (an attribute, a parameter value, a range bound).
pub(super) fn signed(diags: &mut Diagnostics, s: &ast::Signed) -> Option<i64> {
    int(diags, &s.digits, s.negative, s.span)
}

/// A float literal; it must be finite as an f64.
pub(super) fn float(diags: &mut Diagnostics, text: &str, span: Span) -> Option<f64> {
    let v = text.parse::<f64>().ok().filter(|v| v.is_finite());
    if v.is_none() {
        diags.push(
            Diagnostic::error(
                codes::BAD_LITERAL,
                format!("float literal `{text}` is out of range"),
            )
            .primary(span, "not a finite f64"),
        );
    }
    v
}

/// An attribute value.
pub(super) fn literal(diags: &mut Diagnostics, lit: &ast::Literal, span: Span) -> Option<Literal> {
    match lit {
        ast::Literal::Int(s) => signed(diags, s).map(Literal::Int),
        ast::Literal::Float(neg, f) => {
            float(diags, f, span).map(|v| Literal::Float(if *neg { -v } else { v }))
        }
        ast::Literal::Bool(b) => Some(Literal::Bool(*b)),
    }
}

/// A list element as `(start, stop, step, is_range)`; `None` where a number did not parse.
pub(super) type Elem = Option<(Option<i64>, Option<i64>, Option<i64>, bool)>;

/// The elements of a `[...]` attribute list.
pub(super) fn list_elems(diags: &mut Diagnostics, v: &[ListElem]) -> Vec<Elem> {
    v.iter()
        .map(|e| match e {
            ListElem::Single(s) => signed(diags, s).map(|v| (Some(v), None, None, false)),
            ListElem::Range {
                start, stop, step, ..
            } => {
                let mut f = |s: &Option<ast::Signed>| s.as_ref().map(|s| signed(diags, s));
                let (a, b, c) = (f(start), f(stop), f(step));
                if [a, b, c].contains(&Some(None)) {
                    return None;
                }
                Some((a.flatten(), b.flatten(), c.flatten(), true))
            }
        })
        .collect()
}

/// The span of an attribute.
pub(super) fn attr_span(a: &Attr) -> Span {
    match a {
        Attr::List(_, s) | Attr::Number(_, s) => *s,
        Attr::Word(n) => n.span,
    }
}
