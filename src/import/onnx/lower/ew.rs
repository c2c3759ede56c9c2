//! Elementwise operators: unary math and activations, numpy-broadcasting binary arithmetic and
//! comparisons, `Where`, `Clip`, `Cast`. Each distinct kernel is one rank-polymorphic op
//! (`x: f32[..S]`); operands are broadcast to the result's shape by `broadcast` views.

use super::emit::{lit, D};
use super::{broadcast_shapes, Cx, Val, R};
use crate::import::onnx::elem;
use crate::import::onnx::model::{dtype_of, Node};
use std::collections::HashMap;
use tapc_runtime::{DType, Tensor};

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "Add" | "Sub" | "Mul" | "Div" | "Pow" | "Equal" | "Less" | "Greater" | "LessOrEqual"
        | "GreaterOrEqual" | "And" | "Or" | "Xor" | "BitwiseAnd" | "BitwiseOr" | "BitwiseXor"
        | "Mod" | "BitShift" | "PRelu" => binary,
        "Max" | "Min" | "Sum" | "Mean" => variadic,
        "Relu" | "Neg" | "Abs" | "Sqrt" | "Exp" | "Log" | "Tanh" | "Erf" | "Sigmoid" | "Sin"
        | "Cos" | "Floor" | "Ceil" | "Reciprocal" | "Softplus" | "Not" | "BitwiseNot"
        | "LeakyRelu" | "Elu" | "HardSigmoid" | "HardSwish" | "Gelu" | "Atan" | "Asin" | "Acos"
        | "Selu" | "Softsign" | "Mish" | "Tan" | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh"
        | "Round" | "Sign" | "IsNaN" | "IsInf" | "Swish" | "Celu" | "ThresholdedRelu"
        | "Shrink" => unary,
        "Identity" | "Dropout" => identity,
        "Where" => where_,
        "SwiGLU" => swiglu,
        "Clip" => clip,
        "Cast" | "CastLike" => cast,
        _ => return None,
    })
}

/// Applies the elementwise op with kernel `expr` (`$0`, `$1`... are the operands at `..i`)
/// to `ins` broadcast to their common shape; the result has dtype `out`.
pub(super) fn elementwise(
    cx: &mut Cx,
    n: &Node,
    base: &str,
    ins: &[D],
    out: DType,
    expr: &str,
) -> R<D> {
    let mut shape: Vec<usize> = Vec::new();
    for d in ins {
        shape = broadcast_shapes(&shape, &d.shape).ok_or_else(|| {
            cx.invalid(
                n,
                format!(
                    "operand shapes {:?} do not broadcast",
                    ins.iter().map(|d| &d.shape).collect::<Vec<_>>()
                ),
            )
        })?;
    }
    let hint = n.outputs.first().cloned().unwrap_or_default();
    let names = ["a", "b", "c"];
    let mut ports = Vec::new();
    let mut body = expr.to_string();
    let mut args = Vec::new();
    for (k, d) in ins.iter().enumerate() {
        ports.push(format!("{}: {}[..S]", names[k], d.dtype.name()));
        body = body.replace(&format!("${k}"), &format!("{}[..i]", names[k]));
        args.push(cx.broadcast(d, &shape, &format!("{hint}_{}", names[k])));
    }
    let text = format!(
        "op @{{NAME}}({}) -> (y: {}[..S]) {{\n  y[..i] = {body}\n}}",
        ports.join(", "),
        out.name()
    );
    let op = cx.e.op(base, &text);
    let refs: Vec<&D> = args.iter().collect();
    Ok(cx.e.apply(&hint, &op, &[], &refs, out, shape))
}

/// The dtype all float-only functions need.
fn need_float(cx: &Cx, n: &Node, d: &D) -> R<()> {
    if d.dtype.is_float() {
        Ok(())
    } else {
        Err(cx.unsupported(
            n,
            format!(
                "`{}` of {} values (TEG's math functions take floats)",
                n.op_type,
                d.dtype.name()
            ),
        ))
    }
}

/// `SwiGLU` (opset 24): `a · sigmoid(alpha · a) · b`, operands of one shape and float dtype.
fn swiglu(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let (a, b) = (cx.data(n, 0)?, cx.data(n, 1)?);
    if a.shape != b.shape || a.dtype != b.dtype || !a.dtype.is_float() {
        return Err(cx.invalid(n, format!("operands {:?} and {:?}", a.shape, b.shape)));
    }
    let alpha = lit(f64::from(n.float("alpha", 1.0)), a.dtype);
    let expr = format!("$0 * (1.0 / (1.0 + exp(-{alpha} * $0))) * $1");
    let t = a.dtype;
    Ok(vec![Val::Data(elementwise(
        cx,
        n,
        "SwiGLU",
        &[a, b],
        t,
        &expr,
    )?)])
}

