//! The ONNX backend node tests: the 1,884 single-operator models and reference outputs that
//! the `onnx` wheel's own generator writes (tests/data/onnx/node_cases.py), each imported and
//! run by the interpreter. Every case must end one of three ways: its outputs match the
//! reference (numpy's `allclose` with the case's own tolerances), the import refuses it with a
//! diagnostic that has an error code (an operator, dtype or attribute TEG cannot express), or
//! it lies outside tensors altogether (sequences, optionals, strings, 4- and 8-bit floats and
//! integers: the generator says which). A panic, an import that writes TEG which then fails to
//! run, or a wrong value fails the test. The counts are printed per outcome and per code.

use crate::common::{pyenv, scratch};
use crate::support::{self, Tol};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The size of the generator's set (onnx 1.23.2, pinned in tests/common/pyenv.rs).
const NODE_CASES: usize = 1884;

enum Outcome {
    Matched,
    /// Differs from the reference but matches onnxruntime (whose results the import follows
    /// where the two disagree, e.g. `Resize`'s `align_corners` under fractional scales).
    MatchedOrt,
    /// Matched once its small inputs were bound as constants (`--input-value`): an axis, a
    /// shape, `k` or a scale that TEG needs at import, which the node test feeds at run time.
    MatchedBound,
    Refused(String),
    Outside(String),
    Failed(String),
}

#[test]
fn every_onnx_node_test_matches_or_is_refused_with_a_code() {
    let work = scratch("import-node");
    let dirs = generate(&work.join("cases"));
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut unsupported: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for dir in &dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let key = match check(dir, &work.join("runs").join(&name)) {
            Outcome::Matched => "matched".to_string(),
            Outcome::MatchedBound => "matched with small inputs bound".to_string(),
            Outcome::MatchedOrt => {
                "matched onnxruntime, which differs from the reference".to_string()
            }
            Outcome::Refused(code) => match code.strip_prefix("E0122 ") {
                Some(op) => {
                    *unsupported.entry(op.to_string()).or_default() += 1;
                    "refused E0122".to_string()
                }
                None => format!("refused {code}"),
            },
            Outcome::Outside(why) => format!(
                "outside TEG's values: {}",
                why.split(" is a").last().unwrap_or(&why).trim()
            ),
            Outcome::Failed(why) => {
                failures.push(format!("{name}: {why}"));
                "failed".to_string()
            }
        };
        *counts.entry(key).or_default() += 1;
    }
    println!("{} ONNX node tests: {counts:#?}", dirs.len());
    let mut ops: Vec<(usize, String)> = unsupported.into_iter().map(|(o, k)| (k, o)).collect();
    ops.sort_by(|a, b| b.cmp(a));
    println!("unsupported operators (E0122), by cases: {ops:?}");
    let _ = std::fs::remove_dir_all(&work);
    assert!(
        failures.is_empty(),
        "{} of {} node tests failed:\n{}",
        failures.len(),
        dirs.len(),
        failures.join("\n")
    );
    assert_eq!(
        dirs.len(),
        NODE_CASES,
        "node tests written by the generator"
    );
}

