//! `shard` keeps every sunk value: bit-identical when sharding parallel dimensions (each output
//! element is computed by the same expression in the same order), and within a stated bound
//! when sharding a reduction reassociates float sums. Sharded output re-parses and verifies.

use crate::common;
use common::graphgen::{build, step};
use common::{before_after, mlp_inputs, Sinks};
use proptest::prelude::*;
use std::collections::HashMap;

/// Largest |a - b| relative to the largest |b|, over every sink.
fn max_rel_err(a: &Sinks, b: &Sinks) -> f64 {
    let mut worst: f64 = 0.0;
    for (x, y) in a.iter().zip(b) {
        for (k, t) in x {
            let (p, q) = (common::f64s(t), common::f64s(&y[k]));
            let scale = q.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-30);
            worst = worst.max(
                p.iter()
                    .zip(&q)
                    .fold(0.0f64, |m, (u, v)| m.max((u - v).abs()))
                    / scale,
            );
        }
    }
    worst
}

#[test]
fn mlp_sharded_four_ways_keeps_its_values_and_assembles_once() {
    let pipeline = "canonicalize,shard{parts=4},canonicalize";
    let (b, a, printed) = before_after(&common::example("mlp.teg"), pipeline, &mlp_inputs());
    assert_eq!(b, a, "{printed}");
    // Batch-sharded end to end: only the final logits are assembled.
    assert_eq!(printed.matches("concat").count(), 1, "{printed}");
    assert_eq!(printed.matches("@[").count(), 12, "{printed}");
}

#[test]
fn every_example_and_dimension_keeps_its_values() {
    for name in ["conv.teg", "softmax.teg", "attention.teg"] {
        for pipeline in [
            "shard{parts=2}",
            "shard{parts=3},canonicalize",
            "shard{parts=4,dim=1}",
        ] {
            let (b, a, printed) = before_after(&common::example(name), pipeline, &HashMap::new());
            assert_eq!(b, a, "{name} with {pipeline}:\n{printed}");
        }
    }
}

#[test]
fn reduction_sharding_is_partial_plus_combine() {
    let src = "op @linear(x: f32[B, K], w: f32[K, N], b: f32[N]) -> (y: f32[B, N]) {
      y[i, j] = sum[k](x[i, k] * w[k, j]) + b[j]
    }
    op @rowmax(x: f32[M, N]) -> (y: f32[M]) {
      y[i] = max[j](x[i, j])
    }
    graph @g {
      %x = rand seed 1 : f32[8, 30]
      %w = rand seed 2 : f32[30, 6]
      %b = rand seed 3 : f32[6]
      %y = apply @linear(%x, %w, %b)
      %m = apply @rowmax(%x)
      sink @y %y
      sink @m %m
    }";
    let (b, a, printed) = before_after(src, "shard{parts=3,dim=k}", &HashMap::new());
    assert!(
        printed.contains("op @linear.partial.k")
            && printed.contains("op @linear.epilogue.k")
            && printed.contains("@tapc.sum.f32"),
        "{printed}"
    );
    assert!(max_rel_err(&a, &b) < 1e-6, "{}", max_rel_err(&a, &b));
    let (b, a, printed) = before_after(src, "shard{parts=3,dim=j}", &HashMap::new());
    assert!(printed.contains("@tapc.max.f32"), "{printed}");
    assert_eq!(b[0]["m"], a[0]["m"], "max is exact");
}

#[test]
fn softmax_on_columns_is_split_into_partial_max_and_sum() {
    for parts in 2..5 {
        let (b, a, printed) = before_after(
            &common::example("softmax.teg"),
            &format!("shard{{parts={parts},dim=j}},canonicalize"),
            &HashMap::new(),
        );
        assert!(
            printed.contains("@tapc.max.f32") && printed.contains("@tapc.sum.f32"),
            "{printed}"
        );
        assert!(
            max_rel_err(&a, &b) < 1e-6,
            "{parts} parts: {}",
            max_rel_err(&a, &b)
        );
    }
}

#[test]
fn uneven_splits_have_no_empty_shards() {
    assert_eq!(
        tapc::passes::shard::split(10, 4),
        vec![(0, 3), (3, 6), (6, 8), (8, 10)]
    );
    assert_eq!(
        tapc::passes::shard::split(3, 8),
        vec![(0, 1), (1, 2), (2, 3)]
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]
    #[test]
    fn random_graphs_keep_their_values(steps in proptest::collection::vec(step(), 0..10), parts in 2i64..5) {
        let src = build(&steps);
        let pipeline = format!("shard{{parts={parts}}},canonicalize");
        let (b, a, printed) = before_after(&src, &pipeline, &HashMap::new());
        prop_assert_eq!(b, a, "{}", printed);
    }
}

