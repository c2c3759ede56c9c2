//! `fuse` keeps every sunk value bit-identical (the interpreter is the oracle: fusion never
//! reorders a reduction), its output re-parses to the same module and verifies, and fusion
//! actually happens (node counts drop). Checked on the examples, on the fuse filetests, and on
//! random graphs of applies (fixed ops plus random elementwise kernels) and views.

mod common;

use common::mlp_inputs;

use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::TestRunner;
use std::collections::HashMap;
use tapc::ir::{Module, NodeKind};
use tapc::passes::manager::{run_pipeline, RunConfig};
use tapc::syntax::printer::print_module;
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
    let (mut m, facts) = common::compile_ok("input", src);
    let before: Sinks = (0..m.graphs.len())
        .map(|i| common::run(&m, &facts, i, inputs))
        .collect();
    let (n0, a0) = (nodes(&m), applies(&m));
    let mut log = String::new();
    let cx = match run_pipeline(&mut m, facts, pipeline, &RunConfig::default(), &mut log) {
        Ok(cx) => cx,
        Err(d) => panic!(
            "pipeline `{pipeline}` failed: {}\n{}",
            d.message,
            d.notes.join("\n")
        ),
    };
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
    Outcome {
        before,
        after,
        nodes: (n0, nodes(&m)),
        applies: (a0, applies(&m)),
        printed,
    }
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

/// Random graphs: the canonicalize generator's steps plus matmuls, softmax, biases through
/// broadcast/unsqueeze/squeeze, a reduction with an epilogue, a quantizing kernel with integer
/// arithmetic, random elementwise kernels (weakly typed literals and index variables
/// included), and extra sinks that pin intermediate values.
mod gen {
    use proptest::prelude::*;

    pub const OPS: &str = "op @relu(x: f32[..S]) -> (y: f32[..S]) {\n  y[..i] = max(x[..i], 0.0)\n}\n\
op @affine(x: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = x[i, j] * 1.5 - 0.25\n}\n\
op @rowsum(x: f32[M, N]) -> (y: f32[M, 1]) {\n  y[i, c] = sum[j](x[i, j]) + f32(c)\n}\n\
op @add2(a: f32[M, N], b: f32[M, N]) -> (y: f32[M, N]) {\n  y[i, j] = a[i, j] + b[i, j]\n}\n\
op @matmul(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {\n  c[i, j] = sum[k](a[i, k] * b[k, j])\n}\n\
op @softmax(x: f32[M, N]) -> (y: f32[M, N]) {\n  m[i] = max[j](x[i, j])\n  s[i] = sum[j](exp(x[i, j] - m[i]))\n  y[i, j] = exp(x[i, j] - m[i]) / s[i]\n}\n\
op @rownorm(x: f32[M, N]) -> (y: f32[M, N]) {\n  s[i] = sum[j](abs(x[i, j]))\n  y[i, j] = x[i, j] / (s[i] + 1.0)\n}\n\
op @quant(x: f32[M, N]) -> (y: f32[M, N]) {\n  q[i, j] = i32(x[i, j] * 8.0) % 5 - i32(j)\n  y[i, j] = f32(q[i, j]) * 0.125\n}\n";

    #[derive(Debug, Clone)]
    pub enum Step {
        Gen(u8, u8, u8),
        Relu(usize),
        Affine(usize),
        RowSum(usize),
        Transpose(usize),
        Reverse(usize, bool),
        Slice(usize, u8, u8),
        Concat(usize, usize),
        Flatten(usize),
        Kernel(usize, usize),
        Kernel2(usize, usize, usize),
        Matmul(usize, usize),
        Softmax(usize),
        RowNorm(usize),
        Quant(usize),
        Bias(usize),
        ColBias(usize),
        Pin(usize),
        Sharded(usize, u8, u8),
    }

