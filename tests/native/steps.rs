//! Stateful steps (`state`, `update`, `--steps N`, `--log-every K`; docs/teg.md §8): the two
//! training examples (linear regression with SGD and momentum, and with AdamW, both in f64)
//! run 50 steps in the interpreter, the JIT and a compiled program; the loss of every step,
//! read from the `--log-every 1` lines, equals the one numpy computes
//! (`tests/data/train/gen.py`, committed `.npy` files) and falls, and the final weights are
//! written as `w.npy`. Also the edge cases: `--steps 0` is a usage error, `--steps 1` is the
//! single run, and a state input of the wrong shape fails naming its file, writing nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const STEPS: usize = 50;

pub(crate) fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn data() -> PathBuf {
    root().join("tests/data/train")
}

pub(crate) fn example(name: &str) -> String {
    root().join("examples").join(name).display().to_string()
}

fn text(o: &Output) -> String {
    format!(
        "stdout:\n{}\nstderr:\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

fn tapc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(args)
        .output()
        .unwrap()
}

/// `tapc FILE -o DIR/NAME`, the compiled program's path.
fn compile(file: &str, dir: &Path, name: &str) -> PathBuf {
    let exe = dir.join(name);
    let o = tapc(&[file, "-o", exe.to_str().unwrap()]);
    assert!(o.status.success(), "{}", text(&o));
    exe
}

fn f64s(path: &Path) -> Vec<f64> {
    match tapc_runtime::npy::read(path).unwrap().data {
        tapc_runtime::Data::F64(v) => v,
        d => panic!("{}: expected f64, found {:?}", path.display(), d.dtype()),
    }
}

/// The `step,loss,value` lines of a run's stdout, in order: `(step, value)`.
fn losses(o: &Output) -> Vec<(usize, f64)> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            match f[..] {
                [s, "loss", v] => Some((s.parse().unwrap(), v.parse().unwrap())),
                _ => None,
            }
        })
        .collect()
}

/// The loss of every step of a run of `steps` steps with `--log-every 1`, after checking that
/// it exited 0 and logged steps 1 to `steps` in order.
pub(crate) fn logged_losses(what: &str, o: &Output, steps: usize) -> Vec<f64> {
    assert!(o.status.success(), "{what}: {}", text(o));
    let got = losses(o);
    let logged: Vec<usize> = got.iter().map(|(s, _)| *s).collect();
    assert_eq!(
        logged,
        (1..=steps).collect::<Vec<_>>(),
        "{what}: {}",
        text(o)
    );
    got.into_iter().map(|(_, v)| v).collect()
}

/// `|a - b| <= 1e-12 * |b|` elementwise (f64: sums in another order differ in the last bits).
fn assert_close(what: &str, got: &[f64], want: &[f64]) {
    assert_eq!(got.len(), want.len(), "{what}: lengths");
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() <= 1e-12 * w.abs(),
            "{what}[{i}]: {g} against {w}"
        );
    }
}

/// Checks one run of `STEPS` steps: exit 0, a loss per step equal to numpy's, falling tenfold,
/// and the final weights in `out/w.npy`.
fn check_run(what: &str, o: &Output, out: &Path, reference: &str) {
    let values = logged_losses(what, o, STEPS);
    let want = f64s(&data().join(format!("expected_{reference}_loss.npy")));
    assert_close(&format!("{what} loss"), &values, &want);
    assert!(values[STEPS - 1] < values[0] / 10.0, "{what}: {values:?}");
    let w = f64s(&data().join(format!("expected_{reference}_w.npy")));
    assert_close(&format!("{what} w"), &f64s(&out.join("w.npy")), &w);
}

/// Runs `file` for `steps` steps with `--log-every 1` from `input_dir` in the interpreter, the
/// JIT and a program compiled into `dir`: `(runtime, output, out_dir)` for each.
pub(crate) fn run_everywhere(
    file: &str,
    input_dir: &str,
    dir: &Path,
    steps: usize,
) -> Vec<(&'static str, Output, PathBuf)> {
    let n = steps.to_string();
    let flags = ["--steps", n.as_str(), "--log-every", "1"];
    let mut runs = Vec::new();
    for backend in ["--interp", "--native"] {
        let out = dir.join(backend.trim_start_matches('-'));
        let args = ["run", file, backend, "--input-dir", input_dir, "--out-dir"];
        let o = tapc(&[&args[..], &[out.to_str().unwrap()], &flags[..]].concat());
        runs.push((backend, o, out));
    }
    let exe = compile(file, dir, "program");
    let out = dir.join("compiled");
    let o = Command::new(&exe)
        .args(["--input-dir", input_dir, "--out-dir", out.to_str().unwrap()])
        .args(flags)
        .output()
        .unwrap();
    runs.push(("compiled", o, out));
    runs
}

