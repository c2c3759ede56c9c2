//! Memory scaling under `mpirun` (issue 17's benchmark): a heat stencil sharded by rows and a
//! matmul sharded as a grid, at 1, 2 and 4 ranks (1 thread each; 4 ranks oversubscribe this
//! machine's 2 cores, so only memory is measured, not speed). For each rank it prints the peak
//! the rank plans before reading any input and the peak its allocator counted while running,
//! against the bound of the issue: the single-process data divided among the ranks, plus halos
//! and replicated operands, times 1.1. The bound is computed from the shapes, not from a run:
//! - the stencil keeps at most two grids live at once (a step's input and output), so one rank's
//!   share is `2 × rows/R + halo rows` of them (one halo row on each inner side, each step);
//! - a grid `Gr × Gc` of the matmul gives each rank `a`'s row block and `b`'s column block
//!   (each replicated on the other axis of the grid) and its block of `c`.
//!
//! `cargo bench --bench mpi -- --memory`.

use crate::mpi::{heat, matmul, mpirun, Btl};
use std::path::Path;

/// One program and how it is sharded at each rank count.
struct Case {
    name: &'static str,
    teg: String,
    /// f32 sources: name and shape.
    sources: Vec<(&'static str, Vec<usize>)>,
    /// The passes at `ranks` ranks.
    passes: fn(usize) -> String,
    /// The bound of one rank at `ranks` ranks, in bytes (before the 1.1 factor).
    bound: Box<dyn Fn(usize) -> f64>,
}

const F32: f64 = 4.0;

fn heat_case(rows: usize, cols: usize, steps: usize) -> Case {
    let row = cols as f64 * F32;
    Case {
        name: "heat stencil",
        teg: heat(rows, cols, steps, true),
        sources: vec![("u", vec![rows, cols])],
        passes: |r| match r {
            1 => "canonicalize,fuse,canonicalize".into(),
            _ => format!("canonicalize,shard{{parts={r},dim=i}},fuse,canonicalize"),
        },
        // Two live grids, each `rows / R` rows plus a halo row on each side.
        bound: Box::new(move |r| 2.0 * (rows as f64 / r as f64 + 2.0) * row),
    }
}

/// The grid of `ranks` ranks: 1×1, 2×1 or 2×2.
fn grid(ranks: usize) -> (usize, usize) {
    match ranks {
        1 => (1, 1),
        2 => (2, 1),
        _ => (2, ranks / 2),
    }
}

fn matmul_case(m: usize, k: usize, n: usize) -> Case {
    Case {
        name: "matmul grid",
        teg: matmul(m, k, n),
        sources: vec![("a", vec![m, k]), ("b", vec![k, n])],
        passes: |r| match grid(r) {
            (1, 1) => "canonicalize".into(),
            (gr, gc) => format!("canonicalize,shard{{parts={gr}x{gc},dim=i*j}},canonicalize"),
        },
        bound: Box::new(move |r| {
            let (gr, gc) = grid(r);
            let (m, k, n) = (m as f64, k as f64, n as f64);
            F32 * (m / gr as f64 * k + k * n / gc as f64 + m * n / r as f64)
        }),
    }
}

/// Each rank's planned and counted peak in a `--time` report.
fn peaks(stderr: &str) -> Vec<(f64, f64)> {
    (stderr.lines())
        .filter(|l| l.contains("peak memory: planned "))
        .map(|l| {
            let num = |key: &str| -> f64 {
                let at = l.find(key).unwrap() + key.len();
                l[at..].split([' ', ',']).next().unwrap().parse().unwrap()
            };
            (num("planned "), num("measured "))
        })
        .collect()
}

/// Compiles `case` for `ranks` ranks and runs it once; returns each rank's peaks.
fn run(dir: &Path, case: &Case, ranks: usize) -> Vec<(f64, f64)> {
    let teg = dir.join("case.teg");
    std::fs::write(&teg, &case.teg).unwrap();
    let prog = dir.join(format!("prog-{ranks}"));
    let passes = (case.passes)(ranks);
    let args = [teg.to_str().unwrap(), "-o", prog.to_str().unwrap()];
    super::tapc(&[&args[..], &["--mpi", "--passes", &passes]].concat());
    let a: Vec<String> = [
        "--input-dir",
        dir.to_str().unwrap(),
        "--out-dir",
        dir.join(format!("out-{ranks}")).to_str().unwrap(),
        "--threads",
        "1",
        "--time",
    ]
    .map(String::from)
    .to_vec();
    let o = mpirun(ranks, Btl::SharedMemory, &prog, &a);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{} on {ranks} ranks: {err}", case.name);
    let p = peaks(&err);
    assert_eq!(p.len(), ranks, "{} on {ranks} ranks: {err}", case.name);
    p
}

fn mib(b: f64) -> f64 {
    b / (1u64 << 20) as f64
}

/// Prints the table for one case; returns how many ranks were within the bound.
fn scale(dir: &Path, case: &Case) -> (usize, usize) {
    std::fs::create_dir_all(dir).unwrap();
    for (k, (name, shape)) in case.sources.iter().enumerate() {
        super::write_input(dir, name, shape, k as u64 + 1);
    }
    let (mut within, mut all) = (0, 0);
    for ranks in [1, 2, 4] {
        let bound = (case.bound)(ranks);
        for (r, (planned, counted)) in run(dir, case, ranks).into_iter().enumerate() {
            let ratio = planned.max(counted) / bound;
            println!(
                "{:<14} {ranks:>5} {r:>4} {:>12.2} {:>12.2} {:>12.2} {ratio:>8.2}",
                case.name,
                mib(planned),
                mib(counted),
                mib(bound),
            );
            within += usize::from(ratio <= 1.1);
            all += 1;
        }
    }
    let _ = std::fs::remove_dir_all(dir);
    (within, all)
}

/// Runs both cases and prints whether every rank met the bar.
pub fn main(dir: &Path) {
    println!(
        "{:<14} {:>5} {:>4} {:>12} {:>12} {:>12} {:>8}",
        "program", "ranks", "rank", "planned MiB", "counted MiB", "bound MiB", "/bound"
    );
    let cases = [heat_case(4096, 4096, 4), matmul_case(2048, 2048, 2048)];
    for case in &cases {
        let (within, all) = scale(&dir.join(case.name.replace(' ', "-")), case);
        println!(
            "{}: {within} of {all} ranks within 1.1 × the bound (bar: all: {})",
            case.name,
            if within == all { "met" } else { "NOT met" }
        );
    }
}
