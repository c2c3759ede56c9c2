//! The dtypes f16, bf16, i8, u8, i16, u16, u32 and u64 end to end against numpy: for each, one
//! op computing `x + y, x - y, x * y, x / y, x % y, -x, max(x, y), x < y, f64(x), D(w)` on the
//! edge values of `tests/data/dtypes/D/` (±0, subnormals, ±inf, NaN, min/max, wrap-around,
//! division by zero, a value just past a 16-bit rounding tie) runs four ways, each from the
//! `tapc` binary: the interpreter (`tapc run --interp`), the JIT (`tapc run`), a compiled
//! program (`tapc FILE -o OUT`) and a compiled program sharded across two nodes by
//! `cost{nodes=2,objective=memory}` (checked to contain shards). Every sink must equal the
//! committed expected `.npy` (made by `tests/data/dtypes/gen.py` with numpy and ml_dtypes)
//! element for element, bit for bit, a NaN matching any NaN. The test counts what it compared.

use std::path::{Path, PathBuf};
use std::process::Command;
use tapc_runtime::{npy, DType, Data, Tensor};

const DTYPES: [&str; 8] = ["f16", "bf16", "i8", "u8", "i16", "u16", "u32", "u64"];
const SINKS: [&str; 10] = [
    "add", "sub", "mul", "div", "rem", "neg", "max", "lt", "wide", "narrow",
];
const N: usize = 16;
const SHARDED: &str = "canonicalize,cost{nodes=2,objective=memory},fuse,canonicalize";

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The program for dtype `d`: its sources are `x.npy`, `y.npy`, `w.npy` of the fixture folder.
fn program(d: &str) -> String {
    format!(
        "op @ops(x: {d}[N], y: {d}[N], w: f64[N]) -> (add: {d}[N], sub: {d}[N], mul: {d}[N], \
         div: {d}[N], rem: {d}[N], neg: {d}[N], max: {d}[N], lt: bool[N], wide: f64[N], \
         narrow: {d}[N]) {{
  add[i] = x[i] + y[i]
  sub[i] = x[i] - y[i]
  mul[i] = x[i] * y[i]
  div[i] = x[i] / y[i]
  rem[i] = x[i] % y[i]
  neg[i] = -x[i]
  max[i] = max(x[i], y[i])
  lt[i] = x[i] < y[i]
  wide[i] = f64(x[i])
  narrow[i] = {d}(w[i])
}}
graph @g {{
  %x = source @x : {d}[{N}]
  %y = source @y : {d}[{N}]
  %w = source @w : f64[{N}]
  %add, %sub, %mul, %div, %rem, %neg, %max, %lt, %wide, %narrow = apply @ops(%x, %y, %w)
{}}}
",
        SINKS
            .iter()
            .map(|s| format!("  sink @{s} %{s}\n"))
            .collect::<String>()
    )
}

/// Runs `cmd`; `Err` with its standard error if it fails.
pub(crate) fn ok(cmd: &mut Command) -> Result<(), String> {
    let o = cmd.output().map_err(|e| e.to_string())?;
    if o.status.success() {
        return Ok(());
    }
    Err(format!("{cmd:?}: {}", String::from_utf8_lossy(&o.stderr)))
}

pub(crate) fn tapc(args: &[&str]) -> Result<(), String> {
    ok(Command::new(env!("CARGO_BIN_EXE_tapc")).args(args))
}

fn run_exe(exe: &Path, inputs: &Path, out: &Path) -> Result<(), String> {
    ok(Command::new(exe)
        .arg("--input-dir")
        .arg(inputs)
        .arg("--out-dir")
        .arg(out))
}

/// Each element as (is NaN, bits): floats by their f64 bits (so -0.0 differs from 0.0),
/// integers and bools by their value's bits.
fn elements(t: &Tensor) -> Vec<(bool, u64)> {
    fn ints<T: Copy + Into<i128>>(v: &[T]) -> Vec<(bool, u64)> {
        v.iter().map(|&x| (false, x.into() as u64)).collect()
    }
    let floats = |v: Vec<f64>| v.iter().map(|x| (x.is_nan(), x.to_bits())).collect();
    match &t.data {
        Data::F16(v) => floats(v.iter().map(|x| x.to_f64()).collect()),
        Data::BF16(v) => floats(v.iter().map(|x| x.to_f64()).collect()),
        Data::F32(v) => floats(v.iter().map(|&x| x as f64).collect()),
        Data::F64(v) => floats(v.clone()),
        Data::I8(v) => ints(v),
        Data::U8(v) => ints(v),
        Data::I16(v) => ints(v),
        Data::U16(v) => ints(v),
        Data::I32(v) => ints(v),
        Data::U32(v) => ints(v),
        Data::I64(v) => ints(v),
        Data::U64(v) => ints(v),
        Data::Bool(v) => v.iter().map(|&b| (false, u64::from(b))).collect(),
    }
}

