//! Contractions and reductions: `MatMul` (numpy batching), `Gemm`, `Softmax`/`LogSoftmax`,
//! `LayerNormalization`, the `Reduce*` family, `ArgMax`/`ArgMin`, `CumSum`, `CumProd` and `TopK`. Kernels of a given rank
//! are written with one named index per dimension, so they read like the ONNX definitions.

use super::emit::lit;
use super::views::axes_of;
use super::{axis, broadcast_shapes, Cx, Val, R};
use crate::import::onnx::model::Node;
use tapc_runtime::{DType, Tensor};

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "MatMul" => matmul,
        "Gemm" => gemm,
        "Softmax" | "LogSoftmax" => softmax,
        "LayerNormalization" => layernorm,
        "ReduceMean" | "ReduceSum" | "ReduceMax" | "ReduceMin" | "ReduceProd"
        | "ReduceSumSquare" | "ReduceL2" | "ReduceL1" | "ReduceLogSum" | "ReduceLogSumExp" => {
            reduce
        }
        "ArgMax" | "ArgMin" => argmax,
        "CumSum" | "CumProd" => cumulative,
        "TopK" => topk,
        _ => return None,
    })
}

fn hint(n: &Node) -> String {
    n.outputs.first().cloned().unwrap_or_default()
}

fn matmul(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let mut a = cx.data(n, 0)?;
    let mut b = cx.data(n, 1)?;
    let h = hint(n);
    let (a1, b1) = (a.rank() == 1, b.rank() == 1);
    if a.rank() == 0 || b.rank() == 0 || a.dtype != b.dtype {
        return Err(cx.invalid(
            n,
            format!(
                "operands {:?} {} and {:?} {}",
                a.shape,
                a.dtype.name(),
                b.shape,
                b.dtype.name()
            ),
        ));
    }
    if a1 {
        a = cx.reshape(&a, &[1, a.shape[0]], &format!("{h}_a"));
    }
    if b1 {
        b = cx.reshape(&b, &[b.shape[0], 1], &format!("{h}_b"));
    }
    let (ra, rb) = (a.rank(), b.rank());
    let (m, k, k2, nn) = (
        a.shape[ra - 2],
        a.shape[ra - 1],
        b.shape[rb - 2],
        b.shape[rb - 1],
    );
    if k != k2 {
        return Err(cx.invalid(n, format!("inner dimensions {k} and {k2} differ")));
    }
    let t = a.dtype.name();
    let (text, batch) = if rb == 2 {
        let text = format!(
            "op @{{NAME}}(a: {t}[..B, M, K], w: {t}[K, N]) -> (y: {t}[..B, M, N]) {{\n  y[..b, m, n] = sum[k](a[..b, m, k] * w[k, n])\n}}"
        );
        (text, a.shape[..ra - 2].to_vec())
    } else {
        let batch = broadcast_shapes(&a.shape[..ra - 2], &b.shape[..rb - 2])
            .ok_or_else(|| cx.invalid(n, "batch dimensions do not broadcast"))?;
        let mut sa = batch.clone();
        sa.extend([m, k]);
        let mut sb = batch.clone();
        sb.extend([k, nn]);
        a = cx.broadcast(&a, &sa, &format!("{h}_a"));
        b = cx.broadcast(&b, &sb, &format!("{h}_b"));
        let text = format!(
            "op @{{NAME}}(a: {t}[..B, M, K], w: {t}[..B, K, N]) -> (y: {t}[..B, M, N]) {{\n  y[..b, m, n] = sum[k](a[..b, m, k] * w[..b, k, n])\n}}"
        );
        (text, batch)
    };
    let op = cx.e.op("MatMul", &text);
    let mut shape = batch.clone();
    shape.extend([m, nn]);
    let final_shape: Vec<usize> = {
        let mut s = batch;
        if !a1 {
            s.push(m);
        }
        if !b1 {
            s.push(nn);
        }
        s
    };
    let name = if final_shape == shape {
        h.clone()
    } else {
        format!("{h}_mm")
    };
    let y = cx.e.apply(&name, &op, &[], &[&a, &b], a.dtype, shape);
    Ok(vec![Val::Data(cx.reshape(&y, &final_shape, &h))])
}

