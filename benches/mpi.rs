//! Strong scaling under `mpirun` (issues 10 and 17): the batch-sharded MLP
//! 4096×1024 → 4096 → 1024 (bias + ReLU) and the GPT-2-sized transformer block of
//! examples/transformer.teg at 2048 tokens, each at 1 rank × 1 thread, 1 rank × 2 threads, and
//! 2 ranks × 1 thread over shared memory and over TCP, with the inputs read by rank 0 and sent
//! (`--inputs-on-root`) and read by every rank itself (its own windows of the shared files,
//! the runtime's default). Prints per set-up the cost model's predicted time for the plan
//! against the median measured time (the slowest rank's executor wall time: compute,
//! transfers and waiting, not process start-up or file reads), the bytes moved (predicted and
//! measured), and the time ranks waited on receives; then checks issue 17's bar: 2 ranks ×
//! 1 thread ≥ 1.8× faster than 1 rank × 1 thread.
//!
//! The model's machine is its default node (one core, 5e10 flop/s, 20 GB/s of memory; links
//! 12.5 GB/s, 5 µs), with twice the flop/s for 1 rank × 2 threads; and, in the `calib. ms`
//! column, this machine as `tapc calibrate` measures it at the set-up's threads per rank: for 1
//! rank in-process (no links), for 2 ranks `mpirun -np 2 tapc calibrate` of the tapc built with
//! `--features mpi` over the set-up's transport, which measures the link too (issue 17: its
//! latency and bandwidth by ping-pong). The model is told where the inputs start
//! (`sources=root` with `--inputs-on-root`, else `sources=shared`) and that every rank writes
//! its own rows of the sinks (the runtime's default, `sinks=distributed`).
//!
//! `cargo bench --bench mpi [-- --runs N] [--only SUBSTRING]` (matched against
//! `WORKLOAD: SET-UP`, e.g. `--only tcp` or `--only transformer`; `--memory` prints the memory
//! scaling of [`memory`] instead, `--cluster` the model's predictions for a cluster
//! ([`cluster`]), `--frontier` the measured times of the first five plans of the MLP's
//! frontier ([`frontier`]); set `TAPC_MPI_PROGRESS_US=0` for runs without the progress
//! thread).

#[path = "mpi/cluster.rs"]
mod cluster;
#[path = "mpi/frontier.rs"]
mod frontier;
#[path = "mpi/memory.rs"]
mod memory;
#[path = "../tests/common/mpi.rs"]
mod mpi;
#[path = "../tests/common/rng.rs"]
mod rng;
#[path = "../tests/common/syspkg.rs"]
mod syspkg;

use mpi::{mpi_runtime, mpi_tapc, mpirun, Btl};
use rng::Rng;
use std::path::{Path, PathBuf};
use std::process::Command;
use tapc::driver::calibrate::calibrate;
use tapc::passes::cost::machine::LOCAL_FLOPS;
use tapc_runtime::{Data, Tensor};

/// The MLP's passes: fused, its batch split over 2 nodes.
const MLP_PASSES: &str = "canonicalize,fuse,shard{parts=2,dim=i},canonicalize";