/// Compares every sink in `out` with the expected file; returns the elements compared.
fn compare(d: DType, fixtures: &Path, out: &Path, how: &str) -> Result<usize, String> {
    let mut n = 0;
    for s in SINKS {
        let dt = match s {
            "lt" => DType::Bool,
            "wide" => DType::F64,
            _ => d,
        };
        let read =
            |p: PathBuf| npy::read_expecting(&p, s, dt, &[N]).map_err(|e| format!("{how}: {e}"));
        let want = elements(&read(fixtures.join(format!("expected_{s}.npy")))?);
        let got = elements(&read(out.join(format!("{s}.npy")))?);
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            let same = if w.0 || g.0 { w.0 && g.0 } else { w.1 == g.1 };
            if !same {
                return Err(format!(
                    "{d} {how}: @{s}[{k}]: expected bits {:#x}{}, found {:#x}{}",
                    w.1,
                    if w.0 { " (NaN)" } else { "" },
                    g.1,
                    if g.0 { " (NaN)" } else { "" }
                ));
            }
            n += 1;
        }
    }
    Ok(n)
}

/// Runs dtype `name` four ways; returns the elements compared.
fn check_dtype(name: &str) -> Result<usize, String> {
    let d = DType::from_name(name).ok_or(format!("{name} is no dtype"))?;
    let fixtures = root().join("tests/data/dtypes").join(name);
    let dir = crate::common::scratch(&format!("dtypes-{name}"));
    let file = dir.join("ops.teg");
    std::fs::write(&file, program(name)).map_err(|e| e.to_string())?;
    let (f, inputs) = (file.to_str().unwrap(), fixtures.to_str().unwrap());
    let out = |how: &str| dir.join(how);
    let s = |p: &Path| p.to_str().unwrap().to_string();
    tapc(&["check", f])?;
    tapc(&[
        "run",
        "--interp",
        f,
        "--input-dir",
        inputs,
        "--out-dir",
        &s(&out("interp")),
    ])?;
    tapc(&[
        "run",
        f,
        "--input-dir",
        inputs,
        "--out-dir",
        &s(&out("jit")),
    ])?;
    let exe = dir.join("prog");
    tapc(&[f, "-o", &s(&exe)])?;
    run_exe(&exe, &fixtures, &out("exe"))?;
    let sharded = dir.join("prog_sharded");
    tapc(&[f, "-o", &s(&sharded), "--passes", SHARDED])?;
    run_exe(&sharded, &fixtures, &out("sharded"))?;
    let printed = dir.join("sharded.teg");
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(["opt", f, &format!("--passes={SHARDED}")])
        .output()
        .map_err(|e| e.to_string())?;
    std::fs::write(&printed, &o.stdout).map_err(|e| e.to_string())?;
    if !String::from_utf8_lossy(&o.stdout).contains(" on 1") {
        return Err(format!("{name}: the cost pass placed nothing on node 1"));
    }
    let mut n = 0;
    for how in ["interp", "jit", "exe", "sharded"] {
        n += compare(d, &fixtures, &out(how), how)?;
    }
    Ok(n)
}

#[test]
fn every_new_dtype_matches_numpy_in_interpreter_jit_exe_and_sharded_exe() {
    let mut compared = 0;
    let mut bad = Vec::new();
    for name in DTYPES {
        match check_dtype(name) {
            Ok(n) => compared += n,
            Err(e) => bad.push(e),
        }
    }
    assert!(
        bad.is_empty(),
        "{} of 8 dtypes failed:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert_eq!(compared, DTYPES.len() * SINKS.len() * N * 4);
    eprintln!("compared {compared} elements (8 dtypes, 10 sinks, 4 ways)");
}
