//! In-place buffer reuse (issue 22, `codegen::reuse`): which tasks write their output into an
//! input's buffer, that those programs give the interpreter's values on 1 and 2 threads, and
//! that the planned peak (`memory::peak`, what the pre-run check and `--time` use) equals the
//! peak the executor counts from its own allocations on every example.

use crate::common;

use std::collections::HashMap;
use tapc::codegen::schedule::{self, Schedule};
use tapc::codegen::{reuse, target, with_jit};
use tapc_runtime::exec::Options;
use tapc_runtime::memory;
use tapc_runtime::plan::Plan;
use tapc_runtime::Tensor;

/// The examples in `examples/` when this test was written; a new one is checked too.
const EXAMPLES: usize = 11;

/// Native sinks within the differential tests' tolerance of the interpreter's.
fn assert_close(what: &str, got: &[(String, Tensor)], want: &HashMap<String, Tensor>) {
    assert_eq!(got.len(), want.len(), "{what}: sinks");
    for (name, t) in got {
        let w = common::f64s(&want[name]);
        assert_eq!(t.shape, want[name].shape, "{what}: @{name}");
        for (i, (g, w)) in common::f64s(t).iter().zip(&w).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs() + 1e-4 || (g.is_nan() && w.is_nan()),
                "{what}: @{name}[{i}] native {g:e}, interpreter {w:e}"
            );
        }
    }
}

/// The tasks of `plan` whose output (their last argument) is in the buffer of an input.
pub(crate) fn in_place_tasks(plan: &Plan) -> Vec<String> {
    (plan.tasks.iter())
        .filter(|t| match t.args.split_last() {
            Some((out, ins)) => ins.iter().any(|a| a.buffer == out.buffer),
            None => false,
        })
        .map(|t| t.name.clone())
        .collect()
}

/// The inputs of `name`: train_transformer.teg's committed ones (from random weights of
/// the test's range, its 2-layer training step drifts from the interpreter by more than the
/// differential tolerance with or without reuse), else [`common::inputs`].
fn inputs_for(name: &str, m: &tapc::ir::Module) -> HashMap<String, Tensor> {
    if name != "train_transformer.teg" {
        return small_ints(common::inputs(m, 0));
    }
    let dir = format!(
        "{}/tests/data/train/transformer",
        env!("CARGO_MANIFEST_DIR")
    );
    (m.graphs[0].sources())
        .map(|(n, _, _)| {
            let t = tapc_runtime::npy::read(std::path::Path::new(&format!("{dir}/{n}.npy")));
            (n.to_string(), t.unwrap())
        })
        .collect()
}

/// `inputs` with integers reduced to [-8, 8): indices valid in any dimension of 8 or more
/// (train_transformer.teg's token ids index a vocabulary of 16).
fn small_ints(inputs: HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    let small = |t: Tensor| match t.data {
        tapc_runtime::Data::I64(v) => {
            let data = tapc_runtime::Data::I64(v.iter().map(|x| x % 8).collect());
            Tensor::new(t.shape, data).unwrap()
        }
        _ => t,
    };
    inputs.into_iter().map(|(k, t)| (k, small(t))).collect()
}

/// Runs graph 0 of `src` (after the default pipeline) natively on 1 and 2 threads against
/// the interpreter; returns the in-place tasks and, per thread count, (planned, counted) peak.
pub(crate) fn run_checked(name: &str, src: &str) -> (Vec<String>, Vec<(u64, u64)>) {
    let (m, facts) = common::after_pipeline(name, src, tapc::passes::manager::DEFAULT_PIPELINE);
    let ins = inputs_for(name, &m);
    let want = common::run(&m, &facts, 0, &ins);
    with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        let planned = memory::peak(p.plan).0;
        let peaks = [1, 2].map(|threads| {
            let opts = Options {
                threads,
                record: false,
            };
            let what = format!("{name}, {threads} thread(s)");
            let (got, report) = p.run(&ins, &opts).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_close(&what, &got, &want);
            (planned, report.peak_bytes)
        });
        (in_place_tasks(p.plan), peaks.to_vec())
    })
    .unwrap_or_else(|d| panic!("{name}: {}", d.message))
}

