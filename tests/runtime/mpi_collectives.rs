//! Split reductions under `mpirun` combine through one MPI collective (issue 17): a matmul
//! split along `k` whose sum one node reads (`MPI_Ireduce` to it: node 1, not the combine's
//! node 0), another read whole by every node (`MPI_Iallreduce`), and a max reduction (read by
//! its sink on node 0), sharded `shard{parts=N,dim=k}` and run on N = 2 and 4 ranks. `--time` names each collective and its ranks, no partial result moves
//! point to point, the bytes moved are the collectives' by the convention of docs/mpi.md (a
//! reduce over p ranks (p − 1)·n, an allreduce 2(p − 1)·n), and `--trace` shows the collective
//! as a task on every rank that joins it.
//!
//! Values: on 2 ranks the sinks equal the single-process program's bit for bit (a sum of two
//! partials is the same in either order); on 4 ranks the collective adds the partials in the
//! order of its tree, not the left fold of the single process, so f32 sums are compared under
//! the float contract of the differential tests (`common::tolerance`), and the max exactly.
//! An f16 split reduction has no MPI datatype: it keeps the point-to-point transfers and the
//! combine tasks (its partials move as before), with the single process's values bit for bit.
//!
//! A split reduction whose readers each read a row block of it (placed so that the blocks are
//! not in rank order) combines through one `MPI_Ireduce_scatter` on 2 and 4 ranks: the trace
//! shows it on every rank, nothing else moves, and the bytes are libnbc's (a binomial reduce
//! to the root, then the root sends the other ranks their parts), as the cost model predicts
//! for that plan as placed.

use crate::common;
use crate::mpi::{
    bytes_moved, cost_report, files, measured_bytes, mpi_and_want, scratch, write_inputs,
};

use common::mpi::{mpirun, Btl};
use std::path::{Path, PathBuf};

/// `%z` (one reader: the sink), `%y` read whole by an apply on every one of the `n` nodes, and
/// the column max `%m`, each a reduction over `k`.
fn program(n: usize, dtype: &str) -> String {
    let mut g = format!(
        "op @mm(a: {dtype}[M, K], b: {dtype}[K, N]) -> (y: {dtype}[M, N]) {{
  y[i, j] = sum[k](a[i, k] * b[k, j])
}}
op @colmax(a: {dtype}[K, N]) -> (y: {dtype}[N]) {{
  y[j] = max[k](a[k, j])
}}
op @scale(g: {dtype}[M, N], s: {dtype}[M, N]) -> (y: {dtype}[M, N]) {{
  y[i, j] = g[i, j] * s[i, j]
}}
graph @g {{
  %a = source @a : {dtype}[24, 32]
  %b = source @b : {dtype}[32, 8]
  %c = source @c : {dtype}[32, 8]
  %s = source @s : {dtype}[24, 8]
  %z = apply @mm(%a, %b)
  %w = apply @scale(%z, %s) on 1
  sink @w %w
  %y = apply @mm(%a, %c)
  %m = apply @colmax(%b)
  sink @m %m
"
    );
    for r in 0..n {
        g.push_str(&format!(
            "  %u{r} = apply @scale(%y, %s) on {r}\n  sink @u{r} %u{r}\n"
        ));
    }
    g + "}\n"
}

/// `--input-dir INPUTS --out-dir OUT --time`.
fn run_args(inputs: &Path, out: &Path) -> Vec<String> {
    let (i, o) = (inputs.display().to_string(), out.display().to_string());
    ["--input-dir", &i, "--out-dir", &o, "--time"]
        .map(String::from)
        .to_vec()
}

/// The `mpi: ...` lines of a `--time` report.
fn mpi_lines(stderr: &str) -> Vec<&str> {
    stderr.lines().filter(|l| l.starts_with("mpi: ")).collect()
}

/// Compares `got` with `want` file by file: bit for bit when `exact`, else every f32 sum
/// within the float contract and the max (`m.npy`) bit for bit. Returns what differs.
fn compare(want: &[(String, Vec<u8>)], got: &Path, exact: bool) -> Vec<String> {
    let got = files(got);
    let mut bad = Vec::new();
    assert_eq!(want.len(), got.len(), "the same sink files");
    for ((name, w), (gname, g)) in want.iter().zip(&got) {
        assert_eq!(name, gname);
        if exact || name == "m.npy" {
            if w != g {
                bad.push(format!("{name} differs"));
            }
            continue;
        }
        let read = |b: &[u8]| tapc_runtime::npy::read_bytes(b, Path::new(name)).unwrap();
        if let Some(i) = common::tolerance::first_mismatch(&read(w), &read(g)) {
            bad.push(format!("{name} differs at element {i}"));
        }
    }
    bad
}

