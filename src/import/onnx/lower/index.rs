//! Data-dependent indexing: `GatherElements` as a gathered load (`x[i, idx[i, j]]`),
//! `ScatterElements` (and opset 9's `Scatter`) as TEG's `scatter`, `GatherND` and `ScatterND`
//! through a linear index over the leading dimensions (an elementwise op, then a `Gather` or
//! `scatter` along axis 0 of the data reshaped), `OneHot` and `Trilu` as kernels that compare
//! index variables.

use super::emit::{lit, D};
use super::views::out_hint;
use super::{axis, Cx, Val, R};
use crate::import::onnx::model::Node;
use tapc_runtime::DType;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "GatherElements" => gather_elements,
        "ScatterElements" | "Scatter" => scatter_elements,
        "GatherND" => gather_nd,
        "ScatterND" => scatter_nd,
        "OneHot" => one_hot,
        "Trilu" => trilu,
        _ => return None,
    })
}

/// Index variables `o0, o1, ...` and shape symbols `S0, S1, ...` of rank `r`.
fn vars(prefix: &str, r: usize) -> Vec<String> {
    (0..r).map(|k| format!("{prefix}{k}")).collect()
}

fn int_indices(cx: &Cx, n: &Node, d: &D) -> R<()> {
    match d.dtype.is_int() {
        true => Ok(()),
        false => Err(cx.invalid(n, format!("indices of dtype {}", d.dtype.name()))),
    }
}

/// `y[o..] = x[o0, .., idx[o..], ..]` (the gathered index at the axis).
fn gather_elements(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let idx = cx.data(n, 1)?;
    int_indices(cx, n, &idx)?;
    let r = x.rank();
    let a = axis(n.int("axis", 0), r).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let fits = idx.rank() == r && (0..r).all(|k| k == a || idx.shape[k] == x.shape[k]);
    if !fits {
        let msg = format!("indices {:?} for data {:?}", idx.shape, x.shape);
        return Err(cx.unsupported(n, msg));
    }
    let o = vars("o", r);
    let mut at = o.clone();
    at[a] = format!("idx[{}]", o.join(", "));
    // One symbol per dim where the two agree, so the verifier sees the loads in bounds.
    let mut is = vars("X", r);
    is[a] = "I".into();
    let t = x.dtype.name();
    let text = format!(
        "op @{{NAME}}(x: {t}[{}], idx: {}[{is}]) -> (y: {t}[{is}]) {{\n  y[{o}] = x[{}]\n}}",
        vars("X", r).join(", "),
        idx.dtype.name(),
        at.join(", "),
        is = is.join(", "),
        o = o.join(", "),
    );
    let op = cx.e.op("GatherElements", &text);
    let shape = idx.shape.clone();
    let y =
        cx.e.apply(&out_hint(n, 0), &op, &[], &[&x, &idx], x.dtype, shape);
    Ok(vec![Val::Data(y)])
}

/// ONNX's `reduction` as TEG's `reduce` (`mul` has none).
fn reduction(cx: &Cx, n: &Node, dtype: DType) -> R<&'static str> {
    let r = n.string("reduction").unwrap_or_else(|| "none".into());
    Ok(match r.as_str() {
        "none" => "none",
        "add" if dtype != DType::Bool => "add",
        "max" if dtype != DType::Bool => "max",
        "min" if dtype != DType::Bool => "min",
        _ => return Err(cx.unsupported(n, format!("reduction `{r}` on {}", dtype.name()))),
    })
}

fn scatter_elements(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let idx = cx.data(n, 1)?;
    let upd = cx.data(n, 2)?;
    int_indices(cx, n, &idx)?;
    let a = axis(n.int("axis", 0), x.rank()).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let fits = idx.shape == upd.shape
        && idx.rank() == x.rank()
        && (0..x.rank()).all(|k| k == a || idx.shape[k] == x.shape[k]);
    if !fits {
        let msg = format!(
            "indices {:?} and updates {:?} for data {:?}",
            idx.shape, upd.shape, x.shape
        );
        return Err(cx.unsupported(n, msg));
    }
    let r = reduction(cx, n, x.dtype)?;
    let y = scatter(cx, &out_hint(n, 0), [&x, &idx, &upd], a, r);
    Ok(vec![Val::Data(y)])
}

fn scatter(cx: &mut Cx, hint: &str, [x, idx, upd]: [&D; 3], a: usize, r: &str) -> D {
    let rhs = format!(
        "scatter {}, {}, {} axis {a} reduce {r}",
        x.v(),
        idx.v(),
        upd.v()
    );
    cx.e.stmt(hint, &rhs, x.dtype, x.shape.clone())
}

