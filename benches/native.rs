//! Benchmarks of the native backend against numpy (not part of `cargo test`).
//!
//! `cargo bench --bench native -- [--runs N] [--only NAME|FAMILY,...] [--passes LIST] [--fp-contract off|on]
//! [--data DIR] [--json] [--no-numpy] [--jax-only] [--cold N]`
//!
//! Every workload of issue 5 is compiled once with the JIT, after the pass pipeline `--passes`
//! (default: the standard one, as `tapc FILE -o OUT` uses), and run with 1 and then 2 worker
//! threads; the median wall time of the schedule (kernels and buffer allocation, not input or
//! output copies) is reported per thread count, with the 2-thread speedup. `1T run cpu ms` is
//! the process CPU time of a whole 1-thread run, *including* copying the inputs in and the
//! sinks out: not comparable with the wall times, but when it is below the 1-thread wall time
//! the machine was busy (the thread waited for a core).
//!
//! How 2 threads help an unsharded graph: an apply is one task (a one-shard schedule), but the
//! runtime splits a big task into chunks along a dimension its kernel allows (matmul: the rows;
//! the elementwise chain: the elements) and the workers share the chunks. The `2T jobs` column
//! shows that split (jobs run / tasks, measured in one extra recorded 2-thread run). A sharded
//! pipeline (`--passes='canonicalize,shard{parts=2},fuse'`) gives the same parallelism through
//! the schedule instead.
//!
//! numpy runs side by side on exactly the same inputs, written as `.npy` files (into `--data
//! DIR`, or a temporary directory removed afterwards) and timed by `benches/numpy_ref.py` with
//! its BLAS/OpenMP pools limited to 1 and then 2 threads, so each tapc column has a numpy
//! column with the same number of threads. The ratios are numpy time / tapc time (above 1: tapc
//! is faster). numpy is not on a fresh machine: if `python3` or numpy is missing, the bench
//! says so plainly and reports tapc alone. The load average is printed before and after, since
//! a busy machine (other builds) distorts the 2-thread column most.
//!
//! Families are summarised as well: `odd` (20 matmul shapes drawn from 1 … 3000 by a fixed seed,
//! issue 22) prints its minimum and median ratio against the best peer at 1 and 2 threads.
//!
//! `--cold N` also compiles each selected workload into a program and times N fresh processes
//! of it per thread count (the program's `--time` wall and the process wall, minimum of the
//! N; `benches/native/cold.rs`), beside the warm rows.
//!
//! `--json` prints one JSON object with the medians (seconds) as the last line.

#[path = "native/cold.rs"]
mod cold;
#[path = "native/read.rs"]
mod read;
#[path = "native/report.rs"]
mod report;
#[path = "../tests/common/rng.rs"]
mod rng;
#[path = "native/shapes.rs"]
mod shapes;
#[path = "../tests/common/train_block.rs"]
mod train_block;

use read::{print_paired, read_bandwidth, Probe};
use report::{print_cpu, print_family, print_memory};
use rng::Rng;
use shapes::{odd_shapes, LOWP_SWEEP, ODD_COUNT, RESNET_CONVS, SWEEP};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use tapc_runtime::exec::Options;
use tapc_runtime::{DType, Data, Tensor};

/// The row softmax of the `softmax*` workloads: 8192 rows of 1024, BERT's width 768, and
/// long rows (issue 22).
const SOFTMAX_OP: &str = "op @softmax(x: f32[M, N]) -> (y: f32[M, N]) {
  m[i] = max[j](x[i, j])
  s[i] = sum[j](exp(x[i, j] - m[i]))
  y[i, j] = exp(x[i, j] - m[i]) / s[i]
}
";
const SOFTMAX_SHAPES: [(&str, [u32; 2]); 3] = [
    ("softmax", [8192, 1024]),
    ("softmax_768", [8192, 768]),
    ("softmax_long", [256, 32768]),
];

