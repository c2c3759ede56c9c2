//! `Attention` (opsets 23–25) and `RotaryEmbedding` (opset 23, [`rotary`]): scaled dot-product attention as three TEG ops over the heads
//! grouped as `[B, G, R, ...]` (G key/value heads, R query heads per group, so multi-head,
//! grouped-query and multi-query attention are one form with no repeated K or V):
//! the scores `sum[d]((q·√s)·(k·√s))` (softcapped when asked), a softmax whose additive bias
//! (the mask, causal and sliding-window limits, the `nonpad_kv_seqlen` padding) is computed
//! in the kernel from index comparisons, and the weighted sum of V. A past key/value cache is
//! a `concat`, 3-D inputs are reshaped and transposed views. The semantics are those of the
//! `onnx` reference implementation, rounding included: a row whose bias is all −∞ gives zeros.

use super::emit::{lit, D};
use super::{broadcast_shapes, Cx, Val, R};
use crate::import::onnx::elem::from_f64s;
use crate::import::onnx::model::{dtype_of, Node};
use tapc_runtime::{DType, Tensor};

pub(super) fn lowering(op: &str) -> Option<super::Lower> {
    match op {
        "Attention" => Some(attention),
        "RotaryEmbedding" => Some(rotary),
        _ => None,
    }
}

/// The node's operands as `[B, G, R, I, D]` queries and `[B, G, J, ·]` keys and values
/// (after the cache), with what the kernels need to know about them.
struct Heads {
    q: D,
    k: D,
    v: D,
    /// Whether Q, K and V came as 3-D `[B, S, heads · size]`.
    flat: bool,
    /// Keys before this step's (the past cache's length): the causal frontier's offset.
    past: usize,
}

/// Where the bias comes from: the mask (as a view `[B, Hq, I, J]`) and `nonpad_kv_seqlen`.
struct Bias {
    mask: Option<D>,
    nonpad: Option<D>,
    causal: bool,
    left: i64,
    right: i64,
    past: usize,
    /// R, the query heads per key/value head (to index the mask's head `R·g + r`).
    rep: usize,
    /// I, the query length (the per-batch frontier is `nonpad[b] − I`).
    q_len: usize,
}

fn attention(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let h = n.outputs.first().cloned().unwrap_or_default();
    let heads = heads(cx, n, &h)?;
    let t = heads.q.dtype;
    if !t.is_float() {
        return Err(cx.unsupported(n, format!("{} operands", t.name())));
    }
    let [b, g, rep, i, dq] = heads.q.shape[..] else {
        unreachable!("queries are grouped to rank 5")
    };
    let (j, e) = (heads.k.shape[2], heads.v.shape[3]);
    let bias = bias(cx, n, &heads, [b, g * rep, i, j], &h)?;
    let scale = match n.attr("scale") {
        Some(_) => f64::from(n.float("scale", 1.0)),
        None => 1.0 / (dq as f64).sqrt(),
    };
    let s = scores(cx, n, &heads, scale.sqrt(), &format!("{h}_scores"));
    let ninf = cx.materialize(
        &format!("{h}_neginf"),
        &Tensor::new(vec![], from_f64s(t, &[f64::NEG_INFINITY])).expect("a scalar"),
    );
    let precision = softmax_precision(cx, n, t)?;
    let c = bias_value(cx, &s, &bias, &ninf, &format!("{h}_bias"));
    let p = softmax(cx, &s, c.as_ref(), &ninf, precision, &format!("{h}_probs"));
    let y = weighted(cx, &p, &heads.v, &format!("{h}_heads"));
    let y = if heads.flat {
        let yt = cx.transpose(&y, &[0, 3, 1, 2, 4], &format!("{h}_t"));
        cx.reshape(&yt, &[b, i, g * rep * e], &h)
    } else {
        cx.reshape(&y, &[b, g * rep, i, e], &h)
    };
    let qk = match n.int("qk_matmul_output_mode", 0) {
        0 | 1 => s,
        2 => with_bias(cx, &s, c.as_ref(), &format!("{h}_qk_bias")),
        3 => p,
        m => return Err(cx.invalid(n, format!("qk_matmul_output_mode {m}"))),
    };
    let qk = cx.reshape(&qk, &[b, g * rep, i, j], &super::views::out_hint(n, 3));
    Ok([y, heads.k, heads.v, qk]
        .into_iter()
        .map(Val::Data)
        .collect())
}

