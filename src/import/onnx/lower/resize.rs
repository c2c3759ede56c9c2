//! `Resize` (and `Upsample`): every mode (`nearest`, `linear`, `cubic`) with the coordinate
//! transformations `half_pixel`, `pytorch_half_pixel`, `align_corners` and `asymmetric`, at
//! any scale. Where each output index `e` reads input `floor(e / f)` for integer factors `f`
//! (nearest upsampling, as U-Net-style necks do) the result is a view (`reshape`,
//! `broadcast`, `reshape`). Otherwise each resized axis is one separable kernel over an
//! `[outer, D, inner]` view that sums K taps per output index, `y[o, e, i] = sum[k](x[o,
//! idx[e, k], i] * w[e, k])`, with the tap indices and weights computed here, in f32 as
//! onnxruntime does (K is 1 for nearest, 2 for linear, 4 for cubic).

use super::views::{apply_view, out_hint, View};
use super::{Cx, Val, R};
use crate::import::onnx::elem;
use crate::import::onnx::model::Node;
use tapc_runtime::{DType, Tensor};

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    Some(match op {
        "Resize" | "Upsample" => resize,
        _ => return None,
    })
}

/// The longest resized axis whose tap table is built at import.
const MAX_AXIS: usize = 1 << 24;

/// The attributes that decide which input elements an output element reads.
struct Mode {
    mode: String,
    ctm: String,
    near: String,
    cubic_a: f32,
    exclude_outside: bool,
}

/// The tap table of one axis: `k` taps per output index, flat `[out, k]`.
struct Taps {
    k: usize,
    idx: Vec<i64>,
    w: Vec<f32>,
}

fn mode(cx: &Cx, n: &Node) -> R<Mode> {
    let old = n.opset < 11;
    let mut mode = n.string("mode").unwrap_or_else(|| "nearest".into());
    if matches!(mode.as_str(), "bilinear" | "trilinear") {
        mode = "linear".into();
    }
    let ctm = match old {
        true => "asymmetric".into(),
        false => n
            .string("coordinate_transformation_mode")
            .unwrap_or_else(|| "half_pixel".into()),
    };
    let near = match old {
        true => "simple".into(),
        false => n
            .string("nearest_mode")
            .unwrap_or_else(|| "round_prefer_floor".into()),
    };
    let known_ctm = [
        "half_pixel",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
    ];
    let known_near = [
        "round_prefer_floor",
        "round_prefer_ceil",
        "floor",
        "ceil",
        "simple",
    ];
    if !["nearest", "linear", "cubic"].contains(&mode.as_str())
        || !known_ctm.contains(&ctm.as_str())
        || !known_near.contains(&near.as_str())
    {
        return Err(cx.unsupported(
            n,
            format!("mode `{mode}` with `{ctm}` and nearest_mode `{near}` (coordinate transformations: {})", known_ctm.join(", ")),
        ));
    }
    if n.ints("axes").is_some()
        || n.string("keep_aspect_ratio_policy")
            .is_some_and(|p| p != "stretch")
    {
        return Err(cx.unsupported(n, "`axes` or a `keep_aspect_ratio_policy`"));
    }
    Ok(Mode {
        mode,
        ctm,
        near,
        cubic_a: n.float("cubic_coeff_a", -0.75),
        exclude_outside: n.int("exclude_outside", 0) != 0,
    })
}

/// The output size and the scale of each axis (from `scales` or `sizes`; as onnxruntime, the
/// scale of a `sizes` axis is `out / in` in f32).
fn sizes(cx: &Cx, n: &Node, shape: &[usize]) -> R<(Vec<usize>, Vec<f32>)> {
    let (si, zi) = match n.opset {
        o if o < 9 => (usize::MAX, usize::MAX),
        o if o < 11 => (1, usize::MAX),
        _ => (2, 3),
    };
    let scales = match si {
        usize::MAX => n
            .floats("scales")
            .map(|v| v.iter().map(|&f| f64::from(f)).collect()),
        _ => cx
            .konst(n, si, "scales")?
            .map(|t| elem::to_f64s(&t.data))
            .filter(|v| !v.is_empty()),
    };
    let sizes = match zi {
        usize::MAX => None,
        _ => cx.ints_in(n, zi, "sizes")?,
    };
    let (out, sc): (Vec<usize>, Vec<f32>) = match (scales, sizes) {
        (Some(s), _) if s.len() == shape.len() && s.iter().all(|&f| f > 0.0) => shape
            .iter()
            .zip(&s)
            .map(|(&d, &f)| (((d as f32) * f as f32).floor() as usize, f as f32))
            .unzip(),
        (_, Some(z)) if z.len() == shape.len() && z.iter().all(|&v| v > 0) => shape
            .iter()
            .zip(&z)
            .map(|(&d, &o)| (o as usize, o as f32 / d as f32))
            .unzip(),
        _ => {
            return Err(cx.invalid(
                n,
                "neither positive `scales` nor `sizes` of the input's rank",
            ))
        }
    };
    if shape.contains(&0) || out.contains(&0) {
        return Err(cx.invalid(n, format!("resizing {shape:?} to {out:?}")));
    }
    let fits = tapc_runtime::checked_numel(&out).is_some_and(|k| k < 1 << 40);
    if !fits || out.iter().any(|&d| d > MAX_AXIS) {
        return Err(cx.unsupported(
            n,
            format!("resizing {shape:?} to {out:?}: an axis over {MAX_AXIS} or a result too large"),
        ));
    }
    Ok((out, sc))
}