const WORKLOADS: &[(&str, &str)] = &[
    (
        "matmul",
        "op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
graph @bench {
  %a = source @a : f32[1024, 1024]
  %b = source @b : f32[1024, 1024]
  %c = apply @matmul(%a, %b)
  sink @c %c
}",
    ),
    (
        "mlp",
        "op @linear_relu(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = max(sum[k](x[i, k] * w[k, j]) + b[j], 0.0)
}
op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
graph @bench {
  %x = source @x : f32[4096, 1024]
  %w1 = source @w1 : f32[1024, 4096]
  %b1 = source @b1 : f32[4096]
  %w2 = source @w2 : f32[4096, 1024]
  %b2 = source @b2 : f32[1024]
  %h = apply @linear_relu(%x, %w1, %b1)
  %y = apply @linear(%h, %w2, %b2)
  sink @y %y
}",
    ),
    (
        "elementwise",
        "op @chain(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i] * 1.5 + 0.25, 0.0) * 2.0
}
graph @bench {
  %x = source @x : f32[16777216]
  %y = apply @chain(%x)
  sink @y %y
}",
    ),
    (
        "conv2d",
        "op @conv2d(x: f32[N, C, H, W], f: f32[O, C, KH, KW]) -> (y: f32[N, O, H - KH + 1, W - KW + 1]) {
  y[n, o, h, w] = sum[c, kh, kw](x[n, c, h + kh, w + kw] * f[o, c, kh, kw])
}
graph @bench {
  %x = source @x : f32[1, 64, 56, 56]
  %f = source @f : f32[64, 64, 3, 3]
  %p = pad %x [0:0, 0:0, 1:1, 1:1] constant 0.0
  %y = apply @conv2d(%p, %f)
  sink @y %y
}",
    ),
    (
        "gelu",
        "op @gelu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = 0.5 * x[..i] * (1.0 + tanh(0.7978845608 * (x[..i] + 0.044715 * x[..i] * x[..i] * x[..i])))
}
graph @bench {
  %x = source @x : f32[8388608]
  %y = apply @gelu(%x)
  sink @y %y
}",
    ),
    (
        "layernorm",
        "op @layernorm(x: f32[T, D], g: f32[D], b: f32[D]) -> (y: f32[T, D]) {
  mu[t] = sum[d](x[t, d]) / f32(D)
  var[t] = sum[d]((x[t, d] - mu[t]) * (x[t, d] - mu[t])) / f32(D)
  y[t, d] = (x[t, d] - mu[t]) / sqrt(var[t] + 1e-5) * g[d] + b[d]
}
graph @bench {
  %x = source @x : f32[8192, 768]
  %g = source @g : f32[768]
  %b = source @b : f32[768]
  %y = apply @layernorm(%x, %g, %b)
  sink @y %y
}",
    ),
    // An embedding lookup (GPT-2's vocabulary and width, 8,192 tokens): one row copy per token.
    (
        "embedding",
        "op @embed(E: f32[V, H], ids: i32[T]) -> (y: f32[T, H]) {
  y[t, h] = E[ids[t], h]
}
graph @bench {
  %E = source @E : f32[50257, 768]
  %ids = source @ids : i32[8192]
  %y = apply @embed(%E, %ids)
  sink @y %y
}",
    ),
    // examples/transformer.teg at 2048 tokens (see `source_of`); its `rand` weights are
    // generated inside the timed schedule (numpy's are made once, untimed).
    ("transformer", ""),
    // One training step of examples/train_mlp.teg at issue 19's shapes (see `source_of`):
    // forward, `grad` (lowered by the pipeline) and AdamW on all four parameters.
    ("train_step", ""),
    // Issue 19's bar: one training step of the GPT-2-small block at 1,024 tokens (forward,
    // `grad` of mean(y²) wrt its 12 weights and biases, AdamW on each; tests/common/train_block.rs)
    // against JAX `jit(value_and_grad)` + optax AdamW.
    ("train_block", ""),
];

/// examples/train_mlp.teg resized to a 784 → 512 → 10 MLP at batch 256 (issue 19).
const TRAIN_STEP_SHAPES: &[(&str, &str)] = &[
    ("f32[1024, 16]", "f32[256, 784]"),
    ("f32[1024, 1]", "f32[256, 10]"),
    ("f32[16, 64]", "f32[784, 512]"),
    ("f32[64, 1]", "f32[512, 10]"),
    ("f32[64]", "f32[512]"),
    ("f32[1]", "f32[10]"),
];

/// The workload's TEG source: the text above, or an example resized.
fn source_of(name: &str, src: &str) -> String {
    match name {
        "transformer" => {
            include_str!("../examples/transformer.teg").replace("f32[8, 768]", "f32[2048, 768]")
        }
        "train_step" => TRAIN_STEP_SHAPES.iter().fold(
            include_str!("../examples/train_mlp.teg").to_string(),
            |src, (from, to)| src.replace(from, to),
        ),
        "train_block" => train_block::source(train_block::GPT2_SMALL, false),
        _ => src.to_string(),
    }
}

/// The matmul FLOPs of one `train_block` step: the forward's four linear layers and two
/// attention contractions (all T² scores, as computed), three times (forward, and the two
/// operand gradients of each contraction; the first layer's input gradient is computed too,
/// towards the LayerNorm's gains).
fn train_block_flops() -> f64 {
    let s = train_block::GPT2_SMALL;
    let (t, d, f) = (s.t as f64, s.d as f64, s.f as f64);
    let forward = 2.0 * t * (3.0 * d * d + d * d + 2.0 * d * f) + 2.0 * 2.0 * t * t * d;
    3.0 * forward
}

/// `train_block`'s inputs at a trained network's scale (the bench's [-1, 1) draws `u`): weights
/// 0.05·u (0.025·u for the 3072-wide projection), biases 0.02·u, LayerNorm gains 1 + 0.1·u
/// and shifts 0.1·u, the moments and the step count 0 (a first step; optax's `init`).
fn scale_train_block(ins: &mut HashMap<String, Tensor>) {
    for (name, t) in ins.iter_mut() {
        let (mul, add) = match name.as_str() {
            "x" => (1.0, 0.0),
            "g1" | "g2" => (0.1, 1.0),
            "b1" | "b2" => (0.1, 0.0),
            "w_proj" => (0.025, 0.0),
            n if n.starts_with("w_") => (0.05, 0.0),
            n if n.starts_with("b_") => (0.02, 0.0),
            _ => (0.0, 0.0),
        };
        if let Data::F32(v) = &mut t.data {
            v.iter_mut().for_each(|x| *x = *x * mul + add);
        }
    }
}

/// Workloads held to the scaling bar of issue 5: 2 threads at least this much faster than 1.
const SCALING_BAR: (f64, &[&str]) = (1.7, &["elementwise", "matmul"]);

/// The pipeline of the `+fuse` rows (the same graph as the row without the suffix).
const FUSE_PIPELINE: &str = "canonicalize,fuse,canonicalize";

/// One benchmark row: a graph, its floating-point operations (0: a memory-bound row, judged
/// against copy bandwidth) and its pipeline (`None`: `--passes`).
struct Workload {
    name: String,
    src: String,
    flops: f64,
    passes: Option<&'static str>,
}

