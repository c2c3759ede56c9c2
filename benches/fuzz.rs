//! The fuzzer at scale: `cargo bench --bench fuzz [-- --count N --pipelines P --native K
//! --lsp L --onnx O --seed S]` runs L cases (default 100,000) of the LSP fuzzer (`tests/fuzzing/lsp.rs`:
//! framing, JSON shape, positions, sessions of 100 cases with the server in-process), O mutated
//! ONNX models through `tapc import` (default 20,000; `tests/fuzzing/onnx.rs`), then N
//! inputs (default 1,000,000) through every stage of `tests/fuzzing`: P random pass pipelines
//! (default N/5000), each output re-parsed, verified and run against the interpreter; K random
//! graphs compiled and run natively (default N/25000); the rest mutated examples and token
//! soup through the front end. It prints the count per stage, the time and every finding, and
//! exits 1 if there was any. `--count 0` runs the LSP stage alone.

#[path = "../tests/common/mod.rs"]
mod common;
#[path = "../tests/fuzzing/mod.rs"]
mod fuzzing;
#[path = "../tests/fuzzing/lsp.rs"]
mod lsp_fuzz;
#[path = "../tests/fuzzing/onnx.rs"]
mod onnx_fuzz;

use std::time::{Duration, Instant};

fn arg(args: &[String], name: &str, default: u64) -> u64 {
    match args.iter().position(|a| a == name) {
        Some(i) => {
            let v = args
                .get(i + 1)
                .unwrap_or_else(|| panic!("{name} needs a value"));
            let v = v.replace('_', "");
            v.strip_prefix("0x")
                .map_or_else(|| v.parse(), |h| u64::from_str_radix(h, 16))
                .unwrap_or_else(|_| panic!("{name}: not a number: {v}"))
        }
        None => default,
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let count = arg(&args, "--count", 1_000_000);
    let seed = arg(&args, "--seed", 0xf022_5eed);
    let pipelines = arg(&args, "--pipelines", count / 5000);
    let native = arg(&args, "--native", count / 25000);
    assert!(
        pipelines + native <= count,
        "--pipelines + --native exceed --count"
    );
    let plan = fuzzing::Plan {
        seed,
        front_end: count - pipelines - native,
        pipelines,
        native,
    };
    let mut findings: Vec<(String, String)> = Vec::new();
    let lsp = arg(&args, "--lsp", 100_000);
    lsp_stage(lsp, seed, &mut findings);
    onnx_stage(arg(&args, "--onnx", 20_000), seed, &mut findings);
    println!("fuzz: {plan:?}");
    let start = Instant::now();
    let mut last = Instant::now();
    let c = fuzzing::run(
        plan,
        &mut |stage, e| {
            eprintln!("FINDING [{stage}] {e}");
            findings.push((stage.to_string(), e));
        },
        &mut |c| {
            if last.elapsed() > Duration::from_secs(15) {
                last = Instant::now();
                println!(
                    "  {:>9} inputs, {:.0} s",
                    c.total(),
                    start.elapsed().as_secs_f64()
                );
            }
        },
    );
    let secs = start.elapsed().as_secs_f64();
    println!(
        "front end: {} mutated examples + {} token soups",
        c.mutated, c.soup
    );
    println!(
        "pipelines: {} random graphs through random pass pipelines ({} declined by a pass with a diagnostic)",
        c.pipelines, c.declined
    );
    println!(
        "native:    {} random graphs compiled (JIT) and run on 1 and 2 threads",
        c.native
    );
    println!(
        "total:     {} inputs in {secs:.1} s; {} findings ({} panics)",
        c.total(),
        findings.len(),
        findings.iter().filter(|f| f.1.starts_with("PANIC")).count()
    );
    if !findings.is_empty() {
        std::process::exit(1);
    }
}

/// At least `cases` LSP cases, in sessions of 100 (each also has initialize and shutdown).
fn lsp_stage(cases: u64, seed: u64, findings: &mut Vec<(String, String)>) {
    let start = Instant::now();
    let (mut all, mut sessions, mut failed) = (lsp_fuzz::Outcome::default(), 0u64, 0);
    while all.cases < cases {
        let s = seed.wrapping_add(sessions.wrapping_mul(0x9e37_79b9_7f4a_7c15));
        match lsp_fuzz::run(s, 100) {
            Ok(o) => all += o,
            Err(e) => {
                eprintln!("FINDING [lsp] {e}");
                findings.push(("lsp".into(), e));
                all.cases += 102;
                failed += 1;
            }
        }
        sessions += 1;
    }
    println!(
        "lsp:       {} cases in {sessions} sessions, {:.1} s: {} answers with a result, {} error \
         answers, {} log lines (framing and JSON errors); {failed} findings",
        all.cases,
        start.elapsed().as_secs_f64(),
        all.results,
        all.errors,
        all.logged
    );
}

/// `cases` mutated ONNX models (seeded by tests/data/onnx's cases) through `tapc import`.
fn onnx_stage(cases: u64, seed: u64, findings: &mut Vec<(String, String)>) {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/onnx");
    let mut seeds = Vec::new();
    for sub in ["ops", "models"] {
        for e in std::fs::read_dir(root.join(sub)).expect("tests/data/onnx is readable") {
            let model = e.expect("a directory entry").path().join("model.onnx");
            seeds.push(std::fs::read(&model).expect("a case has model.onnx"));
        }
    }
    let dir = std::env::temp_dir().join(format!("tapc-fuzz-onnx-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let start = Instant::now();
    let r = onnx_fuzz::run(&seeds, cases, seed, &dir);
    let _ = std::fs::remove_dir_all(&dir);
    println!(
        "onnx:      {} mutated models imported ({} imported, {} refused) in {:.1} s; {} findings",
        r.cases,
        r.imported,
        r.refused,
        start.elapsed().as_secs_f64(),
        r.findings.len()
    );
    findings.extend(r.findings.into_iter().map(|f| ("onnx".to_string(), f)));
}