fn gemm(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let h = hint(n);
    let mut a = cx.data(n, 0)?;
    let mut b = cx.data(n, 1)?;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(cx.invalid(n, "A and B must be matrices"));
    }
    if n.int("transA", 0) != 0 {
        a = cx.transpose(&a, &[1, 0], &format!("{h}_at"));
    }
    if n.int("transB", 0) != 0 {
        b = cx.transpose(&b, &[1, 0], &format!("{h}_bt"));
    }
    let (m, k, nn) = (a.shape[0], a.shape[1], b.shape[1]);
    if b.shape[0] != k {
        return Err(cx.invalid(n, format!("inner dimensions {k} and {} differ", b.shape[0])));
    }
    let t = a.dtype;
    let alpha = f64::from(n.float("alpha", 1.0));
    let beta = f64::from(n.float("beta", 1.0));
    let mut prod = "sum[k](a[m, k] * b[k, n])".to_string();
    if alpha != 1.0 {
        prod = format!("{prod} * {}", lit(alpha, t));
    }
    let tn = t.name();
    let c = match cx.opt(n, 2)? {
        Some(_) if beta != 0.0 => {
            let c = cx.data(n, 2)?;
            Some(cx.broadcast(&c, &[m, nn], &format!("{h}_c")))
        }
        _ => None,
    };
    let (ports, body) = match &c {
        Some(_) if beta != 1.0 => (
            format!(", c: {tn}[M, N]"),
            format!("{prod} + c[m, n] * {}", lit(beta, t)),
        ),
        Some(_) => (format!(", c: {tn}[M, N]"), format!("{prod} + c[m, n]")),
        None => (String::new(), prod),
    };
    let text = format!(
        "op @{{NAME}}(a: {tn}[M, K], b: {tn}[K, N]{ports}) -> (y: {tn}[M, N]) {{\n  y[m, n] = {body}\n}}"
    );
    let op = cx.e.op("Gemm", &text);
    let mut args = vec![&a, &b];
    if let Some(c) = &c {
        args.push(c);
    }
    Ok(vec![Val::Data(cx.e.apply(
        &h,
        &op,
        &[],
        &args,
        t,
        vec![m, nn],
    ))])
}

fn softmax(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let r = x.rank().max(1);
    let default = if n.opset < 13 { 1 } else { -1 };
    let a = axis(n.int("axis", default), r).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let s = if x.rank() == 0 {
        vec![1]
    } else {
        x.shape.clone()
    };
    let outer: usize = s[..a].iter().product();
    let (mid, inner) = if n.opset < 13 {
        (s[a..].iter().product(), 1)
    } else {
        (s[a], s[a + 1..].iter().product())
    };
    if !x.dtype.is_float() {
        return Err(cx.unsupported(n, format!("{} values", x.dtype.name())));
    }
    // Over the last axis (inner 1) the kernel is 2-D, so its rows are contiguous.
    let (shape, cd, ci) = if inner == 1 {
        (vec![outer, mid], "", "")
    } else {
        (vec![outer, mid, inner], ", C", ", c")
    };
    let xv = cx.reshape(&x, &shape, &format!("{h}_view"));
    let t = x.dtype.name();
    let last = if n.op_type == "Softmax" {
        format!("exp(x[a, i{ci}] - m[a{ci}]) / s[a{ci}]")
    } else {
        format!("x[a, i{ci}] - m[a{ci}] - log(s[a{ci}])")
    };
    let text = format!(
        "op @{{NAME}}(x: {t}[A, N{cd}]) -> (y: {t}[A, N{cd}]) {{\n  m[a{ci}] = max[j](x[a, j{ci}])\n  s[a{ci}] = sum[j](exp(x[a, j{ci}] - m[a{ci}]))\n  y[a, i{ci}] = {last}\n}}"
    );
    let op = cx.e.op(&n.op_type, &text);
    let y =
        cx.e.apply(&format!("{h}_view_y"), &op, &[], &[&xv], x.dtype, shape);
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}