const MM: &str = include_str!("../tests/data/matmul_ops.teg");

fn workloads() -> Vec<Workload> {
    let mut out: Vec<Workload> = WORKLOADS
        .iter()
        .map(|&(name, src)| Workload {
            name: name.into(),
            src: source_of(name, src),
            flops: match name {
                "matmul" => 2.0 * 1024f64.powi(3),
                "mlp" => 4.0 * 4096.0 * 1024.0 * 4096.0,
                "conv2d" => 2.0 * 64.0 * 64.0 * 9.0 * 56.0 * 56.0,
                // Three matmul-sized passes (forward, and two in the backward) per layer; the
                // first layer's input gradient is not computed (x is not differentiated).
                "train_step" => 2.0 * 256.0 * (3.0 * 512.0 * 10.0 + 2.0 * 784.0 * 512.0),
                "train_block" => train_block_flops(),
                // Memory-bound: judged against copy bandwidth.
                _ => 0.0,
            },
            passes: None,
        })
        .collect();
    for (name, [m, n]) in SOFTMAX_SHAPES {
        let graph = format!(
            "graph @bench {{\n  %x = source @x : f32[{m}, {n}]\n  %y = apply @softmax(%x)\n  sink @y %y\n}}"
        );
        out.push(Workload {
            name: name.into(),
            src: format!("{SOFTMAX_OP}{graph}"),
            flops: 0.0, // memory-bound: judged against copy bandwidth
            passes: None,
        });
    }
    let w = |name: String, body: String, flops: f64, passes| Workload {
        name,
        src: format!("{MM}graph @bench {{\n{body}}}"),
        flops,
        passes,
    };
    let families = [("mm", SWEEP.to_vec()), ("odd", odd_shapes())];
    for (&(m, k, n), family) in families
        .iter()
        .flat_map(|(f, shapes)| shapes.iter().map(move |s| (s, f)))
    {
        out.push(w(
            format!("{family}_{m}_{k}_{n}"),
            format!(
                "  %a = source @a : f32[{m}, {k}]\n  %b = source @b : f32[{k}, {n}]\n  %c = apply @mm(%a, %b)\n  sink @c %c\n"
            ),
            2.0 * (m * k * n) as f64,
            None,
        ));
    }
    // Low-precision contractions (issue 18): bf16 × bf16 → f32 on `vdpbf16ps` and u8 × i8 → i32
    // on `vpdpbusd` where the host has them, against `mm_M_K_N` (f32) at the same shapes.
    for &(m, k, n) in LOWP_SWEEP {
        for (kind, ad, bd, to) in [
            ("bf16mm", "bf16", "bf16", "f32"),
            ("u8mm", "u8", "i8", "i32"),
        ] {
            out.push(Workload {
                name: format!("{kind}_{m}_{k}_{n}"),
                src: format!(
                    "op @mm(a: {ad}[M, K], b: {bd}[K, N]) -> (c: {to}[M, N]) {{
  c[i, j] = sum[k]({to}(a[i, k]) * {to}(b[k, j]))
}}
graph @bench {{
  %a = source @a : {ad}[{m}, {k}]
  %b = source @b : {bd}[{k}, {n}]
  %c = apply @mm(%a, %b)
  sink @c %c
}}"
                ),
                flops: 2.0 * (m * k * n) as f64,
                passes: None,
            });
        }
    }
    // argmax over GPT-2's vocabulary for 8,192 tokens: memory-bound, judged against the
    // measured read bandwidth.
    out.push(Workload {
        name: "argmax_8192_50257".into(),
        src: "op @am(x: f32[T, V]) -> (y: i64[T]) {
  y[t] = argmax[v](x[t, v])
}
graph @bench {
  %x = source @x : f32[8192, 50257]
  %y = apply @am(%x)
  sink @y %y
}"
        .into(),
        flops: 0.0,
        passes: None,
    });
    // A·Bᵀ through a folded transpose view (the contiguous dim of B is the reduction's).
    let (m, k, n) = (1024i64, 768i64, 3072i64);
    out.push(w(
        format!("abt_{m}_{k}_{n}"),
        format!("  %a = source @a : f32[{m}, {k}]\n  %w = source @w : f32[{n}, {k}]\n  %t = transpose %w [1, 0]\n  %c = apply @mm(%a, %t)\n  sink @c %c\n"),
        2.0 * (m * k * n) as f64,
        None,
    ));
    let (b, m, k, n) = (12i64, 384i64, 64i64, 384i64);
    out.push(w(
        format!("bmm_{b}_{m}_{k}_{n}"),
        format!("  %a = source @a : f32[{b}, {m}, {k}]\n  %b = source @b : f32[{b}, {k}, {n}]\n  %c = apply @bmm(%a, %b)\n  sink @c %c\n"),
        2.0 * (b * m * k * n) as f64,
        None,
    ));
    // The GPT-2-small block's training step fused (`grad` is prepended to the pipeline).
    out.push(Workload {
        name: "train_block+fuse".into(),
        src: source_of("train_block", ""),
        flops: train_block_flops(),
        passes: Some(FUSE_PIPELINE),
    });
    // Fused against unfused: a linear layer with a residual add, and one with a ReLU.
    let (m, k, n) = (2048i64, 768i64, 768i64);
    for passes in [None, Some(FUSE_PIPELINE)] {
        let sfx = if passes.is_some() { "+fuse" } else { "" };
        out.push(w(
            format!("linres{sfx}"),
            format!("  %x = source @x : f32[{m}, {k}]\n  %w = source @w : f32[{k}, {n}]\n  %b = source @b : f32[{n}]\n  %r = source @r : f32[{m}, {n}]\n  %h = apply @linear(%x, %w, %b)\n  %y = apply @add(%h, %r)\n  sink @y %y\n"),
            2.0 * (m * k * n) as f64,
            passes,
        ));
        out.push(w(
            format!("mlplayer{sfx}"),
            format!("  %x = source @x : f32[{m}, {k}]\n  %w = source @w : f32[{k}, {n}]\n  %b = source @b : f32[{n}]\n  %h = apply @linear(%x, %w, %b)\n  %y = apply @relu(%h)\n  sink @y %y\n"),
            2.0 * (m * k * n) as f64,
            passes,
        ));
    }
    for &(kk, s, h, c, o) in RESNET_CONVS {
        let p = (kk - 1) / 2;
        let hp = h + 2 * p;
        let ho = (hp - kk) / s + 1;
        out.push(Workload {
            name: format!("conv_{kk}_{s}_{h}_{c}_{o}"),
            src: format!(
                "op @conv(x: f32[N, C, H, W], f: f32[O, C, KH, KW]) -> (y: f32[N, O, (H - KH) / {s} + 1, (W - KW) / {s} + 1]) {{
  y[n, o, h, w] = sum[c, kh, kw](x[n, c, {s} * h + kh, {s} * w + kw] * f[o, c, kh, kw])
}}
graph @bench {{
  %x = source @x : f32[1, {c}, {h}, {h}]
  %f = source @f : f32[{o}, {c}, {kk}, {kk}]
  %p = pad %x [0:0, 0:0, {p}:{p}, {p}:{p}] constant 0.0
  %y = apply @conv(%p, %f)
  sink @y %y
}}"
            ),
            flops: 2.0 * (o * c * kk * kk * ho * ho) as f64,
            passes: None,
        });
    }
    out
}

