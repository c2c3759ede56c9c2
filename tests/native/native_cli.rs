//! The native backend end to end: `tapc examples/mlp.teg -o mlp && ./mlp --input x=...`
//! with the system `cc`, the compiled program's options (`--input-dir`, positional inputs,
//! `--threads`, `--time`, `--trace`), `--emit llvm|asm|obj`, `tapc run --native`, every
//! bad-input case of the issue, and a task that faults or panics inside the compiled program
//! (made to, by the runtime's test-only hook `TAPC_RT_TEST_FAULT`): each prints a message
//! naming the problem, exits non-zero and leaves no output file behind.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn data(name: &str) -> PathBuf {
    root().join("tests/data/mlp").join(name)
}

fn scratch(name: &str) -> PathBuf {
    crate::common::scratch(&format!("native-cli-{name}"))
}

fn tapc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(args)
        .output()
        .unwrap()
}

fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The MLP compiled once for every test: `tapc examples/mlp.teg -o DIR/mlp`.
fn mlp() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let dir = scratch("exe");
        let exe = dir.join("mlp");
        let o = tapc(&[
            root().join("examples/mlp.teg").to_str().unwrap(),
            "-o",
            exe.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{:?}", text(&o));
        assert!(exe.is_file());
        exe
    })
}

fn input_args() -> Vec<String> {
    let mut a = Vec::new();
    for n in ["x", "w1", "b1", "w2", "b2"] {
        a.push("--input".to_string());
        a.push(format!("{n}={}", data(&format!("{n}.npy")).display()));
    }
    a
}

fn run_mlp(args: &[String]) -> Output {
    Command::new(mlp()).args(args).output().unwrap()
}

/// Files left in `dir` (including hidden temporaries).
fn files_in(dir: &Path) -> Vec<String> {
    match std::fs::read_dir(dir) {
        Ok(rd) => rd
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => vec![],
    }
}

fn rel_err(got: &Path, want: &Path) -> f64 {
    let g = tapc_runtime::npy::read(got).unwrap();
    let w = tapc_runtime::npy::read(want).unwrap();
    assert_eq!(g.shape, w.shape);
    let f = |t: &tapc_runtime::Tensor| match &t.data {
        tapc_runtime::Data::F32(v) => v.iter().map(|&x| x as f64).collect::<Vec<_>>(),
        tapc_runtime::Data::F64(v) => v.clone(),
        _ => panic!("float data"),
    };
    let (g, w) = (f(&g), f(&w));
    let e: f64 = g
        .iter()
        .zip(&w)
        .map(|(a, b)| (a - b) * (a - b))
        .sum::<f64>()
        .sqrt();
    e / w.iter().map(|b| b * b).sum::<f64>().sqrt()
}

