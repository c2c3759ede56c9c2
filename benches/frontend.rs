//! Front-end scaling: `compile_source` (parse, lower, check ops, verify) on generated files
//! of 1k, 10k and 100k units of each shape, with the time per unit, so that anything
//! superlinear shows as a growing per-unit time. `cargo bench --bench frontend`
//! (`-- --only WORD` runs the shapes whose name contains WORD).

use std::time::Instant;

/// A shape: a name and a generator of a file with `n` units.
type Shape = (&'static str, fn(usize) -> String);

fn shapes() -> Vec<Shape> {
    vec![
        ("ops, each applied once", |n| {
            ops_applied(n, "(x: f32[N]) -> (y: f32[N])")
        }),
        // Each header misses its `)`: recovered in part, and its applies still checked.
        ("ops with broken headers, applied", |n| {
            ops_applied(n, "(x: f32[N] -> (y: f32[N])")
        }),
        ("statements in one graph", |n| {
            let mut s = String::from("graph @g {\n  %v0 = rand seed 1 : f32[4, 4]\n");
            for k in 0..n {
                s += &format!("  %v{} = transpose %v{k} [1, 0]\n", k + 1);
            }
            s + &format!("  sink @y %v{n}\n}}\n")
        }),
        ("temporaries in one kernel", |n| {
            let mut s = String::from("op @f(x: f32[N]) -> (y: f32[N]) {\n  t0[i] = x[i]\n");
            for k in 0..n {
                s += &format!("  t{}[i] = t{k}[i] + 1.0\n", k + 1);
            }
            s + &format!("  y[i] = t{n}[i]\n}}\n")
        }),
        ("long line (sinks' arguments)", |n| {
            // One statement of n tokens pairs: a sequence point naming n values.
            let mut s = String::from("graph @g {\n");
            for k in 0..n {
                s += &format!("  %v{k} = rand seed {k} : f32[2]\n  sink @s{k} %v{k}\n");
            }
            let names: Vec<String> = (0..n).map(|k| format!("@s{k}")).collect();
            s + &format!("  sequence {} -> @s0\n}}\n", names[1..].join(", "))
        }),
        ("deep view chain", |n| {
            let mut s = String::from("graph @g {\n  %v0 = rand seed 1 : f32[8, 8]\n");
            for k in 0..n {
                let view = if k % 2 == 0 {
                    "transpose %v [1, 0]"
                } else {
                    "reverse %v [0]"
                };
                s += &format!(
                    "  %v{} = {}\n",
                    k + 1,
                    view.replace("%v", &format!("%v{k}"))
                );
            }
            s + &format!("  sink @y %v{n}\n}}\n")
        }),
    ]
}

/// `n` ops with this header (after `op @fK`), applied once each in a chain.
fn ops_applied(n: usize, header: &str) -> String {
    let mut s = String::new();
    for k in 0..n {
        s += &format!("op @f{k}{header} {{\n  y[i] = x[i] * 2.0\n}}\n");
    }
    s += "graph @g {\n  %v0 = rand seed 1 : f32[4]\n";
    for k in 0..n {
        s += &format!("  %v{} = apply @f{k}(%v{k})\n", k + 1);
    }
    s + &format!("  sink @y %v{n}\n}}\n")
}

fn main() {
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "front end check times (load average {})",
        load.split_whitespace().next().unwrap_or("?")
    );
    println!(
        "{:32} {:>8} {:>12} {:>14}",
        "shape", "n", "time", "per unit"
    );
    let args: Vec<String> = std::env::args().collect();
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    for (name, gen) in shapes() {
        if only.is_some_and(|w| !name.contains(w.as_str())) {
            continue;
        }
        for n in [1_000, 10_000, 100_000] {
            let src = gen(n);
            let t = Instant::now();
            let (_, _, diags) = tapc::compile_source(&src);
            let dt = t.elapsed();
            let errors = diags.0.iter().filter(|d| d.is_error()).count();
            println!(
                "{name:32} {n:>8} {:>10.1} ms {:>11.2} µs{}",
                dt.as_secs_f64() * 1e3,
                dt.as_secs_f64() * 1e6 / n as f64,
                if errors > 0 {
                    format!("  ({errors} errors)")
                } else {
                    String::new()
                }
            );
        }
    }
}