/// The machine's measured limits: FMA peak (GFLOP/s) and copy bandwidth (GB/s, bytes read
/// plus written), each with 1 and 2 threads.
struct Machine {
    peak: [f64; 2],
    bandwidth: [f64; 2],
    /// Bytes per second only read (a sum over 256 MiB), with 1 and 2 threads.
    read: [f64; 2],
}

/// 12 independent 16-lane FMA chains (enough to cover the FMA latency on two ports).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
fn fma_avx512(iters: u64) -> f32 {
    use std::arch::x86_64::*;
    let mut acc = [_mm512_set1_ps(0.0); 12];
    let (a, b) = (_mm512_set1_ps(0.999_99), _mm512_set1_ps(1e-7));
    for _ in 0..iters {
        for x in acc.iter_mut() {
            *x = _mm512_fmadd_ps(*x, a, b);
        }
    }
    acc.iter().map(|&x| _mm512_reduce_add_ps(x)).sum()
}

/// FLOPs per second of [`fma_avx512`] on `threads` threads at once (0 without AVX-512).
fn fma_peak(threads: usize) -> f64 {
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        let iters = 20_000_000u64;
        let t0 = std::time::Instant::now();
        std::thread::scope(|s| {
            for _ in 0..threads {
                // SAFETY: AVX-512F was detected above.
                s.spawn(|| {
                    std::hint::black_box(unsafe { fma_avx512(std::hint::black_box(iters)) })
                });
            }
        });
        return threads as f64 * iters as f64 * 12.0 * 16.0 * 2.0 / t0.elapsed().as_secs_f64();
    }
    0.0
}

/// Bytes per second (read plus written) copying 256 MiB between buffers on `threads` threads.
fn copy_bandwidth(threads: usize) -> f64 {
    let n = 64 << 20;
    let src = vec![1.0f32; n];
    let mut dst = vec![0.0f32; n];
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t0 = std::time::Instant::now();
        std::thread::scope(|s| {
            let per = n.div_ceil(threads);
            for (d, c) in dst.chunks_mut(per).zip(src.chunks(per)) {
                s.spawn(move || d.copy_from_slice(c));
            }
        });
        best = best.min(t0.elapsed().as_secs_f64());
        std::hint::black_box(&dst);
    }
    2.0 * (n * 4) as f64 / best
}

fn measure_machine() -> Machine {
    Machine {
        peak: [fma_peak(1) / 1e9, fma_peak(2) / 1e9],
        bandwidth: [copy_bandwidth(1) / 1e9, copy_bandwidth(2) / 1e9],
        read: [read_bandwidth(1) / 1e9, read_bandwidth(2) / 1e9],
    }
}

fn inputs(m: &tapc::ir::Module) -> HashMap<String, Tensor> {
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut out = HashMap::new();
    // Integer sources are gathered indices: below the first dimension of every float source.
    let rows = m.graphs[0]
        .sources()
        .filter(|s| s.1.dtype != DType::I32)
        .filter_map(|s| s.1.shape.first().copied())
        .min()
        .unwrap_or(1);
    for (name, ty, _) in m.graphs[0].sources() {
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let n: usize = shape.iter().product();
        let data = match ty.dtype {
            DType::F32 => Data::F32((0..n).map(|_| rng.unit_f32() * 2.0 - 1.0).collect()),
            DType::I32 => Data::I32(
                (0..n)
                    .map(|_| (rng.unit_f32() * rows as f32) as i32 % rows as i32)
                    .collect(),
            ),
            DType::BF16 => Data::BF16(
                (0..n)
                    .map(|_| tapc_runtime::bf16::from_f32(rng.unit_f32() * 2.0 - 1.0))
                    .collect(),
            ),
            DType::U8 => Data::U8((0..n).map(|_| rng.next() as u8).collect()),
            DType::I8 => Data::I8((0..n).map(|_| rng.next() as i8).collect()),
            d => panic!("no bench inputs of dtype {d:?}"),
        };
        out.insert(name.to_string(), Tensor::new(shape, data).unwrap());
    }
    out
}

