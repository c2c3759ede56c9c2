//! Benchmark of the alias analysis (`cargo bench --bench alias`, a plain `main`).
//!
//! 1. Query time on the N x N 2x2-tiles example (`source f32[N, N]` → reshape to
//!    `[N/2, 2, N/2, 2]` → transpose to `[N/2, N/2, 2, 2]`, then slices of it) for
//!    N = 2^4 … 2^20. N is only a shape: no data is allocated. The footprints must not grow
//!    with N and neither may the query time: the largest/smallest ratio must stay below 2.
//! 2. The analysis of a generated 10,000-node graph (a long mix of views over a few sources).

#[path = "../tests/common/mod.rs"]
mod common;

// A small deterministic generator (xorshift) so runs are comparable.
use common::Rng;
use std::fmt::Write as _;
use std::hint::black_box;
use std::time::Instant;
use tapc::ir::{Graph, ValueId};
use tapc::passes::alias::analysis::{analyze, AliasInfo};

/// Samples per measurement, calls per sample, and interleaved rounds over all N (the
/// reported time is the smallest of the rounds' medians: robust against other load).
const SAMPLES: usize = 11;
const BATCH: usize = 20;
const ROUNDS: usize = 15;

fn compile(src: &str) -> Graph {
    let (m, _, diags) = tapc::compile_source(src);
    assert!(!diags.has_errors(), "the benchmark graph verifies:\n{src}");
    m.graphs.into_iter().next().expect("one graph")
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Median time of one call of `f`, in microseconds.
fn time_us<R>(mut f: impl FnMut() -> R) -> f64 {
    let samples = (0..SAMPLES)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..BATCH {
                black_box(f());
            }
            t.elapsed().as_secs_f64() * 1e6 / BATCH as f64
        })
        .collect();
    median(samples)
}

fn tiles(n: i64) -> String {
    let (h, q) = (n / 2, n / 4);
    let nn = n * n;
    format!(
        "graph @tiles {{
  %a = source @a : f32[{n}, {n}]
  %r = reshape %a [{h}, 2, {h}, 2]
  %t = transpose %r [0, 2, 1, 3]
  %tl = slice %t [0:{h}, 0:{h}, 0:1, 0:1]
  %br = slice %t [0:{h}, 0:{h}, 1:2, 1:2]
  %odd = slice %a [1:{n}:2, 0:{n}]
  %flat = reshape %t [{nn}]
  %first = slice %flat [0:{half}]
  %mid = slice %t [0:{q}, 1:{h}:2, 0:2, 0:2]
}}",
        half = nn / 2
    )
}

/// The tiles graph of one N, analysed, with the values the queries use.
struct Tiles {
    n: i64,
    g: Graph,
    info: AliasInfo,
    v: [ValueId; 7],
    shard: [(i64, i64); 4],
    stripes: usize,
}

fn setup(n: i64) -> Tiles {
    let g = compile(&tiles(n));
    let id = |s: &str| g.find_value(s).expect("value");
    let info = analyze(&g).expect("analysis");
    let v = ["tl", "br", "odd", "first", "mid", "flat", "t"].map(id);
    let [tl, br, odd, first, mid, flat, t] = v;
    // The answers do not depend on N.
    assert!(!info.aliases(tl, br).unwrap());
    assert!(info.aliases(br, odd).unwrap() && !info.aliases(tl, odd).unwrap());
    assert!(info.contains(odd, br).unwrap() && info.contains(first, mid).unwrap());
    assert!(!info.has_self_aliases(flat).unwrap());
    // One shard of a consumer of %t: tile rows [h/4, 3h/4), all tile columns.
    let h = n / 2;
    let shard = [(h / 4, 3 * h / 4), (0, h), (0, 2), (0, 2)];
    let fp = info.footprint_of_box(t, &shard).unwrap();
    assert_eq!(fp[0].1.count(), (n as i128) * (n as i128) / 2);
    let stripes = [tl, br, odd, first, mid]
        .iter()
        .map(|&x| stripes(&info, x))
        .sum::<usize>()
        + fp.iter().map(|(_, r)| r.num_stripes()).sum::<usize>();
    Tiles {
        n,
        g,
        info,
        v,
        shard,
        stripes,
    }
}

