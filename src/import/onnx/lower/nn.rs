//! Convolution and pooling: `Conv` (groups, depthwise, dilations, strides, explicit and `SAME`
//! padding), `MaxPool`, `AveragePool`, `GlobalAveragePool`, `GlobalMaxPool`, and inference
//! `BatchNormalization`. Padding is a `pad` selector; strides and dilations are op parameters,
//! so one op serves every layer of a spatial rank. A pooling window's extent is given to the
//! kernel by a `zeros` tensor of the window's shape added to each element (TEG infers a
//! reduction's extent from an input indexed by it).

use super::emit::{lit, D};
use super::{Cx, Val, R};
use crate::import::onnx::model::{Attr, Node};
use tapc_runtime::DType;

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "Conv" => conv,
        "ConvTranspose" => conv_transpose,
        "MaxPool" | "AveragePool" | "LpPool" => pool,
        "GlobalAveragePool" | "GlobalMaxPool" => global_pool,
        "BatchNormalization" => batchnorm,
        "LRN" => lrn,
        _ => return None,
    })
}

fn hint(n: &Node) -> String {
    n.outputs.first().cloned().unwrap_or_default()
}

/// The geometry of a sliding window over the spatial dims.
struct Window {
    kernel: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    /// Padding before and after, per spatial dim.
    pads: Vec<(usize, usize)>,
    /// Output size per spatial dim.
    out: Vec<usize>,
}

impl Window {
    /// A 1×1 window with stride 1 and no padding (dilation does not matter at size 1).
    fn is_pointwise(&self) -> bool {
        self.kernel.iter().all(|&k| k == 1)
            && self.strides.iter().all(|&s| s == 1)
            && self.pads.iter().all(|&p| p == (0, 0))
    }
}

/// Reads the window attributes of `n` for `spatial` input sizes and `kernel` sizes.
fn window(cx: &Cx, n: &Node, spatial: &[usize], kernel: Vec<usize>, ceil: bool) -> R<Window> {
    let k = spatial.len();
    let get = |name: &str| -> R<Vec<usize>> {
        match n.ints(name) {
            None => Ok(vec![1; k]),
            Some(v) if v.len() == k && v.iter().all(|&x| x >= 1) => {
                Ok(v.iter().map(|&x| x as usize).collect())
            }
            Some(v) => Err(cx.invalid(n, format!("`{name}` {v:?} for {k} spatial dims"))),
        }
    };
    let (strides, dilations) = (get("strides")?, get("dilations")?);
    let eff: Vec<usize> = (0..k).map(|i| dilations[i] * (kernel[i] - 1) + 1).collect();
    let auto = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let pads: Vec<(usize, usize)> = match auto.as_str() {
        "NOTSET" => match n.ints("pads") {
            None => vec![(0, 0); k],
            Some(p) if p.len() == 2 * k && p.iter().all(|&x| x >= 0) => {
                (0..k).map(|i| (p[i] as usize, p[i + k] as usize)).collect()
            }
            Some(p) => return Err(cx.unsupported(n, format!("pads {p:?}"))),
        },
        "VALID" => vec![(0, 0); k],
        "SAME_UPPER" | "SAME_LOWER" => (0..k)
            .map(|i| {
                let out = spatial[i].div_ceil(strides[i]);
                let total = ((out - 1) * strides[i] + eff[i]).saturating_sub(spatial[i]);
                let small = total / 2;
                if auto == "SAME_UPPER" {
                    (small, total - small)
                } else {
                    (total - small, small)
                }
            })
            .collect(),
        a => return Err(cx.unsupported(n, format!("auto_pad `{a}`"))),
    };
    let mut out = Vec::new();
    for i in 0..k {
        let padded = spatial[i] + pads[i].0 + pads[i].1;
        if padded < eff[i] {
            return Err(cx.invalid(
                n,
                format!("window {} wider than the padded input {padded}", eff[i]),
            ));
        }
        let span = padded - eff[i];
        let mut o = if ceil {
            span.div_ceil(strides[i]) + 1
        } else {
            span / strides[i] + 1
        };
        // A window may not start in the right padding.
        while ceil && o > 1 && (o - 1) * strides[i] >= spatial[i] + pads[i].0 {
            o -= 1;
        }
        out.push(o);
    }
    Ok(Window {
        kernel,
        strides,
        dilations,
        pads,
        out,
    })
}

