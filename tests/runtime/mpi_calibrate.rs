//! `tapc calibrate` under `mpirun` (issue 17): a tapc built with `--features mpi`, started as 2
//! ranks (`--oversubscribe`), measures the link between them (ping-pong from 8 B to 16 MiB and
//! `MPI_Allreduce`) and writes its latency and bandwidth into the machine file, which the cost
//! pass reads. The values depend on the host and its load, so only their form is checked:
//! present, positive and finite, one per size measured. A tapc built without MPI started as
//! several processes refuses, writing nothing (every copy would write the same file).

use crate::common;

use common::mpi::{mpi_tapc, mpirun, Btl};
use std::path::Path;
use tapc::passes::cost::machine::Machine;
use toml_edit::{DocumentMut, Item};

/// The numbers of `item` (a number, or an array of numbers).
fn numbers(item: &Item) -> Vec<f64> {
    let one = |v: &toml_edit::Value| v.as_float().or_else(|| v.as_integer().map(|i| i as f64));
    match item.as_value() {
        Some(toml_edit::Value::Array(a)) => a.iter().map(|v| one(v).unwrap()).collect(),
        Some(v) => vec![one(v).unwrap()],
        None => panic!("not a value: {item:?}"),
    }
}

#[test]
fn calibrate_under_mpirun_writes_measured_links_the_cost_pass_reads() {
    let dir = common::scratch("mpi-calibrate");
    let file = dir.join("machine.toml");
    let args: Vec<String> = ["calibrate", "-o", file.to_str().unwrap(), "--threads", "1"]
        .map(String::from)
        .to_vec();
    let o = mpirun(2, Btl::SharedMemory, mpi_tapc(), &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    let text = std::fs::read_to_string(&file).expect("written by rank 0");
    assert!(
        text.contains("Links measured under `mpirun` with 2 ranks"),
        "{text}"
    );
    assert!(!text.contains("not measured"), "{text}");
    let doc: DocumentMut = text.parse().expect("TOML");
    let positive = |key: &str, v: &[f64]| {
        assert!(!v.is_empty(), "{key}: empty in\n{text}");
        for x in v {
            assert!(x.is_finite() && *x > 0.0, "{key} = {x} in\n{text}");
        }
    };
    let (mut checked, mut sizes) = (0, 0);
    for key in ["latency", "bandwidth"] {
        positive(key, &numbers(&doc[key]));
        checked += 1;
    }
    let cal = &doc["calibration"];
    for (bytes, seconds) in [
        ("pingpong_bytes", "pingpong_seconds"),
        ("allreduce_bytes", "allreduce_seconds"),
        ("link_peers", "link_latency"),
        ("link_peers", "link_bandwidth"),
    ] {
        let (b, s) = (numbers(&cal[bytes]), numbers(&cal[seconds]));
        positive(bytes, &b);
        positive(seconds, &s);
        assert_eq!(b.len(), s.len(), "{bytes} and {seconds} in\n{text}");
        sizes += s.len();
        checked += 1;
    }
    assert_eq!(numbers(&cal["link_ranks"]), [2.0]);
    assert_eq!(checked, 6);
    assert!(sizes >= 2 * 9 + 2, "8 B to 16 MiB and one link: {sizes}");
    // The cost pass reads the file: its links are the measured ones.
    let m = Machine::from_toml(&text).expect("the cost pass's parser accepts it");
    let m = m.with_nodes(2);
    assert_eq!(m.latency[0][1], numbers(&doc["latency"])[0]);
    assert_eq!(m.bandwidth[0][1], numbers(&doc["bandwidth"])[0]);
    let mlp = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mlp.teg");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_tapc"))
        .args([
            "opt",
            mlp.to_str().unwrap(),
            "--passes=cost{nodes=2,evals=500}",
        ])
        .args(["--machine", file.to_str().unwrap(), "--emit", "cost"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(String::from_utf8_lossy(&o.stdout).contains("chosen:"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn calibrate_built_without_mpi_refuses_to_run_as_several_processes() {
    let dir = common::scratch("mpi-calibrate-plain");
    let file = dir.join("machine.toml");
    let args: Vec<String> = ["calibrate", "-o", file.to_str().unwrap()]
        .map(String::from)
        .to_vec();
    let tapc = Path::new(env!("CARGO_BIN_EXE_tapc"));
    let o = mpirun(2, Btl::SharedMemory, tapc, &args);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("this tapc was built without MPI"), "{err}");
    assert!(err.contains("--features mpi"), "{err}");
    assert!(!file.exists(), "nothing written");
    let _ = std::fs::remove_dir_all(&dir);
}
