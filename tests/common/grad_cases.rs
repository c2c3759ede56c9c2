//! Graphs for the `grad` tests: one per construct the pass differentiates (kernel math,
//! reductions, contractions, temporaries, selectors, accumulation, a `wrt` that is an
//! intermediate), each a scalar loss `@l` over `f64` sources with one sink `@d<name>` per
//! gradient. `tests/passes/grad.rs` checks them against central differences and
//! `tests/native/grad.rs` through the JIT.

use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

/// How many cases [`cases`] lists (the tests fail when they checked fewer).
pub const CASES: usize = 50;

/// A case: a construct, the ops, the graph body (sources `f64` named `@a`, `@b`, ...; a sink
/// `@l` of the loss and one sink `@d<name>` per gradient), and the `wrt` sources.
pub struct Case {
    pub construct: &'static str,
    pub src: String,
    pub wrt: &'static [&'static str],
}

const SUM2: &str =
    "op @sum2(x: f64[M, N]) -> (l: f64[]) {\n  l[] = sum[i, j](x[i, j] * x[i, j])\n}\n";
const SUM1: &str = "op @sum1(x: f64[N]) -> (l: f64[]) {\n  l[] = sum[i](x[i] * x[i])\n}\n";

/// A graph over `a: f64[3, 4]` and `b: f64[3, 4]` with the elementwise kernel `body` (of
/// `a[i, j]` and `b[i, j]`) and the loss `sum(y²)`.
fn elementwise(construct: &'static str, body: &str) -> Case {
    let src = format!(
        "op @f(a: f64[M, N], b: f64[M, N]) -> (y: f64[M, N]) {{\n  y[i, j] = {body}\n}}\n{SUM2}\
         graph @g {{\n  %a = source @a : f64[3, 4]\n  %b = source @b : f64[3, 4]\n  %y = apply @f(%a, %b)\n\
         %l = apply @sum2(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
    );
    Case {
        construct,
        src,
        wrt: &["a", "b"],
    }
}

/// A graph over `a: f64[3, 4]` with the selector line `view` (`%v = ... %a ...`) and the loss
/// `sum(v²)` of its rank-`rank` result.
fn selector(construct: &'static str, view: &str, rank: usize) -> Case {
    let loss = if rank == 1 { SUM1 } else { SUM2 };
    let op = if rank == 1 { "sum1" } else { "sum2" };
    let src = format!(
        "{loss}graph @g {{\n  %a = source @a : f64[3, 4]\n  {view}\n  %l = apply @{op}(%v)\n\
         %da = grad %l wrt %a\n  sink @l %l\n  sink @da %da\n}}\n"
    );
    Case {
        construct,
        src,
        wrt: &["a"],
    }
}

/// Weights scaled to ±0.4 (from the tests' ±2), so that activations and the loss stay small
/// enough for central differences to resolve every gradient entry.
const SMALL: &str = "op @small(x: f64[..S]) -> (y: f64[..S]) {\n  y[..i] = x[..i] * 0.2\n}\n";