impl Window {
    /// Extra padding at the end that a ceil-mode window reads past the padded input.
    fn extra(&self, spatial: &[usize]) -> Vec<usize> {
        (0..spatial.len())
            .map(|i| {
                let need = (self.out[i] - 1) * self.strides[i]
                    + self.dilations[i] * (self.kernel[i] - 1)
                    + 1;
                need.saturating_sub(spatial[i] + self.pads[i].0 + self.pads[i].1)
            })
            .collect()
    }
    /// The op parameters `s0.., d0..`.
    fn params(&self) -> Vec<(String, i64)> {
        let k = self.kernel.len();
        let s = (0..k).map(|i| (format!("s{i}"), self.strides[i] as i64));
        s.chain((0..k).map(|i| (format!("d{i}"), self.dilations[i] as i64)))
            .collect()
    }
}

/// `x` padded on its trailing spatial dims by `lo`/`hi` with `value` (x itself if no padding).
fn pad_spatial(cx: &mut Cx, x: &D, pads: &[(usize, usize)], value: &str, h: &str) -> D {
    if pads.iter().all(|&(l, r)| l == 0 && r == 0) {
        return x.clone();
    }
    let lead = x.rank() - pads.len();
    let mut parts: Vec<String> = (0..lead).map(|_| "0:0".to_string()).collect();
    parts.extend(pads.iter().map(|(l, r)| format!("{l}:{r}")));
    let mut shape = x.shape.clone();
    for (i, (l, r)) in pads.iter().enumerate() {
        shape[lead + i] += l + r;
    }
    let rhs = format!("pad {} [{}] constant {value}", x.v(), parts.join(", "));
    cx.e.stmt(h, &rhs, x.dtype, shape)
}

/// Names of a spatial kernel: symbols, output dims and the window access `s*p + d*k`.
struct Names {
    sym: Vec<String>,
    ksym: Vec<String>,
    out: Vec<String>,
    p: Vec<String>,
    k: Vec<String>,
    at: Vec<String>,
    params: String,
}

fn names(sp: usize) -> Names {
    let sym: Vec<String> = (0..sp).map(|i| format!("H{i}")).collect();
    let ksym: Vec<String> = (0..sp).map(|i| format!("K{i}")).collect();
    let out = (0..sp)
        .map(|i| format!("(H{i} - d{i} * (K{i} - 1) - 1) / s{i} + 1"))
        .collect();
    let p: Vec<String> = (0..sp).map(|i| format!("p{i}")).collect();
    let k: Vec<String> = (0..sp).map(|i| format!("k{i}")).collect();
    let at = (0..sp)
        .map(|i| format!("s{i} * p{i} + d{i} * k{i}"))
        .collect();
    let ps: Vec<String> = (0..sp)
        .map(|i| format!("s{i}"))
        .chain((0..sp).map(|i| format!("d{i}")))
        .collect();
    Names {
        sym,
        ksym,
        out,
        p,
        k,
        at,
        params: ps.join(", "),
    }
}

