//! The fuzzer behind `tests/fuzz.rs` (a CI slice) and `benches/fuzz.rs` (a million inputs and
//! more): every stage, each input deterministic in its seed so any finding reproduces.
//!
//! - front end: mutated examples and token soup through parse, lower, verify, both renderers,
//!   the printer round trip and (small generator-only graphs) the interpreter;
//! - pipelines: a random graph (`common::graphgen`) through a random pass pipeline; the output
//!   must re-parse to the same module, verify, and run in the interpreter to bit-identical sinks;
//! - native: a small random graph compiled by the JIT and run on the runtime (1 and 2 threads)
//!   against the interpreter, within the tolerance of `tests/native.rs`.
//!
//! A finding is a panic or an `Err` describing it; bad input that gets a diagnostic is fine.
#![allow(dead_code)]

use crate::common::graphgen;
use proptest::strategy::{Strategy, ValueTree};
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
use std::collections::HashMap;
use tapc_runtime::{Data, Tensor};

pub use crate::common::Rng;

pub const PIECES: &[&str] = &[
    "%x",
    "@f",
    "[",
    "]",
    "(",
    ")",
    "{",
    "}",
    ",",
    ":",
    "=",
    "\n",
    "..",
    "-",
    "+",
    "*",
    "/",
    "%",
    "0",
    "-1",
    "2.5",
    "sum",
    "max",
    "apply",
    "source",
    "sink",
    "op",
    "graph",
    "extern",
    "index",
    "cost",
    "sequence",
    "->",
    "on",
    "@[0:2]",
    "f32",
    "i64[3]",
    "slice",
    "reshape",
    "[0:1:-1]",
    "axis",
    "99999999999999999999",
    "é",
    "$",
    "\u{0}",
];

pub fn mutate(src: &str, rng: &mut Rng) -> String {
    let mut chars: Vec<char> = src.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(chars.len() + 1);
        match rng.below(4) {
            0 if !chars.is_empty() => {
                let end = (at + rng.below(12)).min(chars.len());
                chars.drain(at.min(end)..end);
            }
            1 => {
                let p = PIECES[rng.below(PIECES.len())];
                chars.splice(at..at, p.chars());
            }
            2 if chars.len() > 1 => {
                let j = rng.below(chars.len());
                let i = at.min(chars.len() - 1);
                chars.swap(i, j);
            }
            _ => {
                let b = chars.len().min(at + rng.below(30));
                let dup: Vec<char> = chars[at.min(b)..b].to_vec();
                chars.splice(at..at, dup);
            }
        }
    }
    chars.into_iter().collect()
}

/// Random tokens joined by spaces.
pub fn token_soup(rng: &mut Rng) -> String {
    let n = rng.below(40);
    (0..n)
        .map(|_| PIECES[rng.below(PIECES.len())])
        .collect::<Vec<_>>()
        .join(" ")
}

/// The example sources that mutation starts from.
pub fn seeds() -> Vec<String> {
    ["mlp.teg", "conv.teg", "softmax.teg", "attention.teg"]
        .iter()
        .map(|n| crate::common::example(n))
        .collect()
}

/// Parse, lower, verify, render, print and re-parse `src`; interpret it when clean and small.
pub fn front_end(src: &str) {
    let (m, facts, diags) = tapc::compile_source(src);
    for d in &diags.0 {
        for l in &d.labels {
            assert!(
                l.span.end as usize <= src.len() + 1,
                "label past the end for input {src:?}"
            );
        }
    }
    let _ = tapc::diag::render_human("fuzz.teg", src, &diags.0, false);
    let _ = tapc::diag::render_json("fuzz.teg", src, &diags.0);
    if !diags.has_errors() {
        let printed = tapc::print::print_module(&m);
        let (m2, _, d2) = tapc::compile_source(&printed);
        assert!(
            !d2.has_errors(),
            "printed form of a clean input has errors: {printed}"
        );
        assert_eq!(m, m2);
        for (g, f) in m.graphs.iter().zip(&facts) {
            // Generators only, and small: sources have no bindings, which must be an error, not a panic.
            if g.values
                .iter()
                .all(|v| v.ty.as_ref().is_some_and(|t| t.elements() < 4096))
            {
                let _ = tapc::interp::run(&m, g, f, &HashMap::new());
            }
        }
    }
}

