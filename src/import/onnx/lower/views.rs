//! View operators: `Reshape`, `Flatten`, `Squeeze`, `Unsqueeze`, `Transpose`, `Slice`, `Split`,
//! `Concat`, `Expand`, `Pad`, `Gather` and `Tile`. On run-time values each is one TEG selector (a
//! `Gather` of run-time indices is a gather kernel); on constants (shape glue) the same index
//! map is evaluated at import.

use super::emit::{list, lit, D};
use super::fold::{all_const, broadcast_index, each_coord};
use super::{axis, broadcast_shapes, Cx, Val, R};
use crate::import::onnx::elem;
use crate::import::onnx::model::Node;
use tapc_runtime::Tensor;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "Reshape" => reshape,
        "Flatten" => flatten,
        "Squeeze" => squeeze,
        "Unsqueeze" => unsqueeze,
        "Transpose" => transpose,
        "Slice" => slice,
        "Split" => split,
        "Concat" => concat,
        "Expand" => expand,
        "Pad" => pad,
        "Gather" => gather,
        "Tile" => tile,
        _ => return None,
    })
}

/// One axis of a slice: first index, step, count.
#[derive(Clone, Copy, Debug)]
pub(super) struct Range1 {
    start: i64,
    step: i64,
    count: usize,
}

/// A view of one operand.
pub(super) enum View {
    Reshape(Vec<usize>),
    Transpose(Vec<usize>),
    Slice(Vec<Range1>),
    Broadcast(Vec<usize>),
}

impl View {
    fn shape(&self, input: &[usize]) -> Vec<usize> {
        match self {
            View::Reshape(s) | View::Broadcast(s) => s.clone(),
            View::Transpose(p) => p.iter().map(|&i| input[i]).collect(),
            View::Slice(r) => r.iter().map(|r| r.count).collect(),
        }
    }
    /// For each output element, the flat index of the input element it reads.
    fn index(&self, input: &[usize]) -> Vec<usize> {
        let out = self.shape(input);
        let mut strides = vec![1usize; input.len()];
        for i in (0..input.len().saturating_sub(1)).rev() {
            strides[i] = strides[i + 1] * input[i + 1];
        }
        let at = |coord: &[usize]| -> usize {
            match self {
                View::Transpose(p) => coord.iter().zip(p).map(|(c, &pi)| c * strides[pi]).sum(),
                View::Slice(r) => coord
                    .iter()
                    .zip(r)
                    .zip(&strides)
                    .map(|((&c, r), s)| (r.start + c as i64 * r.step) as usize * s)
                    .sum(),
                _ => 0,
            }
        };
        match self {
            View::Reshape(_) => (0..out.iter().product()).collect(),
            View::Broadcast(_) => broadcast_index(input, &out),
            _ => each_coord(&out, at),
        }
    }
    /// The selector text over `d`.
    fn teg(&self, d: &D) -> String {
        match self {
            View::Reshape(s) => format!("reshape {} {}", d.v(), list(s)),
            View::Broadcast(s) => format!("broadcast {} {}", d.v(), list(s)),
            View::Transpose(p) => format!("transpose {} {}", d.v(), list(p)),
            View::Slice(r) => {
                let parts: Vec<String> = r
                    .iter()
                    .zip(&d.shape)
                    .map(|(r, &dim)| slice_text(r, dim))
                    .collect();
                format!("slice {} [{}]", d.v(), parts.join(", "))
            }
        }
    }
}

/// Every element of every axis of `shape`.
fn whole(shape: &[usize]) -> Vec<Range1> {
    shape
        .iter()
        .map(|&d| Range1 {
            start: 0,
            step: 1,
            count: d,
        })
        .collect()
}

/// `start:stop:step` for TEG (a negative stop would be read from the end, so it is left out).
fn slice_text(r: &Range1, dim: usize) -> String {
    if r.count == 0 {
        return "0:0".into();
    }
    // Just past the last element selected (the range may not leave the dimension).
    let last = r.start + (r.count as i64 - 1) * r.step;
    let stop = if r.step > 0 { last + 1 } else { last - 1 };
    match (r.step, stop < 0) {
        (1, _) if r.start == 0 && r.count == dim => ":".into(),
        (1, _) => format!("{}:{stop}", r.start),
        (_, true) => format!("{}::{}", r.start, r.step),
        _ => format!("{}:{stop}:{}", r.start, r.step),
    }
}