fn conv(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let w = cx.data(n, 1)?;
    let h = hint(n);
    let sp = x.rank().saturating_sub(2);
    if sp == 0 || w.rank() != x.rank() || !x.dtype.is_float() || w.dtype != x.dtype {
        return Err(cx.invalid(n, format!("input {:?} and weight {:?}", x.shape, w.shape)));
    }
    let g = n.int("group", 1).max(1) as usize;
    let (c, o) = (x.shape[1], w.shape[0]);
    if c % g != 0 || o % g != 0 || w.shape[1] * g != c {
        return Err(cx.invalid(
            n,
            format!(
                "{c} input and {o} output channels in {g} groups, weight {:?}",
                w.shape
            ),
        ));
    }
    let win = window(cx, n, &x.shape[2..], w.shape[2..].to_vec(), false)?;
    let bias = match cx.opt(n, 2)? {
        Some(_) => Some(cx.data(n, 2)?),
        None => None,
    };
    // One spatial dim is already a single run of positions: nothing to flatten.
    if g == 1 && sp >= 2 && win.is_pointwise() {
        return Ok(vec![Val::Data(pointwise(cx, &x, &w, bias.as_ref(), &h))]);
    }
    let xp = pad_spatial(cx, &x, &win.pads, "0.0", &format!("{h}_pad"));
    let nm = names(sp);
    let t = x.dtype.name();
    let (gx, gw, gy, gidx, gb) = if g == 1 {
        ("", "", "", "", "")
    } else {
        ("G, ", "G, ", "G, ", "g, ", "G, ")
    };
    let (bport, bterm) = match &bias {
        Some(_) => (format!(", b: {t}[{gb}O]"), format!(" + b[{gidx}o]")),
        None => (String::new(), String::new()),
    };
    let text = format!(
        "op @{{NAME}}<{params}>(x: {t}[N, {gx}C, {sym}], w: {t}[{gw}O, C, {ksym}]{bport}) -> (y: {t}[N, {gy}O, {out}]) {{\n  y[n, {gidx}o, {p}] = sum[c, {k}](x[n, {gidx}c, {at}] * w[{gidx}o, c, {k}]){bterm}\n}}",
        params = nm.params,
        sym = nm.sym.join(", "),
        ksym = nm.ksym.join(", "),
        out = nm.out.join(", "),
        p = nm.p.join(", "),
        k = nm.k.join(", "),
        at = nm.at.join(", "),
    );
    let op = cx.e.op(if g == 1 { "Conv" } else { "ConvGrouped" }, &text);
    let (cg, og) = (c / g, o / g);
    let (xa, wa, ba) = if g == 1 {
        (xp, w, bias)
    } else {
        let mut sx = vec![xp.shape[0], g, cg];
        sx.extend_from_slice(&xp.shape[2..]);
        let mut sw = vec![g, og, w.shape[1]];
        sw.extend_from_slice(&w.shape[2..]);
        let xa = cx.reshape(&xp, &sx, &format!("{h}_xg"));
        let wa = cx.reshape(&w, &sw, &format!("{h}_wg"));
        let ba = bias.map(|b| cx.reshape(&b, &[g, og], &format!("{h}_bg")));
        (xa, wa, ba)
    };
    let mut shape = vec![x.shape[0]];
    if g > 1 {
        shape.extend([g, og]);
    } else {
        shape.push(o);
    }
    shape.extend_from_slice(&win.out);
    let params = win.params();
    let ps: Vec<(&str, i64)> = params.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut args = vec![&xa, &wa];
    if let Some(b) = &ba {
        args.push(b);
    }
    let name = if g == 1 { h.clone() } else { format!("{h}_g") };
    let y = cx.e.apply(&name, &op, &ps, &args, x.dtype, shape);
    let mut full = vec![x.shape[0], o];
    full.extend_from_slice(&win.out);
    Ok(vec![Val::Data(cx.reshape(&y, &full, &h))])
}

/// A 1×1 convolution with unit strides and no padding over `sp ≥ 2` spatial dims as one
/// contraction over the flattened positions (`x` seen as `[N, C, H·W]`, the weights as
/// `[O, C]`): the kernel then vectorises along all `H·W` positions at once, not along a row
/// of `W` (4 or 8 on a deep layer's small map).
fn pointwise(cx: &mut Cx, x: &D, w: &D, bias: Option<&D>, h: &str) -> D {
    let t = x.dtype.name();
    let (n, c, o) = (x.shape[0], x.shape[1], w.shape[0]);
    let positions: usize = x.shape[2..].iter().product();
    let (bport, bterm) = bias_terms(bias.is_some(), t);
    let text = format!(
        "op @{{NAME}}(x: {t}[N, C, P], w: {t}[O, C]{bport}) -> (y: {t}[N, O, P]) {{\n  y[n, o, p] = sum[c](x[n, c, p] * w[o, c]){bterm}\n}}"
    );
    let op = cx.e.op("ConvPointwise", &text);
    let xf = cx.reshape(x, &[n, c, positions], &format!("{h}_flat"));
    let wf = cx.reshape(w, &[o, c], &format!("{h}_w2"));
    let mut args = vec![&xf, &wf];
    if let Some(b) = bias {
        args.push(b);
    }
    let y = cx.e.apply(
        &format!("{h}_pw"),
        &op,
        &[],
        &args,
        x.dtype,
        vec![n, o, positions],
    );
    let mut full = vec![n, o];
    full.extend_from_slice(&x.shape[2..]);
    cx.reshape(&y, &full, h)
}