fn binary(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let a = cx.data(n, 0)?;
    let b = pow_exponent(cx, n, &a)?;
    let t = a.dtype;
    if n.op_type == "Pow" {
        let d = elementwise(cx, n, "Pow", &[a, b.clone()], t, &pow_expr(t, b.dtype))?;
        return Ok(vec![Val::Data(d)]);
    }
    if b.dtype != t {
        return Err(cx.invalid(
            n,
            format!("operands of dtypes {} and {}", t.name(), b.dtype.name()),
        ));
    }
    let (expr, out) = match n.op_type.as_str() {
        "Add" => ("$0 + $1", t),
        "Sub" => ("$0 - $1", t),
        "Mul" => ("$0 * $1", t),
        "Div" if t.is_float() || t.is_unsigned() => ("$0 / $1", t),
        // ONNX truncates where TEG floors: one up when the floor remainder is not 0 and the signs differ.
        "Div" => (
            "select($0 % $1 != 0 && ($0 < 0) != ($1 < 0), $0 / $1 + 1, $0 / $1)",
            t,
        ),
        "Mod" if n.int("fmod", 0) != 0 => (C_FMOD, t),
        "Mod" if t.is_float() => (FLOAT_MOD, t),
        "Mod" => ("$0 % $1", t),
        "BitShift" if n.string("direction").as_deref() == Some("LEFT") => ("$0 << $1", t),
        "BitShift" => ("$0 >> $1", t),
        "PRelu" => ("select($0 < 0, $0 * $1, $0)", t),
        "Equal" => ("$0 == $1", DType::Bool),
        "Less" => ("$0 < $1", DType::Bool),
        "Greater" => ("$0 > $1", DType::Bool),
        "LessOrEqual" => ("$0 <= $1", DType::Bool),
        "GreaterOrEqual" => ("$0 >= $1", DType::Bool),
        "And" => ("$0 && $1", DType::Bool),
        "Or" => ("$0 || $1", DType::Bool),
        "Xor" => ("$0 != $1", DType::Bool),
        "BitwiseAnd" => ("$0 & $1", t),
        "BitwiseOr" => ("$0 | $1", t),
        _ => ("$0 ^ $1", t),
    };
    let d = elementwise(cx, n, &n.op_type, &[a, b], out, expr)?;
    Ok(vec![Val::Data(d)])
}

/// `Pow` of a base of dtype `t` by an exponent of dtype `e`: the result has the base's dtype;
/// integer bases are raised in f64 (exact for the integers f64 holds) and cast back.
fn pow_expr(t: DType, e: DType) -> String {
    match (t.is_float(), t == e) {
        (true, true) => "pow($0, $1)".into(),
        (true, false) => format!("pow($0, {}($1))", t.name()),
        (false, _) => format!("{}(pow(f64($0), f64($1)))", t.name()),
    }
}

/// numpy's float `mod` (the sign of the divisor): TEG's `%`, except that a finite dividend and
/// an infinite divisor give the dividend, or the divisor when their signs differ.
const FLOAT_MOD: &str = "select($1 == $1 && $1 - $1 != 0.0 && $0 - $0 == 0.0, select($0 != 0.0 && ($0 < 0.0) != ($1 < 0.0), $1, $0), $0 % $1)";

/// C's `fmod` (the sign of the dividend) from TEG's floor remainder (the sign of the divisor).
const C_FMOD: &str = "select($0 % $1 != 0 && ($0 < 0) != ($1 < 0), $0 % $1 - $1, $0 % $1)";

/// Input 1; for `Pow` of a float base, a constant exponent of another dtype is converted to
/// the base's.
fn pow_exponent(cx: &mut Cx, n: &Node, a: &D) -> R<D> {
    if n.op_type == "Pow" && a.dtype.is_float() {
        if let Some(Val::Const(t)) = cx.opt(n, 1)? {
            if t.dtype() != a.dtype {
                let c = Tensor {
                    shape: t.shape.clone(),
                    data: elem::cast(&t.data, a.dtype),
                };
                let name = format!("{}_exponent", n.outputs[0]);
                return Ok(cx.materialize(&name, &c));
            }
        }
    }
    cx.data(n, 1)
}