/// A causal multi-head attention and GELU MLP block with pre-LayerNorm and residuals:
/// `examples/transformer.teg`'s ops in f64, at width 8 (2 heads of 4), 3 tokens.
fn transformer_block() -> Case {
    let ex = super::example("transformer.teg");
    let ops = &ex[ex.find("op @layernorm").expect("ops")..ex.find("// A uniform").expect("end")];
    let src = format!(
        "{}{SUM2}{SMALL}graph @g {{\n  %x = source @x : f64[3, 8]\n  %wqkv = source @wqkv : f64[8, 24]\n\
         %bqkv = source @bqkv : f64[24]\n  %wo = source @wo : f64[8, 8]\n  %bo = source @bo : f64[8]\n\
         %wfc = source @wfc : f64[8, 16]\n  %bfc = source @bfc : f64[16]\n  %wp = source @wp : f64[16, 8]\n\
         %bp = source @bp : f64[8]\n  %g1 = source @g1 : f64[8]\n  %b1 = source @b1 : f64[8]\n\
         %h = apply @layernorm(%x, %g1, %b1)\n  %wqkv.s = apply @small(%wqkv)\n  %qkv = apply @linear(%h, %wqkv.s, %bqkv)\n\
         %q = slice %qkv [:, 0:8]\n  %k = slice %qkv [:, 8:16]\n  %v = slice %qkv [:, 16:24]\n\
         %qh = reshape %q [-1, 2, 4]\n  %kh = reshape %k [-1, 2, 4]\n  %vh = reshape %v [-1, 2, 4]\n\
         %qt = transpose %qh [1, 0, 2]\n  %kt = transpose %kh [1, 2, 0]\n  %vt = transpose %vh [1, 0, 2]\n\
         %s = apply @causal_scores(%qt, %kt)\n  %p = apply @softmax(%s)\n  %o = apply @attend(%p, %vt)\n\
         %om = reshape %o [-1, 8]\n  %wo.s = apply @small(%wo)\n  %a = apply @linear(%om, %wo.s, %bo)\n  %x1 = apply @add(%x, %a)\n\
         %wfc.s = apply @small(%wfc)\n  %f = apply @linear(%x1, %wfc.s, %bfc)\n  %gf = apply @gelu(%f)\n  %wp.s = apply @small(%wp)\n  %m = apply @linear(%gf, %wp.s, %bp)\n\
         %y = apply @add(%x1, %m)\n  %l = apply @sum2(%y)\n\
         %dx, %dwqkv, %dwo, %dwfc, %dg1, %db1 = grad %l wrt %x, %wqkv, %wo, %wfc, %g1, %b1\n\
         sink @l %l\n  sink @dx %dx\n  sink @dwqkv %dwqkv\n  sink @dwo %dwo\n  sink @dwfc %dwfc\n\
         sink @dg1 %dg1\n  sink @db1 %db1\n}}\n",
        ops.replace("f32", "f64")
    );
    Case {
        construct: "transformer block (layernorm, causal attention, gelu, residuals)",
        src,
        wrt: &["x", "wqkv", "wo", "wfc", "g1", "b1"],
    }
}