/// CPU time of the whole process (all threads), in seconds.
fn cpu_seconds() -> f64 {
    #[repr(C)]
    struct Timespec {
        sec: i64,
        nsec: i64,
    }
    extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }
    const CLOCK_PROCESS_CPUTIME_ID: i32 = 2;
    let mut ts = Timespec { sec: 0, nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    ts.sec as f64 + ts.nsec as f64 * 1e-9
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// How many cores two spinning threads actually get right now: process CPU time over wall
/// time while both spin for `ms` milliseconds (2.0 on an idle machine with 2 free cores).
fn cores_free_for_two(ms: u64) -> f64 {
    let (c0, t0) = (cpu_seconds(), std::time::Instant::now());
    std::thread::scope(|s| {
        for _ in 0..2 {
            s.spawn(|| {
                let mut x = 0u64;
                while t0.elapsed().as_millis() < ms as u128 {
                    x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
                }
            });
        }
    });
    (cpu_seconds() - c0) / t0.elapsed().as_secs_f64()
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "unknown".into())
}

/// Whether numpy can be timed: `Ok(version)`, or why not.
fn numpy_version() -> Result<String, String> {
    match Command::new("python3")
        .args(["-c", "import numpy; print(numpy.__version__)"])
        .output()
    {
        Err(e) => Err(format!("python3 cannot be run ({e})")),
        Ok(o) if !o.status.success() => Err(format!(
            "numpy is not installed for python3 ({}); `pip install numpy` to compare",
            String::from_utf8_lossy(&o.stderr)
                .lines()
                .last()
                .unwrap_or("import failed")
                .trim()
        )),
        Ok(o) => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
    }
}

/// A reference library's median seconds per workload on the inputs under `data`
/// (`benches/numpy_ref.py --lib LIB`): numpy with its BLAS/OpenMP pools limited to `threads`;
/// JAX (jit, CPU) pinned to `threads` cores with `taskset` (XLA sizes its pool to the machine).
fn time_ref(
    lib: &str,
    data: &Path,
    names: &[&str],
    runs: usize,
    threads: usize,
) -> Result<HashMap<String, f64>, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/numpy_ref.py");
    let cores = (0..threads)
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", &cores, "python3"]);
    cmd.arg(&script).arg("--data").arg(data).args([
        "--lib",
        lib,
        "--runs",
        &runs.to_string(),
        "--only",
        &names.join(","),
    ]);
    for var in [
        "OMP_NUM_THREADS",
        "OPENBLAS_NUM_THREADS",
        "MKL_NUM_THREADS",
        "BLIS_NUM_THREADS",
    ] {
        cmd.env(var, threads.to_string());
    }
    let o = cmd
        .output()
        .map_err(|e| format!("cannot run taskset python3 {}: {e}", script.display()))?;
    let text = String::from_utf8_lossy(&o.stdout);
    if !o.status.success() {
        return Err(format!(
            "{} --lib {lib} failed: {}",
            script.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    let line = text.lines().last().unwrap_or_default();
    let v: serde_json::Value =
        serde_json::from_str(line).map_err(|e| format!("numpy_ref.py printed {line:?}: {e}"))?;
    let obj = v
        .as_object()
        .ok_or("numpy_ref.py: expected a JSON object")?;
    Ok(obj
        .iter()
        .filter_map(|(k, v)| v.as_f64().map(|t| (k.clone(), t)))
        .collect())
}

/// Whether JAX can be timed: `Ok(version)`, or why not.
fn jax_version() -> Result<String, String> {
    match Command::new("python3")
        .args(["-c", "import jax; print(jax.__version__)"])
        .output()
    {
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).trim().to_string()),
        _ => Err("jax is not importable for python3 (`pip install jax[cpu]` to compare; `optax` too for train_block)".into()),
    }
}

/// Whether `--only` entry `x` selects workload `name`: the name itself, or a family (`mm`
/// selects every `mm_M_K_N`, `linres` also `linres+fuse`).
fn selects(x: &str, name: &str) -> bool {
    name == x
        || name
            .strip_prefix(x)
            .is_some_and(|r| r.starts_with(['_', '+']))
}

struct Row {
    name: String,
    t1: f64,
    t2: f64,
    cpu1: f64,
    jobs: usize,
    tasks: usize,
    flops: f64,
    /// Bytes of the sources and sinks (what a memory-bound row must move at least).
    bytes: f64,
    /// Most bytes of buffers live at once in a 2-thread run (the runtime's peak).
    peak_bytes: u64,
    /// An argmax row's 2-thread runs: (bytes per second, the read probe's just before).
    read_pairs: Vec<(f64, f64)>,
}

/// The bench's command line (unknown words are ignored: `cargo bench` passes `--bench`).
struct BenchArgs {
    runs: usize,
    only: Option<String>,
    data: Option<PathBuf>,
    json: bool,
    contract: tapc::codegen::FpContract,
    refs: bool,
    /// `--jax-only`: time JAX but not numpy.
    jax_only: bool,
    passes: String,
    /// `--cold N`: fresh compiled-program runs per thread count (0: none).
    cold: usize,
    /// `--cold-before TAPC`: the cold runs also with the programs this `tapc` builds.
    cold_before: Option<PathBuf>,
}