/// Runs the generator into `out`; the case directories, sorted.
fn generate(out: &Path) -> Vec<PathBuf> {
    let script = support::data_dir().join("node_cases.py");
    let o = std::process::Command::new(pyenv::python())
        .arg(&script)
        .arg(out)
        .output()
        .expect("run node_cases.py");
    assert!(
        o.status.success(),
        "node_cases.py: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(out)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Imports and runs one case in `work`.
fn check(dir: &Path, work: &Path) -> Outcome {
    if let Ok(why) = std::fs::read_to_string(dir.join("not_tensor")) {
        return Outcome::Outside(why.trim().to_string());
    }
    let case = support::case(dir);
    std::fs::create_dir_all(work).unwrap();
    let mut bound = false;
    let stderr = match import(&case, work, false) {
        Err((1, e)) if e.contains("computed at run time") => {
            bound = true;
            import(&case, work, true)
        }
        other => other,
    };
    match stderr {
        Ok(()) => {}
        Err((1, stderr)) => {
            return match error_code(&stderr) {
                Some(code) if code == "E0122" => {
                    Outcome::Refused(format!("E0122 {}", operator(&stderr)))
                }
                Some(code) => Outcome::Refused(code),
                None => Outcome::Failed(format!("import refused without a code: {stderr}")),
            }
        }
        Err((code, stderr)) => return Outcome::Failed(format!("import exit {code}: {stderr}")),
    }
    match run_and_compare(&case, dir, work, bound) {
        Err(e) => match onnxruntime_agrees(&case, dir, work) {
            Ok(()) => Outcome::MatchedOrt,
            Err(ort) => Outcome::Failed(format!("{e}; against onnxruntime: {ort}")),
        },
        Ok(()) if bound => Outcome::MatchedBound,
        Ok(()) => Outcome::Matched,
    }
}

/// The inputs of at most this many elements that a retry binds as constants.
const SMALL_INPUT: usize = 64;

/// `tapc import` of the case into `work/m.teg`; with `bind`, every small input is bound.
fn import(case: &support::Case, work: &Path, bind: bool) -> Result<(), (i32, String)> {
    let teg = work.join("m.teg");
    let mut args = vec![
        "import".to_string(),
        support::s(&case.model),
        "-o".into(),
        support::s(&teg),
    ];
    for (name, path) in small_inputs(case).filter(|_| bind) {
        args.extend([
            "--input-value".to_string(),
            format!("{name}={}", support::s(path)),
        ]);
    }
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    tapc(&refs)
}

fn small_inputs(case: &support::Case) -> impl Iterator<Item = &(String, PathBuf)> {
    case.inputs.iter().filter(|(_, p)| {
        tapc_runtime::npy::read(p).is_ok_and(|t| t.shape.iter().product::<usize>() <= SMALL_INPUT)
    })
}

/// Runs the imported case interpreted and compares its sinks (bound inputs are not passed).
fn run_and_compare(
    case: &support::Case,
    dir: &Path,
    work: &Path,
    bound: bool,
) -> Result<(), String> {
    let teg = work.join("m.teg");
    let out = work.join("out");
    std::fs::create_dir_all(&out).unwrap();
    let mut args = vec!["run".to_string(), support::s(&teg), "--interp".into()];
    args.extend(["--out-dir".to_string(), support::s(&out)]);
    let mut unbound = case.clone();
    if bound {
        let small: Vec<String> = small_inputs(case).map(|(n, _)| n.clone()).collect();
        unbound.inputs.retain(|(n, _)| !small.contains(n));
    }
    args.extend(support::input_args(&unbound, work));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Err((code, stderr)) = tapc(&refs) {
        return Err(format!("imported, but run exit {code}: {stderr}"));
    }
    support::differences(case, &out, tolerance(dir))
}

/// Runs onnxruntime on the case's inputs (tests/data/onnx/ort_run.py) and compares tapc's
/// outputs, already in `work/out`, with its results.
fn onnxruntime_agrees(case: &support::Case, dir: &Path, work: &Path) -> Result<(), String> {
    let ort = work.join("ort");
    let mut cmd = std::process::Command::new(pyenv::python());
    cmd.arg(support::data_dir().join("ort_run.py"))
        .arg(&case.model)
        .arg(&ort);
    for (name, path) in &case.inputs {
        cmd.arg(format!("{name}={}", support::s(path)));
    }
    let o = cmd.output().map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(format!(
            "onnxruntime failed: {}",
            String::from_utf8_lossy(&o.stderr)
        ));
    }
    let mut theirs = support::case(&ort);
    theirs.name = case.name.clone();
    support::differences(&theirs, &work.join("out"), tolerance(dir))
}

/// `tapc ARGS` in-process; a panic is exit code 101, as a process would give.
fn tapc(args: &[&str]) -> Result<(), (i32, String)> {
    let run = std::panic::catch_unwind(|| tapc::driver::run(args));
    match run {
        Ok(o) if o.code == 0 => Ok(()),
        Ok(o) => Err((o.code, o.stderr)),
        Err(_) => Err((101, "panicked".to_string())),
    }
}

/// The operator an E0122 names (`unsupported ONNX operator `X` ...`).
fn operator(stderr: &str) -> &str {
    stderr.split('`').nth(1).unwrap_or("?")
}

/// The first `E0123`-style code in a diagnostic.
fn error_code(stderr: &str) -> Option<String> {
    stderr.match_indices("E0").find_map(|(i, _)| {
        let code = stderr.get(i..i + 5)?;
        code[1..]
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| code.to_string())
    })
}

/// The case's `rtol atol` (tol.txt, from the generator).
fn tolerance(dir: &Path) -> Tol {
    let text = std::fs::read_to_string(dir.join("tol.txt")).unwrap();
    let v: Vec<f64> = text
        .split_whitespace()
        .map(|x| x.parse().unwrap())
        .collect();
    Tol::AllClose {
        rtol: v[0],
        atol: v[1],
    }
}
