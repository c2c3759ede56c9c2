//! A gather under `mpirun`: the embedding lookup `y[b, s, h] = E[ids[b, s], h]` of the committed
//! fixture `tests/data/gather/embed_7x13_i32` (numpy's `E[ids]`, negative indices included),
//! sharded by rows of `ids` over 2 ranks, gives numpy's result bit for bit (each rank reads the
//! whole table: a gathered dimension is never split). An out-of-range index fails the job,
//! naming the rank, the task, the input and the value, and writes nothing.

use crate::common;

use common::mpi::{compile_with, mpi_tapc, mpirun, Btl};
use std::path::{Path, PathBuf};
use std::process::Output;

const SRC: &str = "op @embed(E: f32[V, H], ids: i32[B, S]) -> (y: f32[B, S, H]) {
  y[b, s, h] = E[ids[b, s], h]
}
graph @g {
  %E = source @E : f32[7, 13]
  %ids = source @ids : i32[3, 2]
  %y = apply @embed(%E, %ids)
  sink @y %y
}
";

/// `prog` on 2 ranks with inputs from `inputs`, outputs to `out`.
fn run2(prog: &Path, inputs: &Path, out: &Path) -> Output {
    let args = [
        "--input-dir".to_string(),
        inputs.display().to_string(),
        "--out-dir".into(),
        out.display().to_string(),
    ];
    mpirun(2, Btl::SharedMemory, prog, &args)
}

/// Compiles `src` with `passes` for MPI into a scratch folder `name`, runs it on 2 ranks on the
/// inputs of `fixture` and checks its `y` (of `len` elements) against numpy's; returns the
/// folder and the program.
fn two_ranks_match_numpy(
    name: &str,
    src: &str,
    passes: &str,
    fixture: &Path,
    len: usize,
) -> (PathBuf, PathBuf) {
    let dir = common::scratch(name);
    let file = dir.join(format!("{name}.teg"));
    std::fs::write(&file, src).unwrap();
    let prog = dir.join(name);
    compile_with(mpi_tapc(), &file, passes, &prog, true);
    let out = dir.join("out");
    let o = run2(&prog, fixture, &out);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let got = tapc_runtime::npy::read(&out.join("y.npy")).unwrap();
    let want = tapc_runtime::npy::read(&fixture.join("expected_y.npy")).unwrap();
    assert_eq!(got, want);
    assert_eq!(got.len(), len);
    (dir, prog)
}

#[test]
fn a_row_sharded_gather_on_two_ranks_matches_numpy_and_fails_cleanly() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/gather/embed_7x13_i32");
    let passes = "canonicalize,shard{parts=2,dim=b},canonicalize";
    let (dir, prog) = two_ranks_match_numpy("mpi-gather", SRC, passes, &fixture, 3 * 2 * 13);

    // Rank 1's rows hold -8: below -7, out of range.
    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    std::fs::copy(fixture.join("E.npy"), bad.join("E.npy")).unwrap();
    let ids = tapc_runtime::Tensor {
        shape: vec![3, 2],
        data: tapc_runtime::Data::I32(vec![0, 1, 2, 3, -8, 4]),
    };
    tapc_runtime::npy::write(&bad.join("ids.npy"), &ids).unwrap();
    let out = dir.join("out-bad");
    let o = run2(&prog, &bad, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a bad index must fail the job");
    for want in [
        "rank 1: error: task `apply @embed",
        "gathered index out of range in `E[ids[b, s], h]`",
        "input `E` (`ids[b, s]`) is -8",
    ] {
        assert!(err.contains(want), "lacks `{want}`: {err}");
    }
    assert!(!out.join("y.npy").exists(), "a failed job wrote an output");
}