/// `v` seen through `view`: folded when constant, a selector otherwise.
pub(super) fn apply_view(cx: &mut Cx, hint: &str, v: &Val, view: &View) -> Val {
    match v {
        Val::Const(t) => {
            let shape = view.shape(&t.shape);
            let data = match view {
                View::Reshape(_) => t.data.clone(),
                _ => elem::pick(&t.data, &view.index(&t.shape)),
            };
            Val::Const(Tensor { shape, data })
        }
        Val::Data(d) => {
            if let (View::Reshape(s) | View::Broadcast(s), true) = (view, true) {
                if *s == d.shape {
                    return Val::Data(d.clone());
                }
            }
            let shape = view.shape(&d.shape);
            let rhs = view.teg(d);
            Val::Data(cx.e.stmt(hint, &rhs, d.dtype, shape))
        }
    }
}

/// The node's single output: `v` seen through `view`.
fn one_view(cx: &mut Cx, n: &Node, v: &Val, view: View) -> R<Vec<Val>> {
    Ok(vec![apply_view(cx, &out_hint(n, 0), v, &view)])
}

pub(super) fn out_hint(n: &Node, k: usize) -> String {
    n.outputs.get(k).cloned().unwrap_or_default()
}

/// Reshapes input 0 of `n` to `shape` (checking the element count).
fn reshape_to(cx: &mut Cx, n: &Node, shape: Vec<usize>) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let have: usize = v.shape().iter().product();
    if shape.iter().product::<usize>() != have {
        return Err(cx.invalid(n, format!("cannot reshape {:?} to {shape:?}", v.shape())));
    }
    one_view(cx, n, &v, View::Reshape(shape))
}

fn reshape(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let spec = match cx.ints_in(n, 1, "shape")? {
        Some(s) => s,
        None if n.opset < 5 => n.ints("shape").unwrap_or_default(),
        None => return Err(cx.invalid(n, "input 1 (the shape) is missing")),
    };
    let input = cx.val(n, 0)?.shape().to_vec();
    let allowzero = n.int("allowzero", 0) != 0;
    let mut shape = Vec::new();
    let mut infer = None;
    for (i, &s) in spec.iter().enumerate() {
        match s {
            0 if !allowzero => shape.push(
                *input
                    .get(i)
                    .ok_or_else(|| cx.invalid(n, "0 past the input's rank"))?,
            ),
            -1 if infer.is_none() => {
                infer = Some(i);
                shape.push(1);
            }
            s if s >= 0 => shape.push(s as usize),
            _ => return Err(cx.invalid(n, format!("bad shape {spec:?}"))),
        }
    }
    if let Some(i) = infer {
        let known: usize = shape.iter().product();
        let total: usize = input.iter().product();
        if known == 0 || !total.is_multiple_of(known) {
            return Err(cx.invalid(n, format!("cannot reshape {input:?} to {spec:?}")));
        }
        shape[i] = total / known;
    }
    reshape_to(cx, n, shape)
}

fn flatten(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let input = cx.val(n, 0)?.shape().to_vec();
    let a = n.int("axis", 1);
    let a = if a < 0 { a + input.len() as i64 } else { a };
    if a < 0 || a > input.len() as i64 {
        return Err(cx.invalid(n, format!("axis {a} out of range")));
    }
    let (l, r) = input.split_at(a as usize);
    reshape_to(cx, n, vec![l.iter().product(), r.iter().product()])
}

/// The `axes` of `Squeeze`/`Unsqueeze`/`Reduce*`: an attribute before `opset`, input 1 after.
pub(super) fn axes_of(cx: &Cx, n: &Node, since: i64) -> R<Option<Vec<i64>>> {
    if n.opset < since {
        Ok(n.ints("axes"))
    } else {
        cx.ints_in(n, 1, "axes")
    }
}

