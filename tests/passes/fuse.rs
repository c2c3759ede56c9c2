//! `fuse` keeps every sunk value bit-identical (the interpreter is the oracle: fusion never
//! reorders a reduction), its output re-parses to the same module and verifies, and fusion
//! actually happens (node counts drop). Checked on the examples, on the fuse filetests, and on
//! random graphs of applies (fixed ops plus random elementwise kernels), views and pins
//! (`common::graphgen`). Sharding and fusion together: the MLP pipeline through the
//! command line, and random graphs with random shard choices and fusion in one pipeline.

use crate::common;

use common::graphgen::{build_with, kernels, rich_step};
use common::mlp_inputs;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use std::collections::HashMap;
use tapc::ir::{Module, NodeKind};
use tapc::passes::manager::{run_pipeline, RunConfig};
use tapc::print::print_module;
use tapc_runtime::{Data, Tensor};

type Sinks = Vec<HashMap<String, Tensor>>;

/// Bit-for-bit equality of two tensors (NaN payloads and signed zeros included).
fn same_bits(a: &Tensor, b: &Tensor) -> bool {
    a.shape == b.shape
        && match (&a.data, &b.data) {
            (Data::F32(x), Data::F32(y)) => x
                .iter()
                .map(|v| v.to_bits())
                .eq(y.iter().map(|v| v.to_bits())),
            (Data::F64(x), Data::F64(y)) => x
                .iter()
                .map(|v| v.to_bits())
                .eq(y.iter().map(|v| v.to_bits())),
            (Data::I32(x), Data::I32(y)) => x == y,
            (Data::I64(x), Data::I64(y)) => x == y,
            (Data::Bool(x), Data::Bool(y)) => x == y,
            _ => false,
        }
}

fn same_sinks(a: &Sinks, b: &Sinks) -> Result<(), String> {
    if a.len() != b.len() {
        return Err("graph count differs".into());
    }
    for (g, (x, y)) in a.iter().zip(b).enumerate() {
        if x.len() != y.len() {
            return Err(format!("graph {g}: sink count differs"));
        }
        for (name, t) in x {
            match y.get(name) {
                Some(u) if same_bits(t, u) => {}
                _ => return Err(format!("graph {g}: sink @{name} differs")),
            }
        }
    }
    Ok(())
}

fn nodes(m: &Module) -> usize {
    m.graphs.iter().map(|g| g.nodes.len()).sum()
}

fn applies(m: &Module) -> usize {
    m.graphs
        .iter()
        .flat_map(|g| &g.nodes)
        .filter(|n| matches!(n.kind, NodeKind::Apply(_)))
        .count()
}

/// What one pipeline run did: sinks before and after, node counts, the printed result.
struct Outcome {
    before: Sinks,
    after: Sinks,
    nodes: (usize, usize),
    applies: (usize, usize),
    printed: String,
}

/// Runs `pipeline` on `src`; checks that the output re-parses to the same module and that the
/// re-parsed module runs to the same values as the pass's own result.
fn run_fuse(src: &str, pipeline: &str, inputs: &HashMap<String, Tensor>) -> Outcome {
    try_run(src, pipeline, inputs).unwrap_or_else(|d| {
        panic!(
            "pipeline `{pipeline}` failed: {}\n{}",
            d.message,
            d.notes.join("\n")
        )
    })
}

/// As [`run_fuse`], but a pipeline error is returned.
fn try_run(
    src: &str,
    pipeline: &str,
    inputs: &HashMap<String, Tensor>,
) -> Result<Outcome, tapc::diag::Diagnostic> {
    let (mut m, facts) = common::compile_ok("input", src);
    let before: Sinks = (0..m.graphs.len())
        .map(|i| common::run(&m, &facts, i, inputs))
        .collect();
    let (n0, a0) = (nodes(&m), applies(&m));
    let mut log = String::new();
    let cx = run_pipeline(&mut m, facts, pipeline, &RunConfig::default(), &mut log)?;
    let printed = print_module(&m);
    let (m2, facts2) = common::compile_ok("output", &printed);
    assert_eq!(m, m2, "the output re-parses to the same module:\n{printed}");
    let after: Sinks = (0..m.graphs.len())
        .map(|i| common::run(&m, &cx.facts, i, inputs))
        .collect();
    let reparsed: Sinks = (0..m2.graphs.len())
        .map(|i| common::run(&m2, &facts2, i, inputs))
        .collect();
    if let Err(e) = same_sinks(&after, &reparsed) {
        panic!("re-parsed output runs differently: {e}\n{printed}");
    }
    Ok(Outcome {
        before,
        after,
        nodes: (n0, nodes(&m)),
        applies: (a0, applies(&m)),
        printed,
    })
}

