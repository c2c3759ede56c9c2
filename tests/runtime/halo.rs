//! A heat stencil sharded by rows, its boundary written as a constant `pad`, exchanges only
//! halo rows between ranks (issue 17, "halos, not copies"): the pad is folded into the
//! shards' loads, so after the first step each padded value moves one row per boundary in each
//! direction, and the sinks equal the single-process program's.

use crate::common;

use common::mpi::{compile_with, mpi_tapc, mpirun, Btl};
use std::path::Path;

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

/// The bytes rank `--time` lines say were received for the padded values of steps 1 and up
/// (step 0 reads rank 0's generated grid, which is not a halo).
fn halo_bytes(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| l.trim().strip_prefix("%p"))
        .filter(|l| !l.starts_with('0'))
        .filter_map(|l| {
            l.split("received ")
                .nth(1)?
                .split(' ')
                .next()?
                .parse::<u64>()
                .ok()
        })
        .sum()
}

#[test]
fn a_sharded_heat_stencil_with_a_pad_boundary_moves_only_halo_rows() {
    let (rows, cols, steps) = (61, 37, 4);
    let dir = common::scratch("halo-heat");
    let file = dir.join("heat.teg");
    std::fs::write(&file, heat(rows, cols, steps)).unwrap();
    let mut checked = 0;
    for parts in [2usize, 3] {
        let passes = format!("canonicalize,shard{{parts={parts}}},fuse,canonicalize");
        let (single, dist) = (
            dir.join(format!("single{parts}")),
            dir.join(format!("mpi{parts}")),
        );
        compile_with(
            Path::new(env!("CARGO_BIN_EXE_tapc")),
            &file,
            &passes,
            &single,
            false,
        );
        compile_with(mpi_tapc(), &file, &passes, &dist, true);
        let (want, got) = (
            dir.join(format!("want{parts}")),
            dir.join(format!("got{parts}")),
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
        let o = mpirun(parts, Btl::SharedMemory, &dist, &args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(o.status.success(), "{parts} ranks: {err}");
        let read = |d: &Path| std::fs::read(d.join("u.npy")).unwrap();
        assert_eq!(read(&got), read(&want), "{parts} ranks");
        // Per step after the first: each of the parts-1 boundaries moves one row each way.
        let halo = (parts as u64 - 1) * 2 * cols as u64 * 4 * (steps as u64 - 1);
        assert_eq!(halo_bytes(&err), halo, "{parts} ranks:\n{err}");
        assert!(!err.contains("pad ->"), "a pad was copied:\n{err}");
        checked += 1;
    }
    assert_eq!(checked, 2);
    let _ = std::fs::remove_dir_all(&dir);
}