fn check_example(file: &str, reference: &str) {
    let dir = crate::common::scratch(&format!("steps-{reference}"));
    let input_dir = data().display().to_string();
    for (runtime, o, out) in run_everywhere(&example(file), &input_dir, &dir, STEPS) {
        check_run(&format!("{file} {runtime}"), &o, &out, reference);
    }
}

#[test]
fn sgd_momentum_trains_like_numpy_in_every_runtime() {
    check_example("sgd_momentum.teg", "sgd");
}

#[test]
fn adamw_trains_like_numpy_in_every_runtime() {
    check_example("adamw.teg", "adamw");
}

/// `--log-every 10` logs steps 10, 20, ...; the updates (states) are not logged.
#[test]
fn log_every_k_logs_every_kth_step_of_the_ordinary_sinks() {
    let dir = crate::common::scratch("steps-log");
    let o = tapc(&[
        "run",
        &example("sgd_momentum.teg"),
        "--interp",
        "--input-dir",
        data().to_str().unwrap(),
        "--out-dir",
        dir.to_str().unwrap(),
        "--steps",
        "35",
        "--log-every",
        "10",
    ]);
    assert!(o.status.success(), "{}", text(&o));
    let stdout = String::from_utf8_lossy(&o.stdout);
    let logged: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('@')).collect();
    let steps: Vec<&str> = logged
        .iter()
        .map(|l| l.split(',').next().unwrap())
        .collect();
    assert_eq!(steps, ["10", "20", "30"], "{stdout}");
    assert!(
        logged.iter().all(|l| l.split(',').nth(1) == Some("loss")),
        "{stdout}"
    );
}

/// `--steps 0` is a usage error (exit 2) for `tapc run` and for compiled programs.
#[test]
fn zero_steps_is_a_usage_error() {
    let dir = crate::common::scratch("steps-zero");
    let file = example("sgd_momentum.teg");
    let o = tapc(&["run", &file, "--steps", "0"]);
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("at least once"), "{}", text(&o));
    let exe = compile(&file, &dir, "sgd");
    let o = Command::new(&exe).args(["--steps", "0"]).output().unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
    assert!(text(&o).contains("`--steps 0`"), "{}", text(&o));
    let o = Command::new(&exe)
        .args(["--log-every", "0"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2), "{}", text(&o));
}

/// `--steps 1` writes exactly what a run without `--steps` writes: the sinks and the updates
/// of one application, byte for byte.
#[test]
fn one_step_is_the_single_run() {
    let dir = crate::common::scratch("steps-one");
    let (a, b) = (dir.join("a"), dir.join("b"));
    let input_dir = data().display().to_string();
    let file = example("adamw.teg");
    let base = [
        "run",
        &file,
        "--interp",
        "--input-dir",
        &input_dir,
        "--out-dir",
    ];
    let o = tapc(&[&base[..], &[a.to_str().unwrap()]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let o = tapc(&[&base[..], &[b.to_str().unwrap(), "--steps", "1"]].concat());
    assert!(o.status.success(), "{}", text(&o));
    let mut names: Vec<String> = std::fs::read_dir(&a)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        ["b.npy", "loss.npy", "mb.npy", "mw.npy", "t.npy", "vb.npy", "vw.npy", "w.npy"]
    );
    for n in &names {
        let (x, y) = (
            std::fs::read(a.join(n)).unwrap(),
            std::fs::read(b.join(n)).unwrap(),
        );
        assert_eq!(x, y, "{n}");
    }
    // One step from zero: t is 1.
    assert_eq!(f64s(&a.join("t.npy")), [1.0]);
}

/// A state input of the wrong shape fails before the first step, naming the file, expected
/// and found, in every runtime, and writes nothing.
#[test]
fn state_of_the_wrong_shape_is_a_clean_error_naming_the_file() {
    let dir = crate::common::scratch("steps-shape");
    let bad = dir.join("w_bad.npy");
    let t = tapc_runtime::Tensor::new(vec![3], tapc_runtime::Data::F64(vec![0.0; 3])).unwrap();
    tapc_runtime::npy::write(&bad, &t).unwrap();
    let file = example("sgd_momentum.teg");
    let exe = compile(&file, &dir, "sgd");
    let w = format!("w={}", bad.display());
    let input_dir = data().display().to_string();
    let out = dir.join("out");
    let outs = out.to_str().unwrap();
    let args = [
        "--input",
        &w,
        "--input-dir",
        &input_dir,
        "--out-dir",
        outs,
        "--steps",
        "5",
    ];
    for backend in ["--interp", "--native"] {
        let o = tapc(&[&["run", &file, backend][..], &args[..]].concat());
        assert_eq!(o.status.code(), Some(1), "{backend}: {}", text(&o));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(
            err.contains("w_bad.npy") && err.contains("expected f64[8], found f64[3]"),
            "{backend}: {err}"
        );
    }
    let o = Command::new(&exe).args(args).output().unwrap();
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("w_bad.npy") && err.contains("expected f64[8], found f64[3]"),
        "{err}"
    );
    assert!(!out.exists(), "an output directory was made");
}

