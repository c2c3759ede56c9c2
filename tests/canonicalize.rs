//! `canonicalize` keeps every sunk value bit-identical (the interpreter is the oracle), on the
//! examples and on random graphs full of view chains, and its output re-verifies.

mod common;
use common::graphgen::{build, step};
use proptest::prelude::*;
use std::collections::HashMap;
use tapc::passes::manager::{run_pipeline, RunConfig};
use tapc::syntax::printer::print_module;

/// Sinks before and after `pipeline`, and the printed result.
fn before_after(
    src: &str,
    pipeline: &str,
    inputs: &HashMap<String, tapc_runtime::Tensor>,
) -> (
    Vec<HashMap<String, tapc_runtime::Tensor>>,
    Vec<HashMap<String, tapc_runtime::Tensor>>,
    String,
) {
    let (mut m, facts) = common::compile_ok("input", src);
    let before = (0..m.graphs.len())
        .map(|i| common::run(&m, &facts, i, inputs))
        .collect();
    let mut log = String::new();
    let cx = run_pipeline(&mut m, facts, pipeline, &RunConfig::default(), &mut log)
        .expect("pipeline runs");
    let printed = print_module(&m);
    let (m2, facts2) = common::compile_ok("output", &printed);
    assert_eq!(m, m2, "output re-parses to the same module");
    let after = (0..m.graphs.len())
        .map(|i| common::run(&m, &cx.facts, i, inputs))
        .collect();
    let _ = facts2;
    (before, after, printed)
}

#[test]
fn examples_keep_their_values() {
    for name in ["conv.teg", "softmax.teg", "attention.teg"] {
        let (b, a, _) = before_after(&common::example(name), "canonicalize", &HashMap::new());
        assert_eq!(b, a, "{name}");
    }
}

#[test]
fn chain_examples_keep_their_values() {
    let src = std::fs::read_to_string(format!(
        "{}/tests/filetests/canonicalize/chains.teg",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap();
    let (b, a, _) = before_after(&src, "canonicalize", &HashMap::new());
    assert_eq!(b, a);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]
    #[test]
    fn random_graphs_keep_their_values(steps in proptest::collection::vec(step(), 0..16)) {
        let src = build(&steps);
        let (b, a, printed) = before_after(&src, "canonicalize", &HashMap::new());
        prop_assert_eq!(b, a, "{}", printed);
    }
}