/// Q, K and V as 4-D heads (3-D inputs split by `q_num_heads`/`kv_num_heads`), the cache
/// prepended, and the queries grouped by key/value head.
fn heads(cx: &mut Cx, n: &Node, h: &str) -> R<Heads> {
    let (q, k, v) = (cx.data(n, 0)?, cx.data(n, 1)?, cx.data(n, 2)?);
    let flat = q.rank() == 3;
    if q.rank() != k.rank() || q.rank() != v.rank() || !(flat || q.rank() == 4) {
        return Err(cx.invalid(
            n,
            format!(
                "Q, K, V of shapes {:?} {:?} {:?}",
                q.shape, k.shape, v.shape
            ),
        ));
    }
    let (q4, k4, v4) = if flat {
        let hq = n.int("q_num_heads", 0).max(0) as usize;
        let hk = n.int("kv_num_heads", 0).max(0) as usize;
        if hq == 0 || hk == 0 {
            return Err(cx.invalid(n, "3-D inputs need q_num_heads and kv_num_heads"));
        }
        (
            split_heads(cx, n, &q, hq, &format!("{h}_q"))?,
            split_heads(cx, n, &k, hk, &format!("{h}_k"))?,
            split_heads(cx, n, &v, hk, &format!("{h}_v"))?,
        )
    } else {
        (q, k, v)
    };
    let (past, k4, v4) = with_cache(cx, n, k4, v4)?;
    let (hq, g) = (q4.shape[1], k4.shape[1]);
    let same = q4.shape[0] == k4.shape[0] && q4.shape[3] == k4.shape[3];
    if !same || hq % g != 0 || v4.shape[1] != g || v4.shape[..3] != k4.shape[..3] {
        return Err(cx.invalid(
            n,
            format!("heads {:?} {:?} {:?}", q4.shape, k4.shape, v4.shape),
        ));
    }
    let [b, _, i, d] = q4.shape[..] else {
        unreachable!("rank 4")
    };
    let q = cx.reshape(&q4, &[b, g, hq / g, i, d], &format!("{h}_qg"));
    Ok(Heads {
        q,
        k: k4,
        v: v4,
        flat,
        past,
    })
}

/// `[B, S, heads · size]` as `[B, heads, S, size]` (a reshape and a transpose).
fn split_heads(cx: &mut Cx, n: &Node, x: &D, heads: usize, h: &str) -> R<D> {
    let [b, s, w] = x.shape[..] else {
        unreachable!("rank 3")
    };
    if w % heads != 0 {
        return Err(cx.invalid(n, format!("hidden size {w} over {heads} heads")));
    }
    let x4 = cx.reshape(x, &[b, s, heads, w / heads], &format!("{h}_split"));
    Ok(cx.transpose(&x4, &[0, 2, 1, 3], &format!("{h}_heads")))
}

/// K and V with `past_key`/`past_value` concatenated in front (the present cache), and the
/// past length.
fn with_cache(cx: &mut Cx, n: &Node, k: D, v: D) -> R<(usize, D, D)> {
    let (pk, pv) = (cx.opt(n, 4)?.is_some(), cx.opt(n, 5)?.is_some());
    if pk != pv {
        return Err(cx.invalid(n, "past_key and past_value must be given together"));
    }
    if !pk {
        return Ok((0, k, v));
    }
    if cx.opt(n, 6)?.is_some() {
        return Err(cx.invalid(n, "nonpad_kv_seqlen cannot be combined with a past cache"));
    }
    let mut out = Vec::new();
    for (i, x) in [(4, k), (5, v)] {
        let p = cx.data(n, i)?;
        let fits = p.rank() == 4 && p.shape[..2] == x.shape[..2] && p.shape[3] == x.shape[3];
        if !fits || p.dtype != x.dtype {
            return Err(cx.invalid(n, format!("cache {:?} for {:?}", p.shape, x.shape)));
        }
        let mut shape = x.shape.clone();
        shape[2] += p.shape[2];
        let name = super::views::out_hint(n, out.len() + 1);
        let rhs = format!("concat {}, {} axis 2", p.v(), x.v());
        out.push((p.shape[2], cx.e.stmt(&name, &rhs, x.dtype, shape)));
    }
    let (v, k) = (out.pop().expect("two"), out.pop().expect("two"));
    Ok((k.0, k.1, v.1))
}

