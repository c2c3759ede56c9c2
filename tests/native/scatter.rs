//! `scatter %base, %idx, %upd axis A reduce add|max|min|none` against numpy, from the committed
//! fixtures of `tests/data/scatter/` (written by `tests/data/gather/gen.py`): edge shapes (sizes 1
//! to 5 and primes), ranks 1 to 3, every axis, index dtypes i16 i32 i64 u8, negative indices and
//! duplicates (more updates than the dimension has), f32, i32 and i64 bases. Each case runs in the
//! interpreter, the JIT, a compiled program on 1 and 2 threads, and a compiled program whose
//! updates come from an apply sharded in two and whose scatter `shard` splits in two along a
//! dimension other than its axis; every result must equal numpy's exactly.
//! Out-of-range indices fail in each of those ways with exit 1, a message naming the task, the
//! index tensor, the coordinate and the value, and no output.

use crate::dtypes::tapc;
use crate::gather::{check_all, compare_runs, fails, fails_everywhere, read, run_all, ty};
use std::path::{Path, PathBuf};
use std::process::Command;
use tapc_runtime::{npy, Tensor};

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scatter")
}

/// The program of a case: the updates pass through an apply (which the sharded pipeline
/// splits in two), then one scatter.
fn program(base: &Tensor, idx: &Tensor, upd: &Tensor, axis: usize, reduce: &str) -> String {
    let d = base.data.dtype().name();
    format!(
        "op @copy(x: {d}[..S]) -> (y: {d}[..S]) {{\n  y[..i] = x[..i]\n}}\n\n\
         graph @main {{\n  %base = source @base : {}\n  %idx = source @idx : {}\n  \
         %upd0 = source @upd : {}\n  %upd = apply @copy(%upd0)\n  \
         %y = scatter %base, %idx, %upd axis {axis} reduce {reduce}\n  sink @y %y\n}}\n",
        ty(base),
        ty(idx),
        ty(upd)
    )
}

/// A case's reduction and axis, from its name `REDUCE_SHAPE_aAXIS_INT`.
fn parse_name(name: &str) -> (&str, usize) {
    let parts: Vec<&str> = name.split('_').collect();
    let axis = parts[2].trim_start_matches('a').parse().expect("aAXIS");
    (parts[0], axis)
}

/// Runs one case every way; returns the elements compared and how many ways ran.
fn check_case(case: &Path) -> Result<(usize, usize), String> {
    let name = case.file_name().unwrap().to_str().unwrap();
    let (reduce, axis) = parse_name(name);
    let [base, idx, upd, want] =
        ["base", "idx", "upd", "expected_y"].map(|n| read(&case.join(format!("{n}.npy"))));
    let dir = crate::common::scratch(&format!("scatter-{name}"));
    let file = dir.join("g.teg");
    std::fs::write(&file, program(&base, &idx, &upd, axis, reduce)).map_err(|e| e.to_string())?;
    tapc(&["check", file.to_str().unwrap()])?;
    let sharded = upd.shape.iter().any(|&d| d >= 2);
    compare_runs(name, &dir, &run_all(&dir, &file, case, sharded), &want)
}

#[test]
fn scatters_match_numpy_in_interpreter_jit_exe_on_1_and_2_threads_and_sharded() {
    let (compared, ways) = check_all(&fixtures(), 14, check_case);
    // Every case runs 4 ways, and 5 when its updates can be sharded (all but the two 1-element
    // cases).
    assert_eq!(ways, 14 * 4 + 12);
    eprintln!("compared {compared} elements (14 cases, {ways} runs)");
}

#[test]
fn out_of_range_scatter_indices_fail_cleanly_in_every_engine() {
    let dir = crate::common::scratch("scatter-bad");
    let case = fixtures().join("add_3x7_a1_i16");
    let [base, upd] = ["base", "upd"].map(|n| read(&case.join(format!("{n}.npy"))));
    let mut checked = 0;
    // One past the end, and one below -size, at coordinate [2, 1] of the indices.
    for (bad, value) in [(7i16, "is 7"), (-8, "is -8")] {
        let mut v: Vec<i16> = (0..12).map(|k| (k % 7) as i16 - 3).collect();
        v[2 * 4 + 1] = bad;
        let idx = Tensor {
            shape: vec![3, 4],
            data: tapc_runtime::Data::I16(v),
        };
        let inputs = dir.join(format!("in{bad}"));
        std::fs::create_dir_all(&inputs).unwrap();
        for (n, t) in [("base", &base), ("idx", &idx), ("upd", &upd)] {
            npy::write(&inputs.join(format!("{n}.npy")), t).unwrap();
        }
        let file = dir.join("g.teg");
        std::fs::write(&file, program(&base, &idx, &upd, 1, "add")).unwrap();
        // The sharded program's scatters report their slice of the indices (`%idx.1`) and the
        // coordinate in it; the others the whole tensor's.
        let want = [
            "scattered index out of range in `scatter %",
            "axis 1 reduce add`: `%idx",
            value,
            "size 7 (valid: -7 to 6)",
            "%y",
        ];
        let mut interp = Command::new(env!("CARGO_BIN_EXE_tapc"));
        interp
            .args(["run", "--interp"])
            .arg(&file)
            .arg("--input-dir")
            .arg(&inputs);
        fails(&mut interp, &["`%idx[2, 1]`"], "interp").unwrap();
        checked += fails_everywhere(&dir, &file, &inputs, &want, &bad.to_string());
    }
    assert_eq!(checked, 10);
}