/// The least value of a dtype (the most negative finite one of a float), as a literal; `None`
/// for i64, whose least value has no literal.
fn lowest(t: DType) -> Option<String> {
    let v = match t {
        DType::F64 => f64::MIN,
        DType::F16 => tapc_runtime::f16::MIN.to_f64(),
        DType::BF16 => tapc_runtime::bf16::MIN.to_f64(),
        DType::F32 => f64::from(f32::MIN),
        DType::I8 => f64::from(i8::MIN),
        DType::I16 => f64::from(i16::MIN),
        DType::I32 => f64::from(i32::MIN),
        DType::I64 | DType::Bool => return None,
        _ => 0.0,
    };
    Some(lit(v, t).replace(['(', ')'], ""))
}

fn pool(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let sp = x.rank().saturating_sub(2);
    let kernel: Vec<usize> = n
        .ints("kernel_shape")
        .unwrap_or_default()
        .iter()
        .map(|&k| k.max(1) as usize)
        .collect();
    let max = n.op_type == "MaxPool";
    let ok_dtype = x.dtype.is_float() || (max && lowest(x.dtype).is_some());
    if sp == 0 || kernel.len() != sp || !ok_dtype {
        return Err(cx.invalid(
            n,
            format!("input {:?} with kernel_shape {kernel:?}", x.shape),
        ));
    }
    if n.outputs.get(1).is_some_and(|o| !o.is_empty()) {
        return Err(cx.unsupported(n, "its Indices output"));
    }
    let win = window(
        cx,
        n,
        &x.shape[2..],
        kernel.clone(),
        n.int("ceil_mode", 0) != 0,
    )?;
    let extra = win.extra(&x.shape[2..]);
    // LpPool sums over the window (pads as zeros): no count of the elements inside.
    let include = n.int("count_include_pad", 0) != 0 || n.op_type == "LpPool";
    let padded = win.pads.iter().any(|&(l, r)| l + r > 0);
    if !max && extra.iter().any(|&e| e > 0) {
        return Err(cx.unsupported(n, "ceil_mode with windows past the padding"));
    }
    let pads: Vec<(usize, usize)> = win
        .pads
        .iter()
        .zip(&extra)
        .map(|(&(l, r), e)| (l, r + e))
        .collect();
    let fill = match max {
        true => lowest(x.dtype).unwrap_or_default(),
        false => "0.0".into(),
    };
    let xp = pad_spatial(cx, &x, &pads, &fill, &format!("{h}_pad"));
    let t = x.dtype.name();
    let nm = names(sp);
    let wz =
        cx.e.stmt(&format!("{h}_window"), "zeros", x.dtype, kernel.clone());
    let mut xa = format!("x[n, c, {}] + w[{}]", nm.at.join(", "), nm.k.join(", "));
    // LpPool: `(sum |x|^p)^(1/p)` over the window, padding counted as zeros.
    let lp = (n.op_type == "LpPool").then(|| n.int("p", 2) as f64);
    if let Some(p) = lp {
        xa = format!("pow(abs({xa}), {})", super::emit::lit(p, x.dtype));
    }
    let k = nm.k.join(", ");
    let mut ports = format!(
        "x: {t}[N, C, {}], w: {t}[{}]",
        nm.sym.join(", "),
        nm.ksym.join(", ")
    );
    let mut args = vec![xp.clone(), wz.clone()];
    let mut pre = String::new();
    let body = if max {
        format!("max[{k}]({xa})")
    } else if padded && !include {
        // The divisor counts the window's elements inside the input: a padded mask of ones.
        let ones =
            cx.e.stmt(&format!("{h}_ones"), "ones", x.dtype, x.shape[2..].to_vec());
        let mask = pad_spatial(cx, &ones, &win.pads, "0.0", &format!("{h}_mask"));
        ports.push_str(&format!(", m: {t}[{}]", nm.sym.join(", ")));
        args.push(mask);
        let ma = format!("m[{}] + w[{k}]", nm.at.join(", "));
        pre = format!("  cnt[{p}] = sum[{k}]({ma})\n", p = nm.p.join(", "));
        format!("sum[{k}]({xa}) / cnt[{}]", nm.p.join(", "))
    } else {
        format!("sum[{k}]({xa}) / {t}({})", nm.ksym.join(" * "))
    };
    let body = match lp {
        Some(p) => format!(
            "pow(sum[{k}]({xa}), {})",
            super::emit::lit(1.0 / p, x.dtype)
        ),
        None => body,
    };
    let text = format!(
        "op @{{NAME}}<{}>({ports}) -> (y: {t}[N, C, {}]) {{\n{pre}  y[n, c, {}] = {body}\n}}",
        nm.params,
        nm.out.join(", "),
        nm.p.join(", ")
    );
    let op = cx.e.op(&n.op_type, &text);
    let params = win.params();
    let ps: Vec<(&str, i64)> = params.iter().map(|(k, v)| (k.as_str(), *v)).collect();
    let mut shape = x.shape[..2].to_vec();
    shape.extend_from_slice(&win.out);
    let refs: Vec<&D> = args.iter().collect();
    Ok(vec![Val::Data(
        cx.e.apply(&h, &op, &ps, &refs, x.dtype, shape),
    )])
}