/// A scatter under `mpirun`: the embedding adjoint of the committed fixture
/// `tests/data/scatter/add_11x5_a0_i64` (numpy's `np.add.at`, duplicates and negative indices),
/// its updates computed by an apply sharded by rows over 2 ranks, gives numpy's result bit for
/// bit; an out-of-range index fails the job naming the task, the index tensor, the coordinate
/// and the value, and writes nothing.
#[test]
fn a_scatter_after_a_row_sharded_producer_on_two_ranks_matches_numpy_and_fails_cleanly() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scatter/add_11x5_a0_i64");
    let src = "op @copy(x: f32[N, H]) -> (y: f32[N, H]) {\n  y[n, h] = x[n, h]\n}\n\
               graph @g {\n  %base = source @base : f32[11, 5]\n  %idx = source @idx : i64[17, 5]\n  \
               %upd0 = source @upd : f32[17, 5]\n  %upd = apply @copy(%upd0)\n  \
               %y = scatter %base, %idx, %upd axis 0 reduce add\n  sink @y %y\n}\n";
    let passes = "canonicalize,shard{parts=2,dim=n},canonicalize";
    let (dir, prog) = two_ranks_match_numpy("mpi-scatter", src, passes, &fixture, 11 * 5);

    let bad = dir.join("bad");
    std::fs::create_dir_all(&bad).unwrap();
    for n in ["base", "upd"] {
        std::fs::copy(
            fixture.join(format!("{n}.npy")),
            bad.join(format!("{n}.npy")),
        )
        .unwrap();
    }
    let mut v: Vec<i64> = (0..85).map(|k| k % 11 - 5).collect();
    v[16 * 5 + 4] = 11;
    let idx = tapc_runtime::Tensor {
        shape: vec![17, 5],
        data: tapc_runtime::Data::I64(v),
    };
    tapc_runtime::npy::write(&bad.join("idx.npy"), &idx).unwrap();
    let out = dir.join("out-bad");
    let o = run2(&prog, &bad, &out);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a bad index must fail the job");
    for want in [
        "error: task `scatter %base, %idx, %upd axis 0 reduce add -> %y`",
        "scattered index out of range",
        "`%idx[16, 4]` is 11",
    ] {
        assert!(err.contains(want), "lacks `{want}`: {err}");
    }
    assert!(!out.join("y.npy").exists(), "a failed job wrote an output");
}

/// Writes `src` to `s.teg` in a scratch folder `name`; returns the folder, the file, the cost
/// report of `PASSES,cost{nodes=2,evals=1,COST}` and the bytes it predicts for the plan as
/// `passes` placed it (its `unsharded:` line).
fn placed_prediction(
    name: &str,
    src: &str,
    passes: &str,
    cost: &str,
) -> (PathBuf, PathBuf, String, u64) {
    let dir = common::scratch(name);
    let file = dir.join("s.teg");
    std::fs::write(&file, src).unwrap();
    let passes = format!("{passes},cost{{nodes=2,evals=1,{cost}}}");
    let report = crate::mpi::cost_report(&file, &passes);
    let line = (report.lines())
        .find(|l| l.trim_start().starts_with("unsharded:"))
        .unwrap_or_else(|| panic!("no cost report in:\n{report}"));
    let predicted = crate::mpi::bytes_moved(line);
    (dir, file, report, predicted)
}

