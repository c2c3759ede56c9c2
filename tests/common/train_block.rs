//! One training step of a GPT-2-style transformer block as TEG text, at any size: the block of
//! `examples/transformer.teg` (pre-LayerNorm, causal multi-head attention through views,
//! softmax, tanh GELU, residuals) with its 12 weights and biases as state, the loss
//! `mean(y²)`, their gradients from `grad`, and AdamW on each (examples/train_mlp.teg's, with
//! the bias corrections computed once per step as optax does),
//! the moments and the step count also state. `benches/native.rs` runs it at GPT-2-small's
//! sizes (the `train_block` workload, issue 19's bar); `tests/native/train_block.rs` checks
//! its gradients against `jax.grad` at small sizes (`grads = true` also sinks them).

/// The block's sizes: tokens, width, heads and FFN width (the head width is `d / h`).
#[derive(Clone, Copy, Debug)]
pub struct Sizes {
    pub t: usize,
    pub d: usize,
    pub h: usize,
    pub f: usize,
}

/// GPT-2 small at 1,024 tokens: issue 19's benchmark.
pub const GPT2_SMALL: Sizes = Sizes {
    t: 1024,
    d: 768,
    h: 12,
    f: 3072,
};

/// The block's parameters in `grad`'s order, with their shapes (`D`, `3D`, `F`).
pub fn params(s: Sizes) -> Vec<(&'static str, Vec<usize>)> {
    let (d, f) = (s.d, s.f);
    vec![
        ("g1", vec![d]),
        ("b1", vec![d]),
        ("w_qkv", vec![d, 3 * d]),
        ("b_qkv", vec![3 * d]),
        ("w_o", vec![d, d]),
        ("b_o", vec![d]),
        ("g2", vec![d]),
        ("b2", vec![d]),
        ("w_fc", vec![d, f]),
        ("b_fc", vec![f]),
        ("w_proj", vec![f, d]),
        ("b_proj", vec![d]),
    ]
}

/// AdamW's hyperparameters (optax.adamw's arguments): lr, b1, b2, eps, weight decay.
pub const ADAMW: [(&str, &str); 5] = [
    ("lr", "0.0001"),
    ("beta1", "0.9"),
    ("beta2", "0.999"),
    ("eps", "0.00000001"),
    ("wd", "0.01"),
];

const OPS: &str = "op @layernorm(x: f32[T, D], g: f32[D], b: f32[D]) -> (y: f32[T, D]) {
  mu[t] = sum[d](x[t, d]) / f32(D)
  var[t] = sum[d]((x[t, d] - mu[t]) * (x[t, d] - mu[t])) / f32(D)
  y[t, d] = (x[t, d] - mu[t]) / sqrt(var[t] + 1e-5) * g[d] + b[d]
}

op @linear(x: f32[T, K], w: f32[K, N], b: f32[N]) -> (y: f32[T, N]) {
  y[t, n] = sum[k](x[t, k] * w[k, n]) + b[n]
}

op @causal_scores(q: f32[H, T, E], k: f32[H, E, T]) -> (s: f32[H, T, T]) {
  s[h, t, u] = select(u <= t, sum[e](q[h, t, e] * k[h, e, u]) / sqrt(f32(E)), -1e30)
}

op @softmax(x: f32[H, T, S]) -> (y: f32[H, T, S]) {
  m[h, t] = max[u](x[h, t, u])
  z[h, t] = sum[u](exp(x[h, t, u] - m[h, t]))
  y[h, t, u] = exp(x[h, t, u] - m[h, t]) / z[h, t]
}

op @attend(p: f32[H, T, S], v: f32[H, S, E]) -> (o: f32[T, H, E]) {
  o[t, h, e] = sum[u](p[h, t, u] * v[h, u, e])
}

op @gelu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = 0.5 * x[..i] * (1.0 + tanh(0.7978845608 * (x[..i] + 0.044715 * x[..i] * x[..i] * x[..i])))
}

op @add(a: f32[..S], b: f32[..S]) -> (c: f32[..S]) {
  c[..i] = a[..i] + b[..i]
}

op @meansq(y: f32[T, D]) -> (l: f32[]) {
  l[] = sum[t, d](y[t, d] * y[t, d]) / f32(T * D)
}

op @count(t: f32[]) -> (t_next: f32[]) {
  t_next[] = t[] + 1.0
}

// The step's bias corrections 1 - β^t, once per step (as optax computes them: scalars).
op @corrections(t: f32[], b1: f32[], b2: f32[]) -> (c1: f32[], c2: f32[]) {
  c1[] = 1.0 - pow(b1[], t[])
  c2[] = 1.0 - pow(b2[], t[])
}