#[test]
fn examples_keep_their_values_and_fuse() {
    for (name, inputs) in [
        ("mlp.teg", mlp_inputs()),
        ("attention.teg", HashMap::new()),
        ("conv.teg", HashMap::new()),
        ("softmax.teg", HashMap::new()),
    ] {
        for pipeline in ["fuse", "canonicalize,fuse"] {
            let o = run_fuse(&common::example(name), pipeline, &inputs);
            if let Err(e) = same_sinks(&o.before, &o.after) {
                panic!("{name} with {pipeline}: {e}\n{}", o.printed);
            }
            if matches!(name, "mlp.teg" | "attention.teg") {
                assert!(
                    o.nodes.1 < o.nodes.0,
                    "{name} with {pipeline}: nothing fused\n{}",
                    o.printed
                );
            }
        }
    }
}

#[test]
fn mlp_fuses_linear_into_relu() {
    let o = run_fuse(
        &common::example("mlp.teg"),
        "canonicalize,fuse",
        &mlp_inputs(),
    );
    assert_eq!(o.applies, (3, 2), "{}", o.printed);
    assert!(
        o.printed.contains("= apply @linear.relu(%x, %w1, %b1)"),
        "{}",
        o.printed
    );
}

#[test]
fn attention_folds_the_transpose_and_the_scale() {
    let o = run_fuse(&common::example("attention.teg"), "fuse", &HashMap::new());
    assert!(!o.printed.contains("transpose %k"), "{}", o.printed);
    assert!(
        o.printed.contains("apply @matmul.transpose(%q, %k)"),
        "{}",
        o.printed
    );
    assert_eq!(o.applies, (4, 3), "{}", o.printed);
}

#[test]
fn fuse_filetests_keep_their_values_and_fuse() {
    let dir = format!("{}/tests/filetests/fuse", env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "teg"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "the fuse filetests are there");
    let inputs = mlp_inputs(); // mlp.teg's sources
    for f in files {
        let src = std::fs::read_to_string(&f).unwrap();
        for pipeline in ["fuse", "canonicalize,fuse", "fuse,canonicalize"] {
            let o = run_fuse(&src, pipeline, &inputs);
            if let Err(e) = same_sinks(&o.before, &o.after) {
                panic!("{} with {pipeline}: {e}\n{}", f.display(), o.printed);
            }
            assert!(o.nodes.1 < o.nodes.0, "{}: nothing fused", f.display());
        }
    }
}

/// The shard pass's output (chains sharded the same way) fuses shard by shard.
#[test]
fn shards_fuse_shard_by_shard() {
    for (name, inputs) in [
        ("mlp.teg", mlp_inputs()),
        ("softmax.teg", HashMap::new()),
        ("attention.teg", HashMap::new()),
    ] {
        let (mut m, facts) = common::compile_ok(name, &common::example(name));
        let mut log = String::new();
        let pipeline = "canonicalize,shard{parts=4},canonicalize";
        if let Err(d) = run_pipeline(&mut m, facts, pipeline, &RunConfig::default(), &mut log) {
            panic!("{name}: {pipeline} failed: {}", d.message);
        }
        let sharded = print_module(&m);
        let o = run_fuse(&sharded, "fuse", &inputs);
        if let Err(e) = same_sinks(&o.before, &o.after) {
            panic!("{name}: {e}\n{sharded}\n{}", o.printed);
        }
        if name == "mlp.teg" {
            assert!(o.applies.1 < o.applies.0, "{}", o.printed);
            assert!(
                o.printed
                    .contains("= apply @linear.relu(%x.3, %w1, %b1) @[48:64, 0:512] on 3"),
                "{}",
                o.printed
            );
        }
    }
}

