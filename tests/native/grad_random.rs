//! `grad` on random graphs through the JIT: [`GRAPHS`] graphs of `common::grad_graphs` (a fixed
//! seed), lowered by the `grad` pass and run natively; every sink (the loss and each gradient)
//! within docs/teg.md §5.3's f64 bound of the interpreter's. The test counts the graphs, sinks
//! and entries it compared, prints them, and fails when fewer graphs were checked than
//! configured. `tests/passes/grad_random.rs` checks the same generator's gradients against
//! central differences.

use crate::common;
use crate::grad::jit;
use common::grad_cases::lowered;
use common::grad_graphs::{build, inputs, recipe, runner, GradGraph};
use common::tolerance::first_mismatch;
use proptest::test_runner::TestCaseError;
use std::cell::RefCell;
use std::collections::HashSet;

/// How many graphs the test draws.
const GRAPHS: u32 = 12;

/// The sinks and entries compared.
fn check(g: &GradGraph) -> Result<(usize, usize), String> {
    let (m, f) = lowered("random graph", &g.src);
    let ins = inputs(g);
    let want = common::run(&m, &f, 0, &ins);
    let got = jit(&m, &f, &ins);
    if want.len() != got.len() {
        return Err(format!("{} sinks, the JIT wrote {}", want.len(), got.len()));
    }
    let mut entries = 0;
    for (name, w) in &want {
        if let Some(at) = first_mismatch(w, &got[name]) {
            return Err(format!(
                "@{name}[{at}]: the interpreter has {}, the JIT {}",
                common::f64s(w)[at],
                common::f64s(&got[name])[at]
            ));
        }
        entries += w.len();
    }
    Ok((want.len(), entries))
}

#[test]
fn random_graphs_jit_gradients_match_the_interpreter() {
    let counts = RefCell::new((0usize, 0usize, 0usize, HashSet::new()));
    let result = runner(GRAPHS).run(&recipe(), |r| {
        let g = build(&r);
        let (sinks, entries) =
            check(&g).map_err(|e| TestCaseError::fail(format!("{e}\nin the graph:\n{}", g.src)))?;
        let mut c = counts.borrow_mut();
        c.0 += 1;
        c.1 += sinks;
        c.2 += entries;
        c.3.extend(g.constructs.iter().copied());
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    let (graphs, sinks, entries, kinds) = counts.into_inner();
    eprintln!(
        "grad on random graphs, JIT against the interpreter: {graphs} graphs ({} constructs), \
         {sinks} sinks, {entries} entries",
        kinds.len()
    );
    assert_eq!(graphs, GRAPHS as usize, "every graph was checked");
}