#[test]
fn compiled_mlp_matches_numpy_with_named_inputs() {
    let out = scratch("named");
    let mut args = input_args();
    args.extend(["--out-dir".to_string(), out.display().to_string()]);
    let o = run_mlp(&args);
    let (stdout, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(stdout.contains("@logits: f32[64, 10] -> "), "{stdout}");
    assert!(stdout.contains("@sampled: f32[10, 32] -> "), "{stdout}");
    assert!(rel_err(&out.join("logits.npy"), &data("expected_logits.npy")) < 1e-5);
    assert!(rel_err(&out.join("sampled.npy"), &data("expected_sampled.npy")) < 1e-5);
}

#[test]
fn compiled_program_takes_input_dir_positional_threads_time_and_trace() {
    let out = scratch("dir");
    let trace = out.join("trace.json");
    let args: Vec<String> = vec![
        "--input-dir".into(),
        data("").display().to_string(),
        "--out-dir".into(),
        out.display().to_string(),
        "--threads".into(),
        "2".into(),
        "--time".into(),
        "--trace".into(),
        trace.display().to_string(),
    ];
    let o = run_mlp(&args);
    let (_, stderr) = text(&o);
    assert!(o.status.success(), "{stderr}");
    assert!(
        stderr.contains("apply @linear") && stderr.contains("peak memory"),
        "{stderr}"
    );
    // `peak memory 1.9 MiB (planned 1.9 MiB)`: the executor's count and the plan's figure
    // (the one the pre-run memory check uses) agree within 5%.
    let line = stderr.lines().find(|l| l.contains("peak memory")).unwrap();
    let measured = bytes_after(line, "peak memory ");
    let planned = bytes_after(line, "(planned ");
    assert!((measured - planned).abs() <= 0.05 * measured, "{line}");
    let t = std::fs::read_to_string(&trace).unwrap();
    assert!(
        t.contains("\"traceEvents\"") && t.contains("\"ph\":\"X\"") && t.contains("worker 1"),
        "{t}"
    );
    assert!(rel_err(&out.join("logits.npy"), &data("expected_logits.npy")) < 1e-5);

    let out2 = scratch("positional");
    let mut args: Vec<String> = ["x", "w1", "b1", "w2", "b2"]
        .iter()
        .map(|n| data(&format!("{n}.npy")).display().to_string())
        .collect();
    args.extend([
        "--out-dir".to_string(),
        out2.display().to_string(),
        "--threads=1".to_string(),
    ]);
    let o = run_mlp(&args);
    assert!(o.status.success(), "{:?}", text(&o));
    assert!(rel_err(&out2.join("logits.npy"), &data("expected_logits.npy")) < 1e-5);
}

/// Runs the MLP with input `x` replaced by `file`; checks the exit code, the message and
/// that nothing was written.
fn bad_input(name: &str, file: &Path, want: &[&str]) {
    let out = scratch(name);
    let mut args = input_args();
    let i = args.iter().position(|a| a.starts_with("x=")).unwrap();
    args[i] = format!("x={}", file.display());
    args.extend(["--out-dir".to_string(), out.display().to_string()]);
    let o = run_mlp(&args);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    for w in want {
        assert!(stderr.contains(w), "expected {w:?} in: {stderr}");
    }
    assert!(
        files_in(&out).is_empty(),
        "left behind: {:?}",
        files_in(&out)
    );
}

#[test]
fn missing_input_file_is_reported_and_writes_nothing() {
    let missing = scratch("missing-in").join("nope.npy");
    bad_input("missing", &missing, &["@x", "nope.npy", "No such file"]);
}

#[test]
fn wrong_dtype_names_source_expected_and_found_and_writes_nothing() {
    let dir = scratch("dtype-in");
    let f = dir.join("x64.npy");
    let t = tapc_runtime::Tensor::new(vec![64, 784], tapc_runtime::Data::F64(vec![0.5; 64 * 784]))
        .unwrap();
    tapc_runtime::npy::write(&f, &t).unwrap();
    bad_input(
        "dtype",
        &f,
        &[
            "@x",
            "x64.npy",
            "expected f32[64, 784]",
            "found f64[64, 784]",
        ],
    );
}

#[test]
fn wrong_shape_names_source_expected_and_found_and_writes_nothing() {
    bad_input(
        "shape",
        &data("w2.npy"),
        &[
            "@x",
            "w2.npy",
            "expected f32[64, 784]",
            "found f32[512, 10]",
        ],
    );
}

#[test]
fn truncated_npy_is_reported_and_writes_nothing() {
    let dir = scratch("trunc-in");
    let bytes = std::fs::read(data("x.npy")).unwrap();
    let f = dir.join("x_trunc.npy");
    std::fs::write(&f, &bytes[..bytes.len() / 2]).unwrap();
    bad_input("trunc", &f, &["@x", "x_trunc.npy", "truncated"]);
    let g = dir.join("x_garbage.npy");
    std::fs::write(&g, b"this is not a numpy file").unwrap();
    bad_input("garbage", &g, &["@x", "x_garbage.npy"]);
}

#[test]
fn unwritable_output_directory_is_reported_and_writes_nothing() {
    let dir = scratch("unwritable");
    let blocker = dir.join("a_file");
    std::fs::write(&blocker, b"x").unwrap();
    let out = blocker.join("out");
    let mut args = input_args();
    args.extend(["--out-dir".to_string(), out.display().to_string()]);
    let o = run_mlp(&args);
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("cannot write outputs") && stderr.contains("a_file"),
        "{stderr}"
    );
    assert_eq!(files_in(&dir), vec!["a_file".to_string()]);
}

/// Runs the MLP on good inputs with the runtime's test-only hook `TAPC_RT_TEST_FAULT=HOOK`
/// (runtime/src/fault.rs: tasks whose name contains the text after `:` panic or raise the
/// signal); checks exit code 1, that nothing was written, and returns stderr.
fn run_mlp_with_fault(name: &str, hook: &str) -> String {
    let out = scratch(name);
    let mut args = input_args();
    args.extend([
        "--out-dir".to_string(),
        out.display().to_string(),
        "--threads".to_string(),
        "2".to_string(),
    ]);
    let o = Command::new(mlp())
        .args(&args)
        .env("TAPC_RT_TEST_FAULT", hook)
        .output()
        .unwrap();
    let (stdout, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{hook}: {stderr}");
    assert!(stdout.is_empty(), "{hook}: {stdout}");
    assert!(
        files_in(&out).is_empty(),
        "{hook} left behind: {:?}",
        files_in(&out)
    );
    stderr
}

#[test]
fn a_kernel_fault_is_reported_with_its_task_and_writes_nothing() {
    for (kind, what) in [
        ("segv", "segmentation fault (SIGSEGV)"),
        ("bus", "bus error (SIGBUS)"),
        ("fpe", "arithmetic fault (SIGFPE)"),
        // A real fault: the task overflows its stack; reported from the alternate stack.
        ("stack", "segmentation fault (SIGSEGV)"),
    ] {
        let stderr = run_mlp_with_fault(&format!("fault-{kind}"), &format!("{kind}:@relu"));
        let want = format!("mlp: error: {what} in task `apply @relu");
        assert!(stderr.starts_with(&want), "expected {want:?} in: {stderr}");
        assert!(
            stderr.contains("(index range [") && stderr.ends_with("; no outputs were written\n"),
            "{stderr}"
        );
    }
}

#[test]
fn a_panicking_task_is_reported_with_its_task_and_writes_nothing() {
    let stderr = run_mlp_with_fault("panic", "panic:@linear");
    assert!(
        stderr.contains("mlp: error: task `apply @linear")
            && stderr.contains("(index range [")
            && stderr.contains("panicked: injected by TAPC_RT_TEST_FAULT"),
        "{stderr}"
    );
}

#[test]
fn a_malformed_test_hook_is_an_error_not_a_run() {
    let stderr = run_mlp_with_fault("hook", "kill:@relu");
    assert!(
        stderr.contains("TAPC_RT_TEST_FAULT=kill:@relu: expected KIND:TASK"),
        "{stderr}"
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        vec!["--threads", "0"],
        vec!["--bogus"],
        vec!["--input", "x"],
    ] {
        let o = Command::new(mlp()).args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {:?}", text(&o));
    }
    let o = Command::new(mlp()).output().unwrap();
    let (_, stderr) = text(&o);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr.contains("no input for source @x"), "{stderr}");
    let o = Command::new(mlp()).arg("--help").output().unwrap();
    assert!(o.status.success() && text(&o).0.contains("source @w1: f32[784, 512]"));
}