/// Every case, one per construct the pass supports.
pub fn cases() -> Vec<Case> {
    let mut c = vec![
        elementwise(
            "add sub mul neg",
            "a[i, j] * b[i, j] - (a[i, j] + 2.0 * b[i, j]) * -a[i, j]",
        ),
        elementwise("div", "a[i, j] / (b[i, j] * b[i, j] + 1.0)"),
        elementwise("exp log", "exp(a[i, j]) * log(b[i, j] * b[i, j] + 0.5)"),
        elementwise("tanh sqrt", "tanh(a[i, j]) * sqrt(b[i, j] * b[i, j] + 0.5)"),
        elementwise("sin cos", "sin(a[i, j]) * cos(b[i, j])"),
        // Its adjoint passes the parser's 256 operators unless split into temporaries (E0005).
        elementwise(
            "a deep kernel reading its input five times",
            "a[i, j] / (log(sin(a[i, j]) * sin(a[i, j]) + 0.5) * log(sin(a[i, j]) * sin(a[i, j]) + 0.5) + 0.5) + b[i, j]",
        ),
        elementwise("pow", "pow(a[i, j] * a[i, j] + 0.5, b[i, j])"),
        elementwise("erf atan", "erf(a[i, j]) + atan(b[i, j])"),
        elementwise(
            "asin acos abs",
            "asin(0.3 * a[i, j]) * acos(0.3 * b[i, j]) + abs(a[i, j])",
        ),
        elementwise(
            "max min of two values",
            "max(a[i, j], b[i, j]) * min(a[i, j], 0.5 * b[i, j])",
        ),
        elementwise(
            "select",
            "select(a[i, j] > b[i, j], a[i, j] * b[i, j], exp(b[i, j]))",
        ),
        elementwise("float cast", "f64(f32(a[i, j]) * f32(b[i, j]))"),
        elementwise(
            "floor (zero gradient)",
            "a[i, j] * b[i, j] + floor(a[i, j])",
        ),
        elementwise("rem", "a[i, j] % (b[i, j] * b[i, j] + 3.0)"),
    ];
    c.push(Case {
        construct: "gather (the table read at gathered rows, a negative index wrapping)",
        src: format!(
            "op @rows(e: f64[V, H], ids: i64[B], w: f64[H]) -> (y: f64[B, H]) {{\n  y[b, h] = e[ids[b], h] * w[h] + e[ids[b] - 1, h] * e[ids[b] - 1, h]\n}}\n{SUM2}\
             graph @g {{\n  %a = source @a : f64[5, 3]\n  %b = source @b : f64[3]\n  %ids = iota axis 0 : i64[4]\n\
             %y = apply @rows(%a, %ids, %b)\n  %l = apply @sum2(%y)\n  %db = grad %l wrt %b\n  sink @l %l\n  sink @db %db\n}}\n"
        ),
        wrt: &["b"],
    });
    c.push(Case {
        construct: "gathered table (an embedding: duplicate and negative ids; a scatter-add)",
        src: "op @ids(x: i64[B, S]) -> (y: i64[B, S]) {\n  y[b, s] = x[b, s] * 2 - 3\n}\n\
             op @emb(e: f64[V, H], ids: i64[B, S], w: f64[H]) -> (y: f64[B, S, H]) {\n  y[b, s, h] = e[ids[b, s], h] * w[h] + e[ids[b, s] - 1, h] * e[ids[b, s] - 1, h]\n}\n\
             op @flat(x: f64[B, S, H]) -> (l: f64[]) {\n  l[] = sum[b, s, h](x[b, s, h] * x[b, s, h])\n}\n\
             graph @g {\n  %a = source @a : f64[5, 3]\n  %b = source @b : f64[3]\n  %i0 = iota axis 1 : i64[2, 3]\n\
             %ids = apply @ids(%i0)\n  %y = apply @emb(%a, %ids, %b)\n  %l = apply @flat(%y)\n  %da, %db = grad %l wrt %a, %b\n\
             sink @l %l\n  sink @da %da\n  sink @db %db\n}\n"
            .to_string(),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "gathered table along its last axis, inside a sum (GatherElements; a scatter-add)",
        src: format!(
            "op @idx(x: i64[M, K]) -> (y: i64[M, K]) {{\n  y[i, k] = (x[i, k] * 3 + i) % 5 - 1\n}}\n\
             op @pick(x: f64[M, N], idx: i64[M, K]) -> (y: f64[M]) {{\n  y[i] = sum[k](sin(x[i, idx[i, k] + 1]) * x[i, idx[i, k]])\n}}\n{SUM1}\
             graph @g {{\n  %a = source @a : f64[3, 5]\n  %k0 = iota axis 1 : i64[3, 7]\n  %idx = apply @idx(%k0)\n\
             %y = apply @pick(%a, %idx)\n  %l = apply @sum1(%y)\n  %da = grad %l wrt %a\n  sink @l %l\n  sink @da %da\n}}\n"
        ),
        wrt: &["a"],
    });
    c.push(Case {
        construct: "scatter add (the base's adjoint passed on, the updates' gathered back; duplicates)",
        src: format!(
            "op @rows(x: i64[N, H]) -> (y: i64[N, H]) {{\n  y[n, h] = x[n, h] * 3 % 7 - 3\n}}\n{SUM2}\
             graph @g {{\n  %a = source @a : f64[4, 3]\n  %b = source @b : f64[6, 3]\n  %r = iota axis 0 : i64[6, 3]\n\
             %idx = apply @rows(%r)\n  %y = scatter %a, %idx, %b axis 0 reduce add\n  %l = apply @sum2(%y)\n\
             %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
        ),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "contraction (matmul)",
        src: format!(
            "op @mm(x: f64[M, K], w: f64[K, N]) -> (y: f64[M, N]) {{\n  y[i, j] = sum[k](x[i, k] * w[k, j])\n}}\n{SUM2}\
             graph @g {{\n  %a = source @a : f64[3, 4]\n  %b = source @b : f64[4, 2]\n  %y = apply @mm(%a, %b)\n\
             %l = apply @sum2(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
        ),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "sum max min reductions, broadcast in a kernel",
        src: format!(
            "op @red(x: f64[M, N], c: f64[N]) -> (y: f64[M]) {{\n  \
             y[i] = sum[j](x[i, j] * c[j]) + max[j](x[i, j]) * min[j](x[i, j] + c[j])\n}}\n{SUM1}\
             graph @g {{\n  %a = source @a : f64[3, 4]\n  %b = source @b : f64[4]\n  %y = apply @red(%a, %b)\n\
             %l = apply @sum1(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
        ),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "prod reduction (a zero factor included)",
        src: format!(
            "op @rprod(x: f64[M, N]) -> (y: f64[M]) {{\n  y[i] = prod[j](x[i, j] * f64(i + j - 2))\n}}\n{SUM1}\
             graph @g {{\n  %a = source @a : f64[3, 4]\n  %y = apply @rprod(%a)\n\
             %l = apply @sum1(%y)\n  %da = grad %l wrt %a\n  sink @l %l\n  sink @da %da\n}}\n"
        ),
        wrt: &["a"],
    });
    c.push(Case {
        construct: "a sum whose variable the adjoint does not read (a factor of its extent)",
        src: format!(
            "op @spread(x: f64[M], c: f64[N]) -> (y: f64[M]) {{\n  y[i] = sum[k](exp(x[i]) + c[k])\n}}\n{SUM1}\
             graph @g {{\n  %a = source @a : f64[3]\n  %b = source @b : f64[4]\n  %y = apply @spread(%a, %b)\n\
             %l = apply @sum1(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
        ),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "shifted and constant loads (a stencil; the adjoint padded into place)",
        src: format!(
            "op @st(x: f64[N], c: f64[M, N]) -> (y: f64[M, N - 2]) {{\n  \
             y[i, j] = x[j] * x[j + 2] + sin(x[j + 1]) * c[i, j + 1] + x[0] * c[0, j]\n}}\n{SUM2}\
             graph @g {{\n  %a = source @a : f64[6]\n  %b = source @b : f64[2, 6]\n  %y = apply @st(%a, %b)\n\
             %l = apply @sum2(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
        ),
        wrt: &["a", "b"],
    });
    c.push(Case {
        construct: "max reduction at the root",
        src: format!(
            "op @rmax(x: f64[M, N]) -> (y: f64[M]) {{\n  y[i] = max[j](x[i, j] * x[i, j])\n}}\n{SUM1}\
             graph @g {{\n  %a = source @a : f64[3, 4]\n  %y = apply @rmax(%a)\n\
             %l = apply @sum1(%y)\n  %da = grad %l wrt %a\n  sink @l %l\n  sink @da %da\n}}\n"
        ),
        wrt: &["a"],
    });
    c.push(Case {
        construct: "softmax (temporaries)",
        src: "op @softmax(x: f64[M, N]) -> (y: f64[M, N]) {\n  m[i] = max[j](x[i, j])\n  \
             s[i] = sum[j](exp(x[i, j] - m[i]))\n  y[i, j] = exp(x[i, j] - m[i]) / s[i]\n}\n\
             op @dot(y: f64[M, N], t: f64[M, N]) -> (l: f64[]) {\n  l[] = sum[i, j](y[i, j] * t[i, j])\n}\n\
             graph @g {\n  %a = source @a : f64[3, 4]\n  %b = source @b : f64[3, 4]\n  %y = apply @softmax(%a)\n\
             %l = apply @dot(%y, %b)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}\n"
            .to_string(),
        wrt: &["a", "b"],
    });
    c.extend(softmax_forms());
    c.extend(convolutions());
    c.push(Case {
        construct: "layernorm (temporaries, scale and shift)",
        src: "op @ln(x: f64[M, N], g: f64[N], h: f64[N]) -> (y: f64[M, N]) {\n  \
             mu[i] = sum[j](x[i, j]) / f64(N)\n  v[i] = sum[j]((x[i, j] - mu[i]) * (x[i, j] - mu[i])) / f64(N)\n  \
             y[i, j] = (x[i, j] - mu[i]) / sqrt(v[i] + 0.00001) * g[j] + h[j]\n}\n\
             op @dot(y: f64[M, N], t: f64[M, N]) -> (l: f64[]) {\n  l[] = sum[i, j](y[i, j] * t[i, j])\n}\n\
             graph @g {\n  %a = source @a : f64[3, 4]\n  %c = source @c : f64[4]\n  %e = source @e : f64[4]\n\
             %t = source @t : f64[3, 4]\n  %y = apply @ln(%a, %c, %e)\n  %l = apply @dot(%y, %t)\n\
             %da, %dc, %de = grad %l wrt %a, %c, %e\n  sink @l %l\n  sink @da %da\n  sink @dc %dc\n  sink @de %de\n}\n"
            .to_string(),
        wrt: &["a", "c", "e"],
    });
    c.push(Case {
        construct: "two outputs, several readers (accumulation), wrt an intermediate",
        src: format!(
            "op @two(x: f64[M, N]) -> (p: f64[M, N], q: f64[M, N]) {{\n  p[i, j] = x[i, j] * x[i, j]\n  q[i, j] = sin(x[i, j])\n}}\n\
             op @mul(x: f64[M, N], y: f64[M, N]) -> (z: f64[M, N]) {{\n  z[i, j] = x[i, j] * y[i, j]\n}}\n{SUM2}\
             graph @g {{\n  %a = source @a : f64[3, 4]\n  %p, %q = apply @two(%a)\n  %z = apply @mul(%p, %q)\n\
             %z2 = apply @mul(%z, %a)\n  %l = apply @sum2(%z2)\n  %da, %dp = grad %l wrt %a, %p\n\
             sink @l %l\n  sink @da %da\n  sink @dp %dp\n}}\n"
        ),
        wrt: &["a"],
    });
    c.push(transformer_block());
    c.extend([
        selector("transpose", "%v = transpose %a [1, 0]", 2),
        selector("slice", "%v = slice %a [1:3, 0:4:1]", 2),
        selector("slice step -1", "%v = slice %a [2:0:-1, 1:4]", 2),
        selector("slice steps 2 and -2", "%v = slice %a [0:3:2, 3:0:-2]", 2),
        selector("pad constant", "%v = pad %a [1:0, 2:1] constant 0.5", 2),
        selector("pad reflect", "%v = pad %a [2:1, 1:3] reflect", 2),
        selector("concat", "%w = transpose %a [1, 0]\n  %x = reshape %w [3, 4]\n  %v = concat %a, %x axis 0", 2),
        selector("broadcast", "%w = reshape %a [3, 1, 4]\n  %u = broadcast %w [2, 3, 5, 4]\n  %v = reshape %u [30, 4]", 2),
        selector("reshape", "%v = reshape %a [12]", 1),
        selector("reverse", "%v = reverse %a [0, 1]", 2),
        selector("squeeze unsqueeze", "%w = unsqueeze %a [0]\n  %v = squeeze %w [0]", 2),
        selector("repeat", "%v = repeat %a times 3 axis 1", 2),
        selector("interleave", "%w = reverse %a [1]\n  %v = interleave %a, %w axis 1", 2),
    ]);
    c
}

