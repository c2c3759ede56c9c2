//! Sharding forms under `mpirun` (issue 17), each giving the single-process program's sinks bit
//! for bit:
//! - a heat stencil sharded by rows, its boundary written as a constant `pad`, exchanges only
//!   halo rows between ranks: the pad is folded into the shards' loads, so after the first step
//!   each padded value moves one row per boundary in each direction;
//! - a matmul sharded as a grid of rows × columns (`shard{dim=i*j, parts=2x2}`) on 4 ranks
//!   moves to each block's rank only its row block of `a` and column block of `b`;
//! - a generated value (`rand`) read by row shards is computed by each rank, only its rows:
//!   nothing moves and each rank plans half of it.

use crate::common;

use common::mpi::{compile_with, mpi_tapc, mpirun, Btl};
use std::path::Path;

/// Compiles `src` with `passes` into `dir` as a single-process and an `--mpi` program, runs
/// both (the latter on `ranks` ranks, with `--time`) and asserts their sinks `sink` are equal;
/// returns the `--mpi` run's standard error.
fn same_as_single(dir: &Path, src: &str, passes: &str, ranks: usize, sink: &str) -> String {
    let file = dir.join(format!("prog{ranks}.teg"));
    std::fs::write(&file, src).unwrap();
    let (single, dist) = (
        dir.join(format!("single{ranks}")),
        dir.join(format!("mpi{ranks}")),
    );
    compile_with(
        Path::new(env!("CARGO_BIN_EXE_tapc")),
        &file,
        passes,
        &single,
        false,
    );
    compile_with(mpi_tapc(), &file, passes, &dist, true);
    let (want, got) = (
        dir.join(format!("want{ranks}")),
        dir.join(format!("got{ranks}")),
    );
    let o = std::process::Command::new(&single)
        .arg("--out-dir")
        .arg(&want)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let args = [
        "--time".to_string(),
        "--out-dir".into(),
        got.display().to_string(),
    ];
    let o = mpirun(ranks, Btl::SharedMemory, &dist, &args);
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert!(o.status.success(), "{ranks} ranks: {err}");
    let read = |d: &Path| std::fs::read(d.join(format!("{sink}.npy"))).unwrap();
    assert_eq!(read(&got), read(&want), "{passes} on {ranks} ranks");
    err
}

/// `steps` heat steps over a `rows`×`cols` grid that rank 0 generates.
fn heat(rows: usize, cols: usize, steps: usize) -> String {
    let mut g = format!(
        "op @stencil(x: f32[M, N]) -> (y: f32[M - 2, N - 2]) {{
  y[i, j] = 0.25 * (x[i, j + 1] + x[i + 2, j + 1] + x[i + 1, j] + x[i + 1, j + 2])
}}
graph @heat {{
  %u0 = rand seed 3 : f32[{rows}, {cols}]
"
    );
    for s in 0..steps {
        g += &format!("  %p{s} = pad %u{s} [1:1, 1:1] constant 1.0\n");
        g += &format!("  %u{} = apply @stencil(%p{s})\n", s + 1);
    }
    g + &format!("  sink @u %u{steps}\n}}\n")
}

/// The bytes received for each value whose name `keep` accepts, per `--time` line
/// (`  %NAME: sent S B, received R B`, one per rank that moves the value).
fn received(stderr: &str, keep: impl Fn(&str) -> bool) -> Vec<u64> {
    stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix('%')?.split_once(": sent "))
        .filter(|(name, _)| keep(name))
        .filter_map(|(_, l)| l.split("received ").nth(1)?.split(' ').next()?.parse().ok())
        .collect()
}