fn global_pool(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    if x.rank() < 3 || !x.dtype.is_float() {
        return Err(cx.invalid(n, format!("input {:?}", x.shape)));
    }
    let s: usize = x.shape[2..].iter().product();
    let x3 = cx.reshape(&x, &[x.shape[0], x.shape[1], s], &format!("{h}_flat"));
    let t = x.dtype.name();
    let body = if n.op_type == "GlobalMaxPool" {
        "max[k](x[n, c, k])".into()
    } else {
        format!("sum[k](x[n, c, k]) / {t}(S)")
    };
    let text =
        format!("op @{{NAME}}(x: {t}[N, C, S]) -> (y: {t}[N, C]) {{\n  y[n, c] = {body}\n}}");
    let op = cx.e.op(&n.op_type, &text);
    let y = cx.e.apply(
        &format!("{h}_nc"),
        &op,
        &[],
        &[&x3],
        x.dtype,
        x.shape[..2].to_vec(),
    );
    let mut keep = x.shape[..2].to_vec();
    keep.extend(std::iter::repeat_n(1, x.rank() - 2));
    Ok(vec![Val::Data(cx.reshape(&y, &keep, &h))])
}

fn batchnorm(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    if n.int("training_mode", 0) != 0 || n.outputs.iter().skip(1).any(|o| !o.is_empty()) {
        return Err(cx.unsupported(
            n,
            "training mode (only inference BatchNormalization is imported)",
        ));
    }
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let mut ps = Vec::new();
    for i in 1..5 {
        let p = cx.data(n, i)?;
        if x.rank() < 2 || p.shape != [x.shape[1]] || p.dtype != x.dtype {
            return Err(cx.invalid(
                n,
                format!(
                    "parameter {i} of shape {:?} for input {:?}",
                    p.shape, x.shape
                ),
            ));
        }
        ps.push(p);
    }
    let t = x.dtype;
    let tn = t.name();
    let eps = lit(f64::from(n.float("epsilon", 1e-5)), t);
    let text = format!(
        "op @{{NAME}}(x: {tn}[N, C, ..S], g: {tn}[C], b: {tn}[C], mean: {tn}[C], var: {tn}[C]) -> (y: {tn}[N, C, ..S]) {{\n  y[n, c, ..i] = (x[n, c, ..i] - mean[c]) / sqrt(var[c] + {eps}) * g[c] + b[c]\n}}"
    );
    let op = cx.e.op("BatchNormalization", &text);
    let args = [&x, &ps[0], &ps[1], &ps[2], &ps[3]];
    Ok(vec![Val::Data(cx.e.apply(
        &h,
        &op,
        &[],
        &args,
        t,
        x.shape.clone(),
    ))])
}