fn variadic(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let mut ins = Vec::new();
    for i in 0..n.inputs.len() {
        ins.push(cx.data(n, i)?);
    }
    let Some(first) = ins.first().cloned() else {
        return Err(cx.invalid(n, "no inputs"));
    };
    let t = first.dtype;
    let f = match n.op_type.as_str() {
        "Max" => "max($0, $1)",
        "Min" => "min($0, $1)",
        _ => "$0 + $1",
    };
    let mut acc = first;
    for d in &ins[1..] {
        acc = elementwise(cx, n, &n.op_type, &[acc, d.clone()], t, f)?;
    }
    if n.op_type == "Mean" {
        need_float(cx, n, &acc)?;
        let e = format!("$0 / {}", lit(ins.len() as f64, t));
        acc = elementwise(cx, n, "Mean", &[acc], t, &e)?;
    }
    Ok(vec![Val::Data(acc)])
}

/// The kernel expression of a unary op over `$0` with dtype `t`.
fn unary_expr(cx: &Cx, n: &Node, t: DType) -> R<String> {
    let l = |v: f64| lit(v, t);
    let alpha = |d: f32| f64::from(n.float("alpha", d));
    let float_fn = |f: &str| format!("{f}($0)");
    Ok(match n.op_type.as_str() {
        "Relu" => format!("max($0, {})", l(0.0)),
        "Neg" => "-$0".into(),
        "Abs" => "abs($0)".into(),
        "Not" => "!$0".into(),
        "BitwiseNot" => "~$0".into(),
        "Sign" if t.is_unsigned() => "select($0 > 0, 1, 0)".into(),
        "Sign" => "select($0 > 0, 1, select($0 < 0, -1, $0))".into(),
        "Shrink" => shrink(n, t),
        _ if !t.is_float() => {
            return Err(cx.unsupported(n, format!("`{}` of {} values", n.op_type, t.name())))
        }
        "Sqrt" | "Exp" | "Log" | "Tanh" | "Erf" | "Sin" | "Cos" | "Floor" | "Ceil" | "Atan"
        | "Asin" | "Acos" => float_fn(&n.op_type.to_lowercase()),
        "Sigmoid" => "1.0 / (1.0 + exp(-$0))".into(),
        "Tan" | "Sinh" | "Cosh" | "Asinh" | "Acosh" | "Atanh" | "Round" | "IsNaN" | "IsInf"
        | "Swish" | "Celu" | "ThresholdedRelu" => more_float_expr(n, t),
        "Reciprocal" => "1.0 / $0".into(),
        "Softplus" => "log(exp($0) + 1.0)".into(),
        "Softsign" => "$0 / (1.0 + abs($0))".into(),
        "Mish" => "$0 * tanh(log(exp($0) + 1.0))".into(),
        "LeakyRelu" => format!("select($0 >= 0.0, $0, $0 * {})", l(alpha(0.01))),
        "Elu" => format!("select($0 >= 0.0, $0, {} * (exp($0) - 1.0))", l(alpha(1.0))),
        "Selu" => {
            let a = alpha(1.673_263_2);
            let g = f64::from(n.float("gamma", 1.050_701));
            format!(
                "select($0 > 0.0, {} * $0, {} * (exp($0) - 1.0))",
                l(g),
                l(g * a)
            )
        }
        "HardSigmoid" => {
            let b = f64::from(n.float("beta", 0.5));
            format!("max(0.0, min(1.0, {} * $0 + {}))", l(alpha(0.2)), l(b))
        }
        "HardSwish" => format!("$0 * max(0.0, min(1.0, {} * $0 + 0.5))", l(1.0 / 6.0)),
        "Gelu" if n.string("approximate").as_deref() == Some("tanh") => {
            "0.5 * $0 * (1.0 + tanh(0.7978845608028654 * ($0 + 0.044715 * $0 * $0 * $0)))".into()
        }
        _ => "0.5 * $0 * (1.0 + erf($0 * 0.7071067811865476))".into(),
    })
}

