//! What the cost model predicts on a real cluster (issue 17's benchmark): the plans it chooses
//! for 1 to 64 nodes of `benches/mpi/cluster.toml` (a two-socket AVX-512 node on HDR
//! InfiniBand, from data sheets), with the predicted time, speed-up over one node, bytes moved,
//! the largest per-node peak of the runtime's plan, and how long the search took. Nothing
//! runs on such a cluster here: these are the model's numbers, which on this machine are
//! within the margins docs/benchmarks.md quotes.
//!
//! `cargo bench --bench mpi -- --cluster`.

use std::path::Path;
use std::time::Instant;

/// The programs: a name and the TEG text.
fn programs() -> Vec<(&'static str, String)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let transformer = std::fs::read_to_string(root.join("examples/transformer.teg")).unwrap();
    vec![
        (
            "MLP 16384×4096→16384→4096",
            crate::mpi::mlp(16384, 4096, 16384, 4096),
        ),
        (
            "heat 16384², 8 steps",
            crate::mpi::heat(16384, 16384, 8, true),
        ),
        ("examples/transformer.teg", transformer),
    ]
}

/// A number after `key` in the `chosen:` plan's summary line of a cost report.
pub(super) fn chosen(report: &str, key: &str) -> f64 {
    let line = (report.lines())
        .skip_while(|l| !l.trim_start().starts_with("chosen:"))
        .nth(1)
        .expect("a chosen plan");
    super::after(line, key).unwrap_or_else(|| panic!("no `{key}` in {line}"))
}

/// The largest per-node peak of the runtime's plan in a cost report.
fn peak(report: &str) -> f64 {
    let key = "per-node peak memory (the runtime's plan): ";
    (report.lines())
        .find_map(|l| super::after(l, key))
        .expect("per-node peaks")
}

pub fn main(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let machine = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/mpi/cluster.toml");
    println!(
        "{:<28} {:>5} {:>12} {:>9} {:>14} {:>12} {:>9}",
        "program", "nodes", "predicted s", "speed-up", "bytes moved", "peak MiB", "search s"
    );
    for (name, teg) in programs() {
        let file = dir.join("program.teg");
        std::fs::write(&file, teg).unwrap();
        let mut one = None;
        for nodes in [1, 2, 4, 16, 64] {
            let passes = format!(
                "canonicalize,cost{{nodes={nodes},machine={}}}",
                machine.display()
            );
            let start = Instant::now();
            let report = super::tapc(&[
                "opt",
                file.to_str().unwrap(),
                "--passes",
                &passes,
                "--emit",
                "cost",
            ]);
            let took = start.elapsed().as_secs_f64();
            let time = chosen(&report, "time ");
            let one = *one.get_or_insert(time);
            println!(
                "{name:<28} {nodes:>5} {time:>12.3e} {:>9.2} {:>14} {:>12.1} {took:>9.2}",
                one / time,
                chosen(&report, "bytes moved "),
                peak(&report) / (1u64 << 20) as f64,
            );
        }
    }
    let _ = std::fs::remove_dir_all(dir);
}