fn squeeze(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let input = cx.val(n, 0)?.shape().to_vec();
    let axes = axes_of(cx, n, 13)?;
    let mut drop = vec![false; input.len()];
    match axes {
        None => (0..input.len()).for_each(|i| drop[i] = input[i] == 1),
        Some(a) => {
            for x in a {
                let i = axis(x, input.len())
                    .ok_or_else(|| cx.invalid(n, format!("axis {x} out of range")))?;
                if input[i] != 1 {
                    return Err(cx.invalid(n, format!("axis {x} has size {}", input[i])));
                }
                drop[i] = true;
            }
        }
    }
    let shape = input
        .iter()
        .zip(&drop)
        .filter(|(_, d)| !**d)
        .map(|(s, _)| *s)
        .collect();
    reshape_to(cx, n, shape)
}

fn unsqueeze(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let input = cx.val(n, 0)?.shape().to_vec();
    let axes = axes_of(cx, n, 13)?.ok_or_else(|| cx.invalid(n, "no axes"))?;
    let r = input.len() + axes.len();
    let mut ones = vec![false; r];
    for x in axes {
        let i = axis(x, r).ok_or_else(|| cx.invalid(n, format!("axis {x} out of range")))?;
        ones[i] = true;
    }
    let mut it = input.iter();
    let shape = ones
        .iter()
        .map(|&o| if o { 1 } else { *it.next().unwrap_or(&1) })
        .collect();
    reshape_to(cx, n, shape)
}

fn transpose(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let r = v.shape().len();
    let perm: Vec<usize> = match n.ints("perm") {
        None => (0..r).rev().collect(),
        Some(p) => p.iter().map(|&x| axis(x, r).unwrap_or(r)).collect(),
    };
    let mut seen = perm.clone();
    seen.sort_unstable();
    if seen != (0..r).collect::<Vec<_>>() {
        return Err(cx.invalid(n, format!("perm {perm:?} is not a permutation of 0..{r}")));
    }
    if let Val::Data(d) = &v {
        return Ok(vec![Val::Data(cx.transpose(d, &perm, &out_hint(n, 0)))]);
    }
    one_view(cx, n, &v, View::Transpose(perm))
}

/// ONNX's clamping of one slice axis of size `dim`.
fn range1(start: i64, end: i64, step: i64, dim: usize) -> Range1 {
    let d = dim as i64;
    let norm = |v: i64| if v < 0 { v.saturating_add(d) } else { v };
    let (s, e) = if step > 0 {
        (norm(start).clamp(0, d), norm(end).clamp(0, d))
    } else {
        (norm(start).clamp(-1, d - 1), norm(end).clamp(-1, d - 1))
    };
    let count = if step > 0 {
        (e - s + step - 1) / step
    } else {
        (s - e + (-step) - 1) / (-step)
    };
    let count = count.max(0) as usize;
    Range1 {
        start: if count == 0 { 0 } else { s },
        step,
        count,
    }
}

fn slice(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let shape = v.shape().to_vec();
    let (starts, ends, axes, steps) = if n.opset < 10 {
        (
            n.ints("starts").unwrap_or_default(),
            n.ints("ends").unwrap_or_default(),
            n.ints("axes"),
            None,
        )
    } else {
        let need = |i, w| {
            cx.ints_in(n, i, w)?
                .ok_or_else(|| cx.invalid(n, format!("no {w}")))
        };
        (
            need(1, "starts")?,
            need(2, "ends")?,
            cx.ints_in(n, 3, "axes")?,
            cx.ints_in(n, 4, "steps")?,
        )
    };
    let axes = axes.unwrap_or_else(|| (0..starts.len() as i64).collect());
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if ends.len() != starts.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        return Err(cx.invalid(n, "starts, ends, axes and steps differ in length"));
    }
    let mut ranges = whole(&shape);
    for k in 0..starts.len() {
        let a = axis(axes[k], shape.len())
            .ok_or_else(|| cx.invalid(n, format!("axis {} out of range", axes[k])))?;
        if steps[k] == 0 {
            return Err(cx.invalid(n, "a step of 0"));
        }
        ranges[a] = range1(starts[k], ends[k], steps[k], shape[a]);
    }
    one_view(cx, n, &v, View::Slice(ranges))
}

