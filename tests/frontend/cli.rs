//! The CLI end to end, in-process: `run` reads .npy inputs and writes sinks; bad inputs name
//! the file and what was expected, and leave no outputs behind.

use std::path::{Path, PathBuf};
use tapc::driver::{run, Outcome};

fn tapc(args: &[&str]) -> Outcome {
    run(&args.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch(&format!("cli-{name}"))
}

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn mlp_args(out: &Path) -> Vec<String> {
    let data = root().join("tests/data/mlp");
    let mut a = vec![
        "run".to_string(),
        root().join("examples/mlp.teg").display().to_string(),
    ];
    for n in ["x", "w1", "b1", "w2", "b2"] {
        a.push("--input".into());
        a.push(format!("{n}={}", data.join(format!("{n}.npy")).display()));
    }
    a.push("--out-dir".into());
    a.push(out.display().to_string());
    a
}

#[test]
fn run_writes_every_sink_as_npy() {
    let out = scratch("ok");
    let o = run(&mlp_args(&out));
    assert_eq!(o.code, 0, "{}", o.stderr);
    let logits = tapc_runtime::npy::read(&out.join("logits.npy")).unwrap();
    assert_eq!(logits.shape, vec![64, 10]);
    assert!(out.join("sampled.npy").exists());
    assert!(o.stdout.contains("@logits: f32[64, 10]"));
}

#[test]
fn wrong_input_shape_names_source_expected_and_found_and_writes_nothing() {
    let out = scratch("bad-shape");
    let mut args = mlp_args(&out);
    let w2 = root().join("tests/data/mlp/w2.npy").display().to_string();
    let i = args.iter().position(|a| a.starts_with("x=")).unwrap();
    args[i] = format!("x={w2}");
    let o = run(&args);
    assert_eq!(o.code, 1);
    assert!(
        o.stderr.contains("@x")
            && o.stderr.contains("expected f32[64, 784]")
            && o.stderr.contains("found f32[512, 10]"),
        "{}",
        o.stderr
    );
    assert_eq!(
        std::fs::read_dir(&out).unwrap().count(),
        0,
        "no outputs after a failed run"
    );
}

#[test]
fn missing_and_corrupt_inputs_are_errors_naming_the_file() {
    let out = scratch("missing");
    let mut args = mlp_args(&out);
    let i = args.iter().position(|a| a.starts_with("b1=")).unwrap();
    args[i] = "b1=/nonexistent/b1.npy".into();
    let o = run(&args);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("/nonexistent/b1.npy"), "{}", o.stderr);

    let bad = out.join("corrupt.npy");
    std::fs::write(&bad, b"\x93NUMPY\x01\x00garbage").unwrap();
    args[i] = format!("b1={}", bad.display());
    let o = run(&args);
    assert_eq!(o.code, 1);
    assert!(o.stderr.contains("corrupt.npy"), "{}", o.stderr);
    assert!(!out.join("logits.npy").exists());
}

#[test]
fn check_reports_json_diagnostics_and_exit_code() {
    let dir = scratch("json");
    let f = dir.join("bad.teg");
    std::fs::write(
        &f,
        "graph @g {\n  %a = zeros : f32[2]\n  sink @s %nope\n}\n",
    )
    .unwrap();
    let o = tapc(&["check", f.to_str().unwrap(), "--error-format=json"]);
    assert_eq!(o.code, 1);
    let d: serde_json::Value = serde_json::from_str(o.stderr.lines().next().unwrap()).unwrap();
    assert_eq!(d["code"], "E0011");
    assert_eq!(d["labels"][0]["line_start"], 3);
    assert_eq!(d["labels"][0]["col_start"], 11);
}

#[test]
fn compile_to_native_writes_an_executable() {
    let dir = scratch("compile");
    let exe = dir.join("mlp");
    let o = tapc(&[
        root().join("examples/mlp.teg").to_str().unwrap(),
        "-o",
        exe.to_str().unwrap(),
    ]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    assert!(exe.is_file());
}

#[test]
fn fmt_in_place_rewrites_to_the_canonical_form() {
    let dir = scratch("fmt");
    let f = dir.join("g.teg");
    std::fs::write(
        &f,
        "graph @g {\n  %a   =   zeros : f32[2]   // comment\n  sink @s %a\n}\n",
    )
    .unwrap();
    assert_eq!(tapc(&["fmt", "--in-place", f.to_str().unwrap()]).code, 0);
    assert_eq!(
        std::fs::read_to_string(&f).unwrap(),
        "graph @g {\n  %a = zeros : f32[2]  // comment\n  sink @s %a\n}\n"
    );
}
