//! Random valid TEG graphs for property tests: a growing list of 2-D values built from
//! generators, elementwise and reducing applies, and views (so view chains and
//! slice/concat patterns occur often), with `pin` statements.
//!
//! [`step`] and [`build`] use the three basic ops; [`rich_step`] and [`build_with`] add
//! matmuls, softmax, biases through broadcast/unsqueeze/squeeze, a reduction with an epilogue,
//! a quantizing kernel with i8, u8, f16 and bf16 arithmetic, random elementwise kernels ([`kernels`]: weakly
//! typed literals and index variables included), extra sinks, and hand-sharded chains (two row
//! shards of two ops, the second reading the first's shard, as the shard pass propagates).

use proptest::prelude::*;

pub const OPS: &str = "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
op @affine(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] * 1.5 - 0.25\n}\n\
op @rowsum(x: f32[M, N]) -> (y: f32[M, 1]) {\n  y[i, c] = sum[j](x[i, j]) + f32(c)\n}\n";

/// The ops of the rich steps (besides [`OPS`] and the random kernels `@k0`..`@k3`).
pub const RICH_OPS: &str = "op @add2(a: f32[M, N], b: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = a[i, j] + b[i, j]\n}\n\
op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {\n  c[i, j] = sum[k](a[i, k] * b[k, j])\n}\n\
op @softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n  m[i] = max[j](x[i, j])\n  s[i] = sum[j](exp(x[i, j] - m[i]))\n  y[i, j] = exp(x[i, j] - m[i]) / s[i]\n}\n\
op @rownorm(x: f32[M, N]) -> (y: f32[M, N]) {\n  s[i] = sum[j](abs(x[i, j]))\n  y[i, j] = x[i, j] / (s[i] + 1.0)\n}\n\
op @quant(x: f32[M, N]) -> (y: f32[M, N]) {\n  q[i, j] = i8(x[i, j] * 8.0) % 5 - i8(j)\n  u[i, j] = u8(q[i, j]) / 3\n  h[i, j] = bf16(x[i, j]) * 0.5 + bf16(f16(x[i, j]))\n  y[i, j] = f32(q[i, j]) * 0.125 + f32(u[i, j]) * 0.01 + f32(h[i, j])\n}\n";

/// One graph statement choice, applied to a growing list of 2-D values.
#[derive(Debug, Clone)]
pub enum Step {
    Gen(u8, u8, u8),
    Relu(usize),
    Affine(usize),
    RowSum(usize),
    Transpose(usize),
    Reverse(usize, bool),
    Slice(usize, u8, u8),
    Concat(usize, usize),
    Flatten(usize),
    SliceOfConcat(usize, u8),
    /// `pin` an earlier value (and apply relu to it, so every step defines a value).
    Pin(usize),
    // The rich steps (need `build_with`).
    Kernel(usize, usize),
    Kernel2(usize, usize, usize),
    Matmul(usize, usize),
    Softmax(usize),
    RowNorm(usize),
    Quant(usize),
    Bias(usize),
    ColBias(usize),
    /// Sink an earlier value (and apply relu to it).
    Sunk(usize),
    Sharded(usize, u8, u8),
}

fn basic() -> Vec<BoxedStrategy<Step>> {
    vec![
        (0u8..3, 1u8..5, 1u8..5)
            .prop_map(|(k, a, b)| Step::Gen(k, a, b))
            .boxed(),
        any::<usize>().prop_map(Step::Relu).boxed(),
        any::<usize>().prop_map(Step::Affine).boxed(),
        any::<usize>().prop_map(Step::RowSum).boxed(),
        any::<usize>().prop_map(Step::Transpose).boxed(),
        (any::<usize>(), any::<bool>())
            .prop_map(|(v, d)| Step::Reverse(v, d))
            .boxed(),
        (any::<usize>(), 0u8..4, 1u8..3)
            .prop_map(|(v, s, t)| Step::Slice(v, s, t))
            .boxed(),
        (any::<usize>(), any::<usize>())
            .prop_map(|(a, b)| Step::Concat(a, b))
            .boxed(),
        any::<usize>().prop_map(Step::Flatten).boxed(),
        (any::<usize>(), 0u8..3)
            .prop_map(|(v, k)| Step::SliceOfConcat(v, k))
            .boxed(),
        any::<usize>().prop_map(Step::Pin).boxed(),
    ]
}