/// The bias's sources, checked: the mask broadcast to `[B, Hq, I, J]` (padded on J: the
/// kernel masks the padding), `nonpad_kv_seqlen`, the causal and window attributes.
fn bias(cx: &mut Cx, n: &Node, heads: &Heads, full: [usize; 4], h: &str) -> R<Bias> {
    let mask = match cx.opt(n, 3)? {
        Some(_) => Some(mask_view(cx, n, full, heads.q.dtype, h)?),
        None => None,
    };
    let nonpad = match cx.opt(n, 6)? {
        Some(_) => {
            let np = cx.data(n, 6)?;
            if np.shape != [full[0]] || np.dtype.is_float() || np.dtype == DType::Bool {
                return Err(cx.invalid(n, format!("nonpad_kv_seqlen {:?}", np.shape)));
            }
            Some(np)
        }
        None => None,
    };
    Ok(Bias {
        mask,
        nonpad,
        causal: n.int("is_causal", 0) != 0,
        left: n.int("left_window_size", -1),
        right: n.int("right_window_size", -1),
        past: heads.past,
        rep: heads.q.shape[2],
        q_len: full[2],
    })
}

/// The mask as a `[B, Hq, I, J]` view: broadcast (numpy rules), its last dim padded to J.
fn mask_view(cx: &mut Cx, n: &Node, full: [usize; 4], t: DType, h: &str) -> R<D> {
    let m = cx.data(n, 3)?;
    let jm = *m.shape.last().unwrap_or(&0);
    let mut target = full.to_vec();
    target[3] = jm;
    let ok = broadcast_shapes(&m.shape, &target).as_deref() == Some(&target[..]);
    if !ok || jm > full[3] || (m.dtype != DType::Bool && m.dtype != t) {
        return Err(cx.invalid(
            n,
            format!(
                "attn_mask {} {:?} for scores {full:?}",
                m.dtype.name(),
                m.shape
            ),
        ));
    }
    let mv = cx.broadcast(&m, &target, &format!("{h}_mask"));
    if jm == full[3] {
        return Ok(mv);
    }
    let zero = if m.dtype == DType::Bool {
        "false"
    } else {
        "0.0"
    };
    let rhs = format!(
        "pad {} [0:0, 0:0, 0:0, 0:{}] constant {zero}",
        mv.v(),
        full[3] - jm
    );
    Ok(cx
        .e
        .stmt(&format!("{h}_mask_pad"), &rhs, m.dtype, full.to_vec()))
}

/// `softmax_precision` (an ONNX element type) as the dtype the softmax runs in.
fn softmax_precision(cx: &Cx, n: &Node, t: DType) -> R<DType> {
    match n.attr("softmax_precision") {
        None => Ok(t),
        Some(_) => {
            let code = n.int("softmax_precision", 0) as i32;
            dtype_of(code)
                .filter(|d| d.is_float())
                .ok_or_else(|| cx.invalid(n, format!("softmax_precision {code}")))
        }
    }
}