/// A random valid graph (rich steps and random kernels), determined by `seed`; `max_steps`
/// bounds its size.
pub fn random_graph(seed: u64, max_steps: usize) -> String {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let rng = TestRng::from_seed(RngAlgorithm::ChaCha, &bytes);
    let mut runner = TestRunner::new_with_rng(Config::default(), rng);
    let strategy = (
        proptest::collection::vec(graphgen::rich_step(), 1..max_steps.max(2)),
        graphgen::kernels(),
    );
    let (steps, kernels) = strategy
        .new_tree(&mut runner)
        .expect("graphgen strategies always generate")
        .current();
    graphgen::build_with(&steps, &kernels)
}

const PASSES: &[&str] = &[
    "canonicalize",
    "fuse",
    "shard{parts=2}",
    "shard{parts=3}",
    "shard{parts=2,dim=1}",
    "alias",
];

/// One to four passes, in any order.
pub fn random_pipeline(rng: &mut Rng) -> String {
    (0..1 + rng.below(4))
        .map(|_| PASSES[rng.below(PASSES.len())])
        .collect::<Vec<_>>()
        .join(",")
}

fn sinks(
    m: &tapc::ir::Module,
    facts: &[tapc::verify::GraphFacts],
) -> Result<Vec<Vec<(String, Tensor)>>, String> {
    (0..m.graphs.len())
        .map(|i| {
            tapc::interp::run(m, &m.graphs[i], &facts[i], &HashMap::new())
                .map_err(|d| format!("graph {i} does not run: {}", d.message))
        })
        .collect()
}

fn bits(t: &Tensor) -> Vec<u64> {
    match &t.data {
        Data::F32(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Data::F64(v) => v.iter().map(|x| x.to_bits()).collect(),
        Data::I32(v) => v.iter().map(|&x| x as u64).collect(),
        Data::I64(v) => v.iter().map(|&x| x as u64).collect(),
        Data::Bool(v) => v.iter().map(|&x| x as u64).collect(),
        Data::F16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Data::BF16(v) => v.iter().map(|x| x.to_bits() as u64).collect(),
        Data::I8(v) => v.iter().map(|&x| x as u64).collect(),
        Data::U8(v) => v.iter().map(|&x| x as u64).collect(),
        Data::I16(v) => v.iter().map(|&x| x as u64).collect(),
        Data::U16(v) => v.iter().map(|&x| x as u64).collect(),
        Data::U32(v) => v.iter().map(|&x| x as u64).collect(),
        Data::U64(v) => v.clone(),
    }
}

/// How a pipeline input ended.
pub enum PipelineOutcome {
    /// The output re-parsed, verified and ran to bit-identical sinks.
    Same,
    /// A pass declined with a diagnostic (e.g. E0106: cannot shard as asked).
    Declined,
}

/// Runs `pipeline` on `src` (a valid graph); `Err` is a finding.
pub fn pipeline(src: &str, pipeline: &str) -> Result<PipelineOutcome, String> {
    use tapc::passes::manager::{run_pipeline, RunConfig};
    let (mut m, facts, diags) = tapc::compile_source(src);
    if diags.has_errors() {
        return Err(format!("the generated graph does not verify:\n{src}"));
    }
    let before = sinks(&m, &facts)?;
    if let Err(d) = run_pipeline(
        &mut m,
        facts,
        pipeline,
        &RunConfig::default(),
        &mut String::new(),
    ) {
        if d.code == Some(tapc::diag::codes::PASS_FAILED) {
            return Err(format!("{pipeline}: {} (E0105)\n{src}", d.message));
        }
        return Ok(PipelineOutcome::Declined);
    }
    let printed = tapc::print::print_module(&m);
    let (m2, facts2, d2) = tapc::compile_source(&printed);
    if d2.has_errors() {
        return Err(format!(
            "{pipeline}: the output does not verify:\n{printed}"
        ));
    }
    if m != m2 {
        return Err(format!(
            "{pipeline}: the output re-parses to another module:\n{printed}"
        ));
    }
    let after = sinks(&m2, &facts2)?;
    for (g, (x, y)) in before.iter().zip(&after).enumerate() {
        let same = x.len() == y.len()
            && x.iter().zip(y).all(|((n, t), (n2, u))| {
                n == n2 && t.shape == u.shape && t.dtype() == u.dtype() && bits(t) == bits(u)
            });
        if !same {
            return Err(format!(
                "{pipeline}: graph {g}'s sinks changed\ninput:\n{src}\noutput:\n{printed}"
            ));
        }
    }
    Ok(PipelineOutcome::Same)
}

/// Compiles every graph of `src` (a valid graph) with the JIT and runs it on 1 and 2 threads
/// against the interpreter; returns how many graphs ran, `Err` on a finding.
pub fn native(src: &str) -> Result<usize, String> {
    use tapc_runtime::exec::Options;
    let (m, facts, diags) = tapc::compile_source(src);
    if diags.has_errors() {
        return Err(format!("the generated graph does not verify:\n{src}"));
    }
    let want = sinks(&m, &facts)?;
    for (gi, want) in want.iter().enumerate() {
        let runs = tapc::codegen::with_jit(&m, gi, &facts[gi], &Default::default(), |p| {
            [1, 2].map(|threads| {
                p.run(
                    &HashMap::new(),
                    &Options {
                        threads,
                        record: false,
                    },
                )
                .map(|r| r.0)
            })
        })
        .map_err(|d| format!("native compile failed: {}\n{src}", d.message))?;
        for (threads, got) in [1, 2].into_iter().zip(runs) {
            let got =
                got.map_err(|e| format!("native run failed ({threads} threads): {e}\n{src}"))?;
            let ok = got.len() == want.len()
                && want.iter().zip(&got).all(|((n, t), (n2, u))| {
                    n == n2
                        && t.shape == u.shape
                        && t.dtype() == u.dtype()
                        && crate::common::tolerance::first_mismatch(t, u).is_none()
                });
            if !ok {
                return Err(format!(
                    "native differs from the interpreter ({threads} threads):\n{src}"
                ));
            }
        }
    }
    Ok(m.graphs.len())
}

/// Inputs run per stage.
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub mutated: u64,
    pub soup: u64,
    pub pipelines: u64,
    pub declined: u64,
    pub native: u64,
    /// Graphs the native stage compared with the interpreter (a random input has one).
    pub native_graphs: u64,
}

