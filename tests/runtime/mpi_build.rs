//! `tapc` built with `--features mpi` (issue 17): its one runtime library contains the MPI
//! runtime, so it must compile, link and run both an ordinary program and an `--mpi` program
//! (without `TAPC_MPI_RUNTIME_LIB`), each giving the sinks of the default build's program bit for
//! bit. The featured build shares `target/mpi` with the MPI runtime the other MPI tests use.

use crate::common;

use common::mpi::{compile_with as compile, mpi_tapc, mpirun, Btl};
use std::path::Path;
use std::process::{Command, Output};

fn ok(what: &str, o: &Output) {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

/// Runs `prog` (under `mpirun -np ranks` when given) with `args` and `--out-dir DIR/out`; returns
/// the bytes of `sink.npy`.
fn run(prog: &Path, ranks: Option<usize>, args: &[String], dir: &Path, sink: &str) -> Vec<u8> {
    let out = dir.join("out");
    let mut all = args.to_vec();
    all.extend(["--out-dir".into(), out.display().to_string()]);
    let o = match ranks {
        Some(np) => mpirun(np, Btl::SharedMemory, prog, &all),
        None => Command::new(prog).args(&all).output().unwrap(),
    };
    ok(&format!("{}", prog.display()), &o);
    std::fs::read(out.join(format!("{sink}.npy"))).unwrap()
}

/// One example through the default tapc (plain) and the featured one (plain and `--mpi`).
fn same_sinks(example: &str, passes: &str, args: &[String], sink: &str) {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("examples")
        .join(example);
    let dir = common::scratch(&format!("mpi-build-{example}"));
    let progs = ["default", "featured", "featured-mpi"].map(|n| dir.join(n));
    let tapc = Path::new(env!("CARGO_BIN_EXE_tapc"));
    compile(tapc, &file, passes, &progs[0], false);
    compile(mpi_tapc(), &file, passes, &progs[1], false);
    compile(mpi_tapc(), &file, passes, &progs[2], true);
    let want = run(&progs[0], None, args, &dir.join("a"), sink);
    assert_eq!(
        run(&progs[1], None, args, &dir.join("b"), sink),
        want,
        "{example}: plain"
    );
    let got = run(&progs[2], Some(2), args, &dir.join("c"), sink);
    assert_eq!(got, want, "{example}: --mpi on 2 ranks");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn tapc_built_with_mpi_compiles_ordinary_and_mpi_programs_that_agree_with_the_default_build() {
    let mlp = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/mlp");
    let shard = "canonicalize,shard{parts=2},fuse,canonicalize";
    same_sinks("tour.teg", shard, &[], "probs");
    let cost = "canonicalize,cost{nodes=2},fuse,canonicalize";
    let inputs = ["--input-dir".into(), mlp.display().to_string()];
    same_sinks("mlp.teg", cost, &inputs, "logits");
}
