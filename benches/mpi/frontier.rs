//! The frontier's first five plans, measured (issue 17: "the plan the search ranks first is
//! the fastest measured among the frontier's first five"). The cost pass searches the MLP's
//! plans for 2 nodes of this machine as `mpirun -np 2 tapc calibrate` measured it over shared
//! memory (default search: 20,000 evaluations, seed 1, so the frontier is the same every
//! run), and `pick=K` carries out the K-th point of the ranked frontier (by time) for K = 1
//! to 5; each plan is compiled, run on 2 ranks × 1 thread over shared memory, and its median
//! time printed beside the model's. Twice: with the inputs read by every rank (`sources=shared`)
//! and read by rank 0 and sent (`sources=root`, `--inputs-on-root`).
//!
//! `cargo bench --bench mpi -- --frontier [--runs N]`.

use super::cluster::chosen;
use super::{compile, measure, prepare, tapc, Machines, Setup, Workload};
use crate::mpi::Btl;
use std::path::Path;

/// The points of the frontier in a cost report (`frontier (N points):`).
fn frontier_size(report: &str) -> usize {
    let line = (report.lines())
        .find(|l| l.trim_start().starts_with("frontier ("))
        .expect("a frontier");
    super::after(line, "frontier (").expect("a point count") as usize
}

/// The `chosen:` plan of a cost report, described.
fn chosen_plan(report: &str) -> String {
    (report.lines())
        .find_map(|l| l.trim_start().strip_prefix("chosen: "))
        .expect("a chosen plan")
        .to_string()
}

pub(super) fn main(dir: &Path, w: &Workload, machines: &Machines, runs: usize) {
    let dir = dir.join("frontier");
    let teg = prepare(&dir, w, "canonicalize");
    let machine = dir.join("machine-shm.toml");
    std::fs::write(&machine, &machines.shm).unwrap();
    for sources in ["shared", "root"] {
        let passes = |k: usize| {
            format!(
                "canonicalize,cost{{nodes=2,sources={sources},sinks=distributed,machine={},pick={k}}},canonicalize",
                machine.display()
            )
        };
        let report = |k: usize| {
            tapc(&[
                "opt",
                teg.to_str().unwrap(),
                "--passes",
                &passes(k),
                "--emit",
                "cost",
            ])
        };
        let n = frontier_size(&report(1)).min(5);
        println!(
            "{} on 2 ranks × 1 thread, shm, sources={sources}: the first {n} plans of the frontier (calibrated machine), medians of {runs}",
            w.name
        );
        println!(
            "{:>4} {:>12} {:>10} {:>16}  plan",
            "rank", "predicted ms", "time ms", "predicted bytes"
        );
        let setup = Setup {
            name: "2 × 1, shm",
            np: 2,
            threads: 1,
            btl: Btl::SharedMemory,
            on_root: sources == "root",
        };
        let mut times = Vec::new();
        for k in 1..=n {
            let r = report(k);
            compile(&dir, &teg, &passes(k));
            let (t, _, _) = measure(&dir, &setup, runs);
            println!(
                "{k:>4} {:>12.1} {t:>10.1} {:>16}  {}",
                chosen(&r, "time ") * 1e3,
                chosen(&r, "bytes moved "),
                chosen_plan(&r)
            );
            times.push(t);
        }
        let best = (0..times.len()).min_by(|&a, &b| times[a].total_cmp(&times[b]));
        match best {
            Some(0) => println!("the first-ranked plan is the fastest measured"),
            Some(b) => println!(
                "the first-ranked plan is NOT the fastest measured: rank {} is ({:.1} ms against {:.1} ms)",
                b + 1,
                times[b],
                times[0]
            ),
            None => {}
        }
    }
}
