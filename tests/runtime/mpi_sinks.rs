//! Sharded outputs under `mpirun` (issue 17): each rank writes its own windows of every sink
//! straight into the staged `.npy` files, rank 0 commits them all or none; `--gather-sinks`
//! gathers every sink to rank 0 as before. The files equal the single-process program's, the
//! sink bytes through rank 0 are only its own, and a rank killed with SIGKILL while the job
//! writes leaves no output and no temporaries (a SIGKILLed rank 0's staging is swept by the
//! next run).

use super::mpi::{files, mpi_and_want, per_rank, scratch, write_inputs};
use crate::common::mpi::{mlp, mpirun, mpirun_args, mpirun_with, one_job, Btl};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The batch-sharded MLP (8 rows, 4 outputs) on 2 nodes: each writes 4 rows of `@y`.
const BATCH: &str = "canonicalize,fuse,shard{parts=2,dim=i},canonicalize";

/// The files of a directory, by name (what `files` returns).
type Files = Vec<(String, Vec<u8>)>;

/// The MLP of `src` (graph `@mlp`) batch-sharded: its program, its single-process sinks and
/// its inputs, in `dir`.
fn mlp_program(dir: &Path, src: &str) -> (PathBuf, Files, PathBuf) {
    let file = dir.join("mlp.teg");
    std::fs::write(&file, src).unwrap();
    let inputs = dir.join("in");
    std::fs::create_dir_all(&inputs).unwrap();
    write_inputs(&file, 0, &inputs);
    let (prog, want) = mpi_and_want(&file, "mlp", BATCH, &inputs, &dir.join("build"));
    (prog, want, inputs)
}

/// The MLP (8 rows, 4 outputs) with strided sinks of `%y` too: its transpose, a column slice,
/// and a source sunk as it is (rank 0's).
fn mlp_views() -> String {
    mlp(8, 16, 12, 4).replace(
        "  sink @y %y\n",
        "  %yt = transpose %y [1, 0]
  %ys = slice %y [0:8, 1:3]
  sink @y %y
  sink @yt %yt
  sink @ys %ys
  sink @x %x
",
    )
}

fn run_args(inputs: &Path, out: &Path, more: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = vec![
        "--input-dir".into(),
        inputs.display().to_string(),
        "--out-dir".into(),
        out.display().to_string(),
    ];
    a.extend(more.iter().map(|s| s.to_string()));
    a
}

/// Per rank of a `--time` report: (sink bytes written, bytes received).
fn sink_and_received(stderr: &str, ranks: usize) -> Vec<(u64, u64)> {
    let written = per_rank(stderr, ranks, "sink bytes written: ");
    let traffic = per_rank(stderr, ranks, "sent ");
    let received = |l: &str| -> u64 {
        let at = l.find("received ").unwrap() + "received ".len();
        l[at..].split(' ').next().unwrap().parse().unwrap()
    };
    (written.iter().zip(traffic))
        .map(|(w, t)| (w.parse().unwrap(), received(t)))
        .collect()
}

/// Per rank, (sink bytes written, bytes received) on `np` ranks, gathered or not.
type Expect = fn(usize, bool) -> Vec<(u64, u64)>;