/// Where output index `e` of `len_out` falls in an input of `len_in` (onnxruntime's
/// `GetOriginalCoordinate`, in f32).
fn original(ctm: &str, e: usize, scale: f32, len_in: usize, len_out: usize) -> f32 {
    let x = e as f32;
    match ctm {
        "half_pixel" => (x + 0.5) / scale - 0.5,
        "pytorch_half_pixel" if len_out > 1 => (x + 0.5) / scale - 0.5,
        "pytorch_half_pixel" => 0.0,
        "align_corners" if len_out == 1 => 0.0,
        "align_corners" => x * (len_in as f32 - 1.0) / (len_out as f32 - 1.0),
        _ => x / scale,
    }
}

/// The nearest input index of coordinate `x` under `near` (before clamping).
fn nearest(near: &str, x: f32, down: bool) -> i64 {
    match near {
        "round_prefer_floor" if x == (x as i64) as f32 + 0.5 => x as i64,
        "round_prefer_floor" | "round_prefer_ceil" => x.round() as i64,
        "floor" => x.floor() as i64,
        "ceil" => x.ceil() as i64,
        _ if down => x.ceil() as i64,
        _ => x as i64,
    }
}

/// The four cubic weights of fraction `t` (Keys' kernel with coefficient `a`).
fn cubic(t: f32, a: f32) -> [f32; 4] {
    let far = |s: f32| ((a * s - 5.0 * a) * s + 8.0 * a) * s - 4.0 * a;
    let near = |s: f32| ((a + 2.0) * s - (a + 3.0)) * s * s + 1.0;
    [far(t + 1.0), near(t), near(1.0 - t), far(2.0 - t)]
}

/// The taps of one axis resized from `len_in` to `len_out` at `scale`.
fn taps(m: &Mode, len_in: usize, len_out: usize, scale: f32) -> Taps {
    let k = match m.mode.as_str() {
        "nearest" => 1,
        "linear" => 2,
        _ => 4,
    };
    let last = len_in as i64 - 1;
    let (mut idx, mut w) = (Vec::new(), Vec::new());
    for e in 0..len_out {
        let x = original(&m.ctm, e, scale, len_in, len_out);
        match k {
            1 => {
                idx.push(nearest(&m.near, x, scale < 1.0).clamp(0, last));
                w.push(1.0);
            }
            2 => {
                let xc = x.clamp(0.0, last as f32);
                let i0 = (xc as i64).min(last);
                let t = xc - i0 as f32;
                idx.extend([i0, (i0 + 1).min(last)]);
                w.extend([1.0 - t, t]);
            }
            _ => {
                let base = x.floor();
                let mut c = cubic(x - base, m.cubic_a);
                let at: Vec<i64> = (0..4)
                    .map(|j| (base as i64).saturating_add(j - 1))
                    .collect();
                if m.exclude_outside {
                    for (cj, &i) in c.iter_mut().zip(&at) {
                        if !(0..=last).contains(&i) {
                            *cj = 0.0;
                        }
                    }
                    let sum: f32 = c.iter().sum();
                    c.iter_mut().for_each(|cj| *cj /= sum);
                }
                idx.extend(at.iter().map(|&i| i.clamp(0, last)));
                w.extend(c);
            }
        }
    }
    Taps { k, idx, w }
}

impl Taps {
    /// The axis keeps its size `len_in` and output index `e` reads input `e` alone.
    fn identity(&self, len_in: usize) -> bool {
        let rows = self.idx.chunks(self.k).zip(self.w.chunks(self.k));
        self.idx.len() == len_in * self.k
            && rows.enumerate().all(|(e, (i, w))| {
                i.iter()
                    .zip(w)
                    .all(|(&i, &w)| w == 0.0 || (i == e as i64 && w == 1.0))
            })
    }
    /// The integer factor `f` when nearest output index `e` reads input `floor(e / f)`.
    fn floor_factor(&self, len_in: usize) -> Option<usize> {
        let len_out = self.idx.len() / self.k;
        let f = len_out / len_in;
        let fits = self.k == 1 && f >= 1 && len_out == f * len_in;
        let reads = || {
            self.idx
                .iter()
                .enumerate()
                .all(|(e, &i)| i == (e / f) as i64)
        };
        (fits && reads()).then_some(f)
    }
}

