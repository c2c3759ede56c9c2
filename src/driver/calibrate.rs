//! `tapc calibrate [-o machine.toml]`: measures this machine with small TEG programs compiled
//! in-process by the native backend (the LLVM JIT) and writes the machine TOML the `cost` pass
//! reads (`--machine FILE`, `passes/cost/machine.rs`).
//!
//! Per kernel class (contraction: a matmul; elementwise: a degree-16 polynomial; reduction: a
//! row sum of squares), per dtype (f32, f64), at 1 thread and at all threads, the class's
//! throughput is the model's flops of the program over the median wall time of its runs
//! (the runtime's own measure: tasks, buffers and their page faults included). Memory
//! bandwidth is the footprint bytes of a large elementwise add (three 32 MiB vectors) over its
//! median time. The runtime's time per task besides its work is the median time of a chain of
//! 16 applies on 16 elements over 16. The all-thread figures (what one rank uses by default) are the model's; the
//! 1-thread ones are recorded in `[calibration]`, which the model ignores. Links between
//! nodes are not measured: the file leaves them at the model's defaults and says so.

use crate::codegen::{with_jit, Options};
use crate::diag::{codes, Diagnostic};
use crate::passes::cost::machine::{Class, Machine};
use crate::passes::cost::model::Problem;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};
use tapc_runtime::exec;
use tapc_runtime::{Data, Tensor};

/// Timed runs per measurement (after one warm-up run); the median is kept.
const RUNS: usize = 9;

/// What a probe measures.
#[derive(Clone, Copy, PartialEq)]
enum What {
    Class(Class),
    Bandwidth,
    /// A chain of [`CHAIN`] tiny applies: the runtime's time per task besides its work.
    Overhead,
}

/// Applies in the overhead probe.
const CHAIN: usize = 16;

