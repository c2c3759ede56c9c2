//! Benchmark of the `cost` search (`cargo bench --bench cost`, a plain `main`): evaluations per
//! second per thread on the MLP example (2 nodes, default machine; the bar is ≥ 10,000):
//!
//! - the cost model alone, from scratch (`Problem::evaluate`) against incremental
//!   (`Evaluator`, re-costing only the applies a one-gene change touches), on the same
//!   pre-generated walk of one-gene changes;
//! - the whole search (mutation, evaluation, frontier upkeep) with full costing ("before") and
//!   with incremental costing ("after"), on one and two threads;
//! - first, the time to build the problem (the model plus the probes that keep only what
//!   `shard` and `fuse` accept) of the MLP and of a 200-apply chain of linear + relu layers.
//!
//! Writes the frontier plot of the default search (time against peak memory and against bytes
//! moved; `cost::plot`, plotters) to `target/cost-frontier.svg`, the file
//! `tapc opt examples/mlp.teg --passes=cost --frontier-svg FILE` writes.

#[path = "../tests/common/rng.rs"]
mod rng;

use rng::Rng;
use std::time::Instant;
use tapc::passes::cost::{self, model::Evaluator, model::Problem, pareto};
use tapc::passes::manager::PassFiles;

fn mlp() -> (Problem, cost::Config) {
    let src = std::fs::read_to_string(format!("{}/examples/mlp.teg", env!("CARGO_MANIFEST_DIR")))
        .expect("example");
    let (m, facts, diags) = tapc::compile_source(&src);
    assert!(!diags.has_errors());
    let cfg =
        cost::config(&[("nodes".into(), "2".into())], &PassFiles::default()).expect("options");
    (cost::problem(&m, 0, &facts[0], &cfg).expect("problem"), cfg)
}

/// A walk of `n` valid plans, each one gene away from the previous one.
fn walk(p: &Problem, n: usize) -> Vec<Vec<cost::model::Gene>> {
    let genes = pareto::genes(p);
    let mut rng = Rng(0x2545_F491_4F6C_DD1D);
    let mut rnd = |k: usize| rng.below(k);
    let mut plan = p.unsharded();
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let mut next = plan.clone();
        let ai = rnd(next.len());
        next[ai] = genes[ai][rnd(genes[ai].len())];
        if next != plan && p.valid(&next) {
            plan = next;
            out.push(plan.clone());
        }
    }
    out
}

/// A chain of `layers` linear+relu layers of width 64 (`2 * layers` applies): a graph whose
/// problem build probes many (apply, variable) pairs and fusion pairs.
fn chain(layers: usize) -> String {
    let mut s = String::from(
        "op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {\n  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]\n}\nop @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\ngraph @chain {\n  %a0 = source @x : f32[32, 64]\n",
    );
    for l in 0..layers {
        s += &format!("  %w{l} = source @w{l} : f32[64, 64]\n  %b{l} = source @b{l} : f32[64]\n");
        s += &format!("  %h{l} = apply @linear(%a{l}, %w{l}, %b{l})\n");
        s += &format!("  %a{} = apply @relu(%h{l})\n", l + 1);
    }
    s + &format!("  sink @y %a{layers}\n}}\n")
}

/// Seconds to build the cost problem of `src`'s first graph (the model plus the probes that
/// keep only what `shard` and `fuse` accept), best of `runs`.
fn problem_build(src: &str, runs: usize) -> (usize, f64) {
    let (m, facts, diags) = tapc::compile_source(src);
    assert!(!diags.has_errors());
    let cfg =
        cost::config(&[("nodes".into(), "2".into())], &PassFiles::default()).expect("options");
    let mut best = f64::MAX;
    let mut applies = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let p = cost::problem(&m, 0, &facts[0], &cfg).expect("problem");
        best = best.min(t.elapsed().as_secs_f64());
        applies = p.applies.len();
    }
    (applies, best)
}

fn main() {
    let mlp_src =
        std::fs::read_to_string(format!("{}/examples/mlp.teg", env!("CARGO_MANIFEST_DIR")))
            .expect("example");
    for (name, src, runs) in [("mlp", mlp_src, 20), ("chain", chain(100), 3)] {
        let (n, secs) = problem_build(&src, runs);
        println!(
            "problem build (model + shard/fuse probes), {name}, {n} applies: {:.2} ms",
            secs * 1e3
        );
    }
    let (p, cfg) = mlp();
    let plans = walk(&p, 20_000);
    let rounds = 10;
    let t = Instant::now();
    let mut acc = 0.0;
    for _ in 0..rounds {
        for plan in &plans {
            acc += p.evaluate(plan)[0];
        }
    }
    let full = (rounds * plans.len()) as f64 / t.elapsed().as_secs_f64();
    let mut ev = Evaluator::new(&p);
    let t = Instant::now();
    for _ in 0..rounds {
        for plan in &plans {
            acc += ev.evaluate(plan)[0];
        }
    }
    let inc = (rounds * plans.len()) as f64 / t.elapsed().as_secs_f64();
    std::hint::black_box(acc);
    println!(
        "cost model, one-gene walk ({} applies, {} nodes, one thread): from scratch {full:.0} evaluations/s, incremental {inc:.0} evaluations/s ({:.2} apply terms recomputed per evaluation)",
        p.applies.len(),
        p.machine.len(),
        ev.recomputed as f64 / (rounds * plans.len()) as f64
    );
    for threads in [1usize, 2] {
        for incremental in [false, true] {
            let evals = 200_000u64;
            let t = Instant::now();
            let (front, stats) = pareto::search(
                &p,
                &pareto::SearchConfig {
                    evals,
                    seed: cfg.search.seed,
                    threads,
                    incremental,
                    ..Default::default()
                },
            );
            let secs = t.elapsed().as_secs_f64();
            println!(
                "search, {threads} thread(s), {} costing: {} evaluations in {secs:.3} s = {:.0} evaluations/s/thread; frontier {} points",
                if incremental { "incremental" } else { "full" },
                stats.evals,
                stats.evals as f64 / secs / threads as f64,
                front.len()
            );
        }
    }
    let (front, stats) = pareto::search(&p, &cfg.search);
    let chosen = cost::choose(&front, cfg.objective, cfg.max_memory);
    print!("{}", cost::report(&p, &front, &stats, chosen, "mlp"));
    let svg = cost::plot::frontier_svg(&[cost::plot::GraphFrontier {
        graph: "mlp",
        nodes: p.machine.len(),
        front: &front,
        chosen,
    }])
    .expect("plot");
    let path = format!("{}/target/cost-frontier.svg", env!("CARGO_MANIFEST_DIR"));
    match std::fs::write(&path, svg) {
        Ok(()) => println!("wrote {path} ({} frontier points)", front.len()),
        Err(e) => println!("could not write {path}: {e}"),
    }
}