#[test]
fn every_example_plans_the_peak_the_executor_counts_and_matches_the_interpreter() {
    let dir = format!("{}/examples", env!("CARGO_MANIFEST_DIR"));
    let mut names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".teg"))
        .collect();
    names.sort();
    assert!(
        names.len() >= EXAMPLES,
        "only {} examples: {names:?}",
        names.len()
    );
    let mut in_place = 0;
    for name in &names {
        let (tasks, peaks) = run_checked(name, &common::example(name));
        in_place += tasks.len();
        eprintln!(
            "{name}: {} in place; (planned, counted) peaks on 1, 2 threads: {peaks:?}",
            tasks.len()
        );
        for (threads, (planned, counted)) in [1, 2].iter().zip(peaks) {
            let off = (planned as f64 - counted as f64).abs() / counted.max(1) as f64;
            assert!(
                off <= 0.05,
                "{name}, {threads} thread(s): planned peak {planned} B, the executor counted {counted} B"
            );
        }
    }
    // The transformer's softmax, residual adds and GELU alone write in place.
    assert!(
        in_place >= 4,
        "{in_place} in-place tasks over {} examples",
        names.len()
    );
}

/// The schedule of graph 0 of `src` as `tapc FILE -o prog` builds it, before reuse.
pub(crate) fn schedule_of(src: &str) -> Schedule {
    let (m, facts) = common::compile_ok("graph", src);
    let lanes = target::host().unwrap().lanes;
    schedule::build(&m, &m.graphs[0], &facts[0], lanes).unwrap()
}

/// The block at 2048 tokens (the benchmark's size): the softmax writes into the scores'
/// buffer, so the plan's peak drops by at least one [12, 2048, 2048] f32 tensor (192 MiB).
#[test]
fn the_transformer_block_at_2048_tokens_no_longer_holds_scores_and_softmax_at_once() {
    let src = common::example("transformer.teg").replace("f32[8, 768]", "f32[2048, 768]");
    let mut s = schedule_of(&src);
    let before = memory::peak(&s.plan).0;
    let n = reuse::in_place(&mut s);
    let after = memory::peak(&s.plan).0;
    let tasks = in_place_tasks(&s.plan);
    assert_eq!(n, tasks.len(), "{tasks:#?}");
    for op in ["@softmax", "@gelu", "@add"] {
        assert!(tasks.iter().any(|t| t.contains(op)), "{op}: {tasks:#?}");
    }
    let scores = 12 * 2048 * 2048 * 4;
    let (_, live) = memory::peak(&s.plan);
    let big: Vec<String> = (live.iter())
        .filter(|&&b| s.plan.buffers[b as usize].bytes >= scores)
        .map(|&b| memory::buffer_name(&s.plan, b))
        .collect();
    assert_eq!(big.len(), 1, "live at the peak: {big:?}");
    assert!(
        after < before - scores * 9 / 10,
        "planned peak {after} B with reuse, {before} B without"
    );
    s.plan.validate(s.kernels.len()).unwrap();
}

const SOFTMAX: &str = "
op @softmax(x: f32[R, S]) -> (y: f32[R, S]) {
  m[r] = max[u](x[r, u])
  z[r] = sum[u](exp(x[r, u] - m[r]))
  y[r, u] = exp(x[r, u] - m[r]) / z[r]
}
op @scale(x: f32[..S]) -> (y: f32[..S]) {
  y[..i] = x[..i] * 3.0 - 1.0
}
";