/// The last axis of ND indices `[m.., k]` as one linear index `[m..]` (i64) into the first `k`
/// dims of `dims`, each coordinate wrapped once when negative.
fn linear_index(cx: &mut Cx, n: &Node, idx: &D, dims: &[usize]) -> D {
    let q = idx.rank();
    let k = idx.shape[q - 1];
    let m = vars("m", q - 1);
    let mut terms = Vec::new();
    let mut stride = 1usize;
    for j in (0..k).rev() {
        let at: Vec<String> = m.iter().cloned().chain([j.to_string()]).collect();
        let v = format!("i64(idx[{}])", at.join(", "));
        terms.push(format!(
            "select({v} < 0, {v} + {}, {v}) * {stride}",
            dims[j]
        ));
        stride *= dims[j];
    }
    let text = format!(
        "op @{{NAME}}(idx: {}[{}]) -> (y: i64[{}]) {{\n  y[{}] = {}\n}}",
        idx.dtype.name(),
        vars("I", q).join(", "),
        vars("I", q - 1).join(", "),
        m.join(", "),
        terms.join(" + "),
    );
    let op = cx.e.op("LinearIndex", &text);
    let shape = idx.shape[..q - 1].to_vec();
    cx.e.apply(
        &format!("{}_at", out_hint(n, 0)),
        &op,
        &[],
        &[idx],
        DType::I64,
        shape,
    )
}

/// The ND operands' shapes: `k` (the index depth), `m` (the index points) and `rest` (the
/// data dims each index addresses).
fn nd_shapes(cx: &Cx, n: &Node, x: &D, idx: &D) -> R<(usize, usize, Vec<usize>)> {
    let q = idx.rank();
    let k = idx.shape.last().copied().unwrap_or(0);
    if n.int("batch_dims", 0) != 0 {
        return Err(cx.unsupported(n, "`batch_dims` other than 0"));
    }
    if q == 0 || k == 0 || k > x.rank() {
        return Err(cx.invalid(n, format!("indices {:?} for data {:?}", idx.shape, x.shape)));
    }
    let m = idx.shape[..q - 1].iter().product();
    Ok((k, m, x.shape[k..].to_vec()))
}

fn gather_nd(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let idx = cx.data(n, 1)?;
    int_indices(cx, n, &idx)?;
    let (k, m, rest) = nd_shapes(cx, n, &x, &idx)?;
    let h = out_hint(n, 0);
    let lin = linear_index(cx, n, &idx, &x.shape);
    let lin = cx.reshape(&lin, &[m], &format!("{h}_flat"));
    let rows: usize = x.shape[..k].iter().product();
    let table_shape: Vec<usize> = [rows].into_iter().chain(rest.iter().copied()).collect();
    let table = cx.reshape(&x, &table_shape, &format!("{h}_table"));
    let r = table_shape.len();
    let o = vars("o", r);
    let mut at = o.clone();
    at[0] = format!("ids[{}]", o[0]);
    let t = x.dtype.name();
    let text = format!(
        "op @{{NAME}}(x: {t}[{}], ids: i64[I0]) -> (y: {t}[I0, {}]) {{\n  y[{}] = x[{}]\n}}",
        vars("X", r).join(", "),
        vars("X", r)[1..].join(", "),
        o.join(", "),
        at.join(", "),
    );
    let text = text.replace("[I0, ]", "[I0]");
    let op = cx.e.op("GatherND", &text);
    let flat_shape: Vec<usize> = [m].into_iter().chain(rest.iter().copied()).collect();
    let y = cx.e.apply(
        &format!("{h}_rows"),
        &op,
        &[],
        &[&table, &lin],
        x.dtype,
        flat_shape,
    );
    let out: Vec<usize> = idx.shape[..idx.rank() - 1]
        .iter()
        .copied()
        .chain(rest)
        .collect();
    Ok(vec![Val::Data(cx.reshape(&y, &out, &h))])
}

