//! The training step of the GPT-2-style block (`tests/common/train_block.rs`, the program
//! issue 19's benchmark runs at GPT-2-small's sizes) at a small size: its loss and the
//! gradients `grad` gives for all 12 weights and biases match `jax.grad`'s
//! (`tests/data/train/gen_block.py`, float64, committed `.npy` files) within the f32 contract
//! (`common::tolerance`), in the interpreter (after the `grad` pass alone, the lowered text re-parsed) and
//! the JIT (after the standard pipeline).

use crate::common;
use common::tolerance::first_mismatch;
use common::train_block::{params, source, Sizes};
use std::collections::HashMap;
use tapc_runtime::Tensor;

const SMALL: Sizes = Sizes {
    t: 8,
    d: 16,
    h: 2,
    f: 64,
};

fn fixture(name: &str) -> Tensor {
    let dir = format!("{}/tests/data/train/block", env!("CARGO_MANIFEST_DIR"));
    tapc_runtime::npy::read(std::path::Path::new(&format!("{dir}/{name}.npy")))
        .unwrap_or_else(|e| panic!("fixture {name}: {e}"))
}

/// The program's inputs: every source and state, read from the fixture directory.
fn inputs(m: &tapc::ir::Module) -> HashMap<String, Tensor> {
    m.graphs[0]
        .sources()
        .map(|(name, _, _)| (name.to_string(), fixture(name)))
        .collect()
}

/// Checks the loss and every gradient sink against JAX's; returns how many were compared.
fn check(runtime: &str, got: &HashMap<String, Tensor>) -> usize {
    let mut names = vec!["loss".to_string()];
    names.extend(params(SMALL).iter().map(|(p, _)| format!("d_{p}")));
    for name in &names {
        let want = fixture(&format!("expected_{name}"));
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("{runtime}: no sink @{name}"));
        assert_eq!(g.shape, want.shape, "{runtime}: @{name}'s shape");
        let at = first_mismatch(&want, g);
        assert!(
            at.is_none(),
            "{runtime}: @{name} differs from JAX's at element {at:?}: {:?} against {:?}",
            at.map(|i| common::f64s(g)[i]),
            at.map(|i| common::f64s(&want)[i])
        );
    }
    names.len()
}

#[test]
fn block_gradients_match_jax_in_the_interpreter_and_the_jit() {
    let src = source(SMALL, true);
    let (m, facts) = common::grad_cases::lowered("train_block", &src);
    let ins = inputs(&m);
    assert_eq!(
        ins.len(),
        1 + 3 * 12 + 1,
        "x, 12 parameters with 2 moments each, t"
    );
    let interp = common::run(&m, &facts, 0, &ins);
    assert_eq!(check("interpreter", &interp), 13);

    let (mut lm, lfacts) = common::compile_ok("train_block", &src);
    let facts = tapc::passes::manager::run_pipeline(
        &mut lm,
        lfacts,
        tapc::passes::manager::DEFAULT_PIPELINE,
        &Default::default(),
        &mut String::new(),
    )
    .unwrap_or_else(|d| panic!("the standard pipeline: {}", d.message))
    .facts;
    let opts = tapc_runtime::exec::Options {
        threads: 2,
        ..Default::default()
    };
    let (sinks, _) = tapc::codegen::run_jit(&lm, 0, &facts[0], &ins, &Default::default(), &opts)
        .unwrap_or_else(|d| panic!("the JIT: {}", d.message));
    let jit: HashMap<String, Tensor> = sinks.into_iter().collect();
    assert_eq!(check("JIT", &jit), 13);
}