/// A grid (`dim=i*j, parts=RxC`) shards two parallel variables at once: R×C blocks, each an
/// apply over its rows × columns reading only its row block of `a` and column block of `b`,
/// assembled row by row. Bit-identical values at odd and prime sizes, including grids with
/// more parts than a dimension has points and grids with more than 8 shards.
#[test]
fn grids_shard_two_variables_and_keep_their_values() {
    let mut checked = 0;
    for (m, k, n, r, c) in [
        (17, 5, 13, 2, 3),
        (7, 3, 2, 3, 4),
        (1, 4, 9, 2, 2),
        (31, 8, 29, 4, 3),
    ] {
        let src = format!(
            "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
op @relu(x: f32[..S]) -> (y: f32[..S]) {{
  y[..i] = max(x[..i], 0.0)
}}
graph @g {{
  %a = source @a : f32[{m}, {k}]
  %b = source @b : f32[{k}, {n}]
  %c = apply @mm(%a, %b)
  %d = apply @relu(%c)
  sink @d %d
}}"
        );
        let (m0, _) = common::compile_ok("grid", &src);
        let ins = common::inputs(&m0, 0);
        let pipeline = format!("shard{{parts={r}x{c},dim=i*j}},canonicalize");
        let (before, after, printed) = before_after(&src, &pipeline, &ins);
        assert_eq!(before, after, "{pipeline}\n{printed}");
        let blocks = r.min(m) * c.min(n);
        // @mm is a grid of blocks; @relu's `..i` has no `j` and stays whole.
        assert_eq!(printed.matches("apply @mm").count(), blocks, "{printed}");
        assert_eq!(printed.matches("apply @relu").count(), 1, "{printed}");
        let nodes = (0..blocks)
            .filter(|p| printed.contains(&format!(" on {p} ")))
            .count();
        assert_eq!(nodes, blocks, "one node per block:\n{printed}");
        checked += 1;
    }
    assert_eq!(checked, 4);
}

#[test]
fn a_grid_over_a_reduction_variable_or_without_its_parts_is_refused() {
    let mlp = format!("{}/examples/mlp.teg", env!("CARGO_MANIFEST_DIR"));
    for (opts, want) in [
        ("parts=2x2,dim=i*k", "`k` is a reduction variable"),
        ("parts=2,dim=i*j", "give parts per variable"),
        ("parts=2x2", "name its variables"),
        ("parts=2x2,dim=i*i", "two different variables"),
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_tapc"))
            .args(["opt", &mlp, "--passes", &format!("shard{{{opts}}}")])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{opts}: {err}");
        assert!(err.contains(want), "{opts}: {err}");
    }
}

/// `examples/grad_mlp.teg` (its loss a mean written `/ f32(B * N)`, its gradients from `grad`)
/// sharded along the batch `i`: the loss's epilogue keeps the whole `B * N` as a literal, and
/// `grad`'s ops (symbolic signatures, the forward's batch variable kept in the weight
/// gradients' sums) split like the forward: the weight and bias gradients as partial sums
/// plus a combine. The values are the unsharded ones within a reassociated sum's rounding.
/// Before: E0106 (`grad`'s concrete signatures could not be instantiated on a block), and
/// with those fixed, E0105 (the epilogue read `B` with no port binding it).
#[test]
fn grad_mlp_splits_along_the_batch_with_its_mean_and_gradients() {
    let src = common::example("grad_mlp.teg");
    let (m, _) = common::compile_ok("grad_mlp.teg", &src);
    let inputs = common::inputs(&m, 0);
    let pipeline = "grad,canonicalize,shard{parts=2,dim=i},canonicalize";
    let (b, a, printed) = before_after(&src, pipeline, &inputs);
    assert_eq!(b[0].len(), 5, "the loss and four gradients");
    let err = max_rel_err(&a, &b);
    assert!(err < 1e-5, "{err}:\n{printed}");
    assert!(printed.contains("l[] = p1[] / f32(64 * 10)"), "{printed}");
    for g in ["dw1", "db1", "dw2", "db2", "loss"] {
        let combined = format!("%{g}.iacc1 = apply @tapc.sum.f32(%{g}.i0, %{g}.i1)");
        assert!(printed.contains(&combined), "{g}:\n{printed}");
    }
}
