//! Import-time evaluation of the shape glue: `Constant`, `Shape`, `Size`, `ConstantOfShape`,
//! `Range`, and elementwise arithmetic, comparisons, `Where` and `Cast` whose operands are all
//! known. (Views of constants, such as `Gather`, `Slice`, `Concat` or `Unsqueeze` on a shape,
//! are folded by the view lowerings themselves, with the same index maps they emit.)

use super::{broadcast_shapes, Cx, Val, R};
use crate::import::onnx::elem;
use crate::import::onnx::model::{Attr, Node};
use tapc_runtime::{DType, Data, Tensor};

/// The node's outputs when it can be evaluated now, else `None`.
pub(super) fn fold(cx: &Cx, n: &Node) -> R<Option<Vec<Val>>> {
    let out = match n.op_type.as_str() {
        "Constant" => constant(cx, n)?,
        "Shape" => shape(cx, n)?,
        "Size" => {
            let v = cx.val(n, 0)?;
            i64s(&[], &[v.shape().iter().product::<usize>() as i64])
        }
        "ConstantOfShape" => match constant_of_shape(cx, n)? {
            Some(t) => t,
            None => return Ok(None),
        },
        "Range" if all_const(cx, n)? => range(cx, n)?,
        op if all_const(cx, n)? && ELEMENTWISE.contains(&op) => elementwise(cx, n)?,
        _ => return Ok(None),
    };
    Ok(Some(vec![Val::Const(out)]))
}

/// Operators lowered only by folding (their inputs must be known at import).
pub(super) const FOLD_ONLY: &[&str] = &["Constant", "Shape", "Size", "ConstantOfShape", "Range"];

const ELEMENTWISE: &[&str] = &[
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Mod",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "And",
    "Or",
    "Not",
    "Neg",
    "Abs",
    "Where",
    "Cast",
    "Max",
    "Min",
    "Sqrt",
    "Floor",
    "Ceil",
    "Identity",
];

/// Whether every present input is a constant (and there is at least one).
pub(super) fn all_const(cx: &Cx, n: &Node) -> R<bool> {
    let mut any = false;
    for i in 0..n.inputs.len() {
        match cx.opt(n, i)? {
            Some(Val::Data(_)) => return Ok(false),
            Some(Val::Const(_)) => any = true,
            None => {}
        }
    }
    Ok(any)
}

/// An i64 tensor.
pub(super) fn i64s(shape: &[usize], v: &[i64]) -> Tensor {
    Tensor {
        shape: shape.to_vec(),
        data: Data::I64(v.to_vec()),
    }
}

fn constant(cx: &Cx, n: &Node) -> R<Tensor> {
    let Some((name, a)) = n.attrs.first() else {
        return Err(cx.invalid(n, "no value attribute"));
    };
    Ok(match a {
        Attr::Tensor(t) => t.clone(),
        Attr::Float(f) => Tensor {
            shape: vec![],
            data: Data::F32(vec![*f]),
        },
        Attr::Floats(f) => Tensor {
            shape: vec![f.len()],
            data: Data::F32(f.clone()),
        },
        Attr::Int(i) => i64s(&[], &[*i]),
        Attr::Ints(v) => i64s(&[v.len()], v),
        _ => {
            return Err(cx.unsupported(n, format!("a `{name}` value (sparse or string constants)")))
        }
    })
}

fn shape(cx: &Cx, n: &Node) -> R<Tensor> {
    let s: Vec<i64> = cx.val(n, 0)?.shape().iter().map(|&d| d as i64).collect();
    let r = s.len() as i64;
    let clamp = |v: i64| (if v < 0 { v + r } else { v }).clamp(0, r) as usize;
    let start = clamp(n.int("start", 0));
    let end = clamp(n.int("end", r));
    let v = if start < end { &s[start..end] } else { &[][..] };
    Ok(i64s(&[v.len()], v))
}