/// A step over the basic ops (for [`build`]).
pub fn step() -> impl Strategy<Value = Step> {
    proptest::strategy::Union::new(basic())
}

/// Any step (for [`build_with`]).
pub fn rich_step() -> impl Strategy<Value = Step> {
    let mut all = basic();
    all.extend([
        (any::<usize>(), 0usize..4)
            .prop_map(|(v, k)| Step::Kernel(v, k))
            .boxed(),
        (any::<usize>(), any::<usize>(), 0usize..4)
            .prop_map(|(a, b, k)| Step::Kernel2(a, b, k))
            .boxed(),
        (any::<usize>(), any::<usize>())
            .prop_map(|(a, b)| Step::Matmul(a, b))
            .boxed(),
        any::<usize>().prop_map(Step::Softmax).boxed(),
        any::<usize>().prop_map(Step::RowNorm).boxed(),
        any::<usize>().prop_map(Step::Quant).boxed(),
        any::<usize>().prop_map(Step::Bias).boxed(),
        any::<usize>().prop_map(Step::ColBias).boxed(),
        any::<usize>().prop_map(Step::Sunk).boxed(),
        (any::<usize>(), 0u8..6, 0u8..6)
            .prop_map(|(v, a, b)| Step::Sharded(v, a, b))
            .boxed(),
    ]);
    proptest::strategy::Union::new(all)
}

/// A random f32 expression over `x[i, j]` (and `y[i, j]` when `binary`).
pub fn expr(binary: bool) -> BoxedStrategy<String> {
    let mut leaves = vec![
        Just("x[i, j]".to_string()).boxed(),
        Just("x[i, j]".to_string()).boxed(),
        Just("0.5".to_string()).boxed(),
        Just("2".to_string()).boxed(),
        Just("i".to_string()).boxed(),
        Just("f32(j)".to_string()).boxed(),
    ];
    if binary {
        leaves.push(Just("y[i, j]".to_string()).boxed());
        leaves.push(Just("y[i, j]".to_string()).boxed());
    }
    proptest::strategy::Union::new(leaves)
        .prop_recursive(3, 24, 3, |e| {
            prop_oneof![
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} + {b})")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} * {b})")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} - {b})")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("{a} / (abs({b}) + 1.0)")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("max({a}, {b})")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("min({a}, {b})")),
                (e.clone(), e.clone(), e.clone(), e.clone())
                    .prop_map(|(a, b, c, d)| format!("select({a} > {b}, {c}, {d})")),
                e.clone().prop_map(|a| format!("tanh({a})")),
                e.clone().prop_map(|a| format!("sin({a})")),
                e.clone().prop_map(|a| format!("erf({a})")),
                e.clone().prop_map(|a| format!("atan({a})")),
                (e.clone(), e.clone()).prop_map(|(a, b)| format!("pow(abs({a}) + 0.5, {b})")),
                e.clone().prop_map(|a| format!("(-{a})")),
                e.clone().prop_map(|a| format!("f32(i32({a} * 4.0) % 3)")),
            ]
        })
        .boxed()
}

/// Two unary and two binary kernel bodies.
pub fn kernels() -> impl Strategy<Value = Vec<String>> {
    (expr(false), expr(false), expr(true), expr(true)).prop_map(|(a, b, c, d)| vec![a, b, c, d])
}

/// The graph of basic steps (no rich step: their ops are not defined).
pub fn build(steps: &[Step]) -> String {
    format!("{OPS}{}", graph(steps))
}

