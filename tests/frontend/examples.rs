//! The examples: they parse, verify, print/re-parse identically and run; the MLP matches numpy.

use crate::common;
use common::*;
use std::collections::HashMap;
use tapc::print::print_module;
use tapc_runtime::npy;

const EXAMPLES: &[&str] = &[
    "mlp.teg",
    "conv.teg",
    "softmax.teg",
    "attention.teg",
    "transformer.teg",
    "tour.teg",
    "sgd_momentum.teg",
    "adamw.teg",
    "grad_mlp.teg",
];

#[test]
fn examples_round_trip_through_the_printer() {
    for name in EXAMPLES {
        let (m, _) = compile_ok(name, &example(name));
        let printed = print_module(&m);
        let (m2, _) = compile_ok(&format!("printed {name}"), &printed);
        assert_eq!(m, m2, "{name}: parse(print(m)) != m");
        assert_eq!(
            printed,
            print_module(&m2),
            "{name}: printing is not a fixed point"
        );
    }
}

fn mlp_inputs() -> HashMap<String, tapc_runtime::Tensor> {
    let dir = format!("{}/tests/data/mlp", env!("CARGO_MANIFEST_DIR"));
    ["x", "w1", "b1", "w2", "b2"]
        .iter()
        .map(|n| {
            (
                n.to_string(),
                npy::read(std::path::Path::new(&format!("{dir}/{n}.npy"))).expect("fixture"),
            )
        })
        .collect()
}

/// Normwise relative error: max |a - b| / max |b|.
fn rel_err(a: &[f64], b: &[f64]) -> f64 {
    assert_eq!(a.len(), b.len());
    let num = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    num / b.iter().map(|y| y.abs()).fold(0.0, f64::max)
}

#[test]
fn mlp_matches_numpy_within_1e_5() {
    let (m, facts) = compile_ok("mlp.teg", &example("mlp.teg"));
    let sinks = run(&m, &facts, 0, &mlp_inputs());
    let dir = format!("{}/tests/data/mlp", env!("CARGO_MANIFEST_DIR"));
    for name in ["logits", "sampled"] {
        let want = npy::read(std::path::Path::new(&format!("{dir}/expected_{name}.npy"))).unwrap();
        let got = &sinks[name];
        assert_eq!(got.shape, want.shape, "{name}");
        let e = rel_err(&f64s(got), &f64s(&want));
        assert!(e < 1e-5, "{name}: relative error {e}");
    }
}

#[test]
fn every_example_runs_in_the_interpreter() {
    for name in ["conv.teg", "softmax.teg", "attention.teg", "tour.teg"] {
        let (m, facts) = compile_ok(name, &example(name));
        let sinks = run(&m, &facts, 0, &HashMap::new());
        assert!(!sinks.is_empty(), "{name} has sinks");
        for (s, t) in &sinks {
            assert!(
                f64s(t).iter().all(|v| v.is_finite()),
                "{name}: @{s} has non-finite values"
            );
        }
    }
}

#[test]
fn softmax_rows_sum_to_one_and_conv_shape_follows_the_stride() {
    let (m, facts) = compile_ok("softmax.teg", &example("softmax.teg"));
    let p = &run(&m, &facts, 0, &HashMap::new())["probs"];
    for row in f64s(p).chunks(32) {
        assert!((row.iter().sum::<f64>() - 1.0).abs() < 1e-5);
    }
    let (m, facts) = compile_ok("conv.teg", &example("conv.teg"));
    // (16 + 2 padding - 3) / 2 + 1 = 8
    assert_eq!(
        run(&m, &facts, 0, &HashMap::new())["features"].shape,
        vec![1, 4, 8, 8]
    );
}
