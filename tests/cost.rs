//! The `cost` pass: the golden MLP case (data vs reduction parallelism on 2 nodes), the
//! search against exhaustive enumeration on small graphs, linearity of the costs in the index
//! size, and that the pass output re-parses, verifies and computes the same values.

mod common;
use std::collections::HashMap;
use tapc::passes::cost::{self, machine::Machine, model::Gene, model::Problem, pareto};
use tapc::passes::manager::{run_pipeline, RunConfig};
use tapc::syntax::printer::print_module;
use tapc_runtime::Tensor;

fn problem_of(src: &str, opts: &[(&str, &str)]) -> Problem {
    let (m, facts) = common::compile_ok("input", src);
    let opts: Vec<(String, String)> = opts
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let cfg = cost::config(&opts, None).expect("options");
    cost::problem(&m, 0, &facts[0], &cfg).expect("problem")
}

fn var(p: &Problem, apply: usize, name: &str) -> usize {
    p.applies[apply]
        .vars
        .iter()
        .position(|v| v.0 == name)
        .expect("variable")
}

/// Unity's 2-layer MLP forward (batch 64, 784 → 512 → 10, f32) on 2 default nodes
/// (50 Gflop/s each, links 12.5 GB/s + 5 µs), every source (weights included) on node 0.
///
/// - Data parallelism, batch split in 2 for all three applies, shard 1 on node 1: node 1 fetches
///   x[32:64, :] (100,352 B), all of w1 (1,605,632 B) and b1 (2,048 B) for the first linear,
///   w2 (20,480 B) and b2 (40 B) for the second, and its 32 logits rows travel back to node 0
///   for each of the two sinks (2 × 1,280 B): 1,731,112 bytes.
/// - Reduction parallelism on the first matmul (k = 784 split 392/392, partial on node 1), the
///   rest whole on node 0: node 1 fetches x[:, 392:784] (100,352 B) and w1[392:784, :]
///   (802,816 B) and sends back its 64 × 512 partial sums (131,072 B): 1,034,240 bytes; the
///   bias is added by the epilogue on node 0 and moves nothing.
///
/// The reduction plan moves 696,872 fewer bytes and is also faster (its critical path waits
/// for half of w1 instead of all of it), so the model prefers it for time and for bytes.
#[test]
fn mlp_data_vs_reduction_parallelism() {
    let p = problem_of(&common::example("mlp.teg"), &[("nodes", "2")]);
    assert_eq!(p.applies.len(), 3);
    let (h, a, y) = (0, 1, 2);
    let dp: Vec<Gene> = vec![
        Gene::split(0, &[0, 1]),
        Gene::split(0, &[0, 1]),
        Gene::split(0, &[0, 1]),
    ];
    let k = var(&p, h, "k");
    let rp: Vec<Gene> = vec![Gene::split(k, &[0, 1]), Gene::whole(0), Gene::whole(0)];
    assert!(p.valid(&dp) && p.valid(&rp));
    let (odp, orp) = (p.evaluate(&dp), p.evaluate(&rp));
    assert_eq!(odp[2], 1_731_112.0, "data parallel bytes");
    assert_eq!(orp[2], 1_034_240.0, "reduction parallel bytes");
    assert!(
        orp[0] < odp[0],
        "time: reduction {} vs data {}",
        orp[0],
        odp[0]
    );
    // Flops: 2·64·512·784 + 64·512 (bias) for the first linear, 64·512 for relu,
    // 2·64·10·512 + 640 for the second; the reduction plan adds one combine of 64 × 512.
    let base = 2.0 * 64.0 * 512.0 * 784.0
        + 64.0 * 512.0
        + 64.0 * 512.0
        + 2.0 * 64.0 * 10.0 * 512.0
        + 640.0;
    assert_eq!(odp[1], base);
    assert_eq!(orp[1], base + 64.0 * 512.0);
    let both = [
        pareto::Point {
            plan: dp.clone(),
            obj: odp,
        },
        pareto::Point {
            plan: rp.clone(),
            obj: orp,
        },
    ];
    for objective in [0, 2] {
        assert_eq!(
            cost::choose(&both, objective, None).map(|c| &c.plan),
            Some(&rp)
        );
    }
    let _ = (a, y);
    // Weights resident on node 1 instead: the data-parallel shard 0 now fetches them.
    let mut moved = p.machine.clone();
    for w in ["w1", "b1", "w2", "b2"] {
        moved.sources.insert(w.into(), 1);
    }
    let (m, facts) = common::compile_ok("mlp", &common::example("mlp.teg"));
    let q = Problem::new(&m, 0, &facts[0], moved, 2).unwrap();
    assert!(q.evaluate(&rp)[2] < q.evaluate(&dp)[2]);
}

