//! Type rules of selectors and generators: each checks its attributes against the operand
//! types, returns the result type, and canonicalizes attributes (explicit slices, reshape -1).

use crate::diag::{codes, Diagnostic, Span};
use crate::ir::graph::{GenKind, Generator, PadMode, SliceDim, View};
use crate::ir::instance::Scalar;
use crate::ir::types::checked_elements;
use crate::ir::{DType, Literal, TensorType};

type R<T> = Result<T, Diagnostic>;

fn bad(span: Span, msg: String) -> Diagnostic {
    Diagnostic::error(codes::BAD_ATTR, msg.clone()).primary(span, msg)
}

fn check_dims(dims: &[usize], rank: usize, span: Span, what: &str) -> R<()> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d >= rank {
            return Err(bad(
                span,
                format!("{what} dimension {d} is out of range for rank {rank}"),
            ));
        }
        if std::mem::replace(&mut seen[d], true) {
            return Err(bad(span, format!("{what} dimension {d} is listed twice")));
        }
    }
    Ok(())
}

/// Canonical slice of one dimension of size `n` (Python semantics, no clamping: a start or
/// stop outside the dimension is an error even when the slice would be empty).
pub fn canonical_slice(s: SliceDim, n: i64, span: Span) -> R<(SliceDim, i64)> {
    let step = s.step.unwrap_or(1);
    if step == 0 {
        return Err(bad(span, "slice step cannot be 0".into()));
    }
    // i128 so that no attribute, however large, overflows.
    let (n, st) = (n as i128, step as i128);
    let wrap = |v: i64| if v < 0 { v as i128 + n } else { v as i128 };
    let (start, stop) = if st > 0 {
        (s.start.map_or(0, wrap), s.stop.map_or(n, wrap))
    } else {
        (s.start.map_or(n - 1, wrap), s.stop.map_or(-1, wrap))
    };
    let count = if st > 0 {
        (stop - start + st - 1).div_euclid(st).max(0)
    } else {
        (start - stop - st - 1).div_euclid(-st).max(0)
    };
    let in_range = if count == 0 {
        (0..=n).contains(&start) && (-1..=n).contains(&stop)
    } else {
        let last = start + (count - 1) * st;
        (0..n).contains(&start) && (0..n).contains(&last) && (-1..=n).contains(&stop)
    };
    if !in_range {
        return Err(bad(
            span,
            format!(
                "slice {}:{}:{step} is out of range for a dimension of size {n}",
                opt(s.start),
                opt(s.stop)
            ),
        ));
    }
    Ok((
        SliceDim::from_count(start as i64, step, count as i64),
        count as i64,
    ))
}

fn opt(v: Option<i64>) -> String {
    v.map_or(String::new(), |v| v.to_string())
}

/// Result type of a view; canonicalizes `view`'s attributes in place.
pub fn view_type(view: &mut View, args: &[&TensorType], span: Span) -> R<TensorType> {
    let t = view_type_unchecked(view, args, span)?;
    match checked_elements(&t.shape) {
        Some(_) => Ok(t),
        None => Err(bad(span, format!("the result {t} has too many elements"))),
    }
}

/// The result type of `view` (one rule per kind of selector), canonicalizing in place.
fn view_type_unchecked(view: &mut View, args: &[&TensorType], span: Span) -> R<TensorType> {
    let t = args[0];
    match view {
        View::Transpose { perm, .. } => transpose(t, perm, span),
        View::Reverse { dims, .. } => {
            check_dims(dims, t.rank(), span, "reverse")?;
            Ok(t.clone())
        }
        View::Slice { dims, .. } => slice(t, dims, span),
        View::Squeeze { dims, .. } => squeeze(t, dims, span),
        View::Unsqueeze { dims, .. } => unsqueeze(t, dims, span),
        View::Broadcast { shape, .. } => broadcast(t, shape, span),
        View::Reshape { shape, .. } => reshape(t, shape, span),
        View::Concat { axis, .. } => join(args, *axis, false, span),
        View::Interleave { axis, .. } => join(args, *axis, true, span),
        View::Repeat { times, axis, .. } => repeat(t, *times, *axis, span),
        View::Pad { widths, mode, .. } => pad(t, widths, mode, span),
    }
}

fn transpose(t: &TensorType, perm: &[usize], span: Span) -> R<TensorType> {
    let rank = t.rank();
    if perm.len() != rank {
        return Err(bad(
            span,
            format!(
                "transpose of a rank-{rank} tensor needs {rank} dims, got {}",
                perm.len()
            ),
        ));
    }
    check_dims(perm, rank, span, "transpose")?;
    Ok(t.with_shape(perm.iter().map(|&p| t.shape[p]).collect()))
}