fn resize(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let v = cx.val(n, 0)?.clone();
    let shape = v.shape().to_vec();
    let m = mode(cx, n)?;
    let (out, scales) = sizes(cx, n, &shape)?;
    let tables: Vec<Taps> = (0..shape.len())
        .map(|a| taps(&m, shape[a], out[a], scales[a]))
        .collect();
    let factors: Option<Vec<usize>> = tables
        .iter()
        .zip(&shape)
        .map(|(t, &d)| t.floor_factor(d))
        .collect();
    if let Some(f) = factors {
        return Ok(vec![upsample_view(cx, n, &v, &f)]);
    }
    if n.int("antialias", 0) != 0 && m.mode != "nearest" && scales.iter().any(|&s| s < 1.0) {
        return Err(cx.unsupported(n, "`antialias` when downsampling"));
    }
    if !v.dtype().is_float() && m.mode != "nearest" {
        return Err(cx.unsupported(n, format!("{} mode on {}", m.mode, v.dtype().name())));
    }
    let h = out_hint(n, 0);
    let mut x = cx.data(n, 0)?;
    for (a, t) in tables.iter().enumerate() {
        if !t.identity(shape[a]) {
            x = resize_axis(cx, &x, a, t, &format!("{h}_ax{a}"));
        }
    }
    Ok(vec![Val::Data(cx.reshape(&x, &out, &h))])
}

/// Nearest upsampling by integer factors `f` as views: each axis gains a broadcast axis of
/// size `f`, then the pairs are merged.
fn upsample_view(cx: &mut Cx, n: &Node, v: &Val, f: &[usize]) -> Val {
    let shape = v.shape().to_vec();
    let pairs: Vec<usize> = shape.iter().flat_map(|&d| [d, 1]).collect();
    let wide: Vec<usize> = shape.iter().zip(f).flat_map(|(&d, &k)| [d, k]).collect();
    let out: Vec<usize> = shape.iter().zip(f).map(|(&d, &k)| d * k).collect();
    let h = out_hint(n, 0);
    let a = apply_view(cx, &format!("{h}_pairs"), v, &View::Reshape(pairs));
    let b = apply_view(cx, &format!("{h}_wide"), &a, &View::Broadcast(wide));
    apply_view(cx, &h, &b, &View::Reshape(out))
}

/// Axis `a` of `x` resized by the taps `t`: one kernel over an `[outer, D, inner]` view.
fn resize_axis(cx: &mut Cx, x: &super::emit::D, a: usize, t: &Taps, h: &str) -> super::emit::D {
    let len_out = t.idx.len() / t.k;
    let x3 = cx.around_axis(x, a, &format!("{h}_in"));
    let (outer, inner) = (x3.shape[0], x3.shape[2]);
    let ty = x.dtype.name();
    let idx = Tensor::new(vec![len_out, t.k], elem::from_i64s(DType::I64, &t.idx))
        .expect("tap table size");
    let w: Vec<f64> = t.w.iter().map(|&w| f64::from(w)).collect();
    let wt = Tensor::new(vec![len_out, t.k], elem::from_f64s(x.dtype, &w)).expect("tap table size");
    let idx = cx.materialize(&format!("{h}_idx"), &idx);
    let (text, args) = if t.k == 1 {
        let text = format!(
            "op @{{NAME}}(x: {ty}[O, D, I], idx: i64[E, K]) -> (y: {ty}[O, E, I]) {{\n  y[o, e, i] = x[o, idx[e, 0], i]\n}}"
        );
        (text, vec![x3, idx])
    } else {
        let wt = cx.materialize(&format!("{h}_w"), &wt);
        let text = format!(
            "op @{{NAME}}(x: {ty}[O, D, I], idx: i64[E, K], w: {ty}[E, K]) -> (y: {ty}[O, E, I]) {{\n  y[o, e, i] = sum[k](x[o, idx[e, k], i] * w[e, k])\n}}"
        );
        (text, vec![x3, idx, wt])
    };
    let op = cx.e.op(
        if t.k == 1 {
            "ResizeNearest"
        } else {
            "ResizeTaps"
        },
        &text,
    );
    let refs: Vec<&super::emit::D> = args.iter().collect();
    let y = cx.e.apply(
        &format!("{h}_y"),
        &op,
        &[],
        &refs,
        x.dtype,
        vec![outer, len_out, inner],
    );
    let mut shape = x.shape.clone();
    shape[a] = len_out;
    cx.reshape(&y, &shape, h)
}
