//! Benchmark of the `cost` search (`cargo bench --bench cost`, a plain `main`): evaluations per
//! second per thread on the MLP example (2 nodes, default machine; the bar is ≥ 10,000), for the
//! raw cost model and for the whole search (mutation, evaluation, frontier upkeep), single- and
//! two-threaded. Writes the frontier as `target/cost-frontier.svg`: time against peak memory and
//! time against bytes moved (hand-written SVG; `plotters` is not in the offline registry).

use std::fmt::Write as _;
use std::time::Instant;
use tapc::passes::cost::{self, model::Problem, pareto};

fn mlp() -> (Problem, cost::Config) {
    let src = std::fs::read_to_string(format!("{}/examples/mlp.teg", env!("CARGO_MANIFEST_DIR")))
        .expect("example");
    let (m, facts, diags) = tapc::compile_source(&src);
    assert!(!diags.has_errors());
    let cfg = cost::config(&[("nodes".into(), "2".into())], None).expect("options");
    (cost::problem(&m, 0, &facts[0], &cfg).expect("problem"), cfg)
}

/// One scatter panel at x offset `ox`: `xs` against `ys`, log-free linear axes.
fn panel(svg: &mut String, ox: f64, title: &str, xlabel: &str, pts: &[(f64, f64)]) {
    let (w, h, m) = (420.0, 320.0, 60.0);
    let (x0, x1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = pts
        .iter()
        .fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let sx = |x: f64| ox + m + (x - x0) / (x1 - x0).max(1e-30) * (w - 2.0 * m);
    let sy = |y: f64| h - m - (y - y0) / (y1 - y0).max(1e-30) * (h - 2.0 * m);
    let _ = writeln!(
        svg,
        r#"<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="black"/>"#,
        ox + m,
        m,
        w - 2.0 * m,
        h - 2.0 * m
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="30" font-size="14" text-anchor="middle">{title}</text>"#,
        ox + w / 2.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="12" text-anchor="middle">{xlabel}  [{x0:.3e} … {x1:.3e}]</text>"#,
        ox + w / 2.0,
        h - 20.0
    );
    let _ = writeln!(
        svg,
        r#"<text x="{}" y="{}" font-size="12" transform="rotate(-90 {} {})" text-anchor="middle">time (s) [{y0:.2e} … {y1:.2e}]</text>"#,
        ox + 18.0,
        h / 2.0,
        ox + 18.0,
        h / 2.0
    );
    let mut sorted = pts.to_vec();
    sorted.sort_by(|a, b| a.0.total_cmp(&b.0));
    // Points only: the frontier has four objectives, so a 2-D projection is not a curve.
    for &(x, y) in &sorted {
        let _ = writeln!(
            svg,
            r#"<circle cx="{:.1}" cy="{:.1}" r="3" fill="crimson"/>"#,
            sx(x),
            sy(y)
        );
    }
}

fn main() {
    let (p, cfg) = mlp();
    // Raw model: evaluate a fixed set of random-ish plans (the frontier of a short search).
    let (front, _) = pareto::search(
        &p,
        &pareto::SearchConfig {
            evals: 2000,
            seed: 7,
            threads: 1,
        },
    );
    let plans: Vec<_> = front.iter().map(|pt| pt.plan.clone()).collect();
    let n = 200_000;
    let t = Instant::now();
    let mut acc = 0.0;
    for i in 0..n {
        acc += p.evaluate(&plans[i % plans.len()])[0];
    }
    let raw = n as f64 / t.elapsed().as_secs_f64();
    std::hint::black_box(acc);
    println!(
        "cost model: {raw:.0} evaluations/s (one thread, {} applies, {} nodes)",
        p.applies.len(),
        p.machine.len()
    );
    for threads in [1usize, 2] {
        let evals = 200_000u64;
        let t = Instant::now();
        let (front, stats) = pareto::search(
            &p,
            &pareto::SearchConfig {
                evals,
                seed: cfg.search.seed,
                threads,
            },
        );
        let secs = t.elapsed().as_secs_f64();
        println!(
            "search, {threads} thread(s): {} evaluations in {secs:.3} s = {:.0} evaluations/s/thread; frontier {} points",
            stats.evals,
            stats.evals as f64 / secs / threads as f64,
            front.len()
        );
    }
    let (front, stats) = pareto::search(&p, &cfg.search);
    let chosen = cost::choose(&front, cfg.objective, cfg.max_memory);
    print!("{}", cost::report(&p, &front, &stats, chosen, "mlp"));
    let mut svg = String::from(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="840" height="320" font-family="sans-serif">"#,
    );
    svg.push('\n');
    panel(
        &mut svg,
        0.0,
        "MLP on 2 nodes: time vs peak memory",
        "peak memory per node (bytes)",
        &front
            .iter()
            .map(|pt| (pt.obj[3], pt.obj[0]))
            .collect::<Vec<_>>(),
    );
    panel(
        &mut svg,
        420.0,
        "MLP on 2 nodes: time vs bytes moved",
        "bytes moved between nodes",
        &front
            .iter()
            .map(|pt| (pt.obj[2], pt.obj[0]))
            .collect::<Vec<_>>(),
    );
    svg.push_str("</svg>\n");
    let path = format!("{}/target/cost-frontier.svg", env!("CARGO_MANIFEST_DIR"));
    match std::fs::write(&path, svg) {
        Ok(()) => println!("wrote {path} ({} frontier points)", front.len()),
        Err(e) => println!("could not write {path}: {e}"),
    }
}