/// A graph over `a: f64[3, 4, 2]` and `b` of its type: `%y = apply @f(%a)` with the kernel
/// `body` (`x` to `y`, both `f64[A, N, B]`), the loss `sum(y·b)`.
fn rowwise(construct: &'static str, body: &str) -> Case {
    let src = format!(
        "op @f(x: f64[A, N, B]) -> (y: f64[A, N, B]) {{\n{body}}}\n\
         op @dot(y: f64[A, N, B], t: f64[A, N, B]) -> (l: f64[]) {{\n  l[] = sum[i, j, k](y[i, j, k] * t[i, j, k])\n}}\n\
         graph @g {{\n  %a = source @a : f64[3, 4, 2]\n  %b = source @b : f64[3, 4, 2]\n  %y = apply @f(%a)\n\
         %l = apply @dot(%y, %b)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n"
    );
    Case {
        construct,
        src,
        wrt: &["a", "b"],
    }
}

/// The softmax forms `grad` gives a row-local adjoint (docs/passes/grad.md rule 10), along the
/// middle axis, and one that only looks like them (a scaled exponent: the generic path).
/// `SOFTMAX_FORMS` says which is which.
pub fn softmax_forms() -> Vec<Case> {
    vec![
        rowwise(
            "softmax along a middle axis, exp(x - m) a temporary",
            "  m[a, b] = max[k](x[a, k, b])\n  e[a, j, b] = exp(x[a, j, b] - m[a, b])\n  \
             s[a, b] = sum[k](exp(x[a, k, b] - m[a, b]))\n  y[a, j, b] = e[a, j, b] / s[a, b]\n",
        ),
        rowwise(
            "log-softmax (x - m - log s)",
            "  m[a, j] = max[k](x[a, j, k])\n  s[a, j] = sum[k](exp(x[a, j, k] - m[a, j]))\n  \
             y[a, j, b] = x[a, j, b] - m[a, j] - log(s[a, j])\n",
        ),
        rowwise(
            "log-softmax through a log-sum-exp temporary (x - (log s + m)), first axis",
            "  m[j, b] = max[k](x[k, j, b])\n  s[j, b] = sum[k](exp(x[k, j, b] - m[j, b]))\n  \
             lse[j, b] = log(s[j, b]) + m[j, b]\n  y[a, j, b] = x[a, j, b] - lse[j, b]\n",
        ),
        rowwise(
            "a softmax of 0.5·x (looks like one, differentiated generically)",
            "  m[a, j] = max[k](x[a, j, k])\n  s[a, j] = sum[k](exp((x[a, j, k] - m[a, j]) * 0.5))\n  \
             y[a, j, b] = exp((x[a, j, b] - m[a, j]) * 0.5) / s[a, j]\n",
        ),
    ]
}