/// A program sharded `shard{parts=N,dim=k}` and run on `n` ranks with `--time` and
/// `--trace`: its scratch directory, file, passes, the single process's sinks, the output
/// directory, the trace and `--time`'s report.
struct SplitRun {
    dir: PathBuf,
    file: PathBuf,
    passes: String,
    want: Vec<(String, Vec<u8>)>,
    out: PathBuf,
    trace: String,
    err: String,
}

fn run_split(name: &str, teg: &str, n: usize) -> SplitRun {
    let dir = scratch(&format!("{name}{n}"));
    let file = dir.join(format!("{name}.teg"));
    std::fs::write(&file, teg).unwrap();
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    let graph = write_inputs(&file, 0, &inputs);
    let passes = format!("shard{{parts={n},dim=k}},canonicalize");
    let (prog, want) = mpi_and_want(&file, &graph, &passes, &inputs, &dir.join("p"));
    let (out, trace) = (dir.join("out"), dir.join("trace.json"));
    let mut args = run_args(&inputs, &out);
    args.extend(["--trace".to_string(), trace.display().to_string()]);
    let o = mpirun(n, Btl::SharedMemory, &prog, &args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{n} ranks: {err}");
    let trace = std::fs::read_to_string(&trace).unwrap();
    SplitRun {
        dir,
        file,
        passes,
        want,
        out,
        trace,
        err,
    }
}

/// The values with traffic in a `--time` report (`  %NAME: sent ...` lines), without the `%`.
fn moved_values(err: &str) -> Vec<&str> {
    (err.lines())
        .filter_map(|l| l.strip_prefix("  %")?.split_once(": sent "))
        .map(|(v, _)| v)
        .collect()
}

/// The ranks (trace processes) on which a task named `name...` ran.
fn ranks_in_trace<'a>(trace: &'a str, name: &str) -> Vec<&'a str> {
    let name = format!("\"name\":\"{name}");
    (trace.lines())
        .filter(|l| l.contains(&name))
        .filter_map(|l| l.split("\"pid\":").nth(1)?.split(',').next())
        .collect()
}

#[test]
fn split_reductions_combine_through_one_collective_on_2_and_4_ranks() {
    let mut checked = 0;
    for n in [2usize, 4] {
        let run = run_split("coll", &program(n, "f32"), n);
        let err = &run.err;
        let last = n - 1;
        let others: Vec<String> = (1..n).map(|r| r.to_string()).collect();
        let all: Vec<String> = (0..n).map(|r| r.to_string()).collect();
        let (others, all) = (others.join(", "), all.join(", "));
        let not1: Vec<String> = (0..n).filter(|&r| r != 1).map(|r| r.to_string()).collect();
        let not1 = not1.join(", ");
        let expected = [
            format!("mpi: reduce of %z.kacc{last} (768 B, sum f32) to rank 1 from rank(s) {not1}"),
            format!("mpi: allreduce of %y.kacc{last} (768 B, sum f32) over rank(s) {all}"),
            format!("mpi: reduce of %m.kacc{last} (32 B, max f32) to rank 0 from rank(s) {others}"),
        ];
        let lines = mpi_lines(err);
        for e in &expected {
            assert!(
                lines.contains(&e.as_str()),
                "{n} ranks: no `{e}` in:\n{err}"
            );
        }
        // No partial result moves point to point: the only values with traffic are the three
        // combined ones.
        assert!(
            (moved_values(err).iter()).all(|v| v.contains(".kacc")),
            "{n} ranks: point-to-point partials in:\n{err}"
        );
        // A reduce over p ranks moves (p − 1)·n bytes, an allreduce 2(p − 1)·n.
        let p = n as u64 - 1;
        assert_eq!(measured_bytes(err), p * 768 + 2 * p * 768 + p * 32, "{err}");
        // The trace has the collective as a task on every rank.
        for (kind, value) in [("reduce", "z"), ("allreduce", "y"), ("reduce", "m")] {
            let name = format!("{kind} %{value}.kacc{last} (");
            let ranks = ranks_in_trace(&run.trace, &name);
            let t = &run.trace;
            assert_eq!(ranks, all.split(", ").collect::<Vec<_>>(), "{name} in {t}");
        }
        let bad = compare(&run.want, &run.out, n == 2);
        assert!(bad.is_empty(), "{n} ranks: {}", bad.join("; "));
        checked += run.want.len();
        let _ = std::fs::remove_dir_all(&run.dir);
    }
    // (3 + 2 readers) sinks on 2 ranks, (3 + 4) on 4.
    assert_eq!(checked, 4 + 6);
}

