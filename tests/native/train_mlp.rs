//! `examples/train_mlp.teg` (a two-layer MLP regression, its gradients from `grad`, AdamW as
//! plain ops, 200 steps) against JAX: the loss of every step, read from the `--log-every 1`
//! lines, matches the one `jax.grad` gives (`tests/data/train/gen_mlp.py`, committed `.npy`
//! files) to 1e-4 relative in f64 and 1e-3 in f32, in the interpreter, the JIT and a compiled
//! program, and falls tenfold; the compiled program's final second-layer weights match JAX's
//! to the same tolerances. The f64 run is the example with every `f32` read as `f64`.

use std::path::{Path, PathBuf};
use std::process::Output;

use super::steps::{example, logged_losses, root, run_everywhere};

const STEPS: usize = 200;

fn data(dtype: &str) -> PathBuf {
    root().join("tests/data/train/mlp").join(dtype)
}

/// The elements of a float `.npy` file, as f64.
fn floats(path: &Path) -> Vec<f64> {
    match tapc_runtime::npy::read(path).unwrap().data {
        tapc_runtime::Data::F64(v) => v,
        tapc_runtime::Data::F32(v) => v.into_iter().map(f64::from).collect(),
        d => panic!(
            "{}: expected a float, found {:?}",
            path.display(),
            d.dtype()
        ),
    }
}

/// `|got - want| <= tol * |want|` elementwise; returns the largest relative error seen.
fn assert_rel(what: &str, got: &[f64], want: &[f64], tol: f64) -> f64 {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    let mut worst = 0.0f64;
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        let rel = (g - w).abs() / w.abs();
        assert!(
            rel <= tol,
            "{what}[{i}]: {g} against JAX's {w} ({rel:e} relative)"
        );
        worst = worst.max(rel);
    }
    worst
}

/// The example in `dtype`: the file itself for f32, a copy with every `f32` read as `f64`.
fn program(dtype: &str, dir: &Path) -> String {
    let file = example("train_mlp.teg");
    if dtype == "f32" {
        return file;
    }
    let src = std::fs::read_to_string(&file).unwrap();
    let copy = dir.join("train_mlp_f64.teg");
    std::fs::write(&copy, src.replace("f32", "f64")).unwrap();
    copy.display().to_string()
}

/// Checks one run: exit 0, a loss logged per step within `tol` of JAX's, falling tenfold.
fn check_run(what: &str, o: &Output, dtype: &str, tol: f64) {
    let values = logged_losses(what, o, STEPS);
    let want = floats(&data(dtype).join("expected_loss.npy"));
    let worst = assert_rel(&format!("{what} loss"), &values, &want, tol);
    eprintln!("{what}: {STEPS} losses within {worst:e} relative of JAX's");
    assert!(values[STEPS - 1] < values[0] / 10.0, "{what}: {values:?}");
}

fn check_dtype(dtype: &str, tol: f64) {
    let dir = crate::common::scratch(&format!("train-mlp-{dtype}"));
    let file = program(dtype, &dir);
    let input_dir = data(dtype).display().to_string();
    let mut out = PathBuf::new();
    for (runtime, o, o_dir) in run_everywhere(&file, &input_dir, &dir, STEPS) {
        check_run(&format!("{dtype} {runtime}"), &o, dtype, tol);
        out = o_dir;
    }
    // The compiled program's final second-layer weights too, at the same tolerance relative
    // to the largest of them.
    let w2 = floats(&out.join("w2.npy"));
    let want = floats(&data(dtype).join("expected_w2.npy"));
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (i, (g, w)) in w2.iter().zip(&want).enumerate() {
        assert!(
            (g - w).abs() <= tol * scale,
            "{dtype} w2[{i}]: {g} against JAX's {w}"
        );
    }
}

#[test]
fn train_mlp_f64_losses_match_jax_in_every_runtime() {
    check_dtype("f64", 1e-4);
}

#[test]
fn train_mlp_f32_losses_match_jax_in_every_runtime() {
    check_dtype("f32", 1e-3);
}