/// The pipeline, through the command line: `tapc opt examples/mlp.teg
/// --passes='canonicalize,shard{parts=4},fuse,canonicalize'` prints a graph that re-parses,
/// verifies and runs to the same values, and `fuse` sees through the shard pass's
/// slice(concat) pairs without a `canonicalize` in between: every batch shard is one fused
/// `linear ⇒ relu` apply feeding its own shard of the second linear.
#[test]
fn mlp_shard_then_fuse_through_the_cli() {
    let path = format!("{}/examples/mlp.teg", env!("CARGO_MANIFEST_DIR"));
    let args: Vec<String> = [
        "opt",
        &path,
        "--passes=canonicalize,shard{parts=4},fuse,canonicalize",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    let out = tapc::driver::run(&args);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.stderr, "");
    let (m, facts) = common::compile_ok("output", &out.stdout);
    let (m0, facts0) = common::compile_ok("mlp.teg", &common::example("mlp.teg"));
    let inputs = mlp_inputs();
    let before = vec![common::run(&m0, &facts0, 0, &inputs)];
    let after = vec![common::run(&m, &facts, 0, &inputs)];
    // Batch sharding splits no reduction: every element is computed by the same expression.
    same_sinks(&before, &after).unwrap();
    // Printing the re-parsed module gives the same text.
    assert_eq!(print_module(&m), out.stdout);
    for (k, (lo, hi)) in [(0, 16), (16, 32), (32, 48), (48, 64)]
        .into_iter()
        .enumerate()
    {
        let fused =
            format!("%a.{k} = apply @linear.relu(%x.{k}, %w1, %b1) @[{lo}:{hi}, 0:512] on {k}");
        let second = format!("%y.{k} = apply @linear(%a.{k}, %w2, %b2) @[{lo}:{hi}, 0:10] on {k}");
        assert!(out.stdout.contains(&fused), "{fused}\n{}", out.stdout);
        assert!(out.stdout.contains(&second), "{second}\n{}", out.stdout);
    }
    assert_eq!(applies(&m), 8, "{}", out.stdout);
    // Only the logits are assembled; no relu of its own is left.
    assert_eq!(out.stdout.matches("concat").count(), 1, "{}", out.stdout);
    assert!(!out.stdout.contains("apply @relu("), "{}", out.stdout);
}

#[test]
fn fusion_counts_on_the_spec_examples() {
    let chain = "op @add(a: f32[N], b: f32[N]) -> (y: f32[N]) {\n  y[i] = a[i] + b[i]\n}\n\
op @neg(x: f32[N]) -> (y: f32[N]) {\n  y[i] = -x[i]\n}\n\
op @sq(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * x[i]\n}\n\
graph @g {\n  %a = rand seed 1 : f32[5]\n  %b = rand seed 2 : f32[5]\n  %c = apply @add(%a, %b)\n  %d = apply @neg(%c)\n  %e = apply @sq(%d)\n  sink @e %e\n}\n";
    let o = run_fuse(chain, "fuse", &HashMap::new());
    assert_eq!(o.applies, (3, 1), "{}", o.printed);
    assert!(
        o.printed.contains("y[i] = -(a[i] + b[i]) * -(a[i] + b[i])"),
        "{}",
        o.printed
    );
    same_sinks(&o.before, &o.after).unwrap();

    let diamond = "op @mv(a: f32[M, N], x: f32[N]) -> (y: f32[M]) {\n  y[i] = sum[k](a[i, k] * x[k])\n}\n\
op @sin(x: f32[N]) -> (y: f32[N]) {\n  y[i] = sin(x[i])\n}\n\
op @cos(x: f32[N]) -> (y: f32[N]) {\n  y[i] = cos(x[i])\n}\n\
graph @g {\n  %a = rand seed 1 : f32[3, 3]\n  %x = rand seed 2 : f32[3]\n  %k = apply @mv(%a, %x)\n  %s = apply @sin(%k)\n  %c = apply @cos(%k)\n  sink @s %s\n  sink @c %c\n}\n";
    let o = run_fuse(diamond, "fuse", &HashMap::new());
    assert_eq!(
        o.applies,
        (3, 3),
        "the reduction is not duplicated:\n{}",
        o.printed
    );
    assert_eq!(o.printed.matches("sum[").count(), 1, "{}", o.printed);
}