/// A chain of 1-D ops: 4 applies, each with 6 choices on 2 nodes with up to 2 parts
/// (whole on 0 or 1; split on [0,0], [0,1], [1,0], [1,1]): 1,296 plans.
const CHAIN: &str = "
op @add(x: f32[N], y: f32[N]) -> (z: f32[N]) {
  z[i] = x[i] + y[i]
}
op @scale(x: f32[N]) -> (z: f32[N]) {
  z[i] = x[i] * 2.0
}
graph @g {
  %a = source @a : f32[6]
  %b = source @b : f32[6]
  %c = apply @add(%a, %b)
  %d = apply @scale(%c)
  %e = apply @add(%c, %d)
  %f = apply @scale(%e)
  sink @out %f
}
";

/// A small linear (parallel i, j; reduction k) feeding a relu: the reduction dimension is in
/// the space too. 14 × 10 plans on 2 nodes with 2 parts.
const SMALL_MLP: &str = "
op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
  y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
}
op @relu(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = max(x[..i], 0.0)
}
graph @g {
  %x = source @x : f32[4, 6]
  %w = source @w : f32[6, 3]
  %b = source @b : f32[3]
  %h = apply @linear(%x, %w, %b)
  %r = apply @relu(%h)
  sink @out %r
}
";

/// Six applies, each with exactly 3 choices (whole on node 0, 1 or 2; no sharding): 729 plans.
const SIX: &str = "
op @scale(x: f32[N]) -> (z: f32[N]) {
  z[i] = x[i] * 2.0
}
op @add(x: f32[N], y: f32[N]) -> (z: f32[N]) {
  z[i] = x[i] + y[i]
}
graph @g {
  %a = source @a : f32[1000]
  %b = apply @scale(%a)
  %c = apply @scale(%a)
  %d = apply @add(%b, %c)
  %e = apply @scale(%d)
  %f = apply @add(%d, %e)
  %h = apply @scale(%f)
  sink @out %h
}
";

fn objectives(points: &[pareto::Point]) -> Vec<[f64; 4]> {
    points.iter().map(|p| p.obj).collect()
}

#[test]
fn search_finds_the_exhaustive_frontier_on_small_graphs() {
    for (name, src, opts, space) in [
        (
            "chain",
            CHAIN,
            vec![("nodes", "2"), ("parts", "2")],
            1296usize,
        ),
        (
            "small mlp",
            SMALL_MLP,
            vec![("nodes", "2"), ("parts", "2")],
            14 * 10,
        ),
        ("six", SIX, vec![("nodes", "3"), ("parts", "1")], 729),
    ] {
        let p = problem_of(src, &opts);
        assert!(p.applies.len() <= 6);
        assert_eq!(
            pareto::genes(&p).iter().map(Vec::len).product::<usize>(),
            space,
            "{name}"
        );
        let exact = pareto::exhaustive(&p);
        for seed in [1, 2] {
            let (found, stats) = pareto::search(
                &p,
                &pareto::SearchConfig {
                    evals: 20000,
                    seed,
                    threads: 2,
                },
            );
            assert_eq!(stats.evals, 20000);
            assert_eq!(
                objectives(&found),
                objectives(&exact),
                "{name}, seed {seed}"
            );
            for pt in &found {
                assert!(p.valid(&pt.plan));
                assert_eq!(p.evaluate(&pt.plan), pt.obj);
            }
        }
    }
}

#[test]
fn search_is_deterministic_for_a_seed() {
    let p = problem_of(&common::example("mlp.teg"), &[("nodes", "2")]);
    let cfg = pareto::SearchConfig {
        evals: 5000,
        seed: 9,
        threads: 3,
    };
    let (a, _) = pareto::search(&p, &cfg);
    let (b, _) = pareto::search(&p, &cfg);
    assert_eq!(a, b);
    assert!(a.len() > 1);
}