fn constant_of_shape(cx: &Cx, n: &Node) -> R<Option<Tensor>> {
    let Some(dims) = cx.ints_in(n, 0, "shape")? else {
        return Err(cx.invalid(n, "input 0 (the shape) is missing"));
    };
    if dims.iter().any(|&d| d < 0) {
        return Err(cx.invalid(n, format!("negative dimension in {dims:?}")));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let numel = tapc_runtime::checked_numel(&shape).filter(|&k| k < 1 << 31);
    if numel.is_none() {
        return Err(cx.unsupported(n, format!("shape {dims:?} is too large to build at import")));
    }
    let value = match n.attr("value") {
        Some(Attr::Tensor(t)) => Some(t),
        _ => None,
    };
    match elem::filled(value, shape) {
        Some(t) => Ok(Some(t)),
        None => Err(cx.invalid(n, "`value` must hold one element")),
    }
}

fn range(cx: &Cx, n: &Node) -> R<Tensor> {
    let scalar = |i: usize| -> R<Tensor> {
        let t = cx
            .konst(n, i, "bound")?
            .ok_or_else(|| cx.invalid(n, format!("input {i} is missing")))?;
        Ok(t.clone())
    };
    let (start, limit, delta) = (scalar(0)?, scalar(1)?, scalar(2)?);
    let t = start.dtype();
    let f = |x: &Tensor| elem::to_f64s(&x.data).first().copied().unwrap_or(0.0);
    let (s, l, d) = (f(&start), f(&limit), f(&delta));
    if d == 0.0 {
        return Err(cx.invalid(n, "`delta` is 0"));
    }
    let count = ((l - s) / d).ceil().max(0.0) as usize;
    if count > 1 << 31 {
        return Err(cx.unsupported(n, "a range too long to build at import"));
    }
    let data = if t.is_float() {
        let v: Vec<f64> = (0..count).map(|i| s + i as f64 * d).collect();
        elem::from_f64s(t, &v)
    } else {
        let (s, d) = (elem::to_i64s(&start.data)[0], elem::to_i64s(&delta.data)[0]);
        let v: Vec<i64> = (0..count as i64)
            .map(|i| s.wrapping_add(i.wrapping_mul(d)))
            .collect();
        elem::from_i64s(t, &v)
    };
    Ok(Tensor {
        shape: vec![count],
        data,
    })
}

/// For each element of `out` (row-major), the flat index of the `shape` element it reads
/// under numpy broadcasting.
pub(super) fn broadcast_index(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let off = out.len() - shape.len();
    let mut strides = vec![0usize; out.len()];
    let mut s = 1;
    for i in (0..shape.len()).rev() {
        strides[off + i] = if shape[i] == 1 { 0 } else { s };
        s *= shape[i];
    }
    each_coord(out, |c| c.iter().zip(&strides).map(|(c, s)| c * s).sum())
}

/// `f` at every coordinate of `shape`, row-major.
pub(super) fn each_coord(shape: &[usize], f: impl Fn(&[usize]) -> usize) -> Vec<usize> {
    let numel: usize = shape.iter().product();
    let mut out = Vec::with_capacity(numel);
    let mut c = vec![0usize; shape.len()];
    for _ in 0..numel {
        out.push(f(&c));
        for d in (0..shape.len()).rev() {
            c[d] += 1;
            if c[d] < shape[d] {
                break;
            }
            c[d] = 0;
        }
    }
    out
}

fn elementwise(cx: &Cx, n: &Node) -> R<Tensor> {
    let mut ins: Vec<Tensor> = Vec::new();
    for i in 0..n.inputs.len() {
        if let Some(t) = cx.konst(n, i, "operand")? {
            ins.push(t.clone());
        }
    }
    let mut shape = Vec::new();
    for t in &ins {
        shape = broadcast_shapes(&shape, &t.shape)
            .ok_or_else(|| cx.invalid(n, "operand shapes do not broadcast"))?;
    }
    let ins: Vec<Tensor> = ins
        .iter()
        .map(|t| Tensor {
            shape: shape.clone(),
            data: elem::pick(&t.data, &broadcast_index(&t.shape, &shape)),
        })
        .collect();
    let data = eval(cx, n, &ins)?;
    Ok(Tensor { shape, data })
}

/// The elementwise op on operands of one shape.
fn eval(cx: &Cx, n: &Node, ins: &[Tensor]) -> R<Data> {
    let op = n.op_type.as_str();
    let t = ins[0].dtype();
    if op == "Cast" {
        return Ok(elem::cast(&ins[0].data, super::ew::cast_to(cx, n)?));
    }
    if op == "Identity" {
        return Ok(ins[0].data.clone());
    }
    if op == "Where" {
        let c = elem::to_i64s(&ins[0].data);
        let len = c.len();
        let idx: Vec<usize> = c
            .iter()
            .enumerate()
            .map(|(i, &v)| if v != 0 { i } else { i + len })
            .collect();
        let both = elem::join(&ins[1].data, &ins[2].data);
        return Ok(elem::pick(&both, &idx));
    }
    let cmp = matches!(
        op,
        "Equal" | "Less" | "Greater" | "LessOrEqual" | "GreaterOrEqual"
    );
    let out = if cmp || matches!(op, "And" | "Or" | "Not") {
        DType::Bool
    } else {
        t
    };
    if t.is_float() {
        let v: Vec<Vec<f64>> = ins.iter().map(|x| elem::to_f64s(&x.data)).collect();
        let r = (0..v[0].len())
            .map(|i| float_op(op, &v, i))
            .collect::<Option<Vec<f64>>>();
        let r = r.ok_or_else(|| cx.unsupported(n, "this operator on constants"))?;
        Ok(elem::from_f64s(out, &r))
    } else {
        let v: Vec<Vec<i64>> = ins.iter().map(|x| elem::to_i64s(&x.data)).collect();
        let fmod = n.int("fmod", 0) != 0;
        let r = (0..v[0].len())
            .map(|i| int_op(op, &v, i, fmod))
            .collect::<Option<Vec<i64>>>();
        let r = r.ok_or_else(|| cx.unsupported(n, "this operator on integer constants"))?;
        Ok(elem::from_i64s(out, &r))
    }
}

fn b(x: bool) -> f64 {
    f64::from(u8::from(x))
}

fn float_op(op: &str, v: &[Vec<f64>], i: usize) -> Option<f64> {
    let x = v[0][i];
    let y = v.get(1).map(|w| w[i]).unwrap_or(0.0);
    Some(match op {
        "Add" => x + y,
        "Sub" => x - y,
        "Mul" => x * y,
        "Div" => x / y,
        "Mod" => x % y,
        "Equal" => b(x == y),
        "Less" => b(x < y),
        "Greater" => b(x > y),
        "LessOrEqual" => b(x <= y),
        "GreaterOrEqual" => b(x >= y),
        "Neg" => -x,
        "Abs" => x.abs(),
        "Max" => v.iter().map(|w| w[i]).fold(f64::NEG_INFINITY, f64::max),
        "Min" => v.iter().map(|w| w[i]).fold(f64::INFINITY, f64::min),
        "Sqrt" => x.sqrt(),
        "Floor" => x.floor(),
        "Ceil" => x.ceil(),
        _ => return None,
    })
}

fn int_op(op: &str, v: &[Vec<i64>], i: usize, fmod: bool) -> Option<i64> {
    let x = v[0][i];
    let y = v.get(1).map(|w| w[i]).unwrap_or(0);
    let bi = i64::from;
    Some(match op {
        "Add" => x.wrapping_add(y),
        "Sub" => x.wrapping_sub(y),
        "Mul" => x.wrapping_mul(y),
        "Div" => x.checked_div(y)?,
        "Mod" if fmod => x.checked_rem(y)?,
        "Mod" => x
            .checked_rem_euclid(y)
            .map(|r| if r != 0 && y < 0 { r + y } else { r })?,
        "Equal" => bi(x == y),
        "Less" => bi(x < y),
        "Greater" => bi(x > y),
        "LessOrEqual" => bi(x <= y),
        "GreaterOrEqual" => bi(x >= y),
        "And" => bi(x != 0 && y != 0),
        "Or" => bi(x != 0 || y != 0),
        "Not" => bi(x == 0),
        "Neg" => x.wrapping_neg(),
        "Abs" => x.wrapping_abs(),
        "Max" => v.iter().map(|w| w[i]).max()?,
        "Min" => v.iter().map(|w| w[i]).min()?,
        _ => return None,
    })
}