#[test]
fn an_f16_split_reduction_keeps_the_point_to_point_combine() {
    let dir = scratch("coll-f16");
    let file = dir.join("coll.teg");
    std::fs::write(&file, program(2, "f16")).unwrap();
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    let graph = write_inputs(&file, 0, &inputs);
    let passes = "shard{parts=2,dim=k},canonicalize";
    let (prog, want) = mpi_and_want(&file, &graph, passes, &inputs, &dir.join("p"));
    let out = dir.join("out");
    let o = mpirun(2, Btl::SharedMemory, &prog, &run_args(&inputs, &out));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        !err.contains("reduce of"),
        "an f16 collective was planned:\n{err}"
    );
    // Node 1's partials go to node 0 point to point: `%z.k1`, `%y.k1` (384 B each), `%m.k1`
    // (16 B); then node 0 sends the combined `%y` (384 B) to `%u1` on node 1.
    for v in ["%z.k1: sent 384 B", "%y.k1: sent 384 B", "%m.k1: sent 16 B"] {
        assert!(err.contains(v), "no `{v}` in:\n{err}");
    }
    assert_eq!(files(&out), want, "the single process's sinks");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `%x = a · c` split along `k`, read by `n` applies, the one on node `(r + 1) mod n` reading
/// row block `r` (a rotation, so the parts are not in rank order), each writing its own sink.
fn parts_program(n: usize) -> String {
    let rows = 24 / n;
    let mut g = "op @mm(a: f32[M, K], b: f32[K, N]) -> (y: f32[M, N]) {
  y[i, j] = sum[k](a[i, k] * b[k, j])
}
op @scale(g: f32[M, N], s: f32[M, N]) -> (y: f32[M, N]) {
  y[i, j] = g[i, j] * s[i, j]
}
graph @g {
  %a = source @a : f32[24, 32]
  %c = source @c : f32[32, 8]
  %s = source @s : f32[24, 8]
  %x = apply @mm(%a, %c)
"
    .to_string();
    for r in 0..n {
        let (lo, hi, on) = (r * rows, (r + 1) * rows, (r + 1) % n);
        g.push_str(&format!(
            "  %x{r} = slice %x [{lo}:{hi}, 0:8]
  %s{r} = slice %s [{lo}:{hi}, 0:8]
  %v{r} = apply @scale(%x{r}, %s{r}) on {on}
  sink @v{r} %v{r}
"
        ));
    }
    g + "}\n"
}

#[test]
fn a_split_reduction_whose_readers_each_read_a_part_reduce_scatters_on_2_and_4_ranks() {
    let mut checked = 0;
    for n in [2usize, 4] {
        let run = run_split("coll-scatter", &parts_program(n), n);
        let err = &run.err;
        // Rooted at the last combine's node: unplaced, it runs on the node of the first task
        // that reads it, node 0 (the reader of the last row block).
        let last = n - 1;
        let all: Vec<String> = (0..n).map(|r| r.to_string()).collect();
        let all = all.join(", ");
        let e = format!(
            "mpi: reduce-scatter of %x.kacc{last} (768 B, sum f32) from rank 0 over rank(s) {all}, each its part"
        );
        assert!(
            mpi_lines(err).contains(&e.as_str()),
            "{n} ranks: no `{e}` in:\n{err}"
        );
        // Nothing but the collective moves: no partial, and no part of `%x` point to point.
        assert!(
            (moved_values(err).iter()).all(|v| *v == format!("x.kacc{last}")),
            "{n} ranks: point-to-point transfers in:\n{err}"
        );
        // A binomial reduce to the root, (p − 1)·n, then the root sends the p − 1 other parts:
        // what the cost model predicts for the plan as placed (its `unsharded:` line).
        let p = n as u64 - 1;
        assert_eq!(measured_bytes(err), p * 768 + p * 768 / n as u64, "{err}");
        let cost = format!("{},cost{{nodes={n},sinks=distributed}}", run.passes);
        let report = cost_report(&run.file, &cost);
        let predicted = (report.lines())
            .find(|l| l.trim_start().starts_with("unsharded: "))
            .map(bytes_moved)
            .unwrap_or_else(|| panic!("no prediction in:\n{report}"));
        assert_eq!(predicted, measured_bytes(err), "{report}");
        let name = format!("reduce-scatter %x.kacc{last} (");
        let t = &run.trace;
        let ranks = ranks_in_trace(t, &name);
        assert_eq!(ranks, all.split(", ").collect::<Vec<_>>(), "{name} in {t}");
        let bad = compare(&run.want, &run.out, n == 2);
        assert!(bad.is_empty(), "{n} ranks: {}", bad.join("; "));
        checked += run.want.len();
        let _ = std::fs::remove_dir_all(&run.dir);
    }
    // A sink per reader: 2 on 2 ranks, 4 on 4.
    assert_eq!(checked, 2 + 4);
}