/// A fusion composed and checked once is reused where everything it depends on matches (a
/// long chain repeats them): look-alike segments that differ only in a repeated argument, the
/// port the producer feeds, an escaping producer or a shape each keep their own values.
#[test]
fn reused_fusions_apply_only_to_matching_segments() {
    let ops = "op @f(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i] * 1.5 + 0.25\n}\n\
op @add(a: f32[N], b: f32[N]) -> (y: f32[N]) {\n  y[i] = a[i] - 2.0 * b[i]\n}\n";
    let mut g = String::from(
        "graph @g {\n  %x = rand seed 1 : f32[4]\n  %w = rand seed 2 : f32[4]\n  %v = rand seed 3 : f32[5]\n",
    );
    for r in 0..2 {
        let segments = [
            format!("%a{r} = apply @f(%x)\n  %qa{r} = apply @add(%a{r}, %a{r})"),
            format!("%b{r} = apply @f(%x)\n  %qb{r} = apply @add(%b{r}, %w)"),
            format!("%c{r} = apply @f(%x)\n  %qc{r} = apply @add(%w, %c{r})"),
            format!("%d{r} = apply @f(%v)\n  %qd{r} = apply @add(%d{r}, %d{r})"),
            format!("%e{r} = apply @f(%x)\n  %qe{r} = apply @add(%e{r}, %w)\n  %re{r} = apply @f(%e{r})\n  sink @re{r} %re{r}"),
        ];
        for (k, seg) in segments.iter().enumerate() {
            let q = ["qa", "qb", "qc", "qd", "qe"][k];
            g += &format!("  {seg}\n  sink @{q}{r} %{q}{r}\n");
        }
        // Temporaries are named after values without their digits: both chains' are `h`.
        let h = |i: usize| format!("%h{}", 1000 * r + i);
        g += &format!("  {} = apply @f(%x)\n", h(0));
        for i in 1..150 {
            g += &format!("  {} = apply @f({})\n", h(i), h(i - 1));
        }
        g += &format!("  sink @h{r} {}\n", h(149));
    }
    let src = format!("{ops}{g}}}\n");
    let o = run_fuse(&src, "fuse", &HashMap::new());
    if let Err(e) = same_sinks(&o.before, &o.after) {
        panic!("{e}\n{}", o.printed);
    }
    // Each 150-apply chain is a few kernels, and the second round applies the same ops.
    assert!(
        o.applies.1 * 4 < o.applies.0,
        "{:?}\n{}",
        o.applies,
        o.printed
    );
    let (first, second) = o.printed.split_once("%qa1 =").expect("round 1 is printed");
    let applied = |text: &str| -> Vec<String> {
        text.split("apply @")
            .skip(1)
            .map(|t| t.split('(').next().unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(applied(first), applied(second), "{}", o.printed);
}

/// Unusual shapes and graphs: several outputs, empty tensors, parameters, sequence points,
/// integer and bool kernels, scalars, rank-polymorphic ops over 3-D values.
#[test]
fn edge_cases_keep_their_values() {
    let ops = "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
op @split(x: f32[M, N]) -> (lo: f32[M, N], hi: f32[M, N]) {\n  lo[i, j] = min(x[i, j], 0.5)\n  hi[i, j] = max(x[i, j], 0.5)\n}\n\
op @conv<s>(x: f32[C, H], f: f32[C, K]) -> (y: f32[(H - K) / s + 1]) {\n  y[h] = sum[c, k](x[c, s * h + k] * f[c, k])\n}\n\
op @count(x: i32[N]) -> (y: i32[], z: bool[]) {\n  t[] = sum[k](x[k] % 7)\n  y[] = t[] * 2\n  z[] = t[] > 3\n}\n\
op @mix(x: i32[N]) -> (y: i32[N]) {\n  y[i] = x[i] * 3 - i\n}\n\
op @flag(x: i32[N]) -> (y: bool[N]) {\n  y[i] = x[i] % 2 == 0 || i > 2\n}\n\
op @pick(c: bool[N], x: f32[N]) -> (y: f32[N]) {\n  y[i] = select(c[i], x[i], -x[i])\n}\n";
    let graphs = [
        "graph @two_outputs {\n  %x = rand seed 1 : f32[3, 4]\n  %r = apply @relu(%x)\n  %a, %b = apply @split(%r)\n  %c = apply @relu(%a)\n  sink @b %b\n  sink @c %c\n}\n",
        "graph @empty {\n  %x = zeros : f32[0, 4]\n  %r = apply @relu(%x)\n  %t = transpose %r [1, 0]\n  %s = apply @relu(%t)\n  sink @s %s\n}\n",
        "graph @params {\n  %x = rand seed 2 : f32[2, 9]\n  %f = rand seed 3 : f32[2, 3]\n  %r = apply @relu(%x)\n  %y = apply @conv<s = 2>(%x, %f)\n  %z = apply @relu(%y)\n  sink @z %z\n  sink @r %r\n}\n",
        "graph @sequenced {\n  %x = rand seed 4 : f32[5]\n  %a = apply @relu(%x)\n  %b = apply @relu(%a)\n  %c = apply @relu(%b)\n  sink @c %c\n  sequence %a -> @c\n}\n",
        "graph @ints {\n  %x = rand seed 5 : i32[6]\n  %m = apply @mix(%x)\n  %f = apply @flag(%m)\n  %g = rand seed 6 : f32[6]\n  %r = apply @relu(%g)\n  %p = apply @pick(%f, %r)\n  %n, %z = apply @count(%m)\n  sink @p %p\n  sink @n %n\n  sink @z %z\n}\n",
        "graph @rank3 {\n  %x = rand seed 7 : f32[2, 3, 4]\n  %t = transpose %x [2, 0, 1]\n  %r = apply @relu(%t)\n  %s = apply @relu(%r)\n  sink @s %s\n}\n",
    ];
    for g in graphs {
        let src = format!("{ops}{g}");
        for pipeline in ["fuse", "canonicalize,fuse"] {
            let o = run_fuse(&src, pipeline, &HashMap::new());
            if let Err(e) = same_sinks(&o.before, &o.after) {
                panic!("{e}\n{src}\n{}", o.printed);
            }
        }
    }
}

#[test]
fn options_switch_the_rewrites() {
    let src = common::example("attention.teg");
    let o = run_fuse(&src, "fuse{views=false}", &HashMap::new());
    assert!(o.printed.contains("transpose %k"), "{}", o.printed);
    let o = run_fuse(&src, "fuse{producers=off}", &HashMap::new());
    assert!(!o.printed.contains("transpose %k"), "{}", o.printed);
    assert_eq!(o.applies.0, o.applies.1, "{}", o.printed);
    let cfg = RunConfig::default();
    for bad in ["fuse{bogus=1}", "fuse{views=maybe}"] {
        let d = tapc::passes::manager::build(bad, &cfg)
            .err()
            .expect("rejected");
        assert_eq!(d.code, Some(tapc::diag::codes::BAD_PASS));
    }
}

#[test]
fn a_module_that_does_not_verify_is_a_diagnostic() {
    use tapc::passes::manager::PassContext;
    let (mut m, _, diags) = tapc::compile_source(
        "op @id(x: f32[N]) -> (y: f32[N]) {\n  y[i] = x[i]\n}\ngraph @g {\n  %a = rand seed 1 : f32[2]\n  %b = apply @id(%a) : f32[3]\n  sink @b %b\n}\n",
    );
    assert!(diags.has_errors());
    let mut pass = tapc::passes::fuse::create(&[]).unwrap();
    let Err(d) = pass.run(&mut m, &mut PassContext::default()) else {
        panic!("fuse accepted a module that does not verify");
    };
    assert_eq!(d.code, Some(tapc::diag::codes::PASS_FAILED));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_graphs_keep_their_values(
        steps in proptest::collection::vec(rich_step(), 0..14),
        kernels in kernels(),
        canon in any::<bool>(),
    ) {
        let src = build_with(&steps, &kernels);
        let pipeline = if canon { "canonicalize,fuse" } else { "fuse" };
        let o = run_fuse(&src, pipeline, &HashMap::new());
        prop_assert!(o.nodes.1 <= o.nodes.0, "fusion never adds nodes:\n{}", o.printed);
        if let Err(e) = same_sinks(&o.before, &o.after) {
            return Err(TestCaseError::fail(format!("{e}\n--- input\n{src}\n--- output\n{}", o.printed)));
        }
        // A second run finds nothing left to do.
        let again = run_fuse(&o.printed, "fuse", &HashMap::new());
        prop_assert_eq!(&again.printed, &o.printed);
    }
}

/// Largest difference of two finite f32 sink values, relative to the largest magnitude of the
/// sink (at least 1); non-finite values must agree exactly (same infinity, or both NaN).
fn max_rel_diff(a: &Sinks, b: &Sinks) -> f64 {
    let mut worst: f64 = 0.0;
    for (x, y) in a.iter().zip(b) {
        for (name, t) in x {
            let (p, q) = (common::f64s(t), common::f64s(&y[name]));
            let scale = q
                .iter()
                .filter(|v| v.is_finite())
                .fold(1.0f64, |m, v| m.max(v.abs()));
            for (u, v) in p.iter().zip(&q) {
                let d = if u.is_finite() && v.is_finite() {
                    (u - v).abs() / scale
                } else if u == v || (u.is_nan() && v.is_nan()) {
                    0.0
                } else {
                    f64::INFINITY
                };
                worst = worst.max(d);
            }
        }
    }
    worst
}

/// Relative bound for sharding that splits a reduction (reassociated f32 sums; see
/// [`max_rel_diff`]), on graphs whose ops are continuous.
const SPLIT_REDUCTION_BOUND: f64 = 1e-4;

/// What one shard-and-fuse case checked.
#[derive(Debug, PartialEq)]
enum Checked {
    /// Parallel sharding: bit-identical to the original.
    Exact,
    /// A possible reduction split: bit-identical to the same sharding without `fuse`, and the
    /// relative difference to the original when it was bounded (continuous graphs).
    Split(Option<f64>),
    /// The explicit dimension was refused with E0106.
    Refused,
}

/// Random graph `steps`/`kernels`, sharded into `parts` along `dim` and fused, in pipeline
/// `order` (see [`random_graphs_shard_and_fuse`]); the output printed, or why it is wrong.
fn shard_and_fuse_case(
    steps: &[common::graphgen::Step],
    kernels: &[String],
    parts: i64,
    dim: &str,
    order: usize,
) -> Result<(Checked, String), String> {
    let src = build_with(steps, kernels);
    let shard = format!("shard{{parts={parts},dim={dim}}}");
    let splits = matches!(dim, "j" | "k");
    let (pipeline, unfused) = match (order % 4, splits) {
        (0, _) => (
            format!("{shard},fuse,canonicalize"),
            format!("{shard},canonicalize"),
        ),
        (1, _) => (
            format!("canonicalize,{shard},fuse"),
            format!("canonicalize,{shard}"),
        ),
        (2, false) => (format!("fuse,{shard},canonicalize"), String::new()),
        _ => (
            format!("{shard},canonicalize,fuse"),
            format!("{shard},canonicalize"),
        ),
    };
    let fail = |what: String, out: &str| {
        format!("{pipeline}: {what}\n--- input\n{src}\n--- output\n{out}")
    };
    let o = match try_run(&src, &pipeline, &HashMap::new()) {
        Ok(o) => o,
        Err(d) if d.code == Some(tapc::diag::codes::BAD_SHARD) && dim != "auto" => {
            return Ok((Checked::Refused, String::new()))
        }
        Err(d) => return Err(fail(format!("failed: {}", d.message), "")),
    };
    if !splits {
        same_sinks(&o.before, &o.after).map_err(|e| fail(e, &o.printed))?;
        return Ok((Checked::Exact, o.printed));
    }
    let s = run_fuse(&src, &unfused, &HashMap::new());
    same_sinks(&s.after, &o.after).map_err(|e| fail(format!("vs {unfused}: {e}"), &o.printed))?;
    let discontinuous = src.contains("apply @quant(")
        || kernels
            .iter()
            .any(|k| k.contains("i32(") || k.contains("select("));
    if discontinuous {
        return Ok((Checked::Split(None), o.printed));
    }
    let err = max_rel_diff(&o.after, &o.before);
    if err > SPLIT_REDUCTION_BOUND {
        return Err(fail(format!("relative difference {err}"), &o.printed));
    }
    Ok((Checked::Split(Some(err)), o.printed))
}

const DIMS: [&str; 5] = ["auto", "0", "1", "j", "k"];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(150))]
    /// Random graphs, a random shard choice and fusion in one pipeline (in several orders):
    /// - sharding parallel dimensions (`auto`, `0`, `1`) keeps every sink bit-identical;
    /// - `dim=j` / `dim=k` may split reductions (partial results + combine): the pipeline is
    ///   then bit-identical to the same sharding without `fuse` (fusion never reorders), and
    ///   within [`SPLIT_REDUCTION_BOUND`] of the original when no op is discontinuous
    ///   (integer casts, comparisons, the quantizer), where one ulp can flip a result;
    /// - an explicit dimension that cannot be sharded exactly is E0106 (never a wrong answer);
    ///   any other error fails.
    #[test]
    fn random_graphs_shard_and_fuse(
        steps in proptest::collection::vec(rich_step(), 0..12),
        kernels in kernels(),
        parts in 2i64..5,
        dim in 0usize..5,
        order in 0usize..4,
    ) {
        if let Err(e) = shard_and_fuse_case(&steps, &kernels, parts, DIMS[dim], order) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// Whether an op name is one `fuse` made from the generator's ops and views (`affine.relu`,
/// `matmul.transpose.1`), not one `shard` made (`softmax.s0`, `rowsum.partial.j`).
fn is_fused_name(op: &str) -> bool {
    const MADE_FROM: &[&str] = &[
        "relu",
        "affine",
        "rowsum",
        "add2",
        "matmul",
        "softmax",
        "rownorm",
        "quant",
        "k0",
        "k1",
        "k2",
        "k3",
        "transpose",
        "reverse",
        "slice",
        "squeeze",
        "unsqueeze",
        "broadcast",
        "reshape",
        "fused",
    ];
    let parts: Vec<&str> = op.split('.').collect();
    parts.iter().filter(|p| MADE_FROM.contains(p)).count() >= 2
        && parts
            .iter()
            .all(|p| MADE_FROM.contains(p) || p.chars().all(|c| c.is_ascii_digit()))
}

/// Over a fixed sample, every kind of shard-and-fuse case occurs: exact, reduction splits with
/// a bounded difference, and fused shards (a sharded apply of a created op).
#[test]
fn shard_and_fuse_sample_covers_every_case() {
    let mut runner = TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(rich_step(), 4..12),
        kernels(),
        2i64..5,
    );
    let (mut exact, mut bounded, mut unbounded, mut refused, mut fused_shards) = (0, 0, 0, 0, 0);
    let mut worst: f64 = 0.0;
    for n in 0..100 {
        let (steps, kernels, parts) = strategy.new_tree(&mut runner).unwrap().current();
        let (checked, printed) =
            shard_and_fuse_case(&steps, &kernels, parts, DIMS[n % 5], n / 5).unwrap();
        match checked {
            Checked::Exact => exact += 1,
            Checked::Split(Some(e)) => {
                bounded += 1;
                worst = worst.max(e);
            }
            Checked::Split(None) => unbounded += 1,
            Checked::Refused => refused += 1,
        }
        fused_shards += printed
            .lines()
            .filter(|l| l.contains(") @[") && l.contains(" on "))
            .filter(|l| {
                l.split("apply @")
                    .nth(1)
                    .and_then(|r| r.split('(').next())
                    .is_some_and(is_fused_name)
            })
            .count();
    }
    eprintln!(
        "exact {exact}, split and bounded {bounded} (worst {worst:e}), split with discontinuous ops {unbounded}, refused {refused}; fused shard applies {fused_shards}"
    );
    assert!(exact >= 40, "{exact}");
    assert!(bounded >= 3, "{bounded}");
    assert!(fused_shards >= 20, "{fused_shards}");
}