fn lrn(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let h = hint(n);
    let size = n.int("size", 0);
    if x.rank() < 3 || size < 1 || !x.dtype.is_float() {
        return Err(cx.invalid(n, format!("input {:?} with size {size}", x.shape)));
    }
    let size = size as usize;
    let lo = (size - 1) / 2;
    let mut pads = vec![(0, 0); x.rank() - 1];
    pads[0] = (lo, size - 1 - lo);
    let xp = pad_spatial(cx, &x, &pads, "0.0", &format!("{h}_pad"));
    let w =
        cx.e.stmt(&format!("{h}_window"), "zeros", x.dtype, vec![size]);
    let t = x.dtype;
    let tn = t.name();
    let l = |v: f32| lit(f64::from(v), t);
    let scale = l(n.float("alpha", 1e-4) / size as f32);
    let (bias, beta) = (l(n.float("bias", 1.0)), l(n.float("beta", 0.75)));
    let text = format!(
        "op @{{NAME}}(x: {tn}[N, C, ..S], xp: {tn}[N, P, ..S], w: {tn}[K]) -> (y: {tn}[N, C, ..S]) {{\n  y[n, c, ..i] = x[n, c, ..i] / pow({bias} + {scale} * sum[k](xp[n, c + k, ..i] * xp[n, c + k, ..i] + w[k]), {beta})\n}}"
    );
    let op = cx.e.op("LRN", &text);
    Ok(vec![Val::Data(cx.e.apply(
        &h,
        &op,
        &[],
        &[&x, &xp, &w],
        t,
        x.shape.clone(),
    ))])
}

/// `ConvTranspose` as the `Conv` it equals: the input with `stride - 1` zeros between
/// elements (`interleave`), padded by `dilation * (k - 1) - pad` (or sliced where that is
/// negative), convolved at stride 1 in the same groups with the weight's channel axes swapped
/// within each group and its window reversed. All but the convolution are views.
fn conv_transpose(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let x = cx.data(n, 0)?;
    let w = cx.data(n, 1)?;
    let h = hint(n);
    let sp = x.rank().saturating_sub(2);
    let g = n.int("group", 1).max(1) as usize;
    if sp == 0
        || w.rank() != x.rank()
        || w.shape[0] != x.shape[1]
        || w.dtype != x.dtype
        || x.shape[1] % g != 0
    {
        return Err(cx.invalid(
            n,
            format!("input {:?} and weight {:?} in {g} groups", x.shape, w.shape),
        ));
    }
    let get = |name: &str, d: i64| n.ints(name).unwrap_or_else(|| vec![d; sp]);
    let (strides, dil, outpad) = (
        get("strides", 1),
        get("dilations", 1),
        get("output_padding", 0),
    );
    if strides.len() != sp || dil.len() != sp || outpad.len() != sp {
        return Err(cx.invalid(n, "attribute lengths do not match the spatial rank"));
    }
    let small = |v: &[i64], lo: i64| v.iter().all(|&s| (lo..=1024).contains(&s));
    if !small(&strides, 1) || !small(&dil, 1) || !small(&outpad, 0) {
        return Err(cx.unsupported(
            n,
            format!("strides {strides:?}, dilations {dil:?}, output_padding {outpad:?} (each at most 1024)"),
        ));
    }
    let pads = transpose_pads(cx, n, &x.shape[2..], &w.shape[2..], &strides, &dil, &outpad)?;
    let tiles = (0..sp).all(|i| strides[i] == w.shape[2 + i] as i64 && dil[i] == 1);
    let plain = pads.iter().chain(&outpad).all(|&p| p == 0);
    if g == 1 && sp == 2 && tiles && plain {
        return Ok(vec![Val::Data(transpose_tiles(cx, n, &x, &w, &h)?)]);
    }
    let mut up = upsample_zeros(cx, &x, &strides, &h);
    // Padding (negative: cropping) around the upsampled input.
    let mut crop = Vec::new();
    let mut pad = Vec::new();
    for i in 0..sp {
        let k = dil[i] * (w.shape[2 + i] as i64 - 1);
        let (lo, hi) = (k - pads[i], k - pads[i + sp] + outpad[i]);
        pad.push((lo.max(0) as usize, hi.max(0) as usize));
        crop.push(((-lo).max(0) as usize, (-hi).max(0) as usize));
    }
    up = crop_spatial(cx, n, up, &crop, &h)?;
    let up = pad_spatial(cx, &up, &pad, "0.0", &format!("{h}_pad"));
    // W [C_in, C_out/g, k..] -> [C_out, C_in/g, k..] (per group) with the window reversed.
    let wt = swap_channels(cx, &w, g, &h);
    let axes: Vec<String> = (2..w.rank()).map(|a| a.to_string()).collect();
    let wr = cx.e.stmt(
        &format!("{h}_wr"),
        &format!("reverse {} [{}]", wt.v(), axes.join(", ")),
        wt.dtype,
        wt.shape.clone(),
    );
    // The equivalent Conv node over the prepared values.
    let mut inputs = Vec::new();
    for (k, d) in [up, wr].into_iter().enumerate() {
        let name = format!("{h}\u{0}ct{k}");
        cx.vals.insert(name.clone(), Val::Data(d));
        inputs.push(name);
    }
    if let Some(b) = n.input(2) {
        inputs.push(b.to_string());
    }
    let conv_node = Node {
        op_type: "Conv".into(),
        inputs,
        attrs: vec![
            ("dilations".into(), Attr::Ints(dil)),
            ("group".into(), Attr::Int(g as i64)),
        ],
        ..n.clone()
    };
    conv(cx, &conv_node)
}