#[test]
fn ranks_write_their_own_rows_of_the_sinks_and_gather_sinks_sends_them_to_rank_0() {
    // Each rank reads its own inputs: the only data that could move is the sinks'.
    let cases: [(&str, String, Expect); 2] = [
        // `@y` is f32[8, 4]: 128 bytes, 64 per node.
        ("plain", mlp(8, 16, 12, 4), |np, gather| {
            match (np, gather) {
                (1, _) => vec![(128, 0)],
                (_, false) => vec![(64, 0), (64, 0)],
                (_, true) => vec![(128, 64), (0, 0)],
            }
        }),
        // And `@yt` (64 per node), `@ys` (32 per node) and `@x` (512, rank 0's): gathered, rank
        // 0 receives node 1's half of `%y` once per sink that reads it.
        ("views", mlp_views(), |np, gather| match (np, gather) {
            (1, _) => vec![(832, 0)],
            (_, false) => vec![(672, 0), (160, 0)],
            (_, true) => vec![(832, 160), (0, 0)],
        }),
    ];
    let mut checked = 0;
    for (name, src, expect) in cases {
        let dir = scratch(&format!("sinks-{name}"));
        let (prog, want, inputs) = mlp_program(&dir, &src);
        for (np, btl) in [
            (1, Btl::SharedMemory),
            (2, Btl::SharedMemory),
            (2, Btl::Tcp),
        ] {
            for gather in [false, true] {
                let out = dir.join(format!("out-{np}-{btl:?}-{gather}"));
                let mut more = vec!["--time"];
                if gather {
                    more.push("--gather-sinks");
                }
                let o = mpirun(np, btl, &prog, &run_args(&inputs, &out, &more));
                let err = String::from_utf8_lossy(&o.stderr);
                let what = format!("{name} -np {np} {btl:?} gather {gather}");
                assert!(o.status.success(), "{what}: {err}");
                assert_eq!(files(&out), want, "{what}: the single-process files");
                let got = sink_and_received(&err, np);
                assert_eq!(
                    got,
                    expect(np, gather),
                    "{what}: (sink bytes, received):\n{err}"
                );
                checked += 1;
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
    assert_eq!(checked, 12);
}

/// The plain MLP's program and single-process sinks in `dir`, its output directory and the
/// arguments of a run into it.
fn plain_run(dir: &Path) -> (PathBuf, Files, PathBuf, Vec<String>) {
    let (prog, want, inputs) = mlp_program(dir, &mlp(8, 16, 12, 4));
    let out = dir.join("out");
    let args = run_args(&inputs, &out, &[]);
    (prog, want, out, args)
}

/// The pid of the process of rank `rank` that `mpirun` (`parent`) started.
fn rank_pid(parent: u32, rank: usize) -> Option<i32> {
    let want = format!("OMPI_COMM_WORLD_RANK={rank}");
    for e in std::fs::read_dir("/proc").ok()?.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        // `pid (comm) state ppid ...`: the fields after the last `)`.
        let ppid = stat
            .rsplit(')')
            .next()
            .and_then(|r| r.split_whitespace().nth(1));
        if ppid != Some(parent.to_string().as_str()) {
            continue;
        }
        let env = std::fs::read(e.path().join("environ")).unwrap_or_default();
        if env.split(|&b| b == 0).any(|v| v == want.as_bytes()) {
            return Some(pid);
        }
    }
    None
}

/// Runs the program on 2 ranks paused at `phase` (`run`: the sinks staged, before computing;
/// `sinks`: after writing their windows of the sinks), SIGKILLs rank `victim` there, and waits
/// for the job to end (failing if it is still running after 60 s).
fn kill_at(phase: &str, prog: &Path, args: &[String], victim: usize) -> String {
    let _g = one_job();
    let mut c = Command::new("mpirun");
    mpirun_args(&mut c, 2, Btl::SharedMemory);
    c.arg(prog)
        .args(args)
        .env("TAPC_RT_TEST_PAUSE", format!("{phase}:30000"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let (tx, rx) = mpsc::channel();
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for l in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(l);
        }
    });
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut log = String::new();
    // Both ranks print the marker (only `phase` pauses); their lines may interleave.
    while log.matches("tapc-test-pause").count() < 2 {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => {
                log.push_str(&l);
                log.push('\n');
            }
            Err(_) => {
                let _ = child.kill();
                panic!("the ranks never paused at {phase} (timeout):\n{log}");
            }
        }
    }
    let pid = rank_pid(child.id(), victim).expect("the rank's process");
    // SAFETY: a plain kill(2) of a process this test started (a child of its mpirun).
    assert_eq!(unsafe { libc::kill(pid, libc::SIGKILL) }, 0);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(!status.success(), "the job succeeded:\n{log}");
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("the job did not end after rank {victim} was killed (timeout):\n{log}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    log.extend(rx.try_iter().map(|l| l + "\n"));
    log
}

#[test]
fn a_rank_killed_mid_run_or_mid_write_leaves_no_output_and_no_temporaries() {
    let dir = scratch("sinks-kill");
    let (prog, want, out, args) = plain_run(&dir);
    let mut checked = 0;
    for phase in ["run", "sinks"] {
        // Rank 1 killed: rank 0, terminated by mpirun, removes its staging directory.
        let log = kill_at(phase, &prog, &args, 1);
        assert_eq!(
            files(&out),
            vec![],
            "{phase}: nothing in the output directory:\n{log}"
        );
        // Rank 0 killed: its staging directory stays (no output), and the next run sweeps it.
        let log = kill_at(phase, &prog, &args, 0);
        let left: Vec<String> = std::fs::read_dir(&out)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            left.len() == 1 && left[0].starts_with(".tapc-"),
            "{phase}: no output, only rank 0's staging: {left:?}\n{log}"
        );
        let o = mpirun(2, Btl::SharedMemory, &prog, &args);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        assert_eq!(
            files(&out),
            want,
            "{phase}: the outputs, and no stale staging"
        );
        std::fs::remove_dir_all(&out).unwrap();
        checked += 1;
    }
    assert_eq!(checked, 2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_task_failing_on_either_rank_after_the_sinks_are_staged_leaves_no_output() {
    let dir = scratch("sinks-fail");
    let (prog, _, out, args) = plain_run(&dir);
    // Node r computes rows 4r..4r+4 of the hidden layer.
    for (rank, rows) in [(0, "@[0:4, 0:12]"), (1, "@[4:8, 0:12]")] {
        let fault = format!("panic:apply @linear.relu {rows}");
        let o = mpirun_with(Some(60), 2, Btl::SharedMemory, &prog, &args, |c| {
            c.env("TAPC_RT_TEST_FAULT", &fault);
        });
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!matches!(o.status.code(), Some(124 | 137)), "hung:\n{err}");
        assert!(!o.status.success(), "rank {rank}: {err}");
        assert!(err.contains(&format!("rank {rank}: error: ")), "{err}");
        assert_eq!(
            files(&out),
            vec![],
            "rank {rank} failed: nothing in the output directory"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