/// Fills in the omitted trailing dims and makes every range explicit.
fn slice(t: &TensorType, dims: &mut Vec<SliceDim>, span: Span) -> R<TensorType> {
    let rank = t.rank();
    if dims.len() > rank {
        return Err(bad(
            span,
            format!("slice of a rank-{rank} tensor has {} ranges", dims.len()),
        ));
    }
    dims.resize(
        rank,
        SliceDim {
            start: None,
            stop: None,
            step: None,
        },
    );
    let mut shape = Vec::new();
    for (d, n) in dims.iter_mut().zip(&t.shape) {
        let (c, count) = canonical_slice(*d, *n, span)?;
        *d = c;
        shape.push(count);
    }
    Ok(t.with_shape(shape))
}

fn squeeze(t: &TensorType, dims: &[usize], span: Span) -> R<TensorType> {
    let rank = t.rank();
    check_dims(dims, rank, span, "squeeze")?;
    if let Some(&d) = dims.iter().find(|&&d| t.shape[d] != 1) {
        return Err(bad(
            span,
            format!("cannot squeeze dimension {d} of size {}", t.shape[d]),
        ));
    }
    Ok(t.with_shape(
        (0..rank)
            .filter(|d| !dims.contains(d))
            .map(|d| t.shape[d])
            .collect(),
    ))
}

fn unsqueeze(t: &TensorType, dims: &[usize], span: Span) -> R<TensorType> {
    let out = t.rank() + dims.len();
    check_dims(dims, out, span, "unsqueeze")?;
    let mut it = t.shape.iter();
    Ok(t.with_shape(
        (0..out)
            .map(|d| {
                if dims.contains(&d) {
                    1
                } else {
                    *it.next().unwrap_or(&1)
                }
            })
            .collect(),
    ))
}

fn broadcast(t: &TensorType, shape: &[i64], span: Span) -> R<TensorType> {
    let ok = shape.len() >= t.rank()
        && shape.iter().all(|&s| s >= 0)
        && t.shape
            .iter()
            .rev()
            .zip(shape.iter().rev())
            .all(|(&a, &b)| a == b || a == 1);
    if !ok {
        return Err(bad(span, format!("cannot broadcast {t} to {shape:?}"))
            .note("dims align from the right; each must be equal or 1 in the operand"));
    }
    Ok(t.with_shape(shape.to_vec()))
}

/// Fills in a `-1` size.
fn reshape(t: &TensorType, shape: &mut [i64], span: Span) -> R<TensorType> {
    let Some(known) = checked_elements(
        &shape
            .iter()
            .copied()
            .filter(|&s| s != -1)
            .collect::<Vec<_>>(),
    ) else {
        return Err(bad(
            span,
            format!("reshape to {shape:?} has too many elements"),
        ));
    };
    let holes = shape.iter().filter(|&&s| s == -1).count();
    if holes > 1 || shape.iter().any(|&s| s < -1) {
        return Err(bad(
            span,
            "reshape takes non-negative sizes and at most one -1".into(),
        ));
    }
    if holes == 1 {
        if known == 0 || t.elements() % known != 0 {
            return Err(bad(
                span,
                format!("cannot infer -1 when reshaping {t} to {shape:?}"),
            ));
        }
        let fill = t.elements() / known;
        shape
            .iter_mut()
            .filter(|s| **s == -1)
            .for_each(|s| *s = fill);
    }
    if checked_elements(shape) != Some(t.elements()) {
        return Err(bad(
            span,
            format!(
                "cannot reshape {t} ({} elements) to {shape:?}",
                t.elements()
            ),
        ));
    }
    Ok(t.with_shape(shape.to_vec()))
}

/// `concat` (sizes add up along `axis`) or `interleave` (every operand of one type).
fn join(args: &[&TensorType], axis: usize, interleave: bool, span: Span) -> R<TensorType> {
    let t = args[0];
    let rank = t.rank();
    if axis >= rank {
        return Err(bad(
            span,
            format!("axis {axis} is out of range for rank {rank}"),
        ));
    }
    let mut total = 0;
    for a in args {
        let same = a.dtype == t.dtype
            && a.rank() == rank
            && (0..rank).all(|d| (d == axis && !interleave) || a.shape[d] == t.shape[d]);
        if !same {
            let how = if interleave {
                "the same type"
            } else {
                "the same dtype and the same sizes except along the axis"
            };
            let code = if a.dtype == t.dtype {
                codes::SHAPE_MISMATCH
            } else {
                codes::DTYPE_MISMATCH
            };
            return Err(
                Diagnostic::error(code, format!("operands must have {how}: {t} and {a}"))
                    .primary(span, "operands disagree"),
            );
        }
        total = a.shape[axis]
            .checked_add(total)
            .ok_or_else(|| bad(span, "the result is too large".into()))?;
    }
    let mut shape = t.shape.clone();
    shape[axis] = total;
    Ok(t.with_shape(shape))
}