/// `s[b, g, r, i, j] = sum[d]((q·√s)·(k·√s))`, softcapped as `tanh(x / c)·c` when `softcap`
/// is positive.
fn scores(cx: &mut Cx, n: &Node, heads: &Heads, root: f64, h: &str) -> D {
    let t = heads.q.dtype;
    let tn = t.name();
    let sc = lit(root, t);
    let dot = format!("sum[d]((q[b, g, r, i, d] * {sc}) * (k[b, g, j, d] * {sc}))");
    let cap = f64::from(n.float("softcap", 0.0));
    let body = if cap > 0.0 {
        let c = lit(cap, t);
        format!(
            "  t[b, g, r, i, j] = {dot}\n  s[b, g, r, i, j] = tanh(t[b, g, r, i, j] / {c}) * {c}"
        )
    } else {
        format!("  s[b, g, r, i, j] = {dot}")
    };
    let text = format!(
        "op @{{NAME}}(q: {tn}[B, G, R, I, D], k: {tn}[B, G, J, D]) -> (s: {tn}[B, G, R, I, J]) {{\n{body}\n}}"
    );
    let op = cx.e.op("AttentionScores", &text);
    let [b, g, r, i, _] = heads.q.shape[..] else {
        unreachable!("rank 5")
    };
    let shape = vec![b, g, r, i, heads.k.shape[2]];
    cx.e.apply(h, &op, &[], &[&heads.q, &heads.k], t, shape)
}

/// The ports after `s` that the bias reads, their arguments, and the bias of point
/// `[b, g, r, i, j]` as an expression of dtype `t` (0 or −∞ per limit, plus the mask; `None`
/// when there is no bias).
fn bias_expr<'a>(bias: &'a Bias, ninf: &'a D, t: DType) -> (String, Vec<&'a D>, Option<String>) {
    let tn = t.name();
    let (mut ports, mut args) = (String::new(), Vec::new());
    let mut conds = Vec::new();
    let mval = match &bias.mask {
        Some(m) => {
            ports.push_str(&format!(", m: {}[B, H, I, J]", m.dtype.name()));
            args.push(m);
            let at = format!("m[b, {} * g + r, i, j]", bias.rep);
            if m.dtype == DType::Bool {
                format!("select({at}, 0.0, ninf[])")
            } else {
                at
            }
        }
        None => String::new(),
    };
    // The causal and window frontier: query i sees up to key i + offset.
    let off = match &bias.nonpad {
        Some(np) => {
            ports.push_str(&format!(", n: {}[B]", np.dtype.name()));
            args.push(np);
            conds.push("j < n[b]".to_string());
            format!("n[b] - {}", bias.q_len)
        }
        None => bias.past.to_string(),
    };
    if bias.causal {
        conds.push(format!("j <= i + {off}"));
    }
    if bias.left >= 0 {
        conds.push(format!("i + {off} - j <= {}", bias.left));
    }
    if bias.right >= 0 {
        conds.push(format!("j - i - ({off}) <= {}", bias.right));
    }
    ports.push_str(&format!(", ninf: {tn}[]"));
    args.push(ninf);
    let limits = format!("select({}, 0.0, ninf[])", conds.join(" && "));
    let expr = match (mval.is_empty(), conds.is_empty()) {
        (true, true) => None,
        (false, true) => Some(mval),
        (true, false) => Some(limits),
        (false, false) => Some(format!("{mval} + {limits}")),
    };
    (ports, args, expr)
}

/// The additive bias `[B, G, R, I, J]` as a value (`None` when there is none): its own op,
/// since a reduction over j needs an access that fixes j's extent (E0033).
fn bias_value(cx: &mut Cx, s: &D, bias: &Bias, ninf: &D, h: &str) -> Option<D> {
    let tn = s.dtype.name();
    let (ports, args, b) = bias_expr(bias, ninf, s.dtype);
    let b = b?;
    // `s` gives the op its dimensions (the bias reads only the mask and indices).
    let text = format!(
        "op @{{NAME}}(s: {tn}[B, G, R, I, J]{ports}) -> (y: {tn}[B, G, R, I, J]) {{\n  y[b, g, r, i, j] = {b}\n}}"
    );
    let op = cx.e.op("AttentionBias", &text);
    let mut all = vec![s];
    all.extend(args);
    Some(cx.e.apply(h, &op, &[], &all, s.dtype, s.shape.clone()))
}