fn scatter_nd(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let idx = cx.data(n, 1)?;
    let upd = cx.data(n, 2)?;
    int_indices(cx, n, &idx)?;
    let (k, m, rest) = nd_shapes(cx, n, &x, &idx)?;
    let want: Vec<usize> = idx.shape[..idx.rank() - 1]
        .iter()
        .copied()
        .chain(rest.iter().copied())
        .collect();
    if upd.shape != want {
        return Err(cx.invalid(n, format!("updates {:?}, expected {want:?}", upd.shape)));
    }
    let r = reduction(cx, n, x.dtype)?;
    let h = out_hint(n, 0);
    let lin = linear_index(cx, n, &idx, &x.shape);
    let rows: usize = x.shape[..k].iter().product();
    let table_shape: Vec<usize> = [rows].into_iter().chain(rest.iter().copied()).collect();
    let flat_shape: Vec<usize> = [m].into_iter().chain(rest.iter().copied()).collect();
    let col_shape: Vec<usize> = [m].into_iter().chain(rest.iter().map(|_| 1)).collect();
    let table = cx.reshape(&x, &table_shape, &format!("{h}_table"));
    let upd = cx.reshape(&upd, &flat_shape, &format!("{h}_updates"));
    let col = cx.reshape(&lin, &col_shape, &format!("{h}_col"));
    let at = cx.broadcast(&col, &flat_shape, &format!("{h}_idx"));
    let y = scatter(cx, &format!("{h}_rows"), [&table, &at, &upd], 0, r);
    Ok(vec![Val::Data(cx.reshape(&y, &x.shape, &h))])
}

/// `y[.., d, ..] = select(wrap(ind[..]) == d, on, off)`, the new axis of size `depth` at `axis`.
fn one_hot(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let ind = cx.data(n, 0)?;
    let depth = cx
        .konst(n, 1, "depth")?
        .ok_or_else(|| cx.invalid(n, "input 1 (depth) is missing"))?;
    let depth = crate::import::onnx::elem::to_f64s(&depth.data);
    let depth = match depth.as_slice() {
        [d] if *d >= 1.0 && *d < (1u64 << 31) as f64 => *d as usize,
        _ => return Err(cx.invalid(n, format!("depth {depth:?}"))),
    };
    let vals = cx.data(n, 2)?;
    if vals.numel() != 2 {
        return Err(cx.invalid(n, format!("values of shape {:?}", vals.shape)));
    }
    let vals = cx.reshape(&vals, &[2], &format!("{}_values", out_hint(n, 0)));
    let r = ind.rank() + 1;
    let a = axis(n.int("axis", -1), r).ok_or_else(|| cx.invalid(n, "axis out of range"))?;
    let o = vars("o", r);
    let at: Vec<String> = o
        .iter()
        .enumerate()
        .filter(|&(k, _)| k != a)
        .map(|(_, v)| v.clone())
        .collect();
    let mut ys = vars("I", r - 1);
    ys.insert(a, depth.to_string());
    let v = format!("i64(ind[{}])", at.join(", "));
    let text = format!(
        "op @{{NAME}}(ind: {}[{}], v: {t}[2]) -> (y: {t}[{}]) {{\n  y[{}] = select(select({v} < 0, {v} + {depth}, {v}) == {}, v[1], v[0])\n}}",
        ind.dtype.name(),
        vars("I", r - 1).join(", "),
        ys.join(", "),
        o.join(", "),
        o[a],
        t = vals.dtype.name(),
    );
    let op = cx.e.op("OneHot", &text);
    let mut shape = ind.shape.clone();
    shape.insert(a, depth);
    let y =
        cx.e.apply(&out_hint(n, 0), &op, &[], &[&ind, &vals], vals.dtype, shape);
    Ok(vec![Val::Data(y)])
}

/// `Trilu`: the elements on and above (`upper`) or below the `k`-th diagonal of the last two
/// dims are kept, the others become 0.
fn trilu(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let k = cx
        .ints_in(n, 1, "k")?
        .and_then(|v| v.first().copied())
        .unwrap_or(0);
    let r = x.rank();
    if r < 2 {
        return Err(cx.invalid(n, format!("input of shape {:?}", x.shape)));
    }
    let o = vars("o", r);
    let (i, j) = (&o[r - 2], &o[r - 1]);
    let keep = match n.int("upper", 1) != 0 {
        true => format!("{j} - {i} >= {k}"),
        false => format!("{j} - {i} <= {k}"),
    };
    let t = x.dtype.name();
    let zero = lit(0.0, x.dtype);
    let text = format!(
        "op @{{NAME}}(x: {t}[{s}]) -> (y: {t}[{s}]) {{\n  y[{o}] = select({keep}, x[{o}], {zero})\n}}",
        s = vars("X", r).join(", "),
        o = o.join(", "),
    );
    let op = cx.e.op("Trilu", &text);
    let y =
        cx.e.apply(&out_hint(n, 0), &op, &[], &[&x], x.dtype, x.shape.clone());
    Ok(vec![Val::Data(y)])
}
