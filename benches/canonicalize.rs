//! Benchmark: `canonicalize` over generated graphs of 1,000 to 10,000 nodes (long view chains,
//! slices of concats, duplicate applies). Run with `cargo bench --bench canonicalize`.
//! The bar: canonicalize (and alias) over 10,000 nodes in under 1 s in release mode.

use std::time::Instant;
use tapc::passes::manager::{run_pipeline, RunConfig};

/// A graph of about `n` nodes: chains of views that mostly cancel, concat/slice round trips
/// and repeated applies.
fn generate(n: usize) -> String {
    let mut s = String::from("op @scale(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] * 2.0\n}\n\ngraph @big {\n");
    let mut k = 0;
    let mut cur = "%s0".to_string();
    s.push_str("  %s0 = source @s0 : f32[32, 48]\n");
    while k < n {
        let ops = [
            format!("%v{k} = transpose {cur} [1, 0]"),
            format!("%v{k}r = reverse %v{k} [0]"),
            format!("%v{k}t = transpose %v{k}r [1, 0]"),
            format!("%v{k}u = reverse %v{k}t [1]"),
            format!("%v{k}c = concat %v{k}u, %v{k}u axis 0"),
            format!("%v{k}s = slice %v{k}c [32:64, 0:48]"),
            format!("%v{k}a = apply @scale(%v{k}s)"),
            format!("%v{k}b = apply @scale(%v{k}s)"),
            format!("%v{k}x = reshape %v{k}a [48, 32]"),
            format!("%v{k}y = reshape %v{k}x [32, 48]"),
        ];
        for o in &ops {
            s.push_str("  ");
            s.push_str(o);
            s.push('\n');
        }
        if k % 100 == 0 {
            s.push_str(&format!("  sink @o{k} %v{k}b\n"));
        }
        cur = format!("%v{k}y");
        k += ops.len();
    }
    s.push_str(&format!("  sink @last {cur}\n}}\n"));
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    println!(
        "{:>8} {:>8} {:>12} {:>12}",
        "nodes", "after", "parse+verify", "canonicalize"
    );
    for n in [1_000, 2_000, 5_000, 10_000] {
        let src = generate(n);
        let mut times = Vec::new();
        let mut parse = Vec::new();
        let mut after = 0;
        for _ in 0..5 {
            let t0 = Instant::now();
            let (mut m, facts, diags) = tapc::compile_source(&src);
            assert!(!diags.has_errors(), "generated graph verifies");
            parse.push(t0.elapsed().as_secs_f64());
            let t1 = Instant::now();
            run_pipeline(
                &mut m,
                facts,
                "canonicalize",
                &RunConfig::default(),
                &mut String::new(),
            )
            .expect("canonicalize runs");
            times.push(t1.elapsed().as_secs_f64());
            after = m.graphs[0].nodes.len();
        }
        let nodes = tapc::compile_source(&src).0.graphs[0].nodes.len();
        println!(
            "{nodes:>8} {after:>8} {:>10.1}ms {:>10.1}ms",
            1e3 * median(parse),
            1e3 * median(times)
        );
    }
}
