//! A gather whose table is split across ranks (`shard{table=E}`, vocabulary-parallel): on 2 and 3
//! ranks the embedding lookup of a 13-row table (prime) gives numpy's `E[ids]` (computed here by
//! hand, edge ids `0`, `V-1`, `-1`, `-V` included) and the single-process program's sink bit for
//! bit; each rank reads from the inputs only its rows of the table (rank 0 also the ids), and
//! with the inputs on rank 0 and the sinks gathered there the bytes moved are the cost model's
//! prediction for the plan as placed, itself counted by hand (each other rank's rows, the
//! coordinates sent to it, its partial result sent back). An out-of-range id fails the job on
//! rank 0, naming the task, the input, the index and the value, and writes nothing.

use crate::common;
use crate::mpi::{bytes_moved, cost_report, measured_bytes, per_rank};

use common::mpi::{compile_with, mpi_tapc, mpirun, Btl};
use std::path::Path;
use tapc_runtime::{npy, Data, Tensor};

const V: usize = 13;
const H: usize = 6;
const N: usize = 20; // ids: 4 × 5

const SRC: &str = "op @embed(E: f32[V, H], ids: i64[B, S]) -> (y: f32[B, S, H]) {
  y[b, s, h] = E[ids[b, s], h]
}
graph @g {
  %E = source @E : f32[13, 6]
  %ids = source @ids : i64[4, 5]
  %y = apply @embed(%E, %ids)
  sink @y %y
}
";

fn write_inputs(dir: &Path, ids: Vec<i64>) {
    std::fs::create_dir_all(dir).unwrap();
    let mut e: Vec<f32> = (0..V * H).map(|k| k as f32 * 0.5 - 7.0).collect();
    e[H] = -0.0;
    let t = |shape, data| Tensor { shape, data };
    npy::write(&dir.join("E.npy"), &t(vec![V, H], Data::F32(e))).unwrap();
    npy::write(&dir.join("ids.npy"), &t(vec![4, 5], Data::I64(ids))).unwrap();
}

/// numpy's `E[ids]` for the table of [`write_inputs`].
fn expected(ids: &[i64]) -> Vec<u32> {
    let mut y = Vec::new();
    for &i in ids {
        let row = if i < 0 { i + V as i64 } else { i } as usize;
        for h in 0..H {
            let k = row * H + h;
            let v = if k == H { -0.0 } else { k as f32 * 0.5 - 7.0 };
            y.push(v.to_bits());
        }
    }
    y
}

fn bits(p: &Path) -> Vec<u32> {
    match npy::read(p).unwrap().data {
        Data::F32(v) => v.iter().map(|x| x.to_bits()).collect(),
        other => panic!("{:?}", other.dtype()),
    }
}

fn args(inputs: &Path, out: &Path, more: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = ["--input-dir", inputs.to_str().unwrap(), "--time"]
        .map(String::from)
        .to_vec();
    a.extend(["--out-dir".into(), out.display().to_string()]);
    a.extend(more.iter().map(|s| s.to_string()));
    a
}

#[test]
fn a_table_split_across_ranks_reads_only_its_rows_and_moves_the_predicted_bytes() {
    let dir = common::scratch("mpi-vocab");
    let ids: Vec<i64> = [0, 12, -1, -13]
        .into_iter()
        .chain((0..16).map(|k| (k * 5 + 3) % 26 - 13))
        .collect();
    let inputs = dir.join("in");
    write_inputs(&inputs, ids.clone());
    let file = dir.join("embed.teg");
    std::fs::write(&file, SRC).unwrap();
    let mut checked = 0;
    for ranks in [2usize, 3] {
        let passes = format!("canonicalize,shard{{parts={ranks},table=E}},canonicalize");
        let (single, prog) = (
            dir.join(format!("single{ranks}")),
            dir.join(format!("mpi{ranks}")),
        );
        compile_with(
            Path::new(env!("CARGO_BIN_EXE_tapc")),
            &file,
            &passes,
            &single,
            false,
        );
        compile_with(mpi_tapc(), &file, &passes, &prog, true);
        let want = dir.join(format!("want{ranks}"));
        let o = std::process::Command::new(&single)
            .args(["--input-dir", inputs.to_str().unwrap(), "--out-dir"])
            .arg(&want)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(bits(&want.join("y.npy")), expected(&ids));

        // Each rank reads its own rows of the table; rank 0 also reads the ids.
        let got = dir.join(format!("got{ranks}"));
        let o = mpirun(ranks, Btl::SharedMemory, &prog, &args(&inputs, &got, &[]));
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{ranks} ranks: {err}");
        assert_eq!(bits(&got.join("y.npy")), expected(&ids), "{ranks} ranks");
        let rows = tapc::passes::shard::split(V as i64, ranks as i64);
        let read: Vec<u64> = per_rank(&err, ranks, "bytes read from inputs: ")
            .iter()
            .map(|n| n.parse().unwrap())
            .collect();
        let want_read: Vec<u64> = rows
            .iter()
            .enumerate()
            .map(|(r, (lo, hi))| {
                (hi - lo) as u64 * H as u64 * 4 + if r == 0 { N as u64 * 8 } else { 0 }
            })
            .collect();
        assert_eq!(read, want_read, "{ranks} ranks:\n{err}");

        // Inputs sent by rank 0, sinks gathered there: the model's bytes, counted by hand.
        let report = cost_report(
            &file,
            &format!("{passes},cost{{nodes={ranks},evals=1,sources=root}}"),
        );
        let line = report
            .lines()
            .find(|l| l.trim_start().starts_with("unsharded:"))
            .unwrap_or_else(|| panic!("no cost report in:\n{report}"));
        let predicted = bytes_moved(line);
        let by_hand: u64 = rows[1..]
            .iter()
            .map(|(lo, hi)| ((hi - lo) as usize * H * 4 + N * 8 + N * H * 4) as u64)
            .sum();
        assert_eq!(predicted, by_hand, "{report}");
        let got = dir.join(format!("root{ranks}"));
        let on_root = args(&inputs, &got, &["--inputs-on-root", "--gather-sinks"]);
        let o = mpirun(ranks, Btl::SharedMemory, &prog, &on_root);
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(o.status.success(), "{ranks} ranks: {err}");
        assert_eq!(measured_bytes(&err), predicted, "{ranks} ranks:\n{err}");
        assert_eq!(bits(&got.join("y.npy")), expected(&ids));
        checked += 1;
    }
    assert_eq!(checked, 2);

    // An id of 13 (one past the end) fails the job before any part runs.
    let bad = dir.join("bad");
    let mut ids = ids;
    ids[17] = 13;
    write_inputs(&bad, ids);
    let out = dir.join("out-bad");
    let o = mpirun(
        3,
        Btl::SharedMemory,
        &dir.join("mpi3"),
        &args(&bad, &out, &[]),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "an out-of-range id must fail the job");
    for want in [
        "rank 0: error: task `apply @embed.at",
        "gathered index out of range in `E[ids[b, s]]`",
        "input `E` (`ids[b, s]`) is 13",
    ] {
        assert!(err.contains(want), "lacks `{want}`: {err}");
    }
    assert!(!out.join("y.npy").exists(), "a failed job wrote an output");
    let _ = std::fs::remove_dir_all(&dir);
}