/// The guarded softmax over j of `s + bias` in dtype `p`, rounded to `s`'s dtype: a row whose
/// bias is all −∞ is zeros, one whose values are all −∞ too.
fn softmax(cx: &mut Cx, s: &D, bias: Option<&D>, ninf: &D, p: DType, h: &str) -> D {
    let t = s.dtype;
    let (tn, pn) = (t.name(), p.name());
    let at = "[b, g, r, i]";
    let x = match bias {
        Some(_) => format!("{pn}(s[b, g, r, i, j] + c[b, g, r, i, j])"),
        None => format!("{pn}(s[b, g, r, i, j])"),
    };
    let div = format!("exp({x} - mz{at}) / select(sm{at} == {pn}(0.0), {pn}(1.0), sm{at})");
    let (port, mb, last) = match bias {
        Some(_) => (
            format!(", c: {tn}[B, G, R, I, J]"),
            format!("  mb{at} = max[j](c[b, g, r, i, j])\n"),
            format!("select(mb{at} == ninf[], {pn}(0.0), {div})"),
        ),
        None => (String::new(), String::new(), div),
    };
    let text = format!(
        "op @{{NAME}}(s: {tn}[B, G, R, I, J]{port}, ninf: {tn}[]) -> (p: {tn}[B, G, R, I, J]) {{\n  mx{at} = max[j]({x})\n  mz{at} = select(mx{at} == {pn}(ninf[]), {pn}(0.0), mx{at})\n  sm{at} = sum[j](exp({x} - mz{at}))\n{mb}  p[b, g, r, i, j] = {tn}({last})\n}}"
    );
    let op = cx.e.op("AttentionSoftmax", &text);
    let args: Vec<&D> = [Some(s), bias, Some(ninf)].into_iter().flatten().collect();
    cx.e.apply(h, &op, &[], &args, t, s.shape.clone())
}

/// `s + bias` (`qk_matmul_output_mode` 2).
fn with_bias(cx: &mut Cx, s: &D, bias: Option<&D>, h: &str) -> D {
    let Some(c) = bias else {
        return s.clone();
    };
    let tn = s.dtype.name();
    let text = format!(
        "op @{{NAME}}(s: {tn}[B, G, R, I, J], c: {tn}[B, G, R, I, J]) -> (y: {tn}[B, G, R, I, J]) {{\n  y[b, g, r, i, j] = s[b, g, r, i, j] + c[b, g, r, i, j]\n}}"
    );
    let op = cx.e.op("AttentionAddBias", &text);
    cx.e.apply(h, &op, &[], &[s, c], s.dtype, s.shape.clone())
}

/// `y[b, g, r, i, e] = sum[j](p · v)`.
fn weighted(cx: &mut Cx, p: &D, v: &D, h: &str) -> D {
    let tn = p.dtype.name();
    let text = format!(
        "op @{{NAME}}(p: {tn}[B, G, R, I, J], v: {tn}[B, G, J, E]) -> (y: {tn}[B, G, R, I, E]) {{\n  y[b, g, r, i, e] = sum[j](p[b, g, r, i, j] * v[b, g, j, e])\n}}"
    );
    let op = cx.e.op("AttentionValues", &text);
    let mut shape = p.shape[..4].to_vec();
    shape.push(v.shape[3]);
    cx.e.apply(h, &op, &[], &[p, v], p.dtype, shape)
}