/// Per case of [`softmax_forms`]: whether `grad` recognises it (a row-local adjoint).
pub const SOFTMAX_FORMS: [bool; 4] = [true, true, true, false];

/// A loss `sum(y²)` over the rank-4 result of `%y = apply @conv(%a, %b)` (after the graph
/// lines `pre`), the gradients with respect to both operands.
fn conv_case(construct: &'static str, op: &str, shapes: (&str, &str), pre: &str) -> Case {
    let rank = if op.contains("kw") { 4 } else { 2 };
    let vars: Vec<String> = (0..rank).map(|d| format!("i{d}")).collect();
    let dims: Vec<String> = (0..rank).map(|d| format!("Z{d}")).collect();
    let (v, dims) = (vars.join(", "), dims.join(", "));
    let src = format!(
        "{op}\nop @sq(y: f64[{dims}]) -> (l: f64[]) {{\n  l[] = sum[{v}](y[{v}] * y[{v}])\n}}\n\
         graph @g {{\n  %a = source @a : f64[{}]\n  %b = source @b : f64[{}]\n{pre}  %y = apply @conv(%x, %b)\n\
         %l = apply @sq(%y)\n  %da, %db = grad %l wrt %a, %b\n  sink @l %l\n  sink @da %da\n  sink @db %db\n}}\n",
        shapes.0, shapes.1
    );
    Case {
        construct,
        src,
        wrt: &["a", "b"],
    }
}

