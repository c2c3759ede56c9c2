//! The cost model's predicted time against the measured time, at 1 rank (issue 17, "a measured
//! machine"): for the examples and larger workloads (the batch-sharded MLP's shape, a matmul,
//! a heat stencil), each after the default pipeline, unsharded on one node.
//!
//! `cargo bench --bench predict [-- --runs N] [--only NAME]`
//!
//! First it calibrates this machine in-process (`tapc calibrate`'s code) at 1 thread and at all
//! threads. Then each workload is JIT-compiled once and run `--runs` times (default 7) after a
//! warm-up at each thread count; the measured time is the median of the runtime's wall time of
//! the schedule (kernels and buffers, not input or output copies). Predicted: the model's
//! time of the unsharded plan on one node, uncalibrated (`Machine::default_local(1)`: one core
//! of 50 Gflop/s, 20 GB/s) and calibrated (the measured machine of that thread count). The
//! ratios are predicted / measured (1 is exact). The load average is printed before and
//! after: on a machine shared with other builds, measured times are upper bounds.
//!
//! Two ranks are not measured here: `cargo bench --bench mpi` prints the default model's
//! predictions against `mpirun -np 2` for the batch-sharded MLP.

use std::collections::HashMap;
use tapc::driver::calibrate::calibrate;
use tapc::ir::graph::NodeKind;
use tapc::ir::Module;
use tapc::passes::cost::{self, machine::Machine};
use tapc::passes::manager::{run_pipeline, PassFiles, RunConfig, DEFAULT_PIPELINE};
use tapc::verify::GraphFacts;
use tapc_runtime::{exec, DType, Data, Tensor};

fn heat() -> String {
    "op @stencil(x: f32[M, N]) -> (y: f32[M - 2, N - 2]) {
  y[i, j] = x[i + 1, j + 1] * 0.5 + (x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2]) * 0.125
}
graph @heat {
  %u = source @u : f32[2048, 2048]
  %p = pad %u [1:1, 1:1] constant 0.0
  %v = apply @stencil(%p)
  sink @v %v
}
"
    .into()
}

fn matmul() -> String {
    "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {
  c[i, j] = sum[k](a[i, k] * b[k, j])
}
graph @bench {
  %a = source @a : f32[1024, 1024]
  %b = source @b : f32[1024, 1024]
  %c = apply @mm(%a, %b)
  sink @c %c
}
"
    .into()
}

/// The MLP of `benches/mpi.rs` (4096×1024 → 4096 → 1024, bias + ReLU).
fn big_mlp() -> String {
    let ops = "op @linear_relu(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = max(sum[k](x[i, k] * w[k, j]) + b[j], 0.0)
}
op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
";
    format!(
        "{ops}graph @mlp {{
  %x = source @x : f32[4096, 1024]
  %w1 = source @w1 : f32[1024, 4096]
  %b1 = source @b1 : f32[4096]
  %w2 = source @w2 : f32[4096, 1024]
  %b2 = source @b2 : f32[1024]
  %h = apply @linear_relu(%x, %w1, %b1)
  %y = apply @linear(%h, %w2, %b2)
  sink @y %y
}}
"
    )
}

fn workloads() -> Vec<(String, String)> {
    let root = env!("CARGO_MANIFEST_DIR");
    let mut out: Vec<(String, String)> = ["mlp", "conv", "softmax", "attention", "transformer"]
        .iter()
        .map(|n| {
            let src = std::fs::read_to_string(format!("{root}/examples/{n}.teg")).unwrap();
            (n.to_string(), src)
        })
        .collect();
    out.push(("mlp-4096".into(), big_mlp()));
    out.push(("matmul-1024".into(), matmul()));
    out.push(("heat-2048".into(), heat()));
    out
}

/// The module of `src` after the default pipeline, and its facts.
fn load(src: &str) -> (Module, Vec<GraphFacts>) {
    let (mut m, facts, diags) = tapc::compile_source(src);
    assert!(!diags.has_errors(), "a workload does not compile");
    let out = run_pipeline(
        &mut m,
        facts,
        DEFAULT_PIPELINE,
        &RunConfig::default(),
        &mut String::new(),
    )
    .unwrap_or_else(|d| panic!("{}", d.message));
    (m, out.facts)
}