/// The bias port (`b: T[O]`) and term (` + b[o]`) of a contraction op, or nothing.
fn bias_terms(bias: bool, t: &str) -> (String, &'static str) {
    if bias {
        (format!(", b: {t}[O]"), " + b[o]")
    } else {
        (String::new(), "")
    }
}

/// A 2-D `ConvTranspose` whose kernel equals its strides (no padding, dilation 1, one group):
/// each output pixel is one contraction over the input channels, `y[n, o, i·K0 + a, j·K1 +
/// b] = Σc x[n, c, i, j]·w[c, o, a, b]`, computed as `[N, O, K0, K1, H, W]` (vectorised along
/// the input's rows) and transposed into place, with no zero-upsampled input and no padding.
fn transpose_tiles(cx: &mut Cx, n: &Node, x: &D, w: &D, h: &str) -> R<D> {
    let t = x.dtype.name();
    let (o, k0, k1) = (w.shape[1], w.shape[2], w.shape[3]);
    let bias = match cx.opt(n, 2)? {
        Some(_) => Some(cx.data(n, 2)?),
        None => None,
    };
    if bias
        .as_ref()
        .is_some_and(|b| b.shape != [o] || b.dtype != x.dtype)
    {
        return Err(cx.invalid(n, format!("a bias for {o} output channels")));
    }
    let (bport, bterm) = bias_terms(bias.is_some(), t);
    let text = format!(
        "op @{{NAME}}(x: {t}[N, C, H0, H1], w: {t}[C, O, K0, K1]{bport}) -> (y: {t}[N, O, K0, K1, H0, H1]) {{\n  y[n, o, a0, a1, i0, i1] = sum[c](x[n, c, i0, i1] * w[c, o, a0, a1]){bterm}\n}}"
    );
    let op = cx.e.op("ConvTransposeTiles", &text);
    let mut args = vec![x, w];
    if let Some(b) = &bias {
        args.push(b);
    }
    let (b0, h0, h1) = (x.shape[0], x.shape[2], x.shape[3]);
    let shape = vec![b0, o, k0, k1, h0, h1];
    let y =
        cx.e.apply(&format!("{h}_tiles"), &op, &[], &args, x.dtype, shape);
    let yt = cx.transpose(&y, &[0, 1, 4, 2, 5, 3], &format!("{h}_tt"));
    Ok(cx.reshape(&yt, &[b0, o, h0 * k0, h1 * k1], h))
}

/// `x` with `stride - 1` zeros between elements along each spatial axis (views: an
/// `interleave` with zeros, then a slice dropping the trailing zeros).
fn upsample_zeros(cx: &mut Cx, x: &D, strides: &[i64], h: &str) -> D {
    let mut up = x.clone();
    for (i, &st) in strides.iter().enumerate() {
        let (a, s) = (2 + i, st.max(1) as usize);
        if s > 1 {
            let z = cx.e.stmt(
                &format!("{h}_zeros{i}"),
                "zeros",
                up.dtype,
                up.shape.clone(),
            );
            let ops: Vec<String> = std::iter::once(up.v())
                .chain((1..s).map(|_| z.v()))
                .collect();
            let mut shape = up.shape.clone();
            shape[a] *= s;
            let il = cx.e.stmt(
                &format!("{h}_up{i}"),
                &format!("interleave {} axis {a}", ops.join(", ")),
                up.dtype,
                shape,
            );
            let mut parts: Vec<String> = vec![":".into(); up.rank()];
            let keep = (x.shape[a] - 1) * s + 1;
            parts[a] = format!("0:{keep}");
            let mut shape = il.shape.clone();
            shape[a] = keep;
            up = cx.e.stmt(
                &format!("{h}_up{i}s"),
                &format!("slice {} [{}]", il.v(), parts.join(", ")),
                up.dtype,
                shape,
            );
        }
    }
    up
}

