//! Shared steps: load a case directory, import it through the CLI, run the TEG (interpreted,
//! JIT, as a compiled program, or after a pass pipeline) and compare the sinks with
//! onnxruntime's outputs.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use tapc_runtime::{npy, Tensor};

/// The largest error accepted, relative to the reference's largest magnitude (floats); other
/// dtypes must be equal.
pub const MAX_REL_ERR: f64 = 1e-4;

/// A case: a model, its inputs, onnxruntime's outputs, and `--input-shape` arguments.
#[derive(Clone)]
pub struct Case {
    pub name: String,
    pub model: PathBuf,
    pub inputs: Vec<(String, PathBuf)>,
    pub refs: Vec<(String, Tensor)>,
    pub shapes: Vec<String>,
}

pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx")
}

/// Reads the case in `dir` (model.onnx, in_NAME.npy, ref_NAME.npy, input_shapes.txt).
pub fn case(dir: &Path) -> Case {
    let mut inputs = Vec::new();
    let mut refs = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        let f = p.file_name().unwrap().to_string_lossy().into_owned();
        if let Some(n) = f.strip_prefix("in_").and_then(|s| s.strip_suffix(".npy")) {
            inputs.push((n.to_string(), p.clone()));
        } else if let Some(n) = f.strip_prefix("ref_").and_then(|s| s.strip_suffix(".npy")) {
            refs.push((n.to_string(), npy::read(&p).unwrap()));
        }
    }
    let shapes = std::fs::read_to_string(dir.join("input_shapes.txt"))
        .map(|s| s.lines().map(str::to_string).collect())
        .unwrap_or_default();
    Case {
        name: dir.file_name().unwrap().to_string_lossy().into_owned(),
        model: dir.join("model.onnx"),
        inputs,
        refs,
        shapes,
    }
}

/// Every case directory under `tests/data/onnx/SUB`, sorted.
pub fn cases(sub: &str) -> Vec<Case> {
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(data_dir().join(sub))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs.iter().map(|d| case(d)).collect()
}

/// Runs `tapc ARGS` in-process; panics with its stderr unless it exits 0.
pub fn tapc(args: &[&str]) -> String {
    let o = tapc::driver::run(args);
    assert_eq!(o.code, 0, "tapc {}:\n{}", args.join(" "), o.stderr);
    o.stdout
}

/// `tapc import` of the case into `work` (m.teg and the weights beside it).
pub fn import(c: &Case, work: &Path) -> PathBuf {
    std::fs::create_dir_all(work).unwrap();
    let teg = work.join("m.teg");
    let mut args = vec!["import".to_string(), s(&c.model), "-o".into(), s(&teg)];
    for sh in &c.shapes {
        args.extend(["--input-shape".to_string(), sh.clone()]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    tapc(&refs);
    teg
}

pub fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

/// `--input NAME=PATH` for each input, and `--input-dir` for the weights.
pub fn input_args(c: &Case, weights: &Path) -> Vec<String> {
    let mut a = vec!["--input-dir".to_string(), s(weights)];
    for (n, p) in &c.inputs {
        a.extend([
            "--input".to_string(),
            format!("{}={}", tapc::import::onnx::lower::ident(n), s(p)),
        ]);
    }
    a
}

/// `tapc run TEG MODE ...` into `out`.
pub fn run(c: &Case, teg: &Path, mode: &str, out: &Path) {
    let mut args = vec![
        "run".to_string(),
        s(teg),
        mode.to_string(),
        "--out-dir".into(),
        s(out),
    ];
    args.extend(input_args(c, teg.parent().unwrap()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    std::fs::create_dir_all(out).unwrap();
    tapc(&refs);
}

/// The sinks in `out` against the case's references; the number of outputs compared.
pub fn compare(c: &Case, out: &Path, how: &str) -> usize {
    assert!(!c.refs.is_empty(), "{}: no reference outputs", c.name);
    if let Err(e) = differences(c, out, Tol::Scaled(MAX_REL_ERR)) {
        panic!("{} ({how}): {e}", c.name);
    }
    c.refs.len()
}

/// How close float outputs must be: within a fraction of the reference's largest magnitude,
/// or elementwise as numpy's `allclose` (NaN equal to NaN, as the ONNX backend tests compare).
#[derive(Clone, Copy)]
pub enum Tol {
    Scaled(f64),
    AllClose { rtol: f64, atol: f64 },
}

impl Tol {
    /// `AllClose` at least 4 units in the last place of a 16-bit float: TEG rounds f16 and bf16
    /// after every operation (docs/teg.md §12) where a reference computes in f32 and rounds once.
    fn for_dtype(self, dtype: tapc_runtime::DType) -> Tol {
        let eps = match dtype {
            tapc_runtime::DType::F16 => 2f64.powi(-10),
            tapc_runtime::DType::BF16 => 2f64.powi(-7),
            _ => return self,
        };
        match self {
            Tol::AllClose { rtol, atol } => Tol::AllClose {
                rtol: rtol.max(4.0 * eps),
                atol: atol.max(4.0 * eps * 2f64.powi(-14)),
            },
            scaled => scaled,
        }
    }
}

/// The first sink in `out` that differs from the case's reference, as a message.
pub fn differences(c: &Case, out: &Path, tol: Tol) -> Result<(), String> {
    for (name, r) in &c.refs {
        let path = out.join(format!("{}.npy", tapc::import::onnx::lower::ident(name)));
        let got =
            npy::read_expecting(&path, name, r.dtype(), &r.shape).map_err(|e| e.to_string())?;
        let (g, w) = (crate::common::f64s(&got), crate::common::f64s(r));
        let bad = if r.dtype().is_float() {
            float_error(&g, &w, tol.for_dtype(r.dtype()))
        } else {
            (g != w).then(|| "values differ".to_string())
        };
        if let Some(e) = bad {
            return Err(format!("{name}: {e}"));
        }
    }
    Ok(())
}

fn float_error(g: &[f64], w: &[f64], tol: Tol) -> Option<String> {
    match tol {
        Tol::Scaled(max) => {
            let scale = w.iter().fold(0f64, |m, x| m.max(x.abs())).max(1e-30);
            let err = g
                .iter()
                .zip(w)
                .map(|(a, b)| (a - b).abs())
                .fold(0f64, f64::max)
                / scale;
            (err > max).then(|| format!("max relative error {err:e}"))
        }
        Tol::AllClose { rtol, atol } => {
            let close = |a: f64, b: f64| {
                a == b || (a.is_nan() && b.is_nan()) || (a - b).abs() <= atol + rtol * b.abs()
            };
            let bad = g.iter().zip(w).position(|(&a, &b)| !close(a, b))?;
            Some(format!("element {bad}: {} against {}", g[bad], w[bad]))
        }
    }
}

/// Checks the case imported at `teg` in each of `modes` (`--interp`, `--native`); returns
/// the outputs compared.
pub fn check_modes(c: &Case, teg: &Path, modes: &[&str]) -> usize {
    let mut n = 0;
    for mode in modes {
        let out = teg.parent().unwrap().join(format!("out{mode}"));
        run(c, teg, mode, &out);
        n += compare(c, &out, mode);
    }
    n
}

/// The inputs of a case as tensors, by TEG source name (for in-process runs).
#[allow(dead_code)]
pub fn input_tensors(c: &Case) -> HashMap<String, Tensor> {
    c.inputs
        .iter()
        .map(|(n, p)| (tapc::import::onnx::lower::ident(n), npy::read(p).unwrap()))
        .collect()
}