#[test]
fn emits_llvm_asm_and_objects() {
    let dir = scratch("emit");
    let src = root().join("examples/softmax.teg");
    // An object file is ELF (its magic first) with the kernel's symbol in its string table.
    for (kind, file, start, needle) in [
        ("llvm", "s.ll", &b""[..], &b"define i32 @tapc_k0("[..]),
        ("asm", "s.s", b"", b"tapc_k0:"),
        ("obj", "s.o", b"\x7fELF", b"tapc_k0"),
    ] {
        let out = dir.join(file);
        let o = tapc(&[
            src.to_str().unwrap(),
            "--emit",
            kind,
            "-o",
            out.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{kind}: {:?}", text(&o));
        let bytes = std::fs::read(&out).unwrap();
        assert!(bytes.starts_with(start), "{kind}");
        assert!(bytes.windows(needle.len()).any(|w| w == needle), "{kind}");
    }
    let ir = std::fs::read_to_string(dir.join("s.ll")).unwrap();
    assert!(ir.contains("noalias"), "{ir}");
    assert!(
        ir.contains("<16 x float>") || ir.contains("<8 x float>"),
        "{ir}"
    );
    assert_eq!(files_in(&dir).len(), 3, "{:?}", files_in(&dir));
}

#[test]
fn unwritable_compiler_output_is_reported_and_leaves_nothing() {
    let dir = scratch("bad-o");
    let blocker = dir.join("f");
    std::fs::write(&blocker, b"x").unwrap();
    for kind in ["exe", "llvm"] {
        let out = blocker.join("prog");
        let o = tapc(&[
            root().join("examples/softmax.teg").to_str().unwrap(),
            "--emit",
            kind,
            "-o",
            out.to_str().unwrap(),
        ]);
        let (_, stderr) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("cannot write"), "{stderr}");
    }
    assert_eq!(files_in(&dir), vec!["f".to_string()]);
    let o = tapc(&[
        dir.join("missing.teg").to_str().unwrap(),
        "-o",
        dir.join("m").to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).1.contains("cannot read"));
}

#[test]
fn run_native_matches_the_interpreter_on_the_mlp() {
    let out_n = scratch("run-native");
    let out_i = scratch("run-interp");
    let base: Vec<String> = vec![
        "run".into(),
        root().join("examples/mlp.teg").display().to_string(),
        "--input-dir".into(),
        data("").display().to_string(),
    ];
    for (out, flags) in [
        (&out_n, vec!["--native", "--threads", "2"]),
        (&out_i, vec!["--interp"]),
    ] {
        let mut a: Vec<String> = base.clone();
        a.extend(flags.iter().map(|s| s.to_string()));
        a.extend(["--out-dir".to_string(), out.display().to_string()]);
        let o = tapc_lib_run(&a);
        assert_eq!(o.code, 0, "{}", o.stderr);
    }
    assert!(rel_err(&out_n.join("logits.npy"), &out_i.join("logits.npy")) < 1e-6);
}

fn tapc_lib_run(args: &[String]) -> tapc::driver::Outcome {
    tapc::driver::run(args)
}

/// The byte size `human_bytes` printed right after `key` in `line` (`1.9 MiB`, `17 B`).
fn bytes_after(line: &str, key: &str) -> f64 {
    let rest = &line[line.find(key).unwrap_or_else(|| panic!("{key}: {line}")) + key.len()..];
    let mut words = rest.split_whitespace();
    let n: f64 = words.next().unwrap().parse().unwrap();
    let unit = words.next().unwrap().trim_end_matches(')');
    let scale = match unit {
        "GiB" => 1u64 << 30,
        "MiB" => 1 << 20,
        "KiB" => 1 << 10,
        _ => 1,
    };
    n * scale as f64
}