impl BenchArgs {
    fn parse() -> BenchArgs {
        let mut b = BenchArgs {
            runs: 5,
            only: None,
            data: None,
            json: false,
            contract: tapc::codegen::FpContract::On,
            refs: true,
            jax_only: false,
            passes: tapc::passes::manager::DEFAULT_PIPELINE.to_string(),
            cold: 0,
            cold_before: None,
        };
        let args: Vec<String> = std::env::args().skip(1).collect();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            match a.as_str() {
                "--runs" => b.runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(b.runs),
                "--only" => b.only = it.next().cloned(),
                "--data" => b.data = it.next().map(PathBuf::from),
                "--passes" => b.passes = it.next().cloned().unwrap_or(b.passes),
                "--json" => b.json = true,
                "--fp-contract" => {
                    b.contract = match it.next().map(String::as_str) {
                        Some("off") => tapc::codegen::FpContract::Off,
                        _ => tapc::codegen::FpContract::On,
                    }
                }
                "--no-numpy" => b.refs = false,
                "--jax-only" => b.jax_only = true,
                "--cold" => b.cold = it.next().and_then(|v| v.parse().ok()).unwrap_or(3),
                "--cold-before" => b.cold_before = it.next().map(PathBuf::from),
                _ => {}
            }
        }
        b.runs = b.runs.max(1);
        b
    }

    fn selected(&self, name: &str) -> bool {
        self.only
            .as_deref()
            .is_none_or(|o| o.split(',').any(|x| selects(x, name)))
    }
}

/// Medians of the reference libraries, per thread count (1, 2), keyed by workload name.
type RefTimes = Result<[HashMap<String, f64>; 2], String>;

/// One reference's time for a workload with `t + 1` threads.
fn ref_time(r: &RefTimes, t: usize, name: &str) -> Option<f64> {
    r.as_ref().ok().and_then(|m| m[t].get(name).copied())
}

fn print_header(
    a: &BenchArgs,
    numpy: &Result<String, String>,
    jax: &Result<String, String>,
) -> (String, Machine) {
    let load_before = load_average();
    let contract = if a.contract == tapc::codegen::FpContract::Off {
        ", --fp-contract=off"
    } else {
        ""
    };
    println!(
        "tapc native backend, passes `{}`{contract}, medians of {} runs; {} cores available; load average {load_before}; two spinning threads get {:.2} cores",
        a.passes,
        a.runs,
        tapc_runtime::exec::default_threads(),
        cores_free_for_two(300)
    );
    let mach = measure_machine();
    println!(
        "machine: AVX-512 FMA peak {:.0} GFLOP/s on 1 thread, {:.0} on 2; copy bandwidth (read + write) {:.1} GB/s on 1 thread, {:.1} on 2; read bandwidth {:.1} GB/s on 1 thread, {:.1} on 2",
        mach.peak[0], mach.peak[1], mach.bandwidth[0], mach.bandwidth[1], mach.read[0], mach.read[1]
    );
    match numpy {
        Ok(v) => println!("numpy {v}: timed on the same inputs with 1 and 2 BLAS/OpenMP threads"),
        Err(why) => println!("numpy: NOT MEASURED: {why}"),
    }
    match jax {
        Ok(v) => println!("JAX {v} (jit, CPU): timed on the same inputs pinned to 1 and 2 cores"),
        Err(why) => println!("JAX: NOT MEASURED: {why}"),
    }
    (load_before, mach)
}

/// Compiles one workload, writes its inputs for the references, and times it with 1 and 2 threads.
fn measure(wl: &Workload, a: &BenchArgs, data_dir: Option<&Path>) -> Row {
    let name = wl.name.as_str();
    let (mut m, facts, diags) = tapc::compile_source(&wl.src);
    assert!(!diags.has_errors(), "{name}: {:?}", diags.0);
    let mut ins = inputs(&m);
    if name.starts_with("train_block") {
        scale_train_block(&mut ins);
    }
    let g0 = &m.graphs[0];
    let sinks: f64 = g0
        .sinks()
        .filter_map(|(_, v)| {
            g0.ty(v)
                .map(|t| (t.elements() * t.dtype.size_bytes() as i64) as f64)
        })
        .sum();
    // A gather reads only the rows it writes (plus the indices), not its whole table.
    let bytes = if name == "embedding" {
        2.0 * sinks + ins["ids"].len() as f64 * 4.0
    } else {
        ins.values()
            .map(|t| (t.len() * t.dtype().size_bytes()) as f64)
            .sum::<f64>()
            + sinks
    };
    if let Some(dir) = data_dir {
        let d = dir.join(name);
        std::fs::create_dir_all(&d).unwrap();
        for (n, t) in &ins {
            tapc_runtime::npy::write(&d.join(format!("{n}.npy")), t).unwrap();
        }
    }
    let pipeline = wl.passes.unwrap_or(&a.passes);
    let facts = tapc::passes::manager::run_pipeline(
        &mut m,
        facts,
        pipeline,
        &Default::default(),
        &mut String::new(),
    )
    .unwrap_or_else(|d| panic!("{name}: --passes {pipeline}: {}", d.message))
    .facts;
    let copts = tapc::codegen::Options {
        fp_contract: a.contract,
        ..Default::default()
    };
    tapc::codegen::with_jit(&m, 0, &facts[0], &copts, |p| {
        time_program(p, &ins, a.runs, wl, bytes)
    })
    .unwrap_or_else(|d| panic!("{name}: {}", d.message))
}

