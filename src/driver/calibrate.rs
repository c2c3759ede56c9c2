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
//! 1-thread ones are recorded in `[calibration]`, which the model ignores.
//!
//! Links: a tapc built with `--features mpi` and started under `mpirun -np N` (N ≥ 2) first
//! measures the links between the ranks (`tapc_runtime::mpi::links`: ping-pong from rank 0
//! to each other rank over 8 B to 16 MiB, and `MPI_Allreduce`) and writes the median link's
//! latency α and bandwidth 1/β as the file's `latency` and `bandwidth` (what the model's
//! α–β transfers, broadcasts and allreduces use), with every size's times in
//! `[calibration]`; then every rank runs the kernel probes at once (as the ranks of a job
//! compute at once: on one host they share its memory bandwidth and caches, so a rank's
//! kernels run slower than one process's alone), rank 0 writes the file from its own
//! measurements and the other ranks write nothing. Started alone, it leaves the links at the model's defaults and says
//! how to measure them; a tapc built without MPI refuses to run as one of several processes.

use crate::codegen::{with_jit, Options};
use crate::diag::{codes, Diagnostic};
use crate::passes::cost::machine::{Class, Machine};
use crate::passes::cost::model::Problem;
use std::collections::HashMap;
use std::fmt::Write;
use std::time::{Duration, Instant};
use tapc_runtime::exec;
use tapc_runtime::mpi::links::Links;
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

/// The links part of the file: measured under `mpirun`, or the defaults.
enum LinkPart {
    // Only an MPI build measures links.
    #[cfg_attr(not(feature = "mpi"), allow(dead_code))]
    Measured(Links),
    Defaults,
}

/// The links: measured when this process is one of several of an MPI job (`Ok(None)` on the
/// ranks other than 0, which write nothing), else the defaults.
fn links() -> Result<Option<LinkPart>, Diagnostic> {
    let Some(n) = tapc_runtime::entry::mpi_job_size().filter(|&n| n > 1) else {
        return Ok(Some(LinkPart::Defaults));
    };
    #[cfg(feature = "mpi")]
    {
        let _ = n;
        let measured =
            tapc_runtime::mpi::links::measure().map_err(|e| failed("measuring the links", e))?;
        Ok(measured.map(LinkPart::Measured))
    }
    #[cfg(not(feature = "mpi"))]
    Err(failed(
        "this tapc was built without MPI",
        format!("it was started as one of the {n} processes of an MPI job, where every copy would write the same file; build tapc with `cargo build --features mpi` to measure the links between ranks, or run `tapc calibrate` alone"),
    ))
}

/// The top-level `bandwidth`/`latency` lines with their comment, and the `[calibration]`
/// lines of the links.
fn link_lines(part: &LinkPart) -> (String, String) {
    let LinkPart::Measured(l) = part else {
        return (
            "# Links between nodes were not measured (run `mpirun -np 2 tapc calibrate` with a\n\
             # tapc built with `--features mpi` to measure them): `bandwidth` and `latency` are the\n\
             # cost model's defaults; set them (or [[link]] tables) for a real cluster.\n"
                .to_string(),
            String::new(),
        );
    };
    let (alpha, bw) = (l.latency(), l.bandwidth());
    let top = format!(
        "# Links measured under `mpirun` with {} ranks: ping-pong from rank 0 to every other\n\
         # rank (8 B to 16 MiB, median one-way time per size) and MPI_Allreduce. `latency` (α) is\n\
         # an 8-byte message's one-way time, `bandwidth` (1/β) the median of bytes / (time - α)\n\
         # over messages of 1 MiB and more; the median link. Ranks on one host measure the MPI\n\
         # library's shared-memory transport, not a network.\n\
         bandwidth = {bw:.4e}\nlatency = {alpha:.4e}\n",
        l.ranks
    );
    let list = |v: &mut dyn Iterator<Item = String>| v.collect::<Vec<_>>().join(", ");
    let ranks: Vec<usize> = (0..l.ranks as usize).collect();
    let ring = Machine::uniform(ranks.len(), 1.0, 1.0, bw, alpha);
    let mut s = format!("link_ranks = {}\n", l.ranks);
    // A row: an integer (a rank or a size) and up to two numbers.
    type Row = (usize, f64, f64);
    let peers: Vec<Row> = (l.links.iter()).map(|x| (x.0 as usize, x.1, x.2)).collect();
    let ping: Vec<Row> = l.pingpong.iter().map(|x| (x.0, x.1, 0.0)).collect();
    let all: Vec<Row> = l.allreduce.iter().map(|x| (x.0, x.1, 0.0)).collect();
    // (key, rows, column: 0 the integer, 1 and 2 the numbers)
    let columns: [(&str, &[Row], usize); 7] = [
        ("link_peers", &peers, 0),
        ("link_latency", &peers, 1),
        ("link_bandwidth", &peers, 2),
        ("pingpong_bytes", &ping, 0),
        ("pingpong_seconds", &ping, 1),
        ("allreduce_bytes", &all, 0),
        ("allreduce_seconds", &all, 1),
    ];
    for (key, rows, col) in columns {
        let cell = |x: &Row| match col {
            0 => x.0.to_string(),
            1 => format!("{:.4e}", x.1),
            _ => format!("{:.4e}", x.2),
        };
        let _ = writeln!(s, "{key} = [{}]", list(&mut rows.iter().map(cell)));
    }
    let _ = writeln!(
        s,
        "# The model's ring allreduce with these links, for comparison.\nallreduce_model_seconds = [{}]",
        list(&mut l.allreduce.iter().map(|x| format!("{:.4e}", ring.allreduce(&ranks, x.0 as f64))))
    );
    (top, s)
}

/// Measures the machine at 1 and `threads` threads; returns the machine TOML (`None`: this is
/// a rank other than 0 of an MPI job, which only helped measure the links).
pub fn calibrate(threads: usize) -> Result<Option<String>, Diagnostic> {
    let start = Instant::now();
    let counts = if threads > 1 {
        vec![1, threads]
    } else {
        vec![1]
    };
    let Some(links) = links()? else {
        // Another rank of the job: the same probes as rank 0's, at the same time (both leave
        // the links' last collective together), so that rank 0 measures a node of a job.
        for p in probes() {
            measure(&p, &counts)?;
        }
        return Ok(None);
    };
    let (link_top, link_record) = link_lines(&links);
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
         # No `nodes`: `cost{{nodes=N}}` takes this file as N such nodes.\n\
         {link_top}\
         flops = {contraction_f32:.4e}\n\
         mem_bandwidth = {:.4e}\n\
         task_overhead = {:.4e}\n\n\
         [throughput]\n{rates}\n\
         # 1-thread figures, for the record (the model reads only the tables above).\n\
         [calibration]\n\
         threads = {threads}\n\
         seconds = {secs:.2}\n\
         mem_bandwidth_1thread = {:.4e}\n\
         task_overhead_1thread = {:.4e}\n{single}{link_record}",
        bandwidth.0, overhead.0, bandwidth.1, overhead.1
    );
    // What we write must be what the cost pass reads.
    Machine::from_toml(&s).map_err(|e| failed("the measured machine does not parse", e))?;
    Ok(Some(s))
}