/// One measured program: what it measures, its dtype, source and its inputs' shapes.
struct Probe {
    what: What,
    f64: bool,
    src: String,
    inputs: Vec<(&'static str, Vec<usize>)>,
}

/// The programs: one per (class, dtype), and the bandwidth probe (no class), f32.
fn probes() -> Vec<Probe> {
    let mut out = Vec::new();
    for f64 in [false, true] {
        let t = if f64 { "f64" } else { "f32" };
        out.push(Probe {
            what: What::Class(Class::Contraction),
            f64,
            src: format!(
                "op @mm(a: {t}[M, K], b: {t}[K, N]) -> (c: {t}[M, N]) {{\n  c[i, j] = sum[k](a[i, k] * b[k, j])\n}}\ngraph @g {{\n  %a = source @a : {t}[1024, 256]\n  %b = source @b : {t}[256, 512]\n  %c = apply @mm(%a, %b)\n  sink @c %c\n}}\n"
            ),
            inputs: vec![("a", vec![1024, 256]), ("b", vec![256, 512])],
        });
        let horner = (0..16).fold("x[..i]".to_string(), |acc, k| {
            format!("({acc} * x[..i] + 0.{k:02})")
        });
        out.push(Probe {
            what: What::Class(Class::Elementwise),
            f64,
            src: format!(
                "op @poly(x: {t}[..S]) -> (y: {t}[..S]) {{\n  y[..i] = {horner}\n}}\ngraph @g {{\n  %x = source @x : {t}[64, 32768]\n  %y = apply @poly(%x)\n  sink @y %y\n}}\n"
            ),
            inputs: vec![("x", vec![64, 32768])],
        });
        out.push(Probe {
            what: What::Class(Class::Reduction),
            f64,
            src: format!(
                "op @sumsq(x: {t}[M, K]) -> (s: {t}[M]) {{\n  s[i] = sum[k](x[i, k] * x[i, k])\n}}\ngraph @g {{\n  %x = source @x : {t}[256, 8192]\n  %s = apply @sumsq(%x)\n  sink @s %s\n}}\n"
            ),
            inputs: vec![("x", vec![256, 8192])],
        });
    }
    let chain: String = (1..=CHAIN)
        .map(|k| format!("  %y{k} = apply @neg(%y{})\n", k - 1))
        .collect();
    out.push(Probe {
        what: What::Overhead,
        f64: false,
        src: format!(
            "op @neg(x: f32[N]) -> (z: f32[N]) {{\n  z[i] = -x[i]\n}}\ngraph @g {{\n  %y0 = source @x : f32[16]\n{chain}  sink @y %y{CHAIN}\n}}\n"
        ),
        inputs: vec![("x", vec![16])],
    });
    out.push(Probe {
        what: What::Bandwidth,
        f64: false,
        src: "op @add(x: f32[N], y: f32[N]) -> (z: f32[N]) {\n  z[i] = x[i] + y[i]\n}\ngraph @g {\n  %x = source @x : f32[8388608]\n  %y = source @y : f32[8388608]\n  %z = apply @add(%x, %y)\n  sink @z %z\n}\n".into(),
        inputs: vec![("x", vec![8388608]), ("y", vec![8388608])],
    });
    out
}

/// A tensor of `shape` with values in [-1, 1).
fn tensor(shape: &[usize], f64: bool) -> Tensor {
    let n: usize = shape.iter().product();
    let v = (0..n).map(|i| ((i * 7919) % 2048) as f64 / 1024.0 - 1.0);
    let data = if f64 {
        Data::F64(v.collect())
    } else {
        Data::F32(v.map(|x| x as f32).collect())
    };
    Tensor {
        shape: shape.to_vec(),
        data,
    }
}

/// What one probe measured: the model's flops and footprint bytes of its apply, and the
/// median wall time of its runs at each thread count.
struct Measured {
    flops: f64,
    bytes: f64,
    seconds: Vec<f64>,
}

fn failed(what: &str, e: impl std::fmt::Display) -> Diagnostic {
    Diagnostic::error(codes::RUNTIME, format!("calibrate: {what}: {e}"))
}

/// Compiles `p` once and times it at each of `threads`.
fn measure(p: &Probe, threads: &[usize]) -> Result<Measured, Diagnostic> {
    let (m, facts, diags) = crate::compile_source(&p.src);
    if diags.has_errors() {
        return Err(failed("a probe program does not compile", &p.src));
    }
    let model = Problem::new(&m, 0, &facts[0], Machine::default_local(1), 1)
        .map_err(|e| failed("costing a probe", e))?;
    let (flops, bytes) = (model.applies[0].flops, model.applies[0].bytes);
    let inputs: HashMap<String, Tensor> = p
        .inputs
        .iter()
        .map(|(n, s)| (n.to_string(), tensor(s, p.f64)))
        .collect();
    let seconds = with_jit(&m, 0, &facts[0], &Options::default(), |prog| {
        threads
            .iter()
            .map(|&threads| {
                let opts = exec::Options {
                    threads,
                    record: false,
                };
                let mut walls: Vec<Duration> = Vec::with_capacity(RUNS);
                for run in 0..=RUNS {
                    let (_, report) = prog.run(&inputs, &opts)?;
                    if run > 0 {
                        walls.push(report.wall);
                    }
                }
                walls.sort();
                Ok(walls[RUNS / 2].as_secs_f64().max(1e-9))
            })
            .collect::<Result<Vec<f64>, String>>()
    })?
    .map_err(|e| failed("running a probe", e))?;
    Ok(Measured {
        flops,
        bytes,
        seconds,
    })
}

/// Measures the machine at 1 and `threads` threads; returns the machine TOML.
pub fn calibrate(threads: usize) -> Result<String, Diagnostic> {
    let start = Instant::now();
    let counts = if threads > 1 {
        vec![1, threads]
    } else {
        vec![1]
    };
    let all = counts.len() - 1;
    let mut rates = String::new();
    let mut single = String::new();
    let mut contraction_f32 = 0.0;
    let (mut bandwidth, mut overhead) = ((0.0, 0.0), (0.0, 0.0));
    for p in probes() {
        let m = measure(&p, &counts)?;
        match p.what {
            What::Class(c) => {
                let (rate, rate1) = (m.flops / m.seconds[all], m.flops / m.seconds[0]);
                let _ = writeln!(rates, "{} = {rate:.4e}", c.key(p.f64));
                let _ = writeln!(single, "{}_1thread = {rate1:.4e}", c.key(p.f64));
                if c == Class::Contraction && !p.f64 {
                    contraction_f32 = rate;
                }
            }
            What::Bandwidth => bandwidth = (m.bytes / m.seconds[all], m.bytes / m.seconds[0]),
            What::Overhead => {
                let per = |s: f64| s / CHAIN as f64;
                overhead = (per(m.seconds[all]), per(m.seconds[0]));
            }
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Measured by `tapc calibrate` in {secs:.1} s at {threads} thread(s) per node (the\n\
         # runtime's default): per-class throughputs (flop/s) and memory bandwidth (bytes/s).\n\
         # Links between nodes were not measured: `bandwidth` and `latency` are the cost\n\
         # model's defaults; set them (or [[link]] tables) for a real cluster. No `nodes`:\n\
         # `cost{{nodes=N}}` takes this file as N such nodes.\n\
         flops = {contraction_f32:.4e}\n\
         mem_bandwidth = {:.4e}\n\
         task_overhead = {:.4e}\n\n\
         [throughput]\n{rates}\n\
         # 1-thread figures, for the record (the model reads only the tables above).\n\
         [calibration]\n\
         threads = {threads}\n\
         seconds = {secs:.2}\n\
         mem_bandwidth_1thread = {:.4e}\n\
         task_overhead_1thread = {:.4e}\n{single}",
        bandwidth.0, overhead.0, bandwidth.1, overhead.1
    );
    // What we write must be what the cost pass reads.
    Machine::from_toml(&s).map_err(|e| failed("the measured machine does not parse", e))?;
    Ok(s)
}