/// Float functions TEG has no name for, written with the ones it has.
fn more_float_expr(n: &Node, t: DType) -> String {
    let alpha = |d: f32| lit(f64::from(n.float("alpha", d)), t);
    match n.op_type.as_str() {
        "Tan" => "sin($0) / cos($0)".into(),
        "Sinh" => "(exp($0) - exp(-$0)) / 2.0".into(),
        "Cosh" => "(exp($0) + exp(-$0)) / 2.0".into(),
        "Asinh" => "log($0 + sqrt($0 * $0 + 1.0))".into(),
        "Acosh" => "log($0 + sqrt($0 * $0 - 1.0))".into(),
        "Atanh" => "0.5 * log((1.0 + $0) / (1.0 - $0))".into(),
        // Half to even; NaN and infinities (where `$0 - floor($0)` is NaN) pass through.
        "Round" => "select($0 - floor($0) == $0 - floor($0), select($0 - floor($0) < 0.5, floor($0), select($0 - floor($0) > 0.5, floor($0) + 1.0, floor($0) + floor($0) % 2.0)), $0)".into(),
        "IsNaN" => "$0 != $0".into(),
        "IsInf" => is_inf(n),
        "Swish" => format!("$0 / (1.0 + exp(-{} * $0))", alpha(1.0)),
        "Celu" => {
            let a = alpha(1.0);
            format!("max(0.0, $0) + min(0.0, {a} * (exp($0 / {a}) - 1.0))")
        }
        _ => format!("select($0 > {}, $0, 0.0)", alpha(1.0)),
    }
}

/// `IsInf` with its `detect_positive` / `detect_negative` flags (`x - x` is NaN only for ±inf).
fn is_inf(n: &Node) -> String {
    let inf = "($0 == $0 && $0 - $0 != 0.0)";
    match (
        n.int("detect_positive", 1) != 0,
        n.int("detect_negative", 1) != 0,
    ) {
        (true, true) => inf.into(),
        (true, false) => format!("{inf} && $0 > 0.0"),
        (false, true) => format!("{inf} && $0 < 0.0"),
        (false, false) => "$0 != $0 && $0 == $0".into(),
    }
}

/// `Shrink`: values within `lambd` of 0 become 0, the others move `bias` toward it.
fn shrink(n: &Node, t: DType) -> String {
    let l = lit(f64::from(n.float("lambd", 0.5)), t);
    let b = lit(f64::from(n.float("bias", 0.0)), t);
    format!(
        "select($0 < -{l}, $0 + {b}, select($0 > {l}, $0 - {b}, {}))",
        lit(0.0, t)
    )
}

fn unary(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let a = cx.data(n, 0)?;
    let expr = unary_expr(cx, n, a.dtype)?;
    let t = match n.op_type.as_str() {
        "IsNaN" | "IsInf" => DType::Bool,
        _ => a.dtype,
    };
    let d = elementwise(cx, n, &n.op_type, &[a], t, &expr)?;
    Ok(vec![Val::Data(d)])
}

fn identity(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    if n.op_type == "Dropout" {
        let training = cx.konst(n, 2, "training_mode")?;
        if training.is_some_and(|t| elem::to_i64s(&t.data).iter().any(|&b| b != 0)) {
            return Err(cx.unsupported(
                n,
                "training mode (random masks: only inference Dropout is imported)",
            ));
        }
    }
    let v = cx.val(n, 0)?.clone();
    // Inference: Dropout is the identity and its mask keeps everything.
    let mask = Tensor {
        shape: v.shape().to_vec(),
        data: tapc_runtime::Data::Bool(vec![true; v.shape().iter().product()]),
    };
    Ok(vec![v, Val::Const(mask)])
}

fn where_(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let c = cx.data(n, 0)?;
    let a = cx.data(n, 1)?;
    let b = cx.data(n, 2)?;
    let t = a.dtype;
    let d = elementwise(cx, n, "Where", &[c, a, b], t, "select($0, $1, $2)")?;
    Ok(vec![Val::Data(d)])
}

/// A scalar bound of `Clip`: an attribute before opset 11, a constant input after.
fn clip_bound(cx: &Cx, n: &Node, i: usize, attr: &str) -> R<Option<f64>> {
    if n.opset < 11 {
        return Ok(n.attr(attr).map(|_| f64::from(n.float(attr, 0.0))));
    }
    let t = cx.konst(n, i, attr)?;
    Ok(t.map(|t| elem::to_f64s(&t.data))
        .and_then(|v| v.first().copied()))
}

fn clip(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let a = cx.data(n, 0)?;
    let lo = clip_bound(cx, n, 1, "min")?;
    let hi = clip_bound(cx, n, 2, "max")?;
    let t = a.dtype;
    let mut e = "$0".to_string();
    if let Some(lo) = lo.filter(|v| v.is_finite()) {
        e = format!("max({e}, {})", lit(lo, t));
    }
    if let Some(hi) = hi.filter(|v| v.is_finite()) {
        e = format!("min({e}, {})", lit(hi, t));
    }
    let d = elementwise(cx, n, "Clip", &[a], t, &e)?;
    Ok(vec![Val::Data(d)])
}

