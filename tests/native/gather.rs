//! Gathers in kernels (`E[ids[b, s], h]`, `x[i, idx[i, j]]`, `x[i, idx[i, j] - 1]`, a gather
//! inside `sum`) against numpy, from the committed fixtures of `tests/data/gather/` (written by
//! its `gen.py`): edge shapes (sizes 1 to 5 and primes), index dtypes i16 i32 i64 u8, negative
//! indices. Each case runs from the `tapc` binary in the interpreter, the JIT, a compiled
//! program on 1 and on 2 threads, and a compiled program sharded in two along a variable that
//! is not gathered (when one has two points or more); every result must equal numpy's exactly.
//! Out-of-range indices (one past the end, one below `-size`) must fail in each of those ways
//! with exit 1, a message naming the task, the input, the index and the value, and no output.

use crate::dtypes::{ok, tapc};
use std::path::{Path, PathBuf};
use std::process::Command;
use tapc_runtime::{npy, Tensor};

pub(crate) const SHARDED: &str = "canonicalize,shard{parts=2,dim=auto},fuse,canonicalize";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gather")
}

pub(crate) fn read(p: &Path) -> Tensor {
    npy::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

pub(crate) fn ty(t: &Tensor) -> String {
    let dims: Vec<String> = t.shape.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", t.data.dtype().name(), dims.join(", "))
}

/// The program of a case: its kind (the folder name's first word) and its inputs' types.
fn program(kind: &str, table: &Tensor, idx: &Tensor, out: &str) -> String {
    let (t, i) = (ty(table), ty(idx));
    let (td, id) = (table.data.dtype().name(), idx.data.dtype().name());
    let (names, op) = match kind {
        "embed" => (
            ("E", "ids"),
            format!("op @g(E: {td}[V, H], ids: {id}[B, S]) -> (y: {td}[B, S, H]) {{\n  y[b, s, h] = E[ids[b, s], h]\n}}"),
        ),
        "bag" => (
            ("E", "ids"),
            format!("op @g(E: {td}[V, H], ids: {id}[B, S]) -> (y: {td}[B, H]) {{\n  y[b, h] = sum[s](E[ids[b, s], h])\n}}"),
        ),
        "elems" => (
            ("x", "idx"),
            format!("op @g(x: {td}[N, M], idx: {id}[N, K]) -> (y: {td}[N, K]) {{\n  y[i, j] = x[i, idx[i, j]]\n}}"),
        ),
        "shift" => (
            ("x", "idx"),
            format!("op @g(x: {td}[N, M], idx: {id}[N, K]) -> (y: {td}[N, K]) {{\n  y[i, j] = x[i, idx[i, j] - 1]\n}}"),
        ),
        other => panic!("unknown case kind {other}"),
    };
    let (a, b) = names;
    format!(
        "{op}\n\ngraph @main {{\n  %{a} = source @{a} : {t}\n  %{b} = source @{b} : {i}\n  %y = apply @g(%{a}, %{b}) : {out}\n  sink @y %y\n}}\n"
    )
}

/// The ways a case runs: name and the command line after the file (or program).
pub(crate) fn run_all(
    dir: &Path,
    file: &Path,
    inputs: &Path,
    sharded: bool,
) -> Vec<(String, Result<(), String>)> {
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let f = s(file);
    let out = |how: &str| s(&dir.join(how));
    let mut runs = vec![
        (
            "interp",
            tapc(&[
                "run",
                "--interp",
                &f,
                "--input-dir",
                &s(inputs),
                "--out-dir",
                &out("interp"),
            ]),
        ),
        (
            "jit",
            tapc(&[
                "run",
                &f,
                "--input-dir",
                &s(inputs),
                "--out-dir",
                &out("jit"),
            ]),
        ),
    ];
    let exe = dir.join("prog");
    let built = tapc(&[&f, "-o", &s(&exe)]);
    for threads in ["1", "2"] {
        let how = format!("exe{threads}");
        let r = built.clone().and_then(|()| {
            ok(Command::new(&exe).args([
                "--threads",
                threads,
                "--input-dir",
                &s(inputs),
                "--out-dir",
                &out(&how),
            ]))
        });
        runs.push((if threads == "1" { "exe1" } else { "exe2" }, r));
    }
    if sharded {
        let exe = dir.join("prog_sharded");
        let r = tapc(&[&f, "-o", &s(&exe), "--passes", SHARDED]).and_then(|()| {
            ok(Command::new(&exe).args(["--input-dir", &s(inputs), "--out-dir", &out("sharded")]))
        });
        runs.push(("sharded", r));
    }
    runs.into_iter().map(|(h, r)| (h.to_string(), r)).collect()
}

/// Whether the sharded pipeline really made two shards of the case.
fn shards_in_two(file: &Path) -> Result<bool, String> {
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args([
            "opt",
            file.to_str().unwrap(),
            &format!("--passes={SHARDED}"),
        ])
        .output()
        .map_err(|e| e.to_string())?;
    if !o.status.success() {
        return Err(String::from_utf8_lossy(&o.stderr).into());
    }
    Ok(String::from_utf8_lossy(&o.stdout).contains(" on 1 "))
}

/// Runs one case every way; returns the elements compared and how many ways ran.
fn check_case(case: &Path) -> Result<(usize, usize), String> {
    let name = case.file_name().unwrap().to_str().unwrap();
    let kind = name.split('_').next().unwrap();
    let (a, b) = if matches!(kind, "embed" | "bag") {
        ("E", "ids")
    } else {
        ("x", "idx")
    };
    let table = read(&case.join(format!("{a}.npy")));
    let idx = read(&case.join(format!("{b}.npy")));
    let want = read(&case.join("expected_y.npy"));
    let dir = crate::common::scratch(&format!("gather-{name}"));
    let file = dir.join("g.teg");
    std::fs::write(&file, program(kind, &table, &idx, &ty(&want))).map_err(|e| e.to_string())?;
    tapc(&["check", file.to_str().unwrap()])?;
    let sharded = want.shape.iter().any(|&d| d >= 2);
    if sharded && !shards_in_two(&file)? {
        return Err(format!("{name}: the shard pass made no second shard"));
    }
    compare_runs(name, &dir, &run_all(&dir, &file, case, sharded), &want)
}

/// Each run's `y.npy` (in `dir/HOW/`) against numpy's `want`; the elements compared and how
/// many ways ran.
pub(crate) fn compare_runs(
    name: &str,
    dir: &Path,
    runs: &[(String, Result<(), String>)],
    want: &Tensor,
) -> Result<(usize, usize), String> {
    let mut n = 0;
    for (how, r) in runs {
        r.clone().map_err(|e| format!("{name} {how}: {e}"))?;
        let got = read(&dir.join(how).join("y.npy"));
        if got.shape != want.shape || got.data != want.data {
            return Err(format!(
                "{name} {how}: {:?} differs from numpy's {:?}",
                got.data, want.data
            ));
        }
        n += want.len();
    }
    Ok((n, runs.len()))
}

/// Runs `check` on every case folder of `root` (there must be `count`); returns the elements
/// compared and the runs, failing with every case that failed.
pub(crate) fn check_all(
    root: &Path,
    count: usize,
    check: impl Fn(&Path) -> Result<(usize, usize), String>,
) -> (usize, usize) {
    let mut cases: Vec<PathBuf> = std::fs::read_dir(root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_dir())
        .collect();
    cases.sort();
    assert_eq!(
        cases.len(),
        count,
        "the fixtures of gen.py in {}",
        root.display()
    );
    let (mut compared, mut ways, mut bad) = (0, 0, Vec::new());
    for case in &cases {
        match check(case) {
            Ok((n, w)) => {
                compared += n;
                ways += w;
            }
            Err(e) => bad.push(e),
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} cases failed:\n{}",
        bad.len(),
        cases.len(),
        bad.join("\n")
    );
    (compared, ways)
}

#[test]
fn gathers_match_numpy_in_interpreter_jit_exe_on_1_and_2_threads_and_sharded() {
    let (compared, ways) = check_all(&fixtures(), 13, check_case);
    // Every case runs 4 ways, and 5 when it can be sharded (all but the two 1×1 cases).
    assert_eq!(ways, 13 * 4 + 11);
    eprintln!("compared {compared} elements (13 cases, {ways} runs)");
}

/// Runs `cmd`, which must fail with exit 1 and a message containing every one of `want`.
pub(crate) fn fails(cmd: &mut Command, want: &[&str], how: &str) -> Result<(), String> {
    let o = cmd.output().map_err(|e| e.to_string())?;
    let err = String::from_utf8_lossy(&o.stderr);
    if o.status.code() != Some(1) {
        return Err(format!(
            "{how}: exit {:?}, expected 1: {err}",
            o.status.code()
        ));
    }
    match want.iter().find(|w| !err.contains(*w)) {
        Some(w) => Err(format!("{how}: the message lacks `{w}`: {err}")),
        None => Ok(()),
    }
}

#[test]
fn out_of_range_indices_fail_cleanly_in_every_engine() {
    let dir = crate::common::scratch("gather-bad");
    let table = read(&fixtures().join("embed_7x13_i32/E.npy"));
    let mut checked = 0;
    // One past the end, and one below -size: each must be named with its value.
    for (bad, value) in [(7i32, "is 7"), (-8, "is -8")] {
        let ids = Tensor {
            shape: vec![3, 2],
            data: tapc_runtime::Data::I32(vec![0, 1, -1, bad, 2, 3]),
        };
        let inputs = dir.join(format!("in{bad}"));
        std::fs::create_dir_all(&inputs).unwrap();
        npy::write(&inputs.join("ids.npy"), &ids).unwrap();
        npy::write(&inputs.join("E.npy"), &table).unwrap();
        let file = dir.join("g.teg");
        std::fs::write(&file, program("embed", &table, &ids, "f32[3, 2, 13]")).unwrap();
        let want = [
            "gathered index out of range in `E[ids[b, s], h]`",
            "index 0 of input `E` (`ids[b, s]`)",
            value,
            "size 7 (valid: -7 to 6)",
            "@g",
        ];
        checked += fails_everywhere(&dir, &file, &inputs, &want, &bad.to_string());
    }
    assert_eq!(checked, 10);
}

/// Compiles `file` (plain and sharded) and runs it on `inputs` in the interpreter, the JIT, the
/// program on 1 and 2 threads and the sharded program: each must fail with exit 1, a message
/// with every one of `want`, and no `y.npy` (outputs go to `dir/out-HOW{tag}`); returns how
/// many ways ran.
pub(crate) fn fails_everywhere(
    dir: &Path,
    file: &Path,
    inputs: &Path,
    want: &[&str],
    tag: &str,
) -> usize {
    let (f, i) = (file.to_str().unwrap(), inputs.to_str().unwrap());
    let exe = dir.join("prog");
    tapc(&[f, "-o", exe.to_str().unwrap()]).unwrap();
    let sharded = dir.join("prog_sharded");
    tapc(&[f, "-o", sharded.to_str().unwrap(), "--passes", SHARDED]).unwrap();
    let tapc_bin = || Command::new(env!("CARGO_BIN_EXE_tapc"));
    let mut runs: Vec<(&str, Command)> = vec![("interp", tapc_bin()), ("jit", tapc_bin())];
    runs[0].1.args(["run", "--interp", f, "--input-dir", i]);
    runs[1].1.args(["run", f, "--input-dir", i]);
    for (how, threads) in [("exe1", "1"), ("exe2", "2")] {
        let mut c = Command::new(&exe);
        c.args(["--threads", threads, "--input-dir", i]);
        runs.push((how, c));
    }
    let mut c = Command::new(&sharded);
    c.args(["--input-dir", i]);
    runs.push(("sharded", c));
    let n = runs.len();
    for (how, mut cmd) in runs {
        let out = dir.join(format!("out-{how}{tag}"));
        cmd.arg("--out-dir").arg(&out);
        fails(&mut cmd, want, how).unwrap();
        assert!(
            !out.join("y.npy").exists(),
            "{how}: a failed run wrote an output"
        );
    }
    n
}

/// Gathers inside reductions (vectorised along the reduction, whose tail lanes are masked) and
/// from a constant `pad` of the table (which the scheduler would otherwise fold into the
/// kernel's loads) agree between the interpreter, the JIT and a compiled program.
#[test]
fn gathers_in_reductions_and_from_padded_tables_agree_with_the_interpreter() {
    let src = "
op @rsum(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B]) {
  y[b] = sum[s](E[ids[b, s], 1])
}
op @rmax(x: f32[N, M], idx: i64[N, K]) -> (y: f32[N]) {
  y[i] = max[k](x[i, idx[i, k]] * 2.0)
}
op @embed(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B, S, H]) {
  y[b, s, h] = E[ids[b, s], h]
}
graph @main {
  %E = source @E : f32[7, 5]
  %ids = source @ids : i32[2, 37]
  %x = source @x : f32[3, 4]
  %idx = source @idx : i64[3, 21]
  %y = apply @rsum(%E, %ids)
  %z = apply @rmax(%x, %idx)
  %p = pad %E [1:2, 0:3] constant 9.0
  %w = apply @embed(%p, %ids)
  sink @y %y
  sink @z %z
  sink @w %w
}
";
    let dir = crate::common::scratch("gather-forms");
    let file = dir.join("g.teg");
    std::fs::write(&file, src).unwrap();
    let t = |shape: Vec<usize>, data| Tensor { shape, data };
    let e: Vec<f32> = (0..35).map(|v| v as f32).collect();
    // Indices over the whole valid range of each table, negative ones included.
    let ids: Vec<i32> = (0..74).map(|v| (v * 5 % 14) - 7).collect();
    let idx: Vec<i64> = (0..63).map(|v| (v * 3 % 8) - 4).collect();
    let x: Vec<f32> = (0..12).map(|v| (v as f32) * 0.5 - 3.0).collect();
    let ins = [
        ("E", t(vec![7, 5], tapc_runtime::Data::F32(e))),
        ("ids", t(vec![2, 37], tapc_runtime::Data::I32(ids))),
        ("x", t(vec![3, 4], tapc_runtime::Data::F32(x))),
        ("idx", t(vec![3, 21], tapc_runtime::Data::I64(idx))),
    ];
    for (n, v) in &ins {
        npy::write(&dir.join(format!("{n}.npy")), v).unwrap();
    }
    let s = |p: &Path| p.to_str().unwrap().to_string();
    let (f, d) = (s(&file), s(&dir));
    let out = |how: &str| s(&dir.join(how));
    tapc(&[
        "run",
        "--interp",
        &f,
        "--input-dir",
        &d,
        "--out-dir",
        &out("interp"),
    ])
    .unwrap();
    tapc(&["run", &f, "--input-dir", &d, "--out-dir", &out("jit")]).unwrap();
    let exe = dir.join("prog");
    tapc(&[&f, "-o", &s(&exe)]).unwrap();
    ok(Command::new(&exe).args([
        "--threads",
        "2",
        "--input-dir",
        &d,
        "--out-dir",
        &out("exe"),
    ]))
    .unwrap();
    let mut compared = 0;
    for sink in ["y", "z", "w"] {
        let want = read(&dir.join("interp").join(format!("{sink}.npy")));
        for how in ["jit", "exe"] {
            let got = read(&dir.join(how).join(format!("{sink}.npy")));
            assert_eq!(got, want, "{how} @{sink}");
            compared += want.len();
        }
    }
    // y: 2, z: 3, w: 2 × 37 × 8 (the padded table is 10 × 8), each checked twice.
    assert_eq!(compared, 2 * (2 + 3 + 2 * 37 * 8));
}