/// The workload compiled by `tapc` into a program and timed as fresh processes (`--cold`), in a
/// directory of its own under `tmp` (removed with it).
fn measure_cold(tapc: &Path, wl: &Workload, a: &BenchArgs, tmp: &Path) -> cold::Cold {
    let (m, _, _) = tapc::compile_source(&wl.src);
    let contract = match a.contract {
        tapc::codegen::FpContract::Off => "off",
        _ => "on",
    };
    let dir = tmp.join("cold").join(&wl.name);
    let c = cold::measure(
        tapc,
        &wl.name,
        &wl.src,
        wl.passes.unwrap_or(&a.passes),
        contract,
        &inputs(&m),
        a.cold,
        &dir,
    );
    let _ = std::fs::remove_dir_all(&dir);
    c
}

/// Median wall times with 1 and 2 threads, the 1-thread CPU time, and one recorded 2-thread run.
fn time_program(
    p: &tapc::codegen::Program,
    ins: &HashMap<String, Tensor>,
    runs: usize,
    wl: &Workload,
    bytes: f64,
) -> Row {
    let mut medians = Vec::new();
    let mut cpu1 = 0.0;
    // Memory-bound against reads alone: each 2-thread run paired with a probe pass.
    let probe = wl.name.starts_with("argmax").then(Probe::new).flatten();
    let mut read_pairs = Vec::new();
    for threads in [1usize, 2] {
        let opts = Options {
            threads,
            record: false,
        };
        p.run(ins, &opts).unwrap(); // warm-up
        let (mut wall, mut cpu) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let probed = probe.as_ref().filter(|_| threads == 2).map(|p| p.pass(2));
            let c0 = cpu_seconds();
            let (_, rep) = p.run(ins, &opts).unwrap();
            cpu.push(cpu_seconds() - c0);
            wall.push(rep.wall.as_secs_f64());
            if let Some(bw) = probed {
                read_pairs.push((bytes / rep.wall.as_secs_f64(), bw));
            }
        }
        medians.push(median(wall));
        if threads == 1 {
            cpu1 = median(cpu);
        }
    }
    let opts = Options {
        threads: 2,
        record: true,
    };
    let (_, rep) = p.run(ins, &opts).unwrap();
    Row {
        name: wl.name.clone(),
        t1: medians[0],
        t2: medians[1],
        cpu1,
        jobs: rep.events.len(),
        tasks: rep.task_names.len(),
        flops: wl.flops,
        bytes,
        peak_bytes: rep.peak_bytes,
        read_pairs,
    }
}

fn print_row(row: &Row) {
    println!(
        "{:<22} {:>11.2} {:>11.2} {:>7.2}x {:>13} {:>14.2}",
        row.name,
        row.t1 * 1e3,
        row.t2 * 1e3,
        row.t1 / row.t2,
        format!("{} / {} task(s)", row.jobs, row.tasks),
        row.cpu1 * 1e3
    );
}

/// Times the selected workloads with numpy or JAX (`lib`), when it is available.
fn time_refs(
    lib: &str,
    avail: &Result<String, String>,
    data_dir: Option<&Path>,
    names: &[&str],
    runs: usize,
) -> RefTimes {
    match (avail, data_dir) {
        (Ok(_), Some(dir)) if !names.is_empty() => time_ref(lib, dir, names, runs, 1)
            .and_then(|a| time_ref(lib, dir, names, runs, 2).map(|b| [a, b])),
        (Err(e), _) => Err(e.clone()),
        _ => Err("no workload selected".into()),
    }
}

/// % of the measured 2-thread FMA peak for compute rows, of copy bandwidth for memory-bound rows.
fn rate_and_limit(r: &Row, mach: &Machine) -> (String, String) {
    if r.flops > 0.0 {
        let g = r.flops / r.t2 / 1e9;
        (
            format!("{g:.0}"),
            format!("{:.0}%", 100.0 * g / mach.peak[1]),
        )
    } else if r.name.starts_with("argmax") {
        let gb = r.bytes / r.t2 / 1e9;
        ("-".into(), format!("{:.0}% rd", 100.0 * gb / mach.read[1]))
    } else {
        let gb = r.bytes / r.t2 / 1e9;
        (
            "-".into(),
            format!("{:.0}% bw", 100.0 * gb / mach.bandwidth[1]),
        )
    }
}

fn print_side_by_side(rows: &[Row], np: &RefTimes, jx: &RefTimes, mach: &Machine) {
    let ms = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{:.2}", v * 1e3));
    println!();
    println!("side by side (ms, medians; ratio = best of numpy and JAX / tapc at 2 threads; above 1: tapc is faster; % of the measured 2-thread FMA peak for compute rows, of copy bandwidth for memory-bound rows)");
    println!(
        "{:<22} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7} {:>9} {:>8}",
        "workload",
        "numpy 1T",
        "JAX 1T",
        "tapc 1T",
        "numpy 2T",
        "JAX 2T",
        "tapc 2T",
        "2T/1T",
        "ratio",
        "GFLOP/s",
        "% limit"
    );
    for r in rows {
        let (n1, n2) = (ref_time(np, 0, &r.name), ref_time(np, 1, &r.name));
        let (j1, j2) = (ref_time(jx, 0, &r.name), ref_time(jx, 1, &r.name));
        let best = [n2, j2].into_iter().flatten().reduce(f64::min);
        let (rate, limit) = rate_and_limit(r, mach);
        println!(
            "{:<22} {:>9} {:>9} {:>9.2} {:>9} {:>9} {:>9.2} {:>6.2}x {:>7} {:>9} {:>8}",
            r.name,
            ms(n1),
            ms(j1),
            r.t1 * 1e3,
            ms(n2),
            ms(j2),
            r.t2 * 1e3,
            r.t1 / r.t2,
            best.map_or("-".into(), |b| format!("{:.2}x", b / r.t2)),
            rate,
            limit
        );
    }
}

