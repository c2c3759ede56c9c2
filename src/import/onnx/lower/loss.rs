//! Classification losses: `NegativeLogLikelihoodLoss` and `SoftmaxCrossEntropyLoss` (a
//! log-softmax over the class axis, then the same loss). Both work on `[N, C, D]` views of the
//! scores (`D` the product of the trailing dims) and `[N, D]` views of the targets: one kernel
//! gathers each point's loss `-x[n, t[n, d], d] · w[t[n, d]]` (0 at `ignore_index`, whose
//! target is first replaced by class 0 so the gather stays in range), a second one reduces
//! (`sum`, or `mean`: divided by the sum of the gathered weights).

use super::emit::{lit, D};
use super::views::out_hint;
use super::{Cx, Val, R};
use crate::import::onnx::model::Node;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "NegativeLogLikelihoodLoss" | "SoftmaxCrossEntropyLoss" => loss,
        _ => return None,
    })
}

/// The operands on their `[N, C, D]` / `[N, D]` views.
struct Views {
    x: D,
    t: D,
    w: Option<D>,
    /// The targets' own shape (the unreduced loss's).
    t_shape: Vec<usize>,
}

fn loss(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = views(cx, n)?;
    let h = out_hint(n, 0);
    let mut outs = Vec::new();
    let x = match n.op_type.as_str() {
        "SoftmaxCrossEntropyLoss" => {
            let lp = log_softmax(cx, &v.x, &format!("{h}_log_prob"));
            outs.push(lp.clone());
            lp
        }
        _ => v.x.clone(),
    };
    let ignore = n.attr("ignore_index").map(|_| n.int("ignore_index", 0));
    let t = match ignore {
        Some(i) => in_range_targets(cx, &v.t, i, &format!("{h}_target")),
        None => v.t.clone(),
    };
    let (l, ws) = point_losses(cx, [&x, &v.t, &t], v.w.as_ref(), ignore, &h);
    let y = match n.string("reduction").as_deref().unwrap_or("mean") {
        "none" => cx.reshape(&l, &v.t_shape, &h),
        "sum" => reduce(cx, &l, None, &h),
        "mean" => reduce(cx, &l, Some(&ws), &h),
        r => return Err(cx.invalid(n, format!("reduction `{r}`"))),
    };
    let mut vals = vec![Val::Data(y)];
    if let (Some(lp), Some(name)) = (outs.pop(), n.outputs.get(1).filter(|o| !o.is_empty())) {
        let shape = cx.data(n, 0)?.shape;
        vals.push(Val::Data(cx.reshape(&lp, &shape, name)));
    }
    Ok(vals)
}

fn views(cx: &mut Cx, n: &Node) -> R<Views> {
    let x = cx.data(n, 0)?;
    let t = cx.data(n, 1)?;
    let w = match cx.opt(n, 2)? {
        Some(_) => Some(cx.data(n, 2)?),
        None => None,
    };
    let ok = x.rank() >= 2
        && x.dtype.is_float()
        && t.dtype.is_int()
        && t.rank() + 1 == x.rank()
        && t.shape[0] == x.shape[0]
        && t.shape[1..] == x.shape[2..]
        && w.as_ref()
            .is_none_or(|w| w.shape == [x.shape[1]] && w.dtype == x.dtype);
    if !ok {
        let msg = format!(
            "scores {:?}, targets {:?}, weights {:?}",
            x.shape,
            t.shape,
            w.as_ref().map(|w| &w.shape)
        );
        return Err(cx.invalid(n, msg));
    }
    let h = out_hint(n, 0);
    let x = cx.around_axis(&x, 1, &format!("{h}_scores"));
    Ok(Views {
        t: cx.reshape(&t, &[x.shape[0], x.shape[2]], &format!("{h}_targets")),
        x,
        w,
        t_shape: t.shape.clone(),
    })
}