/// A program of the strong-scaling table: its source, its f32 inputs and the passes that
/// shard it over 2 nodes (1 rank runs both nodes).
struct Workload {
    name: &'static str,
    teg: String,
    inputs: Vec<(&'static str, Vec<usize>)>,
    passes: String,
}

/// The batch-sharded MLP 4096×1024 → 4096 → 1024.
fn mlp_workload() -> Workload {
    Workload {
        name: "MLP",
        teg: mpi::mlp(4096, 1024, 4096, 1024),
        inputs: vec![
            ("x", vec![4096, 1024]),
            ("w1", vec![1024, 4096]),
            ("b1", vec![4096]),
            ("w2", vec![4096, 1024]),
            ("b2", vec![1024]),
        ],
        passes: MLP_PASSES.into(),
    }
}

/// examples/transformer.teg at 2048 tokens (as `benches/native.rs` runs it), with its weights
/// as sources instead of `rand` (read from files, as a model's weights are; the example
/// generates them so that it needs no inputs), its tokens split over 2 nodes.
fn transformer_workload() -> Workload {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let teg = std::fs::read_to_string(root.join("examples/transformer.teg")).unwrap();
    let (teg, mut inputs) = weights_as_sources(&teg.replace("f32[8, 768]", "f32[2048, 768]"));
    inputs.insert(0, ("x", vec![2048, 768]));
    Workload {
        name: "transformer",
        teg,
        inputs,
        passes: TRANSFORMER_PASSES.into(),
    }
}

/// `teg` with every `%w = apply @uniform<...>(%r)` of a `%r = rand seed N : f32[SHAPE]` made
/// `%w = source @w : f32[SHAPE]`; returns it and the new sources' names and shapes.
fn weights_as_sources(teg: &str) -> (String, Vec<(&'static str, Vec<usize>)>) {
    let mut types: Vec<(&str, &str)> = Vec::new();
    let (mut out, mut inputs) = (String::new(), Vec::new());
    for line in teg.lines() {
        let t = line.trim_start();
        if let Some((r, ty)) = t.split_once(" = rand seed ") {
            types.push((r, ty.split_once(" : ").unwrap().1));
            continue;
        }
        let uniform = t.split_once(" = apply @uniform<").and_then(|(w, rest)| {
            let r = rest.split_once(">(")?.1.trim_end_matches(')');
            let ty = types.iter().find(|(n, _)| *n == r)?.1;
            Some((w.trim_start_matches('%'), ty))
        });
        match uniform {
            Some((w, ty)) => {
                out.push_str(&format!("  %{w} = source @{w} : {ty}\n"));
                let dims = ty.trim_start_matches("f32[").trim_end_matches(']');
                let shape = dims.split(", ").map(|d| d.parse().unwrap()).collect();
                inputs.push((&*String::leak(w.to_string()), shape));
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    (out, inputs)
}

/// The transformer's passes for 2 nodes: every apply split along the variable that lines up
/// with its input's split (`dim=auto`: the tokens, and the heads in attention; 12,582,912 B of
/// `%qkv` move), then fused. Fusing first makes the causal scores one op with their
/// transposes that `shard` cannot split: 192 MiB of scores on node 0, 113 MB moved.
const TRANSFORMER_PASSES: &str = "canonicalize,shard{parts=2,dim=auto},fuse,canonicalize";

fn tapc(args: &[&str]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(args)
        .env("TAPC_MPI_RUNTIME_LIB", mpi_runtime())
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "tapc {args:?}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn write_input(dir: &Path, name: &str, shape: &[usize], seed: u64) {
    let n: usize = shape.iter().product();
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let data = (0..n).map(|_| (rng.unit_f32() - 0.5) * 0.1).collect();
    let t = Tensor::new(shape.to_vec(), Data::F32(data)).unwrap();
    tapc_runtime::npy::write(&dir.join(format!("{name}.npy")), &t).unwrap();
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// A number after `key` in `line`.
fn after(line: &str, key: &str) -> Option<f64> {
    let at = line.find(key)? + key.len();
    line[at..]
        .split_whitespace()
        .next()?
        .trim_end_matches(',')
        .parse()
        .ok()
}

/// Writes `w`'s source and inputs into `dir` and compiles it for MPI with `passes` into
/// `dir/prog`; returns the source path.
fn prepare(dir: &Path, w: &Workload, passes: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let teg = dir.join("prog.teg");
    std::fs::write(&teg, &w.teg).unwrap();
    for (k, (n, shape)) in w.inputs.iter().enumerate() {
        write_input(dir, n, shape, k as u64 + 1);
    }
    compile(dir, &teg, passes);
    teg
}

/// Compiles `teg` for MPI with `passes` into `dir/prog`.
fn compile(dir: &Path, teg: &Path, passes: &str) {
    let prog = dir.join("prog");
    let (teg, prog) = (teg.to_str().unwrap(), prog.to_str().unwrap());
    tapc(&[teg, "-o", prog, "--mpi", "--passes", passes]);
}

/// The model's time and bytes moved for the plan `passes` make (the cost pass's `unsharded:`
/// line: the plan as placed), on `nodes` nodes described by the machine file `toml` (named
/// `tag`), the sources starting as `sources` says (`root` or `shared`).
fn predict(
    dir: &Path,
    teg: &str,
    passes: &str,
    nodes: u32,
    toml: &str,
    sources: &str,
) -> (f64, f64) {
    let machine = dir.join(format!("machine-{}.toml", fnv(toml)));
    std::fs::write(&machine, toml).unwrap();
    let passes = format!(
        "{passes},cost{{nodes={nodes},evals=1,sources={sources},sinks=distributed,machine={}}}",
        machine.display()
    );
    let report = tapc(&["opt", teg, "--passes", &passes, "--emit", "cost"]);
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with("unsharded:"))
        .expect("the cost report");
    (
        after(line, "time ").expect("a predicted time"),
        after(line, "bytes moved ").expect("predicted bytes"),
    )
}

/// A short hash of `s` (to name a machine file by its text).
fn fnv(s: &str) -> u64 {
    (s.bytes()).fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// This machine as `mpirun -np 2 tapc calibrate --threads 1` over `btl` measures it, links
/// included (the machine TOML).
fn calibrate_with_links(dir: &Path, btl: Btl, tag: &str) -> String {
    let file = dir.join(format!("calibrated-links-{tag}.toml"));
    let args: Vec<String> = ["calibrate", "-o", file.to_str().unwrap(), "--threads", "1"]
        .map(String::from)
        .to_vec();
    let o = mpirun(2, btl, mpi_tapc(), &args);
    assert!(
        o.status.success(),
        "calibrate over {tag}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    std::fs::read_to_string(&file).unwrap()
}

/// One way of running a workload.
struct Setup {
    name: &'static str,
    np: usize,
    threads: usize,
    btl: Btl,
    /// `--inputs-on-root`: rank 0 reads every input and sends the windows.
    on_root: bool,
}

const SETUPS: [Setup; 6] = [
    Setup {
        name: "1 rank × 1 thread",
        np: 1,
        threads: 1,
        btl: Btl::SharedMemory,
        on_root: false,
    },
    Setup {
        name: "1 rank × 2 threads",
        np: 1,
        threads: 2,
        btl: Btl::SharedMemory,
        on_root: false,
    },
    Setup {
        name: "2 × 1, shm, inputs on root",
        np: 2,
        threads: 1,
        btl: Btl::SharedMemory,
        on_root: true,
    },
    Setup {
        name: "2 × 1, tcp, inputs on root",
        np: 2,
        threads: 1,
        btl: Btl::Tcp,
        on_root: true,
    },
    Setup {
        name: "2 × 1, shm, own inputs",
        np: 2,
        threads: 1,
        btl: Btl::SharedMemory,
        on_root: false,
    },
    Setup {
        name: "2 × 1, tcp, own inputs",
        np: 2,
        threads: 1,
        btl: Btl::Tcp,
        on_root: false,
    },
];

/// What one `mpirun` measured: the slowest rank's wall time (ms), the ranks' summed wait
/// (ms), the bytes moved.
type Measured = (f64, f64, f64);

/// One `mpirun` of `dir/prog` in set-up `s`.
fn run_once(dir: &Path, s: &Setup) -> Measured {
    let mut a: Vec<String> = [
        "--input-dir",
        dir.to_str().unwrap(),
        "--out-dir",
        dir.join("out").to_str().unwrap(),
        "--threads",
        &s.threads.to_string(),
        "--time",
    ]
    .map(String::from)
    .to_vec();
    if s.on_root {
        a.push("--inputs-on-root".into());
    }
    let o = mpirun(s.np, s.btl, &dir.join("prog"), &a);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{}: {err}", s.name);
    let wall = err
        .lines()
        .filter_map(|l| after(l, "wall "))
        .fold(0.0, f64::max);
    let wait: f64 = err.lines().filter_map(|l| after(l, "waited ")).sum();
    let moved = err
        .lines()
        .find_map(|l| after(l, "bytes moved: "))
        .unwrap_or(0.0);
    (wall, wait, moved)
}

/// `runs` runs of set-up `s`: the median wall time, the median wait, the bytes moved.
fn measure(dir: &Path, s: &Setup, runs: usize) -> Measured {
    let (mut wall, mut wait, mut moved) = (Vec::new(), Vec::new(), 0.0);
    for _ in 0..runs {
        let (w, q, m) = run_once(dir, s);
        wall.push(w);
        wait.push(q);
        moved = m;
    }
    (median(wall), median(wait), moved)
}

/// The machines `tapc calibrate` measures: in-process at 1 and 2 threads, and under
/// `mpirun -np 2` over shared memory and over TCP (links included).
struct Machines {
    threads: Vec<String>,
    shm: String,
    tcp: String,
}

impl Machines {
    fn measure(dir: &Path) -> Machines {
        let m = Machines {
            threads: [1, 2]
                .iter()
                .map(|&t| calibrate(t).unwrap_or_else(|d| panic!("{}", d.message)))
                .map(|t| t.expect("run alone, calibrate writes the file"))
                .collect(),
            shm: calibrate_with_links(dir, Btl::SharedMemory, "shm"),
            tcp: calibrate_with_links(dir, Btl::Tcp, "tcp"),
        };
        for (tag, toml) in [("shm", &m.shm), ("tcp", &m.tcp)] {
            let line = |k: &str| {
                toml.lines()
                    .find(|l| l.starts_with(k))
                    .unwrap_or("?")
                    .to_string()
            };
            println!(
                "measured links ({tag}): {}, {}",
                line("latency"),
                line("bandwidth")
            );
        }
        m
    }

    /// The calibrated machine of set-up `s`.
    fn of(&self, s: &Setup) -> &str {
        match (s.np, s.btl) {
            (1, _) => &self.threads[s.threads - 1],
            (_, Btl::SharedMemory) => &self.shm,
            (_, Btl::Tcp) => &self.tcp,
        }
    }
}

/// Every set-up of workload `w` (those `only` matches): its row of the table, then the
/// speed-ups of 2 ranks.
fn scale(dir: &Path, w: &Workload, machines: &Machines, runs: usize, only: Option<&str>) {
    let dir = dir.join(w.name);
    let teg = prepare(&dir, w, &w.passes);
    let teg = teg.to_str().unwrap();
    println!("{} ({}); medians of {runs}", w.name, w.passes);
    println!(
        "{:<30} {:>12} {:>10} {:>10} {:>16} {:>16} {:>10}",
        "set-up",
        "predicted ms",
        "calib. ms",
        "time ms",
        "predicted bytes",
        "measured bytes",
        "wait ms"
    );
    let mut times = vec![None; SETUPS.len()];
    for (k, s) in SETUPS.iter().enumerate() {
        if only.is_some_and(|o| !format!("{}: {}", w.name, s.name).contains(o)) {
            continue;
        }
        let sources = if s.on_root { "root" } else { "shared" };
        let flops = s.threads as f64 * LOCAL_FLOPS;
        let default = format!("nodes = {}\nflops = {flops:e}\n", s.np);
        let (pred, pred_bytes) = predict(&dir, teg, &w.passes, s.np as u32, &default, sources);
        let (calib, _) = predict(&dir, teg, &w.passes, s.np as u32, machines.of(s), sources);
        let (t, wait, moved) = measure(&dir, s, runs);
        println!(
            "{:<30} {:>12.1} {:>10.1} {t:>10.1} {pred_bytes:>16} {moved:>16} {wait:>10.1}",
            s.name,
            pred * 1e3,
            calib * 1e3,
        );
        times[k] = Some(t);
    }
    for (k, s) in SETUPS.iter().enumerate().skip(2) {
        let (Some(one), Some(two)) = (times[0], times[k]) else {
            continue;
        };
        let speedup = one / two;
        let met = if speedup >= 1.8 { "met" } else { "NOT met" };
        println!(
            "{}: {} vs 1 rank × 1 thread: {speedup:.2}× (bar 1.8×: {met})",
            w.name, s.name
        );
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .map(|i| args[i + 1].clone())
    };
    let runs: usize = flag("--runs").map_or(5, |r| r.parse().expect("--runs N"));
    let only = flag("--only");
    let dir = std::env::temp_dir().join(format!("tapc-mpi-bench-{}", std::process::id()));
    if args.iter().any(|a| a == "--memory") {
        memory::main(&dir);
        return;
    }
    if args.iter().any(|a| a == "--cluster") {
        cluster::main(&dir);
        return;
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at the start: {}",
        load.split_whitespace().next().unwrap_or("?")
    );
    std::fs::create_dir_all(&dir).unwrap();
    let machines = Machines::measure(&dir);
    if args.iter().any(|a| a == "--frontier") {
        frontier::main(&dir, &mlp_workload(), &machines, runs);
    } else {
        for w in [mlp_workload(), transformer_workload()] {
            scale(&dir, &w, &machines, runs, only.as_deref());
        }
    }
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average at the end: {}", load.trim());
    let _ = std::fs::remove_dir_all(&dir);
}