const CONV1: &str = "op @conv(x: f64[C, H], f: f64[O, C, K]) -> (y: f64[O, (H - K) / S + 1]) {\n  \
                     y[o, h] = sum[c, k](x[c, S * h + D * k] * f[o, c, k])\n}\n";
const CONV2: &str = "op @conv(x: f64[N, C, H, W], f: f64[O, C, KH, KW])\n    \
                     -> (y: f64[N, O, (H - KH) / S + 1, (W - KW) / S + 1]) {\n  \
                     y[n, o, h, w] = sum[c, kh, kw](x[n, c, S * h + kh, S * w + kw] * f[o, c, kh, kw])\n}\n";

/// Convolutions: loads with two variables in one index and strides (`unroll.rs`).
fn convolutions() -> Vec<Case> {
    let op = |t: &str, s: &str, d: &str| {
        t.replace("S * ", &format!("{s} * "))
            .replace("/ S", &format!("/ {s}"))
            .replace("D * ", &format!("{d} * "))
    };
    let x = "  %x = reshape %a [2, 7]\n";
    vec![
        conv_case(
            "1-D convolution, stride 1 (x[c, h + k])",
            &op(CONV1, "1", "1"),
            ("14", "3, 2, 3"),
            x,
        ),
        conv_case(
            "1-D convolution, stride 2, dilation 2 (x[c, 2 * h + 2 * k])",
            &op(CONV1, "2", "2").replace("(H - K) / 2", "(H - 2 * K + 1) / 2"),
            ("14", "2, 2, 2"),
            x,
        ),
        conv_case(
            "2-D convolution, stride 1",
            &op(CONV2, "1", "1"),
            ("2, 2, 5, 4", "3, 2, 3, 2"),
            "  %x = reshape %a [2, 2, 5, 4]\n",
        ),
        conv_case(
            "2-D convolution, stride 2",
            &op(CONV2, "2", "1"),
            ("2, 2, 7, 6", "3, 2, 3, 2"),
            "  %x = reshape %a [2, 2, 7, 6]\n",
        ),
        conv_case(
            "2-D convolution, stride 2, over a zero-padded input",
            &op(CONV2, "2", "1"),
            ("1, 2, 5, 4", "2, 2, 3, 3"),
            "  %x = pad %a [0:0, 0:0, 1:1, 1:1] constant 0.0\n",
        ),
    ]
}