fn split(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let shape = v.shape().to_vec();
    let a =
        axis(n.int("axis", 0), shape.len()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let k = n.outputs.len();
    let sizes = if n.opset < 13 {
        n.ints("split")
    } else {
        cx.ints_in(n, 1, "split")?
    };
    let sizes: Vec<usize> = match sizes {
        Some(s) => s.iter().map(|&x| x.max(0) as usize).collect(),
        None => {
            let parts = if n.opset >= 18 {
                n.int("num_outputs", k as i64).max(1) as usize
            } else {
                k
            };
            let each = shape[a].div_ceil(parts);
            (0..parts)
                .map(|i| each.min(shape[a].saturating_sub(i * each)))
                .collect()
        }
    };
    if sizes.iter().sum::<usize>() != shape[a] || sizes.len() != k {
        return Err(cx.invalid(
            n,
            format!("split sizes {sizes:?} do not cover axis {a} of {shape:?} in {k} outputs"),
        ));
    }
    let mut outs = Vec::new();
    let mut at = 0;
    for (i, &s) in sizes.iter().enumerate() {
        let mut r = whole(&shape);
        r[a] = Range1 {
            start: at as i64,
            step: 1,
            count: s,
        };
        at += s;
        outs.push(apply_view(cx, &out_hint(n, i), &v, &View::Slice(r)));
    }
    Ok(outs)
}

fn concat(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let first = cx.val(n, 0)?.shape().to_vec();
    let a =
        axis(n.int("axis", 0), first.len()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let mut shape = first.clone();
    shape[a] = 0;
    let mut vals = Vec::new();
    for i in 0..n.inputs.len() {
        let v = cx.val(n, i)?.clone();
        let s = v.shape();
        let agrees = s.len() == first.len() && (0..s.len()).all(|d| d == a || s[d] == first[d]);
        if !agrees {
            return Err(cx.invalid(
                n,
                format!("operand shapes {first:?} and {s:?} differ off axis {a}"),
            ));
        }
        shape[a] += s[a];
        vals.push(v);
    }
    if all_const(cx, n)? {
        return Ok(vec![Val::Const(concat_const(&vals, a, &shape))]);
    }
    let mut ds = Vec::new();
    for i in 0..n.inputs.len() {
        let d = cx.data(n, i)?;
        if d.shape[a] > 0 {
            ds.push(d.v());
        }
    }
    let dtype = vals[0].dtype();
    if ds.len() == 1 {
        let d = cx.data(n, 0)?;
        return Ok(vec![Val::Data(d)]);
    }
    let rhs = format!("concat {} axis {a}", ds.join(", "));
    Ok(vec![Val::Data(cx.e.stmt(
        &out_hint(n, 0),
        &rhs,
        dtype,
        shape,
    ))])
}

/// Constants concatenated along `a`.
fn concat_const(vals: &[Val], a: usize, shape: &[usize]) -> Tensor {
    let ts: Vec<&Tensor> = vals
        .iter()
        .filter_map(|v| if let Val::Const(t) = v { Some(t) } else { None })
        .collect();
    let outer: usize = shape[..a].iter().product();
    let mut idx = Vec::new();
    let mut offs = Vec::new();
    let mut total = 0;
    for t in &ts {
        offs.push(total);
        total += t.data.len();
    }
    for o in 0..outer {
        for (t, off) in ts.iter().zip(&offs) {
            let inner: usize = t.shape[a..].iter().product();
            idx.extend((0..inner).map(|k| off + o * inner + k));
        }
    }
    let mut joined = ts[0].data.clone();
    for t in &ts[1..] {
        joined = elem::join(&joined, &t.data);
    }
    Tensor {
        shape: shape.to_vec(),
        data: elem::pick(&joined, &idx),
    }
}

fn expand(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let spec = cx
        .ints_in(n, 1, "shape")?
        .ok_or_else(|| cx.invalid(n, "no shape"))?;
    if spec.iter().any(|&d| d < 0) {
        return Err(cx.invalid(n, format!("negative dimension in {spec:?}")));
    }
    let spec: Vec<usize> = spec.iter().map(|&d| d as usize).collect();
    let shape = broadcast_shapes(v.shape(), &spec)
        .ok_or_else(|| cx.invalid(n, format!("{:?} does not broadcast to {spec:?}", v.shape())))?;
    one_view(cx, n, &v, View::Broadcast(shape))
}

fn pad(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let d = cx.data(n, 0)?;
    let r = d.rank();
    let pads = if n.opset < 11 {
        n.ints("pads")
    } else {
        cx.ints_in(n, 1, "pads")?
    };
    let pads = pads.ok_or_else(|| cx.invalid(n, "no pads"))?;
    let axes: Vec<usize> = match if n.opset >= 18 {
        cx.ints_in(n, 3, "axes")?
    } else {
        None
    } {
        Some(a) => a.iter().map(|&x| axis(x, r).unwrap_or(r)).collect(),
        None => (0..r).collect(),
    };
    if pads.len() != 2 * axes.len() || axes.iter().any(|&a| a >= r) || pads.iter().any(|&p| p < 0) {
        return Err(cx.unsupported(
            n,
            format!("pads {pads:?} (negative pads, or not two per axis)"),
        ));
    }
    let mut lohi = vec![(0i64, 0i64); r];
    for (k, &a) in axes.iter().enumerate() {
        lohi[a] = (pads[k], pads[k + axes.len()]);
    }
    let value = if n.opset < 11 {
        f64::from(n.float("value", 0.0))
    } else {
        cx.konst(n, 2, "constant_value")?
            .map(|t| elem::to_f64s(&t.data)[0])
            .unwrap_or(0.0)
    };
    let mode = n.string("mode").unwrap_or_else(|| "constant".into());
    let how = match mode.as_str() {
        "constant" => format!("constant {}", lit(value, d.dtype).replace(['(', ')'], "")),
        "reflect" => "reflect".into(),
        m => return Err(cx.unsupported(n, format!("mode `{m}`"))),
    };
    let shape = d
        .shape
        .iter()
        .zip(&lohi)
        .map(|(s, (l, h))| s + *l as usize + *h as usize)
        .collect();
    let parts: Vec<String> = lohi.iter().map(|(l, h)| format!("{l}:{h}")).collect();
    let rhs = format!("pad {} [{}] {how}", d.v(), parts.join(", "));
    Ok(vec![Val::Data(cx.e.stmt(
        &out_hint(n, 0),
        &rhs,
        d.dtype,
        shape,
    ))])
}

fn gather(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let shape = v.shape().to_vec();
    let a =
        axis(n.int("axis", 0), shape.len()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let idx = cx.val(n, 1)?.clone();
    if let Val::Const(it) = &idx {
        let ids: Vec<i64> = elem::to_i64s(&it.data);
        let dim = shape[a] as i64;
        let ids: Vec<i64> = ids
            .iter()
            .map(|&i| if i < 0 { i + dim } else { i })
            .collect();
        if ids.iter().any(|&i| i < 0 || i >= dim) {
            return Err(cx.invalid(
                n,
                format!("an index out of range for axis {a} of size {dim}"),
            ));
        }
        // A run of consecutive indices is a slice (then a reshape): a view, no kernel.
        let run = ids.windows(2).all(|w| w[1] == w[0] + 1);
        if run || matches!(v, Val::Const(_)) {
            return Ok(vec![gather_view(cx, n, &v, a, &ids, &it.shape, run)]);
        }
    }
    Ok(vec![Val::Data(gather_kernel(cx, n, a)?)])
}

/// `Gather` of constant indices as views (a slice and reshape for a run; a per-element pick
/// of a constant otherwise).
fn gather_view(
    cx: &mut Cx,
    n: &Node,
    v: &Val,
    a: usize,
    ids: &[i64],
    ishape: &[usize],
    run: bool,
) -> Val {
    let shape = v.shape().to_vec();
    let mut out = shape[..a].to_vec();
    out.extend_from_slice(ishape);
    out.extend_from_slice(&shape[a + 1..]);
    if run {
        let mut r = whole(&shape);
        r[a] = Range1 {
            start: ids.first().copied().unwrap_or(0),
            step: 1,
            count: ids.len(),
        };
        let hint = format!("{}_rows", out_hint(n, 0));
        let s = apply_view(cx, &hint, v, &View::Slice(r));
        return apply_view(cx, &out_hint(n, 0), &s, &View::Reshape(out));
    }
    let Val::Const(t) = v else {
        unreachable!("gather_view of a non-run needs a constant")
    };
    let outer: usize = shape[..a].iter().product();
    let inner: usize = shape[a + 1..].iter().product();
    let mut idx = Vec::new();
    for o in 0..outer {
        for &i in ids {
            idx.extend((0..inner).map(|k| (o * shape[a] + i as usize) * inner + k));
        }
    }
    Val::Const(Tensor {
        shape: out,
        data: elem::pick(&t.data, &idx),
    })
}

/// `Gather` of run-time indices: `y[o.., j.., i..] = x[o.., ids[j..], i..]`.
fn gather_kernel(cx: &mut Cx, n: &Node, a: usize) -> R<D> {
    let x = cx.data(n, 0)?;
    let ids = cx.data(n, 1)?;
    if !ids.dtype.is_int() {
        return Err(cx.invalid(n, format!("indices of dtype {}", ids.dtype.name())));
    }
    let (r, q) = (x.rank(), ids.rank());
    let xs: Vec<String> = (0..r).map(|k| format!("X{k}")).collect();
    let is: Vec<String> = (0..q).map(|k| format!("I{k}")).collect();
    let mut ys: Vec<String> = xs[..a].to_vec();
    ys.extend(is.iter().cloned());
    ys.extend(xs[a + 1..].iter().cloned());
    let vars: Vec<String> = (0..ys.len()).map(|k| format!("o{k}")).collect();
    let mut acc: Vec<String> = vars[..a].to_vec();
    acc.push(format!("ids[{}]", vars[a..a + q].join(", ")));
    acc.extend(vars[a + q..].iter().cloned());
    let t = x.dtype.name();
    let text = format!(
        "op @{{NAME}}(x: {t}[{}], ids: {}[{}]) -> (y: {t}[{}]) {{\n  y[{}] = x[{}]\n}}",
        xs.join(", "),
        ids.dtype.name(),
        is.join(", "),
        ys.join(", "),
        vars.join(", "),
        acc.join(", ")
    );
    let op = cx.e.op("Gather", &text);
    let mut shape = x.shape[..a].to_vec();
    shape.extend_from_slice(&ids.shape);
    shape.extend_from_slice(&x.shape[a + 1..]);
    Ok(cx
        .e
        .apply(&out_hint(n, 0), &op, &[], &[&x, &ids], x.dtype, shape))
}

/// `Tile` by constant repeats as views: each axis gains a broadcast axis of its repeat count
/// in front, then the pairs are merged (`y[j * d + i] = x[i]`).
fn tile(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let shape = v.shape().to_vec();
    if n.opset < 6 {
        return Err(cx.unsupported(n, "opset < 6 (`tiles` and `axis` inputs)"));
    }
    let reps = cx
        .ints_in(n, 1, "repeats")?
        .ok_or_else(|| cx.invalid(n, "input 1 (repeats) is missing"))?;
    if reps.len() != shape.len() || reps.iter().any(|&r| r < 0) {
        return Err(cx.invalid(
            n,
            format!("repeats {reps:?} for an input of shape {shape:?}"),
        ));
    }
    if reps.contains(&0) {
        return Err(cx.unsupported(n, format!("repeats {reps:?}: an empty result")));
    }
    let reps: Vec<usize> = reps.iter().map(|&r| r as usize).collect();
    let pairs: Vec<usize> = shape.iter().flat_map(|&d| [1, d]).collect();
    let wide: Vec<usize> = shape
        .iter()
        .zip(&reps)
        .flat_map(|(&d, &r)| [r, d])
        .collect();
    let out: Vec<usize> = shape
        .iter()
        .zip(&reps)
        .map(|(&d, &r)| d.saturating_mul(r))
        .collect();
    if tapc_runtime::checked_numel(&wide).is_none_or(|k| k >= 1 << 40) {
        return Err(cx.unsupported(n, format!("repeats {reps:?}: a result too large")));
    }
    let h = out_hint(n, 0);
    let a = apply_view(cx, &format!("{h}_pairs"), &v, &View::Reshape(pairs));
    let b = apply_view(cx, &format!("{h}_wide"), &a, &View::Broadcast(wide));
    one_view(cx, n, &b, View::Reshape(out))
}
