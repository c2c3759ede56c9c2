//! Benchmark: compile time and peak memory against graph size (issue 11's compile-time rows).
//!
//! Generates four graph shapes at 1k, 10k and 100k nodes and times the built `tapc` binary on
//! each, one process per measurement (so peak RSS is that compile's alone):
//! - `chain`: a chain of elementwise applies of one op;
//! - `views`: a chain of alternating `transpose` and `slice` views;
//! - `fanout`: one source read by that many slices, each applied and sunk;
//! - `concat`: that many applies of slices concatenated into one sink.
//!
//! `opt` is `tapc opt FILE --passes=canonicalize,fuse`, `-o` is `tapc FILE -o OUT` (the default
//! pipeline, LLVM, linking). Run with `cargo bench --profile dev --bench compile [-- --only
//! chain,views --sizes 1k,10k --runs 3 --modes opt,exe]`; by default every shape and size, one
//! run each (the 100k rows take minutes). `--profile dev` times the test-profile binary (what
//! docs/benchmarks.md shows); plain `cargo bench` builds and times a release binary. Each row
//! also gives CPU µs per unit (apply, view or operand), which stays flat when a step is linear.
//! The bars: a 10k chain with `-o` in under 5 s, linear time, under 1 GB at 100k.
//!
//! `-- --grad [--runs N]` times instead what `grad` costs (issue 19): examples/transformer.teg's
//! block as it is and with a loss (the mean square of its output) differentiated with respect
//! to all twelve weights and biases, each with `tapc opt --passes=grad` (the lowering alone)
//! and `tapc FILE -o OUT`.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

const SHAPES: [&str; 4] = ["chain", "views", "fanout", "concat"];

/// The TEG text of `shape` with `n` applies, views or operands.
fn generate(shape: &str, n: usize) -> String {
    let mut s = String::from(
        "op @f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * 1.5 + 0.25\n}\n\ngraph @g {\n",
    );
    let mut line = |l: String| {
        s.push_str("  ");
        s.push_str(&l);
        s.push('\n');
    };
    match shape {
        "chain" => {
            line("%x0 = source @x : f32[1024]".into());
            for i in 0..n {
                line(format!("%x{} = apply @f(%x{i})", i + 1));
            }
            line(format!("sink @y %x{n}"));
        }
        "views" => {
            line("%x0 = source @x : f32[64, 64]".into());
            for i in 0..n {
                line(if i % 2 == 0 {
                    format!("%x{} = transpose %x{i} [1, 0]", i + 1)
                } else {
                    format!("%x{} = slice %x{i} [0:64, 0:64]", i + 1)
                });
            }
            line(format!("sink @y %x{n}"));
        }
        "fanout" | "concat" => {
            // `n` applies of overlapping `width`-element slices of one source.
            let width = if shape == "fanout" { 64 } else { 16 };
            line(format!("%x = source @x : f32[{}]", n + width));
            for i in 0..n {
                line(format!("%s{i} = slice %x [{i}:{}]", i + width));
                line(format!("%y{i} = apply @f(%s{i})"));
                if shape == "fanout" {
                    line(format!("sink @y{i} %y{i}"));
                }
            }
            if shape == "concat" {
                let parts: Vec<String> = (0..n).map(|i| format!("%y{i}")).collect();
                line(format!("%c = concat {} axis 0", parts.join(", ")));
                line("sink @c %c".into());
            }
        }
        _ => unreachable!("shapes are checked in main"),
    }
    s.push_str("}\n");
    s
}

/// Runs `tapc args`, returning wall seconds, CPU seconds (user + system: what a loaded machine
/// distorts least) and the child's peak RSS in bytes.
#[allow(clippy::zombie_processes)] // reaped by wait4, which std's wait cannot replace (rusage)
fn measure(args: &[&str]) -> (f64, f64, u64) {
    let t0 = Instant::now();
    let child = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("tapc starts");
    let pid = child.id() as libc::pid_t;
    let mut status = 0;
    // SAFETY: a zeroed rusage is a valid out-parameter; wait4 reaps exactly our child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let secs = t0.elapsed().as_secs_f64();
    assert_eq!(r, pid, "wait4 reaps tapc");
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "tapc {} failed (status {status})",
        args.join(" ")
    );
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    let cpu = tv(usage.ru_utime) + tv(usage.ru_stime);
    (secs, cpu, usage.ru_maxrss as u64 * 1024)
}

/// The weights and biases of examples/transformer.teg's block, in its graph's names.
const BLOCK_WEIGHTS: [&str; 12] = [
    "w_qkv", "b_qkv", "w_o", "b_o", "w_fc", "b_fc", "w_proj", "b_proj", "g1", "b1", "g2", "b2",
];

/// examples/transformer.teg with `loss = mean(y²)` and its gradient with respect to every
/// weight and bias, each a sink.
fn block_with_grad() -> String {
    let src = include_str!("../examples/transformer.teg");
    let loss_op = "op @sq_mean(y: f32[T, D]) -> (l: f32[]) {\n  l[] = sum[t, d](y[t, d] * y[t, d]) / f32(T * D)\n}\n\ngraph @block {";
    let wrt: Vec<String> = BLOCK_WEIGHTS.iter().map(|w| format!("%{w}")).collect();
    let ds: Vec<String> = BLOCK_WEIGHTS.iter().map(|w| format!("%d{w}")).collect();
    let mut tail = format!(
        "  %loss = apply @sq_mean(%y)\n  {} = grad %loss wrt {}\n  sink @loss %loss\n",
        ds.join(", "),
        wrt.join(", ")
    );
    for w in BLOCK_WEIGHTS {
        tail.push_str(&format!("  sink @d{w} %d{w}\n"));
    }
    tail.push('}');
    src.replace("graph @block {", loss_op)
        .replace("  sink @y %y\n}", &tail)
}