fn layernorm(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let a = axis(n.int("axis", -1), x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let tail = x.shape[a..].to_vec();
    let (outer, inner): (usize, usize) = (x.shape[..a].iter().product(), tail.iter().product());
    let mut params = Vec::new();
    for (i, what) in [(1, "scale"), (2, "bias")] {
        let p = match cx.opt(n, i)? {
            Some(_) => cx.data(n, i)?,
            None => {
                let zeros = Tensor::zeros(x.dtype, tail.clone());
                cx.materialize(&format!("{h}_{what}"), &zeros)
            }
        };
        if broadcast_shapes(&p.shape, &tail).as_deref() != Some(&tail[..]) {
            return Err(cx.invalid(
                n,
                format!("{what} of shape {:?} for normalized dims {tail:?}", p.shape),
            ));
        }
        let p = cx.broadcast(&p, &tail, &format!("{h}_{what}"));
        params.push(cx.reshape(&p, &[inner], &format!("{h}_{what}_flat")));
    }
    let x2 = cx.reshape(&x, &[outer, inner], &format!("{h}_2d"));
    let t = x.dtype;
    let tn = t.name();
    let eps = lit(f64::from(n.float("epsilon", 1e-5)), t);
    let text = format!(
        "op @{{NAME}}(x: {tn}[M, N], g: {tn}[N], b: {tn}[N]) -> (y: {tn}[M, N]) {{\n  mu[i] = sum[j](x[i, j]) / {tn}(N)\n  var[i] = sum[j]((x[i, j] - mu[i]) * (x[i, j] - mu[i])) / {tn}(N)\n  y[i, j] = (x[i, j] - mu[i]) / sqrt(var[i] + {eps}) * g[j] + b[j]\n}}"
    );
    let op = cx.e.op("LayerNormalization", &text);
    let y = cx.e.apply(
        &format!("{h}_2d_y"),
        &op,
        &[],
        &[&x2, &params[0], &params[1]],
        t,
        vec![outer, inner],
    );
    let mut outs = vec![Val::Data(cx.reshape(&y, &x.shape, &h))];
    if n.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        let mut stat_shape = x.shape[..a].to_vec();
        stat_shape.resize(x.rank(), 1);
        for (k, what) in [(1, "mean"), (2, "inv_std_dev")] {
            let d = layernorm_stat(cx, &x2, &eps, what, &format!("{h}_{what}"));
            outs.push(Val::Data(cx.reshape(
                &d,
                &stat_shape,
                &super::views::out_hint(n, k),
            )));
        }
    }
    Ok(outs)
}

/// `LayerNormalization`'s Mean or InvStdDev output: per row of `x2` (`[M, N]`).
fn layernorm_stat(
    cx: &mut Cx,
    x2: &super::emit::D,
    eps: &str,
    what: &str,
    hint: &str,
) -> super::emit::D {
    let tn = x2.dtype.name();
    let last = match what {
        "mean" => "mu[i]".to_string(),
        _ => format!("1.0 / sqrt(sum[j]((x[i, j] - mu[i]) * (x[i, j] - mu[i])) / {tn}(N) + {eps})"),
    };
    let text = format!(
        "op @{{NAME}}(x: {tn}[M, N]) -> (y: {tn}[M]) {{\n  mu[i] = sum[j](x[i, j]) / {tn}(N)\n  y[i] = {last}\n}}"
    );
    let op = cx.e.op("LayerNormalization", &text);
    cx.e.apply(hint, &op, &[], &[x2], x2.dtype, vec![x2.shape[0]])
}

/// The reduced axes (sorted, distinct) of a `Reduce*` node over a rank-`r` input; `None` for
/// none (the identity under `noop_with_empty_axes`).
fn reduce_axes(cx: &Cx, n: &Node, r: usize) -> R<Option<Vec<usize>>> {
    let since = if n.op_type == "ReduceSum" { 13 } else { 18 };
    let axes = axes_of(cx, n, since)?.unwrap_or_default();
    if axes.is_empty() {
        return Ok((n.int("noop_with_empty_axes", 0) == 0).then(|| (0..r).collect()));
    }
    let mut out = Vec::new();
    for a in axes {
        out.push(axis(a, r).ok_or_else(|| cx.invalid(n, format!("axis {a} out of range")))?);
    }
    out.sort_unstable();
    out.dedup();
    Ok(Some(out))
}