/// Median µs of: analysis, one `aliases`, one `contains`, one shard footprint.
fn measure(t: &Tiles) -> [f64; 4] {
    let [tl, br, odd, first, mid, _, tv] = t.v;
    let info = &t.info;
    [
        time_us(|| analyze(&t.g).map(|i| i.footprint(mid).len())),
        time_us(|| {
            let a = info.aliases(tl, br).unwrap();
            let b = info.aliases(br, odd).unwrap();
            let c = info.aliases(mid, tl).unwrap();
            (a, b, c)
        }) / 3.0,
        time_us(|| {
            let a = info.contains(odd, br).unwrap();
            let b = info.contains(first, mid).unwrap();
            (a, b)
        }) / 2.0,
        time_us(|| info.footprint_of_box(tv, &t.shard).unwrap()),
    ]
}

fn stripes(info: &AliasInfo, v: ValueId) -> usize {
    info.footprint(v).iter().map(|(_, r)| r.num_stripes()).sum()
}

fn dims(v: &[i64]) -> String {
    let s: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("[{}]", s.join(", "))
}

/// A random view of value `x` of shape `s`: (text after `=`, result shape).
fn view(rng: &mut Rng, x: &str, s: &[i64]) -> Option<(String, Vec<i64>)> {
    let rank = s.len();
    let total: i64 = s.iter().product();
    Some(match rng.below(10) {
        0 => {
            let mut p: Vec<i64> = (0..rank as i64).collect();
            p.rotate_left(1 + rng.below(rank.max(1)));
            let out = p.iter().map(|&d| s[d as usize]).collect();
            (format!("transpose {x} {}", dims(&p)), out)
        }
        1 => (format!("reverse {x} [{}]", rng.below(rank)), s.to_vec()),
        2 | 3 => {
            let mut parts = Vec::new();
            let mut out = Vec::new();
            for &n in s {
                let step = [1, 1, 2, 3, -1][rng.below(5)] as i64;
                let a = rng.below(n as usize / 2 + 1) as i64;
                let b = n - rng.below(n as usize / 2 + 1) as i64;
                if b <= a {
                    return None;
                }
                if step > 0 {
                    parts.push(format!("{a}:{b}:{step}"));
                    out.push((b - a + step - 1) / step);
                } else {
                    parts.push(format!("{}:{}:-1", b - 1, a));
                    out.push(b - 1 - a);
                }
            }
            if out.contains(&0) {
                return None;
            }
            (format!("slice {x} [{}]", parts.join(", ")), out)
        }
        4 => {
            // Merge two neighbouring dims or split one.
            let mut out = s.to_vec();
            if rank > 1 && rng.below(2) == 0 {
                let d = rng.below(rank - 1);
                let m = out.remove(d + 1);
                out[d] *= m;
            } else {
                let d = rng.below(rank);
                let f = [2, 3, 4]
                    .into_iter()
                    .find(|f| out[d] % f == 0 && out[d] > *f)?;
                out[d] /= f;
                out.insert(d + 1, f);
            }
            if out.len() > 4 {
                return None;
            }
            (format!("reshape {x} {}", dims(&out)), out)
        }
        5 => {
            let mut out = s.to_vec();
            if let Some(d) = s.iter().position(|&n| n == 1) {
                out.remove(d);
                (format!("squeeze {x} [{d}]"), out)
            } else {
                out.insert(0, 1);
                (format!("unsqueeze {x} [0]"), out)
            }
        }
        6 => {
            let out: Vec<i64> = s.iter().map(|&n| if n == 1 { 3 } else { n }).collect();
            (format!("broadcast {x} {}", dims(&out)), out)
        }
        7 => {
            let axis = rng.below(rank);
            let mut out = s.to_vec();
            out[axis] *= 2;
            if rng.below(2) == 0 {
                (format!("concat {x}, {x} axis {axis}"), out)
            } else {
                (format!("interleave {x}, {x} axis {axis}"), out)
            }
        }
        8 => {
            let axis = rng.below(rank);
            let mut out = s.to_vec();
            out[axis] *= 2;
            (format!("repeat {x} times 2 axis {axis}"), out)
        }
        _ => {
            let reflect = s.iter().all(|&n| n > 2) && rng.below(2) == 0;
            let out: Vec<i64> = s.iter().map(|&n| n + 3).collect();
            let w = vec!["1:2"; rank].join(", ");
            let mode = if reflect { "reflect" } else { "constant 0.0" };
            (format!("pad {x} [{w}] {mode}"), out)
        }
    })
    .filter(|(_, out)| out.iter().product::<i64>() <= (1 << 20) && total > 0)
}

