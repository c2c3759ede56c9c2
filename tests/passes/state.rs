//! Every pass keeps a graph's state valid: on the two training examples (docs/teg.md §8),
//! each pipeline's output re-parses to the same module, keeps every `state` and `update`
//! (an update is an observed use, like a sink), and computes the same sinks and updates as the
//! input, bit for bit, over three steps of the interpreter (the oracle).

use crate::common;
use common::{after_pipeline, before_after, compile_ok};
use std::collections::HashMap;
use tapc::ir::Module;
use tapc_runtime::steps::{run_named, LogTo, StepLog, Steps};
use tapc_runtime::Tensor;

const PIPELINES: &[&str] = &[
    "canonicalize",
    "alias",
    "shard",
    "fuse",
    "canonicalize,shard,fuse",
    "cost",
];

fn inputs() -> HashMap<String, Tensor> {
    let dir = format!("{}/tests/data/train", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "npy"))
        .filter(|p| {
            !p.file_stem()
                .unwrap()
                .to_string_lossy()
                .starts_with("expected")
        })
        .map(|p| {
            let name = p.file_stem().unwrap().to_string_lossy().into_owned();
            (name, tapc_runtime::npy::read(&p).unwrap())
        })
        .collect()
}

/// The sinks (updates included) after `steps` steps of graph 0 in the interpreter.
fn steps(m: &Module, facts: &[tapc::verify::GraphFacts], n: u64) -> Vec<(String, Tensor)> {
    let g = &m.graphs[0];
    let states: Vec<String> = g.states().map(|(s, ..)| s.to_string()).collect();
    let mut ins = inputs();
    let s = Steps {
        count: n,
        log_every: None,
    };
    run_named(
        &s,
        &mut ins,
        &states,
        |i| tapc::interp::run(m, g, &facts[0], i),
        &mut StepLog::new(&s, LogTo::Kept),
    )
    .unwrap()
}

/// `(states, updates)` of graph 0, by name, sorted.
fn state_names(m: &Module) -> (Vec<String>, Vec<String>) {
    let g = &m.graphs[0];
    let mut s: Vec<String> = g.states().map(|(n, ..)| n.to_string()).collect();
    let mut u: Vec<String> = g.updates().map(|(n, _)| n.to_string()).collect();
    s.sort();
    u.sort();
    (s, u)
}

#[test]
fn every_pass_keeps_state_and_updates() {
    let mut checked = 0;
    for name in ["sgd_momentum.teg", "adamw.teg"] {
        let src = common::example(name);
        let (m0, _) = compile_ok(name, &src);
        let (states, updates) = state_names(&m0);
        assert_eq!(states, updates, "{name}");
        assert!(states.len() >= 4, "{name}: {states:?}");
        // The oracle runs the graph as `tapc run` does: `grad` lowered first.
        let (ml, fl) = common::grad_cases::lowered(name, &src);
        let want = steps(&ml, &fl, 3);
        for pipeline in PIPELINES {
            let (b, a, printed) = before_after(&src, pipeline, &inputs());
            assert_eq!(b, a, "{name} {pipeline}:\n{printed}");
            let (m, facts) = after_pipeline(name, &src, pipeline);
            assert_eq!(
                state_names(&m),
                (states.clone(), updates.clone()),
                "{name} {pipeline}"
            );
            assert_eq!(steps(&m, &facts, 3), want, "{name} {pipeline}:\n{printed}");
            checked += 1;
        }
    }
    assert_eq!(checked, 2 * PIPELINES.len());
}