impl Counts {
    pub fn total(&self) -> u64 {
        self.mutated + self.soup + self.pipelines + self.native
    }
}

/// How many inputs of each stage to run, and from which seed.
#[derive(Debug, Clone, Copy)]
pub struct Plan {
    pub seed: u64,
    pub front_end: u64,
    pub pipelines: u64,
    pub native: u64,
}

/// Runs `f` on one input; a panic becomes a finding of `stage` (with the input's label).
fn guarded(
    stage: &str,
    label: &dyn Fn() -> String,
    finding: &mut dyn FnMut(&str, String),
    f: impl FnOnce(),
) {
    if let Err(p) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
        let msg = p
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        finding(stage, format!("PANIC: {msg}\ninput: {}", label()));
    }
}

/// Runs `plan`; calls `finding` for every finding (a panic, or the `Err` of a stage) and
/// `tick` after each input. The front end alternates mutated examples and token soup.
pub fn run(
    plan: Plan,
    finding: &mut dyn FnMut(&str, String),
    tick: &mut dyn FnMut(&Counts),
) -> Counts {
    let mut c = Counts::default();
    let seeds = seeds();
    let mut rng = Rng(plan.seed | 1);
    for i in 0..plan.front_end {
        let src = if i % 5 < 3 {
            c.mutated += 1;
            mutate(&seeds[(i as usize) % seeds.len()], &mut rng)
        } else {
            c.soup += 1;
            token_soup(&mut rng)
        };
        guarded("front end", &|| format!("{src:?}"), finding, || {
            front_end(&src)
        });
        tick(&c);
    }
    for i in 0..plan.pipelines {
        let seed = plan.seed ^ (i << 20) ^ 0x9e37;
        let p = random_pipeline(&mut rng);
        let label = || format!("random_graph({seed:#x}, 10) with {p}");
        let mut result = None;
        guarded("pipeline", &label, finding, || {
            result = Some(pipeline(&random_graph(seed, 10), &p))
        });
        match result {
            Some(Ok(PipelineOutcome::Declined)) => c.declined += 1,
            Some(Err(e)) => finding("pipeline", e),
            _ => {}
        }
        c.pipelines += 1;
        tick(&c);
    }
    for i in 0..plan.native {
        let seed = plan.seed ^ (i << 20) ^ 0x7f4a;
        let label = || format!("random_graph({seed:#x}, 6)");
        let mut result = None;
        guarded("native", &label, finding, || {
            result = Some(native(&random_graph(seed, 6)))
        });
        match result {
            Some(Ok(graphs)) => c.native_graphs += graphs as u64,
            Some(Err(e)) => finding("native", e),
            None => {}
        }
        c.native += 1;
        tick(&c);
    }
    c
}