/// About `n` nodes: four sources, then views whose operand is the previous view half of the
/// time (long chains) and a random earlier value otherwise.
fn generate(n: usize) -> (String, usize, f64) {
    let mut rng = Rng(0x0a11_a5ed_5eed_0001);
    let mut s = String::from("graph @big {\n");
    let mut pool: Vec<(String, Vec<i64>, usize)> = Vec::new();
    for (k, shape) in [vec![64, 64], vec![4096], vec![16, 16, 16], vec![24, 36]]
        .into_iter()
        .enumerate()
    {
        let _ = writeln!(s, "  %s{k} = source @s{k} : f32{}", dims(&shape));
        pool.push((format!("%s{k}"), shape, 0));
    }
    let mut k = 0;
    while pool.len() < n {
        let j = if rng.below(2) == 0 {
            pool.len() - 1
        } else {
            rng.below(pool.len())
        };
        let (x, shape, depth) = pool[j].clone();
        if let Some((text, out)) = view(&mut rng, &x, &shape) {
            let _ = writeln!(s, "  %v{k} = {text}");
            pool.push((format!("%v{k}"), out, depth + 1));
            k += 1;
        }
    }
    s.push_str("}\n");
    let max = pool.iter().map(|p| p.2).max().unwrap_or(0);
    let mean = pool.iter().map(|p| p.2).sum::<usize>() as f64 / pool.len() as f64;
    (s, max, mean)
}

fn main() {
    // `cargo bench --bench alias -- graph` runs only part 2 (for profiling).
    if !std::env::args().any(|a| a == "graph") {
        tile_queries();
    }
    generated_graph();
}

fn tile_queries() {
    println!(
        "alias queries on the N x N 2x2-tiles example (min over {ROUNDS} rounds of the median of \
         {SAMPLES} samples of {BATCH} calls)"
    );
    let cases: Vec<Tiles> = (4..=20).map(|e| setup(1i64 << e)).collect();
    let mut best = vec![[f64::MAX; 4]; cases.len()];
    for _ in 0..ROUNDS {
        for (c, b) in cases.iter().zip(&mut best) {
            for (x, y) in b.iter_mut().zip(measure(c)) {
                *x = x.min(y);
            }
        }
    }
    println!(
        "{:>9} {:>9} {:>12} {:>12} {:>12} {:>14}",
        "N", "stripes", "analyze µs", "aliases µs", "contains µs", "shard fp µs"
    );
    for (c, b) in cases.iter().zip(&best) {
        println!(
            "{:>9} {:>9} {:>12.2} {:>12.2} {:>12.2} {:>14.2}",
            c.n, c.stripes, b[0], b[1], b[2], b[3]
        );
    }
    let ratio = |k: usize| {
        let v: Vec<f64> = best.iter().map(|b| b[k]).collect();
        let max = v.iter().copied().fold(f64::MIN, f64::max);
        let min = v.iter().copied().fold(f64::MAX, f64::min);
        max / min
    };
    let same_size = cases.iter().all(|c| c.stripes == cases[0].stripes);
    println!(
        "largest/smallest: analyze {:.2}x, aliases {:.2}x, contains {:.2}x, shard footprint \
         {:.2}x; footprint size independent of N: {same_size}",
        ratio(0),
        ratio(1),
        ratio(2),
        ratio(3)
    );
}

fn generated_graph() {
    let (src, max_depth, mean_depth) = generate(10_000);
    let t = Instant::now();
    let g = compile(&src);
    let verify = t.elapsed().as_secs_f64();
    // TAPC_BENCH_RUNS=1 for instruction counting under callgrind.
    let n = std::env::var("TAPC_BENCH_RUNS").map_or(5, |v| v.parse().unwrap_or(5));
    let runs: Vec<f64> = (0..n)
        .map(|_| {
            let t = Instant::now();
            black_box(analyze(&g).expect("analysis of the generated graph"));
            t.elapsed().as_secs_f64()
        })
        .collect();
    let info = analyze(&g).expect("analysis");
    let t = Instant::now();
    let selfish = info
        .values()
        .iter()
        .filter(|&&v| info.has_self_aliases(v).unwrap())
        .count();
    let self_time = t.elapsed().as_secs_f64();
    let stripes_total: usize = info.values().iter().map(|&v| stripes(&info, v)).sum();
    println!(
        "generated graph: {} nodes, view depth max {max_depth} / mean {mean_depth:.1}, {} \
         footprint stripes in all; parse+verify {:.1} ms",
        g.nodes.len(),
        stripes_total,
        verify * 1e3
    );
    println!(
        "  analyze (footprints of every value), median of {n}: {:.1} ms (min {:.1} ms)",
        median(runs.clone()) * 1e3,
        runs.iter().copied().fold(f64::MAX, f64::min) * 1e3
    );
    println!(
        "  has_self_aliases of every value (computes the lazy backed sets): {:.1} ms, {selfish} \
         self-aliasing",
        self_time * 1e3
    );
}