fn print_scaling(rows: &[Row], load_before: &str) {
    let (bar, held) = SCALING_BAR;
    let checks: Vec<String> = rows
        .iter()
        .filter(|r| held.contains(&r.name.as_str()))
        .map(|r| {
            let s = r.t1 / r.t2;
            let verdict = if s >= bar { "meets" } else { "BELOW" };
            format!("{} {s:.2}x ({verdict})", r.name)
        })
        .collect();
    if !checks.is_empty() {
        println!(
            "scaling bar (2 threads >= {bar}x 1 thread): {}",
            checks.join(", ")
        );
    }
    println!(
        "load average: {load_before} before, {} after; two spinning threads get {:.2} cores (below 2: a busy machine, which mostly shrinks the 2T speedup)",
        load_average(),
        cores_free_for_two(300)
    );
}

fn print_json(rows: &[Row], np: &RefTimes, jx: &RefTimes) {
    let num = |v: Option<f64>| v.map_or("null".to_string(), |v| v.to_string());
    let body: Vec<String> = rows
        .iter()
        .map(|r| {
            format!(
                "\"{}\": {{\"t1\": {}, \"t2\": {}, \"cpu1\": {}, \"jobs2\": {}, \"numpy1\": {}, \"numpy2\": {}, \"jax1\": {}, \"jax2\": {}}}",
                r.name,
                r.t1,
                r.t2,
                r.cpu1,
                r.jobs,
                num(ref_time(np, 0, &r.name)),
                num(ref_time(np, 1, &r.name)),
                num(ref_time(jx, 0, &r.name)),
                num(ref_time(jx, 1, &r.name))
            )
        })
        .collect();
    println!("{{{}}}", body.join(", "));
}

fn main() {
    let a = BenchArgs::parse();
    let skipped = || Err("skipped (--no-numpy or --jax-only)".to_string());
    let numpy = if a.refs && !a.jax_only {
        numpy_version()
    } else {
        skipped()
    };
    let jax = if a.refs { jax_version() } else { skipped() };
    let (load_before, mach) = print_header(&a, &numpy, &jax);
    let tmp_data = std::env::temp_dir().join(format!("tapc-bench-{}", std::process::id()));
    let data_dir: Option<&Path> = match (&a.data, numpy.is_ok() || jax.is_ok()) {
        (Some(d), _) => Some(d),
        (None, true) => Some(&tmp_data),
        (None, false) => None,
    };
    println!();
    println!(
        "{:<22} {:>11} {:>11} {:>8} {:>13} {:>14}",
        "workload", "tapc 1T ms", "tapc 2T ms", "2T/1T", "2T jobs", "1T run cpu ms"
    );
    let mut rows: Vec<Row> = Vec::new();
    let mut colds = Vec::new();
    let this_tapc = PathBuf::from(env!("CARGO_BIN_EXE_tapc"));
    for wl in workloads().iter().filter(|wl| a.selected(&wl.name)) {
        let row = measure(wl, &a, data_dir);
        print_row(&row);
        if a.cold > 0 {
            let c = |t: &Path| measure_cold(t, wl, &a, &tmp_data);
            colds.push((c(&this_tapc), a.cold_before.as_deref().map(c)));
        }
        rows.push(row);
    }
    let names: Vec<&str> = rows.iter().map(|r| r.name.as_str()).collect();
    let np = time_refs("numpy", &numpy, data_dir, &names, a.runs);
    let jx = time_refs("jax", &jax, data_dir, &names, a.runs);
    if a.data.is_none() || a.cold > 0 {
        let _ = std::fs::remove_dir_all(&tmp_data);
    }
    for (lib, r) in [("numpy", &np), ("JAX", &jx)] {
        if let Err(why) = r {
            println!("{lib}: NOT MEASURED ({why})");
        }
    }
    print_side_by_side(&rows, &np, &jx, &mach);
    print_memory(&rows, &jx);
    print_cpu(&rows, &jx);
    for r in &rows {
        print_paired(&r.name, &r.read_pairs);
    }
    print_family("odd", ODD_COUNT, &rows, &np, &jx);
    if a.cold > 0 {
        let best = |r: &Row| {
            [ref_time(&np, 1, &r.name), ref_time(&jx, 1, &r.name)]
                .into_iter()
                .flatten()
                .reduce(f64::min)
        };
        let table = |before: bool| -> Vec<_> {
            (rows.iter().zip(&colds))
                .filter_map(|(r, (c, b))| {
                    Some((
                        r.name.clone(),
                        if before { (*b)? } else { *c },
                        r.t2,
                        best(r),
                    ))
                })
                .collect()
        };
        cold::print(&table(false), a.cold, &this_tapc);
        if let Some(t) = &a.cold_before {
            cold::print(&table(true), a.cold, t);
        }
    }
    print_scaling(&rows, &load_before);
    if a.json {
        print_json(&rows, &np, &jx);
    }
}
