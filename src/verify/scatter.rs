//! The type of `scatter %base, %idx, %upd axis A reduce R` (docs/teg.md §9.1): `A` below the
//! base's rank (E0041), integer indices (E0042), indices and updates of one shape, of the
//! base's rank and sizes on every dimension but `A` (E0043), updates of the base's dtype
//! (E0044) and a reduction the dtype has (E0045). The result has the base's type.

use crate::diag::{codes, Code, Diagnostic, Span};
use crate::ir::graph::{Scatter, ScatterReduce};
use crate::ir::TensorType;

fn err(code: Code, span: Span, msg: String, label: &str) -> Diagnostic {
    Diagnostic::error(code, msg).primary(span, label.to_string())
}

/// The result type of scatter `s` with operand types `[base, idx, upd]`.
pub fn scatter_type(
    s: &Scatter,
    args: &[TensorType],
    span: Span,
) -> Result<TensorType, Diagnostic> {
    let (base, idx, upd) = (&args[0], &args[1], &args[2]);
    if s.axis >= base.rank() {
        let msg = format!("`axis {}` is out of range for the base {base}", s.axis);
        return Err(err(codes::BAD_SCATTER_ATTR, span, msg, "no such dimension"));
    }
    if !idx.dtype.is_int() {
        let msg = format!("the indices of a scatter must be integers, but they are {idx}");
        return Err(err(
            codes::BAD_SCATTER_INDEX,
            span,
            msg,
            "not an integer index tensor",
        ));
    }
    if idx.shape != upd.shape {
        let msg = format!("the indices {idx} and the updates {upd} of a scatter differ in shape");
        return Err(err(
            codes::BAD_SCATTER_SHAPE,
            span,
            msg,
            "one shape expected",
        ));
    }
    let same_but_axis = base.rank() == upd.rank()
        && (0..base.rank()).all(|d| d == s.axis || base.shape[d] == upd.shape[d]);
    if !same_but_axis {
        let msg = format!(
            "the updates {upd} of a scatter along axis {} must have the base {base}'s rank and sizes but along that axis",
            s.axis
        );
        return Err(
            err(codes::BAD_SCATTER_SHAPE, span, msg, "shapes do not match")
                .note("broadcast or reshape the indices and updates first"),
        );
    }
    if upd.dtype != base.dtype {
        let msg = format!("the updates {upd} of a scatter differ in dtype from the base {base}");
        return Err(err(codes::BAD_SCATTER_DTYPE, span, msg, "cast one side"));
    }
    if base.dtype == crate::ir::DType::Bool && s.reduce != ScatterReduce::None {
        let msg = format!("`reduce {}` is not defined for bool", s.reduce.name());
        return Err(
            err(codes::BAD_SCATTER_REDUCE, span, msg, "use `reduce none`")
                .note("or cast to an integer dtype"),
        );
    }
    Ok(base.clone())
}