op @adamw(w: f32[..S], m: f32[..S], v: f32[..S], g: f32[..S], c1: f32[], c2: f32[], lr: f32[],
          b1: f32[], b2: f32[], eps: f32[], wd: f32[])
    -> (w_next: f32[..S], m_next: f32[..S], v_next: f32[..S]) {
  mt[..i] = b1[] * m[..i] + (1.0 - b1[]) * g[..i]
  vt[..i] = b2[] * v[..i] + (1.0 - b2[]) * g[..i] * g[..i]
  m_next[..i] = mt[..i]
  v_next[..i] = vt[..i]
  w_next[..i] = w[..i] - lr[] * (mt[..i] / c1[] / (sqrt(vt[..i] / c2[]) + eps[]) + wd[] * w[..i])
}
";

fn ty(shape: &[usize]) -> String {
    let dims: Vec<String> = shape.iter().map(usize::to_string).collect();
    format!("f32[{}]", dims.join(", "))
}

/// The forward block from `%x` to `%y` (examples/transformer.teg's statements).
fn forward(s: Sizes) -> String {
    let (d, h, e) = (s.d, s.h, s.d / s.h);
    format!(
        "  %h = apply @layernorm(%x, %g1, %b1)
  %qkv = apply @linear(%h, %w_qkv, %b_qkv)
  %q = slice %qkv [:, 0:{d}]
  %k = slice %qkv [:, {d}:{d2}]
  %v = slice %qkv [:, {d2}:{d3}]
  %qh = reshape %q [-1, {h}, {e}]
  %kh = reshape %k [-1, {h}, {e}]
  %vh = reshape %v [-1, {h}, {e}]
  %qt = transpose %qh [1, 0, 2]
  %kt = transpose %kh [1, 2, 0]
  %vt = transpose %vh [1, 0, 2]
  %s = apply @causal_scores(%qt, %kt)
  %p = apply @softmax(%s)
  %o = apply @attend(%p, %vt)
  %om = reshape %o [-1, {d}]
  %a = apply @linear(%om, %w_o, %b_o)
  %x1 = apply @add(%x, %a)
  %h2 = apply @layernorm(%x1, %g2, %b2)
  %f = apply @linear(%h2, %w_fc, %b_fc)
  %gf = apply @gelu(%f)
  %m = apply @linear(%gf, %w_proj, %b_proj)
  %y = apply @add(%x1, %m)
  %loss = apply @meansq(%y)
",
        d2 = 2 * d,
        d3 = 3 * d
    )
}

/// The whole program: `grads` also sinks every gradient as `@d_NAME`.
pub fn source(s: Sizes, grads: bool) -> String {
    let ps = params(s);
    let mut g = format!(
        "{OPS}\ngraph @train_block {{\n  %x = source @x : {}\n",
        ty(&[s.t, s.d])
    );
    for (name, value) in ADAMW {
        g += &format!("  %{name} = full {value} : f32[]\n");
    }
    for (p, shape) in &ps {
        for pre in ["", "m_", "v_"] {
            g += &format!("  %{pre}{p} = state @{pre}{p} : {}\n", ty(shape));
        }
    }
    g += "  %t = state @t : f32[]\n";
    g += &forward(s);
    let names: Vec<&str> = ps.iter().map(|(p, _)| *p).collect();
    let outs: Vec<String> = names.iter().map(|p| format!("%d_{p}")).collect();
    let wrt: Vec<String> = names.iter().map(|p| format!("%{p}")).collect();
    g += &format!(
        "  {} = grad %loss wrt {}\n",
        outs.join(", "),
        wrt.join(", ")
    );
    g += "  %t2 = apply @count(%t)\n  %c1, %c2 = apply @corrections(%t2, %beta1, %beta2)\n";
    for p in &names {
        g += &format!(
            "  %n_{p}, %nm_{p}, %nv_{p} = apply @adamw(%{p}, %m_{p}, %v_{p}, %d_{p}, %c1, %c2, %lr, %beta1, %beta2, %eps, %wd)\n"
        );
        g += &format!("  update @{p} %n_{p}\n  update @m_{p} %nm_{p}\n  update @v_{p} %nv_{p}\n");
    }
    g += "  update @t %t2\n  sink @loss %loss\n";
    if grads {
        for p in &names {
            g += &format!("  sink @d_{p} %d_{p}\n");
        }
    }
    g + "}\n"
}
