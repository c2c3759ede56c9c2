//! The training step of the GPT-2-style block (`tests/common/train_block.rs`, the program
//! issue 19's benchmark runs at GPT-2-small's sizes) at a small size: its loss and the
//! gradients `grad` gives for all 12 weights and biases match `jax.grad`'s
//! (`tests/data/train/gen_block.py`, float64, committed `.npy` files) within the f32 contract
//! (`common::tolerance`), in the interpreter (after the `grad` pass alone, the lowered text re-parsed) and
//! the JIT (after the standard pipeline).

use crate::common;
use common::jax_fixtures;
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
    jax_fixtures::read("block", name)
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
    jax_fixtures::check("block", runtime, got, &names)
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

    let jit = jax_fixtures::jit("train_block", &src, &ins);
    assert_eq!(check("JIT", &jit), 13);
}
