//! `examples/transformer.teg` (a GPT-2-small-sized block on 8 tokens) against the numpy
//! reference committed in `tests/data/transformer` (`gen.py` says how it was made): in the
//! interpreter, natively with 1 and 2 threads, and natively after the fusing and sharding
//! pipelines; and its head split (a reshape of a column slice) is a view, not a copy.

use crate::common;

use std::collections::HashMap;
use std::path::PathBuf;
use tapc::passes::manager::{run_pipeline, RunConfig};
use tapc_runtime::exec::Options;
use tapc_runtime::{npy, Tensor};

/// Normwise: max |got − want| / max |want|. numpy computes in f64, TEG in f32.
const TOLERANCE: f64 = 1e-5;

fn data() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/transformer")
}

fn inputs() -> HashMap<String, Tensor> {
    HashMap::from([("x".to_string(), npy::read(&data().join("x.npy")).unwrap())])
}

fn check(what: &str, sinks: &[(String, Tensor)]) {
    let want = common::f64s(&npy::read(&data().join("expected_y.npy")).unwrap());
    let (name, got) = &sinks[0];
    assert_eq!(name, "y", "{what}");
    assert_eq!(got.shape, vec![8, 768], "{what}");
    let got = common::f64s(got);
    let err = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f64::max);
    let scale = want.iter().fold(0.0, |m: f64, b| m.max(b.abs()));
    assert!(
        err / scale < TOLERANCE,
        "{what}: normwise error {} against numpy",
        err / scale
    );
}

/// The interpreter matches numpy, and native code (1 and 2 threads) matches the interpreter
/// elementwise within the differential tests' tolerance (`tests/native.rs`).
#[test]
fn the_transformer_block_matches_numpy_in_the_interpreter_and_natively() {
    let (m, facts) = common::compile_ok("transformer", &common::example("transformer.teg"));
    let ins = inputs();
    let want = tapc::interp::run(&m, &m.graphs[0], &facts[0], &ins).unwrap();
    check("interpreter", &want);
    let want = common::f64s(&want[0].1);
    for threads in [1, 2] {
        let opts = Options {
            threads,
            record: false,
        };
        let (got, _) =
            tapc::codegen::run_jit(&m, 0, &facts[0], &ins, &Default::default(), &opts).unwrap();
        for (i, (g, w)) in common::f64s(&got[0].1).iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-4 * w.abs() + 1e-5,
                "element {i}, {threads} threads: native {g:e}, interpreter {w:e}"
            );
        }
    }
}

#[test]
fn the_transformer_block_matches_numpy_natively_through_every_pipeline() {
    let src = common::example("transformer.teg");
    let ins = inputs();
    for pipeline in [
        tapc::passes::manager::DEFAULT_PIPELINE,
        "canonicalize,fuse,canonicalize",
        "canonicalize,shard{parts=2},fuse",
    ] {
        let (mut m, facts) = common::compile_ok("transformer", &src);
        let mut log = String::new();
        let cx = run_pipeline(&mut m, facts, pipeline, &RunConfig::default(), &mut log)
            .unwrap_or_else(|d| panic!("{pipeline} failed: {}", d.message));
        let runs = tapc::codegen::with_jit(&m, 0, &cx.facts[0], &Default::default(), |p| {
            [1, 2].map(|threads| {
                let opts = Options {
                    threads,
                    record: false,
                };
                (threads, p.run(&ins, &opts).map(|r| r.0))
            })
        })
        .unwrap_or_else(|d| panic!("{pipeline}: {}", d.message));
        for (threads, r) in runs {
            let what = format!("native after {pipeline}, {threads} threads");
            check(&what, &r.unwrap_or_else(|e| panic!("{what}: {e}")));
        }
    }
}

/// Splitting a [T, 3D] projection into heads (slice columns, reshape to [T, H, E]) and merging
/// them back are strided views: the schedule has no copy task for any reshape.
#[test]
fn the_head_split_and_merge_are_views_not_copies() {
    let (m, facts) = common::compile_ok("transformer", &common::example("transformer.teg"));
    let names = tapc::codegen::with_jit(&m, 0, &facts[0], &Default::default(), |p| {
        p.plan
            .tasks
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    })
    .unwrap();
    assert!(names.iter().any(|n| n.contains("@attend")), "{names:#?}");
    let copies: Vec<_> = names.iter().filter(|n| n.contains("reshape")).collect();
    assert!(copies.is_empty(), "reshapes copied: {copies:#?}");
}