/// The dtype of `Cast`'s `to`.
pub(super) fn cast_to(cx: &Cx, n: &Node) -> R<DType> {
    let to = n.int("to", 0) as i32;
    dtype_of(to).ok_or_else(|| {
        cx.unsupported(
            n,
            format!("`to` = ONNX element type {to}, which TEG has no dtype for"),
        )
    })
}

fn cast(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let a = cx.data(n, 0)?;
    let to = match n.op_type.as_str() {
        "CastLike" => cx.val(n, 1)?.dtype(),
        _ => cast_to(cx, n)?,
    };
    if to == a.dtype {
        return Ok(vec![Val::Data(a)]);
    }
    let e = format!("{}($0)", to.name());
    let d = elementwise(cx, n, "Cast", &[a], to, &e)?;
    Ok(vec![Val::Data(d)])
}

/// A chain node (`simplify.rs`) as one elementwise apply over its root (input 0); `None`
/// when the root is not a run-time float value or an operand is not a finite scalar constant
/// of its dtype (the caller then lowers the chain's nodes one by one).
pub(super) fn chain(cx: &mut Cx, n: &Node) -> R<Option<D>> {
    let Some(Val::Data(root)) = cx.opt(n, 0)?.cloned() else {
        return Ok(None);
    };
    let t = root.dtype;
    if !t.is_float() {
        return Ok(None);
    }
    let mut env: HashMap<&str, String> = HashMap::from([(n.inputs[0].as_str(), "$0".into())]);
    let mut shape = root.shape.clone();
    for s in &n.chain {
        let Some(e) = chain_step(cx, s, t, &env, &mut shape)? else {
            return Ok(None);
        };
        if e.len() > 4096 {
            return Ok(None);
        }
        env.insert(s.outputs[0].as_str(), e);
    }
    let Some(expr) = n.outputs.first().and_then(|o| env.get(o.as_str())) else {
        return Ok(None);
    };
    let base: Vec<&str> = n.chain.iter().map(|s| s.op_type.as_str()).collect();
    let expr = expr.clone();
    let d = elementwise(cx, n, &base.join("_"), &[root], t, &expr)?;
    // A scalar constant of rank 1 broadcasts a rank-0 root to shape [1].
    Ok(Some(if shape == d.shape {
        d
    } else {
        let hint = format!("{}_b", d.name);
        cx.broadcast(&d, &shape, &hint)
    }))
}

/// The expression of one chain node `s` over the expressions `env` of its run-time operands.
fn chain_step(
    cx: &Cx,
    s: &Node,
    t: DType,
    env: &HashMap<&str, String>,
    shape: &mut Vec<usize>,
) -> R<Option<String>> {
    let mut ops = Vec::new();
    for (i, name) in s.inputs.iter().enumerate() {
        if let Some(e) = env.get(name.as_str()) {
            ops.push(format!("({e})"));
            continue;
        }
        if s.op_type == "Clip" && i > 0 {
            continue;
        }
        let Some(Val::Const(c)) = cx.opt(s, i)? else {
            return Ok(None);
        };
        let v = elem::to_f64s(&c.data);
        if c.dtype() != t || v.len() != 1 || c.shape.len() > 1 || !v[0].is_finite() {
            return Ok(None);
        }
        let Some(b) = broadcast_shapes(shape, &c.shape) else {
            return Ok(None);
        };
        *shape = b;
        ops.push(lit(v[0], t));
    }
    let Some(a) = ops.first().cloned() else {
        return Ok(None);
    };
    let sym = match s.op_type.as_str() {
        "Add" => "+",
        "Sub" => "-",
        "Mul" => "*",
        "Div" => "/",
        "Clip" => {
            let mut e = a;
            if let Some(lo) = clip_bound(cx, s, 1, "min")?.filter(|v| v.is_finite()) {
                e = format!("max({e}, {})", lit(lo, t));
            }
            if let Some(hi) = clip_bound(cx, s, 2, "max")?.filter(|v| v.is_finite()) {
                e = format!("min({e}, {})", lit(hi, t));
            }
            return Ok(Some(e));
        }
        _ => return Ok(Some(unary_expr(cx, s, t)?.replace("$0", &a))),
    };
    Ok(ops.get(1).map(|b| format!("{a} {sym} {b}")))
}
