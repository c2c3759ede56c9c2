//! Benchmarks of the native backend (not part of `cargo test`): each workload of issue 5 is
//! compiled once with the JIT and run with 1 and 2 worker threads; the median wall time of the
//! schedule (kernels and buffer allocation, not input/output copies) is reported, with the
//! process CPU time of the 1-thread runs (less sensitive to a busy machine).
//!
//! `cargo bench --bench native -- [--runs N] [--only NAME] [--data DIR] [--json] [--fast-math]`:
//! `--data DIR` also writes every workload's inputs as `DIR/NAME/SOURCE.npy` so that
//! `benches/numpy_ref.py` can time numpy on exactly the same inputs; `--json` prints one JSON
//! object with the medians (seconds) as the last line.

use std::collections::HashMap;
use std::path::PathBuf;
use tapc_runtime::exec::Options;
use tapc_runtime::{DType, Data, Tensor};

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
        "softmax",
        "op @softmax(x: f32[M, N]) -> (y: f32[M, N]) {
  m[i] = max[j](x[i, j])
  s[i] = sum[j](exp(x[i, j] - m[i]))
  y[i, j] = exp(x[i, j] - m[i]) / s[i]
}
graph @bench {
  %x = source @x : f32[8192, 1024]
  %y = apply @softmax(%x)
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
];

fn inputs(m: &tapc::ir::Module) -> HashMap<String, Tensor> {
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut out = HashMap::new();
    for (name, ty, _) in m.graphs[0].sources() {
        assert_eq!(ty.dtype, DType::F32);
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let n: usize = shape.iter().product();
        let v: Vec<f32> = (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state >> 40) as f32 / (1u64 << 23) as f32 - 1.0
            })
            .collect();
        out.insert(name.to_string(), Tensor::new(shape, Data::F32(v)).unwrap());
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

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut runs = 7;
    let mut only: Option<String> = None;
    let mut data: Option<PathBuf> = None;
    let mut json = false;
    let mut fast_math = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--runs" => runs = it.next().and_then(|v| v.parse().ok()).unwrap_or(runs),
            "--only" => only = it.next().cloned(),
            "--data" => data = it.next().map(PathBuf::from),
            "--json" => json = true,
            "--fast-math" => fast_math = true,
            _ => {} // `cargo bench` passes `--bench`
        }
    }
    let mut results = Vec::new();
    println!(
        "{:<12} {:>12} {:>12} {:>8} {:>12}",
        "workload", "1 thread ms", "2 threads ms", "speedup", "1T cpu ms"
    );
    for (name, src) in WORKLOADS {
        if only.as_deref().is_some_and(|o| o != *name) {
            continue;
        }
        let (m, facts, diags) = tapc::compile_source(src);
        assert!(!diags.has_errors(), "{name}: {:?}", diags.0);
        let ins = inputs(&m);
        if let Some(dir) = &data {
            let d = dir.join(name);
            std::fs::create_dir_all(&d).unwrap();
            for (n, t) in &ins {
                tapc_runtime::npy::write(&d.join(format!("{n}.npy")), t).unwrap();
            }
        }
        let copts = tapc::codegen::Options { fast_math };
        let times = tapc::codegen::with_jit(&m, 0, &facts[0], &copts, |p| {
            let mut t = Vec::new();
            for threads in [1usize, 2] {
                let opts = Options {
                    threads,
                    record: false,
                };
                p.run(&ins, &opts).unwrap(); // warm-up
                let (mut wall, mut cpu) = (Vec::new(), Vec::new());
                for _ in 0..runs {
                    let c0 = cpu_seconds();
                    let (_, rep) = p.run(&ins, &opts).unwrap();
                    cpu.push(cpu_seconds() - c0);
                    wall.push(rep.wall.as_secs_f64());
                }
                t.push(median(wall));
                t.push(median(cpu));
            }
            t
        })
        .unwrap_or_else(|d| panic!("{name}: {}", d.message));
        println!(
            "{:<12} {:>12.2} {:>12.2} {:>7.2}x {:>12.2}",
            name,
            times[0] * 1e3,
            times[2] * 1e3,
            times[0] / times[2],
            times[1] * 1e3
        );
        results.push((name, times));
    }
    if json {
        let body: Vec<String> = results
            .iter()
            .map(|(n, t)| {
                format!(
                    "\"{n}\": {{\"t1\": {}, \"t2\": {}, \"cpu1\": {}}}",
                    t[0], t[2], t[1]
                )
            })
            .collect();
        println!("{{{}}}", body.join(", "));
    }
}