/// Costs are affine in the size of a dimension with constant marginals: the batch of the MLP at
/// 64, 128 and 192 gives equal steps of flops, footprint and bytes moved, and the same rows of
/// the marginal table.
#[test]
fn costs_scale_linearly_with_index_size() {
    let mut results = Vec::new();
    for batch in [64, 128, 192] {
        let src = common::example("mlp.teg")
            .replace("f32[64, 784]", &format!("f32[{batch}, 784]"))
            .replace("0:64:2", &format!("0:{batch}:2"));
        let p = problem_of(&src, &[("nodes", "2")]);
        let k = var(&p, 0, "k");
        let dp = vec![Gene::split(0, &[0, 1]); 3];
        let rp = vec![Gene::split(k, &[0, 1]), Gene::whole(0), Gene::whole(0)];
        let table: Vec<_> = p
            .applies
            .iter()
            .map(|a| {
                a.table
                    .iter()
                    .find(|r| r.dim == a.vars[0].0)
                    .cloned()
                    .unwrap()
            })
            .collect();
        let flops: f64 = p.applies.iter().map(|a| a.flops).sum();
        let bytes: f64 = p.applies.iter().map(|a| a.bytes).sum();
        results.push((table, flops, bytes, p.evaluate(&dp), p.evaluate(&rp)));
    }
    let step = |f: &dyn Fn(usize) -> f64| (f(1) - f(0), f(2) - f(1));
    let (a, b) = step(&|i| results[i].1);
    assert_eq!(a, b, "flops");
    assert_eq!(
        a,
        64.0 * (2.0 * 512.0 * 784.0 + 512.0 + 512.0 + 2.0 * 10.0 * 512.0 + 10.0)
    );
    let (a, b) = step(&|i| results[i].2);
    assert_eq!(a, b, "footprint bytes");
    for o in 1..4 {
        let (a, b) = step(&|i| results[i].3[o]);
        assert_eq!(a, b, "data-parallel objective {o}");
        let (a, b) = step(&|i| results[i].4[o]);
        assert_eq!(a, b, "reduction-parallel objective {o}");
    }
    for r in &results {
        for (row, first) in r.0.iter().zip(&results[0].0) {
            assert_eq!(
                (row.flops, row.bytes),
                (first.flops, first.bytes),
                "marginal of {}",
                row.dim
            );
        }
    }
    // The per-step costs of the first linear's batch dimension: 2·512·784 + 512 flops; one row
    // of x (784 × 4 B) and of y (512 × 4 B).
    assert_eq!(results[0].0[0].flops, 2.0 * 512.0 * 784.0 + 512.0);
    assert_eq!(results[0].0[0].bytes, Some(784.0 * 4.0 + 512.0 * 4.0));
}

fn mlp_inputs() -> HashMap<String, Tensor> {
    let dir = format!("{}/tests/data/mlp", env!("CARGO_MANIFEST_DIR"));
    ["x", "w1", "b1", "w2", "b2"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                tapc_runtime::npy::read(std::path::Path::new(&format!("{dir}/{n}.npy"))).unwrap(),
            )
        })
        .collect()
}

#[test]
fn pass_output_reparses_verifies_and_computes_the_same_values() {
    let inputs = mlp_inputs();
    for objective in ["time", "bytes", "memory"] {
        let (mut m, facts) = common::compile_ok("mlp", &common::example("mlp.teg"));
        let before = common::run(&m, &facts, 0, &inputs);
        let pipeline = format!("cost{{nodes=2,evals=3000,seed=1,objective={objective}}}");
        let cx = run_pipeline(
            &mut m,
            facts,
            &pipeline,
            &RunConfig::default(),
            &mut String::new(),
        )
        .unwrap_or_else(|d| panic!("{pipeline}: {}", d.message));
        let report = cx.report("cost").expect("report").to_string();
        assert!(
            report.contains("frontier") && report.contains("chosen:"),
            "{report}"
        );
        let printed = print_module(&m);
        let (m2, facts2) = common::compile_ok("output", &printed);
        let after = common::run(&m2, &facts2, 0, &inputs);
        for (k, t) in &before {
            let (x, y) = (common::f64s(t), common::f64s(&after[k]));
            let scale = x.iter().fold(1e-30f64, |a, v| a.max(v.abs()));
            let err = x
                .iter()
                .zip(&y)
                .fold(0.0f64, |a, (u, v)| a.max((u - v).abs()))
                / scale;
            assert!(
                err < 1e-5,
                "{objective}: sink {k} differs by {err}\n{printed}"
            );
        }
        if objective == "time" {
            assert!(
                printed.contains("on 1"),
                "the fastest plan uses both nodes:\n{report}\n{printed}"
            );
        }
    }
}