/// `up` with `(left, right)` elements cut from each spatial axis (a slice; none: `up` itself).
fn crop_spatial(cx: &mut Cx, n: &Node, mut up: D, crop: &[(usize, usize)], h: &str) -> R<D> {
    if crop.iter().any(|&(l, r)| l + r > 0) {
        let mut parts: Vec<String> = vec![":".into(), ":".into()];
        let mut shape = up.shape.clone();
        for (i, &(l, r)) in crop.iter().enumerate() {
            let len = up.shape[2 + i];
            if l + r >= len {
                return Err(cx.invalid(n, "pads larger than the output"));
            }
            parts.push(format!("{l}:{}", len - r));
            shape[2 + i] = len - l - r;
        }
        up = cx.e.stmt(
            &format!("{h}_crop"),
            &format!("slice {} [{}]", up.v(), parts.join(", ")),
            up.dtype,
            shape,
        );
    }
    Ok(up)
}

/// The weight of a transposed convolution in `g` groups, `[C_in, O/g, k..]`, as a `Conv`
/// weight `[O, C_in/g, k..]`: the channel axes swapped within each group (views).
fn swap_channels(cx: &mut Cx, w: &D, g: usize, h: &str) -> D {
    let mut perm: Vec<usize> = (0..w.rank()).collect();
    if g == 1 {
        perm.swap(0, 1);
        return cx.transpose(w, &perm, &format!("{h}_wt"));
    }
    let (cg, og) = (w.shape[0] / g, w.shape[1]);
    let mut split = vec![g, cg, og];
    split.extend_from_slice(&w.shape[2..]);
    let ws = cx.reshape(w, &split, &format!("{h}_wsplit"));
    let mut perm: Vec<usize> = (0..ws.rank()).collect();
    perm.swap(1, 2);
    let wt = cx.transpose(&ws, &perm, &format!("{h}_wswap"));
    let mut merged = vec![g * og, cg];
    merged.extend_from_slice(&w.shape[2..]);
    cx.reshape(&wt, &merged, &format!("{h}_wt"))
}

/// The begin and end pads of a transposed convolution: `pads`, or from `output_shape` /
/// `auto_pad` (the ONNX formula: the total padding is the natural output size minus the one
/// asked for, split evenly, the odd one at the end for `SAME_UPPER`, else at the start).
fn transpose_pads(
    cx: &Cx,
    n: &Node,
    spatial: &[usize],
    kernel: &[usize],
    strides: &[i64],
    dil: &[i64],
    outpad: &[i64],
) -> R<Vec<i64>> {
    let sp = spatial.len();
    let auto = n.string("auto_pad").unwrap_or_else(|| "NOTSET".into());
    let asked = match (n.ints("output_shape"), auto.as_str()) {
        (Some(o), _) if o.len() >= sp => o[o.len() - sp..].to_vec(),
        (Some(o), _) => return Err(cx.invalid(n, format!("output_shape {o:?}"))),
        (None, "SAME_UPPER" | "SAME_LOWER") => {
            (0..sp).map(|i| spatial[i] as i64 * strides[i]).collect()
        }
        (None, "NOTSET" | "VALID") => {
            let pads = n.ints("pads").unwrap_or_else(|| vec![0; 2 * sp]);
            if pads.len() != 2 * sp || auto == "VALID" && pads.iter().any(|&p| p != 0) {
                return Err(cx.invalid(n, format!("pads {pads:?}")));
            }
            return Ok(pads);
        }
        (None, a) => return Err(cx.unsupported(n, format!("auto_pad `{a}`"))),
    };
    let mut pads = vec![0; 2 * sp];
    for i in 0..sp {
        let natural =
            strides[i] * (spatial[i] as i64 - 1) + outpad[i] + (kernel[i] as i64 - 1) * dil[i] + 1;
        let total = natural - asked[i];
        if total < 0 {
            return Err(cx.unsupported(
                n,
                format!("output_shape {asked:?} larger than the natural output"),
            ));
        }
        let (lo, hi) = match auto.as_str() {
            "SAME_UPPER" => (total / 2, total - total / 2),
            _ => (total - total / 2, total / 2),
        };
        pads[i] = lo;
        pads[i + sp] = hi;
    }
    Ok(pads)
}
