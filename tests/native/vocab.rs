//! A gathered table split along its gathered dimension (`shard{table=E}`) natively: the split
//! program of a 13-row table (prime) in 2, 3 and 5 parts, run in the interpreter, the JIT, a
//! compiled program on 1 and 2 threads and that program sharded again along a variable, gives
//! the unsplit lookup's values bit for bit (edge ids `0`, `V-1`, `-1`, `-V`; a `-0.0` entry keeps
//! its sign). An out-of-range id (`V`, `-V-1`) still fails every one of those runs with exit 1, a
//! message naming the task, the input `E`, the index and the value, and no output.

use crate::dtypes::tapc;
use crate::gather::{fails_everywhere, read, run_all};
use std::path::Path;
use std::process::Command;
use tapc_runtime::{npy, Data, Tensor};

const SRC: &str = "op @embed(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B, S, H]) {
  y[b, s, h] = E[ids[b, s], h]
}
graph @g {
  %E = source @E : f32[13, 7]
  %ids = source @ids : i32[3, 9]
  %y = apply @embed(%E, %ids)
  sink @y %y
}
";

fn write_inputs(dir: &Path, ids: Vec<i32>) {
    std::fs::create_dir_all(dir).unwrap();
    let mut e: Vec<f32> = (0..91).map(|k| (k % 23) as f32 * 1.5 - 9.0).collect();
    e[7 * 12 + 3] = -0.0; // in the last row, read by id 12 and -1
    let t = |shape, data| Tensor { shape, data };
    npy::write(&dir.join("E.npy"), &t(vec![13, 7], Data::F32(e))).unwrap();
    npy::write(&dir.join("ids.npy"), &t(vec![3, 9], Data::I32(ids))).unwrap();
}

/// `tapc opt SRC --passes=PASSES` written to `dir/NAME.teg`.
fn split_file(dir: &Path, src: &Path, passes: &str, name: &str) -> std::path::PathBuf {
    let o = Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args(["opt", src.to_str().unwrap(), &format!("--passes={passes}")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let f = dir.join(format!("{name}.teg"));
    std::fs::write(&f, &o.stdout).unwrap();
    f
}

fn bits(t: &Tensor) -> Vec<u32> {
    match &t.data {
        Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => panic!("{:?}", other.dtype()),
    }
}

#[test]
fn a_split_table_matches_the_lookup_in_every_engine_on_1_and_2_threads() {
    let dir = crate::common::scratch("vocab-native");
    let inputs = dir.join("in");
    let ids: Vec<i32> = [0, 12, -1, -13]
        .into_iter()
        .chain((0..23).map(|k| (k * 7 + 2) % 26 - 13))
        .collect();
    write_inputs(&inputs, ids);
    let file = dir.join("embed.teg");
    std::fs::write(&file, SRC).unwrap();
    let (f, i) = (file.to_str().unwrap(), inputs.to_str().unwrap());
    let want_dir = dir.join("want");
    tapc(&[
        "run",
        "--interp",
        f,
        "--input-dir",
        i,
        "--out-dir",
        want_dir.to_str().unwrap(),
    ])
    .unwrap();
    let want = read(&want_dir.join("y.npy"));
    assert!(
        bits(&want).contains(&(-0.0f32).to_bits()),
        "the -0.0 entry is read"
    );
    let (mut compared, mut ways) = (0, 0);
    for parts in [2, 3, 5] {
        let case = dir.join(format!("p{parts}"));
        std::fs::create_dir_all(&case).unwrap();
        let split = split_file(
            &case,
            &file,
            &format!("shard{{parts={parts},table=E}}"),
            "split",
        );
        for (how, r) in run_all(&case, &split, &inputs, true) {
            r.unwrap_or_else(|e| panic!("{parts} parts, {how}: {e}"));
            let got = read(&case.join(&how).join("y.npy"));
            assert_eq!(got.shape, want.shape);
            assert_eq!(bits(&got), bits(&want), "{parts} parts, {how}");
            compared += want.len();
            ways += 1;
        }
    }
    // interp, jit, exe on 1 and 2 threads, sharded: 5 ways per part count.
    assert_eq!(ways, 15);
    assert_eq!(compared, 15 * 3 * 9 * 7);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn an_out_of_range_id_still_fails_under_the_split() {
    let dir = crate::common::scratch("vocab-bad");
    let file = dir.join("embed.teg");
    std::fs::write(&file, SRC).unwrap();
    let split = split_file(&dir, &file, "shard{parts=3,table=E}", "split");
    let mut checked = 0;
    for (bad, value) in [(13i32, "is 13"), (-14, "is -14")] {
        let mut ids: Vec<i32> = (0..27).map(|k| k % 13 - 6).collect();
        ids[20] = bad;
        let inputs = dir.join(format!("in{bad}"));
        write_inputs(&inputs, ids);
        let want = [
            "gathered index out of range in `E[ids[b, s]]`",
            "index 0 of input `E` (`ids[b, s]`)",
            value,
            "size 13 (valid: -13 to 12)",
            "@embed.at",
        ];
        checked += fails_everywhere(&dir, &split, &inputs, &want, &bad.to_string());
    }
    assert_eq!(checked, 10);
    let _ = std::fs::remove_dir_all(&dir);
}