#[test]
fn bad_options_and_machine_files_are_errors() {
    for opts in [
        vec![("nodes", "0")],
        vec![("objective", "speed")],
        vec![("evals", "-1")],
        vec![("bogus", "1")],
        vec![("parts", "99")],
        vec![("max_memory", "lots")],
    ] {
        let opts: Vec<(String, String)> = opts
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert!(cost::create(&opts).is_err(), "{opts:?}");
    }
    assert!(Machine::from_toml("nodes = 0").is_err());
    assert!(Machine::from_toml("bandwidth = -1").is_err());
    assert!(Machine::from_toml("[[link]]\nfrom = 0\nto = 5").is_err());
    assert!(Machine::from_toml("nodes = [").is_err());
    let m = Machine::from_toml("nodes = 3\nflops = 1e9\n[[node]]\nflops = 2e9\n[[link]]\nfrom = 0\nto = 2\nbandwidth = 1e6\n[sources]\nw1 = 2\n").unwrap();
    assert_eq!(m.len(), 3);
    assert_eq!((m.nodes[0].flops, m.nodes[1].flops), (2e9, 1e9));
    assert_eq!(
        (m.bandwidth[2][0], m.bandwidth[0][1]),
        (1e6, cost::machine::LOCAL_BANDWIDTH)
    );
    assert_eq!((m.source_node("w1"), m.source_node("x")), (2, 0));
    assert_eq!(
        Machine::default_local(2),
        Machine::from_toml("nodes = 2").unwrap()
    );
    assert_eq!(
        cost::parse_bytes("8GiB"),
        Ok(8.0 * 1024.0 * 1024.0 * 1024.0)
    );
}

/// Every frontier plan of the small graphs (whole applies moved to node 1, reduction shards,
/// mixed placements) materializes as TEG that re-parses, verifies and computes the same values.
#[test]
fn every_frontier_plan_materializes_and_keeps_its_values() {
    for (src, inputs) in [
        (CHAIN, vec![("a", vec![6]), ("b", vec![6])]),
        (
            SMALL_MLP,
            vec![("x", vec![4, 6]), ("w", vec![6, 3]), ("b", vec![3])],
        ),
    ] {
        let inputs: HashMap<String, Tensor> = inputs
            .into_iter()
            .map(|(n, shape)| {
                let len: usize = shape.iter().product();
                let data = (0..len)
                    .map(|i| ((i * 7 % 11) as f32 - 5.0) / 4.0)
                    .collect();
                (
                    n.to_string(),
                    Tensor {
                        shape,
                        data: tapc_runtime::Data::F32(data),
                    },
                )
            })
            .collect();
        let (m, facts) = common::compile_ok("input", src);
        let before = common::run(&m, &facts, 0, &inputs);
        let p = problem_of(src, &[("nodes", "2"), ("parts", "2")]);
        for pt in pareto::exhaustive(&p) {
            let mut m2 = m.clone();
            tapc::passes::shard::apply_plan(&mut m2, 0, &facts[0], &p.to_apply_plans(&pt.plan))
                .unwrap_or_else(|d| panic!("{}: {}", p.describe(&pt.plan), d.message));
            let printed = print_module(&m2);
            let (m3, facts3) = common::compile_ok("output", &printed);
            let after = common::run(&m3, &facts3, 0, &inputs);
            for (k, t) in &before {
                let (x, y) = (common::f64s(t), common::f64s(&after[k]));
                let err = x
                    .iter()
                    .zip(&y)
                    .fold(0.0f64, |a, (u, v)| a.max((u - v).abs()));
                assert!(
                    err < 1e-5,
                    "{}: {k} differs by {err}\n{printed}",
                    p.describe(&pt.plan)
                );
            }
        }
    }
}