fn repeat(t: &TensorType, times: i64, axis: usize, span: Span) -> R<TensorType> {
    let rank = t.rank();
    if axis >= rank || times < 0 {
        return Err(bad(
            span,
            format!("repeat needs 0 <= axis < {rank} and times >= 0"),
        ));
    }
    let mut shape = t.shape.clone();
    shape[axis] = shape[axis]
        .checked_mul(times)
        .ok_or_else(|| bad(span, "repeat makes the tensor too large".into()))?;
    Ok(t.with_shape(shape))
}

/// Fills in the omitted trailing widths and converts the constant to the dtype.
fn pad(
    t: &TensorType,
    widths: &mut Vec<(i64, i64)>,
    mode: &mut PadMode,
    span: Span,
) -> R<TensorType> {
    let rank = t.rank();
    if widths.len() > rank {
        return Err(bad(
            span,
            format!("pad of a rank-{rank} tensor has {} widths", widths.len()),
        ));
    }
    widths.resize(rank, (0, 0));
    if let PadMode::Constant(l) = mode {
        *l = literal_for(*l, t.dtype, span)?;
    }
    if *mode == PadMode::Reflect {
        if let Some((d, _)) = widths
            .iter()
            .enumerate()
            .find(|(d, w)| w.0.max(w.1) > t.shape[*d] - 1 && w.0.max(w.1) > 0)
        {
            return Err(bad(
                span,
                format!(
                    "reflect padding of dimension {d} must be smaller than its size {}",
                    t.shape[d]
                ),
            ));
        }
    }
    let shape: Option<Vec<i64>> = t
        .shape
        .iter()
        .zip(widths.iter())
        .map(|(s, w)| s.checked_add(w.0)?.checked_add(w.1))
        .collect();
    shape
        .map(|s| t.with_shape(s))
        .ok_or_else(|| bad(span, "padding makes the tensor too large".into()))
}

/// A literal converted to `dtype`, or an error if it does not fit (a float for an int, ...).
pub fn literal_for(l: Literal, dtype: DType, span: Span) -> R<Literal> {
    match (l, dtype) {
        (Literal::Bool(_), DType::Bool) => Ok(l),
        // 0 and 1 are the bool values (so the default pad constant 0 works for every dtype).
        (Literal::Int(v @ (0 | 1)), DType::Bool) => Ok(Literal::Bool(v == 1)),
        (Literal::Int(_) | Literal::Float(_), d) if !Scalar::from(l).fits(d) => Err(
            Diagnostic::error(codes::BAD_LITERAL, format!("{l} does not fit in {d}"))
                .primary(span, "literal out of range"),
        ),
        (Literal::Int(v), d) if d.is_float() => Ok(Literal::Float(v as f64)),
        (Literal::Int(_), d) if d.is_int() => Ok(l),
        (Literal::Float(_), d) if d.is_float() => Ok(l),
        (l, d) => Err(Diagnostic::error(
            codes::DTYPE_MISMATCH,
            format!("the value {l} is not a {d}"),
        )
        .primary(span, "wrong kind of value")),
    }
}

/// Checks a generator against its declared type.
pub fn check_generator(g: &mut Generator, span: Span) -> R<()> {
    match &mut g.kind {
        GenKind::Full(l) => *l = literal_for(*l, g.ty.dtype, span)?,
        GenKind::Iota { axis } => {
            if *axis >= g.ty.rank() {
                return Err(bad(
                    span,
                    format!("iota axis {axis} is out of range for {}", g.ty),
                ));
            }
            if g.ty.dtype == DType::Bool {
                return Err(
                    Diagnostic::error(codes::DTYPE_MISMATCH, "iota cannot be bool")
                        .primary(span, "use a numeric dtype"),
                );
            }
        }
        GenKind::Zeros | GenKind::Ones | GenKind::Rand { .. } => {}
    }
    Ok(())
}