/// A counter state `t` that logs `x[t]`: steps 1–3 log 3, 5 and 10, and step 4 gathers
/// `x[3]` from `x: f32[3]` (a run-time error naming the task and the index).
const FAILS_AT_STEP_4: &str = "op @count(t: i32[]) -> (u: i32[]) {
  u[] = t[] + 1
}
op @probe(x: f32[N], t: i32[]) -> (l: f32[]) {
  l[] = x[t[]]
}
graph @g {
  %x = source @x : f32[3]
  %t = state @t : i32[]
  %u = apply @count(%t)
  %l = apply @probe(%x, %t)
  update @t %u
  sink @loss %l
}
";

/// The source of [`FAILS_AT_STEP_4`] and its inputs (`t` zero) in `dir`.
fn failing_run(dir: &Path) -> String {
    let file = dir.join("fails.teg");
    std::fs::write(&file, FAILS_AT_STEP_4).unwrap();
    let t = tapc_runtime::Tensor::new(vec![], tapc_runtime::Data::I32(vec![0])).unwrap();
    tapc_runtime::npy::write(&dir.join("t.npy"), &t).unwrap();
    let x = tapc_runtime::Data::F32(vec![3.0, 5.0, 10.0]);
    tapc_runtime::npy::write(
        &dir.join("x.npy"),
        &tapc_runtime::Tensor::new(vec![3], x).unwrap(),
    )
    .unwrap();
    file.display().to_string()
}

/// `--log-every` lines are printed as each step ends, not when the run does: a run that fails
/// at step 4 has printed the lines of steps 1–3 (and writes no output), in every runtime.
#[test]
fn log_lines_are_printed_as_the_steps_end() {
    let dir = crate::common::scratch("steps-live");
    let file = failing_run(&dir);
    let out = dir.join("out");
    let (ins, outs) = (dir.to_str().unwrap(), out.to_str().unwrap());
    let flags = [
        "--input-dir",
        ins,
        "--out-dir",
        outs,
        "--steps",
        "6",
        "--log-every",
        "1",
    ];
    let mut runs = Vec::new();
    for backend in ["--interp", "--native"] {
        runs.push((
            backend,
            tapc(&[&["run", &file, backend][..], &flags[..]].concat()),
        ));
    }
    let exe = compile(&file, &dir, "fails");
    runs.push(("compiled", Command::new(&exe).args(flags).output().unwrap()));
    for (what, o) in &runs {
        assert_eq!(o.status.code(), Some(1), "{what}: {}", text(o));
        let stdout = String::from_utf8_lossy(&o.stdout);
        assert_eq!(
            stdout,
            "1,loss,3\n2,loss,5\n3,loss,10\n",
            "{what}: {}",
            text(o)
        );
        assert!(text(o).contains("out of range"), "{what}: {}", text(o));
        assert!(!out.exists(), "{what}: an output directory was made");
    }
    assert_eq!(runs.len(), 3);
}

/// On a terminal, a run of several steps draws a progress bar on stderr (`script` gives the
/// program a pseudo-terminal) and clears it at the end; without one, stderr stays empty.
#[test]
fn a_run_of_several_steps_shows_a_progress_bar_on_a_terminal() {
    let dir = crate::common::scratch("steps-bar");
    let file = example("sgd_momentum.teg");
    let exe = compile(&file, &dir, "sgd");
    let run = format!(
        "{} --input-dir {} --out-dir {} --steps 40",
        exe.display(),
        data().display(),
        dir.join("out").display()
    );
    let o = Command::new("script")
        .args(["-q", "-e", "-c", &run, "/dev/null"])
        .output()
        .expect(
            "`script` (util-linux) runs a command on a pseudo-terminal: apt-get install util-linux",
        );
    let shown = String::from_utf8_lossy(&o.stdout);
    assert!(o.status.success(), "{}", text(&o));
    // Drawing is rate-limited: some step's state was drawn, and the bar was cleared.
    assert!(
        shown.contains("step ") && shown.contains("/40 "),
        "{shown:?}"
    );
    assert!(shown.contains("\x1b[2K"), "{shown:?}");
    assert!(shown.contains("@w: f64[8] ->"), "{shown:?}");
    let plain = Command::new(&exe)
        .args(["--input-dir", data().to_str().unwrap(), "--out-dir"])
        .arg(dir.join("plain"))
        .args(["--steps", "40"])
        .output()
        .unwrap();
    assert!(plain.status.success(), "{}", text(&plain));
    assert!(plain.stderr.is_empty(), "{}", text(&plain));
}