    pub fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0u8..3, 1u8..5, 1u8..5).prop_map(|(k, a, b)| Step::Gen(k, a, b)),
            any::<usize>().prop_map(Step::Relu),
            any::<usize>().prop_map(Step::Affine),
            any::<usize>().prop_map(Step::RowSum),
            any::<usize>().prop_map(Step::Transpose),
            (any::<usize>(), any::<bool>()).prop_map(|(v, d)| Step::Reverse(v, d)),
            (any::<usize>(), 0u8..4, 1u8..3).prop_map(|(v, s, t)| Step::Slice(v, s, t)),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Concat(a, b)),
            any::<usize>().prop_map(Step::Flatten),
            (any::<usize>(), 0usize..4).prop_map(|(v, k)| Step::Kernel(v, k)),
            (any::<usize>(), any::<usize>(), 0usize..4)
                .prop_map(|(a, b, k)| Step::Kernel2(a, b, k)),
            (any::<usize>(), any::<usize>()).prop_map(|(a, b)| Step::Matmul(a, b)),
            any::<usize>().prop_map(Step::Softmax),
            any::<usize>().prop_map(Step::RowNorm),
            any::<usize>().prop_map(Step::Quant),
            any::<usize>().prop_map(Step::Bias),
            any::<usize>().prop_map(Step::ColBias),
            any::<usize>().prop_map(Step::Pin),
            (any::<usize>(), 0u8..6, 0u8..6).prop_map(|(v, a, b)| Step::Sharded(v, a, b)),
        ]
    }

    /// A random f32 expression over `x[i, j]` (and `y[i, j]` when `binary`).
    pub fn expr(binary: bool) -> BoxedStrategy<String> {
        let mut leaves = vec![
            Just("x[i, j]".to_string()).boxed(),
            Just("x[i, j]".to_string()).boxed(),
            Just("0.5".to_string()).boxed(),
            Just("2".to_string()).boxed(),
            Just("i".to_string()).boxed(),
            Just("f32(j)".to_string()).boxed(),
        ];
        if binary {
            leaves.push(Just("y[i, j]".to_string()).boxed());
            leaves.push(Just("y[i, j]".to_string()).boxed());
        }
        proptest::strategy::Union::new(leaves)
            .prop_recursive(3, 24, 3, |e| {
                prop_oneof![
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} + {b})")),
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} * {b})")),
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("({a} - {b})")),
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("{a} / (abs({b}) + 1.0)")),
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("max({a}, {b})")),
                    (e.clone(), e.clone()).prop_map(|(a, b)| format!("min({a}, {b})")),
                    (e.clone(), e.clone(), e.clone(), e.clone())
                        .prop_map(|(a, b, c, d)| format!("select({a} > {b}, {c}, {d})")),
                    e.clone().prop_map(|a| format!("tanh({a})")),
                    e.clone().prop_map(|a| format!("sin({a})")),
                    e.clone().prop_map(|a| format!("(-{a})")),
                    e.clone().prop_map(|a| format!("f32(i32({a} * 4.0) % 3)")),
                ]
            })
            .boxed()
    }

    /// Two unary and two binary kernel bodies.
    pub fn kernels() -> impl Strategy<Value = Vec<String>> {
        (expr(false), expr(false), expr(true), expr(true)).prop_map(|(a, b, c, d)| vec![a, b, c, d])
    }

    pub fn build(steps: &[Step], kernels: &[String]) -> String {
        let mut ops = OPS.to_string();
        for (k, e) in kernels.iter().enumerate() {
            if k < 2 {
                ops.push_str(&format!(
                    "op @k{k}(x: f32[M, N]) -> (y: f32[M, N]) {{\n  y[i, j] = {e}\n}}\n"
                ));
            } else {
                ops.push_str(&format!(
                    "op @k{k}(x: f32[M, N], y: f32[M, N]) -> (z: f32[M, N]) {{\n  z[i, j] = {e}\n}}\n"
                ));
            }
        }
        let mut shapes: Vec<(i64, i64)> = vec![(3, 4)];
        let mut lines = vec!["  %v0 = rand seed 1 : f32[3, 4]".to_string()];
        let mut pins = Vec::new();
        for s in steps {
            let n = shapes.len();
            let name = format!("%v{n}");
            let pick = |i: &usize| i % n;
            let (line, shape) = match s {
                Step::Gen(k, a, b) => {
                    let g = ["zeros", "ones", "rand seed 9"][*k as usize];
                    (
                        format!("{name} = {g} : f32[{a}, {b}]"),
                        (*a as i64, *b as i64),
                    )
                }
                Step::Relu(i) => (
                    format!("{name} = apply @relu(%v{})", pick(i)),
                    shapes[pick(i)],
                ),
                Step::Affine(i) => (
                    format!("{name} = apply @affine(%v{})", pick(i)),
                    shapes[pick(i)],
                ),
                Step::RowSum(i) => (
                    format!("{name} = apply @rowsum(%v{})", pick(i)),
                    (shapes[pick(i)].0, 1),
                ),
                Step::Transpose(i) => (
                    format!("{name} = transpose %v{} [1, 0]", pick(i)),
                    (shapes[pick(i)].1, shapes[pick(i)].0),
                ),
                Step::Reverse(i, d) => (
                    format!("{name} = reverse %v{} [{}]", pick(i), u8::from(*d)),
                    shapes[pick(i)],
                ),
                Step::Slice(i, start, step) => {
                    let (r, c) = shapes[pick(i)];
                    let st = (*start as i64).min(c - 1);
                    let count = (c - st + *step as i64 - 1) / *step as i64;
                    (
                        format!("{name} = slice %v{} [0:{r}, {st}:{c}:{step}]", pick(i)),
                        (r, count),
                    )
                }
                Step::Concat(a, b) => {
                    let (a, b) = (pick(a), pick(b));
                    if shapes[a].1 == shapes[b].1 {
                        (
                            format!("{name} = concat %v{a}, %v{b} axis 0"),
                            (shapes[a].0 + shapes[b].0, shapes[a].1),
                        )
                    } else {
                        (format!("{name} = reverse %v{a} [0]"), shapes[a])
                    }
                }
                Step::Flatten(i) => {
                    let (r, c) = shapes[pick(i)];
                    lines.push(format!("  {name}.f = reshape %v{} [{}]", pick(i), r * c));
                    (format!("{name} = reshape {name}.f [{c}, {r}]"), (c, r))
                }
                Step::Kernel(i, k) => (
                    format!("{name} = apply @k{}(%v{})", k % 2, pick(i)),
                    shapes[pick(i)],
                ),
                Step::Kernel2(a, b, k) => {
                    let (a, b) = (pick(a), pick(b));
                    if shapes[a] == shapes[b] {
                        (
                            format!("{name} = apply @k{}(%v{a}, %v{b})", 2 + k % 2),
                            shapes[a],
                        )
                    } else {
                        (
                            format!("{name} = apply @k{}(%v{a}, %v{a})", 2 + k % 2),
                            shapes[a],
                        )
                    }
                }
                Step::Matmul(a, b) => {
                    let (a, b) = (pick(a), pick(b));
                    let ((r, k), (k2, c)) = (shapes[a], shapes[b]);
                    if k == k2 {
                        (format!("{name} = apply @matmul(%v{a}, %v{b})"), (r, c))
                    } else {
                        lines.push(format!("  {name}.t = transpose %v{a} [1, 0]"));
                        (format!("{name} = apply @matmul(%v{a}, {name}.t)"), (r, r))
                    }
                }
                Step::Softmax(i) => (
                    format!("{name} = apply @softmax(%v{})", pick(i)),
                    shapes[pick(i)],
                ),
                Step::RowNorm(i) => (
                    format!("{name} = apply @rownorm(%v{})", pick(i)),
                    shapes[pick(i)],
                ),
                Step::Quant(i) => (
                    format!("{name} = apply @quant(%v{})", pick(i)),
                    shapes[pick(i)],
                ),
                Step::Bias(i) => {
                    let (r, c) = shapes[pick(i)];
                    lines.push(format!("  {name}.b = rand seed {n} : f32[{c}]"));
                    lines.push(format!("  {name}.bb = broadcast {name}.b [{r}, {c}]"));
                    (
                        format!("{name} = apply @add2(%v{}, {name}.bb)", pick(i)),
                        (r, c),
                    )
                }
                Step::ColBias(i) => {
                    let (r, c) = shapes[pick(i)];
                    let v = pick(i);
                    lines.push(format!("  {name}.s = slice %v{v} [0:{r}, 0:1]"));
                    lines.push(format!("  {name}.q = squeeze {name}.s [1]"));
                    lines.push(format!("  {name}.u = unsqueeze {name}.q [1]"));
                    lines.push(format!("  {name}.bb = broadcast {name}.u [{r}, {c}]"));
                    (format!("{name} = apply @add2(%v{v}, {name}.bb)"), (r, c))
                }
                Step::Sharded(i, a, b) => {
                    // Two row shards of a chain of two ops, the second reading the first's
                    // shard directly (as the shard pass propagates), then the assembly.
                    let (r, c) = shapes[pick(i)];
                    let v = pick(i);
                    let ops = ["relu", "affine", "k0", "k1", "softmax", "rownorm"];
                    let (f, g) = (ops[*a as usize], ops[*b as usize]);
                    let h = (r + 1) / 2;
                    let parts: Vec<(i64, i64)> = if h < r {
                        vec![(0, h), (h, r)]
                    } else {
                        vec![(0, r)]
                    };
                    let mut outs = Vec::new();
                    for (k, &(lo, hi)) in parts.iter().enumerate() {
                        lines.push(format!("  {name}.x{k} = slice %v{v} [{lo}:{hi}, 0:{c}]"));
                        lines.push(format!(
                            "  {name}.a{k} = apply @{f}({name}.x{k}) @[{lo}:{hi}, 0:{c}] on {k}"
                        ));
                        lines.push(format!(
                            "  {name}.b{k} = apply @{g}({name}.a{k}) @[{lo}:{hi}, 0:{c}] on {k}"
                        ));
                        outs.push(format!("{name}.b{k}"));
                    }
                    if outs.len() == 1 {
                        (format!("{name} = reverse {} [0]", outs[0]), (r, c))
                    } else {
                        (
                            format!("{name} = concat {} axis 0", outs.join(", ")),
                            (r, c),
                        )
                    }
                }
                Step::Pin(i) => {
                    pins.push(pick(i));
                    (
                        format!("{name} = apply @relu(%v{})", pick(i)),
                        shapes[pick(i)],
                    )
                }
            };
            lines.push(format!("  {line}"));
            shapes.push(shape);
        }
        let last = shapes.len() - 1;
        let mut sinks = format!("  sink @out %v{last}\n  sink @first %v0\n");
        pins.sort_unstable();
        pins.dedup();
        for p in pins {
            sinks.push_str(&format!("  sink @pin{p} %v{p}\n"));
        }
        format!("{ops}graph @g {{\n{}\n{sinks}}}\n", lines.join("\n"))
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]
    #[test]
    fn random_graphs_keep_their_values(
        steps in proptest::collection::vec(gen::step(), 0..14),
        kernels in gen::kernels(),
        canon in any::<bool>(),
    ) {
        let src = gen::build(&steps, &kernels);
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

/// Over a fixed sample of random graphs, fusion removes a good share of the nodes.
#[test]
fn random_graphs_do_fuse() {
    let mut runner = TestRunner::deterministic();
    let strategy = (
        proptest::collection::vec(gen::step(), 4..14),
        gen::kernels(),
    );
    let (mut before, mut after, mut fused, mut folded, mut shards) = (0, 0, 0, 0, 0);
    for _ in 0..120 {
        let (steps, kernels) = strategy.new_tree(&mut runner).unwrap().current();
        let src = gen::build(&steps, &kernels);
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
