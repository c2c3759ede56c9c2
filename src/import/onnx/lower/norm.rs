//! Row-wise operators over one axis or the trailing axes: `RMSNormalization`,
//! `LpNormalization` and `Hardmax`, each one kernel over a `[outer, axis, inner]` (or
//! `[outer, inner]`) view of its input; `GroupNormalization` and `InstanceNormalization` (its
//! groups of one channel) over an `[N, groups, channels per group, spatial]` view.

use super::emit::{lit, D};
use super::views::out_hint;
use super::{axis, broadcast_shapes, Cx, Val, R};
use crate::import::onnx::model::Node;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "RMSNormalization" => rms_norm,
        "InstanceNormalization" | "GroupNormalization" => group_norm,
        "LpNormalization" | "Hardmax" => along_axis,
        _ => return None,
    })
}

/// `y = x / sqrt(mean(x²) + eps) * scale` over the axes from `axis` on.
fn rms_norm(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    if !x.dtype.is_float() {
        return Err(cx.unsupported(n, format!("{} values", x.dtype.name())));
    }
    let h = out_hint(n, 0);
    let a = axis(n.int("axis", -1), x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let tail = x.shape[a..].to_vec();
    let (outer, inner): (usize, usize) = (x.shape[..a].iter().product(), tail.iter().product());
    let g = cx.data(n, 1)?;
    if broadcast_shapes(&g.shape, &tail).as_deref() != Some(&tail[..]) {
        let msg = format!("scale of shape {:?} for normalized dims {tail:?}", g.shape);
        return Err(cx.invalid(n, msg));
    }
    let g = cx.broadcast(&g, &tail, &format!("{h}_scale"));
    let g = cx.reshape(&g, &[inner], &format!("{h}_scale_flat"));
    let x2 = cx.reshape(&x, &[outer, inner], &format!("{h}_2d"));
    let tn = x.dtype.name();
    let eps = lit(f64::from(n.float("epsilon", 1e-5)), x.dtype);
    let text = format!(
        "op @{{NAME}}(x: {tn}[M, N], g: {tn}[N]) -> (y: {tn}[M, N]) {{\n  ms[i] = sum[j](x[i, j] * x[i, j]) / {tn}(N)\n  y[i, j] = x[i, j] / sqrt(ms[i] + {eps}) * g[j]\n}}"
    );
    let op = cx.e.op("RMSNormalization", &text);
    let y = cx.e.apply(
        &format!("{h}_2d_y"),
        &op,
        &[],
        &[&x2, &g],
        x.dtype,
        vec![outer, inner],
    );
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}

/// `LpNormalization` (p = 1 or 2) and `Hardmax` (1 at the first greatest value) along one axis.
fn along_axis(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    if !x.dtype.is_float() || x.rank() == 0 {
        return Err(cx.unsupported(n, format!("{} values of rank {}", x.dtype.name(), x.rank())));
    }
    if n.op_type == "Hardmax" && n.opset < 13 {
        return Err(cx.unsupported(n, "opset < 13 (the input coerced to 2-D)"));
    }
    let h = out_hint(n, 0);
    let a = axis(n.int("axis", -1), x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let xv = cx.around_axis(&x, a, &format!("{h}_view"));
    let shape = xv.shape.clone();
    let (base, body) = match n.op_type.as_str() {
        "Hardmax" => ("Hardmax", hardmax_body(&xv)),
        _ => ("LpNormalization", lp_body(cx, n)?),
    };
    let tn = x.dtype.name();
    let text = format!("op @{{NAME}}(x: {tn}[A, N, C]) -> (y: {tn}[A, N, C]) {{\n{body}}}");
    let op = cx.e.op(base, &text);
    let y =
        cx.e.apply(&format!("{h}_view_y"), &op, &[], &[&xv], x.dtype, shape);
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}

fn lp_body(cx: &Cx, n: &Node) -> R<String> {
    let norm = match n.int("p", 2) {
        1 => "sum[j](abs(x[a, j, c]))",
        2 => "sqrt(sum[j](x[a, j, c] * x[a, j, c]))",
        p => return Err(cx.invalid(n, format!("p = {p} (1 or 2)"))),
    };
    // A zero norm gives zeros, as the ONNX reference does.
    Ok(format!(
        "  s[a, c] = {norm}\n  y[a, i, c] = select(s[a, c] == 0.0, 0.0, x[a, i, c] / s[a, c])\n"
    ))
}

fn hardmax_body(x: &D) -> String {
    let (one, zero) = (lit(1.0, x.dtype), lit(0.0, x.dtype));
    format!(
        "  m[a, c] = argmax[j](x[a, j, c])\n  y[a, i, c] = select(m[a, c] == i, {one}, {zero})\n"
    )
}

/// `InstanceNormalization` and `GroupNormalization`: per batch and group, the mean and variance
/// over the group's channels and spatial positions, then the per-channel scale and bias
/// (`GroupNormalization` before opset 21: per group), rounded in the reference's order.
fn group_norm(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = out_hint(n, 0);
    let c = x.shape.get(1).copied().unwrap_or(0);
    let groups = match n.op_type.as_str() {
        "InstanceNormalization" => c,
        _ => n.int("num_groups", 0).max(0) as usize,
    };
    if !x.dtype.is_float() || x.rank() < 2 || groups == 0 || c % groups != 0 {
        let msg = format!("{} input {:?} in {groups} groups", x.dtype.name(), x.shape);
        return Err(cx.invalid(n, msg));
    }
    let (cg, sp) = (c / groups, x.shape[2..].iter().product::<usize>());
    let mut params = Vec::new();
    for (i, what) in [(1, "scale"), (2, "bias")] {
        let p = cx.data(n, i)?;
        let per_group = n.op_type == "GroupNormalization" && p.shape == [groups] && cg > 1;
        let p = match (p.shape == [c], per_group) {
            (true, _) => cx.reshape(&p, &[groups, cg], &format!("{h}_{what}")),
            (false, true) => {
                let p2 = cx.reshape(&p, &[groups, 1], &format!("{h}_{what}_g"));
                cx.broadcast(&p2, &[groups, cg], &format!("{h}_{what}"))
            }
            _ => {
                return Err(cx.invalid(n, format!("{what} of shape {:?} for {c} channels", p.shape)))
            }
        };
        params.push(p);
    }
    let x4 = cx.reshape(&x, &[x.shape[0], groups, cg, sp], &format!("{h}_groups"));
    let tn = x.dtype.name();
    let eps = lit(f64::from(n.float("epsilon", 1e-5)), x.dtype);
    let (xc, at) = ("(x[n, q, c, s] - mu[n, q])", "[n, q]");
    let y = match n.op_type.as_str() {
        "InstanceNormalization" => format!("g[q, c] * {xc} / sqrt(var{at} + {eps}) + b[q, c]"),
        _ => format!("g[q, c] * ({xc} / sqrt(var{at} + {eps})) + b[q, c]"),
    };
    let text = format!(
        "op @{{NAME}}(x: {tn}[N, G, C, S], g: {tn}[G, C], b: {tn}[G, C]) -> (y: {tn}[N, G, C, S]) {{\n  mu{at} = sum[c, s](x[n, q, c, s]) / {tn}(C * S)\n  var{at} = sum[c, s]({xc} * {xc}) / {tn}(C * S)\n  y[n, q, c, s] = {y}\n}}"
    );
    let op = cx.e.op(&n.op_type, &text);
    let shape = x4.shape.clone();
    let y = cx.e.apply(
        &format!("{h}_groups_y"),
        &op,
        &[],
        &[&x4, &params[0], &params[1]],
        x.dtype,
        shape,
    );
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}