/// `RotaryEmbedding` (opset 23): on `x` seen as `[B, S, H, D]`, the first `R` features rotated
/// in pairs (halves, or even/odd with `interleaved`) by the cos/sin caches, gathered by
/// `position_ids` when given, as one op writing `[B, S, H, 2, R/2]` (`[.., R/2, 2]`
/// interleaved) and a reshape; the other `D − R` features are concatenated unchanged.
fn rotary(cx: &mut Cx, n: &Node) -> R<Vec<Val>> {
    let h = n.outputs.first().cloned().unwrap_or_default();
    let x = cx.data(n, 0)?;
    let (c, s) = (cx.data(n, 1)?, cx.data(n, 2)?);
    let x4 = match x.rank() {
        4 => cx.transpose(&x, &[0, 2, 1, 3], &format!("{h}_bshd")),
        3 => {
            let heads = n.int("num_heads", 0).max(0) as usize;
            if heads == 0 || x.shape[2] % heads != 0 {
                return Err(cx.invalid(n, format!("3-D input {:?} over {heads} heads", x.shape)));
            }
            let [b, sl, w] = x.shape[..] else {
                unreachable!("rank 3")
            };
            cx.reshape(&x, &[b, sl, heads, w / heads], &format!("{h}_bshd"))
        }
        _ => return Err(cx.invalid(n, format!("input of shape {:?}", x.shape))),
    };
    let [b, sl, hs, d] = x4.shape[..] else {
        unreachable!("rank 4")
    };
    let r = match n.int("rotary_embedding_dim", 0) {
        0 => d,
        r if r > 0 && r as usize <= d && r % 2 == 0 => r as usize,
        r => return Err(cx.invalid(n, format!("rotary_embedding_dim {r} for head size {d}"))),
    };
    let half = r / 2;
    let pos = match cx.opt(n, 3)? {
        Some(_) => Some(cx.data(n, 3)?),
        None => None,
    };
    let caches_fit = match &pos {
        Some(p) => p.shape == [b, sl] && c.rank() == 2 && c.shape[1] == half,
        None => c.shape == [b, sl, half],
    };
    if !caches_fit || c.shape != s.shape || c.dtype != x.dtype || s.dtype != x.dtype {
        return Err(cx.invalid(
            n,
            format!(
                "caches {:?} {:?} for half rotation {half}",
                c.shape, s.shape
            ),
        ));
    }
    let rot = rotate(
        cx,
        &x4,
        &c,
        &s,
        pos.as_ref(),
        n.int("interleaved", 0) != 0,
        &format!("{h}_rot"),
    );
    let rot = cx.reshape(&rot, &[b, sl, hs, r], &format!("{h}_rot_flat"));
    let y4 = if r == d {
        rot
    } else {
        let rest = format!("slice {} [:, :, :, {r}:{d}]", x4.v());
        let rest =
            cx.e.stmt(&format!("{h}_pass"), &rest, x.dtype, vec![b, sl, hs, d - r]);
        let rhs = format!("concat {}, {} axis 3", rot.v(), rest.v());
        cx.e.stmt(&format!("{h}_bshd_y"), &rhs, x.dtype, vec![b, sl, hs, d])
    };
    let y = if x.rank() == 4 {
        cx.transpose(&y4, &[0, 2, 1, 3], &h)
    } else {
        cx.reshape(&y4, &x.shape, &h)
    };
    Ok(vec![Val::Data(y)])
}

/// The rotated pairs: `t = 0` the real part `c·x1 − s·x2`, `t = 1` the imaginary `s·x1 + c·x2`.
fn rotate(cx: &mut Cx, x: &D, c: &D, s: &D, pos: Option<&D>, interleaved: bool, h: &str) -> D {
    let tn = x.dtype.name();
    let (x1, x2) = if interleaved {
        ("x[b, q, h, 2 * k]", "x[b, q, h, 2 * k + 1]")
    } else {
        ("x[b, q, h, k]", "x[b, q, h, k + K]")
    };
    let (cache, at, pport) = match pos {
        Some(p) => (
            format!("{tn}[P, K]"),
            "[p[b, q], k]",
            format!(", p: {}[B, S]", p.dtype.name()),
        ),
        None => (format!("{tn}[B, S, K]"), "[b, q, k]", String::new()),
    };
    let (out, lhs) = if interleaved {
        ("K, 2", "k, t")
    } else {
        ("2, K", "t, k")
    };
    let body = format!("select(t == 0, c{at} * {x1} - s{at} * {x2}, s{at} * {x1} + c{at} * {x2})");
    let text = format!(
        "op @{{NAME}}(x: {tn}[B, S, H, D], c: {cache}, s: {cache}{pport}) -> (y: {tn}[B, S, H, {out}]) {{\n  y[b, q, h, {lhs}] = {body}\n}}"
    );
    let op = cx.e.op("RotaryEmbedding", &text);
    let half = c.shape[c.rank() - 1];
    let mut shape = x.shape[..3].to_vec();
    shape.extend(if interleaved { [half, 2] } else { [2, half] });
    let args: Vec<&D> = [Some(x), Some(c), Some(s), pos]
        .into_iter()
        .flatten()
        .collect();
    cx.e.apply(h, &op, &[], &args, x.dtype, shape)
}