/// Over a fixed sample of random graphs, fusion removes a good share of the nodes.
#[test]
fn random_graphs_do_fuse() {
    let mut runner = TestRunner::deterministic();
    let strategy = (proptest::collection::vec(rich_step(), 4..14), kernels());
    let (mut before, mut after, mut fused, mut folded, mut shards) = (0, 0, 0, 0, 0);
    for _ in 0..120 {
        let (steps, kernels) = strategy.new_tree(&mut runner).unwrap().current();
        let src = build_with(&steps, &kernels);
        let o = run_fuse(&src, "canonicalize,fuse", &HashMap::new());
        same_sinks(&o.before, &o.after).unwrap();
        before += o.nodes.0;
        after += o.nodes.1;
        fused += usize::from(o.applies.1 < o.applies.0);
        folded +=
            usize::from(o.printed.contains(".transpose(") || o.printed.contains(".broadcast("));
        // A fused shard: an apply with a range whose op is a created (dotted) op.
        shards += o
            .printed
            .lines()
            .filter(|l| l.contains(") @[") && l.contains(".b0 = apply @"))
            .filter(|l| {
                l.split("apply @")
                    .nth(1)
                    .is_some_and(|r| r.split('(').next().is_some_and(|op| op.contains('.')))
            })
            .count();
    }
    eprintln!("nodes {before} -> {after}; graphs with fused applies {fused}/120, with folded views {folded}; fused shards {shards}");
    assert!(shards > 5, "only {shards} sharded chains were fused");
    assert!(after * 10 < before * 9, "nodes {before} -> {after}");
    assert!(fused > 40, "only {fused} of 120 graphs had applies fused");
    assert!(folded > 10, "only {folded} of 120 graphs had views folded");
}