/// `y[n, c, d] = x[n, c, d] - m[n, d] - log(s[n, d])` over the classes `c`.
fn log_softmax(cx: &mut Cx, x: &D, hint: &str) -> D {
    let t = x.dtype.name();
    let text = format!(
        "op @{{NAME}}(x: {t}[N, C, D]) -> (y: {t}[N, C, D]) {{\n  m[n, d] = max[j](x[n, j, d])\n  s[n, d] = sum[j](exp(x[n, j, d] - m[n, d]))\n  y[n, c, d] = x[n, c, d] - m[n, d] - log(s[n, d])\n}}"
    );
    let op = cx.e.op("LogSoftmax", &text);
    cx.e.apply(hint, &op, &[], &[x], x.dtype, x.shape.clone())
}

/// The targets with `ignore` replaced by class 0 (its loss is masked separately).
fn in_range_targets(cx: &mut Cx, t: &D, ignore: i64, hint: &str) -> D {
    let tn = t.dtype.name();
    let text = format!(
        "op @{{NAME}}(t: {tn}[N, D]) -> (y: {tn}[N, D]) {{\n  y[n, d] = select(t[n, d] == {}, {}, t[n, d])\n}}",
        lit(ignore as f64, t.dtype),
        lit(0.0, t.dtype),
    );
    let op = cx.e.op("IgnoreIndex", &text);
    cx.e.apply(hint, &op, &[], &[t], t.dtype, t.shape.clone())
}

/// Each point's loss and weight (both 0 at `ignore`): `[N, D]` each.
fn point_losses(
    cx: &mut Cx,
    [x, t, tc]: [&D; 3],
    w: Option<&D>,
    ignore: Option<i64>,
    h: &str,
) -> (D, D) {
    let ft = x.dtype;
    let (f, tn) = (ft.name(), t.dtype.name());
    let weight = match w {
        Some(_) => "w[tc[n, d]]".to_string(),
        None => lit(1.0, ft),
    };
    let keep = match ignore {
        Some(i) => format!("t[n, d] != {}", lit(i as f64, t.dtype)),
        None => "true".into(),
    };
    let zero = lit(0.0, ft);
    let mut ports = format!("x: {f}[N, C, D], t: {tn}[N, D], tc: {tn}[N, D]");
    let mut args = vec![x, t, tc];
    if let Some(w) = w {
        ports.push_str(&format!(", w: {f}[C]"));
        args.push(w);
    }
    let mut result = Vec::new();
    for (what, value) in [
        ("loss", format!("-(x[n, tc[n, d], d] * {weight})")),
        ("weight", weight.clone()),
    ] {
        let text = format!(
            "op @{{NAME}}({ports}) -> (y: {f}[N, D]) {{\n  y[n, d] = select({keep}, {value}, {zero})\n}}"
        );
        let op = cx.e.op(&format!("Point_{what}"), &text);
        result.push(cx.e.apply(&format!("{h}_{what}"), &op, &[], &args, ft, t.shape.clone()));
    }
    let weight = result.pop().expect("two results");
    (result.pop().expect("two results"), weight)
}

/// The sum of the point losses, divided by the sum of the weights for `mean`.
fn reduce(cx: &mut Cx, l: &D, ws: Option<&D>, hint: &str) -> D {
    let f = l.dtype.name();
    let (ports, value) = match ws {
        Some(_) => (
            format!("l: {f}[N, D], w: {f}[N, D]"),
            "sum[n, d](l[n, d]) / sum[n, d](w[n, d])",
        ),
        None => (format!("l: {f}[N, D]"), "sum[n, d](l[n, d])"),
    };
    let text = format!("op @{{NAME}}({ports}) -> (y: {f}[]) {{\n  y[] = {value}\n}}");
    let op = cx.e.op("Reduction", &text);
    let args: Vec<&D> = [Some(l), ws].into_iter().flatten().collect();
    cx.e.apply(hint, &op, &[], &args, l.dtype, vec![])
}