/// The `--grad` rows: the block without and with `grad`, `opt --passes=grad` and `-o`.
fn grad_rows(runs: usize, dir: &Path) {
    println!(
        "{:<12} {:>16} {:>8} {:>16} {:>8}",
        "graph", "grad wall/CPU", "RSS", "-o wall/CPU", "-o RSS"
    );
    let out = dir.join("out");
    let out = out.to_str().expect("utf-8 temp path");
    let block = include_str!("../examples/transformer.teg").to_string();
    for (name, text) in [("block", block), ("block+grad", block_with_grad())] {
        let file = dir.join(format!("{name}.teg"));
        std::fs::write(&file, text).expect("write the graph");
        let f = file.to_str().expect("utf-8 temp path");
        let cell = |argv: &[&str]| {
            let ms: Vec<_> = (0..runs).map(|_| measure(argv)).collect();
            let t = median(ms.iter().map(|m| m.0).collect());
            let c = median(ms.iter().map(|m| m.1).collect());
            let rss = ms.iter().map(|m| m.2).max().unwrap_or(0);
            (format!("{t:.3}/{c:.3} s"), format!("{} MB", rss >> 20))
        };
        let (gt, gm) = cell(&["opt", f, "--passes=grad"]);
        let (et, em) = cell(&[f, "-o", out]);
        println!("{name:<12} {gt:>16} {gm:>8} {et:>16} {em:>8}");
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn size_arg(s: &str) -> usize {
    let (num, mult) = match s.strip_suffix('k') {
        Some(n) => (n, 1000),
        None => (s, 1),
    };
    num.parse::<usize>()
        .expect("sizes are numbers, optionally with k")
        * mult
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
    };
    let list = |name: &str, default: &str| -> Vec<String> {
        flag(name)
            .map_or(default, |s| s.as_str())
            .split(',')
            .map(str::to_string)
            .collect()
    };
    let shapes = list("--only", &SHAPES.join(","));
    if let Some(bad) = shapes.iter().find(|s| !SHAPES.contains(&s.as_str())) {
        panic!("unknown shape `{bad}` (shapes: {})", SHAPES.join(", "));
    }
    let sizes: Vec<usize> = list("--sizes", "1k,10k,100k")
        .iter()
        .map(|s| size_arg(s))
        .collect();
    let modes = list("--modes", "opt,exe");
    let runs: usize = flag("--runs").map_or(1, |r| r.parse().expect("--runs N"));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "compile time, medians of {runs} (load average {})",
        load.split_whitespace().next().unwrap_or("?")
    );
    let dir = std::env::temp_dir().join(format!("tapc-bench-compile-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    if args.iter().any(|a| a == "--grad") {
        grad_rows(runs, &dir);
        let _ = std::fs::remove_dir_all(&dir);
        return;
    }
    println!(
        "{:<8} {:>8} {:>16} {:>9} {:>8} {:>16} {:>9} {:>8}",
        "shape", "size", "opt wall/CPU", "CPU/unit", "opt RSS", "-o wall/CPU", "CPU/unit", "-o RSS"
    );
    for shape in &shapes {
        for &n in &sizes {
            let file = dir.join(format!("{shape}-{n}.teg"));
            std::fs::write(&file, generate(shape, n)).expect("write the graph");
            let f = file.to_str().expect("utf-8 temp path");
            let out = dir.join("out");
            let out = out.to_str().expect("utf-8 temp path");
            let run = |argv: &[&str]| -> (f64, f64, u64) {
                let (mut times, mut cpus) = (Vec::new(), Vec::new());
                let mut rss = 0;
                for _ in 0..runs {
                    let (t, c, m) = measure(argv);
                    times.push(t);
                    cpus.push(c);
                    rss = rss.max(m);
                }
                (median(times), median(cpus), rss)
            };
            // Wall and CPU seconds, CPU µs per apply/view/operand (flat when linear), RSS.
            let cell = |mode: &str, argv: &[&str]| -> (String, String, String) {
                if !modes.iter().any(|m| m == mode) {
                    return ("-".into(), "-".into(), "-".into());
                }
                let (t, c, m) = run(argv);
                let per = c * 1e6 / n as f64;
                (
                    format!("{t:.2}/{c:.2} s"),
                    format!("{per:.1} µs"),
                    format!("{} MB", m >> 20),
                )
            };
            let (ot, ou, om) = cell("opt", &["opt", f, "--passes=canonicalize,fuse"]);
            let (et, eu, em) = cell("exe", &[f, "-o", out]);
            println!("{shape:<8} {n:>8} {ot:>16} {ou:>9} {om:>8} {et:>16} {eu:>9} {em:>8}");
            let _ = std::fs::remove_file(&file);
        }
    }
    let _ = std::fs::remove_dir_all(Path::new(&dir));
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "load average at the end: {}",
        load.split_whitespace().next().unwrap_or("?")
    );
}
