//! Stateful steps under `mpirun` (docs/mpi.md, *Not done*): an `--mpi` program refuses
//! `--steps` (and `--log-every`) with one message per rank before any input is read and
//! writes nothing, since its state does not stay on its ranks between steps yet; without them
//! it runs its one step like the single-process program (the loss numpy computes for step 1).

use crate::common;
use crate::mpi::{compile, root, scratch};
use common::mpi::{mpirun, Btl};

#[test]
fn an_mpi_program_refuses_steps_and_runs_one_step() {
    let file = root().join("examples/sgd_momentum.teg");
    let dir = scratch("steps");
    let prog = dir.join("sgd");
    compile(
        &file,
        "train",
        "canonicalize,shard{parts=2,nodes=2}",
        &prog,
        true,
    );
    let out = dir.join("out");
    let data = root().join("tests/data/train");
    let args = |extra: &[&str]| -> Vec<String> {
        let mut a: Vec<String> = ["--input-dir", data.to_str().unwrap()]
            .iter()
            .chain(&["--out-dir", out.to_str().unwrap(), "--threads", "1"])
            .map(|s| s.to_string())
            .collect();
        a.extend(extra.iter().map(|s| s.to_string()));
        a
    };
    for extra in [&["--steps", "3"][..], &["--log-every", "1"]] {
        let o = mpirun(2, Btl::SharedMemory, &prog, &args(extra));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{extra:?}: {err}");
        let reports = (err.lines())
            .filter(|l| {
                l.starts_with("sgd: rank ")
                    && l.contains("not supported by distributed (`--mpi`) programs")
            })
            .count();
        assert!(reports >= 1, "{extra:?}: {err}");
        assert!(!out.exists(), "{extra:?}: no output is written");
    }
    let o = mpirun(2, Btl::SharedMemory, &prog, &args(&[]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let loss = tapc_runtime::npy::read(&out.join("loss.npy")).unwrap();
    let want = tapc_runtime::npy::read(&data.join("expected_sgd_loss.npy")).unwrap();
    let (tapc_runtime::Data::F64(l), tapc_runtime::Data::F64(w)) = (&loss.data, &want.data) else {
        panic!("f64 losses");
    };
    assert!(
        (l[0] - w[0]).abs() <= 1e-12 * w[0],
        "{} against {}",
        l[0],
        w[0]
    );
    let _ = std::fs::remove_dir_all(&dir);
}