/// A softmax of a computed tensor at edge shapes writes into its input's buffer and gives
/// the interpreter's values on 1 and 2 threads.
#[test]
fn softmax_in_place_matches_the_interpreter_at_edge_shapes() {
    for (r, s) in [
        (1, 1),
        (3, 5),
        (8, 9),
        (15, 17),
        (31, 33),
        (64, 1000),
        (5, 4099),
    ] {
        let src = format!(
            "{SOFTMAX}graph @g {{\n  %x = source @x : f32[{r}, {s}]\n  %a = apply @scale(%x)\n  %p = apply @softmax(%a)\n  sink @p %p\n}}\n"
        );
        let (tasks, _) = run_checked(&format!("softmax {r}x{s}"), &src);
        assert_eq!(tasks.len(), 1, "{r}x{s}: {tasks:?}");
        assert!(tasks[0].contains("@softmax"), "{tasks:?}");
    }
}

/// What must never be written in place: a source (caller memory), a value a sink reads, a
/// value a later task reads, a transposed view, and a matmul's operand (read across a row it
/// writes). The chain's last reader still is.
#[test]
fn sources_sinks_later_readers_transposes_and_matmuls_are_not_overwritten() {
    let ops = format!(
        "{SOFTMAX}
op @add(a: f32[..S], b: f32[..S]) -> (c: f32[..S]) {{
  c[..i] = a[..i] + b[..i]
}}
op @mm(a: f32[N, N], b: f32[N, N]) -> (c: f32[N, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
"
    );
    let cases = [
        // A source is only read.
        ("%p = apply @scale(%x)\n  sink @p %p", vec![]),
        // %a is a sink: its softmax gets a buffer of its own.
        (
            "%a = apply @scale(%x)\n  %p = apply @softmax(%a)\n  sink @a %a\n  sink @p %p",
            vec![],
        ),
        // %a is read again after the softmax; the add is its last reader.
        (
            "%a = apply @scale(%x)\n  %p = apply @softmax(%a)\n  %q = apply @add(%p, %a)\n  sink @q %q",
            vec!["apply @add"],
        ),
        // A transposed read of %a.
        (
            "%a = apply @scale(%x)\n  %t = transpose %a [1, 0]\n  %q = apply @add(%t, %x)\n  sink @q %q",
            vec![],
        ),
        // A matmul reads a whole row of %a for each element it writes.
        (
            "%a = apply @scale(%x)\n  %q = apply @mm(%a, %x)\n  sink @q %q",
            vec![],
        ),
        // add(%a, %a): the buffer is two arguments of the task.
        ("%a = apply @scale(%x)\n  %q = apply @add(%a, %a)\n  sink @q %q", vec![]),
    ];
    for (body, want) in cases {
        let src = format!("{ops}graph @g {{\n  %x = source @x : f32[7, 7]\n  {body}\n}}\n");
        let (tasks, _) = run_checked(body, &src);
        let ok =
            tasks.len() == want.len() && tasks.iter().zip(&want).all(|(t, w)| t.starts_with(w));
        assert!(ok, "{body}: in place {tasks:?}, want {want:?}");
    }
}

/// A sharded apply reads halos of its neighbours' rows (and its shard is a region of a
/// concat): no shard writes in place, after the shard pass, while the values still match.
#[test]
fn shards_never_write_in_place() {
    let src = common::example("transformer.teg");
    let pipeline = "canonicalize,shard{parts=2},fuse";
    let (m, facts) = common::after_pipeline("transformer", &src, pipeline);
    let lanes = target::host().unwrap().lanes;
    let mut s = schedule::build(&m, &m.graphs[0], &facts[0], lanes).unwrap();
    let shards = (s.plan.tasks.iter())
        .filter(|t| t.name.contains(" @["))
        .count();
    assert!(shards > 0, "no shards after {pipeline}");
    reuse::in_place(&mut s);
    let tasks = in_place_tasks(&s.plan);
    assert!(!tasks.iter().any(|t| t.contains(" @[")), "{tasks:#?}");
    s.plan.validate(s.kernels.len()).unwrap();
}