/// `src` compiled and lowered by the `grad` pass; asserts that the printed result re-parses to
/// the same module (so the text is what the callers run).
pub fn lowered(name: &str, src: &str) -> (tapc::ir::Module, Vec<tapc::verify::GraphFacts>) {
    use tapc::passes::manager::{run_pipeline, RunConfig};
    let (mut m, facts) = super::compile_ok(name, src);
    let config = RunConfig::default();
    run_pipeline(&mut m, facts, "grad", &config, &mut String::new())
        .unwrap_or_else(|d| panic!("{name}: grad failed: {}", d.message));
    let printed = tapc::print::print_module(&m);
    let (m2, facts2) = super::compile_ok(&format!("{name} (lowered)"), &printed);
    assert_eq!(m, m2, "{name}: the lowered module re-parses to itself");
    (m2, facts2)
}

/// The step and the tolerance of the central differences (docs/passes/grad.md, "Tests").
pub const FD_H: f64 = 1e-6;
pub const FD_TOL: f64 = 1e-6;

/// Compares `grad`, the gradient of `loss` with respect to the f64 input `w`, with central
/// differences `(loss(w + h) − loss(w − h)) / 2h`, entry by entry:
/// `|g − fd| ≤ tol·(1 + |fd|) + 8·ε·|loss| / h`, the last term the difference's own rounding
/// (each loss is within a few ulps of its value). The number of entries compared, or the
/// first one that is off.
pub fn central_differences(
    loss: &dyn Fn(&HashMap<String, Tensor>) -> f64,
    inputs: &HashMap<String, Tensor>,
    w: &str,
    grad: &[f64],
    (h, tol): (f64, f64),
) -> Result<usize, String> {
    let x = super::f64s(&inputs[w]);
    if grad.len() != x.len() {
        return Err(format!("d{w} has {} entries, {w} {}", grad.len(), x.len()));
    }
    for k in 0..x.len() {
        let at = |v: f64| {
            let mut i = inputs.clone();
            if let Data::F64(d) = &mut i.get_mut(w).expect("an input").data {
                d[k] = v;
            }
            loss(&i)
        };
        let (up, down) = (at(x[k] + h), at(x[k] - h));
        let fd = (up - down) / (2.0 * h);
        let noise = 8.0 * f64::EPSILON * up.abs().max(down.abs()) / h;
        if (grad[k] - fd).abs() > tol * (1.0 + fd.abs()) + noise {
            return Err(format!(
                "d{w}[{k}] = {} but the central difference is {fd} (loss {up})",
                grad[k]
            ));
        }
    }
    Ok(x.len())
}
