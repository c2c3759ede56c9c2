//! Strong scaling under `mpirun` (issue 17): with `--inputs-on-root`, rank 0 sends each
//! source window that is one contiguous run in place, straight from the buffer it read the
//! input into (a release task at the end of its run waits for the send), instead of packing a
//! copy of every window on its worker before computing; a computed value is still packed. The
//! test counts what the ranks plan and report (tasks, message bytes, bytes moved), never
//! timings, and checks the sinks against the single-process program's.

use crate::common;
use crate::mpi::{files, mpi_and_want, per_rank, scratch, write_inputs};

use common::mpi::{mlp, mpirun, Btl};

/// The task names in rank `rank`'s section of a `--time` report.
fn tasks(stderr: &str, rank: usize) -> Vec<String> {
    let head = format!("rank {rank}:");
    let section = (stderr.lines())
        .skip_while(|l| l.trim_end() != head)
        .skip(2) // the header and the table's column names
        .take_while(|l| !l.starts_with("wall "));
    section
        .filter_map(|l| l.split("  ").next())
        .map(|n| n.trim().to_string())
        .collect()
}

/// The planned message bytes of each rank (`rank R peak memory: planned ... messages N)`).
fn planned_messages(stderr: &str, ranks: usize) -> Vec<u64> {
    (per_rank(stderr, ranks, "peak memory: planned ").iter())
        .map(|l| {
            let planned = l.split(", measured").next().unwrap();
            let n = planned.rsplit("messages ").next().unwrap();
            n.trim_end_matches(')').parse().unwrap()
        })
        .collect()
}

/// `bytes moved: N` of a `--time` report.
fn moved(stderr: &str) -> u64 {
    (stderr.lines())
        .find_map(|l| l.strip_prefix("bytes moved: "))
        .expect("bytes moved")
        .parse()
        .unwrap()
}

#[test]
fn rank_0_sends_input_windows_in_place_and_packs_computed_values() {
    let dir = scratch("in-place");
    let file = dir.join("mlp.teg");
    std::fs::write(&file, mlp(8, 16, 12, 4)).unwrap();
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    write_inputs(&file, 0, &inputs);
    let f32s = |n: u64| 4 * n;
    // Split by batch rows (as `benches/mpi.rs`): node 1 reads rows 4..8 of `@x` and every
    // weight whole, five contiguous windows, all sent in place: rank 0 packs nothing (it
    // used to hold a packed copy of all of them: 4 × 16 + 16 × 12 + 12 + 12 × 4 + 4 f32).
    // Split by output columns: node 1 reads `@x` whole and column blocks of the weights,
    // each a dense source window (one run), so every source still goes in place; the
    // computed `%a` (8 × 12) is exchanged by column halves, packed: rank 0 holds its packed
    // half and the half it receives, 2 × 8 × 6 f32.
    let sources = vec!["%x", "%w1", "%b1", "%w2", "%b2"];
    let cases = [
        ("i", sources.clone(), vec![], 0),
        ("j", sources, vec!["%a"], f32s(2 * 8 * 6)),
    ];
    let before = f32s(4 * 16 + 16 * 12 + 12 + 12 * 4 + 4);
    let mut checked = 0;
    for (dim, in_place, packed, messages) in cases {
        let passes = format!("canonicalize,fuse,shard{{parts=2,dim={dim}}},canonicalize");
        let case = dir.join(dim);
        let (prog, sinks) = mpi_and_want(&file, "mlp", &passes, &inputs, &case);
        for btl in [Btl::SharedMemory, Btl::Tcp] {
            let out = case.join(format!("out-{btl:?}"));
            let args: Vec<String> = [
                "--input-dir",
                inputs.to_str().unwrap(),
                "--out-dir",
                out.to_str().unwrap(),
                "--inputs-on-root",
                "--time",
            ]
            .map(String::from)
            .to_vec();
            let o = mpirun(2, btl, &prog, &args);
            let err = String::from_utf8_lossy(&o.stderr);
            let what = format!("dim={dim} over {btl:?}");
            assert!(o.status.success(), "{what}: {err}");
            assert_eq!(files(&out), sinks, "{what}: sinks");
            let names = tasks(&err, 0);
            // A task of `kind` moving value `v` or a slice of it (`%x.1`).
            let has = |kind: &str, v: &str| {
                let (whole, part) = (format!("{kind} {v} -> rank 1"), format!("{kind} {v}."));
                names.iter().any(|n| *n == whole || n.starts_with(&part))
            };
            for v in &in_place {
                assert!(has("send", v), "{what}: {v}:\n{err}");
                assert!(has("sent", v), "{what}: {v} in place:\n{err}");
            }
            for v in &packed {
                assert!(has("send", v), "{what}: {v}:\n{err}");
                assert!(!has("sent", v), "{what}: {v} packed:\n{err}");
            }
            // Rank 0's messages: no source window, only the computed value's.
            assert_eq!(planned_messages(&err, 2)[0], messages, "{what}:\n{err}");
            if dim == "i" {
                assert_eq!(moved(&err), before, "{what}: every window still moves");
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 4, "2 shardings × 2 transports");
}