/// The graph of any steps, with the rich ops and the four kernel bodies `kernels`.
pub fn build_with(steps: &[Step], kernels: &[String]) -> String {
    let mut ops = format!("{OPS}{RICH_OPS}");
    for (k, e) in kernels.iter().enumerate() {
        if k < 2 {
            ops.push_str(&format!(
                "op @k{k}(x: f32[M, N]) -> (y: f32[M, N]) {{\n  y[i, j] = {e}\n}}\n"
            ));
        } else {
            ops.push_str(&format!(
                "op @k{k}(x: f32[M, N], y: f32[M, N]) -> (z: f32[M, N]) {{\n  z[i, j] = {e}\n}}\n"
            ));
        }
    }
    format!("{ops}{}", graph(steps))
}

fn graph(steps: &[Step]) -> String {
    let mut shapes: Vec<(i64, i64)> = vec![(3, 4)];
    let mut lines = vec!["  %v0 = rand seed 1 : f32[3, 4]".to_string()];
    let mut sunk = Vec::new();
    for s in steps {
        let n = shapes.len();
        let name = format!("%v{n}");
        let pick = |i: &usize| i % n;
        let (line, shape) = match s {
            Step::Gen(k, a, b) => {
                let g = ["zeros", "ones", "rand seed 9"][*k as usize];
                (
                    format!("{name} = {g} : f32[{a}, {b}]"),
                    (*a as i64, *b as i64),
                )
            }
            Step::Relu(i) => (
                format!("{name} = apply @relu(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::Affine(i) => (
                format!("{name} = apply @affine(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::RowSum(i) => (
                format!("{name} = apply @rowsum(%v{})", pick(i)),
                (shapes[pick(i)].0, 1),
            ),
            Step::Transpose(i) => (
                format!("{name} = transpose %v{} [1, 0]", pick(i)),
                (shapes[pick(i)].1, shapes[pick(i)].0),
            ),
            Step::Reverse(i, d) => (
                format!("{name} = reverse %v{} [{}]", pick(i), u8::from(*d)),
                shapes[pick(i)],
            ),
            Step::Slice(i, start, step) => {
                let (r, c) = shapes[pick(i)];
                let st = (*start as i64).min(c - 1);
                let count = (c - st + *step as i64 - 1) / *step as i64;
                (
                    format!("{name} = slice %v{} [0:{r}, {st}:{c}:{step}]", pick(i)),
                    (r, count),
                )
            }
            Step::Concat(a, b) => {
                let (a, b) = (pick(a), pick(b));
                if shapes[a].1 == shapes[b].1 {
                    (
                        format!("{name} = concat %v{a}, %v{b} axis 0"),
                        (shapes[a].0 + shapes[b].0, shapes[a].1),
                    )
                } else {
                    (format!("{name} = reverse %v{a} [0]"), shapes[a])
                }
            }
            Step::Flatten(i) => {
                let (r, c) = shapes[pick(i)];
                lines.push(format!("  {name}.f = reshape %v{} [{}]", pick(i), r * c));
                (format!("{name} = reshape {name}.f [{c}, {r}]"), (c, r))
            }
            Step::SliceOfConcat(i, k) => {
                let (r, c) = shapes[pick(i)];
                lines.push(format!(
                    "  {name}.k = concat %v{0}, %v{0}, %v{0} axis 0",
                    pick(i)
                ));
                let k = *k as i64;
                (
                    format!("{name} = slice {name}.k [{}:{}, 0:{c}]", k * r, (k + 1) * r),
                    (r, c),
                )
            }
            Step::Pin(i) => {
                lines.push(format!("  pin %v{}", pick(i)));
                (
                    format!("{name} = apply @relu(%v{})", pick(i)),
                    shapes[pick(i)],
                )
            }
            Step::Kernel(i, k) => (
                format!("{name} = apply @k{}(%v{})", k % 2, pick(i)),
                shapes[pick(i)],
            ),
            Step::Kernel2(a, b, k) => {
                let (a, b) = (pick(a), pick(b));
                let b = if shapes[a] == shapes[b] { b } else { a };
                (
                    format!("{name} = apply @k{}(%v{a}, %v{b})", 2 + k % 2),
                    shapes[a],
                )
            }
            Step::Matmul(a, b) => {
                let (a, b) = (pick(a), pick(b));
                let ((r, k), (k2, c)) = (shapes[a], shapes[b]);
                if k == k2 {
                    (format!("{name} = apply @matmul(%v{a}, %v{b})"), (r, c))
                } else {
                    lines.push(format!("  {name}.t = transpose %v{a} [1, 0]"));
                    (format!("{name} = apply @matmul(%v{a}, {name}.t)"), (r, r))
                }
            }
            Step::Softmax(i) => (
                format!("{name} = apply @softmax(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::RowNorm(i) => (
                format!("{name} = apply @rownorm(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::Quant(i) => (
                format!("{name} = apply @quant(%v{})", pick(i)),
                shapes[pick(i)],
            ),
            Step::Bias(i) => {
                let (r, c) = shapes[pick(i)];
                lines.push(format!("  {name}.b = rand seed {n} : f32[{c}]"));
                lines.push(format!("  {name}.bb = broadcast {name}.b [{r}, {c}]"));
                (
                    format!("{name} = apply @add2(%v{}, {name}.bb)", pick(i)),
                    (r, c),
                )
            }
            Step::ColBias(i) => {
                let (r, c) = shapes[pick(i)];
                let v = pick(i);
                lines.push(format!("  {name}.s = slice %v{v} [0:{r}, 0:1]"));
                lines.push(format!("  {name}.q = squeeze {name}.s [1]"));
                lines.push(format!("  {name}.u = unsqueeze {name}.q [1]"));
                lines.push(format!("  {name}.bb = broadcast {name}.u [{r}, {c}]"));
                (format!("{name} = apply @add2(%v{v}, {name}.bb)"), (r, c))
            }
            Step::Sunk(i) => {
                sunk.push(pick(i));
                (
                    format!("{name} = apply @relu(%v{})", pick(i)),
                    shapes[pick(i)],
                )
            }
            Step::Sharded(i, a, b) => {
                let (r, c) = shapes[pick(i)];
                let v = pick(i);
                let ops = ["relu", "affine", "k0", "k1", "softmax", "rownorm"];
                let (f, g) = (ops[*a as usize], ops[*b as usize]);
                let h = (r + 1) / 2;
                let parts: Vec<(i64, i64)> = if h < r {
                    vec![(0, h), (h, r)]
                } else {
                    vec![(0, r)]
                };
                let mut outs = Vec::new();
                for (k, &(lo, hi)) in parts.iter().enumerate() {
                    lines.push(format!("  {name}.x{k} = slice %v{v} [{lo}:{hi}, 0:{c}]"));
                    lines.push(format!(
                        "  {name}.a{k} = apply @{f}({name}.x{k}) @[{lo}:{hi}, 0:{c}] on {k}"
                    ));
                    lines.push(format!(
                        "  {name}.b{k} = apply @{g}({name}.a{k}) @[{lo}:{hi}, 0:{c}] on {k}"
                    ));
                    outs.push(format!("{name}.b{k}"));
                }
                if outs.len() == 1 {
                    (format!("{name} = reverse {} [0]", outs[0]), (r, c))
                } else {
                    (
                        format!("{name} = concat {} axis 0", outs.join(", ")),
                        (r, c),
                    )
                }
            }
        };
        lines.push(format!("  {line}"));
        shapes.push(shape);
    }
    let last = shapes.len() - 1;
    let mut sinks = format!("  sink @out %v{last}\n  sink @first %v0\n");
    sunk.sort_unstable();
    sunk.dedup();
    for p in sunk {
        sinks.push_str(&format!("  sink @pin{p} %v{p}\n"));
    }
    format!("graph @g {{\n{}\n{sinks}}}\n", lines.join("\n"))
}