#[test]
fn a_sharded_heat_stencil_with_a_pad_boundary_moves_only_halo_rows() {
    let (rows, cols, steps) = (61, 37, 4);
    let dir = common::scratch("halo-heat");
    let mut checked = 0;
    for parts in [2usize, 3] {
        let passes = format!("canonicalize,shard{{parts={parts}}},fuse,canonicalize");
        let err = same_as_single(&dir, &heat(rows, cols, steps), &passes, parts, "u");
        // Per step after the first: each of the parts-1 boundaries moves one row each way.
        let halo = (parts as u64 - 1) * 2 * cols as u64 * 4 * (steps as u64 - 1);
        // Step 0 reads rank 0's generated grid, which is not a halo.
        let moved = received(&err, |v| v.starts_with('p') && !v.starts_with("p0"));
        assert_eq!(moved.iter().sum::<u64>(), halo, "{parts} ranks:\n{err}");
        assert!(!err.contains("pad ->"), "a pad was copied:\n{err}");
        checked += 1;
    }
    assert_eq!(checked, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_grid_sharded_matmul_on_4_ranks_moves_only_each_blocks_rows_and_columns() {
    let (m, k, n) = (38, 21, 26);
    let src = format!(
        "op @mm(a: f32[M, K], b: f32[K, N]) -> (c: f32[M, N]) {{
  c[i, j] = sum[k](a[i, k] * b[k, j])
}}
op @twice(x: f32[P, Q]) -> (y: f32[P, Q]) {{
  y[p, q] = x[p, q] + x[p, q]
}}
graph @g {{
  %ra = rand seed 1 : f32[{m}, {k}]
  %rb = rand seed 2 : f32[{k}, {n}]
  %a = apply @twice(%ra)
  %b = apply @twice(%rb)
  %c = apply @mm(%a, %b)
  sink @c %c
}}
"
    );
    let dir = common::scratch("grid-mm");
    let passes = "canonicalize,shard{parts=2x2,dim=i*j},canonicalize";
    let err = same_as_single(&dir, &src, passes, 4, "c");
    // Node 0 computes both operands (`@twice` has no `i` or `j`, so it stays whole, unplaced;
    // a generator read directly would be computed on every node that reads it, moving
    // nothing): block (r, c) on node 2r + c needs a's rows r and b's columns c; node 0 keeps
    // its own, the others receive exactly theirs.
    let (rows, cols) = ((m / 2) as u64, (n / 2) as u64);
    let a_bytes = rows * k as u64 * 4;
    let b_bytes = cols * k as u64 * 4;
    // %a.2 (second row block) goes to nodes 2 and 3, %b.1 (second column block) to 1 and 3.
    assert_eq!(
        received(&err, |v| v == "a.2").iter().sum::<u64>(),
        2 * a_bytes,
        "{err}"
    );
    assert_eq!(
        received(&err, |v| v == "b.1").iter().sum::<u64>(),
        2 * b_bytes,
        "{err}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn each_rank_generates_only_the_rows_of_a_generated_value_it_reads() {
    let (rows, cols) = (600, 500);
    let src = format!(
        "op @scale(x: f32[M, N]) -> (y: f32[M, N]) {{
  y[i, j] = x[i, j] * 3.0
}}
graph @g {{
  %r = rand seed 7 : f32[{rows}, {cols}]
  %y = apply @scale(%r)
  sink @y %y
}}
"
    );
    let dir = common::scratch("generated-rows");
    let passes = "canonicalize,shard{parts=2},canonicalize";
    let err = same_as_single(&dir, &src, passes, 2, "y");
    // Each rank computes its own 300 rows of `%r` (from their global coordinates, so the
    // values are the single process's) and of `%y`: nothing moves, and each plans 2 × 300 rows.
    assert!(err.contains("bytes moved: 0"), "{err}");
    let half = (rows / 2 * cols * 4) as u64;
    let planned = crate::mpi::per_rank(&err, 2, "peak memory: planned ");
    for (rank, line) in planned.iter().enumerate() {
        let bytes: u64 = line.split(' ').next().unwrap().parse().unwrap();
        assert_eq!(bytes, 2 * half, "rank {rank}:\n{err}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