/// Inputs for every source of graph 0: small deterministic values of its type.
fn inputs(m: &Module) -> HashMap<String, Tensor> {
    let mut out = HashMap::new();
    for n in &m.graphs[0].nodes {
        let NodeKind::Source { name, ty, .. } = &n.kind else {
            continue;
        };
        let shape: Vec<usize> = ty.shape.iter().map(|&d| d as usize).collect();
        let len: usize = shape.iter().product();
        let v = |i: usize| ((i * 7919) % 64) as f64 / 64.0 - 0.5;
        let data = match ty.dtype {
            DType::F64 => Data::F64((0..len).map(v).collect()),
            DType::I32 => Data::I32((0..len).map(|i| (i % 7) as i32).collect()),
            DType::I64 => Data::I64((0..len).map(|i| (i % 7) as i64).collect()),
            DType::Bool => Data::Bool((0..len).map(|i| i % 2 == 0).collect()),
            DType::F32 => Data::F32((0..len).map(|i| v(i) as f32).collect()),
            // No measured workload has another dtype; zeros keep them runnable.
            other => Data::zeros(other, len),
        };
        out.insert(name.clone(), Tensor::new(shape, data).unwrap());
    }
    out
}

/// The model's time of graph 0 of `m` unsharded on `machine`.
fn predicted(m: &Module, facts: &[GraphFacts], machine: &Machine) -> f64 {
    let mut cfg = cost::config(&[], &PassFiles::default()).unwrap();
    cfg.machine = machine.clone();
    let p = cost::problem(m, 0, &facts[0], &cfg).unwrap();
    p.evaluate(&p.unsharded())[0]
}

/// Median wall time (s) of `runs` runs at each of `threads`, after a warm-up each.
fn measured(m: &Module, facts: &[GraphFacts], threads: &[usize], runs: usize) -> Vec<f64> {
    let ins = inputs(m);
    let copts = tapc::codegen::Options::default();
    tapc::codegen::with_jit(m, 0, &facts[0], &copts, |prog| {
        threads
            .iter()
            .map(|&t| {
                let opts = exec::Options {
                    threads: t,
                    record: false,
                };
                let mut walls: Vec<f64> = (0..=runs)
                    .map(|_| prog.run(&ins, &opts).unwrap().1.wall.as_secs_f64())
                    .skip(1)
                    .collect();
                walls.sort_by(f64::total_cmp);
                walls[walls.len() / 2]
            })
            .collect()
    })
    .unwrap_or_else(|d| panic!("{}", d.message))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(", "))
        .unwrap_or_else(|_| "unknown".into())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |k: &str| {
        args.iter()
            .position(|a| a == k)
            .and_then(|i| args.get(i + 1).cloned())
    };
    let runs: usize = arg("--runs").map_or(7, |r| r.parse().expect("--runs N"));
    let only = arg("--only");
    println!("load average before: {}", load_average());
    let all = exec::default_threads();
    let threads: Vec<usize> = if all > 1 { vec![1, all] } else { vec![1] };
    let start = std::time::Instant::now();
    let machines: Vec<Machine> = threads
        .iter()
        .map(|&t| {
            let toml = calibrate(t)
                .unwrap_or_else(|d| panic!("{}", d.message))
                .expect("run alone, calibrate writes the file");
            Machine::from_toml(&toml).unwrap()
        })
        .collect();
    println!(
        "calibrated at {threads:?} thread(s) in {:.1} s",
        start.elapsed().as_secs_f64()
    );
    let default = Machine::default_local(1);
    println!(
        "{:<14} {:>3} {:>12} {:>12} {:>12} {:>9} {:>9}",
        "workload", "T", "measured ms", "default ms", "calib. ms", "default/m", "calib./m"
    );
    for (name, src) in workloads() {
        if only.as_deref().is_some_and(|o| !name.contains(o)) {
            continue;
        }
        let (m, facts) = load(&src);
        let times = measured(&m, &facts, &threads, runs);
        let guess = predicted(&m, &facts, &default);
        for ((t, meas), machine) in threads.iter().zip(&times).zip(&machines) {
            let calib = predicted(&m, &facts, machine);
            println!(
                "{name:<14} {t:>3} {:>12.3} {:>12.3} {:>12.3} {:>9.2} {:>9.2}",
                meas * 1e3,
                guess * 1e3,
                calib * 1e3,
                guess / meas,
                calib / meas
            );
        }
    }
    println!("load average after: {}", load_average());
}
