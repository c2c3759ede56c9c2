//! Tests against committed `jax.grad` fixtures (`tests/data/train/<dir>/`, from the generator
//! scripts beside them): read a fixture, compare sinks with `expected_<name>.npy` within the
//! f32 contract, and run a source through the standard pipeline and the JIT.

use super::tolerance::first_mismatch;
use std::collections::HashMap;
use tapc_runtime::Tensor;

/// `tests/data/train/<dir>/<name>.npy`.
pub fn read(dir: &str, name: &str) -> Tensor {
    let path = format!(
        "{}/tests/data/train/{dir}/{name}.npy",
        env!("CARGO_MANIFEST_DIR")
    );
    tapc_runtime::npy::read(std::path::Path::new(&path))
        .unwrap_or_else(|e| panic!("fixture {dir}/{name}: {e}"))
}

/// Checks each sink of `names` in `got` against `expected_<name>.npy` of `dir`; returns how
/// many were compared.
pub fn check(dir: &str, runtime: &str, got: &HashMap<String, Tensor>, names: &[String]) -> usize {
    for name in names {
        let want = read(dir, &format!("expected_{name}"));
        let g = got
            .get(name)
            .unwrap_or_else(|| panic!("{runtime}: no sink @{name}"));
        assert_eq!(g.shape, want.shape, "{runtime}: @{name}'s shape");
        let at = first_mismatch(&want, g);
        assert!(
            at.is_none(),
            "{runtime}: @{name} differs from JAX's at element {at:?}: {:?} against {:?}",
            at.map(|i| super::f64s(g)[i]),
            at.map(|i| super::f64s(&want)[i])
        );
    }
    names.len()
}

/// The sinks of `src`'s first graph after the standard pipeline, run by the JIT at 2 threads.
pub fn jit(name: &str, src: &str, ins: &HashMap<String, Tensor>) -> HashMap<String, Tensor> {
    let (mut lm, lfacts) = super::compile_ok(name, src);
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
    let (sinks, _) = tapc::codegen::run_jit(&lm, 0, &facts[0], ins, &Default::default(), &opts)
        .unwrap_or_else(|d| panic!("the JIT: {}", d.message));
    sinks.into_iter().collect()
}