/// The cost model prices a scatter (its base's copy, its indices and updates) as a task on its
/// node (node 0 when unplaced), where the runtime runs it: with its updates computed by
/// row shards on 2 ranks, inputs on rank 0 and sinks gathered there, the bytes moved are the
/// model's prediction for the plan as placed (rank 1's rows of the updates out, its shard back).
#[test]
fn a_scatter_plan_on_two_ranks_moves_the_predicted_bytes() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scatter/add_11x5_a0_i64");
    let src = "op @copy(x: f32[N, H]) -> (y: f32[N, H]) {\n  y[n, h] = x[n, h]\n}\n\
               graph @g {\n  %base = source @base : f32[11, 5]\n  %idx = source @idx : i64[17, 5]\n  \
               %upd0 = source @upd : f32[17, 5]\n  %upd = apply @copy(%upd0)\n  \
               %y = scatter %base, %idx, %upd axis 0 reduce add\n  sink @y %y\n}\n";
    let passes = "canonicalize,shard{parts=2,dim=n},canonicalize";
    let (dir, file, report, predicted) =
        placed_prediction("mpi-scatter-cost", src, passes, "sources=root");
    // Rank 1 copies rows 9..17 of the updates: they go out and come back.
    assert_eq!(predicted, 2 * 8 * 5 * 4, "{report}");
    assert!(report.contains("%y = apply @scatter"), "{report}");
    let prog = dir.join("prog");
    compile_with(mpi_tapc(), &file, passes, &prog, true);
    let out = dir.join("out");
    let args: Vec<String> = [
        "--input-dir",
        fixture.to_str().unwrap(),
        "--out-dir",
        out.to_str().unwrap(),
        "--inputs-on-root",
        "--gather-sinks",
        "--time",
    ]
    .map(String::from)
    .to_vec();
    let o = mpirun(2, Btl::SharedMemory, &prog, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert_eq!(crate::mpi::measured_bytes(&err), predicted, "{err}");
    let got = tapc_runtime::npy::read(&out.join("y.npy")).unwrap();
    let want = tapc_runtime::npy::read(&fixture.join("expected_y.npy")).unwrap();
    assert_eq!(got, want);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A scatter split along its non-scattered dimension (`shard{parts=2,dim=1}`: columns 0..3 and
/// 3..5 of the fixture's 11×5 result) runs its parts on their ranks (`on 0`, `on 1`). With the
/// inputs on rank 0 and the sink gathered there, rank 1 receives its columns of the base, the
/// indices and the updates and sends its columns of the result back: (11×2 + 17×2) f32 and
/// 17×2 i64 going out, 11×2 f32 back, 584 B, which is the cost model's prediction for the plan
/// as placed and what the ranks move. Each rank reading and writing its own windows moves
/// nothing: the parts write their regions of the concatenated result in place, as split
/// applies do (before, a scatter had a buffer of its own and the concat was copied on rank 0,
/// which received rank 1's 88 B). Both runs give numpy's `np.add.at` result bit for bit.
/// Before, every part ran on node 0.
#[test]
fn a_scatter_split_along_its_other_dimension_runs_its_parts_on_their_ranks() {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/scatter/add_11x5_a0_i64");
    let src =
        "graph @g {\n  %base = source @base : f32[11, 5]\n  %idx = source @idx : i64[17, 5]\n  \
               %upd = source @upd : f32[17, 5]\n  \
               %y = scatter %base, %idx, %upd axis 0 reduce add\n  sink @y %y\n}\n";
    let passes = "canonicalize,shard{parts=2,dim=1},canonicalize";
    let cost = "sources=root,sinks=gather";
    let (dir, file, report, predicted) = placed_prediction("mpi-scatter-parts", src, passes, cost);
    assert_eq!(
        predicted,
        (11 * 2 + 17 * 2 + 11 * 2) * 4 + 17 * 2 * 8,
        "{report}"
    );
    let prog = dir.join("prog");
    compile_with(mpi_tapc(), &file, passes, &prog, true);
    let want = tapc_runtime::npy::read(&fixture.join("expected_y.npy")).unwrap();
    for (flags, bytes) in [
        (&["--inputs-on-root", "--gather-sinks"][..], predicted),
        (&[], 0),
    ] {
        let out = dir.join(format!("out-{}", flags.len()));
        let mut args: Vec<String> = ["--input-dir", fixture.to_str().unwrap(), "--time"]
            .map(String::from)
            .to_vec();
        args.extend(["--out-dir".into(), out.display().to_string()]);
        args.extend(flags.iter().map(|f| f.to_string()));
        let o = mpirun(2, Btl::SharedMemory, &prog, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{flags:?}: {err}");
        assert_eq!(crate::mpi::measured_bytes(&err), bytes, "{flags:?}: {err}");
        let got = tapc_runtime::npy::read(&out.join("y.npy")).unwrap();
        assert_eq!(got, want, "{flags:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