fn reduce(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let Some(red) = reduce_axes(cx, n, x.rank())? else {
        return Ok(vec![Val::Data(x)]);
    };
    let t = x.dtype;
    let tn = t.name();
    let r = x.rank();
    let dims: Vec<String> = (0..r).map(|k| format!("X{k}")).collect();
    let idx: Vec<String> = (0..r)
        .map(|k| {
            if red.contains(&k) {
                format!("r{k}")
            } else {
                format!("i{k}")
            }
        })
        .collect();
    let kept: Vec<String> = (0..r)
        .filter(|k| !red.contains(k))
        .map(|k| idx[k].clone())
        .collect();
    let rvars: Vec<String> = red.iter().map(|&k| idx[k].clone()).collect();
    let xa = format!("x[{}]", idx.join(", "));
    let count: Vec<String> = red.iter().map(|&k| dims[k].clone()).collect();
    let count = format!(
        "{tn}({})",
        if count.is_empty() {
            "1".into()
        } else {
            count.join(" * ")
        }
    );
    let rv = rvars.join(", ");
    let body = match n.op_type.as_str() {
        "ReduceSum" => format!("sum[{rv}]({xa})"),
        "ReduceMean" => format!("sum[{rv}]({xa}) / {count}"),
        "ReduceMax" => format!("max[{rv}]({xa})"),
        "ReduceMin" => format!("min[{rv}]({xa})"),
        "ReduceProd" => format!("prod[{rv}]({xa})"),
        "ReduceSumSquare" => format!("sum[{rv}]({xa} * {xa})"),
        "ReduceL1" => format!("sum[{rv}](abs({xa}))"),
        "ReduceLogSum" => format!("log(sum[{rv}]({xa}))"),
        // Stabilised by the maximum, as a softmax's denominator.
        "ReduceLogSumExp" => format!(
            "m[{k}] + log(sum[{rv}](exp({xa} - m[{k}])))",
            k = kept.join(", ")
        ),
        _ => format!("sqrt(sum[{rv}]({xa} * {xa}))"),
    };
    if rvars.is_empty() {
        return Ok(vec![Val::Data(x)]);
    }
    let float_only = ["ReduceMean", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp"];
    if float_only.contains(&n.op_type.as_str()) && !t.is_float() {
        return Err(cx.unsupported(n, format!("{} of {tn} values", n.op_type)));
    }
    let out_dims: Vec<String> = (0..r)
        .filter(|k| !red.contains(k))
        .map(|k| dims[k].clone())
        .collect();
    let pre = match n.op_type.as_str() {
        "ReduceLogSumExp" => format!("  m[{}] = max[{rv}]({xa})\n", kept.join(", ")),
        _ => String::new(),
    };
    let text = format!(
        "op @{{NAME}}(x: {tn}[{}]) -> (y: {tn}[{}]) {{\n{pre}  y[{}] = {body}\n}}",
        dims.join(", "),
        out_dims.join(", "),
        kept.join(", ")
    );
    let op = cx.e.op(&n.op_type, &text);
    let shape: Vec<usize> = (0..r)
        .filter(|k| !red.contains(k))
        .map(|k| x.shape[k])
        .collect();
    let keep: Vec<usize> = (0..r)
        .map(|k| if red.contains(&k) { 1 } else { x.shape[k] })
        .collect();
    let keepdims = n.int("keepdims", 1) != 0;
    let name = if keepdims {
        format!("{h}_r")
    } else {
        h.clone()
    };
    let y = cx.e.apply(&name, &op, &[], &[&x], t, shape);
    if keepdims {
        return Ok(vec![Val::Data(cx.reshape(&y, &keep, &h))]);
    }
    Ok(vec![Val::Data(y)])
}

fn argmax(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let last = n.int("select_last_index", 0) != 0;
    let r = x.rank();
    let a = axis(n.int("axis", 0), r).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let dims: Vec<String> = (0..r).map(|k| format!("X{k}")).collect();
    let idx: Vec<String> = (0..r)
        .map(|k| if k == a { "k".into() } else { format!("i{k}") })
        .collect();
    let kept: Vec<String> = (0..r).filter(|&k| k != a).map(|k| idx[k].clone()).collect();
    let out_dims: Vec<String> = (0..r)
        .filter(|&k| k != a)
        .map(|k| dims[k].clone())
        .collect();
    let f = if n.op_type == "ArgMax" {
        "argmax"
    } else {
        "argmin"
    };
    let tn = x.dtype.name();
    // The last of equal values is the first one of the axis read backwards.
    let found = match last {
        true => format!("X{a} - 1 - {f}[k](x[{}])", idx.join(", ")),
        false => format!("{f}[k](x[{}])", idx.join(", ")),
    };
    let x = match last {
        true => cx.e.stmt(
            &format!("{h}_reversed"),
            &format!("reverse {} [{a}]", x.v()),
            x.dtype,
            x.shape.clone(),
        ),
        false => x,
    };
    let text = format!(
        "op @{{NAME}}(x: {tn}[{}]) -> (y: i64[{}]) {{\n  y[{}] = {found}\n}}",
        dims.join(", "),
        out_dims.join(", "),
        kept.join(", "),
    );
    let op = cx.e.op(&n.op_type, &text);
    let shape: Vec<usize> = (0..r).filter(|&k| k != a).map(|k| x.shape[k]).collect();
    let y =
        cx.e.apply(&format!("{h}_r"), &op, &[], &[&x], DType::I64, shape);
    if n.int("keepdims", 1) != 0 {
        let mut keep = x.shape.clone();
        keep[a] = 1;
        return Ok(vec![Val::Data(cx.reshape(&y, &keep, &h))]);
    }
    Ok(vec![Val::Data(y)])
}

/// `CumSum` along a constant axis: a contraction with a constant 0/1 matrix over an
/// `[outer, D, inner]` view, `y[o, i, q] = sum[j](x[o, j, q] * m[i, j])`, where `m[i, j]` is
/// 1 when `j <= i` (`j < i` with `exclusive`, mirrored with `reverse`). O(D²) per row, exact
/// for integers. `CumProd` is `prod[j](select(m[i, j] == 1, x[o, j, q], 1))` over the same `m`.
fn cumulative(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let ax = cx
        .ints_in(n, 1, "axis")?
        .filter(|v| v.len() == 1)
        .ok_or_else(|| cx.invalid(n, "input 1 (axis) is not one integer"))?;
    let a = axis(ax[0], x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    if x.dtype == DType::Bool {
        return Err(cx.unsupported(n, "a bool input"));
    }
    let (exclusive, reverse) = (n.int("exclusive", 0) != 0, n.int("reverse", 0) != 0);
    let d = x.shape[a];
    if d > MAX_SQUARE {
        return Err(too_long(cx, n, d));
    }
    let mut m = Vec::with_capacity(d * d);
    for i in 0..d {
        for j in 0..d {
            let (lo, hi) = if reverse { (i, j) } else { (j, i) };
            m.push(f64::from(u8::from(lo < hi || (lo == hi && !exclusive))));
        }
    }
    let m = Tensor::new(
        vec![d, d],
        crate::import::onnx::elem::from_f64s(x.dtype, &m),
    )
    .expect("a square matrix");
    let m = cx.materialize(&format!("{h}_tri"), &m);
    let x3 = cx.around_axis(&x, a, &format!("{h}_in"));
    let (outer, inner) = (x3.shape[0], x3.shape[2]);
    let t = x.dtype;
    let body = if n.op_type == "CumSum" {
        "sum[j](x[o, j, q] * m[i, j])".to_string()
    } else {
        let one = lit(1.0, t);
        format!("prod[j](select(m[i, j] == {one}, x[o, j, q], {one}))")
    };
    let tn = t.name();
    let text = format!(
        "op @{{NAME}}(x: {tn}[O, D, I], m: {tn}[D, D]) -> (y: {tn}[O, D, I]) {{\n  y[o, i, q] = {body}\n}}"
    );
    let op = cx.e.op(&n.op_type, &text);
    let y = cx.e.apply(
        &format!("{h}_y"),
        &op,
        &[],
        &[&x3, &m],
        x.dtype,
        vec![outer, d, inner],
    );
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}

/// `TopK` with a constant `k` by ranks: each element's rank along the axis is the number of
/// elements before it in the order (greater, or smaller for `largest = 0`; equal ones by index,
/// as onnxruntime orders them), `r[o, j, q] = sum[i](...)`; output position `p` picks the
/// element whose rank is `p` (values and indices alike). O(D²) per row; the result is sorted.
fn topk(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let k = match n.opset {
        o if o < 10 => n.int("k", 0),
        _ => cx
            .ints_in(n, 1, "k")?
            .filter(|v| v.len() == 1)
            .ok_or_else(|| cx.invalid(n, "input 1 (k) is not one integer"))?[0],
    };
    let a = axis(n.int("axis", -1), x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let d = x.shape[a];
    if k < 1 || k as usize > d || x.dtype == DType::Bool {
        return Err(cx.invalid(n, format!("k = {k} of an axis of {d} ({})", x.dtype.name())));
    }
    if d > MAX_SQUARE {
        return Err(too_long(cx, n, d));
    }
    let k = k as usize;
    let x3 = cx.around_axis(&x, a, &format!("{h}_in"));
    let (outer, inner) = (x3.shape[0], x3.shape[2]);
    let konst = |shape: Vec<usize>, v: Vec<i64>| {
        Tensor::new(shape, crate::import::onnx::elem::from_i64s(DType::I64, &v)).expect("sizes")
    };
    let before: Vec<i64> = (0..d * d).map(|f| i64::from(f / d < f % d)).collect();
    let before = cx.materialize(&format!("{h}_before"), &konst(vec![d, d], before));
    let cmp = if n.int("largest", 1) != 0 { ">" } else { "<" };
    let t = x.dtype.name();
    let text = format!(
        "op @{{NAME}}(x: {t}[O, D, Q], b: i64[D, D]) -> (r: i64[O, D, Q]) {{\n  r[o, j, q] = sum[i](select(x[o, i, q] {cmp} x[o, j, q], 1, select(x[o, i, q] == x[o, j, q], b[i, j], 0)))\n}}"
    );
    let op = cx.e.op("TopKRank", &text);
    let r = cx.e.apply(
        &format!("{h}_rank"),
        &op,
        &[],
        &[&x3, &before],
        DType::I64,
        x3.shape.clone(),
    );
    let pos = cx.materialize(
        &format!("{h}_pos"),
        &konst(vec![k], (0..k as i64).collect()),
    );
    let ids = cx.materialize(
        &format!("{h}_ids"),
        &konst(vec![d, 1], (0..d as i64).collect()),
    );
    let ids = cx.broadcast(&ids, &[outer, d, inner], &format!("{h}_ids_all"));
    let mut shape = x.shape.clone();
    shape[a] = k;
    let mut outs = Vec::new();
    for (src, what) in [(&x3, "values"), (&ids, "indices")] {
        let t = src.dtype.name();
        let zero = lit(0.0, src.dtype);
        let text = format!(
            "op @{{NAME}}(x: {t}[O, D, Q], r: i64[O, D, Q], pos: i64[K]) -> (y: {t}[O, K, Q]) {{\n  y[o, p, q] = sum[j](select(r[o, j, q] == pos[p], x[o, j, q], {zero}))\n}}"
        );
        let op = cx.e.op("TopKPick", &text);
        let name = n.outputs.get(outs.len()).cloned().unwrap_or_default();
        let y = cx.e.apply(
            &format!("{name}_{what}"),
            &op,
            &[],
            &[src, &r, &pos],
            src.dtype,
            vec![outer, k, inner],
        );
        outs.push(Val::Data(cx.reshape(&y, &shape, &name)));
    }
    Ok(outs)
}

/// The longest axis `CumSum` and `TopK` lower (they build a D×D table at import).
const MAX_SQUARE: usize = 4096;

fn too_long(cx: &Cx, n: &Node, d: usize) -> crate::diag::Diagnostic {
    cx.unsupported(
        n,
        format!("an axis of {d} (the O(D²) lowering takes at most {MAX_SQUARE})"),
    )
}
